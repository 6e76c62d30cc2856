//! The reconcile loop of `connectors.dir`: a pass at start, after a file change has been
//! quiet for a second, when a REST write asks for one (`revert`), on becoming the group's
//! leader, and every `connectors.dir.interval.ms`.
//!
//! Changes are found by reading the directory each second and fingerprinting the names and
//! contents of its declaration files: a `touch` or a rewrite with the same bytes is no
//! change, and needs no file-watching support from the platform.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::Serialize;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::{apply, may_apply, plan, read_dir, Action, PlanItem, Settings};
use crate::herder::Herder;

/// How long a changed directory must stay unchanged before a pass.
const DEBOUNCE: Duration = Duration::from_secs(1);
const TICK: Duration = Duration::from_secs(1);

/// The outcome of the last pass, for `GET /connectors-dir`.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub dir: String,
    pub worker_id: String,
    /// Milliseconds since the epoch.
    pub finished_at: u64,
    /// Set when the directory itself could not be read (nothing was changed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub items: Vec<PlanItem>,
}

/// A worker's `connectors.dir`: its settings, the last report and the wake-up REST uses.
pub struct Directory {
    pub settings: Settings,
    wake: Notify,
    last: Mutex<Option<Report>>,
}

impl Directory {
    pub fn new(settings: Settings) -> Arc<Self> {
        Arc::new(Self { settings, wake: Notify::new(), last: Mutex::new(None) })
    }

    /// Asks for a pass soon (after a REST write to a declared connector).
    pub fn wake(&self) {
        self.wake.notify_one();
    }

    pub fn last_report(&self) -> Option<Report> {
        self.last.lock().expect("report lock").clone()
    }

    /// Runs passes until `cancel` fires. Does nothing without `connectors.dir`.
    pub async fn run(self: Arc<Self>, herder: Arc<dyn Herder>, cancel: CancellationToken) {
        let Some(dir) = self.settings.dir.clone() else { return };
        tracing::info!(dir = %dir.display(), drift = self.settings.drift.name(), interval_ms = self.settings.interval.as_millis() as u64, "connectors.dir: reconciling the connectors declared in the directory");
        let mut seen = fingerprint(&dir);
        let mut seen_at = Instant::now();
        let mut applied: Option<u64> = None;
        let mut last_pass: Option<Instant> = None;
        let mut was_writer = false;
        let mut woken = false;
        loop {
            let now = fingerprint(&dir);
            if now != seen {
                seen = now;
                seen_at = Instant::now();
            }
            let writer = may_apply(&*herder);
            let settled = seen_at.elapsed() >= DEBOUNCE || applied.is_none();
            let due = writer
                && (woken
                    || !was_writer
                    || (settled && applied != Some(seen))
                    || last_pass.is_none_or(|t| t.elapsed() >= self.settings.interval));
            was_writer = writer;
            if due {
                woken = false;
                self.pass(&*herder, &dir).await;
                applied = Some(seen);
                last_pass = Some(Instant::now());
            }
            tokio::select! {
                _ = cancel.cancelled() => return,
                _ = self.wake.notified() => woken = true,
                _ = tokio::time::sleep(TICK) => {}
            }
        }
    }

    /// One pass: read, plan, apply, report.
    pub async fn pass(&self, herder: &dyn Herder, dir: &Path) -> Report {
        let (items, error) = match read_dir(dir) {
            Ok(entries) => {
                let mut items = plan(herder, &entries, self.settings.drift).await;
                apply(herder, &mut items).await;
                (items, None)
            }
            Err(e) => {
                tracing::warn!(error = %e, "connectors.dir cannot be read: nothing is changed");
                (Vec::new(), Some(e))
            }
        };
        for item in items.iter().filter(|i| matches!(i.action, Action::Invalid | Action::Conflict)) {
            tracing::warn!(connector = %item.name, file = item.file.as_deref().unwrap_or(""), action = ?item.action, errors = ?item.errors, "connectors.dir: a declaration is not applied; what runs stays as it is");
        }
        let report = Report {
            dir: dir.display().to_string(),
            worker_id: herder.worker_id(),
            finished_at: SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64),
            error,
            items,
        };
        *self.last.lock().expect("report lock") = Some(report.clone());
        report
    }
}

/// The names and contents of the declaration files (0 when the directory cannot be read).
fn fingerprint(dir: &Path) -> u64 {
    let Ok(listing) = std::fs::read_dir(dir) else { return 0 };
    let mut files: Vec<_> = listing.filter_map(|e| e.ok()).map(|e| e.path()).filter(|p| super::file::is_declaration_file(p)).collect();
    files.sort();
    let mut h = super::Fnv::new();
    for path in files {
        h.field(path.as_os_str().as_encoded_bytes()).field(&std::fs::read(&path).unwrap_or_default());
    }
    h.value()
}
