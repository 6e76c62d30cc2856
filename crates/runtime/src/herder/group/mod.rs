//! Group membership: several workers with the same `group.id` form one Connect cluster.
//! Each joins the Kafka consumer group `group.id` with protocol type `connect` (which
//! librdkafka cannot do, hence our own client over `kafka-protocol`); the coordinator
//! elects a leader, the leader deals every connector and task over the members, and each
//! worker runs only its share.
//!
//! `connect.protocol` picks how a rebalance moves work, as in Connect:
//! - `eager` (protocol `default`, version 0): every worker stops everything before it
//!   rejoins, and the leader deals everything afresh.
//! - `compatible` (version 1) and `sessioned` (Connect's default; version 2, which adds
//!   signed inter-worker requests, see [`crate::herder::session`]): incremental cooperative
//!   rebalancing. Workers keep running through a rebalance; only what moves stops. A worker
//!   that departs leaves its work unassigned for up to `scheduled.rebalance.max.delay.ms`,
//!   waiting for it to return. A worker offers its protocol and every older one, so a group
//!   with an older member falls back to what all members offer.
//!
//! - [`protocol`]: Connect's metadata and assignment bytes (versions 0, 1 and 2).
//! - [`assignor`]: Connect's eager round-robin assignment.
//! - [`cooperative`]: Connect's incremental cooperative assignment and its scheduled delay.
//! - [`member`]: the join/sync/heartbeat/leave loop, driving a [`member::GroupWorker`].
//!
//! - [`security`]: TLS and SASL (PLAIN, SCRAM) with the worker's client security keys.

pub mod assignor;
mod connection;
pub mod cooperative;
pub mod member;
pub mod protocol;
pub mod security;
pub mod worker;

use std::collections::BTreeMap;
use std::time::Duration;

use protocol::ConnectProtocol;
use security::GroupSecurity;

/// Connect's defaults for the worker keys of the same names.
pub const DEFAULT_SESSION_TIMEOUT: Duration = Duration::from_millis(10_000);
pub const DEFAULT_HEARTBEAT_INTERVAL: Duration = Duration::from_millis(3_000);
pub const DEFAULT_REBALANCE_TIMEOUT: Duration = Duration::from_millis(60_000);
pub const DEFAULT_SCHEDULED_REBALANCE_MAX_DELAY: Duration = Duration::from_millis(300_000);
pub const DEFAULT_CONNECT_PROTOCOL: ConnectProtocol = ConnectProtocol::Sessioned;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupSettings {
    pub bootstrap: Vec<String>,
    pub group_id: String,
    pub client_id: String,
    pub session_timeout: Duration,
    pub heartbeat_interval: Duration,
    pub rebalance_timeout: Duration,
    /// `connect.protocol` as configured.
    pub protocol: ConnectProtocol,
    /// `scheduled.rebalance.max.delay.ms`.
    pub max_delay: Duration,
    /// TLS and SASL from `security.protocol`, `ssl.*`, `sasl.*`.
    pub security: GroupSecurity,
    /// `inter.worker.*`: signed internal requests once the group is sessioned.
    pub signing: crate::herder::session::SigningSettings,
}

impl GroupSettings {
    /// From `bootstrap.servers`, `group.id`, `session.timeout.ms`, `heartbeat.interval.ms`,
    /// `rebalance.timeout.ms`, `connect.protocol`, `scheduled.rebalance.max.delay.ms`,
    /// `client.id` and the client security keys (`security.protocol`, `ssl.*`, `sasl.*`).
    pub fn from_worker_props(props: &BTreeMap<String, String>) -> Result<Self, String> {
        let get = |k: &str| props.get(k).map(|v| v.trim()).filter(|v| !v.is_empty());
        let bootstrap: Vec<String> = get("bootstrap.servers")
            .ok_or("bootstrap.servers is required for group membership")?
            .split(',')
            .map(|s| s.trim())
            .filter(|s| !s.is_empty())
            .map(|s| s.rsplit_once("://").map_or(s, |(_, a)| a).to_owned())
            .collect();
        let group_id = get("group.id").ok_or("group.id is required for group membership")?.to_owned();
        // The worker's top-level client keys, as every other client reads them; `admin.*`
        // and the like are not the membership client's.
        let top_level: BTreeMap<String, String> = props
            .iter()
            .filter(|(k, _)| k.as_str() == "security.protocol" || k.starts_with("ssl.") || k.starts_with("sasl."))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let clients = crate::log::kafka::settings::from_worker_props(&top_level).map_err(|e| e.to_string())?;
        let security = GroupSecurity::from_settings(&clients.admin)?;
        let ms = |k: &str, default: Duration| -> Result<Duration, String> {
            match get(k) {
                None => Ok(default),
                Some(v) => v
                    .parse::<u64>()
                    .ok()
                    .filter(|v| *v > 0)
                    .map(Duration::from_millis)
                    .ok_or_else(|| format!("{k} must be a positive number of milliseconds, got {v:?}")),
            }
        };
        let protocol = match get("connect.protocol") {
            None => DEFAULT_CONNECT_PROTOCOL,
            Some(v) => ConnectProtocol::from_config(v)
                .ok_or_else(|| format!("connect.protocol must be one of eager, compatible, sessioned; got {v:?}"))?,
        };
        let max_delay = match get("scheduled.rebalance.max.delay.ms") {
            None => DEFAULT_SCHEDULED_REBALANCE_MAX_DELAY,
            Some(v) => v
                .parse::<u32>()
                .ok()
                .filter(|v| *v <= i32::MAX as u32)
                .map(|v| Duration::from_millis(v.into()))
                .ok_or_else(|| format!("scheduled.rebalance.max.delay.ms must be between 0 and {} milliseconds, got {v:?}", i32::MAX))?,
        };
        let s = Self {
            security,
            protocol,
            max_delay,
            bootstrap,
            client_id: get("client.id").map(str::to_owned).unwrap_or_else(|| format!("connect-{group_id}")),
            group_id,
            session_timeout: ms("session.timeout.ms", DEFAULT_SESSION_TIMEOUT)?,
            heartbeat_interval: ms("heartbeat.interval.ms", DEFAULT_HEARTBEAT_INTERVAL)?,
            rebalance_timeout: ms("rebalance.timeout.ms", DEFAULT_REBALANCE_TIMEOUT)?,
            signing: crate::herder::session::SigningSettings::from_worker_props(props)?,
        };
        if s.heartbeat_interval >= s.session_timeout {
            return Err("heartbeat.interval.ms must be lower than session.timeout.ms".to_owned());
        }
        Ok(s)
    }

    /// The protocols this worker offers, in order of preference: the configured one and
    /// every older one, as Connect's workers do.
    pub fn offered_protocols(&self) -> Vec<ConnectProtocol> {
        match self.protocol {
            ConnectProtocol::Eager => vec![ConnectProtocol::Eager],
            ConnectProtocol::Compatible => vec![ConnectProtocol::Compatible, ConnectProtocol::Eager],
            ConnectProtocol::Sessioned => vec![ConnectProtocol::Sessioned, ConnectProtocol::Compatible, ConnectProtocol::Eager],
        }
    }

    /// Timeout of a request that the coordinator answers at once.
    fn request_timeout(&self) -> Duration {
        self.session_timeout.max(Duration::from_secs(5))
    }
}

/// Why a membership round failed.
#[derive(Debug, thiserror::Error)]
pub enum GroupError {
    #[error("bootstrap.servers lists no broker")]
    NoBootstrap,
    #[error("cannot talk to {addr}: {source}")]
    Io { addr: String, source: std::io::Error },
    #[error("TLS to {addr} failed: {message}")]
    Tls { addr: String, message: String },
    #[error("SASL authentication with {addr} failed: {message}")]
    Authentication { addr: String, message: String },
    #[error("{what} to {addr} timed out")]
    Timeout { what: &'static str, addr: String },
    #[error("{what} failed: {error}")]
    Broker { what: &'static str, error: kafka_protocol::ResponseError },
    #[error("cannot encode a group request: {0}")]
    Encode(String),
    #[error("cannot decode a group response: {0}")]
    Decode(String),
    #[error("{0}")]
    Malformed(String),
}

impl GroupError {
    /// The broker refused this worker's certificate checks or credentials: retrying
    /// with the same settings cannot help.
    pub fn is_refusal(&self) -> bool {
        matches!(self, Self::Tls { .. } | Self::Authentication { .. })
    }

    fn encode(e: impl std::fmt::Display) -> Self {
        Self::Encode(e.to_string())
    }
    fn decode(e: impl std::fmt::Display) -> Self {
        Self::Decode(e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_take_connects_keys_and_defaults() {
        let props: BTreeMap<String, String> =
            [("bootstrap.servers", "PLAINTEXT://a:1, b:2"), ("group.id", "g"), ("session.timeout.ms", "6000")]
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect();
        let s = GroupSettings::from_worker_props(&props).unwrap();
        assert_eq!(s.bootstrap, ["a:1", "b:2"]);
        assert_eq!(
            (s.session_timeout, s.heartbeat_interval, s.rebalance_timeout),
            (Duration::from_secs(6), DEFAULT_HEARTBEAT_INTERVAL, DEFAULT_REBALANCE_TIMEOUT)
        );
        let mut bad = props.clone();
        bad.insert("heartbeat.interval.ms".into(), "7000".into());
        assert!(GroupSettings::from_worker_props(&bad).unwrap_err().contains("heartbeat.interval.ms"));
        bad.remove("heartbeat.interval.ms");
        bad.insert("security.protocol".into(), "SASL_SSL".into());
        bad.insert("sasl.mechanism".into(), "OAUTHBEARER".into());
        assert!(GroupSettings::from_worker_props(&bad).unwrap_err().contains("sasl.mechanism=OAUTHBEARER"));
        bad.insert("sasl.mechanism".into(), "SCRAM-SHA-256".into());
        bad.insert(
            "sasl.jaas.config".into(),
            r#"org.apache.kafka.common.security.scram.ScramLoginModule required username="w" password="s3cret";"#.into(),
        );
        bad.insert("ssl.endpoint.identification.algorithm".into(), "".into());
        let s = GroupSettings::from_worker_props(&bad).unwrap();
        let sasl = s.security.sasl.as_ref().unwrap();
        assert_eq!((sasl.username.as_str(), sasl.password.expose()), ("w", "s3cret"), "sasl.jaas.config gives the credentials");
        assert!(s.security.tls.is_some());
        assert!(!format!("{s:?}").contains("s3cret"));
    }

    #[test]
    fn protocol_and_scheduled_delay_take_connects_keys_and_defaults() {
        let mut props: BTreeMap<String, String> =
            [("bootstrap.servers", "a:1"), ("group.id", "g")].into_iter().map(|(k, v)| (k.to_owned(), v.to_owned())).collect();
        let s = GroupSettings::from_worker_props(&props).unwrap();
        assert_eq!((s.protocol, s.max_delay), (ConnectProtocol::Sessioned, Duration::from_secs(300)));
        assert_eq!(s.offered_protocols(), [ConnectProtocol::Sessioned, ConnectProtocol::Compatible, ConnectProtocol::Eager]);
        props.insert("connect.protocol".into(), "EAGER".into());
        props.insert("scheduled.rebalance.max.delay.ms".into(), "0".into());
        let s = GroupSettings::from_worker_props(&props).unwrap();
        assert_eq!((s.offered_protocols(), s.max_delay), (vec![ConnectProtocol::Eager], Duration::ZERO));
        props.insert("connect.protocol".into(), "cooperative".into());
        assert!(GroupSettings::from_worker_props(&props).unwrap_err().contains("connect.protocol"));
        props.insert("connect.protocol".into(), "compatible".into());
        props.insert("scheduled.rebalance.max.delay.ms".into(), "-1".into());
        assert!(GroupSettings::from_worker_props(&props).unwrap_err().contains("scheduled.rebalance.max.delay.ms"));
    }
}
