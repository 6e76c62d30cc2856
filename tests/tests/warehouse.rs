//! Postgres source → embedded log → JDBC sink into a second database of the same cluster,
//! through the real binary. A mixed workload (inserts, updates of TOASTed and of other
//! columns under REPLICA IDENTITY DEFAULT with NOT NULL non-key columns, deletes, a truncate,
//! an added column) must leave the warehouse table equal to the source table row for row,
//! also while the worker is SIGKILLed mid-stream; a per-row update counter kept by a
//! trigger in the target shows no change was applied twice.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use sluice_tests::{json, Postgres, Psql, Worker};

const BIG: &str = "(SELECT string_agg(md5(random()::text), '') FROM generate_series(1, 200))";
const COMPARE: &str = "SELECT id, name, md5(big), n, updates, extra FROM items ORDER BY id";

/// One step of the workload; `i` drives which.
fn workload_step(pg: &Psql, i: u32, next_id: &mut u32) {
    let id = |k: u32| 1 + (i * 7 + k * 13) % *next_id;
    let mut s = String::from("BEGIN;");
    // Updates that leave the TOASTed column alone (it arrives as the placeholder).
    s += &format!("UPDATE items SET n = n + 1, updates = updates + 1, name = 'n{i}' WHERE id IN ({}, {});", id(1), id(2));
    if i.is_multiple_of(3) {
        s += &format!("UPDATE items SET big = {BIG}, updates = updates + 1 WHERE id = {};", id(3));
    }
    if i.is_multiple_of(4) {
        s += &format!("DELETE FROM items WHERE id = {};", id(4));
    }
    for _ in 0..3 {
        *next_id += 1;
        s += &format!("INSERT INTO items (id, name, big, n) VALUES ({}, 'new', {BIG}, 0);", *next_id);
    }
    s += "COMMIT;";
    pg.sql("postgres", &s);
}

/// SIGKILLs the worker while the workload runs (`done` unset), at most `max` times, after
/// `pause_ms(kills so far)` each; restarts it and waits for both connectors each time.
/// Returns how many kills happened.
fn kill_while(w: &mut Worker, done: &AtomicBool, max: u64, pause_ms: impl Fn(u64) -> u64) -> u64 {
    let mut kills = 0;
    while !done.load(Ordering::SeqCst) && kills < max {
        std::thread::sleep(Duration::from_millis(pause_ms(kills)));
        w.kill9();
        kills += 1;
        w.restart();
        w.wait_running("src", 1);
        w.wait_running("wh", 1);
    }
    kills
}

fn wait_equal(pg: &Postgres, w: &Worker, timeout: Duration) {
    let deadline = Instant::now() + timeout;
    loop {
        let (src, dst) = (pg.sql(COMPARE), pg.psql().sql("wh", COMPARE));
        if src == dst {
            return;
        }
        if Instant::now() > deadline {
            let diff: Vec<_> = src.lines().zip(dst.lines()).filter(|(a, b)| a != b).take(5).collect();
            panic!(
                "target differs from source ({} vs {} rows); first differences {diff:?}\nwarnings:\n{}",
                src.lines().count(),
                dst.lines().count(),
                w.output().lines().filter(|l| l.contains("WARN") || l.contains("ERROR")).take(20).collect::<Vec<_>>().join("\n")
            );
        }
        std::thread::sleep(Duration::from_millis(300));
    }
}

#[test]
fn warehouse_mirrors_the_source_through_crashes() {
    let pg = Postgres::start();
    pg.sql("CREATE DATABASE wh");
    pg.sql(
        &format!(
            "CREATE TABLE items (id int PRIMARY KEY, name text NOT NULL, big text NOT NULL, n int NOT NULL DEFAULT 0, updates int NOT NULL DEFAULT 0);
             INSERT INTO items (id, name, big, n) SELECT g, 'seed', {BIG}, 0 FROM generate_series(1, 100) g;"
        ),
    );
    // The warehouse table exists beforehand only to carry the counting triggers.
    pg.psql().sql(
        "wh",
        "CREATE TABLE items (id int PRIMARY KEY, name text, big text, n int, updates int);
         CREATE TABLE applied (id int PRIMARY KEY, updates int NOT NULL);
         CREATE FUNCTION on_insert() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
           INSERT INTO applied VALUES (NEW.id, 0) ON CONFLICT (id) DO UPDATE SET updates = 0; RETURN NULL; END $$;
         CREATE FUNCTION on_update() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
           UPDATE applied SET updates = updates + 1 WHERE id = NEW.id; RETURN NULL; END $$;
         CREATE TRIGGER counted_insert AFTER INSERT ON items FOR EACH ROW EXECUTE FUNCTION on_insert();
         CREATE TRIGGER counted_update AFTER UPDATE ON items FOR EACH ROW EXECUTE FUNCTION on_update();",
    );

    let dir = tempfile::tempdir().unwrap();
    let mut w = Worker::start(dir.path(), &[("offset.flush.interval.ms", "300")]);
    let (code, body) = w.post(
        "/connectors",
        &json!({"name": "src", "config": pg.source_config("wh_slot", &[("skipped.operations", "none"), ("status.update.interval.ms", "500")])}),
    );
    assert_eq!(code, 201, "{body}");
    let (code, body) = w.post(
        "/connectors",
        &json!({"name": "wh", "config": pg.sink_config("wh", "", &[("truncate.enabled", "true"), ("schema.evolution", "basic"), ("batch.size", "200")])}),
    );
    assert_eq!(code, 201, "{body}");
    w.wait_running("src", 1);
    w.wait_running("wh", 1);

    // Phase 1, no crashes: mixed workload with a truncate and an added column.
    let mut next_id = 100;
    for i in 0..40 {
        if i == 15 {
            pg.sql("TRUNCATE items");
        }
        if i == 25 {
            pg.sql("ALTER TABLE items ADD COLUMN extra text");
        }
        workload_step(&pg.psql(), i, &mut next_id);
        if i >= 25 {
            pg.sql(&format!("UPDATE items SET extra = 'e{i}', updates = updates + 1 WHERE id % 5 = {}", i % 5));
        }
    }
    pg.psql().sql("wh", "ALTER TABLE items ADD COLUMN IF NOT EXISTS extra text"); // no-op when the sink added it
    wait_equal(&pg, &w, Duration::from_secs(90));
    // Without crashes the log holds each change once: per row the target saw at most as
    // many UPDATEs as the source made since the row was inserted (changes to one key in one
    // batch collapse into one).
    let over = pg.psql().sql("wh", "SELECT a.id, a.updates FROM applied a JOIN items i USING (id) WHERE a.updates > i.updates");
    assert!(over.trim().is_empty(), "rows updated more often in the target than in the source:\n{over}");

    // Phase 2: the same workload while the worker is SIGKILLed again and again.
    let done = Arc::new(AtomicBool::new(false));
    let writer = {
        let done = done.clone();
        let pg = pg.psql();
        std::thread::spawn(move || {
            let mut next_id = next_id;
            for i in 40..240 {
                workload_step(&pg, i, &mut next_id);
                pg.sql("postgres", &format!("UPDATE items SET extra = 'e{i}', updates = updates + 1 WHERE id % 7 = {}", i % 7));
                std::thread::sleep(Duration::from_millis(15));
            }
            done.store(true, Ordering::SeqCst);
        })
    };
    let kills = kill_while(&mut w, &done, 6, |k| 700 + (k * 337) % 900);
    writer.join().unwrap();
    assert!(kills >= 3, "only {kills} kills happened during the workload");
    wait_equal(&pg, &w, Duration::from_secs(120));

    // After crashes the source is at least once (each crash may append the changes after
    // its last confirmed position to the log again), and the sink applies each log record
    // at most once: per row, the UPDATEs the target saw are at most the row's change events
    // in the log minus the one that inserted it. A batch applied twice breaks that.
    let data = w.dir.join("data");
    let (code, out, err) =
        Worker::cli(&["topics", "consume", "srv.public.items", "--data-dir", data.to_str().unwrap(), "--from-beginning"]);
    assert_eq!(code, 0, "{err}");
    let mut events: std::collections::HashMap<i64, i64> = std::collections::HashMap::new();
    for line in out.lines() {
        let record: serde_json::Value = serde_json::from_str(line).unwrap();
        let key = match &record["key"] {
            serde_json::Value::String(text) => serde_json::from_str(text).unwrap(),
            other => other.clone(),
        };
        if let Some(id) = key["payload"]["id"].as_i64() {
            *events.entry(id).or_default() += 1;
        }
    }
    let applied = pg.psql().sql("wh", "SELECT a.id, a.updates FROM applied a JOIN items i USING (id)");
    let mut checked = 0;
    for row in applied.lines() {
        let (id, updates) = row.split_once('|').unwrap();
        let (id, updates): (i64, i64) = (id.parse().unwrap(), updates.parse().unwrap());
        let logged = events.get(&id).copied().unwrap_or(0);
        assert!(updates < logged.max(1), "row {id} was updated {updates} times in the target but has {logged} events in the log");
        checked += 1;
    }
    assert!(checked > 100, "only {checked} rows checked");
    assert!(
        pg.psql()
            .sql("wh", "SELECT count(*) FROM items WHERE big = '__debezium_unavailable_value' OR name = '__debezium_unavailable_value'")
            .trim()
            == "0"
    );
}

/// A change the warehouse rejects (a CHECK constraint the source does not have) is
/// dead-lettered with Connect's context headers while every other change is applied, and
/// the sink's progress moves past it (`errors.tolerance=all`).
#[test]
fn a_change_the_target_rejects_is_dead_lettered_and_the_rest_applied() {
    let pg = Postgres::start();
    pg.sql("CREATE DATABASE wh");
    pg.sql("CREATE TABLE items (id int PRIMARY KEY, name text NOT NULL, n int NOT NULL); INSERT INTO items VALUES (0, 'seed', 0)");
    pg.psql().sql("wh", "CREATE TABLE items (id int PRIMARY KEY, name text, n int CHECK (n >= 0))");
    let dir = tempfile::tempdir().unwrap();
    let w = Worker::start(dir.path(), &[("offset.flush.interval.ms", "300")]);
    let (code, body) = w.post("/connectors", &json!({"name": "src", "config": pg.source_config("dlq_slot", &[])}));
    assert_eq!(code, 201, "{body}");
    let (code, body) = w.post(
        "/connectors",
        &json!({"name": "wh", "config": pg.sink_config("wh", "", &[
            ("batch.size", "100"), ("errors.tolerance", "all"), ("errors.log.enable", "true"),
            ("errors.deadletterqueue.topic.name", "wh-dlq"), ("errors.deadletterqueue.context.headers.enable", "true"),
        ])}),
    );
    assert_eq!(code, 201, "{body}");
    w.wait_running("src", 1);
    w.wait_running("wh", 1);
    // The snapshot (the seed row) is through: what follows streams, in order.
    sluice_tests::eventually(Duration::from_secs(60), "the snapshot in the target", || {
        pg.psql().sql("wh", "SELECT count(*) FROM items WHERE id = 0").trim() == "1"
    });
    // 200 rows in one transaction, rows 50 and 150 with a negative n; then row 7 updated to
    // a negative n (rejected: the target keeps its old value) and row 8 deleted.
    pg.sql("INSERT INTO items SELECT g, 'r' || g, CASE WHEN g IN (50, 150) THEN -1 ELSE g END FROM generate_series(1, 200) g");
    pg.sql(
        "UPDATE items SET n = -7, name = 'neg' WHERE id = 7; DELETE FROM items WHERE id = 8; UPDATE items SET name = 'last' WHERE id = 9",
    );
    let expected = "SELECT string_agg(id || ':' || name || ':' || n, ',' ORDER BY id) FROM items WHERE n >= 0 AND id <> 7";
    // id 7 keeps its pre-update row in the target.
    let mut want_rows: Vec<String> = pg.sql(expected).trim().split(',').map(str::to_owned).collect();
    want_rows.push("7:r7:7".to_owned());
    want_rows.sort_by_key(|r| r.split(':').next().unwrap().parse::<i32>().unwrap());
    let got = || {
        let out = pg.psql().sql("wh", "SELECT coalesce(string_agg(id || ':' || name || ':' || n, ',' ORDER BY id), '') FROM items");
        out.trim().split(',').map(str::to_owned).collect::<Vec<_>>()
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    while got() != want_rows {
        if Instant::now() > deadline {
            let (_, status) = w.get("/connectors/wh/status");
            panic!("the target never held every accepted change:\nwant {want_rows:?}\ngot  {:?}\nstatus {status}\n{}", got(), w.output());
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let status = w.wait_running("wh", 1);
    assert_eq!(status["tasks"][0]["state"], "RUNNING", "{status}");

    let data = dir.path().join("data");
    let dead = || {
        let (code, out, err) = Worker::cli(&["topics", "consume", "wh-dlq", "--data-dir", data.to_str().unwrap(), "--from-beginning"]);
        assert_eq!(code, 0, "{err}");
        out.lines().map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()).collect::<Vec<_>>()
    };
    sluice_tests::eventually(Duration::from_secs(30), "three dead letters", || dead().len() == 3);
    let dead = dead();
    let header = |d: &serde_json::Value, k: &str| -> Option<serde_json::Value> {
        d["headers"].as_array()?.iter().find(|h| h["key"] == k).map(|h| h["value"].clone())
    };
    let mut keys = Vec::new();
    for d in &dead {
        assert_eq!(header(d, "__connect.errors.stage"), Some(json!("TASK_PUT")), "{d}");
        assert_eq!(header(d, "__connect.errors.topic"), Some(json!("srv.public.items")), "{d}");
        assert_eq!(header(d, "__connect.errors.connector.name"), Some(json!("wh")), "{d}");
        let message = header(d, "__connect.errors.exception.message").and_then(|m| m.as_str().map(str::to_owned)).unwrap_or_default();
        assert!(message.contains("check constraint") && message.contains("key {id="), "{message}");
        // The original bytes: the Debezium envelope as the source wrote it.
        let value = match &d["value"] {
            serde_json::Value::String(text) => serde_json::from_str(text).unwrap(),
            other => other.clone(),
        };
        assert!(value["payload"]["after"]["n"].as_i64().unwrap() < 0, "{value}");
        keys.push(value["payload"]["after"]["id"].as_i64().unwrap());
    }
    keys.sort();
    assert_eq!(keys, vec![7, 50, 150]);
    assert!(w.output().contains("skipping the record"), "errors.log.enable logs each one");
}

/// Rejected changes under SIGKILLs: a record the target refuses is dead-lettered before the
/// sink's offsets can pass it, so after any number of kills every rejected row is in the
/// dead-letter topic (at least once: a redelivered record is reported again) and every
/// accepted row is in the target.
#[test]
fn rejected_changes_reach_the_dead_letter_topic_through_sigkills() {
    let pg = Postgres::start();
    pg.sql("CREATE DATABASE wh");
    pg.sql("CREATE TABLE items (id int PRIMARY KEY, name text NOT NULL, n int NOT NULL); INSERT INTO items VALUES (0, 'seed', 0)");
    pg.psql().sql("wh", "CREATE TABLE items (id int PRIMARY KEY, name text, n int CHECK (n >= 0))");
    let dir = tempfile::tempdir().unwrap();
    let mut w = Worker::start(dir.path(), &[("offset.flush.interval.ms", "300")]);
    let (code, body) = w.post("/connectors", &json!({"name": "src", "config": pg.source_config("dlq_kill_slot", &[])}));
    assert_eq!(code, 201, "{body}");
    let (code, body) = w.post(
        "/connectors",
        &json!({"name": "wh", "config": pg.sink_config("wh", "", &[
            ("batch.size", "50"), ("errors.tolerance", "all"),
            ("errors.deadletterqueue.topic.name", "wh-dlq"), ("errors.deadletterqueue.context.headers.enable", "true"),
        ])}),
    );
    assert_eq!(code, 201, "{body}");
    w.wait_running("src", 1);
    w.wait_running("wh", 1);

    // 60 transactions of 40 rows; every 7th row has a negative n, which the target refuses.
    let done = Arc::new(AtomicBool::new(false));
    let writer = {
        let done = done.clone();
        let pg = pg.psql();
        std::thread::spawn(move || {
            for t in 0..60 {
                let first = 1 + t * 40;
                pg.sql(
                    "postgres",
                    &format!(
                        "INSERT INTO items SELECT g, 'r' || g, CASE WHEN g % 7 = 0 THEN -g ELSE g END FROM generate_series({first}, {}) g",
                        first + 39
                    ),
                );
                std::thread::sleep(Duration::from_millis(40));
            }
            done.store(true, Ordering::SeqCst);
        })
    };
    let kills = kill_while(&mut w, &done, 5, |k| 500 + (k * 211) % 500);
    writer.join().unwrap();
    assert!(kills >= 2, "only {kills} kills happened during the workload");

    let accepted = pg.sql("SELECT string_agg(id || ':' || n, ',' ORDER BY id) FROM items WHERE n >= 0");
    sluice_tests::eventually(Duration::from_secs(120), "every accepted row in the target", || {
        pg.psql().sql("wh", "SELECT string_agg(id || ':' || n, ',' ORDER BY id) FROM items") == accepted
    });
    let rejected: BTreeSet<i64> = (1..=2400).filter(|g| g % 7 == 0).collect();
    let data = dir.path().join("data");
    let dead_ids = || {
        let (code, out, err) = Worker::cli(&["topics", "consume", "wh-dlq", "--data-dir", data.to_str().unwrap(), "--from-beginning"]);
        assert_eq!(code, 0, "{err}");
        out.lines()
            .map(|l| {
                let d: serde_json::Value = serde_json::from_str(l).unwrap();
                let value: serde_json::Value = match &d["value"] {
                    serde_json::Value::String(text) => serde_json::from_str(text).unwrap(),
                    other => other.clone(),
                };
                value["payload"]["after"]["id"].as_i64().unwrap()
            })
            .collect::<Vec<_>>()
    };
    sluice_tests::eventually(Duration::from_secs(60), "every rejected row dead-lettered", || {
        dead_ids().into_iter().collect::<BTreeSet<_>>() == rejected
    });
    let all = dead_ids();
    let distinct: BTreeSet<i64> = all.iter().copied().collect();
    assert!(distinct.iter().all(|id| rejected.contains(id)), "only rejected rows are dead-lettered: {distinct:?}");
    println!(
        "{} dead letters for {} rejected rows after {kills} kills ({} reported again after a kill)",
        all.len(),
        rejected.len(),
        all.len() - distinct.len()
    );
}
