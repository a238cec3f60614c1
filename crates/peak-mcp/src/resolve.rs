//! Turning a tool's parameters into what the libraries take: the context or checkpoint it
//! names (materialized while the call runs), its space, the transformation library and
//! the apply options.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context as _, Result, anyhow, bail};
use peak_apply::ApplyOptions;
use peak_record::{PerformanceRecord, Record};
use peak_spec::{Context, ExecParams, Space};
use peak_transform::Library;
use peak_workflow::Workflow;
use serde_json::Value;

use crate::params::{ApplySettings, TargetParams};
use crate::server::Settings;

/// The built-in library with the server's and the call's extra folders layered over it.
pub(crate) fn library(settings: &Settings, extra: &[String]) -> Result<Library> {
    let mut library = Library::builtin()?;
    for dir in settings.library_dirs.iter().map(PathBuf::as_path).chain(extra.iter().map(Path::new)) {
        library.add_dir(dir)?;
    }
    Ok(library)
}

/// A transformation tool's settings as `peak_apply` options, the server's folders included.
pub(crate) fn apply_options(settings: &Settings, transformation: String, executor: String, s: ApplySettings) -> ApplyOptions {
    let defaults = ApplyOptions::default();
    ApplyOptions {
        transformation,
        executor,
        retries: s.retries.unwrap_or(defaults.retries),
        samples: s.samples.unwrap_or(defaults.samples),
        seed: s.sampling.seed.unwrap_or(defaults.seed),
        budget: s.limits.budget,
        time_limit: s.limits.time_limit_s.map(Duration::from_secs_f64),
        set: s.sampling.set,
        library_dirs: settings.library_dirs.iter().cloned().chain(s.library.library_dirs.into_iter().map(PathBuf::from)).collect(),
        cache_dir: settings.cache_dir.clone(),
        defer: s.defer.then_some(peak_apply::Defer { arch: s.arch }),
        // The sanitizer settings keep their defaults (auto, 16 samples, winner checked).
        ..defaults
    }
}

/// The context's space narrowed by the call's `set`; an empty result is an error.
pub(crate) fn restricted(ctx: &Context, set: &[String]) -> Result<Space> {
    let mut space = ctx.space();
    space.apply_overrides(set).map_err(|e| anyhow!("set: {e}"))?;
    if space.iter().next().is_none() {
        bail!("{}: no execution parameter satisfies the constraints (after `set`)", ctx.manifest_path().display());
    }
    Ok(space)
}

/// Counting a space walks it; past this many points the count says "more than".
const COUNT_LIMIT: usize = 100_000;

/// The valid execution parameters counted up to the limit, and whether there are more.
pub(crate) fn bounded_count(space: &Space) -> (usize, bool) {
    let n = space.iter().take(COUNT_LIMIT + 1).count();
    (n.min(COUNT_LIMIT), n > COUNT_LIMIT)
}

/// A checkpoint's context materialized in a temporary folder, or a context folder.
pub(crate) enum Reference {
    Folder(Context),
    Materialized { ctx: Context, _dir: tempfile::TempDir },
}

impl Reference {
    pub(crate) fn materialize(wf: &Workflow, rev: &str) -> Result<Reference> {
        let dir = tempfile::Builder::new().prefix("peak-mcp-").tempdir().context("creating a temporary folder")?;
        let into = dir.path().join("context");
        wf.materialize(rev, &into)?;
        let ctx = Context::load(&into).with_context(|| format!("checkpoint {rev}"))?;
        Ok(Reference::Materialized { ctx, _dir: dir })
    }

    pub(crate) fn context(&self) -> &Context {
        match self {
            Reference::Folder(ctx) | Reference::Materialized { ctx, .. } => ctx,
        }
    }
}

/// The context a tool works on, from `context` or `workflow` + `checkpoint`.
pub(crate) struct Target {
    pub(crate) ctx: Context,
    /// How to name it to the model: the folder, or `workflow@checkpoint`.
    pub(crate) label: String,
    pub(crate) workflow: Option<Workflow>,
    pub(crate) performance: Value,
    _held: Option<Reference>,
}

impl Target {
    pub(crate) fn resolve(p: &TargetParams) -> Result<Target> {
        match (&p.context, &p.workflow) {
            (Some(_), Some(_)) => bail!("give either `context` (a context folder) or `workflow` (with an optional `checkpoint`), not both"),
            (None, None) => bail!("give `context` (a context folder) or `workflow` (a workflow folder, with an optional `checkpoint`)"),
            (Some(dir), None) => {
                if p.checkpoint.is_some() {
                    bail!("`checkpoint` needs `workflow`");
                }
                let ctx = Context::load(dir)?;
                Ok(Target { label: dir.clone(), ctx, workflow: None, performance: Value::Null, _held: None })
            }
            (None, Some(dir)) => {
                let wf = Workflow::open(dir)?;
                let rev = p.checkpoint.as_deref().unwrap_or("HEAD");
                let id = wf.resolve(rev)?;
                let performance = wf.show(rev)?.performance;
                let held = Reference::materialize(&wf, rev)?;
                let ctx = held.context().clone();
                Ok(Target { label: format!("{dir}@{rev} ({})", id.short()), ctx, workflow: Some(wf), performance, _held: Some(held) })
            }
        }
    }

    /// The checkpoint's best configuration, when it has one that `space` allows.
    pub(crate) fn best_params(&self, space: &Space) -> Option<ExecParams> {
        let params = PerformanceRecord::from_json(&self.performance).ok()?.best?.params;
        space.iter().any(|p| p == params).then_some(params)
    }
}
