//! Execution parameters and the space they live in.
//!
//! An execution parameter is one choice of every scalar input and every tuning parameter
//! that satisfies the manifest's constraints. The space is the cartesian product of the
//! domains filtered by the constraints; it is walked lazily, so counting and sampling
//! never hold more than the current point (and, for sampling, the N points kept).

use std::fmt;

use indexmap::IndexMap;
use rhai::{Engine, Scope};
use serde::{Deserialize, Serialize};

use crate::error::SpecError;
use crate::expr::{Expr, expression_engine};
use crate::manifest::Manifest;
use crate::rng::SplitMix64;

/// One point of the space. Inputs and tuning parameters are kept apart because they go
/// to different places: inputs size the arrays, tuning parameters become `#define`s.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ExecParams {
    pub inputs: IndexMap<String, i64>,
    pub tuning: IndexMap<String, i64>,
}


impl ExecParams {
    /// Every name with its value, inputs first.
    pub fn iter(&self) -> impl Iterator<Item = (&str, i64)> {
        self.inputs.iter().chain(self.tuning.iter()).map(|(k, v)| (k.as_str(), *v))
    }

    pub fn get(&self, name: &str) -> Option<i64> {
        self.inputs.get(name).or_else(|| self.tuning.get(name)).copied()
    }

    /// `#define NAME value` pairs for the device compiler.
    pub fn defines(&self) -> Vec<(String, String)> {
        self.tuning.iter().map(|(k, v)| (k.clone(), v.to_string())).collect()
    }

    /// A Rhai scope holding every value as a constant.
    pub fn scope(&self) -> Scope<'static> {
        let mut scope = Scope::new();
        for (name, value) in self.iter() {
            scope.push_constant(name.to_string(), value);
        }
        scope
    }
}

impl fmt::Display for ExecParams {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let join = |m: &IndexMap<String, i64>| m.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(" ");
        match (self.inputs.is_empty(), self.tuning.is_empty()) {
            (_, true) => write!(f, "{}", join(&self.inputs)),
            (true, false) => write!(f, "{}", join(&self.tuning)),
            (false, false) => write!(f, "{} | {}", join(&self.inputs), join(&self.tuning)),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Input,
    Tuning,
}

#[derive(Debug, Clone)]
struct Dimension {
    name: String,
    kind: Kind,
    values: Vec<i64>,
}

/// The valid execution parameters of a manifest.
#[derive(Debug, Clone)]
pub struct Space {
    dims: Vec<Dimension>,
    input_constraints: Vec<Expr>,
    tuning_constraints: Vec<Expr>,
    engine: std::sync::Arc<Engine>,
}

impl Space {
    pub fn new(manifest: &Manifest) -> Result<Space, String> {
        let engine = expression_engine();
        let mut dims = Vec::new();
        for (name, domain) in &manifest.inputs {
            dims.push(Dimension { name: name.clone(), kind: Kind::Input, values: domain.expand()? });
        }
        for (name, domain) in &manifest.tuning {
            dims.push(Dimension { name: name.clone(), kind: Kind::Tuning, values: domain.expand()? });
        }
        let names: Vec<&str> = dims.iter().map(|d| d.name.as_str()).collect();
        let compile = |list: &[String]| list.iter().map(|c| Expr::compile(&engine, c, &names)).collect::<Result<Vec<_>, _>>();
        let input_constraints = compile(&manifest.constraints.inputs)?;
        let tuning_constraints = compile(&manifest.constraints.tuning)?;
        Ok(Space { dims, input_constraints, tuning_constraints, engine: std::sync::Arc::new(engine) })
    }

    /// Parameter names, inputs first, in manifest order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.dims.iter().map(|d| d.name.as_str())
    }

    pub fn tuning_names(&self) -> impl Iterator<Item = &str> {
        self.dims.iter().filter(|d| d.kind == Kind::Tuning).map(|d| d.name.as_str())
    }

    /// The candidate values of one parameter.
    pub fn values(&self, name: &str) -> Option<&[i64]> {
        self.dims.iter().find(|d| d.name == name).map(|d| d.values.as_slice())
    }

    /// Size of the unconstrained cartesian product (saturating).
    pub fn product_size(&self) -> u128 {
        self.dims.iter().fold(1u128, |acc, d| acc.saturating_mul(d.values.len() as u128))
    }

    /// Restrict one parameter to the given values (the CLI's `--set NAME=V[,V...]`).
    /// Values outside the declared domain are allowed on purpose: a person asking for a
    /// specific configuration gets it, and constraints still apply.
    pub fn restrict(&mut self, name: &str, values: Vec<i64>) -> Result<(), SpecError> {
        let known: Vec<String> = self.names().map(String::from).collect();
        let Some(dim) = self.dims.iter_mut().find(|d| d.name == name) else {
            return Err(SpecError::Override {
                message: format!(
                    "unknown parameter '{name}'; this context has: {}",
                    if known.is_empty() { "no parameters".to_string() } else { known.join(", ") }
                ),
            });
        };
        if values.is_empty() {
            return Err(SpecError::Override { message: format!("no value given for '{name}'") });
        }
        dim.values = values;
        Ok(())
    }

    /// Move the inputs to the sizes the manifest's `[validation] inputs` names, except the
    /// ones `set` fixes (a size the user asks for by name is checked there).
    pub fn at_validation_sizes<S: AsRef<str>>(&mut self, manifest: &Manifest, set: &[S]) -> Result<(), SpecError> {
        let named: Vec<&str> = set.iter().filter_map(|s| s.as_ref().split_once('=')).map(|(n, _)| n.trim()).collect();
        for (name, domain) in &manifest.validation.inputs {
            if named.contains(&name.as_str()) {
                continue;
            }
            let values = domain.expand().map_err(|message| SpecError::Override { message: format!("[validation] inputs.{name}: {message}") })?;
            self.restrict(name, values)?;
        }
        Ok(())
    }

    /// Apply `NAME=V[,V...]` overrides.
    pub fn apply_overrides<S: AsRef<str>>(&mut self, overrides: &[S]) -> Result<(), SpecError> {
        for item in overrides {
            let item = item.as_ref();
            let (name, values) = item.split_once('=').ok_or_else(|| SpecError::Override {
                message: format!("`{item}` is not NAME=VALUE"),
            })?;
            let values = values
                .split(',')
                .map(|v| v.trim().parse::<i64>())
                .collect::<Result<Vec<_>, _>>()
                .map_err(|_| SpecError::Override { message: format!("`{item}`: values must be integers, separated by commas") })?;
            self.restrict(name.trim(), values)?;
        }
        Ok(())
    }

    /// Whether a point satisfies every constraint. A constraint that fails to evaluate
    /// (say, division by zero) counts as not satisfied.
    pub fn is_valid(&self, params: &ExecParams) -> bool {
        let mut scope = params.scope();
        self.input_constraints
            .iter()
            .chain(&self.tuning_constraints)
            .all(|c| c.eval_bool(&self.engine, &mut scope).unwrap_or(false))
    }

    /// Lazily walk every valid point in a fixed order.
    pub fn iter(&self) -> SpaceIter<'_> {
        SpaceIter { space: self, odometer: vec![0; self.dims.len()], done: self.dims.iter().any(|d| d.values.is_empty()) }
    }

    /// Number of valid points, counted without storing them.
    pub fn count(&self) -> usize {
        self.iter().count()
    }

    /// `n` valid points chosen uniformly at random, reproducibly for a given seed. Fewer if
    /// the space is smaller. Spaces up to [`ENUMERATED_PRODUCT`] points are walked whole
    /// (reservoir sampling, so memory stays O(n)); larger ones, which a long sequence of
    /// transformations makes, are sampled by drawing points of the product and keeping the
    /// valid ones: still uniform over the valid points, without visiting all of them.
    pub fn sample(&self, n: usize, seed: u64) -> Vec<ExecParams> {
        if self.product_size() > ENUMERATED_PRODUCT {
            return self.sample_by_rejection(n, seed);
        }
        let mut rng = SplitMix64::new(seed);
        let mut kept: Vec<ExecParams> = Vec::with_capacity(n);
        for (seen, point) in self.iter().enumerate() {
            if kept.len() < n {
                kept.push(point);
            } else {
                let j = rng.below(seen as u64 + 1) as usize;
                if j < n {
                    kept[j] = point;
                }
            }
        }
        kept
    }

    fn sample_by_rejection(&self, n: usize, seed: u64) -> Vec<ExecParams> {
        let mut rng = SplitMix64::new(seed);
        let mut kept: Vec<ExecParams> = Vec::with_capacity(n);
        let mut odometer = vec![0usize; self.dims.len()];
        for _ in 0..REJECTION_DRAWS {
            if kept.len() == n {
                break;
            }
            for (slot, dim) in odometer.iter_mut().zip(&self.dims) {
                *slot = rng.below(dim.values.len() as u64) as usize;
            }
            let point = self.point(&odometer);
            if !kept.contains(&point) && self.is_valid(&point) {
                kept.push(point);
            }
        }
        kept
    }

    fn point(&self, odometer: &[usize]) -> ExecParams {
        let mut params = ExecParams::default();
        for (dim, &i) in self.dims.iter().zip(odometer) {
            let map = if dim.kind == Kind::Input { &mut params.inputs } else { &mut params.tuning };
            map.insert(dim.name.clone(), dim.values[i]);
        }
        params
    }
}

/// Spaces with at most this many unconstrained points are enumerated when sampled.
pub const ENUMERATED_PRODUCT: u128 = 1_000_000;
/// Points of the product drawn, at most, when sampling a larger space.
const REJECTION_DRAWS: usize = 200_000;

pub struct SpaceIter<'a> {
    space: &'a Space,
    odometer: Vec<usize>,
    done: bool,
}

impl Iterator for SpaceIter<'_> {
    type Item = ExecParams;

    fn next(&mut self) -> Option<ExecParams> {
        while !self.done {
            let point = self.space.point(&self.odometer);
            // Advance: the last dimension turns fastest.
            let mut i = self.odometer.len();
            loop {
                if i == 0 {
                    self.done = true;
                    break;
                }
                i -= 1;
                self.odometer[i] += 1;
                if self.odometer[i] < self.space.dims[i].values.len() {
                    break;
                }
                self.odometer[i] = 0;
            }
            if self.space.is_valid(&point) {
                return Some(point);
            }
        }
        None
    }
}
