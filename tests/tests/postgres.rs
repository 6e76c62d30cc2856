//! The Postgres source through the real binary: SIGKILL the worker during the snapshot of
//! a large table and while it streams concurrent inserts, updates and deletes; after each
//! restart the connector comes back on its own, the snapshot resumes where its durable
//! offset says (no key is read more than twice, far fewer reads than a restart from zero
//! would make), and in the end the events, applied per key, reproduce the table. The same
//! for a snapshot of several tables read in parallel (`snapshot.max.threads`), and for a
//! Postgres restart under load. Postgres is started by `tests/services/postgres.sh`; a
//! missing Postgres fails the test.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use sluice_tests::{eventually, json, Json, Postgres, SqlWriter, Worker};

const ROWS: i64 = 200_000;
const TOPIC: &str = "srv.public.items";
const SLOT: &str = "sluice_e2e";

fn lsn(pg: &Postgres, expr: &str) -> u64 {
    pg.sql(&format!("SELECT ({expr} - '0/0')::bigint")).parse().unwrap_or(0)
}

fn confirmed_flush(pg: &Postgres) -> u64 {
    lsn(pg, &format!("(SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = '{SLOT}')"))
}

/// Transactions of inserts, updates and deletes until stopped: new keys above ROWS,
/// updates and deletes of snapshotted and new keys.
fn writer(pg: &Postgres) -> SqlWriter {
    SqlWriter::start(pg, Duration::from_millis(4), |i| {
        format!(
            "BEGIN; INSERT INTO items (id, v, note) VALUES ({new}, 0, 'new'); \
             UPDATE items SET v = v + 1, note = 'upd' WHERE id IN ({a}, {b}); \
             DELETE FROM items WHERE id IN ({c}, {d}); COMMIT;\n",
            new = ROWS + 1 + i,
            a = 1 + (i * 7919) % ROWS,
            b = ROWS + 1 + i / 2,
            c = 1 + (i * 104_729 + 13) % ROWS,
            d = ROWS + 1 + i / 3 - 1,
        )
    })
}
/// A worker writing schemaless JSON, flushing offsets every 300 ms.
fn start_worker(dir: &Path) -> Worker {
    Worker::start(
        dir,
        &[("offset.flush.interval.ms", "300"), ("key.converter.schemas.enable", "false"), ("value.converter.schemas.enable", "false")],
    )
}

fn consume(data: &Path, topic: &str) -> Vec<Json> {
    let (code, out, err) = Worker::cli(&["topics", "consume", topic, "--data-dir", data.to_str().unwrap(), "--from-beginning"]);
    assert_eq!(code, 0, "{err}");
    out.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

/// The newest stored offset of the connector, if any.
fn stored_offset(data: &Path) -> Option<Json> {
    consume(data, "connect-offsets").into_iter().rev().find(|r| r["key"][0] == "pg").map(|r| r["value"].clone())
}

/// The first key column of the durable snapshot position, while a snapshot is in progress.
fn durable_snapshot_key(data: &Path) -> Option<i64> {
    stored_offset(data)?["snapshot_key"][0].as_str()?.parse().ok()
}

/// `id → (v, note)` of every row of `items`.
fn items(pg: &Postgres) -> BTreeMap<i64, (i64, String)> {
    pg.sql("SELECT id, v, note FROM items")
        .lines()
        .map(|l| {
            let mut f = l.splitn(3, '|');
            (f.next().unwrap().parse().unwrap(), (f.next().unwrap().parse().unwrap(), f.next().unwrap().to_owned()))
        })
        .collect()
}

/// The events applied per key (`state`) equal the table, row for row.
fn assert_reproduces(state: &BTreeMap<i64, (i64, String)>, table: &BTreeMap<i64, (i64, String)>) {
    let missing: Vec<_> = table.iter().filter(|(k, v)| state.get(k) != Some(v)).take(5).collect();
    let extra: Vec<_> = state.keys().filter(|k| !table.contains_key(k)).take(5).collect();
    assert!(missing.is_empty() && extra.is_empty(), "events do not reproduce the table: wrong or missing {missing:?}, extra {extra:?}");
    assert_eq!(state.len(), table.len());
}

fn topic_end(data: &Path) -> i64 {
    topic_end_of(data, TOPIC)
}

#[test]
fn postgres_sigkill_during_snapshot_and_streaming_loses_nothing() {
    let started = Instant::now();
    let pg = Postgres::start();
    pg.sql(&format!(
        "CREATE TABLE items (id bigint PRIMARY KEY, v int NOT NULL, note text, at timestamptz DEFAULT now());
         INSERT INTO items (id, v, note) SELECT g, 0, 'row ' || g FROM generate_series(1, {ROWS}) g;"
    ));
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let mut w = start_worker(dir.path());
    let config = pg.source_config(SLOT, &[("snapshot.fetch.size", "200"), ("status.update.interval.ms", "500")]);
    let (code, body) = w.post("/connectors", &json!({"name": "pg", "config": config}));
    assert_eq!(code, 201, "{body}");
    w.wait_running("pg", 1);
    let writer = writer(&pg);

    // (a) SIGKILL during the snapshot, twice: each time part of the snapshot is written
    // and its last record is not. Before the second kill the durable snapshot position has
    // passed every key read before the first one (so a key is read at most twice).
    let mut snapshot_kills = 0;
    let mut read_before_kill = 0;
    let mut durable_at_kill = Vec::new();
    for _ in 0..2 {
        let base = topic_end(&data);
        // Some of the snapshot durable (a committed offset names a key) before each kill: the
        // offsets are committed on an interval, which may not have passed yet when the
        // records are in the log.
        eventually(Duration::from_secs(60), "snapshot progress past the previous kill", || {
            topic_end(&data) > base + 15_000 && durable_snapshot_key(&data).unwrap_or(0) >= read_before_kill.max(1)
        });
        w.kill9();
        let offset = stored_offset(&data);
        let in_snapshot = offset.as_ref().is_none_or(|o| o["snapshot"] == true && o["last_snapshot_record"] != true);
        assert!(in_snapshot, "the kill was meant to land inside the snapshot; stored offset {offset:?}");
        durable_at_kill.push(durable_snapshot_key(&data).unwrap_or(0));
        read_before_kill =
            consume(&data, TOPIC).iter().filter(|r| r["value"]["op"] == "r").filter_map(|r| r["key"]["id"].as_i64()).max().unwrap_or(0);
        snapshot_kills += 1;
        w.restart();
        // Back to RUNNING from the stored configuration, without a new POST.
        w.wait_running("pg", 1);
    }
    eventually(Duration::from_secs(60), "the snapshot to complete", || stored_offset(&data).is_some_and(|o| o.get("snapshot").is_none()));
    let streaming_from = confirmed_flush(&pg);

    // SIGKILL while streaming the writer's transactions.
    let mut rng = seed();
    for _ in 0..3 {
        std::thread::sleep(Duration::from_millis(400 + rng() % 800));
        w.kill9();
        w.restart();
        w.wait_running("pg", 1);
    }
    std::thread::sleep(Duration::from_millis(500));
    let transactions = writer.finish();
    let end = lsn(&pg, "pg_current_wal_lsn()");

    // (b) Everything is durable once the slot is confirmed past the end of the writes
    // (a position is confirmed only when every record before it is durable).
    eventually(Duration::from_secs(30), "confirmed_flush_lsn to reach the end of the writes", || confirmed_flush(&pg) >= end);
    assert!(confirmed_flush(&pg) > streaming_from);

    // (c) SIGKILL just after changes that follow an idle spell: the stored offset is then the
    // server's WAL end (an offset-only record: no change position, no `lsn_proc`), and the
    // changes after it are streamed again after the restart.
    w.eventually(Duration::from_secs(30), "an idle position stored as the offset", || {
        stored_offset(&data).is_some_and(|o| o.get("lsn_proc").is_none() && o.get("snapshot").is_none())
    });
    pg.sql("INSERT INTO items (id, v, note) SELECT g, 1, 'after idle ' || g FROM generate_series(50000001, 50000300) g");
    w.kill9();
    w.restart();
    w.wait_running("pg", 1);
    let end = lsn(&pg, "pg_current_wal_lsn()");
    eventually(Duration::from_secs(30), "confirmed_flush_lsn past the changes after the idle spell", || confirmed_flush(&pg) >= end);
    assert_eq!(w.get("/connectors/pg/status").1["tasks"][0]["state"], "RUNNING");
    w.terminate();

    // Apply the events per key: the final state must be the table's content.
    let records = consume(&data, TOPIC);
    let mut state: BTreeMap<i64, (i64, String)> = BTreeMap::new();
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut ops: BTreeMap<String, usize> = BTreeMap::new();
    for r in &records {
        let id = r["key"]["id"].as_i64().unwrap_or_else(|| panic!("key without id: {r}"));
        let value = &r["value"];
        if value.is_null() {
            state.remove(&id); // tombstone
            continue;
        }
        let op = value["op"].as_str().unwrap().to_owned();
        *ops.entry(op.clone()).or_default() += 1;
        *seen.entry(format!("{id}/{op}/{}/{}", value["source"]["lsn"], value["after"]["v"])).or_default() += 1;
        match op.as_str() {
            "r" | "c" | "u" => {
                let after = &value["after"];
                assert_eq!(after["id"].as_i64(), Some(id), "{r}");
                state.insert(id, (after["v"].as_i64().unwrap(), after["note"].as_str().unwrap_or_default().to_owned()));
            }
            "d" => {
                state.remove(&id);
            }
            other => panic!("unexpected op {other}: {r}"),
        }
    }
    let table = items(&pg);
    assert_reproduces(&state, &table);
    let duplicates: usize = seen.values().map(|n| n - 1).sum();

    // The snapshot resumed rather than restarted: the rows of chunks durable before a kill
    // were not read again. Only records in flight at a kill are read twice.
    let mut reads: BTreeMap<i64, usize> = BTreeMap::new();
    for r in records.iter().filter(|r| r["value"]["op"] == "r") {
        *reads.entry(r["key"]["id"].as_i64().unwrap()).or_default() += 1;
    }
    let most = reads.iter().max_by_key(|(_, n)| **n).map(|(k, n)| (*k, *n)).unwrap_or_default();
    assert!(most.1 <= 2, "key {} was read {} times in the snapshot", most.0, most.1);
    let total_reads: usize = reads.values().sum();
    let durable = durable_at_kill[0];
    assert!(durable > 0, "nothing of the snapshot was durable at the first kill");
    let again: Vec<_> = reads.range(1..=durable).filter(|(_, n)| **n != 1).take(5).collect();
    assert!(again.is_empty(), "keys durable before the first kill (up to {durable}) were read again (or never): {again:?}");
    assert!(
        (total_reads as f64) < 1.5 * ROWS as f64,
        "{total_reads} snapshot reads for {ROWS} rows after {snapshot_kills} kills: the snapshot restarted instead of resuming"
    );
    eprintln!(
        "postgres crash test: {snapshot_kills} SIGKILLs in the snapshot, 3 while streaming; {} records ({ops:?}), {transactions} writer transactions, \
         {} rows at the end, {duplicates} duplicate events (at-least-once), {total_reads} snapshot reads (durable keys at the kills: {durable_at_kill:?}), {:.1} s",
        records.len(),
        table.len(),
        started.elapsed().as_secs_f64()
    );
}

fn seed() -> impl FnMut() -> u64 {
    let mut x = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64 | 1;
    move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    }
}

/// `snapshot.max.threads=3` over four tables, SIGKILLed twice while several tables are
/// read at once: after the restarts every table's topic holds each of its rows, and the
/// snapshot resumed rather than restarted: no key read more than once per kill plus once, and
/// fewer re-reads than the records already in the topics at the kills (which a snapshot
/// starting over would all read again).
#[test]
fn postgres_parallel_snapshot_survives_sigkills() {
    const PER_TABLE: i64 = 40_000;
    const TABLES: [&str; 4] = ["pa", "pb", "pc", "pd"];
    let pg = Postgres::start();
    for t in TABLES {
        pg.sql(&format!(
            "CREATE TABLE {t} (id bigint PRIMARY KEY, note text); INSERT INTO {t} SELECT g, 'row ' || g FROM generate_series(1, {PER_TABLE}) g;"
        ));
    }
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let mut w = start_worker(dir.path());
    let tables = TABLES.map(|t| format!("public.{t}")).join(",");
    let config = pg.source_config(
        "sluice_parallel",
        &[("table.include.list", &tables), ("snapshot.max.threads", "3"), ("snapshot.fetch.size", "200"), ("snapshot.mode", "initial")],
    );
    let (code, body) = w.post("/connectors", &json!({"name": "pg", "config": config}));
    assert_eq!(code, 201, "{body}");
    w.wait_running("pg", 1);
    let snapshot_end = || TABLES.iter().map(|t| topic_end_of(&data, &format!("srv.public.{t}"))).sum::<i64>();
    // Done: the last snapshot record's offset is durable (no stream follows in this test).
    let done = |o: &Json| o.get("snapshot").is_none() || o["last_snapshot_record"] == true;
    let mut kills = 0;
    let mut written_at_kills = 0;
    for _ in 0..2 {
        let base = snapshot_end();
        eventually(Duration::from_secs(60), "snapshot progress with a durable offset", || {
            snapshot_end() > base + 15_000 && stored_offset(&data).is_some_and(|o| o["snapshot"] == true)
        });
        let written = snapshot_end();
        w.kill9();
        let offset = stored_offset(&data);
        if offset.as_ref().is_some_and(done) {
            w.restart();
            break; // the snapshot finished before this kill
        }
        kills += 1;
        written_at_kills += written as usize;
        w.restart();
        w.wait_running("pg", 1);
    }
    assert!(kills >= 1, "no kill landed inside the snapshot");
    eventually(Duration::from_secs(90), "the snapshot to complete", || stored_offset(&data).is_some_and(|o| done(&o)));
    w.terminate();
    let mut total_reads = 0;
    for t in TABLES {
        let records = consume(&data, &format!("srv.public.{t}"));
        let mut reads: BTreeMap<i64, usize> = BTreeMap::new();
        for r in records.iter().filter(|r| r["value"]["op"] == "r") {
            *reads.entry(r["key"]["id"].as_i64().unwrap()).or_default() += 1;
        }
        assert!(reads.keys().copied().eq(1..=PER_TABLE), "table {t}: every row read, no other");
        let most = reads.values().max().copied().unwrap_or_default();
        assert!(most <= 1 + kills, "table {t}: a key read {most} times after {kills} kills");
        total_reads += reads.values().sum::<usize>();
    }
    let rows = PER_TABLE as usize * TABLES.len();
    eprintln!(
        "parallel snapshot: {kills} SIGKILLs, {total_reads} reads for {rows} rows, {written_at_kills} records in the topics at the kills"
    );
    assert!(
        total_reads - rows < written_at_kills,
        "{} re-reads after {kills} kills with {written_at_kills} records already written: the snapshot restarted instead of resuming",
        total_reads - rows
    );
}

fn topic_end_of(data: &Path, topic: &str) -> i64 {
    let (code, out, _) = Worker::cli(&["topics", "describe", topic, "--data-dir", data.to_str().unwrap()]);
    if code != 0 {
        return 0;
    }
    let d: Json = serde_json::from_str(&out).unwrap();
    d["partitions"].as_array().unwrap().iter().map(|p| p["end_offset"].as_i64().unwrap()).sum()
}

/// Postgres restarts (fast shutdown: every session is ended) while the connector streams a
/// backlog and a writer keeps writing. The task reconnects on its own; once the writes stop,
/// the slot's confirmed position reaches the end of the WAL (the LSN really advances, the
/// lag returns to zero), and the events, applied per key, reproduce the table.
#[test]
fn postgres_restart_under_load_loses_nothing_and_the_slot_catches_up() {
    const RESTART_SLOT: &str = "sluice_restart";
    let pg = Postgres::start();
    pg.sql("CREATE TABLE items (id bigint PRIMARY KEY, v int NOT NULL, note text, at timestamptz DEFAULT now());");
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let mut w = start_worker(dir.path());
    let config = pg.source_config(RESTART_SLOT, &[("status.update.interval.ms", "500")]);
    let (code, body) = w.post("/connectors", &json!({"name": "pg", "config": config}));
    assert_eq!(code, 201, "{body}");
    w.wait_running("pg", 1);
    let confirmed = || lsn(&pg, &format!("(SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = '{RESTART_SLOT}')"));
    let start = confirmed();
    // Writers of their own key ranges: each step inserts a row, updates two and deletes one.
    let load = |base: i64| {
        SqlWriter::start(&pg, Duration::from_millis(3), move |i| {
            format!(
                "BEGIN; INSERT INTO items (id, v, note) VALUES ({new}, 0, 'new'); \
                 UPDATE items SET v = v + 1, note = 'upd' WHERE id IN ({a}, {b}); \
                 DELETE FROM items WHERE id = {c}; COMMIT;\n",
                new = base + i,
                a = 1 + (i * 7919) % 50_000,
                b = base + i / 2,
                c = base + i / 3 - 1,
            )
        })
    };
    // A backlog (the connector is still streaming it at the restart) and a live writer.
    pg.sql("INSERT INTO items (id, v, note) SELECT g, 0, 'row ' || g FROM generate_series(1, 50000) g;");
    let first = load(1_000_000);
    std::thread::sleep(Duration::from_millis(300));
    pg.restart();
    let sent_before = first.abandon();
    let second = load(2_000_000);
    std::thread::sleep(Duration::from_millis(1_500));
    let sent_after = second.finish();
    let end = lsn(&pg, "pg_current_wal_lsn()");
    eventually(Duration::from_secs(60), "the slot's confirmed position to reach the end of the WAL", || confirmed() >= end);
    assert!(confirmed() > start, "the slot advanced");
    let lag: i64 = pg
        .sql(&format!("SELECT pg_current_wal_lsn() - confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = '{RESTART_SLOT}'"))
        .trim()
        .parse()
        .unwrap();
    assert!(lag < 1 << 20, "slot lag {lag} bytes after the stream caught up");
    assert_eq!(w.get("/connectors/pg/status").1["tasks"][0]["state"], "RUNNING");
    w.terminate();

    let mut state: BTreeMap<i64, (i64, String)> = BTreeMap::new();
    for r in consume(&data, TOPIC) {
        let id = r["key"]["id"].as_i64().unwrap_or_else(|| panic!("key without id: {r}"));
        let value = &r["value"];
        match value["op"].as_str() {
            None => {}
            Some("r" | "c" | "u") => {
                let after = &value["after"];
                state.insert(id, (after["v"].as_i64().unwrap(), after["note"].as_str().unwrap_or_default().to_owned()));
            }
            Some("d") => {
                state.remove(&id);
            }
            Some(other) => panic!("unexpected op {other}: {r}"),
        }
    }
    let table = items(&pg);
    assert_reproduces(&state, &table);
    assert!(table.len() > 50_000, "the writers added rows ({} rows)", table.len());
    eprintln!(
        "postgres restart test: {sent_before} writer steps before the restart, {sent_after} after; {} rows; lag {lag} bytes",
        table.len()
    );
}
