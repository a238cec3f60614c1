//! Tuning a whole context: the glue between the worker, the references, the cache and the
//! search, used by `peak tune` and by the workflow.

use std::path::{Path, PathBuf};
use std::time::Duration;

use indexmap::IndexMap;

use peak_backend::RunOptions;
use peak_backend::worker::ReferenceArray;
use peak_spec::{Context, Space};
use serde::{Deserialize, Serialize};

use crate::cache::{CacheIdentity, ResultsCache};
use crate::error::EvalError;
use crate::hash::{device_identity, source_hash};
use crate::reference::{ReferenceStore, check_compatible};
use crate::search::{SearchSpace, input_configurations};
use crate::tune::{TuneOptions, TuneReporter, TuneRun, WorkerMeasurer, tune};
use crate::validate::tolerance;
use crate::workers::Workers;
use crate::workers::absolute;

/// Where peak keeps its caches: `$PEAK_CACHE_DIR`, else `$XDG_CACHE_HOME/peak`, else
/// `~/.cache/peak`.
pub fn default_cache_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("PEAK_CACHE_DIR") {
        return PathBuf::from(dir);
    }
    if let Some(dir) = std::env::var_os("XDG_CACHE_HOME") {
        return PathBuf::from(dir).join("peak");
    }
    match std::env::var_os("HOME") {
        Some(home) => PathBuf::from(home).join(".cache").join("peak"),
        None => PathBuf::from(".peak-cache"),
    }
}

/// Timing settings for tuning, with the one method of every time in peak
/// (`peak_backend::timing`: warm-up, the cache flushed before every run outside the
/// timed interval, device events, the median with its spread): the outputs run doubles
/// as the warm-up of caches and JIT, so one more warm-up run suffices; seven timed runs
/// give a stable median; two input sets alternate, so no variant is timed on cache-warm
/// data where the backend cannot flush its cache. Every variant's outputs are
/// checked against the reference; whether it leaves its read-only inputs alone is left to
/// `peak validate` (fresh inputs, every check), which a workflow runs before tuning:
/// reading the inputs back would cost every variant another transfer of all of them.
pub fn tuning_run_options() -> RunOptions {
    RunOptions { warmup: 1, repetitions: 7, input_sets: 2, flush_cache: true, check_inputs: false, data_seed: 0, cutoff_ms: None }
}

pub struct TuneSetup<'a> {
    pub context: &'a Context,
    /// The context's space, restricted as asked (`--set`).
    pub space: &'a Space,
    /// Judge outputs against this context; `None`: against the context's own first valid
    /// configuration (every variant must agree with it).
    pub reference: Option<&'a Context>,
    /// `<cache>/references` and `<cache>/results` live under this folder.
    pub cache_dir: &'a Path,
    /// Keep no results cache (every configuration is measured).
    pub no_cache: bool,
    /// Do not compare outputs (timing only).
    pub no_validation: bool,
    pub run: RunOptions,
    pub options: TuneOptions,
    pub timeout: Option<Duration>,
    /// Prune configurations whose kernels spill registers, as a workflow's tuning does
    /// (`peak_apply::measure`); an ad-hoc `peak tune` or MCP `tune` keeps them unless asked.
    pub prune_spills: bool,
    /// Override how many configurations stay in flight (default: the pool's).
    pub in_flight: Option<usize>,
}

impl<'a> TuneSetup<'a> {
    /// A search of `space` with `options`, outputs judged against `reference` (or the
    /// context's own first configuration), results cached under `cache_dir`, timed with
    /// [`tuning_run_options`], no per-run time-out, spills kept, the pool's flight size:
    /// what every caller starts from, changing only what it means to.
    pub fn new(context: &'a Context, space: &'a Space, reference: Option<&'a Context>, cache_dir: &'a Path, options: TuneOptions) -> TuneSetup<'a> {
        TuneSetup {
            context,
            space,
            reference,
            cache_dir,
            no_cache: false,
            no_validation: false,
            run: tuning_run_options(),
            options,
            timeout: None,
            prune_spills: false,
            in_flight: None,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CacheReport {
    pub path: PathBuf,
    /// Records already in the file when the run began.
    pub loaded: usize,
    /// A cut-short last line (left by a killed run) that was dropped.
    pub torn_tail: Option<usize>,
    /// Another peak process held the file: its results were read, this run's were not added.
    #[serde(default)]
    pub shared: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TuneReport {
    pub context: PathBuf,
    pub source_hash: String,
    pub device: String,
    pub reference: String,
    pub cache: Option<CacheReport>,
    /// One run per input configuration.
    pub runs: Vec<TuneRun>,
    /// Worker restarts (crashes, faults, time-outs) during the run.
    pub worker_restarts: usize,
    /// Configurations each device measured, when the run was spread over several.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub devices_served: Vec<usize>,
}

/// How many of each earlier input configuration's fastest configurations a warm-started
/// search tries first at the next one.
const EARLIER_BESTS: usize = 8;

/// A warm start's points for the next input configuration: the fastest few found at the
/// sizes tuned before it (good tiles tend to stay good as the problem grows, and a parent's
/// ranking may hold none of them), then the given points, without repeats. A cold start
/// stays cold: its search is not a refinement.
fn with_earlier_bests(start_from: &[IndexMap<String, i64>], earlier: &[IndexMap<String, i64>]) -> Vec<IndexMap<String, i64>> {
    if start_from.is_empty() {
        return Vec::new();
    }
    let mut points: Vec<IndexMap<String, i64>> = Vec::with_capacity(earlier.len() + start_from.len());
    for point in earlier.iter().chain(start_from) {
        if !points.contains(point) {
            points.push(point.clone());
        }
    }
    points
}

/// Tune every input configuration of `setup.space`.
pub fn tune_context(workers: &mut Workers, setup: &TuneSetup, reporter: &dyn TuneReporter) -> Result<TuneReport, EvalError> {
    let ctx = setup.context;
    let reference = setup.reference.unwrap_or(ctx);
    check_compatible(ctx, reference)?;
    let backend = ctx.backend().name();
    let device = workers.pool(backend)?.device().clone();
    let identity =
        CacheIdentity { source_hash: source_hash(ctx), device: device_identity(&device), backend: backend.to_string(), reference: source_hash(reference) };
    let mut cache = if setup.no_cache { None } else { Some(ResultsCache::open_in(&setup.cache_dir.join("results"), &identity)?) };
    let cache_report = cache.as_ref().map(|c| CacheReport { path: c.path().to_path_buf(), loaded: c.loaded, torn_tail: c.torn_tail, shared: c.shared });
    let store = ReferenceStore::new(setup.cache_dir.join("references"));

    let mut runs: Vec<TuneRun> = Vec::new();
    for inputs in input_configurations(ctx, setup.space)? {
        let earlier: Vec<IndexMap<String, i64>> = runs.iter().flat_map(|run| run.top.iter().take(EARLIER_BESTS).map(|e| e.tuning.clone())).collect();
        let options = TuneOptions { start_from: with_earlier_bests(&setup.options.start_from, &earlier), ..setup.options.clone() };
        let space = SearchSpace::new(ctx, setup.space, &inputs, &options.start_from)?;
        let references = if setup.no_validation {
            None
        } else {
            let recorded = store.get_or_record(workers.pool(reference.backend().name())?, reference, &inputs, setup.run.data_seed)?;
            let sample = space.params(0);
            Some(
                recorded
                    .meta
                    .arrays
                    .iter()
                    .map(|a| ReferenceArray { name: a.name.clone(), path: recorded.path(&a.name), tolerance: tolerance(ctx, reference, a.dtype, &sample) })
                    .collect(),
            )
        };
        let mut measurer = WorkerMeasurer::new(workers.dispatch(backend)?, absolute(&ctx.dir), setup.run.clone(), references);
        measurer.timeout = setup.timeout;
        measurer.prune_spills = setup.prune_spills;
        if let Some(n) = setup.in_flight {
            measurer.in_flight = n;
        }
        runs.push(tune(&space, &mut measurer, cache.as_mut(), &options, reporter)?);
    }
    let worker_restarts = workers.restarts(backend);
    Ok(TuneReport {
        context: ctx.dir.clone(),
        source_hash: identity.source_hash,
        device: identity.device,
        reference: if setup.reference.is_some() { reference.dir.display().to_string() } else { "self (first valid configuration)".into() },
        cache: cache_report,
        runs,
        worker_restarts,
        devices_served: workers.served(backend),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(x: i64) -> IndexMap<String, i64> {
        [("X".to_string(), x)].into_iter().collect()
    }

    #[test]
    fn a_warm_start_tries_the_earlier_sizes_bests_first_and_a_cold_one_stays_cold() {
        let parent = [point(1), point(2)];
        let earlier = [point(3), point(1)];
        let xs: Vec<i64> = with_earlier_bests(&parent, &earlier).iter().map(|p| p["X"]).collect();
        assert_eq!(xs, [3, 1, 2]);
        assert!(with_earlier_bests(&[], &earlier).is_empty(), "a cold start is not turned into a refinement");
    }
}
