//! Replication-slot safety through the real binary, against a real PostgreSQL 15 whose
//! `max_slot_wal_keep_size` is 1 MB: a slot behind its warning threshold is reported, and a
//! slot that lost the WAL it needed fails the task for good, loudly, with the recovery, and
//! is never restarted into a silent gap.

use std::time::Duration;

use sluice_tests::{eventually, json, Postgres as Pg, Worker};

#[test]
fn a_slot_that_lost_its_wal_fails_for_good_with_the_recovery() {
    let pg = Pg::start();
    pg.sql("ALTER SYSTEM SET max_slot_wal_keep_size = '1MB'");
    pg.sql("SELECT pg_reload_conf()");
    pg.sql("CREATE TABLE items (id int PRIMARY KEY, v text)");
    pg.sql("CREATE TABLE filler (x text)");
    let dir = tempfile::tempdir().unwrap();
    let w = Worker::start(dir.path(), &[("restart.policy", "on-failure"), ("offset.flush.interval.ms", "200")]);
    let config = pg.source_config(
        "sluice_guarded",
        &[
            ("sluice.slot.check.interval.ms", "300"),
            // Any retained WAL is past one byte: the warning shows at the first check.
            ("sluice.slot.lag.warn.bytes", "1"),
            ("sluice.restart.min.backoff.ms", "200"),
        ],
    );
    let (code, body) = w.post("/connectors", &json!({"name": "pg", "config": config}));
    assert_eq!(code, 201, "{body}");
    w.wait_running("pg", 1);
    eventually(Duration::from_secs(30), "the slot", || {
        pg.sql("SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'sluice_guarded'") == "1"
    });
    pg.sql("INSERT INTO items VALUES (1, 'a')");
    eventually(Duration::from_secs(30), "a committed offset", || {
        w.get("/connectors/pg/offsets").1["offsets"].as_array().is_some_and(|o| !o.is_empty())
    });
    eventually(Duration::from_secs(30), "the retention warning", || w.output().contains("past sluice.slot.lag.warn.bytes=1"));

    // Stopped, the slot falls behind while the WAL grows past the 1 MB the server keeps for
    // it; checkpoints remove what it needed.
    w.stop_connector("pg");
    eventually(Duration::from_secs(120), "the slot to lose its WAL", || {
        pg.sql("INSERT INTO filler SELECT repeat(md5(g::text), 32) FROM generate_series(1, 20000) g");
        pg.sql("SELECT pg_switch_wal()");
        pg.sql("CHECKPOINT");
        pg.sql("SELECT wal_status FROM pg_replication_slots WHERE slot_name = 'sluice_guarded'") == "lost"
    });

    assert_eq!(w.put("/connectors/pg/resume", &json!({})).0, 202);
    let status = w.wait_for("/connectors/pg/status", Duration::from_secs(60), |_, b| b["tasks"][0]["state"] == "FAILED");
    let trace = status["tasks"][0]["trace"].as_str().unwrap();
    assert!(trace.contains("lost WAL it needed") && trace.contains("pg_drop_replication_slot('sluice_guarded')"), "{trace}");
    // It stays FAILED: no automatic restart can bring the changes back.
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(w.get("/connectors/pg/status").1["tasks"][0]["state"], "FAILED");
    let restarts = w.get("/connectors/pg/restarts").1;
    assert_eq!((&restarts["tasks"][0]["last_error_class"], &restarts["tasks"][0]["total"]), (&json!("fatal"), &json!(0)), "{restarts}");

    // The recovery the trace names works: a new slot and a new snapshot.
    w.stop_connector("pg");
    pg.sql("SELECT pg_drop_replication_slot('sluice_guarded')");
    assert_eq!(w.delete("/connectors/pg/offsets").0, 200);
    assert_eq!(w.put("/connectors/pg/resume", &json!({})).0, 202);
    w.wait_running("pg", 1);
    eventually(Duration::from_secs(30), "a new slot", || {
        pg.sql("SELECT wal_status FROM pg_replication_slots WHERE slot_name = 'sluice_guarded'") == "reserved"
    });
}

#[test]
fn slot_guard_keys_are_validated_by_name() {
    let pg = Pg::start();
    let dir = tempfile::tempdir().unwrap();
    let w = Worker::start(dir.path(), &[]);
    let config = pg.source_config("sluice_keys", &[("sluice.slot.lag.action", "resnap")]);
    let (code, body) = w.post("/connectors", &json!({"name": "pg", "config": config}));
    assert_eq!(code, 400, "{body}");
    assert!(body["message"].as_str().unwrap().contains("sluice.slot.lag.action"), "{body}");
    let config = pg.source_config("sluice_keys", &[("sluice.slot.check.interval.ms", "5")]);
    let (code, body) = w.post("/connectors", &json!({"name": "pg", "config": config}));
    assert_eq!(code, 400, "{body}");
    assert!(body["message"].as_str().unwrap().contains("sluice.slot.check.interval.ms"), "{body}");
}

/// `sluice.slot.lag.action=drop-and-resnapshot`, asked for: a slot past its pause threshold
/// is dropped, a new one made and the tables snapshotted again, so the database's disk is
/// freed and every row reaches its current state downstream; streaming goes on from the new
/// slot. The changes the old slot held are not sent as events (the documented price).
#[test]
fn drop_and_resnapshot_frees_the_wal_and_snapshots_again() {
    let pg = Pg::start();
    pg.sql("CREATE TABLE items (id int PRIMARY KEY, v text)");
    pg.sql("CREATE TABLE filler (x text)");
    pg.sql("INSERT INTO items SELECT g, 'v1' FROM generate_series(1, 10) g");
    let dir = tempfile::tempdir().unwrap();
    let w = Worker::start(dir.path(), &[("offset.flush.interval.ms", "200")]);
    let config = pg.source_config(
        "sluice_resnap",
        &[
            ("sluice.slot.check.interval.ms", "300"),
            ("sluice.slot.lag.pause.bytes", "4000000"),
            ("sluice.slot.lag.action", "drop-and-resnapshot"),
        ],
    );
    let (code, body) = w.post("/connectors", &json!({"name": "pg", "config": config}));
    assert_eq!(code, 201, "{body}");
    w.wait_running("pg", 1);
    let data = dir.path().join("data");
    let rows = |op: &str| -> Vec<i64> {
        let mut ids: Vec<i64> = sluice_tests::consume_topic(&data, "srv.public.items")
            .iter()
            .filter(|r| r["value"]["payload"]["op"] == op)
            .filter_map(|r| r["value"]["payload"]["after"]["id"].as_i64())
            .collect();
        ids.sort_unstable();
        ids
    };
    eventually(Duration::from_secs(30), "the first snapshot", || rows("r") == (1..=10).collect::<Vec<_>>());
    eventually(Duration::from_secs(30), "a committed offset", || {
        w.get("/connectors/pg/offsets").1["offsets"].as_array().is_some_and(|o| !o.is_empty())
    });

    // Stopped, the slot falls more than 4 MB behind while rows change.
    w.stop_connector("pg");
    pg.sql("INSERT INTO items SELECT g, 'v2' FROM generate_series(11, 20) g");
    pg.sql("UPDATE items SET v = 'v2' WHERE id = 2");
    pg.sql("INSERT INTO filler SELECT repeat(md5(g::text), 32) FROM generate_series(1, 8000) g");
    let retained: i64 = pg
        .sql("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn)::bigint FROM pg_replication_slots WHERE slot_name = 'sluice_resnap'")
        .parse()
        .unwrap();
    assert!(retained > 4_000_000, "the slot holds {retained} bytes");

    assert_eq!(w.put("/connectors/pg/resume", &json!({})).0, 202);
    eventually(Duration::from_secs(60), "a second snapshot of every row", || rows("r").len() >= 10 + 20);
    let second = rows("r");
    assert_eq!(second.iter().filter(|id| (11..=20).contains(*id)).count(), 10, "rows 11..20 come in the new snapshot: {second:?}");
    assert!(w.output().contains("drop-and-resnapshot"), "the drop is logged loudly");
    let retained: i64 = pg
        .sql("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn)::bigint FROM pg_replication_slots WHERE slot_name = 'sluice_resnap'")
        .parse()
        .unwrap();
    assert!(retained < 4_000_000, "the new slot holds {retained} bytes");
    let (_, _, text) = w.get_text("/metrics");
    assert!(text.contains("sluice_postgres_slot_resnapshots_total{connector=\"pg\",task=\"0\",slot=\"sluice_resnap\"} 1"), "{text}");

    // Streaming goes on from the new slot.
    w.wait_running("pg", 1);
    pg.sql("INSERT INTO items VALUES (21, 'v3')");
    eventually(Duration::from_secs(30), "a change after the resnapshot", || rows("c").contains(&21));
    assert!(!rows("c").contains(&11), "the changes the old slot held are not sent as events");
}
