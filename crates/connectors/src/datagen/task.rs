use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use serde_json::json;
use sluice_api::{ConnectError, ConnectResult, SourceOffset, SourcePartition, SourceRecord, SourceTask, SourceTaskContext};
use tokio_util::sync::CancellationToken;

use super::config::DatagenConfig;
use super::shape::Shape;

#[derive(Default)]
pub struct DatagenTask {
    config: Option<DatagenConfig>,
    shape: Option<Shape>,
    rng: fastrand::Rng,
    partition: SourcePartition,
    /// Rows generated so far (the next row's number).
    iteration: i64,
    started: Option<Instant>,
    /// Rows generated since `started` (for the rate limit).
    since_start: u64,
    shutdown: CancellationToken,
}

fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}

#[async_trait]
impl SourceTask for DatagenTask {
    async fn start(&mut self, ctx: SourceTaskContext) -> ConnectResult<()> {
        let config = DatagenConfig::parse(&ctx.props)?;
        let task_id: i64 = ctx.props.get("task.id").and_then(|t| t.parse().ok()).unwrap_or(i64::from(ctx.task_id));
        self.partition.insert("task.id".to_owned(), json!(task_id));
        if let Some(offset) = ctx.offsets.offset(&self.partition) {
            self.iteration = offset
                .get("current.iteration")
                .and_then(|v| v.as_i64())
                .ok_or_else(|| ConnectError::fatal(format!("stored offset {offset:?} has no current.iteration")))?;
        }
        self.rng = fastrand::Rng::with_seed(config.seed.wrapping_add(task_id as u64).wrapping_add(self.iteration as u64));
        self.shape = Some(Shape::new(&config.shape, config.payload_bytes, task_id as i32));
        self.shutdown = ctx.shutdown.clone();
        self.config = Some(config);
        Ok(())
    }

    async fn poll(&mut self) -> ConnectResult<Vec<SourceRecord>> {
        let config = self.config.as_ref().ok_or_else(|| ConnectError::fatal("poll before start"))?;
        let shape = self.shape.as_ref().expect("started");
        let remaining = if config.iterations < 0 { i64::MAX } else { config.iterations - self.iteration };
        if remaining <= 0 {
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(500)) => {}
                _ = self.shutdown.cancelled() => {}
            }
            return Ok(Vec::new());
        }
        let mut n = (config.batch_size as i64).min(remaining) as usize;
        if config.records_per_second > 0 {
            let started = *self.started.get_or_insert_with(Instant::now);
            let allowed = (started.elapsed().as_secs_f64() * config.records_per_second as f64) as u64;
            if allowed <= self.since_start {
                let wait = Duration::from_secs_f64(1.0 / config.records_per_second as f64).min(Duration::from_millis(100));
                tokio::select! {
                    _ = tokio::time::sleep(wait) => {}
                    _ = self.shutdown.cancelled() => {}
                }
                return Ok(Vec::new());
            }
            n = n.min((allowed - self.since_start) as usize);
        } else if config.max_interval_ms > 0 {
            let wait = self.rng.u64(0..=config.max_interval_ms);
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(wait)) => {}
                _ = self.shutdown.cancelled() => return Ok(Vec::new()),
            }
            n = 1;
        }
        let now = now_ms();
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            let (key, value) = shape.row(self.iteration, now, &mut self.rng);
            self.iteration += 1;
            let mut offset = SourceOffset::new();
            offset.insert("current.iteration".to_owned(), json!(self.iteration));
            out.push(SourceRecord {
                source_partition: self.partition.clone(),
                source_offset: offset,
                topic: config.topic.clone(),
                partition: None,
                key_schema: Some(shape.key_schema.clone()),
                key,
                value_schema: Some(shape.value_schema.clone()),
                value,
                timestamp: Some(now),
                headers: Default::default(),
            });
        }
        self.since_start += n as u64;
        Ok(out)
    }
}
