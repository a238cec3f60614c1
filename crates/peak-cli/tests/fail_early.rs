//! What can be checked in a moment is checked before what takes minutes: `peak init` and
//! `peak replay` refuse a target folder that is in use before tuning the root.
// Helpers outside #[test] functions unwrap too; clippy's allow-unwrap-in-tests does not reach them here (rust-clippy#13981).
#![allow(clippy::unwrap_used)]

mod support;

use std::path::Path;

use support::{Env, example, s};

/// Files under `dir`, at any depth (none when it does not exist).
fn files_under(dir: &Path) -> Vec<String> {
    let mut found = Vec::new();
    let mut folders = vec![dir.to_path_buf()];
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder).into_iter().flatten() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                folders.push(path);
            } else {
                found.push(path.display().to_string());
            }
        }
    }
    found
}

#[test]
fn init_and_replay_refuse_a_folder_in_use_before_tuning_anything() {
    let env = Env::new();
    let taken = env.path("taken");
    std::fs::create_dir_all(&taken).unwrap();
    std::fs::write(taken.join("notes.txt"), "mine").unwrap();

    let init = env.peak(&["init", s(&taken), "--from", &example("matmul-opencl-naive"), "--budget", "4"]);
    let stderr = String::from_utf8_lossy(&init.stderr);
    assert_eq!(init.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("taken: already exists and is not empty"), "{stderr}");
    assert!(!stderr.contains("tuning"), "refused only after tuning:\n{stderr}");

    // A recorded workflow to replay (its root not measured: nothing runs here).
    let recorded = env.path("recorded");
    env.ok(&["init", s(&recorded), "--from", &example("matmul-opencl-naive"), "--no-measure"]);
    let replay = env.peak(&["replay", s(&recorded), "--into", s(&taken), "--budget", "4"]);
    let stderr = String::from_utf8_lossy(&replay.stderr);
    assert_eq!(replay.status.code(), Some(2), "bad usage, as for init: {stderr}");
    assert!(stderr.contains("taken: already exists and is not empty"), "{stderr}");
    assert!(!stderr.contains("tuning"), "refused only after tuning:\n{stderr}");

    assert_eq!(files_under(&env.path("cache")), Vec::<String>::new(), "nothing was measured");
    assert_eq!(std::fs::read_to_string(taken.join("notes.txt")).unwrap(), "mine");
}
