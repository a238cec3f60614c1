//! Performance evaluators: find the fastest tuning parameters within a budget.
//!
//! The loop keeps the worker busy: the strategy proposes points, each is looked up in the
//! results cache (a hit costs nothing and is not measured again), and the rest go to a
//! [`Measurer`] that holds several in flight, so the worker compiles ahead on every core
//! while the device runs one variant at a time. Each variant is run once for its outputs
//! (compared with the reference on the spot), then warmed up and timed with device events;
//! the median is its time. Results are appended to the cache before the strategy learns
//! of them, so a killed run resumes where it stopped.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use indexmap::IndexMap;
use peak_backend::worker::{COMPILE_REPORT, Dispatch, Failure, Job, OutputMode, ReferenceArray, RunReport};
use peak_backend::{KernelResources, RunOptions, Spread};
use peak_spec::ExecParams;
use serde::{Deserialize, Serialize};

use crate::cache::{Measurement, Outcome, Record, ResultsCache, now};
use crate::error::EvalError;
use crate::search::{ConstraintCount, SearchSpace};
use crate::strategy::{History, StrategyKind};
use crate::validate::judge;
use crate::verdict::Verdict;

#[derive(Debug, Clone)]
pub struct TuneOptions {
    pub strategy: StrategyKind,
    /// Configurations to evaluate (cache hits included). `None`: every one for exhaustive
    /// search or under a time limit, else [`default_budget`].
    pub budget: Option<usize>,
    /// Stop proposing after this long; results in flight are still collected.
    pub time_limit: Option<Duration>,
    /// How many of the fastest configurations to keep for the next transformation.
    pub top_k: usize,
    pub seed: u64,
    /// Points evaluated first, e.g. the top-K of the previous transformation. Names the
    /// space lacks are ignored; values outside it move to the nearest valid point.
    pub start_from: Vec<IndexMap<String, i64>>,
}

impl Default for TuneOptions {
    fn default() -> Self {
        TuneOptions { strategy: StrategyKind::Auto, budget: None, time_limit: None, top_k: 128, seed: 1, start_from: Vec::new() }
    }
}

/// Measures configurations, several at a time.
pub trait Measurer {
    /// How many configurations to keep in flight.
    fn capacity(&self) -> usize;
    /// Start measuring `point`. `best_ms` is the best time so far, for early cut-offs.
    fn submit(&mut self, point: usize, params: ExecParams, best_ms: Option<f64>) -> Result<(), EvalError>;
    /// The next finished measurement, `None` when nothing is in flight.
    fn next(&mut self) -> Result<Option<(usize, Outcome)>, EvalError>;
    /// Where the measurements' time went so far, as far as the measurer knows (`wall_s`,
    /// `cache_write_s` and `strategy_s` are the tuner's to fill).
    fn time_spent(&self) -> TimeBreakdown {
        TimeBreakdown::default()
    }
}

/// Where a tuning run's time went, in seconds (`time_breakdown` in `peak tune --json`).
///
/// The worker's device thread runs one configuration at a time, so its stages, from
/// `request_wait_s` to `release_s`, add up to about `wall_s` on one device (less the
/// start and the last answers). Compiles and comparisons run on other threads beside it:
/// their sums can exceed the wall, and they cost the wall only through `compile_wait_s`
/// (the device thread waiting, with no configuration compiled yet; it runs each one as
/// soon as its compile ends, whatever the order they were sent in) and the finishers
/// keeping up.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct TimeBreakdown {
    /// The run, end to end (as `elapsed_s`).
    pub wall_s: f64,
    /// Compiler time summed over the worker's compile threads (one per core).
    pub compile_cpu_s: f64,
    /// The device thread idle, waiting for the tuner to send the next configuration.
    pub request_wait_s: f64,
    /// The device thread waiting for a compile to finish: configurations sent, none of
    /// them compiled yet.
    pub compile_wait_s: f64,
    /// Launch scripts run and launches checked against the compiled resources.
    pub plan_s: f64,
    /// Arrays made ready on the device: inputs generated and uploaded or copied, outputs
    /// and scratch poisoned.
    pub inputs_s: f64,
    /// The runs whose outputs are checked, each until the device was done.
    pub check_run_s: f64,
    /// Outputs read back to the host.
    pub read_back_s: f64,
    /// Warm-up and timed repetitions, as the device thread saw them.
    pub timing_s: f64,
    /// Of `timing_s`, the timed repetitions themselves (the sum of the device's event times).
    pub timed_kernels_s: f64,
    /// The device drained and the buffers given back after each configuration.
    pub release_s: f64,
    /// Outputs compared with the reference, on the worker's finisher threads.
    pub compare_s: f64,
    /// Results appended to the results cache, each written and flushed to disk.
    pub cache_write_s: f64,
    /// The search strategy choosing configurations and learning from their times.
    pub strategy_s: f64,
    /// Worker answers the sums come from (a configuration that failed before it ran
    /// reports no stages).
    pub answers: usize,
    /// Configurations run a second time, from the host's inputs, after failing their output
    /// check on inputs the worker kept on the device (both runs are counted above).
    pub reruns: usize,
}

impl TimeBreakdown {
    /// Count one worker answer.
    pub fn add(&mut self, report: &RunReport) {
        let s = &report.stages;
        self.compile_cpu_s += report.compile_ms / 1e3;
        self.request_wait_s += s.request_wait_ms / 1e3;
        self.compile_wait_s += s.compile_wait_ms / 1e3;
        self.plan_s += s.plan_ms / 1e3;
        self.inputs_s += s.inputs_ms / 1e3;
        self.check_run_s += s.check_run_ms / 1e3;
        self.read_back_s += s.read_back_ms / 1e3;
        self.timing_s += s.timing_ms / 1e3;
        self.timed_kernels_s += report.times_ms.iter().sum::<f64>() / 1e3;
        self.release_s += s.release_ms / 1e3;
        self.compare_s += s.compare_ms / 1e3;
        self.answers += 1;
        self.reruns += s.reruns;
    }
}

/// Measures in worker processes (one, or one per device): compiles ahead, times on the
/// device, checks outputs.
pub struct WorkerMeasurer<'a> {
    pool: &'a mut dyn Dispatch,
    context: PathBuf,
    run: RunOptions,
    references: Option<Vec<ReferenceArray>>,
    /// A variant whose first timed run is this many times slower than the best so far
    /// stops timing there: it cannot win, and twenty runs of it would cost the most.
    pub cutoff_factor: Option<f64>,
    pub timeout: Option<Duration>,
    pub prune_spills: bool,
    pub in_flight: usize,
    points: HashMap<u64, usize>,
    spent: TimeBreakdown,
}

impl<'a> WorkerMeasurer<'a> {
    /// `references`: compare every variant's outputs with these (the usual case); `None`
    /// times without checking.
    pub fn new(pool: &'a mut dyn Dispatch, context: PathBuf, run: RunOptions, references: Option<Vec<ReferenceArray>>) -> WorkerMeasurer<'a> {
        let in_flight = pool.capacity();
        WorkerMeasurer {
            pool,
            context,
            run,
            references,
            cutoff_factor: Some(3.0),
            timeout: None,
            prune_spills: false,
            in_flight,
            points: HashMap::new(),
            spent: TimeBreakdown::default(),
        }
    }
}

impl Measurer for WorkerMeasurer<'_> {
    fn capacity(&self) -> usize {
        self.in_flight.max(1)
    }

    fn submit(&mut self, point: usize, params: ExecParams, best_ms: Option<f64>) -> Result<(), EvalError> {
        let run = RunOptions { cutoff_ms: best_ms.zip(self.cutoff_factor).map(|(b, f)| b * f), ..self.run.clone() };
        let outputs = match &self.references {
            Some(references) => OutputMode::Compare { references: references.clone() },
            None => OutputMode::Digest,
        };
        let job = Job { outputs, prune_spills: self.prune_spills, timeout: self.timeout, ..Job::new(self.context.clone(), params, run) };
        let id = self.pool.submit(job);
        self.points.insert(id, point);
        Ok(())
    }

    fn next(&mut self) -> Result<Option<(usize, Outcome)>, EvalError> {
        let Some(answer) = self.pool.next_answer()? else { return Ok(None) };
        let point = self.points.remove(&answer.id).ok_or_else(|| EvalError::Replay(format!("an answer for unknown job {}", answer.id)))?;
        if let Ok(report) = &answer.result {
            self.spent.add(report);
        }
        Ok(Some((point, outcome(answer.result, self.references.is_some())?)))
    }

    fn time_spent(&self) -> TimeBreakdown {
        self.spent.clone()
    }
}

/// What one worker answer means for tuning.
pub fn outcome(result: Result<RunReport, Failure>, checked: bool) -> Result<Outcome, EvalError> {
    let report = match result {
        Err(f) => return Ok(Outcome::Failed { verdict: f.into() }),
        Ok(r) => r,
    };
    if checked {
        let verdict = judge(Ok(report.clone()))?;
        if verdict != Verdict::Passed {
            return Ok(Outcome::Failed { verdict });
        }
    } else if !report.modified_inputs.is_empty() {
        return Ok(Outcome::Failed { verdict: Verdict::ModifiedInput { arrays: report.modified_inputs } });
    }
    let Some(median_ms) = report.median_ms() else {
        return Ok(Outcome::Failed { verdict: Verdict::LaunchFailed { message: "no timed repetition (repetitions = 0)".into() } });
    };
    Ok(Outcome::Measured(Measurement {
        median_ms,
        min_ms: report.times_ms.iter().copied().fold(f64::INFINITY, f64::min),
        times_ms: report.times_ms,
        compile_ms: report.compile_ms,
        run_ms: report.run_ms,
        kernels: report.kernels,
    }))
}

/// Told about progress; the CLI draws a bar from it.
pub trait TuneReporter {
    fn started(&self, _start: &TuneStart) {}
    fn evaluated(&self, _progress: &Progress) {}
}

impl TuneReporter for () {}

#[derive(Debug, Clone, Serialize)]
pub struct TuneStart {
    pub strategy: String,
    pub inputs: IndexMap<String, i64>,
    pub space: usize,
    /// Configurations this run will evaluate at most.
    pub target: usize,
    pub time_limit_s: Option<f64>,
    /// Results already in the cache for this source and device.
    pub cached_available: usize,
}

#[derive(Debug, Clone, Serialize)]
pub struct Progress {
    pub evaluations: usize,
    pub target: usize,
    pub measured: usize,
    pub cached: usize,
    pub failed: usize,
    pub best_ms: Option<f64>,
    pub best: Option<IndexMap<String, i64>>,
    pub elapsed_s: f64,
    /// The configuration just evaluated and what became of it.
    pub last: IndexMap<String, i64>,
    pub last_outcome: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    pub tuning: IndexMap<String, i64>,
    pub median_ms: f64,
    pub min_ms: f64,
    pub repetitions: usize,
    /// Count, min, quartiles and max of the repetitions (`peak_backend::timing`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spread: Option<Spread>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kernels: Vec<KernelResources>,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CurvePoint {
    pub evaluations: usize,
    pub best_ms: f64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StopReason {
    /// The evaluation budget was spent.
    Budget,
    /// The time limit passed.
    Time,
    /// Every configuration of the space was evaluated.
    Exhausted,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Pruned {
    /// Points the constraints removed before the search (by the first constraint failing).
    pub constraints: Vec<ConstraintCount>,
    /// Configurations pruned from the compiler's resource report.
    pub compile_report: usize,
    /// Configurations the launch script or the launch declared invalid.
    pub launch: usize,
    /// Some of them, with the reason.
    pub examples: Vec<PrunedExample>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PrunedExample {
    pub tuning: IndexMap<String, i64>,
    pub reason: String,
}

/// The result of tuning one input configuration.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TuneRun {
    pub strategy: String,
    pub seed: u64,
    pub inputs: IndexMap<String, i64>,
    /// Valid configurations, and the unconstrained product they came from.
    pub space: usize,
    pub space_product: u128,
    pub evaluations: usize,
    pub measured: usize,
    pub cached: usize,
    /// Failed configurations by verdict category (pruned ones are under `pruned`).
    pub failures: BTreeMap<String, usize>,
    /// One example of each failure category, for people.
    pub failure_examples: Vec<FailureExample>,
    pub pruned: Pruned,
    pub best: Option<Entry>,
    /// The fastest configurations, fastest first, at most `top_k`.
    pub top: Vec<Entry>,
    /// Best time so far after each improvement.
    pub curve: Vec<CurvePoint>,
    pub stopped: StopReason,
    pub elapsed_s: f64,
    /// Configurations evaluated per second, end to end (cache hits included).
    pub evaluations_per_s: f64,
    /// Configurations measured per second (compile, check run, timing).
    pub measured_per_s: f64,
    /// A sentence on why the winner won.
    pub why: String,
    /// Where the time went (zeros in reports written before it was measured).
    #[serde(default)]
    pub time_breakdown: TimeBreakdown,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FailureExample {
    pub tuning: IndexMap<String, i64>,
    pub verdict: Verdict,
}

/// Tune one input configuration over `space`.
pub fn tune(
    space: &SearchSpace,
    measurer: &mut dyn Measurer,
    mut cache: Option<&mut ResultsCache>,
    options: &TuneOptions,
    reporter: &dyn TuneReporter,
) -> Result<TuneRun, EvalError> {
    let clock = Instant::now();
    let budget = match (options.budget, options.strategy, options.time_limit) {
        (Some(n), _, _) => Some(n.min(space.len())),
        (None, StrategyKind::Exhaustive, _) | (None, _, Some(_)) => None,
        (None, _, None) => Some(default_budget(space.len())),
    };
    let target = budget.unwrap_or(space.len());
    let mut seeds: VecDeque<usize> = options.start_from.iter().filter_map(|t| space.nearest(t)).collect();
    // Carried points take at most half of a known budget; the search spends the rest
    // refining around the best of them (see `strategy`), since a ranking made for the
    // parent's kernel need not hold for this one.
    let seed_limit = budget.map_or(usize::MAX, |b| b.div_ceil(2));
    let mut strategy = options.strategy.build(space, options.seed, budget, !seeds.is_empty());
    let mut history = History::new(space.len());
    let mut state = State::new(space, options, target, clock);
    reporter.started(&TuneStart {
        strategy: strategy.name().into(),
        inputs: space.inputs.clone(),
        space: space.len(),
        target,
        time_limit_s: options.time_limit.map(|t| t.as_secs_f64()),
        cached_available: cache.as_ref().map_or(0, |c| c.records().filter(|r| r.inputs == space.inputs).count()),
    });

    let mut issued = 0usize;
    let mut outstanding = 0usize;
    let mut timed_out = false;
    let mut exhausted = false;
    let mut cache_write = Duration::ZERO;
    let mut strategy_time = Duration::ZERO;
    loop {
        while !exhausted && issued < target && outstanding < measurer.capacity() {
            if options.time_limit.is_some_and(|limit| clock.elapsed() >= limit) {
                timed_out = true;
                break;
            }
            let seeded = if issued < seed_limit { std::iter::from_fn(|| seeds.pop_front()).find(|&p| history.is_free(p)) } else { None };
            let started = Instant::now();
            let proposed = seeded.or_else(|| strategy.propose(space, &history));
            strategy_time += started.elapsed();
            let Some(point) = proposed else {
                exhausted = true;
                break;
            };
            issued += 1;
            let tuning = space.tuning(point);
            let hit = cache.as_ref().and_then(|c| c.get(&space.inputs, &tuning)).map(|r| r.outcome.clone());
            match hit {
                Some(outcome) => {
                    let started = Instant::now();
                    strategy.observe(space, &history, point, outcome.cost());
                    strategy_time += started.elapsed();
                    history.record(point, outcome.cost());
                    state.account(point, &outcome, true, reporter);
                }
                None => {
                    history.mark_pending(point);
                    measurer.submit(point, space.params(point), history.best().map(|(_, c)| c))?;
                    outstanding += 1;
                }
            }
        }
        if outstanding == 0 {
            break;
        }
        let Some((point, outcome)) = measurer.next()? else {
            return Err(EvalError::Replay(format!("the measurer lost {outstanding} configurations in flight")));
        };
        outstanding -= 1;
        if let Some(cache) = cache.as_deref_mut() {
            let started = Instant::now();
            cache.insert(Record { inputs: space.inputs.clone(), tuning: space.tuning(point), outcome: outcome.clone(), at: now() })?;
            cache_write += started.elapsed();
        }
        let started = Instant::now();
        strategy.observe(space, &history, point, outcome.cost());
        strategy_time += started.elapsed();
        history.record(point, outcome.cost());
        state.account(point, &outcome, false, reporter);
    }
    let stopped = if timed_out {
        StopReason::Time
    } else if history.evaluated() >= space.len() || (exhausted && issued < target) {
        StopReason::Exhausted
    } else {
        StopReason::Budget
    };
    let spent = TimeBreakdown { cache_write_s: cache_write.as_secs_f64(), strategy_s: strategy_time.as_secs_f64(), ..measurer.time_spent() };
    Ok(state.finish(strategy.name(), stopped, spent))
}

/// The evaluations random and auto search get when no budget is given: a tenth of the
/// space, but at least 100 (small spaces are then searched completely).
pub fn default_budget(space: usize) -> usize {
    (space / 10).max(100).min(space)
}

/// Bookkeeping of one run.
struct State<'a> {
    space: &'a SearchSpace,
    options: &'a TuneOptions,
    target: usize,
    clock: Instant,
    evaluations: usize,
    measured: usize,
    cached: usize,
    failures: BTreeMap<String, usize>,
    failure_examples: Vec<FailureExample>,
    pruned: Pruned,
    top: Vec<Entry>,
    curve: Vec<CurvePoint>,
}

impl<'a> State<'a> {
    fn new(space: &'a SearchSpace, options: &'a TuneOptions, target: usize, clock: Instant) -> State<'a> {
        State {
            space,
            options,
            target,
            clock,
            evaluations: 0,
            measured: 0,
            cached: 0,
            failures: BTreeMap::new(),
            failure_examples: Vec::new(),
            pruned: Pruned { constraints: space.pruned.clone(), ..Pruned::default() },
            top: Vec::new(),
            curve: Vec::new(),
        }
    }

    fn account(&mut self, point: usize, outcome: &Outcome, cached: bool, reporter: &dyn TuneReporter) {
        self.evaluations += 1;
        if cached {
            self.cached += 1;
        } else {
            self.measured += 1;
        }
        let tuning = self.space.tuning(point);
        match outcome {
            Outcome::Measured(m) => {
                let entry = Entry {
                    tuning: tuning.clone(),
                    median_ms: m.median_ms,
                    min_ms: m.min_ms,
                    repetitions: m.times_ms.len(),
                    spread: Spread::of(&m.times_ms),
                    kernels: m.kernels.clone(),
                };
                let at = self.top.partition_point(|e| e.median_ms <= m.median_ms);
                if at < self.options.top_k.max(1) {
                    self.top.insert(at, entry);
                    self.top.truncate(self.options.top_k.max(1));
                }
                if self.curve.last().is_none_or(|c| m.median_ms < c.best_ms) {
                    self.curve.push(CurvePoint { evaluations: self.evaluations, best_ms: m.median_ms });
                }
            }
            Outcome::Failed { verdict: Verdict::InvalidConfig { reason } } => {
                if reason.starts_with(COMPILE_REPORT) {
                    self.pruned.compile_report += 1;
                } else {
                    self.pruned.launch += 1;
                }
                if self.pruned.examples.len() < 10 {
                    self.pruned.examples.push(PrunedExample { tuning: tuning.clone(), reason: reason.clone() });
                }
            }
            Outcome::Failed { verdict } => {
                let count = self.failures.entry(verdict.category().to_string()).or_insert(0);
                *count += 1;
                if *count == 1 {
                    self.failure_examples.push(FailureExample { tuning: tuning.clone(), verdict: verdict.clone() });
                }
            }
        }
        let best = self.top.first();
        reporter.evaluated(&Progress {
            evaluations: self.evaluations,
            target: self.target,
            measured: self.measured,
            cached: self.cached,
            failed: self.failures.values().sum(),
            best_ms: best.map(|e| e.median_ms),
            best: best.map(|e| e.tuning.clone()),
            elapsed_s: self.clock.elapsed().as_secs_f64(),
            last: tuning,
            last_outcome: outcome.category().to_string(),
        });
    }

    fn finish(self, strategy: &str, stopped: StopReason, spent: TimeBreakdown) -> TuneRun {
        let elapsed_s = self.clock.elapsed().as_secs_f64();
        let per_s = |n: usize| if elapsed_s > 0.0 { n as f64 / elapsed_s } else { 0.0 };
        let why = explain(&self.top, self.evaluations);
        TuneRun {
            strategy: strategy.to_string(),
            seed: self.options.seed,
            inputs: self.space.inputs.clone(),
            space: self.space.len(),
            space_product: self.space.product,
            evaluations: self.evaluations,
            measured: self.measured,
            cached: self.cached,
            failures: self.failures,
            failure_examples: self.failure_examples,
            pruned: self.pruned,
            best: self.top.first().cloned(),
            top: self.top,
            curve: self.curve,
            stopped,
            elapsed_s,
            evaluations_per_s: per_s(self.evaluations),
            measured_per_s: per_s(self.measured),
            why,
            time_breakdown: TimeBreakdown { wall_s: elapsed_s, ..spent },
        }
    }
}

fn explain(top: &[Entry], evaluations: usize) -> String {
    let Some(best) = top.first() else {
        return format!("no configuration produced a valid time in {evaluations} evaluations");
    };
    let mut text = format!("fastest median time, {:.4} ms over {} timed runs, of {evaluations} configurations evaluated", best.median_ms, best.repetitions);
    if let Some(second) = top.get(1) {
        text.push_str(&format!("; {:.1}% ahead of the runner-up ({:.4} ms)", (second.median_ms / best.median_ms - 1.0) * 100.0, second.median_ms));
    }
    text
}

/// The top-K of a run, as carried to the next transformation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TopK {
    pub source_hash: String,
    pub device: String,
    pub inputs: IndexMap<String, i64>,
    pub entries: Vec<Entry>,
}

impl TopK {
    /// The points to start the next search from.
    pub fn start_points(&self) -> Vec<IndexMap<String, i64>> {
        self.entries.iter().map(|e| e.tuning.clone()).collect()
    }
}
