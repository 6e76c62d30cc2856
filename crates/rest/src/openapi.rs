//! `GET /openapi.json`: the OpenAPI 3 document of this REST API (`docs/openapi.yaml`, kept
//! beside the code it describes), served as JSON. A test below checks that it names exactly
//! the routes the router serves; `tests/tests/rest_openapi.rs` runs schemathesis against a
//! live worker with it.

use std::sync::OnceLock;

use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};

use crate::error::ApiError;

const DOCUMENT: &str = include_str!("../../../docs/openapi.yaml");

/// The document as JSON text, converted once.
fn json() -> &'static Result<String, String> {
    static JSON: OnceLock<Result<String, String>> = OnceLock::new();
    JSON.get_or_init(|| {
        let value: serde_json::Value = serde_yaml::from_str(DOCUMENT).map_err(|e| format!("the OpenAPI document does not parse: {e}"))?;
        serde_json::to_string(&value).map_err(|e| e.to_string())
    })
}

pub async fn document() -> Response {
    match json() {
        Ok(text) => ([(header::CONTENT_TYPE, "application/json")], text.clone()).into_response(),
        Err(e) => ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.clone()).into_response(),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    /// The HTTP methods the router and the document use.
    const METHODS: [&str; 5] = ["get", "post", "put", "patch", "delete"];

    /// `(METHOD, path)` of every `.route("path", get(…).post(…))` in the router's source.
    fn routed() -> BTreeSet<(String, String)> {
        let source = include_str!("lib.rs");
        let mut out = BTreeSet::new();
        for line in source.lines().map(str::trim).filter(|l| l.starts_with(".route(\"")) {
            let rest = &line[".route(\"".len()..];
            let (path, handlers) = rest.split_once('"').expect("a quoted path");
            for method in METHODS {
                if handlers.contains(&format!(" {method}(")) || handlers.contains(&format!(".{method}(")) {
                    out.insert((method.to_uppercase(), path.to_owned()));
                }
            }
        }
        out
    }

    #[test]
    fn the_document_names_exactly_the_routes_the_router_serves() {
        let doc: serde_json::Value = serde_json::from_str(json().as_ref().expect("the document parses")).unwrap();
        assert_eq!(doc["openapi"], "3.0.3");
        assert_eq!(doc["info"]["version"], env!("CARGO_PKG_VERSION"), "info.version is the workspace's version");
        let mut documented = BTreeSet::new();
        for (path, item) in doc["paths"].as_object().expect("paths") {
            for method in item.as_object().unwrap().keys().filter(|k| METHODS.contains(&k.as_str())) {
                documented.insert((method.to_uppercase(), path.clone()));
            }
        }
        let routed = routed();
        assert!(routed.len() > 30, "the router's routes were read: {routed:?}");
        let undocumented: Vec<_> = routed.difference(&documented).collect();
        let unserved: Vec<_> = documented.difference(&routed).collect();
        assert!(
            undocumented.is_empty() && unserved.is_empty(),
            "served but not documented: {undocumented:?}; documented but not served: {unserved:?}"
        );
    }

    #[test]
    fn every_operation_documents_its_answers_and_errors_follow_connects_form() {
        let doc: serde_json::Value = serde_json::from_str(json().as_ref().unwrap()).unwrap();
        let mut ids = BTreeSet::new();
        for (path, item) in doc["paths"].as_object().unwrap() {
            for (method, op) in item.as_object().unwrap() {
                if !METHODS.contains(&method.as_str()) {
                    continue;
                }
                let id = op["operationId"].as_str().unwrap_or_else(|| panic!("{method} {path} has no operationId"));
                assert!(ids.insert(id.to_owned()), "operationId {id} twice");
                let responses = op["responses"].as_object().unwrap_or_else(|| panic!("{method} {path} has no responses"));
                assert!(responses.keys().any(|s| s.starts_with('2')), "{method} {path} documents no success");
            }
        }
        let error = &doc["components"]["schemas"]["Error"];
        assert_eq!(error["required"], serde_json::json!(["error_code", "message"]), "{error}");
    }
}
