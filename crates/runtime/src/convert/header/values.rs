//! The text form of header values, as Connect's `Values.convertToString` writes it and
//! `Values.parseString` reads it back, inferring a schema.
//!
//! Writing: strings as they are, numbers and booleans as Java prints them, bytes as base64,
//! Decimal as `BigDecimal.toString()`, Date/Time/Timestamp as ISO-8601 (`2019-08-23`,
//! `14:34:54.346Z`, `2019-08-23T14:34:54.346Z`, chosen by the value as Kafka does), lists as
//! `[1,2]`, maps as `{"a":1}`, structs as `{"field":value}`; strings inside those are quoted
//! with `\` and `"` escaped.
//!
//! Reading is a port of Kafka's token parser: `null`, `true`/`false`, integers as the
//! smallest of int8/16/32/64, other numbers as float32 if finite else float64 (so `0.1` reads
//! as a float32, as in Kafka), integers beyond int64 as Decimal, ISO-8601 dates and times as
//! Date/Time/Timestamp, `[…]` and `{…}` with a common element/key/value schema when the
//! elements agree (numbers widen). Anything else is the original string.
//!
//! Where we differ from Kafka, to avoid losing data:
//! - A top-level value followed by more text is the whole string (`12, 13` is the string
//!   `"12, 13"`; Kafka reads int8 `12`).
//! - Quoted strings inside `[…]`/`{…}` keep their spaces and have `\\` and `\"` unescaped
//!   (Kafka drops whitespace between delimiters and keeps the backslashes).
//! - Elements of different logical or nested types get no common schema (Kafka picks the
//!   last one, which can leave values that do not match it).
//! - Dates and times are parsed strictly (no rolling over of `2019-02-30`) and in UTC; a
//!   Java worker parses leniently in its JVM time zone. Negative timestamps are written as
//!   full dates or timestamps (Kafka writes them as times of day).

use base64::Engine as _;
use sluice_api::{Schema, SchemaRef, SchemaType, Value};

use sluice_api::decimal::DecimalText;
use sluice_api::text::{self as java_text, days_from_civil, days_in_month, decimal_to_string, iso_date, iso_time, Logical, MILLIS_PER_DAY};

/// `Values.convertToString` (for a non-null value).
pub(crate) fn convert_to_string(schema: Option<&Schema>, value: &Value) -> Result<String, String> {
    let mut out = String::new();
    append(&mut out, schema, value, false)?;
    Ok(out)
}

fn append(out: &mut String, schema: Option<&Schema>, value: &Value, embedded: bool) -> Result<(), String> {
    if let Some((schema, logical)) = schema.and_then(|s| Logical::of(s).map(|l| (s, l))) {
        if let Some(ms) = logical.millis(value) {
            out.push_str(&date_format_for(ms));
            return Ok(());
        }
        if let Value::Bytes(b) = value {
            out.push_str(&decimal_to_string(schema, b)?);
            return Ok(());
        }
    }
    match value {
        Value::Null => out.push_str("null"),
        Value::Boolean(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Int8(v) => out.push_str(&v.to_string()),
        Value::Int16(v) => out.push_str(&v.to_string()),
        Value::Int32(v) => out.push_str(&v.to_string()),
        Value::Int64(v) => out.push_str(&v.to_string()),
        Value::Float32(v) => out.push_str(&java_text::float_to_string(*v)),
        Value::Float64(v) => out.push_str(&java_text::double_to_string(*v)),
        Value::String(s) if embedded => {
            out.push('"');
            out.push_str(&s.replace('\\', "\\\\").replace('"', "\\\""));
            out.push('"');
        }
        Value::String(s) => out.push_str(s),
        Value::Bytes(b) => {
            let encoded = base64::engine::general_purpose::STANDARD.encode(b);
            if embedded {
                out.push('"');
                out.push_str(&encoded);
                out.push('"');
            } else {
                out.push_str(&encoded);
            }
        }
        Value::Array(items) => {
            let element = schema.and_then(|s| s.value_schema.as_deref());
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                append(out, element, item, true)?;
            }
            out.push(']');
        }
        Value::Map(entries) => {
            let key_schema = schema.and_then(|s| s.key_schema.as_deref());
            let value_schema = schema.and_then(|s| s.value_schema.as_deref());
            out.push('{');
            for (i, (k, v)) in entries.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                append(out, key_schema, k, true)?;
                out.push(':');
                append(out, value_schema, v, true)?;
            }
            out.push('}');
        }
        Value::Struct(st) => {
            out.push('{');
            for (i, (field, v)) in st.schema().fields.iter().zip(st.values()).enumerate() {
                if i > 0 {
                    out.push(',');
                }
                append(out, None, &Value::String(field.name.clone()), true)?;
                out.push(':');
                // `Struct.get(field)` gives the field's default for a null.
                let v = if v.is_null() { field.schema.default.as_ref().unwrap_or(v) } else { v };
                append(out, Some(&field.schema), v, true)?;
            }
            out.push('}');
        }
    }
    Ok(())
}

/// Kafka picks the format by the instant: a time of day for the first day after the epoch, a
/// date at midnight, a timestamp otherwise.
fn date_format_for(millis: i64) -> String {
    if (0..MILLIS_PER_DAY).contains(&millis) {
        iso_time(millis)
    } else if millis % MILLIS_PER_DAY == 0 {
        iso_date(millis)
    } else {
        format!("{}T{}", iso_date(millis), iso_time(millis))
    }
}

/// `Values.parseString`: the schema and value a header's text stands for.
pub(crate) fn parse_string(text: &str) -> (Option<SchemaRef>, Value) {
    if text.is_empty() {
        return (Some(Schema::string().into_ref()), Value::String(String::new()));
    }
    let mut parser = ValueParser { t: Tokens::new(text) };
    let parsed = parser.parse(false);
    if !parser.t.rest_is_blank() {
        return (Some(Schema::string().into_ref()), Value::String(text.to_owned()));
    }
    match parsed {
        Ok(Some((schema, value))) => (Some(schema), value),
        Ok(None) => (None, Value::Null),
        Err(_) => (Some(Schema::string().into_ref()), Value::String(text.to_owned())),
    }
}

/// Java's `String.trim()`: strips characters up to U+0020 from both ends.
fn java_trim(s: &str) -> &str {
    s.trim_matches(|c: char| c <= ' ')
}

fn is_blank(s: &str) -> bool {
    java_trim(s).is_empty()
}

/// Kafka's `Values.Parser`: splits on unescaped `: , { } [ ] "`, each delimiter its own token.
struct Tokens<'a> {
    s: &'a str,
    pos: usize,
    /// A token read ahead (it always ends at `pos`).
    ahead: Option<(usize, usize)>,
}

impl<'a> Tokens<'a> {
    fn new(s: &'a str) -> Self {
        Self { s, pos: 0, ahead: None }
    }

    fn mark(&self) -> usize {
        self.ahead.map_or(self.pos, |(start, _)| start)
    }

    fn rewind(&mut self, position: usize) {
        self.pos = position;
        self.ahead = None;
    }

    fn has_next(&self) -> bool {
        self.ahead.is_some() || self.pos < self.s.len()
    }

    fn rest_is_blank(&self) -> bool {
        is_blank(&self.s[self.mark()..])
    }

    fn consume(&mut self) -> (usize, usize) {
        let start = self.pos;
        let bytes = self.s.as_bytes();
        let mut escaped = false;
        for (i, &b) in bytes.iter().enumerate().skip(start) {
            match b {
                b'\\' => escaped = !escaped,
                b':' | b',' | b'{' | b'}' | b'[' | b']' | b'"' if !escaped => {
                    let end = if start < i { i } else { i + 1 };
                    self.pos = end;
                    return (start, end);
                }
                _ => escaped = false,
            }
        }
        self.pos = bytes.len();
        (start, bytes.len())
    }

    fn next(&mut self) -> &'a str {
        let (start, end) = self.ahead.take().unwrap_or_else(|| self.consume());
        &self.s[start..end]
    }

    /// The next `n` tokens as one slice, or `None` (and no change) when there are fewer.
    fn next_n(&mut self, n: usize) -> Option<&'a str> {
        let start = self.mark();
        for _ in 0..n {
            if !self.has_next() {
                self.rewind(start);
                return None;
            }
            self.next();
        }
        Some(&self.s[start..self.pos])
    }

    /// Consumes the next token if, trimmed, it is `expected`; blank tokens before it are
    /// skipped (and lost, as in Kafka).
    fn can_consume(&mut self, expected: &str) -> bool {
        self.can_consume_as(expected, true)
    }

    fn can_consume_as(&mut self, expected: &str, trim: bool) -> bool {
        if self.ahead.is_none() {
            if !self.has_next() {
                return false;
            }
            self.ahead = Some(self.consume());
        }
        let token = |t: &Self| t.ahead.map_or("", |(s, e)| &t.s[s..e]);
        if trim {
            while is_blank(token(self)) && self.pos < self.s.len() {
                self.ahead = Some(self.consume());
            }
        }
        let matches = if trim { java_trim(token(self)) == expected } else { token(self) == expected };
        if matches {
            self.ahead = None;
        }
        matches
    }
}

type Parsed = Option<(SchemaRef, Value)>;

/// A value that is not what it looked like (Kafka's `DataException` inside the parser); the
/// caller falls back to a string.
#[derive(Debug)]
struct NotParsed(#[allow(dead_code)] String);

struct ValueParser<'a> {
    t: Tokens<'a>,
}

impl ValueParser<'_> {
    fn parse(&mut self, embedded: bool) -> Result<Parsed, NotParsed> {
        if !self.t.has_next() {
            return Ok(None);
        }
        if embedded && self.t.can_consume("\"") {
            return Ok(Some(self.parse_quoted_string()));
        }
        if self.literal(embedded, "null") {
            return Ok(None);
        }
        for (word, b) in [("true", true), ("false", false)] {
            if self.literal(embedded, word) {
                return Ok(Some((Schema::boolean().into_ref(), Value::Boolean(b))));
            }
        }
        let start = self.t.mark();
        let attempt = if self.t.can_consume("[") {
            Some(self.parse_array())
        } else if self.t.can_consume("{") {
            Some(self.parse_map())
        } else {
            None
        };
        match attempt {
            Some(Ok(parsed)) => return Ok(Some(parsed)),
            Some(Err(_)) => self.t.rewind(start),
            None => {}
        }
        let token = self.t.next();
        if is_blank(token) {
            return Ok(Some((Schema::string().into_ref(), Value::String(token.to_owned()))));
        }
        self.parse_next_token(embedded, java_trim(token))
    }

    /// A literal is taken when embedded, or when it is the whole top-level input (so `true}`
    /// stays a string).
    fn literal(&mut self, embedded: bool, word: &str) -> bool {
        let start = self.t.mark();
        if self.t.can_consume(word) && (embedded || !self.t.has_next()) {
            return true;
        }
        self.t.rewind(start);
        false
    }

    fn parse_next_token(&mut self, embedded: bool, token: &str) -> Result<Parsed, NotParsed> {
        let first = token.chars().next().unwrap_or(' ');
        if first.is_ascii_digit() {
            if let Some(temporal) = self.parse_multiple_tokens_as_temporal(token) {
                return Ok(Some(temporal));
            }
        }
        if first.is_ascii_digit() || first == '+' || first == '-' {
            if let Some(number) = parse_as_number(token) {
                return Ok(Some(number));
            }
        }
        if embedded {
            return Err(NotParsed("Failed to parse embedded value".to_owned()));
        }
        Ok(Some((Schema::string().into_ref(), Value::String(self.t.s.to_owned()))))
    }

    /// Times and timestamps contain `:`, a delimiter, so they arrive as five tokens.
    fn parse_multiple_tokens_as_temporal(&mut self, token: &str) -> Option<(SchemaRef, Value)> {
        let position = self.t.mark();
        if let Some(rest) = self.t.next_n(4) {
            if let Some(temporal) = parse_as_temporal(&format!("{token}{rest}")) {
                return Some(temporal);
            }
        }
        self.t.rewind(position);
        parse_as_temporal(token)
    }

    fn parse_quoted_string(&mut self) -> (SchemaRef, Value) {
        let mut content = String::new();
        while self.t.has_next() {
            if self.t.can_consume_as("\"", false) {
                break;
            }
            content.push_str(self.t.next());
        }
        if let Some(temporal) = parse_as_temporal(&content) {
            return temporal;
        }
        (Schema::string().into_ref(), Value::String(unescape(&content)))
    }

    fn parse_array(&mut self) -> Result<(SchemaRef, Value), NotParsed> {
        let mut items: Vec<(Option<SchemaRef>, Value)> = Vec::new();
        let mut common = Merger::default();
        while self.t.has_next() {
            if self.t.can_consume("]") {
                return Ok(match common.schema() {
                    Some(element) => {
                        let values = items.into_iter().map(|(s, v)| align(&element, s.as_ref(), v)).collect::<Result<_, _>>()?;
                        (Schema::array(element).into_ref(), Value::Array(values))
                    }
                    None => (Schema::of(SchemaType::Array).into_ref(), Value::Array(items.into_iter().map(|(_, v)| v).collect())),
                });
            }
            if self.t.can_consume(",") {
                return Err(NotParsed("Unable to parse an empty array element".to_owned()));
            }
            let element = self.parse(true)?;
            common.merge(element.as_ref().map(|(s, _)| s));
            items.push(element.map_or((None, Value::Null), |(s, v)| (Some(s), v)));
            let current = self.t.mark();
            if self.t.can_consume("]") {
                self.t.rewind(current);
            } else if !self.t.can_consume(",") {
                return Err(NotParsed("Array elements missing ',' delimiter".to_owned()));
            }
        }
        Err(NotParsed("Array is missing terminating ']'".to_owned()))
    }

    fn parse_map(&mut self) -> Result<(SchemaRef, Value), NotParsed> {
        type Item = (Option<SchemaRef>, Value);
        let mut entries: Vec<(Item, Item)> = Vec::new();
        let (mut key_common, mut value_common) = (Merger::default(), Merger::default());
        while self.t.has_next() {
            if self.t.can_consume("}") {
                return match (key_common.schema(), value_common.schema()) {
                    (Some(ks), Some(vs)) => {
                        let mut out = Vec::with_capacity(entries.len());
                        for ((kschema, k), (vschema, v)) in entries {
                            put(&mut out, align(&ks, kschema.as_ref(), k)?, align(&vs, vschema.as_ref(), v)?);
                        }
                        Ok((Schema::map(ks, vs).into_ref(), Value::Map(out)))
                    }
                    (Some(ks), None) => {
                        let mut out = Vec::with_capacity(entries.len());
                        for ((kschema, k), (_, v)) in entries {
                            put(&mut out, align(&ks, kschema.as_ref(), k)?, v);
                        }
                        Ok((Schema { key_schema: Some(ks), ..Schema::of(SchemaType::Map) }.into_ref(), Value::Map(out)))
                    }
                    _ => Ok((
                        Schema::of(SchemaType::Map).into_ref(),
                        Value::Map(entries.into_iter().map(|((_, k), (_, v))| (k, v)).collect()),
                    )),
                };
            }
            if self.t.can_consume(",") {
                return Err(NotParsed("Unable to parse a map entry with no key or value".to_owned()));
            }
            let Some((key_schema, key)) = self.parse(true)?.filter(|(_, v)| !v.is_null()) else {
                return Err(NotParsed("Map entry may not have a null key".to_owned()));
            };
            if !self.t.can_consume(":") {
                return Err(NotParsed("Map entry is missing ':'".to_owned()));
            }
            let value = self.parse(true)?;
            self.t.can_consume(",");
            key_common.merge(Some(&key_schema));
            value_common.merge(value.as_ref().map(|(s, _)| s));
            let value = value.map_or((None, Value::Null), |(s, v)| (Some(s), v));
            match entries.iter_mut().find(|((_, k), _)| *k == key) {
                Some(entry) => entry.1 = value,
                None => entries.push(((Some(key_schema), key), value)),
            }
        }
        Err(NotParsed("Map is missing terminating '}'".to_owned()))
    }
}

/// A map entry as a Java `LinkedHashMap` takes it: an equal key keeps its place and takes the
/// new value.
fn put(entries: &mut Vec<(Value, Value)>, key: Value, value: Value) {
    match entries.iter_mut().find(|(k, _)| *k == key) {
        Some(entry) => entry.1 = value,
        None => entries.push((key, value)),
    }
}

fn unescape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\\' {
            if let Some(&next @ ('\\' | '"')) = chars.peek() {
                out.push(next);
                chars.next();
                continue;
            }
        }
        out.push(c);
    }
    out
}

/// Kafka's `SchemaMerger`: the schema every element shares, if any.
#[derive(Default)]
struct Merger {
    common: Option<SchemaRef>,
    incompatible: bool,
}

impl Merger {
    fn merge(&mut self, latest: Option<&SchemaRef>) {
        let Some(latest) = latest else { return };
        if self.incompatible {
            return;
        }
        self.common = match &self.common {
            None => Some(latest.clone()),
            Some(previous) => merge_schemas(previous, latest),
        };
        self.incompatible = self.common.is_none();
    }

    fn schema(&self) -> Option<SchemaRef> {
        self.common.clone()
    }
}

fn merge_schemas(previous: &SchemaRef, latest: &SchemaRef) -> Option<SchemaRef> {
    let plain = |s: &Schema| s.name.is_none() && s.kind.is_primitive();
    if !plain(previous) || !plain(latest) {
        return (previous == latest).then(|| previous.clone());
    }
    if previous.kind == latest.kind {
        return Some(latest.clone());
    }
    // Numbers widen: int8 < int16 < int32 < int64 < float32 < float64.
    let rank = |k: SchemaType| match k {
        SchemaType::Int8 => Some(0),
        SchemaType::Int16 => Some(1),
        SchemaType::Int32 => Some(2),
        SchemaType::Int64 => Some(3),
        SchemaType::Float32 => Some(4),
        SchemaType::Float64 => Some(5),
        _ => None,
    };
    match (rank(previous.kind), rank(latest.kind)) {
        (Some(a), Some(b)) => Some(if a >= b { previous.clone() } else { latest.clone() }),
        _ => None,
    }
}

/// Converts an element to the common schema (only numeric widening is ever needed).
fn align(target: &SchemaRef, from: Option<&SchemaRef>, value: Value) -> Result<Value, NotParsed> {
    if value.is_null() {
        return if target.optional {
            Ok(Value::Null)
        } else {
            Err(NotParsed("Unable to convert a null value to a schema that requires a value".to_owned()))
        };
    }
    if from == Some(target) {
        return Ok(value);
    }
    let as_i64 = value.as_i64();
    Ok(match (target.kind, &value) {
        (SchemaType::Int16, Value::Int8(v)) => Value::Int16(i16::from(*v)),
        (SchemaType::Int32, Value::Int8(_) | Value::Int16(_)) => {
            Value::Int32(as_i64.and_then(|v| i32::try_from(v).ok()).unwrap_or_default())
        }
        (SchemaType::Int64, Value::Int8(_) | Value::Int16(_) | Value::Int32(_)) => Value::Int64(as_i64.unwrap_or_default()),
        // Java goes through double: (float) number.doubleValue().
        (SchemaType::Float32, _) if as_i64.is_some() => Value::Float32(as_i64.unwrap_or_default() as f64 as f32),
        (SchemaType::Float64, _) if as_i64.is_some() => Value::Float64(as_i64.unwrap_or_default() as f64),
        (SchemaType::Float64, Value::Float32(v)) => Value::Float64(f64::from(*v)),
        _ if Some(target.kind) == kind_of(&value) => value,
        _ => return Err(NotParsed(format!("Unable to convert {value:?} to {:?}", target.kind))),
    })
}

fn kind_of(value: &Value) -> Option<SchemaType> {
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
        Value::Struct(_) => SchemaType::Struct,
        Value::Null => return None,
    })
}

/// `new BigDecimal(token)` and then the smallest integer type, else float32, else float64,
/// else Decimal.
fn parse_as_number(token: &str) -> Option<(SchemaRef, Value)> {
    let decimal = DecimalText::parse(token)?;
    if let Some(v) = decimal.to_i64() {
        return Some(if let Ok(v) = i8::try_from(v) {
            (Schema::int8().into_ref(), Value::Int8(v))
        } else if let Ok(v) = i16::try_from(v) {
            (Schema::int16().into_ref(), Value::Int16(v))
        } else if let Ok(v) = i32::try_from(v) {
            (Schema::int32().into_ref(), Value::Int32(v))
        } else {
            (Schema::int64().into_ref(), Value::Int64(v))
        });
    }
    let scale = i32::try_from(decimal.scale()).ok()?;
    if scale != 0 {
        if let Some(f) = token.parse::<f32>().ok().filter(|f| f.is_finite()) {
            return Some((Schema::float32().into_ref(), Value::Float32(f)));
        }
        if let Some(d) = token.parse::<f64>().ok().filter(|d| d.is_finite()) {
            return Some((Schema::float64().into_ref(), Value::Float64(d)));
        }
    }
    let unscaled = decimal.rescale(i64::from(scale)).ok()?;
    Some((Schema::decimal(scale).into_ref(), Value::Bytes(unscaled.to_twos_complement())))
}

/// `yyyy-MM-dd`, `HH:mm:ss.SSS'Z'` or `yyyy-MM-dd'T'HH:mm:ss.SSS'Z'` (escaped colons allowed).
fn parse_as_temporal(token: &str) -> Option<(SchemaRef, Value)> {
    let token = token.replace("\\:", ":");
    let b = token.as_bytes();
    match b.len() {
        13 => Some((Schema::time().into_ref(), Value::Int32(parse_time(b)? as i32))),
        24 if b[10] == b'T' => {
            let days = parse_date(&b[..10])?;
            Some((Schema::timestamp().into_ref(), Value::Int64(days * MILLIS_PER_DAY + parse_time(&b[11..])?)))
        }
        10 => Some((Schema::date().into_ref(), Value::Int32(i32::try_from(parse_date(b)?).ok()?))),
        _ => None,
    }
}

fn digits(b: &[u8]) -> Option<i64> {
    b.iter().try_fold(0i64, |acc, &c| c.is_ascii_digit().then(|| acc * 10 + i64::from(c - b'0')))
}

fn parse_date(b: &[u8]) -> Option<i64> {
    if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
        return None;
    }
    let (year, month, day) = (digits(&b[..4])?, digits(&b[5..7])?, digits(&b[8..])?);
    let month = u32::try_from(month).ok().filter(|m| (1..=12).contains(m))?;
    let day = u32::try_from(day).ok().filter(|d| *d >= 1 && *d <= days_in_month(year, month))?;
    Some(days_from_civil(year, month, day))
}

fn parse_time(b: &[u8]) -> Option<i64> {
    if b.len() != 13 || b[2] != b':' || b[5] != b':' || b[8] != b'.' || b[12] != b'Z' {
        return None;
    }
    let (h, m, s, ms) = (digits(&b[..2])?, digits(&b[3..5])?, digits(&b[6..8])?, digits(&b[9..12])?);
    (h < 24 && m < 60 && s < 60).then_some(((h * 60 + m) * 60 + s) * 1000 + ms)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(text: &str) -> (Option<SchemaRef>, Value) {
        parse_string(text)
    }

    fn string(text: &str) -> (Option<SchemaRef>, Value) {
        (Some(Schema::string().into_ref()), Value::from(text))
    }

    /// Vectors from Kafka's `ValuesTest` (test names in the comments).
    #[test]
    fn kafka_values_test_vectors() {
        // shouldParseEmptyString, shouldParseNull, shouldParseNullAsNullIfSurroundedByWhitespace
        assert_eq!(parsed(""), string(""));
        assert_eq!(parsed("null"), (None, Value::Null));
        assert_eq!(parsed(" \t null \n"), (None, Value::Null));
        // shouldParse{True,False}AsBooleanIfSurroundedByWhitespace
        assert_eq!(parsed("  true "), (Some(Schema::boolean().into_ref()), Value::Boolean(true)));
        assert_eq!(parsed("false"), (Some(Schema::boolean().into_ref()), Value::Boolean(false)));
        // Strings that only start like something else.
        for s in [
            "{foo: 3}",
            "{3: foo}",
            "[foo]",
            "null=",
            "true}",
            "false]",
            "{6:9 4:20}",
            "[0 1 2]",
            "{null: 3}",
            "[1, null]",
            "[null, 1]",
            "[1, 2, 3,,,]",
        ] {
            assert_eq!(parsed(s), string(s), "{s}");
        }
        // shouldParseBooleanLiteralsEmbeddedInArray / InMap
        let (schema, value) = parsed("[true, false]");
        assert_eq!(schema.unwrap().value_schema.as_ref().unwrap().kind, SchemaType::Boolean);
        assert_eq!(value, Value::Array(vec![Value::Boolean(true), Value::Boolean(false)]));
        let (schema, _) = parsed("{true: false, false: true}");
        assert_eq!(schema.unwrap().key_schema.as_ref().unwrap().kind, SchemaType::Boolean);
        // shouldParseEmptyMap / EmptyArray / NestedArray / ArrayContainingMap / NestedMap / MapContainingArray
        assert_eq!(parsed("{}").1, Value::Map(vec![]));
        assert_eq!(parsed("[]").1, Value::Array(vec![]));
        assert_eq!(parsed("[[]]").0.unwrap().value_schema.as_ref().unwrap().kind, SchemaType::Array);
        assert_eq!(parsed("[{}]").0.unwrap().value_schema.as_ref().unwrap().kind, SchemaType::Map);
        assert_eq!(parsed("{\"a\":{}}").0.unwrap().value_schema.as_ref().unwrap().kind, SchemaType::Map);
        assert_eq!(parsed("{\"a\":[]}").0.unwrap().value_schema.as_ref().unwrap().kind, SchemaType::Array);
        // shouldParseNullMapValues / NullArrayElements
        let (schema, value) = parsed("{3: null}");
        assert_eq!(schema.as_ref().unwrap().key_schema.as_ref().unwrap().kind, SchemaType::Int8);
        assert!(schema.unwrap().value_schema.is_none());
        assert_eq!(value, Value::Map(vec![(Value::Int8(3), Value::Null)]));
        assert_eq!(parsed("[null]").1, Value::Array(vec![Value::Null]));
        // shouldParseStringOfMapWithShortValuesWithWhitespaceAsMap
        let (schema, value) = parsed(" { \"foo\" :  12345 , \"bar\" : 0,  \"baz\" : -4321 }  ");
        assert_eq!(schema.as_deref(), Some(&Schema::map(Schema::string().into_ref(), Schema::int16().into_ref())));
        assert_eq!(
            value,
            Value::Map(vec![
                (Value::from("foo"), Value::Int16(12345)),
                (Value::from("bar"), Value::Int16(0)),
                (Value::from("baz"), Value::Int16(-4321))
            ])
        );
        // shouldConvertStringOfListWithOnlyNumericElementTypesIntoListOfLargestNumericType
        assert_eq!(parsed("[1, 2, 32768]").1, Value::Array(vec![Value::Int32(1), Value::Int32(2), Value::Int32(32768)]));
        // shouldConvertIntegralTypesToDouble (Double.MAX_VALUE prints as 1.7976931348623157E308)
        let (schema, value) = parsed("[1, 2, 1.7976931348623157E308]");
        assert_eq!(schema.unwrap().value_schema.as_ref().unwrap().kind, SchemaType::Float64);
        assert_eq!(value, Value::Array(vec![Value::Float64(1.0), Value::Float64(2.0), Value::Float64(f64::MAX)]));
        // shouldParseStringListWithMultipleElementTypes: no common schema, values as parsed.
        let (schema, value) = parsed("[1, 2, 300, \"four\"]");
        assert!(schema.unwrap().value_schema.is_none());
        assert_eq!(value, Value::Array(vec![Value::Int8(1), Value::Int8(2), Value::Int16(300), Value::from("four")]));
        // shouldParseStringMapWithMultipleValueTypes
        let (schema, value) = parsed("{1:1, 2:1, 300:300, 4:\"four\"}");
        let schema = schema.unwrap();
        assert_eq!(schema.key_schema.as_ref().unwrap().kind, SchemaType::Int16);
        assert!(schema.value_schema.is_none());
        assert_eq!(
            value,
            Value::Map(vec![
                (Value::Int16(1), Value::Int8(1)),
                (Value::Int16(2), Value::Int8(1)),
                (Value::Int16(300), Value::Int16(300)),
                (Value::Int16(4), Value::from("four")),
            ])
        );
        // shouldParse{Timestamp,Date,Time}StringAs..., with and without escaped colons
        assert_eq!(parsed("2019-08-23T14:34:54.346Z"), (Some(Schema::timestamp().into_ref()), Value::Int64(1_566_570_894_346)));
        assert_eq!(parsed("2019-08-23T14\\:34\\:54.346Z").1, Value::Int64(1_566_570_894_346));
        assert_eq!(parsed("2019-08-23"), (Some(Schema::date().into_ref()), Value::Int32(18_131)));
        assert_eq!(parsed("14:34:54.346Z"), (Some(Schema::time().into_ref()), Value::Int32(52_494_346)));
        assert_eq!(parsed("14\\:34\\:54.346Z").1, Value::Int32(52_494_346));
        // shouldParse{Date,Time,Timestamp}StringAs...InArray, QuotedTimeStringAsTimeInMap
        let (schema, value) = parsed("[2019-08-23T14:34:54.346Z,2019-01-23T15:12:34.567Z,   2019-04-23T19:12:34.567Z]");
        assert_eq!(schema.unwrap().value_schema.as_deref(), Some(&Schema::timestamp()));
        assert_eq!(
            value,
            Value::Array(vec![Value::Int64(1_566_570_894_346), Value::Int64(1_548_256_354_567), Value::Int64(1_556_046_754_567)])
        );
        let (schema, value) = parsed("{\"k1\":\"14:34:54.346Z\"}");
        assert_eq!(schema.unwrap().value_schema.as_deref(), Some(&Schema::time()));
        assert_eq!(value, Value::Map(vec![(Value::from("k1"), Value::Int32(52_494_346))]));
        // shouldNotEncounterInfiniteLoop (U+FFFF)
        assert_eq!(parsed("\u{FFFF}"), string("\u{FFFF}"));
    }

    #[test]
    fn numbers_take_the_smallest_type() {
        assert_eq!(parsed("12").1, Value::Int8(12));
        assert_eq!(parsed("-129").1, Value::Int16(-129));
        assert_eq!(parsed("40000").1, Value::Int32(40_000));
        assert_eq!(parsed("4398046511104").1, Value::Int64(4_398_046_511_104));
        assert_eq!(parsed("1.0").1, Value::Int8(1));
        assert_eq!(parsed("1.0E10").1, Value::Int64(10_000_000_000));
        assert_eq!(parsed("0.1").1, Value::Float32(0.1));
        assert_eq!(parsed("1.0E300").1, Value::Float64(1e300));
        let (schema, value) = parsed("99999999999999999999");
        assert_eq!(schema.as_deref(), Some(&Schema::decimal(0)));
        assert_eq!(value, Value::Bytes(vec![0x05, 0x6B, 0xC7, 0x5E, 0x2D, 0x63, 0x0F, 0xFF, 0xFF]));
        assert_eq!(parsed("12abc"), string("12abc"));
    }

    #[test]
    fn deliberate_differences_keep_the_data() {
        assert_eq!(parsed("12, 13"), string("12, 13"));
        assert_eq!(parsed("[1,2] x"), string("[1,2] x"));
        assert_eq!(parsed("[\" a \", \"b\\\"c\\\\\"]").1, Value::Array(vec![Value::from(" a "), Value::from("b\"c\\")]));
        assert_eq!(parsed("[1, [2]]").0.unwrap().value_schema, None);
        assert_eq!(parsed("2019-02-30"), string("2019-02-30"));
    }

    #[test]
    fn converts_values_to_strings() {
        let s = |schema: Option<Schema>, v: Value| convert_to_string(schema.as_ref(), &v).unwrap();
        assert_eq!(s(None, Value::from("three\"blind\\\"mice")), "three\"blind\\\"mice");
        assert_eq!(s(None, Value::Array(vec![Value::from("three\"blind\\\"mice")])), "[\"three\\\"blind\\\\\\\"mice\"]");
        assert_eq!(
            s(None, Value::Map(vec![(Value::from("foo"), Value::Int32(1234567890)), (Value::from("bar"), Value::Int32(0))])),
            "{\"foo\":1234567890,\"bar\":0}"
        );
        assert_eq!(s(None, Value::Float64(1.0)), "1.0");
        assert_eq!(s(None, Value::Bytes(b"test".to_vec())), "dGVzdA==");
        assert_eq!(s(Some(Schema::decimal(2)), Value::Bytes(vec![0, 0x9C])), "1.56");
        assert_eq!(s(Some(Schema::timestamp()), Value::Int64(1_566_570_894_346)), "2019-08-23T14:34:54.346Z");
        assert_eq!(s(Some(Schema::date()), Value::Int32(18_131)), "2019-08-23");
        assert_eq!(s(Some(Schema::time()), Value::Int32(52_494_346)), "14:34:54.346Z");
        assert_eq!(s(Some(Schema::date()), Value::Int32(-1)), "1969-12-31");
        let schema =
            Schema::struct_of([("a", Schema::int32().with_default(Value::Int32(5)).into_ref()), ("b", Schema::string().into_ref())])
                .into_ref();
        let st = sluice_api::Struct::from_values(schema, vec![Value::Null, Value::from("x")]);
        assert_eq!(s(None, Value::Struct(st)), "{\"a\":5,\"b\":\"x\"}");
    }
}
