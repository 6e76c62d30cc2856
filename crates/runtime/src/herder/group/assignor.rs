//! Connect's eager assignment: every member gives up everything on a rebalance, and the
//! leader deals connectors and tasks round-robin over the members sorted by member id,
//! each connector followed by its tasks, one hand for all (Connect's `EagerAssignor`).

use std::collections::BTreeMap;

use super::protocol::{Assignment, WorkerState, NO_ERROR};
use crate::herder::ConnectorTaskId;

/// `connectors`: every connector with its committed task count, in a stable order.
/// Returns an assignment per member id.
pub fn eager(
    leader: &str,
    members: &BTreeMap<String, WorkerState>,
    config_offset: i64,
    connectors: &BTreeMap<String, u32>,
) -> BTreeMap<String, Assignment> {
    let leader_url = members.get(leader).map(|m| m.url.clone()).unwrap_or_default();
    let mut out: BTreeMap<String, Assignment> = members
        .keys()
        .map(|id| {
            (
                id.clone(),
                Assignment {
                    version: 0,
                    error: NO_ERROR,
                    leader: leader.to_owned(),
                    leader_url: leader_url.clone(),
                    config_offset,
                    ..Default::default()
                },
            )
        })
        .collect();
    if members.is_empty() {
        return out;
    }
    let ids: Vec<&String> = members.keys().collect();
    let mut next = 0usize;
    let mut deal = || {
        let id = ids[next % ids.len()].clone();
        next += 1;
        id
    };
    for (name, tasks) in connectors {
        let m = deal();
        out.get_mut(&m).expect("member").connectors.push(name.clone());
        for task in 0..*tasks {
            let m = deal();
            out.get_mut(&m).expect("member").tasks.push(ConnectorTaskId { connector: name.clone(), task });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn members(n: usize) -> BTreeMap<String, WorkerState> {
        (0..n).map(|i| (format!("m{i}"), WorkerState { url: format!("http://w{i}/"), config_offset: 3, assignment: None })).collect()
    }

    #[test]
    fn round_robin_spreads_connectors_and_tasks() {
        let connectors: BTreeMap<String, u32> = [("a".to_owned(), 4), ("b".to_owned(), 1)].into_iter().collect();
        let out = eager("m1", &members(3), 9, &connectors);
        let ids = |m: &str| out[m].tasks.iter().map(|t| format!("{}-{}", t.connector, t.task)).collect::<Vec<_>>();
        // a→m0, a-0→m1, a-1→m2, a-2→m0, a-3→m1, b→m2, b-0→m0
        assert_eq!(out["m0"].connectors, ["a"]);
        assert_eq!(ids("m0"), ["a-2", "b-0"]);
        assert!(out["m1"].connectors.is_empty());
        assert_eq!(ids("m1"), ["a-0", "a-3"]);
        assert_eq!(out["m2"].connectors, ["b"]);
        assert_eq!(ids("m2"), ["a-1"]);
        for a in out.values() {
            assert_eq!((a.leader.as_str(), a.leader_url.as_str(), a.config_offset), ("m1", "http://w1/", 9));
        }
        let total: usize = out.values().map(|a| a.connectors.len() + a.tasks.len()).sum();
        assert_eq!(total, 2 + 5, "each connector and task exactly once");
    }

    #[test]
    fn one_member_gets_everything() {
        let connectors: BTreeMap<String, u32> = [("a".to_owned(), 2)].into_iter().collect();
        let out = eager("m0", &members(1), 0, &connectors);
        assert_eq!(out["m0"].connectors, ["a"]);
        assert_eq!(out["m0"].tasks.len(), 2);
    }
}
