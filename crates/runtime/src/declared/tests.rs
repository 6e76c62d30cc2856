//! Plans and passes against a real standalone herder on an embedded log, with an idle test
//! source that has one typed key (`rate`, an int) to fail validation with.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use sluice_api::{
    ConfigDef, ConfigKey, ConfigType, ConnectResult, Connector, ConnectorContext, ConnectorKind, ConnectorPlugin, Importance, SourceRecord,
    SourceTask, SourceTaskContext, Task,
};

use super::reconcile::Directory;
use super::*;
use crate::herder::standalone::StandaloneHerder;
use crate::log::embedded::{EmbeddedLog, EmbeddedOptions};
use crate::log::Log;
use crate::plugins::Plugins;
use crate::worker::config::WorkerConfig;

struct Idle;

#[async_trait]
impl Connector for Idle {
    fn config_def(&self) -> ConfigDef {
        ConfigDef::new()
            .define(ConfigKey::new("rate", ConfigType::Int, Importance::Low, "records per second").default_value("1"))
            .define(ConfigKey::new("secret.password", ConfigType::Password, Importance::Low, "a secret").default_value(""))
    }
    async fn start(&mut self, _props: &Props, _ctx: Arc<dyn ConnectorContext>) -> ConnectResult<()> {
        Ok(())
    }
    async fn task_configs(&mut self, _max: usize) -> ConnectResult<Vec<Props>> {
        Ok(vec![Props::new()])
    }
    async fn stop(&mut self) -> ConnectResult<()> {
        Ok(())
    }
    fn create_task(&self) -> Task {
        Task::Source(Box::new(IdleTask))
    }
}

struct IdleTask;

#[async_trait]
impl SourceTask for IdleTask {
    async fn start(&mut self, _ctx: SourceTaskContext) -> ConnectResult<()> {
        Ok(())
    }
    async fn poll(&mut self) -> ConnectResult<Vec<SourceRecord>> {
        tokio::time::sleep(Duration::from_millis(50)).await;
        Ok(Vec::new())
    }
}

const PLUGIN: ConnectorPlugin = ConnectorPlugin {
    class: "test.Idle",
    aliases: &["Idle"],
    kind: ConnectorKind::Source,
    version: "1",
    task_class: "test.IdleTask",
    create: || Box::new(Idle),
};

struct Fixture {
    herder: Arc<StandaloneHerder>,
    dir: tempfile::TempDir,
    _data: tempfile::TempDir,
}

async fn fixture() -> Fixture {
    let data = tempfile::tempdir().unwrap();
    let mut props = Props::new();
    props.insert("data.dir".into(), data.path().display().to_string());
    props.insert("restart.policy".into(), "never".into());
    let config = WorkerConfig::from_sources(props, Vec::new()).unwrap();
    let log: Arc<dyn Log> = Arc::new(EmbeddedLog::open(data.path(), EmbeddedOptions::default()).unwrap());
    let (herder, snapshot) = StandaloneHerder::open(config, log, Arc::new(Plugins::new(vec![PLUGIN]))).await.unwrap();
    herder.start(snapshot).await;
    Fixture { herder, dir: tempfile::tempdir().unwrap(), _data: data }
}

impl Fixture {
    fn write(&self, file: &str, text: &str) {
        std::fs::write(self.dir.path().join(file), text).unwrap();
    }

    fn remove(&self, file: &str) {
        std::fs::remove_file(self.dir.path().join(file)).unwrap();
    }

    async fn plan(&self, drift: Drift) -> Vec<PlanItem> {
        plan(&*self.herder, &read_dir(self.dir.path()).unwrap(), drift).await
    }

    async fn pass(&self, drift: Drift) -> Vec<PlanItem> {
        let directory = Directory::new(Settings { dir: Some(self.dir.path().into()), drift, ..Settings::default() });
        directory.pass(&*self.herder, self.dir.path()).await.items
    }

    async fn config(&self, name: &str) -> Props {
        self.herder.connector_config(name).await.unwrap()
    }

    async fn state(&self, name: &str) -> State {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        loop {
            let s = self.herder.connector_status(name).await.unwrap().connector.state;
            if !matches!(s, State::Unassigned) || tokio::time::Instant::now() > deadline {
                return s;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

fn actions(items: &[PlanItem]) -> Vec<(String, Action)> {
    items.iter().map(|i| (i.name.clone(), i.action)).collect()
}

const A: &str = r#"{"name":"a","config":{"connector.class":"Idle","rate":"5","secret.password":"hunter2"}}"#;

#[tokio::test]
async fn create_then_unchanged_then_update_names_keys_only() {
    let f = fixture().await;
    f.write("a.json", A);
    f.write("b.properties", "name=b\nconnector.class=Idle\n");
    f.write("notes.txt", "not a declaration");
    let items = f.pass(Drift::Reject).await;
    assert_eq!(actions(&items), vec![("a".into(), Action::Create), ("b".into(), Action::Create)]);
    let stored = f.config("a").await;
    assert_eq!(stored[FILE_KEY], "a.json");
    assert_eq!(stored["rate"], "5");
    assert_eq!(f.state("a").await, State::Running);

    // Nothing changed: nothing is written.
    let items = f.pass(Drift::Reject).await;
    assert_eq!(actions(&items), vec![("a".into(), Action::Unchanged), ("b".into(), Action::Unchanged)]);

    f.write("a.json", &A.replace("hunter2", "swordfish").replace("\"5\"", "\"6\""));
    let items = f.plan(Drift::Reject).await;
    assert_eq!(items[0].action, Action::Update);
    assert_eq!(items[0].changed, vec!["rate".to_owned(), "secret.password".to_owned()]);
    let shown = serde_json::to_string(&items).unwrap();
    assert!(!shown.contains("swordfish") && !shown.contains("hunter2"), "a plan never shows values: {shown}");
    f.pass(Drift::Reject).await;
    assert_eq!(f.config("a").await["rate"], "6");
}

#[tokio::test]
async fn declared_state_is_the_initial_state_and_is_kept() {
    let f = fixture().await;
    f.write("s.json", r#"{"name":"s","config":{"connector.class":"Idle"},"initial_state":"STOPPED"}"#);
    let items = f.pass(Drift::Reject).await;
    assert_eq!(items[0].state, Some("STOPPED"));
    assert_eq!(f.state("s").await, State::Stopped);
    assert!(f.herder.task_configs("s").await.unwrap().is_empty(), "a connector created stopped never ran its tasks");

    // Resumed through REST: the declared state comes back at the next pass (reject/revert).
    f.herder.set_target_state("s", TargetState::Started).await.unwrap();
    assert_eq!(f.state("s").await, State::Running);
    let items = f.pass(Drift::Revert).await;
    assert_eq!((items[0].action, items[0].state), (Action::Update, Some("STOPPED")));
    assert!(items[0].changed.is_empty(), "only the state changes");
    assert_eq!(f.state("s").await, State::Stopped);
}

#[tokio::test]
async fn delete_only_what_the_directory_made() {
    let f = fixture().await;
    f.write("a.json", A);
    f.pass(Drift::Reject).await;
    let mut rest = Props::new();
    rest.insert("connector.class".into(), "Idle".into());
    rest.insert("name".into(), "by-rest".into());
    f.herder.put_connector_config("by-rest", rest, false, None).await.unwrap();

    f.remove("a.json");
    let items = f.pass(Drift::Reject).await;
    assert_eq!(actions(&items), vec![("a".into(), Action::Delete)]);
    assert_eq!(f.herder.connectors().await, vec!["by-rest".to_owned()]);

    // A file that declares a name REST made is a conflict, and the connector is left alone.
    f.write("x.json", r#"{"name":"by-rest","config":{"connector.class":"Idle","rate":"9"}}"#);
    let items = f.pass(Drift::Reject).await;
    assert_eq!(actions(&items), vec![("by-rest".into(), Action::Conflict)]);
    assert!(!f.config("by-rest").await.contains_key("rate"));
    f.remove("x.json");
    assert!(f.pass(Drift::Reject).await.is_empty(), "a connector made by REST is never deleted");
    assert_eq!(f.herder.connectors().await, vec!["by-rest".to_owned()]);
}

#[tokio::test]
async fn a_bad_file_changes_nothing() {
    let f = fixture().await;
    f.write("a.json", A);
    f.pass(Drift::Reject).await;

    // Unparseable: reported, and the connector it declared is neither updated nor deleted.
    f.write("a.json", "{ \"name\": \"a\", ");
    let items = f.pass(Drift::Reject).await;
    assert_eq!(actions(&items), vec![("a.json".into(), Action::Invalid)]);
    assert!(items[0].errors[0].starts_with("a.json: not valid JSON"), "{:?}", items[0].errors);
    assert_eq!(f.config("a").await["rate"], "5");

    // Parseable but invalid: the validation error names the key; the old version stays.
    f.write("a.json", &A.replace("\"5\"", "\"fast\""));
    let items = f.pass(Drift::Reject).await;
    assert_eq!(actions(&items), vec![("a".into(), Action::Invalid)]);
    assert!(items[0].errors.iter().any(|e| e.starts_with("rate: ")), "{:?}", items[0].errors);
    assert_eq!(f.config("a").await["rate"], "5");
    assert_eq!(f.state("a").await, State::Running);

    // Two files with one name: both invalid, nothing changes.
    f.write("a.json", A);
    f.write("a2.json", A);
    let items = f.pass(Drift::Reject).await;
    assert_eq!(items.iter().filter(|i| i.action == Action::Invalid).count(), 2);
    assert!(f.herder.connectors().await.contains(&"a".to_owned()));
}

#[tokio::test]
async fn allow_keeps_a_rest_edit_until_the_file_changes() {
    let f = fixture().await;
    f.write("a.json", A);
    f.pass(Drift::Allow).await;
    let mut edited = f.config("a").await;
    edited.insert("rate".into(), "7".into());
    f.herder.put_connector_config("a", edited, true, None).await.unwrap();

    assert_eq!(actions(&f.pass(Drift::Allow).await), vec![("a".into(), Action::Unchanged)]);
    assert_eq!(f.config("a").await["rate"], "7");
    // Under revert the file's version comes back.
    assert_eq!(actions(&f.pass(Drift::Revert).await), vec![("a".into(), Action::Update)]);
    assert_eq!(f.config("a").await["rate"], "5");

    // Under allow a change of the file itself applies.
    let mut edited = f.config("a").await;
    edited.insert("rate".into(), "7".into());
    f.herder.put_connector_config("a", edited, true, None).await.unwrap();
    f.write("a.json", &A.replace("\"5\"", "\"8\""));
    f.pass(Drift::Allow).await;
    assert_eq!(f.config("a").await["rate"], "8");
}

#[tokio::test]
async fn strimzi_yaml_and_a_renamed_file() {
    let f = fixture().await;
    f.write(
        "k.yaml",
        "apiVersion: kafka.strimzi.io/v1beta2\nkind: KafkaConnector\nmetadata:\n  name: k\nspec:\n  class: Idle\n  tasksMax: 1\n  state: paused\n  config:\n    rate: 3\n",
    );
    f.pass(Drift::Reject).await;
    assert_eq!(f.state("k").await, State::Paused);
    assert_eq!(f.config("k").await["tasks.max"], "1");

    // The same declaration under another file name moves the ownership, deletes nothing.
    std::fs::rename(f.dir.path().join("k.yaml"), f.dir.path().join("k2.yml")).unwrap();
    let items = f.pass(Drift::Reject).await;
    assert_eq!(actions(&items), vec![("k".into(), Action::Update)]);
    assert_eq!(items[0].changed, vec![FILE_KEY.to_owned()]);
    assert_eq!(f.config("k").await[FILE_KEY], "k2.yml");
}

#[test]
fn settings_are_checked() {
    let props = |k: &str, v: &str| -> Props { [(k.to_owned(), v.to_owned())].into_iter().collect() };
    assert_eq!(Settings::from_worker(&Props::new()).unwrap(), Settings::default());
    assert_eq!(Settings::from_worker(&props(DRIFT_KEY, "Revert")).unwrap().drift, Drift::Revert);
    assert!(Settings::from_worker(&props(DRIFT_KEY, "ignore")).unwrap_err().to_string().contains(DRIFT_KEY));
    assert!(Settings::from_worker(&props(INTERVAL_KEY, "5")).unwrap_err().to_string().contains(INTERVAL_KEY));
    assert_eq!(Settings::from_worker(&props(DIR_KEY, "/etc/c")).unwrap().dir, Some(PathBuf::from("/etc/c")));
}

#[test]
fn digest_covers_config_and_state_not_ownership() {
    let d = file::parse("a.json", A).unwrap();
    let mut owned = d.clone();
    owned.config.insert(FILE_KEY.into(), "other.json".into());
    assert_eq!(digest(&d), digest(&owned));
    let mut stopped = d.clone();
    stopped.state = Some(TargetState::Stopped);
    assert_ne!(digest(&d), digest(&stopped));
    let mut changed = d.clone();
    changed.config.insert("rate".into(), "6".into());
    assert_ne!(digest(&d), digest(&changed));
}
