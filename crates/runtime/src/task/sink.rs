//! The sink task loop.
//!
//! ## Progress tracking
//! ```text
//!  positions (next offset per partition, from the group's committed offsets, else
//!             the start or the end of the partition as auto.offset.reset says)
//!  log.read ─▶ convert ─▶ transform ─▶ SinkTask::put ─▶ positions advance
//!  every offset.flush.interval.ms and on stop:
//!    SinkTask::pre_commit(positions) ─▶ durable offsets ─▶ log.commit_group(connect-NAME)
//! ```
//! The next batch is read and converted on another worker thread while `put` runs (a
//! read-ahead of one batch; it is dropped when a rewind or a new assignment makes it start
//! elsewhere than where the task is).
//!
//! A consumer-group offset moves only to what `pre_commit` reports durable in the
//! destination, and never backwards. A retriable `put` failure re-delivers the same records
//! after a backoff; nothing is skipped.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use sluice_api::{ConnectResult, SinkRecord, SinkTask, SinkTaskContext, TimestampType, TopicPartition};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::errant::{Fetched, SinkErrantReporter};
use super::errors::{ErrorPolicy, FailedRecord};
use super::{Backoff, RecordConverters, Stage, StateReporter, TaskState};
use crate::herder::{ConnectorTaskId, TargetState};
use crate::log::{Log, LogError, Produce, StoredRecord};
use crate::store::status::StatusStore;
use crate::transform::{TransformChain, TransformRecord};
use crate::worker::overrides::OffsetReset;

/// At most this many records go to one `put`.
pub const MAX_RECORDS_PER_PUT: usize = 5_000;
/// At most about this many bytes are read from one partition at a time.
pub const MAX_FETCH_BYTES: usize = 1 << 20;
/// A `put` gathers records up to about this many bytes (keys, values and headers as
/// stored), unless the task asks for another bound (`SinkTask::max_put_bytes`).
pub const MAX_PUT_BYTES: usize = 1 << 20;
/// The most a task may ask a put to carry.
const MAX_PUT_BYTES_LIMIT: usize = 16 << 20;
/// How often a `topics.regex` subscription looks for new topics and partitions.
const METADATA_REFRESH: Duration = Duration::from_secs(5);

/// Which topics a sink reads.
#[derive(Debug, Clone)]
pub enum Subscription {
    Topics(Vec<String>),
    /// A `topics.regex`, compiled anchored at both ends (Java's `matches()`).
    Pattern(regex::Regex),
}

impl Subscription {
    pub fn pattern(regex: &str) -> Result<Self, regex::Error> {
        regex::Regex::new(&format!("^(?:{regex})$")).map(Self::Pattern)
    }
}

pub struct SinkRunner {
    pub id: ConnectorTaskId,
    pub task: Box<dyn SinkTask>,
    pub ctx: SinkTaskContext,
    pub log: Arc<dyn Log>,
    pub converters: Arc<RecordConverters>,
    pub transforms: Arc<TransformChain>,
    pub errors: ErrorPolicy,
    pub status: Arc<StatusStore>,
    pub subscription: Subscription,
    /// Consumer group: `connect-<connector>`.
    pub group: String,
    pub task_count: u32,
    /// Where a partition without a committed offset (or whose offset is gone) starts.
    pub offset_reset: OffsetReset,
    pub commit_interval: Duration,
    pub target: watch::Receiver<TargetState>,
    pub state: StateReporter,
    /// Set from the task after it started (see [`MAX_PUT_BYTES`]).
    pub max_put_bytes: usize,
    /// `sluice.max.records.per.second`: waited out before the next fetch.
    pub rate: Option<super::rate::RateLimit>,
    /// Connect's sink-task metrics of this task.
    pub metrics: Arc<crate::metrics::TaskMetrics>,
}

/// The gauge of a sink task's lag per partition.
pub const LAG_FAMILY: &str = "sluice_sink_task_lag_records";

/// `sluice_sink_task_lag_records{topic,partition}`: the records of each assigned partition
/// past what the task's group has committed (a consumer group's lag, as Kafka's tools count
/// it), read at each offset commit.
async fn publish_lag(log: &Arc<dyn Log>, gauges: &sluice_api::TaskGauges, state: &Positions) {
    for (tp, next) in &state.next {
        let Ok((_, end)) = log.offsets(tp).await else { continue };
        let done = state.committed.get(tp).copied().unwrap_or(*next);
        let partition = tp.partition.to_string();
        gauges.set(
            LAG_FAMILY,
            "Records of the partition past the sink task's committed offset.",
            &[("topic", tp.topic.as_str()), ("partition", partition.as_str())],
            (end - done).max(0) as f64,
        );
    }
}

impl SinkRunner {
    pub async fn run(mut self, shutdown: CancellationToken) -> ConnectResult<()> {
        let class = self.ctx.props.get("task.class").or_else(|| self.ctx.props.get("connector.class")).cloned().unwrap_or_default();
        let reporter = Arc::new(SinkErrantReporter::new(self.id.clone(), class, self.errors.clone(), self.log.clone()));
        let mut backoff = Backoff::new();
        while let Err(e) = self.task.start(self.ctx.clone().with_reporter(reporter.clone())).await {
            if !super::start_failed(e, &mut self.state, &mut backoff, None, &shutdown).await? {
                return Ok(());
            }
        }
        self.state.running();
        self.max_put_bytes = self.task.max_put_bytes().unwrap_or(MAX_PUT_BYTES).clamp(1, MAX_PUT_BYTES_LIMIT);
        let mut state = Positions::default();
        let result = self.consume(&mut state, &reporter, &shutdown).await;
        if result.is_ok() {
            self.commit(&mut state).await;
        }
        let assigned: Vec<_> = state.next.keys().cloned().collect();
        if let Err(e) = self.task.close(&assigned).await {
            tracing::warn!(task = ?self.id, error = %e, "sink task close failed");
        }
        if let Err(e) = self.task.stop().await {
            tracing::warn!(task = ?self.id, error = %e, "sink task stop failed");
        }
        result
    }

    async fn consume(&mut self, state: &mut Positions, reporter: &SinkErrantReporter, shutdown: &CancellationToken) -> ConnectResult<()> {
        let mut last_commit = Instant::now();
        let mut last_refresh: Option<Instant> = None;
        let mut backoff = Backoff::new();
        let mut cursor = 0usize;
        let mut ahead: Option<ReadAhead> = None;
        loop {
            if shutdown.is_cancelled() {
                return Ok(());
            }
            if last_refresh.is_none_or(|t| t.elapsed() >= METADATA_REFRESH) {
                self.refresh_assignment(state).await?;
                last_refresh = Some(Instant::now());
            }
            for (tp, offset) in self.ctx.take_rewinds() {
                if state.next.contains_key(&tp) {
                    state.next.insert(tp, offset);
                }
            }
            if last_commit.elapsed() >= self.commit_interval {
                self.commit(state).await;
                publish_lag(&self.log, &self.metrics.gauges, state).await;
                last_commit = Instant::now();
            }
            if *self.target.borrow() != TargetState::Started {
                self.state.report(TaskState::Paused);
                tokio::select! {
                    _ = self.target.changed() => {}
                    _ = shutdown.cancelled() => return Ok(()),
                    _ = tokio::time::sleep(Duration::from_millis(500)) => {}
                }
                continue;
            }
            if self.state.is_paused() {
                self.state.running();
            }
            // The batch read ahead while the previous put ran, when it starts where this
            // task is now (no rewind, no new partitions since); else read it now.
            let ready = match ahead.take() {
                Some(a) => a.join().await.filter(|a| a.from == state.next),
                None => None,
            };
            let (fetched, converted, dead) = match ready {
                Some(a) => {
                    cursor = a.cursor;
                    (a.fetched, a.converted, a.dead)
                }
                None => {
                    let fetched: Fetched = Arc::new(self.reader().fetch(&mut state.next, &mut cursor).await?);
                    if fetched.is_empty() {
                        // Idle and well: a setback noted in the last commit shows now, and
                        // a held trace goes once it is old enough.
                        self.state.running();
                        continue;
                    }
                    let (converted, dead) = self.reader().convert(&fetched, true).await?;
                    (fetched, converted, dead)
                }
            };
            if fetched.is_empty() {
                continue;
            }
            reporter.set_current(fetched.clone());
            self.metrics.add(&self.metrics.sink_record_read, fetched.len() as u64);
            // A topic is active once records are read from it (as in Connect), and again
            // after a reset of the connector's active topics.
            let mut last_topic: Option<&str> = None;
            for (tp, _) in fetched.iter() {
                if last_topic != Some(tp.topic.as_str()) {
                    self.status.topic_used(&self.id.connector, &tp.topic, self.id.task);
                    last_topic = Some(tp.topic.as_str());
                }
            }
            if !dead.is_empty() {
                // Dead letters are durable before any offset can move past their records.
                self.log.append(dead).await.map_err(|e| Stage::Producer.fail("dead-letter records".to_owned(), e.into()))?;
            }
            // Read and convert the next batch while this one is put.
            let mut after = state.next.clone();
            for (tp, r) in fetched.iter() {
                after.insert(tp.clone(), r.offset + 1);
            }
            ahead = Some(ReadAhead::start(self.reader(), after, cursor));
            let mut converted = Some(converted);
            loop {
                // A redelivery converts again (conversion is deterministic); records that
                // failed were already reported the first time.
                let records = match converted.take() {
                    Some(r) => r,
                    None => self.reader().convert(&fetched, false).await?.0,
                };
                if records.is_empty() {
                    break;
                }
                let (count, began) = (records.len() as u64, std::time::Instant::now());
                match self.task.put(records).await {
                    Ok(()) => {
                        self.metrics.add(&self.metrics.sink_record_send, count);
                        self.metrics.batch(count, began.elapsed());
                        self.metrics.call(began.elapsed());
                        backoff.reset();
                        self.state.running();
                        if let Some(rate) = &mut self.rate {
                            if !rate.pace(count, shutdown).await {
                                return Ok(());
                            }
                        }
                        break;
                    }
                    Err(e) if e.is_retriable() => {
                        tracing::warn!(task = ?self.id, error = %e, "sink put failed; redelivering after backoff");
                        self.state.report(TaskState::Retrying(e.trace()));
                        if !backoff.wait(shutdown).await {
                            // Not put: positions stay where they are, nothing is committed past them.
                            return Ok(());
                        }
                    }
                    Err(e) => {
                        return Err(Stage::Task
                            .fail(format!("{} records starting at {} offset {}", fetched.len(), fetched[0].0, fetched[0].1.offset), e))
                    }
                }
            }
            for (tp, r) in fetched.iter() {
                state.next.insert(tp.clone(), r.offset + 1);
            }
        }
    }

    fn reader(&self) -> Reader {
        Reader {
            log: self.log.clone(),
            converters: self.converters.clone(),
            transforms: self.transforms.clone(),
            errors: self.errors.clone(),
            id: self.id.clone(),
            offset_reset: self.offset_reset,
            max_put_bytes: self.max_put_bytes,
        }
    }

    /// This task's share of the subscribed partitions: sorted, then every `task_count`-th.
    async fn refresh_assignment(&mut self, state: &mut Positions) -> ConnectResult<()> {
        let topics = match &self.subscription {
            Subscription::Topics(t) => t.clone(),
            Subscription::Pattern(p) => {
                let all = self.log.list_topics().await?;
                all.into_iter().filter(|t| p.is_match(t)).collect()
            }
        };
        let mut all = Vec::new();
        for t in &topics {
            for p in 0..self.log.partition_count(t).await? {
                all.push(TopicPartition::new(t.clone(), p));
            }
        }
        all.sort();
        let mine: Vec<_> =
            all.into_iter().enumerate().filter(|(i, _)| (*i as u32) % self.task_count.max(1) == self.id.task).map(|(_, tp)| tp).collect();
        self.metrics.partition_count.store(mine.len() as u64, std::sync::atomic::Ordering::Relaxed);
        let new: Vec<_> = mine.iter().filter(|tp| !state.next.contains_key(*tp)).cloned().collect();
        if new.is_empty() {
            return Ok(());
        }
        let committed = self.log.group_offsets(&self.group).await?;
        for tp in &new {
            let start = match committed.get(tp) {
                Some(o) => *o,
                None => {
                    let (start, end) = self.log.offsets(tp).await?;
                    match self.offset_reset {
                        OffsetReset::Earliest => start,
                        OffsetReset::Latest => end,
                        OffsetReset::None => {
                            return Err(sluice_api::ConnectError::config(
                                "auto.offset.reset",
                                format!("no committed offset for {tp} in group {} and auto.offset.reset is none", self.group),
                            ))
                        }
                    }
                }
            };
            state.next.insert(tp.clone(), start);
        }
        self.task.open(&new).await
    }

    /// Asks the task what is durable and commits that (forward only) to the group.
    async fn commit(&mut self, state: &mut Positions) {
        if state.next.is_empty() {
            return;
        }
        let durable = match self.task.pre_commit(&state.next).await {
            Ok(d) => d,
            Err(e) => {
                tracing::warn!(task = ?self.id, error = %e, "pre-commit failed; offsets not committed this time");
                return;
            }
        };
        let forward: BTreeMap<TopicPartition, i64> =
            durable.into_iter().filter(|(tp, o)| state.next.contains_key(tp) && state.committed.get(tp).is_none_or(|c| o > c)).collect();
        if forward.is_empty() {
            return;
        }
        match self.log.commit_group(&self.group, &forward).await {
            Ok(()) => {
                self.state.committed();
                self.metrics.add(&self.metrics.offset_commit_completion, 1);
                state.committed.extend(forward)
            }
            Err(e) => {
                self.metrics.add(&self.metrics.offset_commit_failure, 1);
                tracing::warn!(task = ?self.id, error = %e, "committing sink offsets failed; will retry")
            }
        }
    }
}

/// What a sink task reads with: cheap to clone into a read-ahead.
/// What a stored record weighs in a put: its key, value and header bytes.
fn stored_size(r: &crate::log::LogRecord) -> usize {
    r.key.as_ref().map_or(0, Vec::len)
        + r.value.as_ref().map_or(0, Vec::len)
        + r.headers.iter().map(|(k, v)| k.len() + v.as_ref().map_or(0, Vec::len)).sum::<usize>()
}

#[derive(Clone)]
struct Reader {
    log: Arc<dyn Log>,
    converters: Arc<RecordConverters>,
    transforms: Arc<TransformChain>,
    errors: ErrorPolicy,
    id: ConnectorTaskId,
    offset_reset: OffsetReset,
    max_put_bytes: usize,
}

impl Reader {
    /// Reads up to [`MAX_RECORDS_PER_PUT`] records or about `max_put_bytes`, visiting
    /// partitions round robin; waits briefly when all are at their end.
    async fn fetch(
        &self,
        next: &mut BTreeMap<TopicPartition, i64>,
        cursor: &mut usize,
    ) -> ConnectResult<Vec<(TopicPartition, StoredRecord)>> {
        let tps: Vec<TopicPartition> = next.keys().cloned().collect();
        if tps.is_empty() {
            tokio::time::sleep(Duration::from_millis(200)).await;
            return Ok(Vec::new());
        }
        let mut out = Vec::new();
        let mut bytes = 0usize;
        for i in 0..tps.len() {
            let tp = &tps[(*cursor + i) % tps.len()];
            let wait = if out.is_empty() && i + 1 == tps.len() { Duration::from_millis(200) } else { Duration::ZERO };
            let from = next[tp];
            match self.log.read(tp, from, MAX_FETCH_BYTES, wait).await {
                Ok(mut batch) => {
                    // Keep reading this partition while it has records at hand and the put
                    // has room.
                    while let Some(last) = batch.last().map(|r| r.offset) {
                        bytes += batch.iter().map(|r| stored_size(&r.record)).sum::<usize>();
                        out.extend(batch.into_iter().map(|r| (tp.clone(), r)));
                        if out.len() >= MAX_RECORDS_PER_PUT || bytes >= self.max_put_bytes {
                            break;
                        }
                        batch = match self.log.read(tp, last + 1, MAX_FETCH_BYTES, Duration::ZERO).await {
                            Ok(more) => more,
                            Err(_) => break, // the next fetch reads from there again and handles it
                        };
                    }
                }
                Err(LogError::OffsetOutOfRange { start, end, .. }) => {
                    let to = match self.offset_reset {
                        OffsetReset::Latest => end,
                        OffsetReset::Earliest => start,
                        OffsetReset::None => {
                            return Err(sluice_api::ConnectError::config(
                                "auto.offset.reset",
                                format!("offset {from} of {tp} is out of range ({start}..{end}) and auto.offset.reset is none"),
                            ))
                        }
                    };
                    tracing::warn!(task = ?self.id, %tp, from, to, "offset out of range; resetting as auto.offset.reset says");
                    next.insert(tp.clone(), to);
                }
                Err(e) => return Err(e.into()),
            }
            if out.len() >= MAX_RECORDS_PER_PUT || bytes >= self.max_put_bytes {
                break;
            }
        }
        out.truncate(MAX_RECORDS_PER_PUT);
        *cursor = (*cursor + 1) % tps.len();
        Ok(out)
    }

    /// Converts fetched records. A record that fails goes to the error policy: the task
    /// fails, or the record is skipped (and, with a dead-letter topic, returned as a dead
    /// letter). With `report` false, failures are skipped silently (a redelivery).
    async fn convert(&self, fetched: &[(TopicPartition, StoredRecord)], report: bool) -> ConnectResult<(Vec<SinkRecord>, Vec<Produce>)> {
        let (c, chain, errors, id) = (&*self.converters, &*self.transforms, &self.errors, &self.id);
        let mut out = Vec::with_capacity(fetched.len());
        let mut dead = Vec::new();
        for (tp, r) in fetched {
            let transformed = Self::convert_record(c, errors, tp, r).await.and_then(|record| {
                if chain.is_empty() {
                    return Ok(Some(record));
                }
                chain
                    .apply(TransformRecord::from(record))
                    .map(|t| t.map(TransformRecord::into_sink_record))
                    .map_err(|e| (Stage::Transformation, e))
            });
            match transformed {
                Ok(Some(record)) => out.push(record),
                // Dropped by a transform (a filter): handled, its offset counts.
                Ok(None) => {}
                Err((stage, err)) if report => {
                    let failed = FailedRecord {
                        connector: id.connector.clone(),
                        task: id.task,
                        stage,
                        class: c.class_of(stage),
                        position: format!("topic {} partition {} offset {}", tp.topic, tp.partition, r.offset),
                        original: Some((tp.topic.clone(), tp.partition, r.offset)),
                        key: r.record.key.clone(),
                        value: r.record.value.clone(),
                        headers: r.record.headers.clone(),
                        describe: r
                            .record
                            .value
                            .as_deref()
                            .map(|v| String::from_utf8_lossy(v).into_owned())
                            .unwrap_or_else(|| "null".to_owned()),
                    };
                    if let Some(d) = errors.handle(failed, err)? {
                        dead.push(d);
                    }
                }
                Err(_) => {}
            }
        }
        Ok((out, dead))
    }

    async fn convert_record(
        c: &RecordConverters,
        errors: &ErrorPolicy,
        tp: &TopicPartition,
        r: &StoredRecord,
    ) -> Result<SinkRecord, (Stage, sluice_api::ConnectError)> {
        let (key_schema, key) =
            errors.call(|| c.key.to_connect(&tp.topic, r.record.key.as_deref())).await.map_err(|e| (Stage::KeyConverter, e))?;
        let (value_schema, value) =
            errors.call(|| c.value.to_connect(&tp.topic, r.record.value.as_deref())).await.map_err(|e| (Stage::ValueConverter, e))?;
        let mut headers = sluice_api::Headers::default();
        for (k, v) in &r.record.headers {
            let (schema, value) =
                errors.call(|| c.header.to_connect_header(&tp.topic, k, v.as_deref())).await.map_err(|e| (Stage::HeaderConverter, e))?;
            headers.add(k.clone(), schema, value);
        }
        Ok(SinkRecord {
            topic: tp.topic.clone(),
            partition: tp.partition,
            offset: r.offset,
            key_schema,
            key,
            value_schema,
            value,
            timestamp: Some(r.record.timestamp),
            timestamp_type: TimestampType::CreateTime,
            headers,
        })
    }
}

/// The next batch, read and converted on another worker thread while the current batch is
/// put. Only read: nothing moves until the batch is put, and it is used only if it starts
/// exactly where the task is then (otherwise dropped and read again).
struct ReadAhead {
    handle: tokio::task::JoinHandle<Option<Ahead>>,
}

struct Ahead {
    /// The positions it was read from.
    from: BTreeMap<TopicPartition, i64>,
    cursor: usize,
    fetched: Fetched,
    converted: Vec<SinkRecord>,
    dead: Vec<Produce>,
}

impl ReadAhead {
    fn start(reader: Reader, from: BTreeMap<TopicPartition, i64>, cursor: usize) -> Self {
        let handle = tokio::spawn(async move {
            let mut next = from.clone();
            let mut cursor = cursor;
            let fetched = reader.fetch(&mut next, &mut cursor).await.ok()?;
            if next != from {
                return None; // a position was reset: the task's own read handles that
            }
            // An error (e.g. errors.tolerance=none) is left to the task's own read, which
            // meets it again and fails with it.
            let (converted, dead) = reader.convert(&fetched, true).await.ok()?;
            Some(Ahead { from, cursor, fetched: Arc::new(fetched), converted, dead })
        });
        Self { handle }
    }

    async fn join(mut self) -> Option<Ahead> {
        (&mut self.handle).await.ok().flatten()
    }
}

impl Drop for ReadAhead {
    fn drop(&mut self) {
        self.handle.abort();
    }
}

#[derive(Default)]
struct Positions {
    /// Next offset to read per assigned partition.
    next: BTreeMap<TopicPartition, i64>,
    /// What the group has durably committed.
    committed: BTreeMap<TopicPartition, i64>,
}
