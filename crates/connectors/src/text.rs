//! How a value prints as text, as Java's `toString` prints Connect values (used by
//! FileStreamSink, which writes `value.toString()` per line).

use std::fmt::Write as _;

use base64::Engine as _;
use sluice_api::Value;

pub fn java_string(v: &Value) -> String {
    let mut out = String::new();
    write_value(&mut out, v);
    out
}

fn write_value(out: &mut String, v: &Value) {
    match v {
        Value::Null => out.push_str("null"),
        Value::Boolean(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Int8(n) => { let _ = write!(out, "{n}"); }
        Value::Int16(n) => { let _ = write!(out, "{n}"); }
        Value::Int32(n) => { let _ = write!(out, "{n}"); }
        Value::Int64(n) => { let _ = write!(out, "{n}"); }
        Value::Float32(f) => out.push_str(&java_double(f64::from(*f))),
        Value::Float64(f) => out.push_str(&java_double(*f)),
        Value::String(s) => out.push_str(s),
        Value::Bytes(b) => out.push_str(&base64::engine::general_purpose::STANDARD.encode(b)),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_value(out, item);
            }
            out.push(']');
        }
        Value::Map(entries) => {
            out.push('{');
            for (i, (k, v)) in entries.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_value(out, k);
                out.push('=');
                write_value(out, v);
            }
            out.push('}');
        }
        Value::Struct(s) => {
            out.push_str("Struct{");
            let mut first = true;
            for (field, value) in s.schema().fields.iter().zip(s.values()) {
                if value.is_null() {
                    continue;
                }
                if !first {
                    out.push(',');
                }
                first = false;
                out.push_str(&field.name);
                out.push('=');
                write_value(out, value);
            }
            out.push('}');
        }
    }
}

/// Java's `Double.toString` for the common range: always a decimal point.
fn java_double(f: f64) -> String {
    if f.is_nan() {
        return "NaN".to_owned();
    }
    if f.is_infinite() {
        return if f > 0.0 { "Infinity".to_owned() } else { "-Infinity".to_owned() };
    }
    let s = format!("{f}");
    if s.contains('.') || s.contains('e') {
        s
    } else {
        format!("{s}.0")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_api::{Schema, Struct};

    #[test]
    fn prints_like_java() {
        let schema = Schema::struct_of([("a", Schema::int32().into_ref()), ("b", Schema::string().optional().into_ref()), ("c", Schema::float64().into_ref())]).into_ref();
        let s = Struct::new(schema).with("a", 1).with("c", Value::Float64(2.0));
        assert_eq!(java_string(&Value::Struct(s)), "Struct{a=1,c=2.0}");
        assert_eq!(java_string(&Value::Array(vec![Value::Int64(1), "x".into()])), "[1, x]");
        assert_eq!(java_string(&Value::Map(vec![("k".into(), Value::Boolean(true))])), "{k=true}");
        assert_eq!(java_string(&Value::Null), "null");
    }
}
