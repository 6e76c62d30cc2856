//! `GET /` (Connect's `ServerInfo`) and `GET /health` (KIP-1017's `WorkerStatus`).

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use serde::Serialize;

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
    pub message: &'static str,
}

/// Connect's texts for a worker that is, or is not yet, ready.
pub const HEALTHY: WorkerStatus =
    WorkerStatus { status: "healthy", message: "Worker has completed startup and is ready to handle requests." };
pub const STARTING: WorkerStatus = WorkerStatus { status: "starting", message: "Worker is still starting up." };

/// `GET /health`: 200 once the herder has started, 503 before.
///
/// Connect also sends a no-op request through its herder's queue and answers 500
/// ("unhealthy") if that times out after start-up; our herder has no such probe yet, so a
/// started worker is always reported healthy.
pub async fn health(State(state): State<RestState>) -> (StatusCode, Json<WorkerStatus>) {
    if state.herder.is_ready() {
        (StatusCode::OK, Json(HEALTHY))
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, Json(STARTING))
    }
}
