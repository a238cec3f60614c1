//! `peak retune`: tune the current checkpoint again, further, and record it as a checkpoint.

use anyhow::Result;

use super::{report_outcome, workers};
use crate::cli::RetuneArgs;
use crate::progress::ApplyProgress;

pub fn run(args: RetuneArgs) -> Result<()> {
    let options = peak_apply::ApplyOptions {
        sanitize: args.sanitizer.sanitize.clone(),
        sanitize_winner: !args.sanitizer.no_sanitize_winner,
        sanitize_at: args.sanitizer.sanitize_at.clone(),
        seed: args.seed,
        budget: Some(args.budget),
        time_limit: args.time.map(std::time::Duration::from_secs_f64),
        set: args.set.set.clone(),
        ..peak_apply::ApplyOptions::default()
    };
    let progress = ApplyProgress::new(!args.json);
    let outcome = peak_apply::retune(&args.workflow.workflow, &options, "user", &mut workers(), &progress);
    progress.finish();
    report_outcome(&outcome?, args.json)
}
