//! A speed-of-light yardstick that needs no vendor library: a memory-bound kernel is
//! judged against a device-to-device copy of the same bytes, timed the same way
//! ([`crate::timing`]) on the same device in the same process.
//!
//! "The same bytes": a kernel that reads R bytes and writes W moves R + W; a copy of
//! (R + W) / 2 bytes moves as much (it reads and writes each byte once). Arrays count by
//! their manifest role: inputs are read, outputs written, `inout` arrays both.
//!
//! Every checkpoint records one yardstick at its headline inputs, timed in a worker by
//! [`measure`] (a worker job with [`crate::worker::Job::yardstick`] set): the vendor
//! library's call where the context names the work one does ([`Backend::vendor_call`]:
//! cuBLASLt for a `[kernel.matmul]` GEMM on CUDA and HIP), else this copy.

use peak_spec::{Context, ExecParams};
use serde::{Deserialize, Serialize};

use crate::backend::Backend;
use crate::error::BackendError;
pub use crate::measurement::VendorRun;
use crate::measurement::{RunOptions, Timed};
use crate::timing::time_runs;

/// The bytes a kernel moves at one execution parameter, from its manifest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Traffic {
    pub read_bytes: u64,
    pub written_bytes: u64,
}

impl Traffic {
    pub fn of(ctx: &Context, params: &ExecParams) -> Result<Traffic, String> {
        let (mut read_bytes, mut written_bytes) = (0u64, 0u64);
        for array in &ctx.manifest.arrays {
            let count =
                ctx.eval_input_expr(&array.size, params).ok_or_else(|| format!("array {}: size `{}` does not evaluate at {params}", array.name, array.size))?;
            let bytes = count.max(0) as u64 * array.dtype.size_bytes() as u64;
            if array.output || array.inout {
                written_bytes += bytes;
            }
            if !array.output || array.inout {
                read_bytes += bytes;
            }
        }
        Ok(Traffic { read_bytes, written_bytes })
    }

    pub fn total(&self) -> u64 {
        self.read_bytes + self.written_bytes
    }

    /// The copy that moves as many bytes: half of them, read once and written once.
    pub fn copy_bytes(&self) -> u64 {
        self.total().div_ceil(2)
    }
}

/// Device-to-device copies of `bytes`, timed as every time in peak is
/// ([`crate::timing::time_runs`]: warm-up, cache flushed, device events).
pub fn time_copy(backend: &dyn Backend, bytes: usize, options: &RunOptions) -> Result<Timed, BackendError> {
    // Whole 4-byte words: device fills and copies want them on every backend.
    let bytes = bytes.max(4).next_multiple_of(4);
    let src = backend.alloc(bytes)?;
    let dst = match backend.alloc(bytes) {
        Ok(dst) => dst,
        Err(e) => {
            backend.free(src);
            return Err(e);
        }
    };
    let timed = backend.fill(src, &1.0f32.to_le_bytes(), bytes).and_then(|()| time_runs(backend, options, 1, |_| backend.copy(src, dst, bytes)));
    backend.free(src);
    backend.free(dst);
    timed
}

/// Which yardstick a worker job asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Ask {
    /// The vendor library's call doing the work the context names ([`Backend::vendor_call`]).
    Vendor,
    /// A device-to-device copy of the bytes the kernel moves ([`time_copy`]).
    Copy,
}

/// What a yardstick job timed; its times travel beside it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Measured {
    /// `copy`, or the vendor library's name (`cublaslt`).
    pub kind: String,
    /// What ran, for people.
    pub what: String,
    /// The bytes copied, for a copy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<u64>,
    /// Bytes written before every timed run to evict the cache; `None`: not flushed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flushed_bytes: Option<usize>,
}

/// Time the yardstick `ask` names for `ctx` at `params` as `options` says. A vendor call
/// this backend does not have is [`BackendError::Unsupported`].
pub fn measure(backend: &dyn Backend, ctx: &Context, params: &ExecParams, ask: Ask, options: &RunOptions) -> Result<(Measured, Vec<f64>), BackendError> {
    match ask {
        Ask::Vendor => {
            let run = backend
                .vendor_call(ctx, params, options)
                .ok_or_else(|| BackendError::Unsupported(format!("a vendor library call for this kernel on {} devices", backend.device().backend)))??;
            Ok((Measured { kind: run.library, what: run.call, bytes: None, flushed_bytes: run.timed.flushed_bytes }, run.timed.times_ms))
        }
        Ask::Copy => {
            let traffic = Traffic::of(ctx, params).map_err(BackendError::InvalidConfig)?;
            let bytes = traffic.copy_bytes();
            let timed = time_copy(backend, bytes as usize, options)?;
            let what = format!("device-to-device copy of {bytes} bytes, moving the {} the kernel reads and writes", traffic.total());
            Ok((Measured { kind: "copy".into(), what, bytes: Some(bytes), flushed_bytes: timed.flushed_bytes }, timed.times_ms))
        }
    }
}
