//! `peak submit FILE`: the agent's new region; the apply resumes.

use anyhow::Result;
use peak_backend::worker::launcher::Placement;

use super::{report_outcome, workers};
use crate::cli::SubmitArgs;
use crate::progress::ApplyProgress;

pub fn run(args: SubmitArgs, placement: &Placement) -> Result<()> {
    let progress = ApplyProgress::new(!args.json);
    let outcome = peak_apply::submit(&args.workflow.workflow, &args.file, &mut workers(placement), &progress);
    progress.finish();
    report_outcome(&outcome?, args.json)
}
