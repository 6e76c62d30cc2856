//! Behaviour of the embedded log against real files in temporary directories.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::future::Future;
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::pin::pin;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use super::*;
use crate::log::LogRecord;

fn opts() -> EmbeddedOptions {
    EmbeddedOptions { maintenance_interval: Duration::from_secs(3600), ..EmbeddedOptions::default() }
}

fn rec(key: Option<&str>, value: Option<&str>) -> LogRecord {
    LogRecord {
        key: key.map(|k| k.as_bytes().to_vec()),
        value: value.map(|v| v.as_bytes().to_vec()),
        timestamp: now_ms(),
        headers: Vec::new(),
    }
}

fn produce(topic: &str, partition: i32, record: LogRecord) -> Produce {
    Produce { topic: topic.into(), partition, record }
}

fn tp(topic: &str, partition: i32) -> TopicPartition {
    TopicPartition::new(topic, partition)
}

fn value_of(r: &StoredRecord) -> String {
    String::from_utf8(r.record.value.clone().unwrap_or_default()).unwrap()
}

/// Every visible record of a partition from `from` on.
async fn read_all(log: &EmbeddedLog, tp: &TopicPartition, from: i64) -> Vec<StoredRecord> {
    let (_, end) = log.offsets(tp).await.unwrap();
    let mut out: Vec<StoredRecord> = Vec::new();
    let mut offset = from;
    while offset < end {
        let batch = log.read(tp, offset, 4096, Duration::ZERO).await.unwrap();
        let Some(last) = batch.last() else { break };
        offset = last.offset + 1;
        out.extend(batch);
    }
    out
}

/// Appends `n` records `v<i>` with keys `k<i % keys>` to one partition, one per batch
/// of `per_batch`.
async fn fill(log: &EmbeddedLog, topic: &str, partition: i32, n: usize, keys: usize, per_batch: usize) -> Vec<i64> {
    let mut offsets = Vec::new();
    let records: Vec<Produce> =
        (0..n).map(|i| produce(topic, partition, rec(Some(&format!("k{}", i % keys)), Some(&format!("v{i}"))))).collect();
    for chunk in records.chunks(per_batch) {
        offsets.extend(log.append(chunk.to_vec()).await.unwrap());
    }
    offsets
}

fn segment_files(dir: &Path, topic: &str, partition: i32) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir.join("topics").join(topic).join(partition.to_string()))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().and_then(|n| n.to_str()).and_then(segment::parse_file_name).is_some())
        .collect();
    files.sort();
    files
}

#[tokio::test]
async fn round_trip_with_nulls_headers_and_many_partitions() {
    let dir = tempfile::tempdir().unwrap();
    let log = EmbeddedLog::open(dir.path(), opts()).unwrap();
    log.ensure_topic("orders", TopicConfig::new(4)).await.unwrap();
    let mut batch = Vec::new();
    for i in 0..40 {
        let mut r = rec(Some(&format!("k{i}")), Some(&format!("v{i}")));
        if i % 5 == 0 {
            r.key = None;
        }
        if i % 7 == 0 {
            r.value = None;
        }
        if i % 3 == 0 {
            r.headers = vec![("h".into(), Some(vec![i as u8])), ("null".into(), None), ("empty".into(), Some(Vec::new()))];
        }
        r.timestamp = 1_000 + i;
        batch.push(produce("orders", (i % 4) as i32, r));
    }
    let offsets = log.append(batch.clone()).await.unwrap();
    assert_eq!(offsets.len(), 40);
    // In input order, contiguous per partition.
    for (i, offset) in offsets.iter().enumerate() {
        assert_eq!(*offset, (i / 4) as i64);
    }
    for p in 0..4 {
        let records = read_all(&log, &tp("orders", p), 0).await;
        let expected: Vec<StoredRecord> = batch
            .iter()
            .zip(&offsets)
            .filter(|(b, _)| b.partition == p)
            .map(|(b, o)| StoredRecord { offset: *o, record: b.record.clone() })
            .collect();
        assert_eq!(records, expected);
        assert_eq!(log.offsets(&tp("orders", p)).await.unwrap(), (0, 10));
    }
    let second = log.append(vec![produce("orders", 2, rec(None, None))]).await.unwrap();
    assert_eq!(second, vec![10]);
    let description = log.describe_topic("orders").await.unwrap().unwrap();
    assert_eq!(description.partitions.len(), 4);
    assert_eq!(description.partitions[2].end_offset, 11);
    assert!(description.partitions[2].size_bytes > 0);
    assert!(log.describe_topic("missing").await.unwrap().is_none());
    assert_eq!(log.list_topics().await.unwrap(), vec!["__consumer_offsets".to_string(), "orders".to_string()]);
}

/// A group larger than the writer's chunk is written in several writes, across segment
/// rolls, and reads back whole, also after reopening.
#[tokio::test]
async fn a_group_larger_than_the_write_chunk_round_trips() {
    let dir = tempfile::tempdir().unwrap();
    let options = EmbeddedOptions { segment_bytes: 3 << 20, ..opts() };
    let big = |i: usize| format!("{i}:{}", "x".repeat(90_000 + i * 1_000));
    let batch: Vec<Produce> = (0..60).map(|i| produce("big", 0, rec(Some(&format!("k{i}")), Some(&big(i))))).collect();
    {
        let log = EmbeddedLog::open(dir.path(), options.clone()).unwrap();
        assert_eq!(log.append(batch.clone()).await.unwrap(), (0..60).collect::<Vec<i64>>());
        let records = read_all(&log, &tp("big", 0), 0).await;
        assert_eq!(records.iter().map(value_of).collect::<Vec<_>>(), (0..60).map(big).collect::<Vec<_>>());
    }
    assert!(segment_files(dir.path(), "big", 0).len() > 1, "the group spans segments");
    let log = EmbeddedLog::open(dir.path(), options).unwrap();
    let records = read_all(&log, &tp("big", 0), 0).await;
    let expected: Vec<StoredRecord> = batch.into_iter().zip(0..).map(|(p, offset)| StoredRecord { offset, record: p.record }).collect();
    assert_eq!(records, expected);
}

#[tokio::test]
async fn futures_resolve_in_call_order() {
    let dir = tempfile::tempdir().unwrap();
    let log = EmbeddedLog::open(dir.path(), opts()).unwrap();
    let futures: Vec<AppendFuture> =
        (0..50).map(|i| log.append((0..10).map(|j| produce("t", 0, rec(None, Some(&format!("{i}-{j}"))))).collect())).collect();
    let mut futures = futures.into_iter().rev();
    let last = futures.next().unwrap().await.unwrap();
    assert_eq!(last, (490..500).collect::<Vec<i64>>());
    // When the last one is done, every earlier one must already be done, with earlier offsets.
    let mut cx = Context::from_waker(Waker::noop());
    for (k, fut) in futures.enumerate() {
        let i = 48 - k as i64;
        match pin!(fut).poll(&mut cx) {
            Poll::Ready(Ok(offsets)) => assert_eq!(offsets, (i * 10..i * 10 + 10).collect::<Vec<i64>>()),
            other => panic!("batch {i} not resolved before the last one: {other:?}"),
        }
    }
    let records = read_all(&log, &tp("t", 0), 0).await;
    assert_eq!(value_of(&records[123]), "12-3");
}

#[tokio::test]
async fn tiny_queue_still_keeps_call_order_and_drops_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let log = EmbeddedLog::open(dir.path(), EmbeddedOptions { queue_bytes: 1, ..opts() }).unwrap();
    let futures: Vec<AppendFuture> = (0..200).map(|i| log.append(vec![produce("t", 0, rec(None, Some(&format!("{i}"))))])).collect();
    for (i, fut) in futures.into_iter().enumerate() {
        assert_eq!(fut.await.unwrap(), vec![i as i64]);
    }
    let records = read_all(&log, &tp("t", 0), 0).await;
    assert_eq!(records.len(), 200);
    assert!(records.iter().enumerate().all(|(i, r)| value_of(r) == i.to_string()));
}

#[tokio::test]
async fn reads_see_only_synced_records() {
    let dir = tempfile::tempdir().unwrap();
    let log = EmbeddedLog::open(dir.path(), opts()).unwrap();
    log.ensure_topic("t", TopicConfig::new(1)).await.unwrap();
    let (written_tx, written_rx) = std::sync::mpsc::channel();
    let (release_tx, release_rx) = std::sync::mpsc::channel();
    *lock(&log.inner.write_gate) = Some(writer::WriteGate { written: written_tx, release: release_rx });

    let mut ack = log.append(vec![produce("t", 0, rec(Some("k"), Some("v")))]);
    written_rx.recv_timeout(Duration::from_secs(10)).unwrap();
    // Written to the file, not yet synced: invisible and unacknowledged.
    let file = &segment_files(dir.path(), "t", 0)[0];
    assert!(std::fs::metadata(file).unwrap().len() > 0);
    assert_eq!(log.offsets(&tp("t", 0)).await.unwrap(), (0, 0));
    assert!(log.read(&tp("t", 0), 0, 1 << 20, Duration::from_millis(50)).await.unwrap().is_empty());
    let mut cx = Context::from_waker(Waker::noop());
    assert!(ack.as_mut().poll(&mut cx).is_pending());

    release_tx.send(()).unwrap();
    assert_eq!(ack.await.unwrap(), vec![0]);
    assert_eq!(log.offsets(&tp("t", 0)).await.unwrap(), (0, 1));
    assert_eq!(log.read(&tp("t", 0), 0, 1 << 20, Duration::ZERO).await.unwrap().len(), 1);
}

#[tokio::test]
async fn reopen_keeps_acknowledged_records() {
    let dir = tempfile::tempdir().unwrap();
    for policy in [FsyncPolicy::Always, FsyncPolicy::Interval(Duration::from_millis(5)), FsyncPolicy::Never] {
        let topic = format!("t-{}", policy.to_string().replace(':', "-"));
        let options = EmbeddedOptions { fsync: policy, segment_bytes: 2048, ..opts() };
        {
            let log = EmbeddedLog::open(dir.path(), options.clone()).unwrap();
            log.ensure_topic(&topic, TopicConfig::new(3)).await.unwrap();
            for p in 0..3 {
                fill(&log, &topic, p, 100 + p as usize, 7, 9).await;
            }
        }
        let log = EmbeddedLog::open(dir.path(), options).unwrap();
        for p in 0..3 {
            let n = 100 + p as i64;
            assert_eq!(log.offsets(&tp(&topic, p)).await.unwrap(), (0, n), "{policy}");
            let records = read_all(&log, &tp(&topic, p), 0).await;
            assert_eq!(records.len() as i64, n);
            assert!(records.iter().enumerate().all(|(i, r)| r.offset == i as i64 && value_of(r) == format!("v{i}")));
        }
        assert!(segment_files(dir.path(), &topic, 0).len() > 1, "small segments must have rolled");
        assert_eq!(log.append(vec![produce(&topic, 1, rec(None, Some("next")))]).await.unwrap(), vec![101]);
    }
}

#[tokio::test]
async fn reads_across_segments_from_any_offset() {
    let dir = tempfile::tempdir().unwrap();
    let options = EmbeddedOptions { segment_bytes: 1000, index_interval_bytes: 100, ..opts() };
    let log = EmbeddedLog::open(dir.path(), options.clone()).unwrap();
    fill(&log, "t", 0, 500, 10, 37).await;
    assert!(segment_files(dir.path(), "t", 0).len() > 10);
    let check = |log: EmbeddedLog| async move {
        for from in [0, 1, 17, 99, 250, 333, 498, 499] {
            for max_bytes in [1, 100, 5000] {
                let batch = log.read(&tp("t", 0), from, max_bytes, Duration::ZERO).await.unwrap();
                assert!(!batch.is_empty());
                assert_eq!(batch[0].offset, from);
                assert!(batch.iter().all(|r| value_of(r) == format!("v{}", r.offset)));
                assert!(batch.windows(2).all(|w| w[1].offset == w[0].offset + 1));
                if max_bytes == 1 {
                    assert_eq!(batch.len(), 1, "at least one record, but only one when the budget is tiny");
                }
            }
        }
        assert!(matches!(
            log.read(&tp("t", 0), 501, 100, Duration::ZERO).await,
            Err(LogError::OffsetOutOfRange { offset: 501, start: 0, end: 500, .. })
        ));
        log
    };
    drop(check(log).await);
    // The same after the indexes were rebuilt by a scan at open.
    check(EmbeddedLog::open(dir.path(), options).unwrap()).await;
}

/// Three ways the tail of the last segment can be damaged by a crash.
#[derive(Debug, Clone, Copy)]
enum Damage {
    Garbage,
    CutMidRecord,
    FlipLastRecord,
}

#[tokio::test]
async fn torn_tail_is_cut_at_open() {
    for damage in [Damage::Garbage, Damage::CutMidRecord, Damage::FlipLastRecord] {
        let dir = tempfile::tempdir().unwrap();
        let good_len;
        {
            let log = EmbeddedLog::open(dir.path(), opts()).unwrap();
            fill(&log, "t", 0, 10, 10, 1).await;
            good_len = log.inner.partition(&tp("t", 0)).unwrap().active().len();
        }
        let file = segment_files(dir.path(), "t", 0).pop().unwrap();
        let mut bytes = std::fs::read(&file).unwrap();
        assert_eq!(bytes.len() as u64, good_len);
        let last_len = bytes.len() - bytes.len() / 10 * 9; // equal-sized records
        let (kept, expected_len) = match damage {
            Damage::Garbage => {
                bytes.extend_from_slice(&[0xAB; 13]);
                (10, good_len)
            }
            Damage::CutMidRecord => {
                bytes.truncate(bytes.len() - last_len / 2);
                (9, good_len - last_len as u64)
            }
            Damage::FlipLastRecord => {
                let at = bytes.len() - 3;
                bytes[at] ^= 0x01;
                (9, good_len - last_len as u64)
            }
        };
        std::fs::write(&file, &bytes).unwrap();

        let log = EmbeddedLog::open(dir.path(), opts()).unwrap();
        assert_eq!(std::fs::metadata(&file).unwrap().len(), expected_len, "{damage:?}");
        assert_eq!(log.offsets(&tp("t", 0)).await.unwrap(), (0, kept), "{damage:?}");
        let records = read_all(&log, &tp("t", 0), 0).await;
        assert_eq!(records.len() as i64, kept);
        assert!(records.iter().all(|r| value_of(r) == format!("v{}", r.offset)));
        let next = log.append(vec![produce("t", 0, rec(None, Some("after")))]).await.unwrap();
        assert_eq!(next, vec![kept], "{damage:?}");
        assert_eq!(value_of(&read_all(&log, &tp("t", 0), kept).await[0]), "after");
    }
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &to.join(entry.file_name()));
        } else {
            std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
        }
    }
}

/// A crash can leave the last segment cut at any byte. For every cut point of a segment of
/// records of different sizes (appended one batch each, so each was acknowledged on its
/// own): the log opens, keeps exactly the records whose frames end at or before the cut,
/// reads them back intact, and takes new appends after them.
#[tokio::test]
async fn every_cut_point_of_the_last_segment_keeps_the_whole_records_before_it() {
    let dir = tempfile::tempdir().unwrap();
    // Frame ends, by record: where the active segment stood after each acknowledged append.
    let mut ends = Vec::new();
    {
        let log = EmbeddedLog::open(dir.path(), opts()).unwrap();
        for i in 0..24 {
            let value = "x".repeat(1 + (i * 37) % 90);
            let key = (i % 3 != 0).then(|| format!("k{i}"));
            log.append(vec![produce("t", 0, rec(key.as_deref(), Some(&format!("{i}:{value}"))))]).await.unwrap();
            ends.push(log.inner.partition(&tp("t", 0)).unwrap().active().len());
        }
    }
    let file = segment_files(dir.path(), "t", 0).pop().unwrap();
    let full = std::fs::read(&file).unwrap();
    assert_eq!(full.len() as u64, *ends.last().unwrap());
    for cut in 0..=full.len() {
        let copy = tempfile::tempdir().unwrap();
        copy_tree(dir.path(), copy.path());
        let cut_file = copy.path().join(file.strip_prefix(dir.path()).unwrap());
        std::fs::write(&cut_file, &full[..cut]).unwrap();
        let kept = ends.iter().take_while(|end| **end <= cut as u64).count() as i64;
        let log = EmbeddedLog::open(copy.path(), opts()).unwrap_or_else(|e| panic!("open with the segment cut at {cut}: {e}"));
        assert_eq!(log.offsets(&tp("t", 0)).await.unwrap(), (0, kept), "cut at {cut}");
        let records = read_all(&log, &tp("t", 0), 0).await;
        assert_eq!(records.len() as i64, kept, "cut at {cut}");
        for r in &records {
            assert!(value_of(r).starts_with(&format!("{}:", r.offset)), "cut at {cut}: record {} reads {:?}", r.offset, value_of(r));
        }
        let next = log.append(vec![produce("t", 0, rec(None, Some("after")))]).await.unwrap();
        assert_eq!(next, vec![kept], "cut at {cut}");
    }
}

#[tokio::test]
async fn damaged_sealed_segment_fails_the_read() {
    let dir = tempfile::tempdir().unwrap();
    let options = EmbeddedOptions { segment_bytes: 500, ..opts() };
    {
        let log = EmbeddedLog::open(dir.path(), options.clone()).unwrap();
        fill(&log, "t", 0, 50, 5, 10).await;
    }
    let first = segment_files(dir.path(), "t", 0)[0].clone();
    let mut bytes = std::fs::read(&first).unwrap();
    let at = bytes.len() / 2;
    bytes[at] ^= 0xFF;
    std::fs::write(&first, &bytes).unwrap();
    // Sealed segments are checked when read, not at open.
    let log = EmbeddedLog::open(dir.path(), options).unwrap();
    assert_eq!(std::fs::read(&first).unwrap(), bytes, "a sealed segment is never truncated");
    let err = read_all_result(&log, &tp("t", 0)).await.unwrap_err();
    assert!(matches!(&err, LogError::Invalid(msg) if msg.contains("corrupt record")), "{err:?}");
    // Later segments still read.
    let (_, end) = log.offsets(&tp("t", 0)).await.unwrap();
    assert_eq!(log.read(&tp("t", 0), end - 1, 100, Duration::ZERO).await.unwrap().len(), 1);
}

async fn read_all_result(log: &EmbeddedLog, tp: &TopicPartition) -> LogResult<Vec<StoredRecord>> {
    let (start, end) = log.offsets(tp).await?;
    let mut out: Vec<StoredRecord> = Vec::new();
    let mut offset = start;
    while offset < end {
        let batch = log.read(tp, offset, 4096, Duration::ZERO).await?;
        let Some(last) = batch.last() else { break };
        offset = last.offset + 1;
        out.extend(batch);
    }
    Ok(out)
}

const CRASH_CHILD_ENV: &str = "SLUICE_LOG_CRASH_CHILD_DIR";

/// The child of `kill_9_keeps_every_acknowledged_record`: appends forever with several
/// batches in flight and prints `ack <partition> <offset> <seq>` once each is acked.
#[test]
#[ignore = "child process of kill_9_keeps_every_acknowledged_record"]
fn crash_child_appender() {
    let Some(dir) = std::env::var_os(CRASH_CHILD_ENV) else { return };
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    rt.block_on(async move {
        let options = EmbeddedOptions { segment_bytes: 16 << 10, ..opts() };
        let log = EmbeddedLog::open(Path::new(&dir), options).unwrap();
        log.ensure_topic("crash", TopicConfig::new(2)).await.unwrap();
        let mut inflight: VecDeque<(Vec<(i32, u64)>, AppendFuture)> = VecDeque::new();
        let mut seq = 0u64;
        let mut out = std::io::stdout().lock();
        loop {
            let mut ids = Vec::new();
            let mut batch = Vec::new();
            for _ in 0..40 {
                let partition = (seq % 2) as i32;
                ids.push((partition, seq));
                batch.push(produce("crash", partition, rec(Some(&seq.to_string()), Some(&format!("rec-{seq}")))));
                seq += 1;
            }
            inflight.push_back((ids, log.append(batch)));
            if inflight.len() >= 4 {
                let Some((ids, fut)) = inflight.pop_front() else { continue };
                let offsets = fut.await.unwrap();
                for ((partition, seq), offset) in ids.iter().zip(offsets) {
                    writeln!(out, "ack {partition} {offset} {seq}").unwrap();
                }
                out.flush().unwrap();
            }
        }
    });
}

#[test]
fn kill_9_keeps_every_acknowledged_record() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "log::embedded::tests::crash_child_appender", "--ignored", "--nocapture", "--test-threads=1"])
        .env(CRASH_CHILD_ENV, dir.path())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut acked: Vec<(i32, i64, u64)> = Vec::new();
    let mut line = String::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    let parse = |line: &str, acked: &mut Vec<(i32, i64, u64)>| {
        // Only whole lines: the kill may cut the last one.
        if let Some(rest) = line.strip_prefix("ack ").and_then(|r| r.strip_suffix('\n')) {
            let f: Vec<&str> = rest.split(' ').collect();
            acked.push((f[0].parse().unwrap(), f[1].parse().unwrap(), f[2].parse().unwrap()));
        }
    };
    while acked.len() < 4000 {
        line.clear();
        assert!(stdout.read_line(&mut line).unwrap() > 0, "the child stopped early");
        parse(&line, &mut acked);
        assert!(Instant::now() < deadline, "the child is too slow");
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    loop {
        line.clear();
        if stdout.read_line(&mut line).unwrap() == 0 {
            break;
        }
        parse(&line, &mut acked);
    }

    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let log = EmbeddedLog::open(dir.path(), EmbeddedOptions { segment_bytes: 16 << 10, ..opts() }).unwrap();
        let mut stored: HashMap<(i32, i64), String> = HashMap::new();
        for p in 0..2 {
            let records = read_all(&log, &tp("crash", p), 0).await;
            assert!(records.iter().enumerate().all(|(i, r)| r.offset == i as i64), "offsets have holes");
            for r in records {
                stored.insert((p, r.offset), value_of(&r));
            }
        }
        for (p, offset, seq) in &acked {
            assert_eq!(stored.get(&(*p, *offset)), Some(&format!("rec-{seq}")), "acked record {p}/{offset} lost");
        }
        assert!(segment_files(dir.path(), "crash", 0).len() > 1);
        let (_, end) = log.offsets(&tp("crash", 0)).await.unwrap();
        assert_eq!(log.append(vec![produce("crash", 0, rec(None, Some("after")))]).await.unwrap(), vec![end]);
    });
}

#[tokio::test]
async fn compaction_keeps_the_newest_record_per_key() {
    let dir = tempfile::tempdir().unwrap();
    let options = EmbeddedOptions { compacted_segment_bytes: 400, index_interval_bytes: 64, ..opts() };
    let log = EmbeddedLog::open(dir.path(), options.clone()).unwrap();
    log.ensure_topic("c", TopicConfig::compacted(1)).await.unwrap();
    let t = tp("c", 0);
    let mut records: Vec<Produce> = (0..300).map(|i| produce("c", 0, rec(Some(&format!("k{}", i % 10)), Some(&format!("v{i}"))))).collect();
    records[295].record.value = None; // a tombstone is kept
    records[296].record.key = None; // records without key are kept
    records[150].record.key = None;
    for chunk in records.chunks(13) {
        log.append(chunk.to_vec()).await.unwrap();
    }
    let before = read_all(&log, &t, 0).await;
    let segments_before = segment_files(dir.path(), "c", 0).len();
    assert!(segments_before > 5);
    // A reader part-way through.
    let first = log.read(&t, 0, 200, Duration::ZERO).await.unwrap();
    let resume = first.last().unwrap().offset + 1;

    let report = log.run_maintenance().unwrap();
    assert_eq!(report.partitions_compacted, 1);
    let partition = log.inner.partition(&t).unwrap();
    let active_base = partition.active().base;
    let mut newest_sealed: HashMap<Option<Vec<u8>>, i64> = HashMap::new();
    for r in before.iter().filter(|r| r.offset < active_base) {
        newest_sealed.insert(r.record.key.clone(), r.offset);
    }
    let expected: Vec<StoredRecord> = before
        .iter()
        .filter(|r| r.offset >= active_base || r.record.key.is_none() || newest_sealed[&r.record.key] == r.offset)
        .cloned()
        .collect();
    let after = read_all(&log, &t, 0).await;
    assert_eq!(after, expected);
    assert!(after.len() < 60, "{} records left", after.len());
    assert_eq!(report.records_compacted_away, (before.len() - after.len()) as u64);
    assert!(segment_files(dir.path(), "c", 0).len() < segments_before, "small segments are merged");
    assert_eq!(log.offsets(&t).await.unwrap(), (0, 300));
    // The reader goes on from its offset, over the gaps.
    let next = log.read(&t, resume, 1 << 20, Duration::ZERO).await.unwrap();
    assert_eq!(next, expected.iter().filter(|r| r.offset >= resume).cloned().collect::<Vec<_>>());
    // Nothing changed since: the next pass does nothing.
    assert_eq!(log.run_maintenance().unwrap(), MaintenanceReport::default());
    // Appends go on, and the result survives a reopen.
    log.append(vec![produce("c", 0, rec(Some("k1"), Some("new")))]).await.unwrap();
    drop(log);
    let log = EmbeddedLog::open(dir.path(), options).unwrap();
    let reopened = read_all(&log, &t, 0).await;
    assert_eq!(&reopened[..after.len()], &after[..]);
    assert_eq!(value_of(reopened.last().unwrap()), "new");
}

#[tokio::test]
async fn readers_keep_working_during_compaction() {
    let dir = tempfile::tempdir().unwrap();
    let options = EmbeddedOptions { compacted_segment_bytes: 300, ..opts() };
    let log = Arc::new(EmbeddedLog::open(dir.path(), options).unwrap());
    log.ensure_topic("c", TopicConfig::compacted(1)).await.unwrap();
    for i in 0..20 {
        log.append((0..50).map(|j| produce("c", 0, rec(Some(&format!("k{}", j % 7)), Some(&format!("v{}", i * 50 + j))))).collect())
            .await
            .unwrap();
    }
    let reader = {
        let log = Arc::clone(&log);
        tokio::spawn(async move {
            let mut passes = 0;
            let started = Instant::now();
            while passes < 20 || started.elapsed() < Duration::from_millis(200) {
                let records = read_all_result(&log, &tp("c", 0)).await.unwrap();
                assert!(records.windows(2).all(|w| w[0].offset < w[1].offset));
                assert!(records.iter().all(|r| value_of(r) == format!("v{}", r.offset)));
                passes += 1;
            }
        })
    };
    let maint = {
        let log = Arc::clone(&log);
        tokio::task::spawn_blocking(move || log.run_maintenance().unwrap())
    };
    assert!(maint.await.unwrap().records_compacted_away > 0);
    reader.await.unwrap();
}

#[tokio::test]
async fn interrupted_compaction_leftovers_are_resolved_at_open() {
    let dir = tempfile::tempdir().unwrap();
    let options = EmbeddedOptions { compacted_segment_bytes: 300, ..opts() };
    let saved: Vec<(PathBuf, Vec<u8>)>;
    let after;
    {
        let log = EmbeddedLog::open(dir.path(), options.clone()).unwrap();
        log.ensure_topic("c", TopicConfig::compacted(1)).await.unwrap();
        fill(&log, "c", 0, 200, 5, 10).await;
        saved = segment_files(dir.path(), "c", 0).into_iter().map(|p| (p.clone(), std::fs::read(&p).unwrap())).collect();
        log.run_maintenance().unwrap();
        after = read_all(&log, &tp("c", 0), 0).await;
    }
    // As if the compaction had stopped right after its rename: the merged-away files are
    // back, and an unfinished `.cleaned` output lies around.
    let mut restored = 0;
    for (path, bytes) in &saved {
        if !path.exists() {
            std::fs::write(path, bytes).unwrap();
            restored += 1;
        }
    }
    assert!(restored > 0);
    let first = segment_files(dir.path(), "c", 0)[0].clone();
    let cleaned = PathBuf::from(format!("{}.cleaned", first.display()));
    std::fs::write(&cleaned, b"half-written").unwrap();

    let log = EmbeddedLog::open(dir.path(), options).unwrap();
    assert!(!cleaned.exists());
    let records = read_all(&log, &tp("c", 0), 0).await;
    assert!(records.windows(2).all(|w| w[0].offset < w[1].offset));
    assert!(records.iter().all(|r| value_of(r) == format!("v{}", r.offset)));
    // Everything compaction kept is there; restored files that did not overlap are stale
    // copies that the next pass removes again.
    assert!(after.iter().all(|r| records.contains(r)));
    log.run_maintenance().unwrap();
    assert_eq!(read_all(&log, &tp("c", 0), 0).await, after);
}

#[tokio::test]
async fn retention_deletes_old_segments_and_moves_the_start() {
    let dir = tempfile::tempdir().unwrap();
    let options = EmbeddedOptions { segment_bytes: 500, ..opts() };
    let log = EmbeddedLog::open(dir.path(), options.clone()).unwrap();
    let by_size = TopicConfig { retention_ms: None, retention_bytes: Some(2000), ..TopicConfig::new(1) };
    log.ensure_topic("sized", by_size).await.unwrap();
    fill(&log, "sized", 0, 300, 300, 20).await;
    let t = tp("sized", 0);
    let report = log.run_maintenance().unwrap();
    assert!(report.segments_deleted > 0);
    let description = log.describe_topic("sized").await.unwrap().unwrap().partitions[0].clone();
    assert!(description.size_bytes <= 2000, "{description:?}");
    let (start, end) = log.offsets(&t).await.unwrap();
    assert!(start > 0 && end == 300);
    assert_eq!(description.start_offset, start);
    assert!(matches!(
        log.read(&t, start - 1, 100, Duration::ZERO).await,
        Err(LogError::OffsetOutOfRange { offset, start: s, end: 300, .. }) if offset == start - 1 && s == start
    ));
    let rest = read_all(&log, &t, start).await;
    assert_eq!(rest.len() as i64, end - start);
    assert_eq!(rest[0].offset, start);

    // By time: segments whose newest record is older than retention_ms go, oldest first.
    let by_time = TopicConfig { retention_ms: Some(60_000), ..TopicConfig::new(1) };
    log.ensure_topic("timed", by_time).await.unwrap();
    let old: Vec<Produce> =
        (0..50).map(|i| produce("timed", 0, LogRecord { timestamp: 1_000, ..rec(None, Some(&format!("v{i}"))) })).collect();
    log.append(old).await.unwrap();
    fill(&log, "timed", 0, 50, 50, 10).await; // fresh timestamps
    log.run_maintenance().unwrap();
    let (start, end) = log.offsets(&tp("timed", 0)).await.unwrap();
    assert_eq!(end, 100);
    assert!((40..=50).contains(&start), "start {start}");
    drop(log);
    // The start survives a reopen.
    let log = EmbeddedLog::open(dir.path(), options).unwrap();
    assert_eq!(log.offsets(&tp("timed", 0)).await.unwrap(), (start, 100));
}

#[tokio::test]
async fn retention_without_timestamps_uses_the_file_time() {
    let dir = tempfile::tempdir().unwrap();
    let log = EmbeddedLog::open(dir.path(), EmbeddedOptions { segment_bytes: 500, ..opts() }).unwrap();
    log.ensure_topic("t", TopicConfig { retention_ms: Some(60_000), ..TopicConfig::new(1) }).await.unwrap();
    let untimed: Vec<Produce> =
        (0..40).map(|i| produce("t", 0, LogRecord { timestamp: -1, ..rec(None, Some(&format!("v{i}"))) })).collect();
    log.append(untimed).await.unwrap();
    assert_eq!(log.run_maintenance().unwrap().segments_deleted, 0, "fresh files are kept");
    let first = segment_files(dir.path(), "t", 0)[0].clone();
    let old = std::time::SystemTime::now() - Duration::from_secs(7200);
    std::fs::File::options().write(true).open(&first).unwrap().set_modified(old).unwrap();
    assert_eq!(log.run_maintenance().unwrap().segments_deleted, 1);
    assert!(log.offsets(&tp("t", 0)).await.unwrap().0 > 0);
}

#[tokio::test]
async fn group_offsets_survive_reopen_and_delete() {
    let dir = tempfile::tempdir().unwrap();
    let g1 = BTreeMap::from([(tp("a", 0), 5), (tp("a", 1), 7)]);
    {
        let log = EmbeddedLog::open(dir.path(), opts()).unwrap();
        log.commit_group("g1", &g1).await.unwrap();
        log.commit_group("g2", &BTreeMap::from([(tp("b", 0), 1)])).await.unwrap();
        log.commit_group("g1", &BTreeMap::from([(tp("a", 0), 6)])).await.unwrap();
        assert_eq!(log.group_offsets("g1").await.unwrap(), BTreeMap::from([(tp("a", 0), 6), (tp("a", 1), 7)]));
    }
    {
        let log = EmbeddedLog::open(dir.path(), opts()).unwrap();
        assert_eq!(log.group_offsets("g1").await.unwrap(), BTreeMap::from([(tp("a", 0), 6), (tp("a", 1), 7)]));
        assert_eq!(log.group_offsets("g2").await.unwrap(), BTreeMap::from([(tp("b", 0), 1)]));
        assert!(log.group_offsets("nobody").await.unwrap().is_empty());
        log.delete_group("g1").await.unwrap();
        assert!(log.group_offsets("g1").await.unwrap().is_empty());
        // Stored as JSON in the compacted internal topic.
        let stored = read_all(&log, &tp(GROUPS_TOPIC, 0), 0).await;
        assert_eq!(stored[0].record.key.as_deref(), Some(&br#"{"group":"g1","topic":"a","partition":0}"#[..]));
        assert_eq!(stored[0].record.value.as_deref(), Some(&br#"{"offset":5}"#[..]));
        assert!(stored.last().unwrap().record.value.is_none());
        let description = log.describe_topic(GROUPS_TOPIC).await.unwrap().unwrap();
        assert_eq!(description.config.cleanup, CleanupPolicy::Compact);
    }
    let log = EmbeddedLog::open(dir.path(), opts()).unwrap();
    assert!(log.group_offsets("g1").await.unwrap().is_empty());
    assert_eq!(log.group_offsets("g2").await.unwrap(), BTreeMap::from([(tp("b", 0), 1)]));
}

#[tokio::test]
async fn read_only_open_reads_while_a_writer_runs() {
    let dir = tempfile::tempdir().unwrap();
    let options = EmbeddedOptions { segment_bytes: 600, ..opts() };
    let log = EmbeddedLog::open(dir.path(), options).unwrap();
    fill(&log, "t", 0, 30, 30, 10).await;
    log.commit_group("g", &BTreeMap::from([(tp("t", 0), 3)])).await.unwrap();

    let reader = EmbeddedLog::open_read_only(dir.path()).unwrap();
    assert!(reader.is_read_only());
    assert_eq!(reader.offsets(&tp("t", 0)).await.unwrap(), (0, 30));
    assert_eq!(read_all(&reader, &tp("t", 0), 0).await, read_all(&log, &tp("t", 0), 0).await);
    assert_eq!(reader.group_offsets("g").await.unwrap(), BTreeMap::from([(tp("t", 0), 3)]));
    assert!(matches!(reader.append(vec![produce("t", 0, rec(None, None))]).await, Err(LogError::ReadOnly(_))));
    assert!(matches!(reader.ensure_topic("new", TopicConfig::new(1)).await, Err(LogError::ReadOnly(_))));
    assert!(matches!(reader.partition_count("missing").await, Err(LogError::UnknownTopic(_))));

    // The writer goes on (rolling segments); the reader follows.
    let t = tp("t", 0);
    let waiting = reader.read(&t, 30, 1 << 20, Duration::from_secs(10));
    let (got, _) = tokio::join!(waiting, async {
        tokio::time::sleep(Duration::from_millis(50)).await;
        fill(&log, "t", 0, 30, 30, 10).await;
    });
    assert_eq!(got.unwrap()[0].offset, 30);
    assert_eq!(reader.offsets(&tp("t", 0)).await.unwrap().1, 60);
    assert_eq!(read_all(&reader, &tp("t", 0), 0).await.len(), 60);
    // Topics created later are found.
    log.append(vec![produce("later", 0, rec(None, Some("x")))]).await.unwrap();
    assert_eq!(reader.partition_count("later").await.unwrap(), 1);
    assert!(reader.list_topics().await.unwrap().contains(&"later".to_string()));
}

#[tokio::test]
async fn read_only_open_stops_before_a_torn_tail_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    {
        let log = EmbeddedLog::open(dir.path(), opts()).unwrap();
        fill(&log, "t", 0, 10, 10, 10).await;
    }
    let file = segment_files(dir.path(), "t", 0).pop().unwrap();
    let mut bytes = std::fs::read(&file).unwrap();
    let good = bytes.len();
    let half_a_record = bytes[..30].to_vec();
    bytes.extend_from_slice(&half_a_record);
    std::fs::write(&file, &bytes).unwrap();

    let reader = EmbeddedLog::open_read_only(dir.path()).unwrap();
    assert_eq!(reader.offsets(&tp("t", 0)).await.unwrap(), (0, 10));
    assert_eq!(read_all(&reader, &tp("t", 0), 0).await.len(), 10);
    assert!(reader.read(&tp("t", 0), 10, 100, Duration::from_millis(20)).await.unwrap().is_empty());
    assert_eq!(std::fs::metadata(&file).unwrap().len() as usize, good + 30);
}

#[tokio::test]
async fn waiting_read_wakes_when_data_arrives() {
    let dir = tempfile::tempdir().unwrap();
    let log = EmbeddedLog::open(dir.path(), opts()).unwrap();
    log.ensure_topic("t", TopicConfig::new(1)).await.unwrap();
    let t = tp("t", 0);

    let started = Instant::now();
    assert!(log.read(&t, 0, 100, Duration::from_millis(150)).await.unwrap().is_empty());
    assert!(started.elapsed() >= Duration::from_millis(150));

    let started = Instant::now();
    let (got, _) = tokio::join!(log.read(&t, 0, 100, Duration::from_secs(30)), async {
        tokio::time::sleep(Duration::from_millis(50)).await;
        log.append(vec![produce("t", 0, rec(None, Some("hello")))]).await.unwrap();
    });
    assert_eq!(value_of(&got.unwrap()[0]), "hello");
    assert!(started.elapsed() < Duration::from_secs(10));
}

#[tokio::test]
async fn a_second_writer_is_locked_out() {
    let dir = tempfile::tempdir().unwrap();
    let log = EmbeddedLog::open(dir.path(), opts()).unwrap();
    let err = EmbeddedLog::open(dir.path(), opts()).unwrap_err();
    assert!(matches!(&err, LogError::Locked(d) if d == &dir.path().display().to_string()), "{err:?}");
    log.close().unwrap();
    assert!(matches!(log.append(vec![produce("t", 0, rec(None, None))]).await, Err(LogError::Closed)));
    EmbeddedLog::open(dir.path(), opts()).unwrap();
}

#[tokio::test]
async fn auto_create_unknown_partitions_and_invalid_names() {
    let dir = tempfile::tempdir().unwrap();
    let log = EmbeddedLog::open(dir.path(), EmbeddedOptions { default_partitions: 3, ..opts() }).unwrap();
    assert_eq!(log.partition_count("auto1").await.unwrap(), 3);
    assert_eq!(log.append(vec![produce("auto2", 2, rec(None, Some("x")))]).await.unwrap(), vec![0]);
    assert_eq!(log.describe_topic("auto2").await.unwrap().unwrap().config, TopicConfig::new(3));
    // A batch with one bad record writes nothing.
    let bad = vec![produce("auto2", 0, rec(None, Some("x"))), produce("auto2", 3, rec(None, Some("y")))];
    assert!(matches!(
        log.append(bad).await,
        Err(LogError::UnknownPartition { ref topic, partition: 3, count: 3 }) if topic == "auto2"
    ));
    assert_eq!(log.offsets(&tp("auto2", 0)).await.unwrap(), (0, 0));
    assert!(matches!(log.append(vec![produce("auto2", -1, rec(None, None))]).await, Err(LogError::UnknownPartition { .. })));
    for bad in ["a/b", "..", ""] {
        assert!(
            matches!(log.append(vec![produce(bad, 0, rec(None, None))]).await, Err(LogError::Invalid(m)) if m.contains(&format!("{bad:?}")))
        );
        assert!(matches!(log.partition_count(bad).await, Err(LogError::Invalid(_))));
        assert!(matches!(log.ensure_topic(bad, TopicConfig::new(1)).await, Err(LogError::Invalid(_))));
    }
    assert!(matches!(log.ensure_topic("zero", TopicConfig::new(0)).await, Err(LogError::Invalid(_))));
    assert!(matches!(log.read(&tp("nope", 0), 0, 1, Duration::ZERO).await, Err(LogError::UnknownTopic(_))));
    // An existing topic keeps its configuration.
    log.ensure_topic("auto1", TopicConfig::compacted(9)).await.unwrap();
    assert_eq!(log.partition_count("auto1").await.unwrap(), 3);
    // The appends after a rejected batch go on normally.
    assert_eq!(log.append(vec![produce("auto2", 2, rec(None, Some("y")))]).await.unwrap(), vec![1]);
}

#[test]
fn fsync_policy_parses_worker_property() {
    assert_eq!(FsyncPolicy::parse("always").unwrap(), FsyncPolicy::Always);
    assert_eq!(FsyncPolicy::parse(" NEVER ").unwrap(), FsyncPolicy::Never);
    assert_eq!(FsyncPolicy::parse("interval:250").unwrap(), FsyncPolicy::Interval(Duration::from_millis(250)));
    assert_eq!("interval:1000ms".parse::<FsyncPolicy>().unwrap(), FsyncPolicy::Interval(Duration::from_secs(1)));
    for bad in ["", "sometimes", "interval:", "interval:0", "interval:-5", "interval:1s"] {
        assert!(matches!(FsyncPolicy::parse(bad), Err(LogError::Invalid(m)) if m.contains("log.fsync")), "{bad}");
    }
    for policy in [FsyncPolicy::Always, FsyncPolicy::Never, FsyncPolicy::Interval(Duration::from_millis(7))] {
        assert_eq!(FsyncPolicy::parse(&policy.to_string()).unwrap(), policy);
    }
    assert_eq!(FsyncPolicy::default(), FsyncPolicy::Always);
    assert!(EmbeddedOptions { segment_bytes: 10, ..EmbeddedOptions::default() }.validate().is_err());
}

/// Append throughput of ~100-byte records in batches of 2,000 with `FsyncPolicy::Always`.
/// `cargo test -p sluice-runtime --release --lib append_throughput -- --ignored --nocapture`
#[test]
#[ignore = "throughput measurement; run in release"]
fn append_throughput() {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    rt.block_on(async {
        for (partitions, inflight) in [(1, 8), (4, 8), (1, 1)] {
            let dir = tempfile::tempdir().unwrap();
            let log = EmbeddedLog::open(dir.path(), EmbeddedOptions::default()).unwrap();
            log.ensure_topic("bench", TopicConfig::new(partitions)).await.unwrap();
            let (batches, per_batch) = (500, 2_000);
            let value = vec![b'x'; 84];
            let work: Vec<Vec<Produce>> = (0..batches)
                .map(|b| {
                    (0..per_batch)
                        .map(|i| {
                            let key = format!("key-{:08}", b * per_batch + i).into_bytes();
                            produce("bench", (i % partitions as usize) as i32, LogRecord { key: Some(key), value: Some(value.clone()), timestamp: 0, headers: Vec::new() })
                        })
                        .collect()
                })
                .collect();
            let record_size = work[0][0].record.size();
            let started = Instant::now();
            let mut pending = VecDeque::new();
            for batch in work {
                pending.push_back(log.append(batch));
                if pending.len() >= inflight {
                    pending.pop_front().unwrap().await.unwrap();
                }
            }
            for fut in pending {
                fut.await.unwrap();
            }
            let elapsed = started.elapsed();
            let n = (batches * per_batch) as f64;
            println!(
                "partitions={partitions} inflight={inflight} records={n} record_size~{record_size}B elapsed={elapsed:?} => {:.0} records/s, {:.1} MB/s of frames",
                n / elapsed.as_secs_f64(),
                log.describe_topic("bench").await.unwrap().unwrap().partitions.iter().map(|p| p.size_bytes).sum::<u64>() as f64 / elapsed.as_secs_f64() / 1e6,
            );
        }
    });
}

#[test]
fn new_topic_settings_the_embedded_log_applies() {
    let with = |pairs: &[(&str, &str)]| {
        let mut t = NewTopic::new("t", -1, 3);
        t.configs = pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
        t
    };
    let c = topic_config(&with(&[]), 4).unwrap();
    assert_eq!((c.partitions, c.cleanup), (4, CleanupPolicy::Delete), "-1 partitions: the default count");
    assert_eq!(c.retention_ms, TopicConfig::new(4).retention_ms, "the log's default retention");
    let c = topic_config(&with(&[("cleanup.policy", "compact,delete")]), 1).unwrap();
    assert_eq!(c.cleanup, CleanupPolicy::Compact, "compact,delete compacts");
    let c = topic_config(&with(&[("retention.ms", "-1"), ("retention.bytes", "1000"), ("compression.type", "lz4")]), 1).unwrap();
    assert_eq!((c.retention_ms, c.retention_bytes), (None, Some(1000)), "other configs are ignored");
    for (k, v) in [("cleanup.policy", "shred"), ("retention.ms", "soon"), ("retention.bytes", "-5")] {
        let err = topic_config(&with(&[(k, v)]), 1).unwrap_err().to_string();
        assert!(err.contains(k) && err.contains("topic t"), "{err}");
    }
}

/// Sets the soft limit on the size of any file this process writes (`RLIMIT_FSIZE`, through
/// util-linux's `prlimit`): writes past it fail with EFBIG, a stand-in for a full disk that
/// needs no mount (the worker-level test uses a real full filesystem). `_sigxfsz`, a handler
/// for SIGXFSZ, keeps the signal from ending the process, so the write fails instead.
/// nextest runs each test in a process of its own.
fn limit_file_size(bytes: Option<u64>, _sigxfsz: &tokio::signal::unix::Signal) {
    let soft = bytes.map_or("unlimited".to_owned(), |b| b.to_string());
    let status = std::process::Command::new("prlimit")
        .arg("--pid")
        .arg(std::process::id().to_string())
        .arg(format!("--fsize={soft}:"))
        .status()
        .expect("prlimit (util-linux)");
    assert!(status.success(), "prlimit --fsize={soft}");
}

/// A disk that fills. The groups that do not fit fail with the OS error and leave nothing
/// behind (also one that had rolled to a new segment first); nothing acknowledged is lost;
/// the log keeps taking what fits, without a reopen, at the offsets the failed groups did
/// not get; once there is room again it goes on; and a reopen shows exactly the
/// acknowledged records.
#[tokio::test]
async fn a_full_disk_fails_the_groups_that_do_not_fit_and_the_log_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let options = EmbeddedOptions { segment_bytes: 64 << 10, ..opts() };
    let t = tp("t", 0);
    let mut acked: Vec<(i64, String)> = Vec::new();
    let value = |tag: &str, n: usize| format!("{tag}-{}", "x".repeat(n));
    let sigxfsz = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::from_raw(25)).unwrap();
    {
        let log = EmbeddedLog::open(dir.path(), options.clone()).unwrap();
        log.ensure_topic("t", TopicConfig::new(1)).await.unwrap();
        for i in 0..10 {
            let v = value(&format!("a{i}"), 1000);
            let offsets = log.append(vec![produce("t", 0, rec(None, Some(&v)))]).await.unwrap();
            acked.push((offsets[0], v));
        }
        let used = log.inner.partition(&t).unwrap().active().len();
        assert!(used > 10_000 && used < 20_000, "{used}");
        limit_file_size(Some(used + 3000), &sigxfsz);

        // A group of 8 kB: partly written, then EFBIG.
        let group: Vec<Produce> = (0..8).map(|i| produce("t", 0, rec(None, Some(&value(&format!("lost{i}"), 1000))))).collect();
        let err = log.append(group).await.unwrap_err();
        match &err {
            LogError::Io { source, .. } => assert!(source.to_string().contains("File too large"), "{source}"),
            other => panic!("expected an i/o error, got {other:?}"),
        }
        assert_eq!(log.offsets(&t).await.unwrap(), (0, 10));
        assert_eq!(std::fs::metadata(&segment_files(dir.path(), "t", 0)[0]).unwrap().len(), used, "the torn group is cut away");

        // What still fits goes in at once, at the offset the failed group did not get.
        let v = value("fits", 1000);
        assert_eq!(log.append(vec![produce("t", 0, rec(None, Some(&v)))]).await.unwrap(), vec![10]);
        acked.push((10, v));

        // A record larger than a segment: the writer rolls to a new segment first, then
        // cannot write it there either. The new segment goes away again.
        let big = value("big", 70 << 10);
        let err = log.append(vec![produce("t", 0, rec(None, Some(&big)))]).await.unwrap_err();
        assert!(matches!(err, LogError::Io { .. }), "{err:?}");
        assert_eq!(segment_files(dir.path(), "t", 0).len(), 1);
        assert_eq!(log.offsets(&t).await.unwrap(), (0, 11));

        // Room again: appends go on, a roll included.
        limit_file_size(None, &sigxfsz);
        for i in 0..8 {
            let v = value(&format!("b{i}"), 1000);
            let offsets = log.append(vec![produce("t", 0, rec(None, Some(&v)))]).await.unwrap();
            acked.push((offsets[0], v));
        }
        let offsets = log.append(vec![produce("t", 0, rec(None, Some(&big)))]).await.unwrap();
        acked.push((offsets[0], big.clone()));
        assert_eq!(segment_files(dir.path(), "t", 0).len(), 2);
        let read: Vec<(i64, String)> = read_all(&log, &t, 0).await.iter().map(|r| (r.offset, value_of(r))).collect();
        assert_eq!(read, acked);
    }
    let log = EmbeddedLog::open(dir.path(), options).unwrap();
    let read: Vec<(i64, String)> = read_all(&log, &t, 0).await.iter().map(|r| (r.offset, value_of(r))).collect();
    assert_eq!(read.len(), 20);
    assert_eq!(read, acked, "after a reopen: exactly the acknowledged records, offsets 0..20");
}
