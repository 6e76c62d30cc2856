//! Connect schemas and values as PostgreSQL sees them: the column type a field gets when a
//! table is created or evolved, and the text form of a value (PostgreSQL's input syntax,
//! what `COPY … FROM STDIN` in text format reads).
//!
//! Debezium's logical types are recognised by schema name: `io.debezium.time.*` (epoch
//! days, milli/micro/nanoseconds), `ZonedTimestamp`/`ZonedTime` (ISO strings), `Json`,
//! `Uuid`, `Xml`, `Enum`, `VariableScaleDecimal`; and Connect's `Decimal`, `Date`, `Time`,
//! `Timestamp`. Structs and maps (other than the logical types above) become `jsonb`
//! columns holding the value as JSON.

use std::borrow::Cow;

use sluice_api::schema::logical;
use sluice_api::{Schema, SchemaType, Value};

/// Debezium's placeholder for an unchanged TOASTed column that the source did not send.
pub const UNAVAILABLE_VALUE: &str = "__debezium_unavailable_value";

pub mod names {
    pub const DATE: &str = "io.debezium.time.Date";
    pub const TIME: &str = "io.debezium.time.Time";
    pub const MICRO_TIME: &str = "io.debezium.time.MicroTime";
    pub const NANO_TIME: &str = "io.debezium.time.NanoTime";
    pub const TIMESTAMP: &str = "io.debezium.time.Timestamp";
    pub const MICRO_TIMESTAMP: &str = "io.debezium.time.MicroTimestamp";
    pub const NANO_TIMESTAMP: &str = "io.debezium.time.NanoTimestamp";
    pub const ZONED_TIMESTAMP: &str = "io.debezium.time.ZonedTimestamp";
    pub const ZONED_TIME: &str = "io.debezium.time.ZonedTime";
    pub const UUID: &str = "io.debezium.data.Uuid";
    pub const JSON: &str = "io.debezium.data.Json";
    pub const XML: &str = "io.debezium.data.Xml";
    pub const VARIABLE_SCALE_DECIMAL: &str = "io.debezium.data.VariableScaleDecimal";
}

/// One value ready for the target. Numbers, booleans and timestamps keep their value (a
/// writer may send them in binary); [`Cell::text`] is the text form of any of them.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Cell {
    Null,
    /// PostgreSQL's text input form.
    Text(String),
    /// An integer without a logical type.
    Int(i64),
    /// A float32, as its bits.
    Float32(u32),
    /// A float64, as its bits.
    Float64(u64),
    Bool(bool),
    /// A timestamp without time zone, in microseconds since 1970-01-01 (Connect's
    /// `Timestamp`, Debezium's `Timestamp`, `MicroTimestamp` and `NanoTimestamp`).
    Timestamp(i64),
    /// The source did not send this (unchanged, TOASTed) value: keep what the target has.
    Unchanged,
}

impl Cell {
    /// The text input form; `None` for NULL and an unchanged value.
    pub fn text(&self) -> Option<Cow<'_, str>> {
        Some(match self {
            Cell::Text(s) => Cow::Borrowed(s),
            Cell::Int(v) => Cow::Owned(itoa::Buffer::new().format(*v).to_owned()),
            Cell::Float32(bits) => {
                let v = f32::from_bits(*bits);
                Cow::Owned(float_text(f64::from(v), v.to_string()))
            }
            Cell::Float64(bits) => {
                let v = f64::from_bits(*bits);
                Cow::Owned(float_text(v, v.to_string()))
            }
            Cell::Bool(b) => Cow::Borrowed(if *b { "t" } else { "f" }),
            Cell::Timestamp(micros) => Cow::Owned(timestamp_text(*micros)),
            Cell::Null | Cell::Unchanged => return None,
        })
    }
}

/// The PostgreSQL column type of a field with this schema.
pub fn column_type(schema: &Schema) -> Result<String, String> {
    if let Some(scale) = schema.decimal_scale() {
        return Ok(match schema.parameter("connect.decimal.precision").and_then(|p| p.parse::<i32>().ok()) {
            Some(p) if p >= scale && p > 0 => format!("numeric({p},{scale})"),
            _ => "numeric".to_owned(),
        });
    }
    let by_name = match schema.name.as_deref() {
        Some(logical::DATE | names::DATE) => Some("date"),
        Some(logical::TIME | names::TIME | names::MICRO_TIME | names::NANO_TIME) => Some("time"),
        Some(logical::TIMESTAMP | names::TIMESTAMP | names::MICRO_TIMESTAMP | names::NANO_TIMESTAMP) => Some("timestamp"),
        Some(names::ZONED_TIMESTAMP) => Some("timestamptz"),
        Some(names::ZONED_TIME) => Some("timetz"),
        Some(names::UUID) => Some("uuid"),
        Some(names::JSON) => Some("jsonb"),
        Some(names::XML) => Some("xml"),
        Some(names::VARIABLE_SCALE_DECIMAL) => Some("numeric"),
        _ => None,
    };
    if let Some(t) = by_name {
        return Ok(t.to_owned());
    }
    Ok(match schema.kind {
        SchemaType::Int8 | SchemaType::Int16 => "smallint".to_owned(),
        SchemaType::Int32 => "integer".to_owned(),
        SchemaType::Int64 => "bigint".to_owned(),
        SchemaType::Float32 => "real".to_owned(),
        SchemaType::Float64 => "double precision".to_owned(),
        SchemaType::Boolean => "boolean".to_owned(),
        SchemaType::String => "text".to_owned(),
        SchemaType::Bytes => "bytea".to_owned(),
        SchemaType::Array => {
            let element = schema.value_schema.as_ref().ok_or("an array schema without an element schema")?;
            if element.kind == SchemaType::Array {
                return Err("nested arrays are not supported yet".to_owned());
            }
            format!("{}[]", column_type(element)?)
        }
        // Nested values are kept whole, as JSON (see `json_text`).
        SchemaType::Map | SchemaType::Struct => "jsonb".to_owned(),
    })
}

/// Whether a value is Debezium's unavailable-value placeholder.
pub fn is_unavailable(value: &Value) -> bool {
    match value {
        Value::String(s) => s == UNAVAILABLE_VALUE,
        Value::Bytes(b) => b == UNAVAILABLE_VALUE.as_bytes(),
        Value::Array(items) => items.len() == 1 && is_unavailable(&items[0]),
        _ => false,
    }
}

/// A value of a field as a cell: the placeholder becomes [`Cell::Unchanged`].
pub fn cell(value: &Value, schema: &Schema) -> Result<Cell, String> {
    if value.is_null() {
        return Ok(Cell::Null);
    }
    if is_unavailable(value) {
        return Ok(Cell::Unchanged);
    }
    if schema.decimal_scale().is_none() {
        let typed = match (schema.name.as_deref(), value) {
            (None, Value::Int8(v)) => Some(Cell::Int(i64::from(*v))),
            (None, Value::Int16(v)) => Some(Cell::Int(i64::from(*v))),
            (None, Value::Int32(v)) => Some(Cell::Int(i64::from(*v))),
            (None, Value::Int64(v)) => Some(Cell::Int(*v)),
            (None, Value::Float32(v)) => Some(Cell::Float32(v.to_bits())),
            (None, Value::Float64(v)) => Some(Cell::Float64(v.to_bits())),
            (None, Value::Boolean(b)) => Some(Cell::Bool(*b)),
            (Some(logical::TIMESTAMP | names::TIMESTAMP), v) => v.as_i64().map(|ms| Cell::Timestamp(ms.saturating_mul(1000))),
            (Some(names::MICRO_TIMESTAMP), v) => v.as_i64().map(Cell::Timestamp),
            (Some(names::NANO_TIMESTAMP), v) => v.as_i64().map(|ns| Cell::Timestamp(ns.div_euclid(1000))),
            _ => None,
        };
        if let Some(cell) = typed {
            return Ok(cell);
        }
    }
    text(value, schema).map(Cell::Text)
}

/// PostgreSQL's text input form of a non-null value.
pub fn text(value: &Value, schema: &Schema) -> Result<String, String> {
    let bad = || {
        format!(
            "a {:?} value does not fit its {} schema{}",
            value,
            schema.kind.json_name(),
            schema.name.as_deref().map(|n| format!(" ({n})")).unwrap_or_default()
        )
    };
    if let Some(scale) = schema.decimal_scale() {
        let Value::Bytes(b) = value else { return Err(bad()) };
        return Ok(decimal_text(b, scale));
    }
    let int = || value.as_i64().ok_or_else(bad);
    match schema.name.as_deref() {
        Some(logical::DATE | names::DATE) => return Ok(date_text(int()?)),
        Some(logical::TIME | names::TIME) => return Ok(time_text(int()? * 1000)),
        Some(names::MICRO_TIME) => return Ok(time_text(int()?)),
        Some(names::NANO_TIME) => return Ok(time_text(int()? / 1000)),
        Some(logical::TIMESTAMP | names::TIMESTAMP) => return Ok(timestamp_text(int()?.saturating_mul(1000))),
        Some(names::MICRO_TIMESTAMP) => return Ok(timestamp_text(int()?)),
        Some(names::NANO_TIMESTAMP) => return Ok(timestamp_text(int()?.div_euclid(1000))),
        Some(names::VARIABLE_SCALE_DECIMAL) => {
            let s = value.as_struct().ok_or_else(bad)?;
            let scale = s.get("scale").and_then(Value::as_i64).ok_or_else(bad)?;
            let Some(Value::Bytes(b)) = s.get("value") else { return Err(bad()) };
            return Ok(decimal_text(b, scale as i32));
        }
        _ => {}
    }
    Ok(match value {
        Value::Boolean(b) => if *b { "t" } else { "f" }.to_owned(),
        Value::Int8(v) => itoa::Buffer::new().format(*v).to_owned(),
        Value::Int16(v) => itoa::Buffer::new().format(*v).to_owned(),
        Value::Int32(v) => itoa::Buffer::new().format(*v).to_owned(),
        Value::Int64(v) => itoa::Buffer::new().format(*v).to_owned(),
        Value::Float32(v) => float_text(f64::from(*v), v.to_string()),
        Value::Float64(v) => float_text(*v, v.to_string()),
        Value::String(s) => s.clone(),
        Value::Bytes(b) => {
            let mut out = String::with_capacity(2 + b.len() * 2);
            out.push_str("\\x");
            for byte in b {
                out.push_str(&format!("{byte:02x}"));
            }
            out
        }
        Value::Array(items) => {
            let element = schema.value_schema.as_deref().ok_or_else(bad)?;
            let mut out = String::from("{");
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                if item.is_null() {
                    out.push_str("NULL");
                } else {
                    out.push('"');
                    for ch in text(item, element)?.chars() {
                        if ch == '"' || ch == '\\' {
                            out.push('\\');
                        }
                        out.push(ch);
                    }
                    out.push('"');
                }
            }
            out.push('}');
            out
        }
        Value::Map(_) | Value::Struct(_) => json_text(value, schema)?,
        Value::Null => return Err(bad()),
    })
}

/// A struct or map as JSON, the way `JsonConverter` writes a value without its schema, except
/// that decimals are numbers (`json.decimal.format=NUMERIC`), so they stay numbers in `jsonb`.
fn json_text(value: &Value, schema: &Schema) -> Result<String, String> {
    let mut out = Vec::new();
    crate::value_json::write_json(&mut out, Some(schema), value, crate::value_json::DecimalFormat::Numeric)
        .map_err(|e| format!("cannot write a {} value as JSON: {e}", schema.kind.json_name()))?;
    String::from_utf8(out).map_err(|e| format!("cannot write a {} value as JSON: {e}", schema.kind.json_name()))
}

fn float_text(v: f64, shown: String) -> String {
    if v.is_nan() {
        "NaN".to_owned()
    } else if v.is_infinite() {
        if v > 0.0 { "Infinity" } else { "-Infinity" }.to_owned()
    } else {
        shown
    }
}

/// The decimal text of a big-endian two's-complement unscaled value and its scale.
pub fn decimal_text(bytes: &[u8], scale: i32) -> String {
    let negative = bytes.first().is_some_and(|b| b & 0x80 != 0);
    let mut mag: Vec<u8> = bytes.to_vec();
    if negative {
        for b in mag.iter_mut() {
            *b = !*b;
        }
        for b in mag.iter_mut().rev() {
            let (v, overflow) = b.overflowing_add(1);
            *b = v;
            if !overflow {
                break;
            }
        }
    }
    // Magnitude to decimal digits by repeated division by 10.
    let mut digits = Vec::new();
    let mut cur: Vec<u8> = mag.into_iter().skip_while(|b| *b == 0).collect();
    while !cur.is_empty() {
        let mut rem = 0u32;
        let mut next = Vec::with_capacity(cur.len());
        for b in &cur {
            let acc = (rem << 8) | u32::from(*b);
            let q = acc / 10;
            rem = acc % 10;
            if !(next.is_empty() && q == 0) {
                next.push(q as u8);
            }
        }
        digits.push(b'0' + rem as u8);
        cur = next;
    }
    if digits.is_empty() {
        digits.push(b'0');
    }
    digits.reverse();
    let mut s = String::from_utf8(digits).expect("ascii digits");
    if scale > 0 {
        let scale = scale as usize;
        if s.len() <= scale {
            s = format!("{}{s}", "0".repeat(scale + 1 - s.len()));
        }
        s.insert(s.len() - scale, '.');
    } else if scale < 0 && s != "0" {
        s.push_str(&"0".repeat((-scale) as usize));
    }
    if negative {
        s.insert(0, '-');
    }
    s
}

/// Appends `v` in decimal, zero-padded to `width` digits (values are never negative here).
fn push_padded(out: &mut String, v: i64, width: usize) {
    let mut b = itoa::Buffer::new();
    let digits = b.format(v);
    for _ in digits.len()..width {
        out.push('0');
    }
    out.push_str(digits);
}

/// `YYYY-MM-DD` (with ` BC` kept for the caller) of the day `days` after 1970-01-01;
/// returns whether the year is BC. Written by hand: the sink formats one per temporal
/// cell, and `format!` cost more than the rest of the cell.
fn push_date(out: &mut String, days: i64) -> bool {
    let (y, m, d) = sluice_api::text::civil_from_days(days);
    let bc = y <= 0;
    push_padded(out, if bc { 1 - y } else { y }, 4);
    out.push('-');
    push_padded(out, m.into(), 2);
    out.push('-');
    push_padded(out, d.into(), 2);
    bc
}

fn push_time(out: &mut String, micros: i64) {
    let micros = micros.rem_euclid(86_400_000_000);
    let secs = micros / 1_000_000;
    push_padded(out, secs / 3600, 2);
    out.push(':');
    push_padded(out, secs / 60 % 60, 2);
    out.push(':');
    push_padded(out, secs % 60, 2);
    out.push('.');
    push_padded(out, micros % 1_000_000, 6);
}

fn date_text(days: i64) -> String {
    let mut out = String::with_capacity(13);
    if push_date(&mut out, days) {
        out.push_str(" BC");
    }
    out
}

fn time_text(micros: i64) -> String {
    let mut out = String::with_capacity(15);
    push_time(&mut out, micros);
    out
}

fn timestamp_text(micros: i64) -> String {
    let mut out = String::with_capacity(29);
    let bc = push_date(&mut out, micros.div_euclid(86_400_000_000));
    out.push(' ');
    push_time(&mut out, micros);
    if bc {
        out.push_str(" BC");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typed_cells_keep_the_text_form() {
        let cases = [
            (Value::Int8(-3), Schema::int8()),
            (Value::Int16(300), Schema::int16()),
            (Value::Int32(i32::MIN), Schema::int32()),
            (Value::Int64(i64::MAX), Schema::int64()),
            (Value::Float32(1.1), Schema::float32()),
            (Value::Float32(f32::NAN), Schema::float32()),
            (Value::Float64(-0.1), Schema::float64()),
            (Value::Float64(f64::NEG_INFINITY), Schema::float64()),
            (Value::Boolean(true), Schema::boolean()),
            (Value::Int64(1_700_000_000_123), Schema::timestamp()),
            (Value::Int64(-62_135_596_800_000_001), Schema::int64().named(names::MICRO_TIMESTAMP)),
            (Value::Int64(1_700_000_000_123_456_789), Schema::int64().named(names::NANO_TIMESTAMP)),
        ];
        for (value, schema) in cases {
            let c = cell(&value, &schema).unwrap();
            assert!(!matches!(c, Cell::Text(_)), "{value:?} stays typed");
            assert_eq!(c.text().as_deref(), Some(text(&value, &schema).unwrap().as_str()), "{value:?}");
        }
        // Named integers other than timestamps stay text.
        assert!(matches!(cell(&Value::Int32(19_782), &Schema::int32().named(names::DATE)).unwrap(), Cell::Text(_)));
    }

    #[test]
    fn decimals() {
        assert_eq!(decimal_text(&[0x7f], 2), "1.27");
        assert_eq!(decimal_text(&[0x00, 0x80], 2), "1.28");
        assert_eq!(decimal_text(&[0x80], 2), "-1.28");
        assert_eq!(decimal_text(&[0xff, 0x7f], 2), "-1.29");
        assert_eq!(decimal_text(&[0x05, 0xdc], 3), "1.500");
        assert_eq!(decimal_text(&[0x01, 0x00, 0x00], 0), "65536");
        assert_eq!(decimal_text(&[0], 2), "0.00");
        assert_eq!(decimal_text(&[0x05], 4), "0.0005");
        assert_eq!(decimal_text(&[0xff], 0), "-1");
    }

    #[test]
    fn temporal_and_arrays() {
        let s = |schema: Schema, v: Value| text(&v, &schema).unwrap();
        assert_eq!(s(Schema::date(), Value::Int32(-1)), "1969-12-31");
        assert_eq!(s(Schema::int64().named(names::MICRO_TIMESTAMP), Value::Int64(1_000_002)), "1970-01-01 00:00:01.000002");
        assert_eq!(s(Schema::int64().named(names::MICRO_TIME), Value::Int64(3_600_500_000)), "01:00:00.500000");
        assert_eq!(s(Schema::timestamp(), Value::Int64(-1)), "1969-12-31 23:59:59.999000");
        assert_eq!(date_text(-719_528), "0001-01-01 BC");
        assert_eq!(date_text(-719_162), "0001-01-01");
        assert_eq!(date_text(2_932_897), "10000-01-01");
        assert_eq!(timestamp_text(-719_528 * 86_400_000_000 + 1), "0001-01-01 00:00:00.000001 BC");
        assert_eq!(timestamp_text(2_932_896 * 86_400_000_000 + 86_399_999_999), "9999-12-31 23:59:59.999999");
        assert_eq!(time_text(-1), "23:59:59.999999");
        assert_eq!(s(Schema::int64(), Value::Int64(i64::MIN)), i64::MIN.to_string());
        assert_eq!(s(Schema::int8(), Value::Int8(-7)), "-7");
        let arr = Schema::array(Schema::string().optional().into_ref());
        assert_eq!(s(arr.clone(), Value::Array(vec!["a".into(), Value::Null, "q\"x\\".into()])), r#"{"a",NULL,"q\"x\\"}"#);
        assert_eq!(column_type(&arr).unwrap(), "text[]");
        assert_eq!(s(Schema::bytes(), Value::Bytes(vec![0, 255])), "\\x00ff");
        assert_eq!(column_type(&Schema::decimal(2).with_parameter("connect.decimal.precision", "10")).unwrap(), "numeric(10,2)");
        assert_eq!(cell(&Value::String(UNAVAILABLE_VALUE.into()), &Schema::string()).unwrap(), Cell::Unchanged);
        assert_eq!(cell(&Value::Array(vec![UNAVAILABLE_VALUE.into()]), &arr).unwrap(), Cell::Unchanged);
    }

    #[test]
    fn structs_and_maps_are_json() {
        use sluice_api::Struct;
        let addr = Schema::struct_of([
            ("city", Schema::string().into_ref()),
            ("zip", Schema::int32().optional().into_ref()),
            ("fee", Schema::decimal(2).optional().into_ref()),
        ])
        .into_ref();
        assert_eq!(column_type(&addr).unwrap(), "jsonb");
        let v = Value::Struct(
            Struct::new(addr.clone()).with("city", "K\u{f6}ln \"Mitte\"").with("zip", 50667).with("fee", Value::Bytes(vec![0x04, 0xd2])),
        );
        assert_eq!(text(&v, &addr).unwrap(), r#"{"city":"Köln \"Mitte\"","zip":50667,"fee":12.34}"#);
        let map = Schema::map(Schema::string().into_ref(), Schema::int64().optional().into_ref());
        assert_eq!(column_type(&map).unwrap(), "jsonb");
        let m = Value::Map(vec![("b".into(), Value::Int64(2)), ("a".into(), Value::Null)]);
        assert_eq!(text(&m, &map).unwrap(), r#"{"b":2,"a":null}"#);
        let list = Schema::array(addr.clone());
        assert_eq!(column_type(&list).unwrap(), "jsonb[]");
    }
}
