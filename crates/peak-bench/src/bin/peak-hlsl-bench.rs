//! `peak-hlsl-bench`: tune HLSL matmul contexts on the Vulkan device and write fp32
//! TFLOP/s as JSON, against the device's fp32 peak and, when given, cuBLAS's fp32.
//!
//! For every size n, the reference context (the naive kernel) is tuned first; its best
//! configuration's output is the reference every other configuration is compared with
//! (`peak_spec::compare`, default f32 tolerance for an n-deep sum). A context's space at
//! that n is searched exhaustively when it has at most `--max-configs` points, else on a
//! reproducible random sample of that many. Candidates compile in parallel on every core
//! and run one after another; the fastest few are timed again with more repetitions and
//! the best median wins.
//! `bench/h200-hlsl.sh` drives it on the H200.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Instant;

use clap::Parser;
use peak_backend::runner::compile;
use peak_backend::{Backend, Module, RunError, RunOptions, RunResult, run_compiled};
use peak_hlsl::HlslBackend;
use peak_spec::{Context, DType, ExecParams, HostArray, compare, default_tolerance};
use serde::Serialize;

#[derive(Parser, Debug)]
#[command(about = "Tune HLSL matmul contexts on the Vulkan device and report fp32 TFLOP/s as JSON")]
struct Args {
    /// Context folders to tune, in order; the first is also the reference unless --reference is given.
    #[arg(long = "context", required = true)]
    contexts: Vec<PathBuf>,
    /// The context whose best output validates the others (default: the first).
    #[arg(long)]
    reference: Option<PathBuf>,
    /// Matrix sizes.
    #[arg(long = "n", required = true)]
    sizes: Vec<i64>,
    /// Search exhaustively up to this many configurations, else sample this many.
    #[arg(long, default_value_t = 48)]
    max_configs: usize,
    /// A different limit for one context, as FOLDER_NAME=COUNT (repeatable).
    #[arg(long = "max-configs-for")]
    max_configs_for: Vec<String>,
    /// Timed repetitions per candidate during the search.
    #[arg(long, default_value_t = 2)]
    search_repetitions: usize,
    /// How many of the search's fastest configurations are timed again.
    #[arg(long, default_value_t = 3)]
    refine: usize,
    /// Timed repetitions when timing the fastest again; the best median wins.
    #[arg(long, default_value_t = 20)]
    final_repetitions: usize,
    /// Untimed runs before timing.
    #[arg(long, default_value_t = 1)]
    warmup: usize,
    /// Seed of the random sample.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// The device's fp32 peak in TFLOP/s, and where that number comes from.
    #[arg(long)]
    peak_tflops: Option<f64>,
    #[arg(long, default_value = "")]
    peak_source: String,
    /// cuBLAS fp32 TFLOP/s measured in the same device run, as N=TFLOPS (repeatable).
    #[arg(long = "cublas")]
    cublas: Vec<String>,
    /// Recorded in the JSON: the command that ran the benchmark, the commit and the date.
    #[arg(long, default_value = "")]
    command: String,
    #[arg(long, default_value = "unknown")]
    commit: String,
    #[arg(long, default_value = "unknown")]
    date: String,
    /// Stop unless the Vulkan device's name contains this (e.g. NVIDIA), so a run that
    /// fell back to lavapipe never reports CPU numbers as GPU ones.
    #[arg(long)]
    require_device: Option<String>,
    /// Where to write the JSON (also printed on stdout).
    #[arg(long)]
    out: Option<PathBuf>,
}

#[derive(Serialize)]
struct Report {
    benchmark: &'static str,
    command: String,
    commit: String,
    date: String,
    device: peak_backend::DeviceInfo,
    compiler: String,
    peak_fp32_tflops: Option<f64>,
    peak_source: String,
    note: &'static str,
    results: Vec<StageResult>,
}

#[derive(Serialize, Clone)]
struct StageResult {
    context: String,
    n: i64,
    best: Option<Best>,
    cublas_fp32_tflops: Option<f64>,
    configs_in_space: usize,
    configs_tried: usize,
    /// Verdict counts over the tried configurations.
    verdicts: BTreeMap<String, usize>,
    /// The five fastest valid configurations of the search.
    top: Vec<Candidate>,
    search_seconds: f64,
}

#[derive(Serialize, Clone)]
struct Candidate {
    params: BTreeMap<String, i64>,
    median_ms: f64,
    tflops: f64,
}

#[derive(Serialize, Clone)]
struct Best {
    params: BTreeMap<String, i64>,
    median_ms: f64,
    min_ms: f64,
    repetitions: usize,
    tflops: f64,
    percent_of_peak: Option<f64>,
    percent_of_cublas: Option<f64>,
    relative_error_vs_reference: Option<f64>,
}

fn main() {
    let args = Args::parse();
    if let Err(e) = bench(&args) {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

fn bench(args: &Args) -> Result<(), String> {
    let backend = HlslBackend::new().map_err(|e| e.to_string())?;
    eprintln!("device: {} ({})", backend.device().name, backend.device().driver);
    if let Some(want) = &args.require_device
        && !backend.device().name.contains(want.as_str())
    {
        return Err(format!(
            "the Vulkan device is {}, not {want}: check VK_DRIVER_FILES and the loader (crates/peak-hlsl/README.md), or set PEAK_VULKAN_DEVICE",
            backend.device().name
        ));
    }
    let load = |p: &PathBuf| Context::load(p).map_err(|e| e.to_string());
    let contexts = args.contexts.iter().map(load).collect::<Result<Vec<_>, _>>()?;
    let reference_ctx = match &args.reference {
        Some(p) => load(p)?,
        None => contexts[0].clone(),
    };
    let cublas = parse_pairs(&args.cublas, "--cublas", |n: &str| n.parse::<i64>().ok())?;
    let limits = parse_pairs(&args.max_configs_for, "--max-configs-for", |name: &str| Some(name.to_string()))?;
    let mut results = Vec::new();
    for &n in &args.sizes {
        eprintln!("== n = {n}: reference {}", reference_ctx.dir.display());
        let limit = |ctx: &Context| limits.get(&label(ctx)).copied().unwrap_or(args.max_configs);
        let (reference_result, reference) = tune(&backend, &reference_ctx, n, None, limit(&reference_ctx), args)?;
        let Some(reference) = reference else {
            return Err(format!("no configuration of the reference {} ran at n={n}", reference_ctx.dir.display()));
        };
        let same_as_reference = |c: &Context| c.dir.canonicalize().ok() == reference_ctx.dir.canonicalize().ok();
        let mut done_reference = false;
        for ctx in &contexts {
            let mut result = if same_as_reference(ctx) && !done_reference {
                done_reference = true;
                eprintln!("-- {} (the reference, already tuned)", ctx.dir.display());
                reference_result.clone()
            } else {
                eprintln!("-- {}", ctx.dir.display());
                tune(&backend, ctx, n, Some(&reference), limit(ctx), args)?.0
            };
            result.cublas_fp32_tflops = cublas.get(&n).copied();
            if let Some(best) = &mut result.best {
                best.percent_of_peak = args.peak_tflops.map(|p| 100.0 * best.tflops / p);
                best.percent_of_cublas = result.cublas_fp32_tflops.map(|c| 100.0 * best.tflops / c);
            }
            results.push(result);
        }
    }
    let report = Report {
        benchmark: "hlsl-matmul-fp32",
        command: args.command.clone(),
        commit: args.commit.clone(),
        date: args.date.clone(),
        device: backend.device().clone(),
        compiler: format!("{} ({})", backend.compiler().program.display(), backend.compiler().version),
        peak_fp32_tflops: args.peak_tflops,
        peak_source: args.peak_source.clone(),
        note: "times are Vulkan timestamp-query device times between two events around one run of the launch plan (median of the repetitions); TFLOP/s = 2 n^3 / time",
        results,
    };
    let json = serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?;
    if let Some(path) = &args.out {
        std::fs::write(path, &json).map_err(|e| format!("{}: {e}", path.display()))?;
        eprintln!("wrote {}", path.display());
    }
    println!("{json}");
    Ok(())
}

/// `KEY=NUMBER` options.
fn parse_pairs<K: Ord, V: std::str::FromStr>(items: &[String], flag: &str, key: impl Fn(&str) -> Option<K>) -> Result<BTreeMap<K, V>, String> {
    items
        .iter()
        .map(|item| {
            let parsed = item.split_once('=').and_then(|(k, v)| Some((key(k.trim())?, v.trim().parse().ok()?)));
            parsed.ok_or_else(|| format!("{flag} {item}: expected KEY=NUMBER"))
        })
        .collect()
}

/// Floating-point operations of one run, from the manifest's `flops` expression.
fn flops(ctx: &Context, params: &ExecParams) -> Result<f64, String> {
    ctx.flops(params).ok_or_else(|| format!("{}: the manifest has no kernel.flops", ctx.dir.display()))
}

fn tflops(flops: f64, ms: f64) -> f64 {
    flops / (ms * 1e-3) / 1e12
}

fn label(ctx: &Context) -> String {
    ctx.dir.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_else(|| ctx.dir.display().to_string())
}

/// Search `ctx` at size `n`; returns the result and the best configuration's output.
fn tune(
    backend: &HlslBackend,
    ctx: &Context,
    n: i64,
    reference: Option<&HostArray>,
    max_configs: usize,
    args: &Args,
) -> Result<(StageResult, Option<HostArray>), String> {
    let started = Instant::now();
    let mut space = ctx.space();
    space.restrict("n", vec![n]).map_err(|e| e.to_string())?;
    let in_space = space.count();
    let candidates: Vec<ExecParams> = if in_space <= max_configs { space.iter().collect() } else { space.sample(max_configs, args.seed) };
    eprintln!("   {} configurations in the space, trying {}", in_space, candidates.len());

    let modules = compile_all(backend, ctx, &candidates);
    let tolerance = default_tolerance(DType::F32, Some(n));
    let (verdicts, ranked) = search(backend, ctx, &candidates, &modules, reference, tolerance, args);
    let top = ranked
        .iter()
        .take(5)
        .map(|&(ms, i)| Ok(Candidate { params: params_map(&candidates[i]), median_ms: ms, tflops: tflops(flops(ctx, &candidates[i])?, ms) }))
        .collect::<Result<Vec<_>, String>>()?;
    let finalist = retime_fastest(backend, ctx, &candidates, &modules, &ranked, args)?;
    let (best, best_output) = match finalist {
        Some((i, r)) => {
            let (best, output) = best_of(ctx, &candidates[i], r, reference, tolerance)?;
            (Some(best), output)
        }
        None => (None, None),
    };
    let result = StageResult {
        context: label(ctx),
        n,
        best,
        cublas_fp32_tflops: None,
        configs_in_space: in_space,
        configs_tried: candidates.len(),
        verdicts,
        top,
        search_seconds: started.elapsed().as_secs_f64(),
    };
    Ok((result, best_output))
}

/// Compile every candidate in parallel: glslang and the driver's pipeline compiler are
/// the slow part, and they use one core each. The modules are in the candidates' order.
fn compile_all(backend: &HlslBackend, ctx: &Context, candidates: &[ExecParams]) -> Vec<Result<Module, RunError>> {
    let threads = std::thread::available_parallelism().map(|t| t.get()).unwrap_or(1).min(candidates.len().max(1));
    std::thread::scope(|s| {
        let chunks: Vec<_> = candidates
            .chunks(candidates.len().div_ceil(threads).max(1))
            .map(|chunk| s.spawn(move || chunk.iter().map(|p| compile(backend, ctx, p)).collect::<Vec<_>>()))
            .collect();
        chunks.into_iter().flat_map(|h| h.join().expect("a compile thread panicked")).collect()
    })
}

/// Run every compiled candidate with the search's few repetitions: the verdict counts,
/// and the right ones as (median ms, candidate index), fastest first.
fn search(
    backend: &HlslBackend,
    ctx: &Context,
    candidates: &[ExecParams],
    modules: &[Result<Module, RunError>],
    reference: Option<&HostArray>,
    tolerance: f64,
    args: &Args,
) -> (BTreeMap<String, usize>, Vec<(f64, usize)>) {
    let search = RunOptions { warmup: args.warmup, repetitions: args.search_repetitions, ..RunOptions::default() };
    let mut verdicts: BTreeMap<String, usize> = BTreeMap::new();
    let mut ranked: Vec<(f64, usize)> = Vec::new();
    for (i, (params, module)) in candidates.iter().zip(modules).enumerate() {
        let outcome = module.as_ref().map_err(Clone::clone).and_then(|m| run_compiled(backend, ctx, m, params, &search));
        let verdict = match &outcome {
            Err(e) => e.category().to_string(),
            Ok(r) => match check(r, reference, tolerance) {
                Ok(()) => {
                    let ms = r.median_ms().unwrap_or(f64::INFINITY);
                    ranked.push((ms, i));
                    "ok".to_string()
                }
                Err(e) => {
                    eprintln!("   {params}: wrong output: {e}");
                    "wrong-output".to_string()
                }
            },
        };
        if let Err(e) = &outcome
            && e.category() != "invalid-config"
        {
            eprintln!("   {params}: {}: {}", e.category(), e.to_string().lines().next().unwrap_or(""));
        }
        *verdicts.entry(verdict).or_default() += 1;
    }
    ranked.sort_by(|a, b| a.0.total_cmp(&b.0));
    (verdicts, ranked)
}

/// Re-time the fastest few with more repetitions and keep the best of those: a short
/// search can rank two close configurations either way. The winner's index and run.
fn retime_fastest(
    backend: &HlslBackend,
    ctx: &Context,
    candidates: &[ExecParams],
    modules: &[Result<Module, RunError>],
    ranked: &[(f64, usize)],
    args: &Args,
) -> Result<Option<(usize, RunResult)>, String> {
    let timing = RunOptions { warmup: args.warmup, repetitions: args.final_repetitions, ..RunOptions::default() };
    let mut finalists: Vec<(usize, RunResult)> = Vec::new();
    for &(_, i) in ranked.iter().take(args.refine.max(1)) {
        let module = modules[i].as_ref().expect("ranked candidates compiled");
        let r = run_compiled(backend, ctx, module, &candidates[i], &timing).map_err(|e| format!("re-timing {}: {e}", candidates[i]))?;
        finalists.push((i, r));
    }
    finalists.sort_by(|a, b| a.1.median_ms().unwrap_or(f64::INFINITY).total_cmp(&b.1.median_ms().unwrap_or(f64::INFINITY)));
    Ok(finalists.into_iter().next())
}

/// The winner's entry in the report (its error against the reference, where there is
/// one), printed, and its output, which validates the contexts tuned after it.
fn best_of(ctx: &Context, params: &ExecParams, r: RunResult, reference: Option<&HostArray>, tolerance: f64) -> Result<(Best, Option<HostArray>), String> {
    let median = r.median_ms().unwrap_or(f64::INFINITY);
    let output = r.outputs.into_iter().next().map(|(_, a)| a);
    let relative_error = match (reference, &output) {
        (Some(reference), Some(out)) => Some(compare(out, reference, tolerance).relative_error),
        _ => None,
    };
    let t = tflops(flops(ctx, params)?, median);
    eprintln!("   best {params}: {median:.3} ms, {t:.2} TFLOP/s");
    let best = Best {
        params: params_map(params),
        median_ms: median,
        min_ms: r.times_ms.iter().copied().fold(f64::INFINITY, f64::min),
        repetitions: r.times_ms.len(),
        tflops: t,
        percent_of_peak: None,
        percent_of_cublas: None,
        relative_error_vs_reference: relative_error,
    };
    Ok((best, output))
}

fn check(result: &RunResult, reference: Option<&HostArray>, tolerance: f64) -> Result<(), String> {
    let Some(reference) = reference else { return Ok(()) };
    let out = &result.outputs.first().ok_or("no output array")?.1;
    if out.dtype != reference.dtype || out.len() != reference.len() {
        return Err(format!("output is {} x {}, the reference {} x {}", out.dtype, out.len(), reference.dtype, reference.len()));
    }
    let cmp = compare(out, reference, tolerance);
    if cmp.passed {
        Ok(())
    } else {
        Err(format!("relative error {:.3e} over tolerance {:.3e} ({} non-finite)", cmp.relative_error, cmp.tolerance, cmp.non_finite))
    }
}

fn params_map(params: &ExecParams) -> BTreeMap<String, i64> {
    params.iter().map(|(k, v)| (k.to_string(), v)).collect()
}
