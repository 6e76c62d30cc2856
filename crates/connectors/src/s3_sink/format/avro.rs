//! `AvroFormat`: Avro object container files. The Avro schema is derived from the Connect
//! value schema with the mapping Confluent's `AvroData` uses (`connect.name`,
//! `connect.version`, `connect.parameters`, `connect.type` for int8/int16, logical types for
//! Decimal, Date, Time and Timestamp; unnamed structs become `ConnectDefault`, `ConnectDefault2`…
//! in namespace `io.confluent.connect.avro`; optional schemas become `["null", T]` unions;
//! maps with non-string keys become arrays of `MapEntry` records).
//!
//! The container is written here (header, blocks of about 64 KiB, codec null, deflate or
//! snappy) so that the sync marker is derived from the object name: the same records give the
//! same bytes.

use std::io::Write as _;

use serde_json::{json, Map, Value as Json};
use sluice_api::schema::logical;
use sluice_api::{ConnectError, ConnectResult, Schema, SchemaRef, SchemaType, SinkRecord, Value};

use super::RecordEncoder;
use crate::s3_sink::config::AvroCodec;

const NAMESPACE: &str = "io.confluent.connect.avro";
const DEFAULT_NAME: &str = "ConnectDefault";
const DECIMAL_PRECISION_PARAM: &str = "connect.decimal.precision";
const DEFAULT_DECIMAL_PRECISION: u32 = 64;
const BLOCK_BYTES: usize = 64 * 1024;

/// Converts Connect schemas to Avro schema JSON, naming records uniquely.
#[derive(Default)]
struct SchemaMapper {
    defaults: usize,
    entries: usize,
    named: std::collections::HashSet<String>,
}

fn scrub(name: &str) -> String {
    let mut s: String = name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' { c } else { '_' }).collect();
    if s.chars().next().is_none_or(|c| c.is_ascii_digit()) {
        s.insert(0, '_');
    }
    s
}

impl SchemaMapper {
    fn with_optional(&mut self, s: &Schema) -> Json {
        let t = self.schema(s);
        if s.optional {
            json!(["null", t])
        } else {
            t
        }
    }

    fn connect_props(s: &Schema, out: &mut Map<String, Json>) {
        if let Some(d) = &s.doc {
            out.insert("connect.doc".into(), json!(d));
        }
        if let Some(v) = s.version {
            out.insert("connect.version".into(), json!(v));
        }
        if !s.parameters.is_empty() {
            out.insert("connect.parameters".into(), Json::Object(s.parameters.iter().map(|(k, v)| (k.clone(), json!(v))).collect()));
        }
        if let Some(n) = &s.name {
            out.insert("connect.name".into(), json!(n));
        }
    }

    fn schema(&mut self, s: &Schema) -> Json {
        let mut o = Map::new();
        match s.kind {
            SchemaType::Struct => return self.record(s),
            SchemaType::Array => {
                o.insert("type".into(), json!("array"));
                let items = self.with_optional(s.value_schema.as_deref().expect("array schema has an element schema"));
                o.insert("items".into(), items);
            }
            SchemaType::Map => {
                let ks = s.key_schema.as_deref().expect("map schema has a key schema");
                let vs = s.value_schema.as_deref().expect("map schema has a value schema");
                if ks.kind == SchemaType::String && !ks.optional {
                    o.insert("type".into(), json!("map"));
                    o.insert("values".into(), self.with_optional(vs));
                } else {
                    self.entries += 1;
                    let name = if self.entries == 1 { "MapEntry".to_owned() } else { format!("MapEntry{}", self.entries) };
                    let k = self.with_optional(ks);
                    let v = self.with_optional(vs);
                    o.insert("type".into(), json!("array"));
                    o.insert(
                        "items".into(),
                        json!({"type": "record", "name": name, "namespace": NAMESPACE, "fields": [{"name": "key", "type": k}, {"name": "value", "type": v}]}),
                    );
                }
            }
            kind => {
                let base = match kind {
                    SchemaType::Int8 | SchemaType::Int16 | SchemaType::Int32 => "int",
                    SchemaType::Int64 => "long",
                    SchemaType::Float32 => "float",
                    SchemaType::Float64 => "double",
                    SchemaType::Boolean => "boolean",
                    SchemaType::String => "string",
                    _ => "bytes",
                };
                o.insert("type".into(), json!(base));
                match kind {
                    SchemaType::Int8 => drop(o.insert("connect.type".into(), json!("int8"))),
                    SchemaType::Int16 => drop(o.insert("connect.type".into(), json!("int16"))),
                    _ => {}
                }
                match s.name.as_deref() {
                    Some(logical::DECIMAL) => {
                        let scale = s.decimal_scale().unwrap_or(0);
                        let precision =
                            s.parameter(DECIMAL_PRECISION_PARAM).and_then(|p| p.parse().ok()).unwrap_or(DEFAULT_DECIMAL_PRECISION);
                        o.insert("scale".into(), json!(scale));
                        o.insert("precision".into(), json!(precision));
                        o.insert("logicalType".into(), json!("decimal"));
                    }
                    Some(logical::DATE) => drop(o.insert("logicalType".into(), json!("date"))),
                    Some(logical::TIME) => drop(o.insert("logicalType".into(), json!("time-millis"))),
                    Some(logical::TIMESTAMP) => drop(o.insert("logicalType".into(), json!("timestamp-millis"))),
                    _ => {}
                }
                Self::connect_props(s, &mut o);
                if o.len() == 1 {
                    return json!(base);
                }
            }
        }
        Self::connect_props(s, &mut o);
        Json::Object(o)
    }

    fn record(&mut self, s: &Schema) -> Json {
        let (namespace, name) = match s.name.as_deref() {
            Some(full) => match full.rsplit_once('.') {
                Some((ns, n)) => (ns.split('.').map(scrub).collect::<Vec<_>>().join("."), scrub(n)),
                None => (String::new(), scrub(full)),
            },
            None => {
                self.defaults += 1;
                let n = if self.defaults == 1 { DEFAULT_NAME.to_owned() } else { format!("{DEFAULT_NAME}{}", self.defaults) };
                (NAMESPACE.to_owned(), n)
            }
        };
        let full = if namespace.is_empty() { name.clone() } else { format!("{namespace}.{name}") };
        if !self.named.insert(full.clone()) {
            // Defined earlier in this schema: refer to it by name.
            return json!(full);
        }
        let fields: Vec<Json> = s
            .fields
            .iter()
            .map(|f| {
                let mut o = Map::new();
                o.insert("name".into(), json!(scrub(&f.name)));
                o.insert("type".into(), self.with_optional(&f.schema));
                if f.schema.optional {
                    o.insert("default".into(), Json::Null);
                }
                Json::Object(o)
            })
            .collect();
        let mut o = Map::new();
        o.insert("type".into(), json!("record"));
        o.insert("name".into(), json!(name));
        if !namespace.is_empty() {
            o.insert("namespace".into(), json!(namespace));
        }
        o.insert("fields".into(), Json::Array(fields));
        Self::connect_props(s, &mut o);
        Json::Object(o)
    }
}

/// The Avro schema (JSON) of a Connect value schema, as Confluent's `AvroData` builds it.
pub fn avro_schema(s: &Schema) -> Json {
    SchemaMapper::default().with_optional(s)
}

fn zigzag(v: i64, out: &mut Vec<u8>) {
    let mut n = ((v << 1) ^ (v >> 63)) as u64;
    loop {
        let b = (n & 0x7f) as u8;
        n >>= 7;
        if n == 0 {
            out.push(b);
            return;
        }
        out.push(b | 0x80);
    }
}

fn bytes(b: &[u8], out: &mut Vec<u8>) {
    zigzag(b.len() as i64, out);
    out.extend_from_slice(b);
}

fn mismatch(s: &Schema, v: &Value) -> ConnectError {
    ConnectError::fatal(format!(
        "a value of the record does not match its schema: expected {}, got {}",
        s.kind.json_name(),
        super::json::kind(v)
    ))
}

/// Appends the Avro binary encoding of `v` under the schema [`avro_schema`] derives from `s`.
pub fn encode(s: &Schema, v: &Value, out: &mut Vec<u8>) -> ConnectResult<()> {
    if s.optional {
        if v.is_null() {
            out.push(0);
            return Ok(());
        }
        out.push(2); // union branch 1, zigzag-encoded
    } else if v.is_null() {
        return Err(ConnectError::fatal(format!("a null value for a required {} field", s.kind.json_name())));
    }
    match (s.kind, v) {
        (SchemaType::Int8 | SchemaType::Int16 | SchemaType::Int32 | SchemaType::Int64, v) => {
            zigzag(v.as_i64().ok_or_else(|| mismatch(s, v))?, out)
        }
        (SchemaType::Float32, Value::Float32(f)) => out.extend_from_slice(&f.to_le_bytes()),
        (SchemaType::Float32, Value::Float64(f)) => out.extend_from_slice(&(*f as f32).to_le_bytes()),
        (SchemaType::Float64, Value::Float64(f)) => out.extend_from_slice(&f.to_le_bytes()),
        (SchemaType::Float64, Value::Float32(f)) => out.extend_from_slice(&f64::from(*f).to_le_bytes()),
        (SchemaType::Boolean, Value::Boolean(b)) => out.push(u8::from(*b)),
        (SchemaType::String, Value::String(t)) => bytes(t.as_bytes(), out),
        (SchemaType::Bytes, Value::Bytes(b)) => bytes(b, out),
        (SchemaType::Array, Value::Array(items)) => {
            let es = s.value_schema.as_deref().expect("array element schema");
            if !items.is_empty() {
                zigzag(items.len() as i64, out);
                for i in items {
                    encode(es, i, out)?;
                }
            }
            out.push(0);
        }
        (SchemaType::Map, Value::Map(entries)) => {
            let ks = s.key_schema.as_deref().expect("map key schema");
            let vs = s.value_schema.as_deref().expect("map value schema");
            if !entries.is_empty() {
                zigzag(entries.len() as i64, out);
                for (k, v) in entries {
                    encode(ks, k, out)?;
                    encode(vs, v, out)?;
                }
            }
            out.push(0);
        }
        (SchemaType::Struct, Value::Struct(st)) => {
            for f in &s.fields {
                let v = st.get(&f.name).unwrap_or(&Value::Null);
                encode(&f.schema, v, out)?;
            }
        }
        (_, v) => return Err(mismatch(s, v)),
    }
    Ok(())
}

/// A 16-byte sync marker derived from the object name (FNV-1a, two seeds).
fn sync_marker(key: &str) -> [u8; 16] {
    let fnv = |seed: u64| key.bytes().fold(seed, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3));
    let mut m = [0u8; 16];
    m[..8].copy_from_slice(&fnv(0xcbf2_9ce4_8422_2325).to_le_bytes());
    m[8..].copy_from_slice(&fnv(0x8422_2325_cbf2_9ce4).to_le_bytes());
    m
}

pub struct AvroEncoder {
    schema: SchemaRef,
    codec: AvroCodec,
    sync: [u8; 16],
    header: Option<Vec<u8>>,
    block: Vec<u8>,
    count: usize,
}

impl AvroEncoder {
    pub fn new(schema: Option<&SchemaRef>, codec: AvroCodec, key: &str) -> ConnectResult<Self> {
        let schema = schema.cloned().ok_or_else(|| {
            ConnectError::fatal("AvroFormat needs records with a value schema (e.g. JsonConverter with schemas.enable=true); use JsonFormat for schemaless records")
        })?;
        let sync = sync_marker(key);
        let mut header = b"Obj\x01".to_vec();
        zigzag(2, &mut header);
        bytes(b"avro.schema", &mut header);
        bytes(avro_schema(&schema).to_string().as_bytes(), &mut header);
        bytes(b"avro.codec", &mut header);
        bytes(
            match codec {
                AvroCodec::Null => b"null",
                AvroCodec::Deflate => b"deflate",
                AvroCodec::Snappy => b"snappy",
            },
            &mut header,
        );
        header.push(0);
        header.extend_from_slice(&sync);
        Ok(Self { schema, codec, sync, header: Some(header), block: Vec::new(), count: 0 })
    }

    fn emit_block(&mut self, out: &mut Vec<u8>) -> ConnectResult<()> {
        if let Some(h) = self.header.take() {
            out.extend_from_slice(&h);
        }
        if self.count == 0 {
            return Ok(());
        }
        let data = match self.codec {
            AvroCodec::Null => std::mem::take(&mut self.block),
            AvroCodec::Deflate => {
                let mut e = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::default());
                e.write_all(&self.block)
                    .and_then(|_| e.finish())
                    .map_err(|e| ConnectError::fatal_from("deflating an Avro block failed", e))?
            }
            AvroCodec::Snappy => {
                let mut c = snap::raw::Encoder::new()
                    .compress_vec(&self.block)
                    .map_err(|e| ConnectError::fatal_from("compressing an Avro block failed", e))?;
                c.extend_from_slice(&crc32fast::hash(&self.block).to_be_bytes());
                c
            }
        };
        zigzag(self.count as i64, out);
        bytes(&data, out);
        out.extend_from_slice(&self.sync);
        self.block.clear();
        self.count = 0;
        Ok(())
    }
}

impl RecordEncoder for AvroEncoder {
    fn write(&mut self, r: &SinkRecord, out: &mut Vec<u8>) -> ConnectResult<()> {
        encode(&self.schema, &r.value, &mut self.block)
            .map_err(|e| ConnectError::fatal(format!("record {}-{} offset {}: {e}", r.topic, r.partition, r.offset)))?;
        self.count += 1;
        if self.block.len() >= BLOCK_BYTES {
            self.emit_block(out)?;
        }
        Ok(())
    }

    fn held_bytes(&self) -> usize {
        self.block.len()
    }

    fn finish(&mut self, out: &mut Vec<u8>) -> ConnectResult<()> {
        self.emit_block(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schema_mapping_follows_confluent() {
        let s = Schema::struct_of([
            ("id", Schema::int64().into_ref()),
            ("small", Schema::int8().into_ref()),
            ("name", Schema::string().optional().into_ref()),
            ("price", Schema::decimal(2).into_ref()),
            ("at", Schema::timestamp().into_ref()),
        ]);
        let j = avro_schema(&s);
        assert_eq!(j["name"], "ConnectDefault");
        assert_eq!(j["namespace"], NAMESPACE);
        assert_eq!(j["fields"][0]["type"], "long");
        assert_eq!(j["fields"][1]["type"], json!({"type": "int", "connect.type": "int8"}));
        assert_eq!(j["fields"][2]["type"], json!(["null", "string"]));
        assert_eq!(j["fields"][2]["default"], Json::Null);
        assert_eq!(j["fields"][3]["type"]["logicalType"], "decimal");
        assert_eq!(j["fields"][3]["type"]["connect.name"], logical::DECIMAL);
        assert_eq!(j["fields"][4]["type"]["logicalType"], "timestamp-millis");
        let named = Schema::struct_of([("a", Schema::int32().into_ref())]).named("my-server.public.Value");
        assert_eq!(avro_schema(&named)["namespace"], "my_server.public");
    }

    #[test]
    fn zigzag_matches_the_spec() {
        let mut v = Vec::new();
        for n in [0i64, -1, 1, -64, 64] {
            zigzag(n, &mut v);
        }
        assert_eq!(v, vec![0, 1, 2, 0x7f, 0x80, 0x01]);
    }
}
