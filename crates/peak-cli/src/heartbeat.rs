//! Progress where there is no terminal: while a validation or a tuning run goes on, a
//! timestamped plain line every interval (10 s; `PEAK_PROGRESS_INTERVAL` seconds, `0` for
//! none) saying what the bar shows on a terminal: done of total, the best so far, failures
//! and the time left. A thread of its own writes the lines, so one slow compile or kernel
//! does not leave a batch job's log silent.

use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The default interval between lines.
const INTERVAL: Duration = Duration::from_secs(10);

/// The interval `PEAK_PROGRESS_INTERVAL` asks for (seconds), or the default; `None` for
/// no lines at all (`0`).
pub fn interval() -> Option<Duration> {
    let Some(value) = std::env::var_os("PEAK_PROGRESS_INTERVAL") else { return Some(INTERVAL) };
    match value.to_str().and_then(|v| v.trim().parse::<f64>().ok()) {
        Some(s) if s > 0.0 && s.is_finite() => Some(Duration::from_secs_f64(s)),
        Some(_) => None,
        None => Some(INTERVAL),
    }
}

/// A run under way: what it is, its units, how far it got.
struct Run {
    what: String,
    unit: &'static str,
    /// Unknown until the first unit is done, for a validation.
    total: Option<usize>,
    done: usize,
    best: Option<String>,
    failed: usize,
    started: Instant,
}

impl Run {
    fn line(&self) -> String {
        let best = self.best.as_ref().map(|b| format!(", {b}")).unwrap_or_default();
        let failed = if self.failed > 0 { format!(", {} failed", self.failed) } else { String::new() };
        match self.total {
            Some(total) => format!("{}: {}/{total} {}{best}{failed}, {}", self.what, self.done, self.unit, self.left(total)),
            None => format!("{}: {} {} so far{best}{failed}", self.what, self.done, self.unit),
        }
    }

    /// The time left at the pace so far.
    fn left(&self, total: usize) -> String {
        if self.done == 0 {
            return "time left not known yet".into();
        }
        let per_unit = self.started.elapsed().as_secs_f64() / self.done as f64;
        format!("about {} left", human(per_unit * total.saturating_sub(self.done) as f64))
    }
}

/// `seconds` as `45s`, `3m 05s` or `1h 02m`.
fn human(seconds: f64) -> String {
    let s = seconds.round() as u64;
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m {:02}s", s / 60, s % 60),
        _ => format!("{}h {:02}m", s / 3600, s % 3600 / 60),
    }
}

/// The writer of the lines; it stops when dropped.
pub struct Heartbeat {
    run: Arc<Mutex<Option<Run>>>,
    stop: Option<Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Heartbeat {
    /// Lines every `every`, each stamped with the seconds since `since`.
    pub fn start(since: Instant, every: Duration) -> Heartbeat {
        let run: Arc<Mutex<Option<Run>>> = Arc::default();
        let (stop, stopped) = mpsc::channel::<()>();
        let shared = Arc::clone(&run);
        let thread = std::thread::spawn(move || {
            while let Err(RecvTimeoutError::Timeout) = stopped.recv_timeout(every) {
                let line = shared.lock().unwrap_or_else(|e| e.into_inner()).as_ref().map(Run::line);
                if let Some(line) = line {
                    eprintln!("[{:>7.1}s] {line}", since.elapsed().as_secs_f64());
                }
            }
        });
        Heartbeat { run, stop: Some(stop), thread: Some(thread) }
    }

    /// A run of `total` `unit` (if known) begins.
    pub fn begin(&self, what: String, unit: &'static str, total: Option<usize>) {
        *self.lock() = Some(Run { what, unit, total, done: 0, best: None, failed: 0, started: Instant::now() });
    }

    /// The run got to `done` of `total`, with the best so far and the failures.
    pub fn update(&self, done: usize, total: usize, best: Option<String>, failed: usize) {
        if let Some(run) = self.lock().as_mut() {
            run.done = done;
            run.total = Some(total.max(done));
            run.best = best;
            run.failed = failed;
        }
    }

    /// The run is over: no lines until the next one begins.
    pub fn end(&self) {
        *self.lock() = None;
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Run>> {
        self.run.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Drop for Heartbeat {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(done: usize, total: usize, elapsed: Duration) -> Run {
        Run {
            what: "tuning n=256".into(),
            unit: "configurations",
            total: Some(total),
            done,
            best: Some("best 1.2 ms".into()),
            failed: 2,
            started: Instant::now() - elapsed,
        }
    }

    #[test]
    fn a_line_says_done_total_best_failures_and_time_left() {
        let line = run(10, 40, Duration::from_secs(20)).line();
        assert!(line.starts_with("tuning n=256: 10/40 configurations, best 1.2 ms, 2 failed, about 1m 0"), "{line}");
        assert!(run(0, 40, Duration::from_secs(3)).line().ends_with("time left not known yet"));
        let unknown = Run { total: None, ..run(0, 0, Duration::ZERO) };
        assert_eq!(unknown.line(), "tuning n=256: 0 configurations so far, best 1.2 ms, 2 failed");
    }

    #[test]
    fn durations_read_as_people_write_them() {
        assert_eq!(human(44.6), "45s");
        assert_eq!(human(185.0), "3m 05s");
        assert_eq!(human(3720.0), "1h 02m");
    }
}
