//! The yardstick a checkpoint records beside its headline time (`performance.json`'s
//! `baseline`), so that every step says how far it is from what the device does with a
//! vendor library or a plain copy of the same bytes.
//!
//! - A context that names a GEMM (`[kernel.matmul]`) is judged against the vendor library
//!   doing the same work: cuBLASLt on CUDA and HIP (`peak baseline`'s call). On a backend
//!   with no vendor GEMM (OpenCL, HLSL) the record is `"n/a"` with the reason: a copy is
//!   no yardstick for compute-bound work, and a "% of copy" there would read as a failure.
//! - Any other kernel is judged against a device-to-device copy of the bytes it moves
//!   (`peak baseline --against copy`), on every backend, CPU devices included (there the
//!   copy is timed like the kernel: input sets rotate, no cache is flushed), unless its
//!   manifest's `kernel.flops` says it does more than [`COMPUTE_BOUND_FLOPS_PER_BYTE`]
//!   operations per byte it moves (attention): such a kernel is not memory-bound, and is
//!   recorded `"n/a"` with its intensity.
//!
//! It is timed in a worker (a job with `yardstick` set, which compiles nothing) with the
//! options every tuned time has ([`tuning_run_options`]), so the two times come from one
//! method on one device. A yardstick that cannot be timed never fails the step: it is
//! recorded as `"n/a"` with the reason.

use std::time::Instant;

use peak_backend::Spread;
use peak_backend::worker::Job;
use peak_backend::yardstick::{Ask, Traffic};
use peak_spec::{Context, ExecParams};

use crate::session::tuning_run_options;
use crate::workers::Workers;
use crate::workers::absolute;

pub use peak_record::{Baseline, NOT_AVAILABLE};

/// Above this many floating-point operations per byte moved a kernel is taken to be
/// compute-bound, and a copy is no yardstick for it: about the H200's fp32 ridge point
/// (67 TFLOP/s over 4.8 TB/s), and beyond every elementwise, reduction, normalisation,
/// transpose or stencil kernel (a few operations per byte at most).
pub const COMPUTE_BOUND_FLOPS_PER_BYTE: f64 = 16.0;

/// A yardstick that was not timed, and why.
fn not_available(params: &ExecParams, reason: String) -> Baseline {
    Baseline {
        kind: NOT_AVAILABLE.into(),
        time_ms: None,
        spread: None,
        inputs: params.inputs.clone(),
        what: None,
        bytes: None,
        flushed_bytes: None,
        reason: Some(reason),
        elapsed_s: Some(0.0),
    }
}

/// Time `ctx`'s yardstick at `params` (the headline's: only its inputs matter) in a
/// worker of its backend.
pub fn time_yardstick(workers: &mut Workers, ctx: &Context, params: &ExecParams) -> Baseline {
    let started = Instant::now();
    let baseline = timed(workers, ctx, params);
    Baseline { elapsed_s: Some(started.elapsed().as_secs_f64()), ..baseline }
}

fn timed(workers: &mut Workers, ctx: &Context, params: &ExecParams) -> Baseline {
    let gemm = ctx.manifest.kernel.matmul.is_some();
    if !gemm && let Some(intensity) = flops_per_byte(ctx, params).filter(|i| *i > COMPUTE_BOUND_FLOPS_PER_BYTE) {
        return not_available(
            params,
            format!(
                "kernel.flops makes it {intensity:.0} floating-point operations per byte moved, so it is compute-bound and a copy is no yardstick; peak times no vendor library for it"
            ),
        );
    }
    let ask = if gemm { Ask::Vendor } else { Ask::Copy };
    let job = Job { yardstick: Some(ask), ..Job::new(absolute(&ctx.dir), params.clone(), tuning_run_options()) };
    let answer = workers.pool(ctx.backend().name()).map_err(|e| e.to_string()).and_then(|pool| pool.run(job).map_err(|e| e.to_string()));
    let report = match answer {
        Ok(Ok(report)) => report,
        Ok(Err(failure)) if gemm => {
            return not_available(params, format!("{}; a copy is no yardstick for a GEMM's compute-bound work", failure.message));
        }
        Ok(Err(failure)) => return not_available(params, failure.to_string()),
        Err(e) => return not_available(params, e),
    };
    let (Some(measured), Some(spread)) = (report.yardstick, Spread::of(&report.times_ms)) else {
        return not_available(params, "the worker timed nothing".into());
    };
    Baseline {
        kind: measured.kind,
        time_ms: Some(spread.median_ms),
        spread: Some(spread),
        inputs: params.inputs.clone(),
        what: Some(measured.what),
        bytes: measured.bytes,
        flushed_bytes: measured.flushed_bytes,
        reason: None,
        elapsed_s: Some(0.0),
    }
}

/// The manifest's `kernel.flops` at `params` over the bytes the kernel reads and writes;
/// `None` where it declares none.
fn flops_per_byte(ctx: &Context, params: &ExecParams) -> Option<f64> {
    let bytes = Traffic::of(ctx, params).ok()?.total();
    Some(ctx.flops(params)? / bytes.max(1) as f64)
}

#[cfg(test)]
mod tests {
    use indexmap::IndexMap;

    use super::*;

    fn example(name: &str) -> Context {
        Context::load(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples").join(name)).unwrap()
    }

    fn at(inputs: &[(&str, i64)]) -> ExecParams {
        ExecParams { inputs: inputs.iter().map(|(k, v)| (k.to_string(), *v)).collect(), tuning: IndexMap::new() }
    }

    #[test]
    fn only_a_kernel_declaring_many_operations_per_byte_is_compute_bound() {
        // Attention reads Q, K, V and writes O (f32): 4 · b · s² · d operations over 16 · b · s · d bytes.
        let attention = example("attention-opencl");
        let intensity = |seq| flops_per_byte(&attention, &at(&[("batch", 16), ("seq", seq), ("dim", 64)])).unwrap();
        assert_eq!((intensity(64), intensity(128)), (16.0, 32.0));
        assert!(intensity(128) > COMPUTE_BOUND_FLOPS_PER_BYTE && intensity(64) <= COMPUTE_BOUND_FLOPS_PER_BYTE);
        // A kernel that declares no flops is judged against a copy.
        assert_eq!(flops_per_byte(&example("softmax-opencl"), &at(&[("rows", 256), ("cols", 256)])), None);
    }
}
