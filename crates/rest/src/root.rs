//! `GET /` (Connect's `ServerInfo`) and `GET /health` (KIP-1017's `WorkerStatus`).

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use serde::Serialize;
use std::borrow::Cow;

use crate::RestState;

#[derive(Debug, Serialize)]
pub struct ServerInfo {
    pub version: String,
    pub commit: String,
    pub kafka_cluster_id: String,
}

/// `GET /`.
pub async fn server_info(State(state): State<RestState>) -> Json<ServerInfo> {
    Json(ServerInfo { version: state.version, commit: state.commit, kafka_cluster_id: state.kafka_cluster_id })
}

#[derive(Debug, Serialize)]
pub struct WorkerStatus {
    pub status: &'static str,
    pub message: Cow<'static, str>,
}

/// Connect's texts for a worker that is, or is not yet, ready.
pub const HEALTHY: WorkerStatus =
    WorkerStatus { status: "healthy", message: Cow::Borrowed("Worker has completed startup and is ready to handle requests.") };
pub const STARTING: WorkerStatus = WorkerStatus { status: "starting", message: Cow::Borrowed("Worker is still starting up.") };
pub const UNHEALTHY: WorkerStatus = WorkerStatus {
    status: "unhealthy",
    message: Cow::Borrowed("Worker was unable to handle this request and may be unable to handle other requests."),
};

/// How long `GET /health` waits for the herder (Connect's `DEFAULT_HEALTH_CHECK_TIMEOUT_MS`).
pub const HEALTH_CHECK_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// `GET /health`: 503 while the herder starts; once started, 200 when the herder takes a
/// request within [`HEALTH_CHECK_TIMEOUT`] (Connect sends a no-op through its herder's queue;
/// ours takes the lock every management call takes), else 500 ("unhealthy"). In a group,
/// also 500 once the worker has been without an assignment for longer than that (a
/// rebalance that does not end, or a group coordinator out of reach), naming it as Connect
/// names the stage its herder is stuck in. A failed connector never fails it.
pub async fn health(State(state): State<RestState>) -> (StatusCode, Json<WorkerStatus>) {
    if state.herder.is_ready() {
        if let Some(out) = state.herder.ensuring_membership_for().filter(|d| *d > HEALTH_CHECK_TIMEOUT) {
            // Connect's herder thread would be stuck joining the group: its health check
            // times out with this stage.
            let message = format!(
                "{} The worker is currently ensuring membership in the cluster, which began {} s ago.",
                UNHEALTHY.message,
                out.as_secs()
            );
            (StatusCode::INTERNAL_SERVER_ERROR, Json(WorkerStatus { status: UNHEALTHY.status, message: Cow::Owned(message) }))
        } else if state.herder.responsive(HEALTH_CHECK_TIMEOUT).await {
            (StatusCode::OK, Json(HEALTHY))
        } else {
            (StatusCode::INTERNAL_SERVER_ERROR, Json(UNHEALTHY))
        }
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, Json(STARTING))
    }
}

/// `GET /metrics`: the worker's metrics in Prometheus' text exposition format (see
/// `sluice_runtime::metrics` for the names).
pub async fn metrics(State(state): State<RestState>) -> axum::response::Response {
    use axum::response::IntoResponse;
    match state.herder.metrics().await {
        Some(text) => ([(axum::http::header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")], text).into_response(),
        None => crate::error::ApiError::no_such_path().into_response(),
    }
}
