//! `peak fsck`: verify a workflow.

use anyhow::Result;

use super::open_workflow;
use crate::Failed;
use crate::cli::FsckArgs;
use crate::output::print_json;

pub fn run(args: FsckArgs) -> Result<()> {
    let mut wf = open_workflow(&args.workflow)?;
    let findings = wf.fsck(args.repair)?;
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
