//! Connect values as JSON text, as Kafka's `JsonConverter` renders them with
//! `schemas.enable=false`: logical dates and times as their integers, bytes as base64, decimals
//! as base64 of the unscaled bytes or, in `NUMERIC` form, as numbers. Shared by the sinks that
//! write JSON (the S3 sink's `JsonFormat`, the JDBC sink's `jsonb` columns).

use base64::Engine as _;
use serde_json::Value as Json;
use sluice_api::{Schema, Value};

/// How a decimal is written: Connect's default (base64 of the unscaled bytes) or as a number
/// (`json.decimal.format=NUMERIC`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DecimalFormat {
    Base64,
    Numeric,
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

/// Writes `v` as JSON to `out`. Decimals in `NUMERIC` form are written digit for digit, with
/// their scale (`10.00`, not `10.0`), as Kafka's `JsonConverter` writes a `BigDecimal`: a JSON
/// number here never goes through a float.
pub fn write_json(out: &mut Vec<u8>, schema: Option<&Schema>, v: &Value, decimal: DecimalFormat) -> serde_json::Result<()> {
    let scalar = |out: &mut Vec<u8>, j: Json| serde_json::to_writer(out, &j);
    match v {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Boolean(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
        Value::Int8(i) => out.extend_from_slice(i.to_string().as_bytes()),
        Value::Int16(i) => out.extend_from_slice(i.to_string().as_bytes()),
        Value::Int32(i) => out.extend_from_slice(i.to_string().as_bytes()),
        Value::Int64(i) => out.extend_from_slice(i.to_string().as_bytes()),
        Value::Float32(f) => scalar(out, float(f64::from(*f)))?,
        Value::Float64(f) => scalar(out, float(*f))?,
        Value::String(s) => scalar(out, Json::String(s.clone()))?,
        Value::Bytes(b) => match (schema.and_then(Schema::decimal_scale), decimal) {
            (Some(scale), DecimalFormat::Numeric) if b.len() <= 16 => out.extend_from_slice(decimal_string(b, scale).as_bytes()),
            _ => scalar(out, Json::String(base64::engine::general_purpose::STANDARD.encode(b)))?,
        },
        Value::Array(items) => {
            let elem = schema.and_then(|s| s.value_schema.as_deref());
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_json(out, elem, item, decimal)?;
            }
            out.push(b']');
        }
        Value::Map(entries) => {
            let ks = schema.and_then(|s| s.key_schema.as_deref());
            let vs = schema.and_then(|s| s.value_schema.as_deref());
            let as_object = entries.iter().all(|(k, _)| matches!(k, Value::String(_)));
            out.push(if as_object { b'{' } else { b'[' });
            for (i, (k, v)) in entries.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                if as_object {
                    scalar(out, Json::String(k.as_str().unwrap_or_default().to_owned()))?;
                    out.push(b':');
                    write_json(out, vs, v, decimal)?;
                } else {
                    out.push(b'[');
                    write_json(out, ks, k, decimal)?;
                    out.push(b',');
                    write_json(out, vs, v, decimal)?;
                    out.push(b']');
                }
            }
            out.push(if as_object { b'}' } else { b']' });
        }
        Value::Struct(s) => {
            let schema = s.schema().clone();
            out.push(b'{');
            for (i, f) in schema.fields.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                scalar(out, Json::String(f.name.clone()))?;
                out.push(b':');
                write_json(out, Some(&f.schema), &s.values()[f.index], decimal)?;
            }
            out.push(b'}');
        }
    }
    Ok(())
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
        let json = |v: &Value, format| {
            let mut out = Vec::new();
            write_json(&mut out, Some(&schema), v, format).unwrap();
            String::from_utf8(out).unwrap()
        };
        assert_eq!(json(&v, DecimalFormat::Base64), r#"{"d":"MDk=","day":19000,"m":{"a":1}}"#);
        assert_eq!(json(&v, DecimalFormat::Numeric), r#"{"d":123.45,"day":19000,"m":{"a":1}}"#);
        // The scale is kept (10.00, not 10.0), and digits beyond a float's precision too.
        let ten = Value::Struct(
            Struct::new(schema.clone()).with("d", Value::Bytes(vec![0x03, 0xe8])).with("day", 0).with("m", Value::Map(vec![])),
        );
        assert_eq!(json(&ten, DecimalFormat::Numeric), r#"{"d":10.00,"day":0,"m":{}}"#);
        let wide = Schema::struct_of([("d", Schema::decimal(9).into_ref())]).into_ref();
        let unscaled = 12_345_678_901_234_567_890_123_456_789i128.to_be_bytes().to_vec();
        let mut out = Vec::new();
        write_json(
            &mut out,
            Some(&wide),
            &Value::Struct(Struct::new(wide.clone()).with("d", Value::Bytes(unscaled))),
            DecimalFormat::Numeric,
        )
        .unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), r#"{"d":12345678901234567890.123456789}"#);
    }
}
