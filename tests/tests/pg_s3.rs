//! Postgres source → embedded log → S3 sink (moto), through the real binary: Debezium change
//! events of a table with a mix of column types, from the snapshot and from streamed
//! inserts, updates and deletes, land in S3 as rows a warehouse can query.
//!
//! * Unwrapped: `ExtractNewRecordState` (deletes rewritten with `__deleted`, `__op` added) on
//!   the sink, `time.precision.mode=connect` on the source, Parquet. Every change is one row
//!   with typed columns (DECIMAL, TIMESTAMP, DATE, BOOLEAN), read back with pyarrow; the
//!   newest row per key, queried with duckdb, is the table.
//! * Raw envelopes: `before`/`after`/`source`/`op`/`ts_ms` in Parquet and in JSON; tombstones
//!   skipped (`behavior.on.null.values=ignore`). Per key, the `op` sequence and the
//!   before/after images are the ones the table went through, in both formats.
//!
//! The expected images come from Postgres itself: every statement of the workload returns
//! its row (`RETURNING`) in the same normalised JSON form the readers print.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use sluice_tests::{eventually, json, Json, Moto, Postgres, Worker};

const BUCKET: &str = "cdc";
const TOPIC: &str = "pg.public.items";

/// The columns' normalised form: decimals as text, instants as epoch micro/milliseconds,
/// dates as ISO text, jsonb as JSON. The readers print the same form (see [`NORMALISE`]).
const NORM_SQL: &str = "json_build_object('id', id, 'name', name, 'price', price::text, \
     'happened_us', (extract(epoch FROM happened) * 1000000)::bigint, 'noted_ms', (extract(epoch FROM noted) * 1000)::bigint, \
     'born', born::text, 'active', active, 'doc', doc, 'amount', amount::text)";

/// Python shared by the readers: `norm(row)` gives a row (an unwrapped row, or an envelope's
/// `before`/`after`) in the form of [`NORM_SQL`], whatever physical type each column has in
/// the file (Parquet DECIMAL or JSON number, TIMESTAMP or epoch millis, DATE or epoch days,
/// Debezium's ZonedTimestamp and VariableScaleDecimal).
const NORMALISE: &str = r#"
import datetime, decimal, base64, os, tempfile
import pyarrow.parquet as pq
decimal.getcontext().prec=100
UTC=datetime.timezone.utc
EPOCH=datetime.datetime(1970,1,1,tzinfo=UTC)
def us(s): return (datetime.datetime.fromisoformat(s.replace('Z','+00:00'))-EPOCH)//datetime.timedelta(microseconds=1)
def ms(v):
    if isinstance(v,int): return v
    if v.tzinfo is None: v=v.replace(tzinfo=UTC)
    return (v-EPOCH)//datetime.timedelta(milliseconds=1)
def day(v): return (v if isinstance(v,datetime.date) else datetime.date(1970,1,1)+datetime.timedelta(days=v)).isoformat()
def vsd(a):
    raw=a['value'] if isinstance(a['value'],bytes) else base64.b64decode(a['value'])
    return str(decimal.Decimal(int.from_bytes(raw,'big',signed=True)).scaleb(-a['scale']))
def opt(f,v): return None if v is None else f(v)
def norm(r):
    if r is None: return None
    return {'id':r['id'],'name':r['name'],'price':opt(str,r['price']),'happened_us':opt(us,r['happened']),'noted_ms':opt(ms,r['noted']),
            'born':opt(day,r['born']),'active':r['active'],'doc':opt(json.loads,r['doc']),'amount':opt(vsd,r['amount'])}
def download(prefix):
    d=tempfile.mkdtemp()
    keys=sorted(o['Key'] for p in s3.get_paginator('list_objects_v2').paginate(Bucket=BUCKET,Prefix=prefix) for o in p.get('Contents',[]))
    paths=[]
    for k in keys:
        path=os.path.join(d,k.replace('/','_'))
        s3.download_file(BUCKET,k,path)
        paths.append(path)
    return d,keys,paths
def schema_of(paths):
    schemas={str(pq.read_schema(p)) for p in paths}
    s=pq.read_schema(paths[0]) if paths else None
    return len(schemas),({f.name:str(f.type) for f in s} if s else {})
import duckdb
"#;

fn normalised(rows: &str) -> Vec<Json> {
    rows.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON from psql ({e}): {l}"))).collect()
}

/// One change of a key: its op and the row it carries (after image; before image for `d`).
#[derive(Debug, Clone, PartialEq)]
struct Change {
    op: String,
    row: Json,
    /// The before image (REPLICA IDENTITY FULL) of `u` and `d`.
    before: Option<Json>,
}

/// The table, its snapshot rows, and what the streamed statements do.
struct Workload {
    /// Per key, every change in order (snapshot `r` first).
    changes: BTreeMap<i64, Vec<Change>>,
}

impl Workload {
    fn create(pg: &Postgres) {
        pg.sql(
            "CREATE TABLE items (id int PRIMARY KEY, name text, price numeric(10,2), happened timestamptz, noted timestamp(3),
                                 born date, active boolean, doc jsonb, amount numeric);
             ALTER TABLE items REPLICA IDENTITY FULL;
             INSERT INTO items VALUES
               (1, 'alpha', 10.00, '2024-01-01 00:00:00+00', '2024-01-01 00:00:00', '2024-01-01', true, '{\"a\": 1}', 1.5),
               (2, 'beta', 0.01, '2024-02-29 23:59:59.999999+05:30', '2024-02-29 23:59:59.999', '2000-02-29', false, '[1, 2, 3]', -0.000001),
               (3, 'gamma with ünïcödé', -12345678.90, '1999-12-31 23:59:59.5-08', '1999-12-31 23:59:59.5', '1999-12-31', true, '\"s\"', 12345678901234567890.123456789),
               (4, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL);",
        );
    }

    /// The snapshot images, read before the connector starts.
    fn snapshot(pg: &Postgres) -> Self {
        let mut changes: BTreeMap<i64, Vec<Change>> = BTreeMap::new();
        for row in normalised(&pg.sql(&format!("SELECT {NORM_SQL} FROM items ORDER BY id"))) {
            changes.entry(row["id"].as_i64().unwrap()).or_default().push(Change { op: "r".into(), row, before: None });
        }
        Self { changes }
    }

    /// Runs the streamed statements, one transaction each, recording what they did.
    fn stream(&mut self, pg: &Postgres) {
        let statements = [
            ("c", "INSERT INTO items VALUES (5, 'epsilon', 5.55, '2024-05-05 05:05:05.555555+02', '2024-05-05 05:05:05.555', '2024-05-05', true, '{\"tags\": [\"x\", \"y\"]}', 123.456789)"),
            ("c", "INSERT INTO items VALUES (6, 'zeta', -6.66, now(), '2024-06-06 06:06:06', '2024-06-06', false, '{}', 0)"),
            ("u", "UPDATE items SET name = 'beta 2', price = price + 0.01, doc = '{\"v\": 2}' WHERE id = 2"),
            ("u", "UPDATE items SET active = false, happened = happened + interval '1 day' WHERE id = 5"),
            ("d", "DELETE FROM items WHERE id = 3"),
            ("d", "DELETE FROM items WHERE id = 6"),
            ("c", "INSERT INTO items (id) VALUES (7)"),
            ("u", "UPDATE items SET price = 99999999.99, noted = '1969-12-31 23:59:59.999', born = '1900-01-01', amount = 100 WHERE id = 1"),
            ("u", "UPDATE items SET name = 'was null' WHERE id = 4"),
        ];
        for (op, sql) in statements {
            let rows = normalised(&pg.sql(&format!("{sql} RETURNING {NORM_SQL}")));
            assert_eq!(rows.len(), 1, "{sql} changed {} rows", rows.len());
            let row = rows.into_iter().next().unwrap();
            let id = row["id"].as_i64().unwrap();
            let previous = self.changes.get(&id).and_then(|c| c.last()).map(|c| c.row.clone());
            let before = if op == "c" { None } else { previous };
            self.changes.entry(id).or_default().push(Change { op: op.into(), row, before });
        }
    }

    fn total(&self) -> usize {
        self.changes.values().map(Vec::len).sum()
    }

    /// The table now, normalised, by key.
    fn table(pg: &Postgres) -> BTreeMap<i64, Json> {
        normalised(&pg.sql(&format!("SELECT {NORM_SQL} FROM items ORDER BY id")))
            .into_iter()
            .map(|r| (r["id"].as_i64().unwrap(), r))
            .collect()
    }
}

fn worker(dir: &Path) -> Worker {
    Worker::start(
        dir,
        &[
            ("key.converter", "org.apache.kafka.connect.json.JsonConverter"),
            ("value.converter", "org.apache.kafka.connect.json.JsonConverter"),
            ("key.converter.schemas.enable", "true"),
            ("value.converter.schemas.enable", "true"),
        ],
    )
}

fn source(w: &Worker, pg: &Postgres, extra: Json) {
    let mut config = json!({
        "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
        "database.hostname": "127.0.0.1", "database.port": pg.port.to_string(), "database.user": "postgres",
        "database.dbname": "postgres", "topic.prefix": "pg", "slot.name": "s3_slot", "plugin.name": "pgoutput",
        "table.include.list": "public.items", "poll.interval.ms": "100", "status.update.interval.ms": "500",
    });
    config.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
    let (code, body) = w.post("/connectors", &json!({"name": "src", "config": config}));
    assert_eq!(code, 201, "{body}");
    w.wait_running("src", 1);
    // Changes made from now on are streamed, not read by the snapshot.
    eventually(Duration::from_secs(60), "the snapshot's last record in the log", || {
        consume(w, TOPIC).iter().any(|r| r["value"]["payload"]["source"]["snapshot"] == "last")
    });
}

/// The records of `topic` in the worker's embedded log (none before it exists).
fn consume(w: &Worker, topic: &str) -> Vec<Json> {
    let data = w.dir.join("data");
    let (code, out, err) = Worker::cli(&["topics", "consume", topic, "--data-dir", data.to_str().unwrap(), "--from-beginning"]);
    if err.contains("does not exist") {
        return Vec::new(); // not created yet
    }
    assert_eq!(code, 0, "{err}");
    out.lines().map(|l| serde_json::from_str(l).expect("a JSON record")).collect()
}

/// An S3 sink of the source's topic writing under `dir/`, with `extra` keys.
fn sink(w: &Worker, moto: &Moto, name: &str, dir: &str, format: &str, extra: Json) {
    let mut config = json!({
        "connector.class": "io.confluent.connect.s3.S3SinkConnector", "topics": TOPIC, "s3.bucket.name": BUCKET,
        "s3.region": "us-east-1", "store.url": moto.url(), "aws.access.key.id": "t", "aws.secret.access.key": "t",
        "format.class": format, "topics.dir": dir, "flush.size": "4", "behavior.on.null.values": "ignore",
        // Uploads the last, partly filled objects too.
        "rotate.schedule.interval.ms": "1000", "timezone": "UTC",
    });
    config.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
    let (code, body) = w.post("/connectors", &json!({"name": name, "config": config}));
    assert_eq!(code, 201, "{body}");
    w.wait_running(name, 1);
}

/// Runs a reader script until it reports `want` rows; returns its output then.
fn read_until(moto: &Moto, w: &Worker, script: &str, want: usize) -> Json {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let out: Json = serde_json::from_str(&moto.py(&format!("{NORMALISE}\n{script}"))).expect("reader JSON");
        let n = out["rows"].as_array().map_or(0, Vec::len);
        assert!(n <= want, "more rows in S3 than changes ({n} > {want}): {out}\nworker output:\n{}", w.output());
        if n == want {
            return out;
        }
        if Instant::now() > deadline {
            let status: Vec<Json> =
                ["src", "rows", "envelopes", "json"].iter().map(|c| w.get(&format!("/connectors/{c}/status")).1).collect();
            panic!("{n} of {want} rows in S3 after 60 s: {out}\nconnectors: {status:#?}\nworker output:\n{}", w.output());
        }
        std::thread::sleep(Duration::from_millis(300));
    }
}

fn by_key(rows: &Json, key: impl Fn(&Json) -> i64) -> BTreeMap<i64, Vec<Json>> {
    let mut m: BTreeMap<i64, Vec<Json>> = BTreeMap::new();
    for r in rows.as_array().unwrap() {
        m.entry(key(r)).or_default().push(r.clone());
    }
    m
}

#[test]
fn pg_to_s3_unwrapped_changes_are_typed_parquet_rows() {
    let pg = Postgres::start();
    Workload::create(&pg);
    let mut work = Workload::snapshot(&pg);
    let moto = Moto::start(BUCKET);
    let dir = tempfile::tempdir().unwrap();
    let w = worker(dir.path());
    source(&w, &pg, json!({"time.precision.mode": "connect"}));
    sink(
        &w,
        &moto,
        "rows",
        "rows",
        "io.confluent.connect.s3.format.parquet.ParquetFormat",
        json!({"transforms": "unwrap", "transforms.unwrap.type": "io.debezium.transforms.ExtractNewRecordState",
               "transforms.unwrap.delete.handling.mode": "rewrite", "transforms.unwrap.add.fields": "op"}),
    );
    work.stream(&pg);

    let out = read_until(
        &moto,
        &w,
        r#"
d,keys,paths=download('rows/')
n,schema=schema_of(paths)
rows=[]
for p in paths:
    for r in pq.read_table(p).to_pylist():
        rows.append({'op':r['__op'],'deleted':r['__deleted'],'row':norm(r)})
state=None
if paths:
    state=[list(r) for r in duckdb.sql(f"""
        SELECT id, name, CAST(price AS VARCHAR), CAST(born AS VARCHAR), active
        FROM (SELECT *, row_number() OVER (PARTITION BY id ORDER BY filename DESC, file_row_number DESC) AS newest
              FROM read_parquet('{d}/*.parquet', filename=true, file_row_number=true))
        WHERE newest = 1 AND __deleted = 'false' ORDER BY id""").fetchall()]
print(json.dumps({'keys':keys,'schemas':n,'schema':schema,'rows':rows,'state':state},default=str))
"#,
        work.total(),
    );

    // Typed columns, the same schema in every object, names as Confluent's.
    assert_eq!(out["schemas"], 1, "objects with different schemas: {out}");
    let schema = &out["schema"];
    for (column, ty) in [
        ("id", "int32"),
        ("name", "string"),
        ("price", "decimal128(10, 2)"),
        ("happened", "string"),
        ("noted", "timestamp[ms, tz=UTC]"),
        ("born", "date32[day]"),
        ("active", "bool"),
        ("doc", "string"),
        ("amount", "struct<scale: int32 not null, value: binary not null>"),
        ("__deleted", "string"),
        ("__op", "string"),
    ] {
        assert_eq!(schema[column], ty, "column {column}: {schema}");
    }
    for key in out["keys"].as_array().unwrap() {
        let key = key.as_str().unwrap();
        assert!(
            key.starts_with(&format!("rows/{TOPIC}/partition=")) && key.ends_with(".snappy.parquet") && key.contains(&format!("/{TOPIC}+")),
            "{key}"
        );
    }

    // Per key, every change in order: the row after it (before it, for a delete).
    let rows = by_key(&out["rows"], |r| r["row"]["id"].as_i64().unwrap());
    assert_eq!(rows.keys().collect::<Vec<_>>(), work.changes.keys().collect::<Vec<_>>());
    for (id, expected) in &work.changes {
        let got: Vec<(String, String, Json)> = rows[id]
            .iter()
            .map(|r| (r["op"].as_str().unwrap().to_owned(), r["deleted"].as_str().unwrap().to_owned(), r["row"].clone()))
            .collect();
        let want: Vec<(String, String, Json)> = expected.iter().map(|c| (c.op.clone(), (c.op == "d").to_string(), c.row.clone())).collect();
        assert_eq!(got, want, "key {id}");
    }

    // The warehouse query: the newest row of each key that is not deleted is the table.
    let table = Workload::table(&pg);
    assert_eq!(table.len(), 5);
    let state = &out["state"];
    assert!(!state.is_null(), "no objects for duckdb to query: {out}");
    {
        let want: Vec<Json> = pg
            .sql("SELECT json_build_array(id, name, price::text, born::text, active) FROM items ORDER BY id")
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let got = state.as_array().unwrap().clone();
        assert_eq!(got, want, "newest rows per key (duckdb over the objects) differ from the table");
    }
    let status = w.get("/connectors/rows/status").1;
    assert_eq!(status["tasks"][0]["state"], "RUNNING", "{status}");
}

#[test]
fn pg_to_s3_raw_envelopes_keep_op_and_images_in_parquet_and_json() {
    let pg = Postgres::start();
    Workload::create(&pg);
    let mut work = Workload::snapshot(&pg);
    let moto = Moto::start(BUCKET);
    let dir = tempfile::tempdir().unwrap();
    let w = worker(dir.path());
    source(&w, &pg, json!({}));
    sink(&w, &moto, "envelopes", "envelopes", "io.confluent.connect.s3.format.parquet.ParquetFormat", json!({}));
    sink(&w, &moto, "json", "json", "io.confluent.connect.s3.format.json.JsonFormat", json!({"json.decimal.format": "NUMERIC"}));
    work.stream(&pg);

    let parquet = read_until(
        &moto,
        &w,
        r#"
d,keys,paths=download('envelopes/')
n,schema=schema_of(paths)
rows=[]
for p in paths:
    for r in pq.read_table(p).to_pylist():
        rows.append({'op':r['op'],'before':norm(r['before']),'after':norm(r['after']),'snapshot':r['source']['snapshot'],
                     'table':r['source']['table'],'lsn':r['source']['lsn'],'ts_ms':r['ts_ms']})
ops=None
if paths:
    ops={str(k):v for k,v in duckdb.sql(f"""
        SELECT coalesce(after.id, before.id), string_agg(op, '' ORDER BY filename, file_row_number)
        FROM read_parquet('{d}/*.parquet', filename=true, file_row_number=true) GROUP BY 1""").fetchall()}
print(json.dumps({'keys':keys,'schemas':n,'schema':schema,'rows':rows,'ops':ops},default=str))
"#,
        work.total(),
    );
    let json_out = read_until(
        &moto,
        &w,
        r#"
d,keys,paths=download('json/')
rows=[]
for p in paths:
    for line in open(p).read().splitlines():
        r=json.loads(line,parse_float=decimal.Decimal)
        rows.append({'op':r['op'],'before':norm(r['before']),'after':norm(r['after']),'snapshot':r['source']['snapshot'],
                     'table':r['source']['table'],'lsn':r['source']['lsn'],'ts_ms':r['ts_ms']})
print(json.dumps({'keys':keys,'rows':rows},default=str))
"#,
        work.total(),
    );

    assert_eq!(parquet["schemas"], 1, "objects with different schemas: {parquet}");
    let schema = &parquet["schema"];
    for column in ["before", "after", "source", "op", "ts_ms"] {
        assert!(schema.get(column).is_some(), "no column {column}: {schema}");
    }
    let after = schema["after"].as_str().unwrap();
    for field in ["id: int32 not null", "price: decimal128(10, 2)", "noted: int64", "born: int32", "active: bool", "happened: string"] {
        assert!(after.contains(field), "after has no {field}: {after}");
    }

    for (format, out) in [("parquet", &parquet), ("json", &json_out)] {
        let rows = by_key(&out["rows"], |r| r["after"]["id"].as_i64().or(r["before"]["id"].as_i64()).expect("an image with the key"));
        assert_eq!(rows.keys().collect::<Vec<_>>(), work.changes.keys().collect::<Vec<_>>(), "{format}");
        for (id, expected) in &work.changes {
            let got = &rows[id];
            let ops: Vec<&str> = got.iter().map(|r| r["op"].as_str().unwrap()).collect();
            let want_ops: Vec<&str> = expected.iter().map(|c| c.op.as_str()).collect();
            assert_eq!(ops, want_ops, "{format}: ops of key {id}");
            for (r, c) in got.iter().zip(expected) {
                assert_eq!(r["table"], "items", "{format}: {r}");
                assert!(r["ts_ms"].as_i64().is_some_and(|t| t > 0), "{format}: {r}");
                if c.op == "d" {
                    assert_eq!(r["after"], Json::Null, "{format}: key {id}: a delete has no after image: {r}");
                    assert_eq!(r["before"], c.row, "{format}: key {id}: before image of the delete");
                } else {
                    assert_eq!(r["after"], c.row, "{format}: key {id}: after image of {}", c.op);
                    assert_eq!(r["before"], c.before.clone().unwrap_or(Json::Null), "{format}: key {id}: before image of {}", c.op);
                }
                let snapshot = r["snapshot"].as_str().unwrap_or_default();
                assert_eq!(c.op == "r", snapshot != "false", "{format}: source.snapshot={snapshot} on op {}", c.op);
            }
        }
    }

    // The same op sequences from a second reader querying the files.
    assert!(!parquet["ops"].is_null(), "no objects for duckdb to query: {parquet}");
    {
        let want: BTreeMap<String, Json> =
            work.changes.iter().map(|(id, c)| (id.to_string(), Json::String(c.iter().map(|c| c.op.as_str()).collect()))).collect();
        let got: BTreeMap<String, Json> = parquet["ops"].as_object().unwrap().iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        assert_eq!(got, want, "ops per key (duckdb over the objects)");
    }

    // The deletes' tombstones are in the log, and the sinks skipped them without failing.
    let tombstones = consume(&w, TOPIC).iter().filter(|r| r["value"].is_null()).count();
    assert_eq!(tombstones, 2, "one tombstone per delete in the log");
    for name in ["envelopes", "json"] {
        let status = w.get(&format!("/connectors/{name}/status")).1;
        assert_eq!(status["tasks"][0]["state"], "RUNNING", "{status}");
    }
}
