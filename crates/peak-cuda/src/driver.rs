//! Driver API results as [`BackendError`]s.
//!
//! Which CUDA errors mean what for a tuner:
//! - a launch the device cannot run as asked (too many threads, registers or shared
//!   memory) is an invalid configuration: pruned, not a failure of the kernel;
//! - an error while a kernel ran (illegal address, misaligned access, illegal
//!   instruction, trap, assert, time-out) is a fault; it is *sticky*: the CUDA context
//!   answers every later call with the same error, so only a new process recovers.

use std::ffi::CStr;

use cudarc::driver::sys::{self, CUresult};
use peak_backend::BackendError;

/// "CUDA_ERROR_ILLEGAL_ADDRESS (an illegal memory access was encountered)".
pub fn describe(status: CUresult) -> String {
    let mut name = std::ptr::null();
    let mut text = std::ptr::null();
    unsafe {
        sys::cuGetErrorName(status, &mut name);
        sys::cuGetErrorString(status, &mut text);
    }
    let read = |p: *const std::ffi::c_char| (!p.is_null()).then(|| unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned());
    match (read(name), read(text)) {
        (Some(n), Some(t)) => format!("{n} ({t})"),
        (Some(n), None) => n,
        _ => format!("{status:?}"),
    }
}

/// Errors that a kernel causes while it runs, after which the context is unusable.
pub fn is_fault(status: CUresult) -> bool {
    use CUresult::*;
    matches!(
        status,
        CUDA_ERROR_ILLEGAL_ADDRESS
            | CUDA_ERROR_LAUNCH_FAILED
            | CUDA_ERROR_MISALIGNED_ADDRESS
            | CUDA_ERROR_ILLEGAL_INSTRUCTION
            | CUDA_ERROR_INVALID_ADDRESS_SPACE
            | CUDA_ERROR_INVALID_PC
            | CUDA_ERROR_HARDWARE_STACK_ERROR
            | CUDA_ERROR_ASSERT
            | CUDA_ERROR_LAUNCH_TIMEOUT
            | CUDA_ERROR_ECC_UNCORRECTABLE
            | CUDA_ERROR_CONTEXT_IS_DESTROYED
    )
}

/// What a fault message says about the state it leaves behind.
pub const FAULT_SUFFIX: &str = "the CUDA context is now unusable: every later CUDA call in this process fails, so run the next variant in a new process";

/// A failed driver call during `what`, for calls that are neither launches nor allocations.
pub fn error(status: CUresult, what: &str) -> BackendError {
    if is_fault(status) {
        BackendError::Fault(format!("{what}: {}; {FAULT_SUFFIX}", describe(status)))
    } else {
        BackendError::Internal(format!("{what}: {}", describe(status)))
    }
}

/// `Ok` for success, else [`error`].
pub fn check(status: CUresult, what: &str) -> Result<(), BackendError> {
    if status == CUresult::CUDA_SUCCESS { Ok(()) } else { Err(error(status, what)) }
}

/// A failed `cuLaunchKernel` of `kernel`.
pub fn launch_error(status: CUresult, kernel: &str) -> BackendError {
    use CUresult::*;
    match status {
        CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES | CUDA_ERROR_INVALID_VALUE => {
            BackendError::InvalidConfig(format!("`{kernel}` cannot launch this way: {}", describe(status)))
        }
        s if is_fault(s) => error(s, &format!("launching `{kernel}`")),
        s => BackendError::Launch { kernel: kernel.to_string(), message: describe(s) },
    }
}
