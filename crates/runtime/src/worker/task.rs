//! The worker side of tasks (Kafka Connect's `Worker` / `WorkerTask`): building a task from
//! its stored configs, running it, and supervising it. The herder decides which tasks this
//! worker runs; everything about running one lives here, for standalone and distributed
//! mode alike.
//!
//! ```text
//! herder ──start_task(spec)──▶ supervise ─┬─▶ build (converters, transforms, log, …) ─▶ run
//!                                          │      every state change ─▶ TaskListener
//!                                          └─ on failure: FAILED ─▶ restart policy ─▶ RESTARTING ─▶ build again
//! ```
//!
//! A restart builds a new task instance from the configs, as a restart through REST does:
//! it resumes from the committed offsets, so nothing that was not durable is skipped.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use sluice_api::{ConnectError, ConnectorPlugin, Props, SinkTaskContext, SourceTaskContext, Task};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::config::WorkerConfig;
use super::overrides::OffsetReset;
use super::restart::{Decision, FailureClass, Policy, RestartBook, RestartPolicy, Streak, Unit};
use crate::herder::{ConnectorTaskId, State, StateInfo, TargetState};
use crate::log::{ClientOverrides, Log};
use crate::metrics::{Counters, Metrics};
use crate::store::offset::{ConnectorOffsets, OffsetStore};
use crate::store::status::StatusStore;
use crate::task::errors::ErrorPolicy;
use crate::task::exactly_once::{self, WorkerSupport};
use crate::task::rate::RateLimit;
use crate::task::sink::{SinkRunner, Subscription};
use crate::task::source::{ExactlyOnce, SourceRunner};
use crate::task::topic_creation::TopicCreator;
use crate::task::{ConverterSpec, RecordConverters, StateReporter, TaskState};
use crate::transform::TransformChain;

/// Hears every state change of the tasks a worker runs: the one place status, restarts and
/// metrics learn of them.
pub trait TaskListener: Send + Sync + 'static {
    /// The task's state, as the status topic shows it.
    fn on_state(&self, id: &ConnectorTaskId, state: State, trace: Option<String>);
    /// The task committed offsets (they are durable).
    fn on_commit(&self, _id: &ConnectorTaskId) {}
}

/// The listener the worker runs with: writes each state to the status topic.
pub struct StatusListener {
    pub status: Arc<StatusStore>,
    pub worker_id: String,
}

impl TaskListener for StatusListener {
    fn on_state(&self, id: &ConnectorTaskId, state: State, trace: Option<String>) {
        self.status.put_task(id, StateInfo { state, trace, worker_id: self.worker_id.clone(), version: None });
    }
}

/// What the herder hands over to run one task.
pub struct TaskSpec {
    pub id: ConnectorTaskId,
    pub plugin: ConnectorPlugin,
    /// The connector config as stored (providers are resolved for each start).
    pub config: Props,
    /// This task's config as stored.
    pub task_props: Props,
    /// How many tasks the connector has (a sink task's share of the partitions).
    pub task_count: u32,
    pub target: watch::Receiver<TargetState>,
}

/// A running task; stopping it is cancelling `shutdown` and awaiting `join`.
pub struct TaskHandle {
    pub shutdown: CancellationToken,
    pub join: JoinHandle<()>,
}

/// Builds, runs and supervises tasks on this worker.
pub struct Worker {
    pub config: WorkerConfig,
    pub log: Arc<dyn Log>,
    pub offsets: Arc<OffsetStore>,
    pub status: Arc<StatusStore>,
    pub worker_id: String,
    pub listener: Arc<dyn TaskListener>,
    pub restarts: Arc<RestartBook>,
    /// The worker's `restart.policy`.
    pub restart_policy: Policy,
    pub metrics: Arc<Metrics>,
}

enum Runner {
    Source(SourceRunner),
    Sink(SinkRunner),
}

impl Runner {
    /// The task's log and dead-letter topic, when it has one.
    fn dead_letter_queue(&self) -> Option<(Arc<dyn Log>, crate::task::errors::DeadLetterQueue)> {
        let (log, errors) = match self {
            Runner::Source(r) => (&r.log, &r.errors),
            Runner::Sink(r) => (&r.log, &r.errors),
        };
        errors.dlq.clone().map(|dlq| (log.clone(), dlq))
    }

    async fn run(self, shutdown: CancellationToken) -> Result<(), ConnectError> {
        create_dead_letter_topic(self.dead_letter_queue()).await?;
        match self {
            Runner::Source(r) => r.run(shutdown).await,
            Runner::Sink(r) => r.run(shutdown).await,
        }
    }
}

impl Worker {
    /// A worker writing task states to `status`.
    pub fn new(config: WorkerConfig, log: Arc<dyn Log>, offsets: Arc<OffsetStore>, status: Arc<StatusStore>) -> Self {
        let worker_id = config.worker_id();
        let restart_policy = config.restart_policy;
        let metrics = Metrics::new(config.metrics.enabled, config.metrics.naming);
        Self {
            listener: Arc::new(StatusListener { status: status.clone(), worker_id: worker_id.clone() }),
            config,
            log,
            offsets,
            status,
            worker_id,
            restarts: Arc::new(RestartBook::default()),
            restart_policy,
            metrics: Arc::new(metrics),
        }
    }

    /// A task no longer runs here (stopped for good, deleted, moved away).
    pub fn forget_task(&self, id: &ConnectorTaskId) {
        self.restarts.forget(&Unit::Task(id.clone()));
        self.metrics.task_removed(id);
    }

    /// A connector and its tasks no longer run here.
    pub fn forget_connector(&self, connector: &str) {
        self.restarts.forget_connector(connector);
        self.metrics.connector_removed(connector);
    }

    /// A connector's restart settings (its keys were validated when it was stored).
    pub fn restart_policy_of(&self, connector_config: &Props) -> RestartPolicy {
        RestartPolicy::new(self.restart_policy, connector_config).unwrap_or_else(|e| {
            tracing::warn!(error = %e, "invalid restart keys; using the worker's restart policy");
            RestartPolicy::new(self.restart_policy, &Props::new()).expect("defaults are valid")
        })
    }

    /// Starts a task under supervision. A new start (created, assigned, restarted through
    /// REST) begins a new count of automatic restarts.
    pub fn start_task(self: &Arc<Self>, spec: TaskSpec) -> TaskHandle {
        let shutdown = CancellationToken::new();
        self.restarts.started(&Unit::Task(spec.id.clone()));
        let join = tokio::spawn(self.clone().supervise(spec, shutdown.clone()));
        TaskHandle { shutdown, join }
    }

    /// Runs the task until `shutdown`, restarting it after failures per its restart policy.
    async fn supervise(self: Arc<Self>, spec: TaskSpec, shutdown: CancellationToken) {
        let id = spec.id.clone();
        let unit = Unit::Task(id.clone());
        let policy = self.restart_policy_of(&spec.config);
        let mut streak = Streak::new();
        loop {
            let committed = Arc::new(AtomicBool::new(false));
            self.metrics.count(&self.metrics.task_startup_attempts);
            let result = match self.build(&spec, committed.clone()) {
                Ok(runner) => {
                    self.metrics.count(&self.metrics.task_startup_success);
                    let initial = if *spec.target.borrow() == TargetState::Started { State::Running } else { State::Paused };
                    self.listener.on_state(&id, initial, None);
                    runner.run(shutdown.clone()).await
                }
                Err(e) => {
                    self.metrics.count(&self.metrics.task_startup_failure);
                    Err(e)
                }
            };
            let Err(error) = result else { return };
            tracing::error!(task = ?id, error = %error, "task failed");
            let trace = error.trace();
            self.listener.on_state(&id, State::Failed, Some(trace.clone()));
            if shutdown.is_cancelled() {
                return;
            }
            let count = streak.count_at_failure(&policy, committed.load(Ordering::SeqCst));
            match self.restarts.failed(&unit, trace.clone(), FailureClass::of(&error), &policy, count) {
                Decision::Stay(reason) => {
                    tracing::warn!(task = ?id, reason, "the task stays FAILED");
                    return;
                }
                Decision::Restart(delay) => {
                    tracing::info!(task = ?id, restart = count + 1, delay_ms = delay.as_millis() as u64, "restarting the failed task after a backoff");
                    self.listener.on_state(&id, State::Restarting, Some(trace));
                    tokio::select! {
                        _ = tokio::time::sleep(delay) => {}
                        _ = shutdown.cancelled() => return,
                    }
                    streak = Streak::restarted(count + 1, delay);
                    self.restarts.restarted(&unit, count + 1);
                }
            }
        }
    }

    /// The connector config with providers resolved, for running it (never stored).
    fn resolved(&self, props: &Props) -> Result<Props, ConnectError> {
        self.config.providers.resolve_all(props)
    }

    /// A new instance of the task with everything it runs with.
    fn build(&self, spec: &TaskSpec, committed: Arc<AtomicBool>) -> Result<Runner, ConnectError> {
        let id = &spec.id;
        let config = self.resolved(&spec.config)?;
        let task_props = self.resolved(&spec.task_props)?;
        let key = ConverterSpec::resolve(&config, "key.converter", self.config.key_converter());
        let value = ConverterSpec::resolve(&config, "value.converter", self.config.value_converter());
        let header = ConverterSpec::resolve(&config, "header.converter", self.config.header_converter());
        let converters = RecordConverters::build(&key, &value, &header)?;
        let metrics = self.metrics.task_started(id);
        let mut errors = ErrorPolicy::from_config(&config)?;
        errors.metrics = Counters(metrics.clone());
        let transforms = TransformChain::from_connector_config(&config)?;
        let log = self.task_log(&config, id)?;
        let state = {
            let listener = self.listener.clone();
            let id = id.clone();
            let on_commit = {
                let listener = self.listener.clone();
                let id = id.clone();
                move || {
                    committed.store(true, Ordering::SeqCst);
                    listener.on_commit(&id);
                }
            };
            StateReporter::new(move |s: TaskState| {
                let (state, trace) = match s {
                    TaskState::Running => (State::Running, None),
                    TaskState::Paused => (State::Paused, None),
                    TaskState::Retrying(trace) => (State::Running, Some(trace)),
                };
                listener.on_state(&id, state, trace);
            })
            .on_commit(on_commit)
        };
        // Task instances hold no state of the connector instance: a fresh one makes them,
        // also on a worker that does not run the connector.
        let gauges = metrics.gauges.clone();
        Ok(match (spec.plugin.create)().create_task() {
            Task::Source(task) => Runner::Source(SourceRunner {
                exactly_once: self.exactly_once(&config, id, &log)?,
                max_retries: max_retries(&config)?,
                rate: RateLimit::from_config(&config, spec.task_count)?,
                metrics,
                id: id.clone(),
                task,
                ctx: SourceTaskContext {
                    connector: id.connector.clone(),
                    task_id: id.task,
                    props: task_props,
                    offsets: Arc::new(ConnectorOffsets { store: self.offsets.clone(), connector: id.connector.clone() }),
                    shutdown: CancellationToken::new(),
                    gauges,
                },
                topic_creation: TopicCreator::from_config(self.config.topic_creation_enable, &id.connector, &config)?,
                log,
                transforms,
                converters,
                errors,
                offsets: self.offsets.clone(),
                status: self.status.clone(),
                flush_interval: self.config.offset_flush_interval,
                flush_timeout: self.config.offset_flush_timeout,
                target: spec.target.clone(),
                state,
            }),
            Task::Sink(task) => {
                let subscription = match config.get("topics").map(|t| t.trim()).filter(|t| !t.is_empty()) {
                    Some(list) => Subscription::Topics(list.split(',').map(|s| s.trim().to_owned()).filter(|s| !s.is_empty()).collect()),
                    None => Subscription::pattern(config.get("topics.regex").map(String::as_str).unwrap_or(""))
                        .map_err(|e| ConnectError::config("topics.regex", e.to_string()))?,
                };
                Runner::Sink(SinkRunner {
                    id: id.clone(),
                    task,
                    ctx: SinkTaskContext::new(id.connector.clone(), id.task, task_props).with_setbacks(state.setbacks()),
                    log,
                    converters: Arc::new(converters),
                    transforms: Arc::new(transforms),
                    errors,
                    status: self.status.clone(),
                    subscription,
                    group: format!("connect-{}", id.connector),
                    task_count: spec.task_count,
                    offset_reset: OffsetReset::resolve(&config, &self.config.props)
                        .map_err(|(key, message)| ConnectError::config(key, message))?,
                    commit_interval: self.config.offset_flush_interval,
                    target: spec.target.clone(),
                    state,
                    max_put_bytes: crate::task::sink::MAX_PUT_BYTES,
                    rate: RateLimit::from_config(&config, spec.task_count)?,
                    metrics,
                })
            }
        })
    }

    /// The transactional producer and boundary of a source task when the worker has
    /// exactly-once source support enabled (distributed mode on Kafka; the binary refuses
    /// `enabled` anywhere else).
    fn exactly_once(&self, config: &Props, id: &ConnectorTaskId, log: &Arc<dyn Log>) -> Result<Option<ExactlyOnce>, ConnectError> {
        if self.config.exactly_once_source != WorkerSupport::Enabled {
            return Ok(None);
        }
        let group = self.config.props.get("group.id").filter(|g| !g.trim().is_empty()).ok_or_else(|| {
            ConnectError::config(exactly_once::WORKER_KEY, "exactly-once source support needs distributed mode (a group.id)")
        })?;
        let boundary = exactly_once::boundary(config, self.config.offset_flush_interval)?;
        let transactional_id = exactly_once::transactional_id(group, &id.connector, id.task);
        let writer = log
            .transactional(&transactional_id)
            .map_err(|e| ConnectError::fatal_from("cannot create the task's transactional producer", e))?
            .ok_or_else(|| {
                ConnectError::config(
                    exactly_once::WORKER_KEY,
                    "exactly-once source support needs the Kafka log: the worker's log has no transactions",
                )
            })?;
        Ok(Some(ExactlyOnce { writer, boundary }))
    }

    /// The log a task runs on: this worker's, or one whose Kafka clients carry the
    /// connector's client overrides (`producer.override.*`, …). Overrides the log cannot
    /// apply (the embedded log) are ignored, with one line per connector (from task 0).
    fn task_log(&self, config: &Props, id: &ConnectorTaskId) -> Result<Arc<dyn Log>, ConnectError> {
        let overrides = ClientOverrides::from_connector_config(config);
        if overrides.is_empty() {
            return Ok(self.log.clone());
        }
        match self.log.with_client_overrides(&overrides.clone().with_client_ids(&id.connector, id.task)) {
            Ok(Some(log)) => {
                tracing::info!(task = ?id, overrides = ?overrides.keys(), "task runs with its own Kafka clients (connector client overrides)");
                Ok(log)
            }
            Ok(None) => {
                if id.task == 0 {
                    let ignored: Vec<String> = overrides.keys().into_iter().filter(|k| !k.ends_with(".auto.offset.reset")).collect();
                    if !ignored.is_empty() {
                        tracing::info!(connector = %id.connector, overrides = ?ignored, "client overrides have no meaning on the embedded log; ignored");
                    }
                }
                Ok(self.log.clone())
            }
            Err(e) => Err(ConnectError::fatal_from("cannot create the Kafka clients with the connector's client overrides", e)),
        }
    }
}

/// Debezium's `errors.max.retries` of a source connector: -1 (its default) or unset retries
/// retriable failures forever, 0 fails at the first, n after n retries.
fn max_retries(config: &Props) -> Result<Option<u32>, ConnectError> {
    const KEY: &str = "errors.max.retries";
    match config.get(KEY).map(|v| v.trim()) {
        None | Some("") => Ok(None),
        Some(v) => match v.parse::<i64>() {
            Ok(n) if n < 0 => Ok(None),
            Ok(n) => Ok(Some(u32::try_from(n).unwrap_or(u32::MAX))),
            Err(_) => Err(ConnectError::config(KEY, format!("Invalid value {v} for configuration {KEY}: Not a number of type INT"))),
        },
    }
}

/// Creates a task's dead-letter topic when it is missing, with one partition and
/// `errors.deadletterqueue.topic.replication.factor`, as Connect does when it sets up a
/// task's dead-letter reporter (whatever `topic.creation.enable` says).
async fn create_dead_letter_topic(dlq: Option<(Arc<dyn Log>, crate::task::errors::DeadLetterQueue)>) -> Result<(), ConnectError> {
    let Some((log, dlq)) = dlq else { return Ok(()) };
    match log.create_topic(&dlq.new_topic()).await {
        Ok(created) => {
            if created {
                tracing::info!(topic = %dlq.topic, replication_factor = dlq.replication_factor, "created the dead-letter topic");
            }
            Ok(())
        }
        Err(e) => Err(ConnectError::fatal_from(
            format!(
                "Could not initialize dead letter queue with topic={} (replication factor {}); fix {} or create the topic",
                dlq.topic,
                dlq.replication_factor,
                crate::task::errors::DLQ_REPLICATION_FACTOR
            ),
            ConnectError::from(e),
        )),
    }
}

#[cfg(test)]
#[path = "task_tests.rs"]
mod tests;
