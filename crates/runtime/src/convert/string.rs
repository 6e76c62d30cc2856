//! `org.apache.kafka.connect.storage.StringConverter`: text in a character set
//! (`converter.encoding`, UTF-8 by default).
//!
//! Reading always gives an optional string schema, also for a null record. Writing a
//! non-string value writes its Java `toString()` ([`java_text::java_to_string`]): numbers and
//! booleans as Java prints them, Decimal as `BigDecimal`, Date/Time/Timestamp as
//! `java.util.Date` in UTC, `[a, b]`, `{k=v}`, `Struct{a=1}`. Bytes are written as base64,
//! where a Java worker writes an identity hash such as `[B@1b6d3586`.
//!
//! Encodings: UTF-8, US-ASCII, ISO-8859-1, UTF-16 (big-endian with a byte-order mark when
//! writing; the mark picks the order when reading), UTF-16BE and UTF-16LE. As Java does,
//! characters an encoding cannot hold are written as `?` and undecodable bytes read as U+FFFD.

use sluice_api::{ConfigDef, ConfigKey, ConfigType, ConnectError, ConnectResult, Importance, Props, Schema, SchemaRef, Value};

use super::{converter_type_key, with_type, Converter, ConverterType, HeaderConverter};
use sluice_api::text as java_text;

pub const CLASS: &str = "org.apache.kafka.connect.storage.StringConverter";
pub const ENCODING_CONFIG: &str = "converter.encoding";
pub const ENCODING_DEFAULT: &str = "UTF-8";

/// A character set StringConverter can use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Encoding {
    #[default]
    Utf8,
    Ascii,
    Latin1,
    /// Big-endian with a byte-order mark when writing; honours a mark when reading.
    Utf16,
    Utf16Be,
    Utf16Le,
}

impl Encoding {
    /// Java charset names and aliases, case-insensitive.
    pub fn from_name(name: &str) -> Option<Self> {
        let n = name.trim().to_ascii_uppercase().replace('_', "-");
        Some(match n.as_str() {
            "UTF-8" | "UTF8" => Encoding::Utf8,
            "US-ASCII" | "ASCII" => Encoding::Ascii,
            "ISO-8859-1" | "ISO8859-1" | "LATIN1" | "ISO-LATIN-1" => Encoding::Latin1,
            "UTF-16" | "UTF16" => Encoding::Utf16,
            "UTF-16BE" | "UTF16BE" => Encoding::Utf16Be,
            "UTF-16LE" | "UTF16LE" => Encoding::Utf16Le,
            _ => return None,
        })
    }

    pub fn encode(self, s: &str) -> Vec<u8> {
        match self {
            Encoding::Utf8 => s.as_bytes().to_vec(),
            Encoding::Ascii => s.chars().map(|c| if c.is_ascii() { c as u8 } else { b'?' }).collect(),
            Encoding::Latin1 => s.chars().map(|c| u8::try_from(u32::from(c)).unwrap_or(b'?')).collect(),
            Encoding::Utf16 => [0xFE, 0xFF].into_iter().chain(s.encode_utf16().flat_map(u16::to_be_bytes)).collect(),
            Encoding::Utf16Be => s.encode_utf16().flat_map(u16::to_be_bytes).collect(),
            Encoding::Utf16Le => s.encode_utf16().flat_map(u16::to_le_bytes).collect(),
        }
    }

    pub fn decode(self, bytes: &[u8]) -> String {
        match self {
            Encoding::Utf8 => String::from_utf8_lossy(bytes).into_owned(),
            Encoding::Ascii => bytes.iter().map(|&b| if b.is_ascii() { b as char } else { char::REPLACEMENT_CHARACTER }).collect(),
            Encoding::Latin1 => bytes.iter().map(|&b| char::from(b)).collect(),
            Encoding::Utf16 => match bytes {
                [0xFF, 0xFE, rest @ ..] => decode_utf16(rest, u16::from_le_bytes),
                [0xFE, 0xFF, rest @ ..] => decode_utf16(rest, u16::from_be_bytes),
                _ => decode_utf16(bytes, u16::from_be_bytes),
            },
            Encoding::Utf16Be => decode_utf16(bytes, u16::from_be_bytes),
            Encoding::Utf16Le => decode_utf16(bytes, u16::from_le_bytes),
        }
    }
}

fn decode_utf16(bytes: &[u8], unit: fn([u8; 2]) -> u16) -> String {
    let units = bytes.chunks(2).map(|c| if c.len() == 2 { unit([c[0], c[1]]) } else { 0xFFFD });
    char::decode_utf16(units).map(|r| r.unwrap_or(char::REPLACEMENT_CHARACTER)).collect()
}

/// Kafka's StringConverter.
#[derive(Debug, Clone)]
pub struct StringConverter {
    encoding: Encoding,
    schema: SchemaRef,
}

impl Default for StringConverter {
    fn default() -> Self {
        Self::new(Encoding::Utf8)
    }
}

impl StringConverter {
    pub fn new(encoding: Encoding) -> Self {
        Self { encoding, schema: Schema::string().optional().into_ref() }
    }

    pub fn config_def() -> ConfigDef {
        let encoding = ConfigKey::new(
            ENCODING_CONFIG,
            ConfigType::String,
            Importance::High,
            "The name of the Java character set to use for encoding strings as byte arrays.",
        )
        .default_value(ENCODING_DEFAULT);
        ConfigDef::new().define(converter_type_key()).define(ConfigKey { display_name: "Encoding".to_owned(), ..encoding })
    }

    pub fn from_props(props: &Props, converter_type: ConverterType) -> ConnectResult<Self> {
        let parsed = Self::config_def().parse(&with_type(props, converter_type))?;
        let name = parsed.string(ENCODING_CONFIG).unwrap_or_else(|| ENCODING_DEFAULT.to_owned());
        let encoding = Encoding::from_name(&name).ok_or_else(|| {
            ConnectError::config(
                ENCODING_CONFIG,
                format!("unsupported encoding {name:?}; use one of UTF-8, US-ASCII, ISO-8859-1, UTF-16, UTF-16BE, UTF-16LE"),
            )
        })?;
        Ok(Self::new(encoding))
    }

    fn write(&self, schema: Option<&SchemaRef>, value: &Value) -> Option<Vec<u8>> {
        match value {
            Value::Null => None,
            Value::String(s) => Some(self.encoding.encode(s)),
            other => Some(self.encoding.encode(&java_text::java_to_string(schema.map(|s| &**s), other))),
        }
    }

    fn read(&self, bytes: Option<&[u8]>) -> (Option<SchemaRef>, Value) {
        let value = bytes.map_or(Value::Null, |b| Value::String(self.encoding.decode(b)));
        (Some(self.schema.clone()), value)
    }
}

impl Converter for StringConverter {
    fn from_connect(&self, _topic: &str, schema: Option<&SchemaRef>, value: &Value) -> ConnectResult<Option<Vec<u8>>> {
        Ok(self.write(schema, value))
    }

    fn to_connect(&self, _topic: &str, bytes: Option<&[u8]>) -> ConnectResult<(Option<SchemaRef>, Value)> {
        Ok(self.read(bytes))
    }
}

impl HeaderConverter for StringConverter {
    fn from_connect_header(&self, _topic: &str, _key: &str, schema: Option<&SchemaRef>, value: &Value) -> ConnectResult<Option<Vec<u8>>> {
        Ok(self.write(schema, value))
    }

    fn to_connect_header(&self, _topic: &str, _key: &str, bytes: Option<&[u8]>) -> ConnectResult<(Option<SchemaRef>, Value)> {
        Ok(self.read(bytes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_api::Struct;

    fn props(pairs: &[(&str, &str)]) -> Props {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    }

    #[test]
    fn strings_round_trip_in_utf8() {
        let c = StringConverter::default();
        let bytes = c.from_connect("t", None, &Value::from("héllo")).unwrap();
        assert_eq!(bytes.as_deref(), Some("héllo".as_bytes()));
        let (schema, value) = c.to_connect("t", bytes.as_deref()).unwrap();
        assert_eq!(schema.as_deref(), Some(&Schema::string().optional()));
        assert_eq!(value, Value::from("héllo"));
        assert_eq!(c.from_connect("t", None, &Value::Null).unwrap(), None);
        let (schema, value) = c.to_connect("t", None).unwrap();
        assert!(schema.is_some_and(|s| s.optional));
        assert_eq!(value, Value::Null);
    }

    #[test]
    fn other_values_are_written_as_java_prints_them() {
        let c = StringConverter::default();
        let text =
            |schema: Option<SchemaRef>, v: Value| String::from_utf8(c.from_connect("t", schema.as_ref(), &v).unwrap().unwrap()).unwrap();
        assert_eq!(text(None, Value::Int64(42)), "42");
        assert_eq!(text(None, Value::Float64(1.0)), "1.0");
        assert_eq!(text(None, Value::Float32(0.1)), "0.1");
        assert_eq!(text(None, Value::Boolean(true)), "true");
        assert_eq!(text(Some(Schema::decimal(2).into_ref()), Value::Bytes(vec![0, 0x9C])), "1.56");
        assert_eq!(text(Some(Schema::timestamp().into_ref()), Value::Int64(0)), "Thu Jan 01 00:00:00 UTC 1970");
        let schema = Schema::struct_of([("id", Schema::int32().into_ref()), ("name", Schema::string().into_ref())]).into_ref();
        let s = Struct::new(schema.clone()).with("id", 7).with("name", "x");
        assert_eq!(text(Some(schema), Value::Struct(s)), "Struct{id=7,name=x}");
        assert_eq!(text(None, Value::Bytes(b"hi".to_vec())), "aGk=");
    }

    #[test]
    fn encodings() {
        let c = StringConverter::from_props(&props(&[(ENCODING_CONFIG, "ISO-8859-1")]), ConverterType::Value).unwrap();
        assert_eq!(c.from_connect("t", None, &Value::from("é€")).unwrap(), Some(vec![0xE9, b'?']));
        assert_eq!(c.to_connect("t", Some(&[0xE9])).unwrap().1, Value::from("é"));
        let c = StringConverter::from_props(&props(&[(ENCODING_CONFIG, "utf-16")]), ConverterType::Key).unwrap();
        assert_eq!(c.from_connect("t", None, &Value::from("a")).unwrap(), Some(vec![0xFE, 0xFF, 0, b'a']));
        assert_eq!(c.to_connect("t", Some(&[0xFF, 0xFE, b'a', 0])).unwrap().1, Value::from("a"));
        let err = StringConverter::from_props(&props(&[(ENCODING_CONFIG, "EBCDIC")]), ConverterType::Value).unwrap_err();
        assert!(err.to_string().contains("converter.encoding") && err.to_string().contains("EBCDIC"), "{err}");
        let lossy = StringConverter::default().to_connect("t", Some(&[b'a', 0xFF])).unwrap().1;
        assert_eq!(lossy, Value::from("a\u{FFFD}"));
    }
}
