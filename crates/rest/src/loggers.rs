//! `/admin/loggers`: read and change log levels at run time (KIP-495, with KIP-976's
//! `last_modified` and `scope`). Names are `tracing` targets; see
//! [`sluice_runtime::logging`] for how Connect's logger names map onto them.

use std::collections::BTreeMap;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use sluice_runtime::logging::LoggerLevel;

use crate::error::{ApiError, ApiResult};
use crate::request::{self, JsonBody, PathParams, Query};
use crate::RestState;

/// `GET /admin/loggers`: `{"<logger>": {"level": "INFO", "last_modified": null|ms}}` for root
/// and every logger whose level was set.
pub async fn list(State(state): State<RestState>) -> Json<BTreeMap<String, LoggerLevel>> {
    Json(state.loggers.list())
}

/// `GET /admin/loggers/{name}`: the logger's effective level. A name that is no logger here
/// is 404 `Logger X not found.`, Connect's answer for a logger it does not know.
pub async fn get(State(state): State<RestState>, PathParams(name): PathParams<String>) -> ApiResult<Json<LoggerLevel>> {
    state.loggers.get(&name).map(Json).map_err(|_| ApiError::not_found(format!("Logger {name} not found.")))
}

/// `PUT /admin/loggers/{name}?scope=worker|cluster` with `{"level": "DEBUG"}`.
///
/// Worker scope (the default, and what an unknown scope falls back to, as in Connect)
/// answers 200 with the names of the loggers changed. Cluster scope answers 204 as Connect
/// does: in a group the level goes through the config topic to every worker (those that
/// start later do not apply it, as in Connect); alone, this worker is the whole cluster.
/// A missing level is 400 and an unknown level 404, both with Connect's messages.
pub async fn set(
    State(state): State<RestState>,
    PathParams(name): PathParams<String>,
    query: Query,
    JsonBody(body): JsonBody,
) -> ApiResult<Response> {
    let mut body = request::string_map_with_nulls(body, "Request body")?;
    let level =
        body.remove("level").flatten().ok_or_else(|| ApiError::bad_request("Desired 'level' parameter was not specified in request."))?;
    let scope = query.first("scope").unwrap_or("worker").to_ascii_lowercase();
    if scope != "worker" && scope != "cluster" {
        tracing::warn!(scope, "unknown logging scope; using worker");
    }
    if scope == "cluster" {
        // Checked here, so a bad request is refused before it reaches the config topic.
        sluice_runtime::logging::parse_level(&level)?;
        sluice_runtime::logging::target_of(&name)?;
        if !state.herder.set_cluster_logger_level(name.trim(), &level).await? {
            state.loggers.set(&name, &level)?;
        }
        return Ok(StatusCode::NO_CONTENT.into_response());
    }
    Ok(Json(state.loggers.set(&name, &level)?).into_response())
}
