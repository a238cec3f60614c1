//! Progress on stderr, from the library crates' reporter traits: drawn with indicatif on a
//! terminal, written as timestamped lines where stderr is a file or a pipe (a batch job's
//! log), where a bar would draw nothing: the start and end of each tuning run, and while a
//! validation or tuning run goes on, a line every 10 s or so with what the bar would show
//! ([`Heartbeat`]).

use std::io::IsTerminal;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use peak_eval::TuneReporter;
use peak_eval::tune::{Progress, TuneStart};
use peak_eval::validate::{SampleReport, ValidateReporter};

use crate::heartbeat::{self, Heartbeat};
use crate::output::format_ms;

/// The progress bar: configurations done of the target, rate, ETA and the best so far.
pub struct Bar {
    bar: ProgressBar,
    /// Set when progress goes to a log instead of a terminal: lines carry the seconds
    /// since this instant, and tuning reports its start and end, not every step.
    log_since: Option<Instant>,
    /// In a log: the periodic lines while a run goes on.
    heartbeat: Option<Heartbeat>,
    /// Failed samples of the validation under way.
    failed_samples: AtomicUsize,
}

impl Bar {
    pub fn new(visible: bool) -> Bar {
        let terminal = std::io::stderr().is_terminal();
        let log_since = (visible && !terminal).then(Instant::now);
        let bar = ProgressBar::with_draw_target(Some(0), if visible && terminal { ProgressDrawTarget::stderr() } else { ProgressDrawTarget::hidden() });
        bar.set_style(
            ProgressStyle::with_template("{prefix} [{elapsed_precise}] {bar:28.cyan/blue} {pos}/{len} {per_sec:>11} ETA {eta:<4} {msg}")
                .expect("a valid template")
                .progress_chars("=> "),
        );
        let heartbeat = log_since.zip(heartbeat::interval()).map(|(since, every)| Heartbeat::start(since, every));
        Bar { bar, log_since, heartbeat, failed_samples: AtomicUsize::new(0) }
    }

    /// Remove the bar, leaving the terminal clean for the summary.
    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }

    /// Print a line above the bar, or to the log. Lines carry errors from servers and
    /// compilers, so configured keys are redacted: a batch job's stderr is a file.
    pub fn println(&self, line: impl AsRef<str>) {
        let line = peak_workflow::redact_secrets(line.as_ref());
        match self.log_since {
            Some(since) => eprintln!("[{:>7.1}s] {line}", since.elapsed().as_secs_f64()),
            None => self.bar.println(line),
        }
    }
}

impl TuneReporter for Bar {
    fn started(&self, start: &TuneStart) {
        self.bar.reset();
        self.bar.set_length(start.target as u64);
        let inputs: Vec<String> = start.inputs.iter().map(|(k, v)| format!("{k}={v}")).collect();
        self.bar.set_prefix(format!("{} {}", start.strategy, inputs.join(" ")));
        if self.log_since.is_some() {
            self.println(format!("tuning {}: {} configurations, {}", inputs.join(" "), start.target, start.strategy));
        }
        if let Some(heartbeat) = &self.heartbeat {
            heartbeat.begin(format!("tuning {}", inputs.join(" ")), "configurations", Some(start.target));
        }
        if start.cached_available > 0 {
            self.println(format!("{} results for these inputs are in the cache; they will not be measured again", start.cached_available));
        }
    }

    fn evaluated(&self, p: &Progress) {
        self.bar.set_position(p.evaluations as u64);
        let best = match (&p.best_ms, &p.best) {
            (Some(ms), Some(t)) => format!("best {} ({})", format_ms(*ms), t.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(" ")),
            _ => "no valid time yet".into(),
        };
        if let Some(heartbeat) = &self.heartbeat {
            heartbeat.update(p.evaluations, p.target, Some(best.clone()), p.failed);
        }
        let message = if p.failed > 0 { format!("{best}, {} failed", p.failed) } else { best };
        if self.log_since.is_some() && Some(p.evaluations as u64) == self.bar.length() {
            self.println(format!("  tuned {} configurations: {message}", p.evaluations));
            self.heartbeat.as_ref().map(Heartbeat::end);
        }
        self.bar.set_message(message);
    }
}

impl Bar {
    /// A stage of an apply begins (`validate`, `tune`, ...): whatever ran before is over,
    /// and a validation's lines start now, before its first sample is judged.
    fn stage(&self, stage: &str) {
        let Some(heartbeat) = &self.heartbeat else { return };
        heartbeat.end();
        if stage == "validate" {
            heartbeat.begin("validating".into(), "samples", None);
        }
    }
}

/// Validation shows only in a log, as the periodic lines (a terminal shows the stage line).
impl ValidateReporter for Bar {
    fn sample(&self, done: usize, total: usize, report: &SampleReport) {
        let Some(heartbeat) = &self.heartbeat else { return };
        if done == 1 {
            self.failed_samples.store(0, Ordering::Relaxed);
        }
        if report.verdict.is_failure() {
            self.failed_samples.fetch_add(1, Ordering::Relaxed);
        }
        heartbeat.update(done, total, None, self.failed_samples.load(Ordering::Relaxed));
        if done >= total {
            heartbeat.end();
        }
    }
}

/// Draws an apply: one line per pass and per try, the tuning bar while tuning.
pub struct ApplyProgress {
    bar: Bar,
}

impl ApplyProgress {
    pub fn new(visible: bool) -> ApplyProgress {
        ApplyProgress { bar: Bar::new(visible) }
    }

    pub fn finish(&self) {
        self.bar.finish();
    }

    /// Print a line above the bar (`peak auto`'s decisions).
    pub fn println(&self, line: impl AsRef<str>) {
        self.bar.println(line);
    }
}

impl peak_apply::ApplyReporter for ApplyProgress {
    fn pass(&self, transformation: &str, pass: usize, passes: usize, attempt: u32, title: &str) {
        let retry = if attempt > 1 { format!(" (attempt {attempt})") } else { String::new() };
        self.bar.println(format!("{transformation}: pass {pass}/{passes}{retry}: {title}"));
    }

    fn attempt(&self, outcome: &peak_workflow::AttemptOutcome, detail: &str) {
        self.bar.println(format!("  -> {outcome}: {}", detail.lines().next().unwrap_or_default()));
    }

    fn stage(&self, stage: &str) {
        self.bar.stage(stage);
        self.bar.println(match stage {
            "validate" => "validating against the workflow's reference...",
            "tune" => "tuning...",
            "sanitize" => "checking the tuned winner with compute-sanitizer...",
            "compile-check" => "compile-checking the sampled execution parameters (deferred: validation and tuning happen where the GPU is)...",
            other => other,
        });
    }

    fn tuning(&self) -> &dyn TuneReporter {
        &self.bar
    }

    fn validation(&self) -> &dyn ValidateReporter {
        &self.bar
    }
}
