use sluice_api::{ConfigDef, ConfigKey, ConfigType, ConnectResult, Importance, Props, Validator};

pub const FILE: &str = "file";

pub fn def() -> ConfigDef {
    ConfigDef::new()
        .define(ConfigKey::new(FILE, ConfigType::String, Importance::High, "Destination filename.").validator(Validator::NonEmpty))
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileSinkConfig {
    pub file: String,
}

impl FileSinkConfig {
    pub fn parse(props: &Props) -> ConnectResult<Self> {
        let c = def().parse(props)?;
        Ok(Self { file: c.string(FILE).unwrap_or_default() })
    }
}
