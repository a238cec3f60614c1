//! What is exported, and at which configuration.
//!
//! A source is a checkpoint of a workflow (its context, materialized into a temporary
//! folder, and its performance record) or a context folder (no record: every tuning
//! parameter comes from `--set`). The configuration starts from the record's best: the best
//! of the tuning run whose inputs match the chosen inputs where there is one, else the
//! overall best. `--set NAME=VALUE` then sets inputs and tuning parameters.

use std::path::{Path, PathBuf};

use indexmap::IndexMap;
use peak_record::{PerformanceRecord, Record};
use peak_spec::{Context, ExecParams};
use serde::Serialize;

use crate::{ExportError, Result};

/// Where the exported kernel came from, written into every exported file's header.
#[derive(Debug, Clone, Serialize)]
pub struct Origin {
    /// "checkpoint" or "context".
    pub kind: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workflow: Option<PathBuf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub checkpoint: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub transformation: Option<String>,
    /// The context folder (for a checkpoint, where it was materialized).
    pub context: PathBuf,
    /// The device the performance record was measured on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub measured_on: Option<String>,
}

impl Origin {
    /// One line for file headers.
    pub fn describe(&self) -> String {
        match (&self.checkpoint, &self.workflow) {
            (Some(id), Some(wf)) => {
                format!("checkpoint {} ({}) of workflow {}", &id[..id.len().min(10)], self.transformation.as_deref().unwrap_or("-"), wf.display())
            }
            _ => format!("context {}", self.context.display()),
        }
    }
}

pub struct Source {
    pub ctx: Context,
    pub origin: Origin,
    /// `performance.json`; empty for a context folder, and for a record that does not read
    /// (every parameter then comes from `--set`).
    pub performance: PerformanceRecord,
    /// Keeps a materialized checkpoint's folder alive as long as the source.
    _dir: Option<tempfile::TempDir>,
}

/// The configuration to export and where each value came from.
#[derive(Debug, Clone)]
pub struct Chosen {
    pub params: ExecParams,
    pub sources: Vec<(String, String)>,
    pub recorded_time_ms: Option<f64>,
}

impl Source {
    /// A context folder (holding `peak.toml`), or a checkpoint of `workflow`.
    pub fn open(what: &str, workflow: &Path) -> Result<Source> {
        let as_path = Path::new(what);
        if as_path.join("peak.toml").is_file() {
            return Source::context(as_path);
        }
        Source::checkpoint(workflow, what)
    }

    pub fn context(dir: &Path) -> Result<Source> {
        let ctx = Context::load(dir).map_err(|e| ExportError::Usage(e.to_string()))?;
        let origin = Origin { kind: "context".into(), workflow: None, checkpoint: None, transformation: None, context: dir.to_path_buf(), measured_on: None };
        Ok(Source { ctx, origin, performance: PerformanceRecord::default(), _dir: None })
    }

    pub fn checkpoint(workflow: &Path, rev: &str) -> Result<Source> {
        let wf = peak_workflow::Workflow::open(workflow).map_err(|e| {
            ExportError::Usage(format!(
                "{}: not a workflow ({e}); pass -w WORKFLOW with a checkpoint (tag, branch, id, HEAD, HEAD~N, root), or a context folder holding peak.toml",
                workflow.display()
            ))
        })?;
        let view = wf.show(rev).map_err(|e| {
            ExportError::Usage(format!(
                "unknown checkpoint `{rev}` in {} ({e}); expected a tag, branch, checkpoint id, HEAD, HEAD~N or root (see `peak log`)",
                workflow.display()
            ))
        })?;
        let tmp =
            tempfile::Builder::new().prefix("peak-export-").tempdir().map_err(|e| ExportError::Io { path: std::env::temp_dir(), message: e.to_string() })?;
        let dir = tmp.path().join("context");
        wf.materialize(rev, &dir).map_err(|e| ExportError::Io { path: dir.clone(), message: e.to_string() })?;
        let ctx = Context::load(&dir).map_err(|e| ExportError::Usage(format!("checkpoint {rev}: its context does not load: {e}")))?;
        let performance = PerformanceRecord::from_json(&view.performance).unwrap_or_default();
        let origin = Origin {
            kind: "checkpoint".into(),
            workflow: Some(workflow.to_path_buf()),
            checkpoint: Some(view.id.as_str().to_string()),
            transformation: Some(view.meta.transformation.clone()),
            context: dir,
            measured_on: performance.device.clone(),
        };
        Ok(Source { ctx, origin, performance, _dir: Some(tmp) })
    }

    /// The configuration: the performance record's best, then `set` (`NAME=VALUE`, one
    /// value each). Every input and tuning parameter of the manifest must end with a value,
    /// and the constraints must hold.
    pub fn params(&self, set: &[String]) -> Result<Chosen> {
        let manifest = &self.ctx.manifest;
        let mut overrides: IndexMap<String, i64> = IndexMap::new();
        for item in set {
            let (name, value) = item.split_once('=').ok_or_else(|| ExportError::Usage(format!("--set `{item}`: expected NAME=VALUE")))?;
            let name = name.trim();
            let value: i64 = value
                .trim()
                .parse()
                .map_err(|_| ExportError::Usage(format!("--set `{item}`: expected one integer value (export writes one configuration)")))?;
            if !manifest.inputs.contains_key(name) && !manifest.tuning.contains_key(name) {
                let known: Vec<&str> = manifest.inputs.keys().chain(manifest.tuning.keys()).map(String::as_str).collect();
                return Err(ExportError::Usage(format!("--set {name}: not an input or tuning parameter of {}; it has: {}", self.ctx.name(), known.join(", "))));
            }
            overrides.insert(name.to_string(), value);
        }

        let best = self.performance.best.as_ref();
        let mut sources = Vec::new();
        let mut params = ExecParams::default();
        // Inputs: --set, else the record's best.
        for name in manifest.inputs.keys() {
            if let Some(v) = overrides.get(name) {
                params.inputs.insert(name.clone(), *v);
                sources.push((name.clone(), "--set".to_string()));
            } else if let Some(v) = best.and_then(|b| b.params.inputs.get(name)) {
                params.inputs.insert(name.clone(), *v);
                sources.push((name.clone(), "performance record".to_string()));
            }
        }
        // Tuning: the best of the run at these inputs, else the overall best; then --set.
        let run_best = self.performance.runs().iter().filter_map(|r| r.best.as_ref()).find(|b| b.params.inputs == params.inputs);
        let record = run_best.or(best);
        let mut recorded_time_ms = record.and_then(|b| (b.params.inputs == params.inputs).then_some(b.time_ms));
        for name in manifest.tuning.keys() {
            if let Some(v) = overrides.get(name) {
                params.tuning.insert(name.clone(), *v);
                sources.push((name.clone(), "--set".to_string()));
                recorded_time_ms = None;
            } else if let Some(v) = record.and_then(|b| b.params.tuning.get(name)) {
                params.tuning.insert(name.clone(), *v);
                sources.push((name.clone(), "performance record".to_string()));
            }
        }

        let missing: Vec<&str> = manifest
            .inputs
            .keys()
            .filter(|n| !params.inputs.contains_key(*n))
            .chain(manifest.tuning.keys().filter(|n| !params.tuning.contains_key(*n)))
            .map(String::as_str)
            .collect();
        if !missing.is_empty() {
            let why = match self.origin.kind.as_str() {
                "context" => "a context folder has no performance record".to_string(),
                _ if self.performance.best.is_none() => "the checkpoint has no performance record (deferred or not measured)".to_string(),
                _ => "the performance record does not give them".to_string(),
            };
            let example: Vec<String> = missing.iter().map(|n| format!("--set {n}=VALUE")).collect();
            return Err(ExportError::Usage(format!("missing parameter(s) {}: {why}; give them with {}", missing.join(", "), example.join(" "))));
        }
        if !self.ctx.space().is_valid(&params) {
            return Err(ExportError::Usage(format!(
                "{params} does not satisfy the constraints of {} ({})",
                self.ctx.manifest_path().display(),
                manifest.constraints.inputs.iter().chain(&manifest.constraints.tuning).cloned().collect::<Vec<_>>().join(", ")
            )));
        }
        Ok(Chosen { params, sources, recorded_time_ms })
    }
}
