//! `/connector-plugins`: the installed plugins, a plugin's config definition, and validating a
//! config against it.

use axum::extract::State;
use axum::Json;
use serde::Serialize;
use sluice_api::{ConfigKey, ConfigType, ConfigValue};
use sluice_runtime::herder::{ConfigInfos, PluginInfo};

use crate::error::{ApiError, ApiResult};
use crate::request::{self, JsonBody, PathParams, Query};
use crate::RestState;

/// The config key naming a connector's plugin.
pub const CONNECTOR_CLASS_CONFIG: &str = "connector.class";

/// `GET /connector-plugins?connectorsOnly=` (default true).
pub async fn list(State(state): State<RestState>, query: Query) -> ApiResult<Json<Vec<PluginInfo>>> {
    let connectors_only = query.bool("connectorsOnly", true)?;
    Ok(Json(state.herder.plugins(connectors_only)))
}

/// `GET /connector-plugins/{plugin}/config`: the plugin's keys as Connect's `ConfigKeyInfo`s.
pub async fn config_def(State(state): State<RestState>, PathParams(plugin): PathParams<String>) -> ApiResult<Json<Vec<ConfigKeyInfo>>> {
    let def = state.herder.plugin_config(&plugin)?;
    Ok(Json(def.keys().iter().map(ConfigKeyInfo::from).collect()))
}

/// `PUT /connector-plugins/{plugin}/config/validate` with a config map: Connect's
/// `ConfigInfos`. A `connector.class` in the body must name the plugin in the path (Connect's
/// check, which also accepts the simple name with or without the `Connector` suffix); when
/// absent, the plugin in the path is used, where Connect would fail with "contains no
/// connector type".
pub async fn validate(
    State(state): State<RestState>,
    PathParams(plugin): PathParams<String>,
    JsonBody(body): JsonBody,
) -> ApiResult<Json<ConfigInfosJson>> {
    let mut config = request::string_map(body, "Connector configuration")?;
    match config.get(CONNECTOR_CLASS_CONFIG) {
        Some(included) if !plugin_matches(included, &plugin) => {
            return Err(ApiError::bad_request(format!("Included connector type {included} does not match request type {plugin}")));
        }
        Some(_) => {}
        None => {
            config.insert(CONNECTOR_CLASS_CONFIG.to_owned(), plugin);
        }
    }
    let infos = state.herder.validate(&config).await?;
    Ok(Json(ConfigInfosJson::from(&infos)))
}

/// Connect's comparison: with a trailing `Connector` dropped from both names, the included
/// class must end with the requested name (so `FileStreamSource` matches
/// `org.apache.kafka.connect.file.FileStreamSourceConnector`).
fn plugin_matches(included: &str, requested: &str) -> bool {
    fn normalized(name: &str) -> &str {
        match name.strip_suffix("Connector") {
            Some(stem) if !stem.is_empty() => stem,
            _ => name,
        }
    }
    normalized(included).ends_with(normalized(requested))
}

/// Connect's `ConfigKeyInfo`, field names and order as Connect 4.3's JSON has them (the group
/// position is `order_in_group`, after `group`; Connect 3.x wrote `order`, last).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ConfigKeyInfo {
    pub name: String,
    #[serde(rename = "type")]
    pub ty: &'static str,
    pub required: bool,
    pub default_value: Option<String>,
    pub importance: &'static str,
    pub documentation: String,
    pub group: Option<String>,
    pub order_in_group: i32,
    pub width: &'static str,
    pub display_name: String,
    pub dependents: Vec<String>,
}

impl From<&ConfigKey> for ConfigKeyInfo {
    fn from(k: &ConfigKey) -> Self {
        // A password's default is shown as Connect's `Password.toString()` shows it.
        let default_value =
            k.default.as_ref().map(|d| if k.ty == ConfigType::Password { sluice_api::secret::REDACTED.to_owned() } else { d.clone() });
        Self {
            name: k.name.clone(),
            ty: k.ty.name(),
            required: k.required(),
            default_value,
            importance: k.importance.name(),
            documentation: k.doc.clone(),
            group: k.group.clone(),
            order_in_group: k.order_in_group,
            // Our definitions carry no display width; Connect's default is NONE.
            width: "NONE",
            display_name: k.display_name.clone(),
            dependents: k.dependents.clone(),
        }
    }
}

/// Connect's `ConfigValueInfo`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ConfigValueInfo {
    pub name: String,
    pub value: Option<String>,
    pub recommended_values: Vec<String>,
    pub errors: Vec<String>,
    pub visible: bool,
}

impl From<&ConfigValue> for ConfigValueInfo {
    fn from(v: &ConfigValue) -> Self {
        Self {
            name: v.name.clone(),
            value: v.value.clone(),
            recommended_values: v.recommended_values.clone(),
            errors: v.errors.clone(),
            visible: v.visible,
        }
    }
}

/// Connect's `ConfigInfo`: `definition` is null for a key the plugin does not define.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ConfigInfoJson {
    pub definition: Option<ConfigKeyInfo>,
    pub value: ConfigValueInfo,
}

/// Connect's `ConfigInfos`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ConfigInfosJson {
    pub name: String,
    pub error_count: usize,
    pub groups: Vec<String>,
    pub configs: Vec<ConfigInfoJson>,
}

impl From<&ConfigInfos> for ConfigInfosJson {
    fn from(c: &ConfigInfos) -> Self {
        Self {
            name: c.name.clone(),
            error_count: c.error_count(),
            groups: c.groups.clone(),
            configs: c
                .configs
                .iter()
                .map(|(key, value)| ConfigInfoJson { definition: key.as_ref().map(ConfigKeyInfo::from), value: value.into() })
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plugin_names_match_as_connect_matches_them() {
        let class = "org.apache.kafka.connect.file.FileStreamSourceConnector";
        assert!(plugin_matches(class, class));
        assert!(plugin_matches(class, "FileStreamSourceConnector"));
        assert!(plugin_matches(class, "FileStreamSource"));
        assert!(!plugin_matches(class, "FileStreamSink"));
        assert!(!plugin_matches("FileStreamSource", class));
    }
}
