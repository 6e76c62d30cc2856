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
    use crate::postgres_incremental::{consume, id, kill_mid_snapshot_and_converge, op, writer};
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
    let end = kill_mid_snapshot_and_converge(&mut w, &pg, &data, writer, ROWS);
    eprintln!(
        "read-only incremental snapshot: {} reads, durable key at the kill {}, {} writer transactions",
        end.reads, end.durable, end.transactions
    );

    // On a database nobody writes to, each window closes as soon as its chunk is read (the
    // server had sent everything before the read).
    let started = std::time::Instant::now();
    let reads_before = end.reads;
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
