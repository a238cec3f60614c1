//! `peak validate CONTEXT --against REF`: is the candidate right?
//!
//! N execution parameters sampled from the candidate's space (seeded), each on fresh
//! random inputs, run in a crash-isolated worker and compared with the reference's outputs
//! on the same inputs; optionally each sample is also run under compute-sanitizer. Every
//! sample gets a verdict; the command fails (exit 1) unless every sample that could run
//! passed.

use std::time::Duration;

use anyhow::{Result, anyhow};
use peak_backend::worker::PoolOptions;
use peak_eval::reference::ReferenceStore;
use peak_eval::sanitizer::{SanitizerTool, SanitizerValidator};
use peak_eval::validate::{Outcome, SampleReport, ValidateReporter, samples};
use peak_eval::{OutputValidator, ValidationReport, Validator, Workers, default_cache_dir, validate};
use serde::Serialize;

use super::{load_context, restricted_space};
use crate::cli::ValidateArgs;
use crate::output::print_json;
use crate::{Failed, usage};

#[derive(Serialize)]
struct Report<'a> {
    reference: String,
    seed: u64,
    #[serde(flatten)]
    report: &'a ValidationReport,
}

/// Prints one line per sample as it is judged (text mode only).
struct Lines;

impl ValidateReporter for Lines {
    fn sample(&self, done: usize, total: usize, report: &SampleReport) {
        println!("[{done:>2}/{total}] {:<17} {}  {}", report.verdict.category(), report.params, report.verdict.summary());
    }
}

pub fn run(args: ValidateArgs) -> Result<()> {
    let candidate = load_context(&args.candidate.context)?;
    let reference = load_context(&args.candidate.against)?;
    let mut space = restricted_space(&candidate, &args.set)?;
    space.at_validation_sizes(&candidate.manifest, &args.set.set)?;
    let chosen = samples(&space, args.candidate.samples, args.candidate.seed);
    if chosen.is_empty() {
        return Err(usage(anyhow!("{}: no execution parameter satisfies the constraints (after --set)", candidate.manifest_path().display())));
    }
    let tools = args
        .sanitize
        .iter()
        .flat_map(|list| list.split(','))
        .filter(|t| !t.trim().is_empty())
        .map(|t| t.parse::<SanitizerTool>().map_err(|e| usage(anyhow!("--sanitize: {e}"))))
        .collect::<Result<Vec<_>>>()?;

    let timeout = Duration::from_secs_f64(args.timeout);
    let mut workers = Workers::peak(PoolOptions { run_timeout: timeout, ..PoolOptions::default() });
    let cache_dir = args.cache_dir.clone().unwrap_or_else(default_cache_dir);
    let mut output = OutputValidator::new(reference.clone(), ReferenceStore::new(cache_dir.join("references")));
    output.timeout = Some(timeout);
    let mut validators: Vec<Box<dyn Validator>> = vec![Box::new(output)];
    if !tools.is_empty() {
        let mut sanitizer = SanitizerValidator::new(tools, SanitizerValidator::locate()?);
        sanitizer.samples = args.sanitize_samples;
        validators.push(Box::new(sanitizer));
    }

    let report = if args.json { validate(&mut workers, &candidate, &chosen, &mut validators, &())? } else { validate(&mut workers, &candidate, &chosen, &mut validators, &Lines)? };
    if args.json {
        print_json(&Report { reference: reference.dir.display().to_string(), seed: args.candidate.seed, report: &report })?;
    } else {
        let counts: Vec<String> = report.counts.iter().map(|(k, v)| format!("{v} {k}")).collect();
        let word = match report.outcome {
            Outcome::Passed => "PASS",
            Outcome::Failed => "FAIL",
            Outcome::Inconclusive => "INCONCLUSIVE",
        };
        println!("{word}: {} samples on {}: {}", report.samples.len(), report.device, counts.join(", "));
        if !report.devices_served.is_empty() {
            let served: Vec<String> = report.devices_served.iter().map(usize::to_string).collect();
            println!("  spread over {} devices: {} runs each", report.devices_served.len(), served.join(" / "));
        }
        if report.outcome == Outcome::Inconclusive {
            eprintln!("note: every sample was pruned as invalid on this device, so nothing was checked");
        }
    }
    match report.outcome {
        Outcome::Passed => Ok(()),
        _ => Err(Failed.into()),
    }
}
