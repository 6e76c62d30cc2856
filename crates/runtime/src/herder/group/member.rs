//! The membership loop of one worker (Connect's `WorkerCoordinator`):
//!
//! ```text
//!   FindCoordinator ─▶ [eager: revoke all] ─▶ JoinGroup ─▶ leader? assign ─▶ SyncGroup ─▶ apply
//!         ▲                    ▲                                                         │
//!         │                    └─ REBALANCE_IN_PROGRESS, ILLEGAL_GENERATION, ──── Heartbeat every
//!         │                       rejoin requested, revocations applied,         heartbeat.interval.ms
//!         │                       scheduled delay expired
//!         └──────────── coordinator moved or unreachable, UNKNOWN_MEMBER_ID (revoke all first) ◀┘
//!   shutdown: LeaveGroup
//! ```
//! Eager protocol: the worker gives up everything it runs **before** it sends JoinGroup,
//! and the assignment is its whole share. Cooperative protocols: the worker keeps running
//! through the rebalance and joins with what it runs; the assignment names what it must
//! stop (revoked, stopped before anything new starts; then it rejoins at once so the
//! leader can hand the revoked work on) and what is new (added to what it kept); a `delay`
//! makes it rejoin when the delay expires.
//!
//! Progress guarantee, both protocols: when a heartbeat has not succeeded within half the
//! session timeout, or the coordinator says this member is unknown, the worker stops
//! everything it runs, so by the time the coordinator expires the member and its work is
//! handed to another, its connectors and tasks are stopping or stopped (up to
//! `task.shutdown.graceful.timeout.ms`).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use bytes::Bytes;
use kafka_protocol::error::ParseResponseErrorCode;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::{FindCoordinatorRequest, GroupId, HeartbeatRequest, JoinGroupRequest, LeaveGroupRequest, SyncGroupRequest};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::connection::Connection;
use super::cooperative::{IncrementalAssignor, Round, Units};
use super::protocol::{Assignment, ConnectProtocol, WorkerState, NO_ERROR, PROTOCOL_TYPE};
use super::{GroupError, GroupSettings};
use crate::herder::ConnectorTaskId;

/// Request versions: the classic (non-flexible) ones every broker generation answers.
const FIND_COORDINATOR_V: i16 = 1;
const JOIN_GROUP_V: i16 = 2;
const SYNC_GROUP_V: i16 = 1;
const HEARTBEAT_V: i16 = 1;
const LEAVE_GROUP_V: i16 = 1;

/// Pause before retrying after the coordinator was unreachable or answered an error.
const RETRY_BACKOFF: Duration = Duration::from_millis(500);
/// Between attempts to reach the coordinator again while this worker keeps its work.
const RECONNECT_BACKOFF: Duration = Duration::from_millis(200);

/// What the membership loop asks of the worker (the herder).
#[async_trait]
pub trait GroupWorker: Send + Sync + 'static {
    /// The metadata this worker joins with: its REST URL and config-topic position (the
    /// loop fills in the assignment).
    async fn worker_state(&self) -> WorkerState;

    /// A rebalance starts (before every JoinGroup): writes answer 409 until [`GroupWorker::assigned`].
    async fn rebalance_started(&self) {}

    /// Stop these connectors and tasks, and wait for them. Eager protocol: everything,
    /// before every join; cooperative: what the leader revoked. Also everything when
    /// membership is lost.
    async fn revoke(&self, connectors: &[String], tasks: &[ConnectorTaskId]);

    /// Leader only: the config-topic position and every connector with its task count,
    /// read to the end of the config topic.
    async fn configured(&self) -> (i64, BTreeMap<String, u32>);

    /// Connectors and tasks REST asked to restart since the last call (cooperative
    /// protocols: the leader revokes them from their owners and deals them again).
    async fn take_restarts(&self) -> Units {
        Units::default()
    }

    /// This worker's whole share for `generation`: run exactly this (start what is not
    /// running).
    async fn assigned(&self, generation: i32, member_id: &str, assignment: &Assignment);
}

/// One worker's membership in the Connect group.
pub struct GroupMember {
    settings: GroupSettings,
    rejoin: Arc<Notify>,
}

/// How a membership round ended.
enum Next {
    /// Join again with the same coordinator.
    Rejoin,
    /// The coordinator no longer knows this member: stop everything, join as a new member.
    Lost,
    /// Find the coordinator again.
    Rediscover,
    Stop,
}

/// What the loop remembers between rounds.
struct Membership {
    member_id: String,
    /// What this worker runs (its whole assignment), None when nothing.
    held: Option<Assignment>,
    /// The protocol of the last completed round (at first, the configured one).
    protocol: ConnectProtocol,
    last_completed_generation: i32,
    assignor: IncrementalAssignor,
    /// When the last assignment asked for a rejoin (its `delay`).
    rejoin_at: Option<tokio::time::Instant>,
    /// The round clock the assignor's delays are measured on.
    clock: Instant,
    /// The generation of `held`, and when the coordinator last confirmed it (its SyncGroup
    /// or a heartbeat).
    generation: i32,
    confirmed: Option<tokio::time::Instant>,
}

impl Membership {
    /// Whether this worker may keep its work while it reconnects: the coordinator confirmed
    /// its membership less than half a session timeout ago, so it cannot have handed the
    /// work to another member yet (it waits a whole session timeout). Past that, the work
    /// stops, as it always did when a heartbeat went unanswered that long.
    fn may_keep(&self, session_timeout: Duration) -> bool {
        self.held.is_some() && self.confirmed.is_some_and(|t| t.elapsed() < session_timeout / 2)
    }

    /// How long reaching the coordinator again (and its first heartbeat) may take while the
    /// work goes on: up to three quarters of a session timeout after the last confirmation,
    /// still short of the coordinator's expiry of this member.
    fn reconnect_deadline(&self, session_timeout: Duration) -> tokio::time::Instant {
        self.confirmed.unwrap_or_else(tokio::time::Instant::now) + session_timeout * 3 / 4
    }

    async fn revoke_all(&mut self, worker: &dyn GroupWorker) {
        if let Some(held) = self.held.take() {
            worker.revoke(&held.connectors, &held.tasks).await;
        }
    }
}

impl GroupMember {
    pub fn new(settings: GroupSettings) -> Self {
        Self { settings, rejoin: Arc::new(Notify::new()) }
    }

    /// Call `notify_one()` on it to make this worker rejoin (a rebalance of the group).
    pub fn rejoin_handle(&self) -> Arc<Notify> {
        self.rejoin.clone()
    }

    /// Runs until `shutdown`; leaves the group on the way out.
    pub async fn run(self, worker: Arc<dyn GroupWorker>, shutdown: CancellationToken) {
        let protocol = self.settings.protocol;
        let mut m = Membership {
            member_id: String::new(),
            held: None,
            protocol,
            last_completed_generation: -1,
            assignor: IncrementalAssignor::new(self.settings.max_delay.as_millis() as u64),
            rejoin_at: None,
            clock: Instant::now(),
            generation: -1,
            confirmed: None,
        };
        let session = self.settings.session_timeout;
        // Set when a connection to the coordinator broke while this worker kept its work:
        // the next connection resumes heartbeats for the generation it holds.
        let mut resume = false;
        while !shutdown.is_cancelled() {
            let found = match resume {
                true => tokio::time::timeout_at(m.reconnect_deadline(session), self.coordinator()).await.unwrap_or_else(|_| {
                    Err(GroupError::Timeout { what: "finding the group coordinator", addr: self.settings.bootstrap.join(",") })
                }),
                false => self.coordinator().await,
            };
            let mut conn = match found {
                Ok(c) => c,
                Err(e) if resume && m.may_keep(session) => {
                    tracing::warn!(error = %e, group.id = %self.settings.group_id, "cannot reach the group coordinator; retrying, keeping this worker's assignment meanwhile");
                    tokio::select! { _ = tokio::time::sleep(RECONNECT_BACKOFF) => {}, _ = shutdown.cancelled() => {} }
                    continue;
                }
                Err(e) => {
                    tracing::warn!(error = %e, group.id = %self.settings.group_id, "cannot reach the group coordinator; retrying");
                    worker.rebalance_started().await;
                    m.revoke_all(worker.as_ref()).await;
                    resume = false;
                    tokio::select! { _ = tokio::time::sleep(RETRY_BACKOFF) => {}, _ = shutdown.cancelled() => {} }
                    continue;
                }
            };
            loop {
                let next = if std::mem::take(&mut resume) {
                    tracing::info!(generation = m.generation, "reconnected to the group coordinator; resuming heartbeats");
                    let deadline = m.reconnect_deadline(session);
                    self.heartbeats(&mut conn, &mut m, &shutdown, Some(deadline)).await
                } else {
                    self.round(&mut conn, worker.as_ref(), &mut m, &shutdown).await
                };
                match next {
                    Ok(Next::Rejoin) => continue,
                    Ok(Next::Lost) => {
                        m.revoke_all(worker.as_ref()).await;
                        m.member_id.clear();
                        continue;
                    }
                    Ok(Next::Rediscover) => break,
                    Ok(Next::Stop) => {
                        self.leave(&mut conn, &m.member_id).await;
                        return;
                    }
                    Err(e) if m.may_keep(session) => {
                        // A connection that broke (a broker restart, a cut): the coordinator
                        // still counts this member until its session times out.
                        tracing::warn!(error = %e, "lost the connection to the group coordinator; reconnecting, keeping this worker's assignment");
                        resume = true;
                        tokio::select! { _ = tokio::time::sleep(RECONNECT_BACKOFF) => {}, _ = shutdown.cancelled() => {} }
                        break;
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "group membership interrupted; giving up this worker's assignment and rejoining");
                        worker.rebalance_started().await;
                        m.revoke_all(worker.as_ref()).await;
                        tokio::select! { _ = tokio::time::sleep(RETRY_BACKOFF) => {}, _ = shutdown.cancelled() => {} }
                        break;
                    }
                }
            }
        }
    }

    /// Opens a connection to the group's coordinator as a join does (TLS and SASL
    /// included) and returns its address: a start-up check that names refused
    /// certificates or credentials before the worker starts anything.
    pub async fn probe(settings: &GroupSettings) -> Result<String, GroupError> {
        GroupMember::new(settings.clone()).coordinator().await.map(|c| c.addr)
    }

    async fn coordinator(&self) -> Result<Connection, GroupError> {
        let s = &self.settings;
        let mut last = GroupError::NoBootstrap;
        for addr in &s.bootstrap {
            let mut conn = match Connection::open(addr, &s.client_id, s.request_timeout(), &s.security).await {
                Ok(c) => c,
                Err(e) => {
                    last = e;
                    continue;
                }
            };
            let req = FindCoordinatorRequest::default().with_key(StrBytes::from_string(s.group_id.clone())).with_key_type(0);
            let resp = conn.call(&req, FIND_COORDINATOR_V, s.request_timeout()).await?;
            if let Some(err) = resp.error_code.err() {
                return Err(GroupError::Broker { what: "FindCoordinator", error: err });
            }
            let coordinator = format!("{}:{}", resp.host.as_str(), resp.port);
            if coordinator == conn.addr {
                return Ok(conn);
            }
            return Connection::open(&coordinator, &s.client_id, s.request_timeout(), &s.security).await;
        }
        Err(last)
    }

    /// Join, sync, then heartbeat until something asks for a new round.
    async fn round(
        &self,
        conn: &mut Connection,
        worker: &dyn GroupWorker,
        m: &mut Membership,
        shutdown: &CancellationToken,
    ) -> Result<Next, GroupError> {
        let s = &self.settings;
        worker.rebalance_started().await;
        if !m.protocol.is_cooperative() {
            m.revoke_all(worker).await;
        }
        if shutdown.is_cancelled() {
            return Ok(Next::Stop);
        }
        let group = GroupId(StrBytes::from_string(s.group_id.clone()));
        let state = WorkerState { assignment: m.held.clone(), ..worker.worker_state().await };
        // In order of preference; a worker also offers every older protocol.
        let offered: Vec<ConnectProtocol> = s.offered_protocols();
        let join = JoinGroupRequest::default()
            .with_group_id(group.clone())
            .with_session_timeout_ms(s.session_timeout.as_millis() as i32)
            .with_rebalance_timeout_ms(s.rebalance_timeout.as_millis() as i32)
            .with_member_id(StrBytes::from_string(m.member_id.clone()))
            .with_protocol_type(StrBytes::from_static_str(PROTOCOL_TYPE))
            .with_protocols(
                offered
                    .iter()
                    .map(|p| {
                        JoinGroupRequestProtocol::default()
                            .with_name(StrBytes::from_static_str(p.name()))
                            .with_metadata(Bytes::from(state.encode(p.version())))
                    })
                    .collect(),
            );
        // The coordinator holds a JoinGroup until every member has joined (rebalance timeout).
        let joined = tokio::select! {
            r = conn.call(&join, JOIN_GROUP_V, s.rebalance_timeout + s.request_timeout()) => r?,
            _ = shutdown.cancelled() => return Ok(Next::Stop),
        };
        if let Some(err) = joined.error_code.err() {
            if err == ResponseError::MemberIdRequired && !joined.member_id.is_empty() {
                // KIP-394 (some brokers ask at every version): join again with this id.
                m.member_id = joined.member_id.to_string();
                return Ok(Next::Rejoin);
            }
            return self.after_error("JoinGroup", err).await;
        }
        m.member_id = joined.member_id.to_string();
        let generation = joined.generation_id;
        let leader = joined.leader.to_string();
        let chosen = joined.protocol_name.as_ref().map(|p| p.to_string()).unwrap_or_default();
        let protocol = ConnectProtocol::from_name(&chosen)
            .filter(|p| offered.contains(p))
            .ok_or_else(|| GroupError::Malformed(format!("the coordinator chose protocol {chosen:?}, which this worker did not offer")))?;
        let mut assignments = Vec::new();
        if leader == m.member_id {
            let mut members = BTreeMap::new();
            for member in &joined.members {
                match WorkerState::decode(&member.metadata) {
                    Ok(state) => {
                        members.insert(member.member_id.to_string(), state);
                    }
                    Err(e) => {
                        tracing::warn!(member = %member.member_id.as_str(), error = %e, "ignoring a member whose metadata does not parse")
                    }
                }
            }
            let (offset, connectors) = worker.configured().await;
            let restart = worker.take_restarts().await;
            tracing::info!(
                generation,
                members = members.len(),
                protocol = protocol.name(),
                "elected group leader; assigning connectors and tasks"
            );
            let out = if protocol.is_cooperative() {
                m.assignor.assign(&Round {
                    leader: &leader,
                    members: &members,
                    config_offset: offset,
                    configured: &connectors,
                    last_completed_generation: m.last_completed_generation,
                    generation,
                    version: protocol.version(),
                    now_ms: m.clock.elapsed().as_millis() as u64,
                    restart: &restart,
                })
            } else {
                super::assignor::eager(&leader, &members, offset, &connectors)
            };
            for (id, a) in out {
                assignments.push(
                    SyncGroupRequestAssignment::default()
                        .with_member_id(StrBytes::from_string(id))
                        .with_assignment(Bytes::from(a.encode())),
                );
            }
        }
        let sync = SyncGroupRequest::default()
            .with_group_id(group.clone())
            .with_generation_id(generation)
            .with_member_id(StrBytes::from_string(m.member_id.clone()))
            .with_assignments(assignments);
        let synced = tokio::select! {
            r = conn.call(&sync, SYNC_GROUP_V, s.rebalance_timeout + s.request_timeout()) => r?,
            _ = shutdown.cancelled() => return Ok(Next::Stop),
        };
        if let Some(err) = synced.error_code.err() {
            return self.after_error("SyncGroup", err).await;
        }
        let assignment = Assignment::decode(&synced.assignment).map_err(|e| GroupError::Malformed(e.to_string()))?;
        m.protocol = protocol;
        if assignment.error != NO_ERROR {
            tracing::warn!(error = assignment.error, "the leader could not assign (config mismatch); rejoining");
            tokio::time::sleep(RETRY_BACKOFF).await;
            return Ok(Next::Rejoin);
        }
        let revoked = !assignment.revoked_connectors.is_empty() || !assignment.revoked_tasks.is_empty();
        tracing::info!(
            generation,
            member_id = %m.member_id,
            leader = %assignment.leader,
            protocol = protocol.name(),
            connectors = ?assignment.connectors,
            tasks = ?assignment.tasks,
            revoked_connectors = ?assignment.revoked_connectors,
            revoked_tasks = ?assignment.revoked_tasks,
            delay_ms = assignment.delay,
            "joined the group"
        );
        let whole = if protocol.is_cooperative() {
            if revoked {
                worker.revoke(&assignment.revoked_connectors, &assignment.revoked_tasks).await;
            }
            assignment.merge_into(m.held.as_ref())
        } else {
            assignment.clone()
        };
        worker.assigned(generation, &m.member_id, &whole).await;
        m.held = Some(whole);
        m.last_completed_generation = generation;
        m.rejoin_at = (assignment.delay > 0).then(|| tokio::time::Instant::now() + Duration::from_millis(assignment.delay as u64));
        if revoked {
            // The leader hands the revoked work on in the next round.
            return Ok(Next::Rejoin);
        }

        m.generation = generation;
        m.confirmed = Some(tokio::time::Instant::now());
        self.heartbeats(conn, m, shutdown, None).await
    }

    /// Heartbeats for the generation this worker holds until something asks for a new round.
    /// `resumed`: on a new connection after one broke, the first heartbeat goes at once and
    /// must be answered by this deadline.
    async fn heartbeats(
        &self,
        conn: &mut Connection,
        m: &mut Membership,
        shutdown: &CancellationToken,
        mut resumed: Option<tokio::time::Instant>,
    ) -> Result<Next, GroupError> {
        let s = &self.settings;
        let generation = m.generation;
        let heartbeat = HeartbeatRequest::default()
            .with_group_id(GroupId(StrBytes::from_string(s.group_id.clone())))
            .with_generation_id(generation)
            .with_member_id(StrBytes::from_string(m.member_id.clone()));
        loop {
            let scheduled = async {
                match m.rejoin_at {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            };
            let wait = if resumed.is_some() { Duration::ZERO } else { s.heartbeat_interval };
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                _ = self.rejoin.notified() => {
                    tracing::info!(generation, "rejoining the group to rebalance");
                    return Ok(Next::Rejoin);
                }
                _ = scheduled => {
                    tracing::info!(generation, "the scheduled rebalance delay expired; rejoining");
                    m.rejoin_at = None;
                    return Ok(Next::Rejoin);
                }
                _ = shutdown.cancelled() => return Ok(Next::Stop),
            }
            // Half the session timeout: a worker cut off from the coordinator stops its
            // work before the coordinator gives it to someone else.
            let timeout = match resumed.take() {
                Some(deadline) => deadline.saturating_duration_since(tokio::time::Instant::now()).max(Duration::from_millis(100)),
                None => s.session_timeout / 2,
            };
            let resp = conn.call(&heartbeat, HEARTBEAT_V, timeout).await?;
            if let Some(err) = resp.error_code.err() {
                return self.after_error("Heartbeat", err).await;
            }
            m.confirmed = Some(tokio::time::Instant::now());
        }
    }

    async fn after_error(&self, what: &'static str, err: ResponseError) -> Result<Next, GroupError> {
        match err {
            ResponseError::RebalanceInProgress | ResponseError::IllegalGeneration => {
                tracing::info!(request = what, error = %err, "group is rebalancing; rejoining");
                Ok(Next::Rejoin)
            }
            ResponseError::UnknownMemberId => {
                tracing::info!(request = what, error = %err, "the coordinator does not know this member; stopping its work and rejoining as a new one");
                Ok(Next::Lost)
            }
            ResponseError::NotCoordinator | ResponseError::CoordinatorNotAvailable | ResponseError::CoordinatorLoadInProgress => {
                tracing::info!(request = what, error = %err, "looking for the group coordinator again");
                tokio::time::sleep(RETRY_BACKOFF).await;
                Ok(Next::Rediscover)
            }
            other => Err(GroupError::Broker { what, error: other }),
        }
    }

    async fn leave(&self, conn: &mut Connection, member_id: &str) {
        if member_id.is_empty() {
            return;
        }
        let req = LeaveGroupRequest::default()
            .with_group_id(GroupId(StrBytes::from_string(self.settings.group_id.clone())))
            .with_member_id(StrBytes::from_string(member_id.to_owned()));
        match conn.call(&req, LEAVE_GROUP_V, self.settings.request_timeout()).await {
            Ok(r) if r.error_code == 0 => tracing::info!(member_id, "left the group"),
            Ok(r) => tracing::warn!(
                member_id,
                error = r.error_code,
                "LeaveGroup failed; the coordinator expires this member after session.timeout.ms"
            ),
            Err(e) => {
                tracing::warn!(member_id, error = %e, "LeaveGroup failed; the coordinator expires this member after session.timeout.ms")
            }
        }
    }
}
