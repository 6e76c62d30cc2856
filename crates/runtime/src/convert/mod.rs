//! Converters between the Connect data model and the bytes in the log, byte-compatible with
//! Kafka's for the same input. Accepts Kafka's Java class names.

use sluice_api::{ConfigDef, ConnectResult, Props, SchemaRef, Value};

/// Key or value converter (Connect's `Converter`).
pub trait Converter: Send + Sync {
    /// Serialises a value; `None` is a null record (a tombstone).
    fn from_connect(&self, topic: &str, schema: Option<&SchemaRef>, value: &Value) -> ConnectResult<Option<Vec<u8>>>;

    /// Deserialises bytes (`None` for a null record) into an optional schema and a value.
    fn to_connect(&self, topic: &str, bytes: Option<&[u8]>) -> ConnectResult<(Option<SchemaRef>, Value)>;
}

/// Header converter (Connect's `HeaderConverter`).
pub trait HeaderConverter: Send + Sync {
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

// Registry placeholder until the converters land.
pub fn converters() -> &'static [ConverterPlugin] {
    &[]
}

pub fn header_converters() -> &'static [HeaderConverterPlugin] {
    &[]
}
