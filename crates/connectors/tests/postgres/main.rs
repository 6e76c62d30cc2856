//! The Postgres source against a real PostgreSQL 15 started by `tests/services/postgres.sh`
//! (one cluster per test, on a free port in a temporary directory). The connector is driven
//! through its `Connector`/`SourceTask` API with an in-test offset store. These tests fail,
//! never skip, when the Postgres binaries are missing.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sluice_api::{
    ConnectError, OffsetReader, Props, SourceOffset, SourcePartition, SourceRecord, SourceTask, SourceTaskContext, Struct, Task, Value,
};
use sluice_connectors::postgres;
use tokio_util::sync::CancellationToken;

mod debezium_keys;
mod handling_modes;
mod messages;
mod parallel_snapshot;

struct Pg {
    dir: tempfile::TempDir,
    port: u16,
}

fn script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/services/postgres.sh")
}

impl Pg {
    fn start() -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let dir = tempfile::Builder::new().prefix("sluice-pg").tempdir_in("/tmp").unwrap();
        let out = Command::new("bash").arg(script()).arg("start").arg(dir.path()).arg(port.to_string()).output().expect("run postgres.sh");
        assert!(out.status.success(), "postgres.sh start failed: {}", String::from_utf8_lossy(&out.stderr));
        Self { dir, port }
    }

    async fn client(&self, db: &str) -> tokio_postgres::Client {
        let (client, conn) = tokio_postgres::Config::new()
            .host("127.0.0.1")
            .port(self.port)
            .user("postgres")
            .dbname(db)
            .connect(tokio_postgres::NoTls)
            .await
            .expect("connect to test postgres");
        tokio::spawn(conn);
        client
    }

    fn props(&self, extra: &[(&str, &str)]) -> Props {
        let port = self.port.to_string();
        let mut p: Props = [
            ("database.hostname", "127.0.0.1"),
            ("database.port", port.as_str()),
            ("database.user", "postgres"),
            ("database.password", ""),
            ("database.dbname", "postgres"),
            ("topic.prefix", "srv"),
            ("poll.interval.ms", "200"),
            ("status.update.interval.ms", "100"),
        ]
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
        p.extend(extra.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())));
        p
    }

    async fn confirmed_flush(&self, slot: &str) -> u64 {
        let c = self.client("postgres").await;
        let row = c
            .query_one("SELECT (confirmed_flush_lsn - '0/0')::bigint FROM pg_replication_slots WHERE slot_name = $1", &[&slot])
            .await
            .unwrap();
        row.get::<_, i64>(0) as u64
    }
}

impl Pg {
    /// A fast shutdown (`pg_ctl stop -m fast`, giving up after 30 s), run on a blocking
    /// thread so the caller can keep polling meanwhile; yields how long it took.
    fn stop_fast(&self) -> tokio::task::JoinHandle<Duration> {
        let dir = self.dir.path().to_owned();
        tokio::task::spawn_blocking(move || {
            let t = Instant::now();
            let out = Command::new("bash").arg(script()).arg("stop").arg(dir).arg("fast").env("PGCTLTIMEOUT", "30").output().unwrap();
            assert!(out.status.success(), "pg_ctl stop -m fast failed: {}", String::from_utf8_lossy(&out.stderr));
            t.elapsed()
        })
    }

    async fn current_wal_lsn(&self) -> u64 {
        let c = self.client("postgres").await;
        c.query_one("SELECT (pg_current_wal_lsn() - '0/0')::bigint", &[]).await.unwrap().get::<_, i64>(0) as u64
    }

    fn restart(&self) {
        let out = Command::new("bash").arg(script()).arg("start").arg(self.dir.path()).arg(self.port.to_string()).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
}

impl Drop for Pg {
    fn drop(&mut self) {
        let _ = Command::new("bash").arg(script()).arg("stop").arg(self.dir.path()).status();
    }
}

#[derive(Default)]
struct Offsets(Mutex<Option<SourceOffset>>);

impl OffsetReader for Offsets {
    fn offset(&self, _partition: &SourcePartition) -> Option<SourceOffset> {
        self.0.lock().unwrap().clone()
    }
}

async fn start_task(props: &Props, stored: Option<SourceOffset>) -> Result<Box<dyn SourceTask>, ConnectError> {
    let connector = (postgres::plugin().create)();
    let Task::Source(mut task) = connector.create_task() else { panic!("postgres is a source") };
    let ctx = SourceTaskContext {
        connector: "pg".into(),
        task_id: 0,
        props: props.clone(),
        offsets: Arc::new(Offsets(Mutex::new(stored))),
        shutdown: CancellationToken::new(),
        gauges: Default::default(),
    };
    task.start(ctx).await?;
    Ok(task)
}

/// Starts a task, retrying retriable failures for up to 10 s as the runtime would (a slot a
/// stopped task's session still holds is one).
async fn start_task_retrying(props: &Props, stored: Option<SourceOffset>) -> Box<dyn SourceTask> {
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        match start_task(props, stored.clone()).await {
            Ok(t) => return t,
            Err(e) if e.is_retriable() && Instant::now() < until => tokio::time::sleep(Duration::from_millis(100)).await,
            Err(e) => panic!("{e}"),
        }
    }
}

/// Polls once, as the runtime would with a log that makes every record durable at once:
/// the newest offset of the batch is committed right away.
async fn poll_committing(task: &mut Box<dyn SourceTask>, all: &mut Vec<SourceRecord>) -> Result<(), ConnectError> {
    let batch = task.poll().await?;
    if let Some(last) = batch.last() {
        task.commit(&[(partition(), last.source_offset.clone())]).await.unwrap();
    }
    all.extend(batch.into_iter().filter(|r| !r.is_offset_only()));
    Ok(())
}

/// One poll as the runtime writes it: an offset-only record (the position of an idle
/// server) writes nothing.
trait PollData {
    async fn poll_data(&mut self) -> Result<Vec<SourceRecord>, ConnectError>;
}

impl PollData for Box<dyn SourceTask> {
    async fn poll_data(&mut self) -> Result<Vec<SourceRecord>, ConnectError> {
        let mut batch = self.poll().await?;
        batch.retain(|r| !r.is_offset_only());
        Ok(batch)
    }
}

/// Polls until `done(all records so far)` or the timeout.
async fn drain(task: &mut Box<dyn SourceTask>, all: &mut Vec<SourceRecord>, timeout: Duration, done: impl Fn(&[SourceRecord]) -> bool) {
    let until = Instant::now() + timeout;
    while !done(all) {
        assert!(Instant::now() < until, "timed out after {} records", all.len());
        all.extend(task.poll_data().await.expect("poll"));
    }
}

fn envelope(r: &SourceRecord) -> &Struct {
    r.value.as_struct().expect("an envelope")
}

fn op(r: &SourceRecord) -> String {
    envelope(r).get("op").and_then(Value::as_str).unwrap().to_owned()
}

fn field<'a>(r: &'a SourceRecord, side: &str, name: &str) -> &'a Value {
    envelope(r).get(side).and_then(Value::as_struct).and_then(|s| s.get(name)).unwrap_or(&Value::Null)
}

/// `source.sequence` as its two LSNs (`[last commit, this change]`, either may be null).
fn sequence(r: &SourceRecord) -> Vec<Option<String>> {
    let s = envelope(r).get("source").and_then(Value::as_struct).and_then(|s| s.get("sequence")).cloned();
    let Some(Value::String(s)) = s else { panic!("no sequence: {s:?}") };
    serde_json::from_str(&s).unwrap()
}

fn partition() -> SourcePartition {
    let mut p = SourcePartition::new();
    p.insert("server".into(), serde_json::json!("srv"));
    p
}

fn data(records: &[SourceRecord]) -> Vec<&SourceRecord> {
    records.iter().filter(|r| !r.value.is_null()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshot_then_stream_with_concurrent_writes() {
    let pg = Pg::start();
    let db = pg.client("postgres").await;
    db.batch_execute("CREATE TABLE t (id int PRIMARY KEY, v int NOT NULL); INSERT INTO t SELECT g, 0 FROM generate_series(1, 300) g;")
        .await
        .unwrap();
    let props = pg.props(&[("slot.name", "s1"), ("snapshot.fetch.size", "50"), ("max.batch.size", "64")]);
    let mut task = start_task(&props, None).await.unwrap();

    // Writers run while the snapshot is read: each key's v only grows.
    let writer = {
        let w = pg.client("postgres").await;
        tokio::spawn(async move {
            for i in 0..150 {
                let id = 1 + (i * 7) % 300;
                w.batch_execute(&format!(
                    "BEGIN; UPDATE t SET v = v + 1 WHERE id = {id}; INSERT INTO t VALUES ({}, 0); DELETE FROM t WHERE id = {}; COMMIT;",
                    1000 + i,
                    300 - (i % 40)
                ))
                .await
                .unwrap();
            }
        })
    };
    let mut all = Vec::new();
    drain(&mut task, &mut all, Duration::from_secs(60), |a| a.iter().filter(|r| !r.value.is_null() && op(r) == "r").count() >= 1).await;
    writer.await.unwrap();
    let expected: BTreeMap<i32, i32> =
        db.query("SELECT id, v FROM t", &[]).await.unwrap().iter().map(|r| (r.get::<_, i32>(0), r.get::<_, i32>(1))).collect();

    // Apply the events until they reproduce the table.
    let apply = |records: &[SourceRecord]| {
        let mut state = BTreeMap::new();
        for r in data(records) {
            let id = |side| field(r, side, "id").as_i64().unwrap() as i32;
            match op(r).as_str() {
                "r" | "c" | "u" => {
                    state.insert(id("after"), field(r, "after", "v").as_i64().unwrap() as i32);
                }
                "d" => {
                    state.remove(&id("before"));
                }
                other => panic!("unexpected op {other}"),
            }
        }
        state
    };
    drain(&mut task, &mut all, Duration::from_secs(60), |a| apply(a) == expected).await;

    // Snapshot markers and per-key order.
    let snap: Vec<_> = data(&all).into_iter().filter(|r| op(r) == "r").collect();
    let marker = |r: &SourceRecord| {
        envelope(r).get("source").and_then(Value::as_struct).unwrap().get("snapshot").and_then(Value::as_str).unwrap().to_owned()
    };
    assert_eq!(marker(snap[0]), "first");
    assert_eq!(marker(snap[snap.len() - 1]), "last");
    assert!(snap[1..snap.len() - 1].iter().all(|r| marker(r) == "true"));
    assert_eq!(snap.last().unwrap().source_offset.get("last_snapshot_record"), Some(&serde_json::json!(true)));
    let first_stream = data(&all).iter().position(|r| op(r) != "r").unwrap();
    assert!(data(&all)[first_stream..].iter().all(|r| op(r) != "r"), "snapshot records come before streamed ones");
    let mut last_v: BTreeMap<i64, i64> = BTreeMap::new();
    for r in data(&all) {
        if op(r) == "d" {
            continue;
        }
        let id = field(r, "after", "id").as_i64().unwrap();
        let v = field(r, "after", "v").as_i64().unwrap();
        if let Some(prev) = last_v.insert(id, v) {
            assert!(v >= prev, "key {id} went back from {prev} to {v}");
        }
    }
    // Deletes are followed by tombstones with the same key.
    for (i, r) in all.iter().enumerate() {
        if !r.value.is_null() && op(r) == "d" {
            assert!(all[i + 1].value.is_null() && all[i + 1].key == r.key, "tombstone after delete");
        }
    }
    // Shape.
    let r = &all[0];
    assert_eq!(r.topic, "srv.public.t");
    assert_eq!(r.key_schema.as_ref().unwrap().name.as_deref(), Some("srv.public.t.Key"));
    assert_eq!(r.value_schema.as_ref().unwrap().name.as_deref(), Some("srv.public.t.Envelope"));
    assert_eq!(r.source_partition, partition());
    task.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn types_round_trip_in_snapshot_and_stream() {
    let pg = Pg::start();
    let db = pg.client("postgres").await;
    db.batch_execute(
        "CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy');
         CREATE TABLE ty (id int PRIMARY KEY, b bool, i2 int2, i8 int8, f4 float4, f8 float8, n numeric(10,3), nv numeric,
           t text, vc varchar(10), by bytea, u uuid, j jsonb, d date, tm time, tm3 time(3), ts timestamp, tstz timestamptz,
           m mood, arr int4[], tarr text[], big text);
         ALTER TABLE ty ALTER COLUMN big SET STORAGE EXTERNAL;",
    )
    .await
    .unwrap();
    let row = "true, -5, 9000000000, 1.5, 2.25, -12.345, 3.14159, 'héllo', 'abc', '\\x00ff', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11',
               '{\"k\": [1, 2]}', '2024-02-29', '13:14:15.123456', '00:00:01.5', '2024-02-29 01:02:03.000004',
               '2024-02-29 23:30:00.12+02', 'happy', '{1,NULL,3}', '{\"a b\",c}', repeat('x', 5000)";
    db.batch_execute(&format!("INSERT INTO ty VALUES (1, {row})")).await.unwrap();
    let props = pg.props(&[("slot.name", "s2")]);
    let mut task = start_task(&props, None).await.unwrap();
    let mut all = Vec::new();
    drain(&mut task, &mut all, Duration::from_secs(30), |a| !a.is_empty()).await;
    db.batch_execute(&format!("INSERT INTO ty VALUES (2, {row}); UPDATE ty SET i2 = 6 WHERE id = 2;")).await.unwrap();
    drain(&mut task, &mut all, Duration::from_secs(30), |a| a.len() >= 3).await;

    let check = |r: &SourceRecord| {
        let f = |n: &str| field(r, "after", n).clone();
        assert_eq!(f("b"), Value::Boolean(true));
        assert_eq!(f("i2"), Value::Int16(if op(r) == "u" { 6 } else { -5 }));
        assert_eq!(f("i8"), Value::Int64(9_000_000_000));
        assert_eq!(f("f4"), Value::Float32(1.5));
        assert_eq!(f("f8"), Value::Float64(2.25));
        // -12.345 at scale 3 = -12345 = 0xCFC7
        assert_eq!(f("n"), Value::Bytes(vec![0xcf, 0xc7]));
        let nv = f("nv");
        let nv = nv.as_struct().unwrap();
        assert_eq!(nv.get("scale"), Some(&Value::Int32(5)));
        assert_eq!(nv.get("value"), Some(&Value::Bytes(vec![0x04, 0xcb, 0x2f])));
        assert_eq!(f("t"), Value::String("héllo".into()));
        assert_eq!(f("vc"), Value::String("abc".into()));
        assert_eq!(f("by"), Value::Bytes(vec![0, 255]));
        assert_eq!(f("u"), Value::String("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11".into()));
        assert_eq!(f("j"), Value::String("{\"k\": [1, 2]}".into()));
        assert_eq!(f("d"), Value::Int32(19782));
        assert_eq!(f("tm"), Value::Int64(((13 * 60 + 14) * 60 + 15) * 1_000_000 + 123_456));
        assert_eq!(f("tm3"), Value::Int32(1500));
        assert_eq!(f("ts"), Value::Int64(19782 * 86_400_000_000 + 3_723_000_004));
        assert_eq!(f("tstz"), Value::String("2024-02-29T21:30:00.120000Z".into()), "six fraction digits: the column's precision");
        assert_eq!(f("m"), Value::String("happy".into()));
        assert_eq!(f("arr"), Value::Array(vec![Value::Int32(1), Value::Null, Value::Int32(3)]));
        assert_eq!(f("tarr"), Value::Array(vec![Value::String("a b".into()), Value::String("c".into())]));
    };
    let ops: Vec<String> = all.iter().map(op).collect();
    assert_eq!(ops, vec!["r", "c", "u"]);
    for r in &all {
        check(r);
    }
    // Unchanged TOAST in the update is Debezium's placeholder; other values are real.
    assert_eq!(field(&all[0], "after", "big"), &Value::String("x".repeat(5000)));
    assert_eq!(field(&all[2], "after", "big"), &Value::String("__debezium_unavailable_value".into()));
    // REPLICA IDENTITY DEFAULT: an update without a key change has no before.
    assert_eq!(envelope(&all[2]).get("before"), Some(&Value::Null));
    // source.sequence: no commit seen yet after a fresh start, as Debezium ([null,"<lsn>"]).
    let first = sequence(&all[1]);
    assert_eq!(first[0], None, "{first:?}");
    assert_eq!(first[1].as_deref().map(|l| Value::Int64(l.parse().unwrap())), envelope(&all[1]).get("source").and_then(Value::as_struct).and_then(|s| s.get("lsn")).cloned());

    // Schemas carry Debezium's semantic names.
    let after = all[0].value_schema.as_ref().unwrap().field("after").unwrap().schema.clone();
    let name = |n: &str| after.field(n).unwrap().schema.name.clone();
    assert_eq!(name("u").as_deref(), Some("io.debezium.data.Uuid"));
    assert_eq!(name("j").as_deref(), Some("io.debezium.data.Json"));
    assert_eq!(name("d").as_deref(), Some("io.debezium.time.Date"));
    assert_eq!(name("tm").as_deref(), Some("io.debezium.time.MicroTime"));
    assert_eq!(name("tm3").as_deref(), Some("io.debezium.time.Time"));
    assert_eq!(name("ts").as_deref(), Some("io.debezium.time.MicroTimestamp"));
    assert_eq!(name("tstz").as_deref(), Some("io.debezium.time.ZonedTimestamp"));
    assert_eq!(name("m").as_deref(), Some("io.debezium.data.Enum"));
    assert_eq!(name("n").as_deref(), Some("org.apache.kafka.connect.data.Decimal"));
    assert_eq!(after.field("n").unwrap().schema.parameter("scale"), Some("3"));
    assert_eq!(name("nv").as_deref(), Some("io.debezium.data.VariableScaleDecimal"));
    assert!(!after.field("id").unwrap().schema.optional && after.field("t").unwrap().schema.optional);
    task.stop().await.unwrap();
}

/// Every special value Postgres accepts (NaN, ±infinity, BC, past 9999, 24:00, empty arrays
/// and NULL elements) goes through snapshot and stream in every decimal and time mode, as
/// Debezium 3.6.3 writes it; none fails the task.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn special_values_never_stop_the_task_in_any_mode() {
    let pg = Pg::start();
    let db = pg.client("postgres").await;
    db.batch_execute(
        "CREATE TABLE sp (id int PRIMARY KEY, nv numeric, n numeric(10,2), f4 real, f8 float8, d date, ts timestamp, ts3 timestamp(3),
           tstz timestamptz, tstz3 timestamptz(3), tstz0 timestamptz(0), tm time, tmz timetz, darr date[], iarr int[]);",
    )
    .await
    .unwrap();
    let rows = [
        "'NaN', 'NaN', 'NaN', 'Infinity', 'infinity', 'infinity', 'infinity', 'infinity', 'infinity', 'infinity', '24:00:00', '24:00:00+00', '{infinity,NULL,-infinity}', '{}'",
        "'Infinity', 'NaN', '-Infinity', '-Infinity', '-infinity', '-infinity', '-infinity', '-infinity', '-infinity', '-infinity', '00:00:00', '12:00:00+05:30', '{}', '{NULL}'",
        "'3.14159265358979323846264338327950288419716939937510', '1.50', 1.5, 2.5, '0044-03-15 BC', '0044-03-15 12:00:00 BC', '10000-01-01 00:00:00', '0044-03-15 12:00:00+00 BC', '12345-06-07 08:09:10.5+00', '1970-01-01 00:00:00.6+00', '23:59:59.999999', '00:00:00+00', '{10000-01-01}', '{1,NULL,3}'",
    ];
    for (i, row) in rows.iter().enumerate() {
        db.batch_execute(&format!("INSERT INTO sp VALUES ({}, {row})", i + 1)).await.unwrap();
    }
    let modes: [&[(&str, &str)]; 5] = [
        &[],
        &[("decimal.handling.mode", "string")],
        &[("decimal.handling.mode", "double")],
        &[("time.precision.mode", "connect")],
        &[("time.precision.mode", "adaptive_time_microseconds")],
    ];
    for (m, extra) in modes.iter().enumerate() {
        let slot = format!("sp{m}");
        let mut keys = vec![("slot.name", slot.as_str()), ("table.include.list", "public.sp")];
        keys.extend_from_slice(extra);
        let mut task = start_task(&pg.props(&keys), None).await.unwrap();
        let mut all = Vec::new();
        drain(&mut task, &mut all, Duration::from_secs(30), |a| data(a).len() >= 3).await;
        let offset = 10 * (m as i32 + 1);
        for (i, row) in rows.iter().enumerate() {
            db.batch_execute(&format!("INSERT INTO sp VALUES ({}, {row})", offset + i as i32 + 1)).await.unwrap();
        }
        drain(&mut task, &mut all, Duration::from_secs(30), |a| data(a).len() >= 6).await;
        task.stop().await.unwrap();
        db.batch_execute("DELETE FROM sp WHERE id > 3").await.unwrap();
        let records = data(&all);
        assert_eq!(records.iter().map(|r| op(r)).collect::<String>(), "rrrccc", "mode {extra:?}");
        for (i, r) in records.iter().enumerate() {
            let f = |n: &str| field(r, "after", n).clone();
            let row = i % 3;
            let decimal = extra.first().map_or("precise", |(k, v)| if *k == "decimal.handling.mode" { *v } else { "precise" });
            let time = extra.first().map_or("adaptive", |(k, v)| if *k == "time.precision.mode" { *v } else { "adaptive" });
            let what = format!("mode {extra:?}, row {}, {}", row + 1, op(r));
            // numeric
            match (decimal, row) {
                ("precise", 0 | 1) => {
                    assert_eq!(f("nv"), Value::Null, "{what}");
                    assert_eq!(f("n"), Value::Null, "{what}");
                }
                ("precise", _) => {
                    assert_eq!(f("nv").as_struct().unwrap().get("scale"), Some(&Value::Int32(49)), "{what}: trailing zero stripped");
                    assert_eq!(f("n"), Value::Bytes(vec![0x00, 0x96]), "{what}");
                }
                ("string", _) => {
                    let want = ["NAN", "POSITIVE_INFINITY", "3.14159265358979323846264338327950288419716939937510"][row];
                    assert_eq!(f("nv"), Value::String(want.into()), "{what}");
                }
                _ => {
                    let Value::Float64(v) = f("nv") else { panic!("{what}: {:?}", f("nv")) };
                    assert!([v.is_nan(), v == f64::INFINITY, (v - std::f64::consts::PI).abs() < 1e-15][row], "{what}: {v}");
                }
            }
            // floats keep NaN and infinities
            let Value::Float64(f8) = f("f8") else { panic!("{what}") };
            assert_eq!(f8.to_string(), ["inf", "-inf", "2.5"][row], "{what}");
            // dates and times
            let connect = time == "connect";
            let d = [-2_147_472_692, -2_147_472_691, -735_160][row];
            assert_eq!(f("d"), Value::Int32(d), "{what}");
            let ts_micros: i64 = [9_223_372_036_825_200_000, -9_223_372_036_832_400_000, -63_517_780_800_000_000][row];
            let ts = if connect { ts_micros.div_euclid(1000) } else { ts_micros };
            assert_eq!(f("ts"), Value::Int64(ts), "{what}");
            let ts3 = [9_223_372_036_825_200, -9_223_372_036_832_400, 253_402_300_800_000][row];
            assert_eq!(f("ts3"), Value::Int64(ts3), "{what}");
            let tstz = ["infinity", "-infinity", "-0043-03-15T12:00:00.000000Z"][row];
            assert_eq!(f("tstz"), Value::String(tstz.into()), "{what}");
            let tstz3 = ["infinity", "-infinity", "+12345-06-07T08:09:10.500Z"][row];
            assert_eq!(f("tstz3"), Value::String(tstz3.into()), "{what}");
            let tstz0 = ["infinity", "-infinity", "1970-01-01T00:00:01Z"][row];
            assert_eq!(f("tstz0"), Value::String(tstz0.into()), "{what}: timestamptz(0) rounds to whole seconds");
            let tm_micros = [86_400_000_000, 0, 86_399_999_999][row];
            let tm = if connect { Value::Int32((tm_micros / 1000) as i32) } else { Value::Int64(tm_micros) };
            assert_eq!(f("tm"), tm, "{what}");
            assert_eq!(f("tmz"), Value::String(["00:00:00Z", "06:30:00Z", "00:00:00Z"][row].into()), "{what}");
            let darr = [
                vec![Value::Int32(-2_147_472_692), Value::Null, Value::Int32(-2_147_472_691)],
                vec![],
                vec![Value::Int32(2_932_897)],
            ];
            assert_eq!(f("darr"), Value::Array(darr[row].clone()), "{what}");
            let iarr = [vec![], vec![Value::Null], vec![Value::Int32(1), Value::Null, Value::Int32(3)]];
            assert_eq!(f("iarr"), Value::Array(iarr[row].clone()), "{what}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn table_without_primary_key_has_null_keys_and_ddl_shows_in_schema() {
    let pg = Pg::start();
    let db = pg.client("postgres").await;
    db.batch_execute("CREATE TABLE nopk (a int, b text)").await.unwrap();
    let props = pg.props(&[("slot.name", "s3"), ("snapshot.mode", "no_data")]);
    let mut task = start_task(&props, None).await.unwrap();
    db.batch_execute("INSERT INTO nopk VALUES (1, 'x'); ALTER TABLE nopk ADD COLUMN c int; INSERT INTO nopk VALUES (2, 'y', 3);")
        .await
        .unwrap();
    let mut all = Vec::new();
    drain(&mut task, &mut all, Duration::from_secs(30), |a| a.len() >= 2).await;
    assert!(all.iter().all(|r| r.key.is_null() && r.key_schema.is_none()));
    let after = |r: &SourceRecord| r.value_schema.as_ref().unwrap().field("after").unwrap().schema.fields.len();
    assert_eq!((after(&all[0]), after(&all[1])), (2, 3), "the new column shows up after the DDL");
    assert_eq!(field(&all[1], "after", "c"), &Value::Int32(3));
    task.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_from_committed_offset_continues_exactly_after_it_and_confirms_the_lsn() {
    let pg = Pg::start();
    let db = pg.client("postgres").await;
    db.batch_execute("CREATE TABLE r (id int PRIMARY KEY)").await.unwrap();
    // One record per batch, so that every record carries its position (a batch's last does).
    let props = pg.props(&[("slot.name", "s4"), ("snapshot.mode", "no_data"), ("max.batch.size", "1")]);
    let mut task = start_task(&props, None).await.unwrap();
    for t in 0..10 {
        // Multi-row inserts share WAL positions: resuming needs more than the LSN.
        db.batch_execute(&format!("COPY r FROM PROGRAM 'seq {} {}'", t * 10 + 1, t * 10 + 10)).await.unwrap();
    }
    let mut all = Vec::new();
    drain(&mut task, &mut all, Duration::from_secs(30), |a| a.len() >= 100).await;
    let ids: Vec<i64> = all.iter().map(|r| field(r, "after", "id").as_i64().unwrap()).collect();
    assert_eq!(ids, (1..=100).collect::<Vec<_>>());
    // source.sequence names the newest commit before each change: none yet after a fresh
    // start, then the first transaction's.
    assert_eq!(sequence(&all[0])[0], None);
    assert_eq!(sequence(&all[10])[0], Some(all[0].source_offset["lsn_commit"].as_u64().unwrap().to_string()));

    // The runtime made records up to #35 (mid-transaction) durable.
    let committed = all[34].source_offset.clone();
    let before = pg.confirmed_flush("s4").await;
    task.commit(&[(partition(), committed.clone())]).await.unwrap();
    let want = committed["lsn_commit"].as_u64().unwrap();
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        let now = pg.confirmed_flush("s4").await;
        if now == want {
            break;
        }
        assert!(Instant::now() < until, "confirmed_flush_lsn stayed at {now}, want {want} (was {before})");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(want > before);
    // An older offset never moves it back.
    task.commit(&[(partition(), all[3].source_offset.clone())]).await.unwrap();
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(pg.confirmed_flush("s4").await, want);
    task.stop().await.unwrap();

    db.batch_execute("INSERT INTO r VALUES (101)").await.unwrap();
    let mut task = start_task(&props, Some(committed)).await.unwrap();
    let mut again = Vec::new();
    drain(&mut task, &mut again, Duration::from_secs(30), |a| a.len() >= 66).await;
    let ids: Vec<i64> = again.iter().map(|r| field(r, "after", "id").as_i64().unwrap()).collect();
    assert_eq!(ids, (36..=101).collect::<Vec<_>>(), "continues exactly after the committed record");
    // Resumed, the sequence starts from the stored offset's commit, as Debezium's.
    assert_eq!(sequence(&again[0])[0], Some(want.to_string()));
    task.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_slot_fails_loudly_and_a_slot_ahead_is_followed() {
    let pg = Pg::start();
    let db = pg.client("postgres").await;
    db.batch_execute("CREATE TABLE b (id int PRIMARY KEY)").await.unwrap();
    // One record per batch: each record carries its position.
    let props = pg.props(&[("slot.name", "s5"), ("snapshot.mode", "no_data"), ("max.batch.size", "1")]);
    let mut task = start_task(&props, None).await.unwrap();
    // Two transactions (one simple query with two statements would be one).
    db.batch_execute("INSERT INTO b VALUES (1)").await.unwrap();
    db.batch_execute("INSERT INTO b VALUES (2)").await.unwrap();
    let mut all = Vec::new();
    drain(&mut task, &mut all, Duration::from_secs(30), |a| a.len() >= 2).await;
    task.commit(&[(partition(), all[1].source_offset.clone())]).await.unwrap();
    let want = all[1].source_offset["lsn_commit"].as_u64().unwrap();
    let until = Instant::now() + Duration::from_secs(10);
    while pg.confirmed_flush("s5").await < want {
        assert!(Instant::now() < until, "slot never confirmed {want}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    task.stop().await.unwrap();

    // A stored offset behind the slot (the slot follows idle keepalives, see the next
    // test): streaming starts from the slot.
    let mut task = start_task(&props, Some(all[0].source_offset.clone())).await.expect("a slot ahead of the offset is followed");
    task.stop().await.unwrap();

    // The slot is gone: loud too.
    db.batch_execute("SELECT pg_drop_replication_slot('s5')").await.unwrap();
    let err = start_task(&props, Some(all[1].source_offset.clone())).await.err().expect("start must fail");
    assert!(err.to_string().contains("does not exist") && err.to_string().contains("To recover"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_configurations_name_their_cause() {
    let pg = Pg::start();
    let db = pg.client("postgres").await;
    db.batch_execute("CREATE ROLE locked LOGIN REPLICATION PASSWORD 'right'; CREATE TABLE present (id int PRIMARY KEY);").await.unwrap();
    // Password authentication for that role only (the rest of the cluster trusts loopback).
    let hba = pg.dir.path().join("data/pg_hba.conf");
    let old = std::fs::read_to_string(&hba).unwrap();
    std::fs::write(&hba, format!("host all locked 127.0.0.1/32 scram-sha-256\n{old}")).unwrap();
    db.batch_execute("SELECT pg_reload_conf()").await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;

    let connector = (postgres::plugin().create)();
    let errors = |extra: &[(&str, &str)]| {
        let props = pg.props(extra);
        let connector = &connector;
        async move { connector.validate_extra(&props).await }
    };
    let has = |errs: &[(String, String)], key: &str, text: &str| errs.iter().any(|(k, m)| k == key && m.contains(text));

    let e = errors(&[("database.user", "locked"), ("database.password", "wrong")]).await;
    assert!(has(&e, "database.password", "password authentication failed"), "{e:?}");
    assert!(errors(&[("database.user", "locked"), ("database.password", "right")]).await.is_empty());
    let e = errors(&[("database.dbname", "nope")]).await;
    assert!(has(&e, "database.dbname", "\"nope\" does not exist"), "{e:?}");
    let e = errors(&[("table.include.list", "public.present,public.absent")]).await;
    assert!(has(&e, "table.include.list", "public.absent") && !has(&e, "table.include.list", "public.present"), "{e:?}");
    let e = errors(&[("plugin.name", "decoderbufs")]).await;
    assert!(has(&e, "plugin.name", "decoderbufs is not supported yet"), "{e:?}");
    let e = errors(&[("column.propagate.source.type", "public.present.id")]).await;
    assert!(has(&e, "column.propagate.source.type", "not supported yet"), "{e:?}");

    // The same causes stop a task at start.
    let err = start_task(&pg.props(&[("plugin.name", "decoderbufs")]), None).await.err().unwrap();
    assert!(err.to_string().contains("plugin.name") && err.to_string().contains("pgoutput"), "{err}");
    let err = start_task(&pg.props(&[("database.user", "locked"), ("database.password", "wrong")]), None).await.err().unwrap();
    assert!(err.to_string().contains("password authentication failed"), "{err}");
    let err = start_task(&pg.props(&[("database.dbname", "nope")]), None).await.err().unwrap();
    assert!(err.to_string().contains("does not exist"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn database_restart_is_retriable_and_nothing_is_lost() {
    let pg = Pg::start();
    let db = pg.client("postgres").await;
    db.batch_execute("CREATE TABLE k (id int PRIMARY KEY)").await.unwrap();
    let props = pg.props(&[("slot.name", "s6"), ("snapshot.mode", "no_data")]);
    let mut task = start_task(&props, None).await.unwrap();
    db.batch_execute("INSERT INTO k VALUES (1)").await.unwrap();
    let mut all = Vec::new();
    while all.is_empty() {
        poll_committing(&mut task, &mut all).await.unwrap();
    }

    // A fast shutdown while the stream is connected and idle: Postgres waits until the
    // walsender's sent position is confirmed, which the connector does once its records
    // are durable.
    let stopping = pg.stop_fast();
    let until = Instant::now() + Duration::from_secs(20);
    let err = loop {
        assert!(Instant::now() < until, "poll never noticed the server going away");
        match poll_committing(&mut task, &mut all).await {
            Ok(()) => {}
            Err(e) => break e,
        }
    };
    assert!(err.is_retriable(), "{err}");
    let took = stopping.await.unwrap();
    assert!(took < Duration::from_secs(5), "a fast shutdown took {took:?} while the connector was connected");
    pg.restart();
    let db = pg.client("postgres").await;
    for i in 2..=20 {
        db.batch_execute(&format!("INSERT INTO k VALUES ({i})")).await.unwrap();
    }
    let until = Instant::now() + Duration::from_secs(60);
    while all.len() < 20 {
        assert!(Instant::now() < until, "only {} records after the restart", all.len());
        match poll_committing(&mut task, &mut all).await {
            Ok(()) => {}
            Err(e) => {
                assert!(e.is_retriable(), "{e}");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    }
    let ids: Vec<i64> = all.iter().map(|r| field(r, "after", "id").as_i64().unwrap()).collect();
    assert_eq!(ids, (1..=20).collect::<Vec<_>>(), "no loss, no duplicate");
    task.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_queue_does_not_trip_wal_sender_timeout() {
    let pg = Pg::start();
    let db = pg.client("postgres").await;
    db.batch_execute("ALTER SYSTEM SET wal_sender_timeout = '2s'").await.unwrap();
    db.batch_execute("SELECT pg_reload_conf(); CREATE TABLE q (id int PRIMARY KEY);").await.unwrap();
    let props = pg.props(&[
        ("slot.name", "s7"),
        ("snapshot.mode", "no_data"),
        ("max.queue.size", "5"),
        ("max.batch.size", "10"),
        ("status.update.interval.ms", "500"),
    ]);
    let mut task = start_task(&props, None).await.unwrap();
    for t in 0..50 {
        db.batch_execute(&format!("INSERT INTO q SELECT generate_series({}, {})", t * 20 + 1, t * 20 + 20)).await.unwrap();
    }
    let mut all = Vec::new();
    drain(&mut task, &mut all, Duration::from_secs(30), |a| !a.is_empty()).await;
    // The runtime is slow: nothing is polled for three times wal_sender_timeout.
    tokio::time::sleep(Duration::from_secs(6)).await;
    drain(&mut task, &mut all, Duration::from_secs(30), |a| a.len() >= 1000).await;
    let ids: Vec<i64> = all.iter().map(|r| field(r, "after", "id").as_i64().unwrap()).collect();
    assert_eq!(ids, (1..=1000).collect::<Vec<_>>());
    let log = std::fs::read_to_string(pg.dir.path().join("server.log")).unwrap();
    assert!(!log.contains("replication timeout"), "the walsender timed out:\n{log}");
    task.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_slot_follows_the_server_but_never_passes_a_change_not_yet_durable() {
    let pg = Pg::start();
    let db = pg.client("postgres").await;
    db.batch_execute("CREATE TABLE watched (id int PRIMARY KEY); CREATE TABLE other (id int PRIMARY KEY, pad text);").await.unwrap();
    let props = pg.props(&[("slot.name", "s8"), ("snapshot.mode", "no_data"), ("table.include.list", "public.watched")]);
    let mut task = start_task(&props, None).await.unwrap();
    let mut all = Vec::new();

    // Poll (committing everything) until the slot reaches `target`.
    async fn follow(pg: &Pg, task: &mut Box<dyn SourceTask>, all: &mut Vec<SourceRecord>, target: u64, what: &str) {
        let until = Instant::now() + Duration::from_secs(15);
        while pg.confirmed_flush("s8").await < target {
            assert!(Instant::now() < until, "{what}: confirmed_flush_lsn {} never reached {target}", pg.confirmed_flush("s8").await);
            poll_committing(task, all).await.unwrap();
        }
    }

    // Writes only to a table outside the publication: no record, yet the slot follows.
    db.batch_execute("INSERT INTO other SELECT g, repeat('x', 200) FROM generate_series(1, 5000) g").await.unwrap();
    let end = pg.current_wal_lsn().await;
    follow(&pg, &mut task, &mut all, end, "idle database").await;
    assert!(all.is_empty(), "{all:?}");

    // A change is decoded and handed out but not durable yet; WAL keeps growing after it.
    db.batch_execute("INSERT INTO watched VALUES (1)").await.unwrap();
    let before = pg.confirmed_flush("s8").await;
    let mut pending = Vec::new();
    while pending.is_empty() {
        pending.extend(task.poll_data().await.unwrap());
    }
    // Postgres resends every transaction committing at or after the confirmed position.
    let commit_lsn = pending[0].source_offset["lsn_commit"].as_u64().unwrap();
    db.batch_execute("INSERT INTO other SELECT g, repeat('y', 200) FROM generate_series(5001, 10000) g").await.unwrap();
    let end = pg.current_wal_lsn().await;
    let until = Instant::now() + Duration::from_secs(3);
    while Instant::now() < until {
        pending.extend(task.poll_data().await.unwrap());
    }
    let now = pg.confirmed_flush("s8").await;
    assert!(end > commit_lsn);
    assert!(now <= commit_lsn, "confirmed {now} past the transaction committing at {commit_lsn}, which is not durable (was {before})");
    assert_eq!(pending.len(), 1);

    // Durable now: the slot moves past it, to the server's WAL end.
    task.commit(&[(partition(), pending[0].source_offset.clone())]).await.unwrap();
    follow(&pg, &mut task, &mut all, end, "after the commit").await;

    // A restart from the stored offset, now behind the slot, streams from the slot: no
    // error, no repeat of the durable change, the next change arrives.
    task.stop().await.unwrap();
    db.batch_execute("INSERT INTO watched VALUES (2)").await.unwrap();
    let mut task = start_task(&props, Some(pending[0].source_offset.clone())).await.unwrap();
    let mut again = Vec::new();
    drain(&mut task, &mut again, Duration::from_secs(30), |a| !a.is_empty()).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    again.extend(task.poll_data().await.unwrap());
    let ids: Vec<i64> = again.iter().map(|r| field(r, "after", "id").as_i64().unwrap()).collect();
    assert_eq!(ids, vec![2]);
    task.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupted_snapshot_resumes_after_its_durable_key_and_the_stream_fills_in_the_rest() {
    let pg = Pg::start();
    let db = pg.client("postgres").await;
    db.batch_execute(
        "CREATE TABLE t (id int PRIMARY KEY, v int NOT NULL); INSERT INTO t SELECT g, 0 FROM generate_series(1, 1000) g;
         CREATE TABLE z_nopk (a int); INSERT INTO z_nopk SELECT generate_series(1, 30);",
    )
    .await
    .unwrap();
    let props = pg.props(&[("slot.name", "s9"), ("snapshot.fetch.size", "50"), ("max.batch.size", "64")]);
    let snapshot_key = |r: &SourceRecord| r.source_offset.get("snapshot_key").cloned();
    let id = |r: &SourceRecord| field(r, if op(r) == "d" { "before" } else { "after" }, "id").as_i64().unwrap();
    let marker = |r: &SourceRecord| {
        envelope(r).get("source").and_then(Value::as_struct).unwrap().get("snapshot").and_then(Value::as_str).unwrap().to_owned()
    };

    // Run 1: killed after 300 records; the runtime made the first 300 durable.
    let mut task = start_task(&props, None).await.unwrap();
    let mut first = Vec::new();
    drain(&mut task, &mut first, Duration::from_secs(30), |a| a.len() >= 300).await;
    let committed = first[299].source_offset.clone();
    let k = id(&first[299]);
    assert_eq!(snapshot_key(&first[299]), Some(serde_json::json!([k.to_string()])));
    assert_eq!(committed["snapshot_table"], serde_json::json!(["public", "t"]));
    assert_eq!(first[..300].iter().map(id).collect::<Vec<_>>(), (1..=300).collect::<Vec<_>>(), "primary-key order");
    drop(task); // no stop: as if the worker died

    // Meanwhile, on both sides of the durable key.
    db.batch_execute(&format!(
        "UPDATE t SET v = v + 1 WHERE id IN (5, {above}); DELETE FROM t WHERE id = {gone}; INSERT INTO t VALUES (5000, 7); INSERT INTO z_nopk VALUES (99);",
        above = k + 50,
        gone = k + 60
    ))
    .await
    .unwrap();
    let expected: BTreeMap<i64, i64> = db
        .query("SELECT id, v FROM t", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| (i64::from(r.get::<_, i32>(0)), i64::from(r.get::<_, i32>(1))))
        .collect();

    // Run 2 resumes after key k on a new snapshot, then streams from the consistent point.
    // (The dropped run's sessions may hold the slot for a moment.)
    let mut task = start_task_retrying(&props, Some(committed.clone())).await;
    let apply = |records: &[SourceRecord]| {
        let mut state = BTreeMap::new();
        for r in data(records).into_iter().filter(|r| r.topic == "srv.public.t") {
            match op(r).as_str() {
                "r" | "c" | "u" => {
                    state.insert(id(r), field(r, "after", "v").as_i64().unwrap());
                }
                "d" => {
                    state.remove(&id(r));
                }
                other => panic!("unexpected op {other}"),
            }
        }
        state
    };
    let mut second = Vec::new();
    drain(&mut task, &mut second, Duration::from_secs(60), |a| {
        let mut all = first[..300].to_vec();
        all.extend(a.iter().cloned());
        apply(&all) == expected && a.iter().any(|r| r.source_offset.get("last_snapshot_record") == Some(&serde_json::json!(true)))
    })
    .await;
    task.stop().await.unwrap();
    let reads: Vec<&SourceRecord> = data(&second).into_iter().filter(|r| op(r) == "r").collect();
    let t_reads: Vec<i64> = reads.iter().filter(|r| r.topic == "srv.public.t").map(|r| id(r)).collect();
    let mut want: Vec<i64> = expected.keys().copied().filter(|i| *i > k).collect();
    want.sort_unstable();
    assert_eq!(t_reads, want, "the snapshot continues after key {k}, at the newer state, and reads no key twice");
    assert_eq!(reads.iter().filter(|r| r.topic == "srv.public.z_nopk").count(), 31, "the next table is read whole");
    assert_eq!(marker(reads[0]), "true", "a resumed snapshot has no second 'first' record");
    assert_eq!(marker(reads[reads.len() - 1]), "last");
    // The stream from the consistent point brings the changes on both sides of k; the ones
    // above k repeat what the newer snapshot already showed (same final state).
    let streamed: Vec<(String, i64)> =
        data(&second).into_iter().filter(|r| op(r) != "r" && r.topic == "srv.public.t").map(|r| (op(r), id(r))).collect();
    assert_eq!(streamed, vec![("u".into(), 5), ("u".into(), k + 50), ("d".into(), k + 60), ("c".into(), 5000)]);
    let first_streamed = data(&second).iter().position(|r| op(r) != "r").unwrap();
    assert!(data(&second)[first_streamed..].iter().all(|r| op(r) != "r"));

    // Killed inside the table without a primary key: that table starts over, the one
    // before it is not read again.
    let inside_nopk = reads.iter().filter(|r| r.topic == "srv.public.z_nopk").nth(10).unwrap().source_offset.clone();
    assert_eq!(inside_nopk["snapshot_key"], serde_json::Value::Null);
    let mut task = start_task(&props, Some(inside_nopk)).await.unwrap();
    let mut third = Vec::new();
    drain(&mut task, &mut third, Duration::from_secs(30), |a| {
        a.iter().any(|r| r.source_offset.get("last_snapshot_record") == Some(&serde_json::json!(true)))
    })
    .await;
    task.stop().await.unwrap();
    let topics: Vec<&str> = data(&third).into_iter().filter(|r| op(r) == "r").map(|r| r.topic.as_str()).collect();
    assert_eq!(topics, vec!["srv.public.z_nopk"; 31]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interval_money_bits_and_hstore_round_trip_in_snapshot_and_stream() {
    let pg = Pg::start();
    let db = pg.client("postgres").await;
    db.batch_execute(
        "CREATE EXTENSION hstore;
         CREATE TABLE odd (id int PRIMARY KEY, iv interval, m money, b1 bit(1), b10 bit(10), vb varbit(16), h hstore);",
    )
    .await
    .unwrap();
    let row = "'1 day 01:00:00.5', '-1234.56', B'1', B'1000000001', B'101', '\"a\"=>\"1\", \"b\"=>NULL'";
    db.batch_execute(&format!("INSERT INTO odd VALUES (1, {row})")).await.unwrap();
    let props = pg.props(&[("slot.name", "s10")]);
    let mut task = start_task(&props, None).await.unwrap();
    let mut all = Vec::new();
    drain(&mut task, &mut all, Duration::from_secs(30), |a| !a.is_empty()).await;
    db.batch_execute(&format!("INSERT INTO odd VALUES (2, {row})")).await.unwrap();
    drain(&mut task, &mut all, Duration::from_secs(30), |a| a.len() >= 2).await;
    task.stop().await.unwrap();

    assert_eq!(all.iter().map(op).collect::<Vec<_>>(), vec!["r", "c"]);
    for r in &all {
        let f = |n: &str| field(r, "after", n).clone();
        assert_eq!(f("iv"), Value::Int64(90_000_500_000));
        // -1234.56 at scale 2 = -123456 = 0xFE1DC0
        assert_eq!(f("m"), Value::Bytes(vec![0xfe, 0x1d, 0xc0]));
        assert_eq!(f("b1"), Value::Boolean(true));
        assert_eq!(f("b10"), Value::Bytes(vec![0x01, 0x02]));
        assert_eq!(f("vb"), Value::Bytes(vec![0x05]));
        assert_eq!(f("h"), Value::String(r#"{"a":"1","b":null}"#.into()));
    }
    let after = all[0].value_schema.as_ref().unwrap().field("after").unwrap().schema.clone();
    let schema = |n: &str| after.field(n).unwrap().schema.clone();
    assert_eq!(schema("iv").name.as_deref(), Some("io.debezium.time.MicroDuration"));
    assert_eq!(schema("m").name.as_deref(), Some("org.apache.kafka.connect.data.Decimal"));
    assert_eq!(schema("m").parameter("scale"), Some("2"));
    assert_eq!(schema("b1").name, None);
    assert_eq!(schema("b10").name.as_deref(), Some("io.debezium.data.Bits"));
    assert_eq!(schema("b10").parameter("length"), Some("10"));
    assert_eq!(schema("vb").parameter("length"), Some("16"));
    assert_eq!(schema("h").name.as_deref(), Some("io.debezium.data.Json"));
}

/// Ranges, ltree, citext, tsvector and the geometric types, as Debezium's type table has them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ranges_ltree_tsvector_and_geometric_types_round_trip_in_snapshot_and_stream() {
    let pg = Pg::start();
    let db = pg.client("postgres").await;
    db.batch_execute(
        "CREATE EXTENSION ltree; CREATE EXTENSION citext;
         CREATE TABLE shapes (id int PRIMARY KEY, r4 int4range, rn numrange, rts tstzrange, rd daterange, lt ltree, lts ltree[],
                              ci citext, tv tsvector, pt point NOT NULL, pts point[], ln line, ci2 circle, bx box, ls lseg,
                              po path, pc path, pg polygon);",
    )
    .await
    .unwrap();
    let row = "'[1,10)', '(0.5,2]', '[2024-01-01 10:00:00+02,)', '[2024-01-01,2024-02-01)', 'top.sci.astro', '{a.b,c}', \
               'MiXeD', 'a fat cat', '(1.5,-2)', '{\"(1,2)\",\"(3,4)\"}', '{1,-1,0.5}', '<(1,2),3>', '(2,3),(0,1)', \
               '[(0,0),(1,1)]', '[(0,0),(1,1),(2,0)]', '((0,0),(1,1),(2,0))', '((0,0),(0,1),(1,0))'";
    db.batch_execute(&format!("INSERT INTO shapes VALUES (1, {row})")).await.unwrap();
    let props = pg.props(&[("slot.name", "s11")]);
    let mut task = start_task(&props, None).await.unwrap();
    let mut all = Vec::new();
    drain(&mut task, &mut all, Duration::from_secs(30), |a| !a.is_empty()).await;
    db.batch_execute(&format!("INSERT INTO shapes VALUES (2, {row})")).await.unwrap();
    drain(&mut task, &mut all, Duration::from_secs(30), |a| a.len() >= 2).await;
    task.stop().await.unwrap();

    assert_eq!(all.iter().map(op).collect::<Vec<_>>(), vec!["r", "c"]);
    let le = |v: &[f64]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
    let s = |v: &str| Value::String(v.into());
    let parts = |v: &Value| v.as_struct().expect("a struct").values().to_vec();
    for r in &all {
        let f = |n: &str| field(r, "after", n).clone();
        assert_eq!(f("r4"), s("[1,10)"));
        assert_eq!(f("rn"), s("(0.5,2]"));
        assert_eq!(f("rts"), s("[\"2024-01-01 08:00:00+00\",)"));
        assert_eq!(f("rd"), s("[2024-01-01,2024-02-01)"));
        assert_eq!(f("lt"), s("top.sci.astro"));
        assert_eq!(f("lts"), Value::Array(vec![s("a.b"), s("c")]));
        assert_eq!(f("ci"), s("MiXeD"));
        assert_eq!(f("tv"), s("'a' 'cat' 'fat'"));
        let mut wkb = vec![1, 1, 0, 0, 0];
        wkb.extend(le(&[1.5, -2.0]));
        assert_eq!(parts(&f("pt")), vec![Value::Float64(1.5), Value::Float64(-2.0), Value::Bytes(wkb), Value::Null]);
        let Value::Array(pts) = f("pts") else { panic!("an array") };
        assert_eq!(
            pts.iter().map(|p| parts(p)[..2].to_vec()).collect::<Vec<_>>(),
            vec![vec![Value::Float64(1.0), Value::Float64(2.0)], vec![Value::Float64(3.0), Value::Float64(4.0)]]
        );
        assert_eq!(parts(&f("ln")), vec![Value::Float64(1.0), Value::Float64(-1.0), Value::Float64(0.5)]);
        let circle = parts(&f("ci2"));
        assert_eq!((parts(&circle[0])[..2].to_vec(), &circle[1]), (vec![Value::Float64(1.0), Value::Float64(2.0)], &Value::Float64(3.0)));
        let geometry = |n: &str| parts(&f(n));
        let kind = |n: &str| match &geometry(n)[2] {
            Value::Map(m) => {
                m.iter().map(|(k, v)| format!("{}={}", k.as_str().unwrap(), v.as_str().unwrap())).collect::<Vec<_>>().join(",")
            }
            other => panic!("{n}: extensions {other:?}"),
        };
        assert_eq!(kind("bx"), "type=box");
        assert_eq!(kind("ls"), "type=lseg");
        assert_eq!(kind("po"), "type=path,closed=false");
        assert_eq!(kind("pc"), "type=path,closed=true");
        assert_eq!(kind("pg"), "type=polygon");
        let mut bx = vec![1, 3, 0, 0, 0, 1, 0, 0, 0, 5, 0, 0, 0];
        bx.extend(le(&[2.0, 3.0, 2.0, 1.0, 0.0, 1.0, 0.0, 3.0, 2.0, 3.0]));
        assert_eq!(geometry("bx")[0], Value::Bytes(bx));
        let mut po = vec![1, 2, 0, 0, 0, 3, 0, 0, 0];
        po.extend(le(&[0.0, 0.0, 1.0, 1.0, 2.0, 0.0]));
        assert_eq!(geometry("po")[0], Value::Bytes(po));
        let mut pg = vec![1, 3, 0, 0, 0, 1, 0, 0, 0, 4, 0, 0, 0];
        pg.extend(le(&[0.0, 0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 0.0]));
        assert_eq!(geometry("pg")[0], Value::Bytes(pg));
    }
    let after = all[0].value_schema.as_ref().unwrap().field("after").unwrap().schema.clone();
    let name = |n: &str| after.field(n).unwrap().schema.name.clone();
    assert_eq!(name("r4"), None);
    assert_eq!(name("lt").as_deref(), Some("io.debezium.data.Ltree"));
    assert_eq!(name("tv").as_deref(), Some("io.debezium.data.Tsvector"));
    assert_eq!(name("pt").as_deref(), Some("io.debezium.data.geometry.Point"));
    assert!(!after.field("pt").unwrap().schema.optional, "a NOT NULL point is required");
    assert_eq!(name("ln").as_deref(), Some("io.debezium.data.geometry.Line"));
    assert_eq!(name("ci2").as_deref(), Some("io.debezium.data.geometry.Circle"));
    for g in ["bx", "ls", "po", "pc", "pg"] {
        assert_eq!(name(g).as_deref(), Some("io.debezium.data.geometry.Geometry"), "{g}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transaction_metadata_survives_a_restart_inside_a_transaction_without_a_second_begin() {
    let pg = Pg::start();
    let db = pg.client("postgres").await;
    db.batch_execute("CREATE TABLE x (id int PRIMARY KEY); CREATE TABLE y (id int PRIMARY KEY);").await.unwrap();
    // One record per batch: only a batch's last change record carries a position, and this
    // restarts from inside the transaction, after each record.
    let props =
        pg.props(&[("slot.name", "s_tx"), ("snapshot.mode", "no_data"), ("provide.transaction.metadata", "true"), ("max.batch.size", "1")]);
    let mut task = start_task(&props, None).await.unwrap();
    db.batch_execute("BEGIN; INSERT INTO x VALUES (1); INSERT INTO y VALUES (1); INSERT INTO x VALUES (2); COMMIT;").await.unwrap();
    let mut all = Vec::new();
    let ends = |a: &[SourceRecord]| a.iter().filter(|r| r.topic == "srv.transaction" && status(r) == "END").count();
    drain(&mut task, &mut all, Duration::from_secs(30), |a| ends(a) == 1).await;
    task.stop().await.unwrap();
    let shape = |records: &[SourceRecord]| -> Vec<String> {
        records
            .iter()
            .map(|r| match r.topic.as_str() {
                "srv.transaction" => {
                    format!("{} count={:?}", status(r), r.value.as_struct().unwrap().get("event_count").and_then(Value::as_i64))
                }
                _ => {
                    let block = envelope(r).get("transaction").and_then(Value::as_struct).expect("a transaction block");
                    format!(
                        "{} total={:?} dc={:?}",
                        r.topic,
                        block.get("total_order").and_then(Value::as_i64),
                        block.get("data_collection_order").and_then(Value::as_i64)
                    )
                }
            })
            .collect()
    };
    assert_eq!(
        shape(&all),
        [
            "BEGIN count=None",
            "srv.public.x total=Some(1) dc=Some(1)",
            "srv.public.y total=Some(2) dc=Some(1)",
            "srv.public.x total=Some(3) dc=Some(2)",
            "END count=Some(3)"
        ]
    );

    // Restarted from each record's offset, the transaction continues after it: no second
    // BEGIN, and the counts are those of the whole transaction.
    // (Nothing is committed, so the slot stays put: each run also resends the single-row
    // transactions of the runs before it.)
    for (k, (i, expect_rest)) in [(0, 4), (2, 2), (4, 0)].into_iter().enumerate() {
        // The stopped task's walsender may hold the slot for a moment: retried, as the runtime does.
        let mut task = start_task_retrying(&props, Some(all[i].source_offset.clone())).await;
        db.batch_execute(&format!("INSERT INTO y VALUES ({})", 100 + i)).await.unwrap();
        let mut again = Vec::new();
        let until = Instant::now() + Duration::from_secs(30);
        while ends(&again) < usize::from(expect_rest > 0) + k + 1 {
            assert!(Instant::now() < until, "restart after record {i}: {:?}", shape(&again));
            again.extend(task.poll_data().await.expect("poll"));
        }
        task.stop().await.unwrap();
        let want: Vec<String> = shape(&all)[i + 1..].to_vec();
        assert_eq!(shape(&again)[..expect_rest], want[..], "restart after record {i}");
        // Then the next transactions, each with its own BEGIN.
        let single = ["BEGIN count=None", "srv.public.y total=Some(1) dc=Some(1)", "END count=Some(1)"];
        assert_eq!(shape(&again)[expect_rest..], single.repeat(k + 1), "after record {i}");
    }
}

/// A snapshot session lost mid-snapshot (its backend ended, as in a server restart) fails
/// polls retriably until a new one takes over; the snapshot then goes on after the last
/// record handed out, on a new snapshot: every row once, none twice, no task restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_snapshot_session_is_replaced_and_the_snapshot_goes_on() {
    let pg = Pg::start();
    let db = pg.client("postgres").await;
    db.batch_execute("CREATE TABLE big (id int PRIMARY KEY, v text); INSERT INTO big SELECT g, 'v' || g FROM generate_series(1, 5000) g;")
        .await
        .unwrap();
    let props =
        pg.props(&[("slot.name", "s_lost"), ("snapshot.mode", "initial_only"), ("snapshot.fetch.size", "100"), ("max.batch.size", "100")]);
    let mut task = start_task(&props, None).await.unwrap();
    let id_of = |r: &SourceRecord| {
        field(r, "after", "id").as_i64().or_else(|| match field(r, "after", "id") {
            Value::Int32(v) => Some(i64::from(*v)),
            _ => None,
        })
    };
    let mut ids: Vec<i64> = Vec::new();
    while ids.is_empty() {
        ids.extend(task.poll_data().await.expect("poll").iter().filter_map(id_of));
    }
    let ended: i64 = db
        .query_one(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
             WHERE application_name = 'sluice-postgres' AND backend_type = 'client backend' AND pid <> pg_backend_pid()",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert!(ended >= 1, "the snapshot session's backend was ended");
    let (mut errors, until) = (0, Instant::now() + Duration::from_secs(60));
    while ids.len() < 5000 {
        assert!(Instant::now() < until, "timed out after {} rows and {errors} errors", ids.len());
        match task.poll_data().await {
            Ok(batch) => ids.extend(batch.iter().filter_map(id_of)),
            Err(e) => {
                assert!(e.is_retriable(), "a lost session is retriable: {e}");
                errors += 1;
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
    assert!(errors >= 1, "the lost session was noticed");
    // The snapshot is over: nothing more comes.
    for _ in 0..3 {
        assert!(task.poll_data().await.expect("poll").is_empty());
    }
    ids.sort_unstable();
    assert_eq!(ids, (1..=5000).collect::<Vec<i64>>(), "every row once");
    task.stop().await.unwrap();
}

/// Inside a batch only the last record carries a source position; the runtime commits the
/// newest position it has, which covers the records before it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_batch_ends_with_the_only_positioned_change_record() {
    let pg = Pg::start();
    let db = pg.client("postgres").await;
    db.batch_execute("CREATE TABLE z (id int PRIMARY KEY, v text)").await.unwrap();
    let props = pg.props(&[("slot.name", "s_pos"), ("snapshot.mode", "no_data"), ("max.batch.size", "4")]);
    let mut task = start_task(&props, None).await.unwrap();
    db.batch_execute("BEGIN; INSERT INTO z SELECT g, 'v' FROM generate_series(1, 10) g; DELETE FROM z WHERE id = 10; COMMIT;")
        .await
        .unwrap();
    let (mut seen, mut batches) = (0, 0);
    let until = Instant::now() + Duration::from_secs(30);
    // 10 creates, a delete and its tombstone.
    while seen < 12 {
        assert!(Instant::now() < until, "timed out after {seen} records");
        let batch = task.poll_data().await.expect("poll");
        let Some((last, rest)) = batch.split_last() else { continue };
        batches += 1;
        seen += batch.len();
        assert_eq!(last.source_partition, partition(), "the batch's last record has the position");
        assert!(last.source_offset.get("lsn").and_then(|v| v.as_u64()).is_some(), "{:?}", last.source_offset);
        assert!(last.source_offset.get("txn_seq").is_some(), "{:?}", last.source_offset);
        for r in rest {
            assert!(r.source_partition.is_empty() && r.source_offset.is_empty(), "{r:?}");
        }
    }
    assert!(batches >= 3, "max.batch.size=4 splits the 12 records ({batches} batches)");
    task.stop().await.unwrap();
}

fn status(r: &SourceRecord) -> String {
    r.value.as_struct().and_then(|v| v.get("status")).and_then(Value::as_str).unwrap_or_default().to_owned()
}
