//! Network faults between sluice and Postgres, through the project's own fault proxy
//! (`tests/src/fault_proxy.rs`): every connection of the source (catalog, snapshot and
//! replication sessions) goes through it while a writer changes the table, and the proxy
//! cuts them all, again and again, then stalls them past the status interval. In the end
//! the newest event per key reproduces the table (nothing lost, nothing stale), the task is
//! RUNNING, and the failures were visible in the log meanwhile.

use std::collections::BTreeMap;
use std::time::Duration;

use sluice_tests::{json, Fault, FaultProxy, Json, Postgres, SqlWriter, Worker};

const TOPIC: &str = "flt.public.items";

fn consume(data: &std::path::Path) -> Vec<Json> {
    let (code, out, _) = Worker::cli(&["topics", "consume", TOPIC, "--data-dir", data.to_str().unwrap(), "--from-beginning"]);
    if code != 0 {
        return Vec::new();
    }
    out.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

/// The newest event per key: `id -> v` (a delete removes the key).
fn applied(records: &[Json]) -> BTreeMap<i64, i64> {
    let mut state = BTreeMap::new();
    for r in records {
        let Some(id) = r["key"]["id"].as_i64() else { continue };
        match r["value"]["op"].as_str() {
            Some("r" | "c" | "u") => {
                state.insert(id, r["value"]["after"]["v"].as_i64().unwrap());
            }
            Some("d") => {
                state.remove(&id);
            }
            _ => {}
        }
    }
    state
}

#[test]
fn a_postgres_source_loses_nothing_while_its_connections_are_cut_and_stalled() {
    const ROWS: i64 = 2_000;
    let pg = Postgres::start();
    pg.sql(&format!(
        "CREATE TABLE items (id bigint PRIMARY KEY, v int NOT NULL); INSERT INTO items SELECT g, 0 FROM generate_series(1, {ROWS}) g;"
    ));
    let proxy = FaultProxy::start(([127, 0, 0, 1], pg.port).into());
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let w = Worker::start(
        dir.path(),
        &[
            ("offset.flush.interval.ms", "200"),
            ("key.converter.schemas.enable", "false"),
            ("value.converter.schemas.enable", "false"),
            ("restart.policy", "on-failure"),
        ],
    );
    let config = json!({
        "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
        "database.hostname": "127.0.0.1", "database.port": proxy.port.to_string(), "database.user": "postgres",
        "database.password": "", "database.dbname": "postgres", "topic.prefix": "flt",
        "table.include.list": "public.items", "slot.name": "faults", "snapshot.mode": "initial",
        "status.update.interval.ms": "1000",
    });
    let (code, body) = w.post("/connectors", &json!({"name": "flt", "config": config}));
    assert_eq!(code, 201, "{body}");
    w.wait_running("flt", 1);
    w.eventually(Duration::from_secs(60), "the snapshot", || {
        consume(&data).iter().filter(|r| r["value"]["op"] == "r").count() as i64 >= ROWS
    });

    // Inserts above the snapshot and updates across it, written straight to Postgres.
    let writer = SqlWriter::start(&pg, Duration::from_millis(5), move |i| {
        format!("BEGIN; INSERT INTO items VALUES ({}, 1); UPDATE items SET v = v + 1 WHERE id = {}; COMMIT;\n", 10_000 + i, 1 + i % ROWS)
    });
    let accepted_before = proxy.accepted();
    for round in 0..8 {
        std::thread::sleep(Duration::from_secs(2));
        if round == 4 {
            // Held, not cut: nothing moves for 5 s, past the status interval.
            proxy.set(Fault::Stall);
            std::thread::sleep(Duration::from_secs(5));
            proxy.set(Fault::Pass);
        } else {
            proxy.reset_all();
        }
    }
    std::thread::sleep(Duration::from_secs(2));
    let transactions = writer.finish();
    pg.sql("INSERT INTO items VALUES (-1, 0)");
    let mut records = Vec::new();
    w.eventually(Duration::from_secs(120), "the end marker after the faults", || {
        records = consume(&data);
        records.iter().any(|r| r["key"]["id"] == -1)
    });

    let expected: BTreeMap<i64, i64> = pg
        .sql("SELECT id || '|' || v FROM items ORDER BY id")
        .lines()
        .map(|l| {
            let (id, v) = l.split_once('|').unwrap();
            (id.parse().unwrap(), v.parse().unwrap())
        })
        .collect();
    let got = applied(&records);
    let missing: Vec<_> = expected.keys().filter(|k| !got.contains_key(k)).take(10).collect();
    let stale: Vec<_> = expected.iter().filter(|(k, v)| got.get(k).is_some_and(|g| g != *v)).take(10).collect();
    let extra: Vec<_> = got.keys().filter(|k| !expected.contains_key(k)).take(10).collect();
    assert!(missing.is_empty() && stale.is_empty() && extra.is_empty(), "missing {missing:?}, stale {stale:?}, extra {extra:?}");
    let reconnects = proxy.accepted() - accepted_before;
    assert!(reconnects >= 7, "the source reconnected after each cut ({reconnects} new connections)");
    let (code, status) = w.get("/connectors/flt/status");
    assert_eq!((code, &status["tasks"][0]["state"]), (200, &json!("RUNNING")), "{status}");
    let log = sluice_tests::strip_ansi(&w.output());
    assert!(log.contains("replication stream failed"), "no cut was seen by the replication stream");
    eprintln!(
        "faults: 7 cuts and a 5 s stall; {transactions} writer transactions, {} records, {reconnects} new connections",
        records.len()
    );
}
