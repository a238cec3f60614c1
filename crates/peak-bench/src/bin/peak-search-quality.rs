//! Search-quality benchmark: how close do the strategies get to the exhaustive best, and
//! how fast? Replays recorded results caches (written by `peak tune --strategy
//! exhaustive`), so it needs no device and runs hundreds of seeded searches per space.
//!
//! ```text
//! peak-search-quality [--out FILE] [--seeds N] [--fraction F] [--within W]
//!                     [--device TEXT] [--commit SHA] CACHE.jsonl...
//! ```
//!
//! For each recorded space: the exhaustive best; for `auto` and `random`, over `--seeds`
//! seeded runs, the share of runs within `--within` (default 2%) of it after `--fraction`
//! (default 10%) of the space's evaluations, the ratio of the best found to the exhaustive
//! best, the evaluations needed to get within `--within`, and the median best-so-far
//! curve. Writes JSON with the command, the device, the commit and the date.
//!
//! Each space also gets a warm-start scenario, as a workflow step meets it: the search
//! starts from a parent's top-128 that lacks the best value of one parameter (each
//! parameter in turn). `carried_only` is the best of the first `budget` carried points
//! (what a search that spends its budget on them finds); `auto` is the search as `peak
//! tune --start-from` runs it (half the budget carried, then coordinate descent).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use peak_eval::cache::Outcome;
use peak_eval::simulation::{Recording, ReplayMeasurer, simulate};
use peak_eval::{SearchSpace, StrategyKind, TuneOptions, tune};
use serde::Serialize;
use serde_json::{Value, json};

struct Args {
    out: PathBuf,
    seeds: u64,
    fraction: f64,
    within: f64,
    device: Option<String>,
    commit: Option<String>,
    caches: Vec<PathBuf>,
}

fn parse_args() -> Result<Args, String> {
    let mut args =
        Args { out: "bench/results/search-quality.json".into(), seeds: 100, fraction: 0.10, within: 0.02, device: None, commit: None, caches: Vec::new() };
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let mut value = |name: &str| it.next().ok_or_else(|| format!("{name} needs a value"));
        match a.as_str() {
            "--out" => args.out = value("--out")?.into(),
            "--seeds" => args.seeds = value("--seeds")?.parse().map_err(|e| format!("--seeds: {e}"))?,
            "--fraction" => args.fraction = value("--fraction")?.parse().map_err(|e| format!("--fraction: {e}"))?,
            "--within" => args.within = value("--within")?.parse().map_err(|e| format!("--within: {e}"))?,
            "--device" => args.device = Some(value("--device")?),
            "--commit" => args.commit = Some(value("--commit")?),
            "-h" | "--help" => return Err(String::new()),
            flag if flag.starts_with("--") => return Err(format!("unknown option {flag}")),
            path => args.caches.push(path.into()),
        }
    }
    if args.caches.is_empty() {
        return Err("give at least one recorded results cache (.jsonl)".into());
    }
    if !(args.fraction > 0.0 && args.fraction <= 1.0) {
        return Err("--fraction must be in (0, 1]".into());
    }
    Ok(args)
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            if !e.is_empty() {
                eprintln!("error: {e}");
            }
            eprintln!("usage: peak-search-quality [--out FILE] [--seeds N] [--fraction F] [--within W] [--device TEXT] [--commit SHA] CACHE.jsonl...");
            return ExitCode::from(2);
        }
    };
    match run(&args) {
        Ok(met) => {
            if met {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            }
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(1)
        }
    }
}

fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() - 1) as f64 * q).round() as usize;
    sorted[i]
}

fn run(args: &Args) -> Result<bool, String> {
    let mut spaces = Vec::new();
    let mut all_met = true;
    for path in &args.caches {
        let recording = Recording::load(path).map_err(|e| e.to_string())?;
        for (inputs, _) in &recording.groups {
            let (space, outcomes) = recording.space(inputs).map_err(|e| e.to_string())?;
            let (met, report) = space_quality(args, path, &recording, inputs, &space, &outcomes)?;
            all_met &= met;
            spaces.push(report);
        }
    }
    write_report(args, spaces, all_met)?;
    Ok(all_met)
}

/// One recorded space: its exhaustive best, how close each strategy gets to it, and the
/// warm-start scenario, printed and as the report's entry; whether `auto` met the target.
fn space_quality(
    args: &Args,
    path: &Path,
    recording: &Recording,
    inputs: &impl Serialize,
    space: &SearchSpace,
    outcomes: &[Outcome],
) -> Result<(bool, Value), String> {
    let n = space.len();
    let best = outcomes.iter().filter_map(|o| o.cost()).fold(f64::INFINITY, f64::min);
    if !best.is_finite() {
        return Err(format!("{}: no configuration has a valid time", path.display()));
    }
    let budget = ((n as f64 * args.fraction).ceil() as usize).max(1);
    let name = path.file_name().map(|f| f.to_string_lossy()).unwrap_or_default();
    let mut per_strategy = serde_json::Map::new();
    let mut auto_rate = 0.0;
    let mut random_rate = 0.0;
    for kind in [StrategyKind::Auto, StrategyKind::Random] {
        let (success, summary) = strategy_quality(args, &name, space, outcomes, kind, best, budget)?;
        match kind {
            StrategyKind::Auto => auto_rate = success,
            _ => random_rate = success,
        }
        per_strategy.insert(kind.name().into(), summary);
    }
    let warm = warm_start(space, outcomes, best, budget, args.within, args.seeds.min(5))?;
    eprintln!(
        "{:<40} warm start (carried ranking lacks one parameter's best value): carried only {:.0}% within, auto {:.0}% within",
        name,
        warm["carried_only"]["success_rate"].as_f64().unwrap_or(0.0) * 100.0,
        warm["auto"]["success_rate"].as_f64().unwrap_or(0.0) * 100.0
    );
    let met = auto_rate >= 0.9;
    let report = json!({
        "cache": path.display().to_string(),
        "source_hash": recording.identity.source_hash,
        "device": recording.identity.device,
        "inputs": inputs,
        "configurations": n,
        "dimensions": space.names(),
        "exhaustive_best_ms": best,
        "budget": budget,
        "curve_evaluations": format!("1..={budget}"),
        "strategies": Value::Object(per_strategy),
        "warm_start": warm,
        "target_met": met,
        "auto_beats_random": auto_rate > random_rate,
    });
    Ok((met, report))
}

/// One strategy over `--seeds` seeded runs on one space (`name`): its share of runs within
/// `--within` of the exhaustive `best` after `budget` evaluations, printed, and its summary.
fn strategy_quality(
    args: &Args,
    name: &str,
    space: &SearchSpace,
    outcomes: &[Outcome],
    kind: StrategyKind,
    best: f64,
    budget: usize,
) -> Result<(f64, Value), String> {
    let n = space.len();
    let target = best * (1.0 + args.within);
    let mut ratios = Vec::new();
    let mut reach = Vec::new();
    let mut curves: Vec<Vec<f64>> = Vec::new();
    for seed in 1..=args.seeds {
        // The search told its budget (as `peak tune --budget` does), and the
        // same search with the whole space as budget, for how far it must go.
        let trace = simulate(space, outcomes, kind, seed, budget).map_err(|e| e.to_string())?;
        let at = |k: usize| trace.get(k.min(trace.len()).saturating_sub(1)).copied().flatten().unwrap_or(f64::INFINITY);
        ratios.push(at(budget) / best);
        curves.push((1..=budget).map(|k| at(k) / best).collect());
        let long = simulate(space, outcomes, kind, seed, n).map_err(|e| e.to_string())?;
        reach.push(long.iter().position(|b| b.is_some_and(|b| b <= target)).map(|i| i + 1).unwrap_or(n) as f64);
    }
    let success = ratios.iter().filter(|r| **r <= 1.0 + args.within).count() as f64 / ratios.len() as f64;
    ratios.sort_by(f64::total_cmp);
    reach.sort_by(f64::total_cmp);
    let median_curve: Vec<f64> = (0..budget)
        .map(|k| {
            let mut column: Vec<f64> = curves.iter().map(|c| c[k]).collect();
            column.sort_by(f64::total_cmp);
            quantile(&column, 0.5)
        })
        .collect();
    eprintln!(
        "{:<40} {:<6} within {:.0}% after {budget} of {n}: {:>5.1}% of runs; best/exhaustive median {:.4}, worst {:.4}; evaluations to reach it: median {}, p90 {}",
        name,
        kind.name(),
        args.within * 100.0,
        success * 100.0,
        quantile(&ratios, 0.5),
        ratios.last().copied().unwrap_or(f64::NAN),
        quantile(&reach, 0.5),
        quantile(&reach, 0.9)
    );
    let summary = json!({
        "success_rate": success,
        "best_ratio": { "median": quantile(&ratios, 0.5), "p90": quantile(&ratios, 0.9), "worst": ratios.last() },
        "evaluations_to_within": { "median": quantile(&reach, 0.5), "p90": quantile(&reach, 0.9), "max": reach.last() },
        "median_best_ratio_curve": median_curve,
    });
    Ok((success, summary))
}

/// The report: the spaces' entries with the command, the device, the commit and the date.
fn write_report(args: &Args, spaces: Vec<Value>, all_met: bool) -> Result<(), String> {
    let report = json!({
        "benchmark": "search-quality",
        "command": std::env::args().collect::<Vec<_>>().join(" "),
        "device": args.device.clone().unwrap_or_else(|| "recorded caches (see each space's device)".into()),
        "commit": peak_bench::commit(args.commit.clone()),
        "date": peak_bench::date(),
        "target": format!("auto within {:.0}% of the exhaustive best using at most {:.0}% of the evaluations, in at least 90% of {} seeded runs", args.within * 100.0, args.fraction * 100.0, args.seeds),
        "seeds": args.seeds,
        "spaces": spaces,
        "target_met": all_met,
    });
    if let Some(dir) = args.out.parent() {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    std::fs::write(&args.out, serde_json::to_string_pretty(&report).expect("json") + "\n").map_err(|e| format!("{}: {e}", args.out.display()))?;
    eprintln!("wrote {}", args.out.display());
    Ok(())
}

/// The warm-start scenario (see the module docs), over every parameter and `seeds` seeds.
fn warm_start(space: &SearchSpace, outcomes: &[Outcome], best: f64, budget: usize, within: f64, seeds: u64) -> Result<Value, String> {
    let cost = |i: usize| outcomes[i].cost().unwrap_or(f64::INFINITY);
    let best_point = (0..space.len()).min_by(|&a, &b| cost(a).total_cmp(&cost(b))).ok_or("an empty space")?;
    let (mut carried_ratios, mut auto_ratios) = (Vec::new(), Vec::new());
    for d in 0..space.dims() {
        let best_value = space.point(best_point)[d];
        let mut carried: Vec<usize> = (0..space.len()).filter(|&i| space.point(i)[d] != best_value && outcomes[i].cost().is_some()).collect();
        carried.sort_by(|&a, &b| cost(a).total_cmp(&cost(b)));
        carried.truncate(128);
        if carried.is_empty() {
            continue;
        }
        carried_ratios.push(carried.iter().take(budget).map(|&i| cost(i)).fold(f64::INFINITY, f64::min) / best);
        let start_from: Vec<_> = carried.iter().map(|&i| space.tuning(i)).collect();
        for seed in 1..=seeds {
            let mut measurer = ReplayMeasurer::new(outcomes.to_vec());
            let options = TuneOptions { budget: Some(budget), seed, top_k: 1, start_from: start_from.clone(), ..TuneOptions::default() };
            let run = tune(space, &mut measurer, None, &options, &()).map_err(|e| e.to_string())?;
            auto_ratios.push(run.best.map_or(f64::INFINITY, |e| e.median_ms) / best);
        }
    }
    let summary = |ratios: &[f64]| {
        let hits = ratios.iter().filter(|r| **r <= 1.0 + within).count();
        json!({ "runs": ratios.len(), "success_rate": hits as f64 / ratios.len().max(1) as f64, "mean_ratio": ratios.iter().sum::<f64>() / ratios.len().max(1) as f64 })
    };
    Ok(json!({ "carried": 128, "seeds_per_parameter": seeds, "carried_only": summary(&carried_ratios), "auto": summary(&auto_ratios) }))
}
