//! Workers started through SLURM (issue 12): a one-node cluster on localhost (Debian's
//! slurmctld, slurmd and munge, started by scripts/slurm-local.sh), `peak tune` on PoCL
//! with every worker started by `srun`, and a worker lost mid-run (its srun killed) that
//! costs the run nothing. Needs root, slurm-wlm and an OpenCL device; skips otherwise.
// Helpers outside #[test] functions unwrap too; clippy's allow-unwrap-in-tests does not reach them here (rust-clippy#13981).
#![allow(clippy::unwrap_used)]

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use support::{Env, example, json, opencl_present};

/// The cluster, stopped when dropped.
struct Cluster {
    dir: PathBuf,
}

impl Cluster {
    fn start(test: &str, dir: &Path) -> Option<Cluster> {
        if !opencl_present(test) {
            return None;
        }
        let uid = Command::new("id").arg("-u").output().map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string()).unwrap_or_default();
        if uid != "0" {
            eprintln!("SKIPPED {test}: starting slurmctld and slurmd needs root");
            return None;
        }
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/slurm-local.sh");
        let out = Command::new("bash").arg(&script).arg("start").arg(dir).output().expect("bash runs");
        if out.status.code() == Some(3) {
            eprintln!("SKIPPED {test}: {}", String::from_utf8_lossy(&out.stderr).trim());
            return None;
        }
        assert!(out.status.success(), "the cluster did not start:\n{}", String::from_utf8_lossy(&out.stderr));
        Some(Cluster { dir: dir.to_path_buf() })
    }

    fn conf(&self) -> PathBuf {
        self.dir.join("slurm.conf")
    }

    /// Jobs the controller has allocated so far: one per worker started by srun.
    fn jobs(&self) -> usize {
        std::fs::read_to_string(self.dir.join("log/slurmctld.log")).unwrap_or_default().matches("_slurm_rpc_allocate_resources JobId=").count()
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/slurm-local.sh");
        let _ = Command::new("bash").arg(&script).arg("stop").arg(&self.dir).status();
    }
}

const LAUNCHER: &str = "srun --quiet --ntasks=1";

/// The processes below `root` (its children, theirs, ...), read from /proc: only what this
/// test started, whatever else runs on the machine.
fn descendants(root: u32) -> Vec<(u32, String)> {
    let mut parent_of = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else { continue };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else { continue };
        // pid (comm) state ppid ...: comm may hold spaces and parentheses, so split at the last ')'.
        let Some((head, rest)) = stat.rsplit_once(')') else { continue };
        let comm = head.split_once('(').map(|(_, c)| c.to_string()).unwrap_or_default();
        let Some(ppid) = rest.split_whitespace().nth(1).and_then(|p| p.parse::<u32>().ok()) else { continue };
        parent_of.push((pid, ppid, comm));
    }
    let mut found: Vec<(u32, String)> = Vec::new();
    let mut frontier = vec![root];
    while let Some(p) = frontier.pop() {
        for (pid, ppid, comm) in &parent_of {
            if *ppid == p && !found.iter().any(|(f, _)| f == pid) {
                found.push((*pid, comm.clone()));
                frontier.push(*pid);
            }
        }
    }
    found
}

/// Configurations measured so far by a tuning run whose cache is `cache`: the records in
/// its results files (one header line each).
fn measured(cache: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(cache.join("results")) else { return 0 };
    entries.flatten().filter_map(|e| std::fs::read_to_string(e.path()).ok()).map(|t| t.lines().count().saturating_sub(1)).sum()
}

fn tune(env: &Env, cluster: &Cluster, n: &str) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_peak"));
    cmd.args(["tune", &example("matmul-opencl-naive"), "--set", n, "--strategy", "exhaustive", "--json", "--worker-launcher", LAUNCHER])
        .env("PEAK_CACHE_DIR", env.path("cache"))
        .env("SLURM_CONF", cluster.conf());
    cmd
}

/// One test: the two share the cluster's fixed ports, so they must not run side by side.
#[test]
fn workers_started_through_srun_tune_survive_a_lost_worker_and_spread_over_devices() {
    let env = Env::new();
    let Some(cluster) = Cluster::start("workers_started_through_srun_tune_survive_a_lost_worker_and_spread_over_devices", &env.path("slurm")) else { return };

    // Every worker through srun: the tuning run is whole, and the controller saw it.
    let out = tune(&env, &cluster, "n=128").output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let run = &json(&String::from_utf8_lossy(&out.stdout))["runs"][0];
    assert_eq!(run["evaluations"], run["space"], "{run}");
    assert_eq!(run["failures"], serde_json::json!({}), "{run}");
    assert!(cluster.jobs() >= 1, "the worker was started by srun");

    // A worker lost mid-run: its srun (a child of this test's `peak tune`, not any srun on
    // the machine) is killed once the run is under way, that is once a first configuration
    // has been measured: no clock. The job it held runs again on a new worker; no
    // configuration is lost or blamed.
    let jobs_before = cluster.jobs();
    let env = Env::new();
    let mut child = tune(&env, &cluster, "n=256").stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let started = Instant::now();
    let killed = loop {
        if measured(&env.path("cache")) >= 1 {
            let sruns: Vec<u32> = descendants(child.id()).into_iter().filter(|(_, comm)| comm == "srun").map(|(pid, _)| pid).collect();
            if !sruns.is_empty() {
                for pid in &sruns {
                    Command::new("kill").args(["-9", &pid.to_string()]).status().unwrap();
                }
                break true;
            }
        }
        if child.try_wait().unwrap().is_some() || started.elapsed() > Duration::from_secs(300) {
            break false;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let out = child.wait_with_output().unwrap();
    assert!(killed, "the run ended (or measured nothing in 300 s) before its worker could be killed");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let run = &json(&String::from_utf8_lossy(&out.stdout))["runs"][0];
    assert_eq!(run["evaluations"], run["space"], "{run}");
    assert_eq!(run["measured"], run["space"], "every configuration has its time: {run}");
    assert_eq!(run["failures"], serde_json::json!({}), "nothing is blamed on a kernel for a lost worker: {run}");
    assert!(cluster.jobs() >= jobs_before + 2, "a second worker was started through srun");

    // One worker per device, each through its own srun (on a real cluster, each job step
    // gets its GPU from SLURM): both take part and the run is whole.
    let jobs_before = cluster.jobs();
    let env = Env::new();
    let out = tune(&env, &cluster, "n=128").args(["--devices", "0,1"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let report = json(&String::from_utf8_lossy(&out.stdout));
    assert_eq!(report["runs"][0]["evaluations"], report["runs"][0]["space"], "{report}");
    assert_eq!(report["devices_served"].as_array().map(|d| d.len()), Some(2), "{report}");
    assert!(cluster.jobs() >= jobs_before + 2, "each device's worker is its own srun job");
}
