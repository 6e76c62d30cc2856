//! Group membership: workers with the same `group.id` form one Connect cluster through the
//! broker's group coordinator (protocol type `connect`, eager protocol).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sluice_runtime::herder::group::assignor;
use sluice_runtime::herder::group::member::{GroupMember, GroupWorker};
use sluice_runtime::herder::group::protocol::{Assignment, WorkerState};
use sluice_runtime::herder::group::GroupSettings;
use sluice_tests::KafkaBroker;
use tokio_util::sync::CancellationToken;

/// A worker that records what it was given; a connector with 4 tasks and one with 1.
struct Recorder {
    url: String,
    /// The current assignment; None while revoked.
    held: Mutex<Option<(i32, Assignment)>>,
    revokes: Mutex<u32>,
}

#[async_trait::async_trait]
impl GroupWorker for Recorder {
    async fn worker_state(&self) -> WorkerState {
        WorkerState { url: self.url.clone(), config_offset: 5 }
    }
    async fn revoke(&self) {
        *self.held.lock().unwrap() = None;
        *self.revokes.lock().unwrap() += 1;
    }
    async fn assign(&self, leader: &str, members: &BTreeMap<String, WorkerState>) -> BTreeMap<String, Assignment> {
        let connectors: BTreeMap<String, u32> = [("src".to_owned(), 4), ("sink".to_owned(), 1)].into_iter().collect();
        assignor::eager(leader, members, 5, &connectors)
    }
    async fn assigned(&self, generation: i32, _member: &str, assignment: Assignment) {
        *self.held.lock().unwrap() = Some((generation, assignment));
    }
}

fn settings(bootstrap: &str, group: &str) -> GroupSettings {
    let props: BTreeMap<String, String> = [("bootstrap.servers", bootstrap), ("group.id", group), ("session.timeout.ms", "6000"), ("heartbeat.interval.ms", "500"), ("rebalance.timeout.ms", "10000")]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
    GroupSettings::from_worker_props(&props).unwrap()
}

/// The workers' current assignments when all of them hold one of the same generation.
fn settled(workers: &[Arc<Recorder>]) -> Option<Vec<Assignment>> {
    let held: Vec<Option<(i32, Assignment)>> = workers.iter().map(|w| w.held.lock().unwrap().clone()).collect();
    let gens: Vec<i32> = held.iter().map(|h| h.as_ref().map(|(g, _)| *g)).collect::<Option<Vec<_>>>()?;
    if gens.windows(2).any(|w| w[0] != w[1]) {
        return None;
    }
    Some(held.into_iter().map(|h| h.unwrap().1).collect())
}

async fn wait_settled(workers: &[Arc<Recorder>], timeout: Duration) -> Vec<Assignment> {
    let start = Instant::now();
    loop {
        if let Some(a) = settled(workers) {
            let units: usize = a.iter().map(|a| a.connectors.len() + a.tasks.len()).sum();
            if units == 7 {
                return a;
            }
        }
        assert!(start.elapsed() < timeout, "the group did not settle within {timeout:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Three members join one `connect` group; the leader's round-robin assignment reaches
/// every member (disjoint, complete, same leader URL). One member leaves cleanly: the two
/// left rebalance and cover everything.
#[test]
fn three_members_share_connectors_and_tasks_and_rebalance_when_one_leaves() {
    let dir = tempfile::tempdir().unwrap();
    let broker = KafkaBroker::start(&dir.path().join("broker"));
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    rt.block_on(async {
        let workers: Vec<Arc<Recorder>> = (0..3).map(|i| Arc::new(Recorder { url: format!("http://w{i}:8083/"), held: Mutex::new(None), revokes: Mutex::new(0) })).collect();
        let tokens: Vec<CancellationToken> = (0..3).map(|_| CancellationToken::new()).collect();
        let mut joins = Vec::new();
        for (w, t) in workers.iter().zip(&tokens) {
            let member = GroupMember::new(settings(&broker.bootstrap, "sluice-group-test"));
            joins.push(tokio::spawn(member.run(w.clone() as Arc<dyn GroupWorker>, t.clone())));
        }
        let a = wait_settled(&workers, Duration::from_secs(30)).await;
        let leader_url = &a[0].leader_url;
        assert!(a.iter().all(|x| &x.leader_url == leader_url && x.leader == a[0].leader), "{a:?}");
        assert!(workers.iter().any(|w| &w.url == leader_url), "the leader URL is a member's URL: {leader_url}");
        assert!(a.iter().all(|x| x.tasks.len() + x.connectors.len() >= 2), "round robin over three members: {a:?}");
        let mut all: Vec<String> = a.iter().flat_map(|x| x.tasks.iter().map(|t| format!("{}-{}", t.connector, t.task)).chain(x.connectors.clone())).collect();
        all.sort();
        assert_eq!(all, ["sink", "sink-0", "src", "src-0", "src-1", "src-2", "src-3"]);

        // One member leaves (LeaveGroup): the others rejoin at once, no session timeout.
        let left = Instant::now();
        tokens[2].cancel();
        joins.pop().unwrap().await.unwrap();
        let a = wait_settled(&workers[..2], Duration::from_secs(20)).await;
        assert!(left.elapsed() < Duration::from_secs(6), "a clean leave rebalances before the session timeout: {:?}", left.elapsed());
        assert!(a.iter().all(|x| x.tasks.len() + x.connectors.len() >= 3), "{a:?}");
        assert!(*workers[0].revokes.lock().unwrap() >= 1, "eager: a member gives up its work before rejoining");
        for t in &tokens {
            t.cancel();
        }
        for j in joins {
            j.await.unwrap();
        }
    });
}
