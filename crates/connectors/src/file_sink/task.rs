use std::collections::BTreeMap;

use async_trait::async_trait;
use sluice_api::{ConnectError, ConnectResult, SinkRecord, SinkTask, SinkTaskContext, TopicPartition};
use tokio::io::AsyncWriteExt;

use super::config::FileSinkConfig;
use crate::text::java_string;

#[derive(Default)]
pub struct FileSinkTask {
    path: String,
    file: Option<tokio::io::BufWriter<tokio::fs::File>>,
}

#[async_trait]
impl SinkTask for FileSinkTask {
    async fn start(&mut self, ctx: SinkTaskContext) -> ConnectResult<()> {
        let config = FileSinkConfig::parse(&ctx.props)?;
        if config.file.is_empty() {
            return Err(ConnectError::config("file", "writing to standard output is not supported by a worker; set file"));
        }
        let file = tokio::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&config.file)
            .await
            .map_err(|e| ConnectError::fatal_from(format!("couldn't find or create file '{}' for FileStreamSinkTask", config.file), e))?;
        self.file = Some(tokio::io::BufWriter::with_capacity(256 * 1024, file));
        self.path = config.file;
        Ok(())
    }

    async fn put(&mut self, records: Vec<SinkRecord>) -> ConnectResult<()> {
        let file = self.file.as_mut().ok_or_else(|| ConnectError::fatal("put before start"))?;
        for r in records {
            let mut line = java_string(&r.value);
            line.push('\n');
            file.write_all(line.as_bytes()).await.map_err(|e| ConnectError::retriable_from(format!("error writing to {}", self.path), e))?;
        }
        Ok(())
    }

    async fn flush(&mut self, _current: &BTreeMap<TopicPartition, i64>) -> ConnectResult<()> {
        let Some(file) = self.file.as_mut() else { return Ok(()) };
        file.flush().await.map_err(|e| ConnectError::retriable_from(format!("error flushing {}", self.path), e))?;
        file.get_ref().sync_data().await.map_err(|e| ConnectError::retriable_from(format!("error syncing {}", self.path), e))
    }

    async fn stop(&mut self) -> ConnectResult<()> {
        if let Some(mut f) = self.file.take() {
            let _ = f.flush().await;
        }
        Ok(())
    }
}
