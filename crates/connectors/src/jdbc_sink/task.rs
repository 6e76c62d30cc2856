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
//! ## The last chunk of a put is written in the background
//! `put` returns once the last chunk's transaction is on its way; the runtime reads and
//! converts the next records and the next `put` builds its first batch meanwhile (from the
//! offsets known then; it is built again if the write fails or the offsets change), so the
//! target and this process work at the same time across puts too. The next `put`,
//! `pre_commit`, `close` and `stop` first wait for that write ([`JdbcSinkTask::settle`]).
//! Its records are kept until it is durable: when it fails, they are written again
//! (through the usual error handling: retry, find the bad record, dead-letter it) before
//! anything newer, and a retriable failure is reported by the call that found it, the
//! records staying held for the next attempt. `durable` moves only when a write commits.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use sluice_api::{ConnectError, ConnectResult, ErrantRecordReporter, SinkRecord, SinkTask, SinkTaskContext, TopicPartition};

use super::batch::{self, BadRecord, Batch, TableName};

/// A batch built ahead, and the topic → table map after it.
type Built = (Result<Batch, BadRecord>, HashMap<String, TableName>);
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
    /// The write in the background, holding the dialect while it runs.
    in_flight: Option<InFlight>,
    /// Records of a background write that failed, to be written before anything newer.
    held: Option<Arc<Vec<SinkRecord>>>,
}

/// A chunk being written in the background, and its records until it is durable.
struct InFlight {
    records: Arc<Vec<SinkRecord>>,
    handle: tokio::task::JoinHandle<Written>,
}

/// What a background write gives back: the dialect, the batch and how the write went.
type Written = (Box<dyn Dialect>, Batch, Result<(), WriteError>);

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
            for (tp, next) in stored.into_iter().filter(|(tp, _)| self.assigned.contains(tp)) {
                let d = self.durable.entry(tp).or_insert(next);
                *d = (*d).max(next);
            }
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
        let origin = batch::Origin { topic: r.topic.clone(), partition: r.partition, offset: r.offset, key: batch::describe_key(&r.key) };
        Ok((bad - 1, ConnectError::fatal_from(format!("cannot write the record at {origin}: {}", error.message), error)))
    }

    /// Waits for the background write, if any, and makes its outcome count: on success
    /// its offsets are durable; on failure its records are written again here, with the
    /// usual error handling. An error leaves the records held for the next call. `true`
    /// when nothing but `durable` changed (no write failed, nothing was written again).
    async fn settle(&mut self) -> ConnectResult<bool> {
        if let Some(InFlight { records, handle }) = self.in_flight.take() {
            let (dialect, batch, result) = match handle.await {
                Ok(done) => done,
                Err(e) => return Err(ConnectError::fatal(format!("the background write to the target did not finish: {e}"))),
            };
            self.dialect = Some(dialect);
            match result {
                Ok(()) => {
                    self.failures = 0;
                    for (tp, next) in batch.offsets {
                        let d = self.durable.entry(tp).or_insert(next);
                        *d = (*d).max(next);
                    }
                }
                Err(e) => {
                    tracing::warn!(error = %e, "a background write to the target failed; writing its records again");
                    // Whether it committed is unknown until the offsets are read again.
                    self.reread = true;
                    self.held = Some(records);
                }
            }
        }
        let Some(held) = self.held.clone() else { return Ok(true) };
        if let Err(e) = self.load_offsets().await {
            return Err(match e.kind {
                ErrorKind::Retriable => self.retry_or_fail(e).await,
                _ => ConnectError::fatal_from("cannot read the stored offsets", e),
            });
        }
        let durable = &self.durable;
        let rest: Vec<SinkRecord> =
            held.iter().filter(|r| durable.get(&r.topic_partition()).is_none_or(|next| r.offset >= *next)).cloned().collect();
        if !rest.is_empty() {
            let connector = self.connector();
            self.write_chunk(&connector, &rest, None).await?;
        }
        self.held = None;
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
    /// `built`: the chunk's batch when it was built ahead (with `topic_tables` already
    /// advanced past it). Returns whether the chunk was written as built, without a record
    /// skipped.
    async fn write_chunk(
        &mut self,
        connector: &str,
        chunk: &[SinkRecord],
        mut built: Option<Result<Batch, BadRecord>>,
    ) -> ConnectResult<bool> {
        let cfg = self.cfg.clone().expect("started");
        let offsets = batch::next_offsets(chunk);
        let first = batch::first_offsets(chunk);
        let mut remaining: Option<Vec<SinkRecord>> = None;
        loop {
            let records = remaining.as_deref().unwrap_or(chunk);
            let built = match built.take() {
                Some(b) => b,
                None => batch::build(&cfg, records, &mut self.topic_tables),
            };
            let mut batch = match built {
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
                    for (tp, next) in batch.offsets {
                        let d = self.durable.entry(tp).or_insert(next);
                        *d = (*d).max(next);
                    }
                    return Ok(remaining.is_none());
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
        let durable = &self.durable;
        let applied = |r: &SinkRecord| durable.get(&r.topic_partition()).is_some_and(|next| r.offset < *next);
        let mut pending: Vec<SinkRecord> = records.into_iter().filter(|r| !applied(r)).collect();
        // The first chunk is built while the last put's last chunk is still being written.
        let early: Option<Built> = (self.in_flight.is_some() && self.held.is_none() && !self.reread && self.unread.is_empty()).then(|| {
            let mut tables = self.topic_tables.clone();
            let first = chunk_sizes(pending.len(), cfg.batch_size).next().unwrap_or(0);
            (batch::build(&cfg, &pending[..first], &mut tables), tables)
        });
        let clean = self.settle().await?;
        if let Err(e) = self.load_offsets().await {
            return Err(match e.kind {
                ErrorKind::Retriable => self.retry_or_fail(e).await,
                _ => ConnectError::fatal_from("cannot read the stored offsets", e),
            });
        }
        let before = pending.len();
        let durable = &self.durable;
        pending.retain(|r| durable.get(&r.topic_partition()).is_none_or(|next| r.offset >= *next));
        // What settle or the offsets changed invalidates the early build.
        let mut early = early.filter(|_| clean && pending.len() == before);
        let connector = self.connector();
        let sizes = chunk_sizes(pending.len(), cfg.batch_size);
        let mut pending = pending.into_iter();
        let chunks: Vec<Arc<Vec<SinkRecord>>> = sizes.map(|n| Arc::new(pending.by_ref().take(n).collect())).collect();
        // While one chunk is written, the next one is built on another thread: the target
        // and this process work at the same time.
        let mut ahead: Option<tokio::task::JoinHandle<Built>> = None;
        for (i, chunk) in chunks.iter().enumerate() {
            // Built early (the first chunk), ahead on another thread, or here.
            let prebuilt = match (early.take(), ahead.take()) {
                (Some(b), _) => Some(b),
                (None, Some(handle)) => Some(handle.await.map_err(|e| ConnectError::fatal(format!("building a batch failed: {e}")))?),
                (None, None) => None,
            };
            let built = Some(match prebuilt {
                Some((batch, tables)) => {
                    self.topic_tables = tables;
                    batch
                }
                None => batch::build(&cfg, chunk, &mut self.topic_tables),
            });
            if let Some(next) = chunks.get(i + 1).filter(|_| built.as_ref().is_some_and(Result::is_ok)) {
                let (cfg, next, mut tables) = (cfg.clone(), next.clone(), self.topic_tables.clone());
                ahead = Some(tokio::task::spawn_blocking(move || (batch::build(&cfg, &next, &mut tables), tables)));
            }
            if i + 1 == chunks.len() {
                if let Some(Ok(mut batch)) = built {
                    // The last chunk: written in the background (see the module docs).
                    batch.offsets = batch::next_offsets(chunk);
                    batch.first = batch::first_offsets(chunk);
                    let mut dialect = self.dialect.take().expect("started");
                    let connector = connector.clone();
                    let handle = tokio::spawn(async move {
                        let result = dialect.write(&connector, &batch).await;
                        (dialect, batch, result)
                    });
                    self.in_flight = Some(InFlight { records: chunk.clone(), handle });
                    break;
                }
            }
            if !self.write_chunk(&connector, chunk, built).await? {
                // A record was skipped: the batch built ahead may name tables as the
                // skipped record left them; build it again.
                ahead = None;
            }
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
            self.held = None;
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
        self.held = None;
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
