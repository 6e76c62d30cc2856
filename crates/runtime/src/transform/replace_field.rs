//! `ReplaceField`: keeps (`include`), drops (`exclude`) and renames (`renames=a:b`) fields.
//! A null key or value passes through.

use sluice_api::{ConfigDef, ConfigKey, ConfigType, ConnectError, ConnectResult, Importance, Props, Schema, SchemaType, Struct, Value};

use super::extract_field::replace_null_key;
use super::record::Side;
use super::require::{copy_basics, field_value, push_field, require_map, require_struct, SchemaCache};
use super::{Transform, TransformRecord};

pub(crate) const DOC: &str = "Filter or rename fields.";
const NAME: &str = "ReplaceField";
const PURPOSE: &str = "field replacement";

pub(crate) fn config_def() -> ConfigDef {
    ConfigDef::new()
        .define(
            ConfigKey::new(
                "exclude",
                ConfigType::List,
                Importance::Medium,
                "Fields to exclude. This takes precedence over the fields to include.",
            )
            .default_value(""),
        )
        .define(
            ConfigKey::new(
                "include",
                ConfigType::List,
                Importance::Medium,
                "Fields to include. If specified, only these fields will be used.",
            )
            .default_value(""),
        )
        .define(ConfigKey::new("renames", ConfigType::List, Importance::Medium, "Field rename mappings.").default_value(""))
        .define(replace_null_key())
}

pub(crate) struct ReplaceField {
    side: Side,
    exclude: Vec<String>,
    include: Vec<String>,
    renames: Vec<(String, String)>,
    replace_null_with_default: bool,
    cache: SchemaCache,
}

impl ReplaceField {
    /// Drops the named fields from the value, as Debezium's drop-fields delegate.
    pub(crate) fn excluding(side: Side, exclude: Vec<String>) -> Self {
        Self { side, exclude, include: Vec::new(), renames: Vec::new(), replace_null_with_default: true, cache: SchemaCache::default() }
    }

    fn keep(&self, name: &str) -> bool {
        !self.exclude.iter().any(|e| e == name) && (self.include.is_empty() || self.include.iter().any(|i| i == name))
    }

    fn renamed<'a>(&'a self, name: &'a str) -> &'a str {
        self.renames.iter().find(|(from, _)| from == name).map(|(_, to)| to.as_str()).unwrap_or(name)
    }

    pub(crate) fn replace(&self, record: &mut TransformRecord) -> ConnectResult<()> {
        if self.side.value(record).is_null() {
            return Ok(());
        }
        let (schema, value) = self.side.take(record);
        match schema {
            None => {
                let map = require_map(&value, NAME, PURPOSE)?;
                let mut out: Vec<(Value, Value)> = Vec::with_capacity(map.len());
                for (k, v) in map {
                    let Some(name) = k.as_str() else { continue };
                    if self.keep(name) {
                        super::require::map_put(&mut out, self.renamed(name), v.clone());
                    }
                }
                self.side.set(record, None, Value::Map(out));
            }
            Some(_) => {
                let s = require_struct(&value, NAME, PURPOSE)?;
                let updated = self.cache.get_or_build(s.schema(), || {
                    let mut out: Schema = copy_basics(s.schema(), SchemaType::Struct);
                    for f in &s.schema().fields {
                        if self.keep(&f.name) {
                            push_field(&mut out, self.renamed(&f.name), f.schema.clone());
                        }
                    }
                    Ok(out)
                })?;
                let values = s
                    .schema()
                    .fields
                    .iter()
                    .filter(|f| self.keep(&f.name))
                    .map(|f| field_value(s, f, self.replace_null_with_default))
                    .collect();
                self.side.set(record, Some(updated.clone()), Value::Struct(Struct::from_values(updated, values)));
            }
        }
        Ok(())
    }
}

impl Transform for ReplaceField {
    fn apply(&self, mut record: TransformRecord) -> ConnectResult<Option<TransformRecord>> {
        self.replace(&mut record)?;
        Ok(Some(record))
    }
}

pub(crate) fn parse_renames(list: &[String]) -> ConnectResult<Vec<(String, String)>> {
    list.iter()
        .map(|m| match m.split(':').collect::<Vec<_>>()[..] {
            [from, to] => Ok((from.to_owned(), to.to_owned())),
            _ => Err(ConnectError::config("renames", format!("invalid rename mapping '{m}': use old:new"))),
        })
        .collect()
}

pub(crate) fn create(props: &Props, side: Side) -> ConnectResult<Box<dyn Transform>> {
    let config = config_def().parse(props)?;
    Ok(Box::new(ReplaceField {
        side,
        exclude: config.list("exclude"),
        include: config.list("include"),
        renames: parse_renames(&config.list("renames"))?,
        replace_null_with_default: config.boolean("replace.null.with.default"),
        cache: SchemaCache::default(),
    }))
}
