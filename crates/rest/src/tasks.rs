//! `/connectors/{name}/tasks`: task configs, one task's status, restarting a task; and
//! Kafka Connect's internal endpoints between workers (task configs for the leader to
//! write, zombie fencing), signed in a sessioned group.

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::Json;
use sluice_runtime::herder::session::{InternalSignature, SIGNATURE_ALGORITHM_HEADER, SIGNATURE_HEADER};
use sluice_runtime::herder::{ConnectorTaskId, TaskInfo, TaskStateInfo};

use crate::error::{ApiError, ApiResult};
use crate::request::PathParams;
use crate::RestState;

/// `GET /connectors/{name}/tasks`: `[{"id": {"connector", "task"}, "config": {…}}]`.
pub async fn list(State(state): State<RestState>, PathParams(name): PathParams<String>) -> ApiResult<Json<Vec<TaskInfo>>> {
    Ok(Json(state.herder.task_configs(&name).await?))
}

/// `GET /connectors/{name}/tasks/{task}/status`.
pub async fn status(State(state): State<RestState>, PathParams(path): PathParams<(String, String)>) -> ApiResult<Json<TaskStateInfo>> {
    Ok(Json(state.herder.task_status(&task_id(path)?).await?))
}

/// `POST /connectors/{name}/tasks/{task}/restart`: 204.
pub async fn restart(State(state): State<RestState>, PathParams(path): PathParams<(String, String)>) -> ApiResult<StatusCode> {
    state.herder.restart_task(&task_id(path)?).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Internal `POST /connectors/{name}/tasks`: task configs from the worker running the
/// connector (`[{…}, …]`), for the leader to write: 204.
pub async fn put_configs(
    State(state): State<RestState>,
    PathParams(name): PathParams<String>,
    headers: HeaderMap,
    body: Bytes,
) -> ApiResult<StatusCode> {
    state.herder.put_task_configs_internal(&name, &body, signature(&headers)).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Internal `PUT /connectors/{name}/fence`: 204 once the leader fenced the connector's
/// earlier task producers.
pub async fn fence(
    State(state): State<RestState>,
    PathParams(name): PathParams<String>,
    headers: HeaderMap,
    body: Bytes,
) -> ApiResult<StatusCode> {
    state.herder.fence_zombies_internal(&name, &body, signature(&headers)).await?;
    Ok(StatusCode::NO_CONTENT)
}

fn signature(headers: &HeaderMap) -> Option<InternalSignature> {
    let get = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    InternalSignature::from_headers(get(SIGNATURE_HEADER), get(SIGNATURE_ALGORITHM_HEADER))
}

/// A task id from the path. One that is not a number matches no resource in Connect (its
/// path parameter is an `Integer`), so it is the plain 404 of an unknown path.
fn task_id((connector, task): (String, String)) -> ApiResult<ConnectorTaskId> {
    let task = task.parse::<u32>().map_err(|_| ApiError::no_such_path())?;
    Ok(ConnectorTaskId { connector, task })
}
