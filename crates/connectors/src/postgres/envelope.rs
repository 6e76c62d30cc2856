//! Debezium's record shape: topic `<prefix>.<schema>.<table>`, a key struct of the primary
//! key columns (`…Key`), and the change envelope (`…Envelope`, version 2, Debezium 3's field
//! order): `before`/`after` (`…Value`), `source` (`io.debezium.connector.postgresql.Source`),
//! `transaction`, `op`, `ts_ms`, `ts_us`, `ts_ns`.

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use sluice_api::{ConnectError, ConnectResult, Schema, SchemaRef, SchemaType, SourceOffset, SourcePartition, SourceRecord, Struct, Value};

use super::catalog::TableId;
use super::column::{ColumnMapper, ColumnRules, SourceColumn};
use super::decode::Datum;
use super::mapping::{self, Modes, PgType};

pub const SOURCE_SCHEMA_NAME: &str = "io.debezium.connector.postgresql.Source";
pub const CONNECTOR_NAME: &str = "postgresql";
const SNAPSHOT_VALUES: &str = "true,first,first_in_data_collection,last_in_data_collection,last,false,incremental";

/// The wall clock in nanoseconds since the epoch (the envelope's `ts_ns`).
fn now_ns() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX)).unwrap_or(0)
}

pub fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}

/// The `source` block schema, shared by every table.
pub fn source_schema() -> SchemaRef {
    let s = |schema: Schema| schema.into_ref();
    Schema::struct_of([
        ("version", s(Schema::string())),
        ("connector", s(Schema::string())),
        ("name", s(Schema::string())),
        ("ts_ms", s(Schema::int64())),
        (
            "snapshot",
            s(Schema::string()
                .optional()
                .named("io.debezium.data.Enum")
                .with_version(1)
                .with_parameter("allowed", SNAPSHOT_VALUES)
                .with_default(Value::String("false".into()))),
        ),
        ("db", s(Schema::string())),
        ("sequence", s(Schema::string().optional())),
        ("ts_us", s(Schema::int64().optional())),
        ("ts_ns", s(Schema::int64().optional())),
        ("schema", s(Schema::string())),
        ("table", s(Schema::string())),
        ("txId", s(Schema::int64().optional())),
        ("lsn", s(Schema::int64().optional())),
        ("xmin", s(Schema::int64().optional())),
        // Replication origins are not read: always null.
        ("origin", s(Schema::string().optional())),
        ("origin_lsn", s(Schema::int64().optional())),
    ])
    .named(SOURCE_SCHEMA_NAME)
    .with_version(1)
    .into_ref()
}

/// The `source` block of one event.
pub struct SourceInfo {
    pub ts_ms: i64,
    /// `"true"`, `"first"`, `"last"` or `"false"`.
    pub snapshot: &'static str,
    pub tx_id: Option<i64>,
    pub lsn: Option<u64>,
    pub sequence: Option<String>,
}

impl SourceInfo {
    /// Sets the per-event fields of a `source` block's values (see [`source_template`]).
    fn fill(&self, values: &mut [Value]) {
        values[3] = Value::Int64(self.ts_ms);
        values[4] = Value::String(self.snapshot.to_owned());
        values[6] = self.sequence.clone().map_or(Value::Null, Value::String);
        // The source time is known to the millisecond (commit time, or the snapshot's clock).
        values[7] = Value::Int64(self.ts_ms.saturating_mul(1_000));
        values[8] = Value::Int64(self.ts_ms.saturating_mul(1_000_000));
        values[11] = self.tx_id.map_or(Value::Null, Value::Int64);
        values[12] = self.lsn.map_or(Value::Null, |l| Value::Int64(l as i64));
    }
}

/// The `source` block's fields that are the same for every event of one table (the
/// per-event ones are `Null`, set by [`SourceInfo::fill`]).
fn source_template(server: &str, db: &str, schema: &str, table: &str) -> Vec<Value> {
    let mut values = vec![Value::Null; 16];
    values[0] = Value::String(env!("CARGO_PKG_VERSION").to_owned());
    values[1] = Value::String(CONNECTOR_NAME.to_owned());
    values[2] = Value::String(server.to_owned());
    values[5] = Value::String(db.to_owned());
    values[9] = Value::String(schema.to_owned());
    values[10] = Value::String(table.to_owned());
    values
}

/// A whole `source` block (for events of no table: `schema` and `table` are empty for a
/// logical decoding message, as in Debezium).
pub fn source_block(info: &SourceInfo, source_schema: &SchemaRef, server: &str, db: &str, schema: &str, table: &str) -> Value {
    let mut values = source_template(server, db, schema, table);
    info.fill(&mut values);
    Value::Struct(Struct::from_values(source_schema.clone(), values))
}

/// A mapped column of a table.
#[derive(Debug, Clone)]
pub struct Column {
    pub name: String,
    pub ty: PgType,
    pub optional: bool,
    /// The column mapper (`column.truncate.…`, `column.mask.…`) of this column, if any.
    pub mapper: Option<ColumnMapper>,
    /// Whether `before`/`after` hold it (`column.include.list`/`column.exclude.list`); a
    /// key column left out of them is still in the key, as in Debezium.
    pub in_value: bool,
    /// Its schema, before a mapper's parameters.
    pub schema: SchemaRef,
}

/// One input column (of a Relation message or a snapshot query) and what it maps to.
pub struct ColumnSpec {
    pub name: String,
    /// What column mappers need to know of the source type.
    pub source: SourceColumn,
    /// `None`: not mapped; the column is left out, as Debezium does with unknown types.
    pub ty: Option<PgType>,
    pub not_null: bool,
    pub pk_position: Option<usize>,
    /// The column's constant `DEFAULT`, in the stream's text form: the field's schema default,
    /// as Debezium puts it there.
    pub default: Option<String>,
}

/// Everything needed to turn a table's tuples into records.
pub struct TableSchema {
    pub id: TableId,
    pub topic: String,
    /// Aligned with the tuple's columns; `None` for columns left out.
    columns: Vec<Option<Column>>,
    /// Indices into a row struct's values of the primary key, in key order.
    key_fields: Vec<usize>,
    /// The `source` block's fields that are the same for every event of this table (the
    /// per-event ones are `Null` here and filled in by [`TableSchema::source`]).
    source_template: Vec<Value>,
    key_schema: Option<SchemaRef>,
    value_schema: SchemaRef,
    envelope_schema: SchemaRef,
    modes: Modes,
}

impl TableSchema {
    /// `rules` decide the message key: the columns `message.key.columns` names for this
    /// table, else its primary key.
    pub fn new(
        prefix: &str,
        db: &str,
        id: TableId,
        specs: Vec<ColumnSpec>,
        modes: &Modes,
        source: &SchemaRef,
        rules: &ColumnRules,
    ) -> Self {
        let base = modes.topics.data_topic(prefix, &id.schema, &id.table);
        let custom_key = rules.key_columns.for_table(&id, specs.iter().map(|s| s.ty.as_ref().map(|_| s.name.as_str())));
        let mut pk: Vec<(usize, usize)> = Vec::new();
        let columns: Vec<Option<Column>> = specs
            .into_iter()
            .enumerate()
            .map(|(i, s)| {
                let ty = s.ty?;
                if let Some(p) = s.pk_position {
                    pk.push((p, i));
                }
                let mapper = rules.mapper_for(&id, &s.name, s.source);
                let in_value = rules.includes(&id, &s.name);
                let optional = !s.not_null && s.pk_position.is_none();
                let mut schema = mapping::schema(&ty, modes, optional);
                if let Some(default) = s.default.as_deref().and_then(|text| mapping::value(&ty, modes, text).ok()) {
                    schema = schema.with_default(default);
                }
                let schema = schema.into_ref();
                Some(Column { name: s.name, ty, optional, mapper, in_value, schema })
            })
            .collect();
        pk.sort_unstable();
        let key: Vec<usize> = custom_key.unwrap_or_else(|| pk.into_iter().map(|(_, i)| i).collect());
        let key_fields = key.iter().map(|k| columns[..*k].iter().flatten().count()).collect();
        let field_name = |c: &Column| modes.field_names.adjust(&c.name, true).into_owned();
        let schema_name = |suffix: &str| modes.schema_names.adjust(&format!("{base}.{suffix}"), false).into_owned();
        let field = |c: &Column| (field_name(c), c.schema.clone());
        let value_field =
            |c: &Column| (field_name(c), c.mapper.as_ref().map_or(c.schema.clone(), |m| m.alter_schema((*c.schema).clone()).into_ref()));
        let value_schema = Schema::struct_of(columns.iter().flatten().filter(|c| c.in_value).map(value_field))
            .named(schema_name("Value"))
            .optional()
            .into_ref();
        let key_schema = (!key.is_empty()).then(|| {
            Schema::struct_of(key.iter().map(|i| field(columns[*i].as_ref().expect("key columns are mapped"))))
                .named(schema_name("Key"))
                .into_ref()
        });
        let envelope_schema = Schema::struct_of([
            ("before", value_schema.clone()),
            ("after", value_schema.clone()),
            ("source", source.clone()),
            ("transaction", super::transaction::block_schema()),
            ("op", Schema::string().into_ref()),
            ("ts_ms", Schema::int64().optional().into_ref()),
            ("ts_us", Schema::int64().optional().into_ref()),
            ("ts_ns", Schema::int64().optional().into_ref()),
        ])
        .named(schema_name("Envelope"))
        .with_version(2)
        .into_ref();
        let source_template = source_template(prefix, db, &id.schema, &id.table);
        Self { topic: base, id, columns, key_fields, source_template, key_schema, value_schema, envelope_schema, modes: modes.clone() }
    }

    pub fn has_key(&self) -> bool {
        self.key_schema.is_some()
    }

    /// The row struct of a tuple and its message key.
    pub fn row(&self, datums: &[Datum]) -> ConnectResult<Row> {
        if datums.len() != self.columns.len() {
            return Err(ConnectError::fatal(format!(
                "{}: tuple has {} columns, the table schema {}; restart the connector to reload it",
                self.id,
                datums.len(),
                self.columns.len()
            )));
        }
        let mut values = Vec::with_capacity(self.columns.len());
        for (col, datum) in self.columns.iter().zip(datums) {
            let Some(col) = col else { continue };
            values.push(match datum {
                // A delete's or key change's old tuple under REPLICA IDENTITY DEFAULT holds
                // only the key: the other required columns get Debezium's fallback value.
                Datum::Null if !col.optional => fallback(&col.schema),
                Datum::Null => Value::Null,
                Datum::UnchangedToast => super::toast::unavailable(&col.ty, &self.modes),
                Datum::Text(t) => {
                    let v = mapping::value(&col.ty, &self.modes, t)
                        .map_err(|e| ConnectError::fatal(format!("{}.{}: {e}", self.id, col.name)))?;
                    with_field_schema(v, &col.schema)
                }
            });
        }
        let key = match &self.key_schema {
            Some(schema) => {
                Value::Struct(Struct::from_values(schema.clone(), self.key_fields.iter().map(|i| values[*i].clone()).collect()))
            }
            None => Value::Null,
        };
        if self.columns.iter().flatten().any(|c| c.mapper.is_some() || !c.in_value) {
            values = values
                .into_iter()
                .zip(self.columns.iter().flatten())
                .filter(|(_, col)| col.in_value)
                .map(|(value, col)| match &col.mapper {
                    Some(m) => m.apply(value),
                    None => value,
                })
                .collect();
        }
        Ok(Row { value: Value::Struct(Struct::from_values(self.value_schema.clone(), values)), key })
    }

    fn source(&self, info: &SourceInfo, source_schema: &SchemaRef) -> Value {
        let mut values = self.source_template.clone();
        info.fill(&mut values);
        Value::Struct(Struct::from_values(source_schema.clone(), values))
    }

    /// A change record (`op` is c, u, d or r). The key comes from `after`, or `before` for
    /// a delete.
    #[allow(clippy::too_many_arguments)]
    pub fn record(
        &self,
        op: char,
        before: Row,
        after: Row,
        info: &SourceInfo,
        source_schema: &SchemaRef,
        partition: &SourcePartition,
        offset: SourceOffset,
    ) -> SourceRecord {
        let key = if after.value.is_null() { before.key } else { after.key };
        let now = now_ns();
        let envelope = Struct::from_values(
            self.envelope_schema.clone(),
            vec![
                before.value,
                after.value,
                self.source(info, source_schema),
                Value::Null,
                Value::String(op.to_string()),
                Value::Int64(now.div_euclid(1_000_000)),
                Value::Int64(now.div_euclid(1_000)),
                Value::Int64(now),
            ],
        );
        SourceRecord {
            source_partition: partition.clone(),
            source_offset: offset,
            topic: self.topic.clone(),
            key_schema: self.key_schema.clone(),
            key,
            value_schema: Some(self.envelope_schema.clone()),
            value: Value::Struct(envelope),
            ..SourceRecord::default()
        }
    }

    /// The tombstone that follows a delete: same key, null value.
    pub fn tombstone(&self, delete: &SourceRecord) -> SourceRecord {
        SourceRecord { value_schema: None, value: Value::Null, ..delete.clone() }
    }

    /// A truncate event: no key, no before/after.
    pub fn truncate(
        &self,
        info: &SourceInfo,
        source_schema: &SchemaRef,
        partition: &SourcePartition,
        offset: SourceOffset,
    ) -> SourceRecord {
        let mut r = self.record('t', Row::NONE, Row::NONE, info, source_schema, partition, offset);
        r.key = Value::Null;
        r.key_schema = None;
        r
    }
}

pub type SharedTable = Arc<TableSchema>;

/// One side (`before` or `after`) of a change: the row struct and the message key taken
/// from the row's values as read (before any column mapper).
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub value: Value,
    pub key: Value,
}

impl Row {
    /// The side a change does not have (`before` of an insert, `after` of a delete).
    pub const NONE: Row = Row { value: Value::Null, key: Value::Null };
}

/// The value Debezium puts in a required field that has no value (its schema default, else
/// zero, false, empty).
fn fallback(schema: &Schema) -> Value {
    if let Some(d) = &schema.default {
        return d.clone();
    }
    match schema.kind {
        SchemaType::Int8 => Value::Int8(0),
        SchemaType::Int16 => Value::Int16(0),
        SchemaType::Int32 => Value::Int32(0),
        SchemaType::Int64 => Value::Int64(0),
        SchemaType::Float32 => Value::Float32(0.0),
        SchemaType::Float64 => Value::Float64(0.0),
        SchemaType::Boolean => Value::Boolean(false),
        // Debezium's interval fallback under interval.handling.mode=string.
        SchemaType::String if schema.name.as_deref() == Some(mapping::names::INTERVAL) => Value::String("P0Y0M0DT0H0M0S".to_owned()),
        SchemaType::String => Value::String(String::new()),
        // A Decimal's unscaled value must have at least one byte.
        SchemaType::Bytes if schema.name.as_deref() == Some("org.apache.kafka.connect.data.Decimal") => Value::Bytes(vec![0]),
        SchemaType::Bytes => Value::Bytes(Vec::new()),
        SchemaType::Array => Value::Array(Vec::new()),
        SchemaType::Map => Value::Map(Vec::new()),
        SchemaType::Struct => {
            Value::Struct(Struct::from_values(schema.clone().into_ref(), schema.fields.iter().map(|f| fallback(&f.schema)).collect()))
        }
    }
}

/// Gives a struct value (also as an array element) the schema of the field it goes in.
/// [`mapping::value`] builds a VariableScaleDecimal with the required schema; in a nullable
/// column the field's schema is the optional one, and a converter rejects a struct whose own
/// schema differs from its field's (as Kafka's `ConnectSchema.validateValue` does).
fn with_field_schema(v: Value, schema: &SchemaRef) -> Value {
    match v {
        Value::Struct(st) if st.schema() != schema => Value::Struct(Struct::from_values(schema.clone(), st.values().to_vec())),
        Value::Array(items) => match &schema.value_schema {
            Some(element) => Value::Array(items.into_iter().map(|i| with_field_schema(i, element)).collect()),
            None => Value::Array(items),
        },
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_key_follow_debezium() {
        let modes = Modes::DEFAULT;
        let specs = vec![
            ColumnSpec {
                source: SourceColumn::of(25, -1),
                name: "name".into(),
                ty: Some(PgType::Text),
                not_null: false,
                pk_position: None,
                default: None,
            },
            ColumnSpec {
                source: SourceColumn::of(25, -1),
                name: "id".into(),
                ty: Some(PgType::Int4),
                not_null: true,
                pk_position: Some(1),
                default: None,
            },
            ColumnSpec {
                source: SourceColumn::of(25, -1),
                name: "weird".into(),
                ty: None,
                not_null: false,
                pk_position: None,
                default: None,
            },
        ];
        let t = TableSchema::new(
            "srv",
            "db",
            TableId { schema: "public".into(), table: "t".into() },
            specs,
            &modes,
            &source_schema(),
            &ColumnRules::default(),
        );
        assert_eq!(t.topic, "srv.public.t");
        let row = t.row(&[Datum::Text("x"), Datum::Text("5"), Datum::Text("?")]).unwrap();
        let info = SourceInfo { ts_ms: 1, snapshot: "false", tx_id: Some(9), lsn: Some(10), sequence: None };
        let r = t.record('c', Row::NONE, row, &info, &source_schema(), &SourcePartition::new(), SourceOffset::new());
        assert_eq!(r.key_schema.as_ref().unwrap().name.as_deref(), Some("srv.public.t.Key"));
        assert_eq!(r.key.as_struct().unwrap().get("id"), Some(&Value::Int32(5)));
        let env = r.value.as_struct().unwrap();
        assert_eq!(env.schema().name.as_deref(), Some("srv.public.t.Envelope"));
        assert_eq!(env.get("op"), Some(&Value::String("c".into())));
        let after = env.get("after").unwrap().as_struct().unwrap();
        assert_eq!(after.schema().fields.len(), 2, "unmapped column left out");
        let source = env.get("source").unwrap().as_struct().unwrap();
        assert_eq!(source.get("connector"), Some(&Value::String("postgresql".into())));
        assert_eq!(source.get("txId"), Some(&Value::Int64(9)));
        assert_eq!(source.get("lsn"), Some(&Value::Int64(10)));
        assert_eq!(source.get("ts_us"), Some(&Value::Int64(1_000)));
        assert_eq!(source.get("ts_ns"), Some(&Value::Int64(1_000_000)));
        assert_eq!(source.get("origin"), Some(&Value::Null));
        // Debezium 3.6's field order and envelope version.
        let names = |s: &Schema| s.fields.iter().map(|f| f.name.clone()).collect::<Vec<_>>();
        assert_eq!(names(env.schema()), ["before", "after", "source", "transaction", "op", "ts_ms", "ts_us", "ts_ns"]);
        assert_eq!(env.schema().version, Some(2));
        assert_eq!(
            names(source.schema()),
            [
                "version",
                "connector",
                "name",
                "ts_ms",
                "snapshot",
                "db",
                "sequence",
                "ts_us",
                "ts_ns",
                "schema",
                "table",
                "txId",
                "lsn",
                "xmin",
                "origin",
                "origin_lsn"
            ]
        );
        let (Some(Value::Int64(ms)), Some(Value::Int64(us)), Some(Value::Int64(ns))) =
            (env.get("ts_ms"), env.get("ts_us"), env.get("ts_ns"))
        else {
            panic!("{env:?}")
        };
        assert!(*ms == us / 1_000 && *us == ns / 1_000 && *ms > 1_600_000_000_000, "one instant in three units");
    }

    #[test]
    fn a_key_only_old_tuple_fills_required_columns_with_fallbacks() {
        let modes = Modes::DEFAULT;
        let specs = vec![
            ColumnSpec {
                source: SourceColumn::of(25, -1),
                name: "id".into(),
                ty: Some(PgType::Int8),
                not_null: true,
                pk_position: Some(1),
                default: None,
            },
            ColumnSpec {
                source: SourceColumn::of(25, -1),
                name: "v".into(),
                ty: Some(PgType::Int4),
                not_null: true,
                pk_position: None,
                default: None,
            },
            ColumnSpec {
                source: SourceColumn::of(25, -1),
                name: "note".into(),
                ty: Some(PgType::Text),
                not_null: true,
                pk_position: None,
                default: None,
            },
            ColumnSpec {
                source: SourceColumn::of(25, -1),
                name: "flag".into(),
                ty: Some(PgType::Bool),
                not_null: true,
                pk_position: None,
                default: None,
            },
            ColumnSpec {
                source: SourceColumn::of(25, -1),
                name: "maybe".into(),
                ty: Some(PgType::Int4),
                not_null: false,
                pk_position: None,
                default: None,
            },
        ];
        let t = TableSchema::new(
            "srv",
            "db",
            TableId { schema: "public".into(), table: "t".into() },
            specs,
            &modes,
            &source_schema(),
            &ColumnRules::default(),
        );
        // What pgoutput sends as a delete's old key under REPLICA IDENTITY DEFAULT.
        let before = t.row(&[Datum::Text("7"), Datum::Null, Datum::Null, Datum::Null, Datum::Null]).unwrap();
        let before = before.value.as_struct().unwrap();
        assert_eq!(before.get("id"), Some(&Value::Int64(7)));
        assert_eq!(before.get("v"), Some(&Value::Int32(0)));
        assert_eq!(before.get("note"), Some(&Value::String(String::new())));
        assert_eq!(before.get("flag"), Some(&Value::Boolean(false)));
        assert_eq!(before.get("maybe"), Some(&Value::Null));
        // Every required field has a value: a converter accepts it.
        for f in &before.schema().fields {
            assert!(f.schema.optional || !before.get(&f.name).unwrap().is_null(), "{} is required but null", f.name);
        }
    }

    #[test]
    fn a_nullable_variable_scale_decimal_carries_the_optional_schema() {
        let modes = Modes::DEFAULT;
        let unconstrained = PgType::Numeric { precision: None, scale: None };
        let specs = vec![
            ColumnSpec {
                source: SourceColumn::of(1700, -1),
                name: "id".into(),
                ty: Some(PgType::Int4),
                not_null: true,
                pk_position: Some(1),
                default: None,
            },
            ColumnSpec {
                source: SourceColumn::of(1700, -1),
                name: "amount".into(),
                ty: Some(unconstrained.clone()),
                not_null: false,
                pk_position: None,
                default: None,
            },
            ColumnSpec {
                source: SourceColumn::of(1700, -1),
                name: "amounts".into(),
                ty: Some(PgType::Array(Box::new(unconstrained))),
                not_null: false,
                pk_position: None,
                default: None,
            },
        ];
        let t = TableSchema::new(
            "srv",
            "db",
            TableId { schema: "public".into(), table: "t".into() },
            specs,
            &modes,
            &source_schema(),
            &ColumnRules::default(),
        );
        let row = t.row(&[Datum::Text("1"), Datum::Text("1.50"), Datum::Text("{2.5,NULL}")]).unwrap();
        let row = row.value.as_struct().unwrap();
        let field = |name: &str| row.schema().fields.iter().find(|f| f.name == name).unwrap().schema.clone();
        let Some(Value::Struct(amount)) = row.get("amount") else { panic!("{row:?}") };
        assert!(field("amount").optional);
        assert_eq!(amount.schema(), &field("amount"), "the struct's own schema is its field's");
        assert_eq!(amount.get("scale"), Some(&Value::Int32(1)), "1.50 without its trailing zero, as Debezium");
        let Some(Value::Array(items)) = row.get("amounts") else { panic!("{row:?}") };
        let Value::Struct(first) = &items[0] else { panic!("{items:?}") };
        assert_eq!(Some(first.schema()), field("amounts").value_schema.as_ref());
        assert_eq!(items[1], Value::Null);
    }

    #[test]
    fn message_key_columns_replace_the_primary_key() {
        let modes = Modes::DEFAULT;
        let specs = || {
            vec![
                ColumnSpec {
                    source: SourceColumn::of(25, -1),
                    name: "id".into(),
                    ty: Some(PgType::Int4),
                    not_null: true,
                    pk_position: Some(1),
                    default: None,
                },
                ColumnSpec {
                    source: SourceColumn::of(25, -1),
                    name: "region".into(),
                    ty: Some(PgType::Text),
                    not_null: false,
                    pk_position: None,
                    default: None,
                },
                ColumnSpec {
                    source: SourceColumn::of(25, -1),
                    name: "customer".into(),
                    ty: Some(PgType::Int8),
                    not_null: true,
                    pk_position: None,
                    default: None,
                },
            ]
        };
        let mask: sluice_api::Props = [("column.mask.with.4.chars".to_owned(), "public.orders.region".to_owned())].into_iter().collect();
        let (include, exclude) = ColumnRules::column_filter(&[], &["public.orders.(region|customer)".into()]).unwrap();
        let rules = ColumnRules {
            key_columns: crate::postgres::column::KeyColumns::parse("public.orders:customer,region").unwrap(),
            mappers: ColumnRules::mappers_from(&mask).unwrap(),
            include: Vec::new(),
            exclude: Vec::new(),
        };
        let id = |table: &str| TableId { schema: "public".into(), table: table.into() };
        let t = TableSchema::new("srv", "db", id("orders"), specs(), &modes, &source_schema(), &rules);
        let row = t.row(&[Datum::Text("1"), Datum::Null, Datum::Text("42")]).unwrap();
        let key = row.key.as_struct().unwrap();
        assert_eq!(key.schema().name.as_deref(), Some("srv.public.orders.Key"));
        let names: Vec<_> = key.schema().fields.iter().map(|f| (f.name.as_str(), f.schema.optional)).collect();
        assert_eq!(names, [("customer", false), ("region", true)], "rule order, the columns' own optionality");
        assert_eq!(key.get("customer"), Some(&Value::Int64(42)));
        assert_eq!(key.get("region"), Some(&Value::Null), "the key holds the value as read, not masked");
        let after = row.value.as_struct().unwrap();
        assert_eq!(after.get("region"), Some(&Value::String("****".into())), "the value is masked (a null too)");
        assert_eq!(after.schema().field("region").unwrap().schema.parameter("masked"), Some("true"));
        assert_eq!(key.schema().field("region").unwrap().schema.parameter("masked"), None);
        let info = SourceInfo { ts_ms: 1, snapshot: "false", tx_id: None, lsn: None, sequence: None };
        let d = t.record('d', row.clone(), Row::NONE, &info, &source_schema(), &SourcePartition::new(), SourceOffset::new());
        assert_eq!(d.key, row.key, "a delete is keyed by its before image");
        // Columns left out of the images stay in the key.
        let narrow = TableSchema::new(
            "srv",
            "db",
            id("orders"),
            specs(),
            &modes,
            &source_schema(),
            &ColumnRules { include, exclude, ..rules.clone() },
        );
        let row2 = narrow.row(&[Datum::Text("1"), Datum::Text("eu"), Datum::Text("42")]).unwrap();
        let after = row2.value.as_struct().unwrap();
        assert_eq!(after.schema().fields.iter().map(|f| f.name.as_str()).collect::<Vec<_>>(), ["id"]);
        assert_eq!(after.get("id"), Some(&Value::Int32(1)));
        assert_eq!(row2.key.as_struct().unwrap().get("region"), Some(&Value::String("eu".into())));
        // Another table keeps its primary key.
        let other = TableSchema::new("srv", "db", id("items"), specs(), &modes, &source_schema(), &rules);
        let key = other.row(&[Datum::Text("1"), Datum::Null, Datum::Text("42")]).unwrap().key;
        assert_eq!(key.as_struct().unwrap().schema().fields.iter().map(|f| f.name.as_str()).collect::<Vec<_>>(), ["id"]);
    }
}
