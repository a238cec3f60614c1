//! The kernel as one plain source file: a header saying where it came from, the tuning
//! configuration as `#define`s, then the context's macros and device regions as written.
//!
//! peak hands tuning parameters to the device compiler as defines (NVRTC `-DNAME=value`,
//! OpenCL build options `-D NAME=value`); here they are in the file, each behind
//! `#ifndef` so `-DNAME=value` on a build line still wins. Inputs (such as `n`) are not
//! defined: kernels take them as arguments, and a `#define n` would rename the parameter.
//! The kernel needs nothing peak adds: peak compiles CUDA as written, and HIP through a
//! prelude only when it runs HIP on an NVIDIA GPU, which hipcc does not need.

use peak_backend::DeviceInfo;
use peak_spec::{Context, ExecParams, Region};

use crate::source::Origin;

/// The exported kernel's file name: the context's own source file name.
pub fn file_name(ctx: &Context) -> String {
    std::path::Path::new(&ctx.manifest.kernel.source)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| format!("{}.{}", ctx.name(), default_extension(ctx)))
}

fn default_extension(ctx: &Context) -> &'static str {
    match ctx.backend() {
        peak_spec::Language::Opencl => "cl",
        peak_spec::Language::Cuda => "cu",
        peak_spec::Language::Hip => "hip",
        peak_spec::Language::Hlsl => "hlsl",
    }
}

/// The file's text.
pub fn render(ctx: &Context, params: &ExecParams, origin: &Origin, device: &DeviceInfo) -> String {
    let mut out = String::new();
    out.push_str(&format!("// {} ({}), exported by peak from {}.\n", ctx.name(), ctx.backend(), origin.describe()));
    if let Some(on) = &origin.measured_on {
        out.push_str(&format!("// Tuned on: {on}\n"));
    }
    out.push_str(&format!("// Launch limits evaluated for: {}\n", device.name));
    if !params.inputs.is_empty() {
        let inputs: Vec<String> = params.inputs.iter().map(|(k, v)| format!("{k}={v}")).collect();
        out.push_str(&format!("// Inputs (passed as kernel arguments by the harness): {}\n", inputs.join(" ")));
    }
    out.push_str(&defines(params));
    out.push_str("\n// ---- macros ----\n");
    out.push_str(ctx.region(Region::Macros));
    ensure_newline(&mut out);
    out.push_str("// ---- device code ----\n");
    out.push_str(ctx.region(Region::Device));
    ensure_newline(&mut out);
    out
}

/// The tuning configuration as guarded `#define`s.
pub fn defines(params: &ExecParams) -> String {
    let mut out = String::new();
    if params.tuning.is_empty() {
        return out;
    }
    out.push_str("\n// Tuning configuration (override with -DNAME=value).\n");
    for (name, value) in params.defines() {
        out.push_str(&format!("#ifndef {name}\n#define {name} {value}\n#endif\n"));
    }
    out
}

fn ensure_newline(out: &mut String) {
    if !out.ends_with('\n') {
        out.push('\n');
    }
}
