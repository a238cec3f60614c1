//! `peak baseline --against copy`: the kernel against a device-to-device copy of the bytes
//! it moves, on any backend.

use anyhow::{Result, anyhow};
use peak_backend::yardstick::{Traffic, time_copy};
use peak_backend::{Spread, runner};
use peak_spec::{Context, ExecParams};
use serde::Serialize;

use crate::backends;
use crate::cli::BaselineArgs;
use crate::output::{format_ms, print_json};
use crate::usage;

#[derive(Serialize)]
struct CopyBaseline {
    kernel: String,
    device: String,
    backend: String,
    params: ExecParams,
    repetitions: usize,
    traffic: Traffic,
    kernel_ms: f64,
    kernel_spread: Spread,
    kernel_gb_per_s: f64,
    copy_bytes: u64,
    copy_ms: f64,
    copy_spread: Spread,
    /// Bytes written before every timed run, on both sides, to evict the cache.
    #[serde(skip_serializing_if = "Option::is_none")]
    flushed_bytes: Option<usize>,
    copy_gb_per_s: f64,
    /// The copy's time over the kernel's: 100 when the kernel moves its bytes as fast.
    percent_of_copy: f64,
}

pub fn run(args: &BaselineArgs, ctx: &Context, params: &ExecParams) -> Result<()> {
    let traffic = Traffic::of(ctx, params).map_err(|e| usage(anyhow!("{}: {e}", ctx.manifest_path().display())))?;
    let backend = backends::open(ctx.backend())?;
    let options = super::run_options(args);
    let kernel = runner::run(backend.as_ref(), ctx, params, &options).map_err(|e| anyhow!("{} ({}): {e}", ctx.name(), params))?;
    let kernel_spread = kernel.spread().ok_or_else(|| anyhow!("no timed repetition (--reps 0)"))?;
    let copies = time_copy(backend.as_ref(), traffic.copy_bytes() as usize, &options).map_err(|e| anyhow!("timing the copy: {e}"))?;
    let copy_spread = Spread::of(&copies.times_ms).ok_or_else(|| anyhow!("no timed repetition (--reps 0)"))?;
    let (kernel_ms, copy_ms) = (kernel_spread.median_ms, copy_spread.median_ms);
    let gb_per_s = |bytes: u64, ms: f64| bytes as f64 / (ms * 1e6);
    let report = CopyBaseline {
        kernel: ctx.name().to_string(),
        device: backend.device().name.clone(),
        backend: ctx.backend().name().to_string(),
        params: params.clone(),
        repetitions: options.repetitions,
        traffic,
        kernel_ms,
        kernel_spread,
        kernel_gb_per_s: gb_per_s(traffic.total(), kernel_ms),
        copy_bytes: traffic.copy_bytes(),
        copy_ms,
        copy_spread,
        flushed_bytes: kernel.flushed_bytes,
        copy_gb_per_s: gb_per_s(2 * traffic.copy_bytes(), copy_ms),
        percent_of_copy: 100.0 * copy_ms / kernel_ms,
    };
    if args.json {
        return print_json(&report);
    }
    println!("{} on {} ({})", report.kernel, report.device, report.backend);
    println!("  params   {}", report.params);
    println!(
        "  kernel   {:>10} median of {}  {:>8.1} GB/s  ({} bytes read, {} written)",
        format_ms(kernel_ms),
        report.repetitions,
        report.kernel_gb_per_s,
        traffic.read_bytes,
        traffic.written_bytes
    );
    println!(
        "  copy     {:>10} median of {}  {:>8.1} GB/s  (device-to-device, {} bytes)",
        format_ms(copy_ms),
        report.repetitions,
        report.copy_gb_per_s,
        report.copy_bytes
    );
    println!("  spread   kernel {}", kernel_spread.describe(format_ms));
    println!("           copy   {}", copy_spread.describe(format_ms));
    println!("  cache    {}", crate::commands::run::cache_note(report.flushed_bytes));
    println!("  kernel at {:.2}% of copy bandwidth", report.percent_of_copy);
    Ok(())
}
