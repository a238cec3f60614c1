//! Crashes and time-outs: the worker process's life (spawned in its own process group,
//! killed with it, reaped), and which job a death or a silence is blamed on.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdin, ExitStatus, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use crate::backend::DeviceInfo;

use super::command::WorkerCommand;
use super::pool::{Answer, PoolOptions, WorkerError, WorkerPool};
use super::protocol::{FAULT_EXIT, Failure, FailureKind, Message, PROTOCOL_VERSION};

pub(super) enum Event {
    Message(Box<Message>),
    Garbage(String),
    Eof,
}

pub(super) struct Worker {
    child: Child,
    pub(super) stdin: Option<ChildStdin>,
    pub(super) events: mpsc::Receiver<Event>,
    stderr: Arc<Mutex<Tail>>,
}

/// The last few kilobytes a worker wrote to stderr.
#[derive(Default)]
struct Tail(Vec<u8>);

impl Tail {
    const KEEP: usize = 8192;

    fn push(&mut self, bytes: &[u8]) {
        self.0.extend_from_slice(bytes);
        if self.0.len() > Self::KEEP {
            let cut = self.0.len() - Self::KEEP;
            self.0.drain(..cut);
        }
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0).into_owned()
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
        let (worker, device) = Worker::spawn(&self.backend, &self.command, &self.options)?;
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
        self.last_stderr = Some(worker.stderr.lock().unwrap_or_else(|p| p.into_inner()).text());
        status
    }

    pub(super) fn protocol(&mut self, message: String) -> WorkerError {
        self.discard_worker();
        WorkerError::Protocol { message }
    }
}

impl Worker {
    pub(super) fn spawn(backend: &str, command: &WorkerCommand, options: &PoolOptions) -> Result<(Worker, DeviceInfo), WorkerError> {
        let mut cmd = command.command();
        cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
        #[cfg(unix)]
        {
            use std::os::unix::process::CommandExt;
            cmd.process_group(0);
            #[cfg(target_os = "linux")]
            // SAFETY: prctl is async-signal-safe, as pre_exec requires.
            unsafe {
                cmd.pre_exec(|| {
                    libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                    Ok(())
                });
            }
        }
        let mut child = cmd.spawn().map_err(|e| WorkerError::Spawn { command: command.display(), message: e.to_string() })?;
        let stdout = child.stdout.take().expect("piped stdout");
        let stderr_pipe = child.stderr.take().expect("piped stderr");
        let stdin = child.stdin.take();

        let (tx, events) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let event = match serde_json::from_str::<Message>(&line) {
                    Ok(message) => Event::Message(Box::new(message)),
                    Err(_) => Event::Garbage(line),
                };
                if tx.send(event).is_err() {
                    return;
                }
            }
            let _ = tx.send(Event::Eof);
        });
        let stderr = Arc::new(Mutex::new(Tail::default()));
        let sink = stderr.clone();
        let forward = options.forward_stderr;
        std::thread::spawn(move || {
            let mut pipe = stderr_pipe;
            let mut buf = [0u8; 4096];
            while let Ok(n) = pipe.read(&mut buf) {
                if n == 0 {
                    break;
                }
                if forward {
                    let _ = std::io::stderr().write_all(&buf[..n]);
                }
                sink.lock().unwrap_or_else(|p| p.into_inner()).push(&buf[..n]);
            }
        });

        let mut worker = Worker { child, stdin, events, stderr };
        let startup_failure = |worker: &mut Worker, message: String| {
            let _ = worker.kill();
            WorkerError::Startup { command: command.display(), message, stderr: worker.stderr.lock().unwrap_or_else(|p| p.into_inner()).text() }
        };
        match worker.events.recv_timeout(options.startup_timeout) {
            Ok(Event::Message(message)) => match *message {
                Message::Ready { protocol, device, .. } if protocol == PROTOCOL_VERSION => Ok((worker, device)),
                Message::Ready { protocol, .. } => Err(startup_failure(
                    &mut worker,
                    format!("it speaks protocol {protocol}, this peak speaks {PROTOCOL_VERSION}; use one peak binary for both"),
                )),
                Message::Unavailable { message } => {
                    let _ = worker.kill();
                    Err(WorkerError::Unavailable { backend: backend.to_string(), message })
                }
                other => Err(startup_failure(&mut worker, format!("its first message was {other:?}, not `ready`"))),
            },
            Ok(Event::Garbage(line)) => Err(startup_failure(&mut worker, format!("it printed `{line}` instead of a protocol message"))),
            Ok(Event::Eof) | Err(mpsc::RecvTimeoutError::Disconnected) => {
                // Give the stderr reader a moment to catch the last words.
                std::thread::sleep(Duration::from_millis(50));
                let status = worker.child.wait().ok();
                Err(startup_failure(&mut worker, format!("it exited before it was ready ({})", describe_exit(status))))
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {
                Err(startup_failure(&mut worker, format!("no `ready` within {:.0} s", options.startup_timeout.as_secs_f64())))
            }
        }
    }

    /// Kill the whole process group and reap the child.
    fn kill(&mut self) -> Option<ExitStatus> {
        self.stdin.take();
        #[cfg(unix)]
        // SAFETY: signalling our own child's process group.
        unsafe {
            libc::kill(-(self.child.id() as i32), libc::SIGKILL);
        }
        let _ = self.child.kill();
        let status = self.child.wait().ok();
        // Let the stderr reader drain what the dying process wrote.
        std::thread::sleep(Duration::from_millis(20));
        status
    }

    /// Close stdin so the worker finishes and exits; kill it if it dawdles.
    pub(super) fn shutdown(&mut self, grace: Duration) -> Option<ExitStatus> {
        self.stdin.take();
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        self.kill()
    }
}

/// "exit status 70", "killed by signal 11 (SIGSEGV)", ...
/// Whether a worker's end looks like its code's doing: a fault signal (a wild write, an
/// abort), directly or as the 128 + signal exit status a launcher such as srun reports
/// for its task, or the worker's own exit after a device fault. Anything else (killed,
/// hung up, an unknown status) may be the launcher's or the machine's.
pub(super) fn is_fault(status: Option<ExitStatus>) -> bool {
    const FAULTS: [i32; 5] = [libc::SIGSEGV, libc::SIGBUS, libc::SIGABRT, libc::SIGILL, libc::SIGFPE];
    let Some(status) = status else { return false };
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(signal) = status.signal() {
            return FAULTS.contains(&signal);
        }
    }
    status.code().is_some_and(|code| code == FAULT_EXIT || FAULTS.iter().any(|s| code == 128 + s))
}

pub fn describe_exit(status: Option<ExitStatus>) -> String {
    let Some(status) = status else { return "exit status unknown".into() };
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(signal) = status.signal() {
            let name = match signal {
                libc::SIGSEGV => " (SIGSEGV)",
                libc::SIGBUS => " (SIGBUS)",
                libc::SIGABRT => " (SIGABRT)",
                libc::SIGILL => " (SIGILL)",
                libc::SIGFPE => " (SIGFPE)",
                libc::SIGKILL => " (SIGKILL)",
                _ => "",
            };
            return format!("killed by signal {signal}{name}");
        }
    }
    match status.code() {
        Some(FAULT_EXIT) => format!("exit status {FAULT_EXIT}: it stopped after a device fault"),
        Some(code) => format!("exit status {code}"),
        None => "exit status unknown".into(),
    }
}

fn last_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.trim_end().lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_descriptions_name_the_signal() {
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(describe_exit(Some(ExitStatus::from_raw(libc::SIGSEGV))), "killed by signal 11 (SIGSEGV)");
        assert!(describe_exit(Some(ExitStatus::from_raw(FAULT_EXIT << 8))).contains("device fault"));
        assert_eq!(describe_exit(None), "exit status unknown");
    }
}
