//! Verdicts are data: what one validator concluded about one sampled execution parameter.
//!
//! They serialize with a `category` tag whose values are the names reports and workflows
//! count by: `passed`, `compile-failed`, `invalid-config`, `launch-failed`, `crashed`,
//! `timed-out`, `wrong-output`, `modified-input`, `sanitizer-finding`. The last carries the
//! [`Finding`]s the sanitizer's log was parsed into (`sanitizer.rs`), so they are data here too.

use std::path::Path;

use peak_backend::worker::{Failure, FailureKind};
use peak_spec::Comparison;
use serde::{Deserialize, Serialize};

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
    InvalidConfig {
        reason: String,
    },
    LaunchFailed {
        message: String,
    },
    Crashed {
        message: String,
    },
    TimedOut {
        message: String,
    },
    WrongOutput(WrongOutput),
    /// Input arrays not marked `inout` changed during the run.
    ModifiedInput {
        arrays: Vec<String>,
    },
    SanitizerFinding {
        findings: Vec<Finding>,
    },
}

/// The worst output of a run that did not match its reference: the array, and how it
/// compared. In JSON the comparison's fields stand beside `array` and `category`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WrongOutput {
    pub array: String,
    #[serde(flatten)]
    pub comparison: Comparison,
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
            Verdict::WrongOutput(WrongOutput { array, comparison: c }) if c.non_finite > 0 => {
                format!(
                    "{array}: {} non-finite elements (NaN, never written, or written where the reference never writes), first bad at [{}]",
                    c.non_finite, c.worst_index
                )
            }
            Verdict::WrongOutput(WrongOutput { array, comparison: c }) => format!(
                "{array}: relative error {:.2e} > tolerance {:.1e}; worst at [{}]: {} vs {} expected",
                c.relative_error, c.tolerance, c.worst_index, c.worst_value, c.worst_expected
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

/// One error or warning the tool reported.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Finding {
    pub tool: String,
    /// "error" or "warning" (racecheck's warp-level hazards are warnings).
    pub severity: String,
    /// The tool's first line, e.g. "Invalid __global__ write of size 4 bytes".
    pub error: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
    /// The indented lines that followed (thread, block, address), host frames left out.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub details: Vec<String>,
}

impl Finding {
    pub fn headline(&self) -> String {
        let mut text = format!("{}: {}", self.tool, self.error);
        if let Some(kernel) = &self.kernel {
            text.push_str(&format!(" in `{kernel}`"));
        }
        match (&self.file, self.line) {
            (Some(file), Some(line)) => text.push_str(&format!(" at {}:{line}", short_path(file))),
            (Some(file), None) => text.push_str(&format!(" in {}", short_path(file))),
            _ => {}
        }
        text
    }
}

fn short_path(file: &str) -> &str {
    Path::new(file).file_name().and_then(|n| n.to_str()).unwrap_or(file)
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
                comparison: Comparison {
                    relative_error: f64::INFINITY,
                    tolerance: 1e-5,
                    max_error: f64::INFINITY,
                    mean_error: 0.5,
                    worst_index: 3,
                    worst_value: f64::NAN,
                    worst_expected: 1.5,
                    non_finite: 2,
                    first_non_finite: Some(3),
                    passed: false,
                },
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
                assert!(b.comparison.worst_value.is_nan() && b.comparison.max_error.is_infinite());
                assert_eq!(a.comparison.worst_index, b.comparison.worst_index);
            }
        }
    }

    #[test]
    fn wrong_output_verdicts_written_before_the_shared_comparison_still_read() {
        let text = r#"{"category":"wrong-output","array":"C","relative_error":0.5,"tolerance":1e-5,"max_error":"inf","mean_error":0.1,"worst_index":3,"worst_value":"NaN","worst_expected":1.5,"non_finite":2}"#;
        let Verdict::WrongOutput(w) = serde_json::from_str::<Verdict>(text).unwrap() else { panic!("not a wrong output") };
        assert_eq!((w.array.as_str(), w.comparison.worst_index, w.comparison.non_finite), ("C", 3, 2));
        assert!(w.comparison.max_error.is_infinite() && w.comparison.worst_value.is_nan() && !w.comparison.passed);
    }

    #[test]
    fn only_kernel_faults_count_as_failures() {
        assert!(!Verdict::Passed.is_failure());
        assert!(!Verdict::InvalidConfig { reason: String::new() }.is_failure());
        assert!(Verdict::TimedOut { message: String::new() }.is_failure());
        assert!(Verdict::ModifiedInput { arrays: vec![] }.is_failure());
    }
}
