//! `peak pending`: the prompt the agent executor is waiting on.

use anyhow::Result;

use crate::cli::PendingArgs;
use crate::output::print_json;

pub fn run(args: PendingArgs) -> Result<()> {
    let pending = peak_apply::pending(&args.workflow.workflow)?;
    if args.json {
        return print_json(&pending);
    }
    match pending {
        Some(peak_apply::ApplyOutcome::Waiting { prompt, .. }) => print!("{prompt}"),
        _ => eprintln!("nothing is waiting for a submission"),
    }
    Ok(())
}
