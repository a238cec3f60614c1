//! Where workers run. A worker is a process that speaks the protocol on its standard
//! input and output, so it can be started anywhere a command can: a launcher is the
//! command line a worker's own is appended to, such as `srun --quiet --ntasks=1
//! --gres=gpu:1` on a SLURM cluster or `ssh gpu-box` for one remote machine. The worker
//! then runs there and talks through the launcher's pipes; its crashes, hangs and a lost
//! launcher cost only a restart, as for a local worker.
//!
//! The launcher comes, first found wins, from `--worker-launcher` (the CLI calls
//! [`choose`]), the `PEAK_WORKER_LAUNCHER` environment variable, or the `[workers]
//! launcher` key of the config file (`$PEAK_CONFIG`, else `~/.config/peak/config.toml`),
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

static CHOSEN: OnceLock<Vec<String>> = OnceLock::new();

/// The launcher given on the command line; it wins over the environment and the config
/// file. Only the first call counts.
pub fn choose(line: &str) {
    let _ = CHOSEN.set(split(line));
}

/// The launcher workers start under: empty to start them here, directly.
pub fn configured() -> Result<Vec<String>, String> {
    if let Some(chosen) = CHOSEN.get() {
        return Ok(chosen.clone());
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
    fn the_config_file_takes_a_line_or_a_list_and_names_what_is_wrong() {
        assert_eq!(parse_config("[workers]\nlauncher = \"srun --quiet  -n1\"").unwrap(), ["srun", "--quiet", "-n1"]);
        assert_eq!(parse_config("[workers]\nlauncher = [\"ssh\", \"gpu box\"]").unwrap(), ["ssh", "gpu box"]);
        assert!(parse_config("").unwrap().is_empty());
        let err = parse_config("[workers]\nlaunch = \"srun\"").unwrap_err();
        assert!(err.contains("launch") && err.contains("[workers] launcher"), "{err}");
    }
}
