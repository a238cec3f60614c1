//! The OpenCL harness: `harness.c`, a C host program on the OpenCL 1.2 API, built with
//! `cc harness.c -lOpenCL`. It builds the exported kernel file at run time with no
//! options (the configuration is in the file), on the first GPU, else the first device
//! (`PEAK_OPENCL_DEVICE=P:D` picks another, as in peak). As in peak's OpenCL backend,
//! `grid` counts work-groups (global size = grid x block) and `shared_bytes > 0` is one
//! `__local` buffer appended as the last argument.

use super::{Bundle, Input, build_files, header, host_arrays, launch_count, readme, scalar_literal, summaries};
use crate::launch::{ExportArg, ExportStep, LaunchSequence};

pub const BUILD: &str = "cc -O2 -std=c99 -o harness harness.c -lOpenCL";

pub fn render(input: &Input) -> Bundle {
    let s = input.sequence;
    let kernels = kernel_names(s);
    let mut c = String::new();
    c.push_str(&header(input, BUILD));
    c.push_str("#define CL_TARGET_OPENCL_VERSION 120\n#include <CL/cl.h>\n");
    c.push_str(super::COMMON_C);
    c.push_str(&format!("\nstatic const char *PEAK_KERNEL_FILE = \"{}\";\n", input.kernel_file));
    c.push_str(OPENCL_HELPERS);

    // Buffers and kernels live in globals so the run function can see them.
    for b in &s.buffers {
        c.push_str(&format!("static cl_mem peak_buf_{};\n", b.ident));
    }
    for (i, k) in kernels.iter().enumerate() {
        c.push_str(&format!("static cl_kernel peak_kernel_{i}; /* {k} */\n"));
    }

    c.push_str(&run_function("peak_run", s, &kernels, &|i| format!("peak_buf_{}", s.buffers[i].ident), &|k| format!("peak_kernel_{k}")));
    c.push_str("\nint main(int argc, char **argv) {\n    peak_options opt = peak_parse(argc, argv);\n    cl_int err;\n");
    c.push_str("    cl_device_id device = peak_pick_device();\n    cl_context context = clCreateContext(NULL, 1, &device, NULL, NULL, &err);\n    peak_cl_check(err, \"creating a context\");\n");
    c.push_str(
        "    cl_command_queue q = clCreateCommandQueue(context, device, CL_QUEUE_PROFILING_ENABLE, &err);\n    peak_cl_check(err, \"creating a queue\");\n",
    );
    c.push_str("    cl_program program = peak_build(context, device, opt.kernel ? opt.kernel : peak_next_to(argv[0], PEAK_KERNEL_FILE));\n");
    for (i, k) in kernels.iter().enumerate() {
        c.push_str(&format!("    peak_kernel_{i} = clCreateKernel(program, \"{k}\", &err);\n    peak_cl_check(err, \"finding kernel {k}\");\n"));
    }
    c.push('\n');
    c.push_str(&host_arrays(&s.buffers));
    for b in &s.buffers {
        c.push_str(&format!(
            "    peak_buf_{} = clCreateBuffer(context, CL_MEM_READ_WRITE, {}ull, NULL, &err);\n    peak_cl_check(err, \"allocating {}\");\n",
            b.ident,
            b.bytes.max(1),
            b.name
        ));
        if b.fill.is_some() {
            c.push_str(&format!(
                "    PEAK_CL(clEnqueueWriteBuffer(q, peak_buf_{id}, CL_TRUE, 0, {}ull, peak_host_{id}, 0, NULL, NULL));\n",
                b.bytes,
                id = b.ident
            ));
        }
    }
    c.push_str(&format!(
        "\n    printf(\"{} (opencl): {} launch(es) per run, {}\\n\");\n",
        input.ctx.name(),
        launch_count(s),
        input.params.to_string().replace('"', "'")
    ));
    c.push_str("    /* One run for the outputs, checked. */\n    peak_run(q);\n    PEAK_CL(clFinish(q));\n");
    for b in s.buffers.iter().filter(|b| b.role == "output" || b.role == "inout") {
        c.push_str(&format!("    PEAK_CL(clEnqueueReadBuffer(q, peak_buf_{id}, CL_TRUE, 0, {}ull, peak_host_{id}, 0, NULL, NULL));\n", b.bytes, id = b.ident));
    }
    c.push_str(&summaries(&s.buffers));
    c.push_str(TIMING);
    c.push_str("    return 0;\n}\n");

    let run = "./harness".to_string();
    let notes = "  The kernel file is read at run time from the harness's folder (or --kernel FILE) and built\n  with no options. Set PEAK_OPENCL_DEVICE=P:D to choose a platform and device.\n";
    let mut files = vec![("harness.c".to_string(), c)];
    files.extend(build_files(BUILD, &["harness.c"]));
    files.push(("README.txt".to_string(), readme(input, "harness.c", BUILD, &run, notes)));
    Bundle { files, build: BUILD.to_string(), run }
}

/// `static void NAME(cl_command_queue q)`: one run of `s`, buffer `i` in the global
/// `buf_var(i)`, the `k`th distinct kernel in `kernel_var(k)`.
pub(crate) fn run_function(
    name: &str,
    s: &LaunchSequence,
    kernels: &[&str],
    buf_var: &dyn Fn(usize) -> String,
    kernel_var: &dyn Fn(usize) -> String,
) -> String {
    let mut c = format!("\n/* One run of the launch sequence. */\nstatic void {name}(cl_command_queue q) {{\n    cl_int err;\n");
    for step in &s.steps {
        c.push_str(&format!("    /* {} */\n", super::describe_step(step, &s.buffers)));
        match step {
            ExportStep::Launch { kernel, grid, block, shared_bytes, args } => {
                let k = kernel_var(kernels.iter().position(|n| n == kernel).expect("`kernels` is kernel_names(s): it holds every kernel `s` launches"));
                // `scalar_literal` is `None` only for buffers and tensor maps, never for the arms below.
                let literal = |a: &ExportArg| scalar_literal(a).expect("an integer or float argument has a literal");
                c.push_str("    {\n");
                for (i, a) in args.iter().enumerate() {
                    let line = match a {
                        ExportArg::Buffer { buffer } => format!("PEAK_CL(clSetKernelArg({k}, {i}, sizeof(cl_mem), &{}));", buf_var(*buffer)),
                        ExportArg::I32 { .. } => format!("{{ cl_int v = {}; PEAK_CL(clSetKernelArg({k}, {i}, sizeof v, &v)); }}", literal(a)),
                        ExportArg::U32 { .. } => format!("{{ cl_uint v = {}; PEAK_CL(clSetKernelArg({k}, {i}, sizeof v, &v)); }}", literal(a)),
                        ExportArg::I64 { .. } => format!("{{ cl_long v = {}; PEAK_CL(clSetKernelArg({k}, {i}, sizeof v, &v)); }}", literal(a)),
                        ExportArg::F32 { .. } => format!("{{ cl_float v = {}; PEAK_CL(clSetKernelArg({k}, {i}, sizeof v, &v)); }}", literal(a)),
                        ExportArg::TensorMap { .. } => "#error \"CUDA tensor maps have no OpenCL equivalent\"".to_string(),
                    };
                    c.push_str(&format!("        {line}\n"));
                }
                if *shared_bytes > 0 {
                    c.push_str(&format!("        PEAK_CL(clSetKernelArg({k}, {}, {shared_bytes}, NULL)); /* __local, shared_bytes */\n", args.len()));
                }
                c.push_str(&format!(
                    "        size_t global[3] = {{ {}u * {}u, {}u * {}u, {}u * {}u }};\n        size_t local[3] = {{ {}u, {}u, {}u }};\n",
                    grid[0], block[0], grid[1], block[1], grid[2], block[2], block[0], block[1], block[2]
                ));
                c.push_str(&format!("        err = clEnqueueNDRangeKernel(q, {k}, 3, NULL, global, local, 0, NULL, NULL);\n"));
                c.push_str(&format!("        peak_cl_check(err, \"launching {kernel}\");\n    }}\n"));
            }
            ExportStep::Fill { buffer, pattern, .. } => {
                let bytes: Vec<String> = pattern.iter().map(|b| format!("0x{b:02x}")).collect();
                c.push_str(&format!(
                    "    {{ static const unsigned char pattern[] = {{ {} }}; PEAK_CL(clEnqueueFillBuffer(q, {}, pattern, sizeof pattern, 0, {}ull, 0, NULL, NULL)); }}\n",
                    bytes.join(", "),
                    buf_var(*buffer),
                    s.buffers[*buffer].bytes
                ));
            }
            ExportStep::Copy { src, dst, bytes } => {
                c.push_str(&format!("    PEAK_CL(clEnqueueCopyBuffer(q, {}, {}, 0, 0, {bytes}ull, 0, NULL, NULL));\n", buf_var(*src), buf_var(*dst)));
            }
        }
    }
    c.push_str("    (void)err;\n}\n");
    c
}

/// The distinct kernels `s` launches, in order of first launch.
pub(crate) fn kernel_names(s: &LaunchSequence) -> Vec<&str> {
    let mut kernels: Vec<&str> = Vec::new();
    for (name, ..) in s.launches() {
        if !kernels.contains(&name) {
            kernels.push(name);
        }
    }
    kernels
}

pub(crate) const OPENCL_HELPERS: &str = r#"
static void peak_cl_check(cl_int err, const char *what) {
    if (err != CL_SUCCESS) { fprintf(stderr, "error: %s: OpenCL error %d\n", what, (int)err); exit(1); }
}
#define PEAK_CL(call) peak_cl_check((call), #call)

/* The first GPU, else the first device; PEAK_OPENCL_DEVICE=P:D chooses. */
static cl_device_id peak_pick_device(void) {
    cl_platform_id platforms[16];
    cl_uint np = 0;
    PEAK_CL(clGetPlatformIDs(16, platforms, &np));
    if (np == 0) { fprintf(stderr, "error: no OpenCL platform\n"); exit(1); }
    const char *choice = getenv("PEAK_OPENCL_DEVICE");
    if (choice) {
        unsigned p = 0, d = 0;
        cl_device_id devices[16];
        cl_uint nd = 0;
        if (sscanf(choice, "%u:%u", &p, &d) != 2 || p >= np) { fprintf(stderr, "error: PEAK_OPENCL_DEVICE=%s: expected P:D\n", choice); exit(1); }
        PEAK_CL(clGetDeviceIDs(platforms[p], CL_DEVICE_TYPE_ALL, 16, devices, &nd));
        if (d >= nd) { fprintf(stderr, "error: PEAK_OPENCL_DEVICE=%s: platform %u has %u device(s)\n", choice, p, nd); exit(1); }
        return devices[d];
    }
    cl_device_id first = NULL;
    for (cl_uint p = 0; p < np; ++p) {
        cl_device_id devices[16];
        cl_uint nd = 0;
        if (clGetDeviceIDs(platforms[p], CL_DEVICE_TYPE_GPU, 16, devices, &nd) == CL_SUCCESS && nd > 0) return devices[0];
        if (!first && clGetDeviceIDs(platforms[p], CL_DEVICE_TYPE_ALL, 16, devices, &nd) == CL_SUCCESS && nd > 0) first = devices[0];
    }
    if (!first) { fprintf(stderr, "error: no OpenCL device\n"); exit(1); }
    return first;
}

/* Build the kernel file at `path` with the build options `options`. */
static cl_program peak_build_with(cl_context context, cl_device_id device, const char *path, const char *options) {
    char *text = peak_read_text(path);
    cl_int err;
    const char *sources[1] = { text };
    cl_program program = clCreateProgramWithSource(context, 1, sources, NULL, &err);
    peak_cl_check(err, "creating the program");
    err = clBuildProgram(program, 1, &device, options, NULL, NULL);
    if (err != CL_SUCCESS) {
        size_t n = 0;
        clGetProgramBuildInfo(program, device, CL_PROGRAM_BUILD_LOG, 0, NULL, &n);
        char *log = (char *)malloc(n + 1);
        clGetProgramBuildInfo(program, device, CL_PROGRAM_BUILD_LOG, n, log, NULL);
        log[n] = 0;
        fprintf(stderr, "error: building %s with options \"%s\" failed (%d):\n%s\n", path, options, (int)err, log);
        exit(1);
    }
    free(text);
    return program;
}

static cl_program peak_build(cl_context context, cl_device_id device, const char *path) {
    return peak_build_with(context, device, path, "");
}

/* Milliseconds between two markers' completion. */
static double peak_marker_ms(cl_event a, cl_event b) {
    cl_ulong t0 = 0, t1 = 0;
    PEAK_CL(clWaitForEvents(1, &b));
    PEAK_CL(clGetEventProfilingInfo(a, CL_PROFILING_COMMAND_END, sizeof t0, &t0, NULL));
    PEAK_CL(clGetEventProfilingInfo(b, CL_PROFILING_COMMAND_END, sizeof t1, &t1, NULL));
    clReleaseEvent(a);
    clReleaseEvent(b);
    return (double)(t1 - t0) / 1e6;
}
"#;

pub(crate) const TIMING: &str = r#"
    /* Warm-up, then timed runs between profiling markers, queued back to back and read after
       the last (as peak times); the median is the result. */
    for (int i = 0; i < opt.warmup; ++i) peak_run(q);
    PEAK_CL(clFinish(q));
    double *times = (double *)malloc(sizeof(double) * (size_t)opt.reps);
    cl_event *starts = (cl_event *)malloc(sizeof(cl_event) * (size_t)opt.reps);
    cl_event *ends = (cl_event *)malloc(sizeof(cl_event) * (size_t)opt.reps);
    for (int i = 0; i < opt.reps; ++i) {
        PEAK_CL(clEnqueueMarkerWithWaitList(q, 0, NULL, &starts[i]));
        peak_run(q);
        PEAK_CL(clEnqueueMarkerWithWaitList(q, 0, NULL, &ends[i]));
    }
    PEAK_CL(clFinish(q));
    for (int i = 0; i < opt.reps; ++i) times[i] = peak_marker_ms(starts[i], ends[i]);
    double best = times[0];
    for (int i = 1; i < opt.reps; ++i) if (times[i] < best) best = times[i];
    double median = peak_median(times, opt.reps);
    printf("median_ms: %.6f (%d timed runs, min %.6f, %d warm-up)\n", median, opt.reps, best, opt.warmup);
"#;
