//! The initial snapshot: every included table read inside `REPEATABLE READ` transactions
//! that share one snapshot, each table in primary-key order through a cursor fetched
//! `snapshot.fetch.size` rows at a time (at most `max.batch.size`), up to
//! `snapshot.max.threads` tables at once, each on a session of its own; each record's
//! offset says how far the snapshot got, so a restart resumes after the last durable
//! records instead of starting over.
//!
//! ```text
//!  session 1 ─┐  (imports or exports the snapshot; takes the next table when done)
//!  session 2 ─┼─▶ bounded channel: Started(t) · rows of t · Finished(t) ─▶ next_batch:
//!  session N ─┘                                   records, offsets, first/last marks
//! ```
//!
//! Records are `op: "r"`; `source.snapshot` is `first` for the first, `last` for the last,
//! `first_in_data_collection` / `last_in_data_collection` for each table's first and last
//! (with several sessions, a table's last record may go out as `true` when a record of another
//! table came after it) and `true` in between; offsets carry `snapshot: true`, `last_snapshot_record` and where
//! the snapshot stands after that record (`snapshot_table`, `snapshot_key`,
//! `snapshot_open_tables`; see `offset.rs`). One record is held back so the last one can
//! be marked. With several sessions the records of the tables read at once interleave in
//! the output; each table's own records stay in primary-key order.
//!
//! ## Progress with tables read at once
//!
//! A session takes the next table, in `(schema, table)` order, and sends `Started` under
//! the lock of the table queue, so `Started` messages reach the channel in table order;
//! after them come the table's rows and `Finished`, through the same channel. The reader
//! keeps, as it hands records out, the newest table started and every started,
//! unfinished table with the key of its last record handed out; the offset of each record
//! is that state at that record. The runtime stores the newest offset of a durable
//! prefix, so after a crash each table is, by the stored offset: finished (all its
//! records were in the prefix), open (resumed after its key; `null`: from its start), or
//! not started. Memory stays bounded: each session holds at most one fetch, the channel
//! holds at most one fetch per session, and the reader one more.
//!
//! ## Which snapshot is read
//!
//! The first run reads the snapshot the slot exported when it was created, so streaming
//! from the slot's consistent point `L0` continues exactly after it. That snapshot dies
//! with the session that exported it: a resumed run reads the remaining rows at a newer
//! snapshot `S1`, then streams from `L0` all the same (the slot never moves past `L0`
//! before the last snapshot record is durable). Every session of one run reads the same
//! snapshot: each runs `BEGIN ISOLATION LEVEL REPEATABLE READ; SET TRANSACTION SNAPSHOT
//! '<id>'` before any query, with the slot's exported id (first run; the replication
//! session that exported it stays open until the snapshot is done), or the id the first
//! session's transaction exports with `pg_export_snapshot()` (a resumed run, or a slot
//! that existed already: that transaction stays open until every session imported it).
//! So `S1` below is one snapshot for all tables, as `L0` is:
//!
//! ```text
//!  WAL ──L0─────────────────S1─────────────────────▶
//!        │ run 1: exported   │ run 2 (after a crash): new snapshot S1
//!        │ snapshot at L0    │
//!  table t: keys ≤ K read at L0 (durable)    keys > K read at S1
//!  stream from L0: every change after L0, to rows of both parts
//! ```
//!
//! - Rows up to the durable key `K` were read at `L0`; their changes after `L0` arrive
//!   through the stream, as without a crash. Tables finished in run 1 are not read again;
//!   each open table continues after its own durable key.
//! - Rows after `K` are read at `S1`, which already holds the changes between `L0` and
//!   `S1`; the stream then delivers those changes again. A key-based consumer ends in the
//!   same state per key, but may see, for such a row, the `r` at its `S1` state followed
//!   by the older `c`/`u`/`d` events between `L0` and `S1` that lead to the same state.
//!   A row deleted between `L0` and `S1` is not read; its delete arrives by the stream.
//! - Records handed out but not durable at the crash are read again (at `S1`): a key may
//!   appear as `r` once per crash; never a finished table again.
//! - A table without a primary key has no order to resume in: an interrupted one is read
//!   again from its start (its rows may appear twice), finished tables are not.
//! - Tables are started in `(schema, table)` order; on resume the tables ordered up to the
//!   newest one started count as done unless the offset lists them as open. A table that
//!   appears, or enters the include list, in between and sorts there is not snapshotted
//!   (its rows written after `L0` still arrive through the stream).

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use pgwire_replication::Lsn;
use sluice_api::{ConnectError, ConnectResult, SchemaRef, SourceOffset, SourcePartition, SourceRecord};
use tokio::sync::{mpsc, Mutex};
use tokio::task::JoinSet;
use tokio_postgres::{Client, SimpleQueryMessage};

use super::catalog::{self, quote_ident, quote_literal, TableId, TypeResolver};
use super::column::ColumnRules;
use super::config::PostgresConfig;
use super::decode::Datum;
use super::envelope::{now_ms, Row, SharedTable, SourceInfo, TableSchema};
use super::mapping::Modes;
use super::offset::{snapshot_offset, SnapshotPosition, TableProgress};

pub struct SnapshotReader {
    rx: mpsc::Receiver<Msg>,
    /// The sessions reading tables; dropping the reader aborts them (and so ends their
    /// transactions).
    workers: JoinSet<()>,
    /// Where the snapshot stands after the records handed out (`None`: no table started).
    position: Option<SnapshotPosition>,
    /// The rest of the rows received last.
    chunk: Option<(SharedTable, std::vec::IntoIter<Fetched>)>,
    lsn: Lsn,
    tx_id: Option<i64>,
    ts_ms: i64,
    held: Option<Held>,
    emitted: u64,
    resumed: bool,
    /// Tables started from their first row whose first record is still to come.
    fresh: std::collections::BTreeSet<TableId>,
    finished: bool,
    /// A session failed: every later call fails the same way (its table was not read).
    failed: Option<(bool, String)>,
    source_schema: SchemaRef,
    partition: SourcePartition,
    blocking: Option<Blocking>,
}

/// A row read, with the text form of its primary key columns (`None`: no primary key).
type Fetched = (Row, Option<Vec<String>>);

enum Msg {
    Started { table: TableId, after: Option<Vec<String>> },
    Rows { table: SharedTable, rows: Vec<Fetched> },
    Finished(TableId),
    Failed(ConnectError),
}

struct Held {
    table: SharedTable,
    row: Row,
    /// The offset at this record (`last_snapshot_record` set when it turns out last).
    offset: SourceOffset,
    /// The first record of a table read from its start (`first_in_data_collection`).
    first_of_table: bool,
    /// Its table finished while it was held: the table's last (`last_in_data_collection`).
    last_of_table: bool,
}

/// A blocking snapshot (an `execute-snapshot` signal of type blocking, as Debezium's):
/// streaming stopped just after the signal and goes on from there once the last record is
/// handed out. Its records carry the signal's stream position: in `source` (lsn, txId,
/// sequence, beside the snapshot's own `ts_ms` and markers) and in their offsets, with
/// `snapshot: "BLOCKING"`. Every record but the last has the offset `before` (up to the
/// change before the signal), so a restart reads the signal again and the snapshot runs
/// again from its start; the last has `after` (past the signal).
#[derive(Clone, Debug)]
pub struct Blocking {
    pub lsn: Lsn,
    pub tx_id: i64,
    pub sequence: String,
    pub before: SourceOffset,
    pub after: SourceOffset,
    /// `additional-conditions`: the SELECT statement that reads a table (its columns are
    /// taken by name from what it returns).
    pub selects: BTreeMap<TableId, String>,
}

pub struct SnapshotSettings {
    pub prefix: String,
    pub db: String,
    pub modes: Modes,
    pub fetch_size: usize,
    /// `snapshot.max.threads`: the most tables read at once, each on a session of its own.
    pub threads: usize,
    pub source_schema: SchemaRef,
    pub partition: SourcePartition,
    pub rules: Arc<ColumnRules>,
    pub blocking: Option<Blocking>,
}

/// What the sessions share: the tables left, in order, and how to read them.
struct Shared {
    queue: Mutex<VecDeque<(TableId, Option<Vec<String>>)>>,
    settings: SnapshotSettings,
}

impl SnapshotReader {
    /// Opens the snapshot transactions: on `client` (a session of its own) and, with more
    /// than one table to read and `snapshot.max.threads` above 1, on up to that many
    /// sessions in all, every one on the same snapshot. With `exported`, that is the slot's
    /// exported snapshot; without, a snapshot of its own (then streaming from `lsn` may
    /// resend changes the snapshot already holds). With `resume`, finished tables are
    /// skipped and open ones continue after their key.
    pub async fn begin(
        cfg: &PostgresConfig,
        client: Client,
        mut tables: Vec<TableId>,
        exported: Option<&str>,
        lsn: Lsn,
        resume: Option<SnapshotPosition>,
        s: SnapshotSettings,
    ) -> ConnectResult<Self> {
        let mut sql = String::from("BEGIN ISOLATION LEVEL REPEATABLE READ;");
        if let Some(name) = exported {
            sql.push_str(&catalog::set_snapshot_sql(name));
            sql.push(';');
        }
        client.batch_execute(&sql).await.map_err(|e| catalog::query_error("starting the snapshot transaction", e))?;
        let row = client
            .query_one("SELECT txid_current()", &[])
            .await
            .map_err(|e| catalog::query_error("reading the snapshot transaction id", e))?;
        let tx_id: i64 = s.blocking.as_ref().map_or_else(|| row.get(0), |b| b.tx_id);
        tables.sort();
        let queue: VecDeque<(TableId, Option<Vec<String>>)> = tables
            .into_iter()
            .filter_map(|t| match resume.as_ref().map_or(TableProgress::After(None), |r| r.of(&t)) {
                TableProgress::Finished => None,
                TableProgress::After(after) => Some((t, after)),
            })
            .collect();
        if let (Some(timeout), false) = (cfg.snapshot_lock_timeout_ms, queue.is_empty()) {
            // snapshot.locking.mode=shared: held by the first session until the snapshot ends.
            let names: Vec<String> = queue.iter().map(|(t, _)| t.quoted()).collect();
            let lock = format!("SET LOCAL lock_timeout = {timeout}; LOCK TABLE {} IN ACCESS SHARE MODE", names.join(", "));
            client.batch_execute(&lock).await.map_err(|e| catalog::query_error("locking the snapshot's tables (snapshot.locking.mode=shared)", e))?;
            tracing::info!(tables = names.len(), "snapshot tables locked in ACCESS SHARE mode until the snapshot ends");
        }
        let sessions = s.threads.min(queue.len()).max(1);
        let mut clients = vec![client];
        if sessions > 1 {
            let name = match exported {
                Some(name) => name.to_owned(),
                None => clients[0]
                    .query_one("SELECT pg_export_snapshot()", &[])
                    .await
                    .map_err(|e| catalog::query_error("exporting the snapshot to the other snapshot sessions", e))?
                    .get(0),
            };
            let import = format!("BEGIN ISOLATION LEVEL REPEATABLE READ;{};", catalog::set_snapshot_sql(&name));
            for _ in 1..sessions {
                let c = catalog::connect(cfg).await.map_err(|(_, e)| e)?;
                c.batch_execute(&import).await.map_err(|e| catalog::query_error("joining the snapshot on another session", e))?;
                clients.push(c);
            }
        }
        tracing::info!(tables = queue.len(), sessions, %lsn, exported = exported.is_some(), resumed = resume.is_some(), "snapshot started");
        let (tx, rx) = mpsc::channel(sessions);
        let shared = Arc::new(Shared { queue: Mutex::new(queue), settings: s });
        let mut workers = JoinSet::new();
        for (n, client) in clients.into_iter().enumerate() {
            let (shared, tx) = (shared.clone(), tx.clone());
            workers.spawn(async move {
                if let Err(e) = read_tables(&client, &shared, &tx).await {
                    tracing::warn!(session = n, error = %e, "snapshot session failed");
                    let _ = tx.send(Msg::Failed(e)).await;
                }
            });
        }
        let settings = &shared.settings;
        let ts_ms = now_ms();
        let blocking = settings.blocking.clone().map(|mut b| {
            // Debezium's offsets of snapshot records carry the snapshot's start.
            for o in [&mut b.before, &mut b.after] {
                o.insert("ts_usec".into(), serde_json::json!(ts_ms * 1000));
            }
            b
        });
        Ok(Self {
            rx,
            workers,
            resumed: resume.is_some(),
            fresh: Default::default(),
            position: resume,
            chunk: None,
            lsn,
            tx_id: Some(tx_id),
            ts_ms,
            held: None,
            emitted: 0,
            finished: false,
            failed: None,
            source_schema: settings.source_schema.clone(),
            partition: settings.partition.clone(),
            blocking,
        })
    }

    /// The position streaming continues from once the snapshot is done.
    pub fn lsn(&self) -> Lsn {
        self.lsn
    }

    /// Whether a session failed in a way a new reader can get past (a lost connection).
    pub fn lost_a_session(&self) -> bool {
        matches!(self.failed, Some((true, _)))
    }

    /// Up to `max` records; `None` once every record (the last included) was returned.
    /// Waits for the first record; returns with what has arrived after that.
    pub async fn next_batch(&mut self, max: usize) -> ConnectResult<Option<Vec<SourceRecord>>> {
        if let Some((retriable, message)) = &self.failed {
            let message = format!("the snapshot failed earlier: {message}");
            return Err(if *retriable { ConnectError::retriable(message) } else { ConnectError::fatal(message) });
        }
        if self.finished {
            return Ok(None);
        }
        let mut out = Vec::with_capacity(max.min(1024));
        while out.len() < max {
            if let Some((table, rows)) = &mut self.chunk {
                if let Some((row, key)) = rows.next() {
                    let table = table.clone();
                    self.hand(table, row, key, &mut out);
                    continue;
                }
                self.chunk = None;
            }
            let msg = if out.is_empty() {
                self.rx.recv().await
            } else {
                match self.rx.try_recv() {
                    Ok(m) => Some(m),
                    Err(mpsc::error::TryRecvError::Empty) => break,
                    Err(mpsc::error::TryRecvError::Disconnected) => None,
                }
            };
            match msg {
                Some(Msg::Started { table, after }) => {
                    if after.is_none() {
                        self.fresh.insert(table.clone());
                    }
                    let p = self.position.get_or_insert_with(|| SnapshotPosition { through: table.clone(), open: BTreeMap::new() });
                    p.through = p.through.clone().max(table.clone());
                    p.open.insert(table, after);
                }
                Some(Msg::Rows { table, rows }) => self.chunk = Some((table, rows.into_iter())),
                Some(Msg::Finished(table)) => {
                    if let Some(p) = &mut self.position {
                        p.open.remove(&table);
                    }
                    // With one session the held record is the table's last; with several, a
                    // record of another table may have come after it (then it goes out `true`).
                    if let Some(held) = self.held.as_mut().filter(|h| h.table.id == table) {
                        held.last_of_table = true;
                    }
                }
                Some(Msg::Failed(e)) => {
                    self.failed = Some((e.is_retriable(), e.to_string()));
                    self.workers.abort_all();
                    return Err(e);
                }
                None => {
                    // Every session ended; one that panicked sent no `Failed`.
                    while let Some(r) = self.workers.join_next().await {
                        if let Err(e) = r {
                            let e = ConnectError::fatal(format!("a snapshot session ended abnormally: {e}"));
                            self.failed = Some((false, e.to_string()));
                            return Err(e);
                        }
                    }
                    if let Some(held) = self.held.take() {
                        out.push(self.build(held, true));
                    }
                    self.finished = true;
                    tracing::info!(records = self.emitted, resumed = self.resumed, "snapshot completed");
                    return Ok(if out.is_empty() { None } else { Some(out) });
                }
            }
        }
        Ok(Some(out))
    }

    /// Takes a row into the snapshot's progress; the record held back before it goes out.
    fn hand(&mut self, table: SharedTable, row: Row, key: Option<Vec<String>>, out: &mut Vec<SourceRecord>) {
        let p = self.position.as_mut().expect("rows come after their table's Started");
        p.open.insert(table.id.clone(), key);
        let offset = match &self.blocking {
            Some(b) => b.before.clone(),
            None => snapshot_offset(self.lsn, self.tx_id, self.ts_ms * 1000, false, Some(p)),
        };
        let first_of_table = self.fresh.remove(&table.id);
        if let Some(prev) = self.held.replace(Held { table, row, offset, first_of_table, last_of_table: false }) {
            out.push(self.build(prev, false));
        }
    }

    /// Debezium 3's `source.snapshot` markers, in its order of precedence: `last` for the
    /// snapshot's last record, `first` for its first, `last_in_data_collection` /
    /// `first_in_data_collection` for each table's last and first, `true` otherwise. The
    /// sequence is `[null,"<consistent point>"]`, as Debezium writes it for snapshot records.
    fn build(&mut self, held: Held, last: bool) -> SourceRecord {
        let marker = if last {
            "last"
        } else if self.emitted == 0 && !self.resumed {
            "first"
        } else if held.last_of_table {
            "last_in_data_collection"
        } else if held.first_of_table {
            "first_in_data_collection"
        } else {
            "true"
        };
        self.emitted += 1;
        let (lsn, sequence) = match &self.blocking {
            Some(b) => (b.lsn, b.sequence.clone()),
            None => (self.lsn, format!("[null,\"{}\"]", self.lsn.0)),
        };
        let info = SourceInfo { ts_ms: self.ts_ms, snapshot: marker, tx_id: self.tx_id, lsn: Some(lsn.0), sequence: Some(sequence) };
        let mut offset = match (&self.blocking, last) {
            (Some(b), true) => b.after.clone(),
            _ => held.offset,
        };
        if last {
            offset.insert("last_snapshot_record".into(), serde_json::Value::Bool(true));
            if self.blocking.is_some() {
                offset.insert("snapshot_completed".into(), serde_json::Value::Bool(true));
            }
        }
        held.table.record('r', Row::NONE, held.row, &info, &self.source_schema, &self.partition, offset)
    }
}

/// One session's loop: takes tables off the queue until it is empty, sends each table's
/// rows, then ends its transaction.
async fn read_tables(client: &Client, shared: &Shared, tx: &mpsc::Sender<Msg>) -> ConnectResult<()> {
    let s = &shared.settings;
    let mut resolver = TypeResolver::default();
    let mut cursor_no = 0;
    let fetch = s.fetch_size.max(1);
    loop {
        let (id, after) = {
            let mut queue = shared.queue.lock().await;
            let Some((id, after)) = queue.pop_front() else { break };
            // Sent under the lock: `Started` messages reach the reader in table order.
            if tx.send(Msg::Started { table: id.clone(), after: after.clone() }).await.is_err() {
                return Ok(()); // the reader is gone
            }
            (id, after)
        };
        cursor_no += 1;
        let cursor = format!("sluice_snapshot_{cursor_no}");
        let (table, key) = open(client, &mut resolver, s, &id, after, &cursor).await?;
        loop {
            let rows = client
                .simple_query(&format!("FETCH FORWARD {fetch} FROM {cursor}"))
                .await
                .map_err(|e| catalog::query_error(&format!("reading {id} for the snapshot"), e))?;
            let mut chunk = Vec::with_capacity(fetch.min(rows.len()));
            let mut datums: Vec<Datum> = Vec::new();
            for msg in &rows {
                if let SimpleQueryMessage::Row(row) = msg {
                    datums.clear();
                    datums.extend((0..row.len()).map(|i| row.get(i).map_or(Datum::Null, Datum::Text)));
                    let value = table.row(&datums)?;
                    let key_text = (!key.is_empty()).then(|| key.iter().map(|i| row.get(*i).unwrap_or_default().to_owned()).collect());
                    chunk.push((value, key_text));
                }
            }
            let msg = if chunk.is_empty() {
                client.batch_execute(&format!("CLOSE {cursor}")).await.map_err(|e| catalog::query_error("closing a snapshot cursor", e))?;
                Msg::Finished(id.clone())
            } else {
                Msg::Rows { table: table.clone(), rows: chunk }
            };
            let finished = matches!(msg, Msg::Finished(_));
            if tx.send(msg).await.is_err() {
                return Ok(());
            }
            if finished {
                break;
            }
        }
    }
    client.batch_execute("COMMIT").await.map_err(|e| catalog::query_error("ending the snapshot transaction", e))
}

/// Reads `id`'s columns and declares `cursor` over its rows after `after`, in key order.
/// Returns the table's schema and the tuple positions of its primary key columns, in key
/// order (empty: no primary key).
async fn open(
    client: &Client,
    resolver: &mut TypeResolver,
    s: &SnapshotSettings,
    id: &TableId,
    after: Option<Vec<String>>,
    cursor: &str,
) -> ConnectResult<(SharedTable, Arc<[usize]>)> {
    let cols = catalog::columns(client, id).await?;
    let specs = resolver.specs(client, &cols).await?;
    let mut key: Vec<(usize, usize)> = cols.iter().enumerate().filter_map(|(i, c)| c.pk_position.map(|p| (p, i))).collect();
    key.sort_unstable();
    let key: Arc<[usize]> = key.into_iter().map(|(_, i)| i).collect();
    let select = cols.iter().map(|c| quote_ident(&c.name)).collect::<Vec<_>>().join(", ");
    let custom = s.blocking.as_ref().and_then(|b| b.selects.get(id));
    let mut sql = match custom {
        // The user's statement, its columns taken by name in the table's order, its rows
        // in key order as every snapshot read here.
        Some(statement) => format!("SELECT {select} FROM ({}) AS sluice_selected", statement.trim().trim_end_matches(';')),
        None => format!("SELECT {select} FROM {}", id.quoted()),
    };
    if !key.is_empty() {
        let key_cols = key.iter().map(|i| quote_ident(&cols[*i].name)).collect::<Vec<_>>().join(", ");
        if let Some(after) = &after {
            if after.len() != key.len() {
                return Err(ConnectError::fatal(format!(
                    "the stored snapshot offset has a key of {} columns for {id}, whose primary key has {}; reset the connector's offsets",
                    after.len(),
                    key.len()
                )));
            }
            let values = after.iter().map(|v| quote_literal(v)).collect::<Vec<_>>().join(", ");
            sql.push_str(&format!(" WHERE ({key_cols}) > ({values})"));
        }
        sql.push_str(&format!(" ORDER BY {key_cols}"));
    }
    let declare = format!("DECLARE {cursor} NO SCROLL CURSOR FOR {sql}");
    client.batch_execute(&declare).await.map_err(|e| catalog::query_error(&format!("opening a snapshot cursor on {id}"), e))?;
    tracing::debug!(table = %id, resumed_after = ?after, "snapshotting table");
    let table = Arc::new(TableSchema::new(&s.prefix, &s.db, id.clone(), specs, &s.modes, &s.source_schema, &s.rules));
    Ok((table, key))
}
