//! Making a workflow (`init`, built beside its folder and moved into place) and opening one.

use std::path::{Path, PathBuf};

use git2::{Repository, RepositoryInitOptions};
use peak_record::{Record, ValidationRecord};
use serde_json::Value;

use crate::context::{self, Files};
use crate::error::{GitContext, IoContext, Result, WorkflowError};
use crate::lock::LockMode;
use crate::time::now_rfc3339;

use super::checkpoint::{CheckpointMeta, best_time, check_context, check_transcript, commit_message, redact_key_values, verdict_of};
use super::objects::{json_bytes, write_tree};
use super::{
    CHECKPOINT_FILE, DEFAULT_BRANCH, INIT_TRANSFORMATION, META_FORMAT, PERFORMANCE_FILE, REFERENCE_FILE, ROOT_TAG, TRANSCRIPT_FILE, VALIDATION_FILE, Workflow,
};

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

/// Where `init` builds a workflow before moving it to `dir`: a hidden sibling.
fn staging_dir(dir: &Path) -> PathBuf {
    let name = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "workflow".into());
    dir.with_file_name(format!(".{name}.peak-init"))
}

/// Whether `dir` is missing or an empty folder.
pub(super) fn is_fresh_dir(dir: &Path) -> Result<bool> {
    match std::fs::read_dir(dir) {
        Ok(mut entries) => Ok(entries.next().is_none()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotADirectory => Ok(false),
        Err(e) => Err(e).at(dir),
    }
}

impl Workflow {
    /// Refuse a folder a workflow cannot be created in (one that exists and is not empty),
    /// for callers with slow work to do before [`Workflow::init_with`] (tuning the root).
    pub fn check_new_dir(dir: &Path) -> Result<()> {
        if is_fresh_dir(dir)? { Ok(()) } else { Err(WorkflowError::DirNotEmpty { path: dir.to_path_buf() }) }
    }

    /// Create a workflow in `dir` (missing or empty) whose root checkpoint is the context
    /// in `context_dir`, with `reference` as `reference.json`.
    pub fn init(dir: impl AsRef<Path>, context_dir: impl AsRef<Path>, reference: Value) -> Result<Workflow> {
        Self::init_with(dir, context_dir, RootInput { reference, ..RootInput::default() })
    }

    /// [`Workflow::init`] with the root's validation, performance and transcript.
    pub fn init_with(dir: impl AsRef<Path>, context_dir: impl AsRef<Path>, mut root: RootInput) -> Result<Workflow> {
        let dir = dir.as_ref();
        Self::check_new_dir(dir)?;
        let files = check_context(context_dir.as_ref())?;
        let RootInput { reference, validation, performance, transcript, .. } = &mut root;
        redact_key_values(&mut [Some(reference), validation.as_mut(), performance.as_mut(), transcript.as_mut()].into_iter().flatten().collect::<Vec<_>>());
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
        let validation = root.validation.unwrap_or_else(|| {
            ValidationRecord { format: peak_record::current(), verdict: Some(peak_record::validation::REFERENCE.into()), ..ValidationRecord::default() }
                .to_json()
        });
        let performance = root.performance.unwrap_or_else(|| Value::Object(Default::default()));
        let mut opts = RepositoryInitOptions::new();
        opts.initial_head(DEFAULT_BRANCH).mkpath(true).no_reinit(true);
        let repo = Repository::init_opts(dir, &opts).git(format!("init {}", dir.display()))?;
        let meta = CheckpointMeta {
            format: META_FORMAT,
            transformation: INIT_TRANSFORMATION.to_string(),
            parent: None,
            verdict: verdict_of(&validation),
            executor: root.executor.unwrap_or_else(|| "user".to_string()),
            model: None,
            created: now_rfc3339(),
            attempt: None,
            extra: Default::default(),
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
        let is_checkpoint =
            |rev: &str| repo.revparse_single(rev).and_then(|o| o.peel_to_commit()).and_then(|c| c.tree()).is_ok_and(|t| t.get_name(CHECKPOINT_FILE).is_some());
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
}
