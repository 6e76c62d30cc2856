//! The herder as a group member: what [`super::member::GroupMember`] drives.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;

use super::member::GroupWorker;
use super::protocol::{Assignment, WorkerState};
use crate::herder::standalone::StandaloneHerder;

pub struct ClusterWorker {
    pub herder: Arc<StandaloneHerder>,
    /// This worker's REST URL.
    pub url: String,
}

#[async_trait]
impl GroupWorker for ClusterWorker {
    async fn worker_state(&self) -> WorkerState {
        WorkerState { url: self.url.clone(), config_offset: self.herder.config_position() }
    }

    async fn revoke(&self) {
        self.herder.revoke().await;
    }

    async fn assign(&self, leader: &str, members: &BTreeMap<String, WorkerState>) -> BTreeMap<String, Assignment> {
        let (offset, connectors) = self.herder.assignable().await;
        super::assignor::eager(leader, members, offset, &connectors)
    }

    async fn assigned(&self, generation: i32, member_id: &str, a: Assignment) {
        let leader = a.leader == member_id;
        self.herder.assigned(generation, leader, a.leader_url, a.connectors, a.tasks).await;
    }
}
