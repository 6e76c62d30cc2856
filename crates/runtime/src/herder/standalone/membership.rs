//! Group membership (`sluice distributed` with a `group.id`): this worker's view of its
//! cluster and what the membership loop (`crate::herder::group`) calls on the herder: the
//! config topic followed on every member, revocations and assignments.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use super::{Entry, StandaloneHerder};
use crate::herder::session::{self, InternalSignature, SigningSettings};
use crate::herder::{ConnectorTaskId, HerderError, HerderResult, State, TargetState};
use crate::store::config::ConfigSnapshot;
use crate::store::status::StatusStore;
use crate::worker::restart::Unit;

/// A group member's view of its cluster (see `crate::herder::group`).
pub struct Cluster {
    /// This worker's REST URL, which followers forward writes to when it leads.
    pub url: String,
    /// Notified to make this worker rejoin its group (a rebalance).
    pub rejoin: Arc<tokio::sync::Notify>,
    pub(super) view: std::sync::Mutex<ClusterView>,
    /// The configs as read from the config topic; only touched under the entries lock.
    pub(super) snapshot: std::sync::Mutex<ConfigSnapshot>,
    /// This worker's share; only touched under the entries lock.
    pub(super) owned: std::sync::Mutex<Owned>,
    /// Cooperative protocols: what REST asked to restart, for the leader's next round.
    pub(super) restarts: std::sync::Mutex<super::Units>,
    /// `inter.worker.*`: how internal requests are signed once the group is sessioned.
    pub(super) signing: SigningSettings,
}

/// What the group assigned this worker, and what of it this worker has started.
#[derive(Default, Clone)]
pub(super) struct Owned {
    /// The last assignment came under a cooperative protocol.
    pub(super) cooperative: bool,
    pub(super) connectors: BTreeSet<String>,
    pub(super) tasks: BTreeSet<ConnectorTaskId>,
    /// Started since assigned (a start that failed is not retried at every rebalance).
    pub(super) started_connectors: BTreeSet<String>,
    pub(super) started_tasks: BTreeSet<ConnectorTaskId>,
}

/// How a connector's stored state changed, as read from the config topic.
pub(super) struct Change {
    pub(super) name: String,
    pub(super) config: bool,
    pub(super) tasks: bool,
    pub(super) target: Option<(TargetState, TargetState)>,
}

#[derive(Default, Clone)]
pub(super) struct ClusterView {
    pub(super) leader: bool,
    pub(super) leader_url: Option<String>,
    /// True from a revoke until the next assignment.
    pub(super) rebalancing: bool,
    /// The group runs the `sessioned` protocol (version 2): internal requests are signed.
    pub(super) sessioned: bool,
    /// Since when this worker has had no completed assignment (from the start, a rebalance,
    /// or membership given up because the coordinator could not be reached).
    pub(super) out_of_group_since: Option<std::time::Instant>,
}

impl Cluster {
    pub fn new(url: String, rejoin: Arc<tokio::sync::Notify>, signing: SigningSettings) -> Self {
        Self {
            url,
            rejoin,
            signing,
            view: std::sync::Mutex::new(ClusterView {
                rebalancing: true,
                out_of_group_since: Some(std::time::Instant::now()),
                ..Default::default()
            }),
            snapshot: Default::default(),
            owned: Default::default(),
            restarts: Default::default(),
        }
    }

    /// Asks for a rebalance that restarts these connectors and tasks: under a cooperative
    /// protocol the leader revokes them from their owners and deals them again; under the
    /// eager protocol every rebalance restarts everything.
    pub(super) fn restart(&self, connectors: impl IntoIterator<Item = String>, tasks: impl IntoIterator<Item = ConnectorTaskId>) {
        let mut r = self.restarts.lock().expect("restarts lock");
        r.connectors.extend(connectors);
        r.tasks.extend(tasks);
        drop(r);
        self.rejoin.notify_one();
    }

    pub(super) fn view(&self) -> ClusterView {
        self.view.lock().expect("cluster view lock").clone()
    }

    pub(super) fn owned(&self) -> std::sync::MutexGuard<'_, Owned> {
        self.owned.lock().expect("owned lock")
    }
}

/// Group membership (`sluice distributed` with a `group.id`): what the membership loop
/// calls. Eager protocol: a worker runs nothing between [`StandaloneHerder::revoke`] (of
/// everything) and [`StandaloneHerder::assigned`]; cooperative protocols: only the revoked
/// work stops.
impl StandaloneHerder {
    pub(super) fn cluster(&self) -> &Cluster {
        self.cluster.as_ref().expect("a group member")
    }

    /// The status board, which a group member keeps following (`StatusStore::follow`).
    pub fn status_store(&self) -> Arc<StatusStore> {
        self.status.clone()
    }

    /// The config topic's last offset read by this worker.
    pub fn config_position(&self) -> i64 {
        self.configs.position()
    }

    /// Reads new config records into the entries. The leader rejoins when there were any
    /// (a connector, its tasks or its target state changed), so the group is reassigned.
    /// Cooperative protocols: changes to what this worker runs are applied here.
    pub(super) async fn catch_up(&self, entries: &mut BTreeMap<String, Entry>) {
        let cluster = self.cluster();
        let mut snapshot = cluster.snapshot.lock().expect("snapshot lock").clone();
        match self.configs.catch_up(&mut snapshot).await {
            Ok(false) => return,
            Ok(true) => {}
            Err(e) => {
                tracing::warn!(error = %e, "could not read the config topic");
                return;
            }
        }
        // Cluster-wide log levels (KIP-976) apply here and change no assignment.
        for (namespace, level) in std::mem::take(&mut snapshot.logger_levels) {
            self.apply_cluster_logger_level(&namespace, &level);
        }
        let unchanged = cluster.snapshot.lock().expect("snapshot lock").connectors == snapshot.connectors;
        *cluster.snapshot.lock().expect("snapshot lock") = snapshot.clone();
        if unchanged {
            return;
        }
        let gone: Vec<String> = entries.keys().filter(|n| !snapshot.connectors.contains_key(*n)).cloned().collect();
        for name in gone {
            self.stop_connector(entries, &name).await;
            entries.remove(&name);
            self.status.remove_connector(&name);
            self.tasks.forget_connector(&name);
            let mut owned = cluster.owned();
            owned.started_connectors.remove(&name);
            owned.started_tasks.retain(|t| t.connector != name);
        }
        let mut changes = Vec::new();
        for (name, state) in snapshot.connectors {
            match entries.get_mut(&name) {
                Some(e) => {
                    if e.state.target != state.target {
                        e.target_tx.send_replace(state.target);
                    }
                    let change = Change {
                        name: name.clone(),
                        config: e.state.config != state.config,
                        tasks: e.state.tasks != state.tasks,
                        target: (e.state.target != state.target).then_some((e.state.target, state.target)),
                    };
                    if change.config || change.tasks || change.target.is_some() {
                        changes.push(change);
                    }
                    e.state = state;
                }
                None => {
                    let Some(plugin) = state.config.get("connector.class").and_then(|c| self.plugins.connector(c)).copied() else {
                        continue;
                    };
                    self.status.set_plugin_version(&name, plugin.version);
                    entries.insert(name, Entry::new(state, plugin));
                }
            }
        }
        if cluster.owned().cooperative {
            for change in changes {
                self.apply_change(entries, change).await;
            }
        }
        if cluster.view().leader {
            cluster.rejoin.notify_one();
        }
    }

    /// Cooperative protocols: applies a config change to what this worker runs.
    pub(super) async fn apply_change(&self, entries: &mut BTreeMap<String, Entry>, change: Change) {
        let name = change.name.as_str();
        let owned = self.cluster().owned().clone();
        let stop_related = matches!(change.target, Some((TargetState::Stopped, _)) | Some((_, TargetState::Stopped)));
        if owned.connectors.contains(name) {
            if change.config || stop_related {
                tracing::info!(connector = name, "connector config or target state changed; restarting the connector");
                let entry = entries.get_mut(name).expect("changed entries exist");
                if let Some(mut instance) = entry.instance.take() {
                    if let Err(e) = instance.stop().await {
                        tracing::warn!(connector = name, error = %e, "connector stop failed");
                    }
                }
                self.start_connector(entries, name).await;
                self.cluster().owned().started_connectors.insert(name.to_owned());
            } else if let Some((_, target)) = change.target {
                let (from, to) =
                    if target == TargetState::Paused { (State::Running, State::Paused) } else { (State::Paused, State::Running) };
                if self.status.connector(name).is_some_and(|s| s.state == from) {
                    self.status.put_connector(name, self.state(to, None));
                }
            }
        }
        if change.tasks {
            let entry = entries.get_mut(name).expect("changed entries exist");
            if !entry.tasks.is_empty() {
                tracing::info!(connector = name, "task configs changed; restarting this worker's tasks of the connector");
            }
            self.stop_tasks(entry, None).await;
            let mut started = Vec::new();
            for id in owned.tasks.iter().filter(|t| t.connector == name) {
                if (id.task as usize) < entry.state.tasks.len() {
                    self.start_task(entry, name, id.task);
                    started.push(id.clone());
                }
            }
            let mut owned = self.cluster().owned();
            owned.started_tasks.retain(|t| t.connector != name);
            owned.started_tasks.extend(started);
        }
    }

    /// Follows the config topic until `shutdown` (every group member runs this). The
    /// leader of a sessioned group also keeps the session key fresh.
    pub async fn follow_configs(self: Arc<Self>, shutdown: CancellationToken) {
        while !shutdown.is_cancelled() {
            {
                let mut entries = self.entries.lock().await;
                self.catch_up(&mut entries).await;
                self.rotate_session_key(&mut entries).await;
            }
            tokio::select! { _ = tokio::time::sleep(std::time::Duration::from_millis(250)) => {}, _ = shutdown.cancelled() => {} }
        }
    }

    /// Leader of a sessioned group: writes a new session key when there is none, it expired
    /// (`inter.worker.key.ttl.ms`) or it is not of the configured algorithm and size, as
    /// Connect's leader does at each tick.
    async fn rotate_session_key(&self, entries: &mut BTreeMap<String, Entry>) {
        let cluster = self.cluster();
        let view = cluster.view();
        if !view.leader || !view.sessioned || view.rebalancing {
            return;
        }
        let now = session::now_ms();
        let current = cluster.snapshot.lock().expect("snapshot lock").session_key.clone();
        if !cluster.signing.needs_new_key(current.as_ref(), now) {
            return;
        }
        let key = cluster.signing.generate(now);
        match self.configs.put_session_key(&key).await {
            Ok(()) => {
                tracing::info!(algorithm = %key.algorithm, "distributed a new session key for signed inter-worker requests");
                self.catch_up(entries).await;
            }
            Err(e) => tracing::warn!(error = %e, "could not write a new session key to the config topic; retrying"),
        }
    }

    /// Checks a signed internal request against the group's session key (only when the
    /// group is sessioned, as Connect does).
    pub(super) fn verify_internal(&self, signature: Option<&InternalSignature>, body: &[u8]) -> HerderResult<()> {
        let cluster = self.cluster();
        if !cluster.view().sessioned {
            return Ok(());
        }
        let key = cluster.snapshot.lock().expect("snapshot lock").session_key.clone();
        cluster.signing.verify(key.as_ref(), signature, body)
    }

    /// The entries, caught up, for an internal request about connector `name` that only the
    /// leader carries out (`refusal`: Connect's answer on a follower).
    async fn leader_entries(&self, name: &str, refusal: &str) -> HerderResult<tokio::sync::MutexGuard<'_, BTreeMap<String, Entry>>> {
        let mut entries = self.entries.lock().await;
        self.catch_up(&mut entries).await;
        if !entries.contains_key(name) {
            return Err(HerderError::connector_not_found(name));
        }
        if !self.cluster().view().leader {
            return Err(HerderError::Conflict(refusal.into()));
        }
        Ok(entries)
    }

    /// Internal `POST /connectors/{name}/tasks` on the leader (a follower forwards it):
    /// writes the task configs the connector's worker generated.
    pub(super) async fn put_task_configs_from_worker(
        &self,
        name: &str,
        body: &[u8],
        signature: Option<&InternalSignature>,
    ) -> HerderResult<()> {
        self.verify_internal(signature, body)?;
        let tasks: Vec<sluice_api::Props> = serde_json::from_slice(body)
            .map_err(|e| HerderError::BadRequest(format!("Task configs must be a JSON list of string maps: {e}")))?;
        let mut entries = self.leader_entries(name, "Only the leader may write task configurations.").await?;
        if entries[name].state.tasks == tasks {
            return Ok(());
        }
        self.configs.put_task_configs(name, &tasks).await.map_err(|e| HerderError::Internal(e.to_string()))?;
        tracing::info!(connector = name, tasks = tasks.len(), "wrote task configs sent by the worker running the connector");
        self.applied(&mut entries).await;
        Ok(())
    }

    /// Internal `PUT /connectors/{name}/fence` on the leader: fences the transactional
    /// producers of the connector's tasks (Connect's ids `<group.id>-<connector>-<task>`;
    /// initialising a producer with an id fences every older one) and writes the
    /// connector's task count record, so workers may start its exactly-once tasks.
    pub(super) async fn fence_zombies_from_worker(
        &self,
        name: &str,
        body: &[u8],
        signature: Option<&InternalSignature>,
    ) -> HerderResult<()> {
        self.verify_internal(signature, body)?;
        let entries = self.leader_entries(name, "Only the leader may perform zombie fencing.").await?;
        let count = entries[name].state.tasks.len() as u32;
        let group = self.worker.props.get("group.id").cloned().unwrap_or_default();
        for task in 0..count {
            let id = crate::task::exactly_once::transactional_id(&group, name, task);
            let producer = self.log.transactional(&id).map_err(|e| HerderError::Internal(e.to_string()))?.ok_or_else(|| {
                HerderError::BadRequest(
                    "Zombie fencing needs transactions; this worker's log has none (exactly-once source support needs a Kafka cluster)"
                        .into(),
                )
            })?;
            producer.init().await.map_err(|e| HerderError::Internal(format!("fencing {id}: {e}")))?;
        }
        self.configs.put_task_count(name, count).await.map_err(|e| HerderError::Internal(e.to_string()))?;
        tracing::info!(connector = name, tasks = count, "fenced the connector's earlier task producers");
        Ok(())
    }

    /// What REST asked to restart since the last call (see [`Cluster::restart`]).
    pub fn take_restarts(&self) -> super::Units {
        std::mem::take(&mut *self.cluster().restarts.lock().expect("restarts lock"))
    }

    /// A rebalance starts: writes answer 409 until the next assignment.
    pub fn rebalance_started(&self) {
        let mut view = self.cluster().view.lock().expect("cluster view lock");
        view.rebalancing = true;
        view.out_of_group_since.get_or_insert_with(std::time::Instant::now);
    }

    /// Stops these connectors and tasks (those this worker runs), and waits for them.
    pub async fn revoke(&self, connectors: &[String], tasks: &[ConnectorTaskId]) {
        let mut entries = self.entries.lock().await;
        let mut joins = Vec::new();
        for id in tasks {
            if let Some(t) = entries.get_mut(&id.connector).and_then(|e| e.tasks.remove(&id.task)) {
                t.shutdown.cancel();
                joins.push(t.join);
            }
            self.tasks.forget_task(id);
        }
        self.await_tasks(joins).await;
        for name in connectors {
            self.tasks.restarts.forget(&Unit::Connector(name.clone()));
            if let Some(mut instance) = entries.get_mut(name).and_then(|e| e.instance.take()) {
                if let Err(e) = instance.stop().await {
                    tracing::warn!(connector = %name, error = %e, "connector stop failed");
                }
            }
        }
        let mut owned = self.cluster().owned();
        for name in connectors {
            owned.connectors.remove(name);
            owned.started_connectors.remove(name);
        }
        for id in tasks {
            owned.tasks.remove(id);
            owned.started_tasks.remove(id);
        }
        tracing::info!(connectors = ?connectors, tasks = ?tasks, "stopped the revoked connectors and tasks");
    }

    /// Leader: every connector with its committed task count, as of the config topic's end.
    pub async fn assignable(&self) -> (i64, BTreeMap<String, u32>) {
        let mut entries = self.entries.lock().await;
        self.catch_up(&mut entries).await;
        (self.configs.position(), entries.iter().map(|(n, e)| (n.clone(), e.state.tasks.len() as u32)).collect())
    }

    /// This worker's whole share for `generation`: stops what it runs outside it, starts
    /// what of it is not running.
    pub async fn assigned(
        &self,
        generation: i32,
        leader: bool,
        leader_url: String,
        connectors: &[String],
        tasks: &[ConnectorTaskId],
        protocol_version: i16,
    ) {
        let cooperative = protocol_version >= 1;
        let mut entries = self.entries.lock().await;
        if self.stopping.load(Ordering::SeqCst) {
            return;
        }
        self.catch_up(&mut entries).await;
        // Source tasks resume where the worker that ran them before committed.
        if let Err(e) = self.offsets.reload().await {
            tracing::warn!(error = %e, "could not re-read the offsets topic; moved source tasks may repeat records");
        }
        self.status.set_generation(generation);
        let sessioned = protocol_version >= 2;
        *self.cluster().view.lock().expect("cluster view lock") =
            ClusterView { leader, leader_url: Some(leader_url), rebalancing: false, sessioned, out_of_group_since: None };
        let want_connectors: BTreeSet<String> = connectors.iter().cloned().collect();
        let want_tasks: BTreeSet<ConnectorTaskId> = tasks.iter().cloned().collect();

        // Anything running outside the assignment stops (it should already have been revoked).
        let mut joins = Vec::new();
        for (name, entry) in entries.iter_mut() {
            let stray: Vec<u32> = entry
                .tasks
                .keys()
                .copied()
                .filter(|t| !want_tasks.contains(&ConnectorTaskId { connector: name.clone(), task: *t }))
                .collect();
            for t in stray {
                tracing::warn!(connector = %name, task = t, "stopping a task that is not assigned to this worker");
                let handle = entry.tasks.remove(&t).expect("listed");
                handle.shutdown.cancel();
                joins.push(handle.join);
            }
        }
        self.await_tasks(joins).await;
        for (name, entry) in entries.iter_mut() {
            if !want_connectors.contains(name) {
                if let Some(mut instance) = entry.instance.take() {
                    tracing::warn!(connector = %name, "stopping a connector that is not assigned to this worker");
                    if let Err(e) = instance.stop().await {
                        tracing::warn!(connector = %name, error = %e, "connector stop failed");
                    }
                }
            }
        }
        let mut owned = {
            let mut o = self.cluster().owned();
            o.cooperative = cooperative;
            o.connectors = want_connectors.clone();
            o.tasks = want_tasks.clone();
            o.started_connectors.retain(|c| want_connectors.contains(c));
            o.started_tasks.retain(|t| want_tasks.contains(t));
            o.clone()
        };
        for name in connectors {
            if entries.contains_key(name) && !owned.started_connectors.contains(name) {
                self.start_connector(&mut entries, name).await;
                owned.started_connectors.insert(name.clone());
            }
        }
        for id in tasks {
            let Some(entry) = entries.get_mut(&id.connector) else { continue };
            if (id.task as usize) < entry.state.tasks.len() && !entry.tasks.contains_key(&id.task) && !owned.started_tasks.contains(id) {
                self.start_task(entry, &id.connector, id.task);
                owned.started_tasks.insert(id.clone());
            }
        }
        {
            let mut o = self.cluster().owned();
            o.started_connectors = owned.started_connectors;
            o.started_tasks = owned.started_tasks;
        }
        self.ready.store(true, Ordering::SeqCst);
    }

    /// After a write to the config topic: read it back, so the answer reflects it.
    pub(super) async fn applied(&self, entries: &mut BTreeMap<String, Entry>) {
        self.catch_up(entries).await;
    }
}
