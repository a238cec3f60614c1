//! Speedups between checkpoints, compared at the same inputs.
//!
//! A checkpoint's headline time (`performance.json`'s `best`) is its best at the last input
//! configuration it was tuned at. Two checkpoints need not have been tuned at the same
//! ones (a root measured at 256 x 256, a step tuned at four sizes up to 1024 x 1024), and a
//! ratio of times at different sizes is no speedup: it is taken at inputs both have.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::workflow::best_time;

/// A checkpoint's tuned times: the headline and the best at every input configuration of
/// its `runs`, keyed by the inputs in a canonical form.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct BestTimes {
    headline: Option<f64>,
    headline_inputs: Option<String>,
    at: Vec<(String, f64)>,
}

impl BestTimes {
    pub(crate) fn of(performance: &Value) -> BestTimes {
        let at = performance
            .get("runs")
            .and_then(Value::as_array)
            .map(|runs| {
                runs.iter()
                    .filter_map(|run| Some((canonical(run.get("inputs")?)?, positive(run.pointer("/best/time_ms")?)?)))
                    .collect()
            })
            .unwrap_or_default();
        BestTimes { headline: best_time(performance), headline_inputs: performance.pointer("/best/params/inputs").and_then(canonical), at }
    }

    pub(crate) fn headline(&self) -> Option<f64> {
        self.headline
    }

    /// How many times faster this checkpoint is than `base`: at the headline's inputs if
    /// `base` was timed there, else at the last inputs both were tuned at; `None` when
    /// they share none. Records without per-input times compare headlines.
    pub(crate) fn speedup_over(&self, base: &BestTimes) -> Option<f64> {
        let time = self.headline?;
        if self.at.is_empty() || base.at.is_empty() {
            return Some(base.headline? / time);
        }
        let base_at = |key: &str| base.at.iter().find(|(k, _)| k == key).map(|(_, t)| *t);
        if let Some(base_time) = self.headline_inputs.as_deref().and_then(base_at) {
            return Some(base_time / time);
        }
        self.at.iter().rev().find_map(|(key, t)| Some(base_at(key)? / t))
    }
}

/// How many times faster `performance` is than `base` (both `performance.json` values),
/// compared at the same inputs (see [`BestTimes::speedup_over`]).
pub fn speedup(base: &Value, performance: &Value) -> Option<f64> {
    BestTimes::of(performance).speedup_over(&BestTimes::of(base))
}

/// The inputs as one string with sorted names, so that key order never matters.
fn canonical(inputs: &Value) -> Option<String> {
    let sorted: BTreeMap<&String, &Value> = inputs.as_object()?.iter().collect();
    serde_json::to_string(&sorted).ok()
}

fn positive(time: &Value) -> Option<f64> {
    time.as_f64().filter(|t| t.is_finite() && *t > 0.0)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn record(runs: &[(i64, f64)]) -> Value {
        let (n, t) = *runs.last().unwrap();
        json!({
            "best": {"params": {"inputs": {"n": n}, "tuning": {}}, "time_ms": t},
            "runs": runs.iter().map(|(n, t)| json!({"inputs": {"n": n}, "best": {"params": {"inputs": {"n": n}}, "time_ms": t}})).collect::<Vec<_>>(),
        })
    }

    #[test]
    fn speedups_compare_the_same_inputs() {
        let root = record(&[(256, 0.6)]);
        // Tuned at a second, larger size: its headline (4.8 ms at 1024) is no slowdown.
        let step = record(&[(256, 0.3), (1024, 4.8)]);
        assert_eq!(speedup(&root, &step), Some(2.0));
        let parent = record(&[(256, 0.9), (1024, 9.6)]);
        assert_eq!(speedup(&parent, &step), Some(2.0), "at the headline's inputs, 1024");
        assert_eq!(speedup(&record(&[(512, 1.0)]), &step), None, "no inputs in common");
    }

    #[test]
    fn records_without_runs_compare_headlines_and_key_order_does_not_matter() {
        assert_eq!(speedup(&json!({"best": {"time_ms": 3.0}}), &json!({"best": {"time_ms": 1.5}})), Some(2.0));
        assert_eq!(speedup(&json!({}), &json!({"best": {"time_ms": 1.5}})), None);
        let a = json!({"best": {"params": {"inputs": {"h": 1, "w": 2}}, "time_ms": 1.0}, "runs": [{"inputs": {"h": 1, "w": 2}, "best": {"time_ms": 1.0}}]});
        let b = json!({"best": {"params": {"inputs": {"w": 2, "h": 1}}, "time_ms": 4.0}, "runs": [{"inputs": {"w": 2, "h": 1}, "best": {"time_ms": 4.0}}]});
        assert_eq!(speedup(&b, &a), Some(4.0));
    }
}
