//! Compaction of `CleanupPolicy::Compact` partitions: keep only the newest record of each
//! key in the sealed segments, preserving offsets.
//!
//! ```text
//! sealed: [S0 base 0][S1 base 40][S2 base 95] | active [A base 130] (never touched)
//!
//! 1. scan S0..S2: key -> newest offset
//! 2. group consecutive segments whose surviving bytes fit in one segment: {S0,S1} {S2}
//! 3. per group: write survivors to <first base>.log.cleaned, fsync
//!    rename over <first base>.log, fsync dir        <- the switch point
//!    swap the segment in memory, delete the rest of the group, fsync dir
//! ```
//!
//! A crash before the rename leaves the original files (the `.cleaned` file is removed at
//! open). A crash after it leaves the merged file and some of the group's later files;
//! those are recognised at open because they start below the end of the merged file,
//! and removed (their survivors are in the merged file). Readers hold `Arc`s of the
//! segments they read, whose open file handles keep the replaced files readable, and
//! every read resolves its segment by offset again.
//!
//! In this first version tombstones (null values) are kept like any other record, and
//! records without a key are always kept. The key map holds every distinct key of the
//! sealed segments in memory.

use std::collections::HashMap;
use std::fs::{self, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::super::LogResult;
use super::frame::{self, FrameError, FrameReader};
use super::partition::Partition;
use super::segment::{self, IndexEntry, ScanResult, Segment};
use super::{io_error, sync_dir};

const CHUNK: usize = 1 << 20;

/// What one compaction pass did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(super) struct Compacted {
    pub segments_before: usize,
    pub segments_after: usize,
    pub records_removed: u64,
}

/// Visits every frame of a sealed segment, checksums verified.
fn for_each_frame(seg: &Segment, mut f: impl FnMut(u64, &[u8]) -> LogResult<()>) -> LogResult<()> {
    let mut reader = FrameReader::new(&seg.file, &seg.path, 0, seg.len(), true, CHUNK);
    loop {
        match reader.next() {
            Ok(Some((pos, bytes))) => f(pos, bytes)?,
            Ok(None) => return Ok(()),
            Err(e) => return Err(e.into_log_error(&seg.path)),
        }
    }
}

fn key_of<'a>(seg: &Segment, pos: u64, bytes: &'a [u8]) -> LogResult<Option<&'a [u8]>> {
    frame::frame_key(bytes).map_err(|reason| FrameError::Corrupt { pos, reason }.into_log_error(&seg.path))
}

/// Compacts the sealed segments of `partition` if they changed since the last pass.
pub(super) fn compact(partition: &Partition) -> LogResult<Option<Compacted>> {
    let segments = partition.segments();
    let Some((active, sealed)) = segments.split_last() else { return Ok(None) };
    if sealed.is_empty() || partition.compacted_through.load(Ordering::Acquire) == active.base {
        return Ok(None);
    }
    // A segment sealed by a write group that is still going (or failing) holds records
    // that are not visible yet and may be thrown away: wait for the next pass.
    let end = partition.end();
    if sealed.iter().any(|s| s.next_offset() > end) {
        return Ok(None);
    }

    // 1. The newest offset of each key.
    let mut newest: HashMap<Vec<u8>, i64> = HashMap::new();
    for seg in sealed {
        for_each_frame(seg, |pos, bytes| {
            if let Some(key) = key_of(seg, pos, bytes)? {
                let offset = frame::frame_offset(bytes);
                match newest.get_mut(key) {
                    Some(o) => *o = offset,
                    None => {
                        newest.insert(key.to_vec(), offset);
                    }
                }
            }
            Ok(())
        })?;
    }
    let keep = |seg: &Segment, pos: u64, bytes: &[u8]| -> LogResult<bool> {
        Ok(match key_of(seg, pos, bytes)? {
            None => true,
            Some(key) => newest.get(key) == Some(&frame::frame_offset(bytes)),
        })
    };

    // 2. Surviving bytes per segment, then groups that fit in one segment.
    let mut kept_bytes = Vec::with_capacity(sealed.len());
    let mut removed = Vec::with_capacity(sealed.len());
    for seg in sealed {
        let (mut bytes_kept, mut dropped) = (0u64, 0u64);
        for_each_frame(seg, |pos, bytes| {
            if keep(seg, pos, bytes)? {
                bytes_kept += bytes.len() as u64;
            } else {
                dropped += 1;
            }
            Ok(())
        })?;
        kept_bytes.push(bytes_kept);
        removed.push(dropped);
    }
    let limit = partition.settings.segment_bytes;
    let mut groups: Vec<std::ops::Range<usize>> = Vec::new();
    let mut start = 0;
    let mut size = 0u64;
    for (i, &bytes) in kept_bytes.iter().enumerate() {
        if i > start && size + bytes > limit {
            groups.push(start..i);
            start = i;
            size = 0;
        }
        size += bytes;
    }
    groups.push(start..sealed.len());

    // 3. Rewrite each group that changes.
    let mut result = Compacted { segments_before: sealed.len(), segments_after: groups.len(), records_removed: 0 };
    for group in groups {
        if group.len() == 1 && removed[group.start] == 0 {
            continue;
        }
        let olds = &sealed[group.clone()];
        let merged = write_group(partition, olds, &keep)?;
        partition.replace_segments(olds, Arc::new(merged))?;
        for old in &olds[1..] {
            fs::remove_file(&old.path).map_err(|e| io_error(&old.path, e))?;
        }
        if olds.len() > 1 {
            sync_dir(&partition.dir)?;
        }
        result.records_removed += removed[group].iter().sum::<u64>();
    }
    partition.compacted_through.store(active.base, Ordering::Release);
    if result.records_removed > 0 || result.segments_after < result.segments_before {
        tracing::info!(
            tp = %partition.tp,
            segments_before = result.segments_before,
            segments_after = result.segments_after,
            records_removed = result.records_removed,
            "compacted"
        );
    }
    Ok(Some(result))
}

/// Writes the survivors of `olds` into one new file and renames it over the first one.
fn write_group(
    partition: &Partition,
    olds: &[Arc<Segment>],
    keep: &impl Fn(&Segment, u64, &[u8]) -> LogResult<bool>,
) -> LogResult<Segment> {
    let base = olds[0].base;
    let final_path = partition.dir.join(segment::file_name(base));
    let cleaned = PathBuf::from(format!("{}.cleaned", final_path.display()));
    let file = OpenOptions::new().read(true).write(true).create(true).truncate(true).open(&cleaned).map_err(|e| io_error(&cleaned, e))?;
    let interval = partition.settings.index_interval;
    let mut out = ScanResult { valid_len: 0, next_offset: base, max_timestamp: i64::MIN, index: Vec::new(), stopped: None };
    let mut buf: Vec<u8> = Vec::with_capacity(CHUNK);
    let mut buf_pos = 0u64;
    let mut last_indexed: Option<u64> = None;
    for seg in olds {
        for_each_frame(seg, |pos, bytes| {
            if !keep(seg, pos, bytes)? {
                return Ok(());
            }
            let at = out.valid_len;
            let offset = frame::frame_offset(bytes);
            if last_indexed.is_none_or(|p| at - p >= interval) {
                out.index.push(IndexEntry { offset, pos: at });
                last_indexed = Some(at);
            }
            out.next_offset = offset + 1;
            out.max_timestamp = out.max_timestamp.max(frame::frame_timestamp(bytes));
            out.valid_len += bytes.len() as u64;
            buf.extend_from_slice(bytes);
            if buf.len() >= CHUNK {
                file.write_all_at(&buf, buf_pos).map_err(|e| io_error(&cleaned, e))?;
                buf_pos += buf.len() as u64;
                buf.clear();
            }
            Ok(())
        })?;
    }
    file.write_all_at(&buf, buf_pos).map_err(|e| io_error(&cleaned, e))?;
    file.sync_all().map_err(|e| io_error(&cleaned, e))?;
    // The switch point: the handle follows the file to its final name.
    fs::rename(&cleaned, &final_path).map_err(|e| io_error(&final_path, e))?;
    sync_dir(&partition.dir)?;
    Ok(Segment::new(base, final_path, file, out))
}
