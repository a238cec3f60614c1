//! Turning a tool's parameters into what the libraries take: the context or checkpoint it
//! names (materialized while the call runs), its space, the transformation library and
//! the apply options.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context as _, Result, anyhow, bail};
use peak_apply::{ApplyOptions, Sanitize, SanitizerSettings, TuningSettings};
use peak_record::{PerformanceRecord, Record};
use peak_spec::{Context, ExecParams, Space};
use peak_transform::Library;
use peak_workflow::Workflow;
use serde_json::Value;

use crate::params::{ApplyParams, LibraryParams, SampleParams, SanitizerParams, SearchLimits, TargetParams};
use crate::settings::Settings;

/// The built-in library with the server's and the call's extra folders layered over it.
pub(crate) fn library(settings: &Settings, extra: &[String]) -> Result<Library> {
    let mut library = Library::builtin()?;
    for dir in settings.library_dirs.iter().map(PathBuf::as_path).chain(extra.iter().map(Path::new)) {
        library.add_dir(dir)?;
    }
    Ok(library)
}

/// A transformation tool's settings as `peak_apply` options, the server's folders included.
/// Every parameter is destructured, so a new one cannot be dropped unnoticed.
pub(crate) fn apply_options(settings: &Settings, tool: &str, transformation: String, executor: String, s: ApplyParams) -> Result<ApplyOptions> {
    let ApplyParams {
        retries,
        samples,
        sampling: SampleParams { seed, set },
        limits,
        library: LibraryParams { library_dirs },
        sanitizer: sanitizer_params,
        defer,
        arch,
    } = s;
    let defaults = ApplyOptions::default();
    let settings = peak_apply::Settings {
        samples: samples.unwrap_or(defaults.settings.samples),
        seed: seed.unwrap_or(defaults.settings.seed),
        sanitizer: sanitizer(tool, Sanitizes::SamplesAndWinner, sanitizer_params)?,
        tuning: tuning(limits),
        set,
        library_dirs: settings.library_dirs.iter().cloned().chain(library_dirs.into_iter().map(PathBuf::from)).collect(),
        cache_dir: settings.cache_dir.clone(),
    };
    Ok(ApplyOptions { transformation, executor, retries: retries.unwrap_or(defaults.retries), settings, defer: defer.then_some(peak_apply::Defer { arch }) })
}

/// A tool's search limits as the tuning settings.
pub(crate) fn tuning(limits: SearchLimits) -> TuningSettings {
    let SearchLimits { budget, time_limit_s } = limits;
    TuningSettings { budget, time_limit: time_limit_s.map(Duration::from_secs_f64) }
}

/// What a tool sanitizes, so a setting it has no use for is refused rather than dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Sanitizes {
    /// Validation samples and the tuned winner: the transformation tools.
    SamplesAndWinner,
    /// The tuned winner only: `init_workflow` and `retune`.
    Winner,
    /// Validation samples only: `validate`.
    Samples,
}

/// A tool's sanitizer parameters, parsed as the CLI parses `--sanitize`,
/// `--sanitize-samples`, `--no-sanitize-winner` and `--sanitize-at`; a bad value, or one
/// `tool` has no use for, is an error naming the parameter. Whether each `sanitize_at`
/// name is one of the kernel's inputs is checked once the kernel is known
/// (`Plan::for_context`).
pub(crate) fn sanitizer(tool: &str, uses: Sanitizes, s: SanitizerParams) -> Result<SanitizerSettings> {
    let SanitizerParams { sanitize, sanitize_samples, sanitize_winner, sanitize_at } = s;
    let defaults = SanitizerSettings::default();
    if sanitize_samples.is_some() && uses == Sanitizes::Winner {
        bail!(
            "sanitize_samples: {tool} validates no samples, it sanitizes only the tuned winner\nhint: leave sanitize_samples out; sanitize, sanitize_winner and sanitize_at apply"
        );
    }
    if sanitize_winner.is_some() && uses == Sanitizes::Samples {
        bail!(
            "sanitize_winner: {tool} tunes nothing, so there is no winner to sanitize\nhint: leave sanitize_winner out; sanitize, sanitize_samples and sanitize_at apply"
        );
    }
    let sanitize = match sanitize {
        Some(text) => {
            text.parse::<Sanitize>().map_err(|e| anyhow!("sanitize: {e}\nhint: `auto` (the default), `none`, or a list such as \"memcheck,racecheck\""))?
        }
        None => defaults.tools,
    };
    for setting in &sanitize_at {
        let well_formed = setting.split_once('=').is_some_and(|(name, value)| !name.trim().is_empty() && value.trim().parse::<i64>().is_ok());
        if !well_formed {
            bail!("sanitize_at: {setting:?}: expected NAME=INTEGER over the kernel's inputs, e.g. \"n=512\"");
        }
    }
    Ok(SanitizerSettings {
        tools: sanitize,
        samples: sanitize_samples.unwrap_or(defaults.samples),
        winner: sanitize_winner.unwrap_or(defaults.winner),
        at: sanitize_at,
    })
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

#[cfg(test)]
mod tests {
    use super::*;
    use peak_eval::sanitizer::SanitizerTool;

    fn settings(sanitize: Option<&str>, samples: Option<usize>, winner: Option<bool>, at: &[&str]) -> SanitizerParams {
        SanitizerParams {
            sanitize: sanitize.map(str::to_string),
            sanitize_samples: samples,
            sanitize_winner: winner,
            sanitize_at: at.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn sanitizer_settings_default_and_parse_as_the_cli_does() {
        let defaults = ApplyOptions::default().settings.sanitizer;
        let left_out = sanitizer("apply_transformation", Sanitizes::SamplesAndWinner, settings(None, None, None, &[])).unwrap();
        assert_eq!(left_out, SanitizerSettings { tools: defaults.tools, samples: defaults.samples, winner: defaults.winner, at: defaults.at });
        let given =
            sanitizer("start_transformation", Sanitizes::SamplesAndWinner, settings(Some(" racecheck,memcheck"), Some(2), Some(false), &["n=512"])).unwrap();
        let both = Sanitize::Tools(vec![SanitizerTool::Racecheck, SanitizerTool::Memcheck]);
        assert_eq!(given, SanitizerSettings { tools: both, samples: 2, winner: false, at: vec!["n=512".into()] });
        let off = sanitizer("validate", Sanitizes::Samples, settings(Some("none"), None, None, &[])).unwrap();
        assert_eq!(off.tools, Sanitize::Tools(vec![]));
    }

    #[test]
    fn a_bad_sanitizer_setting_is_named() {
        let err = |uses, s| sanitizer("retune", uses, s).unwrap_err().to_string();
        let bad = err(Sanitizes::Winner, settings(Some("asan"), None, None, &[]));
        assert!(bad.starts_with("sanitize: unknown sanitizer tool 'asan'") && bad.contains("`none`"), "{bad}");
        for at in ["n", "n=big", "=4"] {
            let bad = err(Sanitizes::Winner, settings(None, None, None, &[at]));
            assert!(bad.starts_with(&format!("sanitize_at: {at:?}: expected NAME=INTEGER")), "{bad}");
        }
        let unused = err(Sanitizes::Winner, settings(None, Some(4), None, &[]));
        assert!(unused.starts_with("sanitize_samples: retune validates no samples"), "{unused}");
        let unused = sanitizer("validate", Sanitizes::Samples, settings(None, None, Some(true), &[])).unwrap_err().to_string();
        assert!(unused.starts_with("sanitize_winner: validate tunes nothing"), "{unused}");
    }
}
