//! `ParquetFormat`: Parquet files whose schema is derived from the Connect value schema
//! (which must be a struct): nested structs, lists (`element`), maps (`key_value` with
//! `key`/`value`), Decimal as DECIMAL (precision from `connect.decimal.precision`, else 38),
//! Date as DATE, Time as TIME(MILLIS), Timestamp as TIMESTAMP(MILLIS, UTC); optional schemas
//! are nullable columns.
//!
//! Rows are buffered in batches of [`BATCH_ROWS`], encoded into the open row group, and the
//! row group is written out once its encoded size passes `s3.part.size`, so memory per
//! open object stays around one part.

use std::sync::Arc;

use arrow_array::{
    ArrayRef, BinaryArray, BooleanArray, Date32Array, Decimal128Array, Float32Array, Float64Array, Int16Array, Int32Array, Int64Array,
    Int8Array, ListArray, MapArray, RecordBatch, StringArray, StructArray, Time32MillisecondArray, TimestampMillisecondArray,
};
use arrow_buffer::{NullBuffer, OffsetBuffer, ScalarBuffer};
use arrow_schema::{DataType, Field, FieldRef, Fields, Schema as ArrowSchema, TimeUnit};
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, GzipLevel, ZstdLevel};
use parquet::file::properties::WriterProperties;
use sluice_api::schema::logical;
use sluice_api::{ConnectError, ConnectResult, Schema, SchemaRef, SchemaType, SinkRecord, Value};

use super::RecordEncoder;
use crate::s3_sink::config::ParquetCodec;

/// Records per Arrow batch handed to the Parquet writer.
pub const BATCH_ROWS: usize = 1024;
const MAX_DECIMAL128_PRECISION: u8 = 38;
const DECIMAL_PRECISION_PARAM: &str = "connect.decimal.precision";

fn arrow_err(what: &str, e: impl std::error::Error + Send + Sync + 'static) -> ConnectError {
    ConnectError::fatal_from(format!("{what} failed"), e)
}

/// The Arrow type of a Connect schema.
pub fn data_type(s: &Schema) -> ConnectResult<DataType> {
    Ok(match (s.kind, s.name.as_deref()) {
        (SchemaType::Int8, _) => DataType::Int8,
        (SchemaType::Int16, _) => DataType::Int16,
        (SchemaType::Int32, Some(logical::DATE)) => DataType::Date32,
        (SchemaType::Int32, Some(logical::TIME)) => DataType::Time32(TimeUnit::Millisecond),
        (SchemaType::Int32, _) => DataType::Int32,
        (SchemaType::Int64, Some(logical::TIMESTAMP)) => DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into())),
        (SchemaType::Int64, _) => DataType::Int64,
        (SchemaType::Float32, _) => DataType::Float32,
        (SchemaType::Float64, _) => DataType::Float64,
        (SchemaType::Boolean, _) => DataType::Boolean,
        (SchemaType::String, _) => DataType::Utf8,
        (SchemaType::Bytes, Some(logical::DECIMAL)) => {
            let scale = s.decimal_scale().unwrap_or(0);
            let precision = s.parameter(DECIMAL_PRECISION_PARAM).and_then(|p| p.parse::<u8>().ok()).unwrap_or(MAX_DECIMAL128_PRECISION);
            if precision > MAX_DECIMAL128_PRECISION || !(-128..=127).contains(&scale) {
                return Err(ConnectError::fatal(format!(
                    "a Decimal of precision {precision} and scale {scale} does not fit Parquet DECIMAL(38); not supported yet"
                )));
            }
            DataType::Decimal128(precision, scale as i8)
        }
        (SchemaType::Bytes, _) => DataType::Binary,
        (SchemaType::Array, _) => {
            let e = s.value_schema.as_deref().expect("array element schema");
            DataType::List(Arc::new(Field::new("element", data_type(e)?, e.optional)))
        }
        (SchemaType::Map, _) => DataType::Map(map_entries(s)?, false),
        (SchemaType::Struct, _) => DataType::Struct(fields(s)?),
    })
}

fn map_entries(s: &Schema) -> ConnectResult<FieldRef> {
    let k = s.key_schema.as_deref().expect("map key schema");
    let v = s.value_schema.as_deref().expect("map value schema");
    let entries = Fields::from(vec![Field::new("key", data_type(k)?, false), Field::new("value", data_type(v)?, v.optional)]);
    Ok(Arc::new(Field::new("key_value", DataType::Struct(entries), false)))
}

fn fields(s: &Schema) -> ConnectResult<Fields> {
    if s.fields.is_empty() {
        return Err(ConnectError::fatal("Parquet cannot store a struct without fields"));
    }
    s.fields
        .iter()
        .map(|f| Ok(Field::new(&f.name, data_type(&f.schema)?, f.schema.optional)))
        .collect::<ConnectResult<Vec<_>>>()
        .map(Fields::from)
}

/// The Arrow schema of a Connect struct schema.
pub fn arrow_schema(s: &Schema) -> ConnectResult<ArrowSchema> {
    if s.kind != SchemaType::Struct {
        return Err(ConnectError::fatal(format!(
            "ParquetFormat needs struct values; the value schema is {} (wrap it in a struct, e.g. with the HoistField transform)",
            s.kind.json_name()
        )));
    }
    Ok(ArrowSchema::new(fields(s)?))
}

static NULL: Value = Value::Null;

fn nulls(vals: &[&Value]) -> Option<NullBuffer> {
    if vals.iter().any(|v| v.is_null()) {
        Some(NullBuffer::from(vals.iter().map(|v| !v.is_null()).collect::<Vec<bool>>()))
    } else {
        None
    }
}

fn mismatch(dt: &DataType, v: &Value) -> ConnectError {
    ConnectError::fatal(format!("a value does not match its schema: expected {dt}, got {}", super::json::kind(v)))
}

fn ints(dt: &DataType, vals: &[&Value]) -> ConnectResult<Vec<Option<i64>>> {
    vals.iter().map(|v| if v.is_null() { Ok(None) } else { v.as_i64().map(Some).ok_or_else(|| mismatch(dt, v)) }).collect()
}

fn floats(dt: &DataType, vals: &[&Value]) -> ConnectResult<Vec<Option<f64>>> {
    vals.iter()
        .map(|v| match v {
            Value::Null => Ok(None),
            Value::Float32(f) => Ok(Some(f64::from(*f))),
            Value::Float64(f) => Ok(Some(*f)),
            other => Err(mismatch(dt, other)),
        })
        .collect()
}

fn offsets(lens: impl Iterator<Item = usize>) -> ConnectResult<OffsetBuffer<i32>> {
    let mut acc = 0i32;
    let mut out = vec![0i32];
    for l in lens {
        acc = acc
            .checked_add(i32::try_from(l).unwrap_or(i32::MAX))
            .ok_or_else(|| ConnectError::fatal("a list column of one batch is too long"))?;
        out.push(acc);
    }
    Ok(OffsetBuffer::new(ScalarBuffer::from(out)))
}

/// One Arrow column from the values of one Connect field across rows.
pub fn build(s: &Schema, dt: &DataType, vals: &[&Value]) -> ConnectResult<ArrayRef> {
    let narrow = |v: Option<i64>| v.map(|x| x as i32);
    Ok(match dt {
        DataType::Int8 => Arc::new(Int8Array::from(ints(dt, vals)?.into_iter().map(|v| v.map(|x| x as i8)).collect::<Vec<_>>())),
        DataType::Int16 => Arc::new(Int16Array::from(ints(dt, vals)?.into_iter().map(|v| v.map(|x| x as i16)).collect::<Vec<_>>())),
        DataType::Int32 => Arc::new(Int32Array::from(ints(dt, vals)?.into_iter().map(narrow).collect::<Vec<_>>())),
        DataType::Date32 => Arc::new(Date32Array::from(ints(dt, vals)?.into_iter().map(narrow).collect::<Vec<_>>())),
        DataType::Time32(_) => Arc::new(Time32MillisecondArray::from(ints(dt, vals)?.into_iter().map(narrow).collect::<Vec<_>>())),
        DataType::Int64 => Arc::new(Int64Array::from(ints(dt, vals)?)),
        DataType::Timestamp(_, _) => Arc::new(TimestampMillisecondArray::from(ints(dt, vals)?).with_timezone("UTC")),
        DataType::Float32 => Arc::new(Float32Array::from(floats(dt, vals)?.into_iter().map(|v| v.map(|x| x as f32)).collect::<Vec<_>>())),
        DataType::Float64 => Arc::new(Float64Array::from(floats(dt, vals)?)),
        DataType::Boolean => Arc::new(BooleanArray::from(
            vals.iter()
                .map(|v| match v {
                    Value::Null => Ok(None),
                    Value::Boolean(b) => Ok(Some(*b)),
                    other => Err(mismatch(dt, other)),
                })
                .collect::<ConnectResult<Vec<_>>>()?,
        )),
        DataType::Utf8 => Arc::new(StringArray::from(
            vals.iter()
                .map(|v| match v {
                    Value::Null => Ok(None),
                    Value::String(s) => Ok(Some(s.as_str())),
                    other => Err(mismatch(dt, other)),
                })
                .collect::<ConnectResult<Vec<_>>>()?,
        )),
        DataType::Binary => Arc::new(BinaryArray::from(
            vals.iter()
                .map(|v| match v {
                    Value::Null => Ok(None),
                    Value::Bytes(b) => Ok(Some(b.as_slice())),
                    other => Err(mismatch(dt, other)),
                })
                .collect::<ConnectResult<Vec<_>>>()?,
        )),
        DataType::Decimal128(p, sc) => {
            let v = vals
                .iter()
                .map(|v| match v {
                    Value::Null => Ok(None),
                    Value::Bytes(b) if b.len() <= 16 => Ok(Some(super::json::be_i128(b))),
                    Value::Bytes(_) => Err(ConnectError::fatal("a Decimal value is wider than 128 bits")),
                    other => Err(mismatch(dt, other)),
                })
                .collect::<ConnectResult<Vec<_>>>()?;
            Arc::new(Decimal128Array::from(v).with_precision_and_scale(*p, *sc).map_err(|e| arrow_err("building a decimal column", e))?)
        }
        DataType::List(field) => {
            let es = s.value_schema.as_deref().expect("array element schema");
            let mut items: Vec<&Value> = Vec::new();
            let mut lens = Vec::with_capacity(vals.len());
            for v in vals {
                match v {
                    Value::Null => lens.push(0),
                    Value::Array(a) => {
                        lens.push(a.len());
                        items.extend(a.iter());
                    }
                    other => return Err(mismatch(dt, other)),
                }
            }
            let child = build(es, field.data_type(), &items)?;
            Arc::new(
                ListArray::try_new(field.clone(), offsets(lens.into_iter())?, child, nulls(vals))
                    .map_err(|e| arrow_err("building a list column", e))?,
            )
        }
        DataType::Map(field, _) => {
            let ks = s.key_schema.as_deref().expect("map key schema");
            let vs = s.value_schema.as_deref().expect("map value schema");
            let DataType::Struct(entry_fields) = field.data_type() else { unreachable!("map entries are a struct") };
            let mut keys: Vec<&Value> = Vec::new();
            let mut values: Vec<&Value> = Vec::new();
            let mut lens = Vec::with_capacity(vals.len());
            for v in vals {
                match v {
                    Value::Null => lens.push(0),
                    Value::Map(m) => {
                        lens.push(m.len());
                        for (k, v) in m {
                            keys.push(k);
                            values.push(v);
                        }
                    }
                    other => return Err(mismatch(dt, other)),
                }
            }
            let k = build(ks, entry_fields[0].data_type(), &keys)?;
            let v = build(vs, entry_fields[1].data_type(), &values)?;
            let entries = StructArray::try_new(entry_fields.clone(), vec![k, v], None).map_err(|e| arrow_err("building map entries", e))?;
            Arc::new(
                MapArray::try_new(field.clone(), offsets(lens.into_iter())?, entries, nulls(vals), false)
                    .map_err(|e| arrow_err("building a map column", e))?,
            )
        }
        DataType::Struct(fs) => {
            let mut children = Vec::with_capacity(fs.len());
            for (f, af) in s.fields.iter().zip(fs.iter()) {
                let col: Vec<&Value> = vals
                    .iter()
                    .map(|v| match v {
                        Value::Struct(st) => st.get(&f.name).unwrap_or(&NULL),
                        _ => &NULL,
                    })
                    .collect();
                children.push(build(&f.schema, af.data_type(), &col)?);
            }
            Arc::new(StructArray::try_new(fs.clone(), children, nulls(vals)).map_err(|e| arrow_err("building a struct column", e))?)
        }
        other => return Err(ConnectError::fatal(format!("no Parquet mapping for {other}"))),
    })
}

pub struct ParquetEncoder {
    schema: SchemaRef,
    arrow: Arc<ArrowSchema>,
    writer: ArrowWriter<Vec<u8>>,
    rows: Vec<Value>,
    /// [`super::value_size`] of `rows`.
    rows_bytes: usize,
    row_group_bytes: usize,
}

impl ParquetEncoder {
    pub fn new(schema: Option<&SchemaRef>, codec: ParquetCodec, part_size: usize) -> ConnectResult<Self> {
        let schema = schema.cloned().ok_or_else(|| {
            ConnectError::fatal("ParquetFormat needs records with a value schema (e.g. JsonConverter with schemas.enable=true); use JsonFormat for schemaless records")
        })?;
        let arrow = Arc::new(arrow_schema(&schema)?);
        let compression = match codec {
            ParquetCodec::None => Compression::UNCOMPRESSED,
            ParquetCodec::Snappy => Compression::SNAPPY,
            ParquetCodec::Gzip => Compression::GZIP(GzipLevel::default()),
            ParquetCodec::Zstd => Compression::ZSTD(ZstdLevel::default()),
        };
        let props = WriterProperties::builder().set_compression(compression).build();
        let writer = ArrowWriter::try_new(Vec::new(), arrow.clone(), Some(props)).map_err(|e| arrow_err("starting a Parquet file", e))?;
        Ok(Self { schema, arrow, writer, rows: Vec::with_capacity(BATCH_ROWS), rows_bytes: 0, row_group_bytes: part_size })
    }

    fn write_batch(&mut self) -> ConnectResult<()> {
        if self.rows.is_empty() {
            return Ok(());
        }
        let refs: Vec<&Value> = self.rows.iter().collect();
        let mut columns = Vec::with_capacity(self.schema.fields.len());
        for (f, af) in self.schema.fields.iter().zip(self.arrow.fields().iter()) {
            let col: Vec<&Value> = refs
                .iter()
                .map(|v| match v {
                    Value::Struct(st) => st.get(&f.name).unwrap_or(&NULL),
                    _ => &NULL,
                })
                .collect();
            columns.push(build(&f.schema, af.data_type(), &col).map_err(|e| ConnectError::fatal(format!("field {:?}: {e}", f.name)))?);
        }
        let batch = RecordBatch::try_new(self.arrow.clone(), columns).map_err(|e| arrow_err("building a record batch", e))?;
        self.writer.write(&batch).map_err(|e| arrow_err("encoding Parquet rows", e))?;
        self.rows.clear();
        self.rows_bytes = 0;
        if self.writer.in_progress_size() >= self.row_group_bytes {
            self.writer.flush().map_err(|e| arrow_err("writing a Parquet row group", e))?;
        }
        Ok(())
    }
}

impl RecordEncoder for ParquetEncoder {
    fn write(&mut self, r: &SinkRecord, out: &mut Vec<u8>) -> ConnectResult<()> {
        if !matches!(r.value, Value::Struct(_)) {
            return Err(ConnectError::fatal(format!(
                "ParquetFormat needs struct values; record {}-{} offset {} has {}",
                r.topic,
                r.partition,
                r.offset,
                super::json::kind(&r.value)
            )));
        }
        self.rows_bytes += super::value_size(&r.value);
        self.rows.push(r.value.clone());
        if self.rows.len() >= BATCH_ROWS {
            self.write_batch()
                .map_err(|e| ConnectError::fatal(format!("records of {}-{} up to offset {}: {e}", r.topic, r.partition, r.offset)))?;
            out.append(self.writer.inner_mut());
        }
        Ok(())
    }

    /// The open row group's encoded size plus the rows waiting for the next batch.
    fn held_bytes(&self) -> usize {
        self.writer.in_progress_size() + self.rows_bytes
    }

    fn finish(&mut self, out: &mut Vec<u8>) -> ConnectResult<()> {
        self.write_batch()?;
        self.writer.finish().map_err(|e| arrow_err("writing the Parquet footer", e))?;
        out.append(self.writer.inner_mut());
        Ok(())
    }
}
