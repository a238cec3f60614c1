use thiserror::Error;

/// What a backend can report. A failed variant is a result, never an abort: the runner
/// turns these into verdicts (compile-failed, launch-failed, invalid-config, ...).
#[derive(Debug, Error, Clone)]
pub enum BackendError {
    /// The backend's library or driver is not there. `hint` says how to get it.
    #[error("{what} is not available: {reason}\nhint: {hint}")]
    Unavailable { what: String, reason: String, hint: String },

    #[error("compilation failed ({options}):\n{log}")]
    Compile { log: String, options: String },

    /// The configuration cannot run on this device (too many threads, too much shared
    /// memory, ...). Pruned, not a failure of the kernel.
    #[error("invalid configuration: {0}")]
    InvalidConfig(String),

    #[error("launch of `{kernel}` failed: {message}")]
    Launch { kernel: String, message: String },

    /// A fault while the device ran (illegal address, ...). Some backends cannot recover
    /// in-process after one; the worker that ran it is restarted.
    #[error("device fault: {0}")]
    Fault(String),

    #[error("{0} is not supported")]
    Unsupported(String),

    #[error("out of device memory allocating {bytes} bytes")]
    OutOfMemory { bytes: usize },

    #[error("internal backend error: {0}")]
    Internal(String),
}
