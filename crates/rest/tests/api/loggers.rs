use serde_json::json;

use crate::support::app;

#[tokio::test]
async fn list_shows_root_with_a_null_last_modified() {
    let app = app();
    let r = app.get("/admin/loggers").await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json, json!({"root": {"level": "INFO", "last_modified": null}}));
    assert_eq!(app.get("/admin/loggers/").await.json, r.json);
}

#[tokio::test]
async fn set_then_get_and_list() {
    let app = app();
    let r = app.call("PUT", "/admin/loggers/sluice_runtime.herder", Some(r#"{"level": "debug"}"#)).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json, json!(["sluice_runtime.herder"]), "dotted, as Connect names loggers");

    let r = app.get("/admin/loggers/sluice_runtime::herder").await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json["level"], "DEBUG");
    assert!(r.json["last_modified"].as_u64().unwrap() > 1_600_000_000_000, "{}", r.text);

    // sluice's own targets exist with their effective level; other names are no logger.
    let r = app.get("/admin/loggers/sluice_runtime.herder.standalone").await;
    assert_eq!(r.json["level"], "DEBUG", "{}", r.text);
    let r = app.get("/admin/loggers/sluice_rest").await;
    assert_eq!(r.json, json!({"level": "INFO", "last_modified": null}));
    let r = app.get("/admin/loggers/no.such.logger").await;
    assert_eq!(r.error(404), "Logger no.such.logger not found.");

    let r = app.get("/admin/loggers").await;
    assert_eq!(r.json.as_object().unwrap().keys().collect::<Vec<_>>(), ["root", "sluice_runtime.herder"]);
    assert_eq!(app.loggers.list()["sluice_runtime.herder"].level, "DEBUG", "the handle itself changed");

    let r = app.call("PUT", "/admin/loggers/org.apache.kafka.connect", Some(r#"{"level": "WARN"}"#)).await;
    assert_eq!(r.json, json!(["org.apache.kafka.connect"]));
    assert_eq!(app.get("/admin/loggers/org.apache.kafka.connect").await.json["level"], "WARN");
}

#[tokio::test]
async fn cluster_scope_is_204_and_unknown_scope_acts_as_worker() {
    let app = app();
    let r = app.call("PUT", "/admin/loggers/root?scope=cluster", Some(r#"{"level": "WARN"}"#)).await;
    r.assert_empty(204);
    assert_eq!(app.get("/admin/loggers/root").await.json["level"], "WARN");

    let r = app.call("PUT", "/admin/loggers/root?scope=galaxy", Some(r#"{"level": "ERROR"}"#)).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json, json!(["root"]));
}

#[tokio::test]
async fn bad_levels_and_names() {
    let app = app();
    let r = app.call("PUT", "/admin/loggers/root", Some(r#"{"lvl": "DEBUG"}"#)).await;
    assert_eq!(r.error(400), "Desired 'level' parameter was not specified in request.");
    // Connect answers an unknown level with 404.
    let r = app.call("PUT", "/admin/loggers/root", Some(r#"{"level": "LOUD"}"#)).await;
    assert_eq!(r.error(404), "invalid log level 'LOUD'.");
    let r = app.call("PUT", "/admin/loggers/a=b", Some(r#"{"level": "INFO"}"#)).await;
    assert!(r.error(400).starts_with("invalid logger name 'a=b'"), "{}", r.text);
    let r = app.get("/admin/loggers/a=b").await;
    assert_eq!(r.error(404), "Logger a=b not found.");
    assert_eq!(app.loggers.list().len(), 1, "nothing was changed");
}
