//! The warehouse sink into PostgreSQL, compatible with the configurations of Confluent's
//! `io.confluent.connect.jdbc.JdbcSinkConnector` and Debezium's
//! `io.debezium.connector.jdbc.JdbcSinkConnector` (for `jdbc:postgresql://` URLs). Change
//! events become an up-to-date table; Debezium envelopes are read directly.
//!
//! ```text
//! put(records) ─▶ batch.rs: envelope/flat/tombstone ─▶ per table: steps of deletes and
//!                 upserts, changes to one key collapsed, TOAST placeholders as "unchanged"
//!              ─▶ dialect.rs (trait) ─▶ writer.rs (PostgreSQL): one transaction with
//!                 DDL, set-based DELETE/INSERT … ON CONFLICT/UPDATE from column arrays
//!                 (binary where the column type allows; a temp table filled by COPY for
//!                 rows that keep unchanged columns), and the consumed offsets in
//!                 sluice_sink_offsets
//! open ─▶ offsets read back from the target ─▶ request_offset: resume exactly there
//! ```
//!
//! Progress tracking: see `task.rs`. The offsets reported to the runtime are the ones
//! committed in the target with the data, so a crash at any point neither loses nor
//! applies a batch twice.
//!
//! A record the target rejects (a constraint, a type that does not fit): the batch is
//! rolled back, the record at fault is found by a binary search over prefixes of the batch
//! (each applied and rolled back), and reported through the runtime's errant-record
//! reporter, which applies the connector's `errors.*` keys: with `errors.tolerance=none` the
//! task fails naming its topic, partition, offset and key; with `all` it is logged and
//! dead-lettered (durably, before the offsets move) and the rest of the batch is written.
//!
//! Known gaps of this version:
//! - PostgreSQL targets only; TLS by `sslmode`/`ssl`/`sslrootcert` and client certificates
//!   by `sslcert`/`sslkey`/`sslpassword` in the URL (see `crate::pg_tls`).
//! - Struct and map fields (other than Debezium's logical types) and nested arrays have
//!   no column type yet; `pk.mode=record_header`, connection pools, naming strategies,
//!   time zones other than UTC and the keys listed in `config::UNSUPPORTED_KEYS` are rejected.
//! - Auto-created tables make only key columns NOT NULL; evolution only adds nullable
//!   columns (no type changes, no drops). Tables created for upserts or updates get
//!   `fillfactor` 70 (`sluice.table.fillfactor`), room for updated rows on their page;
//!   existing tables are not altered.
//! - A row whose TOASTed column was never seen by the sink (its insert predates the
//!   sink) and that no longer exists in the target is inserted with NULL in that column.

mod batch;
mod config;
mod connector;
mod dialect;
mod schema;
mod task;
mod writer;

use sluice_api::{ConnectorKind, ConnectorPlugin};

pub use config::JdbcSinkConfig;

pub const CONFLUENT_CLASS: &str = "io.confluent.connect.jdbc.JdbcSinkConnector";
pub const DEBEZIUM_CLASS: &str = "io.debezium.connector.jdbc.JdbcSinkConnector";
pub const CONFLUENT_ALIASES: &[&str] = &["jdbc-sink"];
pub const DEBEZIUM_ALIASES: &[&str] = &["debezium-jdbc-sink"];

pub fn plugins() -> [ConnectorPlugin; 2] {
    let plugin = |class, task_class, aliases| ConnectorPlugin {
        class,
        task_class,
        aliases,
        kind: ConnectorKind::Sink,
        version: env!("CARGO_PKG_VERSION"),
        create: || Box::new(connector::JdbcSinkConnector::default()),
    };
    [
        plugin(CONFLUENT_CLASS, "io.confluent.connect.jdbc.sink.JdbcSinkTask", CONFLUENT_ALIASES),
        plugin(DEBEZIUM_CLASS, "io.debezium.connector.jdbc.JdbcSinkConnectorTask", DEBEZIUM_ALIASES),
    ]
}
