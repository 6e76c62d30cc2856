//! The PostgreSQL dialect: one transaction per batch.
//!
//! ```text
//! BEGIN
//!   per table: CREATE TABLE / ALTER TABLE ADD COLUMN (auto.create / auto.evolve)
//!   per step:  TRUNCATE
//!            | DELETE … USING (SELECT unnest($1::bigint[]) AS c1, …) AS s  (keys of deleted rows)
//!              upsert: INSERT … SELECT … FROM (SELECT unnest(…), …) ON CONFLICT (key) DO UPDATE
//!              insert: INSERT … SELECT … FROM (…);  update: UPDATE … FROM (…)
//!              rows with unchanged columns: through a staging table (below)
//!   INSERT INTO sluice_sink_offsets … ON CONFLICT DO UPDATE … WHERE stored ≤ first offset
//!                                      (next offset per partition; compare and set: the
//!                                      statement fails unless every partition's was set)
//! COMMIT                               (a rollback when anything before it failed)
//! ```
//! Rows go to the server as one array per column, bound to a statement prepared once per
//! connection and column layout: in binary where the column has the values' own type,
//! else as text that the statement casts to the column's type (see [`Encoding`]).
//! A batch with no step that needs an answer first (a catalog lookup, a `COPY`) is one
//! round trip: `BEGIN`, its statements, the offsets and `COMMIT`, pipelined.
//!
//! A value the source did not send (Debezium's unavailable-value placeholder) is staged
//! as NULL and its column listed in the row's `__sluice_unchanged`; the target keeps its
//! current value for that column. The placeholder itself is never written. Rows like that
//! are copied (`COPY`) into a temporary staging table of the connection, one per column
//! layout, created on first use with `ON COMMIT DELETE ROWS` (see [`Staging`]), and applied
//! from there:
//!
//! ```text
//!   COPY rows → staging table (+ per-row list of unchanged columns)
//!   upsert: INSERT … SELECT … ON CONFLICT (key) DO UPDATE   (rows without unchanged columns)
//!           UPDATE … SET c = CASE WHEN unchanged THEN t.c ELSE s.c END FROM temp
//!           INSERT … WHERE NOT EXISTS                       (rows with unchanged columns)
//!   update: UPDATE … FROM temp
//! ```

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::{BufMut, Bytes, BytesMut};
use futures_util::SinkExt;
use sluice_api::TopicPartition;
use tokio_postgres::types::{to_sql_checked, IsNull, ToSql, Type};
use tokio_postgres::{Client, Statement};

use super::batch::{Batch, Row, Step, TableBatch, TableName};
use super::config::{InsertMode, JdbcSinkConfig};
use super::dialect::{Dialect, ErrorKind, WriteError};
use super::schema::{self, Cell};

const UNCHANGED_COLUMN: &str = "__sluice_unchanged";
/// The text the offsets statement fails with when a stored offset is past the batch (cast
/// to an integer: the way to raise an error in a plain SQL statement).
const OFFSETS_MOVED: &str = "sluice: stored offsets are past this batch";
/// COPY data is sent in chunks of about this size.
const COPY_CHUNK: usize = 1 << 20;

pub fn quote(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

fn qualified(t: &TableName) -> String {
    match &t.schema {
        Some(s) => format!("{}.{}", quote(s), quote(&t.table)),
        None => quote(&t.table),
    }
}

/// Classifies a driver error by what it calls for.
fn classify(context: &str, e: tokio_postgres::Error) -> WriteError {
    let kind = match e.code().map(|c| c.code()) {
        None => ErrorKind::Retriable,
        Some(code) => match &code[..2] {
            "08" | "40" | "53" | "57" | "58" => ErrorKind::Retriable,
            "55" if code == "55P03" => ErrorKind::Retriable,
            "22" | "23" | "42" | "44" | "2B" => ErrorKind::Data,
            _ => ErrorKind::Fatal,
        },
    };
    let mut message = context.to_owned();
    if let Some(db) = e.as_db_error() {
        message.push_str(&format!(": {} (SQLSTATE {})", db.message(), db.code().code()));
        if let Some(d) = db.detail() {
            message.push_str(&format!("; {d}"));
        }
        if let Some(w) = db.where_() {
            message.push_str(&format!("; {}", w.replace('\n', " / ")));
        }
    }
    WriteError { kind, message, source: Some(Box::new(e)), origin: None }
}

pub struct PgWriter {
    cfg: Arc<JdbcSinkConfig>,
    client: Option<Client>,
    /// Column name → type of each table seen, as the catalog has them.
    tables: HashMap<TableName, Vec<(String, String)>>,
    /// The staging tables of the current connection.
    staging: Staging,
    /// Statements prepared on the current connection, by text (the offsets statement and
    /// each table's write statements run with every batch).
    statements: Statements,
}

/// Prepared statements of one connection, by text.
type Statements = HashMap<String, Statement>;

impl PgWriter {
    pub fn new(cfg: Arc<JdbcSinkConfig>) -> Self {
        Self { cfg, client: None, tables: HashMap::new(), staging: Staging::default(), statements: HashMap::new() }
    }

    fn offsets_table(&self) -> String {
        self.cfg.offsets_table.split('.').map(quote).collect::<Vec<_>>().join(".")
    }

    async fn open(&mut self) -> Result<&mut Client, WriteError> {
        if self.client.as_ref().is_some_and(|c| !c.is_closed()) {
            return Ok(self.client.as_mut().expect("checked"));
        }
        self.client = None;
        self.tables.clear();
        self.staging = Staging::default();
        self.statements.clear();
        let pg = self.cfg.pg_config();
        let mut attempt = 0;
        let client = loop {
            attempt += 1;
            let tls = self.cfg.url.tls.connector().map_err(|message| WriteError {
                kind: ErrorKind::Fatal,
                message,
                source: None,
                origin: None,
            })?;
            match pg.connect(tls).await {
                Ok((client, conn)) => {
                    tokio::spawn(async move {
                        if let Err(e) = conn.await {
                            tracing::debug!(error = %e, "target connection closed");
                        }
                    });
                    break client;
                }
                Err(e) if attempt < self.cfg.connection_attempts && crate::pg_tls::find_refusal(&e).is_none() => {
                    tracing::warn!(attempt, error = %e, "cannot connect to the target; trying again");
                    tokio::time::sleep(Duration::from_millis(self.cfg.connection_backoff_ms)).await;
                }
                Err(e) => {
                    // A certificate the server refuses will not be accepted on a retry either.
                    let refused = crate::pg_tls::find_refusal(&e).is_some();
                    let mut err =
                        classify(&format!("cannot connect to {}:{}/{}", self.cfg.url.host, self.cfg.url.port, self.cfg.url.dbname), e);
                    if err.kind == ErrorKind::Data || refused {
                        err.kind = ErrorKind::Fatal; // e.g. a wrong password, a missing database, a refused certificate
                    }
                    return Err(err);
                }
            }
        };
        let ddl = format!(
            "CREATE TABLE IF NOT EXISTS {} (connector text NOT NULL, topic text NOT NULL, partition integer NOT NULL, \
             next_offset bigint NOT NULL, updated_at timestamptz NOT NULL DEFAULT clock_timestamp(), PRIMARY KEY (connector, topic, partition))",
            self.offsets_table()
        );
        if let Err(e) = client.batch_execute(&ddl).await {
            // Two tasks creating it at once: one loses the race and retries.
            let mut err = classify("cannot create the offsets table", e);
            if err.kind == ErrorKind::Data {
                err.kind = ErrorKind::Retriable;
            }
            return Err(err);
        }
        Ok(self.client.insert(client))
    }
}

/// Looks a table's columns up; empty when the table does not exist.
async fn columns_of(tx: &mut Tx<'_, '_>, t: &TableName) -> Result<Vec<(String, String)>, WriteError> {
    tx.flush().await?;
    let rows = tx
        .client
        .query(
            "SELECT a.attname::text, format_type(a.atttypid, a.atttypmod) FROM pg_attribute a \
             WHERE a.attrelid = to_regclass($1) AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum",
            &[&qualified(t)],
        )
        .await
        .map_err(|e| classify(&format!("cannot read the columns of {t}"), e))?;
    Ok(rows.iter().map(|r| (r.get::<_, String>(0), r.get::<_, String>(1))).collect())
}

/// Creates or evolves the table as needed; returns the target type of each batch column.
async fn ensure_table(
    tx: &mut Tx<'_, '_>,
    cfg: &JdbcSinkConfig,
    cache: &mut HashMap<TableName, Vec<(String, String)>>,
    tb: &TableBatch,
) -> Result<Vec<String>, WriteError> {
    let data = |message: String| WriteError { kind: ErrorKind::Data, message, source: None, origin: Some(tb.first_origin) };
    let lookup = |cols: &[(String, String)]| -> Vec<Option<String>> {
        tb.columns.iter().map(|c| cols.iter().find(|(n, _)| *n == c.name).map(|(_, t)| t.clone())).collect()
    };
    if let Some(cols) = cache.get(&tb.name) {
        let types = lookup(cols);
        if types.iter().all(Option::is_some) {
            return Ok(types.into_iter().flatten().collect());
        }
    }
    let mut cols = columns_of(tx, &tb.name).await?;
    let target_types =
        |c: &super::batch::Column| schema::column_type(&c.schema).map_err(|e| data(format!("column {} of {}: {e}", c.name, tb.name)));
    if cols.is_empty() {
        if !cfg.auto_create {
            return Err(data(format!("table {} does not exist; create it, or set auto.create=true (schema.evolution=basic)", tb.name)));
        }
        let mut defs = Vec::new();
        for (i, c) in tb.columns.iter().enumerate() {
            defs.push(format!("{} {}{}", quote(&c.name), target_types(c)?, if i < tb.key_len { " NOT NULL" } else { "" }));
        }
        if tb.key_len > 0 {
            let keys: Vec<String> = tb.columns[..tb.key_len].iter().map(|c| quote(&c.name)).collect();
            defs.push(format!("PRIMARY KEY ({})", keys.join(", ")));
        }
        let storage = match cfg.table_fillfactor {
            100 => String::new(),
            n => format!(" WITH (fillfactor = {n})"),
        };
        let sql = format!("CREATE TABLE IF NOT EXISTS {} ({}){storage}", qualified(&tb.name), defs.join(", "));
        tracing::info!(table = %tb.name, %sql, "creating table");
        tx.run(sql, format!("cannot create table {}", tb.name), None).await?;
        cols = columns_of(tx, &tb.name).await?;
    }
    let missing: Vec<&super::batch::Column> = tb.columns.iter().filter(|c| !cols.iter().any(|(n, _)| *n == c.name)).collect();
    if !missing.is_empty() {
        let names: Vec<&str> = missing.iter().map(|c| c.name.as_str()).collect();
        if !cfg.auto_evolve {
            return Err(data(format!(
                "table {} has no column {}; add it, or set auto.evolve=true (schema.evolution=basic)",
                tb.name,
                names.join(", ")
            )));
        }
        let mut adds = Vec::new();
        for c in &missing {
            adds.push(format!("ADD COLUMN IF NOT EXISTS {} {}", quote(&c.name), target_types(c)?));
        }
        let sql = format!("ALTER TABLE {} {}", qualified(&tb.name), adds.join(", "));
        tracing::info!(table = %tb.name, %sql, "adding columns");
        tx.run(sql, format!("cannot add columns to {}", tb.name), None).await?;
        cols = columns_of(tx, &tb.name).await?;
    }
    let types = lookup(&cols);
    cache.insert(tb.name.clone(), cols);
    types
        .into_iter()
        .enumerate()
        .map(|(i, t)| t.ok_or_else(|| data(format!("column {} of {} is still missing", tb.columns[i].name, tb.name))))
        .collect()
}

/// Appends one COPY text-format field.
fn copy_field(out: &mut Vec<u8>, cell: Option<&str>) {
    match cell {
        None => out.extend_from_slice(b"\\N"),
        Some(s) => {
            // Runs without a special byte are copied whole.
            let bytes = s.as_bytes();
            let mut run = 0;
            for (i, &b) in bytes.iter().enumerate() {
                let escaped: &[u8] = match b {
                    b'\\' => b"\\\\",
                    b'\t' => b"\\t",
                    b'\n' => b"\\n",
                    b'\r' => b"\\r",
                    _ => continue,
                };
                out.extend_from_slice(&bytes[run..i]);
                out.extend_from_slice(escaped);
                run = i + 1;
            }
            out.extend_from_slice(&bytes[run..]);
        }
    }
}

/// The staging tables of one connection. Each column layout gets one temporary table,
/// created once (`ON COMMIT DELETE ROWS`: every transaction finds it empty) instead of
/// created and dropped in each transaction, which costs catalog writes per batch.
#[derive(Default)]
pub struct Staging {
    /// Table name per column layout.
    names: HashMap<String, String>,
    /// Tables that exist in the session (created by a committed transaction).
    committed: HashSet<String>,
    /// Created by the current transaction (gone if it rolls back).
    created: Vec<String>,
    /// Filled by the current transaction.
    used: HashSet<String>,
}

impl Staging {
    /// An empty staging table with these columns (and, with `mask`, the unchanged-columns
    /// list), for the current transaction.
    fn prepare(&mut self, tx: &mut Tx<'_, '_>, columns: &[(&str, &str)], mask: bool) -> String {
        let mut defs: Vec<String> = columns.iter().map(|(n, t)| format!("{} {t}", quote(n))).collect();
        if mask {
            defs.push(format!("{UNCHANGED_COLUMN} integer[]"));
        }
        let layout = defs.join(", ");
        let next = self.names.len();
        let name = self.names.entry(layout.clone()).or_insert_with(|| format!("sluice_stage_{next}")).clone();
        if self.used.contains(&name) {
            tx.queue(format!("DELETE FROM {name}"), "cannot empty a staging table", None);
        } else if !self.committed.contains(&name) && !self.created.contains(&name) {
            tx.queue(
                format!("CREATE TEMP TABLE IF NOT EXISTS {name} ({layout}) ON COMMIT DELETE ROWS"),
                "cannot create a staging table",
                None,
            );
            self.created.push(name.clone());
        }
        self.used.insert(name.clone());
        name
    }

    /// The current transaction ended: committed, or rolled back.
    fn finish(&mut self, committed: bool) {
        if committed {
            self.committed.extend(self.created.drain(..));
        } else {
            self.created.clear();
        }
        self.used.clear();
    }
}

/// Fills a staging table with these columns and copies the rows in; returns its name.
/// With `mask`, a last column lists the (1-based) columns each row leaves unchanged.
async fn stage(tx: &mut Tx<'_, '_>, staging: &mut Staging, columns: &[(&str, &str)], rows: &[&Row], mask: bool) -> Result<String, WriteError> {
    let name = staging.prepare(tx, columns, mask);
    // The statements queued so far go out with the COPY, in one round trip.
    let queued = std::mem::take(&mut tx.ops);
    let copy = format!("COPY {name} FROM STDIN");
    let (before, sink) = futures_util::join!(Tx::execute(tx.client, queued), tx.client.copy_in::<_, Bytes>(&copy));
    before?;
    let sink = sink.map_err(|e| classify("cannot start COPY", e))?;
    futures_util::pin_mut!(sink);
    let mut buf = Vec::with_capacity(COPY_CHUNK + 4096);
    for row in rows {
        let mut unchanged = Vec::new();
        for i in 0..columns.len() {
            if i > 0 {
                buf.push(b'\t');
            }
            let cell = row.cell(i);
            if *cell == Cell::Unchanged {
                unchanged.push((i + 1).to_string());
            }
            copy_field(&mut buf, cell.text().as_deref());
        }
        if mask {
            buf.push(b'\t');
            if unchanged.is_empty() {
                copy_field(&mut buf, None);
            } else {
                copy_field(&mut buf, Some(&format!("{{{}}}", unchanged.join(","))));
            }
        }
        buf.push(b'\n');
        if buf.len() >= COPY_CHUNK {
            sink.send(Bytes::from(std::mem::take(&mut buf))).await.map_err(|e| classify("COPY into a staging table failed", e))?;
        }
    }
    if !buf.is_empty() {
        sink.send(Bytes::from(buf)).await.map_err(|e| classify("COPY into a staging table failed", e))?;
    }
    sink.as_mut().finish().await.map_err(|e| classify("COPY into a staging table failed", e))?;
    Ok(name)
}

/// `rows`' cells of `columns` as a relation for a statement's FROM: one array parameter
/// per column, as `s.c1 … s.cN` (see [`Encoding`] and [`cast`]); and the parameters. The
/// arrays are unnested side by side in a select list (equal lengths: one row per index),
/// which streams the rows where `unnest(a, b, …)` in FROM would first store them.
fn unnest<'b>(columns: &[(&str, &str)], rows: &[&'b Row]) -> (String, Vec<Encoding>, Vec<Param<'b>>) {
    let encodings: Vec<Encoding> = columns.iter().enumerate().map(|(i, (_, ty))| Encoding::choose(ty, rows, i)).collect();
    let arrays: Vec<String> =
        encodings.iter().enumerate().map(|(i, e)| format!("unnest(${}::{}) AS c{}", i + 1, e.array_type(), i + 1)).collect();
    let params = encodings
        .iter()
        .enumerate()
        .map(|(i, &encoding)| Box::new(ColumnArray { cells: rows.iter().map(|r| r.cell(i)).collect(), encoding }) as Param<'b>)
        .collect();
    (format!("(SELECT {}) AS s", arrays.join(", ")), encodings, params)
}

/// Column `i` of [`unnest`]'s relation as the column's type: cast from text when it was
/// sent as text.
fn cast(i: usize, ty: &str, encoding: Encoding) -> String {
    if encoding != Encoding::Text || ty == "text" {
        format!("s.c{}", i + 1)
    } else {
        format!("s.c{}::{ty}", i + 1)
    }
}

/// Microseconds from 1970-01-01 to 2000-01-01, PostgreSQL's epoch for binary timestamps.
const PG_EPOCH_MICROS: i64 = 946_684_800_000_000;

/// How a column's values go to the server: in binary when the column has a type of their
/// own kind (`bigint` for integers, `timestamp` for timestamps, …) and every value fits it,
/// else as text, cast by the statement to the column's type (its text input form, what
/// `COPY` reads). Both give the same stored value; binary spares the server the parsing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Encoding {
    Text,
    Int8,
    Int4,
    Int2,
    Float8,
    Float4,
    Bool,
    Timestamp,
}

impl Encoding {
    fn choose(ty: &str, rows: &[&Row], i: usize) -> Self {
        let candidate = match ty {
            "bigint" => Encoding::Int8,
            "integer" => Encoding::Int4,
            "smallint" => Encoding::Int2,
            "double precision" => Encoding::Float8,
            "real" => Encoding::Float4,
            "boolean" => Encoding::Bool,
            "timestamp without time zone" => Encoding::Timestamp,
            _ => return Encoding::Text,
        };
        let fits = |cell: &Cell| match (candidate, cell) {
            (_, Cell::Null) => true,
            (Encoding::Int8, Cell::Int(_)) | (Encoding::Float8, Cell::Float64(_)) | (Encoding::Float4, Cell::Float32(_)) => true,
            (Encoding::Bool, Cell::Bool(_)) => true,
            (Encoding::Int4, Cell::Int(v)) => i32::try_from(*v).is_ok(),
            (Encoding::Int2, Cell::Int(v)) => i16::try_from(*v).is_ok(),
            // i64::MIN and MAX are -infinity and infinity in binary; the text form of such a
            // value is out of range, as the server says when it reads it.
            (Encoding::Timestamp, Cell::Timestamp(us)) => us.checked_sub(PG_EPOCH_MICROS).is_some_and(|v| v != i64::MIN && v != i64::MAX),
            _ => false,
        };
        if rows.iter().all(|r| fits(r.cell(i))) {
            candidate
        } else {
            Encoding::Text
        }
    }

    fn array_type(self) -> &'static str {
        match self {
            Encoding::Text => "text[]",
            Encoding::Int8 => "bigint[]",
            Encoding::Int4 => "integer[]",
            Encoding::Int2 => "smallint[]",
            Encoding::Float8 => "double precision[]",
            Encoding::Float4 => "real[]",
            Encoding::Bool => "boolean[]",
            Encoding::Timestamp => "timestamp[]",
        }
    }

    fn element(self) -> Type {
        match self {
            Encoding::Text => Type::TEXT,
            Encoding::Int8 => Type::INT8,
            Encoding::Int4 => Type::INT4,
            Encoding::Int2 => Type::INT2,
            Encoding::Float8 => Type::FLOAT8,
            Encoding::Float4 => Type::FLOAT4,
            Encoding::Bool => Type::BOOL,
            Encoding::Timestamp => Type::TIMESTAMP,
        }
    }
}

/// One column of a batch as a one-dimensional array parameter, in the binary format.
#[derive(Debug)]
struct ColumnArray<'b> {
    cells: Vec<&'b Cell>,
    encoding: Encoding,
}

impl ToSql for ColumnArray<'_> {
    fn to_sql(&self, _: &Type, out: &mut BytesMut) -> Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
        let nulls = self.cells.iter().any(|c| matches!(c, Cell::Null | Cell::Unchanged));
        out.put_i32(1); // dimensions
        out.put_i32(i32::from(nulls));
        out.put_u32(self.encoding.element().oid());
        out.put_i32(i32::try_from(self.cells.len())?);
        out.put_i32(1); // lower bound
        for cell in &self.cells {
            match (self.encoding, cell) {
                (_, Cell::Null | Cell::Unchanged) => out.put_i32(-1),
                (Encoding::Int8, Cell::Int(v)) => {
                    out.put_i32(8);
                    out.put_i64(*v);
                }
                (Encoding::Int4, Cell::Int(v)) => {
                    out.put_i32(4);
                    out.put_i32(i32::try_from(*v)?);
                }
                (Encoding::Int2, Cell::Int(v)) => {
                    out.put_i32(2);
                    out.put_i16(i16::try_from(*v)?);
                }
                (Encoding::Float8, Cell::Float64(bits)) => {
                    out.put_i32(8);
                    out.put_u64(*bits);
                }
                (Encoding::Float4, Cell::Float32(bits)) => {
                    out.put_i32(4);
                    out.put_u32(*bits);
                }
                (Encoding::Bool, Cell::Bool(b)) => {
                    out.put_i32(1);
                    out.put_u8(u8::from(*b));
                }
                (Encoding::Timestamp, Cell::Timestamp(us)) => {
                    out.put_i32(8);
                    out.put_i64(us - PG_EPOCH_MICROS);
                }
                (Encoding::Text, cell) => {
                    let text = cell.text().unwrap_or_default();
                    out.put_i32(i32::try_from(text.len())?);
                    out.put_slice(text.as_bytes());
                }
                (encoding, cell) => return Err(format!("a {cell:?} value cannot be sent as {encoding:?}").into()),
            }
        }
        Ok(IsNull::No)
    }

    fn accepts(ty: &Type) -> bool {
        [Type::TEXT_ARRAY, Type::INT8_ARRAY, Type::INT4_ARRAY, Type::INT2_ARRAY, Type::FLOAT8_ARRAY, Type::FLOAT4_ARRAY, Type::BOOL_ARRAY, Type::TIMESTAMP_ARRAY]
            .contains(ty)
    }

    to_sql_checked!();
}

/// Applies one table's steps.
async fn apply_table<'b>(
    tx: &mut Tx<'_, 'b>,
    cfg: &JdbcSinkConfig,
    cache: &mut HashMap<TableName, Vec<(String, String)>>,
    statements: &mut Statements,
    tb: &'b TableBatch,
    staging: &mut Staging,
) -> Result<(), WriteError> {
    if tb.steps.is_empty() {
        return Ok(());
    }
    let types = ensure_table(tx, cfg, cache, tb).await?;
    let table = TableSql::new(tb, &types);
    let TableSql { target, cols, col_list, key_list, conflict } = &table;
    let keys = &cols[..tb.key_len];
    let values = &cols[tb.key_len..];
    // Key columns equal, between the target and unnest's relation.
    let key_match_cast = |encodings: &[Encoding]| {
        keys.iter().enumerate().map(|(i, (k, t))| format!("t.{} = {}", quote(k), cast(i, t, encodings[i]))).collect::<Vec<_>>().join(" AND ")
    };
    let at = |e: WriteError, origin: usize| WriteError { origin: e.origin.or(Some(origin)), ..e };
    for step in &tb.steps {
        match step {
            Step::Truncate { origin } => {
                tx.queue(format!("TRUNCATE TABLE {target}"), format!("cannot truncate {}", tb.name), Some(*origin));
            }
            Step::Apply(seg) => {
                if !seg.deletes.is_empty() {
                    let rows: Vec<&Row> = seg.deletes.iter().collect();
                    let (source, encodings, params) = unnest(keys, &rows);
                    let sql = format!("DELETE FROM {target} AS t USING {source} WHERE {}", key_match_cast(&encodings));
                    tx.queue_prepared(statements, sql, params, format!("cannot delete from {}", tb.name), Some(rows[0].origin)).await?;
                }
                let rows: Vec<&Row> = seg.rows().collect();
                if rows.is_empty() {
                    continue;
                }
                let first = rows[0].origin;
                if rows.iter().any(|r| r.has_unchanged()) {
                    // Rows that keep some columns as the target has them.
                    apply_masked(tx, cfg, staging, &table, tb, &rows).await.map_err(|e| at(e, first))?;
                    continue;
                }
                let (source, encodings, params) = unnest(cols, &rows);
                let select = cols.iter().enumerate().map(|(i, (_, t))| cast(i, t, encodings[i])).collect::<Vec<_>>().join(", ");
                let sql = match cfg.insert_mode {
                    InsertMode::Upsert => {
                        format!("INSERT INTO {target} ({col_list}) SELECT {select} FROM {source} ON CONFLICT ({key_list}) {conflict}")
                    }
                    InsertMode::Insert => format!("INSERT INTO {target} ({col_list}) SELECT {select} FROM {source}"),
                    InsertMode::Update if values.is_empty() => continue,
                    InsertMode::Update => {
                        let set: Vec<String> = values
                            .iter()
                            .enumerate()
                            .map(|(j, (c, t))| format!("{} = {}", quote(c), cast(tb.key_len + j, t, encodings[tb.key_len + j])))
                            .collect();
                        format!("UPDATE {target} AS t SET {} FROM {source} WHERE {}", set.join(", "), key_match_cast(&encodings))
                    }
                };
                tx.queue_prepared(statements, sql, params, format!("cannot write to {}", tb.name), Some(first)).await?;
            }
        }
    }
    Ok(())
}

/// What a table's statements share: the target, its columns (name and type, keys first),
/// their quoted lists, and the upsert's conflict action.
struct TableSql<'c> {
    target: String,
    cols: Vec<(&'c str, &'c str)>,
    col_list: String,
    key_list: String,
    conflict: String,
}

impl<'c> TableSql<'c> {
    fn new(tb: &'c TableBatch, types: &'c [String]) -> Self {
        let cols: Vec<(&str, &str)> = tb.columns.iter().zip(types).map(|(c, t)| (c.name.as_str(), t.as_str())).collect();
        let list = |cols: &[(&str, &str)]| cols.iter().map(|(c, _)| quote(c)).collect::<Vec<_>>().join(", ");
        let values = &cols[tb.key_len..];
        let conflict = if values.is_empty() {
            "DO NOTHING".to_owned()
        } else {
            format!("DO UPDATE SET {}", values.iter().map(|(c, _)| format!("{} = EXCLUDED.{}", quote(c), quote(c))).collect::<Vec<_>>().join(", "))
        };
        Self { target: qualified(&tb.name), col_list: list(&cols), key_list: list(&cols[..tb.key_len]), conflict, cols }
    }
}

/// Writes rows of which some keep columns unchanged, through a staging table.
async fn apply_masked(
    tx: &mut Tx<'_, '_>,
    cfg: &JdbcSinkConfig,
    staging: &mut Staging,
    table: &TableSql<'_>,
    tb: &TableBatch,
    rows: &[&Row],
) -> Result<(), WriteError> {
    let TableSql { target, cols, col_list, key_list, conflict } = table;
    let first = rows[0].origin;
    let keys = &cols[..tb.key_len];
    let values = &cols[tb.key_len..];
    let key_match =
        |a: &str, b: &str| keys.iter().map(|(k, _)| format!("{a}.{} = {b}.{}", quote(k), quote(k))).collect::<Vec<_>>().join(" AND ");
    let name = stage(tx, staging, cols, rows, true).await?;
    let keep_unchanged = |i: usize, c: &str| {
        format!("{} = CASE WHEN {} = ANY(s.{UNCHANGED_COLUMN}) THEN t.{} ELSE s.{} END", quote(c), i + 1, quote(c), quote(c))
    };
    let set_masked: Vec<String> = values.iter().enumerate().map(|(j, (c, _))| keep_unchanged(tb.key_len + j, c)).collect();
    let select_nulling: Vec<String> = cols
        .iter()
        .enumerate()
        .map(|(i, (c, _))| format!("CASE WHEN {} = ANY(s.{UNCHANGED_COLUMN}) THEN NULL ELSE s.{} END", i + 1, quote(c)))
        .collect();
    let mut statements = Vec::new();
    match cfg.insert_mode {
        InsertMode::Upsert => {
            statements.push(format!(
                "INSERT INTO {target} ({col_list}) SELECT {col_list} FROM {name} WHERE {UNCHANGED_COLUMN} IS NULL ON CONFLICT ({key_list}) {conflict}"
            ));
            if !set_masked.is_empty() {
                statements.push(format!(
                    "UPDATE {target} AS t SET {} FROM {name} AS s WHERE s.{UNCHANGED_COLUMN} IS NOT NULL AND {}",
                    set_masked.join(", "),
                    key_match("t", "s")
                ));
            }
            statements.push(format!(
                "INSERT INTO {target} ({col_list}) SELECT {} FROM {name} AS s WHERE s.{UNCHANGED_COLUMN} IS NOT NULL AND NOT EXISTS (SELECT 1 FROM {target} AS t WHERE {})",
                select_nulling.join(", "),
                key_match("t", "s")
            ));
        }
        InsertMode::Insert => statements.push(format!("INSERT INTO {target} ({col_list}) SELECT {col_list} FROM {name}")),
        InsertMode::Update => {
            if !set_masked.is_empty() {
                statements.push(format!("UPDATE {target} AS t SET {} FROM {name} AS s WHERE {}", set_masked.join(", "), key_match("t", "s")));
            }
        }
    }
    for sql in statements {
        tx.queue(sql, format!("cannot write to {}", tb.name), Some(first));
    }
    Ok(())
}

async fn apply<'b>(
    tx: &mut Tx<'_, 'b>,
    cfg: &JdbcSinkConfig,
    cache: &mut HashMap<TableName, Vec<(String, String)>>,
    statements: &mut Statements,
    batch: &'b Batch,
    staging: &mut Staging,
) -> Result<(), WriteError> {
    for tb in &batch.tables {
        apply_table(tx, cfg, cache, statements, tb, staging).await?;
    }
    Ok(())
}

#[async_trait]
impl Dialect for PgWriter {
    async fn connect(&mut self) -> Result<(), WriteError> {
        self.open().await.map(|_| ())
    }

    async fn read_offsets(&mut self, connector: &str) -> Result<BTreeMap<TopicPartition, i64>, WriteError> {
        let sql = format!("SELECT topic, partition, next_offset FROM {} WHERE connector = $1", self.offsets_table());
        let client = self.open().await?;
        let rows = client.query(&sql, &[&connector]).await.map_err(|e| classify("cannot read the offsets table", e))?;
        Ok(rows.iter().map(|r| (TopicPartition::new(r.get::<_, String>(0), r.get::<_, i32>(1)), r.get::<_, i64>(2))).collect())
    }

    async fn write(&mut self, connector: &str, batch: &Batch) -> Result<(), WriteError> {
        // Compare and set: a partition's stored next offset moves only if it is not past the
        // first record of this batch. When it is, another writer (e.g. the backend of a
        // killed worker, whose COMMIT was already on its way) applied these records: the
        // statement fails (see `OFFSETS_MOVED`), the transaction rolls back and the offsets
        // are read again. The conflict waits for that writer's transaction to end, so the
        // check sees what it committed. Failing inside the statement lets the COMMIT go out
        // with it: a transaction that failed turns the COMMIT into a rollback.
        let offsets_sql = format!(
            "WITH stored AS (\
               INSERT INTO {0} AS o (connector, topic, partition, next_offset) \
               SELECT $1, t, p, n FROM unnest($2::text[], $3::integer[], $4::bigint[]) AS u(t, p, n) \
               ON CONFLICT (connector, topic, partition) DO UPDATE SET next_offset = EXCLUDED.next_offset, updated_at = clock_timestamp() \
               WHERE o.next_offset <= (SELECT f FROM unnest($2::text[], $3::integer[], $5::bigint[]) AS x(t, p, f) \
                                       WHERE x.t = EXCLUDED.topic AND x.p = EXCLUDED.partition) \
               RETURNING 1) \
             SELECT CASE WHEN count(*) = cardinality($2::text[]) THEN 0 \
                         ELSE ('{OFFSETS_MOVED}: ' || count(*) || ' of ' || cardinality($2::text[]) || ' set')::integer END \
             FROM stored",
            self.offsets_table()
        );
        let cfg = self.cfg.clone();
        self.open().await?;
        let mut cache = std::mem::take(&mut self.tables);
        let mut staging = std::mem::take(&mut self.staging);
        let statements = &mut self.statements;
        let client = self.client.as_mut().expect("connected");
        let topics: Vec<String> = batch.offsets.keys().map(|tp| tp.topic.clone()).collect();
        let partitions: Vec<i32> = batch.offsets.keys().map(|tp| tp.partition).collect();
        let next: Vec<i64> = batch.offsets.values().copied().collect();
        let first: Vec<i64> = batch.offsets.iter().map(|(tp, n)| batch.first.get(tp).copied().unwrap_or(*n)).collect();
        let mut tx = Tx::begin(client);
        let result = async {
            apply(&mut tx, &cfg, &mut cache, statements, batch, &mut staging).await?;
            // The statements not sent yet, the offsets and the commit: one round trip.
            let params: Vec<Param> =
                vec![Box::new(connector.to_owned()), Box::new(topics), Box::new(partitions), Box::new(next), Box::new(first)];
            tx.queue_prepared(statements, offsets_sql, params, "cannot store offsets", None).await?;
            tx.queue("COMMIT".to_owned(), "cannot commit", None);
            tx.flush().await
        }
        .await;
        if result.is_err() {
            tx.rollback().await;
        }
        staging.finish(result.is_ok());
        self.staging = staging;
        match result {
            Ok(()) => {
                self.tables = cache;
                Ok(())
            }
            Err(e) => {
                // Rolled back: DDL of this transaction too, so forget what was learnt (and
                // prepare the statements again, in case their tables changed).
                self.tables.clear();
                self.statements.clear();
                Err(e)
            }
        }
    }

    async fn probe(&mut self, batch: &Batch) -> Result<(), WriteError> {
        let cfg = self.cfg.clone();
        self.open().await?;
        let mut staging = std::mem::take(&mut self.staging);
        let statements = &mut self.statements;
        let client = self.client.as_mut().expect("connected");
        let mut tx = Tx::begin(client);
        let result = async {
            let mut cache = HashMap::new();
            apply(&mut tx, &cfg, &mut cache, statements, batch, &mut staging).await?;
            tx.flush().await
        }
        .await;
        tx.rollback().await;
        staging.finish(false);
        self.staging = staging;
        result
    }
}

/// A statement of the next round trip.
struct Op<'b> {
    kind: OpKind<'b>,
    /// What the statement does, for an error message.
    context: String,
    /// The first record the statement writes, if known.
    origin: Option<usize>,
}

enum OpKind<'b> {
    /// Statements whose result is only an error or not, as one simple-query message.
    Simple(String),
    /// A prepared statement and its parameters; its result too is only an error or not
    /// (the offsets' compare and set fails its statement, see `OFFSETS_MOVED`).
    Prepared(Statement, Vec<Param<'b>>),
}

/// A parameter of a prepared statement.
type Param<'b> = Box<dyn ToSql + Sync + Send + 'b>;

/// A transaction on a connection, with the statements of the next round trip: what runs
/// in a transaction goes out together with the next statement that needs an answer (a
/// COPY, a catalog query, the offsets), in order, pipelined.
struct Tx<'a, 'b> {
    client: &'a Client,
    ops: Vec<Op<'b>>,
}

impl<'a, 'b> Tx<'a, 'b> {
    /// Starts a transaction: BEGIN goes out with the first round trip.
    fn begin(client: &'a mut Client) -> Self {
        let mut tx = Self { client, ops: Vec::new() };
        tx.queue("BEGIN".to_owned(), "cannot begin a transaction", None);
        tx
    }

    /// Queues statements without parameters (joined with those queued just before).
    fn queue(&mut self, sql: String, context: impl Into<String>, origin: Option<usize>) {
        if let Some(Op { kind: OpKind::Simple(queued), context: c, origin: o }) = self.ops.last_mut() {
            queued.push_str(";\n");
            queued.push_str(&sql);
            *c = context.into();
            *o = o.or(origin);
        } else {
            self.ops.push(Op { kind: OpKind::Simple(sql), context: context.into(), origin });
        }
    }

    /// Queues a statement with parameters, prepared on the connection the first time.
    async fn queue_prepared(
        &mut self,
        statements: &mut Statements,
        sql: String,
        params: Vec<Param<'b>>,
        context: impl Into<String>,
        origin: Option<usize>,
    ) -> Result<(), WriteError> {
        let context = context.into();
        let statement = match statements.get(&sql) {
            Some(s) => s.clone(),
            None => {
                let s = self.client.prepare(&sql).await.map_err(|e| WriteError { origin, ..classify(&context, e) })?;
                statements.insert(sql, s.clone());
                s
            }
        };
        self.ops.push(Op { kind: OpKind::Prepared(statement, params), context, origin });
        Ok(())
    }

    /// Runs `sql` now, after what is queued.
    async fn run(&mut self, sql: String, context: String, origin: Option<usize>) -> Result<(), WriteError> {
        self.queue(sql, context, origin);
        self.flush().await
    }

    /// Sends what is queued and waits for the answers.
    async fn flush(&mut self) -> Result<(), WriteError> {
        let ops = std::mem::take(&mut self.ops);
        Self::execute(self.client, ops).await
    }

    async fn execute(client: &Client, ops: Vec<Op<'b>>) -> Result<(), WriteError> {
        // Each request is sent when its future is first polled, in order: one round trip.
        let results = futures_util::future::join_all(ops.iter().map(|op| async move {
            match &op.kind {
                OpKind::Simple(sql) => client.batch_execute(sql).await,
                OpKind::Prepared(statement, params) => {
                    let params: Vec<&(dyn ToSql + Sync)> = params.iter().map(|p| p.as_ref() as &(dyn ToSql + Sync)).collect();
                    client.execute(statement, &params).await.map(|_| ())
                }
            }
        }))
        .await;
        // The first error is the cause; those after it only say the transaction aborted.
        for (op, result) in ops.iter().zip(results) {
            match result {
                Ok(()) => {}
                Err(e) if e.as_db_error().is_some_and(|db| db.message().contains(OFFSETS_MOVED)) => {
                    return Err(WriteError {
                        kind: ErrorKind::Retriable,
                        message: "the target already holds offsets past this batch (written by another instance of this task); \
                                  reading them again"
                            .to_owned(),
                        source: Some(Box::new(e)),
                        origin: None,
                    });
                }
                Err(e) => {
                    let err = classify(&op.context, e);
                    return Err(WriteError { origin: err.origin.or(op.origin), ..err });
                }
            }
        }
        Ok(())
    }

    /// Ends the transaction without keeping anything (nothing to do when it already ended).
    async fn rollback(&mut self) {
        self.ops.clear();
        if let Err(e) = self.client.batch_execute("ROLLBACK").await {
            tracing::debug!(error = %e, "rollback failed; the connection is reset before the next write");
        }
    }
}

#[cfg(test)]
mod copy_tests {
    use super::copy_field;

    #[test]
    fn copy_fields_escape_what_the_text_format_needs() {
        let field = |cell: Option<&str>| {
            let mut out = Vec::new();
            copy_field(&mut out, cell);
            String::from_utf8(out).unwrap()
        };
        assert_eq!(field(None), "\\N");
        assert_eq!(field(Some("")), "");
        assert_eq!(field(Some("plain é text")), "plain é text");
        assert_eq!(field(Some("a\\b\tc\nd\re")), "a\\\\b\\tc\\nd\\re");
        assert_eq!(field(Some("\n\n")), "\\n\\n");
        assert_eq!(field(Some("end\\")), "end\\\\");
    }
}
