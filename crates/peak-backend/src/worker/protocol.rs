//! The wire protocol between the parent and a worker: line-delimited JSON, one
//! [`Request`] per line down, one [`Message`] per line up (see the module above).

use std::path::PathBuf;
use std::time::Duration;

use peak_spec::{Comparison, DType, ExecParams, HostArray};
use serde::{Deserialize, Serialize};

use crate::backend::{DeviceInfo, KernelResources};
use crate::error::BackendError;
use crate::runner::{RunError, RunOptions, StageTimes, median};
use crate::yardstick::{Ask, Measured};

/// Bumped whenever a message changes shape; the parent refuses a worker of another version.
pub const PROTOCOL_VERSION: u32 = 3;

/// Exit status of a worker that stopped on purpose after a device fault.
pub(super) const FAULT_EXIT: i32 = 70;

/// What to run: one execution parameter of one context.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Job {
    /// The context folder. The worker loads it itself, so the parent must not rewrite it
    /// while the job is queued.
    pub context: PathBuf,
    pub params: ExecParams,
    pub options: RunOptions,
    #[serde(default)]
    pub outputs: OutputMode,
    /// Treat kernels that spill registers (by the compiler's report) as invalid.
    #[serde(default)]
    pub prune_spills: bool,
    /// Stop after compiling, running the launch script and checking the kernels' resources
    /// against the device: nothing is allocated or launched. Where no device runs the
    /// kernel (a deferred apply), this is everything that can be known about it.
    #[serde(default)]
    pub compile_only: bool,
    /// Time this yardstick instead of the kernel (nothing is compiled): the answer's
    /// `times_ms` are its, and `yardstick` says what ran (`crate::yardstick::measure`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub yardstick: Option<Ask>,
    /// How long the run may take once started; `None` takes the pool's default.
    #[serde(skip)]
    pub timeout: Option<Duration>,
}

impl Job {
    pub fn new(context: impl Into<PathBuf>, params: ExecParams, options: RunOptions) -> Job {
        Job { context: context.into(), params, options, outputs: OutputMode::Digest, prune_spills: false, compile_only: false, yardstick: None, timeout: None }
    }
}

/// What the worker sends back of the output arrays.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(tag = "mode", rename_all = "kebab-case")]
pub enum OutputMode {
    /// Digest and element count only.
    #[default]
    Digest,
    /// The bytes too, hex-encoded (small arrays; large ones are better written to files).
    Bytes,
    /// Write each output to `dir/<name>.bin` (raw little-endian elements, written under a
    /// temporary name and renamed), so a large array never crosses the pipe: recording
    /// references.
    Files { dir: PathBuf },
    /// Compare each output in the worker with a reference file of raw little-endian
    /// elements, so large outputs never cross the pipe.
    Compare { references: Vec<ReferenceArray> },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReferenceArray {
    pub name: String,
    pub path: PathBuf,
    pub tolerance: f64,
}

/// Parent → worker.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Request {
    pub id: u64,
    #[serde(flatten)]
    pub job: Job,
}

/// Worker → parent.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "kebab-case")]
pub enum Message {
    Ready {
        protocol: u32,
        pid: u32,
        device: DeviceInfo,
    },
    Unavailable {
        message: String,
    },
    Started {
        id: u64,
        /// The job's inputs come from device copies the worker kept from an earlier job,
        /// which a wild write in that job may have damaged: a fault or a hang is then not
        /// proof against this job, and the parent gives it a second run on a fresh worker.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        kept_inputs: bool,
    },
    Done {
        id: u64,
        result: Result<RunReport, Failure>,
    },
}

/// A successful run, as data.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunReport {
    pub outputs: Vec<OutputReport>,
    /// Inputs (not marked `inout`) whose bytes changed, when `check_inputs` was asked.
    pub modified_inputs: Vec<String>,
    pub times_ms: Vec<f64>,
    pub launches: usize,
    /// The compiler's resource report for each kernel of the module.
    pub kernels: Vec<KernelResources>,
    /// Compiler warnings, kept even on success.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub compile_log: String,
    /// Wall time of the compile (0 when the worker had the module already).
    pub compile_ms: f64,
    /// Wall time of the whole run: upload, runs, read-back.
    pub run_ms: f64,
    /// Where the time went, stage by stage. Absent in answers of older workers (and
    /// records made from them), which then read as zeros.
    #[serde(default)]
    pub stages: StageTimes,
    /// A yardstick job's: what was timed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub yardstick: Option<Measured>,
}

impl RunReport {
    pub fn median_ms(&self) -> Option<f64> {
        median(&self.times_ms)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OutputReport {
    pub name: String,
    pub dtype: DType,
    pub elements: usize,
    /// Content hash (not computed when comparing: hashing large outputs costs time).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hex: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comparison: Option<Comparison>,
    /// Why a requested comparison (or file) could not be made: a missing or mis-sized
    /// reference, an unwritable folder.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compare_error: Option<String>,
}

impl OutputReport {
    /// The array, when its bytes were asked for.
    pub fn array(&self) -> Option<HostArray> {
        let bytes = hex::decode(self.hex.as_ref()?).ok()?;
        Some(HostArray { dtype: self.dtype, bytes })
    }
}

/// Why a job produced no result. `category` is the verdict it stands for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Failure {
    pub category: FailureKind,
    pub message: String,
    /// The compiler's log, for `compile-failed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log: Option<String>,
    /// The compiler options used, for `compile-failed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub options: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FailureKind {
    CompileFailed,
    /// Pruned: the configuration cannot run here. Not a failure of the kernel.
    InvalidConfig,
    LaunchFailed,
    Crashed,
    TimedOut,
}

impl FailureKind {
    pub fn name(self) -> &'static str {
        match self {
            FailureKind::CompileFailed => "compile-failed",
            FailureKind::InvalidConfig => "invalid-config",
            FailureKind::LaunchFailed => "launch-failed",
            FailureKind::Crashed => "crashed",
            FailureKind::TimedOut => "timed-out",
        }
    }
}

impl Failure {
    pub(super) fn new(category: FailureKind, message: impl Into<String>) -> Failure {
        Failure { category, message: message.into(), log: None, options: None }
    }
}

impl From<&RunError> for Failure {
    fn from(err: &RunError) -> Failure {
        let category = match err.category() {
            "compile-failed" => FailureKind::CompileFailed,
            "invalid-config" => FailureKind::InvalidConfig,
            "crashed" => FailureKind::Crashed,
            _ => FailureKind::LaunchFailed,
        };
        match err {
            RunError::Compile(BackendError::Compile { log, options }) => {
                Failure { category, message: "compilation failed".into(), log: Some(log.clone()), options: Some(options.clone()) }
            }
            RunError::Invalid(reason) => Failure::new(category, reason.clone()),
            other => Failure::new(category, other.to_string()),
        }
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.category.name(), self.message)?;
        if let Some(log) = &self.log {
            write!(f, "\n{log}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use peak_spec::compare;

    use super::*;

    #[test]
    fn messages_round_trip_through_json() {
        let mut params = ExecParams::default();
        params.inputs.insert("n".into(), 64);
        params.tuning.insert("BX".into(), 16);
        let request = Request {
            id: 3,
            job: Job {
                outputs: OutputMode::Compare { references: vec![ReferenceArray { name: "C".into(), path: "/tmp/c.bin".into(), tolerance: 1e-5 }] },
                ..Job::new("/ctx", params.clone(), RunOptions::default())
            },
        };
        let line = serde_json::to_string(&request).unwrap();
        assert!(line.contains("\"mode\":\"compare\""), "{line}");
        let back: Request = serde_json::from_str(&line).unwrap();
        assert_eq!(back.id, 3);
        assert_eq!(back.job.params, params);
        assert_eq!(back.job.outputs, request.job.outputs);

        let failure = Failure {
            category: FailureKind::CompileFailed,
            message: "compilation failed".into(),
            log: Some("x.cl:3: error".into()),
            options: Some("-D BX=16".into()),
        };
        let done = Message::Done { id: 3, result: Err(failure.clone()) };
        let line = serde_json::to_string(&done).unwrap();
        assert!(line.contains("\"category\":\"compile-failed\""), "{line}");
        match serde_json::from_str::<Message>(&line).unwrap() {
            Message::Done { id: 3, result: Err(f) } => assert_eq!(f, failure),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_yardstick_job_says_so_and_a_kernel_job_does_not() {
        let kernel = serde_json::to_string(&Job::new("/ctx", ExecParams::default(), RunOptions::default())).unwrap();
        assert!(!kernel.contains("yardstick"), "{kernel}");
        let job = Job { yardstick: Some(Ask::Vendor), ..Job::new("/ctx", ExecParams::default(), RunOptions::default()) };
        let line = serde_json::to_string(&Request { id: 1, job }).unwrap();
        assert!(line.contains("\"yardstick\":\"vendor\""), "{line}");
        assert_eq!(serde_json::from_str::<Request>(&line).unwrap().job.yardstick, Some(Ask::Vendor));
    }

    #[test]
    fn poisoned_comparisons_survive_json() {
        let reference = HostArray::init(DType::F32, 8, peak_spec::Values::Random, 1);
        let poisoned = HostArray::poison(DType::F32, 8);
        let c = compare(&poisoned, &reference, 1e-5);
        assert!(c.max_error.is_infinite() && c.worst_value.is_nan());
        let text = serde_json::to_string(&c).unwrap();
        let back: Comparison = serde_json::from_str(&text).unwrap();
        assert!(back.max_error.is_infinite() && back.worst_value.is_nan() && !back.passed, "{text}");
        assert_eq!(back.non_finite, 8);
    }

    #[test]
    fn output_bytes_decode_back() {
        let array = HostArray::init(DType::F32, 10, peak_spec::Values::Arange, 0);
        let report = OutputReport {
            name: "C".into(),
            dtype: DType::F32,
            elements: 10,
            digest: Some(array.digest()),
            hex: Some(hex::encode(&array.bytes)),
            comparison: None,
            compare_error: None,
        };
        let back: OutputReport = serde_json::from_str(&serde_json::to_string(&report).unwrap()).unwrap();
        assert_eq!(back.array().unwrap(), array);
    }

    #[test]
    fn run_errors_map_to_categories_and_keep_the_log() {
        let compile = RunError::Compile(BackendError::Compile { log: "k.cu(3): error: x".into(), options: "-arch=sm_90".into() });
        let f = Failure::from(&compile);
        assert_eq!(f.category, FailureKind::CompileFailed);
        assert_eq!(f.log.as_deref(), Some("k.cu(3): error: x"));
        assert_eq!(f.options.as_deref(), Some("-arch=sm_90"));
        assert_eq!(Failure::from(&RunError::Invalid("too big".into())).category, FailureKind::InvalidConfig);
        assert_eq!(Failure::from(&RunError::Fault(BackendError::Fault("illegal address".into()))).category, FailureKind::Crashed);
        assert_eq!(Failure::from(&RunError::Launch(BackendError::Launch { kernel: "k".into(), message: "m".into() })).category, FailureKind::LaunchFailed);
    }
}
