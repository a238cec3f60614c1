//! The MCP server: one tool per library operation.
//!
//! Tools take paths (a context folder, a workflow folder) as the CLI does; relative paths
//! are resolved against the server's working directory, which MCP clients set to the
//! project they run in. Every tool answers with a text a model can read on its own, and
//! with the same data as JSON in `structuredContent` for programs.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, Result, anyhow, bail};
use peak_apply::auto::AutoOptions;
use peak_apply::study::StudyOptions;
use peak_apply::{ApplyOptions, InitOptions, Plan, SanitizerRecord, TuningSettings};
use peak_eval::profile::{ProfileOptions, profile};
use peak_eval::validate::{Outcome as Validation, samples};
use peak_eval::{OutputValidator, ReferenceStore, StrategyKind, TuneOptions, TuneSetup, ValidationReport, Validator, default_cache_dir, tune_context};
use peak_spec::{Context, Region};
use peak_transform::Library;
use peak_workflow::Workflow;
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, Implementation, RequestMetaObject, ServerCapabilities, ServerConfig};
use rmcp::{ErrorData, Peer, RoleServer, ServerHandler, ServiceExt, tool, tool_handler, tool_router};
use serde::Serialize;
use serde_json::{Value, json};

use crate::answer::{Answer, error_result};
use crate::params::*;
use crate::progress::Progress;
use crate::render;
use crate::resolve::{Reference, Sanitizes, Target, apply_options, bounded_count, library, restricted, sanitizer, tuning};
use crate::settings::Settings;

const INSTRUCTIONS: &str = "\
peak optimises GPU kernels step by step with natural-language transformations, checking \
every step against the initial kernel's outputs and autotuning it. A kernel context is a \
folder with peak.toml (inputs, arrays, tuning parameters) and one source file in three \
regions: macros, device (kernel code) and host (a small launch script). A workflow is a \
folder (a git repository) of checkpoints.\n\
A session: list_contexts -> init_workflow (workflow folder + context) -> \
list_transformations -> start_transformation (you write each region it asks for and call \
submit_region; a compile error or a wrong output comes back as an error with a repair \
prompt: fix the region and submit again) -> log / diff / show_checkpoint. \
apply_transformation does the same with an LLM named by provider:model. validate, tune, \
profile and compare measure any context or checkpoint; tag, branch and checkout manage \
lines of work (backtrack by branching from a good checkpoint and checking the branch out).";

/// The peak MCP server.
#[derive(Clone)]
pub struct PeakServer {
    settings: Arc<Settings>,
    /// The tools with their schemas made to conform (`schema::conform`); the code
    /// `#[tool_handler]` generates lists and calls through it.
    tool_router: ToolRouter<PeakServer>,
}

/// Serve MCP on stdin and stdout until the client closes them, on a runtime of its own:
/// what `peak mcp` runs.
#[cfg(unix)]
pub fn run_stdio(settings: Settings) -> Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().context("starting the async runtime")?;
    runtime.block_on(serve_stdio(settings))
}

/// Serve MCP on the process's stdin and stdout until the client closes them.
#[cfg(unix)]
pub async fn serve_stdio(settings: Settings) -> Result<()> {
    let stdout = private_stdout()?;
    let service = PeakServer::new(settings).serve((tokio::io::stdin(), stdout)).await.context("starting the MCP session")?;
    service.waiting().await.context("serving MCP")?;
    Ok(())
}

/// Move the real stdout to a private descriptor for the protocol and point descriptor 1
/// at stderr, so that nothing printed by a library, a driver or a kernel reaches the
/// client as a broken message.
#[cfg(unix)]
fn private_stdout() -> Result<tokio::fs::File> {
    use std::io::Write;
    use std::os::fd::FromRawFd;
    std::io::stdout().flush()?;
    // SAFETY: plain descriptor calls; the new descriptor is owned by the File below.
    let private = unsafe { libc::fcntl(1, libc::F_DUPFD_CLOEXEC, 3) };
    if private < 0 {
        return Err(std::io::Error::last_os_error()).context("duplicating stdout");
    }
    // SAFETY: as above; descriptors 1 and 2 stay open for the life of the process.
    if unsafe { libc::dup2(2, 1) } < 0 {
        return Err(std::io::Error::last_os_error()).context("pointing stdout at stderr");
    }
    // SAFETY: `private` is a fresh descriptor nothing else owns.
    Ok(tokio::fs::File::from_std(unsafe { std::fs::File::from_raw_fd(private) }))
}

// ---------------------------------------------------------------------------------------
// Results.
// ---------------------------------------------------------------------------------------

type ToolResult = Result<CallToolResult, ErrorData>;

/// The `validate` tool's data: the verdicts, and what compute-sanitizer did after them
/// (left out when the outputs did not pass, so it was not asked), as `peak validate --json`.
#[derive(Serialize)]
struct Validated<'a> {
    #[serde(flatten)]
    report: &'a ValidationReport,
    sanitizer: Option<&'a SanitizerRecord>,
}

impl PeakServer {
    pub fn new(settings: Settings) -> PeakServer {
        let mut tool_router = PeakServer::tool_router();
        crate::schema::conform(&mut tool_router);
        PeakServer { settings: Arc::new(settings), tool_router }
    }

    /// Run `job` on a blocking thread with a progress sender for this request.
    async fn run(
        &self,
        meta: &RequestMetaObject,
        peer: &Peer<RoleServer>,
        job: impl FnOnce(&Settings, &Progress) -> Result<Answer> + Send + 'static,
    ) -> ToolResult {
        let (progress, forward) = Progress::start(meta.get_progress_token(), peer.clone());
        let settings = Arc::clone(&self.settings);
        let outcome = tokio::task::spawn_blocking(move || {
            let answer = job(&settings, &progress);
            drop(progress);
            answer
        })
        .await;
        if let Some(forward) = forward {
            let _ = forward.await;
        }
        match outcome {
            Ok(Ok(answer)) => Ok(answer.into_result()),
            Ok(Err(err)) => Ok(error_result(&err)),
            Err(panic) => Err(ErrorData::internal_error(format!("the tool stopped unexpectedly: {panic}"), None)),
        }
    }

    /// Run a quick job that reports no progress.
    async fn quick(&self, job: impl FnOnce(&Settings) -> Result<Answer> + Send + 'static) -> ToolResult {
        let settings = Arc::clone(&self.settings);
        match tokio::task::spawn_blocking(move || job(&settings)).await {
            Ok(Ok(answer)) => Ok(answer.into_result()),
            Ok(Err(err)) => Ok(error_result(&err)),
            Err(panic) => Err(ErrorData::internal_error(format!("the tool stopped unexpectedly: {panic}"), None)),
        }
    }
}

// ---------------------------------------------------------------------------------------
// Tools.
// ---------------------------------------------------------------------------------------

#[tool_router]
impl PeakServer {
    /// List the kernel contexts (folders holding a peak.toml) under a folder: name,
    /// backend, path, inputs and tuning parameters. Start here to find a kernel to optimise.
    #[tool(annotations(read_only_hint = true))]
    async fn list_contexts(&self, Parameters(p): Parameters<ListContextsParams>) -> ToolResult {
        self.quick(move |_| {
            let dir = PathBuf::from(p.dir.unwrap_or_else(|| ".".into()));
            let found = render::find_contexts(&dir)?;
            Ok(Answer::ok(render::contexts_text(&dir, &found), json!({ "dir": dir, "contexts": found })))
        })
        .await
    }

    /// Show one kernel context in full: its peak.toml (inputs, arrays, tuning parameters,
    /// constraints) and its source file with the three regions marked. Give a context
    /// folder, or a workflow and a checkpoint.
    #[tool(annotations(read_only_hint = true))]
    async fn show_context(&self, Parameters(p): Parameters<TargetParams>) -> ToolResult {
        self.quick(move |_| {
            let target = Target::resolve(&p)?;
            let manifest = std::fs::read_to_string(target.ctx.manifest_path()).with_context(|| format!("reading {}", target.ctx.manifest_path().display()))?;
            let source = target.ctx.regions.render();
            let (count, more) = bounded_count(&target.ctx.space());
            let text = format!(
                "{} ({} backend), {}\n\n--- peak.toml\n{}\n--- {}\n{}",
                target.ctx.name(),
                target.ctx.backend(),
                target.label,
                manifest.trim_end(),
                target.ctx.manifest.kernel.source,
                source
            );
            let data = json!({
                "name": target.ctx.name(),
                "backend": target.ctx.backend().name(),
                "target": target.label,
                "manifest": manifest,
                "source_file": target.ctx.manifest.kernel.source,
                "regions": Region::ALL.iter().map(|r| (r.name(), target.ctx.region(*r))).collect::<std::collections::BTreeMap<_, _>>(),
                "valid_execution_parameters": count,
                "more_than_counted": more,
            });
            Ok(Answer::ok(text, data))
        })
        .await
    }

    /// Read the current text of one region (macros, device or host) of a context folder or
    /// a workflow checkpoint: the text a transformation pass rewrites.
    #[tool(annotations(read_only_hint = true))]
    async fn read_region(&self, Parameters(p): Parameters<ReadRegionParams>) -> ToolResult {
        self.quick(move |_| {
            let region: Region = p.region.parse().map_err(|e: String| anyhow!(e))?;
            let target = Target::resolve(&p.target)?;
            let text = target.ctx.region(region).to_string();
            Ok(Answer::ok(text.clone(), json!({ "region": region.name(), "target": target.label, "text": text })))
        })
        .await
    }

    /// List the natural transformations (optimisations written in plain language): name,
    /// passes, tuning parameters they introduce, and what they do. Pass `backend` to see
    /// only those that apply to a workflow's backend.
    #[tool(annotations(read_only_hint = true))]
    async fn list_transformations(&self, Parameters(p): Parameters<ListTransformationsParams>) -> ToolResult {
        self.quick(move |settings| {
            let library = library(settings, &p.library.library_dirs)?;
            let backend: Option<peak_transform::Language> = p.backend.as_deref().map(|b| b.parse().map_err(|e: String| anyhow!(e))).transpose()?;
            let list: Vec<_> = library.list().iter().filter(|t| backend.is_none_or(|b| t.applies_to(b))).collect();
            let data: Vec<Value> = list.iter().map(|t| Library::summary(t, false)).collect();
            Ok(Answer::ok(render::transformations_text(&list), json!({ "transformations": data })))
        })
        .await
    }

    /// Everything about one transformation: its overview, each pass (the region it edits
    /// and its instructions), the tuning parameters and constraints it adds.
    #[tool(annotations(read_only_hint = true))]
    async fn show_transformation(&self, Parameters(p): Parameters<ShowTransformationParams>) -> ToolResult {
        self.quick(move |settings| {
            let library = library(settings, &p.library.library_dirs)?;
            let t = library.get(&p.name)?;
            Ok(Answer::ok(library.show(t), Library::summary(t, false)))
        })
        .await
    }

    /// Bring a kernel in: scaffold a context folder from a kernel source file (host code,
    /// host headers and other kernels in it are left out; local headers are read). Pointer
    /// parameters become arrays (those the kernel writes outputs, the others inputs, unless
    /// `outputs` says which), integer parameters scalar inputs, float parameters fixed
    /// values; give each array's length, each input's values and each float's value. The
    /// launch script is proposed from the kernel's own index and bound checks, and says
    /// what it read: check it (read_region, host) and adjust it before init_workflow.
    #[tool(annotations(destructive_hint = false))]
    async fn import_kernel(&self, Parameters(p): Parameters<ImportKernelParams>) -> ToolResult {
        self.quick(move |_| {
            let choices = crate::import::choices(&p)?;
            let (ctx, notes) = peak_spec::import::import_file(Path::new(&p.file), Path::new(&p.context), None, &choices).map_err(|e| anyhow!(e))?;
            let launch = ctx.regions.get(Region::Host);
            let said: String = notes.iter().map(|n| format!("- {n}\n")).collect();
            let text =
                format!("wrote context {} (kernel `{}`)\n\nfrom the file:\n{said}\nproposed launch script:\n{launch}", p.context, ctx.manifest.kernel.name);
            Ok(Answer::ok(text, json!({ "context": p.context, "manifest": ctx.manifest, "launch": launch, "notes": notes })))
        })
        .await
    }

    /// Create a workflow folder whose root checkpoint is a kernel context. The root's
    /// outputs become the reference every later checkpoint is validated against, and the
    /// root is tuned (unless measure is false) so later checkpoints report speedups.
    #[tool(annotations(destructive_hint = false))]
    async fn init_workflow(&self, Parameters(p): Parameters<InitWorkflowParams>, meta: RequestMetaObject, peer: Peer<RoleServer>) -> ToolResult {
        self.run(&meta, &peer, move |settings, progress| {
            let InitWorkflowParams { workflow, context, measure, budget, sampling: SampleParams { seed, set }, sanitizer: sanitizer_params, placement } = p;
            let defaults = peak_apply::Settings::default();
            let options = InitOptions {
                measure: measure.unwrap_or(true),
                settings: peak_apply::Settings {
                    seed: seed.unwrap_or(defaults.seed),
                    sanitizer: sanitizer("init_workflow", Sanitizes::Winner, sanitizer_params)?,
                    tuning: TuningSettings { budget, time_limit: None },
                    set,
                    cache_dir: settings.cache_dir.clone(),
                    ..defaults
                },
            };
            let mut workers = settings.workers_for(&placement);
            let wf = peak_apply::init_workflow(Path::new(&workflow), Path::new(&context), &options, &mut workers, progress)?;
            let entries = wf.log()?;
            let head = wf.head()?;
            let text =
                format!("initialized workflow {} with root checkpoint {}\n\n{}", wf.dir().display(), head.id.short(), peak_workflow::render_log(&entries));
            Ok(Answer::ok(text, json!({ "workflow": wf.dir(), "root": head.id, "log": entries })))
        })
        .await
    }

    /// Start carrying a transformation out from the workflow's current checkpoint, with
    /// you as the executor. Returns the first pass's prompt: it names the region to
    /// rewrite (macros, device or host) and how. Write the complete new region and call
    /// submit_region; repeat for every pass. When the last pass is in, peak compiles,
    /// validates against the root and tunes the result (by default over the whole space),
    /// and records a checkpoint.
    #[tool(annotations(destructive_hint = false))]
    async fn start_transformation(&self, Parameters(p): Parameters<StartTransformationParams>, meta: RequestMetaObject, peer: Peer<RoleServer>) -> ToolResult {
        self.run(&meta, &peer, move |settings, progress| {
            let options = apply_options(settings, "start_transformation", p.transformation, "agent".into(), p.settings)?;
            let events = render::Events::new(progress);
            let mut workers = settings.workers_for(&p.placement);
            let outcome = peak_apply::apply(Path::new(&p.workflow), &options, &mut workers, &events)?;
            Ok(render::outcome_answer(&p.workflow, &outcome, &events.failures()))
        })
        .await
    }

    /// Hand in the region the pending pass asked for (after start_transformation). peak
    /// splices it in and either returns the next pass's prompt, or (after the last pass)
    /// compiles, validates and tunes the result and records a checkpoint. A compile error
    /// or a wrong output is returned as an error holding the compiler log or the verdict
    /// and a repair prompt: fix the region and call submit_region again.
    #[tool(annotations(destructive_hint = false))]
    async fn submit_region(&self, Parameters(p): Parameters<SubmitRegionParams>, meta: RequestMetaObject, peer: Peer<RoleServer>) -> ToolResult {
        self.run(&meta, &peer, move |settings, progress| {
            if p.text.trim().is_empty() {
                bail!("the submitted text is empty\nhint: pass the complete new text of the region the pending prompt asks for");
            }
            let file = tempfile::Builder::new().prefix("peak-submission-").suffix(".txt").tempfile().context("creating a file for the submission")?;
            std::fs::write(file.path(), &p.text).with_context(|| format!("writing {}", file.path().display()))?;
            let events = render::Events::new(progress);
            let mut workers = settings.workers_for(&p.placement);
            let outcome = peak_apply::submit(Path::new(&p.workflow), file.path(), &mut workers, &events)?;
            Ok(render::outcome_answer(&p.workflow, &outcome, &events.failures()))
        })
        .await
    }

    /// The prompt of the pass waiting for submit_region in a workflow, if any (to read it
    /// again, or to find out whether a transformation is in progress).
    #[tool(annotations(read_only_hint = true))]
    async fn pending_pass(&self, Parameters(p): Parameters<WorkflowParams>) -> ToolResult {
        self.quick(move |_| match peak_apply::pending(Path::new(&p.workflow))? {
            Some(outcome) => Ok(render::outcome_answer(&p.workflow, &outcome, &[])),
            None => Ok(Answer::ok(format!("no transformation is waiting for a region in {}", p.workflow), json!({ "status": "idle" }))),
        })
        .await
    }

    /// Abandon the transformation in progress in a workflow (after start_transformation);
    /// the workflow stays at its current checkpoint.
    #[tool(annotations(destructive_hint = true, idempotent_hint = true))]
    async fn abandon_transformation(&self, Parameters(p): Parameters<WorkflowParams>) -> ToolResult {
        self.quick(move |_| {
            let had = peak_apply::abandon(Path::new(&p.workflow))?;
            let text = if had { "abandoned the transformation in progress" } else { "no transformation was in progress" };
            Ok(Answer::ok(text, json!({ "abandoned": had })))
        })
        .await
    }

    /// Carry a transformation out with an LLM (provider:model) from the workflow's current
    /// checkpoint: every pass, repairs after compile errors or wrong outputs, validation
    /// against the root, tuning (by default over the whole space), and a checkpoint. Takes
    /// minutes; sends progress. Use
    /// start_transformation instead to write the regions yourself.
    #[tool(annotations(destructive_hint = false, open_world_hint = true))]
    async fn apply_transformation(&self, Parameters(p): Parameters<ApplyTransformationParams>, meta: RequestMetaObject, peer: Peer<RoleServer>) -> ToolResult {
        self.run(&meta, &peer, move |settings, progress| {
            if p.executor.trim() == "agent" {
                bail!("apply_transformation needs an LLM executor (provider:model)\nhint: to write the regions yourself, call start_transformation and then submit_region");
            }
            let options = apply_options(settings, "apply_transformation", p.transformation, p.executor, p.settings)?;
            let events = render::Events::new(progress);
            let mut workers = settings.workers_for(&p.placement);
            let outcome = peak_apply::apply(Path::new(&p.workflow), &options, &mut workers, &events)?;
            Ok(render::outcome_answer(&p.workflow, &outcome, &events.failures()))
        })
        .await
    }

    /// The autonomous mode (`peak auto`): an LLM planner chooses each next transformation
    /// from the workflow's state, an LLM executor carries it out as apply_transformation
    /// does, and a failure or a regression sends the search back to the best checkpoint on
    /// a new branch `auto-N`. Every decision and its reasoning go to
    /// `.git/peak/auto-log.jsonl`. Takes minutes to hours; sends progress.
    #[tool(annotations(destructive_hint = false, open_world_hint = true))]
    async fn auto(&self, Parameters(p): Parameters<AutoParams>, meta: RequestMetaObject, peer: Peer<RoleServer>) -> ToolResult {
        self.run(&meta, &peer, move |settings, progress| {
            let AutoParams { workflow, executor, planner, steps, run_time_s, regression_percent, plan_retries, settings: apply, placement } = p;
            if executor.trim() == "agent" {
                bail!("auto needs an LLM executor (provider:model)\nhint: to choose and write the transformations yourself, call start_transformation and submit_region");
            }
            let regression = regression_percent.unwrap_or(5.0);
            if regression.is_nan() || regression < 0.0 {
                bail!("regression_percent: {regression}: give a percentage, 0 or more");
            }
            let defaults = AutoOptions::default();
            let options = AutoOptions {
                executor: executor.clone(),
                planner,
                budget: steps.unwrap_or(defaults.budget),
                time_limit: run_time_s.map(Duration::from_secs_f64),
                regression: regression / 100.0,
                plan_retries: plan_retries.unwrap_or(defaults.plan_retries),
                apply: apply_options(settings, "auto", String::new(), executor, apply)?,
            };
            let events = render::AutoEvents::new(progress);
            let mut workers = settings.workers_for(&placement);
            let report = peak_apply::auto::run(Path::new(&workflow), &options, &mut workers, &events)?;
            Ok(render::auto_answer(&report))
        })
        .await
    }

    /// A study (RQ2 at scale, `peak study`): each transformation applied from one
    /// checkpoint with each LLM executor, `repeat` times, every run on its own side branch
    /// `study/<transformation>/<executor>/<n>`; HEAD stays put. Answers the success table
    /// per transformation and executor (first try, after repair, failed, unreachable, failed
    /// tries by kind) and every run. Takes minutes; sends progress.
    #[tool(annotations(destructive_hint = false, open_world_hint = true))]
    async fn study(&self, Parameters(p): Parameters<StudyParams>, meta: RequestMetaObject, peer: Peer<RoleServer>) -> ToolResult {
        self.run(&meta, &peer, move |settings, progress| {
            let StudyParams { workflow, from, transformations, executors, repeat, settings: apply, placement } = p;
            let options = StudyOptions {
                from: from.unwrap_or_else(|| "HEAD".into()),
                transformations,
                executors,
                repeat: repeat.unwrap_or(1),
                apply: apply_options(settings, "study", String::new(), String::new(), apply)?,
            };
            let events = render::StudyEvents::new(progress);
            let mut workers = settings.workers_for(&placement);
            let report = peak_apply::study::run(Path::new(&workflow), &options, &mut workers, &events)?;
            Ok(render::study_answer(&report))
        })
        .await
    }

    /// Tune the workflow's current checkpoint again with a larger budget (default 512),
    /// starting from its recorded top-K, sanitize the winner, and record the result as a
    /// `Retune` checkpoint: the same code, a better configuration. For the tip of a line
    /// walked with small budgets. Takes minutes; sends progress.
    #[tool(annotations(destructive_hint = false))]
    async fn retune(&self, Parameters(p): Parameters<RetuneParams>, meta: RequestMetaObject, peer: Peer<RoleServer>) -> ToolResult {
        self.run(&meta, &peer, move |settings, progress| {
            let RetuneParams { workflow, limits, sampling: SampleParams { seed, set }, sanitizer: sanitizer_params, placement } = p;
            let defaults = peak_apply::Settings::default();
            let tuning = tuning(limits);
            let options = ApplyOptions {
                settings: peak_apply::Settings {
                    seed: seed.unwrap_or(defaults.seed),
                    sanitizer: sanitizer("retune", Sanitizes::Winner, sanitizer_params)?,
                    tuning: TuningSettings { budget: Some(tuning.budget.unwrap_or(512)), ..tuning },
                    set,
                    cache_dir: settings.cache_dir.clone(),
                    ..defaults
                },
                ..ApplyOptions::default()
            };
            let events = render::Events::new(progress);
            let mut workers = settings.workers_for(&placement);
            let outcome = peak_apply::retune(Path::new(&workflow), &options, "agent", &mut workers, &events)?;
            Ok(render::outcome_answer(&workflow, &outcome, &events.failures()))
        })
        .await
    }

    /// Check that a context or checkpoint computes the same outputs as a reference (by
    /// default the workflow's root) on sampled execution parameters, each with fresh random
    /// inputs, in crash-isolated workers; when every output is right, compute-sanitizer
    /// checks the samples as a transformation's validation does (`sanitize`, default
    /// `auto`: memcheck and racecheck on CUDA and HIP, nothing elsewhere). Every sample gets
    /// a verdict (passed, compile-failed, wrong-output, crashed, timed-out, invalid-config);
    /// any failure or sanitizer finding makes the result an error holding the verdicts.
    #[tool(annotations(read_only_hint = true))]
    async fn validate(&self, Parameters(p): Parameters<ValidateParams>, meta: RequestMetaObject, peer: Peer<RoleServer>) -> ToolResult {
        self.run(&meta, &peer, move |settings, progress| {
            let target = Target::resolve(&p.target)?;
            let reference = match (&p.against, &target.workflow) {
                (Some(dir), _) => Reference::Folder(Context::load(dir)?),
                (None, Some(wf)) => Reference::materialize(wf, "root")?,
                (None, None) => bail!("validate needs a reference: give `against` (a context folder), or use `workflow` to validate against its root"),
            };
            let mut space = restricted(&target.ctx, &p.sampling.set)?;
            space.at_validation_sizes(&target.ctx.manifest, &p.sampling.set)?;
            let chosen = samples(&space, p.samples.unwrap_or(16), p.sampling.seed.unwrap_or(1));
            // Resolved before anything runs, as `peak validate` and an apply do: tools asked
            // for but missing, or a size that is not an input, fail at once.
            let sanitizer = sanitizer("validate", Sanitizes::Samples, p.sanitizer)?;
            let plan = Plan::for_context(&sanitizer.tools, &sanitizer.at, &target.ctx)?;
            let cache_dir = settings.cache_dir.clone().unwrap_or_else(default_cache_dir);
            let mut validators: Vec<Box<dyn Validator>> =
                vec![Box::new(OutputValidator::new(reference.context().clone(), ReferenceStore::new(cache_dir.join("references"))))];
            let mut workers = settings.workers_for(&p.placement);
            let report = peak_eval::validate(&mut workers, &target.ctx, &chosen, &mut validators, progress)?;
            let sanitized = plan.after_outputs(report.outcome, &mut workers, &target.ctx, &space, &chosen, sanitizer.samples)?;
            let text = render::validation_text(&target.label, &report, sanitized.as_ref());
            let data = Validated { report: &report, sanitizer: sanitized.as_ref() };
            let finding = sanitized.as_ref().is_some_and(|r| r.failure().is_some());
            Ok(match report.outcome {
                Validation::Failed => Answer::failed(text, data),
                _ if finding => Answer::failed(text, data),
                _ => Answer::ok(text, data),
            })
        })
        .await
    }

    /// Autotune a context or checkpoint: search its tuning parameters within a budget,
    /// checking every variant's outputs, and report the fastest configurations per input
    /// configuration. The default budget is the whole space for `exhaustive`, a tenth of it
    /// (at least 100) otherwise. Results are cached, so nothing is measured twice. Takes
    /// seconds to minutes; sends progress. The checkpoint itself is not changed.
    #[tool(annotations(read_only_hint = true))]
    async fn tune(&self, Parameters(p): Parameters<TuneParams>, meta: RequestMetaObject, peer: Peer<RoleServer>) -> ToolResult {
        self.run(&meta, &peer, move |settings, progress| {
            let target = Target::resolve(&p.target)?;
            let reference = match &target.workflow {
                Some(wf) => Some(Reference::materialize(wf, "root")?),
                None => None,
            };
            let space = restricted(&target.ctx, &p.sampling.set)?;
            let strategy: StrategyKind = p.strategy.as_deref().unwrap_or("auto").parse().map_err(|e: String| anyhow!("strategy: {e}"))?;
            let top = p.top.unwrap_or(5).max(1);
            let cache_dir = settings.cache_dir.clone().unwrap_or_else(default_cache_dir);
            let options = TuneOptions {
                strategy,
                budget: p.limits.budget,
                time_limit: p.limits.time_limit_s.map(Duration::from_secs_f64),
                top_k: top,
                seed: p.sampling.seed.unwrap_or(1),
                start_from: Vec::new(),
            };
            let setup = TuneSetup::new(&target.ctx, &space, reference.as_ref().map(Reference::context), &cache_dir, options);
            let mut workers = settings.workers_for(&p.placement);
            let report = tune_context(&mut workers, &setup, progress)?;
            let text = render::tune_text(&target.label, &target.ctx, &report);
            Ok(if report.runs.iter().all(|r| r.best.is_none()) { Answer::failed(text, &report) } else { Answer::ok(text, &report) })
        })
        .await
    }

    /// Nsight Compute headline metrics (achieved FLOP/s, DRAM bandwidth, occupancy,
    /// shared-memory bank conflicts) of one configuration of a CUDA or HIP context or
    /// checkpoint. Needs `ncu` and an NVIDIA GPU.
    #[tool(annotations(read_only_hint = true))]
    async fn profile(&self, Parameters(p): Parameters<ProfileParams>, meta: RequestMetaObject, peer: Peer<RoleServer>) -> ToolResult {
        self.run(&meta, &peer, move |settings, progress| {
            let target = Target::resolve(&p.target)?;
            let space = restricted(&target.ctx, &p.set)?;
            let params =
                target.best_params(&space).or_else(|| space.iter().next()).ok_or_else(|| anyhow!("no execution parameter satisfies the constraints"))?;
            let mut options = ProfileOptions::locate()?;
            if !p.metrics.is_empty() {
                options.metrics = p.metrics.clone();
            }
            progress.say(format!("profiling {params}"));
            let workers = settings.workers_for(&p.placement);
            let report = profile(&workers, &target.ctx, &params, &options)?;
            Ok(Answer::ok(render::profile_text(&target.label, &params, &report), &report))
        })
        .await
    }

    /// The workflow's checkpoints, newest first: transformation, verdict, best time,
    /// speedup over the root and over the parent, tags and branches, and which is HEAD.
    #[tool(annotations(read_only_hint = true))]
    async fn log(&self, Parameters(p): Parameters<WorkflowParams>) -> ToolResult {
        self.quick(move |_| {
            let wf = Workflow::open(&p.workflow)?;
            let entries = wf.log()?;
            Ok(Answer::ok(peak_workflow::render_log(&entries), json!({ "log": entries })))
        })
        .await
    }

    /// Every attempt recorded in the workflow, failed ones included: transformation, pass,
    /// executor and model, outcome (passed, compile-failed, wrong-output, ...) and error.
    #[tool(annotations(read_only_hint = true))]
    async fn attempts(&self, Parameters(p): Parameters<WorkflowParams>) -> ToolResult {
        self.quick(move |_| {
            let wf = Workflow::open(&p.workflow)?;
            let log = wf.attempts()?;
            Ok(Answer::ok(render::attempts_text(&log), &log))
        })
        .await
    }

    /// The paper's figures and tables from workflows' records (folders or bundle files):
    /// speedup per step over the root and the previous step, success per executor and
    /// transformation with failures by kind, which validator caught each failed try, the
    /// time spent validating, transforming and tuning, and tuning convergence. With `html`,
    /// also writes one self-contained HTML page there.
    #[tool(annotations(destructive_hint = false))]
    async fn report(&self, Parameters(p): Parameters<ReportParams>) -> ToolResult {
        self.quick(move |_| {
            let paths: Vec<PathBuf> = p.workflows.iter().map(PathBuf::from).collect();
            let report = peak_report::gather(&paths)?;
            let mut text = peak_report::tables::render(&report);
            if let Some(file) = &p.html {
                std::fs::write(file, peak_report::html::render(&report)?).with_context(|| format!("writing {file}"))?;
                text.push_str(&format!("\nwrote the HTML report to {file}\n"));
            }
            Ok(Answer::ok(text, &report))
        })
        .await
    }

    /// One checkpoint in full: transformation, executor and model, verdict, best
    /// configuration and time, validation summary, and its context's files.
    #[tool(annotations(read_only_hint = true))]
    async fn show_checkpoint(&self, Parameters(p): Parameters<ShowCheckpointParams>) -> ToolResult {
        self.quick(move |_| {
            let wf = Workflow::open(&p.workflow)?;
            let view = wf.show(p.checkpoint.as_deref().unwrap_or("HEAD"))?;
            let with_transcript = p.transcript.unwrap_or(false);
            let text = render::checkpoint_text(&view, with_transcript);
            let mut data = serde_json::to_value(&view)?;
            if !with_transcript && let Some(map) = data.as_object_mut() {
                map.remove("transcript");
            }
            Ok(Answer::ok(text, data))
        })
        .await
    }

    /// Differences between two checkpoints: a unified diff per region, tuning parameters
    /// added, removed or changed, and the performance change.
    #[tool(annotations(read_only_hint = true))]
    async fn diff(&self, Parameters(p): Parameters<DiffParams>) -> ToolResult {
        self.quick(move |_| {
            let wf = Workflow::open(&p.workflow)?;
            let diff = wf.diff(&p.a, p.b.as_deref().unwrap_or("HEAD"))?;
            Ok(Answer::ok(diff.to_string(), &diff))
        })
        .await
    }

    /// Name a checkpoint (default HEAD) with a tag, so it can be referred to later.
    #[tool(annotations(destructive_hint = false))]
    async fn tag(&self, Parameters(p): Parameters<TagParams>) -> ToolResult {
        self.quick(move |_| {
            let mut wf = Workflow::open(&p.workflow)?;
            let id = wf.tag(&p.name, p.checkpoint.as_deref())?;
            Ok(Answer::ok(format!("tagged {} as {}", id.short(), p.name), json!({ "tag": p.name, "checkpoint": id })))
        })
        .await
    }

    /// Start a line of work (a branch) at a checkpoint (default HEAD). Check it out to
    /// make new checkpoints on it: this is how to backtrack and try something else.
    #[tool(annotations(destructive_hint = false))]
    async fn branch(&self, Parameters(p): Parameters<BranchParams>) -> ToolResult {
        self.quick(move |_| {
            let mut wf = Workflow::open(&p.workflow)?;
            let id = wf.branch(&p.name, p.from.as_deref())?;
            Ok(Answer::ok(format!("branch {} starts at {}; check it out to work on it", p.name, id.short()), json!({ "branch": p.name, "checkpoint": id })))
        })
        .await
    }

    /// Make a branch, tag or checkpoint the current one and restore its context into the
    /// workflow's context/ folder. New transformations start from the current checkpoint
    /// and go on the checked-out branch.
    #[tool(annotations(destructive_hint = false))]
    async fn checkout(&self, Parameters(p): Parameters<CheckoutParams>) -> ToolResult {
        self.quick(move |_| {
            let mut wf = Workflow::open(&p.workflow)?;
            let head = wf.checkout(&p.target, p.force.unwrap_or(false))?;
            let text = match &head.branch {
                Some(branch) => format!("on branch {branch} at {}", head.id.short()),
                None => format!("at {} (detached: create a branch from it before applying transformations)", head.id.short()),
            };
            Ok(Answer::ok(text, &head))
        })
        .await
    }

    /// Time two checkpoints in the same run on the same inputs (each at its best
    /// configuration, repetitions interleaved) and report the speedup of b over a.
    #[tool(annotations(read_only_hint = true))]
    async fn compare(&self, Parameters(p): Parameters<CompareParams>, meta: RequestMetaObject, peer: Peer<RoleServer>) -> ToolResult {
        self.run(&meta, &peer, move |settings, progress| {
            let wf = Workflow::open(&p.workflow)?;
            let a = Reference::materialize(&wf, &p.a)?;
            let b = Reference::materialize(&wf, &p.b)?;
            let params_a = peak_eval::compare::best_params(&wf.show(&p.a)?.performance, a.context(), &p.set)?;
            let params_b = peak_eval::compare::best_params(&wf.show(&p.b)?.performance, b.context(), &p.set)?;
            progress.say(format!("timing {} and {}", p.a, p.b));
            let mut workers = settings.workers_for(&p.placement);
            let report = peak_eval::compare::compare(&mut workers, (&p.a, a.context(), params_a), (&p.b, b.context(), params_b), p.reps.unwrap_or(20), true)?;
            Ok(Answer::ok(render::compare_text(&report), &report))
        })
        .await
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for PeakServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("peak", env!("CARGO_PKG_VERSION")))
            .with_instructions(INSTRUCTIONS)
    }
}
