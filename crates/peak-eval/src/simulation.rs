//! Replaying a recorded results cache: strategies tested and compared with no device, in
//! the manner of Kernel Tuner's simulation mode.
//!
//! An exhaustive run leaves a record of every valid configuration; replaying it gives any
//! strategy the same answers the device gave, instantly, so "how many evaluations does
//! `auto` need to get within 2% of the best" can be asked a thousand times over.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet, VecDeque};
use std::path::Path;

use indexmap::IndexMap;
use peak_spec::ExecParams;

use crate::cache::{CacheIdentity, Outcome, Record, ResultsCache};
use crate::error::EvalError;
use crate::hash::canonical;
use crate::search::SearchSpace;
use crate::strategy::StrategyKind;
use crate::tune::{Measurer, Progress, TuneOptions, TuneReporter, tune};

/// A recorded cache, grouped by input configuration.
#[derive(Debug, Clone)]
pub struct Recording {
    pub identity: CacheIdentity,
    pub groups: Vec<(IndexMap<String, i64>, Vec<Record>)>,
}

impl Recording {
    pub fn load(path: &Path) -> Result<Recording, EvalError> {
        let contents = ResultsCache::read(path)?;
        let mut groups: Vec<(IndexMap<String, i64>, Vec<Record>)> = Vec::new();
        for record in contents.records {
            match groups.iter_mut().find(|(inputs, _)| *inputs == record.inputs) {
                Some((_, records)) => records.push(record),
                None => groups.push((record.inputs.clone(), vec![record])),
            }
        }
        Ok(Recording { identity: contents.identity, groups })
    }

    /// The space the recording covers at `inputs` (every recorded configuration), and
    /// the outcome of each of its points.
    pub fn space(&self, inputs: &IndexMap<String, i64>) -> Result<(SearchSpace, Vec<Outcome>), EvalError> {
        let (_, records) = self
            .groups
            .iter()
            .find(|(i, _)| i == inputs)
            .ok_or_else(|| EvalError::Replay(format!("the recording has nothing at inputs {}", canonical(inputs))))?;
        let names: Vec<String> = records[0].tuning.keys().cloned().collect();
        let mut values: Vec<Vec<i64>> = vec![Vec::new(); names.len()];
        let mut recorded: HashMap<Vec<i64>, Outcome> = HashMap::new();
        for r in records {
            let point: Option<Vec<i64>> = names.iter().map(|n| r.tuning.get(n).copied()).collect();
            let point = point.filter(|_| r.tuning.len() == names.len()).ok_or_else(|| EvalError::Replay("records name different tuning parameters".into()))?;
            for (d, v) in point.iter().enumerate() {
                values[d].push(*v);
            }
            recorded.insert(point, r.outcome.clone());
        }
        for v in &mut values {
            v.sort_unstable();
            v.dedup();
        }
        let keys: HashSet<Vec<i64>> = recorded.keys().cloned().collect();
        let space = SearchSpace::build(inputs.clone(), names, values, |p| keys.contains(p)).map_err(EvalError::Replay)?;
        let outcomes = (0..space.len()).map(|i| recorded[&space.tuning(i).values().copied().collect::<Vec<_>>()].clone()).collect();
        Ok((space, outcomes))
    }
}

/// Answers from a recording, one at a time.
pub struct ReplayMeasurer {
    outcomes: Vec<Outcome>,
    queue: VecDeque<usize>,
    /// Configurations asked for, in order.
    pub asked: Vec<usize>,
}

impl ReplayMeasurer {
    pub fn new(outcomes: Vec<Outcome>) -> ReplayMeasurer {
        ReplayMeasurer { outcomes, queue: VecDeque::new(), asked: Vec::new() }
    }
}

impl Measurer for ReplayMeasurer {
    fn capacity(&self) -> usize {
        1
    }

    fn submit(&mut self, point: usize, _params: ExecParams, _best_ms: Option<f64>) -> Result<(), EvalError> {
        if point >= self.outcomes.len() {
            return Err(EvalError::Replay(format!("configuration {point} is not in the recording")));
        }
        self.asked.push(point);
        self.queue.push_back(point);
        Ok(())
    }

    fn next(&mut self) -> Result<Option<(usize, Outcome)>, EvalError> {
        Ok(self.queue.pop_front().map(|p| (p, self.outcomes[p].clone())))
    }
}

/// Best time so far after each evaluation (`None` until one succeeds), for `strategy`
/// replayed over a recorded space for at most `evaluations` evaluations.
pub fn simulate(space: &SearchSpace, outcomes: &[Outcome], strategy: StrategyKind, seed: u64, evaluations: usize) -> Result<Vec<Option<f64>>, EvalError> {
    struct Trace(RefCell<Vec<Option<f64>>>);
    impl TuneReporter for Trace {
        fn evaluated(&self, progress: &Progress) {
            self.0.borrow_mut().push(progress.best_ms);
        }
    }
    let trace = Trace(RefCell::new(Vec::with_capacity(evaluations)));
    let mut measurer = ReplayMeasurer::new(outcomes.to_vec());
    let options = TuneOptions { strategy, budget: Some(evaluations), seed, top_k: 1, ..TuneOptions::default() };
    tune(space, &mut measurer, None, &options, &trace)?;
    Ok(trace.0.into_inner())
}
