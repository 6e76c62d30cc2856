//! Exactly-once source support (KIP-618): the worker's `exactly.once.source.support` and a
//! source connector's `exactly.once.support`, `transaction.boundary` and
//! `transaction.boundary.interval.ms`, parsed and checked with Connect's messages.
//!
//! With support `enabled` (distributed mode on Kafka only), each source task writes its
//! records and their source offsets in one Kafka transaction under the transactional id
//! `<group.id>-<connector>-<task>`; see [`crate::task::source`] for the loop.

use std::time::Duration;

use sluice_api::{ConnectError, ConnectResult, Props};

pub const WORKER_KEY: &str = "exactly.once.source.support";
pub const SUPPORT_KEY: &str = "exactly.once.support";
pub const BOUNDARY_KEY: &str = "transaction.boundary";
pub const BOUNDARY_INTERVAL_KEY: &str = "transaction.boundary.interval.ms";
/// Connect's per-connector offsets topic; only the worker's offsets topic exists here.
pub const OFFSETS_TOPIC_KEY: &str = "offsets.storage.topic";

/// The worker's `exactly.once.source.support`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WorkerSupport {
    #[default]
    Disabled,
    /// Connect uses it to roll exactly-once out over a running cluster; here tasks run as with
    /// `disabled` (there is no fencing of earlier task generations to prepare).
    Preparing,
    Enabled,
}

impl WorkerSupport {
    /// Parses the worker property (case-insensitive, as Connect's validator is).
    pub fn from_worker_props(props: &Props) -> ConnectResult<Self> {
        match props.get(WORKER_KEY).map(|v| v.trim().to_ascii_lowercase()).as_deref() {
            None | Some("disabled") => Ok(Self::Disabled),
            Some("preparing") => Ok(Self::Preparing),
            Some("enabled") => Ok(Self::Enabled),
            Some(_) => Err(ConnectError::config(
                WORKER_KEY,
                format!(
                    "Invalid value {} for configuration {WORKER_KEY}: String must be one of (case insensitive): DISABLED, PREPARING, ENABLED",
                    props[WORKER_KEY]
                ),
            )),
        }
    }
}

/// `transaction.boundary`: when a task's transaction commits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Boundary {
    /// After every non-empty batch `poll` returns.
    Poll,
    /// Once this much time has passed since the transaction began (checked after each poll).
    Interval(Duration),
}

/// The transaction boundary of a source connector's tasks; `flush_interval` is the worker's
/// `offset.flush.interval.ms`, the default interval. Call on a validated config.
pub fn boundary(config: &Props, flush_interval: Duration) -> ConnectResult<Boundary> {
    match config.get(BOUNDARY_KEY).map(|v| v.trim().to_ascii_lowercase()).as_deref() {
        None | Some("") | Some("poll") => Ok(Boundary::Poll),
        Some("interval") => {
            let interval = match config.get(BOUNDARY_INTERVAL_KEY).map(|v| v.trim()).filter(|v| !v.is_empty()) {
                None => flush_interval,
                Some(v) => Duration::from_millis(v.parse::<u64>().map_err(|_| {
                    ConnectError::config(
                        BOUNDARY_INTERVAL_KEY,
                        format!("Invalid value {v} for configuration {BOUNDARY_INTERVAL_KEY}: Value must be at least 0"),
                    )
                })?),
            };
            Ok(Boundary::Interval(interval))
        }
        Some(_) => Err(ConnectError::config(BOUNDARY_KEY, CONNECTOR_BOUNDARY_ERROR.to_owned())),
    }
}

/// A connector's answer to "can you provide exactly-once delivery with this configuration?"
/// (Connect's `SourceConnector::exactlyOnceSupport`).
pub use sluice_api::ExactlyOnceSupport;

const CONNECTOR_BOUNDARY_ERROR: &str = "The connector does not support connector-defined transaction boundaries with the given configuration. Please reconfigure it to use a different transaction boundary definition.";

/// Checks that need the connector and the worker, as Connect's distributed herder makes
/// them: `(key, error)` pairs. `support` is what the connector says of this config.
pub fn validate(
    config: &Props,
    worker_enabled: bool,
    support: Option<ExactlyOnceSupport>,
    worker_offsets_topic: &str,
) -> Vec<(String, String)> {
    let mut errors = Vec::new();
    let level = config.get(SUPPORT_KEY).map(|v| v.trim().to_ascii_lowercase());
    if level.as_deref() == Some("required") {
        if !worker_enabled {
            errors.push((SUPPORT_KEY.to_owned(), "This worker does not have exactly-once source support enabled.".to_owned()));
        }
        match support {
            Some(ExactlyOnceSupport::Supported) => {}
            Some(ExactlyOnceSupport::Unsupported) => errors.push((
                SUPPORT_KEY.to_owned(),
                "The connector does not support exactly-once semantics with the provided configuration.".to_owned(),
            )),
            None => errors.push((
                SUPPORT_KEY.to_owned(),
                "The connector does not implement the API required for preflight validation of exactly-once source support. Please consult the documentation for the connector to determine whether it supports exactly-once semantics, and then consider reconfiguring the connector to use the value \"requested\" for this property (which will disable this preflight check and allow the connector to be created).".to_owned(),
            )),
        }
    }
    // No connector here defines its own transaction boundaries (Connect's
    // `canDefineTransactionBoundaries` answers UNSUPPORTED by default).
    if config.get(BOUNDARY_KEY).is_some_and(|v| v.trim().eq_ignore_ascii_case("connector")) {
        errors.push((BOUNDARY_KEY.to_owned(), CONNECTOR_BOUNDARY_ERROR.to_owned()));
    }
    if let Some(topic) = config.get(OFFSETS_TOPIC_KEY).map(|t| t.trim()).filter(|t| !t.is_empty() && *t != worker_offsets_topic) {
        errors.push((
            OFFSETS_TOPIC_KEY.to_owned(),
            format!(
                "Invalid value {topic} for configuration {OFFSETS_TOPIC_KEY}: connector-specific offsets topics are not supported; source offsets are kept in the worker's offsets topic {worker_offsets_topic} (leave this unset or set it to that topic)"
            ),
        ));
    }
    errors
}

/// The transactional id of a source task, as Connect's `Worker::taskTransactionalId` forms it.
pub fn transactional_id(group_id: &str, connector: &str, task: u32) -> String {
    format!("{group_id}-{connector}-{task}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn props(pairs: &[(&str, &str)]) -> Props {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    }

    #[test]
    fn worker_key_takes_connects_values() {
        assert_eq!(WorkerSupport::from_worker_props(&Props::new()).unwrap(), WorkerSupport::Disabled);
        assert_eq!(WorkerSupport::from_worker_props(&props(&[(WORKER_KEY, "ENABLED")])).unwrap(), WorkerSupport::Enabled);
        assert_eq!(WorkerSupport::from_worker_props(&props(&[(WORKER_KEY, "preparing")])).unwrap(), WorkerSupport::Preparing);
        let e = WorkerSupport::from_worker_props(&props(&[(WORKER_KEY, "yes")])).unwrap_err().to_string();
        assert!(e.contains("Invalid value yes for configuration exactly.once.source.support"), "{e}");
    }

    #[test]
    fn boundaries() {
        let flush = Duration::from_secs(60);
        assert_eq!(boundary(&Props::new(), flush).unwrap(), Boundary::Poll);
        assert_eq!(boundary(&props(&[(BOUNDARY_KEY, "interval")]), flush).unwrap(), Boundary::Interval(flush));
        assert_eq!(
            boundary(&props(&[(BOUNDARY_KEY, "Interval"), (BOUNDARY_INTERVAL_KEY, "250")]), flush).unwrap(),
            Boundary::Interval(Duration::from_millis(250))
        );
        assert!(boundary(&props(&[(BOUNDARY_KEY, "connector")]), flush).is_err());
    }

    #[test]
    fn required_needs_the_worker_and_the_connector() {
        let required = props(&[(SUPPORT_KEY, "required")]);
        assert!(validate(&required, true, Some(ExactlyOnceSupport::Supported), "connect-offsets").is_empty());
        let e = validate(&required, false, Some(ExactlyOnceSupport::Supported), "connect-offsets");
        assert_eq!(e, vec![(SUPPORT_KEY.to_owned(), "This worker does not have exactly-once source support enabled.".to_owned())]);
        let e = validate(&required, true, Some(ExactlyOnceSupport::Unsupported), "connect-offsets");
        assert!(e[0].1.starts_with("The connector does not support exactly-once semantics"), "{e:?}");
        let e = validate(&required, true, None, "connect-offsets");
        assert!(e[0].1.contains("preflight validation"), "{e:?}");
        // `requested` is never refused.
        assert!(validate(&props(&[(SUPPORT_KEY, "requested")]), false, None, "connect-offsets").is_empty());
    }

    #[test]
    fn connector_boundaries_and_other_offsets_topics_are_refused() {
        let e = validate(&props(&[(BOUNDARY_KEY, "connector")]), true, Some(ExactlyOnceSupport::Supported), "connect-offsets");
        assert_eq!(e[0].0, BOUNDARY_KEY);
        assert!(validate(&props(&[(OFFSETS_TOPIC_KEY, "connect-offsets")]), true, None, "connect-offsets").is_empty());
        let e = validate(&props(&[(OFFSETS_TOPIC_KEY, "mine")]), true, None, "connect-offsets");
        assert_eq!(e[0].0, OFFSETS_TOPIC_KEY);
    }

    #[test]
    fn transactional_ids_are_connects() {
        assert_eq!(transactional_id("connect-cluster", "orders", 3), "connect-cluster-orders-3");
    }
}
