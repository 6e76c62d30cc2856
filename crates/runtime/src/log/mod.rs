//! The log: topics with partitions, append and read by offset, committed offsets per
//! consumer group. Everything the runtime writes or reads goes through [`Log`], so the
//! embedded log ([`embedded::EmbeddedLog`]) and Kafka are interchangeable behind it.
//!
//! Delivery contract of [`Log::append`]:
//! - records are enqueued in call order and keep that order within each partition;
//! - the returned future resolves once every record of the batch is durable under the
//!   log's durability policy, and futures of successive calls resolve in call order;
//! - a failed batch fails as a whole: none of its records is acknowledged.
//!
//! A record becomes visible to [`Log::read`] only once it is durable.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use sluice_api::{ConnectError, TopicPartition};

mod ack_chain;
pub mod embedded;
#[cfg(feature = "kafka")]
pub mod kafka;
pub mod split;

pub use crate::worker::overrides::ClientOverrides;
pub(crate) use ack_chain::AckChain;

pub type LogResult<T> = Result<T, LogError>;
pub type AppendFuture = Pin<Box<dyn Future<Output = LogResult<Vec<i64>>> + Send + 'static>>;

#[derive(Debug, thiserror::Error)]
pub enum LogError {
    #[error("i/o error on the log at {path}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("topic {0} does not exist")]
    UnknownTopic(String),
    #[error("partition {partition} of topic {topic} does not exist (the topic has {count})")]
    UnknownPartition { topic: String, partition: i32, count: i32 },
    #[error("offset {offset} is out of range for {tp} (valid: {start}..{end})")]
    OffsetOutOfRange { tp: TopicPartition, offset: i64, start: i64, end: i64 },
    #[error("the log is closed")]
    Closed,
    #[error("the log at {0} is opened read-only")]
    ReadOnly(String),
    #[error("the log at {0} is in use by another process (its LOCK file is held); stop that worker or open the log read-only")]
    Locked(String),
    #[error("{0}")]
    Invalid(String),
    /// The backing cluster did not answer or answered with a transient error (no broker
    /// reachable, timeouts, leader elections). The runtime retries.
    #[error("{context}: the Kafka cluster is unavailable; retrying")]
    Unavailable {
        context: String,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The backing cluster refused the request for good (authorization, invalid
    /// configuration, a record too large, a fatal idempotence error).
    #[error("{context}")]
    Rejected {
        context: String,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

impl From<LogError> for ConnectError {
    fn from(e: LogError) -> Self {
        match e {
            LogError::Io { .. } | LogError::Closed | LogError::Unavailable { .. } => {
                ConnectError::retriable_from("the log is unavailable", e)
            }
            other => ConnectError::fatal_from("log operation failed", other),
        }
    }
}

/// One record as stored: opaque key, value and header bytes.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LogRecord {
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
    /// Milliseconds since the Unix epoch.
    pub timestamp: i64,
    pub headers: Vec<(String, Option<Vec<u8>>)>,
}

impl LogRecord {
    /// Approximate bytes this record occupies, for byte budgets.
    pub fn size(&self) -> usize {
        32 + self.key.as_ref().map_or(0, Vec::len)
            + self.value.as_ref().map_or(0, Vec::len)
            + self.headers.iter().map(|(k, v)| k.len() + v.as_ref().map_or(0, Vec::len) + 8).sum::<usize>()
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredRecord {
    pub offset: i64,
    pub record: LogRecord,
}

/// A record to append.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Produce {
    pub topic: String,
    pub partition: i32,
    pub record: LogRecord,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CleanupPolicy {
    /// Drop whole old segments by `retention_ms` / `retention_bytes`.
    Delete,
    /// Keep at least the newest record of every key.
    Compact,
}

impl CleanupPolicy {
    pub fn name(self) -> &'static str {
        match self {
            Self::Delete => "delete",
            Self::Compact => "compact",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicConfig {
    pub partitions: i32,
    pub cleanup: CleanupPolicy,
    /// `None` keeps data forever (by time).
    pub retention_ms: Option<i64>,
    /// Per partition; `None` keeps data forever (by size).
    pub retention_bytes: Option<i64>,
    /// Copies of each partition when the topic is created in Kafka (`None` or `-1`: the
    /// log's default); the embedded log keeps one.
    pub replication_factor: Option<i32>,
}

impl TopicConfig {
    pub fn new(partitions: i32) -> Self {
        Self {
            partitions,
            cleanup: CleanupPolicy::Delete,
            retention_ms: Some(7 * 24 * 3600 * 1000),
            retention_bytes: None,
            replication_factor: None,
        }
    }

    pub fn compacted(partitions: i32) -> Self {
        Self { partitions, cleanup: CleanupPolicy::Compact, retention_ms: None, retention_bytes: None, replication_factor: None }
    }

    /// The same with this replication factor (`-1`: the log's default).
    pub fn replicated(self, factor: i32) -> Self {
        Self { replication_factor: (factor > 0).then_some(factor), ..self }
    }
}

/// A topic to create as Kafka's `CreateTopics` describes one: what source connectors ask
/// for through `topic.creation.*` (KIP-158) and what dead-letter topics are created with.
/// Unlike [`TopicConfig`] (the worker's own topics), every setting left out is the log's
/// default, as a broker applies its own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewTopic {
    pub name: String,
    /// `-1`: the log's default.
    pub partitions: i32,
    /// `-1`: the log's default. The embedded log keeps one copy whatever is asked.
    pub replication_factor: i32,
    /// Topic-level configs (`cleanup.policy`, `retention.ms`, `compression.type`, …) as
    /// given. Kafka gets them all; the embedded log applies those it has (see
    /// [`embedded::EmbeddedLog`]) and ignores the rest.
    pub configs: BTreeMap<String, String>,
}

impl NewTopic {
    pub fn new(name: impl Into<String>, partitions: i32, replication_factor: i32) -> Self {
        Self { name: name.into(), partitions, replication_factor, configs: BTreeMap::new() }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionDescription {
    pub partition: i32,
    /// First offset still stored.
    pub start_offset: i64,
    /// The offset the next record will get.
    pub end_offset: i64,
    pub size_bytes: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicDescription {
    pub name: String,
    pub config: TopicConfig,
    pub partitions: Vec<PartitionDescription>,
}

/// One figure a log reports about itself for `/metrics`.
#[derive(Debug, Clone, PartialEq)]
pub struct LogStat {
    pub name: &'static str,
    /// `counter` or `gauge`.
    pub kind: &'static str,
    pub help: &'static str,
    pub value: f64,
}

#[async_trait]
pub trait Log: Send + Sync + 'static {
    /// Figures about the log itself (the embedded log's size and fsyncs); none by default.
    fn stats(&self) -> Vec<LogStat> {
        Vec::new()
    }

    /// Creates the topic when missing. An existing topic keeps its configuration.
    async fn ensure_topic(&self, name: &str, config: TopicConfig) -> LogResult<()>;

    /// Creates `topic` unless a topic of its name exists (which then stays as it is).
    /// `Ok(true)` when this call created it. A request the log refuses (a replication
    /// factor the cluster cannot meet, an invalid topic config) is an error naming the topic.
    async fn create_topic(&self, topic: &NewTopic) -> LogResult<bool>;

    async fn list_topics(&self) -> LogResult<Vec<String>>;

    async fn describe_topic(&self, name: &str) -> LogResult<Option<TopicDescription>>;

    /// The number of partitions of `topic`, creating it with the default partition count
    /// when it does not exist (as a broker with auto-create does).
    async fn partition_count(&self, topic: &str) -> LogResult<i32>;

    /// Appends records; see the module docs for the ordering and durability contract.
    /// Resolves to the offset given to each record, in input order.
    fn append(&self, records: Vec<Produce>) -> AppendFuture;

    /// Records of `tp` from `offset` on, at most about `max_bytes` (at least one record
    /// when any is available). At the end of the partition, waits up to `max_wait` for new
    /// records and returns an empty batch if none came. An `offset` below the start of the
    /// partition is an error ([`LogError::OffsetOutOfRange`]); callers restart from the start.
    async fn read(&self, tp: &TopicPartition, offset: i64, max_bytes: usize, max_wait: Duration) -> LogResult<Vec<StoredRecord>>;

    /// `(start, end)`: the first stored offset and the offset of the next record.
    async fn offsets(&self, tp: &TopicPartition) -> LogResult<(i64, i64)>;

    /// Durably stores the next offset to read for each partition of a consumer group.
    async fn commit_group(&self, group: &str, offsets: &BTreeMap<TopicPartition, i64>) -> LogResult<()>;

    async fn group_offsets(&self, group: &str) -> LogResult<BTreeMap<TopicPartition, i64>>;

    /// Forgets a consumer group's committed offsets.
    async fn delete_group(&self, group: &str) -> LogResult<()>;

    /// A log for one connector's tasks whose Kafka clients carry the connector's client
    /// overrides (`producer.override.*`, …) on top of this log's settings, with clients of
    /// its own. `None` when there is nothing to override or overrides have no meaning for
    /// this log (the embedded log): then the tasks use this log as it is.
    fn with_client_overrides(&self, overrides: &ClientOverrides) -> LogResult<Option<Arc<dyn Log>>> {
        let _ = overrides;
        Ok(None)
    }

    /// A transactional producer with `transactional_id` on this log's producer settings, for
    /// one exactly-once source task. `None` when the log has no transactions (the embedded
    /// log, a split log).
    fn transactional(&self, transactional_id: &str) -> LogResult<Option<Box<dyn Transactional>>> {
        let _ = transactional_id;
        Ok(None)
    }
}

/// A producer that writes in transactions (Kafka's transactional producer). Its records,
/// whatever topics they go to, become visible to `read_committed` readers all at once when
/// [`Transactional::commit`] succeeds, and never when the transaction aborts or the process
/// dies first.
#[async_trait]
pub trait Transactional: Send + Sync {
    /// Registers the transactional id once, before the first transaction: an older producer
    /// with the same id is fenced (its later writes and commits fail) and its open
    /// transaction is aborted.
    async fn init(&self) -> LogResult<()>;

    fn begin(&self) -> LogResult<()>;

    /// Enqueues records in the open transaction, in order within each partition. A record
    /// that cannot be delivered fails [`Transactional::commit`].
    fn send(&self, records: &[Produce]) -> LogResult<()>;

    /// Delivers everything sent and commits. On error the transaction is not committed; call
    /// [`Transactional::abort`] (which may fail too when the producer was fenced).
    async fn commit(&self) -> LogResult<()>;

    async fn abort(&self) -> LogResult<()>;
}
