//! Topic creation for source connectors (Connect's KIP-158): the topics a source task
//! writes to are created, when missing, with the settings of the first matching
//! `topic.creation` group.
//!
//! ```text
//!  worker: topic.creation.enable (default true)
//!  connector:
//!    topic.creation.groups                = a,b            order matters
//!    topic.creation.default.replication.factor / .partitions  required once any
//!                                           topic.creation.* key is set (-1: the log's default)
//!    topic.creation.<g>.include / .exclude  regex lists (whole-name match; exclude wins)
//!    topic.creation.<g>.replication.factor / .partitions      default: the default group's
//!    topic.creation.<g>.<topic config>      e.g. cleanup.policy, compression.type, retention.ms
//!
//!  source task, per record: topic seen before? ── yes ──▶ produce
//!                               │ no
//!                               ▼
//!                first group (in topic.creation.groups order) whose include matches and
//!                whose exclude does not, else the default group ──▶ Log::create_topic
//!                (nothing happens to a topic that exists) ──▶ remembered ──▶ produce
//! ```
//!
//! Without any `topic.creation.*` key, or with `topic.creation.enable=false` on the worker,
//! nothing is created here: a missing topic is created as before, with the log's defaults
//! (a broker's auto-creation, the embedded log's default partition count), and the keys are
//! not looked at (as in Connect).
//!
//! Validation is Connect's, except that Connect accepts a bad `topic.creation.*` value at
//! `POST`/`PUT` and fails the connector when it starts; here it is a config error on the key
//! (400, and in `config/validate`). Also refused here where Connect ignores them:
//! `topic.creation.default.include`/`.exclude` (the default group takes every topic no other
//! group takes) and keys of a group not listed in `topic.creation.groups`.

use std::collections::{BTreeMap, HashSet};

use regex::Regex;
use sluice_api::{ConnectError, ConnectResult, Props};

use crate::log::{Log, NewTopic};

/// Worker key: whether source connectors may create their topics (default true).
pub const ENABLE: &str = "topic.creation.enable";
pub const PREFIX: &str = "topic.creation.";
pub const GROUPS: &str = "topic.creation.groups";
pub const DEFAULT_GROUP: &str = "default";
const INCLUDE: &str = "include";
const EXCLUDE: &str = "exclude";
const REPLICATION_FACTOR: &str = "replication.factor";
const PARTITIONS: &str = "partitions";
/// The default group's include list: every topic.
const DEFAULT_INCLUDE: &str = ".*";

/// One group's settings.
#[derive(Debug, Clone)]
pub struct TopicCreationGroup {
    pub name: String,
    /// `None`: matches no topic (a group without `include`).
    include: Option<Regex>,
    exclude: Option<Regex>,
    /// `-1`: the log's default.
    pub partitions: i32,
    /// `-1`: the log's default.
    pub replication_factor: i32,
    /// Every other `topic.creation.<group>.<key>`, passed as topic configs.
    pub configs: BTreeMap<String, String>,
}

impl TopicCreationGroup {
    /// Whether this group takes `topic`: the whole name matches an include pattern and no
    /// exclude pattern.
    pub fn matches(&self, topic: &str) -> bool {
        self.include.as_ref().is_some_and(|r| r.is_match(topic)) && !self.exclude.as_ref().is_some_and(|r| r.is_match(topic))
    }

    pub fn new_topic(&self, topic: &str) -> NewTopic {
        NewTopic {
            name: topic.to_owned(),
            partitions: self.partitions,
            replication_factor: self.replication_factor,
            configs: self.configs.clone(),
        }
    }
}

/// A connector's groups: the listed ones in order, then the default group.
#[derive(Debug, Clone)]
pub struct TopicCreation {
    groups: Vec<TopicCreationGroup>,
    default: TopicCreationGroup,
}

/// A config problem: the key and Connect's wording of what is wrong with it.
pub type KeyError = (String, String);

impl TopicCreation {
    /// The connector's groups, `None` when it sets no `topic.creation.*` key; every problem
    /// by key otherwise.
    pub fn from_config(props: &Props) -> Result<Option<Self>, Vec<KeyError>> {
        if !props.keys().any(|k| k.starts_with(PREFIX)) {
            return Ok(None);
        }
        let mut errors = Vec::new();
        let aliases = list(props.get(GROUPS).map(String::as_str).unwrap_or(""));
        let mut seen = HashSet::new();
        for alias in &aliases {
            if alias.is_empty() {
                errors.push(invalid(GROUPS, &props[GROUPS], "Empty alias provided."));
            } else if !seen.insert(alias.as_str()) {
                errors.push(invalid(GROUPS, &props[GROUPS], "Duplicate alias provided."));
            }
        }
        if aliases.iter().any(|a| a == DEFAULT_GROUP) {
            tracing::warn!("'{DEFAULT_GROUP}' topic creation group always exists and does not need to be listed explicitly");
        }
        let mut listed: Vec<&str> = Vec::new();
        for alias in aliases.iter().map(String::as_str) {
            if !alias.is_empty() && alias != DEFAULT_GROUP && !listed.contains(&alias) {
                listed.push(alias);
            }
        }

        // Every key belongs to the default group or a listed one (longest alias first, as
        // an alias may contain dots).
        let mut by_length: Vec<&str> = listed.iter().copied().chain([DEFAULT_GROUP]).collect();
        by_length.sort_by_key(|a| std::cmp::Reverse(a.len()));
        let mut keys: BTreeMap<&str, BTreeMap<&str, &str>> = BTreeMap::new();
        for (key, value) in props.iter().filter(|(k, _)| k.starts_with(PREFIX)) {
            if key == GROUPS {
                continue;
            }
            let rest = &key[PREFIX.len()..];
            let owner = by_length.iter().find(|a| rest.len() > a.len() + 1 && rest.starts_with(**a) && rest.as_bytes()[a.len()] == b'.');
            match owner {
                Some(alias) => {
                    keys.entry(alias).or_default().insert(&rest[alias.len() + 1..], value.as_str());
                }
                None => errors.push((
                    key.clone(),
                    format!(
                        "Unknown configuration key '{key}': its topic creation group is not listed in {GROUPS} (listed: {})",
                        if listed.is_empty() { "none".to_owned() } else { listed.join(", ") }
                    ),
                )),
            }
        }

        let empty = BTreeMap::new();
        let default_keys = keys.get(DEFAULT_GROUP).unwrap_or(&empty);
        for k in [INCLUDE, EXCLUDE] {
            if default_keys.contains_key(k) {
                // Connect ignores these too: a config that carries them works unchanged.
                tracing::warn!(
                    "{PREFIX}{DEFAULT_GROUP}.{k} is ignored: the default group takes every topic no other group takes; \
                     list a group in {GROUPS} with its own {k} instead"
                );
            }
        }
        let required = |k: &str, errors: &mut Vec<KeyError>| -> i32 {
            let key = format!("{PREFIX}{DEFAULT_GROUP}.{k}");
            match default_keys.get(k) {
                Some(v) => count(&key, v, errors),
                None => {
                    errors.push((key.clone(), format!("Missing required configuration \"{key}\" which has no default value.")));
                    -1
                }
            }
        };
        let default_replication = required(REPLICATION_FACTOR, &mut errors);
        let default_partitions = required(PARTITIONS, &mut errors);
        let default = group(DEFAULT_GROUP, default_keys, default_replication, default_partitions, &mut errors);
        let groups = listed
            .iter()
            .map(|alias| group(alias, keys.get(alias).unwrap_or(&empty), default_replication, default_partitions, &mut errors))
            .collect();
        if errors.is_empty() {
            Ok(Some(Self { groups, default }))
        } else {
            Err(errors)
        }
    }

    /// The group that creates `topic`: the first listed one that matches, else the default.
    pub fn group_for(&self, topic: &str) -> &TopicCreationGroup {
        self.groups.iter().find(|g| g.matches(topic)).unwrap_or(&self.default)
    }
}

/// Problems with a source connector's `topic.creation.*` keys, by key (none when it has
/// none of them).
pub fn validate(props: &Props) -> Vec<KeyError> {
    TopicCreation::from_config(props).err().unwrap_or_default()
}

/// One group from its keys (the part after `topic.creation.<alias>.`).
fn group(
    alias: &str,
    keys: &BTreeMap<&str, &str>,
    default_replication: i32,
    default_partitions: i32,
    errors: &mut Vec<KeyError>,
) -> TopicCreationGroup {
    let key = |k: &str| format!("{PREFIX}{alias}.{k}");
    let is_default = alias == DEFAULT_GROUP;
    let patterns = |k: &str, errors: &mut Vec<KeyError>| -> Option<Regex> {
        let given = if is_default { (k == INCLUDE).then_some(DEFAULT_INCLUDE) } else { keys.get(k).copied() };
        let items = list(given.unwrap_or(""));
        if items.is_empty() {
            return None;
        }
        // Java's Pattern.matches: the whole topic name, any of the patterns.
        match Regex::new(&format!("^(?:{})$", items.join("|"))) {
            Ok(r) => Some(r),
            Err(e) => {
                errors.push(invalid(&key(k), given.unwrap_or(""), &e.to_string()));
                None
            }
        }
    };
    let include = patterns(INCLUDE, errors);
    let exclude = patterns(EXCLUDE, errors);
    let replication_factor = match keys.get(REPLICATION_FACTOR) {
        Some(v) if !is_default => count(&key(REPLICATION_FACTOR), v, errors),
        _ => default_replication,
    };
    let partitions = match keys.get(PARTITIONS) {
        Some(v) if !is_default => count(&key(PARTITIONS), v, errors),
        _ => default_partitions,
    };
    let mut configs = BTreeMap::new();
    for (k, v) in keys {
        if [INCLUDE, EXCLUDE, REPLICATION_FACTOR, PARTITIONS].contains(k) {
            continue;
        }
        if let Err(why) = topic_config(k, v) {
            errors.push(invalid(&key(k), v, &why));
        }
        configs.insert((*k).to_owned(), (*v).to_owned());
    }
    TopicCreationGroup { name: alias.to_owned(), include, exclude, partitions, replication_factor, configs }
}

/// A partition count or replication factor: -1 or at least 1.
fn count(key: &str, value: &str, errors: &mut Vec<KeyError>) -> i32 {
    match value.trim().parse::<i32>() {
        Ok(n) if n == -1 || n >= 1 => {
            if key.ends_with(REPLICATION_FACTOR) && n > i32::from(i16::MAX) {
                errors.push(invalid(key, value, "Value must be -1 or at least 1 and at most 32767"));
            }
            n
        }
        Ok(_) => {
            errors.push(invalid(key, value, "Value must be -1 or at least 1"));
            -1
        }
        Err(_) => {
            errors.push(invalid(key, value, "Not a number of type INT"));
            -1
        }
    }
}

/// Checks the topic configs whose values every log understands; the broker checks the rest
/// when it creates the topic.
fn topic_config(key: &str, value: &str) -> Result<(), String> {
    match key {
        "cleanup.policy" => {
            let ok = !value.trim().is_empty()
                && value.split(',').map(|p| p.trim().to_ascii_lowercase()).all(|p| p == "delete" || p == "compact");
            if ok {
                Ok(())
            } else {
                Err("String must be one or more of: delete, compact".to_owned())
            }
        }
        "retention.ms" | "retention.bytes" => match value.trim().parse::<i64>() {
            Ok(n) if n >= -1 => Ok(()),
            Ok(_) => Err("Value must be at least -1".to_owned()),
            Err(_) => Err("Not a number of type LONG".to_owned()),
        },
        _ => Ok(()),
    }
}

/// Connect's LIST parsing: comma separated, trimmed; blank is the empty list.
fn list(value: &str) -> Vec<String> {
    let value = value.trim();
    if value.is_empty() {
        return Vec::new();
    }
    value.split(',').map(|s| s.trim().to_owned()).collect()
}

fn invalid(key: &str, value: &str, why: &str) -> KeyError {
    (key.to_owned(), format!("Invalid value {value} for configuration {key}: {why}"))
}

/// A source task's topic creation: each topic is looked at once per task.
pub struct TopicCreator {
    creation: Box<TopicCreation>,
    connector: String,
    /// Topics known to exist (created here or found).
    known: HashSet<String>,
}

impl TopicCreator {
    /// `None` when topic creation is off on the worker or the connector sets no
    /// `topic.creation.*` key. A config that does not parse (it was validated when stored,
    /// so only an older stored config) is a config error on its first key.
    pub fn from_config(worker_enabled: bool, connector: &str, props: &Props) -> ConnectResult<Option<Self>> {
        if !worker_enabled {
            return Ok(None);
        }
        match TopicCreation::from_config(props) {
            Ok(creation) => {
                Ok(creation.map(|creation| Self { creation: Box::new(creation), connector: connector.to_owned(), known: HashSet::new() }))
            }
            Err(mut errors) => {
                let (key, message) = errors.swap_remove(0);
                Err(ConnectError::config(key, message))
            }
        }
    }

    /// Creates `topic` with its group's settings unless it exists. A topic the log refuses
    /// to create (a replication factor the cluster cannot meet, an invalid topic config)
    /// fails the task with the topic and the group named; an unreachable log is retriable.
    pub async fn ensure(&mut self, log: &dyn Log, topic: &str) -> ConnectResult<()> {
        if self.known.contains(topic) {
            return Ok(());
        }
        let group = self.creation.group_for(topic);
        let request = group.new_topic(topic);
        match log.create_topic(&request).await {
            Ok(created) => {
                if created {
                    tracing::info!(
                        connector = %self.connector,
                        topic,
                        group = %group.name,
                        partitions = request.partitions,
                        replication_factor = request.replication_factor,
                        configs = ?request.configs,
                        "created topic using topic creation group"
                    );
                }
                self.known.insert(topic.to_owned());
                Ok(())
            }
            Err(e) => {
                let message = format!(
                    "Task failed to create new topic {topic} with topic creation group {} (partitions {}, replication factor {}); \
                     fix the group's settings or create the topic, then restart the task",
                    group.name, request.partitions, request.replication_factor
                );
                let err = ConnectError::from(e);
                Err(if err.is_retriable() { ConnectError::retriable_from(message, err) } else { ConnectError::fatal_from(message, err) })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn props(pairs: &[(&str, &str)]) -> Props {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    }

    fn with_default(pairs: &[(&str, &str)]) -> Props {
        let mut p = props(&[("topic.creation.default.replication.factor", "1"), ("topic.creation.default.partitions", "3")]);
        p.extend(props(pairs));
        p
    }

    fn error_keys(p: &Props) -> Vec<String> {
        validate(p).into_iter().map(|(k, _)| k).collect()
    }

    #[test]
    fn no_topic_creation_keys_means_no_topic_creation() {
        assert!(TopicCreation::from_config(&props(&[("name", "c"), ("topic", "t")])).unwrap().is_none());
        assert!(validate(&props(&[("name", "c")])).is_empty());
        assert!(TopicCreator::from_config(false, "c", &with_default(&[])).unwrap().is_none(), "disabled on the worker");
    }

    #[test]
    fn the_default_group_needs_both_settings_once_any_key_is_set() {
        let errors = validate(&props(&[("topic.creation.groups", "")]));
        let keys: Vec<&str> = errors.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["topic.creation.default.replication.factor", "topic.creation.default.partitions"]);
        assert_eq!(errors[0].1, "Missing required configuration \"topic.creation.default.replication.factor\" which has no default value.");
        let only_partitions = props(&[("topic.creation.default.partitions", "2")]);
        assert_eq!(error_keys(&only_partitions), ["topic.creation.default.replication.factor"]);
        assert!(validate(&with_default(&[])).is_empty());
    }

    #[test]
    fn counts_are_minus_one_or_positive() {
        for bad in ["0", "-2", "-100", "x", ""] {
            let errors = validate(&with_default(&[("topic.creation.default.partitions", bad)]));
            assert_eq!(errors.len(), 1, "{bad}: {errors:?}");
            assert_eq!(errors[0].0, "topic.creation.default.partitions");
            assert!(errors[0].1.starts_with(&format!("Invalid value {bad} for configuration topic.creation.default.partitions")));
            let errors = validate(&with_default(&[("topic.creation.default.replication.factor", bad)]));
            assert_eq!(errors.len(), 1, "{bad}: {errors:?}");
            assert_eq!(errors[0].0, "topic.creation.default.replication.factor");
        }
        let zero = validate(&with_default(&[("topic.creation.default.partitions", "0")]));
        assert_eq!(zero[0].1, "Invalid value 0 for configuration topic.creation.default.partitions: Value must be -1 or at least 1");
        let errors = validate(&with_default(&[("topic.creation.groups", "a"), ("topic.creation.a.replication.factor", "0")]));
        assert_eq!(errors.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>(), ["topic.creation.a.replication.factor"]);
        for good in ["-1", "1", "100"] {
            assert!(validate(&with_default(&[("topic.creation.default.partitions", good)])).is_empty(), "{good}");
            assert!(validate(&with_default(&[("topic.creation.default.replication.factor", good)])).is_empty(), "{good}");
        }
    }

    #[test]
    fn default_group_patterns_are_ignored_unlisted_groups_and_duplicate_aliases_are_refused() {
        // As in Connect, the default group's include/exclude are ignored, not refused.
        assert!(validate(&with_default(&[("topic.creation.default.include", "a.*")])).is_empty());
        assert!(validate(&with_default(&[("topic.creation.default.exclude", "a.*")])).is_empty());
        assert_eq!(error_keys(&with_default(&[("topic.creation.other.partitions", "2")])), ["topic.creation.other.partitions"]);
        let dup = validate(&with_default(&[("topic.creation.groups", "a, a")]));
        assert_eq!(
            dup,
            [(
                "topic.creation.groups".to_owned(),
                "Invalid value a, a for configuration topic.creation.groups: Duplicate alias provided.".to_owned()
            )]
        );
        let bad_regex = validate(&with_default(&[("topic.creation.groups", "a"), ("topic.creation.a.include", "(unclosed")]));
        assert_eq!(bad_regex.len(), 1);
        assert_eq!(bad_regex[0].0, "topic.creation.a.include");
        let bad_policy = validate(&with_default(&[("topic.creation.default.cleanup.policy", "shred")]));
        assert_eq!(bad_policy[0].0, "topic.creation.default.cleanup.policy");
        assert_eq!(error_keys(&with_default(&[("topic.creation.default.retention.ms", "soon")])), ["topic.creation.default.retention.ms"]);
        // Listing `default` is allowed (with a warning), as in Connect.
        assert!(validate(&with_default(&[("topic.creation.groups", "default")])).is_empty());
    }

    #[test]
    fn the_first_matching_group_wins_and_exclude_beats_include() {
        let creation = TopicCreation::from_config(&with_default(&[
            ("topic.creation.groups", "compacted, cdc"),
            ("topic.creation.compacted.include", "cdc\\.accounts, .*\\.state"),
            ("topic.creation.compacted.cleanup.policy", "compact"),
            ("topic.creation.compacted.partitions", "1"),
            ("topic.creation.cdc.include", "cdc\\..*"),
            ("topic.creation.cdc.exclude", "cdc\\.tmp.*"),
            ("topic.creation.cdc.replication.factor", "-1"),
            ("topic.creation.cdc.compression.type", "lz4"),
            ("topic.creation.default.retention.ms", "60000"),
        ]))
        .unwrap()
        .unwrap();
        let name = |t: &str| creation.group_for(t).name.clone();
        assert_eq!(name("cdc.accounts"), "compacted");
        assert_eq!(name("orders.state"), "compacted");
        assert_eq!(name("cdc.orders"), "cdc");
        assert_eq!(name("cdc.tmp1"), "default", "excluded from cdc, not included anywhere else");
        assert_eq!(name("xcdc.orders"), "default", "patterns match the whole name");
        assert_eq!(name(""), "default");

        let t = creation.group_for("cdc.accounts").new_topic("cdc.accounts");
        assert_eq!((t.partitions, t.replication_factor), (1, 1), "replication factor from the default group");
        assert_eq!(t.configs, BTreeMap::from([("cleanup.policy".to_owned(), "compact".to_owned())]));
        let t = creation.group_for("cdc.orders").new_topic("cdc.orders");
        assert_eq!((t.partitions, t.replication_factor), (3, -1), "partitions from the default group");
        assert_eq!(t.configs, BTreeMap::from([("compression.type".to_owned(), "lz4".to_owned())]));
        let t = creation.group_for("other").new_topic("other");
        assert_eq!((t.name.as_str(), t.partitions, t.replication_factor), ("other", 3, 1));
        assert_eq!(t.configs, BTreeMap::from([("retention.ms".to_owned(), "60000".to_owned())]), "other configs of the default group");
    }

    #[test]
    fn a_group_without_include_takes_no_topic_and_dotted_aliases_work() {
        let creation = TopicCreation::from_config(&with_default(&[
            ("topic.creation.groups", "idle,a.b"),
            ("topic.creation.idle.partitions", "7"),
            ("topic.creation.a.b.include", "t"),
            ("topic.creation.a.b.partitions", "5"),
        ]))
        .unwrap()
        .unwrap();
        assert_eq!(creation.group_for("anything").name, "default");
        assert_eq!(creation.group_for("t").name, "a.b");
        assert_eq!(creation.group_for("t").partitions, 5);
    }

    #[tokio::test]
    async fn the_creator_creates_once_with_the_group_settings_on_the_embedded_log() {
        let dir = tempfile::tempdir().unwrap();
        let log = crate::log::embedded::EmbeddedLog::open(dir.path(), crate::log::embedded::EmbeddedOptions::default()).unwrap();
        let mut creator = TopicCreator::from_config(
            true,
            "c",
            &with_default(&[
                ("topic.creation.groups", "compacted"),
                ("topic.creation.compacted.include", "state\\..*"),
                ("topic.creation.compacted.partitions", "2"),
                ("topic.creation.compacted.cleanup.policy", "compact"),
                ("topic.creation.default.retention.ms", "60000"),
                ("topic.creation.default.compression.type", "lz4"),
            ]),
        )
        .unwrap()
        .unwrap();
        creator.ensure(&log, "state.users").await.unwrap();
        creator.ensure(&log, "events").await.unwrap();
        creator.ensure(&log, "events").await.unwrap();
        let state = log.describe_topic("state.users").await.unwrap().unwrap();
        assert_eq!(state.config.partitions, 2);
        assert_eq!(state.config.cleanup, crate::log::CleanupPolicy::Compact);
        let events = log.describe_topic("events").await.unwrap().unwrap();
        assert_eq!(events.config.partitions, 3);
        assert_eq!(events.config.cleanup, crate::log::CleanupPolicy::Delete);
        assert_eq!(events.config.retention_ms, Some(60_000));
        // An existing topic stays as it is.
        log.ensure_topic("kept", crate::log::TopicConfig::new(1)).await.unwrap();
        creator.ensure(&log, "kept").await.unwrap();
        assert_eq!(log.describe_topic("kept").await.unwrap().unwrap().config.partitions, 1);
    }
}
