//! Reading requests: JSON bodies, query strings and path parameters, each failing with
//! [`ApiError`] so that a bad request gets Connect's error shape, never axum's plain text.
//!
//! Bodies are read as [`serde_json::Value`] and then shaped by hand, so each message can
//! say which field is wrong. Connect's string maps (connector configs) are read as Jackson
//! reads a `Map<String, String>`: strings as they are, numbers and booleans as their text.

use std::collections::BTreeMap;

use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Path, Request};
use axum::http::header::CONTENT_TYPE;
use axum::http::request::Parts;
use axum::http::HeaderMap;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::error::{ApiError, ApiResult};

/// A JSON request body.
///
/// - A `Content-Type` that is not JSON (`application/json` or `…+json`) is refused with 415,
///   as Connect does; a request without `Content-Type` is read as JSON.
/// - A body that does not parse is 400, with serde's account of what is wrong and where
///   (line and column). This is a deliberate improvement: Connect answers 500 with Jackson's
///   message for the same request.
/// - An empty body is 400.
#[derive(Debug)]
pub struct JsonBody(pub Value);

impl<S: Send + Sync> FromRequest<S> for JsonBody {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> ApiResult<Self> {
        if !content_type_is_json(req.headers()) {
            return Err(ApiError::unsupported_media_type());
        }
        let bytes = Bytes::from_request(req, state).await.map_err(|e| ApiError::new(e.status(), e.body_text()))?;
        parse_json(&bytes).map(JsonBody)
    }
}

/// The bytes of a request body as JSON, as [`JsonBody`] reads them (after the content type
/// is checked): 400 when empty or not JSON.
pub fn parse_json(bytes: &[u8]) -> ApiResult<Value> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(ApiError::bad_request("Request body is empty: expected a JSON document"));
    }
    serde_json::from_slice(bytes).map_err(|e| ApiError::bad_request(format!("Request body is not valid JSON: {e}")))
}

fn content_type_is_json(headers: &HeaderMap) -> bool {
    let Some(value) = headers.get(CONTENT_TYPE) else {
        return true;
    };
    let Ok(value) = value.to_str() else {
        return false;
    };
    let essence = value.split(';').next().unwrap_or_default().trim().to_ascii_lowercase();
    essence == "application/json" || (essence.starts_with("application/") && essence.ends_with("+json"))
}

/// The query string as name/value pairs in order; names may repeat (`expand=status&expand=info`).
/// Unknown names are ignored, as in Connect.
#[derive(Debug, Default)]
pub struct Query(Vec<(String, String)>);

impl Query {
    pub fn parse(query: Option<&str>) -> Self {
        Self(form_urlencoded::parse(query.unwrap_or_default().as_bytes()).into_owned().collect())
    }

    pub fn has(&self, name: &str) -> bool {
        self.0.iter().any(|(n, _)| n == name)
    }

    /// Every value of `name`, in order.
    pub fn all<'a, 'n>(&'a self, name: &'n str) -> impl Iterator<Item = &'a str> + use<'a, 'n> {
        self.0.iter().filter(move |(n, _)| n == name).map(|(_, v)| v.as_str())
    }

    /// The first value of `name`, as JAX-RS's `@QueryParam` takes it.
    pub fn first(&self, name: &str) -> Option<&str> {
        self.all(name).next()
    }

    /// A boolean parameter: `true` or `false` in any case, or `default` when absent.
    ///
    /// Stricter than Connect on purpose: JAX-RS reads any other text as `false`, so
    /// `includeTasks=yes` silently did nothing; here it is a 400 naming the parameter.
    pub fn bool(&self, name: &str, default: bool) -> ApiResult<bool> {
        match self.first(name) {
            None => Ok(default),
            Some(v) if v.eq_ignore_ascii_case("true") => Ok(true),
            Some(v) if v.eq_ignore_ascii_case("false") => Ok(false),
            Some(v) => Err(ApiError::bad_request(format!("Invalid value '{v}' for query parameter {name}: expected true or false"))),
        }
    }
}

impl<S: Send + Sync> FromRequestParts<S> for Query {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> ApiResult<Self> {
        Ok(Self::parse(parts.uri.query()))
    }
}

/// Path parameters, failing in Connect's error shape.
#[derive(Debug)]
pub struct PathParams<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned + Send> FromRequestParts<S> for PathParams<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> ApiResult<Self> {
        Path::<T>::from_request_parts(parts, state).await.map(|Path(t)| PathParams(t)).map_err(|e| ApiError::new(e.status(), e.body_text()))
    }
}

/// The body as a JSON object, or a 400 naming `what` it should have been.
pub fn object(value: Value, what: &str) -> ApiResult<Map<String, Value>> {
    match value {
        Value::Object(map) => Ok(map),
        other => Err(ApiError::bad_request(format!("{what} must be a JSON object, not {}", kind(&other)))),
    }
}

/// A JSON value read as Jackson reads a `String`: a string as is, a number or boolean as its
/// text, null as `None`. Objects and arrays are refused; `field` names the place in messages.
pub fn string_or_null(value: Value, field: &str) -> ApiResult<Option<String>> {
    match value {
        Value::Null => Ok(None),
        Value::String(s) => Ok(Some(s)),
        Value::Number(n) => Ok(Some(n.to_string())),
        Value::Bool(b) => Ok(Some(b.to_string())),
        other => Err(ApiError::bad_request(format!("{field} must be a string, not {}", kind(&other)))),
    }
}

/// A JSON object of strings (a connector config) in which null means "remove this key"
/// (`PATCH /connectors/{name}/config`).
pub fn string_map_with_nulls(value: Value, what: &str) -> ApiResult<BTreeMap<String, Option<String>>> {
    object(value, what)?
        .into_iter()
        .map(|(k, v)| {
            let v = string_or_null(v, &format!("{what} value for '{k}'"))?;
            Ok((k, v))
        })
        .collect()
}

/// A JSON object of strings (a connector config). Null values are refused: a config stores
/// strings, and Connect's handling of a null differs by endpoint.
pub fn string_map(value: Value, what: &str) -> ApiResult<BTreeMap<String, String>> {
    string_map_with_nulls(value, what)?
        .into_iter()
        .map(|(k, v)| match v {
            Some(v) => Ok((k, v)),
            None => Err(ApiError::bad_request(format!("{what} value for '{k}' is null: give a string, or leave the key out"))),
        })
        .collect()
}

/// The JSON kind of a value, for messages.
pub fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;
    use serde_json::json;

    #[test]
    fn json_content_types() {
        let mut h = HeaderMap::new();
        assert!(content_type_is_json(&h), "no content type is read as JSON");
        for (ct, ok) in [
            ("application/json", true),
            ("Application/JSON; charset=utf-8", true),
            ("application/vnd.sluice+json", true),
            ("text/plain", false),
            ("application/x-www-form-urlencoded", false),
        ] {
            h.insert(CONTENT_TYPE, HeaderValue::from_static(ct));
            assert_eq!(content_type_is_json(&h), ok, "{ct}");
        }
    }

    #[test]
    fn query_keeps_repeats_and_reads_booleans_strictly() {
        let q = Query::parse(Some("expand=status&expand=info&includeTasks=TRUE&onlyFailed=1&x=%2Fa"));
        assert_eq!(q.all("expand").collect::<Vec<_>>(), ["status", "info"]);
        assert!(q.bool("includeTasks", false).unwrap());
        assert!(!q.bool("missing", false).unwrap());
        let err = q.bool("onlyFailed", false).unwrap_err();
        assert_eq!(err.message(), "Invalid value '1' for query parameter onlyFailed: expected true or false");
        assert_eq!(q.first("x"), Some("/a"));
    }

    #[test]
    fn string_maps_coerce_scalars_like_jackson() {
        let m = string_map(json!({"a": "x", "b": 5, "c": true, "d": 1.5}), "Connector configuration").unwrap();
        assert_eq!(m["b"], "5");
        assert_eq!(m["c"], "true");
        assert_eq!(m["d"], "1.5");
        let err = string_map(json!({"a": {"nested": 1}}), "Connector configuration").unwrap_err();
        assert_eq!(err.message(), "Connector configuration value for 'a' must be a string, not an object");
        let err = string_map(json!({"a": null}), "Connector configuration").unwrap_err();
        assert!(err.message().contains("'a' is null"), "{err}");
        let m = string_map_with_nulls(json!({"a": null}), "Patch").unwrap();
        assert_eq!(m["a"], None);
        let err = string_map(json!(["a"]), "Connector configuration").unwrap_err();
        assert_eq!(err.message(), "Connector configuration must be a JSON object, not an array");
    }
}
