//! Turning a transformation's declared tuning parameters into manifest entries, and a
//! context's parameters into the prompt's summary lines.

use peak_spec::{Context, Domain, Manifest};
use peak_transform::{ContextParam, Transformation};

/// The manifest domain for a transformation's domain (the two share one syntax).
pub fn domain(d: &peak_transform::Domain) -> Domain {
    match d {
        peak_transform::Domain::Values(values) => Domain::values(values.clone()),
        peak_transform::Domain::Range { lo, hi, step } => Domain { range: Some([*lo, *hi]), step: Some(*step), ..Domain::default() },
        peak_transform::Domain::Pow2 { lo, hi } => Domain { pow2: Some([*lo, *hi]), ..Domain::default() },
    }
}

/// The parent's manifest plus the transformation's tuning parameters and constraints.
pub fn extend(parent: &Manifest, transformation: &Transformation) -> Manifest {
    let mut manifest = parent.clone();
    for param in &transformation.tuning {
        manifest.tuning.insert(param.name.clone(), domain(&param.domain));
    }
    for constraint in &transformation.constraints {
        if !manifest.constraints.tuning.contains(constraint) {
            manifest.constraints.tuning.push(constraint.clone());
        }
    }
    manifest
}

fn spelled(d: &Domain) -> String {
    if let Some(v) = &d.values {
        return format!("values = {v:?}");
    }
    if let Some([lo, hi]) = d.range {
        return format!("range = [{lo}, {hi}], step = {}", d.step.unwrap_or(1));
    }
    match d.pow2 {
        Some([lo, hi]) => format!("pow2 = [{lo}, {hi}]"),
        None => String::new(),
    }
}

/// The context's tuning parameters and inputs as the prompt lists them.
pub fn prompt_params(ctx: &Context) -> (Vec<ContextParam>, Vec<ContextParam>) {
    let tuning = ctx.manifest.tuning.iter().map(|(n, d)| ContextParam::new(n, spelled(d))).collect();
    let inputs = ctx.manifest.inputs.iter().map(|(n, d)| ContextParam::new(n, spelled(d))).collect();
    (tuning, inputs)
}
