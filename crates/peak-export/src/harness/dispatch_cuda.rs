//! The CUDA and HIP harness of a dispatch export (`peak export --dispatch`): every tuned
//! shape of the record, each at the configuration `peak_dispatch` (dispatch.h) picks.
//!
//! Tuning parameters are compile-time constants, so each configuration is its own copy of
//! the kernel. `kernels.cuh` includes the one kernel file once per configuration, each time
//! inside a namespace of its own (`peak_config_C`) with that configuration's `#define`s
//! set before and every macro the file defines undefined after. Two things a namespace
//! does not separate are handled around it:
//!
//! - `extern "C"` functions (peak's kernels are, for NVRTC's lookup by name) have one
//!   name whatever the namespace: the launched kernels and every `extern "C"` function are
//!   renamed per configuration (`#define gemm gemm_peak_c0` around the include);
//! - system headers must not open inside a namespace: every `#include` of the file is
//!   issued once first, at global scope, so the copies inside the namespaces are empty.
//!
//! `harness.cu` (`harness.hip`) includes `kernels.cuh`, so every launch is a checked
//! `<<<grid, block, shared>>>` call against the kernel's signature, as in the one-shape
//! harness ([`super::cuda`]). For each tuned shape it asks `peak_dispatch` for the
//! configuration, checks it is the one the record tuned for that shape, runs the shape's
//! launch sequence (evaluated at export time from the launch script) with that
//! configuration's kernels, summarises and dumps the outputs as `NAME.SHAPE.bin`, times it,
//! and frees its buffers. CUDA launches the code peak timed, as the one-shape harness does:
//! each shape's kernels are NVRTC's build of the kernel file with that configuration's
//! `-D`s, made at run time as peak makes it, and `kernels.cuh` gives their signatures
//! (`--nvcc` launches its copies instead).

use super::cuda::{
    Api, CUDA_HELPERS, NVRTC_OPTION, TENSOR_MAP_HELPERS, TIMING, build_arch, encode_map, kernel_index, launch_steps, nvrtc_build, nvrtc_globals, nvrtc_helpers,
};
use super::{Bundle, DispatchInput, build_files, dispatch_shape_opening, dispatch_table_readme, host_arrays, shape_label, summaries_as};
use crate::dispatch::Table;
use peak_spec::Region;

/// The file holding every configuration's copy of the kernel.
pub const INSTANCES_FILE: &str = "kernels.cuh";

/// The namespace of configuration `c`.
pub fn namespace(c: usize) -> String {
    format!("peak_config_{c}")
}

/// Kernel `name` of configuration `c`, as the harness calls it.
pub fn symbol(name: &str, c: usize) -> String {
    if is_identifier(name) { format!("{}::{name}_peak_c{c}", namespace(c)) } else { format!("{}::{name}", namespace(c)) }
}

/// `kernels.cuh`: every configuration of `table` as its own copy of `kernel_file`, whose
/// text is `code` (the context's macros and device regions) and whose launched kernels are
/// `launched`.
pub fn instances(table: &Table, kernel_file: &str, code: &str, launched: &[String]) -> String {
    let mut renamed: Vec<String> = launched.iter().filter(|k| is_identifier(k)).cloned().collect();
    for name in extern_c_names(code) {
        if !renamed.contains(&name) {
            renamed.push(name);
        }
    }
    let mut defined: Vec<String> = defined_macros(code);
    for config in &table.configs {
        for name in config.keys() {
            if !defined.contains(name) {
                defined.push(name.clone());
            }
        }
    }
    let mut h = String::new();
    h.push_str(&format!(
        "/* Every configuration of dispatch.h as its own copy of {kernel_file}, exported by peak: the file\n * included once per configuration in namespace peak_config_C, with the configuration's\n * #defines before it and every macro the file defines undefined after it. Its extern \"C\"\n * functions and launched kernels are renamed NAME_peak_cC, since a namespace does not\n * separate C names. */\n"
    ));
    h.push_str("#ifndef PEAK_KERNELS_CUH\n#define PEAK_KERNELS_CUH\n\n");
    let includes = includes(code);
    if !includes.is_empty() {
        h.push_str("/* The headers the kernel includes, at global scope once: inside the namespaces they are empty. */\n");
        for line in &includes {
            h.push_str(line);
            h.push('\n');
        }
        h.push('\n');
    }
    for (c, config) in table.configs.iter().enumerate() {
        h.push_str(&format!("/* Configuration {c}: {} */\n", table.describe(c)));
        for (name, value) in config {
            h.push_str(&format!("#define {name} {value}\n"));
        }
        for name in &renamed {
            h.push_str(&format!("#define {name} {name}_peak_c{c}\n"));
        }
        h.push_str(&format!("namespace {} {{\n#include \"{kernel_file}\"\n}}\n", namespace(c)));
        for name in renamed.iter().chain(&defined) {
            h.push_str(&format!("#undef {name}\n"));
        }
        h.push('\n');
    }
    h.push_str("#endif /* PEAK_KERNELS_CUH */\n");
    h
}

/// The kernel's code as `instances` reads it: the macros and device regions.
pub fn kernel_code(ctx: &peak_spec::Context) -> String {
    format!("{}\n{}", ctx.region(Region::Macros), ctx.region(Region::Device))
}

pub fn render(input: &DispatchInput, api: Api) -> Bundle {
    let table = input.table;
    let build = api.build(build_arch(input.arch, input.origin));
    let harness = api.harness_file();
    let maps = input.sequences.iter().any(|s| !s.tensor_maps.is_empty());
    let nvrtc = api == Api::Cuda;
    let mut c = String::new();
    c.push_str(&format!(
        "/* Stand-alone dispatch harness for {} ({}), exported by peak from {}.\n * {} tuned shape(s), {} configuration(s): see dispatch.h and {INSTANCES_FILE}.\n * Build: {build}\n * Run:   ./harness [--warmup N] [--reps N] [--dump DIR]\n */\n",
        input.ctx.name(),
        input.ctx.backend(),
        input.origin.describe(),
        table.shapes.len(),
        table.configs.len()
    ));
    c.push_str(&api.runtime());
    if nvrtc {
        c.push_str(NVRTC_OPTION);
    }
    if nvrtc || maps {
        c.push_str("#include <cuda.h>\n");
    }
    c.push_str(super::COMMON_C);
    c.push_str("#include \"dispatch.h\"\n");
    c.push_str(&format!("\n/* Every configuration's kernels. */\n#include \"{INSTANCES_FILE}\"\n"));
    c.push_str(CUDA_HELPERS);
    if nvrtc {
        c.push_str(&nvrtc_helpers());
    }
    if maps {
        c.push_str(TENSOR_MAP_HELPERS);
    }

    for (i, s) in input.sequences.iter().enumerate() {
        let config = table.shapes[i].config;
        let kernels = super::opencl::kernel_names(s);
        c.push_str(&format!("\n/* Tuned shape {i}: {}, configuration {config}. */\n", shape_label(table, i)));
        if nvrtc {
            c.push_str(&nvrtc_globals(&format!("peak_fn_s{i}"), &format!("peak_defines_s{i}"), &kernels, &table.shapes[i].params.defines()));
        }
        if !s.tensor_maps.is_empty() {
            c.push_str(&format!("static PeakMap peak_maps_s{i}[{}];\n", s.tensor_maps.len()));
        }
        c.push_str(&format!("static void peak_run_s{i}(void **peak_buf) {{\n"));
        let function = |k: &str| format!("peak_fn_s{i}[{}]", kernel_index(&kernels, k));
        c.push_str(&launch_steps(s, &|k| symbol(k, config), &format!("peak_maps_s{i}"), nvrtc.then_some(&function as &dyn Fn(&str) -> String)));
        c.push_str("}\n");
    }

    c.push_str("\nint main(int argc, char **argv) {\n    peak_options opt = peak_parse(argc, argv);\n");
    c.push_str("    cudaDeviceProp prop;\n    PEAK_CUDA(cudaGetDeviceProperties(&prop, 0));\n");
    c.push_str(&format!("    printf(\"{} ({}) on %s: {} tuned shape(s)\\n\", prop.name);\n", input.ctx.name(), input.ctx.backend(), table.shapes.len()));
    if maps {
        c.push_str("    PeakEncodeTiled peak_encode = peak_encode_tiled();\n");
    }
    for (i, s) in input.sequences.iter().enumerate() {
        let shape = &table.shapes[i];
        let label = shape_label(table, i);
        c.push_str(&dispatch_shape_opening(table, i, s.launches().count()));
        if nvrtc {
            let kernels = super::opencl::kernel_names(s);
            let defines = (format!("peak_defines_s{i}"), shape.params.tuning.len());
            c.push_str(&nvrtc_build("peak_module", (&defines.0, defines.1), input.kernel_file, &kernels, &format!("peak_fn_s{i}")));
        }
        for op in &s.setup {
            let crate::launch::ExportSetup::MaxDynamicShared { kernel, bytes } = op;
            c.push_str(&format!(
                "    PEAK_CUDA(cudaFuncSetAttribute((const void *){}, cudaFuncAttributeMaxDynamicSharedMemorySize, {bytes}));\n",
                symbol(kernel, shape.config)
            ));
            if nvrtc {
                c.push_str(&format!("    if (peak_module) peak_max_dynamic_shared(peak_module, \"{kernel}\", {bytes});\n"));
            }
        }
        c.push_str(&host_arrays(&s.buffers));
        c.push_str(&format!("    void *peak_buf[{}];\n", s.buffers.len().max(1)));
        for (j, b) in s.buffers.iter().enumerate() {
            c.push_str(&format!("    PEAK_CUDA(cudaMalloc(&peak_buf[{j}], {}ull)); /* {} */\n", b.bytes.max(1), b.name));
            if b.fill.is_some() {
                c.push_str(&format!("    PEAK_CUDA(cudaMemcpy(peak_buf[{j}], peak_host_{}, {}ull, cudaMemcpyHostToDevice));\n", b.ident, b.bytes));
            }
        }
        for (m, map) in s.tensor_maps.iter().enumerate() {
            c.push_str(&encode_map(m, map).replace("peak_maps[", &format!("peak_maps_s{i}[")));
        }
        c.push_str(&format!("    /* One run for the outputs, checked. */\n    peak_run_s{i}(peak_buf);\n    PEAK_CUDA(cudaDeviceSynchronize());\n"));
        for (j, b) in s.buffers.iter().enumerate().filter(|(_, b)| b.role == "output" || b.role == "inout") {
            c.push_str(&format!("    PEAK_CUDA(cudaMemcpy(peak_host_{}, peak_buf[{j}], {}ull, cudaMemcpyDeviceToHost));\n", b.ident, b.bytes));
        }
        c.push_str(&summaries_as(&s.buffers, &format!(".{label}")));
        c.push_str(&TIMING.replace("peak_run(peak_buf)", &format!("peak_run_s{i}(peak_buf)")));
        c.push_str("    for (int i = 0; i < opt.reps; ++i) { cudaEventDestroy(starts[i]); cudaEventDestroy(ends[i]); }\n");
        c.push_str("    free(times);\n    free(starts);\n    free(ends);\n");
        for (j, b) in s.buffers.iter().enumerate() {
            c.push_str(&format!("    PEAK_CUDA(cudaFree(peak_buf[{j}]));\n"));
            if b.fill.is_some() {
                c.push_str(&format!("    free(peak_host_{});\n", b.ident));
            }
        }
        c.push_str("    }\n");
    }
    c.push_str("    return 0;\n}\n");

    let run = "./harness".to_string();
    let mut files = vec![(harness.to_string(), c)];
    files.extend(build_files(&build, &[harness, INSTANCES_FILE, "dispatch.h", input.kernel_file]));
    files.push(("README.txt".to_string(), readme(input, api, &build, &run)));
    Bundle { files, build, run }
}

fn readme(input: &DispatchInput, api: Api, build: &str, run: &str) -> String {
    let table = input.table;
    let mut out =
        format!("{} ({}), exported by peak with a dispatch table by shape\n\nFrom:  {}\n\n", input.ctx.name(), input.ctx.backend(), input.origin.describe());
    out.push_str(&format!("Configurations (each its own copy of the kernel in {INSTANCES_FILE}: namespace peak_config_C)\n"));
    out.push_str(&dispatch_table_readme(table));
    out.push_str(&format!(
        "\nFiles\n  {}  the kernel (its #ifndef defaults: configuration {})\n  {INSTANCES_FILE}  the kernel once per configuration, each in its own namespace\n  dispatch.h  the table and peak_dispatch(inputs): a tuned shape gets its best configuration,\n              another shape the nearest tuned shape's that is valid there (see its comment)\n  {}  runs every tuned shape at the configuration peak_dispatch picks, and times it\n  build.sh, Makefile, README.txt\n",
        input.kernel_file,
        table.fallback,
        api.harness_file()
    ));
    out.push_str(&format!("\nBuild\n  {build}\n  (or: sh build.sh, or: make)\n\nRun\n  {run} [--warmup N] [--reps N] [--dump DIR]\n"));
    out.push_str(
        "  For each tuned shape: `shape SHAPE: configuration C (...)`, one line per output (dumped as\n  DIR/NAME.SHAPE.bin with --dump) and `median_ms: X`.\n",
    );
    out.push_str("\nInputs are filled with the same values peak uses (SplitMix64 from the manifest's seeds), so the\noutputs are comparable with `peak run`'s digests at the same shape and configuration.\n");
    out
}

/// Every `#include` line of `code`, once each, in order.
fn includes(code: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for line in code.lines() {
        let t = line.trim();
        if directive(t).is_some_and(|d| d.starts_with("include")) && !out.iter().any(|o| o == t) {
            out.push(t.to_string());
        }
    }
    out
}

/// The names `code` `#define`s, once each, in order.
fn defined_macros(code: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for line in code.lines() {
        let Some(rest) = directive(line.trim()).and_then(|d| d.strip_prefix("define")) else { continue };
        if !rest.starts_with([' ', '\t']) {
            continue;
        }
        let name: String = rest.trim_start().chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
        if !name.is_empty() && !out.contains(&name) {
            out.push(name);
        }
    }
    out
}

/// The text after `#` (and any blanks) of a preprocessor line.
fn directive(line: &str) -> Option<&str> {
    line.strip_prefix('#').map(str::trim_start)
}

/// Attributes written between `extern "C"` and a function's name.
const ATTRIBUTES: &[&str] =
    &["__launch_bounds__", "__attribute__", "__align__", "__declspec", "__maxnreg__", "__cluster_dims__", "alignas", "__nv_register_params__"];

/// The functions `code` declares `extern "C"` (the name before the first `(` that is not
/// an attribute's), once each; a block `extern "C" { ... }` is left alone.
fn extern_c_names(code: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for (at, _) in code.match_indices("extern \"C\"") {
        let rest = &code[at + "extern \"C\"".len()..];
        if rest.trim_start().starts_with('{') {
            continue;
        }
        let mut last: Option<&str> = None;
        let mut i = 0;
        let bytes = rest.as_bytes();
        while i < bytes.len() {
            let ch = bytes[i] as char;
            if ch.is_ascii_alphabetic() || ch == '_' {
                let start = i;
                while i < bytes.len() && ((bytes[i] as char).is_ascii_alphanumeric() || bytes[i] == b'_') {
                    i += 1;
                }
                last = Some(&rest[start..i]);
                continue;
            }
            if ch == '(' {
                match last {
                    Some(name) if ATTRIBUTES.contains(&name) => {
                        // Skip the attribute's parenthesised arguments.
                        let mut depth = 0;
                        while i < bytes.len() {
                            match bytes[i] {
                                b'(' => depth += 1,
                                b')' => {
                                    depth -= 1;
                                    if depth == 0 {
                                        break;
                                    }
                                }
                                _ => {}
                            }
                            i += 1;
                        }
                        last = None;
                    }
                    Some(name) => {
                        if !out.iter().any(|o| o == name) {
                            out.push(name.to_string());
                        }
                        break;
                    }
                    None => break,
                }
            } else if ch == ';' || ch == '{' {
                break;
            }
            i += 1;
        }
    }
    out
}

fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_') && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extern_c_functions_are_found_past_their_attributes() {
        let code = "extern \"C\" __global__ void __launch_bounds__(256, 2) gemm(float *a) {}\nextern \"C\" __device__ float helper(float x);\nextern \"C\" {\n__global__ void blocked() {}\n}\n__global__ void plain() {}\n";
        assert_eq!(extern_c_names(code), ["gemm", "helper"]);
    }

    #[test]
    fn macros_and_includes_are_read_off_the_code() {
        let code = "#include <cuda_fp16.h>\n  #  define TILE (BX * 4)\n#define ROW(r) ((r) * n)\n#ifndef BX\n#define BX 16\n#endif\n#include <cuda_fp16.h>\n#defineX 1\n";
        assert_eq!(includes(code), ["#include <cuda_fp16.h>"]);
        assert_eq!(defined_macros(code), ["TILE", "ROW", "BX"]);
    }
}
