//! The space a tuner searches: every valid choice of the tuning parameters for one fixed
//! input configuration, enumerated once.
//!
//! Points are vectors of value *indices*, so strategies see an ordinal grid: one step
//! along a dimension is the next value of that parameter, whatever its spacing (powers of
//! two, ranges with a step). Constraints are applied up front and each one's rejections
//! are counted, so a summary can say why the space is as small as it is, and strategies
//! only ever propose points that can run.

use std::collections::HashMap;

use indexmap::IndexMap;
use peak_spec::expr::{Expr, expression_engine};
use peak_spec::{Context, ExecParams, Space};
use rhai::Scope;
use serde::{Deserialize, Serialize};

use crate::error::EvalError;

/// Refuse to enumerate more than this many unconstrained points.
pub const MAX_PRODUCT: u128 = 5_000_000;
/// Points drawn from the product of a space over MAX_PRODUCT.
const SEARCH_DRAWS: usize = 400_000;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConstraintCount {
    pub constraint: String,
    /// Points this constraint was the first to reject.
    pub rejected: usize,
}

#[derive(Debug, Clone)]
pub struct SearchSpace {
    pub inputs: IndexMap<String, i64>,
    names: Vec<String>,
    values: Vec<Vec<i64>>,
    /// Valid points, flattened: point i is `points[i*dims .. (i+1)*dims]`.
    points: Vec<u16>,
    index: HashMap<Vec<u16>, u32>,
    /// Size of the unconstrained product.
    pub product: u128,
    /// Whether the points are a random subset of the valid ones (a product over MAX_PRODUCT).
    pub sampled: bool,
    pub pruned: Vec<ConstraintCount>,
}

/// A tuning constraint, evaluated once per combination of the parameters it names: a space
/// checks each constraint at every one of up to millions of points, while a constraint
/// such as `BLOCK_X * BLOCK_Y <= 1024` sees a hundred distinct pairs, and a Rhai evaluation
/// costs microseconds where a lookup costs nanoseconds.
struct Memoized {
    expr: Expr,
    /// Positions, among the tuning parameters, of those the expression reads.
    slots: Vec<usize>,
    verdicts: HashMap<Vec<i64>, bool>,
    key: Vec<i64>,
}

impl Memoized {
    fn new(expr: Expr, names: &[String]) -> Memoized {
        let used = expr.identifiers();
        let slots = names.iter().enumerate().filter(|(_, n)| used.contains(&n.as_str())).map(|(i, _)| i).collect();
        Memoized { expr, slots, verdicts: HashMap::new(), key: Vec::new() }
    }

    /// Whether the constraint holds at `point` (values of `names`); the inputs are already
    /// in `scope`, and stay fixed for the space.
    fn holds(&mut self, point: &[i64], names: &[String], engine: &rhai::Engine, scope: &mut Scope) -> bool {
        self.key.clear();
        self.key.extend(self.slots.iter().map(|&s| point[s]));
        if let Some(&verdict) = self.verdicts.get(self.key.as_slice()) {
            return verdict;
        }
        for &s in &self.slots {
            scope.set_value(names[s].clone(), point[s]);
        }
        let verdict = self.expr.eval_bool(engine, scope).unwrap_or(false);
        self.verdicts.insert(self.key.clone(), verdict);
        verdict
    }
}

/// Which constraints emptied a space, for its error: a user whose input no configuration
/// fits (a head dimension a kernel is not compiled for) learns which rule to look at.
fn rejections(pruned: &[ConstraintCount]) -> String {
    let tried: usize = pruned.iter().map(|c| c.rejected).sum();
    let counts: Vec<String> = pruned.iter().filter(|c| c.rejected > 0).map(|c| format!("`{}` rejected {}", c.constraint, c.rejected)).collect();
    if counts.is_empty() {
        return String::new();
    }
    format!(": of the {tried} combinations tried, {} (each counted at the first constraint it fails)", counts.join(", "))
}

impl SearchSpace {
    /// The tuning space of `ctx` (restricted as `space` is, e.g. by `--set`) at `inputs`.
    /// `anchors` are the points a warm search starts from: when the space is too large to
    /// enumerate, they and their neighbourhoods join the sampled points (`add_neighbourhoods`).
    pub fn new(ctx: &Context, space: &Space, inputs: &IndexMap<String, i64>, anchors: &[IndexMap<String, i64>]) -> Result<SearchSpace, EvalError> {
        let err = |message: String| EvalError::Space { context: ctx.dir.display().to_string(), message };
        let names: Vec<String> = space.tuning_names().map(String::from).collect();
        let values: Vec<Vec<i64>> = names.iter().map(|n| space.values(n).unwrap_or_default().to_vec()).collect();
        if let Some((name, v)) = names.iter().zip(&values).find(|(_, v)| v.len() > usize::from(u16::MAX)) {
            return Err(err(format!("tuning parameter {name} has {} values; at most {} are supported", v.len(), u16::MAX)));
        }
        let engine = expression_engine();
        let input_names: Vec<&str> = inputs.keys().map(String::as_str).collect();
        let all_names: Vec<&str> = input_names.iter().copied().chain(names.iter().map(String::as_str)).collect();
        let mut scope = Scope::new();
        for (name, value) in inputs {
            scope.push(name.clone(), *value);
        }
        for c in &ctx.manifest.constraints.inputs {
            let expr = Expr::compile(&engine, c, &input_names).map_err(|m| err(format!("constraint `{c}`: {m}")))?;
            if !expr.eval_bool(&engine, &mut scope).unwrap_or(false) {
                return Err(err(format!("the inputs {} violate the input constraint `{c}`", crate::hash::canonical(inputs))));
            }
        }
        let mut constraints = ctx
            .manifest
            .constraints
            .tuning
            .iter()
            .map(|c| Expr::compile(&engine, c, &all_names).map(|e| Memoized::new(e, &names)).map_err(|m| err(format!("constraint `{c}`: {m}"))))
            .collect::<Result<Vec<_>, _>>()?;
        for name in &names {
            scope.push(name.clone(), 0_i64);
        }
        let anchors: Vec<Vec<u16>> = anchors.iter().map(|a| nearest_indices(&names, &values, a)).collect();
        let mut rejected = vec![0usize; constraints.len()];
        let result = SearchSpace::build_around(inputs.clone(), names.clone(), values, &anchors, |point| {
            for (i, c) in constraints.iter_mut().enumerate() {
                // A constraint that cannot be evaluated (division by zero...) rejects.
                if !c.holds(point, &names, &engine, &mut scope) {
                    rejected[i] += 1;
                    return false;
                }
            }
            true
        });
        let mut result = result.map_err(err)?;
        result.pruned =
            ctx.manifest.constraints.tuning.iter().cloned().zip(rejected).map(|(constraint, rejected)| ConstraintCount { constraint, rejected }).collect();
        if result.is_empty() {
            return Err(err(format!(
                "no tuning configuration satisfies the constraints at inputs {}{}",
                crate::hash::canonical(inputs),
                rejections(&result.pruned)
            )));
        }
        Ok(result)
    }

    /// A space from explicit dimensions and a validity test (synthetic spaces, replays).
    pub fn build(inputs: IndexMap<String, i64>, names: Vec<String>, values: Vec<Vec<i64>>, valid: impl FnMut(&[i64]) -> bool) -> Result<SearchSpace, String> {
        SearchSpace::build_around(inputs, names, values, &[], valid)
    }

    /// Like `build`; a space too large to enumerate also holds the valid points of the
    /// anchors' neighbourhoods (value indices, one per dimension).
    pub fn build_around(
        inputs: IndexMap<String, i64>,
        names: Vec<String>,
        values: Vec<Vec<i64>>,
        anchors: &[Vec<u16>],
        mut valid: impl FnMut(&[i64]) -> bool,
    ) -> Result<SearchSpace, String> {
        let product = values.iter().fold(1u128, |acc, v| acc.saturating_mul(v.len() as u128));
        let dims = names.len();
        let mut space = SearchSpace { inputs, names, values, points: Vec::new(), index: HashMap::new(), product, pruned: Vec::new(), sampled: false };
        if space.values.iter().any(Vec::is_empty) {
            return Ok(space);
        }
        if product > MAX_PRODUCT {
            space.fill_by_sampling(&mut valid);
            space.add_neighbourhoods(anchors, &mut valid);
            return Ok(space);
        }
        let mut odometer = vec![0u16; dims];
        let mut concrete = vec![0i64; dims];
        loop {
            for (d, &i) in odometer.iter().enumerate() {
                concrete[d] = space.values[d][usize::from(i)];
            }
            if valid(&concrete) {
                let id = space.index.len() as u32;
                space.index.insert(odometer.clone(), id);
                space.points.extend_from_slice(&odometer);
            }
            // The last dimension turns fastest, as in `Space::iter`.
            let mut d = dims;
            loop {
                if d == 0 {
                    return Ok(space);
                }
                d -= 1;
                odometer[d] += 1;
                if usize::from(odometer[d]) < space.values[d].len() {
                    break;
                }
                odometer[d] = 0;
            }
        }
    }

    /// Too large a product to enumerate (every transformation multiplies it): search the
    /// valid points among SEARCH_DRAWS points drawn uniformly from the product, with a fixed
    /// seed so that a resumed or replayed search sees the same space.
    fn fill_by_sampling(&mut self, valid: &mut impl FnMut(&[i64]) -> bool) {
        self.sampled = true;
        let mut rng = peak_spec::rng::SplitMix64::new(0x5EA2C4);
        let mut odometer = vec![0u16; self.names.len()];
        let mut concrete = vec![0i64; self.names.len()];
        for _ in 0..SEARCH_DRAWS {
            for (d, slot) in odometer.iter_mut().enumerate() {
                *slot = rng.below(self.values[d].len() as u64) as u16;
            }
            self.add_if_valid(&odometer, &mut concrete, valid);
        }
    }

    /// A sample holds almost none of a point's neighbours, so a search could not step from
    /// the points it starts from, nor even evaluate them exactly. Add each anchor and every
    /// valid point that differs from it in one parameter (any value) or in two (one step
    /// each). Two-parameter moves reach points whose one-parameter intermediates break a
    /// constraint: with `TRD_X * TRD_Y <= 128`, 8 x 16 to 16 x 8 passes through 16 x 16.
    fn add_neighbourhoods(&mut self, anchors: &[Vec<u16>], valid: &mut impl FnMut(&[i64]) -> bool) {
        let dims = self.names.len();
        let mut concrete = vec![0i64; dims];
        for anchor in anchors.iter().filter(|a| a.len() == dims) {
            self.add_if_valid(anchor, &mut concrete, valid);
            for d in 0..anchor.len() {
                for v in 0..self.values[d].len() as u16 {
                    let mut moved = anchor.clone();
                    moved[d] = v;
                    self.add_if_valid(&moved, &mut concrete, valid);
                }
                for d2 in d + 1..anchor.len() {
                    for (delta, delta2) in [(-1, -1), (-1, 1), (1, -1), (1, 1)] {
                        if let Some(moved) = self.moved(anchor, &[(d, delta), (d2, delta2)]) {
                            self.add_if_valid(&moved, &mut concrete, valid);
                        }
                    }
                }
            }
        }
    }

    fn add_if_valid(&mut self, indices: &[u16], concrete: &mut [i64], valid: &mut impl FnMut(&[i64]) -> bool) {
        if self.index.contains_key(indices) {
            return;
        }
        for (d, &i) in indices.iter().enumerate() {
            concrete[d] = self.values[d][usize::from(i)];
        }
        if valid(concrete) {
            let id = self.index.len() as u32;
            self.index.insert(indices.to_vec(), id);
            self.points.extend_from_slice(indices);
        }
    }

    /// `indices` moved by `delta` along each given dimension, if every move stays in range.
    fn moved(&self, indices: &[u16], moves: &[(usize, i32)]) -> Option<Vec<u16>> {
        let mut p = indices.to_vec();
        for &(dim, delta) in moves {
            let to = i32::from(p[dim]) + delta;
            if to < 0 || to as usize >= self.values[dim].len() {
                return None;
            }
            p[dim] = to as u16;
        }
        Some(p)
    }

    pub fn len(&self) -> usize {
        self.index.len()
    }

    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }

    pub fn dims(&self) -> usize {
        self.names.len()
    }

    pub fn names(&self) -> &[String] {
        &self.names
    }

    pub fn values(&self, dim: usize) -> &[i64] {
        &self.values[dim]
    }

    /// Value indices of point `i`.
    pub fn point(&self, i: usize) -> &[u16] {
        let d = self.dims();
        &self.points[i * d..(i + 1) * d]
    }

    pub fn lookup(&self, indices: &[u16]) -> Option<usize> {
        self.index.get(indices).map(|&i| i as usize)
    }

    /// The point `delta` steps away from `i` along `dim`, if it exists and is valid.
    pub fn step(&self, i: usize, dim: usize, delta: i32) -> Option<usize> {
        self.step_many(i, &[(dim, delta)])
    }

    /// The point `i` moved by `delta` along each given dimension at once, if it exists and
    /// is valid (whether or not the points in between are).
    pub fn step_many(&self, i: usize, moves: &[(usize, i32)]) -> Option<usize> {
        self.lookup(&self.moved(self.point(i), moves)?)
    }

    /// The tuning values of point `i`, by name.
    pub fn tuning(&self, i: usize) -> IndexMap<String, i64> {
        self.names.iter().zip(self.point(i)).enumerate().map(|(d, (n, &v))| (n.clone(), self.values[d][usize::from(v)])).collect()
    }

    /// The full execution parameter of point `i`.
    pub fn params(&self, i: usize) -> ExecParams {
        ExecParams { inputs: self.inputs.clone(), tuning: self.tuning(i) }
    }

    /// The point with these tuning values, if it is in the space.
    pub fn find(&self, tuning: &IndexMap<String, i64>) -> Option<usize> {
        if tuning.len() != self.dims() {
            return None;
        }
        let indices = self
            .names
            .iter()
            .enumerate()
            .map(|(d, n)| tuning.get(n).and_then(|v| self.values[d].iter().position(|x| x == v)).map(|p| p as u16))
            .collect::<Option<Vec<u16>>>()?;
        self.lookup(&indices)
    }

    /// The point nearest to a (possibly partial, possibly out-of-domain) set of tuning
    /// values: each named dimension takes its closest value, the others their middle one.
    /// Used to start a search from the best points of a previous transformation.
    pub fn nearest(&self, tuning: &IndexMap<String, i64>) -> Option<usize> {
        let target = nearest_indices(&self.names, &self.values, tuning);
        if let Some(i) = self.lookup(&target) {
            return Some(i);
        }
        (0..self.len()).min_by_key(|&i| self.point(i).iter().zip(&target).map(|(a, b)| (i32::from(*a) - i32::from(*b)).unsigned_abs()).sum::<u32>())
    }
}

/// For each dimension, the index of the value closest to the one `tuning` names; the
/// middle value for a dimension it does not name.
fn nearest_indices(names: &[String], values: &[Vec<i64>], tuning: &IndexMap<String, i64>) -> Vec<u16> {
    names
        .iter()
        .zip(values)
        .map(|(name, values)| match tuning.get(name) {
            Some(v) => values.iter().enumerate().min_by_key(|(_, x)| (*x - v).abs()).map(|(i, _)| i as u16).unwrap_or(0),
            None => (values.len() / 2) as u16,
        })
        .collect()
}

/// Every input configuration of a (possibly `--set`-restricted) space that satisfies the
/// input constraints: the named shapes, or the product of the inputs' values
/// (`Space::input_configurations`). Each is tuned on its own: times at different sizes do
/// not compare.
pub fn input_configurations(ctx: &Context, space: &Space) -> Result<Vec<IndexMap<String, i64>>, EvalError> {
    if space.input_product_size() > MAX_PRODUCT {
        return Err(EvalError::Space {
            context: ctx.dir.display().to_string(),
            message: format!("the inputs take {} combinations; at most {MAX_PRODUCT} are tuned one by one (--set fewer sizes)", space.input_product_size()),
        });
    }
    Ok(space.input_configurations())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grid() -> SearchSpace {
        SearchSpace::build(IndexMap::new(), vec!["X".into(), "Y".into()], vec![vec![1, 2, 4, 8], vec![1, 2, 4, 8]], |p| p[0] * p[1] <= 16).unwrap()
    }

    #[test]
    fn only_valid_points_are_kept_and_steps_stay_inside() {
        let s = grid();
        // (4,8), (8,4) and (8,8) break X*Y <= 16.
        assert_eq!(s.len(), 13);
        let origin = s.lookup(&[0, 0]).unwrap();
        assert_eq!(s.tuning(origin)["X"], 1);
        let right = s.step(origin, 1, 1).unwrap();
        assert_eq!(s.tuning(right)["Y"], 2);
        assert_eq!(s.step(origin, 0, -1), None);
        let corner = s.find(&[("X".to_string(), 4), ("Y".to_string(), 4)].into_iter().collect()).unwrap();
        assert_eq!(s.step(corner, 0, 1), None, "8*4 > 16 is not in the space");
    }

    #[test]
    fn a_sampled_space_holds_its_anchors_and_their_neighbourhoods() {
        // 16^6 points, far over MAX_PRODUCT: the space is a sample. X + Y <= 20 plays the
        // part of TRD_X * TRD_Y <= 128 (over pow2 values, one index step doubles).
        let names: Vec<String> = ["X", "Y", "A", "B", "C", "D"].map(String::from).to_vec();
        let values: Vec<Vec<i64>> = vec![(1..=16).collect(); 6];
        let valid = |p: &[i64]| p[0] + p[1] <= 20;
        let anchor: Vec<u16> = vec![3, 15, 7, 7, 7, 7]; // X = 4, Y = 16
        let plain = SearchSpace::build(IndexMap::new(), names.clone(), values.clone(), valid).unwrap();
        assert!(plain.sampled);
        assert_eq!(plain.lookup(&anchor), None, "a sample of 400000 of 16.7 million points holds it by chance only");
        let s = SearchSpace::build_around(IndexMap::new(), names, values, std::slice::from_ref(&anchor), valid).unwrap();
        let a = s.lookup(&anchor).expect("the anchor itself");
        // Every value of one parameter, where valid.
        for v in 0..16u16 {
            let mut line = anchor.clone();
            line[4] = v;
            assert!(s.lookup(&line).is_some(), "C index {v}");
        }
        let mut too_big = anchor.clone();
        too_big[0] = 4; // 5 + 16 > 20
        assert_eq!(s.lookup(&too_big), None);
        // One step in each of two parameters, also where the one-step points break the
        // constraint: (5, 15) is reached from (4, 16) although (5, 16) is not valid.
        assert_eq!(s.step(a, 0, 1), None);
        let diagonal = s.step_many(a, &[(0, 1), (1, -1)]).expect("X + 1, Y - 1 in one move");
        assert_eq!((s.tuning(diagonal)["X"], s.tuning(diagonal)["Y"]), (5, 15));
        assert!(s.step_many(a, &[(2, 1), (5, -1)]).is_some());
        // Anchors change nothing in a space small enough to enumerate.
        let small =
            SearchSpace::build_around(IndexMap::new(), vec!["X".into(), "Y".into()], vec![vec![1, 2, 4, 8]; 2], &[vec![3, 3]], |p| p[0] * p[1] <= 16).unwrap();
        assert_eq!(small.len(), grid().len());
    }

    #[test]
    fn an_empty_space_names_the_constraints_that_emptied_it() {
        let count = |constraint: &str, rejected| ConstraintCount { constraint: constraint.into(), rejected };
        let text = rejections(&[count("HEAD_DIM == dim", 42), count("2 * TILE_J * HEAD_DIM <= 8192", 0), count("BLOCK_X % 32 == 0", 6)]);
        assert!(
            text.contains("of the 48 combinations tried") && text.contains("`HEAD_DIM == dim` rejected 42") && text.contains("`BLOCK_X % 32 == 0` rejected 6"),
            "{text}"
        );
        assert!(!text.contains("TILE_J"), "a constraint that rejected nothing is not blamed: {text}");
        assert_eq!(rejections(&[]), "", "a space emptied by no constraint (a parameter without values) says nothing more");
    }

    #[test]
    fn nearest_maps_foreign_values_into_the_space() {
        let s = grid();
        let i = s.nearest(&[("X".to_string(), 3)].into_iter().collect()).unwrap();
        let t = s.tuning(i);
        assert!(t["X"] == 2 || t["X"] == 4, "{t:?}");
        assert!(t["X"] * t["Y"] <= 16);
    }
}
