//! The JDBC sink against a real PostgreSQL 15 started by `tests/services/postgres.sh`
//! (one cluster per test). The task is driven through its `SinkTask` API with records
//! shaped like Debezium's change events. These tests fail, never skip, when the Postgres
//! binaries are missing.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;
use std::sync::{Arc, Mutex};

use sluice_api::{
    ConnectError, ConnectResult, ErrantRecordReporter, Props, Schema, SchemaRef, SinkRecord, SinkTask, SinkTaskContext, Struct, Task,
    TopicPartition, Value,
};

const PLACEHOLDER: &str = "__debezium_unavailable_value";
const TOPIC: &str = "srv.public.items";

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
        let pg = Self { dir, port };
        pg.run("start");
        pg
    }

    fn run(&self, cmd: &str) {
        let mut c = Command::new("bash");
        c.arg(script()).arg(cmd).arg(self.dir.path());
        if cmd == "start" {
            c.arg(self.port.to_string());
        }
        let out = c.output().expect("run postgres.sh");
        assert!(out.status.success(), "postgres.sh {cmd} failed: {}", String::from_utf8_lossy(&out.stderr));
    }

    async fn client(&self) -> tokio_postgres::Client {
        let (client, conn) = tokio_postgres::Config::new()
            .host("127.0.0.1")
            .port(self.port)
            .user("postgres")
            .dbname("postgres")
            .connect(tokio_postgres::NoTls)
            .await
            .expect("connect");
        tokio::spawn(conn);
        client
    }

    fn url(&self) -> String {
        format!("jdbc:postgresql://127.0.0.1:{}/postgres", self.port)
    }

    /// A Debezium-style config (collection name from the source table, upsert by key).
    fn debezium(&self, extra: &[(&str, &str)]) -> Props {
        let mut p = props(&[
            ("connector.class", "io.debezium.connector.jdbc.JdbcSinkConnector"),
            ("connection.url", &self.url()),
            ("connection.username", "postgres"),
            ("connection.password", ""),
            ("insert.mode", "upsert"),
            ("primary.key.mode", "record_key"),
            ("delete.enabled", "true"),
            ("truncate.enabled", "true"),
            ("schema.evolution", "basic"),
            ("collection.name.format", "${source.table}"),
        ]);
        p.extend(props(extra));
        p
    }
}

impl Drop for Pg {
    fn drop(&mut self) {
        let _ = Command::new("bash").arg(script()).arg("stop").arg(self.dir.path()).status();
    }
}

fn props(pairs: &[(&str, &str)]) -> Props {
    pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
}

async fn task(p: &Props) -> (Box<dyn SinkTask>, SinkTaskContext) {
    let ctx = SinkTaskContext::new("wh".into(), 0, p.clone());
    (start(p, ctx.clone()).await, ctx)
}

/// A task whose errant records go to a [`Reporter`] that tolerates them or not.
async fn task_reporting(p: &Props, tolerate: bool) -> (Box<dyn SinkTask>, Arc<Reporter>) {
    let reporter = Arc::new(Reporter { tolerate, reported: Mutex::default() });
    let t = start(p, SinkTaskContext::new("wh".into(), 0, p.clone()).with_reporter(reporter.clone())).await;
    (t, reporter)
}

/// The task of `p`'s connector class, started with `ctx`, with `TOPIC`'s partition 0 open.
async fn start(p: &Props, ctx: SinkTaskContext) -> Box<dyn SinkTask> {
    let class = p.get("connector.class").cloned().unwrap_or_default();
    let plugin = sluice_connectors::connectors().into_iter().find(|x| x.matches(&class)).expect("plugin");
    let Task::Sink(mut t) = (plugin.create)().create_task() else { panic!("a sink") };
    t.start(ctx).await.expect("start");
    t.open(&[TopicPartition::new(TOPIC, 0)]).await.expect("open");
    t
}

/// Builds Debezium envelopes for table `items(id int4 key, name text, big text, n int4 [, extra text])`.
struct Events {
    with_extra: bool,
    offset: i64,
}

impl Events {
    fn row_schema(&self) -> SchemaRef {
        let mut fields = vec![
            ("id", Schema::int32().into_ref()),
            ("name", Schema::string().optional().into_ref()),
            ("big", Schema::string().optional().into_ref()),
            ("n", Schema::int32().optional().into_ref()),
        ];
        if self.with_extra {
            fields.push(("extra", Schema::string().optional().into_ref()));
        }
        Schema::struct_of(fields).named("srv.public.items.Value").optional().into_ref()
    }

    fn row(&self, id: i32, name: &str, big: &str, n: i32) -> Value {
        let mut s = Struct::new(self.row_schema()).with("id", id).with("name", name).with("big", big).with("n", n);
        if self.with_extra {
            s = s.with("extra", format!("x{id}"));
        }
        Value::Struct(s)
    }

    fn record(&mut self, op: &str, id: Option<i32>, before: Value, after: Value) -> SinkRecord {
        let source = Schema::struct_of([
            ("db", Schema::string().into_ref()),
            ("schema", Schema::string().into_ref()),
            ("table", Schema::string().into_ref()),
        ])
        .into_ref();
        let env = Schema::struct_of([
            ("before", self.row_schema()),
            ("after", self.row_schema()),
            ("source", source.clone()),
            ("op", Schema::string().into_ref()),
            ("ts_ms", Schema::int64().optional().into_ref()),
        ])
        .named("srv.public.items.Envelope")
        .into_ref();
        let src = Struct::new(source).with("db", "postgres").with("schema", "public").with("table", "items");
        let value = Struct::new(env.clone()).with("before", before).with("after", after).with("source", Value::Struct(src)).with("op", op);
        let key_schema = Schema::struct_of([("id", Schema::int32().into_ref())]).named("srv.public.items.Key").into_ref();
        let offset = self.offset;
        self.offset += 1;
        SinkRecord {
            topic: TOPIC.into(),
            partition: 0,
            offset,
            key_schema: id.map(|_| key_schema.clone()),
            key: id.map_or(Value::Null, |id| Value::Struct(Struct::new(key_schema).with("id", id))),
            value_schema: Some(env),
            value: Value::Struct(value),
            ..Default::default()
        }
    }

    fn upsert(&mut self, op: &str, id: i32, name: &str, big: &str, n: i32) -> SinkRecord {
        let after = self.row(id, name, big, n);
        self.record(op, Some(id), Value::Null, after)
    }

    fn delete(&mut self, id: i32) -> SinkRecord {
        let before = self.row(id, "", "", 0);
        self.record("d", Some(id), before, Value::Null)
    }

    fn tombstone(&mut self, id: i32) -> SinkRecord {
        let mut r = self.delete(id);
        r.value = Value::Null;
        r.value_schema = None;
        r
    }

    fn truncate(&mut self) -> SinkRecord {
        self.record("t", None, Value::Null, Value::Null)
    }
}

/// `put`, then `pre_commit`: the sink writes a put's last batch in the background and
/// `pre_commit` waits for it (as the runtime's offset commit does), so this returns once
/// everything put is written, with the errors of that write.
async fn write(t: &mut dyn SinkTask, records: Vec<SinkRecord>) -> ConnectResult<()> {
    t.put(records).await?;
    t.pre_commit(&BTreeMap::new()).await.map(|_| ())
}

async fn rows(db: &tokio_postgres::Client, sql: &str) -> Vec<String> {
    db.query(sql, &[]).await.unwrap().iter().map(|r| r.get::<_, String>(0)).collect()
}

/// Counts UPDATEs per row in `items_updates` (created with the table by the test).
async fn count_updates(db: &tokio_postgres::Client) {
    db.batch_execute(
        "CREATE TABLE items_updates (id int PRIMARY KEY, updates int NOT NULL);
         CREATE FUNCTION count_update() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
           INSERT INTO items_updates VALUES (NEW.id, 1) ON CONFLICT (id) DO UPDATE SET updates = items_updates.updates + 1; RETURN NEW; END $$;
         CREATE TABLE items (id int PRIMARY KEY, name text, big text, n int);
         CREATE TRIGGER items_count BEFORE UPDATE ON items FOR EACH ROW EXECUTE FUNCTION count_update();",
    )
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn envelope_semantics_collapse_and_toast() {
    let pg = Pg::start();
    let db = pg.client().await;
    count_updates(&db).await;
    let (mut t, _) = task(&pg.debezium(&[])).await;
    let mut e = Events { with_extra: false, offset: 0 };
    let big = "B".repeat(10_000);
    // Batch 1: inserts, updates of one key collapsed, a delete, an insert-then-toast-update.
    write(
        t.as_mut(),
        vec![
            e.upsert("r", 1, "one", &big, 0),
            e.upsert("c", 2, "two", "b2", 0),
            e.upsert("c", 3, "three", "b3", 0),
            e.delete(2),
            e.tombstone(2),
            e.upsert("c", 4, "four", "b4", 0),
            e.upsert("u", 4, "four", PLACEHOLDER, 1),
        ],
    )
    .await
    .unwrap();
    assert_eq!(
        rows(&db, "SELECT id || ':' || name || ':' || left(big, 3) || ':' || n FROM items ORDER BY id").await,
        vec!["1:one:BBB:0", "3:three:b3:0", "4:four:b4:1"]
    );
    // Batch 2: TOASTed column unchanged keeps the value; three updates of key 3 are one.
    write(
        t.as_mut(),
        vec![
            e.upsert("u", 1, "uno", PLACEHOLDER, 1),
            e.upsert("u", 3, "a", "b3", 1),
            e.upsert("u", 3, "b", "b3", 2),
            e.upsert("u", 3, "c", PLACEHOLDER, 3),
        ],
    )
    .await
    .unwrap();
    assert_eq!(
        rows(&db, "SELECT id || ':' || name || ':' || length(big) || ':' || n FROM items ORDER BY id").await,
        vec!["1:uno:10000:1", "3:c:2:3", "4:four:2:1"]
    );
    assert_eq!(rows(&db, "SELECT id || ':' || updates FROM items_updates ORDER BY id").await, vec!["1:1", "3:1"]);
    assert!(
        rows(&db, "SELECT count(*)::text FROM items WHERE big = '__debezium_unavailable_value' OR name = '__debezium_unavailable_value'")
            .await
            == vec!["0"]
    );
    // Batch 3: delete then re-insert of one key, a truncate, then a new row.
    write(t.as_mut(), vec![e.delete(4), e.upsert("c", 4, "again", "b", 0)]).await.unwrap();
    assert_eq!(rows(&db, "SELECT name FROM items WHERE id = 4").await, vec!["again"]);
    write(t.as_mut(), vec![e.upsert("c", 9, "lost", "x", 0), e.truncate(), e.upsert("c", 5, "five", "b5", 0)]).await.unwrap();
    assert_eq!(rows(&db, "SELECT id::text FROM items ORDER BY id").await, vec!["5"]);
    let current: BTreeMap<_, _> = [(TopicPartition::new(TOPIC, 0), e.offset)].into();
    assert_eq!(t.pre_commit(&current).await.unwrap(), current, "pre_commit reports what the target has");
    let stored = rows(&db, "SELECT connector || ':' || topic || ':' || partition || ':' || next_offset FROM sluice_sink_offsets").await;
    assert_eq!(stored, vec![format!("wh:{TOPIC}:0:{}", e.offset)]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_create_types_and_evolve() {
    let pg = Pg::start();
    let db = pg.client().await;
    let (mut t, _) = task(&pg.debezium(&[])).await;
    let mut e = Events { with_extra: false, offset: 0 };
    write(t.as_mut(), vec![e.upsert("c", 1, "one", "b", 1)]).await.unwrap();
    // A column added at the source appears in the target.
    e.with_extra = true;
    write(t.as_mut(), vec![e.upsert("c", 2, "two", "b", 2), e.upsert("u", 1, "one", PLACEHOLDER, 3)]).await.unwrap();
    assert_eq!(rows(&db, "SELECT id || ':' || coalesce(extra, '-') || ':' || big FROM items ORDER BY id").await, vec!["1:x1:b", "2:x2:b"]);
    // Logical types, in a flat record (as after an unwrap transform).
    let vsd = Schema::struct_of([("scale", Schema::int32().into_ref()), ("value", Schema::bytes().into_ref())])
        .named("io.debezium.data.VariableScaleDecimal")
        .optional()
        .into_ref();
    let s = |x: Schema| x.optional().into_ref();
    let addr =
        Schema::struct_of([("city", Schema::string().into_ref()), ("zip", Schema::int32().optional().into_ref())]).optional().into_ref();
    let schema = Schema::struct_of([
        ("id", Schema::int64().into_ref()),
        ("price", s(Schema::decimal(2).with_parameter("connect.decimal.precision", "10"))),
        ("vsd", vsd.clone()),
        ("ts", s(Schema::int64().named("io.debezium.time.MicroTimestamp"))),
        ("tz", s(Schema::string().named("io.debezium.time.ZonedTimestamp"))),
        ("d", s(Schema::int32().named("io.debezium.time.Date"))),
        ("tm", s(Schema::int64().named("io.debezium.time.MicroTime"))),
        ("doc", s(Schema::string().named("io.debezium.data.Json"))),
        ("uid", s(Schema::string().named("io.debezium.data.Uuid"))),
        ("tags", s(Schema::array(Schema::string().optional().into_ref()))),
        ("raw", s(Schema::bytes())),
        ("ok", s(Schema::boolean())),
        ("f", s(Schema::float64())),
        ("addr", addr.clone()),
        ("attrs", s(Schema::map(Schema::string().into_ref(), Schema::int32().optional().into_ref()))),
    ])
    .named("srv.public.typed.Value")
    .into_ref();
    let v = Struct::new(schema.clone())
        .with("id", 7i64)
        .with("price", Value::Bytes(vec![0x30, 0x39]))
        .with("vsd", Value::Struct(Struct::new(vsd).with("scale", 3).with("value", Value::Bytes(vec![0xff, 0x85]))))
        .with("ts", 1_700_000_000_123_456i64)
        .with("tz", "2024-02-29T23:30:00.12Z")
        .with("d", 19_782)
        .with("tm", 3_600_500_000i64)
        .with("doc", r#"{"a": [1, "x\ty"]}"#)
        .with("uid", "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11")
        .with("tags", Value::Array(vec!["a".into(), Value::Null, "b \"c\"".into()]))
        .with("raw", Value::Bytes(vec![0, 1, 255]))
        .with("ok", true)
        .with("f", Value::Float64(1.5))
        .with("addr", Value::Struct(Struct::new(addr).with("city", "K\u{f6}ln").with("zip", 50667)))
        .with("attrs", Value::Map(vec![("b".into(), Value::Int32(2)), ("a".into(), Value::Null)]));
    let key_schema = Schema::struct_of([("id", Schema::int64().into_ref())]).into_ref();
    let record = SinkRecord {
        topic: "typed".into(),
        partition: 0,
        offset: 0,
        key_schema: Some(key_schema.clone()),
        key: Value::Struct(Struct::new(key_schema).with("id", 7i64)),
        value_schema: Some(schema),
        value: Value::Struct(v),
        ..Default::default()
    };
    let (mut t2, _) = task(&pg.debezium(&[("collection.name.format", "${topic}"), ("sluice.table.fillfactor", "90")])).await;
    write(t2.as_mut(), vec![record.clone()]).await.unwrap();
    // Tables the sink updates leave room on each page for updated rows (70 unless set);
    // a table that only gets inserts keeps Postgres' default.
    let (mut t3, _) = task(&pg.debezium(&[("collection.name.format", "${topic}"), ("insert.mode", "insert")])).await;
    write(t3.as_mut(), vec![SinkRecord { topic: "appended".into(), ..record }]).await.unwrap();
    let storage = rows(
        &db,
        "SELECT relname || ':' || coalesce(array_to_string(reloptions, ','), 'default') FROM pg_class \
         WHERE relname IN ('items', 'typed', 'appended') ORDER BY relname",
    )
    .await;
    assert_eq!(storage, vec!["appended:default", "items:fillfactor=70", "typed:fillfactor=90"]);
    let types = rows(&db, "SELECT string_agg(column_name || ' ' || data_type, ', ' ORDER BY ordinal_position) FROM information_schema.columns WHERE table_name = 'typed'").await;
    assert_eq!(types[0], "id bigint, price numeric, vsd numeric, ts timestamp without time zone, tz timestamp with time zone, d date, tm time without time zone, doc jsonb, uid uuid, tags ARRAY, raw bytea, ok boolean, f double precision, addr jsonb, attrs jsonb");
    let got = rows(
        &db,
        "SELECT concat_ws('|', price, vsd, ts, tz, d, tm, doc, uid, tags, raw, ok, f, addr, attrs, addr->>'city', attrs->'b') FROM typed",
    )
    .await;
    assert_eq!(
        got[0],
        r#"123.45|-0.123|2023-11-14 22:13:20.123456|2024-02-29 23:30:00.12+00|2024-02-29|01:00:00.5|{"a": [1, "x\ty"]}|a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11|{a,NULL,"b \"c\""}|\x0001ff|t|1.5|{"zip": 50667, "city": "Köln"}|{"a": null, "b": 2}|Köln|2"#
    );
}

/// Numbers, booleans and timestamps go in binary where the column has their own type and
/// as text (cast by the server) elsewhere: both store what the text form says, and a value
/// the column cannot hold fails as the server's cast says, naming the record.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn values_reach_columns_of_their_own_type_and_of_others_alike() {
    let pg = Pg::start();
    let db = pg.client().await;
    db.batch_execute(
        "CREATE TABLE mixed (id bigint PRIMARY KEY, i integer, s smallint, r real, r_wide double precision, d double precision, \
         ts timestamp, ts3 timestamp(3), n numeric, t text, narrow integer, flag boolean, flag_text text)",
    )
    .await
    .unwrap();
    let s = |x: Schema| x.optional().into_ref();
    let schema = Schema::struct_of([
        ("id", Schema::int64().into_ref()),
        ("i", s(Schema::int32())),
        ("s", s(Schema::int16())),
        ("r", s(Schema::float32())),
        ("r_wide", s(Schema::float32())),
        ("d", s(Schema::float64())),
        ("ts", s(Schema::timestamp())),
        ("ts3", s(Schema::int64().named("io.debezium.time.NanoTimestamp"))),
        ("n", s(Schema::int64())),
        ("t", s(Schema::int64())),
        ("narrow", s(Schema::int64())),
        ("flag", s(Schema::boolean())),
        ("flag_text", s(Schema::boolean())),
    ])
    .into_ref();
    let key_schema = Schema::struct_of([("id", Schema::int64().into_ref())]).into_ref();
    let record = |offset: i64, id: i64, narrow: i64| {
        let v = Struct::new(schema.clone())
            .with("id", id)
            .with("i", -7)
            .with("s", Value::Int16(300))
            .with("r", Value::Float32(1.1))
            .with("r_wide", Value::Float32(1.1))
            .with("d", Value::Float64(2.5))
            .with("ts", 1_700_000_000_123i64)
            .with("ts3", 1_700_000_000_123_456_789i64)
            .with("n", 12_345_678_901_234i64)
            .with("t", 42i64)
            .with("narrow", narrow)
            .with("flag", true)
            .with("flag_text", false);
        SinkRecord {
            topic: "mixed".into(),
            offset,
            key_schema: Some(key_schema.clone()),
            key: Value::Struct(Struct::new(key_schema.clone()).with("id", id)),
            value_schema: Some(schema.clone()),
            value: Value::Struct(v),
            ..Default::default()
        }
    };
    let p = pg.debezium(&[("collection.name.format", "${topic}")]);
    let (mut t, _) = task(&p).await;
    t.open(&[TopicPartition::new("mixed", 0)]).await.unwrap();
    write(t.as_mut(), vec![record(0, 1, 5), record(1, 2, -5)]).await.unwrap();
    assert_eq!(
        rows(&db, "SELECT concat_ws('|', id, i, s, r, r_wide, d, ts, ts3, n, t, narrow, flag, flag_text) FROM mixed ORDER BY id").await,
        vec![
            "1|-7|300|1.1|1.1|2.5|2023-11-14 22:13:20.123|2023-11-14 22:13:20.123|12345678901234|42|5|t|f",
            "2|-7|300|1.1|1.1|2.5|2023-11-14 22:13:20.123|2023-11-14 22:13:20.123|12345678901234|42|-5|t|f",
        ]
    );
    // Too big for `integer`: sent as text, and the server's cast refuses it.
    let err = write(t.as_mut(), vec![record(2, 3, 7), record(3, 4, 3_000_000_000)]).await.unwrap_err();
    let trace = err.trace();
    assert!(trace.contains("topic mixed partition 0 offset 3") && trace.contains("out of range"), "{trace}");
    assert_eq!(rows(&db, "SELECT count(*)::text FROM mixed").await, vec!["2"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offsets_in_the_target_make_restarts_exact() {
    let pg = Pg::start();
    let db = pg.client().await;
    count_updates(&db).await;
    let p = pg.debezium(&[]);
    let mut e = Events { with_extra: false, offset: 0 };
    let mut all = Vec::new();
    for i in 0..10 {
        all.push(e.upsert("c", i, "v0", "b", 0));
    }
    for round in 1..=3 {
        for i in 0..10 {
            all.push(e.upsert("u", i, &format!("v{round}"), "b", round));
        }
    }
    let (mut t, _) = task(&p).await;
    write(t.as_mut(), all[..25].to_vec()).await.unwrap();
    // A crash before the runtime committed anything: a new task resumes where the target is.
    drop(t);
    let (mut t, ctx) = task(&p).await;
    assert_eq!(ctx.take_rewinds(), [(TopicPartition::new(TOPIC, 0), 25)].into());
    // The runtime may still redeliver from its own (older) position: nothing applies twice.
    write(t.as_mut(), all[..30].to_vec()).await.unwrap();
    write(t.as_mut(), all[20..].to_vec()).await.unwrap();
    assert_eq!(
        rows(&db, "SELECT string_agg(id || ':' || name || ':' || n, ',' ORDER BY id) FROM items").await[0],
        (0..10).map(|i| format!("{i}:v3:3")).collect::<Vec<_>>().join(",")
    );
    // Each key: one insert and three updates in the source; 15 updates were in the first
    // put (two rounds, collapsed per key within a put) ... at most one UPDATE per key per
    // batch and never an update re-applied: at most 3 per key.
    let counts = rows(&db, "SELECT string_agg(updates::text, ',' ORDER BY id) FROM items_updates").await;
    assert!(counts[0].split(',').all(|c| c.parse::<i32>().unwrap() <= 3), "{counts:?}");
    let pre = t.pre_commit(&[(TopicPartition::new(TOPIC, 0), 40)].into()).await.unwrap();
    assert_eq!(pre, [(TopicPartition::new(TOPIC, 0), 40)].into());
}

/// Two instances of one task (a restarted task while the backend of the killed one still
/// commits): the target's offsets are compared and set, so the stale instance cannot apply
/// what the other one stored, and after reading the offsets again it goes on from there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_instance_cannot_apply_a_batch_twice() {
    let pg = Pg::start();
    let db = pg.client().await;
    count_updates(&db).await;
    let p = pg.debezium(&[("retry.backoff.ms", "50")]);
    let mut e = Events { with_extra: false, offset: 0 };
    let inserts: Vec<SinkRecord> = (0..5).map(|i| e.upsert("c", i, "v0", "b", 0)).collect();
    let updates: Vec<SinkRecord> = (0..5).map(|i| e.upsert("u", i, "v1", "b", 1)).collect();
    let more: Vec<SinkRecord> = (0..5).map(|i| e.upsert("u", i, "v2", "b", 2)).collect();
    // Both read the stored offsets (none yet) when their partition opened.
    let (mut a, _) = task(&p).await;
    let (mut b, b_ctx) = task(&p).await;
    write(a.as_mut(), inserts.clone()).await.unwrap();
    write(a.as_mut(), updates.clone()).await.unwrap();
    // The stale instance's write is refused ("offsets past this batch") and rolled back;
    // it reads the offsets again and recognises the records as applied.
    write(b.as_mut(), updates.clone()).await.unwrap();
    let counts = rows(&db, "SELECT string_agg(updates::text, ',' ORDER BY id) FROM items_updates").await;
    assert_eq!(counts[0], "1,1,1,1,1", "one update per key: the stale attempt left nothing");
    // Redelivered, the same records are skipped; the next ones are written.
    write(b.as_mut(), updates.clone()).await.unwrap();
    write(b.as_mut(), more.clone()).await.unwrap();
    let counts = rows(&db, "SELECT string_agg(updates::text, ',' ORDER BY id) FROM items_updates").await;
    assert_eq!(counts[0], "2,2,2,2,2");
    assert_eq!(
        rows(&db, "SELECT string_agg(id || ':' || name || ':' || n, ',' ORDER BY id) FROM items").await[0],
        (0..5).map(|i| format!("{i}:v2:2")).collect::<Vec<_>>().join(",")
    );
    let stored = rows(&db, "SELECT next_offset::text FROM sluice_sink_offsets WHERE connector = 'wh'").await;
    assert_eq!(stored, ["15"]);
    // The first instance, now stale in turn, is refused the same way and applies nothing.
    write(a.as_mut(), more).await.unwrap();
    let counts = rows(&db, "SELECT string_agg(updates::text, ',' ORDER BY id) FROM items_updates").await;
    assert_eq!(counts[0], "2,2,2,2,2");
    drop(b_ctx);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn confluent_config_from_its_docs_with_flat_records() {
    let pg = Pg::start();
    let db = pg.client().await;
    let p = props(&[
        ("connector.class", "io.confluent.connect.jdbc.JdbcSinkConnector"),
        ("connection.url", &pg.url()),
        ("connection.user", "postgres"),
        ("connection.password", "unused-with-trust"),
        ("topics", "orders"),
        ("insert.mode", "upsert"),
        ("pk.mode", "record_value"),
        ("pk.fields", "id"),
        ("auto.create", "true"),
        ("auto.evolve", "true"),
        ("fields.whitelist", "id,product"),
        ("table.name.format", "kafka_${topic}"),
    ]);
    let plugin = sluice_connectors::connectors().into_iter().find(|x| x.matches("jdbc-sink")).unwrap();
    let Task::Sink(mut t) = (plugin.create)().create_task() else { panic!() };
    t.start(SinkTaskContext::new("orders-sink".into(), 0, p)).await.unwrap();
    t.open(&[TopicPartition::new("orders", 0)]).await.unwrap();
    let schema = Schema::struct_of([
        ("id", Schema::int32().into_ref()),
        ("product", Schema::string().into_ref()),
        ("secret", Schema::string().into_ref()),
    ])
    .into_ref();
    let rec = |offset: i64, id: i32, product: &str| SinkRecord {
        topic: "orders".into(),
        offset,
        value_schema: Some(schema.clone()),
        value: Value::Struct(Struct::new(schema.clone()).with("id", id).with("product", product).with("secret", "s")),
        ..Default::default()
    };
    write(t.as_mut(), vec![rec(0, 1, "a"), rec(1, 2, "b"), rec(2, 1, "c")]).await.unwrap();
    assert_eq!(rows(&db, r#"SELECT id || ':' || product FROM "kafka_orders" ORDER BY id"#).await, vec!["1:c", "2:b"]);
    assert_eq!(rows(&db, "SELECT count(*)::text FROM information_schema.columns WHERE table_name = 'kafka_orders'").await, vec!["2"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_record_fails_naming_it_and_a_down_target_is_retriable() {
    let pg = Pg::start();
    let db = pg.client().await;
    db.batch_execute("CREATE TABLE items (id int PRIMARY KEY, name text, big text, n int CHECK (n >= 0))").await.unwrap();
    let (mut t, _) = task(&pg.debezium(&[])).await;
    let mut e = Events { with_extra: false, offset: 0 };
    let err = write(t.as_mut(), vec![e.upsert("c", 1, "a", "b", 0), e.upsert("c", 2, "a", "b", -5), e.upsert("c", 3, "a", "b", 0)])
        .await
        .unwrap_err();
    assert!(matches!(err, ConnectError::Fatal { .. }), "{err:?}");
    let trace = err.trace();
    assert!(trace.contains(&format!("topic {TOPIC} partition 0 offset 1 key {{id=2}}")) && trace.contains("check constraint"), "{trace}");
    assert_eq!(rows(&db, "SELECT count(*)::text FROM items").await, vec!["0"], "nothing of the failed batch is applied");

    // Target down: retriable, and nothing lost once it is back.
    let (mut t, _) = task(&pg.debezium(&[("flush.retry.delay.ms", "10")])).await;
    let mut e = Events { with_extra: false, offset: 0 };
    write(t.as_mut(), vec![e.upsert("c", 1, "a", "b", 0)]).await.unwrap();
    pg.run("stop");
    let batch = vec![e.upsert("c", 2, "a", "b", 0), e.upsert("u", 1, "z", "b", 0)];
    let err = write(t.as_mut(), batch.clone()).await.unwrap_err();
    assert!(err.is_retriable(), "{err:?}");
    pg.run("start");
    write(t.as_mut(), batch).await.unwrap();
    let db = pg.client().await;
    assert_eq!(rows(&db, "SELECT id || ':' || name FROM items ORDER BY id").await, vec!["1:z", "2:a"]);
}

/// The runtime's side of error handling, as a sink sees it: keeps what is reported, and
/// tolerates it or not.
struct Reporter {
    tolerate: bool,
    reported: Mutex<Vec<(i64, String)>>,
}

#[async_trait::async_trait]
impl ErrantRecordReporter for Reporter {
    async fn report(&self, record: &SinkRecord, error: ConnectError) -> ConnectResult<()> {
        self.reported.lock().unwrap().push((record.offset, error.trace()));
        if self.tolerate {
            Ok(())
        } else {
            Err(error)
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_the_target_rejects_are_reported_and_the_rest_is_written() {
    rejected_records_are_reported(500).await;
}

/// The same with a put in six chunks, written in the background: the first chunk fails,
/// so all six are written again, in order, through the error handling.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rejected_records_in_a_put_of_several_chunks_are_reported_and_the_rest_is_written() {
    rejected_records_are_reported(50).await;
}

async fn rejected_records_are_reported(batch_size: usize) {
    let pg = Pg::start();
    let db = pg.client().await;
    db.batch_execute("CREATE TABLE items (id int PRIMARY KEY, name text, big text, n int CHECK (n >= 0))").await.unwrap();
    let p = pg.debezium(&[("batch.size", &batch_size.to_string())]);
    let (mut t, reporter) = task_reporting(&p, true).await;

    // 300 inserts and updates; three break the target's CHECK constraint, one of them the
    // last record of the put (its offset must still be covered).
    let mut e = Events { with_extra: false, offset: 0 };
    let bad = [37_i64, 180, 299];
    let records: Vec<SinkRecord> = (0..300)
        .map(|i| {
            let n = if bad.contains(&i) { -1 } else { i as i32 };
            let id = (i % 120) as i32;
            e.upsert(if i < 120 { "c" } else { "u" }, id, &format!("v{i}"), "b", n)
        })
        .collect();
    write(t.as_mut(), records).await.unwrap();

    let reported = reporter.reported.lock().unwrap().clone();
    assert_eq!(reported.iter().map(|(o, _)| *o).collect::<Vec<_>>(), bad, "exactly the rejected records, in order");
    for (offset, trace) in &reported {
        let key = offset % 120;
        assert!(trace.contains(&format!("topic {TOPIC} partition 0 offset {offset} key {{id={key}}}")), "{trace}");
        assert!(trace.contains("check constraint"), "{trace}");
    }
    // Every other record is applied: per key the last good change wins.
    let expected: Vec<String> = (0..120)
        .map(|id| {
            let last_good = (0..300_i64).filter(|i| i % 120 == id && !bad.contains(i)).max().unwrap();
            format!("{id}:v{last_good}:{last_good}")
        })
        .collect();
    assert_eq!(rows(&db, "SELECT id || ':' || name || ':' || n FROM items ORDER BY id").await, expected);
    // The stored offset covers the whole put, the skipped last record included.
    let current = BTreeMap::from([(TopicPartition::new(TOPIC, 0), 300)]);
    assert_eq!(t.pre_commit(&current).await.unwrap(), current);
    assert_eq!(rows(&db, "SELECT next_offset::text FROM sluice_sink_offsets").await, vec!["300"]);

    // Not tolerated: put fails with the reporter's error and writes nothing of the chunk.
    let (mut t, reporter) = task_reporting(&p, false).await;
    let err = write(t.as_mut(), vec![e.upsert("u", 1, "late", "b", 5), e.upsert("u", 2, "late", "b", -3)]).await.unwrap_err();
    assert!(err.trace().contains("offset 301 key {id=2}"), "{}", err.trace());
    assert_eq!(reporter.reported.lock().unwrap().len(), 1);
    assert_eq!(rows(&db, "SELECT name FROM items WHERE id = 1").await, vec!["v241"]);
}

/// Two puts written in the background, the first one failing on a record the target
/// rejects: the second is not written before the first is written again (the rejected
/// record reported), so the newer changes win and the stored offset covers both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_put_after_a_failed_one_waits_for_it_to_be_written_again() {
    let pg = Pg::start();
    let db = pg.client().await;
    db.batch_execute("CREATE TABLE items (id int PRIMARY KEY, name text, big text, n int CHECK (n >= 0))").await.unwrap();
    let p = pg.debezium(&[("batch.size", "20")]);
    let (mut t, reporter) = task_reporting(&p, true).await;
    let mut e = Events { with_extra: false, offset: 0 };
    let first: Vec<SinkRecord> = (0..100)
        .map(|i| e.upsert(if i < 50 { "c" } else { "u" }, i % 50, &format!("first{i}"), "b", if i == 10 { -1 } else { i }))
        .collect();
    let second: Vec<SinkRecord> = (0..100).map(|i| e.upsert("u", i % 50, &format!("second{i}"), "b", i)).collect();
    t.put(first).await.unwrap();
    t.put(second).await.unwrap();
    let current = BTreeMap::from([(TopicPartition::new(TOPIC, 0), 200)]);
    assert_eq!(t.pre_commit(&current).await.unwrap(), current);
    assert_eq!(reporter.reported.lock().unwrap().iter().map(|(o, _)| *o).collect::<Vec<_>>(), [10]);
    let expected: Vec<String> = (0..50).map(|id| format!("{id}:second{}:{}", id + 50, id + 50)).collect();
    assert_eq!(rows(&db, "SELECT id || ':' || name || ':' || n FROM items ORDER BY id").await, expected);
    assert_eq!(rows(&db, "SELECT next_offset::text FROM sluice_sink_offsets").await, vec!["200"]);
}

/// A write that meets offsets stored past its records (another instance of the task wrote
/// them) while a put is written chunk by chunk (it holds a malformed record): the conflict
/// is retriable, and only the malformed record is reported (the conflict is not taken for
/// a record the target rejects). Read again, the offsets show the rest as applied.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offsets_stored_past_a_put_written_chunk_by_chunk_are_retried_not_blamed_on_a_record() {
    let pg = Pg::start();
    let db = pg.client().await;
    count_updates(&db).await;
    let p = pg.debezium(&[("retry.backoff.ms", "10")]);
    let (mut a, _) = task(&p).await;
    let (mut b, reporter) = task_reporting(&p, true).await;
    let mut e = Events { with_extra: false, offset: 0 };
    let inserts: Vec<SinkRecord> = (0..5).map(|i| e.upsert("c", i, "v0", "b", 0)).collect();
    let malformed = e.record("z", Some(9), Value::Null, Value::Null);
    write(a.as_mut(), inserts.clone()).await.unwrap();
    let mut put = inserts.clone();
    put.push(malformed);
    let err = write(b.as_mut(), put.clone()).await.unwrap_err();
    assert!(err.is_retriable(), "{err:?}");
    assert!(err.trace().contains("offsets past this batch"), "{}", err.trace());
    assert_eq!(reporter.reported.lock().unwrap().iter().map(|(o, _)| *o).collect::<Vec<_>>(), [5]);
    // Redelivered: the inserts are recognised as applied, the malformed record is skipped.
    write(b.as_mut(), put).await.unwrap();
    assert_eq!(rows(&db, "SELECT count(*)::text FROM items_updates").await, vec!["0"], "no insert applied twice");
    assert_eq!(rows(&db, "SELECT next_offset::text FROM sluice_sink_offsets").await, vec!["6"]);
}
