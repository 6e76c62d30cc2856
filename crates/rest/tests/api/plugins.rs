use serde_json::json;

use crate::support::herder::{Call, SOURCE_CLASS};
use crate::support::{app, golden};

#[tokio::test]
async fn list_plugins_connectors_only_by_default() {
    let app = app();
    let r = app.get("/connector-plugins").await;
    assert_eq!(r.status, 200);
    golden("connector_plugins", &r.json);
    assert_eq!(app.get("/connector-plugins?connectorsOnly=true").await.json, r.json);
    assert_eq!(app.get("/connector-plugins/").await.json, r.json);

    let all = app.get("/connector-plugins?connectorsOnly=false").await;
    assert_eq!(all.json.as_array().unwrap().len(), 3);
    assert_eq!(all.json[2]["type"], "transformation");

    let r = app.get("/connector-plugins?connectorsOnly=no").await;
    assert_eq!(r.error(400), "Invalid value 'no' for query parameter connectorsOnly: expected true or false");
}

#[tokio::test]
async fn plugin_config_definition() {
    let app = app();
    let r = app.get(&format!("/connector-plugins/{SOURCE_CLASS}/config")).await;
    assert_eq!(r.status, 200, "{}", r.text);
    // The password key's default is shown hidden.
    golden("plugin_config", &r.json);
    assert_eq!(app.get("/connector-plugins/FileStreamSource/config").await.json, r.json, "by alias");

    let r = app.get("/connector-plugins/NoSuchConnector/config").await;
    assert_eq!(r.error(404), "Unknown plugin NoSuchConnector.");
}

#[tokio::test]
async fn validate_shape() {
    let app = app();
    let body = json!({
        "connector.class": SOURCE_CLASS,
        "batch.size": "0",
        "password": "hunter2",
        "unknown.key": "x"
    });
    let r = app.call("PUT", &format!("/connector-plugins/{SOURCE_CLASS}/config/validate"), Some(&body.to_string())).await;
    assert_eq!(r.status, 200, "{}", r.text);
    // Two errors (missing file, batch.size too small); a null definition for the unknown key;
    // the password value hidden by the definitions.
    golden("validate", &r.json);
    assert!(!r.text.contains("hunter2"));
}

#[tokio::test]
async fn validate_checks_the_class_against_the_path() {
    let app = app();
    let body = json!({"connector.class": SOURCE_CLASS, "file": "/tmp/in"}).to_string();
    let r = app.call("PUT", "/connector-plugins/FileStreamSource/config/validate", Some(&body)).await;
    assert_eq!(r.status, 200, "simple name without the Connector suffix matches: {}", r.text);
    assert_eq!(r.json["error_count"], 0);

    let r = app.call("PUT", "/connector-plugins/FileStreamSink/config/validate", Some(&body)).await;
    assert_eq!(r.error(400), format!("Included connector type {SOURCE_CLASS} does not match request type FileStreamSink"));

    app.herder.take_calls();
    let r = app.call("PUT", "/connector-plugins/FileStreamSourceConnector/config/validate", Some(r#"{"file": "/tmp/in"}"#)).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let calls = app.herder.take_calls();
    let [Call::Validate(props)] = calls.as_slice() else { panic!("{calls:?}") };
    assert_eq!(props["connector.class"], "FileStreamSourceConnector", "taken from the path");
}
