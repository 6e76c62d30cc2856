//! Validation of connector configurations: the keys every connector has (Connect's
//! `ConnectorConfig`, `SourceConnectorConfig`, `SinkConnectorConfig`), the connector's own
//! keys, converters, and unknown keys (reported by name, never silently ignored).

use sluice_api::{ConfigDef, ConfigKey, ConfigType, ConfigValue, ConnectorKind, ConnectorPlugin, Importance, Props, Validator};

use super::{ConfigInfos, HerderError};
use crate::plugins::Plugins;
use crate::task::exactly_once;
use crate::worker::overrides::{self, OffsetReset, OverridePolicy};

pub const COMMON_GROUP: &str = "Common";

/// Keys under these prefixes belong to something the runtime configures by prefix.
const PASSTHROUGH_PREFIXES: &[&str] = &[
    "key.converter.",
    "value.converter.",
    "header.converter.",
    "producer.override.",
    "consumer.override.",
    "admin.override.",
    "topic.creation.",
    // The worker's automatic restarts (`crate::worker::restart`), checked below: not part of
    // Connect's definition, so the validate answer keeps Connect's keys.
    crate::worker::restart::PREFIX,
    crate::declared::OWNER_PREFIX,
    crate::task::rate::KEY,
];

/// The keys every connector of `kind` has.
pub fn common_def(kind: ConnectorKind) -> ConfigDef {
    let common = |name: &str, ty, imp, doc: &str| ConfigKey::new(name, ty, imp, doc);
    let mut def = ConfigDef::new()
        .define(
            common("name", ConfigType::String, Importance::High, "Globally unique name to use for this connector.")
                .validator(Validator::NonEmpty)
                .group(COMMON_GROUP, 1, "Connector name"),
        )
        .define(common("connector.class", ConfigType::String, Importance::High, "Name or alias of the class for this connector.").group(
            COMMON_GROUP,
            2,
            "Connector class",
        ))
        .define(
            common("tasks.max", ConfigType::Int, Importance::High, "Maximum number of tasks to use for this connector.")
                .default_value("1")
                .validator(Validator::AtLeast(1))
                .group(COMMON_GROUP, 3, "Tasks max"),
        )
        .define(
            common(
                "tasks.max.enforce",
                ConfigType::Boolean,
                Importance::Low,
                "Whether to fail the connector when it generates more than tasks.max task configs.",
            )
            .default_value("true")
            .group(COMMON_GROUP, 4, "Enforce tasks max"),
        )
        .define(
            common("key.converter", ConfigType::Class, Importance::Low, "Converter class for keys; overrides the worker's.")
                .default_value("")
                .group(COMMON_GROUP, 5, "Key converter class"),
        )
        .define(
            common("value.converter", ConfigType::Class, Importance::Low, "Converter class for values; overrides the worker's.")
                .default_value("")
                .group(COMMON_GROUP, 6, "Value converter class"),
        )
        .define(
            common("header.converter", ConfigType::Class, Importance::Low, "Header converter class; overrides the worker's.")
                .default_value("")
                .group(COMMON_GROUP, 7, "Header converter class"),
        )
        .define(
            common(
                "config.action.reload",
                ConfigType::String,
                Importance::Low,
                "What to do when an external config provider's value changes: restart or none.",
            )
            .default_value("restart")
            .validator(Validator::one_of(&["none", "restart"]))
            .group(COMMON_GROUP, 8, "Reload action"),
        )
        .define(
            common("transforms", ConfigType::List, Importance::Low, "Aliases for the transformations to apply to records, in order.")
                .default_value("")
                .group("Transforms", 1, "Transforms"),
        )
        .define(
            common("predicates", ConfigType::List, Importance::Low, "Aliases for the predicates used by transformations.")
                .default_value("")
                .group("Predicates", 1, "Predicates"),
        )
        .merge(&crate::task::errors::def());
    if kind == ConnectorKind::Source {
        def = def.define(
            common(
                crate::task::topic_creation::GROUPS,
                ConfigType::List,
                Importance::Low,
                "Groups of configurations for topics created by source connectors.",
            )
            .default_value("")
            .group("Topic Creation", 1, "Topic Creation Groups"),
        );
        def = def
            .define(
                common(
                    exactly_once::SUPPORT_KEY,
                    ConfigType::String,
                    Importance::Medium,
                    "Permitted values are requested, required. If set to \"required\", forces a preflight check for the connector to ensure that it can provide exactly-once semantics with the given configuration.",
                )
                .default_value("requested")
                .validator(Validator::one_of(&["requested", "required"]))
                .group("Exactly Once Support", 1, "Exactly once support"),
            )
            .define(
                common(
                    exactly_once::BOUNDARY_KEY,
                    ConfigType::String,
                    Importance::Medium,
                    "Permitted values are: poll, interval, connector. If set to 'poll', a new producer transaction will be started and committed for every batch of records that each task from this connector provides to Connect. If set to 'interval', commits transactions only after a user-defined time interval has passed. 'connector' is refused: no connector here defines its own transaction boundaries.",
                )
                .default_value("poll")
                .validator(Validator::one_of(&["poll", "interval", "connector"]))
                .group("Exactly Once Support", 2, "Transaction Boundary"),
            )
            .define(
                common(
                    exactly_once::BOUNDARY_INTERVAL_KEY,
                    ConfigType::Long,
                    Importance::Low,
                    "If 'transaction.boundary' is set to 'interval', determines the interval for producer transaction commits by connector tasks. If unset, defaults to the value of the worker-level 'offset.flush.interval.ms' property.",
                )
                .default_value("")
                .validator(Validator::AtLeast(0))
                .group("Exactly Once Support", 3, "Transaction boundary interval"),
            )
            .define(
                common(
                    exactly_once::OFFSETS_TOPIC_KEY,
                    ConfigType::String,
                    Importance::Low,
                    "Connect's separate offsets topic for this connector: only the worker's offsets topic (or unset) is accepted.",
                )
                .default_value("")
                .group("offsets.topic", 1, "Offsets topic"),
            );
    }
    if kind == ConnectorKind::Sink {
        def = def
            .define(
                common("topics", ConfigType::List, Importance::High, "List of topics to consume, separated by commas.")
                    .default_value("")
                    .group(COMMON_GROUP, 4, "Topics"),
            )
            .define(
                common("topics.regex", ConfigType::String, Importance::High, "Regular expression giving topics to consume.")
                    .default_value("")
                    .group(COMMON_GROUP, 4, "Topics regex"),
            );
    }
    def
}

/// What the exactly-once checks of a source connector need from the worker.
#[derive(Debug, Clone, Copy)]
pub struct ExactlyOnceCheck<'a> {
    /// `exactly.once.source.support=enabled`.
    pub worker_enabled: bool,
    /// The worker's `offset.storage.topic`.
    pub offsets_topic: &'a str,
}

/// Full validation, as `PUT /connector-plugins/{class}/config/validate` answers it;
/// `policy` is the worker's `connector.client.config.override.policy`.
///
/// `topic_creation` is the worker's `topic.creation.enable`: when on, a source connector's
/// `topic.creation.*` keys are checked (see [`crate::task::topic_creation`]); when off they
/// are not looked at, as they are not used.
pub fn validate(
    plugins: &Plugins,
    props: &Props,
    policy: OverridePolicy,
    topic_creation: bool,
    exactly_once: ExactlyOnceCheck<'_>,
) -> Result<(ConfigInfos, ConnectorPlugin), HerderError> {
    let class = props
        .get("connector.class")
        .filter(|c| !c.trim().is_empty())
        .ok_or_else(|| HerderError::BadRequest("Connector config contains no connector type: set connector.class".to_owned()))?;
    let plugin = *plugins.connector(class.trim()).ok_or_else(|| {
        HerderError::BadRequest(format!(
            "Failed to find any class that implements Connector and which name matches {class}, available connectors are: {}",
            plugins.connector_classes().join(", ")
        ))
    })?;
    let connector = (plugin.create)();
    let own = connector.config_def();
    let def = common_def(plugin.kind).merge(&own).merge(&crate::transform::enriched_config_def(props));
    let mut values = def.validate(props);
    let keyed = |values: &mut Vec<ConfigValue>, key: &str, msg: String| {
        if let Some(v) = values.iter_mut().find(|v| v.name == key) {
            v.errors.push(msg);
        }
    };
    for key in ["key.converter", "value.converter", "header.converter"] {
        let Some(class) = props.get(key).filter(|c| !c.is_empty()) else { continue };
        let known = if key == "header.converter" {
            crate::convert::find_header_converter(class).is_some()
        } else {
            crate::convert::find_converter(class).is_some()
        };
        if !known {
            keyed(&mut values, key, format!("Invalid value {class} for configuration {key}: Class {class} could not be found."));
        }
    }
    for (key, error) in crate::transform::validate(props) {
        // Every message names its key, as Connect's do.
        let error = if error.contains(&key) {
            error
        } else {
            format!("Invalid value {} for configuration {key}: {error}", props.get(&key).map_or("null", String::as_str))
        };
        match values.iter_mut().find(|v| v.name == key) {
            Some(v) => {
                if !v.errors.contains(&error) {
                    v.errors.push(error);
                }
            }
            None => values.push(ConfigValue {
                name: key.clone(),
                value: props.get(&key).map(|v| sluice_api::secret::redact_urls(v)),
                recommended_values: Vec::new(),
                errors: vec![error],
                visible: true,
            }),
        }
    }
    if plugin.kind == ConnectorKind::Sink {
        let topics = props.get("topics").is_some_and(|t| !t.trim().is_empty());
        let regex = props.get("topics.regex").is_some_and(|t| !t.trim().is_empty());
        match (topics, regex) {
            // As Connect's SinkConnectorConfig: the error is on both keys.
            (true, true) => {
                for key in ["topics", "topics.regex"] {
                    keyed(&mut values, key, "topics and topics.regex are mutually exclusive options, but both are set.".to_owned());
                }
            }
            (false, false) => {
                for key in ["topics", "topics.regex"] {
                    keyed(&mut values, key, "Must configure one of topics or topics.regex".to_owned());
                }
            }
            (false, true) => {
                if let Err(e) = regex::Regex::new(&props["topics.regex"]) {
                    keyed(
                        &mut values,
                        "topics.regex",
                        format!("Invalid value {} for configuration topics.regex: {e}", props["topics.regex"]),
                    );
                }
            }
            (true, false) => {}
        }
    }
    // Checks of keys the definition cannot express: topic creation groups, a dead-letter
    // replication factor of 0.
    let mut rule_errors: Vec<(String, String)> = crate::task::errors::dlq_replication_error(props).into_iter().collect();
    rule_errors.extend(crate::worker::restart::RestartPolicy::validate(props));
    rule_errors.extend(crate::task::rate::RateLimit::validate(props));
    if plugin.kind == ConnectorKind::Source && topic_creation {
        rule_errors.extend(crate::task::topic_creation::validate(props));
    }
    if plugin.kind == ConnectorKind::Source {
        let support = connector.exactly_once_support(props);
        rule_errors.extend(exactly_once::validate(props, exactly_once.worker_enabled, support, exactly_once.offsets_topic));
    }
    for (key, error) in rule_errors {
        match values.iter_mut().find(|v| v.name == key) {
            Some(v) => v.errors.push(error),
            None => values.push(ConfigValue {
                name: key.clone(),
                value: props.get(&key).cloned(),
                recommended_values: Vec::new(),
                errors: vec![error],
                visible: true,
            }),
        }
    }
    // Client overrides: refused by the policy, or (auto.offset.reset, which the sink task
    // applies itself) not a valid value.
    let mut client_errors = policy.violations(props);
    if let Err((key, error)) = OffsetReset::resolve(props, &Props::new()) {
        client_errors.push((key, error));
    }
    for (key, error) in client_errors {
        match values.iter_mut().find(|v| v.name == key) {
            Some(v) => v.errors.push(error),
            None => values.push(ConfigValue {
                name: key.clone(),
                value: props.get(&key).map(|v| {
                    if overrides::is_secret_client_key(&key) {
                        sluice_api::secret::REDACTED.to_owned()
                    } else {
                        v.clone()
                    }
                }),
                recommended_values: Vec::new(),
                errors: vec![error],
                visible: true,
            }),
        }
    }
    for key in props.keys() {
        if !def.knows(key) && !PASSTHROUGH_PREFIXES.iter().any(|p| key.starts_with(p)) {
            values.push(ConfigValue {
                name: key.clone(),
                value: Some(sluice_api::secret::redact_urls(&props[key])),
                recommended_values: Vec::new(),
                errors: vec![format!("Unknown configuration key '{key}': {} does not support it", plugin.class)],
                visible: true,
            });
        }
    }
    let mut groups: Vec<String> = Vec::new();
    for k in def.keys() {
        if let Some(g) = &k.group {
            if !groups.contains(g) {
                groups.push(g.clone());
            }
        }
    }
    let configs = values.into_iter().map(|v| (def.key(&v.name).cloned(), v)).collect();
    Ok((ConfigInfos { name: plugin.class.to_owned(), groups, configs }, plugin))
}

/// The 400 message for an invalid config, as Connect words it.
pub fn invalid_message(infos: &ConfigInfos) -> String {
    let errors: Vec<String> = infos.configs.iter().flat_map(|(_, v)| v.errors.iter().cloned()).collect();
    format!(
        "Connector configuration is invalid and contains the following {} error(s):\n{}\nYou can also find the above list of errors at the endpoint `/connector-plugins/{{connectorType}}/config/validate`",
        errors.len(),
        errors.join("\n")
    )
}

/// A copy of `props` with every password-typed value hidden (placeholders stay visible:
/// they are references, not secrets).
pub fn redact(def: &ConfigDef, props: &Props) -> Props {
    props
        .iter()
        .map(|(k, v)| {
            let secret = def.key(k).is_some_and(|key| key.ty == ConfigType::Password)
                || (overrides::PREFIXES.iter().any(|p| k.starts_with(p)) && overrides::is_secret_client_key(k));
            if secret && !v.is_empty() && !(v.starts_with("${") && v.ends_with('}')) {
                (k.clone(), sluice_api::secret::REDACTED.to_owned())
            } else {
                // A connection URL may carry a password too.
                (k.clone(), sluice_api::secret::redact_urls(v))
            }
        })
        .collect()
}
