//! The incremental cooperative assignor, round by round, with members that apply their
//! assignments as the membership loop does (revoked out, new in).

use super::*;

const MAX_DELAY: u64 = 10_000;

fn t(c: &str, n: u32) -> ConnectorTaskId {
    ConnectorTaskId { connector: c.into(), task: n }
}

/// A group as the leader sees it: every member's current assignment, and a clock.
struct Group {
    assignor: IncrementalAssignor,
    held: BTreeMap<String, Option<Assignment>>,
    configured: BTreeMap<String, u32>,
    generation: i32,
    now: u64,
    config_offset: i64,
    restart: Units,
}

impl Group {
    fn new(workers: &[&str], configured: &[(&str, u32)]) -> Self {
        Self {
            assignor: IncrementalAssignor::new(MAX_DELAY),
            held: workers.iter().map(|w| ((*w).to_owned(), None)).collect(),
            configured: configured.iter().map(|(c, n)| ((*c).to_owned(), *n)).collect(),
            generation: 0,
            now: 1_000,
            config_offset: 5,
            restart: Units::default(),
        }
    }

    /// One rebalance: every member joins with what it runs; each applies its assignment.
    fn round(&mut self) -> BTreeMap<String, Assignment> {
        let members: BTreeMap<String, WorkerState> = self
            .held
            .iter()
            .map(|(id, a)| {
                // `w2#2` is worker w2 rejoined under a new member id: the same URL.
                let url = format!("http://{}/", id.split('#').next().unwrap());
                (id.clone(), WorkerState { url, config_offset: self.config_offset, assignment: a.clone() })
            })
            .collect();
        let leader = members.keys().next().unwrap().clone();
        self.generation += 1;
        let out = self.assignor.assign(&Round {
            leader: &leader,
            members: &members,
            config_offset: self.config_offset,
            configured: &self.configured,
            last_completed_generation: self.generation - 1,
            generation: self.generation,
            version: 1,
            now_ms: self.now,
            restart: &self.restart,
        });
        self.restart = Units::default();
        assert_eq!(out.keys().collect::<Vec<_>>(), members.keys().collect::<Vec<_>>(), "every member gets an assignment");
        for (id, a) in &out {
            assert_eq!((a.version, a.error, a.leader.as_str()), (1, NO_ERROR, leader.as_str()));
            let held = self.held.get_mut(id).unwrap();
            if let Some(h) = held.as_ref() {
                for c in &a.revoked_connectors {
                    assert!(h.connectors.contains(c), "{id} is revoked {c}, which it does not run");
                }
                for task in &a.revoked_tasks {
                    assert!(h.tasks.contains(task), "{id} is revoked {task:?}, which it does not run");
                }
            }
            *held = Some(a.merge_into(held.as_ref()));
        }
        out
    }

    /// Rounds until one revokes nothing (as members rejoin after a revocation).
    fn settle(&mut self) {
        for _ in 0..5 {
            let out = self.round();
            if out.values().all(|a| a.revoked_connectors.is_empty() && a.revoked_tasks.is_empty()) {
                return;
            }
        }
        panic!("no stable assignment after 5 rounds");
    }

    fn units(&self, id: &str) -> (BTreeSet<String>, BTreeSet<ConnectorTaskId>) {
        let a = self.held[id].clone().unwrap_or_default();
        (a.connectors.into_iter().collect(), a.tasks.into_iter().collect())
    }

    fn load(&self, id: &str) -> (usize, usize) {
        let (c, t) = self.units(id);
        (c.len(), t.len())
    }

    /// Every configured unit held by exactly one member (nothing else held).
    fn assert_complete(&self) {
        let mut all = Units::default();
        let mut count = 0;
        for id in self.held.keys() {
            let (c, t) = self.units(id);
            count += c.len() + t.len();
            all.connectors.extend(c);
            all.tasks.extend(t);
        }
        let configured = Units::configured(&self.configured);
        assert_eq!(all, configured, "everything configured is assigned");
        assert_eq!(count, configured.connectors.len() + configured.tasks.len(), "nothing is assigned twice");
    }

    fn assert_balanced(&self) {
        let loads: Vec<(usize, usize)> = self.held.keys().map(|id| self.load(id)).collect();
        let (cmin, cmax) = (loads.iter().map(|l| l.0).min().unwrap(), loads.iter().map(|l| l.0).max().unwrap());
        let (tmin, tmax) = (loads.iter().map(|l| l.1).min().unwrap(), loads.iter().map(|l| l.1).max().unwrap());
        assert!(cmax - cmin <= 1 && tmax - tmin <= 1, "balanced: {loads:?}");
    }

    fn nothing_moves(out: &BTreeMap<String, Assignment>) -> bool {
        out.values().all(|a| a.connectors.is_empty() && a.tasks.is_empty() && a.revoked_connectors.is_empty() && a.revoked_tasks.is_empty())
    }
}

#[test]
fn first_round_deals_everything_evenly() {
    let mut g = Group::new(&["w1", "w2", "w3"], &[("a", 4), ("b", 2)]);
    let out = g.round();
    assert!(out.values().all(|a| a.revoked_connectors.is_empty() && a.revoked_tasks.is_empty() && a.delay == 0));
    g.assert_complete();
    g.assert_balanced();
    // Least loaded first, ties by member id: connectors a→w1, b→w2; tasks two each.
    assert_eq!(g.units("w1").0, ["a".to_owned()].into());
    assert_eq!(g.units("w2").0, ["b".to_owned()].into());
    assert_eq!([g.load("w1").1, g.load("w2").1, g.load("w3").1], [2, 2, 2]);
}

#[test]
fn a_stable_group_keeps_everything_in_place() {
    let mut g = Group::new(&["w1", "w2", "w3"], &[("a", 4), ("b", 2)]);
    g.round();
    let before: Vec<_> = g.held.keys().map(|id| g.units(id)).collect();
    for _ in 0..3 {
        let out = g.round();
        assert!(Group::nothing_moves(&out), "{out:?}");
        assert!(out.values().all(|a| a.delay == 0));
    }
    let after: Vec<_> = g.held.keys().map(|id| g.units(id)).collect();
    assert_eq!(before, after);
}

#[test]
fn a_new_worker_gets_its_share_through_a_revocation_round_then_an_assignment_round() {
    let mut g = Group::new(&["w1", "w2", "w3"], &[("a", 6), ("b", 3)]);
    g.round();
    g.assert_balanced();
    let before: BTreeMap<String, _> = g.held.keys().map(|id| (id.clone(), g.units(id))).collect();
    g.held.insert("w4".into(), None);

    // Round 1: the loaded workers give back their surplus; nothing new is handed out yet.
    let out = g.round();
    let revoked: usize = out.values().map(|a| a.revoked_connectors.len() + a.revoked_tasks.len()).sum();
    assert!(revoked > 0, "surplus revoked: {out:?}");
    assert!(out.values().all(|a| a.connectors.is_empty() && a.tasks.is_empty()), "nothing assigned in the revocation round: {out:?}");
    assert!(out["w4"].revoked_tasks.is_empty());
    let revoked_tasks: BTreeSet<ConnectorTaskId> = out.values().flat_map(|a| a.revoked_tasks.clone()).collect();
    assert_eq!(revoked_tasks.len(), 2, "11 units over 4: the three workers keep 3+2+2 tasks, w4 will get 2: {out:?}");

    // Round 2 (the revoked members rejoin at once): the revoked work goes to the new worker.
    let out = g.round();
    assert!(out.values().all(|a| a.revoked_connectors.is_empty() && a.revoked_tasks.is_empty()));
    assert_eq!(out["w4"].tasks.iter().cloned().collect::<BTreeSet<_>>(), revoked_tasks, "w4 gets exactly what was given back");
    g.assert_complete();
    g.assert_balanced();
    // Nothing but the revoked work moved.
    for (id, (c, tasks)) in &before {
        let (c2, t2) = g.units(id);
        assert!(c2.is_subset(c) && t2.is_subset(tasks), "{id} only lost work, gained none");
    }
    assert!(Group::nothing_moves(&g.round()), "stable afterwards");
}

#[test]
fn a_departed_workers_work_waits_for_the_delay_then_goes_to_the_survivors() {
    let mut g = Group::new(&["w1", "w2", "w3"], &[("a", 4), ("b", 2)]);
    g.round();
    let gone = g.units("w2");
    let survivors_before = (g.units("w1"), g.units("w3"));
    g.held.remove("w2");

    // The survivors rejoin: the lost work stays unassigned; members are told to rejoin
    // after the full delay.
    g.now += 100;
    let out = g.round();
    assert!(Group::nothing_moves(&out), "nothing moves during the delay: {out:?}");
    assert!(out.values().all(|a| a.delay == MAX_DELAY as i32), "{out:?}");
    assert_eq!((g.units("w1"), g.units("w3")), survivors_before);

    // Another rebalance half-way (say a config change): the delay counts down.
    g.now += 4_000;
    let out = g.round();
    assert!(Group::nothing_moves(&out));
    assert!(out.values().all(|a| a.delay == 6_000), "the rest of the delay: {out:?}");

    // The delay expires: the survivors take the lost work, and nothing else moves.
    g.now += 6_000;
    let out = g.round();
    assert!(out.values().all(|a| a.delay == 0 && a.revoked_connectors.is_empty() && a.revoked_tasks.is_empty()), "{out:?}");
    let mut taken = Units::default();
    for a in out.values() {
        taken.connectors.extend(a.connectors.iter().cloned());
        taken.tasks.extend(a.tasks.iter().cloned());
    }
    assert_eq!(taken, Units { connectors: gone.0, tasks: gone.1 });
    g.assert_complete();
    g.assert_balanced();
    assert!(Group::nothing_moves(&g.round()));
}

#[test]
fn a_worker_that_returns_within_the_delay_gets_its_old_work_back() {
    let mut g = Group::new(&["w1", "w2", "w3"], &[("a", 4), ("b", 2)]);
    g.round();
    let gone = g.units("w2");
    g.held.remove("w2");
    g.now += 100;
    g.round();

    // It comes back (a new member id, nothing running) before the delay expires: it waits too.
    g.now += 3_000;
    g.held.insert("w2-again".into(), None);
    let out = g.round();
    assert!(Group::nothing_moves(&out), "{out:?}");
    assert!(out.values().all(|a| a.delay == 7_000), "{out:?}");

    g.now += 7_000;
    let out = g.round();
    assert_eq!(
        (
            out["w2-again"].connectors.iter().cloned().collect::<BTreeSet<_>>(),
            out["w2-again"].tasks.iter().cloned().collect::<BTreeSet<_>>()
        ),
        gone,
        "the returned worker gets back exactly what it ran"
    );
    assert!(out["w1"].connectors.is_empty() && out["w1"].tasks.is_empty() && out["w3"].tasks.is_empty());
    g.assert_complete();
    assert!(Group::nothing_moves(&g.round()));
}

#[test]
fn a_worker_back_under_a_new_member_id_gets_its_work_at_once() {
    // Its session expired (a broker that stalled) and it gave up its work to rejoin: the
    // same URL, a new member id, nothing running.
    let mut g = Group::new(&["w1"], &[("a", 2), ("b", 1)]);
    g.round();
    let gone = g.units("w1");
    g.held.remove("w1");
    g.held.insert("w1#2".into(), None);
    g.now += 100;
    let out = g.round();
    assert!(out.values().all(|a| a.delay == 0), "{out:?}");
    assert_eq!(g.units("w1#2"), gone, "everything it ran, at once");
    g.assert_complete();

    // Two workers out, one back: the delay holds until the other is back too.
    let mut g = Group::new(&["w1", "w2", "w3"], &[("a", 4), ("b", 2)]);
    g.round();
    g.held.remove("w1");
    g.held.remove("w2");
    g.held.insert("w1#2".into(), None);
    g.now += 100;
    let out = g.round();
    assert!(Group::nothing_moves(&out) && out.values().all(|a| a.delay == MAX_DELAY as i32), "{out:?}");
    g.held.insert("w2#2".into(), None);
    g.now += 1_000;
    let out = g.round();
    assert!(out.values().all(|a| a.delay == 0), "{out:?}");
    g.assert_complete();
    g.settle();
    g.assert_complete();
    g.assert_balanced();
}

#[test]
fn without_a_delay_lost_work_is_reassigned_at_once() {
    let mut g = Group::new(&["w1", "w2", "w3"], &[("a", 4), ("b", 2)]);
    g.assignor = IncrementalAssignor::new(0);
    g.round();
    g.held.remove("w2");
    let out = g.round();
    assert!(out.values().all(|a| a.delay == 0));
    g.assert_complete();
}

#[test]
fn a_new_leader_deals_a_departed_workers_work_at_once() {
    // The leader itself left: the new leader has no previous assignment, so the departed
    // worker's work counts as new (as in Connect).
    let mut g = Group::new(&["w1", "w2", "w3"], &[("a", 4), ("b", 2)]);
    g.round();
    g.held.remove("w1");
    g.assignor = IncrementalAssignor::new(MAX_DELAY);
    let out = g.round();
    assert!(out.values().all(|a| a.delay == 0 && a.revoked_tasks.is_empty()));
    g.assert_complete();
}

#[test]
fn a_new_connector_is_dealt_without_moving_anything() {
    let mut g = Group::new(&["w1", "w2", "w3"], &[("a", 3)]);
    g.round();
    let before: Vec<_> = g.held.keys().map(|id| g.units(id)).collect();
    g.configured.insert("c".into(), 3);
    let out = g.round();
    assert!(out.values().all(|a| a.revoked_connectors.is_empty() && a.revoked_tasks.is_empty()), "{out:?}");
    let new: BTreeSet<ConnectorTaskId> = out.values().flat_map(|a| a.tasks.clone()).collect();
    assert_eq!(new, [t("c", 0), t("c", 1), t("c", 2)].into());
    for (id, (c, tasks)) in g.held.keys().zip(before) {
        let (c2, t2) = g.units(id);
        assert!(c.is_subset(&c2) && tasks.is_subset(&t2), "{id} kept what it ran");
    }
    g.assert_complete();
    g.assert_balanced();
}

#[test]
fn a_deleted_connector_and_removed_tasks_are_revoked_from_their_owners_only() {
    let mut g = Group::new(&["w1", "w2", "w3"], &[("a", 4), ("b", 2)]);
    g.round();
    g.configured.remove("b");
    g.configured.insert("a".into(), 2);
    let out = g.round();
    let revoked: Units = out.values().fold(Units::default(), |mut u, a| {
        u.connectors.extend(a.revoked_connectors.iter().cloned());
        u.tasks.extend(a.revoked_tasks.iter().cloned());
        u
    });
    assert_eq!(revoked.connectors, ["b".to_owned()].into());
    assert_eq!(revoked.tasks, [t("a", 2), t("a", 3), t("b", 0), t("b", 1)].into());
    assert!(out.values().all(|a| a.connectors.is_empty() && a.tasks.is_empty()));
    g.assert_complete();
    g.settle();
    g.assert_complete();
    g.assert_balanced();
}

#[test]
fn work_run_by_two_members_is_revoked_from_both_then_dealt_once() {
    let mut g = Group::new(&["w1", "w2"], &[("a", 2)]);
    g.round();
    let (_, w1_tasks) = g.units("w1");
    let dup = w1_tasks.iter().next().unwrap().clone();
    g.held.get_mut("w2").unwrap().as_mut().unwrap().tasks.push(dup.clone());
    let out = g.round();
    assert!(out["w1"].revoked_tasks.contains(&dup) && out["w2"].revoked_tasks.contains(&dup), "{out:?}");
    g.settle();
    g.assert_complete();
}

#[test]
fn a_member_that_missed_a_revocation_is_revoked_again_after_a_backoff() {
    // w1 is revoked tasks but rejoins still running them (its revocation did not take
    // effect): the leader starts over from what members run. A second revoking round in a
    // row waits the first backoff step (40 ms) before revoking again.
    let mut g = Group::new(&["w1", "w2"], &[("a", 4)]);
    g.round();
    g.held.insert("w3".into(), None);
    let out = g.round();
    let (victim, a) = out.iter().find(|(_, a)| !a.revoked_tasks.is_empty()).unwrap();
    let (victim, revoked) = (victim.clone(), a.revoked_tasks.clone());
    g.held.get_mut(&victim).unwrap().as_mut().unwrap().tasks.extend(revoked.clone());
    let out = g.round();
    assert!(Group::nothing_moves(&out), "{out:?}");
    assert!(out.values().all(|a| a.delay == 40), "{out:?}");
    g.now += 40;
    let out = g.round();
    assert!(!out[&victim].revoked_tasks.is_empty(), "revoked again once the backoff expired: {out:?}");
    g.settle();
    g.assert_complete();
    g.assert_balanced();
}

#[test]
fn a_leader_behind_a_member_answers_config_mismatch() {
    let mut g = Group::new(&["w1", "w2"], &[("a", 1)]);
    let members: BTreeMap<String, WorkerState> = [
        ("w1".to_owned(), WorkerState { url: "http://w1/".into(), config_offset: 3, assignment: None }),
        ("w2".to_owned(), WorkerState { url: "http://w2/".into(), config_offset: 8, assignment: None }),
    ]
    .into();
    let out = g.assignor.assign(&Round {
        leader: "w1",
        members: &members,
        config_offset: 3,
        configured: &g.configured,
        last_completed_generation: -1,
        generation: 1,
        version: 2,
        now_ms: 0,
        restart: &Units::default(),
    });
    assert!(out.values().all(|a| a.error == CONFIG_MISMATCH && a.config_offset == 8 && a.version == 2 && a.tasks.is_empty()), "{out:?}");
}

#[test]
fn revoking_rounds_in_a_row_back_off() {
    let a = IncrementalAssignor::new(300_000);
    assert_eq!([a.backoff(1), a.backoff(2), a.backoff(3), a.backoff(4)], [40, 1_600, 64_000, 300_000]);
    assert_eq!(IncrementalAssignor::new(0).backoff(3), 0);
}

#[test]
fn dealing_fills_the_least_loaded_first() {
    let mut workers = vec![
        Load { worker: "b".into(), connectors: vec![], tasks: vec![t("x", 0), t("x", 1)] },
        Load { worker: "a".into(), connectors: vec![], tasks: vec![] },
        Load { worker: "c".into(), connectors: vec![], tasks: vec![t("x", 2)] },
    ];
    assign_tasks(&mut workers, &[t("y", 0), t("y", 1), t("y", 2), t("y", 3)].into());
    let by: BTreeMap<&str, usize> = workers.iter().map(|w| (w.worker.as_str(), w.tasks.len())).collect();
    assert_eq!(by, [("a", 3), ("b", 2), ("c", 2)].into());
    let mut plain = IncrementalAssignor::new(0);
    let members: BTreeMap<String, (Vec<String>, Vec<ConnectorTaskId>)> = [("m".to_owned(), (vec![], vec![]))].into();
    let c = plain.perform_units(&Units::configured(&[("z".to_owned(), 2)].into()), -1, 1, &members, 0);
    assert_eq!(c.assigned["m"], (vec!["z".to_owned()], vec![t("z", 0), t("z", 1)]));
}

#[test]
fn a_restart_revokes_the_work_then_deals_it_again() {
    let mut g = Group::new(&["w1", "w2", "w3"], &[("a", 4), ("b", 2)]);
    g.round();
    let owner = g.held.keys().find(|id| g.units(id).1.contains(&t("a", 1))).unwrap().clone();
    g.restart = Units { connectors: ["b".to_owned()].into(), tasks: [t("a", 1)].into() };
    let out = g.round();
    let revoked: Vec<(String, Vec<String>, Vec<ConnectorTaskId>)> = out
        .iter()
        .filter(|(_, a)| !a.revoked_connectors.is_empty() || !a.revoked_tasks.is_empty())
        .map(|(id, a)| (id.clone(), a.revoked_connectors.clone(), a.revoked_tasks.clone()))
        .collect();
    assert!(revoked.iter().any(|(id, _, tasks)| *id == owner && tasks == &[t("a", 1)]), "{revoked:?}");
    assert_eq!(revoked.iter().map(|(_, c, t)| c.len() + t.len()).sum::<usize>(), 2, "only what is restarted: {revoked:?}");
    let out = g.round();
    let dealt: BTreeSet<String> = out.values().flat_map(|a| a.connectors.clone()).collect();
    let dealt_tasks: BTreeSet<ConnectorTaskId> = out.values().flat_map(|a| a.tasks.clone()).collect();
    assert_eq!((dealt, dealt_tasks), (["b".to_owned()].into(), [t("a", 1)].into()), "dealt again in the next round");
    g.assert_complete();
    assert!(Group::nothing_moves(&g.round()));
}
