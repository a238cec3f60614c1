//! `peak show CKPT`: one checkpoint in full.

use anyhow::Result;
use peak_record::{PerformanceRecord, Record, ValidationRecord};
use peak_workflow::{format_inputs, format_ms};
use serde_json::json;

use super::open_workflow;
use crate::cli::ShowArgs;
use crate::output::print_json;

pub fn run(args: ShowArgs) -> Result<()> {
    let wf = open_workflow(&args.workflow)?;
    let view = wf.show(&args.checkpoint)?;
    if args.json {
        return print_json(&view);
    }
    let names = view.tags.iter().chain(&view.branches).cloned().collect::<Vec<_>>().join(", ");
    println!("checkpoint {}{}", view.id, if names.is_empty() { String::new() } else { format!(" ({names})") });
    println!("  {}", view.message.lines().next().unwrap_or_default());
    let m = &view.meta;
    println!("  transformation  {}", m.transformation);
    println!("  executor        {}{}", m.executor, m.model.as_ref().map(|s| format!(" ({s})")).unwrap_or_default());
    println!("  verdict         {}", m.verdict.as_deref().unwrap_or("-"));
    println!("  created         {}", m.created);
    // Shown as far as they read: a record this peak cannot read shows nothing.
    let validation = ValidationRecord::from_json(&view.validation).unwrap_or_default();
    if validation.is_deferred() {
        let check = validation.compile_check.unwrap_or_default();
        let counts: Vec<String> = check.counts.iter().map(|(status, n)| format!("{n} {status}")).collect();
        println!("  compile-checked {} for {}", counts.join(", "), if check.target.is_empty() { "-" } else { &check.target });
        println!("                  not yet validated or tuned: `peak replay` does both where the GPU is");
    }
    let performance = PerformanceRecord::from_json(&view.performance).unwrap_or_default();
    if let Some(best) = &performance.best {
        println!("  best time       {} at {}", format_ms(best.time_ms), format_inputs(&json!(best.params.inputs)));
        // Every size tuned, where there are several: the headline is one of them.
        let runs: Vec<String> = performance
            .runs()
            .iter()
            .filter_map(|run| Some(format!("{}: {}", format_inputs(&json!(run.inputs)), format_ms(run.best.as_ref()?.time_ms))))
            .collect();
        if runs.len() > 1 {
            println!("  tuned at        {}", runs.join(", "));
        }
        // What the best time is measured against (records made before it was kept have none).
        if let Some(yardstick) = peak_workflow::yardstick(&view.performance) {
            println!("  yardstick       {}", yardstick.describe(format_ms));
        }
        println!("  best            {}", json!(best));
    }
    for (name, text) in &view.files {
        println!("\n--- context/{name}\n{text}");
    }
    Ok(())
}
