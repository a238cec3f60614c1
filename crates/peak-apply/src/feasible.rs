//! An impossible tuning space is found before anything is asked.
//!
//! A transformation's constraints may rule out every configuration at the context's
//! sizes: Register-Row keeps a row in registers, so a row of 50,257 elements fits no
//! block. Finding that after the executor has written the region wastes the work and
//! misleads ("no execution parameter satisfies the constraints (after --set)", with no
//! `--set` given). So the parent's manifest is extended with the transformation's
//! parameters and constraints, and every input configuration it is tuned at, and the
//! `[validation]` sizes it is checked at, must keep at least one configuration; the
//! refusal names the size and the constraints that emptied it.
//!
//! Nor is a step asked for that could change nothing: Vectorize-Access on rows of 50,257
//! keeps only VEC = 1 (`LEN % VEC == 0`), scalar accesses, the kernel as it was. Where
//! every parameter of a transformation names its `identity` value and, at every input
//! configuration it is tuned at, the constraints leave only those values, it is refused.

use anyhow::{Result, bail};
use peak_eval::EvalError;
use peak_eval::search::{SearchSpace, input_configurations};
use peak_spec::Context;
use peak_transform::Transformation;

use crate::init::validation_space;
use crate::manifest::extend;

/// Refuse `t` on `parent` when, at some input configuration (after `set`), no choice of
/// tuning parameters satisfies the constraints it would leave.
pub fn check(parent: &Context, t: &Transformation, set: &[String]) -> Result<()> {
    let launched = parent.launched_kernels();
    if launched.len() < t.kernels {
        bail!(
            "'{}' fuses kernels: it needs a launch script that runs at least {} kernels, and this one runs {} ({}). Nothing was asked of the executor.",
            t.name,
            t.kernels,
            launched.len(),
            launched.into_iter().collect::<Vec<_>>().join(", ")
        );
    }
    let candidate = Context { dir: parent.dir.clone(), manifest: extend(&parent.manifest, t), regions: parent.regions.clone() };
    let mut space = candidate.space();
    space.apply_overrides(set)?;
    let mut only_identity = Vec::new();
    for inputs in input_configurations(&candidate, &space)? {
        match SearchSpace::new(&candidate, &space, &inputs, &[]) {
            Ok(points) => only_identity.push(holds_only_identities(t, &points).then_some(points.inputs)),
            Err(EvalError::Space { message, .. }) => {
                bail!(
                    "'{}' cannot run on this kernel: {message}. Nothing was asked of the executor.\nhint: its constraints are {}; tune at other sizes with --set, or choose another transformation",
                    t.name,
                    t.constraints.iter().map(|c| format!("`{c}`")).collect::<Vec<_>>().join(", ")
                );
            }
            Err(e) => return Err(e.into()),
        }
    }
    if !only_identity.is_empty() && only_identity.iter().all(Option::is_some) {
        let at: Vec<String> = only_identity.into_iter().flatten().map(|inputs| peak_eval::hash::canonical(&inputs)).collect();
        let identities: Vec<String> = t.tuning.iter().filter_map(|p| Some(format!("{} = {}", p.name, p.identity?))).collect();
        bail!(
            "'{}' would change nothing on this kernel: at inputs {} its constraints leave only {}, at which it is the kernel as it is. Nothing was asked of the executor.\nhint: its constraints are {}; tune at other sizes with --set, or choose another transformation",
            t.name,
            at.join("; "),
            identities.join(", "),
            t.constraints.iter().map(|c| format!("`{c}`")).collect::<Vec<_>>().join(", ")
        );
    }
    // Validation samples at the `[validation]` sizes: a transformation leaving no
    // configuration there would be written by the executor and then never checked.
    if let Err(e) = validation_space(&candidate, set) {
        bail!(
            "'{}' cannot be validated on this kernel: {e:#}. Nothing was asked of the executor.\nhint: its constraints are {}; validate at other sizes with --set, or choose another transformation",
            t.name,
            t.constraints.iter().map(|c| format!("`{c}`")).collect::<Vec<_>>().join(", ")
        );
    }
    Ok(())
}

/// Whether every configuration of `points` holds each of `t`'s parameters at its identity
/// value. False when a parameter names none (the step may change the kernel whatever its
/// values) or when the points are a sample of a space too large to enumerate.
fn holds_only_identities(t: &Transformation, points: &SearchSpace) -> bool {
    if t.tuning.is_empty() || points.sampled {
        return false;
    }
    let mut identities = Vec::new();
    for param in &t.tuning {
        let (Some(identity), Some(dim)) = (param.identity, points.names().iter().position(|n| *n == param.name)) else {
            return false;
        };
        identities.push((dim, identity));
    }
    (0..points.len()).all(|i| identities.iter().all(|&(dim, identity)| points.values(dim)[usize::from(points.point(i)[dim])] == identity))
}
