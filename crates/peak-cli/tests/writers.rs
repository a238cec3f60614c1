//! One writer at a time: a command that writes a workflow holds its lock for its whole run,
//! so another writer is refused naming it; an apply left behind by a dead process is found
//! by `peak fsck`, with the one command that clears it; and an apply killed right after its
//! commit is finished by `peak apply --resume` without being validated and tuned again.
//!
//! A command is held mid-run deterministically, never by a fixed sleep: its workers start
//! under a launcher script that waits for the test to open a gate (so the command sits in
//! validation, holding the lock), or its attempts log is a named pipe (so it sits right
//! after its commit, where it first reads that log). PoCL runs the kernels; the tests skip,
//! saying why, without it.
// Helpers outside #[test] functions unwrap too; clippy's allow-unwrap-in-tests does not reach them here (rust-clippy#13981).
#![allow(clippy::unwrap_used)]

mod support;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use support::{Env, MEASURE, example, fixture, opencl_present, s};

/// A workflow whose Refactor apply (agent executor) waits for its second region; the
/// sizes come from `init --set`, which later steps use.
fn waiting_for_device(env: &Env, name: &str) -> PathBuf {
    let wf = env.path(name);
    let w = s(&wf);
    env.ok(&[&["init", w, "--from", &example("matmul-opencl-naive")][..], &MEASURE[..2], &MEASURE[4..]].concat());
    env.ok(&[&["apply", "refactor", "-w", w][..], &MEASURE].concat());
    env.ok(&["submit", &fixture("refactor/macros.c"), "-w", w]);
    wf
}

/// A `peak` running in the background, killed if the test ends (or fails) before it does.
struct Running(Option<Child>);

impl Running {
    fn child(&mut self) -> &mut Child {
        self.0.as_mut().expect("still running")
    }

    fn id(&mut self) -> u32 {
        self.child().id()
    }

    fn kill(&mut self) {
        let child = self.child();
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
    }

    fn finish(mut self) -> Output {
        self.0.take().expect("still running").wait_with_output().unwrap()
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(child) = &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Start `peak args` in the background with extra environment variables.
fn spawn(env: &Env, args: &[&str], vars: &[(&str, String)]) -> Running {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_peak"));
    cmd.args(args).env("PEAK_CACHE_DIR", env.path("cache")).stdout(Stdio::piped()).stderr(Stdio::piped());
    for (k, v) in vars {
        cmd.env(k, v);
    }
    Running(Some(cmd.spawn().expect("peak starts")))
}

/// Poll `ready` until it holds; fails the test if `peak` exits first or a minute passes.
fn wait_for(running: &mut Running, what: &str, ready: impl Fn() -> bool) {
    let started = Instant::now();
    while !ready() {
        if let Some(status) = running.child().try_wait().unwrap() {
            panic!("peak exited ({status}) before {what}");
        }
        assert!(started.elapsed() < Duration::from_secs(60), "timed out waiting until {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn text(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

/// Workers that wait for the test: each starts only once the gate is open, and says which
/// command started it (its parent's pid) as it begins to wait.
struct Gate {
    dir: PathBuf,
}

impl Gate {
    fn new(env: &Env, name: &str) -> Gate {
        let dir = env.path(name);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("gate.sh"),
            // A worker whose test is over (its folder gone) gives up instead of waiting on.
            "d=$(dirname \"$0\")\ntouch \"$d/waiting-$PPID\"\nwhile [ ! -e \"$d/open\" ]; do [ -d \"$d\" ] || exit 1; sleep 0.02; done\nexec \"$@\"\n",
        )
        .unwrap();
        Gate { dir }
    }

    fn launcher(&self) -> (&'static str, String) {
        ("PEAK_WORKER_LAUNCHER", format!("sh {}", s(&self.dir.join("gate.sh"))))
    }

    /// Wait until `child` has started a worker: it is validating, past every check it
    /// makes before, and stays there until the gate opens.
    fn wait_until_held(&self, running: &mut Running) {
        let waiting = self.dir.join(format!("waiting-{}", running.id()));
        wait_for(running, "a worker started", || waiting.exists());
    }

    fn open(&self) {
        std::fs::write(self.dir.join("open"), "").unwrap();
    }
}

fn head(env: &Env, wf: &Path) -> serde_json::Value {
    env.json(&["log", "-w", s(wf), "--json"])[0].clone()
}

#[test]
fn a_checkout_during_a_submit_is_refused_naming_the_submit() {
    if !opencl_present("a_checkout_during_a_submit_is_refused_naming_the_submit") {
        return;
    }
    let env = Env::new();
    let wf = waiting_for_device(&env, "wf");
    let w = s(&wf);
    let gate = Gate::new(&env, "gate");
    let mut submit = spawn(&env, &["submit", &fixture("refactor/device.c"), "-w", w, "--json"], &[gate.launcher()]);
    gate.wait_until_held(&mut submit);

    let checkout = env.peak(&["checkout", "root", "-w", w]);
    let said = text(&checkout);
    assert_eq!(checkout.status.code(), Some(1), "{said}");
    assert!(said.contains(&format!("locked by pid {}", submit.id())) && said.contains("running submit"), "the refusal names the submit: {said}");

    gate.open();
    let out = submit.finish();
    assert!(out.status.success(), "{}", text(&out));
    let top = head(&env, &wf);
    assert_eq!(top["transformation"], "Refactor");
    let branch = Command::new("git").args(["-C", w, "symbolic-ref", "--short", "HEAD"]).output().unwrap();
    assert_eq!(String::from_utf8_lossy(&branch.stdout).trim(), "main", "HEAD stayed on its branch");
    assert!(env.ok(&["fsck", "-w", w]).contains("consistent"));
}

#[test]
fn of_two_resumes_one_runs_and_the_other_is_refused_naming_it() {
    if !opencl_present("of_two_resumes_one_runs_and_the_other_is_refused_naming_it") {
        return;
    }
    let env = Env::new();
    let wf = waiting_for_device(&env, "wf");
    let w = s(&wf);
    let gate = Gate::new(&env, "gate");
    // A submit killed while it validates leaves an apply for `--resume` to finish.
    let mut submit = spawn(&env, &["submit", &fixture("refactor/device.c"), "-w", w], &[gate.launcher()]);
    gate.wait_until_held(&mut submit);
    submit.kill();
    let fsck = env.peak(&["fsck", "-w", w]);
    assert!(text(&fsck).contains("interrupted-apply") && text(&fsck).contains(&format!("`peak apply --resume -w {w}` continues it")), "{}", text(&fsck));

    let mut first = spawn(&env, &["apply", "--resume", "-w", w, "--json"], &[gate.launcher()]);
    gate.wait_until_held(&mut first);
    // Workers that cannot start: were it let in, it would fail, not wait at the gate.
    let second = env.peak_with(&["apply", "--resume", "-w", w], &[("PEAK_WORKER_LAUNCHER", "false")]);
    let said = text(&second);
    assert_eq!(second.status.code(), Some(1), "{said}");
    assert!(said.contains(&format!("locked by pid {}", first.id())) && said.contains("running apply --resume"), "the refusal names the first resume: {said}");
    assert!(!said.contains("No such file"), "{said}");

    gate.open();
    let out = first.finish();
    assert!(out.status.success(), "{}", text(&out));
    let log = env.json(&["log", "-w", w, "--json"]);
    let steps: Vec<&str> = log.as_array().unwrap().iter().map(|e| e["transformation"].as_str().unwrap()).collect();
    assert_eq!(steps, ["Refactor", "init"]);
    assert!(env.ok(&["fsck", "-w", w]).contains("consistent"));
}

#[test]
fn an_apply_killed_right_after_its_commit_is_named_by_fsck_and_finished_by_resume() {
    if !opencl_present("an_apply_killed_right_after_its_commit_is_named_by_fsck_and_finished_by_resume") {
        return;
    }
    let env = Env::new();
    let wf = waiting_for_device(&env, "wf");
    let w = s(&wf);
    // The attempts log is first read right after the branch moves: as a named pipe, it
    // holds the submit there until the kill.
    let log = wf.join(".git/peak/attempts.jsonl");
    assert!(!log.exists(), "nothing was recorded before the checkpoint");
    assert!(Command::new("mkfifo").arg(&log).status().unwrap().success());
    let mut submit = spawn(&env, &["submit", &fixture("refactor/device.c"), "-w", w], &[]);
    let lock = wf.join(".git/peak/lock");
    wait_for(&mut submit, "the checkpoint was committed", || std::fs::read_to_string(&lock).is_ok_and(|t| t.contains("\"operation\":\"sync-attempts\"")));
    submit.kill();
    std::fs::remove_file(&log).unwrap();
    let made = head(&env, &wf);
    assert_eq!(made["transformation"], "Refactor");

    let fsck = env.peak(&["fsck", "-w", w]);
    let said = text(&fsck);
    assert_eq!(fsck.status.code(), Some(1), "{said}");
    assert!(
        said.contains(&format!("made checkpoint {}", &made["id"].as_str().unwrap()[..7])) && said.contains(&format!("`peak apply --resume -w {w}` records it")),
        "{said}"
    );
    // The lock record the kill left names its command too (the resume's lock clears it).
    assert!(said.contains("stale-lock") && said.contains("`peak fsck --repair` clears it (as does the next command that writes here)"), "{said}");

    // Nothing is validated or tuned again: workers could not even start.
    let resumed = env.peak_with(&["apply", "--resume", "-w", w, "--json"], &[("PEAK_WORKER_LAUNCHER", "false")]);
    assert!(resumed.status.success(), "{}", text(&resumed));
    let outcome: serde_json::Value = serde_json::from_slice(&resumed.stdout).unwrap();
    assert_eq!((outcome["status"].as_str(), outcome["id"].as_str()), (Some("checkpoint"), made["id"].as_str()), "{outcome}");
    assert_eq!(env.json(&["log", "-w", w, "--json"]).as_array().unwrap().len(), 2, "no second checkpoint");
    let attempts = std::fs::read_to_string(&log).unwrap();
    let recorded: Vec<serde_json::Value> = attempts.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert!(recorded.iter().any(|r| r["outcome"] == "passed" && r["checkpoint"] == made["id"]), "the outcome is recorded: {attempts}");
    assert!(env.ok(&["fsck", "-w", w]).contains("consistent"));
}

#[test]
fn fsck_names_the_command_that_clears_an_apply_left_behind_and_repair_clears_it() {
    if !opencl_present("fsck_names_the_command_that_clears_an_apply_left_behind_and_repair_clears_it") {
        return;
    }
    let env = Env::new();
    let wf = env.path("wf");
    let w = s(&wf);
    env.ok(&["init", w, "--from", &example("matmul-opencl-naive"), "--no-measure"]);
    let apply = wf.join(".git/peak/apply");
    let abandon = format!("`peak apply --abandon -w {w}`");

    // Killed while it wrote its first state: an empty state.tmp and no state.json.
    std::fs::create_dir_all(&apply).unwrap();
    std::fs::write(apply.join("state.tmp"), "").unwrap();
    let fsck = env.peak(&["fsck", "-w", w]);
    assert_eq!(fsck.status.code(), Some(1), "{}", text(&fsck));
    assert!(text(&fsck).contains("without its state.json") && text(&fsck).contains(&abandon), "{}", text(&fsck));
    let repair = env.ok(&["fsck", "--repair", "-w", w]);
    assert!(repair.contains("repaired: interrupted-apply"), "{repair}");
    assert!(!apply.exists());

    // An apply whose parent is gone can never make its checkpoint.
    env.ok(&["apply", "refactor", "-w", w, "--samples", "3"]);
    let state = apply.join("state.json");
    let mut saved: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&state).unwrap()).unwrap();
    saved["parent"] = "0123456789abcdef0123456789abcdef01234567".into();
    std::fs::write(&state, saved.to_string()).unwrap();
    let fsck = env.peak(&["fsck", "-w", w]);
    assert!(text(&fsck).contains("its parent is not in the workflow any more") && text(&fsck).contains(&abandon), "{}", text(&fsck));
    env.ok(&["fsck", "--repair", "-w", w]);
    assert!(env.ok(&["fsck", "-w", w]).contains("consistent"));
}

#[test]
fn a_second_retune_is_refused_while_the_first_tunes() {
    if !opencl_present("a_second_retune_is_refused_while_the_first_tunes") {
        return;
    }
    let env = Env::new();
    let wf = env.path("wf");
    let w = s(&wf);
    env.ok(&[&["init", w, "--from", &example("matmul-opencl-naive")][..], &MEASURE[..2], &MEASURE[4..]].concat());
    let gate = Gate::new(&env, "gate");
    let mut first = spawn(&env, &["retune", "-w", w, "--budget", "8"], &[gate.launcher()]);
    gate.wait_until_held(&mut first);
    let second = env.peak_with(&["retune", "-w", w, "--budget", "8"], &[("PEAK_WORKER_LAUNCHER", "false")]);
    let said = text(&second);
    assert_eq!(second.status.code(), Some(1), "{said}");
    assert!(said.contains(&format!("locked by pid {}", first.id())) && said.contains("running retune"), "{said}");
    gate.open();
    let out = first.finish();
    assert!(out.status.success(), "{}", text(&out));
    let steps: Vec<String> =
        env.json(&["log", "-w", w, "--json"]).as_array().unwrap().iter().map(|e| e["transformation"].as_str().unwrap().to_string()).collect();
    assert_eq!(steps, ["Retune", "init"], "one retune recorded");
}

#[test]
fn a_replay_holds_the_lock_from_its_first_step_to_its_last() {
    if !opencl_present("a_replay_holds_the_lock_from_its_first_step_to_its_last") {
        return;
    }
    let env = Env::new();
    // Two steps to replay: Refactor (an apply) and a retune.
    let wf = waiting_for_device(&env, "wf");
    let w = s(&wf);
    env.ok(&["submit", &fixture("refactor/device.c"), "-w", w]);
    env.ok(&["retune", "-w", w, "--budget", "4"]);
    let copy = env.path("copy");
    let mut replay = spawn(&env, &[&["replay", w, "--into", s(&copy)][..], &MEASURE].concat(), &[]);

    // Every record the lock file shows while the replay runs, as (session, start).
    let lock = copy.join(".git/peak/lock");
    let mut seen: Vec<(String, String)> = Vec::new();
    while replay.child().try_wait().unwrap().is_none() {
        let record: Option<serde_json::Value> = std::fs::read_to_string(&lock).ok().and_then(|t| serde_json::from_str(t.trim()).ok());
        if let Some(session) = record.as_ref().and_then(|r| r["session"].as_str()) {
            let held = (session.to_string(), record.as_ref().unwrap()["started"].as_str().unwrap_or_default().to_string());
            if !seen.contains(&held) {
                seen.push(held);
            }
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    let out = replay.finish();
    assert!(out.status.success(), "{}", text(&out));
    let steps: Vec<String> =
        env.json(&["log", "-w", s(&copy), "--json"]).as_array().unwrap().iter().map(|e| e["transformation"].as_str().unwrap().to_string()).collect();
    assert_eq!(steps, ["Retune", "Refactor", "init"]);
    // Taken once for both steps, never let go between them (each would be a new record).
    assert_eq!(seen.len(), 1, "the lock was taken again between the steps: {seen:?}");
    assert_eq!(seen[0].0, "replay", "{seen:?}");
}
