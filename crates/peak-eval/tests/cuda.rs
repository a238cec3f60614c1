//! Workers, sanitizers, profiling and validation on a CUDA GPU. Every test prints SKIPPED
//! and passes where there is no CUDA device (or no compute-sanitizer / ncu for theirs).
//!
//! Like tests/opencl.rs this binary is its own worker (`PEAK_EVAL_TEST_WORKER` set: it
//! serves the CUDA backend), so it runs on a GPU machine with no Rust toolchain: build it
//! with `cargo test --release -p peak-eval --test cuda --no-run`, copy the executable it
//! names, and run it there from the repository root.
// Helpers outside #[test] functions unwrap too; clippy's allow-unwrap-in-tests does not reach them here (rust-clippy#13981).
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use peak_backend::RunOptions;
use peak_backend::harness::{Failed, Test, run_gated};
use peak_backend::worker::{FailureKind, Job, PoolOptions, WorkerCommand, WorkerPool};
use peak_eval::profile::{ProfileOptions, profile};
use peak_eval::reference::ReferenceStore;
use peak_eval::sanitizer::{SanitizerTool, SanitizerValidator};
use peak_eval::validate::{Outcome, samples};
use peak_eval::{OutputValidator, Validator, Verdict, Workers, validate};
use peak_spec::Context;

const WORKER_ENV: &str = "PEAK_EVAL_TEST_WORKER";

fn main() {
    if std::env::var_os(WORKER_ENV).is_some() {
        match peak_cuda::CudaBackend::new() {
            Ok(backend) => peak_backend::worker::serve(&backend).expect("worker i/o"),
            Err(e) => peak_backend::worker::refuse(&e.to_string()).expect("worker i/o"),
        }
        return;
    }
    let skip = peak_cuda::CudaBackend::new().err().map(|e| e.to_string().lines().next().unwrap_or_default().to_string());
    let tests: Vec<(&str, Test)> = vec![
        ("an_illegal_address_crashes_the_worker_and_the_next_variant_runs", an_illegal_address_crashes_the_worker_and_the_next_variant_runs),
        ("memcheck_finds_an_out_of_bounds_write", memcheck_finds_an_out_of_bounds_write),
        ("racecheck_finds_a_shared_memory_race", racecheck_finds_a_shared_memory_race),
        ("a_clean_kernel_passes_every_sanitizer", a_clean_kernel_passes_every_sanitizer),
        ("the_register_tiled_sgemm_validates_against_the_naive_kernel", the_register_tiled_sgemm_validates_against_the_naive_kernel),
        ("ncu_reports_headline_metrics", ncu_reports_headline_metrics),
    ];
    run_gated(tests.into_iter().map(|(name, test)| (name, true, test)).collect(), "CUDA", skip)
}

fn worker_command() -> WorkerCommand {
    WorkerCommand::new(std::env::current_exe().expect("test binary path")).env(WORKER_ENV, "cuda")
}

fn workers() -> Workers {
    Workers::new(Box::new(|_backend: &str| Ok(worker_command())), PoolOptions { run_timeout: Duration::from_secs(120), ..PoolOptions::default() })
}

fn ensure(cond: bool, message: impl Into<String>) -> Result<(), Failed> {
    if cond { Ok(()) } else { Err(message.into().into()) }
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

struct Ctx {
    _dir: tempfile::TempDir,
    ctx: Context,
}

/// A one-array CUDA context: `out` of n floats, block of 64 threads.
fn context(device: &str, grid: &str) -> Ctx {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("peak.toml"),
        "[kernel]\nname = \"k\"\nbackend = \"cuda\"\nsource = \"k.cu\"\n\n[inputs]\nn = { values = [4096] }\n\n\
         [[arrays]]\nname = \"A\"\ntype = \"f32\"\nsize = \"n\"\ninit = \"random\"\nseed = 1\n\n\
         [[arrays]]\nname = \"OUT\"\ntype = \"f32\"\nsize = \"n\"\ninit = \"zeros\"\noutput = true\n",
    )
    .unwrap();
    std::fs::write(dir.path().join("k.cu"), format!("// @peak macros\n// @peak device\n{device}// @peak host\nlaunch(\"k\", {grid}, 64, 0, A, OUT, n);\n"))
        .unwrap();
    let ctx = Context::load(dir.path()).unwrap();
    Ctx { _dir: dir, ctx }
}

const CLEAN: &str = "extern \"C\" __global__ void k(const float* a, float* out, int n) {\n  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i < n) out[i] = 2.0f * a[i];\n}\n";
const OOB: &str = "extern \"C\" __global__ void k(const float* a, float* out, int n) {\n  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i < n) out[i + 64] = 2.0f * a[i];\n}\n";
/// Threads read a neighbour's shared slot with no barrier in between: a race across warps.
const RACE: &str = "extern \"C\" __global__ void k(const float* a, float* out, int n) {\n  __shared__ float s[64];\n  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  s[threadIdx.x] = a[i];\n  out[i] = s[(threadIdx.x + 32) % 64];\n}\n";
const WILD: &str = "extern \"C\" __global__ void k(const float* a, float* out, int n) { out[(1ll << 38) + threadIdx.x] = a[0]; }\n";

fn sanitize(ctx: &Context, tools: Vec<SanitizerTool>) -> Result<Option<Verdict>, Failed> {
    let program = match SanitizerValidator::locate() {
        Ok(p) => p,
        Err(e) => {
            eprintln!("SKIPPED: {e}");
            return Ok(None);
        }
    };
    let mut validator = SanitizerValidator::new(tools, program);
    let sample = samples(&ctx.space(), 1, 1).remove(0);
    // The validator checks its first sample: no verdict there would be a test that checks nothing.
    match validator.check(&mut workers(), ctx, &sample)? {
        Some(verdict) => Ok(Some(verdict)),
        None => Err(format!("the sanitizer gave no verdict for sample {}", sample.index).into()),
    }
}

fn an_illegal_address_crashes_the_worker_and_the_next_variant_runs() -> Result<(), Failed> {
    let (wild, clean) = (context(WILD, "1"), context(CLEAN, "ceil_div(n, 64)"));
    let mut pool = WorkerPool::start("cuda", worker_command(), PoolOptions::default())?;
    let job = |c: &Context| Job::new(c.dir.clone(), c.space().iter().next().unwrap(), RunOptions { warmup: 0, repetitions: 1, ..RunOptions::default() });
    let failure = pool.run(job(&wild.ctx))?.expect_err("an illegal address cannot succeed");
    ensure(failure.category == FailureKind::Crashed, format!("expected crashed, got {failure}"))?;
    ensure(failure.message.contains("ILLEGAL_ADDRESS"), failure.message.clone())?;
    pool.run(job(&clean.ctx))?.map_err(|f| format!("the next variant failed: {f}"))?;
    ensure(pool.restarts() == 1, format!("expected one restart, got {}", pool.restarts()))
}

fn memcheck_finds_an_out_of_bounds_write() -> Result<(), Failed> {
    let oob = context(OOB, "ceil_div(n, 64)");
    let Some(verdict) = sanitize(&oob.ctx, vec![SanitizerTool::Memcheck])? else { return Ok(()) };
    match verdict {
        Verdict::SanitizerFinding { findings } => {
            let f = &findings[0];
            ensure(f.tool == "memcheck" && f.error.contains("write"), format!("{f:?}"))?;
            ensure(f.kernel.as_deref() == Some("k"), format!("kernel: {f:?}"))?;
            ensure(f.line.is_some(), format!("NVRTC compiles with -lineinfo, so a line is expected: {f:?}"))
        }
        other => Err(format!("expected a sanitizer finding, got {other:?}").into()),
    }
}

fn racecheck_finds_a_shared_memory_race() -> Result<(), Failed> {
    let race = context(RACE, "n / 64");
    let Some(verdict) = sanitize(&race.ctx, vec![SanitizerTool::Racecheck])? else { return Ok(()) };
    match verdict {
        Verdict::SanitizerFinding { findings } => {
            ensure(findings.iter().any(|f| f.tool == "racecheck" && f.kernel.as_deref() == Some("k")), format!("{findings:?}"))
        }
        other => Err(format!("expected a race, got {other:?}").into()),
    }
}

fn a_clean_kernel_passes_every_sanitizer() -> Result<(), Failed> {
    let clean = context(CLEAN, "ceil_div(n, 64)");
    let Some(verdict) = sanitize(&clean.ctx, SanitizerTool::ALL.to_vec())? else { return Ok(()) };
    ensure(verdict == Verdict::Passed, format!("{verdict:?}"))
}

fn the_register_tiled_sgemm_validates_against_the_naive_kernel() -> Result<(), Failed> {
    let candidate = Context::load(repo().join("examples/sgemm-cuda-regtiled"))?;
    let reference = Context::load(repo().join("examples/matmul-cuda-f32"))?;
    let cache = tempfile::tempdir().unwrap();
    let mut validators: Vec<Box<dyn Validator>> = vec![Box::new(OutputValidator::new(reference, ReferenceStore::new(cache.path())))];
    let report = validate(&mut workers(), &candidate, &samples(&candidate.space(), 4, 1), &mut validators, &())?;
    ensure(report.outcome == Outcome::Passed, format!("{:?}", report.samples.iter().map(|s| s.verdict.summary()).collect::<Vec<_>>()))
}

fn ncu_reports_headline_metrics() -> Result<(), Failed> {
    let options = match ProfileOptions::locate() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("SKIPPED ncu_reports_headline_metrics: {e}");
            return Ok(());
        }
    };
    let ctx = Context::load(repo().join("examples/sgemm-cuda-regtiled"))?;
    let mut space = ctx.space();
    space.apply_overrides(&["BX=16", "BY=16", "TX=4", "TY=4", "KT=16"])?;
    let params = space.iter().next().ok_or("the configuration is not in the space")?;
    let report = profile(&workers(), &ctx, &params, &options)?;
    let h = &report.headline;
    ensure(h.duration_ms.is_some_and(|ms| ms > 0.0), format!("{h:?}"))?;
    ensure(h.achieved_flops_per_s.is_some_and(|f| f > 1e11), format!("{h:?}"))?;
    ensure(h.dram_bytes_per_s.is_some() && h.achieved_occupancy_pct.is_some() && h.shared_bank_conflicts.is_some(), format!("{h:?}"))
}
