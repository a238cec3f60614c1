//! MCP progress notifications fed by the libraries' reporter traits.
//!
//! Reporters are called on the blocking thread doing the work; they push messages into a
//! channel, and a task on the runtime sends each as `notifications/progress` with the
//! request's progress token. Without a token (the client did not ask) nothing is sent.
//! The progress value is a counter that rises with every message, as the protocol
//! requires (a total is not given: a transformation's length is not known in advance);
//! the message says what happened, e.g. `validate 3/16: passed n=256 ...`.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use peak_eval::tune::{Progress as TuneProgress, TuneStart};
use peak_eval::validate::{SampleReport, ValidateReporter};
use peak_eval::TuneReporter;
use rmcp::model::{ProgressNotificationParam, ProgressToken};
use rmcp::{Peer, RoleServer};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// Tuning reports every configuration; a client needs a few updates a second at most.
const TUNING_INTERVAL: Duration = Duration::from_millis(250);

struct Update {
    progress: f64,
    message: String,
}

/// The sending side, handed to the blocking work.
pub struct Progress {
    tx: Option<mpsc::UnboundedSender<Update>>,
    step: AtomicU64,
    last_tuning: Mutex<Option<Instant>>,
}

impl Progress {
    /// A progress sender for one request, and the task forwarding its messages (await it
    /// after the work, so every notification goes out before the result).
    pub fn start(token: Option<ProgressToken>, peer: Peer<RoleServer>) -> (Progress, Option<JoinHandle<()>>) {
        let Some(token) = token else {
            return (Progress { tx: None, step: AtomicU64::new(0), last_tuning: Mutex::new(None) }, None);
        };
        let (tx, mut rx) = mpsc::unbounded_channel::<Update>();
        let forward = tokio::spawn(async move {
            while let Some(update) = rx.recv().await {
                let param = ProgressNotificationParam::new(token.clone(), update.progress).with_message(update.message);
                // A client that went away cannot be told; the work still finishes.
                let _ = peer.notify_progress(param).await;
            }
        });
        (Progress { tx: Some(tx), step: AtomicU64::new(0), last_tuning: Mutex::new(None) }, Some(forward))
    }

    /// Send one message.
    pub fn say(&self, message: impl Into<String>) {
        let Some(tx) = &self.tx else { return };
        let step = self.step.fetch_add(1, Ordering::Relaxed) + 1;
        let _ = tx.send(Update { progress: step as f64, message: message.into() });
    }
}

impl ValidateReporter for Progress {
    fn sample(&self, done: usize, total: usize, report: &SampleReport) {
        self.say(format!("validate {done}/{total}: {} {}", report.verdict.category(), report.params));
    }
}

impl TuneReporter for Progress {
    fn started(&self, start: &TuneStart) {
        let inputs: Vec<String> = start.inputs.iter().map(|(k, v)| format!("{k}={v}")).collect();
        self.say(format!("tune {} ({}): up to {} configurations", inputs.join(" "), start.strategy, start.target));
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
        self.say(format!("tune: {}/{} configurations, {best}, {} failed", p.evaluations, p.target, p.failed));
    }
}
