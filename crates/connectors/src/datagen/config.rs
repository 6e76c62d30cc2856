use sluice_api::{ConfigDef, ConfigKey, ConfigType, ConnectResult, Importance, Props, Validator};

pub const TOPIC: &str = "kafka.topic";
pub const QUICKSTART: &str = "quickstart";
pub const MAX_INTERVAL: &str = "max.interval";
pub const ITERATIONS: &str = "iterations";
pub const RANDOM_SEED: &str = "random.seed";
pub const RECORDS_PER_SECOND: &str = "records.per.second";
pub const BATCH_SIZE: &str = "batch.size";
pub const PAYLOAD_BYTES: &str = "payload.bytes";

pub const SHAPES: &[&str] = &["users", "pageviews", "orders", "bench"];

pub fn def() -> ConfigDef {
    ConfigDef::new()
        .define(ConfigKey::new(TOPIC, ConfigType::String, Importance::High, "Topic to write to.").validator(Validator::NonEmpty))
        .define(
            ConfigKey::new(
                QUICKSTART,
                ConfigType::String,
                Importance::High,
                "The shape of the rows: users, pageviews, orders, or bench (an id, the task, a timestamp and a payload of payload.bytes).",
            )
            .default_value("users")
            .validator(Validator::one_of(SHAPES)),
        )
        .define(
            ConfigKey::new(
                MAX_INTERVAL,
                ConfigType::Long,
                Importance::Medium,
                "Maximum interval in milliseconds between rows (each wait is random up to this). 0 means no wait.",
            )
            .default_value("500")
            .validator(Validator::AtLeast(0)),
        )
        .define(
            ConfigKey::new(ITERATIONS, ConfigType::Long, Importance::Medium, "Number of rows each task generates; -1 for no limit.")
                .default_value("-1")
                .validator(Validator::AtLeast(-1)),
        )
        .define(ConfigKey::new(RANDOM_SEED, ConfigType::Long, Importance::Low, "Seed for the random generator.").default_value("0"))
        .define(
            ConfigKey::new(
                RECORDS_PER_SECOND,
                ConfigType::Long,
                Importance::Medium,
                "Rows per second per task; 0 for as fast as possible. When set, max.interval is ignored.",
            )
            .default_value("0")
            .validator(Validator::AtLeast(0)),
        )
        .define(
            ConfigKey::new(BATCH_SIZE, ConfigType::Int, Importance::Low, "Rows returned by one poll at most.")
                .default_value("1000")
                .validator(Validator::AtLeast(1)),
        )
        .define(
            ConfigKey::new(PAYLOAD_BYTES, ConfigType::Int, Importance::Low, "Payload size of the bench shape.")
                .default_value("64")
                .validator(Validator::AtLeast(0)),
        )
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DatagenConfig {
    pub topic: String,
    pub shape: String,
    pub max_interval_ms: u64,
    pub iterations: i64,
    pub seed: u64,
    pub records_per_second: u64,
    pub batch_size: usize,
    pub payload_bytes: usize,
}

impl DatagenConfig {
    pub fn parse(props: &Props) -> ConnectResult<Self> {
        let c = def().parse(props)?;
        Ok(Self {
            topic: c.string(TOPIC).unwrap_or_default(),
            shape: c.string(QUICKSTART).unwrap_or_default().to_ascii_lowercase(),
            max_interval_ms: c.int(MAX_INTERVAL) as u64,
            iterations: c.int(ITERATIONS),
            seed: c.int(RANDOM_SEED) as u64,
            records_per_second: c.int(RECORDS_PER_SECOND) as u64,
            batch_size: c.int(BATCH_SIZE) as usize,
            payload_bytes: c.int(PAYLOAD_BYTES) as usize,
        })
    }
}
