//! The keys of both JDBC sink dialects users already have in their JSON, Confluent's
//! `io.confluent.connect.jdbc.JdbcSinkConnector` and Debezium's
//! `io.debezium.connector.jdbc.JdbcSinkConnector`, folded into one typed configuration.
//!
//! Where the two name the same setting differently (`pk.mode` / `primary.key.mode`,
//! `table.name.format` / `collection.name.format`, …) either key is accepted; setting both
//! to different values is an error. Defaults that differ between the two follow the class
//! named in `connector.class`. Keys of either dialect that this version does not implement
//! are rejected by name ([`unsupported`]), never ignored.

use crate::pg_tls::{PgTls, SslMode, URL_KEYS};
use sluice_api::{ConfigDef, ConfigKey, ConfigType, ConnectError, ConnectResult, Importance, ParsedConfig, Props, Secret, Validator};

pub const CONNECTION_URL: &str = "connection.url";
pub const CONNECTION_USER: &str = "connection.user";
pub const CONNECTION_USERNAME: &str = "connection.username";
pub const CONNECTION_PASSWORD: &str = "connection.password";
pub const CONNECTION_ATTEMPTS: &str = "connection.attempts";
pub const CONNECTION_BACKOFF_MS: &str = "connection.backoff.ms";
pub const DIALECT_NAME: &str = "dialect.name";
pub const INSERT_MODE: &str = "insert.mode";
pub const BATCH_SIZE: &str = "batch.size";
pub const DELETE_ENABLED: &str = "delete.enabled";
pub const TRUNCATE_ENABLED: &str = "truncate.enabled";
pub const TABLE_NAME_FORMAT: &str = "table.name.format";
pub const COLLECTION_NAME_FORMAT: &str = "collection.name.format";
pub const PK_MODE: &str = "pk.mode";
pub const PRIMARY_KEY_MODE: &str = "primary.key.mode";
pub const PK_FIELDS: &str = "pk.fields";
pub const PRIMARY_KEY_FIELDS: &str = "primary.key.fields";
pub const FIELDS_WHITELIST: &str = "fields.whitelist";
pub const FIELD_INCLUDE_LIST: &str = "field.include.list";
pub const FIELD_EXCLUDE_LIST: &str = "field.exclude.list";
pub const AUTO_CREATE: &str = "auto.create";
pub const AUTO_EVOLVE: &str = "auto.evolve";
pub const SCHEMA_EVOLUTION: &str = "schema.evolution";
pub const QUOTE_SQL_IDENTIFIERS: &str = "quote.sql.identifiers";
pub const QUOTE_IDENTIFIERS: &str = "quote.identifiers";
pub const DB_TIMEZONE: &str = "db.timezone";
pub const USE_TIME_ZONE: &str = "use.time.zone";
pub const TABLE_TYPES: &str = "table.types";
pub const MAX_RETRIES: &str = "max.retries";
pub const RETRY_BACKOFF_MS: &str = "retry.backoff.ms";
pub const FLUSH_MAX_RETRIES: &str = "flush.max.retries";
pub const FLUSH_RETRY_DELAY_MS: &str = "flush.retry.delay.ms";
pub const USE_REDUCTION_BUFFER: &str = "use.reduction.buffer";
pub const CONNECTION_RESTART_ON_ERRORS: &str = "connection.restart.on.errors";
/// sluice's own: where the consumed offsets are kept in the target database.
pub const OFFSETS_TABLE: &str = "sluice.offsets.table";
/// sluice's own: the fillfactor of the tables the sink creates.
pub const TABLE_FILLFACTOR: &str = "sluice.table.fillfactor";

pub const DEFAULT_TABLE_NAME_FORMAT: &str = "${topic}";
pub const DEFAULT_OFFSETS_TABLE: &str = "sluice_sink_offsets";
/// Confluent's and Debezium's `batch.size` defaults.
pub const DEFAULT_BATCH_SIZE_CONFLUENT: usize = 3000;
pub const DEFAULT_BATCH_SIZE_DEBEZIUM: usize = 500;
pub const DEFAULT_MAX_RETRIES: &str = "10";
pub const DEFAULT_RETRY_BACKOFF_MS: &str = "3000";
pub const DEFAULT_FLUSH_MAX_RETRIES: &str = "5";
pub const DEFAULT_FLUSH_RETRY_DELAY_MS: &str = "1000";
/// The fillfactor of created tables whose rows the sink updates (insert.mode upsert or
/// update): 30% of each page is left free, so that an update's new row version can stay on
/// the page (a HOT update: no new index entries, and the old version is pruned without a
/// vacuum). Tables written with insert.mode=insert only get new rows and keep Postgres'
/// default, 100.
pub const DEFAULT_UPDATED_TABLE_FILLFACTOR: u8 = 70;

/// Keys of either dialect that this version does not implement.
pub const UNSUPPORTED_KEYS: &[&str] = &[
    // Confluent
    "db.timezone.date",
    "mssql.use.merge.holdlock",
    "trim.sensitive.log",
    // Debezium
    "connection.provider",
    "connection.pool.min_size",
    "connection.pool.max_size",
    "connection.pool.acquire_increment",
    "connection.pool.timeout",
    "column.naming.strategy",
    "collection.naming.strategy",
    "table.naming.strategy",
    "collection.table.format",
    "database.time_zone",
    "dialect.postgres.postgis.schema",
    "dialect.postgres.unnest.insert.enabled",
    "dialect.sqlserver.identity.insert",
    "cloudevents.schema.name.pattern",
];

/// Prefixes of keys this version does not implement (Debezium passes `hibernate.*` on).
pub const UNSUPPORTED_PREFIXES: &[&str] = &["hibernate."];

/// Which connector class the configuration was written for; decides defaults and naming.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavor {
    Confluent,
    Debezium,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InsertMode {
    Insert,
    Upsert,
    Update,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PkMode {
    None,
    Kafka,
    RecordKey,
    RecordValue,
}

/// Which value fields become columns (key columns are always kept).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FieldFilter {
    All,
    Include(Vec<String>),
    Exclude(Vec<String>),
}

impl FieldFilter {
    pub fn keeps(&self, name: &str) -> bool {
        match self {
            FieldFilter::All => true,
            FieldFilter::Include(names) => names.iter().any(|n| n == name),
            FieldFilter::Exclude(names) => !names.iter().any(|n| n == name),
        }
    }
}

/// Where the target lives, from a `jdbc:postgresql://host[:port]/db[?params]` URL.
#[derive(Debug, Clone, PartialEq)]
pub struct PgUrl {
    pub host: String,
    pub port: u16,
    pub dbname: String,
    pub user: Option<String>,
    pub password: Option<Secret>,
    pub current_schema: Option<String>,
    pub application_name: Option<String>,
    /// `sslmode`, `ssl`, `sslrootcert`, `sslcert`, `sslkey`, `sslpassword` and `sslfactory` as
    /// pgJDBC reads them.
    pub tls: PgTls,
}

#[derive(Debug, Clone)]
pub struct JdbcSinkConfig {
    pub flavor: Flavor,
    pub url: PgUrl,
    pub user: String,
    pub password: Secret,
    pub connection_attempts: u32,
    pub connection_backoff_ms: u64,
    pub insert_mode: InsertMode,
    pub batch_size: usize,
    pub delete_enabled: bool,
    pub truncate_enabled: bool,
    pub table_name_format: String,
    pub pk_mode: PkMode,
    pub pk_fields: Vec<String>,
    pub fields: FieldFilter,
    pub auto_create: bool,
    pub auto_evolve: bool,
    pub quote_identifiers: bool,
    pub max_retries: u32,
    pub retry_backoff_ms: u64,
    pub offsets_table: String,
    /// The fillfactor of created tables (100: Postgres' default, no storage parameter).
    pub table_fillfactor: u8,
}

pub fn def() -> ConfigDef {
    let k = |name: &str, ty, imp, doc: &str| ConfigKey::new(name, ty, imp, doc);
    use ConfigType::{Boolean, Int, List, Long, Password, String as Str};
    use Importance::{High, Low, Medium};
    ConfigDef::new()
        .define(k(CONNECTION_URL, Str, High, "JDBC URL of the target PostgreSQL: jdbc:postgresql://host[:port]/database[?user=…&password=…&currentSchema=…].").validator(Validator::NonEmpty).group("Connection", 1, "JDBC URL"))
        .define(k(CONNECTION_USER, Str, High, "Database user (Confluent's key).").default_value("").group("Connection", 2, "JDBC User"))
        .define(k(CONNECTION_USERNAME, Str, High, "Database user (Debezium's key).").default_value("").group("Connection", 3, "User"))
        .define(k(CONNECTION_PASSWORD, Password, High, "Password of the database user.").default_value("").group("Connection", 4, "Password"))
        .define(k(DIALECT_NAME, Str, Low, "Database dialect; empty (chosen from the URL) or PostgreSqlDatabaseDialect.").default_value("").validator(Validator::one_of(&["", "PostgreSqlDatabaseDialect"])).group("Connection", 5, "Database Dialect"))
        .define(k(CONNECTION_ATTEMPTS, Int, Low, "Attempts to connect before the attempt counts as failed.").default_value("3").validator(Validator::AtLeast(1)).group("Connection", 6, "Connection Attempts"))
        .define(k(CONNECTION_BACKOFF_MS, Long, Low, "Wait between connection attempts.").default_value("10000").validator(Validator::AtLeast(0)).group("Connection", 7, "Connection Backoff (ms)"))
        .define(k(CONNECTION_RESTART_ON_ERRORS, Boolean, Low, "Reconnect after connection errors. This sink always does; accepted for Debezium configs.").default_value("false"))
        .define(k(INSERT_MODE, Str, High, "insert: plain INSERT; upsert: INSERT … ON CONFLICT (key) DO UPDATE; update: UPDATE rows that exist.").default_value("insert").validator(Validator::one_of(&["insert", "upsert", "update"])).group("Writes", 1, "Insert Mode"))
        .define(k(BATCH_SIZE, Int, Medium, "Most records written in one transaction (default 3000 for Confluent's class, 500 for Debezium's).").default_value("").group("Writes", 2, "Batch Size"))
        .define(k(DELETE_ENABLED, Boolean, Medium, "Apply delete events and tombstones (null values) as deletes. Requires the record_key primary key mode.").default_value("false").group("Writes", 3, "Enable deletes"))
        .define(k(TRUNCATE_ENABLED, Boolean, Medium, "Apply truncate events (op t) as TRUNCATE of the table.").default_value("false").group("Writes", 4, "Enable truncates"))
        .define(k(TABLE_TYPES, List, Low, "Table types written to; this version writes to TABLE only.").default_value("TABLE").validator(Validator::one_of(&["TABLE"])).group("Writes", 5, "Table Types"))
        .define(k(USE_REDUCTION_BUFFER, Boolean, Low, "Collapse changes to one key within a batch. This sink always collapses (the end state is the same); accepted for Debezium configs.").default_value("false"))
        .define(k(TABLE_NAME_FORMAT, Str, Medium, "Destination table name; ${topic}, ${source.db}, ${source.schema} and ${source.table} are replaced. A dot separates schema and table.").default_value("").group("Data Mapping", 1, "Table Name Format"))
        .define(k(COLLECTION_NAME_FORMAT, Str, Medium, "Debezium's name for table.name.format.").default_value("").group("Data Mapping", 2, "Collection Name Format"))
        .define(k(PK_MODE, Str, High, "Where the primary key comes from: none, kafka, record_key or record_value.").default_value("").validator(Validator::one_of(&["", "none", "kafka", "record_key", "record_value"])).group("Data Mapping", 3, "Primary Key Mode"))
        .define(k(PRIMARY_KEY_MODE, Str, High, "Debezium's name for pk.mode.").default_value("").validator(Validator::one_of(&["", "none", "kafka", "record_key", "record_value", "record_header"])).group("Data Mapping", 4, "Primary Key Mode"))
        .define(k(PK_FIELDS, List, Medium, "Primary key field names (all key or value fields when empty).").default_value("").group("Data Mapping", 5, "Primary Key Fields"))
        .define(k(PRIMARY_KEY_FIELDS, List, Medium, "Debezium's name for pk.fields.").default_value("").group("Data Mapping", 6, "Primary Key Fields"))
        .define(k(FIELDS_WHITELIST, List, Medium, "Value fields written (all when empty); key columns are always written.").default_value("").group("Data Mapping", 7, "Fields Whitelist"))
        .define(k(FIELD_INCLUDE_LIST, List, Medium, "Debezium's name for fields.whitelist.").default_value("").group("Data Mapping", 8, "Field include list"))
        .define(k(FIELD_EXCLUDE_LIST, List, Medium, "Value fields not written.").default_value("").group("Data Mapping", 9, "Field exclude list"))
        .define(k(DB_TIMEZONE, Str, Medium, "Time zone of temporal values; this version supports UTC.").default_value("UTC").validator(Validator::one_of(&["UTC", "Z"])).group("Data Mapping", 10, "DB Time Zone"))
        .define(k(USE_TIME_ZONE, Str, Medium, "Debezium's name for db.timezone.").default_value("UTC").validator(Validator::one_of(&["UTC", "Z"])).group("Data Mapping", 11, "Time Zone"))
        .define(k(AUTO_CREATE, Boolean, Medium, "Create a missing table from the record schema.").default_value("false").group("DDL Support", 1, "Auto-Create"))
        .define(k(AUTO_EVOLVE, Boolean, Medium, "Add columns the record has and the table lacks (ALTER TABLE ADD COLUMN).").default_value("false").group("DDL Support", 2, "Auto-Evolve"))
        .define(k(SCHEMA_EVOLUTION, Str, Medium, "Debezium's switch: basic creates missing tables and adds missing columns; none does neither.").default_value("none").validator(Validator::one_of(&["none", "basic"])).group("DDL Support", 3, "Schema evolution"))
        .define(k(QUOTE_SQL_IDENTIFIERS, Str, Medium, "Quote table and column names (always) or fold them to lower case (never).").default_value("").validator(Validator::one_of(&["", "always", "never"])).group("DDL Support", 4, "Quote Identifiers"))
        .define(k(QUOTE_IDENTIFIERS, Str, Medium, "Debezium's switch for quoting identifiers (true/false).").default_value("").validator(Validator::one_of(&["", "true", "false"])).group("DDL Support", 5, "Quote identifiers"))
        .define(k(MAX_RETRIES, Int, Medium, "Consecutive failed writes retried before the task fails.").default_value(DEFAULT_MAX_RETRIES).validator(Validator::AtLeast(0)).group("Retries", 1, "Maximum Retries"))
        .define(k(RETRY_BACKOFF_MS, Int, Medium, "Wait after a failed write before it is retried.").default_value(DEFAULT_RETRY_BACKOFF_MS).validator(Validator::AtLeast(0)).group("Retries", 2, "Retry Backoff (millis)"))
        .define(k(FLUSH_MAX_RETRIES, Int, Low, "Debezium's name for max.retries.").default_value(DEFAULT_FLUSH_MAX_RETRIES).validator(Validator::AtLeast(0)).group("Retries", 3, "Max retry count"))
        .define(k(FLUSH_RETRY_DELAY_MS, Long, Low, "Debezium's name for retry.backoff.ms.").default_value(DEFAULT_FLUSH_RETRY_DELAY_MS).validator(Validator::AtLeast(0)).group("Retries", 4, "Delay to retry flush"))
        .define(k(OFFSETS_TABLE, Str, Low, "Table in the target database holding the consumed offsets, written in the same transaction as the data.").default_value(DEFAULT_OFFSETS_TABLE).validator(Validator::NonEmpty).group("Writes", 6, "Offsets table"))
        .define(k(TABLE_FILLFACTOR, Int, Low, "Fillfactor (10-100) of the tables this sink creates: the percentage of each page filled by inserts, the rest left for updated rows to stay on their page. Default 70 with insert.mode upsert or update, 100 (Postgres' default) with insert.").default_value("").group("DDL Support", 6, "Table fillfactor"))
}

/// The errors of keys and values this version rejects, as `(key, message)` pairs.
pub fn unsupported(props: &Props) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for key in props.keys() {
        if UNSUPPORTED_KEYS.contains(&key.as_str()) || UNSUPPORTED_PREFIXES.iter().any(|p| key.starts_with(p)) {
            out.push((key.clone(), format!("{key} is not supported yet by this connector; remove it")));
        }
    }
    if props.get(PRIMARY_KEY_MODE).is_some_and(|v| v.trim().eq_ignore_ascii_case("record_header")) {
        out.push((
            PRIMARY_KEY_MODE.to_owned(),
            "primary.key.mode=record_header is not supported yet; use record_key, record_value, kafka or none".to_owned(),
        ));
    }
    if let Some(url) = props.get(CONNECTION_URL) {
        if let Err(e) = parse_url(url) {
            out.push((CONNECTION_URL.to_owned(), e));
        }
    }
    out
}

/// Parses `jdbc:postgresql://host[:port]/db[?k=v&…]`. Parameters this version does not
/// implement are rejected by name.
pub fn parse_url(url: &str) -> Result<PgUrl, String> {
    // Messages quote the URL without its password.
    let shown = sluice_api::secret::redact_urls(url);
    let url = url.trim();
    let Some(rest) = url.strip_prefix("jdbc:postgresql://") else {
        return Err(if url.starts_with("jdbc:") {
            format!("{shown:?}: only PostgreSQL targets (jdbc:postgresql://host:port/database) are supported yet")
        } else {
            format!("{shown:?} is not a JDBC URL; expected jdbc:postgresql://host:port/database")
        });
    };
    let (hostport, path) =
        rest.split_once('/').ok_or_else(|| format!("{shown:?} names no database; expected jdbc:postgresql://host:port/database"))?;
    let (db, query) = path.split_once('?').unwrap_or((path, ""));
    if hostport.contains(',') {
        return Err("several hosts in connection.url are not supported yet; name one host".to_owned());
    }
    let (host, port) = match hostport.rsplit_once(':') {
        Some((h, p)) if !h.ends_with(']') || hostport.starts_with('[') => {
            (h, p.parse::<u16>().map_err(|_| format!("{p:?} is not a port number"))?)
        }
        _ => (hostport, 5432),
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if host.is_empty() || db.is_empty() {
        return Err(format!("{shown:?} needs a host and a database"));
    }
    let mut out = PgUrl {
        host: host.to_owned(),
        port,
        dbname: percent_decode(db),
        user: None,
        password: None,
        current_schema: None,
        application_name: None,
        tls: PgTls::new(SslMode::Prefer, None).named(&URL_KEYS),
    };
    let (mut sslmode, mut ssl, mut non_validating) = (None, None, false);
    let (mut sslcert, mut sslkey, mut sslpassword) = (None, None, None);
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        let v = percent_decode(v);
        match k {
            "user" => out.user = Some(v),
            "password" => out.password = Some(Secret::new(v)),
            "currentSchema" => out.current_schema = Some(v),
            "ApplicationName" | "applicationName" => out.application_name = Some(v),
            "sslmode" => sslmode = Some(SslMode::parse(&v).map_err(|e| format!("connection.url: {e}"))?),
            "ssl" => ssl = Some(v.eq_ignore_ascii_case("true") || v.is_empty()),
            "sslrootcert" => out.tls.root_cert = Some(std::path::PathBuf::from(v)),
            "sslcert" => sslcert = Some(v),
            "sslkey" => sslkey = Some(v),
            "sslpassword" => sslpassword = Some(Secret::new(v)),
            "sslfactory" if v == "org.postgresql.ssl.NonValidatingFactory" => non_validating = true,
            "sslfactory" if v == "org.postgresql.ssl.LibPQFactory" => {}
            "sslfactory" => {
                return Err(format!(
                    "connection.url parameter sslfactory={v} is not supported; use org.postgresql.ssl.LibPQFactory (the default) or \
                     org.postgresql.ssl.NonValidatingFactory"
                ))
            }
            "connectTimeout" | "socketTimeout" | "tcpKeepAlive" | "reWriteBatchedInserts" | "stringtype" => {
                // Tuning of the Java driver with no effect on how or what this sink writes.
            }
            other => return Err(format!("connection.url parameter {other:?} is not supported yet; remove it")),
        }
    }
    // pgJDBC: `ssl=true` alone means verify-full; `sslmode` wins over `ssl`.
    out.tls.mode = match (sslmode, ssl) {
        (Some(m), _) => m,
        (None, Some(true)) => SslMode::VerifyFull,
        (None, Some(false)) => SslMode::Disable,
        (None, None) => SslMode::Prefer,
    };
    out.tls.client = PgTls::client_from(&URL_KEYS, sslcert, sslkey, sslpassword).map_err(|(_, message)| message)?;
    if non_validating && matches!(out.tls.mode, SslMode::VerifyCa | SslMode::VerifyFull) {
        out.tls.mode = SslMode::Require;
    }
    Ok(out)
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            if let Ok(v) = u8::from_str_radix(&s[i + 1..i + 3], 16) {
                out.push(v);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The flavor named by `connector.class` (Confluent's when absent or an alias of it).
pub fn flavor(props: &Props) -> Flavor {
    match props.get("connector.class").map(|s| s.trim()) {
        Some(c) if c == super::DEBEZIUM_CLASS || super::DEBEZIUM_ALIASES.contains(&c) => Flavor::Debezium,
        _ => Flavor::Confluent,
    }
}

/// The value of whichever of two equivalent keys is set; an error when both are set and
/// differ.
fn either(c: &ParsedConfig, a: &str, b: &str) -> ConnectResult<Option<String>> {
    let set = |k: &str| c.originals().get(k).map(|v| v.trim().to_owned()).filter(|v| !v.is_empty());
    match (set(a), set(b)) {
        (Some(x), Some(y)) if !x.eq_ignore_ascii_case(&y) => {
            Err(ConnectError::config(b, format!("{a}={x} and {b}={y} disagree; set one of them")))
        }
        (Some(x), _) | (None, Some(x)) => Ok(Some(x)),
        (None, None) => Ok(None),
    }
}

fn list(raw: Option<String>) -> Vec<String> {
    raw.map(|s| s.split(',').map(str::trim).filter(|s| !s.is_empty()).map(str::to_owned).collect()).unwrap_or_default()
}

impl JdbcSinkConfig {
    pub fn parse(props: &Props) -> ConnectResult<Self> {
        if let Some((key, message)) = unsupported(props).into_iter().next() {
            return Err(ConnectError::config(key, message));
        }
        let c = def().parse(props)?;
        let flavor = flavor(props);
        let url = parse_url(&c.string(CONNECTION_URL).unwrap_or_default()).map_err(|e| ConnectError::config(CONNECTION_URL, e))?;
        let user = either(&c, CONNECTION_USER, CONNECTION_USERNAME)?.or_else(|| url.user.clone()).unwrap_or_default();
        if user.is_empty() {
            return Err(ConnectError::config(
                CONNECTION_USER,
                "no database user: set connection.user (or connection.username, or user= in connection.url)",
            ));
        }
        let password =
            c.password(CONNECTION_PASSWORD).filter(|p| !p.expose().is_empty()).or_else(|| url.password.clone()).unwrap_or_default();
        let insert_mode = match c.string(INSERT_MODE).unwrap_or_default().to_ascii_lowercase().as_str() {
            "upsert" => InsertMode::Upsert,
            "update" => InsertMode::Update,
            _ => InsertMode::Insert,
        };
        let pk_mode = match either(&c, PK_MODE, PRIMARY_KEY_MODE)?.unwrap_or_default().to_ascii_lowercase().as_str() {
            "kafka" => PkMode::Kafka,
            "record_key" => PkMode::RecordKey,
            "record_value" => PkMode::RecordValue,
            _ => PkMode::None,
        };
        let pk_fields = list(either(&c, PK_FIELDS, PRIMARY_KEY_FIELDS)?);
        let delete_enabled = c.boolean(DELETE_ENABLED);
        if delete_enabled && pk_mode != PkMode::RecordKey {
            return Err(ConnectError::config(
                DELETE_ENABLED,
                "delete.enabled=true needs the primary key from the record key: set pk.mode (or primary.key.mode) to record_key",
            ));
        }
        if insert_mode != InsertMode::Insert && matches!(pk_mode, PkMode::None) {
            return Err(ConnectError::config(
                INSERT_MODE,
                "insert.mode upsert and update need a primary key: set pk.mode (or primary.key.mode) to record_key or record_value",
            ));
        }
        if pk_mode == PkMode::Kafka && !pk_fields.is_empty() && pk_fields.len() != 3 {
            return Err(ConnectError::config(
                PK_FIELDS,
                "with pk.mode=kafka, pk.fields names three columns (topic, partition, offset) or none",
            ));
        }
        let include = list(either(&c, FIELDS_WHITELIST, FIELD_INCLUDE_LIST)?);
        let exclude = c.list(FIELD_EXCLUDE_LIST);
        let fields = match (include.is_empty(), exclude.is_empty()) {
            (true, true) => FieldFilter::All,
            (false, true) => FieldFilter::Include(include),
            (true, false) => FieldFilter::Exclude(exclude),
            (false, false) => {
                return Err(ConnectError::config(FIELD_EXCLUDE_LIST, "an include list and field.exclude.list cannot both be set"))
            }
        };
        let evolve_basic = c.string(SCHEMA_EVOLUTION).is_some_and(|s| s.eq_ignore_ascii_case("basic"));
        let quote_identifiers = match (c.string(QUOTE_SQL_IDENTIFIERS), c.string(QUOTE_IDENTIFIERS)) {
            (Some(a), Some(b)) if a.eq_ignore_ascii_case("always") != b.eq_ignore_ascii_case("true") => {
                return Err(ConnectError::config(
                    QUOTE_IDENTIFIERS,
                    format!("quote.sql.identifiers={a} and quote.identifiers={b} disagree; set one of them"),
                ))
            }
            (Some(a), _) => a.eq_ignore_ascii_case("always"),
            (None, Some(b)) => b.eq_ignore_ascii_case("true"),
            (None, None) => flavor == Flavor::Confluent,
        };
        let batch_size = match c.string(BATCH_SIZE) {
            Some(s) => s.parse::<usize>().ok().filter(|n| *n >= 1).ok_or_else(|| {
                ConnectError::config(BATCH_SIZE, format!("Invalid value {s} for configuration batch.size: Value must be at least 1"))
            })?,
            None if flavor == Flavor::Debezium => DEFAULT_BATCH_SIZE_DEBEZIUM,
            None => DEFAULT_BATCH_SIZE_CONFLUENT,
        };
        let table_fillfactor = match c.string(TABLE_FILLFACTOR) {
            Some(s) => s.parse::<u8>().ok().filter(|n| (10..=100).contains(n)).ok_or_else(|| {
                ConnectError::config(
                    TABLE_FILLFACTOR,
                    format!("Invalid value {s} for configuration {TABLE_FILLFACTOR}: Value must be between 10 and 100"),
                )
            })?,
            None if insert_mode == InsertMode::Insert => 100,
            None => DEFAULT_UPDATED_TABLE_FILLFACTOR,
        };
        let set = |k: &str| c.originals().contains_key(k);
        let (max_retries, retry_backoff_ms) = if set(FLUSH_MAX_RETRIES)
            || set(FLUSH_RETRY_DELAY_MS)
            || (flavor == Flavor::Debezium && !set(MAX_RETRIES) && !set(RETRY_BACKOFF_MS))
        {
            (c.int(FLUSH_MAX_RETRIES) as u32, c.int(FLUSH_RETRY_DELAY_MS) as u64)
        } else {
            (c.int(MAX_RETRIES) as u32, c.int(RETRY_BACKOFF_MS) as u64)
        };
        Ok(Self {
            flavor,
            url,
            user,
            password,
            connection_attempts: c.int(CONNECTION_ATTEMPTS) as u32,
            connection_backoff_ms: c.int(CONNECTION_BACKOFF_MS) as u64,
            insert_mode,
            batch_size,
            delete_enabled,
            truncate_enabled: c.boolean(TRUNCATE_ENABLED),
            table_name_format: either(&c, TABLE_NAME_FORMAT, COLLECTION_NAME_FORMAT)?
                .unwrap_or_else(|| DEFAULT_TABLE_NAME_FORMAT.to_owned()),
            pk_mode,
            pk_fields,
            fields,
            auto_create: c.boolean(AUTO_CREATE) || evolve_basic,
            auto_evolve: c.boolean(AUTO_EVOLVE) || evolve_basic,
            quote_identifiers,
            max_retries,
            retry_backoff_ms,
            offsets_table: c.string(OFFSETS_TABLE).unwrap_or_else(|| DEFAULT_OFFSETS_TABLE.to_owned()),
            table_fillfactor,
        })
    }

    /// The `tokio-postgres` configuration of the target.
    pub fn pg_config(&self) -> tokio_postgres::Config {
        let mut c = tokio_postgres::Config::new();
        c.host(&self.url.host)
            .port(self.url.port)
            .user(&self.user)
            .password(self.password.expose())
            .dbname(&self.url.dbname)
            .application_name(self.url.application_name.as_deref().unwrap_or("sluice-jdbc-sink"))
            .ssl_mode(self.url.tls.tokio_mode())
            .connect_timeout(std::time::Duration::from_secs(10));
        let mut options = String::from("-c TimeZone=UTC -c DateStyle=ISO,YMD");
        if let Some(schema) = &self.url.current_schema {
            options.push_str(&format!(" -c search_path={}", schema.replace(' ', "\\ ")));
        }
        c.options(&options);
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn props(pairs: &[(&str, &str)]) -> Props {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    }

    #[test]
    fn urls() {
        let u = parse_url("jdbc:postgresql://db.example:6543/ware%20house?user=u&password=p&currentSchema=dw").unwrap();
        assert_eq!((u.host.as_str(), u.port, u.dbname.as_str()), ("db.example", 6543, "ware house"));
        assert_eq!(u.user.as_deref(), Some("u"));
        assert_eq!(u.password.as_ref().map(Secret::expose), Some("p"));
        assert_eq!(parse_url("jdbc:postgresql://h/db").unwrap().port, 5432);
        assert!(parse_url("jdbc:mysql://h/db").unwrap_err().contains("only PostgreSQL"));
        assert_eq!(parse_url("jdbc:postgresql://h/db?sslmode=require").unwrap().tls, PgTls::new(SslMode::Require, None).named(&URL_KEYS));
        assert_eq!(
            parse_url("jdbc:postgresql://h/db?ssl=true&sslrootcert=/r.pem").unwrap().tls,
            PgTls::new(SslMode::VerifyFull, Some("/r.pem".into())).named(&URL_KEYS)
        );
        assert_eq!(
            parse_url("jdbc:postgresql://h/db?ssl=true&sslfactory=org.postgresql.ssl.NonValidatingFactory").unwrap().tls.mode,
            SslMode::Require
        );
        assert_eq!(parse_url("jdbc:postgresql://h/db").unwrap().tls.mode, SslMode::Prefer);
        let err = parse_url("jdbc:postgresql://h/db?sslcert=/c.pem").unwrap_err();
        assert!(err.contains("sslkey (in connection.url)"), "{err}");
        let u = parse_url("jdbc:postgresql://h/db?sslmode=verify-full&sslcert=/c.pem&sslkey=/k%20dir/c.pk8&sslpassword=s%26cret").unwrap();
        let client = u.tls.client.unwrap();
        assert_eq!((client.cert.to_str(), client.key.to_str()), (Some("/c.pem"), Some("/k dir/c.pk8")));
        assert_eq!(client.password.as_ref().map(Secret::expose), Some("s&cret"));
        let err = parse_url("jdbc:postgresql://h/db?sslpassword=x").unwrap_err();
        assert!(err.contains("sslpassword") && !err.contains("=x"), "{err}");
        assert!(parse_url("jdbc:postgresql://h/db?sslfactory=org.postgresql.ssl.LibPQFactory").is_ok());
        assert!(parse_url("jdbc:postgresql://h/db?sslfactory=com.example.F").unwrap_err().contains("sslfactory"));
        assert!(parse_url("jdbc:postgresql://h/db?loggerLevel=DEBUG").unwrap_err().contains("loggerLevel"));
    }

    #[test]
    fn confluent_and_debezium_keys() {
        let c = JdbcSinkConfig::parse(&props(&[
            ("connector.class", "io.confluent.connect.jdbc.JdbcSinkConnector"),
            ("connection.url", "jdbc:postgresql://h:5/d"),
            ("connection.user", "u"),
            ("connection.password", "secret"),
            ("insert.mode", "upsert"),
            ("pk.mode", "record_key"),
            ("delete.enabled", "true"),
        ]))
        .unwrap();
        assert_eq!(
            (c.insert_mode, c.pk_mode, c.batch_size, c.quote_identifiers, c.max_retries),
            (InsertMode::Upsert, PkMode::RecordKey, 3000, true, 10)
        );
        assert_eq!(format!("{:?}", c.password), "[hidden]");
        let d = JdbcSinkConfig::parse(&props(&[
            ("connector.class", "io.debezium.connector.jdbc.JdbcSinkConnector"),
            ("connection.url", "jdbc:postgresql://h:5/d"),
            ("connection.username", "u"),
            ("insert.mode", "upsert"),
            ("primary.key.mode", "record_key"),
            ("schema.evolution", "basic"),
            ("collection.name.format", "${source.table}"),
        ]))
        .unwrap();
        assert_eq!((d.batch_size, d.quote_identifiers, d.auto_create, d.auto_evolve, d.max_retries), (500, false, true, true, 5));
        assert_eq!(d.table_name_format, "${source.table}");
        assert_eq!((c.table_fillfactor, d.table_fillfactor), (70, 70));
        let base = [("connection.url", "jdbc:postgresql://h/d"), ("connection.user", "u")];
        let with = |extra: &[(&str, &str)]| JdbcSinkConfig::parse(&props(&[&base[..], extra].concat()));
        assert_eq!(with(&[]).unwrap().table_fillfactor, 100, "insert mode keeps Postgres' default");
        assert_eq!(with(&[("sluice.table.fillfactor", "50")]).unwrap().table_fillfactor, 50);
        for bad in ["5", "101", "x"] {
            let err = with(&[("sluice.table.fillfactor", bad)]).unwrap_err().to_string();
            assert!(err.contains("sluice.table.fillfactor") && err.contains(bad), "{err}");
        }
        let err = JdbcSinkConfig::parse(&props(&[
            ("connection.url", "jdbc:postgresql://h/d"),
            ("connection.user", "u"),
            ("delete.enabled", "true"),
        ]))
        .unwrap_err();
        assert!(err.to_string().contains("record_key"), "{err}");
        let err = JdbcSinkConfig::parse(&props(&[
            ("connection.url", "jdbc:postgresql://h/d"),
            ("connection.user", "u"),
            ("hibernate.c3p0.x", "1"),
        ]))
        .unwrap_err();
        assert!(err.to_string().contains("hibernate.c3p0.x") && err.to_string().contains("not supported yet"), "{err}");
        let err = JdbcSinkConfig::parse(&props(&[
            ("connection.url", "jdbc:postgresql://h/d"),
            ("connection.user", "u"),
            ("pk.mode", "kafka"),
            ("primary.key.mode", "record_key"),
        ]))
        .unwrap_err();
        assert!(err.to_string().contains("disagree"), "{err}");
    }
}
