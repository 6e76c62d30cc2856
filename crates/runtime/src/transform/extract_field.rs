//! `ExtractField`: replaces the key or value with one of its fields (a nested one with
//! `field.syntax.version=V2`). A null key or value passes through.

use sluice_api::{ConfigDef, ConfigKey, ConfigType, ConnectResult, Importance, Props, Value};

use super::field_path::{syntax_version_key, FieldPath, SyntaxVersion, FIELD_SYNTAX_VERSION};
use super::record::Side;
use super::require::{data_error, require_map_or_null, require_struct_or_null};
use super::{Transform, TransformRecord};

pub(crate) const DOC: &str = "Extract the specified field from a Struct when schema present, or a Map in the case of schemaless data. Any null values are passed through unmodified.";
const NAME: &str = "ExtractField";
const PURPOSE: &str = "field extraction";

pub(crate) fn config_def() -> ConfigDef {
    ConfigDef::new()
        .define(ConfigKey::new("field", ConfigType::String, Importance::Medium, "Field name to extract."))
        .define(replace_null_key())
        .define(syntax_version_key())
}

pub(crate) fn replace_null_key() -> ConfigKey {
    ConfigKey::new(
        "replace.null.with.default",
        ConfigType::Boolean,
        Importance::Medium,
        "Whether to replace fields that have a default value and that are null to the default value. When set to true, the default value is used, otherwise null is used.",
    )
    .default_value("true")
}

pub(crate) struct ExtractField {
    side: Side,
    original: String,
    path: FieldPath,
    replace_null_with_default: bool,
}

impl ExtractField {
    /// A top-level field extractor, as Debezium's delegates use it.
    pub(crate) fn top_level(side: Side, field: &str) -> Self {
        Self {
            side,
            original: field.to_owned(),
            path: FieldPath::parse(field, SyntaxVersion::V1, "field").expect("V1 paths always parse"),
            replace_null_with_default: true,
        }
    }

    pub(crate) fn extract(&self, record: &mut TransformRecord) -> ConnectResult<()> {
        let (schema, value) = self.side.take(record);
        match schema {
            None => {
                let out = match require_map_or_null(&value, NAME, PURPOSE)? {
                    None => Value::Null,
                    Some(m) => self.path.value_from_map(m, NAME)?,
                };
                self.side.set(record, None, out);
            }
            Some(schema) => {
                let s = require_struct_or_null(&value, NAME, PURPOSE)?;
                let field =
                    self.path.field_from(&schema).ok_or_else(|| data_error(NAME, format_args!("unknown field `{}`", self.original)))?;
                let out = match s {
                    None => Value::Null,
                    Some(s) => self.path.value_from_struct(s, self.replace_null_with_default, NAME)?,
                };
                self.side.set(record, Some(field.schema.clone()), out);
            }
        }
        Ok(())
    }
}

impl Transform for ExtractField {
    fn apply(&self, mut record: TransformRecord) -> ConnectResult<Option<TransformRecord>> {
        self.extract(&mut record)?;
        Ok(Some(record))
    }
}

pub(crate) fn create(props: &Props, side: Side) -> ConnectResult<Box<dyn Transform>> {
    let config = config_def().parse(props)?;
    let version = SyntaxVersion::parse(&config.string(FIELD_SYNTAX_VERSION).unwrap_or_else(|| "V1".to_owned()))?;
    let original = props["field"].clone();
    let path = FieldPath::parse(&original, version, "field")?;
    Ok(Box::new(ExtractField { side, original, path, replace_null_with_default: config.boolean("replace.null.with.default") }))
}
