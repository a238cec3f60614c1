//! `peak export --dispatch` (issue 25, item 4): a workflow tuned at two sizes exports one
//! kernel file, `dispatch.h` with both sizes' best configurations, and a harness that runs
//! each size at the configuration `peak_dispatch` picks; built with `cc -lOpenCL` and run on
//! PoCL, its outputs are `peak run`'s at each size and configuration. The same for the NT
//! GEMM with a bias at three named shapes (`[[shapes]]`), tuned by tune, init and retune.
//! Skips, saying why, without PoCL, a C compiler or the OpenCL headers.
// Helpers outside #[test] functions unwrap too; clippy's allow-unwrap-in-tests does not reach them here (rust-clippy#13981).
#![allow(clippy::unwrap_used)]

mod support;

use std::path::Path;
use std::process::Command;

use peak_spec::{DType, HostArray};
use support::{Env, opencl_present, s};

/// A kernel whose indexing is written with its tuning parameter: built with one BLOCK and
/// launched with another, it writes the wrong elements. The constraints leave exactly one
/// BLOCK per size (a multiple of 8 groups that is fewer than 16: BLOCK 8 at n = 64, 16 at
/// n = 128), so the record's best differs between the sizes whatever the timings.
fn context(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    let device = "__kernel void scale(__global const float* X, __global float* Y, int n) {\n    int i = get_group_id(0) * BLOCK + get_local_id(0);\n    if (i < n) Y[i] = 2.0f * X[i] + 1.0f;\n}\n";
    let host = "launch(\"scale\", [n / BLOCK], [BLOCK], 0, X, Y, n);\n";
    std::fs::write(dir.join("scale.cl"), format!("// @peak macros\n// @peak device\n{device}// @peak host\n{host}")).unwrap();
    std::fs::write(
        dir.join("peak.toml"),
        "[kernel]\nname = \"scale\"\nbackend = \"opencl\"\nsource = \"scale.cl\"\n\n[inputs]\nn = { values = [64, 128] }\n\n[[arrays]]\nname = \"X\"\ntype = \"f32\"\nsize = \"n\"\ninit = \"random\"\nseed = 3\n\n[[arrays]]\nname = \"Y\"\ntype = \"f32\"\nsize = \"n\"\ninit = \"zeros\"\noutput = true\n\n[tuning]\nBLOCK = { values = [4, 8, 16] }\n\n[constraints]\ntuning = [\"n % (BLOCK * 8) == 0\", \"BLOCK * 16 > n\"]\n",
    )
    .unwrap();
}

/// A C compiler that builds against OpenCL, or the reason there is none.
fn cc_opencl(test: &str) -> bool {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("probe.c");
    std::fs::write(
        &src,
        "#define CL_TARGET_OPENCL_VERSION 120\n#include <CL/cl.h>\nint main(void) { cl_uint n; return clGetPlatformIDs(0, 0, &n) != CL_SUCCESS; }\n",
    )
    .unwrap();
    match Command::new("cc").arg(&src).arg("-o").arg(dir.path().join("probe")).arg("-lOpenCL").output() {
        Ok(out) if out.status.success() => true,
        Ok(out) => {
            eprintln!(
                "SKIPPED {test}: cc cannot build against OpenCL (scripts/install-deps.sh): {}",
                String::from_utf8_lossy(&out.stderr).lines().next().unwrap_or_default()
            );
            false
        }
        Err(e) => {
            eprintln!("SKIPPED {test}: no C compiler `cc` ({e})");
            false
        }
    }
}

#[test]
fn a_workflow_tuned_at_two_sizes_exports_one_kernel_with_a_dispatch_table() {
    let test = "a_workflow_tuned_at_two_sizes_exports_one_kernel_with_a_dispatch_table";
    if !opencl_present(test) || !cc_opencl(test) {
        return;
    }
    let env = Env::new();
    let ctx = env.path("scale");
    context(&ctx);
    let wf = env.path("wf");
    env.ok(&["init", s(&wf), "--from", s(&ctx), "--samples", "2"]);

    // The record holds each size's best; a plain export says --dispatch would take both.
    let plain = env.ok(&["export", "HEAD", "-w", s(&wf), "--to", &env.arg("plain")]);
    assert!(plain.contains("the record tuned 2 shapes; --dispatch"), "{plain}");
    let refused = env.peak(&["export", "HEAD", "-w", s(&wf), "--to", &env.arg("x"), "--dispatch", "--set", "n=64"]);
    assert_eq!(refused.status.code(), Some(2), "{}", String::from_utf8_lossy(&refused.stderr));

    let out = env.path("out");
    let report = env.json(&["export", "HEAD", "-w", s(&wf), "--to", s(&out), "--dispatch", "--json"]);
    let table = &report["dispatch"];
    assert_eq!(table["configs"], serde_json::json!([{"BLOCK": 8}, {"BLOCK": 16}]), "{report}");
    let shapes: Vec<(i64, u64)> =
        table["shapes"].as_array().unwrap().iter().map(|s| (s["params"]["inputs"]["n"].as_i64().unwrap(), s["config"].as_u64().unwrap())).collect();
    assert_eq!(shapes, [(64, 0), (128, 1)]);
    let files: Vec<&str> = report["files"].as_array().unwrap().iter().map(|f| f.as_str().unwrap()).collect();
    assert_eq!(files, ["scale.cl", "dispatch.h", "harness.c", "build.sh", "Makefile", "README.txt"]);

    // One kernel file (its defaults the overall best), both configurations in the table.
    let kernel = std::fs::read_to_string(out.join("scale.cl")).unwrap();
    assert_eq!(kernel.matches("__kernel void scale").count(), 1, "{kernel}");
    let header = std::fs::read_to_string(out.join("dispatch.h")).unwrap();
    assert!(header.contains("\"-D BLOCK=8\", /* 0 */") && header.contains("\"-D BLOCK=16\", /* 1 */"), "{header}");
    assert!(header.contains("{ { 64LL }, 0, ") && header.contains("{ { 128LL }, 1, "), "{header}");
    assert!(header.contains("case 0: { const long long BLOCK = 8LL; (void)BLOCK; return (n % ( BLOCK * 8LL ) == 0LL) && (BLOCK * 16LL > n); }"), "{header}");

    // Built and run: each size at the configuration peak_dispatch picks, outputs as peak run's.
    let built = Command::new("sh").arg(out.join("build.sh")).output().unwrap();
    assert!(built.status.success(), "build.sh failed:\n{}", String::from_utf8_lossy(&built.stderr));
    let ran = Command::new(out.join("harness")).args(["--warmup", "1", "--reps", "2", "--dump"]).arg(&out).output().unwrap();
    let stdout = String::from_utf8_lossy(&ran.stdout);
    assert!(ran.status.success(), "the harness failed:\n{stdout}\n{}", String::from_utf8_lossy(&ran.stderr));
    assert!(stdout.contains("shape n=64: configuration 0 (BLOCK=8)") && stdout.contains("shape n=128: configuration 1 (BLOCK=16)"), "{stdout}");
    assert_eq!(stdout.matches("median_ms: ").count(), 2, "{stdout}");
    for (n, block) in [(64, 8), (128, 16)] {
        let run = env.json(&[
            "run",
            s(&wf.join("context")),
            "--set",
            &format!("n={n}"),
            "--set",
            &format!("BLOCK={block}"),
            "--reps",
            "1",
            "--warmup",
            "0",
            "--json",
        ]);
        let digest = run["outputs"][0]["digest"].as_str().unwrap();
        let bytes = std::fs::read(out.join(format!("Y.n={n}.bin"))).unwrap();
        assert_eq!(HostArray { dtype: DType::F32, bytes }.digest(), digest, "n = {n}: the dispatch harness's output differs from peak run's");
    }

    // A size that was not tuned: no configuration is valid at n = 256 (the constraints), so
    // peak_dispatch says -1; at n = 64 and 128, their own.
    let probe = out.join("probe.c");
    std::fs::write(
        &probe,
        "#include <stdio.h>\n#include \"dispatch.h\"\nint main(void) { long long a[1] = {64}, b[1] = {128}, c[1] = {256}; printf(\"%d %d %d\\n\", peak_dispatch(a), peak_dispatch(b), peak_dispatch(c)); return 0; }\n",
    )
    .unwrap();
    let exe = out.join("probe");
    let compiled = Command::new("cc").arg(&probe).arg("-o").arg(&exe).output().unwrap();
    assert!(compiled.status.success(), "{}", String::from_utf8_lossy(&compiled.stderr));
    assert_eq!(String::from_utf8_lossy(&Command::new(&exe).output().unwrap().stdout).trim(), "0 1 -1");
}

/// `ctx` (a copy of an example) with its inputs replaced by named shapes of (M, N, K).
fn with_shapes(ctx: &Path, shapes: &[(i64, i64, i64)]) {
    let mut context = peak_spec::Context::load(ctx).unwrap();
    context.manifest.inputs.clear();
    context.manifest.shapes =
        shapes.iter().map(|&(m, n, k)| [("M".to_string(), m), ("N".to_string(), n), ("K".to_string(), k)].into_iter().collect()).collect();
    context.save(ctx).unwrap();
}

/// Named shapes (issue 25, item 4): the OpenCL NT GEMM with a bias at three small odd
/// shapes, given as `[[shapes]]`, is tuned at exactly those (init, tune, retune: one run
/// each, in order, not the 27 of their product), `--set` keeps or refuses shapes by name,
/// and the dispatch export runs each shape at its own best, its outputs `peak run`'s.
#[test]
fn named_shapes_are_tuned_one_by_one_and_exported_with_a_dispatch_table() {
    let test = "named_shapes_are_tuned_one_by_one_and_exported_with_a_dispatch_table";
    if !opencl_present(test) || !cc_opencl(test) {
        return;
    }
    let env = Env::new();
    let ctx = env.path("gemm");
    std::fs::create_dir_all(&ctx).unwrap();
    for file in ["peak.toml", "kernel.cl"] {
        std::fs::copy(Path::new(&support::example("gemm-nt-bias-opencl")).join(file), ctx.join(file)).unwrap();
    }
    let shapes = [(61, 47, 33), (100, 37, 129), (17, 200, 65)];
    with_shapes(&ctx, &shapes);
    let written = std::fs::read_to_string(ctx.join("peak.toml")).unwrap();
    assert!(written.contains("[[shapes]]") && !written.contains("[inputs]"), "{written}");
    let mkn = |v: &serde_json::Value| (v["M"].as_i64().unwrap(), v["N"].as_i64().unwrap(), v["K"].as_i64().unwrap());

    // peak tune: one winner per shape; --set keeps the shapes with that value, or names them.
    let tuned = env.json(&["tune", s(&ctx), "--budget", "3", "--json"]);
    assert_eq!(tuned["winners"].as_array().unwrap().iter().map(|w| mkn(&w["params"]["inputs"])).collect::<Vec<_>>(), shapes);
    let one = env.json(&["tune", s(&ctx), "--budget", "3", "--set", "M=100", "--json"]);
    assert_eq!(one["winners"].as_array().unwrap().iter().map(|w| mkn(&w["params"]["inputs"])).collect::<Vec<_>>(), [shapes[1]]);
    let refused = env.peak(&["tune", s(&ctx), "--set", "M=5"]);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("no named shape has M = 5") && stderr.contains("(K=129 M=100 N=37)"), "{stderr}");

    // init and retune record each shape's best, in order.
    let wf = env.path("wf");
    env.ok(&["init", s(&wf), "--from", s(&ctx), "--samples", "2", "--budget", "4"]);
    env.ok(&["retune", "-w", s(&wf), "--budget", "3"]);
    for rev in ["root", "HEAD"] {
        let shown = env.json(&["show", rev, "-w", s(&wf), "--json"]);
        let runs = shown["performance"]["runs"].as_array().unwrap();
        assert_eq!(runs.iter().map(|r| mkn(&r["inputs"])).collect::<Vec<_>>(), shapes, "{rev}");
        assert!(runs.iter().all(|r| r["best"].is_object() && mkn(&r["best"]["params"]["inputs"]) == mkn(&r["inputs"])), "{rev}: {shown}");
    }
    let log = env.ok(&["log", "-w", s(&wf)]);
    assert!(log.contains("K=65 M=17 N=200 (+2 sizes)"), "the last shape is the headline:\n{log}");

    // Exported with a dispatch table, built, run: each shape at its own best.
    let out = env.path("out");
    let report = env.json(&["export", "HEAD", "-w", s(&wf), "--to", s(&out), "--dispatch", "--json"]);
    let table = &report["dispatch"];
    assert_eq!(table["shapes"].as_array().unwrap().iter().map(|t| mkn(&t["params"]["inputs"])).collect::<Vec<_>>(), shapes);
    let built = Command::new("sh").arg(out.join("build.sh")).output().unwrap();
    assert!(built.status.success(), "build.sh failed:\n{}", String::from_utf8_lossy(&built.stderr));
    let ran = Command::new(out.join("harness")).args(["--warmup", "0", "--reps", "1", "--dump"]).arg(&out).output().unwrap();
    let stdout = String::from_utf8_lossy(&ran.stdout);
    assert!(ran.status.success(), "the harness failed:\n{stdout}\n{}", String::from_utf8_lossy(&ran.stderr));
    assert_eq!(stdout.matches("median_ms: ").count(), 3, "{stdout}");
    for shape in table["shapes"].as_array().unwrap() {
        let params = &shape["params"];
        let label = ["K", "M", "N"].map(|n| format!("{n}={}", params["inputs"][n])).join(",");
        assert!(stdout.contains(&format!("shape {label}: configuration {}", shape["config"])), "{stdout}");
        let mut args: Vec<String> =
            vec!["run".into(), s(&wf.join("context")).into(), "--reps".into(), "1".into(), "--warmup".into(), "0".into(), "--json".into()];
        for part in ["inputs", "tuning"] {
            for (k, v) in params[part].as_object().unwrap() {
                args.extend(["--set".to_string(), format!("{k}={v}")]);
            }
        }
        let run = env.json(&args.iter().map(String::as_str).collect::<Vec<_>>());
        let bytes = std::fs::read(out.join(format!("out.{label}.bin"))).unwrap();
        assert_eq!(
            HostArray { dtype: DType::F32, bytes }.digest(),
            run["outputs"][0]["digest"].as_str().unwrap(),
            "{label}: the harness's output differs from peak run's"
        );
    }
}
