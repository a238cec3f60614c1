//! The two OCP FP8 formats (OCP 8-bit Floating Point Specification, v1.0): E4M3 (bias 7,
//! no infinities, S.1111.111 is NaN, largest finite 448) and E5M2 (bias 15, IEEE-like:
//! infinities and NaNs at exponent 31, largest finite 57344).
//!
//! Conversion from f32 rounds to nearest, ties to even, and saturates as CUDA's
//! `__nv_fp8_e4m3(float)` / `__nv_fp8_e5m2(float)` and PTX's `cvt.rn.satfinite` do: a
//! magnitude beyond the largest finite value (an infinity included) becomes that value
//! with its sign; NaN stays NaN. So an array peak fills holds the bytes a device
//! conversion of the same f32 values would.

/// One FP8 format: mantissa bits, exponent bias, and whether the top exponent is IEEE's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fp8 {
    mantissa: u32,
    bias: i32,
    /// E5M2: exponent all ones is infinity (mantissa 0) or NaN. E4M3: only S.1111.111 is NaN.
    ieee: bool,
}

pub const E4M3: Fp8 = Fp8 { mantissa: 3, bias: 7, ieee: false };
pub const E5M2: Fp8 = Fp8 { mantissa: 2, bias: 15, ieee: true };

impl Fp8 {
    /// The canonical NaN (also peak's poison for an fp8 output).
    pub const NAN: u8 = 0x7F;

    /// The largest finite magnitude's bits: 0x7E (448) for E4M3, 0x7B (57344) for E5M2.
    pub fn max_bits(self) -> u8 {
        if self.ieee { 0x7B } else { 0x7E }
    }

    pub fn to_f32(self, bits: u8) -> f32 {
        let sign = if bits & 0x80 != 0 { -1.0 } else { 1.0 };
        let exp = i32::from((bits & 0x7F) >> self.mantissa);
        let man = f64::from(bits & ((1 << self.mantissa) - 1));
        let top = (1 << (7 - self.mantissa)) - 1;
        if self.ieee && exp == top {
            return if man == 0.0 { sign * f32::INFINITY } else { f32::NAN };
        }
        if !self.ieee && bits & 0x7F == 0x7F {
            return f32::NAN;
        }
        let scale = 2f64.powi(self.mantissa as i32);
        let value = if exp == 0 { man / scale * 2f64.powi(1 - self.bias) } else { (1.0 + man / scale) * 2f64.powi(exp - self.bias) };
        sign * value as f32
    }

    /// `x` rounded to nearest even, saturated to the largest finite value; NaN to NaN.
    pub fn from_f32(self, x: f32) -> u8 {
        let sign = if x.is_sign_negative() { 0x80 } else { 0 };
        if x.is_nan() {
            return Self::NAN;
        }
        let a = f64::from(x.abs());
        if a >= f64::from(self.to_f32(self.max_bits())) {
            return sign | self.max_bits();
        }
        // The quantum at a's binade (the subnormal one below the smallest normal); a / q is
        // exact in f64, and a value that rounds up into the next binade still encodes as
        // exponent + 1 and mantissa 0 through the carry below.
        let min_exp = 1 - self.bias;
        let exp = if a == 0.0 { min_exp } else { ((a.to_bits() >> 52) as i32 - 1023).max(min_exp) };
        let q = (a / 2f64.powi(exp - self.mantissa as i32)).round_ties_even() as u32;
        // q counts quanta: 2^m..2^(m+1) for a normal (implicit bit set), fewer for a subnormal.
        let biased = if q >= 1 << self.mantissa { (exp + self.bias) as u32 } else { 0 };
        let bits = if biased == 0 { q } else { (biased << self.mantissa) + (q - (1 << self.mantissa)) };
        sign | bits as u8
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Every finite value of a format, with its bits.
    fn finite(f: Fp8) -> Vec<(u8, f64)> {
        (0..=255u8).map(|b| (b, f64::from(f.to_f32(b)))).filter(|(_, v)| v.is_finite()).collect()
    }

    /// The nearest finite value by brute force, ties to the even code (mantissa bit 0 clear).
    fn nearest(f: Fp8, x: f32) -> u8 {
        let x = f64::from(x);
        let max = f64::from(f.to_f32(f.max_bits()));
        if x.abs() >= max {
            return if x < 0.0 { 0x80 | f.max_bits() } else { f.max_bits() };
        }
        let mut best = finite(f);
        best.retain(|(b, _)| (*b & 0x80 != 0) == x.is_sign_negative());
        best.sort_by(|p, q| (p.1 - x).abs().total_cmp(&(q.1 - x).abs()).then((p.0 & 1).cmp(&(q.0 & 1))));
        best[0].0
    }

    #[test]
    fn known_values() {
        assert_eq!(E4M3.to_f32(0x7E), 448.0);
        assert!(E4M3.to_f32(0x7F).is_nan() && E4M3.to_f32(0xFF).is_nan());
        assert_eq!(E4M3.to_f32(0x01), 2f32.powi(-9), "smallest E4M3 subnormal");
        assert_eq!(E4M3.to_f32(0x78), 256.0, "S.1111.000 is a number in E4M3");
        assert_eq!(E5M2.to_f32(0x7B), 57344.0);
        assert_eq!(E5M2.to_f32(0x7C), f32::INFINITY);
        assert!(E5M2.to_f32(0x7E).is_nan());
        assert_eq!(E5M2.to_f32(0x01), 2f32.powi(-16));
        assert_eq!(E4M3.from_f32(1.0), 0x38);
        assert_eq!(E4M3.from_f32(-2.0), 0xC0);
        // Saturation, infinities included; NaN stays NaN.
        assert_eq!(E4M3.from_f32(1e6), 0x7E);
        assert_eq!(E4M3.from_f32(f32::NEG_INFINITY), 0xFE);
        assert_eq!(E5M2.from_f32(f32::INFINITY), 0x7B);
        assert_eq!(E5M2.from_f32(60000.0), 0x7B);
        assert!(E4M3.to_f32(E4M3.from_f32(f32::NAN)).is_nan() && E5M2.to_f32(E5M2.from_f32(f32::NAN)).is_nan());
        // Ties to even: 1 + 1/16 lies between 1 (0x38, even) and 1.125 (0x39).
        assert_eq!(E4M3.from_f32(1.0625), 0x38);
        assert_eq!(E4M3.from_f32(1.1875), 0x3A, "between 1.125 (odd) and 1.25 (even)");
        // Below half the smallest subnormal rounds to a signed zero.
        assert_eq!(E4M3.from_f32(2f32.powi(-11)), 0x00);
        assert_eq!(E4M3.from_f32(-2f32.powi(-11)), 0x80);
    }

    #[test]
    fn every_finite_value_round_trips() {
        for f in [E4M3, E5M2] {
            for (bits, value) in finite(f) {
                assert_eq!(f.from_f32(value as f32), bits, "{f:?} {bits:#04x} = {value}");
            }
        }
    }

    proptest! {
        #[test]
        fn conversion_is_round_to_nearest_even(x in -70000f32..70000f32, small in -1f32..1f32, tiny in -0.01f32..0.01f32) {
            for f in [E4M3, E5M2] {
                for v in [x, small, tiny] {
                    prop_assert_eq!(f.from_f32(v), nearest(f, v), "{:?} at {}", f, v);
                }
            }
        }

        #[test]
        fn any_f32_bits_give_the_nearest_value(bits in any::<u32>()) {
            let x = f32::from_bits(bits);
            prop_assume!(!x.is_nan());
            for f in [E4M3, E5M2] {
                prop_assert_eq!(f.from_f32(x), nearest(f, x), "{:?} at {}", f, x);
            }
        }
    }
}
