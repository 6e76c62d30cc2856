//! `GET /ui`: the status page, one HTML file compiled into the binary (no framework, nothing
//! fetched from the network). It reads and acts through the REST API itself, by URLs relative
//! to the page (so it works behind a path prefix), with the credentials the user gives it (a
//! bearer token, also as `#token=…` in the URL, or a user and password), kept in the tab's
//! session storage. The page itself holds no data and is served without credentials;
//! `GET /ui/whoami` tells it the caller's role, and a `read` caller sees no action buttons
//! (the API refuses their writes anyway).

use axum::http::header;
use axum::response::IntoResponse;
use axum::{Extension, Json};
use serde_json::{json, Value};

use crate::auth::{Principal, Role};

const PAGE: &str = include_str!("ui/index.html");

pub async fn page() -> impl IntoResponse {
    (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CACHE_CONTROL, "no-store"),
            // The page's own inline script and style only; never framed (its buttons act).
            (
                header::CONTENT_SECURITY_POLICY,
                "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; frame-ancestors 'none'",
            ),
            (header::X_FRAME_OPTIONS, "DENY"),
        ],
        PAGE,
    )
}

/// `GET /ui/whoami`: `{"name", "role"}` of the caller; `name` is null on an open API.
pub async fn whoami(principal: Option<Extension<Principal>>) -> Json<Value> {
    Json(match principal {
        Some(Extension(p)) => json!({"name": p.name, "role": if p.role == Role::Read { "read" } else { "admin" }}),
        None => json!({"name": null, "role": "admin"}),
    })
}
