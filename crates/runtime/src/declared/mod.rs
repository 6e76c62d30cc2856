//! Connectors declared in a directory (`connectors.dir`): GitOps without Kubernetes.
//!
//! Each `*.json`, `*.properties` or `*.yaml` file in the directory declares one connector
//! ([`file`]). A pass reads them all, compares them with the connectors the worker has
//! ([`plan`]) and makes the difference ([`apply`]): create in the declared state, update only
//! what really differs (a no-op restarts nothing), delete only what the directory created.
//! [`reconcile::Directory`] runs passes at start, on a file change and every
//! `connectors.dir.interval.ms`; in a group only the leader applies.
//!
//! Ownership lives in the connector's own config, so it is stored in the config topic beside
//! the connector and every worker of a group sees it: [`FILE_KEY`] names the declaring file
//! and [`DIGEST_KEY`] fingerprints what it declared. A connector without them was made
//! through REST and is never touched; a file that declares its name is a `conflict`.
//!
//! A REST write to a connector the directory owns follows `connectors.dir.drift`:
//! - `reject` (default): 409 naming the file;
//! - `revert`: accepted, and the next pass (started at once) puts the file's version back;
//! - `allow`: accepted and kept until the file itself changes.
//!
//! A file that cannot be read, parsed or validated is reported (`invalid`, with its errors)
//! and changes nothing: the running version of its connector stays, and is not deleted.

pub mod file;
pub mod reconcile;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;
use sluice_api::{ConnectError, ConnectResult, Props};

use crate::herder::{Herder, HerderError, State, TargetState};
pub use file::Declaration;

/// Worker key: the directory to reconcile.
pub const DIR_KEY: &str = "connectors.dir";
/// Worker key: what a REST write to a declared connector does (`reject`, `revert`, `allow`).
pub const DRIFT_KEY: &str = "connectors.dir.drift";
/// Worker key: the period of the full pass (default 60 s); changes are seen within ~2 s.
pub const INTERVAL_KEY: &str = "connectors.dir.interval.ms";
/// Prefix of the ownership keys in a declared connector's config.
pub const OWNER_PREFIX: &str = "sluice.connectors.dir.";
/// Connector key: the file that declares the connector.
pub const FILE_KEY: &str = "sluice.connectors.dir.file";
/// Connector key: a fingerprint of the declaration last applied.
pub const DIGEST_KEY: &str = "sluice.connectors.dir.digest";

const DEFAULT_INTERVAL_MS: u64 = 60_000;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Drift {
    #[default]
    Reject,
    Revert,
    Allow,
}

impl Drift {
    pub fn name(self) -> &'static str {
        match self {
            Self::Reject => "reject",
            Self::Revert => "revert",
            Self::Allow => "allow",
        }
    }
}

/// The worker's `connectors.dir*` keys.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    pub dir: Option<PathBuf>,
    pub drift: Drift,
    pub interval: Duration,
}

impl Default for Settings {
    fn default() -> Self {
        Self { dir: None, drift: Drift::Reject, interval: Duration::from_millis(DEFAULT_INTERVAL_MS) }
    }
}

impl Settings {
    pub fn from_worker(props: &Props) -> ConnectResult<Self> {
        let dir = props.get(DIR_KEY).map(|d| d.trim()).filter(|d| !d.is_empty()).map(PathBuf::from);
        let drift = match props.get(DRIFT_KEY).map(|v| v.trim().to_ascii_lowercase()) {
            None => Drift::Reject,
            Some(v) if v == "reject" => Drift::Reject,
            Some(v) if v == "revert" => Drift::Revert,
            Some(v) if v == "allow" => Drift::Allow,
            Some(v) => {
                return Err(ConnectError::config(
                    DRIFT_KEY,
                    format!("Invalid value {v} for configuration {DRIFT_KEY}: expected reject, revert or allow"),
                ))
            }
        };
        let interval = match props.get(INTERVAL_KEY) {
            None => DEFAULT_INTERVAL_MS,
            Some(v) => match v.trim().parse::<u64>() {
                Ok(ms) if ms >= 100 => ms,
                _ => {
                    return Err(ConnectError::config(
                        INTERVAL_KEY,
                        format!(
                            "Invalid value {v} for configuration {INTERVAL_KEY}: expected a whole number of milliseconds, at least 100"
                        ),
                    ))
                }
            },
        };
        Ok(Self { dir, drift, interval: Duration::from_millis(interval) })
    }
}

/// One file of a directory: its declaration, or why it has none.
#[derive(Debug, Clone)]
pub struct Entry {
    pub file: String,
    pub declaration: Result<Declaration, String>,
}

/// Reads every declaration file of `dir`, in file-name order. An unreadable directory is an
/// error (and a pass changes nothing then); an unreadable file is an invalid entry.
pub fn read_dir(dir: &Path) -> Result<Vec<Entry>, String> {
    let listing = std::fs::read_dir(dir).map_err(|e| format!("cannot read {DIR_KEY} {}: {e}", dir.display()))?;
    let mut paths: Vec<PathBuf> =
        listing.filter_map(|e| e.ok()).map(|e| e.path()).filter(|p| p.is_file() && file::is_declaration_file(p)).collect();
    paths.sort();
    Ok(paths
        .iter()
        .map(|p| Entry {
            file: p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default(),
            declaration: file::read_file(p),
        })
        .collect())
}

/// Entries from file texts (`POST /connectors-dir/plan`), parsed as [`read_dir`] would.
pub fn entries_from_texts(files: &BTreeMap<String, String>) -> Vec<Entry> {
    files
        .iter()
        .filter(|(name, _)| file::is_declaration_file(Path::new(name.as_str())))
        .map(|(name, text)| Entry { file: name.clone(), declaration: file::parse(name, text) })
        .collect()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    Create,
    Update,
    Delete,
    Unchanged,
    /// The file cannot be read, parsed or validated: nothing changes for it.
    Invalid,
    /// The name belongs to a connector made through REST: left alone.
    Conflict,
}

/// One line of a plan. Only key names, never values: configs carry secrets.
#[derive(Debug, Clone, Serialize)]
pub struct PlanItem {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    pub action: Action,
    /// Keys added, removed or changed.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub changed: Vec<String>,
    /// The state the pass sets (`RUNNING`, `PAUSED`, `STOPPED`), when it sets one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<&'static str>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<String>,
    /// What [`apply`] writes.
    #[serde(skip)]
    config: Option<Props>,
    #[serde(skip)]
    target: Option<TargetState>,
}

impl PlanItem {
    fn new(name: &str, file: Option<&str>, action: Action) -> Self {
        Self {
            name: name.to_owned(),
            file: file.map(str::to_owned),
            action,
            changed: Vec::new(),
            state: None,
            errors: Vec::new(),
            config: None,
            target: None,
        }
    }
}

fn state_name(s: TargetState) -> &'static str {
    match s {
        TargetState::Started => "RUNNING",
        TargetState::Paused => "PAUSED",
        TargetState::Stopped => "STOPPED",
    }
}

/// FNV-1a, 64 bits: a stable fingerprint (not a defence against anyone).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Fnv(u64);

impl Fnv {
    pub(crate) fn new() -> Self {
        Self(0xcbf2_9ce4_8422_2325)
    }

    /// Feeds `bytes` and a separator, so `("ab", "c")` and `("a", "bc")` differ.
    pub(crate) fn field(&mut self, bytes: &[u8]) -> &mut Self {
        for b in bytes.iter().chain([&0u8]) {
            self.0 ^= u64::from(*b);
            self.0 = self.0.wrapping_mul(0x0100_0000_01b3);
        }
        self
    }

    pub(crate) fn value(&self) -> u64 {
        self.0
    }
}

/// A stable fingerprint of a declaration: its config (without the ownership keys) and state.
pub fn digest(d: &Declaration) -> String {
    let mut h = Fnv::new();
    for (k, v) in d.config.iter().filter(|(k, _)| !k.starts_with(OWNER_PREFIX)) {
        h.field(k.as_bytes()).field(v.as_bytes());
    }
    h.field(d.state.map_or("", state_name).as_bytes());
    format!("{:016x}", h.value())
}

/// The keys whose values differ between two configs.
fn changed_keys(old: &Props, new: &Props) -> Vec<String> {
    let keys: BTreeSet<&String> = old.keys().chain(new.keys()).collect();
    keys.into_iter().filter(|k| k.as_str() != DIGEST_KEY && old.get(*k) != new.get(*k)).cloned().collect()
}

/// The target state a settled status shows; `None` while failed, restarting or unassigned.
fn settled_target(state: State) -> Option<TargetState> {
    match state {
        State::Running => Some(TargetState::Started),
        State::Paused => Some(TargetState::Paused),
        State::Stopped => Some(TargetState::Stopped),
        _ => None,
    }
}

/// Compares `entries` with the herder's connectors. Validates each declaration first, so an
/// invalid one is reported without touching what runs.
pub async fn plan(herder: &dyn Herder, entries: &[Entry], drift: Drift) -> Vec<PlanItem> {
    let mut items = Vec::new();
    let mut current: BTreeMap<String, Props> = BTreeMap::new();
    for name in herder.connectors().await {
        if let Ok(config) = herder.stored_connector_config(&name).await {
            current.insert(name, config);
        }
    }
    // Files that hold something other than one valid, unique declaration keep the
    // connectors they own as they are.
    let mut held_files: BTreeSet<&str> = BTreeSet::new();
    let mut declared_names: BTreeSet<&str> = BTreeSet::new();
    let mut by_name: BTreeMap<&str, Vec<&Entry>> = BTreeMap::new();
    for entry in entries {
        match &entry.declaration {
            Ok(d) => {
                by_name.entry(d.name.as_str()).or_default().push(entry);
                declared_names.insert(d.name.as_str());
            }
            Err(e) => {
                held_files.insert(&entry.file);
                let mut item = PlanItem::new(&entry.file, Some(&entry.file), Action::Invalid);
                item.errors.push(e.clone());
                items.push(item);
            }
        }
    }
    for (name, declaring) in &by_name {
        if declaring.len() > 1 {
            let files: Vec<&str> = declaring.iter().map(|e| e.file.as_str()).collect();
            for entry in declaring {
                held_files.insert(&entry.file);
                let mut item = PlanItem::new(name, Some(&entry.file), Action::Invalid);
                item.errors.push(format!("connector {name} is declared by more than one file: {}", files.join(", ")));
                items.push(item);
            }
            continue;
        }
        let entry = declaring[0];
        let Ok(d) = &entry.declaration else { continue };
        match validation_errors(herder, &d.config).await {
            Ok(errors) if errors.is_empty() => {}
            Ok(errors) => {
                held_files.insert(&entry.file);
                let mut item = PlanItem::new(name, Some(&entry.file), Action::Invalid);
                item.errors = errors;
                items.push(item);
                continue;
            }
            Err(e) => {
                held_files.insert(&entry.file);
                let mut item = PlanItem::new(name, Some(&entry.file), Action::Invalid);
                item.errors.push(e.to_string());
                items.push(item);
                continue;
            }
        }
        let digest = digest(d);
        let mut desired = d.config.clone();
        desired.insert(FILE_KEY.to_owned(), entry.file.clone());
        desired.insert(DIGEST_KEY.to_owned(), digest.clone());
        let Some(stored) = current.get(*name) else {
            let mut item = PlanItem::new(name, Some(&entry.file), Action::Create);
            item.state = d.state.map(state_name);
            item.target = d.state;
            item.config = Some(desired);
            items.push(item);
            continue;
        };
        if !stored.contains_key(FILE_KEY) {
            let mut item = PlanItem::new(name, Some(&entry.file), Action::Conflict);
            item.errors.push(format!(
                "a connector named {name} exists and was not created from the directory: it is left alone (delete it or rename the declaration)"
            ));
            items.push(item);
            continue;
        }
        let file_changed = stored.get(DIGEST_KEY) != Some(&digest);
        let changed = changed_keys(stored, &desired);
        // Under `allow`, a REST edit stands until the file changes.
        let write_config = !changed.is_empty() && (drift != Drift::Allow || file_changed || stored.get(FILE_KEY) != Some(&entry.file));
        let mut target = None;
        if let Some(want) = d.state {
            if drift != Drift::Allow || file_changed {
                if let Ok(status) = herder.connector_status(name).await {
                    if settled_target(status.connector.state).is_some_and(|now| now != want) {
                        target = Some(want);
                    }
                }
            }
        }
        let mut item =
            PlanItem::new(name, Some(&entry.file), if write_config || target.is_some() { Action::Update } else { Action::Unchanged });
        if write_config {
            item.changed = changed;
            item.config = Some(desired);
        }
        item.state = target.map(state_name);
        item.target = target;
        items.push(item);
    }
    for (name, stored) in &current {
        let Some(owner) = stored.get(FILE_KEY) else { continue };
        if declared_names.contains(name.as_str()) || held_files.contains(owner.as_str()) {
            continue;
        }
        items.push(PlanItem::new(name, Some(owner), Action::Delete));
    }
    items
}

/// The validation errors of a config as `key: message`, with Connect's validation.
async fn validation_errors(herder: &dyn Herder, config: &Props) -> Result<Vec<String>, HerderError> {
    let infos = herder.validate(config).await?;
    Ok(infos.configs.iter().flat_map(|(_, value)| value.errors.iter().map(move |e| format!("{}: {e}", value.name))).collect())
}

/// Makes what `items` plan. Each failure is written into its item's `errors`; the others
/// still apply.
pub async fn apply(herder: &dyn Herder, items: &mut [PlanItem]) {
    for item in items.iter_mut() {
        let result = match item.action {
            Action::Create => match item.config.clone() {
                Some(config) => herder.put_connector_config(&item.name, config, false, item.target).await.map(|_| ()),
                None => Ok(()),
            },
            Action::Update => {
                let mut result = Ok(());
                if let Some(config) = item.config.clone() {
                    result = herder.put_connector_config(&item.name, config, true, None).await.map(|_| ());
                }
                if let (Ok(()), Some(state)) = (&result, item.target) {
                    result = herder.set_target_state(&item.name, state).await;
                }
                result
            }
            Action::Delete => herder.delete_connector(&item.name).await,
            Action::Unchanged | Action::Invalid | Action::Conflict => Ok(()),
        };
        match result {
            Ok(()) => {
                if matches!(item.action, Action::Create | Action::Update | Action::Delete) {
                    tracing::info!(connector = %item.name, file = item.file.as_deref().unwrap_or(""), action = ?item.action, changed = ?item.changed, "connectors.dir applied");
                }
            }
            Err(e) => {
                tracing::warn!(connector = %item.name, action = ?item.action, error = %e, "connectors.dir could not apply a change; the next pass tries again");
                item.errors.push(e.to_string());
            }
        }
    }
}

/// Whether this worker may write configs now: always alone; in a group, the leader outside
/// a rebalance.
pub fn may_apply(herder: &dyn Herder) -> bool {
    herder.leader_url().is_none() && !herder.rebalancing()
}

/// The file that declares a stored connector config, if any.
pub fn owner(config: &Props) -> Option<&str> {
    config.get(FILE_KEY).map(String::as_str)
}

#[cfg(test)]
mod tests;
