//! Nsight Compute: headline metrics of one configuration.
//!
//! One worker runs the configuration once under
//! `ncu --clock-control none --metrics … --csv --page raw --print-units base --log-file F`
//! (clocks left alone, so the numbers match what tuning measured), and the CSV it writes
//! is parsed into per-kernel metrics plus the few a person reads first: achieved FLOP/s,
//! DRAM bandwidth, achieved occupancy, shared-memory bank conflicts.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use peak_backend::RunOptions;
use peak_backend::worker::{Job, PoolOptions, WorkerPool};
use peak_spec::{Context, ExecParams};
use serde::{Deserialize, Serialize};

use crate::error::EvalError;
use crate::sanitizer::locate_tool;
use crate::workers::Workers;
use crate::workers::absolute;

const DURATION: &str = "gpu__time_duration.sum";
const DRAM_RATE: &str = "dram__bytes.sum.per_second";
const DRAM_PCT: &str = "dram__throughput.avg.pct_of_peak_sustained_elapsed";
const OCCUPANCY: &str = "sm__warps_active.avg.pct_of_peak_sustained_active";
const FFMA: &str = "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum";
const FADD: &str = "smsp__sass_thread_inst_executed_op_fadd_pred_on.sum";
const FMUL: &str = "smsp__sass_thread_inst_executed_op_fmul_pred_on.sum";
const BANK_LD: &str = "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum";
const BANK_ST: &str = "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum";

/// The metrics collected unless others are asked for.
pub const HEADLINE_METRICS: [&str; 9] = [DURATION, DRAM_RATE, DRAM_PCT, OCCUPANCY, FFMA, FADD, FMUL, BANK_LD, BANK_ST];

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Metric {
    pub value: f64,
    pub unit: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Headline {
    pub duration_ms: Option<f64>,
    /// The manifest's `flops` over the summed kernel time (counts tensor-core work too).
    pub achieved_flops_per_s: Option<f64>,
    /// FP32 operations counted from executed instructions (FMA counts two).
    pub fp32_flops_per_s: Option<f64>,
    pub dram_bytes_per_s: Option<f64>,
    pub dram_pct_of_peak: Option<f64>,
    pub achieved_occupancy_pct: Option<f64>,
    /// Shared-memory bank conflicts, loads and stores together.
    pub shared_bank_conflicts: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KernelProfile {
    pub kernel: String,
    pub metrics: BTreeMap<String, Metric>,
    pub headline: Headline,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProfileReport {
    pub params: ExecParams,
    pub kernels: Vec<KernelProfile>,
    /// Over all launches of one run.
    pub headline: Headline,
}

/// Parse `ncu --csv --page raw` output: a header row of column names, a row of units,
/// then one row per profiled launch. Lines ncu prefixes with `==` are its own chatter.
pub fn parse_ncu_csv(text: &str) -> Result<Vec<KernelProfile>, String> {
    let rows: Vec<Vec<String>> = text.lines().filter(|l| !l.starts_with("==") && !l.trim().is_empty()).map(split_csv).collect();
    let Some(header) = rows.first() else { return Err("no CSV in the report".into()) };
    let column = |name: &str| header.iter().position(|h| h == name);
    let kernel_col = column("Kernel Name").ok_or("no `Kernel Name` column")?;
    let first_metric = column("CC").or_else(|| column("Device")).map(|c| c + 1).unwrap_or(kernel_col + 1);
    let units = rows.get(1).ok_or("no units row")?;
    let mut kernels = Vec::new();
    for row in rows.iter().skip(2) {
        let mut metrics = BTreeMap::new();
        for (i, name) in header.iter().enumerate().skip(first_metric) {
            let Some(raw) = row.get(i) else { continue };
            let Ok(value) = raw.replace(',', "").parse::<f64>() else { continue };
            let unit = units.get(i).cloned().unwrap_or_default();
            let (value, unit) = normalize(value, &unit);
            metrics.insert(name.clone(), Metric { value, unit });
        }
        let kernel = row.get(kernel_col).cloned().unwrap_or_default();
        kernels.push(KernelProfile { kernel, headline: headline(&metrics, None), metrics });
    }
    if kernels.is_empty() {
        return Err("the report lists no kernel launch".into());
    }
    Ok(kernels)
}

/// Scale prefixed units to base units (ncu prints base units when asked, but older
/// releases ignore `--print-units`).
fn normalize(value: f64, unit: &str) -> (f64, String) {
    let scale = |prefix: &str| match prefix {
        "K" | "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        _ => 1.0,
    };
    for base in ["byte/second", "byte", "cycle/second", "inst/second"] {
        if let Some(prefix) = unit.strip_suffix(base) {
            return (value * scale(prefix), base.to_string());
        }
    }
    match unit {
        "nsecond" => (value, "nsecond".into()),
        "usecond" => (value * 1e3, "nsecond".into()),
        "msecond" => (value * 1e6, "nsecond".into()),
        "second" => (value * 1e9, "nsecond".into()),
        other => (value, other.to_string()),
    }
}

fn headline(metrics: &BTreeMap<String, Metric>, flops: Option<f64>) -> Headline {
    let get = |name: &str| metrics.get(name).map(|m| m.value);
    let seconds = get(DURATION).map(|ns| ns * 1e-9).filter(|s| *s > 0.0);
    let fp32 = match (get(FFMA), get(FADD), get(FMUL)) {
        (None, None, None) => None,
        (a, b, c) => Some(2.0 * a.unwrap_or(0.0) + b.unwrap_or(0.0) + c.unwrap_or(0.0)),
    };
    Headline {
        duration_ms: seconds.map(|s| s * 1e3),
        achieved_flops_per_s: flops.zip(seconds).map(|(f, s)| f / s),
        fp32_flops_per_s: fp32.zip(seconds).map(|(f, s)| f / s),
        dram_bytes_per_s: get(DRAM_RATE),
        dram_pct_of_peak: get(DRAM_PCT),
        achieved_occupancy_pct: get(OCCUPANCY),
        shared_bank_conflicts: match (get(BANK_LD), get(BANK_ST)) {
            (None, None) => None,
            (a, b) => Some(a.unwrap_or(0.0) + b.unwrap_or(0.0)),
        },
    }
}

/// Headline over several launches: times and counts add, rates are time-weighted.
fn combine(kernels: &[KernelProfile], flops: Option<f64>) -> Headline {
    let seconds: f64 = kernels.iter().filter_map(|k| k.headline.duration_ms).sum::<f64>() * 1e-3;
    let weighted = |f: fn(&Headline) -> Option<f64>| {
        let parts: Vec<(f64, f64)> = kernels.iter().filter_map(|k| f(&k.headline).zip(k.headline.duration_ms)).collect();
        let total: f64 = parts.iter().map(|(_, t)| t).sum();
        (!parts.is_empty() && total > 0.0).then(|| parts.iter().map(|(v, t)| v * t).sum::<f64>() / total)
    };
    let summed = |f: fn(&Headline) -> Option<f64>| {
        let parts: Vec<f64> = kernels.iter().filter_map(|k| f(&k.headline)).collect();
        (!parts.is_empty()).then(|| parts.iter().sum())
    };
    Headline {
        duration_ms: (seconds > 0.0).then_some(seconds * 1e3),
        achieved_flops_per_s: flops.filter(|_| seconds > 0.0).map(|f| f / seconds),
        fp32_flops_per_s: weighted(|h| h.fp32_flops_per_s),
        dram_bytes_per_s: weighted(|h| h.dram_bytes_per_s),
        dram_pct_of_peak: weighted(|h| h.dram_pct_of_peak),
        achieved_occupancy_pct: weighted(|h| h.achieved_occupancy_pct),
        shared_bank_conflicts: summed(|h| h.shared_bank_conflicts),
    }
}

fn split_csv(line: &str) -> Vec<String> {
    let mut fields = Vec::new();
    let mut field = String::new();
    let mut quoted = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' if quoted && chars.peek() == Some(&'"') => {
                field.push('"');
                chars.next();
            }
            '"' => quoted = !quoted,
            ',' if !quoted => fields.push(std::mem::take(&mut field)),
            _ => field.push(c),
        }
    }
    fields.push(field);
    fields
}

pub struct ProfileOptions {
    pub ncu: PathBuf,
    pub metrics: Vec<String>,
    pub timeout: Duration,
}

impl ProfileOptions {
    /// Find `ncu` (PATH, `$CUDA_HOME/bin`, `/usr/local/cuda/bin`) and use the headline metrics.
    pub fn locate() -> Result<ProfileOptions, EvalError> {
        let ncu = locate_tool("ncu").ok_or_else(|| EvalError::Tool {
            tool: "ncu".into(),
            message: "Nsight Compute (`ncu`) is not on PATH, in $CUDA_HOME/bin or in /usr/local/cuda/bin".into(),
            hint: "install Nsight Compute (part of the CUDA toolkit) or put ncu on PATH".into(),
        })?;
        Ok(ProfileOptions { ncu, metrics: HEADLINE_METRICS.iter().map(|m| m.to_string()).collect(), timeout: Duration::from_secs(600) })
    }
}

/// Run `params` of `ctx` once under Nsight Compute and return its metrics.
pub fn profile(workers: &Workers, ctx: &Context, params: &ExecParams, options: &ProfileOptions) -> Result<ProfileReport, EvalError> {
    let backend = ctx.backend().name();
    let dir = tempfile::tempdir().map_err(|e| EvalError::io(std::env::temp_dir(), e))?;
    let log = dir.path().join("ncu.csv");
    let command = workers.command(backend)?.wrapped([
        options.ncu.clone().into_os_string(),
        "--clock-control".into(),
        "none".into(),
        "--metrics".into(),
        options.metrics.join(",").into(),
        "--csv".into(),
        "--page".into(),
        "raw".into(),
        "--print-units".into(),
        "base".into(),
        "--log-file".into(),
        log.clone().into_os_string(),
    ]);
    let pool_options = PoolOptions { run_timeout: options.timeout, startup_timeout: Duration::from_secs(300), max_in_flight: 1, ..workers.options().clone() };
    let mut pool = WorkerPool::start(backend, command, pool_options)?;
    let run = RunOptions { warmup: 0, repetitions: 0, ..RunOptions::default() };
    let result = pool.run(Job::new(absolute(&ctx.dir), params.clone(), run))?;
    pool.close(Duration::from_secs(120));
    if let Err(failure) = result {
        return Err(EvalError::Tool {
            tool: "ncu".into(),
            message: format!("the profiled run failed: {failure}"),
            hint: "check the configuration with `peak run` first".into(),
        });
    }
    let text = std::fs::read_to_string(&log).map_err(|e| EvalError::Tool {
        tool: "ncu".into(),
        message: format!("it wrote no report to {}: {e}", log.display()),
        hint: "run the same command by hand to see what ncu says (profiling may need root or `NVreg_RestrictProfilingToAdminUsers=0`)".into(),
    })?;
    let kernels = parse_ncu_csv(&text).map_err(|message| EvalError::Tool {
        tool: "ncu".into(),
        message: format!("{message}; the report said:\n{}", text.lines().take(20).collect::<Vec<_>>().join("\n")),
        hint: "check that every metric name exists on this GPU: `ncu --query-metrics`".into(),
    })?;
    let headline = combine(&kernels, ctx.flops(params));
    Ok(ProfileReport { params: params.clone(), kernels, headline })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `ncu --csv --page raw --print-units base` for a run with two launches.
    const REPORT: &str = r#"==PROF== Connected to process 4242 (/opt/peak/peak)
==PROF== Profiling "sgemm": 0%....50%....100% - 9 passes
==PROF== Profiling "scale": 0%....50%....100% - 9 passes
==PROF== Disconnected from process 4242
"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","dram__bytes.sum.per_second","dram__throughput.avg.pct_of_peak_sustained_elapsed","gpu__time_duration.sum","l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum","l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum","sm__warps_active.avg.pct_of_peak_sustained_active","smsp__sass_thread_inst_executed_op_fadd_pred_on.sum","smsp__sass_thread_inst_executed_op_ffma_pred_on.sum","smsp__sass_thread_inst_executed_op_fmul_pred_on.sum"
"","","","","","","","","","","","byte/second","%","nsecond","","","%","inst","inst","inst"
"0","4242","peak","h200","sgemm","1","7","(16, 16, 1)","(128, 128, 1)","0","9.0","412,345,678,901.5","8.52","1,000,000","1,024","0","61.3","0","8,589,934,592","0"
"1","4242","peak","h200","scale","1","7","(256, 1, 1)","(16384, 1, 1)","0","9.0","3,000,000,000,000","90.1","10,000","0","0","88.0","0","0","4,194,304"
"#;

    #[test]
    fn parses_rows_units_and_thousands_separators() {
        let kernels = parse_ncu_csv(REPORT).unwrap();
        assert_eq!(kernels.len(), 2);
        let k = &kernels[0];
        assert_eq!(k.kernel, "sgemm");
        assert_eq!(k.metrics[DURATION].value, 1_000_000.0);
        assert_eq!(k.metrics[DRAM_RATE].unit, "byte/second");
        let h = &k.headline;
        assert_eq!(h.duration_ms, Some(1.0));
        // 2 × 8 589 934 592 FMAs in 1 ms.
        assert!((h.fp32_flops_per_s.unwrap() - 2.0 * 8_589_934_592.0 / 1e-3).abs() < 1.0);
        assert_eq!(h.achieved_occupancy_pct, Some(61.3));
        assert_eq!(h.shared_bank_conflicts, Some(1024.0));
        assert!((h.dram_bytes_per_s.unwrap() - 412_345_678_901.5).abs() < 1e-3);
    }

    #[test]
    fn combines_launches_by_time() {
        let kernels = parse_ncu_csv(REPORT).unwrap();
        let h = combine(&kernels, Some(2.0 * 2048f64.powi(3)));
        assert!((h.duration_ms.unwrap() - 1.01).abs() < 1e-9);
        assert!((h.achieved_flops_per_s.unwrap() - 2.0 * 2048f64.powi(3) / 1.01e-3).abs() < 1e3);
        let expected_occ = (61.3 * 1.0 + 88.0 * 0.01) / 1.01;
        assert!((h.achieved_occupancy_pct.unwrap() - expected_occ).abs() < 1e-9);
        assert_eq!(h.shared_bank_conflicts, Some(1024.0));
    }

    #[test]
    fn prefixed_units_are_scaled() {
        assert_eq!(normalize(1.5, "Gbyte/second"), (1.5e9, "byte/second".to_string()));
        assert_eq!(normalize(2.0, "usecond"), (2000.0, "nsecond".to_string()));
        assert_eq!(normalize(7.0, "%"), (7.0, "%".to_string()));
    }

    #[test]
    fn a_report_without_rows_is_an_error() {
        assert!(parse_ncu_csv("==ERROR== Failed to find metric sm__bogus\n").is_err());
    }

    #[test]
    fn csv_quotes_and_commas() {
        assert_eq!(split_csv(r#""a,b","c""d",e"#), vec!["a,b", "c\"d", "e"]);
    }
}
