//! The Confluent S3 sink keys this version implements, their defaults, the typed
//! configuration, and the Confluent keys it rejects by name because they are not implemented
//! yet (a key that changes behaviour is never silently ignored). For the same reason a KMS key
//! id or an SSE-C key that `s3.ssea.name` would leave unused is an error here, where
//! Confluent's sink ignores it.

use sluice_api::{ConfigDef, ConfigKey, ConfigType, ConnectError, ConnectResult, Importance, Props, Secret, Validator};

pub const BUCKET: &str = "s3.bucket.name";
pub const REGION: &str = "s3.region";
pub const STORE_URL: &str = "store.url";
pub const PATH_STYLE: &str = "s3.path.style.access.enabled";
pub const ACCESS_KEY_ID: &str = "aws.access.key.id";
pub const SECRET_ACCESS_KEY: &str = "aws.secret.access.key";
pub const PART_SIZE: &str = "s3.part.size";
pub const PART_RETRIES: &str = "s3.part.retries";
pub const RETRY_BACKOFF_MS: &str = "s3.retry.backoff.ms";
pub const COMPRESSION_TYPE: &str = "s3.compression.type";
pub const COMPRESSION_LEVEL: &str = "s3.compression.level";
pub const STORAGE_CLASS: &str = "storage.class";
pub const TOPICS_DIR: &str = "topics.dir";
pub const DIRECTORY_DELIM: &str = "directory.delim";
pub const FILE_DELIM: &str = "file.delim";
pub const FLUSH_SIZE: &str = "flush.size";
pub const ROTATE_INTERVAL_MS: &str = "rotate.interval.ms";
pub const ROTATE_SCHEDULE_INTERVAL_MS: &str = "rotate.schedule.interval.ms";
pub const FORMAT_CLASS: &str = "format.class";
pub const PARQUET_CODEC: &str = "parquet.codec";
pub const AVRO_CODEC: &str = "avro.codec";
pub const JSON_DECIMAL_FORMAT: &str = "json.decimal.format";
pub const BYTEARRAY_EXTENSION: &str = "format.bytearray.extension";
pub const BYTEARRAY_SEPARATOR: &str = "format.bytearray.separator";
pub const PARTITIONER_CLASS: &str = "partitioner.class";
pub const PARTITION_FIELD_NAME: &str = "partition.field.name";
pub const PARTITION_DURATION_MS: &str = "partition.duration.ms";
pub const PATH_FORMAT: &str = "path.format";
pub const LOCALE: &str = "locale";
pub const TIMEZONE: &str = "timezone";
pub const TIMESTAMP_EXTRACTOR: &str = "timestamp.extractor";
pub const TIMESTAMP_FIELD: &str = "timestamp.field";
pub const BEHAVIOR_ON_NULL_VALUES: &str = "behavior.on.null.values";
pub const SCHEMA_COMPATIBILITY: &str = "schema.compatibility";
pub const ZERO_PAD_WIDTH: &str = "filename.offset.zero.pad.width";
pub const SSEA: &str = "s3.ssea.name";
pub const SSE_CUSTOMER_KEY: &str = "s3.sse.customer.key";
pub const SSE_KMS_KEY_ID: &str = "s3.sse.kms.key.id";
pub const ACL_CANNED: &str = "s3.acl.canned";
/// sluice's own key (Confluent has none): the most bytes a topic partition's open objects
/// may hold in memory before they are all uploaded early.
pub const OPEN_BYTES_MAX: &str = "s3.open.objects.max.bytes";
/// 256 MiB: far above what one object holds (under about two parts), so it only cuts objects
/// early when many are open at once (a FieldPartitioner with many values, a big flush.size).
pub const DEFAULT_OPEN_BYTES_MAX: &str = "268435456";
pub const MIN_OPEN_BYTES_MAX: i64 = 1024 * 1024;

/// `s3.ssea.name` values: SSE-S3 (or SSE-C with a customer key), SSE-KMS, dual-layer SSE-KMS.
pub const SSEA_AES256: &str = "AES256";
pub const SSEA_KMS: &str = "aws:kms";
pub const SSEA_KMS_DSSE: &str = "aws:kms:dsse";
/// The canned ACLs S3 accepts (`x-amz-acl`), as Confluent's `CannedAclValidator` lists them.
pub const CANNED_ACLS: &[&str] = &[
    "private",
    "public-read",
    "public-read-write",
    "authenticated-read",
    "log-delivery-write",
    "bucket-owner-read",
    "bucket-owner-full-control",
    "aws-exec-read",
];

pub const DEFAULT_REGION: &str = "us-west-2";
/// 25 MiB, as Confluent; S3 needs at least 5 MiB for every part but the last.
pub const DEFAULT_PART_SIZE: &str = "26214400";
pub const MIN_PART_SIZE: i64 = 5 * 1024 * 1024;
pub const DEFAULT_PART_RETRIES: &str = "3";
pub const DEFAULT_RETRY_BACKOFF_MS: &str = "200";
pub const DEFAULT_TOPICS_DIR: &str = "topics";
pub const DEFAULT_ZERO_PAD_WIDTH: &str = "10";
pub const STORAGE_CLASS_S3: &str = "io.confluent.connect.s3.storage.S3Storage";

pub const JSON_FORMAT: &str = "io.confluent.connect.s3.format.json.JsonFormat";
pub const AVRO_FORMAT: &str = "io.confluent.connect.s3.format.avro.AvroFormat";
pub const PARQUET_FORMAT: &str = "io.confluent.connect.s3.format.parquet.ParquetFormat";
pub const BYTEARRAY_FORMAT: &str = "io.confluent.connect.s3.format.bytearray.ByteArrayFormat";

pub const DEFAULT_PARTITIONER: &str = "io.confluent.connect.storage.partitioner.DefaultPartitioner";
pub const FIELD_PARTITIONER: &str = "io.confluent.connect.storage.partitioner.FieldPartitioner";
pub const TIME_BASED_PARTITIONER: &str = "io.confluent.connect.storage.partitioner.TimeBasedPartitioner";
pub const DAILY_PARTITIONER: &str = "io.confluent.connect.storage.partitioner.DailyPartitioner";
pub const HOURLY_PARTITIONER: &str = "io.confluent.connect.storage.partitioner.HourlyPartitioner";

/// Confluent keys this version does not implement. Setting one is a configuration error that
/// names it.
pub const UNSUPPORTED_KEYS: &[&str] = &[
    "s3.credentials.provider.class",
    "s3.sse.key",
    "s3.wan.mode",
    "s3.proxy.url",
    "s3.proxy.user",
    "s3.proxy.password",
    "s3.http.send.expect.continue",
    "s3.object.tagging",
    "s3.object.behavior.on.conflict",
    "s3.elastic.buffer.enable",
    "s3.elastic.buffer.init.capacity",
    "s3.retry.max.backoff.time.ms",
    "store.kafka.keys",
    "store.kafka.headers",
    "keys.format.class",
    "headers.format.class",
    "hive.integration",
    "hive.metastore.uris",
    "hive.database",
    "append.late.data",
    "report.null.values.to.dlq",
    "enhanced.avro.schema.support",
    "connect.meta.data",
    "schema.cache.size",
    "parquet.block.size",
    "parquet.page.size",
    "format.bytearray.schema.enable",
    "partition.field.format.path",
    "timestamp.unit",
    "topics.dir.format",
    "aws.session.token",
    "retry.backoff.ms",
    "shutdown.timeout.ms",
    "schema.generator.class",
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Json { gzip: bool },
    Avro(AvroCodec),
    Parquet(ParquetCodec),
    ByteArray { gzip: bool },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AvroCodec {
    Null,
    Deflate,
    Snappy,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParquetCodec {
    None,
    Snappy,
    Gzip,
    Zstd,
}

impl ParquetCodec {
    /// The infix parquet-mr puts before `.parquet` (`CompressionCodecName.getExtension()`).
    pub fn extension(self) -> &'static str {
        match self {
            Self::None => "",
            Self::Snappy => ".snappy",
            Self::Gzip => ".gz",
            Self::Zstd => ".zstd",
        }
    }
}

pub use crate::value_json::DecimalFormat;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PartitionerKind {
    Default,
    Field(Vec<String>),
    TimeBased(TimeBased),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimeBased {
    pub duration_ms: i64,
    pub path_format: String,
    pub timezone: String,
    pub extractor: TimestampExtractor,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TimestampExtractor {
    /// The record's own timestamp (deterministic).
    Record,
    /// A field of the value (deterministic).
    RecordField(String),
    /// The worker's clock when the record is written (not deterministic: see the module docs).
    Wallclock,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NullValues {
    Ignore,
    Fail,
    Write,
}

/// Server-side encryption of every object (`s3.ssea.name` and its keys).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Encryption {
    None,
    /// SSE-S3: `x-amz-server-side-encryption: AES256`.
    S3,
    /// SSE-KMS (`aws:kms`) or dual-layer SSE-KMS (`aws:kms:dsse`), with the bucket's default key
    /// when no key id is given.
    Kms {
        algorithm: &'static str,
        key_id: Option<String>,
    },
    /// SSE-C: the customer's 256-bit key (base64) and its MD5 (base64), sent with every write.
    Customer {
        key: Secret,
        key_md5: String,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compatibility {
    None,
    Backward,
    Forward,
    Full,
}

pub fn def() -> ConfigDef {
    let s = |name: &str, doc: &str| ConfigKey::new(name, ConfigType::String, Importance::High, doc);
    let long =
        |name: &str, default: &str, doc: &str| ConfigKey::new(name, ConfigType::Long, Importance::Medium, doc).default_value(default);
    ConfigDef::new()
        .define(s(BUCKET, "The S3 bucket objects are written to.").validator(Validator::NonEmpty))
        .define(s(REGION, "The AWS region of the bucket.").default_value(DEFAULT_REGION).validator(Validator::NonEmpty))
        .define(s(STORE_URL, "A custom endpoint of an S3-compatible store (e.g. http://127.0.0.1:9000); empty for AWS.").default_value(""))
        .define(
            ConfigKey::new(
                PATH_STYLE,
                ConfigType::Boolean,
                Importance::Low,
                "Path-style addressing (bucket in the path), used with store.url.",
            )
            .default_value("true"),
        )
        .define(
            ConfigKey::new(
                ACCESS_KEY_ID,
                ConfigType::String,
                Importance::High,
                "The AWS access key id; empty to use the default AWS credential chain.",
            )
            .default_value(""),
        )
        .define(ConfigKey::new(SECRET_ACCESS_KEY, ConfigType::Password, Importance::High, "The AWS secret access key.").default_value(""))
        .define(
            ConfigKey::new(
                SSEA,
                ConfigType::String,
                Importance::Low,
                "Server-side encryption: AES256 (SSE-S3, or SSE-C with s3.sse.customer.key), aws:kms or aws:kms:dsse; empty for none.",
            )
            .default_value("")
            .validator(Validator::one_of(&["", SSEA_AES256, SSEA_KMS, SSEA_KMS_DSSE])),
        )
        .define(
            ConfigKey::new(
                SSE_CUSTOMER_KEY,
                ConfigType::Password,
                Importance::Low,
                "SSE-C: the base64 of a 256-bit key S3 encrypts the objects with (with s3.ssea.name=AES256). Readers need the same key.",
            )
            .default_value(""),
        )
        .define(
            ConfigKey::new(
                SSE_KMS_KEY_ID,
                ConfigType::String,
                Importance::Low,
                "SSE-KMS: the KMS key id or ARN (with s3.ssea.name=aws:kms or aws:kms:dsse); empty for the bucket's default key.",
            )
            .default_value(""),
        )
        .define(
            ConfigKey::new(
                ACL_CANNED,
                ConfigType::String,
                Importance::Low,
                "A canned ACL set on every object (x-amz-acl); empty for none.",
            )
            .default_value("")
            .validator(Validator::OneOf(std::iter::once("").chain(CANNED_ACLS.iter().copied()).map(str::to_owned).collect())),
        )
        .define(
            ConfigKey::new(
                PART_SIZE,
                ConfigType::Int,
                Importance::High,
                "Size of each part of a multipart upload; also the most bytes buffered per open object.",
            )
            .default_value(DEFAULT_PART_SIZE)
            .validator(Validator::Between(MIN_PART_SIZE, i32::MAX as i64)),
        )
        .define(
            ConfigKey::new(
                OPEN_BYTES_MAX,
                ConfigType::Long,
                Importance::Low,
                "The most bytes the open objects of one topic partition hold in memory; past it they are all uploaded, as if flush.size were reached. Not a Confluent key.",
            )
            .default_value(DEFAULT_OPEN_BYTES_MAX)
            .validator(Validator::AtLeast(MIN_OPEN_BYTES_MAX)),
        )
        .define(
            ConfigKey::new(
                PART_RETRIES,
                ConfigType::Int,
                Importance::Medium,
                "Retries of one S3 request (5xx, throttling, timeouts) before the batch is redelivered.",
            )
            .default_value(DEFAULT_PART_RETRIES)
            .validator(Validator::AtLeast(0)),
        )
        .define(
            long(RETRY_BACKOFF_MS, DEFAULT_RETRY_BACKOFF_MS, "First backoff between retries of one S3 request; doubles each time.")
                .validator(Validator::AtLeast(0)),
        )
        .define(
            ConfigKey::new(
                COMPRESSION_TYPE,
                ConfigType::String,
                Importance::Low,
                "Compression of JSON and byte-array objects: none or gzip.",
            )
            .default_value("none")
            .validator(Validator::one_of(&["none", "gzip"])),
        )
        .define(
            ConfigKey::new(COMPRESSION_LEVEL, ConfigType::Int, Importance::Low, "gzip level, -1 for the default.")
                .default_value("-1")
                .validator(Validator::Between(-1, 9)),
        )
        .define(
            ConfigKey::new(STORAGE_CLASS, ConfigType::Class, Importance::High, "Must be io.confluent.connect.s3.storage.S3Storage.")
                .default_value(STORAGE_CLASS_S3),
        )
        .define(
            ConfigKey::new(TOPICS_DIR, ConfigType::String, Importance::High, "Top-level prefix of every object.")
                .default_value(DEFAULT_TOPICS_DIR),
        )
        .define(
            ConfigKey::new(DIRECTORY_DELIM, ConfigType::String, Importance::Low, "Directory delimiter of object names.")
                .default_value("/")
                .validator(Validator::NonEmpty),
        )
        .define(
            ConfigKey::new(
                FILE_DELIM,
                ConfigType::String,
                Importance::Low,
                "Delimiter between topic, partition and start offset in file names.",
            )
            .default_value("+")
            .validator(Validator::NonEmpty),
        )
        .define(
            ConfigKey::new(FLUSH_SIZE, ConfigType::Int, Importance::High, "Records per object before it is uploaded.")
                .validator(Validator::AtLeast(1)),
        )
        .define(long(
            ROTATE_INTERVAL_MS,
            "-1",
            "Largest span of record time (by the partitioner's timestamp extractor) in one object; -1 disables.",
        ))
        .define(long(
            ROTATE_SCHEDULE_INTERVAL_MS,
            "-1",
            "Wall-clock interval after which open objects are uploaded; -1 disables. Not deterministic: see the docs.",
        ))
        .define(
            ConfigKey::new(
                FORMAT_CLASS,
                ConfigType::Class,
                Importance::High,
                "The object format: JsonFormat, AvroFormat, ParquetFormat or ByteArrayFormat.",
            )
            .validator(Validator::NonEmpty),
        )
        .define(
            ConfigKey::new(PARQUET_CODEC, ConfigType::String, Importance::Low, "Parquet compression: none, snappy, gzip or zstd.")
                .default_value("snappy")
                .validator(Validator::one_of(&["none", "uncompressed", "snappy", "gzip", "zstd", "lz4", "lzo", "brotli"])),
        )
        .define(
            ConfigKey::new(AVRO_CODEC, ConfigType::String, Importance::Low, "Avro container codec: null, deflate or snappy.")
                .default_value("null")
                .validator(Validator::one_of(&["null", "deflate", "snappy", "bzip2", "xz", "zstandard"])),
        )
        .define(
            ConfigKey::new(
                JSON_DECIMAL_FORMAT,
                ConfigType::String,
                Importance::Low,
                "Decimals in JSON: BASE64 (of the unscaled bytes) or NUMERIC.",
            )
            .default_value("BASE64")
            .validator(Validator::one_of(&["BASE64", "NUMERIC"])),
        )
        .define(
            ConfigKey::new(BYTEARRAY_EXTENSION, ConfigType::String, Importance::Low, "Extension of ByteArrayFormat objects.")
                .default_value(".bin"),
        )
        .define(
            ConfigKey::new(
                BYTEARRAY_SEPARATOR,
                ConfigType::String,
                Importance::Low,
                "Written after each record by ByteArrayFormat (escapes \\n, \\r, \\t understood).",
            )
            .default_value("\\n"),
        )
        .define(
            ConfigKey::new(
                PARTITIONER_CLASS,
                ConfigType::Class,
                Importance::High,
                "DefaultPartitioner, FieldPartitioner, TimeBasedPartitioner, DailyPartitioner or HourlyPartitioner.",
            )
            .default_value(DEFAULT_PARTITIONER),
        )
        .define(
            ConfigKey::new(
                PARTITION_FIELD_NAME,
                ConfigType::List,
                Importance::Medium,
                "Value fields whose values name the directories (FieldPartitioner).",
            )
            .default_value(""),
        )
        .define(long(PARTITION_DURATION_MS, "-1", "Width of one time partition (TimeBasedPartitioner)."))
        .define(
            ConfigKey::new(
                PATH_FORMAT,
                ConfigType::String,
                Importance::Medium,
                "Joda-style pattern of the time partition directories, e.g. 'year'=YYYY/'month'=MM/'day'=dd.",
            )
            .default_value(""),
        )
        .define(
            ConfigKey::new(LOCALE, ConfigType::String, Importance::Medium, "Locale of path.format (month and day names are English).")
                .default_value(""),
        )
        .define(
            ConfigKey::new(
                TIMEZONE,
                ConfigType::String,
                Importance::Medium,
                "Time zone of the time partitions and of scheduled rotation, e.g. UTC.",
            )
            .default_value(""),
        )
        .define(
            ConfigKey::new(
                TIMESTAMP_EXTRACTOR,
                ConfigType::String,
                Importance::Medium,
                "Where the time of a record comes from: Record, RecordField or Wallclock.",
            )
            .default_value("Wallclock")
            .validator(Validator::one_of(&["Record", "RecordField", "Wallclock"])),
        )
        .define(
            ConfigKey::new(
                TIMESTAMP_FIELD,
                ConfigType::String,
                Importance::Medium,
                "The value field (dotted path) read by the RecordField extractor.",
            )
            .default_value("timestamp"),
        )
        .define(
            ConfigKey::new(
                BEHAVIOR_ON_NULL_VALUES,
                ConfigType::String,
                Importance::Low,
                "Records with a null value: fail, ignore, or write (JSON and byte-array formats).",
            )
            .default_value("fail")
            .validator(Validator::one_of(&["fail", "ignore", "write"])),
        )
        .define(
            ConfigKey::new(
                SCHEMA_COMPATIBILITY,
                ConfigType::String,
                Importance::Low,
                "When a new value schema starts a new object: NONE (any change), BACKWARD, FORWARD, FULL (by schema version).",
            )
            .default_value("NONE")
            .validator(Validator::one_of(&["NONE", "BACKWARD", "FORWARD", "FULL"])),
        )
        .define(
            ConfigKey::new(ZERO_PAD_WIDTH, ConfigType::Int, Importance::Low, "Digits of the start offset in object names.")
                .default_value(DEFAULT_ZERO_PAD_WIDTH)
                .validator(Validator::AtLeast(1)),
        )
}

/// The typed configuration of the connector and of each task.
#[derive(Debug, Clone)]
pub struct S3SinkConfig {
    pub bucket: String,
    pub region: String,
    pub store_url: Option<String>,
    pub path_style: bool,
    pub access_key_id: Option<String>,
    pub secret_access_key: Secret,
    pub encryption: Encryption,
    /// `x-amz-acl` of every object.
    pub canned_acl: Option<String>,
    pub part_size: usize,
    /// `s3.open.objects.max.bytes`.
    pub open_bytes_max: usize,
    pub part_retries: u32,
    pub retry_backoff_ms: u64,
    pub gzip_level: Option<u32>,
    pub topics_dir: String,
    pub directory_delim: String,
    pub file_delim: String,
    pub flush_size: u64,
    pub rotate_interval_ms: Option<i64>,
    pub rotate_schedule_interval_ms: Option<i64>,
    pub format: Format,
    pub decimal_format: DecimalFormat,
    pub bytearray_extension: String,
    pub bytearray_separator: Vec<u8>,
    pub partitioner: PartitionerKind,
    pub null_values: NullValues,
    pub compatibility: Compatibility,
    pub zero_pad_width: usize,
    /// Scheduled rotation's time zone (also the time partitioner's).
    pub timezone: Option<String>,
}

fn short(class: &str) -> &str {
    class.rsplit('.').next().unwrap_or(class)
}

/// The errors of keys or values this version rejects, as `(key, message)` pairs.
pub fn unsupported(props: &Props) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for key in props.keys() {
        if UNSUPPORTED_KEYS.contains(&key.as_str()) {
            out.push((key.clone(), format!("{key} is not supported yet by this connector; remove it")));
        }
    }
    let value = |k: &str| props.get(k).map(|v| v.trim().to_owned());
    if let Some(v) = value(FORMAT_CLASS) {
        if !matches!(short(&v), "JsonFormat" | "AvroFormat" | "ParquetFormat" | "ByteArrayFormat") {
            out.push((
                FORMAT_CLASS.to_owned(),
                format!("format.class={v} is not supported yet; use {JSON_FORMAT}, {AVRO_FORMAT}, {PARQUET_FORMAT} or {BYTEARRAY_FORMAT}"),
            ));
        }
    }
    if let Some(v) = value(PARTITIONER_CLASS) {
        if !matches!(
            short(&v),
            "DefaultPartitioner" | "FieldPartitioner" | "TimeBasedPartitioner" | "DailyPartitioner" | "HourlyPartitioner"
        ) {
            out.push((PARTITIONER_CLASS.to_owned(), format!("partitioner.class={v} is not supported yet; use DefaultPartitioner, FieldPartitioner, TimeBasedPartitioner, DailyPartitioner or HourlyPartitioner")));
        }
    }
    if let Some(v) = value(STORAGE_CLASS).filter(|v| v != STORAGE_CLASS_S3) {
        out.push((STORAGE_CLASS.to_owned(), format!("storage.class={v} is not supported; use {STORAGE_CLASS_S3}")));
    }
    if let Some(v) = value(PARQUET_CODEC).map(|v| v.to_ascii_lowercase()).filter(|v| matches!(v.as_str(), "lz4" | "lzo" | "brotli")) {
        out.push((PARQUET_CODEC.to_owned(), format!("parquet.codec={v} is not supported yet; use none, snappy, gzip or zstd")));
    }
    if let Some(v) = value(AVRO_CODEC).map(|v| v.to_ascii_lowercase()).filter(|v| matches!(v.as_str(), "bzip2" | "xz" | "zstandard")) {
        out.push((AVRO_CODEC.to_owned(), format!("avro.codec={v} is not supported yet; use null, deflate or snappy")));
    }
    out
}

/// The encryption `s3.ssea.name` and its keys ask for. Confluent's sink ignores a KMS key id
/// without `aws:kms` and a customer key without `AES256`; here they are errors, as a key that
/// would silently not be used is surely a mistake.
fn encryption(ssea: Option<String>, customer_key: Option<Secret>, kms_key_id: Option<String>) -> ConnectResult<Encryption> {
    let customer_key = customer_key.filter(|k| !k.expose().trim().is_empty());
    let ssea = ssea.map(|a| a.trim().to_owned()).unwrap_or_default();
    let kms = [SSEA_KMS, SSEA_KMS_DSSE].into_iter().find(|k| k.eq_ignore_ascii_case(&ssea));
    if kms_key_id.is_some() && kms.is_none() {
        return Err(ConnectError::config(
            SSE_KMS_KEY_ID,
            format!(
                "s3.sse.kms.key.id applies only with s3.ssea.name={SSEA_KMS} or {SSEA_KMS_DSSE}; set s3.ssea.name or remove the key id"
            ),
        ));
    }
    if customer_key.is_some() && !ssea.eq_ignore_ascii_case(SSEA_AES256) {
        return Err(ConnectError::config(
            SSE_CUSTOMER_KEY,
            format!("s3.sse.customer.key (SSE-C) applies only with s3.ssea.name={SSEA_AES256}; set s3.ssea.name=AES256 or remove the key"),
        ));
    }
    if let Some(algorithm) = kms {
        return Ok(Encryption::Kms { algorithm, key_id: kms_key_id });
    }
    if !ssea.eq_ignore_ascii_case(SSEA_AES256) {
        return Ok(Encryption::None);
    }
    let Some(key) = customer_key else { return Ok(Encryption::S3) };
    use base64::Engine as _;
    let b64 = base64::engine::general_purpose::STANDARD;
    let raw = b64.decode(key.expose().trim()).ok().filter(|k| k.len() == 32).ok_or_else(|| {
        ConnectError::config(SSE_CUSTOMER_KEY, "s3.sse.customer.key must be the base64 encoding of a 256-bit (32-byte) key")
    })?;
    use md5::Digest as _;
    let key_md5 = b64.encode(md5::Md5::digest(&raw));
    Ok(Encryption::Customer { key: Secret::new(b64.encode(&raw)), key_md5 })
}

fn unescape(s: &str) -> Vec<u8> {
    s.replace("\\n", "\n").replace("\\r", "\r").replace("\\t", "\t").into_bytes()
}

impl S3SinkConfig {
    pub fn parse(props: &Props) -> ConnectResult<Self> {
        if let Some((key, message)) = unsupported(props).into_iter().next() {
            return Err(ConnectError::config(key, message));
        }
        let c = def().parse(props)?;
        let lower = |k: &str| c.string(k).unwrap_or_default().to_ascii_lowercase();
        let positive = |k: &str| Some(c.int(k)).filter(|v| *v > 0);
        let gzip = lower(COMPRESSION_TYPE) == "gzip";
        let format_class = c.string(FORMAT_CLASS).unwrap_or_default();
        let format = match short(&format_class) {
            "JsonFormat" => Format::Json { gzip },
            "AvroFormat" => Format::Avro(match lower(AVRO_CODEC).as_str() {
                "deflate" => AvroCodec::Deflate,
                "snappy" => AvroCodec::Snappy,
                _ => AvroCodec::Null,
            }),
            "ParquetFormat" => Format::Parquet(match lower(PARQUET_CODEC).as_str() {
                "none" | "uncompressed" => ParquetCodec::None,
                "gzip" => ParquetCodec::Gzip,
                "zstd" => ParquetCodec::Zstd,
                _ => ParquetCodec::Snappy,
            }),
            _ => Format::ByteArray { gzip },
        };
        if gzip && !matches!(format, Format::Json { .. } | Format::ByteArray { .. }) {
            return Err(ConnectError::config(
                COMPRESSION_TYPE,
                "s3.compression.type=gzip applies to JsonFormat and ByteArrayFormat only; use parquet.codec or avro.codec",
            ));
        }
        let timezone = c.string(TIMEZONE);
        if let Some(tz) = &timezone {
            if jiff::tz::TimeZone::get(tz).is_err() {
                return Err(ConnectError::config(
                    TIMEZONE,
                    format!("unknown time zone {tz:?}; use an IANA name such as UTC or Europe/Paris"),
                ));
            }
        }
        let partitioner_class = c.string(PARTITIONER_CLASS).unwrap_or_default();
        let partitioner = match short(&partitioner_class) {
            "DefaultPartitioner" => PartitionerKind::Default,
            "FieldPartitioner" => {
                let fields = c.list(PARTITION_FIELD_NAME);
                if fields.is_empty() {
                    return Err(ConnectError::config(PARTITION_FIELD_NAME, "FieldPartitioner needs at least one field name"));
                }
                PartitionerKind::Field(fields)
            }
            kind => {
                let (duration_ms, path_format) = match kind {
                    "DailyPartitioner" => (24 * 3_600_000, "'year'=YYYY/'month'=MM/'day'=dd".to_owned()),
                    "HourlyPartitioner" => (3_600_000, "'year'=YYYY/'month'=MM/'day'=dd/'hour'=HH".to_owned()),
                    _ => {
                        let d = c.int(PARTITION_DURATION_MS);
                        if d <= 0 {
                            return Err(ConnectError::config(
                                PARTITION_DURATION_MS,
                                "TimeBasedPartitioner needs a positive partition.duration.ms",
                            ));
                        }
                        let f = c.string(PATH_FORMAT).unwrap_or_default();
                        if f.is_empty() {
                            return Err(ConnectError::config(
                                PATH_FORMAT,
                                "TimeBasedPartitioner needs path.format, e.g. 'year'=YYYY/'month'=MM/'day'=dd",
                            ));
                        }
                        (d, f)
                    }
                };
                if c.string(LOCALE).is_none() {
                    return Err(ConnectError::config(LOCALE, "Locale cannot be empty with a time-based partitioner (e.g. en-US)"));
                }
                let Some(tz) = timezone.clone() else {
                    return Err(ConnectError::config(TIMEZONE, "Timezone cannot be empty with a time-based partitioner (e.g. UTC)"));
                };
                crate::s3_sink::partitioner::PathFormat::parse(&path_format).map_err(|e| ConnectError::config(PATH_FORMAT, e))?;
                let extractor = match c.string(TIMESTAMP_EXTRACTOR).unwrap_or_default().to_ascii_lowercase().as_str() {
                    "record" => TimestampExtractor::Record,
                    "recordfield" => TimestampExtractor::RecordField(c.string(TIMESTAMP_FIELD).unwrap_or_else(|| "timestamp".to_owned())),
                    _ => TimestampExtractor::Wallclock,
                };
                PartitionerKind::TimeBased(TimeBased { duration_ms, path_format, timezone: tz, extractor })
            }
        };
        let rotate_schedule_interval_ms = positive(ROTATE_SCHEDULE_INTERVAL_MS);
        if rotate_schedule_interval_ms.is_some() && timezone.is_none() {
            return Err(ConnectError::config(
                TIMEZONE,
                "Timezone cannot be empty when using scheduled file rotation (rotate.schedule.interval.ms)",
            ));
        }
        let null_values = match lower(BEHAVIOR_ON_NULL_VALUES).as_str() {
            "ignore" => NullValues::Ignore,
            "write" => NullValues::Write,
            _ => NullValues::Fail,
        };
        if null_values == NullValues::Write && !matches!(format, Format::Json { .. } | Format::ByteArray { .. }) {
            return Err(ConnectError::config(
                BEHAVIOR_ON_NULL_VALUES,
                "behavior.on.null.values=write is not supported yet with Avro or Parquet (a null row has no schema); use ignore or fail",
            ));
        }
        let access_key_id = c.string(ACCESS_KEY_ID);
        let secret_access_key = c.password(SECRET_ACCESS_KEY).unwrap_or_default();
        if access_key_id.is_some() == secret_access_key.expose().is_empty() {
            return Err(ConnectError::config(
                ACCESS_KEY_ID,
                "set both aws.access.key.id and aws.secret.access.key, or neither (to use the default AWS credential chain)",
            ));
        }
        let encryption = encryption(c.string(SSEA), c.password(SSE_CUSTOMER_KEY), c.string(SSE_KMS_KEY_ID))?;
        let canned_acl = c.string(ACL_CANNED).map(|a| a.trim().to_ascii_lowercase());
        let level = c.int(COMPRESSION_LEVEL);
        Ok(Self {
            bucket: c.string(BUCKET).unwrap_or_default(),
            region: c.string(REGION).unwrap_or_else(|| DEFAULT_REGION.to_owned()),
            store_url: c.string(STORE_URL),
            path_style: c.boolean(PATH_STYLE),
            access_key_id,
            secret_access_key,
            encryption,
            canned_acl,
            part_size: c.int(PART_SIZE) as usize,
            open_bytes_max: c.int(OPEN_BYTES_MAX) as usize,
            part_retries: c.int(PART_RETRIES) as u32,
            retry_backoff_ms: c.int(RETRY_BACKOFF_MS) as u64,
            gzip_level: (level >= 0).then_some(level as u32),
            topics_dir: c.string(TOPICS_DIR).unwrap_or_default(),
            directory_delim: c.string(DIRECTORY_DELIM).unwrap_or_else(|| "/".to_owned()),
            file_delim: c.string(FILE_DELIM).unwrap_or_else(|| "+".to_owned()),
            flush_size: c.int(FLUSH_SIZE) as u64,
            rotate_interval_ms: positive(ROTATE_INTERVAL_MS),
            rotate_schedule_interval_ms,
            format,
            decimal_format: if lower(JSON_DECIMAL_FORMAT) == "numeric" { DecimalFormat::Numeric } else { DecimalFormat::Base64 },
            bytearray_extension: props.get(BYTEARRAY_EXTENSION).cloned().unwrap_or_else(|| ".bin".to_owned()),
            bytearray_separator: unescape(props.get(BYTEARRAY_SEPARATOR).map(String::as_str).unwrap_or("\\n")),
            partitioner,
            null_values,
            compatibility: match lower(SCHEMA_COMPATIBILITY).as_str() {
                "backward" => Compatibility::Backward,
                "forward" => Compatibility::Forward,
                "full" => Compatibility::Full,
                _ => Compatibility::None,
            },
            zero_pad_width: c.int(ZERO_PAD_WIDTH) as usize,
            timezone,
        })
    }

    /// The extension of the objects, as Confluent names them.
    pub fn extension(&self) -> String {
        match self.format {
            Format::Json { gzip: false } => ".json".to_owned(),
            Format::Json { gzip: true } => ".json.gz".to_owned(),
            Format::Avro(_) => ".avro".to_owned(),
            Format::Parquet(codec) => format!("{}.parquet", codec.extension()),
            Format::ByteArray { gzip: true } => format!("{}.gz", self.bytearray_extension),
            Format::ByteArray { gzip: false } => self.bytearray_extension.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn props(pairs: &[(&str, &str)]) -> Props {
        let mut p: Props = [("s3.bucket.name", "b"), ("flush.size", "3"), ("format.class", JSON_FORMAT)]
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        p.extend(pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())));
        p
    }

    #[test]
    fn defaults_and_names() {
        let c = S3SinkConfig::parse(&props(&[])).unwrap();
        assert_eq!(c.region, "us-west-2");
        assert_eq!(c.topics_dir, "topics");
        assert_eq!(c.part_size, 26_214_400);
        assert_eq!(c.open_bytes_max, 268_435_456);
        assert_eq!(c.extension(), ".json");
        assert_eq!(c.partitioner, PartitionerKind::Default);
        assert_eq!(c.null_values, NullValues::Fail);
        let c = S3SinkConfig::parse(&props(&[("s3.compression.type", "gzip")])).unwrap();
        assert_eq!(c.extension(), ".json.gz");
        let c = S3SinkConfig::parse(&props(&[("format.class", PARQUET_FORMAT)])).unwrap();
        assert_eq!(c.extension(), ".snappy.parquet");
        let c = S3SinkConfig::parse(&props(&[("format.class", PARQUET_FORMAT), ("parquet.codec", "none")])).unwrap();
        assert_eq!(c.extension(), ".parquet");
        let c = S3SinkConfig::parse(&props(&[("format.class", PARQUET_FORMAT), ("parquet.codec", "zstd")])).unwrap();
        assert_eq!(c.extension(), ".zstd.parquet");
        let c = S3SinkConfig::parse(&props(&[("format.class", AVRO_FORMAT)])).unwrap();
        assert_eq!(c.extension(), ".avro");
    }

    #[test]
    fn rejected_keys_and_values_are_named() {
        let err = S3SinkConfig::parse(&props(&[("store.kafka.keys", "true")])).unwrap_err().to_string();
        assert!(err.contains("store.kafka.keys is not supported yet"), "{err}");
        let err = S3SinkConfig::parse(&props(&[("format.class", "io.confluent.connect.s3.format.csv.CsvFormat")])).unwrap_err().to_string();
        assert!(err.contains("not supported yet"), "{err}");
        let err = S3SinkConfig::parse(&props(&[("parquet.codec", "lz4")])).unwrap_err().to_string();
        assert!(err.contains("parquet.codec=lz4 is not supported yet"), "{err}");
        let err = S3SinkConfig::parse(&props(&[("partitioner.class", TIME_BASED_PARTITIONER)])).unwrap_err().to_string();
        assert!(err.contains("partition.duration.ms"), "{err}");
        let err = S3SinkConfig::parse(&props(&[("partitioner.class", DAILY_PARTITIONER), ("locale", "en")])).unwrap_err().to_string();
        assert!(err.contains("Timezone cannot be empty"), "{err}");
        let err = S3SinkConfig::parse(&props(&[("s3.part.size", "1000")])).unwrap_err().to_string();
        assert!(err.contains("s3.part.size"), "{err}");
        let err = S3SinkConfig::parse(&props(&[("aws.access.key.id", "x")])).unwrap_err().to_string();
        assert!(err.contains("aws.secret.access.key"), "{err}");
        let err =
            S3SinkConfig::parse(&props(&[("format.class", AVRO_FORMAT), ("behavior.on.null.values", "write")])).unwrap_err().to_string();
        assert!(err.contains("not supported yet"), "{err}");
    }

    #[test]
    fn encryption_and_acl_keys() {
        assert_eq!(S3SinkConfig::parse(&props(&[])).unwrap().encryption, Encryption::None);
        assert_eq!(S3SinkConfig::parse(&props(&[("s3.ssea.name", "")])).unwrap().encryption, Encryption::None);
        assert_eq!(S3SinkConfig::parse(&props(&[("s3.ssea.name", "AES256")])).unwrap().encryption, Encryption::S3);
        let c = S3SinkConfig::parse(&props(&[("s3.ssea.name", "aws:kms"), ("s3.sse.kms.key.id", "alias/k")])).unwrap();
        assert_eq!(c.encryption, Encryption::Kms { algorithm: "aws:kms", key_id: Some("alias/k".into()) });
        let c = S3SinkConfig::parse(&props(&[("s3.ssea.name", "aws:kms:dsse")])).unwrap();
        assert_eq!(c.encryption, Encryption::Kms { algorithm: "aws:kms:dsse", key_id: None });
        // SSE-C: 32 zero bytes; the MD5 is of the decoded key (python3: hashlib.md5(bytes(32))).
        let key = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=";
        let c = S3SinkConfig::parse(&props(&[("s3.ssea.name", "AES256"), ("s3.sse.customer.key", key)])).unwrap();
        let Encryption::Customer { key: k, key_md5 } = &c.encryption else { panic!("{:?}", c.encryption) };
        assert_eq!((k.expose(), key_md5.as_str()), (key, "cLyPS3KoaSFGi/joRB3OUQ=="));
        assert!(!format!("{c:?}").contains(key), "the customer key is redacted in Debug");
        let c = S3SinkConfig::parse(&props(&[("s3.acl.canned", "bucket-owner-full-control")])).unwrap();
        assert_eq!(c.canned_acl.as_deref(), Some("bucket-owner-full-control"));
        assert_eq!(S3SinkConfig::parse(&props(&[])).unwrap().canned_acl, None);

        let err = |pairs: &[(&str, &str)]| S3SinkConfig::parse(&props(pairs)).unwrap_err();
        for (pairs, key) in [
            (&[("s3.ssea.name", "AES128")][..], "s3.ssea.name"),
            (&[("s3.sse.kms.key.id", "k")][..], "s3.sse.kms.key.id"),
            (&[("s3.ssea.name", "AES256"), ("s3.sse.kms.key.id", "k")][..], "s3.sse.kms.key.id"),
            (&[("s3.sse.customer.key", key)][..], "s3.sse.customer.key"),
            (&[("s3.ssea.name", "aws:kms"), ("s3.sse.customer.key", key)][..], "s3.sse.customer.key"),
            (&[("s3.ssea.name", "AES256"), ("s3.sse.customer.key", "c2hvcnQ=")][..], "s3.sse.customer.key"),
            (&[("s3.acl.canned", "world-writable")][..], "s3.acl.canned"),
        ] {
            let e = err(pairs);
            assert!(e.to_string().contains(key), "{pairs:?}: {e}");
            assert!(!e.to_string().contains("c2hvcnQ="), "a rejected customer key is not echoed: {e}");
        }
    }

    #[test]
    fn daily_partitioner_fills_in_its_format() {
        let c = S3SinkConfig::parse(&props(&[
            ("partitioner.class", DAILY_PARTITIONER),
            ("locale", "en-US"),
            ("timezone", "UTC"),
            ("timestamp.extractor", "Record"),
        ]))
        .unwrap();
        let PartitionerKind::TimeBased(t) = c.partitioner else { panic!() };
        assert_eq!(t.duration_ms, 86_400_000);
        assert_eq!(t.extractor, TimestampExtractor::Record);
    }
}
