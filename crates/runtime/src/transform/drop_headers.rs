//! `DropHeaders`: removes every header whose key is listed.

use sluice_api::{ConfigDef, ConfigKey, ConfigType, ConnectError, ConnectResult, Importance, Props};

use super::{Transform, TransformRecord};

pub(crate) const DOC: &str = "Removes one or more headers from each record.";

pub(crate) fn config_def() -> ConfigDef {
    ConfigDef::new().define(ConfigKey::new("headers", ConfigType::List, Importance::High, "The name of the headers to be removed."))
}

struct DropHeaders {
    headers: Vec<String>,
}

impl Transform for DropHeaders {
    fn apply(&self, mut record: TransformRecord) -> ConnectResult<Option<TransformRecord>> {
        record.headers.0.retain(|h| !self.headers.contains(&h.key));
        Ok(Some(record))
    }
}

pub(crate) fn create(props: &Props) -> ConnectResult<Box<dyn Transform>> {
    let config = config_def().parse(props)?;
    let headers = config.list("headers");
    if headers.is_empty() {
        return Err(ConnectError::config("headers", "empty list is not allowed: name at least one header"));
    }
    Ok(Box::new(DropHeaders { headers }))
}
