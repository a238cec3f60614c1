//! Where workers run. A worker is a process that speaks the protocol on its standard
//! input and output, so it can be started anywhere a command can: a launcher is the
//! command line a worker's own is appended to, such as `srun --quiet --ntasks=1
//! --gres=gpu:1` on a SLURM cluster or `ssh gpu-box` for one remote machine. The worker
//! then runs there and talks through the launcher's pipes; its crashes, hangs and a lost
//! launcher cost only a restart, as for a local worker.
//!
//! The launcher comes, first found wins, from the command (`--worker-launcher`, an MCP
//! call's `worker_launcher`: a [`Placement`]), the `PEAK_WORKER_LAUNCHER` environment
//! variable, or the `[workers] launcher` key of the config file (`$PEAK_CONFIG`, else `~/.config/peak/config.toml`),
//! written as one string split at spaces or as a list of arguments:
//!
//! ```toml
//! [workers]
//! launcher = ["srun", "--quiet", "--ntasks=1", "--gres=gpu:1"]
//! ```
//!
//! The worker's program path must exist where the launcher starts it (a shared file
//! system on a cluster, the same install path over ssh).

use std::path::PathBuf;
use std::sync::OnceLock;

use serde::Deserialize;

pub const LAUNCHER_ENV: &str = "PEAK_WORKER_LAUNCHER";
pub const CONFIG_ENV: &str = "PEAK_CONFIG";

pub const DEVICES_ENV: &str = "PEAK_DEVICES";

/// Where a command's workers run: the launcher they start under and the devices a tuning
/// run spreads over, as a command was given them (`--worker-launcher`, `--devices`, or an
/// MCP call's parameters). Configuration, not process state: two calls in one process
/// (an MCP server's) may place their workers differently. What is not given comes from
/// the environment and the config file when asked.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Placement {
    /// The launcher's command line, split at spaces; `None`: `$PEAK_WORKER_LAUNCHER`, else
    /// the config file's, else none.
    pub launcher: Option<Vec<String>>,
    /// Device names (or `["all"]`); `None`: `$PEAK_DEVICES`, else every GPU
    /// `CUDA_VISIBLE_DEVICES` lists, else every GPU.
    pub devices: Option<Vec<String>>,
}

impl Placement {
    /// From a launcher line (`srun --quiet -n1`) and a device list (`0,1` or `all`), either
    /// of them absent.
    pub fn new(launcher: Option<&str>, devices: Option<&str>) -> Placement {
        Placement { launcher: launcher.map(split), devices: devices.map(device_list) }
    }

    /// The launcher workers start under: empty to start them here, directly.
    pub fn launcher(&self) -> Result<Vec<String>, String> {
        if let Some(given) = &self.launcher {
            return Ok(given.clone());
        }
        if let Ok(line) = std::env::var(LAUNCHER_ENV) {
            return Ok(split(&line));
        }
        let Some(path) = config_path() else { return Ok(Vec::new()) };
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(format!("{}: {e}", path.display())),
        };
        parse_config(&text).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// The devices a tuning run spreads over, one worker each, as the values of the
    /// variable that selects a worker's device (`CUDA_VISIBLE_DEVICES` on CUDA and HIP).
    /// Given ones first (`all` counts the GPUs with `nvidia-smi -L`), else `$PEAK_DEVICES`,
    /// else every GPU `CUDA_VISIBLE_DEVICES` lists, else every GPU there is. Other backends
    /// get one worker unless devices are named (they then share the one device, which only
    /// tests want).
    pub fn devices(&self, backend: &str) -> Vec<String> {
        let gpu = matches!(backend, "cuda" | "hip");
        let named = self.devices.clone().or_else(|| std::env::var(DEVICES_ENV).ok().map(|v| device_list(&v)));
        match named {
            Some(list) if list.len() == 1 && list[0] == "all" => {
                if gpu {
                    all_gpus()
                } else {
                    Vec::new()
                }
            }
            Some(list) => list,
            None if gpu => match std::env::var("CUDA_VISIBLE_DEVICES") {
                Ok(visible) => device_list(&visible),
                Err(_) => all_gpus(),
            },
            None => Vec::new(),
        }
    }
}

fn device_list(list: &str) -> Vec<String> {
    list.split(',').map(|d| d.trim().to_string()).filter(|d| !d.is_empty()).collect()
}

/// The environment variable that gives a worker its device.
pub fn device_variable(backend: &str) -> Option<&'static str> {
    matches!(backend, "cuda" | "hip").then_some("CUDA_VISIBLE_DEVICES")
}

/// Every GPU `nvidia-smi -L` lists, asked once per process (a tuning run asks per input
/// configuration).
fn all_gpus() -> Vec<String> {
    static GPUS: OnceLock<Vec<String>> = OnceLock::new();
    GPUS.get_or_init(|| {
        let listed = std::process::Command::new("nvidia-smi")
            .arg("-L")
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).lines().filter(|l| l.starts_with("GPU ")).count())
            .unwrap_or(0);
        (0..listed).map(|i| i.to_string()).collect()
    })
    .clone()
}

fn config_path() -> Option<PathBuf> {
    if let Ok(path) = std::env::var(CONFIG_ENV) {
        return Some(PathBuf::from(path));
    }
    let base = std::env::var_os("XDG_CONFIG_HOME").map(PathBuf::from).or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))?;
    Some(base.join("peak/config.toml"))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    #[serde(default)]
    workers: WorkersSection,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct WorkersSection {
    launcher: Option<Line>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Line {
    Text(String),
    Args(Vec<String>),
}

fn parse_config(text: &str) -> Result<Vec<String>, String> {
    let config: Config = toml::from_str(text).map_err(|e| format!("expected `[workers] launcher = \"COMMAND ARGS\"` or a list of arguments: {e}"))?;
    Ok(match config.workers.launcher {
        None => Vec::new(),
        Some(Line::Text(line)) => split(&line),
        Some(Line::Args(args)) => args,
    })
}

fn split(line: &str) -> Vec<String> {
    line.split_whitespace().map(str::to_string).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_given_placement_wins_and_splits_as_the_flags_do() {
        let given = Placement::new(Some("srun  --quiet -n1"), Some(" 0, 2,,"));
        assert_eq!(given.launcher().unwrap(), ["srun", "--quiet", "-n1"]);
        assert_eq!(given.devices("cuda"), ["0", "2"]);
        assert_eq!(given.devices("opencl"), ["0", "2"]);
        assert!(Placement::new(None, Some("all")).devices("opencl").is_empty(), "`all` names GPUs only");
    }

    #[test]
    fn the_config_file_takes_a_line_or_a_list_and_names_what_is_wrong() {
        assert_eq!(parse_config("[workers]\nlauncher = \"srun --quiet  -n1\"").unwrap(), ["srun", "--quiet", "-n1"]);
        assert_eq!(parse_config("[workers]\nlauncher = [\"ssh\", \"gpu box\"]").unwrap(), ["ssh", "gpu box"]);
        assert!(parse_config("").unwrap().is_empty());
        let err = parse_config("[workers]\nlaunch = \"srun\"").unwrap_err();
        assert!(err.contains("launch") && err.contains("[workers] launcher"), "{err}");
    }
}
