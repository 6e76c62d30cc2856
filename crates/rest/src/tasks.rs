//! `/connectors/{name}/tasks`: task configs, one task's status, restarting a task.

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
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

/// A task id from the path. One that is not a number matches no resource in Connect (its
/// path parameter is an `Integer`), so it is the plain 404 of an unknown path.
fn task_id((connector, task): (String, String)) -> ApiResult<ConnectorTaskId> {
    let task = task.parse::<u32>().map_err(|_| ApiError::no_such_path())?;
    Ok(ConnectorTaskId { connector, task })
}
