//! The results cache: every configuration measured, kept so nothing is measured twice.
//!
//! One append-only JSON-lines file per (source hash, device and compiler versions,
//! reference), named by the hash of those. Line 1 is a header that repeats them with a
//! format version; every other line is one result:
//!
//! ```text
//! {"peak":"results-cache","version":1,"key":"…","source_hash":"…","device":"…","backend":"cuda","reference":"…"}
//! {"sum":"3f2a…","record":{"inputs":{"n":2048},"tuning":{"BX":16,…},"outcome":{"status":"measured",…},"at":1767312000}}
//! ```
//!
//! `sum` is a hash of the record's exact text, so a flipped byte is caught rather than
//! read as a different time. Each record is written with one `write` and `fdatasync`ed
//! before the next configuration is judged, so a run killed with `kill -9` loses at most
//! the configuration it was measuring. A last line cut short (no newline, not parseable)
//! is what such a kill can leave: it is reported and dropped. Anything else wrong (a bad
//! header, a foreign key, a damaged line in the middle) is an error naming the file and
//! line; the file is then neither used nor rewritten. The file is locked while open, so
//! two tuning runs never interleave their lines: a second run while the first holds the lock
//! (two replays of one kernel side by side, a job array on a shared home) reads the results
//! already there and keeps its own in memory, measured but not added to the file.

use std::collections::HashMap;
use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use indexmap::IndexMap;
use peak_backend::KernelResources;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use crate::error::EvalError;
use crate::hash::{canonical, key};
use crate::verdict::Verdict;

pub const CACHE_FORMAT: u32 = 1;
const MAGIC: &str = "results-cache";

/// What a cache file belongs to. Two runs share a file only if all of this is equal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CacheIdentity {
    pub source_hash: String,
    /// Device, architecture, driver and compiler versions ([`crate::hash::device_identity`]).
    pub device: String,
    pub backend: String,
    /// Source hash of the reference the outputs were judged against.
    pub reference: String,
}

impl CacheIdentity {
    pub fn key(&self) -> String {
        // v2: an output element the reference never wrote (a padded C's ldc - n) matches one
        // the candidate left unwritten too; verdicts judged before that are not reused.
        key(&["peak-results-v2", &self.source_hash, &self.device, &self.backend, &self.reference])
    }

    pub fn describe(&self) -> String {
        format!("source {} on {} judged against {}", self.source_hash, self.device, self.reference)
    }

    /// The file this identity's results live in, under `dir`.
    pub fn file_in(&self, dir: &Path) -> PathBuf {
        dir.join(format!("{}.jsonl", self.key()))
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Header {
    peak: String,
    version: u32,
    key: String,
    #[serde(flatten)]
    identity: CacheIdentity,
}

/// One configuration's result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    pub inputs: IndexMap<String, i64>,
    pub tuning: IndexMap<String, i64>,
    pub outcome: Outcome,
    /// Unix time of the measurement.
    pub at: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "kebab-case")]
pub enum Outcome {
    Measured(Measurement),
    /// Did not produce a valid time: pruned, failed to compile or run, or wrong.
    Failed {
        verdict: Verdict,
    },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Measurement {
    pub median_ms: f64,
    pub min_ms: f64,
    pub times_ms: Vec<f64>,
    pub compile_ms: f64,
    /// Wall time of the whole run in the worker (upload, check run, warm-up, timing).
    pub run_ms: f64,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kernels: Vec<KernelResources>,
}

impl Outcome {
    /// The time to minimise, or `None` for a configuration that cannot win.
    pub fn cost(&self) -> Option<f64> {
        match self {
            Outcome::Measured(m) => Some(m.median_ms),
            Outcome::Failed { .. } => None,
        }
    }

    /// "measured", or the verdict's category.
    pub fn category(&self) -> &'static str {
        match self {
            Outcome::Measured(_) => "measured",
            Outcome::Failed { verdict } => verdict.category(),
        }
    }
}

fn record_key(inputs: &IndexMap<String, i64>, tuning: &IndexMap<String, i64>) -> String {
    format!("{}|{}", canonical(inputs), canonical(tuning))
}

#[derive(Deserialize)]
struct Envelope<'a> {
    sum: String,
    #[serde(borrow)]
    record: &'a RawValue,
}

fn checksum(text: &str) -> String {
    key(&[text])
}

/// A cache file's contents, as read.
#[derive(Debug, Clone)]
pub struct Contents {
    pub identity: CacheIdentity,
    pub records: Vec<Record>,
    /// The line number of a cut-short last line that was dropped.
    pub torn_tail: Option<usize>,
    /// Bytes of the file that hold complete lines.
    valid_len: u64,
    /// The last complete record lacks its newline (written, then killed before `\n`).
    needs_newline: bool,
}

/// Parse a cache file's bytes. `None` for an empty file.
fn parse(path: &Path, bytes: &[u8]) -> Result<Option<Contents>, EvalError> {
    if bytes.is_empty() {
        return Ok(None);
    }
    let corrupt = |line: usize, message: String| EvalError::CacheCorrupt { file: path.to_path_buf(), line, message };
    let text = std::str::from_utf8(bytes).map_err(|e| {
        let line = bytes[..e.valid_up_to()].iter().filter(|&&b| b == b'\n').count() + 1;
        corrupt(line, "not UTF-8 text".into())
    })?;
    let ends_clean = text.ends_with('\n');
    let lines: Vec<&str> = text.split_terminator('\n').collect();
    let header: Header = serde_json::from_str(lines[0]).map_err(|e| corrupt(1, format!("not a peak results-cache header ({e})")))?;
    if header.peak != MAGIC {
        return Err(corrupt(1, format!("the header says `{}`, not `{MAGIC}`", header.peak)));
    }
    if header.version != CACHE_FORMAT {
        return Err(corrupt(1, format!("format version {} (this peak reads version {CACHE_FORMAT})", header.version)));
    }
    if header.key != header.identity.key() {
        return Err(corrupt(1, "the header's key does not match its own fields".into()));
    }
    if lines.len() == 1 && !ends_clean {
        return Err(corrupt(1, "the header line is not terminated".into()));
    }
    let mut contents = Contents { identity: header.identity, records: Vec::new(), torn_tail: None, valid_len: 0, needs_newline: false };
    let mut offset = lines[0].len() as u64 + 1;
    for (i, line) in lines.iter().enumerate().skip(1) {
        let number = i + 1;
        let last = i == lines.len() - 1;
        let parsed = parse_record(line);
        match parsed {
            Ok(record) => {
                contents.records.push(record);
                offset += line.len() as u64 + 1;
                if last && !ends_clean {
                    contents.needs_newline = true;
                    offset -= 1;
                }
            }
            // Only an unterminated last line can be a write cut short by a kill.
            Err(_) if last && !ends_clean => contents.torn_tail = Some(number),
            Err(message) => return Err(corrupt(number, message)),
        }
    }
    contents.valid_len = offset;
    Ok(Some(contents))
}

fn parse_record(line: &str) -> Result<Record, String> {
    let envelope: Envelope = serde_json::from_str(line).map_err(|e| format!("not a record ({e})"))?;
    let raw = envelope.record.get();
    if checksum(raw) != envelope.sum {
        return Err("its checksum does not match its contents".into());
    }
    serde_json::from_str(raw).map_err(|e| format!("a record of the wrong shape ({e})"))
}

/// An open, locked cache file.
pub struct ResultsCache {
    path: PathBuf,
    file: File,
    identity: CacheIdentity,
    records: HashMap<String, Record>,
    /// Records in the file when it was opened.
    pub loaded: usize,
    /// A cut-short last line that was dropped on opening (its line number).
    pub torn_tail: Option<usize>,
    /// Another peak process holds the file: this run reads what was there and writes nothing.
    pub shared: bool,
}

impl ResultsCache {
    /// Open (or create) the cache file for `identity` under `dir`.
    pub fn open_in(dir: &Path, identity: &CacheIdentity) -> Result<ResultsCache, EvalError> {
        std::fs::create_dir_all(dir).map_err(|e| EvalError::io(dir, e))?;
        ResultsCache::open(&identity.file_in(dir), identity)
    }

    /// Open (or create) a cache file, which must belong to `identity`.
    pub fn open(path: &Path, identity: &CacheIdentity) -> Result<ResultsCache, EvalError> {
        let io = |e: std::io::Error| EvalError::io(path, e);
        let mut file = OpenOptions::new().read(true).append(true).create(true).open(path).map_err(io)?;
        let shared = match file.try_lock() {
            Ok(()) => false,
            Err(TryLockError::WouldBlock) => true,
            Err(TryLockError::Error(e)) => return Err(io(e)),
        };
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes).map_err(io)?;
        let mut cache =
            ResultsCache { path: path.to_path_buf(), file, identity: identity.clone(), records: HashMap::new(), loaded: 0, torn_tail: None, shared };
        match parse(path, &bytes)? {
            // The holder has only just created it: nothing to read, and the header is its to write.
            None if shared => {}
            None => {
                let header = Header { peak: MAGIC.into(), version: CACHE_FORMAT, key: identity.key(), identity: identity.clone() };
                let line = serde_json::to_string(&header).expect("header serializes") + "\n";
                cache.file.write_all(line.as_bytes()).map_err(io)?;
                cache.file.sync_all().map_err(io)?;
            }
            Some(contents) => {
                if contents.identity != *identity {
                    return Err(EvalError::CacheForeign { file: path.to_path_buf(), expected: identity.describe(), found: contents.identity.describe() });
                }
                // A shared reader leaves the file to its holder, whose line may be half written.
                if contents.torn_tail.is_some() && !shared {
                    cache.file.set_len(contents.valid_len).map_err(io)?;
                    cache.file.seek(SeekFrom::End(0)).map_err(io)?;
                }
                if contents.needs_newline && !shared {
                    cache.file.write_all(b"\n").map_err(io)?;
                }
                cache.torn_tail = contents.torn_tail.filter(|_| !shared);
                cache.loaded = contents.records.len();
                for record in contents.records {
                    cache.records.insert(record_key(&record.inputs, &record.tuning), record);
                }
            }
        }
        Ok(cache)
    }

    /// Read a cache file without opening it for writing (replays, reports).
    pub fn read(path: &Path) -> Result<Contents, EvalError> {
        let bytes = std::fs::read(path).map_err(|e| EvalError::io(path, e))?;
        parse(path, &bytes)?.ok_or_else(|| EvalError::CacheCorrupt { file: path.to_path_buf(), line: 1, message: "the file is empty".into() })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn identity(&self) -> &CacheIdentity {
        &self.identity
    }

    pub fn len(&self) -> usize {
        self.records.len()
    }

    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    pub fn get(&self, inputs: &IndexMap<String, i64>, tuning: &IndexMap<String, i64>) -> Option<&Record> {
        self.records.get(&record_key(inputs, tuning))
    }

    pub fn records(&self) -> impl Iterator<Item = &Record> {
        self.records.values()
    }

    /// Append one record and make it durable before returning (in memory only where the file
    /// is shared with the process that holds it).
    pub fn insert(&mut self, record: Record) -> Result<(), EvalError> {
        if self.shared {
            self.records.insert(record_key(&record.inputs, &record.tuning), record);
            return Ok(());
        }
        let raw = serde_json::to_string(&record).expect("records serialize");
        let line = format!("{{\"sum\":\"{}\",\"record\":{raw}}}\n", checksum(&raw));
        let io = |e: std::io::Error| EvalError::io(&self.path, e);
        self.file.write_all(line.as_bytes()).map_err(io)?;
        self.file.sync_data().map_err(io)?;
        self.records.insert(record_key(&record.inputs, &record.tuning), record);
        Ok(())
    }
}

/// Seconds since the Unix epoch, for records.
pub fn now() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn identity() -> CacheIdentity {
        CacheIdentity { source_hash: "abc".into(), device: "opencl cpu (pocl 6)".into(), backend: "opencl".into(), reference: "abc".into() }
    }

    fn record(x: i64, ms: f64) -> Record {
        Record {
            inputs: [("n".to_string(), 64)].into_iter().collect(),
            tuning: [("X".to_string(), x)].into_iter().collect(),
            outcome: Outcome::Measured(Measurement { median_ms: ms, min_ms: ms, times_ms: vec![ms], compile_ms: 1.0, run_ms: 2.0, kernels: vec![] }),
            at: 1,
        }
    }

    #[test]
    fn records_survive_reopening() {
        let dir = tempfile::tempdir().unwrap();
        let path = identity().file_in(dir.path());
        {
            let mut cache = ResultsCache::open(&path, &identity()).unwrap();
            cache.insert(record(1, 2.5)).unwrap();
            cache.insert(record(2, 1.5)).unwrap();
        }
        let cache = ResultsCache::open(&path, &identity()).unwrap();
        assert_eq!(cache.loaded, 2);
        assert_eq!(cache.torn_tail, None);
        let r = cache.get(&record(2, 0.0).inputs, &record(2, 0.0).tuning).unwrap();
        assert_eq!(r.outcome.cost(), Some(1.5));
    }

    #[test]
    fn a_second_opener_reads_while_the_first_holds_it_and_writes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = identity().file_in(dir.path());
        let mut first = ResultsCache::open(&path, &identity()).unwrap();
        first.insert(record(1, 2.5)).unwrap();
        let mut second = ResultsCache::open(&path, &identity()).unwrap();
        assert!(second.shared && !first.shared);
        assert_eq!(second.loaded, 1, "the holder's results are read");
        second.insert(record(2, 1.5)).unwrap();
        assert!(second.get(&record(2, 0.0).inputs, &record(2, 0.0).tuning).is_some(), "kept in memory");
        first.insert(record(3, 0.5)).unwrap();
        drop((first, second));
        // Only the holder's lines reached the file, each whole.
        let again = ResultsCache::open(&path, &identity()).unwrap();
        assert!(!again.shared);
        assert_eq!((again.loaded, again.torn_tail), (2, None));
        assert!(again.get(&record(2, 0.0).inputs, &record(2, 0.0).tuning).is_none());
    }

    #[test]
    fn a_shared_reader_leaves_the_holders_half_written_line_alone() {
        let dir = tempfile::tempdir().unwrap();
        let path = identity().file_in(dir.path());
        let mut first = ResultsCache::open(&path, &identity()).unwrap();
        first.insert(record(1, 2.5)).unwrap();
        first.file.write_all(b"{\"sum\":\"ab").unwrap(); // the holder, mid-write
        let len = std::fs::metadata(&path).unwrap().len();
        let second = ResultsCache::open(&path, &identity()).unwrap();
        assert!(second.shared);
        assert_eq!((second.loaded, second.torn_tail), (1, None));
        assert_eq!(std::fs::metadata(&path).unwrap().len(), len, "the shared reader truncated the holder's file");
    }

    #[test]
    fn a_foreign_cache_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.jsonl");
        drop(ResultsCache::open(&path, &identity()).unwrap());
        let other = CacheIdentity { device: "cuda NVIDIA H200 sm_90 (driver 580)".into(), ..identity() };
        match ResultsCache::open(&path, &other) {
            Err(e @ EvalError::CacheForeign { .. }) => assert!(e.to_string().contains("H200") && e.to_string().contains("hint:"), "{e}"),
            other => panic!("expected a foreign-cache error, got {:?}", other.map(|c| c.len())),
        }
    }

    #[test]
    fn a_damaged_middle_line_is_an_error_naming_the_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = identity().file_in(dir.path());
        {
            let mut cache = ResultsCache::open(&path, &identity()).unwrap();
            for x in 1..=3 {
                cache.insert(record(x, x as f64)).unwrap();
            }
        }
        // Change one digit of the second record's time: still valid JSON, wrong checksum.
        let text = std::fs::read_to_string(&path).unwrap();
        let mut lines: Vec<String> = text.lines().map(String::from).collect();
        lines[2] = lines[2].replacen("\"median_ms\":2.0", "\"median_ms\":0.2", 1);
        std::fs::write(&path, lines.join("\n") + "\n").unwrap();
        let before = std::fs::read(&path).unwrap();
        match ResultsCache::open(&path, &identity()) {
            Err(e @ EvalError::CacheCorrupt { line: 3, .. }) => assert!(e.to_string().contains("checksum"), "{e}"),
            other => panic!("expected corruption at line 3, got {:?}", other.map(|c| c.len())),
        }
        assert_eq!(std::fs::read(&path).unwrap(), before, "a corrupt cache must not be rewritten");
    }

    #[test]
    fn garbage_and_wrong_versions_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.jsonl");
        std::fs::write(&path, "hello world\n").unwrap();
        assert!(matches!(ResultsCache::open(&path, &identity()), Err(EvalError::CacheCorrupt { line: 1, .. })));
        let id = identity();
        let header = format!(
            "{{\"peak\":\"results-cache\",\"version\":99,\"key\":\"{}\",\"source_hash\":\"abc\",\"device\":\"{}\",\"backend\":\"opencl\",\"reference\":\"abc\"}}\n",
            id.key(),
            id.device
        );
        std::fs::write(&path, header).unwrap();
        match ResultsCache::open(&path, &identity()) {
            Err(e @ EvalError::CacheCorrupt { .. }) => assert!(e.to_string().contains("version 99"), "{e}"),
            other => panic!("{:?}", other.map(|c| c.len())),
        }
    }

    #[test]
    fn a_torn_last_line_is_dropped_and_reported() {
        let dir = tempfile::tempdir().unwrap();
        let path = identity().file_in(dir.path());
        {
            let mut cache = ResultsCache::open(&path, &identity()).unwrap();
            cache.insert(record(1, 1.0)).unwrap();
        }
        let mut f = OpenOptions::new().append(true).open(&path).unwrap();
        f.write_all(b"{\"sum\":\"12ab\",\"record\":{\"inputs\":{\"n\":6").unwrap();
        drop(f);
        let mut cache = ResultsCache::open(&path, &identity()).unwrap();
        assert_eq!(cache.torn_tail, Some(3));
        assert_eq!(cache.loaded, 1);
        cache.insert(record(2, 2.0)).unwrap();
        drop(cache);
        let contents = ResultsCache::read(&path).unwrap();
        assert_eq!(contents.records.len(), 2);
        assert_eq!(contents.torn_tail, None, "the torn bytes were cut before appending");
    }
}
