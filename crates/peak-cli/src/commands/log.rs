//! `peak log`: the checkpoints, with speedups.

use anyhow::Result;

use super::open_workflow;
use crate::cli::LogArgs;
use crate::output::print_json;

pub fn run(args: LogArgs) -> Result<()> {
    let wf = open_workflow(&args.workflow)?;
    let entries = wf.log()?;
    if args.json {
        return print_json(&entries);
    }
    print!("{}", peak_workflow::render_log(&entries));
    Ok(())
}
