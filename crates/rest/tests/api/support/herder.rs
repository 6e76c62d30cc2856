//! An in-memory [`Herder`] for testing the HTTP mapping only: it keeps configs, target states,
//! offsets and topics in a map and records the calls REST makes. It implements none of the
//! real lifecycle; the conformance suite runs against the real binary.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use async_trait::async_trait;
use serde_json::json;
use sluice_api::{ConfigDef, ConfigKey, ConfigType, ConfigValue, ConnectorKind, Importance, Props, Validator};
use sluice_runtime::herder::{
    ConfigInfos, ConnectorInfo, ConnectorOffset, ConnectorStateInfo, ConnectorTaskId, Herder, HerderError, HerderResult, PluginInfo,
    RestartRequest, State, StateInfo, TargetState, TaskInfo, TaskStateInfo,
};

pub const WORKER_ID: &str = "127.0.0.1:8083";
pub const PLUGIN_VERSION: &str = "0.1.0";
pub const SOURCE_CLASS: &str = "org.apache.kafka.connect.file.FileStreamSourceConnector";
pub const SINK_CLASS: &str = "org.apache.kafka.connect.file.FileStreamSinkConnector";

#[derive(Debug, Clone)]
struct Connector {
    config: Props,
    target: TargetState,
    offsets: Vec<ConnectorOffset>,
    topics: Vec<String>,
}

/// A call REST made that leaves no trace in a response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Call {
    Put { name: String, allow_replace: bool, initial_state: Option<TargetState> },
    Restart { name: String, req: RestartRequest },
    RestartTask(ConnectorTaskId),
    Target { name: String, state: TargetState },
    ResetTopics(String),
    Validate(Props),
}

pub struct MemoryHerder {
    ready: AtomicBool,
    /// Set: the herder does not answer `GET /health`'s probe.
    stuck: AtomicBool,
    connectors: Mutex<BTreeMap<String, Connector>>,
    calls: Mutex<Vec<Call>>,
}

impl MemoryHerder {
    pub fn new() -> Self {
        Self { ready: AtomicBool::new(true), stuck: AtomicBool::new(false), connectors: Mutex::new(BTreeMap::new()), calls: Mutex::new(Vec::new()) }
    }

    pub fn set_ready(&self, ready: bool) {
        self.ready.store(ready, Ordering::SeqCst);
    }

    pub fn set_stuck(&self, stuck: bool) {
        self.stuck.store(stuck, Ordering::SeqCst);
    }

    /// The calls recorded so far, draining them.
    pub fn take_calls(&self) -> Vec<Call> {
        std::mem::take(&mut *self.calls.lock().unwrap())
    }

    fn record(&self, call: Call) {
        self.calls.lock().unwrap().push(call);
    }

    fn with<T>(&self, name: &str, f: impl FnOnce(&mut Connector) -> HerderResult<T>) -> HerderResult<T> {
        let mut connectors = self.connectors.lock().unwrap();
        let c = connectors.get_mut(name).ok_or_else(|| HerderError::connector_not_found(name))?;
        f(c)
    }

    fn info(name: &str, c: &Connector) -> ConnectorInfo {
        let tasks = if c.target == TargetState::Stopped { vec![] } else { vec![ConnectorTaskId { connector: name.to_owned(), task: 0 }] };
        ConnectorInfo { name: name.to_owned(), config: c.config.clone(), tasks, kind: kind(&c.config) }
    }

    fn status(&self, name: &str, c: &Connector, restarting: bool) -> ConnectorStateInfo {
        let state = match c.target {
            _ if restarting => State::Restarting,
            TargetState::Started => State::Running,
            TargetState::Paused => State::Paused,
            TargetState::Stopped => State::Stopped,
        };
        let failed = c.config.get("fail").is_some_and(|v| v == "true");
        let connector = if failed {
            StateInfo { state: State::Failed, worker_id: WORKER_ID.into(), version: Some(PLUGIN_VERSION.into()), trace: Some("java.lang.Oops: it broke\n\tat here".into()) }
        } else {
            StateInfo { state, worker_id: WORKER_ID.into(), version: Some(PLUGIN_VERSION.into()), trace: None }
        };
        let tasks = Self::info(name, c)
            .tasks
            .iter()
            .map(|t| TaskStateInfo { id: t.task, state: StateInfo { state, worker_id: WORKER_ID.into(), version: Some(PLUGIN_VERSION.into()), trace: Some(String::new()) } })
            .collect();
        ConnectorStateInfo { name: name.to_owned(), connector, tasks, kind: kind(&c.config) }
    }
}

fn kind(config: &Props) -> ConnectorKind {
    match config.get("connector.class") {
        Some(c) if c.contains("Sink") => ConnectorKind::Sink,
        _ => ConnectorKind::Source,
    }
}

/// The definition the fake answers for the file source plugin (and its aliases).
pub fn source_def() -> ConfigDef {
    ConfigDef::new()
        .define(ConfigKey::new("connector.class", ConfigType::String, Importance::High, "Name of the connector class.").group(
            "Common",
            2,
            "Connector class",
        ))
        .define(ConfigKey::new("file", ConfigType::String, Importance::High, "Source filename."))
        .define(
            ConfigKey::new("batch.size", ConfigType::Int, Importance::Low, "Records per poll.")
                .default_value("2000")
                .validator(Validator::AtLeast(1)),
        )
        .define(
            ConfigKey::new("mode", ConfigType::String, Importance::Medium, "How to read.")
                .default_value("tail")
                .validator(Validator::one_of(&["tail", "once"])),
        )
        .define(ConfigKey::new("password", ConfigType::Password, Importance::Medium, "A secret.").default_value("changeme"))
}

fn is_source_plugin(class: &str) -> bool {
    [SOURCE_CLASS, "FileStreamSourceConnector", "FileStreamSource"].contains(&class)
}

#[async_trait]
impl Herder for MemoryHerder {
    fn worker_id(&self) -> String {
        WORKER_ID.into()
    }

    fn is_ready(&self) -> bool {
        self.ready.load(Ordering::SeqCst)
    }

    async fn responsive(&self, _within: std::time::Duration) -> bool {
        !self.stuck.load(Ordering::SeqCst)
    }

    async fn connectors(&self) -> Vec<String> {
        self.connectors.lock().unwrap().keys().cloned().collect()
    }

    async fn connector_info(&self, name: &str) -> HerderResult<ConnectorInfo> {
        self.with(name, |c| Ok(Self::info(name, c)))
    }

    async fn connector_config(&self, name: &str) -> HerderResult<Props> {
        self.with(name, |c| Ok(c.config.clone()))
    }

    async fn put_connector_config(
        &self,
        name: &str,
        config: Props,
        allow_replace: bool,
        initial_state: Option<TargetState>,
    ) -> HerderResult<(bool, ConnectorInfo)> {
        self.record(Call::Put { name: name.into(), allow_replace, initial_state });
        if !config.contains_key("connector.class") {
            return Err(HerderError::BadRequest(format!("Connector config {config:?} contains no connector type")));
        }
        let mut connectors = self.connectors.lock().unwrap();
        match connectors.get_mut(name) {
            Some(_) if !allow_replace => Err(HerderError::Conflict(format!("Connector {name} already exists"))),
            Some(c) => {
                c.config = config;
                Ok((false, Self::info(name, c)))
            }
            None => {
                let c = Connector {
                    config,
                    target: initial_state.unwrap_or(TargetState::Started),
                    offsets: vec![ConnectorOffset {
                        partition: json!({"filename": "/tmp/in.txt"}).as_object().unwrap().clone(),
                        offset: Some(json!({"position": 42}).as_object().unwrap().clone()),
                    }],
                    topics: vec!["lines".into()],
                };
                let info = Self::info(name, &c);
                connectors.insert(name.to_owned(), c);
                Ok((true, info))
            }
        }
    }

    async fn patch_connector_config(&self, name: &str, patch: BTreeMap<String, Option<String>>) -> HerderResult<ConnectorInfo> {
        self.with(name, |c| {
            for (k, v) in patch {
                match v {
                    Some(v) => c.config.insert(k, v),
                    None => c.config.remove(&k),
                };
            }
            Ok(Self::info(name, c))
        })
    }

    async fn delete_connector(&self, name: &str) -> HerderResult<()> {
        self.connectors.lock().unwrap().remove(name).map(|_| ()).ok_or_else(|| HerderError::connector_not_found(name))
    }

    async fn connector_status(&self, name: &str) -> HerderResult<ConnectorStateInfo> {
        self.with(name, |c| Ok(self.status(name, c, false)))
    }

    async fn task_status(&self, id: &ConnectorTaskId) -> HerderResult<TaskStateInfo> {
        let status = self.connector_status(&id.connector).await?;
        status
            .tasks
            .into_iter()
            .find(|t| t.id == id.task)
            .ok_or_else(|| HerderError::NotFound(format!("No status found for task {}-{}", id.connector, id.task)))
    }

    async fn task_configs(&self, name: &str) -> HerderResult<Vec<TaskInfo>> {
        self.with(name, |c| {
            let info = Self::info(name, c);
            let mut config = c.config.clone();
            config.insert("task.class".into(), "org.apache.kafka.connect.file.FileStreamSourceTask".into());
            Ok(info.tasks.into_iter().map(|id| TaskInfo { id, config: config.clone() }).collect())
        })
    }

    async fn restart_connector(&self, name: &str, req: RestartRequest) -> HerderResult<Option<ConnectorStateInfo>> {
        self.record(Call::Restart { name: name.into(), req });
        self.with(name, |c| Ok((req.include_tasks || req.only_failed).then(|| self.status(name, c, true))))
    }

    async fn restart_task(&self, id: &ConnectorTaskId) -> HerderResult<()> {
        self.task_status(id).await?;
        self.record(Call::RestartTask(id.clone()));
        Ok(())
    }

    async fn set_target_state(&self, name: &str, state: TargetState) -> HerderResult<()> {
        self.with(name, |c| {
            c.target = state;
            Ok(())
        })?;
        self.record(Call::Target { name: name.into(), state });
        Ok(())
    }

    async fn connector_topics(&self, name: &str) -> HerderResult<Vec<String>> {
        self.with(name, |c| Ok(c.topics.clone()))
    }

    async fn reset_connector_topics(&self, name: &str) -> HerderResult<()> {
        self.with(name, |c| {
            c.topics.clear();
            Ok(())
        })?;
        self.record(Call::ResetTopics(name.into()));
        Ok(())
    }

    async fn connector_offsets(&self, name: &str) -> HerderResult<Vec<ConnectorOffset>> {
        self.with(name, |c| Ok(c.offsets.clone()))
    }

    async fn alter_connector_offsets(&self, name: &str, offsets: Vec<ConnectorOffset>) -> HerderResult<String> {
        self.with(name, |c| {
            if c.target != TargetState::Stopped {
                return Err(HerderError::BadRequest(format!(
                    "Connectors must be in the STOPPED state before their offsets can be modified. This can be done for the specified \
                     connector by issuing a 'PUT' request to the '/connectors/{name}/stop' endpoint"
                )));
            }
            c.offsets = offsets;
            Ok("The offsets for this connector have been altered successfully".into())
        })
    }

    async fn reset_connector_offsets(&self, name: &str) -> HerderResult<String> {
        self.with(name, |c| {
            c.offsets.clear();
            Ok("The offsets for this connector have been reset successfully".into())
        })
    }

    fn plugins(&self, connectors_only: bool) -> Vec<PluginInfo> {
        let plugin = |class: &str, kind: &str| PluginInfo { class: class.into(), kind: kind.into(), version: "0.1.0".into() };
        let mut out = vec![plugin(SINK_CLASS, "sink"), plugin(SOURCE_CLASS, "source")];
        if !connectors_only {
            out.push(plugin("org.apache.kafka.connect.transforms.InsertField$Value", "transformation"));
        }
        out
    }

    fn plugin_config(&self, class: &str) -> HerderResult<ConfigDef> {
        if is_source_plugin(class) {
            Ok(source_def())
        } else {
            Err(HerderError::NotFound(format!("Unknown plugin {class}.")))
        }
    }

    async fn validate(&self, props: &Props) -> HerderResult<ConfigInfos> {
        self.record(Call::Validate(props.clone()));
        let class = props.get("connector.class").cloned().unwrap_or_default();
        let def = self.plugin_config(&class).map_err(|e| HerderError::BadRequest(e.to_string()))?;
        let mut configs: Vec<(Option<ConfigKey>, ConfigValue)> =
            def.keys().iter().cloned().zip(def.validate(props)).map(|(k, v)| (Some(k), v)).collect();
        for (k, v) in props.iter().filter(|(k, _)| def.key(k).is_none()) {
            let value = ConfigValue { name: k.clone(), value: Some(v.clone()), recommended_values: vec![], errors: vec![], visible: true };
            configs.push((None, value));
        }
        Ok(ConfigInfos { name: SOURCE_CLASS.into(), groups: vec!["Common".into()], configs })
    }
}
