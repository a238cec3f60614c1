//! `peak apply TRANSFORMATION`: carry a transformation out from the current checkpoint.

use anyhow::{Result, anyhow};
use peak_backend::worker::launcher::Placement;

use super::{apply_options, report_outcome, workers};
use crate::cli::ApplyArgs;
use crate::progress::ApplyProgress;
use crate::usage;

pub fn run(args: ApplyArgs, placement: &Placement) -> Result<()> {
    if args.abandon {
        let had = peak_apply::abandon(&args.workflow.workflow)?;
        println!("{}", if had { "abandoned the apply in progress" } else { "no apply was in progress" });
        return Ok(());
    }
    if args.resume {
        let progress = ApplyProgress::new(!args.json);
        let outcome = peak_apply::resume(&args.workflow.workflow, &mut workers(placement), &progress);
        progress.finish();
        return report_outcome(&outcome?, args.json);
    }
    let transformation = args.transformation.clone().ok_or_else(|| usage(anyhow!("name a transformation (see `peak transformations`)")))?;
    let defer = args.defer.then(|| peak_apply::Defer { arch: Some(args.arch.clone()) });
    let options = peak_apply::ApplyOptions { transformation, executor: args.executor.clone(), retries: args.retries, defer, ..apply_options(&args.measure) };
    let progress = ApplyProgress::new(!args.json);
    let outcome = peak_apply::apply(&args.workflow.workflow, &options, &mut workers(placement), &progress);
    progress.finish();
    report_outcome(&outcome?, args.json)
}
