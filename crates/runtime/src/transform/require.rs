//! What a transform requires of the data it is handed (Connect's `Requirements`), and the
//! small operations on structs, schemaless maps and schemas every transform shares.

use std::sync::Mutex;

use sluice_api::{ConnectError, ConnectResult, Field, Schema, SchemaRef, SchemaType, Struct, Value};

/// A data error raised by transform `name`: the record cannot be transformed.
pub(crate) fn data_error(name: &str, message: impl std::fmt::Display) -> ConnectError {
    ConnectError::fatal(format!("{name}: {message}"))
}

/// The Connect type name of a value, for error messages.
pub(crate) fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Boolean(_) => "boolean",
        Value::Int8(_) => "int8",
        Value::Int16(_) => "int16",
        Value::Int32(_) => "int32",
        Value::Int64(_) => "int64",
        Value::Float32(_) => "float32",
        Value::Float64(_) => "float64",
        Value::String(_) => "string",
        Value::Bytes(_) => "bytes",
        Value::Array(_) => "array",
        Value::Map(_) => "map",
        Value::Struct(_) => "struct",
    }
}

/// The type of a schemaless value, as Connect infers it from the Java class.
pub(crate) fn inferred_type(v: &Value) -> Option<SchemaType> {
    Some(match v {
        Value::Null => return None,
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
    })
}

pub(crate) fn require_struct<'a>(v: &'a Value, name: &str, purpose: &str) -> ConnectResult<&'a Struct> {
    match v {
        Value::Struct(s) => Ok(s),
        other => Err(data_error(name, format_args!("only struct values are supported for {purpose}, found {}", kind_of(other)))),
    }
}

pub(crate) fn require_struct_or_null<'a>(v: &'a Value, name: &str, purpose: &str) -> ConnectResult<Option<&'a Struct>> {
    if v.is_null() {
        Ok(None)
    } else {
        require_struct(v, name, purpose).map(Some)
    }
}

pub(crate) fn require_map<'a>(v: &'a Value, name: &str, purpose: &str) -> ConnectResult<&'a Vec<(Value, Value)>> {
    match v {
        Value::Map(m) => Ok(m),
        other => {
            Err(data_error(name, format_args!("only map values are supported without a schema for {purpose}, found {}", kind_of(other))))
        }
    }
}

pub(crate) fn require_map_or_null<'a>(v: &'a Value, name: &str, purpose: &str) -> ConnectResult<Option<&'a Vec<(Value, Value)>>> {
    if v.is_null() {
        Ok(None)
    } else {
        require_map(v, name, purpose).map(Some)
    }
}

pub(crate) fn require_schema<'a>(s: Option<&'a SchemaRef>, name: &str, purpose: &str) -> ConnectResult<&'a SchemaRef> {
    s.ok_or_else(|| data_error(name, format_args!("a schema is required for {purpose}")))
}

/// A field's value, or the field's default when the value is null and `with_default` is set
/// (Connect's `Struct.get` against `getWithoutDefault`).
pub(crate) fn field_value(s: &Struct, field: &Field, with_default: bool) -> Value {
    let v = &s.values()[field.index];
    if v.is_null() && with_default {
        if let Some(d) = &field.schema.default {
            return d.clone();
        }
    }
    v.clone()
}

/// A field's value by name; `None` when the struct has no such field.
pub(crate) fn field_value_by_name(s: &Struct, name: &str, with_default: bool) -> Option<Value> {
    s.schema().field(name).map(|f| field_value(s, f, with_default))
}

/// The entry of a schemaless map whose key is the string `key`.
pub(crate) fn map_get<'a>(m: &'a [(Value, Value)], key: &str) -> Option<&'a Value> {
    m.iter().find(|(k, _)| k.as_str() == Some(key)).map(|(_, v)| v)
}

/// Sets `key` in a schemaless map, replacing an existing entry in place (as `HashMap.put`).
pub(crate) fn map_put(m: &mut Vec<(Value, Value)>, key: &str, value: Value) {
    match m.iter_mut().find(|(k, _)| k.as_str() == Some(key)) {
        Some(entry) => entry.1 = value,
        None => m.push((Value::String(key.to_owned()), value)),
    }
}

pub(crate) fn map_remove(m: &mut Vec<(Value, Value)>, key: &str) -> Option<Value> {
    let i = m.iter().position(|(k, _)| k.as_str() == Some(key))?;
    Some(m.remove(i).1)
}

/// A new schema of `kind` with the name, version, doc and parameters of `source`
/// (Connect's `SchemaUtil.copySchemaBasics`): not optional, no default, no fields.
pub(crate) fn copy_basics(source: &Schema, kind: SchemaType) -> Schema {
    let mut s = Schema::of(kind);
    s.name = source.name.clone();
    s.version = source.version;
    s.doc = source.doc.clone();
    s.parameters = source.parameters.clone();
    if kind == SchemaType::Array && source.kind == SchemaType::Array {
        s.value_schema = source.value_schema.clone();
    }
    s
}

/// Appends a field to a struct schema, numbering it.
pub(crate) fn push_field(s: &mut Schema, name: impl Into<String>, schema: SchemaRef) {
    let index = s.fields.len();
    s.fields.push(Field { name: name.into(), index, schema });
}

/// Remembers the last schema a transform derived, so records that share a schema share the
/// derived one too (Connect keeps a 16-entry LRU; one entry covers the common case of a
/// stream of records with one schema).
#[derive(Default)]
pub(crate) struct SchemaCache {
    last: Mutex<Option<(SchemaRef, SchemaRef)>>,
}

impl SchemaCache {
    pub(crate) fn get_or_build(&self, input: &SchemaRef, build: impl FnOnce() -> ConnectResult<Schema>) -> ConnectResult<SchemaRef> {
        {
            let last = self.last.lock().unwrap_or_else(|e| e.into_inner());
            if let Some((i, o)) = last.as_ref() {
                if std::sync::Arc::ptr_eq(i, input) || **i == **input {
                    return Ok(o.clone());
                }
            }
        }
        let out = build()?.into_ref();
        *self.last.lock().unwrap_or_else(|e| e.into_inner()) = Some((input.clone(), out.clone()));
        Ok(out)
    }
}
