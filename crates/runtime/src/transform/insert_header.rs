//! `InsertHeader`: adds a header with a literal value (typed as Connect's
//! `Values.parseString` types it: `1` is an int8, `true` a boolean, …) to every record.

use sluice_api::{ConfigDef, ConfigKey, ConfigType, ConnectResult, Importance, Props, SchemaRef, Value};

use super::java_text::parse_literal;
use super::{Transform, TransformRecord};

pub(crate) const DOC: &str = "Add a header to each record.";

pub(crate) fn config_def() -> ConfigDef {
    ConfigDef::new().define(ConfigKey::new("header", ConfigType::String, Importance::High, "The name of the header.")).define(
        ConfigKey::new(
            "value.literal",
            ConfigType::String,
            Importance::High,
            "The literal value that is to be set as the header value on all records.",
        ),
    )
}

struct InsertHeader {
    header: String,
    schema: Option<SchemaRef>,
    value: Value,
}

impl Transform for InsertHeader {
    fn apply(&self, mut record: TransformRecord) -> ConnectResult<Option<TransformRecord>> {
        record.headers.add(self.header.clone(), self.schema.clone(), self.value.clone());
        Ok(Some(record))
    }
}

pub(crate) fn create(props: &Props) -> ConnectResult<Box<dyn Transform>> {
    config_def().parse(props)?;
    // Untrimmed, as Connect passes the literal on.
    let header = props["header"].clone();
    let (schema, value) = parse_literal(&props["value.literal"]);
    Ok(Box::new(InsertHeader { header, schema, value }))
}
