//! Debezium's transforms: `ExtractNewRecordState` (flatten a change event envelope to the
//! row state) and the outbox `EventRouter`.
//!
//! Both recognise a change event by its value schema's name ending in `.Envelope`, with the
//! fields `before`, `after`, `source`, `op`, `ts_ms` and `transaction`; other records pass
//! through unchanged.

pub(crate) mod event_router;
pub(crate) mod extract_new_record_state;
mod json_payload;

use sluice_api::SchemaRef;

/// Whether a value schema is a Debezium change event envelope.
pub(crate) fn is_envelope(schema: Option<&SchemaRef>) -> bool {
    schema.and_then(|s| s.name.as_deref()).is_some_and(|n| n.ends_with(".Envelope"))
}
