//! CUDA benchmarks that write JSON under bench/results/ with the command, the device, the
//! commit and the date. Two of them:
//!
//! - `baseline CONTEXT... [--set ...]`: each context's naive kernel against cuBLASLt, in one
//!   process per context, for every point the `--set`s leave (see `peak baseline`);
//! - `compile-time CONTEXT... [--set ...]`: per variant, NVRTC compiling in process against
//!   `nvcc` building an executable from the same kernel.
//!
//! The commit comes from `--commit`, else `PEAK_COMMIT`, else `git rev-parse HEAD` (the
//! GPU machine may hold the source without its git history).

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::Instant;

use clap::{Parser, Subcommand};
use peak_backend::{Backend, CompileRequest, RunOptions};
use peak_cuda::CudaBackend;
use peak_cuda::baseline::run_baseline;
use peak_cuda::compile_only::variants;
use peak_cuda::nvrtc::{self, Arch, Dialect};
use peak_spec::{Context, Language};
use serde_json::{Value, json};

#[derive(Parser)]
#[command(name = "peak-cuda-bench")]
struct Cli {
    #[command(subcommand)]
    bench: Bench,
    /// Where to write the JSON.
    #[arg(long, global = true, default_value = "bench/results/cuda.json")]
    out: PathBuf,
    /// The commit the binary was built from.
    #[arg(long, global = true)]
    commit: Option<String>,
}

#[derive(Subcommand)]
enum Bench {
    /// Naive kernel against cuBLASLt, same process, same inputs, same timing.
    Baseline {
        contexts: Vec<PathBuf>,
        #[arg(long = "set")]
        set: Vec<String>,
        #[arg(long, default_value_t = 5)]
        warmup: usize,
        #[arg(long, default_value_t = 30)]
        reps: usize,
    },
    /// NVRTC in process against nvcc building an executable, per variant.
    CompileTime {
        contexts: Vec<PathBuf>,
        #[arg(long = "set")]
        set: Vec<String>,
        /// The nvcc to time (default: nvcc on the PATH, else /usr/local/cuda/bin/nvcc).
        #[arg(long)]
        nvcc: Option<PathBuf>,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let command: Vec<String> = std::env::args().collect();
    let result = match &cli.bench {
        Bench::Baseline { contexts, set, warmup, reps } => baseline(contexts, set, *warmup, *reps),
        Bench::CompileTime { contexts, set, nvcc } => compile_time(contexts, set, nvcc.clone()),
    };
    let (mut device, benchmark, results) = match result {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(1);
        }
    };
    // The contexts may mix cuda and hip; each result names its own backend.
    if let Some(fields) = device.as_object_mut() {
        fields.remove("backend");
    }
    let doc = json!({
        "benchmark": benchmark,
        "command": command.join(" "),
        "device": device,
        "commit": peak_bench::commit(cli.commit),
        "date": peak_bench::date(),
        "results": results,
    });
    if let Some(dir) = cli.out.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    match std::fs::write(&cli.out, serde_json::to_string_pretty(&doc).expect("a serde_json::Value always serializes") + "\n") {
        Ok(()) => {
            eprintln!("wrote {}", cli.out.display());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: writing {}: {e}", cli.out.display());
            ExitCode::from(1)
        }
    }
}

type Outcome = Result<(Value, &'static str, Vec<Value>), String>;

fn open(ctx: &Context) -> Result<CudaBackend, String> {
    match ctx.backend() {
        Language::Cuda => CudaBackend::new(),
        Language::Hip => CudaBackend::hip(),
        other => return Err(format!("{}: a {other} context; this bench runs cuda and hip", ctx.dir.display())),
    }
    .map_err(|e| e.to_string())
}

fn baseline(contexts: &[PathBuf], set: &[String], warmup: usize, reps: usize) -> Outcome {
    let mut device = Value::Null;
    let mut results = Vec::new();
    for path in contexts {
        let ctx = Context::load(path).map_err(|e| e.to_string())?;
        let backend = open(&ctx)?;
        device = serde_json::to_value(backend.device()).expect("DeviceInfo serializes: strings and integers");
        let mut space = ctx.space();
        space.apply_overrides(set).map_err(|e| e.to_string())?;
        for params in space.iter() {
            // A fresh data seed per point: each comparison multiplies new random matrices.
            let options = RunOptions { warmup, repetitions: reps, data_seed: results.len() as u64 + 1, ..RunOptions::default() };
            let report = run_baseline(&backend, &ctx, &params, &options).map_err(|e| format!("{} ({params}): {e}", ctx.dir.display()))?;
            eprintln!(
                "{:<28} {:<32} kernel {:>9.3} ms {:>8.2} TFLOP/s | cuBLASLt {:>7.3} ms {:>7.2} TFLOP/s | {:>6.2}% | {}",
                path.display(),
                params.to_string(),
                report.kernel_timing.median_ms,
                report.kernel_timing.tflops,
                report.cublas_timing.median_ms,
                report.cublas_timing.tflops,
                report.percent_of_cublas,
                if report.validation.passed { "output matches" } else { "OUTPUT DIFFERS" }
            );
            results.push(serde_json::to_value(&report).expect("BaselineReport serializes: derived, every map keyed by strings"));
        }
    }
    Ok((device, "naive kernel vs cuBLASLt (peak-cuda baseline)", results))
}

fn find_nvcc(given: Option<PathBuf>) -> Result<PathBuf, String> {
    if let Some(p) = given {
        return Ok(p);
    }
    let on_path = std::env::var_os("PATH").and_then(|p| std::env::split_paths(&p).map(|d| d.join("nvcc")).find(|p| p.is_file()));
    on_path.or_else(|| Some(PathBuf::from("/usr/local/cuda/bin/nvcc")).filter(|p| p.is_file())).ok_or_else(|| "no nvcc found; pass --nvcc".to_string())
}

fn compile_time(contexts: &[PathBuf], set: &[String], nvcc: Option<PathBuf>) -> Outcome {
    let nvcc = find_nvcc(nvcc)?;
    let nvcc_version = Command::new(&nvcc)
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).lines().last().unwrap_or_default().to_string())
        .unwrap_or_default();
    let scratch = tempfile::tempdir().map_err(|e| e.to_string())?;
    let mut device = Value::Null;
    let mut results = Vec::new();
    for path in contexts {
        let ctx = Context::load(path).map_err(|e| e.to_string())?;
        let backend = open(&ctx)?;
        device = serde_json::to_value(backend.device()).expect("DeviceInfo serializes: strings and integers");
        let dialect = if ctx.backend() == Language::Hip { Dialect::Hip } else { Dialect::Cuda };
        let arch = Arch::parse(&backend.device().arch)?;
        let (tunings, _) = variants(&ctx, set).map_err(|e| e.to_string())?;
        for tuning in tunings {
            let request = CompileRequest {
                source: ctx.regions.device_source(),
                defines: tuning.iter().map(|(k, v)| (k.clone(), v.to_string())).collect(),
                file_name: ctx.source_path().display().to_string(),
            };
            let start = Instant::now();
            nvrtc::compile(&request, dialect, &arch).map_err(|e| e.to_string())?;
            let nvrtc_ms = start.elapsed().as_secs_f64() * 1e3;
            // What a run pays: NVRTC plus loading the cubin into the context.
            let start = Instant::now();
            backend.compile(&request).map_err(|e| e.to_string())?;
            let nvrtc_and_load_ms = start.elapsed().as_secs_f64() * 1e3;
            let nvcc_ms = if dialect == Dialect::Cuda { Some(time_nvcc(&nvcc, &arch, &request, scratch.path())?) } else { None };
            eprintln!(
                "{:<28} {:<28} NVRTC {:>7.1} ms (+load {:>7.1} ms) | nvcc {}",
                path.display(),
                tuning.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(" "),
                nvrtc_ms,
                nvrtc_and_load_ms,
                nvcc_ms.map_or("n/a (HIP source)".to_string(), |ms| format!("{ms:.1} ms"))
            );
            results.push(json!({
                "context": path.display().to_string(),
                "backend": ctx.backend().to_string(),
                "tuning": tuning,
                "arch": arch.to_string(),
                "nvrtc_ms": nvrtc_ms,
                "nvrtc_and_load_ms": nvrtc_and_load_ms,
                "nvcc_executable_ms": nvcc_ms,
            }));
        }
    }
    device["nvcc"] = json!(nvcc_version);
    Ok((device, "NVRTC compile per variant vs nvcc building an executable", results))
}

/// nvcc building an executable from the same kernel: the device source, the defines, and
/// a main() that launches nothing (so nvcc's whole pipeline, host side and link included, runs).
fn time_nvcc(nvcc: &Path, arch: &Arch, request: &CompileRequest, dir: &Path) -> Result<f64, String> {
    let source = dir.join("kernel.cu");
    std::fs::write(&source, format!("{}\nint main() {{ return 0; }}\n", request.source)).map_err(|e| e.to_string())?;
    let gencode = format!("-gencode=arch={},code={}", arch.as_str().replace("sm_", "compute_"), arch);
    let mut cmd = Command::new(nvcc);
    cmd.arg(gencode).arg("-lineinfo").arg("-o").arg(dir.join("kernel")).arg(&source);
    for (k, v) in &request.defines {
        cmd.arg(format!("-D{k}={v}"));
    }
    let start = Instant::now();
    let output = cmd.output().map_err(|e| format!("running {}: {e}", nvcc.display()))?;
    let ms = start.elapsed().as_secs_f64() * 1e3;
    if !output.status.success() {
        return Err(format!("nvcc failed: {}", String::from_utf8_lossy(&output.stderr)));
    }
    Ok(ms)
}
