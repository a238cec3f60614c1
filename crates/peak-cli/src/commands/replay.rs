//! `peak replay SOURCE --into NEW [--branch NAME]`: reproduce a recorded workflow (a
//! folder or a bundle file) on this machine, validating and tuning every step.

use anyhow::Result;
use peak_backend::worker::launcher::Placement;

use super::{apply_options, report_outcome, workers};
use crate::cli::ReplayArgs;
use crate::progress::ApplyProgress;

pub fn run(args: ReplayArgs, placement: &Placement) -> Result<()> {
    let progress = ApplyProgress::new(!args.json);
    let outcomes = peak_apply::replay(&args.source, args.branch.as_deref(), &args.into, &apply_options(&args.measure), &mut workers(placement), &progress);
    progress.finish();
    let outcomes = outcomes?;
    if args.json {
        return crate::output::print_json(&outcomes);
    }
    for outcome in &outcomes {
        report_outcome(outcome, false)?;
    }
    println!("replayed {} step(s) into {}", outcomes.len(), args.into.display());
    Ok(())
}
