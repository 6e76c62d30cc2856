//! Connect schemas to and from the `"schema"` half of the JSON envelope.
//!
//! Written members, in Kafka's order (`JsonConverter.asJsonSchema`): `type`; then `items`
//! (array), `keys` and `values` (map) or `fields` (struct); then `optional`, and when set
//! `name`, `version`, `doc`, `parameters`, `default`. A struct field is its schema's object
//! with `field` (the field name) appended last, e.g.
//! `{"type":"int32","optional":false,"field":"id"}`.

use std::sync::Arc;

use sluice_api::{Field, Schema, SchemaRef, SchemaType, Value};

use super::payload::{read_value, write_value};
use super::text::{write_string, Node};
use super::{DataError, Settings};

/// Appends a schema's JSON object; `field` adds the struct field name member.
pub(super) fn write_schema(out: &mut String, settings: &Settings, schema: &Schema, field: Option<&str>) -> Result<(), DataError> {
    out.push_str("{\"type\":");
    write_string(out, schema.kind.json_name());
    match schema.kind {
        SchemaType::Array => {
            out.push_str(",\"items\":");
            write_optional_schema(out, settings, schema.value_schema.as_deref())?;
        }
        SchemaType::Map => {
            out.push_str(",\"keys\":");
            write_optional_schema(out, settings, schema.key_schema.as_deref())?;
            out.push_str(",\"values\":");
            write_optional_schema(out, settings, schema.value_schema.as_deref())?;
        }
        SchemaType::Struct => {
            out.push_str(",\"fields\":[");
            for (i, f) in schema.fields.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_schema(out, settings, &f.schema, Some(&f.name)).map_err(|e| e.at_field(&f.name))?;
            }
            out.push(']');
        }
        _ => {}
    }
    out.push_str(if schema.optional { ",\"optional\":true" } else { ",\"optional\":false" });
    if let Some(name) = &schema.name {
        out.push_str(",\"name\":");
        write_string(out, name);
    }
    if let Some(version) = schema.version {
        out.push_str(",\"version\":");
        out.push_str(&version.to_string());
    }
    if let Some(doc) = &schema.doc {
        out.push_str(",\"doc\":");
        write_string(out, doc);
    }
    if !schema.parameters.is_empty() {
        out.push_str(",\"parameters\":{");
        for (i, (k, v)) in distinct_parameters(&schema.parameters).into_iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            write_string(out, k);
            out.push(':');
            write_string(out, v);
        }
        out.push('}');
    }
    if let Some(default) = schema.default.as_ref().filter(|d| !d.is_null()) {
        out.push_str(",\"default\":");
        write_value(out, settings, Some(schema), default).map_err(|e| DataError::new(format!("Invalid default value: {e}")))?;
    }
    if let Some(name) = field {
        out.push_str(",\"field\":");
        write_string(out, name);
    }
    out.push('}');
    Ok(())
}

/// A missing element, key or value schema is written as `null`, as Jackson writes a null
/// child node.
fn write_optional_schema(out: &mut String, settings: &Settings, schema: Option<&Schema>) -> Result<(), DataError> {
    match schema {
        Some(s) => write_schema(out, settings, s, None),
        None => {
            out.push_str("null");
            Ok(())
        }
    }
}

/// Parameters as a Java `LinkedHashMap` holds them: a repeated key keeps its first position
/// and its last value.
fn distinct_parameters(params: &[(String, String)]) -> Vec<(&str, &str)> {
    let mut out: Vec<(&str, &str)> = Vec::with_capacity(params.len());
    for (k, v) in params {
        match out.iter_mut().find(|(ek, _)| *ek == k.as_str()) {
            Some(entry) => entry.1 = v,
            None => out.push((k, v)),
        }
    }
    out
}

/// Reads the envelope's schema; JSON `null` is no schema.
pub(super) fn read_schema(settings: &Settings, node: &Node) -> Result<Option<SchemaRef>, DataError> {
    if matches!(node, Node::Null) {
        return Ok(None);
    }
    let Some(Node::String(type_name)) = node.get("type") else {
        return Err(DataError::new("Schema must contain 'type' field"));
    };
    let mut schema = match type_name.as_str() {
        "array" => {
            let items = node.get("items").filter(|n| !matches!(n, Node::Null));
            let items = items.ok_or_else(|| DataError::new("Array schema did not specify the element type"))?;
            Schema::array(required_schema(settings, items, "Array schema did not specify the element type")?)
        }
        "map" => {
            let keys = node.get("keys").ok_or_else(|| DataError::new("Map schema did not specify the key type"))?;
            let values = node.get("values").ok_or_else(|| DataError::new("Map schema did not specify the value type"))?;
            Schema::map(
                required_schema(settings, keys, "Map schema did not specify the key type")?,
                required_schema(settings, values, "Map schema did not specify the value type")?,
            )
        }
        "struct" => {
            let Some(Node::Array(fields)) = node.get("fields") else {
                return Err(DataError::new("Struct schema's \"fields\" argument is not an array."));
            };
            let mut out: Vec<Field> = Vec::with_capacity(fields.len());
            for field in fields {
                let Some(Node::String(name)) = field.get("field") else {
                    return Err(DataError::new("Struct schema's field name not specified properly"));
                };
                if out.iter().any(|f| &f.name == name) {
                    return Err(DataError::new(format!("Cannot create field because of field name duplication {name}")));
                }
                let field_schema = read_schema(settings, field).map_err(|e| e.at_field(name))?;
                let field_schema = field_schema.ok_or_else(|| DataError::new("Struct schema's field schema is null"))?;
                out.push(Field { name: name.clone(), index: out.len(), schema: field_schema });
            }
            Schema { fields: out, ..Schema::of(SchemaType::Struct) }
        }
        other => match SchemaType::from_json_name(other).filter(|t| t.is_primitive()) {
            Some(kind) => Schema::of(kind),
            None => return Err(DataError::new(format!("Unknown schema type: {other}"))),
        },
    };

    schema.optional = matches!(node.get("optional"), Some(Node::Bool(true)));
    if let Some(Node::String(name)) = node.get("name") {
        schema.name = Some(name.clone());
    }
    if let Some(Node::Number(text)) = node.get("version") {
        if Node::is_integral_text(text) {
            // Jackson's intValue(): the low 32 bits of the integer.
            schema.version = sluice_api::decimal::DecimalText::parse(text).and_then(|d| d.to_i64()).map(|v| v as i32);
        }
    }
    if let Some(Node::String(doc)) = node.get("doc") {
        schema.doc = Some(doc.clone());
    }
    if let Some(Node::Object(params)) = node.get("parameters") {
        for (k, v) in params {
            let Node::String(v) = v else {
                return Err(DataError::new("Schema parameters must have string values."));
            };
            match schema.parameters.iter_mut().find(|(ek, _)| ek == k) {
                Some(entry) => entry.1 = v.clone(),
                None => schema.parameters.push((k.clone(), v.clone())),
            }
        }
    }
    if let Some(default) = node.get("default") {
        let base: SchemaRef = Arc::new(schema.clone());
        let value = read_value(settings, Some(&base), Some(default)).map_err(|e| DataError::new(format!("Invalid default value: {e}")))?;
        if !matches!(value, Value::Null) {
            schema.default = Some(value);
        }
    }
    Ok(Some(Arc::new(schema)))
}

fn required_schema(settings: &Settings, node: &Node, missing: &str) -> Result<SchemaRef, DataError> {
    read_schema(settings, node)?.ok_or_else(|| DataError::new(missing))
}
