//! Errors that come from HTTP itself rather than from the herder.

use axum::body::Body;
use axum::http::Request;

use crate::support::app;

#[tokio::test]
async fn unknown_paths_are_connect_404s() {
    let app = app();
    for path in ["/nope", "/connectors/a/bogus", "/connectors/a/tasks/0", "/admin", "/connector-plugins/x"] {
        let r = app.get(path).await;
        assert_eq!(r.error(404), "HTTP 404 Not Found", "{path}");
    }
}

#[tokio::test]
async fn wrong_methods_are_connect_405s() {
    let app = app();
    for (method, path) in [
        ("DELETE", "/connectors"),
        ("POST", "/connectors/a"),
        ("GET", "/connectors/a/restart"),
        ("POST", "/connectors/a/pause"),
        ("GET", "/connectors/a/stop"),
        ("POST", "/connectors/a/offsets"),
        ("GET", "/connector-plugins/x/config/validate"),
        ("POST", "/admin/loggers/root"),
        ("POST", "/"),
    ] {
        let r = app.call(method, path, None).await;
        assert_eq!(r.error(405), "HTTP 405 Method Not Allowed", "{method} {path}");
    }
}

#[tokio::test]
async fn malformed_json_is_400_saying_where() {
    let app = app();
    let r = app.call("POST", "/connectors", Some(r#"{"name": "a", "config": {"k": "v",}}"#)).await;
    let msg = r.error(400);
    assert!(msg.starts_with("Request body is not valid JSON: "), "{msg}");
    assert!(msg.contains("line 1 column"), "{msg}");

    let r = app.call("PUT", "/connectors/a/config", Some("not json")).await;
    assert!(r.error(400).starts_with("Request body is not valid JSON"));
}

#[tokio::test]
async fn empty_body_is_400() {
    let app = app();
    let r = app.call("POST", "/connectors", Some("  ")).await;
    assert_eq!(r.error(400), "Request body is empty: expected a JSON document");
}

#[tokio::test]
async fn non_json_content_type_is_415_and_a_missing_one_is_read_as_json() {
    let app = app();
    let body = r#"{"name": "a", "config": {"connector.class": "X"}}"#;
    let req = Request::post("/connectors").header("content-type", "application/x-www-form-urlencoded").body(Body::from(body)).unwrap();
    let r = app.send(req).await;
    assert_eq!(r.error(415), "HTTP 415 Unsupported Media Type");

    let req = Request::post("/connectors").body(Body::from(body)).unwrap();
    let r = app.send(req).await;
    assert_eq!(r.status, 201, "{}", r.text);
}

#[tokio::test]
async fn body_of_the_wrong_shape_is_400() {
    let app = app();
    let r = app.call("POST", "/connectors", Some(r#"["a"]"#)).await;
    assert_eq!(r.error(400), "Request body must be a JSON object, not an array");
    let r = app.call("PUT", "/connectors/a/config", Some(r#""x""#)).await;
    assert_eq!(r.error(400), "Connector configuration must be a JSON object, not a string");
}

/// Connect's router treats one trailing slash as none on every route; Jetty answers 400 for
/// an empty segment (two slashes) before any route is matched (recorded from Connect 4.3 in
/// tests/golden/rest/connect-4.3/trailing_slashes.json).
#[tokio::test]
async fn one_trailing_slash_is_the_same_path_and_an_empty_segment_is_400() {
    let app = app();
    app.create("x").await;
    for path in [
        "/connectors/x",
        "/connectors/x/status",
        "/connectors/x/config",
        "/connectors/x/tasks",
        "/connectors/x/tasks/0/status",
        "/connector-plugins",
        "/admin/loggers",
        "/admin/loggers/root",
        "/connectors?expand=status",
    ] {
        let plain = app.get(path).await;
        let with_slash = if path.contains('?') { path.replacen('?', "/?", 1) } else { format!("{path}/") };
        let slashed = app.get(&with_slash).await;
        assert_eq!((slashed.status, &slashed.json), (plain.status, &plain.json), "{with_slash}");
        assert_eq!(plain.status, 200, "{path}: {}", plain.text);
    }
    assert_eq!(app.call("PUT", "/connectors/x/pause/", None).await.status, 202);
    for (method, path) in [("GET", "/connectors//"), ("GET", "/connectors/x//"), ("GET", "//connectors"), ("PUT", "/connectors/x/pause//")] {
        let r = app.call(method, path, None).await;
        assert_eq!(r.error(400), "Ambiguous URI empty segment", "{method} {path}");
    }
    assert_eq!(app.call("DELETE", "/connectors/x/", None).await.status, 204);
    assert_eq!(app.get("/connectors/x").await.status, 404);
}
