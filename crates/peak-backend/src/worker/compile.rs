//! The compile stage of the worker: each module compiled once, shared by every job that
//! needs it, and kept for the next ones.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use peak_spec::Context;

use crate::backend::{Backend, Module};
use crate::runner;

use super::protocol::{Failure, FailureKind, Job};

/// Compiled modules a worker keeps, so validation samples that share tuning parameters
/// compile once. Bounded because each holds device memory.
const MODULE_CACHE: usize = 64;

pub(super) type Prepared = Result<(Arc<Context>, Arc<Compiled>), Failure>;

pub(super) struct Compiled {
    pub(super) module: Module,
    pub(super) compile_ms: f64,
}

type ModuleKey = (String, String, Vec<(String, String)>);
/// A module being compiled or compiled, shared by every job that needs it.
type ModuleCell = Arc<OnceLock<Result<Arc<Compiled>, Failure>>>;

#[derive(Default)]
pub(super) struct ModuleCache {
    entries: HashMap<ModuleKey, ModuleCell>,
    order: VecDeque<ModuleKey>,
}

pub(super) fn prepare(backend: &dyn Backend, job: &Job, modules: &Mutex<ModuleCache>) -> Prepared {
    let ctx = Context::load(&job.context).map_err(|e| Failure::new(FailureKind::LaunchFailed, format!("cannot load the context: {e}")))?;
    let key: ModuleKey = (ctx.source_path().display().to_string(), ctx.regions.device_source(), job.params.defines());
    let cell = {
        let mut cache = modules.lock().unwrap_or_else(|p| p.into_inner());
        match cache.entries.get(&key) {
            Some(cell) => cell.clone(),
            None => {
                let cell = Arc::new(OnceLock::new());
                cache.entries.insert(key.clone(), cell.clone());
                cache.order.push_back(key);
                while cache.order.len() > MODULE_CACHE {
                    if let Some(old) = cache.order.pop_front() {
                        cache.entries.remove(&old);
                    }
                }
                cell
            }
        }
    };
    // Two jobs with the same module: the second blocks here until the first has compiled.
    let mut fresh = false;
    let compiled = cell
        .get_or_init(|| {
            fresh = true;
            let start = Instant::now();
            runner::compile(backend, &ctx, &job.params)
                .map(|module| Arc::new(Compiled { module, compile_ms: start.elapsed().as_secs_f64() * 1e3 }))
                .map_err(|e| Failure::from(&e))
        })
        .clone()?;
    let compiled = if fresh { compiled } else { Arc::new(Compiled { module: compiled.module.clone(), compile_ms: 0.0 }) };
    Ok((Arc::new(ctx), compiled))
}
