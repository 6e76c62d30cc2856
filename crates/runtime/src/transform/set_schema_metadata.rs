//! `SetSchemaMetadata`: sets the name and/or version of the key or value schema.

use std::sync::Arc;

use sluice_api::{ConfigDef, ConfigKey, ConfigType, ConnectError, ConnectResult, Importance, Props, Struct, Value};

use super::extract_field::replace_null_key;
use super::record::Side;
use super::require::{field_value, require_schema};
use super::{Transform, TransformRecord};

pub(crate) const DOC: &str = "Set the schema name, version or both on the record's key or value schema.";

pub(crate) fn config_def() -> ConfigDef {
    ConfigDef::new()
        .define(ConfigKey::new("schema.name", ConfigType::String, Importance::High, "Schema name to set.").default_value(""))
        .define(ConfigKey::new("schema.version", ConfigType::Int, Importance::High, "Schema version to set.").default_value(""))
        .define(replace_null_key())
}

struct SetSchemaMetadata {
    side: Side,
    name: Option<String>,
    version: Option<i32>,
    replace_null_with_default: bool,
}

impl Transform for SetSchemaMetadata {
    fn apply(&self, mut record: TransformRecord) -> ConnectResult<Option<TransformRecord>> {
        if self.side.value(&record).is_null() && self.side.schema(&record).is_none() {
            return Ok(Some(record));
        }
        let (schema, value) = self.side.take(&mut record);
        let schema = require_schema(schema.as_ref(), "SetSchemaMetadata", "updating schema metadata")?;
        let mut updated = (**schema).clone();
        if let Some(n) = &self.name {
            updated.name = Some(n.clone());
        }
        if let Some(v) = self.version {
            updated.version = Some(v);
        }
        let updated = Arc::new(updated);
        let value = match value {
            Value::Struct(s) => {
                let values = s.schema().fields.iter().map(|f| field_value(&s, f, self.replace_null_with_default)).collect();
                Value::Struct(Struct::from_values(updated.clone(), values))
            }
            other => other,
        };
        self.side.set(&mut record, Some(updated), value);
        Ok(Some(record))
    }
}

pub(crate) fn create(props: &Props, side: Side) -> ConnectResult<Box<dyn Transform>> {
    let config = config_def().parse(props)?;
    let name = config.string("schema.name");
    let version = match config.string("schema.version") {
        None => None,
        Some(v) => {
            Some(v.parse::<i32>().map_err(|_| ConnectError::config("schema.version", format!("'{v}' is not a number of type INT")))?)
        }
    };
    if name.is_none() && version.is_none() {
        return Err(ConnectError::config("schema.name", "neither schema name nor version configured: set schema.name or schema.version"));
    }
    Ok(Box::new(SetSchemaMetadata { side, name, version, replace_null_with_default: config.boolean("replace.null.with.default") }))
}
