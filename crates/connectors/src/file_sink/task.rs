use std::collections::BTreeMap;

use async_trait::async_trait;
use sluice_api::{ConnectError, ConnectResult, SinkRecord, SinkTask, SinkTaskContext, TopicPartition};
use tokio::io::AsyncWriteExt;

use super::config::FileSinkConfig;
use sluice_api::text::java_to_string;

/// A large put is written in pieces of about this size. Every write holds whole lines, so
/// tasks appending to one file never split each other's lines.
const WRITE_AT: usize = 256 * 1024;

#[derive(Default)]
pub struct FileSinkTask {
    path: String,
    file: Option<tokio::fs::File>,
    buffer: Vec<u8>,
}

impl FileSinkTask {
    async fn write_buffer(&mut self) -> ConnectResult<()> {
        let Some(file) = self.file.as_mut() else { return Ok(()) };
        if !self.buffer.is_empty() {
            file.write_all(&self.buffer).await.map_err(|e| ConnectError::retriable_from(format!("error writing to {}", self.path), e))?;
            self.buffer.clear();
        }
        Ok(())
    }
}

/// Cuts a trailing line without its newline: what a crash left half-written. Its record was
/// not committed (commits follow a flush of whole lines), so it is delivered again.
async fn drop_partial_line(path: &str) -> ConnectResult<()> {
    let p = path.to_owned();
    tokio::task::spawn_blocking(move || truncate_partial_line(&p))
        .await
        .map_err(|e| ConnectError::fatal_from("checking the sink file failed", e))?
        .map_err(|e| ConnectError::fatal_from(format!("cannot repair the end of {path}"), e))
}

fn truncate_partial_line(path: &str) -> std::io::Result<()> {
    use std::io::{Read as _, Seek as _, SeekFrom};
    let mut f = match std::fs::OpenOptions::new().read(true).write(true).open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    let len = f.metadata()?.len();
    let mut end = len;
    let mut chunk = vec![0u8; 64 * 1024];
    // Scan backwards for the last newline.
    let keep = loop {
        if end == 0 {
            break 0;
        }
        let start = end.saturating_sub(chunk.len() as u64);
        let n = (end - start) as usize;
        f.seek(SeekFrom::Start(start))?;
        f.read_exact(&mut chunk[..n])?;
        if end == len && chunk[n - 1] == b'\n' {
            return Ok(());
        }
        if let Some(i) = chunk[..n].iter().rposition(|b| *b == b'\n') {
            break start + i as u64 + 1;
        }
        end = start;
    };
    tracing::warn!(
        file = path,
        bytes = len - keep,
        "dropping a partially written last line left by a crash; its record will be written again"
    );
    f.set_len(keep)?;
    f.sync_all()
}

#[async_trait]
impl SinkTask for FileSinkTask {
    async fn start(&mut self, ctx: SinkTaskContext) -> ConnectResult<()> {
        let config = FileSinkConfig::parse(&ctx.props)?;
        if config.file.is_empty() {
            return Err(ConnectError::config("file", "writing to standard output is not supported by a worker; set file"));
        }
        drop_partial_line(&config.file).await?;
        let file =
            tokio::fs::OpenOptions::new().create(true).append(true).open(&config.file).await.map_err(|e| {
                ConnectError::fatal_from(format!("couldn't find or create file '{}' for FileStreamSinkTask", config.file), e)
            })?;
        self.file = Some(file);
        self.path = config.file;
        Ok(())
    }

    async fn put(&mut self, records: Vec<SinkRecord>) -> ConnectResult<()> {
        if self.file.is_none() {
            return Err(ConnectError::fatal("put before start"));
        }
        for r in records {
            self.buffer.extend_from_slice(java_to_string(r.value_schema.as_deref(), &r.value).as_bytes());
            self.buffer.push(b'\n');
            if self.buffer.len() >= WRITE_AT {
                self.write_buffer().await?;
            }
        }
        // Lines reach the file with every put, as Kafka's sink prints them; `flush` makes
        // them durable before offsets are committed.
        self.write_buffer().await
    }

    async fn flush(&mut self, _current: &BTreeMap<TopicPartition, i64>) -> ConnectResult<()> {
        self.write_buffer().await?;
        let Some(file) = self.file.as_mut() else { return Ok(()) };
        file.sync_data().await.map_err(|e| ConnectError::retriable_from(format!("error syncing {}", self.path), e))
    }

    async fn stop(&mut self) -> ConnectResult<()> {
        if let Err(e) = self.write_buffer().await {
            tracing::warn!(file = %self.path, error = %e, "could not write the last lines on stop; they will be delivered again");
        }
        self.file = None;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_torn_last_line_is_cut() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("out.txt");
        let p = p.to_str().unwrap();
        truncate_partial_line(p).unwrap();
        std::fs::write(p, "a\nb\nc-par").unwrap();
        truncate_partial_line(p).unwrap();
        assert_eq!(std::fs::read_to_string(p).unwrap(), "a\nb\n");
        truncate_partial_line(p).unwrap();
        assert_eq!(std::fs::read_to_string(p).unwrap(), "a\nb\n");
        std::fs::write(p, "no newline at all").unwrap();
        truncate_partial_line(p).unwrap();
        assert_eq!(std::fs::read_to_string(p).unwrap(), "");
        let long = format!("{}\n{}", "x".repeat(100_000), "y".repeat(70_000));
        std::fs::write(p, &long).unwrap();
        truncate_partial_line(p).unwrap();
        assert_eq!(std::fs::read_to_string(p).unwrap().len(), 100_001);
    }
}
