//! The autonomous mode against the scripted LLM server (OpenAI protocol), on OpenCL: the
//! planner's and the transformer's replies are written here in order. The fixture kernel
//! computes its product REPEAT times, and the fixture transformations only change that
//! number, so one checkpoint is 16x faster than the root and another 64x slower than the
//! best: backtracking decisions depend on nothing as fickle as a few percent of timing.
// Helpers outside #[test] functions unwrap too; clippy's allow-unwrap-in-tests does not reach them here (rust-clippy#13981).
#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;

use common::Failed;
use peak_apply::auto::{AutoEvent, AutoOptions, Stopped, read_log, run};
use peak_apply::{ApplyOptions, InitOptions, Settings};
use peak_transform::testing::{FakeLlmServer, Scripted};
use peak_workflow::Workflow;

fn main() {
    common::main(vec![
        ("a_regression_is_backtracked_to_the_best_checkpoint_on_a_new_branch", true, a_regression_is_backtracked_to_the_best_checkpoint_on_a_new_branch),
        ("a_failure_away_from_the_best_backtracks_and_the_budget_stops_the_run", true, a_failure_away_from_the_best_backtracks_and_the_budget_stops_the_run),
        ("the_lock_is_held_while_the_planner_thinks_and_between_steps", true, the_lock_is_held_while_the_planner_thinks_and_between_steps),
        ("an_endpoint_that_is_down_fails_the_run_at_once", true, an_endpoint_that_is_down_fails_the_run_at_once),
    ]);
}

fn plan(transformation: &str, reasoning: &str) -> Scripted {
    Scripted::reply(format!(r#"{{"action": "apply", "transformation": "{transformation}", "reasoning": "{reasoning}"}}"#))
}

fn region(text: &str) -> Scripted {
    Scripted::reply(format!("```c\n{text}\n```"))
}

/// A device region that computes half of every dot product.
const WRONG_DEVICE: &str = "\
__kernel void matmul(__global const float* A, __global const float* B, __global float* C, int n) {
    int col = get_global_id(0);
    int row = get_global_id(1);
    if (row < n && col < n) {
        float acc = 0.0f;
        for (int r = 0; r < REPEAT; ++r) {
            for (int k = 0; k < n / 2; ++k) {
                acc += A[row * n + k] * B[k * n + col];
            }
        }
        C[row * n + col] = acc / REPEAT;
    }
}";

struct Setup {
    runtime: tokio::runtime::Runtime,
    server: FakeLlmServer,
    _tmp: tempfile::TempDir,
    wf: std::path::PathBuf,
    options: AutoOptions,
    settings: peak_mcp::Settings,
}

fn setup(script: Vec<Scripted>) -> Setup {
    let tmp = tempfile::tempdir().unwrap();
    let settings = common::settings(&tmp.path().join("cache"));
    let wf = tmp.path().join("wf");
    let mut workers = settings.workers_for(&Default::default());
    let init = InitOptions { settings: Settings { cache_dir: settings.cache_dir.clone(), ..Settings::default() }, ..InitOptions::default() };
    peak_apply::init_workflow(&wf, &common::fixture("repeat"), &init, &mut workers, &()).expect("the workflow starts");
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let server = runtime.block_on(FakeLlmServer::start(script)).unwrap();
    let executor = format!("openai-compat:{}:fake-coder", server.openai_base_url());
    let options = AutoOptions {
        executor,
        budget: 5,
        apply: ApplyOptions {
            retries: 0,
            settings: Settings { samples: 2, library_dirs: settings.library_dirs.clone(), cache_dir: settings.cache_dir.clone(), ..Settings::default() },
            ..ApplyOptions::default()
        },
        ..AutoOptions::default()
    };
    Setup { runtime, server, _tmp: tmp, wf, options, settings }
}

fn kinds(events: &[AutoEvent]) -> Vec<String> {
    events
        .iter()
        .map(|e| match &e.transformation {
            Some(t) => format!("{} {t}", e.event),
            None => e.event.clone(),
        })
        .collect()
}

fn checkpoint_of(wf: &Path, transformation: &str) -> String {
    let entries = Workflow::open(wf).unwrap().log().unwrap();
    let found: Vec<_> = entries.iter().filter(|e| e.transformation.as_deref() == Some(transformation)).collect();
    assert_eq!(found.len(), 1, "one checkpoint of {transformation}: {entries:?}");
    found[0].id.to_string()
}

fn a_regression_is_backtracked_to_the_best_checkpoint_on_a_new_branch() -> Result<(), Failed> {
    let s = setup(vec![
        plan("Once", "the product is computed 16 times; once is enough"),
        region("#define REPEAT 1"),
        plan("repeat-more", "trying more repetitions"),
        region("#define REPEAT 64"),
        Scripted::reply("Unroll looks best to me."),
        plan("Unroll", "unrolling the k loop removes loop overhead"),
        region(WRONG_DEVICE),
        plan("Unroll", "unrolling again"),
        Scripted::reply(r#"{"action": "stop", "transformation": "", "reasoning": "nothing else is likely to help"}"#),
    ]);
    let mut workers = s.settings.workers_for(&Default::default());
    let report = run(&s.wf, &s.options, &mut workers, &())?;

    assert_eq!(report.stopped, Stopped::Planner);
    assert_eq!(report.applied, 3);
    assert_eq!(
        kinds(&report.events),
        [
            "plan Once",
            "checkpoint Once",
            "plan Repeat-More",
            "regression Repeat-More",
            "backtrack Repeat-More",
            "decision-failure",
            "plan Unroll",
            "failed Unroll",
            "decision-failure",
            "stop",
        ]
    );
    let once = checkpoint_of(&s.wf, "Once");
    let more = checkpoint_of(&s.wf, "Repeat-More");
    let backtrack = &report.events[4];
    assert_eq!((backtrack.checkpoint.as_deref(), backtrack.branch.as_deref()), (Some(once.as_str()), Some("auto-1")));
    assert!(report.events[3].detail.as_deref().unwrap().contains("slower than the best"), "{:?}", report.events[3]);
    assert!(report.events[5].detail.as_deref().unwrap().contains("not the JSON object"), "{:?}", report.events[5]);
    assert!(
        report.events[8].detail.as_deref().unwrap().contains("Unroll already failed from this checkpoint"),
        "a failed step is not repeated: {:?}",
        report.events[8]
    );
    assert_eq!(
        (report.events[3].at.as_str(), report.events[4].at.as_str()),
        (once.as_str(), more.as_str()),
        "the regression started at Once; the backtrack left Repeat-More"
    );
    assert_eq!(report.events[0].reasoning.as_deref(), Some("the product is computed 16 times; once is enough"), "decisions keep their reasoning");

    // The workflow: the slow line stays on main for the record; work continues on auto-1
    // from the best checkpoint, where the failed Unroll left nothing.
    let wf = Workflow::open(&s.wf)?;
    let head = wf.head()?;
    assert_eq!((head.id.to_string(), head.branch.as_deref()), (once.clone(), Some("auto-1")));
    assert_eq!(wf.resolve("main")?.to_string(), more);
    assert_eq!(report.best.as_ref().map(|b| b.0.as_str()), Some(once.as_str()));
    let attempts = wf.attempts()?;
    assert!(
        attempts.records.iter().any(|r| r.attempt.transformation == "Unroll" && r.attempt.outcome == peak_workflow::AttemptOutcome::WrongOutput),
        "{attempts:?}"
    );

    // The log on disk is the report's events.
    assert_eq!(read_log(&s.wf)?, report.events);

    // What the planner was shown: after the backtrack it plans from the best checkpoint,
    // sees the regression, and a retry says why the last reply was unusable.
    let prompts: Vec<String> = s.server.requests().iter().filter_map(|r| r.prompt()).collect();
    assert_eq!(prompts.len(), 9);
    assert!(prompts[0].contains("## Transformations") && prompts[0].contains("- Once:") && prompts[0].contains("#define REPEAT 16"), "{}", prompts[0]);
    assert!(!prompts[0].contains("- Tensor-Core:"), "only transformations for OpenCL are offered");
    assert!(prompts[4].contains(&format!("## Current checkpoint {}", &once[..10])) && prompts[4].contains("regression Repeat-More"), "{}", prompts[4]);
    assert!(prompts[5].contains("could not be used") && prompts[5].contains("not the JSON object"), "{}", prompts[5]);
    assert!(prompts[7].contains("Unroll") && prompts[7].contains("wrong-output"), "the failure is in the history: {}", prompts[7]);
    drop(s.runtime);
    Ok(())
}

fn a_failure_away_from_the_best_backtracks_and_the_budget_stops_the_run() -> Result<(), Failed> {
    let mut s =
        setup(vec![plan("Repeat-More", "more work per thread"), region("#define REPEAT 64"), plan("Unroll", "fewer loop branches"), region(WRONG_DEVICE)]);
    s.options.budget = 2;
    // Slower than the root but within this threshold: the run continues from it.
    s.options.regression = 100.0;
    let mut workers = s.settings.workers_for(&Default::default());
    let report = run(&s.wf, &s.options, &mut workers, &())?;

    assert_eq!(report.stopped, Stopped::Budget);
    assert_eq!(kinds(&report.events), ["plan Repeat-More", "checkpoint Repeat-More", "plan Unroll", "failed Unroll", "backtrack Unroll", "budget-spent"]);
    let wf = Workflow::open(&s.wf)?;
    let root = wf.resolve("root")?.to_string();
    let more = checkpoint_of(&s.wf, "Repeat-More");
    assert_eq!(report.events[3].at, more, "Unroll was tried from the slow checkpoint");
    assert_eq!(report.events[4].checkpoint.as_deref(), Some(root.as_str()), "the root is the best checkpoint");
    let head = wf.head()?;
    assert_eq!((head.id.to_string(), head.branch.as_deref()), (root, Some("auto-1")));
    assert_eq!(s.server.requests().len(), 4, "the budget stops the run before another plan");
    Ok(())
}

/// The lock file's record, once its writer has written it whole (it is rewritten in place).
fn lock_record(wf: &Path) -> serde_json::Value {
    let started = std::time::Instant::now();
    loop {
        let text = std::fs::read_to_string(wf.join(".git/peak/lock")).unwrap_or_default();
        if let Ok(record) = serde_json::from_str::<serde_json::Value>(text.trim()) {
            return record;
        }
        assert!(started.elapsed() < std::time::Duration::from_secs(30), "no lock record: {text:?}");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

fn the_lock_is_held_while_the_planner_thinks_and_between_steps() -> Result<(), Failed> {
    let late = |answer: Scripted| answer.delayed(std::time::Duration::from_millis(1500));
    let stop = Scripted::reply(r#"{"action": "stop", "transformation": "", "reasoning": "fast enough"}"#);
    let s = setup(vec![late(plan("Once", "once is enough")), region("#define REPEAT 1"), late(stop)]);
    let (wf, options, workers) = (s.wf.clone(), s.options.clone(), s.settings.workers.clone());
    let running = std::thread::spawn(move || run(&wf, &options, &mut workers(&Default::default()), &()));
    let asked = |n: usize| {
        let started = std::time::Instant::now();
        while s.server.requests().len() < n {
            assert!(!running.is_finished(), "the run ended before question {n}");
            assert!(started.elapsed() < std::time::Duration::from_secs(120), "question {n} never came");
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    };

    // While the planner thinks, before any step: the run holds the lock, and a checkout is
    // refused naming it instead of moving HEAD under the step to come.
    asked(1);
    let first = lock_record(&s.wf);
    assert_eq!(first["session"], "auto", "{first}");
    let refused = Workflow::open(&s.wf)?.checkout("root", false).err().ok_or("a checkout while auto runs went through")?;
    assert!(refused.to_string().contains("running auto"), "{refused}");
    // After the step, while the planner thinks again: the same lock, never let go between.
    asked(3);
    assert_eq!(lock_record(&s.wf)["started"], first["started"], "the lock was released between the questions and the step");

    let report = running.join().expect("the run does not panic")?;
    assert_eq!((report.stopped, report.applied), (Stopped::Planner, 1));
    let once = checkpoint_of(&s.wf, "Once");
    let head = Workflow::open(&s.wf)?.head()?;
    assert_eq!((head.id.to_string(), head.branch.as_deref()), (once, Some("main")));
    assert_eq!(std::fs::read_to_string(s.wf.join(".git/peak/lock"))?, "", "released at the end");
    Ok(())
}

fn an_endpoint_that_is_down_fails_the_run_at_once() -> Result<(), Failed> {
    let s = setup(Vec::new());
    // A port nothing listens on: the one a listener had a moment ago.
    let down = format!("http://{}/v1", std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?);
    let head = Workflow::open(&s.wf)?.head()?.id.to_string();
    for (planner, executor) in
        [(format!("openai-compat:{down}:fake-planner"), s.options.executor.clone()), (s.options.executor.clone(), format!("openai-compat:{down}:fake-coder"))]
    {
        let options = AutoOptions { planner: Some(planner), executor, ..s.options.clone() };
        let started = std::time::Instant::now();
        let err = run(&s.wf, &options, &mut s.settings.workers_for(&Default::default()), &()).err().ok_or("a run with an endpoint down went on")?;
        assert!(started.elapsed() < std::time::Duration::from_secs(20), "retried for {:?} instead of failing at once", started.elapsed());
        let said = format!("{err:#}");
        assert!(said.contains(&down) && said.contains("checked before asking anything") && said.contains("hint: start the server"), "{said}");
    }
    assert_eq!(s.server.requests().len(), 0, "nothing was asked of the endpoint that is up either");
    assert_eq!(Workflow::open(&s.wf)?.head()?.id.to_string(), head);
    assert!(read_log(&s.wf)?.is_empty(), "no decision was logged");
    Ok(())
}
