//! The sink task: batches records, writes them with their offsets in one transaction, and
//! resumes from the offsets stored in the target.
//!
//! ## Progress tracking
//! ```text
//! open(partitions) ─▶ read sluice_sink_offsets ─▶ ctx.request_offset(tp, next)
//! put(records) ─▶ drop records below the stored next offset (applied already)
//!              ─▶ per batch.size records: build Batch ─▶ Dialect::write (data + offsets, one tx)
//!              ─▶ durable[tp] = next offset of the batch
//! pre_commit(current) ─▶ durable (what the target has), never more than current
//! ```
//! After a failed write it is unknown whether the commit happened (the connection may
//! have dropped during COMMIT), so the next `put` reads the offsets again before writing:
//! a batch is applied once, whatever the runtime redelivers.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use sluice_api::{ConnectError, ConnectResult, SinkRecord, SinkTask, SinkTaskContext, TopicPartition};

use super::batch::{self, TableName};
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
    /// Set after a failed write: read every stored offset again before the next write.
    reread: bool,
    /// Consecutive failed writes.
    failures: u32,
    /// The table of each topic, for tombstones (see `batch::build`).
    topic_tables: HashMap<String, TableName>,
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
            for (tp, next) in &stored {
                if let Some(d) = self.durable.get_mut(tp) {
                    *d = (*d).max(*next);
                }
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

    /// After a data error on a batch: finds the record at fault by applying the records
    /// one by one (rolled back), and names it.
    async fn data_error(&mut self, records: &[SinkRecord], batch: &batch::Batch, e: WriteError) -> ConnectError {
        let cfg = self.cfg.clone().expect("started");
        let mut singles = Vec::with_capacity(records.len());
        let mut tables = self.topic_tables.clone();
        for r in records {
            match batch::build(&cfg, std::slice::from_ref(r), &mut tables) {
                Ok(b) => singles.push(b),
                Err(bad) => return ConnectError::fatal(format!("cannot write {}: {}", bad.origin, bad.reason)),
            }
        }
        let dialect = self.dialect.as_mut().expect("started");
        if let Some((i, single)) = dialect.find_failing(&singles).await {
            let origin = &singles[i].origins[0];
            return ConnectError::fatal_from(format!("cannot write the record at {origin}: {}", single.message), single);
        }
        match e.origin.and_then(|o| batch.origins.get(o)) {
            Some(origin) => ConnectError::fatal_from(format!("cannot write a batch (first record of the failing step: {origin})"), e),
            None => ConnectError::fatal_from("cannot write a batch", e),
        }
    }
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
        if let Err(e) = self.load_offsets().await {
            return Err(match e.kind {
                ErrorKind::Retriable => self.retry_or_fail(e).await,
                _ => ConnectError::fatal_from("cannot read the stored offsets", e),
            });
        }
        let durable = &self.durable;
        let pending: Vec<SinkRecord> =
            records.into_iter().filter(|r| durable.get(&r.topic_partition()).is_none_or(|next| r.offset >= *next)).collect();
        let cfg = self.cfg.clone().expect("started");
        let connector = self.connector();
        for chunk in pending.chunks(cfg.batch_size) {
            let batch = batch::build(&cfg, chunk, &mut self.topic_tables)
                .map_err(|bad| ConnectError::fatal(format!("cannot write the record at {}: {}", bad.origin, bad.reason)))?;
            let dialect = self.dialect.as_mut().expect("started");
            match dialect.write(&connector, &batch).await {
                Ok(()) => {
                    self.failures = 0;
                    for (tp, next) in batch.offsets {
                        let d = self.durable.entry(tp).or_insert(next);
                        *d = (*d).max(next);
                    }
                }
                Err(e) => {
                    return Err(match e.kind {
                        ErrorKind::Retriable => self.retry_or_fail(e).await,
                        ErrorKind::Data => self.data_error(chunk, &batch, e).await,
                        ErrorKind::Fatal => ConnectError::fatal_from("cannot write to the target", e),
                    })
                }
            }
        }
        Ok(())
    }

    /// Exactly what the target has committed, never past what was put.
    async fn pre_commit(&mut self, current: &BTreeMap<TopicPartition, i64>) -> ConnectResult<BTreeMap<TopicPartition, i64>> {
        Ok(current.iter().filter_map(|(tp, cur)| self.durable.get(tp).map(|d| (tp.clone(), (*d).min(*cur)))).collect())
    }

    async fn close(&mut self, partitions: &[TopicPartition]) -> ConnectResult<()> {
        for tp in partitions {
            self.durable.remove(tp);
            self.unread.remove(tp);
        }
        Ok(())
    }

    async fn stop(&mut self) -> ConnectResult<()> {
        self.dialect = None;
        Ok(())
    }
}
