use super::*;
use crate::Region;

const SOFTMAX: &str = r#"
// A row softmax. __global__ void commented_out(float* x) {}
extern "C" __global__ void softmax(const float* __restrict__ x, float* __restrict__ y, int rows, int cols) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r < rows) { for (int c = 0; c < cols; c++) y[r * cols + c] = x[r * cols + c]; }
}
/* __global__ void also_not(int* z) */
"#;

fn no_headers(_: &Path) -> Option<String> {
    None
}

fn signature_of(source: &str, backend: Language) -> Result<Vec<Param>, String> {
    let parsed = Parsed::new(source, backend, &no_headers)?;
    let (at, name) = parsed.choose(None, "k")?;
    parsed.parameters(at, name)
}

fn choices(sizes: &[(&str, &str)], inputs: &[(&str, &[i64])]) -> ImportChoices {
    ImportChoices {
        sizes: sizes.iter().map(|(a, s)| (a.to_string(), s.to_string())).collect(),
        inputs: inputs.iter().map(|(n, v)| (n.to_string(), v.to_vec())).collect(),
        ..ImportChoices::default()
    }
}

#[test]
fn signatures_give_arrays_and_scalar_inputs() {
    assert_eq!(kernel_names(SOFTMAX, Language::Cuda, &no_headers).unwrap(), ["softmax"], "commented-out kernels are not read");
    assert_eq!(
        signature_of(SOFTMAX, Language::Cuda).unwrap(),
        vec![
            Param::Array { name: "x".into(), dtype: DType::F32, read_only: true },
            Param::Array { name: "y".into(), dtype: DType::F32, read_only: false },
            Param::Scalar { name: "rows".into(), wide: false },
            Param::Scalar { name: "cols".into(), wide: false },
        ]
    );
    let cl = "__kernel void t(__global const half *a, __global unsigned int *b, const int n, float s) {}";
    let params = signature_of(cl, Language::Opencl).unwrap();
    assert_eq!(params[0], Param::Array { name: "a".into(), dtype: DType::F16, read_only: true });
    assert_eq!(params[1], Param::Array { name: "b".into(), dtype: DType::U32, read_only: false });
    assert_eq!(params[2], Param::Scalar { name: "n".into(), wide: false });
    assert_eq!(params[3], Param::Float { name: "s".into() });
    let err = signature_of("__global__ void k(double* a) {}", Language::Cuda).unwrap_err();
    assert!(err.contains("kernel `k`") && err.contains("`double`"), "{err}");
}

#[test]
fn fp8_pointers_import_as_e4m3_and_e5m2_with_their_header() {
    let gemm = "extern \"C\" __global__ void k(const __nv_fp8_e4m3* __restrict__ a, const __nv_fp8_e5m2* b, __nv_bfloat16* c, int n) {\n    int i = blockIdx.x * blockDim.x + threadIdx.x;\n    if (i < n) c[i] = __float2bfloat16(float(a[i]) * float(b[i]));\n}\n";
    let params = signature_of(gemm, Language::Cuda).unwrap();
    assert_eq!(params[0], Param::Array { name: "a".into(), dtype: DType::E4m3, read_only: true });
    assert_eq!(params[1], Param::Array { name: "b".into(), dtype: DType::E5m2, read_only: true });
    assert_eq!(params[2], Param::Array { name: "c".into(), dtype: DType::Bf16, read_only: false });
    let made = scaffold(gemm, Language::Cuda, "k.cu", &no_headers, &choices(&[("a", "n"), ("b", "n"), ("c", "n")], &[("n", &[1024])])).unwrap();
    let macros = made.regions.get(Region::Macros);
    assert!(macros.contains("#include <cuda_fp8.h>") && macros.contains("#include <cuda_bf16.h>"), "{macros}");
    assert!(made.notes.iter().any(|n| n.contains("added #include <cuda_fp8.h>: the kernel uses __nv_fp8_e4m3, __nv_fp8_e5m2")), "{:?}", made.notes);
    assert_eq!(made.manifest.arrays.iter().map(|a| a.dtype).collect::<Vec<_>>(), [DType::E4m3, DType::E5m2, DType::Bf16]);
}

#[test]
fn a_scaffold_asks_for_what_the_signature_lacks() {
    let mut c = ImportChoices::default();
    let err = scaffold(SOFTMAX, Language::Cuda, "softmax.cu", &no_headers, &c).unwrap_err();
    assert!(err.contains("--size x=EXPR --size y=EXPR") && err.contains("--input rows=256,1024 --input cols=256,1024"), "everything missing at once: {err}");
    c = choices(&[("x", "rows * cols"), ("y", "rows * cols")], &[("rows", &[64]), ("cols", &[128, 256])]);
    c.domain = Some("softmax".into());
    let made = scaffold(SOFTMAX, Language::Cuda, "softmax.cu", &no_headers, &c).unwrap();
    let manifest = &made.manifest;
    assert_eq!(manifest.kernel.domain(), Some("softmax"));
    assert_eq!((manifest.arrays[0].output, manifest.arrays[0].init), (false, Init::Random));
    assert_eq!((manifest.arrays[1].output, manifest.arrays[1].init), (true, Init::Zeros));
    assert_eq!(manifest.inputs["cols"].expand().unwrap(), vec![128, 256]);
    let host = made.regions.get(Region::Host);
    assert!(host.contains("launch(\"softmax\", ceil_div(rows, BLOCK_X), BLOCK_X, 0, x, y, rows, cols);"), "one thread per row: {host}");
    assert!(host.contains("y has rows * cols elements: each thread handles several"), "{host}");
    manifest.validate("peak.toml").unwrap();
    assert_eq!(made.regions.get(Region::Device).matches("extern \"C\"").count(), 1, "an extern \"C\" kernel is left as it is");

    let plain = scaffold("__global__ void k(float* y, int n) {}", Language::Cuda, "k.cu", &no_headers, &choices(&[("y", "n")], &[("n", &[64])])).unwrap();
    assert_eq!(plain.regions.get(Region::Device), "extern \"C\" __global__ void k(float* y, int n) {}\n", "peak finds kernels by their C name");

    c.outputs = Some(vec!["nope".into()]);
    assert!(scaffold(SOFTMAX, Language::Cuda, "softmax.cu", &no_headers, &c).unwrap_err().contains("no parameter `nope`"));
    c.outputs = None;
    c.inputs.insert("x".into(), vec![1]);
    let err = scaffold(SOFTMAX, Language::Cuda, "softmax.cu", &no_headers, &c).unwrap_err();
    assert!(err.contains("--input x: `x` is not an integer parameter") && err.contains("give its length with --size"), "{err}");
}

const SAXPY: &str = "__global__ void saxpy(int n, float a, const float* x, float* y) {\n    int i = blockIdx.x * blockDim.x + threadIdx.x;\n    if (i < n) y[i] = a * x[i] + y[i];\n}\n";

#[test]
fn float_parameters_take_values_written_into_the_launch() {
    let mut c = choices(&[("x", "n"), ("y", "n")], &[("n", &[1024])]);
    let err = scaffold(SAXPY, Language::Cuda, "saxpy.cu", &no_headers, &c).unwrap_err();
    assert!(err.contains("the value of float parameter a: --scalar a=VALUE"), "{err}");
    c.scalars.insert("a".into(), 2.0);
    let made = scaffold(SAXPY, Language::Cuda, "saxpy.cu", &no_headers, &c).unwrap();
    let host = made.regions.get(Region::Host);
    // The float is named in the launch and given its value in [scalars].
    assert!(host.contains("launch(\"saxpy\", ceil_div(n, BLOCK_X), BLOCK_X, 0, n, a, x, y);"), "{host}");
    assert_eq!(made.manifest.scalars.get("a"), Some(&2.0));
    let written = made.manifest.to_toml();
    assert!(written.contains("[scalars]\na = 2.0"), "{written}");
    assert_eq!(crate::Manifest::parse("peak.toml", &written).unwrap().scalars, made.manifest.scalars);
    // y is read before it is written: in place (output and inout), every run starts it from
    // its own random init; nothing is copied inside the timed run.
    assert!(!host.contains("copy("), "{host}");
    let y = made.manifest.arrays.iter().find(|a| a.name == "y").expect("y");
    assert_eq!((y.init, y.output, y.inout, y.size.as_str()), (Init::Random, true, true, "n"));
    assert!(y.seed.is_some_and(|seed| made.manifest.arrays.iter().all(|a| a.name == "y" || a.seed != Some(seed))), "a seed of its own");
    assert!(!made.manifest.arrays.iter().any(|a| a.name == "y_in"), "no second array");
    // --init y shapes what y starts from.
    c.shaping.insert("y".into(), crate::import::array_shaping("uniform").unwrap());
    let shaped = scaffold(SAXPY, Language::Cuda, "saxpy.cu", &no_headers, &c).unwrap();
    let init = |name: &str| shaped.manifest.arrays.iter().find(|a| a.name == name).expect("an array").init.kind();
    assert_eq!(init("y"), crate::init::InitKind::Uniform);
    c.scalars.insert("a".into(), f64::NAN);
    assert!(scaffold(SAXPY, Language::Cuda, "saxpy.cu", &no_headers, &c).unwrap_err().contains("finite"));
}

#[test]
fn float_literals_keep_their_point_and_parse_as_floats() {
    let engine = rhai::Engine::new();
    for (v, text) in [(1.0, "1.0"), (1e-5, "1.0e-5"), (0.5, "0.5"), (-3.25e20, "-3.25e20"), (2.5e-7, "2.5e-7")] {
        assert_eq!(float_literal(v), text);
        assert_eq!(engine.eval::<f64>(text).unwrap(), v, "{text}");
    }
}

#[test]
fn wide_integers_are_passed_as_64_bits() {
    let source = "__global__ void k(float* y, size_t n) { size_t i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = 0; }";
    let made = scaffold(source, Language::Cuda, "k.cu", &no_headers, &choices(&[("y", "n")], &[("n", &[64])])).unwrap();
    assert!(made.regions.get(Region::Host).contains("0, y, i64(n));"), "{}", made.regions.get(Region::Host));
}

/// A kernel file as people have it (written for this test): a local header with a typedef
/// and host helpers, host includes, a CPU reference, several kernels, a launcher and a main.
const WHOLE_FILE: &str = r#"/* Leading comment: keep me. */
#include <stdio.h>
#include <cuda_runtime.h>
#include <cooperative_groups.h>
#include "helpers.h"
namespace cg = cooperative_groups;

#define SCALE sqrtf(2.0f / M_PI)

void act_cpu(float* out, const float* inp, int N) { for (int i = 0; i < N; i++) out[i] = inp[i]; }

__device__ float twice(float x) { return 2.0f * x; }
__device__ float unused_helper(float x) { return x; }

// elementwise
__global__ void act_kernel1(floatX* out, const floatX* inp, int N) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < N) { out[i] = SCALE * twice((float)inp[i]) + (float)LANES * 0.0f - INFINITY * 0.0f; }
}

__global__ void act_kernel2(floatX* out, const floatX* inp, int N) {
    cg::thread_block block = cg::this_thread_block();
}

void act_forward1(floatX* out, const floatX* inp, int N, const int block_size) {
    act_kernel1<<<ceil_div(N, block_size), block_size>>>(out, inp, N);
    CHECK_CUDA(cudaGetLastError());
}

int main(int argc, char** argv) {
    float* d_out;
    CHECK_CUDA(cudaMalloc(&d_out, 1024 * sizeof(floatX)));
    return 0;
}
"#;

const HELPERS_H: &str = r#"#include <stdlib.h>
#define ENABLE_BF16
#define LANES 32U
#define CHECK_CUDA(call) (fail_on_error(call, __FILE__, __LINE__))
extern cudaDeviceProp device_info;
void fail_on_error(cudaError_t status, const char *file, int line) { if (status != cudaSuccess) exit(1); };
template<class T>
__host__ __device__ T ceil_div(T n, T d) { return (n + d - 1) / d; }
#if __CUDA_ARCH__ >= 800
#define BLOCKS_PER_SM 2
#else
#define BLOCKS_PER_SM 1
#endif
#if defined(ENABLE_BF16)
typedef __nv_bfloat16 floatX;
#else
typedef float floatX;
#endif
"#;

#[test]
fn a_whole_file_keeps_the_kernel_and_what_it_uses() {
    let read = |p: &Path| (p == Path::new("helpers.h")).then(|| HELPERS_H.to_string());
    let c = ImportChoices { kernel: Some("act_kernel1".into()), ..choices(&[("out", "N"), ("inp", "N")], &[("N", &[4096])]) };
    let made = scaffold(WHOLE_FILE, Language::Cuda, "act.cu", &read, &c).unwrap();
    assert_eq!(made.manifest.arrays[0].dtype, DType::Bf16, "floatX is followed through the header's typedef");
    let macros = made.regions.get(Region::Macros);
    let device = made.regions.get(Region::Device);
    assert!(macros.starts_with("/* Leading comment: keep me. */\n"), "{macros}");
    assert!(
        macros.contains("#include <cuda_bf16.h>") && macros.contains("#define SCALE sqrtf(2.0f / M_PI)") && macros.contains("#define LANES 32U"),
        "{macros}"
    );
    for gone in ["<stdio.h>", "<cuda_runtime.h>", "<cooperative_groups.h>", "CHECK_CUDA(call)", "BLOCKS_PER_SM"] {
        assert!(!macros.lines().any(|l| l.starts_with('#') && l.contains(gone)), "{gone} left out: {macros}");
    }
    assert_eq!(
        device,
        "typedef __nv_bfloat16 floatX;\n\n__device__ float twice(float x) { return 2.0f * x; }\n\n// elementwise\nextern \"C\" __global__ void act_kernel1(floatX* out, const floatX* inp, int N) {\n    int i = blockIdx.x * blockDim.x + threadIdx.x;\n    if (i < N) { out[i] = SCALE * twice((float)inp[i]) + (float)LANES * 0.0f - INFINITY * 0.0f; }\n}\n"
    );
    let notes = made.notes.join("\n");
    for said in [
        "left out #include <stdio.h>, <cuda_runtime.h>, <stdlib.h>: NVRTC compiles the device code alone",
        "left out #include <cooperative_groups.h>: the kernel does not use them",
        "added #include <cuda_bf16.h>: the kernel uses __nv_bfloat16",
        "took from helpers.h what the kernel uses: LANES, floatX",
        "host functions (fail_on_error, act_cpu, act_forward1, main)",
        "host variables (device_info)",
        "2 device declarations the kernel does not use",
        "the other kernels (act_kernel2)",
    ] {
        assert!(notes.contains(said), "notes say `{said}`:\n{notes}");
    }
    assert!(macros.contains(&format!("// - {}", made.notes[0])), "the notes are in the macros region: {macros}");
}

#[test]
fn a_template_kernel_is_refused_with_what_to_do() {
    let source = "template <int N>\n__global__ void k(float* y) { y[threadIdx.x] = N; }\n";
    let err = scaffold(source, Language::Cuda, "k.cu", &no_headers, &choices(&[("y", "64")], &[])).unwrap_err();
    assert!(err.contains("kernel `k` is a template") && err.contains("add a kernel that calls it"), "{err}");
}

#[test]
fn a_missing_local_header_is_named() {
    let source = "#include \"helpers.h\"\n__global__ void k(float* y, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = 0; }\n";
    let made = scaffold(source, Language::Cuda, "k.cu", &no_headers, &choices(&[("y", "n")], &[("n", &[64])])).unwrap();
    assert!(made.notes[0].contains("left out #include \"helpers.h\": it is not next to k.cu"), "{:?}", made.notes);
}

const GATHER: &str = "__kernel void gather(__global float* out, __global const int* ids, __global const float* table, int N, int C) {\n    int i = get_global_id(0);\n    if (i < N * C) out[i] = table[ids[i / C] * C + i % C];\n}\n";

#[test]
fn an_input_that_only_sizes_an_array_is_no_kernel_argument() {
    // The table's row count V is no parameter: the ids index it.
    let mut c = choices(&[("out", "N*C"), ("ids", "N"), ("table", "V*C")], &[("N", &[5]), ("C", &[7]), ("V", &[11])]);
    c.validation.insert("V".into(), vec![3]);
    let made = scaffold(GATHER, Language::Opencl, "gather.cl", &no_headers, &c).unwrap();
    assert_eq!(made.manifest.inputs.keys().collect::<Vec<_>>(), ["N", "C", "V"]);
    assert!(made.manifest.validation.inputs.contains_key("V"));
    let host = made.regions.get(Region::Host);
    assert!(host.contains("0, out, ids, table, N, C);"), "V is not passed: {host}");
    crate::Manifest::parse("peak.toml", &made.manifest.to_toml()).unwrap();
    // Named only by an --init range, it is still an input.
    let mut c = choices(&[("out", "N*C"), ("ids", "N"), ("table", "64*C")], &[("N", &[5]), ("C", &[7]), ("V", &[11])]);
    c.shaping.insert("ids".into(), crate::import::array_shaping("range = [0, \"V\"]").unwrap());
    assert!(scaffold(GATHER, Language::Opencl, "gather.cl", &no_headers, &c).unwrap().manifest.inputs.contains_key("V"));
    // Named by nothing, it is a typo.
    let c = choices(&[("out", "N*C"), ("ids", "N"), ("table", "64*C")], &[("N", &[5]), ("C", &[7]), ("W", &[11])]);
    let err = scaffold(GATHER, Language::Opencl, "gather.cl", &no_headers, &c).unwrap_err();
    assert!(err.contains("no parameter `W`") && err.contains("--size"), "{err}");
}
