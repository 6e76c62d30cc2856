//! Single message transforms and predicates: Kafka Connect's built-in SMTs, Debezium's
//! `ExtractNewRecordState` and outbox `EventRouter`, and the chain a connector's
//! `transforms=…` / `predicates=…` configuration builds.
//!
//! ```text
//! source:  SourceTask::poll -> TransformChain::apply -> converters -> log append
//! sink:    log read -> converters -> TransformChain::apply -> SinkTask::put
//!
//! TransformChain::apply(record):
//!   for each stage (in `transforms` order):
//!     if the stage has a predicate and `negate XOR predicate.test(record)` is false: skip it
//!     record = transform.apply(record)?        -- Err: the runtime's error handling decides
//!     None => stop, the record is dropped        (Filter, tombstone handling, …)
//! ```
//!
//! - [`TransformRecord`] is the one record type both paths transform; the source partition
//!   and offset (or the sink record's Kafka offset) ride along untouched in
//!   [`RecordOrigin`].
//! - [`transforms()`] and [`predicates()`] are the explicit registry: Java class names (one
//!   entry per `$Key` / `$Value` variant), short aliases, a [`ConfigDef`] and a constructor.
//! - [`TransformChain::from_connector_config`] reads the connector's keys exactly as Connect
//!   does; [`validate`] reports per-key errors for the validate endpoint and
//!   [`enriched_config_def`] lists the keys each alias contributes.
//!
//! Behaviour follows Kafka's `connect/transforms` and Debezium's sources: records with a
//! schema, schemaless records (a [`Value::Map`](sluice_api::Value::Map) with string keys) and
//! tombstones. Deliberate differences are listed in `CONTEXT.md` beside this file.

mod chain;
mod debezium;
mod field_path;
mod java_text;
mod predicates;
mod record;
mod registry;
mod require;
mod temporal;

mod cast;
mod drop_headers;
mod extract_field;
mod filter;
mod flatten;
mod header_from;
mod hoist_field;
mod insert_field;
mod insert_header;
mod mask_field;
mod regex_router;
mod replace_field;
mod set_schema_metadata;
mod timestamp_converter;
mod timestamp_router;
mod value_to_key;

#[cfg(test)]
mod tests;

pub use chain::{enriched_config_def, validate, TransformChain};
pub use record::{RecordOrigin, Side, TransformRecord};
pub use registry::{predicate_plugin, predicates, transform_plugin, transforms, PredicatePlugin, TransformPlugin};

use sluice_api::ConnectResult;

/// One single message transform (Connect's `Transformation`).
///
/// Called once per record, in the order records arrive, from one task at a time; it may be
/// shared between tasks, so it keeps no per-record state. `Ok(None)` drops the record and
/// stops the chain. `Err` means this record cannot be transformed (a fatal data error); the
/// runtime's error handling decides whether the task fails.
pub trait Transform: Send + Sync {
    fn apply(&self, record: TransformRecord) -> ConnectResult<Option<TransformRecord>>;
}

/// A condition on a record that decides whether a transform applies (Connect's `Predicate`).
pub trait Predicate: Send + Sync {
    fn test(&self, record: &TransformRecord) -> bool;
}
