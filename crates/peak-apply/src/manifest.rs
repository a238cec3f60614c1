//! Turning a transformation's declared tuning parameters into manifest entries, and a
//! context's parameters into the prompt's summary lines.

use peak_spec::{Context, Manifest};
use peak_transform::{ContextParam, Transformation};

/// The parent's manifest plus the transformation's tuning parameters and constraints.
pub fn extend(parent: &Manifest, transformation: &Transformation) -> Manifest {
    let mut manifest = parent.clone();
    for param in &transformation.tuning {
        manifest.tuning.insert(param.name.clone(), param.domain.clone());
    }
    for constraint in &transformation.constraints {
        if !manifest.constraints.tuning.contains(constraint) {
            manifest.constraints.tuning.push(constraint.clone());
        }
    }
    manifest
}

/// The context's tuning parameters and inputs as the prompt lists them.
pub fn prompt_params(ctx: &Context) -> (Vec<ContextParam>, Vec<ContextParam>) {
    let tuning = ctx.manifest.tuning.iter().map(|(n, d)| ContextParam::new(n, d.to_string())).collect();
    let inputs = ctx.manifest.inputs.iter().map(|(n, d)| ContextParam::new(n, d.to_string())).collect();
    (tuning, inputs)
}
