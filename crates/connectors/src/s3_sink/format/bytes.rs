//! Line-oriented objects (JSON lines and `ByteArrayFormat`), optionally gzip-compressed.

use std::io::Write as _;

use flate2::write::GzEncoder;
use flate2::{Compression, GzBuilder};
use sluice_api::{ConnectError, ConnectResult, SinkRecord, Value};

use super::RecordEncoder;

/// Renders one record as the bytes of its line (separator included).
pub trait LineFormat: Send {
    fn line(&self, record: &SinkRecord, out: &mut Vec<u8>) -> ConnectResult<()>;
}

/// `ByteArrayFormat`: the value's bytes, then the separator. A string value is written as
/// its UTF-8 bytes; a null value (with `behavior.on.null.values=write`) as an empty record.
pub struct RawBytes {
    pub separator: Vec<u8>,
}

impl LineFormat for RawBytes {
    fn line(&self, r: &SinkRecord, out: &mut Vec<u8>) -> ConnectResult<()> {
        match &r.value {
            Value::Bytes(b) => out.extend_from_slice(b),
            Value::String(s) => out.extend_from_slice(s.as_bytes()),
            Value::Null => {}
            other => {
                return Err(ConnectError::fatal(format!(
                    "ByteArrayFormat needs byte values (use value.converter=org.apache.kafka.connect.converters.ByteArrayConverter); record {}-{} offset {} has {}",
                    r.topic,
                    r.partition,
                    r.offset,
                    super::json::kind(other)
                )))
            }
        }
        out.extend_from_slice(&self.separator);
        Ok(())
    }
}

/// Lines, written straight to the object or through a gzip stream (fixed header: no
/// timestamp, so the bytes are deterministic).
pub struct Lines<F> {
    format: F,
    gzip: Option<GzEncoder<Vec<u8>>>,
    line: Vec<u8>,
}

impl<F: LineFormat> Lines<F> {
    pub fn new(format: F, gzip: bool, level: Option<u32>) -> Self {
        let gzip = gzip.then(|| GzBuilder::new().mtime(0).write(Vec::new(), level.map(Compression::new).unwrap_or_default()));
        Self { format, gzip, line: Vec::new() }
    }
}

fn io_err(e: std::io::Error) -> ConnectError {
    ConnectError::fatal_from("compressing the object failed", e)
}

impl<F: LineFormat> RecordEncoder for Lines<F> {
    fn write(&mut self, record: &SinkRecord, out: &mut Vec<u8>) -> ConnectResult<()> {
        match &mut self.gzip {
            None => self.format.line(record, out),
            Some(gz) => {
                self.line.clear();
                self.format.line(record, &mut self.line)?;
                gz.write_all(&self.line).map_err(io_err)?;
                out.append(gz.get_mut());
                Ok(())
            }
        }
    }

    fn finish(&mut self, out: &mut Vec<u8>) -> ConnectResult<()> {
        if let Some(gz) = &mut self.gzip {
            gz.try_finish().map_err(io_err)?;
            out.append(gz.get_mut());
        }
        Ok(())
    }
}
