//! `kill -9` at moments spread over whole commands that write (`peak replay`, with its
//! evaluation workers, `peak submit` of the agent executor, and `peak tag` / `peak
//! branch`): after each kill the workflow is
//! consistent (`peak fsck`, `git fsck`), the next command recovers a lock left by the dead
//! one, and running the replay again finishes with the same checkpoints as an
//! uninterrupted replay. PoCL runs the kernels; the tests skip, saying why, without it.
// Helpers outside #[test] functions unwrap too; clippy's allow-unwrap-in-tests does not reach them here (rust-clippy#13981).
#![allow(clippy::unwrap_used)]

mod support;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use support::{Env, MEASURE, deferred_refactor, example, fixture, opencl_present, s, steps};

/// Moments spread over [lo, hi) ms, the same on every run (a fixed LCG).
fn moments(count: usize, lo: u64, hi: u64) -> Vec<u64> {
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    (0..count)
        .map(|_| {
            x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            lo + (x >> 33) % (hi - lo)
        })
        .collect()
}

/// How a command started by `run_killed_at` ended.
enum End {
    /// SIGKILLed while it ran.
    Killed,
    /// It exited on its own before its kill, after `ms` ms, successfully or not.
    Finished { ms: u64, success: bool },
}

/// Start `peak args` and SIGKILL it `ms` ms after it started, unless it exits first. It
/// is watched every millisecond or two rather than slept past, so the kill comes on time
/// and a command that finishes first says how long it took.
fn run_killed_at(env: &Env, args: &[&str], ms: u64) -> End {
    let started = Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_peak"))
        .args(args)
        .env("PEAK_CACHE_DIR", env.path("cache"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("peak starts");
    let deadline = Duration::from_millis(ms);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return End::Finished { ms: started.elapsed().as_millis() as u64, success: status.success() };
        }
        let elapsed = started.elapsed();
        if elapsed >= deadline {
            break;
        }
        std::thread::sleep((deadline - elapsed).min(Duration::from_millis(2)));
    }
    child.kill().unwrap(); // SIGKILL
    let status = child.wait().unwrap();
    // It may have exited between the last look and the kill.
    if status.success() { End::Finished { ms: started.elapsed().as_millis() as u64, success: true } } else { End::Killed }
}

/// Start `peak args`, SIGKILL it after `ms` (or let it finish first); whether it was killed.
fn kill_after(env: &Env, args: &[&str], ms: u64) -> bool {
    matches!(run_killed_at(env, args, ms), End::Killed)
}

/// The checks after a kill: peak's and git's consistency checks, when there is a workflow.
/// The one finding a repair leaves is an apply the kill interrupted, which fsck names with
/// the command that finishes it.
fn consistent(env: &Env, wf: &Path, moment: u64) {
    if !wf.join(".git").exists() {
        return;
    }
    // `peak init` builds beside the folder and moves it into place: a workflow is whole.
    let fsck = env.peak(&["fsck", "--repair", "--json", "-w", s(wf)]);
    let text = format!("{}{}", String::from_utf8_lossy(&fsck.stdout), String::from_utf8_lossy(&fsck.stderr));
    let findings: Vec<serde_json::Value> =
        serde_json::from_slice(&fsck.stdout).unwrap_or_else(|e| panic!("killed at {moment} ms: fsck printed no findings ({e}):\n{text}"));
    let open: Vec<&serde_json::Value> = findings.iter().filter(|f| f["repaired"] != true).collect();
    let resumable = |f: &&serde_json::Value| f["kind"] == "interrupted-apply" && f["message"].as_str().is_some_and(|m| m.contains("peak apply --resume -w"));
    assert!(open.iter().all(resumable), "killed at {moment} ms: fsck failed:\n{text}");
    let git = Command::new("git").args(["-C", s(wf), "fsck", "--no-progress"]).output().unwrap();
    assert!(git.status.success(), "killed at {moment} ms: git fsck:\n{}", String::from_utf8_lossy(&git.stderr));
}

#[test]
fn a_replay_killed_at_any_moment_resumes_to_the_same_checkpoints() {
    if !opencl_present("a_replay_killed_at_any_moment_resumes_to_the_same_checkpoints") {
        return;
    }
    let env = Env::new();
    let wf = deferred_refactor(&env);
    let clean = env.path("clean");
    env.ok(&[&["replay", s(&wf), "--into", s(&clean)][..], &MEASURE].concat());
    // Timed once the results cache is warm, as every replay below runs. This is only a
    // first guess: a replay timed beside other test binaries took 1422 ms on a GPU machine
    // and the ones after it a third of that, so every kill placed from it came too late.
    let started = Instant::now();
    env.ok(&[&["replay", s(&wf), "--into", &env.arg("timed")][..], &MEASURE].concat());
    let mut whole = started.elapsed().as_millis() as u64;

    // Each round kills a replay at a fixed fraction (per mille, under 3/4) of a whole
    // replay's length. A replay that finishes before its kill has just measured that length
    // as replays run now: the round tries again at the same fraction of it, then at half and
    // at a quarter of the length each later miss measures, and later rounds start from the
    // latest length. A try misses only when its replay is shorter than 3/4, then 3/8, then
    // 3/16 of the one before it: a round misses four times only if replays shrink to 1/19.
    const TRIES: u32 = 4;
    let mut kills = 0;
    let mut misses = Vec::new();
    for (round, per_mille) in moments(5, 50, 750).into_iter().enumerate() {
        for attempt in 0..TRIES {
            let moment = (whole * per_mille / 1000) >> attempt.saturating_sub(1);
            let into = env.path(&format!("interrupted-{round}-{attempt}"));
            let replay: Vec<&str> = [&["replay", s(&wf), "--into", s(&into)][..], &MEASURE].concat();
            let killed = match run_killed_at(&env, &replay, moment) {
                End::Killed => {
                    kills += 1;
                    consistent(&env, &into, moment);
                    true
                }
                End::Finished { ms, success } => {
                    assert!(success, "a replay meant to be killed at {moment} ms failed on its own after {ms} ms");
                    misses.push(format!("{moment} ms (it took {ms})"));
                    whole = ms;
                    false
                }
            };
            // The same command again resumes and ends where an uninterrupted replay ends.
            env.ok(&replay);
            assert_eq!(steps(&env, &into), steps(&env, &clean), "kill at {moment} ms of {whole}");
            let log = env.json(&["log", "-w", s(&into), "--json"]);
            assert_eq!(log[0]["tags"], serde_json::json!(["refactored"]), "kill at {moment} ms of {whole}");
            assert!(env.ok(&["fsck", "-w", s(&into)]).contains("consistent"));
            if killed {
                break;
            }
        }
    }
    assert!(kills > 0, "every replay finished before its kill: {}", misses.join(", "));
}

#[test]
fn tags_and_branches_killed_mid_write_leave_a_consistent_workflow() {
    if !opencl_present("tags_and_branches_killed_mid_write_leave_a_consistent_workflow") {
        return;
    }
    let env = Env::new();
    let wf = deferred_refactor(&env);
    let w = s(&wf);
    for (i, moment) in moments(8, 1, 40).into_iter().enumerate() {
        let name = format!("n{i}");
        let args: Vec<&str> = if i % 2 == 0 { vec!["tag", &name, "-w", w] } else { vec!["branch", &name, "-w", w] };
        kill_after(&env, &args, moment);
        consistent(&env, &wf, moment);
        // The name is either there, whole, or not there at all: naming it again settles it.
        let again = env.peak(&args);
        let text = String::from_utf8_lossy(&again.stderr);
        assert!(again.status.success() || text.contains("already exists"), "after a kill at {moment} ms: {text}");
    }
    assert!(env.ok(&["fsck", "-w", w]).contains("consistent"));
}

#[test]
fn a_submit_killed_while_it_validates_and_tunes_is_finished_by_apply_resume() {
    if !opencl_present("a_submit_killed_while_it_validates_and_tunes_is_finished_by_apply_resume") {
        return;
    }
    let env = Env::new();
    let start = |name: &str| {
        let wf = env.path(name);
        let w = s(&wf).to_string();
        env.ok(&[&["init", &w, "--from", &example("matmul-opencl-naive")][..], &MEASURE[..2], &MEASURE[4..]].concat());
        env.ok(&[&["apply", "refactor", "-w", &w][..], &MEASURE].concat());
        env.ok(&["submit", &fixture("refactor/macros.c"), "-w", &w]);
        wf
    };
    let clean = start("clean");
    env.ok(&["submit", &fixture("refactor/device.c"), "-w", s(&clean)]);
    // Timed once the caches are warm, as every submit below runs.
    let timed = start("timed");
    let started = Instant::now();
    env.ok(&["submit", &fixture("refactor/device.c"), "-w", s(&timed)]);
    let whole = started.elapsed().as_millis() as u64;

    // One submit killed `moment` ms in, then finished; whether the kill landed.
    let round = |name: String, moment: u64| {
        let wf = start(&name);
        let killed = kill_after(&env, &["submit", &fixture("refactor/device.c"), "-w", s(&wf)], moment);
        if killed {
            consistent(&env, &wf, moment);
            // Unless it was killed after its checkpoint was recorded, as it was exiting:
            // submitting again is refused with the way out, which finishes the apply; or, if
            // the kill came before the submission was recorded (a slow start under load),
            // the step still waits for it and the second submit does it whole.
            if steps(&env, &wf) != steps(&env, &clean) {
                let again = env.peak(&["submit", &fixture("refactor/device.c"), "-w", s(&wf)]);
                if !again.status.success() {
                    let text = String::from_utf8_lossy(&again.stderr);
                    assert!(text.contains("interrupted after its last submission") && text.contains("peak apply --resume -w"), "{text}");
                    env.ok(&["apply", "--resume", "-w", s(&wf)]);
                }
            }
        }
        assert_eq!(steps(&env, &wf), steps(&env, &clean), "killed at {moment} ms of {whole}");
        killed
    };
    let mut kills = 0;
    for (i, moment) in moments(3, whole / 10, whole * 3 / 4).into_iter().enumerate() {
        kills += round(format!("killed-{i}"), moment) as usize;
    }
    // A submit timed on a loaded machine can be several times slower than the ones that
    // follow, so every kill may come too late: try earlier moments until one lands.
    let mut moment = whole / 20;
    while kills == 0 && moment > 0 {
        kills += round(format!("killed-at-{moment}"), moment) as usize;
        moment /= 2;
    }
    assert!(kills > 0, "every submit finished before its kill (a whole one took {whole} ms)");
}
