//! `peak branch NAME [--from CKPT]`.

use anyhow::Result;

use super::open_workflow;
use crate::cli::BranchArgs;
use crate::output::print_json;

pub fn run(args: BranchArgs) -> Result<()> {
    let mut wf = open_workflow(&args.workflow)?;
    let id = wf.branch(&args.name, args.from.as_deref())?;
    if args.json {
        return print_json(&serde_json::json!({ "branch": args.name, "checkpoint": id }));
    }
    println!("branch {} starts at {} (use `peak checkout {}` to work on it)", args.name, id.short(), args.name);
    Ok(())
}
