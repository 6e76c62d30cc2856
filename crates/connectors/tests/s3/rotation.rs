//! Rotation by size, record time, wall clock and schema; multipart uploads; identical
//! rewrites after a crash.

use std::time::Duration;

use sluice_api::{Schema, SinkRecord, SinkTask, Struct, Value};

use crate::harness::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rotation_by_record_time() {
    let moto = Moto::start();
    moto.create_bucket().await;
    let mut t = task(moto.props(&[
        ("format.class", format_class("json")),
        ("flush.size", "100"),
        ("rotate.interval.ms", "600000"),
        ("partitioner.class", "io.confluent.connect.storage.partitioner.TimeBasedPartitioner"),
        ("partition.duration.ms", "86400000"),
        ("path.format", "'day'=yyyyMMdd"),
        ("locale", "en-US"),
        ("timezone", "UTC"),
        ("timestamp.extractor", "Record"),
    ]))
    .await
    .unwrap();
    // Every 4 minutes: the span from an object's first record reaches 10 minutes at 3 and 6.
    put_retrying(&mut t, &orders(0, 8, |i| T0 + i * 240_000), 1).await;
    let keys = moto.keys().await;
    assert_eq!(keys, vec!["topics/orders/day=20240305/orders+0+0000000000.json", "topics/orders/day=20240305/orders+0+0000000003.json"]);
    assert_eq!(json_ids(&moto.get(&keys[0]).await, false), vec![0, 1, 2]);
    assert_eq!(json_ids(&moto.get(&keys[1]).await, false), vec![3, 4, 5]);
    assert_eq!(durable(&mut t, &tp(), 8).await, Some(6));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rotation_by_wall_clock_without_new_records() {
    // The object is cut at the first multiple of the interval (UTC) after the writer opened.
    // Start just after a boundary so the next one is nearly a whole interval away; the
    // "not cut yet" check counts only when it returned before that boundary (a slow machine
    // may pass it), the cut after the boundary is always checked.
    const INTERVAL: i64 = 3000;
    let moto = Moto::start();
    moto.create_bucket().await;
    while now_ms() % INTERVAL > 300 {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let boundary = (now_ms() / INTERVAL + 1) * INTERVAL;
    let interval = INTERVAL.to_string();
    let mut t = task(moto.props(&[
        ("format.class", format_class("json")),
        ("flush.size", "100"),
        ("rotate.schedule.interval.ms", &interval),
        ("timezone", "UTC"),
    ]))
    .await
    .unwrap();
    put_retrying(&mut t, &orders(0, 2, |_| T0), 1).await;
    let before = durable(&mut t, &tp(), 2).await;
    if now_ms() < boundary {
        assert_eq!(before, None, "cut before the scheduled boundary");
        assert!(moto.keys().await.is_empty());
    }
    // Where the writer opened only after the boundary (a very slow machine), its boundary is
    // the next one: wait up to one interval more.
    let deadline = now_ms().max(boundary) + INTERVAL + 5000;
    tokio::time::sleep(Duration::from_millis(u64::try_from(boundary - now_ms()).unwrap_or(0) + 100)).await;
    // The runtime calls pre_commit every offset.flush.interval.ms, records or not.
    let mut after = durable(&mut t, &tp(), 2).await;
    while after.is_none() && now_ms() < deadline {
        tokio::time::sleep(Duration::from_millis(200)).await;
        after = durable(&mut t, &tp(), 2).await;
    }
    assert_eq!(after, Some(2), "not cut after the scheduled boundary");
    assert_eq!(moto.keys().await, vec!["topics/orders/partition=0/orders+0+0000000000.json"]);
}

fn now_ms() -> i64 {
    i64::try_from(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis()).unwrap()
}

fn versioned(version: i32, with_extra: bool) -> sluice_api::SchemaRef {
    let mut fields = vec![("id", Schema::int64().into_ref())];
    if with_extra {
        fields.push(("extra", Schema::string().optional().into_ref()));
    }
    Schema::struct_of(fields).named("shop.Item").with_version(version).into_ref()
}

fn item(offset: i64, schema: &sluice_api::SchemaRef) -> SinkRecord {
    let mut s = Struct::new(schema.clone()).with("id", offset);
    if schema.field("extra").is_some() {
        s.put("extra", Value::String(format!("e{offset}")));
    }
    SinkRecord {
        topic: "orders".into(),
        partition: 0,
        offset,
        value_schema: Some(schema.clone()),
        value: Value::Struct(s),
        timestamp: Some(T0),
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schema_change_starts_a_new_object() {
    let moto = Moto::start();
    moto.create_bucket().await;
    let (v1, v2) = (versioned(1, false), versioned(2, true));
    // NONE: every change of schema starts a new object.
    let mut t = task(moto.props(&[("format.class", format_class("parquet")), ("flush.size", "10"), ("topics.dir", "none")])).await.unwrap();
    put_retrying(&mut t, &[item(0, &v1), item(1, &v1), item(2, &v2), item(3, &v2), item(4, &v1)], 1).await;
    let keys = moto.keys().await;
    assert_eq!(
        keys,
        vec!["none/orders/partition=0/orders+0+0000000000.snappy.parquet", "none/orders/partition=0/orders+0+0000000002.snappy.parquet"]
    );
    assert_eq!(parquet_ids(&moto.get(&keys[0]).await), vec![0, 1]);
    let b = parquet_batches(&moto.get(&keys[1]).await);
    assert_eq!(b[0].schema().fields().len(), 2, "the second object has the v2 schema");
    assert_eq!(durable(&mut t, &tp(), 5).await, Some(4));
    // BACKWARD: a newer version starts a new object; an older one is projected onto it.
    let mut t = task(moto.props(&[
        ("format.class", format_class("avro")),
        ("flush.size", "2"),
        ("topics.dir", "backward"),
        ("schema.compatibility", "BACKWARD"),
    ]))
    .await
    .unwrap();
    put_retrying(&mut t, &[item(0, &v1), item(1, &v2), item(2, &v1)], 1).await;
    let keys: Vec<String> = moto.keys().await.into_iter().filter(|k| k.starts_with("backward/")).collect();
    assert_eq!(keys, vec!["backward/orders/partition=0/orders+0+0000000000.avro", "backward/orders/partition=0/orders+0+0000000001.avro"]);
    let (_, values) = avro_records(&moto.get(&keys[1]).await);
    assert_eq!(values.len(), 2);
    let apache_avro::types::Value::Record(f) = &values[1] else { panic!() };
    assert_eq!(f[1].1, apache_avro::types::Value::Union(0, Box::new(apache_avro::types::Value::Null)), "v1 record projected onto v2");
}

/// An object larger than s3.part.size goes up as a multipart upload while records arrive.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn big_objects_stream_as_multipart_uploads() {
    let moto = Moto::start();
    moto.create_bucket().await;
    let mut t =
        task(moto.props(&[("format.class", format_class("json")), ("flush.size", "24000"), ("s3.part.size", "5242880")])).await.unwrap();
    let schema = Schema::struct_of([("id", Schema::int64().into_ref()), ("pad", Schema::string().into_ref())]).into_ref();
    let pad = "p".repeat(480);
    let records: Vec<SinkRecord> = (0..24_000)
        .map(|i| SinkRecord {
            topic: "orders".into(),
            partition: 0,
            offset: i,
            value_schema: Some(schema.clone()),
            value: Value::Struct(Struct::new(schema.clone()).with("id", i).with("pad", pad.as_str())),
            ..Default::default()
        })
        .collect();
    // Half the records: one full part is already uploaded, nothing is visible yet.
    put_retrying(&mut t, &records[..12_000], 1).await;
    assert!(moto.keys().await.is_empty());
    assert_eq!(moto.incomplete_uploads().await, 1);
    put_retrying(&mut t, &records[12_000..], 1).await;
    let keys = moto.keys().await;
    assert_eq!(keys, vec!["topics/orders/partition=0/orders+0+0000000000.json"]);
    let head = moto.client().head_object().bucket(BUCKET).key(&keys[0]).send().await.unwrap();
    assert!(head.e_tag().unwrap_or_default().trim_matches('"').ends_with("-3"), "three parts: {:?}", head.e_tag());
    assert_eq!(json_ids(&moto.get(&keys[0]).await, false), (0..24_000).collect::<Vec<_>>());
    assert_eq!(moto.incomplete_uploads().await, 0);
}

/// A task that dies before its offsets were committed is replaced by one that gets the
/// same records again: it writes the same objects, byte for byte, and nothing else.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replay_rewrites_identical_objects() {
    let moto = Moto::start();
    moto.create_bucket().await;
    for (format, extra) in
        [("parquet", ("parquet.codec", "zstd")), ("avro", ("avro.codec", "snappy")), ("json", ("s3.compression.type", "gzip"))]
    {
        let dir = format!("replay-{format}");
        let props = moto.props(&[("format.class", format_class(format)), ("flush.size", "4"), ("topics.dir", dir.as_str()), extra]);
        let mut first = task(props.clone()).await.unwrap();
        put_retrying(&mut first, &orders(0, 10, |i| T0 + i), 1).await;
        let keys: Vec<String> = moto.keys().await.into_iter().filter(|k| k.starts_with(&dir)).collect();
        assert_eq!(keys.len(), 2, "{keys:?}");
        let mut before = Vec::new();
        for k in &keys {
            before.push(moto.get(k).await);
        }
        drop(first); // a crash: no stop, no commit
        let mut second: Box<dyn SinkTask> = task(props).await.unwrap();
        put_retrying(&mut second, &orders(0, 10, |i| T0 + i), 1).await;
        let again: Vec<String> = moto.keys().await.into_iter().filter(|k| k.starts_with(&dir)).collect();
        assert_eq!(again, keys, "{format}: same names, no new objects");
        for (k, b) in keys.iter().zip(&before) {
            assert_eq!(&moto.get(k).await, b, "{format}: {k} rewritten with the same bytes");
        }
    }
}

/// A FieldPartitioner with many values and a flush.size that is never reached keeps many
/// small objects open: s3.open.objects.max.bytes bounds what they hold. Past it every open
/// object is uploaded (the records are then durable), at a record fixed by the records alone,
/// so a replay writes the same objects.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_open_objects_are_bounded_by_bytes() {
    const RECORDS: i64 = 4000;
    const SHARDS: i64 = 100;
    let moto = Moto::start();
    moto.create_bucket().await;
    let schema = Schema::struct_of([
        ("id", Schema::int64().into_ref()),
        ("shard", Schema::string().into_ref()),
        ("pad", Schema::string().into_ref()),
    ])
    .into_ref();
    let pad = "p".repeat(1000);
    let records: Vec<SinkRecord> = (0..RECORDS)
        .map(|i| SinkRecord {
            topic: "orders".into(),
            partition: 0,
            offset: i,
            value_schema: Some(schema.clone()),
            value: Value::Struct(
                Struct::new(schema.clone()).with("id", i).with("shard", format!("s{:02}", i % SHARDS)).with("pad", pad.as_str()),
            ),
            ..Default::default()
        })
        .collect();
    for format in ["json", "parquet"] {
        let dir = format!("bounded-{format}");
        let props = moto.props(&[
            ("format.class", format_class(format)),
            ("flush.size", "1000000"),
            ("s3.part.size", "5242880"),
            ("s3.open.objects.max.bytes", "1048576"),
            ("partitioner.class", sluice_connectors::s3_sink::FIELD_PARTITIONER),
            ("partition.field.name", "shard"),
            ("topics.dir", dir.as_str()),
        ]);
        let mut first = task(props.clone()).await.unwrap();
        put_retrying(&mut first, &records, 1).await;
        let keys: Vec<String> = moto.keys().await.into_iter().filter(|k| k.starts_with(&dir)).collect();
        // About 4 MB of records, uploaded about every MiB: each shard's records are in
        // several objects, though flush.size was never reached.
        let mut per_shard: std::collections::BTreeMap<String, usize> = Default::default();
        let mut seen = Vec::new();
        for k in &keys {
            let shard = k.split('/').nth(2).unwrap().trim_start_matches("shard=").to_owned();
            let bytes = moto.get(k).await;
            let ids = if format == "json" { json_ids(&bytes, false) } else { parquet_ids(&bytes) };
            assert!(ids.iter().all(|i| format!("s{:02}", i % SHARDS) == shard), "{k}: {ids:?}");
            seen.extend(ids);
            *per_shard.entry(shard).or_default() += 1;
        }
        assert_eq!(per_shard.len() as i64, SHARDS, "{format}: every shard has objects");
        assert!(per_shard.values().all(|n| *n >= 3), "{format}: objects per shard {per_shard:?}");
        seen.sort_unstable();
        let durable = durable(&mut first, &tp(), RECORDS).await.expect("a durable offset");
        assert_eq!(seen, (0..durable).collect::<Vec<_>>(), "{format}: the uploaded records are exactly the durable prefix");
        assert!(durable > RECORDS - 1200, "{format}: at most about a MiB of records stays open ({durable} durable of {RECORDS})");

        drop(first); // a crash: the open records are redelivered to a new task
        let mut second = task(props).await.unwrap();
        put_retrying(&mut second, &records, 1).await;
        let again: Vec<String> = moto.keys().await.into_iter().filter(|k| k.starts_with(&dir)).collect();
        assert_eq!(again, keys, "{format}: a replay cuts the objects at the same records");
    }
}
