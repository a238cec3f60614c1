//! SplitMix64: a tiny, well-known generator whose output never changes between library
//! versions, so a seed recorded in a workflow regenerates the same inputs forever.

#[derive(Debug, Clone)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    pub fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `[0, bound)`; the modulo bias is negligible for the bounds we use.
    pub fn below(&mut self, bound: u64) -> u64 {
        if bound == 0 { 0 } else { self.next_u64() % bound }
    }

    /// Uniform in `[-1, 1)`, with 24 bits of mantissa so it is exact in f32.
    pub fn unit_f32(&mut self) -> f32 {
        let bits = (self.next_u64() >> 40) as u32; // 24 bits
        (bits as f32 / (1u32 << 23) as f32) - 1.0
    }

    /// Uniform in `[0, 1)`: the top 53 bits as a multiple of 2^-53, exact in f64.
    pub fn unit_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * TWO_POW_MINUS_53
    }

    /// A standard normal value by the ratio of uniforms (Kinderman and Monahan, 1977): for
    /// u in (0, 1] and v in [-√(2/e), √(2/e)), x = v / u is kept when x² <= -4 ln u. It takes
    /// two draws per try (about 1.37 tries per value) and only +, -, *, / and [`ln`], all
    /// IEEE-exact, so the C harness reproduces every bit without a libm.
    pub fn normal(&mut self) -> f64 {
        loop {
            let u = ((self.next_u64() >> 11) + 1) as f64 * TWO_POW_MINUS_53;
            // 2U - 1 in [-1, 1): exact, as U is a multiple of 2^-53 below 1.
            let v = SQRT_2_OVER_E * ((self.next_u64() >> 11) as f64 * TWO_POW_MINUS_52 - 1.0);
            let x = v / u;
            if x * x <= -4.0 * ln(u) {
                return x;
            }
        }
    }
}

const TWO_POW_MINUS_53: f64 = 1.0 / 9_007_199_254_740_992.0;
const TWO_POW_MINUS_52: f64 = 1.0 / 4_503_599_627_370_496.0;
/// √(2/e), the half-width of the ratio-of-uniforms box for the normal density.
const SQRT_2_OVER_E: f64 = 0.857_763_884_960_706_8;

/// The natural logarithm of a positive, normal `x` in plain arithmetic, so that C computes
/// the same bits (a libm's `log` may round differently from peak's): x = m·2^e with m in
/// (√½, √2], and ln m = 2 atanh(s) for s = (m - 1) / (m + 1), |s| < 0.172, by its series up
/// to s^23 (the first term left out is below 2^-60 of the sum).
fn ln(x: f64) -> f64 {
    let bits = x.to_bits();
    let mut e = ((bits >> 52) & 0x7ff) as i64 - 1023;
    let mut m = f64::from_bits((bits & ((1 << 52) - 1)) | (1023 << 52));
    if m > std::f64::consts::SQRT_2 {
        m *= 0.5;
        e += 1;
    }
    let f = m - 1.0;
    let s = f / (2.0 + f);
    let z = s * s;
    let mut p = 0.0;
    for k in (0..12).rev() {
        p = p * z + 1.0 / f64::from(2 * k + 1);
    }
    e as f64 * std::f64::consts::LN_2 + 2.0 * s * p
}

/// Derive an independent seed from a base seed and a label (array name, sample index).
pub fn mix_seed(base: u64, label: &str, salt: u64) -> u64 {
    let mut h = SplitMix64::new(base ^ salt.rotate_left(17));
    let mut acc = h.next_u64();
    for b in label.bytes() {
        acc = SplitMix64::new(acc ^ u64::from(b)).next_u64();
    }
    acc
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ln_agrees_with_the_library_logarithm() {
        let mut rng = SplitMix64::new(3);
        for _ in 0..100_000 {
            let u = ((rng.next_u64() >> 11) + 1) as f64 * TWO_POW_MINUS_53;
            let x = u * 2f64.powi(rng.below(200) as i32 - 100);
            assert!((ln(x) - x.ln()).abs() <= 4.0 * f64::EPSILON * x.ln().abs().max(1.0), "ln({x}) = {} against {}", ln(x), x.ln());
        }
        assert_eq!(ln(1.0), 0.0);
    }
}
