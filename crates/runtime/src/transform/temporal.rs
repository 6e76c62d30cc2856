//! Calendar arithmetic in UTC and a `java.text.SimpleDateFormat` work-alike for the
//! patterns `TimestampConverter` and `TimestampRouter` take.
//!
//! Supported pattern letters: `G y Y M L d D E u a H k K h m s S z Z X` and quoted text
//! (`'T'`, `''`). Parsing is lenient like Java's default: out-of-range fields roll over,
//! a numeric field takes every digit unless the next field is numeric too (then it takes
//! exactly its width), and text after the last field is ignored. Week-based letters
//! (`w W F`) are rejected.

use sluice_api::{Schema, SchemaRef, Value};

pub(crate) const MILLIS_PER_DAY: i64 = 86_400_000;

const MONTHS: [&str; 12] =
    ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October", "November", "December"];
const DAYS: [&str; 7] = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"];

/// Days since 1970-01-01 of a proleptic Gregorian date (month and day may be out of range).
pub(crate) fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = year + (month - 1).div_euclid(12);
    let month = (month - 1).rem_euclid(12) + 1;
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468 + (day - 1)
}

/// `(year, month 1-12, day 1-31)` of a day number.
pub(crate) fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let (y, m, d) = sluice_api::text::civil_from_days(days);
    (y, i64::from(m), i64::from(d))
}

struct Civil {
    year: i64,
    month: i64,
    day: i64,
    hour: i64,
    minute: i64,
    second: i64,
    milli: i64,
    /// 1 = Monday … 7 = Sunday.
    weekday: i64,
    yday: i64,
}

fn civil(ms: i64) -> Civil {
    let days = ms.div_euclid(MILLIS_PER_DAY);
    let in_day = ms.rem_euclid(MILLIS_PER_DAY);
    let (year, month, day) = civil_from_days(days);
    Civil {
        year,
        month,
        day,
        hour: in_day / 3_600_000,
        minute: in_day / 60_000 % 60,
        second: in_day / 1000 % 60,
        milli: in_day % 1000,
        weekday: (days + 3).rem_euclid(7) + 1,
        yday: days - days_from_civil(year, 1, 1) + 1,
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Field(char, usize),
    Literal(String),
}

/// A compiled `SimpleDateFormat` pattern, always in UTC.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct DatePattern {
    pattern: String,
    tokens: Vec<Token>,
}

const LETTERS: &str = "GyYMLdDEuaHkKhmsSzZX";

impl DatePattern {
    pub(crate) fn compile(pattern: &str) -> Result<Self, String> {
        let chars: Vec<char> = pattern.chars().collect();
        let mut tokens = Vec::new();
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
                i += 1;
                loop {
                    match chars.get(i) {
                        None => return Err(format!("unterminated quote in date pattern '{pattern}'")),
                        Some('\'') if chars.get(i + 1) == Some(&'\'') => {
                            lit.push('\'');
                            i += 2;
                        }
                        Some('\'') => {
                            i += 1;
                            break;
                        }
                        Some(&ch) => {
                            lit.push(ch);
                            i += 1;
                        }
                    }
                }
            } else if c.is_ascii_alphabetic() {
                if !LETTERS.contains(c) {
                    return Err(format!("illegal pattern character '{c}' in date pattern '{pattern}'"));
                }
                let mut n = 1;
                while chars.get(i + n) == Some(&c) {
                    n += 1;
                }
                if !lit.is_empty() {
                    tokens.push(Token::Literal(std::mem::take(&mut lit)));
                }
                tokens.push(Token::Field(c, n));
                i += n;
            } else {
                lit.push(c);
                i += 1;
            }
        }
        if !lit.is_empty() {
            tokens.push(Token::Literal(lit));
        }
        Ok(Self { pattern: pattern.to_owned(), tokens })
    }

    /// Formats milliseconds since the epoch, in UTC.
    pub(crate) fn format(&self, ms: i64) -> String {
        let c = civil(ms);
        let mut out = String::new();
        let pad = |out: &mut String, v: i64, n: usize| out.push_str(&format!("{v:0n$}"));
        for t in &self.tokens {
            match t {
                Token::Literal(s) => out.push_str(s),
                Token::Field(ch, n) => {
                    let n = *n;
                    match ch {
                        'G' => out.push_str(if c.year > 0 { "AD" } else { "BC" }),
                        'y' | 'Y' => {
                            let y = if c.year > 0 { c.year } else { 1 - c.year };
                            if n == 2 {
                                pad(&mut out, y % 100, 2)
                            } else {
                                pad(&mut out, y, n)
                            }
                        }
                        'M' | 'L' => match n {
                            1 | 2 => pad(&mut out, c.month, n),
                            3 => out.push_str(&MONTHS[(c.month - 1) as usize][..3]),
                            _ => out.push_str(MONTHS[(c.month - 1) as usize]),
                        },
                        'd' => pad(&mut out, c.day, n),
                        'D' => pad(&mut out, c.yday, n),
                        'E' => {
                            let name = DAYS[(c.weekday - 1) as usize];
                            out.push_str(if n >= 4 { name } else { &name[..3] })
                        }
                        'u' => pad(&mut out, c.weekday, n),
                        'a' => out.push_str(if c.hour < 12 { "AM" } else { "PM" }),
                        'H' => pad(&mut out, c.hour, n),
                        'k' => pad(&mut out, if c.hour == 0 { 24 } else { c.hour }, n),
                        'K' => pad(&mut out, c.hour % 12, n),
                        'h' => pad(&mut out, if c.hour % 12 == 0 { 12 } else { c.hour % 12 }, n),
                        'm' => pad(&mut out, c.minute, n),
                        's' => pad(&mut out, c.second, n),
                        'S' => pad(&mut out, c.milli, n),
                        'z' => out.push_str(if n >= 4 { "Coordinated Universal Time" } else { "UTC" }),
                        'Z' => out.push_str("+0000"),
                        'X' => out.push('Z'),
                        _ => unreachable!("compile accepts only known letters"),
                    }
                }
            }
        }
        out
    }

    /// Parses text into milliseconds since the epoch (fields default to 1970-01-01T00:00Z).
    pub(crate) fn parse(&self, text: &str) -> Result<i64, String> {
        let fail = |at: usize| format!("value ({text}) does not match pattern ({}) at position {at}", self.pattern);
        let b = text.as_bytes();
        let mut pos = 0usize;
        let (mut year, mut month, mut day, mut yday) = (1970i64, 1i64, 1i64, None::<i64>);
        let (mut hour, mut minute, mut second, mut milli) = (0i64, 0i64, 0i64, 0i64);
        let mut pm: Option<bool> = None;
        let mut hour12 = false;
        let mut bc = false;
        let mut offset_ms = 0i64;
        for (ti, t) in self.tokens.iter().enumerate() {
            match t {
                Token::Literal(s) => {
                    if text[pos..].starts_with(s.as_str()) {
                        pos += s.len();
                    } else if s.trim().is_empty() && pos < b.len() && b[pos].is_ascii_whitespace() {
                        while pos < b.len() && b[pos].is_ascii_whitespace() {
                            pos += 1;
                        }
                    } else {
                        return Err(fail(pos));
                    }
                }
                Token::Field(ch, n) => {
                    let numeric_next = matches!(self.tokens.get(ti + 1), Some(Token::Field(c2, n2)) if is_numeric(*c2, *n2));
                    let text_field = matches!(ch, 'G' | 'E' | 'a' | 'z' | 'Z' | 'X') || (matches!(ch, 'M' | 'L') && *n >= 3);
                    if text_field {
                        let rest = &text[pos..];
                        match ch {
                            'G' => {
                                if starts_ci(rest, "AD") {
                                    pos += 2;
                                } else if starts_ci(rest, "BC") {
                                    bc = true;
                                    pos += 2;
                                } else {
                                    return Err(fail(pos));
                                }
                            }
                            'M' | 'L' => {
                                let (i, len) = match_name(rest, &MONTHS).ok_or_else(|| fail(pos))?;
                                month = i as i64 + 1;
                                pos += len;
                            }
                            'E' => {
                                let (_, len) = match_name(rest, &DAYS).ok_or_else(|| fail(pos))?;
                                pos += len;
                            }
                            'a' => {
                                if starts_ci(rest, "AM") {
                                    pm = Some(false);
                                } else if starts_ci(rest, "PM") {
                                    pm = Some(true);
                                } else {
                                    return Err(fail(pos));
                                }
                                pos += 2;
                            }
                            _ => {
                                let (off, len) = parse_zone(rest).ok_or_else(|| fail(pos))?;
                                offset_ms = off;
                                pos += len;
                            }
                        }
                        continue;
                    }
                    let start = pos;
                    let signed = *ch == 'y' && !numeric_next && pos < b.len() && (b[pos] == b'-' || b[pos] == b'+');
                    if signed {
                        pos += 1;
                    }
                    let digits_start = pos;
                    while pos < b.len() && b[pos].is_ascii_digit() && (!numeric_next || pos - digits_start < *n) {
                        pos += 1;
                    }
                    if pos == digits_start {
                        return Err(fail(start));
                    }
                    let mut v: i64 = text[digits_start..pos].parse().map_err(|_| fail(start))?;
                    if signed && b[start] == b'-' {
                        v = -v;
                    }
                    match ch {
                        'y' | 'Y' => {
                            year = if *n <= 2 && pos - digits_start == 2 && !signed { two_digit_year(v) } else { v };
                        }
                        'M' | 'L' => month = v,
                        'd' => day = v,
                        'D' => yday = Some(v),
                        'u' => {}
                        'H' | 'k' => hour = if *ch == 'k' && v == 24 { 0 } else { v },
                        'K' | 'h' => {
                            hour12 = true;
                            hour = if *ch == 'h' && v == 12 { 0 } else { v };
                        }
                        'm' => minute = v,
                        's' => second = v,
                        'S' => milli = v,
                        _ => unreachable!("numeric letters only"),
                    }
                }
            }
        }
        if hour12 && pm == Some(true) {
            hour += 12;
        }
        if bc {
            year = 1 - year;
        }
        let days = match yday {
            Some(d) => days_from_civil(year, 1, 1) + d - 1,
            None => days_from_civil(year, month, day),
        };
        Ok((((days * 24 + hour) * 60 + minute) * 60 + second) * 1000 + milli - offset_ms)
    }
}

fn is_numeric(ch: char, n: usize) -> bool {
    match ch {
        'M' | 'L' => n < 3,
        'G' | 'E' | 'a' | 'z' | 'Z' | 'X' => false,
        _ => true,
    }
}

fn starts_ci(s: &str, prefix: &str) -> bool {
    s.len() >= prefix.len() && s.as_bytes()[..prefix.len()].eq_ignore_ascii_case(prefix.as_bytes())
}

fn match_name(s: &str, names: &[&str]) -> Option<(usize, usize)> {
    names.iter().enumerate().find_map(|(i, n)| {
        if starts_ci(s, n) {
            Some((i, n.len()))
        } else if starts_ci(s, &n[..3]) {
            Some((i, 3))
        } else {
            None
        }
    })
}

/// A zone as `z`, `Z` or `X` parse it: `UTC`, `GMT`, `Z`, `+hh`, `+hhmm`, `+hh:mm`, `GMT+hh:mm`.
fn parse_zone(s: &str) -> Option<(i64, usize)> {
    if starts_ci(s, "Coordinated Universal Time") {
        return Some((0, 26));
    }
    let (base, rest) = if starts_ci(s, "UTC") || starts_ci(s, "GMT") { (3, &s[3..]) } else { (0, s) };
    let b = rest.as_bytes();
    if base == 0 && b.first() == Some(&b'Z') {
        return Some((0, 1));
    }
    let sign = match b.first() {
        Some(b'+') => 1,
        Some(b'-') => -1,
        _ => return if base > 0 { Some((0, base)) } else { None },
    };
    let digits: Vec<u8> = b[1..].iter().take_while(|c| c.is_ascii_digit() || **c == b':').copied().collect();
    let compact: Vec<i64> = digits.iter().filter(|c| c.is_ascii_digit()).map(|c| i64::from(c - b'0')).collect();
    let (h, m) = match compact.len() {
        1 => (compact[0], 0),
        2 => (compact[0] * 10 + compact[1], 0),
        4 => (compact[0] * 10 + compact[1], compact[2] * 10 + compact[3]),
        _ => return None,
    };
    Some((sign * (h * 3_600_000 + m * 60_000), base + 1 + digits.len()))
}

/// A two-digit year in the century window Java uses: within 80 years before and 20 after now.
fn two_digit_year(yy: i64) -> i64 {
    let now_ms = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0);
    let (now_year, _, _) = civil_from_days(now_ms.div_euclid(MILLIS_PER_DAY));
    let start = now_year - 80;
    let mut y = start - start.rem_euclid(100) + yy;
    if y < start {
        y += 100;
    }
    y
}

/// Connect's ISO-8601 text for a logical temporal value (`Values.dateFormatFor`): a time
/// when the instant is before 1970-01-02, a date when it is at midnight, else a timestamp.
pub(crate) fn iso_text(ms: i64) -> String {
    let pattern = if ms < MILLIS_PER_DAY {
        "HH:mm:ss.SSS'Z'"
    } else if ms % MILLIS_PER_DAY == 0 {
        "yyyy-MM-dd"
    } else {
        "yyyy-MM-dd'T'HH:mm:ss.SSS'Z'"
    };
    DatePattern::compile(pattern).expect("fixed pattern").format(ms)
}

/// An ISO-8601 date, time or timestamp literal as `Values.parseString` reads it.
pub(crate) fn parse_iso_literal(t: &str) -> Option<(Option<SchemaRef>, Value)> {
    let (pattern, schema) = match t.len() {
        10 => ("yyyy-MM-dd", Schema::date()),
        13 => ("HH:mm:ss.SSS'Z'", Schema::time()),
        24 => ("yyyy-MM-dd'T'HH:mm:ss.SSS'Z'", Schema::timestamp()),
        _ => return None,
    };
    let ms = DatePattern::compile(pattern).expect("fixed pattern").parse(t).ok()?;
    let value = match t.len() {
        10 => Value::Int32(ms.div_euclid(MILLIS_PER_DAY) as i32),
        13 => Value::Int32(ms.rem_euclid(MILLIS_PER_DAY) as i32),
        _ => Value::Int64(ms),
    };
    Some((Some(schema.into_ref()), value))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transform_calendar_round_trips() {
        for days in [-719_468i64, -1, 0, 1, 59, 365, 11_016, 19_782, 2_932_896] {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), days);
        }
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(days_from_civil(2024, 13, 1), days_from_civil(2025, 1, 1));
    }

    #[test]
    fn transform_date_pattern_format_and_parse() {
        // 2017-01-02T13:14:15.016Z, Kafka TimestampConverterTest's DATE_PLUS_TIME.
        let ms = 1_483_362_855_016i64;
        let p = DatePattern::compile("yyyy MM dd HH:mm:ss SSS z").unwrap();
        assert_eq!(p.format(ms), "2017 01 02 13:14:15 016 UTC");
        assert_eq!(p.parse("2017 01 02 13:14:15 016 UTC").unwrap(), ms);
        let iso = DatePattern::compile("yyyy-MM-dd'T'HH:mm:ss.SSSXXX").unwrap();
        assert_eq!(iso.format(ms), "2017-01-02T13:14:15.016Z");
        assert_eq!(iso.parse("2017-01-02T15:14:15.016+02:00").unwrap(), ms);
        let compact = DatePattern::compile("yyyyMMddHHmm").unwrap();
        assert_eq!(compact.parse("201701021314").unwrap(), ms - 15_016);
        let names = DatePattern::compile("EEE, d MMM yyyy hh:mm a").unwrap();
        assert_eq!(names.format(ms), "Mon, 2 Jan 2017 01:14 PM");
        assert_eq!(names.parse("Mon, 2 Jan 2017 01:14 PM").unwrap(), ms - 15_016);
        assert!(DatePattern::compile("yyyy-ww").is_err());
        assert!(p.parse("2017/01/02").is_err());
        assert_eq!(iso_text(0), "00:00:00.000Z");
        assert_eq!(iso_text(MILLIS_PER_DAY * 3), "1970-01-04");
        assert_eq!(iso_text(ms), "2017-01-02T13:14:15.016Z");
    }
}
