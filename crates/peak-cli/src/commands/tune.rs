//! `peak tune CONTEXT`: find the fastest tuning parameters within a budget.
//!
//! Variants compile in parallel in a crash-isolated worker while the device times them one
//! at a time; every variant's outputs are checked against the reference (by default the
//! context's own first configuration) before its time counts; results go to a durable
//! cache, so running the command again (or after a kill) measures nothing twice. Each
//! input configuration is tuned on its own.

use std::path::Path;
use std::time::Duration;

use anyhow::{Context as _, Result, anyhow};
use peak_backend::worker::PoolOptions;
use peak_backend::worker::launcher::Placement;
use peak_eval::tune::TopK;
use peak_eval::{StrategyKind, TuneOptions, TuneReport, TuneSetup, Workers, default_cache_dir, tune_context, tuning_run_options};
use peak_spec::{Context, ExecParams};
use serde::Serialize;

use super::{load_context, restricted_space};
use crate::cli::TuneArgs;
use crate::output::{format_ms, print_json};
use crate::progress::Bar;
use crate::usage;

#[derive(Serialize)]
struct Summary<'a> {
    strategy: &'static str,
    #[serde(flatten)]
    report: &'a TuneReport,
    /// Per input configuration: the winner, its time and rate, and why it won.
    winners: Vec<Winner>,
}

#[derive(Serialize)]
struct Winner {
    params: ExecParams,
    median_ms: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    tflops: Option<f64>,
    why: String,
}

pub fn run(args: TuneArgs, placement: &Placement) -> Result<()> {
    let ctx = load_context(&args.context)?;
    let reference = args.against.as_deref().map(load_context).transpose()?;
    let space = restricted_space(&ctx, &args.set)?;
    let strategy: StrategyKind = args.strategy.parse().map_err(|e: String| usage(anyhow!("--strategy: {e}")))?;
    let start_from = match &args.start_from {
        Some(file) => read_top(file)?.iter().flat_map(|t| t.start_points()).collect(),
        None => Vec::new(),
    };
    let mut run = tuning_run_options();
    run.warmup = args.warmup;
    run.repetitions = args.reps.max(1);
    run.input_sets = args.input_sets.max(1);
    run.flush_cache = args.cache.flush();
    let cache_dir = args.cache_dir.clone().unwrap_or_else(default_cache_dir);
    let timeout = Duration::from_secs_f64(args.timeout);
    let options =
        TuneOptions { strategy, budget: args.budget, time_limit: args.time.map(Duration::from_secs_f64), top_k: args.top.max(1), seed: args.seed, start_from };
    let setup = TuneSetup {
        no_cache: args.no_cache,
        no_validation: args.no_validate,
        run,
        timeout: Some(timeout),
        prune_spills: args.prune_spills,
        ..TuneSetup::new(&ctx, &space, reference.as_ref(), &cache_dir, options)
    };
    let mut workers = Workers::peak(PoolOptions { run_timeout: timeout, ..PoolOptions::default() }, placement.clone());
    let bar = Bar::new(!args.json);
    let report = tune_context(&mut workers, &setup, &bar)?;
    bar.finish();

    if let Some(file) = &args.top_out {
        let tops: Vec<TopK> = report
            .runs
            .iter()
            .map(|r| TopK { source_hash: report.source_hash.clone(), device: report.device.clone(), inputs: r.inputs.clone(), entries: r.top.clone() })
            .collect();
        let text = serde_json::to_string_pretty(&tops)?;
        std::fs::write(file, text).with_context(|| format!("writing {}", file.display()))?;
    }
    let winners: Vec<Winner> = report
        .runs
        .iter()
        .filter_map(|r| {
            let best = r.best.as_ref()?;
            let params = ExecParams { inputs: r.inputs.clone(), tuning: best.tuning.clone() };
            let tflops = ctx.flops(&params).map(|f| f / (best.median_ms * 1e-3) / 1e12);
            Some(Winner { params, median_ms: best.median_ms, tflops, why: r.why.clone() })
        })
        .collect();
    if args.json {
        return print_json(&Summary { strategy: strategy.name(), report: &report, winners });
    }
    print_text(&ctx, &report);
    if report.runs.iter().all(|r| r.best.is_none()) {
        return Err(anyhow!("no configuration produced a valid time\nhint: run `peak validate` on the context to see why its variants fail"));
    }
    Ok(())
}

fn read_top(file: &Path) -> Result<Vec<TopK>> {
    let text = std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display())).map_err(usage)?;
    serde_json::from_str(&text).with_context(|| format!("{}: not a top-K file written by `peak tune --top-out`", file.display())).map_err(usage)
}

fn print_text(ctx: &Context, report: &TuneReport) {
    println!("{} on {}", ctx.name(), report.device);
    for r in &report.runs {
        let inputs: Vec<String> = r.inputs.iter().map(|(k, v)| format!("{k}={v}")).collect();
        println!("  inputs   {}", inputs.join(" "));
        match &r.best {
            Some(best) => {
                let params = ExecParams { inputs: r.inputs.clone(), tuning: best.tuning.clone() };
                let rate = ctx.flops(&params).map(|f| format!("  {:.3} TFLOP/s", f / (best.median_ms * 1e-3) / 1e12)).unwrap_or_default();
                let tuning: Vec<String> = best.tuning.iter().map(|(k, v)| format!("{k}={v}")).collect();
                println!("  best     {}  {}{rate}", tuning.join(" "), format_ms(best.median_ms));
                if let Some(spread) = &best.spread {
                    println!("  spread   {}", spread.describe(format_ms));
                }
                println!("  why      {}", r.why);
            }
            None => println!("  best     none: {}", r.why),
        }
        println!(
            "  searched {} of {} configurations ({} measured, {} from the cache) in {:.1} s, {:.1} configurations/s; stopped: {:?}",
            r.evaluations, r.space, r.measured, r.cached, r.elapsed_s, r.evaluations_per_s, r.stopped
        );
        let constraint_pruned: usize = r.pruned.constraints.iter().map(|c| c.rejected).sum();
        if constraint_pruned + r.pruned.compile_report + r.pruned.launch > 0 {
            println!("  pruned   {constraint_pruned} by constraints, {} by compile reports, {} at launch", r.pruned.compile_report, r.pruned.launch);
        }
        for example in &r.failure_examples {
            let count = r.failures.get(example.verdict.category()).copied().unwrap_or(0);
            let tuning: Vec<String> = example.tuning.iter().map(|(k, v)| format!("{k}={v}")).collect();
            println!("  failed   {count} {}: e.g. {}: {}", example.verdict.category(), tuning.join(" "), example.verdict.summary());
        }
    }
    if let Some(cache) = &report.cache {
        println!("  cache    {} ({} results were already there)", cache.path.display(), cache.loaded);
        if cache.shared {
            eprintln!("note: another peak process holds this results cache; this run read its results and did not add its own");
        }
        if let Some(line) = cache.torn_tail {
            eprintln!("note: the cache's last line ({line}) was cut short, probably by a killed run; it was dropped");
        }
    }
    if report.worker_restarts > 0 {
        eprintln!("note: the worker was restarted {} times after crashes or time-outs", report.worker_restarts);
    }
}
