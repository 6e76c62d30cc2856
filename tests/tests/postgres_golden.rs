//! The Postgres source against the recording of a real Debezium 3.6.3 connector
//! (`tests/golden/postgres/`, see its README): the same `fixture.sql`, snapshot then stream,
//! through the real binary and Connect's JsonConverter, in every recorded mode. Without
//! schemas every record is compared, topic by topic, with the machine-dependent values (times,
//! LSNs, transaction ids, `source.version`) set aside; with schemas (a second connector on its
//! own slot, its topics renamed by `RegexRouter`) each topic's key and value schema is compared
//! as it is in every mode, and in `default/`, where every record was recorded with schemas,
//! every record too. Headers are not compared.
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

pub(crate) fn consume(data: &Path, topic: &str) -> Vec<Json> {
    let (code, out, _) = Worker::cli(&["topics", "consume", topic, "--data-dir", data.to_str().unwrap(), "--from-beginning"]);
    if code != 0 {
        return Vec::new();
    }
    out.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

/// A record's value with the machine-dependent fields set to 0.
pub(crate) fn normalised(mut value: Json) -> Json {
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
pub(crate) fn differences(a: &Json, b: &Json, path: &str, out: &mut Vec<String>) {
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

/// A record as compared: with schemas on, `key` and `value` are the payloads and `schemas`
/// holds the key's and the value's schema (compared as they are); with schemas off,
/// `schemas` is null on both sides.
fn comparable(record: Json) -> Json {
    let with_schemas = |v: &Json| v.is_object() && v.get("schema").is_some() && v.get("payload").is_some();
    if !with_schemas(&record["key"]) {
        return json!({"key": record["key"], "value": record["value"], "schemas": null});
    }
    json!({
        "key": record["key"]["payload"], "value": record["value"]["payload"],
        "schemas": {"key": record["key"]["schema"], "value": record["value"]["schema"]},
    })
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
        // The same connector with schemas on, on a slot of its own, its topics renamed
        // `schemas.*` (the names inside the records come from `topic.prefix`, not the topic).
        let mut with_schemas = config.clone();
        for (k, v) in [
            ("slot.name", format!("golden_slot_{n}s")),
            ("publication.name", format!("golden_pub_{n}s")),
            ("key.converter.schemas.enable", "true".to_owned()),
            ("value.converter.schemas.enable", "true".to_owned()),
            ("transforms", "route".to_owned()),
            ("transforms.route.type", "org.apache.kafka.connect.transforms.RegexRouter".to_owned()),
            ("transforms.route.regex", "golden\\.(.*)".to_owned()),
            ("transforms.route.replacement", "schemas.$1".to_owned()),
        ] {
            with_schemas[k] = json!(v);
        }
        let (code, body) = w.post("/connectors", &json!({"name": "golden-schemas", "config": with_schemas}));
        assert_eq!(code, 201, "{body}");
        // The snapshot is done when its last record is in the log: tables are read in name
        // order, so it is one of uuids'.
        eventually(Duration::from_secs(60), "the snapshot's last record", || {
            consume(&data, "golden.public.uuids").iter().any(|r| r["value"]["source"]["snapshot"] == "last")
                && consume(&data, "schemas.public.uuids").iter().any(|r| r["value"]["payload"]["source"]["snapshot"] == "last")
        });
        psql_file(&pg, true);
        eventually(Duration::from_secs(60), "the end message", || {
            consume(&data, "golden.message").iter().any(|r| r["key"]["prefix"] == "golden-end")
                && consume(&data, "schemas.message").iter().any(|r| r["key"]["payload"]["prefix"] == "golden-end")
        });

        let mut compared = 0;
        // Every record without schemas; with schemas, every record where that was recorded
        // (`default/`), and in every mode each topic's key and value schemas.
        let flavours: &[(&str, &str)] = if golden_dir().join(mode).join("schemas").is_dir() {
            &[("noschemas", "golden"), ("schemas", "schemas")]
        } else {
            &[("noschemas", "golden")]
        };
        let recorded = std::fs::read_to_string(golden_dir().join(mode).join("schemas.jsonl")).unwrap();
        for line in recorded.lines() {
            let r: Json = serde_json::from_str(line).unwrap();
            let topic = r["topic"].as_str().unwrap();
            let ours = consume(&data, &format!("schemas{}", topic.trim_start_matches("golden")));
            let mut seen: Vec<(Json, Json)> = Vec::new();
            for rec in ours.iter().filter(|rec| !rec["value"].is_null()) {
                let pair = (rec["key"]["schema"].clone(), rec["value"]["schema"].clone());
                if !seen.contains(&pair) {
                    seen.push(pair);
                }
            }
            compared += 1;
            if seen != [(r["key_schema"].clone(), r["value_schema"].clone())] {
                let mut diffs = Vec::new();
                for (k, v) in &seen {
                    differences(k, &r["key_schema"], "key_schema", &mut diffs);
                    differences(v, &r["value_schema"], "value_schema", &mut diffs);
                }
                unexplained.push(format!("{mode} {topic}: {} distinct schemas, differing at {diffs:?}", seen.len()));
            }
        }
        for (flavour, prefix) in flavours.iter().copied() {
            for entry in std::fs::read_dir(golden_dir().join(mode).join(flavour)).unwrap() {
                let entry = entry.unwrap();
                let topic = entry.file_name().to_string_lossy().trim_end_matches(".jsonl").to_owned();
                let ours = format!("{prefix}{}", topic.trim_start_matches("golden"));
                let expected: Vec<Json> =
                    std::fs::read_to_string(entry.path()).unwrap().lines().map(|l| comparable(serde_json::from_str(l).unwrap())).collect();
                let got: Vec<Json> =
                    consume(&data, &ours).into_iter().map(comparable).filter(|r| r["key"]["prefix"] != "golden-end").collect();
                let what = format!("{mode} {flavour} {topic}");
                if got.len() != expected.len() {
                    unexplained.push(format!("{what}: {} records, Debezium wrote {}", got.len(), expected.len()));
                    continue;
                }
                // Snapshot records by key (sluice reads a table in key order so that it can
                // resume; Debezium in the table's physical order), then the streamed ones in order.
                let (got, expected) = (in_comparable_order(got), in_comparable_order(expected));
                for (g, e) in got.iter().zip(&expected) {
                    compared += 1;
                    if g["key"] != e["key"] {
                        unexplained.push(format!("{what}: key {} where Debezium wrote {}", g["key"], e["key"]));
                        continue;
                    }
                    let op = e["value"]["op"].as_str().unwrap_or("tombstone");
                    let mut diffs = Vec::new();
                    differences(&g["schemas"], &e["schemas"], "schemas", &mut diffs);
                    differences(&normalised(g["value"].clone()), &normalised(e["value"].clone()), "", &mut diffs);
                    let unknown: Vec<&String> = diffs.iter().filter(|p| !known(&topic, op, p)).collect();
                    if !unknown.is_empty() {
                        // Schema paths start at the record, value paths at the value.
                        let pick = |r: &Json, p: &str| {
                            let from = if p.starts_with("schemas") { r.clone() } else { r["value"].clone() };
                            p.split('.').fold(from, |v, k| v[k].clone())
                        };
                        let detail: Vec<String> =
                            unknown.iter().map(|p| format!("{p}: {} vs Debezium {}", pick(g, p), pick(e, p))).collect();
                        unexplained.push(format!("{what} key {} op {op}: {}", e["key"], detail.join("; ")));
                    }
                }
            }
        }
        assert!(compared > flavours.len() * 200, "{mode}: only {compared} records compared");
        let _ = w.delete("/connectors/golden");
        let _ = w.delete("/connectors/golden-schemas");
        eprintln!("{mode}: {compared} records compared, {} unexplained differences so far", unexplained.len());
        let deadline = Instant::now() + Duration::from_secs(30);
        while pg.sql(&format!("SELECT count(*) FROM pg_replication_slots WHERE slot_name LIKE 'golden_slot_{n}%' AND active")) != "0" {
            assert!(Instant::now() < deadline, "the slot of {mode} is still active");
            std::thread::sleep(Duration::from_millis(200));
        }
    }
    assert!(unexplained.is_empty(), "{} differences from Debezium's recording:\n{}", unexplained.len(), unexplained.join("\n"));
}
