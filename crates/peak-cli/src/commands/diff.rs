//! `peak diff A B`: per-region code diff, tuning and performance deltas.

use anyhow::Result;

use super::open_workflow;
use crate::cli::DiffArgs;
use crate::output::print_json;

pub fn run(args: DiffArgs) -> Result<()> {
    let wf = open_workflow(&args.workflow)?;
    let diff = wf.diff(&args.a, &args.b)?;
    if args.json {
        return print_json(&diff);
    }
    print!("{diff}");
    Ok(())
}
