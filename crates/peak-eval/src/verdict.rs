//! Verdicts are data: what one validator concluded about one sampled execution parameter.
//!
//! They serialize with a `category` tag whose values are the names reports and workflows
//! count by: `passed`, `compile-failed`, `invalid-config`, `launch-failed`, `crashed`,
//! `timed-out`, `wrong-output`, `modified-input`, `sanitizer-finding`.

use peak_backend::worker::{Failure, FailureKind, OutputComparison, json_f64};
use serde::{Deserialize, Serialize};

use crate::sanitizer::Finding;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "category", rename_all = "kebab-case")]
pub enum Verdict {
    Passed,
    CompileFailed {
        message: String,
        #[serde(default)]
        log: String,
        #[serde(default)]
        options: String,
    },
    /// Pruned: this execution parameter cannot run on this device. Not a failure.
    InvalidConfig { reason: String },
    LaunchFailed { message: String },
    Crashed { message: String },
    TimedOut { message: String },
    WrongOutput(WrongOutput),
    /// Input arrays not marked `inout` changed during the run.
    ModifiedInput { arrays: Vec<String> },
    SanitizerFinding { findings: Vec<Finding> },
}

/// The worst output of a run that did not match its reference.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WrongOutput {
    pub array: String,
    /// ‖out − ref‖₂ / ‖ref‖₂, the pass criterion, and the tolerance it exceeded.
    #[serde(with = "json_f64")]
    pub relative_error: f64,
    #[serde(with = "json_f64")]
    pub tolerance: f64,
    #[serde(with = "json_f64")]
    pub max_error: f64,
    #[serde(with = "json_f64")]
    pub mean_error: f64,
    pub worst_index: usize,
    #[serde(with = "json_f64")]
    pub worst_value: f64,
    #[serde(with = "json_f64")]
    pub worst_expected: f64,
    /// NaN or infinite elements, unwritten (poisoned) ones included.
    pub non_finite: usize,
}

impl WrongOutput {
    pub fn from_comparison(array: &str, c: &OutputComparison) -> WrongOutput {
        WrongOutput {
            array: array.to_string(),
            relative_error: c.relative_error,
            tolerance: c.tolerance,
            max_error: c.max_error,
            mean_error: c.mean_error,
            worst_index: c.worst_index,
            worst_value: c.worst_value,
            worst_expected: c.worst_expected,
            non_finite: c.non_finite,
        }
    }
}

impl Verdict {
    pub fn category(&self) -> &'static str {
        match self {
            Verdict::Passed => "passed",
            Verdict::CompileFailed { .. } => "compile-failed",
            Verdict::InvalidConfig { .. } => "invalid-config",
            Verdict::LaunchFailed { .. } => "launch-failed",
            Verdict::Crashed { .. } => "crashed",
            Verdict::TimedOut { .. } => "timed-out",
            Verdict::WrongOutput(_) => "wrong-output",
            Verdict::ModifiedInput { .. } => "modified-input",
            Verdict::SanitizerFinding { .. } => "sanitizer-finding",
        }
    }

    /// A verdict against the kernel. `passed` and `invalid-config` are not.
    pub fn is_failure(&self) -> bool {
        !matches!(self, Verdict::Passed | Verdict::InvalidConfig { .. })
    }

    /// One line for people.
    pub fn summary(&self) -> String {
        match self {
            Verdict::Passed => "passed".into(),
            Verdict::CompileFailed { message, log, .. } => {
                let first = log.lines().find(|l| l.contains("error")).or_else(|| log.lines().next()).unwrap_or(message);
                format!("compile failed: {first}")
            }
            Verdict::InvalidConfig { reason } => format!("pruned: {reason}"),
            Verdict::LaunchFailed { message } | Verdict::Crashed { message } | Verdict::TimedOut { message } => {
                message.lines().next().unwrap_or_default().to_string()
            }
            Verdict::WrongOutput(w) if w.non_finite > 0 => {
                format!("{}: {} non-finite elements (NaN, or never written), first bad at [{}]", w.array, w.non_finite, w.worst_index)
            }
            Verdict::WrongOutput(w) => format!(
                "{}: relative error {:.2e} > tolerance {:.1e}; worst at [{}]: {} vs {} expected",
                w.array, w.relative_error, w.tolerance, w.worst_index, w.worst_value, w.worst_expected
            ),
            Verdict::ModifiedInput { arrays } => format!("read-only inputs changed: {}", arrays.join(", ")),
            Verdict::SanitizerFinding { findings } => {
                let first = findings.first().map(|f| f.headline()).unwrap_or_default();
                format!("{} sanitizer finding(s); first: {first}", findings.len())
            }
        }
    }
}

impl From<Failure> for Verdict {
    fn from(f: Failure) -> Verdict {
        match f.category {
            FailureKind::CompileFailed => Verdict::CompileFailed { message: f.message, log: f.log.unwrap_or_default(), options: f.options.unwrap_or_default() },
            FailureKind::InvalidConfig => Verdict::InvalidConfig { reason: f.message },
            FailureKind::LaunchFailed => Verdict::LaunchFailed { message: f.message },
            FailureKind::Crashed => Verdict::Crashed { message: f.message },
            FailureKind::TimedOut => Verdict::TimedOut { message: f.message },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn categories_are_the_tag_and_survive_json() {
        let verdicts = vec![
            Verdict::Passed,
            Verdict::CompileFailed { message: "m".into(), log: "k.cl:3:1: error: boom".into(), options: "-D X=1".into() },
            Verdict::InvalidConfig { reason: "r".into() },
            Verdict::LaunchFailed { message: "m".into() },
            Verdict::Crashed { message: "m".into() },
            Verdict::TimedOut { message: "m".into() },
            Verdict::WrongOutput(WrongOutput {
                array: "C".into(),
                relative_error: f64::INFINITY,
                tolerance: 1e-5,
                max_error: f64::INFINITY,
                mean_error: 0.5,
                worst_index: 3,
                worst_value: f64::NAN,
                worst_expected: 1.5,
                non_finite: 2,
            }),
            Verdict::ModifiedInput { arrays: vec!["A".into()] },
            Verdict::SanitizerFinding { findings: vec![] },
        ];
        for v in verdicts {
            let text = serde_json::to_string(&v).unwrap();
            assert!(text.contains(&format!("\"category\":\"{}\"", v.category())), "{text}");
            let back: Verdict = serde_json::from_str(&text).unwrap();
            assert_eq!(back.category(), v.category());
            if let (Verdict::WrongOutput(a), Verdict::WrongOutput(b)) = (&v, &back) {
                assert!(b.worst_value.is_nan() && b.max_error.is_infinite());
                assert_eq!(a.worst_index, b.worst_index);
            }
        }
    }

    #[test]
    fn only_kernel_faults_count_as_failures() {
        assert!(!Verdict::Passed.is_failure());
        assert!(!Verdict::InvalidConfig { reason: String::new() }.is_failure());
        assert!(Verdict::TimedOut { message: String::new() }.is_failure());
        assert!(Verdict::ModifiedInput { arrays: vec![] }.is_failure());
    }
}
