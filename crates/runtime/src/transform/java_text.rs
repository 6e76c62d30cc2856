//! Text forms that must match Java's, because they end up in records: `Double.toString`,
//! `Float.toString`, `BigDecimal.toString`, `Boolean.parseBoolean`, and the literal parser
//! behind `InsertHeader` (a subset of Connect's `Values.parseString`).

use sluice_api::{Schema, SchemaRef, Value};

use super::temporal;

/// Java's `Double.toString` and `Float.toString`, shared with the converters.
pub(crate) use sluice_api::text::{double_to_string as java_double, float_to_string as java_float};

/// The unscaled value of a Connect Decimal (big-endian two's complement bytes).
pub(crate) fn decimal_unscaled(bytes: &[u8]) -> Option<i128> {
    if bytes.is_empty() {
        return Some(0);
    }
    if bytes.len() > 16 {
        return None;
    }
    let fill = if bytes[0] & 0x80 != 0 { 0xff } else { 0 };
    let mut buf = [fill; 16];
    buf[16 - bytes.len()..].copy_from_slice(bytes);
    Some(i128::from_be_bytes(buf))
}

/// The shortest big-endian two's complement bytes of `v` (Java's `BigInteger.toByteArray`).
pub(crate) fn decimal_bytes(v: i128) -> Vec<u8> {
    let all = v.to_be_bytes();
    let mut start = 0;
    while start < 15 {
        let (b, next) = (all[start], all[start + 1]);
        if (b == 0 && next & 0x80 == 0) || (b == 0xff && next & 0x80 != 0) {
            start += 1;
        } else {
            break;
        }
    }
    all[start..].to_vec()
}

/// Java's `BigDecimal.toString` for `unscaled × 10^-scale`.
pub(crate) fn big_decimal_string(unscaled: i128, scale: i32) -> String {
    let sign = if unscaled < 0 { "-" } else { "" };
    let digits = unscaled.unsigned_abs().to_string();
    let len = digits.len() as i64;
    let adjusted = -(scale as i64) + (len - 1);
    if scale >= 0 && adjusted >= -6 {
        let scale = scale as i64;
        if scale == 0 {
            format!("{sign}{digits}")
        } else if len > scale {
            let (int, frac) = digits.split_at((len - scale) as usize);
            format!("{sign}{int}.{frac}")
        } else {
            format!("{sign}0.{}{digits}", "0".repeat((scale - len) as usize))
        }
    } else {
        let rest = if digits.len() > 1 { format!(".{}", &digits[1..]) } else { String::new() };
        let exp_sign = if adjusted > 0 { "+" } else { "" };
        format!("{sign}{}{rest}E{exp_sign}{adjusted}", &digits[..1])
    }
}

/// Java's `Boolean.parseBoolean`: "true" in any case, everything else is false.
pub(crate) fn parse_java_boolean(s: &str) -> bool {
    s.eq_ignore_ascii_case("true")
}

/// A decimal number as Java's `BigDecimal(String)` reads it: `(unscaled, scale)`.
pub(crate) fn parse_big_decimal(s: &str) -> Option<(i128, i32)> {
    let (mantissa, exp) = match s.find(['e', 'E']) {
        Some(i) => (&s[..i], Some(&s[i + 1..])),
        None => (s, None),
    };
    let (negative, body) = match mantissa.as_bytes().first()? {
        b'-' => (true, &mantissa[1..]),
        b'+' => (false, &mantissa[1..]),
        _ => (false, mantissa),
    };
    let (int, frac) = body.split_once('.').unwrap_or((body, ""));
    if int.is_empty() && frac.is_empty() {
        return None;
    }
    if !int.bytes().chain(frac.bytes()).all(|b| b.is_ascii_digit()) {
        return None;
    }
    let mut unscaled: i128 = 0;
    for b in int.bytes().chain(frac.bytes()) {
        unscaled = unscaled.checked_mul(10)?.checked_add(i128::from(b - b'0'))?;
    }
    let mut scale = frac.len() as i64;
    if let Some(e) = exp {
        let e: i64 = e.parse().ok()?;
        scale -= e;
    }
    let scale = i32::try_from(scale).ok()?;
    Some((if negative { -unscaled } else { unscaled }, scale))
}

/// Connect's `Values.parseString` for a configured literal: `null`, booleans, integers (in
/// the smallest type that holds them), floating point numbers, ISO-8601 dates, times and
/// timestamps; anything else is the string itself. Arrays and maps (`[…]`, `{…}`) are not
/// parsed and stay strings.
pub(crate) fn parse_literal(raw: &str) -> (Option<SchemaRef>, Value) {
    if raw.is_empty() {
        return (Some(Schema::string().into_ref()), Value::String(String::new()));
    }
    let t = raw.trim();
    match t {
        "null" => return (None, Value::Null),
        "true" => return (Some(Schema::boolean().into_ref()), Value::Boolean(true)),
        "false" => return (Some(Schema::boolean().into_ref()), Value::Boolean(false)),
        _ => {}
    }
    let first = t.chars().next().unwrap_or(' ');
    if first.is_ascii_digit() {
        if let Some(parsed) = temporal::parse_iso_literal(t) {
            return parsed;
        }
    }
    if first.is_ascii_digit() || first == '+' || first == '-' {
        if let Some(parsed) = parse_number_literal(t) {
            return parsed;
        }
    }
    (Some(Schema::string().into_ref()), Value::String(raw.to_owned()))
}

fn parse_number_literal(t: &str) -> Option<(Option<SchemaRef>, Value)> {
    let (unscaled, scale) = parse_big_decimal(t)?;
    // An integral value goes to the smallest integer type that holds it.
    let integral = if scale <= 0 {
        10i128.checked_pow(scale.unsigned_abs()).and_then(|p| unscaled.checked_mul(p))
    } else {
        let p = 10i128.checked_pow(scale as u32);
        p.filter(|p| unscaled % p == 0).map(|p| unscaled / p)
    };
    if let Some(v) = integral.and_then(|v| i64::try_from(v).ok()) {
        return Some(if let Ok(b) = i8::try_from(v) {
            (Some(Schema::int8().into_ref()), Value::Int8(b))
        } else if let Ok(s) = i16::try_from(v) {
            (Some(Schema::int16().into_ref()), Value::Int16(s))
        } else if let Ok(i) = i32::try_from(v) {
            (Some(Schema::int32().into_ref()), Value::Int32(i))
        } else {
            (Some(Schema::int64().into_ref()), Value::Int64(v))
        });
    }
    if scale != 0 {
        let plain = big_decimal_string(unscaled, scale);
        if let Ok(f) = plain.parse::<f32>() {
            if f.is_finite() {
                return Some((Some(Schema::float32().into_ref()), Value::Float32(f)));
            }
        }
        if let Ok(d) = plain.parse::<f64>() {
            if d.is_finite() {
                return Some((Some(Schema::float64().into_ref()), Value::Float64(d)));
            }
        }
    }
    Some((Some(Schema::decimal(scale).into_ref()), Value::Bytes(decimal_bytes(unscaled))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transform_java_number_text() {
        assert_eq!(java_double(1.0), "1.0");
        assert_eq!(java_double(-2.5), "-2.5");
        assert_eq!(java_double(1e20), "1.0E20");
        assert_eq!(java_double(1.5e-5), "1.5E-5");
        assert_eq!(java_double(0.001), "0.001");
        assert_eq!(java_double(1234567.0), "1234567.0");
        assert_eq!(java_double(12345678.0), "1.2345678E7");
        assert_eq!(java_double(0.0), "0.0");
        assert_eq!(java_float(42.0), "42.0");
        assert_eq!(java_float(0.1), "0.1");
        assert_eq!(big_decimal_string(12345, 2), "123.45");
        assert_eq!(big_decimal_string(-5, 3), "-0.005");
        assert_eq!(big_decimal_string(1, 10), "1E-10");
        assert_eq!(big_decimal_string(12, -3), "1.2E+4");
        assert_eq!(decimal_bytes(-1), vec![0xff]);
        assert_eq!(decimal_bytes(128), vec![0x00, 0x80]);
        assert_eq!(decimal_unscaled(&[0xff, 0x7f]), Some(-129));
    }

    #[test]
    fn transform_literals_parse_like_values_parse_string() {
        assert_eq!(parse_literal("1").1, Value::Int8(1));
        assert_eq!(parse_literal("1000").1, Value::Int16(1000));
        assert_eq!(parse_literal("1.0").1, Value::Int8(1));
        assert_eq!(parse_literal("1e3").1, Value::Int16(1000));
        assert_eq!(parse_literal("1.5").1, Value::Float32(1.5));
        assert_eq!(parse_literal("true").1, Value::Boolean(true));
        assert_eq!(parse_literal("null"), (None, Value::Null));
        assert_eq!(parse_literal("hello world").1, Value::String("hello world".into()));
        let (schema, value) = parse_literal("2024-02-29");
        assert_eq!(schema.unwrap().name.as_deref(), Some(sluice_api::schema::logical::DATE));
        assert_eq!(value, Value::Int32(19782));
    }
}
