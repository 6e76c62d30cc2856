//! `Filter`: drops every record it sees; used with a predicate to drop some.

use sluice_api::{ConfigDef, ConnectResult, Props};

use super::{Transform, TransformRecord};

pub(crate) const DOC: &str = "Drops all records, filtering them from subsequent transformations in the chain. This is intended to be used conditionally to filter out records matching (or not matching) a particular Predicate.";

pub(crate) fn config_def() -> ConfigDef {
    ConfigDef::new()
}

struct Filter;

impl Transform for Filter {
    fn apply(&self, _record: TransformRecord) -> ConnectResult<Option<TransformRecord>> {
        Ok(None)
    }
}

pub(crate) fn create(_props: &Props) -> ConnectResult<Box<dyn Transform>> {
    Ok(Box::new(Filter))
}
