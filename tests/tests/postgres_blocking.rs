//! Blocking snapshots of the Postgres source (an `execute-snapshot` signal of type
//! `blocking`), through the real binary against a real PostgreSQL 15: streaming stops just
//! after the signal, the named tables are read in one go as `op: "r"` records, then streaming
//! goes on after the signal.
//!
//! - Against the recording of real Debezium 3.6.3 (`tests/golden/postgres/signals/`): every
//!   record of `blocking.sql` equal, machine-dependent values set aside, per topic the
//!   snapshot records in their order and the streamed ones in theirs (where streaming pauses
//!   relative to the rest of the signal's transaction varies from run to run in Debezium;
//!   sluice stops right after the signal row, which the test checks too).
//! - A SIGKILL inside a blocking snapshot: the restart reads the signal again and the
//!   snapshot runs again from its start, the changes around the signal are delivered, and
//!   once the snapshot's last record is durable a restart does not run it again.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use sluice_tests::{eventually, json, Json, Postgres, Worker};

use crate::postgres_golden::{consume, differences, normalised};

fn recording() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("golden/postgres/signals")
}

fn psql_file(pg: &Postgres, file: &Path, stream: bool) {
    let out = pg.psql().command("postgres").args(["-v", &format!("stream={stream}"), "-f"]).arg(file).output().expect("run psql");
    assert!(out.status.success(), "{} (stream={stream}) failed: {}", file.display(), String::from_utf8_lossy(&out.stderr));
}

fn op(r: &Json) -> &str {
    r["value"]["op"].as_str().unwrap_or("tombstone")
}

fn connector(pg: &Postgres, extra: &[(&str, &str)]) -> Json {
    let mut config = json!({
        "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
        "database.hostname": "127.0.0.1", "database.port": pg.port.to_string(), "database.user": "postgres",
        "database.password": "", "database.dbname": "postgres",
        "plugin.name": "pgoutput", "publication.autocreate.mode": "filtered",
        "signal.data.collection": "public.dbz_signal",
        "key.converter": "org.apache.kafka.connect.json.JsonConverter", "key.converter.schemas.enable": "false",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter", "value.converter.schemas.enable": "false",
    });
    for (k, v) in extra {
        config[*k] = json!(v);
    }
    config
}

#[test]
fn blocking_snapshots_match_debeziums_recording() {
    let pg = Postgres::start();
    let fixture = recording().join("blocking.sql");
    psql_file(&pg, &fixture, false);
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let w = Worker::start(dir.path(), &[("offset.flush.interval.ms", "200")]);
    let config = connector(
        &pg,
        &[("topic.prefix", "golden"), ("slot.name", "golden_blocking"), ("schema.include.list", "public"), ("snapshot.mode", "initial")],
    );
    let (code, body) = w.post("/connectors", &json!({"name": "golden", "config": config}));
    assert_eq!(code, 201, "{body}");
    eventually(Duration::from_secs(60), "the initial snapshot's last record", || {
        consume(&data, "golden.public.blk_b").iter().any(|r| r["value"]["source"]["snapshot"] == "last")
    });
    psql_file(&pg, &fixture, true);
    eventually(Duration::from_secs(60), "the end message", || {
        consume(&data, "golden.message").iter().any(|r| r["key"]["prefix"] == "golden-end")
    });

    let mut unexplained = Vec::new();
    let mut compared = 0;
    for entry in std::fs::read_dir(recording().join("blocking/noschemas")).unwrap() {
        let entry = entry.unwrap();
        let topic = entry.file_name().to_string_lossy().trim_end_matches(".jsonl").to_owned();
        let expected: Vec<Json> =
            std::fs::read_to_string(entry.path()).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        let got = consume(&data, &topic);
        // Snapshot records in their order, then the streamed ones in theirs.
        let split = |records: &[Json]| -> (Vec<Json>, Vec<Json>) { records.iter().cloned().partition(|r| op(r) == "r") };
        let ((got_r, got_s), (exp_r, exp_s)) = (split(&got), split(&expected));
        for (what, g, e) in [("snapshot", got_r, exp_r), ("streamed", got_s, exp_s)] {
            if g.len() != e.len() {
                unexplained.push(format!("{topic}: {} {what} records, Debezium wrote {}", g.len(), e.len()));
                continue;
            }
            for (g, e) in g.iter().zip(&e) {
                compared += 1;
                let mut diffs = Vec::new();
                differences(&g["key"], &e["key"], "key", &mut diffs);
                differences(&normalised(g["value"].clone()), &normalised(e["value"].clone()), "value", &mut diffs);
                if !diffs.is_empty() {
                    unexplained.push(format!("{topic} {what} key {}: differs at {diffs:?}\n  sluice   {}\n  Debezium {}", e["key"], g, e));
                }
            }
        }
    }
    assert!(compared >= 20, "only {compared} records compared");
    assert!(unexplained.is_empty(), "{} differences from Debezium's recording:\n{}", unexplained.len(), unexplained.join("\n"));

    // sluice stops right after the signal row: the change after it in the same transaction
    // comes after the snapshot's records (Debezium pauses at the signal or somewhat later).
    let blk_a: Vec<(String, i64, String)> = consume(&data, "golden.public.blk_a")
        .iter()
        .map(|r| (op(r).to_owned(), r["key"]["id"].as_i64().unwrap(), r["value"]["source"]["snapshot"].as_str().unwrap_or("").to_owned()))
        .collect();
    let order: Vec<(&str, i64)> = blk_a.iter().skip(3).map(|(o, id, _)| (o.as_str(), *id)).collect();
    assert_eq!(order, [("c", 10), ("r", 1), ("r", 2), ("r", 3), ("r", 10), ("r", 11), ("c", 11)], "{blk_a:?}");
    // The blocking records carry the signal's stream position, as Debezium's do.
    let signal_lsn = consume(&data, "golden.public.dbz_signal")[0]["value"]["source"]["lsn"].clone();
    let blocking: Vec<Json> = consume(&data, "golden.public.blk_a").into_iter().skip(3).filter(|r| op(r) == "r").collect();
    assert!(blocking.iter().all(|r| r["value"]["source"]["lsn"] == signal_lsn), "{blocking:?} vs the signal at {signal_lsn}");
}

/// The newest stored offset of connector `name`.
fn stored_offset(data: &Path, name: &str) -> Option<Json> {
    consume(data, "connect-offsets").into_iter().rev().find(|r| r["key"][0] == name).map(|r| r["value"].clone())
}

#[test]
fn a_sigkill_inside_a_blocking_snapshot_runs_it_again_and_loses_nothing() {
    const ROWS: i64 = 20_000;
    const TOPIC: &str = "blk.public.items";
    let pg = Postgres::start();
    pg.sql(&format!(
        "CREATE TABLE dbz_signal (id varchar(64) PRIMARY KEY, type varchar(32) NOT NULL, data text);
         CREATE TABLE items (id bigint PRIMARY KEY, v int NOT NULL);
         INSERT INTO items SELECT g, 0 FROM generate_series(1, {ROWS}) g;
         -- Reads a row in about 0.2 ms: the snapshot takes seconds, long enough to be killed in.
         CREATE FUNCTION slow(bigint) RETURNS boolean LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_sleep(0.0002); RETURN true; END $$;"
    ));
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let mut w = Worker::start(dir.path(), &[("offset.flush.interval.ms", "200")]);
    let config = connector(
        &pg,
        &[
            ("topic.prefix", "blk"),
            ("slot.name", "blocking_kill"),
            ("table.include.list", "public.items"),
            ("snapshot.mode", "no_data"),
            ("snapshot.fetch.size", "200"),
            ("max.batch.size", "200"),
        ],
    );
    let (code, body) = w.post("/connectors", &json!({"name": "blk", "config": config}));
    assert_eq!(code, 201, "{body}");
    w.wait_running("blk", 1);
    eventually(Duration::from_secs(30), "the replication slot", || {
        pg.sql("SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'blocking_kill'") == "1"
    });
    pg.sql("INSERT INTO items VALUES (-1, 0)");
    eventually(Duration::from_secs(30), "streaming", || consume(&data, TOPIC).iter().any(|r| r["key"]["id"] == -1));

    // The signal between two changes of one transaction.
    pg.sql(
        "BEGIN; UPDATE items SET v = 1 WHERE id = 5;
         INSERT INTO dbz_signal VALUES ('b1', 'execute-snapshot', '{\"data-collections\": [\"public.items\"], \"type\": \"blocking\",
           \"additional-conditions\": [{\"data-collection\": \"public.items\", \"filter\": \"SELECT * FROM public.items WHERE slow(id)\"}]}');
         INSERT INTO items VALUES (100001, 0); COMMIT;",
    );
    // Changes after the signal, written while the snapshot runs.
    for id in 100_002..100_012 {
        pg.sql(&format!("INSERT INTO items VALUES ({id}, 0)"));
    }
    eventually(Duration::from_secs(60), "blocking snapshot records durable", || {
        stored_offset(&data, "blk").is_some_and(|o| o["snapshot"] == "BLOCKING")
            && consume(&data, TOPIC).iter().filter(|r| op(r) == "r").count() >= 2_000
    });
    w.kill9();
    let before = consume(&data, TOPIC);
    let reads_before = before.iter().filter(|r| op(r) == "r").count();
    assert!(reads_before < ROWS as usize, "the snapshot ended before the kill ({reads_before} reads)");
    assert!(!before.iter().any(|r| r["value"]["source"]["snapshot"] == "last"), "the snapshot ended before the kill");
    let stored = stored_offset(&data, "blk").unwrap();
    assert_eq!(stored["last_snapshot_record"], json!(false), "{stored}");

    w.restart();
    let mut records = Vec::new();
    eventually(Duration::from_secs(120), "the blocking snapshot again, then the changes after the signal", || {
        records = consume(&data, TOPIC);
        records.iter().any(|r| op(r) == "c" && r["key"]["id"] == 100_011)
    });
    // After the restart: the whole table read again, from its start, ending with `last`.
    let again: Vec<Json> = records[before.len()..].iter().filter(|r| op(r) == "r").cloned().collect();
    let ids: BTreeSet<i64> = again.iter().map(|r| r["key"]["id"].as_i64().unwrap()).collect();
    let expected: BTreeSet<i64> = (1..=ROWS).chain([-1, 100_001]).collect();
    let missing: Vec<&i64> = expected.difference(&ids).take(10).collect();
    assert!(missing.is_empty(), "rows not read by the snapshot after the restart: {missing:?}");
    assert_eq!(again.first().unwrap()["value"]["source"]["snapshot"], "first");
    assert_eq!(again.last().unwrap()["value"]["source"]["snapshot"], "last");
    // Every change around the signal is delivered: the one before it (before the kill), the
    // one after it in its transaction and those after it, once the snapshot has ended.
    let last_read = records.iter().rposition(|r| op(r) == "r").unwrap();
    assert!(records.iter().any(|r| op(r) == "u" && r["key"]["id"] == 5), "the change before the signal");
    for id in 100_001..100_012 {
        let at = records.iter().rposition(|r| op(r) == "c" && r["key"]["id"] == id);
        assert!(at.is_some_and(|at| at > last_read), "the change to {id} after the snapshot's records");
    }

    // Done: the stored offset covers the signal, and a restart does not read the table again.
    eventually(Duration::from_secs(30), "the offset past the blocking snapshot", || {
        stored_offset(&data, "blk").is_some_and(|o| o["snapshot"] != "BLOCKING" || o["last_snapshot_record"] == json!(true))
    });
    w.terminate();
    w.restart();
    w.wait_running("blk", 1);
    pg.sql("INSERT INTO items VALUES (100100, 0)");
    eventually(Duration::from_secs(60), "a change after the second restart", || {
        records = consume(&data, TOPIC);
        records.iter().any(|r| r["key"]["id"] == 100_100)
    });
    let reads_total = records.iter().filter(|r| op(r) == "r").count();
    assert_eq!(reads_total, reads_before + again.len(), "the blocking snapshot ran again after it had ended");
    eprintln!("blocking snapshot: {reads_before} reads before the kill, {} after, {} records in all", again.len(), records.len());
}
