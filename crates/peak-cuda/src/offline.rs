//! [`OfflineBackend`]: CUDA and HIP compiled for a named architecture with no GPU and no
//! driver, for deferred applies (`peak apply --defer`): kernels are written and
//! compile-checked where there is no GPU, then validated and tuned where there is one.
//!
//! It compiles through NVRTC exactly as [`CudaBackend`](crate::CudaBackend) does (the same
//! options, the same static shared-memory rule), and the launch script sees a nominal
//! device of that architecture: its flagship's multiprocessor count and per-block shared
//! memory. So configurations that the compiler, the launch script or the kernels'
//! resources rule out are pruned here as they would be on the GPU. Whatever needs a device
//! (memory, launches, timing) is refused.

use std::sync::Arc;

use peak_backend::{Backend, BackendError, BufferId, CompileRequest, DeviceInfo, EventId, KernelResources, Launch, Module, ScriptFunction};

use crate::backend::{check_static_shared, script_functions};
use crate::nvrtc::{self, Arch, Dialect};

/// The flagship of each architecture: compute capability digits, name, multiprocessors,
/// and the opt-in shared memory per block (what `MAX_SHARED_BYTES` is on a real device).
const NOMINAL: &[(&str, &str, u32, u32)] = &[
    ("70", "V100", 80, 96 * 1024),
    ("75", "T4", 40, 64 * 1024),
    ("80", "A100", 108, 163 * 1024),
    ("86", "A40", 84, 99 * 1024),
    ("89", "L40S", 142, 99 * 1024),
    ("90", "H100", 132, 227 * 1024),
    ("100", "B200", 148, 227 * 1024),
    ("120", "RTX 5090", 170, 99 * 1024),
];

/// Registers of one multiprocessor, and the most one block may hold: 64 K on every
/// architecture in [`NOMINAL`].
const REGISTERS: u32 = 64 * 1024;
/// Registers are given to warps in units of this many.
const REGISTER_UNIT: u32 = 256;
const MAX_THREADS_PER_BLOCK: u32 = 1024;
const WARP: u32 = 32;

pub struct OfflineBackend {
    info: DeviceInfo,
    dialect: Dialect,
    arch: Arch,
}

impl OfflineBackend {
    /// Compile `dialect` for `arch`. Fails when NVRTC is missing (with the hint to install
    /// it) or when peak does not know the architecture's limits.
    pub fn new(dialect: Dialect, arch: Arch) -> Result<Self, BackendError> {
        let digits = arch.as_str().trim_start_matches("sm_").trim_end_matches(['a', 'f']);
        let Some(&(_, flagship, compute_units, max_shared_bytes)) = NOMINAL.iter().find(|(d, ..)| *d == digits) else {
            let known: Vec<String> = NOMINAL.iter().map(|(d, ..)| format!("sm_{d}")).collect();
            return Err(BackendError::Unavailable {
                what: format!("a compile-only target for {arch}"),
                reason: format!("peak knows the limits of {} only", known.join(", ")),
                hint: "pass --arch with one of those (an `a` suffix, such as sm_90a, is allowed)".into(),
            });
        };
        let nvrtc = nvrtc::version()?;
        let info = DeviceInfo {
            backend: match dialect {
                Dialect::Cuda => "cuda".into(),
                Dialect::Hip => "hip".into(),
            },
            name: format!("compile only, {flagship} limits"),
            driver: format!("NVRTC {nvrtc}{}, no device", if dialect == Dialect::Hip { " / HIP prelude" } else { "" }),
            arch: arch.to_string(),
            compute_units,
            max_threads_per_block: MAX_THREADS_PER_BLOCK,
            max_shared_bytes,
            warp_size: WARP,
            global_memory_bytes: 0,
        };
        Ok(OfflineBackend { info, dialect, arch })
    }
}

/// The largest block a kernel using `registers` per thread can launch with, as the driver
/// would report it: whole warps, each given registers in units of [`REGISTER_UNIT`].
fn max_threads(registers: u32) -> u32 {
    let per_warp = (registers * WARP).div_ceil(REGISTER_UNIT) * REGISTER_UNIT;
    if per_warp == 0 {
        return MAX_THREADS_PER_BLOCK;
    }
    (REGISTERS / per_warp * WARP).min(MAX_THREADS_PER_BLOCK)
}

impl Backend for OfflineBackend {
    fn device(&self) -> &DeviceInfo {
        &self.info
    }

    fn compile(&self, request: &CompileRequest) -> Result<Module, BackendError> {
        let cubin = nvrtc::compile(request, self.dialect, &self.arch)?;
        check_static_shared(&cubin.kernels)?;
        let kernels: Vec<KernelResources> =
            cubin.kernels.into_iter().map(|k| KernelResources { max_threads_per_block: k.registers.map(max_threads), ..k }).collect();
        Ok(Module { handle: Arc::new(()), log: cubin.log, kernels })
    }

    fn alloc(&self, _bytes: usize) -> Result<BufferId, BackendError> {
        Err(no_device("allocating memory"))
    }
    fn free(&self, _buffer: BufferId) {}
    fn write(&self, _buffer: BufferId, _data: &[u8]) -> Result<(), BackendError> {
        Err(no_device("writing memory"))
    }
    fn read(&self, _buffer: BufferId, _out: &mut [u8]) -> Result<(), BackendError> {
        Err(no_device("reading memory"))
    }
    fn copy(&self, _src: BufferId, _dst: BufferId, _bytes: usize) -> Result<(), BackendError> {
        Err(no_device("copying memory"))
    }
    fn launch(&self, _module: &Module, _launch: &Launch) -> Result<(), BackendError> {
        Err(no_device("launching a kernel"))
    }
    fn record_event(&self) -> Result<EventId, BackendError> {
        Err(no_device("timing"))
    }
    fn elapsed_ms(&self, _start: EventId, _end: EventId) -> Result<f64, BackendError> {
        Err(no_device("timing"))
    }
    fn synchronize(&self) -> Result<(), BackendError> {
        Err(no_device("synchronizing"))
    }
    fn script_functions(&self) -> Vec<ScriptFunction> {
        script_functions()
    }
}

fn no_device(what: &str) -> BackendError {
    BackendError::Unsupported(format!("{what} on a compile-only target"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_block_limit_follows_the_register_use() {
        assert_eq!(max_threads(32), 1024);
        assert_eq!(max_threads(64), 1024);
        // 80 registers: 2560 per warp, 25 warps fit in 64 K.
        assert_eq!(max_threads(80), 800);
        assert_eq!(max_threads(255), 256);
    }

    #[test]
    fn unknown_architectures_are_refused_with_the_known_ones() {
        // Checked before NVRTC is looked for, so this holds with or without it.
        let err = OfflineBackend::new(Dialect::Cuda, Arch::parse("sm_61").unwrap()).err().unwrap().to_string();
        assert!(err.contains("sm_61") && err.contains("sm_90, sm_100"), "{err}");
    }
}
