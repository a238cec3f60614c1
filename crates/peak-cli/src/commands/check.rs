//! `peak check CONTEXT --against REF`: same sampled execution parameters, same random
//! inputs, compare the outputs.

use anyhow::{Result, anyhow, bail};
use peak_backend::{RunOptions, runner};
use peak_spec::expr::{Expr, expression_engine};
use peak_spec::{Comparison, Context, ExecParams, compare, default_tolerance};
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
    let candidate = load_context(&args.context)?;
    let reference = load_context(&args.against)?;
    ensure_same_arrays(&candidate, &reference).map_err(usage)?;
    if candidate.backend() != reference.backend() {
        eprintln!("note: comparing a {} context with a {} reference", candidate.backend(), reference.backend());
    }
    let space = restricted_space(&candidate, &args.set)?;
    let points = space.sample(args.samples, args.seed);
    if points.is_empty() {
        return Err(usage(anyhow!("{}: no execution parameter satisfies the constraints", candidate.manifest_path().display())));
    }
    let cand_backend = backends::open(candidate.backend())?;
    let ref_backend = if reference.backend() == candidate.backend() { None } else { Some(backends::open(reference.backend())?) };
    let ref_backend = ref_backend.as_deref().unwrap_or(cand_backend.as_ref());

    let mut samples = Vec::new();
    for (i, params) in points.into_iter().enumerate() {
        let data_seed = args.seed.wrapping_mul(1_000_003).wrapping_add(i as u64 + 1);
        let options = RunOptions { warmup: 0, repetitions: 0, check_inputs: true, data_seed, ..RunOptions::default() };
        let reference_params = reference_point(&reference, &params)?;
        let expected = runner::run(ref_backend, &reference, &reference_params, &options)
            .map_err(|e| anyhow!("the reference failed at {reference_params}: {e}"))?;
        let mut report = SampleReport { params: params.clone(), reference_params, data_seed, verdict: "passed".into(), outputs: vec![], error: None };
        match runner::run(cand_backend.as_ref(), &candidate, &params, &options) {
            Err(e) => {
                report.verdict = e.category().to_string();
                report.error = Some(e.to_string());
            }
            Ok(got) => {
                for ((name, out), (_, want)) in got.outputs.iter().zip(&expected.outputs) {
                    let tolerance = tolerance(&candidate, out.dtype, &params);
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
                format!("{}: rel. error {:.2e} (tol {:.1e}), worst at [{}] {} vs {}", o.name, c.relative_error, c.tolerance, c.worst_index, c.worst_value, c.worst_expected)
            }
        }
        (None, None) => String::new(),
    };
    println!("{:<15} {}  {detail}", s.verdict, s.params);
}

/// The reference's execution parameter for the candidate's inputs: same inputs, the
/// reference's first valid tuning.
fn reference_point(reference: &Context, params: &ExecParams) -> Result<ExecParams> {
    let mut space = reference.space();
    for (name, value) in &params.inputs {
        space.restrict(name, vec![*value]).map_err(|e| usage(anyhow!("the reference lacks input '{name}': {e}")))?;
    }
    space.iter().next().ok_or_else(|| anyhow!("the reference has no valid execution parameter for {params}"))
}

/// The two contexts must fill the same arrays the same way, or "same inputs" means nothing.
fn ensure_same_arrays(candidate: &Context, reference: &Context) -> Result<()> {
    let (c, r) = (&candidate.manifest.arrays, &reference.manifest.arrays);
    let describe = |a: &peak_spec::ArraySpec| format!("{} {} size `{}` init {:?} seed {:?} output {}", a.name, a.dtype, a.size, a.init, a.seed, a.output);
    if c.len() != r.len() {
        bail!("{} declares {} arrays but the reference {} declares {}", candidate.manifest_path().display(), c.len(), reference.manifest_path().display(), r.len());
    }
    for (a, b) in c.iter().zip(r) {
        if (&a.name, a.dtype, a.init, a.seed, a.output) != (&b.name, b.dtype, b.init, b.seed, b.output) {
            bail!("array mismatch between the contexts:\n  candidate: {}\n  reference: {}", describe(a), describe(b));
        }
    }
    Ok(())
}

/// Tolerance for one output: the manifest's override, else the default for the type,
/// with the accumulation depth from `[tolerance] accumulation` or the matmul's k.
pub fn tolerance(ctx: &Context, dtype: peak_spec::DType, params: &ExecParams) -> f64 {
    let tol = ctx.manifest.tolerance.clone().unwrap_or_default();
    let explicit = match dtype {
        peak_spec::DType::F32 => tol.f32,
        peak_spec::DType::F16 => tol.f16,
        peak_spec::DType::Bf16 => tol.bf16,
        _ => None,
    };
    if let Some(t) = explicit {
        return t;
    }
    let depth_expr = tol.accumulation.or_else(|| ctx.manifest.kernel.matmul.as_ref().map(|m| m.k.clone()));
    let depth = depth_expr.and_then(|text| {
        let engine = expression_engine();
        let names: Vec<&str> = ctx.manifest.inputs.keys().map(String::as_str).collect();
        Expr::compile(&engine, &text, &names).ok()?.eval_int(&engine, &mut params.scope()).ok()
    });
    default_tolerance(dtype, depth)
}
