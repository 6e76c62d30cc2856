//! The membership loop of one worker (Connect's `WorkerCoordinator`, eager protocol):
//!
//! ```text
//!   FindCoordinator ─▶ revoke all ─▶ JoinGroup ─▶ leader? assign ─▶ SyncGroup ─▶ assigned
//!         ▲                ▲                                                        │
//!         │                └─ REBALANCE_IN_PROGRESS, UNKNOWN_MEMBER_ID, ─── Heartbeat every
//!         │                   ILLEGAL_GENERATION, rejoin requested            heartbeat.interval.ms
//!         └────────────── coordinator moved or unreachable (revoke first) ◀──────┘
//!   shutdown: LeaveGroup
//! ```
//! Progress guarantee: the worker gives up (stops) everything it runs **before** it sends
//! JoinGroup, and when a heartbeat has not succeeded within half the session timeout, so
//! by the time the coordinator expires the member and hands its work to another, its
//! connectors and tasks are stopping or stopped (up to `task.shutdown.graceful.timeout.ms`).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

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
use super::protocol::{Assignment, WorkerState, EAGER, PROTOCOL_TYPE};
use super::{GroupError, GroupSettings};

/// Request versions: the classic (non-flexible) ones every broker generation answers.
const FIND_COORDINATOR_V: i16 = 1;
const JOIN_GROUP_V: i16 = 2;
const SYNC_GROUP_V: i16 = 1;
const HEARTBEAT_V: i16 = 1;
const LEAVE_GROUP_V: i16 = 1;

/// Pause before retrying after the coordinator was unreachable or answered an error.
const RETRY_BACKOFF: Duration = Duration::from_millis(500);

/// What the membership loop asks of the worker (the herder).
#[async_trait]
pub trait GroupWorker: Send + Sync + 'static {
    /// The metadata this worker joins with (its REST URL and config-topic position).
    async fn worker_state(&self) -> WorkerState;

    /// Stop every connector and task this worker runs, and wait for them. Called before
    /// every join (eager protocol) and when membership is lost.
    async fn revoke(&self);

    /// Leader only: the assignment of every member (ids → metadata).
    async fn assign(&self, leader: &str, members: &BTreeMap<String, WorkerState>) -> BTreeMap<String, Assignment>;

    /// This worker's share for `generation`; start it.
    async fn assigned(&self, generation: i32, member_id: &str, assignment: Assignment);
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
    /// Find the coordinator again.
    Rediscover,
    Stop,
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
        let mut member_id = String::new();
        let mut holding = false;
        while !shutdown.is_cancelled() {
            let mut conn = match self.coordinator().await {
                Ok(c) => c,
                Err(e) => {
                    tracing::warn!(error = %e, group.id = %self.settings.group_id, "cannot reach the group coordinator; retrying");
                    if holding {
                        worker.revoke().await;
                        holding = false;
                    }
                    tokio::select! { _ = tokio::time::sleep(RETRY_BACKOFF) => {}, _ = shutdown.cancelled() => {} }
                    continue;
                }
            };
            loop {
                let next = self.round(&mut conn, worker.as_ref(), &mut member_id, &mut holding, &shutdown).await;
                match next {
                    Ok(Next::Rejoin) => continue,
                    Ok(Next::Rediscover) => break,
                    Ok(Next::Stop) => {
                        self.leave(&mut conn, &member_id).await;
                        return;
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "group membership interrupted; giving up this worker's assignment and rejoining");
                        if holding {
                            worker.revoke().await;
                            holding = false;
                        }
                        tokio::select! { _ = tokio::time::sleep(RETRY_BACKOFF) => {}, _ = shutdown.cancelled() => {} }
                        break;
                    }
                }
            }
        }
    }

    async fn coordinator(&self) -> Result<Connection, GroupError> {
        let s = &self.settings;
        let mut last = GroupError::NoBootstrap;
        for addr in &s.bootstrap {
            let mut conn = match Connection::open(addr, &s.client_id, s.request_timeout()).await {
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
            return Connection::open(&coordinator, &s.client_id, s.request_timeout()).await;
        }
        Err(last)
    }

    /// Join, sync, then heartbeat until something asks for a new round.
    async fn round(
        &self,
        conn: &mut Connection,
        worker: &dyn GroupWorker,
        member_id: &mut String,
        holding: &mut bool,
        shutdown: &CancellationToken,
    ) -> Result<Next, GroupError> {
        let s = &self.settings;
        if *holding {
            worker.revoke().await;
            *holding = false;
        }
        if shutdown.is_cancelled() {
            return Ok(Next::Stop);
        }
        let group = GroupId(StrBytes::from_string(s.group_id.clone()));
        let metadata = worker.worker_state().await;
        let join = JoinGroupRequest::default()
            .with_group_id(group.clone())
            .with_session_timeout_ms(s.session_timeout.as_millis() as i32)
            .with_rebalance_timeout_ms(s.rebalance_timeout.as_millis() as i32)
            .with_member_id(StrBytes::from_string(member_id.clone()))
            .with_protocol_type(StrBytes::from_static_str(PROTOCOL_TYPE))
            .with_protocols(vec![JoinGroupRequestProtocol::default()
                .with_name(StrBytes::from_static_str(EAGER))
                .with_metadata(Bytes::from(metadata.encode()))]);
        // The coordinator holds a JoinGroup until every member has joined (rebalance timeout).
        let joined = tokio::select! {
            r = conn.call(&join, JOIN_GROUP_V, s.rebalance_timeout + s.request_timeout()) => r?,
            _ = shutdown.cancelled() => return Ok(Next::Stop),
        };
        if let Some(err) = joined.error_code.err() {
            if err == ResponseError::MemberIdRequired && !joined.member_id.is_empty() {
                // KIP-394 (some brokers ask at every version): join again with this id.
                *member_id = joined.member_id.to_string();
                return Ok(Next::Rejoin);
            }
            return self.after_error("JoinGroup", err, member_id).await;
        }
        *member_id = joined.member_id.to_string();
        let generation = joined.generation_id;
        let leader = joined.leader.to_string();
        let mut assignments = Vec::new();
        if leader == *member_id {
            let mut members = BTreeMap::new();
            for m in &joined.members {
                match WorkerState::decode(&m.metadata) {
                    Ok(state) => {
                        members.insert(m.member_id.to_string(), state);
                    }
                    Err(e) => tracing::warn!(member = %m.member_id.as_str(), error = %e, "ignoring a member whose metadata does not parse"),
                }
            }
            tracing::info!(generation, members = members.len(), "elected group leader; assigning connectors and tasks");
            for (id, a) in worker.assign(&leader, &members).await {
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
            .with_member_id(StrBytes::from_string(member_id.clone()))
            .with_assignments(assignments);
        let synced = tokio::select! {
            r = conn.call(&sync, SYNC_GROUP_V, s.rebalance_timeout + s.request_timeout()) => r?,
            _ = shutdown.cancelled() => return Ok(Next::Stop),
        };
        if let Some(err) = synced.error_code.err() {
            return self.after_error("SyncGroup", err, member_id).await;
        }
        let assignment = Assignment::decode(&synced.assignment).map_err(|e| GroupError::Malformed(e.to_string()))?;
        if assignment.error != super::protocol::NO_ERROR {
            tracing::warn!(error = assignment.error, "the leader could not assign (config mismatch); rejoining");
            tokio::time::sleep(RETRY_BACKOFF).await;
            return Ok(Next::Rejoin);
        }
        tracing::info!(generation, member_id = %member_id, leader = %assignment.leader, connectors = ?assignment.connectors, tasks = assignment.tasks.len(), "joined the group");
        worker.assigned(generation, member_id, assignment).await;
        *holding = true;

        let heartbeat = HeartbeatRequest::default()
            .with_group_id(group)
            .with_generation_id(generation)
            .with_member_id(StrBytes::from_string(member_id.clone()));
        loop {
            tokio::select! {
                _ = tokio::time::sleep(s.heartbeat_interval) => {}
                _ = self.rejoin.notified() => {
                    tracing::info!(generation, "rejoining the group to rebalance");
                    return Ok(Next::Rejoin);
                }
                _ = shutdown.cancelled() => return Ok(Next::Stop),
            }
            // Half the session timeout: a worker cut off from the coordinator stops its
            // work before the coordinator gives it to someone else.
            let resp = conn.call(&heartbeat, HEARTBEAT_V, s.session_timeout / 2).await?;
            if let Some(err) = resp.error_code.err() {
                return self.after_error("Heartbeat", err, member_id).await;
            }
        }
    }

    async fn after_error(&self, what: &'static str, err: ResponseError, member_id: &mut String) -> Result<Next, GroupError> {
        match err {
            ResponseError::RebalanceInProgress | ResponseError::IllegalGeneration => {
                tracing::info!(request = what, error = %err, "group is rebalancing; rejoining");
                Ok(Next::Rejoin)
            }
            ResponseError::UnknownMemberId => {
                tracing::info!(request = what, error = %err, "the coordinator does not know this member; rejoining as a new one");
                member_id.clear();
                Ok(Next::Rejoin)
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
