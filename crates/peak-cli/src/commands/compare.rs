//! `peak compare A B`: both checkpoints measured in one run, on the same inputs,
//! repetitions interleaved so drift in clocks or temperature hits both sides alike
//! (`peak_eval::compare`, in the crash-isolated worker; the MCP server's `compare` tool
//! calls the same function).

use anyhow::{Result, anyhow};
use peak_backend::worker::launcher::Placement;
use peak_eval::EvalError;
use peak_eval::compare::{CompareReport, best_params, compare};
use peak_spec::Context;

use super::{open_workflow, workers};
use crate::cli::CompareArgs;
use crate::output::{format_ms, print_json};
use crate::usage;

pub fn run(args: CompareArgs, placement: &Placement) -> Result<()> {
    let wf = open_workflow(&args.workflow)?;
    let tmp = std::env::temp_dir().join(format!("peak-compare-{}", std::process::id()));
    let load = |rev: &str, sub: &str| -> Result<Context> {
        let dir = tmp.join(sub);
        wf.materialize(rev, &dir)?;
        Context::load(&dir).map_err(|e| anyhow!("checkpoint {rev}: {e}"))
    };
    let (ctx_a, ctx_b) = (load(&args.a, "a")?, load(&args.b, "b")?);
    let result = measure(&args, &wf, &ctx_a, &ctx_b, placement);
    let _ = std::fs::remove_dir_all(&tmp);
    let report = result?;
    if args.json {
        return print_json(&report);
    }
    for (label, side) in [(&args.a, &report.a), (&args.b, &report.b)] {
        println!("{label:<12} {:>12}  {}", format_ms(side.median_ms), side.params);
        println!("{:<12} spread {}", "", side.spread.describe(format_ms));
    }
    println!("{}", report.summary());
    Ok(())
}

fn measure(args: &CompareArgs, wf: &peak_workflow::Workflow, a: &Context, b: &Context, placement: &Placement) -> Result<CompareReport> {
    // A checkpoint whose space `--set` empties is the user's to fix.
    let params = |rev: &str, ctx: &Context| match best_params(&wf.show(rev)?.performance, ctx, &args.set.set) {
        Err(e @ EvalError::Space { .. }) => Err(usage(anyhow!("checkpoint {rev}: {e}"))),
        other => Ok(other?),
    };
    let (params_a, params_b) = (params(&args.a, a)?, params(&args.b, b)?);
    Ok(compare(&mut workers(placement), (&args.a, a, params_a), (&args.b, b, params_b), args.reps, args.cache.flush())?)
}
