//! Debezium features of the Postgres source through the real binary, against a real
//! PostgreSQL 15 (`tests/services/postgres.sh`): custom message keys, column masking and
//! truncation, the heartbeat action query and transaction metadata. Each test creates the
//! connector over REST and reads the topics back from the worker's log.

use std::path::PathBuf;
use std::time::Duration;

use sluice_tests::{eventually, json, Json, Worker};

use crate::postgres::Pg;

/// The records of `topic` so far; none while the topic does not exist yet.
fn consume(data: &std::path::Path, topic: &str) -> Vec<Json> {
    let (code, out, _) = Worker::cli(&["topics", "consume", topic, "--data-dir", data.to_str().unwrap(), "--from-beginning"]);
    if code != 0 {
        return Vec::new();
    }
    out.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

/// A worker with JSON converters (schemas on, so schema names and parameters can be
/// checked) and one Postgres connector named `pg` with topic prefix `pg`.
struct Setup {
    _dir: tempfile::TempDir,
    data: PathBuf,
    worker: Worker,
}

fn start(pg: &Pg, slot: &str, extra: &[(&str, &str)]) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let worker = Worker::start(dir.path(), &[("offset.flush.interval.ms", "200")]);
    let mut config = json!({
        "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
        "database.hostname": "127.0.0.1",
        "database.port": pg.port.to_string(),
        "database.user": "postgres",
        "database.password": "",
        "database.dbname": "postgres",
        "topic.prefix": "pg",
        "slot.name": slot,
        "status.update.interval.ms": "500",
        "key.converter": "org.apache.kafka.connect.json.JsonConverter",
        "key.converter.schemas.enable": "true",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter.schemas.enable": "true",
    });
    for (k, v) in extra {
        config[*k] = json!(v);
    }
    let (code, body) = worker.post("/connectors", &json!({"name": "pg", "config": config}));
    assert_eq!(code, 201, "{body}");
    worker.wait_running("pg", 1);
    Setup { _dir: dir, data, worker }
}

impl Setup {
    /// The records of `topic` once `done` accepts them (tombstones included).
    fn wait_records(&self, topic: &str, what: &str, done: impl Fn(&[Json]) -> bool) -> Vec<Json> {
        let mut last = Vec::new();
        eventually(Duration::from_secs(60), what, || {
            last = consume(&self.data, topic);
            done(&last)
        });
        last
    }
}

fn payload(r: &Json, side: &str) -> Json {
    r[side]["payload"].clone()
}

fn op(r: &Json) -> &str {
    r["value"]["payload"]["op"].as_str().unwrap_or("tombstone")
}

#[test]
fn postgres_message_key_columns_key_snapshot_and_stream_events() {
    let pg = Pg::start();
    pg.sql(
        "CREATE TABLE orders (id int PRIMARY KEY, customer int NOT NULL, region text);
         ALTER TABLE orders REPLICA IDENTITY FULL;
         CREATE TABLE items (id int PRIMARY KEY, name text);
         INSERT INTO orders VALUES (1, 10, 'eu'), (2, 20, NULL);
         INSERT INTO items VALUES (7, 'x');",
    );
    let s = start(
        &pg,
        "sluice_keys",
        &[("message.key.columns", "public.orders:customer,region"), ("table.include.list", "public.orders,public.items")],
    );
    s.wait_records("pg.public.orders", "the snapshot", |r| r.len() >= 2);
    pg.sql("INSERT INTO orders VALUES (3, 30, 'us'); UPDATE orders SET region = 'apac' WHERE id = 1; DELETE FROM orders WHERE id = 2;");
    let records =
        s.wait_records("pg.public.orders", "the streamed changes", |r| r.iter().filter(|r| op(r) == "d").count() == 2 && r.len() >= 7);

    for r in &records {
        let key = &r["key"];
        assert_eq!(key["schema"]["name"], "pg.public.orders.Key", "{r}");
        let fields: Vec<_> =
            key["schema"]["fields"].as_array().unwrap().iter().map(|f| (f["field"].clone(), f["optional"].clone())).collect();
        assert_eq!(fields, [(json!("customer"), json!(false)), (json!("region"), json!(true))], "{r}");
    }
    let keyed: Vec<(String, Json)> = records.iter().map(|r| (op(r).to_owned(), payload(r, "key"))).collect();
    let expected = [
        ("r", json!({"customer": 10, "region": "eu"})),
        ("r", json!({"customer": 20, "region": null})),
        ("c", json!({"customer": 30, "region": "us"})),
        // A change of a key column is a delete of the old key and a create of the new one.
        ("d", json!({"customer": 10, "region": "eu"})),
        ("tombstone", json!({"customer": 10, "region": "eu"})),
        ("c", json!({"customer": 10, "region": "apac"})),
        ("d", json!({"customer": 20, "region": null})),
        ("tombstone", json!({"customer": 20, "region": null})),
    ];
    let expected: Vec<(String, Json)> = expected.iter().map(|(o, k)| ((*o).to_owned(), k.clone())).collect();
    assert_eq!(keyed, expected);

    // A table the rule does not name keeps its primary key.
    let items = s.wait_records("pg.public.items", "the items snapshot", |r| !r.is_empty());
    assert_eq!(payload(&items[0], "key"), json!({"id": 7}));
    assert_eq!(items[0]["key"]["schema"]["name"], "pg.public.items.Key");
}
