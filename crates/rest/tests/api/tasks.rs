use serde_json::json;
use sluice_runtime::herder::ConnectorTaskId;

use crate::support::herder::Call;
use crate::support::{app, golden};

#[tokio::test]
async fn task_configs_shape() {
    let app = app();
    app.create("a").await;
    let r = app.get("/connectors/a/tasks").await;
    assert_eq!(r.status, 200);
    golden("connector_tasks", &r.json);
}

#[tokio::test]
async fn task_status_and_restart() {
    let app = app();
    app.create("a").await;
    let r = app.get("/connectors/a/tasks/0/status").await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json, json!({"id": 0, "state": "RUNNING", "worker_id": "127.0.0.1:8083", "version": "0.1.0"}));

    app.call("POST", "/connectors/a/tasks/0/restart", None).await.assert_empty(204);
    assert_eq!(app.herder.take_calls(), [Call::RestartTask(ConnectorTaskId { connector: "a".into(), task: 0 })]);
}

#[tokio::test]
async fn unknown_and_non_numeric_task_ids_are_404() {
    let app = app();
    app.create("a").await;
    let r = app.get("/connectors/a/tasks/7/status").await;
    assert_eq!(r.error(404), "No status found for task a-7");
    let r = app.call("POST", "/connectors/a/tasks/7/restart", None).await;
    assert_eq!(r.error(404), "No status found for task a-7");

    for path in ["/connectors/a/tasks/x/status", "/connectors/a/tasks/-1/status", "/connectors/a/tasks/1.5/status"] {
        assert_eq!(app.get(path).await.error(404), "HTTP 404 Not Found", "{path}");
    }
    let r = app.call("POST", "/connectors/a/tasks/zero/restart", None).await;
    assert_eq!(r.error(404), "HTTP 404 Not Found");
    assert_eq!(app.herder.take_calls(), []);
}
