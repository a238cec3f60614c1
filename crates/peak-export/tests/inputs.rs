//! The harnesses' C input generation (`src/harness/common.c`) gives the same bytes as
//! peak's (`HostArray::init`) for every element type and init: the exported harness runs
//! the kernel on peak's inputs. Needs a C compiler (`cc`); skips, saying so, without one.

use std::process::Command;

use peak_spec::rng::mix_seed;
use peak_spec::{DType, HostArray, Init};

#[test]
fn c_inputs_match_peaks_for_every_type_and_init() {
    let dir = tempfile::tempdir().unwrap();
    let cases: Vec<(DType, Init, u64)> = [DType::F32, DType::F16, DType::Bf16, DType::I32, DType::U32]
        .into_iter()
        .flat_map(|d| [(d, Init::Random, mix_seed(1, "A", 0)), (d, Init::Random, mix_seed(7, "B", 0)), (d, Init::Arange, 0), (d, Init::Ones, 0), (d, Init::Zeros, 0)])
        .collect();
    let count = 3000;
    let mut program = String::from(peak_export::harness::COMMON_C);
    program.push_str("int main(void) {\n");
    for (dtype, init, seed) in &cases {
        program.push_str(&format!(
            "    {{ void *p = peak_host_array({}, {count}, {}, {seed}ull); fwrite(p, 1, {}, stdout); free(p); }}\n",
            code(*dtype, "PEAK_"),
            init_code(*init),
            count * dtype.size_bytes()
        ));
    }
    program.push_str("    return 0;\n}\n");
    let src = dir.path().join("inputs.c");
    std::fs::write(&src, program).unwrap();
    let exe = dir.path().join("inputs");
    let built = match Command::new("cc").args(["-O2", "-std=c99", "-Wall", "-Wno-unused-function", "-Werror", "-o"]).arg(&exe).arg(&src).output() {
        Ok(out) => out,
        Err(e) => {
            eprintln!("SKIPPED c_inputs_match_peaks_for_every_type_and_init: no C compiler `cc` ({e})");
            return;
        }
    };
    assert!(built.status.success(), "cc failed:\n{}", String::from_utf8_lossy(&built.stderr));
    let out = Command::new(&exe).output().unwrap();
    assert!(out.status.success());
    let mut offset = 0;
    for (dtype, init, seed) in &cases {
        let expected = HostArray::init(*dtype, count, *init, *seed).bytes;
        let got = &out.stdout[offset..offset + expected.len()];
        assert!(got == expected.as_slice(), "{dtype} {init:?} seed {seed}: the harness's inputs differ from peak's");
        offset += expected.len();
    }
    assert_eq!(offset, out.stdout.len());
}

fn code(d: DType, prefix: &str) -> String {
    format!("{prefix}{}", d.name().to_uppercase())
}

fn init_code(i: Init) -> &'static str {
    match i {
        Init::Zeros => "PEAK_ZEROS",
        Init::Ones => "PEAK_ONES",
        Init::Random => "PEAK_RANDOM",
        Init::Arange => "PEAK_ARANGE",
    }
}
