//! `HeaderFrom`: copies or moves fields of the key or value into headers.

use sluice_api::{ConfigDef, ConfigKey, ConfigType, ConnectError, ConnectResult, Importance, Props, SchemaType, Struct, Validator, Value};

use super::extract_field::replace_null_key;
use super::record::Side;
use super::require::{
    copy_basics, data_error, field_value, field_value_by_name, map_get, map_remove, push_field, require_map, require_struct, SchemaCache,
};
use super::{Transform, TransformRecord};

pub(crate) const DOC: &str = "Moves or copies fields in the key/value of a record into that record's headers. Corresponding elements of <code>fields</code> and <code>headers</code> together identify a field and the header it should be moved or copied to.";
const NAME: &str = "HeaderFrom";

pub(crate) fn config_def() -> ConfigDef {
    ConfigDef::new()
        .define(ConfigKey::new("fields", ConfigType::List, Importance::High, "Field names in the record whose values are to be copied or moved to headers."))
        .define(ConfigKey::new("headers", ConfigType::List, Importance::High, "Header names, in the same order as the field names listed in the fields configuration property."))
        .define(
            ConfigKey::new("operation", ConfigType::String, Importance::High, "Either <code>move</code> if the fields are to be moved to the headers (removed from the key/value), or <code>copy</code> if the fields are to be copied to the headers (retained in the key/value).")
                .validator(Validator::one_of(&["move", "copy"])),
        )
        .define(replace_null_key())
}

struct HeaderFrom {
    side: Side,
    fields: Vec<String>,
    headers: Vec<String>,
    moving: bool,
    replace_null_with_default: bool,
    cache: SchemaCache,
}

impl Transform for HeaderFrom {
    fn apply(&self, mut record: TransformRecord) -> ConnectResult<Option<TransformRecord>> {
        let purpose = if self.moving { "header move" } else { "header copy" };
        let (schema, value) = self.side.take(&mut record);
        match schema {
            None => {
                let map = require_map(&value, NAME, purpose)?;
                let mut updated = map.clone();
                for (field, header) in self.fields.iter().zip(&self.headers) {
                    let v = map_get(map, field).cloned().unwrap_or(Value::Null);
                    if self.moving {
                        map_remove(&mut updated, field);
                    }
                    record.headers.add(header.clone(), None, v);
                }
                self.side.set(&mut record, None, Value::Map(updated));
            }
            Some(schema) => {
                let s = require_struct(&value, NAME, purpose)?;
                for (field, header) in self.fields.iter().zip(&self.headers) {
                    let f = schema.field(field).ok_or_else(|| data_error(NAME, format_args!("field `{field}` is not in the schema")))?;
                    let v = field_value_by_name(s, field, self.replace_null_with_default).unwrap_or(Value::Null);
                    record.headers.add(header.clone(), Some(f.schema.clone()), v);
                }
                if self.moving {
                    let moved = self.cache.get_or_build(&schema, || {
                        let mut out = copy_basics(&schema, SchemaType::Struct);
                        for f in schema.fields.iter().filter(|f| !self.fields.contains(&f.name)) {
                            push_field(&mut out, f.name.clone(), f.schema.clone());
                        }
                        Ok(out)
                    })?;
                    let values = schema
                        .fields
                        .iter()
                        .filter(|f| !self.fields.contains(&f.name))
                        .map(|f| field_value(s, f, self.replace_null_with_default))
                        .collect();
                    let out = Value::Struct(Struct::from_values(moved.clone(), values));
                    self.side.set(&mut record, Some(moved), out);
                } else {
                    self.side.set(&mut record, Some(schema), value);
                }
            }
        }
        Ok(Some(record))
    }
}

pub(crate) fn create(props: &Props, side: Side) -> ConnectResult<Box<dyn Transform>> {
    let config = config_def().parse(props)?;
    let fields = config.list("fields");
    let headers = config.list("headers");
    if fields.is_empty() {
        return Err(ConnectError::config("fields", "empty list is not allowed: name at least one field"));
    }
    if headers.is_empty() {
        return Err(ConnectError::config("headers", "empty list is not allowed: name at least one header"));
    }
    if fields.len() != headers.len() {
        return Err(ConnectError::config("headers", "'fields' and 'headers' must have the same number of elements"));
    }
    let moving = config.string("operation").is_some_and(|o| o.eq_ignore_ascii_case("move"));
    Ok(Box::new(HeaderFrom {
        side,
        fields,
        headers,
        moving,
        replace_null_with_default: config.boolean("replace.null.with.default"),
        cache: SchemaCache::default(),
    }))
}
