//! Connect values to and from the `"payload"` JSON (or the whole document without schemas).
//!
//! Writing follows `JsonConverter.convertToJson`: integers and floats as numbers, bytes as
//! base64 strings, arrays as arrays, maps with string keys as objects and other maps as
//! arrays of `[key, value]` pairs, structs as objects in field order. A null takes the
//! schema's default (with `replace.null.with.default`), else `null` when optional, else it
//! is an error. Decimal is base64 of the unscaled bytes or a JSON number
//! (`decimal.format`), Date/Time/Timestamp their int32/int64 encodings.
//!
//! Reading follows `convertToConnect`, with stricter type checks: where Kafka would quietly
//! turn a string into `0` for an int32 field, we return an error saying what was expected and
//! where. Without a schema, objects become maps with string keys, integers `Int64`, other
//! numbers `Float64`.

use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig, STANDARD};
use base64::engine::DecodePaddingMode;
use base64::{alphabet, Engine as _};
use sluice_api::{Schema, SchemaRef, SchemaType, Struct, Value};

use super::text::{write_f32, write_f64, write_int, write_string, Node};
use super::{DataError, DecimalFormat, Settings};
use crate::convert::{type_name, value_type_name};
use sluice_api::decimal::{self, DecimalText, Unscaled};
use sluice_api::text::{decimal_scale, Logical, MILLIS_PER_DAY};

/// Base64 as Jackson reads it: the standard alphabet; we also accept missing padding.
const LENIENT_BASE64: GeneralPurpose =
    GeneralPurpose::new(&alphabet::STANDARD, GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent));

pub(super) fn write_value(out: &mut String, settings: &Settings, schema: Option<&Schema>, value: &Value) -> Result<(), DataError> {
    if value.is_null() {
        let Some(schema) = schema else {
            out.push_str("null");
            return Ok(());
        };
        if let Some(default) = schema.default.as_ref().filter(|d| !d.is_null() && settings.replace_null_with_default) {
            return write_value(out, settings, Some(schema), default);
        }
        if schema.optional {
            out.push_str("null");
            return Ok(());
        }
        return Err(DataError::new("Conversion error: null value for field that is required and has no default value"));
    }
    if let Some((schema, logical)) = schema.and_then(|s| Logical::of(s).map(|l| (s, l))) {
        return write_logical(out, settings, schema, logical, value);
    }
    let kind = match schema {
        Some(s) => s.kind,
        None => match inferred_type(value) {
            Some(k) => k,
            None => return Err(DataError::new("Mismatching schema: a struct value must be given with its schema (got no schema)")),
        },
    };
    match (kind, value) {
        (SchemaType::Int8, Value::Int8(v)) => write_int(out, v),
        (SchemaType::Int16, Value::Int16(v)) => write_int(out, v),
        (SchemaType::Int32, Value::Int32(v)) => write_int(out, v),
        (SchemaType::Int64, Value::Int64(v)) => write_int(out, v),
        (SchemaType::Float32, Value::Float32(v)) => write_f32(out, *v),
        (SchemaType::Float64, Value::Float64(v)) => write_f64(out, *v),
        (SchemaType::Boolean, Value::Boolean(v)) => out.push_str(if *v { "true" } else { "false" }),
        (SchemaType::String, Value::String(s)) => write_string(out, s),
        (SchemaType::Bytes, Value::Bytes(b)) => write_string(out, &STANDARD.encode(b)),
        (SchemaType::Array, Value::Array(items)) => {
            let element = schema.and_then(|s| s.value_schema.as_deref());
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_value(out, settings, element, item).map_err(|e| e.at_index(i))?;
            }
            out.push(']');
        }
        (SchemaType::Map, Value::Map(entries)) => write_map(out, settings, schema, entries)?,
        (SchemaType::Struct, Value::Struct(st)) => {
            let schema =
                schema.ok_or_else(|| DataError::new("Mismatching schema: a struct value must be given with its schema (got no schema)"))?;
            if !std::ptr::eq(schema, &**st.schema()) && schema != &**st.schema() {
                return Err(DataError::new("Mismatching schema: the struct value's own schema differs from the schema given for it"));
            }
            out.push('{');
            for (i, (field, v)) in schema.fields.iter().zip(st.values()).enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_string(out, &field.name);
                out.push(':');
                write_value(out, settings, Some(&field.schema), v).map_err(|e| e.at_field(&field.name))?;
            }
            out.push('}');
        }
        (kind, v) => return Err(DataError::new(format!("Invalid type for {}: {}", type_name(kind), value_type_name(v)))),
    }
    Ok(())
}

/// The schema type a value has when no schema is given (Connect's `ConnectSchema.schemaType`
/// of its Java class). A struct has none: Kafka refuses a struct without its schema.
fn inferred_type(value: &Value) -> Option<SchemaType> {
    Some(match value {
        Value::Boolean(_) => SchemaType::Boolean,
        Value::Int8(_) => SchemaType::Int8,
        Value::Int16(_) => SchemaType::Int16,
        Value::Int32(_) => SchemaType::Int32,
        Value::Int64(_) => SchemaType::Int64,
        Value::Float32(_) => SchemaType::Float32,
        Value::Float64(_) => SchemaType::Float64,
        Value::String(_) => SchemaType::String,
        Value::Bytes(_) => SchemaType::Bytes,
        Value::Array(_) => SchemaType::Array,
        Value::Map(_) => SchemaType::Map,
        Value::Null | Value::Struct(_) => return None,
    })
}

fn write_map(out: &mut String, settings: &Settings, schema: Option<&Schema>, entries: &[(Value, Value)]) -> Result<(), DataError> {
    let key_schema = schema.and_then(|s| s.key_schema.as_deref());
    let value_schema = schema.and_then(|s| s.value_schema.as_deref());
    let object_mode = match key_schema {
        Some(k) => k.kind == SchemaType::String,
        None => entries.iter().all(|(k, _)| matches!(k, Value::String(_))),
    };
    if object_mode {
        out.push('{');
        for (i, (k, v)) in entries.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            let key = object_key(settings, key_schema, k).map_err(|e| e.at_index(i))?;
            write_string(out, &key);
            out.push(':');
            write_value(out, settings, value_schema, v).map_err(|e| e.at_key(&key))?;
        }
        out.push('}');
    } else {
        out.push('[');
        for (i, (k, v)) in entries.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push('[');
            write_value(out, settings, key_schema, k).map_err(|e| e.at_index(i))?;
            out.push(',');
            write_value(out, settings, value_schema, v).map_err(|e| e.at_index(i))?;
            out.push(']');
        }
        out.push(']');
    }
    Ok(())
}

/// The member name for a map key in object mode (Jackson's `asText()` of the converted key).
fn object_key(settings: &Settings, key_schema: Option<&Schema>, key: &Value) -> Result<String, DataError> {
    match key {
        Value::String(s) => Ok(s.clone()),
        Value::Null => match key_schema {
            Some(ks) => match ks.default.as_ref().filter(|_| settings.replace_null_with_default) {
                Some(Value::String(d)) => Ok(d.clone()),
                _ if ks.optional => Ok("null".to_owned()),
                _ => Err(DataError::new("Conversion error: null value for field that is required and has no default value")),
            },
            None => Ok("null".to_owned()),
        },
        other => Err(DataError::new(format!("Invalid type for STRING: {}", value_type_name(other)))),
    }
}

fn write_logical(out: &mut String, settings: &Settings, schema: &Schema, logical: Logical, value: &Value) -> Result<(), DataError> {
    match (logical, value) {
        (Logical::Decimal, Value::Bytes(bytes)) => {
            let scale = decimal_scale(schema).map_err(DataError::new)?;
            let unscaled = Unscaled::from_twos_complement(bytes).ok_or_else(|| DataError::new("Invalid Decimal value: it has no bytes"))?;
            match settings.decimal_format {
                DecimalFormat::Base64 => write_string(out, &STANDARD.encode(unscaled.to_twos_complement())),
                DecimalFormat::Numeric => out.push_str(&decimal::to_java_string(&unscaled, scale)),
            }
        }
        (Logical::Date, Value::Int32(days)) => write_int(out, days),
        (Logical::Time, Value::Int32(ms)) => {
            if !(0..=MILLIS_PER_DAY).contains(&i64::from(*ms)) {
                return Err(DataError::new("Kafka Connect Time type should not have any date fields set to non-zero values."));
            }
            write_int(out, ms);
        }
        (Logical::Timestamp, Value::Int64(ms)) => write_int(out, ms),
        (l, v) => {
            return Err(DataError::new(format!(
                "Invalid type for {}: expected {} but was {}",
                l.name(),
                type_name(schema.kind),
                value_type_name(v)
            )))
        }
    }
    Ok(())
}

pub(super) fn read_value(settings: &Settings, schema: Option<&SchemaRef>, node: Option<&Node>) -> Result<Value, DataError> {
    let Some(schema) = schema else {
        return read_schemaless(node);
    };
    let node = match node {
        None | Some(Node::Null) => {
            if let Some(default) = schema.default.as_ref().filter(|d| !d.is_null() && settings.replace_null_with_default) {
                return Ok(default.clone());
            }
            if schema.optional {
                return Ok(Value::Null);
            }
            return Err(DataError::new(format!("Invalid null value for required {} field", type_name(schema.kind))));
        }
        Some(n) => n,
    };
    if let Some(logical) = Logical::of(schema) {
        return read_logical(schema, logical, node);
    }
    let kind = schema.kind;
    Ok(match (kind, node) {
        (SchemaType::Boolean, Node::Bool(b)) => Value::Boolean(*b),
        (SchemaType::Int8 | SchemaType::Int16 | SchemaType::Int32 | SchemaType::Int64, Node::Number(text)) => read_integer(kind, text)?,
        (SchemaType::Float32, Node::Number(text)) => Value::Float32(text.parse().map_err(|_| not_a_number(text))?),
        (SchemaType::Float64, Node::Number(text)) => Value::Float64(text.parse().map_err(|_| not_a_number(text))?),
        (SchemaType::Float32, Node::String(s)) if non_finite(s).is_some() => Value::Float32(non_finite(s).unwrap_or_default() as f32),
        (SchemaType::Float64, Node::String(s)) if non_finite(s).is_some() => Value::Float64(non_finite(s).unwrap_or_default()),
        (SchemaType::String, Node::String(s)) => Value::String(s.clone()),
        (SchemaType::Bytes, Node::String(s)) => Value::Bytes(decode_base64(s)?),
        (SchemaType::Array, Node::Array(items)) => {
            let element = schema.value_schema.as_ref();
            let values = items.iter().enumerate().map(|(i, item)| read_value(settings, element, Some(item)).map_err(|e| e.at_index(i)));
            Value::Array(values.collect::<Result<_, _>>()?)
        }
        (SchemaType::Map, _) => read_map(settings, schema, node)?,
        (SchemaType::Struct, Node::Object(_)) => {
            let mut values = Vec::with_capacity(schema.fields.len());
            for field in &schema.fields {
                values.push(read_value(settings, Some(&field.schema), node.get(&field.name)).map_err(|e| e.at_field(&field.name))?);
            }
            Value::Struct(Struct::from_values(schema.clone(), values))
        }
        (SchemaType::Struct, other) => {
            return Err(DataError::new(format!("Structs should be encoded as JSON objects, but found {}", other.node_type())))
        }
        (kind, other) => {
            return Err(DataError::new(format!(
                "Invalid value for {} schema: expected {} but found {}",
                type_name(kind),
                expected_json(kind),
                other.node_type()
            )))
        }
    })
}

fn expected_json(kind: SchemaType) -> &'static str {
    match kind {
        SchemaType::Boolean => "a JSON boolean",
        SchemaType::Int8 | SchemaType::Int16 | SchemaType::Int32 | SchemaType::Int64 => "a JSON integer",
        SchemaType::Float32 | SchemaType::Float64 => "a JSON number",
        SchemaType::String => "a JSON string",
        SchemaType::Bytes => "a base64 JSON string",
        SchemaType::Array => "a JSON array",
        SchemaType::Map => "a JSON object or array",
        SchemaType::Struct => "a JSON object",
    }
}

fn not_a_number(text: &str) -> DataError {
    DataError::new(format!("Invalid number {text}"))
}

/// The strings Jackson writes for non-finite doubles.
fn non_finite(s: &str) -> Option<f64> {
    match s {
        "NaN" => Some(f64::NAN),
        "Infinity" => Some(f64::INFINITY),
        "-Infinity" => Some(f64::NEG_INFINITY),
        _ => None,
    }
}

fn read_integer(kind: SchemaType, text: &str) -> Result<Value, DataError> {
    // A plain integer of up to 18 digits (every i64 of that length) is read directly; any
    // other form (a fraction, an exponent, more digits) goes through the decimal reading,
    // which accepts integral values written so and names what does not fit.
    let digits = text.strip_prefix('-').unwrap_or(text);
    let v = if (1..=18).contains(&digits.len()) && digits.bytes().all(|b| b.is_ascii_digit()) {
        text.parse::<i64>().ok()
    } else {
        DecimalText::parse(text).and_then(|d| d.to_i64())
    };
    let out_of_range = || DataError::new(format!("Number {text} is out of range for {}", type_name(kind)));
    let Some(v) = v else {
        let integral = DecimalText::parse(text).is_some_and(|d| d.rescale(0).is_ok());
        return Err(if integral {
            out_of_range()
        } else {
            DataError::new(format!("Expected an integer for {} but found {text}", type_name(kind)))
        });
    };
    Ok(match kind {
        SchemaType::Int8 => Value::Int8(i8::try_from(v).map_err(|_| out_of_range())?),
        SchemaType::Int16 => Value::Int16(i16::try_from(v).map_err(|_| out_of_range())?),
        SchemaType::Int32 => Value::Int32(i32::try_from(v).map_err(|_| out_of_range())?),
        _ => Value::Int64(v),
    })
}

fn decode_base64(s: &str) -> Result<Vec<u8>, DataError> {
    LENIENT_BASE64.decode(s).map_err(|e| DataError::new(format!("Invalid bytes field: not base64 ({e})")))
}

fn read_map(settings: &Settings, schema: &Schema, node: &Node) -> Result<Value, DataError> {
    let key_schema = schema.key_schema.as_ref();
    let value_schema = schema.value_schema.as_ref();
    if key_schema.is_none_or(|k| k.kind == SchemaType::String) {
        let Node::Object(members) = node else {
            return Err(DataError::new(format!(
                "Maps with string fields should be encoded as JSON objects, but found {}",
                node.node_type()
            )));
        };
        let mut entries = Vec::with_capacity(members.len());
        for (k, v) in distinct_members(members) {
            let key = match key_schema {
                Some(ks) => read_value(settings, Some(ks), Some(&Node::String(k.to_owned())))?,
                None => Value::String(k.to_owned()),
            };
            entries.push((key, read_value(settings, value_schema, Some(v)).map_err(|e| e.at_key(k))?));
        }
        return Ok(Value::Map(entries));
    }
    let Node::Array(pairs) = node else {
        return Err(DataError::new(format!(
            "Maps with non-string fields should be encoded as JSON array of tuples, but found {}",
            node.node_type()
        )));
    };
    let mut entries = Vec::with_capacity(pairs.len());
    for (i, pair) in pairs.iter().enumerate() {
        let Node::Array(kv) = pair else {
            return Err(DataError::new(format!("Found invalid map entry instead of array tuple: {}", pair.node_type())).at_index(i));
        };
        if kv.len() != 2 {
            return Err(DataError::new(format!("Found invalid map entry, expected length 2 but found :{}", kv.len())).at_index(i));
        }
        let key = read_value(settings, key_schema, Some(&kv[0])).map_err(|e| e.at_index(i))?;
        let value = read_value(settings, value_schema, Some(&kv[1])).map_err(|e| e.at_index(i))?;
        entries.push((key, value));
    }
    Ok(Value::Map(entries))
}

/// Object members as Jackson's `ObjectNode` holds them: a repeated key keeps its first
/// position and its last value.
fn distinct_members(members: &[(String, Node)]) -> Vec<(&str, &Node)> {
    let mut out: Vec<(&str, &Node)> = Vec::with_capacity(members.len());
    if members.len() <= 16 {
        for (k, v) in members {
            match out.iter_mut().find(|(ek, _)| *ek == k.as_str()) {
                Some(entry) => entry.1 = v,
                None => out.push((k, v)),
            }
        }
        return out;
    }
    let mut index = std::collections::HashMap::with_capacity(members.len());
    for (k, v) in members {
        match index.get(k.as_str()) {
            Some(&i) => out[i] = (k.as_str(), v),
            None => {
                index.insert(k.as_str(), out.len());
                out.push((k, v));
            }
        }
    }
    out
}

fn read_logical(schema: &Schema, logical: Logical, node: &Node) -> Result<Value, DataError> {
    match logical {
        Logical::Decimal => {
            let scale = decimal_scale(schema).map_err(DataError::new)?;
            let unscaled = match node {
                Node::Number(text) => DecimalText::parse(text)
                    .ok_or_else(|| not_a_number(text))?
                    .rescale(i64::from(scale))
                    .map_err(|e| DataError::new(format!("Cannot read {text} as a Decimal with scale {scale}: {e}")))?,
                Node::String(s) => Unscaled::from_twos_complement(&decode_base64(s)?)
                    .ok_or_else(|| DataError::new("Invalid bytes for Decimal field: no bytes"))?,
                other => {
                    return Err(DataError::new(format!(
                        "Invalid type for Decimal, underlying representation should be numeric or bytes but was {}",
                        other.node_type()
                    )))
                }
            };
            Ok(Value::Bytes(unscaled.to_twos_complement()))
        }
        Logical::Date | Logical::Time => {
            let v = match node {
                Node::Number(t) if Node::is_integral_text(t) => {
                    DecimalText::parse(t).and_then(|d| d.to_i64()).and_then(|v| i32::try_from(v).ok())
                }
                _ => None,
            };
            let Some(v) = v else {
                return Err(DataError::new(format!(
                    "Invalid type for {}, underlying representation should be integer but was {}",
                    logical.name(),
                    node.node_type()
                )));
            };
            if logical == Logical::Time && !(0..=MILLIS_PER_DAY).contains(&i64::from(v)) {
                return Err(DataError::new("Time values must use number of milliseconds greater than 0 and less than 86400000"));
            }
            Ok(Value::Int32(v))
        }
        Logical::Timestamp => match node {
            Node::Number(t) if Node::is_integral_text(t) => match DecimalText::parse(t).and_then(|d| d.to_i64()) {
                Some(v) => Ok(Value::Int64(v)),
                None => Err(DataError::new(format!("Number {t} is out of range for a Timestamp (int64)"))),
            },
            other => Err(DataError::new(format!(
                "Invalid type for Timestamp, underlying representation should be integral but was {}",
                other.node_type()
            ))),
        },
    }
}

/// Without a schema: null, booleans, integers as `Int64`, other numbers as `Float64`,
/// strings, arrays, and objects as maps with string keys.
fn read_schemaless(node: Option<&Node>) -> Result<Value, DataError> {
    let Some(node) = node else {
        return Ok(Value::Null);
    };
    Ok(match node {
        Node::Null => Value::Null,
        Node::Bool(b) => Value::Boolean(*b),
        Node::Number(text) if Node::is_integral_text(text) => match DecimalText::parse(text).and_then(|d| d.to_i64()) {
            Some(v) => Value::Int64(v),
            None => return Err(DataError::new(format!("Number {text} is out of range for INT64"))),
        },
        Node::Number(text) => Value::Float64(text.parse().map_err(|_| not_a_number(text))?),
        Node::String(s) => Value::String(s.clone()),
        Node::Array(items) => {
            let values = items.iter().enumerate().map(|(i, item)| read_schemaless(Some(item)).map_err(|e| e.at_index(i)));
            Value::Array(values.collect::<Result<_, _>>()?)
        }
        Node::Object(members) => {
            let mut entries = Vec::with_capacity(members.len());
            for (k, v) in distinct_members(members) {
                entries.push((Value::String(k.to_owned()), read_schemaless(Some(v)).map_err(|e| e.at_key(k))?));
            }
            Value::Map(entries)
        }
    })
}
