use serde_json::json;

use crate::support::herder::Call;
use crate::support::{app, golden};

#[tokio::test]
async fn get_offsets_shape() {
    let app = app();
    app.create("a").await;
    let r = app.get("/connectors/a/offsets").await;
    assert_eq!(r.status, 200);
    golden("connector_offsets", &r.json);
}

#[tokio::test]
async fn alter_offsets_needs_a_stopped_connector_and_answers_a_message() {
    let app = app();
    app.create("a").await;
    let body = json!({"offsets": [
        {"partition": {"filename": "/tmp/in.txt"}, "offset": {"position": 7}},
        {"partition": {"filename": "/tmp/old.txt"}, "offset": null}
    ]})
    .to_string();
    let r = app.call("PATCH", "/connectors/a/offsets", Some(&body)).await;
    assert!(r.error(400).starts_with("Connectors must be in the STOPPED state"), "{}", r.text);

    app.call("PUT", "/connectors/a/stop", None).await.assert_empty(204);
    let r = app.call("PATCH", "/connectors/a/offsets", Some(&body)).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json, json!({"message": "The offsets for this connector have been altered successfully"}));
    let r = app.get("/connectors/a/offsets").await;
    assert_eq!(r.json["offsets"][0]["offset"], json!({"position": 7}));
    assert_eq!(r.json["offsets"][1]["offset"], json!(null));
}

#[tokio::test]
async fn alter_offsets_rejects_bodies_without_offsets() {
    let app = app();
    app.create("a").await;
    for body in [r#"{}"#, r#"{"offsets": []}"#, r#"{"offsets": null}"#] {
        let r = app.call("PATCH", "/connectors/a/offsets", Some(body)).await;
        assert_eq!(r.error(400), "Partitions / offsets need to be provided for an alter offsets request", "{body}");
    }
    let r = app.call("PATCH", "/connectors/a/offsets", Some(r#"{"offsets": [{"partition": 1}]}"#)).await;
    assert_eq!(r.error(400), "offsets[0].partition must be a JSON object, not a number");
    let r = app.call("PATCH", "/connectors/a/offsets", Some(r#"{"offset": []}"#)).await;
    assert_eq!(r.error(400), "Unrecognized field \"offset\" in the request body: expected \"offsets\"");
}

#[tokio::test]
async fn reset_offsets_answers_a_message() {
    let app = app();
    app.create("a").await;
    let r = app.call("DELETE", "/connectors/a/offsets", None).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json, json!({"message": "The offsets for this connector have been reset successfully"}));
    assert_eq!(app.get("/connectors/a/offsets").await.json, json!({"offsets": []}));
}

#[tokio::test]
async fn topics_and_reset() {
    let app = app();
    app.create("a").await;
    let r = app.get("/connectors/a/topics").await;
    assert_eq!(r.status, 200);
    golden("connector_topics", &r.json);

    app.call("PUT", "/connectors/a/topics/reset", None).await.assert_empty(202);
    assert_eq!(app.herder.take_calls(), [Call::ResetTopics("a".into())]);
    assert_eq!(app.get("/connectors/a/topics").await.json, json!({"a": {"topics": []}}));
}
