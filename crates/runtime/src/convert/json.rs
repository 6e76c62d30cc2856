//! `org.apache.kafka.connect.json.JsonConverter`, byte for byte.
//!
//! With `schemas.enable=true` (the default) every key or value is an envelope
//! `{"schema":{…},"payload":…}`; without it, the payload alone. A null value without a schema
//! is a null record (a tombstone). Output is compact JSON with Kafka's member order and
//! Jackson's number and string formatting, so a topic written by sluice reads the same in a
//! Java worker and the other way round.
//!
//! ```text
//! from_connect: (schema, value) --schema.rs--> {"type":…}  --payload.rs--> payload --> bytes
//! to_connect:   bytes --text.rs--> JSON tree --schema.rs--> SchemaRef --payload.rs--> Value
//! ```
//!
//! Where we differ from Kafka, on purpose:
//! - Reading checks types: a JSON string for an int32 field, an integer that does not fit
//!   its type, a fraction for an integer field or a Decimal with more fractional digits than
//!   its scale is an error naming the field. Kafka would read `0`, wrap, truncate or keep the
//!   wrong scale.
//! - `"NaN"`, `"Infinity"` and `"-Infinity"` read back as those doubles (Kafka writes them
//!   but reads them as `0.0`).
//! - Anything after the first JSON value is an error (Jackson ignores trailing content), and
//!   unpadded base64 is accepted.
//! - Empty input reads as a null record, also with schemas enabled (Kafka only allows that
//!   with schemas disabled and otherwise reports a missing envelope).
//! - Without a schema, an integer beyond int64 is an error (Kafka wraps it).

mod cache;
mod payload;
mod schema;
mod text;

#[cfg(test)]
mod golden_tests;
#[cfg(test)]
mod tests;

use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use sluice_api::{ConfigDef, ConfigKey, ConfigType, ConnectError, ConnectResult, Importance, Props, SchemaRef, Validator, Value};

use self::cache::BoundedCache;
use self::text::Node;
use super::{converter_type_key, with_type, Converter, ConverterType, HeaderConverter, TYPE_CONFIG};

pub const CLASS: &str = "org.apache.kafka.connect.json.JsonConverter";

pub const SCHEMAS_ENABLE_CONFIG: &str = "schemas.enable";
pub const SCHEMAS_CACHE_SIZE_CONFIG: &str = "schemas.cache.size";
pub const DECIMAL_FORMAT_CONFIG: &str = "decimal.format";
pub const REPLACE_NULL_WITH_DEFAULT_CONFIG: &str = "replace.null.with.default";

pub const SCHEMAS_ENABLE_DEFAULT: bool = true;
pub const SCHEMAS_CACHE_SIZE_DEFAULT: usize = 1000;
pub const REPLACE_NULL_WITH_DEFAULT_DEFAULT: bool = true;

/// Kafka's message for a document that is not a schema/payload envelope.
pub const ENVELOPE_REQUIRED_MESSAGE: &str =
    "JsonConverter with schemas.enable requires \"schema\" and \"payload\" fields and may not contain \
additional fields. If you are trying to deserialize plain JSON data, set schemas.enable=false in your converter configuration.";

/// Kafka's message for bytes that are not JSON; the parse error is the source.
pub const DESERIALIZATION_FAILED_MESSAGE: &str = "Converting byte[] to Kafka Connect data failed due to serialization error";

/// How Decimal values are written (`decimal.format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DecimalFormat {
    /// Base64 of the unscaled value's two's-complement bytes: `"AJw="` for 1.56.
    #[default]
    Base64,
    /// A JSON number with the scale's digits: `1.56`, `1.5600`.
    Numeric,
}

impl DecimalFormat {
    pub fn name(self) -> &'static str {
        match self {
            DecimalFormat::Base64 => "BASE64",
            DecimalFormat::Numeric => "NUMERIC",
        }
    }
}

/// JsonConverter's configuration, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JsonConverterConfig {
    pub converter_type: ConverterType,
    pub schemas_enable: bool,
    pub schemas_cache_size: usize,
    pub decimal_format: DecimalFormat,
    pub replace_null_with_default: bool,
}

impl Default for JsonConverterConfig {
    fn default() -> Self {
        Self {
            converter_type: ConverterType::Value,
            schemas_enable: SCHEMAS_ENABLE_DEFAULT,
            schemas_cache_size: SCHEMAS_CACHE_SIZE_DEFAULT,
            decimal_format: DecimalFormat::Base64,
            replace_null_with_default: REPLACE_NULL_WITH_DEFAULT_DEFAULT,
        }
    }
}

impl JsonConverterConfig {
    /// The keys JsonConverter accepts, as Kafka's `JsonConverterConfig.configDef()`.
    pub fn config_def() -> ConfigDef {
        ConfigDef::new()
            .define(converter_type_key())
            .define(
                ConfigKey::new(SCHEMAS_ENABLE_CONFIG, ConfigType::Boolean, Importance::High, "Include schemas within each of the serialized values and keys.")
                    .default_value(SCHEMAS_ENABLE_DEFAULT.to_string())
                    .group("Schemas", 0, "Enable Schemas"),
            )
            .define(
                ConfigKey::new(SCHEMAS_CACHE_SIZE_CONFIG, ConfigType::Int, Importance::High, "The maximum number of schemas that can be cached in this converter instance.")
                    .default_value(SCHEMAS_CACHE_SIZE_DEFAULT.to_string())
                    .group("Schemas", 1, "Schema Cache Size"),
            )
            .define(
                ConfigKey::new(
                    DECIMAL_FORMAT_CONFIG,
                    ConfigType::String,
                    Importance::Low,
                    "Controls which format this converter will serialize decimals in. This value is case insensitive and can be either 'BASE64' (default) or 'NUMERIC'",
                )
                .default_value(DecimalFormat::Base64.name())
                .validator(Validator::one_of(&["BASE64", "NUMERIC"]))
                .group("Serialization", 0, "Decimal Format"),
            )
            .define(
                ConfigKey::new(
                    REPLACE_NULL_WITH_DEFAULT_CONFIG,
                    ConfigType::Boolean,
                    Importance::Low,
                    "Whether to replace fields that have a default value and that are null to the default value. When set to true, the default value is used, otherwise null is used.",
                )
                .default_value(REPLACE_NULL_WITH_DEFAULT_DEFAULT.to_string())
                .group("Serialization", 1, "Replace null with default"),
            )
    }

    /// Validates the converter's own properties (prefix already removed). `converter.type`
    /// is required here, as in Kafka; [`JsonConverter::from_props`] fills it in.
    pub fn parse(props: &Props) -> ConnectResult<Self> {
        let parsed = Self::config_def().parse(props)?;
        let converter_type = parsed.string(TYPE_CONFIG).as_deref().and_then(ConverterType::parse).unwrap_or(ConverterType::Value);
        let decimal_format = if parsed.string(DECIMAL_FORMAT_CONFIG).is_some_and(|f| f.eq_ignore_ascii_case("NUMERIC")) {
            DecimalFormat::Numeric
        } else {
            DecimalFormat::Base64
        };
        Ok(Self {
            converter_type,
            schemas_enable: parsed.boolean(SCHEMAS_ENABLE_CONFIG),
            // Kafka's LRU cache rejects a negative size; we treat it as "no cache".
            schemas_cache_size: usize::try_from(parsed.int(SCHEMAS_CACHE_SIZE_CONFIG)).unwrap_or(0),
            decimal_format,
            replace_null_with_default: parsed.boolean(REPLACE_NULL_WITH_DEFAULT_CONFIG),
        })
    }
}

/// What the payload translation needs from the configuration.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Settings {
    pub decimal_format: DecimalFormat,
    pub replace_null_with_default: bool,
}

/// A value that does not fit its schema (Kafka's `DataException`), with the path to it.
#[derive(Debug)]
pub(crate) struct DataError {
    message: String,
    /// Innermost first: `.name` for fields, `[i]` for elements, `["k"]` for map keys.
    path: Vec<String>,
}

impl DataError {
    pub(crate) fn new(message: impl Into<String>) -> Self {
        Self { message: message.into(), path: Vec::new() }
    }

    pub(crate) fn at_field(mut self, name: &str) -> Self {
        self.path.push(format!(".{name}"));
        self
    }

    pub(crate) fn at_index(mut self, index: usize) -> Self {
        self.path.push(format!("[{index}]"));
        self
    }

    pub(crate) fn at_key(mut self, key: &str) -> Self {
        self.path.push(format!("[{key:?}]"));
        self
    }
}

impl fmt::Display for DataError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)?;
        if !self.path.is_empty() {
            let path: String = self.path.iter().rev().map(String::as_str).collect();
            write!(f, " (at {})", path.strip_prefix('.').unwrap_or(&path))?;
        }
        Ok(())
    }
}

impl From<DataError> for ConnectError {
    fn from(e: DataError) -> Self {
        ConnectError::fatal(e.to_string())
    }
}

/// Kafka's JsonConverter. Also a header converter (each header value is a whole document).
pub struct JsonConverter {
    config: JsonConverterConfig,
    settings: Settings,
    /// Schema JSON by schema identity (the `Arc` is kept so its address is not reused).
    written_schemas: BoundedCache<usize, (SchemaRef, Arc<str>)>,
    /// Parsed schemas by their exact JSON bytes.
    read_schemas: BoundedCache<Box<[u8]>, Option<SchemaRef>>,
    /// The JSON bytes and translation of the last envelope schema read. Records of a topic
    /// nearly always repeat the previous record's schema: comparing bytes with it skips
    /// parsing (and hashing) the schema part, usually most of the record.
    last_read: Mutex<Option<LastRead>>,
    /// The length of the last payload written: the next output buffer is sized from it and
    /// the schema text, so it is allocated once instead of grown by doubling (with
    /// schemas, an envelope is ~20 times the 128 bytes a buffer used to start with).
    last_payload_len: AtomicUsize,
}

/// A schema's JSON bytes and their translation (`None`: a schemaless envelope).
type LastRead = (Arc<[u8]>, Option<SchemaRef>);

impl JsonConverter {
    pub fn new(config: JsonConverterConfig) -> Self {
        let settings = Settings { decimal_format: config.decimal_format, replace_null_with_default: config.replace_null_with_default };
        Self {
            written_schemas: BoundedCache::new(config.schemas_cache_size),
            read_schemas: BoundedCache::new(config.schemas_cache_size),
            last_read: Mutex::new(None),
            last_payload_len: AtomicUsize::new(0),
            config,
            settings,
        }
    }

    /// Builds the converter from its properties; `converter_type` overrides any
    /// `converter.type` given, as Kafka's `configure(configs, isKey)` does.
    pub fn from_props(props: &Props, converter_type: ConverterType) -> ConnectResult<Self> {
        Ok(Self::new(JsonConverterConfig::parse(&with_type(props, converter_type))?))
    }

    pub fn config_def() -> ConfigDef {
        JsonConverterConfig::config_def()
    }

    pub fn config(&self) -> &JsonConverterConfig {
        &self.config
    }

    fn schema_json(&self, schema: &SchemaRef) -> Result<Arc<str>, DataError> {
        let key = Arc::as_ptr(schema) as usize;
        if let Some((cached, text)) = self.written_schemas.get(&key) {
            if Arc::ptr_eq(&cached, schema) {
                return Ok(text);
            }
        }
        let mut out = String::new();
        schema::write_schema(&mut out, &self.settings, schema, None)?;
        let text: Arc<str> = out.into();
        self.written_schemas.insert(key, (schema.clone(), text.clone()));
        Ok(text)
    }

    fn read_envelope_schema(&self, raw: &[u8], node: &Node) -> Result<Option<SchemaRef>, DataError> {
        let schema = match self.read_schemas.get(&Box::from(raw)) {
            Some(cached) => cached,
            None => {
                let schema = schema::read_schema(&self.settings, node)?;
                self.read_schemas.insert(Box::from(raw), schema.clone());
                schema
            }
        };
        if self.config.schemas_cache_size > 0 {
            *self.last_read.lock().unwrap_or_else(|e| e.into_inner()) = Some((Arc::from(raw), schema.clone()));
        }
        Ok(schema)
    }

    /// Reads an envelope whose schema is byte for byte the last one read, without parsing
    /// the schema again. `None` when the shape differs in any way (another schema, other
    /// members, malformed input): the full path then reads it (and reports errors).
    fn read_with_last_schema(&self, bytes: &[u8]) -> Option<ConnectResult<(Option<SchemaRef>, Value)>> {
        let (raw, schema) = self.last_read.lock().unwrap_or_else(|e| e.into_inner()).clone()?;
        let body = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
        let start = text::skip_member_prefix(body, 0, b'{', b"\"schema\"")?;
        if !body[start..].starts_with(&raw) {
            return None;
        }
        let tail = text::skip_member_prefix(body, start + raw.len(), b',', b"\"payload\"")?;
        let payload = text::parse_last_member(&body[tail..])?;
        Some(payload::read_value(&self.settings, schema.as_ref(), Some(&payload)).map(|v| (schema, v)).map_err(Into::into))
    }

    fn write(&self, schema: Option<&SchemaRef>, value: &Value) -> Result<Option<Vec<u8>>, DataError> {
        if schema.is_none() && value.is_null() {
            return Ok(None);
        }
        // Room for the payload's usual size plus some slack, so that a slightly longer
        // payload than the last one does not double the buffer.
        let payload_hint = self.last_payload_len.load(Ordering::Relaxed);
        let payload_room = payload_hint + payload_hint / 8 + 64;
        let out = if self.config.schemas_enable {
            let schema_text = schema.map(|s| self.schema_json(s)).transpose()?;
            let schema_text = schema_text.as_deref().unwrap_or("null");
            const OPEN: &str = "{\"schema\":";
            const MIDDLE: &str = ",\"payload\":";
            let mut out = String::with_capacity(OPEN.len() + schema_text.len() + MIDDLE.len() + payload_room + 1);
            out.push_str(OPEN);
            out.push_str(schema_text);
            out.push_str(MIDDLE);
            let start = out.len();
            payload::write_value(&mut out, &self.settings, schema.map(|s| &**s), value)?;
            self.last_payload_len.store(out.len() - start, Ordering::Relaxed);
            out.push('}');
            out
        } else {
            let mut out = String::with_capacity(payload_room);
            payload::write_value(&mut out, &self.settings, schema.map(|s| &**s), value)?;
            self.last_payload_len.store(out.len(), Ordering::Relaxed);
            out
        };
        Ok(Some(out.into_bytes()))
    }

    fn read(&self, bytes: Option<&[u8]>) -> ConnectResult<(Option<SchemaRef>, Value)> {
        let Some(bytes) = bytes else {
            return Ok((None, Value::Null));
        };
        if self.config.schemas_enable {
            if let Some(read) = self.read_with_last_schema(bytes) {
                return read;
            }
        }
        let doc = match text::parse(bytes) {
            Ok(Some(doc)) => doc,
            Ok(None) => return Ok((None, Value::Null)),
            Err(e) => return Err(ConnectError::fatal_from(DESERIALIZATION_FAILED_MESSAGE, e)),
        };
        if !self.config.schemas_enable {
            return Ok((None, payload::read_value(&self.settings, None, Some(&doc.root))?));
        }
        let is_envelope = match &doc.root {
            Node::Object(members) => {
                members.iter().all(|(k, _)| k == "schema" || k == "payload")
                    && members.iter().any(|(k, _)| k == "schema")
                    && members.iter().any(|(k, _)| k == "payload")
            }
            _ => false,
        };
        let (Some(schema_node), Some(span), true) = (doc.root.get("schema"), doc.member_span("schema"), is_envelope) else {
            return Err(ConnectError::fatal(ENVELOPE_REQUIRED_MESSAGE));
        };
        // The document parsed, so its UTF-8 BOM (if any) was skipped; spans index the rest.
        let body = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
        let schema = self.read_envelope_schema(&body[span], schema_node)?;
        let value = payload::read_value(&self.settings, schema.as_ref(), doc.root.get("payload"))?;
        Ok((schema, value))
    }
}

impl Converter for JsonConverter {
    fn from_connect(&self, _topic: &str, schema: Option<&SchemaRef>, value: &Value) -> ConnectResult<Option<Vec<u8>>> {
        Ok(self.write(schema, value)?)
    }

    fn to_connect(&self, _topic: &str, bytes: Option<&[u8]>) -> ConnectResult<(Option<SchemaRef>, Value)> {
        self.read(bytes)
    }
}

impl HeaderConverter for JsonConverter {
    fn from_connect_header(&self, _topic: &str, _key: &str, schema: Option<&SchemaRef>, value: &Value) -> ConnectResult<Option<Vec<u8>>> {
        Ok(self.write(schema, value)?)
    }

    fn to_connect_header(&self, _topic: &str, _key: &str, bytes: Option<&[u8]>) -> ConnectResult<(Option<SchemaRef>, Value)> {
        self.read(bytes)
    }
}
