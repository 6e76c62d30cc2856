//! The Postgres source, compatible with Debezium's `PostgresConnector`: logical replication
//! with the built-in `pgoutput` plugin, an initial snapshot consistent with the stream,
//! and records and offsets in Debezium's shape.
//!
//! ```text
//! start ─▶ publication + slot (create when missing, reuse when present)
//!       ─▶ snapshot.rs: REPEATABLE READ on the slot's exported snapshot, up to
//!          `snapshot.max.threads` tables at once (one session each, all on that snapshot),
//!          each table in primary-key order ─▶ op "r" records whose offsets say how far
//!          the snapshot got (an interrupted snapshot resumes each open table after its
//!          last durable key, on a new snapshot; finished tables are not read again)
//!       ─▶ replication.rs: START_REPLICATION from the slot's consistent point or the stored
//!          offset; decode.rs (pgoutput v1) + mapping.rs (types) + envelope.rs (records)
//!          + transaction.rs (BEGIN/END records, `transaction` blocks); heartbeat.rs runs
//!          `heartbeat.action.query` on a session of its own
//!          incremental.rs: inserts into `signal.data.collection` are signals; an
//!          `execute-snapshot` reads tables in chunks between watermark rows (DBLog) while
//!          streaming goes on, with its progress in every offset
//! column.rs: message keys, column mappers and the column filter, for snapshot and stream
//! mapping.rs: types as Connect schemas and values under the handling modes (decimal, time
//!   precision, binary, interval (interval.rs), hstore, money digits), geometry.rs (points
//!   and WKB); toast.rs: unchanged TOASTed columns as `unavailable.value.placeholder`
//! commit(durable offsets) ─▶ offset.rs Confirmed::advance ─▶ standby status flush LSN
//! ```
//!
//! Progress tracking: see `offset.rs`. The flush LSN reported to Postgres never moves back
//! and never passes the stored offset: it is the position of offsets the runtime stored. A
//! keepalive received between transactions becomes an offset-only record at the server's
//! WAL end, so the stored offset, and then the slot, follow an idle database, and a fast
//! Postgres shutdown (which waits for the walsender's sent position to be confirmed)
//! finishes once that offset is stored (within `offset.flush.interval.ms`). Because the
//! slot is never ahead of the stored offset, Debezium can take the slot over on sluice's
//! offsets (it refuses a slot whose restart LSN passed its offset). A slot left ahead by an
//! older version is streamed from, as Debezium does; offsets restored from an older backup
//! are therefore not detected (a missing slot still is).
//!
//! Transports: `tokio-postgres` for catalog queries and snapshots, `pgwire-replication`
//! for the replication protocol (its reader task keeps sending standby status while the
//! hand-off channel is full). Both take TLS from `database.sslmode` (libpq's modes, `prefer`
//! by default), `database.sslrootcert` and the client certificate `database.sslcert`/
//! `sslkey`/`sslpassword` (see `crate::pg_tls`).
//!
//! Known gaps of this version:
//! - A fast Postgres shutdown still waits while records are in flight: until the runtime
//!   makes them durable (the next offset flush) or the connector disconnects.
//! - `status.update.interval.ms` must stay below the server's `wal_sender_timeout`.
//! - An interrupted snapshot resumes after its last durable records (per open table), but
//!   on a newer snapshot than the one it started on: rows read after the resume may be
//!   followed by older events of the same rows from the stream (same final state per key;
//!   see `snapshot.rs`). A table without a primary key is read again from its start. When
//!   the slot is gone, an interrupted snapshot starts over with a new slot.
//! - `snapshot.max.threads` reads whole tables, one per session (Debezium's
//!   `legacy.snapshot.max.threads=true`); splitting a table into chunks over the sessions
//!   (Debezium 3's default) is not implemented. A snapshot session lost mid-snapshot fails
//!   every later poll until the task is restarted (it then resumes from the durable offset).
//! - When the slot already exists at the first snapshot (`snapshot.mode=always`, or a slot
//!   created beforehand) the snapshot reads a fresh snapshot while streaming starts at the
//!   slot's position, so changes between the two may repeat.
//! - An hstore's JSON object or map keeps Postgres' pair order (Debezium's follows a Java
//!   HashMap). Under `binary.handling.mode=base64`/`base64-url-safe` an unchanged TOASTed
//!   bytea is the placeholder string (Debezium writes null there; see `toast.rs`).
//! - Not mapped yet (columns left out, as Debezium does with unknown types):
//!   multi-dimensional arrays, arrays of geometric types other than `point[]`, tsvector[];
//!   numeric NaN and ±Infinity are null under `precise` (as Debezium), and `date`/`timestamp`
//!   infinities carry Debezium's overflowed numbers (see `mapping.rs`).
//! - Incremental snapshots (`incremental.rs`): `insert_insert` watermarks only, no blocking
//!   snapshots or surrogate keys; the offset's key fields are JSON, not Debezium's
//!   serialized Java arrays; a pause does not survive a restart.
//! - `transaction` is null unless `provide.transaction.metadata` (see `transaction.rs`); one
//!   task.

mod catalog;
mod column;
mod config;
mod connector;
mod decode;
mod envelope;
/// Entry points for the fuzz targets in `fuzz/`; not an API.
#[doc(hidden)]
pub mod fuzzing;
mod geometry;
mod heartbeat;
mod incremental;
mod interval;
mod java_keys;
mod mapping;
mod message;
mod names;
mod metrics;
mod offset;
mod replication;
mod slot_guard;
mod snapshot;
mod task;
mod toast;
mod transaction;

use sluice_api::{ConnectorKind, ConnectorPlugin};

pub use config::PostgresConfig;

pub const CLASS: &str = "io.debezium.connector.postgresql.PostgresConnector";

pub fn plugin() -> ConnectorPlugin {
    ConnectorPlugin {
        class: CLASS,
        task_class: "io.debezium.connector.postgresql.PostgresConnectorTask",
        aliases: &["postgres", "PostgresConnector"],
        kind: ConnectorKind::Source,
        version: env!("CARGO_PKG_VERSION"),
        create: || Box::new(connector::PostgresConnector::default()),
    }
}
