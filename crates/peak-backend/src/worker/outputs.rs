//! The finish stage of the worker: each output hashed, returned, written to a file or
//! compared with its reference, as the request's [`OutputMode`] asks.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use peak_spec::compare_bytes;

use crate::runner::ms_since;

use super::execute::Executed;
use super::protocol::{OutputMode, OutputReport, RunReport};

pub(super) fn finish(executed: Executed, mode: &OutputMode, references: &Mutex<ReferenceCache>) -> RunReport {
    let clock = Instant::now();
    let Executed { result, compiled, start, .. } = executed;
    let mut outputs = Vec::with_capacity(result.outputs.len());
    for (name, array) in result.outputs {
        let mut report =
            OutputReport { name: name.clone(), dtype: array.dtype, elements: array.len(), digest: None, hex: None, comparison: None, compare_error: None };
        match mode {
            OutputMode::Digest => report.digest = Some(array.digest()),
            OutputMode::Bytes => {
                report.digest = Some(array.digest());
                report.hex = Some(hex::encode(&array.bytes));
            }
            OutputMode::Files { dir } => {
                report.digest = Some(array.digest());
                if let Err(e) = write_output(dir, &name, &array.bytes) {
                    report.compare_error = Some(format!("cannot write output {name} to {}: {e}", dir.display()));
                }
            }
            OutputMode::Compare { references: wanted } => match wanted.iter().find(|r| r.name == name) {
                None => report.compare_error = Some(format!("no reference given for output {name}")),
                Some(r) => {
                    let loaded = references.lock().unwrap_or_else(|p| p.into_inner()).get(&r.path);
                    match loaded {
                        Err(e) => report.compare_error = Some(e),
                        Ok(bytes) if bytes.len() != array.bytes.len() => {
                            report.compare_error =
                                Some(format!("reference {} holds {} bytes, the output {name} has {}", r.path.display(), bytes.len(), array.bytes.len()))
                        }
                        // The reference is borrowed from the cache: every variant compares with it.
                        Ok(bytes) => report.comparison = Some(compare_bytes(array.dtype, &array.bytes, &bytes, r.tolerance)),
                    }
                }
            },
        }
        outputs.push(report);
    }
    let mut stages = result.stages;
    stages.compare_ms += ms_since(clock);
    RunReport {
        outputs,
        modified_inputs: result.modified_inputs,
        times_ms: result.times_ms,
        launches: result.launches,
        kernels: compiled.module.kernels.clone(),
        compile_log: compiled.module.log.clone(),
        compile_ms: compiled.compile_ms,
        run_ms: start.elapsed().as_secs_f64() * 1e3,
        stages,
        yardstick: None,
    }
}

/// Where [`OutputMode::Files`] puts an output.
pub fn output_file(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!("{name}.bin"))
}

fn write_output(dir: &Path, name: &str, bytes: &[u8]) -> std::io::Result<()> {
    let path = output_file(dir, name);
    let tmp = dir.join(format!(".{name}.bin.{}", std::process::id()));
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, &path)
}

/// Reference arrays read from disk, kept while they are in use (a tuning run compares
/// every variant with the same one).
#[derive(Default)]
pub(super) struct ReferenceCache {
    entries: VecDeque<(PathBuf, Arc<Vec<u8>>)>,
}

impl ReferenceCache {
    const KEEP: usize = 8;

    fn get(&mut self, path: &Path) -> Result<Arc<Vec<u8>>, String> {
        if let Some((_, bytes)) = self.entries.iter().find(|(p, _)| p == path) {
            return Ok(bytes.clone());
        }
        let bytes = Arc::new(std::fs::read(path).map_err(|e| format!("cannot read reference {}: {e}", path.display()))?);
        self.entries.push_back((path.to_path_buf(), bytes.clone()));
        while self.entries.len() > Self::KEEP {
            self.entries.pop_front();
        }
        Ok(bytes)
    }
}

/// Whether a run's outputs failed their comparison, or inputs it must not change changed:
/// what damaged inputs would show as.
pub(super) fn looks_wrong(report: &RunReport) -> bool {
    !report.modified_inputs.is_empty() || report.outputs.iter().any(|o| o.comparison.as_ref().is_some_and(|c| !c.passed))
}
