//! Tool parameters. Their doc comments are the JSON schema descriptions the client's
//! model reads, so they say what a value means, its default, and an example.
//!
//! Optional values are `Option`s that may be left out; their schema names the plain type
//! (`#[schemars(with = ...)]`) rather than a `[T, "null"]` union, which clients that map
//! schemas onto a single-type dialect (Gemini's function declarations) reject; and no
//! `"default": null` (`skip_serializing_if`, which schemars honours for defaults).

use schemars::JsonSchema;
use serde::Deserialize;

#[derive(Debug, Deserialize, JsonSchema)]
pub struct ListContextsParams {
    /// Folder to search for kernel contexts (folders holding a `peak.toml`), up to four
    /// levels deep. Default: the server's working directory. Example: "examples".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String")]
    pub dir: Option<String>,
}

/// Which kernel context a tool looks at: a context folder, or a checkpoint of a workflow.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct TargetParams {
    /// Path of a kernel context folder (holding `peak.toml`). Give this or `workflow`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String")]
    pub context: Option<String>,
    /// Path of a workflow folder (made by `init_workflow`). Give this or `context`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String")]
    pub workflow: Option<String>,
    /// With `workflow`: a checkpoint id, tag, branch, `HEAD`, `HEAD~N` or `root`. Default: `HEAD`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String")]
    pub checkpoint: Option<String>,
}

/// Which execution parameters a tool runs, and the seed it draws with (shared by
/// `init_workflow`, `validate`, `tune` and the transformation tools).
#[derive(Debug, Deserialize, JsonSchema)]
pub struct SampleParams {
    /// Seed of what the tool draws at random: the sampled execution parameters, their
    /// inputs, the tuning search. Default 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "u64")]
    pub seed: Option<u64>,
    /// Restrict inputs or tuning parameters, as `NAME=VALUE` or `NAME=V1,V2`. Example: ["n=256"].
    #[serde(default)]
    pub set: Vec<String>,
}

/// Transformation files beyond the built-in library.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct LibraryParams {
    /// Extra folders of transformation files (`*.toml`), layered over the built-in library.
    #[serde(default)]
    pub library_dirs: Vec<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct ReadRegionParams {
    /// The region: `macros` (#defines and helpers), `device` (the kernel code) or `host`
    /// (the launch script that computes grid and block sizes and launches kernels).
    pub region: String,
    #[serde(flatten)]
    pub target: TargetParams,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct ListTransformationsParams {
    /// Only transformations that apply to this backend: `opencl`, `cuda`, `hip` or `hlsl`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String")]
    pub backend: Option<String>,
    #[serde(flatten)]
    pub library: LibraryParams,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct ShowTransformationParams {
    /// The transformation's name, e.g. `TB-Tiling` (case and punctuation are forgiven).
    pub name: String,
    #[serde(flatten)]
    pub library: LibraryParams,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct InitWorkflowParams {
    /// The workflow folder to create (it must not exist or be empty).
    pub workflow: String,
    /// The initial kernel context folder; its outputs are the reference every later
    /// checkpoint is validated against.
    pub context: String,
    /// Tune the root checkpoint so later checkpoints report a speedup over it. Default true.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "bool")]
    pub measure: Option<bool>,
    /// Tuning budget: configurations to evaluate per input configuration. Default: all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "usize")]
    pub budget: Option<usize>,
    #[serde(flatten)]
    pub sampling: SampleParams,
    #[serde(flatten)]
    pub sanitizer: SanitizerParams,
    #[serde(flatten)]
    pub placement: PlacementParams,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct WorkflowParams {
    /// Path of the workflow folder.
    pub workflow: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct ReportParams {
    /// Workflow folders or bundle files (`peak bundle`) to report on; each branch is a series.
    pub workflows: Vec<String>,
    /// Also write one self-contained HTML page (figures as inline SVG) to this file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String")]
    pub html: Option<String>,
}

/// Where this call's workers run, as `peak`'s `--worker-launcher` and `--devices` give it
/// (shared by every tool that validates, tunes or profiles). Left out: the server's own
/// (its flags, `$PEAK_WORKER_LAUNCHER` and `$PEAK_DEVICES`, the config file).
#[derive(Debug, Default, Deserialize, JsonSchema)]
pub struct PlacementParams {
    /// Start workers under this command line, e.g. `srun --quiet --ntasks=1 --gres=gpu:1`
    /// or `ssh gpu-box`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String")]
    pub worker_launcher: Option<String>,
    /// Tune on these GPUs, one worker each: `0,1`, or `all`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String")]
    pub devices: Option<String>,
}

/// How far a tuning search goes (shared by `tune`, `retune` and the transformation tools;
/// each tool's description gives its default budget).
#[derive(Debug, Deserialize, JsonSchema)]
pub struct SearchLimits {
    /// Configurations to evaluate per input configuration (default: see the tool).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "usize")]
    pub budget: Option<usize>,
    /// Stop proposing configurations after this many seconds per input configuration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "f64")]
    pub time_limit_s: Option<f64>,
}

/// compute-sanitizer settings, as `peak apply`'s flags (`--sanitize`, `--sanitize-samples`,
/// `--no-sanitize-winner`, `--sanitize-at`) give them (shared by the transformation tools,
/// `init_workflow`, `retune` and `validate`; each field says which of them use it).
#[derive(Debug, Deserialize, JsonSchema)]
pub struct SanitizerParams {
    /// compute-sanitizer tools run on the validation samples whose outputs are right and on
    /// the tuned winner: `auto` (memcheck,racecheck on CUDA and HIP, nothing elsewhere;
    /// skipped, saying so, where compute-sanitizer is not installed), `none`, or a
    /// comma-separated list of memcheck, racecheck, initcheck, synccheck (an error where it
    /// cannot run). Default `auto`. Example: "memcheck,racecheck".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String")]
    pub sanitize: Option<String>,
    /// How many of the validation samples whose outputs are right the sanitizer runs on
    /// (at most `samples`; sanitized runs are slow), each at the smallest input size it is
    /// valid for. Default 16. Not for `retune` or `init_workflow`, which validate no samples.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "usize")]
    pub sanitize_samples: Option<usize>,
    /// Sanitize the tuned winner before recording it, falling back along the top-K when it
    /// has a finding; false records it unchecked. Default true. Not for `validate`, which
    /// tunes nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "bool")]
    pub sanitize_winner: Option<bool>,
    /// Input sizes to run the sanitizer at where a configuration is valid there, as
    /// `NAME=INTEGER` over the kernel's inputs, smaller than the manifest's sizes
    /// (sanitized runs are 10 to 1000 times slower). Default: the smallest listed sizes.
    /// Example: ["n=512"].
    #[serde(default)]
    pub sanitize_at: Vec<String>,
}

/// How a transformation is carried out (shared by `start_transformation` and `apply_transformation`).
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ApplyParams {
    /// Repair tries after the first, for an unusable reply, a compile error or a wrong output. Default 3.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "u32")]
    pub retries: Option<u32>,
    /// Execution parameters sampled to validate the result against the root. Default 16.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "usize")]
    pub samples: Option<usize>,
    #[serde(flatten)]
    pub sampling: SampleParams,
    #[serde(flatten)]
    pub limits: SearchLimits,
    #[serde(flatten)]
    pub library: LibraryParams,
    #[serde(flatten)]
    pub sanitizer: SanitizerParams,
    /// Where no GPU is: compile-check the result on the sampled execution parameters
    /// instead of validating and tuning it, and record the checkpoint as `deferred`;
    /// `peak replay` validates and tunes it where the GPU is. Default false.
    #[serde(default)]
    pub defer: bool,
    /// The GPU's architecture for a deferred CUDA or HIP transformation, as NVRTC names
    /// it. Default `sm_90a`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String")]
    pub arch: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct StartTransformationParams {
    /// Path of the workflow folder. The transformation starts from its current checkpoint.
    pub workflow: String,
    /// The transformation's name, from `list_transformations`. Example: `Refactor`.
    pub transformation: String,
    #[serde(flatten)]
    pub settings: ApplyParams,
    #[serde(flatten)]
    pub placement: PlacementParams,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct ApplyTransformationParams {
    /// Path of the workflow folder. The transformation starts from its current checkpoint.
    pub workflow: String,
    /// The transformation's name, from `list_transformations`. Example: `TB-Tiling`.
    pub transformation: String,
    /// The LLM that writes the regions, as `provider:model`: `openai:gpt-4.1`,
    /// `anthropic:claude-sonnet-4-5`, `openrouter:...`, `ollama:qwen2.5-coder:7b`, or
    /// `openai-compat:http://host:port/v1:MODEL`. Keys come from the server's environment
    /// (OPENAI_API_KEY, ANTHROPIC_API_KEY, ...).
    pub executor: String,
    #[serde(flatten)]
    pub settings: ApplyParams,
    #[serde(flatten)]
    pub placement: PlacementParams,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct AutoParams {
    /// Path of the workflow folder. The search starts from its current checkpoint.
    pub workflow: String,
    /// The LLM that writes the regions of each chosen transformation, as `provider:model`
    /// (see apply_transformation).
    pub executor: String,
    /// The LLM that chooses the transformations, as `provider:model`. Default: the executor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String")]
    pub planner: Option<String>,
    /// Transformations to apply at most. Default 10.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "usize")]
    pub steps: Option<usize>,
    /// Start no new step after this many seconds (a step in progress finishes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "f64")]
    pub run_time_s: Option<f64>,
    /// A checkpoint slower than the best by more than this percentage is backtracked. Default 5.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "f64")]
    pub regression_percent: Option<f64>,
    /// Unusable planner replies in a row before the run gives up. Default 2.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "u32")]
    pub plan_retries: Option<u32>,
    /// How each transformation is applied, as for apply_transformation.
    #[serde(flatten)]
    pub settings: ApplyParams,
    #[serde(flatten)]
    pub placement: PlacementParams,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct StudyParams {
    /// Path of the workflow folder. Its HEAD, branch and working folder are left as they were.
    pub workflow: String,
    /// The checkpoint every run starts from. Default: the current one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String")]
    pub from: Option<String>,
    /// Transformations to apply, from `list_transformations`. Example: ["TB-Tiling"].
    pub transformations: Vec<String>,
    /// LLM executors, each `provider:model` (see apply_transformation). Example: ["openai:gpt-4.1"].
    pub executors: Vec<String>,
    /// Runs of each transformation with each executor. Default 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "usize")]
    pub repeat: Option<usize>,
    /// How each run applies, as for apply_transformation.
    #[serde(flatten)]
    pub settings: ApplyParams,
    #[serde(flatten)]
    pub placement: PlacementParams,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct RetuneParams {
    /// Path of the workflow folder. Its current checkpoint is tuned again.
    pub workflow: String,
    #[serde(flatten)]
    pub limits: SearchLimits,
    #[serde(flatten)]
    pub sampling: SampleParams,
    #[serde(flatten)]
    pub sanitizer: SanitizerParams,
    #[serde(flatten)]
    pub placement: PlacementParams,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct SubmitRegionParams {
    /// Path of the workflow folder with a transformation waiting for a region.
    pub workflow: String,
    /// The complete new text of the region the pending pass asked for: either the bare
    /// region, or a reply holding exactly one fenced code block with it.
    pub text: String,
    #[serde(flatten)]
    pub placement: PlacementParams,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct ValidateParams {
    #[serde(flatten)]
    pub target: TargetParams,
    /// Reference context folder whose outputs count as right. Default with `workflow`:
    /// the workflow's root checkpoint (its initial kernel). Required with `context`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String")]
    pub against: Option<String>,
    /// How many execution parameters to sample. Default 16.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "usize")]
    pub samples: Option<usize>,
    #[serde(flatten)]
    pub sampling: SampleParams,
    #[serde(flatten)]
    pub sanitizer: SanitizerParams,
    #[serde(flatten)]
    pub placement: PlacementParams,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct TuneParams {
    #[serde(flatten)]
    pub target: TargetParams,
    /// `exhaustive`, `random`, or `auto` (an ensemble autotuner needing far fewer runs). Default `auto`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String")]
    pub strategy: Option<String>,
    #[serde(flatten)]
    pub limits: SearchLimits,
    /// How many of the fastest configurations to report. Default 5.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "usize")]
    pub top: Option<usize>,
    #[serde(flatten)]
    pub sampling: SampleParams,
    #[serde(flatten)]
    pub placement: PlacementParams,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct ProfileParams {
    #[serde(flatten)]
    pub target: TargetParams,
    /// Fix the configuration to profile, as `NAME=VALUE`; the first valid one left is
    /// profiled (with `workflow`, the checkpoint's best configuration when it fits).
    #[serde(default)]
    pub set: Vec<String>,
    /// Nsight Compute metric names to collect instead of the headline ones.
    #[serde(default)]
    pub metrics: Vec<String>,
    #[serde(flatten)]
    pub placement: PlacementParams,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct ShowCheckpointParams {
    /// Path of the workflow folder.
    pub workflow: String,
    /// A checkpoint id, tag, branch, `HEAD`, `HEAD~N` or `root`. Default `HEAD`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String")]
    pub checkpoint: Option<String>,
    /// Include the transcript (prompts and replies that produced it). Default false.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "bool")]
    pub transcript: Option<bool>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct DiffParams {
    /// Path of the workflow folder.
    pub workflow: String,
    /// The older checkpoint (id, tag, branch, `HEAD~N`, `root`).
    pub a: String,
    /// The newer checkpoint. Default `HEAD`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String")]
    pub b: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct TagParams {
    /// Path of the workflow folder.
    pub workflow: String,
    /// The tag name, e.g. `tiled`.
    pub name: String,
    /// The checkpoint to name. Default `HEAD`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String")]
    pub checkpoint: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct BranchParams {
    /// Path of the workflow folder.
    pub workflow: String,
    /// The branch name, e.g. `try-split-k`.
    pub name: String,
    /// The checkpoint the branch starts at. Default `HEAD`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String")]
    pub from: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct CheckoutParams {
    /// Path of the workflow folder.
    pub workflow: String,
    /// A branch (new checkpoints go on it), or a tag or id (read-only: branch from it first).
    pub target: String,
    /// Discard uncommitted edits in the workflow's `context/` folder. Default false.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "bool")]
    pub force: Option<bool>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct CompareParams {
    /// Path of the workflow folder.
    pub workflow: String,
    /// The first checkpoint (the baseline).
    pub a: String,
    /// The second checkpoint.
    pub b: String,
    /// Restrict inputs, as `NAME=VALUE`. Example: ["n=512"].
    #[serde(default)]
    pub set: Vec<String>,
    /// Timed repetitions of each side, interleaved. Default 20.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "usize")]
    pub reps: Option<usize>,
    #[serde(flatten)]
    pub placement: PlacementParams,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct ImportKernelParams {
    /// The kernel source file to bring in (.cu, .hip or .cl).
    pub file: String,
    /// The context folder to create (it must not exist or be empty).
    pub context: String,
    /// The kernel to import, when the file holds several.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String")]
    pub kernel: Option<String>,
    /// Each array parameter's length, as `ARRAY=EXPR` over the scalar inputs. Example:
    /// ["x=rows * cols", "y=rows * cols"].
    pub sizes: Vec<String>,
    /// The values each integer parameter is run at, as `NAME=V1,V2`. Example:
    /// ["rows=4096", "cols=1024,4096"].
    #[serde(default)]
    pub inputs: Vec<String>,
    /// The value of each float parameter, written into the launch, as `NAME=VALUE`.
    /// Example: ["eps=1e-5"].
    #[serde(default)]
    pub scalars: Vec<String>,
    /// The arrays holding the kernel's result. Default: every array the kernel writes.
    #[serde(default)]
    pub outputs: Vec<String>,
    /// The kind of kernel (matmul, softmax, reduction, stencil, transpose, ...); transformations written for another kind are refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String")]
    pub domain: Option<String>,
    /// What the kernel computes, in a sentence; every prompt describes the kernel with it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String")]
    pub description: Option<String>,
    /// Values of integer parameters to check correctness at, apart from `inputs` (small odd
    /// sizes), as `NAME=V1,V2`. Example: ["rows=7"].
    #[serde(default)]
    pub validation: Vec<String>,
    /// The library call computing the same outputs, a PyTorch expression, for benchmarks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String")]
    pub library: Option<String>,
}
