//! A segment: one `<20-digit base offset>.log` file of frames with increasing offsets,
//! its sparse in-memory index and the bounds readers may see.

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::RwLock;

use super::super::{LogError, LogResult, StoredRecord};
use super::frame::{self, FrameError, FrameReader};
use super::{io_error, read_lock, write_lock};

/// Bytes per positional read when scanning a whole segment.
const SCAN_CHUNK: usize = 1 << 20;
/// The most a read reads from the file at once. Records are copied out of the buffer, so
/// it only needs to hold one frame (it grows for a larger one); a small buffer stays in
/// cache and is reused by the allocator, where a buffer of the whole read budget (1 MiB
/// for a sink) was allocated, zeroed and page-faulted in anew on every read.
const READ_CHUNK: usize = 64 << 10;

pub(super) fn file_name(base: i64) -> String {
    format!("{base:020}.log")
}

/// The base offset of a segment file name, `None` for any other file.
pub(super) fn parse_file_name(name: &str) -> Option<i64> {
    let digits = name.strip_suffix(".log")?;
    if digits.len() != 20 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// How a segment file is checked when it is opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Scan {
    /// A sealed segment: walk the frames to build the index, without checksums. Damage
    /// is reported when the damaged record is read.
    Sealed,
    /// The last segment of a read-write log: verify every frame and cut the file at the
    /// first bad one.
    Recover,
    /// The last segment of a read-only log: verify every frame and stop before the first
    /// bad one, leaving the file alone (a writer may be in the middle of it).
    Tail,
}

#[derive(Debug, Clone, Copy)]
pub(super) struct IndexEntry {
    pub offset: i64,
    pub pos: u64,
}

pub(super) struct Segment {
    pub base: i64,
    pub path: PathBuf,
    pub file: File,
    /// Bytes readers may read: published by the writer once the records are visible.
    len: AtomicU64,
    /// The offset after the last published record (`base` when empty).
    next_offset: AtomicI64,
    /// The newest record timestamp (`i64::MIN` when empty).
    max_timestamp: AtomicI64,
    index: RwLock<Vec<IndexEntry>>,
}

/// What a scan of frames found.
pub(super) struct ScanResult {
    pub valid_len: u64,
    pub next_offset: i64,
    pub max_timestamp: i64,
    pub index: Vec<IndexEntry>,
    /// Where and why the scan stopped before the end of the file.
    pub stopped: Option<(u64, String)>,
}

impl Segment {
    pub(super) fn new(base: i64, path: PathBuf, file: File, scan: ScanResult) -> Self {
        Self {
            base,
            path,
            file,
            len: AtomicU64::new(scan.valid_len),
            next_offset: AtomicI64::new(scan.next_offset),
            max_timestamp: AtomicI64::new(scan.max_timestamp),
            index: RwLock::new(scan.index),
        }
    }

    /// Creates an empty segment file; the caller syncs the directory.
    pub(super) fn create(dir: &Path, base: i64) -> LogResult<Self> {
        let path = dir.join(file_name(base));
        let file = OpenOptions::new().read(true).write(true).create_new(true).open(&path).map_err(|e| io_error(&path, e))?;
        let empty = ScanResult { valid_len: 0, next_offset: base, max_timestamp: i64::MIN, index: Vec::new(), stopped: None };
        Ok(Self::new(base, path, file, empty))
    }

    /// Opens an existing segment file and scans it as `mode` says.
    pub(super) fn open(path: PathBuf, base: i64, mode: Scan, writable: bool, index_interval: u64) -> LogResult<Self> {
        let file = OpenOptions::new().read(true).write(writable).open(&path).map_err(|e| io_error(&path, e))?;
        let file_len = file.metadata().map_err(|e| io_error(&path, e))?.len();
        let scan = scan_frames(&file, &path, base, 0, file_len, mode != Scan::Sealed, index_interval)?;
        let mut scan = scan;
        match (mode, &scan.stopped) {
            (_, None) => {}
            (Scan::Sealed, Some((pos, why))) => {
                // Keep the whole file readable up to the damage; reading it reports it.
                tracing::warn!(path = %path.display(), pos, reason = %why, "sealed segment is damaged; reads reaching the damage will fail");
                scan.valid_len = file_len;
            }
            (Scan::Recover, Some((pos, why))) => {
                let dropped = file_len - pos;
                tracing::warn!(path = %path.display(), pos, dropped_bytes = dropped, reason = %why, "dropping a torn or corrupt tail of the log");
                file.set_len(*pos).map_err(|e| io_error(&path, e))?;
                file.sync_all().map_err(|e| io_error(&path, e))?;
            }
            (Scan::Tail, Some(_)) => {}
        }
        Ok(Self::new(base, path, file, scan))
    }

    pub(super) fn len(&self) -> u64 {
        self.len.load(Ordering::Acquire)
    }

    pub(super) fn next_offset(&self) -> i64 {
        self.next_offset.load(Ordering::Acquire)
    }

    pub(super) fn max_timestamp(&self) -> i64 {
        self.max_timestamp.load(Ordering::Acquire)
    }

    pub(super) fn last_index_pos(&self) -> Option<u64> {
        read_lock(&self.index).last().map(|e| e.pos)
    }

    pub(super) fn push_index(&self, offset: i64, pos: u64) {
        write_lock(&self.index).push(IndexEntry { offset, pos });
    }

    /// Makes bytes `..len` (holding offsets `..next_offset`) readable. Never moves back.
    pub(super) fn publish(&self, len: u64, next_offset: i64, max_timestamp: i64) {
        self.max_timestamp.fetch_max(max_timestamp, Ordering::AcqRel);
        self.next_offset.fetch_max(next_offset, Ordering::AcqRel);
        self.len.fetch_max(len, Ordering::AcqRel);
    }

    /// Cuts the file before its first frame with an offset `>= end` (or a torn frame), and
    /// makes the segment end there: what a failed write group left behind, none of it ever
    /// visible. The readable length is set first, so a reader racing the cut stops at the
    /// new end (see [`Segment::read_into`]).
    pub(super) fn cut(&self, end: i64) -> LogResult<()> {
        let file_len = self.file.metadata().map_err(|e| io_error(&self.path, e))?.len();
        let from = self.position_for(end).min(self.len());
        let mut reader = FrameReader::new(&self.file, &self.path, from, file_len, false, SCAN_CHUNK);
        let cut = loop {
            match reader.next() {
                Ok(Some((pos, bytes))) if frame::frame_offset(bytes) >= end => break pos,
                Ok(Some(_)) => {}
                Ok(None) => break file_len,
                Err(FrameError::Corrupt { pos, .. }) => break pos,
                Err(FrameError::Io(e)) => return Err(e),
            }
        };
        self.len.fetch_min(cut, Ordering::AcqRel);
        self.next_offset.store(end.max(self.base), Ordering::Release);
        write_lock(&self.index).retain(|e| e.pos < cut);
        if cut < file_len {
            self.file.set_len(cut).map_err(|e| io_error(&self.path, e))?;
            self.file.sync_all().map_err(|e| io_error(&self.path, e))?;
        }
        Ok(())
    }

    /// Adds what a scan of the bytes after `len()` found (read-only logs following a writer).
    pub(super) fn extend(&self, scan: ScanResult) {
        write_lock(&self.index).extend(scan.index);
        self.publish(scan.valid_len, scan.next_offset, scan.max_timestamp);
    }

    /// The position of a frame at or before the first record with an offset `>= offset`.
    fn position_for(&self, offset: i64) -> u64 {
        let index = read_lock(&self.index);
        match index.partition_point(|e| e.offset <= offset) {
            0 => 0,
            i => index[i - 1].pos,
        }
    }

    /// Appends records with offsets in `from..end` to `out` while `budget` (frame bytes)
    /// lasts, always taking at least one record when `out` is empty. Returns true when the
    /// read is complete (budget spent or `end` reached), false to go on with the next
    /// segment.
    pub(super) fn read_into(&self, from: i64, end: i64, budget: &mut usize, out: &mut Vec<StoredRecord>) -> LogResult<bool> {
        let limit = self.len();
        let pos = self.position_for(from);
        let chunk = (*budget).clamp(16 << 10, READ_CHUNK).min(limit.saturating_sub(pos) as usize);
        let mut reader = FrameReader::new(&self.file, &self.path, pos, limit, true, chunk);
        loop {
            let (pos, bytes) = match reader.next() {
                Ok(Some(f)) => f,
                Ok(None) => return Ok(false),
                // Cut by a failed write group after `limit` was read: nothing at or after
                // the new end was ever visible.
                Err(FrameError::Corrupt { pos, .. }) if pos >= self.len() => return Ok(true),
                Err(e) => return Err(e.into_log_error(&self.path)),
            };
            let offset = frame::frame_offset(bytes);
            if offset >= end {
                return Ok(true);
            }
            if offset < from {
                continue;
            }
            if !out.is_empty() && bytes.len() > *budget {
                return Ok(true);
            }
            let record = frame::decode(bytes).map_err(|reason| FrameError::Corrupt { pos, reason }.into_log_error(&self.path))?;
            *budget = budget.saturating_sub(bytes.len());
            out.push(record);
            if *budget == 0 {
                return Ok(true);
            }
        }
    }
}

/// Walks frames in `pos..limit`, building a sparse index (an entry every `index_interval`
/// bytes) and stopping at the first frame that is cut off, fails its checksum (when
/// `verify`) or does not have an increasing offset `>= base`.
pub(super) fn scan_frames(
    file: &File,
    path: &Path,
    base: i64,
    pos: u64,
    limit: u64,
    verify: bool,
    index_interval: u64,
) -> LogResult<ScanResult> {
    let mut reader = FrameReader::new(file, path, pos, limit, verify, SCAN_CHUNK);
    let mut result = ScanResult { valid_len: pos, next_offset: base, max_timestamp: i64::MIN, index: Vec::new(), stopped: None };
    let mut last_indexed: Option<u64> = None;
    loop {
        match reader.next() {
            Ok(None) => break,
            Ok(Some((at, bytes))) => {
                let offset = frame::frame_offset(bytes);
                if offset < result.next_offset {
                    result.stopped = Some((at, format!("offset {offset} is not after {}", result.next_offset - 1)));
                    break;
                }
                // The end offset after it must exist: i64::MAX is a damaged offset field.
                let Some(next_offset) = offset.checked_add(1) else {
                    result.stopped = Some((at, format!("offset {offset} leaves no end offset")));
                    break;
                };
                if last_indexed.is_none_or(|p| at - p >= index_interval) {
                    result.index.push(IndexEntry { offset, pos: at });
                    last_indexed = Some(at);
                }
                result.next_offset = next_offset;
                result.max_timestamp = result.max_timestamp.max(frame::frame_timestamp(bytes));
                result.valid_len = at + bytes.len() as u64;
            }
            Err(FrameError::Io(e)) => return Err(e),
            Err(FrameError::Corrupt { pos, reason }) => {
                result.stopped = Some((pos, reason.to_string()));
                break;
            }
        }
    }
    Ok(result)
}

/// The offset-ordered error for a corrupt segment set (overlapping segments that are not
/// leftovers of an interrupted compaction).
pub(super) fn overlap_error(path: &Path, prev_next: i64) -> LogError {
    LogError::Invalid(format!(
        "segment {} starts below the end ({prev_next}) of the segment before it; the partition directory is inconsistent",
        path.display()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_names_round_trip() {
        assert_eq!(file_name(42), "00000000000000000042.log");
        assert_eq!(parse_file_name(&file_name(42)), Some(42));
        assert_eq!(parse_file_name("00000000000000000042.log.cleaned"), None);
        assert_eq!(parse_file_name("42.log"), None);
        assert_eq!(parse_file_name("0000000000000000004x.log"), None);
    }

    /// Found by the fuzz target `log_segment`: a frame whose offset field reads i64::MAX
    /// (damage the checksum of a sealed segment is not checked for at open) overflowed the
    /// scan's end offset, so opening the log panicked. The scan stops there, as at any damage.
    #[test]
    fn fuzz_frame_at_the_largest_offset_stops_the_scan() {
        use super::super::super::LogRecord;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(file_name(0));
        let record = LogRecord { key: Some(b"k".to_vec()), value: Some(b"v".to_vec()), timestamp: 0, headers: Vec::new() };
        let mut two = Vec::new();
        frame::encode_into(&mut two, 7, &record);
        let first_len = two.len() as u64;
        frame::encode_into(&mut two, i64::MAX, &record);
        // The fuzzer's input (without the target's mode byte): a frame of offset i64::MAX.
        let found: Vec<u8> = (0..FOUND.len()).step_by(2).map(|i| u8::from_str_radix(&FOUND[i..i + 2], 16).unwrap()).collect();
        for (bytes, kept, next) in [(found, 0, 0), (two, first_len, 8)] {
            std::fs::write(&path, &bytes).unwrap();
            for mode in [Scan::Sealed, Scan::Tail, Scan::Recover] {
                let segment = Segment::open(path.clone(), 0, mode, mode == Scan::Recover, 64).unwrap();
                assert_eq!(segment.next_offset(), next, "{mode:?}");
                if mode != Scan::Sealed {
                    assert_eq!(segment.len(), kept, "{mode:?}");
                }
            }
            assert_eq!(std::fs::metadata(&path).unwrap().len(), kept, "recovery cut the file there");
        }
    }

    const FOUND: &str = "22000000a3c801a3ffffffffffffff7fc8adff05000000adff0500000000000000ffff2d1b9635a201a3c8adff05000000000000002d1b00000010000001003a53050000000000";
}
