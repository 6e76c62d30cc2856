//! Connect's Decimal without a bignum crate.
//!
//! A Decimal value is the unscaled integer as big-endian two's-complement bytes (Java's
//! `BigInteger.toByteArray()`), with the scale in the schema. The converters need four things
//! from it, all here:
//!
//! - the minimal byte form, because Kafka always writes `BigInteger.toByteArray()` (so `00 9C`
//!   and `00 00 9C` both go out as `00 9C`);
//! - the text Java's `BigDecimal.toString()` gives (`1.56`, `1E-10`, `1.23E+5`), used by
//!   JsonConverter's NUMERIC format and by the header and string converters;
//! - the unscaled value for a decimal number read from text at a given scale (`1.5` at scale 2
//!   is `150`);
//! - a little exact arithmetic for printing tiny subnormal doubles the way Java does.
//!
//! Magnitudes are little-endian base-2^32 limbs; values beyond `i128` are fine.

use std::cmp::Ordering;

/// A non-negative integer of any size: little-endian 32-bit limbs, no high zero limbs.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Magnitude(Vec<u32>);

impl Magnitude {
    pub fn from_u64(v: u64) -> Self {
        let mut m = Magnitude(vec![v as u32, (v >> 32) as u32]);
        m.trim();
        m
    }

    fn trim(&mut self) {
        while self.0.last() == Some(&0) {
            self.0.pop();
        }
    }

    pub fn is_zero(&self) -> bool {
        self.0.is_empty()
    }

    /// From unsigned big-endian bytes.
    fn from_be_bytes(bytes: &[u8]) -> Self {
        let mut limbs = Vec::with_capacity(bytes.len() / 4 + 1);
        for chunk in bytes.rchunks(4) {
            let mut limb = 0u32;
            for &b in chunk {
                limb = (limb << 8) | u32::from(b);
            }
            limbs.push(limb);
        }
        let mut m = Magnitude(limbs);
        m.trim();
        m
    }

    /// Unsigned big-endian bytes without leading zeros (empty for zero).
    fn to_be_bytes(&self) -> Vec<u8> {
        let mut out: Vec<u8> = self.0.iter().rev().flat_map(|l| l.to_be_bytes()).collect();
        let first = out.iter().position(|&b| b != 0).unwrap_or(out.len());
        out.drain(..first);
        out
    }

    /// `self = self * m + a`.
    pub fn mul_add_small(&mut self, m: u32, a: u32) {
        let mut carry = u64::from(a);
        for limb in &mut self.0 {
            let v = u64::from(*limb) * u64::from(m) + carry;
            *limb = v as u32;
            carry = v >> 32;
        }
        if carry != 0 {
            self.0.push(carry as u32);
        }
    }

    /// `self = self / d`, returning the remainder.
    fn div_rem_small(&mut self, d: u32) -> u32 {
        let mut rem = 0u64;
        for limb in self.0.iter_mut().rev() {
            let cur = (rem << 32) | u64::from(*limb);
            *limb = (cur / u64::from(d)) as u32;
            rem = cur % u64::from(d);
        }
        self.trim();
        rem as u32
    }

    /// Decimal digits, `"0"` for zero.
    pub fn to_decimal(&self) -> String {
        if self.is_zero() {
            return "0".to_owned();
        }
        // Peel off nine digits at a time.
        let mut chunks = Vec::new();
        let mut m = self.clone();
        while !m.is_zero() {
            chunks.push(m.div_rem_small(1_000_000_000));
        }
        let mut out = chunks.pop().map(|c| c.to_string()).unwrap_or_default();
        for c in chunks.iter().rev() {
            out.push_str(&format!("{c:09}"));
        }
        out
    }

    /// From ASCII decimal digits (the caller checked they are digits).
    pub fn from_decimal(digits: &str) -> Self {
        let mut m = Magnitude::default();
        for chunk in digits.as_bytes().chunks(9) {
            let mut v = 0u32;
            for &b in chunk {
                v = v * 10 + u32::from(b - b'0');
            }
            m.mul_add_small(10u32.pow(chunk.len() as u32), v);
        }
        m.trim();
        m
    }

    pub fn bit(&self, i: usize) -> bool {
        self.0.get(i / 32).is_some_and(|l| (l >> (i % 32)) & 1 == 1)
    }

    /// True when any bit below position `i` is set.
    pub fn any_bit_below(&self, i: usize) -> bool {
        let whole = i / 32;
        if self.0.iter().take(whole).any(|&l| l != 0) {
            return true;
        }
        let part = i % 32;
        part != 0 && self.0.get(whole).is_some_and(|l| l & ((1u32 << part) - 1) != 0)
    }

    /// `self >> s`, truncated to its low 64 bits (callers only shift down to small values).
    pub fn shr_to_u64(&self, s: usize) -> u64 {
        let mut v = 0u64;
        for bit in 0..64 {
            if self.bit(s + bit) {
                v |= 1 << bit;
            }
        }
        v
    }

    /// `self << s` (s < 64 is enough for the callers, but any size works).
    pub fn shl(&self, s: usize) -> Magnitude {
        let mut out = vec![0u32; s / 32];
        let shift = s % 32;
        let mut carry = 0u32;
        for &l in &self.0 {
            if shift == 0 {
                out.push(l);
            } else {
                out.push((l << shift) | carry);
                carry = l >> (32 - shift);
            }
        }
        if carry != 0 {
            out.push(carry);
        }
        let mut m = Magnitude(out);
        m.trim();
        m
    }
}

impl Ord for Magnitude {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0.len().cmp(&other.0.len()).then_with(|| self.0.iter().rev().cmp(other.0.iter().rev()))
    }
}

impl PartialOrd for Magnitude {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// A signed unscaled Decimal value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unscaled {
    pub negative: bool,
    pub magnitude: Magnitude,
}

impl Unscaled {
    /// Reads big-endian two's-complement bytes; `None` for an empty slice, which Java's
    /// `BigInteger` rejects too.
    pub fn from_twos_complement(bytes: &[u8]) -> Option<Self> {
        let first = *bytes.first()?;
        if first & 0x80 == 0 {
            return Some(Unscaled { negative: false, magnitude: Magnitude::from_be_bytes(bytes) });
        }
        // Negative: the magnitude is the two's complement of the bytes (invert, add one).
        let mut inverted: Vec<u8> = bytes.iter().map(|b| !b).collect();
        for b in inverted.iter_mut().rev() {
            let (v, overflow) = b.overflowing_add(1);
            *b = v;
            if !overflow {
                break;
            }
        }
        // All-0xFF..80..00 patterns (e.g. 0x80) overflow back to 0x80: still the right magnitude
        // when read unsigned, because -128 has magnitude 128.
        Some(Unscaled { negative: true, magnitude: Magnitude::from_be_bytes(&inverted) })
    }

    /// Minimal big-endian two's-complement bytes, exactly as `BigInteger.toByteArray()`.
    pub fn to_twos_complement(&self) -> Vec<u8> {
        let mag = self.magnitude.to_be_bytes();
        if self.magnitude.is_zero() {
            return vec![0];
        }
        if !self.negative {
            let mut out = mag;
            if out[0] & 0x80 != 0 {
                out.insert(0, 0);
            }
            return out;
        }
        // Two's complement over one extra byte, then drop redundant sign bytes.
        let mut out = Vec::with_capacity(mag.len() + 1);
        out.push(0u8);
        out.extend_from_slice(&mag);
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
        minimal_twos_complement(out)
    }

    #[cfg(test)]
    pub fn from_i64(v: i64) -> Self {
        Unscaled { negative: v < 0, magnitude: Magnitude::from_u64(v.unsigned_abs()) }
    }

    /// The value as an `i64` when it fits.
    pub fn to_i64(&self) -> Option<i64> {
        if self.magnitude.0.len() > 2 {
            return None;
        }
        let lo = u64::from(self.magnitude.0.first().copied().unwrap_or(0));
        let hi = u64::from(self.magnitude.0.get(1).copied().unwrap_or(0));
        let mag = (hi << 32) | lo;
        if self.negative {
            if mag <= 1u64 << 63 {
                Some((mag as i64).wrapping_neg())
            } else {
                None
            }
        } else {
            i64::try_from(mag).ok()
        }
    }
}

/// Drops redundant leading sign bytes (`00` before a byte without its top bit, `FF` before a
/// byte with it).
pub fn minimal_twos_complement(mut bytes: Vec<u8>) -> Vec<u8> {
    let mut start = 0;
    while start + 1 < bytes.len() {
        let (b, next) = (bytes[start], bytes[start + 1]);
        if (b == 0x00 && next & 0x80 == 0) || (b == 0xFF && next & 0x80 != 0) {
            start += 1;
        } else {
            break;
        }
    }
    bytes.drain(..start);
    bytes
}

/// Java's `BigDecimal.toString()` for `unscaled × 10^-scale`: plain notation when the scale
/// is not negative and the adjusted exponent is at least -6, scientific otherwise.
pub fn to_java_string(value: &Unscaled, scale: i32) -> String {
    let coeff = value.magnitude.to_decimal();
    let mut out = String::with_capacity(coeff.len() + 8);
    if value.negative && !value.magnitude.is_zero() {
        out.push('-');
    }
    let adjusted = -i64::from(scale) + (coeff.len() as i64 - 1);
    if scale >= 0 && adjusted >= -6 {
        let scale = scale as usize;
        if scale == 0 {
            out.push_str(&coeff);
        } else if coeff.len() > scale {
            let (int, frac) = coeff.split_at(coeff.len() - scale);
            out.push_str(int);
            out.push('.');
            out.push_str(frac);
        } else {
            out.push_str("0.");
            out.extend(std::iter::repeat_n('0', scale - coeff.len()));
            out.push_str(&coeff);
        }
    } else {
        out.push_str(&coeff[..1]);
        if coeff.len() > 1 {
            out.push('.');
            out.push_str(&coeff[1..]);
        }
        if adjusted != 0 {
            out.push('E');
            if adjusted > 0 {
                out.push('+');
            }
            out.push_str(&adjusted.to_string());
        }
    }
    out
}

/// A decimal number as written in text: `digits × 10^exponent`, with a sign.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecimalText {
    pub negative: bool,
    /// ASCII digits, as written (leading zeros removed, trailing zeros kept; `"0"` for zero).
    pub digits: String,
    pub exponent: i64,
}

/// Longest run of digits we are willing to materialise when rescaling (guards against
/// `1e999999999` turning into a billion-digit integer).
const MAX_DIGITS: i64 = 10_000;

impl DecimalText {
    /// Parses Java's `BigDecimal` grammar: an optional sign, digits with an optional point
    /// (`1`, `1.`, `.5`, `1.50`), an optional exponent (`e5`, `E+5`, `e-5`). JSON numbers are a
    /// subset of this.
    pub fn parse(text: &str) -> Option<Self> {
        let bytes = text.as_bytes();
        let mut i = 0;
        let mut negative = false;
        if let Some(&c) = bytes.first() {
            if c == b'-' || c == b'+' {
                negative = c == b'-';
                i = 1;
            }
        }
        let mut digits = String::new();
        let mut frac_len = 0i64;
        let mut seen_digit = false;
        let mut seen_point = false;
        while i < bytes.len() {
            let c = bytes[i];
            if c.is_ascii_digit() {
                seen_digit = true;
                if !(digits.is_empty() && c == b'0') {
                    digits.push(c as char);
                }
                if seen_point {
                    frac_len += 1;
                }
            } else if c == b'.' && !seen_point {
                seen_point = true;
            } else {
                break;
            }
            i += 1;
        }
        if !seen_digit {
            return None;
        }
        let mut exponent = 0i64;
        if i < bytes.len() {
            if bytes[i] != b'e' && bytes[i] != b'E' {
                return None;
            }
            let exp_text = &text[i + 1..];
            let unsigned = exp_text.strip_prefix(['+', '-']).unwrap_or(exp_text);
            if unsigned.is_empty() || !unsigned.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            // Java limits the exponent to an int; so do we.
            exponent = i64::from(exp_text.parse::<i32>().ok()?);
        }
        if digits.is_empty() {
            digits.push('0');
        }
        Some(DecimalText { negative, digits, exponent: exponent - frac_len })
    }

    /// The scale Java's `BigDecimal` gives this text (digits after the point minus the exponent).
    pub fn scale(&self) -> i64 {
        -self.exponent
    }

    pub fn is_zero(&self) -> bool {
        self.digits == "0"
    }

    /// The unscaled integer of this number at `scale`, or an error when that would drop
    /// non-zero digits (the number has more fractional digits than the scale allows).
    pub fn rescale(&self, scale: i64) -> Result<Unscaled, String> {
        let shift = self.exponent + scale;
        let digits = if shift >= 0 {
            if self.is_zero() {
                "0".to_owned()
            } else if self.digits.len() as i64 + shift > MAX_DIGITS {
                return Err(format!("the number has more than {MAX_DIGITS} digits at scale {scale}"));
            } else {
                let mut d = self.digits.clone();
                d.extend(std::iter::repeat_n('0', shift as usize));
                d
            }
        } else {
            let drop = shift.unsigned_abs();
            let keep = (self.digits.len() as u64).saturating_sub(drop) as usize;
            let (kept, dropped) = self.digits.split_at(keep);
            if dropped.bytes().any(|b| b != b'0') {
                return Err(format!("it has more fractional digits than scale {scale} allows"));
            }
            if kept.is_empty() {
                "0".to_owned()
            } else {
                kept.to_owned()
            }
        };
        let magnitude = Magnitude::from_decimal(&digits);
        Ok(Unscaled { negative: self.negative && !magnitude.is_zero(), magnitude })
    }

    /// The integer value when the number is integral and fits in an `i64`.
    pub fn to_i64(&self) -> Option<i64> {
        if self.is_zero() {
            return Some(0);
        }
        if self.digits.len() as i64 + self.exponent > 20 {
            return None;
        }
        self.rescale(0).ok()?.to_i64()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn java(bytes: &[u8], scale: i32) -> String {
        to_java_string(&Unscaled::from_twos_complement(bytes).unwrap(), scale)
    }

    #[test]
    fn twos_complement_round_trips_minimally() {
        for v in [0i64, 1, -1, 127, 128, -128, -129, 255, 256, -256, -255, 32767, -32768, i64::MAX, i64::MIN, 156] {
            let bytes = Unscaled::from_i64(v).to_twos_complement();
            let java_like = minimal_twos_complement(v.to_be_bytes().to_vec());
            assert_eq!(bytes, java_like, "{v}");
            assert_eq!(Unscaled::from_twos_complement(&bytes).unwrap().to_i64(), Some(v), "{v}");
        }
        // 156 is 00 9C, as in Kafka's JsonConverterTest.
        assert_eq!(Unscaled::from_i64(156).to_twos_complement(), vec![0x00, 0x9C]);
        // Redundant sign bytes are dropped.
        let padded = Unscaled::from_twos_complement(&[0x00, 0x00, 0x9C]).unwrap();
        assert_eq!(padded.to_twos_complement(), vec![0x00, 0x9C]);
        let padded = Unscaled::from_twos_complement(&[0xFF, 0xFF, 0x80]).unwrap();
        assert_eq!(padded.to_twos_complement(), vec![0x80]);
        assert!(Unscaled::from_twos_complement(&[]).is_none());
    }

    #[test]
    fn java_big_decimal_strings() {
        assert_eq!(java(&[0x00, 0x9C], 2), "1.56");
        assert_eq!(java(&[0x3C, 0xF0], 4), "1.5600");
        assert_eq!(java(&[0xFF, 0x64], 2), "-1.56");
        assert_eq!(java(&[0x01], 10), "1E-10");
        assert_eq!(java(&[0x01], 6), "0.000001");
        assert_eq!(java(&[0x01], 7), "1E-7");
        assert_eq!(java(&[0x7B], -2), "1.23E+4");
        assert_eq!(java(&[0x00], 0), "0");
        assert_eq!(java(&[0x00], 2), "0.00");
        assert_eq!(java(&[0x00], -2), "0E+2");
        assert_eq!(java(&[0x0F], 3), "0.015");
    }

    #[test]
    fn values_beyond_i128_print_exactly() {
        // 2^130 = 1361129467683753853853498429727072845824
        let mut bytes = vec![0x04];
        bytes.extend(std::iter::repeat_n(0u8, 16));
        assert_eq!(java(&bytes, 0), "1361129467683753853853498429727072845824");
        assert_eq!(java(&bytes, 5), "13611294676837538538534984297270728.45824");
        let neg = DecimalText::parse("-1361129467683753853853498429727072845824").unwrap().rescale(0).unwrap();
        let mut expected = vec![0xFC];
        expected.extend(std::iter::repeat_n(0u8, 16));
        assert_eq!(neg.to_twos_complement(), expected);
    }

    #[test]
    fn decimal_text_rescales_exactly() {
        let t = DecimalText::parse("1.5").unwrap();
        assert_eq!(t.rescale(2).unwrap().to_i64(), Some(150));
        assert_eq!(DecimalText::parse("1.5600").unwrap().rescale(2).unwrap().to_i64(), Some(156));
        assert_eq!(DecimalText::parse("-0012.50e1").unwrap().rescale(0).unwrap().to_i64(), Some(-125));
        assert!(DecimalText::parse("1.234").unwrap().rescale(2).is_err());
        assert_eq!(DecimalText::parse("1E+3").unwrap().to_i64(), Some(1000));
        assert_eq!(DecimalText::parse("12.0").unwrap().to_i64(), Some(12));
        assert_eq!(DecimalText::parse("12.5").unwrap().to_i64(), None);
        assert_eq!(DecimalText::parse("1e300").unwrap().to_i64(), None);
        assert_eq!(DecimalText::parse("-9223372036854775808").unwrap().to_i64(), Some(i64::MIN));
        assert_eq!(DecimalText::parse("9223372036854775808").unwrap().to_i64(), None);
        assert_eq!(DecimalText::parse("1.50").unwrap().scale(), 2);
        assert_eq!(DecimalText::parse(".5").unwrap().scale(), 1);
        assert_eq!(DecimalText::parse("1.").unwrap().scale(), 0);
        for bad in ["", "-", ".", "e5", "1e", "1x", "1.2.3", "1e+", "--1"] {
            assert!(DecimalText::parse(bad).is_none(), "{bad}");
        }
    }
}
