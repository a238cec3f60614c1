//! The OpenCL harness of a dispatch export (`peak export --dispatch`): every tuned shape
//! of the record, each at the configuration `peak_dispatch` (dispatch.h) picks for it.
//!
//! One kernel file; one program built from it per distinct configuration, with that
//! configuration's `-D` options (PEAK_CONFIG_OPTIONS), as peak builds its variants. For each
//! tuned shape the harness asks `peak_dispatch` for the configuration, checks it is the one
//! the record tuned for that shape, takes the kernels from that configuration's program,
//! and runs the shape's launch sequence (evaluated at export time from the launch script):
//! outputs summarised and dumped as `NAME.SHAPE.bin` (SHAPE as `n=256`), then timed.

use super::opencl::{BUILD, OPENCL_HELPERS, TIMING, kernel_names, run_function};
use super::{Bundle, DispatchInput, build_files, dispatch_shape_opening, dispatch_table_readme, host_arrays, shape_label, summaries_as};

pub fn render(input: &DispatchInput) -> Bundle {
    let table = input.table;
    let mut c = String::new();
    c.push_str(&format!(
        "/* Stand-alone dispatch harness for {} (opencl), exported by peak from {}.\n * {} tuned shape(s), {} configuration(s): see dispatch.h.\n * Build: {BUILD}\n * Run:   ./harness [--warmup N] [--reps N] [--dump DIR] [--kernel FILE]\n */\n",
        input.ctx.name(),
        input.origin.describe(),
        table.shapes.len(),
        table.configs.len()
    ));
    c.push_str("#define CL_TARGET_OPENCL_VERSION 120\n#include <CL/cl.h>\n");
    c.push_str(super::COMMON_C);
    c.push_str("#include \"dispatch.h\"\n");
    c.push_str(&format!("\nstatic const char *PEAK_KERNEL_FILE = \"{}\";\n", input.kernel_file));
    c.push_str(OPENCL_HELPERS);

    for (i, s) in input.sequences.iter().enumerate() {
        let kernels = kernel_names(s);
        c.push_str(&format!("\n/* Tuned shape {i}: {} */\n", shape_label(table, i)));
        for b in &s.buffers {
            c.push_str(&format!("static cl_mem peak_buf_s{i}_{};\n", b.ident));
        }
        for (k, name) in kernels.iter().enumerate() {
            c.push_str(&format!("static cl_kernel peak_kernel_s{i}_{k}; /* {name} */\n"));
        }
        c.push_str(&run_function(&format!("peak_run_s{i}"), s, &kernels, &|b| format!("peak_buf_s{i}_{}", s.buffers[b].ident), &|k| {
            format!("peak_kernel_s{i}_{k}")
        }));
    }

    c.push_str("\nint main(int argc, char **argv) {\n    peak_options opt = peak_parse(argc, argv);\n    cl_int err;\n");
    c.push_str("    cl_device_id device = peak_pick_device();\n    cl_context context = clCreateContext(NULL, 1, &device, NULL, NULL, &err);\n    peak_cl_check(err, \"creating a context\");\n");
    c.push_str(
        "    cl_command_queue q = clCreateCommandQueue(context, device, CL_QUEUE_PROFILING_ENABLE, &err);\n    peak_cl_check(err, \"creating a queue\");\n",
    );
    c.push_str("    const char *path = opt.kernel ? opt.kernel : peak_next_to(argv[0], PEAK_KERNEL_FILE);\n");
    c.push_str("    /* One program per configuration: the kernel file built with its -D options. */\n");
    c.push_str("    cl_program programs[PEAK_N_CONFIGS];\n    for (int c = 0; c < PEAK_N_CONFIGS; ++c) programs[c] = peak_build_with(context, device, path, PEAK_CONFIG_OPTIONS[c]);\n");
    for (i, s) in input.sequences.iter().enumerate() {
        let label = shape_label(table, i);
        c.push_str(&dispatch_shape_opening(table, i, s.launches().count()));
        for (k, name) in kernel_names(s).iter().enumerate() {
            c.push_str(&format!(
                "    peak_kernel_s{i}_{k} = clCreateKernel(programs[config], \"{name}\", &err);\n    peak_cl_check(err, \"finding kernel {name}\");\n"
            ));
        }
        c.push_str(&host_arrays(&s.buffers));
        for b in &s.buffers {
            c.push_str(&format!(
                "    peak_buf_s{i}_{} = clCreateBuffer(context, CL_MEM_READ_WRITE, {}ull, NULL, &err);\n    peak_cl_check(err, \"allocating {}\");\n",
                b.ident,
                b.bytes.max(1),
                b.name
            ));
            if b.fill.is_some() {
                c.push_str(&format!(
                    "    PEAK_CL(clEnqueueWriteBuffer(q, peak_buf_s{i}_{id}, CL_TRUE, 0, {}ull, peak_host_{id}, 0, NULL, NULL));\n",
                    b.bytes,
                    id = b.ident
                ));
            }
        }
        c.push_str(&format!("    peak_run_s{i}(q);\n    PEAK_CL(clFinish(q));\n"));
        for b in s.buffers.iter().filter(|b| b.role == "output" || b.role == "inout") {
            c.push_str(&format!(
                "    PEAK_CL(clEnqueueReadBuffer(q, peak_buf_s{i}_{id}, CL_TRUE, 0, {}ull, peak_host_{id}, 0, NULL, NULL));\n",
                b.bytes,
                id = b.ident
            ));
        }
        c.push_str(&summaries_as(&s.buffers, &format!(".{label}")));
        c.push_str(&TIMING.replace("peak_run(q)", &format!("peak_run_s{i}(q)")));
        c.push_str("    free(times);\n    free(starts);\n    free(ends);\n");
        for b in &s.buffers {
            c.push_str(&format!("    clReleaseMemObject(peak_buf_s{i}_{});\n", b.ident));
            if b.fill.is_some() {
                c.push_str(&format!("    free(peak_host_{});\n", b.ident));
            }
        }
        c.push_str("    }\n");
    }
    c.push_str("    return 0;\n}\n");

    let run = "./harness".to_string();
    let mut files = vec![("harness.c".to_string(), c)];
    files.extend(build_files(BUILD, &["harness.c", "dispatch.h"]));
    files.push(("README.txt".to_string(), readme(input, &run)));
    Bundle { files, build: BUILD.to_string(), run }
}

fn readme(input: &DispatchInput, run: &str) -> String {
    let table = input.table;
    let mut out = format!("{} (opencl), exported by peak with a dispatch table by shape\n\nFrom:  {}\n\n", input.ctx.name(), input.origin.describe());
    out.push_str("Configurations (one program each: the kernel file built with these -D options)\n");
    out.push_str(&dispatch_table_readme(table));
    out.push_str(&format!(
        "\nFiles\n  {}  the kernel (its #ifndef defaults: configuration {})\n  dispatch.h  the table and peak_dispatch(inputs): a tuned shape gets its best configuration,\n              another shape the nearest tuned shape's that is valid there (see its comment)\n  harness.c  runs every tuned shape at the configuration peak_dispatch picks, and times it\n  build.sh, Makefile, README.txt\n",
        input.kernel_file, table.fallback
    ));
    out.push_str(&format!("\nBuild\n  {BUILD}\n\nRun\n  {run} [--warmup N] [--reps N] [--dump DIR] [--kernel FILE]\n"));
    out.push_str(
        "  For each tuned shape: `shape SHAPE: configuration C (...)`, one line per output (dumped as\n  DIR/NAME.SHAPE.bin with --dump) and `median_ms: X`.\n",
    );
    out
}
