//! Connect's built-in predicates: `HasHeaderKey`, `RecordIsTombstone`, `TopicNameMatches`.

use regex::Regex;
use sluice_api::{ConfigDef, ConfigKey, ConfigType, ConnectError, ConnectResult, Importance, Props, Validator};

use super::{Predicate, TransformRecord};

pub(crate) const HAS_HEADER_KEY_DOC: &str = "A predicate which is true for records with at least one header with the configured name.";
pub(crate) const RECORD_IS_TOMBSTONE_DOC: &str = "A predicate which is true for records which are tombstones (i.e. have null value).";
pub(crate) const TOPIC_NAME_MATCHES_DOC: &str =
    "A predicate which is true for records with a topic name that matches the configured regular expression.";

pub(crate) fn has_header_key_config_def() -> ConfigDef {
    ConfigDef::new()
        .define(ConfigKey::new("name", ConfigType::String, Importance::Medium, "The header name.").validator(Validator::NonEmpty))
}

pub(crate) fn record_is_tombstone_config_def() -> ConfigDef {
    ConfigDef::new()
}

pub(crate) fn topic_name_matches_config_def() -> ConfigDef {
    ConfigDef::new().define(
        ConfigKey::new(
            "pattern",
            ConfigType::String,
            Importance::Medium,
            "A Java regular expression for matching against the name of a record's topic.",
        )
        .validator(Validator::NonEmpty),
    )
}

struct HasHeaderKey {
    name: String,
}

impl Predicate for HasHeaderKey {
    fn test(&self, record: &TransformRecord) -> bool {
        record.headers.iter().any(|h| h.key == self.name)
    }
}

struct RecordIsTombstone;

impl Predicate for RecordIsTombstone {
    fn test(&self, record: &TransformRecord) -> bool {
        record.value.is_null()
    }
}

struct TopicNameMatches {
    /// Anchored at both ends: Java's `Matcher.matches` needs the whole name to match.
    pattern: Regex,
}

impl Predicate for TopicNameMatches {
    fn test(&self, record: &TransformRecord) -> bool {
        self.pattern.is_match(&record.topic)
    }
}

pub(crate) fn create_has_header_key(props: &Props) -> ConnectResult<Box<dyn Predicate>> {
    let config = has_header_key_config_def().parse(props)?;
    Ok(Box::new(HasHeaderKey { name: config.string("name").unwrap_or_default() }))
}

pub(crate) fn create_record_is_tombstone(_props: &Props) -> ConnectResult<Box<dyn Predicate>> {
    Ok(Box::new(RecordIsTombstone))
}

pub(crate) fn create_topic_name_matches(props: &Props) -> ConnectResult<Box<dyn Predicate>> {
    let config = topic_name_matches_config_def().parse(props)?;
    let raw = config.string("pattern").unwrap_or_default();
    Ok(Box::new(TopicNameMatches { pattern: full_match_regex(&raw, "pattern")? }))
}

/// A regex that must match a whole string, as Java's `Matcher.matches()`; `key` names the
/// configuration key in the error.
pub(crate) fn full_match_regex(raw: &str, key: &str) -> ConnectResult<Regex> {
    Regex::new(&format!("^(?:{raw})$")).map_err(|e| ConnectError::config(key, format!("'{raw}' is not a valid regular expression: {e}")))
}
