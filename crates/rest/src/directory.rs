//! `connectors.dir` over REST (sluice's own resources):
//!
//! - `GET /connectors-dir`: the last pass of this worker's `connectors.dir` (404 without one);
//! - `POST /connectors-dir/plan` with `{"files": {"a.json": "<text>", …}}`: what applying
//!   those files would do, by key names only (`sluice plan DIR` sends a local directory);
//! - `POST /connectors-dir/apply`: applies them (`sluice apply DIR`);
//!
//! and the drift rule for REST writes to a connector a directory declared
//! ([`guard`], `connectors.dir.drift`).

use std::collections::BTreeMap;

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use serde_json::{json, Value};
use sluice_api::Props;
use sluice_runtime::declared::{self, Drift};
use sluice_runtime::herder::HerderError;

use crate::error::{ApiError, ApiResult};
use crate::request::{self, JsonBody};
use crate::RestState;

/// `GET /connectors-dir`.
pub async fn last(State(state): State<RestState>) -> ApiResult<Json<Value>> {
    let directory = state.directory.as_ref().filter(|d| d.settings.dir.is_some()).ok_or_else(|| {
        ApiError::not_found("connectors.dir is not set on this worker (set it in the worker properties or with --connectors-dir)")
    })?;
    match directory.last_report() {
        Some(report) => {
            Ok(Json(serde_json::to_value(report).map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?))
        }
        None => Ok(Json(json!({"dir": directory.settings.dir.as_ref().map(|d| d.display().to_string()), "items": [], "pending": true}))),
    }
}

/// `POST /connectors-dir/plan`.
pub async fn plan(State(state): State<RestState>, JsonBody(body): JsonBody) -> ApiResult<Json<Value>> {
    let entries = declared::entries_from_texts(&files(body)?);
    let items = declared::plan(&*state.herder, &entries, drift(&state)).await;
    Ok(Json(json!({ "items": items })))
}

/// `POST /connectors-dir/apply`.
pub async fn apply(State(state): State<RestState>, JsonBody(body): JsonBody) -> ApiResult<Json<Value>> {
    let entries = declared::entries_from_texts(&files(body)?);
    let mut items = declared::plan(&*state.herder, &entries, drift(&state)).await;
    declared::apply(&*state.herder, &mut items).await;
    Ok(Json(json!({ "items": items })))
}

fn files(body: Value) -> ApiResult<BTreeMap<String, String>> {
    let mut files = None;
    for (field, value) in request::object(body, "Request body")? {
        match field.as_str() {
            "files" => files = Some(request::string_map(value, "files")?),
            other => return Err(ApiError::bad_request(format!("Unrecognized field \"{other}\" in the request body: expected \"files\""))),
        }
    }
    files.ok_or_else(|| ApiError::bad_request("Request body has no \"files\": give {\"files\": {\"NAME.json\": \"<file text>\"}}"))
}

fn drift(state: &RestState) -> Drift {
    state.directory.as_ref().map_or(Drift::default(), |d| d.settings.drift)
}

/// Before a REST write to `name`: `Ok(None)` when no directory declares it; else, under
/// `revert`/`allow`, the ownership keys the write must keep (and a pass is asked for); under
/// `reject`, 409 naming the file.
pub async fn guard(state: &RestState, name: &str) -> ApiResult<Option<Props>> {
    let config = match state.herder.connector_config(name).await {
        Ok(c) => c,
        Err(HerderError::NotFound(_)) => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    let Some(file) = declared::owner(&config) else { return Ok(None) };
    let drift = drift(state);
    if drift == Drift::Reject {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            format!(
                "Connector {name} is declared in the connectors directory by {file}: change that file instead ({}=reject; revert or allow permit REST changes)",
                declared::DRIFT_KEY
            ),
        ));
    }
    if let Some(directory) = &state.directory {
        directory.wake();
    }
    tracing::info!(connector = %name, file, drift = drift.name(), "a REST write to a connector declared in connectors.dir");
    Ok(Some(config.into_iter().filter(|(k, _)| k.starts_with(declared::OWNER_PREFIX)).collect()))
}
