//! The moto server, a task driver, records, and readers for every format.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;

use aws_sdk_s3::config::{BehaviorVersion, Credentials, Region};
use sluice_api::{ConnectResult, Props, Schema, SchemaRef, SinkRecord, SinkTask, SinkTaskContext, Struct, Task, TopicPartition, Value};
use sluice_connectors::s3_sink;

pub const BUCKET: &str = "sink-bucket";

fn script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/services/s3.sh")
}

/// The venv that `s3.sh` installs (moto, boto3, pyarrow).
pub fn venv() -> PathBuf {
    let out = Command::new("bash").arg(script()).arg("install").output().expect("run s3.sh install");
    assert!(out.status.success(), "s3.sh install failed: {}", String::from_utf8_lossy(&out.stderr));
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
}

pub struct Moto {
    pub port: u16,
    pid: Option<String>,
    env: Vec<(String, String)>,
}

impl Moto {
    pub fn start() -> Self {
        Self::start_with(&[])
    }

    pub fn start_with(env: &[(&str, &str)]) -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let mut m = Self { port, pid: None, env: env.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect() };
        m.restart();
        m
    }

    /// Starts (again) on the same port. moto keeps its state in memory: a restarted server is empty.
    pub fn restart(&mut self) {
        let out = Command::new("bash")
            .arg(script())
            .arg("start")
            .arg(self.port.to_string())
            .envs(self.env.iter().cloned())
            .output()
            .expect("run s3.sh start");
        assert!(out.status.success(), "s3.sh start failed (the test needs a real S3 server): {}", String::from_utf8_lossy(&out.stderr));
        self.pid = Some(String::from_utf8_lossy(&out.stdout).trim().to_owned());
    }

    pub fn stop(&mut self) {
        if let Some(pid) = self.pid.take() {
            let _ = Command::new("bash").arg(script()).arg("stop").arg(pid).status();
        }
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub fn client(&self) -> aws_sdk_s3::Client {
        let conf = aws_sdk_s3::config::Builder::new()
            .behavior_version(BehaviorVersion::latest())
            .region(Region::new("us-east-1"))
            .endpoint_url(self.url())
            .force_path_style(true)
            .credentials_provider(Credentials::new("test", "test", None, None, "test"))
            .request_checksum_calculation(aws_sdk_s3::config::RequestChecksumCalculation::WhenRequired)
            .response_checksum_validation(aws_sdk_s3::config::ResponseChecksumValidation::WhenRequired)
            .build();
        aws_sdk_s3::Client::from_conf(conf)
    }

    pub async fn create_bucket(&self) {
        self.client().create_bucket().bucket(BUCKET).send().await.expect("create bucket");
    }

    /// Every object key under the bucket, sorted.
    pub async fn keys(&self) -> Vec<String> {
        let mut out = Vec::new();
        let mut token = None;
        loop {
            let r = self.client().list_objects_v2().bucket(BUCKET).set_continuation_token(token).send().await.expect("list objects");
            out.extend(r.contents().iter().filter_map(|o| o.key().map(str::to_owned)));
            match r.next_continuation_token() {
                Some(t) => token = Some(t.to_owned()),
                None => break,
            }
        }
        out.sort();
        out
    }

    pub async fn get(&self, key: &str) -> Vec<u8> {
        let r = self.client().get_object().bucket(BUCKET).key(key).send().await.expect("get object");
        r.body.collect().await.expect("read body").into_bytes().to_vec()
    }

    pub async fn incomplete_uploads(&self) -> usize {
        let r = self.client().list_multipart_uploads().bucket(BUCKET).send().await.expect("list multipart uploads");
        r.uploads().len()
    }

    pub fn props(&self, extra: &[(&str, &str)]) -> Props {
        let url = self.url();
        let mut p: Props = [
            ("connector.class", "s3"),
            ("topics", "orders"),
            ("s3.bucket.name", BUCKET),
            ("s3.region", "us-east-1"),
            ("store.url", url.as_str()),
            ("aws.access.key.id", "test"),
            ("aws.secret.access.key", "test"),
            ("s3.retry.backoff.ms", "20"),
            ("s3.part.retries", "2"),
        ]
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
        p.extend(extra.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())));
        p
    }
}

impl Drop for Moto {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A started sink task.
pub async fn task(props: Props) -> ConnectResult<Box<dyn SinkTask>> {
    let plugin = s3_sink::plugin();
    let connector = (plugin.create)();
    let Task::Sink(mut t) = connector.create_task() else { panic!("a sink") };
    t.start(SinkTaskContext::new("s3-test".into(), 0, props)).await?;
    Ok(t)
}

/// Puts like the runtime: a retriable error redelivers the same batch (up to `tries` times).
pub async fn put_retrying(t: &mut Box<dyn SinkTask>, records: &[SinkRecord], tries: usize) -> usize {
    for attempt in 0..tries {
        match t.put(records.to_vec()).await {
            Ok(()) => return attempt,
            Err(e) if e.is_retriable() => tokio::time::sleep(std::time::Duration::from_millis(100)).await,
            Err(e) => panic!("fatal put error: {}", e.trace()),
        }
    }
    panic!("put still failing after {tries} tries");
}

pub async fn durable(t: &mut Box<dyn SinkTask>, tp: &TopicPartition, next: i64) -> Option<i64> {
    let cur: BTreeMap<_, _> = [(tp.clone(), next)].into_iter().collect();
    t.pre_commit(&cur).await.unwrap().get(tp).copied()
}

/// 2024-03-05T10:00:00Z
pub const T0: i64 = 1_709_632_800_000;

pub fn order_schema() -> SchemaRef {
    Schema::struct_of([
        ("id", Schema::int64().into_ref()),
        ("region", Schema::string().into_ref()),
        ("qty", Schema::int32().into_ref()),
        ("small", Schema::int8().into_ref()),
        ("price", Schema::decimal(2).into_ref()),
        ("ratio", Schema::float64().into_ref()),
        ("ok", Schema::boolean().into_ref()),
        ("day", Schema::date().into_ref()),
        ("at", Schema::timestamp().into_ref()),
        ("note", Schema::string().optional().into_ref()),
        ("tags", Schema::array(Schema::string().into_ref()).into_ref()),
        ("attrs", Schema::map(Schema::string().into_ref(), Schema::int32().into_ref()).into_ref()),
        (
            "ship",
            Schema::struct_of([("city", Schema::string().into_ref()), ("zip", Schema::int32().optional().into_ref())])
                .optional()
                .into_ref(),
        ),
        ("blob", Schema::bytes().into_ref()),
    ])
    .named("shop.Order")
    .with_version(1)
    .into_ref()
}

pub fn region_of(i: i64) -> &'static str {
    if i % 2 == 0 {
        "eu"
    } else {
        "us"
    }
}

pub fn order_value(schema: &SchemaRef, i: i64) -> Value {
    let ship_schema = schema.field("ship").unwrap().schema.clone();
    let ship = if i % 3 == 0 {
        Value::Null
    } else {
        Value::Struct(Struct::new(ship_schema).with("city", format!("city-{i}").as_str()).with("zip", Value::Int32(1000 + i as i32)))
    };
    Value::Struct(
        Struct::new(schema.clone())
            .with("id", i)
            .with("region", region_of(i))
            .with("qty", (i * 10) as i32)
            .with("small", Value::Int8((i % 100) as i8))
            .with("price", Value::Bytes(((i * 100 + 5) as i32).to_be_bytes().to_vec()))
            .with("ratio", Value::Float64(i as f64 / 4.0))
            .with("ok", i % 2 == 0)
            .with("day", Value::Int32(19_787))
            .with("at", Value::Int64(T0 + i * 60_000))
            .with("note", if i % 2 == 0 { Value::Null } else { Value::String(format!("note {i}")) })
            .with("tags", Value::Array(vec![format!("t{i}").into(), "x".into()]))
            .with("attrs", Value::Map(vec![("a".into(), Value::Int32(i as i32))]))
            .with("ship", ship)
            .with("blob", Value::Bytes(vec![i as u8, 0xff])),
    )
}

/// Orders `from..to` of partition 0, with record timestamps `ts(i)`.
pub fn orders(from: i64, to: i64, ts: impl Fn(i64) -> i64) -> Vec<SinkRecord> {
    let schema = order_schema();
    (from..to)
        .map(|i| SinkRecord {
            topic: "orders".into(),
            partition: 0,
            offset: i,
            key_schema: None,
            key: Value::Null,
            value_schema: Some(schema.clone()),
            value: order_value(&schema, i),
            timestamp: Some(ts(i)),
            ..Default::default()
        })
        .collect()
}

pub fn tp() -> TopicPartition {
    TopicPartition::new("orders", 0)
}

// ---- readers: the ids in an object, in order ----

pub fn json_ids(bytes: &[u8], gz: bool) -> Vec<i64> {
    let text = if gz {
        use std::io::Read as _;
        let mut s = String::new();
        flate2::read::GzDecoder::new(bytes).read_to_string(&mut s).expect("gunzip");
        s
    } else {
        String::from_utf8(bytes.to_vec()).unwrap()
    };
    text.lines().map(|l| serde_json::from_str::<serde_json::Value>(l).expect("a JSON line")["id"].as_i64().expect("id")).collect()
}

pub fn avro_records(bytes: &[u8]) -> (serde_json::Value, Vec<apache_avro::types::Value>) {
    let reader = apache_avro::Reader::new(bytes).expect("an Avro container file");
    let schema: serde_json::Value = serde_json::from_str(&reader.writer_schema().canonical_form()).unwrap();
    let values = reader.map(|v| v.expect("an Avro record")).collect();
    (schema, values)
}

pub fn avro_ids(bytes: &[u8]) -> Vec<i64> {
    avro_records(bytes)
        .1
        .into_iter()
        .map(|v| match v {
            apache_avro::types::Value::Record(fields) => match &fields[0].1 {
                apache_avro::types::Value::Long(l) => *l,
                other => panic!("id is {other:?}"),
            },
            other => panic!("not a record: {other:?}"),
        })
        .collect()
}

pub fn parquet_batches(bytes: &[u8]) -> Vec<arrow_array::RecordBatch> {
    let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(bytes::Bytes::from(bytes.to_vec()))
        .expect("a Parquet file")
        .build()
        .unwrap();
    reader.map(|b| b.expect("a batch")).collect()
}

pub fn parquet_ids(bytes: &[u8]) -> Vec<i64> {
    use arrow_array::cast::AsArray as _;
    parquet_batches(bytes).iter().flat_map(|b| b.column(0).as_primitive::<arrow_array::types::Int64Type>().values().to_vec()).collect()
}

/// Reads a Parquet file with pyarrow (from the s3.sh venv) and returns its rows as JSON.
pub fn pyarrow_rows(bytes: &[u8]) -> Vec<serde_json::Value> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f.parquet");
    std::fs::write(&path, bytes).unwrap();
    let py = venv().join("bin/python");
    let code = "import sys,json,pyarrow.parquet as pq\nt=pq.read_table(sys.argv[1])\nprint(json.dumps({'schema':str(t.schema),'rows':t.to_pylist()},default=str))";
    let out = Command::new(py).arg("-I").arg("-c").arg(code).arg(&path).output().expect("run python");
    assert!(out.status.success(), "pyarrow could not read the file: {}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let schema = v["schema"].as_str().unwrap().to_owned();
    assert!(schema.contains("price: decimal128(38, 2)"), "{schema}");
    assert!(schema.contains("at: timestamp[ms, tz=UTC]"), "{schema}");
    assert!(schema.contains("day: date32"), "{schema}");
    v["rows"].as_array().unwrap().clone()
}

/// Reads a Parquet file with DuckDB (s3.sh installs it in the venv; a missing module fails):
/// `[count, sum(id), price of id 1 as text, ship.city of id 1]`.
pub fn duckdb_summary(bytes: &[u8]) -> serde_json::Value {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f.parquet");
    std::fs::write(&path, bytes).unwrap();
    let py = venv().join("bin/python");
    let code = "import sys,json,duckdb\n\
c=duckdb.connect()\nn,s=c.execute('select count(*), sum(id) from read_parquet(?)',[sys.argv[1]]).fetchone()\n\
p,city=c.execute('select cast(price as varchar), ship.city from read_parquet(?) where id=1',[sys.argv[1]]).fetchone()\n\
print(json.dumps([n,int(s),p,city]))";
    let out = Command::new(py).arg("-I").arg("-c").arg(code).arg(&path).output().expect("run python");
    assert!(out.status.success(), "duckdb could not read the file: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

pub fn ids_of(format: &str, key: &str, bytes: &[u8]) -> Vec<i64> {
    match format {
        "json" => json_ids(bytes, key.ends_with(".gz")),
        "avro" => avro_ids(bytes),
        "parquet" => parquet_ids(bytes),
        other => panic!("{other}"),
    }
}

pub fn format_class(format: &str) -> &'static str {
    match format {
        "json" => s3_sink::JSON_FORMAT,
        "avro" => s3_sink::AVRO_FORMAT,
        "parquet" => s3_sink::PARQUET_FORMAT,
        other => panic!("{other}"),
    }
}
