//! More real-file shapes for peak new, each on its own fixture (tests/fixtures/import/realistic).
//!
//! A kernel that adds each block's partial into a total with an atomic (`atomicAdd(total,
//! v)`, the array itself as the target, no subscript) reads the total as well as writing
//! it: peak poisons outputs before every run, so the imported launch must start the total
//! from an input of its own each run, as a caller zeroes it before launching. Fixture:
//! tests/fixtures/import/realistic/sum_squares_atomic.cu (written for peak's tests).

use std::path::Path;

use peak_spec::import::{ImportChoices, import_file};
use peak_spec::{Context, Region};

#[test]
fn an_atomic_total_is_updated_in_place_from_its_own_init() {
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/import/realistic/sum_squares_atomic.cu");
    let dir = tempfile::tempdir().unwrap();
    let to = dir.path().join("ctx");
    let choices = ImportChoices {
        sizes: [("x", "count"), ("total", "1")].iter().map(|(a, b)| (a.to_string(), b.to_string())).collect(),
        inputs: [("count".to_string(), vec![1 << 20])].into_iter().collect(),
        ..ImportChoices::default()
    };
    import_file(&file, &to, None, &choices).unwrap_or_else(|e| panic!("{e}"));
    let ctx = Context::load(&to).unwrap();
    let roles: Vec<(&str, bool, bool, &str)> = ctx.manifest.arrays.iter().map(|a| (a.name.as_str(), a.output, a.inout, a.size.as_str())).collect();
    // The total is read (atomically added to) and written: in place, from its own random
    // init, the reference's run too; no copy inside the timed runs.
    assert_eq!(roles, [("x", false, false, "count"), ("total", true, true, "1")]);
    let host = ctx.region(Region::Host);
    assert!(!host.contains("copy("), "{host}");
    assert!(host.contains("The kernel reads total as well as writing it: in place"), "{host}");
}

/// A kernel whose sizes are literals in its code (no integer parameter) gets one thread
/// per row below the literal bound it checks, not one per element of its output with a
/// divisibility constraint. Fixture: tests/fixtures/import/realistic/fixed_size_rows.cu.
#[test]
fn a_kernel_with_sizes_fixed_in_its_code_is_launched_over_its_literal_bound() {
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/import/realistic/fixed_size_rows.cu");
    let dir = tempfile::tempdir().unwrap();
    let to = dir.path().join("ctx");
    let choices = ImportChoices {
        sizes: [("src", "3000 * 777"), ("dst", "3000 * 777")].iter().map(|(a, b)| (a.to_string(), b.to_string())).collect(),
        ..ImportChoices::default()
    };
    import_file(&file, &to, None, &choices).unwrap_or_else(|e| panic!("{e}"));
    let ctx = Context::load(&to).unwrap();
    let host = ctx.region(Region::Host);
    assert!(host.contains("launch(\"row_l1_normalize\", ceil_div(3000, BLOCK_X), BLOCK_X, 0, src, dst);"), "{host}");
    assert!(host.contains("guarded by `r < 3000`"), "{host}");
    assert!(ctx.manifest.constraints.tuning.is_empty(), "no divisibility constraint: {:?}", ctx.manifest.constraints.tuning);
    assert!(!ctx.region(Region::Device).contains("row_l1_normalize_host"), "the C wrapper is host code");
}
