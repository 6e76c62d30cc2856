//! Secrets never appear in REST responses, status traces or logs.

use std::time::Duration;

use sluice_tests::{json, Worker};

#[test]
fn passwords_stay_out_of_rest_traces_and_logs() {
    let dir = tempfile::tempdir().unwrap();
    let w = Worker::start(dir.path(), &[]);
    // A warehouse sink whose database cannot be reached (port 1), with a password both as a
    // password-typed key and inside the connection URL.
    let config = json!({
        "connector.class": "io.confluent.connect.jdbc.JdbcSinkConnector",
        "topics": "orders",
        "connection.url": "jdbc:postgresql://127.0.0.1:1/shop?user=app&password=UrlSecret42",
        "connection.password": "PropSecret42",
        "max.retries": "1",
        "connection.attempts": "1",
        "connection.backoff.ms": "10",
        "retry.backoff.ms": "10"
    });
    let (code, body) = w.post("/connectors", &json!({"name": "wh", "config": config}));
    assert_eq!(code, 201, "{body}");
    let leaks = |text: &str| text.contains("UrlSecret42") || text.contains("PropSecret42");
    assert!(!leaks(&body.to_string()), "create response: {body}");
    assert_eq!(body["config"]["connection.password"], "[hidden]");
    assert_eq!(body["config"]["connection.url"], "jdbc:postgresql://127.0.0.1:1/shop?user=app&password=[hidden]");
    for path in ["/connectors/wh", "/connectors/wh/config", "/connectors/wh/tasks", "/connectors?expand=info"] {
        let (code, body) = w.get(path);
        assert_eq!(code, 200);
        assert!(!leaks(&body.to_string()), "{path}: {body}");
    }
    let (_, validated) = w.put("/connector-plugins/io.confluent.connect.jdbc.JdbcSinkConnector/config/validate", &config);
    assert!(!leaks(&validated.to_string()), "validate: {validated}");
    // Give the sink a record: it cannot reach the database, and its trace says why, without
    // the password.
    let input = dir.path().join("in.txt");
    std::fs::write(&input, "{\"id\": 1}\n").unwrap();
    let (code, body) = w.post(
        "/connectors",
        &json!({"name": "src", "config": {"connector.class": "FileStreamSource", "file": input.to_str().unwrap(), "topic": "orders"}}),
    );
    assert_eq!(code, 201, "{body}");
    let status = w.wait_for("/connectors/wh/status", Duration::from_secs(60), |_, b| b["tasks"][0]["trace"].is_string());
    assert!(!leaks(&status.to_string()), "status: {status}");
    std::thread::sleep(Duration::from_millis(300));
    assert!(!leaks(&w.output()), "the worker's log mentions a password");
    // The stored config keeps the real values (the task needs them): only output hides them.
    let data = dir.path().join("data");
    let (_, out, _) = Worker::cli(&["topics", "consume", "connect-configs", "--data-dir", data.to_str().unwrap(), "--from-beginning"]);
    assert!(out.contains("PropSecret42"), "the config topic holds the config as given");
}
