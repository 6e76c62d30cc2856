use std::time::Duration;

use async_trait::async_trait;
use serde_json::json;
use sluice_api::{
    ConnectError, ConnectResult, Schema, SchemaRef, SourceOffset, SourcePartition, SourceRecord, SourceTask, SourceTaskContext, Value,
};
use tokio::io::{AsyncReadExt, AsyncSeekExt};
use tokio_util::sync::CancellationToken;

use super::config::FileSourceConfig;

/// How long `poll` waits for the file to grow before returning an empty batch.
const IDLE_WAIT: Duration = Duration::from_millis(100);
const READ_CHUNK: usize = 64 * 1024;

#[derive(Default)]
pub struct FileSourceTask {
    config: Option<FileSourceConfig>,
    file: Option<tokio::fs::File>,
    /// Byte position just after the last line handed out.
    position: u64,
    /// Bytes read past `position` that do not yet end a line.
    buffer: Vec<u8>,
    partition: SourcePartition,
    schema: Option<SchemaRef>,
    shutdown: CancellationToken,
    warned_missing: bool,
}

impl FileSourceTask {
    async fn open(&mut self, path: &str) -> ConnectResult<bool> {
        match tokio::fs::File::open(path).await {
            Ok(mut f) => {
                f.seek(std::io::SeekFrom::Start(self.position))
                    .await
                    .map_err(|e| ConnectError::retriable_from(format!("could not seek {path} to {}", self.position), e))?;
                tracing::debug!(file = path, position = self.position, "opened source file");
                self.file = Some(f);
                self.buffer.clear();
                Ok(true)
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                if !self.warned_missing {
                    tracing::warn!(file = path, "couldn't find the file; waiting for it to be created");
                    self.warned_missing = true;
                }
                Ok(false)
            }
            // As Kafka's FileStreamSourceTask: only a missing file is waited for; any other
            // reason (permission denied, a path through a regular file) fails the task.
            Err(e) => Err(ConnectError::fatal_from(format!("could not open {path}"), e)),
        }
    }

    async fn idle(&self) {
        tokio::select! {
            _ = tokio::time::sleep(IDLE_WAIT) => {}
            _ = self.shutdown.cancelled() => {}
        }
    }
}

/// The next complete line in `buf` and the bytes it takes with its terminator
/// (`\n`, `\r` or `\r\n`, as Kafka's FileStreamSourceTask splits lines).
fn next_line(buf: &[u8]) -> Option<(&[u8], usize)> {
    let end = buf.iter().position(|b| *b == b'\n' || *b == b'\r')?;
    if buf[end] == b'\r' {
        match buf.get(end + 1) {
            Some(b'\n') => return Some((&buf[..end], end + 2)),
            // A `\r` at the end of what we have may be followed by `\n`: wait for more.
            None => return None,
            Some(_) => {}
        }
    }
    Some((&buf[..end], end + 1))
}

#[async_trait]
impl SourceTask for FileSourceTask {
    async fn start(&mut self, ctx: SourceTaskContext) -> ConnectResult<()> {
        let config = FileSourceConfig::parse(&ctx.props)?;
        if config.file.is_empty() {
            return Err(ConnectError::config("file", "reading standard input is not supported by a worker; set file"));
        }
        self.partition.insert("filename".to_owned(), json!(config.file));
        if let Some(offset) = ctx.offsets.offset(&self.partition) {
            self.position = offset
                .get("position")
                .and_then(|p| p.as_u64())
                .ok_or_else(|| ConnectError::fatal(format!("stored offset {offset:?} for {} has no numeric position", config.file)))?;
        }
        self.schema = Some(Schema::string().into_ref());
        self.shutdown = ctx.shutdown.clone();
        self.config = Some(config);
        Ok(())
    }

    async fn poll(&mut self) -> ConnectResult<Vec<SourceRecord>> {
        let config = self.config.clone().ok_or_else(|| ConnectError::fatal("poll before start"))?;
        if self.file.is_none() && !self.open(&config.file).await? {
            self.idle().await;
            return Ok(Vec::new());
        }
        let mut records = Vec::new();
        loop {
            while records.len() < config.batch_size {
                let Some((line, used)) = next_line(&self.buffer) else { break };
                let text = String::from_utf8_lossy(line).into_owned();
                self.buffer.drain(..used);
                self.position += used as u64;
                let mut offset = SourceOffset::new();
                offset.insert("position".to_owned(), json!(self.position));
                records.push(SourceRecord {
                    source_partition: self.partition.clone(),
                    source_offset: offset,
                    topic: config.topic.clone(),
                    value_schema: self.schema.clone(),
                    value: Value::String(text),
                    ..SourceRecord::default()
                });
            }
            if records.len() >= config.batch_size {
                return Ok(records);
            }
            let file = self.file.as_mut().expect("opened above");
            let start = self.buffer.len();
            self.buffer.resize(start + READ_CHUNK, 0);
            let n = file
                .read(&mut self.buffer[start..])
                .await
                .map_err(|e| ConnectError::retriable_from(format!("error reading {}", config.file), e));
            let n = match n {
                Ok(n) => n,
                Err(e) => {
                    self.buffer.truncate(start);
                    self.file = None;
                    return Err(e);
                }
            };
            self.buffer.truncate(start + n);
            if n == 0 {
                if records.is_empty() {
                    self.idle().await;
                }
                return Ok(records);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_lines_like_kafka() {
        assert_eq!(next_line(b"a\nb"), Some((&b"a"[..], 2)));
        assert_eq!(next_line(b"a\r\nb"), Some((&b"a"[..], 3)));
        assert_eq!(next_line(b"a\rb"), Some((&b"a"[..], 2)));
        assert_eq!(next_line(b"a\r"), None, "a trailing \\r may be half of \\r\\n");
        assert_eq!(next_line(b"abc"), None);
    }
}
