//! `peak checkout CKPT|NAME`: restore a checkpoint's context into the working folder.

use anyhow::Result;

use super::open_workflow;
use crate::cli::CheckoutArgs;
use crate::output::print_json;

pub fn run(args: CheckoutArgs) -> Result<()> {
    let mut wf = open_workflow(&args.workflow)?;
    let head = wf.checkout(&args.target, args.force)?;
    if args.json {
        return print_json(&head);
    }
    match &head.branch {
        Some(branch) => println!("on branch {branch} at {}; context restored in {}", head.id.short(), wf.context_dir().display()),
        None => println!("at {} (detached: branch before adding checkpoints); context restored in {}", head.id.short(), wf.context_dir().display()),
    }
    Ok(())
}
