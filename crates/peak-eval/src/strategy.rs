//! Search strategies: exhaustive, random, and `auto`, Bayesian optimisation.
//!
//! `auto` evaluates a few random points, then proposes, each time, the free point of
//! highest expected improvement under a Gaussian-process model of the log-times seen so
//! far ([`crate::model`]). Points are value indices, so the model sees an ordinal grid
//! whatever the spacing of the values (powers of two, ranges with a step), and only points
//! inside the constrained space are ever proposed. Configurations that failed (pruned,
//! wrong, crashed) enter the model as twice the slowest time, so the search learns to stay
//! away from regions that do not run. Until the model has enough successes to fit, the
//! search steps to neighbours of the best point, or samples at random. When the budget is
//! known, its last 30% refines: the model then only chooses among points within two steps
//! of the best (GPU landscapes are smooth near their optimum; this was what lifted the
//! replayed H200 SGEMM search from 70% to over 90% of runs within 2% of the best).
//!
//! A search started from an earlier ranking (the top-K a parent checkpoint carries to its
//! child) refines from its first proposal, the ranking being its exploration, and refines
//! by coordinate descent first: every single-parameter change of the best point, nearest
//! values first, going on in the direction of a change that won, re-centred whenever a move
//! wins; the model takes over when no such change is left. Carried points share the
//! parent's choices, including ones that were only best for the parent's kernel, and a
//! model fitted to them has never seen such a parameter vary: the replayed fp32 case study
//! kept a split count of 4 through its last steps, 9% slower than 1. On the replayed
//! recordings, with a carried ranking that lacks the best value of one parameter, descent
//! and the model alone were even (4 of 6 spaces within 2% in most runs either way); on a
//! cold start descent was worse (92% against 99% of SGEMM runs), so cold starts keep the
//! model.
//!
//! This choice was measured, not assumed: on replayed exhaustive recordings (`bench/`),
//! an OpenTuner-style bandit over random, neighbourhood, crossover and line-sweep moves
//! (with the model as a fifth arm) was consistently behind the model alone.
//!
//! Strategies are asynchronous: several proposals may be pending while the device runs
//! earlier ones, and results are observed in any order. `auto` treats pending points as
//! if they had taken the time the model predicts ("kriging believer"), so a batch of
//! proposals spreads out instead of piling onto one spot.

use std::collections::{BTreeSet, HashMap};
use std::str::FromStr;

use peak_spec::rng::SplitMix64;
use serde::{Deserialize, Serialize};

use crate::model::{self, Gp, Hyper};
use crate::search::SearchSpace;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StrategyKind {
    Exhaustive,
    Random,
    Auto,
}

impl StrategyKind {
    pub fn name(self) -> &'static str {
        match self {
            StrategyKind::Exhaustive => "exhaustive",
            StrategyKind::Random => "random",
            StrategyKind::Auto => "auto",
        }
    }

    /// `budget`: the evaluations the search will get, when known (`auto` spends the last
    /// part of it refining around the best points). `warm_start`: the search's first
    /// results are points carried from an earlier ranking, so `auto` refines at once.
    pub fn build(self, space: &SearchSpace, seed: u64, budget: Option<usize>, warm_start: bool) -> Box<dyn Strategy> {
        match self {
            StrategyKind::Exhaustive => Box::new(Exhaustive { next: 0 }),
            StrategyKind::Random => Box::new(RandomSearch::new(space.len(), seed)),
            StrategyKind::Auto => Box::new(Auto::new(seed, budget, warm_start)),
        }
    }
}

impl FromStr for StrategyKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "exhaustive" => Ok(StrategyKind::Exhaustive),
            "random" => Ok(StrategyKind::Random),
            "auto" => Ok(StrategyKind::Auto),
            other => Err(format!("unknown strategy '{other}': expected exhaustive, random or auto")),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Status {
    Free,
    Pending,
    Done,
}

/// What has been tried: pending points, results (`None` for a failed or pruned point),
/// and the successes sorted by cost.
#[derive(Debug, Clone)]
pub struct History {
    status: Vec<Status>,
    costs: HashMap<usize, Option<f64>>,
    /// (cost, point) of every success, fastest first.
    ranked: Vec<(f64, usize)>,
    /// Failed points, in the order they came back.
    failed: Vec<usize>,
    pending: BTreeSet<usize>,
    free: usize,
}

impl History {
    pub fn new(points: usize) -> History {
        History { status: vec![Status::Free; points], costs: HashMap::new(), ranked: Vec::new(), failed: Vec::new(), pending: BTreeSet::new(), free: points }
    }

    pub fn is_free(&self, point: usize) -> bool {
        self.status[point] == Status::Free
    }

    /// Points neither tried nor pending.
    pub fn free(&self) -> usize {
        self.free
    }

    pub fn mark_pending(&mut self, point: usize) {
        if self.status[point] == Status::Free {
            self.free -= 1;
        }
        self.status[point] = Status::Pending;
        self.pending.insert(point);
    }

    pub fn record(&mut self, point: usize, cost: Option<f64>) {
        if self.status[point] == Status::Free {
            self.free -= 1;
        }
        self.status[point] = Status::Done;
        self.pending.remove(&point);
        self.costs.insert(point, cost);
        match cost {
            Some(c) => {
                let at = self.ranked.partition_point(|&(x, _)| x <= c);
                self.ranked.insert(at, (c, point));
            }
            None => self.failed.push(point),
        }
    }

    /// Points proposed and not yet answered, in index order.
    pub fn pending(&self) -> impl Iterator<Item = usize> + '_ {
        self.pending.iter().copied()
    }

    /// Failed points, the most recent first.
    pub fn failures(&self) -> impl Iterator<Item = usize> + '_ {
        self.failed.iter().rev().copied()
    }

    pub fn cost(&self, point: usize) -> Option<Option<f64>> {
        self.costs.get(&point).copied()
    }

    pub fn best(&self) -> Option<(usize, f64)> {
        self.ranked.first().map(|&(c, p)| (p, c))
    }

    /// Successes, fastest first.
    pub fn ranked(&self) -> &[(f64, usize)] {
        &self.ranked
    }

    pub fn evaluated(&self) -> usize {
        self.costs.len()
    }
}

pub trait Strategy {
    fn name(&self) -> &'static str;
    /// The next point to evaluate (one that is free in `history`), or `None` when the
    /// strategy has nothing left to propose.
    fn propose(&mut self, space: &SearchSpace, history: &History) -> Option<usize>;
    /// A result arrived. `history` does not yet hold it.
    fn observe(&mut self, _space: &SearchSpace, _history: &History, _point: usize, _cost: Option<f64>) {}
}

/// Every point, in the space's order.
pub struct Exhaustive {
    next: usize,
}

impl Strategy for Exhaustive {
    fn name(&self) -> &'static str {
        "exhaustive"
    }

    fn propose(&mut self, space: &SearchSpace, history: &History) -> Option<usize> {
        while self.next < space.len() {
            let p = self.next;
            self.next += 1;
            if history.is_free(p) {
                return Some(p);
            }
        }
        None
    }
}

/// Every point once, in a random order (a lazy Fisher–Yates shuffle).
pub struct RandomSearch {
    order: Vec<u32>,
    next: usize,
    rng: SplitMix64,
}

impl RandomSearch {
    pub fn new(points: usize, seed: u64) -> RandomSearch {
        RandomSearch { order: (0..points as u32).collect(), next: 0, rng: SplitMix64::new(seed ^ 0x005E_A2C4) }
    }
}

impl Strategy for RandomSearch {
    fn name(&self) -> &'static str {
        "random"
    }

    fn propose(&mut self, _space: &SearchSpace, history: &History) -> Option<usize> {
        while self.next < self.order.len() {
            let j = self.next + self.rng.below((self.order.len() - self.next) as u64) as usize;
            self.order.swap(self.next, j);
            let p = self.order[self.next] as usize;
            self.next += 1;
            if history.is_free(p) {
                return Some(p);
            }
        }
        None
    }
}

/// Free points the model scores per proposal at most (the rest of a large space is
/// represented by a random sample plus the neighbourhood of the best points).
const MODEL_CANDIDATES: usize = 4000;

/// The share of a known budget `auto` spends refining around the best point.
const REFINE: f64 = 0.3;

/// The first free point that differs from `center` in one parameter only: one value away
/// in any parameter, then two, and so on, so that every value of every parameter is
/// reached before the neighbourhood is given up.
fn coordinate_move(space: &SearchSpace, history: &History, center: usize) -> Option<usize> {
    let widest = (0..space.dims()).map(|d| space.values(d).len()).max().unwrap_or(0) as i32;
    (1..widest)
        .flat_map(|distance| (0..space.dims()).flat_map(move |d| [-distance, distance].map(|delta| (d, delta))))
        .filter_map(|(d, delta)| space.step(center, d, delta))
        .find(|&p| history.is_free(p))
}

/// Free points one step from `center` in one parameter, or one step in each of two. The
/// two-parameter moves are taken whole, so they reach points whose one-step intermediates
/// break a constraint (8 x 16 to 16 x 8 under `TRD_X * TRD_Y <= 128`).
fn within_two_steps(space: &SearchSpace, history: &History, center: usize) -> Vec<usize> {
    let mut near = Vec::new();
    for d in 0..space.dims() {
        for delta in [-1, 1] {
            near.extend(space.step(center, d, delta).filter(|&q| history.is_free(q)));
            for d2 in d + 1..space.dims() {
                for delta2 in [-1, 1] {
                    near.extend(space.step_many(center, &[(d, delta), (d2, delta2)]).filter(|&r| history.is_free(r)));
                }
            }
        }
    }
    near
}

/// Bayesian optimisation over the ordinal grid (see the module docs).
pub struct Auto {
    rng: SplitMix64,
    /// Random points before the model takes over.
    warmup: usize,
    proposed: usize,
    /// Hyperparameters and the number of results they were chosen on; chosen again once
    /// the results have grown by a quarter.
    hyper: Option<(usize, Hyper)>,
    /// Proposals (counting points carried in from elsewhere) after which it refines.
    refine_after: Option<usize>,
    /// The parameter and direction of the last single-parameter change that won: the
    /// next move goes on the same way (a line search), before the others are tried.
    momentum: Option<(usize, i32)>,
    /// Refine by coordinate descent before the model (warm starts only, see the docs).
    descend: bool,
}

impl Auto {
    pub fn new(seed: u64, budget: Option<usize>, warm_start: bool) -> Auto {
        let (warmup, refine_after) = match warm_start {
            true => (0, Some(0)),
            false => (6, budget.map(|b| (b as f64 * (1.0 - REFINE)) as usize)),
        };
        Auto { rng: SplitMix64::new(seed ^ 0xA070), warmup, proposed: 0, hyper: None, refine_after, momentum: None, descend: warm_start }
    }

    fn refining(&self, history: &History) -> bool {
        self.refine_after.is_some_and(|after| history.evaluated() + history.pending().count() >= after)
    }

    fn random_free(&mut self, space: &SearchSpace, history: &History) -> Option<usize> {
        if history.free() == 0 {
            return None;
        }
        for _ in 0..64 {
            let p = self.rng.below(space.len() as u64) as usize;
            if history.is_free(p) {
                return Some(p);
            }
        }
        let start = self.rng.below(space.len() as u64) as usize;
        (0..space.len()).map(|k| (start + k) % space.len()).find(|&p| history.is_free(p))
    }

    /// A free neighbour of the best point: one step in one parameter, else two.
    fn neighbour(&mut self, space: &SearchSpace, history: &History) -> Option<usize> {
        let (best, _) = history.best()?;
        for radius in [1, 2] {
            let near: Vec<usize> =
                (0..space.dims()).flat_map(|d| [-radius, radius].map(|delta| space.step(best, d, delta))).flatten().filter(|&p| history.is_free(p)).collect();
            if !near.is_empty() {
                return Some(near[self.rng.below(near.len() as u64) as usize]);
            }
        }
        None
    }

    /// The free point of highest expected improvement.
    fn model(&mut self, space: &SearchSpace, history: &History) -> Option<usize> {
        let ranked = history.ranked();
        if ranked.len() < 4 || space.dims() == 0 {
            return None;
        }
        let encode = |p: usize| -> Vec<f64> {
            space
                .point(p)
                .iter()
                .enumerate()
                .map(|(d, &v)| {
                    let len = space.values(d).len();
                    if len > 1 { f64::from(v) / (len - 1) as f64 } else { 0.5 }
                })
                .collect()
        };
        // The training set: the best half of the capacity, an even spread over the other
        // successes, and some failures at twice the slowest time.
        let keep = model::MAX_POINTS.min(ranked.len());
        let head = keep / 2;
        let tail = &ranked[head..];
        let mut chosen: Vec<(f64, usize)> = ranked[..head].to_vec();
        for k in 0..keep - head {
            chosen.push(tail[k * tail.len() / (keep - head)]);
        }
        let penalty = 2.0 * ranked.last().map(|r| r.0).unwrap_or(1.0);
        chosen.extend(history.failures().take(model::MAX_POINTS / 4).map(|p| (penalty, p)));
        let xs: Vec<Vec<f64>> = chosen.iter().map(|&(_, p)| encode(p)).collect();
        let costs: Vec<f64> = chosen.iter().map(|&(c, _)| c).collect();

        let seen = history.evaluated();
        let reuse = self.hyper.as_ref().filter(|(at, _)| seen < at + at.div_ceil(4)).map(|(_, h)| h.clone());
        let mut gp = Gp::fit(xs.clone(), &costs, reuse.as_ref())?;
        if reuse.is_none() {
            self.hyper = Some((seen, gp.hyper()));
        }
        let pending: Vec<usize> = history.pending().collect();
        if !pending.is_empty() {
            let hyper = gp.hyper();
            let (mut xs, mut costs) = (xs, costs);
            for p in pending {
                let x = encode(p);
                costs.push(gp.destandardize(gp.predict(&x).0));
                xs.push(x);
            }
            gp = Gp::fit(xs, &costs, Some(&hyper))?;
        }

        let best = gp.standardize(ranked[0].0);
        // Refining, with no single-parameter change left: only points at most two steps
        // (in at most two parameters) from the best are considered.
        if self.refining(history) {
            let near = within_two_steps(space, history, ranked[0].1);
            if let Some(p) = near.into_iter().map(|p| (gp.expected_improvement(&encode(p), best), p)).max_by(|a, b| a.0.total_cmp(&b.0)).map(|(_, p)| p) {
                return Some(p);
            }
        }
        let candidates: Vec<usize> = if history.free() <= MODEL_CANDIDATES {
            (0..space.len()).filter(|&p| history.is_free(p)).collect()
        } else {
            let mut c: Vec<usize> = (0..MODEL_CANDIDATES).map(|_| self.rng.below(space.len() as u64) as usize).filter(|&p| history.is_free(p)).collect();
            for &(_, top) in ranked.iter().take(5) {
                for d in 0..space.dims() {
                    for delta in [-1, 1] {
                        c.extend(space.step(top, d, delta).filter(|&p| history.is_free(p)));
                    }
                }
            }
            c
        };
        candidates.into_iter().map(|p| (gp.expected_improvement(&encode(p), best), p)).max_by(|a, b| a.0.total_cmp(&b.0)).map(|(_, p)| p)
    }
}

impl Strategy for Auto {
    fn name(&self) -> &'static str {
        "auto"
    }

    fn propose(&mut self, space: &SearchSpace, history: &History) -> Option<usize> {
        if history.free() == 0 {
            return None;
        }
        self.proposed += 1;
        if self.descend
            && self.refining(history)
            && let Some((best, _)) = history.best()
        {
            let onward = self.momentum.and_then(|(d, delta)| space.step(best, d, delta)).filter(|&p| history.is_free(p));
            if let Some(p) = onward.or_else(|| coordinate_move(space, history, best)) {
                return Some(p);
            }
        }
        if self.proposed > self.warmup
            && let Some(p) = self.model(space, history).or_else(|| self.neighbour(space, history))
        {
            return Some(p);
        }
        self.random_free(space, history)
    }

    fn observe(&mut self, space: &SearchSpace, history: &History, point: usize, cost: Option<f64>) {
        let Some((best, best_cost)) = history.best() else { return };
        if cost.is_none_or(|c| c >= best_cost) {
            return;
        }
        let mut changed = space.point(point).iter().zip(space.point(best)).enumerate().filter(|(_, (a, b))| a != b);
        self.momentum = match (changed.next(), changed.next()) {
            (Some((d, (&to, &from))), None) => Some((d, if to > from { 1 } else { -1 })),
            _ => None,
        };
    }
}

#[cfg(test)]
mod tests {
    use indexmap::IndexMap;

    use super::*;

    fn space() -> SearchSpace {
        SearchSpace::build(IndexMap::new(), vec!["A".into(), "B".into(), "C".into()], vec![(0..8).collect(), (0..8).collect(), (0..4).collect()], |p| {
            (p[0] + p[1]) % 3 != 0
        })
        .unwrap()
    }

    fn drain(mut s: Box<dyn Strategy>, space: &SearchSpace) -> Vec<usize> {
        let mut h = History::new(space.len());
        let mut seen = Vec::new();
        while let Some(p) = s.propose(space, &h) {
            assert!(h.is_free(p), "{} proposed {p} twice", s.name());
            s.observe(space, &h, p, Some(p as f64));
            h.record(p, Some(p as f64));
            seen.push(p);
        }
        seen
    }

    #[test]
    fn every_strategy_visits_every_point_exactly_once() {
        let space = space();
        for kind in [StrategyKind::Exhaustive, StrategyKind::Random, StrategyKind::Auto] {
            let mut seen = drain(kind.build(&space, 7, None, false), &space);
            assert_eq!(seen.len(), space.len(), "{kind:?}");
            seen.sort();
            seen.dedup();
            assert_eq!(seen.len(), space.len(), "{kind:?} repeated a point");
        }
    }

    #[test]
    fn strategies_are_reproducible_for_a_seed() {
        let space = space();
        for kind in [StrategyKind::Random, StrategyKind::Auto] {
            assert_eq!(drain(kind.build(&space, 3, None, false), &space), drain(kind.build(&space, 3, None, false), &space), "{kind:?}");
            assert_ne!(drain(kind.build(&space, 3, None, false), &space), drain(kind.build(&space, 4, None, false), &space), "{kind:?}");
        }
    }

    #[test]
    fn refinement_moves_two_parameters_past_an_invalid_intermediate() {
        let space = space();
        let center = space.lookup(&[1, 1, 0]).unwrap();
        // (2, 1) breaks (A + B) % 3 != 0, so no single step reaches (2, 0) from (1, 1).
        assert_eq!(space.step(center, 0, 1), None);
        let diagonal = space.lookup(&[2, 0, 0]).unwrap();
        let near = within_two_steps(&space, &History::new(space.len()), center);
        assert!(near.contains(&diagonal), "{near:?}");
    }

    #[test]
    fn history_ranks_successes_and_skips_failures() {
        let mut h = History::new(5);
        h.record(3, Some(2.0));
        h.record(1, None);
        h.record(4, Some(1.0));
        h.mark_pending(0);
        assert_eq!(h.pending().collect::<Vec<_>>(), vec![0]);
        assert_eq!(h.failures().collect::<Vec<_>>(), vec![1]);
        assert_eq!(h.best(), Some((4, 1.0)));
        assert_eq!(h.ranked().iter().map(|r| r.1).collect::<Vec<_>>(), vec![4, 3]);
        assert_eq!(h.free(), 1);
        assert!(!h.is_free(0) && h.is_free(2));
        assert_eq!(h.cost(1), Some(None));
    }
}
