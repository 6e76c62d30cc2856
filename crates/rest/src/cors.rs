//! Cross-origin requests, configured as Kafka Connect configures them:
//! `access.control.allow.origin` (a comma-separated list of origins, `*` matching any run of
//! characters, e.g. `https://*.example.com`, or `*` alone for every origin; empty: no
//! cross-origin headers at all) and `access.control.allow.methods` (default `GET,POST,HEAD`).
//!
//! An allowed origin gets `Access-Control-Allow-Origin` (its own value),
//! `Access-Control-Allow-Credentials: true` and `Vary: Origin` on every answer. A preflight
//! (`OPTIONS` with `Access-Control-Request-Method`) from an allowed origin for an allowed
//! method is answered here, before authentication (a browser sends no credentials with it):
//! 204 with the methods, the headers asked for among `X-Requested-With, Content-Type, Accept,
//! Origin, Authorization`, and `Access-Control-Max-Age: 1800`. Anything else goes on as if no
//! CORS were configured, so the browser refuses it.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use sluice_api::Props;

pub const ORIGIN_KEY: &str = "access.control.allow.origin";
pub const METHODS_KEY: &str = "access.control.allow.methods";
const DEFAULT_METHODS: &str = "GET,POST,HEAD";
const ALLOWED_HEADERS: &[&str] = &["x-requested-with", "content-type", "accept", "origin", "authorization"];

#[derive(Debug)]
pub struct Cors {
    origins: Vec<String>,
    methods: Vec<String>,
}

impl Cors {
    /// `None` when `access.control.allow.origin` is unset or empty (Connect's default).
    pub fn from_worker(props: &Props) -> Option<Arc<Cors>> {
        let origins: Vec<String> = props
            .get(ORIGIN_KEY)
            .map(|v| v.split(',').map(str::trim).filter(|o| !o.is_empty()).map(str::to_owned).collect())
            .unwrap_or_default();
        if origins.is_empty() {
            return None;
        }
        let methods = props.get(METHODS_KEY).map(String::as_str).filter(|v| !v.trim().is_empty()).unwrap_or(DEFAULT_METHODS);
        let methods = methods.split(',').map(|m| m.trim().to_ascii_uppercase()).filter(|m| !m.is_empty()).collect();
        Some(Arc::new(Cors { origins, methods }))
    }

    fn allows_origin(&self, origin: &str) -> bool {
        self.origins.iter().any(|p| p == "*" || wildcard_match(p, origin))
    }

    fn allows_method(&self, method: &str) -> bool {
        self.methods.iter().any(|m| m.eq_ignore_ascii_case(method.trim()))
    }
}

/// `pattern` with `*` matching any run of characters (none included) equals `text`.
fn wildcard_match(pattern: &str, text: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    if parts.len() == 1 {
        return pattern == text;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !text.starts_with(first) || !text[first.len()..].ends_with(last) || text.len() < first.len() + last.len() {
        return false;
    }
    let mut rest = &text[first.len()..text.len() - last.len()];
    for middle in &parts[1..parts.len() - 1] {
        match rest.find(middle) {
            Some(i) => rest = &rest[i + middle.len()..],
            None => return false,
        }
    }
    true
}

fn allow_origin(response: &mut Response, origin: &HeaderValue) {
    let h = response.headers_mut();
    h.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin.clone());
    h.insert(header::ACCESS_CONTROL_ALLOW_CREDENTIALS, HeaderValue::from_static("true"));
    h.append(header::VARY, HeaderValue::from_static("Origin"));
}

pub async fn layer(State(cors): State<Arc<Cors>>, req: Request, next: Next) -> Response {
    let Some(origin) = req.headers().get(header::ORIGIN).cloned() else { return next.run(req).await };
    if !origin.to_str().is_ok_and(|o| cors.allows_origin(o)) {
        return next.run(req).await;
    }
    let asked = req.headers().get(header::ACCESS_CONTROL_REQUEST_METHOD).and_then(|m| m.to_str().ok()).map(str::to_owned);
    if req.method() == Method::OPTIONS {
        if let Some(method) = asked {
            if !cors.allows_method(&method) {
                return next.run(req).await;
            }
            let headers: Vec<String> = req
                .headers()
                .get(header::ACCESS_CONTROL_REQUEST_HEADERS)
                .and_then(|h| h.to_str().ok())
                .map(|h| h.split(',').map(|x| x.trim().to_ascii_lowercase()).filter(|x| ALLOWED_HEADERS.contains(&x.as_str())).collect())
                .unwrap_or_default();
            let mut response = StatusCode::NO_CONTENT.into_response();
            allow_origin(&mut response, &origin);
            let h = response.headers_mut();
            if let Ok(v) = HeaderValue::from_str(&cors.methods.join(",")) {
                h.insert(header::ACCESS_CONTROL_ALLOW_METHODS, v);
            }
            if let Ok(v) = HeaderValue::from_str(&headers.join(",")) {
                h.insert(header::ACCESS_CONTROL_ALLOW_HEADERS, v);
            }
            h.insert(header::ACCESS_CONTROL_MAX_AGE, HeaderValue::from_static("1800"));
            return response;
        }
    }
    let mut response = next.run(req).await;
    allow_origin(&mut response, &origin);
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_match_as_connect_lists_them() {
        let props = |o: &str| Props::from([(ORIGIN_KEY.to_owned(), o.to_owned())]);
        assert!(Cors::from_worker(&props("")).is_none());
        assert!(Cors::from_worker(&Props::new()).is_none());
        let c = Cors::from_worker(&props("https://ui.example.com, https://*.corp.example")).unwrap();
        assert!(c.allows_origin("https://ui.example.com"));
        assert!(c.allows_origin("https://a.b.corp.example"));
        assert!(!c.allows_origin("https://corp.example.evil.com"));
        assert!(!c.allows_origin("http://ui.example.com"));
        assert!(Cors::from_worker(&props("*")).unwrap().allows_origin("http://anything:1"));
        assert!(c.allows_method("post") && !c.allows_method("DELETE"), "GET, POST and HEAD by default");
        assert!(
            wildcard_match("a*b*c", "aXbYc")
                && wildcard_match("a*", "a")
                && !wildcard_match("a*b", "ab-")
                && !wildcard_match("ab*ba", "aba")
        );
    }
}
