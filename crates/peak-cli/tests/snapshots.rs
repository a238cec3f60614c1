//! Snapshot tests of what users read: the whole terminal output of the main commands
//! (`info`, `run`, `check`, `validate`, `tune`, `init`, `log`, `show`, `diff`) and of the
//! main error messages, on OpenCL (PoCL in CI). Each snapshot holds the exit status, stdout
//! and stderr, with what differs from run to run or machine to machine filtered out, as uv
//! does: temporary paths, device names, times, throughput, checkpoint ids, dates, cache
//! hashes and output digests. A change to any command's output shows up in review as a
//! change to a file under `tests/snapshots/`.
//!
//! Review a change with `cargo insta review`, or with
//! `INSTA_UPDATE=always cargo test -p peak-cli --test snapshots` and `git diff`. Plain
//! `cargo test` never writes a snapshot where it would be compared (CI=true makes a missing
//! one a failure).
//!
//! Every command runs on one OpenCL device, pinned: the first CPU device (PoCL), named to
//! `peak` with `PEAK_OPENCL_DEVICE`, and its name is what `[DEVICE]` replaces. Left to
//! itself, `peak` takes the first GPU where an OpenCL GPU driver is installed (NVIDIA's,
//! on a CUDA machine), and the snapshots hold a CPU device's output (no cache flush).
//! On the H200 (PoCL's CPU and NVIDIA's H200 both OpenCL devices) `peak` ran on the CPU
//! while the filter was built from the device this process opened by itself, so the CPU's
//! name stayed in the output. A machine with no CPU OpenCL device skips the device tests.
//!
//! The snapshots are found through the workspace root that insta asks `cargo metadata`
//! for; where no cargo is installed (a test binary carried to a GPU machine) set
//! `INSTA_WORKSPACE_ROOT` to the checkout (bench/gpu_tests.py does).
//!
//! The sizes are tiny (n = 64, one or two configurations) so the whole file runs in
//! seconds. Tuning output is made deterministic by leaving one configuration to tune:
//! which configuration wins never depends on a measurement.
// Helpers outside #[test] functions unwrap too; clippy's allow-unwrap-in-tests does not reach them here (rust-clippy#13981).
#![allow(clippy::unwrap_used)]

mod support;

use std::path::PathBuf;
use std::process::{Command, Output};

use peak_backend::Backend;
use peak_opencl::DeviceEntry;
use support::{example, opencl_present};

/// The OpenCL device the snapshots are taken on: the first CPU device (not a GPU), or
/// `None` where there is none.
fn cpu_device() -> Option<DeviceEntry> {
    peak_opencl::list_devices().ok()?.into_iter().find(|d| !d.is_gpu)
}

/// Whether a CPU OpenCL device is there to run `test`'s commands on; prints SKIPPED
/// with the reason where not.
fn cpu_opencl_present(test: &str) -> bool {
    match peak_opencl::list_devices() {
        Ok(devices) if devices.iter().any(|d| !d.is_gpu) => true,
        Ok(devices) => {
            let names: Vec<String> = devices.iter().map(|d| d.name.trim().to_string()).collect();
            eprintln!(
                "SKIPPED {test}: no CPU OpenCL device (install pocl-opencl-icd); the snapshots hold a CPU device's output, and this machine has only {}",
                names.join(", ")
            );
            false
        }
        Err(e) => {
            eprintln!("SKIPPED {test}: no OpenCL device (install pocl-opencl-icd): {e}");
            false
        }
    }
}

/// A scratch folder that `peak` runs in, with its results cache inside, and the filters
/// that make its output stable.
struct Snap {
    tmp: tempfile::TempDir,
    filters: Vec<(String, String)>,
    /// The device every `peak` command runs on (`PEAK_OPENCL_DEVICE`), if any.
    device: Option<DeviceEntry>,
}

/// `text` as a regular expression that matches it literally.
fn literal(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if "\\.+*?()|[]{}^$#&-~".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

impl Snap {
    fn new() -> Snap {
        let tmp = tempfile::tempdir().unwrap();
        let mut filters = Vec::new();
        // The scratch folder, as given and as the OS resolves it.
        for path in [tmp.path().to_path_buf(), tmp.path().canonicalize().unwrap()] {
            filters.push((literal(path.to_str().unwrap()), "[TEMP]".to_string()));
        }
        // The device, opened as `peak` will open it: its name with its driver string, then
        // its name alone.
        let device = cpu_device();
        if let Some(entry) = &device {
            let backend = peak_opencl::OpenClBackend::open(entry).expect("the CPU OpenCL device opens");
            let info = backend.device();
            filters.push((literal(&format!("{} ({})", info.name, info.driver)), "[DEVICE]".to_string()));
            filters.push((literal(&info.name), "[DEVICE]".to_string()));
        }
        let generic = [
            // Dates and clock times.
            (r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z", "[DATE]"),
            // Elapsed-time prefixes of progress lines: `[    0.3s]`.
            (r"\[ *\d+\.\d+s\]", "[ELAPSED]"),
            // Throughput.
            (r"\d+(\.\d+)? configurations/s", "[N] configurations/s"),
            (r"\d+(\.\d+)? TFLOP/s", "[N] TFLOP/s"),
            // Durations, in text and in JSON. A right-aligned column's padding goes with
            // the number, whose width varies.
            (r" {2,}\d+(\.\d+)?(e-?\d+)? ?(ns|µs|ms|s)\b", "  [TIME]"),
            (r"\b\d+(\.\d+)?(e-?\d+)? ?(ns|µs|ms|s)\b", "[TIME]"),
            (r#""time_ms": ?[0-9.e-]+"#, r#""time_ms":[TIME]"#),
            // Speedups computed from measured times, with their padding likewise.
            (r" +\d+\.\d+x\b", " [SPEEDUP]x"),
            (r"\b\d+\.\d+x\b", "[SPEEDUP]x"),
            // Results-cache file names.
            (r"\b[0-9a-f]{32}\b", "[HASH]"),
            // Output summaries: a digest and floating-point sums and extremes, which may
            // differ in the last bits from one CPU to the next.
            (r"digest [0-9a-f]{16}", "digest [DIGEST]"),
            (r"sum \S+  range \[\S+, \S+\]", "sum [SUM]  range [RANGE]"),
            (r"rel\. error \S+ \(tol (\S+)\), worst at \[\d+\] \S+ vs \S+", "rel. error [ERROR] (tol $1), worst at [INDEX] [VALUE] vs [VALUE]"),
        ];
        filters.extend(generic.iter().map(|(a, b)| (a.to_string(), b.to_string())));
        Snap { tmp, filters, device }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.tmp.path().join(name)
    }

    /// Copy an example into the scratch folder under a short name, so that commands name it
    /// by a relative path.
    fn copy_example(&self, example_name: &str, as_name: &str) {
        let from = PathBuf::from(example(example_name));
        let to = self.path(as_name);
        std::fs::create_dir_all(&to).unwrap();
        for entry in std::fs::read_dir(&from).unwrap() {
            let entry = entry.unwrap();
            std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
        }
    }

    /// Edit a file in the scratch folder, insisting the text to replace is there.
    fn edit(&self, file: &str, from: &str, to: &str) {
        let path = self.path(file);
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains(from), "{file} lacks {from:?}");
        std::fs::write(&path, text.replacen(from, to, 1)).unwrap();
    }

    /// Forget the ids of this workflow's checkpoints: each becomes `[ID]`, in full and short.
    fn filter_checkpoints(&mut self, workflow: &str) {
        let log = self.output(&["log", "-w", workflow, "--json"]);
        assert!(log.status.success(), "{}", String::from_utf8_lossy(&log.stderr));
        let entries: serde_json::Value = serde_json::from_slice(&log.stdout).unwrap();
        for entry in entries.as_array().unwrap() {
            let id = entry["id"].as_str().unwrap();
            self.filters.insert(0, (literal(id), "[COMMIT]".to_string()));
            self.filters.push((format!(r"\b{}\b", literal(&id[..7])), "[ID]".to_string()));
        }
    }

    fn output(&self, args: &[&str]) -> Output {
        let mut command = Command::new(env!("CARGO_BIN_EXE_peak"));
        command
            .args(args)
            .current_dir(self.tmp.path())
            .env("PEAK_CACHE_DIR", self.path("cache"))
            // No periodic progress lines, whose number depends on the machine's speed.
            .env("PEAK_PROGRESS_INTERVAL", "0");
        match &self.device {
            Some(entry) => command.env("PEAK_OPENCL_DEVICE", format!("{}:{}", entry.platform, entry.device)),
            None => command.env_remove("PEAK_OPENCL_DEVICE"),
        };
        command.output().expect("peak runs")
    }

    /// Run `peak ARGS` in the scratch folder and compare the whole output with the snapshot
    /// `name`; the command line is the snapshot's description.
    fn assert(&self, name: &str, args: &[&str]) {
        let out = self.output(args);
        let text = format!(
            "success: {}\nexit_code: {}\n----- stdout -----\n{}\n----- stderr -----\n{}",
            out.status.success(),
            out.status.code().map_or("none".to_string(), |c| c.to_string()),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
        );
        let mut settings = insta::Settings::clone_current();
        settings.set_description(format!("peak {}", args.join(" ")));
        settings.set_omit_expression(true);
        settings.set_prepend_module_to_snapshot(false);
        for (pattern, replacement) in &self.filters {
            settings.add_filter(pattern, replacement.as_str());
        }
        settings.bind(|| insta::assert_snapshot!(name, text));
    }
}

/// Which backends `info` finds differs between machines (lavapipe, an NVIDIA driver), so
/// only OpenCL's status is kept; the others' lines become `[STATUS]`, and the devices
/// under an available backend `[DEVICES]`.
#[test]
fn info() {
    if !opencl_present("info") {
        return;
    }
    let mut snap = Snap::new();
    snap.filters.insert(0, (r"(?m)^(cuda|hip|hlsl)( +)(available(\n {8}.*)*|missing: .*)$".into(), "$1$2[STATUS]".into()));
    snap.filters.insert(1, (r"(?m)^(opencl +available)(\n {8}.*)+$".into(), "$1\n        [DEVICES]".into()));
    snap.assert("info", &["info"]);
}

#[test]
fn run() {
    if !cpu_opencl_present("run") {
        return;
    }
    let snap = Snap::new();
    snap.copy_example("matmul-opencl-naive", "naive");
    snap.assert("run", &["run", "naive", "--set", "n=64", "--set", "BLOCK_X=8", "--set", "BLOCK_Y=8", "--reps", "3"]);
    // More than one point left: the first runs, and a note says so.
    snap.assert("run_first_of_several", &["run", "naive", "--set", "n=64", "--set", "BLOCK_X=8", "--reps", "2"]);
}

#[test]
fn check() {
    if !cpu_opencl_present("check") {
        return;
    }
    let snap = Snap::new();
    snap.copy_example("matmul-opencl-naive", "naive");
    snap.copy_example("matmul-opencl-tiled", "tiled");
    snap.assert("check_passes", &["check", "tiled", "--against", "naive", "--samples", "2", "--set", "n=64"]);
    // Half the rows are never written: the poisoned outputs are reported as unwritten.
    snap.copy_example("matmul-opencl-naive", "lazy");
    snap.edit("lazy/kernel.cl", "if (row < n && col < n)", "if (row < n / 2 && col < n)");
    snap.assert("check_fails", &["check", "lazy", "--against", "naive", "--samples", "1", "--set", "n=64"]);
}

#[test]
fn validate() {
    if !cpu_opencl_present("validate") {
        return;
    }
    let snap = Snap::new();
    snap.copy_example("matmul-opencl-naive", "naive");
    snap.copy_example("matmul-opencl-tiled", "tiled");
    snap.assert("validate_passes", &["validate", "tiled", "--against", "naive", "--samples", "2", "--set", "n=64"]);
    snap.copy_example("matmul-opencl-naive", "lazy");
    snap.edit("lazy/kernel.cl", "if (row < n && col < n)", "if (row < n / 2 && col < n)");
    snap.assert("validate_fails", &["validate", "lazy", "--against", "naive", "--samples", "1", "--set", "n=64"]);
}

/// One configuration left to tune, so the winner never depends on a measurement; the
/// second run finds it in the cache.
#[test]
fn tune() {
    if !cpu_opencl_present("tune") {
        return;
    }
    let snap = Snap::new();
    snap.copy_example("matmul-opencl-naive", "naive");
    let args = ["tune", "naive", "--strategy", "exhaustive", "--set", "n=64", "--set", "BLOCK_X=8", "--set", "BLOCK_Y=8", "--reps", "3"];
    snap.assert("tune", &args);
    snap.assert("tune_cached", &args);
}

/// A workflow with a measured root (one configuration) and a TB-Tiling checkpoint made
/// as `peak apply` makes one, with recorded times at two sizes (n = 32, then the root's
/// n = 64) and a yardstick; then `log` (and `--sizes`), `show` and `diff`.
#[test]
fn workflow() {
    if !cpu_opencl_present("workflow") {
        return;
    }
    let mut snap = Snap::new();
    snap.copy_example("matmul-opencl-naive", "naive");
    snap.copy_example("matmul-opencl-tiled", "tiled");
    // The root's id is not known before `init` prints it.
    snap.filters.push((r"root checkpoint [0-9a-f]{7}\b".into(), "root checkpoint [ID]".into()));
    snap.assert("init", &["init", "wf", "--from", "naive", "--set", "n=64", "--set", "BLOCK_X=8", "--set", "BLOCK_Y=8"]);

    let mut workflow = peak_workflow::Workflow::open(snap.path("wf")).unwrap();
    workflow
        .checkpoint(peak_workflow::CheckpointInput {
            context_dir: snap.path("tiled"),
            transformation: "TB-Tiling".into(),
            executor: "agent".into(),
            validation: serde_json::json!({"verdict": "passed"}),
            performance: serde_json::json!({
                "best": {"params": {"inputs": {"n": 64}, "tuning": {"TILE": 16}}, "time_ms": 0.05},
                "runs": [
                    {"inputs": {"n": 32}, "best": {"params": {"inputs": {"n": 32}, "tuning": {"TILE": 16}}, "time_ms": 0.01}},
                    {"inputs": {"n": 64}, "best": {"params": {"inputs": {"n": 64}, "tuning": {"TILE": 16}}, "time_ms": 0.05}},
                ],
                // As a CUDA GEMM's record holds it (the root's, on OpenCL, is "n/a").
                "baseline": {"kind": "cublaslt", "time_ms": 0.04, "inputs": {"n": 64}, "what": "cublasLtMatmul, NN m=64 n=64 k=64, f32 x f32 -> f32"},
            }),
            transcript: serde_json::json!({"entries": []}),
            ..Default::default()
        })
        .unwrap();
    drop(workflow);
    snap.filter_checkpoints("wf");

    snap.assert("log", &["log", "-w", "wf"]);
    snap.assert("log_sizes", &["log", "--sizes", "-w", "wf"]);
    snap.assert("show", &["show", "HEAD", "-w", "wf"]);
    snap.assert("diff", &["diff", "root", "HEAD", "-w", "wf"]);
    snap.assert("error_unknown_checkpoint", &["show", "nosuch", "-w", "wf"]);
}

#[test]
fn errors() {
    let snap = Snap::new();
    snap.copy_example("matmul-opencl-naive", "naive");
    snap.assert("error_no_workflow", &["log"]);
    snap.assert("error_set_unknown_name", &["run", "naive", "--set", "BLOCKX=8"]);
    snap.assert("error_set_not_an_integer", &["run", "naive", "--set", "n=abc"]);

    snap.copy_example("matmul-opencl-naive", "misspelt");
    snap.edit("misspelt/peak.toml", "init = \"zeros\"", "init = \"zeros\"\noutptu = true");
    snap.assert("error_manifest_unknown_field", &["run", "misspelt"]);

    snap.copy_example("matmul-opencl-naive", "unclosed");
    snap.edit("unclosed/peak.toml", "[kernel.matmul]", "[kernel.matmul");
    snap.assert("error_manifest_malformed", &["run", "unclosed"]);

    snap.copy_example("matmul-opencl-naive", "unmarked");
    snap.edit("unmarked/kernel.cl", "// @peak host\n", "");
    snap.assert("error_missing_region_marker", &["run", "unmarked"]);
}
