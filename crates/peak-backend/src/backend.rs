//! The one trait every backend implements.
//!
//! The core never names a backend: it compiles, allocates, copies, launches and times
//! through this trait. A backend is `Send + Sync` because the tuner compiles variants on
//! every core at once; launches, copies and timing happen on one thread at a time.

use std::any::Any;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::error::BackendError;
use crate::plan::BackendOp;

/// Facts about the device that reports and launch scripts use.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeviceInfo {
    /// Backend name: "opencl", "cuda", "hlsl", ...
    pub backend: String,
    /// Device name as the driver reports it.
    pub name: String,
    /// Driver / platform / compiler versions; part of every cache key.
    pub driver: String,
    /// Architecture tag the compiler targets (e.g. "sm_90"), or "" where there is none.
    pub arch: String,
    pub compute_units: u32,
    pub max_threads_per_block: u32,
    pub max_shared_bytes: u32,
    pub warp_size: u32,
    pub global_memory_bytes: u64,
}

/// What the device compiler gets: the macros and device regions, and the tuning
/// parameters as `#define NAME value`.
#[derive(Debug, Clone, PartialEq)]
pub struct CompileRequest {
    pub source: String,
    pub defines: Vec<(String, String)>,
    /// A file name for compiler messages, so a log line points at the context's source.
    pub file_name: String,
}

/// Resource use of one compiled kernel, where the compiler reports it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct KernelResources {
    pub name: String,
    pub registers: Option<u32>,
    pub shared_bytes: Option<u32>,
    pub local_bytes: Option<u32>,
    pub spill_stores_bytes: Option<u32>,
    pub spill_loads_bytes: Option<u32>,
    pub max_threads_per_block: Option<u32>,
}

/// A compiled program. `handle` is the backend's own object; only the backend that made
/// it looks inside.
#[derive(Clone)]
pub struct Module {
    pub handle: Arc<dyn Any + Send + Sync>,
    /// The compiler's messages (warnings), kept even on success.
    pub log: String,
    pub kernels: Vec<KernelResources>,
}

impl std::fmt::Debug for Module {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Module").field("kernels", &self.kernels).finish_non_exhaustive()
    }
}

impl Module {
    /// The backend's handle, or an error if a module from another backend was passed in.
    pub fn downcast<T: Any + Send + Sync>(&self) -> Result<&T, BackendError> {
        self.handle.downcast_ref::<T>().ok_or_else(|| BackendError::Internal("module belongs to another backend".into()))
    }
}

/// A device buffer, named by the backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BufferId(pub u64);

/// A device event for timing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EventId(pub u64);

/// A kernel argument, by value.
#[derive(Debug, Clone, PartialEq)]
pub enum KernelArg {
    Buffer(BufferId),
    I32(i32),
    U32(u32),
    I64(i64),
    F32(f32),
    /// An opaque by-value struct, such as a CUDA tensor map (128 bytes, 64-byte aligned).
    Bytes(Vec<u8>),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Launch {
    pub kernel: String,
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub shared_bytes: u32,
    pub args: Vec<KernelArg>,
}

/// When a backend's own launch-script function takes effect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpPhase {
    /// Once, after compiling and before any run (e.g. raising a kernel's shared-memory limit).
    Setup,
    /// On every run, in script order with the launches (e.g. a backend-specific clear).
    EveryRun,
    /// Produces a kernel argument (e.g. a Hopper tensor map built on the host).
    Argument,
}

/// A function a backend adds to the launch-script API. Calls are recorded in the launch
/// plan as [`BackendOp`]s and carried out by [`Backend::run_op`] / [`Backend::op_argument`].
#[derive(Debug, Clone, PartialEq)]
pub struct ScriptFunction {
    pub name: &'static str,
    pub arity: usize,
    pub phase: OpPhase,
    pub doc: &'static str,
}

/// Resolves the plan's buffer references to device buffers while a plan runs.
pub type BufferLookup<'a> = dyn Fn(&crate::plan::BufRef) -> BufferId + 'a;

pub trait Backend: Send + Sync {
    fn device(&self) -> &DeviceInfo;

    /// Compile device code. A compile error keeps the full log and the options used.
    fn compile(&self, request: &CompileRequest) -> Result<Module, BackendError>;

    fn alloc(&self, bytes: usize) -> Result<BufferId, BackendError>;
    fn free(&self, buffer: BufferId);
    fn write(&self, buffer: BufferId, data: &[u8]) -> Result<(), BackendError>;
    fn read(&self, buffer: BufferId, out: &mut [u8]) -> Result<(), BackendError>;
    fn copy(&self, src: BufferId, dst: BufferId, bytes: usize) -> Result<(), BackendError>;

    /// Fill a buffer with a repeated element pattern. The default writes from the host;
    /// backends with a device-side fill override it.
    fn fill(&self, buffer: BufferId, pattern: &[u8], bytes: usize) -> Result<(), BackendError> {
        let mut data = pattern.repeat(bytes / pattern.len().max(1));
        data.resize(bytes, 0);
        self.write(buffer, &data)
    }

    /// Enqueue one kernel launch. Errors that the launch reports at once (bad
    /// configuration, too many resources) come back here; faults during execution come
    /// back from the next `synchronize`.
    fn launch(&self, module: &Module, launch: &Launch) -> Result<(), BackendError>;

    /// Record an event in the device's stream, for timing.
    fn record_event(&self) -> Result<EventId, BackendError>;
    /// Milliseconds between two recorded events; waits for the second. Frees both.
    fn elapsed_ms(&self, start: EventId, end: EventId) -> Result<f64, BackendError>;

    fn synchronize(&self) -> Result<(), BackendError>;

    /// Functions this backend adds to the launch-script API. None by default.
    fn script_functions(&self) -> Vec<ScriptFunction> {
        Vec::new()
    }

    /// Carry out a `Setup` or `EveryRun` op recorded by the launch script.
    fn run_op(&self, _module: &Module, op: &BackendOp, _buffers: &BufferLookup) -> Result<(), BackendError> {
        Err(BackendError::Unsupported(format!("{}() on {}", op.name, self.device().backend)))
    }

    /// Build the kernel argument an `Argument` op stands for.
    fn op_argument(&self, _module: &Module, op: &BackendOp, _buffers: &BufferLookup) -> Result<KernelArg, BackendError> {
        Err(BackendError::Unsupported(format!("{}() on {}", op.name, self.device().backend)))
    }

    /// The bytes of the device's last-level cache, which [`crate::timing`] evicts before
    /// every timed run; `None` where the backend does not know it (nothing is flushed
    /// then, and input sets rotate instead).
    fn cache_bytes(&self) -> Option<u64> {
        None
    }

    /// The vendor library's call doing the work `ctx` names for `params` (cuBLASLt for a
    /// `[kernel.matmul]` GEMM on CUDA), on the runner's inputs for `options.data_seed`,
    /// timed by [`crate::timing::time_runs`] as `options` says. `None` where this backend
    /// has no library for it (the default).
    fn vendor_call(
        &self,
        _ctx: &peak_spec::Context,
        _params: &peak_spec::ExecParams,
        _options: &crate::measurement::RunOptions,
    ) -> Option<Result<crate::measurement::VendorRun, BackendError>> {
        None
    }
}
