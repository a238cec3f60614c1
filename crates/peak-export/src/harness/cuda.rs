//! The CUDA and HIP harness: `harness.cu` for nvcc, `harness.hip` for hipcc (the same
//! program on the HIP runtime API). It includes the kernel file, so the kernels and the
//! harness are one translation unit and every launch is a checked `<<<grid, block,
//! shared>>>` call: the compiler checks the argument count and scalar types against the
//! kernel's signature. Buffers pass through `PeakPtr`, which converts to any pointer type
//! the kernel declares. Fills run a small fill kernel (`cudaMemset` is bytewise), copies
//! are device-to-device `cudaMemcpyAsync`, and each run is timed between two events.

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
            Api::Cuda => format!("nvcc -O3 -std=c++17 {} -o harness harness.cu", nvcc_target(arch)),
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
    let mut c = String::new();
    c.push_str(&header(input, &build));
    c.push_str(&api.runtime());
    if !s.tensor_maps.is_empty() {
        c.push_str("#include <cuda.h>\n");
    }
    c.push_str(super::COMMON_C);
    c.push_str(&format!("\n/* The kernel, with its tuning configuration. */\n#include \"{}\"\n", input.kernel_file));
    c.push_str(CUDA_HELPERS);
    if !s.tensor_maps.is_empty() {
        c.push_str(TENSOR_MAP_HELPERS);
        c.push_str(&format!("static PeakMap peak_maps[{}];\n", s.tensor_maps.len()));
    }

    c.push_str("\n/* One run of the launch sequence. */\nstatic void peak_run(void **peak_buf) {\n");
    c.push_str(&launch_steps(s, &|k| k.to_string(), "peak_maps"));
    c.push_str("}\n\nint main(int argc, char **argv) {\n    peak_options opt = peak_parse(argc, argv);\n");
    c.push_str("    cudaDeviceProp prop;\n    PEAK_CUDA(cudaGetDeviceProperties(&prop, 0));\n");
    for op in &s.setup {
        let ExportSetup::MaxDynamicShared { kernel, bytes } = op;
        c.push_str(&format!("    PEAK_CUDA(cudaFuncSetAttribute((const void *){kernel}, cudaFuncAttributeMaxDynamicSharedMemorySize, {bytes}));\n"));
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
            "  The kernel file is #included by harness.cu; nvcc compiles both. -gencode names the architecture\n  peak compiled for (its `a` or `f` suffix included: wgmma, setmaxnreg and multicast need it), and\n  nothing else; for another GPU, change both compute_XY and sm_XY.\n"
        }
        Api::Hip => "  The kernel file is #included by harness.hip; hipcc compiles both (add --offload-arch=gfxNNNN).\n",
    };
    let mut files = vec![(api.harness_file().to_string(), c)];
    files.extend(build_files(&build, &[api.harness_file(), input.kernel_file]));
    files.push(("README.txt".to_string(), readme(input, api.harness_file(), &build, &run, notes)));
    Bundle { files, build, run }
}

/// The body of one run of `s`: each step as CUDA (HIP through the name mapping), kernel
/// `k` called as `kernel(k)`, tensor map `i` passed as `maps[i]`.
pub(crate) fn launch_steps(s: &crate::launch::LaunchSequence, kernel: &dyn Fn(&str) -> String, maps: &str) -> String {
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
                c.push_str(&format!(
                    "    {}<<<dim3({}, {}, {}), dim3({}, {}, {}), {shared_bytes}>>>({});\n    PEAK_CUDA(cudaGetLastError());\n",
                    kernel(name),
                    grid[0],
                    grid[1],
                    grid[2],
                    block[0],
                    block[1],
                    block[2],
                    args.join(", ")
                ));
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
        assert_eq!(Api::Cuda.build(Some("sm_90a")), "nvcc -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a -o harness harness.cu");
        assert_eq!(nvcc_target(Some("sm_80")), "-gencode arch=compute_80,code=sm_80");
        assert_eq!(nvcc_target(Some("sm_100f")), "-gencode arch=compute_100f,code=sm_100f");
        assert_eq!(nvcc_target(Some("sm_120a")), "-gencode arch=compute_120a,code=sm_120a");
        // Not a real architecture: nvcc picks the local GPU's.
        for unknown in [None, Some(""), Some("gfx90a"), Some("sm_9"), Some("sm_90x"), Some("compute_90a")] {
            assert_eq!(nvcc_target(unknown), "-arch=native", "{unknown:?}");
        }
        assert_eq!(Api::Hip.build(Some("sm_90a")), "hipcc -O3 -std=c++17 -o harness harness.hip");
    }
}
