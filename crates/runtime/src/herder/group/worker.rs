//! The herder as a group member: what [`super::member::GroupMember`] drives.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;

use super::cooperative::Units;
use super::member::GroupWorker;
use super::protocol::{Assignment, WorkerState};
use crate::herder::standalone::StandaloneHerder;
use crate::herder::ConnectorTaskId;

pub struct ClusterWorker {
    pub herder: Arc<StandaloneHerder>,
    /// This worker's REST URL.
    pub url: String,
}

#[async_trait]
impl GroupWorker for ClusterWorker {
    async fn worker_state(&self) -> WorkerState {
        WorkerState { url: self.url.clone(), config_offset: self.herder.config_position(), assignment: None }
    }

    async fn rebalance_started(&self) {
        self.herder.rebalance_started();
    }

    async fn revoke(&self, connectors: &[String], tasks: &[ConnectorTaskId]) {
        self.herder.revoke(connectors, tasks).await;
    }

    async fn configured(&self) -> (i64, BTreeMap<String, u32>) {
        self.herder.assignable().await
    }

    async fn take_restarts(&self) -> Units {
        self.herder.take_restarts()
    }

    async fn assigned(&self, generation: i32, member_id: &str, a: &Assignment) {
        let leader = a.leader == member_id;
        self.herder.assigned(generation, leader, a.leader_url.clone(), &a.connectors, &a.tasks, a.version).await;
    }
}
