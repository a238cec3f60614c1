//! `peak compare A B`: both checkpoints measured in one run, on the same inputs,
//! repetitions interleaved so drift in clocks or temperature hits both sides alike.

use anyhow::{Result, anyhow};
use peak_backend::{RunOptions, runner};
use peak_spec::{Context, ExecParams};
use serde::Serialize;

use super::open_workflow;
use crate::backends;
use crate::cli::CompareArgs;
use crate::output::{format_ms, print_json};
use crate::usage;

#[derive(Serialize)]
struct Side {
    checkpoint: String,
    params: ExecParams,
    median_ms: f64,
}

#[derive(Serialize)]
struct CompareReport {
    a: Side,
    b: Side,
    /// time(a) / time(b): above 1 means B is faster.
    speedup_b_over_a: f64,
    repetitions: usize,
    device: String,
}

pub fn run(args: CompareArgs) -> Result<()> {
    let wf = open_workflow(&args.workflow)?;
    let tmp = std::env::temp_dir().join(format!("peak-compare-{}", std::process::id()));
    let load = |rev: &str, sub: &str| -> Result<Context> {
        let dir = tmp.join(sub);
        wf.materialize(rev, &dir)?;
        Context::load(&dir).map_err(|e| anyhow!("checkpoint {rev}: {e}"))
    };
    let (ctx_a, ctx_b) = (load(&args.a, "a")?, load(&args.b, "b")?);
    let result = measure(&args, &wf, &ctx_a, &ctx_b);
    let _ = std::fs::remove_dir_all(&tmp);
    let report = result?;
    if args.json {
        return print_json(&report);
    }
    println!("{:<12} {:>12}  {}", args.a, format_ms(report.a.median_ms), report.a.params);
    println!("{:<12} {:>12}  {}", args.b, format_ms(report.b.median_ms), report.b.params);
    println!("speedup of {} over {}: {:.3}x ({} interleaved repetitions on {})", args.b, args.a, report.speedup_b_over_a, args.reps, report.device);
    Ok(())
}

fn measure(args: &CompareArgs, wf: &peak_workflow::Workflow, a: &Context, b: &Context) -> Result<CompareReport> {
    let params_a = best_params(wf, &args.a, a, args)?;
    let mut params_b = best_params(wf, &args.b, b, args)?;
    // Same inputs on both sides: B takes A's input configuration.
    for (name, value) in &params_a.inputs {
        params_b.inputs.insert(name.clone(), *value);
    }
    let backend = backends::open(a.backend())?;
    let once = |ctx: &Context, params: &ExecParams| -> Result<f64> {
        let options = RunOptions { warmup: 1, repetitions: 1, data_seed: 1, ..RunOptions::default() };
        let r = runner::run(backend.as_ref(), ctx, params, &options).map_err(|e| anyhow!("{}: {e}", ctx.name()))?;
        Ok(r.times_ms[0])
    };
    let (mut ta, mut tb) = (Vec::new(), Vec::new());
    for _ in 0..args.reps.max(1) {
        ta.push(once(a, &params_a)?);
        tb.push(once(b, &params_b)?);
    }
    let (ma, mb) = (runner::median(&ta).unwrap(), runner::median(&tb).unwrap());
    Ok(CompareReport {
        a: Side { checkpoint: args.a.clone(), params: params_a, median_ms: ma },
        b: Side { checkpoint: args.b.clone(), params: params_b, median_ms: mb },
        speedup_b_over_a: ma / mb,
        repetitions: args.reps,
        device: backend.device().name.clone(),
    })
}

/// The checkpoint's best configuration from performance.json when it has one, else the
/// first point of its space; `--set` narrows either.
fn best_params(wf: &peak_workflow::Workflow, rev: &str, ctx: &Context, args: &CompareArgs) -> Result<ExecParams> {
    let mut space = ctx.space();
    space.apply_overrides(&args.set.set).map_err(|e| usage(anyhow!("--set: {e}")))?;
    let view = wf.show(rev)?;
    if let Some(best) = view.performance.get("best").and_then(|b| b.get("params"))
        && let Ok(params) = serde_json::from_value::<ExecParams>(best.clone())
        && space.iter().any(|p| p == params)
    {
        return Ok(params);
    }
    space.iter().next().ok_or_else(|| usage(anyhow!("checkpoint {rev}: no execution parameter satisfies the constraints (after --set)")))
}
