//! Array inits a user can shape: distributions, outliers per row, integer ranges. What
//! they draw, that a seed reproduces them, that the original inits still give the bytes
//! they gave before, and that a bad setting is an error naming its field.
// Helpers outside #[test] functions unwrap too; clippy's allow-unwrap-in-tests does not reach them here (rust-clippy#13981).
#![allow(clippy::unwrap_used)]

use peak_spec::rng::mix_seed;
use peak_spec::{DType, Fill, HostArray, Init, Manifest, RowOutliers, Values};

/// Digests of the original inits, taken from peak before any other init existed: 4099
/// elements for each type, init and seed. A change here changes every recorded workflow.
const BEFORE: &[(DType, Values, u64, &str)] = &[
    (DType::F32, Values::Random, 17858291362389026028, "61204c86bc1c5050"),
    (DType::F32, Values::Random, 42, "5049a8eca79f4cb1"),
    (DType::F32, Values::Ones, 42, "ff73e6ede165b438"),
    (DType::F32, Values::Zeros, 42, "d6df803752925b26"),
    (DType::F32, Values::Arange, 42, "839a40c0114f33cd"),
    (DType::F16, Values::Random, 17858291362389026028, "92f386bbc0e865d4"),
    (DType::F16, Values::Random, 42, "eb9b2cb9e3f6fa5f"),
    (DType::F16, Values::Ones, 42, "37e002a6a054061b"),
    (DType::F16, Values::Zeros, 42, "0ac9a00b78e66765"),
    (DType::F16, Values::Arange, 42, "f59b615d1f65a3df"),
    (DType::Bf16, Values::Random, 17858291362389026028, "4b4db3d178f0b4cb"),
    (DType::Bf16, Values::Random, 42, "67996b8ee00ab4c8"),
    (DType::Bf16, Values::Ones, 42, "7ab2ac4334a80476"),
    (DType::Bf16, Values::Zeros, 42, "0ac9a00b78e66765"),
    (DType::Bf16, Values::Arange, 42, "4d83908826821290"),
    (DType::I32, Values::Random, 17858291362389026028, "8d4289ebadac8aad"),
    (DType::I32, Values::Random, 42, "8651e2d29498f610"),
    (DType::I32, Values::Ones, 42, "ab809db59680a4d7"),
    (DType::I32, Values::Zeros, 42, "d6df803752925b26"),
    (DType::I32, Values::Arange, 42, "110bd666e16da55d"),
    (DType::U32, Values::Random, 17858291362389026028, "8be1de697b6ddcc6"),
    (DType::U32, Values::Random, 42, "a2685a3f0e4e20ec"),
    (DType::U32, Values::Ones, 42, "ab809db59680a4d7"),
    (DType::U32, Values::Zeros, 42, "d6df803752925b26"),
    (DType::U32, Values::Arange, 42, "110bd666e16da55d"),
];

#[test]
fn the_original_inits_give_the_bytes_they_always_gave() {
    assert_eq!(mix_seed(1, "A", 0), 17858291362389026028);
    for (dtype, values, seed, digest) in BEFORE {
        assert_eq!(HostArray::init(*dtype, 4099, *values, *seed).digest(), *digest, "{dtype} {values:?} seed {seed}");
    }
    // Read from a manifest, they are still the plain variants and fill the same way.
    let manifest = parse(&manifest_with(
        r#"name = "X"
type = "bf16"
size = "n"
init = "random""#,
    ))
    .unwrap();
    assert_eq!(manifest.arrays[1].init, Init::Random);
    assert_eq!(fill(&manifest, 1, 4099), Fill::from(Values::Random));
}

fn values(array: &HostArray) -> Vec<f64> {
    (0..array.len()).map(|i| array.get_f64(i)).collect()
}

fn mean_and_std(v: &[f64]) -> (f64, f64) {
    let mean = v.iter().sum::<f64>() / v.len() as f64;
    let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / v.len() as f64;
    (mean, var.sqrt())
}

#[test]
fn normal_values_have_the_mean_and_spread_asked_for() {
    let n = 400_000;
    let v = values(&HostArray::init(DType::F32, n, Values::Normal { scale: 2.0, offset: 3.0 }, 11));
    let (mean, std) = mean_and_std(&v);
    // The standard error of the mean is 2 / sqrt(n) = 0.0032; of the deviation about 0.0022.
    assert!((mean - 3.0).abs() < 0.015, "mean {mean}");
    assert!((std - 2.0).abs() < 0.012, "standard deviation {std}");
    // Tails as a normal's: 0.27% beyond three deviations, none absurdly far.
    let beyond = v.iter().filter(|x| ((*x - 3.0) / 2.0).abs() > 3.0).count() as f64 / n as f64;
    assert!((0.0020..0.0035).contains(&beyond), "{beyond} beyond 3 sigma");
    assert!(v.iter().all(|x| ((x - 3.0) / 2.0).abs() < 8.0));
    // Symmetric: as many below the mean as above.
    let below = v.iter().filter(|x| **x < 3.0).count() as f64 / n as f64;
    assert!((below - 0.5).abs() < 0.005, "{below} below the mean");
}

#[test]
fn uniform_values_fill_offset_to_offset_plus_scale() {
    let n = 400_000;
    let v = values(&HostArray::init(DType::F32, n, Values::Uniform { scale: 4.0, offset: -1.0 }, 5));
    let (mean, std) = mean_and_std(&v);
    assert!((mean - 1.0).abs() < 0.01, "mean {mean}");
    assert!((std - 4.0 / 12f64.sqrt()).abs() < 0.01, "standard deviation {std}");
    assert!(v.iter().all(|x| (-1.0..3.0).contains(x)));
    // Every quarter of the interval gets its share.
    for q in 0..4 {
        let lo = -1.0 + f64::from(q);
        let share = v.iter().filter(|x| (lo..lo + 1.0).contains(*x)).count() as f64 / n as f64;
        assert!((share - 0.25).abs() < 0.005, "quarter {q}: {share}");
    }
}

#[test]
fn outliers_scale_exactly_count_entries_of_every_row() {
    let (rows, row, count) = (300, 64, 3);
    let base = Values::Normal { scale: 1.0, offset: 0.0 };
    let plain = HostArray::init(DType::F32, rows * row, base, 9);
    let spiked = HostArray::init(DType::F32, rows * row, Fill { values: base, outliers: Some(RowOutliers { row, count, scale: 20.0 }) }, 9);
    let mut positions = std::collections::HashSet::new();
    for r in 0..rows {
        let changed: Vec<usize> = (r * row..(r + 1) * row).filter(|&i| plain.get_f64(i) != spiked.get_f64(i)).collect();
        assert_eq!(changed.len(), count, "row {r}");
        for &i in &changed {
            // The entry is the value it would have had, times the scale.
            assert_eq!(spiked.get_f64(i), f64::from((plain.get_f64(i) * 20.0) as f32));
            positions.insert(i % row);
        }
    }
    // The places move from row to row.
    assert!(positions.len() > row / 2, "only columns {positions:?} were chosen");
    // A whole row may be chosen.
    let all = HostArray::init(DType::F16, 8 * 4, Fill { values: Values::Ones, outliers: Some(RowOutliers { row: 4, count: 4, scale: -2.0 }) }, 1);
    assert!(values(&all).iter().all(|x| *x == -2.0));
}

#[test]
fn integer_ranges_stay_inside_lo_to_hi() {
    let v = values(&HostArray::init(DType::I32, 50_000, Values::Integers { lo: -3, hi: 4 }, 2));
    assert!(v.iter().all(|x| (-3.0..4.0).contains(x)));
    // Both ends are drawn, the high end never: [lo, hi).
    for k in -3..4 {
        let share = v.iter().filter(|x| **x == f64::from(k)).count() as f64 / v.len() as f64;
        assert!((share - 1.0 / 7.0).abs() < 0.01, "{k}: {share}");
    }
    let labels = HostArray::init(DType::U32, 10_000, Values::Integers { lo: 0, hi: 50_257 }, 3);
    assert!(values(&labels).iter().all(|x| (0.0..50_257.0).contains(x)));
    let wide = HostArray::init(DType::U32, 10_000, Values::Integers { lo: 0, hi: 1 << 32 }, 3);
    assert!(values(&wide).iter().any(|x| *x > f64::from(1u32 << 31)));
}

#[test]
fn a_seed_gives_the_same_values_and_another_seed_others() {
    let fills = [
        Fill::from(Values::Normal { scale: 1.0, offset: 0.0 }),
        Fill::from(Values::Uniform { scale: 1.0, offset: 0.0 }),
        Fill::from(Values::Integers { lo: 0, hi: 10 }),
        Fill { values: Values::Ones, outliers: Some(RowOutliers { row: 16, count: 1, scale: 5.0 }) },
    ];
    for fill in fills {
        let dtype = if matches!(fill.values, Values::Integers { .. }) { DType::I32 } else { DType::Bf16 };
        let a = HostArray::init(dtype, 1024, fill, 7);
        assert_eq!(a, HostArray::init(dtype, 1024, fill, 7), "{fill}");
        assert_ne!(a, HostArray::init(dtype, 1024, fill, 8), "{fill}");
    }
}

fn manifest_with(array: &str) -> String {
    format!(
        "[kernel]\nname = \"k\"\nbackend = \"opencl\"\nsource = \"k.cl\"\n\n[inputs]\nn = {{ values = [64] }}\ncols = {{ values = [16] }}\nV = {{ values = [1000] }}\n\n[[arrays]]\nname = \"Y\"\ntype = \"f32\"\nsize = \"n\"\ninit = \"zeros\"\noutput = true\n\n[[arrays]]\n{array}\n"
    )
}

fn parse(text: &str) -> Result<Manifest, String> {
    Manifest::parse("peak.toml", text).map_err(|e| e.to_string())
}

/// An array's fill at n = 64, cols = 16, V = 1000.
fn fill(manifest: &Manifest, array: usize, count: usize) -> Fill {
    let inputs = |name: &str| match name {
        "n" => Ok(64),
        "cols" => Ok(16),
        "V" => Ok(1000),
        other => Err(format!("no input {other}")),
    };
    let spec = &manifest.arrays[array];
    spec.init.fill(spec.dtype, count, &mut |text| inputs(text.trim())).unwrap()
}

#[test]
fn the_manifest_reads_and_writes_the_new_keys() {
    let softmax = parse(&manifest_with(
        r#"name = "X"
type = "f32"
size = "n * cols"
init = "normal"
scale = 0.5
offset = 1.0
outliers = { row = "cols", count = 2, scale = 20.0 }
seed = 3"#,
    ))
    .unwrap();
    let expected = Fill { values: Values::Normal { scale: 0.5, offset: 1.0 }, outliers: Some(RowOutliers { row: 16, count: 2, scale: 20.0 }) };
    assert_eq!(fill(&softmax, 1, 64 * 16), expected);

    let labels = parse(&manifest_with("name = \"L\"\ntype = \"i32\"\nsize = \"n\"\ninit = \"random\"\nrange = [0, \"V\"]")).unwrap();
    assert_eq!(fill(&labels, 1, 64), Fill::from(Values::Integers { lo: 0, hi: 1000 }));

    // Defaults: uniform in [0, 1).
    let uniform = parse(&manifest_with("name = \"U\"\ntype = \"f16\"\nsize = \"n\"\ninit = \"uniform\"")).unwrap();
    assert_eq!(fill(&uniform, 1, 64), Fill::from(Values::Uniform { scale: 1.0, offset: 0.0 }));

    for manifest in [softmax, labels, uniform] {
        let again = parse(&manifest.to_toml()).unwrap();
        assert_eq!(again, manifest);
    }
}

/// Loading `array` as the second array fails with an error naming `field` and saying `what`.
fn assert_refused(array: &str, field: &str, what: &str) {
    let err = parse(&manifest_with(array)).expect_err(array);
    assert!(err.starts_with("peak.toml: "), "{err}");
    assert!(err.contains(field), "expected the field {field} in: {err}");
    assert!(err.contains(what), "expected `{what}` in: {err}");
}

#[test]
fn bad_settings_are_errors_naming_the_field() {
    let head = |dtype: &str, init: &str| format!("name = \"X\"\ntype = \"{dtype}\"\nsize = \"n * cols\"\ninit = \"{init}\"\n");
    assert_refused(&(head("f32", "zeros") + "scale = 2.0"), "arrays[1].scale (array X)", "goes with `init = \"uniform\"` or `\"normal\"`, not `\"zeros\"`");
    assert_refused(&(head("f32", "random") + "offset = 1.0"), "arrays[1].offset", "not `\"random\"`");
    assert_refused(&(head("f32", "normal") + "scale = -1.0"), "arrays[1].scale", "must be a positive number, got -1");
    assert_refused(&(head("f32", "normal") + "offset = nan"), "arrays[1].offset", "must be a finite number");
    assert_refused(&head("i32", "normal"), "arrays[1].init", "draws floats and the array is i32");
    assert_refused(&(head("f32", "random") + "range = [0, 10]"), "arrays[1].range", "draws integers and the array is f32");
    assert_refused(&(head("i32", "arange") + "range = [0, 10]"), "arrays[1].range", "goes with `init = \"random\"`");
    assert_refused(&(head("i32", "random") + "range = [5, 5]"), "arrays[1].range", "[5, 5) holds no integer");
    assert_refused(&(head("u32", "random") + "range = [-1, 5]"), "arrays[1].range", "does not fit u32");
    assert_refused(&(head("i32", "random") + "range = [0, \"W\"]"), "arrays[1].range[1]", "Undefined variable: W");
    assert_refused(&(head("i32", "random") + "outliers = { row = 4, count = 1, scale = 2.0 }"), "arrays[1].outliers", "float arrays and the array is i32");
    assert_refused(&(head("f32", "zeros") + "outliers = { row = 4, count = 1, scale = 2.0 }"), "arrays[1].outliers", "zeros stay zero");
    assert_refused(
        &(head("f32", "normal") + "outliers = { row = 4, count = 5, scale = 2.0 }"),
        "arrays[1].outliers.count",
        "5 entries per row, but a row has 4 elements",
    );
    assert_refused(&(head("f32", "normal") + "outliers = { row = 4, count = 0, scale = 2.0 }"), "arrays[1].outliers.count", "at least 1");
    assert_refused(&(head("f32", "normal") + "outliers = { row = 0, count = 1, scale = 2.0 }"), "arrays[1].outliers.row", "at least 1, got 0");
    assert_refused(&(head("f32", "normal") + "outliers = { row = \"rows\", count = 1, scale = 2.0 }"), "arrays[1].outliers.row", "Undefined variable: rows");
    assert_refused(&(head("f32", "normal") + "outliers = { row = 4, count = 1, scale = inf }"), "arrays[1].outliers.scale", "finite");
    // Misspelt or mistyped keys are serde's errors, with the line.
    assert_refused(&(head("f32", "normal") + "outliers = { row = 4, count = 1, scael = 2.0 }"), "line", "unknown field `scael`");
    assert_refused(&(head("f32", "normal") + "sclae = 2.0"), "line", "unknown field `sclae`");
    assert_refused(&(head("i32", "random") + "range = [0, 1.5]"), "line", "an integer, or an expression over the scalar inputs");
    assert_refused(&(head("f32", "gaussian")), "line", "unknown variant `gaussian`");
}

#[test]
fn values_the_inputs_give_are_checked_when_the_array_is_sized() {
    let eval = |v: i64| move |_: &str| -> Result<i64, String> { Ok(v) };
    let manifest =
        parse(&manifest_with("name = \"X\"\ntype = \"f32\"\nsize = \"n * cols\"\ninit = \"ones\"\noutliers = { row = \"cols\", count = 3, scale = 2.0 }"))
            .unwrap();
    let init = manifest.arrays[1].init;
    assert!(init.fill(DType::F32, 64, &mut eval(16)).is_ok());
    let err = init.fill(DType::F32, 64, &mut eval(2)).unwrap_err();
    assert!(err.contains("`outliers.count` is 3 but a row (`outliers.row = \"cols\"`) has 2 elements"), "{err}");
    let err = init.fill(DType::F32, 60, &mut eval(16)).unwrap_err();
    assert!(err.contains("60 elements are not a whole number of rows of 16"), "{err}");
    let err = init.fill(DType::F32, 64, &mut eval(0)).unwrap_err();
    assert!(err.contains("a row needs at least one element"), "{err}");

    let labels = parse(&manifest_with("name = \"L\"\ntype = \"i32\"\nsize = \"n\"\ninit = \"random\"\nrange = [0, \"V\"]")).unwrap();
    let init = labels.arrays[1].init;
    let err = init.fill(DType::I32, 64, &mut eval(0)).unwrap_err();
    assert!(err.contains("`range = [0, \"V\"]` here: [0, 0) holds no integer"), "{err}");
    let err = init.fill(DType::I32, 64, &mut eval(1 << 40)).unwrap_err();
    assert!(err.contains("does not fit i32"), "{err}");
}
