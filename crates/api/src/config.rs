//! Configuration definitions, as Connect's `ConfigDef`: each key has a type, an optional
//! default, an importance, documentation and a validator. Connector JSON arrives as a string
//! map ([`Props`]); [`ConfigDef::parse`] validates it once and returns typed access, and
//! [`ConfigDef::validate`] answers `PUT /connector-plugins/{class}/config/validate`.

use std::collections::BTreeMap;

use crate::error::ConnectError;
use crate::secret::Secret;

/// Connector and task configuration on the wire: a string map.
pub type Props = BTreeMap<String, String>;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigType {
    Boolean,
    String,
    Int,
    Short,
    Long,
    Double,
    List,
    Class,
    Password,
}

impl ConfigType {
    pub fn name(self) -> &'static str {
        match self {
            Self::Boolean => "BOOLEAN",
            Self::String => "STRING",
            Self::Int => "INT",
            Self::Short => "SHORT",
            Self::Long => "LONG",
            Self::Double => "DOUBLE",
            Self::List => "LIST",
            Self::Class => "CLASS",
            Self::Password => "PASSWORD",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Importance {
    High,
    Medium,
    Low,
}

impl Importance {
    pub fn name(self) -> &'static str {
        match self {
            Self::High => "HIGH",
            Self::Medium => "MEDIUM",
            Self::Low => "LOW",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum Validator {
    /// A number of at least this value.
    AtLeast(i64),
    /// A number within `[min, max]`.
    Between(i64, i64),
    /// One of these strings, compared case-insensitively.
    OneOf(Vec<String>),
    /// A string that is not empty once trimmed.
    NonEmpty,
}

impl Validator {
    pub fn one_of(values: &[&str]) -> Self {
        Self::OneOf(values.iter().map(|s| (*s).to_owned()).collect())
    }

    fn check(&self, ty: ConfigType, raw: &str) -> Result<(), String> {
        match self {
            Validator::AtLeast(min) => match raw.trim().parse::<f64>() {
                Ok(v) if v >= *min as f64 => Ok(()),
                Ok(_) => Err(format!("Value must be at least {min}")),
                Err(_) => Err(format!("Value must be a number of type {}", ty.name())),
            },
            Validator::Between(min, max) => match raw.trim().parse::<f64>() {
                Ok(v) if v >= *min as f64 && v <= *max as f64 => Ok(()),
                Ok(v) if v < *min as f64 => Err(format!("Value must be at least {min}")),
                Ok(_) => Err(format!("Value must be no more than {max}")),
                Err(_) => Err(format!("Value must be a number of type {}", ty.name())),
            },
            Validator::OneOf(options) => {
                if options.iter().any(|o| o.eq_ignore_ascii_case(raw.trim())) {
                    Ok(())
                } else {
                    Err(format!("String must be one of: {}", options.join(", ")))
                }
            }
            Validator::NonEmpty => {
                if raw.trim().is_empty() {
                    Err("String must be non-empty".to_owned())
                } else {
                    Ok(())
                }
            }
        }
    }

    fn recommended(&self) -> Vec<String> {
        match self {
            Validator::OneOf(options) => options.clone(),
            _ => Vec::new(),
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct ConfigKey {
    pub name: String,
    pub ty: ConfigType,
    /// `None` means the key is required.
    pub default: Option<String>,
    pub importance: Importance,
    pub doc: String,
    pub group: Option<String>,
    pub order_in_group: i32,
    pub display_name: String,
    pub validator: Option<Validator>,
    pub dependents: Vec<String>,
}

impl ConfigKey {
    pub fn new(name: &str, ty: ConfigType, importance: Importance, doc: &str) -> Self {
        Self {
            name: name.to_owned(),
            ty,
            default: None,
            importance,
            doc: doc.to_owned(),
            group: None,
            order_in_group: -1,
            display_name: name.to_owned(),
            validator: None,
            dependents: Vec::new(),
        }
    }

    pub fn default_value(mut self, default: impl Into<String>) -> Self {
        self.default = Some(default.into());
        self
    }

    pub fn validator(mut self, validator: Validator) -> Self {
        self.validator = Some(validator);
        self
    }

    pub fn group(mut self, group: &str, order: i32, display_name: &str) -> Self {
        self.group = Some(group.to_owned());
        self.order_in_group = order;
        self.display_name = display_name.to_owned();
        self
    }

    pub fn required(&self) -> bool {
        self.default.is_none()
    }

    /// Checks a raw string against this key's type and validator.
    pub fn check(&self, raw: &str) -> Result<(), String> {
        self.check_type(raw)?;
        self.check_validator(raw)
    }

    fn check_validator(&self, raw: &str) -> Result<(), String> {
        self.validator.as_ref().map_or(Ok(()), |v| v.check(self.ty, raw))
    }

    /// Whether `raw` parses as this key's type (its validator aside).
    fn check_type(&self, raw: &str) -> Result<(), String> {
        let t = raw.trim();
        match self.ty {
            ConfigType::Boolean => {
                if t.eq_ignore_ascii_case("true") || t.eq_ignore_ascii_case("false") {
                    Ok(())
                } else {
                    Err("Expected value to be either true or false".to_owned())
                }
            }
            ConfigType::Int => t.parse::<i32>().map(|_| ()).map_err(|_| "Not a number of type INT".to_owned()),
            ConfigType::Short => t.parse::<i16>().map(|_| ()).map_err(|_| "Not a number of type SHORT".to_owned()),
            ConfigType::Long => t.parse::<i64>().map(|_| ()).map_err(|_| "Not a number of type LONG".to_owned()),
            ConfigType::Double => t.parse::<f64>().map(|_| ()).map_err(|_| "Not a number of type DOUBLE".to_owned()),
            ConfigType::String | ConfigType::List | ConfigType::Class | ConfigType::Password => Ok(()),
        }
    }
}

/// The outcome of validating one key, as in Connect's `ConfigValueInfo`.
#[derive(Debug, Clone, PartialEq)]
pub struct ConfigValue {
    pub name: String,
    pub value: Option<String>,
    pub recommended_values: Vec<String>,
    pub errors: Vec<String>,
    pub visible: bool,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct ConfigDef {
    keys: Vec<ConfigKey>,
    /// Prefixes of keys whose names carry a parameter (Debezium's `column.mask.with.<N>.chars`):
    /// known to the connector, which parses and validates them itself.
    prefixes: Vec<String>,
}

impl ConfigDef {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn define(mut self, key: ConfigKey) -> Self {
        self.keys.retain(|k| k.name != key.name);
        self.keys.push(key);
        self
    }

    /// Declares that keys starting with `prefix` are the connector's own (it validates them).
    pub fn define_prefix(mut self, prefix: &str) -> Self {
        if !self.prefixes.iter().any(|p| p == prefix) {
            self.prefixes.push(prefix.to_owned());
        }
        self
    }

    /// Whether `name` is a defined key or starts with a declared prefix.
    pub fn knows(&self, name: &str) -> bool {
        self.key(name).is_some() || self.prefixes.iter().any(|p| name.starts_with(p.as_str()))
    }

    /// Adds every key and prefix of `other` (its definitions win on a clash).
    pub fn merge(mut self, other: &ConfigDef) -> Self {
        for k in &other.keys {
            self = self.define(k.clone());
        }
        for p in &other.prefixes {
            self = self.define_prefix(p);
        }
        self
    }

    pub fn keys(&self) -> &[ConfigKey] {
        &self.keys
    }

    pub fn key(&self, name: &str) -> Option<&ConfigKey> {
        self.keys.iter().find(|k| k.name == name)
    }

    /// One [`ConfigValue`] per defined key, in definition order, with its errors.
    pub fn validate(&self, props: &Props) -> Vec<ConfigValue> {
        self.keys
            .iter()
            .map(|k| {
                let raw = props.get(&k.name);
                let mut errors = Vec::new();
                let mut value = raw.or(k.default.as_ref()).map(|v| shown(k, v));
                match (raw, &k.default) {
                    (None, None) => errors.push(format!("Missing required configuration \"{}\" which has no default value.", k.name)),
                    (Some(v), _) => {
                        let typed = k.check_type(v);
                        if let Err(e) = typed.clone().and_then(|()| k.check_validator(v)) {
                            errors.push(format!("Invalid value {} for configuration {}: {e}", shown(k, v), k.name));
                        }
                        // As Connect: a value of the wrong type is null, and a range validator
                        // then fails on that null too (`tasks.max=abc` has two errors).
                        if typed.is_err() {
                            value = None;
                            if matches!(k.validator, Some(Validator::AtLeast(_) | Validator::Between(..))) {
                                errors.push(format!("Invalid value null for configuration {}: Value must be non-null", k.name));
                            }
                        }
                    }
                    (None, Some(_)) => {}
                }
                ConfigValue {
                    name: k.name.clone(),
                    value,
                    recommended_values: k.validator.as_ref().map(Validator::recommended).unwrap_or_default(),
                    errors,
                    visible: true,
                }
            })
            .collect()
    }

    /// Validates `props` once and returns typed access, or the first error naming its key.
    pub fn parse(&self, props: &Props) -> Result<ParsedConfig, ConnectError> {
        for v in self.validate(props) {
            if let Some(e) = v.errors.first() {
                return Err(ConnectError::config(v.name, e.clone()));
            }
        }
        let mut values = Props::new();
        for k in &self.keys {
            if let Some(v) = props.get(&k.name).or(k.default.as_ref()) {
                values.insert(k.name.clone(), v.trim().to_owned());
            }
        }
        Ok(ParsedConfig { values, originals: props.clone() })
    }
}

fn shown(key: &ConfigKey, raw: &str) -> String {
    if key.ty == ConfigType::Password {
        crate::secret::REDACTED.to_owned()
    } else {
        crate::secret::redact_urls(raw)
    }
}

/// A validated configuration. Getters panic only on a key the definition does not have,
/// which is a programming error, never a user error.
#[derive(Debug, Clone)]
pub struct ParsedConfig {
    values: Props,
    originals: Props,
}

impl ParsedConfig {
    fn raw(&self, key: &str) -> Option<&str> {
        self.values.get(key).map(String::as_str)
    }

    pub fn string(&self, key: &str) -> Option<String> {
        self.raw(key).filter(|s| !s.is_empty()).map(str::to_owned)
    }

    pub fn int(&self, key: &str) -> i64 {
        self.raw(key).and_then(|s| s.parse().ok()).unwrap_or_else(|| panic!("{key} is not a defined number"))
    }

    pub fn double(&self, key: &str) -> f64 {
        self.raw(key).and_then(|s| s.parse().ok()).unwrap_or_else(|| panic!("{key} is not a defined number"))
    }

    pub fn boolean(&self, key: &str) -> bool {
        self.raw(key).map(|s| s.eq_ignore_ascii_case("true")).unwrap_or_else(|| panic!("{key} is not a defined boolean"))
    }

    /// A comma-separated list, trimmed, without empty items.
    pub fn list(&self, key: &str) -> Vec<String> {
        self.raw(key).map(|s| s.split(',').map(str::trim).filter(|s| !s.is_empty()).map(str::to_owned).collect()).unwrap_or_default()
    }

    pub fn password(&self, key: &str) -> Option<Secret> {
        self.raw(key).map(Secret::new)
    }

    /// Every key as given, including ones this definition does not know.
    pub fn originals(&self) -> &Props {
        &self.originals
    }

    /// The original keys that start with `prefix`, with the prefix removed.
    pub fn with_prefix(&self, prefix: &str) -> Props {
        self.originals.iter().filter_map(|(k, v)| k.strip_prefix(prefix).map(|rest| (rest.to_owned(), v.clone()))).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn def() -> ConfigDef {
        ConfigDef::new()
            .define(ConfigKey::new("file", ConfigType::String, Importance::High, "the file"))
            .define(
                ConfigKey::new("batch.size", ConfigType::Int, Importance::Low, "batch")
                    .default_value("2000")
                    .validator(Validator::AtLeast(1)),
            )
            .define(
                ConfigKey::new("mode", ConfigType::String, Importance::Low, "mode")
                    .default_value("a")
                    .validator(Validator::one_of(&["a", "b"])),
            )
            .define(ConfigKey::new("secret", ConfigType::Password, Importance::Low, "pw").default_value(""))
    }

    fn props(pairs: &[(&str, &str)]) -> Props {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    }

    /// As Connect's `ConfigDef.validate`: a value of the wrong type becomes null, and a range
    /// validator then fails on the null as well.
    #[test]
    fn a_number_that_does_not_parse_is_two_errors_under_a_range() {
        let values = def().validate(&props(&[("file", "f"), ("batch.size", "abc"), ("mode", "c")]));
        let batch = values.iter().find(|v| v.name == "batch.size").unwrap();
        assert_eq!(batch.value, None);
        assert_eq!(
            batch.errors,
            [
                "Invalid value abc for configuration batch.size: Not a number of type INT",
                "Invalid value null for configuration batch.size: Value must be non-null",
            ]
        );
        let mode = values.iter().find(|v| v.name == "mode").unwrap();
        assert_eq!(mode.errors, ["Invalid value c for configuration mode: String must be one of: a, b"]);
        assert_eq!(mode.value.as_deref(), Some("c"));
        let zero = def().validate(&props(&[("file", "f"), ("batch.size", "0")]));
        assert_eq!(zero[1].errors, ["Invalid value 0 for configuration batch.size: Value must be at least 1"]);
    }

    #[test]
    fn missing_required_key_is_named() {
        let err = def().parse(&props(&[])).unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid value for configuration file: Missing required configuration \"file\" which has no default value."
        );
    }

    #[test]
    fn typed_and_validated_values() {
        let err = def().parse(&props(&[("file", "x"), ("batch.size", "0")])).unwrap_err();
        assert!(err.to_string().contains("Invalid value 0 for configuration batch.size: Value must be at least 1"), "{err}");
        let err = def().parse(&props(&[("file", "x"), ("batch.size", "ten")])).unwrap_err();
        assert!(err.to_string().contains("Not a number of type INT"), "{err}");
        let err = def().parse(&props(&[("file", "x"), ("mode", "c")])).unwrap_err();
        assert!(err.to_string().contains("String must be one of: a, b"), "{err}");
        let ok = def().parse(&props(&[("file", "x"), ("mode", "B")])).unwrap();
        assert_eq!(ok.int("batch.size"), 2000);
        assert_eq!(ok.string("file").as_deref(), Some("x"));
    }

    #[test]
    fn password_values_are_hidden_in_validation_output() {
        let out = def().validate(&props(&[("file", "x"), ("secret", "hunter2")]));
        let secret = out.iter().find(|v| v.name == "secret").unwrap();
        assert_eq!(secret.value.as_deref(), Some("[hidden]"));
        let mode = out.iter().find(|v| v.name == "mode").unwrap();
        assert_eq!(mode.recommended_values, vec!["a", "b"]);
    }
}
