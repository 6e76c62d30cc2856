//! Log levels at run time: the `tracing` subscriber set-up and the handle behind
//! `GET/PUT /admin/loggers`.
//!
//! Kafka Connect names log4j loggers (`org.apache.kafka.connect.runtime`); sluice logs through
//! `tracing`, whose equivalent is the *target* (by default the module path,
//! `sluice_runtime::herder`). A logger name given here is a target prefix: dots are read as
//! `::`, so `sluice_runtime.herder` and `sluice_runtime::herder` are the same logger, and
//! `root` (any case) is the default level of everything else.
//!
//! ```text
//! PUT /admin/loggers/{name} -> LogLevels::set -> directive table -> new EnvFilter -> reload layer
//! ```
//!
//! The filter is an [`EnvFilter`] behind a [`reload`] layer. [`LogLevels`] keeps the table of
//! levels that were set (with the time of the last change, as Connect reports it) and
//! rebuilds the whole filter from that table on every change, so the filter and what
//! `GET /admin/loggers` shows cannot drift apart.
//!
//! Names are shown with dots, as Connect shows logger names (`sluice_runtime.herder`).
//!
//! Differences from log4j that a Connect user may notice:
//! - the loggers that exist are `root`, those whose level was set and sluice's own targets
//!   (any name under `sluice`); `get` answers the effective level of those (the most specific
//!   prefix that was set, else `root`) and `Logger X not found.` for any other name, as
//!   Connect does for a logger log4j never created;
//! - `list` and `set` show the loggers whose level was set, not every logger created so far;
//! - a target matches by plain string prefix, as in Connect's `startsWith`: `sluice` also
//!   covers `sluice_runtime`;
//! - `FATAL` is stored as `ERROR` (tracing has no fatal level) and `ALL` as `TRACE`;
//! - `RUST_LOG` directives that name spans or fields (`target[span]=debug`) are kept in the
//!   filter as given but are not listed, and a level set here does not override them.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::Serialize;
use tracing::level_filters::LevelFilter;
use tracing_subscriber::filter::{Directive, EnvFilter};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::reload;
use tracing_subscriber::util::SubscriberInitExt;

/// Connect's name for the root logger.
pub const ROOT_LOGGER: &str = "root";

/// The environment variable read by [`init`] for the initial levels.
pub const ENV_VAR: &str = "RUST_LOG";

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LoggingError {
    /// Not one of Connect's (log4j's) level names.
    #[error("invalid log level '{0}'.")]
    InvalidLevel(String),
    /// A name that cannot be a `tracing` target.
    #[error("invalid logger name '{0}': use letters, digits, '_', '-', '.' or '::'")]
    InvalidName(String),
    /// A name that is not root, was never set, and is none of sluice's targets.
    #[error("Logger {0} not found.")]
    UnknownLogger(String),
    /// An initial directive string that does not parse.
    #[error("invalid log directive '{0}'")]
    InvalidDirective(String),
    /// The subscriber could not be installed, or the filter could not be swapped.
    #[error("cannot apply log levels: {0}")]
    Apply(String),
}

/// One logger's level as `GET /admin/loggers` shows it (Connect's `LoggerLevel`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LoggerLevel {
    /// `TRACE`, `DEBUG`, `INFO`, `WARN`, `ERROR` or `OFF`.
    pub level: String,
    /// Milliseconds since the epoch of the last change through [`LogLevels::set`]; `None`
    /// (JSON null) for levels from start-up.
    pub last_modified: Option<u64>,
}

/// Parses a level name as Connect accepts it (log4j's names, any case): `TRACE`, `DEBUG`,
/// `INFO`, `WARN`, `ERROR`, `FATAL` (read as error), `OFF` and `ALL` (read as trace).
pub fn parse_level(name: &str) -> Result<LevelFilter, LoggingError> {
    match name.trim().to_ascii_uppercase().as_str() {
        "ALL" | "TRACE" => Ok(LevelFilter::TRACE),
        "DEBUG" => Ok(LevelFilter::DEBUG),
        "INFO" => Ok(LevelFilter::INFO),
        "WARN" | "WARNING" => Ok(LevelFilter::WARN),
        "ERROR" | "FATAL" => Ok(LevelFilter::ERROR),
        "OFF" => Ok(LevelFilter::OFF),
        _ => Err(LoggingError::InvalidLevel(name.to_owned())),
    }
}

/// The upper-case name Connect shows for a level.
pub fn level_name(level: LevelFilter) -> &'static str {
    match level.into_level() {
        None => "OFF",
        Some(tracing::Level::TRACE) => "TRACE",
        Some(tracing::Level::DEBUG) => "DEBUG",
        Some(tracing::Level::INFO) => "INFO",
        Some(tracing::Level::WARN) => "WARN",
        Some(tracing::Level::ERROR) => "ERROR",
    }
}

/// A `tracing` target as Connect shows a logger name: `sluice_runtime::herder` is
/// `sluice_runtime.herder`.
pub fn logger_name(target: &str) -> String {
    target.replace("::", ".")
}

/// Turns a Connect logger name into the `tracing` target it stands for; `None` for `root`.
pub fn target_of(name: &str) -> Result<Option<String>, LoggingError> {
    let name = name.trim();
    if name.eq_ignore_ascii_case(ROOT_LOGGER) {
        return Ok(None);
    }
    let target = name.replace('.', "::");
    let valid = !target.is_empty() && target.chars().all(|c| c.is_alphanumeric() || matches!(c, '_' | '-' | ':'));
    if valid {
        Ok(Some(target))
    } else {
        Err(LoggingError::InvalidName(name.to_owned()))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Entry {
    level: LevelFilter,
    last_modified: Option<u64>,
}

impl Entry {
    fn shown(self) -> LoggerLevel {
        LoggerLevel { level: level_name(self.level).to_owned(), last_modified: self.last_modified }
    }
}

/// The directive table the filter is built from.
#[derive(Debug, Clone)]
struct Table {
    root: Entry,
    targets: BTreeMap<String, Entry>,
    /// Directives with span or field filters, kept as given.
    opaque: Vec<String>,
}

impl Table {
    /// Reads a `RUST_LOG`-style string: `info`, `target=level`, a bare target (all levels), or
    /// a directive with span/field filters (kept opaque).
    fn parse(spec: &str) -> Result<Self, LoggingError> {
        let mut table =
            Table { root: Entry { level: LevelFilter::ERROR, last_modified: None }, targets: BTreeMap::new(), opaque: Vec::new() };
        for piece in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            if piece.contains(['[', '{']) {
                piece.parse::<Directive>().map_err(|_| LoggingError::InvalidDirective(piece.to_owned()))?;
                table.opaque.push(piece.to_owned());
                continue;
            }
            let invalid = |_| LoggingError::InvalidDirective(piece.to_owned());
            let (target, level) = match piece.split_once('=') {
                Some((target, level)) => (Some(target), parse_level(level).map_err(invalid)?),
                None => match parse_level(piece) {
                    Ok(level) => (None, level),
                    // A bare target enables everything from it, as in EnvFilter.
                    Err(_) => (Some(piece), LevelFilter::TRACE),
                },
            };
            let entry = Entry { level, last_modified: None };
            match target.map(target_of).transpose().map_err(invalid)?.flatten() {
                Some(target) => {
                    table.targets.insert(target, entry);
                }
                None => table.root = entry,
            }
        }
        Ok(table)
    }

    fn filter(&self) -> Result<EnvFilter, LoggingError> {
        let mut directives = vec![level_name(self.root.level).to_ascii_lowercase()];
        directives.extend(self.targets.iter().map(|(t, e)| format!("{t}={}", level_name(e.level).to_ascii_lowercase())));
        directives.extend(self.opaque.iter().cloned());
        let spec = directives.join(",");
        EnvFilter::builder().parse(&spec).map_err(|e| LoggingError::Apply(format!("filter '{spec}' does not parse: {e}")))
    }

    fn effective(&self, target: &str) -> Entry {
        self.targets.iter().filter(|(t, _)| target.starts_with(t.as_str())).max_by_key(|(t, _)| t.len()).map_or(self.root, |(_, e)| *e)
    }
}

type Apply = dyn Fn(EnvFilter) -> Result<(), String> + Send + Sync;

/// The run-time handle on log levels; cheap to clone.
#[derive(Clone)]
pub struct LogLevels {
    table: Arc<Mutex<Table>>,
    apply: Arc<Apply>,
}

impl std::fmt::Debug for LogLevels {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogLevels").field("table", &*self.lock()).finish_non_exhaustive()
    }
}

impl LogLevels {
    fn lock(&self) -> MutexGuard<'_, Table> {
        // The table is always left consistent, so a panic elsewhere does not spoil it.
        self.table.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// `root` and every logger whose level was set, by name (Connect's `GET /admin/loggers`).
    pub fn list(&self) -> BTreeMap<String, LoggerLevel> {
        let table = self.lock();
        let mut out: BTreeMap<String, LoggerLevel> = table.targets.iter().map(|(t, e)| (logger_name(t), e.shown())).collect();
        out.insert(ROOT_LOGGER.to_owned(), table.root.shown());
        out
    }

    /// The effective level of `name`: its own if it was set, else that of the longest set
    /// prefix, else root's. Fails for a name that cannot be a target, and for one that is no
    /// logger here (see the module docs).
    pub fn get(&self, name: &str) -> Result<LoggerLevel, LoggingError> {
        let target = target_of(name)?;
        let table = self.lock();
        match target {
            None => Ok(table.root.shown()),
            Some(t) if table.targets.contains_key(&t) || t.starts_with("sluice") => Ok(table.effective(&t).shown()),
            Some(_) => Err(LoggingError::UnknownLogger(name.trim().to_owned())),
        }
    }

    /// Sets `name` and every set logger under it to `level`, as Connect does for a namespace
    /// and its children, and swaps the filter. Returns the affected names, sorted; loggers
    /// already at `level` keep their `last_modified` but are still listed.
    pub fn set(&self, name: &str, level: &str) -> Result<Vec<String>, LoggingError> {
        let level = parse_level(level)?;
        let target = target_of(name)?;
        let now = Some(epoch_millis());
        let mut table = self.lock();
        let mut next = table.clone();
        let touch = |entry: &mut Entry| {
            if entry.level != level {
                *entry = Entry { level, last_modified: now };
            }
        };
        let mut affected = Vec::new();
        match &target {
            None => {
                touch(&mut next.root);
                affected.push(ROOT_LOGGER.to_owned());
                for (t, e) in next.targets.iter_mut() {
                    touch(e);
                    affected.push(logger_name(t));
                }
            }
            Some(target) => {
                let inherited = next.effective(target);
                next.targets.entry(target.clone()).or_insert(inherited);
                for (t, e) in next.targets.iter_mut().filter(|(t, _)| t.starts_with(target.as_str())) {
                    touch(e);
                    affected.push(logger_name(t));
                }
            }
        }
        (self.apply)(next.filter()?).map_err(LoggingError::Apply)?;
        *table = next;
        drop(table);
        affected.sort();
        tracing::info!(logger = name, level = level_name(level), affected = affected.len(), "log level changed");
        Ok(affected)
    }
}

fn epoch_millis() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// A reloadable filter layer for any subscriber, and its [`LogLevels`] handle. `initial` is
/// a `RUST_LOG`-style string such as `info,sluice_runtime=debug`; the default root level is
/// ERROR, as with `RUST_LOG` unset in EnvFilter.
///
/// Used by [`init`]; tests build their own subscriber around it.
pub fn filter_layer<S>(initial: &str) -> Result<(LogLevels, reload::Layer<EnvFilter, S>), LoggingError>
where
    S: tracing::Subscriber + Send + Sync + 'static,
{
    let table = Table::parse(initial)?;
    let (layer, handle) = reload::Layer::new(table.filter()?);
    let apply = move |filter: EnvFilter| handle.reload(filter).map_err(|e| e.to_string());
    Ok((LogLevels { table: Arc::new(Mutex::new(table)), apply: Arc::new(apply) }, layer))
}

/// Installs the process-wide subscriber: a reloadable filter and a formatter writing to
/// stderr. The initial levels come from `RUST_LOG` when it is set and valid, else from
/// `default` (for example `info`); an invalid `RUST_LOG` is reported on stderr and ignored.
///
/// Call once, from the binary. Fails if a global subscriber is already installed.
pub fn init(default: &str) -> Result<LogLevels, LoggingError> {
    let from_env = std::env::var(ENV_VAR).ok().filter(|v| !v.trim().is_empty());
    let (levels, layer) = match from_env.as_deref().map(filter_layer) {
        Some(Ok(pair)) => pair,
        Some(Err(e)) => {
            eprintln!("sluice: ignoring {ENV_VAR}: {e}; using '{default}'");
            filter_layer(default)?
        }
        None => filter_layer(default)?,
    };
    tracing_subscriber::registry()
        .with(layer)
        .with(tracing_subscriber::fmt::layer().with_writer(std::io::stderr))
        .try_init()
        .map_err(|e| LoggingError::Apply(e.to_string()))?;
    Ok(levels)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tracing_subscriber::layer::Context;
    use tracing_subscriber::{Layer, Registry};

    /// Records `target level` of every event that gets through the filter.
    #[derive(Clone, Default)]
    struct Seen(Arc<Mutex<Vec<String>>>);

    impl<S: tracing::Subscriber> Layer<S> for Seen {
        fn on_event(&self, event: &tracing::Event<'_>, _: Context<'_, S>) {
            let meta = event.metadata();
            self.0.lock().unwrap().push(format!("{} {}", meta.target(), meta.level()));
        }
    }

    impl Seen {
        fn take(&self) -> Vec<String> {
            std::mem::take(&mut *self.0.lock().unwrap())
        }
    }

    fn emit() {
        tracing::debug!(target: "sluice_runtime::herder", "d");
        tracing::info!(target: "sluice_runtime::herder", "i");
        tracing::debug!(target: "sluice_rest", "d");
        tracing::info!(target: "sluice_rest", "i");
    }

    #[test]
    fn set_changes_what_gets_through() {
        let (levels, layer) = filter_layer::<Registry>("info").unwrap();
        let seen = Seen::default();
        let subscriber = tracing_subscriber::registry().with(layer).with(seen.clone());
        tracing::subscriber::with_default(subscriber, || {
            emit();
            assert_eq!(seen.take(), ["sluice_runtime::herder INFO", "sluice_rest INFO"]);

            let affected = levels.set("sluice_runtime.herder", "debug").unwrap();
            assert_eq!(affected, ["sluice_runtime.herder"]);
            assert_eq!(seen.take(), ["sluice_runtime::logging INFO"], "the change itself is logged");
            emit();
            assert_eq!(seen.take(), ["sluice_runtime::herder DEBUG", "sluice_runtime::herder INFO", "sluice_rest INFO"]);

            levels.set("ROOT", "off").unwrap();
            emit();
            assert_eq!(seen.take(), Vec::<String>::new());
        });
    }

    #[test]
    fn list_and_get_show_set_levels() {
        let (levels, _layer) = filter_layer::<Registry>("warn,sluice_api=debug").unwrap();
        let list = levels.list();
        assert_eq!(list.keys().collect::<Vec<_>>(), ["root", "sluice_api"]);
        assert_eq!(list["root"], LoggerLevel { level: "WARN".into(), last_modified: None });
        assert_eq!(list["sluice_api"].level, "DEBUG");

        // Unset names inherit from the longest prefix that was set, else root.
        assert_eq!(levels.get("sluice_api::config").unwrap().level, "DEBUG");
        assert_eq!(levels.get("sluice_runtime.herder").unwrap().level, "WARN");
        assert_eq!(levels.get("Root").unwrap().level, "WARN");
        assert!(matches!(levels.get("a=b"), Err(LoggingError::InvalidName(_))));
        // Connect answers 404 for a logger that does not exist.
        assert_eq!(levels.get("org.apache.kafka").unwrap_err().to_string(), "Logger org.apache.kafka not found.");
        levels.set("org.apache.kafka", "debug").unwrap();
        assert_eq!(levels.get("org.apache.kafka").unwrap().level, "DEBUG");
    }

    #[test]
    fn set_covers_children_and_root_covers_all() {
        let (levels, _layer) = filter_layer::<Registry>("info,a::b=debug,a::c=trace,z=warn").unwrap();
        assert_eq!(levels.set("a", "ERROR").unwrap(), ["a", "a.b", "a.c"]);
        let list = levels.list();
        assert_eq!(list["a.b"].level, "ERROR");
        assert!(list["a.b"].last_modified.is_some());
        assert_eq!(list["z"], LoggerLevel { level: "WARN".into(), last_modified: None });

        assert_eq!(levels.set("root", "fatal").unwrap(), ["a", "a.b", "a.c", "root", "z"]);
        assert!(levels.list().values().all(|l| l.level == "ERROR"));
    }

    #[test]
    fn levels_are_read_as_log4j_names() {
        assert_eq!(parse_level("Warn").unwrap(), LevelFilter::WARN);
        assert_eq!(parse_level("FATAL").unwrap(), LevelFilter::ERROR);
        assert_eq!(parse_level("off").unwrap(), LevelFilter::OFF);
        assert_eq!(parse_level("loud").unwrap_err().to_string(), "invalid log level 'loud'.");
        let (levels, _layer) = filter_layer::<Registry>("info").unwrap();
        assert_eq!(levels.set("x", "verbose").unwrap_err(), LoggingError::InvalidLevel("verbose".into()));
        assert_eq!(levels.list().len(), 1, "a failed set changes nothing");
    }

    #[test]
    fn initial_spec_keeps_span_directives_and_rejects_garbage() {
        let (levels, _layer) = filter_layer::<Registry>("info,my_crate[span]=debug,bare_target").unwrap();
        let list = levels.list();
        assert_eq!(list["bare_target"].level, "TRACE");
        assert!(!list.contains_key("my_crate"));
        assert!(matches!(filter_layer::<Registry>("info,x=loud"), Err(LoggingError::InvalidDirective(_))));
    }
}
