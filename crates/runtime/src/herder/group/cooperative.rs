//! Connect's incremental cooperative assignment (`IncrementalCooperativeAssignor`, KIP-415),
//! run by the leader. Members keep what they run through a rebalance; the leader only
//! hands out what is new and takes back what must move:
//!
//! ```text
//!   previous (what the leader assigned last time)     active (what members say they run)
//!        │                                                 │
//!        ├── deleted   = previous − configured  ─────────▶ revoked from their owners
//!        ├── lost      = previous − active − deleted ────▶ held back up to scheduled.rebalance.max.delay.ms
//!        │                                                 (the `delay` tells members when to rejoin),
//!        │                                                 then given to the workers that were empty
//!        │                                                 meanwhile, else dealt like new work
//!        └── created   = configured − previous − active ─▶ dealt to the least loaded workers
//!   duplicated (run by two members) ─────────────────────▶ revoked from all, dealt again next round
//!   to restart (REST restart) ───────────────────────────▶ revoked from its owner, dealt again next round
//!   load balance: a worker above its fair share gives the surplus back (revoked) in this
//!   round; the next round deals it to the least loaded (a new worker). Two revoking rounds
//!   in a row back off exponentially (40 ms, 1.6 s, …, up to the max delay).
//! ```
//!
//! One deliberate difference: `deleted` also counts what a member says it runs but the
//! config no longer has (Connect counts only the previous assignment), so a leader that has
//! just taken over still revokes a deleted connector.
//!
//! Not thread-safe, as Connect's: the membership loop owns one and calls it as leader.

use std::collections::{BTreeMap, BTreeSet};

use super::protocol::{Assignment, WorkerState, CONFIG_MISMATCH, NO_ERROR};
use crate::herder::ConnectorTaskId;

pub use crate::herder::Units;

/// One worker's connectors and tasks, in the order it listed them (Connect's `WorkerLoad`).
#[derive(Debug, Clone, Default)]
struct Load {
    worker: String,
    connectors: Vec<String>,
    tasks: Vec<ConnectorTaskId>,
}

impl Load {
    fn is_empty(&self) -> bool {
        self.connectors.is_empty() && self.tasks.is_empty()
    }

    fn remove(&mut self, units: &Units) {
        self.connectors.retain(|c| !units.connectors.contains(c));
        self.tasks.retain(|t| !units.tasks.contains(t));
    }
}

/// What one round hands out: per member, what is new and what it must stop.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClusterAssignment {
    pub assigned: BTreeMap<String, (Vec<String>, Vec<ConnectorTaskId>)>,
    pub revoked: BTreeMap<String, Units>,
}

/// Everything the leader knows when it assigns.
pub struct Round<'a> {
    pub leader: &'a str,
    /// Every member's metadata (its URL, config offset and current assignment).
    pub members: &'a BTreeMap<String, WorkerState>,
    /// The leader's config-topic offset and connectors with their task counts, read just now.
    pub config_offset: i64,
    pub configured: &'a BTreeMap<String, u32>,
    /// The generation this leader last completed a round in (-1: none) and the current one.
    pub last_completed_generation: i32,
    pub generation: i32,
    /// 1 or 2: the version of the chosen protocol, which the assignments carry.
    pub version: i16,
    /// A monotonic clock in milliseconds.
    pub now_ms: u64,
    /// Connectors and tasks to restart: revoked from their owners in this round, dealt
    /// again in the next (REST restarts under a cooperative protocol).
    pub restart: &'a Units,
}

/// Connect's `IncrementalCooperativeAssignor`; its state carries over between rounds.
#[derive(Debug)]
pub struct IncrementalAssignor {
    max_delay: u64,
    previous_assignment: Units,
    previous_revocation: Units,
    revoked_in_previous: bool,
    candidate_workers: BTreeSet<String>,
    /// When the held-back lost work is to be reassigned (ms on the round clock; 0: none).
    scheduled_rebalance: u64,
    /// The delay handed to members in this round's assignments (ms).
    delay: u64,
    previous_generation: i32,
    previous_members: BTreeSet<String>,
    /// The previous round's members' URLs.
    previous_urls: BTreeMap<String, String>,
    /// Members gone while a delay is pending, with their URLs.
    departed: BTreeMap<String, String>,
    successive_revoking_rounds: u32,
}

impl IncrementalAssignor {
    /// `max_delay`: `scheduled.rebalance.max.delay.ms`.
    pub fn new(max_delay_ms: u64) -> Self {
        Self {
            max_delay: max_delay_ms,
            previous_assignment: Units::default(),
            previous_revocation: Units::default(),
            revoked_in_previous: false,
            candidate_workers: BTreeSet::new(),
            scheduled_rebalance: 0,
            delay: 0,
            previous_generation: -1,
            previous_members: BTreeSet::new(),
            previous_urls: BTreeMap::new(),
            departed: BTreeMap::new(),
            successive_revoking_rounds: 0,
        }
    }

    /// The assignment of every member for this round (`performAssignment`).
    pub fn assign(&mut self, round: &Round) -> BTreeMap<String, Assignment> {
        let leader_url = round.members.get(round.leader).map(|m| m.url.clone()).unwrap_or_default();
        let max_offset = round.members.values().map(|m| m.config_offset).max().unwrap_or(-1);
        let fill = |error: i16, offset: i64, delay: u64, cluster: &ClusterAssignment| -> BTreeMap<String, Assignment> {
            round
                .members
                .keys()
                .map(|id| {
                    let (connectors, tasks) = cluster.assigned.get(id).cloned().unwrap_or_default();
                    let revoked = cluster.revoked.get(id).cloned().unwrap_or_default();
                    let a = Assignment {
                        version: round.version,
                        error,
                        leader: round.leader.to_owned(),
                        leader_url: leader_url.clone(),
                        config_offset: offset,
                        connectors,
                        tasks,
                        revoked_connectors: revoked.connectors.into_iter().collect(),
                        revoked_tasks: revoked.tasks.into_iter().collect(),
                        delay: delay.min(i32::MAX as u64) as i32,
                    };
                    (id.clone(), a)
                })
                .collect()
        };
        // A leader behind some member cannot assign: everyone reads to the end and rejoins.
        if round.config_offset < max_offset {
            tracing::info!(
                leader_offset = round.config_offset,
                max_offset,
                "the leader's config is behind a member's; answering CONFIG_MISMATCH so everyone catches up"
            );
            return fill(CONFIG_MISMATCH, max_offset, 0, &ClusterAssignment::default());
        }
        let members: BTreeMap<String, Load> = round
            .members
            .iter()
            .map(|(id, m)| {
                let a = m.assignment.clone().unwrap_or_default();
                (id.clone(), Load { worker: id.clone(), connectors: a.connectors, tasks: a.tasks })
            })
            .collect();
        let urls: BTreeMap<String, String> = round.members.iter().map(|(id, m)| (id.clone(), m.url.clone())).collect();
        let cluster = self.perform(
            &Units::configured(round.configured),
            round.last_completed_generation,
            round.generation,
            &members,
            &urls,
            round.now_ms,
            round.restart,
        );
        fill(NO_ERROR, round.config_offset, self.delay, &cluster)
    }

    /// `performTaskAssignment` on plain loads (tests).
    #[cfg(test)]
    fn perform_units(
        &mut self,
        configured: &Units,
        last_completed_generation: i32,
        generation: i32,
        members: &BTreeMap<String, (Vec<String>, Vec<ConnectorTaskId>)>,
        now_ms: u64,
    ) -> ClusterAssignment {
        let members =
            members.iter().map(|(id, (c, t))| (id.clone(), Load { worker: id.clone(), connectors: c.clone(), tasks: t.clone() })).collect();
        let urls = BTreeMap::new();
        self.perform(configured, last_completed_generation, generation, &members, &urls, now_ms, &Units::default())
    }

    /// The delay the last round handed out (ms).
    pub fn delay(&self) -> u64 {
        self.delay
    }

    fn perform(
        &mut self,
        configured: &Units,
        last_completed_generation: i32,
        generation: i32,
        members: &BTreeMap<String, Load>,
        urls: &BTreeMap<String, String>,
        now: u64,
        restart: &Units,
    ) -> ClusterAssignment {
        if self.previous_generation != last_completed_generation && !self.previous_assignment.is_empty() {
            // Connect logs this at debug; it is worth seeing, because work of a departed
            // worker held back for the delay is dealt at once after it.
            tracing::info!(
                previous_generation = self.previous_generation,
                last_completed_generation,
                "forgetting the previous assignment: it is not the last completed round's"
            );
            self.previous_assignment = Units::default();
        }
        let mut active = Units::default();
        for m in members.values() {
            active.connectors.extend(m.connectors.iter().cloned());
            active.tasks.extend(m.tasks.iter().cloned());
        }
        // A revocation that did not take effect (the member still runs it): start over from
        // what members run.
        if !self.previous_revocation.is_empty() {
            if self.previous_revocation.connectors.iter().any(|c| active.connectors.contains(c))
                || self.previous_revocation.tasks.iter().any(|t| active.tasks.contains(t))
            {
                self.previous_assignment = active.clone();
            }
            self.previous_revocation = Units::default();
        }
        let mut known = self.previous_assignment.clone();
        known.add(&active);
        let deleted = known.minus(configured);
        let duplicated = duplicated(members);
        let lost = self.previous_assignment.minus(&active).minus(&deleted);
        let created = configured.minus(&self.previous_assignment).minus(&active);
        tracing::debug!(?deleted, ?lost, ?created, ?duplicated, "incremental assignment");

        // What members run now, without deleted work: the base of what is *new* for each.
        let current: BTreeMap<String, Load> = members
            .iter()
            .map(|(id, m)| {
                let mut l = m.clone();
                l.remove(&deleted);
                (id.clone(), l)
            })
            .collect();

        let mut to_revoke: BTreeMap<String, Units> = BTreeMap::new();
        let mut next: Vec<Load> = members.values().cloned().collect();
        for unwanted in [&deleted, &duplicated, restart] {
            for load in next.iter_mut() {
                let held = intersection(unwanted, load);
                if !held.is_empty() {
                    load.remove(&held);
                    to_revoke.entry(load.worker.clone()).or_default().add(&held);
                }
            }
        }

        let lost_to_reassign = self.handle_lost(&lost, &mut next, urls, now);

        // No load-balancing revocations while a delayed rebalance is pending.
        if self.delay == 0 {
            let balancing = load_balancing_revocations(configured, &next);
            if self.revoked_in_previous && !balancing.is_empty() {
                self.successive_revoking_rounds += 1;
                self.delay = self.backoff(self.successive_revoking_rounds);
                if self.delay != 0 {
                    self.scheduled_rebalance = now + self.delay;
                    tracing::debug!(delay = self.delay, "revoking rounds in a row; revoking again after a delay");
                } else {
                    revoke(&mut to_revoke, &mut next, &balancing);
                }
            } else if !balancing.is_empty() {
                revoke(&mut to_revoke, &mut next, &balancing);
                self.revoked_in_previous = true;
            } else if self.revoked_in_previous {
                // Balanced again.
                self.revoked_in_previous = false;
                self.successive_revoking_rounds = 0;
            }
        } else {
            self.revoked_in_previous = false;
        }

        let mut to_assign = created.clone();
        to_assign.add(&lost_to_reassign);
        assign_connectors(&mut next, &to_assign.connectors);
        assign_tasks(&mut next, &to_assign.tasks);

        let mut cluster = ClusterAssignment::default();
        let mut previous = Units::default();
        for load in &next {
            let base = current.get(&load.worker);
            let new_connectors: Vec<String> =
                load.connectors.iter().filter(|c| base.is_none_or(|b| !b.connectors.contains(c))).cloned().collect();
            let new_tasks: Vec<ConnectorTaskId> =
                load.tasks.iter().filter(|t| base.is_none_or(|b| !b.tasks.contains(t))).cloned().collect();
            cluster.assigned.insert(load.worker.clone(), (new_connectors, new_tasks));
            previous.connectors.extend(load.connectors.iter().cloned());
            previous.tasks.extend(load.tasks.iter().cloned());
        }
        for revoked in to_revoke.values() {
            previous.remove(revoked);
            self.previous_revocation.add(revoked);
        }
        previous.add(&lost);
        self.previous_assignment = previous;
        self.previous_generation = generation;
        self.previous_members = members.keys().cloned().collect();
        self.previous_urls = urls.clone();
        cluster.revoked = to_revoke;
        cluster
    }

    /// `handleLostAssignments`: what of `lost` is to be dealt now; lost work given to
    /// candidate workers directly goes into `next`.
    ///
    /// Beyond Connect: when every departed member's URL is a current member's, the workers
    /// that left are back under new member ids (their sessions expired while the broker or
    /// the network stalled, and they gave up their work to rejoin), so their work is dealt at
    /// once instead of after `scheduled.rebalance.max.delay.ms`.
    fn handle_lost(&mut self, lost: &Units, next: &mut [Load], urls: &BTreeMap<String, String>, now: u64) -> Units {
        if lost.is_empty() && !self.revoked_in_previous {
            self.reset_delay();
            return Units::default();
        }
        let active: BTreeSet<&String> = next.iter().map(|l| &l.worker).collect();
        if self.scheduled_rebalance == 0 && self.previous_members.iter().all(|m| active.contains(m)) {
            // Nobody left: the previous round's assignment just did not reach someone.
            return lost.clone();
        }
        for m in self.previous_members.iter().filter(|m| !active.contains(m)) {
            if let Some(url) = self.previous_urls.get(m) {
                self.departed.insert(m.clone(), url.clone());
            }
        }
        if !lost.is_empty() && !self.departed.is_empty() && self.departed.values().all(|u| urls.values().any(|v| v == u)) {
            tracing::info!(
                workers = ?self.departed.values().collect::<BTreeSet<_>>(),
                connectors = lost.connectors.len(),
                tasks = lost.tasks.len(),
                "the departed workers are back under new member ids; dealing their work at once"
            );
            self.reset_delay();
            return lost.clone();
        }
        if self.max_delay == 0 {
            return lost.clone();
        }
        if self.scheduled_rebalance > 0 && now >= self.scheduled_rebalance {
            tracing::info!(
                connectors = lost.connectors.len(),
                tasks = lost.tasks.len(),
                "the scheduled rebalance delay expired; reassigning the work of departed workers"
            );
            let candidates: Vec<usize> =
                next.iter().enumerate().filter(|(_, l)| self.candidate_workers.contains(&l.worker)).map(|(i, _)| i).collect();
            let reassign = if candidates.is_empty() {
                lost.clone()
            } else {
                for (c, i) in lost.connectors.iter().zip(candidates.iter().cycle()) {
                    next[*i].connectors.push(c.clone());
                }
                for (t, i) in lost.tasks.iter().zip(candidates.iter().cycle()) {
                    next[*i].tasks.push(t.clone());
                }
                Units::default()
            };
            self.reset_delay();
            self.revoked_in_previous = false;
            return reassign;
        }
        self.candidate_workers.extend(next.iter().filter(|l| l.is_empty()).map(|l| l.worker.clone()));
        self.delay = if now < self.scheduled_rebalance { (self.scheduled_rebalance - now).min(self.max_delay) } else { self.max_delay };
        self.scheduled_rebalance = now + self.delay;
        tracing::info!(
            delay_ms = self.delay,
            connectors = lost.connectors.len(),
            tasks = lost.tasks.len(),
            "a worker departed; its work stays unassigned until it returns or the delay expires"
        );
        Units::default()
    }

    fn reset_delay(&mut self) {
        self.candidate_workers.clear();
        self.departed.clear();
        self.scheduled_rebalance = 0;
        self.delay = 0;
    }

    /// Kafka's `ExponentialBackoff(1, 40, max_delay, 0)` as the assignor builds it.
    fn backoff(&self, attempts: u32) -> u64 {
        let initial: f64 = if self.max_delay == 0 { 0.0 } else { 1.0 };
        let max = self.max_delay as f64;
        let exp_max = if max > initial { (max / initial.max(1.0)).ln() / 40f64.ln() } else { 0.0 };
        if exp_max == 0.0 {
            return initial as u64;
        }
        let term = initial * 40f64.powf((attempts as f64).min(exp_max));
        (term as u64).min(self.max_delay)
    }
}

fn duplicated(members: &BTreeMap<String, Load>) -> Units {
    let mut connectors: BTreeMap<&String, u32> = BTreeMap::new();
    let mut tasks: BTreeMap<&ConnectorTaskId, u32> = BTreeMap::new();
    for m in members.values() {
        for c in &m.connectors {
            *connectors.entry(c).or_default() += 1;
        }
        for t in &m.tasks {
            *tasks.entry(t).or_default() += 1;
        }
    }
    Units {
        connectors: connectors.into_iter().filter(|(_, n)| *n > 1).map(|(c, _)| c.clone()).collect(),
        tasks: tasks.into_iter().filter(|(_, n)| *n > 1).map(|(t, _)| t.clone()).collect(),
    }
}

fn intersection(units: &Units, load: &Load) -> Units {
    Units {
        connectors: load.connectors.iter().filter(|c| units.connectors.contains(*c)).cloned().collect(),
        tasks: load.tasks.iter().filter(|t| units.tasks.contains(*t)).cloned().collect(),
    }
}

fn revoke(to_revoke: &mut BTreeMap<String, Units>, next: &mut [Load], revocations: &BTreeMap<String, Units>) {
    for (worker, units) in revocations {
        to_revoke.entry(worker.clone()).or_default().add(units);
        if let Some(load) = next.iter_mut().find(|l| &l.worker == worker) {
            load.remove(units);
        }
    }
}

/// `performLoadBalancingRevocations`: what each worker above its fair share gives back.
fn load_balancing_revocations(configured: &Units, workers: &[Load]) -> BTreeMap<String, Units> {
    let mut out: BTreeMap<String, Units> = BTreeMap::new();
    if workers.iter().all(Load::is_empty) || configured.is_empty() {
        return out;
    }
    for (worker, revoked) in surplus(configured.connectors.len(), workers, |l| &l.connectors) {
        out.entry(worker).or_default().connectors.extend(revoked);
    }
    for (worker, revoked) in surplus(configured.tasks.len(), workers, |l| &l.tasks) {
        out.entry(worker).or_default().tasks.extend(revoked);
    }
    out
}

/// `loadBalancingRevocations` for one kind of unit.
fn surplus<E: Clone>(total: usize, workers: &[Load], units: impl Fn(&Load) -> &Vec<E>) -> Vec<(String, Vec<E>)> {
    let n = workers.len();
    let min = total / n;
    let extra = total % n;
    let at_min = workers.iter().filter(|w| units(w).len() == min).count();
    let at_extra = workers.iter().filter(|w| units(w).len() == min + 1).count();
    if at_extra == extra && at_min + at_extra == n {
        return Vec::new();
    }
    let mut out = Vec::new();
    let mut extras = 0;
    for w in workers {
        let size = units(w).len();
        if size <= min {
            continue;
        }
        let max = if extras < extra {
            extras += 1;
            if size == min + 1 {
                continue;
            }
            min + 1
        } else {
            min
        };
        out.push((w.worker.clone(), units(w).iter().take(size - max).cloned().collect()));
    }
    out
}

/// `assignConnectors`: round robin over the least loaded workers first.
fn assign_connectors(workers: &mut [Load], connectors: &BTreeSet<String>) {
    deal(workers, connectors.iter().cloned(), |l| l.connectors.len(), |l, c| l.connectors.push(c));
}

/// `assignTasks`.
fn assign_tasks(workers: &mut [Load], tasks: &BTreeSet<ConnectorTaskId>) {
    deal(workers, tasks.iter().cloned(), |l| l.tasks.len(), |l, t| l.tasks.push(t));
}

/// Sorts by (load, worker id), then repeatedly gives one unit to each worker as loaded as
/// the least loaded one, so the least loaded catch up first.
fn deal<E>(workers: &mut [Load], units: impl Iterator<Item = E>, size: impl Fn(&Load) -> usize, mut give: impl FnMut(&mut Load, E)) {
    if workers.is_empty() {
        return;
    }
    workers.sort_by(|a, b| size(a).cmp(&size(b)).then_with(|| a.worker.cmp(&b.worker)));
    let mut units = units.peekable();
    while units.peek().is_some() {
        let first = size(&workers[0]);
        let up_to = workers.iter().position(|w| size(w) > first).unwrap_or(workers.len());
        for w in workers[..up_to].iter_mut() {
            let Some(u) = units.next() else { break };
            give(w, u);
        }
    }
}

#[cfg(test)]
#[path = "cooperative_tests.rs"]
mod tests;
