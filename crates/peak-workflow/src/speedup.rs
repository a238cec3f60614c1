//! Speedups between checkpoints, compared at the same inputs.
//!
//! A checkpoint's headline time (`performance.json`'s `best`) is its best at the last input
//! configuration it was tuned at. Two checkpoints need not have been tuned at the same
//! ones (a root measured at 256 x 256, a step tuned at four sizes up to 1024 x 1024), and a
//! ratio of times at different sizes is no speedup: it is taken at inputs both have.

use std::collections::BTreeMap;

use peak_record::{Baseline, PerformanceRecord, Ranked, Record};
use serde_json::Value;

/// A checkpoint's tuned times: the headline and the best at every input configuration of
/// its `runs`, keyed by the inputs in a canonical form.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct BestTimes {
    headline: Option<f64>,
    headline_inputs: Option<String>,
    headline_inputs_value: Option<Value>,
    /// The headline's interquartile range (`best.spread`), where recorded.
    headline_iqr: Option<Iqr>,
    /// (canonical key, the inputs as recorded, best time, its interquartile range), in
    /// `runs` order.
    at: Vec<(String, Value, f64, Option<Iqr>)>,
    /// The record's yardstick (`baseline`), for its percentage (`Yardstick::of`).
    baseline: Option<Baseline>,
}

/// The first and third quartiles of a time's repetitions (`spread.q1_ms`, `q3_ms`).
pub(crate) type Iqr = (f64, f64);

/// A recorded entry's interquartile range (its `spread`'s `q1_ms` and `q3_ms`).
fn iqr(entry: &Ranked) -> Option<Iqr> {
    entry.spread.map(|s| (s.q1_ms, s.q3_ms))
}

/// Whether two times are within each other's spread: their interquartile ranges overlap.
/// `None` where either side records no spread.
pub(crate) fn within_spread(a: Option<Iqr>, b: Option<Iqr>) -> Option<bool> {
    let ((a1, a3), (b1, b3)) = (a?, b?);
    Some(a1 <= b3 && b1 <= a3)
}

/// A speedup and the inputs it was taken at (`None` where the records name none).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SpeedupAt {
    pub ratio: f64,
    pub inputs: Option<Value>,
    /// Both times' interquartile ranges overlap: the difference is within the noise of
    /// the measurements. `None` where either records no spread.
    pub within_spread: Option<bool>,
}

impl BestTimes {
    /// The times of a stored `performance.json`; a record that does not read has none.
    pub(crate) fn of(performance: &Value) -> BestTimes {
        BestTimes::of_record(&PerformanceRecord::from_json(performance).unwrap_or_default())
    }

    pub(crate) fn of_record(performance: &PerformanceRecord) -> BestTimes {
        let at = performance
            .runs()
            .iter()
            .filter_map(|run| {
                let inputs = serde_json::to_value(&run.inputs).ok()?;
                let best = run.best.as_ref()?;
                Some((canonical(&inputs)?, inputs, positive(best.time_ms)?, iqr(best)))
            })
            .collect();
        // No inputs: a record that names none (every kernel peak writes has some).
        let headline_inputs_value = performance.best.as_ref().filter(|b| !b.params.inputs.is_empty()).and_then(|b| serde_json::to_value(&b.params.inputs).ok());
        let headline_iqr = performance.best.as_ref().and_then(iqr);
        BestTimes {
            headline: performance.best_ms().and_then(positive),
            headline_inputs: headline_inputs_value.as_ref().and_then(canonical),
            headline_inputs_value,
            headline_iqr,
            at,
            baseline: performance.baseline.clone(),
        }
    }

    /// The record's yardstick (`baseline`), as recorded.
    pub(crate) fn baseline(&self) -> Option<&Baseline> {
        self.baseline.as_ref()
    }

    pub(crate) fn headline(&self) -> Option<f64> {
        self.headline
    }

    /// The inputs the headline time was measured at (`best.params.inputs`).
    pub(crate) fn headline_inputs(&self) -> Option<&Value> {
        self.headline_inputs_value.as_ref()
    }

    /// The best time at every input configuration of `runs`, in their order; for a record
    /// without runs, the headline alone.
    pub(crate) fn sizes(&self) -> Vec<(Option<Value>, f64)> {
        if self.at.is_empty() {
            return self.headline.map(|t| (self.headline_inputs_value.clone(), t)).into_iter().collect();
        }
        self.at.iter().map(|(_, inputs, t, _)| (Some(inputs.clone()), *t)).collect()
    }

    /// The best time at `inputs`: the headline's when they are its, else the run's there.
    pub(crate) fn time_at(&self, inputs: &Value) -> Option<f64> {
        let key = canonical(inputs)?;
        if self.headline_inputs.as_deref() == Some(key.as_str()) {
            return self.headline;
        }
        self.at.iter().find(|(k, _, _, _)| *k == key).map(|(_, _, t, _)| *t)
    }

    /// Whether the record has per-input times (`runs`).
    pub(crate) fn has_runs(&self) -> bool {
        !self.at.is_empty()
    }

    /// This checkpoint's best time at `inputs` (canonical key) and `base`'s there.
    pub(crate) fn speedup_at_inputs(&self, base: &BestTimes, inputs: &Value) -> Option<f64> {
        let key = canonical(inputs)?;
        let find = |b: &BestTimes| b.at.iter().find(|(k, _, _, _)| *k == key).map(|(_, _, t, _)| *t);
        Some(find(base)? / find(self)?)
    }

    /// How many times faster this checkpoint is than `base`: at the headline's inputs if
    /// `base` was timed there, else at the last inputs both were tuned at; `None` when
    /// they share none. Records without per-input times compare headlines.
    pub(crate) fn speedup_over(&self, base: &BestTimes) -> Option<f64> {
        self.speedup_over_at(base).map(|s| s.ratio)
    }

    /// [`speedup_over`](Self::speedup_over), with the inputs the ratio was taken at.
    pub(crate) fn speedup_over_at(&self, base: &BestTimes) -> Option<SpeedupAt> {
        let time = self.headline?;
        if self.at.is_empty() || base.at.is_empty() {
            // Headlines: the inputs are this one's when both headlines name the same.
            let inputs = self.headline_inputs_value.clone().filter(|_| self.headline_inputs == base.headline_inputs);
            return Some(SpeedupAt { ratio: base.headline? / time, inputs, within_spread: within_spread(self.headline_iqr, base.headline_iqr) });
        }
        let base_at = |key: &str| base.at.iter().find(|(k, _, _, _)| k == key).map(|(_, _, t, q)| (*t, *q));
        if let Some((base_time, base_iqr)) = self.headline_inputs.as_deref().and_then(base_at) {
            let within_spread = within_spread(self.headline_iqr, base_iqr);
            return Some(SpeedupAt { ratio: base_time / time, inputs: self.headline_inputs_value.clone(), within_spread });
        }
        self.at.iter().rev().find_map(|(key, inputs, t, q)| {
            let (base_time, base_iqr) = base_at(key)?;
            Some(SpeedupAt { ratio: base_time / t, inputs: Some(inputs.clone()), within_spread: within_spread(*q, base_iqr) })
        })
    }
}

/// How many times faster `performance` is than `base` (both `performance.json` values),
/// compared at the same inputs (see [`BestTimes::speedup_over`]).
pub fn speedup(base: &Value, performance: &Value) -> Option<f64> {
    BestTimes::of(performance).speedup_over(&BestTimes::of(base))
}

/// Input values compactly, in their recorded order: `n=4096`, `rows=4096 cols=1024`.
pub fn format_inputs(inputs: &Value) -> String {
    match inputs.as_object() {
        Some(o) if !o.is_empty() => o
            .iter()
            .map(|(k, v)| match v {
                Value::String(s) => format!("{k}={s}"),
                v => format!("{k}={v}"),
            })
            .collect::<Vec<_>>()
            .join(" "),
        _ => "-".to_string(),
    }
}

/// The inputs as one string with sorted names, so that key order never matters.
fn canonical(inputs: &Value) -> Option<String> {
    let sorted: BTreeMap<&String, &Value> = inputs.as_object()?.iter().collect();
    serde_json::to_string(&sorted).ok()
}

/// A time that can be divided by: finite and above zero.
pub(crate) fn positive(time: f64) -> Option<f64> {
    Some(time).filter(|t| t.is_finite() && *t > 0.0)
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
    fn a_speedup_says_whether_it_is_within_the_spread() {
        let timed = |t: f64, q1: f64, q3: f64| json!({"best": {"params": {"inputs": {"n": 8}}, "time_ms": t, "spread": {"q1_ms": q1, "q3_ms": q3}}});
        let (a, near, far) = (timed(1.0, 0.9, 1.1), timed(1.05, 1.0, 1.2), timed(2.0, 1.9, 2.1));
        let over = |x: &Value, base: &Value| BestTimes::of(x).speedup_over_at(&BestTimes::of(base)).unwrap().within_spread;
        assert_eq!(over(&near, &a), Some(true));
        assert_eq!(over(&far, &a), Some(false));
        assert_eq!(over(&json!({"best": {"time_ms": 1.0}}), &a), None, "a record without a spread says nothing");
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
