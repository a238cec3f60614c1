//! The worker process's life: spawned in its own process group, killed with it, reaped,
//! and how its end reads ([`describe_exit`], `is_fault`). Which job a death or a silence
//! is blamed on is the pool's (`WorkerPool::blame`, in `pool.rs`).

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdin, ExitStatus, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use crate::backend::DeviceInfo;

use super::command::WorkerCommand;
use super::error::WorkerError;
use super::protocol::{FAULT_EXIT, Message, PROTOCOL_VERSION};

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

impl Worker {
    pub(super) fn spawn(backend: &str, command: &WorkerCommand, startup_timeout: Duration, forward: bool) -> Result<(Worker, DeviceInfo), WorkerError> {
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
        match worker.events.recv_timeout(startup_timeout) {
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
            Err(mpsc::RecvTimeoutError::Timeout) => Err(startup_failure(&mut worker, format!("no `ready` within {:.0} s", startup_timeout.as_secs_f64()))),
        }
    }

    /// Kill the whole process group and reap the child.
    pub(super) fn kill(&mut self) -> Option<ExitStatus> {
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

    /// What the worker wrote last to stderr (its tail).
    pub(super) fn stderr_tail(&self) -> String {
        self.stderr.lock().unwrap_or_else(|p| p.into_inner()).text()
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
