//! The standalone herder: one worker owns every connector and task. Configs, target states
//! and offsets live in the internal topics, so unlike Kafka Connect's standalone mode,
//! connectors created through REST survive a restart.
//!
//! Every management call takes one lock, so calls apply one at a time and in order.
//!
//! As a member of a group ([`StandaloneHerder::open_member`], `sluice distributed`), the same
//! herder runs only its assigned share: writes go to the config topic and come back through
//! [`StandaloneHerder::follow_configs`] on every member; the leader rebalances on any
//! config change; [`StandaloneHerder::revoke`] and [`StandaloneHerder::assigned`] are what
//! the membership loop (`super::group`) calls. Under the eager protocol every rebalance
//! stops and restarts everything, which also applies config changes. Under the cooperative
//! protocols work keeps running through rebalances, so each member applies config changes
//! to what it runs itself: a changed connector config or target state restarts the
//! connector instance where it runs, changed task configs restart that connector's tasks
//! where they run.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};

use async_trait::async_trait;
use serde_json::json;
use sluice_api::{ConfigDef, Connector, ConnectorContext, ConnectorKind, ConnectorPlugin, Props};
use tokio::sync::{mpsc, watch, Mutex};
use tokio::task::JoinHandle;

use super::validate::{self, invalid_message, redact};
use super::*;
use crate::log::Log;
use crate::plugins::Plugins;
use crate::store::config::{ConfigSnapshot, ConfigStore, ConnectorConfigState};
use crate::store::offset::OffsetStore;
use crate::store::status::StatusStore;
use crate::task::exactly_once::WorkerSupport;
use crate::worker::config::WorkerConfig;
use crate::worker::restart::{Decision, FailureClass, Streak, Unit};
use crate::worker::task::{TaskHandle, TaskSpec, Worker};

mod membership;
pub use membership::Cluster;

struct Entry {
    state: ConnectorConfigState,
    plugin: ConnectorPlugin,
    /// The running connector instance, when started.
    instance: Option<Box<dyn Connector>>,
    target_tx: watch::Sender<TargetState>,
    tasks: BTreeMap<u32, TaskHandle>,
    /// Automatic restarts of the connector instance since it was last healthy.
    streak: Streak,
    /// Bumped at every start of the instance: a scheduled automatic restart carries the
    /// value it was scheduled at and is dropped when anything started the connector since.
    starts: u64,
}

impl Entry {
    fn new(state: ConnectorConfigState, plugin: ConnectorPlugin) -> Self {
        let (target_tx, _) = watch::channel(state.target);
        Self { state, plugin, instance: None, target_tx, tasks: BTreeMap::new(), streak: Streak::new(), starts: 0 }
    }
}

enum Request {
    Reconfigure(String),
    Failed(String, String),
    /// An automatic restart of a failed connector, scheduled at its `starts`.
    Restart(String, u64),
}

pub struct StandaloneHerder {
    worker: WorkerConfig,
    log: Arc<dyn Log>,
    plugins: Arc<Plugins>,
    /// Builds, runs and supervises this worker's tasks.
    tasks: Arc<Worker>,
    configs: ConfigStore,
    offsets: Arc<OffsetStore>,
    status: Arc<StatusStore>,
    entries: Mutex<BTreeMap<String, Entry>>,
    ready: AtomicBool,
    /// Set by [`StandaloneHerder::shutdown`]: a late group assignment starts nothing.
    stopping: AtomicBool,
    requests: mpsc::UnboundedSender<Request>,
    worker_id: String,
    /// Set when this worker is one member of a group (`sluice distributed`): it then runs
    /// only what the group assigns it, and learns configs from the config topic.
    cluster: Option<Cluster>,
    /// The process's log levels, for cluster-wide levels read from the config topic.
    loggers: std::sync::OnceLock<crate::logging::LogLevels>,
}


struct Context {
    name: String,
    requests: mpsc::UnboundedSender<Request>,
}

impl ConnectorContext for Context {
    fn request_task_reconfiguration(&self) {
        let _ = self.requests.send(Request::Reconfigure(self.name.clone()));
    }

    fn raise_error(&self, trace: String) {
        let _ = self.requests.send(Request::Failed(self.name.clone(), trace));
    }
}

fn internal(e: impl std::fmt::Display) -> HerderError {
    HerderError::Internal(e.to_string())
}

impl StandaloneHerder {
    /// Gives the herder the process's log levels, which cluster-wide levels (KIP-976) read
    /// from the config topic change.
    pub fn set_loggers(&self, loggers: crate::logging::LogLevels) {
        let _ = self.loggers.set(loggers);
    }

    /// A cluster-wide level read from the config topic: applied here, as every worker does.
    pub(crate) fn apply_cluster_logger_level(&self, namespace: &str, level: &str) {
        let Some(loggers) = self.loggers.get() else { return };
        match loggers.set(namespace, level) {
            Ok(changed) => tracing::info!(namespace, level, changed = changed.len(), "cluster-wide log level applied"),
            Err(e) => tracing::warn!(namespace, level, error = %e, "ignoring a cluster-wide log level that cannot be applied"),
        }
    }
    /// Opens the internal topics and replays them. Call [`StandaloneHerder::start`] next.
    pub async fn open(
        worker: WorkerConfig,
        log: Arc<dyn Log>,
        plugins: Arc<Plugins>,
    ) -> Result<(Arc<Self>, ConfigSnapshot), crate::log::LogError> {
        Self::open_with(worker, log, plugins, None).await
    }

    /// [`StandaloneHerder::open`] for a member of a group: nothing runs until the group
    /// assigns it (through [`super::group::worker::ClusterWorker`]).
    pub async fn open_member(
        worker: WorkerConfig,
        log: Arc<dyn Log>,
        plugins: Arc<Plugins>,
        cluster: Cluster,
    ) -> Result<(Arc<Self>, ConfigSnapshot), crate::log::LogError> {
        Self::open_with(worker, log, plugins, Some(cluster)).await
    }

    async fn open_with(
        worker: WorkerConfig,
        log: Arc<dyn Log>,
        plugins: Arc<Plugins>,
        cluster: Option<Cluster>,
    ) -> Result<(Arc<Self>, ConfigSnapshot), crate::log::LogError> {
        let (configs, snapshot) = ConfigStore::open(log.clone(), &worker.config_topic, worker.config_replication).await?;
        let offsets =
            Arc::new(OffsetStore::open(log.clone(), &worker.offset_topic, worker.offset_partitions, worker.offset_replication).await?);
        let status =
            Arc::new(StatusStore::open(log.clone(), &worker.status_topic, worker.status_partitions, worker.status_replication).await?);
        let (tx, rx) = mpsc::unbounded_channel();
        let tasks = Arc::new(Worker::new(worker.clone(), log.clone(), offsets.clone(), status.clone()));
        let herder = Arc::new(Self {
            worker_id: worker.worker_id(),
            tasks,
            worker,
            log,
            plugins,
            configs,
            offsets,
            status,
            entries: Mutex::new(BTreeMap::new()),
            ready: AtomicBool::new(false),
            stopping: AtomicBool::new(false),
            loggers: std::sync::OnceLock::new(),
            requests: tx,
            cluster,
        });
        tokio::spawn(Self::serve_requests(Arc::downgrade(&herder), rx));
        Ok((herder, snapshot))
    }

    /// Starts every connector of the replayed snapshot, then reports ready.
    pub async fn start(&self, snapshot: ConfigSnapshot) {
        {
            let mut entries = self.entries.lock().await;
            for (name, state) in snapshot.connectors {
                let Some(class) = state.config.get("connector.class") else { continue };
                let Some(plugin) = self.plugins.connector(class).copied() else {
                    tracing::error!(connector = %name, class = %class, "stored connector names an unknown class; it is not started");
                    continue;
                };
                self.status.set_plugin_version(&name, plugin.version);
                entries.insert(name.clone(), Entry::new(state, plugin));
                if self.cluster.is_none() {
                    self.start_connector(&mut entries, &name).await;
                }
            }
            if let Some(c) = &self.cluster {
                // Ready once the group has assigned this worker its share.
                *c.snapshot.lock().expect("snapshot lock") =
                    ConfigSnapshot { connectors: entries.iter().map(|(n, e)| (n.clone(), e.state.clone())).collect(), ..Default::default() };
                return;
            }
        }
        self.ready.store(true, Ordering::SeqCst);
    }

    /// Stops every task (gracefully, in parallel) and connector.
    pub async fn shutdown(&self) {
        self.ready.store(false, Ordering::SeqCst);
        self.stopping.store(true, Ordering::SeqCst);
        let mut entries = self.entries.lock().await;
        let mut joins = Vec::new();
        for entry in entries.values_mut() {
            for (_, t) in std::mem::take(&mut entry.tasks) {
                t.shutdown.cancel();
                joins.push(t.join);
            }
        }
        self.await_tasks(joins).await;
        for (name, entry) in entries.iter_mut() {
            if let Some(mut instance) = entry.instance.take() {
                if let Err(e) = instance.stop().await {
                    tracing::warn!(connector = %name, error = %e, "connector stop failed");
                }
            }
        }
    }

    async fn await_tasks(&self, joins: Vec<JoinHandle<()>>) {
        let timeout = self.worker.task_shutdown_timeout;
        let waits = joins.into_iter().map(|mut j| async move {
            if tokio::time::timeout(timeout, &mut j).await.is_err() {
                tracing::warn!("a task did not stop within task.shutdown.graceful.timeout.ms; abandoning it");
                j.abort();
            }
        });
        for w in waits.collect::<Vec<_>>() {
            w.await;
        }
    }

    async fn serve_requests(herder: Weak<Self>, mut rx: mpsc::UnboundedReceiver<Request>) {
        while let Some(req) = rx.recv().await {
            let Some(h) = herder.upgrade() else { return };
            let mut entries = h.entries.lock().await;
            match req {
                Request::Reconfigure(name) => {
                    if entries.contains_key(&name) {
                        h.reconfigure_tasks(&mut entries, &name).await;
                    }
                }
                Request::Failed(name, trace) => {
                    if let Some(entry) = entries.get_mut(&name) {
                        h.connector_failed(entry, &name, trace, FailureClass::Error);
                    }
                }
                Request::Restart(name, starts) => {
                    let mine = h.cluster.as_ref().is_none_or(|c| c.owned().connectors.contains(&name));
                    let due = entries.get(&name).is_some_and(|e| e.starts == starts && e.state.target != TargetState::Stopped);
                    if mine && due {
                        h.restart_failed_connector(&mut entries, &name).await;
                    }
                }
            }
        }
    }

    fn state(&self, state: State, trace: Option<String>) -> StateInfo {
        StateInfo { state, trace, worker_id: self.worker_id.clone(), version: None }
    }

    /// The connector config with providers resolved, for running it (never stored).
    fn resolved(&self, props: &Props) -> Result<Props, sluice_api::ConnectError> {
        self.worker.providers.resolve_all(props)
    }

    /// Starts the connector instance per its target state, then its tasks.
    async fn start_connector(&self, entries: &mut BTreeMap<String, Entry>, name: &str) {
        let entry = entries.get_mut(name).expect("entry exists");
        if entry.state.target == TargetState::Stopped {
            self.status.put_connector(name, self.state(State::Stopped, None));
            if !entry.state.tasks.is_empty() {
                if let Err(e) = self.configs.put_task_configs(name, &[]).await {
                    tracing::error!(connector = name, error = %e, "could not clear task configs of a stopped connector");
                }
                entry.state.tasks.clear();
            }
            return;
        }
        entry.starts += 1;
        let props = match self.resolved(&entry.state.config) {
            Ok(p) => p,
            Err(e) => {
                self.connector_failed(entry, name, e.trace(), FailureClass::of(&e));
                return;
            }
        };
        let mut instance = (entry.plugin.create)();
        let ctx: Arc<dyn ConnectorContext> = Arc::new(Context { name: name.to_owned(), requests: self.requests.clone() });
        let metrics = &self.tasks.metrics;
        metrics.count(&metrics.connector_startup_attempts);
        let started = match instance.config_def().parse(&props) {
            Ok(_) => instance.start(&props, ctx).await,
            Err(e) => Err(e),
        };
        metrics.count(if started.is_ok() { &metrics.connector_startup_success } else { &metrics.connector_startup_failure });
        if let Err(e) = started {
            tracing::error!(connector = name, error = %e, "connector failed to start");
            self.connector_failed(entry, name, e.trace(), FailureClass::of(&e));
            return;
        }
        let shown = if entry.state.target == TargetState::Paused { State::Paused } else { State::Running };
        self.status.put_connector(name, self.state(shown, None));
        entry.instance = Some(instance);
        self.reconfigure_tasks(entries, name).await;
    }

    /// Regenerates task configs; when they changed, stores them and restarts the tasks.
    /// Tasks that are not running are started.
    async fn reconfigure_tasks(&self, entries: &mut BTreeMap<String, Entry>, name: &str) {
        let entry = entries.get_mut(name).expect("entry exists");
        let Some(instance) = entry.instance.as_mut() else { return };
        let max = entry.state.config.get("tasks.max").and_then(|v| v.trim().parse::<usize>().ok()).unwrap_or(1);
        let generated = match instance.task_configs(max).await {
            Ok(t) => super::task_configs::with_worker_keys(t, &entry.plugin, &entry.state.config),
            Err(e) => {
                self.connector_failed(entry, name, e.trace(), FailureClass::of(&e));
                return;
            }
        };
        if generated.len() > max {
            let msg = format!("connector {name} generated {} task configs, more than tasks.max={max}", generated.len());
            self.connector_failed(entry, name, format!("ConnectException: {msg}"), FailureClass::Fatal);
            return;
        }
        if generated != entry.state.tasks {
            if let Err(e) = self.configs.put_task_configs(name, &generated).await {
                let trace = format!("ConnectException: could not store task configs: {e}");
                self.connector_failed(entry, name, trace, FailureClass::Error);
                return;
            }
            if self.cluster.is_some() {
                // The leader sees the new task configs in the config topic and rebalances.
                entry.state.tasks = generated;
                return;
            }
            self.stop_tasks(entry, None).await;
            entry.state.tasks = generated;
        }
        if self.cluster.is_some() {
            return;
        }
        for i in 0..entry.state.tasks.len() as u32 {
            if !entry.tasks.contains_key(&i) {
                self.start_task(entry, name, i);
            }
        }
    }

    /// Stops the given tasks (all when `only` is None) and waits for them.
    async fn stop_tasks(&self, entry: &mut Entry, only: Option<&[u32]>) {
        let ids: Vec<u32> = entry.tasks.keys().copied().filter(|i| only.is_none_or(|o| o.contains(i))).collect();
        let mut joins = Vec::new();
        for i in ids {
            if let Some(t) = entry.tasks.remove(&i) {
                t.shutdown.cancel();
                joins.push(t.join);
            }
        }
        self.await_tasks(joins).await;
    }

    /// Starts task `index` of the connector under this worker's supervision.
    fn start_task(&self, entry: &mut Entry, name: &str, index: u32) {
        let spec = TaskSpec {
            id: ConnectorTaskId { connector: name.to_owned(), task: index },
            plugin: entry.plugin,
            config: entry.state.config.clone(),
            task_props: entry.state.tasks[index as usize].clone(),
            task_count: entry.state.tasks.len() as u32,
            target: entry.target_tx.subscribe(),
        };
        entry.tasks.insert(index, self.tasks.start_task(spec));
    }

    /// The connector instance failed: FAILED with the trace, then, as its restart policy
    /// says, RESTARTING (the trace kept) and a new instance after the backoff.
    fn connector_failed(&self, entry: &mut Entry, name: &str, trace: String, class: FailureClass) {
        self.status.put_connector(name, self.state(State::Failed, Some(trace.clone())));
        let policy = self.tasks.restart_policy_of(&entry.state.config);
        let count = entry.streak.count_at_failure(&policy, false);
        match self.tasks.restarts.failed(&Unit::Connector(name.to_owned()), trace.clone(), class, &policy, count) {
            Decision::Stay(reason) => tracing::warn!(connector = name, reason, "the connector stays FAILED"),
            Decision::Restart(delay) => {
                tracing::info!(connector = name, restart = count + 1, delay_ms = delay.as_millis() as u64, "restarting the failed connector after a backoff");
                self.status.put_connector(name, self.state(State::Restarting, Some(trace)));
                entry.streak = Streak::restarted(count + 1, delay);
                let (requests, name, starts) = (self.requests.clone(), name.to_owned(), entry.starts);
                tokio::spawn(async move {
                    tokio::time::sleep(delay).await;
                    let _ = requests.send(Request::Restart(name, starts));
                });
            }
        }
    }

    /// A scheduled automatic restart of a failed connector instance (its tasks keep running).
    async fn restart_failed_connector(&self, entries: &mut BTreeMap<String, Entry>, name: &str) {
        let entry = entries.get_mut(name).expect("checked");
        if let Some(mut instance) = entry.instance.take() {
            if let Err(e) = instance.stop().await {
                tracing::warn!(connector = name, error = %e, "connector stop failed");
            }
        }
        let streak = entry.streak.clone();
        self.tasks.restarts.restarted(&Unit::Connector(name.to_owned()), streak.restarts);
        self.start_connector(entries, name).await;
        if let Some(entry) = entries.get_mut(name) {
            // `start_connector` does not touch the streak: a failure there counted this restart.
            if entry.streak.restarts == streak.restarts {
                entry.streak.since = std::time::Instant::now();
            }
        }
    }

    /// A start asked for by a user or a config change: the count of automatic restarts of
    /// the connector and of the given tasks starts again.
    fn fresh_start(&self, entry: &mut Entry, name: &str) {
        entry.streak = Streak::new();
        self.tasks.restarts.started(&Unit::Connector(name.to_owned()));
    }

    fn exactly_once_check(&self) -> validate::ExactlyOnceCheck<'_> {
        validate::ExactlyOnceCheck {
            worker_enabled: self.worker.exactly_once_source == WorkerSupport::Enabled,
            offsets_topic: &self.worker.offset_topic,
        }
    }

    /// Stops tasks and the connector instance (the entry stays).
    async fn stop_connector(&self, entries: &mut BTreeMap<String, Entry>, name: &str) {
        let entry = entries.get_mut(name).expect("entry exists");
        self.stop_tasks(entry, None).await;
        if let Some(mut instance) = entry.instance.take() {
            if let Err(e) = instance.stop().await {
                tracing::warn!(connector = name, error = %e, "connector stop failed");
            }
        }
    }

    fn info(&self, name: &str, entry: &Entry) -> ConnectorInfo {
        ConnectorInfo {
            name: name.to_owned(),
            config: self.redacted(entry, &entry.state.config),
            tasks: (0..entry.state.tasks.len() as u32).map(|task| ConnectorTaskId { connector: name.to_owned(), task }).collect(),
            kind: entry.plugin.kind,
        }
    }

    fn redacted(&self, entry: &Entry, props: &Props) -> Props {
        let def: ConfigDef = (entry.plugin.create)().config_def();
        redact(&def, props)
    }

    fn status_of(&self, name: &str, entry: &Entry) -> ConnectorStateInfo {
        let connector = self.status.connector(name).unwrap_or_else(|| self.state(State::Unassigned, None));
        let connector = with_version(connector, &entry.plugin);
        let tasks = (0..entry.state.tasks.len() as u32)
            .map(|task| {
                let id = ConnectorTaskId { connector: name.to_owned(), task };
                let state = self.status.task(&id).unwrap_or_else(|| self.state(State::Unassigned, None));
                TaskStateInfo { id: task, state: with_version(state, &entry.plugin) }
            })
            .collect();
        ConnectorStateInfo { name: name.to_owned(), connector, tasks, kind: entry.plugin.kind }
    }

    async fn set_target(&self, entries: &mut BTreeMap<String, Entry>, name: &str, target: TargetState) -> HerderResult<()> {
        let previous = entries.get(name).ok_or_else(|| HerderError::connector_not_found(name))?.state.target;
        self.configs.put_target_state(name, target).await.map_err(internal)?;
        if self.cluster.is_some() {
            // Every member applies it from the config topic; the rebalance that follows
            // restarts the connector under its new target state.
            self.applied(entries).await;
            return Ok(());
        }
        let entry = entries.get_mut(name).expect("checked");
        entry.state.target = target;
        entry.target_tx.send_replace(target);
        match (previous, target) {
            (_, TargetState::Stopped) => {
                self.stop_connector(entries, name).await;
                let entry = entries.get_mut(name).expect("checked");
                if let Err(e) = self.configs.put_task_configs(name, &[]).await {
                    tracing::error!(connector = name, error = %e, "could not clear task configs");
                }
                for i in 0..entry.state.tasks.len() as u32 {
                    self.status.remove_task(&ConnectorTaskId { connector: name.to_owned(), task: i });
                }
                entry.state.tasks.clear();
                self.status.put_connector(name, self.state(State::Stopped, None));
            }
            (TargetState::Stopped, _) => self.start_connector(entries, name).await,
            (_, TargetState::Paused) => {
                if self.status.connector(name).is_some_and(|s| s.state == State::Running) {
                    self.status.put_connector(name, self.state(State::Paused, None));
                }
            }
            (_, TargetState::Started) => {
                if self.status.connector(name).is_some_and(|s| s.state == State::Paused) {
                    self.status.put_connector(name, self.state(State::Running, None));
                }
            }
        }
        Ok(())
    }

    fn require_stopped(&self, entries: &BTreeMap<String, Entry>, name: &str) -> HerderResult<ConnectorKind> {
        let entry = entries.get(name).ok_or_else(|| HerderError::connector_not_found(name))?;
        if entry.state.target != TargetState::Stopped || !entry.tasks.is_empty() {
            return Err(HerderError::BadRequest(format!(
                "Connectors must be in the STOPPED state before their offsets can be modified. This can be done for the specified connector by issuing a 'PUT' request to the '/connectors/{name}/stop' endpoint"
            )));
        }
        Ok(entry.plugin.kind)
    }
}


fn sink_partition(tp: &sluice_api::TopicPartition) -> serde_json::Map<String, serde_json::Value> {
    let mut m = serde_json::Map::new();
    m.insert("kafka_topic".into(), json!(tp.topic));
    m.insert("kafka_partition".into(), json!(tp.partition));
    m
}

fn parse_sink_offset(o: &ConnectorOffset) -> HerderResult<(sluice_api::TopicPartition, Option<i64>)> {
    let topic =
        o.partition.get("kafka_topic").and_then(|v| v.as_str()).ok_or_else(|| {
            HerderError::BadRequest("Kafka topic names must be valid strings: set kafka_topic in each partition".to_owned())
        })?;
    let partition =
        o.partition.get("kafka_partition").and_then(|v| v.as_i64()).and_then(|p| i32::try_from(p).ok()).filter(|p| *p >= 0).ok_or_else(
            || {
                HerderError::BadRequest(
                    "Kafka partitions must be valid non-negative integers: set kafka_partition in each partition".to_owned(),
                )
            },
        )?;
    let offset = match &o.offset {
        None => None,
        Some(m) => Some(m.get("kafka_offset").and_then(|v| v.as_i64()).filter(|v| *v >= 0).ok_or_else(|| {
            HerderError::BadRequest("Kafka offsets must be valid non-negative integers: set kafka_offset in each offset".to_owned())
        })?),
    };
    Ok((sluice_api::TopicPartition::new(topic, partition), offset))
}

#[async_trait]
impl Herder for StandaloneHerder {
    fn worker_id(&self) -> String {
        self.worker_id.clone()
    }

    fn is_ready(&self) -> bool {
        self.ready.load(Ordering::SeqCst)
    }

    async fn responsive(&self, within: std::time::Duration) -> bool {
        tokio::time::timeout(within, self.entries.lock()).await.is_ok()
    }

    fn leader_url(&self) -> Option<String> {
        let view = self.cluster.as_ref()?.view();
        if view.leader {
            None
        } else {
            view.leader_url
        }
    }

    fn rebalancing(&self) -> bool {
        self.cluster.as_ref().is_some_and(|c| c.view().rebalancing)
    }

    fn ensuring_membership_for(&self) -> Option<std::time::Duration> {
        self.cluster.as_ref().and_then(|c| c.view().out_of_group_since.map(|t| t.elapsed()))
    }

    fn takes_writes(&self) -> bool {
        self.cluster.as_ref().is_none_or(|c| c.view().leader_url.is_some())
    }

    async fn connectors(&self) -> Vec<String> {
        self.entries.lock().await.keys().cloned().collect()
    }

    async fn connector_info(&self, name: &str) -> HerderResult<ConnectorInfo> {
        let entries = self.entries.lock().await;
        let entry = entries.get(name).ok_or_else(|| HerderError::connector_not_found(name))?;
        Ok(self.info(name, entry))
    }

    async fn connector_config(&self, name: &str) -> HerderResult<Props> {
        let entries = self.entries.lock().await;
        let entry = entries.get(name).ok_or_else(|| HerderError::connector_not_found(name))?;
        Ok(self.redacted(entry, &entry.state.config))
    }

    async fn stored_connector_config(&self, name: &str) -> HerderResult<Props> {
        let entries = self.entries.lock().await;
        let entry = entries.get(name).ok_or_else(|| HerderError::connector_not_found(name))?;
        Ok(entry.state.config.clone())
    }

    async fn put_connector_config(
        &self,
        name: &str,
        mut config: Props,
        allow_replace: bool,
        initial_state: Option<TargetState>,
    ) -> HerderResult<(bool, ConnectorInfo)> {
        if name.trim().is_empty() {
            return Err(HerderError::BadRequest("Connector name is required and must not be empty".to_owned()));
        }
        if name.chars().any(char::is_control) {
            return Err(HerderError::BadRequest(format!("Connector name {name:?} must not contain control characters")));
        }
        config.insert("name".to_owned(), name.to_owned());
        let (infos, plugin) = validate::validate(
            &self.plugins,
            &config,
            self.worker.override_policy,
            self.worker.topic_creation_enable,
            self.exactly_once_check(),
        )?;
        if infos.error_count() > 0 {
            return Err(HerderError::BadRequest(invalid_message(&infos)));
        }
        let mut entries = self.entries.lock().await;
        let exists = entries.contains_key(name);
        if exists && !allow_replace {
            return Err(HerderError::Conflict(format!("Connector {name} already exists")));
        }
        if exists && entries[name].plugin.kind != plugin.kind {
            return Err(HerderError::BadRequest(format!(
                "Connector {name} is a {} connector; its type cannot change",
                entries[name].plugin.kind.name()
            )));
        }
        if self.cluster.is_some() {
            if !exists {
                self.configs.put_target_state(name, initial_state.unwrap_or(TargetState::Started)).await.map_err(internal)?;
            }
            self.configs.put_connector(name, &config).await.map_err(internal)?;
            self.applied(&mut entries).await;
            let entry =
                entries.get(name).ok_or_else(|| HerderError::Internal(format!("connector {name} was written but not read back")))?;
            return Ok((!exists, self.info(name, entry)));
        }
        self.configs.put_connector(name, &config).await.map_err(internal)?;
        if exists {
            self.stop_connector(&mut entries, name).await;
            let entry = entries.get_mut(name).expect("exists");
            entry.state.config = config;
            entry.plugin = plugin;
        } else {
            let target = initial_state.unwrap_or(TargetState::Started);
            self.configs.put_target_state(name, target).await.map_err(internal)?;
            self.status.set_plugin_version(name, plugin.version);
            entries.insert(name.to_owned(), Entry::new(ConnectorConfigState { config, target, tasks: Vec::new() }, plugin));
        }
        let entry = entries.get_mut(name).expect("stored");
        self.fresh_start(entry, name);
        self.start_connector(&mut entries, name).await;
        Ok((!exists, self.info(name, &entries[name])))
    }

    async fn patch_connector_config(&self, name: &str, patch: BTreeMap<String, Option<String>>) -> HerderResult<ConnectorInfo> {
        let mut config = {
            let entries = self.entries.lock().await;
            entries.get(name).ok_or_else(|| HerderError::connector_not_found(name))?.state.config.clone()
        };
        for (k, v) in patch {
            match v {
                Some(v) => config.insert(k, v),
                None => config.remove(&k),
            };
        }
        self.put_connector_config(name, config, true, None).await.map(|(_, info)| info)
    }

    async fn delete_connector(&self, name: &str) -> HerderResult<()> {
        let mut entries = self.entries.lock().await;
        if !entries.contains_key(name) {
            return Err(HerderError::connector_not_found(name));
        }
        if self.cluster.is_some() {
            self.configs.remove_connector(name).await.map_err(internal)?;
            self.applied(&mut entries).await;
            return Ok(());
        }
        self.stop_connector(&mut entries, name).await;
        self.configs.remove_connector(name).await.map_err(internal)?;
        entries.remove(name);
        self.status.remove_connector(name);
        self.tasks.forget_connector(name);
        Ok(())
    }

    async fn connector_status(&self, name: &str) -> HerderResult<ConnectorStateInfo> {
        let entries = self.entries.lock().await;
        let entry = entries.get(name).ok_or_else(|| HerderError::NotFound(format!("No status found for connector {name}")))?;
        Ok(self.status_of(name, entry))
    }

    async fn task_status(&self, id: &ConnectorTaskId) -> HerderResult<TaskStateInfo> {
        let entries = self.entries.lock().await;
        let entry = entries
            .get(&id.connector)
            .ok_or_else(|| HerderError::NotFound(format!("No status found for task {}-{}", id.connector, id.task)))?;
        if id.task as usize >= entry.state.tasks.len() {
            return Err(HerderError::NotFound(format!("No status found for task {}-{}", id.connector, id.task)));
        }
        let state = self.status.task(id).unwrap_or_else(|| self.state(State::Unassigned, None));
        Ok(TaskStateInfo { id: id.task, state: with_version(state, &entry.plugin) })
    }

    async fn task_configs(&self, name: &str) -> HerderResult<Vec<TaskInfo>> {
        let entries = self.entries.lock().await;
        let entry = entries.get(name).ok_or_else(|| HerderError::connector_not_found(name))?;
        Ok(entry
            .state
            .tasks
            .iter()
            .enumerate()
            .map(|(i, t)| TaskInfo { id: ConnectorTaskId { connector: name.to_owned(), task: i as u32 }, config: self.redacted(entry, t) })
            .collect())
    }

    async fn restart_connector(&self, name: &str, req: RestartRequest) -> HerderResult<Option<ConnectorStateInfo>> {
        let mut entries = self.entries.lock().await;
        if let Some(c) = &self.cluster {
            let entry = entries.get(name).ok_or_else(|| HerderError::connector_not_found(name))?;
            let shown = self.status_of(name, entry);
            let connector = (!req.only_failed || failed(shown.connector.state)).then(|| name.to_owned());
            let tasks: Vec<ConnectorTaskId> = if req.include_tasks {
                shown
                    .tasks
                    .iter()
                    .filter(|t| !req.only_failed || failed(t.state.state))
                    .map(|t| ConnectorTaskId { connector: name.to_owned(), task: t.id })
                    .collect()
            } else {
                Vec::new()
            };
            c.restart(connector, tasks);
            return Ok(None);
        }
        let entry = entries.get(name).ok_or_else(|| HerderError::connector_not_found(name))?;
        let plain = !req.include_tasks && !req.only_failed;
        let mut shown = self.status_of(name, entry);
        let restart_connector = !req.only_failed || failed(shown.connector.state);
        let restart_tasks: Vec<u32> = if req.include_tasks {
            shown.tasks.iter().filter(|t| !req.only_failed || failed(t.state.state)).map(|t| t.id).collect()
        } else {
            Vec::new()
        };
        if restart_connector {
            shown.connector.state = State::Restarting;
            shown.connector.trace = None;
        }
        for t in shown.tasks.iter_mut().filter(|t| restart_tasks.contains(&t.id)) {
            t.state.state = State::Restarting;
            t.state.trace = None;
        }
        if restart_connector {
            let entry = entries.get_mut(name).expect("checked");
            if let Some(mut instance) = entry.instance.take() {
                let _ = instance.stop().await;
            }
            let stop: Vec<u32> = restart_tasks.clone();
            self.stop_tasks(entry, Some(&stop)).await;
            self.fresh_start(entry, name);
            self.start_connector(&mut entries, name).await;
        } else if !restart_tasks.is_empty() {
            let entry = entries.get_mut(name).expect("checked");
            self.stop_tasks(entry, Some(&restart_tasks)).await;
            for i in restart_tasks {
                if (i as usize) < entry.state.tasks.len() {
                    self.start_task(entry, name, i);
                }
            }
        }
        Ok(if plain { None } else { Some(shown) })
    }

    async fn restart_task(&self, id: &ConnectorTaskId) -> HerderResult<()> {
        let mut entries = self.entries.lock().await;
        if let Some(c) = &self.cluster {
            let entry = entries.get(&id.connector).ok_or_else(|| HerderError::connector_not_found(&id.connector))?;
            if id.task as usize >= entry.state.tasks.len() {
                return Err(HerderError::NotFound(format!("Task {}-{} not found", id.connector, id.task)));
            }
            c.restart(None, [id.clone()]);
            return Ok(());
        }
        let entry = entries.get_mut(&id.connector).ok_or_else(|| HerderError::connector_not_found(&id.connector))?;
        if id.task as usize >= entry.state.tasks.len() {
            return Err(HerderError::NotFound(format!("Task {}-{} not found", id.connector, id.task)));
        }
        self.stop_tasks(entry, Some(&[id.task])).await;
        self.start_task(entry, &id.connector, id.task);
        Ok(())
    }

    async fn restarts(&self, name: &str) -> HerderResult<RestartsInfo> {
        let entries = self.entries.lock().await;
        entries.get(name).ok_or_else(|| HerderError::connector_not_found(name))?;
        let (connector, tasks) = self.tasks.restarts.of(name);
        Ok(RestartsInfo {
            name: name.to_owned(),
            worker_id: self.worker_id.clone(),
            connector,
            tasks: tasks.into_iter().map(|(id, record)| TaskRestarts { id, record }).collect(),
        })
    }

    async fn task_lags(&self) -> Vec<(ConnectorTaskId, f64)> {
        self.tasks
            .metrics
            .tasks()
            .into_iter()
            .filter_map(|(id, m)| m.total_lag().map(|l| (id, l)))
            .collect()
    }

    async fn set_cluster_logger_level(&self, namespace: &str, level: &str) -> HerderResult<bool> {
        if self.cluster.is_none() {
            return Ok(false);
        }
        self.configs
            .put_logger_level(namespace, level)
            .await
            .map_err(|e| HerderError::Internal(format!("could not write the log level to the config topic: {e}")))?;
        Ok(true)
    }

    async fn scaling(&self, name: &str) -> HerderResult<crate::scaling::ScalingInfo> {
        let (class, kind, config, tasks) = {
            let entries = self.entries.lock().await;
            let entry = entries.get(name).ok_or_else(|| HerderError::connector_not_found(name))?;
            (entry.plugin.class, entry.plugin.kind, entry.state.config.clone(), entry.state.tasks.len() as u32)
        };
        let partitions = match (kind, config.get("topics").map(|t| t.trim()).filter(|t| !t.is_empty())) {
            (sluice_api::ConnectorKind::Sink, Some(list)) => {
                let mut total = 0u32;
                let mut known = true;
                for topic in list.split(',').map(str::trim).filter(|t| !t.is_empty()) {
                    match self.log.partition_count(topic).await {
                        Ok(n) if n > 0 => total += n as u32,
                        _ => known = false,
                    }
                }
                known.then_some(total)
            }
            _ => None,
        };
        let loads: Vec<crate::scaling::TaskLoad> = self
            .tasks
            .metrics
            .tasks()
            .into_iter()
            .filter(|(id, _)| id.connector == name)
            .map(|(_, m)| crate::scaling::TaskLoad { busy: m.busy_ratio(), lag: m.total_lag() })
            .collect();
        Ok(crate::scaling::assess(crate::scaling::Inputs {
            name,
            class,
            kind,
            worker_id: self.worker_id.clone(),
            config: &config,
            tasks,
            partitions,
            loads: &loads,
        }))
    }

    async fn metrics(&self) -> Option<String> {
        let view = {
            let entries = self.entries.lock().await;
            let owned = self.cluster.as_ref().map(|c| c.owned().connectors.clone());
            let connectors = entries
                .iter()
                .filter(|(name, e)| owned.as_ref().is_none_or(|o| o.contains(*name)) || !e.tasks.is_empty())
                .map(|(name, e)| {
                    let task_state = |task: u32| {
                        self.status.task(&ConnectorTaskId { connector: name.clone(), task }).map_or(State::Unassigned, |s| s.state)
                    };
                    crate::metrics::ConnectorView {
                        name: name.clone(),
                        class: e.plugin.class.to_owned(),
                        kind: e.plugin.kind,
                        version: e.plugin.version.to_owned(),
                        state: self.status.connector(name).map_or(State::Unassigned, |s| s.state),
                        tasks: e.tasks.keys().map(|t| (*t, task_state(*t))).collect(),
                        local_tasks: e.tasks.keys().copied().collect(),
                    }
                })
                .collect();
            crate::metrics::WorkerView { connectors, restarts: self.tasks.restarts.all(), rebalancing: self.rebalancing(), log: self.log.stats() }
        };
        Some(crate::metrics::render(&self.tasks.metrics, &view))
    }

    async fn set_target_state(&self, name: &str, state: TargetState) -> HerderResult<()> {
        let mut entries = self.entries.lock().await;
        self.set_target(&mut entries, name, state).await
    }

    async fn connector_topics(&self, name: &str) -> HerderResult<Vec<String>> {
        let entries = self.entries.lock().await;
        entries.get(name).ok_or_else(|| HerderError::connector_not_found(name))?;
        Ok(self.status.topics(name))
    }

    async fn reset_connector_topics(&self, name: &str) -> HerderResult<()> {
        let entries = self.entries.lock().await;
        entries.get(name).ok_or_else(|| HerderError::connector_not_found(name))?;
        self.status.reset_topics(name);
        Ok(())
    }

    async fn connector_offsets(&self, name: &str) -> HerderResult<Vec<ConnectorOffset>> {
        let kind = {
            let entries = self.entries.lock().await;
            entries.get(name).ok_or_else(|| HerderError::connector_not_found(name))?.plugin.kind
        };
        Ok(match kind {
            ConnectorKind::Source => {
                self.offsets.list(name).into_iter().map(|(partition, offset)| ConnectorOffset { partition, offset: Some(offset) }).collect()
            }
            ConnectorKind::Sink => self
                .log
                .group_offsets(&format!("connect-{name}"))
                .await
                .map_err(internal)?
                .into_iter()
                .map(|(tp, o)| {
                    let mut offset = serde_json::Map::new();
                    offset.insert("kafka_offset".into(), json!(o));
                    ConnectorOffset { partition: sink_partition(&tp), offset: Some(offset) }
                })
                .collect(),
        })
    }

    async fn alter_connector_offsets(&self, name: &str, offsets: Vec<ConnectorOffset>) -> HerderResult<String> {
        let entries = self.entries.lock().await;
        let kind = self.require_stopped(&entries, name)?;
        if offsets.is_empty() {
            return Err(HerderError::BadRequest("Partitions / offsets need to be provided for an alter offsets request".to_owned()));
        }
        match kind {
            ConnectorKind::Source => {
                let entries: Vec<_> = offsets.into_iter().map(|o| (o.partition, o.offset)).collect();
                self.offsets.write(name, &entries).await.map_err(internal)?;
            }
            ConnectorKind::Sink => {
                let group = format!("connect-{name}");
                let parsed = offsets.iter().map(parse_sink_offset).collect::<HerderResult<Vec<_>>>()?;
                let mut current = self.log.group_offsets(&group).await.map_err(internal)?;
                let removes = parsed.iter().any(|(_, o)| o.is_none());
                for (tp, o) in parsed {
                    match o {
                        Some(o) => current.insert(tp, o),
                        None => current.remove(&tp),
                    };
                }
                if removes {
                    self.log.delete_group(&group).await.map_err(internal)?;
                }
                self.log.commit_group(&group, &current).await.map_err(internal)?;
            }
        }
        Ok("The offsets for this connector have been altered successfully".to_owned())
    }

    async fn reset_connector_offsets(&self, name: &str) -> HerderResult<String> {
        let entries = self.entries.lock().await;
        let kind = self.require_stopped(&entries, name)?;
        match kind {
            ConnectorKind::Source => {
                let all: Vec<_> = self.offsets.list(name).into_iter().map(|(p, _)| (p, None)).collect();
                self.offsets.write(name, &all).await.map_err(internal)?;
            }
            ConnectorKind::Sink => self.log.delete_group(&format!("connect-{name}")).await.map_err(internal)?,
        }
        Ok("The offsets for this connector have been reset successfully".to_owned())
    }

    fn plugins(&self, connectors_only: bool) -> Vec<PluginInfo> {
        self.plugins.list(connectors_only)
    }

    fn plugin_config(&self, class: &str) -> HerderResult<ConfigDef> {
        self.plugins.config_def(class).ok_or_else(|| HerderError::NotFound(format!("Unknown plugin {class}.")))
    }

    async fn validate(&self, props: &Props) -> HerderResult<ConfigInfos> {
        let (mut infos, plugin) = validate::validate(
            &self.plugins,
            props,
            self.worker.override_policy,
            self.worker.topic_creation_enable,
            self.exactly_once_check(),
        )?;
        let extra = (plugin.create)().validate_extra(props).await;
        for (key, error) in extra {
            match infos.configs.iter_mut().find(|(_, v)| v.name == key) {
                Some((_, v)) => v.errors.push(error),
                None => infos.configs.push((
                    None,
                    sluice_api::ConfigValue { name: key, value: None, recommended_values: Vec::new(), errors: vec![error], visible: true },
                )),
            }
        }
        Ok(infos)
    }

    async fn put_task_configs_internal(&self, name: &str, body: &[u8], signature: Option<session::InternalSignature>) -> HerderResult<()> {
        if self.cluster.is_none() {
            return Err(HerderError::BadRequest("Kafka Connect in standalone mode does not support externally setting task configurations.".into()));
        }
        self.put_task_configs_from_worker(name, body, signature.as_ref()).await
    }

    async fn fence_zombies_internal(&self, name: &str, body: &[u8], signature: Option<session::InternalSignature>) -> HerderResult<()> {
        if self.cluster.is_none() {
            return Err(HerderError::BadRequest("Kafka Connect in standalone mode does not support fencing zombie source tasks.".into()));
        }
        self.fence_zombies_from_worker(name, body, signature.as_ref()).await
    }
}
/// FAILED, or RESTARTING while an automatic restart is waited for: what `onlyFailed`
/// restarts pick.
fn failed(state: State) -> bool {
    matches!(state, State::Failed | State::Restarting)
}

/// A status as the REST API shows it: with the plugin's version (Connect 4's `version`).
fn with_version(state: StateInfo, plugin: &ConnectorPlugin) -> StateInfo {
    StateInfo { version: Some(plugin.version.to_owned()), ..state }
}

