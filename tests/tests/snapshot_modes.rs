//! Debezium's `snapshot.mode` values `always` and `when_needed` through the real binary and a
//! real PostgreSQL, across worker restarts:
//! - `always`: a snapshot at every start, streaming in between and after;
//! - `when_needed`: a snapshot when there is no offset, none when the slot still holds the
//!   stored position, and a new one (instead of a failure) when the slot is gone.

use std::path::Path;
use std::time::Duration;

use sluice_tests::{eventually, json, Postgres, Worker};

const TOPIC: &str = "srv.public.items";

fn start_worker(dir: &Path) -> Worker {
    Worker::start(
        dir,
        &[("offset.flush.interval.ms", "200"), ("key.converter.schemas.enable", "false"), ("value.converter.schemas.enable", "false")],
    )
}

/// (op, id) of every change record in the topic, in order (tombstones left out).
fn changes(w: &Worker) -> Vec<(String, i64)> {
    sluice_tests::consume_topic(&w.dir.join("data"), TOPIC)
        .into_iter()
        .filter(|r| !r["value"].is_null())
        .map(|r| {
            let v = &r["value"];
            let op = v["op"].as_str().unwrap().to_owned();
            let row = if op == "d" { &v["before"] } else { &v["after"] };
            (op, row["id"].as_i64().unwrap())
        })
        .collect()
}

fn count(changes: &[(String, i64)], op: &str, id: i64) -> usize {
    changes.iter().filter(|(o, i)| o == op && *i == id).count()
}

fn setup(pg: &Postgres) {
    pg.sql("CREATE TABLE items (id int PRIMARY KEY, v int NOT NULL DEFAULT 0, note text)");
    pg.sql("INSERT INTO items (id) SELECT generate_series(1, 3)");
}

fn create(w: &Worker, pg: &Postgres, slot: &str, mode: &str) {
    let config = pg.source_config(slot, &[("snapshot.mode", mode)]);
    let (code, body) = w.post("/connectors", &json!({"name": "pg", "config": config}));
    assert_eq!(code, 201, "{body}");
    w.wait_running("pg", 1);
}

#[test]
fn snapshot_mode_always_snapshots_at_every_start_and_streams_in_between() {
    let pg = Postgres::start();
    setup(&pg);
    let dir = tempfile::tempdir().unwrap();
    let mut w = start_worker(dir.path());
    create(&w, &pg, "always_slot", "always");
    eventually(Duration::from_secs(60), "the first snapshot", || (1..=3).all(|id| count(&changes(&w), "r", id) == 1));
    pg.sql("INSERT INTO items (id) VALUES (4)");
    eventually(Duration::from_secs(30), "the insert streamed", || count(&changes(&w), "c", 4) == 1);

    // Every start snapshots again, then streams.
    for start in 2usize..=3 {
        assert!(w.terminate().success());
        w.restart();
        w.wait_running("pg", 1);
        eventually(Duration::from_secs(60), "another snapshot", || (1..=4).all(|id| count(&changes(&w), "r", id) >= start - 1));
        let id = 3 + start as i64;
        pg.sql(&format!("INSERT INTO items (id) VALUES ({id})"));
        eventually(Duration::from_secs(30), "the insert after the snapshot streamed", || count(&changes(&w), "c", id) == 1);
    }
    let all = changes(&w);
    assert_eq!(count(&all, "r", 1), 3, "three starts, three snapshots: {all:?}");
    assert_eq!(count(&all, "r", 5), 1, "id 5 was in the third snapshot only: {all:?}");
}

#[test]
fn snapshot_mode_when_needed_snapshots_only_without_a_usable_position() {
    let pg = Postgres::start();
    setup(&pg);
    let dir = tempfile::tempdir().unwrap();
    let mut w = start_worker(dir.path());
    create(&w, &pg, "needed_slot", "when_needed");
    eventually(Duration::from_secs(60), "the snapshot (no offsets yet)", || (1..=3).all(|id| count(&changes(&w), "r", id) == 1));

    // Restarted with the slot in place: it streams on, no snapshot.
    assert!(w.terminate().success());
    pg.sql("INSERT INTO items (id) VALUES (4)");
    w.restart();
    w.wait_running("pg", 1);
    eventually(Duration::from_secs(30), "the change made while it was stopped", || count(&changes(&w), "c", 4) == 1);
    assert_eq!(changes(&w).iter().filter(|(op, _)| op == "r").count(), 3, "no second snapshot while the slot holds the position");

    // The slot is gone: the stored position cannot be served, so it snapshots again instead of
    // failing (as snapshot.mode=initial does), and streams after it.
    assert!(w.terminate().success());
    pg.sql("SELECT pg_drop_replication_slot('needed_slot')");
    pg.sql("INSERT INTO items (id) VALUES (5)");
    w.restart();
    w.wait_running("pg", 1);
    eventually(Duration::from_secs(60), "a new snapshot with the rows the lost slot never sent", || {
        let all = changes(&w);
        (1..=5).all(|id| count(&all, "r", id) >= 1) && count(&all, "r", 1) == 2
    });
    pg.sql("INSERT INTO items (id) VALUES (6)");
    eventually(Duration::from_secs(30), "streaming after the new snapshot", || count(&changes(&w), "c", 6) == 1);
    let (_, status) = w.get("/connectors/pg/status");
    assert_eq!(status["tasks"][0]["state"], "RUNNING", "{status}");
}
