//! The agent executor: a person, or the AI agent driving peak, carries the pass out.
//!
//! It is a file protocol, so it works the same from a terminal, an IDE agent or the MCP
//! server, and survives the process ending between prompt and answer:
//!
//! 1. `execute` writes the prompt to `<dir>/pass-N.md` (`pass-N-attempt-M.md` for
//!    repairs), records it in `<dir>/pending.json` and answers [`Outcome::Waiting`].
//! 2. `peak submit FILE` calls [`AgentExecutor::submit`], which stores the file as the
//!    reply (`pass-N.reply.md`) and clears the pending record.
//! 3. The apply is resumed; `execute` finds the reply and returns it, with producer
//!    `agent` and the time between prompt and submission as latency.
//!
//! A submission is either a reply in the answer format (one fenced block) or the bare
//! region text, which is wrapped in a fence so both go through the same reply parser.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use super::{AGENT_PRODUCER, BoxFuture, Executor, ExecutorError, Outcome, PassRequest, Pending, Response};

const PENDING_FILE: &str = "pending.json";

#[derive(Debug, Clone)]
pub struct AgentExecutor {
    dir: PathBuf,
}

/// What `submit` stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Submitted {
    pub transformation: String,
    pub pass: usize,
    pub attempt: u32,
    pub reply_file: PathBuf,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct PendingRecord {
    transformation: String,
    pass: usize,
    attempt: u32,
}

impl AgentExecutor {
    /// Prompts and replies go to `dir` (for a workflow, `<workflow>/.git/peak/pending`).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        AgentExecutor { dir: dir.into() }
    }

    pub fn prompt_file(&self, pass: usize, attempt: u32) -> PathBuf {
        self.dir.join(format!("{}.md", stem(pass, attempt)))
    }

    fn reply_file(&self, pass: usize, attempt: u32) -> PathBuf {
        self.dir.join(format!("{}.reply.md", stem(pass, attempt)))
    }

    /// The prompt waiting for a submission, if any.
    pub fn pending(&self) -> Result<Option<Pending>, ExecutorError> {
        Ok(self.pending_record()?.map(|r| Pending { pass: r.pass, attempt: r.attempt, prompt_file: self.prompt_file(r.pass, r.attempt) }))
    }

    /// Store `file` as the reply to the waiting prompt.
    pub fn submit(&self, file: &Path) -> Result<Submitted, ExecutorError> {
        let record = self.pending_record()?.ok_or_else(|| ExecutorError::NothingPending { dir: self.dir.clone() })?;
        let text = std::fs::read_to_string(file).map_err(|source| ExecutorError::Io { path: file.to_path_buf(), source })?;
        if text.trim().is_empty() {
            return Err(ExecutorError::EmptySubmission { file: file.to_path_buf() });
        }
        let reply = if has_fence(&text) { text } else { wrap_in_fence(&text) };
        let reply_file = self.reply_file(record.pass, record.attempt);
        write_atomically(&reply_file, &reply)?;
        let pending = self.dir.join(PENDING_FILE);
        std::fs::remove_file(&pending).map_err(|source| ExecutorError::Io { path: pending, source })?;
        Ok(Submitted { transformation: record.transformation, pass: record.pass, attempt: record.attempt, reply_file })
    }

    /// Remove every prompt and reply, once the transformation has finished either way.
    pub fn clear(&self) -> Result<(), ExecutorError> {
        match std::fs::remove_dir_all(&self.dir) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(ExecutorError::Io { path: self.dir.clone(), source: e }),
            _ => Ok(()),
        }
    }

    fn pending_record(&self) -> Result<Option<PendingRecord>, ExecutorError> {
        let path = self.dir.join(PENDING_FILE);
        match std::fs::read_to_string(&path) {
            Ok(text) => serde_json::from_str(&text).map(Some).map_err(|e| ExecutorError::BadFile { file: path, message: e.to_string() }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(source) => Err(ExecutorError::Io { path, source }),
        }
    }

    fn run(&self, request: &PassRequest) -> Result<Outcome, ExecutorError> {
        let prompt_file = self.prompt_file(request.pass, request.attempt);
        let reply_file = self.reply_file(request.pass, request.attempt);
        if reply_file.exists() {
            let text = std::fs::read_to_string(&reply_file).map_err(|source| ExecutorError::Io { path: reply_file.clone(), source })?;
            let latency_ms = match (modified(&prompt_file), modified(&reply_file)) {
                (Some(asked), Some(answered)) => answered.duration_since(asked).map_or(0, |d| d.as_millis() as u64),
                _ => 0,
            };
            return Ok(Outcome::Reply(Response { producer: AGENT_PRODUCER.to_string(), text, tokens_in: None, tokens_out: None, latency_ms }));
        }
        std::fs::create_dir_all(&self.dir).map_err(|source| ExecutorError::Io { path: self.dir.clone(), source })?;
        write_atomically(&prompt_file, &request.prompt)?;
        let record = PendingRecord { transformation: request.transformation.clone(), pass: request.pass, attempt: request.attempt };
        let json = serde_json::to_string_pretty(&record).map_err(|e| ExecutorError::BadFile { file: self.dir.join(PENDING_FILE), message: e.to_string() })?;
        write_atomically(&self.dir.join(PENDING_FILE), &json)?;
        Ok(Outcome::Waiting(Pending { pass: request.pass, attempt: request.attempt, prompt_file }))
    }
}

impl Executor for AgentExecutor {
    fn producer(&self) -> String {
        AGENT_PRODUCER.to_string()
    }

    fn execute<'a>(&'a self, request: &'a PassRequest) -> BoxFuture<'a, Result<Outcome, ExecutorError>> {
        Box::pin(async move { self.run(request) })
    }
}

fn stem(pass: usize, attempt: u32) -> String {
    if attempt <= 1 { format!("pass-{pass}") } else { format!("pass-{pass}-attempt-{attempt}") }
}

fn has_fence(text: &str) -> bool {
    text.lines().map(str::trim_start).any(|l| l.starts_with("```") || l.starts_with("~~~"))
}

fn wrap_in_fence(text: &str) -> String {
    format!("```\n{}\n```\n", text.trim_end_matches('\n'))
}

fn modified(path: &Path) -> Option<SystemTime> {
    std::fs::metadata(path).and_then(|m| m.modified()).ok()
}

/// Write through a temporary file and rename, so a reader never sees half a prompt.
fn write_atomically(path: &Path, text: &str) -> Result<(), ExecutorError> {
    let tmp = path.with_extension("peak-tmp");
    std::fs::write(&tmp, text).map_err(|source| ExecutorError::Io { path: tmp.clone(), source })?;
    std::fs::rename(&tmp, path).map_err(|source| ExecutorError::Io { path: path.to_path_buf(), source })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(pass: usize, attempt: u32) -> PassRequest {
        PassRequest { transformation: "Refactor".into(), pass, attempt, prompt: format!("prompt for pass {pass}") }
    }

    #[tokio::test]
    async fn prompt_waits_then_submission_resumes() {
        let dir = tempfile::tempdir().unwrap();
        let agent = AgentExecutor::new(dir.path().join("pending"));
        assert!(matches!(agent.submit(&dir.path().join("x")), Err(ExecutorError::NothingPending { .. })));

        let Outcome::Waiting(pending) = agent.execute(&request(2, 1)).await.unwrap() else { panic!("expected waiting") };
        assert_eq!(pending.prompt_file, dir.path().join("pending/pass-2.md"));
        assert_eq!(std::fs::read_to_string(&pending.prompt_file).unwrap(), "prompt for pass 2");
        assert_eq!(agent.pending().unwrap(), Some(pending.clone()));

        let empty = dir.path().join("empty.cu");
        std::fs::write(&empty, "  \n").unwrap();
        assert!(matches!(agent.submit(&empty), Err(ExecutorError::EmptySubmission { .. })));

        let region = dir.path().join("device.cu");
        std::fs::write(&region, "__global__ void k() {}\n").unwrap();
        let submitted = agent.submit(&region).unwrap();
        assert_eq!((submitted.transformation.as_str(), submitted.pass, submitted.attempt), ("Refactor", 2, 1));
        assert_eq!(agent.pending().unwrap(), None);

        let Outcome::Reply(reply) = agent.execute(&request(2, 1)).await.unwrap() else { panic!("expected a reply") };
        assert_eq!(reply.producer, "agent");
        assert_eq!(reply.text, "```\n__global__ void k() {}\n```\n");

        agent.clear().unwrap();
        assert!(!dir.path().join("pending").exists());
    }

    #[tokio::test]
    async fn fenced_submission_is_kept_as_written_and_repairs_get_their_own_files() {
        let dir = tempfile::tempdir().unwrap();
        let agent = AgentExecutor::new(dir.path());
        let Outcome::Waiting(pending) = agent.execute(&request(1, 3)).await.unwrap() else { panic!("expected waiting") };
        assert_eq!(pending.prompt_file, dir.path().join("pass-1-attempt-3.md"));
        let reply = dir.path().join("reply.md");
        std::fs::write(&reply, "Fixed the bounds.\n```cuda\nint x;\n```\n").unwrap();
        agent.submit(&reply).unwrap();
        let Outcome::Reply(r) = agent.execute(&request(1, 3)).await.unwrap() else { panic!("expected a reply") };
        assert_eq!(r.text, "Fixed the bounds.\n```cuda\nint x;\n```\n");
    }
}
