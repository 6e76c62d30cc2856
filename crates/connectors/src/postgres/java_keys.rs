//! Debezium's form of incremental-snapshot chunk keys, read and written.
//!
//! Debezium stores the last and the largest key of the table being snapshotted
//! (`incremental_snapshot_primary_key`, `incremental_snapshot_maximum_key`) as the hex of a
//! Java-serialized `Object[]` (`ObjectOutputStream`) holding the key columns' JDBC values.
//! sluice keeps keys as the columns' text forms, which Postgres reads back as literals. This
//! module turns Debezium's form into those text forms for the values JDBC gives for the
//! usual key types: `Integer`, `Long`, `Short`, `Byte`, `String`, `UUID`, `BigDecimal`,
//! `BigInteger`, `Boolean`, and `java.sql.Timestamp` / `java.sql.Date` read as UTC (pgjdbc
//! makes them in the JVM's time zone; Debezium's workers run in UTC as a rule). Anything else
//! is refused (`None`), and the caller starts that table's snapshot over, which sends rows
//! again but loses none.
//!
//! The reader follows the Java Object Serialization Stream Protocol for what such a stream
//! holds: class descriptors (new or back-referenced), objects with primitive and object
//! fields, strings, byte arrays and class annotations ended by `TC_ENDBLOCKDATA`.
//!
//! [`encode`] writes a key the same way, byte for byte as Java does, for the key column types
//! whose JDBC values it knows ([`KeyKind`]), so that Debezium can read sluice's offsets too.

use std::collections::HashMap;

use super::mapping::{civil_from_days, hex_octets, hex_string, parse_date, parse_timestamp, split_offset, unscaled_bytes, uuid_text};

const MAGIC: [u8; 4] = [0xac, 0xed, 0x00, 0x05];
const TC_NULL: u8 = 0x70;
const TC_REFERENCE: u8 = 0x71;
const TC_CLASSDESC: u8 = 0x72;
const TC_OBJECT: u8 = 0x73;
const TC_STRING: u8 = 0x74;
const TC_ARRAY: u8 = 0x75;
const TC_LONGSTRING: u8 = 0x7c;
const TC_BLOCKDATA: u8 = 0x77;
const TC_ENDBLOCKDATA: u8 = 0x78;
const BASE_HANDLE: u32 = 0x7e_0000;
const SC_WRITE_METHOD: u8 = 0x01;
/// How deeply objects, arrays and class descriptors may nest: a chunk key holds a flat array
/// of values, so anything deeper is not one, and reading it would only spend the stack.
const MAX_DEPTH: u32 = 64;

/// Whether a stored key is in Debezium's form (hex of a Java serialization stream).
pub fn is_debezium_form(text: &str) -> bool {
    text.len() > 8 && text.as_bytes()[..8].eq_ignore_ascii_case(b"aced0005")
}

/// The text form of each value of a Debezium chunk key, or `None` when the key holds a
/// type this reader does not know (or is malformed).
pub fn chunk_key(hex: &str) -> Option<Vec<String>> {
    let bytes = hex_octets(hex)?;
    let mut r = Reader { bytes: &bytes, at: 0, handles: Vec::new(), depth: 0 };
    if r.take(4)? != MAGIC {
        return None;
    }
    let Value::Array(items) = r.content()? else { return None };
    items.iter().map(text_form).collect()
}

#[derive(Debug, Clone)]
enum Value {
    Null,
    Int(i64),
    Str(String),
    Bytes(Vec<u8>),
    Array(Vec<Value>),
    Object { class: String, fields: HashMap<String, Value> },
}

#[derive(Debug, Clone)]
struct ClassDesc {
    name: String,
    flags: u8,
    /// (type code, name)
    fields: Vec<(u8, String)>,
    superclass: Option<Box<ClassDesc>>,
}

#[derive(Debug, Clone)]
enum Handle {
    Class(ClassDesc),
    Value(Value),
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
    handles: Vec<Handle>,
    /// How many `content`/`class_desc` calls are under way (see [`MAX_DEPTH`]).
    depth: u32,
}

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Option<&[u8]> {
        let s = self.bytes.get(self.at..self.at + n)?;
        self.at += n;
        Some(s)
    }
    fn u8(&mut self) -> Option<u8> {
        Some(self.take(1)?[0])
    }
    fn u16(&mut self) -> Option<u16> {
        Some(u16::from_be_bytes(self.take(2)?.try_into().ok()?))
    }
    fn i32(&mut self) -> Option<i32> {
        Some(i32::from_be_bytes(self.take(4)?.try_into().ok()?))
    }
    fn i64(&mut self) -> Option<i64> {
        Some(i64::from_be_bytes(self.take(8)?.try_into().ok()?))
    }
    fn utf(&mut self) -> Option<String> {
        let n = self.u16()? as usize;
        modified_utf8(self.take(n)?)
    }
    fn reference(&mut self) -> Option<Handle> {
        let h = self.i32()? as u32;
        self.handles.get(h.checked_sub(BASE_HANDLE)? as usize).cloned()
    }

    /// Runs `f` one level deeper; `None` past [`MAX_DEPTH`].
    fn nested<T>(&mut self, f: impl FnOnce(&mut Self) -> Option<T>) -> Option<T> {
        if self.depth >= MAX_DEPTH {
            return None;
        }
        self.depth += 1;
        let out = f(self);
        self.depth -= 1;
        out
    }

    /// A class descriptor where one is expected: new, back-referenced or null.
    fn class_desc(&mut self) -> Option<Option<ClassDesc>> {
        self.nested(Self::class_desc_here)
    }

    fn class_desc_here(&mut self) -> Option<Option<ClassDesc>> {
        match self.u8()? {
            TC_NULL => Some(None),
            TC_REFERENCE => match self.reference()? {
                Handle::Class(c) => Some(Some(c)),
                Handle::Value(_) => None,
            },
            TC_CLASSDESC => {
                let name = self.utf()?;
                self.take(8)?; // serialVersionUID
                let handle = self.handles.len();
                self.handles.push(Handle::Value(Value::Null)); // replaced below
                let flags = self.u8()?;
                let count = self.u16()?;
                let mut fields = Vec::with_capacity(count as usize);
                for _ in 0..count {
                    let code = self.u8()?;
                    let field = self.utf()?;
                    if code == b'L' || code == b'[' {
                        // The field's class name, as a string (new or back-referenced).
                        self.content()?;
                    }
                    fields.push((code, field));
                }
                self.annotation()?;
                let superclass = self.class_desc()?.map(Box::new);
                let desc = ClassDesc { name, flags, fields, superclass };
                self.handles[handle] = Handle::Class(desc.clone());
                Some(Some(desc))
            }
            _ => None,
        }
    }

    /// Reads a class or object annotation up to TC_ENDBLOCKDATA: returns its block data;
    /// objects in it are read and dropped.
    fn annotation(&mut self) -> Option<Vec<u8>> {
        let mut data = Vec::new();
        loop {
            match self.bytes.get(self.at)? {
                &TC_ENDBLOCKDATA => {
                    self.at += 1;
                    return Some(data);
                }
                &TC_BLOCKDATA => {
                    self.at += 1;
                    let n = self.u8()? as usize;
                    data.extend_from_slice(self.take(n)?);
                }
                _ => {
                    self.content()?;
                }
            }
        }
    }

    fn content(&mut self) -> Option<Value> {
        self.nested(Self::content_here)
    }

    fn content_here(&mut self) -> Option<Value> {
        match self.u8()? {
            TC_NULL => Some(Value::Null),
            TC_REFERENCE => match self.reference()? {
                Handle::Value(v) => Some(v),
                Handle::Class(_) => None,
            },
            TC_STRING => {
                let s = self.utf()?;
                self.handles.push(Handle::Value(Value::Str(s.clone())));
                Some(Value::Str(s))
            }
            TC_ARRAY => {
                let desc = self.class_desc()??;
                let handle = self.handles.len();
                self.handles.push(Handle::Value(Value::Null));
                let n = usize::try_from(self.i32()?).ok()?;
                let value = match desc.name.as_str() {
                    "[B" => Value::Bytes(self.take(n)?.to_vec()),
                    name if name.starts_with("[L") || name.starts_with("[[") => {
                        let mut items = Vec::with_capacity(n.min(64));
                        for _ in 0..n {
                            items.push(self.content()?);
                        }
                        Value::Array(items)
                    }
                    _ => return None,
                };
                self.handles[handle] = Handle::Value(value.clone());
                Some(value)
            }
            TC_OBJECT => {
                let desc = self.class_desc()??;
                let handle = self.handles.len();
                self.handles.push(Handle::Value(Value::Null));
                // Field values come superclass first.
                let mut chain = vec![desc.clone()];
                while let Some(sup) = chain.last().and_then(|c| c.superclass.as_deref()).cloned() {
                    chain.push(sup);
                }
                let mut fields = HashMap::new();
                for class in chain.iter().rev() {
                    for (code, name) in &class.fields {
                        let v = match code {
                            b'B' => Value::Int(i64::from(self.u8()? as i8)),
                            b'Z' => Value::Int(i64::from(self.u8()?)),
                            b'C' | b'S' => Value::Int(i64::from(self.u16()? as i16)),
                            b'I' => Value::Int(i64::from(self.i32()?)),
                            b'J' => Value::Int(self.i64()?),
                            b'F' | b'D' => return None,
                            b'L' | b'[' => self.content()?,
                            _ => return None,
                        };
                        fields.insert(name.clone(), v);
                    }
                    if class.flags & SC_WRITE_METHOD != 0 {
                        // What its writeObject wrote (java.util.Date: its time), by class.
                        let data = self.annotation()?;
                        if !data.is_empty() {
                            fields.insert(format!("#{}", class.name), Value::Bytes(data));
                        }
                    }
                }
                let value = Value::Object { class: desc.name, fields };
                self.handles[handle] = Handle::Value(value.clone());
                Some(value)
            }
            _ => None,
        }
    }
}

/// Java's modified UTF-8 (NUL as C0 80, supplementary characters as surrogate pairs).
fn modified_utf8(bytes: &[u8]) -> Option<String> {
    let mut units: Vec<u16> = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        let (unit, len) = if b & 0x80 == 0 {
            (u16::from(b), 1)
        } else if b & 0xe0 == 0xc0 {
            ((u16::from(b & 0x1f) << 6) | u16::from(*bytes.get(i + 1)? & 0x3f), 2)
        } else if b & 0xf0 == 0xe0 {
            ((u16::from(b & 0x0f) << 12) | (u16::from(*bytes.get(i + 1)? & 0x3f) << 6) | u16::from(*bytes.get(i + 2)? & 0x3f), 3)
        } else {
            return None;
        };
        units.push(unit);
        i += len;
    }
    String::from_utf16(&units).ok()
}

/// The text form Postgres reads back as a literal of the key column's type.
fn text_form(v: &Value) -> Option<String> {
    let Value::Object { class, fields } = v else {
        return match v {
            Value::Str(s) => Some(s.clone()),
            _ => None,
        };
    };
    let int = |name: &str| match fields.get(name) {
        Some(Value::Int(n)) => Some(*n),
        _ => None,
    };
    match class.as_str() {
        "java.lang.Integer" | "java.lang.Long" | "java.lang.Short" | "java.lang.Byte" => Some(int("value")?.to_string()),
        "java.util.UUID" => {
            let (hi, lo) = (int("mostSigBits")? as u64, int("leastSigBits")? as u64);
            Some(uuid_text(&((u128::from(hi) << 64) | u128::from(lo)).to_be_bytes()))
        }
        "java.math.BigInteger" => big_integer(v),
        "java.lang.Boolean" => Some(if int("value")? != 0 { "true" } else { "false" }.to_owned()),
        "java.sql.Timestamp" => {
            let secs = date_millis(fields)?.div_euclid(1000);
            let micros = int("nanos")? / 1000;
            let (y, m, d) = civil_from_days(secs.div_euclid(86_400));
            let s = secs.rem_euclid(86_400);
            // The zone makes the literal an instant for timestamptz; timestamp ignores it.
            (1..=9999).contains(&y).then(|| format!("{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}.{micros:06}+00", s / 3600, s / 60 % 60, s % 60))
        }
        "java.sql.Date" => {
            let (y, m, d) = civil_from_days(date_millis(fields)?.div_euclid(86_400_000));
            (1..=9999).contains(&y).then(|| format!("{y:04}-{m:02}-{d:02}"))
        }
        "java.math.BigDecimal" => {
            let digits = big_integer(fields.get("intVal")?)?;
            let scale = int("scale")?;
            Some(with_scale(&digits, scale)?)
        }
        _ => None,
    }
}

/// The time a `java.util.Date` subclass wrote in its block data, in milliseconds.
fn date_millis(fields: &HashMap<String, Value>) -> Option<i64> {
    match fields.get("#java.util.Date")? {
        Value::Bytes(b) => Some(i64::from_be_bytes(b.get(..8)?.try_into().ok()?)),
        _ => None,
    }
}

/// A serialized `BigInteger` (`signum` and big-endian `magnitude`) in decimal.
fn big_integer(v: &Value) -> Option<String> {
    let Value::Object { fields, .. } = v else { return None };
    let (Some(Value::Int(signum)), Some(Value::Bytes(magnitude))) = (fields.get("signum"), fields.get("magnitude")) else {
        return None;
    };
    let mut digits: Vec<u8> = Vec::new(); // little-endian base 10
    for byte in magnitude {
        let mut carry = u32::from(*byte);
        for d in digits.iter_mut() {
            let x = u32::from(*d) * 256 + carry;
            *d = (x % 10) as u8;
            carry = x / 10;
        }
        while carry > 0 {
            digits.push((carry % 10) as u8);
            carry /= 10;
        }
    }
    let text: String = if digits.is_empty() { "0".to_owned() } else { digits.iter().rev().map(|d| char::from(b'0' + d)).collect() };
    Some(if *signum < 0 { format!("-{text}") } else { text })
}

/// Postgres' numeric holds at most 131,072 digits before the point and 16,383 after: a key
/// scaled beyond those is not one of its values (and would not fit a formatting width).
const NUMERIC_SCALES: std::ops::RangeInclusive<i64> = -131_072..=16_383;

/// `unscaled × 10^-scale` in plain decimal notation; `None` for a scale no numeric has.
fn with_scale(unscaled: &str, scale: i64) -> Option<String> {
    if !NUMERIC_SCALES.contains(&scale) {
        return None;
    }
    let (sign, digits) = unscaled.strip_prefix('-').map_or(("", unscaled), |d| ("-", d));
    if scale <= 0 {
        let zeros = "0".repeat(usize::try_from(-scale).ok()?);
        return Some(format!("{sign}{digits}{zeros}"));
    }
    let scale = usize::try_from(scale).ok()?;
    let padded = format!("{digits:0>width$}", width = scale + 1);
    let (int, frac) = padded.split_at(padded.len() - scale);
    Some(format!("{sign}{int}.{frac}"))
}

/// The JDBC value class of a key column, for [`encode`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyKind {
    /// `smallint`, `integer` (pgjdbc gives `Integer` for both).
    Integer,
    /// `bigint`.
    Long,
    /// `text`, `varchar`, `char`, `name`.
    Str,
    Uuid,
    /// `numeric`.
    Decimal,
    /// `timestamp` (`java.sql.Timestamp` in UTC).
    Timestamp,
    /// `timestamptz` (`java.sql.Timestamp` of the instant).
    TimestampTz,
    /// `date` (`java.sql.Date`, midnight UTC).
    Date,
    /// `boolean`.
    Boolean,
}

/// A class descriptor as written: name, serialVersionUID, flags, fields (type code, name, and
/// the type string of an object field), superclass.
struct Desc {
    name: &'static str,
    uid: u64,
    flags: u8,
    fields: &'static [(u8, &'static str, Option<&'static str>)],
    superclass: Option<&'static Desc>,
}

const NUMBER: Desc = Desc { name: "java.lang.Number", uid: 0x86ac_951d_0b94_e08b, flags: 0x02, fields: &[], superclass: None };
const OBJECT_ARRAY: Desc = Desc { name: "[Ljava.lang.Object;", uid: 0x90ce_589f_1073_296c, flags: 0x02, fields: &[], superclass: None };
const BYTE_ARRAY: Desc = Desc { name: "[B", uid: 0xacf3_17f8_0608_54e0, flags: 0x02, fields: &[], superclass: None };
const INTEGER: Desc = Desc {
    name: "java.lang.Integer",
    uid: 0x12e2_a0a4_f781_8738,
    flags: 0x02,
    fields: &[(b'I', "value", None)],
    superclass: Some(&NUMBER),
};
const LONG: Desc =
    Desc { name: "java.lang.Long", uid: 0x3b8b_e490_cc8f_23df, flags: 0x02, fields: &[(b'J', "value", None)], superclass: Some(&NUMBER) };
const UUID: Desc = Desc {
    name: "java.util.UUID",
    uid: 0xbc99_03f7_986d_852f,
    flags: 0x02,
    fields: &[(b'J', "leastSigBits", None), (b'J', "mostSigBits", None)],
    superclass: None,
};
const UTIL_DATE: Desc = Desc { name: "java.util.Date", uid: 0x686a_8101_4b59_7419, flags: 0x03, fields: &[], superclass: None };
const SQL_TIMESTAMP: Desc = Desc {
    name: "java.sql.Timestamp",
    uid: 0x2618_d5c8_0153_bf65,
    flags: 0x02,
    fields: &[(b'I', "nanos", None)],
    superclass: Some(&UTIL_DATE),
};
const SQL_DATE: Desc = Desc { name: "java.sql.Date", uid: 0x14fa_4668_3f35_6697, flags: 0x02, fields: &[], superclass: Some(&UTIL_DATE) };
const BOOLEAN: Desc =
    Desc { name: "java.lang.Boolean", uid: 0xcd20_7280_d59c_faee, flags: 0x02, fields: &[(b'Z', "value", None)], superclass: None };
const BIG_DECIMAL: Desc = Desc {
    name: "java.math.BigDecimal",
    uid: 0x54c7_1557_f981_284f,
    flags: 0x03,
    fields: &[(b'I', "scale", None), (b'L', "intVal", Some("Ljava/math/BigInteger;"))],
    superclass: Some(&NUMBER),
};
const BIG_INTEGER: Desc = Desc {
    name: "java.math.BigInteger",
    uid: 0x8cfc_9f1f_a93b_fb1d,
    flags: 0x03,
    fields: &[
        (b'I', "bitCount", None),
        (b'I', "bitLength", None),
        (b'I', "firstNonzeroByteNum", None),
        (b'I', "lowestSetBit", None),
        (b'I', "signum", None),
        (b'[', "magnitude", Some("[B")),
    ],
    superclass: Some(&NUMBER),
};

/// Writes a serialization stream, numbering handles as `ObjectOutputStream` does.
#[derive(Default)]
struct Writer {
    out: Vec<u8>,
    next_handle: u32,
    /// Handles of the class descriptors written so far, by class name.
    descs: HashMap<&'static str, u32>,
    /// Handles of the type strings written so far.
    strings: HashMap<&'static str, u32>,
}

impl Writer {
    fn handle(&mut self) -> u32 {
        let h = BASE_HANDLE + self.next_handle;
        self.next_handle += 1;
        h
    }
    fn utf(&mut self, s: &str) -> Option<()> {
        let bytes = modified_utf8_bytes(s);
        self.out.extend_from_slice(&u16::try_from(bytes.len()).ok()?.to_be_bytes());
        self.out.extend_from_slice(&bytes);
        Some(())
    }
    /// A string written once and referenced after (type strings are interned in Java).
    fn interned(&mut self, s: &'static str) -> Option<()> {
        if let Some(h) = self.strings.get(s) {
            self.out.push(TC_REFERENCE);
            self.out.extend_from_slice(&h.to_be_bytes());
            return Some(());
        }
        self.out.push(TC_STRING);
        let h = self.handle();
        self.strings.insert(s, h);
        self.utf(s)
    }
    fn string(&mut self, s: &str) -> Option<()> {
        self.out.push(TC_STRING);
        self.handle();
        self.utf(s)
    }
    fn desc(&mut self, d: &'static Desc) -> Option<()> {
        if let Some(h) = self.descs.get(d.name) {
            self.out.push(TC_REFERENCE);
            self.out.extend_from_slice(&h.to_be_bytes());
            return Some(());
        }
        self.out.push(TC_CLASSDESC);
        self.utf(d.name)?;
        self.out.extend_from_slice(&d.uid.to_be_bytes());
        let h = self.handle();
        self.descs.insert(d.name, h);
        self.out.push(d.flags);
        self.out.extend_from_slice(&(d.fields.len() as u16).to_be_bytes());
        for (code, name, ty) in d.fields {
            self.out.push(*code);
            self.utf(name)?;
            if let Some(ty) = ty {
                self.interned(ty)?;
            }
        }
        self.out.push(TC_ENDBLOCKDATA);
        match d.superclass {
            Some(sup) => self.desc(sup),
            None => {
                self.out.push(TC_NULL);
                Some(())
            }
        }
    }
    fn object(&mut self, d: &'static Desc) -> Option<()> {
        self.out.push(TC_OBJECT);
        self.desc(d)?;
        self.handle();
        Some(())
    }
    fn int(&mut self, v: i32) {
        self.out.extend_from_slice(&v.to_be_bytes());
    }
    fn long(&mut self, v: i64) {
        self.out.extend_from_slice(&v.to_be_bytes());
    }
    /// `java.util.Date`'s `writeObject`: its time in milliseconds as block data.
    fn date_millis(&mut self, millis: i64) {
        self.out.extend_from_slice(&[TC_BLOCKDATA, 8]);
        self.long(millis);
        self.out.push(TC_ENDBLOCKDATA);
    }
    fn value(&mut self, kind: KeyKind, text: &str) -> Option<()> {
        match kind {
            KeyKind::Integer => {
                let v: i32 = text.parse().ok()?;
                self.object(&INTEGER)?;
                self.int(v);
            }
            KeyKind::Long => {
                let v: i64 = text.parse().ok()?;
                self.object(&LONG)?;
                self.long(v);
            }
            KeyKind::Str => self.string(text)?,
            KeyKind::Uuid => {
                let hex: String = text.chars().filter(|c| *c != '-').collect();
                let v = u128::from_str_radix(&hex, 16).ok().filter(|_| hex.len() == 32)?;
                self.object(&UUID)?;
                self.long(v as u64 as i64);
                self.long((v >> 64) as u64 as i64);
            }
            KeyKind::Decimal => {
                let (signum, magnitude, scale) = decimal_parts(text)?;
                self.object(&BIG_DECIMAL)?;
                self.int(scale);
                self.object(&BIG_INTEGER)?;
                // The legacy fields Java still writes with these constants.
                for legacy in [-1, -1, -2, -2] {
                    self.int(legacy);
                }
                self.int(signum);
                self.out.push(TC_ARRAY);
                self.desc(&BYTE_ARRAY)?;
                self.handle();
                self.int(i32::try_from(magnitude.len()).ok()?);
                self.out.extend_from_slice(&magnitude);
                self.out.push(TC_ENDBLOCKDATA); // BigInteger's writeObject
                self.out.push(TC_ENDBLOCKDATA); // BigDecimal's writeObject
            }
            KeyKind::Timestamp | KeyKind::TimestampTz => {
                let micros = if kind == KeyKind::Timestamp {
                    // A zone (as this module reads Debezium's keys back) means nothing here.
                    let local = split_offset(text).map_or(text, |(value, _, _)| value);
                    (!text.ends_with(" BC")).then(|| parse_timestamp(local))??
                } else {
                    let (value, offset, bc) = split_offset(text)?;
                    (!bc).then(|| parse_timestamp(value))?? - i128::from(offset) * 1_000_000
                };
                let micros = i64::try_from(micros).ok()?;
                // A Timestamp keeps whole seconds in Date's time and the fraction in `nanos`.
                self.object(&SQL_TIMESTAMP)?;
                self.date_millis(micros.div_euclid(1_000_000) * 1000);
                self.int(i32::try_from(micros.rem_euclid(1_000_000) * 1000).ok()?);
            }
            KeyKind::Date => {
                let days = (!text.ends_with(" BC")).then(|| parse_date(text))??;
                self.object(&SQL_DATE)?;
                self.date_millis(days.checked_mul(86_400_000)?);
            }
            KeyKind::Boolean => {
                let v = match text {
                    "t" | "true" => 1,
                    "f" | "false" => 0,
                    _ => return None,
                };
                self.object(&BOOLEAN)?;
                self.out.push(v);
            }
        }
        Some(())
    }
}

/// A key as Debezium writes it (hex of a Java-serialized `Object[]`), or `None` when a value
/// does not fit its kind.
pub fn encode(key: &[String], kinds: &[KeyKind]) -> Option<String> {
    if key.len() != kinds.len() {
        return None;
    }
    let mut w = Writer::default();
    w.out.extend_from_slice(&MAGIC);
    w.out.push(TC_ARRAY);
    w.desc(&OBJECT_ARRAY)?;
    w.handle();
    w.int(i32::try_from(key.len()).ok()?);
    for (text, kind) in key.iter().zip(kinds) {
        w.value(*kind, text)?;
    }
    Some(hex_string(&w.out))
}

/// The Java serialization stream of one `String` (`ObjectOutputStream.writeObject(s)`), as
/// Debezium's column hashing (`column.mask.hash`, v1) digests it.
pub fn serialized_string(s: &str) -> Vec<u8> {
    let utf = modified_utf8_bytes(s);
    let mut out = MAGIC.to_vec();
    if utf.len() <= 0xffff {
        out.push(TC_STRING);
        out.extend((utf.len() as u16).to_be_bytes());
    } else {
        out.push(TC_LONGSTRING);
        out.extend((utf.len() as u64).to_be_bytes());
    }
    out.extend(utf);
    out
}

/// Java's modified UTF-8 of `s`.
fn modified_utf8_bytes(s: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(s.len());
    for unit in s.encode_utf16() {
        match unit {
            0x0001..=0x007f => out.push(unit as u8),
            0x0000 | 0x0080..=0x07ff => {
                out.push(0xc0 | (unit >> 6) as u8);
                out.push(0x80 | (unit & 0x3f) as u8);
            }
            _ => {
                out.push(0xe0 | (unit >> 12) as u8);
                out.push(0x80 | ((unit >> 6) & 0x3f) as u8);
                out.push(0x80 | (unit & 0x3f) as u8);
            }
        }
    }
    out
}

/// A decimal's `BigDecimal` parts: signum, the unscaled value's big-endian magnitude
/// (no leading zero bytes) and the scale.
fn decimal_parts(text: &str) -> Option<(i32, Vec<u8>, i32)> {
    let (negative, digits) = text.strip_prefix('-').map_or((false, text), |d| (true, d));
    let scale = i32::try_from(digits.split_once('.').map_or(0, |(_, frac)| frac.len())).ok()?;
    // The two's complement of a positive value is its magnitude behind a zero sign byte.
    let mut magnitude = unscaled_bytes(digits, scale)?;
    let leading_zeros = magnitude.iter().take_while(|b| **b == 0).count();
    magnitude.drain(..leading_zeros);
    let signum = match (magnitude.is_empty(), negative) {
        (true, _) => 0,
        (false, true) => -1,
        (false, false) => 1,
    };
    Some((signum, magnitude, scale))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What Debezium 3.6.3 wrote for these keys (`tests/golden/postgres/DebeziumChunkKeys.java`
    /// calls its `arrayToSerializedString`).
    const RECORDED: &[(&[&str], &str)] = &[
        (&["5"], "aced0005757200135b4c6a6176612e6c616e672e4f626a6563743b90ce589f1073296c020000787000000001737200116a6176612e6c616e672e496e746567657212e2a0a4f781873802000149000576616c7565787200106a6176612e6c616e672e4e756d62657286ac951d0b94e08b020000787000000005"),
        (&["-7"], "aced0005757200135b4c6a6176612e6c616e672e4f626a6563743b90ce589f1073296c020000787000000001737200116a6176612e6c616e672e496e746567657212e2a0a4f781873802000149000576616c7565787200106a6176612e6c616e672e4e756d62657286ac951d0b94e08b0200007870fffffff9"),
        (&["9000000000"], "aced0005757200135b4c6a6176612e6c616e672e4f626a6563743b90ce589f1073296c0200007870000000017372000e6a6176612e6c616e672e4c6f6e673b8be490cc8f23df0200014a000576616c7565787200106a6176612e6c616e672e4e756d62657286ac951d0b94e08b02000078700000000218711a00"),
        (&["a'b"], "aced0005757200135b4c6a6176612e6c616e672e4f626a6563743b90ce589f1073296c020000787000000001740003612762"),
        (&["1", "x"], "aced0005757200135b4c6a6176612e6c616e672e4f626a6563743b90ce589f1073296c020000787000000002737200116a6176612e6c616e672e496e746567657212e2a0a4f781873802000149000576616c7565787200106a6176612e6c616e672e4e756d62657286ac951d0b94e08b02000078700000000174000178"),
        (&["2", "3"], "aced0005757200135b4c6a6176612e6c616e672e4f626a6563743b90ce589f1073296c0200007870000000027372000e6a6176612e6c616e672e4c6f6e673b8be490cc8f23df0200014a000576616c7565787200106a6176612e6c616e672e4e756d62657286ac951d0b94e08b020000787000000000000000027371007e00020000000000000003"),
        (&["123e4567-e89b-12d3-a456-426614174000"], "aced0005757200135b4c6a6176612e6c616e672e4f626a6563743b90ce589f1073296c0200007870000000017372000e6a6176612e7574696c2e55554944bc9903f7986d852f0200024a000c6c65617374536967426974734a000b6d6f7374536967426974737870a456426614174000123e4567e89b12d3"),
        (&["12.50"], "aced0005757200135b4c6a6176612e6c616e672e4f626a6563743b90ce589f1073296c020000787000000001737200146a6176612e6d6174682e426967446563696d616c54c71557f981284f0300024900057363616c654c0006696e7456616c7400164c6a6176612f6d6174682f426967496e74656765723b787200106a6176612e6c616e672e4e756d62657286ac951d0b94e08b020000787000000002737200146a6176612e6d6174682e426967496e74656765728cfc9f1fa93bfb1d030006490008626974436f756e744900096269744c656e67746849001366697273744e6f6e7a65726f427974654e756d49000c6c6f776573745365744269744900067369676e756d5b00096d61676e69747564657400025b427871007e0004fffffffffffffffffffffffefffffffe00000001757200025b42acf317f8060854e002000078700000000204e27878"),
        (&["-98765432109876543210.123"], "aced0005757200135b4c6a6176612e6c616e672e4f626a6563743b90ce589f1073296c020000787000000001737200146a6176612e6d6174682e426967446563696d616c54c71557f981284f0300024900057363616c654c0006696e7456616c7400164c6a6176612f6d6174682f426967496e74656765723b787200106a6176612e6c616e672e4e756d62657286ac951d0b94e08b020000787000000003737200146a6176612e6d6174682e426967496e74656765728cfc9f1fa93bfb1d030006490008626974436f756e744900096269744c656e67746849001366697273744e6f6e7a65726f427974654e756d49000c6c6f776573745365744269744900067369676e756d5b00096d61676e69747564657400025b427871007e0004fffffffffffffffffffffffefffffffeffffffff757200025b42acf317f8060854e002000078700000000a14ea15b5a63f1e5fc28b7878"),
        (&["é€"], "aced0005757200135b4c6a6176612e6c616e672e4f626a6563743b90ce589f1073296c020000787000000001740005c3a9e282ac"),
        (&["4"], "aced0005757200135b4c6a6176612e6c616e672e4f626a6563743b90ce589f1073296c0200007870000000017372000f6a6176612e6c616e672e53686f7274684d37133460da5202000153000576616c7565787200106a6176612e6c616e672e4e756d62657286ac951d0b94e08b02000078700004"),
    ];

    #[test]
    fn reads_every_key_debezium_recorded() {
        for (want, hex) in RECORDED {
            assert!(is_debezium_form(hex));
            let want: Vec<String> = want.iter().map(|s| (*s).to_owned()).collect();
            assert_eq!(chunk_key(hex), Some(want), "{hex}");
        }
    }

    #[test]
    fn writes_keys_as_debezium_does() {
        use KeyKind::*;
        let kinds: &[&[KeyKind]] =
            &[&[Integer], &[Integer], &[Long], &[Str], &[Integer, Str], &[Long, Long], &[Uuid], &[Decimal], &[Decimal], &[Str]];
        for ((key, hex), kinds) in RECORDED.iter().zip(kinds) {
            let key: Vec<String> = key.iter().map(|s| (*s).to_owned()).collect();
            assert_eq!(encode(&key, kinds).as_deref(), Some(*hex), "{key:?}");
        }
        assert_eq!(encode(&["x".to_owned()], &[Integer]), None, "not an integer");
        assert_eq!(encode(&["1".to_owned()], &[]), None, "a kind per value");
        for text in ["0", "0.00", "-0.5", "123456789012345678901234567890.1"] {
            let hex = encode(&[text.to_owned()], &[Decimal]).unwrap();
            assert_eq!(chunk_key(&hex), Some(vec![text.to_owned()]), "{text} round trip");
        }
    }

    /// Timestamps, dates and booleans, recorded with `-Duser.timezone=UTC`: (kinds, the text
    /// sluice reads from Postgres, the text it reads back from Debezium's form, Debezium's hex).
    const RECORDED_MORE: &[(&[KeyKind], &[&str], &[&str], &str)] = &[
        (&[KeyKind::Timestamp], &["2024-01-02 03:04:05.123456"], &["2024-01-02 03:04:05.123456+00"], "aced0005757200135b4c6a6176612e6c616e672e4f626a6563743b90ce589f1073296c020000787000000001737200126a6176612e73716c2e54696d657374616d702618d5c80153bf650200014900056e616e6f737872000e6a6176612e7574696c2e44617465686a81014b597419030000787077080000018cc820d88878075bca00"),
        (&[KeyKind::Timestamp], &["1969-12-31 23:59:59.5"], &["1969-12-31 23:59:59.500000+00"], "aced0005757200135b4c6a6176612e6c616e672e4f626a6563743b90ce589f1073296c020000787000000001737200126a6176612e73716c2e54696d657374616d702618d5c80153bf650200014900056e616e6f737872000e6a6176612e7574696c2e44617465686a81014b59741903000078707708fffffffffffffc18781dcd6500"),
        (&[KeyKind::Timestamp], &["2024-01-02 03:04:05"], &["2024-01-02 03:04:05.000000+00"], "aced0005757200135b4c6a6176612e6c616e672e4f626a6563743b90ce589f1073296c020000787000000001737200126a6176612e73716c2e54696d657374616d702618d5c80153bf650200014900056e616e6f737872000e6a6176612e7574696c2e44617465686a81014b597419030000787077080000018cc820d8887800000000"),
        (&[KeyKind::TimestampTz], &["2024-01-02 04:04:05.123456+01"], &["2024-01-02 03:04:05.123456+00"], "aced0005757200135b4c6a6176612e6c616e672e4f626a6563743b90ce589f1073296c020000787000000001737200126a6176612e73716c2e54696d657374616d702618d5c80153bf650200014900056e616e6f737872000e6a6176612e7574696c2e44617465686a81014b597419030000787077080000018cc820d88878075bca00"),
        (&[KeyKind::Date], &["2024-01-02"], &["2024-01-02"], "aced0005757200135b4c6a6176612e6c616e672e4f626a6563743b90ce589f1073296c0200007870000000017372000d6a6176612e73716c2e4461746514fa46683f3566970200007872000e6a6176612e7574696c2e44617465686a81014b597419030000787077080000018cc778500078"),
        (&[KeyKind::Date], &["1960-07-09"], &["1960-07-09"], "aced0005757200135b4c6a6176612e6c616e672e4f626a6563743b90ce589f1073296c0200007870000000017372000d6a6176612e73716c2e4461746514fa46683f3566970200007872000e6a6176612e7574696c2e44617465686a81014b59741903000078707708ffffffba56197c0078"),
        (&[KeyKind::Boolean], &["t"], &["true"], "aced0005757200135b4c6a6176612e6c616e672e4f626a6563743b90ce589f1073296c020000787000000001737200116a6176612e6c616e672e426f6f6c65616ecd207280d59cfaee0200015a000576616c7565787001"),
        (&[KeyKind::Integer, KeyKind::Timestamp], &["7", "2000-02-29 12:00:00.000001"], &["7", "2000-02-29 12:00:00.000001+00"], "aced0005757200135b4c6a6176612e6c616e672e4f626a6563743b90ce589f1073296c020000787000000002737200116a6176612e6c616e672e496e746567657212e2a0a4f781873802000149000576616c7565787200106a6176612e6c616e672e4e756d62657286ac951d0b94e08b020000787000000007737200126a6176612e73716c2e54696d657374616d702618d5c80153bf650200014900056e616e6f737872000e6a6176612e7574696c2e44617465686a81014b59741903000078707708000000dd9d3a0e0078000003e8"),
    ];

    #[test]
    fn timestamps_dates_and_booleans_both_ways() {
        for (kinds, ours, read_back, hex) in RECORDED_MORE {
            let ours: Vec<String> = ours.iter().map(|s| (*s).to_owned()).collect();
            assert_eq!(encode(&ours, kinds).as_deref(), Some(*hex), "{ours:?}");
            let back: Vec<String> = read_back.iter().map(|s| (*s).to_owned()).collect();
            assert_eq!(chunk_key(hex), Some(back.clone()), "{hex}");
            // What is read back writes the same bytes again.
            assert_eq!(encode(&back, kinds).as_deref(), Some(*hex), "{back:?}");
        }
        for (kind, text) in [
            (KeyKind::Timestamp, "infinity"),
            (KeyKind::Timestamp, "0044-03-15 12:00:00 BC"),
            (KeyKind::Date, "-infinity"),
            (KeyKind::Boolean, "yes"),
        ] {
            assert_eq!(encode(&[text.to_owned()], &[kind]), None, "{text} stays in sluice's form");
        }
    }

    #[test]
    fn refuses_what_it_cannot_read() {
        assert!(!is_debezium_form("[\"5\"]"));
        assert!(!is_debezium_form("[\"aéé\", \"x\"]"), "sluice's JSON form with a character across byte 8");
        assert_eq!(chunk_key("aced0005"), None, "cut short");
        assert_eq!(chunk_key("aced00057"), None, "odd length");
        let (_, five) = RECORDED[0];
        assert_eq!(chunk_key(&five[..five.len() - 2]), None, "a value cut short");
        assert_eq!(chunk_key(&five.replace("496e7465676572", "496e7465676571")), None, "an unknown class (java.lang.Integeq)");
    }

    #[test]
    fn scales_decimals() {
        assert_eq!(with_scale("1250", 2).as_deref(), Some("12.50"));
        assert_eq!(with_scale("-5", 3).as_deref(), Some("-0.005"));
        assert_eq!(with_scale("7", -2).as_deref(), Some("700"));
        assert_eq!(with_scale("0", 0).as_deref(), Some("0"));
        assert_eq!(with_scale("1", 16_383).map(|s| s.len()), Some(16_385));
        assert_eq!(with_scale("1", 16_384), None);
        assert_eq!(with_scale("1", -131_073), None);
    }

    /// Found by the fuzz target `pg_chunk_key`: Debezium's key of -98765432109876543210.123
    /// with its BigDecimal scale changed from 3 to 196,611 panicked ("Formatting argument out
    /// of range"); a scale no numeric has is refused like any key this reader cannot read.
    #[test]
    fn fuzz_decimal_scale_out_of_range_is_refused() {
        let (_, recorded) = RECORDED[8];
        let scale_3 = "787000000003737200146a6176612e6d6174682e426967496e7465676572";
        assert!(recorded.contains(scale_3));
        for scale in ["00030003", "7fffffff", "80000000", "00004000"] {
            let hex = recorded.replace(scale_3, &scale_3.replacen("00000003", scale, 1));
            assert_eq!(chunk_key(&hex), None, "scale {scale}");
        }
        assert_eq!(chunk_key(&recorded.replace(scale_3, &scale_3.replacen("00000003", "00003fff", 1))).map(|k| k[0].len()), Some(16_386));
    }

    /// Arrays nested 100,000 deep (each element the next array) are refused, not read down
    /// the stack.
    #[test]
    fn deeply_nested_arrays_are_refused_without_exhausting_the_stack() {
        let class: String = "[Ljava.lang.Object;".bytes().map(|b| format!("{b:02x}")).collect();
        let mut hex = format!("aced00057572{:04x}{class}90ce589f1073296c020000787000000001", class.len() / 2);
        for _ in 0..100_000 {
            hex.push_str("7571007e000000000001");
        }
        hex.push_str("70");
        assert_eq!(chunk_key(&hex), None);
        // The same header around one string is a key.
        let flat = format!("aced00057572{:04x}{class}90ce589f1073296c020000787000000001740003612762", class.len() / 2);
        assert_eq!(chunk_key(&flat), Some(vec!["a'b".to_owned()]));
    }
}
