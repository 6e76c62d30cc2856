//! Incremental snapshots of the Postgres source through the real binary, against a real
//! PostgreSQL 15: an `execute-snapshot` row in the signal table starts one on a table the
//! connector streams but never snapshotted (`snapshot.mode=no_data`), while a writer
//! inserts, updates and deletes rows; the worker is SIGKILLed in the middle. In the end the
//! newest event per key reproduces the table (no row missing, no deleted or stale row
//! brought back by a READ), and the snapshot resumed after its durable key instead of
//! starting over. A second test stops, pauses and resumes a running snapshot.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use sluice_tests::{eventually, json, Json, Postgres, SqlWriter, Worker};

const TOPIC: &str = "pg.public.items";

pub(crate) fn consume(data: &Path, topic: &str) -> Vec<Json> {
    let (code, out, _) = Worker::cli(&["topics", "consume", topic, "--data-dir", data.to_str().unwrap(), "--from-beginning"]);
    if code != 0 {
        return Vec::new();
    }
    out.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

/// The newest stored offset of the connector, if any.
pub(crate) fn stored_offset(data: &Path) -> Option<Json> {
    consume(data, "connect-offsets").into_iter().rev().find(|r| r["key"][0] == "pg").map(|r| r["value"].clone())
}

/// The (bigint) key of the durable incremental snapshot position, while one runs. The key is
/// stored as Debezium stores it, the hex of a Java-serialized `Object[]`, which for one `Long`
/// ends with the value's eight bytes; before the table's columns are read, as a JSON array of
/// text forms.
pub(crate) fn durable_incremental_key(data: &Path) -> Option<i64> {
    let o = stored_offset(data)?;
    let stored = o["incremental_snapshot_primary_key"].as_str()?;
    if let Some(hex) = stored.strip_prefix("aced0005") {
        assert!(hex.contains(&"java.lang.Long".bytes().map(|b| format!("{b:02x}")).collect::<String>()), "a Long key: {stored}");
        return u64::from_str_radix(&hex[hex.len().checked_sub(16)?..], 16).ok().map(|v| v as i64);
    }
    let keys: Vec<String> = serde_json::from_str(stored).ok()?;
    keys.first()?.parse().ok()
}

/// Waits until the stored offset carries no incremental snapshot (offsets are flushed
/// every 200 ms).
fn wait_without_snapshot(data: &Path, what: &str) {
    eventually(Duration::from_secs(30), what, || stored_offset(data).is_some_and(|o| o.get("incremental_snapshot_collections").is_none()));
}

pub(crate) fn op(r: &Json) -> &str {
    r["value"]["op"].as_str().unwrap_or("tombstone")
}

pub(crate) fn id(r: &Json) -> i64 {
    r["key"]["id"].as_i64().unwrap()
}

fn setup(pg: &Postgres, rows: i64) {
    pg.sql(&format!(
        "CREATE TABLE dbz_signal (id varchar(64) PRIMARY KEY, type varchar(32) NOT NULL, data text);
         CREATE TABLE items (id bigint PRIMARY KEY, v int NOT NULL, note text);
         INSERT INTO items (id, v, note) SELECT g, 0, 'row ' || g FROM generate_series(1, {rows}) g;"
    ));
}

fn start_worker(dir: &Path, pg: &Postgres, slot: &str, chunk: &str) -> Worker {
    let w = Worker::start(
        dir,
        &[("offset.flush.interval.ms", "200"), ("key.converter.schemas.enable", "false"), ("value.converter.schemas.enable", "false")],
    );
    let config = json!({
        "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
        "database.hostname": "127.0.0.1",
        "database.port": pg.port.to_string(),
        "database.user": "postgres",
        "database.password": "",
        "database.dbname": "postgres",
        "topic.prefix": "pg",
        "table.include.list": "public.items",
        "slot.name": slot,
        "snapshot.mode": "no_data",
        "signal.data.collection": "public.dbz_signal",
        "signal.enabled.channels": "source",
        "incremental.snapshot.chunk.size": chunk,
        "status.update.interval.ms": "500",
    });
    let (code, body) = w.post("/connectors", &json!({"name": "pg", "config": config}));
    assert_eq!(code, 201, "{body}");
    w.wait_running("pg", 1);
    eventually(Duration::from_secs(30), "the replication slot", || {
        pg.sql(&format!("SELECT count(*) FROM pg_replication_slots WHERE slot_name = '{slot}'")) == "1"
    });
    w
}

/// Each close-window row waits 50 ms before it commits: concurrent changes then land
/// between a chunk's read and its close (where a READ of the chunk would be stale), and a
/// snapshot of many chunks takes long enough to be paused or killed in the middle.
fn slow_close(pg: &Postgres) {
    pg.sql(
        "CREATE FUNCTION slow_close() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_sleep(0.05); RETURN NEW; END $$;
         CREATE TRIGGER slow_close BEFORE INSERT ON dbz_signal FOR EACH ROW WHEN (NEW.type = 'snapshot-window-close') EXECUTE FUNCTION slow_close();",
    );
}

fn signal(pg: &Postgres, id: &str, kind: &str, data: &str) {
    pg.sql(&format!("INSERT INTO dbz_signal (id, type, data) VALUES ('{id}', '{kind}', '{data}')"));
}

/// Transactions of inserts, updates and deletes until stopped: updates and deletes
/// spread over the whole key range (so some land in the open window of a chunk) but only
/// of keys 1, 2 and 3 mod 5; inserts above it.
pub(crate) fn writer(pg: &Postgres, rows: i64) -> SqlWriter {
    SqlWriter::start(pg, Duration::from_millis(3), move |i| {
        format!(
            "BEGIN; INSERT INTO items (id, v, note) VALUES ({new}, 0, 'new'); \
             UPDATE items SET v = v + 1, note = 'upd' WHERE id IN ({a}, {b}); \
             DELETE FROM items WHERE id IN ({c}); COMMIT;\n",
            new = rows + 1 + i,
            a = 1 + 5 * ((i * 7919) % (rows / 5)),
            b = 2 + 5 * ((i * 31 + 5) % (rows / 5)),
            c = 3 + 5 * ((i * 104_729 + 13) % (rows / 5)),
        )
    })
}

/// The table's rows as `id -> (v, note)`.
pub(crate) fn table_rows(pg: &Postgres) -> BTreeMap<i64, (i64, String)> {
    pg.sql("SELECT id || '|' || v || '|' || coalesce(note, '') FROM items ORDER BY id")
        .lines()
        .map(|l| {
            let mut p = l.splitn(3, '|');
            (p.next().unwrap().parse().unwrap(), (p.next().unwrap().parse().unwrap(), p.next().unwrap().to_owned()))
        })
        .collect()
}

/// The newest event per key, applied: what a key-based consumer ends with.
pub(crate) fn applied(records: &[Json]) -> BTreeMap<i64, (i64, String)> {
    let mut state = BTreeMap::new();
    for r in records {
        match op(r) {
            "r" | "c" | "u" => {
                let after = &r["value"]["after"];
                state.insert(id(r), (after["v"].as_i64().unwrap(), after["note"].as_str().unwrap_or_default().to_owned()));
            }
            "d" => {
                state.remove(&id(r));
            }
            _ => {}
        }
    }
    state
}

#[test]
fn postgres_incremental_snapshot_with_concurrent_writes_and_a_sigkill_resumes_and_converges() {
    const ROWS: i64 = 5_000;
    let pg = Postgres::start();
    setup(&pg, ROWS);
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    slow_close(&pg);
    let mut w = start_worker(dir.path(), &pg, "sluice_incr", "100");

    let writer = writer(&pg, ROWS);
    signal(&pg, "ad-hoc-1", "execute-snapshot", r#"{"data-collections": ["public.items"], "type": "INCREMENTAL"}"#);

    let end = kill_mid_snapshot_and_converge(&mut w, &pg, &data, writer, ROWS);
    eprintln!(
        "incremental snapshot: {} reads, durable key at the kill {}, {} writer transactions, {} rows at the end",
        end.reads, end.durable, end.transactions, end.rows
    );
}

/// What [`kill_mid_snapshot_and_converge`] saw.
pub(crate) struct Converged {
    pub reads: usize,
    pub durable: i64,
    pub transactions: u64,
    pub rows: usize,
}

/// With an incremental snapshot of `items` (`rows` rows at first) running under `writer`:
/// SIGKILLs `w` once a part of the snapshot is durable, well before its end, restarts it,
/// stops the writer once the snapshot completed, and checks the end: the newest event per
/// key reproduces the table, and the snapshot resumed after its durable key.
pub(crate) fn kill_mid_snapshot_and_converge(w: &mut Worker, pg: &Postgres, data: &Path, writer: SqlWriter, rows: i64) -> Converged {
    eventually(Duration::from_secs(60), "durable incremental snapshot progress", || durable_incremental_key(data).unwrap_or(0) >= 1_000);
    w.kill9();
    let durable = durable_incremental_key(data).expect("the kill landed inside the incremental snapshot");
    assert!(durable < rows - 500, "the snapshot was nearly done at the kill ({durable})");
    let before_kill = consume(data, TOPIC).len();
    w.restart();

    // The snapshot completes: READs after the restart, and the stored offset (of the
    // writer's changes after it) no longer carries the incremental snapshot.
    eventually(Duration::from_secs(120), "the incremental snapshot to complete", || {
        stored_offset(data).is_some_and(|o| o.get("incremental_snapshot_collections").is_none())
            && consume(data, TOPIC)[before_kill..].iter().any(|r| op(r) == "r")
    });
    let transactions = writer.finish();
    pg.sql("INSERT INTO items (id, v, note) VALUES (-1, 0, 'end marker')");
    let mut records = Vec::new();
    eventually(Duration::from_secs(60), "the end marker", || {
        records = consume(data, TOPIC);
        records.iter().any(|r| op(r) == "c" && id(r) == -1)
    });

    // Every row of the table, and nothing else, at its current values.
    let expected = table_rows(pg);
    let got = applied(&records);
    let missing: Vec<_> = expected.keys().filter(|k| !got.contains_key(k)).take(10).collect();
    let extra: Vec<_> = got.keys().filter(|k| !expected.contains_key(k)).take(10).collect();
    let stale: Vec<_> = expected.iter().filter(|(k, v)| got.get(k).is_some_and(|g| g != *v)).take(10).collect();
    assert!(missing.is_empty() && extra.is_empty() && stale.is_empty(), "missing {missing:?}, resurrected {extra:?}, stale {stale:?}");

    let reads: Vec<&Json> = records.iter().filter(|r| op(r) == "r").collect();
    assert!(reads.iter().all(|r| r["value"]["source"]["snapshot"] == "incremental"), "a READ without source.snapshot=incremental");
    // Resumed, not restarted: keys durable before the kill were not read again.
    let mut reads_per_key: BTreeMap<i64, usize> = BTreeMap::new();
    for r in &reads {
        *reads_per_key.entry(id(r)).or_default() += 1;
    }
    let again: Vec<_> = reads_per_key.iter().filter(|(k, n)| **k <= durable && **n > 1).take(10).collect();
    assert!(again.is_empty(), "keys durable before the kill (up to {durable}) were read again: {again:?}");
    assert!(reads.len() < rows as usize + 200, "{} reads for {rows} rows", reads.len());
    // Rows the writer never touched came only from the snapshot.
    let changed: std::collections::BTreeSet<i64> = records.iter().filter(|r| op(r) != "r").map(id).collect();
    let untouched: Vec<i64> = expected.keys().copied().filter(|k| *k >= 1 && *k <= rows && !changed.contains(k)).collect();
    let unread: Vec<_> = untouched.iter().filter(|k| !reads_per_key.contains_key(k)).take(10).collect();
    assert!(untouched.len() > 500 && unread.is_empty(), "{} untouched rows; not read: {unread:?}", untouched.len());
    Converged { reads: reads.len(), durable, transactions, rows: expected.len() }
}

#[test]
fn postgres_incremental_snapshot_pause_resume_and_stop() {
    const ROWS: i64 = 5_000;
    let pg = Postgres::start();
    setup(&pg, ROWS);
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    slow_close(&pg);
    let _w = start_worker(dir.path(), &pg, "sluice_incr_stop", "10");
    let reads = || consume(&data, TOPIC).iter().filter(|r| op(r) == "r").count();

    signal(&pg, "go", "execute-snapshot", r#"{"data-collections": ["public\\.it.*"]}"#);
    eventually(Duration::from_secs(60), "the first chunk", || reads() > 0);
    signal(&pg, "pause", "pause-snapshot", "{}");
    std::thread::sleep(Duration::from_secs(2));
    let paused = reads();
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(reads(), paused, "rows were read while paused");
    assert!(paused < ROWS as usize, "the snapshot ended before the pause");

    signal(&pg, "resume", "resume-snapshot", "{}");
    eventually(Duration::from_secs(60), "progress after resume", || reads() > paused);
    signal(&pg, "stop", "stop-snapshot", r#"{"data-collections": ["public.items"], "type": "incremental"}"#);
    std::thread::sleep(Duration::from_secs(2));
    let stopped = reads();
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(reads(), stopped, "rows were read after stop-snapshot");
    assert!(stopped < ROWS as usize, "the snapshot ended before the stop ({stopped} reads)");
    pg.sql("INSERT INTO items (id, v, note) VALUES (-1, 0, 'end marker')");
    eventually(Duration::from_secs(30), "the end marker", || consume(&data, TOPIC).iter().any(|r| op(r) == "c" && id(r) == -1));
    wait_without_snapshot(&data, "an offset without the stopped snapshot");
}

#[test]
fn postgres_incremental_snapshot_additional_conditions_filter_the_rows_read() {
    let pg = Postgres::start();
    setup(&pg, 200);
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let _w = start_worker(dir.path(), &pg, "sluice_incr_cond", "10");
    signal(
        &pg,
        "filtered",
        "execute-snapshot",
        r#"{"data-collections": ["public.items"], "type": "incremental", "additional-conditions": [{"data-collection": "public.items", "filter": "id % 3 = 0"}]}"#,
    );
    eventually(Duration::from_secs(60), "the filtered snapshot", || consume(&data, TOPIC).iter().any(|r| op(r) == "r" && id(r) == 198));
    pg.sql("INSERT INTO items (id, v, note) VALUES (-1, 0, 'end marker')");
    let mut records = Vec::new();
    eventually(Duration::from_secs(30), "the end marker", || {
        records = consume(&data, TOPIC);
        records.iter().any(|r| op(r) == "c" && id(r) == -1)
    });
    let read: Vec<i64> = records.iter().filter(|r| op(r) == "r").map(id).collect();
    assert_eq!(read, (1..=66).map(|k| k * 3).collect::<Vec<_>>(), "rows read in key order, only those the filter accepts");
    wait_without_snapshot(&data, "an offset without the ended snapshot");
}

/// A table keyed by a `timestamptz`: the chunk keys in the offsets are in Debezium's form (a
/// Java-serialized `java.sql.Timestamp`), and after a SIGKILL the snapshot resumes from such a
/// key, reading Postgres back the instant it holds.
#[test]
fn an_incremental_snapshot_keyed_by_a_timestamp_resumes_from_debeziums_key_form() {
    const ROWS: usize = 3_000;
    let pg = Postgres::start();
    pg.sql(&format!(
        "CREATE TABLE dbz_signal (id varchar(64) PRIMARY KEY, type varchar(32) NOT NULL, data text);
         CREATE TABLE items (at timestamptz PRIMARY KEY, v int NOT NULL);
         INSERT INTO items SELECT timestamptz '2024-01-01 00:00:00+00' + g * interval '61.000001 seconds', g
           FROM generate_series(1, {ROWS}) g;"
    ));
    slow_close(&pg);
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let mut w = start_worker(dir.path(), &pg, "sluice_ts_key", "100");
    signal(&pg, "ts-1", "execute-snapshot", r#"{"data-collections": ["public.items"]}"#);
    let timestamp_class: String = "java.sql.Timestamp".bytes().map(|b| format!("{b:02x}")).collect();
    let reads = |data: &Path| consume(data, TOPIC).into_iter().filter(|r| op(r) == "r").collect::<Vec<_>>();
    eventually(Duration::from_secs(60), "durable progress keyed in Debezium's form", || {
        let key = stored_offset(&data).and_then(|o| o["incremental_snapshot_primary_key"].as_str().map(str::to_owned));
        key.is_some_and(|k| k.starts_with("aced0005") && k.contains(&timestamp_class)) && reads(&data).len() >= 500
    });
    w.kill9();
    let before = reads(&data).len();
    assert!(before < ROWS - 300, "the snapshot was nearly done at the kill ({before} reads)");
    w.restart();
    w.eventually(Duration::from_secs(120), "every row read", || {
        reads(&data).iter().map(|r| r["key"]["at"].as_str().unwrap().to_owned()).collect::<std::collections::BTreeSet<_>>().len() >= ROWS
    });
    // A change after the snapshot moves the stored offset past it.
    pg.sql("INSERT INTO items VALUES ('2030-01-01 00:00:00+00', -1)");
    w.eventually(Duration::from_secs(60), "an offset without the incremental snapshot", || {
        stored_offset(&data).is_some_and(|o| o.get("incremental_snapshot_collections").is_none())
    });
    let all = reads(&data);
    let keys: std::collections::BTreeSet<String> = all.iter().map(|r| r["key"]["at"].as_str().unwrap().to_owned()).collect();
    assert_eq!(keys.len(), ROWS, "every row read");
    // Resumed after the durable key: at most the interrupted chunk and what was in flight again.
    assert!(all.len() < ROWS + 300, "{} reads of {ROWS} rows: the snapshot started over", all.len());
    eprintln!("timestamp-keyed incremental snapshot: {before} reads before the kill, {} in all", all.len());
}
