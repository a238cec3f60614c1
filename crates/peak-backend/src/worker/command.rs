//! How a worker is started: its command line, environment and wrapper.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::Command;

/// How to start a worker: normally `peak worker --backend NAME` (this very executable),
/// in tests another binary that calls [`serve`](super::serve), under tools a wrapper command line.
#[derive(Debug, Clone)]
pub struct WorkerCommand {
    pub program: PathBuf,
    pub args: Vec<OsString>,
    pub env: Vec<(OsString, OsString)>,
    /// Run the worker under another program: `wrapper[0] wrapper[1..] program args`.
    pub wrapper: Vec<OsString>,
    /// Start it elsewhere (see [`super::launcher`]): this command line comes first, before
    /// any wrapper, so a tool wraps the worker where it runs.
    pub launcher: Vec<OsString>,
}

impl WorkerCommand {
    pub fn new(program: impl Into<PathBuf>) -> WorkerCommand {
        WorkerCommand { program: program.into(), args: Vec::new(), env: Vec::new(), wrapper: Vec::new(), launcher: Vec::new() }
    }

    /// `<this executable> worker --backend NAME`: what the `peak` binary uses, under the
    /// launcher `placement` names, if any.
    pub fn peak(backend: &str, placement: &super::launcher::Placement) -> std::io::Result<WorkerCommand> {
        let launcher = placement.launcher().map_err(std::io::Error::other)?;
        Ok(WorkerCommand::new(std::env::current_exe()?).arg("worker").arg("--backend").arg(backend).launched_by(launcher))
    }

    pub fn launched_by<I: IntoIterator<Item = S>, S: Into<OsString>>(mut self, launcher: I) -> Self {
        self.launcher = launcher.into_iter().map(Into::into).collect();
        self
    }

    pub fn arg(mut self, arg: impl Into<OsString>) -> Self {
        self.args.push(arg.into());
        self
    }

    pub fn env(mut self, key: impl Into<OsString>, value: impl Into<OsString>) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }

    pub fn wrapped<I: IntoIterator<Item = S>, S: Into<OsString>>(mut self, wrapper: I) -> Self {
        self.wrapper = wrapper.into_iter().map(Into::into).collect();
        self
    }

    /// The command line, for messages.
    pub fn display(&self) -> String {
        let mut parts: Vec<String> = self.launcher.iter().chain(&self.wrapper).map(|a| a.to_string_lossy().into_owned()).collect();
        parts.push(self.program.display().to_string());
        parts.extend(self.args.iter().map(|a| a.to_string_lossy().into_owned()));
        parts.join(" ")
    }

    pub(super) fn command(&self) -> Command {
        let prefix: Vec<&OsString> = self.launcher.iter().chain(&self.wrapper).collect();
        let mut cmd = match prefix.split_first() {
            Some((tool, rest)) => {
                let mut cmd = Command::new(tool);
                cmd.args(rest).arg(&self.program);
                cmd
            }
            None => Command::new(&self.program),
        };
        cmd.args(&self.args);
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        cmd
    }
}
