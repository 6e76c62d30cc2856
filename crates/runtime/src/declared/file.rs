//! Reading one declaration file: what `connect-standalone` takes on its command line (a
//! `.properties` file, or JSON as `{"name", "config"}` or a flat map) and what Strimzi's
//! `KafkaConnector` resource says in YAML.
//!
//! | file | name | config | state |
//! | --- | --- | --- | --- |
//! | `*.json` `{name, config, initial_state}` | `name` (or `config.name`) | `config` | `initial_state` / `state` |
//! | `*.json` flat map | `name` | the map | none |
//! | `*.properties` | `name` | every key | none |
//! | `*.yaml` / `*.yml` `KafkaConnector` | `metadata.name` | `spec.config` + `spec.class` → `connector.class`, `spec.tasksMax` → `tasks.max` | `spec.state` (or the older `spec.pause`) |
//!
//! Strimzi's `spec.autoRestart` becomes sluice's own restart keys: `enabled: true` is
//! `sluice.restart.policy=on-failure` (`false`: `never`) and `maxRestarts` is
//! `sluice.restart.max.retries`. Values may be strings, numbers or booleans, read as their text.

use std::path::Path;

use sluice_api::Props;

use crate::herder::TargetState;

/// One connector as a file declares it.
#[derive(Debug, Clone, PartialEq)]
pub struct Declaration {
    pub name: String,
    /// With `name` set to the connector's name, as Connect stores it.
    pub config: Props,
    /// `None`: the file says nothing, and the connector's state is not managed.
    pub state: Option<TargetState>,
}

/// The file kinds a directory is read for; other files are ignored.
pub fn is_declaration_file(path: &Path) -> bool {
    let hidden = path.file_name().and_then(|n| n.to_str()).is_none_or(|n| n.starts_with('.'));
    !hidden && matches!(path.extension().and_then(|e| e.to_str()), Some("json" | "properties" | "yaml" | "yml"))
}

/// Reads a file. Errors name the file and the offending field.
pub fn read_file(path: &Path) -> Result<Declaration, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: cannot read: {e}", path.display()))?;
    let file = path.file_name().and_then(|n| n.to_str()).unwrap_or("?");
    parse(file, &text)
}

/// Parses a file's text; the kind comes from the file name's extension.
pub fn parse(file: &str, text: &str) -> Result<Declaration, String> {
    let ext = Path::new(file).extension().and_then(|e| e.to_str()).unwrap_or("");
    let declaration = match ext {
        "yaml" | "yml" => parse_strimzi(text),
        "properties" => parse_properties_file(text),
        _ if ext == "json" || text.trim_start().starts_with('{') => parse_json(text),
        _ => parse_properties_file(text),
    }
    .map_err(|e| format!("{file}: {e}"))?;
    if declaration.name.is_empty() || declaration.name.chars().any(char::is_control) {
        return Err(format!("{file}: the connector name must be non-empty and free of control characters"));
    }
    Ok(declaration)
}

fn parse_properties_file(text: &str) -> Result<Declaration, String> {
    let config = crate::worker::config::parse_properties(text);
    let name = config.get("name").cloned().ok_or("the connector has no name (give the key `name`)")?;
    Ok(Declaration { name: name.trim().to_owned(), config, state: None })
}

fn parse_json(text: &str) -> Result<Declaration, String> {
    let json: serde_json::Value = serde_json::from_str(text).map_err(|e| format!("not valid JSON: {e}"))?;
    let object = json.as_object().ok_or("the file must hold a JSON object")?;
    let (config_value, name, state) = match object.get("config") {
        Some(config) => {
            for key in object.keys() {
                if !matches!(key.as_str(), "name" | "config" | "initial_state" | "state") {
                    return Err(format!("unknown field \"{key}\": expected \"name\", \"config\" and \"initial_state\""));
                }
            }
            let name = match object.get("name") {
                None | Some(serde_json::Value::Null) => None,
                Some(serde_json::Value::String(s)) => Some(s.trim().to_owned()),
                Some(_) => return Err("\"name\" must be a string".to_owned()),
            };
            let state = match object.get("initial_state").or_else(|| object.get("state")) {
                None | Some(serde_json::Value::Null) => None,
                Some(serde_json::Value::String(s)) => Some(parse_state(s)?),
                Some(_) => return Err("\"initial_state\" must be a string".to_owned()),
            };
            (config, name, state)
        }
        None => (&json, None, None),
    };
    let map = config_value.as_object().ok_or("\"config\" must be a JSON object")?;
    let mut config = Props::new();
    for (k, v) in map {
        config.insert(k.clone(), scalar_json(k, v)?);
    }
    finish(name, config, state)
}

fn scalar_json(key: &str, v: &serde_json::Value) -> Result<String, String> {
    match v {
        serde_json::Value::String(s) => Ok(s.clone()),
        serde_json::Value::Number(_) | serde_json::Value::Bool(_) => Ok(v.to_string()),
        _ => Err(format!("the value of {key} must be a string, number or boolean")),
    }
}

/// `name` from the wrapper or the config; when both are given they must agree (Connect's
/// rule for a `name` inside the config).
fn finish(name: Option<String>, mut config: Props, state: Option<TargetState>) -> Result<Declaration, String> {
    let in_config = config.get("name").map(|n| n.trim().to_owned());
    let name = match (name, in_config) {
        (Some(a), Some(b)) if a != b => {
            return Err(format!("the connector is named \"{a}\" but its config says name=\"{b}\""));
        }
        (Some(a), _) => a,
        (None, Some(b)) => b,
        (None, None) => return Err("the connector has no name (give \"name\")".to_owned()),
    };
    config.insert("name".to_owned(), name.clone());
    Ok(Declaration { name, config, state })
}

/// `RUNNING`/`PAUSED`/`STOPPED` (Connect's `initial_state`) or Strimzi's lower-case
/// `running`/`paused`/`stopped`.
fn parse_state(s: &str) -> Result<TargetState, String> {
    match s.to_ascii_uppercase().as_str() {
        "RUNNING" | "STARTED" => Ok(TargetState::Started),
        "PAUSED" => Ok(TargetState::Paused),
        "STOPPED" => Ok(TargetState::Stopped),
        _ => Err(format!("invalid state '{s}': expected running, paused or stopped")),
    }
}

/// Strimzi's `KafkaConnector` (`kafka.strimzi.io/v1beta2` or `v1`).
fn parse_strimzi(text: &str) -> Result<Declaration, String> {
    let mut docs = Vec::new();
    for doc in serde_yaml::Deserializer::from_str(text) {
        let value = serde_yaml::Value::deserialize_any_doc(doc)?;
        if !value.is_null() {
            docs.push(value);
        }
    }
    let doc = match docs.len() {
        1 => docs.remove(0),
        0 => return Err("the file holds no YAML document".to_owned()),
        n => return Err(format!("the file holds {n} YAML documents: give one KafkaConnector per file")),
    };
    let kind = doc.get("kind").and_then(|k| k.as_str()).unwrap_or("");
    if kind != "KafkaConnector" {
        return Err(format!("kind is \"{kind}\": expected a Strimzi KafkaConnector"));
    }
    let name = doc.get("metadata").and_then(|m| m.get("name")).and_then(|n| n.as_str()).ok_or("metadata.name is missing")?;
    let spec = doc.get("spec").and_then(|s| s.as_mapping()).ok_or("spec is missing")?;
    let mut config = Props::new();
    let mut state = None;
    let mut pause = None;
    for (key, value) in spec {
        let key = key.as_str().ok_or("spec has a key that is not a string")?;
        match key {
            "class" => {
                config.insert("connector.class".to_owned(), scalar_yaml("spec.class", value)?);
            }
            "tasksMax" => {
                config.insert("tasks.max".to_owned(), scalar_yaml("spec.tasksMax", value)?);
            }
            "config" => {
                let map = value.as_mapping().ok_or("spec.config must be a map")?;
                for (k, v) in map {
                    let k = scalar_yaml("a spec.config key", k)?;
                    let v = scalar_yaml(&format!("spec.config.{k}"), v)?;
                    config.insert(k, v);
                }
            }
            "state" => state = Some(parse_state(&scalar_yaml("spec.state", value)?)?),
            "pause" => pause = Some(value.as_bool().ok_or("spec.pause must be true or false")?),
            "autoRestart" => {
                let map = value.as_mapping().ok_or("spec.autoRestart must be a map")?;
                for (k, v) in map {
                    match k.as_str() {
                        Some("enabled") => {
                            let on = v.as_bool().ok_or("spec.autoRestart.enabled must be true or false")?;
                            config
                                .insert(crate::worker::restart::POLICY_KEY.to_owned(), if on { "on-failure" } else { "never" }.to_owned());
                        }
                        Some("maxRestarts") => {
                            let n = v.as_u64().ok_or("spec.autoRestart.maxRestarts must be a whole number")?;
                            config.insert(crate::worker::restart::MAX_RETRIES_KEY.to_owned(), n.to_string());
                        }
                        other => return Err(format!("unknown field spec.autoRestart.{}", other.unwrap_or("?"))),
                    }
                }
            }
            // The plugin version (KIP-891): one version of each plugin is compiled in.
            "version" => {}
            other => {
                return Err(format!(
                    "unknown field spec.{other}: sluice reads class, tasksMax, config, state, pause, autoRestart and version"
                ))
            }
        }
    }
    // `state` wins over the deprecated `pause`, as in Strimzi.
    let state = state.or(pause.map(|p| if p { TargetState::Paused } else { TargetState::Started }));
    finish(Some(name.trim().to_owned()), config, state)
}

fn scalar_yaml(what: &str, v: &serde_yaml::Value) -> Result<String, String> {
    match v {
        serde_yaml::Value::String(s) => Ok(s.clone()),
        serde_yaml::Value::Number(n) => Ok(n.to_string()),
        serde_yaml::Value::Bool(b) => Ok(b.to_string()),
        _ => Err(format!("{what} must be a string, number or boolean")),
    }
}

/// One YAML document as a value, with the parse error as text.
trait DocValue: Sized {
    fn deserialize_any_doc(doc: serde_yaml::Deserializer<'_>) -> Result<Self, String>;
}

impl DocValue for serde_yaml::Value {
    fn deserialize_any_doc(doc: serde_yaml::Deserializer<'_>) -> Result<Self, String> {
        use serde::Deserialize as _;
        serde_yaml::Value::deserialize(doc).map_err(|e| format!("not valid YAML: {e}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_wrapped_flat_and_properties() {
        let d = parse("a.json", r#"{"name":"a","config":{"connector.class":"x","tasks.max":2,"flag":true},"initial_state":"STOPPED"}"#)
            .unwrap();
        assert_eq!(d.name, "a");
        assert_eq!(d.config["tasks.max"], "2");
        assert_eq!(d.config["flag"], "true");
        assert_eq!(d.config["name"], "a");
        assert_eq!(d.state, Some(TargetState::Stopped));

        let d = parse("b.json", r#"{"name":"b","connector.class":"x"}"#).unwrap();
        assert_eq!((d.name.as_str(), d.state), ("b", None));

        let d = parse("c.properties", "name=c\nconnector.class=x\n# comment\ntasks.max=1\n").unwrap();
        assert_eq!(d.name, "c");
        assert_eq!(d.config["tasks.max"], "1");
    }

    #[test]
    fn json_errors_name_the_field() {
        assert!(parse("a.json", "{").unwrap_err().starts_with("a.json: not valid JSON"));
        assert!(parse("a.json", r#"{"config":{"x":"1"}}"#).unwrap_err().contains("no name"));
        assert!(parse("a.json", r#"{"name":"a","config":{"x":[1]}}"#).unwrap_err().contains("the value of x"));
        assert!(parse("a.json", r#"{"name":"a","config":{},"extra":1}"#).unwrap_err().contains("\"extra\""));
        assert!(parse("a.json", r#"{"name":"a","config":{"name":"b"}}"#).unwrap_err().contains("name=\"b\""));
        assert!(parse("a.json", r#"{"name":"a","config":{},"initial_state":"GONE"}"#).unwrap_err().contains("invalid state 'GONE'"));
    }

    #[test]
    fn strimzi_kafka_connector() {
        let yaml = r#"
apiVersion: kafka.strimzi.io/v1beta2
kind: KafkaConnector
metadata:
  name: orders-sink
  labels:
    strimzi.io/cluster: my-connect
spec:
  class: io.confluent.connect.s3.S3SinkConnector
  tasksMax: 3
  state: paused
  autoRestart:
    enabled: true
    maxRestarts: 10
  config:
    topics: orders
    flush.size: 1000
    behavior.on.null.values: ignore
"#;
        let d = parse("orders.yaml", yaml).unwrap();
        assert_eq!(d.name, "orders-sink");
        assert_eq!(d.state, Some(TargetState::Paused));
        assert_eq!(d.config["connector.class"], "io.confluent.connect.s3.S3SinkConnector");
        assert_eq!(d.config["tasks.max"], "3");
        assert_eq!(d.config["flush.size"], "1000");
        assert_eq!(d.config["sluice.restart.policy"], "on-failure");
        assert_eq!(d.config["sluice.restart.max.retries"], "10");
        assert_eq!(d.config["name"], "orders-sink");
    }

    #[test]
    fn strimzi_pause_and_errors() {
        let base = "kind: KafkaConnector\nmetadata:\n  name: p\nspec:\n  class: x\n";
        assert_eq!(parse("p.yaml", &format!("{base}  pause: true\n")).unwrap().state, Some(TargetState::Paused));
        assert_eq!(parse("p.yaml", &format!("{base}  pause: true\n  state: running\n")).unwrap().state, Some(TargetState::Started));
        assert!(parse("p.yaml", &format!("{base}  replicas: 2\n")).unwrap_err().contains("unknown field spec.replicas"));
        assert!(parse("p.yaml", "kind: KafkaConnect\nmetadata:\n  name: p\n").unwrap_err().contains("expected a Strimzi KafkaConnector"));
        assert!(parse("p.yaml", &format!("{base}---\n{base}")).unwrap_err().contains("2 YAML documents"));
        assert!(parse("p.yaml", "kind: [").unwrap_err().contains("not valid YAML"));
        assert!(parse("p.yaml", &format!("{base}  config:\n    a: [1]\n")).unwrap_err().contains("spec.config.a"));
    }

    #[test]
    fn only_declaration_files_are_read() {
        assert!(is_declaration_file(Path::new("/d/a.json")));
        assert!(is_declaration_file(Path::new("/d/a.yml")));
        assert!(!is_declaration_file(Path::new("/d/.a.json.swp")));
        assert!(!is_declaration_file(Path::new("/d/.hidden.json")));
        assert!(!is_declaration_file(Path::new("/d/README.md")));
    }
}
