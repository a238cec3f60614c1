//! Deferred applies: authoring where there is no GPU.
//!
//! The GPU peak's users tune on is often a remote server or a cluster node that only takes
//! batch jobs. A deferred apply runs its passes and its repair loop as usual, but judges
//! the candidate by compiling it rather than running it: on the execution parameters
//! validation would sample, each variant is compiled, its launch script run and its
//! kernels' resources checked against the target, in a compile-only worker (CUDA and HIP
//! through NVRTC for the target architecture, no device needed; OpenCL and HLSL through
//! the local driver, where there is one). A compile error goes back to the executor like
//! any other; configurations the compiler or the launch script rule out are pruned. A
//! candidate that compiles becomes a checkpoint whose `validation.json` says
//! `"verdict": "deferred"` and holds what was checked, with an empty `performance.json`;
//! `peak replay` on the GPU machine re-runs the recorded responses and validates and tunes
//! every step there.

use std::collections::BTreeMap;

use anyhow::{Result, anyhow};
use peak_backend::worker::{Job, RunReport};
use peak_backend::{KernelResources, RunOptions};
use peak_eval::hash::device_identity;
use peak_eval::validate::Sample;
use peak_eval::{Verdict, Workers};
use peak_record::{Record, ValidationRecord};
use peak_spec::{Context, ExecParams};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// Compile-check instead of validating and tuning (`peak apply --defer`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Defer {
    /// NVRTC's target for CUDA and HIP (`sm_90a` when `None`, as for `peak compile`):
    /// the GPU the workflow will be validated and tuned on.
    pub arch: Option<String>,
}

/// Start the compile-only worker for `backend`, so that a backend with no compiler here
/// refuses before any pass is asked for.
pub(crate) fn prepare(workers: &mut Workers, backend: &str, defer: &Defer) -> Result<()> {
    workers.compile_pool(backend, defer.arch.as_deref()).map(|_| ()).map_err(|e| {
        anyhow!(
            "--defer: {backend} cannot be compile-checked here: {e}\nhint: CUDA and HIP need NVRTC only (scripts/install-nvrtc.sh); OpenCL and HLSL compile with a local driver, so without one apply where the device is"
        )
    })
}

/// What the compile check found.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct CompileCheck {
    /// The compile-only worker's device: the target architecture, or the local driver.
    pub target: String,
    /// Samples per status (`compiled`, `invalid-config`, `compile-failed`, ...).
    pub counts: BTreeMap<String, usize>,
    pub samples: Vec<Checked>,
}

/// One sampled execution parameter, compile-checked.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Checked {
    pub index: usize,
    pub params: ExecParams,
    /// `compiled`, or the verdict's category (`invalid-config` is pruned, not failed).
    pub status: String,
    /// Registers, shared memory and spills per kernel, where the compiler reports them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub kernels: Vec<KernelResources>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verdict: Option<Verdict>,
}

/// Compile `candidate` on every sample in the compile-only worker, all queued at once so
/// the worker compiles them on every core.
pub(crate) fn compile_check(workers: &mut Workers, candidate: &Context, samples: &[Sample], defer: &Defer) -> Result<CompileCheck> {
    let pool = workers.compile_pool(candidate.backend().name(), defer.arch.as_deref())?;
    let dir = std::fs::canonicalize(&candidate.dir).unwrap_or_else(|_| candidate.dir.clone());
    let options = RunOptions { warmup: 0, repetitions: 0, ..RunOptions::default() };
    let ids: Vec<u64> = samples.iter().map(|s| pool.submit(Job { compile_only: true, ..Job::new(&dir, s.params.clone(), options.clone()) })).collect();
    let mut answers: BTreeMap<u64, Result<RunReport, peak_backend::worker::Failure>> = BTreeMap::new();
    while answers.len() < ids.len() {
        let answer = pool.next_answer()?.ok_or_else(|| anyhow!("the compile-only worker stopped answering"))?;
        answers.insert(answer.id, answer.result);
    }
    let checked: Vec<Checked> = samples
        .iter()
        .zip(&ids)
        .map(|(sample, id)| {
            let (status, kernels, verdict) = match answers.remove(id).expect("every job was answered") {
                Ok(report) => ("compiled".to_string(), report.kernels, None),
                Err(failure) => {
                    let verdict = Verdict::from(failure);
                    (verdict.category().to_string(), Vec::new(), Some(verdict))
                }
            };
            Checked { index: sample.index, params: sample.params.clone(), status, kernels, verdict }
        })
        .collect();
    let mut counts = BTreeMap::new();
    for c in &checked {
        *counts.entry(c.status.clone()).or_insert(0) += 1;
    }
    Ok(CompileCheck { target: device_identity(pool.device()), counts, samples: checked })
}

impl CompileCheck {
    /// Why the candidate goes back to the executor, if it does: the first sample that
    /// failed (a compile error, a launch script that broke), or every sample pruned.
    pub fn failure(&self) -> Option<Verdict> {
        if let Some(v) = self.samples.iter().filter_map(|c| c.verdict.as_ref()).find(|v| v.is_failure()) {
            return Some(v.clone());
        }
        self.all_pruned().then(|| Verdict::InvalidConfig { reason: "every sampled execution parameter was pruned as invalid; nothing compiled".into() })
    }

    /// Whether the launch script pruned every sample, so that nothing compiled and nothing failed.
    pub fn all_pruned(&self) -> bool {
        self.counts.get("compiled").copied().unwrap_or(0) == 0 && !self.samples.iter().filter_map(|c| c.verdict.as_ref()).any(Verdict::is_failure)
    }

    /// The deferred checkpoint's `validation.json`.
    pub fn validation(&self, elapsed_s: f64) -> Value {
        json!({
            "verdict": "deferred",
            "why": "compile-checked only, where no GPU runs it; `peak replay` validates and tunes it on the GPU",
            "compile_check": self,
            "elapsed_s": elapsed_s,
        })
    }
}

/// What a deferred checkpoint was checked on, in one line.
pub(crate) fn summary(check: &CompileCheck) -> String {
    let pruned = check.counts.get("invalid-config").copied().unwrap_or(0);
    let compiled = check.counts.get("compiled").copied().unwrap_or(0);
    let pruned = if pruned > 0 { format!(", {pruned} pruned") } else { String::new() };
    format!("{compiled} configuration(s) compiled{pruned} for {}", check.target)
}

/// Whether a recorded checkpoint was deferred (its `validation.json`; one that does not
/// read was not).
pub fn is_deferred(validation: &Value) -> bool {
    ValidationRecord::from_json(validation).is_ok_and(|v| v.is_deferred())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn checked(status: &str, verdict: Option<Verdict>) -> Checked {
        Checked { index: 0, params: ExecParams::default(), status: status.into(), kernels: Vec::new(), verdict }
    }

    fn check(samples: Vec<Checked>) -> CompileCheck {
        let mut counts = BTreeMap::new();
        for c in &samples {
            *counts.entry(c.status.clone()).or_insert(0) += 1;
        }
        CompileCheck { target: "cuda sm_90a".into(), counts, samples }
    }

    #[test]
    fn pruned_samples_pass_a_compile_error_fails_and_nothing_compiled_fails() {
        let pruned = || checked("invalid-config", Some(Verdict::InvalidConfig { reason: "too big".into() }));
        assert_eq!(check(vec![checked("compiled", None), pruned()]).failure(), None);
        let error = Verdict::CompileFailed { message: "compilation failed".into(), log: "k.cu(3): error: x".into(), options: String::new() };
        assert_eq!(check(vec![checked("compiled", None), checked("compile-failed", Some(error.clone()))]).failure(), Some(error));
        assert_eq!(check(vec![pruned(), pruned()]).failure().map(|v| v.category()), Some("invalid-config"));
    }

    #[test]
    fn the_validation_record_says_deferred_and_what_compiled() {
        let c = check(vec![checked("compiled", None)]);
        let v = c.validation(0.5);
        assert!(is_deferred(&v));
        assert_eq!(v["compile_check"]["counts"]["compiled"], 1);
        assert_eq!(v["compile_check"]["samples"][0]["status"], "compiled");
        assert_eq!(summary(&c), "1 configuration(s) compiled for cuda sm_90a");
    }
}
