use async_trait::async_trait;
use sluice_api::{ConnectResult, SinkRecord, SinkTask, SinkTaskContext};

#[derive(Default)]
pub struct DiscardTask {
    records: u64,
}

#[async_trait]
impl SinkTask for DiscardTask {
    async fn start(&mut self, _ctx: SinkTaskContext) -> ConnectResult<()> {
        Ok(())
    }

    async fn put(&mut self, records: Vec<SinkRecord>) -> ConnectResult<()> {
        self.records += records.len() as u64;
        Ok(())
    }

    async fn stop(&mut self) -> ConnectResult<()> {
        tracing::info!(records = self.records, "discard sink stopped");
        Ok(())
    }
}
