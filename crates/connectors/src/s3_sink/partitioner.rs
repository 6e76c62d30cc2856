//! Where a record's object goes: the encoded partition (the directories between
//! `<topics.dir>/<topic>/` and the file name), as Confluent's storage-common partitioners
//! compute it.
//!
//! - `DefaultPartitioner`: `partition=<kafka partition>`.
//! - `FieldPartitioner`: `<field>=<value>` per configured field, joined by `directory.delim`.
//! - `TimeBasedPartitioner` (and `DailyPartitioner`, `HourlyPartitioner`): the record's time
//!   (from the timestamp extractor), floored to `partition.duration.ms` in local time of
//!   `timezone`, then rendered with the Joda-style `path.format`.

use sluice_api::{ConnectError, ConnectResult, SinkRecord, Value};

use super::config::{PartitionerKind, TimeBased, TimestampExtractor};

/// One piece of a parsed `path.format`.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece {
    Literal(String),
    /// A Joda pattern letter and how many times it repeats.
    Field(char, usize),
}

/// A Joda `DateTimeFormat` pattern, restricted to the letters that make sense in a path:
/// `y`/`Y`/`x` (year), `M` (month; 3+ letters for English names), `d` (day of month),
/// `D` (day of year), `H` (hour 0–23), `m`, `s`, `S` (milliseconds), `E` (English day name).
/// Text in single quotes is literal; `''` is a quote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathFormat(Vec<Piece>);

const MONTHS: [&str; 12] =
    ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October", "November", "December"];
const DAYS: [&str; 7] = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"];

impl PathFormat {
    pub fn parse(pattern: &str) -> Result<Self, String> {
        let chars: Vec<char> = pattern.chars().collect();
        let mut out = Vec::new();
        let mut lit = String::new();
        let mut i = 0;
        while i < chars.len() {
            let c = chars[i];
            if c == '\'' {
                if chars.get(i + 1) == Some(&'\'') {
                    lit.push('\'');
                    i += 2;
                    continue;
                }
                let end = chars[i + 1..]
                    .iter()
                    .position(|c| *c == '\'')
                    .ok_or_else(|| format!("unterminated quote in path.format {pattern:?}"))?;
                lit.extend(&chars[i + 1..i + 1 + end]);
                i += end + 2;
            } else if c.is_ascii_alphabetic() {
                if !"yYxMdDHmsSE".contains(c) {
                    return Err(format!("pattern letter {c:?} in path.format {pattern:?} is not supported yet; use y, Y, M, d, D, H, m, s, S or E, and quote literal text"));
                }
                let mut n = 1;
                while chars.get(i + n) == Some(&c) {
                    n += 1;
                }
                if !lit.is_empty() {
                    out.push(Piece::Literal(std::mem::take(&mut lit)));
                }
                out.push(Piece::Field(c, n));
                i += n;
            } else {
                lit.push(c);
                i += 1;
            }
        }
        if !lit.is_empty() {
            out.push(Piece::Literal(lit));
        }
        Ok(Self(out))
    }

    pub fn format(&self, t: &jiff::civil::DateTime) -> String {
        let mut s = String::new();
        for p in &self.0 {
            match p {
                Piece::Literal(l) => s.push_str(l),
                Piece::Field(c, n) => {
                    let n = *n;
                    let num = |v: i64| format!("{v:0n$}");
                    match c {
                        'y' | 'Y' | 'x' if n == 2 => s.push_str(&format!("{:02}", i64::from(t.year()).rem_euclid(100))),
                        'y' | 'Y' | 'x' => s.push_str(&num(t.year().into())),
                        'M' if n >= 4 => s.push_str(MONTHS[t.month() as usize - 1]),
                        'M' if n == 3 => s.push_str(&MONTHS[t.month() as usize - 1][..3]),
                        'M' => s.push_str(&num(t.month().into())),
                        'd' => s.push_str(&num(t.day().into())),
                        'D' => s.push_str(&num(t.day_of_year().into())),
                        'H' => s.push_str(&num(t.hour().into())),
                        'm' => s.push_str(&num(t.minute().into())),
                        's' => s.push_str(&num(t.second().into())),
                        'S' => s.push_str(&num(i64::from(t.millisecond()))),
                        'E' => {
                            let d = DAYS[t.weekday().to_monday_zero_offset() as usize];
                            s.push_str(if n >= 4 { d } else { &d[..3] });
                        }
                        _ => {}
                    }
                }
            }
        }
        s
    }
}

/// Computes encoded partitions.
pub struct Partitioner {
    kind: PartitionerKind,
    delim: String,
    time: Option<TimePartitioner>,
}

struct TimePartitioner {
    cfg: TimeBased,
    tz: jiff::tz::TimeZone,
    format: PathFormat,
}

impl Partitioner {
    pub fn new(kind: &PartitionerKind, delim: &str) -> ConnectResult<Self> {
        let time = match kind {
            PartitionerKind::TimeBased(t) => Some(TimePartitioner {
                tz: jiff::tz::TimeZone::get(&t.timezone).map_err(|e| ConnectError::config("timezone", e.to_string()))?,
                format: PathFormat::parse(&t.path_format).map_err(|e| ConnectError::config("path.format", e))?,
                cfg: t.clone(),
            }),
            _ => None,
        };
        Ok(Self { kind: kind.clone(), delim: delim.to_owned(), time })
    }

    /// Whether records carry a time for rotation (`rotate.interval.ms` applies only then, as
    /// in Confluent).
    pub fn is_time_based(&self) -> bool {
        self.time.is_some()
    }

    /// The record's time by the configured extractor, for time-based partitioners.
    pub fn timestamp(&self, r: &SinkRecord, now_ms: i64) -> ConnectResult<Option<i64>> {
        let Some(t) = &self.time else { return Ok(None) };
        Ok(Some(match &t.cfg.extractor {
            TimestampExtractor::Wallclock => now_ms,
            TimestampExtractor::Record => r.timestamp.ok_or_else(|| {
                ConnectError::fatal(format!(
                    "record {}-{} offset {} has no timestamp for timestamp.extractor=Record",
                    r.topic, r.partition, r.offset
                ))
            })?,
            TimestampExtractor::RecordField(path) => field_timestamp(r, path)?,
        }))
    }

    /// The encoded partition of a record; `ts` is [`Partitioner::timestamp`].
    pub fn encode(&self, r: &SinkRecord, ts: Option<i64>) -> ConnectResult<String> {
        match &self.kind {
            PartitionerKind::Default => Ok(format!("partition={}", r.partition)),
            PartitionerKind::Field(fields) => {
                let mut parts = Vec::with_capacity(fields.len());
                for f in fields {
                    let v = lookup(&r.value, f).ok_or_else(|| {
                        ConnectError::fatal(format!(
                            "record {}-{} offset {} has no field {f:?} for partition.field.name",
                            r.topic, r.partition, r.offset
                        ))
                    })?;
                    let s = match v {
                        Value::String(s) => s.clone(),
                        Value::Boolean(b) => b.to_string(),
                        v if v.as_i64().is_some() => v.as_i64().unwrap_or_default().to_string(),
                        other => {
                            return Err(ConnectError::fatal(format!(
                                "field {f:?} of record {}-{} offset {} is {other:?}; FieldPartitioner supports integer, string and boolean fields",
                                r.topic, r.partition, r.offset
                            )))
                        }
                    };
                    parts.push(format!("{f}={s}"));
                }
                Ok(parts.join(&self.delim))
            }
            PartitionerKind::TimeBased(_) => {
                let t = self.time.as_ref().expect("time partitioner");
                let ts = ts.expect("time-based partitioners are given a timestamp");
                Ok(t.format.format(&bucket(ts, t.cfg.duration_ms, &t.tz)))
            }
        }
    }
}

/// The start of the `duration_ms` bucket holding `ts`, counted in local time of `tz` (as
/// Confluent's `TimeBasedPartitioner.getPartition`), as local civil time.
pub fn bucket(ts: i64, duration_ms: i64, tz: &jiff::tz::TimeZone) -> jiff::civil::DateTime {
    let t = jiff::Timestamp::from_millisecond(ts).unwrap_or(jiff::Timestamp::UNIX_EPOCH);
    let offset_ms = i64::from(tz.to_offset(t).seconds()) * 1000;
    let local = ts + offset_ms;
    let floored = local - local.rem_euclid(duration_ms);
    let ft = jiff::Timestamp::from_millisecond(floored).unwrap_or(jiff::Timestamp::UNIX_EPOCH);
    ft.to_zoned(jiff::tz::TimeZone::UTC).datetime()
}

/// A (dotted) field of a struct or string-keyed map value.
fn lookup<'a>(v: &'a Value, path: &str) -> Option<&'a Value> {
    let mut cur = v;
    for name in path.split('.') {
        cur = match cur {
            Value::Struct(s) => s.get(name)?,
            Value::Map(entries) => entries.iter().find(|(k, _)| k.as_str() == Some(name)).map(|(_, v)| v)?,
            _ => return None,
        };
    }
    Some(cur)
}

fn field_timestamp(r: &SinkRecord, path: &str) -> ConnectResult<i64> {
    let bad = |what: String| {
        ConnectError::fatal(format!("record {}-{} offset {}: {what} (timestamp.field={path})", r.topic, r.partition, r.offset))
    };
    match lookup(&r.value, path) {
        None | Some(Value::Null) => Err(bad("the timestamp field is missing or null".to_owned())),
        Some(v) if v.as_i64().is_some() => Ok(v.as_i64().unwrap_or_default()),
        Some(Value::String(s)) => {
            if let Ok(t) = s.parse::<jiff::Timestamp>() {
                return Ok(t.as_millisecond());
            }
            let dt: jiff::civil::DateTime = s.parse().map_err(|e| bad(format!("cannot read {s:?} as an ISO-8601 time: {e}")))?;
            dt.to_zoned(jiff::tz::TimeZone::UTC).map(|z| z.timestamp().as_millisecond()).map_err(|e| bad(e.to_string()))
        }
        Some(other) => Err(bad(format!("the timestamp field is {other:?}; use a long (ms), a Timestamp or an ISO-8601 string"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_api::{Schema, Struct};

    fn utc() -> jiff::tz::TimeZone {
        jiff::tz::TimeZone::UTC
    }

    #[test]
    fn joda_patterns_render_like_confluent_paths() {
        let f = PathFormat::parse("'year'=YYYY/'month'=MM/'day'=dd/'hour'=HH").unwrap();
        // 2024-03-05T07:08:09.010Z
        let ts = 1_709_622_489_010;
        assert_eq!(f.format(&bucket(ts, 3_600_000, &utc())), "year=2024/month=03/day=05/hour=07");
        assert_eq!(f.format(&bucket(ts, 86_400_000, &utc())), "year=2024/month=03/day=05/hour=00");
        let f = PathFormat::parse("yyyy-MM-dd/HH:mm:ss.SSS/MMM/EEE/''x''").unwrap();
        assert_eq!(f.format(&bucket(ts, 1, &utc())), "2024-03-05/07:08:09.010/Mar/Tue/'2024'");
        assert!(PathFormat::parse("'year'=YYYY/q").is_err());
        assert!(PathFormat::parse("'year").is_err());
    }

    #[test]
    fn buckets_are_floored_in_local_time() {
        let paris = jiff::tz::TimeZone::get("Europe/Paris").unwrap();
        // 2024-03-05T23:30Z is 2024-03-06T00:30 in Paris.
        let ts = 1_709_681_400_000;
        let f = PathFormat::parse("yyyy-MM-dd-HH").unwrap();
        assert_eq!(f.format(&bucket(ts, 86_400_000, &paris)), "2024-03-06-00");
        assert_eq!(f.format(&bucket(ts, 86_400_000, &utc())), "2024-03-05-00");
    }

    #[test]
    fn field_and_default_partitions() {
        let schema = Schema::struct_of([("region", Schema::string().into_ref()), ("n", Schema::int32().into_ref())]).into_ref();
        let v = Value::Struct(Struct::new(schema).with("region", "eu").with("n", 7));
        let r = SinkRecord { topic: "t".into(), partition: 3, offset: 9, value: v, ..Default::default() };
        let p = Partitioner::new(&PartitionerKind::Default, "/").unwrap();
        assert_eq!(p.encode(&r, None).unwrap(), "partition=3");
        let p = Partitioner::new(&PartitionerKind::Field(vec!["region".into(), "n".into()]), "/").unwrap();
        assert_eq!(p.encode(&r, None).unwrap(), "region=eu/n=7");
        let p = Partitioner::new(&PartitionerKind::Field(vec!["nope".into()]), "/").unwrap();
        assert!(p.encode(&r, None).unwrap_err().to_string().contains("no field \"nope\""));
    }
}
