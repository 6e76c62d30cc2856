//! `GET /metrics` through the real binary, read by Prometheus' own parser of its text
//! format (`prometheus_client` from the tools venv): Connect's worker, connector, task,
//! source, sink and error metrics under Strimzi's names (and Confluent's on request), with
//! values checked against what the pipelines did.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::process::{Command, Stdio};
use std::time::Duration;

use sluice_tests::{eventually, json, tools_python, Json, Worker};

/// Every sample of the page as Prometheus parses it: (name, labels) → value.
type Samples = BTreeMap<(String, BTreeMap<String, String>), f64>;

fn parse(text: &str) -> Samples {
    let script = r#"
import json, sys
from prometheus_client.parser import text_string_to_metric_families
out = []
for family in text_string_to_metric_families(sys.stdin.read()):
    for s in family.samples:
        out.append([s.name, s.labels, s.value, family.type])
print(json.dumps(out))
"#;
    let mut child = Command::new(tools_python())
        .arg("-I")
        .arg("-c")
        .arg(script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the tools venv's python");
    child.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "prometheus_client could not parse the page: {}\n{text}", String::from_utf8_lossy(&out.stderr));
    let parsed: Vec<(String, BTreeMap<String, String>, f64, String)> = serde_json::from_slice(&out.stdout).unwrap();
    parsed.into_iter().map(|(n, l, v, _)| ((n, l), v)).collect()
}

fn value(samples: &Samples, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    let labels = labels.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
    samples.get(&(name.to_owned(), labels)).copied()
}

fn scrape(w: &Worker) -> (String, Samples) {
    let (code, ctype, text) = w.get_text("/metrics");
    assert_eq!(code, 200, "{text}");
    assert!(ctype.starts_with("text/plain; version=0.0.4"), "{ctype}");
    let samples = parse(&text);
    (text, samples)
}

/// The distinct metric names in `text` that start with one of `prefixes`.
fn regex_names(text: &str, prefixes: &[&str]) -> std::collections::BTreeSet<String> {
    let mut out = std::collections::BTreeSet::new();
    for p in prefixes {
        for (i, _) in text.match_indices(p) {
            let name: String = text[i..].chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
            out.insert(name);
        }
    }
    out
}

fn create(w: &Worker, name: &str, config: Json) {
    let (code, body) = w.post("/connectors", &json!({"name": name, "config": config}));
    assert_eq!(code, 201, "{body}");
}

#[test]
fn metrics_count_what_the_pipelines_did_under_strimzis_names() {
    let dir = tempfile::tempdir().unwrap();
    let w = Worker::start(dir.path(), &[]);
    let input = dir.path().join("in.txt");
    let lines: String = (1..=100).map(|i| format!("line {i}\n")).collect();
    std::fs::write(&input, lines).unwrap();
    let out = dir.path().join("out.txt");
    create(&w, "src", json!({"connector.class": "FileStreamSource", "file": input.to_str().unwrap(), "topic": "lines"}));
    create(&w, "sink", json!({"connector.class": "FileStreamSink", "file": out.to_str().unwrap(), "topics": "lines"}));
    // Strings in, JSON out: "oops" is no JSON, skipped under errors.tolerance=all.
    let mixed = dir.path().join("mixed.txt");
    std::fs::write(&mixed, "1\noops\n2\n").unwrap();
    let string = "org.apache.kafka.connect.storage.StringConverter";
    create(&w, "mixed-src", json!({"connector.class": "FileStreamSource", "file": mixed.to_str().unwrap(), "topic": "mixed", "value.converter": string}));
    create(
        &w,
        "mixed-sink",
        json!({"connector.class": "FileStreamSink", "file": dir.path().join("mixed-out.txt").to_str().unwrap(), "topics": "mixed",
               "value.converter": "org.apache.kafka.connect.json.JsonConverter", "value.converter.schemas.enable": "false",
               "errors.tolerance": "all"}),
    );
    // A task that cannot open its file fails.
    let regular = dir.path().join("regular.txt");
    std::fs::write(&regular, "x\n").unwrap();
    create(&w, "broken", json!({"connector.class": "FileStreamSource", "file": regular.join("x").to_str().unwrap(), "topic": "t"}));
    eventually(Duration::from_secs(30), "the sink wrote every line", || {
        std::fs::read_to_string(&out).is_ok_and(|t| t.lines().count() == 100)
    });
    w.wait_for("/connectors/broken/status", Duration::from_secs(30), |_, b| b["tasks"][0]["state"] == "FAILED");

    let mut samples = Samples::new();
    eventually(Duration::from_secs(30), "the counters of every pipeline", || {
        samples = scrape(&w).1;
        value(&samples, "kafka_connect_sink_task_sink_record_send_total", &[("connector", "sink"), ("task", "0")]) == Some(100.0)
            && value(&samples, "kafka_connect_task_error_total_records_skipped", &[("connector", "mixed-sink"), ("task", "0")]) == Some(1.0)
    });
    let v = |name: &str, labels: &[(&str, &str)]| value(&samples, name, labels).unwrap_or_else(|| panic!("no {name}{labels:?}"));
    let task = |c: &'static str| [("connector", c), ("task", "0")];
    assert_eq!(v("kafka_connect_worker_connector_count", &[]), 5.0);
    assert_eq!(v("kafka_connect_worker_task_count", &[]), 5.0);
    assert_eq!(v("kafka_connect_source_task_source_record_poll_total", &task("src")), 100.0);
    assert_eq!(v("kafka_connect_source_task_source_record_write_total", &task("src")), 100.0);
    assert_eq!(v("kafka_connect_sink_task_sink_record_read_total", &task("sink")), 100.0);
    assert_eq!(v("kafka_connect_sink_task_sink_record_send_total", &task("mixed-sink")), 2.0);
    assert_eq!(v("kafka_connect_task_error_total_record_errors", &task("mixed-sink")), 1.0);
    assert_eq!(v("kafka_connect_task_error_total_record_failures", &task("mixed-sink")), 1.0);
    assert_eq!(v("kafka_connect_task_error_total_record_errors", &task("sink")), 0.0);
    assert!(v("kafka_connect_task_error_last_error_timestamp", &task("mixed-sink")) > 1.7e12);
    assert_eq!(v("kafka_connect_worker_connector_failed_task_count", &[("connector", "broken")]), 1.0);
    assert_eq!(v("kafka_connect_worker_connector_running_task_count", &[("connector", "broken")]), 0.0);
    assert_eq!(v("kafka_connect_worker_connector_running_task_count", &[("connector", "src")]), 1.0);
    assert_eq!(v("kafka_connect_connector_status", &[("connector", "broken"), ("status", "running")]), 1.0);
    assert_eq!(v("kafka_connect_connector_task_status", &[("connector", "broken"), ("task", "0"), ("status", "failed")]), 1.0);
    assert_eq!(v("kafka_connect_connector_connector_class", &[("connector", "src"), ("connector_class", "org.apache.kafka.connect.file.FileStreamSourceConnector")]), 1.0);
    assert_eq!(v("kafka_connect_worker_connector_startup_success_total", &[]), 5.0);
    assert_eq!(v("kafka_connect_worker_task_startup_attempts_total", &[]), 5.0);
    assert!(v("kafka_connect_connector_task_batch_size_max", &task("src")) >= 1.0);
    assert!(v("kafka_connect_sink_task_offset_commit_completion_total", &task("sink")) >= 1.0 || {
        // The first commit comes within offset.flush.interval.ms (1 s here).
        std::thread::sleep(Duration::from_secs(2));
        value(&scrape(&w).1, "kafka_connect_sink_task_offset_commit_completion_total", &task("sink")).unwrap_or(0.0) >= 1.0
    });
    let busy = v("sluice_task_busy_ratio", &task("sink"));
    assert!((0.0..=1.0).contains(&busy), "{busy}");
    assert!(v("process_resident_memory_bytes", &[]) > 1e6);
    assert!(v("process_cpu_seconds_total", &[]) > 0.0);

    // Deleting a connector removes its series.
    assert_eq!(w.delete("/connectors/broken").0, 204);
    let (text, samples) = scrape(&w);
    assert_eq!(value(&samples, "kafka_connect_worker_connector_count", &[]), Some(4.0));
    assert!(!text.contains("connector=\"broken\""), "{text}");
}

#[test]
fn confluent_naming_on_request() {
    let dir = tempfile::tempdir().unwrap();
    let w = Worker::start(dir.path(), &[("metrics.prometheus.naming", "confluent")]);
    let input = dir.path().join("in.txt");
    std::fs::write(&input, "a\nb\nc\n").unwrap();
    create(&w, "src", json!({"connector.class": "FileStreamSource", "file": input.to_str().unwrap(), "topic": "t"}));
    w.wait_running("src", 1);
    let mut samples = Samples::new();
    eventually(Duration::from_secs(30), "three polled records", || {
        samples = scrape(&w).1;
        value(&samples, "kafka_connect_source_task_metrics_source_record_poll_total", &[("connector", "src"), ("task", "0")]) == Some(3.0)
    });
    assert_eq!(value(&samples, "kafka_connect_connect_worker_metrics_connector_count", &[]), Some(1.0));
    assert_eq!(
        value(
            &samples,
            "kafka_connect_connector_metrics",
            &[
                ("connector", "src"),
                ("status", "running"),
                ("connector_class", "org.apache.kafka.connect.file.FileStreamSourceConnector"),
                ("connector_type", "source"),
                ("connector_version", env!("CARGO_PKG_VERSION")),
            ]
        ),
        Some(1.0)
    );
    assert!(samples.keys().all(|(n, _)| !n.starts_with("kafka_connect_worker_")), "no Strimzi names beside Confluent's");
}

#[test]
fn an_invalid_naming_stops_the_worker_at_start_naming_the_key() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("w.properties"), "listeners=http://127.0.0.1:0\nmetrics.prometheus.naming=jmx\n").unwrap();
    let (code, _, err) = Worker::cli(&["standalone", dir.path().join("w.properties").to_str().unwrap()]);
    assert_ne!(code, 0);
    assert!(err.contains("metrics.prometheus.naming"), "{err}");
}

/// The Postgres source's Debezium metrics (snapshot and streaming, under the names
/// Debezium's JMX-exporter example gives them) and its replication slot's WAL retention,
/// against a real PostgreSQL 15, checked against the rows snapshotted and streamed.
#[test]
fn the_postgres_source_publishes_debeziums_metrics_and_its_slot() {
    let pg = sluice_tests::Postgres::start();
    // With a limit the server reports safe_wal_size (without one it is null, and not published).
    pg.sql("ALTER SYSTEM SET max_slot_wal_keep_size = '1GB'");
    pg.sql("SELECT pg_reload_conf()");
    pg.sql("CREATE TABLE items (id int PRIMARY KEY, v text)");
    pg.sql("INSERT INTO items SELECT g, 'row ' || g FROM generate_series(1, 25) g");
    let dir = tempfile::tempdir().unwrap();
    let w = Worker::start(dir.path(), &[]);
    let config = pg.source_config("sluice_metrics", &[("sluice.slot.check.interval.ms", "300")]);
    create(&w, "pg", config);
    w.wait_running("pg", 1);
    let snapshot = [("connector", "pg"), ("task", "0"), ("plugin", "postgres"), ("name", "srv"), ("context", "snapshot")];
    let streaming = [("connector", "pg"), ("task", "0"), ("plugin", "postgres"), ("name", "srv"), ("context", "streaming")];
    eventually(Duration::from_secs(30), "the snapshot completed", || {
        value(&scrape(&w).1, "debezium_metrics_SnapshotCompleted", &snapshot) == Some(1.0)
    });
    let (_, s) = scrape(&w);
    assert_eq!(value(&s, "debezium_metrics_SnapshotRunning", &snapshot), Some(0.0));
    assert_eq!(value(&s, "debezium_metrics_TotalTableCount", &snapshot), Some(1.0));
    assert_eq!(value(&s, "debezium_metrics_RemainingTableCount", &snapshot), Some(0.0));
    let mut table = snapshot.to_vec();
    table.push(("table", "public.items"));
    assert_eq!(value(&s, "debezium_metrics_RowsScanned", &table), Some(25.0));
    assert_eq!(value(&s, "debezium_metrics_TotalNumberOfEventsSeen", &snapshot), Some(25.0));

    // Streaming: 10 inserts and 5 updates in 3 transactions.
    pg.sql("INSERT INTO items SELECT g, 'new ' || g FROM generate_series(26, 35) g");
    pg.sql("UPDATE items SET v = 'changed' WHERE id <= 3");
    pg.sql("UPDATE items SET v = 'changed' WHERE id BETWEEN 4 AND 5");
    eventually(Duration::from_secs(30), "15 change events streamed", || {
        value(&scrape(&w).1, "debezium_metrics_TotalNumberOfEventsSeen", &streaming) == Some(15.0)
    });
    let (text, s) = scrape(&w);
    assert_eq!(value(&s, "debezium_metrics_Connected", &streaming), Some(1.0), "{text}");
    let behind = value(&s, "debezium_metrics_MilliSecondsBehindSource", &streaming).expect("MilliSecondsBehindSource");
    assert!((0.0..60_000.0).contains(&behind), "{behind}");
    assert!(value(&s, "debezium_metrics_MilliSecondsSinceLastEvent", &streaming).is_some_and(|v| v >= 0.0), "{text}");
    // Commit time to durable in the log, at the last offset commit.
    eventually(Duration::from_secs(30), "the source lag", || {
        value(&scrape(&w).1, "sluice_source_lag_seconds", &[("connector", "pg"), ("task", "0")]).is_some_and(|v| (0.0..60.0).contains(&v))
    });

    // The slot's retained WAL, as the server counts it.
    let slot = [("connector", "pg"), ("task", "0"), ("slot", "sluice_metrics")];
    eventually(Duration::from_secs(30), "the slot's gauges", || {
        let s = scrape(&w).1;
        value(&s, "sluice_postgres_slot_retained_wal_bytes", &slot).is_some_and(|v| v > 0.0)
            && value(&s, "sluice_postgres_slot_wal_status", &[("connector", "pg"), ("task", "0"), ("slot", "sluice_metrics"), ("status", "reserved")])
                == Some(1.0)
    });
    let server: f64 = pg
        .sql("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn) FROM pg_replication_slots WHERE slot_name = 'sluice_metrics'")
        .trim()
        .parse()
        .unwrap();
    // Every series the Grafana dashboard reads from what a connector publishes itself
    // (Debezium's metrics, the slot, the source lag) is on this worker's page.
    let page = scrape(&w).1;
    let dashboard: Json = serde_json::from_str(&std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docker/grafana-dashboard.json")).unwrap()).unwrap();
    let published = regex_names(&dashboard.to_string(), &["debezium_metrics_", "sluice_postgres_", "sluice_source_lag_"]);
    assert!(published.len() >= 8, "{published:?}");
    for name in &published {
        assert!(page.keys().any(|(n, _)| n == name), "the dashboard reads {name}, which the Postgres source does not publish");
    }
    let ours = value(&scrape(&w).1, "sluice_postgres_slot_retained_wal_bytes", &slot).unwrap();
    // Read a moment apart: the server's WAL only grows in between.
    assert!(ours <= server && ours > 0.0, "ours {ours}, server {server}");
}

/// A sink's lag per partition (`sluice_sink_task_lag_records`), its scaling answer (the most
/// tasks that can help is its topic's partition count) and the worker's desired replicas.
#[test]
fn sink_lag_and_scaling_signals() {
    const ROWS: u64 = 500;
    let dir = tempfile::tempdir().unwrap();
    let w = Worker::start(dir.path(), &[]);
    let out = dir.path().join("out.txt");
    create(
        &w,
        "gen",
        json!({"connector.class": "datagen", "kafka.topic": "scale", "quickstart": "bench", "iterations": ROWS.to_string(),
            "max.interval": "0", "topic.creation.default.partitions": "3", "topic.creation.default.replication.factor": "-1"}),
    );
    // The sink comes once the source made its topic with 3 partitions; paused, it reads nothing.
    eventually(Duration::from_secs(30), "the generator's rows", || {
        value(&scrape(&w).1, "kafka_connect_source_task_source_record_write_total", &[("connector", "gen"), ("task", "0")]) == Some(ROWS as f64)
    });
    let (code, body) = w.post(
        "/connectors",
        &json!({"name": "sink", "initial_state": "PAUSED", "config": {"connector.class": "FileStreamSink", "file": out.to_str().unwrap(), "topics": "scale"}}),
    );
    assert_eq!(code, 201, "{body}");
    let lag = |s: &Samples| -> f64 {
        s.iter().filter(|((n, l), _)| n == "sluice_sink_task_lag_records" && l["connector"] == "sink" && l["topic"] == "scale").map(|(_, v)| *v).sum()
    };
    eventually(Duration::from_secs(30), "the paused sink's lag is every row", || lag(&scrape(&w).1) == ROWS as f64);
    let (_, s) = scrape(&w);
    let partitions = s.keys().filter(|(n, l)| n == "sluice_sink_task_lag_records" && l["connector"] == "sink").count();
    assert_eq!(partitions, 3, "one series per partition");
    let sink = [("connector", "sink"), ("task", "0")];
    assert_eq!(value(&s, "kafka_connect_sink_task_partition_count", &sink), Some(3.0));
    let lag_max = value(&s, "kafka_connect_sink_task_sink_record_lag_max", &sink).unwrap();
    assert!(lag_max > 0.0 && lag_max <= ROWS as f64, "{lag_max}");
    let gen = [("connector", "gen"), ("task", "0")];
    let (avg, max) = (value(&s, "kafka_connect_source_task_poll_batch_avg_time_ms", &gen).unwrap(), value(&s, "kafka_connect_source_task_poll_batch_max_time_ms", &gen).unwrap());
    assert!(avg > 0.0 && avg <= max, "poll batch time avg {avg} max {max}");
    assert!(value(&s, "sluice_worker_desired_replicas", &[]).is_some_and(|v| v >= 1.0));
    assert!(value(&s, "sluice_worker_load", &[]).is_some_and(|v| v >= 0.0));
    // The embedded log's own figures (log.fsync=always: every acknowledged batch was fsynced).
    assert!(value(&s, "sluice_log_bytes", &[]).is_some_and(|v| v > (ROWS * 64) as f64), "{:?}", value(&s, "sluice_log_bytes", &[]));
    let fsyncs = value(&s, "sluice_log_fsync_total", &[]).unwrap();
    assert!(fsyncs >= 1.0, "{fsyncs}");
    let fsync_time = value(&s, "sluice_log_fsync_seconds_total", &[]).unwrap();
    let longest = value(&s, "sluice_log_fsync_max_seconds", &[]).unwrap();
    assert!(longest > 0.0 && longest <= fsync_time, "max {longest}, total {fsync_time}");

    let (code, scaling) = w.get("/connectors/sink/scaling");
    assert_eq!(code, 200, "{scaling}");
    assert_eq!(scaling["type"], "sink");
    assert_eq!(scaling["tasks"], 1);
    assert_eq!(scaling["max_useful_tasks"], 3, "{scaling}");
    assert_eq!(scaling["scalable"], true, "{scaling}");
    assert_eq!(scaling["lag_records"].as_f64(), Some(ROWS as f64), "{scaling}");
    assert_eq!(scaling["local_tasks"], 1);
    assert!(scaling["recommended_tasks"].as_u64().is_some_and(|n| (1..=3).contains(&n)), "{scaling}");
    let (code, src) = w.get("/connectors/gen/scaling");
    assert_eq!(code, 200);
    assert_eq!(src["max_useful_tasks"], Json::Null, "{src}");
    assert_eq!(w.get("/connectors/nope/scaling").0, 404);

    // /health/connectors with a lag threshold: the paused sink's lag is a failure above it.
    let (code, health) = w.get("/health/connectors?max_lag=100&states=FAILED");
    assert_eq!(code, 503, "{health}");
    assert_eq!(health["failures"][0]["type"], "lag", "{health}");
    assert_eq!(health["failures"][0]["lag"].as_f64(), Some(ROWS as f64), "{health}");
    let (code, health) = w.get(&format!("/health/connectors?max_lag={ROWS}"));
    assert_eq!(code, 200, "{health}");

    let (code, _) = w.put_empty("/connectors/sink/resume");
    assert_eq!(code, 202);
    eventually(Duration::from_secs(30), "the lag drains", || lag(&scrape(&w).1) == 0.0);
    let s = scrape(&w).1;
    let (avg, max) = (value(&s, "kafka_connect_sink_task_put_batch_avg_time_ms", &sink).unwrap(), value(&s, "kafka_connect_sink_task_put_batch_max_time_ms", &sink).unwrap());
    assert!(avg > 0.0 && avg <= max, "put batch time avg {avg} max {max}");
}
