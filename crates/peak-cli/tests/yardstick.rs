//! `peak baseline` on a memory-bound kernel: the kernel against a device-to-device copy of
//! the bytes it moves, in the same process (issue 14).

mod support;

use support::{Env, example, opencl_present};

#[test]
fn a_memory_bound_kernel_is_judged_against_a_copy_of_its_bytes() {
    if !opencl_present("a_memory_bound_kernel_is_judged_against_a_copy_of_its_bytes") {
        return;
    }
    let env = Env::new();
    let softmax = example("softmax-opencl");
    let report = env.json(&["baseline", &softmax, "--set", "rows=256", "--set", "cols=256", "--reps", "5", "--json"]);
    // X is read, Y written: 256 x 256 f32 each.
    assert_eq!(report["traffic"]["read_bytes"], 262_144, "{report}");
    assert_eq!(report["traffic"]["written_bytes"], 262_144, "{report}");
    assert_eq!(report["copy_bytes"], 262_144, "a copy of half the bytes moves as many: {report}");
    let (kernel_ms, copy_ms, percent) = (report["kernel_ms"].as_f64().unwrap(), report["copy_ms"].as_f64().unwrap(), report["percent_of_copy"].as_f64().unwrap());
    assert!(kernel_ms > 0.0 && copy_ms > 0.0, "{report}");
    assert!((percent - 100.0 * copy_ms / kernel_ms).abs() < 1e-9, "{report}");

    let wrong = env.peak(&["baseline", &softmax, "--against", "cublaslt"]);
    assert_eq!(wrong.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&wrong.stderr).contains("needs a cuda or hip context"), "{}", String::from_utf8_lossy(&wrong.stderr));
    let unknown = env.peak(&["baseline", &softmax, "--against", "memcpy"]);
    assert_eq!(unknown.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("expected cublaslt or copy"));
}
