//! Secrets never appear in REST responses, status traces or logs: a worked example, then a
//! walk over every password-typed key of every built-in connector.

use std::time::Duration;

use sluice_tests::{json, Json, Worker};

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

/// Every password-typed key of every built-in connector, each given a value of its own: the
/// values appear in no REST answer (validate, create, info, config, tasks, status with its
/// trace, expanded lists, offsets, restarts), not on the status page and in no log line,
/// whether the connector is created or refused, runs or fails.
#[test]
fn no_secret_of_any_built_in_connector_reaches_rest_or_logs() {
    let dir = tempfile::tempdir().unwrap();
    let w = Worker::start(dir.path(), &[]);
    let (_, plugins) = w.get("/connector-plugins");
    let mut secrets: Vec<String> = Vec::new();
    let mut with_passwords = Vec::new();
    for plugin in plugins.as_array().unwrap() {
        let class = plugin["class"].as_str().unwrap().to_owned();
        let (code, defs) = w.get(&format!("/connector-plugins/{class}/config"));
        assert_eq!(code, 200, "{class}: {defs}");
        let mut config = serde_json::Map::new();
        config.insert("connector.class".into(), json!(class));
        let mut has_password = false;
        for def in defs.as_array().unwrap() {
            let name = def["name"].as_str().unwrap();
            let value = match def["type"].as_str().unwrap_or_default() {
                "PASSWORD" => {
                    has_password = true;
                    let secret = format!("Sx{}q{}Z", secrets.len(), name.len() * 7919);
                    secrets.push(secret.clone());
                    secret
                }
                // Required keys without a default get something that parses, pointing nowhere
                // (port 1), so the connector is created and its tasks fail with a trace.
                _ if def["required"] == true && def["default_value"].is_null() => match def["type"].as_str().unwrap_or_default() {
                    "INT" | "LONG" | "SHORT" => "1".to_owned(),
                    "BOOLEAN" => "false".to_owned(),
                    "DOUBLE" => "1.0".to_owned(),
                    "LIST" => "secret_walk".to_owned(),
                    _ if name.contains("url") => "jdbc:postgresql://127.0.0.1:1/db".to_owned(),
                    _ if name.contains("hostname") || name.contains("host") => "127.0.0.1".to_owned(),
                    _ if name.contains("port") => "1".to_owned(),
                    _ => "secret_walk".to_owned(),
                },
                _ => continue,
            };
            config.insert(name.to_owned(), json!(value));
        }
        if !has_password {
            continue;
        }
        for (k, v) in [("database.port", "1"), ("topics", "secret_walk"), ("topic.prefix", "secret_walk"), ("tasks.max", "1")] {
            if defs.as_array().unwrap().iter().any(|d| d["name"] == k) || k == "tasks.max" || k == "topics" {
                config.entry(k.to_owned()).or_insert(json!(v));
            }
        }
        with_passwords.push(class.clone());
        let name = format!("walk-{}", with_passwords.len());
        let leaks = |text: &str| secrets.iter().find(|s| text.contains(s.as_str())).cloned();
        let config = Json::Object(config);
        let (_, validated) = w.put(&format!("/connector-plugins/{class}/config/validate"), &config);
        assert_eq!(leaks(&validated.to_string()), None, "{class} validate: {validated}");
        let (code, created) = w.post("/connectors", &json!({"name": name, "config": config}));
        assert_eq!(leaks(&created.to_string()), None, "{class} create ({code}): {created}");
        if code != 201 {
            continue;
        }
        // Let it start and fail, then read everything REST shows of it.
        std::thread::sleep(Duration::from_secs(2));
        for path in [
            format!("/connectors/{name}"),
            format!("/connectors/{name}/config"),
            format!("/connectors/{name}/tasks"),
            format!("/connectors/{name}/status"),
            format!("/connectors/{name}/restarts"),
            format!("/connectors/{name}/offsets"),
            "/connectors?expand=info&expand=status".to_owned(),
            "/health/connectors".to_owned(),
            "/metrics".to_owned(),
        ] {
            let (_, body) = w.get(&path);
            assert_eq!(leaks(&body.to_string()), None, "{class} {path}: {body}");
        }
    }
    assert!(with_passwords.len() >= 3, "password-typed keys were found in only {with_passwords:?}");
    // The status page, every section opened, in a real browser.
    let b = sluice_tests::browser::Browser::start();
    b.goto(&w.url("/ui"));
    b.wait_text(Duration::from_secs(30), "the connectors on the status page", |t| t.contains("walk-1"));
    b.eval("document.querySelectorAll('details').forEach(d => { d.open = true; }); return null");
    std::thread::sleep(Duration::from_millis(2_500));
    b.eval("document.querySelectorAll('details').forEach(d => { d.open = true; }); return null");
    let html = b.eval("return document.documentElement.outerHTML").as_str().unwrap_or_default().to_owned();
    assert!(html.contains("[hidden]"), "the page shows the hidden values");
    if let Some(s) = secrets.iter().find(|s| html.contains(s.as_str())) {
        panic!("secret {s} is on the status page");
    }
    std::thread::sleep(Duration::from_millis(500));
    let log = w.output();
    if let Some(s) = secrets.iter().find(|s| log.contains(s.as_str())) {
        panic!("secret {s} reached the log:\n{log}");
    }
    eprintln!("walked {} password keys of {with_passwords:?}", secrets.len());
}
