//! Named shapes: the input tuples a context is tuned at, listed rather than multiplied.
//!
//! `[inputs]` gives each scalar input a list of values and the space is their product,
//! which suits one input or a sweep. The GEMMs of a model are a handful of (M, N, K)
//! triples: their product is mostly shapes nobody runs. `[[shapes]]` lists the tuples:
//!
//! ```toml
//! [[shapes]]
//! M = 8192
//! N = 3072
//! K = 768
//!
//! [[shapes]]
//! M = 16
//! N = 4096
//! K = 4096
//! ```
//!
//! - The input space is exactly these tuples, in order (still filtered by
//!   `[constraints] inputs`); tuning runs once per shape, as it runs once per input
//!   configuration of a product, and the performance record keeps each shape's best.
//! - `[inputs]` may be left out: the inputs are then the first shape's names, and each
//!   input's values are the ones the shapes give (derived here, and not written back when
//!   a context is saved). Where `[inputs]` is written, it names the inputs, and every
//!   shape's values must lie in the declared domains.
//! - Every shape gives every input, names nothing else, and no two shapes are the same.
//! - `--set M=8192` keeps the shapes with M = 8192; a value no shape has is an error
//!   naming the shapes (`Space::restrict`). `[validation.inputs]` works as before: a named
//!   input takes its validation values, the others the values the shapes give them
//!   together (`Space::move_inputs`).

use indexmap::IndexMap;

/// `M=8192 N=3072 K=768` (where [`Manifest::shapes`] are written).
pub use crate::manifest::describe_shape as describe;
use crate::manifest::{Domain, Manifest};

/// Every shape, `(M=8192 N=3072 K=768), (M=16 ...)`, for errors.
pub fn list<'a>(shapes: impl IntoIterator<Item = &'a IndexMap<String, i64>>) -> String {
    shapes.into_iter().map(|s| format!("({})", describe(s))).collect::<Vec<_>>().join(", ")
}

/// Where `[inputs]` is not written, the inputs the shapes give: the first shape's names
/// (as the TOML reader orders a table's keys, as it orders `[inputs]`), each with the
/// values the shapes give it, in order of first appearance.
pub fn derive_inputs(manifest: &mut Manifest) {
    if manifest.shapes.is_empty() || !manifest.inputs.is_empty() {
        return;
    }
    let names: Vec<String> = manifest.shapes[0].keys().cloned().collect();
    for name in names {
        let mut values: Vec<i64> = Vec::new();
        for v in manifest.shapes.iter().filter_map(|s| s.get(&name)) {
            if !values.contains(v) {
                values.push(*v);
            }
        }
        manifest.inputs.insert(name, Domain::values(values));
    }
    manifest.inputs_from_shapes = true;
}

/// What is wrong with the shapes, as (field, message): a shape missing an input, naming
/// something that is not one, repeating another, or (with `[inputs]` written) a value
/// outside its input's domain.
pub fn check(manifest: &Manifest) -> Result<(), (String, String)> {
    let inputs: Vec<&str> = manifest.inputs.keys().map(String::as_str).collect();
    let whose = if manifest.inputs_from_shapes { "the inputs, from shapes[0]" } else { "the inputs, from [inputs]" };
    let domains: IndexMap<&str, Vec<i64>> = manifest.inputs.iter().map(|(n, d)| (n.as_str(), d.expand().unwrap_or_default())).collect();
    for (i, shape) in manifest.shapes.iter().enumerate() {
        if shape.is_empty() {
            return Err((format!("shapes[{i}]"), "names no input; a shape gives a value to every scalar input".into()));
        }
        for (name, value) in shape {
            let field = format!("shapes[{i}].{name}");
            let Some(domain) = domains.get(name.as_str()) else {
                return Err((field, format!("'{name}' is not a scalar input ({whose}: {})", inputs.join(", "))));
            };
            if !manifest.inputs_from_shapes && !domain.contains(value) {
                return Err((
                    field,
                    format!(
                        "{value} is not among the values [inputs] declares for {name} ({}); widen it, or leave [inputs] out to take the inputs from the shapes",
                        manifest.inputs[name.as_str()]
                    ),
                ));
            }
        }
        let missing: Vec<&str> = inputs.iter().copied().filter(|n| !shape.contains_key(*n)).collect();
        if !missing.is_empty() {
            return Err((
                format!("shapes[{i}]"),
                format!("({}) gives no value for {}; every shape gives every input ({})", describe(shape), missing.join(", "), inputs.join(", ")),
            ));
        }
        // IndexMap's equality ignores the order the keys were written in.
        if let Some(j) = manifest.shapes[..i].iter().position(|other| other == shape) {
            return Err((format!("shapes[{i}]"), format!("({}) repeats shapes[{j}]", describe(shape))));
        }
    }
    Ok(())
}
