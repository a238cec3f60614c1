//! The attempts log as the workflow writes it: records appended, merged with the mirrors,
//! and mirrored on the `peak-attempts` branch.

use std::collections::BTreeMap;
use std::path::PathBuf;

use git2::Commit;

use crate::attempts::{self, Attempt, AttemptOutcome, AttemptRecord, AttemptsLog, MIRROR_BRANCH, MIRROR_FILE};
use crate::error::{GitContext, Result};
use crate::secrets;
use crate::time::now_rfc3339;

use super::Workflow;
use super::objects::{read_tree_file, write_tree};

impl Workflow {
    pub(crate) fn attempts_path(&self) -> PathBuf {
        self.peak_dir.join(attempts::LOCAL_FILE)
    }

    /// Record one finished attempt under a fresh id.
    pub fn record_attempt(&mut self, attempt: Attempt) -> Result<AttemptRecord> {
        self.append_attempt(attempts::new_id(), attempt)
    }

    /// Record that an attempt began (outcome `started`); returns its id, to be passed to
    /// [`Workflow::finish_attempt`] and [`CheckpointInput::attempt`](super::CheckpointInput::attempt). A start with no end
    /// marks an attempt that was cut short (see [`Workflow::resume_state`]).
    pub fn start_attempt(&mut self, mut attempt: Attempt) -> Result<String> {
        attempt.outcome = AttemptOutcome::Started;
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
