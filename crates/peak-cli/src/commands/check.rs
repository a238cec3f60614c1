//! `peak check CONTEXT --against REF`: same sampled execution parameters, same random
//! inputs, compare the outputs.

use anyhow::{Result, anyhow};
use peak_backend::{RunOptions, runner};
use peak_eval::reference::{check_compatible, reference_point};
use peak_eval::validate::tolerance;
use peak_spec::{Comparison, ExecParams, compare};
use serde::Serialize;

use super::{load_context, restricted_space};
use crate::backends;
use crate::cli::CheckArgs;
use crate::output::print_json;
use crate::{Failed, usage};

#[derive(Serialize)]
struct SampleReport {
    params: ExecParams,
    reference_params: ExecParams,
    data_seed: u64,
    /// "passed", "wrong-output", "modified-input", or the run's failure category.
    verdict: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    outputs: Vec<OutputCheck>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

#[derive(Serialize)]
struct OutputCheck {
    name: String,
    #[serde(flatten)]
    comparison: Comparison,
}

#[derive(Serialize)]
struct CheckReport {
    context: String,
    reference: String,
    samples: Vec<SampleReport>,
    passed: usize,
    failed: usize,
    pruned: usize,
}

pub fn run(args: CheckArgs) -> Result<()> {
    let candidate = load_context(&args.candidate.context)?;
    let reference = load_context(&args.candidate.against)?;
    check_compatible(&candidate, &reference).map_err(usage)?;
    if candidate.backend() != reference.backend() {
        eprintln!("note: comparing a {} context with a {} reference", candidate.backend(), reference.backend());
    }
    let space = restricted_space(&candidate, &args.set)?;
    let points = space.sample(args.candidate.samples, args.candidate.seed);
    if points.is_empty() {
        return Err(usage(anyhow!("{}: no execution parameter satisfies the constraints", candidate.manifest_path().display())));
    }
    let cand_backend = backends::open(candidate.backend())?;
    let ref_backend = if reference.backend() == candidate.backend() { None } else { Some(backends::open(reference.backend())?) };
    let ref_backend = ref_backend.as_deref().unwrap_or(cand_backend.as_ref());

    let mut samples = Vec::new();
    for (i, params) in points.into_iter().enumerate() {
        let data_seed = args.candidate.seed.wrapping_mul(1_000_003).wrapping_add(i as u64 + 1);
        let options = RunOptions { warmup: 0, repetitions: 0, check_inputs: true, data_seed, ..RunOptions::default() };
        let reference_params = reference_point(&reference, &params.inputs)?;
        let expected =
            runner::run(ref_backend, &reference, &reference_params, &options).map_err(|e| anyhow!("the reference failed at {reference_params}: {e}"))?;
        let mut report = SampleReport { params: params.clone(), reference_params, data_seed, verdict: "passed".into(), outputs: vec![], error: None };
        match runner::run(cand_backend.as_ref(), &candidate, &params, &options) {
            Err(e) => {
                report.verdict = e.category().to_string();
                report.error = Some(e.to_string());
            }
            Ok(got) => {
                for ((name, out), (_, want)) in got.outputs.iter().zip(&expected.outputs) {
                    let tolerance = tolerance(&candidate, &reference, out.dtype, &params);
                    let comparison = compare(out, want, tolerance);
                    if !comparison.passed {
                        report.verdict = "wrong-output".into();
                    }
                    report.outputs.push(OutputCheck { name: name.clone(), comparison });
                }
                if !got.modified_inputs.is_empty() {
                    report.verdict = "modified-input".into();
                    report.error = Some(format!("input arrays changed: {}", got.modified_inputs.join(", ")));
                }
            }
        }
        if !args.json {
            print_sample(&report);
        }
        samples.push(report);
    }
    let pruned = samples.iter().filter(|s| s.verdict == "invalid-config").count();
    let passed = samples.iter().filter(|s| s.verdict == "passed").count();
    let failed = samples.len() - passed - pruned;
    let report = CheckReport { context: candidate.dir.display().to_string(), reference: reference.dir.display().to_string(), samples, passed, failed, pruned };
    if args.json {
        print_json(&report)?;
    } else {
        println!("{}: {passed} passed, {failed} failed, {pruned} pruned as invalid", if failed == 0 && passed > 0 { "PASS" } else { "FAIL" });
    }
    if failed > 0 || passed == 0 {
        return Err(Failed.into());
    }
    Ok(())
}

fn print_sample(s: &SampleReport) {
    let detail = match (&s.error, s.outputs.iter().find(|o| !o.comparison.passed).or(s.outputs.first())) {
        (Some(e), _) => e.lines().next().unwrap_or_default().to_string(),
        (None, Some(o)) => {
            let c = &o.comparison;
            if c.non_finite > 0 {
                format!("{}: {} non-finite elements (first at {}), e.g. unwritten", o.name, c.non_finite, c.first_non_finite.unwrap_or(0))
            } else {
                format!(
                    "{}: rel. error {:.2e} (tol {:.1e}), worst at [{}] {} vs {}",
                    o.name, c.relative_error, c.tolerance, c.worst_index, c.worst_value, c.worst_expected
                )
            }
        }
        (None, None) => String::new(),
    };
    println!("{:<15} {}  {detail}", s.verdict, s.params);
}
