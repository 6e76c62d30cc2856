//! Offsets in Debezium's format, and the one function that moves the confirmed LSN.
//!
//! Source partition: `{"server": topic.prefix}`. Offsets, by kind of record:
//!
//! | record         | fields                                                               |
//! |----------------|----------------------------------------------------------------------|
//! | snapshot row   | `lsn` (consistent point), `txId`, `ts_usec`, `snapshot: true`, `last_snapshot_record` |
//! | change         | `lsn` (of the change), `lsn_proc` (= `lsn`), `lsn_commit` (commit LSN of its transaction), `txId`, `ts_usec`, `txn_seq` |
//! | heartbeat      | `lsn` (server WAL position acknowledged by a keepalive), `ts_usec`    |
//!
//! `txn_seq` (not in Debezium's offsets) is the ordinal of the change inside its
//! transaction: several changes can share one LSN (multi-row inserts such as `COPY`), so
//! the LSN alone cannot say where to resume inside a transaction.
//!
//! Progress rules:
//! - The **resume position** of an offset is `lsn_commit` when present, else `lsn`.
//!   Postgres resends every transaction whose commit LSN is at or after it.
//! - Only a resume position from offsets the runtime reported durable is ever confirmed
//!   to Postgres ([`Confirmed::advance`]); it never moves back.
//! - On restart inside a transaction, the changes of the transaction with commit LSN
//!   `lsn_commit` up to and including `txn_seq` are skipped: they are in the log already.

use pgwire_replication::Lsn;
use serde_json::{json, Value as Json};
use sluice_api::{ConnectError, ConnectResult, SourceOffset, SourcePartition};

pub fn partition(topic_prefix: &str) -> SourcePartition {
    let mut p = SourcePartition::new();
    p.insert("server".to_owned(), json!(topic_prefix));
    p
}

/// Microseconds between 1970-01-01 and 2000-01-01 (the Postgres epoch).
pub const PG_EPOCH_OFFSET_MICROS: i64 = 946_684_800_000_000;

/// Where a snapshot stands in a stored offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SnapshotState {
    /// No snapshot markers: streaming offset (the snapshot, if any, completed).
    None,
    /// `snapshot: true` without `last_snapshot_record: true`: interrupted.
    InProgress,
    /// The last snapshot record is durable.
    Completed,
}

/// A stored offset, read back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredOffset {
    pub lsn: Lsn,
    pub lsn_commit: Option<Lsn>,
    pub txn_seq: Option<u64>,
    pub tx_id: Option<i64>,
    pub snapshot: SnapshotState,
}

impl StoredOffset {
    pub fn parse(offset: &SourceOffset) -> ConnectResult<Self> {
        let lsn_of = |key: &str| -> ConnectResult<Option<Lsn>> {
            match offset.get(key) {
                None | Some(Json::Null) => Ok(None),
                Some(v) => v
                    .as_u64()
                    .map(|n| Some(Lsn(n)))
                    .ok_or_else(|| ConnectError::fatal(format!("stored offset has a non-numeric {key}: {v}; reset the connector's offsets"))),
            }
        };
        let lsn = lsn_of("lsn")?.ok_or_else(|| ConnectError::fatal(format!("stored offset {offset:?} has no lsn; reset the connector's offsets")))?;
        let snapshot = match offset.get("snapshot") {
            Some(Json::Bool(true)) => {
                if offset.get("last_snapshot_record") == Some(&Json::Bool(true)) {
                    SnapshotState::Completed
                } else {
                    SnapshotState::InProgress
                }
            }
            _ => SnapshotState::None,
        };
        Ok(Self {
            lsn,
            lsn_commit: lsn_of("lsn_commit")?,
            txn_seq: offset.get("txn_seq").and_then(Json::as_u64),
            tx_id: offset.get("txId").and_then(Json::as_i64),
            snapshot,
        })
    }

    /// Where streaming resumes: every transaction committing at or after it is resent.
    pub fn resume_lsn(&self) -> Lsn {
        self.lsn_commit.unwrap_or(self.lsn)
    }

    /// The changes already durable inside the transaction streaming resumes in.
    pub fn skip(&self) -> Option<Skip> {
        match (self.lsn_commit, self.txn_seq) {
            (Some(commit_lsn), Some(seq)) => Some(Skip { commit_lsn, through_seq: seq }),
            _ => None,
        }
    }
}

/// Changes of the transaction committing at `commit_lsn` with an ordinal up to
/// `through_seq` were already handed out; drop them when they are resent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Skip {
    pub commit_lsn: Lsn,
    pub through_seq: u64,
}

pub fn snapshot_offset(lsn: Lsn, tx_id: Option<i64>, ts_usec: i64, last: bool) -> SourceOffset {
    let mut o = SourceOffset::new();
    o.insert("lsn".into(), json!(lsn.0));
    o.insert("txId".into(), json!(tx_id));
    o.insert("ts_usec".into(), json!(ts_usec));
    o.insert("snapshot".into(), json!(true));
    o.insert("last_snapshot_record".into(), json!(last));
    o
}

pub fn change_offset(lsn: Lsn, commit_lsn: Lsn, tx_id: i64, ts_usec: i64, txn_seq: u64) -> SourceOffset {
    let mut o = SourceOffset::new();
    o.insert("lsn".into(), json!(lsn.0));
    o.insert("lsn_proc".into(), json!(lsn.0));
    o.insert("lsn_commit".into(), json!(commit_lsn.0));
    o.insert("txId".into(), json!(tx_id));
    o.insert("ts_usec".into(), json!(ts_usec));
    o.insert("txn_seq".into(), json!(txn_seq));
    o
}

pub fn heartbeat_offset(lsn: Lsn, ts_usec: i64) -> SourceOffset {
    let mut o = SourceOffset::new();
    o.insert("lsn".into(), json!(lsn.0));
    o.insert("ts_usec".into(), json!(ts_usec));
    o
}

/// The LSN confirmed to Postgres as flushed. Moves only forward, only through
/// [`Confirmed::advance`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Confirmed(Lsn);

impl Confirmed {
    pub fn new(start: Lsn) -> Self {
        Self(start)
    }

    pub fn get(&self) -> Lsn {
        self.0
    }

    /// Raises the confirmed LSN to `to`; returns the new value when it moved, `None` when
    /// `to` is not ahead (an older or equal offset never moves it back).
    pub fn advance(&mut self, to: Lsn) -> Option<Lsn> {
        if to > self.0 {
            self.0 = to;
            Some(to)
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn confirmed_never_moves_back() {
        let mut c = Confirmed::new(Lsn(100));
        assert_eq!(c.advance(Lsn(90)), None);
        assert_eq!(c.advance(Lsn(100)), None);
        assert_eq!(c.advance(Lsn(150)), Some(Lsn(150)));
        assert_eq!(c.get(), Lsn(150));
    }

    #[test]
    fn offsets_round_trip() {
        let o = StoredOffset::parse(&change_offset(Lsn(10), Lsn(20), 7, 1, 3)).unwrap();
        assert_eq!(o.resume_lsn(), Lsn(20));
        assert_eq!(o.skip(), Some(Skip { commit_lsn: Lsn(20), through_seq: 3 }));
        assert_eq!(o.snapshot, SnapshotState::None);
        let s = StoredOffset::parse(&snapshot_offset(Lsn(5), Some(1), 1, false)).unwrap();
        assert_eq!((s.snapshot, s.resume_lsn(), s.skip()), (SnapshotState::InProgress, Lsn(5), None));
        let s = StoredOffset::parse(&snapshot_offset(Lsn(5), None, 1, true)).unwrap();
        assert_eq!(s.snapshot, SnapshotState::Completed);
        assert_eq!(StoredOffset::parse(&heartbeat_offset(Lsn(9), 1)).unwrap().resume_lsn(), Lsn(9));
    }
}
