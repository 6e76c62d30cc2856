//! Golden tests: records in, records out, rendered as compact text so each expectation
//! reads as the record it describes. Every expectation names where it comes from (a Kafka
//! or Debezium test or document).
//!
//! Rendering: a schema as `int32`, `string?` (optional), `Timestamp`, `Decimal(2)`,
//! `struct{a:int32,b:string?}`, `struct<name@version>{…}`, `array<int8>`; a value with its
//! type suffix (`5i8`, `1.5f64`, `"x"`, `0xff`), structs as `{a=…}`, maps as `{"k":…}`.

mod bench;
mod chain;
mod debezium;
mod kafka_fields;
mod kafka_records;

use std::fmt::Write as _;

use sluice_api::schema::logical;
use sluice_api::{ConnectResult, Headers, Props, Schema, SchemaRef, SourceRecord, Struct, Value};

use super::{transform_plugin, Transform, TransformRecord};

pub(crate) fn props(pairs: &[(&str, &str)]) -> Props {
    pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
}

/// A source record for topic `test`, partition 0, timestamp 1483425000000 (2017-01-03).
pub(crate) fn record(value_schema: Option<Schema>, value: Value) -> TransformRecord {
    TransformRecord::from(SourceRecord {
        topic: "test".into(),
        partition: Some(0),
        value_schema: value_schema.map(Schema::into_ref),
        value,
        timestamp: Some(1_483_425_000_000),
        ..Default::default()
    })
}

pub(crate) fn keyed(key_schema: Option<Schema>, key: Value, value_schema: Option<Schema>, value: Value) -> TransformRecord {
    let mut r = record(value_schema, value);
    r.key_schema = key_schema.map(Schema::into_ref);
    r.key = key;
    r
}

pub(crate) fn map(entries: &[(&str, Value)]) -> Value {
    Value::Map(entries.iter().map(|(k, v)| (Value::String((*k).to_owned()), v.clone())).collect())
}

pub(crate) fn st(schema: &SchemaRef, values: Vec<Value>) -> Value {
    Value::Struct(Struct::from_values(schema.clone(), values))
}

pub(crate) fn s(v: &str) -> Value {
    Value::String(v.to_owned())
}

pub(crate) fn make(class: &str, p: &[(&str, &str)]) -> Box<dyn Transform> {
    let plugin = transform_plugin(class).unwrap_or_else(|| panic!("no transform {class}"));
    (plugin.create)(&props(p)).unwrap_or_else(|e| panic!("{class} did not configure: {e}"))
}

pub(crate) fn config_error(class: &str, p: &[(&str, &str)]) -> String {
    let plugin = transform_plugin(class).unwrap_or_else(|| panic!("no transform {class}"));
    match (plugin.create)(&props(p)) {
        Ok(_) => panic!("{class} accepted {p:?}"),
        Err(e) => e.to_string(),
    }
}

/// Applies `t` and expects a record back.
pub(crate) fn apply(t: &dyn Transform, r: TransformRecord) -> TransformRecord {
    t.apply(r).expect("transform failed").expect("record was dropped")
}

pub(crate) fn apply_err(t: &dyn Transform, r: TransformRecord) -> String {
    match t.apply(r) {
        Ok(out) => panic!("expected an error, got {out:?}"),
        Err(e) => e.to_string(),
    }
}

pub(crate) fn try_apply(t: &dyn Transform, r: TransformRecord) -> ConnectResult<Option<TransformRecord>> {
    t.apply(r)
}

pub(crate) fn schema_text(s: &Schema) -> String {
    let mut out = match s.name.as_deref() {
        Some(logical::TIMESTAMP) => "Timestamp".to_owned(),
        Some(logical::DATE) => "Date".to_owned(),
        Some(logical::TIME) => "Time".to_owned(),
        Some(logical::DECIMAL) => format!("Decimal({})", s.decimal_scale().unwrap_or(0)),
        name => {
            let mut base = match s.kind {
                sluice_api::SchemaType::Float32 => "float32".to_owned(),
                sluice_api::SchemaType::Float64 => "float64".to_owned(),
                k => k.json_name().to_owned(),
            };
            if name.is_some() || s.version.is_some() {
                base.push('<');
                base.push_str(name.unwrap_or(""));
                if let Some(v) = s.version {
                    let _ = write!(base, "@{v}");
                }
                base.push('>');
            }
            match s.kind {
                sluice_api::SchemaType::Struct => {
                    let fields: Vec<String> = s.fields.iter().map(|f| format!("{}:{}", f.name, schema_text(&f.schema))).collect();
                    let _ = write!(base, "{{{}}}", fields.join(","));
                }
                sluice_api::SchemaType::Array => {
                    let _ = write!(base, "<{}>", s.value_schema.as_deref().map(schema_text).unwrap_or_default());
                }
                sluice_api::SchemaType::Map => {
                    let _ = write!(
                        base,
                        "<{},{}>",
                        s.key_schema.as_deref().map(schema_text).unwrap_or_default(),
                        s.value_schema.as_deref().map(schema_text).unwrap_or_default()
                    );
                }
                _ => {}
            }
            base
        }
    };
    if s.optional {
        out.push('?');
    }
    if let Some(d) = &s.default {
        let _ = write!(out, "={}", value_text(d));
    }
    out
}

pub(crate) fn value_text(v: &Value) -> String {
    match v {
        Value::Null => "null".to_owned(),
        Value::Boolean(b) => b.to_string(),
        Value::Int8(x) => format!("{x}i8"),
        Value::Int16(x) => format!("{x}i16"),
        Value::Int32(x) => format!("{x}i32"),
        Value::Int64(x) => format!("{x}i64"),
        Value::Float32(x) => format!("{x:?}f32"),
        Value::Float64(x) => format!("{x:?}f64"),
        Value::String(s) => format!("{s:?}"),
        Value::Bytes(b) => format!("0x{}", b.iter().map(|x| format!("{x:02x}")).collect::<String>()),
        Value::Array(items) => format!("[{}]", items.iter().map(value_text).collect::<Vec<_>>().join(",")),
        Value::Map(entries) => {
            format!("{{{}}}", entries.iter().map(|(k, v)| format!("{}:{}", value_text(k), value_text(v))).collect::<Vec<_>>().join(","))
        }
        Value::Struct(s) => {
            let fields: Vec<String> =
                s.schema().fields.iter().map(|f| format!("{}={}", f.name, value_text(&s.values()[f.index]))).collect();
            format!("{{{}}}", fields.join(","))
        }
    }
}

/// `schema | value` of the value side.
pub(crate) fn value_of(r: &TransformRecord) -> String {
    format!("{} | {}", r.value_schema.as_deref().map(schema_text).unwrap_or_else(|| "-".to_owned()), value_text(&r.value))
}

/// `schema | value` of the key side.
pub(crate) fn key_of(r: &TransformRecord) -> String {
    format!("{} | {}", r.key_schema.as_deref().map(schema_text).unwrap_or_else(|| "-".to_owned()), value_text(&r.key))
}

pub(crate) fn headers_of(h: &Headers) -> String {
    h.iter()
        .map(|h| format!("{}:{}={}", h.key, h.schema.as_deref().map(schema_text).unwrap_or_else(|| "-".to_owned()), value_text(&h.value)))
        .collect::<Vec<_>>()
        .join(" ")
}
