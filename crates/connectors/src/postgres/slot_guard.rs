//! Replication-slot safety: a slot that falls behind keeps WAL on the database's disk until
//! the disk fills, and a slot whose WAL the server gave up (`max_slot_wal_keep_size`) has
//! lost changes for good. While streaming, every `sluice.slot.check.interval.ms` the task
//! reads its slot's row of `pg_replication_slots`:
//!
//! - `wal_status = lost`: the changes after the last committed offset are gone. The task
//!   fails for good (no restart can bring them back) with the way to recover, never a
//!   silent gap.
//! - retained WAL (`pg_current_wal_lsn() - restart_lsn`) past `sluice.slot.lag.warn.bytes`,
//!   or `wal_status = unreserved` (the next checkpoint may remove WAL the slot needs): a
//!   warning in the log, once per crossing.
//! - retained WAL past `sluice.slot.lag.pause.bytes`: what `sluice.slot.lag.action` says,
//!   `warn` (the default), `fail` (the task stops with a permanent failure before the disk
//!   fills) or, only when asked, `drop-and-resnapshot`: the task drops its slot, creates a
//!   new one and takes a new snapshot of its tables, then streams from the new slot. The
//!   disk is freed at once and every row ends up in its current state downstream, but the
//!   changes the slot held are never sent as events: a row deleted meanwhile is not deleted
//!   downstream. With this action a lost slot (`wal_status = lost`, or a slot gone from
//!   under stored offsets) is recovered the same way instead of failing.

use std::time::{Duration, Instant};

use sluice_api::{ConfigDef, ConfigKey, ConfigType, ConnectError, ConnectResult, Importance, Validator};
use tokio_postgres::Client;

pub const CHECK_INTERVAL_MS: &str = "sluice.slot.check.interval.ms";
pub const WARN_BYTES: &str = "sluice.slot.lag.warn.bytes";
pub const PAUSE_BYTES: &str = "sluice.slot.lag.pause.bytes";
pub const ACTION: &str = "sluice.slot.lag.action";

const DEFAULT_CHECK_INTERVAL_MS: &str = "10000";
/// 1 GiB of retained WAL is worth a warning by default; no pause threshold by default.
const DEFAULT_WARN_BYTES: &str = "1073741824";

/// What to do past `sluice.slot.lag.pause.bytes`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LagAction {
    Warn,
    Fail,
    /// `drop-and-resnapshot`.
    Resnapshot,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlotGuardConfig {
    pub interval: Duration,
    /// `None`: no warning (0 or -1 given).
    pub warn_bytes: Option<u64>,
    pub pause_bytes: Option<u64>,
    pub action: LagAction,
}

pub fn def() -> ConfigDef {
    ConfigDef::new()
        .define(
            ConfigKey::new(CHECK_INTERVAL_MS, ConfigType::Long, Importance::Low, "How often the task reads its replication slot's WAL retention and status while streaming.")
                .default_value(DEFAULT_CHECK_INTERVAL_MS)
                .validator(Validator::AtLeast(100)),
        )
        .define(
            ConfigKey::new(WARN_BYTES, ConfigType::Long, Importance::Low, "Retained WAL (bytes) of the slot past which a warning is logged; -1 for none.")
                .default_value(DEFAULT_WARN_BYTES)
                .validator(Validator::AtLeast(-1)),
        )
        .define(
            ConfigKey::new(PAUSE_BYTES, ConfigType::Long, Importance::Low, "Retained WAL (bytes) of the slot past which sluice.slot.lag.action applies; -1 for none.")
                .default_value("-1")
                .validator(Validator::AtLeast(-1)),
        )
        .define(
            ConfigKey::new(ACTION, ConfigType::String, Importance::Low, "Past sluice.slot.lag.pause.bytes: warn; fail the task (permanently, before the disk fills); or drop-and-resnapshot: drop the slot, take a new snapshot and stream from a new slot (changes the old slot held, deletes among them, are not sent).")
                .default_value("warn")
                .validator(Validator::one_of(&["warn", "fail", "drop-and-resnapshot"])),
        )
}

impl SlotGuardConfig {
    pub fn parse(c: &sluice_api::ParsedConfig) -> ConnectResult<Self> {
        let bytes = |k: &str| u64::try_from(c.int(k)).ok().filter(|b| *b > 0);
        let action = match c.string(ACTION).unwrap_or_default().trim().to_ascii_lowercase().as_str() {
            "fail" => LagAction::Fail,
            "drop-and-resnapshot" => LagAction::Resnapshot,
            _ => LagAction::Warn,
        };
        Ok(Self {
            interval: Duration::from_millis(c.int(CHECK_INTERVAL_MS).max(100) as u64),
            warn_bytes: bytes(WARN_BYTES),
            pause_bytes: bytes(PAUSE_BYTES),
            action,
        })
    }
}

/// One reading of the slot's row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlotState {
    pub wal_status: Option<String>,
    /// WAL the slot keeps (bytes from its `restart_lsn` to the server's current position).
    pub retained_bytes: Option<i64>,
    pub safe_wal_size: Option<i64>,
}

/// What a reading calls for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Fine,
    Warn(String),
    Fail(String),
    /// Drop the slot and take a new snapshot (`drop-and-resnapshot`), for this reason.
    Resnapshot(String),
}

impl SlotGuardConfig {
    pub fn judge(&self, slot: &str, s: &SlotState) -> Verdict {
        if s.wal_status.as_deref() == Some("lost") {
            if self.action == LagAction::Resnapshot {
                return Verdict::Resnapshot(format!("replication slot {slot:?} lost WAL it needed (wal_status=lost)"));
            }
            return Verdict::Fail(format!(
                "replication slot {slot:?} lost WAL it needed (wal_status=lost: the server removed it, max_slot_wal_keep_size): \
                 the changes after the last committed offset are gone. To recover: stop the connector, drop the slot \
                 (SELECT pg_drop_replication_slot('{slot}')), delete its offsets (DELETE /connectors/<name>/offsets) and resume it \
                 to take a new snapshot"
            ));
        }
        let retained = s.retained_bytes.unwrap_or(0).max(0) as u64;
        if let Some(pause) = self.pause_bytes.filter(|p| retained >= *p) {
            let text = format!("replication slot {slot:?} retains {retained} bytes of WAL, past {PAUSE_BYTES}={pause}");
            return match self.action {
                LagAction::Fail => Verdict::Fail(format!(
                    "{text} ({ACTION}=fail): the task stops before the database's disk fills; find why it fell behind, then restart it"
                )),
                LagAction::Warn => Verdict::Warn(text),
                LagAction::Resnapshot => Verdict::Resnapshot(text),
            };
        }
        if s.wal_status.as_deref() == Some("unreserved") {
            return Verdict::Warn(format!(
                "replication slot {slot:?} is past max_slot_wal_keep_size (wal_status=unreserved, safe_wal_size={}): the next checkpoint may remove WAL it needs",
                s.safe_wal_size.unwrap_or(0)
            ));
        }
        if let Some(warn) = self.warn_bytes.filter(|w| retained >= *w) {
            return Verdict::Warn(format!("replication slot {slot:?} retains {retained} bytes of WAL, past {WARN_BYTES}={warn}"));
        }
        Verdict::Fine
    }
}

/// The check, run from the streaming loop.
pub struct SlotGuard {
    config: SlotGuardConfig,
    last: Option<Instant>,
    warned: bool,
}

/// How long a check may wait for the server.
const CHECK_TIMEOUT: Duration = Duration::from_secs(10);

impl SlotGuard {
    pub fn new(config: SlotGuardConfig) -> Self {
        Self { config, last: None, warned: false }
    }

    /// Reads the slot when a check is due. A permanent error when the slot lost WAL, or is
    /// past the pause threshold with `fail`; `Some(reason)` when it must be dropped and the
    /// tables snapshotted again (`drop-and-resnapshot`). A failed read is logged and tried
    /// again at the next check (the stream reports a lost database itself).
    pub async fn maybe_check(
        &mut self,
        catalog: &Client,
        slot: &str,
        metrics: &super::metrics::DebeziumMetrics,
    ) -> ConnectResult<Option<String>> {
        if self.last.is_some_and(|l| l.elapsed() < self.config.interval) {
            return Ok(None);
        }
        self.last = Some(Instant::now());
        let params: [&(dyn tokio_postgres::types::ToSql + Sync); 1] = [&slot];
        let query = catalog.query_opt(
            "SELECT wal_status, safe_wal_size, pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn)::bigint \
             FROM pg_replication_slots WHERE slot_name = $1",
            &params,
        );
        // Bounded: a server that does not answer is the stream's to notice (see
        // `replication::Stream::probe`), not a reason to stop reading it.
        let row = match tokio::time::timeout(CHECK_TIMEOUT, query).await {
            Ok(Ok(Some(r))) => r,
            Ok(Ok(None)) => return Ok(None),
            Ok(Err(e)) => {
                tracing::debug!(error = %e, "could not read the replication slot's state; trying again at the next check");
                return Ok(None);
            }
            Err(_) => {
                tracing::debug!("no answer to the replication slot's state in time; trying again at the next check");
                return Ok(None);
            }
        };
        let state = SlotState { wal_status: row.get(0), safe_wal_size: row.get(1), retained_bytes: row.get(2) };
        metrics.slot(slot, state.retained_bytes, state.safe_wal_size, state.wal_status.as_deref());
        match self.config.judge(slot, &state) {
            Verdict::Fine => self.warned = false,
            Verdict::Warn(text) => {
                if !self.warned {
                    tracing::warn!(slot, retained_bytes = state.retained_bytes, wal_status = ?state.wal_status, "{text}");
                    self.warned = true;
                }
            }
            Verdict::Fail(text) => return Err(ConnectError::permanent(text)),
            Verdict::Resnapshot(text) => return Ok(Some(text)),
        }
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(pause: Option<u64>, action: LagAction) -> SlotGuardConfig {
        SlotGuardConfig { interval: Duration::from_secs(1), warn_bytes: Some(100), pause_bytes: pause, action }
    }

    fn state(status: &str, retained: i64) -> SlotState {
        SlotState { wal_status: Some(status.to_owned()), retained_bytes: Some(retained), safe_wal_size: Some(0) }
    }

    #[test]
    fn a_lost_slot_fails_with_the_recovery() {
        let v = cfg(None, LagAction::Warn).judge("s", &state("lost", 0));
        let Verdict::Fail(text) = v else { panic!("{v:?}") };
        assert!(text.contains("wal_status=lost") && text.contains("pg_drop_replication_slot('s')"), "{text}");
    }

    #[test]
    fn thresholds_warn_then_act() {
        assert_eq!(cfg(None, LagAction::Warn).judge("s", &state("reserved", 99)), Verdict::Fine);
        assert!(matches!(cfg(None, LagAction::Warn).judge("s", &state("reserved", 100)), Verdict::Warn(_)));
        assert!(matches!(cfg(Some(200), LagAction::Warn).judge("s", &state("extended", 250)), Verdict::Warn(_)));
        let v = cfg(Some(200), LagAction::Fail).judge("s", &state("extended", 250));
        assert!(matches!(&v, Verdict::Fail(t) if t.contains("sluice.slot.lag.pause.bytes=200")), "{v:?}");
        assert!(matches!(cfg(None, LagAction::Warn).judge("s", &state("unreserved", 0)), Verdict::Warn(t) if t.contains("unreserved")));
    }

    #[test]
    fn drop_and_resnapshot_only_when_asked() {
        let v = cfg(Some(200), LagAction::Resnapshot).judge("s", &state("extended", 250));
        assert!(matches!(&v, Verdict::Resnapshot(t) if t.contains("pause.bytes=200")), "{v:?}");
        assert!(matches!(cfg(None, LagAction::Resnapshot).judge("s", &state("lost", 0)), Verdict::Resnapshot(_)));
        assert!(matches!(cfg(Some(200), LagAction::Resnapshot).judge("s", &state("reserved", 150)), Verdict::Warn(_)));
    }
}
