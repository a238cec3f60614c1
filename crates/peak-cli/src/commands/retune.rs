//! `peak retune`: tune the current checkpoint again, further, and record it as a checkpoint.

use anyhow::Result;
use peak_backend::worker::launcher::Placement;

use super::{report_outcome, workers};
use crate::cli::RetuneArgs;
use crate::progress::ApplyProgress;

pub fn run(args: RetuneArgs, placement: &Placement) -> Result<()> {
    let defaults = peak_apply::Settings::default();
    let settings = peak_apply::Settings {
        seed: args.seed,
        // A retune validates no samples; it sanitizes only its winner.
        sanitizer: args.sanitizer.settings(defaults.sanitizer.samples),
        tuning: peak_apply::TuningSettings { budget: Some(args.budget), time_limit: args.time.map(std::time::Duration::from_secs_f64) },
        set: args.set.set.clone(),
        ..defaults
    };
    let options = peak_apply::ApplyOptions { settings, ..peak_apply::ApplyOptions::default() };
    let progress = ApplyProgress::new(!args.json);
    let outcome = peak_apply::retune(&args.workflow.workflow, &options, "user", &mut workers(placement), &progress);
    progress.finish();
    report_outcome(&outcome?, args.json)
}
