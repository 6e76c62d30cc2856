//! The worker's metrics, rendered for `GET /metrics` in Prometheus' text format.
//!
//! The task loops, the error handler and the worker report into [`TaskMetrics`] with
//! relaxed atomic adds, once per batch (never per record); everything else (connector and
//! task states, counts, restarts, the process) is read when `/metrics` is scraped. Nothing
//! is computed on a hot path that nobody reads, and `metrics.enabled=false` turns even the
//! adds off (the benchmark `bench/metrics.py` compares the two).
//!
//! Names are Kafka Connect's metrics as Strimzi's JMX-exporter rules print them
//! (`kafka_connect_worker_connector_count`, `kafka_connect_source_task_source_record_poll_total`,
//! …), so Strimzi's Grafana dashboard and alert rules read them unchanged;
//! `metrics.prometheus.naming=confluent` prints the names of Confluent's (and Aiven's)
//! exporter config instead (`kafka_connect_connect_worker_metrics_connector_count`, …).
//! Rates (`…-rate`) are left to Prometheus' `rate()` over the `…_total` counters. sluice's
//! own metrics start with `sluice_`; the process's are the standard `process_*`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use sluice_api::{ConnectResult, ConnectorKind, Props};

use crate::herder::{ConnectorTaskId, State};
use crate::worker::restart::{RestartRecord, Unit};

/// Worker key: `strimzi` (default) or `confluent`.
pub const NAMING_KEY: &str = "metrics.prometheus.naming";
/// Worker key: `true` (default) or `false` (the task loops count nothing).
pub const ENABLED_KEY: &str = "metrics.enabled";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Naming {
    Strimzi,
    Confluent,
}

/// One task's counters. Updated by its loops; read at scrape time.
#[derive(Debug)]
pub struct TaskMetrics {
    enabled: bool,
    started: Instant,
    pub source_record_poll: AtomicU64,
    pub source_record_write: AtomicU64,
    pub sink_record_read: AtomicU64,
    pub sink_record_send: AtomicU64,
    pub offset_commit_completion: AtomicU64,
    pub offset_commit_failure: AtomicU64,
    pub batches: AtomicU64,
    pub batch_records: AtomicU64,
    pub batch_size_max: AtomicU64,
    /// Nanoseconds spent in the task's own work (poll and append, or put).
    pub busy_nanos: AtomicU64,
    pub record_failures: AtomicU64,
    pub record_errors: AtomicU64,
    pub records_skipped: AtomicU64,
    pub retries: AtomicU64,
    pub errors_logged: AtomicU64,
    pub dlq_requests: AtomicU64,
    pub dlq_failures: AtomicU64,
    /// Epoch milliseconds of the last record error (0: none).
    pub last_error_ms: AtomicU64,
    /// What the connector's task publishes itself (Debezium's metrics, slot WAL, …).
    pub gauges: sluice_api::TaskGauges,
    /// `poll` calls that returned records (a source) or `put` calls (a sink): how many, and
    /// their total and longest time.
    pub calls: AtomicU64,
    pub call_nanos: AtomicU64,
    pub call_max_nanos: AtomicU64,
    /// A sink task's assigned partitions.
    pub partition_count: AtomicU64,
}

impl TaskMetrics {
    pub fn new(enabled: bool) -> Self {
        let z = || AtomicU64::new(0);
        Self {
            enabled,
            started: Instant::now(),
            source_record_poll: z(),
            source_record_write: z(),
            sink_record_read: z(),
            sink_record_send: z(),
            offset_commit_completion: z(),
            offset_commit_failure: z(),
            batches: z(),
            batch_records: z(),
            batch_size_max: z(),
            busy_nanos: z(),
            record_failures: z(),
            record_errors: z(),
            records_skipped: z(),
            retries: z(),
            errors_logged: z(),
            dlq_requests: z(),
            dlq_failures: z(),
            last_error_ms: z(),
            gauges: sluice_api::TaskGauges::default(),
            calls: z(),
            call_nanos: z(),
            call_max_nanos: z(),
            partition_count: z(),
        }
    }

    /// A task loop's metrics when the worker counts nothing (and for tests).
    pub fn disabled() -> Arc<Self> {
        Arc::new(Self::new(false))
    }

    #[inline]
    pub fn add(&self, counter: &AtomicU64, n: u64) {
        if self.enabled {
            counter.fetch_add(n, Relaxed);
        }
    }

    /// A batch of `n` records handed to or taken from the task, after `busy` of work.
    #[inline]
    pub fn batch(&self, n: u64, busy: Duration) {
        if self.enabled {
            self.batches.fetch_add(1, Relaxed);
            self.batch_records.fetch_add(n, Relaxed);
            self.batch_size_max.fetch_max(n, Relaxed);
            self.busy_nanos.fetch_add(busy.as_nanos() as u64, Relaxed);
        }
    }

    /// One `poll` that returned records, or one `put`, that took `took`.
    pub fn call(&self, took: Duration) {
        if self.enabled {
            let nanos = took.as_nanos() as u64;
            self.calls.fetch_add(1, Relaxed);
            self.call_nanos.fetch_add(nanos, Relaxed);
            self.call_max_nanos.fetch_max(nanos, Relaxed);
        }
    }

    fn call_avg_ms(&self) -> f64 {
        let calls = self.calls.load(Relaxed);
        if calls == 0 {
            0.0
        } else {
            self.call_nanos.load(Relaxed) as f64 / calls as f64 / 1e6
        }
    }

    /// A record failed in a stage of the pipeline; `tolerated`: skipped, not failing the task.
    pub fn record_error(&self, tolerated: bool, logged: bool, dead_letter: bool) {
        if self.enabled {
            self.record_failures.fetch_add(1, Relaxed);
            self.record_errors.fetch_add(1, Relaxed);
            if tolerated {
                self.records_skipped.fetch_add(1, Relaxed);
            }
            if logged {
                self.errors_logged.fetch_add(1, Relaxed);
            }
            if dead_letter {
                self.dlq_requests.fetch_add(1, Relaxed);
            }
            self.last_error_ms.store(epoch_ms(), Relaxed);
        }
    }

    /// A sink task's lag per partition (the `sluice_sink_task_lag_records` gauges); empty for
    /// a source task or before the first offset commit.
    pub fn partition_lags(&self) -> Vec<f64> {
        self.gauges.snapshot().into_iter().filter(|(s, _)| s.family == crate::task::sink::LAG_FAMILY).map(|(_, v)| v.value).collect()
    }

    /// The task's total lag over its partitions (`None` when it reports none).
    pub fn total_lag(&self) -> Option<f64> {
        self.partition_lags().into_iter().reduce(|a, b| a + b)
    }

    pub fn busy_ratio(&self) -> f64 {
        let wall = self.started.elapsed().as_nanos() as f64;
        if wall <= 0.0 {
            0.0
        } else {
            (self.busy_nanos.load(Relaxed) as f64 / wall).min(1.0)
        }
    }
}

/// A task's counters as the error policy carries them: not part of the policy's identity
/// (two policies with the same settings are equal whatever they counted).
#[derive(Debug, Clone)]
pub struct Counters(pub Arc<TaskMetrics>);

impl Default for Counters {
    fn default() -> Self {
        Self(TaskMetrics::disabled())
    }
}

impl PartialEq for Counters {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for Counters {}

impl std::ops::Deref for Counters {
    type Target = TaskMetrics;
    fn deref(&self) -> &TaskMetrics {
        &self.0
    }
}

fn epoch_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

/// The worker's `metrics.enabled` and `metrics.prometheus.naming`, checked once with the
/// rest of the worker config.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settings {
    pub enabled: bool,
    pub naming: Naming,
}

impl Settings {
    pub fn from_worker(props: &Props) -> ConnectResult<Self> {
        let naming = match props.get(NAMING_KEY).map(|v| v.trim().to_ascii_lowercase()).as_deref() {
            None | Some("strimzi") => Naming::Strimzi,
            Some("confluent") => Naming::Confluent,
            Some(other) => {
                return Err(sluice_api::ConnectError::config(
                    NAMING_KEY,
                    format!("Invalid value {other} for configuration {NAMING_KEY}: String must be one of: strimzi, confluent"),
                ))
            }
        };
        let enabled = match props.get(ENABLED_KEY).map(|v| v.trim().to_ascii_lowercase()).as_deref() {
            None | Some("true") => true,
            Some("false") => false,
            Some(other) => {
                return Err(sluice_api::ConnectError::config(
                    ENABLED_KEY,
                    format!("Invalid value {other} for configuration {ENABLED_KEY}: Expected value to be either true or false"),
                ))
            }
        };
        Ok(Self { enabled, naming })
    }
}

/// This worker's metrics.
pub struct Metrics {
    pub enabled: bool,
    pub naming: Naming,
    started: SystemTime,
    tasks: Mutex<BTreeMap<ConnectorTaskId, Arc<TaskMetrics>>>,
    pub task_startup_attempts: AtomicU64,
    pub task_startup_success: AtomicU64,
    pub task_startup_failure: AtomicU64,
    pub connector_startup_attempts: AtomicU64,
    pub connector_startup_success: AtomicU64,
    pub connector_startup_failure: AtomicU64,
}

impl Metrics {
    pub fn from_worker(props: &Props) -> ConnectResult<Self> {
        let s = Settings::from_worker(props)?;
        Ok(Self::new(s.enabled, s.naming))
    }

    pub fn new(enabled: bool, naming: Naming) -> Self {
        Self {
            enabled,
            naming,
            started: SystemTime::now(),
            tasks: Mutex::default(),
            task_startup_attempts: AtomicU64::new(0),
            task_startup_success: AtomicU64::new(0),
            task_startup_failure: AtomicU64::new(0),
            connector_startup_attempts: AtomicU64::new(0),
            connector_startup_success: AtomicU64::new(0),
            connector_startup_failure: AtomicU64::new(0),
        }
    }

    /// The counters of a task instance starting now (Connect's task metrics start at zero
    /// with each instance).
    pub fn task_started(&self, id: &ConnectorTaskId) -> Arc<TaskMetrics> {
        let m = Arc::new(TaskMetrics::new(self.enabled));
        self.tasks.lock().expect("metrics lock").insert(id.clone(), m.clone());
        m
    }

    /// The task no longer runs here.
    pub fn task_removed(&self, id: &ConnectorTaskId) {
        self.tasks.lock().expect("metrics lock").remove(id);
    }

    pub fn connector_removed(&self, connector: &str) {
        self.tasks.lock().expect("metrics lock").retain(|id, _| id.connector != connector);
    }

    pub fn count(&self, counter: &AtomicU64) {
        counter.fetch_add(1, Relaxed);
    }

    pub fn tasks(&self) -> Vec<(ConnectorTaskId, Arc<TaskMetrics>)> {
        self.tasks.lock().expect("metrics lock").iter().map(|(k, v)| (k.clone(), v.clone())).collect()
    }
}

/// What `/metrics` shows of one connector, read from the herder at scrape time.
#[derive(Debug, Clone)]
pub struct ConnectorView {
    pub name: String,
    pub class: String,
    pub kind: ConnectorKind,
    pub version: String,
    pub state: State,
    /// Each task's state (UNASSIGNED when none is known).
    pub tasks: Vec<(u32, State)>,
    /// Tasks this worker runs.
    pub local_tasks: Vec<u32>,
}

/// Everything the worker shows beyond the task counters.
#[derive(Debug, Clone, Default)]
pub struct WorkerView {
    pub connectors: Vec<ConnectorView>,
    pub restarts: Vec<(Unit, RestartRecord)>,
    pub rebalancing: bool,
    /// The log's own figures ([`crate::log::Log::stats`]).
    pub log: Vec<crate::log::LogStat>,
}

struct Family {
    kind: &'static str,
    help: &'static str,
    samples: Vec<(String, f64)>,
}

/// A set of metric families, printed in name order.
struct Page {
    families: BTreeMap<String, Family>,
}

impl Page {
    fn add(&mut self, name: String, kind: &'static str, help: &'static str, labels: &[(&str, &str)], value: f64) {
        let mut l = String::new();
        if !labels.is_empty() {
            l.push('{');
            for (i, (k, v)) in labels.iter().enumerate() {
                if i > 0 {
                    l.push(',');
                }
                let _ = write!(l, "{k}=\"{}\"", escape(v));
            }
            l.push('}');
        }
        self.families.entry(name).or_insert_with(|| Family { kind, help, samples: Vec::new() }).samples.push((l, value));
    }

    fn render(&self) -> String {
        let mut out = String::new();
        for (name, f) in &self.families {
            let _ = writeln!(out, "# HELP {name} {}", f.help);
            let _ = writeln!(out, "# TYPE {name} {}", f.kind);
            for (labels, v) in &f.samples {
                let _ = writeln!(out, "{name}{labels} {}", number(*v));
            }
        }
        out
    }
}

fn escape(v: &str) -> String {
    v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

fn number(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}

/// The name of Connect metric `name` of `group` (the MBean type without `-metrics`:
/// `worker`, `worker-rebalance`, `connector`, `connector-task`, `source-task`, `sink-task`,
/// `task-error`) under `naming`.
fn connect_name(naming: Naming, group: &str, name: &str) -> String {
    let group = group.replace('-', "_");
    let name = name.replace('-', "_");
    match naming {
        Naming::Strimzi => format!("kafka_connect_{group}_{name}"),
        Naming::Confluent => {
            let g = if group.starts_with("worker") { format!("connect_{group}_metrics") } else { format!("{group}_metrics") };
            format!("kafka_connect_{g}_{name}")
        }
    }
}

fn state_label(s: State) -> &'static str {
    match s {
        State::Unassigned => "unassigned",
        State::Running => "running",
        State::Paused => "paused",
        State::Stopped => "stopped",
        State::Failed => "failed",
        State::Restarting => "restarting",
        State::Destroyed => "destroyed",
    }
}

/// The `/metrics` page.
pub fn render(metrics: &Metrics, view: &WorkerView) -> String {
    let n = metrics.naming;
    let mut p = Page { families: BTreeMap::new() };
    let w = |name: &str| connect_name(n, "worker", name);
    let connectors = &view.connectors;
    p.add(w("connector-count"), "gauge", "The number of connectors run in this worker.", &[], connectors.len() as f64);
    let local_tasks: usize = connectors.iter().map(|c| c.local_tasks.len()).sum();
    p.add(w("task-count"), "gauge", "The number of tasks run in this worker.", &[], local_tasks as f64);
    for (name, counter, help) in [
        ("connector-startup-attempts-total", &metrics.connector_startup_attempts, "The total number of connector startups that this worker has attempted."),
        ("connector-startup-success-total", &metrics.connector_startup_success, "The total number of connector starts that succeeded."),
        ("connector-startup-failure-total", &metrics.connector_startup_failure, "The total number of connector starts that failed."),
        ("task-startup-attempts-total", &metrics.task_startup_attempts, "The total number of task startups that this worker has attempted."),
        ("task-startup-success-total", &metrics.task_startup_success, "The total number of task starts that succeeded."),
        ("task-startup-failure-total", &metrics.task_startup_failure, "The total number of task starts that failed."),
    ] {
        p.add(w(name), "counter", help, &[], counter.load(Relaxed) as f64);
    }
    p.add(
        connect_name(n, "worker-rebalance", "rebalancing"),
        "gauge",
        "Whether this worker is currently rebalancing.",
        &[],
        if view.rebalancing { 1.0 } else { 0.0 },
    );
    const TASK_STATES: [State; 6] = [State::Running, State::Paused, State::Failed, State::Unassigned, State::Destroyed, State::Restarting];
    for c in connectors {
        let labels = [("connector", c.name.as_str())];
        p.add(w("connector-total-task-count"), "gauge", "The number of tasks of the connector on the worker.", &labels, c.tasks.len() as f64);
        for state in TASK_STATES {
            let label = state_label(state);
            let count = c.tasks.iter().filter(|(_, s)| *s == state).count();
            p.add(w(&format!("connector-{label}-task-count")), "gauge", "The number of tasks of the connector in this state.", &labels, count as f64);
        }
        match n {
            Naming::Strimzi => {
                p.add(
                    connect_name(n, "connector", "status"),
                    "gauge",
                    "The status of the connector.",
                    &[("connector", &c.name), ("status", state_label(c.state))],
                    1.0,
                );
                for (what, value) in [("connector-class", c.class.as_str()), ("connector-type", c.kind.name()), ("connector-version", c.version.as_str())] {
                    let label = what.replace('-', "_");
                    p.add(connect_name(n, "connector", what), "gauge", "The connector's class, type and version.", &[("connector", &c.name), (&label, value)], 1.0);
                }
                for (task, state) in &c.tasks {
                    let t = task.to_string();
                    p.add(
                        connect_name(n, "connector-task", "status"),
                        "gauge",
                        "The status of the connector task.",
                        &[("connector", &c.name), ("task", &t), ("status", state_label(*state))],
                        1.0,
                    );
                }
            }
            Naming::Confluent => p.add(
                "kafka_connect_connector_metrics".to_owned(),
                "gauge",
                "The connector's status, class, type and version.",
                &[
                    ("connector", &c.name),
                    ("status", state_label(c.state)),
                    ("connector_class", &c.class),
                    ("connector_type", c.kind.name()),
                    ("connector_version", &c.version),
                ],
                1.0,
            ),
        }
    }
    for (id, m) in metrics.tasks() {
        let t = id.task.to_string();
        let labels = [("connector", id.connector.as_str()), ("task", t.as_str())];
        let g = |v: &AtomicU64| v.load(Relaxed) as f64;
        let batches = m.batches.load(Relaxed);
        let avg = if batches == 0 { 0.0 } else { m.batch_records.load(Relaxed) as f64 / batches as f64 };
        let task = |name: &str| connect_name(n, "connector-task", name);
        p.add(task("batch-size-avg"), "gauge", "The average number of records in the batches the task has processed.", &labels, avg);
        p.add(task("batch-size-max"), "gauge", "The number of records in the largest batch the task has processed.", &labels, g(&m.batch_size_max));
        let commits = m.offset_commit_completion.load(Relaxed) + m.offset_commit_failure.load(Relaxed);
        let success = if commits == 0 { 0.0 } else { m.offset_commit_completion.load(Relaxed) as f64 / commits as f64 };
        p.add(task("offset-commit-success-percentage"), "gauge", "The average percentage of this task's offset commit attempts that succeeded.", &labels, success);
        p.add(task("offset-commit-failure-percentage"), "gauge", "The average percentage of this task's offset commit attempts that failed.", &labels, if commits == 0 { 0.0 } else { 1.0 - success });
        let is_source = view.connectors.iter().find(|c| c.name == id.connector).is_none_or(|c| c.kind == ConnectorKind::Source);
        if is_source {
            let s = |name: &str| connect_name(n, "source-task", name);
            p.add(s("source-record-poll-total"), "counter", "The number of records produced/polled (before transformation) by this task.", &labels, g(&m.source_record_poll));
            p.add(s("source-record-write-total"), "counter", "The number of records output from the transformations and written to Kafka for this task.", &labels, g(&m.source_record_write));
            p.add(s("poll-batch-avg-time-ms"), "gauge", "The average time in milliseconds taken by this task to poll for a batch of source records.", &labels, m.call_avg_ms());
            p.add(s("poll-batch-max-time-ms"), "gauge", "The maximum time in milliseconds taken by this task to poll for a batch of source records.", &labels, g(&m.call_max_nanos) / 1e6);
        } else {
            let s = |name: &str| connect_name(n, "sink-task", name);
            p.add(s("sink-record-read-total"), "counter", "The total number of records read from Kafka by this task.", &labels, g(&m.sink_record_read));
            p.add(s("sink-record-send-total"), "counter", "The total number of records output from the transformations and sent/put to this task.", &labels, g(&m.sink_record_send));
            p.add(s("offset-commit-completion-total"), "counter", "The total number of offset commit completions that were completed successfully.", &labels, g(&m.offset_commit_completion));
            p.add(s("put-batch-avg-time-ms"), "gauge", "The average time taken by this task to put a batch of sinks records.", &labels, m.call_avg_ms());
            p.add(s("put-batch-max-time-ms"), "gauge", "The maximum time taken by this task to put a batch of sinks records.", &labels, g(&m.call_max_nanos) / 1e6);
            p.add(s("partition-count"), "gauge", "The number of topic partitions assigned to this task belonging to the named sink connector in this worker.", &labels, g(&m.partition_count));
            let lag_max = m.partition_lags().into_iter().fold(0.0, f64::max);
            p.add(s("sink-record-lag-max"), "gauge", "The maximum lag in terms of number of records that the sink task is behind the consumer's position for any topic partitions.", &labels, lag_max);
        }
        let e = |name: &str| connect_name(n, "task-error", name);
        for (name, v, help) in [
            ("total-record-failures", &m.record_failures, "The number of record processing failures in this task."),
            ("total-record-errors", &m.record_errors, "The number of record processing errors in this task."),
            ("total-records-skipped", &m.records_skipped, "The number of records skipped due to errors."),
            ("total-retries", &m.retries, "The number of operations retried."),
            ("total-errors-logged", &m.errors_logged, "The number of errors that were logged."),
            ("deadletterqueue-produce-requests", &m.dlq_requests, "The number of attempted writes to the dead letter queue."),
            ("deadletterqueue-produce-failures", &m.dlq_failures, "The number of failed writes to the dead letter queue."),
            ("last-error-timestamp", &m.last_error_ms, "The epoch timestamp when this task last encountered an error."),
        ] {
            p.add(e(name), "gauge", help, &labels, g(v));
        }
        p.add("sluice_task_busy_ratio".to_owned(), "gauge", "The fraction of time the task spent in its own work (poll and append, or put) since it started.", &labels, m.busy_ratio());
        for (series, sample) in m.gauges.snapshot() {
            let mut all: Vec<(&str, &str)> = labels.to_vec();
            all.extend(series.labels.iter().map(|(k, v)| (*k, v.as_str())));
            p.add(series.family.to_owned(), "gauge", sample.help, &all, sample.value);
        }
    }
    for (unit, r) in &view.restarts {
        let next = r.next_attempt.map_or(0.0, |ms| ms as f64 / 1000.0);
        match unit {
            Unit::Task(id) => {
                let t = id.task.to_string();
                let labels = [("connector", id.connector.as_str()), ("task", t.as_str())];
                p.add("sluice_task_restarts_total".to_owned(), "counter", "Automatic restarts of the task on this worker.", &labels, r.total as f64);
                p.add("sluice_task_next_restart_timestamp_seconds".to_owned(), "gauge", "When the next automatic restart of the task is due (0: none).", &labels, next);
            }
            Unit::Connector(c) => {
                let labels = [("connector", c.as_str())];
                p.add("sluice_connector_restarts_total".to_owned(), "counter", "Automatic restarts of the connector on this worker.", &labels, r.total as f64);
                p.add("sluice_connector_next_restart_timestamp_seconds".to_owned(), "gauge", "When the next automatic restart of the connector is due (0: none).", &labels, next);
            }
        }
    }
    let load: f64 = metrics.tasks().iter().map(|(_, m)| m.busy_ratio()).sum();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    p.add("sluice_worker_load".to_owned(), "gauge", "The sum of the busy ratios of the tasks on this worker (1.0: one core's worth of work).", &[], load);
    p.add(
        "sluice_worker_desired_replicas".to_owned(),
        "gauge",
        "The workers this worker's load needs at 70% of its cores; sum over the group for its desired size.",
        &[],
        f64::from(crate::scaling::desired_replicas(load, cores)),
    );
    for s in &view.log {
        p.add(s.name.to_owned(), s.kind, s.help, &[], s.value);
    }
    process(&mut p, metrics.started);
    p.render()
}

/// `process_*` from /proc (Linux), as Prometheus' client libraries export them.
fn process(p: &mut Page, started: SystemTime) {
    let start = started.duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64());
    p.add("process_start_time_seconds".to_owned(), "gauge", "Start time of the process since unix epoch in seconds.", &[], start.floor());
    if let Ok(stat) = std::fs::read_to_string("/proc/self/stat") {
        // Fields after the command (which may hold spaces) start after the last ')'.
        let fields: Vec<&str> = stat.rsplit_once(')').map(|(_, rest)| rest.split_whitespace().collect()).unwrap_or_default();
        // utime and stime are fields 14 and 15 of stat(5): 11 and 12 after the state.
        let ticks = |i: usize| fields.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
        let hz = 100.0; // USER_HZ on Linux
        p.add("process_cpu_seconds_total".to_owned(), "counter", "Total user and system CPU time spent in seconds.", &[], (ticks(11) + ticks(12)) / hz);
    }
    if let Ok(status) = std::fs::read_to_string("/proc/self/status") {
        let kib = |key: &str| {
            status.lines().find_map(|l| l.strip_prefix(key)).and_then(|v| v.split_whitespace().next()).and_then(|v| v.parse::<f64>().ok())
        };
        if let Some(rss) = kib("VmRSS:") {
            p.add("process_resident_memory_bytes".to_owned(), "gauge", "Resident memory size in bytes.", &[], rss * 1024.0);
        }
        if let Some(hwm) = kib("VmHWM:") {
            p.add("sluice_process_peak_resident_memory_bytes".to_owned(), "gauge", "Peak resident memory size in bytes.", &[], hwm * 1024.0);
        }
        if let Some(vm) = kib("VmSize:") {
            p.add("process_virtual_memory_bytes".to_owned(), "gauge", "Virtual memory size in bytes.", &[], vm * 1024.0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view() -> WorkerView {
        WorkerView {
            log: Vec::new(),
            connectors: vec![ConnectorView {
                name: "pg \"main\"".into(),
                class: "io.debezium.connector.postgresql.PostgresConnector".into(),
                kind: ConnectorKind::Source,
                version: "3.6.3".into(),
                state: State::Running,
                tasks: vec![(0, State::Running), (1, State::Failed)],
                local_tasks: vec![0, 1],
            }],
            restarts: vec![(Unit::Task(ConnectorTaskId { connector: "pg \"main\"".into(), task: 1 }), RestartRecord { total: 3, ..Default::default() })],
            rebalancing: false,
        }
    }

    #[test]
    fn strimzi_names_and_escaped_labels() {
        let m = Metrics::new(true, Naming::Strimzi);
        let t = m.task_started(&ConnectorTaskId { connector: "pg \"main\"".into(), task: 0 });
        t.add(&t.source_record_poll, 7);
        t.add(&t.source_record_write, 5);
        t.batch(7, Duration::from_millis(1));
        let text = render(&m, &view());
        for line in [
            "kafka_connect_worker_connector_count 1",
            "kafka_connect_worker_task_count 2",
            r#"kafka_connect_worker_connector_failed_task_count{connector="pg \"main\""} 1"#,
            r#"kafka_connect_worker_connector_running_task_count{connector="pg \"main\""} 1"#,
            r#"kafka_connect_connector_status{connector="pg \"main\"",status="running"} 1"#,
            r#"kafka_connect_connector_task_status{connector="pg \"main\"",task="1",status="failed"} 1"#,
            r#"kafka_connect_source_task_source_record_poll_total{connector="pg \"main\"",task="0"} 7"#,
            r#"kafka_connect_source_task_source_record_write_total{connector="pg \"main\"",task="0"} 5"#,
            r#"kafka_connect_connector_task_batch_size_max{connector="pg \"main\"",task="0"} 7"#,
            r#"sluice_task_restarts_total{connector="pg \"main\"",task="1"} 3"#,
            "# TYPE kafka_connect_source_task_source_record_poll_total counter",
        ] {
            assert!(text.lines().any(|l| l == line), "missing {line:?} in\n{text}");
        }
        assert!(text.contains("process_cpu_seconds_total "), "{text}");
        assert!(text.contains("process_resident_memory_bytes "), "{text}");
    }

    #[test]
    fn confluent_names() {
        let m = Metrics::new(true, Naming::Confluent);
        let t = m.task_started(&ConnectorTaskId { connector: "c".into(), task: 0 });
        t.add(&t.record_failures, 2);
        let mut v = view();
        v.connectors[0].name = "c".into();
        let text = render(&m, &v);
        assert!(text.contains("kafka_connect_connect_worker_metrics_connector_count 1"), "{text}");
        assert!(text.contains(r#"kafka_connect_connect_worker_metrics_connector_failed_task_count{connector="c"} 1"#), "{text}");
        assert!(text.contains(r#"kafka_connect_task_error_metrics_total_record_failures{connector="c",task="0"} 2"#), "{text}");
        assert!(text.contains(r#"kafka_connect_connector_metrics{connector="c",status="running",connector_class="io.debezium.connector.postgresql.PostgresConnector",connector_type="source",connector_version="3.6.3"} 1"#), "{text}");
    }

    #[test]
    fn disabled_metrics_count_nothing() {
        let m = Metrics::new(false, Naming::Strimzi);
        let t = m.task_started(&ConnectorTaskId { connector: "c".into(), task: 0 });
        t.add(&t.source_record_poll, 7);
        t.batch(7, Duration::from_millis(1));
        t.record_error(true, true, true);
        assert_eq!(t.source_record_poll.load(Relaxed), 0);
        assert_eq!(t.batches.load(Relaxed), 0);
        assert_eq!(t.record_failures.load(Relaxed), 0);
    }

    /// Every metric that a query of the Grafana dashboard `docker/grafana-dashboard.json`
    /// names (in a panel's `expr` or a variable's query) is a family `render` writes under
    /// the default (Strimzi) names, for a worker with a source and a sink task and a task
    /// and a connector waiting to restart. Linux only: the `process_*` families come from
    /// /proc.
    #[cfg(target_os = "linux")]
    #[test]
    fn dashboard_queries_only_rendered_metrics() {
        const CONNECTOR_PUBLISHED: &[&str] = &["debezium_metrics_", "sluice_postgres_", "sluice_source_lag_"];
        let m = Metrics::new(true, Naming::Strimzi);
        let (source, sink) = (ConnectorTaskId { connector: "src".into(), task: 0 }, ConnectorTaskId { connector: "snk".into(), task: 0 });
        m.task_started(&source);
        m.task_started(&sink).gauges.set(crate::task::sink::LAG_FAMILY, "lag", &[("topic", "t"), ("partition", "0")], 5.0);
        let dir = tempfile::tempdir().expect("a temporary directory");
        let log = crate::log::embedded::EmbeddedLog::open(dir.path(), Default::default()).expect("an embedded log");
        let connector = |name: &str, kind| ConnectorView {
            name: name.into(),
            class: "C".into(),
            kind,
            version: "1".into(),
            state: State::Running,
            tasks: vec![(0, State::Running)],
            local_tasks: vec![0],
        };
        let waiting = RestartRecord { total: 1, next_attempt: Some(1), ..Default::default() };
        let view = WorkerView {
            log: crate::log::Log::stats(&log),
            connectors: vec![connector("src", ConnectorKind::Source), connector("snk", ConnectorKind::Sink)],
            restarts: vec![(Unit::Task(sink), waiting.clone()), (Unit::Connector("src".into()), waiting)],
            rebalancing: false,
        };
        let text = render(&m, &view);
        let rendered: std::collections::BTreeSet<&str> = text
            .lines()
            .filter_map(|l| match l.strip_prefix("# TYPE ") {
                Some(family) => family.split(' ').next(),
                None if l.starts_with('#') => None,
                None => l.split(['{', ' ']).next(),
            })
            .collect();

        let dashboard: serde_json::Value =
            serde_json::from_str(include_str!("../../../docker/grafana-dashboard.json")).expect("the dashboard is JSON");
        let mut queries = Vec::new();
        for panel in dashboard["panels"].as_array().expect("the dashboard's panels") {
            // A collapsed row holds its panels.
            for p in std::iter::once(panel).chain(panel["panels"].as_array().into_iter().flatten()) {
                if p["type"] == "row" {
                    continue;
                }
                let title = format!("panel {}", p["title"]);
                let targets = p["targets"].as_array().filter(|t| !t.is_empty()).unwrap_or_else(|| panic!("{title} has no queries"));
                for t in targets {
                    let expr = t["expr"].as_str().unwrap_or_else(|| panic!("{title} has a query without expr"));
                    queries.push((title.clone(), expr.to_owned()));
                }
            }
        }
        for v in dashboard["templating"]["list"].as_array().expect("the dashboard's variables") {
            if let Some(q) = v["query"]["query"].as_str() {
                queries.push((format!("variable {}", v["name"]), q.to_owned()));
            }
        }
        assert!(queries.len() > 20, "the dashboard's queries were not found: {queries:?}");
        let metric = regex::Regex::new(r"\b(?:kafka_connect_|sluice_|process_|debezium_)\w*").expect("regex");
        for (place, expr) in &queries {
            let names: Vec<&str> = metric.find_iter(expr).map(|m| m.as_str()).collect();
            assert!(!names.is_empty(), "{place} names no metric: {expr}");
            // What connectors publish themselves is checked against a real Postgres source in
            // tests/tests/metrics.rs.
            for name in names.into_iter().filter(|n| !CONNECTOR_PUBLISHED.iter().any(|p| n.starts_with(p))) {
                assert!(rendered.contains(name), "{place} queries {name}, which /metrics does not render; it renders {rendered:#?}");
            }
        }
    }

    #[test]
    fn keys_are_checked() {
        let p = |k: &str, v: &str| [(k.to_owned(), v.to_owned())].into_iter().collect::<Props>();
        assert!(Metrics::from_worker(&p(NAMING_KEY, "jmx")).is_err());
        assert!(Metrics::from_worker(&p(ENABLED_KEY, "yes")).is_err());
        assert_eq!(Metrics::from_worker(&p(NAMING_KEY, "Confluent")).unwrap().naming, Naming::Confluent);
        assert!(!Metrics::from_worker(&p(ENABLED_KEY, "false")).unwrap().enabled);
    }
}
