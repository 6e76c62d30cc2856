//! Debezium's Kafka signal channel on the Postgres source, through the real binary, a real
//! Kafka-protocol broker and a real PostgreSQL 15: with `signal.enabled.channels=source,kafka`
//! a record keyed by the connector's `topic.prefix` on `<topic.prefix>-signal` starts an
//! incremental snapshot, then a blocking one; a record with another key is skipped. The
//! connector's own topics stay in the worker's embedded log.

use std::process::Command;
use std::time::Duration;

use sluice_tests::{eventually, json, Json, KafkaBroker, Postgres, Worker};

use crate::postgres_golden::consume;

const ROWS: i64 = 500;
const TOPIC: &str = "ks.public.items";

/// Produces `(key, value)` records to partition 0 of `topic` with confluent-kafka.
fn produce(bootstrap: &str, topic: &str, records: &[(&str, Json)]) {
    let script = r#"
import json, sys
from confluent_kafka import Producer
bootstrap, topic, records = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
p = Producer({"bootstrap.servers": bootstrap})
for key, value in records:
    p.produce(topic, key=key.encode(), value=json.dumps(value).encode(), partition=0)
left = p.flush(30)
sys.exit(1 if left else 0)
"#;
    let records = serde_json::to_string(&records.iter().map(|(k, v)| json!([k, v])).collect::<Vec<_>>()).unwrap();
    let out =
        Command::new(sluice_tests::kafka_python()).arg("-I").arg("-c").arg(script).args([bootstrap, topic, &records]).output().unwrap();
    assert!(out.status.success(), "producing signals failed: {}", String::from_utf8_lossy(&out.stderr));
}

fn reads(data: &std::path::Path) -> Vec<Json> {
    consume(data, TOPIC).into_iter().filter(|r| r["value"]["op"] == "r").collect()
}

#[test]
fn signals_from_a_kafka_topic_start_incremental_and_blocking_snapshots() {
    let dir = tempfile::tempdir().unwrap();
    let broker = KafkaBroker::start(&dir.path().join("broker"));
    let pg = Postgres::start();
    pg.sql(&format!(
        "CREATE TABLE dbz_signal (id varchar(64) PRIMARY KEY, type varchar(32) NOT NULL, data text);
         CREATE TABLE items (id bigint PRIMARY KEY, v int NOT NULL);
         INSERT INTO items SELECT g, 0 FROM generate_series(1, {ROWS}) g;"
    ));
    let data = dir.path().join("worker/data");
    let w = Worker::start(
        &dir.path().join("worker"),
        &[("offset.flush.interval.ms", "200"), ("key.converter.schemas.enable", "false"), ("value.converter.schemas.enable", "false")],
    );
    let config = json!({
        "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
        "database.hostname": "127.0.0.1", "database.port": pg.port.to_string(), "database.user": "postgres",
        "database.password": "", "database.dbname": "postgres", "topic.prefix": "ks",
        "table.include.list": "public.items", "slot.name": "kafka_signals", "snapshot.mode": "no_data",
        "signal.data.collection": "public.dbz_signal",
        "signal.enabled.channels": "source,kafka",
        "signal.kafka.bootstrap.servers": broker.bootstrap,
        "incremental.snapshot.chunk.size": "100",
    });
    let (code, body) = w.post("/connectors", &json!({"name": "ks", "config": config}));
    assert_eq!(code, 201, "{body}");
    w.wait_running("ks", 1);
    eventually(Duration::from_secs(30), "the replication slot", || {
        pg.sql("SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'kafka_signals'") == "1"
    });

    // Another connector's signal is skipped; this one's starts an incremental snapshot.
    produce(
        &broker.bootstrap,
        "ks-signal",
        &[
            ("someone-else", json!({"id": "x1", "type": "execute-snapshot", "data": {"data-collections": ["public.items"]}})),
            ("ks", json!({"id": "k1", "type": "execute-snapshot", "data": {"data-collections": ["public.items"], "type": "INCREMENTAL"}})),
        ],
    );
    eventually(Duration::from_secs(60), "the incremental snapshot", || reads(&data).len() as i64 >= ROWS);
    let incremental = reads(&data);
    assert_eq!(incremental.len() as i64, ROWS, "each row read once");
    assert!(incremental.iter().all(|r| r["value"]["source"]["snapshot"] == "incremental"), "{:?}", incremental[0]);
    assert!(w.output().contains("whose key is not this connector's topic.prefix"), "the other connector's signal was not skipped");

    // A blocking snapshot from Kafka: the whole table again, first to last, then streaming on.
    produce(
        &broker.bootstrap,
        "ks-signal",
        &[("ks", json!({"id": "k2", "type": "execute-snapshot", "data": {"data-collections": ["public.items"], "type": "blocking"}}))],
    );
    eventually(Duration::from_secs(60), "the blocking snapshot", || reads(&data).len() as i64 >= 2 * ROWS);
    pg.sql("INSERT INTO items VALUES (1000, 0)");
    let mut records = Vec::new();
    eventually(Duration::from_secs(60), "a change after the blocking snapshot", || {
        records = consume(&data, TOPIC);
        records.iter().any(|r| r["value"]["op"] == "c" && r["key"]["id"] == 1000)
    });
    let blocking: Vec<&Json> = records.iter().filter(|r| r["value"]["op"] == "r").skip(ROWS as usize).collect();
    assert_eq!(blocking.len() as i64, ROWS, "each row read once by the blocking snapshot");
    let markers: Vec<&str> = blocking.iter().map(|r| r["value"]["source"]["snapshot"].as_str().unwrap()).collect();
    assert_eq!((markers[0], markers[markers.len() - 1]), ("first", "last"), "{markers:?}");
    assert!(markers[1..markers.len() - 1].iter().all(|m| *m == "true"), "{markers:?}");
    let ids: std::collections::BTreeSet<i64> = blocking.iter().map(|r| r["key"]["id"].as_i64().unwrap()).collect();
    assert_eq!(ids, (1..=ROWS).collect(), "the blocking snapshot read every row");
    assert_eq!(records.last().unwrap()["key"]["id"], 1000, "the change after the snapshot comes last");
}

/// `read.only=true`: an incremental snapshot asked for on the Kafka channel writes nothing
/// to the database (there is no signal table at all) while a writer inserts, updates and
/// deletes rows; the worker is SIGKILLed in the middle. The snapshot resumes after its
/// durable key and, in the end, the newest event per key reproduces the table.
#[test]
fn a_read_only_incremental_snapshot_writes_nothing_and_converges_through_a_sigkill() {
    use crate::postgres_incremental::{applied, consume, durable_incremental_key, id, op, stored_offset, table_rows, writer};
    const ROWS: i64 = 5_000;
    const TOPIC: &str = "pg.public.items";
    let dir = tempfile::tempdir().unwrap();
    let broker = KafkaBroker::start(&dir.path().join("broker"));
    let pg = Postgres::start();
    pg.sql(&format!(
        "CREATE TABLE items (id bigint PRIMARY KEY, v int NOT NULL, note text);
         INSERT INTO items (id, v, note) SELECT g, 0, 'row ' || g FROM generate_series(1, {ROWS}) g;"
    ));
    let data = dir.path().join("worker/data");
    let mut w = Worker::start(
        &dir.path().join("worker"),
        &[("offset.flush.interval.ms", "200"), ("key.converter.schemas.enable", "false"), ("value.converter.schemas.enable", "false")],
    );
    let config = json!({
        "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
        "database.hostname": "127.0.0.1", "database.port": pg.port.to_string(), "database.user": "postgres",
        "database.password": "", "database.dbname": "postgres", "topic.prefix": "pg",
        "table.include.list": "public.items", "slot.name": "read_only", "snapshot.mode": "no_data",
        "read.only": "true",
        "signal.enabled.channels": "kafka",
        "signal.kafka.bootstrap.servers": broker.bootstrap,
        "incremental.snapshot.chunk.size": "100",
    });
    let (code, body) = w.post("/connectors", &json!({"name": "pg", "config": config}));
    assert_eq!(code, 201, "{body}");
    w.wait_running("pg", 1);
    eventually(Duration::from_secs(30), "the replication slot", || {
        pg.sql("SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'read_only'") == "1"
    });
    let writer = writer(&pg, ROWS);
    produce(
        &broker.bootstrap,
        "pg-signal",
        &[("pg", json!({"id": "ro-1", "type": "execute-snapshot", "data": {"data-collections": ["public.items"]}}))],
    );
    eventually(Duration::from_secs(60), "durable incremental snapshot progress", || durable_incremental_key(&data).unwrap_or(0) >= 1_000);
    w.kill9();
    let durable = durable_incremental_key(&data).expect("the kill landed inside the incremental snapshot");
    assert!(durable < ROWS - 500, "the snapshot was nearly done at the kill ({durable})");
    let before_kill = consume(&data, TOPIC).len();
    w.restart();
    eventually(Duration::from_secs(120), "the incremental snapshot to complete", || {
        stored_offset(&data).is_some_and(|o| o.get("incremental_snapshot_collections").is_none())
            && consume(&data, TOPIC)[before_kill..].iter().any(|r| op(r) == "r")
    });
    let transactions = writer.finish();
    pg.sql("INSERT INTO items (id, v, note) VALUES (-1, 0, 'end marker')");
    let mut records = Vec::new();
    eventually(Duration::from_secs(60), "the end marker", || {
        records = consume(&data, TOPIC);
        records.iter().any(|r| op(r) == "c" && id(r) == -1)
    });
    let expected = table_rows(&pg);
    let got = applied(&records);
    let missing: Vec<_> = expected.keys().filter(|k| !got.contains_key(k)).take(10).collect();
    let extra: Vec<_> = got.keys().filter(|k| !expected.contains_key(k)).take(10).collect();
    let stale: Vec<_> = expected.iter().filter(|(k, v)| got.get(k).is_some_and(|g| g != *v)).take(10).collect();
    assert!(missing.is_empty() && extra.is_empty() && stale.is_empty(), "missing {missing:?}, resurrected {extra:?}, stale {stale:?}");
    let reads: Vec<&Json> = records.iter().filter(|r| op(r) == "r").collect();
    assert!(reads.iter().all(|r| r["value"]["source"]["snapshot"] == "incremental"), "a READ without source.snapshot=incremental");
    let mut per_key: std::collections::BTreeMap<i64, usize> = std::collections::BTreeMap::new();
    for r in &reads {
        *per_key.entry(id(r)).or_default() += 1;
    }
    let again: Vec<_> = per_key.iter().filter(|(k, n)| **k <= durable && **n > 1).take(10).collect();
    assert!(again.is_empty(), "keys durable before the kill (up to {durable}) were read again: {again:?}");
    let changed: std::collections::BTreeSet<i64> = records.iter().filter(|r| op(r) != "r").map(id).collect();
    let untouched: Vec<i64> = expected.keys().copied().filter(|k| *k >= 1 && *k <= ROWS && !changed.contains(k)).collect();
    let unread: Vec<_> = untouched.iter().filter(|k| !per_key.contains_key(k)).take(10).collect();
    assert!(untouched.len() > 500 && unread.is_empty(), "{} untouched rows; not read: {unread:?}", untouched.len());
    eprintln!(
        "read-only incremental snapshot: {} reads, durable key at the kill {durable}, {transactions} writer transactions",
        reads.len()
    );

    // On a database nobody writes to, each window closes as soon as its chunk is read (the
    // server had sent everything before the read).
    let started = std::time::Instant::now();
    let reads_before = reads.len();
    produce(
        &broker.bootstrap,
        "pg-signal",
        &[(
            "pg",
            json!({"id": "ro-2", "type": "execute-snapshot", "data": {"data-collections": ["public.items"],
            "additional-conditions": [{"data-collection": "public.items", "filter": "id <= 300"}]}}),
        )],
    );
    let wanted: usize = pg.sql("SELECT count(*) FROM items WHERE id <= 300").parse().unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    while consume(&data, TOPIC).iter().filter(|r| op(r) == "r").count() < reads_before + wanted {
        if std::time::Instant::now() > deadline {
            let log = sluice_tests::strip_ansi(&w.output());
            let tail: Vec<&str> = log.lines().rev().take(40).collect();
            panic!(
                "the snapshot of an idle database did not end in 120 s; the worker's last lines:\n{}",
                tail.into_iter().rev().collect::<Vec<_>>().join("\n")
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let records = consume(&data, TOPIC);
    let idle: Vec<i64> = records.iter().filter(|r| op(r) == "r").skip(reads_before).map(id).collect();
    assert_eq!(idle.len(), wanted, "each row read once");
    assert!(idle.iter().all(|k| *k <= 300), "additional-conditions limit the rows read");
    eprintln!("read-only snapshot of {wanted} rows in 3 windows on an idle database: {:?}", started.elapsed());
}
