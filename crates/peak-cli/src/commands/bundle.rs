//! `peak bundle WORKFLOW FILE`: the whole workflow in one file (every branch and tag, and
//! the attempts log), to carry to the GPU machine and back.

use anyhow::Result;

use crate::cli::BundleArgs;
use crate::output::print_json;
use crate::usage;

pub fn run(args: BundleArgs) -> Result<()> {
    let mut wf = peak_workflow::Workflow::open(&args.workflow).map_err(usage)?;
    let summary = wf.bundle(&args.file)?;
    if args.json {
        return print_json(&summary);
    }
    let count = |prefix: &str| summary.refs.iter().filter(|r| r.starts_with(prefix)).count();
    println!(
        "packed {} into {} ({} checkpoint(s), {} branch(es) and {} tag(s), {} attempt record(s); {} KB)",
        wf.dir().display(),
        summary.file.display(),
        summary.checkpoints,
        count("refs/heads/"),
        count("refs/tags/"),
        summary.attempts,
        summary.bytes.div_ceil(1024)
    );
    println!("  there: peak replay {} --into NEW", summary.file.display());
    Ok(())
}
