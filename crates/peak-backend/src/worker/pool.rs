//! The parent side: [`WorkerPool`] queues jobs, keeps a few in flight so compiles overlap
//! the device's work, and answers each as the worker finishes it (match answers by id).
//! When the worker dies or falls silent, `blame` decides which job that is (the worker
//! process itself is `supervise.rs`'s).

use std::collections::VecDeque;
use std::io::Write;
use std::process::ExitStatus;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::backend::DeviceInfo;

use super::command::WorkerCommand;
use super::error::WorkerError;
use super::protocol::{Failure, FailureKind, Job, Message, Request, RunReport};
use super::supervise::{Event, Worker, describe_exit, is_fault};

#[derive(Debug, Clone)]
pub struct PoolOptions {
    /// How long one job may run once started (a job's own `timeout` wins).
    pub run_timeout: Duration,
    /// How long the worker may stay silent while compiling.
    pub compile_timeout: Duration,
    /// How long a new worker may take to say it is ready (driver start-up, tool wrappers).
    pub startup_timeout: Duration,
    /// Jobs sent ahead, so compiles overlap the device's work.
    pub max_in_flight: usize,
    /// Copy the worker's stderr to ours (otherwise only its tail is kept, for messages).
    pub forward_stderr: bool,
}

impl Default for PoolOptions {
    fn default() -> Self {
        let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
        PoolOptions {
            run_timeout: Duration::from_secs(60),
            compile_timeout: Duration::from_secs(300),
            startup_timeout: Duration::from_secs(120),
            max_in_flight: 2 * cores + 1,
            forward_stderr: false,
        }
    }
}

/// One answered job.
#[derive(Debug, Clone)]
pub struct Answer {
    pub id: u64,
    pub result: Result<RunReport, Failure>,
}

/// Runs jobs in a worker process for one device, restarting it after a crash, a fault or
/// a time-out. Jobs are answered in the order the worker finishes them, which need not be
/// the order they were submitted: a job whose compile ends first runs first.
pub struct WorkerPool {
    pub(super) command: WorkerCommand,
    pub(super) options: PoolOptions,
    pub(super) backend: String,
    pub(super) device: DeviceInfo,
    pub(super) worker: Option<Worker>,
    pub(super) next_id: u64,
    /// Submitted, not yet sent to the current worker.
    pub(super) queue: VecDeque<Request>,
    /// Sent to the current worker and not yet answered, in submission order (answers may
    /// come in any order).
    pub(super) in_flight: VecDeque<Request>,
    /// The job now running on the device.
    pub(super) started: Option<Running>,
    /// Jobs in flight that the current worker said it started, in the order it started
    /// them: the jobs that have been on the device and are not yet answered.
    pub(super) ran: Vec<u64>,
    pub(super) last_progress: Instant,
    /// After an unattributable death: send one job at a time until this id is answered.
    pub(super) serial_until: Option<u64>,
    pub(super) restarts: usize,
    /// What the last discarded worker wrote to stderr, for the failure it is blamed for.
    pub(super) last_stderr: Option<String>,
    /// Jobs that already had their second run after a silent death (see `blame`).
    pub(super) retried: Vec<u64>,
}

/// The job a worker said it started.
#[derive(Debug, Clone, Copy)]
pub(super) struct Running {
    pub(super) id: u64,
    pub(super) since: Instant,
    /// It runs on inputs the worker kept from earlier jobs (see `Message::Started`).
    pub(super) kept_inputs: bool,
}

impl WorkerPool {
    /// Start a worker and wait until it is ready. `backend` names the backend in messages.
    pub fn start(backend: &str, command: WorkerCommand, options: PoolOptions) -> Result<WorkerPool, WorkerError> {
        let (worker, device) = Worker::spawn(backend, &command, options.startup_timeout, options.forward_stderr)?;
        Ok(WorkerPool {
            command,
            options,
            backend: backend.to_string(),
            device,
            worker: Some(worker),
            next_id: 1,
            queue: VecDeque::new(),
            in_flight: VecDeque::new(),
            started: None,
            ran: Vec::new(),
            last_progress: Instant::now(),
            serial_until: None,
            restarts: 0,
            last_stderr: None,
            retried: Vec::new(),
        })
    }

    pub fn device(&self) -> &DeviceInfo {
        &self.device
    }

    pub fn options(&self) -> &PoolOptions {
        &self.options
    }

    /// How often the worker has been replaced.
    pub fn restarts(&self) -> usize {
        self.restarts
    }

    /// Jobs submitted and not yet answered.
    pub fn pending(&self) -> usize {
        self.queue.len() + self.in_flight.len()
    }

    /// Queue a job; its answer comes from [`WorkerPool::next_answer`] under the returned id.
    pub fn submit(&mut self, job: Job) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        self.queue.push_back(Request { id, job });
        id
    }

    /// Submit one job and wait for its answer (with nothing else pending).
    pub fn run(&mut self, job: Job) -> Result<Result<RunReport, Failure>, WorkerError> {
        let id = self.submit(job);
        loop {
            match self.next_answer()? {
                Some(answer) if answer.id == id => return Ok(answer.result),
                Some(_) => continue,
                None => return Err(WorkerError::Protocol { message: format!("job {id} was never answered") }),
            }
        }
    }

    /// The next answer, in the order the worker finishes jobs; `None` when nothing is pending.
    pub fn next_answer(&mut self) -> Result<Option<Answer>, WorkerError> {
        loop {
            if self.pending() == 0 {
                return Ok(None);
            }
            if self.worker.is_none() {
                self.respawn()?;
            }
            self.pump()?;
            let deadline = match self.started {
                Some(running) => running.since + self.timeout_of(running.id),
                None => self.last_progress + self.options.compile_timeout,
            };
            let wait = deadline.saturating_duration_since(Instant::now());
            let event = self.worker.as_ref().expect("a live worker").events.recv_timeout(wait);
            match event {
                Ok(Event::Message(message)) => {
                    self.last_progress = Instant::now();
                    match *message {
                        Message::Started { id, kept_inputs } => {
                            // The worker runs jobs in the order their compiles end, and may
                            // start one while it still judges the outputs of others, so this
                            // may be any job in flight.
                            if !self.in_flight.iter().any(|r| r.id == id) {
                                return Err(self.protocol(format!("`started` for job {id}, which is not in flight")));
                            }
                            self.started = Some(Running { id, since: Instant::now(), kept_inputs });
                            // A job run again (see `serve`) starts twice; it ran once.
                            self.ran.retain(|&r| r != id);
                            self.ran.push(id);
                        }
                        Message::Done { id, result } => {
                            // Answers come as jobs finish, in any order.
                            let Some(at) = self.in_flight.iter().position(|r| r.id == id) else {
                                return Err(self.protocol(format!("an answer for job {id}, which is not in flight")));
                            };
                            let request = self.in_flight.remove(at).expect("the position was found");
                            self.ran.retain(|&r| r != id);
                            let running = self.started.filter(|r| r.id == id);
                            if running.is_some() {
                                self.started = None;
                            }
                            if self.serial_until.is_some_and(|last| id >= last) {
                                self.serial_until = None;
                            }
                            if matches!(&result, Err(f) if f.category == FailureKind::Crashed) {
                                // The worker exits after a fault; do not wait to find out,
                                // and give its other jobs to the next one. It answers the
                                // jobs that ran before the fault first, so none of these has
                                // been on the device.
                                self.discard_worker();
                                self.ran.clear();
                                while let Some(request) = self.in_flight.pop_back() {
                                    self.queue.push_front(request);
                                }
                                // On inputs an earlier job could have damaged, the fault is
                                // no proof: the job runs once more, first and alone.
                                if running.is_some_and(|r| r.kept_inputs) && !self.retried.contains(&id) {
                                    self.retried.push(id);
                                    self.serial_until = Some(id);
                                    self.queue.push_front(request);
                                    continue;
                                }
                            }
                            return Ok(Some(Answer { id, result }));
                        }
                        Message::Ready { .. } | Message::Unavailable { .. } => {
                            return Err(self.protocol("a second start-up message".into()));
                        }
                    }
                }
                Ok(Event::Garbage(line)) => return Err(self.protocol(format!("unreadable line: {line}"))),
                Ok(Event::Eof) | Err(mpsc::RecvTimeoutError::Disconnected) => {
                    let status = self.discard_worker();
                    let how = describe_exit(status);
                    if let Some(answer) = self.blame(FailureKind::Crashed, &format!("the worker died ({how})"), !is_fault(status)) {
                        return Ok(Some(answer));
                    }
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    let running = self.started.map(|r| (r.id, r.since.elapsed()));
                    self.discard_worker();
                    let message = match running {
                        Some((_, elapsed)) => format!("still running after {:.1} s; the worker was killed", elapsed.as_secs_f64()),
                        None => format!("no word from the worker for {:.0} s while compiling; it was killed", self.options.compile_timeout.as_secs_f64()),
                    };
                    if let Some(answer) = self.blame(FailureKind::TimedOut, &message, false) {
                        return Ok(Some(answer));
                    }
                }
            }
        }
    }

    fn timeout_of(&self, id: u64) -> Duration {
        self.in_flight.iter().find(|r| r.id == id).and_then(|r| r.job.timeout).unwrap_or(self.options.run_timeout)
    }
    /// Send queued jobs while there is room.
    fn pump(&mut self) -> Result<(), WorkerError> {
        let limit = if self.serial_until.is_some() { 1 } else { self.options.max_in_flight.max(1) };
        while self.in_flight.len() < limit {
            let Some(request) = self.queue.pop_front() else { break };
            let worker = self.worker.as_mut().expect("a live worker");
            let mut line = serde_json::to_string(&request).map_err(|e| WorkerError::Io(e.to_string()))?;
            line.push('\n');
            let sent = worker.stdin.as_mut().map(|s| s.write_all(line.as_bytes()).and_then(|()| s.flush()));
            if self.in_flight.is_empty() {
                self.last_progress = Instant::now();
            }
            self.in_flight.push_back(request);
            // A failed write means the worker died; `next` sees the end of its output and
            // attributes the death, so the error itself carries no news.
            if !matches!(sent, Some(Ok(()))) {
                break;
            }
        }
        Ok(())
    }
}

impl WorkerPool {
    /// The worker is gone: answer for the job it was running, or, when that is unknown,
    /// resend everything one job at a time until the culprit is found.
    ///
    /// A death that need not be the job's doing (`second_chance`: no fault signal, see
    /// [`is_fault`]) may be a launcher killed on a cluster, a lost node, the OOM killer.
    /// The job then runs once more, alone on a fresh worker, and only a second death is
    /// blamed on it.
    pub(super) fn blame(&mut self, kind: FailureKind, message: &str, second_chance: bool) -> Option<Answer> {
        // The running job is the culprit only if no other job that has been on the device
        // is still unanswered: such a job may have faulted asynchronously (PoCL runs
        // kernels on its own threads) after the next one started. The worker runs jobs in
        // the order their compiles end, so a job sent earlier may not have run yet; jobs
        // that never started (compiling, or compiled and waiting) count as the jobs after
        // the running one always did. When in doubt, resend one at a time.
        let oldest = self.in_flight.front().map(|r| r.id);
        let running = self.started.take();
        let ran = std::mem::take(&mut self.ran);
        let culprit = match running {
            Some(r) if ran.iter().all(|&id| id == r.id) => Some(r.id),
            Some(_) => None,
            None if self.in_flight.len() == 1 => oldest,
            None => None,
        };
        // A job that ran on inputs the worker kept from earlier jobs may have met damage
        // one of them did (a fault on a damaged index, a hang on a damaged loop bound; see
        // `Message::Started`): it too runs again, alone, before it is blamed.
        let second_chance = second_chance || running.is_some_and(|r| r.kept_inputs);
        let tail = self.last_stderr.take().unwrap_or_default();
        let tail = if tail.trim().is_empty() { String::new() } else { format!("\nworker stderr:\n{}", last_lines(&tail, 20)) };
        // A culprit on its second chance is no culprit yet: it runs again, alone, first.
        let retry = culprit.filter(|id| second_chance && !self.retried.contains(id));
        // Everything sent to the dead worker goes back to the front of the queue, in order.
        while let Some(request) = self.in_flight.pop_back() {
            if Some(request.id) == culprit && retry.is_none() {
                continue;
            }
            self.queue.push_front(request);
        }
        match culprit {
            Some(id) if retry.is_some() => {
                self.retried.push(id);
                self.serial_until = Some(id);
                None
            }
            Some(id) => {
                if self.serial_until.is_some_and(|last| id >= last) {
                    self.serial_until = None;
                }
                Some(Answer { id, result: Err(Failure::new(kind, format!("{message}{tail}"))) })
            }
            None => {
                self.serial_until = self.queue.iter().map(|r| r.id).max();
                None
            }
        }
    }

    pub(super) fn respawn(&mut self) -> Result<(), WorkerError> {
        let (worker, device) = Worker::spawn(&self.backend, &self.command, self.options.startup_timeout, self.options.forward_stderr)?;
        // Free-memory figures may differ between starts; the identity must not.
        let identity = |d: &DeviceInfo| (d.backend.clone(), d.name.clone(), d.driver.clone(), d.arch.clone());
        if identity(&device) != identity(&self.device) {
            return Err(WorkerError::Protocol {
                message: format!("the restarted worker reports another device: {} instead of {}", device.name, self.device.name),
            });
        }
        self.worker = Some(worker);
        self.restarts += 1;
        self.started = None;
        self.ran.clear();
        self.last_progress = Instant::now();
        Ok(())
    }

    /// Kill the current worker (and its process group) and reap it.
    pub(super) fn discard_worker(&mut self) -> Option<ExitStatus> {
        let mut worker = self.worker.take()?;
        let status = worker.kill();
        self.last_stderr = Some(worker.stderr_tail());
        status
    }

    pub(super) fn protocol(&mut self, message: String) -> WorkerError {
        self.discard_worker();
        WorkerError::Protocol { message }
    }

    /// Close the worker's input and give it `grace` to exit on its own before it is
    /// killed. Tools that wrap the worker (compute-sanitizer, Nsight Compute) write their
    /// report as it exits, so they need the time.
    pub fn close(mut self, grace: Duration) -> Option<ExitStatus> {
        self.worker.take().and_then(|mut worker| worker.shutdown(grace))
    }
}

fn last_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.trim_end().lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

impl Drop for WorkerPool {
    fn drop(&mut self) {
        if let Some(mut worker) = self.worker.take() {
            worker.shutdown(Duration::from_secs(2));
        }
    }
}
