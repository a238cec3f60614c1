//! `peak report` on the recorded workflows (examples/workflows: OpenCL, HLSL, CUDA), read
//! straight from their bundles: the tables agree with `peak log`, `--json` with the
//! tables, and `--html` is one self-contained page that a browser draws.
// Helpers outside #[test] functions unwrap too; clippy's allow-unwrap-in-tests does not reach them here (rust-clippy#13981).
#![allow(clippy::unwrap_used)]

mod support;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;
use support::{Env, s};

fn recorded() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/workflows");
    let mut out: Vec<PathBuf> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).filter(|p| p.extension().is_some_and(|e| e == "bundle")).collect();
    out.sort();
    for kind in ["opencl", "hlsl", "cuda"] {
        assert!(out.iter().any(|p| s(p).contains(kind)), "no recorded {kind} workflow in {}", dir.display());
    }
    out
}

fn opencl() -> PathBuf {
    recorded().into_iter().find(|p| s(p).contains("matmul-opencl")).expect("the recorded OpenCL matmul workflow")
}

/// Clone a bundle into a workflow folder, as a user would, for `peak log`.
fn clone(env: &Env, bundle: &Path) -> PathBuf {
    let into = env.path(bundle.file_stem().unwrap().to_str().unwrap());
    let ok = Command::new("git").args(["-c", "init.defaultBranch=main", "clone", "-q", s(bundle), s(&into)]).status().unwrap().success();
    assert!(ok, "git clone {}", bundle.display());
    into
}

/// `peak log`'s terminal lines by short id: (x root, x parent) as printed.
fn log_speedups(env: &Env, wf: &Path) -> HashMap<String, (String, String)> {
    env.ok(&["log", "-w", s(wf)])
        .lines()
        .map(|line| {
            let words: Vec<&str> = line.split_whitespace().collect();
            let id = if words[0] == "*" { words[1] } else { words[0] };
            let before = |label: &str| words[words.iter().position(|w| *w == label).unwrap() - 1].to_string();
            (id.to_string(), (before("root"), before("parent")))
        })
        .collect()
}

/// Cells of an aligned table line (columns are two or more spaces apart).
fn cells(line: &str) -> Vec<&str> {
    line.split("  ").map(str::trim).filter(|c| !c.is_empty()).collect()
}

/// The speedup tables of `peak report`'s output: series name, declared step count, rows.
fn speedup_tables(text: &str) -> Vec<(String, usize, Vec<Vec<&str>>)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let Some(rest) = line.strip_prefix("speedup per step, series ") else { continue };
        let (name, count) = rest.rsplit_once(" (").unwrap();
        let count: usize = count.trim_end_matches(" steps)").parse().unwrap();
        let header = cells(lines[i + 1]);
        assert_eq!(header[..7], ["step", "checkpoint", "transformation", "verdict", "best time", "x root", "x previous"]);
        // A step timed at more sizes than the headline's has a continuation line per size,
        // with no step number: not a row of its own.
        let rows = lines[i + 2..].iter().take_while(|l| !l.trim().is_empty()).map(|l| cells(l)).filter(|r| r[0].parse::<usize>().is_ok()).collect();
        out.push((name.to_string(), count, rows));
    }
    out
}

#[test]
fn tables_have_every_step_with_peak_logs_speedups() {
    let env = Env::new();
    for bundle in recorded() {
        let text = env.ok(&["report", s(&bundle)]);
        let log = log_speedups(&env, &clone(&env, &bundle));
        let log_json = env.json(&["log", "-w", s(&clone_again(&env, &bundle)), "--json"]);
        let parent_of: HashMap<String, Option<String>> =
            log_json.as_array().unwrap().iter().map(|e| (short(&e["id"]), e["parents"].as_array().unwrap().first().map(short))).collect();
        let tables = speedup_tables(&text);
        assert!(!tables.is_empty(), "{}: no speedup table:\n{text}", bundle.display());
        for (name, count, rows) in &tables {
            assert_eq!(rows.len(), *count, "{} series {name}: {count} steps announced:\n{text}", bundle.display());
            // The chain from the tip back to the root, by the log's parents, has as many steps.
            let tip = rows.last().unwrap()[1].to_string();
            let mut chain = vec![tip.clone()];
            while let Some(Some(p)) = parent_of.get(chain.last().unwrap()) {
                chain.push(p.clone());
            }
            chain.reverse();
            assert_eq!(rows.iter().map(|r| r[1].to_string()).collect::<Vec<_>>(), chain, "{} series {name}", bundle.display());
            for (i, row) in rows.iter().enumerate() {
                assert_eq!(row[0], i.to_string());
                let (root, parent) = &log[row[1]];
                assert_eq!((row[5], row[6]), (root.as_str(), parent.as_str()), "{} step {} ({}): report and log disagree", bundle.display(), i, row[2]);
            }
        }
        for heading in ["success per executor x transformation", "evaluation depth", "time breakdown", "tuning convergence"] {
            assert!(text.contains(heading), "{}: no {heading} table:\n{text}", bundle.display());
        }
    }
}

fn short(v: &Value) -> String {
    v.as_str().unwrap()[..7].to_string()
}

fn clone_again(env: &Env, bundle: &Path) -> PathBuf {
    let into = env.path(&format!("{}-json", bundle.file_stem().unwrap().to_str().unwrap()));
    assert!(Command::new("git").args(["-c", "init.defaultBranch=main", "clone", "-q", s(bundle), s(&into)]).status().unwrap().success());
    into
}

#[test]
fn json_holds_the_same_series_as_the_tables_and_the_log() {
    let env = Env::new();
    let bundles = recorded();
    let args: Vec<&str> = std::iter::once("report").chain(bundles.iter().map(|b| s(b))).chain(["--json"]).collect();
    let report = env.json(&args);
    let workflows = report["workflows"].as_array().unwrap();
    assert_eq!(workflows.len(), bundles.len());
    for (w, bundle) in workflows.iter().zip(&bundles) {
        let text = env.ok(&["report", s(bundle)]);
        let tables = speedup_tables(&text);
        let series = w["series"].as_array().unwrap();
        assert_eq!(series.len(), tables.len(), "{}", bundle.display());
        let log = env.json(&["log", "-w", s(&clone(&env, bundle)), "--json"]);
        let by_id: HashMap<String, &Value> = log.as_array().unwrap().iter().map(|e| (short(&e["id"]), e)).collect();
        for (s_json, (name, count, _)) in series.iter().zip(&tables) {
            assert_eq!(s_json["name"], name.as_str());
            let steps = s_json["steps"].as_array().unwrap();
            assert_eq!(steps.len(), *count);
            for step in steps {
                let entry = by_id[step["id"].as_str().unwrap()];
                assert_eq!(step["speedup_over_root"], entry["speedup_over_root"], "{}", bundle.display());
                assert_eq!(step["speedup_over_previous"], entry["speedup_over_parent"], "{}", bundle.display());
                assert_eq!(step["best_time_ms"], entry["best_time_ms"]);
            }
        }
        for key in ["success", "depth", "time", "convergence", "missing"] {
            assert!(!w[key].is_null(), "{}: no {key}", bundle.display());
        }
    }
}

#[test]
fn a_missing_workflow_is_a_usage_error() {
    let env = Env::new();
    let out = env.peak(&["report", s(&env.path("nowhere"))]);
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no such workflow folder or bundle file"));
}

/// Values of `name="..."` attributes.
fn attributes<'a>(text: &'a str, name: &str) -> Vec<&'a str> {
    let key = format!(" {name}=\"");
    text.match_indices(&key).map(|(i, _)| &text[i + key.len()..]).map(|rest| &rest[..rest.find('"').unwrap_or(rest.len())]).collect()
}

fn write_html(env: &Env, bundles: &[PathBuf]) -> (PathBuf, String) {
    let file = env.path("report.html");
    let mut args = vec!["report"];
    args.extend(bundles.iter().map(|b| s(b)));
    args.extend(["--html", s(&file)]);
    env.ok(&args);
    let page = std::fs::read_to_string(&file).unwrap();
    (file, page)
}

#[test]
fn html_holds_every_figure_and_nothing_from_outside() {
    let env = Env::new();
    let bundles = recorded();
    let (_, page) = write_html(&env, &bundles);
    assert!(page.starts_with("<!DOCTYPE html>"));
    assert_eq!(page.matches("<svg").count(), 6 * bundles.len(), "six figures per workflow");
    for title in [
        "Speedup over the root per step",
        "Speedup over the previous step",
        "Success per executor and transformation",
        "Evaluation depth",
        "Time per step",
        "Tuning convergence",
    ] {
        assert_eq!(page.matches(&format!("<h3>{title}")).count(), bundles.len(), "figure {title:?} once per workflow");
    }
    assert!(!page.to_lowercase().contains("<script"), "no script");
    for attr in ["src", "href"] {
        for value in attributes(&page, attr) {
            assert!(!value.contains("http://") && !value.contains("https://") && !value.starts_with("//"), "{attr}=\"{value}\" loads from outside");
        }
    }
    assert!(!page.contains("url(") && !page.contains("@import"));
    // The final kernel with its configuration, and a diff per step to expand.
    assert!(page.contains("Final kernel"));
    assert!(page.contains("<details><summary>1. Refactor"));
}

/// The size and colour type of a PNG, from its IHDR chunk.
fn png_header(bytes: &[u8]) -> (u32, u32) {
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n", "not a PNG");
    assert_eq!(&bytes[12..16], b"IHDR");
    let be = |b: &[u8]| u32::from_be_bytes(b.try_into().unwrap());
    (be(&bytes[16..20]), be(&bytes[20..24]))
}

fn chromium() -> Option<PathBuf> {
    ["chromium", "chromium-browser", "google-chrome"]
        .iter()
        .find_map(|name| std::env::var_os("PATH").and_then(|paths| std::env::split_paths(&paths).map(|d| d.join(name)).find(|p| p.is_file())))
}

/// Render the page in headless Chromium and take a screenshot, as a reader would see it.
#[test]
fn chromium_draws_the_opencl_report() {
    let Some(browser) = chromium() else {
        eprintln!("SKIPPED chromium_draws_the_opencl_report: no chromium on PATH (apt-get install chromium; scripts/install-deps.sh does)");
        return;
    };
    let env = Env::new();
    let (file, _) = write_html(&env, &[opencl()]);
    let shot = env.path("report.png");
    let out = Command::new(&browser)
        .args(["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--hide-scrollbars", "--window-size=1280,2400"])
        .arg(format!("--screenshot={}", s(&shot)))
        .arg(format!("--user-data-dir={}", s(&env.path("chromium-profile"))))
        .arg(format!("file://{}", s(&file)))
        .output()
        .unwrap();
    assert!(shot.is_file(), "chromium wrote no screenshot:\n{}", String::from_utf8_lossy(&out.stderr));
    let bytes = std::fs::read(&shot).unwrap();
    assert_eq!(png_header(&bytes), (1280, 2400));
    // A one-colour 1280 x 2400 PNG compresses to a few kilobytes; a page of figures, tables
    // and text to hundreds. (No PNG decoder is in the tree to count colours instead.)
    assert!(bytes.len() > 60_000, "the screenshot looks blank: {} bytes", bytes.len());
    if let Some(keep) = std::env::var_os("PEAK_REPORT_SCREENSHOT") {
        std::fs::copy(&shot, keep).unwrap();
    }
}
