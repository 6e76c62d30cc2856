//! The embedded durable log: topics, partitions and consumer group offsets in a local
//! directory, so a single worker runs without Kafka.
//!
//! # Layout
//!
//! ```text
//! <dir>/LOCK                                  held (flock) by the read-write owner
//! <dir>/topics/<topic>/topic.json             partitions, cleanup, retention (atomic rename)
//! <dir>/topics/<topic>/<partition>/<base>.log segments; <base> = 20-digit first offset
//! <dir>/topics/__consumer_offsets/0/...       committed group offsets (compacted)
//! ```
//!
//! # Record format
//!
//! A segment is a sequence of frames with strictly increasing offsets, all `>= base`.
//! Offsets are stored in each frame because compaction leaves gaps. Little-endian:
//!
//! ```text
//! ┌─────────┬─────────┬───────────┬──────────────┬─────────────────┬───────────────────┬──────────┬─────────┐
//! │ len u32 │ crc u32 │ offset i64│ timestamp i64│ key i32 + bytes │ value i32 + bytes │ hdrs u32 │ headers │
//! └─────────┴─────────┴───────────┴──────────────┴─────────────────┴───────────────────┴──────────┴─────────┘
//!   len = bytes after it; crc = CRC-32 of the bytes after it; -1 length = null;
//!   header = u16 key len + utf-8 key, i32 value len (-1 null) + bytes
//! ```
//!
//! # Durability and visibility
//!
//! One writer thread owns every append (see `writer`). Per group of queued batches it
//! assigns offsets, writes each touched partition with one write, then, under
//! [`FsyncPolicy::Always`], fsyncs the touched files once for the whole group (group
//! commit). Only then does it publish the new end offset of each partition and resolve
//! the batches' futures in call order. Readers see offsets below the published end only,
//! so a record is visible iff its append was acknowledged. Under `Interval` and `Never`
//! the publication and the acknowledgement come right after the write to the OS; the
//! fsync follows on its own schedule. Whatever the policy, a segment is fsynced when it is
//! sealed (rolled), before the next one is created, and the directory is fsynced after.
//!
//! # Recovery at open
//!
//! ```text
//!  sealed segments (verified lazily)        last segment (verified now)
//!  [0000.log][0412.log] ... [9120.log]     [9870.log: ok ok ok ok ??torn]
//!                                                              ▲
//!      walk frames: index only              cut here (set_len + fsync), warn with the
//!                                           number of bytes dropped
//! ```
//!
//! 1. remove `*.log.cleaned` (an unfinished compaction; the original is still in place)
//!    and segments that start below the end of the segment before them (the rest of an
//!    interrupted compaction merge);
//! 2. walk each sealed segment to rebuild its sparse index (an entry every
//!    `index_interval_bytes`), without checksums: a damaged sealed record is reported as
//!    [`LogError::Invalid`] when it is read, never skipped;
//! 3. verify every frame of the last segment and truncate it at the first one that runs
//!    past the end of the file, has an impossible length, fails its checksum or does not
//!    have an increasing offset. Appends go on from the offset after the last good record.
//!
//! A read-only open ([`EmbeddedLog::open_read_only`]) takes no lock, writes nothing and
//! stops before the first bad frame of a last segment (a writer may be in the middle of
//! it); at the end of a partition it looks again for records the writer added.
//!
//! # Maintenance
//!
//! A background thread runs once at open and every `maintenance_interval`: compaction for
//! compacted topics (see `compaction`), retention for the others (whole sealed segments,
//! see `maintenance`). The active segment is never touched.
//!
//! # Topics created with settings ([`Log::create_topic`])
//!
//! Of a [`NewTopic`] the embedded log applies the partition count (`-1`: the default
//! partition count), `cleanup.policy` (`delete`, `compact`; `compact,delete` compacts
//! only), `retention.ms` and `retention.bytes` (`-1`: unlimited; delete topics only). The
//! replication factor (one copy here) and every other topic config (`compression.type`,
//! `segment.bytes`, …) are ignored, with one info line naming them.

use std::collections::BTreeMap;
use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use sluice_api::TopicPartition;
use tokio::sync::oneshot;

use super::{AppendFuture, CleanupPolicy, Log, LogError, LogResult, LogStat, NewTopic, Produce, StoredRecord, TopicConfig, TopicDescription};

mod compaction;
mod frame;
/// An entry point for the fuzz targets in `fuzz/`; not an API.
#[doc(hidden)]
pub mod fuzzing;
mod groups;
mod maintenance;
mod partition;
mod segment;
mod writer;

#[cfg(test)]
mod tests;

pub use maintenance::MaintenanceReport;

use groups::{Groups, GROUPS_TOPIC};
use partition::{Partition, PartitionSettings, Topic};

pub const DEFAULT_SEGMENT_BYTES: u64 = 128 << 20;
pub const DEFAULT_COMPACTED_SEGMENT_BYTES: u64 = 16 << 20;
/// The sparse index is kept in memory, 16 bytes an entry for every segment: at Kafka's
/// `index.interval.bytes` (4 KiB, an index in mmapped files there) a log of 3 GB held 12 MB
/// of it, growing with the log. At 32 KiB that is 1.5 MB, and a read that starts between
/// two entries reads and skips at most 32 KiB of earlier frames.
pub const DEFAULT_INDEX_INTERVAL_BYTES: u64 = 32 << 10;
pub const DEFAULT_QUEUE_BYTES: usize = 64 << 20;
/// `log.cache.bytes`: readers near the end of a partition (the usual sink) read from the
/// page cache; one further behind reads from disk.
pub const DEFAULT_CACHE_BYTES: u64 = 64 << 20;
pub const DEFAULT_MAINTENANCE_INTERVAL: Duration = Duration::from_secs(30);
pub const DEFAULT_PARTITIONS: i32 = 1;
/// The smallest segment size accepted (a segment still takes at least one record).
const MIN_SEGMENT_BYTES: u64 = 64;
/// How often a read-only log looks for new records while a read waits.
const READ_ONLY_POLL: Duration = Duration::from_millis(100);

/// When appended records are fsynced. Selected by the worker property `log.fsync`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FsyncPolicy {
    /// Durable before acknowledged: the writer fsyncs once for all the batches that
    /// queued up while the previous fsync ran, then makes them visible and acks them.
    #[default]
    Always,
    /// Acknowledged and visible once written to the OS; fsynced at this interval. A
    /// machine crash may lose up to an interval of acknowledged records (a process crash
    /// loses nothing).
    Interval(Duration),
    /// Acknowledged once written to the OS and left to the OS to flush (segments are
    /// still synced when sealed and at close).
    Never,
}

impl FsyncPolicy {
    /// Parses `log.fsync`: `always`, `never` or `interval:<milliseconds>` (e.g.
    /// `interval:1000`; a trailing `ms` is accepted). Case and surrounding spaces are
    /// ignored.
    pub fn parse(s: &str) -> LogResult<Self> {
        let t = s.trim().to_ascii_lowercase();
        let bad = || {
            LogError::Invalid(format!("log.fsync must be `always`, `never` or `interval:<milliseconds>` with milliseconds > 0 (got {s:?})"))
        };
        match t.as_str() {
            "always" => Ok(Self::Always),
            "never" => Ok(Self::Never),
            _ => {
                let ms = t.strip_prefix("interval:").ok_or_else(bad)?.trim();
                let ms = ms.strip_suffix("ms").unwrap_or(ms).trim();
                match ms.parse::<u64>() {
                    Ok(ms) if ms > 0 => Ok(Self::Interval(Duration::from_millis(ms))),
                    _ => Err(bad()),
                }
            }
        }
    }
}

impl FromStr for FsyncPolicy {
    type Err = LogError;

    fn from_str(s: &str) -> LogResult<Self> {
        Self::parse(s)
    }
}

impl fmt::Display for FsyncPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Always => f.write_str("always"),
            Self::Never => f.write_str("never"),
            Self::Interval(d) => write!(f, "interval:{}", d.as_millis()),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EmbeddedOptions {
    pub fsync: FsyncPolicy,
    /// Partitions of auto-created topics.
    pub default_partitions: i32,
    /// Roll to a new segment past this size (topics with `CleanupPolicy::Delete`).
    pub segment_bytes: u64,
    /// The same for compacted topics: smaller, so that compaction has sealed segments to
    /// work on.
    pub compacted_segment_bytes: u64,
    /// Bytes between two entries of a segment's in-memory index.
    pub index_interval_bytes: u64,
    /// Bytes of appended records the writer takes at once; beyond it appends wait in
    /// order.
    pub queue_bytes: usize,
    /// Time between two compaction/retention passes.
    pub maintenance_interval: Duration,
    /// `log.cache.bytes`: the newest bytes of each partition left in the OS page cache once
    /// durable; older ones are dropped from it (0: left to the OS).
    pub cache_bytes: u64,
}

impl Default for EmbeddedOptions {
    fn default() -> Self {
        Self {
            fsync: FsyncPolicy::Always,
            default_partitions: DEFAULT_PARTITIONS,
            segment_bytes: DEFAULT_SEGMENT_BYTES,
            compacted_segment_bytes: DEFAULT_COMPACTED_SEGMENT_BYTES,
            index_interval_bytes: DEFAULT_INDEX_INTERVAL_BYTES,
            cache_bytes: DEFAULT_CACHE_BYTES,
            queue_bytes: DEFAULT_QUEUE_BYTES,
            maintenance_interval: DEFAULT_MAINTENANCE_INTERVAL,
        }
    }
}

impl EmbeddedOptions {
    pub fn validate(&self) -> LogResult<()> {
        let bad = |field: &str, rule: &str| Err(LogError::Invalid(format!("embedded log option {field} {rule}")));
        if self.default_partitions < 1 {
            return bad("default_partitions", "must be at least 1");
        }
        if self.segment_bytes < MIN_SEGMENT_BYTES {
            return bad("segment_bytes", &format!("must be at least {MIN_SEGMENT_BYTES}"));
        }
        if self.compacted_segment_bytes < MIN_SEGMENT_BYTES {
            return bad("compacted_segment_bytes", &format!("must be at least {MIN_SEGMENT_BYTES}"));
        }
        if self.index_interval_bytes == 0 {
            return bad("index_interval_bytes", "must be at least 1");
        }
        if self.queue_bytes == 0 {
            return bad("queue_bytes", "must be at least 1");
        }
        if self.maintenance_interval.is_zero() {
            return bad("maintenance_interval", "must be longer than zero");
        }
        if let FsyncPolicy::Interval(d) = self.fsync {
            if d.is_zero() {
                return bad("fsync", "interval must be longer than zero");
            }
        }
        Ok(())
    }
}

fn io_error(path: &Path, source: io::Error) -> LogError {
    LogError::Io { path: path.display().to_string(), source }
}

/// Locks, going on after a panic elsewhere: every structure these guard stays consistent
/// between statements.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

fn read_lock<T>(l: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    l.read().unwrap_or_else(PoisonError::into_inner)
}

fn write_lock<T>(l: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    l.write().unwrap_or_else(PoisonError::into_inner)
}

/// Makes entries created, renamed or removed in `dir` durable.
fn sync_dir(dir: &Path) -> LogResult<()> {
    File::open(dir).and_then(|d| d.sync_all()).map_err(|e| io_error(dir, e))
}

fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

/// State shared by the handle, the writer thread and the maintenance thread.
struct Inner {
    dir: PathBuf,
    topics_dir: PathBuf,
    options: EmbeddedOptions,
    read_only: bool,
    topics: RwLock<BTreeMap<String, Arc<Topic>>>,
    /// Serialises topic creation (the writer auto-creates, `ensure_topic` creates).
    create: Mutex<()>,
    next_uid: AtomicU64,
    queue: writer::Queue,
    groups: Groups,
    maintenance: maintenance::Control,
    /// fsyncs of appended data: how many, and their total and longest time.
    pub(crate) fsyncs: std::sync::atomic::AtomicU64,
    pub(crate) fsync_nanos: std::sync::atomic::AtomicU64,
    pub(crate) fsync_max_nanos: std::sync::atomic::AtomicU64,
    #[cfg(test)]
    write_gate: Mutex<Option<writer::WriteGate>>,
}

impl Inner {
    /// `file.sync_data()`, timed into the fsync figures.
    pub(crate) fn timed_sync(&self, file: &File, path: &Path) -> LogResult<()> {
        use std::sync::atomic::Ordering::Relaxed;
        let started = std::time::Instant::now();
        file.sync_data().map_err(|e| io_error(path, e))?;
        let nanos = started.elapsed().as_nanos() as u64;
        self.fsyncs.fetch_add(1, Relaxed);
        self.fsync_nanos.fetch_add(nanos, Relaxed);
        self.fsync_max_nanos.fetch_max(nanos, Relaxed);
        Ok(())
    }

    /// Bytes of the log's files on disk.
    fn disk_bytes(&self) -> u64 {
        fn walk(dir: &Path) -> u64 {
            let Ok(entries) = std::fs::read_dir(dir) else { return 0 };
            entries
                .filter_map(|e| e.ok())
                .map(|e| match e.file_type() {
                    Ok(t) if t.is_dir() => walk(&e.path()),
                    Ok(_) => e.metadata().map_or(0, |m| m.len()),
                    Err(_) => 0,
                })
                .sum()
        }
        walk(&self.topics_dir)
    }
    fn settings(&self, config: &TopicConfig) -> PartitionSettings {
        PartitionSettings {
            segment_bytes: match config.cleanup {
                CleanupPolicy::Compact => self.options.compacted_segment_bytes,
                CleanupPolicy::Delete => self.options.segment_bytes,
            },
            index_interval: self.options.index_interval_bytes,
            read_only: self.read_only,
        }
    }

    fn open_partitions(&self, name: &str, dir: &Path, config: &TopicConfig) -> LogResult<Vec<Arc<Partition>>> {
        let settings = self.settings(config);
        (0..config.partitions)
            .map(|p| {
                let uid = self.next_uid.fetch_add(1, Ordering::Relaxed);
                Partition::open(uid, TopicPartition::new(name, p), dir.join(p.to_string()), settings).map(Arc::new)
            })
            .collect()
    }

    /// Loads one topic directory; `None` when it has no `topic.json` (a creation that did
    /// not finish, redone when the topic is created again).
    fn load_topic(&self, name: &str) -> LogResult<Option<Arc<Topic>>> {
        let dir = self.topics_dir.join(name);
        if !dir.join(partition::TOPIC_FILE).exists() {
            return Ok(None);
        }
        let config = partition::read_topic_file(&dir)?;
        let partitions = self.open_partitions(name, &dir, &config)?;
        Ok(Some(Arc::new(Topic { name: name.to_owned(), config, partitions })))
    }

    fn load_topics(&self) -> LogResult<()> {
        let _create = lock(&self.create);
        let entries = match fs::read_dir(&self.topics_dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == io::ErrorKind::NotFound && self.read_only => return Ok(()),
            Err(e) => return Err(io_error(&self.topics_dir, e)),
        };
        for entry in entries {
            let entry = entry.map_err(|e| io_error(&self.topics_dir, e))?;
            let Some(name) = entry.file_name().to_str().map(str::to_owned) else { continue };
            if partition::validate_topic_name(&name).is_err() || !entry.path().is_dir() {
                continue;
            }
            if read_lock(&self.topics).contains_key(&name) {
                continue;
            }
            match self.load_topic(&name)? {
                Some(topic) => {
                    write_lock(&self.topics).insert(name, topic);
                }
                None => tracing::warn!(topic = %name, "skipping a topic directory without topic.json"),
            }
        }
        Ok(())
    }

    /// The topic, if it exists (read-only logs look on disk for topics created since).
    fn topic(&self, name: &str) -> LogResult<Option<Arc<Topic>>> {
        if let Some(t) = read_lock(&self.topics).get(name) {
            return Ok(Some(Arc::clone(t)));
        }
        if !self.read_only || partition::validate_topic_name(name).is_err() {
            return Ok(None);
        }
        let _create = lock(&self.create);
        if let Some(t) = read_lock(&self.topics).get(name) {
            return Ok(Some(Arc::clone(t)));
        }
        let topic = self.load_topic(name)?;
        if let Some(t) = &topic {
            write_lock(&self.topics).insert(name.to_owned(), Arc::clone(t));
        }
        Ok(topic)
    }

    fn topic_list(&self) -> Vec<Arc<Topic>> {
        read_lock(&self.topics).values().cloned().collect()
    }

    fn partition(&self, tp: &TopicPartition) -> LogResult<Arc<Partition>> {
        let topic = self.topic(&tp.topic)?.ok_or_else(|| LogError::UnknownTopic(tp.topic.clone()))?;
        topic.partition(tp.partition).cloned()
    }

    /// Creates the topic on disk if missing: partition directories with an empty first
    /// segment, then `topic.json` (its presence is what makes the topic exist).
    fn create_topic(&self, name: &str, config: TopicConfig) -> LogResult<Arc<Topic>> {
        self.create_topic_if_missing(name, config).map(|(topic, _)| topic)
    }

    /// [`Inner::create_topic`], also telling whether this call created the topic.
    fn create_topic_if_missing(&self, name: &str, config: TopicConfig) -> LogResult<(Arc<Topic>, bool)> {
        partition::validate_topic_name(name)?;
        partition::validate_config(name, &config)?;
        if self.read_only {
            return Err(LogError::ReadOnly(self.dir.display().to_string()));
        }
        let _create = lock(&self.create);
        if let Some(t) = read_lock(&self.topics).get(name) {
            return Ok((Arc::clone(t), false));
        }
        let dir = self.topics_dir.join(name);
        fs::create_dir_all(&dir).map_err(|e| io_error(&dir, e))?;
        let partitions = self.open_partitions(name, &dir, &config)?;
        sync_dir(&dir)?;
        partition::write_topic_file(&dir, &config)?;
        sync_dir(&self.topics_dir)?;
        tracing::info!(topic = name, partitions = config.partitions, cleanup = config.cleanup.name(), "created topic");
        let topic = Arc::new(Topic { name: name.to_owned(), config, partitions });
        write_lock(&self.topics).insert(name.to_owned(), Arc::clone(&topic));
        Ok((topic, true))
    }

    /// For appends and `partition_count`: the topic, auto-created with the defaults.
    fn topic_or_create(&self, name: &str) -> LogResult<Arc<Topic>> {
        match self.topic(name)? {
            Some(t) => Ok(t),
            None => self.create_topic(name, TopicConfig::new(self.options.default_partitions)),
        }
    }
}

/// The embedded log. Dropping it (or [`EmbeddedLog::close`]) finishes the queued appends,
/// fsyncs and releases the directory lock.
pub struct EmbeddedLog {
    inner: Arc<Inner>,
    threads: Mutex<Threads>,
}

#[derive(Default)]
struct Threads {
    writer: Option<JoinHandle<()>>,
    maintenance: Option<JoinHandle<()>>,
    lock_file: Option<File>,
}

impl fmt::Debug for EmbeddedLog {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EmbeddedLog").field("dir", &self.inner.dir).field("read_only", &self.inner.read_only).finish()
    }
}

impl EmbeddedLog {
    /// Opens (creating if needed) the log in `dir` for reading and writing: takes the
    /// directory lock, recovers every partition (see the module docs), replays the group
    /// offsets and starts the writer and maintenance threads.
    pub fn open(dir: &Path, options: EmbeddedOptions) -> LogResult<Self> {
        options.validate()?;
        fs::create_dir_all(dir).map_err(|e| io_error(dir, e))?;
        let lock_path = dir.join("LOCK");
        let lock_file =
            OpenOptions::new().create(true).truncate(false).write(true).open(&lock_path).map_err(|e| io_error(&lock_path, e))?;
        match lock_file.try_lock() {
            Ok(()) => {}
            Err(fs::TryLockError::WouldBlock) => {
                return Err(LogError::Locked(dir.display().to_string()));
            }
            Err(fs::TryLockError::Error(e)) => return Err(io_error(&lock_path, e)),
        }
        let topics_dir = dir.join("topics");
        fs::create_dir_all(&topics_dir).map_err(|e| io_error(&topics_dir, e))?;
        sync_dir(dir)?;
        let inner = Arc::new(Inner::new(dir, topics_dir, options, false));
        inner.load_topics()?;
        let groups_topic = inner.create_topic(GROUPS_TOPIC, TopicConfig::compacted(1))?;
        inner.groups.replay(&groups_topic.partitions[0])?;

        let spawn =
            |name: &str, f: Box<dyn FnOnce() + Send>| std::thread::Builder::new().name(name.into()).spawn(f).map_err(|e| io_error(dir, e));
        let w = Arc::clone(&inner);
        let writer = spawn("sluice-log-writer", Box::new(move || writer::Writer::new(w).run()))?;
        let m = Arc::clone(&inner);
        let maintenance = match spawn("sluice-log-maintenance", Box::new(move || maintenance::run(m))) {
            Ok(h) => h,
            Err(e) => {
                inner.queue.close();
                let _ = writer.join();
                return Err(e);
            }
        };
        tracing::info!(dir = %dir.display(), fsync = %inner.options.fsync, topics = read_lock(&inner.topics).len(), "opened the embedded log");
        Ok(Self {
            inner,
            threads: Mutex::new(Threads { writer: Some(writer), maintenance: Some(maintenance), lock_file: Some(lock_file) }),
        })
    }

    /// Opens the log in `dir` for reading while a worker may be writing it: no lock, no
    /// writes, no recovery; each partition ends before its first incomplete or corrupt
    /// record. Appends and group commits fail with [`LogError::ReadOnly`]; group offsets
    /// are those at open.
    pub fn open_read_only(dir: &Path) -> LogResult<Self> {
        fs::metadata(dir).map_err(|e| io_error(dir, e))?;
        let inner = Arc::new(Inner::new(dir, dir.join("topics"), EmbeddedOptions::default(), true));
        inner.queue.close();
        inner.load_topics()?;
        if let Some(topic) = inner.topic(GROUPS_TOPIC)? {
            inner.groups.replay(&topic.partitions[0])?;
        }
        Ok(Self { inner, threads: Mutex::new(Threads::default()) })
    }

    pub fn dir(&self) -> &Path {
        &self.inner.dir
    }

    pub fn is_read_only(&self) -> bool {
        self.inner.read_only
    }

    /// Runs one compaction and retention pass now (blocking), as the background thread
    /// does every `maintenance_interval`.
    pub fn run_maintenance(&self) -> LogResult<MaintenanceReport> {
        if self.inner.read_only {
            return Err(LogError::ReadOnly(self.inner.dir.display().to_string()));
        }
        maintenance::pass(&self.inner)
    }

    /// Stops accepting appends, lets the writer finish the queued ones, fsyncs, stops the
    /// maintenance thread and releases the directory lock. Blocks until done; idempotent.
    pub fn close(&self) -> LogResult<()> {
        self.inner.queue.close();
        self.inner.maintenance.stop();
        let mut threads = lock(&self.threads);
        let mut result = Ok(());
        for handle in [threads.writer.take(), threads.maintenance.take()].into_iter().flatten() {
            if handle.join().is_err() {
                result = Err(LogError::Invalid("a log thread panicked; reopen the log to recover".into()));
            }
        }
        if let Some(file) = threads.lock_file.take() {
            let _ = file.unlock();
        }
        result
    }
}

impl Inner {
    fn new(dir: &Path, topics_dir: PathBuf, options: EmbeddedOptions, read_only: bool) -> Self {
        Self {
            dir: dir.to_path_buf(),
            topics_dir,
            queue: writer::Queue::new(options.queue_bytes),
            options,
            read_only,
            topics: RwLock::new(BTreeMap::new()),
            create: Mutex::new(()),
            next_uid: AtomicU64::new(0),
            groups: Groups::default(),
            maintenance: maintenance::Control::default(),
            fsyncs: AtomicU64::new(0),
            fsync_nanos: AtomicU64::new(0),
            fsync_max_nanos: AtomicU64::new(0),
            #[cfg(test)]
            write_gate: Mutex::new(None),
        }
    }
}

impl Drop for EmbeddedLog {
    fn drop(&mut self) {
        if let Err(e) = self.close() {
            tracing::error!(error = %e, "closing the embedded log failed");
        }
    }
}

/// The topic configs of a [`NewTopic`] the embedded log applies.
const APPLIED_TOPIC_CONFIGS: &[&str] = &["cleanup.policy", "retention.ms", "retention.bytes"];

/// What of `topic` the embedded log applies, as a [`TopicConfig`].
fn topic_config(topic: &NewTopic, default_partitions: i32) -> LogResult<TopicConfig> {
    let partitions = if topic.partitions == -1 { default_partitions } else { topic.partitions };
    let bad = |key: &str, value: &str, why: &str| {
        LogError::Invalid(format!("invalid value {value} for topic config {key} of topic {}: {why}", topic.name))
    };
    let mut config = match topic.configs.get("cleanup.policy").map(|p| p.to_ascii_lowercase()) {
        None => TopicConfig::new(partitions),
        Some(policy) => {
            let mut compact = false;
            for p in policy.split(',').map(str::trim) {
                match p {
                    "compact" => compact = true,
                    "delete" => {}
                    _ => return Err(bad("cleanup.policy", &policy, "use delete, compact or both")),
                }
            }
            if compact {
                TopicConfig::compacted(partitions)
            } else {
                TopicConfig::new(partitions)
            }
        }
    };
    let limit = |key: &str| -> LogResult<Option<Option<i64>>> {
        match topic.configs.get(key) {
            None => Ok(None),
            Some(v) => match v.trim().parse::<i64>() {
                Ok(n) if n >= 0 => Ok(Some(Some(n))),
                Ok(-1) => Ok(Some(None)),
                _ => Err(bad(key, v, "use -1 (no limit) or a number at least 0")),
            },
        }
    };
    if let Some(ms) = limit("retention.ms")? {
        config.retention_ms = ms;
    }
    if let Some(bytes) = limit("retention.bytes")? {
        config.retention_bytes = bytes;
    }
    Ok(config)
}

fn join_error(e: tokio::task::JoinError) -> LogError {
    LogError::Invalid(format!("a log task failed: {e}"))
}

#[async_trait]
impl Log for EmbeddedLog {
    fn stats(&self) -> Vec<LogStat> {
        use std::sync::atomic::Ordering::Relaxed;
        let i = &self.inner;
        vec![
            LogStat { name: "sluice_log_bytes", kind: "gauge", help: "Bytes of the embedded log's topic files on disk.", value: i.disk_bytes() as f64 },
            LogStat { name: "sluice_log_fsync_total", kind: "counter", help: "fsyncs of appended records.", value: i.fsyncs.load(Relaxed) as f64 },
            LogStat {
                name: "sluice_log_fsync_seconds_total",
                kind: "counter",
                help: "Time spent in fsyncs of appended records (divide by sluice_log_fsync_total for the mean).",
                value: i.fsync_nanos.load(Relaxed) as f64 / 1e9,
            },
            LogStat { name: "sluice_log_fsync_max_seconds", kind: "gauge", help: "The longest fsync of appended records since start.", value: i.fsync_max_nanos.load(Relaxed) as f64 / 1e9 },
        ]
    }

    async fn ensure_topic(&self, name: &str, config: TopicConfig) -> LogResult<()> {
        partition::validate_topic_name(name)?;
        partition::validate_config(name, &config)?;
        if self.inner.topic(name)?.is_some() {
            return Ok(());
        }
        let inner = Arc::clone(&self.inner);
        let name = name.to_owned();
        tokio::task::spawn_blocking(move || inner.create_topic(&name, config)).await.map_err(join_error)?.map(|_| ())
    }

    async fn create_topic(&self, topic: &NewTopic) -> LogResult<bool> {
        let config = topic_config(topic, self.inner.options.default_partitions)?;
        partition::validate_topic_name(&topic.name)?;
        partition::validate_config(&topic.name, &config)?;
        if self.inner.topic(&topic.name)?.is_some() {
            return Ok(false);
        }
        let ignored: Vec<&str> = topic.configs.keys().map(String::as_str).filter(|k| !APPLIED_TOPIC_CONFIGS.contains(k)).collect();
        if !ignored.is_empty() || topic.replication_factor > 1 {
            tracing::info!(
                topic = %topic.name,
                replication_factor = topic.replication_factor,
                ignored = ?ignored,
                "the embedded log keeps one copy and has no use for these topic configs; ignored"
            );
        }
        let inner = Arc::clone(&self.inner);
        let name = topic.name.clone();
        let created = tokio::task::spawn_blocking(move || inner.create_topic_if_missing(&name, config).map(|(_, created)| created));
        created.await.map_err(join_error)?
    }

    async fn list_topics(&self) -> LogResult<Vec<String>> {
        if self.inner.read_only {
            self.inner.load_topics()?;
        }
        Ok(read_lock(&self.inner.topics).keys().cloned().collect())
    }

    async fn describe_topic(&self, name: &str) -> LogResult<Option<TopicDescription>> {
        Ok(self.inner.topic(name)?.map(|t| TopicDescription {
            name: t.name.clone(),
            config: t.config.clone(),
            partitions: t.partitions.iter().map(|p| p.describe()).collect(),
        }))
    }

    async fn partition_count(&self, topic: &str) -> LogResult<i32> {
        partition::validate_topic_name(topic)?;
        if let Some(t) = self.inner.topic(topic)? {
            return Ok(t.config.partitions);
        }
        if self.inner.read_only {
            return Err(LogError::UnknownTopic(topic.to_owned()));
        }
        let inner = Arc::clone(&self.inner);
        let topic = topic.to_owned();
        let t = tokio::task::spawn_blocking(move || inner.topic_or_create(&topic)).await.map_err(join_error)??;
        Ok(t.config.partitions)
    }

    fn append(&self, records: Vec<Produce>) -> AppendFuture {
        if self.inner.read_only {
            let e = LogError::ReadOnly(self.inner.dir.display().to_string());
            return Box::pin(async move { Err(e) });
        }
        let (tx, rx) = oneshot::channel();
        match self.inner.queue.push(records, tx) {
            Ok(()) => Box::pin(async move { rx.await.unwrap_or(Err(LogError::Closed)) }),
            Err((e, _)) => Box::pin(async move { Err(e) }),
        }
    }

    async fn read(&self, tp: &TopicPartition, offset: i64, max_bytes: usize, max_wait: Duration) -> LogResult<Vec<StoredRecord>> {
        let partition = self.inner.partition(tp)?;
        let deadline = tokio::time::Instant::now() + max_wait;
        let mut end = partition.subscribe();
        let read_only = self.inner.read_only;
        loop {
            // Marks the current end as seen before reading, so a later publish wakes us.
            let visible_end = *end.borrow_and_update();
            if read_only || offset != visible_end {
                let p = Arc::clone(&partition);
                let records = tokio::task::spawn_blocking(move || {
                    if read_only && offset >= p.end() {
                        p.refresh()?;
                    }
                    p.read(offset, max_bytes)
                })
                .await
                .map_err(join_error)??;
                if !records.is_empty() {
                    return Ok(records);
                }
            } else if offset < partition.start() {
                return Err(LogError::OffsetOutOfRange { tp: tp.clone(), offset, start: partition.start(), end: visible_end });
            }
            if tokio::time::Instant::now() >= deadline {
                return Ok(Vec::new());
            }
            if read_only {
                tokio::time::sleep_until(deadline.min(tokio::time::Instant::now() + READ_ONLY_POLL)).await;
            } else if !matches!(tokio::time::timeout_at(deadline, end.changed()).await, Ok(Ok(()))) {
                return Ok(Vec::new());
            }
        }
    }

    async fn offsets(&self, tp: &TopicPartition) -> LogResult<(i64, i64)> {
        let partition = self.inner.partition(tp)?;
        if self.inner.read_only {
            let p = Arc::clone(&partition);
            tokio::task::spawn_blocking(move || p.refresh()).await.map_err(join_error)??;
        }
        Ok((partition.start(), partition.end()))
    }

    async fn commit_group(&self, group: &str, offsets: &BTreeMap<TopicPartition, i64>) -> LogResult<()> {
        if offsets.is_empty() {
            return Ok(());
        }
        let changes: BTreeMap<TopicPartition, Option<i64>> = offsets.iter().map(|(tp, o)| (tp.clone(), Some(*o))).collect();
        let _commit = self.inner.groups.commit.lock().await;
        self.append(Groups::records(group, &changes, now_ms())?).await?;
        self.inner.groups.apply(group, &changes);
        Ok(())
    }

    async fn group_offsets(&self, group: &str) -> LogResult<BTreeMap<TopicPartition, i64>> {
        Ok(self.inner.groups.get(group))
    }

    async fn delete_group(&self, group: &str) -> LogResult<()> {
        let _commit = self.inner.groups.commit.lock().await;
        let changes: BTreeMap<TopicPartition, Option<i64>> = self.inner.groups.get(group).into_keys().map(|tp| (tp, None)).collect();
        if changes.is_empty() {
            return Ok(());
        }
        self.append(Groups::records(group, &changes, now_ms())?).await?;
        self.inner.groups.apply(group, &changes);
        Ok(())
    }
}
