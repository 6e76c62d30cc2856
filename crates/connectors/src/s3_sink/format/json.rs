//! `JsonFormat`: one JSON document per line, the value as Kafka's `JsonConverter` renders it
//! with `schemas.enable=false` (what Confluent's S3 sink writes): logical dates and times as
//! their integers, bytes as base64, decimals as base64 of the unscaled bytes or, with
//! `json.decimal.format=NUMERIC`, as numbers. Schemaless values are written as they are.

use base64::Engine as _;
use serde_json::Value as Json;
use sluice_api::{ConnectResult, Schema, SinkRecord, Value};

use super::bytes::LineFormat;
use crate::s3_sink::config::DecimalFormat;

pub struct JsonLines {
    pub decimal: DecimalFormat,
}

impl LineFormat for JsonLines {
    fn line(&self, r: &SinkRecord, out: &mut Vec<u8>) -> ConnectResult<()> {
        let json = to_json(r.value_schema.as_deref(), &r.value, self.decimal);
        serde_json::to_writer(&mut *out, &json).map_err(|e| sluice_api::ConnectError::fatal_from("encoding a record as JSON failed", e))?;
        out.push(b'\n');
        Ok(())
    }
}

/// A short name of a value's kind, for error messages.
pub fn kind(v: &Value) -> &'static str {
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

fn float(v: f64) -> Json {
    serde_json::Number::from_f64(v).map(Json::Number).unwrap_or_else(|| Json::String(v.to_string()))
}

/// The unscaled value of a Connect decimal (big-endian two's complement) as a decimal string.
pub fn decimal_string(bytes: &[u8], scale: i32) -> String {
    if bytes.len() <= 16 {
        let v = be_i128(bytes);
        let neg = v < 0;
        let mut digits = v.unsigned_abs().to_string();
        if scale > 0 {
            let s = scale as usize;
            if digits.len() <= s {
                digits = format!("{}{digits}", "0".repeat(s + 1 - digits.len()));
            }
            digits.insert(digits.len() - s, '.');
        } else if scale < 0 {
            digits.push_str(&"0".repeat((-scale) as usize));
        }
        if neg {
            digits.insert(0, '-');
        }
        digits
    } else {
        base64::engine::general_purpose::STANDARD.encode(bytes)
    }
}

/// Sign-extends big-endian two's complement bytes (at most 16) into an `i128`.
pub fn be_i128(bytes: &[u8]) -> i128 {
    let mut buf = if bytes.first().is_some_and(|b| b & 0x80 != 0) { [0xffu8; 16] } else { [0u8; 16] };
    let n = bytes.len().min(16);
    buf[16 - n..].copy_from_slice(&bytes[bytes.len() - n..]);
    i128::from_be_bytes(buf)
}

pub fn to_json(schema: Option<&Schema>, v: &Value, decimal: DecimalFormat) -> Json {
    match v {
        Value::Null => Json::Null,
        Value::Boolean(b) => Json::Bool(*b),
        Value::Int8(i) => Json::from(*i),
        Value::Int16(i) => Json::from(*i),
        Value::Int32(i) => Json::from(*i),
        Value::Int64(i) => Json::from(*i),
        Value::Float32(f) => float(f64::from(*f)),
        Value::Float64(f) => float(*f),
        Value::String(s) => Json::String(s.clone()),
        Value::Bytes(b) => match (schema.and_then(Schema::decimal_scale), decimal) {
            (Some(scale), DecimalFormat::Numeric) => {
                let s = decimal_string(b, scale);
                serde_json::from_str::<serde_json::Number>(&s).map(Json::Number).unwrap_or(Json::String(s))
            }
            _ => Json::String(base64::engine::general_purpose::STANDARD.encode(b)),
        },
        Value::Array(items) => {
            let elem = schema.and_then(|s| s.value_schema.as_deref());
            Json::Array(items.iter().map(|i| to_json(elem, i, decimal)).collect())
        }
        Value::Map(entries) => {
            let ks = schema.and_then(|s| s.key_schema.as_deref());
            let vs = schema.and_then(|s| s.value_schema.as_deref());
            if entries.iter().all(|(k, _)| matches!(k, Value::String(_))) {
                Json::Object(entries.iter().map(|(k, v)| (k.as_str().unwrap_or_default().to_owned(), to_json(vs, v, decimal))).collect())
            } else {
                Json::Array(entries.iter().map(|(k, v)| Json::Array(vec![to_json(ks, k, decimal), to_json(vs, v, decimal)])).collect())
            }
        }
        Value::Struct(s) => {
            let schema = s.schema().clone();
            Json::Object(schema.fields.iter().map(|f| (f.name.clone(), to_json(Some(&f.schema), &s.values()[f.index], decimal))).collect())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_api::Struct;

    #[test]
    fn decimals_and_logical_types() {
        assert_eq!(decimal_string(&[0x30, 0x39], 2), "123.45");
        assert_eq!(decimal_string(&[0xff, 0x85], 3), "-0.123");
        assert_eq!(decimal_string(&[0x05], 0), "5");
        let schema = Schema::struct_of([
            ("d", Schema::decimal(2).into_ref()),
            ("day", Schema::date().into_ref()),
            ("m", Schema::map(Schema::string().into_ref(), Schema::int32().into_ref()).into_ref()),
        ])
        .into_ref();
        let v = Value::Struct(
            Struct::new(schema.clone())
                .with("d", Value::Bytes(vec![0x30, 0x39]))
                .with("day", 19000)
                .with("m", Value::Map(vec![("a".into(), 1.into())])),
        );
        assert_eq!(to_json(Some(&schema), &v, DecimalFormat::Base64).to_string(), r#"{"d":"MDk=","day":19000,"m":{"a":1}}"#);
        assert_eq!(to_json(Some(&schema), &v, DecimalFormat::Numeric).to_string(), r#"{"d":123.45,"day":19000,"m":{"a":1}}"#);
    }
}
