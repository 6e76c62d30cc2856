//! The maintenance loop: compaction for compacted topics, retention for the others. It
//! runs once at open and then every `maintenance_interval`, on its own thread, and only
//! ever touches sealed segments.

use std::fs;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::super::{CleanupPolicy, LogResult, TopicConfig};
use super::partition::Partition;
use super::segment::Segment;
use super::{compaction, io_error, lock, sync_dir, Inner};

/// Stops the maintenance thread and serialises passes.
#[derive(Default)]
pub(super) struct Control {
    pub pass: Mutex<()>,
    stop: Mutex<bool>,
    wake: Condvar,
}

impl Control {
    pub(super) fn stop(&self) {
        *lock(&self.stop) = true;
        self.wake.notify_all();
    }

    /// Sleeps up to `d`; true when asked to stop.
    fn sleep(&self, d: Duration) -> bool {
        let stop = lock(&self.stop);
        let (stop, _) = self.wake.wait_timeout_while(stop, d, |s| !*s).unwrap_or_else(std::sync::PoisonError::into_inner);
        *stop
    }
}

/// What one maintenance pass did, for logs and tests.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct MaintenanceReport {
    pub segments_deleted: usize,
    pub partitions_compacted: usize,
    pub records_compacted_away: u64,
}

pub(super) fn run(inner: Arc<Inner>) {
    loop {
        if let Err(e) = pass(&inner) {
            tracing::warn!(error = %e, "log maintenance failed; retrying at the next pass");
        }
        if inner.maintenance.sleep(inner.options.maintenance_interval) {
            return;
        }
    }
}

/// One pass over every partition. A failing partition does not stop the others; the
/// first error is returned.
pub(super) fn pass(inner: &Inner) -> LogResult<MaintenanceReport> {
    let _pass = lock(&inner.maintenance.pass);
    let mut report = MaintenanceReport::default();
    let mut first_error = None;
    let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64);
    for topic in inner.topic_list() {
        for partition in &topic.partitions {
            let outcome = match topic.config.cleanup {
                CleanupPolicy::Compact => compaction::compact(partition).map(|done| {
                    if let Some(done) = done.filter(|d| d.records_removed > 0 || d.segments_after < d.segments_before) {
                        report.partitions_compacted += 1;
                        report.records_compacted_away += done.records_removed;
                    }
                }),
                CleanupPolicy::Delete => retain(partition, &topic.config, now).map(|n| report.segments_deleted += n),
            };
            if let Err(e) = outcome {
                tracing::warn!(tp = %partition.tp, error = %e, "maintenance of a partition failed");
                first_error.get_or_insert(e);
            }
        }
    }
    match first_error {
        Some(e) => Err(e),
        None => Ok(report),
    }
}

/// The newest record timestamp of a sealed segment; as Kafka does, the file's modification
/// time when its records carry no timestamp (`-1`, or `0` from an unset field).
fn newest_timestamp(seg: &Segment) -> i64 {
    match seg.max_timestamp() {
        ts if ts > 0 => ts,
        _ => seg
            .file
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
            .map_or(i64::MAX, |d| d.as_millis() as i64),
    }
}

/// Deletes the oldest sealed segments while the oldest one is past `retention_ms` (by
/// its newest timestamp) or the partition is larger than `retention_bytes`. Returns how
/// many were deleted. The start offset becomes the base of the first remaining segment.
pub(super) fn retain(partition: &Partition, config: &TopicConfig, now_ms: i64) -> LogResult<usize> {
    let segments = partition.segments();
    let Some((_, sealed)) = segments.split_last() else { return Ok(0) };
    let max_age = config.retention_ms.filter(|ms| *ms >= 0);
    let max_bytes = config.retention_bytes.filter(|b| *b >= 0).map(|b| b as u64);
    let mut total: u64 = segments.iter().map(|s| s.len()).sum();
    let mut n = 0;
    for seg in sealed {
        let too_old = max_age.is_some_and(|ms| newest_timestamp(seg) < now_ms.saturating_sub(ms));
        let too_big = max_bytes.is_some_and(|b| total > b);
        if !too_old && !too_big {
            break;
        }
        total -= seg.len();
        n += 1;
    }
    if n == 0 || !partition.remove_front(&sealed[..n]) {
        return Ok(0);
    }
    for seg in &sealed[..n] {
        match fs::remove_file(&seg.path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io_error(&seg.path, e)),
        }
    }
    sync_dir(&partition.dir)?;
    tracing::info!(tp = %partition.tp, segments = n, start_offset = partition.start(), "retention deleted old segments");
    Ok(n)
}
