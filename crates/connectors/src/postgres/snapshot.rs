//! The initial snapshot: every included table read inside one `REPEATABLE READ`
//! transaction, in primary-key order, through one cursor per table fetched
//! `snapshot.fetch.size` rows at a time; each record's offset says how far the snapshot got,
//! so a restart resumes after the last durable record instead of starting over.
//!
//! Records are `op: "r"`; `source.snapshot` is `first` for the first, `last` for the last
//! and `true` in between; offsets carry `snapshot: true`, `last_snapshot_record`, the
//! table being read and the key of the record (see `offset.rs`). One record is held back
//! so the last one can be marked.
//!
//! ## Which snapshot is read
//!
//! The first run reads the snapshot the slot exported when it was created, so streaming
//! from the slot's consistent point `L0` continues exactly after it. That snapshot dies
//! with the session that exported it: a resumed run reads the remaining rows at a newer
//! snapshot `S1`, then streams from `L0` all the same (the slot never moves past `L0`
//! before the last snapshot record is durable):
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
//!   through the stream, as without a crash.
//! - Rows after `K` are read at `S1`, which already holds the changes between `L0` and
//!   `S1`; the stream then delivers those changes again. A key-based consumer ends in the
//!   same state per key, but may see, for such a row, the `r` at its `S1` state followed
//!   by the older `c`/`u`/`d` events between `L0` and `S1` that lead to the same state.
//!   A row deleted between `L0` and `S1` is not read; its delete arrives by the stream.
//! - Records handed out but not durable at the crash are read again (at `S1`): a key may
//!   appear as `r` once per crash; never a whole table again.
//! - A table without a primary key has no order to resume in: an interrupted one is read
//!   again from its start (its rows may appear twice), tables finished before it are not.
//! - Tables are read in `(schema, table)` order; on resume the tables ordered before the
//!   one in the offset count as done. A table that appears, or enters the include list,
//!   in between and sorts earlier is not snapshotted (its rows written after `L0` still
//!   arrive through the stream).

use std::collections::VecDeque;
use std::sync::Arc;

use pgwire_replication::Lsn;
use sluice_api::{ConnectResult, SchemaRef, SourcePartition, SourceRecord};
use tokio_postgres::{Client, SimpleQueryMessage};

use super::catalog::{self, quote_ident, quote_literal, TableId, TypeResolver};
use super::column::{ColumnRules, SourceColumn};
use super::decode::Datum;
use super::envelope::{now_ms, ColumnSpec, Row, SharedTable, SourceInfo, TableSchema};
use super::mapping::Modes;
use super::offset::{snapshot_offset, SnapshotPosition};

pub struct SnapshotReader {
    client: Client,
    pending: VecDeque<TableId>,
    /// Where the interrupted snapshot stood: the first table opened continues after it.
    resume: Option<SnapshotPosition>,
    current: Option<Current>,
    cursor_no: usize,
    fetch_size: usize,
    lsn: Lsn,
    tx_id: Option<i64>,
    ts_ms: i64,
    held: Option<Held>,
    emitted: u64,
    resumed: bool,
    prefix: String,
    db: String,
    modes: Modes,
    source_schema: SchemaRef,
    partition: SourcePartition,
    rules: Arc<ColumnRules>,
}

struct Current {
    table: SharedTable,
    cursor: String,
    /// Tuple positions of the primary key columns, in key order (empty: no primary key).
    key: Arc<[usize]>,
}

struct Held {
    table: SharedTable,
    row: Row,
    key: Option<Vec<String>>,
}

pub struct SnapshotSettings {
    pub prefix: String,
    pub db: String,
    pub modes: Modes,
    pub fetch_size: usize,
    pub source_schema: SchemaRef,
    pub partition: SourcePartition,
    pub rules: Arc<ColumnRules>,
}

impl SnapshotReader {
    /// Opens the snapshot transaction on `client` (a session of its own). With
    /// `exported`, the transaction reads the slot's exported snapshot; without, it reads a
    /// snapshot of its own (then streaming from `lsn` may resend changes the snapshot
    /// already holds). With `resume`, the tables before `resume.table` are skipped and that
    /// table continues after `resume.after`.
    pub async fn begin(
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
        let tx_id: i64 = row.get(0);
        tables.sort();
        let resumed = resume.is_some();
        if let Some(at) = &resume {
            tables.retain(|t| *t >= at.table);
        }
        let resume = resume.filter(|at| tables.first() == Some(&at.table));
        tracing::info!(tables = tables.len(), %lsn, exported = exported.is_some(), resume_table = ?resume.as_ref().map(|r| r.table.to_string()), "snapshot started");
        Ok(Self {
            client,
            pending: tables.into(),
            resumed,
            resume,
            current: None,
            cursor_no: 0,
            fetch_size: s.fetch_size,
            lsn,
            tx_id: Some(tx_id),
            ts_ms: now_ms(),
            held: None,
            emitted: 0,
            prefix: s.prefix,
            db: s.db,
            modes: s.modes,
            source_schema: s.source_schema,
            partition: s.partition,
            rules: s.rules,
        })
    }

    /// The position streaming continues from once the snapshot is done.
    pub fn lsn(&self) -> Lsn {
        self.lsn
    }

    /// Up to `max` records; `None` once every record (the last included) was returned.
    pub async fn next_batch(&mut self, resolver: &mut TypeResolver, max: usize) -> ConnectResult<Option<Vec<SourceRecord>>> {
        let mut out = Vec::with_capacity(max.min(self.fetch_size.max(1)) + 1);
        while out.len() < max {
            if self.current.is_none() {
                let Some(table) = self.pending.pop_front() else {
                    if let Some(held) = self.held.take() {
                        out.push(self.build(held, true));
                    }
                    self.client.batch_execute("COMMIT").await.map_err(|e| catalog::query_error("ending the snapshot transaction", e))?;
                    tracing::info!(records = self.emitted, resumed = self.resumed, "snapshot completed");
                    return Ok(if out.is_empty() { None } else { Some(out) });
                };
                self.open(resolver, table).await?;
            }
            let current = self.current.as_ref().expect("opened above");
            let (table, cursor, key) = (current.table.clone(), current.cursor.clone(), current.key.clone());
            let rows = self
                .client
                .simple_query(&format!("FETCH FORWARD {} FROM {cursor}", self.fetch_size.min(max.max(1)).max(1)))
                .await
                .map_err(|e| catalog::query_error(&format!("reading {} for the snapshot", table.id), e))?;
            let mut got = 0;
            let mut datums: Vec<Datum> = Vec::new();
            for msg in &rows {
                if let SimpleQueryMessage::Row(row) = msg {
                    got += 1;
                    datums.clear();
                    datums.extend((0..row.len()).map(|i| row.get(i).map_or(Datum::Null, Datum::Text)));
                    let value = table.row(&datums)?;
                    let key_text = (!key.is_empty()).then(|| key.iter().map(|i| row.get(*i).unwrap_or_default().to_owned()).collect());
                    if let Some(prev) = self.held.replace(Held { table: table.clone(), row: value, key: key_text }) {
                        out.push(self.build(prev, false));
                    }
                }
            }
            if got == 0 {
                self.client
                    .batch_execute(&format!("CLOSE {cursor}"))
                    .await
                    .map_err(|e| catalog::query_error("closing a snapshot cursor", e))?;
                self.current = None;
            }
        }
        Ok(Some(out))
    }

    async fn open(&mut self, resolver: &mut TypeResolver, id: TableId) -> ConnectResult<()> {
        let cols = catalog::columns(&self.client, &id).await?;
        let mut specs = Vec::with_capacity(cols.len());
        for c in &cols {
            let ty = resolver.resolve(&self.client, c.type_oid, c.type_modifier).await?;
            specs.push(ColumnSpec {
                name: c.name.clone(),
                source: SourceColumn::of(c.type_oid, c.type_modifier),
                ty,
                not_null: c.not_null,
                pk_position: c.pk_position,
            });
        }
        let mut key: Vec<(usize, usize)> = cols.iter().enumerate().filter_map(|(i, c)| c.pk_position.map(|p| (p, i))).collect();
        key.sort_unstable();
        let key: Arc<[usize]> = key.into_iter().map(|(_, i)| i).collect();
        let select = cols.iter().map(|c| quote_ident(&c.name)).collect::<Vec<_>>().join(", ");
        let mut sql = format!("SELECT {select} FROM {}", id.quoted());
        let after = self.resume.take().filter(|r| r.table == id).and_then(|r| r.after);
        if !key.is_empty() {
            let key_cols = key.iter().map(|i| quote_ident(&cols[*i].name)).collect::<Vec<_>>().join(", ");
            if let Some(after) = &after {
                if after.len() != key.len() {
                    return Err(sluice_api::ConnectError::fatal(format!(
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
        self.cursor_no += 1;
        let cursor = format!("sluice_snapshot_{}", self.cursor_no);
        let declare = format!("DECLARE {cursor} NO SCROLL CURSOR FOR {sql}");
        self.client.batch_execute(&declare).await.map_err(|e| catalog::query_error(&format!("opening a snapshot cursor on {id}"), e))?;
        tracing::debug!(table = %id, resumed_after = ?after, "snapshotting table");
        let table = Arc::new(TableSchema::new(&self.prefix, &self.db, id, specs, &self.modes, &self.source_schema, &self.rules));
        self.current = Some(Current { table, cursor, key });
        Ok(())
    }

    fn build(&mut self, held: Held, last: bool) -> SourceRecord {
        let marker = if last {
            "last"
        } else if self.emitted == 0 && !self.resumed {
            "first"
        } else {
            "true"
        };
        self.emitted += 1;
        let info = SourceInfo { ts_ms: self.ts_ms, snapshot: marker, tx_id: self.tx_id, lsn: Some(self.lsn.0), sequence: None };
        let position = SnapshotPosition { table: held.table.id.clone(), after: held.key };
        let offset = snapshot_offset(self.lsn, self.tx_id, self.ts_ms * 1000, last, Some(&position));
        held.table.record('r', Row::NONE, held.row, &info, &self.source_schema, &self.partition, offset)
    }
}
