//! `JsonFormat`: one JSON document per line, the value as Kafka's `JsonConverter` renders it
//! with `schemas.enable=false` (what Confluent's S3 sink writes): logical dates and times as
//! their integers, bytes as base64, decimals as base64 of the unscaled bytes or, with
//! `json.decimal.format=NUMERIC`, as numbers. Schemaless values are written as they are.

use sluice_api::{ConnectResult, SinkRecord};

use super::bytes::LineFormat;
pub use crate::value_json::{be_i128, kind, write_json, DecimalFormat};

pub struct JsonLines {
    pub decimal: DecimalFormat,
}

impl LineFormat for JsonLines {
    fn line(&self, r: &SinkRecord, out: &mut Vec<u8>) -> ConnectResult<()> {
        write_json(out, r.value_schema.as_deref(), &r.value, self.decimal)
            .map_err(|e| sluice_api::ConnectError::fatal_from("encoding a record as JSON failed", e))?;
        out.push(b'\n');
        Ok(())
    }
}
