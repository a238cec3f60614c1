//! The CUDA and HIP harness: `harness.cu` for nvcc, `harness.hip` for hipcc (the same
//! program on the HIP runtime API). It includes the kernel file, so the kernels and the
//! harness are one translation unit and every launch is checked against the kernel's
//! signature at compile time (argument count and types). Buffers pass through `PeakPtr`,
//! which converts to any pointer type the kernel declares. Fills run a small fill kernel
//! (`cudaMemset` is bytewise), copies are device-to-device `cudaMemcpyAsync`, and each run
//! is timed between two events.
//!
//! CUDA launches the code peak timed, not nvcc's: `harness.cu` compiles the kernel file at
//! run time with NVRTC as peak does (its prelude and options, the tuning parameters as
//! `-D`s, the device's architecture) and launches that build with `cuLaunchKernel`
//! (`peak_launch`); nvcc's build of the included file gives each launch its signature, so
//! the arguments are converted and checked at compile time as in a `<<<>>>` call, and
//! `--nvcc` times nvcc's build instead. The two compilers' code can differ: for the
//! split-K NT GEMM at K_SPLITS=2 nvcc's kernel takes 137 registers where NVRTC's takes 128,
//! one block of 256 threads per SM instead of two, and ran 1.146x peak's time on the H200.
//! HIP (hipcc) launches its own build with `<<<>>>` calls.

use super::{Bundle, Input, build_files, header, host_arrays, launch_count, readme, scalar_literal, summaries};
use crate::launch::{ExportArg, ExportSetup, ExportStep};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    Cuda,
    Hip,
}

impl Api {
    pub fn harness_file(self) -> &'static str {
        match self {
            Api::Cuda => "harness.cu",
            Api::Hip => "harness.hip",
        }
    }

    /// The build line; `arch` is the architecture peak compiled for (CUDA), if known.
    pub fn build(self, arch: Option<&str>) -> String {
        match self {
            Api::Cuda => format!("nvcc -O3 -std=c++17 {} -o harness harness.cu -ldl", nvcc_target(arch)),
            Api::Hip => "hipcc -O3 -std=c++17 -o harness harness.hip".to_string(),
        }
    }
}

/// nvcc's target options for the cubin peak compiled: one `-gencode` for `arch` alone.
///
/// NVRTC's `--gpu-architecture=sm_90a` builds one cubin, from PTX for `compute_90a`. nvcc's
/// `-arch=sm_90a` does more: it also embeds PTX for the family's portable virtual
/// architecture (`compute_90`), so every kernel is compiled a second time without the `a`
/// features, and ptxas rejects wgmma, setmaxnreg and the like there ("not supported on
/// .target 'sm_90'"). `-gencode arch=compute_XY[a|f],code=sm_XY[a|f]` builds what peak
/// measured and nothing else. Without a known architecture, `-arch=native`.
pub fn nvcc_target(arch: Option<&str>) -> String {
    match arch.filter(|a| is_real_arch(a)) {
        Some(sm) => format!("-gencode arch=compute_{},code={sm}", &sm["sm_".len()..]),
        None => "-arch=native".to_string(),
    }
}

/// The architecture to build for: the one the launch limits were evaluated for (--arch,
/// else the one the record was measured on), else the one in the record: "sm_90a" in
/// "cuda NVIDIA H200 sm_90a (...)".
pub(crate) fn build_arch<'a>(arch: Option<&'a str>, origin: &'a crate::source::Origin) -> Option<&'a str> {
    let measured = origin.measured_on.as_deref().and_then(|d| d.split_whitespace().find(|w| w.starts_with("sm_")));
    arch.filter(|a| is_real_arch(a)).or(measured)
}

/// `sm_` then digits, then at most an `a` or `f` suffix.
fn is_real_arch(text: &str) -> bool {
    let Some(rest) = text.strip_prefix("sm_") else { return false };
    let digits = rest.strip_suffix(['a', 'f']).unwrap_or(rest);
    digits.len() >= 2 && digits.chars().all(|c| c.is_ascii_digit())
}

impl Api {
    /// The runtime header, and for HIP the CUDA names the harness uses mapped to HIP's, so
    /// the rest of the program (kernel names included) is the same text for both.
    pub(crate) fn runtime(self) -> String {
        match self {
            Api::Cuda => "#include <cuda_runtime.h>\n".to_string(),
            Api::Hip => {
                let mut out = "#include <hip/hip_runtime.h>\n".to_string();
                for name in HIP_NAMES {
                    let hip = match *name {
                        "cudaDeviceProp" => "hipDeviceProp_t".to_string(),
                        other => other.replacen("cuda", "hip", 1),
                    };
                    out.push_str(&format!("#define {name} {hip}\n"));
                }
                out
            }
        }
    }
}

/// The CUDA runtime names the harness uses.
const HIP_NAMES: &[&str] = &[
    "cudaError_t",
    "cudaSuccess",
    "cudaGetErrorString",
    "cudaGetLastError",
    "cudaMalloc",
    "cudaFree",
    "cudaMemcpy",
    "cudaMemcpyAsync",
    "cudaMemcpyHostToDevice",
    "cudaMemcpyDeviceToHost",
    "cudaMemcpyDeviceToDevice",
    "cudaDeviceSynchronize",
    "cudaGetDeviceProperties",
    "cudaDeviceProp",
    "cudaFuncSetAttribute",
    "cudaFuncAttributeMaxDynamicSharedMemorySize",
    "cudaEvent_t",
    "cudaEventCreate",
    "cudaEventRecord",
    "cudaEventSynchronize",
    "cudaEventElapsedTime",
    "cudaEventDestroy",
];

pub fn render(input: &Input, api: Api) -> Bundle {
    let build = api.build(build_arch(input.arch, input.origin));
    let s = input.sequence;
    let nvrtc = api == Api::Cuda;
    let kernels = super::opencl::kernel_names(s);
    let mut c = String::new();
    c.push_str(&header(input, &build));
    c.push_str(&api.runtime());
    if nvrtc {
        c.push_str(NVRTC_OPTION);
    }
    if nvrtc || !s.tensor_maps.is_empty() {
        c.push_str("#include <cuda.h>\n");
    }
    c.push_str(super::COMMON_C);
    c.push_str(&format!("\n/* The kernel, with its tuning configuration. */\n#include \"{}\"\n", input.kernel_file));
    c.push_str(CUDA_HELPERS);
    if nvrtc {
        c.push_str(&nvrtc_helpers());
        c.push_str(&nvrtc_globals("peak_fn", "peak_defines", &kernels, &input.params.defines()));
    }
    if !s.tensor_maps.is_empty() {
        c.push_str(TENSOR_MAP_HELPERS);
        c.push_str(&format!("static PeakMap peak_maps[{}];\n", s.tensor_maps.len()));
    }

    c.push_str("\n/* One run of the launch sequence. */\nstatic void peak_run(void **peak_buf) {\n");
    let function = |k: &str| format!("peak_fn[{}]", kernel_index(&kernels, k));
    c.push_str(&launch_steps(s, &|k| k.to_string(), "peak_maps", nvrtc.then_some(&function as &dyn Fn(&str) -> String)));
    c.push_str("}\n\nint main(int argc, char **argv) {\n    peak_options opt = peak_parse(argc, argv);\n");
    c.push_str("    cudaDeviceProp prop;\n    PEAK_CUDA(cudaGetDeviceProperties(&prop, 0));\n");
    if nvrtc {
        c.push_str(&nvrtc_build("peak_module", ("peak_defines", input.params.tuning.len()), input.kernel_file, &kernels, "peak_fn"));
    }
    for op in &s.setup {
        let ExportSetup::MaxDynamicShared { kernel, bytes } = op;
        c.push_str(&format!("    PEAK_CUDA(cudaFuncSetAttribute((const void *){kernel}, cudaFuncAttributeMaxDynamicSharedMemorySize, {bytes}));\n"));
        if nvrtc {
            c.push_str(&format!("    if (peak_module) peak_max_dynamic_shared(peak_module, \"{kernel}\", {bytes});\n"));
        }
    }
    c.push_str(&host_arrays(&s.buffers));
    c.push_str(&format!("    void *peak_buf[{}];\n", s.buffers.len().max(1)));
    for (i, b) in s.buffers.iter().enumerate() {
        c.push_str(&format!("    PEAK_CUDA(cudaMalloc(&peak_buf[{i}], {}ull)); /* {} */\n", b.bytes.max(1), b.name));
        if b.fill.is_some() {
            c.push_str(&format!("    PEAK_CUDA(cudaMemcpy(peak_buf[{i}], peak_host_{}, {}ull, cudaMemcpyHostToDevice));\n", b.ident, b.bytes));
        }
    }
    if !s.tensor_maps.is_empty() {
        c.push_str("    PeakEncodeTiled peak_encode = peak_encode_tiled();\n");
    }
    for (i, m) in s.tensor_maps.iter().enumerate() {
        c.push_str(&encode_map(i, m));
    }
    c.push_str(&format!(
        "\n    printf(\"{} ({}) on %s: {} launch(es) per run, {}\\n\", prop.name);\n",
        input.ctx.name(),
        input.ctx.backend(),
        launch_count(s),
        input.params.to_string().replace('"', "'")
    ));
    c.push_str("    /* One run for the outputs, checked. */\n    peak_run(peak_buf);\n    PEAK_CUDA(cudaDeviceSynchronize());\n");
    for (i, b) in s.buffers.iter().enumerate().filter(|(_, b)| b.role == "output" || b.role == "inout") {
        c.push_str(&format!("    PEAK_CUDA(cudaMemcpy(peak_host_{}, peak_buf[{i}], {}ull, cudaMemcpyDeviceToHost));\n", b.ident, b.bytes));
    }
    c.push_str(&summaries(&s.buffers));
    c.push_str(TIMING);
    c.push_str("    return 0;\n}\n");

    let run = "./harness".to_string();
    let notes = match api {
        Api::Cuda => {
            "  The kernels timed are the ones peak times: harness.cu compiles the kernel file at run time with\n  NVRTC as peak does (peak's prelude and options, the tuning parameters as -D, the device's\n  architecture) and launches that build. The file is read from the harness's folder (or --kernel\n  FILE); NVRTC is found as peak finds it ($PEAK_NVRTC_PATH, $CUDA_HOME, the loader, /usr/local/cuda).\n  nvcc's build of the same file can be other code (its front end can allocate registers\n  differently, and a few registers more can halve a kernel's occupancy): --nvcc times it instead.\n  The kernel file is also #included by harness.cu, so nvcc checks every launch's arguments against\n  the kernel's signature. -gencode names the architecture peak compiled for (its `a` or `f` suffix\n  included: wgmma, setmaxnreg and multicast need it), and nothing else; for another GPU, change\n  both compute_XY and sm_XY.\n"
        }
        Api::Hip => "  The kernel file is #included by harness.hip; hipcc compiles both (add --offload-arch=gfxNNNN).\n",
    };
    let mut files = vec![(api.harness_file().to_string(), c)];
    files.extend(build_files(&build, &[api.harness_file(), input.kernel_file]));
    files.push(("README.txt".to_string(), readme(input, api.harness_file(), &build, &run, notes)));
    Bundle { files, build, run }
}

/// The body of one run of `s`: each step as CUDA (HIP through the name mapping), kernel
/// `k` called as `kernel(k)`, tensor map `i` passed as `maps[i]`. With `function`, a launch
/// goes through `peak_launch` to NVRTC's build of `k`, `function(k)` (a `CUfunction`), with
/// `kernel(k)` giving the signature; else it is a `<<<>>>` call of `kernel(k)`.
pub(crate) fn launch_steps(
    s: &crate::launch::LaunchSequence,
    kernel: &dyn Fn(&str) -> String,
    maps: &str,
    function: Option<&dyn Fn(&str) -> String>,
) -> String {
    let mut c = String::new();
    for step in &s.steps {
        c.push_str(&format!("    /* {} */\n", super::describe_step(step, &s.buffers)));
        match step {
            ExportStep::Launch { kernel: name, grid, block, shared_bytes, args } => {
                let args: Vec<String> = args
                    .iter()
                    .map(|a| match a {
                        ExportArg::Buffer { buffer } => format!("PeakPtr{{peak_buf[{buffer}]}}"),
                        ExportArg::TensorMap { map } => format!("{maps}[{map}]"),
                        // Buffers and tensor maps are matched above: `other` is a scalar, which has a literal.
                        other => scalar_literal(other).expect("a scalar argument has a literal"),
                    })
                    .collect();
                let dims = format!("dim3({}, {}, {}), dim3({}, {}, {}), {shared_bytes}", grid[0], grid[1], grid[2], block[0], block[1], block[2]);
                match function {
                    Some(function) => {
                        let args: String = args.iter().map(|a| format!(", {a}")).collect();
                        c.push_str(&format!("    peak_launch({}, {}, \"{name}\", {dims}{args});\n", kernel(name), function(name)));
                    }
                    None => c.push_str(&format!("    {}<<<{dims}>>>({});\n    PEAK_CUDA(cudaGetLastError());\n", kernel(name), args.join(", "))),
                }
            }
            ExportStep::Fill { buffer, pattern, .. } => {
                let b = &s.buffers[*buffer];
                let bits = pattern.iter().rev().fold(0u64, |acc, byte| (acc << 8) | u64::from(*byte));
                c.push_str(&format!("    peak_fill(peak_buf[{buffer}], {}, 0x{bits:x}u, {}ull);\n", pattern.len(), b.bytes / pattern.len().max(1)));
            }
            ExportStep::Copy { src, dst, bytes } => {
                c.push_str(&format!("    PEAK_CUDA(cudaMemcpyAsync(peak_buf[{dst}], peak_buf[{src}], {bytes}ull, cudaMemcpyDeviceToDevice));\n"));
            }
        }
    }
    c
}

/// Encode tensor map `i` over its buffer, once, before the first run.
pub(crate) fn encode_map(i: usize, m: &crate::launch::ExportTensorMap) -> String {
    let join = |v: &[String]| v.join(", ");
    let dims: Vec<String> = m.dims.iter().map(|d| format!("{d}ull")).collect();
    let mut strides: Vec<String> = m.strides.iter().map(|d| format!("{d}ull")).collect();
    if strides.is_empty() {
        strides.push("0".into());
    }
    let boxes: Vec<String> = m.box_dims.iter().map(|d| format!("{d}u")).collect();
    let ones = vec!["1u".to_string(); m.dims.len()];
    let dtype = match m.dtype {
        peak_spec::DType::F32 => "CU_TENSOR_MAP_DATA_TYPE_FLOAT32",
        peak_spec::DType::F16 => "CU_TENSOR_MAP_DATA_TYPE_FLOAT16",
        peak_spec::DType::Bf16 => "CU_TENSOR_MAP_DATA_TYPE_BFLOAT16",
        peak_spec::DType::I32 => "CU_TENSOR_MAP_DATA_TYPE_INT32",
        peak_spec::DType::U32 => "CU_TENSOR_MAP_DATA_TYPE_UINT32",
        peak_spec::DType::E4m3 | peak_spec::DType::E5m2 => "CU_TENSOR_MAP_DATA_TYPE_UINT8",
    };
    let swizzle = match m.swizzle.as_str() {
        "32b" => "CU_TENSOR_MAP_SWIZZLE_32B",
        "64b" => "CU_TENSOR_MAP_SWIZZLE_64B",
        "128b" => "CU_TENSOR_MAP_SWIZZLE_128B",
        _ => "CU_TENSOR_MAP_SWIZZLE_NONE",
    };
    format!(
        "    {{ /* tensor_map{i} */\n        const cuuint64_t dims[] = {{ {} }}, strides[] = {{ {} }};\n        const cuuint32_t box[] = {{ {} }}, element_strides[] = {{ {} }};\n        CUresult r = peak_encode(&peak_maps[{i}].map, {dtype}, {}, peak_buf[{}], dims, strides, box, element_strides,\n            CU_TENSOR_MAP_INTERLEAVE_NONE, {swizzle}, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);\n        if (r != CUDA_SUCCESS) {{ fprintf(stderr, \"error: encoding tensor_map{i}: CUresult %d\\n\", (int)r); exit(1); }}\n    }}\n",
        join(&dims),
        join(&strides),
        join(&boxes),
        join(&ones),
        m.dims.len(),
        m.buffer
    )
}

/// Defined before `common.c` in a CUDA harness: `peak_parse` then takes `--nvcc`.
pub(crate) const NVRTC_OPTION: &str = "#define PEAK_NVRTC 1\n";

/// The C++ that builds the kernel file as peak does (NVRTC at run time, with peak's
/// prelude and fixed options) and launches that build: [`NVRTC_HELPERS`] with them filled in.
pub(crate) fn nvrtc_helpers() -> String {
    let options: Vec<String> = peak_cuda::nvrtc::FIXED_OPTIONS.iter().map(|o| format!("\"{o}\"")).collect();
    NVRTC_HELPERS.replace("@OPTIONS@", &options.join(", ")).replace("@PRELUDE@", peak_cuda::nvrtc::PRELUDE)
}

/// The table of NVRTC's kernels, `fns[k]` for `kernels[k]`, and the tuning parameters as
/// NVRTC options, `defines` (as peak passes them: `-DNAME=value`).
pub(crate) fn nvrtc_globals(fns: &str, defines: &str, kernels: &[&str], values: &[(String, String)]) -> String {
    let options: Vec<String> = values.iter().map(|(name, value)| format!("\"-D{name}={value}\"")).collect();
    format!(
        "\n/* NVRTC's build of each launched kernel: {}. */\nstatic CUfunction {fns}[{}];\n/* The tuning parameters, as peak passes them to NVRTC. */\nstatic const char *{defines}[] = {{ {} }};\n",
        kernels.join(", "),
        kernels.len().max(1),
        if options.is_empty() { "NULL".to_string() } else { options.join(", ") }
    )
}

/// `main`'s lines that compile the kernel file as peak does into `module` (NULL with
/// `--nvcc`, which times nvcc's build), with the `count` options of array `defines`, and
/// find every launched kernel in it.
pub(crate) fn nvrtc_build(module: &str, (defines, count): (&str, usize), kernel_file: &str, kernels: &[&str], fns: &str) -> String {
    let mut c = format!(
        "    /* The kernels peak times: the kernel file built as peak builds it (NVRTC), unless --nvcc. */\n    peak_use_nvcc = opt.nvcc;\n    CUmodule {module} = NULL;\n    if (opt.nvcc) printf(\"kernels: nvcc's build of {kernel_file} (--nvcc)\\n\");\n    else {{\n        {module} = peak_nvrtc_module(opt.kernel ? opt.kernel : peak_next_to(argv[0], \"{kernel_file}\"), {defines}, {count}, &prop);\n"
    );
    for (k, name) in kernels.iter().enumerate() {
        c.push_str(&format!("        {fns}[{k}] = peak_function({module}, \"{name}\");\n"));
    }
    c.push_str("    }\n");
    c
}

/// The index of `name` in `kernels`.
pub(crate) fn kernel_index(kernels: &[&str], name: &str) -> usize {
    kernels.iter().position(|k| *k == name).expect("`kernels` is kernel_names(s): it holds every kernel `s` launches")
}

pub(crate) const NVRTC_HELPERS: &str = r##"
/* The kernels as peak compiles them. peak builds the kernel file with NVRTC, in process: its
   prelude, then the file, with the options in PEAK_NVRTC_OPTIONS and every tuning parameter
   as -DNAME=value, for the device's own architecture. nvcc's build of the same file (the
   #include above) is not the same code: the two front ends can allocate registers
   differently, and a few registers more can halve a kernel's occupancy. So the harness
   compiles the kernel file as peak does, at run time, and launches that build; nvcc's build
   gives each launch its kernel's signature (the arguments are converted to the parameter
   types and checked at compile time) and is what --nvcc times instead. */
#include <dirent.h>
#include <dlfcn.h>
#include <unistd.h>
#include <tuple>
#include <utility>

static const char *PEAK_NVRTC_PRELUDE = R"peak_prelude(@PRELUDE@)peak_prelude";
static const char *PEAK_NVRTC_OPTIONS[] = { @OPTIONS@ };

typedef struct peak_nvrtc_program_st *peak_nvrtc_program;
static struct {
    int (*version)(int *, int *);
    int (*create)(peak_nvrtc_program *, const char *, const char *, int, const char *const *, const char *const *);
    int (*compile)(peak_nvrtc_program, int, const char *const *);
    int (*log_size)(peak_nvrtc_program, size_t *);
    int (*log)(peak_nvrtc_program, char *);
    int (*cubin_size)(peak_nvrtc_program, size_t *);
    int (*cubin)(peak_nvrtc_program, char *);
    int (*destroy)(peak_nvrtc_program *);
    const char *(*error)(int);
    int major, minor;
    char path[4096];
} peak_nvrtc;

static int peak_is_file(const char *path) { return access(path, F_OK) == 0; }

/* Bind NVRTC from `handle`, loaded from `path`; 0 if a function is missing. */
static int peak_nvrtc_bind(void *handle, const char *path) {
#define PEAK_NVRTC_SYM(field, name) if (!(*(void **)&peak_nvrtc.field = dlsym(handle, name))) return 0
    PEAK_NVRTC_SYM(version, "nvrtcVersion");
    PEAK_NVRTC_SYM(create, "nvrtcCreateProgram");
    PEAK_NVRTC_SYM(compile, "nvrtcCompileProgram");
    PEAK_NVRTC_SYM(log_size, "nvrtcGetProgramLogSize");
    PEAK_NVRTC_SYM(log, "nvrtcGetProgramLog");
    PEAK_NVRTC_SYM(cubin_size, "nvrtcGetCUBINSize");
    PEAK_NVRTC_SYM(cubin, "nvrtcGetCUBIN");
    PEAK_NVRTC_SYM(destroy, "nvrtcDestroyProgram");
    PEAK_NVRTC_SYM(error, "nvrtcGetErrorString");
#undef PEAK_NVRTC_SYM
    snprintf(peak_nvrtc.path, sizeof peak_nvrtc.path, "%s", path);
    return peak_nvrtc.version(&peak_nvrtc.major, &peak_nvrtc.minor) == 0;
}

/* libnvrtc.so.MAJOR in `dir`, its builtins library loaded first from the same folder (NVRTC
   opens it by bare name, as peak's loader knows). */
static int peak_nvrtc_from(const char *dir) {
    char path[4096], prefix[64];
    if (snprintf(path, sizeof path, "%s/libnvrtc.so.%d", dir, CUDART_VERSION / 1000) >= (int)sizeof path || !peak_is_file(path)) return 0;
    snprintf(prefix, sizeof prefix, "libnvrtc-builtins.so.%d.", CUDART_VERSION / 1000);
    DIR *d = opendir(dir);
    for (struct dirent *e = d ? readdir(d) : NULL; e; e = readdir(d)) {
        if (!strncmp(e->d_name, prefix, strlen(prefix))) {
            char builtins[4096];
            if (snprintf(builtins, sizeof builtins, "%s/%s", dir, e->d_name) < (int)sizeof builtins) dlopen(builtins, RTLD_NOW | RTLD_GLOBAL);
            break;
        }
    }
    if (d) closedir(d);
    void *handle = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
    return handle && peak_nvrtc_bind(handle, path);
}

static int peak_nvrtc_under(const char *root) {
    static const char *subs[] = { "", "/lib64", "/lib", "/targets/x86_64-linux/lib" };
    for (int i = 0; i < 4; ++i) {
        char dir[4096];
        snprintf(dir, sizeof dir, "%s%s", root, subs[i]);
        if (peak_nvrtc_from(dir)) return 1;
    }
    return 0;
}

/* NVRTC, searched as peak searches: PEAK_NVRTC_PATH, CUDA_HOME, CUDA_PATH, the dynamic
   loader's own search, /usr/local/cuda. */
static void peak_nvrtc_load(void) {
    const char *p = getenv("PEAK_NVRTC_PATH");
    if (p && *p) {
        char dir[4096];
        snprintf(dir, sizeof dir, "%s", p);
        char *slash = strrchr(dir, '/');
        if (strstr(p, "libnvrtc.so") && slash) *slash = 0;
        if (peak_nvrtc_under(dir)) return;
    }
    const char *vars[] = { "CUDA_HOME", "CUDA_PATH" };
    for (int i = 0; i < 2; ++i) {
        const char *root = getenv(vars[i]);
        if (root && *root && peak_nvrtc_under(root)) return;
    }
    char name[64];
    snprintf(name, sizeof name, "libnvrtc.so.%d", CUDART_VERSION / 1000);
    void *handle = dlopen(name, RTLD_NOW | RTLD_GLOBAL);
    if (handle) {
        Dl_info info;
        void *sym = dlsym(handle, "nvrtcVersion");
        if (sym && dladdr(sym, &info) && info.dli_fname && peak_nvrtc_bind(handle, info.dli_fname)) return;
    }
    if (peak_nvrtc_under("/usr/local/cuda")) return;
    fprintf(stderr, "error: no libnvrtc.so.%d (looked in $PEAK_NVRTC_PATH, $CUDA_HOME, $CUDA_PATH, the loader's path, /usr/local/cuda):\n"
                    "  set PEAK_NVRTC_PATH to the folder holding it (the one peak uses), or pass --nvcc to time nvcc's build\n", CUDART_VERSION / 1000);
    exit(1);
}

/* The folder holding cuda_fp16.h and friends, passed to NVRTC as -I: the include folder
   beside NVRTC's lib folder, else $CUDA_HOME's, $CUDA_PATH's, /usr/local/cuda's. */
static int peak_nvrtc_include(char *out, size_t size) {
    char lib[4096];
    snprintf(lib, sizeof lib, "%s", peak_nvrtc.path);
    char *slash = strrchr(lib, '/');
    if (slash) *slash = 0;
    slash = strrchr(lib, '/');
    const char *roots[4] = { NULL, getenv("CUDA_HOME"), getenv("CUDA_PATH"), "/usr/local/cuda" };
    char sibling[4096];
    if (slash) {
        *slash = 0;
        snprintf(sibling, sizeof sibling, "%s", lib);
        roots[0] = sibling;
    }
    for (int i = 0; i < 4; ++i) {
        if (!roots[i] || !*roots[i]) continue;
        char probe[4096];
        if (snprintf(out, size, "%s/include", roots[i]) >= (int)size) continue;
        if (snprintf(probe, sizeof probe, "%s/cuda_fp16.h", out) < (int)sizeof probe && peak_is_file(probe)) return 1;
    }
    return 0;
}

/* The driver API, through the runtime (no -lcuda). */
static void *peak_driver_entry(const char *name) {
    void *fn = NULL;
    cudaDriverEntryPointQueryResult found;
#if CUDART_VERSION >= 12050
    PEAK_CUDA(cudaGetDriverEntryPointByVersion(name, &fn, 12000, cudaEnableDefault, &found));
#else
    PEAK_CUDA(cudaGetDriverEntryPoint(name, &fn, cudaEnableDefault, &found));
#endif
    if (!fn || found != cudaDriverEntryPointSuccess) { fprintf(stderr, "error: the driver has no %s\n", name); exit(1); }
    return fn;
}

static struct {
    CUresult (*load)(CUmodule *, const void *);
    CUresult (*function)(CUfunction *, CUmodule, const char *);
    CUresult (*attribute)(CUfunction, CUfunction_attribute, int);
    CUresult (*launch)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream, void **, void **);
} peak_cu;

static void peak_cu_check(CUresult r, const char *what) {
    if (r != CUDA_SUCCESS) { fprintf(stderr, "error: %s: CUresult %d\n", what, (int)r); exit(1); }
}

/* The kernel file built as peak builds it: NVRTC, peak's prelude and options, the tuning
   parameters `defines` (-DNAME=value), the device's architecture (sm_XY; sm_90a on 9.0, as
   peak's backend picks); loaded into the current context. Prints each kernel's resources. */
static CUmodule peak_nvrtc_module(const char *file, const char *const *defines, int ndefines, const cudaDeviceProp *prop) {
    static int loaded = 0;
    if (!loaded) {
        peak_nvrtc_load();
        *(void **)&peak_cu.load = peak_driver_entry("cuModuleLoadData");
        *(void **)&peak_cu.function = peak_driver_entry("cuModuleGetFunction");
        *(void **)&peak_cu.attribute = peak_driver_entry("cuFuncSetAttribute");
        *(void **)&peak_cu.launch = peak_driver_entry("cuLaunchKernel");
        loaded = 1;
    }
    char *text = peak_read_text(file);
    char line[4200];
    snprintf(line, sizeof line, "#line 1 \"%s\"\n", file);
    for (char *c = line + 9; *c && c[1] != '\n'; ++c) if (*c == '"' || *c == '\\') *c = '_';
    size_t size = strlen(PEAK_NVRTC_PRELUDE) + strlen(line) + strlen(text) + 1;
    char *source = (char *)malloc(size);
    snprintf(source, size, "%s%s%s", PEAK_NVRTC_PRELUDE, line, text);
    char arch[64], include[4200];
    snprintf(arch, sizeof arch, "--gpu-architecture=sm_%d%d%s", prop->major, prop->minor, prop->major == 9 && prop->minor == 0 ? "a" : "");
    const char **options = (const char **)malloc(sizeof(char *) * (size_t)(ndefines + 8));
    int n = 0;
    options[n++] = arch;
    for (size_t i = 0; i < sizeof PEAK_NVRTC_OPTIONS / sizeof *PEAK_NVRTC_OPTIONS; ++i) {
        /* NVRTC before 12.9 has no disk cache and no option to turn it off. */
        if (!strcmp(PEAK_NVRTC_OPTIONS[i], "--no-cache") && peak_nvrtc.major * 100 + peak_nvrtc.minor < 1209) continue;
        options[n++] = PEAK_NVRTC_OPTIONS[i];
    }
    if (peak_nvrtc_include(include + 2, sizeof include - 2)) { include[0] = '-'; include[1] = 'I'; options[n++] = include; }
    for (int i = 0; i < ndefines; ++i) options[n++] = defines[i];
    peak_nvrtc_program program;
    if (peak_nvrtc.create(&program, source, file, 0, NULL, NULL) != 0) { fprintf(stderr, "error: nvrtcCreateProgram\n"); exit(1); }
    int status = peak_nvrtc.compile(program, n, options);
    size_t log_size = 0;
    peak_nvrtc.log_size(program, &log_size);
    char *log = (char *)malloc(log_size + 1);
    peak_nvrtc.log(program, log);
    log[log_size] = 0;
    if (status != 0) {
        fprintf(stderr, "error: NVRTC %d.%d could not compile %s: %s\n", peak_nvrtc.major, peak_nvrtc.minor, file, peak_nvrtc.error(status));
        for (int i = 0; i < n; ++i) fprintf(stderr, "%s%s", i ? " " : "  options: ", options[i]);
        fprintf(stderr, "\n%s\n", log);
        exit(1);
    }
    printf("kernels: NVRTC %d.%d (%s), %s, as peak compiles them (--nvcc times nvcc's build)\n", peak_nvrtc.major, peak_nvrtc.minor, peak_nvrtc.path, arch + 19);
    /* ptxas's report: "Compiling entry function 'K'", then "Used N registers, ...". */
    char kernel[256] = "";
    for (char *l = strtok(log, "\n"); l; l = strtok(NULL, "\n")) {
        const char *entry = strstr(l, "Compiling entry function '");
        const char *used = strstr(l, ": Used ");
        if (entry) {
            entry += strlen("Compiling entry function '");
            size_t len = strcspn(entry, "'");
            snprintf(kernel, sizeof kernel, "%.*s", (int)(len < 255 ? len : 255), entry);
        } else if (used && *kernel) {
            printf("kernel %s: %s\n", kernel, used + 2);
        }
    }
    size_t bytes = 0;
    peak_nvrtc.cubin_size(program, &bytes);
    char *cubin = (char *)malloc(bytes);
    peak_nvrtc.cubin(program, cubin);
    peak_nvrtc.destroy(&program);
    PEAK_CUDA(cudaFree(0)); /* the runtime's context, current */
    CUmodule module;
    peak_cu_check(peak_cu.load(&module, cubin), "loading the cubin NVRTC built");
    free(cubin);
    free(log);
    free(options);
    free(source);
    free(text);
    return module;
}

static CUfunction peak_function(CUmodule module, const char *name) {
    CUfunction f;
    char what[300];
    snprintf(what, sizeof what, "finding kernel %s in NVRTC's build", name);
    peak_cu_check(peak_cu.function(&f, module, name), what);
    return f;
}

static void peak_max_dynamic_shared(CUmodule module, const char *name, int bytes) {
    peak_cu_check(peak_cu.attribute(peak_function(module, name), CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, bytes), name);
}

/* --nvcc: launch nvcc's build instead of NVRTC's. */
static int peak_use_nvcc = 0;

template <class Args, std::size_t... I>
static void peak_launch_converted(CUfunction f, const char *name, dim3 grid, dim3 block, unsigned shared, Args &args, std::index_sequence<I...>) {
    void *params[sizeof...(I) + 1] = { (void *)&std::get<I>(args)..., NULL };
    peak_cu_check(peak_cu.launch(f, grid.x, grid.y, grid.z, block.x, block.y, block.z, shared, 0, params, NULL), name);
}

/* Launch `name`: NVRTC's build `f`, or with --nvcc nvcc's `kernel`, with `args` converted to
   the parameter types of `kernel` (a wrong count or type is a compile error, as in a <<<>>>
   call). Both go to the default stream, between the same events. */
template <class... P, class... A>
static void peak_launch(void (*kernel)(P...), CUfunction f, const char *name, dim3 grid, dim3 block, unsigned shared, const A &...args) {
    static_assert(sizeof...(P) == sizeof...(A), "a launch passes as many arguments as its kernel takes");
    if (peak_use_nvcc) {
        kernel<<<grid, block, shared>>>(static_cast<P>(args)...);
        PEAK_CUDA(cudaGetLastError());
        return;
    }
    std::tuple<P...> converted(static_cast<P>(args)...);
    peak_launch_converted(f, name, grid, block, shared, converted, std::index_sequence_for<P...>{});
}
"##;

/// `cuTensorMapEncodeTiled` from the driver through the runtime (no -lcuda), and a map
/// that converts to whatever 128-byte type the kernel declares (`CUtensorMap`, or its own
/// aligned struct).
pub(crate) const TENSOR_MAP_HELPERS: &str = r#"
typedef CUresult (*PeakEncodeTiled)(CUtensorMap *, CUtensorMapDataType, cuuint32_t, void *, const cuuint64_t *, const cuuint64_t *,
                                    const cuuint32_t *, const cuuint32_t *, CUtensorMapInterleave, CUtensorMapSwizzle,
                                    CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

static PeakEncodeTiled peak_encode_tiled(void) {
    void *fn = NULL;
    cudaDriverEntryPointQueryResult found;
#if CUDART_VERSION >= 12050
    PEAK_CUDA(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &found));
#else
    PEAK_CUDA(cudaGetDriverEntryPoint("cuTensorMapEncodeTiled", &fn, cudaEnableDefault, &found));
#endif
    if (!fn || found != cudaDriverEntryPointSuccess) { fprintf(stderr, "error: the driver has no cuTensorMapEncodeTiled (Hopper tensor maps need CUDA 12)\n"); exit(1); }
    return (PeakEncodeTiled)fn;
}

struct PeakMap {
    CUtensorMap map;
    template <class T> operator T() const {
        static_assert(sizeof(T) == sizeof(CUtensorMap), "a tensor map parameter takes 128 bytes");
        T t;
        memcpy(&t, &map, sizeof t);
        return t;
    }
};
"#;

pub(crate) const CUDA_HELPERS: &str = r#"
static void peak_cuda_check(cudaError_t err, const char *what) {
    if (err != cudaSuccess) { fprintf(stderr, "error: %s: %s\n", what, cudaGetErrorString(err)); exit(1); }
}
#define PEAK_CUDA(call) peak_cuda_check((call), #call)

/* A device buffer that converts to whatever pointer type the kernel declares. */
struct PeakPtr {
    void *p;
    template <class T> operator T *() const { return static_cast<T *>(p); }
};

__global__ void peak_fill32(unsigned int *p, unsigned int v, unsigned long long n) {
    unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
    if (i < n) p[i] = v;
}
__global__ void peak_fill16(unsigned short *p, unsigned int v, unsigned long long n) {
    unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
    if (i < n) p[i] = (unsigned short)v;
}

/* Fill `n` elements of `size` (2 or 4) bytes with `bits`, on the device. */
static void peak_fill(void *buf, int size, unsigned int bits, unsigned long long n) {
    unsigned int blocks = (unsigned int)((n + 255) / 256);
    if (blocks == 0) return;
    if (size == 2) peak_fill16<<<blocks, 256>>>((unsigned short *)buf, bits, n);
    else peak_fill32<<<blocks, 256>>>((unsigned int *)buf, bits, n);
    PEAK_CUDA(cudaGetLastError());
}
"#;

pub(crate) const TIMING: &str = r#"
    /* Warm-up, then timed runs, each between two events, queued back to back and read after
       the last (as peak times: waiting between runs would time the next launch's host
       latency); the median is the result. */
    for (int i = 0; i < opt.warmup; ++i) peak_run(peak_buf);
    PEAK_CUDA(cudaDeviceSynchronize());
    double *times = (double *)malloc(sizeof(double) * (size_t)opt.reps);
    cudaEvent_t *starts = (cudaEvent_t *)malloc(sizeof(cudaEvent_t) * (size_t)opt.reps);
    cudaEvent_t *ends = (cudaEvent_t *)malloc(sizeof(cudaEvent_t) * (size_t)opt.reps);
    for (int i = 0; i < opt.reps; ++i) {
        PEAK_CUDA(cudaEventCreate(&starts[i]));
        PEAK_CUDA(cudaEventCreate(&ends[i]));
    }
    for (int i = 0; i < opt.reps; ++i) {
        PEAK_CUDA(cudaEventRecord(starts[i], 0));
        peak_run(peak_buf);
        PEAK_CUDA(cudaEventRecord(ends[i], 0));
    }
    PEAK_CUDA(cudaDeviceSynchronize());
    for (int i = 0; i < opt.reps; ++i) {
        float ms = 0.0f;
        PEAK_CUDA(cudaEventElapsedTime(&ms, starts[i], ends[i]));
        times[i] = ms;
    }
    double best = times[0];
    for (int i = 1; i < opt.reps; ++i) if (times[i] < best) best = times[i];
    double median = peak_median(times, opt.reps);
    printf("median_ms: %.6f (%d timed runs, min %.6f, %d warm-up)\n", median, opt.reps, best, opt.warmup);
"#;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_build_line_targets_exactly_the_architecture_peak_compiled_for() {
        assert_eq!(Api::Cuda.build(Some("sm_90a")), "nvcc -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a -o harness harness.cu -ldl");
        assert_eq!(nvcc_target(Some("sm_80")), "-gencode arch=compute_80,code=sm_80");
        assert_eq!(nvcc_target(Some("sm_100f")), "-gencode arch=compute_100f,code=sm_100f");
        assert_eq!(nvcc_target(Some("sm_120a")), "-gencode arch=compute_120a,code=sm_120a");
        // Not a real architecture: nvcc picks the local GPU's.
        for unknown in [None, Some(""), Some("gfx90a"), Some("sm_9"), Some("sm_90x"), Some("compute_90a")] {
            assert_eq!(nvcc_target(unknown), "-arch=native", "{unknown:?}");
        }
        assert_eq!(Api::Hip.build(Some("sm_90a")), "hipcc -O3 -std=c++17 -o harness harness.hip");
    }

    use crate::launch::{ExportBuffer, LaunchSequence};
    use crate::source::Origin;
    use peak_spec::{Context, DType, ExecParams, Manifest, Regions};

    const MANIFEST: &str = r#"
[kernel]
name = "gemm"
backend = "cuda"
source = "gemm.cu"

[inputs]
M = { values = [8192] }

[[arrays]]
name = "a"
type = "f32"
size = "M"
init = "random"

[[arrays]]
name = "out"
type = "f32"
size = "M"
init = "zeros"
output = true

[tuning]
K_SPLITS = { values = [2] }
"#;

    /// The two kernels the launch sequence below launches, with its argument types.
    const KERNEL: &str = "extern \"C\" __global__ void gemm(const float *a, float *out, int m, float *partial) {\n    int i = blockIdx.x * blockDim.x + threadIdx.x;\n    if (i < m) partial[blockIdx.z * m + i] = a[i];\n}\nextern \"C\" __global__ void gemm_reduce(float *out, int m, float *partial) {\n    int i = blockIdx.x * blockDim.x + threadIdx.x;\n    if (i < m) out[i] = partial[i] + partial[m + i];\n}\n";

    fn buffer(name: &str, role: &str, count: usize) -> ExportBuffer {
        let fill = (role != "scratch").then(|| peak_spec::Values::Zeros.into());
        ExportBuffer { name: name.into(), ident: name.into(), dtype: DType::F32, count, bytes: count * 4, role: role.into(), fill, seed: Some(1) }
    }

    /// A split-K run: the partial sums' kernel (dynamic shared memory set up first), then
    /// the reduction, over a scratch buffer.
    fn split_k(api: Api) -> String {
        let manifest = Manifest::parse("peak.toml", MANIFEST).unwrap();
        let ctx = Context { dir: "/nonexistent/ctx".into(), manifest, regions: Regions::new("", KERNEL, "") };
        let mut params = ExecParams::default();
        params.inputs.insert("M".into(), 8192);
        params.tuning.insert("K_SPLITS".into(), 2);
        let (a, out, partial) = (ExportArg::Buffer { buffer: 0 }, ExportArg::Buffer { buffer: 1 }, ExportArg::Buffer { buffer: 2 });
        let m = ExportArg::I32 { value: 8192 };
        let sequence = LaunchSequence {
            buffers: vec![buffer("a", "input", 8192), buffer("out", "output", 8192), buffer("scratch0", "scratch", 2 * 8192)],
            setup: vec![ExportSetup::MaxDynamicShared { kernel: "gemm".into(), bytes: 76800 }],
            steps: vec![
                ExportStep::Launch {
                    kernel: "gemm".into(),
                    grid: [32, 1, 2],
                    block: [256, 1, 1],
                    shared_bytes: 76800,
                    args: vec![a, out.clone(), m.clone(), partial.clone()],
                },
                ExportStep::Launch { kernel: "gemm_reduce".into(), grid: [32, 1, 1], block: [256, 1, 1], shared_bytes: 0, args: vec![out, m, partial] },
            ],
            tensor_maps: Vec::new(),
            printed: Vec::new(),
        };
        let origin =
            Origin { kind: "context".into(), workflow: None, checkpoint: None, transformation: None, context: "/nonexistent/ctx".into(), measured_on: None };
        let input = super::super::Input {
            ctx: &ctx,
            params: &params,
            sequence: &sequence,
            kernel_file: "gemm.cu",
            origin: &origin,
            recorded_time_ms: None,
            arch: Some("sm_90a"),
        };
        render(&input, api).files.swap_remove(0).1
    }

    /// `text` from `from` to the next line that is `}` alone.
    fn block<'a>(text: &'a str, from: &str) -> &'a str {
        let start = text.find(from).unwrap_or_else(|| panic!("no {from}"));
        let end = text[start..].find("\n}\n").unwrap() + start;
        &text[start..end]
    }

    #[test]
    fn the_cuda_harness_times_the_kernels_nvrtc_builds_as_peak_does_not_nvccs() {
        let harness = split_k(Api::Cuda);
        // Every launch of a run goes to NVRTC's build, its arguments converted to the
        // parameter types of nvcc's kernel (the signature check a <<<>>> call made).
        let run = block(&harness, "static void peak_run(void **peak_buf) {");
        assert!(!run.contains("<<<"), "a run launches nvcc's build:\n{run}");
        assert!(run.contains("peak_launch(gemm, peak_fn[0], \"gemm\", dim3(32, 1, 2), dim3(256, 1, 1), 76800, PeakPtr{peak_buf[0]}, PeakPtr{peak_buf[1]}, 8192, PeakPtr{peak_buf[2]});"), "{run}");
        assert!(
            run.contains(
                "peak_launch(gemm_reduce, peak_fn[1], \"gemm_reduce\", dim3(32, 1, 1), dim3(256, 1, 1), 0, PeakPtr{peak_buf[1]}, 8192, PeakPtr{peak_buf[2]});"
            ),
            "{run}"
        );
        // NVRTC's build is peak's: its prelude, its options, the tuning parameters as -D.
        assert!(harness.contains(&format!("R\"peak_prelude({})peak_prelude\"", peak_cuda::nvrtc::PRELUDE)));
        let options: Vec<String> = peak_cuda::nvrtc::FIXED_OPTIONS.iter().map(|o| format!("\"{o}\"")).collect();
        assert!(harness.contains(&format!("static const char *PEAK_NVRTC_OPTIONS[] = {{ {} }};", options.join(", "))));
        assert!(harness.contains("static const char *peak_defines[] = { \"-DK_SPLITS=2\" };"), "{harness}");
        // Built, its kernels found and their shared memory raised before the first run.
        let main = &harness[harness.find("int main(").unwrap()..];
        let at = |what: &str| main.find(what).unwrap_or_else(|| panic!("no {what} in main:\n{main}"));
        let built = at("peak_module = peak_nvrtc_module(opt.kernel ? opt.kernel : peak_next_to(argv[0], \"gemm.cu\"), peak_defines, 1, &prop);");
        let found = at("peak_fn[1] = peak_function(peak_module, \"gemm_reduce\");");
        let shared = at("if (peak_module) peak_max_dynamic_shared(peak_module, \"gemm\", 76800);");
        let first_run = at("    peak_run(peak_buf);");
        assert!(built < found && found < shared && shared < first_run);
        // --nvcc times nvcc's build instead.
        assert!(main.contains("peak_use_nvcc = opt.nvcc;") && harness.contains("#define PEAK_NVRTC 1\n"));
    }

    #[test]
    fn the_hip_harness_launches_hipccs_build() {
        let harness = split_k(Api::Hip);
        assert!(
            harness.contains("    gemm<<<dim3(32, 1, 2), dim3(256, 1, 1), 76800>>>(PeakPtr{peak_buf[0]}, PeakPtr{peak_buf[1]}, 8192, PeakPtr{peak_buf[2]});")
        );
        assert!(!harness.contains("peak_nvrtc_module") && !harness.contains("peak_launch(") && !harness.contains("#define PEAK_NVRTC"));
    }

    /// nvcc: on the PATH, in $CUDA_HOME or /usr/local/cuda, or beside NVRTC's wheel.
    fn nvcc() -> Option<std::path::PathBuf> {
        let mut candidates = vec![std::path::PathBuf::from("nvcc")];
        if let Some(home) = std::env::var_os("CUDA_HOME") {
            candidates.push(std::path::Path::new(&home).join("bin/nvcc"));
        }
        candidates.push("/usr/local/cuda/bin/nvcc".into());
        if let Some(include) = peak_cuda::libs::nvrtc().ok().and_then(|i| i.include_dir.clone()) {
            candidates.push(include.join("../bin/nvcc"));
        }
        candidates.into_iter().find(|c| std::process::Command::new(c).arg("--version").output().is_ok_and(|o| o.status.success()))
    }

    #[test]
    fn nvcc_builds_the_cuda_harness_and_still_checks_each_launch_against_its_kernel() {
        let Some(nvcc) = nvcc() else {
            eprintln!(
                "SKIPPED nvcc_builds_the_cuda_harness_and_still_checks_each_launch_against_its_kernel: no nvcc (PATH, $CUDA_HOME, /usr/local/cuda, beside NVRTC)"
            );
            return;
        };
        let dir = tempfile::tempdir().unwrap();
        let harness = split_k(Api::Cuda);
        let build = |harness: &str| {
            std::fs::write(dir.path().join("harness.cu"), harness).unwrap();
            std::fs::write(dir.path().join("gemm.cu"), KERNEL).unwrap();
            let out = std::process::Command::new(&nvcc)
                .current_dir(dir.path())
                .args(["-std=c++17", "-gencode", "arch=compute_90a,code=sm_90a", "-c", "-o", "harness.o", "harness.cu"])
                .output()
                .unwrap();
            (out.status.success(), String::from_utf8_lossy(&out.stderr).into_owned())
        };
        let (ok, log) = build(&harness);
        assert!(ok, "{log}");
        // A launch with an argument too few does not compile.
        let (ok, log) = build(&harness.replace(", 8192, PeakPtr{peak_buf[2]});", ", PeakPtr{peak_buf[2]});"));
        assert!(!ok && log.contains("a launch passes as many arguments as its kernel takes"), "{log}");
    }
}
