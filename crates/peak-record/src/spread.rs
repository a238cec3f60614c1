//! [`Spread`]: the distribution of one measurement's repetitions, as every timed value in a
//! record carries it (`performance.json`'s entries and `baseline`). `peak_backend::timing`
//! computes it; it lives here so that the records that hold it need no backend.

use serde::{Deserialize, Serialize};

/// The distribution of one measurement's repetitions, in milliseconds. Quartiles
/// interpolate linearly between order statistics (numpy's default), so `median_ms` is the
/// usual median (the mean of the two middle values for an even count).
/// Read leniently: a field a record lacks reads as zero (readers use the quartiles).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Spread {
    pub count: usize,
    pub min_ms: f64,
    pub q1_ms: f64,
    pub median_ms: f64,
    pub q3_ms: f64,
    pub max_ms: f64,
}

impl Spread {
    /// `None` for no times.
    pub fn of(times_ms: &[f64]) -> Option<Spread> {
        if times_ms.is_empty() {
            return None;
        }
        let mut sorted = times_ms.to_vec();
        sorted.sort_by(|a, b| a.total_cmp(b));
        let at = |p: f64| quantile(&sorted, p);
        Some(Spread { count: sorted.len(), min_ms: sorted[0], q1_ms: at(0.25), median_ms: at(0.5), q3_ms: at(0.75), max_ms: sorted[sorted.len() - 1] })
    }

    /// The interquartile range.
    pub fn iqr_ms(&self) -> f64 {
        self.q3_ms - self.q1_ms
    }

    /// Whether the two interquartile ranges overlap: the difference between the medians is
    /// within the spread of the measurements.
    pub fn overlaps(&self, other: &Spread) -> bool {
        self.q1_ms <= other.q3_ms && other.q1_ms <= self.q3_ms
    }

    /// `min / q1 / median / q3 / max (n = count)`, for people.
    pub fn describe(&self, format: impl Fn(f64) -> String) -> String {
        format!(
            "{} / {} / {} / {} / {} (min / q1 / median / q3 / max of {})",
            format(self.min_ms),
            format(self.q1_ms),
            format(self.median_ms),
            format(self.q3_ms),
            format(self.max_ms),
            self.count
        )
    }
}

fn quantile(sorted: &[f64], p: f64) -> f64 {
    let pos = p * (sorted.len() - 1) as f64;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo as f64)
}
