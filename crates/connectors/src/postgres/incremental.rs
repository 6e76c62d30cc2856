//! Signals from the signal table and incremental snapshots (Debezium's ad hoc snapshots),
//! read with the DBLog watermark algorithm while streaming goes on.
//!
//! ```text
//!  user: INSERT INTO <signal.data.collection> (id, type, data)
//!        VALUES ('x', 'execute-snapshot', '{"data-collections": ["public.t"]}')
//!  stream ──▶ signal row ──▶ tables queued (captured tables only)
//!  poll:  INSERT <chunk>-open ─▶ SELECT chunk (pk > last AND pk <= max ORDER BY pk LIMIT n)
//!         ─▶ INSERT <chunk>-close          (three autocommit statements, on the catalog session)
//!  stream ──▶ <chunk>-open seen: the window opens
//!         ──▶ change to a key of the chunk: that row is dropped from the chunk (the change
//!             is newer than, or as new as, what the chunk read)
//!         ──▶ <chunk>-close seen: the chunk's remaining rows go out as op "r"
//!             (source.snapshot = "incremental"), then the next chunk is read
//! ```
//!
//! Progress: while an incremental snapshot runs, every record's offset carries
//! `incremental_snapshot_collections` (Debezium's JSON list of the tables left, the one being
//! read first), `incremental_snapshot_primary_key` (the key of the last row read and
//! handed out) and `incremental_snapshot_maximum_key` (the table's largest key when its
//! snapshot started); both keys are written as Debezium writes them (the hex of a
//! Java-serialized `Object[]`, see `java_keys`) where their types allow, so an offset moves
//! between the two mid-snapshot. Each `r` record carries its own key, so a restart (or a
//! crash) resumes after the last durable row instead of at the start: the rest of the
//! interrupted chunk is read again in a new window. Watermark rows of the interrupted run
//! are ignored (their chunk id is not the current one).
//!
//! An `execute-snapshot` of type `blocking` is not an incremental snapshot: the stream acts
//! on it (replication.rs) and the task reads the tables while streaming waits (snapshot.rs).

use std::collections::{BTreeMap, HashSet, VecDeque};

use pgwire_replication::Lsn;
use serde_json::{json, Value as Json};
use sluice_api::{ConnectError, ConnectResult, SchemaRef, SourceOffset, SourcePartition, SourceRecord};
use tokio_postgres::{Client, SimpleQueryMessage};

use super::java_keys;
use super::catalog::{self, quote_ident, quote_literal, TableId, TypeResolver};
use super::config::PostgresConfig;
use super::decode::Datum;
use super::envelope::{now_ms, ColumnSpec, Row, SharedTable, SourceInfo, TableSchema};
use super::mapping::{Modes, PgType};

pub const COLLECTIONS: &str = "incremental_snapshot_collections";
pub const PRIMARY_KEY: &str = "incremental_snapshot_primary_key";
pub const MAXIMUM_KEY: &str = "incremental_snapshot_maximum_key";

const OPEN_SUFFIX: &str = "-open";
const CLOSE_SUFFIX: &str = "-close";

/// One row inserted into the signal table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signal {
    pub id: String,
    pub kind: String,
    pub data: Option<String>,
}

/// What a signal asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// `execute-snapshot` of type incremental: the data-collection expressions, and the
    /// `additional-conditions` as (data-collection expression, SQL filter) pairs.
    Execute(Vec<String>, Vec<(String, String)>),
    /// `execute-snapshot` of type blocking: streaming stops while the tables are read in one
    /// go, then goes on (see `blocking` in snapshot.rs). Each `additional-conditions` filter is
    /// the whole SELECT statement that reads its table, as in Debezium.
    Blocking(Vec<String>, Vec<(String, String)>),
    /// `stop-snapshot`: the data-collection expressions (empty: all).
    Stop(Vec<String>),
    Pause,
    Resume,
    WindowOpen(String),
    WindowClose(String),
    Log(String),
    /// A signal this version does not act on, with the reason (logged as an error).
    Rejected(String),
}

impl Signal {
    /// Reads a signal from a tuple of the signal table; `columns` are the positions of `id`,
    /// `type` and `data`.
    pub fn from_tuple(datums: &[Datum], columns: [usize; 3]) -> Option<Self> {
        let text = |i: usize| match datums.get(i) {
            Some(Datum::Text(t)) => Some((*t).to_owned()),
            _ => None,
        };
        Some(Self { id: text(columns[0])?, kind: text(columns[1])?, data: text(columns[2]) })
    }

    pub fn action(&self) -> Action {
        let data = match self.data.as_deref().map(str::trim).filter(|d| !d.is_empty()) {
            None => Json::Null,
            Some(d) => match serde_json::from_str::<Json>(d) {
                Ok(v) => v,
                Err(e) => return Action::Rejected(format!("signal {:?} ({}): data is not JSON: {e}", self.id, self.kind)),
            },
        };
        let collections = || -> Result<Vec<String>, String> {
            match data.get("data-collections") {
                None | Some(Json::Null) => Ok(Vec::new()),
                Some(Json::Array(items)) => items
                    .iter()
                    .map(|v| v.as_str().map(|s| s.trim().to_owned()).ok_or_else(|| format!("data-collections holds a non-string {v}")))
                    .collect(),
                Some(other) => Err(format!("data-collections must be an array of table names, not {other}")),
            }
        };
        let kind = data.get("type").and_then(Json::as_str).map(str::to_ascii_lowercase);
        let blocking = kind.as_deref() == Some("blocking");
        let incremental = || match kind.as_deref() {
            None | Some("incremental") => Ok(()),
            Some("blocking") => Err("stop-snapshot stops incremental snapshots only (a blocking snapshot runs to its end)".to_owned()),
            Some(other) => Err(format!("unknown snapshot type {other:?}; use incremental or blocking")),
        };
        let non_empty = |key: &str| data.get(key).is_some_and(|v| !v.is_null() && v != &json!([]) && v != &json!({}) && v != &json!(""));
        let rejected = |why: String| Action::Rejected(format!("signal {:?} ({}) ignored: {why}", self.id, self.kind));
        match self.kind.as_str() {
            "execute-snapshot" => {
                if !blocking {
                    if let Err(why) = incremental() {
                        return rejected(why);
                    }
                }
                for key in ["additional-condition", "surrogate-key"] {
                    if non_empty(key) {
                        return rejected(format!("{key} is not supported yet (use additional-conditions for a filter)"));
                    }
                }
                let mut conditions = Vec::new();
                match data.get("additional-conditions") {
                    None | Some(Json::Null) => {}
                    Some(Json::Array(items)) => {
                        for item in items {
                            match (item.get("data-collection").and_then(Json::as_str), item.get("filter").and_then(Json::as_str)) {
                                (Some(c), Some(f)) if !f.trim().is_empty() => conditions.push((c.trim().to_owned(), f.trim().to_owned())),
                                _ => return rejected(format!("additional-conditions entry {item} needs data-collection and filter")),
                            }
                        }
                    }
                    Some(other) => return rejected(format!("additional-conditions must be an array, not {other}")),
                }
                match collections() {
                    Ok(c) if c.is_empty() => rejected("data-collections is empty".to_owned()),
                    Ok(c) if blocking => Action::Blocking(c, conditions),
                    Ok(c) => Action::Execute(c, conditions),
                    Err(why) => rejected(why),
                }
            }
            "stop-snapshot" => match (incremental(), collections()) {
                (Err(why), _) | (_, Err(why)) => rejected(why),
                (Ok(()), Ok(c)) => Action::Stop(c),
            },
            "pause-snapshot" => Action::Pause,
            "resume-snapshot" => Action::Resume,
            "snapshot-window-open" => Action::WindowOpen(self.id.strip_suffix(OPEN_SUFFIX).unwrap_or(&self.id).to_owned()),
            "snapshot-window-close" => Action::WindowClose(self.id.strip_suffix(CLOSE_SUFFIX).unwrap_or(&self.id).to_owned()),
            "log" => Action::Log(data.get("message").and_then(Json::as_str).unwrap_or_default().to_owned()),
            other => rejected(format!("unknown signal type {other:?}")),
        }
    }
}

/// Whether `pattern` (a regular expression over `schema.table`, case-insensitive, as
/// Debezium's data-collection expressions; a string that is not one is compared as is) names `t`.
fn names(pattern: &str, t: &TableId) -> bool {
    let name = t.to_string();
    match regex::RegexBuilder::new(&format!("^(?:{pattern})$")).case_insensitive(true).build() {
        Ok(re) => re.is_match(&name),
        Err(_) => name == pattern,
    }
}

/// The captured tables an `execute-snapshot` signal's data-collections name, each once, in
/// the order asked; a pattern that names none is logged and skipped.
pub fn requested(captured: &[TableId], patterns: &[String], signal: &str) -> Vec<TableId> {
    let mut out: Vec<TableId> = Vec::new();
    for pattern in patterns {
        let matched: Vec<&TableId> = captured.iter().filter(|t| names(pattern, t)).collect();
        if matched.is_empty() {
            tracing::warn!(signal, collection = %pattern, "execute-snapshot: no captured table matches; it is skipped");
        }
        for t in matched {
            if !out.contains(t) {
                out.push(t.clone());
            }
        }
    }
    out
}

/// The `additional-conditions` filter for `t`: the first entry whose data-collection names it.
pub fn condition_for<'c>(conditions: &'c [(String, String)], t: &TableId) -> Option<&'c str> {
    conditions.iter().find(|(pattern, _)| names(pattern, t)).map(|(_, f)| f.as_str())
}

/// Where the `r` records of a closing window go, and what their offsets are based on
/// (the offset of the close-window row in the stream).
pub struct Emit<'a> {
    pub base: SourceOffset,
    pub lsn: Lsn,
    pub tx_id: i64,
    pub source_schema: &'a SchemaRef,
    pub partition: &'a SourcePartition,
}

/// The state of incremental snapshots: the tables left and how far the current one got
/// (both in every offset while one runs), and the open chunk (only in memory).
#[derive(Clone, Default)]
pub struct Incremental {
    chunk_size: usize,
    collections: VecDeque<TableId>,
    /// `additional-conditions`: the SQL filter of a table's snapshot.
    conditions: BTreeMap<TableId, String>,
    /// The key of the last row of the current table handed out (or found superseded).
    last_key: Option<Vec<String>>,
    /// The table's largest key when its snapshot started: rows inserted later arrive by the stream.
    max_key: Option<Vec<String>>,
    paused: bool,
    window: Option<Window>,
    /// `read.only`: windows are not marked by watermark rows but by the server's WAL
    /// position (see [`Incremental::passed`]); nothing is written to the database.
    read_only: bool,
    /// The JDBC classes of the current table's key columns, once its columns were read: keys
    /// are then stored as Debezium stores them (`java_keys::encode`); before that, and for
    /// key types `java_keys` does not write, as JSON arrays of text forms.
    key_kinds: Option<Vec<java_keys::KeyKind>>,
}

#[derive(Clone)]
struct Window {
    id: String,
    open: bool,
    table: SharedTable,
    /// The chunk's rows in key order, with their keys' text forms.
    rows: Vec<(Vec<String>, Row)>,
    /// Keys changed in the stream while the window was open: their rows are not emitted.
    superseded: HashSet<Vec<String>>,
    end_key: Vec<String>,
    /// Fewer rows than a chunk: the table is done once this window closes.
    last: bool,
    /// `read.only`: the server's WAL position just after the chunk was read; the window
    /// (open from the read on) closes once the stream has passed it.
    close_at: Option<Lsn>,
}

impl Incremental {
    /// The state stored in `offset` (none when no incremental snapshot was running).
    pub fn restore(cfg: &PostgresConfig, offset: Option<&SourceOffset>) -> Self {
        let mut s = Self { chunk_size: cfg.incremental_chunk_size.max(1), read_only: cfg.read_only, ..Self::default() };
        let Some(o) = offset else { return s };
        // sluice writes a key as the JSON array of its columns' text forms; Debezium as the hex of
        // a Java-serialized Object[] (read by `java_keys`), so an offset moves over mid-snapshot.
        let keys = |field: &str| -> Option<Vec<String>> {
            let text = o.get(field)?.as_str()?;
            if !java_keys::is_debezium_form(text) {
                return serde_json::from_str(text).ok();
            }
            let key = java_keys::chunk_key(text);
            if key.is_none() {
                tracing::warn!(
                    field,
                    "a chunk key in Debezium's form holds a value of a type sluice does not read; the table's incremental snapshot \
                     goes on from its first row (rows are sent again, none is lost)"
                );
            }
            key
        };
        if let Some(list) = o.get(COLLECTIONS).and_then(Json::as_str).and_then(|t| serde_json::from_str::<Vec<Json>>(t).ok()) {
            for c in &list {
                let Some((schema, table)) =
                    c.get("incremental_snapshot_collections_id").and_then(Json::as_str).and_then(|n| n.split_once('.'))
                else {
                    continue;
                };
                let id = TableId { schema: schema.into(), table: table.into() };
                if let Some(filter) = c.get("incremental_snapshot_collections_additional_condition").and_then(Json::as_str) {
                    s.conditions.insert(id.clone(), filter.to_owned());
                }
                s.collections.push_back(id);
            }
            s.last_key = keys(PRIMARY_KEY);
            s.max_key = keys(MAXIMUM_KEY);
            if !s.collections.is_empty() {
                tracing::info!(tables = ?s.collections.iter().map(ToString::to_string).collect::<Vec<_>>(), after = ?s.last_key, "resuming the incremental snapshot");
            }
        }
        s
    }

    pub fn running(&self) -> bool {
        !self.collections.is_empty()
    }

    /// Whether the next chunk should be read now.
    pub fn wants_chunk(&self) -> bool {
        self.running() && !self.paused && self.window.is_none()
    }

    /// `read.only`: whether the stream, at `lsn`, has passed the position the open window
    /// waits for. Logical decoding sends transactions in commit order, so once a transaction
    /// committing at or after that position begins (or the server says it sent everything up
    /// to it), every transaction that committed before the chunk was read has been streamed
    /// (and removed the rows it changed from the chunk); the rest of the chunk goes out then,
    /// before any later change. A change streamed while the window is open, older or newer
    /// than the read, removes its row: the stream brings that row's state from then on.
    pub fn passed(&self, lsn: Lsn) -> bool {
        self.window.as_ref().and_then(|w| w.close_at).is_some_and(|at| lsn >= at)
    }


    fn stamp_with(&self, o: &mut SourceOffset, key: Option<&Vec<String>>) {
        let collections: Vec<Json> = self
            .collections
            .iter()
            .map(|t| {
                json!({
                    "incremental_snapshot_collections_id": t.to_string(),
                    "incremental_snapshot_collections_additional_condition": self.conditions.get(t),
                    "incremental_snapshot_collections_surrogate_key": null,
                })
            })
            .collect();
        o.insert(COLLECTIONS.into(), json!(Json::Array(collections).to_string()));
        let stored = |k: &Vec<String>| {
            let debezium = self.key_kinds.as_deref().and_then(|kinds| java_keys::encode(k, kinds));
            json!(debezium.unwrap_or_else(|| json!(k).to_string()))
        };
        o.insert(PRIMARY_KEY.into(), key.map_or(Json::Null, stored));
        o.insert(MAXIMUM_KEY.into(), self.max_key.as_ref().map_or(Json::Null, stored));
    }

    /// Adds the incremental snapshot's progress to an offset that does not have it yet (a
    /// record without a position, an empty offset, gets none).
    pub fn stamp(&self, o: &mut SourceOffset) {
        if self.running() && !o.is_empty() && !o.contains_key(COLLECTIONS) {
            self.stamp_with(o, self.last_key.as_ref());
        }
    }

    /// A change to `key` of `table` was read from the stream.
    pub fn changed(&mut self, table: &TableId, key: Vec<String>) {
        if let Some(w) = self.window.as_mut().filter(|w| w.open && w.table.id == *table) {
            w.superseded.insert(key);
        }
    }

    /// `table` was truncated in the stream: no row of an open window's chunk is left to emit.
    pub fn truncated(&mut self, table: &TableId) {
        if let Some(w) = self.window.as_mut().filter(|w| w.open && w.table.id == *table) {
            w.rows.clear();
        }
    }

    /// Acts on a signal read from the stream; returns the `r` records of a window it closed.
    pub async fn signal(
        &mut self,
        cfg: &PostgresConfig,
        client: &Client,
        signal: &Signal,
        emit: Emit<'_>,
    ) -> ConnectResult<Vec<SourceRecord>> {
        match signal.action() {
            Action::Execute(patterns, conditions) => {
                let captured = catalog::tables(client, &cfg.filter).await?;
                let added: Vec<TableId> =
                    requested(&captured, &patterns, &signal.id).into_iter().filter(|t| !self.collections.contains(t)).collect();
                for t in &added {
                    if let Some(filter) = condition_for(&conditions, t) {
                        self.conditions.insert(t.clone(), filter.to_owned());
                    }
                }
                tracing::info!(signal = %signal.id, tables = ?added.iter().map(ToString::to_string).collect::<Vec<_>>(), "incremental snapshot requested");
                self.collections.extend(added);
            }
            Action::Stop(patterns) => {
                let before = self.collections.front().cloned();
                if patterns.is_empty() {
                    self.collections.clear();
                } else {
                    let res: Vec<regex::Regex> = patterns
                        .iter()
                        .filter_map(|p| regex::RegexBuilder::new(&format!("^(?:{p})$")).case_insensitive(true).build().ok())
                        .collect();
                    self.collections.retain(|t| !res.iter().any(|r| r.is_match(&t.to_string())));
                }
                let left: HashSet<TableId> = self.collections.iter().cloned().collect();
                self.conditions.retain(|t, _| left.contains(t));
                if self.collections.front() != before.as_ref() {
                    self.window = None;
                    self.last_key = None;
                    self.max_key = None;
                    self.key_kinds = None;
                }
                tracing::info!(signal = %signal.id, left = self.collections.len(), "incremental snapshot stopped");
            }
            Action::Pause => {
                tracing::info!(signal = %signal.id, "incremental snapshot paused");
                self.paused = true;
            }
            Action::Resume => {
                tracing::info!(signal = %signal.id, "incremental snapshot resumed");
                self.paused = false;
            }
            Action::WindowOpen(id) => {
                if let Some(w) = self.window.as_mut().filter(|w| w.id == id) {
                    w.open = true;
                }
            }
            Action::WindowClose(id) => {
                if self.window.as_ref().is_some_and(|w| w.id == id) {
                    return Ok(self.close(emit));
                }
            }
            Action::Log(message) => tracing::info!(signal = %signal.id, %message, "log signal"),
            // Acted on by the stream (replication.rs), which never hands it here.
            Action::Blocking(..) => tracing::error!(signal = %signal.id, "a blocking snapshot signal reached the incremental snapshot"),
            Action::Rejected(why) => tracing::error!(signal = %signal.id, "{why}"),
        }
        Ok(Vec::new())
    }

    /// Closes the current window (at its close watermark, or a read-only one the stream has
    /// [`passed`](Self::passed)): its rows not superseded by the stream, as `op: "r"`.
    pub fn close(&mut self, emit: Emit<'_>) -> Vec<SourceRecord> {
        let w = self.window.take().expect("checked by the caller");
        let info = SourceInfo { ts_ms: now_ms(), snapshot: "incremental", tx_id: Some(emit.tx_id), lsn: Some(emit.lsn.0), sequence: None };
        let mut out = Vec::with_capacity(w.rows.len());
        for (key, row) in w.rows {
            if w.superseded.contains(&key) {
                continue;
            }
            let mut offset = emit.base.clone();
            self.stamp_with(&mut offset, Some(&key));
            out.push(w.table.record('r', Row::NONE, row, &info, emit.source_schema, emit.partition, offset));
        }
        tracing::debug!(table = %w.table.id, emitted = out.len(), superseded = w.superseded.len(), "incremental snapshot window closed");
        self.last_key = Some(w.end_key);
        if w.last {
            tracing::info!(table = %w.table.id, "incremental snapshot of the table completed");
            self.finish_table();
        }
        out
    }

    /// Reads the next chunk between an open and a close watermark (see the module docs).
    pub async fn next_chunk(
        &mut self,
        cfg: &PostgresConfig,
        client: &Client,
        resolver: &mut TypeResolver,
        modes: &Modes,
        source_schema: &SchemaRef,
    ) -> ConnectResult<()> {
        if cfg.signal_table.is_none() && !self.read_only {
            tracing::error!("an incremental snapshot needs signal.data.collection for its watermark rows (or read.only=true); it is dropped");
            self.collections.clear();
            return Ok(());
        }
        while self.wants_chunk() {
            let id = self.collections.front().expect("running").clone();
            let cols = catalog::columns(client, &id).await?;
            let mut key: Vec<(usize, usize)> = cols.iter().enumerate().filter_map(|(i, c)| c.pk_position.map(|p| (p, i))).collect();
            key.sort_unstable();
            let key: Vec<usize> = key.into_iter().map(|(_, i)| i).collect();
            if cols.is_empty() || key.is_empty() {
                tracing::error!(table = %id, "incremental snapshot skipped: the table is gone or has no primary key");
                self.finish_table();
                continue;
            }
            let key_cols = key.iter().map(|i| quote_ident(&cols[*i].name)).collect::<Vec<_>>();
            let literals = |k: &[String]| k.iter().map(|v| quote_literal(v)).collect::<Vec<_>>().join(", ");
            let filter = self.conditions.get(&id).map(|f| format!("({f})"));
            if self.max_key.is_none() {
                let desc = key_cols.iter().map(|c| format!("{c} DESC")).collect::<Vec<_>>().join(", ");
                let filter = filter.as_ref().map(|f| format!(" WHERE {f}")).unwrap_or_default();
                let sql = format!("SELECT {} FROM {}{filter} ORDER BY {desc} LIMIT 1", key_cols.join(", "), id.quoted());
                let rows =
                    client.simple_query(&sql).await.map_err(|e| catalog::query_error(&format!("reading the largest key of {id}"), e))?;
                let max = rows.iter().find_map(|m| match m {
                    SimpleQueryMessage::Row(r) => Some((0..r.len()).map(|i| r.get(i).unwrap_or_default().to_owned()).collect::<Vec<_>>()),
                    _ => None,
                });
                match max {
                    Some(m) => self.max_key = Some(m),
                    None => {
                        tracing::info!(table = %id, "incremental snapshot: the table is empty");
                        self.finish_table();
                        continue;
                    }
                }
            }
            let specs = resolver.specs(client, &cols).await?;
            self.key_kinds = key.iter().map(|i| specs.get(*i).and_then(key_kind)).collect();
            let table = std::sync::Arc::new(TableSchema::new(
                &cfg.topic_prefix,
                &cfg.dbname,
                id.clone(),
                specs,
                modes,
                source_schema,
                &cfg.columns,
            ));
            let tuple = key_cols.join(", ");
            let mut conditions = vec![format!("({tuple}) <= ({})", literals(self.max_key.as_deref().unwrap_or_default()))];
            if let Some(last) = &self.last_key {
                conditions.push(format!("({tuple}) > ({})", literals(last)));
            }
            conditions.extend(filter);
            let select = cols.iter().map(|c| quote_ident(&c.name)).collect::<Vec<_>>().join(", ");
            let sql = format!(
                "SELECT {select} FROM {} WHERE {} ORDER BY {tuple} LIMIT {}",
                id.quoted(),
                conditions.join(" AND "),
                self.chunk_size
            );
            let chunk_id = format!("{:032x}", fastrand::u128(..));
            let (messages, close_at) = match &cfg.signal_table {
                Some(signal_table) if !self.read_only => {
                    let open_data = json!({ "openWindowTimestamp": now_ms() }).to_string();
                    watermark(client, signal_table, &format!("{chunk_id}{OPEN_SUFFIX}"), "snapshot-window-open", &open_data).await?;
                    let messages = read_chunk(client, &id, &sql).await?;
                    let close_data = json!({ "openWindowTimestamp": now_ms(), "closeWindowTimestamp": now_ms() }).to_string();
                    watermark(client, signal_table, &format!("{chunk_id}{CLOSE_SUFFIX}"), "snapshot-window-close", &close_data).await?;
                    (messages, None)
                }
                _ => {
                    let messages = read_chunk(client, &id, &sql).await?;
                    (messages, Some(current_wal_lsn(client).await?))
                }
            };
            let mut rows = Vec::new();
            let mut datums: Vec<Datum> = Vec::new();
            for m in &messages {
                if let SimpleQueryMessage::Row(r) = m {
                    datums.clear();
                    datums.extend((0..r.len()).map(|i| r.get(i).map_or(Datum::Null, Datum::Text)));
                    let k: Vec<String> = key.iter().map(|i| r.get(*i).unwrap_or_default().to_owned()).collect();
                    rows.push((k, table.row(&datums)?));
                }
            }
            let Some(end_key) = rows.last().map(|(k, _)| k.clone()) else {
                self.finish_table();
                continue;
            };
            tracing::debug!(table = %id, rows = rows.len(), chunk = %chunk_id, close_at = ?close_at, "incremental snapshot chunk read");
            let last = rows.len() < self.chunk_size || Some(&end_key) == self.max_key.as_ref();
            let open = close_at.is_some();
            self.window = Some(Window { id: chunk_id, open, table, rows, superseded: HashSet::new(), end_key, last, close_at });
        }
        Ok(())
    }

    fn finish_table(&mut self) {
        if let Some(t) = self.collections.pop_front() {
            self.conditions.remove(&t);
        }
        self.last_key = None;
        self.max_key = None;
        self.window = None;
        self.key_kinds = None;
    }
}

/// The JDBC class Debezium holds a key column's value in, where `java_keys` writes it.
fn key_kind(spec: &ColumnSpec) -> Option<java_keys::KeyKind> {
    use java_keys::KeyKind;
    match spec.ty.as_ref()? {
        PgType::Int2 | PgType::Int4 => Some(KeyKind::Integer),
        PgType::Int8 => Some(KeyKind::Long),
        PgType::Text if spec.source.character => Some(KeyKind::Str),
        PgType::Uuid => Some(KeyKind::Uuid),
        PgType::Numeric { .. } => Some(KeyKind::Decimal),
        PgType::Timestamp { .. } => Some(KeyKind::Timestamp),
        PgType::TimestampTz { .. } => Some(KeyKind::TimestampTz),
        PgType::Date => Some(KeyKind::Date),
        PgType::Bool => Some(KeyKind::Boolean),
        _ => None,
    }
}

async fn read_chunk(client: &Client, id: &TableId, sql: &str) -> ConnectResult<Vec<SimpleQueryMessage>> {
    client.simple_query(sql).await.map_err(|e| catalog::query_error(&format!("reading a chunk of {id}"), e))
}

/// The server's current WAL write position (`read.only` windows close once the stream passes it).
async fn current_wal_lsn(client: &Client) -> ConnectResult<Lsn> {
    let rows = client
        .simple_query("SELECT pg_current_wal_lsn()::text")
        .await
        .map_err(|e| catalog::query_error("reading the WAL position after a chunk", e))?;
    let text = rows.iter().find_map(|m| match m {
        SimpleQueryMessage::Row(r) => r.get(0).map(str::to_owned),
        _ => None,
    });
    text.as_deref()
        .and_then(|t| Lsn::parse(t).ok())
        .ok_or_else(|| ConnectError::fatal(format!("pg_current_wal_lsn() answered {text:?}, not an LSN")))
}

async fn watermark(client: &Client, table: &TableId, id: &str, kind: &str, data: &str) -> ConnectResult<()> {
    let sql = format!(
        "INSERT INTO {} (id, type, data) VALUES ({}, {}, {})",
        table.quoted(),
        quote_literal(id),
        quote_literal(kind),
        quote_literal(data)
    );
    client
        .batch_execute(&sql)
        .await
        .map_err(|e| catalog::query_error(&format!("writing the {kind} watermark into the signal table {table}"), e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::postgres::column::{ColumnRules, SourceColumn};
    use crate::postgres::envelope::{source_schema, ColumnSpec};
    use crate::postgres::mapping::PgType;
    use crate::postgres::offset::{change_offset, heartbeat_offset};

    fn items() -> SharedTable {
        let spec = |name: &str, ty, pk: Option<usize>| ColumnSpec {
            source: SourceColumn::of(23, -1),
            name: name.into(),
            ty: Some(ty),
            not_null: pk.is_some(),
            pk_position: pk,
            default: None,
        };
        let specs = vec![spec("id", PgType::Int4, Some(1)), spec("v", PgType::Int4, None)];
        let modes = Modes::DEFAULT;
        let id = TableId { schema: "public".into(), table: "items".into() };
        std::sync::Arc::new(TableSchema::new("pg", "db", id, specs, &modes, &source_schema(), &ColumnRules::default()))
    }

    /// A snapshot of `public.items` (and `public.other` after it) with a read chunk of keys 1..=4.
    fn with_window(last: bool) -> Incremental {
        let table = items();
        let rows = (1..=4).map(|k| (vec![k.to_string()], table.row(&[Datum::Text(&k.to_string()), Datum::Text("0")]).unwrap())).collect();
        Incremental {
            chunk_size: 4,
            collections: [table.id.clone(), TableId { schema: "public".into(), table: "other".into() }].into(),
            conditions: BTreeMap::from([(table.id.clone(), "v >= 0".to_owned())]),
            last_key: None,
            max_key: Some(vec!["9".into()]),
            paused: false,
            window: Some(Window {
                id: "c1".into(),
                open: false,
                table,
                rows,
                superseded: HashSet::new(),
                end_key: vec!["4".into()],
                last,
                close_at: None,
            }),
            read_only: false,
            key_kinds: None,
        }
    }

    #[test]
    fn a_read_only_window_is_open_from_the_read_and_closes_past_its_position() {
        let mut s = with_window(false);
        let w = s.window.as_mut().unwrap();
        (w.open, w.close_at) = (true, Some(Lsn(500)));
        let id = w.table.id.clone();
        // A change streamed after the read, older or newer than it, removes its row.
        s.changed(&id, vec!["2".into()]);
        assert!(!s.passed(Lsn(499)), "the stream has not passed the read's position");
        assert!(s.passed(Lsn(500)));
        let schema = source_schema();
        let partition = SourcePartition::new();
        let emit = Emit { base: heartbeat_offset(Lsn(500), 0), lsn: Lsn(500), tx_id: 7, source_schema: &schema, partition: &partition };
        let keys: Vec<String> = s.close(emit).iter().map(|r| format!("{:?}", r.key)).collect();
        assert_eq!(keys.len(), 3, "{keys:?}");
        assert!(!s.passed(Lsn(1000)), "no window is open");
        assert!(s.wants_chunk(), "the next chunk is read");
    }

    fn close(s: &mut Incremental, id: &str) -> Vec<SourceRecord> {
        let schema = source_schema();
        let partition = SourcePartition::new();
        let emit = Emit {
            base: change_offset(Lsn(100), Lsn(120), 7, 0, 1),
            lsn: Lsn(100),
            tx_id: 7,
            source_schema: &schema,
            partition: &partition,
        };
        // The close-window row as the stream delivers it (no database is needed to close).
        let signal = Signal { id: format!("{id}-close"), kind: "snapshot-window-close".into(), data: None };
        match signal.action() {
            Action::WindowClose(id) if s.window.as_ref().is_some_and(|w| w.id == id) => s.close(emit),
            _ => Vec::new(),
        }
    }

    fn keys(records: &[SourceRecord]) -> Vec<i32> {
        records
            .iter()
            .map(|r| match r.key.as_struct().and_then(|k| k.get("id")) {
                Some(sluice_api::Value::Int32(k)) => *k,
                other => panic!("key {other:?}"),
            })
            .collect()
    }

    #[test]
    fn changes_inside_the_open_window_drop_their_rows_from_the_chunk() {
        let mut s = with_window(false);
        let items = s.collections[0].clone();
        let other = s.collections[1].clone();
        // Before the open watermark is seen, a change is older than the chunk: the row stays.
        s.changed(&items, vec!["1".into()]);
        s.window.as_mut().unwrap().open = true;
        s.changed(&items, vec!["2".into()]);
        s.changed(&other, vec!["3".into()]);
        s.changed(&items, vec!["99".into()]);
        // The close of another chunk (an interrupted run's) is ignored.
        assert!(close(&mut s, "stale").is_empty());
        assert!(s.window.is_some());
        let reads = close(&mut s, "c1");
        assert_eq!(keys(&reads), [1, 3, 4]);
        let r = &reads[1];
        let env = r.value.as_struct().unwrap();
        assert_eq!(env.get("op"), Some(&sluice_api::Value::String("r".into())));
        let source = env.get("source").and_then(sluice_api::Value::as_struct).unwrap();
        assert_eq!(source.get("snapshot"), Some(&sluice_api::Value::String("incremental".into())));
        // Each READ's offset says how far the snapshot got, at that row.
        assert_eq!(r.source_offset[PRIMARY_KEY], json!("[\"3\"]"));
        assert_eq!(r.source_offset[MAXIMUM_KEY], json!("[\"9\"]"));
        assert_eq!(r.source_offset["lsn_commit"], json!(120));
        assert_ne!(reads[0].source_offset, reads[2].source_offset, "offsets of one window must differ (durability is matched by offset)");
        // After the window, the chunk's end is the position; the next chunk is due.
        assert_eq!(s.last_key, Some(vec!["4".into()]));
        assert!(s.wants_chunk());
        let mut o = SourceOffset::new();
        s.stamp(&mut o);
        assert!(o.is_empty(), "a record without a position gets no progress");
        o.insert("lsn".into(), json!(130));
        s.stamp(&mut o);
        assert_eq!(o[PRIMARY_KEY], json!("[\"4\"]"));
        // The progress survives a restart through the offset.
        let cfg = crate::postgres::config::PostgresConfig::parse(
            &[("database.hostname", "h"), ("database.user", "u"), ("database.dbname", "d"), ("topic.prefix", "p")]
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        )
        .unwrap();
        let back = Incremental::restore(&cfg, Some(&reads[1].source_offset));
        assert_eq!(
            (back.collections.clone(), back.last_key.clone(), back.max_key.clone()),
            (s.collections.clone(), Some(vec!["3".into()]), Some(vec!["9".into()]))
        );
        assert!(back.wants_chunk());
        assert_eq!(back.conditions, s.conditions, "the additional condition survives a restart");
    }

    #[test]
    fn the_last_chunk_moves_to_the_next_table_and_an_ended_snapshot_leaves_offsets_alone() {
        let mut s = with_window(true);
        s.window.as_mut().unwrap().open = true;
        assert_eq!(keys(&close(&mut s, "c1")), [1, 2, 3, 4]);
        assert_eq!(s.collections.len(), 1);
        assert_eq!((s.last_key.clone(), s.max_key.clone()), (None, None));
        s.collections.clear();
        let mut o = SourceOffset::new();
        s.stamp(&mut o);
        assert!(o.is_empty());
        assert!(!s.wants_chunk());
        // Paused: no chunk is read until resumed.
        let mut s = with_window(false);
        s.window = None;
        s.paused = true;
        assert!(!s.wants_chunk());
    }

    /// An offset Debezium 3.6.3 wrote in the middle of an incremental snapshot: the table
    /// list as JSON text, the keys as hex of Java-serialized arrays (last key [5], largest
    /// key [9000000000]; see `java_keys`).
    #[test]
    fn restores_an_incremental_snapshot_from_debeziums_offset() {
        let props: sluice_api::Props = [("database.hostname", "h"), ("database.user", "u"), ("database.dbname", "d"), ("topic.prefix", "p")]
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        let cfg = PostgresConfig::parse(&props).unwrap();
        let mut offset = json!({"lsn": 100, "txId": 7, "ts_usec": 1});
        offset[COLLECTIONS] = json!(r#"[{"incremental_snapshot_collections_id":"public.items","incremental_snapshot_collections_additional_condition":null,"incremental_snapshot_collections_surrogate_key":null}]"#);
        offset[PRIMARY_KEY] = json!("aced0005757200135b4c6a6176612e6c616e672e4f626a6563743b90ce589f1073296c020000787000000001737200116a6176612e6c616e672e496e746567657212e2a0a4f781873802000149000576616c7565787200106a6176612e6c616e672e4e756d62657286ac951d0b94e08b020000787000000005");
        offset[MAXIMUM_KEY] = json!("aced0005757200135b4c6a6176612e6c616e672e4f626a6563743b90ce589f1073296c0200007870000000017372000e6a6176612e6c616e672e4c6f6e673b8be490cc8f23df0200014a000576616c7565787200106a6176612e6c616e672e4e756d62657286ac951d0b94e08b02000078700000000218711a00");
        let s = Incremental::restore(&cfg, offset.as_object());
        assert_eq!(s.collections, [TableId { schema: "public".into(), table: "items".into() }]);
        assert_eq!((s.last_key, s.max_key), (Some(vec!["5".to_owned()]), Some(vec!["9000000000".to_owned()])));
        // A key of a type not read: the table goes on from its first row.
        let mut unreadable = offset.clone();
        unreadable[PRIMARY_KEY] = json!("aced0005ff");
        let s = Incremental::restore(&cfg, unreadable.as_object());
        assert_eq!((s.collections.len(), s.last_key), (1, None));
    }

    #[test]
    fn stores_keys_in_debeziums_form_once_their_types_are_known() {
        let mut s = with_window(false);
        s.last_key = Some(vec!["4".into()]);
        let fresh = || -> SourceOffset { json!({"lsn": 1}).as_object().unwrap().clone() };
        let mut o = fresh();
        s.stamp(&mut o);
        assert_eq!(o[PRIMARY_KEY], json!(r#"["4"]"#), "types not known yet: sluice's JSON form");
        s.key_kinds = Some(vec![java_keys::KeyKind::Integer]);
        let mut o = fresh();
        s.stamp(&mut o);
        let key = |field: &str| java_keys::chunk_key(o[field].as_str().unwrap());
        assert!(java_keys::is_debezium_form(o[PRIMARY_KEY].as_str().unwrap()), "{o:?}");
        assert_eq!((key(PRIMARY_KEY), key(MAXIMUM_KEY)), (Some(vec!["4".to_owned()]), Some(vec!["9".to_owned()])));
    }

    fn signal(kind: &str, data: &str) -> Signal {
        Signal { id: "s1".into(), kind: kind.into(), data: Some(data.into()) }
    }

    #[test]
    fn parses_signals() {
        assert_eq!(
            signal("execute-snapshot", r#"{"data-collections": ["public.a", "public.b"], "type": "INCREMENTAL"}"#).action(),
            Action::Execute(vec!["public.a".into(), "public.b".into()], vec![])
        );
        assert_eq!(
            signal("execute-snapshot", r#"{"data-collections": ["public.a"]}"#).action(),
            Action::Execute(vec!["public.a".into()], vec![])
        );
        assert_eq!(
            signal("execute-snapshot", r#"{"data-collections": ["public.a"], "type": "BLOCKING",
                "additional-conditions": [{"data-collection": "public.a", "filter": "SELECT * FROM public.a WHERE x = 1"}]}"#)
            .action(),
            Action::Blocking(vec!["public.a".into()], vec![("public.a".into(), "SELECT * FROM public.a WHERE x = 1".into())])
        );
        let Action::Rejected(why) = signal("stop-snapshot", r#"{"type": "blocking"}"#).action() else { panic!("stop of a blocking snapshot") };
        assert!(why.contains("incremental snapshots only"), "{why}");
        let Action::Rejected(why) = signal("execute-snapshot", r#"{"data-collections": ["public.a"], "type": "fast"}"#).action() else {
            panic!("an unknown type accepted")
        };
        assert!(why.contains("incremental or blocking"), "{why}");
        assert!(matches!(signal("execute-snapshot", r#"{"data-collections": []}"#).action(), Action::Rejected(_)));
        assert!(matches!(signal("execute-snapshot", "not json").action(), Action::Rejected(_)));
        assert_eq!(
            signal(
                "execute-snapshot",
                r#"{"data-collections": ["public.a"], "additional-conditions": [{"data-collection": "public.a", "filter": "x=1"}]}"#
            )
            .action(),
            Action::Execute(vec!["public.a".into()], vec![("public.a".into(), "x=1".into())])
        );
        assert!(matches!(
            signal("execute-snapshot", r#"{"data-collections": ["public.a"], "additional-conditions": [{"filter": "x=1"}]}"#).action(),
            Action::Rejected(_)
        ));
        assert!(matches!(
            signal("execute-snapshot", r#"{"data-collections": ["public.a"], "surrogate-key": "k"}"#).action(),
            Action::Rejected(_)
        ));
        assert_eq!(signal("stop-snapshot", r#"{"type": "incremental"}"#).action(), Action::Stop(vec![]));
        assert_eq!(signal("stop-snapshot", r#"{"data-collections": ["public.a"]}"#).action(), Action::Stop(vec!["public.a".into()]));
        assert_eq!(signal("pause-snapshot", "").action(), Action::Pause);
        assert_eq!(
            Signal { id: "abc-open".into(), kind: "snapshot-window-open".into(), data: None }.action(),
            Action::WindowOpen("abc".into())
        );
        assert_eq!(
            Signal { id: "abc-close".into(), kind: "snapshot-window-close".into(), data: None }.action(),
            Action::WindowClose("abc".into())
        );
        assert!(matches!(signal("frobnicate", "{}").action(), Action::Rejected(_)));
    }
}
