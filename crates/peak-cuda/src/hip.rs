//! HIP: on NVIDIA GPUs through a translation prelude onto the CUDA backend, and
//! compile-checked for AMD (gfx90a) with the system `hipcc` where one is installed.
//!
//! HIP on NVIDIA is, by AMD's own design, a thin layer of names over CUDA. The prelude
//! supplies that layer to NVRTC as in-memory headers (`hip/hip_runtime.h`,
//! `hip/hip_fp16.h`, `hip/hip_bf16.h`), so HIP source compiles unchanged: a context's
//! `#include <hip/hip_runtime.h>` finds the prelude, and a source that omits it still
//! gets it, as it would from hipcc. What it covers:
//!
//! - indexing: `hipThreadIdx_x`, `hipBlockIdx_x`, `hipBlockDim_x`, `hipGridDim_x` (and
//!   `_y`, `_z`); the CUDA spellings (`threadIdx.x` ...) work as on AMD;
//! - memory: `__shared__`, `__constant__`, `HIP_DYNAMIC_SHARED(type, name)`,
//!   `__restrict__`;
//! - synchronisation: `__syncthreads`, `__syncthreads_count/and/or`, `__threadfence`,
//!   `__threadfence_block`, `__syncwarp`;
//! - warp functions without masks, HIP style: `__shfl`, `__shfl_up`, `__shfl_down`,
//!   `__shfl_xor`, `__ballot` (64-bit result, as on HIP), `__any`, `__all`, `__lane_id`;
//!   the `_sync` variants are CUDA's own;
//! - half types: `__half`, `__half2`, `half`, and every `hip_fp16.h` function, which has
//!   the same name in `cuda_fp16.h`; `__hip_bfloat16` as `__nv_bfloat16`.
//!
//! Limits: the warp is 32 lanes (`warpSize` is 32, not AMD's 64); AMD builtins
//! (`__builtin_amdgcn_*`, `__ockl_*`) and the `hip_bfloat16` class do not exist; the
//! second argument of `__launch_bounds__` means blocks per multiprocessor here, not HIP's
//! minimum warps per execution unit; host API calls (`hipMalloc` ...) have no place in
//! device code and are not provided.

use std::path::PathBuf;
use std::process::Command;

use peak_backend::{BackendError, CompileRequest, KernelResources};
use serde::{Deserialize, Serialize};

/// The prelude's headers, as (include name, text), handed to NVRTC.
pub const HEADERS: &[(&str, &str)] = &[
    ("hip/hip_runtime.h", HIP_RUNTIME),
    ("hip/hip_runtime_api.h", "#pragma once\n#include <hip/hip_runtime.h>\n"),
    ("hip/hip_fp16.h", HIP_FP16),
    ("hip/hip_bf16.h", HIP_BF16),
];

const HIP_RUNTIME: &str = r#"#pragma once
// peak's HIP-on-NVIDIA prelude (NVRTC). See crates/peak-cuda/src/hip.rs for its coverage.
#define __HIP_PLATFORM_NVIDIA__ 1
#define __HIP_PLATFORM_NVCC__ 1
#define __HIPCC__ 1
#define __HIP__ 1
#ifdef __CUDA_ARCH__
#define __HIP_DEVICE_COMPILE__ 1
#endif

#define hipThreadIdx_x (threadIdx.x)
#define hipThreadIdx_y (threadIdx.y)
#define hipThreadIdx_z (threadIdx.z)
#define hipBlockIdx_x (blockIdx.x)
#define hipBlockIdx_y (blockIdx.y)
#define hipBlockIdx_z (blockIdx.z)
#define hipBlockDim_x (blockDim.x)
#define hipBlockDim_y (blockDim.y)
#define hipBlockDim_z (blockDim.z)
#define hipGridDim_x (gridDim.x)
#define hipGridDim_y (gridDim.y)
#define hipGridDim_z (gridDim.z)

#define HIP_DYNAMIC_SHARED(type, var) extern __shared__ type var[];
#define HIP_DYNAMIC_SHARED_ATTRIBUTE
#define __HIP_ARCH_HAS_WARP_SHUFFLE__ 1
#define __HIP_ARCH_HAS_WARP_BALLOT__ 1
#define __HIP_ARCH_HAS_SHARED_INT32_ATOMICS__ 1
#define __HIP_ARCH_HAS_GLOBAL_INT32_ATOMICS__ 1
#define __HIP_ARCH_HAS_FLOAT_ATOMIC_ADD__ 1

#define __PEAK_HIP_FULL_MASK 0xffffffffu

// The half types first: cuda_fp16.h declares deprecated mask-less shuffles of its own,
// which must be seen before the macros below rename HIP's.
#include <cuda_fp16.h>
#include <cuda_bf16.h>

// HIP's mask-less warp functions. CUDA still declares deprecated functions of these
// names, which do not run on sm_70 and later, so HIP's names are macros onto new ones.
template <typename T> __device__ __forceinline__ T __peak_hip_shfl(T var, int src_lane, int width = warpSize) {
  return __shfl_sync(__PEAK_HIP_FULL_MASK, var, src_lane, width);
}
template <typename T> __device__ __forceinline__ T __peak_hip_shfl_up(T var, unsigned int delta, int width = warpSize) {
  return __shfl_up_sync(__PEAK_HIP_FULL_MASK, var, delta, width);
}
template <typename T> __device__ __forceinline__ T __peak_hip_shfl_down(T var, unsigned int delta, int width = warpSize) {
  return __shfl_down_sync(__PEAK_HIP_FULL_MASK, var, delta, width);
}
template <typename T> __device__ __forceinline__ T __peak_hip_shfl_xor(T var, int lane_mask, int width = warpSize) {
  return __shfl_xor_sync(__PEAK_HIP_FULL_MASK, var, lane_mask, width);
}
// HIP's ballot is 64 bits wide (AMD's wave64); the upper half is zero on NVIDIA.
__device__ __forceinline__ unsigned long long __peak_hip_ballot(int predicate) {
  return (unsigned long long)__ballot_sync(__PEAK_HIP_FULL_MASK, predicate);
}
__device__ __forceinline__ int __peak_hip_any(int predicate) { return __any_sync(__PEAK_HIP_FULL_MASK, predicate); }
__device__ __forceinline__ int __peak_hip_all(int predicate) { return __all_sync(__PEAK_HIP_FULL_MASK, predicate); }
#define __shfl(...) __peak_hip_shfl(__VA_ARGS__)
#define __shfl_up(...) __peak_hip_shfl_up(__VA_ARGS__)
#define __shfl_down(...) __peak_hip_shfl_down(__VA_ARGS__)
#define __shfl_xor(...) __peak_hip_shfl_xor(__VA_ARGS__)
#define __ballot(p) __peak_hip_ballot(p)
#define __any(p) __peak_hip_any(p)
#define __all(p) __peak_hip_all(p)

__device__ __forceinline__ unsigned int __lane_id() {
  unsigned int lane;
  asm volatile("mov.u32 %0, %%laneid;" : "=r"(lane));
  return lane;
}
typedef __nv_bfloat16 __hip_bfloat16;
typedef __nv_bfloat162 __hip_bfloat162;
"#;

/// hip_fp16.h's types and functions carry the same names in cuda_fp16.h, which the
/// runtime prelude includes; likewise for bf16.
const HIP_FP16: &str = "#pragma once\n#include <hip/hip_runtime.h>\n";
const HIP_BF16: &str = "#pragma once\n#include <hip/hip_runtime.h>\n";

/// The AMD target HIP examples are compile-checked for (MI200).
pub const DEFAULT_OFFLOAD_ARCH: &str = "gfx90a";

/// The hipcc to use: `PEAK_HIPCC`, else `hipcc` on the PATH.
pub fn hipcc_path() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("PEAK_HIPCC") {
        return Some(PathBuf::from(path));
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|d| d.join("hipcc")).find(|p| p.is_file())
}

/// What hipcc reported for one compile.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct HipccReport {
    pub offload_arch: String,
    /// hipcc's command line.
    pub command: Vec<String>,
    /// Per kernel: `registers` are VGPRs, `shared_bytes` is LDS, `local_bytes` is scratch
    /// per lane, spills are VGPR spills at 4 bytes each.
    pub kernels: Vec<KernelResources>,
    /// Compiler messages other than the resource remarks.
    pub log: String,
}

/// Compile HIP device code for an AMD GPU with hipcc, device code only, and report each
/// kernel's resources. `Unavailable` when hipcc is not installed.
pub fn hipcc_check(request: &CompileRequest, offload_arch: &str) -> Result<HipccReport, BackendError> {
    let hipcc = hipcc_path().ok_or_else(|| BackendError::Unavailable {
        what: "hipcc".into(),
        reason: "no hipcc on the PATH (and PEAK_HIPCC is not set)".into(),
        hint: "on Debian or Ubuntu: `apt-get install hipcc`".into(),
    })?;
    let dir = tempfile::tempdir().map_err(|e| BackendError::Internal(format!("temporary folder for hipcc: {e}")))?;
    let source = dir.path().join("kernel.hip");
    let file = request.file_name.replace(['"', '\\'], "_");
    std::fs::write(&source, format!("#include <hip/hip_runtime.h>\n#line 1 \"{file}\"\n{}", request.source))
        .map_err(|e| BackendError::Internal(format!("writing {}: {e}", source.display())))?;
    let mut args: Vec<String> =
        vec![format!("--offload-arch={offload_arch}"), "--cuda-device-only".into(), "-O3".into(), "-c".into(), "-Rpass-analysis=kernel-resource-usage".into()];
    args.extend(request.defines.iter().map(|(k, v)| format!("-D{k}={v}")));
    args.push(source.display().to_string());
    args.push("-o".into());
    args.push(dir.path().join("kernel.o").display().to_string());
    let output = Command::new(&hipcc).args(&args).output().map_err(|e| BackendError::Unavailable {
        what: "hipcc".into(),
        reason: format!("running {}: {e}", hipcc.display()),
        hint: "check the hipcc installation".into(),
    })?;
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    let mut command = vec![hipcc.display().to_string()];
    command.extend(args);
    if !output.status.success() {
        return Err(BackendError::Compile { log: clean_log(&stderr), options: command.join(" ") });
    }
    let (log, kernels) = parse_resource_remarks(&stderr);
    Ok(HipccReport { offload_arch: offload_arch.to_string(), command, kernels, log })
}

/// Debian's hipcc asks rocm_agent_enumerator for GPUs after a failed compile, which prints
/// a Python traceback on machines without /sys/class/kfd; that is noise, not the error.
fn clean_log(stderr: &str) -> String {
    match stderr.find("Traceback (most recent call last)") {
        Some(i) if stderr[i..].contains("rocm_agent_enumerator") => stderr[..i].trim_end().to_string(),
        _ => stderr.trim_end().to_string(),
    }
}

/// Parse clang's `-Rpass-analysis=kernel-resource-usage` remarks:
///
/// ```text
/// k.hip:3:1: remark: Function Name: matmul [-Rpass-analysis=kernel-resource-usage]
/// k.hip:3:1: remark:     VGPRs: 11 [-Rpass-analysis=kernel-resource-usage]
/// ```
///
/// A remark's source line and caret follow each message; they are dropped with it.
pub fn parse_resource_remarks(stderr: &str) -> (String, Vec<KernelResources>) {
    const TAG: &str = "[-Rpass-analysis=kernel-resource-usage]";
    let mut kernels: Vec<KernelResources> = Vec::new();
    let mut log = String::new();
    let mut skip_context = 0;
    for line in clean_log(stderr).lines() {
        if let Some(body) = line.strip_suffix(TAG).and_then(|l| l.split_once("remark:")).map(|(_, b)| b.trim()) {
            // clang prints the source line and a caret under each remark.
            skip_context = 2;
            let Some((key, value)) = body.split_once(':') else { continue };
            let value = value.trim();
            if key == "Function Name" {
                kernels.push(KernelResources { name: value.to_string(), ..Default::default() });
                continue;
            }
            let Some(kernel) = kernels.last_mut() else { continue };
            let number = value.parse::<u32>().ok();
            match key {
                "VGPRs" => kernel.registers = number,
                "LDS Size [bytes/block]" => kernel.shared_bytes = number,
                "ScratchSize [bytes/lane]" => kernel.local_bytes = number,
                "VGPRs Spill" => {
                    kernel.spill_stores_bytes = number.map(|n| n * 4);
                    kernel.spill_loads_bytes = number.map(|n| n * 4);
                }
                _ => {}
            }
            continue;
        }
        if skip_context > 0 {
            skip_context -= 1;
            continue;
        }
        log.push_str(line);
        log.push('\n');
    }
    (log.trim_end().to_string(), kernels)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resource_remarks_become_kernel_resources() {
        let stderr = "k.hip:3:1: remark: Function Name: matmul [-Rpass-analysis=kernel-resource-usage]\n\
extern \"C\" __global__ void matmul(float* a) {\n\
^\n\
k.hip:3:1: remark:     SGPRs: 13 [-Rpass-analysis=kernel-resource-usage]\n\
extern \"C\" __global__ void matmul(float* a) {\n\
^\n\
k.hip:3:1: remark:     VGPRs: 11 [-Rpass-analysis=kernel-resource-usage]\n\
x\n^\n\
k.hip:3:1: remark:     ScratchSize [bytes/lane]: 16 [-Rpass-analysis=kernel-resource-usage]\n\
x\n^\n\
k.hip:3:1: remark:     VGPRs Spill: 2 [-Rpass-analysis=kernel-resource-usage]\n\
x\n^\n\
k.hip:3:1: remark:     LDS Size [bytes/block]: 4096 [-Rpass-analysis=kernel-resource-usage]\n\
x\n^\n\
k.hip:9:5: warning: unused variable 'q' [-Wunused-variable]\n";
        let (log, kernels) = parse_resource_remarks(stderr);
        assert_eq!(kernels.len(), 1);
        let k = &kernels[0];
        assert_eq!((k.name.as_str(), k.registers, k.shared_bytes, k.local_bytes, k.spill_stores_bytes), ("matmul", Some(11), Some(4096), Some(16), Some(8)));
        assert_eq!(log, "k.hip:9:5: warning: unused variable 'q' [-Wunused-variable]");
    }

    #[test]
    fn hipcc_traceback_noise_is_dropped_from_errors() {
        let stderr = "bad.hip:2:48: error: use of undeclared identifier 'x'\n1 error generated.\nTraceback (most recent call last):\n  File \"/usr/bin/rocm_agent_enumerator\", line 257\nFileNotFoundError: ...\n";
        assert_eq!(clean_log(stderr), "bad.hip:2:48: error: use of undeclared identifier 'x'\n1 error generated.");
    }
}
