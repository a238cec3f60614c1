//! The HLSL backend: HLSL compute shaders compiled to SPIR-V and run through Vulkan, on any
//! Vulkan GPU (the H200 included) and on the CPU through Mesa's lavapipe, which is what
//! CI runs.
//!
//! # Compiling
//! glslang (`glslangValidator -D -V -e ENTRY -S comp --target-env vulkan1.1
//! --hlsl-enable-16bit-types -DNAME=value...`) is the default compiler (Vulkan 1.1 /
//! SPIR-V 1.3, because glslang 12 emits invalid SPIR-V 1.5 for HLSL storage buffers);
//! DXC (`dxc -spirv -T cs_6_2 -fspv-target-env=vulkan1.2 ...`) is the second, chosen
//! with `PEAK_HLSL_COMPILER=dxc` or [`HlslOptions::compiler`]. Both run as subprocesses
//! on temporary files. Tuning parameters arrive as `-DNAME=value`, so
//! `[numthreads(BLOCK_X, BLOCK_Y, 1)]` takes its size from them. Every function marked `[numthreads(...)]` is an entry point and is
//! compiled to its own pipeline; a compile error carries the compiler's log, with line
//! numbers of the context's source file.
//!
//! # The launch convention
//! - **Kernel name = entry point**: `launch("main", ...)` runs the function `main`.
//! - **Grid** counts workgroups (as CUDA counts blocks): a launch is
//!   `vkCmdDispatch(grid)`. The **block** is fixed by `[numthreads]`; the launch's block
//!   must equal it (checked against the SPIR-V), else the launch fails and says both.
//! - **shared_bytes** must be 0: HLSL has no dynamic groupshared memory; size
//!   `groupshared` arrays with tuning defines instead.
//! - **Buffers**: binding `N` of descriptor set 0 receives the launch's `N`-th buffer
//!   argument (0-based, buffers only). glslang maps `register(tN)` and `register(uN)`
//!   both to binding `N`, so t and u registers share one numbering:
//!   `StructuredBuffer<float> A : register(t0); StructuredBuffer<float> B : register(t1);
//!   RWStructuredBuffer<float> C : register(u2);` for `launch(..., A, B, C, n)`.
//!   `[[vk::binding(N)]]` works too. Two resources on one binding are a compile error
//!   naming both. Only storage buffers (StructuredBuffer, RWStructuredBuffer,
//!   ByteAddressBuffer and their RW forms) are allowed.
//! - **Scalars** go in one push-constant block, `[[vk::push_constant]]
//!   ConstantBuffer<Params> p;` (the form glslang and DXC both accept), whose members receive the scalar arguments in launch
//!   order at the offsets the compiler laid out (i32/u32/f32: 4 bytes; i64: 8, aligned to
//!   8). Count and types are checked at launch. glslang ignores `[[vk::push_constant]]`
//!   on a plain `Params p;` and makes it a uniform buffer; that is a compile error saying
//!   so.
//! - **f16**: `half` is a 16-bit type (`--hlsl-enable-16bit-types`). Kernels that use it
//!   need shaderFloat16 and storageBuffer16BitAccess; peak enables them where the device
//!   has them, and a kernel needing a feature the device lacks fails with a clear error.
//!
//! # Execution model
//! Launches, fills, copies and timing events are recorded into a command buffer with a
//! memory barrier before each command (stream semantics, as in CUDA). The command buffer
//! is submitted at `synchronize`, `elapsed_ms`, `read` and `write`, or every
//! [`FLUSH_EVERY`] commands, so a thousand launches cost one submission. Events are
//! timestamp queries written after all earlier commands complete; `elapsed_ms` is the
//! device time between two of them (timestampPeriod applied). Buffers live in
//! device-local memory; where the host cannot map it (a discrete GPU) reads and writes go
//! through a host-visible staging buffer, and on lavapipe or an integrated GPU they are
//! mapped directly.
//!
//! The device is the first discrete GPU, else integrated GPU, else any Vulkan 1.2
//! device (lavapipe); `PEAK_VULKAN_DEVICE=N` picks device `N` of [`list_devices`].

mod backend;
mod compiler;
mod gpu;
mod pipeline;
mod reflect;
mod stream;

pub use backend::{HlslBackend, HlslOptions};
pub use compiler::{Compiler, CompilerKind, entry_points};
pub use gpu::{DEVICE_ENV, VulkanDevice, list_devices};
pub use pipeline::{BINDING_RULE, PUSH_RULE};

/// Commands recorded before the command buffer is submitted without waiting, so a long
/// plan neither waits for a sync point to start nor grows without bound.
pub const FLUSH_EVERY: usize = 1024;

/// Environment variable: seconds to wait for the device before reporting a fault.
pub const TIMEOUT_ENV: &str = "PEAK_HLSL_TIMEOUT_S";
