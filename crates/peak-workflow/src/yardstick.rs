//! A checkpoint's yardstick (`performance.json`'s `baseline`, written by
//! `peak_eval::yardstick`), read for `log` and `show`: what it is, its time, and the
//! checkpoint's speed as a percentage of it at the same inputs. Records made before
//! yardsticks were recorded have none, and read as such.

use serde::Serialize;
use serde_json::Value;

use crate::speedup::{BestTimes, format_inputs, positive};

pub use peak_record::NOT_AVAILABLE;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Yardstick {
    /// `cublaslt`, `copy`, or [`NOT_AVAILABLE`].
    pub kind: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub time_ms: Option<f64>,
    /// The inputs it was timed at (the headline's).
    pub inputs: Option<Value>,
    /// The yardstick's time over the checkpoint's best time at the same inputs, in
    /// percent: 100 when the kernel is as fast as the vendor library (or moves its bytes
    /// as fast as a copy). `None` where either time is missing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub percent: Option<f64>,
    /// Why there is no time.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl Yardstick {
    /// The `baseline` of a `performance.json`, with the percentage taken against `times`
    /// (the same record's, which carry its `baseline`).
    pub(crate) fn of(times: &BestTimes) -> Option<Yardstick> {
        let baseline = times.baseline()?;
        let time_ms = baseline.time_ms.and_then(positive);
        let inputs = serde_json::to_value(&baseline.inputs).ok();
        let kernel_ms = inputs.as_ref().and_then(|i| times.time_at(i));
        let percent = time_ms.zip(kernel_ms).map(|(y, k)| 100.0 * y / k);
        Some(Yardstick { kind: baseline.kind.clone(), time_ms, inputs, percent, reason: baseline.reason.clone() })
    }

    /// The yardstick's name for people: `cuBLASLt`, `copy`.
    pub fn label(&self) -> String {
        match self.kind.as_str() {
            "cublaslt" => "cuBLASLt".to_string(),
            other => other.to_string(),
        }
    }

    /// `62.1% cuBLASLt`, `48.0% copy`; `- vendor` where nothing was timed.
    pub fn cell(&self) -> String {
        match self.percent {
            Some(p) => format!("{:>6} {}", format!("{p:.1}%"), self.label()),
            None => format!("{:>6} vendor", "-"),
        }
    }

    /// One line for `peak show`: what was timed, at which inputs, and the percentage, or
    /// why nothing was.
    pub fn describe(&self, format_ms: impl Fn(f64) -> String) -> String {
        let at = self.inputs.as_ref().map(|i| format!(" at {}", format_inputs(i))).unwrap_or_default();
        match (self.time_ms, self.percent) {
            (Some(t), Some(p)) => format!("{label} {}{at} (kernel at {p:.1}% of {label})", format_ms(t), label = self.label()),
            (Some(t), None) => format!("{} {}{at}", self.label(), format_ms(t)),
            _ => format!("{}{at}: {}", self.kind, self.reason.as_deref().unwrap_or("not timed")),
        }
    }
}

/// The yardstick a `performance.json` records, with the checkpoint's percentage of it.
pub fn yardstick(performance: &Value) -> Option<Yardstick> {
    Yardstick::of(&BestTimes::of(performance))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_percentage_is_taken_at_the_yardsticks_inputs() {
        let record = json!({
            "best": {"params": {"inputs": {"n": 64}}, "time_ms": 2.0},
            "runs": [
                {"inputs": {"n": 32}, "best": {"time_ms": 0.5}},
                {"inputs": {"n": 64}, "best": {"time_ms": 2.0}},
            ],
            "baseline": {"kind": "copy", "time_ms": 0.5, "inputs": {"n": 64}},
        });
        let y = yardstick(&record).unwrap();
        assert_eq!(y.percent, Some(25.0));
        assert_eq!(y.cell(), " 25.0% copy");
        let mut at_32 = record.clone();
        at_32["baseline"]["inputs"] = json!({"n": 32});
        assert_eq!(yardstick(&at_32).unwrap().percent, Some(100.0), "against n=32's time, not the headline's");
        at_32["baseline"]["inputs"] = json!({"n": 16});
        assert_eq!(yardstick(&at_32).unwrap().percent, None, "no time at n=16");
    }

    #[test]
    fn older_records_have_none_and_a_record_without_a_time_says_why() {
        assert_eq!(yardstick(&json!({"best": {"time_ms": 1.0}})), None);
        let none = yardstick(
            &json!({"best": {"params": {"inputs": {"n": 8}}, "time_ms": 1.0}, "baseline": {"kind": "n/a", "inputs": {"n": 8}, "reason": "no vendor GEMM"}}),
        )
        .unwrap();
        assert_eq!((none.kind.as_str(), none.percent), (NOT_AVAILABLE, None));
        assert_eq!(none.cell(), "     - vendor");
        assert_eq!(none.describe(|t| format!("{t} ms")), "n/a at n=8: no vendor GEMM");
        let lt =
            yardstick(&json!({"best": {"params": {"inputs": {"n": 8}}, "time_ms": 4.0}, "baseline": {"kind": "cublaslt", "time_ms": 1.0, "inputs": {"n": 8}}}))
                .unwrap();
        assert_eq!(lt.cell(), " 25.0% cuBLASLt");
        assert_eq!(lt.describe(|t| format!("{t} ms")), "cuBLASLt 1 ms at n=8 (kernel at 25.0% of cuBLASLt)");
    }
}
