//! Automatic restarts of failed connectors and tasks.
//!
//! Kafka Connect leaves a FAILED task FAILED until someone calls the REST API. Here the
//! worker that runs it restarts it, after a backoff that starts at
//! `sluice.restart.min.backoff.ms` (1 s), doubles per restart up to
//! `sluice.restart.max.backoff.ms` (10 min), with ±20% jitter so that tasks failed by one
//! outage do not come back in lockstep. Restarts are unlimited unless
//! `sluice.restart.max.retries` says otherwise.
//!
//! Failures are classified by what a restart can do about them ([`FailureClass`]):
//! a retriable failure that the task gave up on and a task error restart; a permanent one
//! (refused credentials, a dropped replication slot, an invalid configuration) stays
//! FAILED with its reason, with no loop.
//!
//! The count of restarts starts again when a task has run for [`STABLE_AFTER`] (or its
//! last backoff, when longer) or has committed offsets since its restart, and when a user
//! restarts it through REST.
//!
//! ```text
//!  RUNNING ──failure──▶ FAILED ──class & policy──▶ RESTARTING (trace kept) ──delay──▶ RUNNING
//!                         │                                                      (new instance)
//!                         └─ permanent, policy never, or retries exhausted: stays FAILED
//! ```

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::Serialize;
use sluice_api::{ConnectError, ConnectResult, Props};

use crate::herder::ConnectorTaskId;

/// The worker's default for every connector: `on-failure` or `never`.
pub const WORKER_KEY: &str = "restart.policy";
/// Connector keys (all under [`PREFIX`]).
pub const PREFIX: &str = "sluice.restart.";
pub const POLICY_KEY: &str = "sluice.restart.policy";
pub const MAX_RETRIES_KEY: &str = "sluice.restart.max.retries";
pub const MIN_BACKOFF_KEY: &str = "sluice.restart.min.backoff.ms";
pub const MAX_BACKOFF_KEY: &str = "sluice.restart.max.backoff.ms";

pub const DEFAULT_MIN_BACKOFF: Duration = Duration::from_secs(1);
pub const DEFAULT_MAX_BACKOFF: Duration = Duration::from_secs(600);
/// A task that has run this long (or its last backoff, when longer) counts as healthy again.
pub const STABLE_AFTER: Duration = Duration::from_secs(300);
/// The jitter applied to every delay: ±20%.
const JITTER: f64 = 0.2;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Policy {
    OnFailure,
    Never,
}

impl Policy {
    fn parse(key: &str, value: &str) -> ConnectResult<Self> {
        match value.trim() {
            "on-failure" => Ok(Self::OnFailure),
            "never" => Ok(Self::Never),
            other => Err(ConnectError::config(
                key,
                format!("Invalid value {other} for configuration {key}: String must be one of: on-failure, never"),
            )),
        }
    }

    /// The worker's `restart.policy` (default `on-failure`).
    pub fn from_worker(props: &Props) -> ConnectResult<Self> {
        props.get(WORKER_KEY).map_or(Ok(Self::OnFailure), |v| Self::parse(WORKER_KEY, v))
    }
}

/// What a restart can do about a failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum FailureClass {
    /// A transient failure the task stopped retrying (a database or broker away too long).
    Retriable,
    /// Any other failure of the task or connector: a new instance may get past it.
    Error,
    /// No restart helps ([`ConnectError::is_permanent`]): it stays FAILED.
    Fatal,
}

impl FailureClass {
    pub fn of(e: &ConnectError) -> Self {
        if e.is_permanent() {
            Self::Fatal
        } else if e.is_retriable() {
            Self::Retriable
        } else {
            Self::Error
        }
    }
}

/// A connector's restart settings: the worker's policy overridden by its own keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RestartPolicy {
    pub policy: Policy,
    /// `None`: unlimited.
    pub max_retries: Option<u32>,
    pub min_backoff: Duration,
    pub max_backoff: Duration,
}

/// What to do after a failure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Restart after this delay (jitter applied).
    Restart(Duration),
    /// Stay FAILED, for this reason.
    Stay(&'static str),
}

impl RestartPolicy {
    pub fn new(worker: Policy, connector: &Props) -> ConnectResult<Self> {
        let policy = connector.get(POLICY_KEY).map_or(Ok(worker), |v| Policy::parse(POLICY_KEY, v))?;
        let max_retries = match connector.get(MAX_RETRIES_KEY).map(|v| v.trim()) {
            None | Some("-1") => None,
            Some(v) => Some(v.parse::<u32>().map_err(|_| {
                ConnectError::config(
                    MAX_RETRIES_KEY,
                    format!("Invalid value {v} for configuration {MAX_RETRIES_KEY}: a count of restarts, or -1 for no limit"),
                )
            })?),
        };
        let ms = |key: &str, default: Duration| -> ConnectResult<Duration> {
            match connector.get(key).map(|v| v.trim()) {
                None => Ok(default),
                Some(v) => v.parse::<u64>().ok().filter(|ms| *ms > 0).map(Duration::from_millis).ok_or_else(|| {
                    ConnectError::config(key, format!("Invalid value {v} for configuration {key}: milliseconds, at least 1"))
                }),
            }
        };
        let min_backoff = ms(MIN_BACKOFF_KEY, DEFAULT_MIN_BACKOFF)?;
        let max_backoff = ms(MAX_BACKOFF_KEY, DEFAULT_MAX_BACKOFF)?;
        if max_backoff < min_backoff {
            return Err(ConnectError::config(
                MAX_BACKOFF_KEY,
                format!(
                    "Invalid value {} for configuration {MAX_BACKOFF_KEY}: must be at least {MIN_BACKOFF_KEY} ({})",
                    max_backoff.as_millis(),
                    min_backoff.as_millis()
                ),
            ));
        }
        Ok(Self { policy, max_retries, min_backoff, max_backoff })
    }

    /// The errors of a connector config's restart keys, for the validate endpoint.
    pub fn validate(connector: &Props) -> Vec<(String, String)> {
        match Self::new(Policy::OnFailure, connector) {
            Ok(_) => Vec::new(),
            Err(ConnectError::Config { key, message }) => vec![(key, message)],
            Err(e) => vec![(POLICY_KEY.to_owned(), e.to_string())],
        }
    }

    /// The delay before restart number `n` (1 for the first), before jitter.
    pub fn backoff(&self, n: u32) -> Duration {
        let doublings = n.saturating_sub(1).min(32);
        self.min_backoff.saturating_mul(1u32 << doublings.min(31)).min(self.max_backoff)
    }

    /// What to do after a failure of `class`, when `restarts` restarts came before it.
    pub fn decide(&self, class: FailureClass, restarts: u32) -> Decision {
        if class == FailureClass::Fatal {
            return Decision::Stay("the failure is permanent: a restart cannot fix it");
        }
        if self.policy == Policy::Never {
            return Decision::Stay("restart.policy is never");
        }
        if self.max_retries.is_some_and(|max| restarts >= max) {
            return Decision::Stay("sluice.restart.max.retries restarts were made");
        }
        Decision::Restart(jitter(self.backoff(restarts + 1), fastrand::f64()))
    }

    /// How long a restarted unit must run before its count starts again.
    pub fn stable_after(&self, last_backoff: Duration) -> Duration {
        STABLE_AFTER.max(last_backoff)
    }
}

/// `d` scaled by a factor in [0.8, 1.2), from `r` in [0, 1).
fn jitter(d: Duration, r: f64) -> Duration {
    d.mul_f64(1.0 - JITTER + 2.0 * JITTER * r)
}

/// A connector or one of its tasks.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Unit {
    Connector(String),
    Task(ConnectorTaskId),
}

impl Unit {
    fn connector(&self) -> &str {
        match self {
            Unit::Connector(c) => c,
            Unit::Task(t) => &t.connector,
        }
    }
}

/// One connector's or task's restarts, as `GET /connectors/{c}/restarts` shows them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct RestartRecord {
    /// Restarts since the unit last counted as healthy (what the backoff grows with).
    pub count: u32,
    /// Every automatic restart since this worker started running the unit.
    pub total: u64,
    /// Epoch milliseconds of the last automatic restart.
    pub last_restart: Option<u64>,
    /// Epoch milliseconds of the restart now waited for.
    pub next_attempt: Option<u64>,
    pub last_error: Option<String>,
    pub last_error_class: Option<FailureClass>,
    /// `running`, `waiting` (a restart is scheduled), or `failed` (no restart will come).
    pub state: &'static str,
    /// Why no restart will come, when `state` is `failed`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<&'static str>,
}

/// Every restart record of this worker.
#[derive(Default)]
pub struct RestartBook {
    records: Mutex<BTreeMap<Unit, RestartRecord>>,
}

fn epoch_ms(at: SystemTime) -> u64 {
    at.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

impl RestartBook {
    fn with<R>(&self, unit: &Unit, f: impl FnOnce(&mut RestartRecord) -> R) -> R {
        let mut records = self.records.lock().expect("restart book lock");
        f(records.entry(unit.clone()).or_insert_with(|| RestartRecord { state: "running", ..Default::default() }))
    }

    /// A failure (its trace and class): records it and decides (`restarts` is the count
    /// since the unit was last healthy).
    pub fn failed(&self, unit: &Unit, trace: String, class: FailureClass, policy: &RestartPolicy, restarts: u32) -> Decision {
        let decision = policy.decide(class, restarts);
        self.with(unit, |r| {
            r.count = restarts;
            r.last_error = Some(trace);
            r.last_error_class = Some(class);
            match &decision {
                Decision::Restart(delay) => {
                    r.state = "waiting";
                    r.reason = None;
                    r.next_attempt = Some(epoch_ms(SystemTime::now() + *delay));
                }
                Decision::Stay(why) => {
                    r.state = "failed";
                    r.reason = Some(why);
                    r.next_attempt = None;
                }
            }
        });
        decision
    }

    /// The scheduled restart is made now.
    pub fn restarted(&self, unit: &Unit, count: u32) {
        self.with(unit, |r| {
            r.count = count;
            r.total += 1;
            r.last_restart = Some(epoch_ms(SystemTime::now()));
            r.next_attempt = None;
            r.state = "running";
        });
    }

    /// Started afresh (created, moved here, restarted through REST): the count starts again.
    pub fn started(&self, unit: &Unit) {
        let mut records = self.records.lock().expect("restart book lock");
        if let Some(r) = records.get_mut(unit) {
            r.count = 0;
            r.next_attempt = None;
            r.state = "running";
            r.reason = None;
        }
    }

    /// The unit runs healthy again: the count starts again.
    pub fn healthy(&self, unit: &Unit) {
        self.started(unit);
    }

    /// No longer run by this worker (stopped, deleted, moved away).
    pub fn forget(&self, unit: &Unit) {
        self.records.lock().expect("restart book lock").remove(unit);
    }

    pub fn forget_connector(&self, connector: &str) {
        self.records.lock().expect("restart book lock").retain(|u, _| u.connector() != connector);
    }

    /// The records of one connector and its tasks.
    pub fn of(&self, connector: &str) -> (Option<RestartRecord>, BTreeMap<u32, RestartRecord>) {
        let records = self.records.lock().expect("restart book lock");
        let mut own = None;
        let mut tasks = BTreeMap::new();
        for (u, r) in records.iter().filter(|(u, _)| u.connector() == connector) {
            match u {
                Unit::Connector(_) => own = Some(r.clone()),
                Unit::Task(t) => {
                    tasks.insert(t.task, r.clone());
                }
            }
        }
        (own, tasks)
    }

    /// Every record (for metrics).
    pub fn all(&self) -> Vec<(Unit, RestartRecord)> {
        self.records.lock().expect("restart book lock").iter().map(|(u, r)| (u.clone(), r.clone())).collect()
    }
}

/// Tracks when a restarted unit counts as healthy again: after running for
/// [`RestartPolicy::stable_after`] or on its first offset commit.
#[derive(Debug, Clone)]
pub struct Streak {
    pub restarts: u32,
    pub last_backoff: Duration,
    pub since: Instant,
}

impl Streak {
    pub fn new() -> Self {
        Self { restarts: 0, last_backoff: Duration::ZERO, since: Instant::now() }
    }

    /// The streak of a unit restarted now as restart number `restarts`, after `delay`.
    pub fn restarted(restarts: u32, delay: Duration) -> Self {
        Self { restarts, last_backoff: delay, since: Instant::now() }
    }

    /// The count to decide the next failure with: 0 when the unit ran long enough.
    pub fn count_at_failure(&self, policy: &RestartPolicy, committed: bool) -> u32 {
        if committed || self.since.elapsed() >= policy.stable_after(self.last_backoff) {
            0
        } else {
            self.restarts
        }
    }
}

impl Default for Streak {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn props(pairs: &[(&str, &str)]) -> Props {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    }

    #[test]
    fn backoff_starts_at_one_second_doubles_and_caps_at_ten_minutes() {
        let p = RestartPolicy::new(Policy::OnFailure, &Props::new()).unwrap();
        let secs: Vec<u64> = (1..=12).map(|n| p.backoff(n).as_secs()).collect();
        assert_eq!(secs, [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 600, 600]);
        assert_eq!(p.backoff(1000), Duration::from_secs(600));
    }

    #[test]
    fn jitter_stays_within_twenty_percent() {
        let d = Duration::from_secs(10);
        assert_eq!(jitter(d, 0.0), Duration::from_secs(8));
        assert_eq!(jitter(d, 0.5), Duration::from_secs(10));
        assert!(jitter(d, 0.999_999) < Duration::from_secs(12));
        for _ in 0..1000 {
            match p_default().decide(FailureClass::Error, 3) {
                Decision::Restart(d) => assert!(d >= Duration::from_millis(6400) && d < Duration::from_millis(9600), "{d:?}"),
                other => panic!("{other:?}"),
            }
        }
    }

    fn p_default() -> RestartPolicy {
        RestartPolicy::new(Policy::OnFailure, &Props::new()).unwrap()
    }

    #[test]
    fn permanent_failures_policy_never_and_exhausted_retries_stay_failed() {
        let p = p_default();
        assert!(matches!(p.decide(FailureClass::Fatal, 0), Decision::Stay(_)));
        assert!(matches!(p.decide(FailureClass::Retriable, 500), Decision::Restart(_)));
        let never = RestartPolicy::new(Policy::Never, &Props::new()).unwrap();
        assert_eq!(never.decide(FailureClass::Error, 0), Decision::Stay("restart.policy is never"));
        let on = RestartPolicy::new(Policy::Never, &props(&[(POLICY_KEY, "on-failure")])).unwrap();
        assert!(matches!(on.decide(FailureClass::Error, 0), Decision::Restart(_)));
        let two = RestartPolicy::new(Policy::OnFailure, &props(&[(MAX_RETRIES_KEY, "2")])).unwrap();
        assert!(matches!(two.decide(FailureClass::Error, 1), Decision::Restart(_)));
        assert!(matches!(two.decide(FailureClass::Error, 2), Decision::Stay(_)));
    }

    #[test]
    fn classes_follow_the_error_kind() {
        assert_eq!(FailureClass::of(&ConnectError::retriable("db away")), FailureClass::Retriable);
        assert_eq!(FailureClass::of(&ConnectError::fatal("bad record")), FailureClass::Error);
        assert_eq!(FailureClass::of(&ConnectError::permanent("slot dropped")), FailureClass::Fatal);
        assert_eq!(FailureClass::of(&ConnectError::config("k", "bad")), FailureClass::Fatal);
    }

    #[test]
    fn invalid_keys_are_named() {
        let bad = |k: &str, v: &str| RestartPolicy::validate(&props(&[(k, v)]));
        assert_eq!(bad(POLICY_KEY, "always")[0].0, POLICY_KEY);
        assert_eq!(bad(MAX_RETRIES_KEY, "x")[0].0, MAX_RETRIES_KEY);
        assert_eq!(bad(MIN_BACKOFF_KEY, "0")[0].0, MIN_BACKOFF_KEY);
        assert_eq!(RestartPolicy::validate(&props(&[(MIN_BACKOFF_KEY, "5000"), (MAX_BACKOFF_KEY, "100")]))[0].0, MAX_BACKOFF_KEY);
        assert!(RestartPolicy::validate(&props(&[(MAX_RETRIES_KEY, "-1"), (MIN_BACKOFF_KEY, "50")])).is_empty());
        assert!(Policy::from_worker(&props(&[(WORKER_KEY, "sometimes")])).is_err());
    }

    #[test]
    fn the_count_starts_again_after_a_stable_run_or_a_commit() {
        let p = p_default();
        let s = Streak { restarts: 4, last_backoff: Duration::from_secs(8), since: Instant::now() };
        assert_eq!(s.count_at_failure(&p, false), 4);
        assert_eq!(s.count_at_failure(&p, true), 0);
        let old = Streak { since: Instant::now() - Duration::from_secs(301), ..s.clone() };
        assert_eq!(old.count_at_failure(&p, false), 0);
        let long = Streak { last_backoff: Duration::from_secs(600), since: Instant::now() - Duration::from_secs(301), ..s };
        assert_eq!(long.count_at_failure(&p, false), 4, "a backoff longer than 5 minutes is the bar");
    }
}
