//! `Cast`: casts fields, or the whole key or value, to another primitive type (Java
//! semantics: narrowing integers wrap, floats truncate toward zero, bytes only to base64
//! strings, logical dates and times to ISO-8601 strings or their physical number).

use base64::Engine as _;
use sluice_api::schema::logical;
use sluice_api::{ConfigDef, ConfigKey, ConfigType, ConnectError, ConnectResult, Importance, Props, Schema, SchemaType, Struct, Value};

use super::extract_field::replace_null_key;
use super::java_text::{big_decimal_string, decimal_unscaled, java_double, java_float, parse_java_boolean};
use super::record::Side;
use super::require::{
    copy_basics, field_value, inferred_type, kind_of, map_get, map_put, push_field, require_map, require_struct, SchemaCache,
};
use super::temporal::{iso_text, MILLIS_PER_DAY};
use super::{Transform, TransformRecord};

pub(crate) const DOC: &str = "Cast fields or the entire key or value to a specific type, e.g. to force an integer field to a smaller width. Cast from integers, floats, boolean and string to any other type, and cast binary to string (base64 encoded).";
const NAME: &str = "Cast";

pub(crate) fn config_def() -> ConfigDef {
    ConfigDef::new()
        .define(ConfigKey::new(
            "spec",
            ConfigType::List,
            Importance::High,
            "List of fields and the type to cast them to of the form field1:type,field2:type to cast fields of Maps or Structs. A single type to cast the entire value. Valid types are int8, int16, int32, int64, float32, float64, boolean, and string. Note that binary fields can only be cast to string.",
        ))
        .define(replace_null_key())
}

fn target_type(raw: &str) -> ConnectResult<SchemaType> {
    let t = match raw.trim().to_ascii_lowercase().as_str() {
        "int8" => SchemaType::Int8,
        "int16" => SchemaType::Int16,
        "int32" => SchemaType::Int32,
        "int64" => SchemaType::Int64,
        "float32" => SchemaType::Float32,
        "float64" => SchemaType::Float64,
        "boolean" => SchemaType::Boolean,
        "string" => SchemaType::String,
        "bytes" | "array" | "map" | "struct" => {
            return Err(ConnectError::config(
                "spec",
                format!("cannot cast to {}: supported types are int8, int16, int32, int64, float32, float64, boolean, string", raw.trim()),
            ))
        }
        _ => return Err(ConnectError::config("spec", format!("invalid type found in casting spec: {}", raw.trim()))),
    };
    Ok(t)
}

fn type_name(t: SchemaType) -> &'static str {
    match t {
        SchemaType::Float32 => "float32",
        SchemaType::Float64 => "float64",
        other => other.json_name(),
    }
}

struct Cast {
    side: Side,
    /// `(field, type)`; a single entry with field `None` casts the whole value.
    casts: Vec<(Option<String>, SchemaType)>,
    replace_null_with_default: bool,
    cache: SchemaCache,
}

/// A number, as Java's `Number` sees it.
#[derive(Clone, Copy)]
enum Num {
    Int(i64),
    F32(f32),
    F64(f64),
    /// A decimal too wide for i64 keeps its f64 approximation alongside.
    Dec(i128, i32),
}

impl Num {
    fn long(self) -> i64 {
        match self {
            Num::Int(v) => v,
            Num::F32(f) => f as i64,
            Num::F64(f) => f as i64,
            Num::Dec(u, s) => scaled_integer(u, s) as i64,
        }
    }
    fn int(self) -> i32 {
        match self {
            Num::F32(f) => f as i32,
            Num::F64(f) => f as i32,
            other => other.long() as i32,
        }
    }
    fn double(self) -> f64 {
        match self {
            Num::Int(v) => v as f64,
            Num::F32(f) => f64::from(f),
            Num::F64(f) => f,
            Num::Dec(u, s) => big_decimal_string(u, s).parse().unwrap_or(f64::NAN),
        }
    }
    fn float(self) -> f32 {
        match self {
            Num::Int(v) => v as f32,
            Num::F32(f) => f,
            Num::F64(f) => f as f32,
            Num::Dec(u, s) => big_decimal_string(u, s).parse().unwrap_or(f32::NAN),
        }
    }
}

/// The integer part of `unscaled × 10^-scale`, truncated toward zero.
fn scaled_integer(unscaled: i128, scale: i32) -> i128 {
    if scale <= 0 {
        10i128.checked_pow(scale.unsigned_abs()).and_then(|p| unscaled.checked_mul(p)).unwrap_or(0)
    } else {
        10i128.checked_pow(scale as u32).map(|p| unscaled / p).unwrap_or(0)
    }
}

/// Casts one value; `what` names it in errors ("field `x`" or "value").
fn cast_value(schema: Option<&Schema>, v: &Value, target: SchemaType, what: &str) -> ConnectResult<Value> {
    if v.is_null() {
        return Ok(Value::Null);
    }
    let from = schema.map(|s| s.kind).or_else(|| inferred_type(v)).unwrap_or(SchemaType::Bytes);
    let fail = |why: String| {
        ConnectError::fatal(format!("{NAME}: {what} of type {} cannot be cast to {}: {why}", type_name(from), type_name(target)))
    };
    if matches!(from, SchemaType::Array | SchemaType::Map | SchemaType::Struct) {
        return Err(fail("only primitive types can be cast".to_owned()));
    }
    let name = schema.and_then(|s| s.name.as_deref());
    let temporal_ms = match (name, v) {
        (Some(logical::DATE), Value::Int32(d)) => Some(i64::from(*d) * MILLIS_PER_DAY),
        (Some(logical::TIME), Value::Int32(t)) => Some(i64::from(*t)),
        (Some(logical::TIMESTAMP), Value::Int64(t)) => Some(*t),
        _ => None,
    };
    let decimal = schema.and_then(Schema::decimal_scale);
    if target == SchemaType::String {
        let text = match (temporal_ms, decimal, v) {
            (Some(ms), _, _) => iso_text(ms),
            (_, Some(scale), Value::Bytes(b)) => {
                big_decimal_string(decimal_unscaled(b).ok_or_else(|| fail("the decimal is wider than 128 bits".to_owned()))?, scale)
            }
            (_, _, Value::Bytes(b)) => base64::engine::general_purpose::STANDARD.encode(b),
            (_, _, Value::String(s)) => s.clone(),
            (_, _, Value::Boolean(b)) => b.to_string(),
            (_, _, Value::Float32(f)) => java_float(*f),
            (_, _, Value::Float64(f)) => java_double(*f),
            (_, _, other) => other.as_i64().map(|i| i.to_string()).ok_or_else(|| fail(format!("unexpected {}", kind_of(other))))?,
        };
        return Ok(Value::String(text));
    }
    let num = match (decimal, v) {
        (Some(scale), Value::Bytes(b)) => {
            Num::Dec(decimal_unscaled(b).ok_or_else(|| fail("the decimal is wider than 128 bits".to_owned()))?, scale)
        }
        (_, Value::Bytes(_)) => return Err(fail("bytes can only be cast to string".to_owned())),
        (_, Value::Boolean(b)) => Num::Int(i64::from(*b)),
        (_, Value::Float32(f)) => Num::F32(*f),
        (_, Value::Float64(f)) => Num::F64(*f),
        (_, Value::String(s)) => {
            return parse_string(s, target).ok_or_else(|| {
                if s.trim().parse::<f64>().is_ok() {
                    fail(format!("'{s}' is out of range for {}", type_name(target)))
                } else {
                    fail(format!("'{s}' is not a number"))
                }
            })
        }
        (_, other) => Num::Int(other.as_i64().ok_or_else(|| fail(format!("unexpected {}", kind_of(other))))?),
    };
    Ok(match target {
        SchemaType::Int8 => Value::Int8(num.int() as i8),
        SchemaType::Int16 => Value::Int16(num.int() as i16),
        SchemaType::Int32 => Value::Int32(num.int()),
        SchemaType::Int64 => Value::Int64(num.long()),
        SchemaType::Float32 => Value::Float32(num.float()),
        SchemaType::Float64 => Value::Float64(num.double()),
        SchemaType::Boolean => Value::Boolean(num.long() != 0),
        other => return Err(fail(format!("{} is not a cast target", type_name(other)))),
    })
}

/// Java's `Byte.parseByte`, …, `Double.parseDouble`, `Boolean.parseBoolean`.
fn parse_string(s: &str, target: SchemaType) -> Option<Value> {
    let float_text = || {
        let t = s.trim();
        t.strip_suffix(['f', 'F', 'd', 'D']).filter(|r| !r.is_empty() && !t.eq_ignore_ascii_case("inf")).unwrap_or(t).to_owned()
    };
    Some(match target {
        SchemaType::Int8 => Value::Int8(s.parse().ok()?),
        SchemaType::Int16 => Value::Int16(s.parse().ok()?),
        SchemaType::Int32 => Value::Int32(s.parse().ok()?),
        SchemaType::Int64 => Value::Int64(s.parse().ok()?),
        SchemaType::Float32 => Value::Float32(float_text().parse().ok()?),
        SchemaType::Float64 => Value::Float64(float_text().parse().ok()?),
        SchemaType::Boolean => Value::Boolean(parse_java_boolean(s)),
        _ => return None,
    })
}

impl Cast {
    fn target_for(&self, field: &str) -> Option<SchemaType> {
        self.casts.iter().find(|(f, _)| f.as_deref() == Some(field)).map(|(_, t)| *t)
    }

    fn whole(&self) -> Option<SchemaType> {
        match self.casts.as_slice() {
            [(None, t)] => Some(*t),
            _ => None,
        }
    }

    fn updated_schema(&self, schema: &Schema) -> ConnectResult<Schema> {
        let mut out = if let Some(t) = self.whole() {
            let mut out = copy_basics(schema, t);
            if let Some(d) = &schema.default {
                out.default = Some(cast_value(Some(schema), d, t, "default value")?);
            }
            out
        } else {
            let mut out = copy_basics(schema, SchemaType::Struct);
            for f in &schema.fields {
                match self.target_for(&f.name) {
                    Some(t) => {
                        let mut fs = Schema::of(t);
                        fs.optional = f.schema.optional;
                        if let Some(d) = &f.schema.default {
                            fs.default = Some(cast_value(Some(&f.schema), d, t, &format!("default of field `{}`", f.name))?);
                        }
                        push_field(&mut out, f.name.clone(), fs.into_ref());
                    }
                    None => push_field(&mut out, f.name.clone(), f.schema.clone()),
                }
            }
            out
        };
        out.optional = schema.optional;
        Ok(out)
    }
}

impl Transform for Cast {
    fn apply(&self, mut record: TransformRecord) -> ConnectResult<Option<TransformRecord>> {
        if self.side.value(&record).is_null() {
            return Ok(Some(record));
        }
        let (schema, value) = self.side.take(&mut record);
        match schema {
            None => {
                if let Some(t) = self.whole() {
                    let v = cast_value(None, &value, t, "value")?;
                    self.side.set(&mut record, None, v);
                } else {
                    let mut map = require_map(&value, NAME, "cast types")?.clone();
                    for (field, t) in &self.casts {
                        let field = field.as_deref().unwrap_or_default();
                        let v = cast_value(None, map_get(&map, field).unwrap_or(&Value::Null), *t, &format!("field `{field}`"))?;
                        map_put(&mut map, field, v);
                    }
                    self.side.set(&mut record, None, Value::Map(map));
                }
            }
            Some(schema) => {
                let updated = self.cache.get_or_build(&schema, || self.updated_schema(&schema))?;
                if let Some(t) = self.whole() {
                    let v = cast_value(Some(&schema), &value, t, "value")?;
                    self.side.set(&mut record, Some(updated), v);
                } else {
                    let s = require_struct(&value, NAME, "cast types")?;
                    let mut values = Vec::with_capacity(s.values().len());
                    for f in &s.schema().fields {
                        let v = field_value(s, f, self.replace_null_with_default);
                        values.push(match self.target_for(&f.name) {
                            Some(t) => cast_value(Some(&f.schema), &v, t, &format!("field `{}`", f.name))?,
                            None => v,
                        });
                    }
                    let out = Value::Struct(Struct::from_values(updated.clone(), values));
                    self.side.set(&mut record, Some(updated), out);
                }
            }
        }
        Ok(Some(record))
    }
}

pub(crate) fn create(props: &Props, side: Side) -> ConnectResult<Box<dyn Transform>> {
    let config = config_def().parse(props)?;
    let spec = config.list("spec");
    if spec.is_empty() {
        return Err(ConnectError::config("spec", "must specify at least one field to cast"));
    }
    let mut casts = Vec::new();
    for mapping in &spec {
        match mapping.split(':').collect::<Vec<_>>()[..] {
            [t] => casts.push((None, target_type(t)?)),
            [f, t] => casts.push((Some(f.trim().to_owned()), target_type(t)?)),
            _ => return Err(ConnectError::config("spec", format!("invalid cast mapping '{mapping}': use field:type or a single type"))),
        }
    }
    if casts.iter().any(|(f, _)| f.is_none()) && casts.len() > 1 {
        return Err(ConnectError::config("spec", "a cast of the entire value to one type must be the only entry in spec"));
    }
    Ok(Box::new(Cast {
        side,
        casts,
        replace_null_with_default: config.boolean("replace.null.with.default"),
        cache: SchemaCache::default(),
    }))
}
