//! `GET /health` and `GET /health/connectors` through the real binary: the worker's own health
//! never depends on a connector; the connectors' health follows the `kafka-connect-healthcheck`
//! sidecar's contract (states, threshold, worker).

use std::time::Duration;

use sluice_tests::{json, Json, Worker};

fn file_source(file: &std::path::Path, topic: &str) -> Json {
    json!({"connector.class": "FileStreamSource", "file": file.to_str().unwrap(), "topic": topic})
}

#[test]
fn connector_health_reports_failed_tasks_as_the_healthcheck_sidecar_does() {
    let dir = tempfile::tempdir().unwrap();
    let w = Worker::start(dir.path(), &[]);
    // No connectors: healthy.
    let (code, body) = w.get("/health/connectors");
    assert_eq!((code, body["healthy"].clone(), body["failure_rate"].clone()), (200, json!(true), json!(0.0)), "{body}");

    let good = dir.path().join("good.txt");
    std::fs::write(&good, "a\n").unwrap();
    let regular = dir.path().join("regular.txt");
    std::fs::write(&regular, "x\n").unwrap();
    assert_eq!(w.post("/connectors", &json!({"name": "good", "config": file_source(&good, "t1")})).0, 201);
    // A path through a regular file: the task fails for good.
    assert_eq!(w.post("/connectors", &json!({"name": "broken", "config": file_source(&regular.join("x"), "t2")})).0, 201);
    w.wait_running("good", 1);
    w.wait_for("/connectors/broken/status", Duration::from_secs(30), |code, b| code == 200 && b["tasks"][0]["state"] == "FAILED");

    let (code, body) = w.get("/health/connectors");
    assert_eq!(code, 503, "{body}");
    let id = format!("127.0.0.1:{}", w.port);
    let failures = body["failures"].as_array().unwrap();
    assert_eq!(failures.len(), 1, "{body}");
    let f = &failures[0];
    assert_eq!((&f["type"], &f["connector"], &f["id"], &f["state"], &f["worker_id"]), (&json!("task"), &json!("broken"), &json!(0), &json!("FAILED"), &json!(id)));
    assert!(f["trace"].as_str().unwrap().contains("could not open"), "{f}");
    // 1 of 4 considered entries (two connectors, two tasks).
    assert_eq!((&body["failure_rate"], &body["failure_threshold"], &body["failure_states"], &body["healthy"]), (&json!(0.25), &json!(0.0), &json!(["FAILED"]), &json!(false)));

    // The sidecar's settings as query parameters.
    let (code, body) = w.get("/health/connectors?threshold=30");
    assert_eq!((code, &body["healthy"]), (200, &json!(true)), "{body}");
    let (code, body) = w.get("/health/connectors?states=PAUSED");
    assert_eq!((code, body["failures"].as_array().unwrap().len()), (200, 0), "{body}");
    let (code, body) = w.get("/health/connectors?considered=connector");
    assert_eq!((code, &body["failure_rate"]), (200, &json!(0.0)), "connectors alone are RUNNING: {body}");
    let (code, body) = w.get("/health/connectors?worker=self");
    assert_eq!(code, 503, "{body}");
    let (code, body) = w.get("/health/connectors?worker=elsewhere:8083");
    assert_eq!((code, &body["failure_rate"]), (200, &json!(0.0)), "nothing runs on that worker: {body}");
    let (code, body) = w.get("/health/connectors?threshold=200");
    assert_eq!(code, 400, "{body}");
    assert!(body["message"].as_str().unwrap().contains("threshold"), "{body}");

    // The worker itself stays healthy (KIP-1017): a failed connector is not the worker's failure.
    let (code, body) = w.get("/health");
    assert_eq!((code, &body["status"]), (200, &json!("healthy")), "{body}");
}
