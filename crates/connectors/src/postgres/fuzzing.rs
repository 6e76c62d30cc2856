//! Entry points for the fuzz targets in `fuzz/` (see `fuzz/README.md`); nothing else calls
//! them. Each runs one reader of what a server or a stored offset hands the connector: the
//! pgoutput decoder, the text form of a column value under the handling modes, and
//! Debezium's serialized chunk keys. A target's contract: any input gives a result or an
//! error, never a panic.

use super::config::{BinaryMode, DecimalMode, HstoreMode, IntervalMode, TimeMode};
use super::mapping::{self, Modes, PgType};

/// The column types [`text_value`] picks from, as (oid, type modifier): the built-in types
/// of a Postgres 15 table with one column of each, as its Relation message names them.
pub const BUILTIN_TYPES: &[(u32, i32)] = &[
    (16, -1),        // bool
    (21, -1),        // int2
    (23, -1),        // int4
    (20, -1),        // int8
    (700, -1),       // float4
    (701, -1),       // float8
    (1700, 655_366), // numeric(10,2)
    (1700, -1),      // numeric
    (25, -1),        // text
    (17, -1),        // bytea
    (2950, -1),      // uuid
    (114, -1),       // json
    (142, -1),       // xml
    (1082, -1),      // date
    (1083, -1),      // time
    (1083, 3),       // time(3)
    (1266, -1),      // timetz
    (1114, -1),      // timestamp
    (1114, 3),       // timestamp(3)
    (1184, -1),      // timestamptz
    (1184, 0),       // timestamptz(0)
    (1186, -1),      // interval
    (790, -1),       // money
    (1560, 4),       // bit(4)
    (1562, -1),      // varbit
    (1560, 1),       // bit(1)
    (3904, -1),      // int4range
    (3614, -1),      // tsvector
    (600, -1),       // point
    (628, -1),       // line
    (718, -1),       // circle
    (603, -1),       // box
    (601, -1),       // lseg
    (602, -1),       // path
    (604, -1),       // polygon
    (1007, -1),      // int4[]
    (1009, -1),      // text[]
    (1231, -1),      // numeric[]
    (1017, -1),      // point[]
    (1016, -1),      // int8[]
    (1001, -1),      // bytea[]
    (1182, -1),      // date[]
    (1185, -1),      // timestamptz[]
];

/// The types a catalog look-up gives (after [`BUILTIN_TYPES`] in [`text_value`]'s numbering).
fn catalog_types() -> [PgType; 4] {
    let labels = "sad,ok,happy".to_owned();
    [PgType::Hstore, PgType::Ltree, PgType::Enum { labels: labels.clone() }, PgType::Array(Box::new(PgType::Enum { labels }))]
}

/// How many types [`text_value`] knows.
pub fn type_count() -> usize {
    BUILTIN_TYPES.len() + catalog_types().len()
}

/// The handling modes from the bits of `selector`: decimal (bits 0-1), time (2-3), binary
/// (4-5), interval (6), hstore (7).
fn modes(selector: u8) -> Modes {
    Modes {
        decimal: [DecimalMode::Precise, DecimalMode::Double, DecimalMode::String][usize::from(selector & 3) % 3],
        time: [TimeMode::Adaptive, TimeMode::AdaptiveTimeMicroseconds, TimeMode::Connect][usize::from((selector >> 2) & 3) % 3],
        binary: [BinaryMode::Bytes, BinaryMode::Base64, BinaryMode::Base64UrlSafe, BinaryMode::Hex][usize::from((selector >> 4) & 3)],
        interval: if selector & 0x40 == 0 { IntervalMode::Numeric } else { IntervalMode::String },
        hstore: if selector & 0x80 == 0 { HstoreMode::Json } else { HstoreMode::Map },
        ..Modes::DEFAULT
    }
}

/// Decodes one pgoutput message (the payload of an XLogData).
pub fn decode(payload: &[u8]) -> Result<(), String> {
    super::decode::decode(payload).map(drop).map_err(|e| e.to_string())
}

/// Converts `text` as the value of type number `type_index` (modulo [`type_count`]) under
/// the modes `mode_bits` selects, and builds its schema.
pub fn text_value(type_index: usize, mode_bits: u8, text: &str) -> Result<(), String> {
    let index = type_index % type_count();
    let ty = match BUILTIN_TYPES.get(index) {
        Some(&(oid, typmod)) => mapping::builtin(oid, typmod).ok_or_else(|| format!("type {oid} is not built in"))?,
        None => catalog_types()[index - BUILTIN_TYPES.len()].clone(),
    };
    let modes = modes(mode_bits);
    let _schema = mapping::schema(&ty, &modes, true);
    mapping::value(&ty, &modes, text).map(drop)
}

/// Reads a chunk key stored in Debezium's form (a Java-serialized `Object[]`), given as the
/// serialized bytes (hex-encoded here, as offsets store them).
pub fn chunk_key(serialized: &[u8]) -> Option<Vec<String>> {
    super::java_keys::chunk_key(&mapping::hex_string(serialized))
}
