//! Object formats. An encoder turns the records of one object into its bytes, appending to
//! the upload buffer as it goes (so a big object streams out in parts), and writes the
//! trailer (Parquet footer, gzip end) on [`RecordEncoder::finish`].
//!
//! Encoders are deterministic: the same records in the same order give the same bytes (no
//! clocks, no random sync markers), so an object rewritten after a crash is identical.

pub mod avro;
pub mod bytes;
pub mod json;
pub mod parquet;

use sluice_api::{ConnectResult, SchemaRef, SinkRecord};

use super::config::{Format, S3SinkConfig};

pub trait RecordEncoder: Send {
    /// Encodes one record, appending whatever bytes are ready to `out`.
    fn write(&mut self, record: &SinkRecord, out: &mut Vec<u8>) -> ConnectResult<()>;
    /// Ends the object, appending the remaining bytes to `out`. Called once.
    fn finish(&mut self, out: &mut Vec<u8>) -> ConnectResult<()>;
    /// Bytes encoded but not yet appended to `out` (a Parquet row group, an Avro block). A
    /// function of the records written so far only, so that decisions made on it are the
    /// same when the records are replayed.
    fn held_bytes(&self) -> usize {
        0
    }
}

/// About the memory a value takes (payload bytes plus a fixed cost per value), for budgets:
/// deterministic, not exact.
pub fn value_size(v: &sluice_api::Value) -> usize {
    use sluice_api::Value;
    const FIXED: usize = 16;
    FIXED
        + match v {
            Value::String(s) => s.len(),
            Value::Bytes(b) => b.len(),
            Value::Array(items) => items.iter().map(value_size).sum(),
            Value::Map(entries) => entries.iter().map(|(k, v)| value_size(k) + value_size(v)).sum(),
            Value::Struct(s) => s.values().iter().map(value_size).sum(),
            _ => 0,
        }
}

/// A new encoder for one object whose first record has `schema` as its value schema.
pub fn encoder(cfg: &S3SinkConfig, key: &str, schema: Option<&SchemaRef>) -> ConnectResult<Box<dyn RecordEncoder>> {
    Ok(match cfg.format {
        Format::Json { gzip } => Box::new(bytes::Lines::new(json::JsonLines { decimal: cfg.decimal_format }, gzip, cfg.gzip_level)),
        Format::ByteArray { gzip } => {
            Box::new(bytes::Lines::new(bytes::RawBytes { separator: cfg.bytearray_separator.clone() }, gzip, cfg.gzip_level))
        }
        Format::Avro(codec) => Box::new(avro::AvroEncoder::new(schema, codec, key)?),
        Format::Parquet(codec) => Box::new(parquet::ParquetEncoder::new(schema, codec, cfg.part_size)?),
    })
}
