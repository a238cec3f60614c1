//! MCP progress notifications fed by the libraries' reporter traits.
//!
//! Reporters are called on the blocking thread doing the work; they push messages into a
//! channel, and a task on the runtime sends each as `notifications/progress` with the
//! request's progress token. Without a token (the client did not ask) nothing is sent.
//! The progress value counts units of work and rises with every message, as the protocol
//! requires: a validated sample or an evaluated configuration is a unit, and so is every
//! other step (a pass asked for, a stage begun). Inside a validation or a tuning run the
//! total is known and sent: the units before it plus the run's samples or configurations;
//! elsewhere (a transformation's length is not known in advance) no total is given. The
//! message says what happened, e.g. `validate 3/16: passed n=256 ...`.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use peak_eval::TuneReporter;
use peak_eval::tune::{Progress as TuneProgress, TuneStart};
use peak_eval::validate::{SampleReport, ValidateReporter};
use rmcp::model::{ProgressNotificationParam, ProgressToken};
use rmcp::{Peer, RoleServer};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// Tuning reports every configuration; a client needs a few updates a second at most.
const TUNING_INTERVAL: Duration = Duration::from_millis(250);

struct Update {
    progress: f64,
    total: Option<f64>,
    message: String,
}

/// Units of work reported so far, and where the running validation or tuning run began.
#[derive(Default)]
struct Counter {
    last: f64,
    base: f64,
}

/// The sending side, handed to the blocking work.
pub struct Progress {
    tx: Option<mpsc::UnboundedSender<Update>>,
    counter: Mutex<Counter>,
    last_tuning: Mutex<Option<Instant>>,
}

impl Progress {
    /// A progress sender for one request, and the task forwarding its messages (await it
    /// after the work, so every notification goes out before the result).
    pub fn start(token: Option<ProgressToken>, peer: Peer<RoleServer>) -> (Progress, Option<JoinHandle<()>>) {
        let Some(token) = token else {
            return (Progress::new(None), None);
        };
        let (tx, mut rx) = mpsc::unbounded_channel::<Update>();
        let forward = tokio::spawn(async move {
            while let Some(update) = rx.recv().await {
                let mut param = ProgressNotificationParam::new(token.clone(), update.progress).with_message(update.message);
                param.total = update.total;
                // A client that went away cannot be told; the work still finishes.
                let _ = peer.notify_progress(param).await;
            }
        });
        (Progress::new(Some(tx)), Some(forward))
    }

    fn new(tx: Option<mpsc::UnboundedSender<Update>>) -> Progress {
        Progress { tx, counter: Mutex::new(Counter::default()), last_tuning: Mutex::new(None) }
    }

    /// Send one message: a step of its own, with no total.
    pub fn say(&self, message: impl Into<String>) {
        let mut counter = self.counter.lock().unwrap_or_else(|e| e.into_inner());
        counter.last += 1.0;
        self.send(counter.last, None, message.into());
    }

    /// A validation or tuning run begins after the units reported so far.
    fn begin_run(&self) {
        let mut counter = self.counter.lock().unwrap_or_else(|e| e.into_inner());
        counter.base = counter.last;
    }

    /// A run of `total` units begins, said as a step of its own that gives the total.
    fn start_run(&self, total: usize, message: String) {
        let mut counter = self.counter.lock().unwrap_or_else(|e| e.into_inner());
        counter.last += 1.0;
        counter.base = counter.last;
        self.send(counter.last, Some(counter.base + total as f64), message);
    }

    /// `done` of the running run's `total` units.
    fn counted(&self, done: usize, total: usize, message: String) {
        let mut counter = self.counter.lock().unwrap_or_else(|e| e.into_inner());
        let progress = counter.base + done as f64;
        if progress <= counter.last {
            return;
        }
        counter.last = progress;
        self.send(progress, Some(counter.base + total.max(done) as f64), message);
    }

    fn send(&self, progress: f64, total: Option<f64>, message: String) {
        if let Some(tx) = &self.tx {
            let _ = tx.send(Update { progress, total, message });
        }
    }
}

impl ValidateReporter for Progress {
    fn sample(&self, done: usize, total: usize, report: &SampleReport) {
        if done == 1 {
            self.begin_run();
        }
        self.counted(done, total, format!("validate {done}/{total}: {} {}", report.verdict.category(), report.params));
    }
}

impl TuneReporter for Progress {
    fn started(&self, start: &TuneStart) {
        let inputs: Vec<String> = start.inputs.iter().map(|(k, v)| format!("{k}={v}")).collect();
        self.start_run(start.target, format!("tune {} ({}): up to {} configurations", inputs.join(" "), start.strategy, start.target));
    }

    fn evaluated(&self, p: &TuneProgress) {
        let now = Instant::now();
        {
            let mut last = self.last_tuning.lock().unwrap_or_else(|e| e.into_inner());
            let finished = p.evaluations >= p.target;
            if !finished && last.is_some_and(|t| now.duration_since(t) < TUNING_INTERVAL) {
                return;
            }
            *last = Some(now);
        }
        let best = match p.best_ms {
            Some(ms) => format!("best {ms:.4} ms"),
            None => "no valid time yet".into(),
        };
        self.counted(p.evaluations, p.target, format!("tune: {}/{} configurations, {best}, {} failed", p.evaluations, p.target, p.failed));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drain(rx: &mut mpsc::UnboundedReceiver<Update>) -> Vec<(f64, Option<f64>)> {
        std::iter::from_fn(|| rx.try_recv().ok()).map(|u| (u.progress, u.total)).collect()
    }

    #[test]
    fn progress_rises_across_runs_and_runs_give_their_totals() {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let progress = Progress::new(Some(tx));
        progress.say("pass 1");
        progress.begin_run();
        progress.counted(1, 3, "validate 1/3".into());
        progress.counted(3, 3, "validate 3/3".into());
        progress.say("tune");
        progress.start_run(4, "tune n=256".into());
        progress.counted(2, 4, "tune 2/4".into());
        progress.counted(2, 4, "the same count again is not sent".into());
        progress.counted(5, 4, "past the target".into());
        assert_eq!(drain(&mut rx), [(1.0, None), (2.0, Some(4.0)), (4.0, Some(4.0)), (5.0, None), (6.0, Some(10.0)), (8.0, Some(10.0)), (11.0, Some(11.0))]);
    }
}
