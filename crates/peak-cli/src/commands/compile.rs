//! `peak compile CONTEXT`: compile every variant of a CUDA or HIP context with NVRTC (no
//! GPU or driver needed) and report each kernel's registers, shared memory, stack frame
//! and spills. HIP contexts are also compiled for an AMD GPU with hipcc where installed.
//! Exits 1 when any variant fails to compile, so CI can run it over the examples.

use anyhow::{Result, anyhow};
use peak_backend::KernelResources;
use peak_cuda::compile_only::{CompileOnlyError, CompileOnlyOptions, CompileOutcome, compile_context};
use peak_cuda::nvrtc::Arch;

use super::load_context;
use crate::cli::CompileArgs;
use crate::output::{format_ms, print_json};
use crate::{Failed, usage};

pub fn run(args: CompileArgs) -> Result<()> {
    let ctx = load_context(&args.context)?;
    let arch = Arch::parse(&args.arch).map_err(|e| usage(anyhow!("--arch: {e}")))?;
    let options = CompileOnlyOptions { arch, offload_arch: (!args.no_hipcc).then(|| args.offload_arch.clone()) };
    let report = compile_context(&ctx, &args.set.set, &options).map_err(|e| match e {
        CompileOnlyError::Backend(err) => anyhow!(err),
        other => usage(anyhow!(other)),
    })?;
    if let Some(why) = &report.hipcc_skipped {
        eprintln!("note: {why}");
    }
    if args.json {
        print_json(&report)?;
    } else {
        let amd = report.offload_arch.as_deref().map(|a| format!(", hipcc {a}")).unwrap_or_default();
        println!(
            "{} ({}): {} variants for {} execution parameters, NVRTC {} for {}{amd}",
            report.kernel,
            report.backend,
            report.variants.len(),
            report.points,
            report.nvrtc_version,
            report.arch
        );
        for v in &report.variants {
            let tuning = v.tuning.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(" ");
            print_outcome(&tuning, &report.arch, &v.nvrtc);
            if let (Some(amd), Some(arch)) = (&v.hipcc, &report.offload_arch) {
                print_outcome(&tuning, arch, amd);
            }
        }
    }
    let failures = report.failures();
    if failures > 0 {
        // The first failure's log, so the reason is on screen without --json.
        let first = report.variants.iter().flat_map(|v| std::iter::once(&v.nvrtc).chain(v.hipcc.as_ref())).find(|o| !o.ok());
        if let Some(outcome) = first {
            eprintln!("error: {failures} variant(s) failed to compile; the first one's log ({}):\n{}", outcome.options, outcome.log);
        }
        return Err(Failed.into());
    }
    Ok(())
}

fn print_outcome(tuning: &str, target: &str, outcome: &CompileOutcome) {
    if !outcome.ok() {
        println!("  {tuning:<24} {target:<7} {}", outcome.status);
        return;
    }
    for k in &outcome.kernels {
        println!("  {tuning:<24} {target:<7} {:<12} {}  {}", k.name, resources(k), format_ms(outcome.compile_ms));
    }
}

fn resources(k: &KernelResources) -> String {
    let n = |v: Option<u32>| v.map_or_else(|| "?".to_string(), |v| v.to_string());
    format!(
        "{:>4} regs  {:>6} B smem  {:>5} B stack  spills {}/{} B",
        n(k.registers),
        n(k.shared_bytes),
        n(k.local_bytes),
        n(k.spill_stores_bytes),
        n(k.spill_loads_bytes)
    )
}
