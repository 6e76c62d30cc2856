//! How a Java Connect worker prints values, so our bytes match its bytes.
//!
//! - [`double_to_string`] / [`float_to_string`]: `Double.toString` / `Float.toString` as in
//!   JDK 19 and later (shortest digits that round-trip; `1.0`, `0.001`, `1.0E-4`, `1.0E7`,
//!   `4.9E-324`). Jackson writes JSON numbers with these, and `Values` and `toString()` use
//!   them too. Older JDKs occasionally printed a longer digit string (JDK-4511638); we follow
//!   the current one.
//! - Calendar helpers (proleptic Gregorian, UTC) for the ISO-8601 forms `Values` uses and for
//!   `java.util.Date.toString()`. A Java worker formats in its JVM time zone and switches to
//!   the Julian calendar before 1582; we always use UTC and the Gregorian calendar.
//! - [`java_to_string`]: `Object.toString()` of a Connect value, which is what
//!   StringConverter writes for a non-string value.

use crate::schema::logical;
use crate::{Schema, SchemaType, Value};
use base64::Engine as _;

use crate::decimal::{self, Magnitude};

pub const MILLIS_PER_DAY: i64 = 86_400_000;

/// Java's `Double.toString(double)`.
pub fn double_to_string(v: f64) -> String {
    if let Some(s) = non_finite(v.is_nan(), v.is_infinite(), v.is_sign_negative()) {
        return s.to_owned();
    }
    if v == 0.0 {
        return if v.is_sign_negative() { "-0.0" } else { "0.0" }.to_owned();
    }
    let (mut digits, mut exp) = shortest(&format!("{:e}", v.abs()));
    if digits.len() == 1 && v.abs() < f64::MIN_POSITIVE {
        // Subnormal: the bits are the integer m in m × 2^-1074.
        (digits, exp) = closest_two_digits(v.abs().to_bits(), -1074, exp);
    }
    layout(v.is_sign_negative(), &digits, exp)
}

/// Java's `Float.toString(float)`.
pub fn float_to_string(v: f32) -> String {
    if let Some(s) = non_finite(v.is_nan(), v.is_infinite(), v.is_sign_negative()) {
        return s.to_owned();
    }
    if v == 0.0 {
        return if v.is_sign_negative() { "-0.0" } else { "0.0" }.to_owned();
    }
    let (mut digits, mut exp) = shortest(&format!("{:e}", v.abs()));
    if digits.len() == 1 && v.abs() < f32::MIN_POSITIVE {
        (digits, exp) = closest_two_digits(u64::from(v.abs().to_bits()), -149, exp);
    }
    layout(v.is_sign_negative(), &digits, exp)
}

fn non_finite(nan: bool, infinite: bool, negative: bool) -> Option<&'static str> {
    if nan {
        Some("NaN")
    } else if infinite {
        Some(if negative { "-Infinity" } else { "Infinity" })
    } else {
        None
    }
}

/// Splits Rust's shortest `{:e}` form (`1.2345e-5`, `1e20`) into digits and the exponent of
/// the first digit.
fn shortest(sci: &str) -> (String, i32) {
    let (mantissa, exp) = sci.split_once('e').unwrap_or((sci, "0"));
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    (digits, exp.parse().unwrap_or(0))
}

/// Java prints at least two significant digits and, when only one is needed, picks the
/// two-digit decimal closest to the exact value (`Double.MIN_VALUE` is `4.9E-324`, where the
/// shortest one-digit form is `5e-324`). That only differs for subnormals with a handful of
/// significant bits, which is the only place this is called. The value is `m × 2^bin_exp`.
fn closest_two_digits(m: u64, bin_exp: i32, exp: i32) -> (String, i32) {
    // q = round_half_even(x / 10^(e-1)) = round(m × 5^k × 2^(k + bin_exp)) with k = 1 - e.
    let q_at = |e: i32| -> u64 {
        let k = 1 - e;
        let mut n = Magnitude::from_u64(m);
        for _ in 0..k {
            n.mul_add_small(5, 0);
        }
        let shift = -(k + bin_exp);
        if shift <= 0 {
            return n.shl(shift.unsigned_abs() as usize).shr_to_u64(0);
        }
        let s = shift as usize;
        let mut q = n.shr_to_u64(s);
        let round = n.bit(s - 1);
        let sticky = n.any_bit_below(s - 1);
        if round && (sticky || q % 2 == 1) {
            q += 1;
        }
        q
    };
    let mut e = exp;
    let mut q = q_at(e);
    if q < 10 {
        // The one-digit form rounded up into the next decade; the value lives one lower.
        e -= 1;
        q = q_at(e);
    }
    if q >= 100 {
        return ("10".to_owned(), e + 1);
    }
    (q.to_string(), e)
}

/// Java's layout: plain for 10^-3 <= |v| < 10^7 (`123.0`, `0.001`), else computerized
/// scientific notation (`1.0E7`, `1.234E-5`). `digits` are significant digits, the first
/// at 10^exp.
fn layout(negative: bool, digits: &str, exp: i32) -> String {
    let mut out = String::with_capacity(digits.len() + 8);
    if negative {
        out.push('-');
    }
    if (-3..7).contains(&exp) {
        if exp >= 0 {
            let int_len = exp as usize + 1;
            if digits.len() <= int_len {
                out.push_str(digits);
                out.extend(std::iter::repeat_n('0', int_len - digits.len()));
                out.push_str(".0");
            } else {
                out.push_str(&digits[..int_len]);
                out.push('.');
                out.push_str(&digits[int_len..]);
            }
        } else {
            out.push_str("0.");
            out.extend(std::iter::repeat_n('0', (-exp - 1) as usize));
            out.push_str(digits);
        }
    } else {
        out.push_str(&digits[..1]);
        out.push('.');
        out.push_str(if digits.len() > 1 { &digits[1..] } else { "0" });
        out.push('E');
        out.push_str(&exp.to_string());
    }
    out
}

/// Days since 1970-01-01 to (year, month 1-12, day 1-31), proleptic Gregorian.
pub fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// (year, month 1-12, day 1-31) to days since 1970-01-01, proleptic Gregorian.
pub fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let m = i64::from(month);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

pub fn days_in_month(year: i64, month: u32) -> u32 {
    match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        _ if (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 => 29,
        _ => 28,
    }
}

/// `yyyy-MM-dd`, with the year padded to four digits as `SimpleDateFormat` does.
pub fn iso_date(millis: i64) -> String {
    let (y, m, d) = civil_from_days(millis.div_euclid(MILLIS_PER_DAY));
    if (0..10_000).contains(&y) {
        format!("{y:04}-{m:02}-{d:02}")
    } else {
        format!("{y}-{m:02}-{d:02}")
    }
}

/// `HH:mm:ss.SSS'Z'` of the time of day.
pub fn iso_time(millis: i64) -> String {
    let ms = millis.rem_euclid(MILLIS_PER_DAY);
    format!("{:02}:{:02}:{:02}.{:03}Z", ms / 3_600_000, ms / 60_000 % 60, ms / 1000 % 60, ms % 1000)
}

/// `java.util.Date.toString()` in UTC: `Thu Jan 01 00:00:00 UTC 1970`.
pub fn java_date_to_string(millis: i64) -> String {
    const DAYS: [&str; 7] = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"];
    const MONTHS: [&str; 12] = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
    let days = millis.div_euclid(MILLIS_PER_DAY);
    let (y, m, d) = civil_from_days(days);
    let ms = millis.rem_euclid(MILLIS_PER_DAY);
    format!(
        "{} {} {d:02} {:02}:{:02}:{:02} UTC {y}",
        DAYS[(days + 4).rem_euclid(7) as usize],
        MONTHS[m as usize - 1],
        ms / 3_600_000,
        ms / 60_000 % 60,
        ms / 1000 % 60
    )
}

/// Which logical type a schema carries, when its physical type is the one that logical type
/// uses. A schema named like a logical type over another physical type is treated as plain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Logical {
    Decimal,
    Date,
    Time,
    Timestamp,
}

impl Logical {
    pub fn of(schema: &Schema) -> Option<Logical> {
        match (schema.name.as_deref()?, schema.kind) {
            (logical::DECIMAL, SchemaType::Bytes) => Some(Logical::Decimal),
            (logical::DATE, SchemaType::Int32) => Some(Logical::Date),
            (logical::TIME, SchemaType::Int32) => Some(Logical::Time),
            (logical::TIMESTAMP, SchemaType::Int64) => Some(Logical::Timestamp),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Logical::Decimal => "Decimal",
            Logical::Date => "Date",
            Logical::Time => "Time",
            Logical::Timestamp => "Timestamp",
        }
    }

    /// Milliseconds since the epoch of a Date/Time/Timestamp value, as `java.util.Date` holds it.
    pub fn millis(self, value: &Value) -> Option<i64> {
        match (self, value) {
            (Logical::Date, Value::Int32(days)) => Some(i64::from(*days) * MILLIS_PER_DAY),
            (Logical::Time, Value::Int32(ms)) => Some(i64::from(*ms)),
            (Logical::Timestamp, Value::Int64(ms)) => Some(*ms),
            _ => None,
        }
    }
}

/// The scale of a Decimal schema, with Connect's messages when it is missing or bad.
pub fn decimal_scale(schema: &Schema) -> Result<i32, String> {
    let raw = schema.parameter(logical::DECIMAL_SCALE).ok_or("Invalid Decimal schema: scale parameter not found.")?;
    raw.trim().parse().map_err(|_| format!("Invalid scale parameter found in Decimal schema: {raw:?} is not an int"))
}

/// `BigDecimal.toString()` of a Decimal value.
pub fn decimal_to_string(schema: &Schema, bytes: &[u8]) -> Result<String, String> {
    let scale = decimal_scale(schema)?;
    let unscaled = decimal::Unscaled::from_twos_complement(bytes).ok_or("Decimal value has no bytes (an empty unscaled value)")?;
    Ok(decimal::to_java_string(&unscaled, scale))
}

/// `String.valueOf(value)` of a Connect value in a Java worker: what StringConverter writes.
///
/// Numbers, booleans and strings print as Java prints them; Decimals as `BigDecimal`; Date,
/// Time and Timestamp as `java.util.Date.toString()` in UTC; lists as `[a, b]`, maps as
/// `{k=v, k2=v2}`, structs as `Struct{a=1,b=x}` (null fields left out). Bytes print as
/// base64, where Java would print an identity hash such as `[B@1b6d3586`.
pub fn java_to_string(schema: Option<&Schema>, value: &Value) -> String {
    let mut out = String::new();
    append_java(&mut out, schema, value);
    out
}

fn append_java(out: &mut String, schema: Option<&Schema>, value: &Value) {
    if let Some(l) = schema.and_then(Logical::of) {
        if let Some(ms) = l.millis(value) {
            out.push_str(&java_date_to_string(ms));
            return;
        }
        if let (Logical::Decimal, Value::Bytes(b), Some(s)) = (l, value, schema) {
            if let Ok(text) = decimal_to_string(s, b) {
                out.push_str(&text);
                return;
            }
        }
    }
    match value {
        Value::Null => out.push_str("null"),
        Value::Boolean(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Int8(v) => out.push_str(&v.to_string()),
        Value::Int16(v) => out.push_str(&v.to_string()),
        Value::Int32(v) => out.push_str(&v.to_string()),
        Value::Int64(v) => out.push_str(&v.to_string()),
        Value::Float32(v) => out.push_str(&float_to_string(*v)),
        Value::Float64(v) => out.push_str(&double_to_string(*v)),
        Value::String(s) => out.push_str(s),
        Value::Bytes(b) => out.push_str(&base64::engine::general_purpose::STANDARD.encode(b)),
        Value::Array(items) => {
            let element = schema.and_then(|s| s.value_schema.as_deref());
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                append_java(out, element, item);
            }
            out.push(']');
        }
        Value::Map(entries) => {
            let key_schema = schema.and_then(|s| s.key_schema.as_deref());
            let value_schema = schema.and_then(|s| s.value_schema.as_deref());
            out.push('{');
            for (i, (k, v)) in entries.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                append_java(out, key_schema, k);
                out.push('=');
                append_java(out, value_schema, v);
            }
            out.push('}');
        }
        Value::Struct(s) => {
            out.push_str("Struct{");
            let mut first = true;
            for (field, v) in s.schema().fields.iter().zip(s.values()) {
                if v.is_null() {
                    continue;
                }
                if !first {
                    out.push(',');
                }
                first = false;
                out.push_str(&field.name);
                out.push('=');
                append_java(out, Some(&field.schema), v);
            }
            out.push('}');
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Struct;

    #[test]
    fn doubles_print_like_java() {
        // Expected strings are what `Double.toString` prints on JDK 19+.
        let cases: &[(f64, &str)] = &[
            (1.0, "1.0"),
            (0.1, "0.1"),
            (12.34, "12.34"),
            (-2.5, "-2.5"),
            (100.0, "100.0"),
            (1234567.0, "1234567.0"),
            (1.0e7, "1.0E7"),
            (12345678.9, "1.23456789E7"),
            (0.001, "0.001"),
            (0.0001, "1.0E-4"),
            (1.0e20, "1.0E20"),
            (1.0e-20, "1.0E-20"),
            (1.0e23, "1.0E23"),
            (f64::MAX, "1.7976931348623157E308"),
            (f64::MIN_POSITIVE, "2.2250738585072014E-308"),
            (f64::from_bits(1), "4.9E-324"),
            (f64::from_bits(2), "1.0E-323"),
            (f64::from_bits(3), "1.5E-323"),
            (0.0, "0.0"),
            (-0.0, "-0.0"),
            (f64::NAN, "NaN"),
            (f64::INFINITY, "Infinity"),
            (f64::NEG_INFINITY, "-Infinity"),
            (4398046511104.0, "4.398046511104E12"),
        ];
        for (v, expected) in cases {
            assert_eq!(double_to_string(*v), *expected, "{v:e}");
        }
    }

    #[test]
    fn floats_print_like_java() {
        let cases: &[(f32, &str)] = &[
            (12.34, "12.34"),
            (1.0, "1.0"),
            (0.1, "0.1"),
            (3.4028235e38, "3.4028235E38"),
            (1.0e10, "1.0E10"),
            (f32::from_bits(1), "1.4E-45"),
        ];
        for (v, expected) in cases {
            assert_eq!(float_to_string(*v), *expected, "{v:e}");
        }
    }

    #[test]
    fn calendar_round_trips() {
        for days in [-719_468i64, -1, 0, 1, 10_000, 18_131, 2_932_896] {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), days);
        }
        assert_eq!(civil_from_days(18_131), (2019, 8, 23));
        assert_eq!(iso_date(18_131 * MILLIS_PER_DAY), "2019-08-23");
        assert_eq!(iso_time(52_494_346), "14:34:54.346Z");
        assert_eq!(java_date_to_string(0), "Thu Jan 01 00:00:00 UTC 1970");
        assert_eq!(java_date_to_string(1_566_570_894_346), "Fri Aug 23 14:34:54 UTC 2019");
    }

    #[test]
    fn java_to_string_of_containers() {
        let schema = Schema::struct_of([("a", Schema::int32().into_ref()), ("b", Schema::string().optional().into_ref())]).into_ref();
        let s = Struct::new(schema.clone()).with("a", 1);
        assert_eq!(java_to_string(Some(&schema), &Value::Struct(s)), "Struct{a=1}");
        let list = Value::Array(vec![Value::Int32(1), Value::from("x"), Value::Null]);
        assert_eq!(java_to_string(None, &list), "[1, x, null]");
        let map = Value::Map(vec![(Value::from("k"), Value::Float64(1.0)), (Value::from("j"), Value::Boolean(false))]);
        assert_eq!(java_to_string(None, &map), "{k=1.0, j=false}");
        assert_eq!(java_to_string(Some(&Schema::decimal(2)), &Value::Bytes(vec![0, 0x9C])), "1.56");
        assert_eq!(java_to_string(Some(&Schema::date()), &Value::Int32(0)), "Thu Jan 01 00:00:00 UTC 1970");
    }
}
