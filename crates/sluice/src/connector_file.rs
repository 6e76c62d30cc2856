//! Connector definitions given on the command line, as `connect-standalone` reads them:
//! a `.properties` file, or JSON either as `{"name": …, "config": {…}}` or as a flat map.

use std::path::Path;

use anyhow::{anyhow, bail, Context as _};
use sluice_api::Props;
use sluice_runtime::worker::config::parse_properties;

pub fn load(path: &Path) -> anyhow::Result<(String, Props)> {
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read connector file {}", path.display()))?;
    let props = if path.extension().is_some_and(|e| e == "json") || text.trim_start().starts_with('{') {
        let json: serde_json::Value = serde_json::from_str(&text).with_context(|| format!("{} is not valid JSON", path.display()))?;
        let (name, config) = match (json.get("config"), json.get("name")) {
            (Some(config), name) => (name.and_then(|n| n.as_str()).map(str::to_owned), config.clone()),
            (None, _) => (None, json.clone()),
        };
        let map = config.as_object().ok_or_else(|| anyhow!("{}: the connector config must be a JSON object", path.display()))?;
        let mut props = Props::new();
        for (k, v) in map {
            let s = match v {
                serde_json::Value::String(s) => s.clone(),
                serde_json::Value::Number(_) | serde_json::Value::Bool(_) => v.to_string(),
                _ => bail!("{}: the value of {k} must be a string", path.display()),
            };
            props.insert(k.clone(), s);
        }
        if let Some(n) = name {
            props.entry("name".to_owned()).or_insert(n);
        }
        props
    } else {
        parse_properties(&text)
    };
    let name = props.get("name").cloned().ok_or_else(|| anyhow!("{}: the connector has no name", path.display()))?;
    Ok((name, props))
}
