//! The worker side: `peak worker` serves requests from stdin through a pipeline of
//! compile, run, finish and send threads.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{BufRead, BufWriter, Write};
use std::sync::{Arc, Condvar, Mutex, mpsc};
use std::time::Instant;

use peak_spec::Context;

use crate::backend::Backend;
use crate::runner::{StageTimes, ms_since};

use super::compile::{Compiled, ModuleCache, Prepared, prepare};
use super::execute::{Executed, InputCache, InputSource, check_compiled, execute};
use super::outputs::{ReferenceCache, finish, looks_wrong};
use super::protocol::{FAULT_EXIT, Failure, FailureKind, Message, PROTOCOL_VERSION, Request, RunReport};
use super::recycler::Recycler;

/// Tell the parent the backend could not open, then return (the caller exits).
pub fn refuse(reason: &str) -> std::io::Result<()> {
    let mut out = protocol_stdout()?;
    write_message(&mut out, &Message::Unavailable { message: reason.to_string() })
}

/// Serve requests from stdin until it closes. Called by `peak worker --backend NAME`
/// (and by test binaries that stand in for it) with the opened backend.
///
/// Inside, a request passes through four stages, each on its own threads so the device
/// never waits for the host: compile (one thread per core), run (one thread: the device
/// runs one job at a time), finish (comparing or hashing outputs, a few threads), and send
/// (one thread, answering strictly in request order).
///
/// The run thread fills each job's input buffers from device copies of the inputs that it
/// keeps while the inputs stay the same ([`InputCache`]), instead of from the host. Those
/// copies outlive the job, so a kernel writing far outside its own buffers could damage
/// them for the jobs after it. Where that would show, it is not believed: a job whose
/// outputs fail their comparison on kept inputs is run again from the host, with the kept
/// copies dropped, and only that run's answer counts; a job that faults or hangs on kept
/// inputs says so in `started`, and the parent gives it a second run on a fresh worker.
pub fn serve(backend: &dyn Backend) -> std::io::Result<()> {
    let out = Mutex::new(protocol_stdout()?);
    let send = |message: &Message| {
        let mut out = out.lock().unwrap_or_else(|p| p.into_inner());
        // A closed pipe means the parent is gone; nothing useful is left to do.
        if write_message(&mut *out, message).is_err() {
            std::process::exit(0);
        }
    };
    send(&Message::Ready { protocol: PROTOCOL_VERSION, pid: std::process::id(), device: backend.device().clone() });

    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    let compilers = std::env::var("PEAK_COMPILE_THREADS").ok().and_then(|v| v.parse::<usize>().ok()).unwrap_or(cores).max(1);
    let finishers = (cores / 4).clamp(1, 4);
    let (compile_tx, compile_rx) = mpsc::channel::<Arc<WorkerJob>>();
    let compile_rx = Mutex::new(compile_rx);
    let runs = RunQueue::default();
    let (finish_tx, finish_rx) = mpsc::channel::<(Arc<WorkerJob>, Executed)>();
    let finish_rx = Mutex::new(finish_rx);
    let (send_tx, send_rx) = mpsc::channel::<Arc<WorkerJob>>();
    let modules = Mutex::new(ModuleCache::default());
    let references = Mutex::new(ReferenceCache::default());

    std::thread::scope(|scope| {
        for _ in 0..compilers {
            scope.spawn(|| {
                loop {
                    let next = compile_rx.lock().unwrap_or_else(|p| p.into_inner()).recv();
                    let Ok(job) = next else { break };
                    job.prepared.fill(prepare(backend, &job.request.job, &modules));
                }
            });
        }
        let runs = &runs;
        scope.spawn(move || {
            let recycler = Recycler::new(backend);
            let mut inputs = InputCache::default();
            // When the device thread last finished a job: what it waits after that is the
            // next job's (none for the first, which has nothing to wait after).
            let mut idle_since: Option<Instant> = None;
            while let Some(next) = runs.next() {
                let request_wait_ms = idle_since.map_or(0.0, ms_since);
                let (job, ctx, compiled, source, mut waits) = match next {
                    Next::New(job) => {
                        let clock = Instant::now();
                        let prepared = job.prepared.take();
                        let waits = StageTimes { request_wait_ms, compile_wait_ms: ms_since(clock), ..StageTimes::default() };
                        let (ctx, compiled) = match prepared {
                            Err(failure) => {
                                job.finished.fill(Err(failure));
                                idle_since = Some(Instant::now());
                                continue;
                            }
                            Ok(prepared) => prepared,
                        };
                        if job.request.job.compile_only {
                            job.finished.fill(check_compiled(&recycler, &ctx, &compiled, &job.request.job));
                            idle_since = Some(Instant::now());
                            continue;
                        }
                        (job, ctx, compiled, InputSource::Kept, waits)
                    }
                    Next::Again(again) => {
                        // The kept copies may be what went wrong: the next jobs write new ones.
                        inputs.forget_device_copies(&recycler);
                        (again.job, again.ctx, again.compiled, InputSource::Host, again.earlier)
                    }
                };
                if source == InputSource::Host {
                    waits.reruns += 1;
                    waits.request_wait_ms += request_wait_ms;
                }
                let kept_inputs = source == InputSource::Kept && inputs.holds_copies_for(&ctx, &job.request.job);
                send(&Message::Started { id: job.request.id, kept_inputs });
                let executed = execute(&recycler, &ctx, &compiled, &job.request.job, &mut inputs, source, waits);
                idle_since = Some(Instant::now());
                match executed {
                    Ok(executed) => {
                        if executed.inputs_kept {
                            runs.judging();
                        }
                        let _ = finish_tx.send((job, executed));
                    }
                    Err(failure) => {
                        let fault = failure.category == FailureKind::Crashed;
                        job.finished.fill(Err(failure));
                        if fault {
                            if runs.owed() {
                                // An earlier job may still need running again, which this
                                // device cannot do now; dying unanswered makes the parent
                                // resend them all one at a time, each on a fresh worker.
                                std::process::exit(FAULT_EXIT);
                            }
                            // Nothing more runs on a device that faulted; the sender exits
                            // once this answer is out.
                            break;
                        }
                    }
                }
            }
            inputs.forget_device_copies(&recycler);
        });
        for _ in 0..finishers {
            scope.spawn(|| {
                loop {
                    let next = finish_rx.lock().unwrap_or_else(|p| p.into_inner()).recv();
                    let Ok((job, executed)) = next else { break };
                    let inputs_kept = executed.inputs_kept;
                    let (ctx, compiled) = (executed.ctx.clone(), executed.compiled.clone());
                    let report = finish(executed, &job.request.job.outputs, &references);
                    if inputs_kept && looks_wrong(&report) {
                        runs.again(Again { job, ctx, compiled, earlier: report.stages });
                        continue;
                    }
                    job.finished.fill(Ok(report));
                    if inputs_kept {
                        runs.judged();
                    }
                }
            });
        }
        scope.spawn(|| {
            for job in send_rx {
                let result = job.finished.take();
                let fault = matches!(&result, Err(f) if f.category == FailureKind::Crashed);
                send(&Message::Done { id: job.request.id, result });
                if fault {
                    std::process::exit(FAULT_EXIT);
                }
            }
        });

        let stdin = std::io::stdin();
        for line in stdin.lock().lines() {
            let Ok(line) = line else { break };
            if line.trim().is_empty() {
                continue;
            }
            match serde_json::from_str::<Request>(&line) {
                Ok(request) => {
                    let job = Arc::new(WorkerJob { request, prepared: Slot::default(), finished: Slot::default() });
                    let _ = compile_tx.send(job.clone());
                    runs.push(job.clone());
                    let _ = send_tx.send(job);
                }
                Err(e) => {
                    // The parent speaks another dialect; say so where a person will see it.
                    eprintln!("peak worker: unreadable request ({e}): {line}");
                    std::process::exit(2);
                }
            }
        }
        drop(compile_tx);
        runs.close();
        drop(send_tx);
    });
    Ok(())
}

/// A job to run again from the host: its outputs failed their comparison on inputs copied
/// from the worker's kept device copies, which a kernel before it may have damaged.
struct Again {
    job: Arc<WorkerJob>,
    ctx: Arc<Context>,
    compiled: Arc<Compiled>,
    /// The first run's stages, counted with the second's.
    earlier: StageTimes,
}

enum Next {
    New(Arc<WorkerJob>),
    Again(Again),
}

/// The run thread's work: new jobs in request order, and jobs to run again, which go
/// first (the sender is waiting for them).
#[derive(Default)]
struct RunQueue {
    state: Mutex<RunQueueState>,
    ready: Condvar,
}

#[derive(Default)]
struct RunQueueState {
    new: VecDeque<Arc<WorkerJob>>,
    again: VecDeque<Again>,
    /// No more requests will come.
    closed: bool,
    /// Jobs run on kept inputs whose outputs are still being judged: each may come back.
    judging: usize,
}

impl RunQueue {
    fn lock(&self) -> std::sync::MutexGuard<'_, RunQueueState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn push(&self, job: Arc<WorkerJob>) {
        self.lock().new.push_back(job);
        self.ready.notify_all();
    }

    fn close(&self) {
        self.lock().closed = true;
        self.ready.notify_all();
    }

    fn judging(&self) {
        self.lock().judging += 1;
    }

    fn judged(&self) {
        let mut state = self.lock();
        state.judging = state.judging.saturating_sub(1);
        drop(state);
        self.ready.notify_all();
    }

    fn again(&self, again: Again) {
        let mut state = self.lock();
        state.judging = state.judging.saturating_sub(1);
        state.again.push_back(again);
        drop(state);
        self.ready.notify_all();
    }

    /// Whether a job may still come back to be run again.
    fn owed(&self) -> bool {
        let state = self.lock();
        state.judging > 0 || !state.again.is_empty()
    }

    /// The next job to run; `None` once the requests have ended and nothing can come back.
    fn next(&self) -> Option<Next> {
        let mut state = self.lock();
        loop {
            if let Some(again) = state.again.pop_front() {
                return Some(Next::Again(again));
            }
            if let Some(job) = state.new.pop_front() {
                return Some(Next::New(job));
            }
            if state.closed && state.judging == 0 {
                return None;
            }
            state = self.ready.wait(state).unwrap_or_else(|p| p.into_inner());
        }
    }
}

/// A value one thread fills and another waits for.
pub(super) struct Slot<T> {
    value: Mutex<Option<T>>,
    ready: Condvar,
}

impl<T> Default for Slot<T> {
    fn default() -> Self {
        Slot { value: Mutex::new(None), ready: Condvar::new() }
    }
}

impl<T> Slot<T> {
    pub(super) fn fill(&self, value: T) {
        *self.value.lock().unwrap_or_else(|p| p.into_inner()) = Some(value);
        self.ready.notify_all();
    }

    pub(super) fn take(&self) -> T {
        let mut value = self.value.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if let Some(v) = value.take() {
                return v;
            }
            value = self.ready.wait(value).unwrap_or_else(|p| p.into_inner());
        }
    }
}

pub(super) struct WorkerJob {
    pub(super) request: Request,
    pub(super) prepared: Slot<Prepared>,
    pub(super) finished: Slot<Result<RunReport, Failure>>,
}

/// Move the real stdout to a private descriptor and send descriptor 1 to stderr, so that
/// nothing but protocol messages (a kernel's printf, a driver's chatter) reaches the parent.
#[cfg(unix)]
fn protocol_stdout() -> std::io::Result<BufWriter<File>> {
    use std::os::fd::FromRawFd;
    std::io::stdout().flush()?;
    // SAFETY: plain descriptor calls; the new descriptor is owned by the File below.
    let private = unsafe { libc::fcntl(1, libc::F_DUPFD_CLOEXEC, 3) };
    if private < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: as above; 1 and 2 stay open for the life of the process.
    if unsafe { libc::dup2(2, 1) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `private` is a fresh descriptor nothing else owns.
    Ok(BufWriter::new(unsafe { File::from_raw_fd(private) }))
}

#[cfg(not(unix))]
fn protocol_stdout() -> std::io::Result<BufWriter<File>> {
    Err(std::io::Error::new(std::io::ErrorKind::Unsupported, "peak workers need a Unix system"))
}

fn write_message(out: &mut impl Write, message: &Message) -> std::io::Result<()> {
    let mut line = serde_json::to_string(message).map_err(std::io::Error::other)?;
    line.push('\n');
    out.write_all(line.as_bytes())?;
    out.flush()
}
