//! `GET /health/connectors`: whether the connectors and tasks are healthy, in the contract of
//! the `kafka-connect-healthcheck` sidecar (PyPI `kafka-connect-healthcheck` 0.3) that people
//! run beside Kafka Connect, served by the worker itself. `GET /health` (the worker can serve)
//! stays KIP-1017's and never fails for a connector.
//!
//! Query parameters, each the sidecar's setting of the same meaning:
//!
//! | parameter | sidecar setting | default |
//! |---|---|---|
//! | `states` (comma list) | `HEALTHCHECK_UNHEALTHY_STATES` | `FAILED` |
//! | `considered` (`connector`, `task`) | `HEALTHCHECK_CONSIDERED_CONTAINERS` | both |
//! | `threshold` (percent, 0–100) | `HEALTHCHECK_FAILURE_THRESHOLD_PERCENTAGE` | `0` |
//! | `worker` (`self` or a worker id) | `HEALTHCHECK_CONNECT_WORKER_ID` | every worker |
//! | `max_lag` (records; sluice's own) | – | none |
//!
//! With `max_lag`, a sink task on the answering worker whose lag (records past its committed
//! offsets, `sluice_sink_task_lag_records`) is above it is a failure of type `lag`.
//! Healthy when the share of considered connectors and tasks in an unhealthy state is at most
//! the threshold (no connectors: healthy): 200, else 503, with
//! `{"failures": [...], "failure_states", "failure_rate", "failure_threshold", "healthy"}`.
//! A status that cannot be read counts as a `broker` failure and is unhealthy whatever the
//! threshold, as the sidecar treats a Connect that does not answer.

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use serde_json::{json, Value};
use sluice_runtime::herder::{ConnectorStateInfo, HerderError};

use crate::error::{ApiError, ApiResult};
use crate::request::Query;
use crate::RestState;

/// What one request asks to be checked.
#[derive(Debug, Clone, PartialEq)]
struct Check {
    states: Vec<String>,
    connectors: bool,
    tasks: bool,
    /// A share, 0.0–1.0.
    threshold: f64,
    worker: Option<String>,
    max_lag: Option<f64>,
}

impl Check {
    fn from_query(query: &Query, this_worker: &str) -> ApiResult<Self> {
        let list = |name: &str, default: &str| -> Vec<String> {
            query
                .first(name)
                .unwrap_or(default)
                .split(',')
                .map(|s| s.trim().to_ascii_uppercase())
                .filter(|s| !s.is_empty())
                .collect()
        };
        let states = list("states", "FAILED");
        let considered = list("considered", "CONNECTOR,TASK");
        if let Some(bad) = considered.iter().find(|c| *c != "CONNECTOR" && *c != "TASK") {
            return Err(ApiError::bad_request(format!(
                "Invalid value '{}' in query parameter considered: expected connector and/or task",
                bad.to_ascii_lowercase()
            )));
        }
        let threshold = match query.first("threshold") {
            None => 0.0,
            Some(t) => match t.trim().parse::<f64>() {
                Ok(p) if (0.0..=100.0).contains(&p) => p / 100.0,
                _ => return Err(ApiError::bad_request(format!("Invalid value '{t}' for query parameter threshold: expected a percentage from 0 to 100"))),
            },
        };
        let max_lag = match query.first("max_lag") {
            None => None,
            Some(v) => match v.trim().parse::<f64>() {
                Ok(n) if n >= 0.0 && n.is_finite() => Some(n),
                _ => return Err(ApiError::bad_request(format!("Invalid value '{v}' for query parameter max_lag: expected a number of records"))),
            },
        };
        let worker = match query.first("worker") {
            None | Some("") => None,
            Some("self") => Some(this_worker.to_owned()),
            Some(w) => Some(w.to_owned()),
        };
        Ok(Self {
            states,
            connectors: considered.iter().any(|c| c == "CONNECTOR"),
            tasks: considered.iter().any(|c| c == "TASK"),
            threshold,
            worker,
            max_lag,
        })
    }

    fn here(&self, worker_id: &str) -> bool {
        self.worker.as_deref().is_none_or(|w| w == worker_id)
    }

    fn unhealthy(&self, state: &str) -> bool {
        self.states.iter().any(|s| s == state)
    }

    /// The counted entries and failures of one connector's status.
    fn tally(&self, status: &ConnectorStateInfo, failures: &mut Vec<Value>) -> usize {
        let mut counted = 0;
        let c = &status.connector;
        if self.connectors && self.here(&c.worker_id) {
            counted += 1;
            if self.unhealthy(c.state.name()) {
                failures.push(json!({"type": "connector", "connector": status.name, "state": c.state.name(), "worker_id": c.worker_id}));
            }
        }
        for t in status.tasks.iter().filter(|t| self.tasks && self.here(&t.state.worker_id)) {
            counted += 1;
            if self.unhealthy(t.state.state.name()) {
                failures.push(json!({
                    "type": "task",
                    "connector": status.name,
                    "id": t.id,
                    "state": t.state.state.name(),
                    "worker_id": t.state.worker_id,
                    "trace": t.state.trace.clone().unwrap_or_default(),
                }));
            }
        }
        counted
    }
}

/// `GET /health/connectors`.
pub async fn connectors(State(state): State<RestState>, query: Query) -> ApiResult<(StatusCode, Json<Value>)> {
    let check = Check::from_query(&query, &state.herder.worker_id())?;
    let mut failures = Vec::new();
    let (mut counted, mut unreachable) = (0usize, false);
    for name in state.herder.connectors().await {
        match state.herder.connector_status(&name).await {
            Ok(status) => counted += check.tally(&status, &mut failures),
            Err(HerderError::NotFound(_)) => {} // deleted meanwhile
            Err(e) => {
                tracing::debug!(connector = %name, error = %e, "connector health: the status cannot be read");
                failures.push(json!({"type": "broker", "connector": name}));
                unreachable = true;
            }
        }
    }
    if let (Some(max), true) = (check.max_lag, check.tasks) {
        let here = state.herder.worker_id();
        for (id, lag) in state.herder.task_lags().await {
            let already = failures.iter().any(|f| f["type"] == "task" && f["connector"] == id.connector.as_str() && f["id"] == id.task);
            if lag > max && check.here(&here) && !already {
                failures.push(json!({"type": "lag", "connector": id.connector, "id": id.task, "lag": lag, "max_lag": max, "worker_id": here}));
            }
        }
    }
    let rate = if counted == 0 { 0.0 } else { (failures.len() as f64 / counted as f64 * 100.0).round() / 100.0 };
    let healthy = !unreachable && rate <= check.threshold;
    let body = json!({
        "failures": failures,
        "failure_states": check.states,
        "failure_rate": rate,
        "failure_threshold": check.threshold,
        "healthy": healthy,
    });
    Ok((if healthy { StatusCode::OK } else { StatusCode::SERVICE_UNAVAILABLE }, Json(body)))
}

#[cfg(test)]
mod tests {
    use sluice_api::ConnectorKind;
    use sluice_runtime::herder::{State as S, StateInfo, TaskStateInfo};

    use super::*;

    fn status(name: &str, connector: (S, &str), tasks: &[(S, &str)]) -> ConnectorStateInfo {
        let info = |(state, worker): (S, &str)| StateInfo {
            state,
            worker_id: worker.to_owned(),
            version: None,
            trace: (state == S::Failed).then(|| format!("{name} broke")),
        };
        ConnectorStateInfo {
            name: name.to_owned(),
            connector: info(connector),
            tasks: tasks.iter().enumerate().map(|(i, t)| TaskStateInfo { id: i as u32, state: info(*t) }).collect(),
            kind: ConnectorKind::Source,
        }
    }

    #[test]
    fn failures_are_counted_per_considered_entry_on_the_chosen_worker() {
        let s = status("a", (S::Running, "w1:8083"), &[(S::Failed, "w1:8083"), (S::Running, "w2:8083"), (S::Paused, "w2:8083")]);
        let check = Check::from_query(&Query::parse(None), "w1:8083").unwrap();
        let mut failures = Vec::new();
        assert_eq!(check.tally(&s, &mut failures), 4);
        assert_eq!(failures, [json!({"type": "task", "connector": "a", "id": 0, "state": "FAILED", "worker_id": "w1:8083", "trace": "a broke"})]);

        let check = Check::from_query(&Query::parse(Some("states=failed,PAUSED&considered=task&worker=w2:8083")), "w1:8083").unwrap();
        let mut failures = Vec::new();
        assert_eq!(check.tally(&s, &mut failures), 2, "the two tasks on w2");
        assert_eq!(failures.len(), 1, "the paused one");

        let check = Check::from_query(&Query::parse(Some("worker=self&considered=connector")), "w1:8083").unwrap();
        let mut failures = Vec::new();
        assert_eq!(check.tally(&s, &mut failures), 1);
        assert!(failures.is_empty());
    }

    #[test]
    fn bad_parameters_are_named() {
        for (q, name) in [("threshold=101", "threshold"), ("threshold=x", "threshold"), ("considered=worker", "considered")] {
            let err = Check::from_query(&Query::parse(Some(q)), "w").unwrap_err();
            let text = format!("{err:?}");
            assert!(text.contains(name), "{q}: {text}");
        }
        let check = Check::from_query(&Query::parse(Some("threshold=25&max_lag=1000")), "w").unwrap();
        assert_eq!((check.threshold, check.max_lag), (0.25, Some(1000.0)));
        assert!(format!("{:?}", Check::from_query(&Query::parse(Some("max_lag=-1")), "w").unwrap_err()).contains("max_lag"));
    }
}
