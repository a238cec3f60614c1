//! `peak fsck`: verify a workflow, and the apply it may hold.

use anyhow::Result;

use super::open_workflow;
use crate::Failed;
use crate::cli::FsckArgs;
use crate::output::print_json;

pub fn run(args: FsckArgs) -> Result<()> {
    let wf = open_workflow(&args.workflow)?;
    // The workflow's checks and the apply it may hold (an interrupted or stale one).
    let findings = peak_apply::fsck(wf.dir(), args.repair)?;
    let open: Vec<_> = findings.iter().filter(|f| !f.repaired).collect();
    if args.json {
        print_json(&findings)?;
    } else {
        for f in &findings {
            println!("{}{f}", if f.repaired { "repaired: " } else { "" });
        }
        if open.is_empty() {
            println!("workflow {} is consistent", wf.dir().display());
        }
    }
    if open.is_empty() { Ok(()) } else { Err(Failed.into()) }
}
