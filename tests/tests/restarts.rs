//! Automatic restarts through the real binary (`restart.policy=on-failure`, the default):
//! a Postgres source whose database goes away fails, is restarted by its worker with the
//! backoff until the database is back, and loses nothing; a permanent failure stays FAILED
//! with no restart.

use std::collections::BTreeSet;
use std::time::Duration;

use sluice_tests::{consume_topic, eventually, json, Json, Postgres as Pg, Worker};

fn ids(data: &std::path::Path) -> BTreeSet<i64> {
    consume_topic(data, "srv.public.items").iter().filter_map(|r| r["value"]["after"]["id"].as_i64()).collect()
}

const JSON_NO_SCHEMAS: &[(&str, &str)] = &[
    ("key.converter", "org.apache.kafka.connect.json.JsonConverter"),
    ("key.converter.schemas.enable", "false"),
    ("value.converter", "org.apache.kafka.connect.json.JsonConverter"),
    ("value.converter.schemas.enable", "false"),
];

#[test]
fn a_source_whose_database_goes_away_is_restarted_with_backoff_and_loses_nothing() {
    let pg = Pg::start();
    pg.sql("CREATE TABLE items (id int PRIMARY KEY, v text)");
    pg.sql("INSERT INTO items SELECT g, 'before' FROM generate_series(1, 50) g");
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let w = Worker::start(dir.path(), &[("restart.policy", "on-failure"), ("offset.flush.interval.ms", "200")]);
    let mut extra = JSON_NO_SCHEMAS.to_vec();
    // Debezium's errors.max.retries: two retries of a lost database, then the task fails.
    extra.extend([("errors.max.retries", "2"), ("sluice.restart.min.backoff.ms", "1000"), ("sluice.restart.max.backoff.ms", "4000")]);
    let (code, body) = w.post("/connectors", &json!({"name": "pg", "config": pg.source_config("sluice_restarts", &extra)}));
    assert_eq!(code, 201, "{body}");
    w.wait_running("pg", 1);
    eventually(Duration::from_secs(60), "the snapshot", || ids(&data).len() == 50);
    pg.sql("INSERT INTO items SELECT g, 'streamed' FROM generate_series(51, 80) g");
    eventually(Duration::from_secs(60), "streamed rows", || ids(&data).len() == 80);

    pg.stop();
    // The task gives up after its retries, fails, and its worker restarts it: RESTARTING
    // with the failure as its trace while the backoff runs.
    let status = w.wait_for("/connectors/pg/status", Duration::from_secs(60), |_, b| b["tasks"][0]["state"] == "RESTARTING");
    let trace = status["tasks"][0]["trace"].as_str().unwrap_or_default();
    assert!(trace.contains("errors.max.retries=2"), "{status}");
    assert_eq!(status["connector"]["state"], "RUNNING", "{status}");
    // Restarts while the database stays away: the count grows, the delays with it.
    let restarts = w.wait_for("/connectors/pg/restarts", Duration::from_secs(60), |code, b| {
        code == 200 && b["tasks"][0]["total"].as_u64().is_some_and(|t| t >= 2)
    });
    let task = &restarts["tasks"][0];
    assert_eq!(task["id"], 0, "{restarts}");
    assert_eq!(task["last_error_class"], "retriable", "{restarts}");
    assert!(task["count"].as_u64().unwrap() >= 2, "{restarts}");
    assert!(task["last_restart"].as_u64().is_some(), "{restarts}");
    assert_eq!(restarts["connector"], Json::Null, "the connector instance never failed: {restarts}");

    pg.start_again();
    pg.sql("INSERT INTO items SELECT g, 'after' FROM generate_series(81, 120) g");
    w.wait_running("pg", 1);
    eventually(Duration::from_secs(90), "every row, those written before, during and after the outage", || ids(&data).len() == 120);
    assert_eq!(ids(&data), (1..=120).collect::<BTreeSet<i64>>());
    let after = w.get("/connectors/pg/restarts").1;
    assert_eq!(after["tasks"][0]["state"], "running", "{after}");
    assert!(w.output().contains("restarting the failed task after a backoff"), "{}", w.output());
}

#[test]
fn a_permanent_failure_stays_failed_with_no_restart() {
    let pg = Pg::start();
    pg.sql("CREATE TABLE items (id int PRIMARY KEY, v text)");
    let dir = tempfile::tempdir().unwrap();
    let w = Worker::start(dir.path(), &[("restart.policy", "on-failure")]);
    // Streaming was at an LSN whose slot is gone: the changes since are lost, and no restart
    // can bring them back. A stored offset and no slot makes that state.
    let config = pg.source_config("sluice_gone", &[("sluice.restart.min.backoff.ms", "200")]);
    let (code, body) = w.post("/connectors", &json!({"name": "pg", "config": config}));
    assert_eq!(code, 201, "{body}");
    w.wait_running("pg", 1);
    eventually(Duration::from_secs(30), "the slot", || {
        pg.sql("SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'sluice_gone'") == "1"
    });
    pg.sql("INSERT INTO items VALUES (1, 'a')");
    eventually(Duration::from_secs(30), "a committed offset", || {
        w.get("/connectors/pg/offsets").1["offsets"].as_array().is_some_and(|o| !o.is_empty())
    });
    w.stop_connector("pg");
    pg.sql("SELECT pg_drop_replication_slot('sluice_gone')");
    assert_eq!(w.put("/connectors/pg/resume", &json!({})).0, 202);

    let status = w.wait_for("/connectors/pg/status", Duration::from_secs(60), |_, b| b["tasks"][0]["state"] == "FAILED");
    assert!(status["tasks"][0]["trace"].as_str().unwrap().contains("does not exist"), "{status}");
    // Ten times the backoff later: still FAILED, never restarted.
    std::thread::sleep(Duration::from_secs(2));
    let status = w.get("/connectors/pg/status").1;
    assert_eq!(status["tasks"][0]["state"], "FAILED", "{status}");
    let restarts = w.get("/connectors/pg/restarts").1;
    let task = &restarts["tasks"][0];
    assert_eq!((&task["state"], &task["last_error_class"], &task["total"]), (&json!("failed"), &json!("fatal"), &json!(0)), "{restarts}");
    assert!(task["reason"].as_str().unwrap().contains("permanent"), "{restarts}");
    assert!(!w.output().contains("restarting the failed task"), "{}", w.output());

    // A restart through REST is still the user's to make (and fails again the same way).
    assert_eq!(w.post_empty("/connectors/pg/restart?includeTasks=true&onlyFailed=true").0, 202);
    w.wait_for("/connectors/pg/status", Duration::from_secs(60), |_, b| b["tasks"][0]["state"] == "FAILED");
}

#[test]
fn restarts_of_an_unknown_connector_is_404() {
    let dir = tempfile::tempdir().unwrap();
    let w = Worker::start(dir.path(), &[]);
    let (code, body) = w.get("/connectors/nope/restarts");
    assert_eq!(code, 404, "{body}");
    assert_eq!(body, json!({"error_code": 404, "message": "Connector nope not found"}));
}
