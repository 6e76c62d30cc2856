use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use sluice_api::{ConnectError, ConnectResult, SinkRecord, SinkTask, SinkTaskContext, TopicPartition};

use super::config::S3SinkConfig;
use super::partitioner::Partitioner;
use super::storage::Store;
use super::writer::{PartitionWriter, Shared};

fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or_default()
}

#[derive(Default)]
pub struct S3SinkTask {
    shared: Option<Arc<Shared>>,
    writers: BTreeMap<TopicPartition, PartitionWriter>,
}

impl S3SinkTask {
    fn shared(&self) -> ConnectResult<Arc<Shared>> {
        self.shared.clone().ok_or_else(|| ConnectError::fatal("the S3 sink task was used before start"))
    }
}

#[async_trait]
impl SinkTask for S3SinkTask {
    async fn start(&mut self, ctx: SinkTaskContext) -> ConnectResult<()> {
        let cfg = S3SinkConfig::parse(&ctx.props)?;
        let store = Store::connect(&cfg, Some(ctx.setbacks())).await;
        match store.check_bucket().await {
            Ok(()) => {}
            // Unreachable store: start anyway; writes retry until it answers.
            Err(e) if e.is_retriable() => {
                tracing::warn!(bucket = %cfg.bucket, error = %e.trace(), "the store did not answer at start; writes will retry")
            }
            Err(e) => return Err(e),
        }
        let partitioner = Partitioner::new(&cfg.partitioner, &cfg.directory_delim)?;
        if cfg.rotate_interval_ms.is_some() && !partitioner.is_time_based() {
            tracing::warn!(connector = %ctx.connector, "rotate.interval.ms is set but the partitioner is not time-based; it is ignored (as in Confluent's S3 sink)");
        }
        let timezone = match &cfg.timezone {
            Some(tz) => Some(jiff::tz::TimeZone::get(tz).map_err(|e| ConnectError::config("timezone", e.to_string()))?),
            None => None,
        };
        let extension = cfg.extension();
        self.shared = Some(Arc::new(Shared { cfg, store, partitioner, extension, timezone }));
        Ok(())
    }

    /// Creates the partitions' writers and aborts the multipart uploads a crashed
    /// predecessor left unfinished for them (their records are redelivered anyway).
    async fn open(&mut self, partitions: &[TopicPartition]) -> ConnectResult<()> {
        let shared = self.shared()?;
        let now = now_ms();
        for tp in partitions {
            let c = &shared.cfg;
            let prefix = format!("{}{}{}{}", c.topics_dir, c.directory_delim, tp.topic, c.directory_delim);
            let name = format!("{}{}{}{}", tp.topic, c.file_delim, tp.partition, c.file_delim);
            let n = shared.store.abort_stale_uploads(&prefix, &name).await;
            if n > 0 {
                tracing::info!(%tp, aborted = n, "aborted unfinished multipart uploads left by an earlier run");
            }
            self.writers.entry(tp.clone()).or_insert_with(|| PartitionWriter::new(tp.clone(), &shared, now));
        }
        Ok(())
    }

    async fn put(&mut self, records: Vec<SinkRecord>) -> ConnectResult<()> {
        let shared = self.shared()?;
        let now = now_ms();
        for r in &records {
            let tp = r.topic_partition();
            let w = self.writers.entry(tp.clone()).or_insert_with(|| PartitionWriter::new(tp, &shared, now));
            w.write(&shared, r, now).await?;
        }
        for w in self.writers.values_mut() {
            w.settle(&shared, now).await?;
        }
        Ok(())
    }

    /// Reports, per partition, the offset below which every record is in a completed object.
    /// Open objects are not uploaded here: their records are redelivered after a restart and
    /// land in the same objects.
    async fn pre_commit(&mut self, current: &BTreeMap<TopicPartition, i64>) -> ConnectResult<BTreeMap<TopicPartition, i64>> {
        let shared = self.shared()?;
        let now = now_ms();
        let mut out = BTreeMap::new();
        for (tp, w) in &mut self.writers {
            if let Err(e) = w.rotate_if_scheduled(&shared, now).await {
                tracing::warn!(%tp, error = %e.trace(), "scheduled rotation failed; will retry");
            }
            if let (Some(o), Some(_)) = (w.durable_offset(), current.get(tp)) {
                out.insert(tp.clone(), o);
            }
        }
        Ok(out)
    }

    async fn close(&mut self, partitions: &[TopicPartition]) -> ConnectResult<()> {
        let Some(shared) = self.shared.clone() else { return Ok(()) };
        for tp in partitions {
            if let Some(mut w) = self.writers.remove(tp) {
                w.abort(&shared).await;
            }
        }
        Ok(())
    }

    async fn stop(&mut self) -> ConnectResult<()> {
        let Some(shared) = self.shared.clone() else { return Ok(()) };
        for (_, mut w) in std::mem::take(&mut self.writers) {
            w.abort(&shared).await;
        }
        Ok(())
    }
}
