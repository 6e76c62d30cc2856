//! `/connectors/{name}/offsets` (KIP-875: read, alter and reset a connector's offsets) and
//! `/connectors/{name}/topics` (KIP-558: the topics a connector has used).

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use serde::Serialize;
use serde_json::{Map, Value};
use sluice_runtime::herder::ConnectorOffset;

use crate::error::{ApiError, ApiResult};
use crate::request::{self, JsonBody, PathParams};
use crate::RestState;

/// Connect's `ConnectorOffsets`.
#[derive(Debug, Serialize)]
pub struct ConnectorOffsets {
    pub offsets: Vec<ConnectorOffset>,
}

/// Connect's `Message`.
#[derive(Debug, Serialize)]
pub struct Message {
    pub message: String,
}

/// Connect's `ActiveTopicsInfo`, as it appears under the connector's name.
#[derive(Debug, Serialize)]
pub struct ActiveTopics {
    pub topics: Vec<String>,
}

/// `GET /connectors/{name}/offsets`: `{"offsets": [{"partition": {…}, "offset": {…}}]}`.
pub async fn get(State(state): State<RestState>, PathParams(name): PathParams<String>) -> ApiResult<Json<ConnectorOffsets>> {
    Ok(Json(ConnectorOffsets { offsets: state.herder.connector_offsets(&name).await? }))
}

/// `PATCH /connectors/{name}/offsets` with `{"offsets": […]}`: 200 with `{"message": …}`.
/// An `offset` of null asks to remove that partition's offset.
pub async fn alter(
    State(state): State<RestState>,
    PathParams(name): PathParams<String>,
    JsonBody(body): JsonBody,
) -> ApiResult<Json<Message>> {
    let offsets = parse_offsets(body)?;
    Ok(Json(Message { message: state.herder.alter_connector_offsets(&name, offsets).await? }))
}

/// `DELETE /connectors/{name}/offsets`: 200 with `{"message": …}`.
pub async fn reset(State(state): State<RestState>, PathParams(name): PathParams<String>) -> ApiResult<Json<Message>> {
    Ok(Json(Message { message: state.herder.reset_connector_offsets(&name).await? }))
}

/// Connect's message for a request without offsets.
pub const NO_OFFSETS: &str = "Partitions / offsets need to be provided for an alter offsets request";

fn parse_offsets(body: Value) -> ApiResult<Vec<ConnectorOffset>> {
    let mut offsets = None;
    for (field, value) in request::object(body, "Request body")? {
        match field.as_str() {
            "offsets" => offsets = Some(value),
            other => {
                return Err(ApiError::bad_request(format!("Unrecognized field \"{other}\" in the request body: expected \"offsets\"")))
            }
        }
    }
    let entries = match offsets {
        None | Some(Value::Null) => return Err(ApiError::bad_request(NO_OFFSETS)),
        Some(Value::Array(entries)) if entries.is_empty() => return Err(ApiError::bad_request(NO_OFFSETS)),
        Some(Value::Array(entries)) => entries,
        Some(other) => return Err(ApiError::bad_request(format!("\"offsets\" must be an array, not {}", request::kind(&other)))),
    };
    entries.into_iter().enumerate().map(|(i, entry)| parse_offset(i, entry)).collect()
}

fn parse_offset(i: usize, entry: Value) -> ApiResult<ConnectorOffset> {
    let mut partition = None;
    let mut offset = None;
    for (field, value) in request::object(entry, &format!("offsets[{i}]"))? {
        match field.as_str() {
            "partition" => partition = Some(value),
            "offset" => offset = Some(value),
            other => {
                return Err(ApiError::bad_request(format!(
                    "Unrecognized field \"{other}\" in offsets[{i}]: expected \"partition\" and \"offset\""
                )))
            }
        }
    }
    let partition = match partition {
        Some(Value::Object(p)) => p,
        other => {
            let found = other.as_ref().map_or("missing", request::kind);
            return Err(ApiError::bad_request(format!("offsets[{i}].partition must be a JSON object, not {found}")));
        }
    };
    let offset: Option<Map<String, Value>> = match offset {
        None | Some(Value::Null) => None,
        Some(Value::Object(o)) => Some(o),
        Some(other) => {
            return Err(ApiError::bad_request(format!("offsets[{i}].offset must be a JSON object or null, not {}", request::kind(&other))))
        }
    };
    Ok(ConnectorOffset { partition, offset })
}

/// `GET /connectors/{name}/topics`: `{"<name>": {"topics": […]}}`.
pub async fn topics(State(state): State<RestState>, PathParams(name): PathParams<String>) -> ApiResult<Json<Map<String, Value>>> {
    let topics = state.herder.connector_topics(&name).await?;
    let info =
        serde_json::to_value(ActiveTopics { topics }).map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?;
    Ok(Json(Map::from_iter([(name, info)])))
}

/// `PUT /connectors/{name}/topics/reset`: 202, as Connect answers it.
pub async fn reset_topics(State(state): State<RestState>, PathParams(name): PathParams<String>) -> ApiResult<StatusCode> {
    state.herder.reset_connector_topics(&name).await?;
    Ok(StatusCode::ACCEPTED)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn offsets_body_rules() {
        let o = parse_offsets(json!({"offsets": [{"partition": {"p": 1}, "offset": {"o": 2}}, {"partition": {"p": 2}, "offset": null}]}))
            .unwrap();
        assert_eq!(o.len(), 2);
        assert_eq!(o[1].offset, None);
        for body in [json!({}), json!({"offsets": null}), json!({"offsets": []})] {
            assert_eq!(parse_offsets(body).unwrap_err().message(), NO_OFFSETS);
        }
        let e = parse_offsets(json!({"offsets": [{"offset": {}}]})).unwrap_err();
        assert_eq!(e.message(), "offsets[0].partition must be a JSON object, not missing");
        let e = parse_offsets(json!({"offsets": [{"partition": {}, "offset": 5}]})).unwrap_err();
        assert_eq!(e.message(), "offsets[0].offset must be a JSON object or null, not a number");
    }
}
