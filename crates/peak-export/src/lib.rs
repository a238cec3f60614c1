//! `peak export`: a result leaves peak.
//!
//! A checkpoint (or a context folder) becomes a folder that builds and runs without peak:
//!
//! - the kernel as one plain source file, its best tuning configuration baked in as
//!   `#define`s, each guarded by `#ifndef` so a build line can still override it
//!   ([`kernel`]);
//! - the launch sequence the context's launch script produces for that configuration
//!   (kernels, grids, blocks, shared bytes, arguments, fills, copies, scratch buffers),
//!   evaluated here rather than translated from Rhai ([`launch`]);
//! - a stand-alone harness in the backend's host language that allocates the arrays at the
//!   exported sizes, fills the inputs with the same values peak uses (SplitMix64, the
//!   manifest's seeds), runs the sequence once for the outputs, warms up, times repetitions
//!   with device events and prints the median ([`harness`]): `harness.cu` for nvcc,
//!   `harness.hip` for hipcc, `harness.c` for a C compiler and `-lOpenCL`;
//! - `README.txt`, `build.sh` and a `Makefile`.
//!
//! Which configuration: the checkpoint's performance record (the best of the tuning run
//! whose inputs match, else the overall best), overridden by `--set NAME=VALUE`
//! ([`source`]). HLSL is refused for now.
//!
//! With `dispatch`, every shape the record tuned, each at its own best configuration: one
//! kernel file, `dispatch.h` mapping a shape to a configuration ([`dispatch`]), and a
//! harness that runs every tuned shape through it: OpenCL (a program per configuration,
//! `harness::dispatch_opencl`), CUDA and HIP (the kernel file included once per
//! configuration in a namespace of its own, `kernels.cuh`: `harness::dispatch_cuda`).

mod cexpr;
pub mod dispatch;
pub mod harness;
pub mod kernel;
pub mod launch;
pub mod source;

use std::path::{Path, PathBuf};

use peak_backend::{DeviceInfo, ScriptFunction};
use peak_spec::Language;
use serde::Serialize;
use thiserror::Error;

pub use launch::{ExportArg, ExportBuffer, ExportStep, LaunchSequence};
pub use source::{Origin, Source};

#[derive(Debug, Error)]
pub enum ExportError {
    /// Bad input from the user: an unknown checkpoint, a missing parameter, a folder in the way.
    #[error("{0}")]
    Usage(String),
    /// The launch script could not produce a launch sequence for the chosen parameters.
    #[error("the launch script does not run for {params}: {message}")]
    Script { params: String, message: String },
    #[error("{0}")]
    Unsupported(String),
    #[error("{path}: {message}")]
    Io { path: PathBuf, message: String },
}

impl ExportError {
    /// Whether the error is the user's input rather than a failure (exit code 2 in the CLI).
    pub fn is_usage(&self) -> bool {
        matches!(self, ExportError::Usage(_))
    }
}

pub type Result<T> = std::result::Result<T, ExportError>;

/// The device the launch script is evaluated against: its limits (`MAX_SHARED_BYTES` ...)
/// and the backend's own script functions (`cuda_max_dynamic_shared` ...).
#[derive(Debug, Clone)]
pub struct Target {
    pub device: DeviceInfo,
    pub functions: Vec<ScriptFunction>,
}

#[derive(Debug, Clone)]
pub struct ExportOptions {
    pub to: PathBuf,
    /// `NAME=VALUE` settings of inputs and tuning parameters, over the performance record.
    pub set: Vec<String>,
    /// Write into a folder that is not empty.
    pub force: bool,
    /// Every tuned shape with a dispatch table, rather than one configuration.
    pub dispatch: bool,
}

/// What was written, for `--json` and the CLI's summary.
#[derive(Debug, Clone, Serialize)]
pub struct ExportReport {
    pub dir: PathBuf,
    pub origin: Origin,
    pub kernel: String,
    pub backend: Language,
    pub params: peak_spec::ExecParams,
    /// Where each value came from: "performance record", "--set".
    pub param_sources: Vec<(String, String)>,
    /// The time peak recorded for this configuration, if the record holds it.
    pub recorded_time_ms: Option<f64>,
    /// The device whose limits the launch script saw.
    pub device: String,
    pub files: Vec<String>,
    pub build: String,
    pub run: String,
    /// The launch sequence of the exported configuration (with `dispatch`, the first tuned
    /// shape's).
    pub sequence: LaunchSequence,
    /// With `dispatch`: the table (configurations, tuned shapes, fallback).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dispatch: Option<dispatch::Table>,
}

/// Export `source` at the configuration `options.set` leaves, into `options.to`.
pub fn export(source: &Source, target: &Target, options: &ExportOptions) -> Result<ExportReport> {
    let language = source.ctx.backend();
    if language == Language::Hlsl {
        return Err(ExportError::Unsupported(
            "peak export does not support HLSL contexts yet (a Vulkan host harness is not written); opencl, cuda and hip are supported".into(),
        ));
    }
    if options.dispatch {
        return export_dispatch(source, target, options);
    }
    let chosen = source.params(&options.set)?;
    prepare_dir(&options.to, options.force)?;
    let sequence = launch::sequence(&source.ctx, &chosen.params, target)?;
    let kernel_file = kernel::file_name(&source.ctx);
    let kernel_text = kernel::render(&source.ctx, &chosen.params, &source.origin, &target.device);
    let bundle = harness::render(&harness::Input {
        ctx: &source.ctx,
        params: &chosen.params,
        sequence: &sequence,
        kernel_file: &kernel_file,
        origin: &source.origin,
        recorded_time_ms: chosen.recorded_time_ms,
        arch: Some(target.device.arch.as_str()).filter(|a| !a.is_empty()),
    })?;
    let mut files = vec![(kernel_file.clone(), kernel_text)];
    files.extend(bundle.files);
    let names = write_files(&options.to, &files)?;
    Ok(ExportReport {
        dir: options.to.clone(),
        origin: source.origin.clone(),
        kernel: source.ctx.name().to_string(),
        backend: language,
        params: chosen.params,
        param_sources: chosen.sources,
        recorded_time_ms: chosen.recorded_time_ms,
        device: target.device.name.clone(),
        files: names,
        build: bundle.build,
        run: bundle.run,
        sequence,
        dispatch: None,
    })
}

/// Every tuned shape of the record, with `dispatch.h` choosing the configuration by shape.
fn export_dispatch(source: &Source, target: &Target, options: &ExportOptions) -> Result<ExportReport> {
    if !options.set.is_empty() {
        return Err(ExportError::Usage(
            "--dispatch exports every tuned shape at its own best configuration; --set fixes one configuration (drop one of them)".into(),
        ));
    }
    let language = source.ctx.backend();
    let table = dispatch::Table::from_source(source)?;
    let mut sequences = Vec::new();
    for shape in &table.shapes {
        sequences.push(launch::sequence(&source.ctx, &shape.params, target)?);
    }
    if language == Language::Hip && sequences.iter().any(|s| !s.tensor_maps.is_empty()) {
        return Err(ExportError::Unsupported("the launch script passes CUDA tensor maps, which a HIP harness cannot build".into()));
    }
    prepare_dir(&options.to, options.force)?;
    let fallback = table.shapes.iter().find(|s| s.config == table.fallback).expect("the fallback configuration is a tuned shape's");
    let kernel_file = kernel::file_name(&source.ctx);
    let kernel_text = kernel::render(&source.ctx, &fallback.params, &source.origin, &target.device);
    let input = harness::DispatchInput {
        ctx: &source.ctx,
        table: &table,
        sequences: &sequences,
        kernel_file: &kernel_file,
        origin: &source.origin,
        arch: Some(target.device.arch.as_str()).filter(|a| !a.is_empty()),
    };
    let mut files = vec![(kernel_file.clone(), kernel_text), ("dispatch.h".to_string(), dispatch::header(&table))];
    let bundle = match language {
        Language::Opencl => harness::dispatch_opencl::render(&input),
        Language::Cuda | Language::Hip => {
            let api = if language == Language::Cuda { harness::cuda::Api::Cuda } else { harness::cuda::Api::Hip };
            let mut launched: Vec<String> = Vec::new();
            for (name, ..) in sequences.iter().flat_map(|s| s.launches()) {
                if !launched.iter().any(|l| l == name) {
                    launched.push(name.to_string());
                }
            }
            let code = harness::dispatch_cuda::kernel_code(&source.ctx);
            files.push((harness::dispatch_cuda::INSTANCES_FILE.to_string(), harness::dispatch_cuda::instances(&table, &kernel_file, &code, &launched)));
            harness::dispatch_cuda::render(&input, api)
        }
        Language::Hlsl => unreachable!("refused above"),
    };
    files.extend(bundle.files);
    let names = write_files(&options.to, &files)?;
    let first = &table.shapes[0];
    Ok(ExportReport {
        dir: options.to.clone(),
        origin: source.origin.clone(),
        kernel: source.ctx.name().to_string(),
        backend: language,
        params: first.params.clone(),
        param_sources: Vec::new(),
        recorded_time_ms: first.time_ms,
        device: target.device.name.clone(),
        files: names,
        build: bundle.build,
        run: bundle.run,
        sequence: sequences.swap_remove(0),
        dispatch: Some(table),
    })
}

/// Write `files` into `dir` (build.sh executable); their names.
fn write_files(dir: &Path, files: &[(String, String)]) -> Result<Vec<String>> {
    let mut names = Vec::new();
    for (name, text) in files {
        let path = dir.join(name);
        std::fs::write(&path, text).map_err(|e| io(&path, e))?;
        names.push(name.clone());
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let script = dir.join("build.sh");
        if script.exists() {
            let _ = std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755));
        }
    }
    Ok(names)
}

/// A missing or empty folder is used as is; a non-empty one only with `force`.
fn prepare_dir(dir: &Path, force: bool) -> Result<()> {
    if dir.exists() {
        if !dir.is_dir() {
            return Err(ExportError::Usage(format!("--to {}: exists and is not a folder", dir.display())));
        }
        let mut entries = std::fs::read_dir(dir).map_err(|e| io(dir, e))?;
        if entries.next().is_some() && !force {
            return Err(ExportError::Usage(format!(
                "--to {}: the folder exists and is not empty; choose a new folder, or pass --force to write into it",
                dir.display()
            )));
        }
    }
    std::fs::create_dir_all(dir).map_err(|e| io(dir, e))
}

fn io(path: &Path, e: std::io::Error) -> ExportError {
    ExportError::Io { path: path.to_path_buf(), message: e.to_string() }
}
