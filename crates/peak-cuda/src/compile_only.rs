//! Compile-only mode: every variant of a CUDA or HIP context through NVRTC, with no GPU
//! and no driver, and the resources each kernel would use (`peak compile`).
//!
//! A variant is one choice of tuning parameters: inputs never reach the device compiler,
//! so points of the space that differ only in inputs compile once. Variants compile in
//! parallel on every core. For HIP contexts each variant is also compiled for an AMD GPU
//! (gfx90a) with the system hipcc when one is installed; without it the report says why
//! that part was skipped.

use std::time::Instant;

use indexmap::IndexMap;
use peak_backend::{BackendError, CompileRequest, KernelResources};
use peak_spec::{Context, Language, SpecError};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::hip;
use crate::nvrtc::{self, Arch, Dialect};

#[derive(Debug, Error)]
pub enum CompileOnlyError {
    #[error("{0}")]
    Spec(#[from] SpecError),
    #[error("{0}")]
    Backend(#[from] BackendError),
    #[error("{file}: kernel.backend is \"{backend}\"; NVRTC compiles cuda and hip contexts only")]
    WrongBackend { file: String, backend: Language },
    #[error("{file}: no execution parameter satisfies the constraints (after --set)")]
    Empty { file: String },
}

#[derive(Debug, Clone)]
pub struct CompileOnlyOptions {
    /// NVRTC's target.
    pub arch: Arch,
    /// Also compile HIP contexts for this AMD target with hipcc, when hipcc is installed.
    pub offload_arch: Option<String>,
}

impl Default for CompileOnlyOptions {
    fn default() -> Self {
        CompileOnlyOptions { arch: Arch::default(), offload_arch: Some(hip::DEFAULT_OFFLOAD_ARCH.to_string()) }
    }
}

/// One compiler's verdict on one variant.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CompileOutcome {
    /// "ok" or "compile-failed".
    pub status: String,
    pub kernels: Vec<KernelResources>,
    /// Warnings on success; the full compiler log on failure.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub log: String,
    /// The options the compiler got.
    pub options: String,
    pub compile_ms: f64,
}

impl CompileOutcome {
    pub fn ok(&self) -> bool {
        self.status == "ok"
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct VariantReport {
    pub tuning: IndexMap<String, i64>,
    pub nvrtc: CompileOutcome,
    /// hipcc for an AMD target, for HIP contexts where hipcc is installed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hipcc: Option<CompileOutcome>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CompileReport {
    pub context: String,
    pub kernel: String,
    pub backend: Language,
    pub arch: String,
    pub nvrtc_version: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub offload_arch: Option<String>,
    /// Why hipcc did not run, for HIP contexts where it was wanted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hipcc_skipped: Option<String>,
    /// Points of the space (after --set) that the variants cover.
    pub points: usize,
    pub variants: Vec<VariantReport>,
}

impl CompileReport {
    /// Variants that some compiler refused.
    pub fn failures(&self) -> usize {
        self.variants.iter().filter(|v| !v.nvrtc.ok() || v.hipcc.as_ref().is_some_and(|h| !h.ok())).count()
    }
}

/// The distinct tuning-parameter choices among the points the overrides leave, in order,
/// and the number of points.
pub fn variants(ctx: &Context, overrides: &[String]) -> Result<(Vec<IndexMap<String, i64>>, usize), CompileOnlyError> {
    let mut space = ctx.space();
    space.apply_overrides(overrides)?;
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::new();
    let mut points = 0;
    for point in space.iter() {
        points += 1;
        let key: Vec<(String, i64)> = point.tuning.iter().map(|(k, v)| (k.clone(), *v)).collect();
        if seen.insert(key) {
            out.push(point.tuning);
        }
    }
    if out.is_empty() {
        return Err(CompileOnlyError::Empty { file: ctx.manifest_path().display().to_string() });
    }
    Ok((out, points))
}

/// Compile every variant of `ctx` (restricted by `overrides`, `NAME=V[,V...]`).
pub fn compile_context(ctx: &Context, overrides: &[String], options: &CompileOnlyOptions) -> Result<CompileReport, CompileOnlyError> {
    let dialect = match ctx.backend() {
        Language::Cuda => Dialect::Cuda,
        Language::Hip => Dialect::Hip,
        other => return Err(CompileOnlyError::WrongBackend { file: ctx.manifest_path().display().to_string(), backend: other }),
    };
    let (tunings, points) = variants(ctx, overrides)?;
    let nvrtc_version = nvrtc::version()?;
    let (offload_arch, hipcc_skipped) = match (dialect, &options.offload_arch) {
        (Dialect::Hip, Some(arch)) => match hip::hipcc_path() {
            Some(_) => (Some(arch.clone()), None),
            None => (None, Some("no hipcc on the PATH (apt-get install hipcc), so the AMD compile check did not run".to_string())),
        },
        _ => (None, None),
    };
    let source = ctx.regions.device_source();
    let file_name = ctx.source_path().display().to_string();
    let variants = tunings
        .into_par_iter()
        .map(|tuning| {
            let request = CompileRequest {
                source: source.clone(),
                defines: tuning.iter().map(|(k, v)| (k.clone(), v.to_string())).collect(),
                file_name: file_name.clone(),
            };
            let start = Instant::now();
            let result = nvrtc::compile(&request, dialect, &options.arch);
            let nvrtc = match result {
                Ok(cubin) => CompileOutcome {
                    status: "ok".into(),
                    kernels: cubin.kernels,
                    log: cubin.log,
                    options: cubin.options.join(" "),
                    compile_ms: elapsed_ms(start),
                },
                Err(err) => failed(err, start)?,
            };
            let hipcc = match &offload_arch {
                Some(arch) => {
                    let start = Instant::now();
                    Some(match hip::hipcc_check(&request, arch) {
                        Ok(r) => {
                            CompileOutcome { status: "ok".into(), kernels: r.kernels, log: r.log, options: r.command.join(" "), compile_ms: elapsed_ms(start) }
                        }
                        Err(err) => failed(err, start)?,
                    })
                }
                None => None,
            };
            Ok(VariantReport { tuning, nvrtc, hipcc })
        })
        .collect::<Result<Vec<_>, CompileOnlyError>>()?;
    Ok(CompileReport {
        context: ctx.dir.display().to_string(),
        kernel: ctx.name().to_string(),
        backend: ctx.backend(),
        arch: options.arch.to_string(),
        nvrtc_version,
        offload_arch,
        hipcc_skipped,
        points,
        variants,
    })
}

/// A compile error is the variant's result; anything else (a missing compiler) ends the run.
fn failed(err: BackendError, start: Instant) -> Result<CompileOutcome, CompileOnlyError> {
    match err {
        BackendError::Compile { log, options } => {
            Ok(CompileOutcome { status: "compile-failed".into(), kernels: Vec::new(), log, options, compile_ms: elapsed_ms(start) })
        }
        other => Err(other.into()),
    }
}

fn elapsed_ms(start: Instant) -> f64 {
    start.elapsed().as_secs_f64() * 1e3
}
