//! `peak baseline CONTEXT`: time the context's kernel and a yardstick in one process, the
//! same way (warm-up, event-timed repetitions, median), and report the kernel's
//! percentage of it. The yardstick is cuBLAS on the same matmul for a CUDA or HIP context
//! with a `[kernel.matmul]` table (exits 1 when the kernel's output disagrees with
//! cuBLAS's), else a device-to-device copy of the bytes the kernel moves, on any backend
//! (`peak_backend::yardstick`).

use anyhow::{Result, anyhow};
use peak_backend::RunOptions;
use peak_cuda::CudaBackend;
use peak_cuda::baseline::{BaselineError, run_baseline};
use peak_spec::Backend as Language;

use super::{first_point, load_context, restricted_space};
use crate::cli::BaselineArgs;
use crate::output::{format_ms, print_json};
use crate::{Failed, usage};

mod copy;

pub fn run(args: BaselineArgs) -> Result<()> {
    let ctx = load_context(&args.context)?;
    let space = restricted_space(&ctx, &args.set)?;
    let params = first_point(&ctx, &space)?;
    // A matmul is judged against cuBLAS (a copy is no yardstick for compute-bound work),
    // anything else against a copy of its bytes.
    match args.against.as_deref() {
        None if ctx.manifest.kernel.matmul.is_none() => return copy::run(&args, &ctx, &params),
        Some("copy") => return copy::run(&args, &ctx, &params),
        None | Some("cublas") => {}
        Some(other) => return Err(usage(anyhow!("--against {other}: expected cublas or copy"))),
    }
    let backend = match ctx.backend() {
        Language::Cuda => CudaBackend::new()?,
        Language::Hip => CudaBackend::hip()?,
        other => {
            return Err(usage(anyhow!(
                "{}: peak baseline compares a matmul with cuBLAS, so it needs a cuda or hip context; this one is {other} (`--against copy` times a device-to-device copy of the same bytes instead)",
                ctx.manifest_path().display()
            )));
        }
    };
    let options = run_options(&args);
    let report = run_baseline(&backend, &ctx, &params, &options).map_err(|e| match e {
        BaselineError::NotMatmul { .. } | BaselineError::Shape { .. } | BaselineError::Types { .. } => usage(anyhow!(e)),
        other => anyhow!("{} ({}): {other}", ctx.name(), params),
    })?;
    if args.json {
        print_json(&report)?;
    } else {
        let s = report.shape;
        println!("{} on {} ({}), m={} n={} k={}", report.kernel, report.device, report.backend, s.m, s.n, s.k);
        println!("  params   {}", report.params);
        let k = &report.kernel_timing;
        let c = &report.cublas_timing;
        println!("  kernel   {:>10} median of {}  {:>9.3} TFLOP/s", format_ms(k.median_ms), report.repetitions, k.tflops);
        println!(
            "  cuBLAS   {:>10} median of {}  {:>9.3} TFLOP/s  ({}, {}, {})",
            format_ms(c.median_ms),
            report.repetitions,
            c.tflops,
            report.cublas.routine,
            report.cublas.compute_type,
            report.cublas.math_mode
        );
        println!("  kernel at {:.2}% of cuBLAS", report.percent_of_cublas);
        let v = &report.validation;
        let verdict = if v.passed { "matches cuBLAS" } else { "DIFFERS from cuBLAS" };
        println!("  output   {verdict} (relative error {:.3e}, tolerance {:.1e}, {} non-finite)", v.relative_error, v.tolerance, v.non_finite);
    }
    if !report.validation.passed {
        eprintln!("error: the kernel's output does not match cuBLAS's on the same inputs");
        return Err(Failed.into());
    }
    Ok(())
}

/// Timing as the flags say, the same on both sides of the ratio.
fn run_options(args: &BaselineArgs) -> RunOptions {
    RunOptions { warmup: args.timing.warmup, repetitions: args.timing.reps, data_seed: args.timing.data_seed, flush_cache: args.flush_cache, ..RunOptions::default() }
}
