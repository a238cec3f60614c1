//! `peak run CONTEXT`: compile, fill, launch, time one execution parameter.

use anyhow::{Result, anyhow};
use peak_backend::{Spread, runner};
use peak_spec::ExecParams;
use peak_spec::data::ArraySummary;
use serde::Serialize;

use super::{first_point, load_context, restricted_space};
use crate::backends;
use crate::cli::RunArgs;
use crate::output::{format_ms, print_json};

#[derive(Serialize)]
struct RunReport {
    context: String,
    kernel: String,
    backend: String,
    device: String,
    params: ExecParams,
    /// Other points that `--set` left open; `run` takes the first.
    other_points: usize,
    warmup: usize,
    repetitions: usize,
    median_ms: Option<f64>,
    min_ms: Option<f64>,
    /// Count, min, quartiles and max of `times_ms` (`peak_backend::timing`).
    spread: Option<Spread>,
    /// Bytes written before every timed run to evict the cache (absent: not flushed).
    #[serde(skip_serializing_if = "Option::is_none")]
    flushed_bytes: Option<usize>,
    times_ms: Vec<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tflops: Option<f64>,
    launches: usize,
    outputs: Vec<OutputReport>,
}

#[derive(Serialize)]
struct OutputReport {
    name: String,
    #[serde(flatten)]
    summary: ArraySummary,
}

pub fn run(args: RunArgs) -> Result<()> {
    let ctx = load_context(&args.context)?;
    let space = restricted_space(&ctx, &args.set)?;
    let params = first_point(&ctx, &space)?;
    let other_points = space.iter().take(1001).count().saturating_sub(1);
    let backend = backends::open(ctx.backend())?;
    let options = super::timing_options(&args.timing);
    let result = runner::run(backend.as_ref(), &ctx, &params, &options).map_err(|e| anyhow!("{} ({}): {e}", ctx.name(), params))?;
    let median_ms = result.median_ms();
    let report = RunReport {
        context: ctx.dir.display().to_string(),
        kernel: ctx.name().to_string(),
        backend: ctx.backend().to_string(),
        device: backend.device().name.clone(),
        params: params.clone(),
        other_points,
        warmup: args.timing.warmup,
        repetitions: args.timing.reps,
        median_ms,
        min_ms: result.times_ms.iter().copied().reduce(f64::min),
        spread: result.spread(),
        flushed_bytes: result.flushed_bytes,
        tflops: median_ms.and_then(|ms| ctx.flops(&params).map(|f| f / (ms * 1e-3) / 1e12)),
        times_ms: result.times_ms.clone(),
        launches: result.launches,
        outputs: result.outputs.iter().map(|(name, a)| OutputReport { name: name.clone(), summary: a.summary() }).collect(),
    };
    if args.json {
        return print_json(&report);
    }
    if other_points > 0 {
        eprintln!(
            "note: {} more execution parameters match; running the first (narrow it with --set)",
            if other_points >= 1000 { "1000+".to_string() } else { other_points.to_string() }
        );
    }
    println!("{} on {} ({})", report.kernel, report.device, report.backend);
    println!("  params   {params}");
    match &report.spread {
        Some(spread) => {
            let rate = report.tflops.map(|t| format!("  {:.3} TFLOP/s", t)).unwrap_or_default();
            println!("  time     {} median of {}{rate}", format_ms(spread.median_ms), spread.count);
            println!("  spread   {}", spread.describe(format_ms));
            println!("  cache    {}", cache_note(report.flushed_bytes));
        }
        None => println!("  time     not measured (--reps 0)"),
    }
    for o in &report.outputs {
        let s = &o.summary;
        let nan = if s.nan > 0 { format!("  {} NaN", s.nan) } else { String::new() };
        println!("  output   {:<8} {} elements  digest {}  sum {:.6e}  range [{:.4}, {:.4}]{nan}", o.name, s.elements, s.digest, s.sum, s.min, s.max);
    }
    Ok(())
}

/// How the cache was treated before each timed run, for people.
pub(crate) fn cache_note(flushed_bytes: Option<usize>) -> String {
    match flushed_bytes {
        Some(bytes) => format!("flushed before every run ({} MiB written, outside the timed interval)", bytes >> 20),
        None => "not flushed (--no-flush-cache, or a device whose cache peak does not flush: a CPU)".into(),
    }
}
