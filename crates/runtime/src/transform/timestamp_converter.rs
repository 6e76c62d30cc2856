//! `TimestampConverter`: converts a timestamp field (or the whole key or value) between
//! Unix epoch numbers, formatted strings and Connect's Date, Time and Timestamp.

use sluice_api::schema::logical;
use sluice_api::{
    ConfigDef, ConfigKey, ConfigType, ConnectError, ConnectResult, Importance, Props, Schema, SchemaRef, SchemaType, Struct, Validator,
    Value,
};

use super::extract_field::replace_null_key;
use super::record::Side;
use super::require::{
    copy_basics, data_error, field_value, kind_of, map_get, map_put, push_field, require_map, require_struct_or_null, SchemaCache,
};
use super::temporal::{DatePattern, MILLIS_PER_DAY};
use super::{Transform, TransformRecord};

pub(crate) const DOC: &str = "Convert timestamps between different formats such as Unix epoch, strings, and Connect Date/Timestamp types.Applies to individual fields or to the entire value.";
const NAME: &str = "TimestampConverter";
const PURPOSE: &str = "converting timestamp formats";

pub(crate) fn config_def() -> ConfigDef {
    ConfigDef::new()
        .define(ConfigKey::new("field", ConfigType::String, Importance::High, "The field containing the timestamp, or empty if the entire value is a timestamp").default_value(""))
        .define(
            ConfigKey::new("target.type", ConfigType::String, Importance::High, "The desired timestamp representation: string, unix, Date, Time, or Timestamp")
                .validator(Validator::one_of(&["string", "unix", "Date", "Time", "Timestamp"])),
        )
        .define(
            ConfigKey::new("format", ConfigType::String, Importance::Medium, "A SimpleDateFormat-compatible format for the timestamp. Used to generate the output when type=string or used to parse the input if the input is a string.")
                .default_value(""),
        )
        .define(
            ConfigKey::new("unix.precision", ConfigType::String, Importance::Low, "The desired Unix precision for the timestamp: seconds, milliseconds, microseconds, or nanoseconds. Used to generate the output when type=unix or used to parse the input if the input is a Long.Note: This SMT will cause precision loss during conversions from, and to, values with sub-millisecond components.")
                .default_value("milliseconds")
                .validator(Validator::one_of(&["nanoseconds", "microseconds", "milliseconds", "seconds"])),
        )
        .define(replace_null_key())
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    String,
    Unix,
    Date,
    Time,
    Timestamp,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Precision {
    Seconds,
    Millis,
    Micros,
    Nanos,
}

struct TimestampConverter {
    side: Side,
    field: String,
    target: Kind,
    format: Option<DatePattern>,
    precision: Precision,
    replace_null_with_default: bool,
    cache: SchemaCache,
}

fn kind_from_schema(s: &Schema) -> ConnectResult<Kind> {
    match s.name.as_deref() {
        Some(logical::TIMESTAMP) => Ok(Kind::Timestamp),
        Some(logical::DATE) => Ok(Kind::Date),
        Some(logical::TIME) => Ok(Kind::Time),
        _ if s.kind == SchemaType::String => Ok(Kind::String),
        _ if s.kind == SchemaType::Int64 => Ok(Kind::Unix),
        _ => Err(data_error(
            NAME,
            format_args!("a schema of type {} does not hold a timestamp: use string, int64, Date, Time or Timestamp", s.kind.json_name()),
        )),
    }
}

impl TimestampConverter {
    fn type_schema(&self, optional: bool) -> SchemaRef {
        let s = match self.target {
            Kind::String => Schema::string(),
            Kind::Unix => Schema::int64(),
            Kind::Date => Schema::date(),
            Kind::Time => Schema::time(),
            Kind::Timestamp => Schema::timestamp(),
        };
        if optional { s.optional() } else { s }.into_ref()
    }

    /// Converts one timestamp; `from` is `None` when it must be inferred (no schema).
    fn convert(&self, v: &Value, from: Option<Kind>) -> ConnectResult<Value> {
        if v.is_null() {
            return Ok(Value::Null);
        }
        let from = match from {
            Some(k) => k,
            None => match v {
                Value::Int64(_) => Kind::Unix,
                Value::String(_) => Kind::String,
                other => {
                    return Err(data_error(
                        NAME,
                        format_args!("{} values are not supported as timestamps without a schema: use int64 or string", kind_of(other)),
                    ))
                }
            },
        };
        let unexpected = |what: &str| data_error(NAME, format_args!("expected {what} timestamp, found {}", kind_of(v)));
        let ms: i64 = match (from, v) {
            (Kind::String, Value::String(s)) => {
                let p = self.format.as_ref().ok_or_else(|| data_error(NAME, "`format` must be set to parse string timestamps"))?;
                p.parse(s).map_err(|e| data_error(NAME, format_args!("could not parse timestamp: {e}")))?
            }
            (Kind::Unix, Value::Int64(t)) => match self.precision {
                Precision::Seconds => t.saturating_mul(1000),
                Precision::Millis => *t,
                Precision::Micros => t / 1000,
                Precision::Nanos => t / 1_000_000,
            },
            (Kind::Date, Value::Int32(d)) => i64::from(*d) * MILLIS_PER_DAY,
            (Kind::Time, Value::Int32(t)) => i64::from(*t),
            (Kind::Timestamp, Value::Int64(t)) => *t,
            (Kind::String, _) => return Err(unexpected("a string")),
            (Kind::Unix | Kind::Timestamp, _) => return Err(unexpected("an int64")),
            (Kind::Date | Kind::Time, _) => return Err(unexpected("an int32")),
        };
        Ok(match self.target {
            Kind::String => Value::String(self.format.as_ref().expect("checked at configuration").format(ms)),
            Kind::Unix => Value::Int64(match self.precision {
                Precision::Seconds => ms / 1000,
                Precision::Millis => ms,
                Precision::Micros => ms.saturating_mul(1000),
                Precision::Nanos => ms.saturating_mul(1_000_000),
            }),
            Kind::Date => Value::Int32(ms.div_euclid(MILLIS_PER_DAY) as i32),
            Kind::Time => Value::Int32(ms.rem_euclid(MILLIS_PER_DAY) as i32),
            Kind::Timestamp => Value::Int64(ms),
        })
    }

    fn convert_struct(&self, s: &Struct, updated: &SchemaRef) -> ConnectResult<Struct> {
        let mut values = Vec::with_capacity(s.values().len());
        for f in &s.schema().fields {
            let v = field_value(s, f, self.replace_null_with_default);
            values.push(if f.name == self.field { self.convert(&v, Some(kind_from_schema(&f.schema)?))? } else { v });
        }
        Ok(Struct::from_values(updated.clone(), values))
    }
}

impl Transform for TimestampConverter {
    fn apply(&self, mut record: TransformRecord) -> ConnectResult<Option<TransformRecord>> {
        let (schema, value) = self.side.take(&mut record);
        match schema {
            None => {
                let out = if value.is_null() || self.field.is_empty() {
                    self.convert(&value, None)?
                } else {
                    let mut map = require_map(&value, NAME, PURPOSE)?.clone();
                    let v = self.convert(map_get(&map, &self.field).unwrap_or(&Value::Null), None)?;
                    map_put(&mut map, &self.field, v);
                    Value::Map(map)
                };
                self.side.set(&mut record, None, out);
            }
            Some(schema) if self.field.is_empty() => {
                let out = self.convert(&value, Some(kind_from_schema(&schema)?))?;
                self.side.set(&mut record, Some(self.type_schema(schema.optional)), out);
            }
            Some(schema) => {
                let s = require_struct_or_null(&value, NAME, PURPOSE)?;
                let updated = self.cache.get_or_build(&schema, || {
                    let mut out = copy_basics(&schema, SchemaType::Struct);
                    for f in &schema.fields {
                        let fs = if f.name == self.field { self.type_schema(f.schema.optional) } else { f.schema.clone() };
                        push_field(&mut out, f.name.clone(), fs);
                    }
                    out.optional = schema.optional;
                    if let Some(Value::Struct(d)) = &schema.default {
                        let shape = out.clone().into_ref();
                        out.default = Some(Value::Struct(self.convert_struct(d, &shape)?));
                    }
                    Ok(out)
                })?;
                let out = match s {
                    None => Value::Null,
                    Some(s) => Value::Struct(self.convert_struct(s, &updated)?),
                };
                self.side.set(&mut record, Some(updated), out);
            }
        }
        Ok(Some(record))
    }
}

pub(crate) fn create(props: &Props, side: Side) -> ConnectResult<Box<dyn Transform>> {
    let config = config_def().parse(props)?;
    let raw_target = props["target.type"].trim();
    let target = match raw_target {
        "string" => Kind::String,
        "unix" => Kind::Unix,
        "Date" => Kind::Date,
        "Time" => Kind::Time,
        "Timestamp" => Kind::Timestamp,
        other => {
            return Err(ConnectError::config(
                "target.type",
                format!("'{other}' is not a target type: use string, unix, Date, Time or Timestamp (case matters)"),
            ))
        }
    };
    let format = match config.string("format").filter(|f| !f.trim().is_empty()) {
        Some(f) => Some(
            DatePattern::compile(&f)
                .map_err(|e| ConnectError::config("format", format!("not a SimpleDateFormat-compatible pattern: {e}")))?,
        ),
        None => None,
    };
    if target == Kind::String && format.is_none() {
        return Err(ConnectError::config("format", "target.type string needs a format: set format to a SimpleDateFormat pattern"));
    }
    let precision = match config.string("unix.precision").unwrap_or_default().to_ascii_lowercase().as_str() {
        "seconds" => Precision::Seconds,
        "microseconds" => Precision::Micros,
        "nanoseconds" => Precision::Nanos,
        _ => Precision::Millis,
    };
    Ok(Box::new(TimestampConverter {
        side,
        field: config.string("field").unwrap_or_default(),
        target,
        format,
        precision,
        replace_null_with_default: config.boolean("replace.null.with.default"),
        cache: SchemaCache::default(),
    }))
}
