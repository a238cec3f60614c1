//! The harnesses' C input generation (`src/harness/common.c`) gives the same bytes as
//! peak's (`HostArray::init`) for every element type and init, distributions, integer
//! ranges and outliers included: the exported harness runs the kernel on peak's inputs.
//! Needs a C compiler (`cc`); skips, saying so, without one.
// Helpers outside #[test] functions unwrap too; clippy's allow-unwrap-in-tests does not reach them here (rust-clippy#13981).
#![allow(clippy::unwrap_used)]

use std::process::Command;

use peak_export::harness::{COMMON_C, host_array_call};
use peak_spec::rng::mix_seed;
use peak_spec::{DType, Fill, HostArray, RowOutliers, Values};

const FLOATS: [DType; 3] = [DType::F32, DType::F16, DType::Bf16];

/// Every init on every type it goes with, each under two seeds.
fn cases() -> Vec<(DType, Fill, u64)> {
    let outliers = |values, row, count, scale| Fill { values, outliers: Some(RowOutliers { row, count, scale }) };
    let mut fills: Vec<(DType, Fill)> = Vec::new();
    for dtype in [DType::F32, DType::F16, DType::Bf16, DType::I32, DType::U32] {
        for values in [Values::Random, Values::Arange, Values::Ones, Values::Zeros] {
            fills.push((dtype, values.into()));
        }
    }
    for dtype in FLOATS {
        fills.extend([
            (dtype, Values::Uniform { scale: 1.0, offset: 0.0 }.into()),
            (dtype, Values::Uniform { scale: 0.3, offset: -7.25 }.into()),
            (dtype, Values::Normal { scale: 1.0, offset: 0.0 }.into()),
            // Tiny values: f16 subnormals and their rounding.
            (dtype, Values::Normal { scale: 1e-5, offset: 0.0 }.into()),
            (dtype, Values::Normal { scale: 2.5, offset: 100.1 }.into()),
            (dtype, outliers(Values::Normal { scale: 1.0, offset: 0.0 }, 100, 2, 20.0)),
            (dtype, outliers(Values::Random, 30, 30, -3.3)),
            (dtype, outliers(Values::Ones, 1, 1, 1e30)),
        ]);
    }
    fills.extend([
        (DType::I32, Values::Integers { lo: 0, hi: 50_257 }.into()),
        (DType::I32, Values::Integers { lo: -2_147_483_648, hi: 2_147_483_648 }.into()),
        (DType::U32, Values::Integers { lo: 3, hi: 4 }.into()),
        (DType::U32, Values::Integers { lo: 0, hi: 4_294_967_296 }.into()),
    ]);
    fills.into_iter().flat_map(|(dtype, fill)| [(dtype, fill, mix_seed(1, "A", 0)), (dtype, fill, mix_seed(7, "B", 0))]).collect()
}

#[test]
fn c_inputs_match_peaks_for_every_type_and_init() {
    let dir = tempfile::tempdir().unwrap();
    let cases = cases();
    // Enough elements that bf16 `random` meets values the legacy conversion rounds down.
    let count = 20_000;
    let mut program = String::from(COMMON_C);
    program.push_str("int main(void) {\n");
    for (dtype, fill, seed) in &cases {
        let call = host_array_call(*dtype, count, fill, *seed);
        program.push_str(&format!("    {{ void *p = {call}; fwrite(p, 1, {}, stdout); free(p); }}\n", count * dtype.size_bytes()));
    }
    program.push_str("    return 0;\n}\n");
    let src = dir.path().join("inputs.c");
    std::fs::write(&src, program).unwrap();
    // -ffp-contract=fast lets the compiler fuse products into additions where the target
    // has FMA: the harness's arithmetic must give peak's bits all the same.
    for flags in [&["-O2"][..], &["-O3", "-march=native", "-ffp-contract=fast"][..]] {
        let Some(stdout) = build_and_run(dir.path(), &src, flags) else { return };
        let mut offset = 0;
        for (dtype, fill, seed) in &cases {
            let expected = HostArray::init(*dtype, count, *fill, *seed).bytes;
            let got = &stdout[offset..offset + expected.len()];
            assert!(got == expected.as_slice(), "{dtype} {fill} seed {seed} ({flags:?}): the harness's inputs differ from peak's");
            offset += expected.len();
        }
        assert_eq!(offset, stdout.len());
    }
}

/// The program's output, or `None` (having said why) where there is no C compiler.
fn build_and_run(dir: &std::path::Path, src: &std::path::Path, flags: &[&str]) -> Option<Vec<u8>> {
    let exe = dir.join("inputs");
    let built = match Command::new("cc").args(flags).args(["-std=c99", "-Wall", "-Wno-unused-function", "-Werror", "-o"]).arg(&exe).arg(src).output() {
        Ok(out) => out,
        Err(e) => {
            eprintln!("SKIPPED c_inputs_match_peaks_for_every_type_and_init: no C compiler `cc` ({e})");
            return None;
        }
    };
    assert!(built.status.success(), "cc {flags:?} failed:\n{}", String::from_utf8_lossy(&built.stderr));
    let out = Command::new(&exe).output().unwrap();
    assert!(out.status.success());
    Some(out.stdout)
}
