//! Host-side array contents: initialisation, poisoning, digests and comparison.
//!
//! Arrays travel as little-endian bytes tagged with their element type; every backend
//! copies bytes, and only this module interprets them.

use half::{bf16, f16};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::fp8::{E4M3, E5M2, Fp8};
use crate::init::{Fill, RowOutliers, Values};
use crate::manifest::DType;
use crate::rng::SplitMix64;

/// Bytes of one array plus the type that gives them meaning.
#[derive(Debug, Clone, PartialEq)]
pub struct HostArray {
    pub dtype: DType,
    pub bytes: Vec<u8>,
}

impl HostArray {
    pub fn len(&self) -> usize {
        self.bytes.len() / self.dtype.size_bytes()
    }

    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// Fill `count` elements as the manifest asks, at one execution parameter
    /// ([`Init::fill`](crate::Init::fill) evaluates its expressions). `seed` only matters
    /// where something is drawn ([`Fill::is_seeded`]).
    pub fn init(dtype: DType, count: usize, fill: impl Into<Fill>, seed: u64) -> HostArray {
        let fill = fill.into();
        let mut rng = SplitMix64::new(seed);
        let mut outliers = fill.outliers.map(|o| OutlierRows::new(o, seed));
        // The four original inits keep the conversion they always had, so their bytes stay
        // the same; every other fill rounds through f32 (see `push_rounded`).
        let push = if fill.is_plain() { push_value } else { push_rounded };
        let mut bytes = Vec::with_capacity(count * dtype.size_bytes());
        for i in 0..count {
            let mut value = draw(fill.values, dtype, i, &mut rng);
            if let Some(rows) = &mut outliers {
                value = rows.apply(i, value);
            }
            push(&mut bytes, dtype, value);
        }
        HostArray { dtype, bytes }
    }

    /// `count` copies of one value converted to the element type.
    pub fn filled(dtype: DType, count: usize, value: f64) -> HostArray {
        let mut one = Vec::with_capacity(dtype.size_bytes());
        push_value(&mut one, dtype, value);
        HostArray { dtype, bytes: one.repeat(count) }
    }

    /// The poison written into outputs before every run. NaN for floats, so an element the
    /// kernel never writes can never compare equal; a large odd pattern for integers.
    pub fn poison(dtype: DType, count: usize) -> HostArray {
        let one: &[u8] = match dtype {
            DType::F32 => &0x7FC0_0BADu32.to_le_bytes(),
            DType::F16 => &0x7E5Au16.to_le_bytes(),
            DType::Bf16 => &0x7FDAu16.to_le_bytes(),
            DType::I32 | DType::U32 => &0x7BAD_F00Du32.to_le_bytes(),
            DType::E4m3 | DType::E5m2 => &[Fp8::NAN],
        };
        HostArray { dtype, bytes: one.repeat(count) }
    }

    /// The pattern of one poison element, for backends that fill on the device.
    pub fn poison_pattern(dtype: DType) -> Vec<u8> {
        Self::poison(dtype, 1).bytes
    }

    pub fn get_f64(&self, i: usize) -> f64 {
        let s = self.dtype.size_bytes();
        let b = &self.bytes[i * s..(i + 1) * s];
        // `b` is `size_bytes()` long: the width of the array each arm converts it to.
        const WIDTH: &str = "an element's slice is size_bytes() long";
        match self.dtype {
            DType::F32 => f64::from(f32::from_le_bytes(b.try_into().expect(WIDTH))),
            DType::F16 => f16::from_le_bytes(b.try_into().expect(WIDTH)).to_f64(),
            DType::Bf16 => bf16::from_le_bytes(b.try_into().expect(WIDTH)).to_f64(),
            DType::I32 => f64::from(i32::from_le_bytes(b.try_into().expect(WIDTH))),
            DType::U32 => f64::from(u32::from_le_bytes(b.try_into().expect(WIDTH))),
            DType::E4m3 => f64::from(E4M3.to_f32(b[0])),
            DType::E5m2 => f64::from(E5M2.to_f32(b[0])),
        }
    }

    /// A short content hash: equal digests mean bit-identical arrays.
    pub fn digest(&self) -> String {
        let hash = Sha256::digest(&self.bytes);
        hex::encode(&hash[..8])
    }

    /// A few summary numbers people can eyeball.
    pub fn summary(&self) -> ArraySummary {
        let n = self.len();
        let (mut sum, mut min, mut max, mut nan) = (0.0, f64::INFINITY, f64::NEG_INFINITY, 0usize);
        for i in 0..n {
            let v = self.get_f64(i);
            if v.is_nan() {
                nan += 1;
                continue;
            }
            sum += v;
            min = min.min(v);
            max = max.max(v);
        }
        ArraySummary { elements: n, digest: self.digest(), sum, min: if n > nan { min } else { f64::NAN }, max: if n > nan { max } else { f64::NAN }, nan }
    }
}

/// Element `i`'s value before outliers, drawn from `rng` where the kind draws.
fn draw(values: Values, dtype: DType, i: usize, rng: &mut SplitMix64) -> f64 {
    // Distributions are rounded to f32 first, then to the element type (`push_rounded`),
    // as the C harness does.
    let f32_value = |v: f64| f64::from(v as f32);
    match values {
        Values::Zeros => 0.0,
        Values::Ones => 1.0,
        Values::Arange => i as f64,
        Values::Random => match dtype {
            // Integers get small values so sums stay exact and far from overflow.
            DType::I32 => (rng.below(201) as i64 - 100) as f64,
            DType::U32 => rng.below(101) as f64,
            _ => f64::from(rng.unit_f32()),
        },
        Values::Uniform { scale, offset } => f32_value(offset + scale * rng.unit_f64()),
        Values::Normal { scale, offset } => f32_value(offset + scale * rng.normal()),
        // `hi - lo` is at most 2^32: the range was checked against the element type.
        Values::Integers { lo, hi } => (lo + rng.below((hi - lo) as u64) as i64) as f64,
    }
}

/// Picks each row's outlier entries from a stream of its own, so the values drawn for the
/// array are the same with or without outliers.
struct OutlierRows {
    outliers: RowOutliers,
    rng: SplitMix64,
    /// The row's positions, the first `count` shuffled into place (a partial Fisher-Yates).
    order: Vec<usize>,
    chosen: Vec<bool>,
}

/// Salts the outlier stream's seed ("outliers" in ASCII).
const OUTLIER_SALT: u64 = 0x6F75_746C_6965_7273;

impl OutlierRows {
    fn new(outliers: RowOutliers, seed: u64) -> OutlierRows {
        OutlierRows { outliers, rng: SplitMix64::new(seed ^ OUTLIER_SALT), order: vec![0; outliers.row], chosen: vec![false; outliers.row] }
    }

    /// Element `i`'s value: `value`, or `value * scale` rounded to f32 if it was chosen.
    fn apply(&mut self, i: usize, value: f64) -> f64 {
        let col = i % self.outliers.row;
        if col == 0 {
            self.choose_row();
        }
        if self.chosen[col] { f64::from((value * self.outliers.scale) as f32) } else { value }
    }

    fn choose_row(&mut self) {
        let row = self.outliers.row;
        for (j, slot) in self.order.iter_mut().enumerate() {
            *slot = j;
        }
        self.chosen.fill(false);
        for j in 0..self.outliers.count {
            let pick = j + self.rng.below((row - j) as u64) as usize;
            self.order.swap(j, pick);
            self.chosen[self.order[j]] = true;
        }
    }
}

/// `value`, exact in f32, in a float type rounded to nearest even from f32. (`push_value`
/// converts to the half types from f64, which the `half` crate does for bf16 on the top 20
/// bits of the mantissa only: a value just above a halfway point can round down. The C
/// harness reproduces that for the original inits.)
fn push_rounded(bytes: &mut Vec<u8>, dtype: DType, value: f64) {
    match dtype {
        DType::F16 => bytes.extend_from_slice(&f16::from_f32(value as f32).to_le_bytes()),
        DType::Bf16 => bytes.extend_from_slice(&bf16::from_f32(value as f32).to_le_bytes()),
        _ => push_value(bytes, dtype, value),
    }
}

fn push_value(bytes: &mut Vec<u8>, dtype: DType, value: f64) {
    match dtype {
        DType::F32 => bytes.extend_from_slice(&(value as f32).to_le_bytes()),
        DType::F16 => bytes.extend_from_slice(&f16::from_f64(value).to_le_bytes()),
        DType::Bf16 => bytes.extend_from_slice(&bf16::from_f64(value).to_le_bytes()),
        DType::I32 => bytes.extend_from_slice(&(value as i32).to_le_bytes()),
        DType::U32 => bytes.extend_from_slice(&(value as u32).to_le_bytes()),
        // Through f32, as the C harness converts: round to nearest even, saturating.
        DType::E4m3 => bytes.push(E4M3.from_f32(value as f32)),
        DType::E5m2 => bytes.push(E5M2.from_f32(value as f32)),
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ArraySummary {
    pub elements: usize,
    pub digest: String,
    pub sum: f64,
    pub min: f64,
    pub max: f64,
    pub nan: usize,
}

/// The result of comparing an output with its reference: what `peak check` prints, what
/// a worker sends back (`OutputReport::comparison`) and, with the array's name, what a
/// `wrong-output` verdict records.
///
/// A poisoned output gives an infinite error and NaN values, which plain JSON numbers
/// cannot carry (serde_json writes `null`), so the floating-point fields go through
/// [`json_f64`](crate::json_f64). `first_non_finite` and `passed` may be missing (verdicts
/// written before they were recorded).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    /// ‖out − ref‖₂ / ‖ref‖₂ over the whole array (the pass criterion).
    #[serde(with = "crate::json_f64")]
    pub relative_error: f64,
    #[serde(with = "crate::json_f64")]
    pub tolerance: f64,
    /// Largest per-element |out − ref| / max(|ref|, scale), where scale is the array's RMS,
    /// so tiny reference values do not make the per-element figure explode.
    #[serde(with = "crate::json_f64")]
    pub max_error: f64,
    #[serde(with = "crate::json_f64")]
    pub mean_error: f64,
    pub worst_index: usize,
    #[serde(with = "crate::json_f64")]
    pub worst_value: f64,
    #[serde(with = "crate::json_f64")]
    pub worst_expected: f64,
    /// Elements that are NaN or infinite where the reference is finite (unwritten poison
    /// included), and elements written where the reference left its poison (padding).
    pub non_finite: usize,
    #[serde(default)]
    pub first_non_finite: Option<usize>,
    #[serde(default)]
    pub passed: bool,
}

/// Compare `out` with `reference` (same type and length) under `tolerance`.
pub fn compare(out: &HostArray, reference: &HostArray, tolerance: f64) -> Comparison {
    assert_eq!(out.dtype, reference.dtype, "compare: element types differ");
    compare_bytes(out.dtype, &out.bytes, &reference.bytes, tolerance)
}

/// [`compare`] on borrowed little-endian bytes of one element type, so a caller holding
/// the reference as bytes (a worker comparing every variant with one reference file)
/// need not copy it into a [`HostArray`]. Both must hold the same number of elements.
pub fn compare_bytes(dtype: DType, out: &[u8], reference: &[u8], tolerance: f64) -> Comparison {
    let size = dtype.size_bytes();
    assert_eq!(out.len() / size, reference.len() / size, "compare: lengths differ");
    let poison = HostArray::poison_pattern(dtype);
    // One match on the type, then a loop specialised for it.
    match dtype {
        DType::F32 => compare_decoded(out, reference, &poison, tolerance, |b: [u8; 4]| f64::from(f32::from_le_bytes(b))),
        DType::F16 | DType::Bf16 => {
            let table = half_table(dtype);
            compare_decoded(out, reference, &poison, tolerance, |b: [u8; 2]| table[usize::from(u16::from_le_bytes(b))])
        }
        DType::I32 => compare_decoded(out, reference, &poison, tolerance, |b: [u8; 4]| f64::from(i32::from_le_bytes(b))),
        DType::U32 => compare_decoded(out, reference, &poison, tolerance, |b: [u8; 4]| f64::from(u32::from_le_bytes(b))),
        DType::E4m3 | DType::E5m2 => {
            let format = if dtype == DType::E4m3 { E4M3 } else { E5M2 };
            let table: [f64; 256] = std::array::from_fn(|b| f64::from(format.to_f32(b as u8)));
            compare_decoded(out, reference, &poison, tolerance, |b: [u8; 1]| table[usize::from(b[0])])
        }
    }
}

/// The comparison over elements of `S` bytes each, read by `decode`. The sums run in
/// element order, so the figures are the same to the bit whatever the caller.
///
/// An element the reference never wrote (still `poison`, bit for bit: the padding after
/// each row of a C with a leading dimension larger than its width, which a GEMM leaves
/// alone) matches only an element the candidate never wrote either; anywhere else poison
/// fails as any NaN does.
fn compare_decoded<const S: usize>(out: &[u8], reference: &[u8], poison: &[u8], tolerance: f64, decode: impl Fn([u8; S]) -> f64 + Copy) -> Comparison {
    let n = out.len() / S;
    let (out, reference) = (&out[..n * S], &reference[..n * S]);
    let at = |bytes: &[u8], i: usize| decode(bytes[i * S..(i + 1) * S].try_into().expect("S bytes"));
    let mut ref_sq = 0.0;
    for r in elements(reference, decode) {
        if r.is_finite() {
            ref_sq += r * r;
        }
    }
    let scale = if n > 0 { (ref_sq / n as f64).sqrt().max(f64::MIN_POSITIVE) } else { 1.0 };
    let (mut diff_sq, mut sum_err, mut max_err, mut worst) = (0.0, 0.0, 0.0, 0usize);
    let (mut non_finite, mut first_non_finite) = (0usize, None);
    let unwritten = |bytes: &[u8], i: usize| &bytes[i * S..(i + 1) * S] == poison;
    for (i, (o, r)) in elements(out, decode).zip(elements(reference, decode)).enumerate() {
        if unwritten(reference, i) {
            if !unwritten(out, i) {
                non_finite += 1;
                first_non_finite.get_or_insert(i);
            }
            continue;
        }
        if !o.is_finite() && !(o == r) {
            non_finite += 1;
            first_non_finite.get_or_insert(i);
            continue;
        }
        let d = (o - r).abs();
        diff_sq += d * d;
        let e = d / r.abs().max(scale);
        sum_err += e;
        if e > max_err {
            max_err = e;
            worst = i;
        }
    }
    if let Some(i) = first_non_finite {
        worst = i;
        max_err = f64::INFINITY;
    }
    let relative_error = if ref_sq > 0.0 {
        (diff_sq / ref_sq).sqrt()
    } else if diff_sq > 0.0 {
        f64::INFINITY
    } else {
        0.0
    };
    let passed = non_finite == 0 && relative_error <= tolerance;
    Comparison {
        relative_error,
        tolerance,
        max_error: max_err,
        mean_error: if n > 0 { sum_err / n as f64 } else { 0.0 },
        worst_index: worst,
        worst_value: if n > 0 { at(out, worst) } else { 0.0 },
        worst_expected: if n > 0 { at(reference, worst) } else { 0.0 },
        non_finite,
        first_non_finite,
        passed,
    }
}

/// Every bit pattern's value for a 16-bit float type (`to_f64` of `f16` or `bf16`, NaN
/// payloads included): a table lookup is several times faster than converting in
/// software, element by element. Made once per process, 512 KiB each.
fn half_table(dtype: DType) -> &'static [f64; 1 << 16] {
    type Table = std::sync::OnceLock<Box<[f64; 1 << 16]>>;
    static F16: Table = Table::new();
    static BF16: Table = Table::new();
    let make = |convert: fn(u16) -> f64| {
        // Built on the heap: half a mebibyte is too much for a small thread's stack.
        let table: Box<[f64]> = (0..=u16::MAX).map(convert).collect();
        table.try_into().expect("one value per bit pattern")
    };
    match dtype {
        DType::Bf16 => BF16.get_or_init(|| make(|bits| bf16::from_bits(bits).to_f64())),
        _ => F16.get_or_init(|| make(|bits| f16::from_bits(bits).to_f64())),
    }
}

/// The elements of `bytes`, `S` bytes each, read by `decode`.
fn elements<'a, const S: usize>(bytes: &'a [u8], decode: impl Fn([u8; S]) -> f64 + Copy + 'a) -> impl Iterator<Item = f64> + 'a {
    bytes.chunks_exact(S).map(move |b| decode(b.try_into().expect("chunks of S bytes")))
}

/// Default relative-error tolerance for an element type. Half types are derived from the
/// accumulation depth: rounding the inputs and the result costs about one unit in the last
/// place each, and a different summation order adds error growing like √depth. The
/// constant keeps a correct reordering well inside and an all-zero output (error 1.0) far out.
/// An fp8 output (3 or 2 mantissa bits) is accumulated wider and rounded once: a reordering
/// moves an element by at most one unit (2⁻³ relative for E4M3, 2⁻² for E5M2), and only
/// where its sum lies next to a rounding boundary, so the bound is one unit roundoff growing
/// with √depth, capped at two; fp8 inputs with a wider output take that output's tolerance.
pub fn default_tolerance(dtype: DType, accumulation_depth: Option<i64>) -> f64 {
    let depth = accumulation_depth.unwrap_or(1).max(1) as f64;
    match dtype {
        DType::F32 => (1e-5 * depth.sqrt()).clamp(1e-5, 1e-3),
        DType::F16 => (4.0 * 2f64.powi(-11) * depth.sqrt()).clamp(2e-3, 5e-2),
        DType::Bf16 => (4.0 * 2f64.powi(-8) * depth.sqrt()).clamp(1.6e-2, 1e-1),
        DType::E4m3 => (2f64.powi(-4) * depth.sqrt()).clamp(2f64.powi(-4), 2f64.powi(-3)),
        DType::E5m2 => (2f64.powi(-3) * depth.sqrt()).clamp(2f64.powi(-3), 2f64.powi(-2)),
        DType::I32 | DType::U32 => 0.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_init_is_reproducible_and_seed_dependent() {
        let a = HostArray::init(DType::F32, 64, Values::Random, 7);
        let b = HostArray::init(DType::F32, 64, Values::Random, 7);
        let c = HostArray::init(DType::F32, 64, Values::Random, 8);
        assert_eq!(a, b);
        assert_ne!(a.digest(), c.digest());
        assert!((0..64).all(|i| (-1.0..1.0).contains(&a.get_f64(i))));
    }

    #[test]
    fn an_element_the_reference_never_wrote_passes_only_unwritten() {
        for dtype in DType::ALL {
            let size = dtype.size_bytes();
            // Elements 3 and 7 are padding the reference leaves alone.
            let mut reference = HostArray::init(dtype, 8, Values::Ones, 0);
            for i in [3, 7] {
                reference.bytes[i * size..(i + 1) * size].copy_from_slice(&HostArray::poison_pattern(dtype));
            }
            let cmp = compare(&reference.clone(), &reference, 1e-3);
            assert!(cmp.passed && cmp.non_finite == 0 && cmp.relative_error == 0.0, "{dtype}: {cmp:?}");
            // Written there, or left unwritten elsewhere: a failure.
            let mut written = reference.clone();
            written.bytes[3 * size..4 * size].copy_from_slice(&HostArray::filled(dtype, 1, 1.0).bytes);
            assert!(!compare(&written, &reference, 1e-3).passed, "{dtype}: a write into the padding passed");
            let mut lazy = reference.clone();
            lazy.bytes[..size].copy_from_slice(&HostArray::poison_pattern(dtype));
            assert!(!compare(&lazy, &reference, 1e-3).passed, "{dtype}: an unwritten element passed");
        }
    }

    #[test]
    fn poison_fails_and_nan_fails() {
        let reference = HostArray::init(DType::F32, 16, Values::Random, 1);
        let poisoned = HostArray::poison(DType::F32, 16);
        let cmp = compare(&poisoned, &reference, 1e-3);
        assert!(!cmp.passed);
        assert_eq!(cmp.non_finite, 16);
        for dtype in [DType::F16, DType::Bf16] {
            let r = HostArray::init(dtype, 4, Values::Ones, 0);
            assert!(!compare(&HostArray::poison(dtype, 4), &r, 1.0).passed);
        }
    }

    #[test]
    fn zeros_fail_and_small_noise_passes_for_f16() {
        let tol = default_tolerance(DType::F16, Some(2048));
        let reference = HostArray::init(DType::F16, 256, Values::Random, 3);
        let zeros = HostArray::init(DType::F16, 256, Values::Zeros, 0);
        assert!(!compare(&zeros, &reference, tol).passed);
        let mut noisy = reference.clone();
        // Flip the lowest mantissa bit of every element: one ulp of reordering noise.
        for chunk in noisy.bytes.chunks_mut(2) {
            chunk[0] ^= 1;
        }
        assert!(compare(&noisy, &reference, tol).passed);
    }

    #[test]
    fn fp8_inits_hold_representable_values() {
        for (dtype, format) in [(DType::E4m3, E4M3), (DType::E5m2, E5M2)] {
            let random = HostArray::init(dtype, 512, Values::Random, 5);
            assert_eq!(random.bytes.len(), 512, "one byte per element");
            for (i, &b) in random.bytes.iter().enumerate() {
                let v = random.get_f64(i);
                assert!((-1.0..=1.0).contains(&v), "{dtype} {v}");
                assert_eq!(format.from_f32(v as f32), b, "the stored byte is the value's own encoding");
            }
            // arange runs past the largest finite value and saturates there; it never wraps or turns NaN.
            let arange = HostArray::init(dtype, 60000, Values::Arange, 0);
            let max = f64::from(format.to_f32(format.max_bits()));
            assert_eq!(arange.get_f64(59999), max);
            assert!((0..60000).all(|i| arange.get_f64(i).is_finite()));
            let normal = HostArray::init(dtype, 256, Values::Normal { scale: 3.0, offset: 0.0 }, 9);
            assert!((0..256).all(|i| normal.get_f64(i).is_finite()) && normal.summary().min < 0.0);
        }
    }

    #[test]
    fn fp8_outputs_compare_within_one_unit_and_fail_when_wrong() {
        for dtype in [DType::E4m3, DType::E5m2] {
            let tol = default_tolerance(dtype, Some(768));
            let reference = HostArray::init(dtype, 1024, Values::Normal { scale: 4.0, offset: 0.0 }, 11);
            assert!(!compare(&HostArray::poison(dtype, 1024), &reference, 1.0).passed, "NaN poison never passes");
            assert!(!compare(&HostArray::init(dtype, 1024, Values::Zeros, 0), &reference, tol).passed);
            // One unit off on every eighth element: a reordered f32 sum rounding the other way.
            let mut flipped = reference.clone();
            for b in flipped.bytes.iter_mut().step_by(8) {
                if *b & 0x7F != 0 && *b & 0x7F < 0x7B {
                    *b += 1;
                }
            }
            assert!(compare(&flipped, &reference, tol).passed, "{dtype}: {:?}", compare(&flipped, &reference, tol));
            // A quarter of the elements zeroed (a dropped tile) is far out.
            let mut dropped = reference.clone();
            for b in dropped.bytes.iter_mut().take(256) {
                *b = 0;
            }
            assert!(!compare(&dropped, &reference, tol).passed, "{dtype}");
        }
        assert!(default_tolerance(DType::E4m3, Some(768)) < default_tolerance(DType::E5m2, Some(768)));
        assert!(default_tolerance(DType::Bf16, Some(768)) < default_tolerance(DType::E4m3, Some(768)));
    }

    #[test]
    fn integer_outputs_must_match_exactly() {
        let reference = HostArray::init(DType::I32, 8, Values::Arange, 0);
        let mut off = reference.clone();
        off.bytes[0] ^= 1;
        assert!(compare(&reference, &reference, default_tolerance(DType::I32, None)).passed);
        assert!(!compare(&off, &reference, default_tolerance(DType::I32, None)).passed);
    }
}
