//! The command line, as clap definitions only. Each command's behaviour lives in
//! `commands/<verb>.rs`.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(name = "peak", version, about = "Walk GPU kernels to vendor-library speed with natural-language transformations")]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// List the backends and devices peak can use here, and why any are missing.
    Info(InfoArgs),
    /// Compile and run one execution parameter of a context, and time it.
    Run(RunArgs),
    /// Run two contexts on the same sampled execution parameters and inputs, and compare outputs.
    Check(CheckArgs),
}

#[derive(Debug, Args)]
pub struct InfoArgs {
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Choosing execution parameters: `--set NAME=VALUE[,VALUE...]`, repeatable.
#[derive(Debug, Args, Clone, Default)]
pub struct SetArgs {
    /// Fix an input or tuning parameter (NAME=VALUE, or NAME=V1,V2 for several).
    #[arg(long = "set", value_name = "NAME=VALUE")]
    pub set: Vec<String>,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// The context folder (holding peak.toml).
    pub context: PathBuf,
    #[command(flatten)]
    pub set: SetArgs,
    /// Untimed runs before timing.
    #[arg(long, default_value_t = 3)]
    pub warmup: usize,
    /// Timed runs; the median is reported.
    #[arg(long, default_value_t = 20)]
    pub reps: usize,
    /// Salt for the random inputs (0: the manifest's seeds as written).
    #[arg(long, default_value_t = 0)]
    pub data_seed: u64,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct CheckArgs {
    /// The candidate context.
    pub context: PathBuf,
    /// The reference context whose outputs are taken as right.
    #[arg(long)]
    pub against: PathBuf,
    /// How many execution parameters to sample from the candidate's space.
    #[arg(long, default_value_t = 16)]
    pub samples: usize,
    /// Seed of the sample and of the random inputs.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    #[command(flatten)]
    pub set: SetArgs,
    #[arg(long)]
    pub json: bool,
}
