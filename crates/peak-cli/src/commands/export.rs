//! `peak export CHECKPOINT --to DIR`: the kernel as a plain file with its best
//! configuration as `#define`s, its launch sequence and a stand-alone timing harness
//! (`peak_export`).

use anyhow::{Result, anyhow};
use peak_export::{ExportError, ExportOptions, Source, Target};
use peak_spec::Language;

use crate::backends;
use crate::cli::ExportArgs;
use crate::output::{format_ms, print_json};
use crate::usage;

pub fn run(args: ExportArgs) -> Result<()> {
    let source = Source::open(&args.checkpoint, &args.workflow.workflow).map_err(error)?;
    let target = target(&source, args.arch.as_deref())?;
    let options = ExportOptions { to: args.to.clone(), set: args.set.set.clone(), force: args.force, dispatch: args.dispatch };
    let report = peak_export::export(&source, &target, &options).map_err(error)?;
    if args.json {
        return print_json(&report);
    }
    println!("exported {} ({}) from {} to {}", report.kernel, report.backend, report.origin.describe(), report.dir.display());
    if let Some(table) = &report.dispatch {
        for shape in &table.shapes {
            let time = shape.time_ms.map(|t| format!("  {}", format_ms(t))).unwrap_or_default();
            println!("  shape    {} -> configuration {} ({}){time}", table.describe_shape(shape), shape.config, table.describe(shape.config));
        }
        println!("  fallback the nearest tuned shape whose configuration is valid (dispatch.h); kernel defaults: configuration {}", table.fallback);
    } else {
        println!("  params   {}", report.params);
        let tuned = source.performance.runs().iter().filter(|r| r.best.is_some()).count();
        if tuned > 1 && args.set.set.is_empty() {
            println!("  note     the record tuned {tuned} shapes; --dispatch exports them all with a dispatch table by shape");
        }
    }
    if let Some(ms) = report.recorded_time_ms {
        println!("  peak     {}{}", format_ms(ms), report.origin.measured_on.as_ref().map(|d| format!(" on {d}")).unwrap_or_default());
    }
    println!("  launches {} per run (limits of {})", report.sequence.launches().count(), report.device);
    println!("  files    {}", report.files.join(" "));
    println!("  build    cd {} && {}", report.dir.display(), report.build);
    println!("  run      {}", report.run);
    Ok(())
}

/// The device limits and script functions the launch script is evaluated with: NVRTC's
/// nominal device for the architecture (CUDA, HIP; the one the checkpoint was measured on
/// unless --arch says otherwise), the local device for OpenCL.
fn target(source: &Source, arch: Option<&str>) -> Result<Target> {
    let language = source.ctx.backend();
    if language == Language::Hlsl {
        // export refuses HLSL itself, with the reason; no device is needed for that.
        return Ok(nominal());
    }
    let measured_arch = source.origin.measured_on.as_deref().and_then(|d| d.split_whitespace().find(|w| w.starts_with("sm_")).map(str::to_string));
    let arch = arch.map(str::to_string).or(measured_arch);
    let backend = backends::open_compile_only(language, arch.as_deref())
        .map_err(|e| anyhow!("peak export evaluates the launch script against the device's limits, and none could be opened for {language}: {e}"))?;
    Ok(Target { device: backend.device().clone(), functions: backend.script_functions() })
}

fn nominal() -> Target {
    Target {
        device: peak_backend::DeviceInfo {
            backend: "none".into(),
            name: "none".into(),
            driver: String::new(),
            arch: String::new(),
            compute_units: 1,
            max_threads_per_block: 1024,
            max_shared_bytes: 48 * 1024,
            warp_size: 32,
            global_memory_bytes: 0,
        },
        functions: Vec::new(),
    }
}

fn error(e: ExportError) -> anyhow::Error {
    if e.is_usage() { usage(anyhow!(e)) } else { anyhow!(e) }
}
