//! The herder: the one owner of connector and task lifecycle on a worker. REST calls it;
//! it stores configs, target states and offsets in the internal topics and starts, stops
//! and restarts connectors and tasks.
//!
//! [`Herder`] is the whole surface the REST API needs, so standalone and (later)
//! distributed mode can each implement it.

use std::collections::{BTreeMap, BTreeSet};

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use sluice_api::{ConfigDef, ConnectorKind, Props};

/// Connect's connector and task states.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum State {
    Unassigned,
    Running,
    Paused,
    Stopped,
    Failed,
    Restarting,
    /// Written when a connector is deleted; never shown through REST.
    Destroyed,
}

impl State {
    pub fn name(self) -> &'static str {
        match self {
            Self::Unassigned => "UNASSIGNED",
            Self::Running => "RUNNING",
            Self::Paused => "PAUSED",
            Self::Stopped => "STOPPED",
            Self::Failed => "FAILED",
            Self::Restarting => "RESTARTING",
            Self::Destroyed => "DESTROYED",
        }
    }
}

/// What the user asked a connector to be: Connect's target state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum TargetState {
    Started,
    Paused,
    Stopped,
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ConnectorTaskId {
    pub connector: String,
    pub task: u32,
}

/// `GET /connectors/{name}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ConnectorInfo {
    pub name: String,
    pub config: Props,
    pub tasks: Vec<ConnectorTaskId>,
    #[serde(rename = "type")]
    pub kind: ConnectorKind,
}

/// Field order and the omitted empty `trace` follow Connect's JSON.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StateInfo {
    pub state: State,
    pub worker_id: String,
    /// The plugin's version, as Connect 4 shows it in REST answers (KIP-891); set when the
    /// herder answers, not stored in the status topic.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    #[serde(skip_serializing_if = "trace_is_empty")]
    pub trace: Option<String>,
}

fn trace_is_empty(trace: &Option<String>) -> bool {
    trace.as_deref().is_none_or(str::is_empty)
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TaskStateInfo {
    pub id: u32,
    #[serde(flatten)]
    pub state: StateInfo,
}

/// `GET /connectors/{name}/status`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ConnectorStateInfo {
    pub name: String,
    pub connector: StateInfo,
    pub tasks: Vec<TaskStateInfo>,
    #[serde(rename = "type")]
    pub kind: ConnectorKind,
}

/// `GET /connectors/{name}/tasks` entry.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TaskInfo {
    pub id: ConnectorTaskId,
    pub config: Props,
}

/// One source partition's offset, or a sink's `{kafka_topic, kafka_partition}` →
/// `{kafka_offset}`. `offset: None` (JSON null) in an alter request removes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConnectorOffset {
    pub partition: serde_json::Map<String, serde_json::Value>,
    pub offset: Option<serde_json::Map<String, serde_json::Value>>,
}

/// `GET /connectors/{name}/restarts`: the automatic restarts of a connector and its tasks
/// run by this worker (sluice's own endpoint; see [`crate::worker::restart`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RestartsInfo {
    pub name: String,
    /// The worker answering: in a group, each worker knows the restarts of what it runs.
    pub worker_id: String,
    /// `None` when the connector instance never failed here.
    pub connector: Option<crate::worker::restart::RestartRecord>,
    /// Tasks that failed here at least once.
    pub tasks: Vec<TaskRestarts>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TaskRestarts {
    pub id: u32,
    #[serde(flatten)]
    pub record: crate::worker::restart::RestartRecord,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RestartRequest {
    pub include_tasks: bool,
    pub only_failed: bool,
}

/// A plugin as listed by `GET /connector-plugins`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PluginInfo {
    pub class: String,
    /// `source`, `sink`, `transformation`, `predicate`, `converter`, `header_converter`.
    #[serde(rename = "type")]
    pub kind: String,
    pub version: String,
}

/// Errors a herder call can end in, each with its HTTP status.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HerderError {
    /// 404.
    #[error("{0}")]
    NotFound(String),
    /// 409: the connector exists, or a rebalance is under way.
    #[error("{0}")]
    Conflict(String),
    /// 400: invalid input; the message names the offending key.
    #[error("{0}")]
    BadRequest(String),
    /// 403: a signed internal request whose signature does not match.
    #[error("{0}")]
    Forbidden(String),
    /// 503: not able to answer yet (no session key read).
    #[error("{0}")]
    Unavailable(String),
    /// 500.
    #[error("{0}")]
    Internal(String),
}

impl HerderError {
    pub fn status_code(&self) -> u16 {
        match self {
            Self::NotFound(_) => 404,
            Self::Conflict(_) => 409,
            Self::BadRequest(_) => 400,
            Self::Forbidden(_) => 403,
            Self::Unavailable(_) => 503,
            Self::Internal(_) => 500,
        }
    }

    pub fn connector_not_found(name: &str) -> Self {
        Self::NotFound(format!("Connector {name} not found"))
    }
}

pub type HerderResult<T> = Result<T, HerderError>;

/// The outcome of `PUT /connector-plugins/{class}/config/validate` (Connect's `ConfigInfos`).
#[derive(Debug, Clone, PartialEq)]
pub struct ConfigInfos {
    pub name: String,
    pub groups: Vec<String>,
    /// Definition (when the key is defined) and validation result of each key.
    pub configs: Vec<(Option<sluice_api::ConfigKey>, sluice_api::ConfigValue)>,
}

impl ConfigInfos {
    pub fn error_count(&self) -> usize {
        self.configs.iter().map(|(_, v)| v.errors.len()).sum()
    }
}

#[async_trait]
pub trait Herder: Send + Sync + 'static {
    /// `host:port` this worker is known by in statuses.
    fn worker_id(&self) -> String;

    /// Whether start-up is complete and the worker serves requests (`GET /health`).
    fn is_ready(&self) -> bool;

    /// Whether the herder can take a request within `within` (`GET /health`'s probe, as
    /// Connect's no-op through its herder thread).
    async fn responsive(&self, _within: std::time::Duration) -> bool {
        true
    }

    /// In a group, on a follower: the leader's REST URL, where writes are forwarded.
    fn leader_url(&self) -> Option<String> {
        None
    }

    /// In a group: true while a rebalance is under way.
    fn rebalancing(&self) -> bool {
        false
    }

    /// In a group: how long this worker has been without a completed assignment (a
    /// rebalance under way, or the group coordinator out of reach); `None` when it has one.
    fn ensuring_membership_for(&self) -> Option<std::time::Duration> {
        None
    }

    /// Whether REST writes can be taken now (else 409). In a group: once this worker knows
    /// a leader to send them to. A rebalance does not stop them: every write is a record in
    /// the config topic, which the next assignment takes in whenever it lands.
    fn takes_writes(&self) -> bool {
        !self.rebalancing()
    }

    async fn connectors(&self) -> Vec<String>;

    async fn connector_info(&self, name: &str) -> HerderResult<ConnectorInfo>;

    async fn connector_config(&self, name: &str) -> HerderResult<Props>;

    /// The stored config with secrets as stored, for the worker's own comparisons
    /// (`connectors.dir`); never served through REST.
    async fn stored_connector_config(&self, name: &str) -> HerderResult<Props> {
        self.connector_config(name).await
    }

    /// Creates (`Ok((true, …))`) or, when `allow_replace`, updates (`Ok((false, …))`) a
    /// connector. A new connector starts in `initial_state` (default STARTED).
    async fn put_connector_config(
        &self,
        name: &str,
        config: Props,
        allow_replace: bool,
        initial_state: Option<TargetState>,
    ) -> HerderResult<(bool, ConnectorInfo)>;

    /// Merges `patch` into the existing config; a `None` value removes the key.
    async fn patch_connector_config(&self, name: &str, patch: BTreeMap<String, Option<String>>) -> HerderResult<ConnectorInfo>;

    async fn delete_connector(&self, name: &str) -> HerderResult<()>;

    async fn connector_status(&self, name: &str) -> HerderResult<ConnectorStateInfo>;

    async fn task_status(&self, id: &ConnectorTaskId) -> HerderResult<TaskStateInfo>;

    async fn task_configs(&self, name: &str) -> HerderResult<Vec<TaskInfo>>;

    /// Restarts the connector (and tasks per `req`). `Ok(None)` when only the connector
    /// instance was restarted (REST 204), else the status with RESTARTING entries (202).
    async fn restart_connector(&self, name: &str, req: RestartRequest) -> HerderResult<Option<ConnectorStateInfo>>;

    async fn restart_task(&self, id: &ConnectorTaskId) -> HerderResult<()>;

    /// `GET /metrics`: this worker's metrics in Prometheus' text format.
    async fn metrics(&self) -> Option<String> {
        None
    }

    /// `GET /connectors/{name}/scaling`: task counts and a recommendation from what this
    /// worker sees ([`crate::scaling`]).
    async fn scaling(&self, name: &str) -> HerderResult<crate::scaling::ScalingInfo> {
        Err(HerderError::connector_not_found(name))
    }

    /// `PUT /admin/loggers/{name}?scope=cluster` (KIP-976): in a group, writes the level to
    /// the config topic, from which every worker applies it (`Ok(true)`); alone, `Ok(false)`
    /// and the caller applies it here, this worker being the whole cluster.
    async fn set_cluster_logger_level(&self, _namespace: &str, _level: &str) -> HerderResult<bool> {
        Ok(false)
    }

    /// The lag (records) of each sink task this worker runs, summed over its partitions.
    async fn task_lags(&self) -> Vec<(ConnectorTaskId, f64)> {
        Vec::new()
    }

    /// The automatic restarts of the connector and its tasks on this worker.
    async fn restarts(&self, name: &str) -> HerderResult<RestartsInfo> {
        Err(HerderError::connector_not_found(name))
    }

    async fn set_target_state(&self, name: &str, state: TargetState) -> HerderResult<()>;

    /// Topics the connector has used since the last reset.
    async fn connector_topics(&self, name: &str) -> HerderResult<Vec<String>>;

    async fn reset_connector_topics(&self, name: &str) -> HerderResult<()>;

    async fn connector_offsets(&self, name: &str) -> HerderResult<Vec<ConnectorOffset>>;

    /// KIP-875: only while the connector is STOPPED. Returns the success message.
    async fn alter_connector_offsets(&self, name: &str, offsets: Vec<ConnectorOffset>) -> HerderResult<String>;

    /// KIP-875: only while the connector is STOPPED. Returns the success message.
    async fn reset_connector_offsets(&self, name: &str) -> HerderResult<String>;

    /// Every plugin; connectors only when `connectors_only`.
    fn plugins(&self, connectors_only: bool) -> Vec<PluginInfo>;

    /// The configuration definition of a plugin, by class name or alias.
    fn plugin_config(&self, class: &str) -> HerderResult<ConfigDef>;

    /// Validates a connector config (`connector.class` must name the plugin).
    async fn validate(&self, props: &Props) -> HerderResult<ConfigInfos>;

    /// Kafka Connect's internal `POST /connectors/{name}/tasks`: the task configs the
    /// worker running the connector generated (`body`, a JSON list of string maps), for the
    /// leader to write; signed when the group is sessioned ([`session`]).
    async fn put_task_configs_internal(&self, name: &str, body: &[u8], signature: Option<session::InternalSignature>) -> HerderResult<()> {
        let _ = (name, body, signature);
        Err(HerderError::BadRequest("Kafka Connect in standalone mode does not support externally setting task configurations.".into()))
    }

    /// Kafka Connect's internal `PUT /connectors/{name}/fence` (exactly-once source
    /// support): the leader fences the connector's earlier task generations.
    async fn fence_zombies_internal(&self, name: &str, body: &[u8], signature: Option<session::InternalSignature>) -> HerderResult<()> {
        let _ = (name, body, signature);
        Err(HerderError::BadRequest("Kafka Connect in standalone mode does not support fencing zombie source tasks.".into()))
    }
}

/// A set of connectors and tasks (Connect's `ConnectorsAndTasks`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Units {
    pub connectors: BTreeSet<String>,
    pub tasks: BTreeSet<ConnectorTaskId>,
}

impl Units {
    pub fn is_empty(&self) -> bool {
        self.connectors.is_empty() && self.tasks.is_empty()
    }

    #[cfg_attr(not(feature = "kafka"), allow(dead_code))] // used by the cooperative assignor
    pub(crate) fn minus(&self, other: &Units) -> Units {
        Units {
            connectors: self.connectors.difference(&other.connectors).cloned().collect(),
            tasks: self.tasks.difference(&other.tasks).cloned().collect(),
        }
    }

    pub fn add(&mut self, other: &Units) {
        self.connectors.extend(other.connectors.iter().cloned());
        self.tasks.extend(other.tasks.iter().cloned());
    }

    #[cfg_attr(not(feature = "kafka"), allow(dead_code))] // used by the cooperative assignor
    pub(crate) fn remove(&mut self, other: &Units) {
        self.connectors.retain(|c| !other.connectors.contains(c));
        self.tasks.retain(|t| !other.tasks.contains(t));
    }

    /// Every connector with its tasks `0..n`.
    pub fn configured(connectors: &BTreeMap<String, u32>) -> Units {
        Units {
            connectors: connectors.keys().cloned().collect(),
            tasks: connectors.iter().flat_map(|(c, n)| (0..*n).map(move |task| ConnectorTaskId { connector: c.clone(), task })).collect(),
        }
    }
}

#[cfg(feature = "kafka")]
pub mod group;
pub mod session;
pub mod standalone;
mod task_configs;
pub mod validate;
