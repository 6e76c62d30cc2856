//! Converters between the Connect data model and the bytes in the log, byte-compatible with
//! Kafka's for the same input. Accepts Kafka's Java class names.
//!
//! - `org.apache.kafka.connect.json.JsonConverter` (alias `Json`): [`json`]
//! - `org.apache.kafka.connect.storage.StringConverter` (`String`): [`string`]
//! - `org.apache.kafka.connect.converters.ByteArrayConverter` (`ByteArray`): [`bytes`]
//! - `org.apache.kafka.connect.converters.{Long,Integer,Short,Float,Double,Boolean}Converter`
//!   (`Long`, …): [`number`]
//! - `org.apache.kafka.connect.storage.SimpleHeaderConverter` (`Simple`), headers only:
//!   [`header`]
//!
//! [`converters`] and [`header_converters`] list them; [`find_converter`] and
//! [`find_header_converter`] look one up by class name or alias. Every plugin's `create`
//! takes the converter's own properties (prefix removed) and sets `converter.type` itself.
//! Conversion errors are [`ConnectError::Fatal`](sluice_api::ConnectError) (Kafka's
//! `DataException`); bad properties are `ConnectError::Config`. What the runtime does with a
//! failed record is its error-handling policy's business.

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

    fn of_key(is_key: bool) -> Self {
        if is_key {
            ConverterType::Key
        } else {
            ConverterType::Value
        }
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

/// The built-in key/value converters, with Kafka's class names and the aliases a Kafka
/// worker derives (simple class name, and that name without `Converter`).
pub fn converters() -> &'static [ConverterPlugin] {
    static CONVERTERS: [ConverterPlugin; 9] = [
        ConverterPlugin {
            class: json::CLASS,
            aliases: &["JsonConverter", "Json"],
            config_def: JsonConverter::config_def,
            create: |props, is_key| Ok(Box::new(JsonConverter::from_props(props, ConverterType::of_key(is_key))?)),
        },
        ConverterPlugin {
            class: string::CLASS,
            aliases: &["StringConverter", "String"],
            config_def: StringConverter::config_def,
            create: |props, is_key| Ok(Box::new(StringConverter::from_props(props, ConverterType::of_key(is_key))?)),
        },
        ConverterPlugin {
            class: bytes::CLASS,
            aliases: &["ByteArrayConverter", "ByteArray"],
            config_def: ByteArrayConverter::config_def,
            create: |props, is_key| Ok(Box::new(ByteArrayConverter::from_props(props, ConverterType::of_key(is_key))?)),
        },
        number_plugin(NumberKind::Long),
        number_plugin(NumberKind::Integer),
        number_plugin(NumberKind::Short),
        number_plugin(NumberKind::Float),
        number_plugin(NumberKind::Double),
        ConverterPlugin {
            class: number::BOOLEAN_CLASS,
            aliases: &["BooleanConverter", "Boolean"],
            config_def: BooleanConverter::config_def,
            create: |props, is_key| Ok(Box::new(BooleanConverter::from_props(props, ConverterType::of_key(is_key))?)),
        },
    ];
    &CONVERTERS
}

const fn number_plugin(kind: NumberKind) -> ConverterPlugin {
    let create: fn(&Props, bool) -> ConnectResult<Box<dyn Converter>> = match kind {
        NumberKind::Long => |p, k| Ok(Box::new(NumberConverter::from_props(NumberKind::Long, p, ConverterType::of_key(k))?)),
        NumberKind::Integer => |p, k| Ok(Box::new(NumberConverter::from_props(NumberKind::Integer, p, ConverterType::of_key(k))?)),
        NumberKind::Short => |p, k| Ok(Box::new(NumberConverter::from_props(NumberKind::Short, p, ConverterType::of_key(k))?)),
        NumberKind::Float => |p, k| Ok(Box::new(NumberConverter::from_props(NumberKind::Float, p, ConverterType::of_key(k))?)),
        NumberKind::Double => |p, k| Ok(Box::new(NumberConverter::from_props(NumberKind::Double, p, ConverterType::of_key(k))?)),
    };
    ConverterPlugin { class: kind.class(), aliases: kind.aliases(), config_def: NumberConverter::config_def, create }
}

/// The built-in header converters. Every Kafka converter is also a header converter; only
/// SimpleHeaderConverter gets the short alias (`Simple`), because Kafka prunes the
/// `HeaderConverter` suffix.
pub fn header_converters() -> &'static [HeaderConverterPlugin] {
    static HEADER_CONVERTERS: [HeaderConverterPlugin; 10] = [
        HeaderConverterPlugin {
            class: header::CLASS,
            aliases: &["SimpleHeaderConverter", "Simple"],
            config_def: SimpleHeaderConverter::config_def,
            create: |_| Ok(Box::new(SimpleHeaderConverter::new())),
        },
        HeaderConverterPlugin {
            class: json::CLASS,
            aliases: &["JsonConverter"],
            config_def: JsonConverter::config_def,
            create: |props| Ok(Box::new(JsonConverter::from_props(props, ConverterType::Header)?)),
        },
        HeaderConverterPlugin {
            class: string::CLASS,
            aliases: &["StringConverter"],
            config_def: StringConverter::config_def,
            create: |props| Ok(Box::new(StringConverter::from_props(props, ConverterType::Header)?)),
        },
        HeaderConverterPlugin {
            class: bytes::CLASS,
            aliases: &["ByteArrayConverter"],
            config_def: ByteArrayConverter::config_def,
            create: |props| Ok(Box::new(ByteArrayConverter::from_props(props, ConverterType::Header)?)),
        },
        number_header_plugin(NumberKind::Long),
        number_header_plugin(NumberKind::Integer),
        number_header_plugin(NumberKind::Short),
        number_header_plugin(NumberKind::Float),
        number_header_plugin(NumberKind::Double),
        HeaderConverterPlugin {
            class: number::BOOLEAN_CLASS,
            aliases: &["BooleanConverter"],
            config_def: BooleanConverter::config_def,
            create: |props| Ok(Box::new(BooleanConverter::from_props(props, ConverterType::Header)?)),
        },
    ];
    &HEADER_CONVERTERS
}

const fn number_header_plugin(kind: NumberKind) -> HeaderConverterPlugin {
    let create: fn(&Props) -> ConnectResult<Box<dyn HeaderConverter>> = match kind {
        NumberKind::Long => |p| Ok(Box::new(NumberConverter::from_props(NumberKind::Long, p, ConverterType::Header)?)),
        NumberKind::Integer => |p| Ok(Box::new(NumberConverter::from_props(NumberKind::Integer, p, ConverterType::Header)?)),
        NumberKind::Short => |p| Ok(Box::new(NumberConverter::from_props(NumberKind::Short, p, ConverterType::Header)?)),
        NumberKind::Float => |p| Ok(Box::new(NumberConverter::from_props(NumberKind::Float, p, ConverterType::Header)?)),
        NumberKind::Double => |p| Ok(Box::new(NumberConverter::from_props(NumberKind::Double, p, ConverterType::Header)?)),
    };
    HeaderConverterPlugin { class: kind.class(), aliases: kind.header_aliases(), config_def: NumberConverter::config_def, create }
}

/// The converter with this class name or alias (case-sensitive, as Java class names are).
pub fn find_converter(name: &str) -> Option<&'static ConverterPlugin> {
    let name = name.trim();
    converters().iter().find(|p| p.class == name || p.aliases.contains(&name))
}

/// The header converter with this class name or alias.
pub fn find_header_converter(name: &str) -> Option<&'static HeaderConverterPlugin> {
    let name = name.trim();
    header_converters().iter().find(|p| p.class == name || p.aliases.contains(&name))
}

#[cfg(test)]
mod tests;
