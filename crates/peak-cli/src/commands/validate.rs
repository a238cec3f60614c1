//! `peak validate CONTEXT --against REF`: is the candidate right?
//!
//! N execution parameters sampled from the candidate's space (seeded), each on fresh
//! random inputs, run in a crash-isolated worker and compared with the reference's outputs
//! on the same inputs. When every output is right, compute-sanitizer checks the samples
//! through `peak apply`'s plan (`peak_apply::Plan`: the same flags, defaults and sample
//! placement; `--sanitize auto` runs memcheck and racecheck on CUDA and HIP where
//! compute-sanitizer is installed; what ran, or why nothing did, is reported). Every sample
//! gets a verdict; the command fails (exit 1) unless every sample that could run passed and
//! the sanitizer found nothing.

use std::time::Duration;

use anyhow::{Result, anyhow};
use peak_apply::Plan;
use peak_backend::worker::PoolOptions;
use peak_backend::worker::launcher::Placement;
use peak_eval::reference::ReferenceStore;
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
    /// What compute-sanitizer did: the tools and samples, or why nothing ran; `None` when
    /// the outputs did not pass, so it was not asked.
    sanitizer: Option<&'a peak_apply::SanitizerRecord>,
}

/// Prints one line per sample as it is judged (text mode only).
struct Lines;

impl ValidateReporter for Lines {
    fn sample(&self, done: usize, total: usize, report: &SampleReport) {
        println!("[{done:>2}/{total}] {:<17} {}  {}", report.verdict.category(), report.params, report.verdict.summary());
    }
}

pub fn run(args: ValidateArgs, placement: &Placement) -> Result<()> {
    let candidate = load_context(&args.candidate.context)?;
    let reference = load_context(&args.candidate.against)?;
    let mut space = restricted_space(&candidate, &args.set)?;
    space.at_validation_sizes(&candidate.manifest, &args.set.set)?;
    let chosen = samples(&space, args.candidate.samples, args.candidate.seed);
    if chosen.is_empty() {
        return Err(usage(anyhow!("{}: no execution parameter satisfies the constraints (after --set)", candidate.manifest_path().display())));
    }
    // Resolved before anything runs: tools asked for but missing fail at once.
    let plan = Plan::for_context(&args.sanitize, &args.sanitize_at, &candidate).map_err(usage)?;

    let timeout = Duration::from_secs_f64(args.timeout);
    let mut workers = Workers::peak(PoolOptions { run_timeout: timeout, ..PoolOptions::default() }, placement.clone());
    let cache_dir = args.cache_dir.clone().unwrap_or_else(default_cache_dir);
    let mut output = OutputValidator::new(reference.clone(), ReferenceStore::new(cache_dir.join("references")));
    output.timeout = Some(timeout);
    let mut validators: Vec<Box<dyn Validator>> = vec![Box::new(output)];

    let report = if args.json {
        validate(&mut workers, &candidate, &chosen, &mut validators, &())?
    } else {
        validate(&mut workers, &candidate, &chosen, &mut validators, &Lines)?
    };
    let sanitizer = plan.after_outputs(report.outcome, &mut workers, &candidate, &space, &chosen, args.sanitize_samples)?;
    let sanitizer_failed = sanitizer.as_ref().is_some_and(|r| r.failure().is_some());
    if args.json {
        print_json(&Report { reference: reference.dir.display().to_string(), seed: args.candidate.seed, report: &report, sanitizer: sanitizer.as_ref() })?;
    } else {
        let counts: Vec<String> = report.counts.iter().map(|(k, v)| format!("{v} {k}")).collect();
        let word = match report.outcome {
            Outcome::Passed if sanitizer_failed => "FAIL",
            Outcome::Passed => "PASS",
            Outcome::Failed => "FAIL",
            Outcome::Inconclusive => "INCONCLUSIVE",
        };
        println!("{word}: {} samples on {}: {}", report.samples.len(), report.device, counts.join(", "));
        if !report.devices_served.is_empty() {
            let served: Vec<String> = report.devices_served.iter().map(usize::to_string).collect();
            println!("  spread over {} devices: {} runs each", report.devices_served.len(), served.join(" / "));
        }
        println!("  sanitizer: {}", sanitizer.as_ref().map_or("not run: the outputs did not pass", |r| r.summary.as_str()));
        if report.outcome == Outcome::Inconclusive {
            eprintln!("note: every sample was pruned as invalid on this device, so nothing was checked");
        }
    }
    if sanitizer_failed {
        return Err(Failed.into());
    }
    match report.outcome {
        Outcome::Passed => Ok(()),
        _ => Err(Failed.into()),
    }
}
