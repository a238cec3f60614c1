//! Strategies judged on replayed results, Kernel Tuner style: no device needed.
// Helpers outside #[test] functions unwrap too; clippy's allow-unwrap-in-tests does not reach them here (rust-clippy#13981).
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};

use indexmap::IndexMap;
use peak_eval::cache::{CacheIdentity, Measurement, Outcome, Record, ResultsCache};
use peak_eval::simulation::{Recording, simulate};
use peak_eval::verdict::Verdict;
use peak_eval::{SearchSpace, StrategyKind};

/// A rugged but structured landscape over five ordinal parameters, like a tiled kernel's:
/// a bowl with an interaction term, a secondary basin, multiplicative noise, and a band of
/// configurations that fail.
fn landscape() -> (SearchSpace, Vec<Outcome>) {
    let values: Vec<Vec<i64>> = vec![(0..6).collect(), (0..6).collect(), (0..4).collect(), (0..4).collect(), (0..3).collect()];
    let names = ["BX", "BY", "TX", "TY", "KT"].map(String::from).to_vec();
    let space = SearchSpace::build(IndexMap::new(), names, values, |p| p[0] + p[1] <= 7 && p[2] * p[3] <= 4).unwrap();
    let outcomes = (0..space.len())
        .map(|i| {
            let p: Vec<f64> = space.tuning(i).values().map(|&v| v as f64).collect();
            let bowl = 0.08 * (p[0] - 4.0).powi(2)
                + 0.06 * (p[1] - 2.0).powi(2)
                + 0.2 * (p[2] - 2.0).powi(2)
                + 0.15 * (p[3] - 1.0).powi(2)
                + 0.1 * (p[4] - 1.0).powi(2);
            let coupling = 0.05 * (p[0] - 4.0) * (p[2] - 2.0);
            let basin = 0.4 * (-(p[0] - 1.0).powi(2) - (p[1] - 6.0).powi(2)).exp();
            let hash = (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40;
            let noise = 1.0 + 0.04 * ((hash % 1000) as f64 / 1000.0 - 0.5);
            if (p[2] + p[3]) as i64 == 4 && p[4] as i64 == 2 {
                Outcome::Failed { verdict: Verdict::InvalidConfig { reason: "too many registers".into() } }
            } else {
                let ms = (1.0 + bowl + coupling.abs() - basin) * noise;
                Outcome::Measured(Measurement { median_ms: ms, min_ms: ms, times_ms: vec![ms], compile_ms: 0.0, run_ms: 0.0, kernels: vec![] })
            }
        })
        .collect();
    (space, outcomes)
}

struct Quality {
    success: f64,
    mean_ratio: f64,
}

fn quality(space: &SearchSpace, outcomes: &[Outcome], kind: StrategyKind, fraction: f64, seeds: u64) -> Quality {
    let best = outcomes.iter().filter_map(Outcome::cost).fold(f64::INFINITY, f64::min);
    let budget = ((space.len() as f64 * fraction).ceil() as usize).max(1);
    let mut hits = 0;
    let mut sum = 0.0;
    for seed in 1..=seeds {
        let trace = simulate(space, outcomes, kind, seed, budget).unwrap();
        assert_eq!(trace.len(), budget, "{kind:?} stopped early");
        let found = trace.last().copied().flatten().unwrap_or(f64::INFINITY);
        hits += usize::from(found <= best * 1.02);
        sum += found / best;
    }
    Quality { success: hits as f64 / seeds as f64, mean_ratio: sum / seeds as f64 }
}

#[test]
fn exhaustive_replay_finds_the_recorded_best() {
    let (space, outcomes) = landscape();
    let best = outcomes.iter().filter_map(Outcome::cost).fold(f64::INFINITY, f64::min);
    let trace = simulate(&space, &outcomes, StrategyKind::Exhaustive, 1, space.len()).unwrap();
    assert_eq!(trace.len(), space.len());
    assert_eq!(trace.last().copied().flatten(), Some(best));
}

#[test]
fn auto_beats_random_on_a_synthetic_landscape() {
    let (space, outcomes) = landscape();
    let auto = quality(&space, &outcomes, StrategyKind::Auto, 0.10, 12);
    let random = quality(&space, &outcomes, StrategyKind::Random, 0.10, 12);
    eprintln!(
        "synthetic, {} points: auto {:.0}% within 2%, mean ratio {:.4}; random {:.0}%, {:.4}",
        space.len(),
        auto.success * 100.0,
        auto.mean_ratio,
        random.success * 100.0,
        random.mean_ratio
    );
    assert!(auto.mean_ratio < random.mean_ratio, "auto {:.4} vs random {:.4}", auto.mean_ratio, random.mean_ratio);
    assert!(auto.success > random.success, "auto {} vs random {}", auto.success, random.success);
}

#[test]
fn a_recording_round_trips_through_the_cache_format() {
    let dir = tempfile::tempdir().unwrap();
    let identity = CacheIdentity { source_hash: "s".into(), device: "d".into(), backend: "opencl".into(), reference: "s".into() };
    let (space, outcomes) = landscape();
    let inputs: IndexMap<String, i64> = [("n".to_string(), 64)].into_iter().collect();
    let path = identity.file_in(dir.path());
    {
        let mut cache = ResultsCache::open(&path, &identity).unwrap();
        for (i, outcome) in outcomes.iter().enumerate().take(50) {
            cache.insert(Record { inputs: inputs.clone(), tuning: space.tuning(i), outcome: outcome.clone(), at: 0 }).unwrap();
        }
    }
    let recording = Recording::load(&path).unwrap();
    let (replayed, answers) = recording.space(&inputs).unwrap();
    assert_eq!(replayed.len(), 50);
    for (i, answer) in answers.iter().enumerate() {
        let original = space.find(&replayed.tuning(i)).unwrap();
        assert_eq!(*answer, outcomes[original]);
    }
}

fn recordings() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../bench/recordings");
    let mut files: Vec<PathBuf> =
        std::fs::read_dir(&dir).into_iter().flatten().flatten().map(|e| e.path()).filter(|p| p.extension().is_some_and(|e| e == "jsonl")).collect();
    files.sort();
    files
}

#[test]
fn auto_beats_random_on_recorded_caches() {
    let files = recordings();
    if files.is_empty() {
        eprintln!("SKIPPED auto_beats_random_on_recorded_caches: no recorded caches in bench/recordings");
        return;
    }
    // Per space, auto gets within 2% at least as often; over all spaces, its best is
    // closer on average. (On a noisy plateau, such as PoCL's conv2d, both find the plateau
    // and the average alone can tip either way.)
    let (mut auto_sum, mut random_sum, mut spaces) = (0.0, 0.0, 0);
    for file in files {
        let recording = Recording::load(&file).unwrap();
        for (inputs, _) in &recording.groups {
            let (space, outcomes) = recording.space(inputs).unwrap();
            let auto = quality(&space, &outcomes, StrategyKind::Auto, 0.10, 40);
            let random = quality(&space, &outcomes, StrategyKind::Random, 0.10, 40);
            eprintln!(
                "{}: auto {:.0}% within 2%, mean ratio {:.4}; random {:.0}%, {:.4}",
                file.display(),
                auto.success * 100.0,
                auto.mean_ratio,
                random.success * 100.0,
                random.mean_ratio
            );
            assert!(auto.success >= random.success, "{}: auto {} vs random {}", file.display(), auto.success, random.success);
            auto_sum += auto.mean_ratio;
            random_sum += random.mean_ratio;
            spaces += 1;
        }
    }
    assert!(auto_sum < random_sum, "over {spaces} spaces: auto {:.4} vs random {:.4}", auto_sum / spaces as f64, random_sum / spaces as f64);
}

#[test]
fn a_previous_top_k_is_evaluated_first_and_foreign_values_move_to_the_nearest_point() {
    use peak_eval::simulation::ReplayMeasurer;
    use peak_eval::tune::TopK;
    use peak_eval::{TuneOptions, tune};

    let (space, outcomes) = landscape();
    let best = (0..space.len())
        .filter(|&i| outcomes[i].cost().is_some())
        .min_by(|&a, &b| outcomes[a].cost().unwrap().total_cmp(&outcomes[b].cost().unwrap()))
        .unwrap();
    // A top-K from an earlier transformation: the best point, and a point in the terms of
    // a space that had an extra parameter and a value this one lacks.
    let mut foreign = space.tuning(best);
    foreign.insert("BX".into(), 99);
    foreign.insert("UNROLL".into(), 4);
    let previous = TopK {
        source_hash: "earlier".into(),
        device: "d".into(),
        inputs: IndexMap::new(),
        entries: [space.tuning(best), foreign]
            .into_iter()
            .map(|tuning| peak_eval::tune::Entry { tuning, median_ms: 1.0, min_ms: 1.0, repetitions: 1, spread: None, kernels: vec![] })
            .collect(),
    };
    let text = serde_json::to_string(&previous).unwrap();
    let previous: TopK = serde_json::from_str(&text).unwrap();

    let mut measurer = ReplayMeasurer::new(outcomes.clone());
    let options = TuneOptions { strategy: StrategyKind::Random, budget: Some(5), start_from: previous.start_points(), ..TuneOptions::default() };
    let run = tune(&space, &mut measurer, None, &options, &()).unwrap();
    assert_eq!(measurer.asked[0], best, "the previous best is tried first");
    let second = space.tuning(measurer.asked[1]);
    assert_eq!(second["BX"], *space.values(0).last().unwrap(), "BX=99 moves to the largest BX: {second:?}");
    assert_eq!(run.best.unwrap().tuning, space.tuning(best));
    assert_eq!(run.evaluations, 5);
}

#[test]
fn carried_points_take_half_the_budget_and_single_parameter_changes_find_what_they_missed() {
    use peak_eval::simulation::ReplayMeasurer;
    use peak_eval::{TuneOptions, tune};

    // Separable costs over six parameters; the best point has SPLIT = 0. The carried
    // ranking (as from a parent whose kernel liked splitting) holds only SPLIT = 2 points,
    // fastest first, more of them than the whole budget.
    let names = ["A", "B", "C", "D", "E", "SPLIT"].map(String::from).to_vec();
    let values: Vec<Vec<i64>> = vec![(0..5).collect(), (0..5).collect(), (0..4).collect(), (0..4).collect(), (0..3).collect(), (0..3).collect()];
    let space = SearchSpace::build(IndexMap::new(), names, values, |_| true).unwrap();
    let cost = |t: &IndexMap<String, i64>| {
        let d = |n: &str, best: i64| (t[n] - best).pow(2) as f64;
        1.0 + 0.05 * (d("A", 3) + d("B", 1) + d("C", 2) + d("D", 0) + d("E", 1)) + 0.5 * d("SPLIT", 0).sqrt()
    };
    let outcomes: Vec<Outcome> = (0..space.len())
        .map(|i| {
            let ms = cost(&space.tuning(i));
            Outcome::Measured(Measurement { median_ms: ms, min_ms: ms, times_ms: vec![ms], compile_ms: 0.0, run_ms: 0.0, kernels: vec![] })
        })
        .collect();
    let mut carried: Vec<usize> = (0..space.len()).filter(|&i| space.tuning(i)["SPLIT"] == 2).collect();
    carried.sort_by(|&a, &b| cost(&space.tuning(a)).total_cmp(&cost(&space.tuning(b))));
    let budget = 24;
    assert!(carried.len() > budget);

    let mut measurer = ReplayMeasurer::new(outcomes.clone());
    let options = TuneOptions { budget: Some(budget), start_from: carried.iter().map(|&i| space.tuning(i)).collect(), ..TuneOptions::default() };
    let run = tune(&space, &mut measurer, None, &options, &()).unwrap();
    assert_eq!(run.evaluations, budget);
    assert_eq!(measurer.asked[..budget / 2], carried[..budget / 2], "the carried ranking comes first, in order, for half the budget");
    assert!(measurer.asked[budget / 2..].iter().all(|p| !carried[..budget / 2].contains(p)));
    let best = run.best.unwrap().tuning;
    assert_eq!(best["SPLIT"], 0, "changing SPLIT alone beats every carried point: {best:?}");
    assert_eq!(best, space.tuning(carried[0]).into_iter().map(|(k, v)| (k.clone(), if k == "SPLIT" { 0 } else { v })).collect::<IndexMap<_, _>>());
}
