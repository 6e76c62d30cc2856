//! JSON text, read and written the way Kafka's JsonConverter (Jackson 2.16) does.
//!
//! Reading keeps each number's text, so a Decimal payload such as `1.23456789123456789` or a
//! 40-digit integer loses nothing, and it accepts what Jackson is configured to accept:
//! standard JSON plus leading zeros in numbers (`0012`). Duplicate object keys are kept in
//! the tree; lookups take the last one, as Jackson's `ObjectNode` does. Nesting deeper than
//! Jackson's default limit (1000) is rejected.
//!
//! Writing is compact (no spaces) and escapes like Jackson: `\"`, `\\`, `\b`, `\t`, `\n`,
//! `\f`, `\r`, other control characters as `\u00XX` with upper-case hex; everything else,
//! including `/` and non-ASCII, is written as UTF-8. Doubles and floats use Java's
//! `toString`, and non-finite ones are written as the strings `"NaN"`, `"Infinity"` and
//! `"-Infinity"` (Jackson's default `WRITE_NAN_AS_STRINGS`).

use std::fmt;
use std::ops::Range;

use sluice_api::text as java_text;

/// Jackson's default `StreamReadConstraints.maxNestingDepth`.
const MAX_DEPTH: usize = 1000;

/// A parsed JSON value.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Node {
    Null,
    Bool(bool),
    /// The number exactly as written (e.g. `-0012.50e1`).
    Number(String),
    String(String),
    Array(Vec<Node>),
    /// Members in document order, duplicates included.
    Object(Vec<(String, Node)>),
}

impl Node {
    /// Jackson's `JsonNodeType` name, used in error messages.
    pub(crate) fn node_type(&self) -> &'static str {
        match self {
            Node::Null => "NULL",
            Node::Bool(_) => "BOOLEAN",
            Node::Number(_) => "NUMBER",
            Node::String(_) => "STRING",
            Node::Array(_) => "ARRAY",
            Node::Object(_) => "OBJECT",
        }
    }

    /// An object member; the last one wins when a key repeats.
    pub(crate) fn get(&self, key: &str) -> Option<&Node> {
        match self {
            Node::Object(members) => members.iter().rev().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    /// An integral number has no fraction or exponent in its text (Jackson's
    /// `isIntegralNumber`).
    pub(crate) fn is_integral_text(text: &str) -> bool {
        !text.contains(['.', 'e', 'E'])
    }
}

/// A parsed document, with the byte range of each top-level object member's value so the
/// converter can cache schemas by their exact text.
#[derive(Debug)]
pub(crate) struct Document {
    pub root: Node,
    pub member_spans: Vec<(String, Range<usize>)>,
}

impl Document {
    pub(crate) fn member_span(&self, key: &str) -> Option<Range<usize>> {
        self.member_spans.iter().rev().find(|(k, _)| k == key).map(|(_, r)| r.clone())
    }
}

/// Malformed JSON: what was wrong and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyntaxError {
    message: String,
    line: usize,
    column: usize,
}

impl fmt::Display for SyntaxError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} at line {}, column {}", self.message, self.line, self.column)
    }
}

impl std::error::Error for SyntaxError {}

/// Parses a whole document. Empty or whitespace-only input is `Ok(None)` (Jackson's missing
/// node); anything but whitespace after the first value is an error.
pub(crate) fn parse(bytes: &[u8]) -> Result<Option<Document>, SyntaxError> {
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    let text = match std::str::from_utf8(bytes) {
        Ok(t) => t,
        Err(e) => return Err(error_at(bytes, e.valid_up_to(), "invalid UTF-8 byte in the input".to_owned())),
    };
    let mut p = Parser { text, bytes: text.as_bytes(), pos: 0, member_spans: Vec::new() };
    p.skip_ws();
    if p.pos == p.bytes.len() {
        return Ok(None);
    }
    let root = p.value(0)?;
    p.skip_ws();
    if p.pos != p.bytes.len() {
        return Err(p.error(format!("unexpected {} after the end of the JSON value", p.describe_here())));
    }
    Ok(Some(Document { root, member_spans: p.member_spans }))
}

/// From `pos`: optional whitespace, the byte `open`, whitespace, exactly `name` (a quoted
/// member name without escapes), whitespace, `:` and whitespace. Returns where the member's
/// value starts, or `None` when the text is not that.
pub(crate) fn skip_member_prefix(bytes: &[u8], pos: usize, open: u8, name: &[u8]) -> Option<usize> {
    let ws = |mut i: usize| {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = bytes.get(i) {
            i += 1;
        }
        i
    };
    let mut i = ws(pos);
    if bytes.get(i) != Some(&open) {
        return None;
    }
    i = ws(i + 1);
    if !bytes[i..].starts_with(name) {
        return None;
    }
    i = ws(i + name.len());
    if bytes.get(i) != Some(&b':') {
        return None;
    }
    Some(ws(i + 1))
}

/// Parses `tail` as the value of an object's last member: a JSON value, then `}`, then
/// only whitespace. `None` when it is anything else (the caller reads the whole document
/// again to report the error).
pub(crate) fn parse_last_member(tail: &[u8]) -> Option<Node> {
    let text = std::str::from_utf8(tail).ok()?;
    let mut p = Parser { text, bytes: text.as_bytes(), pos: 0, member_spans: Vec::new() };
    let node = p.value(1).ok()?;
    p.skip_ws();
    if p.bytes.get(p.pos) != Some(&b'}') {
        return None;
    }
    p.pos += 1;
    p.skip_ws();
    (p.pos == p.bytes.len()).then_some(node)
}

fn error_at(bytes: &[u8], pos: usize, message: String) -> SyntaxError {
    let before = &bytes[..pos.min(bytes.len())];
    let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
    let line_start = before.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    let column = String::from_utf8_lossy(&before[line_start..]).chars().count() + 1;
    SyntaxError { message, line, column }
}

struct Parser<'a> {
    text: &'a str,
    bytes: &'a [u8],
    pos: usize,
    member_spans: Vec<(String, Range<usize>)>,
}

impl Parser<'_> {
    fn error(&self, message: String) -> SyntaxError {
        error_at(self.bytes, self.pos, message)
    }

    fn describe_here(&self) -> String {
        match self.text[self.pos..].chars().next() {
            None => "end of input".to_owned(),
            Some(c) if c.is_control() => format!("character {:?}", c),
            Some(c) => format!("character '{c}'"),
        }
    }

    fn skip_ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.bytes.get(self.pos) {
            self.pos += 1;
        }
    }

    fn value(&mut self, depth: usize) -> Result<Node, SyntaxError> {
        self.skip_ws();
        match self.bytes.get(self.pos) {
            None => Err(self.error("unexpected end of input, expected a JSON value".to_owned())),
            Some(b'{') => self.object(depth + 1),
            Some(b'[') => self.array(depth + 1),
            Some(b'"') => self.string().map(Node::String),
            Some(b'-' | b'0'..=b'9') => self.number(),
            Some(b't') => self.literal("true", Node::Bool(true)),
            Some(b'f') => self.literal("false", Node::Bool(false)),
            Some(b'n') => self.literal("null", Node::Null),
            Some(_) => Err(self.error(format!("unexpected {}, expected a JSON value", self.describe_here()))),
        }
    }

    fn check_depth(&self, depth: usize) -> Result<(), SyntaxError> {
        if depth > MAX_DEPTH {
            return Err(self.error(format!("document nesting depth exceeds the maximum allowed ({MAX_DEPTH})")));
        }
        Ok(())
    }

    fn literal(&mut self, word: &str, node: Node) -> Result<Node, SyntaxError> {
        let end = self.pos + word.len();
        let ends_cleanly = self.bytes.get(end).is_none_or(|b| !b.is_ascii_alphanumeric());
        if self.bytes.get(self.pos..end) == Some(word.as_bytes()) && ends_cleanly {
            self.pos = end;
            Ok(node)
        } else {
            let token: String = self.text[self.pos..].chars().take_while(|c| c.is_alphanumeric()).take(32).collect();
            Err(self.error(format!("unrecognized token '{token}', expected true, false, null, a number, a string, an array or an object")))
        }
    }

    fn object(&mut self, depth: usize) -> Result<Node, SyntaxError> {
        self.check_depth(depth)?;
        self.pos += 1;
        let mut members = Vec::new();
        self.skip_ws();
        if self.bytes.get(self.pos) == Some(&b'}') {
            self.pos += 1;
            return Ok(Node::Object(members));
        }
        loop {
            self.skip_ws();
            if self.bytes.get(self.pos) != Some(&b'"') {
                return Err(self.error(format!("unexpected {}, expected a double-quoted field name", self.describe_here())));
            }
            let key = self.string()?;
            self.skip_ws();
            if self.bytes.get(self.pos) != Some(&b':') {
                return Err(self.error(format!("unexpected {}, expected ':' after a field name", self.describe_here())));
            }
            self.pos += 1;
            self.skip_ws();
            let start = self.pos;
            let value = self.value(depth)?;
            if depth == 1 {
                self.member_spans.push((key.clone(), start..self.pos));
            }
            members.push((key, value));
            self.skip_ws();
            match self.bytes.get(self.pos) {
                Some(b',') => self.pos += 1,
                Some(b'}') => {
                    self.pos += 1;
                    return Ok(Node::Object(members));
                }
                _ => return Err(self.error(format!("unexpected {}, expected ',' or '}}' in an object", self.describe_here()))),
            }
        }
    }

    fn array(&mut self, depth: usize) -> Result<Node, SyntaxError> {
        self.check_depth(depth)?;
        self.pos += 1;
        let mut items = Vec::new();
        self.skip_ws();
        if self.bytes.get(self.pos) == Some(&b']') {
            self.pos += 1;
            return Ok(Node::Array(items));
        }
        loop {
            items.push(self.value(depth)?);
            self.skip_ws();
            match self.bytes.get(self.pos) {
                Some(b',') => self.pos += 1,
                Some(b']') => {
                    self.pos += 1;
                    return Ok(Node::Array(items));
                }
                _ => return Err(self.error(format!("unexpected {}, expected ',' or ']' in an array", self.describe_here()))),
            }
        }
    }

    /// `-?digits(.digits)?([eE][+-]?digits)?`, leading zeros allowed.
    fn number(&mut self) -> Result<Node, SyntaxError> {
        let start = self.pos;
        if self.bytes[self.pos] == b'-' {
            self.pos += 1;
        }
        let digits = |p: &mut Self| {
            let s = p.pos;
            while p.bytes.get(p.pos).is_some_and(u8::is_ascii_digit) {
                p.pos += 1;
            }
            p.pos - s
        };
        if digits(self) == 0 {
            return Err(self.error("invalid number: expected a digit after '-'".to_owned()));
        }
        if self.bytes.get(self.pos) == Some(&b'.') {
            self.pos += 1;
            if digits(self) == 0 {
                return Err(self.error("invalid number: decimal point not followed by a digit".to_owned()));
            }
        }
        if let Some(b'e' | b'E') = self.bytes.get(self.pos) {
            self.pos += 1;
            if let Some(b'+' | b'-') = self.bytes.get(self.pos) {
                self.pos += 1;
            }
            if digits(self) == 0 {
                return Err(self.error("invalid number: exponent indicator not followed by a digit".to_owned()));
            }
        }
        if self.bytes.get(self.pos).is_some_and(|b| b.is_ascii_alphabetic()) {
            return Err(self.error(format!("invalid number: unexpected {}", self.describe_here())));
        }
        Ok(Node::Number(self.text[start..self.pos].to_owned()))
    }

    fn string(&mut self) -> Result<String, SyntaxError> {
        self.pos += 1; // opening quote
        let mut out = String::new();
        loop {
            let run_start = self.pos;
            while let Some(&b) = self.bytes.get(self.pos) {
                if b == b'"' || b == b'\\' || b < 0x20 {
                    break;
                }
                self.pos += 1;
            }
            out.push_str(&self.text[run_start..self.pos]);
            match self.bytes.get(self.pos) {
                None => return Err(self.error("unexpected end of input inside a string".to_owned())),
                Some(b'"') => {
                    self.pos += 1;
                    return Ok(out);
                }
                Some(b'\\') => {
                    self.pos += 1;
                    self.escape(&mut out)?;
                }
                Some(&b) => {
                    return Err(
                        self.error(format!("illegal unquoted character (code {b}) in a string: control characters must be escaped"))
                    );
                }
            }
        }
    }

    fn escape(&mut self, out: &mut String) -> Result<(), SyntaxError> {
        let Some(&c) = self.bytes.get(self.pos) else {
            return Err(self.error("unexpected end of input in an escape sequence".to_owned()));
        };
        self.pos += 1;
        match c {
            b'"' => out.push('"'),
            b'\\' => out.push('\\'),
            b'/' => out.push('/'),
            b'b' => out.push('\u{8}'),
            b'f' => out.push('\u{c}'),
            b'n' => out.push('\n'),
            b'r' => out.push('\r'),
            b't' => out.push('\t'),
            b'u' => {
                let first = self.hex4()?;
                let code = if (0xD800..0xDC00).contains(&first) {
                    if self.bytes.get(self.pos..self.pos + 2) != Some(b"\\u") {
                        return Err(self.error(format!("unpaired surrogate \\u{first:04X} in a string")));
                    }
                    self.pos += 2;
                    let second = self.hex4()?;
                    if !(0xDC00..0xE000).contains(&second) {
                        return Err(self.error(format!("invalid surrogate pair \\u{first:04X}\\u{second:04X} in a string")));
                    }
                    0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00)
                } else if (0xDC00..0xE000).contains(&first) {
                    return Err(self.error(format!("unpaired surrogate \\u{first:04X} in a string")));
                } else {
                    first
                };
                out.push(char::from_u32(code).unwrap_or(char::REPLACEMENT_CHARACTER));
            }
            other => {
                self.pos -= 1;
                return Err(self.error(format!("unrecognized character escape '{}'", other as char)));
            }
        }
        Ok(())
    }

    fn hex4(&mut self) -> Result<u32, SyntaxError> {
        let hex = self.bytes.get(self.pos..self.pos + 4).and_then(|h| std::str::from_utf8(h).ok());
        match hex.and_then(|h| u32::from_str_radix(h, 16).ok()) {
            Some(v) if hex.is_some_and(|h| h.bytes().all(|b| b.is_ascii_hexdigit())) => {
                self.pos += 4;
                Ok(v)
            }
            _ => Err(self.error("expected four hex digits after \\u".to_owned())),
        }
    }
}

/// Whether a byte needs an escape in a JSON string.
#[inline]
fn needs_escape(b: u8) -> bool {
    b < 0x20 || b == b'"' || b == b'\\'
}

/// The position of the first byte at or after `from` that needs an escape. Eight bytes at a
/// time: a word's bytes below 0x20, equal to `"` or equal to `\` are flagged by the
/// classic has-less/has-zero tricks. A flag can be spurious only above a true one (a borrow
/// runs upwards), so the lowest flag is always a true one.
#[inline]
fn next_escape(bytes: &[u8], from: usize) -> Option<usize> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let mut i = from;
    while i + 8 <= bytes.len() {
        let w = u64::from_le_bytes(bytes[i..i + 8].try_into().expect("eight bytes"));
        let below = w.wrapping_sub(ONES * 0x20) & !w & HIGH;
        let quote = w ^ (ONES * u64::from(b'"'));
        let quote = quote.wrapping_sub(ONES) & !quote & HIGH;
        let slash = w ^ (ONES * u64::from(b'\\'));
        let slash = slash.wrapping_sub(ONES) & !slash & HIGH;
        let flags = below | quote | slash;
        if flags != 0 {
            return Some(i + (flags.trailing_zeros() / 8) as usize);
        }
        i += 8;
    }
    bytes[i..].iter().position(|&b| needs_escape(b)).map(|p| i + p)
}

/// Writes a JSON string literal with Jackson's escapes.
pub(crate) fn write_string(out: &mut String, s: &str) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    out.push('"');
    let bytes = s.as_bytes();
    let mut run = 0;
    while let Some(i) = next_escape(bytes, run) {
        // Every escaped byte is ASCII, so `i` is a character boundary.
        out.push_str(&s[run..i]);
        let b = bytes[i];
        match b {
            b'"' => out.push_str("\\\""),
            b'\\' => out.push_str("\\\\"),
            0x08 => out.push_str("\\b"),
            0x09 => out.push_str("\\t"),
            0x0A => out.push_str("\\n"),
            0x0C => out.push_str("\\f"),
            0x0D => out.push_str("\\r"),
            _ => {
                out.push_str("\\u00");
                out.push(HEX[usize::from(b >> 4)] as char);
                out.push(HEX[usize::from(b & 0xF)] as char);
            }
        }
        run = i + 1;
    }
    out.push_str(&s[run..]);
    out.push('"');
}

/// Writes an integer in decimal, without the temporary `String` of `to_string` (or the
/// formatting machinery of `write!`).
pub(crate) fn write_int<I: itoa::Integer + Copy>(out: &mut String, v: &I) {
    out.push_str(itoa::Buffer::new().format(*v));
}

/// Writes a double as Jackson does: Java's `Double.toString`, non-finite values quoted.
pub(crate) fn write_f64(out: &mut String, v: f64) {
    let text = java_text::double_to_string(v);
    if v.is_finite() {
        out.push_str(&text);
    } else {
        write_string(out, &text);
    }
}

/// Writes a float as Jackson does: Java's `Float.toString`, non-finite values quoted.
pub(crate) fn write_f32(out: &mut String, v: f32) {
    let text = java_text::float_to_string(v);
    if v.is_finite() {
        out.push_str(&text);
    } else {
        write_string(out, &text);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root(text: &str) -> Node {
        parse(text.as_bytes()).unwrap().unwrap().root
    }

    fn err(text: &[u8]) -> String {
        parse(text).unwrap_err().to_string()
    }

    #[test]
    fn parses_values_and_keeps_number_text() {
        assert_eq!(
            root(r#" {"a": [1, -0.50, 1.23456789123456789e-3, true, null], "b": "x\u00e9\n"} "#),
            Node::Object(vec![
                (
                    "a".into(),
                    Node::Array(vec![
                        Node::Number("1".into()),
                        Node::Number("-0.50".into()),
                        Node::Number("1.23456789123456789e-3".into()),
                        Node::Bool(true),
                        Node::Null
                    ])
                ),
                ("b".into(), Node::String("xé\n".into())),
            ])
        );
        assert_eq!(root("0012"), Node::Number("0012".into()));
        assert_eq!(root(r#""\ud83d\ude00""#), Node::String("😀".into()));
        assert!(parse(b"").unwrap().is_none());
        assert!(parse(b" \n ").unwrap().is_none());
    }

    #[test]
    fn duplicate_keys_resolve_to_the_last() {
        let node = root(r#"{"a":1,"a":2}"#);
        assert_eq!(node.get("a"), Some(&Node::Number("2".into())));
    }

    #[test]
    fn records_top_level_member_spans() {
        let text = r#"{ "schema" : {"type":"int8"} , "payload": 1 }"#;
        let doc = parse(text.as_bytes()).unwrap().unwrap();
        assert_eq!(&text[doc.member_span("schema").unwrap()], r#"{"type":"int8"}"#);
        assert_eq!(&text[doc.member_span("payload").unwrap()], "1");
    }

    #[test]
    fn malformed_input_says_what_and_where() {
        assert_eq!(err(b"{\"a\":"), "unexpected end of input, expected a JSON value at line 1, column 6");
        assert_eq!(err(b"[1,\n 2 x]"), "unexpected character 'x', expected ',' or ']' in an array at line 2, column 4");
        assert_eq!(err(b"{} {}"), "unexpected character '{' after the end of the JSON value at line 1, column 4");
        assert_eq!(
            err(b"nul"),
            "unrecognized token 'nul', expected true, false, null, a number, a string, an array or an object at line 1, column 1"
        );
        assert_eq!(err(b"1."), "invalid number: decimal point not followed by a digit at line 1, column 3");
        assert_eq!(
            err(b"\"a\x01\""),
            "illegal unquoted character (code 1) in a string: control characters must be escaped at line 1, column 3"
        );
        assert_eq!(err(b"\"\xff\""), "invalid UTF-8 byte in the input at line 1, column 2");
        assert_eq!(err(b"NaN"), "unexpected character 'N', expected a JSON value at line 1, column 1");
        let deep = "[".repeat(1001);
        assert!(err(deep.as_bytes()).starts_with("document nesting depth exceeds the maximum allowed (1000)"));
    }

    #[test]
    fn writes_strings_with_jacksons_escapes() {
        let mut out = String::new();
        write_string(&mut out, "a\"b\\c/d\u{1}\u{1f}\t\n\r\u{8}\u{c}é\u{7f}");
        // DEL (U+007F), '/' and non-ASCII are written as they are.
        assert_eq!(out, "\"a\\\"b\\\\c/d\\u0001\\u001F\\t\\n\\r\\b\\fé\u{7f}\"");
    }

    #[test]
    fn writes_non_finite_numbers_as_strings() {
        let mut out = String::new();
        write_f64(&mut out, f64::NAN);
        out.push(',');
        write_f32(&mut out, f32::NEG_INFINITY);
        out.push(',');
        write_f64(&mut out, 1.0);
        assert_eq!(out, r#""NaN","-Infinity",1.0"#);
    }

    #[test]
    fn string_escapes_match_a_byte_by_byte_reference_at_every_position() {
        fn reference(s: &str) -> String {
            let mut out = String::from("\"");
            for c in s.chars() {
                match c {
                    '"' => out.push_str("\\\""),
                    '\\' => out.push_str("\\\\"),
                    '\u{8}' => out.push_str("\\b"),
                    '\t' => out.push_str("\\t"),
                    '\n' => out.push_str("\\n"),
                    '\u{c}' => out.push_str("\\f"),
                    '\r' => out.push_str("\\r"),
                    c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04X}", c as u32)),
                    c => out.push(c),
                }
            }
            out.push('"');
            out
        }
        // Every special byte at every offset of a 20-byte string, next to multi-byte
        // characters and bytes just above and below the limits (0x1F/0x20, 0x21/0x23, 0x5B/0x5D).
        let specials = ['"', '\\', '\u{0}', '\u{1f}', '\n', '\u{7f}', ' ', '!', '#', '[', ']', 'é', '€'];
        for len in 0..20 {
            for at in 0..len.max(1) {
                for &c in &specials {
                    let mut text: String = "abcdefghijklmnopqrstuvwxyz".chars().take(len).collect();
                    if len > 0 {
                        text.replace_range(at..at + 1, &c.to_string());
                    }
                    text.push_str("ü\"tail\\");
                    let mut out = String::new();
                    write_string(&mut out, &text);
                    assert_eq!(out, reference(&text), "{text:?}");
                }
            }
        }
    }
}
