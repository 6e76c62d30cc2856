//! Worker properties: Kafka Connect's keys, read from a `.properties` file and from
//! `CONNECT_*` environment variables (the Confluent image's convention), plus our own few.
//!
//! | key | default | meaning |
//! |---|---|---|
//! | `bootstrap.servers` | unset | unset → topics live in the embedded log; set → data topics and sink groups in Kafka |
//! | `security.protocol`, `sasl.*`, `ssl.*` | unset | Kafka client security, for every client (`log::kafka::settings`) |
//! | `producer.*`, `consumer.*`, `admin.*` | unset | Kafka client settings per kind of client |
//! | `connector.client.config.override.policy` | `All` | which `producer.override.*`, `consumer.override.*`, `admin.override.*` keys connectors may set (`All`, `Principal`, `None`; see [`super::overrides`]) |
//! | `key.converter`, `value.converter` | `JsonConverter` | converters; `*.converter.<prop>` configure them |
//! | `header.converter` | `SimpleHeaderConverter` | |
//! | `offset.flush.interval.ms` | 60000 | how often source offsets and sink offsets are committed |
//! | `offset.flush.timeout.ms` | 5000 | how long a flush may wait for in-flight records |
//! | `listeners` | `http://:8083` | REST listeners, `http://` and `https://` (`sluice_rest::tls`); `rest.host.name`/`rest.port` are the older form |
//! | `rest.advertised.listener` | http if any | the scheme other workers reach this one by |
//! | `admin.listeners` | unset | KIP-495: unset, `/admin` is served with the rest; empty, nowhere; else only there (`admin.listeners.https.ssl.*` for https) |
//! | `rest.advertised.host.name`, `rest.advertised.port` | listener | the `worker_id` in statuses |
//! | `rest.extension.classes` | unset | only Connect's `BasicAuthSecurityRestExtension`; anything else stops the worker (`sluice_rest::auth`) |
//! | `sluice.rest.auth.jaas.config` (ours) | unset | the JAAS file of that extension when `KAFKA_OPTS` names none |
//! | `sluice.rest.auth.tokens.file` (ours) | unset | bearer tokens (hashed) with roles `read` and `admin` |
//! | `access.control.allow.origin`, `access.control.allow.methods` | unset, `GET,POST,HEAD` | cross-origin requests (`sluice_rest::cors`) |
//! | `task.shutdown.graceful.timeout.ms` | 5000 | per task, on stop and on shutdown |
//! | `config.storage.topic`, `offset.storage.topic`, `status.storage.topic` | `connect-configs`, `connect-offsets`, `connect-status` | internal topics |
//! | `config.providers` | unset | `file`, `directory`, `env` providers for `${provider:path:key}` |
//! | `exactly.once.source.support` | `disabled` | `enabled`: source tasks write records and offsets in Kafka transactions (distributed mode only; `preparing` runs as `disabled`; see `crate::task::exactly_once`) |
//! | `topic.creation.enable` | `true` | source connectors create their topics with their `topic.creation.*` groups (KIP-158, see `crate::task::topic_creation`) |
//! | `plugin.path` | unset | accepted and ignored: every plugin is compiled in |
//! | `data.dir` (ours) | `./sluice-data` | where the embedded log lives |
//! | `log.fsync` (ours) | `always` | `always` (durable before ack), `interval:<ms>`, `never` |
//! | `log.cache.bytes` (ours) | 67108864 | newest durable bytes per partition left in the OS page cache; older ones are dropped from it (`0`: left to the OS) |

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use sluice_api::{ConnectError, ConnectResult, Props};

use super::overrides::{OverridePolicy, POLICY_KEY};
use super::providers::ConfigProviders;

pub const DEFAULT_REST_PORT: u16 = 8083;
pub const DEFAULT_DATA_DIR: &str = "./sluice-data";
pub const DEFAULT_OFFSET_FLUSH_INTERVAL_MS: u64 = 60_000;
pub const DEFAULT_OFFSET_FLUSH_TIMEOUT_MS: u64 = 5_000;
pub const DEFAULT_TASK_SHUTDOWN_TIMEOUT_MS: u64 = 5_000;
pub const DEFAULT_CONVERTER: &str = "org.apache.kafka.connect.json.JsonConverter";
pub const DEFAULT_HEADER_CONVERTER: &str = "org.apache.kafka.connect.storage.SimpleHeaderConverter";

/// Keys a worker understands; others are reported once at start-up (as Connect does).
const KNOWN_KEYS: &[&str] = &[
    "bootstrap.servers",
    "key.converter",
    "value.converter",
    "header.converter",
    "offset.flush.interval.ms",
    "offset.flush.timeout.ms",
    "listeners",
    "rest.port",
    "rest.host.name",
    "rest.advertised.host.name",
    "rest.advertised.port",
    "rest.advertised.listener",
    "task.shutdown.graceful.timeout.ms",
    "config.storage.topic",
    "offset.storage.topic",
    "status.storage.topic",
    "offset.storage.partitions",
    "status.storage.partitions",
    "session.timeout.ms",
    "heartbeat.interval.ms",
    "rebalance.timeout.ms",
    "scheduled.rebalance.max.delay.ms",
    "connect.protocol",
    "inter.worker.key.generation.algorithm",
    "inter.worker.key.size",
    "inter.worker.key.ttl.ms",
    "inter.worker.signature.algorithm",
    "inter.worker.verification.algorithms",
    "client.id",
    "config.storage.replication.factor",
    "offset.storage.replication.factor",
    "status.storage.replication.factor",
    "offset.storage.file.filename",
    "group.id",
    "config.providers",
    "plugin.path",
    "plugin.discovery",
    "data.dir",
    "log.fsync",
    "log.cache.bytes",
    "connector.client.config.override.policy",
    "topic.creation.enable",
    "exactly.once.source.support",
    "restart.policy",
    "metrics.enabled",
    "metrics.prometheus.naming",
    "connectors.dir",
    "connectors.dir.drift",
    "connectors.dir.interval.ms",
    "rest.extension.classes",
    "rest.servlet.initializor.classes",
    "admin.listeners",
    "sluice.rest.auth.jaas.config",
    "sluice.rest.auth.tokens.file",
    "access.control.allow.origin",
    "access.control.allow.methods",
];
const KNOWN_PREFIXES: &[&str] = &[
    "listeners.https.",
    "admin.listeners.https.",
    "key.converter.",
    "value.converter.",
    "header.converter.",
    "config.providers.",
    "producer.",
    "consumer.",
    "admin.",
    "security.",
    "sasl.",
    "ssl.",
];

#[derive(Debug, Clone)]
pub struct WorkerConfig {
    /// Every property as given (after providers resolved), for prefix lookups.
    pub props: Props,
    /// The advertised listener's host and port (see [`RestListener`]).
    pub rest_host: String,
    pub rest_port: u16,
    /// Every REST listener, in the order `listeners` names them.
    pub rest_listeners: Vec<RestListener>,
    /// `admin.listeners`: `None` when unset (the `/admin` endpoints are served with the
    /// rest), empty when they are served nowhere.
    pub admin_listeners: Option<Vec<RestListener>>,
    /// Whether other workers reach this one over https (`rest.advertised.listener`).
    pub advertised_https: bool,
    pub advertised_host: String,
    pub advertised_port: u16,
    pub offset_flush_interval: Duration,
    pub offset_flush_timeout: Duration,
    pub task_shutdown_timeout: Duration,
    pub config_topic: String,
    pub offset_topic: String,
    pub status_topic: String,
    pub offset_partitions: i32,
    pub status_partitions: i32,
    /// `config.storage.replication.factor`, `offset.storage.…`, `status.storage.…`
    /// (`-1`, the default here: the broker's `default.replication.factor`).
    pub config_replication: i32,
    pub offset_replication: i32,
    pub status_replication: i32,
    pub data_dir: PathBuf,
    pub log_fsync: String,
    /// `log.cache.bytes`.
    pub log_cache_bytes: u64,
    pub bootstrap_servers: Option<String>,
    pub providers: ConfigProviders,
    /// `connector.client.config.override.policy`.
    pub override_policy: OverridePolicy,
    /// `topic.creation.enable`.
    pub topic_creation_enable: bool,
    /// `exactly.once.source.support` (distributed mode on Kafka only; see
    /// [`crate::task::exactly_once`]).
    pub exactly_once_source: crate::task::exactly_once::WorkerSupport,
    /// `connectors.dir`, `connectors.dir.drift`, `connectors.dir.interval.ms`.
    pub connectors_dir: crate::declared::Settings,
    /// `restart.policy`.
    pub restart_policy: crate::worker::restart::Policy,
    /// `metrics.enabled`, `metrics.prometheus.naming`.
    pub metrics: crate::metrics::Settings,
}

impl WorkerConfig {
    /// Builds the config from file properties overlaid with `CONNECT_*` variables.
    pub fn from_sources(file_props: Props, env: impl IntoIterator<Item = (String, String)>) -> ConnectResult<Self> {
        let mut props = file_props;
        for (k, v) in env {
            if let Some(key) = env_to_key(&k) {
                props.insert(key, v);
            }
        }
        let providers = ConfigProviders::from_worker_props(&props)?;
        let props = providers.resolve_all(&props)?;
        Self::from_props(props, providers)
    }

    fn from_props(props: Props, providers: ConfigProviders) -> ConnectResult<Self> {
        for k in props.keys() {
            if !KNOWN_KEYS.contains(&k.as_str()) && !KNOWN_PREFIXES.iter().any(|p| k.starts_with(p)) {
                tracing::warn!(key = %k, "the configuration '{k}' was supplied but isn't a known config");
            }
        }
        if let Some(p) = props.get("plugin.path") {
            tracing::info!(plugin.path = %p, "plugin.path is ignored: every plugin is compiled into this binary");
        }
        if props.contains_key("offset.storage.file.filename") {
            tracing::info!("offset.storage.file.filename is ignored: source offsets live in the offsets topic of the embedded log");
        }
        let rest_listeners = listeners(&props)?;
        let admin_listeners = admin_listeners(&props)?;
        let advertised = advertised_listener(&props, &rest_listeners)?;
        let (rest_host, rest_port, advertised_https) = (advertised.host, advertised.port, advertised.https);
        let advertised_host = props.get("rest.advertised.host.name").cloned().unwrap_or_else(|| {
            if rest_host.is_empty() {
                local_host_address()
            } else if rest_host == "0.0.0.0" {
                "127.0.0.1".to_owned()
            } else {
                rest_host.clone()
            }
        });
        let advertised_port = match props.get("rest.advertised.port") {
            Some(p) => parse_num(&props, "rest.advertised.port", p)?,
            None => rest_port,
        };
        let bootstrap_servers = props.get("bootstrap.servers").filter(|s| !s.trim().is_empty()).cloned();
        let log_fsync = props.get("log.fsync").cloned().unwrap_or_else(|| "always".to_owned());
        let log_cache_bytes = match props.get("log.cache.bytes") {
            Some(v) => parse_num::<u64>(&props, "log.cache.bytes", v)?,
            None => crate::log::embedded::DEFAULT_CACHE_BYTES,
        };
        let override_policy = match props.get(POLICY_KEY) {
            Some(v) => OverridePolicy::parse(v).map_err(|e| ConnectError::config(POLICY_KEY, e))?,
            None => OverridePolicy::default(),
        };
        let topic_creation_enable = match props.get(crate::task::topic_creation::ENABLE).map(|v| v.trim().to_ascii_lowercase()) {
            None => true,
            Some(v) if v == "true" => true,
            Some(v) if v == "false" => false,
            Some(v) => {
                return Err(ConnectError::config(
                    crate::task::topic_creation::ENABLE,
                    format!("Invalid value {v} for configuration topic.creation.enable: Expected value to be either true or false"),
                ))
            }
        };
        let exactly_once_source = crate::task::exactly_once::WorkerSupport::from_worker_props(&props)?;
        let restart_policy = crate::worker::restart::Policy::from_worker(&props)?;
        let metrics = crate::metrics::Settings::from_worker(&props)?;
        let connectors_dir = crate::declared::Settings::from_worker(&props)?;
        Ok(Self {
            restart_policy,
            metrics,
            connectors_dir,
            exactly_once_source,
            topic_creation_enable,
            rest_host,
            rest_port,
            rest_listeners,
            admin_listeners,
            advertised_https,
            advertised_host,
            advertised_port,
            offset_flush_interval: ms(&props, "offset.flush.interval.ms", DEFAULT_OFFSET_FLUSH_INTERVAL_MS)?,
            offset_flush_timeout: ms(&props, "offset.flush.timeout.ms", DEFAULT_OFFSET_FLUSH_TIMEOUT_MS)?,
            task_shutdown_timeout: ms(&props, "task.shutdown.graceful.timeout.ms", DEFAULT_TASK_SHUTDOWN_TIMEOUT_MS)?,
            config_topic: string(&props, "config.storage.topic", "connect-configs"),
            offset_topic: string(&props, "offset.storage.topic", "connect-offsets"),
            status_topic: string(&props, "status.storage.topic", "connect-status"),
            offset_partitions: positive(&props, "offset.storage.partitions", 25)?,
            status_partitions: positive(&props, "status.storage.partitions", 5)?,
            config_replication: replication(&props, "config.storage.replication.factor")?,
            offset_replication: replication(&props, "offset.storage.replication.factor")?,
            status_replication: replication(&props, "status.storage.replication.factor")?,
            data_dir: PathBuf::from(string(&props, "data.dir", DEFAULT_DATA_DIR)),
            log_fsync,
            log_cache_bytes,
            bootstrap_servers,
            providers,
            override_policy,
            props,
        })
    }

    /// `host:port` that identifies this worker in statuses.
    pub fn worker_id(&self) -> String {
        format!("{}:{}", self.advertised_host, self.advertised_port)
    }

    /// The URL other workers forward requests to.
    pub fn advertised_url(&self) -> String {
        format!("{}://{}/", if self.advertised_https { "https" } else { "http" }, self.worker_id())
    }

    pub fn key_converter(&self) -> (String, Props) {
        self.converter("key.converter", DEFAULT_CONVERTER)
    }

    pub fn value_converter(&self) -> (String, Props) {
        self.converter("value.converter", DEFAULT_CONVERTER)
    }

    pub fn header_converter(&self) -> (String, Props) {
        self.converter("header.converter", DEFAULT_HEADER_CONVERTER)
    }

    fn converter(&self, key: &str, default: &str) -> (String, Props) {
        let class = self.props.get(key).cloned().unwrap_or_else(|| default.to_owned());
        let prefix = format!("{key}.");
        let props = self.props.iter().filter_map(|(k, v)| k.strip_prefix(&prefix).map(|r| (r.to_owned(), v.clone()))).collect();
        (class, props)
    }
}

/// `CONNECT_REST_ADVERTISED_HOST_NAME` → `rest.advertised.host.name`; as in the Confluent
/// image, `___` stands for `-` and `__` for `_`.
pub fn env_to_key(var: &str) -> Option<String> {
    let rest = var.strip_prefix("CONNECT_")?;
    if rest.is_empty() {
        return None;
    }
    let lower = rest.to_ascii_lowercase();
    Some(lower.replace("___", "\u{0}").replace("__", "\u{1}").replace('_', ".").replace('\u{0}', "-").replace('\u{1}', "_"))
}

/// Parses Java `.properties` text: `key=value` or `key: value`, `#`/`!` comments,
/// backslash line continuations and escapes.
pub fn parse_properties(text: &str) -> Props {
    let mut out = BTreeMap::new();
    let mut logical = String::new();
    for raw in text.lines() {
        let line = raw.trim_start();
        if logical.is_empty() && (line.is_empty() || line.starts_with('#') || line.starts_with('!')) {
            continue;
        }
        let trailing = line.chars().rev().take_while(|c| *c == '\\').count();
        if trailing % 2 == 1 {
            logical.push_str(&line[..line.len() - 1]);
            continue;
        }
        logical.push_str(line);
        let entry = std::mem::take(&mut logical);
        let (k, v) = split_entry(&entry);
        out.insert(unescape(k), unescape(v.trim_start()));
    }
    if !logical.is_empty() {
        let (k, v) = split_entry(&logical);
        out.insert(unescape(k), unescape(v.trim_start()));
    }
    out
}

fn split_entry(entry: &str) -> (&str, &str) {
    let mut escaped = false;
    for (i, c) in entry.char_indices() {
        if escaped {
            escaped = false;
            continue;
        }
        match c {
            '\\' => escaped = true,
            '=' | ':' => return (entry[..i].trim_end(), &entry[i + 1..]),
            c if c.is_whitespace() => {
                let rest = entry[i..].trim_start();
                let rest = rest.strip_prefix(['=', ':']).unwrap_or(rest);
                return (&entry[..i], rest);
            }
            _ => {}
        }
    }
    (entry, "")
}

fn unescape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some('r') => out.push('\r'),
            Some('u') => {
                let hex: String = chars.by_ref().take(4).collect();
                if let Some(ch) = u32::from_str_radix(&hex, 16).ok().and_then(char::from_u32) {
                    out.push(ch);
                }
            }
            Some(other) => out.push(other),
            None => {}
        }
    }
    out
}

/// One REST listener: `http://host:port` or `https://host:port` (an empty host: every
/// interface).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RestListener {
    pub https: bool,
    pub host: String,
    pub port: u16,
}

/// The listeners a `listeners`-style value names (`key` for errors).
fn parse_listeners(key: &str, value: &str) -> ConnectResult<Vec<RestListener>> {
    let mut out = Vec::new();
    for l in value.split(',').map(str::trim).filter(|l| !l.is_empty()) {
        let (https, rest) = match l.split_once("://") {
            Some((scheme, rest)) if scheme.eq_ignore_ascii_case("http") => (false, rest),
            Some((scheme, rest)) if scheme.eq_ignore_ascii_case("https") => (true, rest),
            _ => return Err(ConnectError::config(key, format!("'{l}' is not an http:// or https:// listener"))),
        };
        let (host, port) = rest
            .trim_end_matches('/')
            .rsplit_once(':')
            .ok_or_else(|| ConnectError::config(key, format!("'{l}' has no port (expected http://host:port)")))?;
        let port = port.parse().map_err(|_| ConnectError::config(key, format!("'{port}' is not a port number")))?;
        let host = host.trim_start_matches('[').trim_end_matches(']');
        out.push(RestListener { https, host: host.to_owned(), port });
    }
    Ok(out)
}

/// `admin.listeners` (KIP-495): unset, the `/admin` endpoints are served with the rest; empty,
/// they are served nowhere; else only on these listeners.
fn admin_listeners(props: &Props) -> ConnectResult<Option<Vec<RestListener>>> {
    props.get("admin.listeners").map(|v| parse_listeners("admin.listeners", v)).transpose()
}

/// Every listener of `listeners` (or the older `rest.host.name` + `rest.port`).
fn listeners(props: &Props) -> ConnectResult<Vec<RestListener>> {
    if let Some(listeners) = props.get("listeners").filter(|s| !s.trim().is_empty()) {
        let out = parse_listeners("listeners", listeners)?;
        if out.is_empty() {
            return Err(ConnectError::config("listeners", "names no listener"));
        }
        return Ok(out);
    }
    let port = match props.get("rest.port") {
        Some(p) => parse_num(props, "rest.port", p)?,
        None => DEFAULT_REST_PORT,
    };
    let host = props.get("rest.host.name").cloned().unwrap_or_default();
    Ok(vec![RestListener { https: false, host, port }])
}

/// The listener other workers are told about, as Connect chooses it: the scheme of
/// `rest.advertised.listener`, else http when any listener is http, else https.
fn advertised_listener(props: &Props, listeners: &[RestListener]) -> ConnectResult<RestListener> {
    let https = match props.get("rest.advertised.listener").map(|v| v.trim().to_ascii_lowercase()) {
        Some(v) if v == "https" => true,
        Some(v) if v == "http" => false,
        Some(v) if !v.is_empty() => {
            return Err(ConnectError::config("rest.advertised.listener", format!("'{v}' is neither http nor https")));
        }
        _ => !listeners.iter().any(|l| !l.https),
    };
    listeners.iter().find(|l| l.https == https).cloned().ok_or_else(|| {
        ConnectError::config("rest.advertised.listener", format!("no {} listener in listeners", if https { "https://" } else { "http://" }))
    })
}

/// The address this host's name resolves to, as Kafka Connect advertises a listener without
/// a host (Java's `InetAddress.getLocalHost().getHostAddress()`): the first IPv4 address of
/// the name in `/proc/sys/kernel/hostname`, else its first address, else `127.0.0.1`.
pub fn local_host_address() -> String {
    use std::net::ToSocketAddrs;
    let name = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    let addrs: Vec<std::net::IpAddr> =
        (name.trim(), 0).to_socket_addrs().map(|a| a.map(|s| s.ip()).collect()).unwrap_or_default();
    addrs.iter().find(|a| a.is_ipv4()).or(addrs.first()).map_or_else(|| "127.0.0.1".to_owned(), ToString::to_string)
}

fn parse_num<T: std::str::FromStr>(_props: &Props, key: &str, raw: &str) -> ConnectResult<T> {
    raw.trim().parse().map_err(|_| ConnectError::config(key, format!("'{raw}' is not a valid number")))
}

fn ms(props: &Props, key: &str, default: u64) -> ConnectResult<Duration> {
    match props.get(key) {
        Some(v) => parse_num::<u64>(props, key, v).map(Duration::from_millis),
        None => Ok(Duration::from_millis(default)),
    }
}

/// A replication factor: at least 1, or -1 for the broker's default (the default here).
fn replication(props: &Props, key: &str) -> ConnectResult<i32> {
    match props.get(key) {
        Some(v) => {
            let n: i32 = parse_num(props, key, v)?;
            if n < 1 && n != -1 {
                return Err(ConnectError::config(key, format!("{n} must be at least 1, or -1 for the broker's default")));
            }
            Ok(n)
        }
        None => Ok(-1),
    }
}

fn positive(props: &Props, key: &str, default: i32) -> ConnectResult<i32> {
    match props.get(key) {
        Some(v) => {
            let n: i32 = parse_num(props, key, v)?;
            if n < 1 {
                return Err(ConnectError::config(key, format!("{n} must be at least 1")));
            }
            Ok(n)
        }
        None => Ok(default),
    }
}

fn string(props: &Props, key: &str, default: &str) -> String {
    props.get(key).cloned().unwrap_or_else(|| default.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_names_map_to_keys() {
        assert_eq!(env_to_key("CONNECT_BOOTSTRAP_SERVERS").as_deref(), Some("bootstrap.servers"));
        assert_eq!(env_to_key("CONNECT_REST_ADVERTISED_HOST_NAME").as_deref(), Some("rest.advertised.host.name"));
        assert_eq!(env_to_key("CONNECT_A__B___C").as_deref(), Some("a_b-c"));
        assert_eq!(env_to_key("PATH"), None);
    }

    #[test]
    fn properties_syntax() {
        let p = parse_properties("# c\n! c\na=1\nb : two\nc three\nd=multi\\\n   line\ne=x\\=y\n\nf=\n");
        assert_eq!(p["a"], "1");
        assert_eq!(p["b"], "two");
        assert_eq!(p["c"], "three");
        assert_eq!(p["d"], "multiline");
        assert_eq!(p["e"], "x=y");
        assert_eq!(p["f"], "");
    }

    #[test]
    fn defaults_and_overrides() {
        let file = parse_properties("rest.port=9000\noffset.flush.interval.ms=10\n");
        let c = WorkerConfig::from_sources(file, [("CONNECT_DATA_DIR".to_owned(), "/tmp/x".to_owned())]).unwrap();
        assert_eq!(c.rest_port, 9000);
        assert_eq!(c.offset_flush_interval, Duration::from_millis(10));
        assert_eq!(c.data_dir, PathBuf::from("/tmp/x"));
        // No host: every interface, advertised as the host name's address (as Connect).
        assert_eq!(c.rest_host, "");
        assert_eq!(c.worker_id(), format!("{}:9000", local_host_address()));
        let c = WorkerConfig::from_sources(parse_properties("listeners=http://:8085\n"), []).unwrap();
        assert_eq!((c.rest_host.as_str(), c.worker_id()), ("", format!("{}:8085", local_host_address())));
        let c = WorkerConfig::from_sources(parse_properties("listeners=http://0.0.0.0:8085\n"), []).unwrap();
        assert_eq!((c.rest_host.as_str(), c.worker_id().as_str()), ("0.0.0.0", "127.0.0.1:8085"));
        assert_eq!(c.config_topic, "connect-configs");
        let c = WorkerConfig::from_sources(parse_properties("listeners=http://localhost:8084\n"), []).unwrap();
        assert_eq!((c.rest_host.as_str(), c.rest_port), ("localhost", 8084));
        let err = WorkerConfig::from_sources(parse_properties("listeners=ftp://x:1\n"), []).unwrap_err();
        assert!(err.to_string().contains("listeners"), "{err}");
        // http and https side by side: http is advertised unless rest.advertised.listener says.
        let both = "listeners=https://127.0.0.1:8443,http://127.0.0.1:8083\n";
        let c = WorkerConfig::from_sources(parse_properties(both), []).unwrap();
        assert_eq!(c.rest_listeners.len(), 2);
        assert_eq!(c.advertised_url(), "http://127.0.0.1:8083/");
        let c = WorkerConfig::from_sources(parse_properties(&format!("{both}rest.advertised.listener=https\n")), []).unwrap();
        assert_eq!(c.advertised_url(), "https://127.0.0.1:8443/");
        let c = WorkerConfig::from_sources(parse_properties("listeners=https://:8443\n"), []).unwrap();
        assert!(c.advertised_https && c.rest_listeners[0].https);
        assert_eq!(c.admin_listeners, None);
        let c = WorkerConfig::from_sources(parse_properties("admin.listeners=\n"), []).unwrap();
        assert_eq!(c.admin_listeners, Some(Vec::new()), "empty: no admin endpoints");
        let c = WorkerConfig::from_sources(parse_properties("admin.listeners=http://127.0.0.1:8084\n"), []).unwrap();
        assert_eq!(c.admin_listeners, Some(vec![RestListener { https: false, host: "127.0.0.1".into(), port: 8084 }]));
        let err = WorkerConfig::from_sources(parse_properties("admin.listeners=tcp://x:1\n"), []).unwrap_err();
        assert!(err.to_string().contains("admin.listeners"), "{err}");
        let err = WorkerConfig::from_sources(parse_properties("listeners=http://:1\nrest.advertised.listener=https\n"), []).unwrap_err();
        assert!(err.to_string().contains("rest.advertised.listener"), "{err}");
        let err = WorkerConfig::from_sources(parse_properties("rest.port=abc\n"), []).unwrap_err();
        assert!(err.to_string().contains("rest.port"), "{err}");
    }

    #[test]
    fn override_policy_defaults_to_all_and_rejects_unknown_names() {
        let c = WorkerConfig::from_sources(Props::new(), []).unwrap();
        assert_eq!(c.override_policy, OverridePolicy::All);
        let c = WorkerConfig::from_sources(parse_properties("connector.client.config.override.policy=Principal\n"), []).unwrap();
        assert_eq!(c.override_policy, OverridePolicy::Principal);
        let env = [("CONNECT_CONNECTOR_CLIENT_CONFIG_OVERRIDE_POLICY".to_owned(), "None".to_owned())];
        assert_eq!(WorkerConfig::from_sources(Props::new(), env).unwrap().override_policy, OverridePolicy::None);
        let err = WorkerConfig::from_sources(parse_properties("connector.client.config.override.policy=Some\n"), []).unwrap_err();
        assert!(err.to_string().contains("connector.client.config.override.policy"), "{err}");
    }

    #[test]
    fn converter_props_are_prefixed() {
        let c = WorkerConfig::from_sources(parse_properties("value.converter=StringConverter\nvalue.converter.schemas.enable=false\n"), [])
            .unwrap();
        let (class, props) = c.value_converter();
        assert_eq!(class, "StringConverter");
        assert_eq!(props["schemas.enable"], "false");
        assert_eq!(c.key_converter().0, DEFAULT_CONVERTER);
    }
}
