//! The Postgres source, compatible with Debezium's `PostgresConnector`: logical replication
//! with the built-in `pgoutput` plugin, an initial snapshot consistent with the stream,
//! and records and offsets in Debezium's shape.
//!
//! ```text
//! start ─▶ publication + slot (create when missing, reuse when present)
//!       ─▶ snapshot.rs: REPEATABLE READ on the slot's exported snapshot ─▶ op "r" records
//!       ─▶ replication.rs: START_REPLICATION from the slot's consistent point or the stored
//!          offset; decode.rs (pgoutput v1) + mapping.rs (types) + envelope.rs (records)
//! commit(durable offsets) ─▶ offset.rs Confirmed::advance ─▶ standby status flush LSN
//! ```
//!
//! Progress tracking: see `offset.rs`. The flush LSN reported to Postgres only ever comes
//! from offsets the runtime made durable, and never moves back.
//!
//! Transports: `tokio-postgres` for catalog queries and snapshots, `pgwire-replication`
//! for the replication protocol (its reader task keeps sending standby status while the
//! hand-off channel is full). TLS is not built in: `database.sslmode` accepts `disable`
//! and `prefer` (which then connects in plain text, like a libpq without SSL support).

mod catalog;
mod config;
mod connector;
mod decode;
mod envelope;
mod mapping;
mod offset;
mod replication;
mod snapshot;
mod task;

use sluice_api::{ConnectorKind, ConnectorPlugin};

pub use config::PostgresConfig;

pub const CLASS: &str = "io.debezium.connector.postgresql.PostgresConnector";

pub fn plugin() -> ConnectorPlugin {
    ConnectorPlugin {
        class: CLASS,
        aliases: &["postgres", "PostgresConnector"],
        kind: ConnectorKind::Source,
        version: env!("CARGO_PKG_VERSION"),
        create: || Box::new(connector::PostgresConnector::default()),
    }
}
