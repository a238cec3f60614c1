//! Stand-alone harnesses: the launch sequence written out in the backend's host language.
//!
//! Every harness does what peak's runner does for one execution parameter: allocate the
//! arrays at the exported sizes, fill the inputs with peak's values (the C code in
//! `common.c` is SplitMix64 and peak's element conversions), run the sequence once and
//! check it, optionally write the outputs (`--dump DIR`), warm up, time `--reps` runs with
//! device events (CUDA/HIP events; OpenCL profiling markers) and print `median_ms: X`.
//! Outputs start from their manifest init rather than peak's poison.

pub mod cuda;
pub mod dispatch_cuda;
pub mod dispatch_opencl;
pub mod opencl;

use peak_spec::{Context, DType, ExecParams, Fill, Language, RowOutliers, Values};

use crate::launch::{ExportArg, ExportBuffer, LaunchSequence};
use crate::source::Origin;
use crate::{ExportError, Result};

/// The C helpers every harness starts with.
pub const COMMON_C: &str = include_str!("common.c");

pub struct Input<'a> {
    pub ctx: &'a Context,
    pub params: &'a ExecParams,
    pub sequence: &'a LaunchSequence,
    pub kernel_file: &'a str,
    pub origin: &'a Origin,
    pub recorded_time_ms: Option<f64>,
    /// The architecture the launch script's limits were evaluated for ("sm_90a"), where the
    /// backend compiles for one: CUDA builds for it.
    pub arch: Option<&'a str>,
}

/// What a dispatch harness is made from (`peak export --dispatch`).
pub struct DispatchInput<'a> {
    pub ctx: &'a Context,
    pub table: &'a crate::dispatch::Table,
    /// One per tuned shape, in the table's order.
    pub sequences: &'a [LaunchSequence],
    pub kernel_file: &'a str,
    pub origin: &'a Origin,
    /// The architecture the launch limits were evaluated for (CUDA builds for it).
    pub arch: Option<&'a str>,
}

/// The label of tuned shape `i` in output names: `n=256` (inputs joined with `,`).
pub fn shape_label(table: &crate::dispatch::Table, i: usize) -> String {
    table.shapes[i].params.inputs.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(",")
}

/// The opening of tuned shape `i`'s block in a dispatch harness's `main`: the shape's
/// inputs, the configuration `peak_dispatch` picks for them, and an exit where that is not
/// the configuration the record tuned (`launches` is the shape's launches per run).
pub fn dispatch_shape_opening(table: &crate::dispatch::Table, i: usize, launches: usize) -> String {
    let shape = &table.shapes[i];
    let label = shape_label(table, i);
    let values: Vec<String> = table.inputs.iter().map(|n| format!("{}LL", shape.params.inputs[n])).collect();
    let values = if values.is_empty() { "0".to_string() } else { values.join(", ") };
    let mut c = format!("\n    {{ /* Tuned shape {i}: {label} */\n");
    c.push_str(&format!("    const long long inputs[PEAK_N_INPUTS] = {{ {values} }};\n    int config = peak_dispatch(inputs);\n"));
    c.push_str(&format!(
        "    printf(\"shape {label}: configuration %d (%s), {launches} launch(es) per run\\n\", config, config >= 0 ? PEAK_CONFIG_NAMES[config] : \"none\");\n"
    ));
    c.push_str(&format!(
        "    if (config != {0}) {{ fprintf(stderr, \"error: peak_dispatch gives configuration %d for {label}, the record tuned configuration {0}\\n\", config); exit(1); }}\n",
        shape.config
    ));
    c
}

/// README lines of a dispatch export: every configuration of the table, then every tuned
/// shape with its best configuration and the time peak measured.
pub fn dispatch_table_readme(table: &crate::dispatch::Table) -> String {
    let mut out = String::new();
    for c in 0..table.configs.len() {
        out.push_str(&format!(
            "  {c}  {}{}\n",
            table.describe(c),
            if c == table.fallback { "  (the record's overall best; the kernel file's defaults)" } else { "" }
        ));
    }
    out.push_str("\nTuned shapes and their best configuration\n");
    for (i, s) in table.shapes.iter().enumerate() {
        let time = s.time_ms.map(|t| format!("  peak measured {t:.6} ms")).unwrap_or_default();
        out.push_str(&format!("  {}  -> configuration {}{time}\n", shape_label(table, i), s.config));
    }
    out
}

/// The files a harness needs besides the kernel, and how to build and run it.
pub struct Bundle {
    pub files: Vec<(String, String)>,
    pub build: String,
    pub run: String,
}

pub fn render(input: &Input) -> Result<Bundle> {
    match input.ctx.backend() {
        Language::Opencl => Ok(opencl::render(input)),
        Language::Cuda => Ok(cuda::render(input, cuda::Api::Cuda)),
        Language::Hip if !input.sequence.tensor_maps.is_empty() => {
            Err(ExportError::Unsupported("the launch script passes CUDA tensor maps, which a HIP harness cannot build".into()))
        }
        Language::Hip => Ok(cuda::render(input, cuda::Api::Hip)),
        Language::Hlsl => Err(ExportError::Unsupported("peak export does not support HLSL contexts yet".into())),
    }
}

pub(crate) fn dtype_code(d: DType) -> &'static str {
    match d {
        DType::F32 => "PEAK_F32",
        DType::F16 => "PEAK_F16",
        DType::Bf16 => "PEAK_BF16",
        DType::I32 => "PEAK_I32",
        DType::U32 => "PEAK_U32",
        DType::E4m3 => "PEAK_E4M3",
        DType::E5m2 => "PEAK_E5M2",
    }
}

pub(crate) fn init_code(values: Values) -> &'static str {
    match values {
        Values::Zeros => "PEAK_ZEROS",
        Values::Ones => "PEAK_ONES",
        Values::Random => "PEAK_RANDOM",
        Values::Arange => "PEAK_ARANGE",
        Values::Uniform { .. } => "PEAK_UNIFORM",
        Values::Normal { .. } => "PEAK_NORMAL",
        Values::Integers { .. } => "PEAK_INTEGERS",
    }
}

/// The C expression that allocates `count` elements and fills them as `fill` says from
/// `seed`: the bytes `HostArray::init` makes of the same arguments. A plain init keeps
/// the short call that harnesses exported before the other inits used.
pub fn host_array_call(dtype: DType, count: usize, fill: &Fill, seed: u64) -> String {
    let (dt, init) = (dtype_code(dtype), init_code(fill.values));
    if fill.is_plain() {
        return format!("peak_host_array({dt}, {count}ull, {init}, {seed}ull)");
    }
    let (scale, offset) = match fill.values {
        Values::Uniform { scale, offset } | Values::Normal { scale, offset } => (scale, offset),
        _ => (1.0, 0.0),
    };
    let (lo, hi) = match fill.values {
        Values::Integers { lo, hi } => (lo, hi),
        _ => (0, 0),
    };
    let o = fill.outliers.unwrap_or(RowOutliers { row: 0, count: 0, scale: 1.0 });
    format!(
        "peak_host_array_fill({dt}, {count}ull, {init}, {seed}ull, {}, {}, {lo}ll, {hi}ll, {}ull, {}ull, {})",
        double_literal(scale),
        double_literal(offset),
        o.row,
        o.count,
        double_literal(o.scale)
    )
}

/// A C literal for a double that parses back to the same bits (Rust's shortest
/// round-trip form, e.g. `20.0`, `1e-7`).
fn double_literal(v: f64) -> String {
    if v.is_finite() { format!("{v:?}") } else { float_literal(v as f32) }
}

/// A C literal for a float.
pub(crate) fn float_literal(v: f32) -> String {
    if v.is_nan() {
        "(0.0f/0.0f)".into()
    } else if v.is_infinite() {
        if v > 0.0 { "(1.0f/0.0f)".into() } else { "(-1.0f/0.0f)".into() }
    } else {
        format!("{v:?}f")
    }
}

/// The comment block at the top of a harness.
pub(crate) fn header(input: &Input, build: &str) -> String {
    let mut out = String::new();
    out.push_str(&format!("/* Stand-alone harness for {} ({}), exported by peak from {}.\n", input.ctx.name(), input.ctx.backend(), input.origin.describe()));
    out.push_str(&format!(" * Configuration: {}\n", input.params));
    if let Some(ms) = input.recorded_time_ms {
        out.push_str(&format!(" * peak measured {ms:.6} ms for it{}.\n", input.origin.measured_on.as_ref().map(|d| format!(" on {d}")).unwrap_or_default()));
    }
    out.push_str(&format!(" * Build: {build}\n * Run:   ./harness [--warmup N] [--reps N] [--dump DIR]\n */\n"));
    out
}

/// Host arrays: allocated and initialised as the manifest says.
pub(crate) fn host_arrays(buffers: &[ExportBuffer]) -> String {
    let mut out = String::new();
    for b in buffers {
        if let Some(fill) = &b.fill {
            out.push_str(&format!(
                "    void *peak_host_{} = {}; /* {} {}: {} x {}, {fill} */\n",
                b.ident,
                host_array_call(b.dtype, b.count, fill, b.seed.unwrap_or(0)),
                b.role,
                b.name,
                b.count,
                b.dtype,
            ));
        }
    }
    out
}

/// After the first run: print each output's summary and dump it if asked.
pub(crate) fn summaries(buffers: &[ExportBuffer]) -> String {
    summaries_as(buffers, "")
}

/// [`summaries`], each output named `NAME{suffix}` (in the summary and the dump's file name).
pub(crate) fn summaries_as(buffers: &[ExportBuffer], suffix: &str) -> String {
    let mut out = String::new();
    for b in buffers.iter().filter(|b| b.role == "output" || b.role == "inout") {
        out.push_str(&format!(
            "    peak_summary(\"{name}\", peak_host_{id}, {dt}, {count}ull);\n    if (opt.dump) peak_dump(opt.dump, \"{name}\", peak_host_{id}, {bytes}ull);\n",
            name = format!("{}{suffix}", b.name),
            id = b.ident,
            dt = dtype_code(b.dtype),
            count = b.count,
            bytes = b.bytes
        ));
    }
    out
}

pub(crate) fn launch_count(sequence: &LaunchSequence) -> usize {
    sequence.launches().count()
}

/// Argument list of a launch in a C-like language; `buffer` names a buffer by index.
pub(crate) fn scalar_literal(a: &ExportArg) -> Option<String> {
    Some(match a {
        ExportArg::Buffer { .. } | ExportArg::TensorMap { .. } => return None,
        ExportArg::I32 { value } => format!("{value}"),
        ExportArg::U32 { value } => format!("{value}u"),
        ExportArg::I64 { value } => format!("{value}ll"),
        ExportArg::F32 { value } => float_literal(*value),
    })
}

/// README.txt: what the folder holds and how to build and run it.
pub(crate) fn readme(input: &Input, harness_file: &str, build: &str, run: &str, notes: &str) -> String {
    let s = input.sequence;
    let mut out = String::new();
    out.push_str(&format!("{} ({}), exported by peak\n\n", input.ctx.name(), input.ctx.backend()));
    out.push_str(&format!("From:           {}\n", input.origin.describe()));
    out.push_str(&format!("Configuration:  {}\n", input.params));
    if let Some(ms) = input.recorded_time_ms {
        out.push_str(&format!("peak measured:  {ms:.6} ms (median){}\n", input.origin.measured_on.as_ref().map(|d| format!(" on {d}")).unwrap_or_default()));
    }
    out.push_str(&format!(
        "\nFiles\n  {}  the kernel, the tuning configuration baked in as #defines (override with -DNAME=value)\n  {harness_file}  the harness: allocates, fills, launches, times\n  build.sh, Makefile  the build line below\n  README.txt  this file\n",
        input.kernel_file
    ));
    out.push_str(&format!("\nBuild\n  {build}\n  (or: sh build.sh, or: make)\n\nRun\n  {run}\n"));
    out.push_str("  --warmup N   untimed runs first (3)\n  --reps N     timed runs; the median is printed (20)\n  --dump DIR   write each output after the first run to DIR/NAME.bin (raw little-endian)\n");
    out.push_str("\n  It prints one line per output (elements, sum, NaN count) and `median_ms: X`,\n  and exits non-zero on any launch or API error.\n");
    out.push_str("\nInputs are filled with the same values peak uses (SplitMix64 from the manifest's seeds), so\nthe outputs are comparable with `peak run`'s digests (sha256 of the dumped bytes, first 8 bytes).\n");
    out.push_str("\nLaunch sequence (one run)\n");
    for b in &s.buffers {
        out.push_str(&format!("  buffer {:<10} {:>4} x {:<10} {:>12} bytes  {}\n", b.name, b.dtype, b.count, b.bytes, b.role));
    }
    for op in &s.setup {
        let crate::launch::ExportSetup::MaxDynamicShared { kernel, bytes } = op;
        out.push_str(&format!("  setup  {kernel}: up to {bytes} bytes of dynamic shared memory\n"));
    }
    for (i, m) in s.tensor_maps.iter().enumerate() {
        out.push_str(&format!(
            "  setup  tensor_map{i}: cuTensorMapEncodeTiled over {} ({}), dims {:?}, strides {:?} bytes, box {:?}, swizzle {}\n",
            s.buffers[m.buffer].name, m.dtype, m.dims, m.strides, m.box_dims, m.swizzle
        ));
    }
    for step in &s.steps {
        out.push_str(&format!("  {}\n", describe_step(step, &s.buffers)));
    }
    if !notes.is_empty() {
        out.push_str(&format!("\nNotes\n{notes}"));
    }
    out
}

pub(crate) fn describe_step(step: &crate::launch::ExportStep, buffers: &[ExportBuffer]) -> String {
    use crate::launch::ExportStep;
    match step {
        ExportStep::Launch { kernel, grid, block, shared_bytes, args } => {
            let args: Vec<String> = args
                .iter()
                .map(|a| match a {
                    ExportArg::Buffer { buffer } => buffers[*buffer].name.clone(),
                    ExportArg::TensorMap { map } => format!("tensor_map{map}"),
                    other => scalar_literal(other).unwrap_or_default(),
                })
                .collect();
            format!(
                "launch {kernel} grid [{}, {}, {}] block [{}, {}, {}] shared {shared_bytes} bytes, args ({})",
                grid[0],
                grid[1],
                grid[2],
                block[0],
                block[1],
                block[2],
                args.join(", ")
            )
        }
        ExportStep::Fill { buffer, value, .. } => format!("fill   {} with {value}", buffers[*buffer].name),
        ExportStep::Copy { src, dst, bytes } => format!("copy   {} -> {} ({bytes} bytes)", buffers[*src].name, buffers[*dst].name),
    }
}

pub(crate) fn build_files(build: &str, sources: &[&str]) -> Vec<(String, String)> {
    vec![
        ("build.sh".to_string(), format!("#!/bin/sh\n# Build the exported harness.\nset -e\ncd \"$(dirname \"$0\")\"\n{build}\n")),
        ("Makefile".to_string(), format!("harness: {}\n\t{build}\n\nclean:\n\trm -f harness\n\n.PHONY: clean\n", sources.join(" "))),
    ]
}
