//! Intervals under `interval.handling.mode`, read from the `postgres` IntervalStyle every
//! session pins (`1 year 2 mons -3 days +04:05:06.5`).
//!
//! Both modes start from the parts pgJDBC's `PGInterval` reads out of that text, as
//! Debezium's `PostgresValueConverter` does: years, months, days, hours and minutes as
//! written (each with its own sign), and seconds whose sign is the time part's.
//! - `numeric`: Debezium's `MicroDuration`, every part converted to seconds in floating
//!   point, a month being 365.25 / 12 days, truncated to whole microseconds.
//! - `string`: Debezium's `io.debezium.time.Interval.toIsoString`,
//!   `P<years>Y<months>M<days>DT<hours>H<minutes>M<seconds>S`, every part present, each
//!   negative part with its own `-` (`P-1Y-2M3DT-4H-5M-6.5S`), the seconds being the `double`
//!   `PGInterval.getSeconds()` returns, printed as `BigDecimal.valueOf(s)` cut to nine
//!   fraction digits with trailing zeros stripped (`6.78`, `0`, `-1.25`).

/// Debezium's average month, in days, for intervals as microseconds.
const DAYS_PER_MONTH_AVG: f64 = 365.25 / 12.0;

/// The parts of an interval as `PGInterval` holds them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Parts {
    pub years: i64,
    pub months: i64,
    pub days: i64,
    pub hours: i64,
    pub minutes: i64,
    /// The seconds, in microseconds, with the time part's sign.
    pub second_micros: i64,
}

impl Parts {
    /// Reads the `postgres` IntervalStyle; `None` for anything else.
    pub fn parse(text: &str) -> Option<Self> {
        let mut p = Parts { years: 0, months: 0, days: 0, hours: 0, minutes: 0, second_micros: 0 };
        let mut words = text.split_whitespace();
        while let Some(word) = words.next() {
            if word.contains(':') {
                let (sign, hms) = match word.strip_prefix('-') {
                    Some(rest) => (-1, rest),
                    None => (1, word.strip_prefix('+').unwrap_or(word)),
                };
                let mut parts = hms.split(':');
                // Checked: a sign before a negative i64::MIN (never printed) must give None.
                p.hours = parts.next()?.parse::<i64>().ok()?.checked_mul(sign)?;
                p.minutes = parts.next()?.parse::<i64>().ok()?.checked_mul(sign)?;
                p.second_micros = sign * parts.next().map_or(Some(0), seconds_as_micros)?;
                if parts.next().is_some() {
                    return None;
                }
                continue;
            }
            let n: i64 = word.parse().ok()?;
            match words.next()? {
                "year" | "years" => p.years = n,
                "mon" | "mons" => p.months = n,
                "day" | "days" => p.days = n,
                _ => return None,
            }
        }
        Some(p)
    }

    /// `PGInterval.getSeconds()`: whole seconds plus microseconds / 10^6, in `double`.
    fn seconds(&self) -> f64 {
        (self.second_micros / 1_000_000) as f64 + (self.second_micros % 1_000_000) as f64 / 1e6
    }

    /// Debezium's `MicroDuration.durationMicros`.
    pub fn micros(&self) -> i64 {
        // Legal intervals never overflow here (178,000,000 years at most); malformed text must not panic.
        let number_of_days = self.years.wrapping_mul(12).wrapping_add(self.months) as f64 * DAYS_PER_MONTH_AVG + self.days as f64;
        let number_of_seconds = ((number_of_days * 24.0 + self.hours as f64) * 60.0 + self.minutes as f64) * 60.0 + self.seconds();
        (number_of_seconds * 1e6) as i64
    }

    /// Debezium's `Interval.toIsoString`.
    pub fn iso(&self) -> String {
        let Parts { years, months, days, hours, minutes, .. } = *self;
        format!("P{years}Y{months}M{days}DT{hours}H{minutes}M{}S", java_plain_seconds(self.seconds()))
    }
}

/// `BigDecimal.valueOf(s)` (the shortest decimal that reads back as `s`, which Rust's
/// `Display` also prints), cut to nine fraction digits (`RoundingMode.DOWN`), then
/// `stripTrailingZeros().toPlainString()`.
fn java_plain_seconds(s: f64) -> String {
    let text = format!("{}", s + 0.0); // + 0.0 turns -0 into 0
    let Some((int, frac)) = text.split_once('.') else { return text };
    let frac = frac[..frac.len().min(9)].trim_end_matches('0');
    match (int, frac.is_empty()) {
        ("-0", true) => "0".to_owned(),
        (_, true) => int.to_owned(),
        _ => format!("{int}.{frac}"),
    }
}

/// `SS[.ffffff]` as microseconds (PostgreSQL prints at most six fraction digits).
fn seconds_as_micros(text: &str) -> Option<i64> {
    let (whole, frac) = text.split_once('.').unwrap_or((text, ""));
    if frac.len() > 6 || !frac.bytes().all(|b| b.is_ascii_digit()) || whole.is_empty() || !whole.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let whole: i64 = whole.parse().ok()?;
    let frac: i64 = if frac.is_empty() { 0 } else { format!("{frac:0<6}").parse().ok()? };
    whole.checked_mul(1_000_000)?.checked_add(frac)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn iso(text: &str) -> String {
        Parts::parse(text).unwrap().iso()
    }

    #[test]
    fn numeric_is_microduration() {
        let micros = |t: &str| Parts::parse(t).unwrap().micros();
        assert_eq!(micros("00:00:00"), 0);
        assert_eq!(micros("1 day 01:00:00.5"), 90_000_500_000);
        assert_eq!(micros("-1 days +02:00:00"), -79_200_000_000);
        assert_eq!(micros("-00:00:01.25"), -1_250_000);
        // A month is 365.25 / 12 days: 30.4375 days.
        assert_eq!(micros("1 mon"), 2_629_800_000_000);
        assert_eq!(micros("1 year 2 mons 3 days 04:05:06"), 37_091_106_000_000);
        assert!(Parts::parse("P1D").is_none());
        assert!(Parts::parse("1 fortnight").is_none());
    }

    #[test]
    fn string_is_debeziums_iso_form() {
        // The example of Debezium's documentation.
        assert_eq!(iso("1 year 2 mons 3 days 04:05:06.78"), "P1Y2M3DT4H5M6.78S");
        assert_eq!(iso("00:00:00"), "P0Y0M0DT0H0M0S");
        assert_eq!(iso("3 days"), "P0Y0M3DT0H0M0S");
        assert_eq!(iso("-1 years -2 mons +3 days -04:05:06.5"), "P-1Y-2M3DT-4H-5M-6.5S");
        assert_eq!(iso("-1 days +02:00:00"), "P0Y0M-1DT2H0M0S");
        assert_eq!(iso("-00:00:00.25"), "P0Y0M0DT0H0M-0.25S");
        assert_eq!(iso("36:00:00.000001"), "P0Y0M0DT36H0M0.000001S");
        assert_eq!(iso("10 mons 00:00:59.999999"), "P0Y10M0DT0H0M59.999999S");
    }

    /// Found by the fuzz target `pg_text_value`: a time part with a sign before a negative
    /// i64::MIN hour or minute overflowed when the sign was applied.
    #[test]
    fn fuzz_sign_before_the_smallest_hours_is_malformed() {
        assert_eq!(Parts::parse("--9223372036854775808:017 -+:,6#03\u{1}\""), None);
        assert_eq!(Parts::parse("-00:-9223372036854775808:00"), None);
        assert_eq!(Parts::parse("+-9223372036854775808:00:00").map(|p| p.hours), Some(i64::MIN));
    }

    #[test]
    fn seconds_print_as_javas_big_decimal() {
        assert_eq!(java_plain_seconds(6.78), "6.78");
        assert_eq!(java_plain_seconds(0.0), "0");
        assert_eq!(java_plain_seconds(-0.0), "0");
        assert_eq!(java_plain_seconds(1e-6), "0.000001");
        assert_eq!(java_plain_seconds(-12.0), "-12");
        // Seventeen significant digits are cut to nine fraction digits, as Debezium does.
        assert_eq!(java_plain_seconds(6.779999999999999), "6.779999999");
    }
}
