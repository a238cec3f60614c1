//! The CUDA backend of peak, and HIP on NVIDIA GPUs.
//!
//! - [`CudaBackend`] implements [`peak_backend::Backend`] on the driver API: NVRTC
//!   compiles in process to a cubin for the device's own architecture, kernels launch
//!   with `cuLaunchKernel` on one stream and are timed with CUDA events. Everything is
//!   loaded at run time through cudarc, so peak builds and starts where there is no CUDA;
//!   [`CudaBackend::new`] then says so with a hint ([`libs`] explains the search).
//! - [`CudaBackend::hip`] runs HIP source on the same path, through the translation
//!   prelude in [`hip`], which also compile-checks HIP for AMD with `hipcc`.
//! - [`compile_only`] compiles every variant of a context with NVRTC alone, no GPU
//!   needed, and reports registers, shared memory and spills: `peak compile`.
//! - [`offline`] is a backend with no device: NVRTC for a named architecture and that
//!   architecture's limits, so a compile-only worker can check what a deferred apply
//!   wrote (`peak apply --defer`).
//! - [`baseline`] times cuBLASLt on a context's `[kernel.matmul]` GEMM (its layouts, types
//!   and fused epilogue) in the same process as the context's own kernel: `peak baseline`.
//!
//! Launch-script functions this backend adds: `cuda_max_dynamic_shared(kernel, bytes)`
//! and `cuda_tensor_map(buffer, dtype, dims, strides, box, swizzle)` ([`tensor_map`]).
//!
//! Kernels must be declared `extern "C"`: launch scripts name them as written, and the
//! driver knows C++ kernels only by their mangled names.

pub mod backend;
pub mod compile_only;
pub mod driver;
pub mod hip;
pub mod libs;
pub mod nvrtc;
pub mod offline;
pub mod tensor_map;

pub use backend::{CudaBackend, baseline};
pub use nvrtc::{Arch, Dialect};
pub use offline::OfflineBackend;
