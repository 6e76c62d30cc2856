//! The connector and task traits, and the plugin descriptor of the explicit registry.
//!
//! Lifecycle, as in Kafka Connect:
//! - A [`Connector`] is started with its validated configuration, splits the work into at
//!   most `tasks.max` task configurations, and is stopped when deleted, paused or moved.
//! - A [`SourceTask`] is started, polled in a loop, told which offsets became durable
//!   ([`SourceTask::commit`]), and stopped.
//! - A [`SinkTask`] is started, handed records with [`SinkTask::put`], asked what is durable
//!   with [`SinkTask::pre_commit`], and stopped.
//!
//! A task is driven by one runtime loop: its methods are never called concurrently.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use tokio_util::sync::CancellationToken;

use crate::config::{ConfigDef, Props};
use crate::error::ConnectResult;
use crate::record::{SinkRecord, SourceOffset, SourcePartition, SourceRecord, TopicPartition};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ConnectorKind {
    Source,
    Sink,
}

impl ConnectorKind {
    /// `"source"` or `"sink"`, as in REST responses.
    pub fn name(self) -> &'static str {
        match self {
            Self::Source => "source",
            Self::Sink => "sink",
        }
    }
}

/// What a connector may ask of the runtime while it runs.
pub trait ConnectorContext: Send + Sync {
    /// The connector's task configurations changed (e.g. new tables): regenerate them.
    fn request_task_reconfiguration(&self);
    /// The connector cannot go on: mark it FAILED with this trace.
    fn raise_error(&self, trace: String);
}

#[async_trait]
pub trait Connector: Send + Sync {
    /// The configuration keys this connector understands (beyond the common ones).
    fn config_def(&self) -> ConfigDef;

    /// Starts the connector. `props` has passed `config_def().parse`.
    async fn start(&mut self, props: &Props, ctx: Arc<dyn ConnectorContext>) -> ConnectResult<()>;

    /// At most `max_tasks` task configurations. Called after `start`.
    async fn task_configs(&mut self, max_tasks: usize) -> ConnectResult<Vec<Props>>;

    async fn stop(&mut self) -> ConnectResult<()>;

    /// A new, unstarted task of this connector.
    fn create_task(&self) -> Task;

    /// Extra checks beyond the definition (e.g. connecting to the database), returning
    /// `(key, error)` pairs shown by the validate endpoint.
    async fn validate_extra(&self, _props: &Props) -> Vec<(String, String)> {
        Vec::new()
    }

    /// Whether this source connector, with `props`, delivers exactly once when its tasks'
    /// records and offsets are committed in one transaction: re-polling from a committed
    /// offset yields the records after it, none missing and none repeated (Connect's
    /// `SourceConnector::exactlyOnceSupport`). `None`: the connector does not say, which
    /// `exactly.once.support=required` refuses.
    fn exactly_once_support(&self, _props: &Props) -> Option<ExactlyOnceSupport> {
        None
    }
}

/// A source connector's answer to [`Connector::exactly_once_support`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExactlyOnceSupport {
    Supported,
    Unsupported,
}

pub enum Task {
    Source(Box<dyn SourceTask>),
    Sink(Box<dyn SinkTask>),
}

/// Reads the committed offsets of the connector's source partitions.
pub trait OffsetReader: Send + Sync {
    fn offset(&self, partition: &SourcePartition) -> Option<SourceOffset>;
}

#[derive(Clone)]
pub struct SourceTaskContext {
    pub connector: String,
    pub task_id: u32,
    pub props: Props,
    pub offsets: Arc<dyn OffsetReader>,
    /// Cancelled when the task is asked to stop; `poll` may select on it to return early.
    pub shutdown: CancellationToken,
    /// What the task publishes for `/metrics` (see [`crate::gauges`]).
    pub gauges: crate::gauges::TaskGauges,
}

#[async_trait]
pub trait SourceTask: Send {
    async fn start(&mut self, ctx: SourceTaskContext) -> ConnectResult<()>;

    /// The next batch of records, in the order they must be written. May return an empty
    /// batch; should return within about a second so that the task can be stopped.
    /// Records handed out are owned by the runtime from then on.
    async fn poll(&mut self) -> ConnectResult<Vec<SourceRecord>>;

    /// Called after offsets have been durably committed: `committed` holds, per source
    /// partition, the newest offset whose record (and all before it) is durable in the log.
    /// A source may now release what those offsets cover (confirm an LSN, ack a message).
    async fn commit(&mut self, _committed: &[(SourcePartition, SourceOffset)]) -> ConnectResult<()> {
        Ok(())
    }

    async fn stop(&mut self) -> ConnectResult<()> {
        Ok(())
    }
}

#[derive(Clone)]
pub struct SinkTaskContext {
    pub connector: String,
    pub task_id: u32,
    pub props: Props,
    rewinds: Arc<Mutex<BTreeMap<TopicPartition, i64>>>,
    reporter: Option<Arc<dyn ErrantRecordReporter>>,
    setbacks: Setbacks,
}

/// Failures a task or its runtime got past by itself (a write retried inside the task, an
/// offset commit that will be tried again): the runtime shows the newest in the task's
/// status trace (the task stays RUNNING) until the task has worked a while without another.
/// Without this, a failure that a retry fixed within a `put` would leave no trace at all.
#[derive(Debug, Clone, Default)]
pub struct Setbacks(Arc<Mutex<Option<String>>>);

impl Setbacks {
    /// Records `error` as the task's newest setback.
    pub fn note(&self, error: &crate::error::ConnectError) {
        *self.0.lock().expect("setbacks lock") = Some(error.trace());
    }

    /// The setback noted since the last call, if any; called by the runtime.
    pub fn take(&self) -> Option<String> {
        self.0.lock().expect("setbacks lock").take()
    }
}

/// Reports records a sink task could not write (Connect's `ErrantRecordReporter`, KIP-610).
///
/// The runtime applies the connector's error handling (`errors.tolerance`, `errors.log.*`,
/// `errors.deadletterqueue.*`) to a reported record as to one that failed conversion.
#[async_trait]
pub trait ErrantRecordReporter: Send + Sync {
    /// Reports `record` (one handed to the current `put`) as failed with `error`.
    ///
    /// `Ok` means the failure is tolerated and what it calls for is durable (the dead-letter
    /// record is in the log): the task may skip the record and let its offset be
    /// committed. `Err` means it is not tolerated: `put` should return that error, which
    /// fails the task with the record's position and the cause.
    async fn report(&self, record: &SinkRecord, error: crate::error::ConnectError) -> ConnectResult<()>;
}

impl SinkTaskContext {
    pub fn new(connector: String, task_id: u32, props: Props) -> Self {
        Self { connector, task_id, props, rewinds: Arc::default(), reporter: None, setbacks: Setbacks::default() }
    }

    /// The same context reporting setbacks to `setbacks`; set by the runtime.
    pub fn with_setbacks(mut self, setbacks: Setbacks) -> Self {
        self.setbacks = setbacks;
        self
    }

    /// Tells the runtime of a failure the task got past by itself (see [`Setbacks`]).
    pub fn setback(&self, error: &crate::error::ConnectError) {
        self.setbacks.note(error);
    }

    /// Where this task's setbacks go, for a client that retries on the task's behalf.
    pub fn setbacks(&self) -> Setbacks {
        self.setbacks.clone()
    }

    /// The same context with an errant-record reporter; set by the runtime.
    pub fn with_reporter(mut self, reporter: Arc<dyn ErrantRecordReporter>) -> Self {
        self.reporter = Some(reporter);
        self
    }

    /// The reporter for records `put` cannot write, when the runtime provides one.
    pub fn errant_record_reporter(&self) -> Option<Arc<dyn ErrantRecordReporter>> {
        self.reporter.clone()
    }

    /// Asks the runtime to read `tp` from `offset` next (e.g. from offsets the sink keeps in
    /// its destination). Applied before the next `put`.
    pub fn request_offset(&self, tp: TopicPartition, offset: i64) {
        self.rewinds.lock().expect("rewinds lock").insert(tp, offset);
    }

    /// Takes the pending rewinds; called by the runtime.
    pub fn take_rewinds(&self) -> BTreeMap<TopicPartition, i64> {
        std::mem::take(&mut *self.rewinds.lock().expect("rewinds lock"))
    }
}

#[async_trait]
pub trait SinkTask: Send {
    async fn start(&mut self, ctx: SinkTaskContext) -> ConnectResult<()>;

    /// Partitions assigned to this task; called before records of them are put.
    async fn open(&mut self, _partitions: &[TopicPartition]) -> ConnectResult<()> {
        Ok(())
    }

    /// Writes (or buffers) records. A retriable error makes the runtime pause and redeliver
    /// the same batch after a backoff.
    async fn put(&mut self, records: Vec<SinkRecord>) -> ConnectResult<()>;

    /// About how many bytes of stored records (keys, values, headers) one `put` should carry
    /// at most; `None` leaves it to the runtime (about 1 MiB). A sink that writes several
    /// batches per put and overlaps them asks for more. Read once, after `start`.
    fn max_put_bytes(&self) -> Option<usize> {
        None
    }

    /// Makes everything put so far durable.
    async fn flush(&mut self, _current: &BTreeMap<TopicPartition, i64>) -> ConnectResult<()> {
        Ok(())
    }

    /// Given the next offset to read per partition (last put + 1), returns the offsets that
    /// are durable in the destination and may be committed. Default: flush, then all of them.
    async fn pre_commit(&mut self, current: &BTreeMap<TopicPartition, i64>) -> ConnectResult<BTreeMap<TopicPartition, i64>> {
        self.flush(current).await?;
        Ok(current.clone())
    }

    async fn close(&mut self, _partitions: &[TopicPartition]) -> ConnectResult<()> {
        Ok(())
    }

    async fn stop(&mut self) -> ConnectResult<()> {
        Ok(())
    }
}

/// One entry of the plugin registry.
#[derive(Clone, Copy)]
pub struct ConnectorPlugin {
    /// The Java class name users already have in their JSON.
    pub class: &'static str,
    /// Short names accepted as `connector.class` too.
    pub aliases: &'static [&'static str],
    pub kind: ConnectorKind,
    pub version: &'static str,
    /// The Java class of its tasks, as Kafka Connect puts it in every task config
    /// (`task.class`).
    pub task_class: &'static str,
    pub create: fn() -> Box<dyn Connector>,
}

impl ConnectorPlugin {
    pub fn matches(&self, name: &str) -> bool {
        self.class == name || self.aliases.contains(&name)
    }
}

impl std::fmt::Debug for ConnectorPlugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConnectorPlugin").field("class", &self.class).field("kind", &self.kind).finish()
    }
}
