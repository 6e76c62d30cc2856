use sluice_api::{ConfigDef, ConfigKey, ConfigType, ConnectResult, Importance, Props, Validator};

pub const FILE: &str = "file";
pub const TOPIC: &str = "topic";
pub const BATCH_SIZE: &str = "batch.size";
pub const DEFAULT_BATCH_SIZE: &str = "2000";

pub fn def() -> ConfigDef {
    ConfigDef::new()
        .define(ConfigKey::new(FILE, ConfigType::String, Importance::High, "Source filename.").validator(Validator::NonEmpty))
        .define(ConfigKey::new(TOPIC, ConfigType::List, Importance::High, "The topic to publish data to.").validator(Validator::NonEmpty))
        .define(
            ConfigKey::new(
                BATCH_SIZE,
                ConfigType::Int,
                Importance::Low,
                "The maximum number of records the source task can read from the file each time it is polled.",
            )
            .default_value(DEFAULT_BATCH_SIZE)
            .validator(Validator::AtLeast(1)),
        )
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileSourceConfig {
    pub file: String,
    pub topic: String,
    pub batch_size: usize,
}

impl FileSourceConfig {
    pub fn parse(props: &Props) -> ConnectResult<Self> {
        let c = def().parse(props)?;
        let topics = c.list(TOPIC);
        if topics.len() != 1 {
            return Err(sluice_api::ConnectError::config(
                TOPIC,
                "'topic' in FileStreamSourceConnector configuration requires definition of a single topic",
            ));
        }
        Ok(Self { file: c.string(FILE).unwrap_or_default(), topic: topics[0].clone(), batch_size: c.int(BATCH_SIZE) as usize })
    }
}
