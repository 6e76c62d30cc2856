//! One function per clause of the `Log` contract, each against a fresh backend.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use sluice_api::TopicPartition;
use sluice_runtime::log::{CleanupPolicy, Log, LogRecord, NewTopic, Produce, StoredRecord, TopicConfig};

use crate::backends::Backend;

/// Now, in epoch milliseconds. Records carry recent timestamps: a broker deletes records
/// older than the topic's `retention.ms` (7 days by default) on its own schedule, which
/// would empty a test's partition under it.
fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64
}

fn record(key: Option<&str>, value: Option<&str>) -> LogRecord {
    LogRecord {
        key: key.map(|k| k.as_bytes().to_vec()),
        value: value.map(|v| v.as_bytes().to_vec()),
        timestamp: now_ms(),
        headers: Vec::new(),
    }
}

fn produce(topic: &str, partition: i32, value: &str) -> Produce {
    Produce { topic: topic.into(), partition, record: record(Some(value), Some(value)) }
}

fn value(r: &StoredRecord) -> String {
    String::from_utf8(r.record.value.clone().unwrap_or_default()).unwrap()
}

/// Every record of `tp` from `from` to the end as of now.
async fn read_all(log: &dyn Log, tp: &TopicPartition, from: i64) -> Vec<StoredRecord> {
    let (_, end) = log.offsets(tp).await.unwrap();
    let mut out: Vec<StoredRecord> = Vec::new();
    let mut next = from;
    while next < end {
        let batch = log.read(tp, next, 1 << 20, Duration::ZERO).await.unwrap();
        let Some(last) = batch.last() else { panic!("read of {tp} at {next} returned nothing although the partition ends at {end}") };
        next = last.offset + 1;
        out.extend(batch);
    }
    out
}

pub async fn append_assigns_offsets_in_call_order(b: &Backend) {
    let log = &b.log;
    log.ensure_topic("orders", TopicConfig::new(2)).await.unwrap();
    // Several calls in flight at once, records of both partitions interleaved.
    let acks: Vec<_> = (0..5).map(|i| log.append((0..4).map(|j| produce("orders", j % 2, &format!("c{i}r{j}"))).collect())).collect();
    let mut offsets = Vec::new();
    for ack in acks {
        offsets.push(ack.await.unwrap());
    }
    for (i, o) in offsets.iter().enumerate() {
        let base = 2 * i as i64;
        assert_eq!(o, &vec![base, base, base + 1, base + 1], "{}: call {i}", b.name());
    }
    for p in 0..2 {
        let got: Vec<String> = read_all(log.as_ref(), &TopicPartition::new("orders", p), 0).await.iter().map(value).collect();
        let want: Vec<String> = (0..5).flat_map(|i| (0..4).filter(move |j| j % 2 == p).map(move |j| format!("c{i}r{j}"))).collect();
        assert_eq!(got, want, "{}: partition {p} keeps call order", b.name());
    }
}

pub async fn acks_resolve_in_call_order(b: &Backend) {
    let log = &b.log;
    log.ensure_topic("many", TopicConfig::new(4)).await.unwrap();
    // Calls to different partitions, which a broker completes independently.
    let mut acks: Vec<_> = (0..40).map(|i| log.append(vec![produce("many", i % 4, &format!("v{i}"))])).collect();
    let last = acks.pop().unwrap();
    last.await.unwrap();
    for (i, ack) in acks.into_iter().enumerate() {
        // Polled once: the future of every earlier call must already be resolved.
        let polled = tokio::time::timeout(Duration::ZERO, ack).await;
        assert!(matches!(polled, Ok(Ok(_))), "{}: call {i} was not resolved when call 39 was", b.name());
    }
}

pub async fn acknowledged_records_are_visible_to_a_fresh_reader(b: &Backend) {
    let log = &b.log;
    log.ensure_topic("durable", TopicConfig::new(1)).await.unwrap();
    let tp = TopicPartition::new("durable", 0);
    for round in 0..3 {
        let offsets = log.append((0..10).map(|i| produce("durable", 0, &format!("r{round}v{i}"))).collect()).await.unwrap();
        let last = *offsets.last().unwrap();
        // Right after the ack, without waiting: the end covers the batch...
        let (_, end) = log.offsets(&tp).await.unwrap();
        assert!(end > last, "{}: end {end} does not cover acknowledged offset {last}", b.name());
        // ...and a reader that never saw the partition gets every record.
        let reader = b.second_handle().unwrap_or_else(|| log.clone());
        let got = read_all(reader.as_ref(), &tp, 0).await;
        assert_eq!(got.len() as i64, last + 1, "{}", b.name());
        assert_eq!(value(got.last().unwrap()), format!("r{round}v9"));
    }
}

pub async fn round_trip_keeps_nulls_headers_and_timestamps(b: &Backend) {
    let log = &b.log;
    log.ensure_topic("shapes", TopicConfig::new(1)).await.unwrap();
    let t = now_ms() - 1000;
    let records = vec![
        LogRecord {
            key: None,
            value: Some(b"no key".to_vec()),
            timestamp: t,
            headers: vec![("h1".into(), Some(b"x".to_vec())), ("h1".into(), None), ("h2".into(), Some(Vec::new()))],
        },
        LogRecord { key: Some(b"tomb".to_vec()), value: None, timestamp: t + 1, headers: Vec::new() },
        LogRecord { key: Some(Vec::new()), value: Some(Vec::new()), timestamp: t + 2, headers: Vec::new() },
    ];
    log.append(records.iter().cloned().map(|record| Produce { topic: "shapes".into(), partition: 0, record }).collect()).await.unwrap();
    let got: Vec<LogRecord> = read_all(log.as_ref(), &TopicPartition::new("shapes", 0), 0).await.into_iter().map(|r| r.record).collect();
    assert_eq!(got, records, "{}", b.name());
}

pub async fn read_from_an_offset_and_bounded_by_bytes(b: &Backend) {
    let log = &b.log;
    log.ensure_topic("seek", TopicConfig::new(1)).await.unwrap();
    let tp = TopicPartition::new("seek", 0);
    let big = "x".repeat(1000);
    log.append((0..50).map(|i| produce("seek", 0, &format!("{i:02}{big}"))).collect()).await.unwrap();
    // From the middle, then back to an earlier offset: each read starts where asked.
    for from in [30, 5, 49, 0] {
        let batch = log.read(&tp, from, 1 << 20, Duration::from_secs(5)).await.unwrap();
        assert_eq!(batch.first().map(|r| r.offset), Some(from), "{}: read at {from}", b.name());
        assert!(value(&batch[0]).starts_with(&format!("{from:02}")));
        let offsets: Vec<i64> = batch.iter().map(|r| r.offset).collect();
        assert!(offsets.windows(2).all(|w| w[1] == w[0] + 1), "{}: no gaps", b.name());
    }
    // A small byte budget still returns at least one record, and not all of them.
    let small = log.read(&tp, 10, 100, Duration::from_secs(5)).await.unwrap();
    assert!(!small.is_empty() && small.len() < 40, "{}: {} records for 100 bytes", b.name(), small.len());
    assert_eq!(small[0].offset, 10);
    // Continuing where that read stopped misses nothing.
    let next = small.last().unwrap().offset + 1;
    let rest = read_all(log.as_ref(), &tp, next).await;
    assert_eq!(rest.first().unwrap().offset, next);
    assert_eq!(rest.last().unwrap().offset, 49);
}

pub async fn read_at_the_end_waits_at_most_max_wait(b: &Backend) {
    let log = &b.log;
    log.ensure_topic("quiet", TopicConfig::new(1)).await.unwrap();
    let tp = TopicPartition::new("quiet", 0);
    log.append(vec![produce("quiet", 0, "only")]).await.unwrap();
    assert_eq!(log.read(&tp, 0, 1 << 20, Duration::from_secs(5)).await.unwrap().len(), 1);
    for wait in [Duration::ZERO, Duration::from_millis(300)] {
        let t = Instant::now();
        let batch = log.read(&tp, 1, 1 << 20, wait).await.unwrap();
        let took = t.elapsed();
        assert!(batch.is_empty(), "{}", b.name());
        assert!(took >= wait, "{}: returned after {took:?}, before max_wait {wait:?}", b.name());
        assert!(took < wait + Duration::from_secs(2), "{}: returned after {took:?} for max_wait {wait:?}", b.name());
    }
}

pub async fn waiting_read_returns_a_record_appended_meanwhile(b: &Backend) {
    let log = b.log.clone();
    log.ensure_topic("live", TopicConfig::new(1)).await.unwrap();
    let tp = TopicPartition::new("live", 0);
    let reader = {
        let (log, tp) = (log.clone(), tp.clone());
        tokio::spawn(async move {
            let t = Instant::now();
            let batch = log.read(&tp, 0, 1 << 20, Duration::from_secs(10)).await.unwrap();
            (batch, t.elapsed())
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    log.append(vec![produce("live", 0, "late")]).await.unwrap();
    let (batch, took) = reader.await.unwrap();
    assert_eq!(batch.iter().map(value).collect::<Vec<_>>(), vec!["late"], "{}", b.name());
    assert!(took < Duration::from_secs(5), "{}: the waiting read took {took:?}", b.name());
}

pub async fn partition_count_creates_missing_topics(b: &Backend) {
    let log = &b.log;
    assert!(log.describe_topic("fresh").await.unwrap().is_none(), "{}: describe must not create", b.name());
    assert_eq!(log.partition_count("fresh").await.unwrap(), 1, "{}", b.name());
    assert!(log.list_topics().await.unwrap().contains(&"fresh".to_owned()));
    let d = log.describe_topic("fresh").await.unwrap().unwrap();
    assert_eq!(d.partitions.len(), 1);
    assert_eq!((d.partitions[0].start_offset, d.partitions[0].end_offset), (0, 0));
    let offsets = log.append(vec![produce("fresh", 0, "a")]).await.unwrap();
    assert_eq!(offsets, vec![0]);
    assert_eq!(log.offsets(&TopicPartition::new("fresh", 0)).await.unwrap(), (0, 1));
}

pub async fn ensure_topic_keeps_an_existing_topic(b: &Backend) {
    let log = &b.log;
    log.ensure_topic("fixed", TopicConfig::new(3)).await.unwrap();
    log.ensure_topic("fixed", TopicConfig::compacted(5)).await.unwrap();
    let d = log.describe_topic("fixed").await.unwrap().unwrap();
    assert_eq!(d.partitions.len(), 3, "{}", b.name());
    assert_eq!(d.config.cleanup, CleanupPolicy::Delete, "{}", b.name());
    assert_eq!(log.partition_count("fixed").await.unwrap(), 3);
}

pub async fn create_topic_applies_its_settings_once(b: &Backend) {
    let log = &b.log;
    let mut topic = NewTopic::new("made", 3, -1);
    topic.configs.insert("cleanup.policy".into(), "compact".into());
    assert!(log.create_topic(&topic).await.unwrap(), "{}: created", b.name());
    let d = log.describe_topic("made").await.unwrap().unwrap();
    assert_eq!(d.partitions.len(), 3, "{}", b.name());
    assert_eq!(d.config.cleanup, CleanupPolicy::Compact, "{}", b.name());
    // A second request, with other settings, finds the topic and changes nothing.
    assert!(!log.create_topic(&NewTopic::new("made", 5, -1)).await.unwrap(), "{}: existed", b.name());
    assert_eq!(log.partition_count("made").await.unwrap(), 3, "{}", b.name());
    // -1 partitions: the log's default; the topic takes records at once.
    let mut by_default = NewTopic::new("defaulted", -1, -1);
    by_default.configs.insert("retention.ms".into(), "3600000".into());
    assert!(log.create_topic(&by_default).await.unwrap(), "{}", b.name());
    let d = log.describe_topic("defaulted").await.unwrap().unwrap();
    assert!(!d.partitions.is_empty(), "{}", b.name());
    assert_eq!(d.config.retention_ms, Some(3_600_000), "{}", b.name());
    assert_eq!(log.append(vec![produce("defaulted", 0, "a")]).await.unwrap(), vec![0], "{}", b.name());
}

pub async fn compacted_topic_keeps_the_newest_value_per_key(b: &Backend) {
    let log = &b.log;
    log.ensure_topic("table", TopicConfig::compacted(1)).await.unwrap();
    let d = log.describe_topic("table").await.unwrap().unwrap();
    assert_eq!(d.config.cleanup, CleanupPolicy::Compact, "{}", b.name());
    assert_eq!(d.config.retention_ms, None, "{}", b.name());
    let tp = TopicPartition::new("table", 0);
    for round in 0..20 {
        let batch = (0..5)
            .map(|k| Produce {
                topic: "table".into(),
                partition: 0,
                record: record(Some(&format!("k{k}")), Some(&format!("k{k}@{round}"))),
            })
            .collect();
        log.append(batch).await.unwrap();
    }
    // Deletes: k4 gets a tombstone.
    log.append(vec![Produce { topic: "table".into(), partition: 0, record: record(Some("k4"), None) }]).await.unwrap();
    let compacted = b.compact_now();
    let all = read_all(log.as_ref(), &tp, log.offsets(&tp).await.unwrap().0).await;
    // Whatever was compacted: replaying the topic gives the newest value of every key.
    let mut table = BTreeMap::new();
    for r in &all {
        let k = String::from_utf8(r.record.key.clone().unwrap()).unwrap();
        match &r.record.value {
            Some(v) => table.insert(k, String::from_utf8(v.clone()).unwrap()),
            None => table.remove(&k),
        };
    }
    let want: BTreeMap<String, String> = (0..4).map(|k| (format!("k{k}"), format!("k{k}@19"))).collect();
    assert_eq!(table, want, "{}", b.name());
    if compacted {
        // Older values of a key are gone once the backend compacted (the active segment
        // may keep a few).
        assert!(all.len() < 60, "{}: {} records left after compaction", b.name(), all.len());
        let offsets: Vec<i64> = all.iter().map(|r| r.offset).collect();
        assert!(offsets.windows(2).all(|w| w[1] > w[0]), "offsets increase across compaction gaps");
    }
}

pub async fn group_offsets_round_trip(b: &Backend) {
    let log = &b.log;
    log.ensure_topic("in", TopicConfig::new(2)).await.unwrap();
    let (p0, p1) = (TopicPartition::new("in", 0), TopicPartition::new("in", 1));
    assert!(log.group_offsets("connect-sink").await.unwrap().is_empty(), "{}", b.name());
    log.commit_group("connect-sink", &BTreeMap::from([(p0.clone(), 5), (p1.clone(), 7)])).await.unwrap();
    log.commit_group("connect-other", &BTreeMap::from([(p0.clone(), 1)])).await.unwrap();
    // A later commit of one partition leaves the other as it was.
    log.commit_group("connect-sink", &BTreeMap::from([(p0.clone(), 9)])).await.unwrap();
    assert_eq!(log.group_offsets("connect-sink").await.unwrap(), BTreeMap::from([(p0.clone(), 9), (p1.clone(), 7)]), "{}", b.name());
    if let Some(other) = b.second_handle() {
        assert_eq!(
            other.group_offsets("connect-sink").await.unwrap(),
            BTreeMap::from([(p0.clone(), 9), (p1.clone(), 7)]),
            "{}: a second client",
            b.name()
        );
    }
    log.delete_group("connect-sink").await.unwrap();
    assert!(log.group_offsets("connect-sink").await.unwrap().is_empty(), "{}", b.name());
    assert_eq!(log.group_offsets("connect-other").await.unwrap(), BTreeMap::from([(p0, 1)]), "{}", b.name());
    // Deleting a group that does not exist is not an error.
    log.delete_group("connect-never").await.unwrap();
}

pub async fn reading_again_inside_the_last_batch_misses_nothing(b: &Backend) {
    let log = &b.log;
    log.ensure_topic("partial", TopicConfig::new(1)).await.unwrap();
    let tp = TopicPartition::new("partial", 0);
    log.append((0..100).map(|i| produce("partial", 0, &format!("v{i}"))).collect()).await.unwrap();
    // A caller takes the first records of each batch only, as the sink loop does when a
    // batch exceeds what one put takes.
    let mut next = 0;
    let mut seen = Vec::new();
    while next < 100 {
        let batch = log.read(&tp, next, 1 << 20, Duration::from_secs(5)).await.unwrap();
        assert_eq!(batch.first().map(|r| r.offset), Some(next), "{}", b.name());
        for r in batch.iter().take(7) {
            seen.push(value(r));
        }
        next = batch[batch.len().min(7) - 1].offset + 1;
    }
    assert_eq!(seen, (0..100).map(|i| format!("v{i}")).collect::<Vec<_>>(), "{}", b.name());
}
