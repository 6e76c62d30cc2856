//! From sink records to a [`Batch`]: per table, an ordered list of steps (truncate, or a
//! set of deletes and upserts), with several changes to one key collapsed into one.
//!
//! Records are read as Debezium change events when the value is an envelope (a struct
//! with `op` and `before`/`after`): `c`, `r` and `u` write the `after` image, `d` deletes
//! (with `delete.enabled`), `t` truncates (with `truncate.enabled`). Any other struct value
//! is a flat row (e.g. after an unwrap transform); a null value is a tombstone, a delete
//! with `delete.enabled`.
//!
//! Collapsing (upsert and update modes, with a key): the last change to a key wins, with
//! two refinements that keep the result equal to applying the changes one by one:
//! - an upsert whose column is [`Cell::Unchanged`] takes that column from an earlier
//!   upsert of the same key in the batch (the target does not have that value yet);
//! - a delete followed by an upsert of the same key deletes first, so columns the record
//!   does not carry are reset as a re-insert would.
//!
//! A truncate ends the table's current step: changes before it are dropped, changes after
//! it go to a new step. Insert mode and key-less modes do not collapse; there a delete after
//! upserts starts a new step so that it runs after them.

use std::collections::{BTreeMap, HashMap};

use sluice_api::{SchemaRef, SchemaType, SinkRecord, Struct, TopicPartition, Value};

use super::config::{Flavor, InsertMode, JdbcSinkConfig, PkMode};
use super::schema::{self, Cell};

/// Default names of the `pk.mode=kafka` columns.
pub const KAFKA_PK_NAMES: [&str; 3] = ["__connect_topic", "__connect_partition", "__connect_offset"];

/// Where a change came from, for error messages.
#[derive(Debug, Clone)]
pub struct Origin {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    /// The record key as text (`null` when absent).
    pub key: String,
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "topic {} partition {} offset {} key {}", self.topic, self.partition, self.offset, self.key)
    }
}

/// A table name, already folded as the quoting rule says.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TableName {
    pub schema: Option<String>,
    pub table: String,
}

impl std::fmt::Display for TableName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.schema {
            Some(s) => write!(f, "{s}.{}", self.table),
            None => f.write_str(&self.table),
        }
    }
}

#[derive(Debug, Clone)]
pub struct Column {
    pub name: String,
    pub schema: SchemaRef,
}

/// One row to write: cells aligned with the table batch's columns (a shorter row has
/// nulls for the columns after it).
#[derive(Debug, Clone)]
pub struct Row {
    pub cells: Vec<Cell>,
    pub origin: usize,
}

impl Row {
    pub fn cell(&self, i: usize) -> &Cell {
        self.cells.get(i).unwrap_or(&Cell::Null)
    }

    pub fn has_unchanged(&self) -> bool {
        self.cells.contains(&Cell::Unchanged)
    }
}

#[derive(Debug, Clone, Copy)]
enum Slot {
    Upsert { index: usize, deleted_first: bool },
    Deleted,
}

/// Deletes (run first) and upserts of one step.
#[derive(Debug, Default)]
pub struct Segment {
    /// Key cells of rows to delete.
    pub deletes: Vec<Row>,
    /// Rows to write; `None` where a later delete of the batch removed it.
    pub upserts: Vec<Option<Row>>,
    slots: HashMap<Vec<Cell>, Slot>,
}

impl Segment {
    pub fn rows(&self) -> impl Iterator<Item = &Row> {
        self.upserts.iter().flatten()
    }
}

#[derive(Debug)]
pub enum Step {
    Truncate { origin: usize },
    Apply(Segment),
}

#[derive(Debug)]
pub struct TableBatch {
    pub name: TableName,
    /// Key columns first (`key_len` of them), then value columns in order of appearance.
    pub columns: Vec<Column>,
    pub key_len: usize,
    pub steps: Vec<Step>,
    /// The first record of this table in the batch (for errors about the table itself).
    pub first_origin: usize,
    collapse: bool,
}

impl TableBatch {
    fn segment(&mut self) -> &mut Segment {
        if !matches!(self.steps.last(), Some(Step::Apply(_))) {
            self.steps.push(Step::Apply(Segment::default()));
        }
        match self.steps.last_mut() {
            Some(Step::Apply(s)) => s,
            _ => unreachable!("an apply step was just pushed"),
        }
    }

    fn upsert(&mut self, row: Row) {
        let key_len = self.key_len;
        let collapse = self.collapse;
        let seg = self.segment();
        if !collapse {
            seg.upserts.push(Some(row));
            return;
        }
        let key: Vec<Cell> = row.cells[..key_len].to_vec();
        match seg.slots.get(&key).copied() {
            None => {
                seg.slots.insert(key, Slot::Upsert { index: seg.upserts.len(), deleted_first: false });
                seg.upserts.push(Some(row));
            }
            Some(Slot::Upsert { index, .. }) => {
                let mut row = row;
                if let Some(prev) = seg.upserts[index].take() {
                    for (i, c) in row.cells.iter_mut().enumerate() {
                        if *c == Cell::Unchanged {
                            if let Some(p) = prev.cells.get(i).filter(|p| **p != Cell::Unchanged) {
                                *c = p.clone();
                            }
                        }
                    }
                }
                seg.upserts[index] = Some(row);
            }
            Some(Slot::Deleted) => {
                seg.slots.insert(key, Slot::Upsert { index: seg.upserts.len(), deleted_first: true });
                seg.upserts.push(Some(row));
            }
        }
    }

    fn delete(&mut self, key: Row) {
        let collapse = self.collapse;
        if !collapse {
            if self.segment().upserts.iter().any(Option::is_some) {
                self.steps.push(Step::Apply(Segment::default()));
            }
            self.segment().deletes.push(key);
            return;
        }
        let seg = self.segment();
        match seg.slots.get(&key.cells).copied() {
            None => {
                seg.slots.insert(key.cells.clone(), Slot::Deleted);
                seg.deletes.push(key);
            }
            Some(Slot::Upsert { index, deleted_first }) => {
                seg.upserts[index] = None;
                seg.slots.insert(key.cells.clone(), Slot::Deleted);
                if !deleted_first {
                    seg.deletes.push(key);
                }
            }
            Some(Slot::Deleted) => {}
        }
    }

    fn truncate(&mut self, origin: usize) {
        self.steps.clear();
        self.steps.push(Step::Truncate { origin });
    }

    /// The index of a column, adding it when new.
    fn column(&mut self, name: &str, schema: &SchemaRef) -> usize {
        match self.columns.iter().position(|c| c.name == name) {
            Some(i) => i,
            None => {
                self.columns.push(Column { name: name.to_owned(), schema: schema.clone() });
                self.columns.len() - 1
            }
        }
    }
}

/// Everything one transaction writes.
#[derive(Debug, Default)]
pub struct Batch {
    pub tables: Vec<TableBatch>,
    pub origins: Vec<Origin>,
    /// Next offset per partition once this batch is applied.
    pub offsets: BTreeMap<TopicPartition, i64>,
    /// The first offset per partition this batch covers: the target must not have stored
    /// a next offset past it (else another writer applied this batch already).
    pub first: BTreeMap<TopicPartition, i64>,
}

/// A record that cannot be turned into a change, with the reason.
#[derive(Debug)]
pub struct BadRecord {
    pub origin: Origin,
    pub reason: String,
}

/// How a record's value reads.
enum Shape<'a> {
    Upsert(&'a Struct),
    Delete { before: Option<&'a Struct> },
    Truncate,
    Skip,
}

fn shape(record: &SinkRecord) -> Result<(Shape<'_>, Option<&Struct>), String> {
    let value = match &record.value {
        Value::Null => return Ok((Shape::Delete { before: None }, None)),
        Value::Struct(s) => s,
        other => {
            return Err(format!(
                "the value is {} but must be a struct (this sink needs schemas: e.g. JsonConverter with schemas.enable=true)",
                kind(other)
            ))
        }
    };
    let envelope = value.schema().field("op").is_some_and(|f| f.schema.kind == SchemaType::String)
        && (value.schema().field("after").is_some() || value.schema().field("before").is_some());
    if !envelope {
        return Ok((Shape::Upsert(value), None));
    }
    let source = value.get("source").and_then(Value::as_struct);
    let side = |name: &str| value.get(name).and_then(Value::as_struct);
    let shape = match value.get("op").and_then(Value::as_str) {
        Some("c" | "r" | "u") => match side("after") {
            Some(after) => Shape::Upsert(after),
            None => return Err("a create/read/update event without an after image".to_owned()),
        },
        Some("d") => Shape::Delete { before: side("before") },
        Some("t") => Shape::Truncate,
        Some("m") => Shape::Skip,
        other => return Err(format!("unknown change event op {other:?}")),
    };
    Ok((shape, source))
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Boolean(_) => "a boolean",
        Value::Int8(_) | Value::Int16(_) | Value::Int32(_) | Value::Int64(_) => "an integer",
        Value::Float32(_) | Value::Float64(_) => "a float",
        Value::String(_) => "a string",
        Value::Bytes(_) => "bytes",
        Value::Array(_) => "an array",
        Value::Map(_) => "a map",
        Value::Struct(_) => "a struct",
    }
}

/// A short text form of a record key, for error messages.
pub fn describe_key(v: &Value) -> String {
    match v {
        Value::Null => "null".to_owned(),
        Value::String(s) => format!("{s:?}"),
        Value::Struct(s) => {
            let parts: Vec<String> =
                s.schema().fields.iter().zip(s.values()).map(|(f, v)| format!("{}={}", f.name, describe_key(v))).collect();
            format!("{{{}}}", parts.join(", "))
        }
        Value::Bytes(b) => format!("<{} bytes>", b.len()),
        other => format!("{other:?}").trim_start_matches(|c: char| c.is_alphanumeric()).trim_matches(|c| c == '(' || c == ')').to_owned(),
    }
}

/// Folds an identifier as the quoting rule says: kept with quoting, lower case without.
pub fn fold(name: &str, quote: bool) -> String {
    if quote {
        name.to_owned()
    } else {
        name.to_lowercase()
    }
}

/// The table a record goes to.
pub fn table_name(cfg: &JdbcSinkConfig, topic: &str, source: Option<&Struct>) -> Result<TableName, String> {
    let src = |k: &str| source.and_then(|s| s.get(k)).and_then(Value::as_str);
    let mut name = cfg.table_name_format.clone();
    let topic_part = if cfg.flavor == Flavor::Debezium { topic.replace('.', "_") } else { topic.to_owned() };
    name = name.replace("${topic}", &topic_part);
    for key in ["db", "schema", "table"] {
        let placeholder = format!("${{source.{key}}}");
        if name.contains(&placeholder) {
            let v = src(key).ok_or_else(|| format!("table.name.format uses {placeholder} but the record has no source.{key}"))?;
            name = name.replace(&placeholder, v);
        }
    }
    let parts: Vec<&str> = name.split('.').collect();
    let (schema, table) = match parts.as_slice() {
        [t] => (None, *t),
        [s, t] => (Some(*s), *t),
        [_db, s, t] => (Some(*s), *t),
        _ => return Err(format!("table name {name:?} has more than three dot-separated parts")),
    };
    if table.is_empty() {
        return Err(format!("table.name.format gives an empty table name for topic {topic}"));
    }
    Ok(TableName { schema: schema.map(|s| fold(s, cfg.quote_identifiers)), table: fold(table, cfg.quote_identifiers) })
}

/// The next offset per partition once `records` are applied.
pub fn next_offsets(records: &[SinkRecord]) -> BTreeMap<TopicPartition, i64> {
    let mut offsets = BTreeMap::new();
    for r in records {
        let next = offsets.entry(r.topic_partition()).or_insert(r.offset + 1);
        *next = (*next).max(r.offset + 1);
    }
    offsets
}

/// The first offset of each partition in `records`.
pub fn first_offsets(records: &[SinkRecord]) -> BTreeMap<TopicPartition, i64> {
    let mut offsets = BTreeMap::new();
    for r in records {
        let first = offsets.entry(r.topic_partition()).or_insert(r.offset);
        *first = (*first).min(r.offset);
    }
    offsets
}

/// Builds a batch from records, in order. Every record counts for the offsets, also those
/// that write nothing (skipped operations).
///
/// `topic_tables` remembers the table of each topic seen with a `source` block: a
/// tombstone has none, and goes to the table of its topic's change events (when the format
/// uses `${source.…}` and the topic was not seen yet, the tombstone is skipped: the delete
/// event before it did the work).
pub fn build(cfg: &JdbcSinkConfig, records: &[SinkRecord], topic_tables: &mut HashMap<String, TableName>) -> Result<Batch, BadRecord> {
    let mut batch = Batch { offsets: next_offsets(records), first: first_offsets(records), ..Batch::default() };
    let mut by_name: HashMap<TableName, usize> = HashMap::new();
    let collapse = cfg.pk_mode != PkMode::None && cfg.pk_mode != PkMode::Kafka && cfg.insert_mode != InsertMode::Insert;
    for record in records {
        let origin =
            Origin { topic: record.topic.clone(), partition: record.partition, offset: record.offset, key: describe_key(&record.key) };
        let oi = batch.origins.len();
        batch.origins.push(origin.clone());
        let fail = |reason: String| BadRecord { origin: origin.clone(), reason };
        let (shape, source) = shape(record).map_err(fail)?;
        let is_delete = matches!(shape, Shape::Delete { .. });
        let wanted = match &shape {
            Shape::Skip => false,
            Shape::Delete { .. } => cfg.delete_enabled,
            Shape::Truncate => cfg.truncate_enabled,
            Shape::Upsert(_) => true,
        };
        if !wanted {
            continue;
        }
        let needs_source = cfg.table_name_format.contains("${source.");
        let name = match (source, needs_source) {
            (None, true) if record.value.is_null() => match topic_tables.get(&record.topic) {
                Some(n) => n.clone(),
                None => {
                    tracing::debug!(topic = %record.topic, offset = record.offset, "skipping a tombstone of a topic whose table is not known yet");
                    continue;
                }
            },
            _ => table_name(cfg, &record.topic, source).map_err(fail)?,
        };
        if source.is_some() && needs_source {
            topic_tables.insert(record.topic.clone(), name.clone());
        }
        let ti = *by_name.entry(name.clone()).or_insert_with(|| {
            batch.tables.push(TableBatch { name, columns: Vec::new(), key_len: 0, steps: Vec::new(), first_origin: oi, collapse });
            batch.tables.len() - 1
        });
        let table = &mut batch.tables[ti];
        match shape {
            Shape::Truncate => table.truncate(oi),
            Shape::Upsert(row) => {
                let key = key_cells(cfg, record, Some(row), table).map_err(fail)?;
                let mut cells = key;
                for (field, value) in row.schema().fields.iter().zip(row.values()) {
                    let name = fold(&field.name, cfg.quote_identifiers);
                    if table.columns[..table.key_len].iter().any(|c| c.name == name) || !cfg.fields.keeps(&field.name) {
                        continue;
                    }
                    let ci = table.column(&name, &field.schema);
                    if cells.len() <= ci {
                        cells.resize(ci + 1, Cell::Null);
                    }
                    cells[ci] = schema::cell(value, &field.schema).map_err(|e| fail(format!("field {}: {e}", field.name)))?;
                }
                table.upsert(Row { cells, origin: oi });
            }
            Shape::Delete { before } => {
                debug_assert!(is_delete);
                let key = key_cells(cfg, record, before, table).map_err(fail)?;
                if key.contains(&Cell::Null) {
                    return Err(fail("a delete without a key: deletes need a non-null record key".to_owned()));
                }
                table.delete(Row { cells: key, origin: oi });
            }
            Shape::Skip => {}
        }
    }
    Ok(batch)
}

/// The key cells of a record, registering the key columns of the table on first use.
fn key_cells(cfg: &JdbcSinkConfig, record: &SinkRecord, row: Option<&Struct>, table: &mut TableBatch) -> Result<Vec<Cell>, String> {
    let mut cols: Vec<(String, SchemaRef, Cell)> = Vec::new();
    match cfg.pk_mode {
        PkMode::None => {}
        PkMode::Kafka => {
            let names: Vec<String> =
                if cfg.pk_fields.len() == 3 { cfg.pk_fields.clone() } else { KAFKA_PK_NAMES.iter().map(|s| (*s).to_owned()).collect() };
            cols.push((names[0].clone(), sluice_api::Schema::string().into_ref(), Cell::Text(record.topic.clone())));
            cols.push((names[1].clone(), sluice_api::Schema::int32().into_ref(), Cell::Text(record.partition.to_string())));
            cols.push((names[2].clone(), sluice_api::Schema::int64().into_ref(), Cell::Text(record.offset.to_string())));
        }
        PkMode::RecordKey => match &record.key {
            Value::Struct(k) => struct_key(cfg, k, &mut cols)?,
            Value::Null => return Err("the record key is null but pk.mode is record_key".to_owned()),
            primitive => {
                let [name] = cfg.pk_fields.as_slice() else {
                    return Err("a primitive record key needs exactly one column name in pk.fields (primary.key.fields)".to_owned());
                };
                let schema = record.key_schema.clone().ok_or("the record key has no schema")?;
                cols.push((name.clone(), schema.clone(), schema::cell(primitive, &schema)?));
            }
        },
        PkMode::RecordValue => match row {
            Some(r) => struct_key(cfg, r, &mut cols)?,
            None => return Err("pk.mode is record_value but the record has no value".to_owned()),
        },
    }
    let names: Vec<String> = cols.iter().map(|(n, _, _)| fold(n, cfg.quote_identifiers)).collect();
    if table.columns.is_empty() {
        for (name, (_, schema, _)) in names.iter().zip(&cols) {
            table.columns.push(Column { name: name.clone(), schema: schema.clone() });
        }
        table.key_len = cols.len();
    } else if table.key_len != names.len() || table.columns[..table.key_len].iter().zip(&names).any(|(c, n)| c.name != *n) {
        return Err(format!("the key columns {names:?} differ from those of earlier records of table {}", table.name));
    }
    Ok(cols.into_iter().map(|(_, _, c)| c).collect())
}

fn struct_key(cfg: &JdbcSinkConfig, s: &Struct, out: &mut Vec<(String, SchemaRef, Cell)>) -> Result<(), String> {
    if cfg.pk_fields.is_empty() {
        for (f, v) in s.schema().fields.iter().zip(s.values()) {
            out.push((f.name.clone(), f.schema.clone(), schema::cell(v, &f.schema)?));
        }
    } else {
        for name in &cfg.pk_fields {
            let f = s
                .schema()
                .field(name)
                .ok_or_else(|| format!("primary key field {name:?} is not in the {}", s.schema().name.as_deref().unwrap_or("struct")))?;
            let v = s.get(name).unwrap_or(&Value::Null);
            out.push((f.name.clone(), f.schema.clone(), schema::cell(v, &f.schema)?));
        }
    }
    if out.iter().any(|(_, _, c)| *c == Cell::Unchanged) {
        return Err("a key column holds the unavailable-value placeholder".to_owned());
    }
    Ok(())
}
