//! The tuned winner goes through compute-sanitizer before it is recorded.
//!
//! Tuning measures many configurations, validation sanitized only a few, so the fastest
//! one can be a configuration whose tile sizes overrun an array or race in shared memory
//! where the samples did not. The winner is checked with the validation's tools; one with
//! a finding is dropped (listed in `performance.json`'s `sanitizer_rejected`, with the
//! findings) and the next of the top-K is checked, until one is clean. [`choose_clean`]
//! is that walk over any checker, so it is tested without a GPU.

use std::time::Instant;

use anyhow::Result;
use peak_eval::validate::Sample;
use peak_eval::{Validator, Verdict, Workers};
use peak_record::{PerformanceRecord, Ranked, Rejected, SanitizerWinner};
use peak_spec::rng::mix_seed;
use peak_spec::{Context, ExecParams, Space};
use serde_json::Map;

use crate::sanitize::{Plan, input_configurations, smallest_valid, tool_list, validator};

/// What a checker said about one configuration of the ranking.
#[derive(Debug, Clone)]
pub struct Checked {
    /// Where it ran.
    pub at: ExecParams,
    pub verdict: Verdict,
}

/// Walk `performance`'s ranking (`best`, then the rest of `top_k` in order) until `check`
/// finds a configuration with no failing verdict. The failing ones are recorded in
/// `sanitizer_rejected` and leave `top_k` (which seeds the next step's search); `best`
/// becomes the first clean one. Returns how many were checked and whether one was clean.
pub fn choose_clean(performance: &mut PerformanceRecord, mut check: impl FnMut(&Ranked) -> Result<Checked>) -> Result<(usize, bool)> {
    let Some(best) = performance.best.clone() else {
        return Ok((0, false));
    };
    let mut ranking = vec![best.clone()];
    ranking.extend(performance.top_k().iter().filter(|e| e.params != best.params).cloned());
    let mut rejected = Vec::new();
    let mut clean = None;
    for entry in ranking {
        let checked = check(&entry)?;
        if !checked.verdict.is_failure() {
            clean = Some(entry);
            break;
        }
        let verdict = serde_json::to_value(&checked.verdict)?;
        rejected.push(Rejected { params: entry.params, time_ms: entry.time_ms, sanitized_at: checked.at, verdict, extra: Map::new() });
    }
    if let Some(top_k) = &mut performance.top_k {
        top_k.retain(|e| !rejected.iter().any(|r| r.params == e.params));
    }
    let found = clean.is_some();
    let checked = rejected.len() + usize::from(found);
    if let Some(entry) = clean {
        performance.best = Some(entry);
    }
    performance.sanitizer_rejected = Some(rejected);
    Ok((checked, found))
}

/// Check `performance`'s winner on `ctx` and record the check as `sanitizer_winner` (`plan`
/// `None`: the check is turned off). Returns why nothing can be recorded when every
/// configuration of the top-K has a finding.
pub fn check_winner(
    workers: &mut Workers,
    plan: Option<&Plan>,
    ctx: &Context,
    space: &Space,
    seed: u64,
    performance: &mut PerformanceRecord,
) -> Result<Option<String>> {
    let not_run = |summary: &str| Some(SanitizerWinner { ran: false, summary: summary.to_string(), ..SanitizerWinner::default() });
    let (tools, program, at) = match plan {
        None => {
            performance.sanitizer_winner = not_run("off (--no-sanitize-winner)");
            return Ok(None);
        }
        Some(Plan::Off { reason }) => {
            performance.sanitizer_winner = not_run(reason);
            return Ok(None);
        }
        Some(Plan::Run { tools, program, at }) => (tools, program, at),
    };
    let started = Instant::now();
    let mut validator = validator(tools, program);
    // Small inputs, for the reason validation samples use them (see `sanitize::samples`);
    // where the space's sizes are too many to list, the winner runs where it was timed.
    let by_size = input_configurations(ctx, space, &[], at);
    let mut first_failure: Option<String> = None;
    let mut runs = 0u64;
    let (checked, clean) = choose_clean(performance, |entry| {
        let params = entry.params.clone();
        let mut run = |at: &ExecParams| -> Result<Verdict> {
            runs += 1;
            let sample = Sample { index: 0, params: at.clone(), data_seed: mix_seed(seed, "sanitizer-winner", runs) };
            Ok(validator.check(workers, ctx, &sample)?.unwrap_or(Verdict::Passed))
        };
        let mut at = smallest_valid(space, &by_size, &params.tuning).unwrap_or_else(|| params.clone());
        let mut verdict = run(&at)?;
        // The launch script may prune it at the small size: then it runs where it was timed.
        if matches!(verdict, Verdict::InvalidConfig { .. }) && at != params {
            at = params;
            verdict = run(&at)?;
        }
        if verdict.is_failure() && first_failure.is_none() {
            first_failure = Some(match &verdict {
                Verdict::SanitizerFinding { findings } if !findings.is_empty() => findings[0].headline(),
                other => other.summary(),
            });
        }
        Ok(Checked { at, verdict })
    })?;
    let names = tool_list(tools, ", ");
    let rejected = checked - usize::from(clean);
    let summary = match (clean, rejected) {
        (true, 0) => format!("{names}: the winner is clean"),
        (true, n) => format!("{names}: {n} faster configuration(s) had findings; the winner is the fastest clean one"),
        (false, _) => format!("{names}: all {checked} configuration(s) of the top-K have findings; first: {}", first_failure.as_deref().unwrap_or("-")),
    };
    performance.sanitizer_winner = Some(SanitizerWinner {
        ran: true,
        tools: Some(tools.iter().map(|t| t.name().to_string()).collect()),
        checked: Some(checked as u64),
        clean: Some(clean),
        summary: summary.clone(),
        elapsed_s: Some(started.elapsed().as_secs_f64()),
        extra: Map::new(),
    });
    Ok((!clean).then_some(summary))
}

#[cfg(test)]
mod tests {
    use peak_eval::sanitizer::Finding;
    use peak_record::Record;
    use serde_json::{Value, json};

    use super::*;

    fn entry(block: i64, ms: f64) -> Value {
        json!({ "params": { "inputs": { "n": 1024 }, "tuning": { "BLOCK": block } }, "time_ms": ms })
    }

    fn performance() -> PerformanceRecord {
        PerformanceRecord::from_json(&json!({ "best": entry(64, 1.0), "top_k": [entry(64, 1.0), entry(128, 1.1), entry(32, 1.2)], "runs": [] })).unwrap()
    }

    /// A fake sanitizer: the configurations in `dirty` have a memcheck finding.
    fn checker<'a>(dirty: &'static [i64], calls: &'a mut Vec<i64>) -> impl FnMut(&Ranked) -> Result<Checked> + 'a {
        move |entry| {
            let block = entry.params.tuning["BLOCK"];
            calls.push(block);
            let at: ExecParams = serde_json::from_value(json!({ "inputs": { "n": 64 }, "tuning": { "BLOCK": block } })).unwrap();
            let verdict = if dirty.contains(&block) {
                let finding = Finding {
                    tool: "memcheck".into(),
                    severity: "error".into(),
                    error: "Invalid __global__ write of size 4 bytes".into(),
                    kernel: Some("k".into()),
                    file: Some("kernel.cu".into()),
                    line: Some(7),
                    details: vec![],
                };
                Verdict::SanitizerFinding { findings: vec![finding] }
            } else {
                Verdict::Passed
            };
            Ok(Checked { at, verdict })
        }
    }

    #[test]
    fn a_clean_winner_is_kept_after_one_check() {
        let mut perf = performance();
        let mut calls = Vec::new();
        assert_eq!(choose_clean(&mut perf, checker(&[128], &mut calls)).unwrap(), (1, true));
        let perf = perf.to_json();
        assert_eq!(calls, [64]);
        assert_eq!(perf["best"], entry(64, 1.0));
        assert_eq!(perf["top_k"].as_array().unwrap().len(), 3);
        assert_eq!(perf["sanitizer_rejected"], json!([]));
    }

    #[test]
    fn a_dirty_winner_falls_back_to_the_next_clean_one() {
        let mut perf = performance();
        let mut calls = Vec::new();
        assert_eq!(choose_clean(&mut perf, checker(&[64, 128], &mut calls)).unwrap(), (3, true));
        let perf = perf.to_json();
        assert_eq!(calls, [64, 128, 32], "best first, then the top-K in order, best not twice");
        assert_eq!(perf["best"], entry(32, 1.2));
        assert_eq!(perf["top_k"], json!([entry(32, 1.2)]), "rejected configurations do not seed the next search");
        let rejected = perf["sanitizer_rejected"].as_array().unwrap();
        assert_eq!(rejected.len(), 2);
        assert_eq!(rejected[0]["params"], entry(64, 1.0)["params"]);
        assert_eq!(rejected[0]["time_ms"], 1.0);
        assert_eq!(rejected[0]["sanitized_at"]["inputs"]["n"], 64);
        assert_eq!(rejected[0]["verdict"]["category"], "sanitizer-finding");
        assert_eq!(rejected[0]["verdict"]["findings"][0]["line"], 7);
    }

    #[test]
    fn no_clean_configuration_is_reported() {
        let mut perf = performance();
        let mut calls = Vec::new();
        assert_eq!(choose_clean(&mut perf, checker(&[32, 64, 128], &mut calls)).unwrap(), (3, false));
        let perf = perf.to_json();
        assert_eq!(perf["sanitizer_rejected"].as_array().unwrap().len(), 3);
        assert_eq!(perf["top_k"], json!([]));
    }

    #[test]
    fn a_checker_error_stops_the_walk() {
        let mut perf = performance();
        let err = choose_clean(&mut perf, |_| Err(anyhow::anyhow!("compute-sanitizer wrote no report"))).unwrap_err();
        assert!(err.to_string().contains("no report"));
    }

    #[test]
    fn a_check_that_does_not_run_is_recorded_with_its_reason() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join("peak.toml"), "[kernel]\nname = \"k\"\nbackend = \"opencl\"\nsource = \"k.cl\"\n\n[inputs]\nn = { values = [4] }\n\n[[arrays]]\nname = \"X\"\ntype = \"f32\"\nsize = \"n\"\ninit = \"zeros\"\noutput = true\n").unwrap();
        std::fs::write(
            tmp.path().join("k.cl"),
            "// @peak macros\n// @peak device\n__kernel void k(__global float* X) {}\n// @peak host\nlaunch(\"k\", 1, 1, 0, X);\n",
        )
        .unwrap();
        let ctx = Context::load(tmp.path()).unwrap();
        let mut workers = Workers::new(Box::new(|_| panic!("no worker is started")), Default::default());
        let plan = Plan::Off { reason: "none for opencl".into() };
        for (plan, summary) in [(Some(&plan), "none for opencl"), (None, "off (--no-sanitize-winner)")] {
            let mut perf = performance();
            assert_eq!(check_winner(&mut workers, plan, &ctx, &ctx.space(), 1, &mut perf).unwrap(), None);
            let perf = perf.to_json();
            assert_eq!(perf["sanitizer_winner"], json!({ "ran": false, "summary": summary }));
            assert_eq!(perf["best"], entry(64, 1.0));
        }
    }
}
