use serde_json::json;
use sluice_runtime::herder::{RestartRequest, TargetState};

use crate::support::herder::{Call, SOURCE_CLASS};
use crate::support::{app, golden};

#[tokio::test]
async fn create_answers_201_with_info_and_location() {
    let app = app();
    let body = json!({
        "name": "file-source",
        "config": {"connector.class": SOURCE_CLASS, "file": "/tmp/in.txt", "topic": "lines", "tasks.max": 1, "trim": true}
    });
    let req = axum::http::Request::post("/connectors")
        .header("content-type", "application/json")
        .header("host", "localhost:8083")
        .body(axum::body::Body::from(body.to_string()))
        .unwrap();
    let r = app.send(req).await;
    assert_eq!(r.status, 201, "{}", r.text);
    assert_eq!(r.headers["location"], "http://localhost:8083/connectors/file-source");
    r.assert_json_content_type();
    // Numbers and booleans in the config are kept as their text, as Jackson reads them.
    golden("connector_info", &r.json);
    assert_eq!(app.herder.take_calls(), [Call::Put { name: "file-source".into(), allow_replace: false, initial_state: None }]);

    let r = app.get("/connectors").await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json, json!(["file-source"]));
    assert_eq!(app.get("/connectors/").await.json, json!(["file-source"]), "trailing slash");
}

#[tokio::test]
async fn create_passes_initial_state_and_adds_the_name_to_the_config() {
    let app = app();
    let body = json!({"name": " trimmed ", "config": {"connector.class": SOURCE_CLASS}, "initial_state": "stopped"});
    let r = app.call("POST", "/connectors", Some(&body.to_string())).await;
    assert_eq!(r.status, 201, "{}", r.text);
    assert_eq!(r.json["name"], "trimmed");
    assert_eq!(r.json["config"]["name"], "trimmed");
    assert_eq!(r.headers["location"], "/connectors/trimmed", "relative without a Host header");
    assert_eq!(
        app.herder.take_calls(),
        [Call::Put { name: "trimmed".into(), allow_replace: false, initial_state: Some(TargetState::Stopped) }]
    );
}

#[tokio::test]
async fn create_rejects_bad_requests_with_connect_messages() {
    let app = app();
    let cases = [
        (
            json!({"name": "a", "config": {"name": "b", "connector.class": "X"}}),
            "Connector name configuration (b) doesn't match connector name in the URL (a)",
        ),
        // Without a body name, Connect compares against the empty name.
        (json!({"config": {"name": "b"}}), "Connector name configuration (b) doesn't match connector name in the URL ()"),
        (json!({"config": {"connector.class": "X"}}), "Connector name is missing or empty: give a non-empty \"name\""),
        (json!({"name": "   ", "config": {}}), "Connector name is missing or empty: give a non-empty \"name\""),
        (json!({"name": "a"}), "Request body has no \"config\": give the connector configuration as a JSON object"),
        (json!({"name": "a", "config": {"k": [1]}}), "Connector configuration value for 'k' must be a string, not an array"),
        (json!({"name": "a", "config": {"k": null}}), "Connector configuration value for 'k' is null: give a string, or leave the key out"),
        (json!({"name": {"x": 1}, "config": {}}), "name must be a string, not an object"),
        (json!({"name": "a", "config": {}, "initial_state": "GONE"}), "Invalid initial_state 'GONE': expected RUNNING, PAUSED or STOPPED"),
        (
            json!({"name": "a", "config": {}, "tasks": []}),
            "Unrecognized field \"tasks\" in the request body: expected \"name\", \"config\" and \"initial_state\"",
        ),
    ];
    for (body, message) in cases {
        let r = app.call("POST", "/connectors", Some(&body.to_string())).await;
        assert_eq!(r.error(400), message, "{body}");
    }
    assert_eq!(app.herder.take_calls(), [], "no bad request reaches the herder");
}

#[tokio::test]
async fn create_of_an_existing_name_is_409_from_the_herder() {
    let app = app();
    app.create("a").await;
    let body = json!({"name": "a", "config": {"connector.class": SOURCE_CLASS}});
    let r = app.call("POST", "/connectors", Some(&body.to_string())).await;
    assert_eq!(r.error(409), "Connector a already exists");
}

#[tokio::test]
async fn herder_validation_errors_are_400() {
    let app = app();
    let r = app.call("POST", "/connectors", Some(r#"{"name": "a", "config": {}}"#)).await;
    assert!(r.error(400).contains("contains no connector type"), "{}", r.text);
}

#[tokio::test]
async fn list_expands_status_and_info() {
    let app = app();
    assert_eq!(app.get("/connectors").await.json, json!([]));
    assert_eq!(app.get("/connectors?expand=status").await.json, json!({}));
    app.create("a").await;
    app.create("b").await;

    let r = app.get("/connectors?expand=status&expand=info").await;
    assert_eq!(r.status, 200);
    golden("connectors_expanded", &r.json);

    let r = app.get("/connectors?expand=info").await;
    assert_eq!(r.json["a"].as_object().unwrap().keys().collect::<Vec<_>>(), ["info"]);
    let r = app.get("/connectors?expand=bogus").await;
    assert_eq!(r.json, json!({"a": {}, "b": {}}), "unknown expansions are ignored");
}

#[tokio::test]
async fn per_connector_endpoints_answer_404_for_an_unknown_connector() {
    let app = app();
    for (method, path, body) in [
        ("GET", "/connectors/ghost", None),
        ("DELETE", "/connectors/ghost", None),
        ("GET", "/connectors/ghost/config", None),
        ("PATCH", "/connectors/ghost/config", Some("{}")),
        ("GET", "/connectors/ghost/status", None),
        ("POST", "/connectors/ghost/restart", None),
        ("PUT", "/connectors/ghost/pause", None),
        ("PUT", "/connectors/ghost/resume", None),
        ("PUT", "/connectors/ghost/stop", None),
        ("GET", "/connectors/ghost/tasks", None),
        ("GET", "/connectors/ghost/topics", None),
        ("PUT", "/connectors/ghost/topics/reset", None),
        ("GET", "/connectors/ghost/offsets", None),
        ("DELETE", "/connectors/ghost/offsets", None),
        ("PATCH", "/connectors/ghost/offsets", Some(r#"{"offsets": [{"partition": {}, "offset": null}]}"#)),
    ] {
        let r = app.call(method, path, body).await;
        assert_eq!(r.error(404), "Connector ghost not found", "{method} {path}");
    }
}

#[tokio::test]
async fn get_info_and_config() {
    let app = app();
    app.create("a").await;
    let r = app.get("/connectors/a").await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json["name"], "a");
    assert_eq!(r.json["type"], "source");
    assert_eq!(r.json["tasks"], json!([{"connector": "a", "task": 0}]));

    let r = app.get("/connectors/a/config").await;
    assert_eq!(r.status, 200);
    golden("connector_config", &r.json);
}

#[tokio::test]
async fn put_config_creates_then_updates() {
    let app = app();
    let config = json!({"connector.class": SOURCE_CLASS, "file": "/tmp/x"});
    let r = app.call("PUT", "/connectors/a/config", Some(&config.to_string())).await;
    assert_eq!(r.status, 201, "{}", r.text);
    assert_eq!(r.headers["location"], "/connectors/a");
    assert_eq!(r.json["config"]["name"], "a", "name added from the URL");

    let config = json!({"connector.class": SOURCE_CLASS, "file": "/tmp/y", "name": "a"});
    let r = app.call("PUT", "/connectors/a/config", Some(&config.to_string())).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert!(r.headers.get("location").is_none());
    assert_eq!(r.json["config"]["file"], "/tmp/y");
    let calls = app.herder.take_calls();
    assert!(calls.iter().all(|c| matches!(c, Call::Put { allow_replace: true, initial_state: None, .. })), "{calls:?}");

    let r = app.call("PUT", "/connectors/a/config", Some(r#"{"name": "b"}"#)).await;
    assert_eq!(r.error(400), "Connector name configuration (b) doesn't match connector name in the URL (a)");
}

#[tokio::test]
async fn patch_merges_and_null_removes() {
    let app = app();
    app.create("a").await;
    let r = app.call("PATCH", "/connectors/a/config", Some(r#"{"topic": null, "batch.size": 10, "file": "/tmp/z"}"#)).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let config = &r.json["config"];
    assert_eq!(config.get("topic"), None);
    assert_eq!(config["batch.size"], "10");
    assert_eq!(config["file"], "/tmp/z");
    assert_eq!(app.get("/connectors/a/config").await.json, *config);
}

#[tokio::test]
async fn delete_is_204_and_the_connector_is_gone() {
    let app = app();
    app.create("a").await;
    let r = app.call("DELETE", "/connectors/a", None).await;
    r.assert_empty(204);
    assert_eq!(app.get("/connectors/a").await.error(404), "Connector a not found");
}

#[tokio::test]
async fn status_shape() {
    let app = app();
    app.create("a").await;
    let r = app.get("/connectors/a/status").await;
    assert_eq!(r.status, 200);
    // The tasks' empty trace is left out, as Connect's NON_EMPTY does.
    golden("connector_status", &r.json);

    let r = app.call("PATCH", "/connectors/a/config", Some(r#"{"fail": "true"}"#)).await;
    assert_eq!(r.status, 200);
    let r = app.get("/connectors/a/status").await;
    assert_eq!(
        r.json["connector"],
        json!({"state": "FAILED", "worker_id": "127.0.0.1:8083", "version": "0.1.0", "trace": "java.lang.Oops: it broke\n\tat here"})
    );
}

#[tokio::test]
async fn restart_is_204_for_the_connector_alone_and_202_with_tasks() {
    let app = app();
    app.create("a").await;
    let r = app.call("POST", "/connectors/a/restart", None).await;
    r.assert_empty(204);

    let r = app.call("POST", "/connectors/a/restart?includeTasks=true&onlyFailed=TRUE", None).await;
    assert_eq!(r.status, 202, "{}", r.text);
    golden("connector_restarting", &r.json);

    let r = app.call("POST", "/connectors/a/restart?onlyFailed=false&includeTasks=false", None).await;
    r.assert_empty(204);
    let restart = |include_tasks, only_failed| Call::Restart { name: "a".into(), req: RestartRequest { include_tasks, only_failed } };
    assert_eq!(app.herder.take_calls(), [restart(false, false), restart(true, true), restart(false, false)]);

    let r = app.call("POST", "/connectors/a/restart?includeTasks=yes", None).await;
    assert_eq!(r.error(400), "Invalid value 'yes' for query parameter includeTasks: expected true or false");
    assert_eq!(app.herder.take_calls(), []);
}

#[tokio::test]
async fn pause_resume_are_202_and_stop_is_204() {
    let app = app();
    app.create("a").await;
    app.call("PUT", "/connectors/a/pause", None).await.assert_empty(202);
    assert_eq!(app.get("/connectors/a/status").await.json["connector"]["state"], "PAUSED");
    app.call("PUT", "/connectors/a/resume", None).await.assert_empty(202);
    app.call("PUT", "/connectors/a/stop", None).await.assert_empty(204);
    let target = |state| Call::Target { name: "a".into(), state };
    assert_eq!(app.herder.take_calls(), [target(TargetState::Paused), target(TargetState::Started), target(TargetState::Stopped)]);
}

#[tokio::test]
async fn names_are_percent_decoded_from_the_path() {
    let app = app();
    let body = json!({"name": "my connector", "config": {"connector.class": SOURCE_CLASS}});
    let r = app.call("POST", "/connectors", Some(&body.to_string())).await;
    assert_eq!(r.headers["location"], "/connectors/my%20connector");
    assert_eq!(app.get("/connectors/my%20connector").await.json["name"], "my connector");
}
