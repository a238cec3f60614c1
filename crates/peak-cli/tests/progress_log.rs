//! Progress where there is no terminal (a batch job's log): with stderr piped, tuning,
//! validation and replay write a timestamped line every `PEAK_PROGRESS_INTERVAL` seconds
//! (10 by default; small here so the runs on PoCL show several) with done, total, the
//! best so far and the time left, as the bar shows on a terminal; `0` turns them off.
// Helpers outside #[test] functions unwrap too; clippy's allow-unwrap-in-tests does not reach them here (rust-clippy#13981).
#![allow(clippy::unwrap_used)]

mod support;

use support::{Env, example, fixture, opencl_present, s};

/// The periodic lines of `stderr` about `what` (`tuning n=256`), as (done, total) per run
/// (a run opens with `what: N unit, ...`, the line every log gets), the rest of each line
/// checked.
fn beats(stderr: &str, what: &str, unit: &str) -> Vec<Vec<(usize, usize)>> {
    let prefix = format!("] {what}: ");
    let mut runs: Vec<Vec<(usize, usize)>> = Vec::new();
    for line in stderr.lines() {
        let Some(at) = line.find(&prefix) else { continue };
        let (stamp, rest) = line.split_at(at);
        assert!(stamp.starts_with('[') && stamp.trim_end().ends_with('s'), "a timestamp opens the line: {line}");
        let (count, tail) = rest[prefix.len()..].split_once(' ').unwrap_or_else(|| panic!("{line}"));
        let Some((done, total)) = count.split_once('/') else {
            runs.push(Vec::new());
            continue;
        };
        assert!(tail.starts_with(unit), "{line}");
        assert!(tail.ends_with(" left") || tail.ends_with("time left not known yet"), "the time left closes the line: {line}");
        runs.last_mut().unwrap_or_else(|| panic!("a periodic line before its run's start: {line}")).push((done.parse().unwrap(), total.parse().unwrap()));
    }
    runs
}

/// Every run has periodic lines, done rising to its total.
fn assert_rising(runs: &[Vec<(usize, usize)>], total: usize, stderr: &str) {
    assert!(!runs.is_empty(), "no run started:\n{stderr}");
    for beats in runs {
        assert!(!beats.is_empty(), "a run without periodic progress lines:\n{stderr}");
        assert!(beats.windows(2).all(|w| w[0].0 <= w[1].0), "done never goes back: {beats:?}");
        assert!(beats.iter().all(|&(done, t)| t == total && done <= total), "{beats:?}");
    }
}

#[test]
fn tuning_writes_periodic_lines_to_a_log_and_0_turns_them_off() {
    if !opencl_present("tuning_writes_periodic_lines_to_a_log_and_0_turns_them_off") {
        return;
    }
    let env = Env::new();
    let args = ["tune", &example("matmul-opencl-naive"), "--set", "n=256", "--budget", "6", "--strategy", "random"];
    let out = env.peak_with(&args, &[("PEAK_PROGRESS_INTERVAL", "0.05")]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let tuning = beats(&stderr, "tuning n=256", "configurations");
    assert_rising(&tuning, 6, &stderr);
    assert!(
        stderr.lines().any(|l| l.contains("] tuning n=256: ") && l.contains(", best ") && l.contains(" left")),
        "the best so far and the time left: {stderr}"
    );

    let quiet = env.peak_with(&args, &[("PEAK_PROGRESS_INTERVAL", "0")]);
    let stderr = String::from_utf8_lossy(&quiet.stderr);
    assert!(quiet.status.success(), "{stderr}");
    assert!(beats(&stderr, "tuning n=256", "configurations").iter().all(Vec::is_empty), "{stderr}");
    assert!(stderr.contains("tuning n=256: 6 configurations") && stderr.contains("tuned 6 configurations"), "the start and end lines stay: {stderr}");
}

#[test]
fn an_apply_and_its_replay_write_periodic_lines_while_validating_and_tuning() {
    if !opencl_present("an_apply_and_its_replay_write_periodic_lines_while_validating_and_tuning") {
        return;
    }
    let env = Env::new();
    let wf = env.path("wf");
    let w = s(&wf);
    let fast = [("PEAK_PROGRESS_INTERVAL", "0.02")];
    env.ok(&["init", w, "--from", &example("matmul-opencl-naive"), "--no-measure", "--set", "n=256"]);
    env.ok(&["apply", "refactor", "--samples", "4", "--budget", "4", "--set", "n=256", "-w", w]);
    env.ok(&["submit", &fixture("refactor/macros.c"), "-w", w]);
    let submitted = env.peak_with(&["submit", &fixture("refactor/device.c"), "-w", w], &fast);
    // A cache of its own, so the replay measures again rather than reading the submit's results.
    let fresh = [fast[0], ("PEAK_CACHE_DIR", &env.arg("replay-cache"))];
    let replayed = env.peak_with(&["replay", w, "--into", &env.arg("again"), "--samples", "4", "--budget", "4", "--set", "n=256"], &fresh);
    for (what, out) in [("submit", submitted), ("replay", replayed)] {
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{what}: {stderr}");
        let validating: Vec<&str> = stderr.lines().filter(|l| l.contains("] validating: ")).collect();
        assert!(!validating.is_empty(), "{what}: no periodic line while validating:\n{stderr}");
        assert!(validating.iter().all(|l| l.contains(" samples")), "{validating:?}");
        assert_rising(&beats(&stderr, "tuning n=256", "configurations"), 4, &stderr);
    }
}
