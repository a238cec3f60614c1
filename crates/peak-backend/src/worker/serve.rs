//! The worker side: `peak worker` serves requests from stdin through a pipeline of
//! compile, run and finish threads, answering each request as soon as it is done.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{BufRead, BufWriter, Write};
use std::sync::{Arc, Condvar, Mutex, mpsc};
use std::time::Instant;

use peak_spec::Context;

use crate::backend::Backend;
use crate::runner::{StageTimes, ms_since};
use crate::yardstick::Ask;

use super::compile::{Compiled, ModuleCache, Prepared, prepare};
use super::execute::{Executed, InputCache, InputSource, check_compiled, execute, run_yardstick};
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
/// Inside, a request passes through three stages, each on its own threads so the device
/// never waits for the host: compile (one thread per core), run (one thread: the device
/// runs one job at a time), and finish (comparing or hashing outputs, a few threads). A
/// compile thread hands each job to the run thread as soon as it is compiled, so the run
/// thread takes jobs in the order their compiles end, not the order they were asked for,
/// and never idles behind a slow compile while a later job is ready. Each job is answered
/// as soon as it is done (by the run thread for a failure, a compile error or a
/// `compile_only` job, by a finisher otherwise), so answers come in any order; the
/// parent matches them by id.
///
/// The run thread fills each job's input buffers from device copies of the inputs that it
/// keeps while the inputs stay the same ([`InputCache`]), instead of from the host. Those
/// copies outlive the job, so a kernel writing far outside its own buffers could damage
/// them for the jobs after it. Where that would show, it is not believed: a job whose
/// outputs fail their comparison on kept inputs is run again from the host, with the kept
/// copies dropped, and only that run's answer counts; a job that faults or hangs on kept
/// inputs says so in `started`, and the parent gives it a second run on a fresh worker.
///
/// A job that faults the device runs nothing after it. The jobs that ran before it are
/// judged and answered first (their runs were sound, and the parent stops listening once
/// it hears of the fault), then the fault, then the worker exits with [`FAULT_EXIT`]. If
/// one of them must be run again, which this device cannot do now, the worker exits
/// without answering the fault, and the parent resends its jobs one at a time.
pub fn serve(backend: &dyn Backend) -> std::io::Result<()> {
    let worker = Worker {
        backend,
        out: Mutex::new(protocol_stdout()?),
        runs: RunQueue::default(),
        modules: Mutex::new(ModuleCache::default()),
        references: Mutex::new(ReferenceCache::default()),
    };
    worker.send(&Message::Ready { protocol: PROTOCOL_VERSION, pid: std::process::id(), device: backend.device().clone() });

    let (compilers, finishers) = thread_counts();
    let (compile_tx, compile_rx) = mpsc::channel::<Request>();
    let compile_rx = Mutex::new(compile_rx);
    let (finish_tx, finish_rx) = mpsc::channel::<(Request, Executed)>();
    let finish_rx = Mutex::new(finish_rx);

    std::thread::scope(|scope| {
        let worker = &worker;
        for _ in 0..compilers {
            scope.spawn(|| worker.compile_requests(&compile_rx));
        }
        // The run thread owns the finishers' sender: when it ends, so do they.
        scope.spawn(move || worker.run_jobs(finish_tx));
        for _ in 0..finishers {
            scope.spawn(|| worker.finish_jobs(&finish_rx));
        }
        worker.read_requests(compile_tx);
    });
    Ok(())
}

/// How many compile threads (one per core, or `PEAK_COMPILE_THREADS`) and finish threads
/// (a quarter of the cores, 1 to 4: comparing outputs is cheap next to a compile).
fn thread_counts() -> (usize, usize) {
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    let compilers = std::env::var("PEAK_COMPILE_THREADS").ok().and_then(|v| v.parse::<usize>().ok()).unwrap_or(cores).max(1);
    let finishers = (cores / 4).clamp(1, 4);
    (compilers, finishers)
}

/// What the worker's threads share: the backend, the protocol's stdout, the run thread's
/// queue and the caches of compiled modules and reference outputs.
struct Worker<'a> {
    backend: &'a dyn Backend,
    out: Mutex<BufWriter<File>>,
    runs: RunQueue,
    modules: Mutex<ModuleCache>,
    references: Mutex<ReferenceCache>,
}

/// A compiled job the run thread is about to run, and where its inputs come from.
struct ToRun {
    request: Request,
    ctx: Arc<Context>,
    compiled: Arc<Compiled>,
    source: InputSource,
    waits: StageTimes,
}

impl Worker<'_> {
    /// Send one message to the parent, from any thread.
    fn send(&self, message: &Message) {
        let mut out = self.out.lock().unwrap_or_else(|p| p.into_inner());
        // A closed pipe means the parent is gone; nothing useful is left to do.
        if write_message(&mut *out, message).is_err() {
            std::process::exit(0);
        }
    }

    /// Read requests from stdin until it closes: yardsticks straight to the run thread,
    /// the rest to the compile threads. Ends the compile threads and closes the run queue.
    fn read_requests(&self, compile_tx: mpsc::Sender<Request>) {
        let stdin = std::io::stdin();
        for line in stdin.lock().lines() {
            let Ok(line) = line else { break };
            if line.trim().is_empty() {
                continue;
            }
            match serde_json::from_str::<Request>(&line) {
                // Nothing to compile: straight to the device thread.
                Ok(request) if request.job.yardstick.is_some() => self.runs.yardstick(request),
                Ok(request) => {
                    self.runs.requested();
                    let _ = compile_tx.send(request);
                }
                Err(e) => {
                    // The parent speaks another dialect; say so where a person will see it.
                    eprintln!("peak worker: unreadable request ({e}): {line}");
                    std::process::exit(2);
                }
            }
        }
        drop(compile_tx);
        self.runs.close();
    }

    /// A compile thread: compile requests until they end, handing each to the run queue
    /// as soon as its compile ends.
    fn compile_requests(&self, compile_rx: &Mutex<mpsc::Receiver<Request>>) {
        loop {
            let next = compile_rx.lock().unwrap_or_else(|p| p.into_inner()).recv();
            let Ok(request) = next else { break };
            let prepared = prepare(self.backend, &request.job, &self.modules);
            self.runs.compiled(request, prepared);
        }
    }

    /// The run thread: take jobs from the run queue one at a time until it ends, run them
    /// on the device and hand what ran to the finishers.
    fn run_jobs(&self, finish_tx: mpsc::Sender<(Request, Executed)>) {
        let recycler = Recycler::new(self.backend);
        let mut inputs = InputCache::default();
        // When the device thread last finished a job: what it waits after that is the
        // next job's (none for the first, which has nothing to wait after).
        let mut idle_since: Option<Instant> = None;
        while let Some((next, idle)) = self.runs.next(idle_since) {
            let waits = StageTimes { request_wait_ms: idle.request_ms, compile_wait_ms: idle.compile_ms, ..StageTimes::default() };
            let Some(job) = self.to_run(next, waits, &recycler, &mut inputs) else {
                idle_since = Some(Instant::now());
                continue;
            };
            let request = job.request;
            let kept_inputs = job.source == InputSource::Kept && inputs.holds_copies_for(&job.ctx, &request.job);
            self.send(&Message::Started { id: request.id, kept_inputs });
            let executed = execute(&recycler, &job.ctx, &job.compiled, &request.job, &mut inputs, job.source, job.waits);
            idle_since = Some(Instant::now());
            match executed {
                Ok(executed) => {
                    self.runs.finishing(executed.inputs_kept);
                    let _ = finish_tx.send((request, executed));
                }
                Err(failure) if failure.category == FailureKind::Crashed => self.exit_after_fault(request.id, Err(failure)),
                Err(failure) => self.send(&Message::Done { id: request.id, result: Err(failure) }),
            }
        }
        inputs.forget_device_copies(&recycler);
    }

    /// The job `next` brings, ready to run on the device; `None` when the run thread has
    /// answered it already (a yardstick, a failed compile, a `compile_only` job).
    fn to_run(&self, next: Next, waits: StageTimes, recycler: &Recycler<'_>, inputs: &mut InputCache) -> Option<ToRun> {
        match next {
            Next::Yardstick(request, ask) => {
                self.time_yardstick(request, ask, recycler, inputs);
                None
            }
            Next::New(request, Err(failure)) => {
                self.send(&Message::Done { id: request.id, result: Err(failure) });
                None
            }
            Next::New(request, Ok((ctx, compiled))) => {
                if request.job.compile_only {
                    let result = check_compiled(recycler, &ctx, &compiled, &request.job);
                    self.send(&Message::Done { id: request.id, result });
                    return None;
                }
                Some(ToRun { request, ctx, compiled, source: InputSource::Kept, waits })
            }
            Next::Again(again) => {
                // The kept copies may be what went wrong: the next jobs write new ones.
                inputs.forget_device_copies(recycler);
                let mut earlier = again.earlier;
                earlier.add(&waits);
                earlier.reruns += 1;
                Some(ToRun { request: again.request, ctx: again.ctx, compiled: again.compiled, source: InputSource::Host, waits: earlier })
            }
        }
    }

    /// Time a yardstick job and answer it; a fault ends the worker as a kernel's does.
    fn time_yardstick(&self, request: Request, ask: Ask, recycler: &Recycler<'_>, inputs: &mut InputCache) {
        // The kept input copies would only crowd the device's memory.
        inputs.forget_device_copies(recycler);
        self.send(&Message::Started { id: request.id, kept_inputs: false });
        let result = run_yardstick(self.backend, &request.job, ask);
        if matches!(&result, Err(f) if f.category == FailureKind::Crashed) {
            self.exit_after_fault(request.id, result);
        }
        self.send(&Message::Done { id: request.id, result });
    }

    /// Nothing more runs on a device that faulted. The jobs that ran before it are
    /// answered first; if one of them must run again, which this device cannot do, dying
    /// unanswered makes the parent resend them all one at a time, each on a fresh worker.
    fn exit_after_fault(&self, id: u64, result: Result<RunReport, Failure>) -> ! {
        if !self.runs.settle() {
            self.send(&Message::Done { id, result });
        }
        std::process::exit(FAULT_EXIT);
    }

    /// A finish thread: judge the outputs of jobs that ran until the run thread ends, and
    /// answer each, or send it back to run again from the host where kept inputs may have
    /// spoiled its outputs.
    fn finish_jobs(&self, finish_rx: &Mutex<mpsc::Receiver<(Request, Executed)>>) {
        loop {
            let next = finish_rx.lock().unwrap_or_else(|p| p.into_inner()).recv();
            let Ok((request, executed)) = next else { break };
            let inputs_kept = executed.inputs_kept;
            let (ctx, compiled) = (executed.ctx.clone(), executed.compiled.clone());
            let report = finish(executed, &request.job.outputs, &self.references);
            if inputs_kept && looks_wrong(&report) {
                self.runs.again(Again { request, ctx, compiled, earlier: report.stages });
                continue;
            }
            self.send(&Message::Done { id: request.id, result: Ok(report) });
            self.runs.finished(inputs_kept);
        }
    }
}

/// A job to run again from the host: its outputs failed their comparison on inputs copied
/// from the worker's kept device copies, which a kernel before it may have damaged.
struct Again {
    request: Request,
    ctx: Arc<Context>,
    compiled: Arc<Compiled>,
    /// The first run's stages, counted with the second's.
    earlier: StageTimes,
}

enum Next {
    /// A request whose compile has ended (or failed).
    New(Request, Prepared),
    /// A yardstick to time ([`Job::yardstick`](super::protocol::Job::yardstick)).
    Yardstick(Request, Ask),
    Again(Again),
}

/// How long the run thread waited for its next job, split by what it waited for.
#[derive(Debug, Default, Clone, Copy)]
struct Idle {
    /// Nothing asked for: the parent had sent no request that was not already run.
    request_ms: f64,
    /// Requests there, none compiled yet: compiles fell behind.
    compile_ms: f64,
}

/// The run thread's work: jobs whose compiles have ended, in the order they ended, and jobs
/// to run again, which go first (their answers are the oldest owed). Compile threads hand
/// jobs in, and it keeps the counts the run thread's waits and its end depend on.
#[derive(Default)]
struct RunQueue {
    state: Mutex<RunQueueState>,
    ready: Condvar,
}

#[derive(Default)]
struct RunQueueState {
    new: VecDeque<(Request, Prepared)>,
    /// Yardstick jobs, which compile nothing.
    yardsticks: VecDeque<(Request, Ask)>,
    again: VecDeque<Again>,
    /// Requests read and not yet compiled.
    compiling: usize,
    /// No more requests will come.
    closed: bool,
    /// Jobs run and handed to the finishers, not yet answered.
    finishing: usize,
    /// Of those, jobs run on kept inputs: each may come back to be run again.
    judging: usize,
}

impl RunQueue {
    fn lock(&self) -> std::sync::MutexGuard<'_, RunQueueState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn update(&self, change: impl FnOnce(&mut RunQueueState)) {
        change(&mut self.lock());
        self.ready.notify_all();
    }

    /// A request arrived; its compile starts.
    fn requested(&self) {
        self.update(|s| s.compiling += 1);
    }

    /// A request's compile ended: the run thread may take it.
    fn compiled(&self, request: Request, prepared: Prepared) {
        self.update(|s| {
            s.compiling = s.compiling.saturating_sub(1);
            s.new.push_back((request, prepared));
        });
    }

    /// A yardstick job arrived: the run thread may take it at once.
    fn yardstick(&self, request: Request) {
        if let Some(ask) = request.job.yardstick {
            self.update(|s| s.yardsticks.push_back((request, ask)));
        }
    }

    fn close(&self) {
        self.update(|s| s.closed = true);
    }

    /// A job ran and goes to the finishers.
    fn finishing(&self, inputs_kept: bool) {
        let mut state = self.lock();
        state.finishing += 1;
        state.judging += usize::from(inputs_kept);
    }

    /// A finisher answered a job.
    fn finished(&self, inputs_kept: bool) {
        self.update(|s| {
            s.finishing = s.finishing.saturating_sub(1);
            if inputs_kept {
                s.judging = s.judging.saturating_sub(1);
            }
        });
    }

    /// A finisher sends a job back to be run again from the host.
    fn again(&self, again: Again) {
        self.update(|s| {
            s.finishing = s.finishing.saturating_sub(1);
            s.judging = s.judging.saturating_sub(1);
            s.again.push_back(again);
        });
    }

    /// Wait until every job handed to the finishers is answered or back to be run again;
    /// whether one came back.
    fn settle(&self) -> bool {
        let mut state = self.lock();
        while state.finishing > 0 {
            state = self.ready.wait(state).unwrap_or_else(|p| p.into_inner());
        }
        !state.again.is_empty()
    }

    /// The next job to run and how long the run thread waited for it since `idle_since`
    /// (its wait for requests not counted before its first job); `None` once the requests
    /// have ended and nothing can come back.
    fn next(&self, idle_since: Option<Instant>) -> Option<(Next, Idle)> {
        let mut state = self.lock();
        let mut idle = Idle::default();
        let mut clock = idle_since.unwrap_or_else(Instant::now);
        let mut compiles_behind = state.compiling > 0;
        loop {
            let waited = ms_since(clock);
            clock = Instant::now();
            if compiles_behind {
                idle.compile_ms += waited;
            } else if idle_since.is_some() {
                idle.request_ms += waited;
            }
            if let Some(again) = state.again.pop_front() {
                return Some((Next::Again(again), idle));
            }
            if let Some((request, prepared)) = state.new.pop_front() {
                return Some((Next::New(request, prepared), idle));
            }
            if let Some((request, ask)) = state.yardsticks.pop_front() {
                return Some((Next::Yardstick(request, ask), idle));
            }
            if state.closed && state.compiling == 0 && state.judging == 0 {
                return None;
            }
            compiles_behind = state.compiling > 0;
            state = self.ready.wait(state).unwrap_or_else(|p| p.into_inner());
        }
    }
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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use peak_spec::ExecParams;

    use super::*;
    use crate::runner::RunOptions;
    use crate::worker::protocol::{Failure, Job};

    fn request(id: u64) -> Request {
        Request { id, job: Job::new("/nowhere", ExecParams::default(), RunOptions::default()) }
    }

    fn failed() -> Prepared {
        Err(Failure::new(FailureKind::CompileFailed, "no compiler here"))
    }

    fn id(next: &Next) -> u64 {
        match next {
            Next::New(request, _) | Next::Yardstick(request, _) => request.id,
            Next::Again(again) => again.request.id,
        }
    }

    #[test]
    fn jobs_go_to_the_run_thread_in_the_order_their_compiles_end() {
        let runs = RunQueue::default();
        (1..=3).for_each(|_| runs.requested());
        runs.close();
        for id in [3, 1, 2] {
            runs.compiled(request(id), failed());
        }
        let order: Vec<u64> = std::iter::from_fn(|| runs.next(None)).map(|(next, _)| id(&next)).collect();
        assert_eq!(order, [3, 1, 2]);
    }

    #[test]
    fn a_yardstick_job_goes_to_the_run_thread_without_a_compile() {
        let runs = RunQueue::default();
        let mut yardstick = request(5);
        yardstick.job.yardstick = Some(Ask::Copy);
        runs.yardstick(yardstick);
        runs.close();
        let (next, _) = runs.next(None).expect("the yardstick comes, though nothing was compiled");
        assert!(matches!(next, Next::Yardstick(ref r, Ask::Copy) if r.id == 5));
        assert!(runs.next(None).is_none());
    }

    #[test]
    fn a_wait_for_a_pending_compile_counts_as_compile_wait() {
        let runs = RunQueue::default();
        runs.requested();
        std::thread::scope(|scope| {
            scope.spawn(|| {
                std::thread::sleep(Duration::from_millis(60));
                runs.compiled(request(1), failed());
                runs.close();
            });
            let (next, idle) = runs.next(Some(Instant::now())).expect("the job comes");
            assert_eq!(id(&next), 1);
            assert!(idle.compile_ms >= 50.0 && idle.request_ms < 10.0, "{idle:?}");
        });
        assert!(runs.next(None).is_none(), "closed, nothing compiling, nothing owed");
    }

    #[test]
    fn the_run_thread_ends_only_when_no_job_can_come_back() {
        let runs = RunQueue::default();
        runs.finishing(true);
        runs.close();
        let clock = Instant::now();
        std::thread::scope(|scope| {
            scope.spawn(|| {
                std::thread::sleep(Duration::from_millis(60));
                runs.finished(true);
            });
            assert!(runs.next(None).is_none());
        });
        assert!(clock.elapsed() >= Duration::from_millis(50), "it ended while a job on kept inputs was still judged");
    }

    #[test]
    fn a_fault_waits_until_the_jobs_that_ran_before_it_are_answered() {
        let runs = RunQueue::default();
        runs.finishing(false);
        runs.finishing(false);
        let clock = Instant::now();
        std::thread::scope(|scope| {
            scope.spawn(|| {
                for _ in 0..2 {
                    std::thread::sleep(Duration::from_millis(30));
                    runs.finished(false);
                }
            });
            assert!(!runs.settle(), "nothing came back to be run again");
        });
        assert!(clock.elapsed() >= Duration::from_millis(50), "it did not wait for both answers");
    }
}
