//! Offsets in Debezium's format, and the one function that moves the confirmed LSN.
//!
//! Source partition: `{"server": topic.prefix}`. Offsets, by kind of record:
//!
//! | record         | fields                                                               |
//! |----------------|----------------------------------------------------------------------|
//! | snapshot row   | `lsn` (consistent point), `txId`, `ts_usec`, `snapshot: true`, `last_snapshot_record`, `snapshot_table`, `snapshot_key`, `snapshot_open_tables` |
//! | change         | `lsn` (of the change), `lsn_proc` (= `lsn`), `lsn_commit` (commit LSN of its transaction), `txId`, `ts_usec`, `txn_seq` |
//! | heartbeat      | `lsn` (server WAL position acknowledged by a keepalive), `ts_usec`    |
//! | transaction BEGIN | as a change, with `txn_seq: 0` (`provide.transaction.metadata`)   |
//! | transaction END   | `lsn` (end of the commit record), `txId`, `ts_usec`               |
//!
//! `snapshot_table`, `snapshot_key` and `snapshot_open_tables` are not in Debezium's
//! offsets: they say where an interrupted snapshot resumes ([`SnapshotPosition`]; see
//! `snapshot.rs`). Tables are started in `(schema, table)` order, up to
//! `snapshot.max.threads` at a time, and each is read in primary-key order:
//! - `snapshot_table` (`[schema, table]`): the newest table started. Every table ordered
//!   up to it is finished, unless it is listed in `snapshot_open_tables`; the tables after
//!   it are not started.
//! - `snapshot_open_tables`: `[{"table": [schema, table], "key": [...] | null}, ...]`, the
//!   tables started and not finished, each with the text form of the primary key columns
//!   (in key order) of its last record up to this one; `null` when none of its records
//!   came yet or it has no primary key (it is then read again from its start).
//! - `snapshot_key`: the `key` of `snapshot_table` when it is open, else `null`.
//!
//! Offsets written before `snapshot_open_tables` existed (one table at a time) have only
//! `snapshot_table` and `snapshot_key`: that table is the only open one, with that key.
//! Each offset describes every record up to its own, whatever interleaving of tables came
//! before it, so the durable prefix the runtime stores always says, per table, finished,
//! resume after key `k`, or not started.
//!
//! While an incremental snapshot runs, every offset also carries
//! `incremental_snapshot_collections`, `incremental_snapshot_primary_key` and
//! `incremental_snapshot_maximum_key` (see `incremental.rs`).
//!
//! `txn_seq` (not in Debezium's offsets) is the ordinal of the change inside its
//! transaction: several changes can share one LSN (multi-row inserts such as `COPY`), so
//! the LSN alone cannot say where to resume inside a transaction.
//!
//! Progress rules:
//! - The **resume position** of an offset is `lsn_commit` when present, else `lsn`.
//!   Postgres resends every transaction whose commit LSN is at or after it.
//! - The confirmed LSN moves only through [`Confirmed::advance`], never back, and only to
//!   the resume position of an offset the runtime stored ([`Progress`]). A keepalive
//!   received between transactions (nothing before its WAL end is left to send) becomes an
//!   offset-only record at that WAL end, so the stored offset, and with it the slot,
//!   follows an idle database.
//! - So the slot is never ahead of the stored offset, as with Debezium, which refuses to
//!   start when the slot's restart LSN has passed its offset: a connector can go back to
//!   Debezium on sluice's offsets. (Slots confirmed by older versions may be ahead; on
//!   restart Postgres then resends from the slot's position, and nothing of interest lies
//!   in between.)
//! - On restart inside a transaction, the changes of the transaction with commit LSN
//!   `lsn_commit` up to and including `txn_seq` are skipped: they are in the log already.

use std::collections::BTreeMap;

use pgwire_replication::Lsn;
use serde_json::{json, Value as Json};
use sluice_api::{ConnectError, ConnectResult, SourceOffset, SourcePartition};

use super::catalog::TableId;

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
    /// Debezium's last completely processed LSN (`lsn_proc`).
    pub lsn_proc: Option<Lsn>,
    pub txn_seq: Option<u64>,
    pub tx_id: Option<i64>,
    pub snapshot: SnapshotState,
    /// Where an interrupted snapshot stood (offsets of snapshot records only).
    pub snapshot_position: Option<SnapshotPosition>,
}

/// How far a snapshot got (see the module docs for the offset fields).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotPosition {
    /// The newest table started: the tables ordered after it are not started.
    pub through: TableId,
    /// The tables ordered up to `through` that are started and not finished, each with the
    /// key of its last record handed out (`None`: read it from its start). Every other
    /// table up to `through` is finished.
    pub open: BTreeMap<TableId, Option<Vec<String>>>,
}

/// Where one table of an interrupted snapshot stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TableProgress {
    /// Every record of the table was handed out before the offset's record.
    Finished,
    /// Read the table's rows after this key (`None`: from its start).
    After(Option<Vec<String>>),
}

impl SnapshotPosition {
    pub fn of(&self, table: &TableId) -> TableProgress {
        match self.open.get(table) {
            Some(after) => TableProgress::After(after.clone()),
            None if *table <= self.through => TableProgress::Finished,
            None => TableProgress::After(None),
        }
    }

    fn parse(offset: &SourceOffset) -> Option<Self> {
        let through = table_id(offset.get("snapshot_table")?)?;
        let open = match offset.get("snapshot_open_tables") {
            Some(Json::Array(open)) => {
                open.iter().map(|o| Some((table_id(o.get("table")?)?, key(o.get("key"))?))).collect::<Option<BTreeMap<_, _>>>()?
            }
            // Written by the version that read one table at a time.
            _ => BTreeMap::from([(through.clone(), key(offset.get("snapshot_key"))?)]),
        };
        Some(Self { through, open })
    }

    fn write(&self, o: &mut SourceOffset) {
        let id = |t: &TableId| json!([t.schema, t.table]);
        o.insert("snapshot_table".into(), id(&self.through));
        o.insert("snapshot_key".into(), json!(self.open.get(&self.through).cloned().flatten()));
        let open: Vec<Json> = self.open.iter().map(|(t, k)| json!({"table": id(t), "key": k})).collect();
        o.insert("snapshot_open_tables".into(), Json::Array(open));
    }
}

fn table_id(v: &Json) -> Option<TableId> {
    let [Json::String(schema), Json::String(table)] = v.as_array()?.as_slice() else { return None };
    Some(TableId { schema: schema.clone(), table: table.clone() })
}

/// A stored key: `Some(None)` for `null` or absent, `None` when malformed.
fn key(v: Option<&Json>) -> Option<Option<Vec<String>>> {
    match v {
        None | Some(Json::Null) => Some(None),
        Some(Json::Array(parts)) => parts.iter().map(|p| p.as_str().map(str::to_owned)).collect::<Option<Vec<_>>>().map(Some),
        Some(_) => None,
    }
}

impl StoredOffset {
    pub fn parse(offset: &SourceOffset) -> ConnectResult<Self> {
        let lsn_of = |key: &str| -> ConnectResult<Option<Lsn>> {
            match offset.get(key) {
                None | Some(Json::Null) => Ok(None),
                Some(v) => v.as_u64().map(|n| Some(Lsn(n))).ok_or_else(|| {
                    ConnectError::fatal(format!("stored offset has a non-numeric {key}: {v}; reset the connector's offsets"))
                }),
            }
        };
        let lsn = lsn_of("lsn")?
            .ok_or_else(|| ConnectError::fatal(format!("stored offset {offset:?} has no lsn; reset the connector's offsets")))?;
        let flag = |key: &str| offset.get(key) == Some(&Json::Bool(true));
        let snapshot = match offset.get("snapshot") {
            Some(Json::Bool(true)) if flag("last_snapshot_record") => SnapshotState::Completed,
            Some(Json::Bool(true)) => SnapshotState::InProgress,
            // Debezium 3 names the kind: its initial snapshot, as sluice's `true`.
            Some(Json::String(kind)) if kind == "INITIAL" => {
                if flag("last_snapshot_record") || flag("snapshot_completed") {
                    SnapshotState::Completed
                } else {
                    SnapshotState::InProgress
                }
            }
            // A blocking snapshot's records carry the stream position where it was asked for
            // (sluice's, before its last record, one that reads the signal again).
            _ => SnapshotState::None,
        };
        Ok(Self {
            lsn,
            lsn_commit: lsn_of("lsn_commit")?,
            lsn_proc: lsn_of("lsn_proc")?,
            txn_seq: offset.get("txn_seq").and_then(Json::as_u64),
            tx_id: offset.get("txId").and_then(Json::as_i64),
            snapshot_position: if snapshot == SnapshotState::InProgress { SnapshotPosition::parse(offset) } else { None },
            snapshot,
        })
    }

    /// Where streaming resumes: every transaction committing at or after it is resent.
    pub fn resume_lsn(&self) -> Lsn {
        self.lsn_commit.unwrap_or(self.lsn)
    }

    /// The changes already durable inside the transaction streaming resumes in.
    pub fn skip(&self) -> Option<Skip> {
        match (self.lsn_commit, self.txn_seq, self.lsn_proc) {
            (Some(commit_lsn), Some(seq), _) => Some(Skip::seq(commit_lsn, seq)),
            // Written by Debezium: `lsn_commit` is the end of the last transaction it finished
            // (streaming resumes after it) and `lsn_proc` the last change it processed. When
            // that change belongs to a transaction it did not finish, that transaction is the
            // first one streamed, and its changes up to `lsn_proc` are skipped, as Debezium's
            // own `WalPositionLocator` skips them on restart.
            (Some(commit_lsn), None, Some(proc)) if proc != commit_lsn => {
                Some(Skip { commit_lsn: None, through_seq: 0, through_lsn: Some(proc) })
            }
            _ => None,
        }
    }
}

/// Changes of one transaction that were already handed out: dropped when it is resent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Skip {
    /// The transaction, by the commit LSN its BEGIN announces; `None` for "the first
    /// transaction streamed", bound to it at its BEGIN ([`Skip::begin`]).
    pub commit_lsn: Option<Lsn>,
    /// sluice's offsets: the changes with an ordinal up to this one.
    pub through_seq: u64,
    /// Debezium's offsets: the changes at or before its `lsn_proc`.
    pub through_lsn: Option<Lsn>,
}

impl Skip {
    /// After sluice's own record with ordinal `through_seq` in the transaction at `commit_lsn`.
    pub fn seq(commit_lsn: Lsn, through_seq: u64) -> Self {
        Self { commit_lsn: Some(commit_lsn), through_seq, through_lsn: None }
    }

    /// A BEGIN arrived: a skip meant for the first transaction streamed is now this one's.
    pub fn begin(&mut self, final_lsn: Lsn) {
        self.commit_lsn.get_or_insert(final_lsn);
    }

    /// Whether the change with ordinal `seq` at `lsn` of the transaction committing at
    /// `commit_lsn` is durable already.
    pub fn covers(&self, commit_lsn: Lsn, seq: u64, lsn: Lsn) -> bool {
        self.commit_lsn == Some(commit_lsn) && (seq <= self.through_seq || self.through_lsn.is_some_and(|p| lsn <= p))
    }
}

pub fn snapshot_offset(lsn: Lsn, tx_id: Option<i64>, ts_usec: i64, last: bool, position: Option<&SnapshotPosition>) -> SourceOffset {
    let mut o = SourceOffset::with_capacity(8);
    o.insert("lsn".into(), json!(lsn.0));
    o.insert("txId".into(), json!(tx_id));
    o.insert("ts_usec".into(), json!(ts_usec));
    o.insert("snapshot".into(), json!(true));
    o.insert("last_snapshot_record".into(), json!(last));
    if let Some(p) = position {
        p.write(&mut o);
    }
    o
}

/// Marks an offset as a blocking snapshot's record, as Debezium does (`snapshot: "BLOCKING"`;
/// the last record of the snapshot sets `last_snapshot_record` and `snapshot_completed`).
pub fn mark_blocking(o: &mut SourceOffset) {
    o.insert("snapshot".into(), json!("BLOCKING"));
    o.insert("last_snapshot_record".into(), json!(false));
    o.insert("snapshot_completed".into(), json!(false));
}

pub fn change_offset(lsn: Lsn, commit_lsn: Lsn, tx_id: i64, ts_usec: i64, txn_seq: u64) -> SourceOffset {
    let mut o = SourceOffset::with_capacity(6);
    o.insert("lsn".into(), json!(lsn.0));
    o.insert("lsn_proc".into(), json!(lsn.0));
    o.insert("lsn_commit".into(), json!(commit_lsn.0));
    o.insert("txId".into(), json!(tx_id));
    o.insert("ts_usec".into(), json!(ts_usec));
    o.insert("txn_seq".into(), json!(txn_seq));
    o
}

/// The offset of a transaction's END record: streaming resumes after the commit.
pub fn transaction_end_offset(end_lsn: Lsn, tx_id: i64, ts_usec: i64) -> SourceOffset {
    let mut o = SourceOffset::with_capacity(3);
    o.insert("lsn".into(), json!(end_lsn.0));
    o.insert("txId".into(), json!(tx_id));
    o.insert("ts_usec".into(), json!(ts_usec));
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

/// What may be confirmed: the records handed out and not yet reported durable.
///
/// "Durable" is recognised by offset equality: the runtime reports the newest offset of a
/// polled batch, and the last record of a batch has an offset no earlier record shares
/// outside that batch (the records of one change, such as a key change's delete,
/// tombstone and create, share an offset but always travel in one batch).
#[derive(Debug, Default)]
pub struct Progress {
    confirmed: Confirmed,
    /// Offset of the newest record handed out, until an equal offset is reported durable.
    pending: Option<SourceOffset>,
}

impl Progress {
    pub fn new(confirmed: Lsn) -> Self {
        Self { confirmed: Confirmed::new(confirmed), ..Self::default() }
    }

    pub fn confirmed(&self) -> Lsn {
        self.confirmed.get()
    }

    /// Whether every record handed out is durable.
    #[cfg(test)]
    pub fn drained(&self) -> bool {
        self.pending.is_none()
    }

    /// A batch was handed out; `newest` is the offset of its last record.
    pub fn handed(&mut self, newest: Option<&SourceOffset>) {
        if let Some(o) = newest {
            self.pending = Some(o.clone());
        }
    }

    /// The runtime stored everything up to `durable`. Returns the LSN to confirm now, if
    /// any: the stored offset's resume position, never more, so the slot is never ahead of
    /// the stored offset (Debezium refuses a slot whose restart LSN passed its offset).
    pub fn committed(&mut self, durable: &SourceOffset) -> ConnectResult<Option<Lsn>> {
        let resume = StoredOffset::parse(durable)?.resume_lsn();
        if self.pending.as_ref() == Some(durable) {
            self.pending = None;
        }
        Ok(self.confirmed.advance(resume))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_stored_positions_are_confirmed_and_never_backwards() {
        let first = change_offset(Lsn(100), Lsn(120), 1, 0, 1);
        let second = change_offset(Lsn(205), Lsn(208), 2, 0, 1);
        let idle = heartbeat_offset(Lsn(230), 0);
        let mut p = Progress::new(Lsn(50));
        p.handed(Some(&first));
        p.handed(Some(&second));
        assert_eq!(p.committed(&first).unwrap(), Some(Lsn(120)), "only the stored offset's position");
        assert!(!p.drained());
        assert_eq!(p.committed(&second).unwrap(), Some(Lsn(208)));
        assert!(p.drained());
        // A keepalive's offset-only record is confirmed when it is stored, not before.
        p.handed(Some(&idle));
        assert_eq!(p.confirmed(), Lsn(208));
        assert_eq!(p.committed(&idle).unwrap(), Some(Lsn(230)));
        // An older commit never moves it back, nor makes it pending.
        assert_eq!(p.committed(&first).unwrap(), None);
        assert_eq!(p.confirmed(), Lsn(230));
        assert!(p.drained());
    }

    #[test]
    fn an_empty_batch_changes_nothing() {
        let o = change_offset(Lsn(100), Lsn(120), 1, 0, 1);
        let mut p = Progress::new(Lsn(0));
        p.handed(Some(&o));
        p.handed(None);
        assert!(!p.drained());
        assert_eq!(p.committed(&o).unwrap(), Some(Lsn(120)));
        assert!(p.drained());
    }

    #[test]
    fn debeziums_named_snapshot_kinds() {
        let parse = |v: Json| StoredOffset::parse(v.as_object().unwrap()).unwrap();
        // Debezium 3's initial snapshot, in progress and done.
        let o = parse(json!({"lsn": 10, "txId": 1, "ts_usec": 1, "snapshot": "INITIAL", "last_snapshot_record": false, "snapshot_completed": false}));
        assert_eq!((o.snapshot, o.snapshot_position), (SnapshotState::InProgress, None));
        let o = parse(json!({"lsn": 10, "txId": 1, "ts_usec": 1, "snapshot": "INITIAL", "last_snapshot_record": true, "snapshot_completed": true}));
        assert_eq!(o.snapshot, SnapshotState::Completed);
        // A blocking snapshot's record: a stream position (here sluice's, before the signal).
        let o = parse(json!({"lsn": 99, "lsn_proc": 99, "lsn_commit": 120, "txId": 3, "ts_usec": 1, "txn_seq": 1,
            "snapshot": "BLOCKING", "last_snapshot_record": false, "snapshot_completed": false}));
        assert_eq!(o.snapshot, SnapshotState::None);
        assert_eq!((o.resume_lsn(), o.skip()), (Lsn(120), Some(Skip::seq(Lsn(120), 1))));
    }

    #[test]
    fn confirmed_never_moves_back() {
        let mut c = Confirmed::new(Lsn(100));
        assert_eq!(c.advance(Lsn(90)), None);
        assert_eq!(c.advance(Lsn(100)), None);
        assert_eq!(c.advance(Lsn(150)), Some(Lsn(150)));
        assert_eq!(c.get(), Lsn(150));
    }

    #[test]
    fn a_debezium_offset_resumes_after_its_last_processed_change() {
        // Debezium finished the transaction ending at 400 and processed a change at 300 of the
        // next one (which began before 400 committed).
        let written = json!({"transaction_id": null, "lsn_proc": 300, "messageType": "UPDATE", "lsn_commit": 400, "lsn": 300, "txId": 7, "ts_usec": 1});
        let o = StoredOffset::parse(written.as_object().unwrap()).unwrap();
        assert_eq!(o.resume_lsn(), Lsn(400));
        let mut skip = o.skip().expect("a Debezium offset inside a transaction skips what it processed");
        skip.begin(Lsn(450));
        assert!(skip.covers(Lsn(450), 1, Lsn(250)));
        assert!(skip.covers(Lsn(450), 3, Lsn(300)));
        assert!(!skip.covers(Lsn(450), 4, Lsn(310)), "a change after lsn_proc is sent");
        skip.begin(Lsn(600));
        assert!(!skip.covers(Lsn(600), 1, Lsn(100)), "a later transaction is sent whole");
        // After a whole transaction (lsn_proc = lsn_commit) nothing streamed was processed.
        let done = json!({"lsn_proc": 400, "lsn_commit": 400, "lsn": 400, "txId": 7, "ts_usec": 1});
        assert_eq!(StoredOffset::parse(done.as_object().unwrap()).unwrap().skip(), None);
        // sluice's own ordinal wins where both are written.
        let ours = StoredOffset::parse(&change_offset(Lsn(10), Lsn(20), 7, 1, 3)).unwrap();
        assert_eq!(ours.skip(), Some(Skip::seq(Lsn(20), 3)));
        assert!(!ours.skip().unwrap().covers(Lsn(20), 4, Lsn(10)));
    }

    #[test]
    fn offsets_round_trip() {
        let o = StoredOffset::parse(&change_offset(Lsn(10), Lsn(20), 7, 1, 3)).unwrap();
        assert_eq!(o.resume_lsn(), Lsn(20));
        assert_eq!(o.skip(), Some(Skip::seq(Lsn(20), 3)));
        assert_eq!(o.snapshot, SnapshotState::None);
        let s = StoredOffset::parse(&snapshot_offset(Lsn(5), Some(1), 1, false, None)).unwrap();
        assert_eq!((s.snapshot, s.resume_lsn(), s.skip(), s.snapshot_position), (SnapshotState::InProgress, Lsn(5), None, None));
        let t = |name: &str| TableId { schema: "public".into(), table: name.into() };
        let at = SnapshotPosition {
            through: t("t.x"),
            open: BTreeMap::from([(t("a"), Some(vec!["7".into(), "a'b".into()])), (t("nopk"), None), (t("t.x"), Some(vec!["1".into()]))]),
        };
        let o = snapshot_offset(Lsn(5), Some(1), 1, false, Some(&at));
        assert_eq!(o["snapshot_table"], json!(["public", "t.x"]));
        assert_eq!(o["snapshot_key"], json!(["1"]));
        let s = StoredOffset::parse(&o).unwrap();
        assert_eq!(s.snapshot_position, Some(at.clone()));
        let at = s.snapshot_position.unwrap();
        assert_eq!(at.of(&t("a")), TableProgress::After(Some(vec!["7".into(), "a'b".into()])));
        assert_eq!(at.of(&t("b")), TableProgress::Finished, "ordered before the newest started, not open");
        assert_eq!(at.of(&t("nopk")), TableProgress::After(None));
        assert_eq!(at.of(&t("z")), TableProgress::After(None), "not started");
        // The newest table started is finished while an older one is still open.
        let done = SnapshotPosition { through: t("m"), open: BTreeMap::from([(t("a"), None)]) };
        let o = snapshot_offset(Lsn(5), Some(1), 1, false, Some(&done));
        assert_eq!(o["snapshot_key"], Json::Null);
        let s = StoredOffset::parse(&o).unwrap().snapshot_position.unwrap();
        assert_eq!((s.of(&t("m")), s.of(&t("a"))), (TableProgress::Finished, TableProgress::After(None)));
        let s = StoredOffset::parse(&snapshot_offset(Lsn(5), None, 1, true, Some(&done))).unwrap();
        assert_eq!((s.snapshot, s.snapshot_position), (SnapshotState::Completed, None));
    }

    #[test]
    fn offsets_of_the_single_table_version_still_resume() {
        let t = |name: &str| TableId { schema: "public".into(), table: name.into() };
        let mut old = snapshot_offset(Lsn(5), Some(1), 1, false, None);
        old.insert("snapshot_table".into(), json!(["public", "m"]));
        old.insert("snapshot_key".into(), json!(["7", "x"]));
        let at = StoredOffset::parse(&old).unwrap().snapshot_position.unwrap();
        assert_eq!(at.of(&t("a")), TableProgress::Finished);
        assert_eq!(at.of(&t("m")), TableProgress::After(Some(vec!["7".into(), "x".into()])));
        assert_eq!(at.of(&t("n")), TableProgress::After(None));
        old.insert("snapshot_key".into(), Json::Null);
        let at = StoredOffset::parse(&old).unwrap().snapshot_position.unwrap();
        assert_eq!(at.of(&t("m")), TableProgress::After(None), "a table without primary key is read again");
        assert_eq!(StoredOffset::parse(&heartbeat_offset(Lsn(9), 1)).unwrap().resume_lsn(), Lsn(9));
    }
}
