//! Execution parameters and the space they live in.
//!
//! An execution parameter is one choice of every scalar input and every tuning parameter
//! that satisfies the manifest's constraints. The space is the cartesian product of the
//! domains filtered by the constraints (with `[[shapes]]`, the inputs are one axis of that
//! product: the listed tuples, [`crate::shapes`]); it is walked lazily, so counting and
//! sampling never hold more than the current point (and, for sampling, the N points kept).

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

/// One axis of the space's product: a parameter and its values, or (`[[shapes]]`) the
/// inputs together and the tuples they take.
#[derive(Debug, Clone)]
struct Axis {
    kind: Kind,
    names: Vec<String>,
    /// The points along the axis, one value per name.
    rows: Vec<Vec<i64>>,
    /// Each name's distinct values, in order of first appearance.
    columns: Vec<Vec<i64>>,
    /// Listed tuples (named shapes): `restrict` keeps some of them rather than replacing them.
    listed: bool,
}

impl Axis {
    fn single(name: &str, kind: Kind, values: Vec<i64>) -> Axis {
        Axis { kind, names: vec![name.to_string()], rows: values.iter().map(|v| vec![*v]).collect(), columns: vec![values], listed: false }
    }

    fn listed(names: Vec<String>, rows: Vec<Vec<i64>>) -> Axis {
        let mut axis = Axis { kind: Kind::Input, names, rows, columns: Vec::new(), listed: true };
        axis.set_columns();
        axis
    }

    fn set_columns(&mut self) {
        self.columns = (0..self.names.len())
            .map(|j| {
                let mut seen: Vec<i64> = Vec::new();
                for row in &self.rows {
                    if !seen.contains(&row[j]) {
                        seen.push(row[j]);
                    }
                }
                seen
            })
            .collect();
    }

    fn position(&self, name: &str) -> Option<usize> {
        self.names.iter().position(|n| n == name)
    }

    fn shapes(&self) -> String {
        let shapes: Vec<IndexMap<String, i64>> = self.rows.iter().map(|r| self.names.iter().cloned().zip(r.iter().copied()).collect()).collect();
        crate::shapes::list(&shapes)
    }
}

/// The valid execution parameters of a manifest.
#[derive(Debug, Clone)]
pub struct Space {
    axes: Vec<Axis>,
    input_constraints: Vec<Expr>,
    tuning_constraints: Vec<Expr>,
    engine: std::sync::Arc<Engine>,
}

impl Space {
    pub fn new(manifest: &Manifest) -> Result<Space, String> {
        let engine = expression_engine();
        let mut axes = Vec::new();
        if manifest.shapes.is_empty() {
            for (name, domain) in &manifest.inputs {
                axes.push(Axis::single(name, Kind::Input, domain.expand()?));
            }
        } else {
            let names: Vec<String> = manifest.inputs.keys().cloned().collect();
            let rows = manifest
                .shapes
                .iter()
                .enumerate()
                .map(|(i, shape)| names.iter().map(|n| shape.get(n).copied().ok_or_else(|| format!("shapes[{i}] gives no value for {n}"))).collect())
                .collect::<Result<Vec<Vec<i64>>, String>>()?;
            axes.push(Axis::listed(names, rows));
        }
        for (name, domain) in &manifest.tuning {
            axes.push(Axis::single(name, Kind::Tuning, domain.expand()?));
        }
        let names: Vec<&str> = axes.iter().flat_map(|a| a.names.iter().map(String::as_str)).collect();
        let compile = |list: &[String]| list.iter().map(|c| Expr::compile(&engine, c, &names)).collect::<Result<Vec<_>, _>>();
        let input_constraints = compile(&manifest.constraints.inputs)?;
        let tuning_constraints = compile(&manifest.constraints.tuning)?;
        Ok(Space { axes, input_constraints, tuning_constraints, engine: std::sync::Arc::new(engine) })
    }

    /// Parameter names, inputs first, in manifest order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.axes.iter().flat_map(|a| a.names.iter().map(String::as_str))
    }

    pub fn tuning_names(&self) -> impl Iterator<Item = &str> {
        self.axes.iter().filter(|a| a.kind == Kind::Tuning).flat_map(|a| a.names.iter().map(String::as_str))
    }

    /// The candidate values of one parameter (of an input given by named shapes: the
    /// distinct values the shapes give it).
    pub fn values(&self, name: &str) -> Option<&[i64]> {
        self.axes.iter().find_map(|a| a.position(name).map(|j| a.columns[j].as_slice()))
    }

    /// Whether the inputs are named shapes (`[[shapes]]`) rather than a product.
    pub fn has_shapes(&self) -> bool {
        self.axes.iter().any(|a| a.listed)
    }

    /// Size of the unconstrained cartesian product (saturating).
    pub fn product_size(&self) -> u128 {
        self.axes.iter().fold(1u128, |acc, a| acc.saturating_mul(a.rows.len() as u128))
    }

    /// Number of input configurations before the input constraints (saturating).
    pub fn input_product_size(&self) -> u128 {
        self.axes.iter().filter(|a| a.kind == Kind::Input).fold(1u128, |acc, a| acc.saturating_mul(a.rows.len() as u128))
    }

    /// Restrict one parameter to the given values (the CLI's `--set NAME=V[,V...]`).
    /// Values outside the declared domain are allowed on purpose: a person asking for a
    /// specific configuration gets it, and constraints still apply. An input of named
    /// shapes is different: the shapes with one of those values are kept, and a value no
    /// shape has is an error naming the shapes.
    pub fn restrict(&mut self, name: &str, values: Vec<i64>) -> Result<(), SpecError> {
        let known: Vec<String> = self.names().map(String::from).collect();
        let Some(axis) = self.axes.iter_mut().find(|a| a.position(name).is_some()) else {
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
        if !axis.listed {
            *axis = Axis::single(name, axis.kind, values);
            return Ok(());
        }
        let j = axis.position(name).expect("found by name");
        let kept: Vec<Vec<i64>> = axis.rows.iter().filter(|r| values.contains(&r[j])).cloned().collect();
        if kept.is_empty() {
            let asked: Vec<String> = values.iter().map(i64::to_string).collect();
            return Err(SpecError::Override {
                message: format!(
                    "no named shape has {name} = {} (the shapes: {}); a size to tune at is a [[shapes]] entry of peak.toml",
                    asked.join(" or "),
                    axis.shapes()
                ),
            });
        }
        axis.rows = kept;
        axis.set_columns();
        Ok(())
    }

    /// Move inputs to other values: each named input takes the values given; with named
    /// shapes, the other inputs keep the combinations the shapes give them, each paired
    /// with every combination of the new values. Without shapes this is `restrict`.
    /// Sizes outside the shapes are allowed here: validation and references work at sizes
    /// of their own.
    pub fn move_inputs(&mut self, moves: &[(String, Vec<i64>)]) -> Result<(), SpecError> {
        for (name, values) in moves {
            let listed = self.axes.iter().any(|a| a.listed && a.position(name).is_some());
            if !listed {
                self.restrict(name, values.clone())?;
            } else if values.is_empty() {
                return Err(SpecError::Override { message: format!("no value given for '{name}'") });
            }
        }
        for axis in self.axes.iter_mut().filter(|a| a.listed) {
            let moved: Vec<(usize, &Vec<i64>)> = moves.iter().filter_map(|(n, v)| axis.position(n).map(|j| (j, v))).collect();
            if moved.is_empty() {
                continue;
            }
            let mut rows: Vec<Vec<i64>> = Vec::new();
            for row in &axis.rows {
                let mut partial = vec![row.clone()];
                for (j, values) in &moved {
                    partial = partial
                        .iter()
                        .flat_map(|r| {
                            values.iter().map(move |v| {
                                let mut next = r.clone();
                                next[*j] = *v;
                                next
                            })
                        })
                        .collect();
                }
                for r in partial {
                    if !rows.contains(&r) {
                        rows.push(r);
                    }
                }
            }
            axis.rows = rows;
            axis.set_columns();
        }
        Ok(())
    }

    /// Move the inputs to the sizes the manifest's `[validation] inputs` names, except the
    /// ones `set` fixes (a size the user asks for by name is checked there).
    pub fn at_validation_sizes<S: AsRef<str>>(&mut self, manifest: &Manifest, set: &[S]) -> Result<(), SpecError> {
        let named: Vec<&str> = set.iter().filter_map(|s| s.as_ref().split_once('=')).map(|(n, _)| n.trim()).collect();
        let mut moves = Vec::new();
        for (name, domain) in &manifest.validation.inputs {
            if named.contains(&name.as_str()) {
                continue;
            }
            let values = domain.expand().map_err(|message| SpecError::Override { message: format!("[validation] inputs.{name}: {message}") })?;
            moves.push((name.clone(), values));
        }
        self.move_inputs(&moves)
    }

    /// Apply `NAME=V[,V...]` overrides.
    pub fn apply_overrides<S: AsRef<str>>(&mut self, overrides: &[S]) -> Result<(), SpecError> {
        for item in overrides {
            let item = item.as_ref();
            let (name, values) = item.split_once('=').ok_or_else(|| SpecError::Override { message: format!("`{item}` is not NAME=VALUE") })?;
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
    /// (say, division by zero) counts as not satisfied. Only the constraints: inputs that
    /// are not among the named shapes may still be valid (a sanitizer's small size).
    pub fn is_valid(&self, params: &ExecParams) -> bool {
        let mut scope = params.scope();
        self.input_constraints.iter().chain(&self.tuning_constraints).all(|c| c.eval_bool(&self.engine, &mut scope).unwrap_or(false))
    }

    /// Every input configuration (the named shapes, or the product of the inputs' values)
    /// that satisfies the input constraints, in order: the sizes tuning runs at, one by one.
    pub fn input_configurations(&self) -> Vec<IndexMap<String, i64>> {
        let axes: Vec<&Axis> = self.axes.iter().filter(|a| a.kind == Kind::Input).collect();
        if axes.iter().any(|a| a.rows.is_empty()) {
            return Vec::new();
        }
        let mut out = Vec::new();
        let mut odometer = vec![0usize; axes.len()];
        loop {
            let mut inputs = IndexMap::new();
            for (axis, &i) in axes.iter().zip(&odometer) {
                for (name, v) in axis.names.iter().zip(&axis.rows[i]) {
                    inputs.insert(name.clone(), *v);
                }
            }
            let mut scope = ExecParams { inputs: inputs.clone(), tuning: IndexMap::new() }.scope();
            if self.input_constraints.iter().all(|c| c.eval_bool(&self.engine, &mut scope).unwrap_or(false)) {
                out.push(inputs);
            }
            let mut d = axes.len();
            loop {
                if d == 0 {
                    return out;
                }
                d -= 1;
                odometer[d] += 1;
                if odometer[d] < axes[d].rows.len() {
                    break;
                }
                odometer[d] = 0;
            }
        }
    }

    /// Lazily walk every valid point in a fixed order.
    pub fn iter(&self) -> SpaceIter<'_> {
        // Each constraint, with the last axis it reads: a constraint that fails on the axes
        // up to that one fails for every value of the axes after it, so the walk skips them
        // all at once. Without that, finding the first valid point of a GEMM's space (BLOCK_X
        // first, BLOCK_X * BLOCK_Y >= 32 failing for 200 million combinations of the axes
        // after it) took minutes.
        let mut checks: Vec<(usize, &Expr)> = self
            .input_constraints
            .iter()
            .chain(&self.tuning_constraints)
            .map(|c| (c.identifiers().iter().filter_map(|name| self.axes.iter().position(|a| a.position(name).is_some())).max().unwrap_or(0), c))
            .collect();
        checks.sort_by_key(|&(axis, _)| axis);
        SpaceIter { space: self, checks, odometer: vec![0; self.axes.len()], done: self.axes.iter().any(|a| a.rows.is_empty()) }
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
        let mut odometer = vec![0usize; self.axes.len()];
        for _ in 0..REJECTION_DRAWS {
            if kept.len() == n {
                break;
            }
            for (slot, axis) in odometer.iter_mut().zip(&self.axes) {
                *slot = rng.below(axis.rows.len() as u64) as usize;
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
        for (axis, &i) in self.axes.iter().zip(odometer) {
            let map = if axis.kind == Kind::Input { &mut params.inputs } else { &mut params.tuning };
            for (name, v) in axis.names.iter().zip(&axis.rows[i]) {
                map.insert(name.clone(), *v);
            }
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
    /// The constraints, each with the last axis it reads, in the order of those axes.
    checks: Vec<(usize, &'a Expr)>,
    odometer: Vec<usize>,
    done: bool,
}

impl SpaceIter<'_> {
    /// The next value of `axis` (carrying into the axes before it), the axes after it back
    /// at their first values: the next point whose first `axis + 1` axes differ.
    fn advance(&mut self, axis: usize) {
        if self.odometer.is_empty() {
            // No axes: the one (empty) point was the whole space.
            self.done = true;
            return;
        }
        for later in &mut self.odometer[axis + 1..] {
            *later = 0;
        }
        let mut i = axis + 1;
        loop {
            if i == 0 {
                self.done = true;
                return;
            }
            i -= 1;
            self.odometer[i] += 1;
            if self.odometer[i] < self.space.axes[i].rows.len() {
                return;
            }
            self.odometer[i] = 0;
        }
    }
}

impl Iterator for SpaceIter<'_> {
    type Item = ExecParams;

    /// Points in order, the last dimension turning fastest. A constraint that fails (or
    /// cannot be evaluated, say a division by zero) rejects the point and every point that
    /// shares its axes up to the last one the constraint reads.
    fn next(&mut self) -> Option<ExecParams> {
        let last = self.odometer.len().saturating_sub(1);
        while !self.done {
            let point = self.space.point(&self.odometer);
            let mut scope = point.scope();
            let failed = self.checks.iter().find(|(_, c)| !c.eval_bool(&self.space.engine, &mut scope).unwrap_or(false)).map(|&(axis, _)| axis);
            self.advance(failed.unwrap_or(last));
            if failed.is_none() {
                return Some(point);
            }
        }
        None
    }
}
