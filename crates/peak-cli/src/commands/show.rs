//! `peak show CKPT`: one checkpoint in full.

use anyhow::Result;

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
    if peak_apply::is_deferred(&view.validation) {
        let check = &view.validation["compile_check"];
        let counts: Vec<String> = check["counts"].as_object().into_iter().flatten().map(|(status, n)| format!("{n} {status}")).collect();
        println!("  compile-checked {} for {}", counts.join(", "), check["target"].as_str().unwrap_or("-"));
        println!("                  not yet validated or tuned: `peak replay` does both where the GPU is");
    }
    if let Some(best) = view.performance.get("best") {
        if let Some(ms) = best["time_ms"].as_f64() {
            let at = best.pointer("/params/inputs").map(|i| format!(" at {}", peak_workflow::format_inputs(i))).unwrap_or_default();
            println!("  best time       {}{at}", peak_workflow::format_ms(ms));
        }
        // Every size tuned, where there are several: the headline is one of them.
        let runs: Vec<String> = view.performance["runs"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|run| {
                Some(format!("{}: {}", peak_workflow::format_inputs(run.get("inputs")?), peak_workflow::format_ms(run.pointer("/best/time_ms")?.as_f64()?)))
            })
            .collect();
        if runs.len() > 1 {
            println!("  tuned at        {}", runs.join(", "));
        }
        // What the best time is measured against (records made before it was kept have none).
        if let Some(yardstick) = peak_workflow::yardstick(&view.performance) {
            println!("  yardstick       {}", yardstick.describe(peak_workflow::format_ms));
        }
        println!("  best            {best}");
    }
    for (name, text) in &view.files {
        println!("\n--- context/{name}\n{text}");
    }
    Ok(())
}
