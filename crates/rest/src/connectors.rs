//! `/connectors`: listing and creating connectors, and one connector's info, config, status
//! and lifecycle (restart, pause, resume, stop, delete).

use axum::extract::State;
use axum::http::header::{HOST, LOCATION};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use percent_encoding::{utf8_percent_encode, AsciiSet, CONTROLS};
use serde_json::{Map, Value};
use sluice_api::Props;
use sluice_runtime::herder::{ConnectorInfo, ConnectorStateInfo, HerderError, RestartRequest, RestartsInfo, TargetState};

use crate::error::{ApiError, ApiResult};
use crate::request::{self, JsonBody, PathParams, Query};
use crate::RestState;

/// The config key that holds the connector's name.
pub const NAME_CONFIG: &str = "name";

/// `GET /connectors`: the names, or with `expand=status` and/or `expand=info` (repeatable) an
/// object `{name: {"status": …, "info": …}}`. Unknown expansions are ignored and a connector
/// deleted while the answer is built is left out, as in Connect.
pub async fn list(State(state): State<RestState>, query: Query) -> ApiResult<Response> {
    let names = state.herder.connectors().await;
    if !query.has("expand") {
        return Ok(Json(names).into_response());
    }
    let mut out = Map::new();
    for name in names {
        match expand(&state, &name, &query).await {
            Ok(entry) => {
                out.insert(name, Value::Object(entry));
            }
            Err(HerderError::NotFound(_)) => tracing::debug!(connector = %name, "connector went away while listing"),
            Err(e) => return Err(e.into()),
        }
    }
    Ok(Json(out).into_response())
}

async fn expand(state: &RestState, name: &str, query: &Query) -> Result<Map<String, Value>, HerderError> {
    let mut entry = Map::new();
    for expansion in query.all("expand") {
        let value = match expansion {
            "status" => to_value(state.herder.connector_status(name).await?)?,
            "info" => to_value(state.herder.connector_info(name).await?)?,
            other => {
                tracing::debug!(expansion = other, "ignoring unknown expansion");
                continue;
            }
        };
        entry.insert(expansion.to_owned(), value);
    }
    Ok(entry)
}

fn to_value(v: impl serde::Serialize) -> Result<Value, HerderError> {
    serde_json::to_value(v).map_err(|e| HerderError::Internal(format!("cannot serialise response: {e}")))
}

/// `POST /connectors` with `{"name", "config", "initial_state"}`: 201 with the connector's
/// info and a `Location` header; 409 (from the herder) if the name is taken.
pub async fn create(State(state): State<RestState>, headers: HeaderMap, JsonBody(body): JsonBody) -> ApiResult<Response> {
    let (name, config, initial_state) = create_request(body)?;
    let (_, info) = state.herder.put_connector_config(&name, config, false, initial_state).await?;
    Ok(created(&headers, &name, info))
}

/// The name, config and initial state of a `POST /connectors` body, checked as far as it can
/// be without the herder (which validates the config). Public for the fuzz targets in `fuzz/`.
pub fn create_request(body: Value) -> ApiResult<(String, Props, Option<TargetState>)> {
    let CreateRequest { name, mut config, initial_state } = CreateRequest::parse(body)?;
    check_name_in_config(&name, &mut config)?;
    check_name(&name)?;
    Ok((name, config, initial_state))
}

/// Connect's `CreateConnectorRequest`.
#[derive(Debug)]
struct CreateRequest {
    name: String,
    config: Props,
    initial_state: Option<TargetState>,
}

impl CreateRequest {
    fn parse(body: Value) -> ApiResult<Self> {
        let mut name = String::new();
        let mut config = None;
        let mut initial_state = None;
        for (field, value) in request::object(body, "Request body")? {
            match field.as_str() {
                // Trimmed, and absent read as empty, as Connect does.
                "name" => name = request::string_or_null(value, "name")?.unwrap_or_default().trim().to_owned(),
                "config" if value.is_null() => {}
                "config" => config = Some(request::string_map(value, "Connector configuration")?),
                "initial_state" => {
                    initial_state = request::string_or_null(value, "initial_state")?.map(|s| parse_initial_state(&s)).transpose()?;
                }
                other => {
                    return Err(ApiError::bad_request(format!(
                        "Unrecognized field \"{other}\" in the request body: expected \"name\", \"config\" and \"initial_state\""
                    )))
                }
            }
        }
        let config = config
            .ok_or_else(|| ApiError::bad_request("Request body has no \"config\": give the connector configuration as a JSON object"))?;
        Ok(Self { name, config, initial_state })
    }
}

/// `initial_state` as Connect reads it (any case): RUNNING, PAUSED or STOPPED.
fn parse_initial_state(s: &str) -> ApiResult<TargetState> {
    match s.to_ascii_uppercase().as_str() {
        "RUNNING" => Ok(TargetState::Started),
        "PAUSED" => Ok(TargetState::Paused),
        "STOPPED" => Ok(TargetState::Stopped),
        _ => Err(ApiError::bad_request(format!("Invalid initial_state '{s}': expected RUNNING, PAUSED or STOPPED"))),
    }
}

/// Connect's rule: a `name` in the config must equal the connector's name (from the body or
/// the URL), and is added when missing. The message is Connect's, "URL" included even for
/// `POST /connectors`.
pub fn check_name_in_config(name: &str, config: &mut Props) -> ApiResult<()> {
    match config.get(NAME_CONFIG) {
        Some(included) if included != name => Err(ApiError::bad_request(format!(
            "Connector name configuration ({included}) doesn't match connector name in the URL ({name})"
        ))),
        Some(_) => Ok(()),
        None => {
            config.insert(NAME_CONFIG.to_owned(), name.to_owned());
            Ok(())
        }
    }
}

/// A connector name must be non-empty and free of control characters (Connect's
/// `NonEmptyStringWithoutControlChars`, which its herder applies during validation).
pub fn check_name(name: &str) -> ApiResult<()> {
    if name.is_empty() {
        return Err(ApiError::bad_request("Connector name is missing or empty: give a non-empty \"name\""));
    }
    let controls: Vec<String> = name.chars().filter(|c| c.is_control()).map(|c| u32::from(c).to_string()).collect();
    if !controls.is_empty() {
        return Err(ApiError::bad_request(format!(
            "Connector name may not contain control characters but had the following: {}",
            controls.join(", ")
        )));
    }
    Ok(())
}

/// Characters escaped in a path segment of the `Location` header.
const SEGMENT: &AsciiSet =
    &CONTROLS.add(b' ').add(b'"').add(b'#').add(b'%').add(b'/').add(b'<').add(b'>').add(b'?').add(b'`').add(b'{').add(b'}');

/// 201 with `Location: http://{host}/connectors/{name}`. Connect (Jersey) makes the location
/// absolute against the request; without a `Host` header it stays relative.
fn created(headers: &HeaderMap, name: &str, info: ConnectorInfo) -> Response {
    let path = format!("/connectors/{}", utf8_percent_encode(name, SEGMENT));
    let absolute = headers.get(HOST).and_then(|h| h.to_str().ok()).map(|host| format!("http://{host}{path}"));
    let location = absolute.and_then(|l| HeaderValue::from_str(&l).ok()).or_else(|| HeaderValue::from_str(&path).ok());
    let mut response = (StatusCode::CREATED, Json(info)).into_response();
    if let Some(location) = location {
        response.headers_mut().insert(LOCATION, location);
    }
    response
}

/// `GET /connectors/{name}`.
pub async fn info(State(state): State<RestState>, PathParams(name): PathParams<String>) -> ApiResult<Json<ConnectorInfo>> {
    Ok(Json(state.herder.connector_info(&name).await?))
}

/// `DELETE /connectors/{name}`: 204. A connector a directory declares answers 409 under
/// `connectors.dir.drift=reject`; under `revert` or `allow` the next pass creates it again.
pub async fn delete(State(state): State<RestState>, PathParams(name): PathParams<String>) -> ApiResult<StatusCode> {
    crate::directory::guard(&state, &name).await?;
    state.herder.delete_connector(&name).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// `GET /connectors/{name}/config`.
pub async fn config(State(state): State<RestState>, PathParams(name): PathParams<String>) -> ApiResult<Json<Props>> {
    Ok(Json(state.herder.connector_config(&name).await?))
}

/// `PUT /connectors/{name}/config` with the config map: 201 (and `Location`) when this
/// created the connector, 200 when it replaced its config.
pub async fn put_config(
    State(state): State<RestState>,
    PathParams(name): PathParams<String>,
    headers: HeaderMap,
    JsonBody(body): JsonBody,
) -> ApiResult<Response> {
    let mut config = put_config_request(&name, body)?;
    if let Some(owner_keys) = crate::directory::guard(&state, &name).await? {
        config.extend(owner_keys);
    }
    let (was_created, info) = state.herder.put_connector_config(&name, config, true, None).await?;
    if was_created {
        Ok(created(&headers, &name, info))
    } else {
        Ok(Json(info).into_response())
    }
}

/// The config of a `PUT /connectors/{name}/config` body, checked as far as it can be without
/// the herder (which validates it). Public for the fuzz targets in `fuzz/`.
pub fn put_config_request(name: &str, body: Value) -> ApiResult<Props> {
    let mut config = request::string_map(body, "Connector configuration")?;
    check_name_in_config(name, &mut config)?;
    check_name(name)?;
    Ok(config)
}

/// `PATCH /connectors/{name}/config`: merges the body into the config; a JSON null removes
/// the key. 200 with the connector's info.
pub async fn patch_config(
    State(state): State<RestState>,
    PathParams(name): PathParams<String>,
    JsonBody(body): JsonBody,
) -> ApiResult<Json<ConnectorInfo>> {
    let mut patch = request::string_map_with_nulls(body, "Connector configuration patch")?;
    if crate::directory::guard(&state, &name).await?.is_some() {
        // The ownership keys stay.
        patch.retain(|k, _| !k.starts_with(sluice_runtime::declared::OWNER_PREFIX));
    }
    Ok(Json(state.herder.patch_connector_config(&name, patch).await?))
}

/// `GET /connectors/{name}/status`.
pub async fn status(State(state): State<RestState>, PathParams(name): PathParams<String>) -> ApiResult<Json<ConnectorStateInfo>> {
    Ok(Json(state.herder.connector_status(&name).await?))
}

/// `POST /connectors/{name}/restart?includeTasks=&onlyFailed=` (both default false): 204 when
/// only the connector instance was restarted, else 202 with the status showing what restarts.
pub async fn restart(State(state): State<RestState>, PathParams(name): PathParams<String>, query: Query) -> ApiResult<Response> {
    let req = RestartRequest { include_tasks: query.bool("includeTasks", false)?, only_failed: query.bool("onlyFailed", false)? };
    Ok(match state.herder.restart_connector(&name, req).await? {
        None => StatusCode::NO_CONTENT.into_response(),
        Some(status) => (StatusCode::ACCEPTED, Json(status)).into_response(),
    })
}

/// `GET /connectors/{name}/restarts`: the automatic restarts of the connector and its tasks
/// on this worker (count, last restart, next attempt, last error and its class).
pub async fn restarts(State(state): State<RestState>, PathParams(name): PathParams<String>) -> ApiResult<Json<RestartsInfo>> {
    Ok(Json(state.herder.restarts(&name).await?))
}

/// `GET /connectors/{name}/scaling`: task counts, the most tasks that can help and a
/// recommendation (sluice's own; see `sluice_runtime::scaling`).
pub async fn scaling(State(state): State<RestState>, PathParams(name): PathParams<String>) -> ApiResult<Json<sluice_runtime::scaling::ScalingInfo>> {
    Ok(Json(state.herder.scaling(&name).await?))
}

/// `PUT /connectors/{name}/pause`: 202.
pub async fn pause(State(state): State<RestState>, PathParams(name): PathParams<String>) -> ApiResult<StatusCode> {
    state.herder.set_target_state(&name, TargetState::Paused).await?;
    Ok(StatusCode::ACCEPTED)
}

/// `PUT /connectors/{name}/resume`: 202.
pub async fn resume(State(state): State<RestState>, PathParams(name): PathParams<String>) -> ApiResult<StatusCode> {
    state.herder.set_target_state(&name, TargetState::Started).await?;
    Ok(StatusCode::ACCEPTED)
}

/// `PUT /connectors/{name}/stop`: 204 (Connect's handler returns nothing, unlike pause and
/// resume which answer 202).
pub async fn stop(State(state): State<RestState>, PathParams(name): PathParams<String>) -> ApiResult<StatusCode> {
    state.herder.set_target_state(&name, TargetState::Stopped).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn create_request_rules() {
        let r = CreateRequest::parse(json!({"name": "  a ", "config": {"k": 1}, "initial_state": "paused"})).unwrap();
        assert_eq!(r.name, "a");
        assert_eq!(r.config["k"], "1");
        assert_eq!(r.initial_state, Some(TargetState::Paused));

        let r = CreateRequest::parse(json!({"config": {}})).unwrap();
        assert_eq!(r.name, "");
        assert_eq!(r.initial_state, None);

        let e = CreateRequest::parse(json!({"name": "a"})).unwrap_err();
        assert!(e.message().contains("no \"config\""), "{e}");
        let e = CreateRequest::parse(json!({"name": "a", "config": {}, "initialState": "PAUSED"})).unwrap_err();
        assert!(e.message().starts_with("Unrecognized field \"initialState\""), "{e}");
        let e = CreateRequest::parse(json!({"name": "a", "config": {}, "initial_state": "GONE"})).unwrap_err();
        assert_eq!(e.message(), "Invalid initial_state 'GONE': expected RUNNING, PAUSED or STOPPED");
    }

    #[test]
    fn name_rules() {
        let mut config = Props::new();
        check_name_in_config("a", &mut config).unwrap();
        assert_eq!(config[NAME_CONFIG], "a");
        let e = check_name_in_config("b", &mut config).unwrap_err();
        assert_eq!(e.message(), "Connector name configuration (a) doesn't match connector name in the URL (b)");
        assert!(check_name("").is_err());
        assert!(check_name("a\nb").unwrap_err().message().ends_with("following: 10"));
        check_name("a b/c").unwrap();
    }

    #[test]
    fn location_is_absolute_when_the_host_is_known_and_escapes_the_name() {
        let info = ConnectorInfo { name: "a b/c".into(), config: Props::new(), tasks: vec![], kind: sluice_api::ConnectorKind::Source };
        let mut headers = HeaderMap::new();
        let r = created(&headers, "a b/c", info.clone());
        assert_eq!(r.headers()[LOCATION], "/connectors/a%20b%2Fc");
        headers.insert(HOST, HeaderValue::from_static("localhost:8083"));
        let r = created(&headers, "a b/c", info);
        assert_eq!(r.headers()[LOCATION], "http://localhost:8083/connectors/a%20b%2Fc");
    }
}
