//! The test harness: the router over an in-memory herder, a request helper and golden files.

pub mod herder;

use std::path::PathBuf;
use std::sync::Arc;

use axum::body::Body;
use axum::http::{HeaderMap, Request};
use axum::Router;
use serde_json::Value;
use sluice_rest::RestState;
use sluice_runtime::logging::{self, LogLevels};
use tower::ServiceExt;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::Registry;

use herder::MemoryHerder;

pub struct App {
    pub router: Router,
    pub herder: Arc<MemoryHerder>,
    pub loggers: LogLevels,
    /// Keeps the reloadable filter alive (it is not installed globally).
    _subscriber: Box<dyn tracing::Subscriber + Send + Sync>,
}

pub fn app() -> App {
    let herder = Arc::new(MemoryHerder::new());
    let (loggers, layer) = logging::filter_layer::<Registry>("info").expect("valid spec");
    let subscriber = Box::new(tracing_subscriber::registry().with(layer));
    let state = RestState {
        herder: herder.clone(),
        loggers: loggers.clone(),
        version: "0.1.0".into(),
        commit: "abc123".into(),
        kafka_cluster_id: "sluice-embedded".into(),
        directory: None,
        auth: None,
        cors: None,
        forward_tls: None,
    };
    App { router: sluice_rest::router(state), herder, loggers, _subscriber: subscriber }
}

#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: HeaderMap,
    /// The body as text; empty for no body.
    pub text: String,
    /// The body as JSON; `Null` for no body.
    pub json: Value,
}

impl Reply {
    /// Asserts the Connect error shape and returns the message.
    #[track_caller]
    pub fn error(&self, status: u16) -> &str {
        assert_eq!(self.status, status, "{}", self.text);
        assert_eq!(self.json["error_code"], status, "{}", self.text);
        assert_eq!(self.json.as_object().map(|o| o.len()), Some(2), "exactly error_code and message: {}", self.text);
        self.assert_json_content_type();
        self.json["message"].as_str().expect("message is a string")
    }

    #[track_caller]
    pub fn assert_json_content_type(&self) {
        assert_eq!(self.headers.get("content-type").map(|v| v.to_str().unwrap()), Some("application/json"), "{}", self.text);
    }

    #[track_caller]
    pub fn assert_empty(&self, status: u16) {
        assert_eq!(self.status, status, "{}", self.text);
        assert_eq!(self.text, "", "no body expected");
    }
}

impl App {
    /// Sends `body` (if any) as `application/json`.
    pub async fn call(&self, method: &str, uri: &str, body: Option<&str>) -> Reply {
        let mut req = Request::builder().method(method).uri(uri);
        if body.is_some() {
            req = req.header("content-type", "application/json");
        }
        self.send(req.body(body.map(|b| Body::from(b.to_owned())).unwrap_or_default()).unwrap()).await
    }

    pub async fn get(&self, uri: &str) -> Reply {
        self.call("GET", uri, None).await
    }

    pub async fn send(&self, req: Request<Body>) -> Reply {
        let res = self.router.clone().oneshot(req).await.expect("router is infallible");
        let status = res.status().as_u16();
        let headers = res.headers().clone();
        let bytes = axum::body::to_bytes(res.into_body(), usize::MAX).await.unwrap();
        let text = String::from_utf8(bytes.to_vec()).expect("utf-8 body");
        let json =
            if text.is_empty() { Value::Null } else { serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}")) };
        Reply { status, headers, text, json }
    }

    /// Creates a source connector named `name` through the API.
    pub async fn create(&self, name: &str) -> Reply {
        let body = format!(
            r#"{{"name": "{name}", "config": {{"connector.class": "{}", "file": "/tmp/in.txt", "topic": "lines"}}}}"#,
            herder::SOURCE_CLASS
        );
        let r = self.call("POST", "/connectors", Some(&body)).await;
        assert_eq!(r.status, 201, "{}", r.text);
        self.herder.take_calls();
        r
    }
}

/// Compares `actual` with `tests/golden/{name}.json`, field order included. Set
/// `SLUICE_UPDATE_GOLDEN=1` to write the file instead (then review the diff).
#[track_caller]
pub fn golden(name: &str, actual: &Value) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden").join(format!("{name}.json"));
    let actual = serde_json::to_string_pretty(actual).unwrap() + "\n";
    if std::env::var_os("SLUICE_UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, &actual).unwrap();
        return;
    }
    let expected =
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}; run with SLUICE_UPDATE_GOLDEN=1 to create it", path.display()));
    assert!(expected == actual, "{} differs\n--- expected\n{expected}--- actual\n{actual}", path.display());
}
