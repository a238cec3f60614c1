//! `peak tag NAME [CKPT]`.

use anyhow::Result;

use super::open_workflow;
use crate::cli::TagArgs;
use crate::output::print_json;

pub fn run(args: TagArgs) -> Result<()> {
    let mut wf = open_workflow(&args.workflow)?;
    let id = wf.tag(&args.name, args.checkpoint.as_deref())?;
    if args.json {
        return print_json(&serde_json::json!({ "tag": args.name, "checkpoint": id }));
    }
    println!("tagged {} as {}", id.short(), args.name);
    Ok(())
}
