//! Per-connector Kafka client overrides (Kafka Connect's KIP-458).
//!
//! A connector config may carry `producer.override.<key>` (a source's producer, a sink's
//! dead-letter producer), `consumer.override.<key>` (a sink's consumer) and
//! `admin.override.<key>` (the admin client). The worker key
//! `connector.client.config.override.policy` decides which keys a connector may override:
//!
//! | policy | allows |
//! |---|---|
//! | `All` (default since Kafka 3.0) | every key |
//! | `Principal` | `sasl.jaas.config`, `sasl.mechanism`, `security.protocol` |
//! | `None` | nothing |
//!
//! A key the policy refuses is a config error on that connector key, worded as Connect's
//! `AbstractConnectorClientConfigOverridePolicy` words it. On Kafka the allowed overrides
//! are laid over the worker's `producer.*` / `consumer.*` / `admin.*` settings for that
//! connector's tasks (`Log::with_client_overrides`). `auto.offset.reset` is applied by the
//! sink task itself (where it starts without a committed offset), on every log.

use sluice_api::Props;

pub const POLICY_KEY: &str = "connector.client.config.override.policy";

pub const PRODUCER_PREFIX: &str = "producer.override.";
pub const CONSUMER_PREFIX: &str = "consumer.override.";
pub const ADMIN_PREFIX: &str = "admin.override.";
pub const PREFIXES: [&str; 3] = [PRODUCER_PREFIX, CONSUMER_PREFIX, ADMIN_PREFIX];

/// The keys the `Principal` policy lets a connector override.
const PRINCIPAL_KEYS: &[&str] = &["sasl.jaas.config", "sasl.mechanism", "security.protocol"];

const CLASS_PACKAGE: &str = "org.apache.kafka.connect.connector.policy.";
const CLASS_SUFFIX: &str = "ConnectorClientConfigOverridePolicy";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OverridePolicy {
    #[default]
    All,
    None,
    Principal,
}

impl OverridePolicy {
    /// By short name (`All`), simple class name (`AllConnectorClientConfigOverridePolicy`)
    /// or full class name, as Connect's plugin aliases allow.
    pub fn parse(value: &str) -> Result<Self, String> {
        let v = value.trim();
        let simple = v.strip_prefix(CLASS_PACKAGE).unwrap_or(v);
        let short = simple.strip_suffix(CLASS_SUFFIX).unwrap_or(simple);
        match short.to_ascii_lowercase().as_str() {
            "all" => Ok(Self::All),
            "none" => Ok(Self::None),
            "principal" => Ok(Self::Principal),
            _ => Err(format!(
                "Invalid value {value} for configuration {POLICY_KEY}: unknown policy; use All, None or Principal (or their class names {CLASS_PACKAGE}<All|None|Principal>{CLASS_SUFFIX})"
            )),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::All => "All",
            Self::None => "None",
            Self::Principal => "Principal",
        }
    }

    /// Whether a connector may override client key `key` (without its prefix).
    pub fn allows(self, key: &str) -> bool {
        match self {
            Self::All => true,
            Self::None => false,
            Self::Principal => PRINCIPAL_KEYS.contains(&key),
        }
    }

    /// Every override key of `config` the policy refuses, with Connect's message.
    pub fn violations(self, config: &Props) -> Vec<(String, String)> {
        config
            .keys()
            .filter_map(|full| {
                let key = PREFIXES.iter().find_map(|p| full.strip_prefix(p))?;
                (!self.allows(key)).then(|| {
                    let message =
                        format!("The '{}' policy does not allow '{key}' to be overridden in the connector configuration.", self.name());
                    (full.clone(), message)
                })
            })
            .collect()
    }
}

/// A connector's client overrides, per client, with the prefixes taken off.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClientOverrides {
    pub producer: Props,
    pub consumer: Props,
    pub admin: Props,
}

impl ClientOverrides {
    pub fn from_connector_config(config: &Props) -> Self {
        let take = |prefix: &str| -> Props {
            config.iter().filter_map(|(k, v)| k.strip_prefix(prefix).map(|rest| (rest.to_owned(), v.clone()))).collect()
        };
        Self { producer: take(PRODUCER_PREFIX), consumer: take(CONSUMER_PREFIX), admin: take(ADMIN_PREFIX) }
    }

    pub fn is_empty(&self) -> bool {
        self.producer.is_empty() && self.consumer.is_empty() && self.admin.is_empty()
    }

    /// With Connect's per-task `client.id` (`connector-producer-<connector>-<task>`,
    /// `connector-consumer-…`, `connector-adminclient-…`) wherever the connector does not
    /// set one, when there are overrides that need clients of their own
    /// (`auto.offset.reset` alone does not). Distinct ids also keep brokers from taking a
    /// task's clients for the worker's.
    pub fn with_client_ids(mut self, connector: &str, task: u32) -> Self {
        if self.keys().iter().all(|k| k.ends_with(&format!(".{OFFSET_RESET_KEY}"))) {
            return self;
        }
        for (map, role) in [(&mut self.producer, "producer"), (&mut self.consumer, "consumer"), (&mut self.admin, "adminclient")] {
            map.entry("client.id".to_owned()).or_insert_with(|| format!("connector-{role}-{connector}-{task}"));
        }
        self
    }

    /// The prefixed keys, for log lines (never the values: some are credentials).
    pub fn keys(&self) -> Vec<String> {
        let with = |prefix: &str, m: &Props| m.keys().map(|k| format!("{prefix}{k}")).collect::<Vec<_>>();
        let mut out = with(PRODUCER_PREFIX, &self.producer);
        out.extend(with(CONSUMER_PREFIX, &self.consumer));
        out.extend(with(ADMIN_PREFIX, &self.admin));
        out
    }
}

/// Whether a client key (with or without a `*.override.` prefix) holds a credential.
pub fn is_secret_client_key(key: &str) -> bool {
    let key = PREFIXES.iter().find_map(|p| key.strip_prefix(p)).unwrap_or(key);
    key == "sasl.jaas.config" || key.ends_with(".password") || key == "ssl.keystore.key" || key == "ssl.key.pem"
}

/// Where a sink starts reading a partition that has no committed offset
/// (`auto.offset.reset`; Connect's sink consumers default to `earliest`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OffsetReset {
    #[default]
    Earliest,
    Latest,
    /// Fail the task.
    None,
}

pub const OFFSET_RESET_KEY: &str = "auto.offset.reset";

impl OffsetReset {
    pub fn parse(origin: &str, value: &str) -> Result<Self, String> {
        match value.trim().to_ascii_lowercase().as_str() {
            "earliest" => Ok(Self::Earliest),
            "latest" => Ok(Self::Latest),
            "none" => Ok(Self::None),
            _ => Err(format!("Invalid value {value} for configuration {origin}: String must be one of: latest, earliest, none")),
        }
    }

    /// From the connector's `consumer.override.auto.offset.reset`, else the worker's
    /// `consumer.auto.offset.reset`, else `earliest`.
    pub fn resolve(connector: &Props, worker: &Props) -> Result<Self, (String, String)> {
        let connector_key = format!("{CONSUMER_PREFIX}{OFFSET_RESET_KEY}");
        let worker_key = format!("consumer.{OFFSET_RESET_KEY}");
        for (props, key) in [(connector, &connector_key), (worker, &worker_key)] {
            if let Some(v) = props.get(key) {
                return Self::parse(key, v).map_err(|e| (key.clone(), e));
            }
        }
        Ok(Self::Earliest)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn props(pairs: &[(&str, &str)]) -> Props {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn policy_names_short_simple_and_full() {
        for v in [
            "All",
            "all",
            "AllConnectorClientConfigOverridePolicy",
            "org.apache.kafka.connect.connector.policy.AllConnectorClientConfigOverridePolicy",
        ] {
            assert_eq!(OverridePolicy::parse(v), Ok(OverridePolicy::All), "{v}");
        }
        assert_eq!(OverridePolicy::parse("None"), Ok(OverridePolicy::None));
        assert_eq!(
            OverridePolicy::parse("org.apache.kafka.connect.connector.policy.PrincipalConnectorClientConfigOverridePolicy"),
            Ok(OverridePolicy::Principal)
        );
        let err = OverridePolicy::parse("Some").unwrap_err();
        assert!(err.contains(POLICY_KEY) && err.contains("Some"), "{err}");
        assert_eq!(OverridePolicy::default(), OverridePolicy::All);
    }

    #[test]
    fn each_policy_allows_its_keys() {
        let config = props(&[
            ("connector.class", "FileStreamSink"),
            ("producer.override.compression.type", "gzip"),
            ("consumer.override.auto.offset.reset", "latest"),
            ("consumer.override.security.protocol", "SASL_SSL"),
            ("admin.override.sasl.jaas.config", "x"),
            ("admin.override.sasl.mechanism", "PLAIN"),
            ("key.converter", "x"),
        ]);
        assert!(OverridePolicy::All.violations(&config).is_empty());
        let keys = |p: OverridePolicy| p.violations(&config).into_iter().map(|(k, _)| k).collect::<Vec<_>>();
        assert_eq!(keys(OverridePolicy::Principal), ["consumer.override.auto.offset.reset", "producer.override.compression.type"]);
        assert_eq!(keys(OverridePolicy::None).len(), 5);
        let (key, message) = &OverridePolicy::Principal.violations(&config)[0];
        assert_eq!(key, "consumer.override.auto.offset.reset");
        assert_eq!(message, "The 'Principal' policy does not allow 'auto.offset.reset' to be overridden in the connector configuration.");
    }

    #[test]
    fn overrides_split_by_client() {
        let o = ClientOverrides::from_connector_config(&props(&[
            ("producer.override.linger.ms", "5"),
            ("consumer.override.fetch.min.bytes", "1"),
            ("admin.override.request.timeout.ms", "100"),
            ("producer.linger.ms", "9"),
        ]));
        assert_eq!(o.producer, props(&[("linger.ms", "5")]));
        assert_eq!(o.consumer, props(&[("fetch.min.bytes", "1")]));
        assert_eq!(o.admin, props(&[("request.timeout.ms", "100")]));
        assert!(ClientOverrides::default().is_empty());
        let named = o.clone().with_client_ids("c", 2);
        assert_eq!(named.consumer["client.id"], "connector-consumer-c-2");
        assert_eq!(named.admin["client.id"], "connector-adminclient-c-2");
        let own = ClientOverrides::from_connector_config(&props(&[("producer.override.client.id", "mine")])).with_client_ids("c", 0);
        assert_eq!((own.producer["client.id"].as_str(), own.consumer["client.id"].as_str()), ("mine", "connector-consumer-c-0"));
        let reset_only = ClientOverrides::from_connector_config(&props(&[("consumer.override.auto.offset.reset", "latest")]));
        assert_eq!(reset_only.clone().with_client_ids("c", 0), reset_only, "auto.offset.reset alone needs no clients of its own");
        assert_eq!(o.keys(), ["producer.override.linger.ms", "consumer.override.fetch.min.bytes", "admin.override.request.timeout.ms"]);
    }

    #[test]
    fn secrets_are_recognised() {
        assert!(is_secret_client_key("producer.override.sasl.jaas.config"));
        assert!(is_secret_client_key("consumer.override.ssl.key.password"));
        assert!(is_secret_client_key("admin.override.ssl.truststore.password"));
        assert!(!is_secret_client_key("consumer.override.sasl.mechanism"));
    }

    #[test]
    fn offset_reset_connector_then_worker_then_earliest() {
        let none = Props::new();
        assert_eq!(OffsetReset::resolve(&none, &none), Ok(OffsetReset::Earliest));
        let worker = props(&[("consumer.auto.offset.reset", "latest")]);
        assert_eq!(OffsetReset::resolve(&none, &worker), Ok(OffsetReset::Latest));
        let connector = props(&[("consumer.override.auto.offset.reset", "none")]);
        assert_eq!(OffsetReset::resolve(&connector, &worker), Ok(OffsetReset::None));
        let (key, err) = OffsetReset::resolve(&props(&[("consumer.override.auto.offset.reset", "oldest")]), &none).unwrap_err();
        assert_eq!(key, "consumer.override.auto.offset.reset");
        assert!(err.contains("oldest") && err.contains(&key), "{err}");
    }
}
