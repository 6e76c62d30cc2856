//! The Kafka log: [`Log`] over a Kafka cluster with librdkafka (rdkafka).
//!
//! ```text
//!  append ──▶ idempotent producer (send in call order) ──▶ delivery reports ──▶ ack chain ──▶ offsets
//!  read   ──▶ reader per partition (assign at offset, poll) ─────────────────────────────▶ records
//!  offsets ─▶ ListOffsets (watermarks)          topics ─▶ admin client (CreateTopics, metadata, configs)
//!  groups ──▶ a group.id consumer per group that never joins: OffsetCommit / OffsetFetch; DeleteGroups
//!  transactional ─▶ a transactional producer per exactly-once source task (`transaction`)
//! ```
//!
//! # Append
//!
//! Records go to librdkafka's queue synchronously, in call order, each to the partition it
//! names. The producer is idempotent with Connect's source-task settings (`acks=all`,
//! `enable.idempotence=true`, `max.in.flight.requests.per.connection=5`, a delivery
//! timeout of 120 s), so the broker keeps the order of each partition across retries. A
//! call's future resolves when every delivery report of its batch is in; futures resolve in
//! call order ([`AckChain`]). Acknowledged means written to every in-sync replica, which is
//! what "durable" means for Kafka. When librdkafka's queue is full (`queue.buffering.max.*`)
//! `append` blocks its thread until there is room, up to the delivery timeout.
//!
//! # Read
//!
//! One consumer per partition being read, assigned at the requested offset (no group, no
//! auto commit, `auto.offset.reset=error` so a position below the start is reported as
//! [`LogError::OffsetOutOfRange`]). Data topics are read `read_uncommitted` unless the
//! consumer settings (`consumer.isolation.level`, `consumer.override.isolation.level`) say
//! otherwise, as Connect's sink consumers are — `read_committed` on a worker with
//! `exactly.once.source.support=enabled` ([`KafkaOptions::default_isolation`]); the worker's own topics
//! ([`KafkaOptions::read_committed_topics`]) always `read_committed`. Transaction markers and
//! aborted records take offsets no record is read at: a read that reaches them returns what
//! it has (see `Reader::caught_up`). Consecutive reads continue where the previous one
//! stopped; a read from inside the batch the previous read returned (a caller that took
//! only part of it) is served from that batch; a read at any other offset re-assigns. At most `max_readers` readers are kept;
//! the least recently used idle one is closed to make room. A read that finds nothing
//! waits up to `max_wait`, then asks the broker for the end of the partition: if records
//! exist past the offset (they are in flight to the reader), it keeps waiting for them up
//! to the request timeout. Reads see what the broker's high watermark exposes: acknowledged
//! records only.
//!
//! # Errors
//!
//! Transport failures, timeouts and leader changes are [`LogError::Unavailable`]
//! (retriable); anything else the cluster refuses is [`LogError::Rejected`].

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic as CreateTopic, ResourceSpecifier, TopicReplication};
use rdkafka::config::{ClientConfig, RDKafkaLogLevel};
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer, ConsumerContext};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Header, Headers, Message, OwnedHeaders};
use rdkafka::metadata::Metadata;
use rdkafka::producer::{FutureProducer, FutureRecord, Producer};
use rdkafka::{ClientContext, Offset, TopicPartitionList};
use sluice_api::{Props, TopicPartition};

use super::{
    AckChain, AppendFuture, CleanupPolicy, ClientOverrides, Log, LogError, LogRecord, LogResult, NewTopic, PartitionDescription, Produce,
    StoredRecord, TopicConfig, TopicDescription, Transactional,
};

pub mod settings;
pub mod transaction;

use settings::{ClientSettings, Setting};

/// Partitions of topics created because something wrote to or read from them.
pub const DEFAULT_PARTITIONS: i32 = 1;
/// `-1`: the broker's `default.replication.factor`.
pub const DEFAULT_REPLICATION_FACTOR: i32 = -1;
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
pub const DEFAULT_MAX_READERS: usize = 128;
/// Connect's `delivery.timeout.ms` default for source producers.
const DEFAULT_DELIVERY_TIMEOUT_MS: &str = "120000";
/// Prefetch per reader; librdkafka's default (64 MB) is too much with a reader per partition.
const READER_QUEUE_KBYTES: &str = "16384";
/// How long one poll of a waiting read blocks before looking at the clock again.
const POLL_SLICE: Duration = Duration::from_millis(50);
/// The group.id of readers, which never join it nor commit to it.
const READER_GROUP: &str = "sluice-log-reader";
const INTERNAL_TOPICS: &[&str] = &["__consumer_offsets", "__transaction_state"];

#[derive(Debug, Clone)]
pub struct KafkaOptions {
    pub clients: ClientSettings,
    /// Partitions of auto-created topics.
    pub default_partitions: i32,
    /// Replication factor of the topics this log creates (`-1`: the broker's default).
    pub replication_factor: i32,
    /// Admin, metadata and group requests; also how long a read waits for records it
    /// knows exist.
    pub request_timeout: Duration,
    /// Partition readers kept open at once.
    pub max_readers: usize,
    /// Topics always read `read_committed` (the worker's own topics, which exactly-once
    /// source tasks write in transactions). Other topics are read with the consumer
    /// settings' `isolation.level`, `read_uncommitted` when unset (Kafka's and Connect's
    /// default for sink consumers; librdkafka's own default is `read_committed`).
    pub read_committed_topics: BTreeSet<String>,
    /// `isolation.level` of readers whose consumer settings do not set one:
    /// `read_uncommitted` (Connect's sink consumers), or `read_committed` on a worker with
    /// `exactly.once.source.support=enabled`, whose sinks then see only what its
    /// exactly-once sources committed.
    pub default_isolation: &'static str,
}

impl KafkaOptions {
    /// Client settings from the worker properties (`bootstrap.servers`, security keys,
    /// `producer.*`, `consumer.*`, `admin.*`); the rest at their defaults.
    pub fn from_worker_props(props: &Props) -> LogResult<Self> {
        let clients = settings::from_worker_props(props)?;
        if !clients.admin.contains_key("bootstrap.servers") {
            return Err(LogError::Invalid("the Kafka log needs bootstrap.servers".into()));
        }
        Ok(Self {
            clients,
            default_partitions: DEFAULT_PARTITIONS,
            replication_factor: DEFAULT_REPLICATION_FACTOR,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            max_readers: DEFAULT_MAX_READERS,
            read_committed_topics: BTreeSet::new(),
            default_isolation: match props.get("exactly.once.source.support").map(|v| v.trim().to_ascii_lowercase()).as_deref() {
                Some("enabled") => "read_committed",
                _ => "read_uncommitted",
            },
        })
    }

    /// The same, reading these topics `read_committed` whatever the consumer settings say.
    pub fn with_read_committed_topics(self, topics: impl IntoIterator<Item = String>) -> Self {
        Self { read_committed_topics: topics.into_iter().collect(), ..self }
    }
}

/// Forwards librdkafka's log lines and client errors to `tracing`.
#[derive(Clone, Default)]
pub struct ClientLog;

impl ClientContext for ClientLog {
    fn log(&self, level: RDKafkaLogLevel, fac: &str, message: &str) {
        match level {
            RDKafkaLogLevel::Emerg | RDKafkaLogLevel::Alert | RDKafkaLogLevel::Critical | RDKafkaLogLevel::Error => {
                tracing::error!(target: "librdkafka", facility = fac, "{message}")
            }
            RDKafkaLogLevel::Warning => tracing::warn!(target: "librdkafka", facility = fac, "{message}"),
            RDKafkaLogLevel::Notice | RDKafkaLogLevel::Info => tracing::info!(target: "librdkafka", facility = fac, "{message}"),
            RDKafkaLogLevel::Debug => tracing::debug!(target: "librdkafka", facility = fac, "{message}"),
        }
    }

    fn error(&self, error: KafkaError, reason: &str) {
        tracing::warn!(target: "librdkafka", error = %error, "kafka client: {reason}");
    }
}

impl ConsumerContext for ClientLog {}

type Consumer_ = BaseConsumer<ClientLog>;

pub struct KafkaLog {
    inner: Arc<Inner>,
    acks: AckChain,
}

struct Inner {
    options: KafkaOptions,
    producer: FutureProducer<ClientLog>,
    admin: AdminClient<ClientLog>,
    readers: Mutex<HashMap<TopicPartition, ReaderSlot>>,
    groups: Mutex<HashMap<String, Arc<Consumer_>>>,
}

struct ReaderSlot {
    reader: Arc<tokio::sync::Mutex<Reader>>,
    last_used: Instant,
}

impl std::fmt::Debug for KafkaLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let servers = self.inner.options.clients.admin.get("bootstrap.servers").map(|s| s.value.as_str()).unwrap_or("");
        f.debug_struct("KafkaLog").field("bootstrap.servers", &servers).finish_non_exhaustive()
    }
}

impl KafkaLog {
    /// Creates the clients. librdkafka connects lazily: an unreachable cluster shows up
    /// as [`LogError::Unavailable`] on first use, not here.
    pub fn connect(options: KafkaOptions) -> LogResult<Self> {
        let producer = client_config(
            &options.clients.producer,
            &[
                ("enable.idempotence", "true"),
                ("acks", "all"),
                ("max.in.flight.requests.per.connection", "5"),
                ("message.timeout.ms", DEFAULT_DELIVERY_TIMEOUT_MS),
            ],
        )
        .create_with_context(ClientLog)
        .map_err(|e| config_error(&options.clients.producer, "producer", e))?;
        // Metadata requests must not create the topics they ask about.
        let admin = client_config(&options.clients.admin, &[])
            .set("allow.auto.create.topics", "false")
            .clone()
            .create_with_context(ClientLog)
            .map_err(|e| config_error(&options.clients.admin, "admin client", e))?;
        // Fail on a bad consumer setting now rather than at the first read.
        reader_config(&options, "")
            .create_with_context::<_, Consumer_>(ClientLog)
            .map_err(|e| config_error(&options.clients.consumer, "consumer", e))?;
        let inner = Inner { options, producer, admin, readers: Mutex::new(HashMap::new()), groups: Mutex::new(HashMap::new()) };
        Ok(Self { inner: Arc::new(inner), acks: AckChain::default() })
    }

    /// The cluster id the brokers report (`None` when the cluster does not answer or has
    /// none).
    pub async fn cluster_id(&self) -> Option<String> {
        self.blocking(|inner| Ok(inner.admin.inner().fetch_cluster_id(inner.options.request_timeout))).await.ok().flatten()
    }

    /// Waits until every appended record has a delivery report (or `timeout` passes).
    pub fn flush(&self, timeout: Duration) -> LogResult<()> {
        self.inner.producer.flush(timeout).map_err(|e| kafka_error("flushing the producer", e))
    }

    async fn blocking<T: Send + 'static>(&self, f: impl FnOnce(&Inner) -> LogResult<T> + Send + 'static) -> LogResult<T> {
        let inner = Arc::clone(&self.inner);
        tokio::task::spawn_blocking(move || f(&inner)).await.map_err(|_| LogError::Closed)?
    }
}

fn client_config(settings: &BTreeMap<String, Setting>, defaults: &[(&str, &str)]) -> ClientConfig {
    let mut c = ClientConfig::new();
    for (k, v) in defaults {
        c.set(*k, *v);
    }
    for (k, s) in settings {
        c.set(k, &s.value);
    }
    c
}

fn reader_config(options: &KafkaOptions, topic: &str) -> ClientConfig {
    let mut c = client_config(
        &options.clients.consumer,
        &[("queued.max.messages.kbytes", READER_QUEUE_KBYTES), ("isolation.level", options.default_isolation)],
    );
    if options.read_committed_topics.contains(topic) {
        c.set("isolation.level", "read_committed");
    }
    // The runtime owns positions and commits: not overridable.
    c.set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("auto.offset.reset", "error")
        .set("enable.partition.eof", "false");
    // librdkafka wants a group to assign partitions; readers never join or commit it.
    c.set("group.id", READER_GROUP);
    c
}

fn config_error(settings: &BTreeMap<String, Setting>, client: &str, e: KafkaError) -> LogError {
    match &e {
        KafkaError::ClientConfig(_, description, key, _) => {
            let origin = settings.get(key).map(|s| s.origin.clone()).unwrap_or_else(|| key.clone());
            LogError::Invalid(format!(
                "{} is not accepted by the Kafka {client} (librdkafka key {key}): {description}",
                settings::origin_label(&origin)
            ))
        }
        _ => LogError::Rejected { context: format!("cannot create the Kafka {client}"), source: Box::new(e) },
    }
}

/// Whether an error code is worth retrying as it is.
fn retriable_code(code: RDKafkaErrorCode) -> bool {
    use RDKafkaErrorCode::*;
    matches!(
        code,
        BrokerTransportFailure
            | Resolve
            | MessageTimedOut
            | AllBrokersDown
            | OperationTimedOut
            | QueueFull
            | RequestTimedOut
            | NetworkException
            | LeaderNotAvailable
            | NotLeaderForPartition
            | BrokerNotAvailable
            | CoordinatorNotAvailable
            | NotCoordinator
            | CoordinatorLoadInProgress
            | NotEnoughReplicas
            | NotEnoughReplicasAfterAppend
            | KafkaStorageError
            | PreferredLeaderNotAvailable
            | RebalanceInProgress
            | FencedLeaderEpoch
            | UnknownLeaderEpoch
            | OffsetNotAvailable
            | ThrottlingQuotaExceeded
    )
}

fn kafka_error(context: impl Into<String>, e: KafkaError) -> LogError {
    let context = context.into();
    let retriable = match e.rdkafka_error_code() {
        Some(code) => retriable_code(code),
        None => matches!(e, KafkaError::Canceled),
    };
    if retriable {
        LogError::Unavailable { context, source: Box::new(e) }
    } else {
        LogError::Rejected { context, source: Box::new(e) }
    }
}

fn code_error(context: impl Into<String>, code: RDKafkaErrorCode) -> LogError {
    kafka_error(context, KafkaError::AdminOp(code))
}

fn timed_out(context: impl Into<String>) -> LogError {
    code_error(context, RDKafkaErrorCode::OperationTimedOut)
}

impl Inner {
    fn admin_options(&self) -> AdminOptions {
        AdminOptions::new().request_timeout(Some(self.options.request_timeout)).operation_timeout(Some(self.options.request_timeout))
    }

    fn metadata(&self, topic: Option<&str>) -> LogResult<Metadata> {
        let what = topic.map_or_else(|| "all topics".to_owned(), |t| format!("topic {t}"));
        self.admin
            .inner()
            .fetch_metadata(topic, self.options.request_timeout)
            .map_err(|e| kafka_error(format!("fetching the metadata of {what}"), e))
    }

    /// Partition count of `topic`, `None` when it does not exist.
    fn partitions_of(&self, topic: &str) -> LogResult<Option<i32>> {
        let md = self.metadata(Some(topic))?;
        let Some(t) = md.topics().iter().find(|t| t.name() == topic) else { return Ok(None) };
        match t.error().map(RDKafkaErrorCode::from) {
            None if !t.partitions().is_empty() => Ok(Some(t.partitions().len() as i32)),
            None | Some(RDKafkaErrorCode::UnknownTopicOrPartition) => Ok(None),
            Some(code) => Err(code_error(format!("fetching the metadata of topic {topic}"), code)),
        }
    }

    /// Waits until the metadata shows `topic` (a created topic takes a moment to appear).
    fn await_topic(&self, topic: &str) -> LogResult<i32> {
        let deadline = Instant::now() + self.options.request_timeout;
        loop {
            if let Some(n) = self.partitions_of(topic)? {
                return Ok(n);
            }
            if Instant::now() >= deadline {
                return Err(timed_out(format!("topic {topic} was created but did not appear in the metadata")));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn watermarks(&self, tp: &TopicPartition) -> LogResult<(i64, i64)> {
        self.admin.inner().fetch_watermarks(&tp.topic, tp.partition, self.options.request_timeout).map_err(|e| {
            match e.rdkafka_error_code() {
                Some(RDKafkaErrorCode::UnknownTopicOrPartition | RDKafkaErrorCode::UnknownTopic) => {
                    LogError::UnknownTopic(tp.topic.clone())
                }
                Some(RDKafkaErrorCode::UnknownPartition) => {
                    LogError::UnknownPartition { topic: tp.topic.clone(), partition: tp.partition, count: -1 }
                }
                _ => kafka_error(format!("fetching the offsets of {tp}"), e),
            }
        })
    }

    fn group_consumer(&self, group: &str) -> LogResult<Arc<Consumer_>> {
        let mut groups = self.groups.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(c) = groups.get(group) {
            return Ok(Arc::clone(c));
        }
        let mut config = client_config(&self.options.clients.consumer, &[]);
        config.set("group.id", group).set("enable.auto.commit", "false").set("enable.auto.offset.store", "false");
        let consumer: Consumer_ =
            config.create_with_context(ClientLog).map_err(|e| config_error(&self.options.clients.consumer, "consumer", e))?;
        let consumer = Arc::new(consumer);
        groups.insert(group.to_owned(), Arc::clone(&consumer));
        Ok(consumer)
    }

    /// The reader of `tp`, created when missing; closes the least recently used idle
    /// reader when `max_readers` are open.
    fn reader(&self, tp: &TopicPartition) -> LogResult<Arc<tokio::sync::Mutex<Reader>>> {
        let mut readers = self.readers.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(slot) = readers.get_mut(tp) {
            slot.last_used = Instant::now();
            return Ok(Arc::clone(&slot.reader));
        }
        if readers.len() >= self.options.max_readers {
            let idle = readers
                .iter()
                .filter(|(_, s)| Arc::strong_count(&s.reader) == 1)
                .min_by_key(|(_, s)| s.last_used)
                .map(|(tp, _)| tp.clone());
            if let Some(idle) = idle {
                readers.remove(&idle);
            }
        }
        let consumer: Consumer_ = reader_config(&self.options, &tp.topic)
            .create_with_context(ClientLog)
            .map_err(|e| config_error(&self.options.clients.consumer, "consumer", e))?;
        let reader = Arc::new(tokio::sync::Mutex::new(Reader { tp: tp.clone(), consumer, position: None, window: Vec::new() }));
        readers.insert(tp.clone(), ReaderSlot { reader: Arc::clone(&reader), last_used: Instant::now() });
        Ok(reader)
    }

    async fn topic_config(&self, name: &str) -> LogResult<TopicConfig> {
        let spec = ResourceSpecifier::Topic(name);
        let results = self.admin.describe_configs([&spec], &self.admin_options()).await;
        let results = results.map_err(|e| kafka_error(format!("describing the configuration of topic {name}"), e))?;
        let resource = results
            .into_iter()
            .next()
            .ok_or_else(|| timed_out(format!("no configuration returned for topic {name}")))?
            .map_err(|code| code_error(format!("describing the configuration of topic {name}"), code))?;
        let get = |k: &str| resource.get(k).and_then(|e| e.value.clone());
        let limit = |k: &str| get(k).and_then(|v| v.parse::<i64>().ok()).filter(|v| *v >= 0);
        Ok(TopicConfig {
            partitions: 0,
            cleanup: if get("cleanup.policy").is_some_and(|p| p.contains("compact")) {
                CleanupPolicy::Compact
            } else {
                CleanupPolicy::Delete
            },
            retention_ms: limit("retention.ms"),
            retention_bytes: limit("retention.bytes"),
            replication_factor: None,
        })
    }
}

impl Reader {
    /// Whether nothing more can come before `end` (the high watermark) for this reader: the
    /// offsets left hold transaction markers (which take an offset but reach no reader),
    /// records of aborted transactions, or, for a `read_committed` reader, records of
    /// transactions still open (past the last stable offset, which the reader's own
    /// ListOffsets answers). librdkafka moves the position past markers and aborted
    /// records as it polls them.
    fn caught_up(&self, inner: &Inner, end: i64) -> bool {
        if self.position_at(end) {
            return true;
        }
        let Some(position) = self.consumer_position() else { return false };
        match self.consumer.fetch_watermarks(&self.tp.topic, self.tp.partition, inner.options.request_timeout) {
            Ok((_, stable)) => position >= stable,
            Err(_) => false,
        }
    }

    /// Whether librdkafka's position (past markers and aborted records it skipped) is at
    /// `end` or beyond.
    fn position_at(&self, end: i64) -> bool {
        self.consumer_position().is_some_and(|p| p >= end)
    }

    fn consumer_position(&self) -> Option<i64> {
        let positions = self.consumer.position().ok()?;
        match positions.find_partition(&self.tp.topic, self.tp.partition)?.offset() {
            Offset::Offset(p) => Some(p),
            _ => None,
        }
    }
}

/// One partition's consumer and where it stands.
struct Reader {
    tp: TopicPartition,
    consumer: Consumer_,
    /// The offset the next record handed out must be at or after; `None` before the first
    /// assignment and after an error.
    position: Option<i64>,
    /// The records the last read handed out (all below `position`). A caller that takes
    /// only part of a batch (the sink loop caps records per put) asks again from inside
    /// it; serving that from here avoids re-assigning and re-fetching.
    window: Vec<StoredRecord>,
}

impl Reader {
    fn assign(&mut self, offset: i64) -> LogResult<()> {
        let mut tpl = TopicPartitionList::with_capacity(1);
        tpl.add_partition_offset(&self.tp.topic, self.tp.partition, Offset::Offset(offset))
            .map_err(|e| kafka_error(format!("positioning the reader of {}", self.tp), e))?;
        self.consumer.assign(&tpl).map_err(|e| kafka_error(format!("assigning {} to its reader", self.tp), e))?;
        self.position = Some(offset);
        Ok(())
    }

    /// See [`Log::read`] and the module docs.
    fn read(&mut self, inner: &Inner, offset: i64, max_bytes: usize, max_wait: Duration) -> LogResult<Vec<StoredRecord>> {
        if let (Some(first), Some(position)) = (self.window.first(), self.position) {
            if first.offset <= offset && offset < position {
                let mut bytes = 0;
                let from = self.window.partition_point(|r| r.offset < offset);
                let out: Vec<StoredRecord> = self.window[from..]
                    .iter()
                    .take_while(|r| {
                        let take = bytes < max_bytes;
                        bytes += r.record.size();
                        take
                    })
                    .cloned()
                    .collect();
                if !out.is_empty() {
                    return Ok(out);
                }
            }
        }
        self.window.clear();
        if self.position != Some(offset) {
            self.assign(offset)?;
        }
        let out = self.poll_records(inner, offset, max_bytes, max_wait)?;
        self.window.clone_from(&out);
        Ok(out)
    }

    fn poll_records(&mut self, inner: &Inner, offset: i64, max_bytes: usize, max_wait: Duration) -> LogResult<Vec<StoredRecord>> {
        let start = Instant::now();
        let soft = start + max_wait;
        let hard = start + max_wait.max(inner.options.request_timeout);
        let mut out = Vec::new();
        let mut bytes = 0;
        let mut checked_end = false;
        let mut end_seen = i64::MAX;
        loop {
            let now = Instant::now();
            let timeout = if !out.is_empty() {
                Duration::ZERO
            } else if now < soft {
                (soft - now).min(POLL_SLICE)
            } else if checked_end {
                POLL_SLICE.min(hard.saturating_duration_since(now))
            } else {
                Duration::ZERO
            };
            match self.consumer.poll(timeout) {
                Some(Ok(m)) => {
                    if m.offset() < offset {
                        continue; // left over from an earlier assignment
                    }
                    let record = LogRecord {
                        key: m.key().map(<[u8]>::to_vec),
                        value: m.payload().map(<[u8]>::to_vec),
                        timestamp: m.timestamp().to_millis().unwrap_or(0),
                        headers: m
                            .headers()
                            .map(|h| h.iter().map(|h| (h.key.to_owned(), h.value.map(<[u8]>::to_vec))).collect())
                            .unwrap_or_default(),
                    };
                    bytes += record.size();
                    self.position = Some(m.offset() + 1);
                    out.push(StoredRecord { offset: m.offset(), record });
                    if bytes >= max_bytes {
                        return Ok(out);
                    }
                }
                Some(Err(e)) => {
                    if e.rdkafka_error_code() == Some(RDKafkaErrorCode::OffsetOutOfRange) {
                        self.position = None;
                        let (start, end) = inner.watermarks(&self.tp)?;
                        return Err(LogError::OffsetOutOfRange { tp: self.tp.clone(), offset, start, end });
                    }
                    if !out.is_empty() {
                        return Ok(out);
                    }
                    if Instant::now() >= hard {
                        self.position = None;
                        return Err(kafka_error(format!("reading {} from offset {offset}", self.tp), e));
                    }
                    tracing::debug!(tp = %self.tp, error = %e, "kafka reader: transient error, still waiting");
                }
                None if !out.is_empty() => return Ok(out),
                None if now < soft => {}
                None if !checked_end => {
                    // Nothing within max_wait: done, unless records exist past `offset`.
                    let (mut start, mut end) = inner.watermarks(&self.tp)?;
                    if offset < start {
                        // Asked once more before giving up the position: a broker under load
                        // has been seen to answer a stale low watermark equal to the end.
                        std::thread::sleep(Duration::from_millis(200));
                        (start, end) = inner.watermarks(&self.tp)?;
                    }
                    if offset < start {
                        self.position = None;
                        return Err(LogError::OffsetOutOfRange { tp: self.tp.clone(), offset, start, end });
                    }
                    if end <= offset || self.caught_up(inner, end) {
                        return Ok(out);
                    }
                    end_seen = end;
                    checked_end = true;
                }
                None if Instant::now() >= hard && self.caught_up(inner, i64::MAX) => return Ok(out),
                None if Instant::now() >= hard => {
                    self.position = None;
                    return Err(timed_out(format!(
                        "records of {} from offset {offset} exist but none arrived within {:?}",
                        self.tp, inner.options.request_timeout
                    )));
                }
                None => {
                    if checked_end && self.position_at(end_seen) {
                        return Ok(out);
                    }
                }
            }
        }
    }
}

/// The producer record of `p`: its partition, timestamp, headers, key and value.
fn future_record(p: &Produce) -> FutureRecord<'_, [u8], [u8]> {
    let mut headers = OwnedHeaders::new_with_capacity(p.record.headers.len());
    for (key, value) in &p.record.headers {
        headers = headers.insert(Header { key, value: value.as_deref() });
    }
    let mut record = FutureRecord::<[u8], [u8]>::to(&p.topic).partition(p.partition).timestamp(p.record.timestamp).headers(headers);
    record.key = p.record.key.as_deref();
    record.payload = p.record.value.as_deref();
    record
}

#[async_trait]
impl Log for KafkaLog {
    async fn ensure_topic(&self, name: &str, config: TopicConfig) -> LogResult<()> {
        let n = name.to_owned();
        if self.blocking(move |inner| inner.partitions_of(&n)).await?.is_some() {
            return Ok(());
        }
        let inner = &self.inner;
        let retention_ms = config.retention_ms.unwrap_or(-1).to_string();
        let retention_bytes = config.retention_bytes.unwrap_or(-1).to_string();
        let topic = CreateTopic::new(
            name,
            config.partitions,
            TopicReplication::Fixed(config.replication_factor.unwrap_or(inner.options.replication_factor)),
        )
        .set("cleanup.policy", config.cleanup.name())
        .set("retention.ms", &retention_ms)
        .set("retention.bytes", &retention_bytes);
        let results = inner
            .admin
            .create_topics([&topic], &inner.admin_options())
            .await
            .map_err(|e| kafka_error(format!("creating topic {name}"), e))?;
        for r in results {
            match r {
                Ok(_) | Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {}
                Err((_, code)) => return Err(code_error(format!("creating topic {name}"), code)),
            }
        }
        let n = name.to_owned();
        self.blocking(move |inner| inner.await_topic(&n)).await.map(|_| ())
    }

    /// One CreateTopics request with exactly what `topic` sets; `-1` partitions or
    /// replication factor are sent as such (the broker's defaults, KIP-464).
    async fn create_topic(&self, topic: &NewTopic) -> LogResult<bool> {
        let name = topic.name.clone();
        if self.blocking(move |inner| inner.partitions_of(&name)).await?.is_some() {
            return Ok(false);
        }
        let inner = &self.inner;
        let mut request = CreateTopic::new(&topic.name, topic.partitions, TopicReplication::Fixed(topic.replication_factor));
        for (key, value) in &topic.configs {
            request = request.set(key, value);
        }
        let context = || {
            format!(
                "creating topic {} (partitions {}, replication factor {}, configs {:?})",
                topic.name, topic.partitions, topic.replication_factor, topic.configs
            )
        };
        let results = inner.admin.create_topics([&request], &inner.admin_options()).await.map_err(|e| kafka_error(context(), e))?;
        let mut created = true;
        for r in results {
            match r {
                Ok(_) => {}
                Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => created = false,
                Err((_, code)) => return Err(code_error(context(), code)),
            }
        }
        let name = topic.name.clone();
        self.blocking(move |inner| inner.await_topic(&name)).await?;
        Ok(created)
    }

    async fn list_topics(&self) -> LogResult<Vec<String>> {
        self.blocking(|inner| {
            let md = inner.metadata(None)?;
            let mut names: Vec<String> =
                md.topics().iter().map(|t| t.name().to_owned()).filter(|n| !INTERNAL_TOPICS.contains(&n.as_str())).collect();
            names.sort();
            Ok(names)
        })
        .await
    }

    async fn describe_topic(&self, name: &str) -> LogResult<Option<TopicDescription>> {
        let n = name.to_owned();
        let Some(count) = self.blocking(move |inner| inner.partitions_of(&n)).await? else { return Ok(None) };
        let mut config = self.inner.topic_config(name).await?;
        config.partitions = count;
        let n = name.to_owned();
        let partitions = self
            .blocking(move |inner| {
                (0..count)
                    .map(|p| {
                        let (start_offset, end_offset) = inner.watermarks(&TopicPartition::new(n.clone(), p))?;
                        // The broker does not tell clients how big a partition is on disk.
                        Ok(PartitionDescription { partition: p, start_offset, end_offset, size_bytes: 0 })
                    })
                    .collect::<LogResult<Vec<_>>>()
            })
            .await?;
        Ok(Some(TopicDescription { name: name.to_owned(), config, partitions }))
    }

    async fn partition_count(&self, topic: &str) -> LogResult<i32> {
        let t = topic.to_owned();
        if let Some(n) = self.blocking(move |inner| inner.partitions_of(&t)).await? {
            return Ok(n);
        }
        self.ensure_topic(topic, TopicConfig::new(self.inner.options.default_partitions)).await?;
        let t = topic.to_owned();
        self.blocking(move |inner| inner.await_topic(&t)).await
    }

    fn append(&self, records: Vec<Produce>) -> AppendFuture {
        let producer = &self.inner.producer;
        let mut deliveries = Vec::with_capacity(records.len());
        let mut failed = None;
        for p in &records {
            let mut record = future_record(p);
            let deadline = Instant::now() + Duration::from_millis(DEFAULT_DELIVERY_TIMEOUT_MS.parse().unwrap_or(120_000));
            loop {
                match producer.send_result(record) {
                    Ok(delivery) => {
                        deliveries.push(delivery);
                        break;
                    }
                    Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), r)) if Instant::now() < deadline => {
                        // Backpressure: librdkafka's queue is full; its own thread drains it.
                        record = r;
                        std::thread::sleep(Duration::from_millis(1));
                    }
                    Err((e, _)) => {
                        failed = Some(kafka_error(format!("producing to {} partition {}", p.topic, p.partition), e));
                        break;
                    }
                }
            }
            if failed.is_some() {
                break;
            }
        }
        self.acks.chain(async move {
            if let Some(e) = failed {
                return Err(e);
            }
            let mut offsets = Vec::with_capacity(deliveries.len());
            for (d, p) in deliveries.into_iter().zip(&records) {
                match d.await {
                    Ok(Ok(delivery)) => offsets.push(delivery.offset),
                    Ok(Err((e, _))) => return Err(kafka_error(format!("producing to {} partition {}", p.topic, p.partition), e)),
                    Err(_) => return Err(LogError::Closed),
                }
            }
            Ok(offsets)
        })
    }

    async fn read(&self, tp: &TopicPartition, offset: i64, max_bytes: usize, max_wait: Duration) -> LogResult<Vec<StoredRecord>> {
        let t = tp.clone();
        let reader = self.blocking(move |inner| inner.reader(&t)).await?;
        let mut reader = reader.lock_owned().await;
        self.blocking(move |inner| reader.read(inner, offset, max_bytes, max_wait)).await
    }

    async fn offsets(&self, tp: &TopicPartition) -> LogResult<(i64, i64)> {
        let tp = tp.clone();
        self.blocking(move |inner| inner.watermarks(&tp)).await
    }

    async fn commit_group(&self, group: &str, offsets: &BTreeMap<TopicPartition, i64>) -> LogResult<()> {
        if offsets.is_empty() {
            return Ok(());
        }
        let group = group.to_owned();
        let offsets = offsets.clone();
        self.blocking(move |inner| {
            let consumer = inner.group_consumer(&group)?;
            let mut tpl = TopicPartitionList::with_capacity(offsets.len());
            for (tp, o) in &offsets {
                tpl.add_partition_offset(&tp.topic, tp.partition, Offset::Offset(*o))
                    .map_err(|e| kafka_error(format!("committing offsets of group {group}"), e))?;
            }
            consumer.commit(&tpl, CommitMode::Sync).map_err(|e| kafka_error(format!("committing offsets of group {group}"), e))
        })
        .await
    }

    async fn group_offsets(&self, group: &str) -> LogResult<BTreeMap<TopicPartition, i64>> {
        let group = group.to_owned();
        self.blocking(move |inner| {
            // OffsetFetch for every partition of the cluster: librdkafka's consumer has no
            // "all partitions of the group" form.
            let md = inner.metadata(None)?;
            let mut tpl = TopicPartitionList::new();
            for t in md.topics().iter().filter(|t| !INTERNAL_TOPICS.contains(&t.name())) {
                for p in t.partitions() {
                    tpl.add_partition(t.name(), p.id());
                }
            }
            if tpl.count() == 0 {
                return Ok(BTreeMap::new());
            }
            let consumer = inner.group_consumer(&group)?;
            let committed = consumer
                .committed_offsets(tpl, inner.options.request_timeout)
                .map_err(|e| kafka_error(format!("fetching the offsets of group {group}"), e))?;
            Ok(committed
                .elements()
                .iter()
                .filter_map(|e| match e.offset() {
                    Offset::Offset(o) if e.error().is_ok() => Some((TopicPartition::new(e.topic(), e.partition()), o)),
                    _ => None,
                })
                .collect())
        })
        .await
    }

    /// A second set of clients (producer, admin, readers, group consumers) with the
    /// overrides laid over this log's settings; only when they change a setting, so tasks
    /// without overrides share this log's clients.
    fn with_client_overrides(&self, overrides: &ClientOverrides) -> LogResult<Option<Arc<dyn Log>>> {
        let clients = settings::with_overrides(&self.inner.options.clients, overrides)?;
        if clients == self.inner.options.clients {
            return Ok(None);
        }
        let options = KafkaOptions { clients, ..self.inner.options.clone() };
        Ok(Some(Arc::new(KafkaLog::connect(options)?)))
    }

    fn transactional(&self, transactional_id: &str) -> LogResult<Option<Box<dyn Transactional>>> {
        Ok(Some(Box::new(transaction::KafkaTransactional::new(&self.inner.options, transactional_id)?)))
    }

    async fn delete_group(&self, group: &str) -> LogResult<()> {
        self.inner.groups.lock().unwrap_or_else(|p| p.into_inner()).remove(group);
        let results = self
            .inner
            .admin
            .delete_groups(&[group], &self.inner.admin_options())
            .await
            .map_err(|e| kafka_error(format!("deleting group {group}"), e))?;
        for r in results {
            match r {
                Ok(_) | Err((_, RDKafkaErrorCode::GroupIdNotFound)) => {}
                Err((_, code)) => return Err(code_error(format!("deleting group {group}"), code)),
            }
        }
        Ok(())
    }
}
