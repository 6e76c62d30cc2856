//! The initial snapshot: every included table read inside one `REPEATABLE READ`
//! transaction, on the snapshot the slot exported when it was created (so streaming from
//! the slot's consistent point continues exactly after it), a cursor per table fetched
//! `snapshot.fetch.size` rows at a time.
//!
//! Records are `op: "r"`; `source.snapshot` is `first` for the first, `last` for the last
//! and `true` in between; offsets carry `snapshot: true` and `last_snapshot_record`. One
//! record is held back so the last one can be marked. An interrupted snapshot is redone
//! from the start on restart (no per-chunk resume yet).

use std::collections::VecDeque;
use std::sync::Arc;

use pgwire_replication::Lsn;
use sluice_api::{ConnectResult, SchemaRef, SourcePartition, SourceRecord, Value};
use tokio_postgres::{Client, SimpleQueryMessage};

use super::catalog::{self, quote_ident, TableId, TypeResolver};
use super::decode::Datum;
use super::envelope::{now_ms, ColumnSpec, SharedTable, SourceInfo, TableSchema};
use super::mapping::Modes;
use super::offset::snapshot_offset;

pub struct SnapshotReader {
    client: Client,
    pending: VecDeque<TableId>,
    current: Option<(SharedTable, String)>,
    cursor_no: usize,
    fetch_size: usize,
    lsn: Lsn,
    tx_id: Option<i64>,
    ts_ms: i64,
    held: Option<(SharedTable, Value)>,
    emitted: u64,
    prefix: String,
    db: String,
    modes: Modes,
    source_schema: SchemaRef,
    partition: SourcePartition,
}

pub struct SnapshotSettings {
    pub prefix: String,
    pub db: String,
    pub modes: Modes,
    pub fetch_size: usize,
    pub source_schema: SchemaRef,
    pub partition: SourcePartition,
}

impl SnapshotReader {
    /// Opens the snapshot transaction on `client` (a session of its own). With
    /// `exported`, the transaction reads the slot's exported snapshot; without, it reads a
    /// snapshot of its own (then streaming may resend changes the snapshot already holds).
    pub async fn begin(client: Client, tables: Vec<TableId>, exported: Option<&str>, lsn: Lsn, s: SnapshotSettings) -> ConnectResult<Self> {
        let mut sql = String::from("BEGIN ISOLATION LEVEL REPEATABLE READ;");
        if let Some(name) = exported {
            sql.push_str(&catalog::set_snapshot_sql(name));
            sql.push(';');
        }
        client.batch_execute(&sql).await.map_err(|e| catalog::query_error("starting the snapshot transaction", e))?;
        let row = client.query_one("SELECT txid_current()", &[]).await.map_err(|e| catalog::query_error("reading the snapshot transaction id", e))?;
        let tx_id: i64 = row.get(0);
        tracing::info!(tables = tables.len(), %lsn, exported = exported.is_some(), "snapshot started");
        Ok(Self {
            client,
            pending: tables.into(),
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
        })
    }

    /// The position streaming continues from once the snapshot is done.
    pub fn lsn(&self) -> Lsn {
        self.lsn
    }

    /// Up to `max` records; `None` once every record (the last included) was returned.
    pub async fn next_batch(&mut self, resolver: &mut TypeResolver, max: usize) -> ConnectResult<Option<Vec<SourceRecord>>> {
        let mut out = Vec::new();
        while out.len() < max {
            if self.current.is_none() {
                let Some(table) = self.pending.pop_front() else {
                    if let Some((t, row)) = self.held.take() {
                        out.push(self.build(&t, row, true));
                    }
                    self.client.batch_execute("COMMIT").await.map_err(|e| catalog::query_error("ending the snapshot transaction", e))?;
                    tracing::info!(records = self.emitted, "snapshot completed");
                    return Ok(if out.is_empty() { None } else { Some(out) });
                };
                self.open(resolver, table).await?;
            }
            let (table, cursor) = self.current.clone().expect("opened above");
            let rows = self
                .client
                .simple_query(&format!("FETCH FORWARD {} FROM {cursor}", self.fetch_size.min(max.max(1)).max(1)))
                .await
                .map_err(|e| catalog::query_error(&format!("reading {} for the snapshot", table.id), e))?;
            let mut got = 0;
            for msg in rows {
                if let SimpleQueryMessage::Row(row) = msg {
                    got += 1;
                    let datums: Vec<Datum> =
                        (0..row.len()).map(|i| row.get(i).map_or(Datum::Null, Datum::Text)).collect();
                    let value = table.row(&datums)?;
                    if let Some((t, v)) = self.held.replace((table.clone(), value)) {
                        out.push(self.build(&t, v, false));
                    }
                }
            }
            if got == 0 {
                self.client.batch_execute(&format!("CLOSE {cursor}")).await.map_err(|e| catalog::query_error("closing a snapshot cursor", e))?;
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
            specs.push(ColumnSpec { name: c.name.clone(), ty, not_null: c.not_null, pk_position: c.pk_position });
        }
        let select = cols.iter().map(|c| quote_ident(&c.name)).collect::<Vec<_>>().join(", ");
        self.cursor_no += 1;
        let cursor = format!("sluice_snapshot_{}", self.cursor_no);
        let sql = format!("DECLARE {cursor} NO SCROLL CURSOR FOR SELECT {select} FROM {}", id.quoted());
        self.client.batch_execute(&sql).await.map_err(|e| catalog::query_error(&format!("opening a snapshot cursor on {id}"), e))?;
        tracing::debug!(table = %id, "snapshotting table");
        let table = Arc::new(TableSchema::new(&self.prefix, &self.db, id, specs, self.modes, &self.source_schema));
        self.current = Some((table, cursor));
        Ok(())
    }

    fn build(&mut self, table: &TableSchema, row: Value, last: bool) -> SourceRecord {
        let marker = if last {
            "last"
        } else if self.emitted == 0 {
            "first"
        } else {
            "true"
        };
        self.emitted += 1;
        let info = SourceInfo { ts_ms: self.ts_ms, snapshot: marker, tx_id: self.tx_id, lsn: Some(self.lsn.0), sequence: None };
        let offset = snapshot_offset(self.lsn, self.tx_id, self.ts_ms * 1000, last);
        table.record('r', Value::Null, row, &info, &self.source_schema, &self.partition, offset)
    }
}
