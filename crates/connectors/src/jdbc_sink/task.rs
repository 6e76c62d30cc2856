//! The sink task: batches records, writes them with their offsets in one transaction, and
//! resumes from the offsets stored in the target.
//!
//! ## Progress tracking
//! ```text
//! open(partitions) ─▶ read sluice_sink_offsets ─▶ ctx.request_offset(tp, next)
//! put(records) ─▶ drop records below the stored next offset (applied already)
//!              ─▶ chunks of equal size, at most batch.size: build Batch ─▶ Dialect::write (data + offsets, one tx)
//!              ─▶ data error: find the record at fault, report it (errors.* decide:
//!                 fail, or dead-letter durably), write the rest with the same offsets
//!              ─▶ durable[tp] = next offset of the batch
//! pre_commit(current) ─▶ durable (what the target has), never more than current
//! ```
//! After a failed write it is unknown whether the commit happened (the connection may
//! have dropped during COMMIT), so the next `put` reads the offsets again before writing:
//! a batch is applied once, whatever the runtime redelivers.
//!
//! ## Puts are written in the background
//! `put` builds the put's batches (while earlier puts are still written) and hands them to
//! a background task that writes them in order, one transaction each, after the task of the
//! put before it ended; it returns once they are on their way. Up to two puts are written
//! or waiting at a time ([`WRITES_AHEAD`]): the target always has the next batch at hand,
//! and the runtime reads and converts the next records meanwhile. What committed is counted
//! as it commits and becomes `durable` at the next call. A put's records are kept until
//! they are durable: when a write fails, the writes after it do not run, and the next
//! `put`, `pre_commit`, `close` or `stop` waits for the tasks ([`JdbcSinkTask::settle`])
//! and writes every chunk not committed again, in order (through the usual error handling:
//! retry, find the bad record, dead-letter it) before anything newer; a retriable failure is
//! reported by the call that found it, the records staying held for the next attempt.
//! `pre_commit`, `close` and `stop` always wait for the writes.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use sluice_api::{ConnectError, ConnectResult, ErrantRecordReporter, SinkRecord, SinkTask, SinkTaskContext, TopicPartition};

use super::batch::{self, BadRecord, Batch, TableName};

/// A put's batches, one per chunk, and the topic → table map after them.
type Built = (Vec<Result<Batch, BadRecord>>, HashMap<String, TableName>);
use super::config::JdbcSinkConfig;
use super::dialect::{Dialect, ErrorKind, WriteError};
use super::writer::PgWriter;

#[derive(Default)]
pub struct JdbcSinkTask {
    cfg: Option<Arc<JdbcSinkConfig>>,
    ctx: Option<SinkTaskContext>,
    dialect: Option<Box<dyn Dialect>>,
    /// Next offset per partition as stored in the target (a lower bound after an error).
    durable: BTreeMap<TopicPartition, i64>,
    /// Assigned partitions whose stored offsets have not been read yet.
    unread: BTreeSet<TopicPartition>,
    /// The partitions assigned to this task.
    assigned: BTreeSet<TopicPartition>,
    /// Set after a failed write: read every stored offset again before the next write.
    reread: bool,
    /// Consecutive failed writes.
    failures: u32,
    /// The table of each topic, for tombstones (see `batch::build`).
    topic_tables: HashMap<String, TableName>,
    /// The writes in the background, holding the dialect while they run.
    in_flight: Option<InFlight>,
    /// What the writes in the background did so far.
    progress: Arc<Progress>,
    /// Puts written or waiting in the background (at most [`WRITES_AHEAD`]).
    ahead: Option<Arc<tokio::sync::Semaphore>>,
    /// Chunks of background writes that did not commit, to be written (in order) before
    /// anything newer.
    held: Vec<Arc<Vec<SinkRecord>>>,
}

/// How many puts may be written or wait to be written in the background. A record of them
/// may be reported up to `WRITES_AHEAD + 1` puts later; the runtime's reporter names the
/// original bytes of the last four puts' records.
const WRITES_AHEAD: usize = 2;

/// The chunks being written in the background, and their records until durable.
struct InFlight {
    /// Chunks not counted as committed yet, oldest first.
    chunks: VecDeque<Arc<Vec<SinkRecord>>>,
    /// The newest put's task: it ends after those before it, and gives the dialect back.
    head: tokio::task::JoinHandle<Written>,
}

/// What the newest background task gives back: the dialect and whether every write up to
/// it committed (else the first error; the writes after it did not run). `Err` when a task
/// did not finish (it panicked), with the dialect lost.
type Written = Result<(Box<dyn Dialect>, Result<(), WriteError>), String>;

/// Shared with the background writes.
#[derive(Default)]
struct Progress {
    /// Chunks committed and not yet counted into `durable`.
    committed: AtomicUsize,
    /// A write failed: nothing after it is written until the task writes it again.
    failed: AtomicBool,
}

impl JdbcSinkTask {
    fn connector(&self) -> String {
        self.ctx.as_ref().map(|c| c.connector.clone()).unwrap_or_default()
    }

    /// Reads stored offsets for unread partitions (all of them after an error), and asks
    /// the runtime to resume there.
    async fn load_offsets(&mut self) -> Result<(), WriteError> {
        if self.unread.is_empty() && !self.reread {
            return Ok(());
        }
        let connector = self.connector();
        let dialect = self.dialect.as_mut().expect("started");
        let stored = dialect.read_offsets(&connector).await?;
        let ctx = self.ctx.as_ref().expect("started");
        for tp in std::mem::take(&mut self.unread) {
            if let Some(next) = stored.get(&tp) {
                tracing::info!(connector = %connector, %tp, next, "resuming from the offset stored in the target");
                self.durable.insert(tp.clone(), *next);
                ctx.request_offset(tp, *next);
            }
        }
        if self.reread {
            let assigned = &self.assigned;
            advance(&mut self.durable, stored.into_iter().filter(|(tp, _)| assigned.contains(tp)));
            self.reread = false;
        }
        Ok(())
    }

    /// A failed write: retriable until `max.retries` consecutive failures, then fatal.
    async fn retry_or_fail(&mut self, e: WriteError) -> ConnectError {
        self.reread = true;
        self.failures += 1;
        let cfg = self.cfg.as_ref().expect("started");
        if self.failures > cfg.max_retries {
            return ConnectError::fatal_from(format!("giving up after {} failed attempts to write to the target", self.failures), e);
        }
        tracing::warn!(attempt = self.failures, max = cfg.max_retries, error = %e, "write to the target failed; it will be retried");
        tokio::time::sleep(Duration::from_millis(cfg.retry_backoff_ms)).await;
        ConnectError::retriable_from("write to the target failed; retrying", e)
    }

    /// After a data error on a batch of `records`: finds the first record whose prefix of the
    /// batch fails (a binary search over prefixes, each applied and rolled back) and names it.
    /// `Err` when the search itself cannot go on (the target went away, or no prefix fails).
    async fn find_bad(&mut self, records: &[SinkRecord], e: WriteError) -> Result<(usize, ConnectError), ConnectError> {
        let cfg = self.cfg.clone().expect("started");
        let (mut good, mut bad, mut error) = (0usize, records.len(), e);
        while bad - good > 1 {
            let mid = (good + bad) / 2;
            let mut tables = self.topic_tables.clone();
            let prefix = batch::build(&cfg, &records[..mid], &mut tables)
                .map_err(|b| ConnectError::fatal(format!("cannot write the record at {}: {}", b.origin, b.reason)))?;
            let dialect = self.dialect.as_mut().expect("started");
            match dialect.probe(&prefix).await {
                Ok(()) => good = mid,
                Err(e) if e.kind == ErrorKind::Data => (bad, error) = (mid, e),
                Err(e) if e.kind == ErrorKind::Retriable => return Err(self.retry_or_fail(e).await),
                Err(e) => return Err(ConnectError::fatal_from("cannot write to the target", e)),
            }
        }
        let r = &records[bad - 1];
        let origin = batch::Origin::of(r);
        Ok((bad - 1, ConnectError::fatal_from(format!("cannot write the record at {origin}: {}", error.message), error)))
    }

    /// Counts the chunks committed in the background so far into `durable`.
    fn harvest(&mut self) {
        if let Some(f) = self.in_flight.as_mut() {
            count_committed(&self.progress, &mut f.chunks, &mut self.durable, &mut self.failures);
        }
    }

    /// Waits for the background writes, if any, and makes their outcome count: what
    /// committed is durable; on a failure, the chunks not committed are written again here,
    /// with the usual error handling. An error leaves the chunks not yet written held for
    /// the next call. `true` when nothing but `durable` changed (no write failed, nothing
    /// was written again).
    async fn settle(&mut self) -> ConnectResult<bool> {
        if let Some(mut f) = self.in_flight.take() {
            let (dialect, result) = f
                .head
                .await
                .map_err(|e| e.to_string())
                .and_then(|done| done)
                .map_err(|e| ConnectError::fatal(format!("the background write to the target did not finish: {e}")))?;
            self.dialect = Some(dialect);
            count_committed(&self.progress, &mut f.chunks, &mut self.durable, &mut self.failures);
            self.progress.failed.store(false, Ordering::Release);
            if let Err(e) = result {
                tracing::warn!(error = %e, "a background write to the target failed; writing its records again");
                if let Some(ctx) = &self.ctx {
                    ctx.setback(&ConnectError::retriable_from("a background write to the target failed; writing its records again", e));
                }
                // Whether it committed is unknown until the offsets are read again.
                self.reread = true;
                self.held = f.chunks.into_iter().collect();
            }
        }
        if self.held.is_empty() {
            return Ok(true);
        }
        if let Err(e) = self.load_offsets().await {
            return Err(match e.kind {
                ErrorKind::Retriable => self.retry_or_fail(e).await,
                _ => ConnectError::fatal_from("cannot read the stored offsets", e),
            });
        }
        let connector = self.connector();
        while let Some(held) = self.held.first().cloned() {
            let rest: Vec<SinkRecord> = held.iter().filter(|r| not_durable(&self.durable, r)).cloned().collect();
            if !rest.is_empty() {
                self.write_chunk(&connector, &rest).await?;
            }
            self.held.remove(0);
        }
        Ok(false)
    }

    fn reporter(&self) -> Option<Arc<dyn ErrantRecordReporter>> {
        self.ctx.as_ref().and_then(|c| c.errant_record_reporter())
    }

    /// Hands a record that cannot be written to the runtime's error handling: `Ok` when it
    /// is tolerated (skipped, and dead-lettered when configured), else the error that fails
    /// the task.
    async fn skip(reporter: Option<Arc<dyn ErrantRecordReporter>>, record: &SinkRecord, error: ConnectError) -> ConnectResult<()> {
        match reporter {
            Some(reporter) => {
                tracing::warn!(topic = %record.topic, partition = record.partition, offset = record.offset, error = %error, "a record cannot be written; reporting it");
                reporter.report(record, error).await
            }
            None => Err(error),
        }
    }

    /// Writes one chunk and its offsets in one transaction. A record that cannot be written
    /// goes to [`Self::skip`]; the rest are written, and the offsets cover the skipped ones.
    async fn write_chunk(&mut self, connector: &str, chunk: &[SinkRecord]) -> ConnectResult<()> {
        let cfg = self.cfg.clone().expect("started");
        let (offsets, first) = batch::offsets(chunk);
        let mut remaining: Option<Vec<SinkRecord>> = None;
        loop {
            let records = remaining.as_deref().unwrap_or(chunk);
            let mut batch = match batch::build(&cfg, records, &mut self.topic_tables) {
                Ok(b) => b,
                Err(bad) => {
                    let at = records
                        .iter()
                        .position(|r| r.offset == bad.origin.offset && r.partition == bad.origin.partition && r.topic == bad.origin.topic)
                        .expect("a bad record comes from the batch");
                    Self::skip(
                        self.reporter(),
                        &records[at],
                        ConnectError::fatal(format!("cannot write the record at {}: {}", bad.origin, bad.reason)),
                    )
                    .await?;
                    let mut rest = records.to_vec();
                    rest.remove(at);
                    remaining = Some(rest);
                    continue;
                }
            };
            batch.offsets = offsets.clone();
            batch.first = first.clone();
            let dialect = self.dialect.as_mut().expect("started");
            match dialect.write(connector, &batch).await {
                Ok(()) => {
                    self.failures = 0;
                    advance(&mut self.durable, batch.offsets);
                    return Ok(());
                }
                Err(e) => match e.kind {
                    ErrorKind::Retriable => return Err(self.retry_or_fail(e).await),
                    ErrorKind::Fatal => return Err(ConnectError::fatal_from("cannot write to the target", e)),
                    ErrorKind::Data => {
                        let records = records.to_vec();
                        let (at, error) = self.find_bad(&records, e).await?;
                        Self::skip(self.reporter(), &records[at], error).await?;
                        let mut rest = records;
                        rest.remove(at);
                        remaining = Some(rest);
                    }
                },
            }
        }
    }
}

/// The sizes of the chunks `n` records are written in: as few as `batch_size` allows, of
/// equal size (within one), so a put never ends in a small remainder transaction.
fn chunk_sizes(n: usize, batch_size: usize) -> impl Iterator<Item = usize> {
    let count = n.div_ceil(batch_size.max(1));
    (0..count).map(move |i| n / count + usize::from(i < n % count))
}

/// Takes the chunks the background writes committed so far off the front of `chunks`, and
/// moves `durable` to their next offsets.
fn count_committed(
    progress: &Progress,
    chunks: &mut VecDeque<Arc<Vec<SinkRecord>>>,
    durable: &mut BTreeMap<TopicPartition, i64>,
    failures: &mut u32,
) {
    for _ in 0..progress.committed.swap(0, Ordering::AcqRel) {
        let chunk = chunks.pop_front().expect("a committed chunk was in flight");
        *failures = 0;
        advance(durable, batch::offsets(&chunk).0);
    }
}

/// Moves `durable` forward to `offsets` (a partition's next offset never goes back).
fn advance(durable: &mut BTreeMap<TopicPartition, i64>, offsets: impl IntoIterator<Item = (TopicPartition, i64)>) {
    for (tp, next) in offsets {
        let d = durable.entry(tp).or_insert(next);
        *d = (*d).max(next);
    }
}

/// Whether `r` is past what is durable in the target (its partition's next offset).
fn not_durable(durable: &BTreeMap<TopicPartition, i64>, r: &SinkRecord) -> bool {
    durable.get(&r.topic_partition()).is_none_or(|next| r.offset >= *next)
}

/// `records` in chunks of [`chunk_sizes`].
fn split(records: Vec<SinkRecord>, batch_size: usize) -> Vec<Arc<Vec<SinkRecord>>> {
    let sizes = chunk_sizes(records.len(), batch_size);
    let mut records = records.into_iter();
    sizes.map(|n| Arc::new(records.by_ref().take(n).collect())).collect()
}

/// Builds every chunk's batch in order, on a blocking thread, from `tables` (the topic →
/// table map so far); gives back the batches and the map after them.
fn build_all(
    cfg: &Arc<JdbcSinkConfig>,
    chunks: &[Arc<Vec<SinkRecord>>],
    mut tables: HashMap<String, TableName>,
) -> tokio::task::JoinHandle<Built> {
    let (cfg, chunks) = (cfg.clone(), chunks.to_vec());
    tokio::task::spawn_blocking(move || {
        let batches = chunks.iter().map(|c| batch::build(&cfg, c, &mut tables)).collect();
        (batches, tables)
    })
}

#[async_trait]
impl SinkTask for JdbcSinkTask {
    async fn start(&mut self, ctx: SinkTaskContext) -> ConnectResult<()> {
        let cfg = Arc::new(JdbcSinkConfig::parse(&ctx.props)?);
        let mut dialect: Box<dyn Dialect> = Box::new(PgWriter::new(cfg.clone()));
        match dialect.connect().await {
            Ok(()) => {}
            Err(e) if e.kind == ErrorKind::Retriable => tracing::warn!(error = %e, "the target is not reachable yet; writes wait for it"),
            Err(e) => return Err(ConnectError::fatal_from("cannot use the target database", e)),
        }
        self.cfg = Some(cfg);
        self.ctx = Some(ctx);
        self.dialect = Some(dialect);
        Ok(())
    }

    async fn open(&mut self, partitions: &[TopicPartition]) -> ConnectResult<()> {
        self.unread.extend(partitions.iter().cloned());
        self.assigned.extend(partitions.iter().cloned());
        // The offsets are read with the dialect, which the writes in the background hold.
        if let Err(e) = self.settle().await {
            tracing::warn!(error = %e, "the writes before new partitions failed; put writes them again");
            return Ok(());
        }
        if let Err(e) = self.load_offsets().await {
            // Not fatal: put reads them before it writes anything.
            tracing::warn!(error = %e, "cannot read the stored offsets yet");
        }
        Ok(())
    }

    async fn put(&mut self, records: Vec<SinkRecord>) -> ConnectResult<()> {
        if records.is_empty() {
            return Ok(());
        }
        let cfg = self.cfg.clone().expect("started");
        let pending: Vec<SinkRecord> = records.into_iter().filter(|r| not_durable(&self.durable, r)).collect();
        let mut chunks = split(pending, cfg.batch_size);
        // The batches are built (on another thread) while earlier puts are still written.
        let early = (self.in_flight.is_some() && self.held.is_empty() && !self.reread && self.unread.is_empty())
            .then(|| build_all(&cfg, &chunks, self.topic_tables.clone()));
        // Writes go on in the background unless one failed, or the offsets must be read.
        let mut clean = true;
        if self.progress.failed.load(Ordering::Acquire) || !self.held.is_empty() || self.reread || !self.unread.is_empty() {
            clean = self.settle().await?;
        }
        let permit = self.ahead.get_or_insert_with(|| Arc::new(tokio::sync::Semaphore::new(WRITES_AHEAD))).clone();
        let permit = permit.acquire_owned().await.map_err(|e| ConnectError::fatal(format!("the background writes stopped: {e}")))?;
        self.harvest();
        if self.progress.failed.load(Ordering::Acquire) {
            clean = self.settle().await? && clean;
        }
        if let Err(e) = self.load_offsets().await {
            return Err(match e.kind {
                ErrorKind::Retriable => self.retry_or_fail(e).await,
                _ => ConnectError::fatal_from("cannot read the stored offsets", e),
            });
        }
        let early = match early {
            Some(handle) => Some(handle.await.map_err(|e| ConnectError::fatal(format!("building a batch failed: {e}")))?),
            None => None,
        };
        let current = |r: &SinkRecord| not_durable(&self.durable, r);
        // What settle or the offsets changed invalidates the early build.
        let unchanged = chunks.iter().all(|c| c.iter().all(current));
        let (batches, tables) = match early.filter(|_| clean && unchanged) {
            Some(built) => built,
            None => {
                if !unchanged {
                    let rest: Vec<SinkRecord> = chunks.iter().flat_map(|c| c.iter().filter(|r| current(r)).cloned()).collect();
                    chunks = split(rest, cfg.batch_size);
                }
                build_all(&cfg, &chunks, self.topic_tables.clone())
                    .await
                    .map_err(|e| ConnectError::fatal(format!("building a batch failed: {e}")))?
            }
        };
        if chunks.is_empty() {
            return Ok(());
        }
        let connector = self.connector();
        if batches.iter().all(Result::is_ok) {
            self.topic_tables = tables;
            let batches: Vec<Batch> = batches.into_iter().flatten().collect();
            // After the writes before these, with the dialect they give back.
            let (before, mut queued) = match self.in_flight.take() {
                Some(f) => (Err(f.head), f.chunks),
                None => (Ok(self.dialect.take().expect("started")), VecDeque::new()),
            };
            let progress = self.progress.clone();
            let head = tokio::spawn(async move {
                let _permit = permit;
                let mut dialect = match before {
                    Ok(dialect) => dialect,
                    Err(head) => match head.await {
                        Ok(Ok((dialect, Ok(())))) => dialect,
                        // A write before these failed: they wait to be written again.
                        Ok(Ok(failed)) => return Ok(failed),
                        Ok(Err(e)) => return Err(e),
                        Err(e) => return Err(e.to_string()),
                    },
                };
                for batch in &batches {
                    if let Err(e) = dialect.write(&connector, batch).await {
                        progress.failed.store(true, Ordering::Release);
                        return Ok((dialect, Err(e)));
                    }
                    progress.committed.fetch_add(1, Ordering::AcqRel);
                }
                Ok((dialect, Ok(())))
            });
            queued.extend(chunks);
            self.in_flight = Some(InFlight { chunks: queued, head });
            return Ok(());
        }
        // A record cannot be turned into a change: chunk by chunk here, where the error
        // handling is (each chunk built again, after the records skipped before it).
        drop(permit);
        self.settle().await?;
        for chunk in &chunks {
            self.write_chunk(&connector, chunk).await?;
        }
        Ok(())
    }

    /// Several batches per put: the next one is built while one is written.
    fn max_put_bytes(&self) -> Option<usize> {
        Some(4 << 20)
    }

    /// Exactly what the target has committed, never past what was put.
    async fn pre_commit(&mut self, current: &BTreeMap<TopicPartition, i64>) -> ConnectResult<BTreeMap<TopicPartition, i64>> {
        self.settle().await?;
        Ok(current.iter().filter_map(|(tp, cur)| self.durable.get(tp).map(|d| (tp.clone(), (*d).min(*cur)))).collect())
    }

    async fn close(&mut self, partitions: &[TopicPartition]) -> ConnectResult<()> {
        if let Err(e) = self.settle().await {
            // What is not durable is read again by whoever gets the partitions.
            tracing::warn!(error = %e, "the last write before a rebalance failed");
            self.held.clear();
        }
        for tp in partitions {
            self.durable.remove(tp);
            self.unread.remove(tp);
            self.assigned.remove(tp);
        }
        Ok(())
    }

    async fn stop(&mut self) -> ConnectResult<()> {
        if let Err(e) = self.settle().await {
            tracing::warn!(error = %e, "the last write before stopping failed; its records are read again at the next start");
        }
        self.held.clear();
        self.dialect = None;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::chunk_sizes;

    #[test]
    fn chunks_are_even_and_never_over_the_batch_size() {
        let sizes = |n, b| chunk_sizes(n, b).collect::<Vec<_>>();
        assert_eq!(sizes(3231, 3000), [1616, 1615]);
        assert_eq!(sizes(7, 3), [3, 2, 2]);
        assert_eq!(sizes(6000, 3000), [3000, 3000]);
        assert_eq!(sizes(1, 500), [1]);
        assert_eq!(sizes(0, 500), Vec::<usize>::new());
        for n in 0..200 {
            for b in 1..20 {
                let s = sizes(n, b);
                assert_eq!(s.iter().sum::<usize>(), n);
                assert!(s.iter().all(|&c| c >= 1 && c <= b), "{n} {b} {s:?}");
                assert_eq!(s.len(), n.div_ceil(b));
            }
        }
    }
}
