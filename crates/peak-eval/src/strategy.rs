//! Search strategies: exhaustive, random, and `auto`, an ensemble in the spirit of
//! OpenTuner.
//!
//! `auto` starts with a few random points, then lets a multi-armed bandit choose, for each
//! proposal, one of four techniques: uniform random (exploration), neighbourhood moves
//! around the best points (one ordinal step in one or two parameters), a genetic
//! crossover of two good points with mutation, and a line sweep along one parameter
//! through the incumbent. The bandit credits a technique when its proposal beats the best
//! known so far, weighting recent results more (the area-under-curve credit of OpenTuner's
//! `AUCBanditMetaTechnique`), plus an exploration bonus for techniques used rarely. Every
//! technique works on value indices, so it suits discrete ordinal spaces whatever their
//! spacing, and only proposes points inside the constrained space.
//!
//! Strategies are asynchronous: several proposals may be pending while the device runs
//! earlier ones, and results are observed in any order.

use std::collections::{HashMap, VecDeque};
use std::str::FromStr;

use peak_spec::rng::SplitMix64;
use serde::{Deserialize, Serialize};

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

    pub fn build(self, space: &SearchSpace, seed: u64) -> Box<dyn Strategy> {
        match self {
            StrategyKind::Exhaustive => Box::new(Exhaustive { next: 0 }),
            StrategyKind::Random => Box::new(RandomSearch::new(space.len(), seed)),
            StrategyKind::Auto => Box::new(Auto::new(space, seed)),
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
    free: usize,
}

impl History {
    pub fn new(points: usize) -> History {
        History { status: vec![Status::Free; points], costs: HashMap::new(), ranked: Vec::new(), free: points }
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
    }

    pub fn record(&mut self, point: usize, cost: Option<f64>) {
        if self.status[point] == Status::Free {
            self.free -= 1;
        }
        self.status[point] = Status::Done;
        self.costs.insert(point, cost);
        if let Some(c) = cost {
            let at = self.ranked.partition_point(|&(x, _)| x <= c);
            self.ranked.insert(at, (c, point));
        }
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

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Technique {
    Random,
    Neighbour,
    Crossover,
    Sweep,
}

const TECHNIQUES: [Technique; 4] = [Technique::Random, Technique::Neighbour, Technique::Crossover, Technique::Sweep];

/// The ensemble autotuner (see the module docs).
pub struct Auto {
    rng: SplitMix64,
    /// Random points before the bandit takes over.
    warmup: usize,
    proposed: usize,
    owner: HashMap<usize, Technique>,
    bandit: Bandit,
}

impl Auto {
    pub fn new(space: &SearchSpace, seed: u64) -> Auto {
        let warmup = (2 * space.dims() + 2).clamp(6, 16);
        Auto { rng: SplitMix64::new(seed ^ 0xA070), warmup, proposed: 0, owner: HashMap::new(), bandit: Bandit::new(40, 0.15) }
    }

    fn unit(&mut self) -> f64 {
        (self.rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64
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

    /// A good point: the best with probability 0.6, else a tournament among the elite.
    fn parent(&mut self, history: &History) -> Option<usize> {
        let ranked = history.ranked();
        if ranked.is_empty() {
            return None;
        }
        if self.unit() < 0.6 {
            return Some(ranked[0].1);
        }
        let elite = (ranked.len() / 5).clamp(1, 8).min(ranked.len());
        let a = self.rng.below(elite as u64) as usize;
        let b = self.rng.below(elite as u64) as usize;
        Some(ranked[a.min(b)].1)
    }

    fn neighbour(&mut self, space: &SearchSpace, history: &History) -> Option<usize> {
        let parent = self.parent(history)?;
        for radius in [1, 2] {
            let mut near: Vec<usize> = Vec::new();
            for d in 0..space.dims() {
                for delta in [-radius, radius] {
                    if let Some(p) = space.step(parent, d, delta).filter(|&p| history.is_free(p)) {
                        near.push(p);
                    }
                }
            }
            if !near.is_empty() {
                return Some(near[self.rng.below(near.len() as u64) as usize]);
            }
        }
        // Diagonal moves: one step in two parameters at once.
        for _ in 0..32 {
            let d1 = self.rng.below(space.dims() as u64) as usize;
            let d2 = self.rng.below(space.dims() as u64) as usize;
            if d1 == d2 {
                continue;
            }
            let s1 = if self.unit() < 0.5 { -1 } else { 1 };
            let s2 = if self.unit() < 0.5 { -1 } else { 1 };
            if let Some(p) = space.step(parent, d1, s1).and_then(|q| space.step(q, d2, s2)).filter(|&p| history.is_free(p)) {
                return Some(p);
            }
        }
        None
    }

    fn crossover(&mut self, space: &SearchSpace, history: &History) -> Option<usize> {
        if history.ranked().len() < 2 {
            return None;
        }
        let dims = space.dims();
        for _ in 0..24 {
            let a = self.parent(history)?;
            let b = self.parent(history)?;
            let (pa, pb) = (space.point(a), space.point(b));
            let mut child: Vec<u16> = (0..dims).map(|d| if self.unit() < 0.5 { pa[d] } else { pb[d] }).collect();
            for (d, gene) in child.iter_mut().enumerate() {
                if self.unit() < 1.0 / dims as f64 {
                    let len = space.values(d).len() as i32;
                    let moved = i32::from(*gene) + if self.unit() < 0.5 { -1 } else { 1 };
                    *gene = moved.clamp(0, len - 1) as u16;
                }
            }
            if let Some(p) = space.lookup(&child).filter(|&p| history.is_free(p)) {
                return Some(p);
            }
        }
        None
    }

    fn sweep(&mut self, space: &SearchSpace, history: &History) -> Option<usize> {
        let (best, _) = history.best()?;
        let start = self.rng.below(space.dims() as u64) as usize;
        for k in 0..space.dims() {
            let d = (start + k) % space.dims();
            let here = i32::from(space.point(best)[d]);
            let mut line: Vec<(i32, usize)> = (0..space.values(d).len() as i32)
                .filter_map(|v| space.step(best, d, v - here).filter(|&p| history.is_free(p)).map(|p| ((v - here).abs(), p)))
                .collect();
            line.sort();
            if let Some(&(_, p)) = line.first() {
                return Some(p);
            }
        }
        None
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
        let technique = if self.proposed <= self.warmup || history.ranked().is_empty() {
            Technique::Random
        } else {
            let tie = self.rng.next_u64();
            self.bandit.choose(tie)
        };
        let proposal = match technique {
            Technique::Random => None,
            Technique::Neighbour => self.neighbour(space, history),
            Technique::Crossover => self.crossover(space, history),
            Technique::Sweep => self.sweep(space, history),
        };
        let (technique, point) = match proposal {
            Some(p) => (technique, p),
            None => (Technique::Random, self.random_free(space, history)?),
        };
        self.owner.insert(point, technique);
        Some(point)
    }

    fn observe(&mut self, _space: &SearchSpace, history: &History, point: usize, cost: Option<f64>) {
        let improved = match (cost, history.best()) {
            (Some(c), Some((_, best))) => c < best,
            (Some(_), None) => true,
            (None, _) => false,
        };
        if let Some(technique) = self.owner.remove(&point) {
            self.bandit.credit(technique, improved);
        }
    }
}

/// AUC bandit over the techniques: a sliding window of (technique, improved?) outcomes.
struct Bandit {
    window: usize,
    exploration: f64,
    outcomes: VecDeque<(Technique, bool)>,
}

impl Bandit {
    fn new(window: usize, exploration: f64) -> Bandit {
        Bandit { window, exploration, outcomes: VecDeque::new() }
    }

    fn credit(&mut self, technique: Technique, improved: bool) {
        self.outcomes.push_back((technique, improved));
        while self.outcomes.len() > self.window {
            self.outcomes.pop_front();
        }
    }

    fn score(&self, technique: Technique) -> f64 {
        let mine: Vec<bool> = self.outcomes.iter().filter(|(t, _)| *t == technique).map(|(_, i)| *i).collect();
        if mine.is_empty() {
            return f64::INFINITY;
        }
        let k = mine.len() as f64;
        // Recent successes weigh more: the i-th oldest counts i.
        let auc = mine.iter().enumerate().map(|(i, &hit)| if hit { (i + 1) as f64 } else { 0.0 }).sum::<f64>() / (k * (k + 1.0) / 2.0);
        let total = self.outcomes.len().max(2) as f64;
        auc + self.exploration * (2.0 * total.ln() / k).sqrt()
    }

    fn choose(&self, tie: u64) -> Technique {
        let scores: Vec<f64> = TECHNIQUES.iter().map(|&t| self.score(t)).collect();
        let best = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let top: Vec<Technique> = TECHNIQUES.iter().zip(&scores).filter(|(_, s)| **s >= best).map(|(t, _)| *t).collect();
        top[(tie % top.len() as u64) as usize]
    }
}

#[cfg(test)]
mod tests {
    use indexmap::IndexMap;

    use super::*;

    fn space() -> SearchSpace {
        SearchSpace::build(IndexMap::new(), vec!["A".into(), "B".into(), "C".into()], vec![(0..8).collect(), (0..8).collect(), (0..4).collect()], |p| (p[0] + p[1]) % 3 != 0).unwrap()
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
            let mut seen = drain(kind.build(&space, 7), &space);
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
            assert_eq!(drain(kind.build(&space, 3), &space), drain(kind.build(&space, 3), &space), "{kind:?}");
            assert_ne!(drain(kind.build(&space, 3), &space), drain(kind.build(&space, 4), &space), "{kind:?}");
        }
    }

    #[test]
    fn history_ranks_successes_and_skips_failures() {
        let mut h = History::new(5);
        h.record(3, Some(2.0));
        h.record(1, None);
        h.record(4, Some(1.0));
        h.mark_pending(0);
        assert_eq!(h.best(), Some((4, 1.0)));
        assert_eq!(h.ranked().iter().map(|r| r.1).collect::<Vec<_>>(), vec![4, 3]);
        assert_eq!(h.free(), 1);
        assert!(!h.is_free(0) && h.is_free(2));
        assert_eq!(h.cost(1), Some(None));
    }

    #[test]
    fn bandit_prefers_the_technique_that_keeps_improving() {
        let mut b = Bandit::new(40, 0.15);
        for i in 0..20 {
            b.credit(Technique::Neighbour, i % 2 == 0);
            b.credit(Technique::Random, false);
            b.credit(Technique::Crossover, false);
            b.credit(Technique::Sweep, i % 7 == 0);
        }
        assert_eq!(b.choose(0), Technique::Neighbour);
    }
}
