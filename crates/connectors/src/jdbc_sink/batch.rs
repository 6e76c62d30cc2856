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

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};

/// The maps looked up once or more per record: foldhash, seeded per process.
type FastMap<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

use sluice_api::{SchemaRef, SchemaType, SinkRecord, Struct, TopicPartition, Value};

use super::config::{Flavor, InsertMode, JdbcSinkConfig, PkMode};
use super::schema::{self, Cell};
use crate::value_json::kind;

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

impl Origin {
    pub fn of(record: &SinkRecord) -> Self {
        Self { topic: record.topic.clone(), partition: record.partition, offset: record.offset, key: describe_key(&record.key) }
    }
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
    slots: FastMap<Vec<Cell>, Slot>,
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

/// Folds an identifier as the quoting rule says: kept with quoting, lower case without
/// (borrowed when that changes nothing).
pub fn fold(name: &str, quote: bool) -> Cow<'_, str> {
    if quote || (name.is_ascii() && !name.bytes().any(|b| b.is_ascii_uppercase())) {
        Cow::Borrowed(name)
    } else {
        Cow::Owned(name.to_lowercase())
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
    Ok(TableName {
        schema: schema.map(|s| fold(s, cfg.quote_identifiers).into_owned()),
        table: fold(table, cfg.quote_identifiers).into_owned(),
    })
}

/// Per partition of `records`: the next offset once they are applied, and the first one.
pub fn offsets(records: &[SinkRecord]) -> (BTreeMap<TopicPartition, i64>, BTreeMap<TopicPartition, i64>) {
    let ranges = offset_ranges(records);
    (ranges.iter().map(|(tp, (_, next))| (tp.clone(), *next)).collect(), ranges.into_iter().map(|(tp, (first, _))| (tp, first)).collect())
}

/// Per partition of `records`: the first offset, and the next one once they are applied.
/// A partition's map entry is touched once per run of its records (usually once).
fn offset_ranges(records: &[SinkRecord]) -> BTreeMap<TopicPartition, (i64, i64)> {
    let mut out: BTreeMap<TopicPartition, (i64, i64)> = BTreeMap::new();
    let mut run: Option<(&str, i32, i64, i64)> = None;
    let mut end_run = |run: Option<(&str, i32, i64, i64)>| {
        if let Some((topic, partition, first, next)) = run {
            let range = out.entry(TopicPartition::new(topic, partition)).or_insert((first, next));
            *range = (range.0.min(first), range.1.max(next));
        }
    };
    for r in records {
        match &mut run {
            Some((topic, partition, first, next)) if *topic == r.topic && *partition == r.partition => {
                *first = (*first).min(r.offset);
                *next = (*next).max(r.offset + 1);
            }
            _ => end_run(run.replace((&r.topic, r.partition, r.offset, r.offset + 1))),
        }
    }
    end_run(run);
    out
}

/// What decides a record's table: its topic, and the source names when the format uses
/// them.
#[derive(PartialEq, Eq, Hash)]
struct TableKey<'r> {
    topic: &'r str,
    source: [Option<&'r str>; 3],
}

impl<'r> TableKey<'r> {
    fn of(topic: &'r str, source: Option<&'r Struct>) -> Self {
        let part = |k: &str| source.and_then(|s| s.get(k)).and_then(Value::as_str);
        Self { topic, source: [part("db"), part("schema"), part("table")] }
    }
}

/// The index of the batch's table of that name, added when new.
fn table_index(batch: &mut Batch, by_name: &mut HashMap<TableName, usize>, name: TableName, origin: usize, collapse: bool) -> usize {
    if let Some(ti) = by_name.get(&name) {
        return *ti;
    }
    batch.tables.push(TableBatch { name: name.clone(), columns: Vec::new(), key_len: 0, steps: Vec::new(), first_origin: origin, collapse });
    by_name.insert(name, batch.tables.len() - 1);
    batch.tables.len() - 1
}

/// Builds a batch from records, in order. Every record counts for the offsets, also those
/// that write nothing (skipped operations).
///
/// `topic_tables` remembers the table of each topic seen with a `source` block: a
/// tombstone has none, and goes to the table of its topic's change events (when the format
/// uses `${source.…}` and the topic was not seen yet, the tombstone is skipped: the delete
/// event before it did the work).
pub fn build(cfg: &JdbcSinkConfig, records: &[SinkRecord], topic_tables: &mut HashMap<String, TableName>) -> Result<Batch, BadRecord> {
    let (offsets, first) = offsets(records);
    let mut batch = Batch { offsets, first, ..Batch::default() };
    let mut by_name: HashMap<TableName, usize> = HashMap::new();
    let collapse = cfg.pk_mode != PkMode::None && cfg.pk_mode != PkMode::Kafka && cfg.insert_mode != InsertMode::Insert;
    let needs_source = cfg.table_name_format.contains("${source.");
    // The table of each topic (and source db, schema and table, when the format names
    // them) met in this batch, and the column of each field of each row schema met per
    // table (`None`: a key column, or a field not written): worked out once per batch.
    let mut table_of: FastMap<TableKey<'_>, usize> = FastMap::default();
    let mut layouts: FastMap<(usize, *const sluice_api::Schema), Vec<Option<usize>>> = FastMap::default();
    for (oi, record) in records.iter().enumerate() {
        let fail = |reason: String| BadRecord { origin: Origin::of(record), reason };
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
        let table_key = TableKey::of(&record.topic, source.filter(|_| needs_source));
        let ti = match (source, needs_source, table_of.get(&table_key)) {
            (None, true, _) if record.value.is_null() => match topic_tables.get(&record.topic) {
                Some(n) => table_index(&mut batch, &mut by_name, n.clone(), oi, collapse),
                None => {
                    tracing::debug!(topic = %record.topic, offset = record.offset, "skipping a tombstone of a topic whose table is not known yet");
                    continue;
                }
            },
            (_, _, Some(ti)) => *ti,
            _ => {
                let name = table_name(cfg, &record.topic, source).map_err(fail)?;
                let ti = table_index(&mut batch, &mut by_name, name, oi, collapse);
                table_of.insert(table_key, ti);
                ti
            }
        };
        if source.is_some() && needs_source && topic_tables.get(&record.topic) != Some(&batch.tables[ti].name) {
            topic_tables.insert(record.topic.clone(), batch.tables[ti].name.clone());
        }
        let table = &mut batch.tables[ti];
        match shape {
            Shape::Truncate => table.truncate(oi),
            Shape::Upsert(row) => {
                let key = key_cells(cfg, record, Some(row), table).map_err(fail)?;
                let mut cells = key;
                let layout = layouts.entry((ti, std::sync::Arc::as_ptr(row.schema()))).or_insert_with(|| {
                    row.schema()
                        .fields
                        .iter()
                        .map(|field| {
                            let name = fold(&field.name, cfg.quote_identifiers);
                            let skip = table.columns[..table.key_len].iter().any(|c| c.name == name) || !cfg.fields.keeps(&field.name);
                            (!skip).then(|| table.column(&name, &field.schema))
                        })
                        .collect()
                });
                for ((field, value), ci) in row.schema().fields.iter().zip(row.values()).zip(layout.iter()) {
                    let Some(ci) = *ci else { continue };
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
    let names: Vec<Cow<'_, str>> = cols.iter().map(|(n, _, _)| fold(n, cfg.quote_identifiers)).collect();
    if table.columns.is_empty() {
        for (name, (_, schema, _)) in names.iter().zip(&cols) {
            table.columns.push(Column { name: name.clone().into_owned(), schema: schema.clone() });
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

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_api::{Props, Schema};

    fn cfg(pairs: &[(&str, &str)]) -> JdbcSinkConfig {
        let mut p: Props = [
            ("connector.class", "io.debezium.connector.jdbc.JdbcSinkConnector"),
            ("connection.url", "jdbc:postgresql://h/d"),
            ("connection.username", "u"),
            ("insert.mode", "upsert"),
            ("primary.key.mode", "record_value"),
            ("primary.key.fields", "id"),
        ]
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
        p.extend(pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())));
        JdbcSinkConfig::parse(&p).unwrap()
    }

    /// A Debezium create event of `srv.<table>` with the row `(id, Name[, extra])`.
    fn event(topic: &str, partition: i32, offset: i64, table: &str, id: i64, extra: bool) -> SinkRecord {
        let mut fields = vec![("id", Schema::int64().into_ref()), ("Name", Schema::string().into_ref())];
        if extra {
            fields.push(("extra", Schema::string().into_ref()));
        }
        let row_schema = Schema::struct_of(fields).optional().into_ref();
        let source_schema =
            Schema::struct_of([("db", Schema::string().into_ref()), ("schema", Schema::string().into_ref()), ("table", Schema::string().into_ref())])
                .into_ref();
        let schema = Schema::struct_of([
            ("after", row_schema.clone()),
            ("source", source_schema.clone()),
            ("op", Schema::string().into_ref()),
        ])
        .into_ref();
        let mut row = Struct::new(row_schema).with("id", id).with("Name", format!("n{id}"));
        if extra {
            row = row.with("extra", "x");
        }
        let source = Struct::new(source_schema).with("db", "srv").with("schema", "public").with("table", table);
        let value = Struct::new(schema.clone()).with("after", Value::Struct(row)).with("source", Value::Struct(source)).with("op", "c");
        SinkRecord { topic: topic.into(), partition, offset, value_schema: Some(schema), value: Value::Struct(value), ..Default::default() }
    }

    fn upserted(t: &TableBatch) -> Vec<String> {
        let mut out = Vec::new();
        for step in &t.steps {
            if let Step::Apply(seg) = step {
                for row in seg.rows() {
                    out.push(row.cells.iter().map(|c| c.text().map(|t| t.into_owned()).unwrap_or_else(|| "-".into())).collect::<Vec<_>>().join(","));
                }
            }
        }
        out
    }

    #[test]
    fn offsets_of_interleaved_partitions() {
        let r = |topic: &str, partition, offset| SinkRecord { topic: topic.into(), partition, offset, ..Default::default() };
        let records = [r("a", 0, 5), r("a", 1, 3), r("a", 0, 7), r("a", 0, 6), r("b", 0, 9), r("a", 1, 2), r("a", 0, 4)];
        let (next, first) = offsets(&records);
        let flat = |m: BTreeMap<TopicPartition, i64>| m.into_iter().map(|(tp, n)| (tp.topic, tp.partition, n)).collect::<Vec<_>>();
        let (next, first) = (flat(next), flat(first));
        assert_eq!(next, [("a".to_owned(), 0, 8), ("a".to_owned(), 1, 4), ("b".to_owned(), 0, 10)]);
        assert_eq!(first, [("a".to_owned(), 0, 4), ("a".to_owned(), 1, 2), ("b".to_owned(), 0, 9)]);
    }

    /// One topic whose events name different source tables, rows of two schemas for one
    /// table, and a tombstone: each goes where its own record says, whatever came before.
    #[test]
    fn records_go_to_the_tables_and_columns_they_name() {
        let c = cfg(&[("collection.name.format", "${source.table}"), ("delete.enabled", "true"), ("primary.key.mode", "record_key")]);
        let keyed = |mut r: SinkRecord, id: i64| {
            let ks = Schema::struct_of([("id", Schema::int64().into_ref())]).into_ref();
            r.key = Value::Struct(Struct::new(ks.clone()).with("id", id));
            r.key_schema = Some(ks);
            r
        };
        let tombstone = keyed(SinkRecord { topic: "srv".into(), offset: 5, ..Default::default() }, 2);
        let records = vec![
            keyed(event("srv", 0, 0, "one", 1, false), 1),
            keyed(event("srv", 0, 1, "two", 1, false), 1),
            keyed(event("srv", 0, 2, "one", 2, true), 2),
            keyed(event("srv", 0, 3, "One", 3, false), 3),
            keyed(event("srv", 0, 4, "two", 2, false), 2),
            tombstone,
        ];
        let mut topic_tables = HashMap::new();
        let b = build(&c, &records, &mut topic_tables).unwrap();
        let names: Vec<String> = b.tables.iter().map(|t| t.name.to_string()).collect();
        assert_eq!(names, ["one", "two"], "names folded to lower case: One is one");
        let columns: Vec<&str> = b.tables[0].columns.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(columns, ["id", "name", "extra"]);
        assert_eq!(upserted(&b.tables[0]), ["1,n1", "2,n2,x", "3,n3"]);
        // The tombstone goes to the table of its topic's last event (two) and removes key 2.
        assert_eq!(upserted(&b.tables[1]), ["1,n1"]);
        assert_eq!(topic_tables.get("srv").map(ToString::to_string).as_deref(), Some("two"));
        // Quoted identifiers keep their case: One is a table of its own.
        let quoted = cfg(&[("collection.name.format", "${source.table}"), ("quote.identifiers", "true")]);
        let b = build(&quoted, &records[..4], &mut HashMap::new()).unwrap();
        let names: Vec<String> = b.tables.iter().map(|t| t.name.to_string()).collect();
        assert_eq!(names, ["one", "two", "One"]);
        assert_eq!(b.tables[0].columns.iter().map(|c| c.name.as_str()).collect::<Vec<_>>(), ["id", "Name", "extra"]);
    }
}
