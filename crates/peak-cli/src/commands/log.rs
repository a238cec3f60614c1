//! `peak log`: the checkpoints, with speedups, each time with its inputs (`--sizes`: every size tuned).

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
    let table = if args.sizes { peak_workflow::render_log_sizes(&entries) } else { peak_workflow::render_log(&entries) };
    print!("{table}");
    Ok(())
}
