//! Group membership: several workers with the same `group.id` form one Connect cluster.
//! Each joins the Kafka consumer group `group.id` with protocol type `connect` (which
//! librdkafka cannot do, hence our own client over `kafka-protocol`); the coordinator
//! elects a leader, the leader deals every connector and task over the members, and each
//! worker runs only its share.
//!
//! - [`protocol`]: Connect's metadata and assignment bytes (eager protocol, version 0).
//! - [`assignor`]: Connect's eager round-robin assignment.
//! - [`member`]: the join/sync/heartbeat/leave loop, driving a [`member::GroupWorker`].
//!
//! Plaintext TCP only for now: `security.protocol` other than PLAINTEXT is refused by
//! [`GroupSettings::from_worker_props`].

pub mod assignor;
mod connection;
pub mod member;
pub mod protocol;
pub mod worker;

use std::collections::BTreeMap;
use std::time::Duration;

/// Connect's defaults for the worker keys of the same names.
pub const DEFAULT_SESSION_TIMEOUT: Duration = Duration::from_millis(10_000);
pub const DEFAULT_HEARTBEAT_INTERVAL: Duration = Duration::from_millis(3_000);
pub const DEFAULT_REBALANCE_TIMEOUT: Duration = Duration::from_millis(60_000);

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupSettings {
    pub bootstrap: Vec<String>,
    pub group_id: String,
    pub client_id: String,
    pub session_timeout: Duration,
    pub heartbeat_interval: Duration,
    pub rebalance_timeout: Duration,
}

impl GroupSettings {
    /// From `bootstrap.servers`, `group.id`, `session.timeout.ms`, `heartbeat.interval.ms`,
    /// `rebalance.timeout.ms` (and `client.id`).
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
        if let Some(p) = get("security.protocol") {
            if !p.eq_ignore_ascii_case("PLAINTEXT") {
                return Err(format!("security.protocol={p}: group membership speaks PLAINTEXT only for now; use a PLAINTEXT listener"));
            }
        }
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
        let s = Self {
            bootstrap,
            client_id: get("client.id").map(str::to_owned).unwrap_or_else(|| format!("connect-{group_id}")),
            group_id,
            session_timeout: ms("session.timeout.ms", DEFAULT_SESSION_TIMEOUT)?,
            heartbeat_interval: ms("heartbeat.interval.ms", DEFAULT_HEARTBEAT_INTERVAL)?,
            rebalance_timeout: ms("rebalance.timeout.ms", DEFAULT_REBALANCE_TIMEOUT)?,
        };
        if s.heartbeat_interval >= s.session_timeout {
            return Err("heartbeat.interval.ms must be lower than session.timeout.ms".to_owned());
        }
        Ok(s)
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
        bad.insert("security.protocol".into(), "SASL_SSL".into());
        assert!(GroupSettings::from_worker_props(&bad).unwrap_err().contains("PLAINTEXT"));
    }
}
