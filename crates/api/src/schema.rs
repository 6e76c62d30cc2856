//! Kafka Connect schemas: the primitive types, array, map and struct, with optionality,
//! defaults, name, version, doc and parameters. Logical types (Decimal, Date, Time,
//! Timestamp) are named schemas over a primitive type, exactly as in Connect.

use std::sync::Arc;

use crate::value::Value;

pub type SchemaRef = Arc<Schema>;

/// Logical type names, as Connect spells them.
pub mod logical {
    pub const DECIMAL: &str = "org.apache.kafka.connect.data.Decimal";
    pub const DECIMAL_SCALE: &str = "scale";
    pub const DATE: &str = "org.apache.kafka.connect.data.Date";
    pub const TIME: &str = "org.apache.kafka.connect.data.Time";
    pub const TIMESTAMP: &str = "org.apache.kafka.connect.data.Timestamp";
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SchemaType {
    Int8,
    Int16,
    Int32,
    Int64,
    Float32,
    Float64,
    Boolean,
    String,
    Bytes,
    Array,
    Map,
    Struct,
}

impl SchemaType {
    /// The lowercase name used by JsonConverter's schema envelope.
    pub fn json_name(self) -> &'static str {
        match self {
            Self::Int8 => "int8",
            Self::Int16 => "int16",
            Self::Int32 => "int32",
            Self::Int64 => "int64",
            Self::Float32 => "float",
            Self::Float64 => "double",
            Self::Boolean => "boolean",
            Self::String => "string",
            Self::Bytes => "bytes",
            Self::Array => "array",
            Self::Map => "map",
            Self::Struct => "struct",
        }
    }

    pub fn from_json_name(name: &str) -> Option<Self> {
        Some(match name {
            "int8" => Self::Int8,
            "int16" => Self::Int16,
            "int32" => Self::Int32,
            "int64" => Self::Int64,
            "float" => Self::Float32,
            "double" => Self::Float64,
            "boolean" => Self::Boolean,
            "string" => Self::String,
            "bytes" => Self::Bytes,
            "array" => Self::Array,
            "map" => Self::Map,
            "struct" => Self::Struct,
            _ => return None,
        })
    }

    pub fn is_primitive(self) -> bool {
        !matches!(self, Self::Array | Self::Map | Self::Struct)
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Field {
    pub name: String,
    pub index: usize,
    pub schema: SchemaRef,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Schema {
    pub kind: SchemaType,
    pub optional: bool,
    pub default: Option<Value>,
    pub name: Option<String>,
    pub version: Option<i32>,
    pub doc: Option<String>,
    /// Ordered key/value parameters (e.g. a Decimal's `scale`).
    pub parameters: Vec<(String, String)>,
    /// Struct fields, in declaration order.
    pub fields: Vec<Field>,
    /// Map key schema.
    pub key_schema: Option<SchemaRef>,
    /// Map value schema or array element schema.
    pub value_schema: Option<SchemaRef>,
}

impl Schema {
    pub fn of(kind: SchemaType) -> Self {
        Self {
            kind,
            optional: false,
            default: None,
            name: None,
            version: None,
            doc: None,
            parameters: Vec::new(),
            fields: Vec::new(),
            key_schema: None,
            value_schema: None,
        }
    }

    pub fn int8() -> Self {
        Self::of(SchemaType::Int8)
    }
    pub fn int16() -> Self {
        Self::of(SchemaType::Int16)
    }
    pub fn int32() -> Self {
        Self::of(SchemaType::Int32)
    }
    pub fn int64() -> Self {
        Self::of(SchemaType::Int64)
    }
    pub fn float32() -> Self {
        Self::of(SchemaType::Float32)
    }
    pub fn float64() -> Self {
        Self::of(SchemaType::Float64)
    }
    pub fn boolean() -> Self {
        Self::of(SchemaType::Boolean)
    }
    pub fn string() -> Self {
        Self::of(SchemaType::String)
    }
    pub fn bytes() -> Self {
        Self::of(SchemaType::Bytes)
    }

    pub fn array(element: SchemaRef) -> Self {
        Self { value_schema: Some(element), ..Self::of(SchemaType::Array) }
    }

    pub fn map(key: SchemaRef, value: SchemaRef) -> Self {
        Self { key_schema: Some(key), value_schema: Some(value), ..Self::of(SchemaType::Map) }
    }

    /// A struct schema with the given `(name, schema)` fields, in order.
    pub fn struct_of<N: Into<String>>(fields: impl IntoIterator<Item = (N, SchemaRef)>) -> Self {
        let fields = fields.into_iter().enumerate().map(|(index, (name, schema))| Field { name: name.into(), index, schema }).collect();
        Self { fields, ..Self::of(SchemaType::Struct) }
    }

    /// Decimal logical type: bytes holding the big-endian two's-complement unscaled value.
    pub fn decimal(scale: i32) -> Self {
        Self::bytes().named(logical::DECIMAL).with_version(1).with_parameter(logical::DECIMAL_SCALE, scale.to_string())
    }

    /// Date logical type: int32 days since the Unix epoch.
    pub fn date() -> Self {
        Self::int32().named(logical::DATE).with_version(1)
    }

    /// Time logical type: int32 milliseconds since midnight.
    pub fn time() -> Self {
        Self::int32().named(logical::TIME).with_version(1)
    }

    /// Timestamp logical type: int64 milliseconds since the Unix epoch.
    pub fn timestamp() -> Self {
        Self::int64().named(logical::TIMESTAMP).with_version(1)
    }

    pub fn optional(mut self) -> Self {
        self.optional = true;
        self
    }

    pub fn named(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    pub fn with_version(mut self, version: i32) -> Self {
        self.version = Some(version);
        self
    }

    pub fn with_doc(mut self, doc: impl Into<String>) -> Self {
        self.doc = Some(doc.into());
        self
    }

    pub fn with_default(mut self, default: Value) -> Self {
        self.default = Some(default);
        self
    }

    pub fn with_parameter(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.parameters.push((key.into(), value.into()));
        self
    }

    pub fn parameter(&self, key: &str) -> Option<&str> {
        self.parameters.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }

    pub fn field(&self, name: &str) -> Option<&Field> {
        self.fields.iter().find(|f| f.name == name)
    }

    pub fn into_ref(self) -> SchemaRef {
        Arc::new(self)
    }

    /// The Decimal scale of this schema, when it is a Decimal.
    pub fn decimal_scale(&self) -> Option<i32> {
        if self.name.as_deref() == Some(logical::DECIMAL) {
            self.parameter(logical::DECIMAL_SCALE).and_then(|s| s.parse().ok())
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn struct_fields_keep_their_order_and_index() {
        let s = Schema::struct_of([("id", Schema::int64().into_ref()), ("name", Schema::string().optional().into_ref())]);
        assert_eq!(s.fields[1].name, "name");
        assert_eq!(s.fields[1].index, 1);
        assert!(s.field("name").unwrap().schema.optional);
        assert!(s.field("nope").is_none());
    }

    #[test]
    fn decimal_carries_its_scale() {
        assert_eq!(Schema::decimal(3).decimal_scale(), Some(3));
        assert_eq!(Schema::bytes().decimal_scale(), None);
        assert_eq!(SchemaType::from_json_name("double"), Some(SchemaType::Float64));
        assert_eq!(SchemaType::Float32.json_name(), "float");
    }
}
