//! Topics and partitions on disk: `topic.json`, the partition directories, recovery at
//! open and reads.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicI64;
use std::sync::{Arc, Mutex, RwLock};

use serde::{Deserialize, Serialize};
use sluice_api::TopicPartition;
use tokio::sync::watch;

use super::super::{CleanupPolicy, LogError, LogResult, PartitionDescription, StoredRecord, TopicConfig};
use super::segment::{self, Scan, Segment};
use super::{io_error, lock, read_lock, sync_dir, write_lock};

pub(super) const TOPIC_FILE: &str = "topic.json";
const MAX_TOPIC_NAME: usize = 249;
const MAX_PARTITIONS: i32 = 100_000;

/// Kafka's rule: 1 to 249 of `[a-zA-Z0-9._-]`, and not `.` or `..`.
pub(super) fn validate_topic_name(name: &str) -> LogResult<()> {
    let legal = !name.is_empty()
        && name.len() <= MAX_TOPIC_NAME
        && name != "."
        && name != ".."
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if legal {
        Ok(())
    } else {
        Err(LogError::Invalid(format!(
            "topic name {name:?} is not legal: use 1 to {MAX_TOPIC_NAME} characters from [a-zA-Z0-9._-], not `.` or `..`"
        )))
    }
}

pub(super) fn validate_config(name: &str, config: &TopicConfig) -> LogResult<()> {
    if config.partitions < 1 || config.partitions > MAX_PARTITIONS {
        return Err(LogError::Invalid(format!("topic {name} needs between 1 and {MAX_PARTITIONS} partitions (got {})", config.partitions)));
    }
    Ok(())
}

/// `topic.json`.
#[derive(Serialize, Deserialize)]
struct TopicFile {
    partitions: i32,
    cleanup: String,
    retention_ms: Option<i64>,
    retention_bytes: Option<i64>,
}

impl TopicFile {
    fn from_config(c: &TopicConfig) -> Self {
        Self {
            partitions: c.partitions,
            cleanup: c.cleanup.name().into(),
            retention_ms: c.retention_ms,
            retention_bytes: c.retention_bytes,
        }
    }

    fn into_config(self, path: &Path) -> LogResult<TopicConfig> {
        let cleanup = match self.cleanup.as_str() {
            "delete" => CleanupPolicy::Delete,
            "compact" => CleanupPolicy::Compact,
            other => return Err(LogError::Invalid(format!("{}: unknown cleanup policy {other:?}", path.display()))),
        };
        Ok(TopicConfig {
            partitions: self.partitions,
            cleanup,
            retention_ms: self.retention_ms,
            retention_bytes: self.retention_bytes,
            replication_factor: None,
        })
    }
}

/// Writes `bytes` to `path` atomically: temp file, fsync, rename, fsync of the directory.
pub(super) fn write_atomically(path: &Path, bytes: &[u8]) -> LogResult<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    let file = fs::File::create(&tmp).map_err(|e| io_error(&tmp, e))?;
    std::io::Write::write_all(&mut &file, bytes).map_err(|e| io_error(&tmp, e))?;
    file.sync_all().map_err(|e| io_error(&tmp, e))?;
    fs::rename(&tmp, path).map_err(|e| io_error(path, e))?;
    sync_dir(path.parent().unwrap_or(Path::new(".")))
}

pub(super) fn read_topic_file(dir: &Path) -> LogResult<TopicConfig> {
    let path = dir.join(TOPIC_FILE);
    let bytes = fs::read(&path).map_err(|e| io_error(&path, e))?;
    let file: TopicFile =
        serde_json::from_slice(&bytes).map_err(|e| LogError::Invalid(format!("{} is not a valid topic file: {e}", path.display())))?;
    let config = file.into_config(&path)?;
    validate_config(&dir.display().to_string(), &config)?;
    Ok(config)
}

pub(super) fn write_topic_file(dir: &Path, config: &TopicConfig) -> LogResult<()> {
    let bytes = serde_json::to_vec_pretty(&TopicFile::from_config(config))
        .map_err(|e| LogError::Invalid(format!("cannot encode the topic file: {e}")))?;
    write_atomically(&dir.join(TOPIC_FILE), &bytes)
}

pub(super) struct Topic {
    pub name: String,
    pub config: TopicConfig,
    pub partitions: Vec<Arc<Partition>>,
}

impl Topic {
    pub(super) fn partition(&self, partition: i32) -> LogResult<&Arc<Partition>> {
        usize::try_from(partition).ok().and_then(|p| self.partitions.get(p)).ok_or_else(|| LogError::UnknownPartition {
            topic: self.name.clone(),
            partition,
            count: self.config.partitions,
        })
    }
}

/// Per-partition settings fixed at open.
#[derive(Debug, Clone, Copy)]
pub(super) struct PartitionSettings {
    pub segment_bytes: u64,
    pub index_interval: u64,
    pub read_only: bool,
}

pub(super) struct Partition {
    /// Unique within the process, a cheap map key for the writer.
    pub uid: u64,
    pub tp: TopicPartition,
    pub dir: PathBuf,
    pub settings: PartitionSettings,
    /// The segments in offset order; never empty; the last one is the active segment.
    segments: RwLock<Vec<Arc<Segment>>>,
    /// The visible end offset: only records below it may be read.
    end: watch::Sender<i64>,
    /// The active segment's base when compaction last ran (`-1`: never).
    pub compacted_through: AtomicI64,
    /// Serialises [`Partition::refresh`] (read-only logs).
    refreshing: Mutex<()>,
}

impl Partition {
    /// Opens (read-write: creates, recovers) the partition directory `dir`.
    pub(super) fn open(uid: u64, tp: TopicPartition, dir: PathBuf, settings: PartitionSettings) -> LogResult<Self> {
        let writable = !settings.read_only;
        if writable {
            fs::create_dir_all(&dir).map_err(|e| io_error(&dir, e))?;
        }
        let mut bases = Vec::new();
        let mut removed_leftovers = false;
        for entry in fs::read_dir(&dir).map_err(|e| io_error(&dir, e))? {
            let entry = entry.map_err(|e| io_error(&dir, e))?;
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            if let Some(base) = segment::parse_file_name(name) {
                bases.push(base);
            } else if writable && (name.ends_with(".log.cleaned") || name.ends_with(".tmp")) {
                // A compaction that did not finish: the original segment is still in place.
                let path = entry.path();
                tracing::warn!(path = %path.display(), "removing the output of an interrupted compaction");
                fs::remove_file(&path).map_err(|e| io_error(&path, e))?;
                removed_leftovers = true;
            }
        }
        bases.sort_unstable();
        let mut segments: Vec<Arc<Segment>> = Vec::with_capacity(bases.len().max(1));
        let count = bases.len();
        for (i, base) in bases.into_iter().enumerate() {
            let path = dir.join(segment::file_name(base));
            let last = i + 1 == count;
            if let Some(prev) = segments.last() {
                if prev.next_offset() > base {
                    if last {
                        return Err(segment::overlap_error(&path, prev.next_offset()));
                    }
                    // A merge by compaction renamed its output over the first segment of
                    // the group and stopped before deleting the others: their surviving
                    // records are all in the output.
                    if writable {
                        tracing::warn!(path = %path.display(), "removing a segment already merged by an interrupted compaction");
                        fs::remove_file(&path).map_err(|e| io_error(&path, e))?;
                        removed_leftovers = true;
                    }
                    continue;
                }
            }
            let mode = match (last, writable) {
                (false, _) => Scan::Sealed,
                (true, true) => Scan::Recover,
                (true, false) => Scan::Tail,
            };
            match Segment::open(path, base, mode, writable, settings.index_interval) {
                Ok(segment) => segments.push(Arc::new(segment)),
                // Read-only next to a live writer: removed by its compaction or retention
                // since the directory was listed.
                Err(LogError::Io { source, .. }) if !writable && source.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
        if segments.is_empty() {
            if !writable {
                return Err(LogError::Invalid(format!("partition directory {} has no segment files", dir.display())));
            }
            segments.push(Arc::new(Segment::create(&dir, 0)?));
            removed_leftovers = true;
        }
        if removed_leftovers {
            sync_dir(&dir)?;
        }
        let end = segments.last().map_or(0, |s| s.next_offset());
        Ok(Self {
            uid,
            tp,
            dir,
            settings,
            segments: RwLock::new(segments),
            end: watch::Sender::new(end),
            compacted_through: AtomicI64::new(-1),
            refreshing: Mutex::new(()),
        })
    }

    pub(super) fn segments(&self) -> Vec<Arc<Segment>> {
        read_lock(&self.segments).clone()
    }

    pub(super) fn active(&self) -> Arc<Segment> {
        let segments = read_lock(&self.segments);
        Arc::clone(&segments[segments.len() - 1])
    }

    pub(super) fn start(&self) -> i64 {
        read_lock(&self.segments)[0].base
    }

    pub(super) fn end(&self) -> i64 {
        *self.end.borrow()
    }

    pub(super) fn subscribe(&self) -> watch::Receiver<i64> {
        self.end.subscribe()
    }

    /// Makes offsets below `end` visible and wakes waiting readers.
    pub(super) fn publish_end(&self, end: i64) {
        self.end.send_if_modified(|current| {
            let moved = end > *current;
            if moved {
                *current = end;
            }
            moved
        });
    }

    /// Adds a new active segment (the writer, after a roll).
    pub(super) fn push_segment(&self, segment: Arc<Segment>) {
        write_lock(&self.segments).push(segment);
    }

    /// Throws away whatever a failed write group wrote past the visible end: the segments
    /// it rolled to are removed (files deleted) and the one holding the end is cut there,
    /// so the next group writes the same offsets again and nothing unacknowledged can come
    /// back at the next open.
    pub(super) fn discard_unpublished(&self) -> LogResult<()> {
        let end = self.end();
        let dropped: Vec<Arc<Segment>> = {
            let mut segments = write_lock(&self.segments);
            let keep = segments.iter().rposition(|s| s.base < end).map_or(1, |i| i + 1);
            segments.drain(keep..).collect()
        };
        for segment in &dropped {
            match fs::remove_file(&segment.path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(io_error(&segment.path, e)),
            }
        }
        self.active().cut(end)?;
        if !dropped.is_empty() {
            sync_dir(&self.dir)?;
        }
        Ok(())
    }

    /// Replaces the consecutive segments `old` (still in place) with `new`.
    pub(super) fn replace_segments(&self, old: &[Arc<Segment>], new: Arc<Segment>) -> LogResult<()> {
        let mut segments = write_lock(&self.segments);
        let at = segments.iter().position(|s| Arc::ptr_eq(s, &old[0]));
        match at {
            Some(at) if at + old.len() < segments.len() && old.iter().zip(&segments[at..]).all(|(a, b)| Arc::ptr_eq(a, b)) => {
                segments.splice(at..at + old.len(), [new]);
                Ok(())
            }
            _ => Err(LogError::Invalid(format!("segments of {} changed during compaction", self.tp))),
        }
    }

    /// Drops the first `n` segments if they are still `old`; the active one always stays.
    pub(super) fn remove_front(&self, old: &[Arc<Segment>]) -> bool {
        let mut segments = write_lock(&self.segments);
        if old.len() < segments.len() && old.iter().zip(segments.iter()).all(|(a, b)| Arc::ptr_eq(a, b)) {
            segments.drain(..old.len());
            true
        } else {
            false
        }
    }

    pub(super) fn describe(&self) -> PartitionDescription {
        let segments = self.segments();
        PartitionDescription {
            partition: self.tp.partition,
            start_offset: segments[0].base,
            end_offset: self.end(),
            size_bytes: segments.iter().map(|s| s.len()).sum(),
        }
    }

    fn out_of_range(&self, offset: i64, start: i64, end: i64) -> LogError {
        LogError::OffsetOutOfRange { tp: self.tp.clone(), offset, start, end }
    }

    /// Reads visible records from `offset` on (blocking file reads). Empty when there is
    /// nothing at or after `offset` below the visible end.
    pub(super) fn read(&self, offset: i64, max_bytes: usize) -> LogResult<Vec<StoredRecord>> {
        let end = self.end();
        let segments = self.segments();
        let start = segments[0].base;
        if offset < start || offset > end {
            return Err(self.out_of_range(offset, start, end));
        }
        let first = segments.partition_point(|s| s.base <= offset).saturating_sub(1);
        let mut out = Vec::new();
        let mut budget = max_bytes.max(1);
        for segment in &segments[first..] {
            if segment.base >= end || segment.read_into(offset, end, &mut budget, &mut out)? {
                break;
            }
        }
        Ok(out)
    }

    /// Read-only logs: picks up records a writer in another process has added since the
    /// last look (new frames in the last segment, then new segment files).
    pub(super) fn refresh(&self) -> LogResult<()> {
        let _refreshing = lock(&self.refreshing);
        loop {
            let last = self.active();
            let file_len = last.file.metadata().map_err(|e| io_error(&last.path, e))?.len();
            if file_len > last.len() {
                let scan = segment::scan_frames(
                    &last.file,
                    &last.path,
                    last.next_offset(),
                    last.len(),
                    file_len,
                    true,
                    self.settings.index_interval,
                )?;
                last.extend(scan);
            }
            self.publish_end(last.next_offset());
            // A roll by the writer: the next segment starts at or after our end.
            let mut next: Option<i64> = None;
            for entry in fs::read_dir(&self.dir).map_err(|e| io_error(&self.dir, e))? {
                let entry = entry.map_err(|e| io_error(&self.dir, e))?;
                if let Some(base) = entry.file_name().to_str().and_then(segment::parse_file_name) {
                    if base > last.base && base >= last.next_offset() && next.is_none_or(|n| base < n) {
                        next = Some(base);
                    }
                }
            }
            let Some(base) = next else { return Ok(()) };
            // The writer syncs a segment before it creates the next one: read the rest of
            // `last` once more, then move on.
            let file_len = last.file.metadata().map_err(|e| io_error(&last.path, e))?.len();
            if file_len > last.len() {
                let scan = segment::scan_frames(
                    &last.file,
                    &last.path,
                    last.next_offset(),
                    last.len(),
                    file_len,
                    true,
                    self.settings.index_interval,
                )?;
                last.extend(scan);
            }
            let path = self.dir.join(segment::file_name(base));
            let segment = match Segment::open(path, base, Scan::Tail, false, self.settings.index_interval) {
                Ok(s) => s,
                // Removed again by retention or compaction in the meantime.
                Err(LogError::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => return Ok(()),
                Err(e) => return Err(e),
            };
            self.push_segment(Arc::new(segment));
            self.publish_end(self.active().next_offset().max(base));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topic_names_follow_kafka_rules() {
        for ok in ["a", "orders.v1", "__consumer_offsets", "A-b_c.9", &"x".repeat(249)] {
            validate_topic_name(ok).unwrap();
        }
        for bad in ["", ".", "..", "a/b", "a b", "ü", "../x", &"x".repeat(250)] {
            match validate_topic_name(bad) {
                Err(LogError::Invalid(msg)) => assert!(msg.contains(&format!("{bad:?}")), "{msg}"),
                other => panic!("{bad:?} gave {other:?}"),
            }
        }
    }

    #[test]
    fn topic_file_round_trips() {
        let dir = tempfile::tempdir().unwrap();
        let config = TopicConfig { retention_bytes: Some(10), ..TopicConfig::compacted(3) };
        write_topic_file(dir.path(), &config).unwrap();
        assert_eq!(read_topic_file(dir.path()).unwrap(), config);
        assert!(!dir.path().join("topic.json.tmp").exists());
    }
}
