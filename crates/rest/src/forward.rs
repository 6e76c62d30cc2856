//! In a group, writes go through the leader (as Connect's `DistributedHerder` does): a
//! follower forwards `POST`/`PUT`/`PATCH`/`DELETE` under `/connectors` to the leader's URL
//! from its assignment, marked `forward=false` so they are not forwarded twice, and
//! relays the answer. Until a worker has joined its group and knows the leader, writes
//! answer 409; a later rebalance does not stop them (Connect answers 409 during every
//! rebalance): each write is a record in the config topic, which the leader's next
//! assignment takes in. Reads are answered locally from the state every member reads from
//! the internal topics.

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::{ApiError, RestState};

/// Connect's message for a request that meets a rebalance.
pub const REBALANCE_MESSAGE: &str = "Cannot complete request because of a conflicting operation (e.g. worker rebalance)";
/// Largest request body forwarded.
const MAX_BODY: usize = 16 << 20;

pub async fn writes_to_leader(State(state): State<RestState>, req: Request, next: Next) -> Response {
    let write = matches!(*req.method(), Method::POST | Method::PUT | Method::PATCH | Method::DELETE);
    let forwarded = req.uri().query().is_some_and(|q| q.split('&').any(|kv| kv == "forward=false"));
    if !write || !req.uri().path().starts_with("/connectors") {
        return next.run(req).await;
    }
    if !state.herder.takes_writes() {
        return ApiError::new(StatusCode::CONFLICT, REBALANCE_MESSAGE).into_response();
    }
    let leader = match state.herder.leader_url() {
        Some(url) if !forwarded => url,
        _ => return next.run(req).await,
    };
    let method = req.method().clone();
    let path_and_query = req.uri().path_and_query().map(|p| p.as_str().to_owned()).unwrap_or_default();
    let sep = if path_and_query.contains('?') { '&' } else { '?' };
    let url = format!("{}{}{sep}forward=false", leader.trim_end_matches('/'), path_and_query);
    let content_type = req.headers().get("content-type").and_then(|v| v.to_str().ok()).map(str::to_owned);
    // The leader authenticates the client as this worker did (Connect's RestClient forwards
    // the header too).
    let authorization = req.headers().get("authorization").cloned();
    // Internal requests keep their signature: the body goes on byte for byte, so the leader
    // checks it against the same session key.
    let signed: Vec<(&'static str, axum::http::HeaderValue)> =
        [sluice_runtime::herder::session::SIGNATURE_HEADER, sluice_runtime::herder::session::SIGNATURE_ALGORITHM_HEADER]
            .into_iter()
            .filter_map(|h| req.headers().get(h).map(|v| (h, v.clone())))
            .collect();
    let body = match axum::body::to_bytes(req.into_body(), MAX_BODY).await {
        Ok(b) => b,
        Err(_) => return ApiError::bad_request("request body too large to forward").into_response(),
    };
    tracing::debug!(%method, %url, "forwarding a write to the group leader");
    let tls = state.forward_tls.clone();
    let sent = tokio::task::spawn_blocking(move || -> Result<(u16, Option<String>, Vec<u8>), ureq::Error> {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(std::time::Duration::from_secs(90)))
            .tls_config(tls.unwrap_or_else(crate::tls::no_roots))
            .build()
            .into();
        let request = ureq::http::Request::builder().method(method.as_str()).uri(&url);
        let request = match &content_type {
            Some(ct) => request.header("content-type", ct),
            None => request,
        };
        let mut request = match authorization {
            Some(a) => request.header("authorization", a),
            None => request,
        };
        for (name, value) in signed {
            request = request.header(name, value);
        }
        let request = request.body(body.to_vec()).map_err(ureq::Error::from)?;
        let mut response = agent.run(request)?;
        let ct = response.headers().get("content-type").and_then(|v| v.to_str().ok()).map(str::to_owned);
        let bytes = response.body_mut().read_to_vec()?;
        Ok((response.status().as_u16(), ct, bytes))
    })
    .await;
    match sent {
        Ok(Ok((status, ct, bytes))) => {
            let mut builder = Response::builder().status(status);
            if let Some(ct) = ct {
                builder = builder.header("content-type", ct);
            }
            builder.body(Body::from(bytes)).unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
        }
        Ok(Err(e)) => {
            ApiError::new(StatusCode::CONFLICT, format!("Cannot complete request because the leader {leader} could not be reached: {e}"))
                .into_response()
        }
        Err(e) => ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, format!("forwarding failed: {e}")).into_response(),
    }
}
