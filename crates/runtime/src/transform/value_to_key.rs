//! `ValueToKey`: replaces the key with a struct (or map) of the listed value fields.

use sluice_api::{ConfigDef, ConfigKey, ConfigType, ConnectError, ConnectResult, Importance, Props, Schema, Struct, Value};

use super::extract_field::replace_null_key;
use super::require::{data_error, field_value_by_name, map_get, require_map, require_struct, SchemaCache};
use super::{Transform, TransformRecord};

pub(crate) const DOC: &str = "Replace the record key with a new key formed from a subset of fields in the record value.";
const NAME: &str = "ValueToKey";
const PURPOSE: &str = "copying fields from value to key";

pub(crate) fn config_def() -> ConfigDef {
    ConfigDef::new()
        .define(ConfigKey::new(
            "fields",
            ConfigType::List,
            Importance::High,
            "Field names on the record value to extract as the record key.",
        ))
        .define(replace_null_key())
}

struct ValueToKey {
    fields: Vec<String>,
    replace_null_with_default: bool,
    cache: SchemaCache,
}

impl Transform for ValueToKey {
    fn apply(&self, mut record: TransformRecord) -> ConnectResult<Option<TransformRecord>> {
        match record.value_schema.clone() {
            None => {
                let value = require_map(&record.value, NAME, PURPOSE)?;
                let key =
                    self.fields.iter().map(|f| (Value::String(f.clone()), map_get(value, f).cloned().unwrap_or(Value::Null))).collect();
                record.key_schema = None;
                record.key = Value::Map(key);
            }
            Some(schema) => {
                let value = require_struct(&record.value, NAME, PURPOSE)?;
                let key_schema = self.cache.get_or_build(&schema, || {
                    let mut fields = Vec::with_capacity(self.fields.len());
                    for f in &self.fields {
                        let field = schema
                            .field(f)
                            .ok_or_else(|| data_error(NAME, format_args!("field `{f}` does not exist in the value schema")))?;
                        fields.push((f.clone(), field.schema.clone()));
                    }
                    Ok(Schema::struct_of(fields))
                })?;
                let values = self
                    .fields
                    .iter()
                    .map(|f| field_value_by_name(value, f, self.replace_null_with_default).unwrap_or(Value::Null))
                    .collect();
                record.key = Value::Struct(Struct::from_values(key_schema.clone(), values));
                record.key_schema = Some(key_schema);
            }
        }
        Ok(Some(record))
    }
}

pub(crate) fn create(props: &Props) -> ConnectResult<Box<dyn Transform>> {
    let config = config_def().parse(props)?;
    let fields = config.list("fields");
    if fields.is_empty() {
        return Err(ConnectError::config("fields", "empty list is not allowed: name at least one field"));
    }
    Ok(Box::new(ValueToKey {
        fields,
        replace_null_with_default: config.boolean("replace.null.with.default"),
        cache: SchemaCache::default(),
    }))
}
