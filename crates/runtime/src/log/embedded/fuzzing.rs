//! An entry point for the fuzz target `log_segment` in `fuzz/` (see `fuzz/README.md`);
//! nothing else calls it. Its contract: any file content gives records or an error, never a
//! panic.

use std::path::Path;

use super::super::LogResult;
use super::io_error;
use super::segment::{self, Scan, Segment};

/// Index entries this close together, so that reads start from several of them.
const INDEX_INTERVAL: u64 = 64;
/// Frame bytes per read, so that a segment takes several reads.
const READ_BUDGET: usize = 4096;

/// Writes `bytes` as the segment file of base offset 0 in `dir` and opens it the ways
/// recovery does: as a sealed segment (frames walked without checksums) and as the last
/// segment of a read-only log, then as the last segment of a read-write log (every frame
/// verified, a bad tail cut off). Every record each open made readable is read. Returns how
/// many records the read-write open kept.
pub fn open_segment(dir: &Path, bytes: &[u8]) -> LogResult<usize> {
    let path = dir.join(segment::file_name(0));
    std::fs::write(&path, bytes).map_err(|e| io_error(&path, e))?;
    for mode in [Scan::Sealed, Scan::Tail] {
        let segment = Segment::open(path.clone(), 0, mode, false, INDEX_INTERVAL)?;
        // A damaged sealed segment fails the read that reaches the damage: expected.
        let _ = read_all(&segment);
    }
    let segment = Segment::open(path, 0, Scan::Recover, true, INDEX_INTERVAL)?;
    read_all(&segment)
}

/// Reads every record of `segment`, a few frames at a time.
fn read_all(segment: &Segment) -> LogResult<usize> {
    let end = segment.next_offset();
    let mut from = segment.base;
    let mut count = 0;
    loop {
        let mut out = Vec::new();
        let mut budget = READ_BUDGET;
        let complete = segment.read_into(from, end, &mut budget, &mut out)?;
        count += out.len();
        match out.last().and_then(|last| last.offset.checked_add(1)) {
            Some(next) if complete && next < end => from = next,
            _ => return Ok(count),
        }
    }
}
