//! `peak profile CONTEXT --set ...`: Nsight Compute's headline metrics for one
//! configuration: achieved FLOP/s, DRAM bandwidth, occupancy, shared-memory bank
//! conflicts. Runs `ncu --clock-control none` around a single worker run.

use anyhow::Result;
use peak_backend::worker::PoolOptions;
use peak_backend::worker::launcher::Placement;
use peak_eval::Workers;
use peak_eval::profile::{ProfileOptions, profile};

use super::{first_point, load_context, restricted_space};
use crate::cli::ProfileArgs;
use crate::output::{format_ms, print_json};

pub fn run(args: ProfileArgs, placement: &Placement) -> Result<()> {
    let ctx = load_context(&args.context)?;
    let space = restricted_space(&ctx, &args.set)?;
    let params = first_point(&ctx, &space)?;
    let mut options = ProfileOptions::locate()?;
    if let Some(metrics) = &args.metrics {
        options.metrics = metrics.split(',').map(|m| m.trim().to_string()).filter(|m| !m.is_empty()).collect();
    }
    let workers = Workers::peak(PoolOptions::default(), placement.clone());
    let report = profile(&workers, &ctx, &params, &options)?;
    if args.json {
        return print_json(&report);
    }
    println!("{} {}", ctx.name(), params);
    let h = &report.headline;
    let show = |label: &str, value: Option<String>| {
        if let Some(v) = value {
            println!("  {label:<24} {v}");
        }
    };
    show("kernel time", h.duration_ms.map(format_ms));
    show("achieved", h.achieved_flops_per_s.map(|f| format!("{:.3} TFLOP/s", f / 1e12)));
    show("FP32 (from instructions)", h.fp32_flops_per_s.map(|f| format!("{:.3} TFLOP/s", f / 1e12)));
    show("DRAM bandwidth", h.dram_bytes_per_s.map(|b| format!("{:.1} GB/s", b / 1e9)));
    show("DRAM % of peak", h.dram_pct_of_peak.map(|p| format!("{p:.1}%")));
    show("achieved occupancy", h.achieved_occupancy_pct.map(|p| format!("{p:.1}%")));
    show("shared bank conflicts", h.shared_bank_conflicts.map(|c| format!("{c:.0}")));
    for k in &report.kernels {
        println!("  kernel {}: {} metrics", k.kernel, k.metrics.len());
    }
    Ok(())
}
