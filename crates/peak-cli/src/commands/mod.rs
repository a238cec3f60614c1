//! One module per command.

pub mod branch;
pub mod baseline;
pub mod check;
pub mod compile;
pub mod checkout;
pub mod compare;
pub mod diff;
pub mod fsck;
pub mod info;
pub mod init;
pub mod log;
pub mod profile;
pub mod run;
pub mod show;
pub mod tag;
pub mod transformations;
pub mod tune;
pub mod validate;
pub mod worker;

use anyhow::{Context as _, Result};
use peak_spec::{Context, ExecParams, Space};

use crate::cli::SetArgs;
use crate::usage;

/// Load a context folder; an unreadable or invalid one is a usage error.
pub fn load_context(path: &std::path::Path) -> Result<Context> {
    Context::load(path).map_err(usage)
}

/// The context's space restricted by `--set`.
pub fn restricted_space(ctx: &Context, set: &SetArgs) -> Result<Space> {
    let mut space = ctx.space();
    space.apply_overrides(&set.set).map_err(|e| usage(anyhow::anyhow!("--set: {e}")))?;
    Ok(space)
}

/// The first valid execution parameter after `--set`, or a clear error when none is left.
pub fn first_point(ctx: &Context, space: &Space) -> Result<ExecParams> {
    space
        .iter()
        .next()
        .with_context(|| format!("{}: no execution parameter satisfies the constraints (after --set)", ctx.manifest_path().display()))
        .map_err(usage)
}

/// Open the workflow a command works on; a folder that is not one is a usage error.
pub fn open_workflow(arg: &crate::cli::WorkflowArg) -> Result<peak_workflow::Workflow> {
    peak_workflow::Workflow::open(&arg.workflow).map_err(usage)
}
