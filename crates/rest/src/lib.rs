//! Kafka Connect's REST API over the runtime's [`Herder`]: the same paths, JSON shapes and
//! status codes as a Connect 3.9/4.x worker, so existing tooling (curl scripts, connect-cli,
//! UIs, operators) works unchanged.
//!
//! The API is a function of its state: [`router`] builds an [`axum::Router`] from a
//! [`RestState`], and [`serve`] runs it on a listener until a shutdown token fires. Tests call
//! the router in-process; the binary only wires.
//!
//! | module | resource |
//! | --- | --- |
//! | [`root`] | `GET /`, `GET /health` |
//! | [`health`] | `GET /health/connectors` (the `kafka-connect-healthcheck` contract) |
//! | [`connectors`] | `/connectors`, a connector's config, status and lifecycle |
//! | [`tasks`] | `/connectors/{name}/tasks…` |
//! | [`directory`] | `/connectors-dir…` (`connectors.dir`) and the drift rule for declared connectors |
//! | [`offsets`] | `/connectors/{name}/offsets` and `/topics` |
//! | [`plugins`] | `/connector-plugins…` |
//! | [`loggers`] | `/admin/loggers…` |
//! | [`error`] | the `{"error_code", "message"}` error body |
//! | [`request`] | reading bodies, queries and paths into that error shape |
//!
//! Where we differ from Connect on purpose (each also noted where it is done):
//! - a malformed JSON body is 400 with the parse error's position, not 500;
//! - a boolean query parameter that is not `true`/`false` is 400, not silently `false`;
//! - unknown fields in a create or alter-offsets request, a null config value, a config value
//!   or `name` that is an object or array, a missing `config`, or an unknown `initial_state`
//!   are 400 with a message naming the field, not Jackson's 500 (numbers and booleans are
//!   still read as their text, as Jackson does);
//! - `PUT /connector-plugins/{plugin}/config/validate` without `connector.class` validates
//!   against the plugin named in the path.
//!
//! Request bodies are never logged: connector configs carry secrets.

use std::sync::Arc;
use std::time::Instant;

use axum::extract::Request;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use axum::Router;
use sluice_runtime::herder::Herder;
use sluice_runtime::logging::LogLevels;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

pub mod auth;
pub mod connectors;
pub mod cors;
pub mod directory;
pub mod error;
mod forward;
pub mod health;
pub mod loggers;
pub mod offsets;
pub mod openapi;
pub mod plugins;
pub mod request;
pub mod root;
pub mod tasks;
pub mod tls;
pub mod ui;

pub use error::ApiError;

/// What the API serves from.
#[derive(Clone)]
pub struct RestState {
    pub herder: Arc<dyn Herder>,
    /// Run-time log levels, for `/admin/loggers`.
    pub loggers: LogLevels,
    /// `GET /` `version`.
    pub version: String,
    /// `GET /` `commit`.
    pub commit: String,
    /// `GET /` `kafka_cluster_id`.
    pub kafka_cluster_id: String,
    /// The worker's `connectors.dir` (its drift rule applies to REST writes even when the
    /// worker has no directory of its own: a declared connector is owned cluster-wide).
    pub directory: Option<Arc<sluice_runtime::declared::reconcile::Directory>>,
    /// Who may use the API (Basic users, tokens; see [`auth`]); `None`: open.
    pub auth: Option<Arc<auth::RestAuth>>,
    /// Cross-origin requests (`access.control.allow.origin`, see [`cors`]).
    pub cors: Option<Arc<cors::Cors>>,
    /// How a follower reaches an `https://` leader (see [`tls::forwarding_tls`]).
    pub forward_tls: Option<ureq::tls::TlsConfig>,
}

/// The whole API. Unknown paths answer 404 and known paths with another method 405, both in
/// Connect's error shape and wording. One trailing slash is the same path (Connect's router
/// ignores it); an empty segment (`//`) anywhere is 400, as Connect's Jetty answers it.
pub fn router(state: RestState) -> Router {
    router_for(state, Serves::All)
}

/// Which endpoints a listener serves (`admin.listeners`, KIP-495).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Serves {
    /// Everything: no `admin.listeners`.
    All,
    /// Everything but `/admin`: the `listeners` when `admin.listeners` is set.
    WithoutAdmin,
    /// Only `/admin`: the `admin.listeners`.
    AdminOnly,
}

/// [`router`] for one kind of listener.
pub fn router_for(state: RestState, serves: Serves) -> Router {
    let routes = routes(state, serves);
    Router::new().fallback_service(routes).layer(middleware::from_fn(normalise_path))
}

fn routes(state: RestState, serves: Serves) -> Router {
    let admin = Router::new()
        .route("/admin/loggers", get(loggers::list))
        .route("/admin/loggers/{logger}", get(loggers::get).put(loggers::set));
    if serves == Serves::AdminOnly {
        return layered(admin, state);
    }
    let api = Router::new()
        .route("/", get(root::server_info))
        .route("/health", get(root::health))
        .route("/health/connectors", get(health::connectors))
        .route("/metrics", get(root::metrics))
        .route("/openapi.json", get(openapi::document))
        .route("/connectors", get(connectors::list).post(connectors::create))
        .route("/connectors/{connector}", get(connectors::info).delete(connectors::delete))
        .route("/connectors/{connector}/config", get(connectors::config).put(connectors::put_config).patch(connectors::patch_config))
        .route("/connectors/{connector}/status", get(connectors::status))
        .route("/connectors/{connector}/restart", post(connectors::restart))
        .route("/connectors/{connector}/restarts", get(connectors::restarts))
        .route("/connectors/{connector}/scaling", get(connectors::scaling))
        .route("/connectors-dir", get(directory::last))
        .route("/connectors-dir/plan", post(directory::plan))
        .route("/connectors-dir/apply", post(directory::apply))
        .route("/connectors/{connector}/pause", put(connectors::pause))
        .route("/connectors/{connector}/resume", put(connectors::resume))
        .route("/connectors/{connector}/stop", put(connectors::stop))
        .route("/connectors/{connector}/tasks", get(tasks::list).post(tasks::put_configs))
        .route("/connectors/{connector}/fence", put(tasks::fence))
        .route("/connectors/{connector}/tasks/{task}/status", get(tasks::status))
        .route("/connectors/{connector}/tasks/{task}/restart", post(tasks::restart))
        .route("/connectors/{connector}/topics", get(offsets::topics))
        .route("/connectors/{connector}/topics/reset", put(offsets::reset_topics))
        .route("/connectors/{connector}/offsets", get(offsets::get).patch(offsets::alter).delete(offsets::reset))
        .route("/connector-plugins", get(plugins::list))
        .route("/connector-plugins/{plugin}/config", get(plugins::config_def))
        .route("/connector-plugins/{plugin}/config/validate", put(plugins::validate))
        .route("/ui", get(ui::page))
        .route("/ui/whoami", get(ui::whoami));
    let api = if serves == Serves::All { api.merge(admin) } else { api };
    layered(api, state)
}

/// The fallbacks and layers every listener's routes get.
fn layered(routes: Router<RestState>, state: RestState) -> Router {
    let routes = routes
        // Applies to the routes above, so it comes after them.
        .method_not_allowed_fallback(|| async { ApiError::method_not_allowed() })
        .fallback(|| async { ApiError::no_such_path() })
        .layer(middleware::from_fn_with_state(state.clone(), forward::writes_to_leader));
    // Authentication comes before forwarding (a follower refuses what its leader would) and
    // after the access log (refusals are logged too).
    let routes = match state.auth.clone() {
        Some(a) => routes.layer(middleware::from_fn_with_state(a, auth::require)),
        None => routes,
    };
    // Preflights are answered before authentication (browsers send no credentials with them).
    let routes = match state.cors.clone() {
        Some(c) => routes.layer(middleware::from_fn_with_state(c, cors::layer)),
        None => routes,
    };
    routes.layer(middleware::from_fn(access_log)).with_state(state)
}

/// Runs before routing: answers 400 for a path with an empty segment and drops one trailing
/// slash, so `/connectors/x/status/` is `/connectors/x/status`.
async fn normalise_path(mut req: Request, next: Next) -> Response {
    let path = req.uri().path();
    if path.contains("//") {
        return ApiError::bad_request("Ambiguous URI empty segment").into_response();
    }
    if path.len() > 1 && path.ends_with('/') {
        let trimmed = &path[..path.len() - 1];
        let rewritten = match req.uri().query() {
            Some(q) => format!("{trimmed}?{q}"),
            None => trimmed.to_owned(),
        };
        let mut parts = req.uri().clone().into_parts();
        match rewritten.parse() {
            Ok(pq) => parts.path_and_query = Some(pq),
            Err(_) => return ApiError::bad_request("Malformed request path").into_response(),
        }
        match axum::http::Uri::from_parts(parts) {
            Ok(uri) => *req.uri_mut() = uri,
            Err(_) => return ApiError::bad_request("Malformed request path").into_response(),
        }
    }
    next.run(req).await
}

/// [`serve`] over TLS: `listener`'s connections are TLS with `config`.
pub async fn serve_tls(
    listener: TcpListener,
    config: Arc<rustls::ServerConfig>,
    router: Router,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    use axum::serve::ListenerExt as _;
    let listener = tls::TlsListener::new(listener, config)?;
    if let Ok(addr) = axum::serve::Listener::local_addr(&listener) {
        tracing::info!(%addr, "REST API listening (https)");
    }
    // `tap_io` gives the client's address to handlers, as for plain listeners.
    axum::serve(listener.tap_io(|_| {}), router.into_make_service_with_connect_info::<std::net::SocketAddr>())
        .with_graceful_shutdown(async move { shutdown.cancelled().await })
        .await
}

/// Serves `router` on `listener` until `shutdown` is cancelled, then lets requests in flight
/// finish.
pub async fn serve(listener: TcpListener, router: Router, shutdown: CancellationToken) -> std::io::Result<()> {
    if let Ok(addr) = listener.local_addr() {
        tracing::info!(%addr, "REST API listening");
    }
    // The client's address is known to handlers (authentication counts failures per address).
    axum::serve(listener, router.into_make_service_with_connect_info::<std::net::SocketAddr>())
        .with_graceful_shutdown(async move { shutdown.cancelled().await })
        .await
}

/// One line per request: method, path, status and time. Never the body or the query (which
/// is harmless today, but a log line should not have to be audited for secrets).
async fn access_log(req: Request, next: Next) -> Response {
    let method = req.method().clone();
    let path = req.uri().path().to_owned();
    let start = Instant::now();
    let response = next.run(req).await;
    tracing::debug!(
        target: "sluice_rest::access",
        %method,
        path,
        status = response.status().as_u16(),
        elapsed_ms = start.elapsed().as_millis() as u64,
        "request"
    );
    response
}
