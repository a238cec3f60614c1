//! The attempts log: every try at a transformation, failed ones included.
//!
//! # Design
//!
//! Attempts are research data ("which model fails which transformation, and how"), so
//! they must outlive crashes, survive checkouts of old checkpoints and travel with the
//! workflow when it is cloned. Two copies serve those needs:
//!
//! * **Local log**, `.git/peak/attempts.jsonl`: one JSON record per line, appended with a
//!   single `write` of a whole line under the writer lock. It lives inside `.git`, so no
//!   checkout rewrites it and no checkpoint carries a stale copy of it. A `kill -9` can at
//!   worst leave a final line without its newline; readers skip and report such a line,
//!   and the next append starts on a fresh line so the damage never spreads.
//! * **Mirror branch**, `refs/heads/peak-attempts`: a chain of commits whose tree holds
//!   one file, `attempts.jsonl`, the whole log. It is a *branch* because `git clone` copies
//!   branches and tags only; a custom ref such as `refs/peak/attempts` would be silently
//!   left behind by a plain clone. It is refreshed after every checkpoint and on
//!   [`Workflow::sync_attempts`](crate::Workflow::sync_attempts), and is never part of the
//!   checkpoint DAG (log, revs and checkout ignore it).
//!
//! Reading merges the local log, the local mirror and every remote-tracking mirror
//! (`refs/remotes/*/peak-attempts`, which is how a clone sees the original's attempts),
//! dropping duplicates by record identity and sorting by time. A record's identity is its
//! attempt id plus whether it is a start marker, so an attempt may be written twice: a
//! `started` record when it begins and its outcome when it ends. A start with no end is an
//! attempt that was cut short, which is what resume looks for.

use std::collections::HashSet;
use std::fs::OpenOptions;
use std::hash::{BuildHasher, Hash, Hasher};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};

use crate::error::{IoContext, Result};
pub use peak_record::AttemptOutcome;

pub(crate) const MIRROR_BRANCH: &str = "peak-attempts";
pub(crate) const MIRROR_FILE: &str = "attempts.jsonl";
pub(crate) const LOCAL_FILE: &str = "attempts.jsonl";

/// One attempt as the caller describes it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Attempt {
    pub transformation: String,
    /// Index of the transformation's pass, when the attempt concerns one pass.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pass: Option<u32>,
    /// Who carried it out: `openai`, `anthropic`, `agent`, `replay`, ...
    #[serde(default)]
    pub executor: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// How it ended; names this peak does not know read as [`AttemptOutcome::Other`].
    pub outcome: AttemptOutcome,
    /// The error text (compiler log, validator message, ...). Configured key values and
    /// key-shaped tokens are replaced by `[REDACTED]` before the record is written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// 0 for the first try, 1 for the first repair, ...
    #[serde(default)]
    pub retry: u32,
    /// For a try that failed validation: the first sampled execution parameter (1-based,
    /// in validation order) that failed, so that `peak report` can say how many samples
    /// were needed to catch it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sample: Option<u32>,
    /// For a try that failed validation: the validator that caught it (`output`,
    /// `sanitizer`); absent when the compiler or the runner failed before any validator.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub validator: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens_in: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens_out: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_ms: Option<u64>,
    /// The checkpoint the attempt started from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    /// The checkpoint it produced, if it produced one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint: Option<String>,
}

/// One line of the log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AttemptRecord {
    /// The attempt's id, shared by its start marker and its outcome record.
    pub id: String,
    /// When the record was written (RFC 3339, UTC, milliseconds).
    pub time: String,
    #[serde(flatten)]
    pub attempt: Attempt,
}

impl AttemptRecord {
    pub fn is_start(&self) -> bool {
        self.attempt.outcome == AttemptOutcome::Started
    }
}

/// A line that could not be read as a record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DamagedLine {
    /// `local` for `.git/peak/attempts.jsonl`, else the mirror ref it came from.
    pub source: String,
    /// 1-based line number.
    pub line: usize,
    /// The line is the last one and has no newline: a write cut short by a crash.
    pub torn: bool,
    pub reason: String,
}

/// Everything readable from the log, plus what was not.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct AttemptsLog {
    pub records: Vec<AttemptRecord>,
    pub damaged: Vec<DamagedLine>,
}

impl AttemptsLog {
    /// Start markers with no outcome record: attempts that were cut short.
    pub fn unfinished(&self) -> Vec<&AttemptRecord> {
        let ended: HashSet<&str> = self.records.iter().filter(|r| !r.is_start()).map(|r| r.id.as_str()).collect();
        self.records.iter().filter(|r| r.is_start() && !ended.contains(r.id.as_str())).collect()
    }
}

/// A fresh attempt id: 16 hex digits. Ids must not collide across clones whose logs get
/// merged, so they mix the time, the pid, a counter and std's per-process random hash
/// keys.
pub fn new_id() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    std::time::SystemTime::now().hash(&mut h);
    std::process::id().hash(&mut h);
    COUNTER.fetch_add(1, Ordering::Relaxed).hash(&mut h);
    format!("{:016x}", h.finish())
}

/// Records read from one source, and the lines that could not be read.
pub(crate) type Parsed = (Vec<AttemptRecord>, Vec<DamagedLine>);

/// Parse JSON lines; unreadable lines are reported, never fatal.
pub(crate) fn parse(text: &str, source: &str) -> Parsed {
    let mut records = Vec::new();
    let mut damaged = Vec::new();
    let ends_with_newline = text.ends_with('\n');
    let lines: Vec<&str> = text.lines().collect();
    for (i, line) in lines.iter().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<AttemptRecord>(line) {
            Ok(r) => records.push(r),
            Err(e) => {
                damaged.push(DamagedLine { source: source.to_string(), line: i + 1, torn: i + 1 == lines.len() && !ends_with_newline, reason: e.to_string() })
            }
        }
    }
    (records, damaged)
}

/// Records as JSON lines.
pub(crate) fn render(records: &[AttemptRecord]) -> String {
    records.iter().map(|r| serde_json::to_string(r).expect("AttemptRecord serializes") + "\n").collect()
}

/// Merge several sources: first copy of each record wins, then a stable sort by time.
pub(crate) fn merge(sources: impl IntoIterator<Item = Vec<AttemptRecord>>) -> Vec<AttemptRecord> {
    let mut seen = HashSet::new();
    let mut out: Vec<AttemptRecord> = sources.into_iter().flatten().filter(|r| seen.insert((r.id.clone(), r.is_start()))).collect();
    out.sort_by(|a, b| a.time.cmp(&b.time));
    out
}

/// Append one record as one line. If a crash left the file without a final newline, the
/// record starts on a new line so the torn fragment stays a single damaged line.
pub(crate) fn append(path: &Path, record: &AttemptRecord) -> Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).at(dir)?;
    }
    let mut file = OpenOptions::new().read(true).append(true).create(true).open(path).at(path)?;
    let len = file.metadata().at(path)?.len();
    let mut line = String::new();
    if len > 0 {
        let mut last = [0u8; 1];
        file.seek(SeekFrom::Start(len - 1)).at(path)?;
        file.read_exact(&mut last).at(path)?;
        if last[0] != b'\n' {
            line.push('\n');
        }
    }
    line.push_str(&serde_json::to_string(record).expect("AttemptRecord serializes"));
    line.push('\n');
    // One write call: with O_APPEND the line lands whole, after everything else.
    file.write_all(line.as_bytes()).at(path)
}

/// Read the local log; a missing file is an empty log.
pub(crate) fn read_local(path: &Path) -> Result<Parsed> {
    match std::fs::read(path) {
        Ok(bytes) => Ok(parse(&String::from_utf8_lossy(&bytes), "local")),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok((Vec::new(), Vec::new())),
        Err(e) => Err(e).at(path),
    }
}

/// Rewrite the local log without its damaged lines (write a sibling, then rename, so a
/// crash leaves either the old or the new file).
pub(crate) fn drop_damaged(path: &Path) -> Result<()> {
    let (records, _) = read_local(path)?;
    let tmp = path.with_extension("jsonl.peak-tmp");
    std::fs::write(&tmp, render(&records)).at(&tmp)?;
    std::fs::rename(&tmp, path).at(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(id: &str, time: &str, outcome: &str) -> AttemptRecord {
        AttemptRecord { id: id.into(), time: time.into(), attempt: Attempt { transformation: "T".into(), outcome: outcome.into(), ..Attempt::default() } }
    }

    #[test]
    fn torn_last_line_is_reported_and_the_next_append_starts_a_new_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.jsonl");
        append(&path, &rec("1", "t1", "passed")).unwrap();
        let mut f = OpenOptions::new().append(true).open(&path).unwrap();
        f.write_all(b"{\"id\":\"2\",\"ti").unwrap();
        let (records, damaged) = read_local(&path).unwrap();
        assert_eq!(records.len(), 1);
        assert_eq!(damaged.len(), 1);
        assert!(damaged[0].torn);
        append(&path, &rec("3", "t3", "wrong-output")).unwrap();
        let (records, damaged) = read_local(&path).unwrap();
        assert_eq!(records.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(), ["1", "3"]);
        assert_eq!((damaged.len(), damaged[0].line, damaged[0].torn), (1, 2, false));
        drop_damaged(&path).unwrap();
        let (records, damaged) = read_local(&path).unwrap();
        assert_eq!((records.len(), damaged.len()), (2, 0));
    }

    #[test]
    fn merge_dedups_by_id_and_kind_and_sorts_by_time() {
        let a = vec![rec("x", "2", "started"), rec("x", "3", "passed")];
        let b = vec![rec("y", "1", "compile-failed"), rec("x", "2", "started")];
        let merged = merge([a, b]);
        let got: Vec<_> = merged.iter().map(|r| (r.id.as_str(), r.attempt.outcome.as_str())).collect();
        assert_eq!(got, [("y", "compile-failed"), ("x", "started"), ("x", "passed")]);
    }

    #[test]
    fn unfinished_are_starts_without_an_outcome() {
        let log = AttemptsLog { records: vec![rec("a", "1", "started"), rec("a", "2", "passed"), rec("b", "3", "started")], damaged: vec![] };
        assert_eq!(log.unfinished().iter().map(|r| r.id.as_str()).collect::<Vec<_>>(), ["b"]);
    }

    #[test]
    fn a_log_written_by_another_version_reads_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.jsonl");
        let legacy = concat!(
            r#"{"id":"1","time":"t1","transformation":"T","executor":"agent","outcome":"compile-failed","retry":0}"#,
            "\n",
            r#"{"id":"2","time":"t2","transformation":"T","outcome":"gremlins-in-the-cache"}"#,
            "\n",
        );
        std::fs::write(&path, legacy).unwrap();
        let (records, damaged) = read_local(&path).unwrap();
        assert!(damaged.is_empty(), "{damaged:?}");
        assert_eq!(records[0].attempt.outcome, AttemptOutcome::CompileFailed);
        assert_eq!(records[1].attempt.outcome, AttemptOutcome::Other("gremlins-in-the-cache".into()));
        drop_damaged(&path).unwrap();
        assert!(std::fs::read_to_string(&path).unwrap().contains(r#""outcome":"gremlins-in-the-cache""#), "an unknown outcome is written back as read");
    }

    #[test]
    fn ids_differ() {
        assert_ne!(new_id(), new_id());
        assert_eq!(new_id().len(), 16);
    }
}
