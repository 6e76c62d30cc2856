//! The fixed-width converters in `org.apache.kafka.connect.converters`: `LongConverter`,
//! `IntegerConverter`, `ShortConverter`, `FloatConverter`, `DoubleConverter` and
//! `BooleanConverter`.
//!
//! Bytes are Kafka's serializers': big-endian two's complement for integers, big-endian IEEE
//! 754 for floats (a double's NaN is written as the canonical `7FF8000000000000`, as
//! `Double.doubleToLongBits` does; a float's bits are written raw), one byte `00`/`01` for a
//! boolean. Reading gives the optional schema of the type. The number converters ignore the
//! schema and need the value of exactly their type, as Kafka's cast does; BooleanConverter
//! also refuses a non-boolean schema.

use sluice_api::{ConfigDef, ConnectError, ConnectResult, Props, Schema, SchemaRef, SchemaType, Value};

use super::{converter_type_key, type_name, value_type_name, with_type, Converter, ConverterType, HeaderConverter};

pub const LONG_CLASS: &str = "org.apache.kafka.connect.converters.LongConverter";
pub const INTEGER_CLASS: &str = "org.apache.kafka.connect.converters.IntegerConverter";
pub const SHORT_CLASS: &str = "org.apache.kafka.connect.converters.ShortConverter";
pub const FLOAT_CLASS: &str = "org.apache.kafka.connect.converters.FloatConverter";
pub const DOUBLE_CLASS: &str = "org.apache.kafka.connect.converters.DoubleConverter";
pub const BOOLEAN_CLASS: &str = "org.apache.kafka.connect.converters.BooleanConverter";

/// Which number a [`NumberConverter`] handles.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NumberKind {
    Long,
    Integer,
    Short,
    Float,
    Double,
}

impl NumberKind {
    pub const fn class(self) -> &'static str {
        match self {
            NumberKind::Long => LONG_CLASS,
            NumberKind::Integer => INTEGER_CLASS,
            NumberKind::Short => SHORT_CLASS,
            NumberKind::Float => FLOAT_CLASS,
            NumberKind::Double => DOUBLE_CLASS,
        }
    }

    pub(crate) const fn aliases(self) -> &'static [&'static str] {
        match self {
            NumberKind::Long => &["LongConverter", "Long"],
            NumberKind::Integer => &["IntegerConverter", "Integer"],
            NumberKind::Short => &["ShortConverter", "Short"],
            NumberKind::Float => &["FloatConverter", "Float"],
            NumberKind::Double => &["DoubleConverter", "Double"],
        }
    }

    pub(crate) const fn header_aliases(self) -> &'static [&'static str] {
        match self {
            NumberKind::Long => &["LongConverter"],
            NumberKind::Integer => &["IntegerConverter"],
            NumberKind::Short => &["ShortConverter"],
            NumberKind::Float => &["FloatConverter"],
            NumberKind::Double => &["DoubleConverter"],
        }
    }

    /// Kafka's display name for the type, used in messages.
    fn type_name(self) -> &'static str {
        match self {
            NumberKind::Long => "long",
            NumberKind::Integer => "integer",
            NumberKind::Short => "short",
            NumberKind::Float => "float",
            NumberKind::Double => "double",
        }
    }

    fn schema_type(self) -> SchemaType {
        match self {
            NumberKind::Long => SchemaType::Int64,
            NumberKind::Integer => SchemaType::Int32,
            NumberKind::Short => SchemaType::Int16,
            NumberKind::Float => SchemaType::Float32,
            NumberKind::Double => SchemaType::Float64,
        }
    }

    fn width(self) -> usize {
        match self {
            NumberKind::Long | NumberKind::Double => 8,
            NumberKind::Integer | NumberKind::Float => 4,
            NumberKind::Short => 2,
        }
    }

    /// The deserializer name in Kafka's size message (the float and double ones say just
    /// "Deserializer").
    fn deserializer(self) -> &'static str {
        match self {
            NumberKind::Long => "LongDeserializer",
            NumberKind::Integer => "IntegerDeserializer",
            NumberKind::Short => "ShortDeserializer",
            NumberKind::Float | NumberKind::Double => "Deserializer",
        }
    }
}

/// Kafka's `LongConverter`, `IntegerConverter`, `ShortConverter`, `FloatConverter` and
/// `DoubleConverter`.
#[derive(Debug, Clone)]
pub struct NumberConverter {
    kind: NumberKind,
    schema: SchemaRef,
}

impl NumberConverter {
    pub fn new(kind: NumberKind) -> Self {
        Self { kind, schema: Schema::of(kind.schema_type()).optional().into_ref() }
    }

    pub fn long() -> Self {
        Self::new(NumberKind::Long)
    }

    pub fn integer() -> Self {
        Self::new(NumberKind::Integer)
    }

    pub fn short() -> Self {
        Self::new(NumberKind::Short)
    }

    pub fn float() -> Self {
        Self::new(NumberKind::Float)
    }

    pub fn double() -> Self {
        Self::new(NumberKind::Double)
    }

    pub fn kind(&self) -> NumberKind {
        self.kind
    }

    pub fn config_def() -> ConfigDef {
        ConfigDef::new().define(converter_type_key())
    }

    pub fn from_props(kind: NumberKind, props: &Props, converter_type: ConverterType) -> ConnectResult<Self> {
        Self::config_def().parse(&with_type(props, converter_type))?;
        Ok(Self::new(kind))
    }

    fn write(&self, value: &Value) -> ConnectResult<Option<Vec<u8>>> {
        let bytes = match (self.kind, value) {
            (_, Value::Null) => return Ok(None),
            (NumberKind::Long, Value::Int64(v)) => v.to_be_bytes().to_vec(),
            (NumberKind::Integer, Value::Int32(v)) => v.to_be_bytes().to_vec(),
            (NumberKind::Short, Value::Int16(v)) => v.to_be_bytes().to_vec(),
            (NumberKind::Float, Value::Float32(v)) => v.to_bits().to_be_bytes().to_vec(),
            (NumberKind::Double, Value::Float64(v)) => {
                let bits = if v.is_nan() { 0x7FF8_0000_0000_0000 } else { v.to_bits() };
                bits.to_be_bytes().to_vec()
            }
            (kind, other) => {
                return Err(ConnectError::fatal(format!("Failed to serialize to {} (was {})", kind.type_name(), value_type_name(other))));
            }
        };
        Ok(Some(bytes))
    }

    fn read(&self, bytes: Option<&[u8]>) -> ConnectResult<(Option<SchemaRef>, Value)> {
        let Some(bytes) = bytes else {
            return Ok((Some(self.schema.clone()), Value::Null));
        };
        if bytes.len() != self.kind.width() {
            return Err(ConnectError::fatal(format!(
                "Failed to deserialize {}: Size of data received by {} is not {} (got {} bytes)",
                self.kind.type_name(),
                self.kind.deserializer(),
                self.kind.width(),
                bytes.len()
            )));
        }
        let mut buf = [0u8; 8];
        buf[..bytes.len()].copy_from_slice(bytes);
        let value = match self.kind {
            NumberKind::Long => Value::Int64(i64::from_be_bytes(buf)),
            NumberKind::Integer => Value::Int32(i32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]])),
            NumberKind::Short => Value::Int16(i16::from_be_bytes([buf[0], buf[1]])),
            NumberKind::Float => Value::Float32(f32::from_bits(u32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]))),
            NumberKind::Double => Value::Float64(f64::from_bits(u64::from_be_bytes(buf))),
        };
        Ok((Some(self.schema.clone()), value))
    }
}

impl Converter for NumberConverter {
    fn from_connect(&self, _topic: &str, _schema: Option<&SchemaRef>, value: &Value) -> ConnectResult<Option<Vec<u8>>> {
        self.write(value)
    }

    fn to_connect(&self, _topic: &str, bytes: Option<&[u8]>) -> ConnectResult<(Option<SchemaRef>, Value)> {
        self.read(bytes)
    }
}

impl HeaderConverter for NumberConverter {
    fn from_connect_header(&self, _topic: &str, _key: &str, _schema: Option<&SchemaRef>, value: &Value) -> ConnectResult<Option<Vec<u8>>> {
        self.write(value)
    }

    fn to_connect_header(&self, _topic: &str, _key: &str, bytes: Option<&[u8]>) -> ConnectResult<(Option<SchemaRef>, Value)> {
        self.read(bytes)
    }
}

/// Kafka's `BooleanConverter`: one byte, `01` for true and `00` for false.
#[derive(Debug, Clone)]
pub struct BooleanConverter {
    schema: SchemaRef,
}

impl Default for BooleanConverter {
    fn default() -> Self {
        Self { schema: Schema::boolean().optional().into_ref() }
    }
}

impl BooleanConverter {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn config_def() -> ConfigDef {
        ConfigDef::new().define(converter_type_key())
    }

    pub fn from_props(props: &Props, converter_type: ConverterType) -> ConnectResult<Self> {
        Self::config_def().parse(&with_type(props, converter_type))?;
        Ok(Self::new())
    }

    fn write(&self, schema: Option<&SchemaRef>, value: &Value) -> ConnectResult<Option<Vec<u8>>> {
        if let Some(s) = schema.filter(|s| s.kind != SchemaType::Boolean) {
            return Err(ConnectError::fatal(format!("Invalid schema type for BooleanConverter: {}", type_name(s.kind))));
        }
        match value {
            Value::Null => Ok(None),
            Value::Boolean(b) => Ok(Some(vec![u8::from(*b)])),
            other => {
                Err(ConnectError::fatal(format!("BooleanConverter is not compatible with objects of type {}", value_type_name(other))))
            }
        }
    }

    fn read(&self, bytes: Option<&[u8]>) -> ConnectResult<(Option<SchemaRef>, Value)> {
        let value = match bytes {
            None => Value::Null,
            Some([0]) => Value::Boolean(false),
            Some([1]) => Value::Boolean(true),
            Some([b]) => {
                return Err(ConnectError::fatal(format!(
                    "Failed to deserialize boolean: Unexpected byte received by BooleanDeserializer: {}",
                    *b as i8
                )))
            }
            Some(other) => {
                return Err(ConnectError::fatal(format!(
                    "Failed to deserialize boolean: Size of data received by BooleanDeserializer is not 1 (got {} bytes)",
                    other.len()
                )))
            }
        };
        Ok((Some(self.schema.clone()), value))
    }
}

impl Converter for BooleanConverter {
    fn from_connect(&self, _topic: &str, schema: Option<&SchemaRef>, value: &Value) -> ConnectResult<Option<Vec<u8>>> {
        self.write(schema, value)
    }

    fn to_connect(&self, _topic: &str, bytes: Option<&[u8]>) -> ConnectResult<(Option<SchemaRef>, Value)> {
        self.read(bytes)
    }
}

impl HeaderConverter for BooleanConverter {
    fn from_connect_header(&self, _topic: &str, _key: &str, schema: Option<&SchemaRef>, value: &Value) -> ConnectResult<Option<Vec<u8>>> {
        self.write(schema, value)
    }

    fn to_connect_header(&self, _topic: &str, _key: &str, bytes: Option<&[u8]>) -> ConnectResult<(Option<SchemaRef>, Value)> {
        self.read(bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(c: &dyn Converter, v: Value) -> Vec<u8> {
        c.from_connect("t", None, &v).unwrap().unwrap()
    }

    /// Byte vectors as Kafka's serializers produce them (e.g. `LongSerializer` writes the
    /// eight bytes high to low; the values are those of Kafka's `*ConverterTest` classes).
    #[test]
    fn number_vectors() {
        let cases: Vec<(NumberConverter, Value, Vec<u8>)> = vec![
            (NumberConverter::long(), Value::Int64(1), vec![0, 0, 0, 0, 0, 0, 0, 1]),
            (NumberConverter::long(), Value::Int64(-1), vec![0xFF; 8]),
            (NumberConverter::long(), Value::Int64(i64::MIN), vec![0x80, 0, 0, 0, 0, 0, 0, 0]),
            (NumberConverter::long(), Value::Int64(0x0102_0304_0506_0708), vec![1, 2, 3, 4, 5, 6, 7, 8]),
            (NumberConverter::integer(), Value::Int32(-2), vec![0xFF, 0xFF, 0xFF, 0xFE]),
            (NumberConverter::integer(), Value::Int32(0x0A0B_0C0D), vec![0x0A, 0x0B, 0x0C, 0x0D]),
            (NumberConverter::short(), Value::Int16(258), vec![1, 2]),
            (NumberConverter::short(), Value::Int16(i16::MIN), vec![0x80, 0]),
            (NumberConverter::float(), Value::Float32(1.0), vec![0x3F, 0x80, 0, 0]),
            (NumberConverter::float(), Value::Float32(-2.5), vec![0xC0, 0x20, 0, 0]),
            (NumberConverter::double(), Value::Float64(1.0), vec![0x3F, 0xF0, 0, 0, 0, 0, 0, 0]),
            (NumberConverter::double(), Value::Float64(0.1), vec![0x3F, 0xB9, 0x99, 0x99, 0x99, 0x99, 0x99, 0x9A]),
            (NumberConverter::double(), Value::Float64(f64::from_bits(0x7FF0_0000_0000_0001)), vec![0x7F, 0xF8, 0, 0, 0, 0, 0, 0]),
        ];
        for (c, value, bytes) in cases {
            assert_eq!(write(&c, value.clone()), bytes, "{value:?}");
            let (schema, back) = c.to_connect("t", Some(&bytes)).unwrap();
            assert!(schema.as_ref().is_some_and(|s| s.optional && s.kind == c.kind.schema_type()));
            if let Value::Float64(f) = value {
                if f.is_nan() {
                    assert!(matches!(back, Value::Float64(b) if b.is_nan()));
                    continue;
                }
            }
            assert_eq!(back, value);
        }
    }

    #[test]
    fn nulls_and_errors() {
        let c = NumberConverter::long();
        assert_eq!(c.from_connect("t", None, &Value::Null).unwrap(), None);
        assert_eq!(c.to_connect("t", None).unwrap().1, Value::Null);
        let err = c.from_connect("t", None, &Value::Int32(1)).unwrap_err();
        assert_eq!(err.to_string(), "Failed to serialize to long (was INT32)");
        let err = c.to_connect("t", Some(&[1, 2, 3])).unwrap_err();
        assert_eq!(err.to_string(), "Failed to deserialize long: Size of data received by LongDeserializer is not 8 (got 3 bytes)");
        let err = NumberConverter::float().to_connect("t", Some(&[])).unwrap_err();
        assert_eq!(err.to_string(), "Failed to deserialize float: Size of data received by Deserializer is not 4 (got 0 bytes)");
    }

    #[test]
    fn boolean_vectors_and_errors() {
        let c = BooleanConverter::new();
        assert_eq!(write(&c, Value::Boolean(true)), vec![1]);
        assert_eq!(write(&c, Value::Boolean(false)), vec![0]);
        assert_eq!(c.to_connect("t", Some(&[1])).unwrap().1, Value::Boolean(true));
        assert_eq!(c.to_connect("t", Some(&[0])).unwrap(), (Some(Schema::boolean().optional().into_ref()), Value::Boolean(false)));
        assert_eq!(c.from_connect("t", None, &Value::Null).unwrap(), None);
        let err = c.to_connect("t", Some(&[0xFE])).unwrap_err();
        assert_eq!(err.to_string(), "Failed to deserialize boolean: Unexpected byte received by BooleanDeserializer: -2");
        let err = c.to_connect("t", Some(&[0, 1])).unwrap_err();
        assert_eq!(err.to_string(), "Failed to deserialize boolean: Size of data received by BooleanDeserializer is not 1 (got 2 bytes)");
        let err = c.from_connect("t", Some(&Schema::int32().into_ref()), &Value::Int32(1)).unwrap_err();
        assert_eq!(err.to_string(), "Invalid schema type for BooleanConverter: INT32");
        let err = c.from_connect("t", None, &Value::from("true")).unwrap_err();
        assert_eq!(err.to_string(), "BooleanConverter is not compatible with objects of type STRING");
    }
}
