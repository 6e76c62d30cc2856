//! The task loops: the only code that moves records and progress.
//!
//! ```text
//! source:  poll ─▶ convert ─▶ log.append ──(ack future)──▶ committer
//!                                                          │ acked prefix per source partition
//!                                          every offset.flush.interval.ms and on stop:
//!                                          offsets topic (durable) ─▶ SourceTask::commit
//! source, exactly once (Kafka, `exactly.once.source.support=enabled`):
//!          poll ─▶ convert ─▶ transaction { records, offsets } ─▶ commit ─▶ SourceTask::commit
//! sink:    log.read ─▶ convert ─▶ SinkTask::put ─▶ every offset.flush.interval.ms and on stop:
//!          SinkTask::pre_commit ─▶ consumer-group offsets (durable)
//! ```

pub mod errant;
pub mod errors;
pub mod exactly_once;
pub mod rate;
pub mod sink;
pub mod source;
pub mod topic_creation;

use std::time::{Duration, Instant};

use sluice_api::{ConnectError, ConnectResult, Props};
use tokio_util::sync::CancellationToken;

use crate::convert::{self, Converter, HeaderConverter};

/// What a task loop reports about itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TaskState {
    Running,
    Paused,
    /// Running, but retrying a transient failure (database or log unavailable, …) or just
    /// past one: shown as RUNNING with the failure as its trace, cleared once the task has
    /// worked [`TRACE_HOLD`] without another.
    Retrying(String),
}

/// How long a RUNNING task's trace keeps its newest retried failure (or setback) after
/// the retry succeeded: a failure fixed by the first retry is still seen by whoever looks
/// at the status within this time.
pub const TRACE_HOLD: Duration = Duration::from_secs(10);

/// Receives a task loop's state changes (only changes) and its offset commits.
pub struct StateReporter {
    last: Option<TaskState>,
    sink: Box<dyn Fn(TaskState) + Send>,
    commits: Option<Box<dyn Fn() + Send>>,
    /// Failures the task or the runtime's committer got past by themselves.
    setbacks: sluice_api::Setbacks,
    /// When the newest failure was reported, and how long its trace stays.
    failed_at: Option<Instant>,
    hold: Duration,
}

impl StateReporter {
    pub fn new(sink: impl Fn(TaskState) + Send + 'static) -> Self {
        Self {
            last: None,
            sink: Box::new(sink),
            commits: None,
            setbacks: sluice_api::Setbacks::default(),
            failed_at: None,
            hold: TRACE_HOLD,
        }
    }

    /// Also calls `f` after each commit of offsets.
    pub fn on_commit(mut self, f: impl Fn() + Send + 'static) -> Self {
        self.commits = Some(Box::new(f));
        self
    }

    /// Keeps a retried failure in the trace this long after the retry succeeded.
    pub fn holding(mut self, hold: Duration) -> Self {
        self.hold = hold;
        self
    }

    /// Where the task (through its context) and the committer note their setbacks.
    pub fn setbacks(&self) -> sluice_api::Setbacks {
        self.setbacks.clone()
    }

    /// The task's offsets were committed (they are durable).
    pub fn committed(&self) {
        if let Some(f) = &self.commits {
            f();
        }
    }

    pub fn report(&mut self, state: TaskState) {
        if matches!(state, TaskState::Retrying(_)) {
            self.failed_at = Some(Instant::now());
        }
        if self.last.as_ref() != Some(&state) {
            (self.sink)(state.clone());
            self.last = Some(state);
        }
    }

    pub fn is_paused(&self) -> bool {
        self.last == Some(TaskState::Paused)
    }

    /// The task did its work: a setback noted meanwhile is shown now; otherwise the state
    /// goes back to plain RUNNING after a resume, or once a retried failure is
    /// [`TRACE_HOLD`] old.
    pub fn running(&mut self) {
        if let Some(trace) = self.setbacks.take() {
            self.report(TaskState::Retrying(trace));
            return;
        }
        let held = matches!(self.last, Some(TaskState::Retrying(_))) && self.failed_at.is_some_and(|t| t.elapsed() < self.hold);
        if self.last.is_some() && self.last != Some(TaskState::Running) && !held {
            self.report(TaskState::Running);
        }
    }
}

/// The converters one task uses, from the connector's overrides or the worker's defaults.
pub struct RecordConverters {
    pub key: Box<dyn Converter>,
    pub value: Box<dyn Converter>,
    pub header: Box<dyn HeaderConverter>,
    /// Class names, for error reports.
    pub key_class: String,
    pub value_class: String,
    pub header_class: String,
}

/// A converter class and its own properties (prefix removed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConverterSpec {
    pub class: String,
    pub props: Props,
}

impl ConverterSpec {
    /// The connector's `<key>` override (with its `<key>.*` properties), else the worker's.
    pub fn resolve(connector: &Props, key: &str, worker: (String, Props)) -> Self {
        match connector.get(key) {
            Some(class) => {
                let prefix = format!("{key}.");
                let props = connector.iter().filter_map(|(k, v)| k.strip_prefix(&prefix).map(|r| (r.to_owned(), v.clone()))).collect();
                Self { class: class.clone(), props }
            }
            None => Self { class: worker.0, props: worker.1 },
        }
    }
}

impl RecordConverters {
    pub fn build(key: &ConverterSpec, value: &ConverterSpec, header: &ConverterSpec) -> ConnectResult<Self> {
        Ok(Self {
            key: make_converter("key.converter", key, true)?,
            value: make_converter("value.converter", value, false)?,
            header: make_header_converter(header)?,
            key_class: key.class.clone(),
            value_class: value.class.clone(),
            header_class: header.class.clone(),
        })
    }

    /// The class name of the converter used at `stage`.
    pub fn class_of(&self, stage: Stage) -> String {
        match stage {
            Stage::KeyConverter => self.key_class.clone(),
            Stage::ValueConverter => self.value_class.clone(),
            Stage::HeaderConverter => self.header_class.clone(),
            _ => String::new(),
        }
    }
}

fn make_converter(key: &str, spec: &ConverterSpec, is_key: bool) -> ConnectResult<Box<dyn Converter>> {
    let plugin = convert::find_converter(&spec.class).ok_or_else(|| {
        let available: Vec<_> = convert::converters().iter().map(|p| p.class).collect();
        ConnectError::config(key, format!("unknown converter class '{}'; available: {}", spec.class, available.join(", ")))
    })?;
    (plugin.create)(&spec.props, is_key)
}

fn make_header_converter(spec: &ConverterSpec) -> ConnectResult<Box<dyn HeaderConverter>> {
    let plugin = convert::find_header_converter(&spec.class).ok_or_else(|| {
        let available: Vec<_> = convert::header_converters().iter().map(|p| p.class).collect();
        ConnectError::config(
            "header.converter",
            format!("unknown header converter class '{}'; available: {}", spec.class, available.join(", ")),
        )
    })?;
    (plugin.create)(&spec.props)
}

/// Exponential backoff for retriable failures: 100 ms doubling up to 10 s.
#[derive(Debug, Clone)]
pub(crate) struct Backoff {
    next: Duration,
    /// Failures waited out since the last success.
    pub(crate) failures: u32,
}

impl Backoff {
    const START: Duration = Duration::from_millis(100);
    const MAX: Duration = Duration::from_secs(10);

    pub(crate) fn new() -> Self {
        Self { next: Self::START, failures: 0 }
    }

    pub(crate) fn reset(&mut self) {
        self.next = Self::START;
        self.failures = 0;
    }

    /// The error that ends retrying once `max` retries were made (`errors.max.retries`,
    /// Debezium's: -1 or unset retries forever, 0 never retries).
    pub(crate) fn exhausted(&self, max: Option<u32>, error: ConnectError) -> Result<ConnectError, ConnectError> {
        match max {
            Some(max) if self.failures >= max => {
                Err(ConnectError::retriable_from(format!("the task gave up after {max} retries (errors.max.retries={max})"), error))
            }
            _ => Ok(error),
        }
    }

    /// Sleeps for the next delay; false when `shutdown` fired first.
    pub(crate) async fn wait(&mut self, shutdown: &CancellationToken) -> bool {
        let d = self.next;
        self.next = (self.next * 2).min(Self::MAX);
        self.failures += 1;
        tokio::select! {
            _ = tokio::time::sleep(d) => true,
            _ = shutdown.cancelled() => false,
        }
    }
}

/// After a task's `start` failed: a retriable failure (a database or broker that is not
/// reachable yet) is shown as RUNNING with the failure as its trace and waited out with
/// `backoff`, and the caller starts the task again, as Debezium's tasks re-attempt a start that
/// failed for a retriable reason; any other failure is returned. `Ok(false)`: `shutdown` came
/// during the wait.
pub(crate) async fn start_failed(
    error: ConnectError,
    state: &mut StateReporter,
    backoff: &mut Backoff,
    max_retries: Option<u32>,
    shutdown: &CancellationToken,
) -> ConnectResult<bool> {
    if !error.is_retriable() {
        return Err(error);
    }
    let error = backoff.exhausted(max_retries, error)?;
    tracing::warn!(error = %error, "task start failed; retrying");
    state.report(TaskState::Retrying(error.trace()));
    Ok(backoff.wait(shutdown).await)
}

/// The pipeline stage a record failed in, named as Connect names it in traces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    Transformation,
    KeyConverter,
    ValueConverter,
    HeaderConverter,
    Task,
    Producer,
}

impl Stage {
    pub fn name(self) -> &'static str {
        match self {
            Self::Transformation => "TRANSFORMATION",
            Self::KeyConverter => "KEY_CONVERTER",
            Self::ValueConverter => "VALUE_CONVERTER",
            Self::HeaderConverter => "HEADER_CONVERTER",
            Self::Task => "TASK_PUT",
            Self::Producer => "KAFKA_PRODUCE",
        }
    }

    pub(crate) fn fail(self, position: String, err: ConnectError) -> ConnectError {
        ConnectError::fatal_from(format!("Tolerance exceeded in error handler: stage {} failed for {position}", self.name()), err)
    }
}

#[cfg(test)]
mod state_tests {
    use std::sync::{Arc, Mutex};

    use super::*;

    fn recorder(hold: Duration) -> (StateReporter, Arc<Mutex<Vec<TaskState>>>) {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let s = seen.clone();
        (StateReporter::new(move |state| s.lock().unwrap().push(state)).holding(hold), seen)
    }

    #[test]
    fn a_retried_failure_stays_in_the_trace_for_the_hold_then_goes() {
        let (mut r, seen) = recorder(Duration::from_millis(300));
        r.running();
        r.report(TaskState::Retrying("db gone".into()));
        r.running();
        assert_eq!(*seen.lock().unwrap(), vec![TaskState::Retrying("db gone".into())], "cleared before the hold ended");
        std::thread::sleep(Duration::from_millis(350));
        r.running();
        assert_eq!(*seen.lock().unwrap(), vec![TaskState::Retrying("db gone".into()), TaskState::Running]);
    }

    #[test]
    fn a_setback_noted_by_the_task_shows_at_its_next_success() {
        let (mut r, seen) = recorder(Duration::ZERO);
        let setbacks = r.setbacks();
        setbacks.note(&ConnectError::retriable("a write lost its reply; written again"));
        r.running();
        let states = seen.lock().unwrap().clone();
        assert!(matches!(&states[..], [TaskState::Retrying(t)] if t.contains("a write lost its reply")), "{states:?}");
        assert_eq!(setbacks.take(), None, "the setback was taken");
        r.running();
        assert_eq!(seen.lock().unwrap().last(), Some(&TaskState::Running), "no hold: plain RUNNING at the next success");
    }

    #[test]
    fn a_resume_clears_pause_at_once() {
        let (mut r, seen) = recorder(Duration::from_secs(60));
        r.report(TaskState::Paused);
        r.running();
        assert_eq!(*seen.lock().unwrap(), vec![TaskState::Paused, TaskState::Running]);
    }
}
