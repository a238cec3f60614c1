//! `peak report WORKFLOW...`: the paper's figures and tables from workflows' records,
//! as terminal tables, `--json`, and with `--html FILE` one self-contained page.

use anyhow::{Context as _, Result};

use crate::cli::ReportArgs;
use crate::output::print_json;

pub fn run(args: ReportArgs) -> Result<()> {
    for path in &args.workflows {
        if !path.exists() {
            return Err(crate::usage(anyhow::anyhow!("{}: no such workflow folder or bundle file", path.display())));
        }
    }
    let report = peak_report::gather(&args.workflows)?;
    if let Some(file) = &args.html {
        let page = peak_report::html::render(&report)?;
        std::fs::write(file, page).with_context(|| format!("writing {}", file.display()))?;
        eprintln!("report: wrote {}", file.display());
    }
    if args.json {
        return print_json(&report);
    }
    print!("{}", peak_report::tables::render(&report));
    Ok(())
}
