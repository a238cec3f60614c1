//! NVIDIA compute-sanitizer as a validator: memcheck, racecheck, initcheck, synccheck.
//!
//! Each (sample, tool) runs in its own worker process started under
//! `compute-sanitizer --tool T --log-file F`, so every finding belongs to exactly one
//! execution parameter and the tool's text never mixes with the worker protocol on stdout.
//! The log is parsed into [`Finding`]s: tool, kernel, source file and line when the
//! kernel was compiled with line information, and the error text.

use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use peak_backend::RunOptions;
use peak_backend::worker::{FailureKind, Job, PoolOptions, WorkerPool};
use peak_spec::Context;
use serde::{Deserialize, Serialize};

use crate::error::EvalError;
use crate::validate::{Sample, Validator};
pub use crate::verdict::Finding;
use crate::verdict::Verdict;
use crate::workers::{Workers, absolute};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SanitizerTool {
    Memcheck,
    Racecheck,
    Initcheck,
    Synccheck,
}

impl SanitizerTool {
    pub const ALL: [SanitizerTool; 4] = [SanitizerTool::Memcheck, SanitizerTool::Racecheck, SanitizerTool::Initcheck, SanitizerTool::Synccheck];

    pub fn name(self) -> &'static str {
        match self {
            SanitizerTool::Memcheck => "memcheck",
            SanitizerTool::Racecheck => "racecheck",
            SanitizerTool::Initcheck => "initcheck",
            SanitizerTool::Synccheck => "synccheck",
        }
    }
}

impl FromStr for SanitizerTool {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        SanitizerTool::ALL
            .into_iter()
            .find(|t| t.name() == s.trim())
            .ok_or_else(|| format!("unknown sanitizer tool '{s}': expected memcheck, racecheck, initcheck or synccheck"))
    }
}

/// What a log holds besides the findings.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ParsedReport {
    pub findings: Vec<Finding>,
    /// Host API calls that returned an error (usually the consequence of a finding).
    pub api_errors: Vec<String>,
    /// The count from `ERROR SUMMARY: N errors`, when present.
    pub error_summary: Option<usize>,
}

/// Parse compute-sanitizer's text output (its `--log-file`).
///
/// Every line carries the `=========` prefix. A line with a single space after the prefix
/// opens a block, indented lines continue it, a bare prefix closes it. Known forms of the
/// location line:
/// - `at kernel+0x90 in /path/kernel.cu:12` (recent releases),
/// - `at 0x90 in /path/kernel.cu:12:kernel(float*)` (older releases),
/// - `at kernel+0x90` or `at 0x90 in kernel` (no line information compiled in).
pub fn parse_report(tool: SanitizerTool, text: &str) -> ParsedReport {
    let mut report = ParsedReport::default();
    let mut blocks: Vec<Vec<String>> = Vec::new();
    for raw in text.lines() {
        let Some(body) = strip_prefix(raw) else { continue };
        if body.trim().is_empty() {
            blocks.push(Vec::new());
            continue;
        }
        let indented = body.starts_with("  ");
        if indented {
            if let Some(block) = blocks.last_mut().filter(|b| !b.is_empty()) {
                block.push(body.trim().to_string());
            }
        } else {
            blocks.push(vec![body.trim().to_string()]);
        }
    }
    for block in blocks.into_iter().filter(|b| !b.is_empty()) {
        let head = &block[0];
        if head == "COMPUTE-SANITIZER" || head.starts_with("Target application returned") || head.starts_with("This tool") {
            continue;
        }
        if let Some(rest) = head.split("ERROR SUMMARY:").nth(1) {
            report.error_summary = rest.split_whitespace().next().and_then(|n| n.parse().ok());
            continue;
        }
        if head.contains("SUMMARY:") || head.starts_with("LEAK") {
            continue;
        }
        if head.starts_with("Program hit") {
            report.api_errors.push(head.clone());
            continue;
        }
        let (severity, error) = classify(head);
        let mut finding = Finding { tool: tool.name().into(), severity: severity.into(), error, kernel: None, file: None, line: None, details: Vec::new() };
        // The location may sit in the head itself (racecheck) or in an indented line.
        for line in &block {
            if line.starts_with("Saved host") || line.starts_with("Host Frame") {
                break;
            }
            if finding.kernel.is_none()
                && finding.file.is_none()
                && let Some(loc) = location(line)
            {
                finding.kernel = loc.kernel;
                finding.file = loc.file;
                finding.line = loc.line;
            }
        }
        let mut in_backtrace = false;
        for line in block.iter().skip(1) {
            if line.starts_with("Saved host backtrace") {
                in_backtrace = true;
            }
            if !in_backtrace && !line.starts_with("at ") {
                finding.details.push(line.clone());
            }
        }
        report.findings.push(finding);
    }
    report
}

fn strip_prefix(line: &str) -> Option<&str> {
    let rest = line.strip_prefix("=========")?;
    // Some builds print a process id between equal signs: "========= " vs "==1234== ".
    Some(rest.strip_prefix(' ').unwrap_or(rest))
}

fn classify(head: &str) -> (&'static str, String) {
    let lower = head.to_ascii_lowercase();
    let (severity, text) = [("error: ", "error"), ("warning: ", "warning"), ("warn:", "warning")]
        .into_iter()
        .find(|(prefix, _)| lower.starts_with(prefix))
        .map(|(prefix, severity)| (severity, &head[prefix.len()..]))
        .unwrap_or(("error", head));
    // Racecheck names a race "between X access at <site> …"; keep the phrase, not the site.
    (severity, text.split(" at ").next().unwrap_or(text).trim().to_string())
}

struct Location {
    kernel: Option<String>,
    file: Option<String>,
    line: Option<u32>,
}

fn location(line: &str) -> Option<Location> {
    let at = line.match_indices("at ").map(|(i, _)| i).find(|&i| i == 0 || line[..i].ends_with(' '))?;
    let rest = &line[at + 3..];
    // Racecheck appends " [N hazards]".
    let rest = rest.split(" [").next().unwrap_or(rest).trim();
    let (site, place) = match rest.split_once(" in ") {
        Some((s, p)) => (s.trim(), Some(p.trim())),
        None => (rest, None),
    };
    let kernel_from_site = || {
        if site.starts_with("0x") || site.is_empty() {
            return None;
        }
        let name = site.rsplit_once("+0x").map(|(n, _)| n).unwrap_or(site);
        Some(base_name(name))
    };
    let Some(place) = place else {
        return kernel_from_site().map(|k| Location { kernel: Some(k), file: None, line: None });
    };
    // "file:line:kernel(sig)" or "file:line".
    let mut parts = place.splitn(3, ':');
    let (file, number, tail) = (parts.next(), parts.next(), parts.next());
    match number.and_then(|n| n.trim().parse::<u32>().ok()) {
        Some(n) => Some(Location { kernel: tail.map(base_name).or_else(kernel_from_site), file: file.map(str::to_string), line: Some(n) }),
        // "at 0x90 in kernel": no line information.
        None => Some(Location { kernel: Some(base_name(place)).or_else(kernel_from_site), file: None, line: None }),
    }
}

/// `race_kernel(float *)` → `race_kernel`.
fn base_name(signature: &str) -> String {
    signature.split('(').next().unwrap_or(signature).trim().to_string()
}

/// The compute-sanitizer validator. Slow (each sample and tool is a fresh process, and
/// racecheck can be 100× slower than a plain run), so it usually gets fewer samples.
pub struct SanitizerValidator {
    pub tools: Vec<SanitizerTool>,
    pub program: PathBuf,
    /// How long one sanitized run may take once started.
    pub timeout: Duration,
    /// Only the first `samples` samples are sanitized.
    pub samples: usize,
}

impl SanitizerValidator {
    pub fn new(tools: Vec<SanitizerTool>, program: PathBuf) -> SanitizerValidator {
        SanitizerValidator { tools, program, timeout: Duration::from_secs(600), samples: 4 }
    }

    /// Find `compute-sanitizer`: on PATH, under `$CUDA_HOME/bin`, or `/usr/local/cuda/bin`.
    pub fn locate() -> Result<PathBuf, EvalError> {
        locate_tool("compute-sanitizer").ok_or_else(|| EvalError::Tool {
            tool: "compute-sanitizer".into(),
            message: "not found on PATH, in $CUDA_HOME/bin or in /usr/local/cuda/bin".into(),
            hint: "install the CUDA toolkit (it ships compute-sanitizer) or put it on PATH".into(),
        })
    }
}

/// A CUDA tool by name: PATH first, then the usual toolkit folders.
pub fn locate_tool(name: &str) -> Option<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::env::var_os("PATH").map(|p| std::env::split_paths(&p).collect()).unwrap_or_default();
    for var in ["CUDA_HOME", "CUDA_PATH"] {
        if let Some(home) = std::env::var_os(var) {
            dirs.push(PathBuf::from(home).join("bin"));
        }
    }
    dirs.push(PathBuf::from("/usr/local/cuda/bin"));
    dirs.into_iter().map(|d| d.join(name)).find(|p| p.is_file())
}

impl Validator for SanitizerValidator {
    fn name(&self) -> String {
        "sanitizer".into()
    }

    fn check(&mut self, workers: &mut Workers, candidate: &Context, sample: &Sample) -> Result<Option<Verdict>, EvalError> {
        if sample.index >= self.samples {
            return Ok(None);
        }
        Ok(self.check_all(workers, candidate, std::slice::from_ref(sample))?.pop())
    }
}

/// What one sanitized run left: the tool's findings and the run's own failure, if any.
type ToolRun = (Vec<Finding>, Option<peak_backend::worker::Failure>);

impl SanitizerValidator {
    /// Every sample under every tool, the runs side by side (each is a process of its own
    /// that spends seconds starting the tool and the driver, little on the device): one
    /// verdict per sample, in order.
    pub fn check_all(&self, workers: &mut Workers, candidate: &Context, samples: &[Sample]) -> Result<Vec<Verdict>, EvalError> {
        let backend = candidate.backend().name();
        let command = workers.command(backend)?;
        let options = PoolOptions { run_timeout: self.timeout, startup_timeout: Duration::from_secs(300), max_in_flight: 1, ..workers.options().clone() };
        let runs: Vec<(usize, SanitizerTool)> = (0..samples.len()).flat_map(|i| self.tools.iter().map(move |&t| (i, t))).collect();
        let parallel = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1).clamp(1, 8);
        let mut results: Vec<Option<Result<ToolRun, EvalError>>> = (0..runs.len()).map(|_| None).collect();
        for (batch, slots) in runs.chunks(parallel).zip(results.chunks_mut(parallel)) {
            std::thread::scope(|scope| {
                let handles: Vec<_> = batch
                    .iter()
                    .map(|&(i, tool)| {
                        let (command, options) = (command.clone(), options.clone());
                        let sample = &samples[i];
                        scope.spawn(move || self.run_one(backend, command, options, candidate, sample, tool))
                    })
                    .collect();
                for (slot, handle) in slots.iter_mut().zip(handles) {
                    *slot = Some(handle.join().unwrap_or_else(|_| {
                        Err(EvalError::Tool { tool: "compute-sanitizer".into(), message: "a sanitizer run panicked".into(), hint: String::new() })
                    }));
                }
            });
        }
        let mut verdicts = Vec::with_capacity(samples.len());
        let mut results = results.into_iter().map(|r| r.expect("every run has a result"));
        for _ in samples {
            let mut findings = Vec::new();
            let mut failure = None;
            for _ in &self.tools {
                let (found, failed) = results.next().expect("one result per tool")?;
                findings.extend(found);
                if failure.is_none() {
                    failure = failed.filter(|f| f.category != FailureKind::InvalidConfig);
                }
            }
            verdicts.push(match (findings.is_empty(), failure) {
                // A fault under memcheck is the tool stopping the kernel: the finding says why.
                (false, _) => Verdict::SanitizerFinding { findings },
                (true, Some(f)) => f.into(),
                (true, None) => Verdict::Passed,
            });
        }
        Ok(verdicts)
    }

    /// One sample under one tool, in a worker of its own started under the tool.
    fn run_one(
        &self,
        backend: &str,
        command: peak_backend::worker::WorkerCommand,
        options: PoolOptions,
        candidate: &Context,
        sample: &Sample,
        tool: SanitizerTool,
    ) -> Result<ToolRun, EvalError> {
        let dir = tempfile::tempdir().map_err(|e| EvalError::io(std::env::temp_dir(), e))?;
        let log = dir.path().join("report.txt");
        let command = command.wrapped([
            self.program.clone().into_os_string(),
            "--tool".into(),
            tool.name().into(),
            "--log-file".into(),
            log.clone().into_os_string(),
            "--print-limit".into(),
            "100".into(),
        ]);
        let mut pool = WorkerPool::start(backend, command, options)?;
        let job = Job::new(
            absolute(&candidate.dir),
            sample.params.clone(),
            RunOptions { warmup: 0, repetitions: 0, data_seed: sample.data_seed, ..RunOptions::default() },
        );
        let result = pool.run(job)?;
        // The tool writes (and finishes) its report as the worker exits.
        pool.close(Duration::from_secs(120));
        let text = std::fs::read_to_string(&log).map_err(|e| EvalError::Tool {
            tool: format!("compute-sanitizer --tool {}", tool.name()),
            message: format!("it wrote no report to {}: {e}", log.display()),
            hint: "run the same command by hand to see what the tool says".into(),
        })?;
        Ok((parse_report(tool, &text).findings, result.err()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// memcheck on an out-of-bounds write, compiled with line information (CUDA 12/13 form).
    const MEMCHECK: &str = "\
========= COMPUTE-SANITIZER
========= Invalid __global__ write of size 4 bytes
=========     at oob_write+0x90 in /tmp/ctx/kernel.cu:12
=========     by thread (63,0,0) in block (15,0,0)
=========     Address 0x7f8e1e000400 is out of bounds
=========     and is 1 bytes after the nearest allocation at 0x7f8e1e000000 of size 1024 bytes
=========     Saved host backtrace up to driver entry point at kernel launch time
=========         Host Frame: [0x2f2e4f] in libcuda.so.1
=========         Host Frame: [0x14a3] in peak
=========
========= Program hit CUDA_ERROR_LAUNCH_FAILED (error 719) due to \"unspecified launch failure\" on CUDA API call to cuStreamSynchronize.
=========     Saved host backtrace up to driver entry point at error
=========         Host Frame: [0x2f2e4f] in libcuda.so.1
=========
========= Target application returned an error
========= ERROR SUMMARY: 2 errors
";

    /// racecheck, recent form: the location is in the head line.
    const RACECHECK: &str = "\
========= COMPUTE-SANITIZER
========= Error: Race reported between Write access at race_kernel(float *)+0x1b0 in /tmp/ctx/kernel.cu:9
=========     and Read access at race_kernel(float *)+0x200 in /tmp/ctx/kernel.cu:11 [992 hazards]
=========
========= Warning: Race reported between Read access at race_kernel(float *)+0x220 in /tmp/ctx/kernel.cu:13
=========     and Write access at race_kernel(float *)+0x1b0 in /tmp/ctx/kernel.cu:9 [32 hazards]
=========
========= RACECHECK SUMMARY: 2 hazards displayed (1 error, 1 warning)
";

    /// Older releases: "at 0xOFF in file:line:signature".
    const OLD_FORM: &str = "\
========= COMPUTE-SANITIZER
========= ERROR: Race reported between Write access at 0x000001b0 in /tmp/kernel.cu:9:race_kernel(float*)
=========     and Read access at 0x00000200 in /tmp/kernel.cu:11:race_kernel(float*) [992 hazards]
=========
========= Uninitialized __global__ memory read of size 4 bytes
=========     at 0x70 in read_uninit
=========     by thread (0,0,0) in block (0,0,0)
=========
========= ERROR SUMMARY: 2 errors
";

    const SYNCCHECK_NO_LINES: &str = "\
========= COMPUTE-SANITIZER
========= Barrier error detected. Divergent thread(s) in warp
=========     at divergent_sync+0x110
=========     by thread (0,0,0) in block (0,0,0)
=========
========= ERROR SUMMARY: 1 error
";

    const CLEAN: &str = "========= COMPUTE-SANITIZER\n========= ERROR SUMMARY: 0 errors\n";

    #[test]
    fn memcheck_out_of_bounds_write() {
        let r = parse_report(SanitizerTool::Memcheck, MEMCHECK);
        assert_eq!(r.findings.len(), 1, "{r:#?}");
        let f = &r.findings[0];
        assert_eq!(f.tool, "memcheck");
        assert_eq!(f.error, "Invalid __global__ write of size 4 bytes");
        assert_eq!(f.kernel.as_deref(), Some("oob_write"));
        assert_eq!(f.file.as_deref(), Some("/tmp/ctx/kernel.cu"));
        assert_eq!(f.line, Some(12));
        assert!(f.details.iter().any(|d| d.contains("out of bounds")), "{:?}", f.details);
        assert!(!f.details.iter().any(|d| d.contains("Host Frame")), "{:?}", f.details);
        assert_eq!(r.api_errors.len(), 1);
        assert_eq!(r.error_summary, Some(2));
        assert_eq!(f.headline(), "memcheck: Invalid __global__ write of size 4 bytes in `oob_write` at kernel.cu:12");
    }

    #[test]
    fn racecheck_errors_and_warnings() {
        let r = parse_report(SanitizerTool::Racecheck, RACECHECK);
        assert_eq!(r.findings.len(), 2, "{r:#?}");
        assert_eq!(r.findings[0].severity, "error");
        assert_eq!(r.findings[0].error, "Race reported between Write access");
        assert_eq!(r.findings[0].kernel.as_deref(), Some("race_kernel"));
        assert_eq!(r.findings[0].line, Some(9));
        assert!(r.findings[0].details[0].contains("[992 hazards]"));
        assert_eq!(r.findings[1].severity, "warning");
        assert_eq!(r.findings[1].line, Some(13));
    }

    #[test]
    fn older_location_forms_and_missing_line_info() {
        let r = parse_report(SanitizerTool::Racecheck, OLD_FORM);
        assert_eq!(r.findings.len(), 2, "{r:#?}");
        assert_eq!(r.findings[0].kernel.as_deref(), Some("race_kernel"));
        assert_eq!(r.findings[0].file.as_deref(), Some("/tmp/kernel.cu"));
        assert_eq!(r.findings[0].line, Some(9));
        assert_eq!(r.findings[1].kernel.as_deref(), Some("read_uninit"));
        assert_eq!(r.findings[1].line, None);

        let s = parse_report(SanitizerTool::Synccheck, SYNCCHECK_NO_LINES);
        assert_eq!(s.findings.len(), 1);
        assert_eq!(s.findings[0].kernel.as_deref(), Some("divergent_sync"));
        assert_eq!(s.findings[0].file, None);
        assert_eq!(s.findings[0].error, "Barrier error detected. Divergent thread(s) in warp");
    }

    #[test]
    fn a_clean_report_has_no_findings() {
        let r = parse_report(SanitizerTool::Initcheck, CLEAN);
        assert!(r.findings.is_empty());
        assert_eq!(r.error_summary, Some(0));
    }

    #[test]
    fn tool_names_parse() {
        assert_eq!("racecheck".parse::<SanitizerTool>(), Ok(SanitizerTool::Racecheck));
        assert!("asan".parse::<SanitizerTool>().unwrap_err().contains("memcheck"));
    }
}
