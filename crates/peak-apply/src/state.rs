//! The apply in progress, on disk, so an agent's apply survives the process that started it.
//!
//! `.git/peak/apply/state.json` names the transformation, the executor and the parent; the
//! agent executor keeps its prompts and replies beside it in `agent/`. The folder exists
//! from the first pass until the apply makes a checkpoint or gives up.

use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result, bail};
use peak_workflow::Workflow;
use serde::{Deserialize, Serialize};

use crate::{ApplyOptions, Defer, Settings};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ApplyState {
    pub transformation: String,
    pub executor: String,
    /// The checkpoint the apply started from.
    pub parent: String,
    pub retries: u32,
    /// Flat in the file, under the names it has always had (see `Settings`).
    #[serde(flatten)]
    pub settings: Settings,
    /// A deferred apply stays deferred when `submit` or `--resume` continues it.
    #[serde(default)]
    pub defer: Option<Defer>,
    /// Attempt records already written; a resumed apply replays its steps and must not
    /// write them twice.
    pub recorded_attempts: usize,
    /// The attempt id the checkpoint is about to carry, saved before it is committed: a
    /// process stopped between the commit and the end of the run leaves HEAD carrying this
    /// id, and the next run finishes there instead of validating and tuning again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint_attempt: Option<String>,
}

impl ApplyState {
    pub fn new(options: &ApplyOptions, parent: String) -> ApplyState {
        let ApplyOptions { transformation, executor, retries, settings, defer } = options.clone();
        ApplyState { transformation, executor, parent, retries, settings, defer, recorded_attempts: 0, checkpoint_attempt: None }
    }

    pub fn options(&self) -> ApplyOptions {
        ApplyOptions {
            transformation: self.transformation.clone(),
            executor: self.executor.clone(),
            retries: self.retries,
            settings: self.settings.clone(),
            defer: self.defer.clone(),
        }
    }
}

/// Where an apply keeps its files inside a workflow.
pub fn apply_dir(workflow: &Path) -> PathBuf {
    workflow.join(".git").join("peak").join("apply")
}

/// Where a retune keeps its copies of the checkpoint and the root inside a workflow.
pub fn retune_dir(workflow: &Path) -> PathBuf {
    workflow.join(".git").join("peak").join("retune")
}

/// Checkpoint `rev` of `wf` written afresh into `dir` (an earlier run's copy is replaced)
/// and loaded as a context.
pub fn fresh_context(wf: &Workflow, rev: &str, dir: &Path) -> Result<peak_spec::Context> {
    let _ = std::fs::remove_dir_all(dir);
    wf.materialize(rev, dir)?;
    Ok(peak_spec::Context::load(dir)?)
}

pub fn agent_dir(workflow: &Path) -> PathBuf {
    apply_dir(workflow).join("agent")
}

fn state_file(workflow: &Path) -> PathBuf {
    apply_dir(workflow).join("state.json")
}

/// Refuse to start anything that writes a checkpoint while an apply is in progress in
/// `workflow` (waiting for `peak submit`, or interrupted).
pub fn refuse_if_pending(workflow: &Path) -> Result<()> {
    match load(workflow)? {
        Some(existing) => bail!(
            "an apply of {} is already in progress in {} (waiting for `peak submit`, or interrupted)\nhint: `peak pending -w {2}` shows what it waits for; answer it with `peak submit FILE -w {2}`, finish an interrupted one with `peak apply --resume -w {2}`, or drop it with `peak apply --abandon -w {2}`",
            existing.transformation,
            workflow.display(),
            workflow.display()
        ),
        None => Ok(()),
    }
}

pub fn load(workflow: &Path) -> Result<Option<ApplyState>> {
    let path = state_file(workflow);
    match std::fs::read_to_string(&path) {
        Ok(text) => {
            serde_json::from_str(&text).map(Some).with_context(|| format!("{}: not a valid apply state (delete it to abandon the apply)", path.display()))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
    }
}

pub fn save(workflow: &Path, state: &ApplyState) -> Result<()> {
    let path = state_file(workflow);
    std::fs::create_dir_all(apply_dir(workflow))?;
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, serde_json::to_string_pretty(state)?)?;
    std::fs::rename(&tmp, &path).with_context(|| format!("writing {}", path.display()))
}

/// Forget the apply in progress (after a checkpoint, or when it gives up).
pub fn clear(workflow: &Path) -> Result<()> {
    match std::fs::remove_dir_all(apply_dir(workflow)) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e).context("removing the finished apply's files"),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Sanitize, SanitizerSettings};

    #[test]
    fn sanitizer_settings_survive_a_resume_and_older_states_get_the_defaults() {
        let sanitizer = SanitizerSettings { tools: "memcheck".parse().unwrap(), samples: 3, winner: false, at: Vec::new() };
        let options = ApplyOptions { settings: Settings { sanitizer: sanitizer.clone(), ..Settings::default() }, ..ApplyOptions::default() };
        let state = ApplyState::new(&options, "abc".into());
        let back: ApplyState = serde_json::from_str(&serde_json::to_string(&state).unwrap()).unwrap();
        assert_eq!(back.options().settings.sanitizer, sanitizer);

        let mut old = serde_json::to_value(ApplyState::new(&ApplyOptions::default(), "abc".into())).unwrap();
        for key in ["sanitize", "sanitize_samples", "sanitize_winner"] {
            old.as_object_mut().unwrap().remove(key);
        }
        let old: ApplyState = serde_json::from_value(old).unwrap();
        let s = &old.settings.sanitizer;
        assert_eq!((&s.tools, s.samples, s.winner), (&Sanitize::Auto, 16, true));
    }

    /// A state.json as peak wrote it before the settings were nested: every field is
    /// read back where it belongs.
    #[test]
    fn a_state_file_of_the_flat_format_resumes() {
        let file = r#"{"transformation":"Tile-Pad","executor":"agent","parent":"abc","retries":2,"samples":5,
            "sanitize":"memcheck,racecheck","sanitize_samples":2,"sanitize_winner":false,"sanitize_at":["n=64"],
            "seed":9,"budget":12,"time_limit_s":2.5,"set":["n=128"],"library_dirs":["lib"],"cache_dir":"cache",
            "recorded_attempts":1}"#;
        let state: ApplyState = serde_json::from_str(file).unwrap();
        let settings = state.options().settings;
        assert_eq!((settings.samples, settings.seed, settings.sanitizer.samples, settings.sanitizer.winner), (5, 9, 2, false));
        assert_eq!(settings.sanitizer.tools.to_string(), "memcheck,racecheck");
        assert_eq!(settings.sanitizer.at, ["n=64"]);
        assert_eq!((settings.tuning.budget, settings.tuning.time_limit), (Some(12), Some(std::time::Duration::from_secs_f64(2.5))));
        assert_eq!(
            (settings.set, settings.library_dirs, settings.cache_dir),
            (vec!["n=128".to_string()], vec![PathBuf::from("lib")], Some(PathBuf::from("cache")))
        );
        assert_eq!((state.retries, state.recorded_attempts), (2, 1));
    }

    #[test]
    fn a_deferred_apply_stays_deferred_when_resumed() {
        let options = ApplyOptions { defer: Some(Defer { arch: Some("sm_80".into()) }), ..ApplyOptions::default() };
        let back: ApplyState = serde_json::from_str(&serde_json::to_string(&ApplyState::new(&options, "abc".into())).unwrap()).unwrap();
        assert_eq!(back.options().defer, options.defer);

        let mut old = serde_json::to_value(ApplyState::new(&ApplyOptions::default(), "abc".into())).unwrap();
        old.as_object_mut().unwrap().remove("defer");
        assert_eq!(serde_json::from_value::<ApplyState>(old).unwrap().defer, None);
    }
}
