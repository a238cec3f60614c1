//! The workflow store: opening, creating and writing checkpoints, names and checkouts.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use git2::{Commit, ObjectType, Oid, Repository, RepositoryInitOptions, Signature, Tree};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::attempts::{self, Attempt, AttemptRecord, AttemptsLog, MIRROR_BRANCH, MIRROR_FILE};
use crate::context::{self, Files};
use crate::error::{GitContext, IoContext, Result, WorkflowError};
use crate::lock::{self, LockHolder, LockMode, OP_IDLE, OP_REFRESH_WORKTREE, WorkflowLock};
use crate::secrets;
use crate::time::now_rfc3339;

/// Folder of the working tree that holds the checkpoint's kernel context.
pub const CONTEXT_DIR: &str = "context";
pub(crate) const CHECKPOINT_FILE: &str = "checkpoint.json";
pub(crate) const VALIDATION_FILE: &str = "validation.json";
pub(crate) const PERFORMANCE_FILE: &str = "performance.json";
pub(crate) const TRANSCRIPT_FILE: &str = "transcript.json";
pub(crate) const REFERENCE_FILE: &str = "reference.json";
/// The tag init puts on the root checkpoint, so `root` is an ordinary rev everywhere,
/// plain git included.
pub const ROOT_TAG: &str = "root";
/// The branch a new workflow starts on.
pub const DEFAULT_BRANCH: &str = "main";
/// The transformation name of the root checkpoint.
pub const INIT_TRANSFORMATION: &str = "init";
const META_FORMAT: u32 = 1;

/// A checkpoint's id: the full hex id of its git commit.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct CheckpointId(String);

impl CheckpointId {
    pub(crate) fn from_oid(oid: Oid) -> Self {
        CheckpointId(oid.to_string())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The 7-digit abbreviation git shows.
    pub fn short(&self) -> &str {
        &self.0[..self.0.len().min(7)]
    }

    pub(crate) fn oid(&self) -> Oid {
        Oid::from_str(&self.0).expect("a CheckpointId always holds a valid id")
    }
}

impl fmt::Display for CheckpointId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// `checkpoint.json`: what a checkpoint is, in a few fields.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CheckpointMeta {
    /// Format version of this file.
    pub format: u32,
    /// The transformation that produced the checkpoint, or `init` for the root.
    pub transformation: String,
    /// The parent checkpoint's id (duplicates the commit's parent so the file is
    /// self-describing, and fsck can check the two agree).
    #[serde(default)]
    pub parent: Option<String>,
    /// `validation.json`'s `verdict`, copied for `git log` readers and quick listings.
    #[serde(default)]
    pub verdict: Option<String>,
    pub executor: String,
    #[serde(default)]
    pub model: Option<String>,
    /// RFC 3339, UTC.
    pub created: String,
    /// The attempt that produced it, if the caller recorded one.
    #[serde(default)]
    pub attempt: Option<String>,
}

/// Optional results for the root checkpoint. The root is usually measured too, so that
/// every later checkpoint has a speedup over it.
#[derive(Debug, Clone, Default)]
pub struct RootInput {
    /// The reference outputs' identity: input configurations and seeds (opaque).
    pub reference: Value,
    /// Defaults to `{"verdict": "reference"}`: the initial context defines correctness.
    pub validation: Option<Value>,
    /// Defaults to `{}` (no timing).
    pub performance: Option<Value>,
    /// Defaults to `{}`.
    pub transcript: Option<Value>,
    /// Defaults to `user`.
    pub executor: Option<String>,
}

/// A new checkpoint.
#[derive(Debug, Clone, Default)]
pub struct CheckpointInput {
    /// The checkpoint the transformation started from. It must still be the tip of the
    /// current branch: a check that nobody added a checkpoint while the transformation ran.
    /// `None` means "the current tip".
    pub parent: Option<String>,
    /// The new kernel context. It may be the workflow's own `context/` folder (edited in
    /// place) or any other folder.
    pub context_dir: PathBuf,
    pub transformation: String,
    pub executor: String,
    pub model: Option<String>,
    /// Stored as `validation.json`; its `verdict` string is copied into `checkpoint.json`.
    pub validation: Value,
    /// Stored as `performance.json`; `best.time_ms` drives speedups.
    pub performance: Value,
    /// Stored as `transcript.json`; refused if it contains something key-shaped.
    pub transcript: Value,
    /// The attempt that produced this checkpoint (see [`Workflow::start_attempt`]).
    pub attempt: Option<String>,
    /// Overwrite uncommitted edits in the working folder (only relevant when
    /// `context_dir` is not the working folder's own `context/`).
    pub force: bool,
}

/// Where HEAD is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Head {
    pub id: CheckpointId,
    /// `None` when HEAD is detached.
    pub branch: Option<String>,
}

/// A workflow folder, opened.
pub struct Workflow {
    pub(crate) repo: Repository,
    pub(crate) workdir: PathBuf,
    pub(crate) peak_dir: PathBuf,
    lock_mode: LockMode,
    /// The lock while an operation or a session (see [`Workflow::hold_lock`]) holds it.
    held: Option<WorkflowLock>,
}

impl fmt::Debug for Workflow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Workflow").field("dir", &self.workdir).field("lock_mode", &self.lock_mode).finish()
    }
}

fn json_bytes(value: &Value) -> Vec<u8> {
    let mut bytes = serde_json::to_vec_pretty(value).expect("serde_json::Value serializes");
    bytes.push(b'\n');
    bytes
}

fn check_context(dir: &Path) -> Result<Files> {
    let files = context::read_dir(dir)?;
    context::check_files(&files).map_err(|(file, message)| WorkflowError::InvalidContext { path: dir.join(file), message })?;
    Ok(files)
}

fn check_transcript(transcript: &Value) -> Result<()> {
    match secrets::find_in_json(transcript) {
        Some((pointer, kind)) => Err(WorkflowError::SecretInTranscript { pointer, kind }),
        None => Ok(()),
    }
}

/// A name a user may give a tag or a branch.
fn check_name(repo: &Repository, name: &str, kind: &'static str) -> Result<()> {
    let invalid = |reason: &str| Err(WorkflowError::InvalidName { name: name.to_string(), kind, reason: reason.to_string() });
    if name == "HEAD" || name == ROOT_TAG {
        return invalid("it is a reserved rev name");
    }
    if name == MIRROR_BRANCH {
        return invalid("it is the branch that mirrors the attempts log");
    }
    if name.starts_with('-') {
        return invalid("it starts with '-' and would read as a command-line option");
    }
    if name.len() >= 4 && name.bytes().all(|b| b.is_ascii_hexdigit()) {
        return invalid("it looks like a checkpoint id");
    }
    if !git2::Reference::is_valid_name(&format!("refs/heads/{name}")) {
        return invalid("git does not allow it as a ref name (no spaces, '~', '^', ':', '..', ...)");
    }
    let (other_ref, other_kind) = if kind == "tag" { (format!("refs/heads/{name}"), "branch") } else { (format!("refs/tags/{name}"), "tag") };
    if repo.find_reference(&other_ref).is_ok() {
        return Err(WorkflowError::NameTaken { name: name.to_string(), kind: other_kind });
    }
    Ok(())
}

/// Whether `dir` is missing or an empty folder.
/// Where `init` builds a workflow before moving it to `dir`: a hidden sibling.
fn staging_dir(dir: &Path) -> PathBuf {
    let name = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "workflow".into());
    dir.with_file_name(format!(".{name}.peak-init"))
}

fn is_fresh_dir(dir: &Path) -> Result<bool> {
    match std::fs::read_dir(dir) {
        Ok(mut entries) => Ok(entries.next().is_none()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotADirectory => Ok(false),
        Err(e) => Err(e).at(dir),
    }
}

/// Build a (nested) git tree from `/`-separated paths.
fn write_tree(repo: &Repository, entries: &BTreeMap<String, Oid>) -> Result<Oid> {
    let mut builder = repo.treebuilder(None).git("create tree")?;
    let mut subdirs: BTreeMap<&str, BTreeMap<String, Oid>> = BTreeMap::new();
    for (path, oid) in entries {
        match path.split_once('/') {
            Some((dir, rest)) => {
                subdirs.entry(dir).or_default().insert(rest.to_string(), *oid);
            }
            None => {
                builder.insert(path, *oid, git2::FileMode::Blob.into()).git(format!("add {path} to tree"))?;
            }
        }
    }
    for (dir, sub) in subdirs {
        let oid = write_tree(repo, &sub)?;
        builder.insert(dir, oid, git2::FileMode::Tree.into()).git(format!("add {dir}/ to tree"))?;
    }
    builder.write().git("write tree")
}

/// The files under `prefix/` in `tree`, by path relative to `prefix`.
pub(crate) fn read_tree_dir(repo: &Repository, tree: &Tree<'_>, prefix: &str) -> std::result::Result<Files, git2::Error> {
    match tree.get_name(prefix) {
        Some(entry) => tree_files(repo, &entry.to_object(repo)?.peel_to_tree()?),
        None => Ok(Files::new()),
    }
}

/// Every file in `tree`, by `/`-separated path.
fn tree_files(repo: &Repository, tree: &Tree<'_>) -> std::result::Result<Files, git2::Error> {
    let mut files = Files::new();
    let mut failure = None;
    tree.walk(git2::TreeWalkMode::PreOrder, |dir, entry| {
        if entry.kind() == Some(ObjectType::Blob) {
            let name = format!("{dir}{}", entry.name().unwrap_or(""));
            match repo.find_blob(entry.id()) {
                Ok(blob) => {
                    files.insert(name, blob.content().to_vec());
                }
                Err(e) => {
                    failure = Some(e);
                    return git2::TreeWalkResult::Abort;
                }
            }
        }
        git2::TreeWalkResult::Ok
    })?;
    match failure {
        Some(e) => Err(e),
        None => Ok(files),
    }
}

/// A top-level file's bytes, or `None` if the tree has no such entry.
pub(crate) fn read_tree_file(repo: &Repository, tree: &Tree<'_>, name: &str) -> std::result::Result<Option<Vec<u8>>, git2::Error> {
    match tree.get_name(name) {
        Some(entry) => Ok(Some(repo.find_blob(entry.id())?.content().to_vec())),
        None => Ok(None),
    }
}

/// `performance.json`'s `best.time_ms`, if present and a number.
pub(crate) fn best_time(performance: &Value) -> Option<f64> {
    performance.pointer("/best/time_ms").and_then(Value::as_f64).filter(|t| t.is_finite() && *t > 0.0)
}

/// Milliseconds with three significant digits or so: `0.0123 ms`, `1.23 ms`, `123 ms`.
pub(crate) fn fmt_ms(ms: f64) -> String {
    let decimals = if ms >= 100.0 {
        0
    } else if ms >= 10.0 {
        1
    } else if ms >= 1.0 {
        2
    } else {
        // Enough decimals for three significant digits of small times.
        (2 - ms.log10().floor() as i32).clamp(2, 9) as usize
    };
    format!("{ms:.decimals$} ms")
}

/// The human-readable commit message (`TB-Tiling: 1.23 ms (3.40x over root)`).
fn commit_message(meta: &CheckpointMeta, kernel: Option<&str>, best: Option<f64>, root_best: Option<f64>, parent_best: Option<f64>) -> String {
    let summary = match (meta.parent.is_some(), best, root_best) {
        (false, Some(t), _) => format!("{INIT_TRANSFORMATION}: kernel {} ({})", kernel.unwrap_or("?"), fmt_ms(t)),
        (false, None, _) => format!("{INIT_TRANSFORMATION}: kernel {}", kernel.unwrap_or("?")),
        (true, Some(t), Some(r)) => format!("{}: {} ({:.2}x over root)", meta.transformation, fmt_ms(t), r / t),
        (true, Some(t), None) => format!("{}: {}", meta.transformation, fmt_ms(t)),
        (true, None, _) => format!("{}: {}", meta.transformation, meta.verdict.as_deref().unwrap_or("no timing")),
    };
    let mut body = format!("\n\nverdict: {}\nexecutor: {}", meta.verdict.as_deref().unwrap_or("none"), meta.executor);
    if let Some(model) = &meta.model {
        body.push_str(&format!(" ({model})"));
    }
    if let (Some(t), Some(p)) = (best, parent_best) {
        body.push_str(&format!("\nspeedup over parent: {:.2}x", p / t));
    }
    body.push('\n');
    summary + body.as_str()
}

impl Workflow {
    /// Create a workflow in `dir` (missing or empty) whose root checkpoint is the context
    /// in `context_dir`, with `reference` as `reference.json`.
    pub fn init(dir: impl AsRef<Path>, context_dir: impl AsRef<Path>, reference: Value) -> Result<Workflow> {
        Self::init_with(dir, context_dir, RootInput { reference, ..RootInput::default() })
    }

    /// [`Workflow::init`] with the root's validation, performance and transcript.
    pub fn init_with(dir: impl AsRef<Path>, context_dir: impl AsRef<Path>, root: RootInput) -> Result<Workflow> {
        let dir = dir.as_ref();
        if !is_fresh_dir(dir)? {
            return Err(WorkflowError::DirNotEmpty { path: dir.to_path_buf() });
        }
        let files = check_context(context_dir.as_ref())?;
        if let Some(transcript) = &root.transcript {
            check_transcript(transcript)?;
        }
        if dir.exists() {
            // An empty folder the user made: built in place (it may be the current folder).
            Self::build_root(dir, files, root)?;
            return Workflow::open(dir);
        }
        // Built in a hidden sibling folder and moved into place whole: a crash leaves either
        // no workflow at `dir` or a finished one (init holds no lock whose record would let
        // the next writer repair a half-written one). The next init clears what a crashed
        // one left in the sibling.
        let staging = staging_dir(dir);
        if staging.exists() {
            std::fs::remove_dir_all(&staging).at(&staging)?;
        }
        Self::build_root(&staging, files, root)?;
        std::fs::rename(&staging, dir).at(dir)?;
        Workflow::open(dir)
    }

    /// The root checkpoint's repository, written at `dir`.
    fn build_root(dir: &Path, files: Files, root: RootInput) -> Result<()> {
        let transcript = root.transcript.unwrap_or_else(|| Value::Object(Default::default()));
        let validation = root.validation.unwrap_or_else(|| serde_json::json!({"verdict": "reference"}));
        let performance = root.performance.unwrap_or_else(|| Value::Object(Default::default()));
        let mut opts = RepositoryInitOptions::new();
        opts.initial_head(DEFAULT_BRANCH).mkpath(true).no_reinit(true);
        let repo = Repository::init_opts(dir, &opts).git(format!("init {}", dir.display()))?;
        let meta = CheckpointMeta {
            format: META_FORMAT,
            transformation: INIT_TRANSFORMATION.to_string(),
            parent: None,
            verdict: validation.get("verdict").and_then(Value::as_str).map(str::to_string),
            executor: root.executor.unwrap_or_else(|| "user".to_string()),
            model: None,
            created: now_rfc3339(),
            attempt: None,
        };
        let kernel = files.get(context::MANIFEST).and_then(|m| context::kernel_name(&String::from_utf8_lossy(m)));
        let message = commit_message(&meta, kernel.as_deref(), best_time(&performance), None, None);
        let wf = Workflow::from_repo(repo)?;
        let mut blobs = wf.context_blobs(&files)?;
        for (name, value) in [
            (CHECKPOINT_FILE, serde_json::to_value(&meta).expect("CheckpointMeta serializes")),
            (VALIDATION_FILE, validation),
            (PERFORMANCE_FILE, performance),
            (TRANSCRIPT_FILE, transcript),
            (REFERENCE_FILE, root.reference),
        ] {
            blobs.insert(name.to_string(), wf.repo.blob(&json_bytes(&value)).git(format!("write {name}"))?);
        }
        let tree = write_tree(&wf.repo, &blobs)?;
        let commit = wf.commit(&[], tree, &message)?;
        // The root tag last: `open` recognises a workflow by it.
        wf.repo.reference(&format!("refs/heads/{DEFAULT_BRANCH}"), commit, false, "peak init").git("create branch main")?;
        wf.refresh_worktree()?;
        {
            let object = wf.repo.find_object(commit, None).git("find root commit")?;
            wf.repo.tag_lightweight(ROOT_TAG, &object, false).git("tag root")?;
        }
        Ok(())
    }

    /// Open the workflow that `dir` is in (the workflow folder or any folder inside it).
    pub fn open(dir: impl AsRef<Path>) -> Result<Workflow> {
        let dir = dir.as_ref();
        let not = |reason: String| WorkflowError::NotAWorkflow { path: dir.to_path_buf(), reason };
        let repo = Repository::discover(dir).map_err(|e| not(format!("no git repository here or in a parent folder: {}", e.message())))?;
        let is_checkpoint = |rev: &str| {
            repo.revparse_single(rev)
                .and_then(|o| o.peel_to_commit())
                .and_then(|c| c.tree())
                .is_ok_and(|t| t.get_name(CHECKPOINT_FILE).is_some())
        };
        // The root tag is the mark of a workflow; HEAD is accepted too so a clone made
        // with --no-tags still opens (fsck then reports the missing tag).
        if !is_checkpoint(&format!("refs/tags/{ROOT_TAG}")) && !is_checkpoint("HEAD") {
            let at = repo.workdir().unwrap_or(repo.path());
            // Found by walking up from a folder of some other project: say so, rather than
            // describe that project's repository as if it were the one asked about.
            let same = |a: &Path, b: &Path| std::fs::canonicalize(a).ok().zip(std::fs::canonicalize(b).ok()).is_some_and(|(a, b)| a == b);
            return Err(not(if same(at, dir) {
                format!("the git repository here has no `{ROOT_TAG}` tag and HEAD is not a checkpoint")
            } else {
                format!("no workflow here or in a parent folder (the nearest git repository, at {}, is not one)", at.display())
            }));
        }
        Workflow::from_repo(repo)
    }

    fn from_repo(repo: Repository) -> Result<Workflow> {
        let Some(workdir) = repo.workdir().map(Path::to_path_buf) else {
            return Err(WorkflowError::NotAWorkflow {
                path: repo.path().to_path_buf(),
                reason: "a bare repository has no working folder; clone it to work in it".to_string(),
            });
        };
        let peak_dir = repo.path().join("peak");
        Ok(Workflow { repo, workdir, peak_dir, lock_mode: LockMode::default(), held: None })
    }

    /// The workflow folder (the git working tree).
    pub fn dir(&self) -> &Path {
        &self.workdir
    }

    /// The working folder's copy of the current checkpoint's context.
    pub fn context_dir(&self) -> PathBuf {
        self.workdir.join(CONTEXT_DIR)
    }

    /// How writers wait for the lock (default: wait up to 10 s).
    pub fn set_lock_mode(&mut self, mode: LockMode) {
        self.lock_mode = mode;
    }

    /// Take the writer lock for a whole session (for instance a `peak apply` run), not
    /// just for each write. Released by [`Workflow::release_lock`] or on drop.
    pub fn hold_lock(&mut self) -> Result<()> {
        if self.held.is_none() {
            self.acquire(OP_IDLE)?;
        }
        Ok(())
    }

    /// Take the lock, then finish whatever a dead previous holder cut short.
    fn acquire(&mut self, operation: &str) -> Result<()> {
        let (lock, stale) = WorkflowLock::acquire(&self.lock_path(), self.lock_mode, operation)?;
        self.held = Some(lock);
        if let Some(stale) = stale
            && let Err(e) = self.recover(&stale)
        {
            self.held = None;
            return Err(e);
        }
        Ok(())
    }

    /// Release a lock taken by [`Workflow::hold_lock`].
    pub fn release_lock(&mut self) {
        self.held = None;
    }

    pub(crate) fn holds_lock(&self) -> bool {
        self.held.is_some()
    }

    pub(crate) fn lock_path(&self) -> PathBuf {
        lock::lock_path(&self.peak_dir)
    }

    pub(crate) fn attempts_path(&self) -> PathBuf {
        self.peak_dir.join(attempts::LOCAL_FILE)
    }

    /// Run `f` holding the lock, with `operation` recorded as what the holder is doing.
    pub(crate) fn with_lock<T>(&mut self, operation: &str, f: impl FnOnce(&mut Self) -> Result<T>) -> Result<T> {
        let temporary = self.held.is_none();
        if temporary {
            self.acquire(operation)?;
        } else {
            self.set_operation(operation, None)?;
        }
        let result = f(self);
        if temporary {
            self.held = None;
            result
        } else {
            let idle = self.set_operation(OP_IDLE, None);
            result.and_then(|value| idle.map(|()| value))
        }
    }

    pub(crate) fn set_operation(&mut self, operation: &str, target: Option<Oid>) -> Result<()> {
        let path = self.lock_path();
        match self.held.as_mut() {
            Some(lock) => lock.set_operation(&path, operation, target.map(|t| t.to_string())),
            None => Ok(()),
        }
    }

    /// Finish what a dead lock holder cut short. Returns whether the working folder was
    /// restored.
    ///
    /// Git's own lock files (`index.lock`, `refs/heads/main.lock`, ...) the dead writer
    /// left would make every later git write fail, so they go; while our lock is held no
    /// other peak process can own them. The only unfinished work that needs redoing is a
    /// working-folder refresh: everything else a writer does is atomic.
    pub(crate) fn recover(&mut self, stale: &Option<LockHolder>) -> Result<bool> {
        self.remove_git_locks()?;
        if self.cut_short_refresh(stale) {
            self.refresh_worktree()?;
            return Ok(true);
        }
        Ok(false)
    }

    /// Whether a dead holder had moved HEAD and not finished rewriting the working folder.
    pub(crate) fn cut_short_refresh(&self, stale: &Option<LockHolder>) -> bool {
        let Some(holder) = stale else { return false };
        let head = self.repo.head().and_then(|h| h.peel_to_commit()).map(|c| c.id().to_string());
        holder.operation == OP_REFRESH_WORKTREE && head.ok().is_some_and(|h| holder.target.as_deref() == Some(h.as_str()))
    }

    /// Lock files git writers create next to what they update, found in `.git`.
    pub(crate) fn git_lock_files(&self) -> Result<Vec<PathBuf>> {
        fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
            let entries = match std::fs::read_dir(dir) {
                Ok(entries) => entries,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
                Err(e) => return Err(e).at(dir),
            };
            for entry in entries {
                let path = entry.at(dir)?.path();
                if path.is_dir() {
                    walk(&path, out)?;
                } else if path.extension().is_some_and(|e| e == "lock") {
                    out.push(path);
                }
            }
            Ok(())
        }
        let git = self.repo.path();
        let mut out: Vec<PathBuf> =
            ["index.lock", "HEAD.lock", "packed-refs.lock", "config.lock"].iter().map(|n| git.join(n)).filter(|p| p.exists()).collect();
        walk(&git.join("refs"), &mut out)?;
        walk(&git.join("logs"), &mut out)?;
        Ok(out)
    }

    pub(crate) fn remove_git_locks(&self) -> Result<()> {
        for path in self.git_lock_files()? {
            match std::fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(e).at(&path),
            }
        }
        Ok(())
    }

    fn signature(&self) -> Result<Signature<'static>> {
        // The user's git identity when configured; a fixed one otherwise so a machine with
        // no git config (CI, containers) can still record checkpoints.
        match self.repo.signature() {
            Ok(sig) => Ok(sig),
            Err(_) => Signature::now("peak", "peak@localhost").git("make signature"),
        }
    }

    fn commit(&self, parents: &[&Commit<'_>], tree: Oid, message: &str) -> Result<Oid> {
        let sig = self.signature()?;
        let tree = self.repo.find_tree(tree).git("find new tree")?;
        self.repo.commit(None, &sig, &sig, message, &tree, parents).git("write commit")
    }

    fn context_blobs(&self, files: &Files) -> Result<BTreeMap<String, Oid>> {
        files
            .iter()
            .map(|(rel, bytes)| Ok((format!("{CONTEXT_DIR}/{rel}"), self.repo.blob(bytes).git(format!("write {CONTEXT_DIR}/{rel}"))?)))
            .collect()
    }

    /// Make the working folder and the index match HEAD, like `git checkout --force`:
    /// every file of HEAD is written (unless already identical), files the index tracked
    /// that HEAD lacks are deleted, untracked files are left alone, and the index is
    /// rebuilt from the files just written. Done by hand because libgit2's checkout
    /// compares against HEAD, which has already moved to the target at this point, and
    /// would then skip files the working folder already holds without re-indexing them.
    pub(crate) fn refresh_worktree(&self) -> Result<()> {
        let tree = self.repo.head().and_then(|h| h.peel_to_tree()).git("resolve HEAD")?;
        let files = tree_files(&self.repo, &tree).git("read HEAD's files")?;
        let mut index = self.repo.index().git("open the index")?;
        let tracked: Vec<String> = index.iter().map(|e| String::from_utf8_lossy(&e.path).into_owned()).collect();
        for (rel, bytes) in &files {
            let path = self.workdir.join(rel);
            if std::fs::read(&path).ok().as_ref() != Some(bytes) {
                if let Some(dir) = path.parent() {
                    std::fs::create_dir_all(dir).at(dir)?;
                }
                std::fs::write(&path, bytes).at(&path)?;
            }
        }
        for rel in tracked.iter().filter(|rel| !files.contains_key(*rel)) {
            let path = self.workdir.join(rel);
            match std::fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(e).at(&path),
            }
            // Drop folders the removal emptied; remove_dir refuses non-empty ones.
            let mut dir = path.parent();
            while let Some(d) = dir.filter(|d| *d != self.workdir && d.starts_with(&self.workdir)) {
                if std::fs::remove_dir(d).is_err() {
                    break;
                }
                dir = d.parent();
            }
        }
        index.clear().git("clear the index")?;
        for rel in files.keys() {
            index.add_path(Path::new(rel)).git(format!("index {rel}"))?;
        }
        index.write().git("write the index")
    }

    /// Tracked files whose working-folder copy differs from HEAD.
    pub(crate) fn dirty_files(&self) -> Result<Vec<String>> {
        let mut opts = git2::StatusOptions::new();
        opts.include_untracked(false).include_ignored(false).exclude_submodules(true);
        let statuses = self.repo.statuses(Some(&mut opts)).git("read working-folder status")?;
        Ok(statuses
            .iter()
            .filter(|s| s.status() != git2::Status::CURRENT)
            .map(|s| s.path().unwrap_or("<non-UTF-8 path>").to_string())
            .collect())
    }

    /// Resolve a rev (tag, branch, full or short id, `HEAD`, `HEAD~N`, `root`) to a
    /// checkpoint.
    pub fn resolve(&self, rev: &str) -> Result<CheckpointId> {
        self.resolve_oid(rev).map(CheckpointId::from_oid)
    }

    pub(crate) fn resolve_oid(&self, rev: &str) -> Result<Oid> {
        let unknown = || WorkflowError::UnknownRev { rev: rev.to_string() };
        // Refuse option-like and empty revs, which revparse would read in surprising ways.
        if rev.is_empty() || rev.starts_with('-') {
            return Err(unknown());
        }
        let object = match self.repo.revparse_single(rev) {
            Ok(object) => object,
            // A clone has the original's other branches as origin/NAME only; NAME alone
            // should still find them, as `git checkout NAME` does.
            Err(_) => match self.remote_branch(rev)? {
                Some(refname) => self.repo.revparse_single(&refname).map_err(|_| unknown())?,
                None => return Err(unknown()),
            },
        };
        let commit = object.peel_to_commit().map_err(|_| unknown())?;
        let tree = commit.tree().git(format!("read tree of {}", commit.id()))?;
        if tree.get_name(CHECKPOINT_FILE).is_none() {
            return Err(WorkflowError::NotACheckpoint { rev: rev.to_string(), id: commit.id().to_string() });
        }
        Ok(commit.id())
    }

    /// The one remote-tracking branch `refs/remotes/*/name`, if exactly one exists.
    fn remote_branch(&self, name: &str) -> Result<Option<String>> {
        if name == MIRROR_BRANCH || !git2::Reference::is_valid_name(&format!("refs/remotes/x/{name}")) {
            return Ok(None);
        }
        let mut found = Vec::new();
        for reference in self.repo.references_glob(&format!("refs/remotes/*/{name}")).git("list remote branches")? {
            let reference = reference.git("read remote branch")?;
            if let Ok(refname) = reference.name() {
                // The glob's * also spans slashes; keep only REMOTE/NAME.
                if refname.strip_prefix("refs/remotes/").and_then(|r| r.split_once('/')).is_some_and(|(_, n)| n == name) {
                    found.push(refname.to_string());
                }
            }
        }
        Ok(if found.len() == 1 { found.pop() } else { None })
    }

    /// Where HEAD is.
    pub fn head(&self) -> Result<Head> {
        let head = self.repo.head().git("resolve HEAD")?;
        let branch = if head.is_branch() { head.shorthand().ok().map(str::to_string) } else { None };
        let id = head.peel_to_commit().git("resolve HEAD")?.id();
        Ok(Head { id: CheckpointId::from_oid(id), branch })
    }

    /// Add a checkpoint on the current branch and make it the working folder's content.
    ///
    /// Crash safety: every object is written first, then the branch moves in one atomic
    /// ref update (compare-and-swap against the expected tip), then the working folder is
    /// rewritten. A crash before the ref update leaves only unreachable objects; a crash
    /// after it leaves the working folder behind HEAD, which the next writer or
    /// `fsck(repair)` restores (the lock record says the refresh was under way).
    pub fn checkpoint(&mut self, input: CheckpointInput) -> Result<CheckpointId> {
        check_transcript(&input.transcript)?;
        let files = check_context(&input.context_dir)?;
        let in_place = match (input.context_dir.canonicalize(), self.context_dir().canonicalize()) {
            (Ok(a), Ok(b)) => a == b,
            _ => false,
        };
        self.with_lock("checkpoint", |wf| wf.checkpoint_locked(input, files, in_place))
    }

    fn checkpoint_locked(&mut self, input: CheckpointInput, files: Files, in_place: bool) -> Result<CheckpointId> {
        let (new, tip, branch_ref, summary) = self.commit_checkpoint(input, files, in_place)?;
        self.set_operation(OP_REFRESH_WORKTREE, Some(new))?;
        self.repo
            .reference_matching(&branch_ref, new, true, tip, &format!("peak checkpoint: {summary}"))
            .git(format!("move {branch_ref}"))?;
        self.refresh_worktree()?;
        self.set_operation("sync-attempts", None)?;
        self.sync_attempts_locked()?;
        Ok(CheckpointId::from_oid(new))
    }

    /// Write the checkpoint's objects. Returns the new commit, the tip it goes on, the
    /// branch's ref name and the message's summary line.
    fn commit_checkpoint(&self, input: CheckpointInput, files: Files, in_place: bool) -> Result<(Oid, Oid, String, String)> {
        let head = self.repo.head().git("resolve HEAD")?;
        let tip = head.peel_to_commit().git("resolve HEAD")?;
        if !head.is_branch() {
            return Err(WorkflowError::DetachedHead { id: tip.id().to_string() });
        }
        let branch_ref = head.name().git("read HEAD's branch name")?.to_string();
        let branch = head.shorthand().unwrap_or(&branch_ref).to_string();
        drop(head);
        let tip_tree = tip.tree().git("read the tip's tree")?;
        if tip_tree.get_name(CHECKPOINT_FILE).is_none() {
            return Err(WorkflowError::NotACheckpoint { rev: branch, id: tip.id().to_string() });
        }
        if let Some(parent) = &input.parent {
            let parent = self.resolve_oid(parent)?;
            if parent != tip.id() {
                return Err(WorkflowError::StaleParent { branch, parent: parent.to_string(), tip: tip.id().to_string() });
            }
        }
        if !in_place && !input.force {
            let dirty = self.dirty_files()?;
            if !dirty.is_empty() {
                return Err(WorkflowError::DirtyWorktree { files: dirty });
            }
        }

        let meta = CheckpointMeta {
            format: META_FORMAT,
            transformation: input.transformation,
            parent: Some(tip.id().to_string()),
            verdict: input.validation.get("verdict").and_then(Value::as_str).map(str::to_string),
            executor: input.executor,
            model: input.model,
            created: now_rfc3339(),
            attempt: input.attempt,
        };
        let parent_best = self.best_time_of(&tip_tree);
        let root_best = self.resolve_oid(ROOT_TAG).ok().and_then(|root| {
            let tree = self.repo.find_commit(root).ok()?.tree().ok()?;
            self.best_time_of(&tree)
        });
        let message = commit_message(&meta, None, best_time(&input.performance), root_best, parent_best);

        let mut blobs = self.context_blobs(&files)?;
        for (name, value) in [
            (CHECKPOINT_FILE, serde_json::to_value(&meta).expect("CheckpointMeta serializes")),
            (VALIDATION_FILE, input.validation),
            (PERFORMANCE_FILE, input.performance),
            (TRANSCRIPT_FILE, input.transcript),
        ] {
            blobs.insert(name.to_string(), self.repo.blob(&json_bytes(&value)).git(format!("write {name}"))?);
        }
        // The reference identity is fixed at init; every checkpoint carries the same blob so
        // each commit is self-contained.
        let reference = tip_tree.get_name(REFERENCE_FILE).map(|e| e.id()).ok_or_else(|| WorkflowError::CorruptCheckpoint {
            id: tip.id().to_string(),
            file: REFERENCE_FILE.to_string(),
            message: "missing; every checkpoint carries the root's reference identity".to_string(),
        })?;
        blobs.insert(REFERENCE_FILE.to_string(), reference);
        let tree = write_tree(&self.repo, &blobs)?;
        let new = self.commit(&[&tip], tree, &message)?;
        let summary = message.lines().next().unwrap_or_default().to_string();
        Ok((new, tip.id(), branch_ref, summary))
    }

    pub(crate) fn best_time_of(&self, tree: &Tree<'_>) -> Option<f64> {
        let bytes = read_tree_file(&self.repo, tree, PERFORMANCE_FILE).ok()??;
        best_time(&serde_json::from_slice(&bytes).ok()?)
    }

    /// Name a checkpoint (default: HEAD). Tags never move.
    pub fn tag(&mut self, name: &str, rev: Option<&str>) -> Result<CheckpointId> {
        check_name(&self.repo, name, "tag")?;
        let target = self.resolve_oid(rev.unwrap_or("HEAD"))?;
        self.with_lock("tag", |wf| {
            if let Ok(existing) = wf.repo.revparse_single(&format!("refs/tags/{name}")) {
                let id = existing.peel_to_commit().map(|c| c.id().to_string()).unwrap_or_else(|_| existing.id().to_string());
                return Err(WorkflowError::TagExists { name: name.to_string(), id });
            }
            let object = wf.repo.find_object(target, None).git("find checkpoint")?;
            wf.repo.tag_lightweight(name, &object, false).git(format!("create tag {name}"))?;
            Ok(CheckpointId::from_oid(target))
        })
    }

    /// Start a branch at `from` (default: HEAD). Like `git branch`, HEAD stays where it is;
    /// check the branch out to add checkpoints to it.
    pub fn branch(&mut self, name: &str, from: Option<&str>) -> Result<CheckpointId> {
        check_name(&self.repo, name, "branch")?;
        let target = self.resolve_oid(from.unwrap_or("HEAD"))?;
        self.with_lock("branch", |wf| {
            if let Ok(existing) = wf.repo.find_branch(name, git2::BranchType::Local) {
                let id = existing.get().target().map(|o| o.to_string()).unwrap_or_default();
                return Err(WorkflowError::BranchExists { name: name.to_string(), id });
            }
            let commit = wf.repo.find_commit(target).git("find checkpoint")?;
            wf.repo.branch(name, &commit, false).git(format!("create branch {name}"))?;
            Ok(CheckpointId::from_oid(target))
        })
    }

    /// Restore a checkpoint into the working folder and move HEAD to it: onto the branch
    /// when `target` names one, detached otherwise. Refuses when tracked files in the
    /// working folder have uncommitted edits, unless `force`.
    pub fn checkout(&mut self, target: &str, force: bool) -> Result<Head> {
        self.with_lock("checkout", |wf| {
            if !force {
                let dirty = wf.dirty_files()?;
                if !dirty.is_empty() {
                    return Err(WorkflowError::DirtyWorktree { files: dirty });
                }
            }
            let local = format!("refs/heads/{target}");
            let branch = if target != MIRROR_BRANCH && wf.repo.find_reference(&local).is_ok() {
                Some(target.to_string())
            } else if let Some(remote) = wf.remote_branch(target)? {
                // Like `git checkout NAME` for a branch that exists only on the remote:
                // make the local branch, then switch to it.
                let id = wf.resolve_oid(&remote)?;
                let commit = wf.repo.find_commit(id).git("find checkpoint")?;
                wf.repo.branch(target, &commit, false).git(format!("create branch {target}"))?;
                Some(target.to_string())
            } else {
                None
            };
            let id = wf.resolve_oid(branch.as_deref().map_or(target, |_| local.as_str()))?;
            wf.set_operation(OP_REFRESH_WORKTREE, Some(id))?;
            match &branch {
                Some(_) => wf.repo.set_head(&local).git(format!("switch to branch {target}"))?,
                None => wf.repo.set_head_detached(id).git(format!("detach HEAD at {id}"))?,
            }
            wf.refresh_worktree()?;
            Ok(Head { id: CheckpointId::from_oid(id), branch })
        })
    }

    /// Write a checkpoint's context into `into` (a missing or empty folder), for instance
    /// to measure two checkpoints side by side.
    pub fn materialize(&self, rev: &str, into: impl AsRef<Path>) -> Result<()> {
        let into = into.as_ref();
        if !is_fresh_dir(into)? {
            return Err(WorkflowError::DirNotEmpty { path: into.to_path_buf() });
        }
        let oid = self.resolve_oid(rev)?;
        let commit = self.repo.find_commit(oid).git("find checkpoint")?;
        let tree = commit.tree().git("read checkpoint tree")?;
        let files = read_tree_dir(&self.repo, &tree, CONTEXT_DIR).git(format!("read {CONTEXT_DIR}/ of {oid}"))?;
        std::fs::create_dir_all(into).at(into)?;
        context::write_dir(into, &files)
    }

    /// Record one finished attempt under a fresh id.
    pub fn record_attempt(&mut self, attempt: Attempt) -> Result<AttemptRecord> {
        self.append_attempt(attempts::new_id(), attempt)
    }

    /// Record that an attempt began (outcome `started`); returns its id, to be passed to
    /// [`Workflow::finish_attempt`] and [`CheckpointInput::attempt`]. A start with no end
    /// marks an attempt that was cut short (see [`Workflow::resume_state`]).
    pub fn start_attempt(&mut self, mut attempt: Attempt) -> Result<String> {
        attempt.outcome = attempts::outcome::STARTED.to_string();
        self.append_attempt(attempts::new_id(), attempt).map(|r| r.id)
    }

    /// Record the outcome of an attempt begun with [`Workflow::start_attempt`].
    pub fn finish_attempt(&mut self, id: &str, attempt: Attempt) -> Result<AttemptRecord> {
        self.append_attempt(id.to_string(), attempt)
    }

    fn append_attempt(&mut self, id: String, mut attempt: Attempt) -> Result<AttemptRecord> {
        // Error texts come from providers and compilers; never let a key reach the log.
        if let Some(error) = &attempt.error {
            attempt.error = Some(secrets::redact(error).into_owned());
        }
        let record = AttemptRecord { id, time: now_rfc3339(), attempt };
        let path = self.attempts_path();
        self.with_lock("record-attempt", |_| attempts::append(&path, &record))?;
        Ok(record)
    }

    /// Every attempt: the local log merged with the mirror branch and remote mirrors.
    pub fn attempts(&self) -> Result<AttemptsLog> {
        let (local, mut damaged) = attempts::read_local(&self.attempts_path())?;
        let mut sources = vec![local];
        for (records, bad) in self.mirror_logs()?.into_values() {
            sources.push(records);
            damaged.extend(bad);
        }
        Ok(AttemptsLog { records: attempts::merge(sources), damaged })
    }

    /// The attempts held by each mirror ref, by ref name.
    pub(crate) fn mirror_logs(&self) -> Result<BTreeMap<String, attempts::Parsed>> {
        let mut out = BTreeMap::new();
        let mut names = vec![format!("refs/heads/{MIRROR_BRANCH}")];
        for reference in self.repo.references_glob(&format!("refs/remotes/*/{MIRROR_BRANCH}")).git("list attempt mirrors")? {
            if let Ok(name) = reference.git("read attempt mirror")?.name() {
                names.push(name.to_string());
            }
        }
        for name in names {
            let Ok(reference) = self.repo.find_reference(&name) else { continue };
            let commit = reference.peel_to_commit().git(format!("read {name}"))?;
            let tree = commit.tree().git(format!("read {name}"))?;
            let text = read_tree_file(&self.repo, &tree, MIRROR_FILE).git(format!("read {name}:{MIRROR_FILE}"))?.unwrap_or_default();
            out.insert(name.clone(), attempts::parse(&String::from_utf8_lossy(&text), &name));
        }
        Ok(out)
    }

    /// Copy the attempts log into the `peak-attempts` branch so it travels with clones and
    /// pushes. Done after every checkpoint; call it at the end of a session that recorded
    /// attempts without producing a checkpoint.
    pub fn sync_attempts(&mut self) -> Result<()> {
        self.with_lock("sync-attempts", |wf| wf.sync_attempts_locked())
    }

    pub(crate) fn sync_attempts_locked(&self) -> Result<()> {
        let log = self.attempts()?;
        let text = attempts::render(&log.records);
        let blob = self.repo.blob(text.as_bytes()).git(format!("write {MIRROR_FILE}"))?;
        let refname = format!("refs/heads/{MIRROR_BRANCH}");
        let current = match self.repo.find_reference(&refname) {
            Ok(r) => Some(r.peel_to_commit().git(format!("read {refname}"))?),
            Err(_) => None,
        };
        if let Some(current) = &current {
            let tree = current.tree().git(format!("read {refname}"))?;
            if tree.get_name(MIRROR_FILE).map(|e| e.id()) == Some(blob) {
                return Ok(());
            }
        }
        let tree = write_tree(&self.repo, &BTreeMap::from([(MIRROR_FILE.to_string(), blob)]))?;
        let parents: Vec<&Commit<'_>> = current.iter().collect();
        let new = self.commit(&parents, tree, &format!("attempts: {} records", log.records.len()))?;
        match &current {
            Some(c) => self.repo.reference_matching(&refname, new, true, c.id(), "peak: sync attempts"),
            None => self.repo.reference(&refname, new, false, "peak: sync attempts"),
        }
        .git("update the attempts mirror")?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_keep_about_three_significant_digits() {
        assert_eq!(fmt_ms(1.234), "1.23 ms");
        assert_eq!(fmt_ms(12.34), "12.3 ms");
        assert_eq!(fmt_ms(123.4), "123 ms");
        assert_eq!(fmt_ms(0.01234), "0.0123 ms");
        assert_eq!(fmt_ms(0.5), "0.500 ms");
    }

    #[test]
    fn best_time_ignores_missing_and_nonsense_values() {
        assert_eq!(best_time(&serde_json::json!({"best": {"time_ms": 1.5}})), Some(1.5));
        assert_eq!(best_time(&serde_json::json!({"best": {"time_ms": "fast"}})), None);
        assert_eq!(best_time(&serde_json::json!({"best": {"time_ms": 0.0}})), None);
        assert_eq!(best_time(&serde_json::json!({})), None);
    }
}
