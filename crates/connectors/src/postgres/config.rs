//! Debezium's Postgres connector keys that this version implements, their defaults, the
//! typed configuration, and the Debezium keys it rejects by name because they are not
//! implemented yet (a key that changes behaviour is never silently ignored).

use super::catalog::TableId;
use super::column::{ColumnRules, KeyColumns};
use super::names::{NameAdjust, TopicNaming};
use super::transaction::TransactionTopic;
use crate::signal_kafka::KafkaSignalConfig;
use crate::pg_tls::{PgTls, SslMode, SOURCE_KEYS};
use regex::{Regex, RegexBuilder};
use sluice_api::{ConfigDef, ConfigKey, ConfigType, ConnectError, ConnectResult, Importance, Props, Secret, Validator};

pub const HOSTNAME: &str = "database.hostname";
pub const PORT: &str = "database.port";
pub const USER: &str = "database.user";
pub const PASSWORD: &str = "database.password";
pub const DBNAME: &str = "database.dbname";
pub const SSLMODE: &str = "database.sslmode";
pub const SSLROOTCERT: &str = "database.sslrootcert";
pub const SSLCERT: &str = "database.sslcert";
pub const SSLKEY: &str = "database.sslkey";
pub const SSLPASSWORD: &str = "database.sslpassword";
pub const SSLFACTORY: &str = "database.sslfactory";
pub const TOPIC_PREFIX: &str = "topic.prefix";
pub const PLUGIN_NAME: &str = "plugin.name";
pub const SLOT_NAME: &str = "slot.name";
pub const SLOT_DROP_ON_STOP: &str = "slot.drop.on.stop";
pub const PUBLICATION_NAME: &str = "publication.name";
pub const PUBLICATION_AUTOCREATE_MODE: &str = "publication.autocreate.mode";
pub const SCHEMA_INCLUDE_LIST: &str = "schema.include.list";
pub const SCHEMA_EXCLUDE_LIST: &str = "schema.exclude.list";
pub const TABLE_INCLUDE_LIST: &str = "table.include.list";
pub const TABLE_EXCLUDE_LIST: &str = "table.exclude.list";
pub const SNAPSHOT_MODE: &str = "snapshot.mode";
pub const SNAPSHOT_FETCH_SIZE: &str = "snapshot.fetch.size";
pub const SNAPSHOT_MAX_THREADS: &str = "snapshot.max.threads";
/// Debezium 3's switch between splitting tables into chunks over the snapshot threads
/// (`false`, its default) and one table per thread (`true`, what this version does).
pub const LEGACY_SNAPSHOT_MAX_THREADS: &str = "legacy.snapshot.max.threads";
pub const DECIMAL_HANDLING_MODE: &str = "decimal.handling.mode";
pub const TIME_PRECISION_MODE: &str = "time.precision.mode";
pub const BINARY_HANDLING_MODE: &str = "binary.handling.mode";
pub const INTERVAL_HANDLING_MODE: &str = "interval.handling.mode";
pub const HSTORE_HANDLING_MODE: &str = "hstore.handling.mode";
pub const MONEY_FRACTION_DIGITS: &str = "money.fraction.digits";
pub const UNAVAILABLE_VALUE_PLACEHOLDER: &str = "unavailable.value.placeholder";
pub const TOMBSTONES_ON_DELETE: &str = "tombstones.on.delete";
pub const SKIPPED_OPERATIONS: &str = "skipped.operations";
pub const MAX_BATCH_SIZE: &str = "max.batch.size";
pub const MAX_QUEUE_SIZE: &str = "max.queue.size";
pub const POLL_INTERVAL_MS: &str = "poll.interval.ms";
pub const HEARTBEAT_INTERVAL_MS: &str = "heartbeat.interval.ms";
pub const HEARTBEAT_ACTION_QUERY: &str = "heartbeat.action.query";
/// Read by the runtime's source loop (`SourceRunner::max_retries`).
pub const ERRORS_MAX_RETRIES: &str = "errors.max.retries";
pub const PROVIDE_TRANSACTION_METADATA: &str = "provide.transaction.metadata";
pub const TOPIC_TRANSACTION: &str = "topic.transaction";
pub const TOPIC_NAMING_STRATEGY: &str = "topic.naming.strategy";
pub const TOPIC_DELIMITER: &str = "topic.delimiter";
pub const TOPIC_HEARTBEAT_PREFIX: &str = "topic.heartbeat.prefix";
pub const SCHEMA_NAME_ADJUSTMENT_MODE: &str = "schema.name.adjustment.mode";
pub const FIELD_NAME_ADJUSTMENT_MODE: &str = "field.name.adjustment.mode";
pub const SNAPSHOT_LOCKING_MODE: &str = "snapshot.locking.mode";
pub const SNAPSHOT_LOCK_TIMEOUT_MS: &str = "snapshot.lock.timeout.ms";
pub const SNAPSHOT_SELECT_STATEMENT_OVERRIDES: &str = "snapshot.select.statement.overrides";
pub const PUBLISH_VIA_PARTITION_ROOT: &str = "publish.via.partition.root";
pub const CONVERTERS: &str = "converters";
pub const POST_PROCESSORS: &str = "post.processors";
/// Debezium's topic naming strategies, which name a Postgres table's topic
/// `<topic.prefix>.<schema>.<table>` (the first is Debezium's default).
pub const TOPIC_NAMING_STRATEGIES: &[&str] = &["io.debezium.schema.SchemaTopicNamingStrategy", "io.debezium.schema.DefaultTopicNamingStrategy"];
pub const DEFAULT_HEARTBEAT_PREFIX: &str = "__debezium-heartbeat";
pub const STATUS_UPDATE_INTERVAL_MS: &str = "status.update.interval.ms";
pub const SIGNAL_DATA_COLLECTION: &str = "signal.data.collection";
pub const SIGNAL_ENABLED_CHANNELS: &str = "signal.enabled.channels";
pub const READ_ONLY: &str = "read.only";
pub const INCREMENTAL_SNAPSHOT_CHUNK_SIZE: &str = "incremental.snapshot.chunk.size";
pub const INCREMENTAL_SNAPSHOT_WATERMARKING_STRATEGY: &str = "incremental.snapshot.watermarking.strategy";
pub use super::column::{COLUMN_EXCLUDE_LIST, COLUMN_INCLUDE_LIST, MESSAGE_KEY_COLUMNS};
pub use super::message::{PrefixFilter, MESSAGE_PREFIX_EXCLUDE_LIST, MESSAGE_PREFIX_INCLUDE_LIST};

pub const DEFAULT_PORT: &str = "5432";
pub const DEFAULT_SSLMODE: &str = "prefer";
/// pgJDBC's socket factories this version understands (`database.sslfactory`).
pub const LIBPQ_FACTORY: &str = "org.postgresql.ssl.LibPQFactory";
pub const NON_VALIDATING_FACTORY: &str = "org.postgresql.ssl.NonValidatingFactory";
pub const DEFAULT_PLUGIN: &str = "pgoutput";
pub const DEFAULT_SLOT: &str = "debezium";
pub const DEFAULT_PUBLICATION: &str = "dbz_publication";
pub const DEFAULT_AUTOCREATE: &str = "all_tables";
pub const DEFAULT_SNAPSHOT_MODE: &str = "initial";
pub const DEFAULT_FETCH_SIZE: &str = "10240";
pub const DEFAULT_SNAPSHOT_MAX_THREADS: &str = "1";
pub const DEFAULT_MAX_BATCH_SIZE: &str = "2048";
pub const DEFAULT_MAX_QUEUE_SIZE: &str = "8192";
pub const DEFAULT_POLL_INTERVAL_MS: &str = "500";
pub const DEFAULT_STATUS_UPDATE_INTERVAL_MS: &str = "10000";
pub const DEFAULT_INCREMENTAL_SNAPSHOT_CHUNK_SIZE: &str = "1024";
pub const DEFAULT_MONEY_FRACTION_DIGITS: &str = "2";
/// Debezium's placeholder for an unchanged TOASTed value that pgoutput did not send.
pub const DEFAULT_UNAVAILABLE_VALUE_PLACEHOLDER: &str = "__debezium_unavailable_value";

/// Debezium keys this version does not implement. Setting one is a configuration error
/// that names it, instead of a silent difference in behaviour.
pub const UNSUPPORTED_KEYS: &[&str] = &[
    "database.server.name",
    "database.tcpKeepAlive",
    "database.initial.statements",
    "database.query.timeout.ms",
    "column.propagate.source.type",
    "datatype.propagate.source.type",
    "include.unknown.datatypes",
    "sanitize.field.names",
    "slot.stream.params",
    "slot.max.retries",
    "slot.retry.delay.ms",
    "slot.failover",
    "replica.identity.autoset.values",
    "snapshot.include.collection.list",
    "snapshot.query.mode",
    "snapshot.isolation.mode",
    "snapshot.mode.class",
    "snapshot.mode.custom.name",
    "snapshot.max.threads.multiplier",
    "snapshot.delay.ms",
    "streaming.delay.ms",
    "xmin.fetch.interval.ms",
    "event.processing.failure.handling.mode",
    "max.queue.size.in.bytes",
    "notification.enabled.channels",
    "table.ignore.builtin",
    "schema.refresh.mode",
    "flush.lsn.source",
    "lsn.flush.timeout.ms",
    "lsn.flush.timeout.action",
    "custom.metric.tags",
    "skip.messages.without.change",
    "retriable.restart.connector.wait.ms",
    "query.fetch.size",
    "include.schema.changes",
    "include.schema.comments",
];

/// Prefixes of Debezium's keys this version does not implement (none at the moment: the
/// per-column mappers `column.mask.…`/`column.truncate.to.…` are read by `column.rs`).
pub const UNSUPPORTED_PREFIXES: &[&str] = &[];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DecimalMode {
    Precise,
    Double,
    String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeMode {
    Adaptive,
    AdaptiveTimeMicroseconds,
    Connect,
}

/// `binary.handling.mode`: how bytea values (also in arrays) are carried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BinaryMode {
    /// Connect BYTES.
    Bytes,
    /// A STRING, base64 with padding (Java's `Base64.getEncoder()`).
    Base64,
    /// A STRING, base64 with the URL-safe alphabet and padding (`Base64.getUrlEncoder()`).
    Base64UrlSafe,
    /// A STRING, lowercase hex without prefix.
    Hex,
}

/// `interval.handling.mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IntervalMode {
    /// `io.debezium.time.MicroDuration`: approximate microseconds.
    Numeric,
    /// `io.debezium.time.Interval`: `P<y>Y<m>M<d>DT<h>H<m>M<s>S`.
    String,
}

/// `hstore.handling.mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HstoreMode {
    /// `io.debezium.data.Json`: a JSON object of strings.
    Json,
    /// A Connect MAP of string to optional string.
    Map,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SnapshotMode {
    /// Snapshot when there is no completed snapshot in the offsets, then stream.
    Initial,
    /// Snapshot like `Initial`, then stop without streaming.
    InitialOnly,
    /// Never snapshot; stream from the offset or the slot (`no_data`, formerly `never`).
    NoData,
    /// Snapshot at every start, then stream.
    Always,
    /// Like `Initial`, and also when the stored position is no longer available.
    WhenNeeded,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AutocreateMode {
    AllTables,
    Disabled,
    Filtered,
}

pub fn def() -> ConfigDef {
    let s = |name: &str, doc: &str| ConfigKey::new(name, ConfigType::String, Importance::High, doc);
    let mut def = ConfigDef::new();
    for key in crate::signal_kafka::keys() {
        def = def.define(key);
    }
    def
        .define(s(HOSTNAME, "Resolvable hostname or IP address of the database server.").validator(Validator::NonEmpty))
        .define(ConfigKey::new(PORT, ConfigType::Int, Importance::High, "Port of the database server.").default_value(DEFAULT_PORT).validator(Validator::Between(1, 65535)))
        .define(s(USER, "Name of the database user; needs the REPLICATION attribute.").validator(Validator::NonEmpty))
        .define(ConfigKey::new(PASSWORD, ConfigType::Password, Importance::High, "Password of the database user.").default_value(""))
        .define(s(DBNAME, "The database to capture changes from.").validator(Validator::NonEmpty))
        .define(
            ConfigKey::new(SSLMODE, ConfigType::String, Importance::Medium, "Whether to use an encrypted connection: disable, prefer (TLS when the server offers it), require, verify-ca or verify-full.")
                .default_value(DEFAULT_SSLMODE)
                .validator(Validator::one_of(&["disable", "prefer", "allow", "require", "verify-ca", "verify-full"])),
        )
        .define(
            ConfigKey::new(SSLROOTCERT, ConfigType::String, Importance::Medium, "PEM file of the certificate authorities that sign the server's certificate (verify-ca, verify-full; with require it is checked too).")
                .default_value(""),
        )
        .define(
            ConfigKey::new(SSLCERT, ConfigType::String, Importance::Medium, "File of the client certificate presented to the server (PEM, the chain leaf first, or DER); needs database.sslkey.")
                .default_value(""),
        )
        .define(
            ConfigKey::new(SSLKEY, ConfigType::String, Importance::Medium, "File of the client certificate's private key: PEM (PKCS#8, PKCS#1 RSA, SEC1 EC) or DER PKCS#8 (.pk8); encrypted PKCS#8 with database.sslpassword.")
                .default_value(""),
        )
        .define(
            ConfigKey::new(SSLPASSWORD, ConfigType::Password, Importance::Medium, "Password of an encrypted database.sslkey.")
                .default_value(""),
        )
        .define(
            ConfigKey::new(SSLFACTORY, ConfigType::String, Importance::Low, "pgJDBC's socket factory: org.postgresql.ssl.LibPQFactory (the libpq settings above) or org.postgresql.ssl.NonValidatingFactory (the server certificate is not checked, as sslmode=require).")
                .default_value(""),
        )
        .define(s(TOPIC_PREFIX, "Prefix of every topic name, and the logical name of this server in offsets and in source.name.").validator(Validator::NonEmpty))
        .define(
            ConfigKey::new(PLUGIN_NAME, ConfigType::String, Importance::Medium, "The logical decoding plugin; this version supports pgoutput only.")
                .default_value(DEFAULT_PLUGIN)
                .validator(Validator::one_of(&["pgoutput", "decoderbufs", "wal2json", "wal2json_streaming", "wal2json_rds", "wal2json_rds_streaming"])),
        )
        .define(ConfigKey::new(SLOT_NAME, ConfigType::String, Importance::Medium, "Name of the logical replication slot.").default_value(DEFAULT_SLOT).validator(Validator::NonEmpty))
        .define(ConfigKey::new(SLOT_DROP_ON_STOP, ConfigType::Boolean, Importance::Low, "Drop the slot when the task stops gracefully (for tests).").default_value("false"))
        .define(ConfigKey::new(PUBLICATION_NAME, ConfigType::String, Importance::Medium, "Name of the publication pgoutput reads.").default_value(DEFAULT_PUBLICATION).validator(Validator::NonEmpty))
        .define(
            ConfigKey::new(PUBLICATION_AUTOCREATE_MODE, ConfigType::String, Importance::Medium, "all_tables: create the publication for all tables when missing; filtered: create it (or set its tables) for the included tables; disabled: the publication must exist.")
                .default_value(DEFAULT_AUTOCREATE)
                .validator(Validator::one_of(&["all_tables", "disabled", "filtered"])),
        )
        .define(ConfigKey::new(SCHEMA_INCLUDE_LIST, ConfigType::List, Importance::Medium, "Regular expressions of the schemas to capture.").default_value(""))
        .define(ConfigKey::new(SCHEMA_EXCLUDE_LIST, ConfigType::List, Importance::Medium, "Regular expressions of the schemas not to capture.").default_value(""))
        .define(ConfigKey::new(TABLE_INCLUDE_LIST, ConfigType::List, Importance::Medium, "Regular expressions of the tables (schema.table) to capture.").default_value(""))
        .define(ConfigKey::new(TABLE_EXCLUDE_LIST, ConfigType::List, Importance::Medium, "Regular expressions of the tables (schema.table) not to capture.").default_value(""))
        .define(ConfigKey::new(MESSAGE_PREFIX_INCLUDE_LIST, ConfigType::List, Importance::Low, "Regular expressions of the logical decoding message prefixes to emit (pg_logical_emit_message; default: all).").default_value(""))
        .define(ConfigKey::new(MESSAGE_PREFIX_EXCLUDE_LIST, ConfigType::List, Importance::Low, "Regular expressions of the logical decoding message prefixes not to emit.").default_value(""))
        .define(
            ConfigKey::new(SNAPSHOT_MODE, ConfigType::String, Importance::Medium, "When to take a snapshot: initial, initial_only, no_data (or never), always, when_needed.")
                .default_value(DEFAULT_SNAPSHOT_MODE)
                .validator(Validator::one_of(&["initial", "initial_only", "no_data", "never", "always", "when_needed", "configuration_based", "custom", "recovery"])),
        )
        .define(
            ConfigKey::new(SNAPSHOT_MAX_THREADS, ConfigType::Int, Importance::Medium, "The most tables the initial snapshot reads at once, each on a database session of its own; all of them read the same snapshot.")
                .default_value(DEFAULT_SNAPSHOT_MAX_THREADS)
                .validator(Validator::AtLeast(1)),
        )
        .define(ConfigKey::new(SNAPSHOT_FETCH_SIZE, ConfigType::Int, Importance::Medium, "Rows fetched per round trip while snapshotting.").default_value(DEFAULT_FETCH_SIZE).validator(Validator::AtLeast(1)))
        .define(
            ConfigKey::new(DECIMAL_HANDLING_MODE, ConfigType::String, Importance::Medium, "How numeric columns are represented: precise (Decimal), double or string.")
                .default_value("precise")
                .validator(Validator::one_of(&["precise", "double", "string"])),
        )
        .define(
            ConfigKey::new(TIME_PRECISION_MODE, ConfigType::String, Importance::Medium, "How temporal columns are represented: adaptive, adaptive_time_microseconds or connect.")
                .default_value("adaptive")
                .validator(Validator::one_of(&["adaptive", "adaptive_time_microseconds", "connect"])),
        )
        .define(
            ConfigKey::new(BINARY_HANDLING_MODE, ConfigType::String, Importance::Low, "How bytea columns (also bytea[]) are represented: bytes, base64, base64-url-safe or hex (the last three as strings).")
                .default_value("bytes")
                .validator(Validator::one_of(&["bytes", "base64", "base64-url-safe", "hex"])),
        )
        .define(
            ConfigKey::new(INTERVAL_HANDLING_MODE, ConfigType::String, Importance::Low, "How interval columns are represented: numeric (approximate microseconds) or string (ISO 8601, P<years>Y<months>M<days>DT<hours>H<minutes>M<seconds>S).")
                .default_value("numeric")
                .validator(Validator::one_of(&["numeric", "string"])),
        )
        .define(
            ConfigKey::new(HSTORE_HANDLING_MODE, ConfigType::String, Importance::Low, "How hstore columns are represented: json (a JSON object as a string) or map (a map of string to optional string).")
                .default_value("json")
                .validator(Validator::one_of(&["json", "map"])),
        )
        .define(
            ConfigKey::new(MONEY_FRACTION_DIGITS, ConfigType::Short, Importance::Low, "Digits after the decimal point of money values when decimal.handling.mode=precise (rounded half up).")
                .default_value(DEFAULT_MONEY_FRACTION_DIGITS)
                .validator(Validator::AtLeast(0)),
        )
        .define(
            ConfigKey::new(UNAVAILABLE_VALUE_PLACEHOLDER, ConfigType::String, Importance::Medium, "The value standing for an unchanged TOASTed column that the database did not send; with the prefix hex: the rest is hexadecimal octets.")
                .default_value(DEFAULT_UNAVAILABLE_VALUE_PLACEHOLDER),
        )
        .define(ConfigKey::new(TOMBSTONES_ON_DELETE, ConfigType::Boolean, Importance::Medium, "Emit a tombstone (null value) after each delete event.").default_value("true"))
        .define(ConfigKey::new(SKIPPED_OPERATIONS, ConfigType::List, Importance::Low, "Operations not to emit: c, u, d, t, or none.").default_value("t"))
        .define(ConfigKey::new(MAX_BATCH_SIZE, ConfigType::Int, Importance::Medium, "Most records returned by one poll.").default_value(DEFAULT_MAX_BATCH_SIZE).validator(Validator::AtLeast(1)))
        .define(ConfigKey::new(MAX_QUEUE_SIZE, ConfigType::Int, Importance::Medium, "Most replication events buffered between the stream reader and poll.").default_value(DEFAULT_MAX_QUEUE_SIZE).validator(Validator::AtLeast(1)))
        .define(ConfigKey::new(POLL_INTERVAL_MS, ConfigType::Long, Importance::Low, "Longest wait of one poll for new events.").default_value(DEFAULT_POLL_INTERVAL_MS).validator(Validator::AtLeast(1)))
        .define(ConfigKey::new(HEARTBEAT_INTERVAL_MS, ConfigType::Int, Importance::Medium, "Emit a heartbeat record this often while idle so the slot advances (0: off).").default_value("0").validator(Validator::AtLeast(0)))
        .define(
            ConfigKey::new(
                MESSAGE_KEY_COLUMNS,
                ConfigType::String,
                Importance::Low,
                "Custom message keys: <fully-qualified table regex>:<column>,<column>;… (tables not listed keep their primary key).",
            )
            .default_value(""),
        )
        .define(ConfigKey::new(COLUMN_INCLUDE_LIST, ConfigType::List, Importance::Medium, "Regular expressions of the columns (schema.table.column) before and after hold.").default_value(""))
        .define(ConfigKey::new(COLUMN_EXCLUDE_LIST, ConfigType::List, Importance::Medium, "Regular expressions of the columns (schema.table.column) left out of before and after.").default_value(""))
        .define_prefix(super::column::TRUNCATE_PREFIX)
        .define_prefix(super::column::MASK_PREFIX)
        .define(
            ConfigKey::new(
                HEARTBEAT_ACTION_QUERY,
                ConfigType::String,
                Importance::Low,
                "A statement run on a separate session at each heartbeat (heartbeat.interval.ms > 0), e.g. an insert into a heartbeat table.",
            )
            .default_value(""),
        )
        .define(
            ConfigKey::new(
                PROVIDE_TRANSACTION_METADATA,
                ConfigType::Boolean,
                Importance::Low,
                "Write BEGIN/END records of each transaction to <topic.prefix>.<topic.transaction> and a transaction block into every change event.",
            )
            .default_value("false"),
        )
        .define(
            ConfigKey::new(TOPIC_TRANSACTION, ConfigType::String, Importance::Low, "The transaction topic's name after <topic.prefix>.")
                .default_value("transaction")
                .validator(Validator::NonEmpty),
        )
        .define(
            ConfigKey::new(TOPIC_NAMING_STRATEGY, ConfigType::String, Importance::Low, "How topics are named: Debezium's io.debezium.schema.SchemaTopicNamingStrategy or DefaultTopicNamingStrategy, both <topic.prefix>.<schema>.<table> here.")
                .default_value(TOPIC_NAMING_STRATEGIES[0]),
        )
        .define(ConfigKey::new(TOPIC_DELIMITER, ConfigType::String, Importance::Low, "The delimiter between the parts of a topic name (prefix, schema, table; heartbeat and transaction topics).").default_value("."))
        .define(
            ConfigKey::new(TOPIC_HEARTBEAT_PREFIX, ConfigType::String, Importance::Low, "Heartbeat records go to <topic.heartbeat.prefix>.<topic.prefix>.")
                .default_value(DEFAULT_HEARTBEAT_PREFIX)
                .validator(Validator::NonEmpty),
        )
        .define(ConfigKey::new(SCHEMA_NAME_ADJUSTMENT_MODE, ConfigType::String, Importance::Low, "How schema names are adjusted: none (unchanged), avro (characters Avro does not allow become _), avro_unicode (they become _uXXXX).").default_value("none"))
        .define(ConfigKey::new(FIELD_NAME_ADJUSTMENT_MODE, ConfigType::String, Importance::Low, "How field names are adjusted: none (unchanged), avro (characters Avro does not allow become _), avro_unicode (they become _uXXXX).").default_value("none"))
        .define(
            ConfigKey::new(SNAPSHOT_LOCKING_MODE, ConfigType::String, Importance::Low, "none: the snapshot takes no table locks (it reads the slot's exported snapshot); shared: it holds ACCESS SHARE locks on the captured tables until it ends, so their structure cannot change meanwhile.")
                .default_value("none")
                .validator(Validator::one_of(&["none", "shared", "custom"])),
        )
        .define(
            ConfigKey::new(SNAPSHOT_LOCK_TIMEOUT_MS, ConfigType::Long, Importance::Low, "With snapshot.locking.mode=shared: how long to wait for the table locks before failing.")
                .default_value("10000")
                .validator(Validator::AtLeast(0)),
        )
        .define(ConfigKey::new(PUBLISH_VIA_PARTITION_ROOT, ConfigType::Boolean, Importance::Low, "true: the publication publishes the changes of a partitioned table's partitions under the root table's identity, so they reach the root's topic (publish_via_partition_root); false: under each partition's own.").default_value("false"))
        .define(ConfigKey::new(SIGNAL_DATA_COLLECTION, ConfigType::String, Importance::Low, "The signal table (schema.table, with columns id, type and data) whose inserts, read from the replication stream, are signals.").default_value(""))
        .define(ConfigKey::new(READ_ONLY, ConfigType::Boolean, Importance::Low, "true: incremental snapshots write nothing to the database: their windows close at the server's WAL position instead of watermark rows in the signal table (signals then come from the Kafka channel or the signal table).").default_value("false"))
        .define(ConfigKey::new(SIGNAL_ENABLED_CHANNELS, ConfigType::List, Importance::Low, "Where signals are read from: source (the signal table) and kafka (signal.kafka.topic).").default_value("source"))
        .define(
            ConfigKey::new(INCREMENTAL_SNAPSHOT_CHUNK_SIZE, ConfigType::Int, Importance::Low, "Rows read per chunk (one watermark window) of an incremental snapshot.")
                .default_value(DEFAULT_INCREMENTAL_SNAPSHOT_CHUNK_SIZE)
                .validator(Validator::AtLeast(1)),
        )
        .define(
            ConfigKey::new(
                INCREMENTAL_SNAPSHOT_WATERMARKING_STRATEGY,
                ConfigType::String,
                Importance::Low,
                "How chunk windows are marked in the signal table; this version supports insert_insert (an open and a close row per chunk).",
            )
            .default_value("insert_insert")
            .validator(Validator::one_of(&["insert_insert", "insert_delete"])),
        )
        .define(ConfigKey::new(STATUS_UPDATE_INTERVAL_MS, ConfigType::Int, Importance::Low, "How often the standby status (confirmed position) is sent to the server.").default_value(DEFAULT_STATUS_UPDATE_INTERVAL_MS).validator(Validator::AtLeast(1)))
        .define(
            ConfigKey::new(
                ERRORS_MAX_RETRIES,
                ConfigType::Int,
                Importance::Low,
                "The maximum number of retries on retriable errors (e.g. connection errors) before failing (-1 = no limit, 0 = disabled, > 0 = num of retries). The worker then restarts the task (sluice.restart.*).",
            )
            .default_value("-1")
            .validator(Validator::AtLeast(-1)),
        )
        .merge(&super::slot_guard::def())
}

/// The typed configuration of one connector (and of its single task).
#[derive(Debug, Clone)]
pub struct PostgresConfig {
    /// `database.sslmode`, `database.sslrootcert`, `database.sslcert`, `database.sslkey`,
    /// `database.sslpassword` and `database.sslfactory`.
    pub tls: PgTls,
    pub hostname: String,
    pub port: u16,
    pub user: String,
    pub password: Secret,
    pub dbname: String,
    pub topic_prefix: String,
    pub slot_name: String,
    pub slot_drop_on_stop: bool,
    pub publication_name: String,
    pub autocreate: AutocreateMode,
    /// `publish.via.partition.root`: the publication's `publish_via_partition_root`.
    pub publish_via_partition_root: bool,
    /// `topic.naming.strategy`, `topic.delimiter`.
    pub topics: TopicNaming,
    /// `schema.name.adjustment.mode`.
    pub schema_names: NameAdjust,
    /// `field.name.adjustment.mode`.
    pub field_names: NameAdjust,
    pub filter: TableFilter,
    pub snapshot_mode: SnapshotMode,
    pub snapshot_fetch_size: usize,
    /// `snapshot.max.threads`: the most tables the snapshot reads at once (at least 1).
    pub snapshot_max_threads: usize,
    pub decimal_mode: DecimalMode,
    pub time_mode: TimeMode,
    pub binary_mode: BinaryMode,
    pub interval_mode: IntervalMode,
    pub hstore_mode: HstoreMode,
    /// `money.fraction.digits`: the scale of money under `decimal.handling.mode=precise`.
    pub money_fraction_digits: i32,
    /// `unavailable.value.placeholder` as octets (`hex:` decoded, else the UTF-8 bytes).
    pub unavailable_placeholder: Vec<u8>,
    pub tombstones_on_delete: bool,
    pub skipped: Vec<char>,
    pub max_batch_size: usize,
    pub max_queue_size: usize,
    pub poll_interval_ms: u64,
    pub heartbeat_interval_ms: u64,
    pub heartbeat_action_query: Option<String>,
    /// `provide.transaction.metadata`: where BEGIN/END records go.
    pub transaction_topic: Option<TransactionTopic>,
    pub status_update_interval_ms: u64,
    /// Per-column rules: message keys, column mappers and the column filter.
    pub columns: ColumnRules,
    /// `signal.data.collection`: the signal table read from the stream.
    pub signal_table: Option<TableId>,
    /// `kafka` in `signal.enabled.channels`: the signal topic read between batches.
    pub kafka_signals: Option<KafkaSignalConfig>,
    /// `read.only`: incremental snapshots write no watermark rows.
    pub read_only: bool,
    /// `message.prefix.include.list` / `exclude.list`: the logical decoding messages emitted.
    pub message_prefixes: PrefixFilter,
    /// `topic.heartbeat.prefix`: heartbeats go to `<this>.<topic.prefix>`.
    pub heartbeat_topic_prefix: String,
    /// `snapshot.locking.mode=shared`: the snapshot locks its tables IN ACCESS SHARE MODE,
    /// waiting at most this long (`snapshot.lock.timeout.ms`); `None`: no locks.
    pub snapshot_lock_timeout_ms: Option<u64>,
    pub incremental_chunk_size: usize,
    /// `sluice.slot.*`: the replication-slot safety checks.
    pub slot_guard: super::slot_guard::SlotGuardConfig,
}

/// The errors of keys this version rejects, as `(key, message)` pairs.
pub fn unsupported(props: &Props) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for key in props.keys() {
        if UNSUPPORTED_KEYS.contains(&key.as_str()) || UNSUPPORTED_PREFIXES.iter().any(|p| key.starts_with(p)) {
            let hint = if key == "database.server.name" { " (Debezium 2 replaced it with topic.prefix)" } else { "" };
            out.push((key.clone(), format!("{key} is not supported yet by this connector{hint}; remove it")));
        }
    }
    let value = |k: &str| props.get(k).map(|v| v.trim().to_ascii_lowercase());
    let mut refuse = |key: &str, message: String| out.push((key.to_owned(), message));
    for key in [SCHEMA_NAME_ADJUSTMENT_MODE, FIELD_NAME_ADJUSTMENT_MODE] {
        if let Some(v) = value(key).filter(|v| NameAdjust::parse(v).is_none()) {
            refuse(key, format!("{key}={v} is not a name adjustment mode; use none, avro or avro_unicode"));
        }
    }
    if let Some(v) = props.get(TOPIC_NAMING_STRATEGY).map(|v| v.trim()).filter(|v| !v.is_empty() && !TOPIC_NAMING_STRATEGIES.contains(v)) {
        refuse(
            TOPIC_NAMING_STRATEGY,
            format!(
                "topic.naming.strategy={v} is a Java class, which sluice cannot load: topics are named as {} names them \
                 (<topic.prefix>.<schema>.<table>); rename them with the RegexRouter transform",
                TOPIC_NAMING_STRATEGIES[0]
            ),
        );
    }
    if let Some(v) = props.get(TOPIC_DELIMITER).filter(|v| v.is_empty() || !v.chars().all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))) {
        refuse(TOPIC_DELIMITER, format!("topic.delimiter={v:?} cannot be part of a topic name: use letters, digits, '.', '_' or '-'"));
    }
    if value(SNAPSHOT_LOCKING_MODE).as_deref() == Some("custom") {
        refuse(SNAPSHOT_LOCKING_MODE, "snapshot.locking.mode=custom loads a Java class, which sluice cannot; use none or shared".to_owned());
    }
    if props.contains_key(SNAPSHOT_SELECT_STATEMENT_OVERRIDES) || props.keys().any(|k| k.starts_with("snapshot.select.statement.overrides.")) {
        refuse(
            SNAPSHOT_SELECT_STATEMENT_OVERRIDES,
            "snapshot.select.statement.overrides is not supported: the initial snapshot reads whole tables in key order so that \
             it can resume after a crash; to snapshot part of a table, use snapshot.mode=no_data and an execute-snapshot signal \
             with additional-conditions (incremental snapshot)"
                .to_owned(),
        );
    }
    if props.contains_key(CONVERTERS) {
        refuse(
            CONVERTERS,
            "converters names Debezium custom converters, Java classes sluice cannot load; change a column's value with a \
             transform (Cast, ReplaceField) or the column.mask.*/column.truncate.to.* keys"
                .to_owned(),
        );
    }
    if props.contains_key(POST_PROCESSORS) {
        refuse(POST_PROCESSORS, "post.processors names Java classes sluice cannot load; change records with transforms (transforms.*)".to_owned());
    }
    if let Some(v) = value(PLUGIN_NAME).filter(|v| v != "pgoutput") {
        out.push((PLUGIN_NAME.to_owned(), format!("plugin.name={v} is not supported yet; only pgoutput (built into PostgreSQL 10+) is")));
    }
    if value(INCREMENTAL_SNAPSHOT_WATERMARKING_STRATEGY).as_deref() == Some("insert_delete") {
        out.push((
            INCREMENTAL_SNAPSHOT_WATERMARKING_STRATEGY.to_owned(),
            "incremental.snapshot.watermarking.strategy=insert_delete is not supported yet; use insert_insert".to_owned(),
        ));
    }
    if let Some(v) =
        props.get(SSLFACTORY).map(|v| v.trim()).filter(|v| !v.is_empty() && *v != LIBPQ_FACTORY && *v != NON_VALIDATING_FACTORY)
    {
        out.push((
            SSLFACTORY.to_owned(),
            format!("database.sslfactory={v} is not supported; use {LIBPQ_FACTORY} (the default) or {NON_VALIDATING_FACTORY}"),
        ));
    }
    if let Some(v) = value(SNAPSHOT_MODE).filter(|v| matches!(v.as_str(), "configuration_based" | "custom" | "recovery")) {
        out.push((
            SNAPSHOT_MODE.to_owned(),
            format!("snapshot.mode={v} is not supported yet; use initial, initial_only, no_data, always or when_needed"),
        ));
    }
    if value(LEGACY_SNAPSHOT_MAX_THREADS).is_some_and(|v| v != "true") {
        out.push((
            LEGACY_SNAPSHOT_MAX_THREADS.to_owned(),
            "legacy.snapshot.max.threads=false (tables split into chunks over the snapshot threads) is not supported yet; \
             this version reads each table on one session: remove the key or set it to true"
                .to_owned(),
        ));
    }
    out
}

impl PostgresConfig {
    pub fn parse(props: &Props) -> ConnectResult<Self> {
        if let Some((key, message)) = unsupported(props).into_iter().next() {
            return Err(ConnectError::config(key, message));
        }
        let c = def().parse(props)?;
        let lower = |k: &str| c.string(k).unwrap_or_default().to_ascii_lowercase();
        let mut skipped = Vec::new();
        for op in c.list(SKIPPED_OPERATIONS) {
            match op.as_str() {
                "none" => {}
                "c" | "u" | "d" | "t" => skipped.push(op.chars().next().expect("one char")),
                other => {
                    return Err(ConnectError::config(SKIPPED_OPERATIONS, format!("unknown operation {other:?}; use c, u, d, t or none")))
                }
            }
        }
        let mut kafka_signals = None;
        for channel in c.list(SIGNAL_ENABLED_CHANNELS) {
            if channel.eq_ignore_ascii_case("kafka") {
                let prefix = c.string(TOPIC_PREFIX).unwrap_or_default();
                kafka_signals = Some(KafkaSignalConfig::parse(|k| c.string(k).filter(|v| !v.is_empty()), props.iter(), &prefix)?);
            } else if !channel.eq_ignore_ascii_case("source") {
                return Err(ConnectError::config(
                    SIGNAL_ENABLED_CHANNELS,
                    format!(
                        "signal channel {channel:?} is not supported; use source (the signal table named by signal.data.collection) \
                         and kafka (signal.kafka.topic)"
                    ),
                ));
            }
        }
        let signal_table = match c.string(SIGNAL_DATA_COLLECTION).map(|s| s.trim().to_owned()).filter(|s| !s.is_empty()) {
            None => None,
            Some(name) => match name.split_once('.') {
                Some((schema, table)) if !schema.is_empty() && !table.is_empty() && !table.contains('.') => {
                    Some(TableId { schema: schema.to_owned(), table: table.to_owned() })
                }
                _ => {
                    return Err(ConnectError::config(
                        SIGNAL_DATA_COLLECTION,
                        format!("{name:?} is not a fully-qualified table name; use <schema>.<table>"),
                    ))
                }
            },
        };
        let (include, exclude) = ColumnRules::column_filter(&c.list(COLUMN_INCLUDE_LIST), &c.list(COLUMN_EXCLUDE_LIST))?;
        let mut ssl_mode = SslMode::parse(&c.string(SSLMODE).unwrap_or_else(|| DEFAULT_SSLMODE.to_owned()))
            .map_err(|e| ConnectError::config(SSLMODE, e))?;
        if c.string(SSLFACTORY).as_deref() == Some(NON_VALIDATING_FACTORY) && matches!(ssl_mode, SslMode::VerifyCa | SslMode::VerifyFull) {
            ssl_mode = SslMode::Require;
        }
        let client = PgTls::client_from(&SOURCE_KEYS, c.string(SSLCERT), c.string(SSLKEY), c.password(SSLPASSWORD))
            .map_err(|(key, message)| ConnectError::config(key, message))?;
        let root_cert = c.string(SSLROOTCERT).filter(|p| !p.trim().is_empty()).map(std::path::PathBuf::from);
        let topics = TopicNaming {
            without_schema: c.string(TOPIC_NAMING_STRATEGY).is_some_and(|s| s.trim() == TOPIC_NAMING_STRATEGIES[1]),
            delimiter: c.string(TOPIC_DELIMITER).filter(|d| !d.is_empty()).map_or(TopicNaming::DEFAULT.delimiter, Into::into),
        };
        Ok(Self {
            tls: PgTls::new(ssl_mode, root_cert).with_client(client),
            hostname: c.string(HOSTNAME).unwrap_or_default(),
            port: c.int(PORT) as u16,
            user: c.string(USER).unwrap_or_default(),
            password: c.password(PASSWORD).unwrap_or_default(),
            dbname: c.string(DBNAME).unwrap_or_default(),
            topic_prefix: c.string(TOPIC_PREFIX).unwrap_or_default(),
            slot_name: c.string(SLOT_NAME).unwrap_or_default(),
            slot_drop_on_stop: c.boolean(SLOT_DROP_ON_STOP),
            publication_name: c.string(PUBLICATION_NAME).unwrap_or_default(),
            publish_via_partition_root: c.boolean(PUBLISH_VIA_PARTITION_ROOT),
            topics: topics.clone(),
            schema_names: c.string(SCHEMA_NAME_ADJUSTMENT_MODE).as_deref().and_then(NameAdjust::parse).unwrap_or_default(),
            field_names: c.string(FIELD_NAME_ADJUSTMENT_MODE).as_deref().and_then(NameAdjust::parse).unwrap_or_default(),
            autocreate: match lower(PUBLICATION_AUTOCREATE_MODE).as_str() {
                "disabled" => AutocreateMode::Disabled,
                "filtered" => AutocreateMode::Filtered,
                _ => AutocreateMode::AllTables,
            },
            filter: TableFilter::new(
                &c.list(SCHEMA_INCLUDE_LIST),
                &c.list(SCHEMA_EXCLUDE_LIST),
                &c.list(TABLE_INCLUDE_LIST),
                &c.list(TABLE_EXCLUDE_LIST),
            )?,
            snapshot_mode: match lower(SNAPSHOT_MODE).as_str() {
                "initial_only" => SnapshotMode::InitialOnly,
                "no_data" | "never" => SnapshotMode::NoData,
                "always" => SnapshotMode::Always,
                "when_needed" => SnapshotMode::WhenNeeded,
                _ => SnapshotMode::Initial,
            },
            snapshot_fetch_size: c.int(SNAPSHOT_FETCH_SIZE) as usize,
            snapshot_max_threads: c.int(SNAPSHOT_MAX_THREADS) as usize,
            decimal_mode: match lower(DECIMAL_HANDLING_MODE).as_str() {
                "double" => DecimalMode::Double,
                "string" => DecimalMode::String,
                _ => DecimalMode::Precise,
            },
            time_mode: match lower(TIME_PRECISION_MODE).as_str() {
                "adaptive_time_microseconds" => TimeMode::AdaptiveTimeMicroseconds,
                "connect" => TimeMode::Connect,
                _ => TimeMode::Adaptive,
            },
            binary_mode: match lower(BINARY_HANDLING_MODE).as_str() {
                "base64" => BinaryMode::Base64,
                "base64-url-safe" => BinaryMode::Base64UrlSafe,
                "hex" => BinaryMode::Hex,
                _ => BinaryMode::Bytes,
            },
            interval_mode: match lower(INTERVAL_HANDLING_MODE).as_str() {
                "string" => IntervalMode::String,
                _ => IntervalMode::Numeric,
            },
            hstore_mode: match lower(HSTORE_HANDLING_MODE).as_str() {
                "map" => HstoreMode::Map,
                _ => HstoreMode::Json,
            },
            money_fraction_digits: c.int(MONEY_FRACTION_DIGITS) as i32,
            unavailable_placeholder: placeholder_octets(&c.string(UNAVAILABLE_VALUE_PLACEHOLDER).unwrap_or_default())
                .map_err(|e| ConnectError::config(UNAVAILABLE_VALUE_PLACEHOLDER, e))?,
            tombstones_on_delete: c.boolean(TOMBSTONES_ON_DELETE),
            skipped,
            max_batch_size: c.int(MAX_BATCH_SIZE) as usize,
            max_queue_size: c.int(MAX_QUEUE_SIZE) as usize,
            poll_interval_ms: c.int(POLL_INTERVAL_MS) as u64,
            heartbeat_interval_ms: c.int(HEARTBEAT_INTERVAL_MS) as u64,
            heartbeat_action_query: c.string(HEARTBEAT_ACTION_QUERY).filter(|q| !q.trim().is_empty()),
            transaction_topic: c.boolean(PROVIDE_TRANSACTION_METADATA).then(|| {
                TransactionTopic::new(topics.transaction_topic(&c.string(TOPIC_PREFIX).unwrap_or_default(), &c.string(TOPIC_TRANSACTION).unwrap_or_default()))
            }),
            status_update_interval_ms: c.int(STATUS_UPDATE_INTERVAL_MS) as u64,
            columns: ColumnRules {
                key_columns: KeyColumns::parse(&c.string(MESSAGE_KEY_COLUMNS).unwrap_or_default())?,
                mappers: ColumnRules::mappers_from(props)?,
                include,
                exclude,
            },
            signal_table,
            kafka_signals,
            read_only: c.boolean(READ_ONLY),
            message_prefixes: PrefixFilter::new(&c.list(MESSAGE_PREFIX_INCLUDE_LIST), &c.list(MESSAGE_PREFIX_EXCLUDE_LIST))?,
            heartbeat_topic_prefix: c.string(TOPIC_HEARTBEAT_PREFIX).unwrap_or_else(|| DEFAULT_HEARTBEAT_PREFIX.to_owned()),
            snapshot_lock_timeout_ms: (lower(SNAPSHOT_LOCKING_MODE) == "shared").then(|| c.int(SNAPSHOT_LOCK_TIMEOUT_MS).max(0) as u64),
            incremental_chunk_size: c.int(INCREMENTAL_SNAPSHOT_CHUNK_SIZE) as usize,
            slot_guard: super::slot_guard::SlotGuardConfig::parse(&c)?,
        })
    }

    /// The `tokio-postgres` configuration for ordinary (non-replication) sessions.
    pub fn pg_config(&self) -> tokio_postgres::Config {
        let mut c = tokio_postgres::Config::new();
        c.host(&self.hostname)
            .port(self.port)
            .user(&self.user)
            .password(self.password.expose())
            .dbname(&self.dbname)
            .application_name("sluice-postgres")
            .ssl_mode(self.tls.tokio_mode())
            .options(super::mapping::SESSION_OPTIONS)
            .connect_timeout(std::time::Duration::from_secs(10));
        c
    }
}

/// Debezium's reading of `unavailable.value.placeholder`: after a `hex:` prefix, hexadecimal
/// octets; otherwise the string's UTF-8 bytes.
fn placeholder_octets(raw: &str) -> Result<Vec<u8>, String> {
    let Some(hex) = raw.strip_prefix("hex:") else { return Ok(raw.as_bytes().to_vec()) };
    super::mapping::hex_octets(hex)
        .ok_or_else(|| format!("{raw:?} is not hexadecimal octets after hex:; use an even number of the digits 0-9 and a-f"))
}

/// Which tables are captured: Debezium's include/exclude lists of regular expressions,
/// matched against the whole schema name or `schema.table`, case-insensitively.
#[derive(Debug, Clone)]
pub struct TableFilter {
    schema_include: Vec<Regex>,
    schema_exclude: Vec<Regex>,
    table_include: Vec<Regex>,
    table_exclude: Vec<Regex>,
    /// The raw table include list, to check each entry matches a table.
    pub table_include_raw: Vec<String>,
}

fn compile(key: &str, patterns: &[String]) -> ConnectResult<Vec<Regex>> {
    patterns
        .iter()
        .map(|p| {
            RegexBuilder::new(&format!("^(?:{p})$"))
                .case_insensitive(true)
                .build()
                .map_err(|e| ConnectError::config(key, format!("{p:?} is not a valid regular expression: {e}")))
        })
        .collect()
}

impl TableFilter {
    pub fn new(schema_inc: &[String], schema_exc: &[String], table_inc: &[String], table_exc: &[String]) -> ConnectResult<Self> {
        if !schema_inc.is_empty() && !schema_exc.is_empty() {
            return Err(ConnectError::config(SCHEMA_EXCLUDE_LIST, "schema.include.list and schema.exclude.list cannot both be set"));
        }
        if !table_inc.is_empty() && !table_exc.is_empty() {
            return Err(ConnectError::config(TABLE_EXCLUDE_LIST, "table.include.list and table.exclude.list cannot both be set"));
        }
        Ok(Self {
            schema_include: compile(SCHEMA_INCLUDE_LIST, schema_inc)?,
            schema_exclude: compile(SCHEMA_EXCLUDE_LIST, schema_exc)?,
            table_include: compile(TABLE_INCLUDE_LIST, table_inc)?,
            table_exclude: compile(TABLE_EXCLUDE_LIST, table_exc)?,
            table_include_raw: table_inc.to_vec(),
        })
    }

    pub fn includes(&self, schema: &str, table: &str) -> bool {
        if matches!(schema, "pg_catalog" | "information_schema") || schema.starts_with("pg_toast") {
            return false;
        }
        let full = format!("{schema}.{table}");
        let any = |res: &[Regex], s: &str| res.iter().any(|r| r.is_match(s));
        (self.schema_include.is_empty() || any(&self.schema_include, schema))
            && !any(&self.schema_exclude, schema)
            && (self.table_include.is_empty() || any(&self.table_include, &full))
            && !any(&self.table_exclude, &full)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn props(pairs: &[(&str, &str)]) -> Props {
        let mut p: Props = [("database.hostname", "h"), ("database.user", "u"), ("database.dbname", "d"), ("topic.prefix", "p")]
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        p.extend(pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())));
        p
    }

    #[test]
    fn defaults_and_rejections() {
        let c = PostgresConfig::parse(&props(&[])).unwrap();
        assert_eq!((c.slot_name.as_str(), c.publication_name.as_str()), ("debezium", "dbz_publication"));
        assert_eq!(c.snapshot_mode, SnapshotMode::Initial);
        assert!(c.tombstones_on_delete);
        assert_eq!(c.skipped, vec!['t']);
        let err = PostgresConfig::parse(&props(&[("plugin.name", "decoderbufs")])).unwrap_err().to_string();
        assert!(err.contains("plugin.name") && err.contains("decoderbufs") && err.contains("pgoutput"), "{err}");
        let err = PostgresConfig::parse(&props(&[("column.propagate.source.type", "x.y.z")])).unwrap_err().to_string();
        assert!(err.contains("column.propagate.source.type") && err.contains("not supported yet"), "{err}");
        let c = PostgresConfig::parse(&props(&[("column.mask.with.5.chars", "x.y.z"), ("message.key.columns", "x.y:z")])).unwrap();
        assert_eq!(c.columns.mappers.len(), 1);
        let err = PostgresConfig::parse(&props(&[("column.mask.with.five.chars", "x.y.z")])).unwrap_err().to_string();
        assert!(err.contains("column.mask.with.five.chars"), "{err}");
        let c =
            PostgresConfig::parse(&props(&[("database.sslmode", "verify-full"), ("database.sslrootcert", "/etc/pg/root.crt")])).unwrap();
        assert_eq!(c.tls, PgTls::new(SslMode::VerifyFull, Some("/etc/pg/root.crt".into())));
        let c = PostgresConfig::parse(&props(&[
            ("database.sslcert", "/c.crt"),
            ("database.sslkey", "/c.pk8"),
            ("database.sslpassword", "pw"),
            ("database.sslmode", "verify-ca"),
            ("database.sslfactory", "org.postgresql.ssl.NonValidatingFactory"),
        ]))
        .unwrap();
        let client = c.tls.client.as_ref().unwrap();
        assert_eq!(
            (client.cert.to_str(), client.key.to_str(), client.password.as_ref().map(Secret::expose)),
            (Some("/c.crt"), Some("/c.pk8"), Some("pw"))
        );
        assert_eq!(c.tls.mode, SslMode::Require, "NonValidatingFactory does not check the server");
        assert!(!format!("{c:?}").contains("pw\""), "the key password is hidden in Debug");
        let err = PostgresConfig::parse(&props(&[("database.sslcert", "/c.crt")])).unwrap_err();
        assert!(matches!(&err, ConnectError::Config { key, .. } if key == "database.sslkey"), "{err}");
        let err = PostgresConfig::parse(&props(&[("database.sslpassword", "pw")])).unwrap_err().to_string();
        assert!(err.contains("database.sslkey") && !err.contains("pw\""), "{err}");
        let err = PostgresConfig::parse(&props(&[("database.sslfactory", "org.postgresql.ssl.DefaultJavaSSLFactory")])).unwrap_err();
        assert!(err.to_string().contains("database.sslfactory"), "{err}");
        assert!(def().key("database.sslpassword").is_some_and(|k| k.ty == ConfigType::Password));
        assert!(PostgresConfig::parse(&props(&[("snapshot.mode", "never")])).unwrap().snapshot_mode == SnapshotMode::NoData);
        let c = PostgresConfig::parse(&props(&[("signal.data.collection", "public.dbz_signal")])).unwrap();
        assert_eq!(c.signal_table, Some(TableId { schema: "public".into(), table: "dbz_signal".into() }));
        assert_eq!(c.incremental_chunk_size, 1024);
        let err = PostgresConfig::parse(&props(&[("signal.data.collection", "dbz_signal")])).unwrap_err().to_string();
        assert!(err.contains("signal.data.collection") && err.contains("<schema>.<table>"), "{err}");
        let err = PostgresConfig::parse(&props(&[("signal.enabled.channels", "source,jmx")])).unwrap_err().to_string();
        assert!(err.contains("signal.enabled.channels") && err.contains("\"jmx\""), "{err}");
        let err = PostgresConfig::parse(&props(&[("signal.enabled.channels", "source,kafka")])).unwrap_err().to_string();
        assert!(err.contains("signal.kafka.bootstrap.servers"), "{err}");
        let c = PostgresConfig::parse(&props(&[("signal.enabled.channels", "source,kafka"), ("signal.kafka.bootstrap.servers", "b:9092")])).unwrap();
        assert_eq!(c.kafka_signals.map(|k| k.topic), Some(format!("{}-signal", c.topic_prefix)));
        assert!(PostgresConfig::parse(&props(&[("incremental.snapshot.watermarking.strategy", "INSERT_INSERT")])).is_ok());
        let err =
            PostgresConfig::parse(&props(&[("incremental.snapshot.watermarking.strategy", "insert_delete")])).unwrap_err().to_string();
        assert!(err.contains("insert_delete") && err.contains("not supported yet"), "{err}");
        let err = PostgresConfig::parse(&props(&[("incremental.snapshot.chunk.size", "0")])).unwrap_err().to_string();
        assert!(err.contains("incremental.snapshot.chunk.size"), "{err}");
        let err = PostgresConfig::parse(&props(&[("topic.prefix", "")])).unwrap_err().to_string();
        assert!(err.contains("topic.prefix"), "{err}");
    }

    #[test]
    fn handling_modes_parse_and_name_bad_values() {
        let c = PostgresConfig::parse(&props(&[])).unwrap();
        assert_eq!((c.binary_mode, c.interval_mode, c.hstore_mode), (BinaryMode::Bytes, IntervalMode::Numeric, HstoreMode::Json));
        assert_eq!((c.money_fraction_digits, c.unavailable_placeholder.as_slice()), (2, b"__debezium_unavailable_value".as_slice()));
        let c = PostgresConfig::parse(&props(&[
            ("binary.handling.mode", "base64-url-safe"),
            ("interval.handling.mode", "STRING"),
            ("hstore.handling.mode", "map"),
            ("money.fraction.digits", "4"),
            ("unavailable.value.placeholder", "hex:00fF7e"),
        ]))
        .unwrap();
        assert_eq!((c.binary_mode, c.interval_mode, c.hstore_mode), (BinaryMode::Base64UrlSafe, IntervalMode::String, HstoreMode::Map));
        assert_eq!((c.money_fraction_digits, c.unavailable_placeholder), (4, vec![0x00, 0xff, 0x7e]));
        for (key, bad) in [
            ("binary.handling.mode", "base32"),
            ("interval.handling.mode", "iso"),
            ("hstore.handling.mode", "text"),
            ("money.fraction.digits", "-1"),
            ("money.fraction.digits", "two"),
            ("unavailable.value.placeholder", "hex:abc"),
            ("unavailable.value.placeholder", "hex:zz"),
        ] {
            let err = PostgresConfig::parse(&props(&[(key, bad)])).unwrap_err();
            assert!(matches!(&err, ConnectError::Config { key: k, .. } if k == key), "{key}={bad}: {err}");
        }
        let err = PostgresConfig::parse(&props(&[("binary.handling.mode", "base32")])).unwrap_err().to_string();
        assert!(err.contains("base64-url-safe"), "the error lists the choices: {err}");
    }

    #[test]
    fn filters_match_whole_names() {
        let f = TableFilter::new(&[], &[], &["public\\.a.*".into()], &[]).unwrap();
        assert!(f.includes("public", "abc"));
        assert!(!f.includes("public", "xabc"));
        assert!(!f.includes("other", "abc"));
        let f = TableFilter::new(&[], &["skip".into()], &[], &[]).unwrap();
        assert!(f.includes("public", "t") && !f.includes("skip", "t") && !f.includes("pg_catalog", "pg_class"));
    }

    #[test]
    fn snapshot_max_threads_is_a_positive_integer() {
        assert_eq!(PostgresConfig::parse(&props(&[])).unwrap().snapshot_max_threads, 1);
        assert_eq!(PostgresConfig::parse(&props(&[("snapshot.max.threads", "4")])).unwrap().snapshot_max_threads, 4);
        for bad in ["0", "-2", "two", "1.5", ""] {
            let err = PostgresConfig::parse(&props(&[("snapshot.max.threads", bad)])).unwrap_err();
            assert!(matches!(err, ConnectError::Config { .. }), "{bad:?}: {err:?}");
            assert!(err.to_string().contains("snapshot.max.threads"), "{bad:?}: {err}");
        }
        assert!(PostgresConfig::parse(&props(&[("legacy.snapshot.max.threads", "true")])).is_ok());
        let err = PostgresConfig::parse(&props(&[("legacy.snapshot.max.threads", "false")])).unwrap_err().to_string();
        assert!(err.contains("legacy.snapshot.max.threads") && err.contains("one session"), "{err}");
        let err = PostgresConfig::parse(&props(&[("snapshot.max.threads.multiplier", "2")])).unwrap_err().to_string();
        assert!(err.contains("snapshot.max.threads.multiplier") && err.contains("not supported yet"), "{err}");
    }

    /// Keys Debezium users set that used to be refused: accepted where sluice does the same,
    /// otherwise refused with why and what to use instead.
    #[test]
    fn keys_debezium_users_set_are_accepted_or_refused_with_a_reason() {
        let c = PostgresConfig::parse(&props(&[
            ("topic.naming.strategy", "io.debezium.schema.DefaultTopicNamingStrategy"),
            ("topic.delimiter", "."),
            ("topic.heartbeat.prefix", "hb"),
            ("schema.name.adjustment.mode", "none"),
            ("field.name.adjustment.mode", "NONE"),
            ("snapshot.locking.mode", "shared"),
            ("snapshot.lock.timeout.ms", "2500"),
            ("publish.via.partition.root", "false"),
        ]))
        .unwrap();
        assert!(!c.publish_via_partition_root);
        assert_eq!((c.schema_names, c.field_names), (NameAdjust::None, NameAdjust::None));
        let adjusted = PostgresConfig::parse(&props(&[("schema.name.adjustment.mode", "avro"), ("field.name.adjustment.mode", "AVRO_UNICODE")])).unwrap();
        assert_eq!((adjusted.schema_names, adjusted.field_names), (NameAdjust::Avro, NameAdjust::AvroUnicode));
        assert!(PostgresConfig::parse(&props(&[("publish.via.partition.root", "true")])).unwrap().publish_via_partition_root);
        assert_eq!((c.heartbeat_topic_prefix.as_str(), c.snapshot_lock_timeout_ms), ("hb", Some(2500)));
        let c = PostgresConfig::parse(&props(&[("topic.naming.strategy", TOPIC_NAMING_STRATEGIES[0]), ("snapshot.locking.mode", "none")])).unwrap();
        assert_eq!((c.heartbeat_topic_prefix.as_str(), c.snapshot_lock_timeout_ms), (DEFAULT_HEARTBEAT_PREFIX, None));
        for (key, value, says) in [
            ("topic.naming.strategy", "com.example.MyStrategy", "RegexRouter"),
            ("topic.delimiter", "/", "topic.delimiter"),
            ("schema.name.adjustment.mode", "avro2", "avro_unicode"),
            ("field.name.adjustment.mode", "unicode", "avro_unicode"),
            ("snapshot.locking.mode", "custom", "none or shared"),
            ("snapshot.locking.mode", "exclusive", "snapshot.locking.mode"),
            ("snapshot.select.statement.overrides", "public.t", "additional-conditions"),
            ("converters", "isbn", "Cast"),
            ("post.processors", "reselector", "transforms"),
        ] {
            let err = PostgresConfig::parse(&props(&[(key, value)])).unwrap_err();
            assert!(matches!(&err, ConnectError::Config { key: k, .. } if k == key), "{key}={value}: {err}");
            assert!(err.to_string().contains(says), "{key}={value}: {err}");
        }
        let err = PostgresConfig::parse(&props(&[("snapshot.select.statement.overrides.public.t", "SELECT 1")])).unwrap_err().to_string();
        assert!(err.contains("snapshot.select.statement.overrides"), "{err}");
    }
}
