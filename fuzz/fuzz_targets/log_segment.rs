//! The embedded log's frame reader (`log/embedded/{frame,segment}.rs`): a segment file as
//! recovery opens it (see `sluice_runtime::log::embedded::fuzzing`).
//!
//! Input: byte 0 bit 0 set means "fix the checksums": each frame's CRC is recomputed before
//! the file is written, so that frames pass verification and reach the field decoder; the
//! rest is the file. The file lives in a temporary directory (`TMPDIR`, which
//! `bench/fuzz.sh` points at memory).
#![no_main]

use std::sync::LazyLock;

use libfuzzer_sys::fuzz_target;
use sluice_runtime::log::embedded::fuzzing;

static DIR: LazyLock<tempfile::TempDir> = LazyLock::new(|| tempfile::tempdir().expect("a temporary directory"));

/// Rewrites the CRC of every whole frame (`len u32 | crc u32 | …`, little-endian, `len`
/// counting the bytes after itself, the CRC covering the bytes after itself).
fn fix_checksums(file: &mut [u8]) {
    let mut pos = 0usize;
    while file.len() >= pos + 8 {
        let len = u32::from_le_bytes(file[pos..pos + 4].try_into().expect("4 bytes")) as usize;
        let Some(end) = (pos + 4).checked_add(len).filter(|&e| e <= file.len() && len >= 4) else { return };
        let crc = crc32fast::hash(&file[pos + 8..end]);
        file[pos + 4..pos + 8].copy_from_slice(&crc.to_le_bytes());
        pos = end;
    }
}

fuzz_target!(|data: &[u8]| {
    let [mode, file @ ..] = data else { return };
    let mut file = file.to_vec();
    if mode & 1 == 1 {
        fix_checksums(&mut file);
    }
    let _ = fuzzing::open_segment(DIR.path(), &file);
});
