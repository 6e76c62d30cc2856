//! How a Postgres column type becomes a Connect schema and how its text form (pgoutput
//! text tuples and snapshot rows, both read with the same session settings) becomes a
//! Connect value, following Debezium's type tables for each handling mode.
//!
//! Session settings every reader pins (see [`SESSION_OPTIONS`]): ISO dates, UTC time zone,
//! `postgres` intervals, hex bytea, full float precision and C money (`$1,234.56`), so the
//! text form is unambiguous.

use std::borrow::Cow;

use base64::Engine as _;
use sluice_api::{Schema, Value};

use super::config::{BinaryMode, DecimalMode, HstoreMode, IntervalMode, TimeMode, DEFAULT_UNAVAILABLE_VALUE_PLACEHOLDER};
use super::geometry::{self, parse_point, point_schema, point_value};
use super::interval;

/// The `options` startup parameter of every connection the connector opens.
pub const SESSION_OPTIONS: &str =
    "-c DateStyle=ISO,YMD -c TimeZone=UTC -c IntervalStyle=postgres -c bytea_output=hex -c extra_float_digits=3 -c lc_monetary=C";

pub mod names {
    pub const DATE: &str = "io.debezium.time.Date";
    pub const TIME: &str = "io.debezium.time.Time";
    pub const MICRO_TIME: &str = "io.debezium.time.MicroTime";
    pub const TIMESTAMP: &str = "io.debezium.time.Timestamp";
    pub const MICRO_TIMESTAMP: &str = "io.debezium.time.MicroTimestamp";
    pub const ZONED_TIMESTAMP: &str = "io.debezium.time.ZonedTimestamp";
    pub const ZONED_TIME: &str = "io.debezium.time.ZonedTime";
    pub const UUID: &str = "io.debezium.data.Uuid";
    pub const JSON: &str = "io.debezium.data.Json";
    pub const XML: &str = "io.debezium.data.Xml";
    pub const ENUM: &str = "io.debezium.data.Enum";
    pub const MICRO_DURATION: &str = "io.debezium.time.MicroDuration";
    pub const INTERVAL: &str = "io.debezium.time.Interval";
    pub const BITS: &str = "io.debezium.data.Bits";
    pub const VARIABLE_SCALE_DECIMAL: &str = "io.debezium.data.VariableScaleDecimal";
    pub const LTREE: &str = "io.debezium.data.Ltree";
    pub const TSVECTOR: &str = "io.debezium.data.Tsvector";
    pub const POINT: &str = "io.debezium.data.geometry.Point";
    pub const GEOMETRY: &str = "io.debezium.data.geometry.Geometry";
    pub const CIRCLE: &str = "io.debezium.data.geometry.Circle";
    pub const LINE: &str = "io.debezium.data.geometry.Line";
}

/// The Postgres column types this connector maps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PgType {
    Bool,
    Int2,
    Int4,
    Int8,
    Float4,
    Float8,
    /// `scale`/`precision` are `None` for an unconstrained `numeric`.
    Numeric {
        precision: Option<i32>,
        scale: Option<i32>,
    },
    /// text, varchar, bpchar, name, inet, cidr, macaddr: strings without a semantic name.
    Text,
    Bytea,
    Uuid,
    Json,
    Xml,
    Date,
    /// Fractional second digits (6 when unspecified).
    Time {
        precision: i32,
    },
    TimeTz,
    Timestamp {
        precision: i32,
    },
    /// `precision`: fractional second digits (6 when unspecified); a ZonedTimestamp carries
    /// exactly that many (any number, trailing zeros dropped, for 0), as Debezium's.
    TimestampTz {
        precision: i32,
    },
    /// Comma-separated labels, as Debezium's `allowed` parameter.
    Enum {
        labels: String,
    },
    Array(Box<PgType>),
    /// See `interval.rs`.
    Interval,
    /// Read with the C `lc_monetary` (two fraction digits); `money.fraction.digits` sets the
    /// scale under `decimal.handling.mode=precise`.
    Money,
    /// bit(n) and varbit(n); `length` is `n` (`i32::MAX` for an unconstrained varbit).
    Bits {
        length: i32,
    },
    /// `hstore.handling.mode`: a JSON object of strings, or a map.
    Hstore,
    /// int4range, int8range, numrange, tsrange, tstzrange, daterange: their text form.
    Range,
    /// The `ltree` extension's type: its text form, named.
    Ltree,
    Tsvector,
    Point,
    /// `{A,B,C}`: the line `Ax + By + C = 0`.
    Line,
    Circle,
    /// box, lseg, path and polygon: OGC well-known binary plus the native type's name.
    Geometry(GeometryKind),
}

/// The native geometric types Debezium carries as `io.debezium.data.geometry.Geometry`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GeometryKind {
    Box,
    Lseg,
    Path,
    Polygon,
}

impl GeometryKind {
    pub(super) fn name(self) -> &'static str {
        match self {
            Self::Box => "box",
            Self::Lseg => "lseg",
            Self::Path => "path",
            Self::Polygon => "polygon",
        }
    }
}

/// The built-in type with this oid and modifier; `None` for types needing a catalog look-up
/// (enums, domains, arrays of those) or not mapped at all.
pub fn builtin(oid: u32, typmod: i32) -> Option<PgType> {
    let precision = |m: i32| if m < 0 { 6 } else { m.min(6) };
    Some(match oid {
        16 => PgType::Bool,
        17 => PgType::Bytea,
        19 | 25 | 1042 | 1043 | 650 | 869 | 829 | 774 => PgType::Text,
        20 => PgType::Int8,
        21 => PgType::Int2,
        23 => PgType::Int4,
        114 | 3802 => PgType::Json,
        142 => PgType::Xml,
        700 => PgType::Float4,
        701 => PgType::Float8,
        1082 => PgType::Date,
        1083 => PgType::Time { precision: precision(typmod) },
        1266 => PgType::TimeTz,
        1114 => PgType::Timestamp { precision: precision(typmod) },
        1184 => PgType::TimestampTz { precision: precision(typmod) },
        1700 => {
            if typmod < 4 {
                PgType::Numeric { precision: None, scale: None }
            } else {
                let m = typmod - 4;
                PgType::Numeric { precision: Some((m >> 16) & 0xffff), scale: Some(m & 0xffff) }
            }
        }
        2950 => PgType::Uuid,
        1186 => PgType::Interval,
        790 => PgType::Money,
        1560 => PgType::Bits { length: typmod.max(1) },
        1562 => PgType::Bits { length: if typmod > 0 { typmod } else { i32::MAX } },
        3904 | 3926 | 3906 | 3908 | 3910 | 3912 => PgType::Range,
        3614 => PgType::Tsvector,
        600 => PgType::Point,
        628 => PgType::Line,
        718 => PgType::Circle,
        603 => PgType::Geometry(GeometryKind::Box),
        601 => PgType::Geometry(GeometryKind::Lseg),
        602 => PgType::Geometry(GeometryKind::Path),
        604 => PgType::Geometry(GeometryKind::Polygon),
        _ => {
            let element = match oid {
                1000 => 16,
                1001 => 17,
                1005 => 21,
                1007 => 23,
                1009 => 25,
                1014 => 1042,
                1015 => 1043,
                1016 => 20,
                1021 => 700,
                1022 => 701,
                1182 => 1082,
                1183 => 1083,
                1115 => 1114,
                1185 => 1184,
                1231 => 1700,
                2951 => 2950,
                199 => 114,
                3807 => 3802,
                3905 => 3904,
                3927 => 3926,
                3907 => 3906,
                3909 => 3908,
                3911 => 3910,
                3913 => 3912,
                1017 => 600,
                _ => return None,
            };
            // Array modifiers are those of the element.
            return builtin(element, typmod).map(|e| PgType::Array(Box::new(e)));
        }
    })
}

/// The handling modes that shape schemas and values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Modes {
    pub decimal: DecimalMode,
    pub time: TimeMode,
    pub binary: BinaryMode,
    pub interval: IntervalMode,
    pub hstore: HstoreMode,
    pub money_fraction_digits: i32,
    /// `unavailable.value.placeholder`'s octets (see `toast.rs`).
    pub unavailable: Cow<'static, [u8]>,
    /// `schema.name.adjustment.mode`, `field.name.adjustment.mode`.
    pub schema_names: super::names::NameAdjust,
    pub field_names: super::names::NameAdjust,
    /// `topic.naming.strategy`, `topic.delimiter`.
    pub topics: super::names::TopicNaming,
}

impl Default for Modes {
    fn default() -> Self {
        Self::DEFAULT
    }
}

impl Modes {
    /// Debezium's defaults.
    pub const DEFAULT: Modes = Modes {
        decimal: DecimalMode::Precise,
        time: TimeMode::Adaptive,
        binary: BinaryMode::Bytes,
        interval: IntervalMode::Numeric,
        hstore: HstoreMode::Json,
        money_fraction_digits: 2,
        unavailable: Cow::Borrowed(DEFAULT_UNAVAILABLE_VALUE_PLACEHOLDER.as_bytes()),
        schema_names: super::names::NameAdjust::None,
        field_names: super::names::NameAdjust::None,
        topics: super::names::TopicNaming::DEFAULT,
    };

    pub fn from_config(cfg: &super::config::PostgresConfig) -> Self {
        Modes {
            decimal: cfg.decimal_mode,
            time: cfg.time_mode,
            binary: cfg.binary_mode,
            interval: cfg.interval_mode,
            hstore: cfg.hstore_mode,
            money_fraction_digits: cfg.money_fraction_digits,
            unavailable: Cow::Owned(cfg.unavailable_placeholder.clone()),
            schema_names: cfg.schema_names,
            field_names: cfg.field_names,
            topics: cfg.topics.clone(),
        }
    }
}

/// The Connect schema of a column of type `ty`.
pub fn schema(ty: &PgType, modes: &Modes, optional: bool) -> Schema {
    let s = match ty {
        PgType::Bool => Schema::boolean(),
        PgType::Int2 => Schema::int16(),
        PgType::Int4 => Schema::int32(),
        PgType::Int8 => Schema::int64(),
        PgType::Float4 => Schema::float32(),
        PgType::Float8 => Schema::float64(),
        PgType::Numeric { precision, scale } => match modes.decimal {
            DecimalMode::Double => Schema::float64(),
            DecimalMode::String => Schema::string(),
            DecimalMode::Precise => match (precision, scale) {
                (Some(p), Some(s)) => Schema::decimal(*s).with_parameter("connect.decimal.precision", p.to_string()),
                _ => Schema::struct_of([("scale", Schema::int32().into_ref()), ("value", Schema::bytes().into_ref())])
                    .named(names::VARIABLE_SCALE_DECIMAL)
                    .with_version(1)
                    .with_doc("Variable scaled decimal"),
            },
        },
        PgType::Text => Schema::string(),
        PgType::Bytea => match modes.binary {
            BinaryMode::Bytes => Schema::bytes(),
            _ => Schema::string(),
        },
        PgType::Uuid => Schema::string().named(names::UUID).with_version(1),
        PgType::Json => Schema::string().named(names::JSON).with_version(1),
        PgType::Xml => Schema::string().named(names::XML).with_version(1),
        PgType::Date => match modes.time {
            TimeMode::Connect => Schema::date(),
            _ => Schema::int32().named(names::DATE).with_version(1),
        },
        PgType::Time { precision } => match modes.time {
            TimeMode::Connect => Schema::time(),
            TimeMode::Adaptive if *precision <= 3 => Schema::int32().named(names::TIME).with_version(1),
            _ => Schema::int64().named(names::MICRO_TIME).with_version(1),
        },
        PgType::TimeTz => Schema::string().named(names::ZONED_TIME).with_version(1),
        PgType::Timestamp { precision } => match modes.time {
            TimeMode::Connect => Schema::timestamp(),
            _ if *precision <= 3 => Schema::int64().named(names::TIMESTAMP).with_version(1),
            _ => Schema::int64().named(names::MICRO_TIMESTAMP).with_version(1),
        },
        PgType::TimestampTz { .. } => Schema::string().named(names::ZONED_TIMESTAMP).with_version(1),
        PgType::Enum { labels } => Schema::string().named(names::ENUM).with_version(1).with_parameter("allowed", labels.clone()),
        PgType::Interval => match modes.interval {
            IntervalMode::Numeric => Schema::int64().named(names::MICRO_DURATION).with_version(1),
            IntervalMode::String => Schema::string().named(names::INTERVAL).with_version(1),
        },
        PgType::Money => match modes.decimal {
            DecimalMode::Double => Schema::float64(),
            DecimalMode::String => Schema::string(),
            DecimalMode::Precise => Schema::decimal(modes.money_fraction_digits),
        },
        PgType::Bits { length: 1 } => Schema::boolean(),
        PgType::Bits { length } => Schema::bytes().named(names::BITS).with_version(1).with_parameter("length", length.to_string()),
        PgType::Hstore => match modes.hstore {
            HstoreMode::Json => Schema::string().named(names::JSON).with_version(1),
            // Keys are required, values optional (Debezium's hstoreSchema).
            HstoreMode::Map => Schema::map(Schema::string().into_ref(), Schema::string().optional().into_ref()),
        },
        PgType::Range => Schema::string(),
        PgType::Ltree => Schema::string().named(names::LTREE).with_version(1),
        PgType::Tsvector => Schema::string().named(names::TSVECTOR).with_version(1),
        PgType::Point => point_schema(),
        // Debezium's builders for these are optional whatever the column says.
        PgType::Line => {
            return Schema::struct_of([
                ("a", Schema::float64().into_ref()),
                ("b", Schema::float64().into_ref()),
                ("c", Schema::float64().into_ref()),
            ])
            .named(names::LINE)
            .with_version(1)
            .with_doc("Geometry (LINE)")
            .optional()
        }
        PgType::Circle => {
            return Schema::struct_of([("center", point_schema().into_ref()), ("radius", Schema::float64().into_ref())])
                .named(names::CIRCLE)
                .with_version(1)
                .with_doc("Geometry (CIRCLE)")
                .optional()
        }
        PgType::Geometry(_) => {
            return Schema::struct_of([
                ("wkb", Schema::bytes().into_ref()),
                ("srid", Schema::int32().optional().into_ref()),
                ("extensions", Schema::map(Schema::string().into_ref(), Schema::string().into_ref()).optional().into_ref()),
            ])
            .named(names::GEOMETRY)
            .with_version(2)
            .with_doc("Geometry")
            .optional()
        }
        PgType::Array(element) => Schema::array(schema(element, modes, true).into_ref()),
    };
    if optional {
        s.optional()
    } else {
        s
    }
}

/// Converts the text form of a non-null value of type `ty`.
pub fn value(ty: &PgType, modes: &Modes, text: &str) -> Result<Value, String> {
    let bad = |what: &str| format!("cannot read {text:?} as {what}");
    Ok(match ty {
        PgType::Bool => match text {
            "t" | "true" => Value::Boolean(true),
            "f" | "false" => Value::Boolean(false),
            _ => return Err(bad("boolean")),
        },
        PgType::Int2 => Value::Int16(text.parse().map_err(|_| bad("int2"))?),
        PgType::Int4 => Value::Int32(text.parse().map_err(|_| bad("int4"))?),
        PgType::Int8 => Value::Int64(text.parse().map_err(|_| bad("int8"))?),
        PgType::Float4 => Value::Float32(parse_float(text).ok_or_else(|| bad("float4"))? as f32),
        PgType::Float8 => Value::Float64(parse_float(text).ok_or_else(|| bad("float8"))?),
        PgType::Numeric { scale, .. } => match modes.decimal {
            // Debezium's SpecialValueDecimal names for the special values (observed 3.6.3).
            DecimalMode::String => Value::String(
                match text {
                    "NaN" => "NAN",
                    "Infinity" => "POSITIVE_INFINITY",
                    "-Infinity" => "NEGATIVE_INFINITY",
                    _ => text,
                }
                .to_owned(),
            ),
            DecimalMode::Double => Value::Float64(parse_float(text).ok_or_else(|| bad("numeric"))?),
            DecimalMode::Precise => {
                // NaN and ±Infinity have no exact decimal form: null, as Debezium writes them
                // (decimal.handling.mode=double or string keeps them).
                if text == "NaN" || text.ends_with("Infinity") {
                    return Ok(Value::Null);
                }
                match scale {
                    Some(s) => Value::Bytes(unscaled_bytes(text, *s).ok_or_else(|| bad("numeric"))?),
                    None => {
                        // Debezium strips trailing zeros (BigDecimal.stripTrailingZeros), and a
                        // negative scale that leaves becomes 0: 1.50 has scale 1, 100 scale 0.
                        let text = strip_fraction_zeros(text);
                        let s = text.split_once('.').map_or(0, |(_, f)| f.len()) as i32;
                        let bytes = unscaled_bytes(text, s).ok_or_else(|| bad("numeric"))?;
                        let schema = schema(ty, modes, false).into_ref();
                        Value::Struct(sluice_api::Struct::from_values(schema, vec![Value::Int32(s), Value::Bytes(bytes)]))
                    }
                }
            }
        },
        PgType::Text
        | PgType::Uuid
        | PgType::Json
        | PgType::Xml
        | PgType::Enum { .. }
        | PgType::Range
        | PgType::Ltree
        | PgType::Tsvector => Value::String(text.to_owned()),
        PgType::Point => {
            let (x, y) = parse_point(text.trim()).ok_or_else(|| bad("point"))?;
            point_value(x, y)
        }
        PgType::Line => {
            let inner = text.trim().strip_prefix('{').and_then(|t| t.strip_suffix('}')).ok_or_else(|| bad("line"))?;
            let coefficients =
                inner.split(',').map(parse_float).collect::<Option<Vec<f64>>>().filter(|c| c.len() == 3).ok_or_else(|| bad("line"))?;
            let schema = schema(ty, modes, true).into_ref();
            Value::Struct(sluice_api::Struct::from_values(schema, coefficients.into_iter().map(Value::Float64).collect()))
        }
        PgType::Circle => {
            let inner = text.trim().strip_prefix('<').and_then(|t| t.strip_suffix('>')).ok_or_else(|| bad("circle"))?;
            let (center, radius) = inner.rsplit_once(',').ok_or_else(|| bad("circle"))?;
            let (x, y) = parse_point(center.trim()).ok_or_else(|| bad("circle"))?;
            let radius = parse_float(radius.trim()).ok_or_else(|| bad("circle"))?;
            let schema = schema(ty, modes, true).into_ref();
            Value::Struct(sluice_api::Struct::from_values(schema, vec![point_value(x, y), Value::Float64(radius)]))
        }
        PgType::Geometry(kind) => {
            let (wkb, extensions) = geometry::wkb(*kind, text).ok_or_else(|| bad(kind.name()))?;
            let schema = schema(ty, modes, true).into_ref();
            Value::Struct(sluice_api::Struct::from_values(schema, vec![Value::Bytes(wkb), Value::Null, Value::Map(extensions)]))
        }
        PgType::Interval => {
            let parts = interval::Parts::parse(text).ok_or_else(|| bad("interval"))?;
            match modes.interval {
                IntervalMode::Numeric => Value::Int64(parts.micros()),
                IntervalMode::String => Value::String(parts.iso()),
            }
        }
        PgType::Money => {
            let plain = money_plain(text).ok_or_else(|| bad("money"))?;
            match modes.decimal {
                DecimalMode::Double => Value::Float64(plain.parse().map_err(|_| bad("money"))?),
                DecimalMode::String => Value::String(plain),
                DecimalMode::Precise => {
                    let rounded = round_half_up(&plain, modes.money_fraction_digits).ok_or_else(|| bad("money"))?;
                    Value::Bytes(unscaled_bytes(&rounded, modes.money_fraction_digits).ok_or_else(|| bad("money"))?)
                }
            }
        }
        PgType::Bits { length: 1 } => Value::Boolean(text.bytes().any(|b| b == b'1')),
        PgType::Bits { .. } => Value::Bytes(bits_little_endian(text).ok_or_else(|| bad("bit string"))?),
        PgType::Hstore => {
            let pairs = hstore_pairs(text).ok_or_else(|| bad("hstore"))?;
            match modes.hstore {
                HstoreMode::Json => Value::String(hstore_json(&pairs)),
                HstoreMode::Map => {
                    Value::Map(pairs.into_iter().map(|(k, v)| (Value::String(k), v.map_or(Value::Null, Value::String))).collect())
                }
            }
        }
        PgType::Bytea => {
            let bytes = parse_bytea(text).ok_or_else(|| bad("bytea"))?;
            match modes.binary {
                BinaryMode::Bytes => Value::Bytes(bytes),
                mode => binary_text(&bytes, mode),
            }
        }
        PgType::Date => {
            let days = match text {
                "infinity" => DATE_POSITIVE_INFINITY_DAYS,
                "-infinity" => DATE_NEGATIVE_INFINITY_DAYS,
                _ => parse_date(text).ok_or_else(|| bad("date"))?,
            };
            Value::Int32(i32::try_from(days).map_err(|_| bad("date"))?)
        }
        PgType::Time { precision } => {
            let micros = parse_time(text).ok_or_else(|| bad("time"))?;
            match modes.time {
                TimeMode::Connect => Value::Int32((micros / 1000) as i32),
                TimeMode::Adaptive if *precision <= 3 => Value::Int32((micros / 1000) as i32),
                _ => Value::Int64(micros),
            }
        }
        PgType::TimeTz => {
            let (time, offset, _) = split_offset(text).ok_or_else(|| bad("timetz"))?;
            let micros = parse_time(time).and_then(|t| t.checked_sub(offset * 1_000_000)).ok_or_else(|| bad("timetz"))?;
            Value::String(format_time(micros.rem_euclid(86_400_000_000)) + "Z")
        }
        PgType::Timestamp { precision } => {
            let micros: i128 = match text {
                "infinity" => TIMESTAMP_POSITIVE_INFINITY_MICROS.into(),
                "-infinity" => TIMESTAMP_NEGATIVE_INFINITY_MICROS.into(),
                _ => parse_timestamp(text).ok_or_else(|| bad("timestamp"))?,
            };
            // Past 294247 AD the microseconds leave i64: Debezium saturates them, and its
            // milliseconds stay exact.
            let clamp = |v: i128| Value::Int64(i64::try_from(v).unwrap_or(if v < 0 { i64::MIN } else { i64::MAX }));
            match modes.time {
                TimeMode::Connect => clamp(micros.div_euclid(1000)),
                _ if *precision <= 3 => clamp(micros.div_euclid(1000)),
                _ => clamp(micros),
            }
        }
        PgType::TimestampTz { precision } => {
            // Debezium passes Postgres' infinities through as its own words.
            if text == "infinity" || text == "-infinity" {
                return Ok(Value::String(text.to_owned()));
            }
            if let Some(iso) = utc_timestamp_as_iso(text, *precision) {
                return Ok(Value::String(iso));
            }
            let (ts, offset, bc) = split_offset(text).ok_or_else(|| bad("timestamptz"))?;
            let ts = if bc { Cow::Owned(format!("{ts} BC")) } else { Cow::Borrowed(ts) };
            let micros = parse_timestamp(&ts).ok_or_else(|| bad("timestamptz"))? - i128::from(offset) * 1_000_000;
            Value::String(format_timestamp_utc(micros, *precision))
        }
        PgType::Array(element) => {
            let items = parse_array(text).ok_or_else(|| bad("a one-dimensional array"))?;
            let mut out = Vec::with_capacity(items.len());
            for item in items {
                out.push(match item {
                    None => Value::Null,
                    Some(s) => value(element, modes, &s)?,
                });
            }
            Value::Array(out)
        }
    })
}

/// A money value as a plain decimal: `-$1,234.56` and `($1,234.56)` are `-1234.56`.
fn money_plain(text: &str) -> Option<String> {
    let negative = text.contains('-') || (text.starts_with('(') && text.ends_with(')'));
    let mut out = String::with_capacity(text.len());
    if negative {
        out.push('-');
    }
    out.extend(text.chars().filter(|c| c.is_ascii_digit() || *c == '.'));
    (out.len() > usize::from(negative)).then_some(out)
}

/// A bit string (`0101`) as Debezium's Bits: the bits of its value, least significant
/// first, in as few little-endian bytes as hold the highest set bit (none for zero).
fn bits_little_endian(text: &str) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(text.len().div_ceil(8));
    for (i, b) in text.bytes().rev().enumerate() {
        match b {
            b'0' => {}
            b'1' => {
                let byte = i / 8;
                if out.len() <= byte {
                    out.resize(byte + 1, 0);
                }
                out[byte] |= 1 << (i % 8);
            }
            _ => return None,
        }
    }
    Some(out)
}

/// An hstore's text form (`"a"=>"1", "b"=>NULL`) as its pairs, in the order Postgres
/// prints them.
fn hstore_pairs(text: &str) -> Option<Vec<(String, Option<String>)>> {
    fn quoted(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) -> Option<String> {
        if chars.next()? != '"' {
            return None;
        }
        let mut s = String::new();
        loop {
            match chars.next()? {
                '\\' => s.push(chars.next()?),
                '"' => return Some(s),
                c => s.push(c),
            }
        }
    }
    let mut chars = text.trim().chars().peekable();
    let mut out = Vec::new();
    while chars.peek().is_some() {
        let key = quoted(&mut chars)?;
        for expected in ['=', '>'] {
            if chars.next()? != expected {
                return None;
            }
        }
        let value = if chars.peek() == Some(&'"') {
            Some(quoted(&mut chars)?)
        } else {
            let word: String = chars.by_ref().take(4).collect();
            (word == "NULL").then_some(())?;
            None
        };
        out.push((key, value));
        match chars.next() {
            None => break,
            Some(',') => {
                while chars.peek() == Some(&' ') {
                    chars.next();
                }
            }
            Some(_) => return None,
        }
    }
    Some(out)
}

/// An hstore's pairs as a compact JSON object of strings and nulls, in Postgres' order.
fn hstore_json(pairs: &[(String, Option<String>)]) -> String {
    let mut out = String::from("{");
    for (i, (key, value)) in pairs.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&serde_json::Value::from(key.as_str()).to_string());
        out.push(':');
        out.push_str(&value.as_deref().map_or(serde_json::Value::Null, serde_json::Value::from).to_string());
    }
    out.push('}');
    out
}

/// A plain decimal rounded to `scale` fraction digits, half away from zero (Java's
/// `setScale(scale, RoundingMode.HALF_UP)`); unchanged when it has no more digits than that.
fn round_half_up(plain: &str, scale: i32) -> Option<String> {
    let scale = usize::try_from(scale).ok()?;
    let (int, frac) = plain.split_once('.').unwrap_or((plain, ""));
    if frac.len() <= scale {
        return Some(plain.to_owned());
    }
    let (negative, int) = match int.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, int),
    };
    let mut digits: Vec<u8> = int.bytes().chain(frac[..scale].bytes()).collect();
    if !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    if frac.as_bytes()[scale] >= b'5' {
        let mut i = digits.len();
        loop {
            if i == 0 {
                digits.insert(0, b'1');
                break;
            }
            i -= 1;
            if digits[i] == b'9' {
                digits[i] = b'0';
            } else {
                digits[i] += 1;
                break;
            }
        }
    }
    let split = digits.len() - scale;
    let (i, f) = digits.split_at(split);
    let int = if i.is_empty() { "0".to_owned() } else { String::from_utf8(i.to_vec()).ok()? };
    let sign = if negative { "-" } else { "" };
    Some(if f.is_empty() { format!("{sign}{int}") } else { format!("{sign}{int}.{}", std::str::from_utf8(f).ok()?) })
}

pub(super) fn parse_float(text: &str) -> Option<f64> {
    match text {
        "NaN" => Some(f64::NAN),
        "Infinity" => Some(f64::INFINITY),
        "-Infinity" => Some(f64::NEG_INFINITY),
        _ => text.parse().ok(),
    }
}

/// The big-endian two's-complement bytes of `text * 10^scale` (Java's
/// `BigInteger.toByteArray`), as Connect's Decimal carries them.
pub fn unscaled_bytes(text: &str, scale: i32) -> Option<Vec<u8>> {
    let (negative, digits) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text.strip_prefix('+').unwrap_or(text)),
    };
    let (int, frac) = digits.split_once('.').unwrap_or((digits, ""));
    // Digits only (so the slicing below stays on character boundaries).
    if !int.bytes().chain(frac.bytes()).all(|b| b.is_ascii_digit()) {
        return None;
    }
    let scale = usize::try_from(scale).ok()?;
    if frac.len() > scale && frac[scale..].bytes().any(|b| b != b'0') {
        return None;
    }
    let mut all = String::with_capacity(int.len() + scale);
    all.push_str(int);
    all.push_str(&frac[..frac.len().min(scale)]);
    all.extend(std::iter::repeat_n('0', scale.saturating_sub(frac.len())));
    if all.is_empty() || !all.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    // Magnitude, big-endian, by repeated multiply-and-add.
    let mut mag: Vec<u8> = vec![0];
    for d in all.bytes().map(|b| b - b'0') {
        let mut carry = u32::from(d);
        for byte in mag.iter_mut().rev() {
            let v = u32::from(*byte) * 10 + carry;
            *byte = (v & 0xff) as u8;
            carry = v >> 8;
        }
        while carry > 0 {
            mag.insert(0, (carry & 0xff) as u8);
            carry >>= 8;
        }
    }
    let is_zero = mag.iter().all(|b| *b == 0);
    let mut out = mag;
    out.insert(0, 0); // room for the sign bit
    if negative && !is_zero {
        for b in out.iter_mut() {
            *b = !*b;
        }
        for b in out.iter_mut().rev() {
            let (v, overflow) = b.overflowing_add(1);
            *b = v;
            if !overflow {
                break;
            }
        }
        while out.len() > 1 && out[0] == 0xff && out[1] & 0x80 != 0 {
            out.remove(0);
        }
    } else {
        while out.len() > 1 && out[0] == 0 && out[1] & 0x80 == 0 {
            out.remove(0);
        }
    }
    Some(out)
}

/// Bytes as text under `binary.handling.mode` (`base64`, `base64-url-safe`, `hex`; bytes
/// stay bytes).
pub fn binary_text(bytes: &[u8], mode: BinaryMode) -> Value {
    match mode {
        BinaryMode::Bytes => Value::Bytes(bytes.to_vec()),
        BinaryMode::Base64 => Value::String(base64::engine::general_purpose::STANDARD.encode(bytes)),
        BinaryMode::Base64UrlSafe => Value::String(base64::engine::general_purpose::URL_SAFE.encode(bytes)),
        BinaryMode::Hex => Value::String(hex_string(bytes)),
    }
}

fn parse_bytea(text: &str) -> Option<Vec<u8>> {
    hex_octets(text.strip_prefix("\\x")?)
}

/// The octets an even number of hexadecimal digits spell (either case); `None` otherwise.
pub(super) fn hex_octets(hex: &str) -> Option<Vec<u8>> {
    if hex.len() % 2 != 0 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    (0..hex.len()).step_by(2).map(|i| u8::from_str_radix(&hex[i..i + 2], 16).ok()).collect()
}

/// A UUID's text form (8-4-4-4-12 lower-case hexadecimal digits).
pub(super) fn uuid_text(octets: &[u8; 16]) -> String {
    let h = hex_string(octets);
    format!("{}-{}-{}-{}-{}", &h[..8], &h[8..12], &h[12..16], &h[16..20], &h[20..])
}

/// Octets as lower-case hexadecimal digits.
pub(super) fn hex_string(bytes: &[u8]) -> String {
    use std::fmt::Write;
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(out, "{b:02x}");
    }
    out
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

pub(super) fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// What Debezium writes for a `date` of `infinity` / `-infinity`: the days of pgjdbc's
/// infinity dates (`-5877611-06-21` and `-5877611-06-22`, Postgres' internal infinities
/// shifted by its 2000-01-01 epoch and overflowed). Kept for compatibility with existing
/// consumers of Debezium's output.
pub const DATE_POSITIVE_INFINITY_DAYS: i64 = -2_147_472_692;
pub const DATE_NEGATIVE_INFINITY_DAYS: i64 = -2_147_472_691;
/// What Debezium writes for a `timestamp` of `infinity` / `-infinity`, in microseconds
/// (pgjdbc's `DATE_POSITIVE_INFINITY` / `DATE_NEGATIVE_INFINITY` read as microseconds);
/// millisecond schemas carry these divided by 1000.
pub const TIMESTAMP_POSITIVE_INFINITY_MICROS: i64 = 9_223_372_036_825_200_000;
pub const TIMESTAMP_NEGATIVE_INFINITY_MICROS: i64 = -9_223_372_036_832_400_000;

/// A plain decimal without the trailing zeros of its fraction (and without a point left
/// bare): `1.50` is `1.5`, `2.000` is `2`; integers keep their digits.
fn strip_fraction_zeros(text: &str) -> &str {
    match text.split_once('.') {
        Some(_) => text.trim_end_matches('0').trim_end_matches('.'),
        None => text,
    }
}

/// `YYYY-MM-DD[ BC]` as days since the epoch.
pub(super) fn parse_date(text: &str) -> Option<i64> {
    let (text, bc) = match text.strip_suffix(" BC") {
        Some(t) => (t, true),
        None => (text, false),
    };
    let mut parts = text.splitn(3, '-');
    let y: i64 = parts.next()?.parse().ok()?;
    let m: i64 = parts.next()?.parse().ok()?;
    let d: i64 = parts.next()?.parse().ok()?;
    let y = if bc { 1 - y } else { y };
    // Postgres' dates span 4713 BC to 5874897 AD; anything far past that is malformed.
    if y.abs() > 100_000_000 || !(1..=12).contains(&m) || !(1..=31).contains(&d) {
        return None;
    }
    Some(days_from_civil(y, m, d))
}

/// `HH:MM:SS[.ffffff]` as microseconds since midnight.
fn parse_time(text: &str) -> Option<i64> {
    let (hms, frac) = text.split_once('.').unwrap_or((text, ""));
    let mut parts = hms.splitn(3, ':');
    let h: i64 = parts.next()?.parse().ok()?;
    let m: i64 = parts.next()?.parse().ok()?;
    let s: i64 = parts.next()?.parse().ok()?;
    if frac.len() > 6 || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let micros: i64 = if frac.is_empty() { 0 } else { format!("{frac:0<6}").parse().ok()? };
    // Checked: a malformed text must give None, never an overflow.
    h.checked_mul(60)?.checked_add(m)?.checked_mul(60)?.checked_add(s)?.checked_mul(1_000_000)?.checked_add(micros)
}

/// `YYYY-MM-DD HH:MM:SS[.ffffff][ BC]` as microseconds since the epoch (wider than i64:
/// Postgres' timestamps reach 294276 AD).
pub(super) fn parse_timestamp(text: &str) -> Option<i128> {
    let (text, bc) = match text.strip_suffix(" BC") {
        Some(t) => (t, true),
        None => (text, false),
    };
    let (date, time) = text.split_once(' ')?;
    let days = parse_date(&if bc { format!("{date} BC") } else { date.to_owned() })?;
    Some(i128::from(days) * 86_400_000_000 + i128::from(parse_time(time)?))
}

/// Splits a trailing `+HH[:MM[:SS]]` / `-HH…` offset (in seconds) and a trailing ` BC`
/// (`0044-03-15 12:00:00+00 BC`) off.
pub(super) fn split_offset(text: &str) -> Option<(&str, i64, bool)> {
    let (text, bc) = match text.strip_suffix(" BC") {
        Some(t) => (t, true),
        None => (text, false),
    };
    let pos = text.rfind(['+', '-'])?;
    let (value, offset) = text.split_at(pos);
    if value.len() < 8 {
        return None;
    }
    let sign = if offset.starts_with('-') { -1 } else { 1 };
    let mut secs = 0;
    for (i, part) in offset[1..].split(':').enumerate() {
        let n: i64 = part.parse().ok()?;
        if !(0..=99).contains(&n) {
            return None; // no zone is that far off: malformed
        }
        secs += n * [3600, 60, 1].get(i)?;
    }
    Some((value, sign * secs, bc))
}

fn format_fraction(micros: i64) -> String {
    if micros == 0 {
        return String::new();
    }
    let s = format!(".{micros:06}");
    s.trim_end_matches('0').to_owned()
}

fn format_time(micros: i64) -> String {
    let secs = micros / 1_000_000;
    format!("{:02}:{:02}:{:02}{}", secs / 3600, secs / 60 % 60, secs % 60, format_fraction(micros % 1_000_000))
}

/// An instant as ISO-8601 in UTC with `Z`, as Debezium's ZonedTimestamp prints it: with
/// exactly `width` fraction digits for a `timestamptz(width)` (1 to 6), and for width 0
/// Java's `ISO_OFFSET_DATE_TIME` (trailing zero fraction digits dropped). Years are
/// proleptic, as Java prints them: `-0043` for 44 BC, `+10000` past 9999.
fn format_timestamp_utc(micros: i128, width: i32) -> String {
    let days = i64::try_from(micros.div_euclid(86_400_000_000)).unwrap_or(i64::MAX);
    let in_day = i64::try_from(micros.rem_euclid(86_400_000_000)).unwrap_or(0);
    let (y, m, d) = civil_from_days(days);
    let secs = in_day / 1_000_000;
    let mut out = format!("{}-{m:02}-{d:02}T{:02}:{:02}:{:02}", iso_year(y), secs / 3600, secs / 60 % 60, secs % 60);
    push_fraction(&mut out, &format!("{:06}", in_day % 1_000_000), width);
    out.push('Z');
    out
}

/// A year as Java's `ISO_LOCAL_DATE` prints it (at least four digits, a sign when negative
/// or past 9999).
fn iso_year(y: i64) -> String {
    if y > 9999 {
        format!("+{y}")
    } else if y < 0 {
        format!("-{:04}", -y)
    } else {
        format!("{y:04}")
    }
}

/// Appends `.digits` for a fraction given as its leading digits (`"12"` is .12): exactly
/// `width` digits (padded with zeros or cut) for a width of 1 to 9; for 0, without trailing
/// zeros and nothing when it is zero.
fn push_fraction(out: &mut String, digits: &str, width: i32) {
    match usize::try_from(width).ok().filter(|w| (1..=9).contains(w)) {
        Some(w) => {
            out.push('.');
            out.push_str(&digits[..digits.len().min(w)]);
            out.extend(std::iter::repeat_n('0', w.saturating_sub(digits.len())));
        }
        None => {
            let trimmed = digits.trim_end_matches('0');
            if !trimmed.is_empty() {
                out.push('.');
                out.push_str(trimmed);
            }
        }
    }
}

/// The fast path of a `timestamptz` in a UTC session: `2024-02-29 23:30:00.12+00` is
/// `2024-02-29T23:30:00.120000Z` for width 6 (see [`format_timestamp_utc`]). `None` for
/// anything else (BC dates, years past 9999, other offsets): the general path reads it.
fn utc_timestamp_as_iso(text: &str, width: i32) -> Option<String> {
    let b = text.as_bytes();
    let body = text.strip_suffix("+00")?;
    let well_formed = b.len() >= 22
        && b[4] == b'-'
        && b[7] == b'-'
        && b[10] == b' '
        && b[13] == b':'
        && b[16] == b':'
        && body.bytes().enumerate().all(|(i, c)| matches!(i, 4 | 7 | 10 | 13 | 16) || c.is_ascii_digit() || (i == 19 && c == b'.'))
        && (body.len() == 19 || (body.len() > 20 && b[19] == b'.'));
    if !well_formed {
        return None;
    }
    let mut out = String::with_capacity(28);
    out.push_str(&body[..10]);
    out.push('T');
    out.push_str(&body[11..19]);
    push_fraction(&mut out, body.get(20..).unwrap_or(""), width);
    out.push('Z');
    Some(out)
}

/// A one-dimensional array literal (`{a,"b c",NULL}`) as its elements.
fn parse_array(text: &str) -> Option<Vec<Option<String>>> {
    let inner = text.strip_prefix('{')?.strip_suffix('}')?;
    let mut out = Vec::new();
    if inner.is_empty() {
        return Some(out);
    }
    let mut chars = inner.chars().peekable();
    loop {
        match chars.peek() {
            Some('"') => {
                chars.next();
                let mut s = String::new();
                loop {
                    match chars.next()? {
                        '\\' => s.push(chars.next()?),
                        '"' => break,
                        c => s.push(c),
                    }
                }
                out.push(Some(s));
            }
            Some('{') => return None,
            _ => {
                let mut s = String::new();
                while let Some(c) = chars.peek() {
                    if *c == ',' {
                        break;
                    }
                    s.push(*c);
                    chars.next();
                }
                out.push(if s == "NULL" { None } else { Some(s) });
            }
        }
        match chars.next() {
            None => return Some(out),
            Some(',') => {}
            Some(_) => return None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const M: Modes = Modes::DEFAULT;

    /// Mutations of valid text forms of every built-in type (characters flipped, cut,
    /// repeated, signs and digits inserted), converted in every decimal, time, interval and
    /// binary mode: each gives a value or an error, never a panic. A fixed seed keeps the run
    /// reproducible (`SLUICE_FUZZ_SEED` picks another); a panic names the type and the text.
    /// It found three panics, now fixed: a non-ASCII character in a numeric, and overflows
    /// in a time of many digits and in a zone offset of many digits.
    #[test]
    fn mutated_text_values_never_panic() {
        use crate::postgres::config::{BinaryMode, DecimalMode, IntervalMode, TimeMode};
        let numeric_10_2 = ((10 << 16) | 2) + 4;
        let samples: &[(u32, i32, &[&str])] = &[
            (16, -1, &["t", "f"]),
            (21, -1, &["-32768", "12"]),
            (23, -1, &["2147483647", "-5"]),
            (20, -1, &["9000000000", "-1"]),
            (700, -1, &["1.5e10", "NaN", "-Infinity"]),
            (701, -1, &["3.141592653589793", "Infinity", "1e-310"]),
            (1700, -1, &["123.456", "NaN", "-0.000001", "3.14159265358979323846264338327950288419716939937510"]),
            (1700, numeric_10_2, &["12345678.90", "-1.5"]),
            (25, -1, &["abc", "é€"]),
            (17, -1, &["\\x0102ff", "\\x"]),
            (2950, -1, &["123e4567-e89b-12d3-a456-426614174000"]),
            (114, -1, &["{\"a\": [1, 2.5, null]}"]),
            (3802, -1, &["{\"a\": {\"b\": true}}"]),
            (1082, -1, &["2024-01-02", "infinity", "0044-03-15 BC", "10000-01-01"]),
            (1083, -1, &["24:00:00", "12:34:56.789012"]),
            (1266, -1, &["12:00:00+05:30", "24:00:00+00"]),
            (1114, -1, &["2024-01-02 03:04:05.123456", "infinity", "0044-03-15 12:00:00 BC", "294276-12-31 23:59:59.999999"]),
            (1184, -1, &["2024-01-02 03:04:05.123456+00", "-infinity", "0044-03-15 12:00:00+00 BC", "2024-01-02 03:04:05-03:30"]),
            (1186, -1, &["1 year 2 mons 3 days 04:05:06.789", "-00:00:01", "178000000 years"]),
            (790, -1, &["$1,234.56", "-$0.01"]),
            (1560, -1, &["1010"]),
            (1562, -1, &["10101010101"]),
            (1007, -1, &["{1,NULL,3}", "{}"]),
            (1009, -1, &["{\"a b\",c,NULL,\"\\\"q\\\"\"}"]),
            (1016, -1, &["{9000000000,-1}"]),
            (600, -1, &["(1,2)"]),
            (628, -1, &["{1,2,3}"]),
            (718, -1, &["<(1,2),3>"]),
            (3904, -1, &["[1,5)", "empty"]),
            (3614, -1, &["'a':1 'b':2"]),
        ];
        let modes: Vec<Modes> = [DecimalMode::Precise, DecimalMode::Double, DecimalMode::String]
            .into_iter()
            .flat_map(|decimal| {
                [TimeMode::Adaptive, TimeMode::AdaptiveTimeMicroseconds, TimeMode::Connect].into_iter().map(move |time| (decimal, time))
            })
            .enumerate()
            .map(|(i, (decimal, time))| Modes {
                decimal,
                time,
                interval: if i % 2 == 0 { IntervalMode::Numeric } else { IntervalMode::String },
                binary: if i % 3 == 0 { BinaryMode::Hex } else { BinaryMode::Bytes },
                ..Modes::DEFAULT
            })
            .collect();
        let inserts = ['-', '+', '.', 'e', '9', '0', ':', ' ', '{', '}', ',', '"', '\\', 'Z', 'é', '\0'];
        let mut rng = fastrand::Rng::with_seed(std::env::var("SLUICE_FUZZ_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(0x7e57));
        for (oid, typmod, texts) in samples {
            let ty = builtin(*oid, *typmod).unwrap_or_else(|| panic!("type {oid} is built in"));
            for _ in 0..20_000 {
                let mut chars: Vec<char> = texts[rng.usize(..texts.len())].chars().collect();
                for _ in 0..rng.usize(1..4) {
                    let at = rng.usize(..=chars.len());
                    match rng.u8(..5) {
                        0 if at < chars.len() => chars[at] = inserts[rng.usize(..inserts.len())],
                        1 => chars.truncate(at),
                        2 => chars.insert(at, inserts[rng.usize(..inserts.len())]),
                        3 => {
                            let piece: Vec<char> = chars[at..].to_vec();
                            chars.extend(piece);
                        }
                        _ => chars.insert(at, char::from(b'0' + rng.u8(..10))),
                    }
                }
                let text: String = chars.into_iter().collect();
                let m = &modes[rng.usize(..modes.len())];
                let outcome = std::panic::catch_unwind(|| {
                    let _ = value(&ty, m, &text);
                });
                assert!(outcome.is_ok(), "type {oid}: value() panicked on {text:?}");
            }
        }
    }

    /// Found while writing the fuzz target `pg_text_value` (and replayed through it): a
    /// timetz whose time of day is within a zone offset of i64::MAX microseconds overflowed
    /// when the offset was applied ("attempt to subtract with overflow").
    #[test]
    fn fuzz_timetz_offset_overflow_is_an_error() {
        let ty = builtin(1266, -1).unwrap();
        assert!(value(&ty, &M, "2562047788:00:00-01").unwrap_err().contains("timetz"));
        assert_eq!(value(&ty, &M, "12:00:00-01").unwrap(), Value::String("13:00:00Z".into()));
    }

    #[test]
    fn decimals_are_javas_two_complement() {
        assert_eq!(unscaled_bytes("0.00", 2).unwrap(), vec![0]);
        assert_eq!(unscaled_bytes("1.27", 2).unwrap(), vec![0x7f]);
        assert_eq!(unscaled_bytes("1.28", 2).unwrap(), vec![0x00, 0x80]);
        assert_eq!(unscaled_bytes("-1.28", 2).unwrap(), vec![0x80]);
        assert_eq!(unscaled_bytes("-1.29", 2).unwrap(), vec![0xff, 0x7f]);
        assert_eq!(unscaled_bytes("-1", 0).unwrap(), vec![0xff]);
        assert_eq!(unscaled_bytes("65536", 0).unwrap(), vec![0x01, 0x00, 0x00]);
        assert_eq!(unscaled_bytes("1.5", 3).unwrap(), vec![0x05, 0xdc]);
        assert!(unscaled_bytes("1.25", 1).is_none());
    }

    #[test]
    fn times_and_dates() {
        assert_eq!(value(&PgType::Date, &M, "1970-01-02").unwrap(), Value::Int32(1));
        assert_eq!(value(&PgType::Date, &M, "1969-12-31").unwrap(), Value::Int32(-1));
        assert_eq!(value(&PgType::Time { precision: 6 }, &M, "01:00:00.5").unwrap(), Value::Int64(3_600_500_000));
        assert_eq!(value(&PgType::Time { precision: 3 }, &M, "00:00:01.5").unwrap(), Value::Int32(1500));
        assert_eq!(value(&PgType::Timestamp { precision: 6 }, &M, "1970-01-01 00:00:01.000002").unwrap(), Value::Int64(1_000_002));
        const TZ6: PgType = PgType::TimestampTz { precision: 6 };
        const TZ3: PgType = PgType::TimestampTz { precision: 3 };
        const TZ0: PgType = PgType::TimestampTz { precision: 0 };
        assert_eq!(value(&TZ6, &M, "2024-02-29 23:30:00.120+00").unwrap(), Value::String("2024-02-29T23:30:00.120000Z".into()));
        assert_eq!(value(&TZ6, &M, "2024-03-01 01:30:00+02").unwrap(), Value::String("2024-02-29T23:30:00.000000Z".into()));
        assert_eq!(value(&TZ0, &M, "2024-03-01 01:30:00+02").unwrap(), Value::String("2024-02-29T23:30:00Z".into()));
        assert_eq!(value(&PgType::TimeTz, &M, "10:00:00+01").unwrap(), Value::String("09:00:00Z".into()));
        // Fraction digits: exactly the column's precision; any number (none for zero) at 0.
        for (ty, pg, iso) in [
            (&TZ6, "2024-02-29 23:30:00+00", "2024-02-29T23:30:00.000000Z"),
            (&TZ6, "2024-02-29 23:30:00.000001+00", "2024-02-29T23:30:00.000001Z"),
            (&TZ6, "2024-02-29 23:30:00.5+00", "2024-02-29T23:30:00.500000Z"),
            (&TZ3, "2024-02-29 23:30:00.5+00", "2024-02-29T23:30:00.500Z"),
            (&TZ3, "2024-02-29 23:30:00+00", "2024-02-29T23:30:00.000Z"),
            (&TZ0, "2024-02-29 23:30:00+00", "2024-02-29T23:30:00Z"),
            (&TZ0, "2024-02-29 23:30:00.500+00", "2024-02-29T23:30:00.5Z"),
            (&TZ0, "2024-02-29 23:30:00.000+00", "2024-02-29T23:30:00Z"),
        ] {
            let PgType::TimestampTz { precision } = ty else { unreachable!() };
            assert_eq!(utc_timestamp_as_iso(pg, *precision).as_deref(), Some(iso), "{pg}");
            assert_eq!(value(ty, &M, pg).unwrap(), Value::String(iso.into()), "{pg}");
        }
        for other in ["0044-03-15 12:00:00+00 BC", "12345-01-01 00:00:00+00", "2024-02-29 23:30:00+01", "2024-02-29 23:30:00.+00"] {
            assert_eq!(utc_timestamp_as_iso(other, 6), None, "{other}");
        }
    }

    /// The values Debezium 3.6.3 writes for Postgres' special values (observed with the
    /// default modes): no legal value fails the task.
    #[test]
    fn special_values_as_debezium_writes_them() {
        let tz = PgType::TimestampTz { precision: 6 };
        // BC and past 9999: proleptic years as Java prints them.
        assert_eq!(value(&tz, &M, "0044-03-15 12:00:00+00 BC").unwrap(), Value::String("-0043-03-15T12:00:00.000000Z".into()));
        assert_eq!(value(&tz, &M, "0001-01-01 00:00:00+00 BC").unwrap(), Value::String("0000-01-01T00:00:00.000000Z".into()));
        assert_eq!(value(&tz, &M, "12345-01-01 00:00:00+00").unwrap(), Value::String("+12345-01-01T00:00:00.000000Z".into()));
        assert_eq!(value(&tz, &M, "infinity").unwrap(), Value::String("infinity".into()));
        assert_eq!(value(&tz, &M, "-infinity").unwrap(), Value::String("-infinity".into()));
        assert_eq!(value(&PgType::Date, &M, "infinity").unwrap(), Value::Int32(-2_147_472_692));
        assert_eq!(value(&PgType::Date, &M, "-infinity").unwrap(), Value::Int32(-2_147_472_691));
        assert_eq!(value(&PgType::Date, &M, "0044-03-15 BC").unwrap(), Value::Int32(i32::try_from(days_from_civil(-43, 3, 15)).unwrap()));
        let micro = PgType::Timestamp { precision: 6 };
        let milli = PgType::Timestamp { precision: 3 };
        assert_eq!(value(&micro, &M, "infinity").unwrap(), Value::Int64(9_223_372_036_825_200_000));
        assert_eq!(value(&micro, &M, "-infinity").unwrap(), Value::Int64(-9_223_372_036_832_400_000));
        assert_eq!(value(&milli, &M, "infinity").unwrap(), Value::Int64(9_223_372_036_825_200));
        assert_eq!(value(&milli, &M, "-infinity").unwrap(), Value::Int64(-9_223_372_036_832_400));
        assert_eq!(value(&micro, &M, "10000-01-01 00:00:00").unwrap(), Value::Int64(days_from_civil(10000, 1, 1) * 86_400_000_000));
        // Postgres' last year: microseconds saturate, milliseconds stay exact (Debezium 3.6.3).
        assert_eq!(value(&micro, &M, "294276-12-31 23:59:59").unwrap(), Value::Int64(i64::MAX));
        assert_eq!(value(&milli, &M, "294276-12-31 23:59:59").unwrap(), Value::Int64(9_224_318_015_999_000));
        assert_eq!(value(&tz, &M, "294276-12-31 23:59:59+00").unwrap(), Value::String("+294276-12-31T23:59:59.000000Z".into()));
        assert_eq!(value(&PgType::Time { precision: 6 }, &M, "24:00:00").unwrap(), Value::Int64(86_400_000_000));
        assert_eq!(value(&PgType::Time { precision: 3 }, &M, "24:00:00").unwrap(), Value::Int32(86_400_000));
        assert_eq!(value(&PgType::TimeTz, &M, "24:00:00+00").unwrap(), Value::String("00:00:00Z".into()));
        let connect = Modes { time: TimeMode::Connect, ..M };
        assert_eq!(value(&PgType::Date, &connect, "infinity").unwrap(), Value::Int32(-2_147_472_692));
        assert_eq!(value(&micro, &connect, "-infinity").unwrap(), Value::Int64(-9_223_372_036_832_400));
        // numeric NaN and ±Infinity: null when precise, kept by double and string.
        let fixed = PgType::Numeric { precision: Some(10), scale: Some(2) };
        let variable = PgType::Numeric { precision: None, scale: None };
        for special in ["NaN", "Infinity", "-Infinity"] {
            assert_eq!(value(&fixed, &M, special).unwrap(), Value::Null, "{special}");
            assert_eq!(value(&variable, &M, special).unwrap(), Value::Null, "{special}");
            let string = Modes { decimal: DecimalMode::String, ..M };
            let named = ["NAN", "POSITIVE_INFINITY", "NEGATIVE_INFINITY"][["NaN", "Infinity", "-Infinity"].iter().position(|s| *s == special).unwrap()];
            assert_eq!(value(&variable, &string, special).unwrap(), Value::String(named.into()), "Debezium's names");
            let double = Modes { decimal: DecimalMode::Double, ..M };
            let Value::Float64(f) = value(&variable, &double, special).unwrap() else { panic!("{special}") };
            assert_eq!(f.to_string(), parse_float(special).unwrap().to_string());
        }
        for (ty, special) in [(PgType::Float4, "NaN"), (PgType::Float8, "Infinity"), (PgType::Float8, "-Infinity")] {
            assert!(value(&ty, &M, special).is_ok(), "{special}");
        }
        let dates = PgType::Array(Box::new(PgType::Date));
        assert_eq!(
            value(&dates, &M, "{infinity,NULL,-infinity}").unwrap(),
            Value::Array(vec![Value::Int32(-2_147_472_692), Value::Null, Value::Int32(-2_147_472_691)])
        );
        assert_eq!(value(&dates, &M, "{}").unwrap(), Value::Array(vec![]));
    }

    /// An unconstrained numeric's scale is that of Java's `stripTrailingZeros`, never below 0.
    #[test]
    fn variable_scale_decimals_drop_trailing_zeros() {
        let variable = PgType::Numeric { precision: None, scale: None };
        let scale_of = |text: &str| match value(&variable, &M, text).unwrap() {
            Value::Struct(s) => (s.get("scale").cloned().unwrap(), s.get("value").cloned().unwrap()),
            other => panic!("{other:?}"),
        };
        assert_eq!(scale_of("3.14159265358979323846264338327950288419716939937510").0, Value::Int32(49));
        assert_eq!(scale_of("1.50"), (Value::Int32(1), Value::Bytes(vec![15])));
        assert_eq!(scale_of("100"), (Value::Int32(0), Value::Bytes(vec![100])));
        assert_eq!(scale_of("0.000"), (Value::Int32(0), Value::Bytes(vec![0])));
        assert_eq!(scale_of("-0.0010"), (Value::Int32(3), Value::Bytes(vec![0xff])));
    }

    #[test]
    fn interval_money_bits_hstore() {
        assert_eq!(value(&PgType::Interval, &M, "1 day 01:00:00.5").unwrap(), Value::Int64(90_000_500_000));
        let string = Modes { interval: IntervalMode::String, ..M };
        assert_eq!(
            value(&PgType::Interval, &string, "1 year 2 mons 3 days 04:05:06.78").unwrap(),
            Value::String("P1Y2M3DT4H5M6.78S".into())
        );
        assert_eq!(schema(&PgType::Interval, &string, false), Schema::string().named("io.debezium.time.Interval").with_version(1));
        assert!(value(&PgType::Interval, &M, "P1D").is_err());

        assert_eq!(value(&PgType::Money, &M, "$1,234.56").unwrap(), Value::Bytes(unscaled_bytes("1234.56", 2).unwrap()));
        assert_eq!(value(&PgType::Money, &M, "-$0.05").unwrap(), Value::Bytes(unscaled_bytes("-0.05", 2).unwrap()));
        let double = Modes { decimal: DecimalMode::Double, ..M };
        assert_eq!(value(&PgType::Money, &double, "-$1,000.10").unwrap(), Value::Float64(-1000.1));
        assert_eq!(schema(&PgType::Money, &M, false).parameter("scale"), Some("2"));

        assert_eq!(value(&PgType::Bits { length: 1 }, &M, "1").unwrap(), Value::Boolean(true));
        assert_eq!(value(&PgType::Bits { length: 1 }, &M, "0").unwrap(), Value::Boolean(false));
        assert_eq!(value(&PgType::Bits { length: 10 }, &M, "1000000001").unwrap(), Value::Bytes(vec![0x01, 0x02]));
        assert_eq!(value(&PgType::Bits { length: 3 }, &M, "101").unwrap(), Value::Bytes(vec![0x05]));
        assert_eq!(value(&PgType::Bits { length: 8 }, &M, "00000000").unwrap(), Value::Bytes(vec![]));
        assert_eq!(schema(&PgType::Bits { length: 10 }, &M, false).parameter("length"), Some("10"));
        assert_eq!(builtin(1560, 1), Some(PgType::Bits { length: 1 }));
        assert_eq!(builtin(1562, -1), Some(PgType::Bits { length: i32::MAX }));

        assert_eq!(
            value(&PgType::Hstore, &M, r#""a"=>"1", "b c"=>NULL, "q\"x"=>"=>""#).unwrap(),
            Value::String(r#"{"a":"1","b c":null,"q\"x":"=>"}"#.into())
        );
        assert_eq!(value(&PgType::Hstore, &M, "").unwrap(), Value::String("{}".into()));
    }

    #[test]
    fn arrays_and_builtins() {
        let ty = builtin(1009, -1).unwrap();
        assert_eq!(
            value(&ty, &M, r#"{a,"b c",NULL,"q\"x"}"#).unwrap(),
            Value::Array(vec!["a".into(), "b c".into(), Value::Null, "q\"x".into()])
        );
        assert_eq!(builtin(1700, (10 << 16) + 2 + 4), Some(PgType::Numeric { precision: Some(10), scale: Some(2) }));
        assert_eq!(value(&PgType::Bytea, &M, "\\x00ff").unwrap(), Value::Bytes(vec![0, 255]));
        assert!(value(&builtin(1007, -1).unwrap(), &M, "{{1},{2}}").is_err());
    }

    #[test]
    fn binary_money_and_hstore_modes() {
        let bytes = "\\xfbefff00";
        let with = |binary| Modes { binary, ..M };
        assert_eq!(value(&PgType::Bytea, &M, bytes).unwrap(), Value::Bytes(vec![0xfb, 0xef, 0xff, 0x00]));
        assert_eq!(value(&PgType::Bytea, &with(BinaryMode::Base64), bytes).unwrap(), Value::String("++//AA==".into()));
        assert_eq!(value(&PgType::Bytea, &with(BinaryMode::Base64UrlSafe), bytes).unwrap(), Value::String("--__AA==".into()));
        assert_eq!(value(&PgType::Bytea, &with(BinaryMode::Hex), bytes).unwrap(), Value::String("fbefff00".into()));
        assert_eq!(schema(&PgType::Bytea, &with(BinaryMode::Hex), true), Schema::string().optional());
        let arr = builtin(1001, -1).unwrap();
        assert_eq!(schema(&arr, &with(BinaryMode::Base64), false), Schema::array(Schema::string().optional().into_ref()));
        assert_eq!(
            value(&arr, &with(BinaryMode::Hex), "{\"\\\\x01ff\",NULL}").unwrap(),
            Value::Array(vec![Value::String("01ff".into()), Value::Null])
        );
        // Bit strings stay Bits whatever the binary mode.
        assert_eq!(value(&PgType::Bits { length: 10 }, &with(BinaryMode::Hex), "1000000001").unwrap(), Value::Bytes(vec![0x01, 0x02]));

        let digits = |d| Modes { money_fraction_digits: d, ..M };
        assert_eq!(value(&PgType::Money, &digits(3), "-$1,234.56").unwrap(), Value::Bytes(vec![0xed, 0x29, 0x80]));
        assert_eq!(schema(&PgType::Money, &digits(3), false).parameter("scale"), Some("3"));
        // HALF_UP: -1234.56 to 0 digits is -1235, 0.50 to 0 digits is 1.
        assert_eq!(value(&PgType::Money, &digits(0), "-$1,234.56").unwrap(), Value::Bytes(unscaled_bytes("-1235", 0).unwrap()));
        assert_eq!(value(&PgType::Money, &digits(0), "$0.50").unwrap(), Value::Bytes(vec![1]));
        assert_eq!(value(&PgType::Money, &digits(1), "$9.95").unwrap(), Value::Bytes(unscaled_bytes("10.0", 1).unwrap()));
        assert_eq!(value(&PgType::Money, &digits(1), "$9.94").unwrap(), Value::Bytes(unscaled_bytes("9.9", 1).unwrap()));
        // Only precise uses the digits.
        let string = Modes { decimal: DecimalMode::String, money_fraction_digits: 0, ..M };
        assert_eq!(value(&PgType::Money, &string, "$9.95").unwrap(), Value::String("9.95".into()));

        let map = Modes { hstore: HstoreMode::Map, ..M };
        let s = |v: &str| Value::String(v.into());
        assert_eq!(
            value(&PgType::Hstore, &map, r#""a"=>"1", "b c"=>NULL"#).unwrap(),
            Value::Map(vec![(s("a"), s("1")), (s("b c"), Value::Null)])
        );
        assert_eq!(
            schema(&PgType::Hstore, &map, true),
            Schema::map(Schema::string().into_ref(), Schema::string().optional().into_ref()).optional()
        );
        assert_eq!(value(&PgType::Hstore, &map, "").unwrap(), Value::Map(vec![]));
    }

    fn fields(v: &Value) -> Vec<Value> {
        v.as_struct().expect("a struct").values().to_vec()
    }

    fn le(values: &[f64]) -> Vec<u8> {
        values.iter().flat_map(|v| v.to_le_bytes()).collect()
    }

    #[test]
    fn ranges_and_named_strings() {
        for oid in [3904, 3926, 3906, 3908, 3910, 3912] {
            assert_eq!(builtin(oid, -1), Some(PgType::Range), "{oid}");
        }
        assert_eq!(builtin(3905, -1), Some(PgType::Array(Box::new(PgType::Range))));
        assert_eq!(value(&PgType::Range, &M, "[1,10)").unwrap(), Value::String("[1,10)".into()));
        assert_eq!(schema(&PgType::Range, &M, true), Schema::string().optional());
        assert_eq!(schema(&PgType::Ltree, &M, false).name.as_deref(), Some("io.debezium.data.Ltree"));
        assert_eq!(schema(&builtin(3614, -1).unwrap(), &M, false).name.as_deref(), Some("io.debezium.data.Tsvector"));
    }

    #[test]
    fn geometric_types_follow_debeziums_structs_and_wkb() {
        let point = value(&builtin(600, -1).unwrap(), &M, "(1.5,-2)").unwrap();
        let mut wkb = vec![1, 1, 0, 0, 0];
        wkb.extend(le(&[1.5, -2.0]));
        assert_eq!(fields(&point), vec![Value::Float64(1.5), Value::Float64(-2.0), Value::Bytes(wkb), Value::Null]);
        let ps = schema(&PgType::Point, &M, true);
        assert_eq!((ps.name.as_deref(), ps.version, ps.optional), (Some("io.debezium.data.geometry.Point"), Some(1), true));
        assert_eq!(ps.fields.iter().map(|f| f.name.as_str()).collect::<Vec<_>>(), ["x", "y", "wkb", "srid"]);

        let line = value(&builtin(628, -1).unwrap(), &M, "{1,-1,0.5}").unwrap();
        assert_eq!(fields(&line), vec![Value::Float64(1.0), Value::Float64(-1.0), Value::Float64(0.5)]);
        assert!(schema(&PgType::Line, &M, false).optional, "Debezium's line schema is optional whatever the column");

        let circle = value(&builtin(718, -1).unwrap(), &M, "<(1,2),3>").unwrap();
        let c = fields(&circle);
        assert_eq!(fields(&c[0])[..2], [Value::Float64(1.0), Value::Float64(2.0)]);
        assert_eq!(c[1], Value::Float64(3.0));

        let geometry = |oid: u32, text: &str| fields(&value(&builtin(oid, -1).unwrap(), &M, text).unwrap());
        let ext = |pairs: &[(&str, &str)]| {
            Value::Map(pairs.iter().map(|(k, v)| (Value::String((*k).into()), Value::String((*v).into()))).collect())
        };
        // box: the corners as PostgreSQL prints them (upper right first), as a closed ring.
        let b = geometry(603, "(2,3),(0,1)");
        let mut ring = vec![1, 3, 0, 0, 0, 1, 0, 0, 0, 5, 0, 0, 0];
        ring.extend(le(&[2.0, 3.0, 2.0, 1.0, 0.0, 1.0, 0.0, 3.0, 2.0, 3.0]));
        assert_eq!(b, vec![Value::Bytes(ring), Value::Null, ext(&[("type", "box")])]);
        let l = geometry(601, "[(0,0),(1,1)]");
        let mut ls = vec![1, 2, 0, 0, 0, 2, 0, 0, 0];
        ls.extend(le(&[0.0, 0.0, 1.0, 1.0]));
        assert_eq!(l, vec![Value::Bytes(ls.clone()), Value::Null, ext(&[("type", "lseg")])]);
        assert_eq!(geometry(602, "[(0,0),(1,1)]")[2], ext(&[("type", "path"), ("closed", "false")]));
        assert_eq!(geometry(602, "((0,0),(1,1))"), vec![Value::Bytes(ls), Value::Null, ext(&[("type", "path"), ("closed", "true")])]);
        // A polygon's ring is closed by repeating its first point.
        let p = geometry(604, "((0,0),(0,1),(1,0))");
        let mut poly = vec![1, 3, 0, 0, 0, 1, 0, 0, 0, 4, 0, 0, 0];
        poly.extend(le(&[0.0, 0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 0.0]));
        assert_eq!(p[0], Value::Bytes(poly));
        assert!(value(&PgType::Geometry(GeometryKind::Box), &M, "(1,2)").is_err());
        let gs = schema(&PgType::Geometry(GeometryKind::Box), &M, false);
        assert_eq!((gs.name.as_deref(), gs.version), (Some("io.debezium.data.geometry.Geometry"), Some(2)));
    }
}
