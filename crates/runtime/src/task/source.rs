//! The source task loop.
//!
//! ## Progress tracking
//! ```text
//!  poll loop                         committer (its own tokio task)
//!  ─────────                         ──────────────────────────────
//!  records = task.poll()
//!  per chunk of ~MAX_APPEND_BYTES:
//!    batch = convert(transform(records))
//!    ack   = log.append(batch) ──▶  in-flight queue (bounded in batches and in bytes:
//!                                   backpressure)
//!                                   await acks in submission order
//!                                   acked prefix: newest offset per source partition
//!                                   every offset.flush.interval.ms / on stop:
//!                                     offsets topic write (durable)
//!  task.commit(committed) ◀──────── committed offsets
//! ```
//! An offset is written only when its record and every record submitted before it are
//! acknowledged by the log, and the task hears of it only once that write is durable. A
//! failed append fails the task before any later offset can be committed, so a restart
//! re-reads from the last durable offset: at-least-once.
//!
//! ## Exactly once (`exactly.once.source.support=enabled`, Kafka)
//! ```text
//!  init transactions (fences older instances of this task) ─▶ re-read the connector's offsets
//!  task.start
//!  loop: records = task.poll()
//!        begin (first batch of a transaction) ─▶ send(convert(transform(records)))
//!        at the boundary (every batch, or every transaction.boundary.interval.ms):
//!          send(offset records) ─▶ commit ─▶ offsets visible ─▶ task.commit(committed)
//!  any failure: abort, fail the task; a restart resumes at the last committed offsets
//! ```
//! Records and offsets become visible together (to `read_committed` readers) or not at all.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sluice_api::{ConnectError, ConnectResult, SourceOffset, SourcePartition, SourceRecord, SourceTask, SourceTaskContext};
use tokio::sync::{mpsc, watch, OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;

use super::errors::{ErrorPolicy, FailedRecord};
use super::exactly_once::Boundary;
use super::topic_creation::TopicCreator;
use super::{Backoff, RecordConverters, Stage, StateReporter, TaskState};
use crate::herder::{ConnectorTaskId, TargetState};
use crate::log::{AppendFuture, Log, LogRecord, Produce, Transactional};
use crate::partitioner::partition_for_key;
use crate::store::now_ms;
use crate::store::offset::{canonical, OffsetStore};
use crate::store::status::StatusStore;
use crate::transform::{RecordOrigin, TransformChain, TransformRecord};

/// How many appended batches may await their ack at once.
pub const MAX_IN_FLIGHT_BATCHES: usize = 16;

/// How many bytes of converted records (keys, values, headers) may await their ack at once
/// (a batch larger than this goes alone). Batches of large records (JsonConverter with
/// schemas: ~5 KB a record) otherwise keep 16 × `max.batch.size` records in memory: the
/// Postgres source's benchmark peaked at 363 MB RSS that way.
pub const MAX_IN_FLIGHT_BYTES: usize = 8 << 20;

/// A polled batch is converted and appended in chunks of about this many bytes (the
/// record that crosses it closes the chunk), so that converted records do not pile up
/// outside [`MAX_IN_FLIGHT_BYTES`] while a whole poll (`max.batch.size` records of up to
/// a few KB each) is converted. Each chunk carries the offsets of the records it covers.
pub const MAX_APPEND_BYTES: usize = 1 << 20;

pub struct SourceRunner {
    pub id: ConnectorTaskId,
    pub task: Box<dyn SourceTask>,
    pub ctx: SourceTaskContext,
    pub log: Arc<dyn Log>,
    pub transforms: TransformChain,
    pub converters: RecordConverters,
    pub errors: ErrorPolicy,
    /// `topic.creation.*` (KIP-158): `None` leaves missing topics to the log's defaults.
    pub topic_creation: Option<TopicCreator>,
    pub offsets: Arc<OffsetStore>,
    pub status: Arc<StatusStore>,
    pub flush_interval: Duration,
    pub flush_timeout: Duration,
    pub target: watch::Receiver<TargetState>,
    pub state: StateReporter,
    /// Set when records and offsets go in one transaction (exactly-once source support).
    pub exactly_once: Option<ExactlyOnce>,
    /// Debezium's `errors.max.retries`: how many retriable failures in a row (of `start`
    /// and `poll`) are waited out before the task fails; `None` retries forever.
    pub max_retries: Option<u32>,
    /// Connect's source-task metrics of this task.
    pub metrics: Arc<crate::metrics::TaskMetrics>,
    /// `sluice.max.records.per.second`: waited out before the next poll.
    pub rate: Option<super::rate::RateLimit>,
}

/// A task's transactional producer and when its transactions commit.
pub struct ExactlyOnce {
    pub writer: Box<dyn Transactional>,
    pub boundary: Boundary,
}

struct InFlight {
    ack: AppendFuture,
    /// This batch's share of [`MAX_IN_FLIGHT_BYTES`], released once it is settled.
    _bytes: OwnedSemaphorePermit,
    /// Newest offset per source partition in this batch.
    offsets: Vec<(SourcePartition, SourceOffset)>,
}

type Committed = Vec<(SourcePartition, SourceOffset)>;

impl SourceRunner {
    /// Runs until `shutdown` or a fatal error. Offsets acknowledged before either are
    /// committed (within `flush_timeout`) before this returns.
    pub async fn run(mut self, shutdown: CancellationToken) -> ConnectResult<()> {
        if let Some(eos) = self.exactly_once.take() {
            return self.run_transactional(eos, shutdown).await;
        }
        if !self.start_task(&shutdown).await? {
            return Ok(());
        }
        let (tx, rx) = mpsc::channel::<InFlight>(MAX_IN_FLIGHT_BATCHES);
        let (committed_tx, mut committed_rx) = mpsc::unbounded_channel::<Committed>();
        let failure = Arc::new(Mutex::new(None::<ConnectError>));
        let failed = CancellationToken::new();
        let committer = Committer {
            connector: self.id.connector.clone(),
            store: self.offsets.clone(),
            pending: BTreeMap::new(),
            committed_tx,
            failure: failure.clone(),
            failed: failed.clone(),
            setbacks: self.state.setbacks(),
        };
        let committer = tokio::spawn(committer.run(rx, self.flush_interval, self.flush_timeout));

        let result = self.poll_loop(&tx, &mut committed_rx, &shutdown, &failed).await;
        drop(tx);
        if let Err(e) = committer.await {
            tracing::error!(task = ?self.id, error = %e, "the offset committer stopped unexpectedly");
        }
        while let Ok(c) = committed_rx.try_recv() {
            self.notify_commit(&c).await;
        }
        if let Err(e) = self.task.stop().await {
            tracing::warn!(task = ?self.id, error = %e, "source task stop failed");
        }
        let produce_failure = failure.lock().expect("failure lock").take();
        match (result, produce_failure) {
            (Err(e), _) => Err(e),
            (Ok(()), Some(e)) => Err(e),
            (Ok(()), None) => Ok(()),
        }
    }

    /// Starts the task, again after a retriable failure ([`super::start_failed`]); false
    /// when `shutdown` came first.
    async fn start_task(&mut self, shutdown: &CancellationToken) -> ConnectResult<bool> {
        let mut backoff = Backoff::new();
        while let Err(e) = self.task.start(self.ctx.clone()).await {
            if !super::start_failed(e, &mut self.state, &mut backoff, self.max_retries, shutdown).await? {
                return Ok(false);
            }
        }
        self.state.running();
        Ok(true)
    }

    async fn notify_commit(&mut self, committed: &Committed) {
        self.state.committed();
        self.metrics.add(&self.metrics.offset_commit_completion, 1);
        if let Err(e) = self.task.commit(committed).await {
            tracing::warn!(task = ?self.id, error = %e, "source task commit callback failed");
        }
    }

    /// One `poll`: its records; none after a retriable failure (reported, then waited out
    /// with `backoff`); `None` when shutdown came during that wait.
    async fn poll_once(&mut self, backoff: &mut Backoff, shutdown: &CancellationToken) -> ConnectResult<Option<Vec<SourceRecord>>> {
        match self.task.poll().await {
            Ok(r) => {
                backoff.reset();
                self.state.running();
                Ok(Some(r))
            }
            Err(e) if e.is_retriable() => {
                let e = backoff.exhausted(self.max_retries, e)?;
                tracing::warn!(task = ?self.id, error = %e, "source poll failed; retrying");
                self.state.report(TaskState::Retrying(e.trace()));
                Ok(backoff.wait(shutdown).await.then(Vec::new))
            }
            Err(e) => Err(e),
        }
    }

    async fn poll_loop(
        &mut self,
        tx: &mpsc::Sender<InFlight>,
        committed_rx: &mut mpsc::UnboundedReceiver<Committed>,
        shutdown: &CancellationToken,
        failed: &CancellationToken,
    ) -> ConnectResult<()> {
        let mut router = Router { creation: self.topic_creation.take(), ..Router::default() };
        let mut backoff = Backoff::new();
        let budget = Arc::new(Semaphore::new(MAX_IN_FLIGHT_BYTES >> 10));
        loop {
            if shutdown.is_cancelled() || failed.is_cancelled() {
                return Ok(());
            }
            while let Ok(c) = committed_rx.try_recv() {
                self.notify_commit(&c).await;
            }
            if *self.target.borrow() != TargetState::Started {
                self.state.report(TaskState::Paused);
                tokio::select! {
                    _ = self.target.changed() => {}
                    _ = shutdown.cancelled() => return Ok(()),
                    _ = failed.cancelled() => return Ok(()),
                    _ = tokio::time::sleep(Duration::from_millis(500)) => {}
                }
                continue;
            }
            let polling = Instant::now();
            let Some(records) = self.poll_once(&mut backoff, shutdown).await? else { return Ok(()) };
            if !records.is_empty() {
                self.metrics.call(polling.elapsed());
            }
            if records.is_empty() {
                continue;
            }
            let (polled, began) = (records.iter().filter(|r| !r.is_offset_only()).count() as u64, Instant::now());
            self.metrics.add(&self.metrics.source_record_poll, polled);
            // Converted and appended in chunks of about MAX_APPEND_BYTES: only a chunk of
            // converted bytes waits outside the in-flight budget, whatever the poll's size.
            let mut records = records.into_iter();
            while records.len() > 0 {
                let (batch, offsets) = self.convert(&mut router, &mut records, MAX_APPEND_BYTES).await?;
                self.metrics.add(&self.metrics.source_record_write, batch.len() as u64);
                let kib = (batch.iter().map(|p| p.record.size()).sum::<usize>() >> 10).clamp(1, MAX_IN_FLIGHT_BYTES >> 10);
                let bytes = tokio::select! {
                    permit = budget.clone().acquire_many_owned(kib as u32) => permit.expect("the budget is never closed"),
                    _ = failed.cancelled() => return Ok(()),
                    _ = shutdown.cancelled() => return Ok(()),
                };
                let ack = self.log.append(batch);
                if tx.send(InFlight { ack, _bytes: bytes, offsets }).await.is_err() {
                    return Ok(());
                }
            }
            self.metrics.batch(polled, began.elapsed());
            if let Some(rate) = &mut self.rate {
                if !rate.pace(polled, shutdown).await {
                    return Ok(());
                }
            }
        }
    }

    /// The exactly-once loop (module docs). Returns after committing the open transaction on
    /// `shutdown`; on any failure the open transaction is aborted and the error returned.
    async fn run_transactional(mut self, eos: ExactlyOnce, shutdown: CancellationToken) -> ConnectResult<()> {
        let writer = eos.writer;
        writer.init().await.map_err(|e| ConnectError::fatal_from("cannot initialize the task's transactional producer", e))?;
        self.offsets.reload_connector(&self.id.connector).await?;
        if !self.start_task(&shutdown).await? {
            return Ok(());
        }
        let mut txn = Txn { open: None, offsets: BTreeMap::new() };
        let result = self.transactional_loop(writer.as_ref(), eos.boundary, &mut txn, &shutdown).await;
        let result = match result {
            Ok(()) => self.commit_transaction(writer.as_ref(), &mut txn).await,
            Err(e) => Err(e),
        };
        if result.is_err() && txn.open.is_some() {
            if let Err(e) = writer.abort().await {
                tracing::warn!(task = ?self.id, error = %e, "aborting the transaction failed; the next instance of the task aborts it");
            }
        }
        if let Err(e) = self.task.stop().await {
            tracing::warn!(task = ?self.id, error = %e, "source task stop failed");
        }
        result
    }

    async fn transactional_loop(
        &mut self,
        writer: &dyn Transactional,
        boundary: Boundary,
        txn: &mut Txn,
        shutdown: &CancellationToken,
    ) -> ConnectResult<()> {
        let mut router = Router { creation: self.topic_creation.take(), ..Router::default() };
        let mut backoff = Backoff::new();
        loop {
            if shutdown.is_cancelled() {
                return Ok(());
            }
            if *self.target.borrow() != TargetState::Started {
                // Nothing is left open while paused.
                self.commit_transaction(writer, txn).await?;
                self.state.report(TaskState::Paused);
                tokio::select! {
                    _ = self.target.changed() => {}
                    _ = shutdown.cancelled() => return Ok(()),
                    _ = tokio::time::sleep(Duration::from_millis(500)) => {}
                }
                continue;
            }
            let polling = Instant::now();
            let Some(records) = self.poll_once(&mut backoff, shutdown).await? else { return Ok(()) };
            if !records.is_empty() {
                self.metrics.call(polling.elapsed());
            }
            if !records.is_empty() {
                let (polled, began) = (records.iter().filter(|r| !r.is_offset_only()).count() as u64, Instant::now());
                self.metrics.add(&self.metrics.source_record_poll, polled);
                let (batch, offsets) = self.convert(&mut router, &mut records.into_iter(), usize::MAX).await?;
                self.metrics.add(&self.metrics.source_record_write, batch.len() as u64);
                self.metrics.batch(polled, began.elapsed());
                if let Some(rate) = &mut self.rate {
                    if !rate.pace(polled, shutdown).await {
                        return Ok(());
                    }
                }
                if txn.open.is_none() {
                    writer.begin().map_err(|e| ConnectError::fatal_from("cannot begin a transaction", e))?;
                    txn.open = Some(tokio::time::Instant::now());
                }
                writer.send(&batch).map_err(|e| ConnectError::fatal_from("cannot send source records in the transaction", e))?;
                for (p, o) in offsets {
                    txn.offsets.insert(canonical(&p), (p, o));
                }
            }
            let due = match (boundary, txn.open) {
                (_, None) => false,
                (Boundary::Poll, Some(_)) => true,
                (Boundary::Interval(every), Some(began)) => began.elapsed() >= every,
            };
            if due {
                self.commit_transaction(writer, txn).await?;
            }
        }
    }

    /// Sends the open transaction's offsets, commits, and only then makes the offsets visible
    /// and tells the task. Nothing to do when no transaction is open.
    async fn commit_transaction(&mut self, writer: &dyn Transactional, txn: &mut Txn) -> ConnectResult<()> {
        if txn.open.is_none() {
            return Ok(());
        }
        let entries: Vec<(SourcePartition, Option<SourceOffset>)> =
            txn.offsets.values().map(|(p, o)| (p.clone(), Some(o.clone()))).collect();
        let fail = |e: crate::log::LogError| {
            ConnectError::fatal_from(
                "cannot commit the transaction of source records and offsets; they will be read again after a restart",
                e,
            )
        };
        writer.send(&self.offsets.records(&self.id.connector, &entries)).map_err(fail)?;
        writer.commit().await.map_err(fail)?;
        txn.open = None;
        self.offsets.apply(&self.id.connector, &entries);
        let committed: Committed = std::mem::take(&mut txn.offsets).into_values().collect();
        self.notify_commit(&committed).await;
        Ok(())
    }

    /// Converts polled records into log records, applying the error policy per record,
    /// until the converted keys, values and headers reach `max_bytes` or `records` ends.
    /// Every converted record's offset counts, whether it was written, skipped or sent to
    /// the dead-letter topic.
    async fn convert(
        &mut self,
        router: &mut Router,
        records: &mut std::vec::IntoIter<SourceRecord>,
        max_bytes: usize,
    ) -> ConnectResult<(Vec<Produce>, Vec<(SourcePartition, SourceOffset)>)> {
        let mut batch: Vec<Produce> = Vec::with_capacity(records.len().min(1024));
        let (mut bytes, mut counted) = (0usize, 0usize);
        let mut newest: Vec<(SourcePartition, SourceOffset)> = Vec::new();
        let mut index: HashMap<String, usize> = HashMap::new();
        let mut batch_topic: Option<String> = None;
        loop {
            // What the last record added (itself, or a dead-letter record).
            bytes += batch[counted..].iter().map(|p| p.record.size()).sum::<usize>();
            counted = batch.len();
            if bytes >= max_bytes {
                break;
            }
            let Some(r) = records.next() else { break };
            if r.is_offset_only() {
                track(&mut newest, &mut index, r.source_partition, r.source_offset);
                continue;
            }
            let r = if self.transforms.is_empty() {
                r
            } else {
                // The chain may drop the record (its offset still counts) or fail on it. The
                // source position is kept aside while it runs (transforms never read it), so
                // nothing is copied per record.
                let copy = self.errors.tolerate_all.then(|| r.clone());
                let mut t = TransformRecord::from(r);
                let RecordOrigin::Source { partition, offset } = std::mem::replace(
                    &mut t.origin,
                    RecordOrigin::Source { partition: SourcePartition::new(), offset: SourceOffset::new() },
                ) else {
                    unreachable!("a source record has a source origin")
                };
                let origin = (partition, offset);
                match self.transforms.apply(t) {
                    Ok(Some(mut t)) => {
                        t.origin = RecordOrigin::Source { partition: origin.0, offset: origin.1 };
                        t.into_source_record()
                    }
                    Ok(None) => {
                        track(&mut newest, &mut index, origin.0, origin.1);
                        continue;
                    }
                    Err(err) => {
                        let failed = match &copy {
                            Some(original) => self.failed_record(original, Stage::Transformation),
                            None => FailedRecord::position_only(
                                &self.id,
                                Stage::Transformation,
                                format!("source partition {:?} offset {:?}", origin.0, origin.1),
                            ),
                        };
                        if let Some(dead) = self.errors.handle(failed, err)? {
                            batch.push(dead);
                        }
                        track(&mut newest, &mut index, origin.0, origin.1);
                        continue;
                    }
                }
            };
            match Self::convert_record(&self.converters, &self.errors, &r).await {
                Ok((key, value, headers)) => {
                    let position = || format!("topic {} source partition {:?} offset {:?}", r.topic, r.source_partition, r.source_offset);
                    router.create_topic(self.log.as_ref(), &r.topic).await?;
                    let partition = router
                        .partition(self.log.as_ref(), &r.topic, r.partition, key.as_deref())
                        .await
                        .map_err(|e| Stage::Producer.fail(position(), e))?;
                    // Once per topic and batch, not once per task: a topic must come back after a
                    // reset of the connector's active topics.
                    if batch_topic.as_deref() != Some(r.topic.as_str()) {
                        self.status.topic_used(&self.id.connector, &r.topic, self.id.task);
                        batch_topic = Some(r.topic.clone());
                    }
                    batch.push(Produce {
                        topic: r.topic,
                        partition,
                        record: LogRecord { key, value, timestamp: r.timestamp.unwrap_or_else(now_ms), headers },
                    });
                }
                Err((stage, err)) => {
                    if let Some(dead) = self.errors.handle(self.failed_record(&r, stage), err)? {
                        batch.push(dead);
                    }
                }
            }
            track(&mut newest, &mut index, r.source_partition, r.source_offset);
        }
        Ok((batch, newest))
    }

    /// Key, value and header bytes of one record, or the stage that failed.
    async fn convert_record(
        c: &RecordConverters,
        errors: &ErrorPolicy,
        r: &SourceRecord,
    ) -> Result<ConvertedRecord, (Stage, ConnectError)> {
        let key =
            errors.call(|| c.key.from_connect(&r.topic, r.key_schema.as_ref(), &r.key)).await.map_err(|e| (Stage::KeyConverter, e))?;
        let value = errors
            .call(|| c.value.from_connect(&r.topic, r.value_schema.as_ref(), &r.value))
            .await
            .map_err(|e| (Stage::ValueConverter, e))?;
        let mut headers = Vec::with_capacity(r.headers.0.len());
        for h in r.headers.iter() {
            let bytes = errors
                .call(|| c.header.from_connect_header(&r.topic, &h.key, h.schema.as_ref(), &h.value))
                .await
                .map_err(|e| (Stage::HeaderConverter, e))?;
            headers.push((h.key.clone(), bytes));
        }
        Ok((key, value, headers))
    }

    /// What the error policy and the dead-letter topic get for a record that failed. The
    /// key and value are what the converters made of them, or a text rendering of the part
    /// that could not be converted; the source position rides in two extra headers.
    fn failed_record(&self, r: &SourceRecord, stage: Stage) -> FailedRecord {
        let c = &self.converters;
        let text = |v: &sluice_api::Value| Some(format!("{v:?}").into_bytes());
        let key = c.key.from_connect(&r.topic, r.key_schema.as_ref(), &r.key).ok().flatten().or_else(|| text(&r.key));
        let value = c.value.from_connect(&r.topic, r.value_schema.as_ref(), &r.value).ok().flatten().or_else(|| text(&r.value));
        let json = |m: &serde_json::Map<String, serde_json::Value>| Some(serde_json::Value::Object(m.clone()).to_string().into_bytes());
        FailedRecord {
            connector: self.id.connector.clone(),
            task: self.id.task,
            stage,
            class: c.class_of(stage),
            position: format!("topic {} source partition {:?} offset {:?}", r.topic, r.source_partition, r.source_offset),
            original: None,
            key,
            value,
            headers: vec![
                ("__connect.errors.source.partition".to_owned(), json(&r.source_partition)),
                ("__connect.errors.source.offset".to_owned(), json(&r.source_offset)),
            ],
            describe: format!("{r:?}"),
        }
    }
}

/// Records `offset` as the newest of its source partition in this batch. A record without
/// a source partition has no position of its own (Connect's null `sourcePartition`): the
/// next record with one covers it.
fn track(
    newest: &mut Vec<(SourcePartition, SourceOffset)>,
    index: &mut HashMap<String, usize>,
    partition: SourcePartition,
    offset: SourceOffset,
) {
    if partition.is_empty() {
        return;
    }
    // Most batches come from one source partition: compare with the last one before paying
    // for a canonical key.
    match newest.last_mut() {
        Some(last) if last.0 == partition => last.1 = offset,
        _ => {
            let canon = canonical(&partition);
            match index.get(&canon) {
                Some(&i) => newest[i].1 = offset,
                None => {
                    index.insert(canon, newest.len());
                    newest.push((partition, offset));
                }
            }
        }
    }
}

type ConvertedRecord = (Option<Vec<u8>>, Option<Vec<u8>>, Vec<(String, Option<Vec<u8>>)>);

/// Chooses partitions as Kafka's producer does: explicit, else by key hash, else round robin.
/// With topic creation, creates each topic (when missing) before its first record.
#[derive(Default)]
struct Router {
    counts: HashMap<String, i32>,
    round_robin: u32,
    creation: Option<TopicCreator>,
}

impl Router {
    async fn create_topic(&mut self, log: &dyn Log, topic: &str) -> ConnectResult<()> {
        match &mut self.creation {
            Some(creation) => creation.ensure(log, topic).await,
            None => Ok(()),
        }
    }

    async fn partition(&mut self, log: &dyn Log, topic: &str, explicit: Option<i32>, key: Option<&[u8]>) -> ConnectResult<i32> {
        if let Some(p) = explicit {
            return Ok(p);
        }
        let count = match self.counts.get(topic) {
            Some(c) => *c,
            None => {
                let c = log.partition_count(topic).await?;
                self.counts.insert(topic.to_owned(), c);
                c
            }
        };
        Ok(match key {
            Some(k) => partition_for_key(k, count),
            None => {
                self.round_robin = self.round_robin.wrapping_add(1);
                (self.round_robin % count.max(1) as u32) as i32
            }
        })
    }
}

/// The open transaction of an exactly-once task.
struct Txn {
    /// When it began; `None` when no transaction is open.
    open: Option<tokio::time::Instant>,
    /// Newest offset per source partition of the records sent in it.
    offsets: BTreeMap<String, (SourcePartition, SourceOffset)>,
}

struct Committer {
    connector: String,
    store: Arc<OffsetStore>,
    /// Acked but not yet written: canonical partition → (partition, offset).
    pending: BTreeMap<String, (SourcePartition, SourceOffset)>,
    committed_tx: mpsc::UnboundedSender<Committed>,
    failure: Arc<Mutex<Option<ConnectError>>>,
    failed: CancellationToken,
    /// Where a commit that failed, or an ack that is late, is noted for the task's trace.
    setbacks: sluice_api::Setbacks,
}

/// An append not acknowledged by the log within this time is noted in the task's trace
/// (the records stay in flight; the wait goes on).
const SLOW_ACK: Duration = Duration::from_secs(10);

impl Committer {
    async fn run(mut self, mut rx: mpsc::Receiver<InFlight>, interval: Duration, timeout: Duration) {
        let mut ticker = tokio::time::interval(interval.max(Duration::from_millis(1)));
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        ticker.tick().await;
        loop {
            tokio::select! {
                biased;
                _ = ticker.tick() => self.flush().await,
                item = rx.recv() => match item {
                    Some(inflight) => {
                        if !self.settle(inflight).await {
                            break;
                        }
                    }
                    None => break,
                },
            }
        }
        // Stopping: settle what is still in flight (bounded by the flush timeout), then flush.
        let deadline = tokio::time::Instant::now() + timeout;
        while !self.failed.is_cancelled() {
            match tokio::time::timeout_at(deadline, rx.recv()).await {
                Ok(Some(inflight)) => {
                    if tokio::time::timeout_at(deadline, self.settle(inflight)).await.is_err() {
                        tracing::warn!(connector = %self.connector, "flush timeout: in-flight records were not acknowledged in time; they will be re-read after restart");
                        break;
                    }
                }
                Ok(None) => break,
                Err(_) => {
                    tracing::warn!(connector = %self.connector, "flush timeout waiting for in-flight records");
                    break;
                }
            }
        }
        self.flush().await;
    }

    /// Waits for one batch's ack and adds its offsets to the acked prefix.
    async fn settle(&mut self, inflight: InFlight) -> bool {
        let mut ack = inflight.ack;
        let appended = tokio::time::Instant::now();
        let acked = loop {
            match tokio::time::timeout(SLOW_ACK, &mut ack).await {
                Ok(acked) => break acked,
                Err(_) => self.setbacks.note(&ConnectError::retriable(format!(
                    "the log has not acknowledged records appended {} s ago; waiting for it (their offsets are not committed until it does)",
                    appended.elapsed().as_secs()
                ))),
            }
        };
        match acked {
            Ok(_) => {
                for (p, o) in inflight.offsets {
                    self.pending.insert(canonical(&p), (p, o));
                }
                true
            }
            Err(e) => {
                tracing::error!(connector = %self.connector, error = %e, "appending records to the log failed");
                *self.failure.lock().expect("failure lock") = Some(Stage::Producer.fail("a batch of source records".to_owned(), e.into()));
                self.failed.cancel();
                false
            }
        }
    }

    async fn flush(&mut self) {
        if self.pending.is_empty() {
            return;
        }
        let entries: Vec<(SourcePartition, Option<SourceOffset>)> =
            self.pending.values().map(|(p, o)| (p.clone(), Some(o.clone()))).collect();
        match self.store.write(&self.connector, &entries).await {
            Ok(()) => {
                let committed = std::mem::take(&mut self.pending).into_values().collect();
                let _ = self.committed_tx.send(committed);
            }
            Err(e) => {
                tracing::warn!(connector = %self.connector, error = %e, "committing source offsets failed; will retry");
                self.setbacks
                    .note(&ConnectError::retriable_from("committing source offsets failed; they are written again at the next commit", e));
            }
        }
    }
}

#[cfg(test)]
#[path = "source_tests.rs"]
mod tests;
