//! Converters between the Connect data model and the bytes in the log, byte-compatible with
//! Kafka's for the same input. Accepts Kafka's Java class names.

use sluice_api::{ConfigDef, ConnectResult, Props, SchemaRef, Value};

/// Key or value converter (Connect's `Converter`).
pub trait Converter: Send + Sync {
    /// Serialises a value; `None` is a null record (a tombstone).
    #[allow(clippy::wrong_self_convention)] // Connect's name (`fromConnectData`)
    fn from_connect(&self, topic: &str, schema: Option<&SchemaRef>, value: &Value) -> ConnectResult<Option<Vec<u8>>>;

    /// Deserialises bytes (`None` for a null record) into an optional schema and a value.
    fn to_connect(&self, topic: &str, bytes: Option<&[u8]>) -> ConnectResult<(Option<SchemaRef>, Value)>;
}

/// Header converter (Connect's `HeaderConverter`).
pub trait HeaderConverter: Send + Sync {
    #[allow(clippy::wrong_self_convention)] // Connect's name (`fromConnectHeader`)
    fn from_connect_header(&self, topic: &str, key: &str, schema: Option<&SchemaRef>, value: &Value) -> ConnectResult<Option<Vec<u8>>>;

    fn to_connect_header(&self, topic: &str, key: &str, bytes: Option<&[u8]>) -> ConnectResult<(Option<SchemaRef>, Value)>;
}

/// A converter in the plugin registry.
#[derive(Clone, Copy)]
pub struct ConverterPlugin {
    pub class: &'static str,
    pub aliases: &'static [&'static str],
    pub config_def: fn() -> ConfigDef,
    /// Builds the converter from its own properties (the prefix already removed, e.g.
    /// `schemas.enable` for `value.converter.schemas.enable`).
    pub create: fn(props: &Props, is_key: bool) -> ConnectResult<Box<dyn Converter>>,
}

#[derive(Clone, Copy)]
pub struct HeaderConverterPlugin {
    pub class: &'static str,
    pub aliases: &'static [&'static str],
    pub config_def: fn() -> ConfigDef,
    pub create: fn(props: &Props) -> ConnectResult<Box<dyn HeaderConverter>>,
}

pub mod bytes;
pub mod header;
pub mod json;
pub mod number;
pub mod string;

mod decimal;
mod java_text;

use sluice_api::{ConfigKey, ConfigType, Importance, SchemaType, Validator};

pub use bytes::ByteArrayConverter;
pub use header::SimpleHeaderConverter;
pub use json::{DecimalFormat, JsonConverter, JsonConverterConfig};
pub use number::{BooleanConverter, NumberConverter, NumberKind};
pub use string::StringConverter;

/// How a converter is used (`converter.type`); Kafka's `ConverterType`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ConverterType {
    Key,
    Value,
    Header,
}

impl ConverterType {
    pub fn name(self) -> &'static str {
        match self {
            ConverterType::Key => "key",
            ConverterType::Value => "value",
            ConverterType::Header => "header",
        }
    }

    /// Parses `key`, `value` or `header` (any case).
    pub fn parse(name: &str) -> Option<Self> {
        [ConverterType::Key, ConverterType::Value, ConverterType::Header].into_iter().find(|t| t.name().eq_ignore_ascii_case(name.trim()))
    }
}

/// `converter.type`, defined by every Kafka converter's config.
pub const TYPE_CONFIG: &str = "converter.type";

/// The `converter.type` key as Kafka's `ConverterConfig` defines it: required, one of
/// `key`, `value`, `header`.
pub(crate) fn converter_type_key() -> ConfigKey {
    ConfigKey::new(TYPE_CONFIG, ConfigType::String, Importance::Low, "How this converter will be used.")
        .validator(Validator::one_of(&["key", "value", "header"]))
}

/// The properties with `converter.type` set, as Kafka's `configure(configs, isKey)` and the
/// worker's header converter setup do.
pub(crate) fn with_type(props: &Props, converter_type: ConverterType) -> Props {
    let mut props = props.clone();
    props.insert(TYPE_CONFIG.to_owned(), converter_type.name().to_owned());
    props
}

/// Connect's name for a schema type (`Schema.Type.toString()`), used in error messages.
pub(crate) fn type_name(kind: SchemaType) -> &'static str {
    match kind {
        SchemaType::Int8 => "INT8",
        SchemaType::Int16 => "INT16",
        SchemaType::Int32 => "INT32",
        SchemaType::Int64 => "INT64",
        SchemaType::Float32 => "FLOAT32",
        SchemaType::Float64 => "FLOAT64",
        SchemaType::Boolean => "BOOLEAN",
        SchemaType::String => "STRING",
        SchemaType::Bytes => "BYTES",
        SchemaType::Array => "ARRAY",
        SchemaType::Map => "MAP",
        SchemaType::Struct => "STRUCT",
    }
}

/// The type name of a value, for error messages (`null` for a null).
pub(crate) fn value_type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Boolean(_) => "BOOLEAN",
        Value::Int8(_) => "INT8",
        Value::Int16(_) => "INT16",
        Value::Int32(_) => "INT32",
        Value::Int64(_) => "INT64",
        Value::Float32(_) => "FLOAT32",
        Value::Float64(_) => "FLOAT64",
        Value::String(_) => "STRING",
        Value::Bytes(_) => "BYTES",
        Value::Array(_) => "ARRAY",
        Value::Map(_) => "MAP",
        Value::Struct(_) => "STRUCT",
    }
}
