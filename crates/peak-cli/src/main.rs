//! `peak`: the command-line face of the peak library.
//!
//! Data goes to stdout (text, or JSON with `--json`); progress, warnings and errors go to
//! stderr. Exit codes ([`exit`]): 0 success, 1 failure (a check that failed, a run that
//! errored), 2 bad usage (unknown option, unknown `--set` name, unreadable context, a
//! folder that is not a workflow, an unknown transformation, executor or checkpoint).

mod backends;
mod cli;
mod closed_stdout;
mod commands;
mod exit;
mod heartbeat;
mod output;
mod progress;

use std::process::ExitCode;

use clap::Parser;

use crate::cli::{Cli, Command};

/// An error caused by what the user typed or pointed at; exits 2.
#[derive(Debug)]
pub struct UsageError(pub anyhow::Error);

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:#}", self.0)
    }
}

impl std::error::Error for UsageError {}

/// Wrap an error as a usage error.
pub fn usage(e: impl Into<anyhow::Error>) -> anyhow::Error {
    anyhow::Error::new(UsageError(e.into()))
}

/// A command that ran fine but whose answer is "no" (a failed check): exit 1, no error text.
#[derive(Debug)]
pub struct Failed;

impl std::fmt::Display for Failed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("failed")
    }
}

impl std::error::Error for Failed {}

fn main() -> ExitCode {
    closed_stdout::run(run)
}

fn run() -> ExitCode {
    let cli = Cli::parse();
    // Where this command's workers run: configuration handed to the commands that start
    // them, not process state (the libraries keep none).
    let placement = peak_backend::worker::launcher::Placement::new(cli.worker_launcher.as_deref(), cli.devices.as_deref());
    let result = match cli.command {
        Command::Info(args) => commands::info::run(args),
        Command::Run(args) => commands::run::run(args),
        Command::Check(args) => commands::check::run(args),
        Command::Compile(args) => commands::compile::run(args),
        Command::Baseline(args) => commands::baseline::run(args),
        Command::New(args) => commands::new::run(args),
        Command::Init(args) => commands::init::run(args, &placement),
        Command::Log(args) => commands::log::run(args),
        Command::Show(args) => commands::show::run(args),
        Command::Report(args) => commands::report::run(args),
        Command::Diff(args) => commands::diff::run(args),
        Command::Tag(args) => commands::tag::run(args),
        Command::Branch(args) => commands::branch::run(args),
        Command::Checkout(args) => commands::checkout::run(args),
        Command::Compare(args) => commands::compare::run(args, &placement),
        Command::Fsck(args) => commands::fsck::run(args),
        Command::Transformations(args) => commands::transformations::run(args),
        Command::Apply(args) => commands::apply::run(args, &placement),
        Command::Retune(args) => commands::retune::run(args, &placement),
        Command::Submit(args) => commands::submit::run(args, &placement),
        Command::Pending(args) => commands::pending::run(args),
        Command::Replay(args) => commands::replay::run(args, &placement),
        Command::Bundle(args) => commands::bundle::run(args),
        Command::Export(args) => commands::export::run(args),
        Command::Validate(args) => commands::validate::run(args, &placement),
        Command::Tune(args) => commands::tune::run(args, &placement),
        Command::Profile(args) => commands::profile::run(args, &placement),
        Command::Mcp(args) => commands::mcp::run(args, &placement),
        Command::Auto(args) => commands::auto::run(args, &placement),
        Command::Study(args) => commands::study::run(args, &placement),
        Command::Worker(args) => commands::worker::run(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            if !err.is::<Failed>() {
                output::print_error(&err);
            }
            ExitCode::from(exit::code(&err))
        }
    }
}
