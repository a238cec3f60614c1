//! `peak init WORKFLOW --from CONTEXT`: a workflow whose root checkpoint is the context.

use anyhow::{Result, bail};
use peak_spec::Backend as Language;
use serde_json::json;

use super::load_context;
use crate::cli::InitArgs;
use crate::output::print_json;
use crate::usage;

pub fn run(args: InitArgs) -> Result<()> {
    let ctx = load_context(&args.from)?;
    let runs_on = match &args.backend {
        None => ctx.backend(),
        Some(name) => {
            let chosen: Language = name.parse().map_err(|e: String| usage(anyhow::anyhow!("--backend: {e}")))?;
            // HIP source runs on NVIDIA through the CUDA backend; anything else must match.
            if chosen != ctx.backend() && !(ctx.backend() == Language::Hip && chosen == Language::Cuda) {
                bail!(usage(anyhow::anyhow!("--backend {chosen}: the context is written for {}", ctx.backend())));
            }
            chosen
        }
    };
    // The reference's identity: which input configurations and which seed define "right".
    let mut inputs: Vec<serde_json::Value> = Vec::new();
    for point in ctx.space().iter() {
        let value = serde_json::to_value(&point.inputs)?;
        if !inputs.contains(&value) {
            inputs.push(value);
        }
    }
    if inputs.is_empty() {
        bail!(usage(anyhow::anyhow!("{}: no execution parameter satisfies the constraints", ctx.manifest_path().display())));
    }
    let reference = json!({
        "context": ctx.name(),
        "backend": runs_on.name(),
        "seed": args.seed,
        "inputs": inputs,
    });
    let wf = peak_workflow::Workflow::init(&args.workflow, &ctx.dir, reference.clone()).map_err(usage)?;
    let head = wf.head()?;
    if args.json {
        return print_json(&json!({ "workflow": wf.dir(), "root": head.id, "reference": reference }));
    }
    println!("initialized workflow {} with root checkpoint {} ({})", wf.dir().display(), head.id.short(), ctx.name());
    println!("  reference: {} input configuration(s), seed {}", inputs.len(), args.seed);
    Ok(())
}
