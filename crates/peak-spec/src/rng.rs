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
