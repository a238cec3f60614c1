//! The worker side: `peak worker` serves requests from stdin through a pipeline of
//! compile, run, finish and send threads.

use std::fs::File;
use std::io::{BufRead, BufWriter, Write};
use std::sync::{Arc, Condvar, Mutex, mpsc};

use crate::backend::Backend;

use super::compile::{ModuleCache, Prepared, prepare};
use super::execute::{Executed, InputCache, check_compiled, execute};
use super::outputs::{ReferenceCache, finish};
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
    let (run_tx, run_rx) = mpsc::channel::<Arc<WorkerJob>>();
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
        scope.spawn(move || {
            let recycler = Recycler::new(backend);
            let mut inputs = InputCache::default();
            for job in run_rx {
                let (ctx, compiled) = match job.prepared.take() {
                    Err(failure) => {
                        job.finished.fill(Err(failure));
                        continue;
                    }
                    Ok(prepared) => prepared,
                };
                if job.request.job.compile_only {
                    job.finished.fill(check_compiled(&recycler, &ctx, &compiled, &job.request.job));
                    continue;
                }
                send(&Message::Started { id: job.request.id });
                match execute(&recycler, &ctx, &compiled, &job.request.job, &mut inputs) {
                    Ok(executed) => {
                        let _ = finish_tx.send((job, executed));
                    }
                    Err(failure) => {
                        let fault = failure.category == FailureKind::Crashed;
                        job.finished.fill(Err(failure));
                        if fault {
                            // Nothing more runs on a device that faulted; the sender exits
                            // once this answer is out.
                            break;
                        }
                    }
                }
            }
        });
        for _ in 0..finishers {
            scope.spawn(|| {
                loop {
                    let next = finish_rx.lock().unwrap_or_else(|p| p.into_inner()).recv();
                    let Ok((job, executed)) = next else { break };
                    job.finished.fill(Ok(finish(executed, &job.request.job.outputs, &references)));
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
                    let _ = run_tx.send(job.clone());
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
        drop(run_tx);
        drop(send_tx);
    });
    Ok(())
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
