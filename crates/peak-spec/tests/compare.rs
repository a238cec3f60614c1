//! `compare` and `compare_bytes` (one type match, then a loop over `chunks_exact`) against
//! a plain reading of their definition that decodes element by element with `get_f64`:
//! random arrays of every element type, with NaN, infinities, poison, signed zeros and
//! near-equal values mixed in, must give the same `Comparison` to the bit.

use half::{bf16, f16};
use peak_spec::{Comparison, DType, HostArray, compare, compare_bytes};
use proptest::prelude::*;
use proptest::test_runner::Config;

/// The definition, element by element: relative L2 error over finite reference values,
/// per-element error against max(|ref|, RMS of the reference), non-finite outputs where
/// the reference differs counted and the first of them made the worst; where the
/// reference is poison (never written), a match if the output is too, else counted.
fn plain(out: &HostArray, reference: &HostArray, tolerance: f64) -> Comparison {
    let n = out.len();
    assert_eq!(n, reference.len());
    let mut ref_sq = 0.0;
    for i in 0..n {
        let r = reference.get_f64(i);
        if r.is_finite() {
            ref_sq += r * r;
        }
    }
    let scale = if n > 0 { (ref_sq / n as f64).sqrt().max(f64::MIN_POSITIVE) } else { 1.0 };
    let (mut diff_sq, mut sum_err, mut max_err, mut worst) = (0.0, 0.0, 0.0, 0usize);
    let (mut non_finite, mut first_non_finite) = (0usize, None);
    let size = out.dtype.size_bytes();
    let poison = HostArray::poison_pattern(out.dtype);
    for i in 0..n {
        // Padding the reference never writes: a match left unwritten, a failure written.
        if reference.bytes[i * size..(i + 1) * size] == poison[..] {
            if out.bytes[i * size..(i + 1) * size] != poison[..] {
                non_finite += 1;
                if first_non_finite.is_none() {
                    first_non_finite = Some(i);
                }
            }
            continue;
        }
        let (o, r) = (out.get_f64(i), reference.get_f64(i));
        if !o.is_finite() && o != r {
            non_finite += 1;
            if first_non_finite.is_none() {
                first_non_finite = Some(i);
            }
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
    Comparison {
        relative_error,
        tolerance,
        max_error: max_err,
        mean_error: if n > 0 { sum_err / n as f64 } else { 0.0 },
        worst_index: worst,
        worst_value: if n > 0 { out.get_f64(worst) } else { 0.0 },
        worst_expected: if n > 0 { reference.get_f64(worst) } else { 0.0 },
        non_finite,
        first_non_finite,
        passed: non_finite == 0 && relative_error <= tolerance,
    }
}

/// Field by field, floating-point fields by their bits, any NaN equal to any NaN: which
/// payload an operation on two NaNs keeps is unspecified in Rust (LLVM may swap the
/// operands of an addition), so it changes with the code generated around the loop.
fn same(a: &Comparison, b: &Comparison) -> bool {
    let bits = |c: &Comparison| {
        [c.relative_error, c.tolerance, c.max_error, c.mean_error, c.worst_value, c.worst_expected]
            .map(|v| if v.is_nan() { f64::NAN.to_bits() } else { v.to_bits() })
    };
    bits(a) == bits(b) && (a.worst_index, a.non_finite, a.first_non_finite, a.passed) == (b.worst_index, b.non_finite, b.first_non_finite, b.passed)
}

const DTYPES: [DType; 7] = DType::ALL;

/// One element's bytes, from a value.
fn encode(dtype: DType, value: f64) -> Vec<u8> {
    match dtype {
        DType::F32 => (value as f32).to_le_bytes().to_vec(),
        DType::F16 => f16::from_f64(value).to_le_bytes().to_vec(),
        DType::Bf16 => bf16::from_f64(value).to_le_bytes().to_vec(),
        DType::I32 => (value as i32).to_le_bytes().to_vec(),
        DType::U32 => (value as u32).to_le_bytes().to_vec(),
        DType::E4m3 => vec![peak_spec::fp8::E4M3.from_f32(value as f32)],
        DType::E5m2 => vec![peak_spec::fp8::E5M2.from_f32(value as f32)],
    }
}

/// How an output element is made from its reference element.
#[derive(Debug, Clone)]
enum Make {
    Same,
    /// The lowest bit flipped: one unit in the last place.
    Ulp,
    /// Bits as drawn (NaNs and infinities among them for floats).
    Bits(u32),
    Value(f64),
    Poison,
}

fn special() -> impl Strategy<Value = f64> {
    prop_oneof![
        Just(f64::NAN),
        Just(f64::INFINITY),
        Just(f64::NEG_INFINITY),
        Just(0.0),
        Just(-0.0),
        Just(1.0),
        Just(-1e-30),
        Just(65504.0),
        Just(3.0e38),
        Just(2147483647.0),
        -1e6..1e6f64,
        -1.0..1.0f64,
    ]
}

/// A reference element: drawn bits or a value.
fn reference_element() -> impl Strategy<Value = Make> {
    prop_oneof![3 => (-1.0..1.0f64).prop_map(Make::Value), 1 => special().prop_map(Make::Value), 1 => any::<u32>().prop_map(Make::Bits)]
}

fn output_element() -> impl Strategy<Value = Make> {
    prop_oneof![
        4 => Just(Make::Same),
        2 => Just(Make::Ulp),
        1 => any::<u32>().prop_map(Make::Bits),
        1 => special().prop_map(Make::Value),
        1 => Just(Make::Poison),
    ]
}

fn element(dtype: DType, make: &Make, reference: &[u8]) -> Vec<u8> {
    let size = dtype.size_bytes();
    match make {
        Make::Same => reference.to_vec(),
        Make::Ulp => {
            let mut b = reference.to_vec();
            b[0] ^= 1;
            b
        }
        Make::Bits(bits) => bits.to_le_bytes()[..size].to_vec(),
        Make::Value(v) => encode(dtype, *v),
        Make::Poison => HostArray::poison_pattern(dtype),
    }
}

#[derive(Debug, Clone)]
struct Case {
    dtype: DType,
    reference: Vec<Make>,
    output: Vec<Make>,
    tolerance: f64,
    /// Stray bytes after the last whole element, which neither reading counts.
    tail: (usize, usize),
}

fn case() -> impl Strategy<Value = Case> {
    let tolerance = prop_oneof![Just(0.0), Just(1e-5), Just(1e-2), Just(1.0), Just(f64::INFINITY), 0.0..0.1f64];
    (0..DTYPES.len(), 0usize..80, tolerance, 0usize..4, 0usize..4).prop_flat_map(|(d, n, tolerance, t0, t1)| {
        let dtype = DTYPES[d];
        let size = dtype.size_bytes();
        (proptest::collection::vec(reference_element(), n), proptest::collection::vec(output_element(), n)).prop_map(move |(reference, output)| Case {
            dtype,
            reference,
            output,
            tolerance,
            tail: (t0 % size, t1 % size),
        })
    })
}

fn arrays(case: &Case) -> (HostArray, HostArray) {
    let dtype = case.dtype;
    let size = dtype.size_bytes();
    let mut reference = Vec::new();
    for make in &case.reference {
        reference.extend(element(dtype, make, &[0; 4][..size]));
    }
    let mut out = Vec::new();
    for (i, make) in case.output.iter().enumerate() {
        out.extend(element(dtype, make, &reference[i * size..(i + 1) * size]));
    }
    out.extend(std::iter::repeat_n(0xA5, case.tail.0));
    reference.extend(std::iter::repeat_n(0x5A, case.tail.1));
    (HostArray { dtype, bytes: out }, HostArray { dtype, bytes: reference })
}

proptest! {
    #![proptest_config(Config { cases: 1000, failure_persistence: None, ..Config::default() })]

    #[test]
    fn the_fast_comparison_is_the_definition(case in case()) {
        let (out, reference) = arrays(&case);
        let want = plain(&out, &reference, case.tolerance);
        let got = compare(&out, &reference, case.tolerance);
        prop_assert!(same(&got, &want), "compare: {got:?}\nthe definition: {want:?}");
        let borrowed = compare_bytes(case.dtype, &out.bytes, &reference.bytes, case.tolerance);
        prop_assert!(same(&borrowed, &want), "compare_bytes: {borrowed:?}\nthe definition: {want:?}");
    }
}

/// Every kind of element the generator mixes shows up in some case, so the property above
/// is not passing on tame arrays only.
#[test]
fn poison_nan_and_infinities_are_covered() {
    for dtype in [DType::F32, DType::F16, DType::Bf16] {
        let reference = HostArray::init(dtype, 6, peak_spec::Values::Random, 9);
        let mut out = reference.clone();
        let size = dtype.size_bytes();
        out.bytes[size..2 * size].copy_from_slice(&HostArray::poison_pattern(dtype));
        out.bytes[3 * size..4 * size].copy_from_slice(&encode(dtype, f64::INFINITY));
        let got = compare_bytes(dtype, &out.bytes, &reference.bytes, 1.0);
        assert!(same(&got, &plain(&out, &reference, 1.0)), "{got:?}");
        assert_eq!((got.non_finite, got.first_non_finite, got.worst_index, got.passed), (2, Some(1), 1, false));
        assert!(got.max_error.is_infinite() && got.worst_value.is_nan());
    }
    // The same non-finite value on both sides is no error.
    let inf = HostArray::filled(DType::F32, 3, f64::INFINITY);
    let c = compare(&inf, &inf, 0.0);
    assert!(same(&c, &plain(&inf, &inf, 0.0)) && c.passed && c.non_finite == 0, "{c:?}");
}
