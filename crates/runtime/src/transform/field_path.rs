//! Paths to a (possibly nested) field, as Kafka's `SingleFieldPath` (KIP-821).
//!
//! With `field.syntax.version=V1` a path is one top-level field name, dots included. With
//! `V2` dots separate steps, and a step that itself contains dots is wrapped in backticks
//! (`` `foo.bar`.baz ``); a backtick inside a wrapped step is escaped with a backslash.
//! In the Kafka version sluice follows, only `ExtractField` reads this key.

use sluice_api::{ConfigKey, ConfigType, ConnectError, ConnectResult, Field, Importance, Schema, Struct, Validator, Value};

use super::require::{field_value, map_get};

pub(crate) const FIELD_SYNTAX_VERSION: &str = "field.syntax.version";

pub(crate) fn syntax_version_key() -> ConfigKey {
    ConfigKey::new(
        FIELD_SYNTAX_VERSION,
        ConfigType::String,
        Importance::High,
        "Defines the version of the syntax to access fields. If set to `V1`, then the field paths are limited to access the elements at the root level of the struct or map. If set to `V2`, the syntax will support accessing nested elements. To access nested elements, dotted notation is used. If dots are already included in the field name, then backtick pairs can be used to wrap field names containing dots. E.g. to access the subfield `baz` from a field named \"foo.bar\" in a struct/map the following format can be used to access its elements: \"`foo.bar`.baz\".",
    )
    .default_value("V1")
    .validator(Validator::one_of(&["V1", "V2"]))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SyntaxVersion {
    V1,
    V2,
}

impl SyntaxVersion {
    pub(crate) fn parse(raw: &str) -> ConnectResult<Self> {
        match raw.trim().to_ascii_uppercase().as_str() {
            "V1" => Ok(Self::V1),
            "V2" => Ok(Self::V2),
            _ => Err(ConnectError::config(FIELD_SYNTAX_VERSION, format!("unrecognized field syntax version '{raw}': use V1 or V2"))),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FieldPath {
    steps: Vec<String>,
}

impl FieldPath {
    /// Parses `path`; `key` names the configuration key in errors.
    pub(crate) fn parse(path: &str, version: SyntaxVersion, key: &str) -> ConnectResult<Self> {
        let steps = match version {
            SyntaxVersion::V1 => vec![path.to_owned()],
            SyntaxVersion::V2 => parse_v2(path).map_err(|m| ConnectError::config(key, m))?,
        };
        Ok(Self { steps })
    }

    #[cfg(test)]
    pub(crate) fn steps(&self) -> &[String] {
        &self.steps
    }

    fn split(&self) -> (&[String], &str) {
        let (last, parents) = self.steps.split_last().expect("a field path has at least one step");
        (parents, last)
    }

    /// The field this path names in `schema`, if every step exists.
    pub(crate) fn field_from<'a>(&self, schema: &'a Schema) -> Option<&'a Field> {
        let (parents, last) = self.split();
        let mut current = schema;
        for step in parents {
            current = &current.field(step)?.schema;
        }
        current.field(last)
    }

    /// The value at this path in a struct; `Null` when a step is missing or null. A step
    /// that holds something other than a struct is an error.
    pub(crate) fn value_from_struct(&self, s: &Struct, with_default: bool, name: &str) -> ConnectResult<Value> {
        let (parents, last) = self.split();
        let mut current = s;
        for step in parents {
            match current.schema().field(step).map(|f| &current.values()[f.index]) {
                None | Some(Value::Null) => return Ok(Value::Null),
                Some(Value::Struct(inner)) => current = inner,
                Some(other) => {
                    return Err(super::require::data_error(
                        name,
                        format_args!("nested field access needs a struct at `{step}`, found {}", super::require::kind_of(other)),
                    ))
                }
            }
        }
        Ok(current.schema().field(last).map(|f| field_value(current, f, with_default)).unwrap_or(Value::Null))
    }

    /// The value at this path in a schemaless map; `Null` when a step is missing or null.
    pub(crate) fn value_from_map(&self, m: &[(Value, Value)], name: &str) -> ConnectResult<Value> {
        let (parents, last) = self.split();
        let mut current = m;
        for step in parents {
            match map_get(current, step) {
                None | Some(Value::Null) => return Ok(Value::Null),
                Some(Value::Map(inner)) => current = inner,
                Some(other) => {
                    return Err(super::require::data_error(
                        name,
                        format_args!("nested field access needs a map at `{step}`, found {}", super::require::kind_of(other)),
                    ))
                }
            }
        }
        Ok(map_get(current, last).cloned().unwrap_or(Value::Null))
    }
}

fn incomplete(path: &str, at: usize) -> String {
    format!("incomplete backtick pair in path [{path}]: add a backslash before the backtick at position {at} to escape it")
}

/// Kafka's V2 grammar, step for step (`SingleFieldPath.buildFieldPathV2`).
fn parse_v2(path: &str) -> Result<Vec<String>, String> {
    let b = path.as_bytes();
    let mut steps = Vec::new();
    let mut idx = 0usize;
    while idx < b.len() {
        if b[idx] != b'`' {
            let start = idx;
            match path[idx..].find('.') {
                Some(off) => {
                    steps.push(path[start..idx + off].to_owned());
                    idx += off + 1;
                }
                None => {
                    steps.push(path[start..].to_owned());
                    idx = b.len();
                }
            }
        } else {
            let backtick_at = idx;
            idx += 1;
            let mut field = String::new();
            let mut start = idx;
            loop {
                let Some(off) = path[idx..].find('`') else { return Err(incomplete(path, backtick_at)) };
                idx += off;
                let escaped = b[idx - 1] == b'\\';
                if idx >= b.len() - 1 {
                    if escaped {
                        return Err(incomplete(path, backtick_at));
                    }
                    field.push_str(&path[start..idx]);
                    steps.push(std::mem::take(&mut field));
                    idx += 1;
                    break;
                }
                if b[idx + 1] != b'.' {
                    idx += 1;
                    continue;
                }
                if escaped {
                    field.push_str(&path[start..idx - 1]);
                    field.push('`');
                    idx += 1;
                    start = idx;
                    continue;
                }
                field.push_str(&path[start..idx]);
                steps.push(std::mem::take(&mut field));
                idx += 2;
                break;
            }
        }
    }
    if path.ends_with('.') {
        steps.push(String::new());
    }
    if steps.is_empty() {
        steps.push(String::new());
    }
    Ok(steps)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v2(p: &str) -> Vec<String> {
        FieldPath::parse(p, SyntaxVersion::V2, "field").unwrap().steps().to_vec()
    }

    // Expectations from Kafka's FieldPathNotationTest.
    #[test]
    fn transform_field_path_v2_notation() {
        let cases: &[(&str, &[&str])] = &[
            ("..", &["", "", ""]),
            ("foo..", &["foo", "", ""]),
            (".bar.", &["", "bar", ""]),
            ("..baz", &["", "", "baz"]),
            ("foobarbaz", &["foobarbaz"]),
            ("foo.bar.baz", &["foo", "bar", "baz"]),
            ("foo`bar`baz", &["foo`bar`baz"]),
            ("`foo.bar.baz`", &["foo.bar.baz"]),
            ("foo.`bar.baz`", &["foo", "bar.baz"]),
            ("`foo.bar`.baz", &["foo.bar", "baz"]),
            ("foo.`bar`.baz", &["foo", "bar", "baz"]),
            ("foo.``bar.baz`", &["foo", "`bar.baz"]),
            ("foo.`bar.baz``", &["foo", "bar.baz`"]),
            ("foo.`ba`r.baz`", &["foo", "ba`r.baz"]),
            ("foo.ba`r.baz", &["foo", "ba`r", "baz"]),
            ("foo.``bar``.baz", &["foo", "`bar`", "baz"]),
            ("``foo.bar.baz``", &["`foo.bar.baz`"]),
            ("foo.`bar\\`.baz`", &["foo", "bar`.baz"]),
            ("foo.`bar.`baz`", &["foo", "bar.`baz"]),
            ("foo.`bar\\`.`baz`", &["foo", "bar`.`baz"]),
            ("foo.`bar\\\\`.\\`baz`", &["foo", "bar\\`.\\`baz"]),
        ];
        for (path, expected) in cases {
            assert_eq!(v2(path), *expected, "path {path}");
        }
        assert_eq!(FieldPath::parse("foo.bar", SyntaxVersion::V1, "field").unwrap().steps(), ["foo.bar"]);
    }

    #[test]
    fn transform_field_path_incomplete_backtick_names_the_key() {
        let err = FieldPath::parse("`foo.bar", SyntaxVersion::V2, "field").unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid value for configuration field: incomplete backtick pair in path [`foo.bar]: add a backslash before the backtick at position 0 to escape it"
        );
        for (path, at) in [("foo.`bar.baz", 4), ("foo.bar.`baz", 8), ("foo.bar.`baz\\`", 8)] {
            let err = FieldPath::parse(path, SyntaxVersion::V2, "field").unwrap_err().to_string();
            assert!(err.contains(&format!("backtick at position {at} ")), "{err}");
        }
    }
}
