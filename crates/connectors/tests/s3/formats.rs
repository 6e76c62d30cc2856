//! Each format × each partitioner: the documented object names and exactly the records.

use sluice_api::Value;

use crate::harness::*;

/// One hour of records per 6 offsets: offsets 0..6 at 10:00-10:50, 6..12 at 11:00-11:50.
fn ts(i: i64) -> i64 {
    T0 + (i / 6) * 3_600_000 + (i % 6) * 600_000
}

/// A partitioner's name, its keys, and the objects it must write with their record ids.
type Case<'a> = (&'a str, Vec<(&'a str, &'a str)>, Vec<(String, Vec<i64>)>);

async fn run(format: &str, extra: &[(&str, &str)], ext: &str) {
    let moto = Moto::start();
    moto.create_bucket().await;
    let class = format_class(format);
    let cases: Vec<Case> = vec![
        (
            "default",
            vec![("partitioner.class", "io.confluent.connect.storage.partitioner.DefaultPartitioner")],
            vec![
                (format!("topics/orders/partition=0/orders+0+0000000000{ext}"), vec![0, 1, 2]),
                (format!("topics/orders/partition=0/orders+0+0000000003{ext}"), vec![3, 4, 5]),
                (format!("topics/orders/partition=0/orders+0+0000000006{ext}"), vec![6, 7, 8]),
                (format!("topics/orders/partition=0/orders+0+0000000009{ext}"), vec![9, 10, 11]),
            ],
        ),
        (
            "field",
            vec![("partitioner.class", "io.confluent.connect.storage.partitioner.FieldPartitioner"), ("partition.field.name", "region")],
            vec![
                (format!("topics/orders/region=eu/orders+0+0000000000{ext}"), vec![0, 2]),
                (format!("topics/orders/region=eu/orders+0+0000000004{ext}"), vec![4]),
                (format!("topics/orders/region=eu/orders+0+0000000006{ext}"), vec![6, 8]),
                (format!("topics/orders/region=eu/orders+0+0000000010{ext}"), vec![10]),
                (format!("topics/orders/region=us/orders+0+0000000001{ext}"), vec![1]),
                (format!("topics/orders/region=us/orders+0+0000000003{ext}"), vec![3, 5]),
                (format!("topics/orders/region=us/orders+0+0000000007{ext}"), vec![7]),
                (format!("topics/orders/region=us/orders+0+0000000009{ext}"), vec![9, 11]),
            ],
        ),
        (
            "hourly",
            vec![
                ("partitioner.class", "io.confluent.connect.storage.partitioner.HourlyPartitioner"),
                ("locale", "en-US"),
                ("timezone", "UTC"),
                ("timestamp.extractor", "Record"),
            ],
            vec![
                (format!("topics/orders/year=2024/month=03/day=05/hour=10/orders+0+0000000000{ext}"), vec![0, 1, 2]),
                (format!("topics/orders/year=2024/month=03/day=05/hour=10/orders+0+0000000003{ext}"), vec![3, 4, 5]),
                (format!("topics/orders/year=2024/month=03/day=05/hour=11/orders+0+0000000006{ext}"), vec![6, 7, 8]),
                (format!("topics/orders/year=2024/month=03/day=05/hour=11/orders+0+0000000009{ext}"), vec![9, 10, 11]),
            ],
        ),
        (
            "daily",
            vec![
                ("partitioner.class", "io.confluent.connect.storage.partitioner.DailyPartitioner"),
                ("locale", "en-US"),
                ("timezone", "Asia/Tokyo"),
                ("timestamp.extractor", "RecordField"),
                ("timestamp.field", "at"),
            ],
            // `at` is T0 + i minutes: 19:00+ in Tokyo, the same day.
            vec![
                (format!("topics/orders/year=2024/month=03/day=05/orders+0+0000000000{ext}"), vec![0, 1, 2]),
                (format!("topics/orders/year=2024/month=03/day=05/orders+0+0000000003{ext}"), vec![3, 4, 5]),
                (format!("topics/orders/year=2024/month=03/day=05/orders+0+0000000006{ext}"), vec![6, 7, 8]),
                (format!("topics/orders/year=2024/month=03/day=05/orders+0+0000000009{ext}"), vec![9, 10, 11]),
            ],
        ),
        (
            "time-based",
            vec![
                ("partitioner.class", "io.confluent.connect.storage.partitioner.TimeBasedPartitioner"),
                ("partition.duration.ms", "1800000"),
                ("path.format", "'dt'=yyyy-MM-dd/'hm'=HHmm"),
                ("locale", "en-US"),
                ("timezone", "UTC"),
                ("timestamp.extractor", "Record"),
            ],
            // Half-hour buckets: 10:00 {0,1,2}, 10:30 {3,4,5}, 11:00 {6,7,8}, 11:30 {9,10,11}.
            vec![
                (format!("topics/orders/dt=2024-03-05/hm=1000/orders+0+0000000000{ext}"), vec![0, 1, 2]),
                (format!("topics/orders/dt=2024-03-05/hm=1030/orders+0+0000000003{ext}"), vec![3, 4, 5]),
                (format!("topics/orders/dt=2024-03-05/hm=1100/orders+0+0000000006{ext}"), vec![6, 7, 8]),
                (format!("topics/orders/dt=2024-03-05/hm=1130/orders+0+0000000009{ext}"), vec![9, 10, 11]),
            ],
        ),
    ];
    for (name, pprops, expected) in cases {
        let dir = format!("{format}-{name}");
        let mut props = vec![("format.class", class), ("flush.size", "3"), ("topics.dir", dir.as_str())];
        props.extend(pprops);
        props.extend(extra.iter().copied());
        let mut t = task(moto.props(&props)).await.expect("start");
        t.open(&[tp()]).await.unwrap();
        // 13 records: the 13th stays in an open object, not durable.
        put_retrying(&mut t, &orders(0, 13, ts), 1).await;
        assert_eq!(durable(&mut t, &tp(), 13).await, Some(12), "{name}: durable offset");
        let keys: Vec<String> = moto.keys().await.into_iter().filter(|k| k.starts_with(&format!("{dir}/"))).collect();
        let expected: Vec<(String, Vec<i64>)> =
            expected.into_iter().map(|(k, ids)| (k.replacen("topics/", &format!("{dir}/"), 1), ids)).collect();
        assert_eq!(keys, expected.iter().map(|(k, _)| k.clone()).collect::<Vec<_>>(), "{name}: object names");
        for (key, ids) in &expected {
            let bytes = moto.get(key).await;
            assert_eq!(&ids_of(format, key, &bytes), ids, "{name}: records of {key}");
        }
        t.stop().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_objects_for_every_partitioner() {
    run("json", &[], ".json").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gzip_json_objects_for_every_partitioner() {
    run("json", &[("s3.compression.type", "gzip")], ".json.gz").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn avro_objects_for_every_partitioner() {
    run("avro", &[("avro.codec", "deflate")], ".avro").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parquet_objects_for_every_partitioner() {
    run("parquet", &[], ".snappy.parquet").await;
}

/// Every column of a Parquet object, as the Rust reader, pyarrow and (when installed) DuckDB read it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parquet_values_and_logical_types_read_back_with_pyarrow() {
    use arrow_array::cast::AsArray as _;
    use arrow_array::types::*;
    use arrow_array::Array as _;
    let moto = Moto::start();
    moto.create_bucket().await;
    for (codec, ext) in [("zstd", ".zstd.parquet"), ("gzip", ".gz.parquet"), ("none", ".parquet")] {
        let dir = format!("pq-{codec}");
        let mut t = task(moto.props(&[
            ("format.class", format_class("parquet")),
            ("flush.size", "4"),
            ("parquet.codec", codec),
            ("topics.dir", dir.as_str()),
        ]))
        .await
        .unwrap();
        put_retrying(&mut t, &orders(0, 4, |i| T0 + i), 1).await;
        let key = format!("{dir}/orders/partition=0/orders+0+0000000000{ext}");
        let bytes = moto.get(&key).await;
        let batches = parquet_batches(&bytes);
        let b = &batches[0];
        assert_eq!(b.num_rows(), 4);
        let price = b.column_by_name("price").unwrap().as_primitive::<Decimal128Type>();
        assert_eq!(price.value_as_string(3), "3.05");
        let at = b.column_by_name("at").unwrap().as_primitive::<TimestampMillisecondType>();
        assert_eq!(at.value(2), T0 + 120_000);
        assert_eq!(b.column_by_name("day").unwrap().as_primitive::<Date32Type>().value(0), 19_787);
        let note = b.column_by_name("note").unwrap().as_string::<i32>();
        assert!(note.is_null(0) && note.value(1) == "note 1");
        let ship = b.column_by_name("ship").unwrap().as_struct();
        assert!(ship.is_null(0) && !ship.is_null(1));
        assert_eq!(ship.column_by_name("city").unwrap().as_string::<i32>().value(1), "city-1");
        let tags = b.column_by_name("tags").unwrap().as_list::<i32>();
        assert_eq!(tags.value(2).as_string::<i32>().value(0), "t2");
        let rows = pyarrow_rows(&bytes);
        assert_eq!(rows.len(), 4);
        assert_eq!(rows[1]["id"], 1);
        assert_eq!(rows[1]["price"], "1.05");
        assert_eq!(rows[1]["note"], "note 1");
        assert_eq!(rows[1]["ship"]["city"], "city-1");
        assert_eq!(rows[1]["tags"], serde_json::json!(["t1", "x"]));
        assert_eq!(rows[1]["attrs"], serde_json::json!([["a", 1]]));
        assert_eq!(rows[0]["ship"], serde_json::Value::Null);
        assert_eq!(duckdb_summary(&bytes), serde_json::json!([4, 6, "1.05", "city-1"]), "DuckDB reads the same rows");
        t.stop().await.unwrap();
    }
}

/// The Avro schema follows Confluent's mapping and the values decode with apache-avro.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn avro_schema_and_values() {
    use apache_avro::types::Value as A;
    let moto = Moto::start();
    moto.create_bucket().await;
    for codec in ["null", "snappy"] {
        let dir = format!("avro-{codec}");
        let mut t = task(moto.props(&[
            ("format.class", format_class("avro")),
            ("flush.size", "2"),
            ("avro.codec", codec),
            ("topics.dir", dir.as_str()),
        ]))
        .await
        .unwrap();
        put_retrying(&mut t, &orders(0, 2, |i| T0 + i), 1).await;
        let bytes = moto.get(&format!("{dir}/orders/partition=0/orders+0+0000000000.avro")).await;
        let reader = apache_avro::Reader::new(&bytes[..]).unwrap();
        let schema = reader.writer_schema().clone();
        let values: Vec<A> = reader.map(Result::unwrap).collect();
        let raw = String::from_utf8_lossy(&bytes);
        assert!(raw.contains("\"connect.name\":\"shop.Order\""), "connect.name in the header");
        assert!(raw.contains("\"connect.type\":\"int8\""));
        assert!(matches!(schema, apache_avro::Schema::Record(ref r) if r.name.fullname(None) == "shop.Order"));
        let A::Record(f) = &values[1] else { panic!() };
        let get = |n: &str| f.iter().find(|(k, _)| k == n).map(|(_, v)| v.clone()).unwrap();
        assert_eq!(get("id"), A::Long(1));
        assert_eq!(get("region"), A::String("us".into()));
        assert_eq!(get("at"), A::TimestampMillis(T0 + 60_000));
        assert_eq!(get("day"), A::Date(19_787));
        assert!(matches!(get("price"), A::Decimal(_)));
        assert_eq!(get("note"), A::Union(1, Box::new(A::String("note 1".into()))));
        assert!(matches!(get("ship"), A::Union(1, _)));
        let A::Record(f0) = &values[0] else { panic!() };
        assert_eq!(f0.iter().find(|(k, _)| k == "ship").unwrap().1, A::Union(0, Box::new(A::Null)));
        t.stop().await.unwrap();
    }
}

/// Schemaless JSON values are written as JSON lines; ByteArrayFormat writes raw bytes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schemaless_json_and_byte_array() {
    let moto = Moto::start();
    moto.create_bucket().await;
    let rec = |i: i64, value: Value| sluice_api::SinkRecord {
        topic: "orders".into(),
        partition: 0,
        offset: i,
        value,
        timestamp: Some(T0),
        ..Default::default()
    };
    let mut t =
        task(moto.props(&[("format.class", format_class("json")), ("flush.size", "2"), ("topics.dir", "schemaless")])).await.unwrap();
    let map = |i: i64| Value::Map(vec![("id".into(), Value::Int64(i)), ("tags".into(), Value::Array(vec!["a".into()]))]);
    put_retrying(&mut t, &[rec(0, map(0)), rec(1, map(1))], 1).await;
    let body = moto.get("schemaless/orders/partition=0/orders+0+0000000000.json").await;
    assert_eq!(String::from_utf8(body).unwrap(), "{\"id\":0,\"tags\":[\"a\"]}\n{\"id\":1,\"tags\":[\"a\"]}\n");
    let mut t = task(moto.props(&[
        ("format.class", "io.confluent.connect.s3.format.bytearray.ByteArrayFormat"),
        ("flush.size", "2"),
        ("topics.dir", "raw"),
    ]))
    .await
    .unwrap();
    put_retrying(&mut t, &[rec(0, Value::Bytes(b"one".to_vec())), rec(1, Value::Bytes(b"two".to_vec()))], 1).await;
    assert_eq!(moto.get("raw/orders/partition=0/orders+0+0000000000.bin").await, b"one\ntwo\n");
    // Tombstones: fail by default, skipped with ignore (and the offset still moves on).
    let mut t = task(moto.props(&[("format.class", format_class("json")), ("flush.size", "2"), ("topics.dir", "nulls")])).await.unwrap();
    let err = t.put(vec![rec(0, Value::Null)]).await.unwrap_err();
    assert!(!err.is_retriable() && err.to_string().contains("behavior.on.null.values=ignore"), "{err}");
    let mut t = task(moto.props(&[
        ("format.class", format_class("json")),
        ("flush.size", "2"),
        ("topics.dir", "nulls"),
        ("behavior.on.null.values", "ignore"),
    ]))
    .await
    .unwrap();
    put_retrying(&mut t, &[rec(0, map(0)), rec(1, Value::Null), rec(2, map(2)), rec(3, Value::Null)], 1).await;
    assert_eq!(moto.keys().await.iter().filter(|k| k.starts_with("nulls/")).count(), 1);
    assert_eq!(durable(&mut t, &tp(), 4).await, Some(4));
}
