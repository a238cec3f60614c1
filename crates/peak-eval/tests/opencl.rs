//! Validators, tuner, cache and crash-isolated workers on the OpenCL backend (PoCL here).
//!
//! This binary has no libtest harness of its own: started with `PEAK_EVAL_TEST_WORKER`
//! set it *is* the worker (`peak worker --backend opencl` in the product), and with
//! `PEAK_EVAL_TEST_TUNE` set it is a tuning run the kill -9 test can shoot. Otherwise it
//! runs the tests through libtest-mimic, so `cargo test` filters and reports as usual.
//! With `PEAK_EVAL_TEST_WORKER=damage-every:N` or `damage-once:FILE` the worker zeroes the
//! device copies of the inputs it keeps between jobs (see [`Damaging`]), as a kernel
//! writing far outside its own buffers could; with `slow-compile:FILE` its compile of a
//! source that names `PEAK_TEST_SLOW_COMPILE` waits until the test creates FILE.
// Helpers outside #[test] functions unwrap too; clippy's allow-unwrap-in-tests does not reach them here (rust-clippy#13981).
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use peak_backend::RunOptions;
use peak_backend::harness::{Failed, Test, run_gated};
use peak_backend::worker::{FailureKind, Job, OutputMode, PoolOptions, WorkerCommand, WorkerPool};
use peak_eval::cache::{CacheIdentity, ResultsCache};
use peak_eval::hash::{device_identity, source_hash};
use peak_eval::reference::ReferenceStore;
use peak_eval::tune::StopReason;
use peak_eval::validate::{Outcome, Sample, samples};
use peak_eval::{EvalError, OutputValidator, StrategyKind, TuneOptions, TuneSetup, Validator, Verdict, Workers, tune_context, tuning_run_options, validate};
use peak_spec::Context;

const WORKER_ENV: &str = "PEAK_EVAL_TEST_WORKER";
const TUNE_ENV: &str = "PEAK_EVAL_TEST_TUNE";

fn main() {
    if let Ok(how) = std::env::var(WORKER_ENV) {
        match peak_opencl::OpenClBackend::new() {
            Ok(backend) if how == "opencl" => peak_backend::worker::serve(&backend).expect("worker i/o"),
            Ok(backend) => peak_backend::worker::serve(&Damaging::new(backend, &how)).expect("worker i/o"),
            Err(e) => peak_backend::worker::refuse(&e.to_string()).expect("worker i/o"),
        }
        return;
    }
    if let Ok(spec) = std::env::var(TUNE_ENV) {
        tune_child(&spec);
        return;
    }
    let skip = peak_opencl::OpenClBackend::new().err().map(|e| e.to_string());
    let tests: Vec<(&str, Test)> = vec![
        ("worker_times_out_a_hang_and_runs_the_next_variant", worker_times_out_a_hang_and_runs_the_next_variant),
        ("worker_survives_a_crash_and_runs_the_next_variant", worker_survives_a_crash_and_runs_the_next_variant),
        ("a_crash_among_pipelined_jobs_is_blamed_on_its_own_job", a_crash_among_pipelined_jobs_is_blamed_on_its_own_job),
        ("jobs_run_and_answer_in_the_order_their_compiles_end", jobs_run_and_answer_in_the_order_their_compiles_end),
        ("a_crash_that_runs_before_an_earlier_job_is_blamed_on_its_own_job", a_crash_that_runs_before_an_earlier_job_is_blamed_on_its_own_job),
        ("a_fleet_spreads_jobs_over_its_workers_and_a_crash_costs_only_its_own", a_fleet_spreads_jobs_over_its_workers_and_a_crash_costs_only_its_own),
        ("compile_only_jobs_compile_and_plan_but_never_run", compile_only_jobs_compile_and_plan_but_never_run),
        ("every_input_set_holds_the_inputs_even_in_recycled_buffers", every_input_set_holds_the_inputs_even_in_recycled_buffers),
        ("a_correct_candidate_passes_on_every_sample", a_correct_candidate_passes_on_every_sample),
        ("unwritten_outputs_fail_through_poisoning", unwritten_outputs_fail_through_poisoning),
        ("a_kernel_that_ignores_its_inputs_fails_on_fresh_inputs", a_kernel_that_ignores_its_inputs_fails_on_fresh_inputs),
        ("nan_never_passes", nan_never_passes),
        ("modified_read_only_inputs_fail_unless_inout", modified_read_only_inputs_fail_unless_inout),
        ("a_hang_is_timed_out_in_validation", a_hang_is_timed_out_in_validation),
        ("compile_errors_keep_the_log", compile_errors_keep_the_log),
        ("invalid_configurations_are_pruned_not_failed", invalid_configurations_are_pruned_not_failed),
        ("crash_and_launch_failure_verdicts", crash_and_launch_failure_verdicts),
        ("references_are_recorded_once_and_damaged_ones_rerecorded", references_are_recorded_once_and_damaged_ones_rerecorded),
        ("tuning_finds_the_best_skips_wrong_variants_and_reuses_the_cache", tuning_finds_the_best_skips_wrong_variants_and_reuses_the_cache),
        ("a_tuning_run_killed_with_sigkill_resumes_without_remeasuring", a_tuning_run_killed_with_sigkill_resumes_without_remeasuring),
        ("a_corrupted_cache_is_rejected", a_corrupted_cache_is_rejected),
        ("damaged_kept_inputs_never_fail_a_correct_variant", damaged_kept_inputs_never_fail_a_correct_variant),
        ("a_hang_on_damaged_kept_inputs_gets_a_second_chance", a_hang_on_damaged_kept_inputs_gets_a_second_chance),
    ];
    run_gated(tests.into_iter().map(|(name, test)| (name, true, test)).collect(), "OpenCL", skip)
}

fn worker_command() -> WorkerCommand {
    WorkerCommand::new(std::env::current_exe().expect("test binary path")).env(WORKER_ENV, "opencl")
}

fn workers(run_timeout: Duration) -> Workers {
    Workers::new(Box::new(|_backend: &str| Ok(worker_command())), PoolOptions { run_timeout, ..PoolOptions::default() })
}

/// Workers whose backend damages the inputs they keep on the device (see [`Damaging`]).
fn damaging_workers(run_timeout: Duration, how: String) -> Workers {
    let command = move |_backend: &str| Ok(WorkerCommand::new(std::env::current_exe().expect("test binary path")).env(WORKER_ENV, &how));
    Workers::new(Box::new(command), PoolOptions { run_timeout, ..PoolOptions::default() })
}

fn ensure(cond: bool, message: impl Into<String>) -> Result<(), Failed> {
    if cond { Ok(()) } else { Err(message.into().into()) }
}

// ----------------------------------------------------------------------------------------
// Contexts.
// ----------------------------------------------------------------------------------------

struct Ctx {
    _dir: tempfile::TempDir,
    ctx: Context,
}

fn context(inputs: &str, arrays: &str, tuning: &str, device: &str, host: &str) -> Ctx {
    let dir = tempfile::tempdir().expect("temp dir");
    let manifest = format!("[kernel]\nname = \"vadd\"\nbackend = \"opencl\"\nsource = \"kernel.cl\"\n\n[inputs]\n{inputs}\n\n{arrays}\n{tuning}\n");
    std::fs::write(dir.path().join("peak.toml"), manifest).unwrap();
    std::fs::write(dir.path().join("kernel.cl"), format!("// @peak macros\n// @peak device\n{device}// @peak host\n{host}")).unwrap();
    let ctx = Context::load(dir.path()).unwrap_or_else(|e| panic!("test context: {e}"));
    Ctx { _dir: dir, ctx }
}

const ARRAYS: &str = "[[arrays]]\nname = \"A\"\ntype = \"f32\"\nsize = \"n\"\ninit = \"random\"\nseed = 1\n\n[[arrays]]\nname = \"B\"\ntype = \"f32\"\nsize = \"n\"\ninit = \"random\"\nseed = 2\n\n[[arrays]]\nname = \"C\"\ntype = \"f32\"\nsize = \"n\"\ninit = \"zeros\"\noutput = true\n";
const SIZES: &str = "n = { values = [256, 1000, 4097] }";
const BLOCKS: &str = "[tuning]\nBS = { values = [16, 32, 64] }\n";
const HOST: &str = "launch(\"vadd\", ceil_div(n, BS), BS, 0, A, B, C, n);\n";

/// `C = A + 2B`, with a body given for element `i` (which is < n).
fn vadd(body: &str) -> String {
    format!(
        "__kernel void vadd(__global float* a, __global float* b, __global float* out, int n) {{\n  int i = get_global_id(0);\n  if (i < n) {{ {body} }}\n}}\n"
    )
}

const CORRECT: &str = "out[i] = a[i] + 2.0f * b[i];";

/// The reference: plain, untuned.
fn reference() -> Ctx {
    context(SIZES, ARRAYS, "", &vadd(CORRECT), "launch(\"vadd\", ceil_div(n, 64), 64, 0, A, B, C, n);\n")
}

fn candidate(body: &str) -> Ctx {
    context(SIZES, ARRAYS, BLOCKS, &vadd(body), HOST)
}

/// Validate `candidate` against the plain reference on every point of its space.
fn run_validation(candidate: &Context, timeout: Duration) -> Result<peak_eval::ValidationReport, EvalError> {
    let cache = tempfile::tempdir().unwrap();
    let reference = reference();
    let mut validator = OutputValidator::new(reference.ctx.clone(), ReferenceStore::new(cache.path()));
    validator.timeout = Some(timeout);
    let mut validators: Vec<Box<dyn Validator>> = vec![Box::new(validator)];
    let mut workers = workers(timeout);
    validate(&mut workers, candidate, &samples(&candidate.space(), 16, 7), &mut validators, &())
}

fn categories(report: &peak_eval::ValidationReport) -> Vec<&'static str> {
    report.samples.iter().map(|s| s.verdict.category()).collect()
}

// ----------------------------------------------------------------------------------------
// Crash-isolated workers.
// ----------------------------------------------------------------------------------------

fn once(ctx: &Context) -> Job {
    Job::new(ctx.dir.clone(), ctx.space().iter().next().unwrap(), RunOptions { warmup: 0, repetitions: 1, ..RunOptions::default() })
}

fn pool(run_timeout: Duration) -> WorkerPool {
    WorkerPool::start("opencl", worker_command(), PoolOptions { run_timeout, ..PoolOptions::default() }).expect("worker starts")
}

const HANG: &str = "while (1) { out[i] += 1.0f; }";
/// A write some terabytes past the array: outside any mapping, so PoCL's thread faults.
const WILD_WRITE: &str = "out[i + 400000000L * (long)n] = 1.0f;";

fn worker_times_out_a_hang_and_runs_the_next_variant() -> Result<(), Failed> {
    let (hang, good) = (candidate(HANG), candidate(CORRECT));
    let mut pool = pool(Duration::from_secs(3));
    let started = Instant::now();
    let failure = pool.run(once(&hang.ctx))?.expect_err("an endless kernel cannot succeed");
    ensure(failure.category == FailureKind::TimedOut, format!("expected timed-out, got {failure}"))?;
    ensure(started.elapsed() < Duration::from_secs(60), "the time-out did not fire in time")?;
    let report = pool.run(once(&good.ctx))?.map_err(|f| format!("the next variant failed: {f}"))?;
    ensure(report.times_ms.len() == 1, "the next variant was not timed")?;
    ensure(pool.restarts() == 1, format!("expected one restart, got {}", pool.restarts()))
}

fn worker_survives_a_crash_and_runs_the_next_variant() -> Result<(), Failed> {
    let (crash, good) = (candidate(WILD_WRITE), candidate(CORRECT));
    let mut pool = pool(Duration::from_secs(60));
    let failure = pool.run(once(&crash.ctx))?.expect_err("a wild write cannot succeed");
    ensure(failure.category == FailureKind::Crashed, format!("expected crashed, got {failure}"))?;
    ensure(failure.message.contains("SIGSEGV") || failure.message.contains("SIGBUS"), format!("the signal is not named: {}", failure.message))?;
    pool.run(once(&good.ctx))?.map_err(|f| format!("the next variant failed: {f}"))?;
    ensure(pool.restarts() == 1, format!("expected one restart, got {}", pool.restarts()))
}

fn a_fleet_spreads_jobs_over_its_workers_and_a_crash_costs_only_its_own() -> Result<(), Failed> {
    use peak_backend::worker::{Dispatch, Fleet};
    let (crash, good) = (candidate(WILD_WRITE), candidate(CORRECT));
    // Two workers on the one PoCL device: enough to see jobs spread and crashes isolated.
    let mut fleet = Fleet::start("opencl", vec![worker_command(), worker_command()], PoolOptions::default())?;
    let points: Vec<_> = good.ctx.space().iter().collect();
    let mut expect = std::collections::HashMap::new();
    for (k, params) in points.iter().cycle().take(12).enumerate() {
        let ctx = if k == 5 { &crash.ctx } else { &good.ctx };
        let id = fleet.submit(Job::new(ctx.dir.clone(), params.clone(), RunOptions { warmup: 0, repetitions: 1, ..RunOptions::default() }));
        expect.insert(id, k == 5);
    }
    while let Some(answer) = fleet.next_answer()? {
        let crashes = expect.remove(&answer.id).ok_or(format!("an answer for unknown job {}", answer.id))?;
        match (&answer.result, crashes) {
            (Err(f), true) => ensure(f.category == FailureKind::Crashed, format!("the wild write: {f}"))?,
            (Ok(_), false) => {}
            (other, _) => return Err(format!("job {} (crashes: {crashes}) got {other:?}", answer.id).into()),
        }
    }
    ensure(expect.is_empty(), format!("jobs never answered: {expect:?}"))?;
    // A worker runs jobs as their compiles end, so the crash (a module of its own) may have
    // been its lane's last job, and a lane replaces a dead worker only when it has work:
    // give each lane some more.
    let more: Vec<u64> = points
        .iter()
        .take(4)
        .map(|params| fleet.submit(Job::new(good.ctx.dir.clone(), params.clone(), RunOptions { warmup: 0, repetitions: 1, ..RunOptions::default() })))
        .collect();
    while let Some(answer) = fleet.next_answer()? {
        ensure(more.contains(&answer.id) && answer.result.is_ok(), format!("job {} got {:?}", answer.id, answer.result))?;
    }
    ensure(fleet.served().iter().all(|&n| n >= 2), format!("both workers take jobs: {:?}", fleet.served()))?;
    ensure(fleet.restarts() == 1, format!("one worker restarted, the other untouched: {} restarts", fleet.restarts()))
}

fn compile_only_jobs_compile_and_plan_but_never_run() -> Result<(), Failed> {
    let compile_only = |ctx: &Context| Job { compile_only: true, ..once(ctx) };
    let mut pool = pool(Duration::from_secs(3));
    // An endless kernel is never launched, so it is no time-out here.
    let hang = candidate(HANG);
    let report = pool.run(compile_only(&hang.ctx))?.map_err(|f| format!("a kernel that compiles failed: {f}"))?;
    ensure(report.times_ms.is_empty() && report.outputs.is_empty(), format!("nothing may run: {report:?}"))?;
    ensure(report.launches == 1 && report.kernels.iter().any(|k| k.name == "vadd"), format!("the plan and the kernels are reported: {report:?}"))?;
    let broken = candidate("out[i] = a[i] + undeclared_thing;");
    let failure = pool.run(compile_only(&broken.ctx))?.expect_err("a compile error cannot pass");
    ensure(failure.category == FailureKind::CompileFailed && failure.log.as_deref().is_some_and(|l| l.contains("undeclared_thing")), format!("{failure}"))?;
    let host = "invalid(\"never here\");\nlaunch(\"vadd\", ceil_div(n, BS), BS, 0, A, B, C, n);\n";
    let pruned = context(SIZES, ARRAYS, BLOCKS, &vadd(CORRECT), host);
    let failure = pool.run(compile_only(&pruned.ctx))?.expect_err("the launch script declared it invalid");
    ensure(failure.category == FailureKind::InvalidConfig, format!("{failure}"))?;
    ensure(pool.restarts() == 0, format!("no worker should have died, {} did", pool.restarts()))
}

fn a_crash_among_pipelined_jobs_is_blamed_on_its_own_job() -> Result<(), Failed> {
    let (crash, good) = (candidate(WILD_WRITE), candidate(CORRECT));
    let mut pool = pool(Duration::from_secs(60));
    let points: Vec<_> = good.ctx.space().iter().collect();
    let mut expect = Vec::new();
    for (k, params) in points.iter().take(5).enumerate() {
        let ctx = if k == 2 { &crash.ctx } else { &good.ctx };
        let id = pool.submit(Job::new(ctx.dir.clone(), params.clone(), RunOptions { warmup: 0, repetitions: 1, ..RunOptions::default() }));
        expect.push((id, k == 2));
    }
    // Answers come as jobs finish, not in submission order: match them by id.
    let mut expect: std::collections::HashMap<u64, bool> = expect.into_iter().collect();
    while let Some(answer) = pool.next_answer()? {
        let id = answer.id;
        let crashes = expect.remove(&id).ok_or(format!("an answer for unknown or answered job {id}"))?;
        match (crashes, &answer.result) {
            (true, Err(f)) if f.category == FailureKind::Crashed => {}
            (false, Ok(_)) => {}
            (_, other) => return Err(format!("job {id} (crashing: {crashes}) got {other:?}").into()),
        }
    }
    ensure(expect.is_empty(), format!("jobs never answered: {expect:?}"))
}

/// A pool whose worker compiles a source naming `PEAK_TEST_SLOW_COMPILE` only once the
/// test opens `gate` (see [`Damaging`]), on two compile threads: one for the slow job, one
/// for the rest. Not a fixed delay: the test opens the gate when every other job has been
/// answered, which a pool that made them wait behind the slow compile would never reach
/// (the worker then gives up waiting after [`GATE_LIMIT`], and the order shows it).
fn slow_compile_pool(run_timeout: Duration, gate: &Path) -> WorkerPool {
    let command = WorkerCommand::new(std::env::current_exe().expect("test binary path"))
        .env(WORKER_ENV, format!("slow-compile:{}", gate.display()))
        .env("PEAK_COMPILE_THREADS", "2");
    WorkerPool::start("opencl", command, PoolOptions { run_timeout, ..PoolOptions::default() }).expect("worker starts")
}

/// How long a slow compile waits for its gate at most: well under the pools' run time-out.
const GATE_LIMIT: Duration = Duration::from_secs(40);

/// Open the gate of [`slow_compile_pool`] once only `slow` is left unanswered.
fn open_gate_when_only<T>(gate: &Path, expect: &std::collections::HashMap<u64, T>, slow: u64) {
    if expect.len() == 1 && expect.contains_key(&slow) && !gate.exists() {
        std::fs::write(gate, b"open").expect("gate file");
    }
}

/// A correct candidate whose compile waits for the gate in [`slow_compile_pool`]'s worker.
fn slow_candidate() -> Ctx {
    candidate(&format!("/* PEAK_TEST_SLOW_COMPILE */ {CORRECT}"))
}

/// The first job's compile is slow: the jobs after it, compiled meanwhile, run and are
/// answered before it instead of waiting behind it, and every answer carries its own id.
fn jobs_run_and_answer_in_the_order_their_compiles_end() -> Result<(), Failed> {
    let (slow, good) = (slow_candidate(), candidate(CORRECT));
    let gates = tempfile::tempdir().unwrap();
    let gate = gates.path().join("gate");
    let mut pool = slow_compile_pool(Duration::from_secs(60), &gate);
    let job = |ctx: &Context, params: &peak_spec::ExecParams| Job {
        outputs: OutputMode::Bytes,
        ..Job::new(ctx.dir.clone(), params.clone(), RunOptions { warmup: 0, repetitions: 1, ..RunOptions::default() })
    };
    // The slow job has the largest output, so an answer given under another job's id shows.
    let (large, small): (Vec<_>, Vec<_>) = good.ctx.space().iter().partition(|p| p.inputs["n"] == 4097);
    let first = pool.submit(job(&slow.ctx, &large[0]));
    let mut expect = std::collections::HashMap::from([(first, large[0].clone())]);
    for params in small.iter().take(4) {
        expect.insert(pool.submit(job(&good.ctx, params)), params.clone());
    }
    let mut order = Vec::new();
    while let Some(answer) = pool.next_answer()? {
        let params = expect.remove(&answer.id).ok_or(format!("an answer for unknown or answered job {}", answer.id))?;
        let report = answer.result.map_err(|f| format!("job {}: {f}", answer.id))?;
        // The answer is this job's: its output has this job's size.
        let n = usize::try_from(params.inputs["n"]).unwrap();
        ensure(
            report.outputs.len() == 1 && report.outputs[0].elements == n,
            format!("job {} (n = {n}) got another job's outputs: {:?}", answer.id, report.outputs),
        )?;
        order.push(answer.id);
        open_gate_when_only(&gate, &expect, first);
    }
    ensure(expect.is_empty(), format!("jobs never answered: {expect:?}"))?;
    ensure(order.last() == Some(&first), format!("the slowly compiled job {first} should be answered last, after the jobs compiled meanwhile: {order:?}"))?;
    ensure(pool.restarts() == 0, format!("no worker should have died, {} did", pool.restarts()))
}

/// A job that crashes the worker while an earlier-submitted job still compiles is blamed
/// alone, at once (the earlier job never ran, so it is no suspect): one restart, no
/// one-at-a-time resending, and every other job is run again and passes.
fn a_crash_that_runs_before_an_earlier_job_is_blamed_on_its_own_job() -> Result<(), Failed> {
    let (slow, crash, good) = (slow_candidate(), candidate(WILD_WRITE), candidate(CORRECT));
    let gates = tempfile::tempdir().unwrap();
    let gate = gates.path().join("gate");
    let mut pool = slow_compile_pool(Duration::from_secs(60), &gate);
    let points: Vec<_> = good.ctx.space().iter().collect();
    let job = |ctx: &Context, k: usize| Job::new(ctx.dir.clone(), points[k].clone(), RunOptions { warmup: 0, repetitions: 1, ..RunOptions::default() });
    let first = pool.submit(job(&slow.ctx, 0));
    let crashing = pool.submit(job(&crash.ctx, 1));
    let mut expect = std::collections::HashMap::from([(first, false), (crashing, true)]);
    for k in 2..5 {
        expect.insert(pool.submit(job(&good.ctx, k)), false);
    }
    let mut order = Vec::new();
    while let Some(answer) = pool.next_answer()? {
        let crashes = expect.remove(&answer.id).ok_or(format!("an answer for unknown or answered job {}", answer.id))?;
        match (crashes, &answer.result) {
            (true, Err(f)) if f.category == FailureKind::Crashed => {}
            (false, Ok(_)) => {}
            (_, other) => return Err(format!("job {} (crashing: {crashes}) got {other:?}", answer.id).into()),
        }
        order.push(answer.id);
        open_gate_when_only(&gate, &expect, first);
    }
    ensure(expect.is_empty(), format!("jobs never answered: {expect:?}"))?;
    ensure(
        order.first() == Some(&crashing) && order.last() == Some(&first),
        format!("the crash runs (and is answered) first, the slow compile last: {order:?}"),
    )?;
    ensure(pool.restarts() == 1, format!("the culprit is known at once: one restart expected, {} happened", pool.restarts()))
}

/// The worker keeps freed buffers for the next job and fills the second input set by a
/// device copy of the first; a kernel that spins forever unless its input is all ones
/// proves, through the timed runs on set 1, that neither leaves stale data behind.
fn every_input_set_holds_the_inputs_even_in_recycled_buffers() -> Result<(), Failed> {
    let ones = ARRAYS.replacen("init = \"random\"\nseed = 1", "init = \"ones\"\nseed = 1", 1);
    let fussy =
        context("n = { values = [4097] }", &ones, BLOCKS, &vadd("if (a[i] != 1.0f) { while (1) { out[i] += 1.0f; } }\n out[i] = a[i] + 2.0f * b[i];"), HOST);
    let noisy = candidate(CORRECT);
    let mut pool = pool(Duration::from_secs(10));
    let options = RunOptions { warmup: 1, repetitions: 3, input_sets: 2, ..RunOptions::default() };
    for ctx in [&noisy.ctx, &fussy.ctx, &noisy.ctx, &fussy.ctx] {
        let params = ctx.space().iter().find(|p| p.inputs["n"] == 4097).ok_or("no point with n = 4097")?;
        let report = pool.run(Job::new(ctx.dir.clone(), params, options.clone()))?.map_err(|f| format!("{}: {f}", ctx.dir.display()))?;
        ensure(report.times_ms.len() == 3, "every timed run must complete")?;
    }
    ensure(pool.restarts() == 0, "no run may hang")
}

// ----------------------------------------------------------------------------------------
// Validation verdicts.
// ----------------------------------------------------------------------------------------

fn a_correct_candidate_passes_on_every_sample() -> Result<(), Failed> {
    let good = candidate(CORRECT);
    let report = run_validation(&good.ctx, Duration::from_secs(60))?;
    ensure(report.samples.len() == 9, format!("expected all 9 points sampled, got {}", report.samples.len()))?;
    ensure(report.outcome == Outcome::Passed, format!("{:?}", categories(&report)))?;
    let mut seeds: Vec<u64> = report.samples.iter().map(|s| s.data_seed).collect();
    seeds.sort();
    seeds.dedup();
    ensure(seeds.len() == 9, "every sample must draw its own inputs")
}

fn unwritten_outputs_fail_through_poisoning() -> Result<(), Failed> {
    let half = candidate("if (i < n / 2) out[i] = a[i] + 2.0f * b[i];");
    let report = run_validation(&half.ctx, Duration::from_secs(60))?;
    ensure(report.outcome == Outcome::Failed, "a half-written output passed")?;
    for s in &report.samples {
        match &s.verdict {
            Verdict::WrongOutput(w) => ensure(w.comparison.non_finite > 0 && w.array == "C", format!("{w:?}"))?,
            other => return Err(format!("expected wrong-output, got {other:?}").into()),
        }
    }
    Ok(())
}

fn a_kernel_that_ignores_its_inputs_fails_on_fresh_inputs() -> Result<(), Failed> {
    // A kernel that memorised the answer for the manifest's own inputs (data seed 0).
    let reference = reference();
    let params = reference.ctx.space().iter().find(|p| p.inputs["n"] == 256).unwrap();
    let mut plain = workers(Duration::from_secs(60));
    let pool = plain.pool("opencl")?;
    let report = pool
        .run(Job {
            outputs: OutputMode::Bytes,
            ..Job::new(reference.ctx.dir.clone(), params, RunOptions { warmup: 0, repetitions: 0, ..RunOptions::default() })
        })?
        .map_err(|f| f.to_string())?;
    let answer = report.outputs[0].array().ok_or("no bytes")?;
    let table: Vec<String> = (0..answer.len()).map(|i| format!("{:e}f", answer.get_f64(i) as f32)).collect();
    let device = format!(
        "__constant float ANSWER[256] = {{{}}};\n__kernel void vadd(__global float* a, __global float* b, __global float* out, int n) {{\n  int i = get_global_id(0);\n  if (i < n) out[i] = ANSWER[i % 256];\n}}\n",
        table.join(", ")
    );
    let memorised = context("n = { values = [256] }", ARRAYS, BLOCKS, &device, HOST);

    // On the manifest's inputs it is indistinguishable from a correct kernel...
    let store_dir = tempfile::tempdir().unwrap();
    let mut validator = OutputValidator::new(reference.ctx.clone(), ReferenceStore::new(store_dir.path()));
    let same_inputs = Sample { index: 0, params: memorised.ctx.space().iter().next().unwrap(), data_seed: 0 };
    let verdict = validator.check(&mut plain, &memorised.ctx, &same_inputs)?.ok_or("no verdict")?;
    ensure(verdict == Verdict::Passed, format!("control: on data seed 0 it should pass, got {verdict:?}"))?;
    // ...but every sample draws fresh inputs, and there it fails.
    let report = run_validation(&memorised.ctx, Duration::from_secs(60))?;
    ensure(categories(&report).iter().all(|c| *c == "wrong-output"), format!("{:?}", categories(&report)))
}

fn nan_never_passes() -> Result<(), Failed> {
    let nan = candidate("out[i] = (i == 7) ? NAN : a[i] + 2.0f * b[i];");
    let report = run_validation(&nan.ctx, Duration::from_secs(60))?;
    for s in &report.samples {
        match &s.verdict {
            Verdict::WrongOutput(w) => ensure(w.comparison.non_finite == 1 && w.comparison.worst_index == 7, format!("{w:?}"))?,
            other => return Err(format!("expected wrong-output, got {other:?}").into()),
        }
    }
    Ok(())
}

fn modified_read_only_inputs_fail_unless_inout() -> Result<(), Failed> {
    let body = "float x = a[i] + 2.0f * b[i]; a[i] = 0.0f; out[i] = x;";
    let scribbler = candidate(body);
    let report = run_validation(&scribbler.ctx, Duration::from_secs(60))?;
    for s in &report.samples {
        ensure(s.verdict == Verdict::ModifiedInput { arrays: vec!["A".into()] }, format!("{:?}", s.verdict))?;
    }
    let declared = context(SIZES, &ARRAYS.replacen("seed = 1\n", "seed = 1\ninout = true\n", 1), BLOCKS, &vadd(body), HOST);
    let report = run_validation(&declared.ctx, Duration::from_secs(60))?;
    ensure(report.outcome == Outcome::Passed, format!("an inout array may change: {:?}", categories(&report)))
}

fn a_hang_is_timed_out_in_validation() -> Result<(), Failed> {
    let hang = context("n = { values = [256] }", ARRAYS, "[tuning]\nBS = { values = [32] }\n", &vadd(HANG), HOST);
    let report = run_validation(&hang.ctx, Duration::from_secs(3))?;
    ensure(categories(&report) == ["timed-out"], format!("{:?}", categories(&report)))
}

fn compile_errors_keep_the_log() -> Result<(), Failed> {
    let broken = candidate("out[i] = a[i] + undeclared_thing;");
    let report = run_validation(&broken.ctx, Duration::from_secs(60))?;
    match &report.samples[0].verdict {
        Verdict::CompileFailed { log, options, .. } => {
            ensure(log.contains("undeclared_thing"), format!("the log lacks the culprit: {log}"))?;
            ensure(options.contains("BS="), format!("the options are lost: {options}"))
        }
        other => Err(format!("expected compile-failed, got {other:?}").into()),
    }
}

fn invalid_configurations_are_pruned_not_failed() -> Result<(), Failed> {
    let host = "if BS == 32 { invalid(\"BS 32 is not supported\"); }\nlaunch(\"vadd\", ceil_div(n, BS), BS, 0, A, B, C, n);\n";
    let picky = context(SIZES, ARRAYS, BLOCKS, &vadd(CORRECT), host);
    let report = run_validation(&picky.ctx, Duration::from_secs(60))?;
    ensure(report.counts.get("invalid-config") == Some(&3), format!("{:?}", report.counts))?;
    ensure(report.counts.get("passed") == Some(&6), format!("{:?}", report.counts))?;
    ensure(report.outcome == Outcome::Passed, "pruned points are not failures")?;
    let only = context(SIZES, ARRAYS, "[tuning]\nBS = { values = [32] }\n", &vadd(CORRECT), host);
    let report = run_validation(&only.ctx, Duration::from_secs(60))?;
    ensure(report.outcome == Outcome::Inconclusive, format!("nothing ran, so nothing passed: {:?}", report.outcome))
}

fn crash_and_launch_failure_verdicts() -> Result<(), Failed> {
    let crash = context("n = { values = [256] }", ARRAYS, "[tuning]\nBS = { values = [32] }\n", &vadd(WILD_WRITE), HOST);
    let report = run_validation(&crash.ctx, Duration::from_secs(60))?;
    ensure(categories(&report) == ["crashed"], format!("{:?}", categories(&report)))?;
    let host = HOST.replace("launch(\"vadd\"", "launch(\"vad\"");
    let misnamed = context(SIZES, ARRAYS, BLOCKS, &vadd(CORRECT), &host);
    let report = run_validation(&misnamed.ctx, Duration::from_secs(60))?;
    ensure(categories(&report).iter().all(|c| *c == "launch-failed"), format!("{:?}", categories(&report)))
}

fn references_are_recorded_once_and_damaged_ones_rerecorded() -> Result<(), Failed> {
    let (reference, good) = (reference(), candidate(CORRECT));
    let cache = tempfile::tempdir().unwrap();
    let mut workers = workers(Duration::from_secs(60));
    let chosen = samples(&good.ctx.space(), 4, 3);
    let validate_once = |workers: &mut Workers| -> Result<(usize, usize), Failed> {
        let mut v = OutputValidator::new(reference.ctx.clone(), ReferenceStore::new(cache.path()));
        for s in &chosen {
            ensure(v.check(workers, &good.ctx, s)? == Some(Verdict::Passed), "a correct sample failed")?;
        }
        Ok((v.recorded, v.repaired))
    };
    ensure(validate_once(&mut workers)? == (4, 0), "the first validation records each reference")?;
    ensure(validate_once(&mut workers)? == (0, 0), "the second validation reuses them all")?;
    // Damage one stored array: it must be recorded again, never trusted.
    let victim = walk(cache.path()).into_iter().find(|p| p.extension().is_some_and(|e| e == "bin")).ok_or("no stored reference")?;
    let mut bytes = std::fs::read(&victim).unwrap();
    bytes[0] ^= 0x40;
    std::fs::write(&victim, bytes).unwrap();
    ensure(validate_once(&mut workers)? == (1, 1), "a damaged reference must be re-recorded")
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(path);
        }
    }
    out
}

// ----------------------------------------------------------------------------------------
// Tuning, cache and resumption.
// ----------------------------------------------------------------------------------------

/// `C = A + 2B` after `REPEAT` rounds of busy work (so the time grows with REPEAT, and the
/// result stays exact: averaging x with itself is x); WRONG = 1 variants add an error.
/// The fastest correct variant is REPEAT = 1, WRONG = 0.
fn tunable(repeats: &str) -> Ctx {
    let device = "__kernel void vadd(__global float* a, __global float* b, __global float* out, int n) {\n  int i = get_global_id(0);\n  if (i >= n) return;\n  float x = a[i] + 2.0f * b[i];\n  float acc = x;\n  for (int r = 0; r < REPEAT * 64; ++r) acc = acc * 0.5f + x * 0.5f;\n  out[i] = acc + (WRONG ? 1.0f : 0.0f);\n}\n";
    let tuning = format!("[tuning]\nREPEAT = {{ values = [{repeats}] }}\nWRONG = {{ values = [0, 1] }}\nBS = {{ values = [32, 64] }}\n");
    context("n = { values = [20000] }", ARRAYS, &tuning, device, HOST)
}

fn setup<'a>(ctx: &'a Context, space: &'a peak_spec::Space, cache: &'a Path, strategy: StrategyKind, budget: Option<usize>) -> TuneSetup<'a> {
    TuneSetup {
        context: ctx,
        space,
        reference: None,
        cache_dir: cache,
        no_cache: false,
        no_validation: false,
        run: RunOptions { warmup: 1, repetitions: 3, ..tuning_run_options() },
        options: TuneOptions { strategy, budget, seed: 5, ..TuneOptions::default() },
        timeout: None,
        prune_spills: false,
        in_flight: None,
    }
}

/// Also checks that the run says where its time went (`time_breakdown`).
fn tuning_finds_the_best_skips_wrong_variants_and_reuses_the_cache() -> Result<(), Failed> {
    let t = tunable("1, 8, 32");
    let cache = tempfile::tempdir().unwrap();
    let space = t.ctx.space();
    let mut workers = workers(Duration::from_secs(60));
    let first = tune_context(&mut workers, &setup(&t.ctx, &space, cache.path(), StrategyKind::Exhaustive, None), &())?;
    let run = &first.runs[0];
    ensure(run.space == 12 && run.evaluations == 12 && run.measured == 12 && run.cached == 0, format!("{run:?}"))?;
    let spent = &run.time_breakdown;
    let device_thread =
        [spent.request_wait_s, spent.compile_wait_s, spent.plan_s, spent.inputs_s, spent.check_run_s, spent.read_back_s, spent.timing_s, spent.release_s];
    let beside = [spent.compile_cpu_s, spent.timed_kernels_s, spent.compare_s, spent.cache_write_s, spent.strategy_s];
    ensure(device_thread.iter().chain(&beside).all(|s| s.is_finite() && *s >= 0.0), format!("a stage is negative: {spent:?}"))?;
    // Only wrong variants are run again (a failed check on kept inputs is not believed), once.
    ensure(spent.answers == 12 && spent.reruns <= 6, format!("every configuration answers once: {spent:?}"))?;
    ensure(spent.wall_s > 0.0 && (spent.wall_s - run.elapsed_s).abs() < 1e-9, format!("{spent:?}"))?;
    ensure(spent.compile_cpu_s > 0.0 && spent.inputs_s > 0.0 && spent.check_run_s > 0.0 && spent.compare_s > 0.0, format!("{spent:?}"))?;
    ensure(spent.timing_s > 0.0 && spent.timed_kernels_s > 0.0 && spent.cache_write_s > 0.0, format!("{spent:?}"))?;
    // The device thread runs one configuration at a time: its stages fit in the wall.
    let device_thread: f64 = device_thread.iter().sum();
    ensure(device_thread <= spent.wall_s * 1.05, format!("the device thread's stages exceed the wall: {device_thread} > {}", spent.wall_s))?;
    ensure(run.stopped == StopReason::Exhausted, format!("{:?}", run.stopped))?;
    // The reference is the first configuration (REPEAT=1, WRONG=0); WRONG=1 variants are wrong.
    ensure(run.failures.get("wrong-output") == Some(&6), format!("{:?}", run.failures))?;
    let best = run.best.as_ref().ok_or("no winner")?;
    ensure(best.tuning["WRONG"] == 0 && best.tuning["REPEAT"] == 1, format!("winner {:?}", best.tuning))?;
    ensure(run.top.len() == 6 && run.top.windows(2).all(|w| w[0].median_ms <= w[1].median_ms), "the top list is not sorted or holds wrong variants")?;
    ensure(run.why.contains("fastest"), run.why.clone())?;

    let again = tune_context(&mut workers, &setup(&t.ctx, &space, cache.path(), StrategyKind::Exhaustive, None), &())?;
    let run2 = &again.runs[0];
    ensure(run2.measured == 0 && run2.cached == 12, format!("nothing may be measured twice: {run2:?}"))?;
    ensure(run2.time_breakdown.answers == 0 && run2.time_breakdown.cache_write_s == 0.0, format!("cache hits cost no stage: {:?}", run2.time_breakdown))?;
    ensure(run2.best.as_ref().map(|b| &b.tuning) == Some(&best.tuning), "the cached winner differs")?;
    ensure(again.cache.as_ref().map(|c| c.loaded) == Some(12), "the cache report is wrong")
}

/// Arguments of the tuning child, as JSON in `PEAK_EVAL_TEST_TUNE`.
#[derive(serde::Serialize, serde::Deserialize)]
struct ChildSpec {
    context: PathBuf,
    cache: PathBuf,
}

fn tune_child(spec: &str) {
    let spec: ChildSpec = serde_json::from_str(spec).expect("child spec");
    let ctx = Context::load(&spec.context).expect("child context");
    let space = ctx.space();
    let mut workers = workers(Duration::from_secs(60));
    tune_context(&mut workers, &setup(&ctx, &space, &spec.cache, StrategyKind::Exhaustive, None), &()).expect("child tuning");
}

fn a_tuning_run_killed_with_sigkill_resumes_without_remeasuring() -> Result<(), Failed> {
    let t = tunable("1, 2, 3, 4, 5, 6, 7, 8, 9, 10");
    let cache = tempfile::tempdir().unwrap();
    let spec = serde_json::to_string(&ChildSpec { context: t.ctx.dir.clone(), cache: cache.path().to_path_buf() }).unwrap();
    let mut child = std::process::Command::new(std::env::current_exe().unwrap()).env(TUNE_ENV, spec).spawn()?;
    let results = cache.path().join("results");
    let deadline = Instant::now() + Duration::from_secs(300);
    let records = |dir: &Path| -> usize { walk(dir).iter().filter_map(|p| std::fs::read_to_string(p).ok()).map(|t| t.lines().count().saturating_sub(1)).sum() };
    while records(&results) < 5 {
        if Instant::now() > deadline || child.try_wait()?.is_some() {
            let _ = child.kill();
            return Err("the child finished or stalled before it could be killed".into());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
    child.wait()?;
    let file = walk(&results).into_iter().next().ok_or("no cache file")?;
    let before = ResultsCache::read(&file)?;
    let kept = before.records.len();
    ensure((5..40).contains(&kept), format!("{kept} records survived the kill"))?;

    let space = t.ctx.space();
    let mut workers = workers(Duration::from_secs(60));
    let resumed = tune_context(&mut workers, &setup(&t.ctx, &space, cache.path(), StrategyKind::Exhaustive, None), &())?;
    let run = &resumed.runs[0];
    ensure(run.cached == kept, format!("resumed with {} cached, the file held {kept}", run.cached))?;
    ensure(run.measured == 40 - kept && run.evaluations == 40, format!("measured {} evaluated {}", run.measured, run.evaluations))?;
    let after = ResultsCache::read(&file)?;
    ensure(after.records.len() == 40, format!("{} records after resuming", after.records.len()))?;
    let mut keys: Vec<String> = after.records.iter().map(|r| format!("{:?}", r.tuning)).collect();
    keys.sort();
    keys.dedup();
    ensure(keys.len() == 40, "a configuration was measured twice")
}

fn a_corrupted_cache_is_rejected() -> Result<(), Failed> {
    let t = tunable("1, 2");
    let cache = tempfile::tempdir().unwrap();
    let space = t.ctx.space();
    let mut workers = workers(Duration::from_secs(60));
    tune_context(&mut workers, &setup(&t.ctx, &space, cache.path(), StrategyKind::Exhaustive, Some(3)), &())?;
    let device = workers.pool("opencl")?.device().clone();
    let identity =
        CacheIdentity { source_hash: source_hash(&t.ctx), device: device_identity(&device), backend: "opencl".into(), reference: source_hash(&t.ctx) };
    let file = identity.file_in(&cache.path().join("results"));
    let mut text = std::fs::read_to_string(&file)?;
    text.insert_str(text.find('\n').unwrap() + 1, "this is not a record\n");
    std::fs::write(&file, &text)?;
    match tune_context(&mut workers, &setup(&t.ctx, &space, cache.path(), StrategyKind::Exhaustive, None), &()) {
        Err(e @ EvalError::CacheCorrupt { line: 2, .. }) => {
            ensure(e.to_string().contains(&file.display().to_string()), format!("the error must name the file: {e}"))?
        }
        Err(e) => return Err(format!("expected corruption at line 2, got {e}").into()),
        Ok(_) => return Err("a corrupted cache was used".into()),
    }
    ensure(std::fs::read_to_string(&file)? == text, "the corrupted cache was modified")
}

// ----------------------------------------------------------------------------------------
// Inputs kept on the device between jobs.
// ----------------------------------------------------------------------------------------

/// The OpenCL backend, with one fault added: it zeroes a worker's kept copy of an input
/// array (see `InputCache` in peak-backend) just before a job copies from it, as a kernel
/// of an earlier job writing far past its own buffers could have. A kept copy is told
/// from other buffers by its use: written from the host once, then the source of copies
/// in more than one job (a launch between them). `damage-every:N` damages every Nth such
/// copy; `damage-once:FILE` the first, in the first worker that finds FILE absent (it
/// creates it), so the workers after it run clean. `slow-compile:FILE` damages nothing, and
/// before compiling a source that names `PEAK_TEST_SLOW_COMPILE` waits until FILE exists
/// (at most [`GATE_LIMIT`]).
struct Damaging {
    inner: peak_opencl::OpenClBackend,
    /// Buffers copied from since they were last written, with the launch count then.
    sources: std::sync::Mutex<std::collections::HashMap<peak_backend::BufferId, usize>>,
    launches: std::sync::atomic::AtomicUsize,
    eligible: std::sync::atomic::AtomicUsize,
    every: usize,
    once: Option<PathBuf>,
    slow_compile: Option<PathBuf>,
}

impl Damaging {
    fn new(inner: peak_opencl::OpenClBackend, how: &str) -> Damaging {
        let (every, once, slow_compile) = match how.split_once(':') {
            Some(("damage-every", n)) => (n.parse().expect("damage-every:N"), None, None),
            Some(("damage-once", file)) => (1, Some(PathBuf::from(file)), None),
            Some(("slow-compile", gate)) => (0, None, Some(PathBuf::from(gate))),
            _ => panic!("unknown worker kind {how}"),
        };
        Damaging { inner, sources: Default::default(), launches: Default::default(), eligible: Default::default(), every, once, slow_compile }
    }

    fn damages_now(&self, src: peak_backend::BufferId) -> bool {
        use std::sync::atomic::Ordering::SeqCst;
        let launches = self.launches.load(SeqCst);
        let first_use = *self.sources.lock().unwrap().entry(src).or_insert(launches);
        if first_use == launches {
            return false;
        }
        let n = self.eligible.fetch_add(1, SeqCst) + 1;
        match &self.once {
            None if self.every == 0 => false,
            None => n.is_multiple_of(self.every),
            Some(file) => n == 1 && std::fs::OpenOptions::new().write(true).create_new(true).open(file).is_ok(),
        }
    }
}

impl peak_backend::Backend for Damaging {
    fn device(&self) -> &peak_backend::DeviceInfo {
        self.inner.device()
    }
    fn compile(&self, request: &peak_backend::CompileRequest) -> Result<peak_backend::Module, peak_backend::BackendError> {
        if let Some(gate) = self.slow_compile.as_ref().filter(|_| request.source.contains("PEAK_TEST_SLOW_COMPILE")) {
            let started = Instant::now();
            while !gate.exists() && started.elapsed() < GATE_LIMIT {
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        self.inner.compile(request)
    }
    fn alloc(&self, bytes: usize) -> Result<peak_backend::BufferId, peak_backend::BackendError> {
        self.inner.alloc(bytes)
    }
    fn free(&self, buffer: peak_backend::BufferId) {
        self.inner.free(buffer)
    }
    fn write(&self, buffer: peak_backend::BufferId, data: &[u8]) -> Result<(), peak_backend::BackendError> {
        self.sources.lock().unwrap().remove(&buffer);
        self.inner.write(buffer, data)
    }
    fn read(&self, buffer: peak_backend::BufferId, out: &mut [u8]) -> Result<(), peak_backend::BackendError> {
        self.inner.read(buffer, out)
    }
    fn copy(&self, src: peak_backend::BufferId, dst: peak_backend::BufferId, bytes: usize) -> Result<(), peak_backend::BackendError> {
        if self.damages_now(src) {
            self.inner.write(src, &vec![0u8; bytes])?;
        }
        self.inner.copy(src, dst, bytes)
    }
    fn fill(&self, buffer: peak_backend::BufferId, pattern: &[u8], bytes: usize) -> Result<(), peak_backend::BackendError> {
        self.sources.lock().unwrap().remove(&buffer);
        self.inner.fill(buffer, pattern, bytes)
    }
    fn launch(&self, module: &peak_backend::Module, launch: &peak_backend::Launch) -> Result<(), peak_backend::BackendError> {
        self.launches.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.inner.launch(module, launch)
    }
    fn record_event(&self) -> Result<peak_backend::EventId, peak_backend::BackendError> {
        self.inner.record_event()
    }
    fn elapsed_ms(&self, start: peak_backend::EventId, end: peak_backend::EventId) -> Result<f64, peak_backend::BackendError> {
        self.inner.elapsed_ms(start, end)
    }
    fn synchronize(&self) -> Result<(), peak_backend::BackendError> {
        self.inner.synchronize()
    }
}

/// Kept inputs that a wild write damaged fail the next variants' comparisons; each such
/// variant is run again from the host's inputs, so the verdicts are those of an undamaged
/// run: the same winner, and exactly the wrong variants failed.
fn damaged_kept_inputs_never_fail_a_correct_variant() -> Result<(), Failed> {
    let t = tunable("1, 8, 32");
    let cache = tempfile::tempdir().unwrap();
    let space = t.ctx.space();
    let mut workers = damaging_workers(Duration::from_secs(60), "damage-every:3".into());
    let report = tune_context(&mut workers, &setup(&t.ctx, &space, cache.path(), StrategyKind::Exhaustive, None), &())?;
    let run = &report.runs[0];
    ensure(run.failures.get("wrong-output") == Some(&6) && run.failures.len() == 1, format!("only the WRONG = 1 variants may fail: {:?}", run.failures))?;
    ensure(run.top.len() == 6 && run.top.iter().all(|e| e.tuning["WRONG"] == 0), format!("{:?}", run.top))?;
    let best = run.best.as_ref().ok_or("no winner")?;
    ensure(best.tuning["REPEAT"] == 1, format!("winner {:?}", best.tuning))?;
    ensure(run.time_breakdown.reruns > 0, format!("the damage was never caught: {:?}", run.time_breakdown))?;
    ensure(report.worker_restarts == 0, "a damaged input needs no new worker")
}

/// A variant that hangs on damaged kept inputs (here: loops until its input holds ones) is
/// not blamed: the parent runs it again, alone, on a fresh worker, where it passes.
fn a_hang_on_damaged_kept_inputs_gets_a_second_chance() -> Result<(), Failed> {
    let ones = ARRAYS.replacen("init = \"random\"\nseed = 1", "init = \"ones\"\nseed = 1", 1);
    let device = vadd("if (a[i] != 1.0f) { while (1) { out[i] += 1.0f; } }\n out[i] = a[i] + 2.0f * b[i];");
    let fussy = context("n = { values = [4097] }", &ones, "[tuning]\nBS = { values = [16, 32, 64, 128, 256] }\n", &device, HOST);
    let cache = tempfile::tempdir().unwrap();
    let marker = cache.path().join("damaged");
    let space = fussy.ctx.space();
    let mut workers = damaging_workers(Duration::from_secs(5), format!("damage-once:{}", marker.display()));
    let report = tune_context(&mut workers, &setup(&fussy.ctx, &space, cache.path(), StrategyKind::Exhaustive, None), &())?;
    let run = &report.runs[0];
    ensure(marker.exists(), "the worker never damaged its kept inputs")?;
    ensure(
        run.measured == 5 && run.failures.is_empty() && run.top.len() == 5,
        format!("no variant may be blamed for the damage: {:?} {:?}", run.failures, run.failure_examples),
    )?;
    ensure(report.worker_restarts == 1, format!("{} worker restarts, expected the one after the hang", report.worker_restarts))
}
