//! `peak baseline CONTEXT`: time the context's kernel and a yardstick in one process, the
//! same way (warm-up, event-timed repetitions, median), and report the kernel's
//! percentage of it. The yardstick is cuBLASLt on the same GEMM (layouts, types and fused
//! epilogue as `[kernel.matmul]` declares them) for a CUDA or HIP context with that table
//! (exits 1 when the kernel's output disagrees with cuBLASLt's), else a device-to-device
//! copy of the bytes the kernel moves, on any backend (`peak_backend::yardstick`).

use anyhow::{Result, anyhow};
use peak_backend::RunOptions;
use peak_cuda::CudaBackend;
use peak_cuda::baseline::{BaselineError, BaselineReport, run_baseline};
use peak_spec::Language;

use super::{first_point, load_context, restricted_space};
use crate::cli::BaselineArgs;
use crate::output::{format_ms, print_json};
use crate::{Failed, usage};

mod copy;

pub fn run(args: BaselineArgs) -> Result<()> {
    let ctx = load_context(&args.context)?;
    let space = restricted_space(&ctx, &args.set)?;
    let params = first_point(&ctx, &space)?;
    // A GEMM is judged against cuBLASLt doing the same work (a copy is no yardstick for
    // compute-bound work), anything else against a copy of its bytes.
    match args.against.as_deref() {
        None if ctx.manifest.kernel.matmul.is_none() => return copy::run(&args, &ctx, &params),
        Some("copy") => return copy::run(&args, &ctx, &params),
        None | Some("cublaslt") => {}
        Some(other) => return Err(usage(anyhow!("--against {other}: expected cublaslt or copy"))),
    }
    let backend = match ctx.backend() {
        Language::Cuda => CudaBackend::new()?,
        Language::Hip => CudaBackend::hip()?,
        other => {
            return Err(usage(anyhow!(
                "{}: peak baseline compares a GEMM with cuBLASLt, so it needs a cuda or hip context; this one is {other} (`--against copy` times a device-to-device copy of the same bytes instead)",
                ctx.manifest_path().display()
            )));
        }
    };
    let options = run_options(&args);
    let report = run_baseline(&backend, &ctx, &params, &options).map_err(|e| match e {
        BaselineError::NotMatmul { .. } | BaselineError::Field { .. } => usage(anyhow!(e)),
        other => anyhow!("{} ({}): {other}", ctx.name(), params),
    })?;
    if args.json {
        print_json(&report)?;
    } else {
        print_report(&report);
    }
    if !report.validation.passed {
        eprintln!("error: the kernel's output does not match cuBLASLt's on the same inputs");
        return Err(Failed.into());
    }
    Ok(())
}

fn print_report(report: &BaselineReport) {
    let g = &report.gemm;
    println!("{} on {} ({}): {}", report.kernel, report.device, report.backend, g.summary());
    println!("  params   {}", report.params);
    let (k, c, lt) = (&report.kernel_timing, &report.cublas_timing, &report.cublas);
    println!("  kernel   {:>10} median of {}  {:>9.3} TFLOP/s", format_ms(k.median_ms), report.repetitions, k.tflops);
    println!("  cuBLASLt {:>10} median of {}  {:>9.3} TFLOP/s", format_ms(c.median_ms), report.repetitions, c.tflops);
    let bias = lt.types.bias.map(|b| format!(", bias {b}")).unwrap_or_default();
    println!(
        "           {} {} (cuBLASLt {}), {}, {} x {} -> {}{bias}, {}, algorithm {}, {} of workspace",
        lt.routine,
        lt.layout,
        lt.cublaslt_ops,
        lt.epilogue,
        lt.types.a,
        lt.types.b,
        lt.types.c,
        lt.compute_type,
        lt.algorithm,
        format_bytes(lt.workspace_needed)
    );
    if let Some(residual) = &lt.residual {
        println!("           residual: {residual}");
    }
    println!("  spread   kernel   {}", k.spread.describe(format_ms));
    println!("           cuBLASLt {}", c.spread.describe(format_ms));
    println!("  cache    {}", super::run::cache_note(report.flushed_bytes));
    println!("  kernel at {:.2}% of cuBLASLt", report.percent_of_cublas);
    let v = &report.validation;
    let verdict = if v.passed { "matches cuBLASLt" } else { "DIFFERS from cuBLASLt" };
    println!("  output   {verdict} (relative error {:.3e}, tolerance {:.1e}, {} non-finite)", v.relative_error, v.tolerance, v.non_finite);
}

fn format_bytes(bytes: usize) -> String {
    if bytes >= 1 << 20 { format!("{:.1} MiB", bytes as f64 / (1 << 20) as f64) } else { format!("{} KiB", bytes.div_ceil(1024)) }
}

/// Timing as the flags say, the same on both sides of the ratio.
fn run_options(args: &BaselineArgs) -> RunOptions {
    super::timing_options(&args.timing)
}
