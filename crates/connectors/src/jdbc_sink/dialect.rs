//! The seam between the sink task and a target database. The task builds [`Batch`]es and
//! owns the offset bookkeeping; a dialect applies a batch and its offsets atomically and
//! reads the offsets back. PostgreSQL ([`super::writer::PgWriter`]) is the only one yet;
//! another warehouse plugs in by implementing this trait (and its own value encoding:
//! [`super::schema`] renders PostgreSQL's text input forms).

use std::collections::BTreeMap;

use async_trait::async_trait;
use sluice_api::error::BoxError;
use sluice_api::TopicPartition;

use super::batch::Batch;

/// What a failed write calls for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The target is unreachable or busy: nothing was applied (or it is unknown whether the
    /// commit happened; the offsets table tells). Retry later.
    Retriable,
    /// A record does not fit the table (constraint, type, missing table or column).
    Data,
    /// Anything else.
    Fatal,
}

#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct WriteError {
    pub kind: ErrorKind,
    pub message: String,
    #[source]
    pub source: Option<BoxError>,
    /// The index of the record at fault in the records the batch was built from, when known.
    pub origin: Option<usize>,
}

#[async_trait]
pub trait Dialect: Send {
    /// Connects when not connected and prepares the offsets table.
    async fn connect(&mut self) -> Result<(), WriteError>;

    /// The next offset to consume per partition, as committed with the data.
    async fn read_offsets(&mut self, connector: &str) -> Result<BTreeMap<TopicPartition, i64>, WriteError>;

    /// Applies the batch and stores `batch.offsets` for `connector`, in one transaction:
    /// either both are durable or neither is.
    async fn write(&mut self, connector: &str, batch: &Batch) -> Result<(), WriteError>;

    /// Applies `batch` in a transaction that is rolled back: whether writing it would fail,
    /// and how. Used after an [`ErrorKind::Data`] error to find the record at fault.
    async fn probe(&mut self, batch: &Batch) -> Result<(), WriteError>;
}
