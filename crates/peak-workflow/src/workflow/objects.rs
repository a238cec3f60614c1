//! Git objects: blobs, trees and commits written, and files read back out of trees.

use std::collections::BTreeMap;

use git2::{Commit, ObjectType, Oid, Repository, Signature, Tree};
use serde_json::Value;

use crate::context::Files;
use crate::error::{GitContext, Result};

use super::{CONTEXT_DIR, Workflow};

pub(super) fn json_bytes(value: &Value) -> Vec<u8> {
    let mut bytes = serde_json::to_vec_pretty(value).expect("serde_json::Value serializes");
    bytes.push(b'\n');
    bytes
}

/// Build a (nested) git tree from `/`-separated paths.
pub(super) fn write_tree(repo: &Repository, entries: &BTreeMap<String, Oid>) -> Result<Oid> {
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
pub(super) fn tree_files(repo: &Repository, tree: &Tree<'_>) -> std::result::Result<Files, git2::Error> {
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

impl Workflow {
    fn signature(&self) -> Result<Signature<'static>> {
        // The user's git identity when configured; a fixed one otherwise so a machine with
        // no git config (CI, containers) can still record checkpoints.
        match self.repo.signature() {
            Ok(sig) => Ok(sig),
            Err(_) => Signature::now("peak", "peak@localhost").git("make signature"),
        }
    }

    pub(super) fn commit(&self, parents: &[&Commit<'_>], tree: Oid, message: &str) -> Result<Oid> {
        let sig = self.signature()?;
        let tree = self.repo.find_tree(tree).git("find new tree")?;
        self.repo.commit(None, &sig, &sig, message, &tree, parents).git("write commit")
    }

    pub(super) fn context_blobs(&self, files: &Files) -> Result<BTreeMap<String, Oid>> {
        files.iter().map(|(rel, bytes)| Ok((format!("{CONTEXT_DIR}/{rel}"), self.repo.blob(bytes).git(format!("write {CONTEXT_DIR}/{rel}"))?))).collect()
    }
}
