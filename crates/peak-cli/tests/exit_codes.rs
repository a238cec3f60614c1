//! The exit statuses README promises, one snapshot per code path: 0 success; 1 failure (a
//! check that failed, a kernel that did not compile); 2 bad usage, the same in every
//! command: an unknown option, a folder that is not a workflow (apply, report, replay,
//! log, fsck, bundle, retune), an unknown transformation, executor or checkpoint. A
//! malformed manifest and an unknown `--set` name (2) are in `snapshots.rs`.
//!
//! Each snapshot holds the status and the error line (`error: ...`, with the scratch
//! folder as `[TEMP]`), under `tests/snapshots/exit_*.snap`.
// Helpers outside #[test] functions unwrap too; clippy's allow-unwrap-in-tests does not reach them here (rust-clippy#13981).
#![allow(clippy::unwrap_used)]

mod support;

use std::path::Path;
use std::process::{Command, Output};

use support::{example, opencl_present};

/// Runs `peak` in a scratch folder and snapshots how it ended.
struct Exits {
    tmp: tempfile::TempDir,
}

impl Exits {
    fn new() -> Exits {
        Exits { tmp: tempfile::tempdir().unwrap() }
    }

    fn dir(&self) -> &Path {
        self.tmp.path()
    }

    fn peak(&self, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_peak")).args(args).current_dir(self.dir()).env("PEAK_CACHE_DIR", self.dir().join("cache")).output().expect("peak runs")
    }

    /// The status and the `error:` line of `peak ARGS`, compared with snapshot `exit_NAME`.
    fn assert(&self, name: &str, args: &[&str]) {
        let out = self.peak(args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        let error = stderr.lines().find(|l| l.starts_with("error:")).unwrap_or("(no error line)");
        let text = format!("exit_code: {}\n{error}\n", out.status.code().map_or("none".to_string(), |c| c.to_string()));
        let mut settings = insta::Settings::clone_current();
        settings.set_description(format!("peak {}", args.join(" ")));
        settings.set_omit_expression(true);
        settings.set_prepend_module_to_snapshot(false);
        for path in [self.dir().to_path_buf(), self.dir().canonicalize().unwrap()] {
            settings.add_filter(&regex_literal(path.to_str().unwrap()), "[TEMP]");
        }
        settings.bind(|| insta::assert_snapshot!(format!("exit_{name}"), text));
    }

    /// A copy of the naive OpenCL matmul under `name`.
    fn copy_example(&self, name: &str) {
        let dir = self.dir().join(name);
        std::fs::create_dir_all(&dir).unwrap();
        for entry in std::fs::read_dir(example("matmul-opencl-naive")).unwrap() {
            let entry = entry.unwrap();
            std::fs::copy(entry.path(), dir.join(entry.file_name())).unwrap();
        }
    }

    /// The copy `name` with `from` replaced by `to` in its kernel.
    fn edited_example(&self, name: &str, from: &str, to: &str) {
        self.copy_example(name);
        let kernel = self.dir().join(name).join("kernel.cl");
        let text = std::fs::read_to_string(&kernel).unwrap();
        assert!(text.contains(from), "the example's kernel lacks {from:?}");
        std::fs::write(&kernel, text.replacen(from, to, 1)).unwrap();
    }
}

fn regex_literal(text: &str) -> String {
    text.chars().flat_map(|c| if "\\.+*?()|[]{}^$#&-~".contains(c) { vec!['\\', c] } else { vec![c] }).collect()
}

#[test]
fn success_is_0() {
    let exits = Exits::new();
    exits.assert("success", &["transformations", "show", "Refactor"]);
}

#[test]
fn a_failed_check_and_a_kernel_that_does_not_compile_are_1() {
    if !opencl_present("a_failed_check_and_a_kernel_that_does_not_compile_are_1") {
        return;
    }
    let exits = Exits::new();
    exits.copy_example("naive");
    exits.edited_example("lazy", "if (row < n && col < n)", "if (row < n / 2 && col < n)");
    exits.assert("failed_check", &["check", "lazy", "--against", "naive", "--samples", "1", "--set", "n=64"]);
    exits.edited_example("broken", "float acc = 0.0f;", "float acc = UNDECLARED;");
    exits.assert("compile_failed", &["run", "broken", "--set", "n=64"]);
}

#[test]
fn a_folder_that_is_no_workflow_is_2_in_every_command() {
    let exits = Exits::new();
    std::fs::create_dir(exits.dir().join("plain")).unwrap();
    exits.assert("no_workflow_apply", &["apply", "Refactor", "-w", "plain"]);
    exits.assert("no_workflow_report", &["report", "plain"]);
    exits.assert("no_workflow_replay", &["replay", "plain", "--into", "again"]);
    exits.assert("no_workflow_log", &["log", "-w", "plain"]);
    exits.assert("no_workflow_fsck", &["fsck", "-w", "plain"]);
    exits.assert("no_workflow_bundle", &["bundle", "plain", "plain.bundle"]);
    exits.assert("no_workflow_retune", &["retune", "-w", "plain"]);
}

#[test]
fn unknown_names_and_options_are_2() {
    let exits = Exits::new();
    exits.assert("unknown_option", &["run", "--bogus"]);
    exits.assert("unknown_transformation_listed", &["transformations", "show", "NOSUCH"]);
    if !opencl_present("unknown_names_and_options_are_2") {
        return;
    }
    let wf = exits.peak(&["init", "wf", "--from", &example("matmul-opencl-naive"), "--no-measure", "--set", "n=64"]);
    assert!(wf.status.success(), "{}", String::from_utf8_lossy(&wf.stderr));
    exits.assert("unknown_transformation", &["apply", "NOSUCH", "-w", "wf"]);
    exits.assert("unknown_executor", &["apply", "Refactor", "--executor", "foo", "-w", "wf"]);
    exits.assert("unknown_provider", &["apply", "Refactor", "--executor", "nosuch:model", "-w", "wf"]);
    exits.assert("unknown_checkpoint", &["show", "NOSUCH", "-w", "wf"]);
    exits.assert("unusable_tag_name", &["tag", "bad name", "-w", "wf"]);
}

/// `peak ... | head`: a reader that has closed stdout before peak prints ends peak with 141
/// (128 + SIGPIPE, as a shell reports `git log | head`), not with a panic and its backtrace.
#[test]
fn a_closed_stdout_ends_quietly() {
    let exits = Exits::new();
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let out = Command::new(env!("CARGO_BIN_EXE_peak"))
        .args(["transformations", "list"])
        .current_dir(exits.dir())
        .stdout(writer)
        .stderr(std::process::Stdio::piped())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(141), "stderr: {stderr}");
    assert!(!stderr.contains("panicked"), "stderr: {stderr}");
}
