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
