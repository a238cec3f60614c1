//! compute-sanitizer inside a workflow, as the paper validates: every candidate whose
//! outputs are right also runs under memcheck and racecheck on sampled execution
//! parameters, and a finding sends it back to the repair loop like a wrong output. The
//! tuned winner gets the same check before it is recorded (`crate::winner`).
//!
//! [`Sanitize`] is the setting (`--sanitize`); [`Plan`] is what runs on this machine, or
//! why nothing does. Only CUDA and HIP kernels can be sanitized. Where compute-sanitizer is
//! not installed the default skips it, saying so on stderr and in `validation.json`; an
//! explicit list of tools is an error instead, so a request is never dropped silently.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::Once;

use anyhow::{Result, anyhow, bail};
use indexmap::IndexMap;
use peak_eval::sanitizer::{Finding, SanitizerTool, SanitizerValidator};
use peak_eval::validate::{Outcome, Sample};
use peak_eval::{EvalError, Verdict, Workers};
use peak_spec::{Context, ExecParams, Language, Space};
use serde::{Deserialize, Serialize};

/// Which compute-sanitizer tools a workflow runs: `auto`, `none`, or `memcheck,racecheck`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum Sanitize {
    /// memcheck and racecheck on CUDA and HIP kernels, nothing elsewhere; skipped, with
    /// the reason recorded, where compute-sanitizer is not installed.
    #[default]
    Auto,
    /// Exactly these tools (an empty list turns the sanitizer off); an error where they
    /// cannot run.
    Tools(Vec<SanitizerTool>),
}

/// The tools `auto` runs: the paper's pair (out-of-bounds accesses, shared-memory races).
const AUTO_TOOLS: [SanitizerTool; 2] = [SanitizerTool::Memcheck, SanitizerTool::Racecheck];

impl fmt::Display for Sanitize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Sanitize::Auto => f.write_str("auto"),
            Sanitize::Tools(tools) if tools.is_empty() => f.write_str("none"),
            Sanitize::Tools(tools) => f.write_str(&tool_list(tools, ",")),
        }
    }
}

impl FromStr for Sanitize {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim() {
            "auto" => return Ok(Sanitize::Auto),
            "none" => return Ok(Sanitize::Tools(Vec::new())),
            _ => {}
        }
        let mut tools = Vec::new();
        for item in s.split(',').map(str::trim).filter(|t| !t.is_empty()) {
            let tool: SanitizerTool = item.parse().map_err(|e| format!("{e} (or `auto`, or `none`)"))?;
            if !tools.contains(&tool) {
                tools.push(tool);
            }
        }
        if tools.is_empty() {
            return Err("name sanitizer tools (memcheck,racecheck,...), `auto` or `none`".into());
        }
        Ok(Sanitize::Tools(tools))
    }
}

impl TryFrom<String> for Sanitize {
    type Error = String;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        s.parse()
    }
}

impl From<Sanitize> for String {
    fn from(s: Sanitize) -> String {
        s.to_string()
    }
}

/// What the sanitizer does on this machine for one kernel.
#[derive(Debug, Clone, PartialEq)]
pub enum Plan {
    /// `at`: input values (`--sanitize-at n=512`) tried before the space's smallest sizes.
    Run { tools: Vec<SanitizerTool>, program: PathBuf, at: IndexMap<String, i64> },
    /// Nothing runs; `reason` is what the records say ("none for opencl").
    Off { reason: String },
}

impl Plan {
    /// The plan for a kernel of `backend`, finding compute-sanitizer where it is needed.
    fn resolve(requested: &Sanitize, backend: Language) -> Result<Plan> {
        let plan = Plan::resolve_with(requested, backend, SanitizerValidator::locate)?;
        if let (Sanitize::Auto, Plan::Off { reason }) = (requested, &plan)
            && matches!(backend, Language::Cuda | Language::Hip)
        {
            // Once per process: a replay resolves a plan for every step.
            static WARNED: Once = Once::new();
            WARNED.call_once(|| {
                eprintln!(
                    "warning: sanitizer {reason}: {backend} candidates are validated without memcheck and racecheck (recorded in validation.json)\n\
                     hint: install the CUDA toolkit, which ships compute-sanitizer, or pass `--sanitize none` to turn the check off"
                );
            });
        }
        Ok(plan)
    }

    /// `Plan::resolve` with the binary's lookup given (tests fake a machine without it).
    pub fn resolve_with(requested: &Sanitize, backend: Language, locate: impl FnOnce() -> Result<PathBuf, EvalError>) -> Result<Plan> {
        let sanitizable = matches!(backend, Language::Cuda | Language::Hip);
        let tools = match requested {
            Sanitize::Auto if !sanitizable => return Ok(Plan::Off { reason: format!("none for {backend}") }),
            Sanitize::Auto => AUTO_TOOLS.to_vec(),
            Sanitize::Tools(tools) if tools.is_empty() => return Ok(Plan::Off { reason: "none (turned off)".into() }),
            Sanitize::Tools(_) if !sanitizable => bail!(
                "--sanitize {requested}: compute-sanitizer checks CUDA and HIP kernels only; this kernel is {backend}\n\
                 hint: use `--sanitize auto` (the default; nothing runs on {backend}) or `--sanitize none`"
            ),
            Sanitize::Tools(tools) => tools.clone(),
        };
        match locate() {
            Ok(program) => Ok(Plan::Run { tools, program, at: IndexMap::new() }),
            Err(_) if *requested == Sanitize::Auto => Ok(Plan::Off { reason: "skipped (compute-sanitizer not found)".into() }),
            Err(e) => Err(anyhow!("--sanitize {requested}: {e}; or pass `--sanitize auto` to skip the sanitizer where it is missing")),
        }
    }

    /// The plan for `ctx` from a command's settings: `requested` resolved for its backend
    /// (`Plan::resolve`), then placed at the `--sanitize-at` input values
    /// (`parse_inputs`). The one policy of every command that sanitizes: apply, init,
    /// retune, `peak validate` and the MCP tools.
    pub fn for_context(requested: &Sanitize, at: &[String], ctx: &Context) -> Result<Plan> {
        Ok(Plan::resolve(requested, ctx.backend())?.at(parse_inputs(at, ctx)?))
    }

    /// Run the sanitizer at these input values where a configuration is valid there (a
    /// size smaller than any the manifest lists: `n=512`), else at the smallest listed.
    fn at(self, inputs: IndexMap<String, i64>) -> Plan {
        match self {
            Plan::Run { tools, program, .. } => Plan::Run { tools, program, at: inputs },
            off => off,
        }
    }

    pub fn runs(&self) -> bool {
        matches!(self, Plan::Run { .. })
    }

    /// The sanitizer's half of a validation whose outputs came out `outputs`: run on
    /// `picked` (`Plan::validate`) only when every output was right, since sanitizing a
    /// wrong kernel tells nothing new, slowly; `None` when they were not.
    pub fn after_outputs(
        &self,
        outputs: Outcome,
        workers: &mut Workers,
        candidate: &Context,
        space: &Space,
        picked: &[Sample],
        count: usize,
    ) -> Result<Option<Record>> {
        match outputs {
            Outcome::Passed => self.validate(workers, candidate, space, picked, count).map(Some),
            Outcome::Failed | Outcome::Inconclusive => Ok(None),
        }
    }

    /// Run the sanitizer on a candidate whose outputs passed on `picked`: on up to `count`
    /// of those samples, moved to small inputs ([`samples`]), all at once.
    fn validate(&self, workers: &mut Workers, candidate: &Context, space: &Space, picked: &[Sample], count: usize) -> Result<Record> {
        let (tools, program, at) = match self {
            Plan::Off { reason } => {
                return Ok(Record { summary: reason.clone(), requested_samples: count, tools: Vec::new(), outcome: None, samples: Vec::new() });
            }
            Plan::Run { tools, program, at } => (tools, program, at),
        };
        let validator = validator(tools, program);
        let mut record = Record { summary: String::new(), requested_samples: count, tools: tools.clone(), outcome: None, samples: Vec::new() };
        let chosen = samples(candidate, space, picked, count, at);
        let verdicts = validator.check_all(workers, candidate, &chosen)?;
        for (sample, verdict) in chosen.into_iter().zip(verdicts) {
            record.samples.push(SanitizedSample { params: sample.params, data_seed: sample.data_seed, verdict });
        }
        let names = tool_list(tools, ", ");
        let ran = record.samples.len();
        let (outcome, summary) = match record.failure() {
            Some(verdict) => {
                let first = record.samples.iter().position(|s| s.verdict.is_failure()).map_or(ran, |i| i + 1);
                (Outcome::Failed, format!("{names}: {} (sample {first} of {ran})", verdict.summary()))
            }
            None if record.samples.iter().all(|s| s.verdict != Verdict::Passed) => {
                (Outcome::Inconclusive, format!("{names} on {ran} sample(s): inconclusive, every sample was pruned as invalid"))
            }
            None => (Outcome::Passed, format!("{names} on {ran} sample(s): clean")),
        };
        record.outcome = Some(outcome);
        record.summary = summary;
        Ok(record)
    }
}

/// A validator for the given tools that runs every sample it is shown (the callers choose
/// the samples).
pub(crate) fn validator(tools: &[SanitizerTool], program: &std::path::Path) -> SanitizerValidator {
    let mut validator = SanitizerValidator::new(tools.to_vec(), program.to_path_buf());
    validator.samples = usize::MAX;
    validator
}

pub(crate) fn tool_list(tools: &[SanitizerTool], separator: &str) -> String {
    tools.iter().map(|t| t.name()).collect::<Vec<_>>().join(separator)
}

/// What the sanitizer did to one candidate, as `validation.json`'s `sanitizer` records it.
#[derive(Debug, Clone, Serialize)]
pub struct Record {
    /// One line: `memcheck, racecheck on 4 sample(s): clean`, `none for opencl`,
    /// `skipped (compute-sanitizer not found)`.
    pub summary: String,
    /// Samples asked for (`--sanitize-samples`); fewer run when fewer were sampled, when
    /// samples meet at the same small point, or after a failure.
    pub requested_samples: usize,
    /// The tools that ran (none when skipped).
    pub tools: Vec<SanitizerTool>,
    /// `None` when nothing ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outcome: Option<Outcome>,
    pub samples: Vec<SanitizedSample>,
}

/// One sanitized execution parameter and what the tools said (findings with file:line).
#[derive(Debug, Clone, Serialize)]
pub struct SanitizedSample {
    pub params: ExecParams,
    pub data_seed: u64,
    pub verdict: Verdict,
}

impl Record {
    /// The first failing verdict: the candidate goes back to the repair loop with it.
    pub fn failure(&self) -> Option<Verdict> {
        self.samples.iter().map(|s| &s.verdict).find(|v| v.is_failure()).cloned()
    }
}

/// Where the sanitizer runs: the tuning configurations of the validation samples, in
/// sample order, each at the smallest input configuration it is valid for; at most `count`
/// of them, never more than were sampled, and samples that land on the same point run once.
///
/// Why the smallest inputs: a sanitized run is 10 to 1000 times slower than a plain one
/// (racecheck tracks every shared-memory access), while memory and race bugs mostly come
/// from the code path a tuning configuration selects (tile sizes, shared-memory layout),
/// which a small problem exercises as well as a large one. The output validator has
/// already covered the sampled sizes.
pub fn samples(ctx: &Context, space: &Space, picked: &[Sample], count: usize, at: &IndexMap<String, i64>) -> Vec<Sample> {
    let by_size = input_configurations(ctx, space, picked, at);
    let mut chosen: Vec<Sample> = Vec::new();
    for sample in picked {
        if chosen.len() >= count {
            break;
        }
        let params = smallest_valid(space, &by_size, &sample.params.tuning).unwrap_or_else(|| sample.params.clone());
        if chosen.iter().any(|c| c.params == params) {
            continue;
        }
        chosen.push(Sample { index: chosen.len(), params, data_seed: sample.data_seed });
    }
    chosen
}

/// `tuning` at the smallest of `by_size` that satisfies the constraints.
pub(crate) fn smallest_valid(space: &Space, by_size: &[IndexMap<String, i64>], tuning: &IndexMap<String, i64>) -> Option<ExecParams> {
    by_size.iter().map(|inputs| ExecParams { inputs: inputs.clone(), tuning: tuning.clone() }).find(|p| space.is_valid(p))
}

/// Input configurations to place sanitizer runs at, smallest first (by the elements of
/// every array together): every input configuration of the space (the named shapes, or
/// the combinations of the inputs' values) when there are few enough to list, else the
/// ones the validation samples used; `at` (the user's own small size) before them all.
pub(crate) fn input_configurations(ctx: &Context, space: &Space, picked: &[Sample], at: &IndexMap<String, i64>) -> Vec<IndexMap<String, i64>> {
    const MAX_LISTED: u128 = 4096;
    let mut configs: Vec<IndexMap<String, i64>> = if space.input_product_size() <= MAX_LISTED {
        space.input_configurations()
    } else {
        let mut seen = Vec::new();
        for s in picked {
            if !seen.contains(&s.params.inputs) {
                seen.push(s.params.inputs.clone());
            }
        }
        seen
    };
    let elements = |inputs: &IndexMap<String, i64>| -> i128 {
        let params = ExecParams { inputs: inputs.clone(), tuning: IndexMap::new() };
        // A size that does not evaluate sorts last.
        ctx.manifest.arrays.iter().map(|a| ctx.eval_input_expr(&a.size, &params).map_or(i128::MAX, i128::from)).fold(0, i128::saturating_add)
    };
    configs.sort_by_cached_key(elements);
    if let Some(smallest) = configs.first().filter(|_| !at.is_empty()) {
        let mut preferred = smallest.clone();
        preferred.extend(at.iter().map(|(k, v)| (k.clone(), *v)));
        configs.insert(0, preferred);
    }
    configs
}

/// `--sanitize-at NAME=VALUE` settings as input values, each name one of the manifest's
/// inputs.
pub fn parse_inputs(settings: &[String], ctx: &Context) -> Result<IndexMap<String, i64>> {
    let mut inputs = IndexMap::new();
    for setting in settings {
        let parsed = setting.split_once('=').and_then(|(name, value)| Some((name.trim(), value.trim().parse::<i64>().ok()?)));
        let Some((name, value)) = parsed else { bail!("--sanitize-at {setting}: expected NAME=INTEGER, e.g. n=512") };
        if !ctx.manifest.inputs.contains_key(name) {
            let known: Vec<&str> = ctx.manifest.inputs.keys().map(String::as_str).collect();
            bail!("--sanitize-at {setting}: `{name}` is not an input of this kernel (its inputs: {})", known.join(", "));
        }
        inputs.insert(name.to_string(), value);
    }
    Ok(inputs)
}

/// The repair prompt's text for sanitizer findings: each distinct finding once (kernel,
/// file and line), with the first thread's details (which thread, how far out of bounds),
/// and what to look for.
pub fn feedback(findings: &[Finding]) -> String {
    let mut seen: Vec<String> = Vec::new();
    let mut lines: Vec<String> = Vec::new();
    for f in findings {
        let headline = f.headline();
        if seen.contains(&headline) {
            continue;
        }
        let details = f.details.iter().take(3).cloned().collect::<Vec<_>>().join("; ");
        lines.push(if details.is_empty() { format!("- {headline}") } else { format!("- {headline} ({details})") });
        seen.push(headline);
    }
    format!(
        "The outputs are right, but NVIDIA compute-sanitizer reported:\n{}\n\
         memcheck reports accesses outside an allocation (check bounds and the last partial tile); \
         racecheck reports shared-memory hazards (a __syncthreads() missing between writes and reads of the same tile).",
        lines.join("\n")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_parse_and_print() {
        assert_eq!("auto".parse::<Sanitize>(), Ok(Sanitize::Auto));
        assert_eq!("none".parse::<Sanitize>(), Ok(Sanitize::Tools(vec![])));
        let both = Sanitize::Tools(vec![SanitizerTool::Memcheck, SanitizerTool::Racecheck]);
        assert_eq!(" memcheck, racecheck,memcheck ".parse::<Sanitize>(), Ok(both.clone()));
        for s in [Sanitize::Auto, Sanitize::Tools(vec![]), both] {
            assert_eq!(s.to_string().parse::<Sanitize>(), Ok(s.clone()));
            let json = serde_json::to_string(&s).unwrap();
            assert_eq!(serde_json::from_str::<Sanitize>(&json).unwrap(), s);
        }
        assert!("asan".parse::<Sanitize>().unwrap_err().contains("auto"));
        assert!("".parse::<Sanitize>().is_err());
        assert!(",".parse::<Sanitize>().is_err());
    }

    fn found() -> Result<PathBuf, EvalError> {
        Ok(PathBuf::from("/opt/cuda/bin/compute-sanitizer"))
    }

    fn missing() -> Result<PathBuf, EvalError> {
        Err(EvalError::Tool { tool: "compute-sanitizer".into(), message: "not found on PATH".into(), hint: "install the CUDA toolkit".into() })
    }

    #[test]
    fn auto_runs_memcheck_and_racecheck_on_cuda_and_hip_only() {
        for backend in [Language::Cuda, Language::Hip] {
            let plan = Plan::resolve_with(&Sanitize::Auto, backend, found).unwrap();
            assert_eq!(plan, Plan::Run { tools: AUTO_TOOLS.to_vec(), program: found().unwrap(), at: IndexMap::new() });
        }
        for backend in [Language::Opencl, Language::Hlsl] {
            let plan = Plan::resolve_with(&Sanitize::Auto, backend, || panic!("not looked for")).unwrap();
            assert_eq!(plan, Plan::Off { reason: format!("none for {backend}") });
        }
        let off = Plan::resolve_with(&Sanitize::Tools(vec![]), Language::Cuda, || panic!("not looked for")).unwrap();
        assert_eq!(off, Plan::Off { reason: "none (turned off)".into() });
    }

    #[test]
    fn a_missing_binary_is_skipped_by_auto_and_an_error_when_asked_for() {
        let plan = Plan::resolve_with(&Sanitize::Auto, Language::Cuda, missing).unwrap();
        assert_eq!(plan, Plan::Off { reason: "skipped (compute-sanitizer not found)".into() });

        let err = Plan::resolve_with(&Sanitize::Tools(vec![SanitizerTool::Memcheck]), Language::Cuda, missing).unwrap_err().to_string();
        assert!(err.starts_with("--sanitize memcheck: compute-sanitizer: not found"), "{err}");
        assert!(err.contains("hint: install the CUDA toolkit") && err.contains("--sanitize auto"), "{err}");

        let err = Plan::resolve_with(&Sanitize::Tools(vec![SanitizerTool::Racecheck]), Language::Opencl, found).unwrap_err().to_string();
        assert!(err.contains("CUDA and HIP kernels only; this kernel is opencl") && err.contains("hint:"), "{err}");
    }

    /// A context whose tuning constraint ties the block to the problem size.
    fn context(dir: &std::path::Path) -> Context {
        std::fs::write(
            dir.join("peak.toml"),
            r#"
[kernel]
name = "scale"
backend = "cuda"
source = "kernel.cu"

[inputs]
n = { values = [1024, 64, 256] }
batch = { values = [1, 4] }

[[arrays]]
name = "X"
type = "f32"
size = "n * batch"
init = "random"
output = true

[tuning]
BLOCK = { pow2 = [16, 512] }

[constraints]
tuning = ["BLOCK <= n"]
"#,
        )
        .unwrap();
        std::fs::write(dir.join("kernel.cu"), "// @peak macros\n// @peak device\nextern \"C\" __global__ void scale(float* X, int n, int batch) {}\n// @peak host\nlaunch(\"scale\", 1, BLOCK, 0, X, n, batch);\n").unwrap();
        Context::load(dir).unwrap()
    }

    fn sample(index: usize, n: i64, batch: i64, block: i64) -> Sample {
        let params = ExecParams {
            inputs: [("n".to_string(), n), ("batch".to_string(), batch)].into_iter().collect(),
            tuning: [("BLOCK".to_string(), block)].into_iter().collect(),
        };
        Sample { index, params, data_seed: 100 + index as u64 }
    }

    #[test]
    fn samples_keep_the_tuning_and_move_to_the_smallest_valid_inputs() {
        let tmp = tempfile::tempdir().unwrap();
        let ctx = context(tmp.path());
        let space = ctx.space();
        let picked = [sample(0, 1024, 4, 32), sample(1, 256, 1, 128), sample(2, 1024, 1, 32), sample(3, 1024, 4, 512), sample(4, 256, 4, 16)];

        let chosen = samples(&ctx, &space, &picked, 16, &IndexMap::new());
        let at: Vec<(i64, i64, i64)> = chosen.iter().map(|s| (s.params.inputs["n"], s.params.inputs["batch"], s.params.tuning["BLOCK"])).collect();
        // BLOCK=32 twice lands on one point; BLOCK=128 and 512 need a larger n to be valid.
        assert_eq!(at, [(64, 1, 32), (256, 1, 128), (1024, 1, 512), (64, 1, 16)]);
        assert_eq!(chosen.iter().map(|s| s.index).collect::<Vec<_>>(), [0, 1, 2, 3]);
        assert_eq!(chosen[1].data_seed, 101, "a sample keeps its data seed");
        assert!(chosen.iter().all(|s| space.is_valid(&s.params)));

        // The count caps the runs, and can never exceed the samples.
        assert_eq!(samples(&ctx, &space, &picked, 2, &IndexMap::new()).len(), 2);
        assert_eq!(samples(&ctx, &space, &picked[..1], 16, &IndexMap::new()).len(), 1);
    }

    #[test]
    fn input_configurations_are_ordered_by_array_elements() {
        let tmp = tempfile::tempdir().unwrap();
        let ctx = context(tmp.path());
        let configs = input_configurations(&ctx, &ctx.space(), &[], &IndexMap::new());
        let sizes: Vec<i64> = configs.iter().map(|c| c["n"] * c["batch"]).collect();
        assert_eq!(configs.len(), 6);
        assert!(sizes.windows(2).all(|w| w[0] <= w[1]), "{sizes:?}");
        assert_eq!((configs[0]["n"], configs[0]["batch"]), (64, 1));
    }

    #[test]
    fn a_size_of_ones_own_comes_first_where_the_configuration_is_valid_there() {
        let tmp = tempfile::tempdir().unwrap();
        let ctx = context(tmp.path());
        let space = ctx.space();
        // n = 32 is smaller than any listed size; BLOCK = 64 is not valid there.
        let at = parse_inputs(&["n=32".into()], &ctx).unwrap();
        let picked = [sample(0, 1024, 4, 16), sample(1, 1024, 4, 64)];
        let chosen: Vec<(i64, i64)> = samples(&ctx, &space, &picked, 16, &at).iter().map(|s| (s.params.inputs["n"], s.params.inputs["batch"])).collect();
        assert_eq!(chosen, [(32, 1), (64, 1)]);

        for (bad, says) in
            [("n", "expected NAME=INTEGER"), ("n=big", "expected NAME=INTEGER"), ("m=4", "`m` is not an input of this kernel (its inputs: batch, n)")]
        {
            let err = parse_inputs(&[bad.into()], &ctx).unwrap_err().to_string();
            assert!(err.contains(&format!("--sanitize-at {bad}")) && err.contains(says), "{err}");
        }
    }

    #[test]
    fn a_commands_settings_resolve_and_place_the_plan_in_one_step() {
        let tmp = tempfile::tempdir().unwrap();
        let ctx = context(tmp.path());
        // Turned off: nothing runs, but a bad size is refused all the same, as apply does.
        let off = Plan::for_context(&Sanitize::Tools(vec![]), &["n=32".into()], &ctx).unwrap();
        assert_eq!(off, Plan::Off { reason: "none (turned off)".into() });
        let err = Plan::for_context(&Sanitize::Tools(vec![]), &["m=4".into()], &ctx).unwrap_err().to_string();
        assert!(err.contains("--sanitize-at m=4: `m` is not an input of this kernel"), "{err}");
    }

    #[test]
    fn feedback_names_each_finding_once_with_its_line() {
        let finding = Finding {
            tool: "memcheck".into(),
            severity: "error".into(),
            error: "Invalid __global__ write of size 4 bytes".into(),
            kernel: Some("matmul".into()),
            file: Some("/tmp/candidate/kernel.cu".into()),
            line: Some(12),
            details: vec!["by thread (63,0,0) in block (15,0,0)".into(), "Address 0x7f00 is out of bounds".into()],
        };
        let other_thread = Finding { details: vec!["by thread (62,0,0) in block (15,0,0)".into()], ..finding.clone() };
        let text = feedback(&[finding, other_thread]);
        assert_eq!(text.matches("kernel.cu:12").count(), 1, "{text}");
        assert!(
            text.contains("memcheck: Invalid __global__ write of size 4 bytes in `matmul` at kernel.cu:12 (by thread (63,0,0) in block (15,0,0); Address 0x7f00 is out of bounds)"),
            "{text}"
        );
    }
}
