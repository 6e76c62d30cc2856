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
