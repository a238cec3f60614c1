//! `peak init WORKFLOW --from CONTEXT`: a workflow whose root checkpoint is the context,
//! tuned so later checkpoints have a speedup over it.

use anyhow::{Result, bail};
use peak_backend::worker::launcher::Placement;
use peak_record::{PerformanceRecord, Record, ReferenceRecord};
use peak_spec::Language;
use serde_json::json;

use super::{load_context, workers};
use crate::cli::InitArgs;
use crate::output::{format_ms, print_json};
use crate::progress::Bar;
use crate::usage;

pub fn run(args: InitArgs, placement: &Placement) -> Result<()> {
    let ctx = load_context(&args.from)?;
    if let Some(name) = &args.backend {
        let chosen: Language = name.parse().map_err(|e: String| usage(anyhow::anyhow!("--backend: {e}")))?;
        if chosen != ctx.backend() {
            bail!(usage(anyhow::anyhow!("--backend {chosen}: the context is written for {}", ctx.backend())));
        }
    }
    let m = &args.measure;
    let options = peak_apply::InitOptions { measure: !args.no_measure, settings: m.settings() };
    let bar = Bar::new(!args.json);
    let wf = peak_apply::init_workflow(&args.workflow, &args.from, &options, &mut workers(placement), &bar);
    bar.finish();
    let wf = wf.map_err(|e| if e.downcast_ref::<peak_workflow::WorkflowError>().is_some() { usage(e) } else { e })?;
    let root = wf.show("root")?;
    if args.json {
        return print_json(&json!({ "workflow": wf.dir(), "root": root.id, "reference": root.reference, "performance": root.performance }));
    }
    let inputs = ReferenceRecord::from_json(&root.reference).unwrap_or_default().inputs.len();
    println!("initialized workflow {} with root checkpoint {} ({})", wf.dir().display(), root.id.short(), ctx.name());
    println!("  reference: {inputs} input configuration(s), seed {}", m.seed);
    if let Some(best) = PerformanceRecord::from_json(&root.performance).unwrap_or_default().best {
        println!("  root best: {} at {}", format_ms(best.time_ms), json!(best.params));
    }
    Ok(())
}
