//! The command line, as clap definitions only. Each command's behaviour lives in
//! `commands/<verb>.rs`.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(name = "peak", version, about = "Walk GPU kernels to vendor-library speed with natural-language transformations")]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
    /// Start workers under this command line, e.g. `srun --quiet --ntasks=1 --gres=gpu:1` or `ssh gpu-box` (else $PEAK_WORKER_LAUNCHER, else `[workers] launcher` in ~/.config/peak/config.toml).
    #[arg(long, global = true, value_name = "COMMAND")]
    pub worker_launcher: Option<String>,
    /// Tune on these GPUs, one worker each: `0,1`, or `all` (default: every GPU CUDA_VISIBLE_DEVICES lists, else every GPU; else $PEAK_DEVICES).
    #[arg(long, global = true, value_name = "LIST")]
    pub devices: Option<String>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// List the backends and devices peak can use here, and why any are missing.
    Info(InfoArgs),
    /// Compile and run one execution parameter of a context, and time it.
    Run(RunArgs),
    /// Run two contexts on the same sampled execution parameters and inputs, and compare outputs.
    Check(CheckArgs),
    /// Compile every variant of a CUDA or HIP context with NVRTC (no GPU needed); report registers, shared memory and spills.
    Compile(CompileArgs),
    /// Time a kernel and its yardstick in the same run: cuBLASLt on the same GEMM for a matmul, else a device-to-device copy of the same bytes; print the percentage.
    Baseline(BaselineArgs),
    /// Scaffold a context from an existing kernel source file: arrays and scalar inputs from its signature, a proposed launch script.
    New(NewArgs),
    /// Create a workflow (a git repository) whose root checkpoint is a context.
    Init(InitArgs),
    /// The workflow's checkpoints: transformation, verdict, best time, speedups.
    Log(LogArgs),
    /// One checkpoint: its metadata, results, transcript and context.
    Show(ShowArgs),
    /// The paper's figures and tables from workflows' records: speedups, success per executor, evaluation depth, time, convergence.
    Report(ReportArgs),
    /// Code diff per region, tuning-parameter and performance deltas between two checkpoints.
    Diff(DiffArgs),
    /// Name a checkpoint (a git tag).
    Tag(TagArgs),
    /// Start a line of work from a checkpoint (a git branch).
    Branch(BranchArgs),
    /// Restore a checkpoint's context into the workflow's working folder.
    Checkout(CheckoutArgs),
    /// Measure two checkpoints in the same run on the same inputs and print the speedup.
    Compare(CompareArgs),
    /// Verify a workflow: refs, checkpoints, attempts log, lock, working folder.
    Fsck(FsckArgs),
    /// The natural-transformation library: list it, or show one transformation.
    Transformations(TransformationsArgs),
    /// Apply a transformation to the workflow's current checkpoint (LLM or agent executor).
    Apply(ApplyArgs),
    /// Tune the current checkpoint again with a larger budget, starting from its top-K, and record the result as a `Retune` checkpoint.
    Retune(RetuneArgs),
    /// Hand in the region the agent executor is waiting for, and resume the apply.
    Submit(SubmitArgs),
    /// Print the pass prompt the agent executor is waiting on, if any.
    Pending(PendingArgs),
    /// Re-run a recorded workflow's responses here (a workflow or a bundle file), re-validating and re-tuning every step.
    Replay(ReplayArgs),
    /// Pack a workflow (every branch and tag, and the attempts log) into one file, for another machine.
    Bundle(BundleArgs),
    /// Write a checkpoint out of peak: the kernel with its best configuration as #defines, its launch sequence, and a stand-alone timing harness (nvcc, hipcc, or cc -lOpenCL).
    Export(ExportArgs),
    /// Judge a candidate against a reference on sampled execution parameters, with fresh inputs each, in crash-isolated workers.
    Validate(ValidateArgs),
    /// Search the tuning space within a budget: parallel compiles, checked outputs, a cache so nothing is measured twice.
    Tune(TuneArgs),
    /// Nsight Compute headline metrics of one configuration: FLOP/s, DRAM bandwidth, occupancy, bank conflicts.
    Profile(ProfileArgs),
    /// Serve peak's tools to an AI agent over MCP on stdio (Claude Code, Cursor, VS Code).
    Mcp(McpArgs),
    /// Let an LLM choose and apply transformations on its own, backtracking from failures and regressions.
    Auto(AutoArgs),
    /// RQ2 at scale: apply transformations from one checkpoint with several LLM executors, N times each, on side branches; HEAD stays put.
    Study(StudyArgs),
    /// The crash-isolated worker process validation and tuning talk to (internal).
    #[command(hide = true)]
    Worker(WorkerArgs),
}

#[derive(Debug, Args)]
pub struct McpArgs {
    /// Extra transformation folders, layered over the built-in library for every tool.
    #[arg(long = "library")]
    pub library: Vec<PathBuf>,
    /// Where the results cache and references are kept (default: $PEAK_CACHE_DIR, else ~/.cache/peak).
    #[arg(long)]
    pub cache_dir: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct AutoArgs {
    /// The workflow (a folder inside one); the search starts from its current checkpoint.
    #[arg(default_value = ".")]
    pub workflow: PathBuf,
    /// Who carries the chosen transformations out: PROVIDER:MODEL such as `openai:gpt-4.1`.
    #[arg(long)]
    pub executor: String,
    /// Who chooses them: PROVIDER:MODEL (default: the executor).
    #[arg(long)]
    pub planner: Option<String>,
    /// Transformations to apply at most.
    #[arg(long, default_value_t = 10)]
    pub budget: usize,
    /// Start no new step after this many seconds.
    #[arg(long, value_name = "SECONDS")]
    pub time: Option<f64>,
    /// A checkpoint slower than the best by more than this percentage is backtracked.
    #[arg(long, default_value_t = 5.0, value_name = "PERCENT")]
    pub regression: f64,
    /// Unusable planner replies in a row before giving up.
    #[arg(long, default_value_t = 2)]
    pub plan_retries: u32,
    /// Repair tries per transformation after the first (bad reply, compile error, wrong output).
    #[arg(long, default_value_t = 3)]
    pub retries: u32,
    /// Execution parameters sampled for validation.
    #[arg(long, default_value_t = 16)]
    pub samples: usize,
    /// Seed of the validation sample, the inputs and the search.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Tuning budget in evaluations per input configuration (default: the whole space).
    #[arg(long)]
    pub tune_budget: Option<usize>,
    /// Tuning time limit per input configuration, in seconds.
    #[arg(long)]
    pub tune_time: Option<f64>,
    #[command(flatten)]
    pub set: SetArgs,
    /// Extra transformation folders, layered over the built-in library.
    #[arg(long = "library")]
    pub library: Vec<PathBuf>,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct StudyArgs {
    /// The checkpoint every run starts from.
    #[arg(long, default_value = "HEAD", value_name = "CHECKPOINT")]
    pub from: String,
    /// Transformations to apply, comma-separated (see `peak transformations`).
    #[arg(long, value_delimiter = ',', required = true, value_name = "NAME,...")]
    pub transformations: Vec<String>,
    /// LLM executors, comma-separated PROVIDER:MODEL, e.g. `openai:gpt-5,anthropic:claude-sonnet-4-5`.
    #[arg(long, value_delimiter = ',', required = true, value_name = "PROVIDER:MODEL,...")]
    pub executors: Vec<String>,
    /// Runs of each transformation with each executor.
    #[arg(long, default_value_t = 1)]
    pub repeat: usize,
    /// Repair tries per run after the first (bad reply, compile error, wrong output).
    #[arg(long, default_value_t = 3)]
    pub retries: u32,
    #[command(flatten)]
    pub measure: MeasureArgs,
    #[command(flatten)]
    pub workflow: WorkflowArg,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct TransformationsArgs {
    #[command(subcommand)]
    pub action: Option<TransformationsAction>,
    /// Extra folders of transformation files, layered over the built-in library.
    #[arg(long = "dir", global = true)]
    pub dirs: Vec<PathBuf>,
    #[arg(long, global = true)]
    pub json: bool,
}

#[derive(Debug, Subcommand)]
pub enum TransformationsAction {
    /// One line per transformation (the default).
    List,
    /// Everything about one transformation: passes, tuning parameters, translations.
    Show { name: String },
}

/// Which workflow: a folder inside one (default: the current folder).
#[derive(Debug, Args, Clone)]
pub struct WorkflowArg {
    #[arg(long, short = 'w', default_value = ".", value_name = "WORKFLOW")]
    pub workflow: PathBuf,
}

/// compute-sanitizer settings of the commands that record a tuned winner.
#[derive(Debug, Args, Clone)]
pub struct SanitizeArgs {
    /// compute-sanitizer tools run on validation samples and on the tuned winner: `auto`
    /// (memcheck,racecheck on CUDA and HIP; skipped with a warning where compute-sanitizer is
    /// missing), `none`, or a list such as `memcheck,racecheck` (an error where it cannot run).
    #[arg(long, default_value = "auto", value_name = "TOOL,...|auto|none")]
    pub sanitize: peak_apply::Sanitize,
    /// Record the tuned winner without running the sanitizer on it.
    #[arg(long)]
    pub no_sanitize_winner: bool,
    /// Run the sanitizer at this input size where a configuration is valid there, e.g.
    /// `n=512` (smaller than the manifest's sizes: sanitized runs are 10-1000x slower).
    #[arg(long, value_name = "NAME=VALUE")]
    pub sanitize_at: Vec<String>,
}

/// Validation and tuning settings shared by the commands that make checkpoints.
#[derive(Debug, Args, Clone)]
pub struct MeasureArgs {
    /// Execution parameters sampled for validation.
    #[arg(long, default_value_t = 16)]
    pub samples: usize,
    #[command(flatten)]
    pub sanitizer: SanitizeArgs,
    /// Validation samples the sanitizer runs on (at most --samples), each at the smallest input size it is valid for.
    #[arg(long, default_value_t = 16, value_name = "N")]
    pub sanitize_samples: usize,
    /// Seed of the validation sample, the inputs and the search.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Tuning budget in evaluations per input configuration (default: the whole space).
    #[arg(long)]
    pub budget: Option<usize>,
    /// Tuning time limit per input configuration, in seconds.
    #[arg(long)]
    pub time: Option<f64>,
    #[command(flatten)]
    pub set: SetArgs,
    /// Extra transformation folders, layered over the built-in library.
    #[arg(long = "library")]
    pub library: Vec<PathBuf>,
}

impl SanitizeArgs {
    /// These flags as the sanitizer settings; `samples` is the validation samples the
    /// sanitizer runs on (the commands that validate nothing pass the default).
    pub fn settings(&self, samples: usize) -> peak_apply::SanitizerSettings {
        let SanitizeArgs { sanitize, no_sanitize_winner, sanitize_at } = self;
        peak_apply::SanitizerSettings { tools: sanitize.clone(), samples, winner: !no_sanitize_winner, at: sanitize_at.clone() }
    }
}

impl MeasureArgs {
    /// These flags as the settings every command that validates and tunes takes: every
    /// field destructured, so a new flag cannot be left out of them.
    pub fn settings(&self) -> peak_apply::Settings {
        let MeasureArgs { samples, sanitizer, sanitize_samples, seed, budget, time, set, library } = self;
        peak_apply::Settings {
            samples: *samples,
            seed: *seed,
            sanitizer: sanitizer.settings(*sanitize_samples),
            tuning: peak_apply::TuningSettings { budget: *budget, time_limit: time.map(std::time::Duration::from_secs_f64) },
            set: set.set.clone(),
            library_dirs: library.clone(),
            cache_dir: None,
        }
    }
}

#[derive(Debug, Args)]
pub struct ApplyArgs {
    /// The transformation (see `peak transformations`).
    pub transformation: Option<String>,
    /// `agent` (you or your IDE agent write each region, see `peak submit`), or
    /// PROVIDER:MODEL such as `openai:gpt-4.1`, `anthropic:claude-sonnet-4-5`, `ollama:qwen2.5-coder`.
    #[arg(long, default_value = "agent")]
    pub executor: String,
    /// Repair tries after the first (bad reply, compile error, wrong output).
    #[arg(long, default_value_t = 3)]
    pub retries: u32,
    /// Forget the apply in progress instead of starting one.
    #[arg(long, conflicts_with_all = ["transformation", "resume"])]
    pub abandon: bool,
    /// Continue the apply in progress (after a crash or an interrupted run).
    #[arg(long, conflicts_with = "transformation")]
    pub resume: bool,
    /// For a GPU that is elsewhere: compile-check the candidate on the sampled execution
    /// parameters instead of validating and tuning it, and record it as `deferred`;
    /// `peak replay` validates and tunes it where the GPU is. CUDA and HIP need NVRTC only;
    /// OpenCL and HLSL compile with the local driver.
    #[arg(long, conflicts_with_all = ["abandon", "resume"])]
    pub defer: bool,
    /// The GPU's architecture, for a deferred CUDA or HIP apply (NVRTC's target).
    #[arg(long, default_value = "sm_90a", requires = "defer")]
    pub arch: String,
    #[command(flatten)]
    pub measure: MeasureArgs,
    #[command(flatten)]
    pub workflow: WorkflowArg,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct RetuneArgs {
    /// Configurations to evaluate per input configuration, the checkpoint's recorded
    /// top-K among them (they are where the search starts).
    #[arg(long, default_value_t = 512)]
    pub budget: usize,
    /// Stop proposing configurations after this many seconds per input configuration.
    #[arg(long, value_name = "SECONDS")]
    pub time: Option<f64>,
    /// Seed of the search.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    #[command(flatten)]
    pub set: SetArgs,
    #[command(flatten)]
    pub sanitizer: SanitizeArgs,
    #[command(flatten)]
    pub workflow: WorkflowArg,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct SubmitArgs {
    /// A file holding the new region (bare code, or a reply with one fenced block).
    pub file: PathBuf,
    #[command(flatten)]
    pub workflow: WorkflowArg,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct PendingArgs {
    #[command(flatten)]
    pub workflow: WorkflowArg,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ReplayArgs {
    /// The recorded workflow: a workflow folder, or a bundle file (`peak bundle`).
    pub source: PathBuf,
    /// Where to build the replayed workflow.
    #[arg(long)]
    pub into: PathBuf,
    /// Replay the chain of checkpoints ending here: a branch, a tag or a checkpoint id
    /// (default: the source's current branch).
    #[arg(long, value_name = "NAME")]
    pub branch: Option<String>,
    #[command(flatten)]
    pub measure: MeasureArgs,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct BundleArgs {
    /// The workflow to pack.
    pub workflow: PathBuf,
    /// The file to write (e.g. wf.bundle); `git clone FILE` or `peak replay FILE` reads it.
    pub file: PathBuf,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct NewArgs {
    /// The kernel source file (.cu, .hip or .cl).
    pub file: PathBuf,
    /// The context folder to create.
    #[arg(long)]
    pub to: PathBuf,
    /// The kernel to import, when the file holds several.
    #[arg(long)]
    pub kernel: Option<String>,
    /// The backend, when the file's extension does not say it.
    #[arg(long)]
    pub backend: Option<String>,
    /// An array's length as an expression over the scalar inputs: `x=rows*cols`. Asked for when missing and stdin is a terminal.
    #[arg(long = "size", value_name = "ARRAY=EXPR")]
    pub sizes: Vec<String>,
    /// The values a scalar input is run at: `n=256,1024`. Asked for when missing and stdin is a terminal.
    #[arg(long = "input", value_name = "NAME=V1,V2")]
    pub inputs: Vec<String>,
    /// The value of a float parameter, written into the launch: `eps=1e-5`. Asked for when missing and stdin is a terminal.
    #[arg(long = "scalar", value_name = "NAME=VALUE")]
    pub scalars: Vec<String>,
    /// Check correctness at these values of an integer parameter, apart from the sizes
    /// --input tunes at (`[validation.inputs]`): small odd sizes find the same faults in
    /// seconds.
    #[arg(long = "validate", value_name = "NAME=V1,V2")]
    pub validation: Vec<String>,
    /// The library call computing the same outputs, a PyTorch expression over the arrays and
    /// inputs (`[kernel] library`), which the benchmark scripts time beside the kernel.
    #[arg(long)]
    pub library: Option<String>,
    /// An array that holds the kernel's result (repeat for several). Default: every array the kernel writes.
    #[arg(long = "output", value_name = "ARRAY")]
    pub outputs: Vec<String>,
    /// The kind of kernel (matmul, softmax, reduction, stencil, transpose, ...): transformations check it.
    #[arg(long)]
    pub domain: Option<String>,
    /// What the kernel computes, in a sentence: prompts describe the kernel with it.
    #[arg(long)]
    pub description: Option<String>,
    /// What the kernel does (elementwise, row-reduction, reduction, transpose, stencil, gemm,
    /// attention), when reading its code would not say or would say wrong.
    #[arg(long)]
    pub pattern: Option<String>,
    /// How an input array is drawn: a distribution (`x=normal`) or keys of its `[[arrays]]`
    /// table (`x=init = "normal", scale = 0.5, outliers = { row = "C", count = 2, scale = 20.0 }`,
    /// `labels=range = [0, "V"]`).
    #[arg(long = "init", value_name = "ARRAY=SHAPE")]
    pub shaping: Vec<String>,
    /// A relative-error tolerance per element type (`f32=1e-4`, `bf16=2e-2`), or the
    /// accumulation depth the half-precision default grows with (`accumulation=K`).
    #[arg(long, value_name = "TYPE=VALUE")]
    pub tolerance: Vec<String>,
    /// The GEMM the kernel computes, as the keys of `[kernel.matmul]`:
    /// `m = "M", n = "N", k = "K", a = "inp", b = "weight", c = "out", b_layout = "col", bias = "bias"`.
    #[arg(long, value_name = "KEYS")]
    pub matmul: Option<String>,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct InitArgs {
    /// The folder to create.
    pub workflow: PathBuf,
    /// The initial kernel context; its outputs become the reference.
    #[arg(long)]
    pub from: PathBuf,
    /// Record the context under another backend name (the manifest's by default).
    #[arg(long)]
    pub backend: Option<String>,
    /// Do not tune the root (later checkpoints then have no speedup over it).
    #[arg(long)]
    pub no_measure: bool,
    #[command(flatten)]
    pub measure: MeasureArgs,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct LogArgs {
    #[command(flatten)]
    pub workflow: WorkflowArg,
    /// A line under each checkpoint for every other input size it was tuned at, with its
    /// time and speedups there.
    #[arg(long)]
    pub sizes: bool,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// Workflow folders or bundle files (`peak bundle`); each branch is a series.
    #[arg(required = true, value_name = "WORKFLOW")]
    pub workflows: Vec<PathBuf>,
    /// Also write one self-contained HTML page (inline SVG figures, no script) to this file.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ShowArgs {
    /// A checkpoint: tag, branch, id, HEAD, HEAD~N or root.
    #[arg(default_value = "HEAD")]
    pub checkpoint: String,
    #[command(flatten)]
    pub workflow: WorkflowArg,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct DiffArgs {
    pub a: String,
    #[arg(default_value = "HEAD")]
    pub b: String,
    #[command(flatten)]
    pub workflow: WorkflowArg,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct TagArgs {
    pub name: String,
    /// The checkpoint to name (default HEAD).
    pub checkpoint: Option<String>,
    #[command(flatten)]
    pub workflow: WorkflowArg,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct BranchArgs {
    pub name: String,
    /// Where the branch starts (default HEAD).
    #[arg(long)]
    pub from: Option<String>,
    #[command(flatten)]
    pub workflow: WorkflowArg,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct CheckoutArgs {
    /// A checkpoint id, tag or branch.
    pub target: String,
    /// Discard uncommitted edits in the working folder's context.
    #[arg(long)]
    pub force: bool,
    #[command(flatten)]
    pub workflow: WorkflowArg,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct CompareArgs {
    pub a: String,
    pub b: String,
    #[command(flatten)]
    pub set: SetArgs,
    /// Timed repetitions of each side, interleaved.
    #[arg(long, default_value_t = 20)]
    pub reps: usize,
    #[command(flatten)]
    pub cache: CacheArgs,
    #[command(flatten)]
    pub workflow: WorkflowArg,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct FsckArgs {
    /// Repair what can be repaired (stale locks, a half-rewritten working folder).
    #[arg(long)]
    pub repair: bool,
    #[command(flatten)]
    pub workflow: WorkflowArg,
    #[arg(long)]
    pub json: bool,
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

/// Timing one context in-process: `peak run` and `peak baseline`.
#[derive(Debug, Args, Clone)]
pub struct TimingArgs {
    /// Untimed runs before timing (for `baseline`, on each side).
    #[arg(long, default_value_t = 3)]
    pub warmup: usize,
    /// Timed runs; the median is reported (for `baseline`, each side's, and compared).
    #[arg(long, default_value_t = 20)]
    pub reps: usize,
    /// Salt for the random inputs (0: the manifest's seeds as written).
    #[arg(long, default_value_t = 0)]
    pub data_seed: u64,
    #[command(flatten)]
    pub cache: CacheArgs,
}

/// The cache flush before every timed run (`peak_backend::timing`): on by default, where
/// the backend knows its cache.
#[derive(Debug, Args, Clone, Copy, Default)]
pub struct CacheArgs {
    /// Evict the device's cache before every timed run, outside the timed interval (the
    /// default; the flag is kept for scripts).
    #[arg(long, overrides_with = "no_flush_cache")]
    pub flush_cache: bool,
    /// Time with whatever the previous run left in the cache.
    #[arg(long)]
    pub no_flush_cache: bool,
}

impl CacheArgs {
    pub fn flush(&self) -> bool {
        !self.no_flush_cache
    }
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// The context folder (holding peak.toml).
    pub context: PathBuf,
    #[command(flatten)]
    pub set: SetArgs,
    #[command(flatten)]
    pub timing: TimingArgs,
    #[arg(long)]
    pub json: bool,
}

/// A candidate checked against a reference on sampled execution parameters: `peak check`
/// and `peak validate`.
#[derive(Debug, Args, Clone)]
pub struct CandidateArgs {
    /// The candidate context.
    pub context: PathBuf,
    /// The reference context whose outputs are taken as right (in a workflow, the initial kernel).
    #[arg(long)]
    pub against: PathBuf,
    /// How many execution parameters to sample from the candidate's space.
    #[arg(long, default_value_t = 16)]
    pub samples: usize,
    /// Seed of the sample and of each sample's random inputs.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

#[derive(Debug, Args)]
pub struct CheckArgs {
    #[command(flatten)]
    pub candidate: CandidateArgs,
    #[command(flatten)]
    pub set: SetArgs,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct CompileArgs {
    /// The context folder (holding peak.toml); a cuda or hip context.
    pub context: PathBuf,
    #[command(flatten)]
    pub set: SetArgs,
    /// NVRTC's target architecture.
    #[arg(long, default_value = "sm_90a")]
    pub arch: String,
    /// AMD target for hipcc's compile check of HIP contexts.
    #[arg(long, default_value = "gfx90a")]
    pub offload_arch: String,
    /// Skip the hipcc compile check of HIP contexts.
    #[arg(long)]
    pub no_hipcc: bool,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct BaselineArgs {
    /// The context folder (holding peak.toml).
    pub context: PathBuf,
    /// What to time the kernel against: `cublaslt`, the same GEMM, layouts and fused epilogue through cuBLASLt (a cuda or hip context with [kernel.matmul]; the default for a matmul), or `copy`, a device-to-device copy of the bytes the kernel moves (any backend; the default for other kernels).
    #[arg(long, value_name = "cublaslt|copy")]
    pub against: Option<String>,
    #[command(flatten)]
    pub set: SetArgs,
    #[command(flatten)]
    pub timing: TimingArgs,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ValidateArgs {
    #[command(flatten)]
    pub candidate: CandidateArgs,
    /// compute-sanitizer tools run on the samples whose outputs are right, as `peak apply`
    /// runs them: `auto` (memcheck,racecheck on CUDA and HIP; skipped, saying why, where
    /// compute-sanitizer is missing), `none`, or a list such as `memcheck,initcheck` (an error
    /// where it cannot run).
    #[arg(long, default_value = "auto", value_name = "TOOL,...|auto|none")]
    pub sanitize: peak_apply::Sanitize,
    /// How many of the samples the sanitizer runs on (at most --samples; it is slow), each
    /// at the smallest input size it is valid for, as `peak apply` counts them.
    #[arg(long, default_value_t = 16, value_name = "N")]
    pub sanitize_samples: usize,
    /// Run the sanitizer at this input size where a configuration is valid there, e.g.
    /// `n=512` (smaller than the manifest's sizes: sanitized runs are 10-1000x slower).
    #[arg(long, value_name = "NAME=VALUE")]
    pub sanitize_at: Vec<String>,
    /// Seconds one run may take before it is killed and judged timed-out.
    #[arg(long, default_value_t = 60.0)]
    pub timeout: f64,
    /// Where recorded references are kept (default: $PEAK_CACHE_DIR, else ~/.cache/peak).
    #[arg(long)]
    pub cache_dir: Option<PathBuf>,
    #[command(flatten)]
    pub set: SetArgs,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct TuneArgs {
    /// The context folder (holding peak.toml).
    pub context: PathBuf,
    /// exhaustive, random, or auto (an ensemble autotuner that needs far fewer runs).
    #[arg(long, default_value = "auto")]
    pub strategy: String,
    /// Configurations to evaluate per input configuration (default: all for exhaustive;
    /// for random and auto, a tenth of the space but at least 100).
    #[arg(long)]
    pub budget: Option<usize>,
    /// Stop proposing new configurations after this many seconds.
    #[arg(long, value_name = "SECONDS")]
    pub time: Option<f64>,
    /// How many of the fastest configurations to keep for the next transformation.
    #[arg(long, default_value_t = 128)]
    pub top: usize,
    /// Seed of the search.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Check every variant's outputs against this context (default: the context's own first configuration).
    #[arg(long)]
    pub against: Option<PathBuf>,
    /// Untimed runs after the output check, before timing.
    #[arg(long, default_value_t = 1)]
    pub warmup: usize,
    /// Timed runs per configuration; the median is its time.
    #[arg(long, default_value_t = 7)]
    pub reps: usize,
    /// Copies of the inputs rotated between timed runs.
    #[arg(long, default_value_t = 2)]
    pub input_sets: usize,
    #[command(flatten)]
    pub cache: CacheArgs,
    /// Seconds one configuration may run before it is killed and judged timed-out.
    #[arg(long, default_value_t = 60.0)]
    pub timeout: f64,
    /// Prune variants whose kernels spill registers.
    #[arg(long)]
    pub prune_spills: bool,
    /// Time without checking outputs.
    #[arg(long)]
    pub no_validate: bool,
    /// Measure everything again and keep no results cache.
    #[arg(long)]
    pub no_cache: bool,
    /// Where the results cache and references are kept (default: $PEAK_CACHE_DIR, else ~/.cache/peak).
    #[arg(long)]
    pub cache_dir: Option<PathBuf>,
    /// Write the top configurations to this JSON file.
    #[arg(long, value_name = "FILE")]
    pub top_out: Option<PathBuf>,
    /// Evaluate these configurations first (a file written by --top-out).
    #[arg(long, value_name = "FILE")]
    pub start_from: Option<PathBuf>,
    #[command(flatten)]
    pub set: SetArgs,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ProfileArgs {
    /// The context folder (holding peak.toml); the first configuration left by --set is profiled.
    pub context: PathBuf,
    #[command(flatten)]
    pub set: SetArgs,
    /// Metrics to collect instead of the headline ones (comma-separated ncu metric names).
    #[arg(long)]
    pub metrics: Option<String>,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct WorkerArgs {
    /// The backend to serve: opencl, cuda, hip, hlsl.
    #[arg(long)]
    pub backend: String,
    /// Serve compile checks only: CUDA and HIP through NVRTC with no device, the others
    /// through the local driver.
    #[arg(long)]
    pub compile_only: bool,
    /// NVRTC's target for a compile-only CUDA or HIP worker (default sm_90a).
    #[arg(long, requires = "compile_only")]
    pub arch: Option<String>,
}

#[derive(Debug, Args)]
pub struct ExportArgs {
    /// A checkpoint of the workflow (tag, branch, id, HEAD, HEAD~N, root), or a context folder holding peak.toml.
    #[arg(default_value = "HEAD")]
    pub checkpoint: String,
    /// The folder to write; it must be missing or empty, unless --force.
    #[arg(long, value_name = "DIR")]
    pub to: PathBuf,
    #[command(flatten)]
    pub workflow: WorkflowArg,
    /// Set an input or tuning parameter (NAME=VALUE), over the checkpoint's performance record.
    #[command(flatten)]
    pub set: SetArgs,
    /// CUDA and HIP: the architecture whose limits the launch script sees (default: the one the checkpoint was measured on, else sm_90a).
    #[arg(long)]
    pub arch: Option<String>,
    /// Every shape the performance record tuned, each at its own best configuration: one kernel file, dispatch.h (a table from shape to configuration, with a fallback for other shapes) and a harness that runs every tuned shape through it (OpenCL: a program per configuration; CUDA and HIP: kernels.cuh, the kernel once per configuration in a namespace of its own).
    #[arg(long, conflicts_with = "set")]
    pub dispatch: bool,
    /// Write into a folder that is not empty.
    #[arg(long)]
    pub force: bool,
    #[arg(long)]
    pub json: bool,
}
