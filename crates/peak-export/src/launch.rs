//! The launch sequence: what the context's launch script does for one configuration, as
//! concrete data (kernel names, grids, blocks, shared bytes, arguments, fills, copies),
//! written out by the harnesses.
//!
//! The script is run exactly as the runner runs it ([`peak_backend::runner::size_arrays`],
//! [`peak_backend::script::build_plan`]) against the target's device limits, so the
//! exported launches are the ones peak measured; nothing is translated from Rhai.

use peak_backend::plan::{BackendOp, BufRef, LaunchPlan, OpValue, PlanArg, Step};
use peak_backend::runner::{self, RunError};
use peak_backend::script::{ScriptArray, ScriptError, ScriptInput, build_plan};
use peak_spec::rng::mix_seed;
use peak_spec::{Context, DType, ExecParams, Fill, HostArray, Region};
use serde::Serialize;

use crate::{ExportError, Result, Target};

/// The manifest's arrays (in order) then the script's scratch buffers.
#[derive(Debug, Clone, Serialize)]
pub struct ExportBuffer {
    pub name: String,
    /// A C identifier for it.
    pub ident: String,
    pub dtype: DType,
    pub count: usize,
    pub bytes: usize,
    /// "input", "output", "inout" or "scratch".
    pub role: String,
    /// How the harness fills it before the first run (None: scratch, left as allocated).
    pub fill: Option<Fill>,
    /// The SplitMix64 seed of an array whose fill draws: the manifest's seed mixed with the
    /// name, as peak does with data seed 0, so the harness's inputs are peak's.
    pub seed: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ExportArg {
    /// Index into [`LaunchSequence::buffers`].
    Buffer {
        buffer: usize,
    },
    I32 {
        value: i32,
    },
    U32 {
        value: u32,
    },
    I64 {
        value: i64,
    },
    F32 {
        value: f32,
    },
    /// CUDA: a Hopper tensor map passed by value; index into [`LaunchSequence::tensor_maps`].
    TensorMap {
        map: usize,
    },
}

/// `cuda_tensor_map(buffer, dtype, dims, strides, box, swizzle)`, as the harness encodes it
/// with `cuTensorMapEncodeTiled` (interleave none, L2 promotion 256 B, no OOB fill, element
/// strides 1, as peak's CUDA backend does).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ExportTensorMap {
    pub buffer: usize,
    pub dtype: DType,
    /// Innermost first.
    pub dims: Vec<u64>,
    /// Bytes, for dimensions 1.. .
    pub strides: Vec<u64>,
    pub box_dims: Vec<u32>,
    /// "none", "32b", "64b" or "128b".
    pub swizzle: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ExportStep {
    Launch {
        kernel: String,
        grid: [u32; 3],
        block: [u32; 3],
        shared_bytes: u32,
        args: Vec<ExportArg>,
    },
    /// Fill a buffer with one element's bytes, repeated.
    Fill {
        buffer: usize,
        value: f64,
        pattern: Vec<u8>,
    },
    Copy {
        src: usize,
        dst: usize,
        bytes: usize,
    },
}

/// Once, before any run.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ExportSetup {
    /// CUDA: let `kernel` use up to `bytes` of dynamic shared memory.
    MaxDynamicShared { kernel: String, bytes: u32 },
}

#[derive(Debug, Clone, Serialize)]
pub struct LaunchSequence {
    pub buffers: Vec<ExportBuffer>,
    pub setup: Vec<ExportSetup>,
    /// One run, in order.
    pub steps: Vec<ExportStep>,
    /// The tensor maps the launches pass, each encoded once before the first run.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tensor_maps: Vec<ExportTensorMap>,
    /// What the launch script printed.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub printed: Vec<String>,
}

impl LaunchSequence {
    pub fn launches(&self) -> impl Iterator<Item = (&str, &[u32; 3], &[u32; 3], u32, &[ExportArg])> {
        self.steps.iter().filter_map(|s| match s {
            ExportStep::Launch { kernel, grid, block, shared_bytes, args } => Some((kernel.as_str(), grid, block, *shared_bytes, args.as_slice())),
            _ => None,
        })
    }
}

/// Run the launch script for `params` and turn its plan into a sequence.
pub fn sequence(ctx: &Context, params: &ExecParams, target: &Target) -> Result<LaunchSequence> {
    let fail = |message: String| ExportError::Script { params: params.to_string(), message };
    let arrays = runner::size_arrays(ctx, params).map_err(|e| match e {
        RunError::Invalid(m) => fail(format!("invalid configuration: {m}")),
        other => fail(other.to_string()),
    })?;
    let script_arrays: Vec<ScriptArray> = arrays.iter().map(|a| ScriptArray { name: a.spec.name.clone(), dtype: a.spec.dtype, count: a.count }).collect();
    let file = ctx.source_path().display().to_string();
    let plan = build_plan(&ScriptInput {
        file: &file,
        source: ctx.region(Region::Host),
        first_line: ctx.regions.first_line(Region::Host),
        params,
        arrays: &script_arrays,
        scalars: &ctx.manifest.scalars.iter().map(|(n, v)| (n.clone(), *v)).collect::<Vec<_>>(),
        device: &target.device,
        extensions: &target.functions,
    })
    .map_err(|e| match e {
        ScriptError::Invalid { reason } => fail(format!("the script calls this configuration invalid on {}: {reason}", target.device.name)),
        other => fail(other.to_string()),
    })?;

    let mut buffers: Vec<ExportBuffer> = arrays
        .iter()
        .map(|a| {
            let spec = &a.spec;
            let role = if spec.output && spec.inout {
                "inout"
            } else if spec.output {
                "output"
            } else if spec.inout {
                "inout"
            } else {
                "input"
            };
            ExportBuffer {
                name: spec.name.clone(),
                ident: ident(&spec.name),
                dtype: spec.dtype,
                count: a.count,
                bytes: a.count * spec.dtype.size_bytes(),
                role: role.into(),
                fill: Some(a.fill),
                seed: a.fill.is_seeded().then(|| mix_seed(spec.seed.unwrap_or(1), &spec.name, 0)),
            }
        })
        .collect();
    for (i, s) in plan.scratch.iter().enumerate() {
        buffers.push(ExportBuffer {
            name: format!("scratch{i}"),
            ident: format!("scratch{i}"),
            dtype: s.dtype,
            count: s.count,
            bytes: s.count * s.dtype.size_bytes(),
            role: "scratch".into(),
            fill: None,
            seed: None,
        });
    }
    convert(&plan, buffers, arrays.len())
}

fn convert(plan: &LaunchPlan, buffers: Vec<ExportBuffer>, n_arrays: usize) -> Result<LaunchSequence> {
    let index = |r: &BufRef| match r {
        BufRef::Array(i) => *i,
        BufRef::Scratch(i) => n_arrays + i,
    };
    let mut setup = Vec::new();
    for op in &plan.setup {
        setup.push(setup_op(op)?);
    }
    let mut steps = Vec::new();
    let mut tensor_maps: Vec<ExportTensorMap> = Vec::new();
    for step in &plan.steps {
        steps.push(match step {
            Step::Launch { kernel, grid, block, shared_bytes, args, .. } => {
                let args = args
                    .iter()
                    .map(|a| {
                        Ok(match a {
                            PlanArg::Buffer(r) => ExportArg::Buffer { buffer: index(r) },
                            PlanArg::I32(v) => ExportArg::I32 { value: *v },
                            PlanArg::U32(v) => ExportArg::U32 { value: *v },
                            PlanArg::I64(v) => ExportArg::I64 { value: *v },
                            PlanArg::F32(v) => ExportArg::F32 { value: *v },
                            PlanArg::Op(op) if op.name == "cuda_tensor_map" => {
                                let map = tensor_map(op, &index)?;
                                let i = match tensor_maps.iter().position(|m| *m == map) {
                                    Some(i) => i,
                                    None => {
                                        tensor_maps.push(map);
                                        tensor_maps.len() - 1
                                    }
                                };
                                ExportArg::TensorMap { map: i }
                            }
                            PlanArg::Op(op) => return Err(unsupported_op(op)),
                        })
                    })
                    .collect::<Result<Vec<_>>>()?;
                ExportStep::Launch { kernel: kernel.clone(), grid: *grid, block: *block, shared_bytes: *shared_bytes, args }
            }
            Step::Fill { buffer, value, .. } => {
                let i = index(buffer);
                ExportStep::Fill { buffer: i, value: *value, pattern: HostArray::filled(buffers[i].dtype, 1, *value).bytes }
            }
            Step::Copy { src, dst, .. } => {
                let (s, d) = (index(src), index(dst));
                ExportStep::Copy { src: s, dst: d, bytes: buffers[s].bytes }
            }
            Step::Op(op) => return Err(unsupported_op(op)),
        });
    }
    Ok(LaunchSequence { buffers, setup, steps, tensor_maps, printed: plan.printed.clone() })
}

fn setup_op(op: &BackendOp) -> Result<ExportSetup> {
    match (op.name.as_str(), op.args.as_slice()) {
        ("cuda_max_dynamic_shared", [OpValue::Str(kernel), OpValue::Int(bytes)]) => {
            let bytes = u32::try_from(*bytes)
                .map_err(|_| ExportError::Unsupported(format!("line {}: cuda_max_dynamic_shared: {bytes} bytes is out of range", op.line)))?;
            Ok(ExportSetup::MaxDynamicShared { kernel: kernel.clone(), bytes })
        }
        _ => Err(unsupported_op(op)),
    }
}

/// Read a `cuda_tensor_map` call's arguments (peak's CUDA backend checked them when it ran).
fn tensor_map(op: &BackendOp, index: &dyn Fn(&BufRef) -> usize) -> Result<ExportTensorMap> {
    let bad = |m: &str| ExportError::Unsupported(format!("line {}: cuda_tensor_map: {m}", op.line));
    let ints = |v: &OpValue, what: &str| -> Result<Vec<i64>> {
        match v {
            OpValue::List(items) => {
                items.iter().map(|i| if let OpValue::Int(x) = i { Ok(*x) } else { Err(bad(&format!("`{what}` must hold integers"))) }).collect()
            }
            _ => Err(bad(&format!("`{what}` must be a list of integers"))),
        }
    };
    let [OpValue::Buffer(buffer), OpValue::Str(dtype), dims, strides, box_dims, OpValue::Str(swizzle)] = op.args.as_slice() else {
        return Err(bad("expected (buffer, dtype, dims, strides, box, swizzle)"));
    };
    let dtype: DType = dtype.parse().map_err(|e: String| bad(&e))?;
    let dims = ints(dims, "dims")?;
    let strides = ints(strides, "strides")?;
    let box_dims = ints(box_dims, "box")?;
    if dims.is_empty() || dims.len() > 5 || strides.len() + 1 != dims.len() || box_dims.len() != dims.len() {
        return Err(bad("dims, strides and box do not agree in rank"));
    }
    if dims.iter().chain(&strides).chain(&box_dims).any(|&v| v < 1) {
        return Err(bad("sizes must be positive"));
    }
    Ok(ExportTensorMap {
        buffer: index(buffer),
        dtype,
        dims: dims.iter().map(|&d| d as u64).collect(),
        strides: strides.iter().map(|&d| d as u64).collect(),
        box_dims: box_dims.iter().map(|&d| d.min(i64::from(u32::MAX)) as u32).collect(),
        swizzle: swizzle.to_ascii_lowercase(),
    })
}

fn unsupported_op(op: &BackendOp) -> ExportError {
    ExportError::Unsupported(format!(
        "line {}: the launch script calls {}(), which peak export cannot write into a harness yet (supported: launch, alloc, fill, copy, cuda_max_dynamic_shared, cuda_tensor_map)",
        op.line, op.name
    ))
}

/// A C identifier for an array name.
pub fn ident(name: &str) -> String {
    let mut out: String = name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' { c } else { '_' }).collect();
    if out.is_empty() || out.starts_with(|c: char| c.is_ascii_digit()) {
        out.insert(0, '_');
    }
    out
}
