//! The Postgres source against the recording of a real Debezium 3.6.3 connector
//! (`tests/golden/postgres/`, see its README): the same `fixture.sql`, snapshot then stream,
//! through the real binary and Connect's JsonConverter without schemas, in every recorded
//! mode; every record compared, topic by topic, with the machine-dependent values (times,
//! LSNs, transaction ids, `source.version`) set aside. Headers are not compared.
//!
//! Known differences, each documented in docs/compatibility.md, are listed in [`KNOWN`]; any
//! other difference fails the test with the records side by side.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use sluice_tests::{eventually, json, Json, Postgres, Worker};

fn golden_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("golden/postgres")
}

/// The recorded modes and the connector keys of each (beyond the common ones).
const MODES: &[(&str, &[(&str, &str)])] = &[
    ("default", &[]),
    ("decimal-double", &[("decimal.handling.mode", "double")]),
    ("decimal-string", &[("decimal.handling.mode", "string")]),
    ("time-adaptive_time_microseconds", &[("time.precision.mode", "adaptive_time_microseconds")]),
    ("time-connect", &[("time.precision.mode", "connect")]),
    ("interval-string", &[("interval.handling.mode", "string")]),
    ("binary-hex", &[("binary.handling.mode", "hex")]),
];

/// Differences from the recording that are known and documented: `(topic, op, path)` where
/// `path` is a dotted path into the value (`after.d`), `*` matching any record of that op.
const KNOWN: &[(&str, &str, &str)] = &[
    // Debezium's snapshot reads dates through pgjdbc's java.sql.Date: other numbers for
    // ±infinity, and BC dates lose their era; sluice writes the values its stream writes.
    ("golden.public.dates", "r", "after.d"),
    // Id 3 was inserted after id 99: Debezium reads it last (physical order) and marks it
    // last_in_data_collection; sluice reads in key order, so id 99 is the table's last.
    ("golden.public.ints", "r", "source.snapshot"),
];

fn psql_file(pg: &Postgres, stream: bool) {
    let out = pg
        .psql()
        .command("postgres")
        .env("PGTZ", "UTC")
        .args(["-v", &format!("stream={stream}"), "-f"])
        .arg(golden_dir().join("fixture.sql"))
        .output()
        .expect("run psql");
    assert!(out.status.success(), "fixture.sql (stream={stream}) failed: {}", String::from_utf8_lossy(&out.stderr));
}

fn consume(data: &Path, topic: &str) -> Vec<Json> {
    let (code, out, _) = Worker::cli(&["topics", "consume", topic, "--data-dir", data.to_str().unwrap(), "--from-beginning"]);
    if code != 0 {
        return Vec::new();
    }
    out.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

/// A record's value with the machine-dependent fields set to 0.
fn normalised(mut value: Json) -> Json {
    if value.is_object() {
        for f in ["ts_ms", "ts_us", "ts_ns"] {
            if value.get(f).is_some() {
                value[f] = json!(0);
            }
        }
        if value["source"].is_object() {
            for f in ["version", "ts_ms", "ts_us", "ts_ns", "sequence", "lsn", "txId"] {
                if !value["source"][f].is_null() {
                    value["source"][f] = json!(0);
                }
            }
        }
    }
    value
}

/// The dotted paths where `a` and `b` differ (leaves, or where the kinds differ).
fn differences(a: &Json, b: &Json, path: &str, out: &mut Vec<String>) {
    match (a, b) {
        (Json::Object(x), Json::Object(y)) => {
            let keys: std::collections::BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            for k in keys {
                let p = if path.is_empty() { k.clone() } else { format!("{path}.{k}") };
                differences(x.get(k).unwrap_or(&Json::Null), y.get(k).unwrap_or(&Json::Null), &p, out);
            }
        }
        (Json::Number(x), Json::Number(y)) if x.as_f64() == y.as_f64() => {}
        _ if a == b => {}
        _ => out.push(path.to_owned()),
    }
}

/// Snapshot records (`op: "r"`) sorted by key, then every other record in its order.
fn in_comparable_order(records: Vec<Json>) -> Vec<Json> {
    let (mut snapshot, rest): (Vec<Json>, Vec<Json>) = records.into_iter().partition(|r| r["value"]["op"] == "r");
    snapshot.sort_by_key(|r| r["key"].to_string());
    snapshot.extend(rest);
    snapshot
}

fn known(topic: &str, op: &str, path: &str) -> bool {
    KNOWN.iter().any(|(t, o, p)| *t == topic && (*o == "*" || *o == op) && (*p == path || path.starts_with(&format!("{p}."))))
}

#[test]
fn every_record_matches_debeziums_recording_in_every_mode() {
    let pg = Postgres::start();
    let mut unexplained = Vec::new();
    for (n, (mode, keys)) in MODES.iter().enumerate() {
        psql_file(&pg, false);
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        let w = Worker::start(dir.path(), &[("offset.flush.interval.ms", "200")]);
        let mut config = json!({
            "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
            "database.hostname": "127.0.0.1", "database.port": pg.port.to_string(), "database.user": "postgres",
            "database.password": "", "database.dbname": "postgres", "topic.prefix": "golden",
            "plugin.name": "pgoutput", "slot.name": format!("golden_slot_{n}"), "slot.drop.on.stop": "true",
            "publication.name": format!("golden_pub_{n}"), "publication.autocreate.mode": "filtered",
            "schema.include.list": "public", "snapshot.mode": "initial",
            "key.converter": "org.apache.kafka.connect.json.JsonConverter", "key.converter.schemas.enable": "false",
            "value.converter": "org.apache.kafka.connect.json.JsonConverter", "value.converter.schemas.enable": "false",
        });
        for (k, v) in *keys {
            config[*k] = json!(v);
        }
        let (code, body) = w.post("/connectors", &json!({"name": "golden", "config": config}));
        assert_eq!(code, 201, "{body}");
        // The snapshot is done when its last record is in the log: tables are read in name
        // order, so it is one of uuids'.
        eventually(Duration::from_secs(60), "the snapshot's last record", || {
            consume(&data, "golden.public.uuids").iter().any(|r| r["value"]["source"]["snapshot"] == "last")
        });
        psql_file(&pg, true);
        eventually(Duration::from_secs(60), "the end message", || {
            consume(&data, "golden.message").iter().any(|r| r["key"]["prefix"] == "golden-end")
        });

        let mut compared = 0;
        for entry in std::fs::read_dir(golden_dir().join(mode).join("noschemas")).unwrap() {
            let entry = entry.unwrap();
            let topic = entry.file_name().to_string_lossy().trim_end_matches(".jsonl").to_owned();
            let expected: Vec<Json> =
                std::fs::read_to_string(entry.path()).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
            let got: Vec<Json> = consume(&data, &topic).into_iter().filter(|r| r["key"]["prefix"] != "golden-end").collect();
            if got.len() != expected.len() {
                unexplained.push(format!("{mode} {topic}: {} records, Debezium wrote {}", got.len(), expected.len()));
                continue;
            }
            // Snapshot records by key (sluice reads a table in key order so that it can resume;
            // Debezium in the table's physical order), then the streamed ones in order.
            let (got, expected) = (in_comparable_order(got), in_comparable_order(expected));
            for (g, e) in got.iter().zip(&expected) {
                compared += 1;
                if g["key"] != e["key"] {
                    unexplained.push(format!("{mode} {topic}: key {} where Debezium wrote {}", g["key"], e["key"]));
                    continue;
                }
                let op = e["value"]["op"].as_str().unwrap_or("tombstone");
                let mut diffs = Vec::new();
                differences(&normalised(g["value"].clone()), &normalised(e["value"].clone()), "", &mut diffs);
                let unknown: Vec<&String> = diffs.iter().filter(|p| !known(&topic, op, p)).collect();
                if !unknown.is_empty() {
                    let pick = |v: &Json, p: &str| p.split('.').fold(v.clone(), |v, k| v[k].clone());
                    let detail: Vec<String> =
                        unknown.iter().map(|p| format!("{p}: {} vs Debezium {}", pick(&g["value"], p), pick(&e["value"], p))).collect();
                    unexplained.push(format!("{mode} {topic} key {} op {op}: {}", e["key"], detail.join("; ")));
                }
            }
        }
        assert!(compared > 200, "{mode}: only {compared} records compared");
        let _ = w.delete("/connectors/golden");
        eprintln!("{mode}: {compared} records compared, {} unexplained differences so far", unexplained.len());
        let deadline = Instant::now() + Duration::from_secs(30);
        while pg.sql(&format!("SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'golden_slot_{n}' AND active")) != "0" {
            assert!(Instant::now() < deadline, "the slot of {mode} is still active");
            std::thread::sleep(Duration::from_millis(200));
        }
    }
    assert!(unexplained.is_empty(), "{} differences from Debezium's recording:\n{}", unexplained.len(), unexplained.join("\n"));
}
