//! The report of every recorded workflow shipped with peak (examples/workflows and the
//! H200 replays in bench/results), read straight from the bundles: no device needed.
// Helpers outside #[test] functions unwrap too; clippy's allow-unwrap-in-tests does not reach them here (rust-clippy#13981).
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};

use peak_report::{figures, gather_one, html, tables};

fn bundles() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut out: Vec<PathBuf> = ["examples/workflows", "bench/results"]
        .iter()
        .flat_map(|d| std::fs::read_dir(root.join(d)).unwrap().map(|e| e.unwrap().path()))
        .filter(|p| p.extension().is_some_and(|e| e == "bundle"))
        .collect();
    out.sort();
    assert!(out.len() >= 4, "the recorded workflows are missing: {out:?}");
    out
}

/// Attribute values of `name="..."` in an HTML or SVG text.
fn attributes<'a>(text: &'a str, name: &str) -> Vec<&'a str> {
    let key = format!("{name}=\"");
    text.match_indices(&key).map(|(i, _)| &text[i + key.len()..]).map(|rest| &rest[..rest.find('"').unwrap_or(rest.len())]).collect()
}

#[test]
fn every_recorded_workflow_reports_its_chains_with_the_logs_speedups() {
    for path in bundles() {
        let w = gather_one(&path).unwrap();
        let wf = peak_report::data::open(&path).unwrap();
        let log = wf.workflow.log().unwrap();
        assert!(!w.series.is_empty(), "{}: no series", path.display());
        for s in &w.series {
            // Each series runs from the root (no parent) to a branch tip, each step's parent the one before.
            let root = log.iter().find(|e| e.id.short() == s.steps[0].id).unwrap();
            assert!(root.parents.is_empty(), "{}: series {} does not start at a root", path.display(), s.name);
            for pair in s.steps.windows(2) {
                let entry = log.iter().find(|e| e.id.short() == pair[1].id).unwrap();
                assert_eq!(entry.parents[0].short(), pair[0].id, "{}: {} is not the parent of {}", path.display(), pair[0].id, pair[1].id);
                assert_eq!(entry.speedup_over_root, pair[1].speedup_over_root);
                assert_eq!(entry.speedup_over_parent, pair[1].speedup_over_previous);
            }
        }
        let text = tables::render_workflow(&w);
        for heading in ["speedup per step", "success per executor x transformation", "evaluation depth", "time breakdown", "tuning convergence"] {
            assert!(text.contains(heading), "{}: no {heading} table:\n{text}", path.display());
        }
        let figs = figures::all(&w).unwrap();
        assert_eq!(figs.len(), 6);
        for f in &figs {
            assert!(f.svg.starts_with("<svg") && f.svg.trim_end().ends_with("</svg>"), "{}: {} is not one SVG", path.display(), f.id);
            assert!(f.svg.contains("<text"), "{}: {} has no text", path.display(), f.id);
        }
    }
}

#[test]
fn the_page_is_self_contained() {
    let paths = bundles();
    let report = peak_report::gather(&paths).unwrap();
    let page = html::render(&report).unwrap();
    assert_eq!(page.matches("<svg").count(), 6 * paths.len(), "one SVG per figure per workflow");
    assert!(!page.to_lowercase().contains("<script"), "the page must need no script");
    for attr in ["src", "href"] {
        for value in attributes(&page, attr) {
            assert!(value.starts_with('#'), "{attr}=\"{value}\" points outside the page");
        }
    }
    assert!(!page.contains("@import") && !page.contains("url("), "the CSS must load nothing");
    for title in [
        "Speedup over the root per step",
        "Speedup over the previous step",
        "Success per executor and transformation",
        "Evaluation depth",
        "Time per step",
        "Tuning convergence",
    ] {
        assert_eq!(page.matches(&format!("<title>{title}")).count(), paths.len(), "figure {title:?} in every workflow's section");
    }
    // The final kernel and the per-step diffs are there to expand.
    assert!(page.matches("<details>").count() > paths.len());
}
