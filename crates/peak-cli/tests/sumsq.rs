//! Grid-Accumulate (issue 24: one generic transformation over a kind-specific one) carried
//! through a full reduction of our own: the sum of the squares of an f32 vector into one
//! total (examples/sumsq-opencl: one work-item per element, a tree in local memory per
//! work-group, the work-group's partial added to the total with a compare-and-swap loop,
//! OpenCL 1.2 having no float atomic add). Walked Grid-Accumulate -> Vector-Body by the
//! agent executor following the prompts literally, validated on PoCL at n = 999999, 257
//! and 1; the recording is replayed here, and its steps are checked against the naive root
//! at odd lengths with the fewest and the most work-groups the tuning space allows.

mod support;

use support::{Env, context_at, example, opencl_present, s, unbundle};

#[test]
fn sum_of_squares_replays_grid_accumulate_then_vector_body() {
    if !opencl_present("sum_of_squares_replays_grid_accumulate_then_vector_body") {
        return;
    }
    let env = Env::new();
    let (recorded, wf) = (env.path("recorded"), env.path("wf"));
    let bundle = example("workflows/sumsq-opencl-agent.bundle");
    unbundle(&bundle, &recorded);
    env.ok(&["replay", &bundle, "--into", s(&wf), "--samples", "3", "--budget", "3", "--set", "n=65537"]);

    let log = env.json(&["log", "-w", s(&wf), "--json"]);
    let steps: Vec<(&str, &str, &str)> = log
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .map(|e| (e["transformation"].as_str().unwrap(), e["verdict"].as_str().unwrap_or("-"), e["model"].as_str().unwrap_or("-")))
        .collect();
    assert_eq!(&steps[1..], [("Grid-Accumulate", "passed", "agent"), ("Vector-Body", "passed", "agent")], "{log}");

    let file = |wf: &std::path::Path, rev: &str| env.json(&["show", rev, "-w", s(wf), "--json"])["files"]["kernel.cl"].as_str().unwrap().to_string();
    assert_eq!(file(&wf, "HEAD"), file(&recorded, "HEAD"), "the replay ends on the recorded kernel");
    let accumulated = file(&wf, "HEAD~1");
    let (device, host) = accumulated.split_once("// @peak host").unwrap();
    assert!(device.contains("get_global_size(0)") && device.contains("acc[ITEMS]"), "a grid-stride walk into ITEMS partials:\n{device}");
    assert_eq!(device.matches("atomic_add_float(total, part[0])").count(), 1, "the work-group's update of the total is kept, once:\n{device}");
    assert!(host.contains("COMPUTE_UNITS * WAVES") && host.contains("fill(total, 0.0)"), "WAVES work-groups per compute unit, the total still zeroed:\n{host}");
    assert!(file(&wf, "HEAD").contains("VEC_BYTES"), "Vector-Body's vectors");
}

/// The total does not depend on the grid: each recorded step is right against the naive
/// root at odd lengths (one element, one partial work-group, a tail after the vectors) with
/// one work-group per compute unit and with 32, and with 1 and 8 partials per work-item.
#[test]
fn the_recorded_steps_hold_at_any_grid() {
    if !opencl_present("the_recorded_steps_hold_at_any_grid") {
        return;
    }
    let env = Env::new();
    let recorded = env.path("recorded");
    let bundle = example("workflows/sumsq-opencl-agent.bundle");
    unbundle(&bundle, &recorded);
    let context_of = |rev: &str| context_at(&env, &recorded, rev);
    let naive = context_of("root");
    for (rev, extra) in [("HEAD~1", None), ("HEAD", Some("VEC_BYTES=4,8,16"))] {
        let candidate = context_of(rev);
        for (n, block) in [("1", "256"), ("3", "32"), ("4099", "64"), ("100001", "256")] {
            let mut args = vec![
                "validate".to_string(),
                s(&candidate).to_string(),
                "--against".into(),
                s(&naive).to_string(),
                "--samples".into(),
                "4".into(),
                "--sanitize".into(),
                "none".into(),
                "--set".into(),
                format!("n={n}"),
                "--set".into(),
                format!("BLOCK_X={block}"),
                "--set".into(),
                "WAVES=1,32".into(),
                "--set".into(),
                "ITEMS=1,8".into(),
                "--json".into(),
            ];
            if let Some(extra) = extra {
                args.extend(["--set".to_string(), extra.to_string()]);
            }
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let report = env.json(&args);
            assert_eq!(report["outcome"], "passed", "{rev} at n={n} BLOCK_X={block}: {report}");
            assert_eq!(report["counts"]["passed"], 4, "{rev} at n={n}: every sample was judged: {report}");
        }
    }
}
