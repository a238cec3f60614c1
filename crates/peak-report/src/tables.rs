//! The report as plain aligned terminal tables, in `peak log`'s style.

use std::fmt::Write as _;

use crate::data::{FAILURE_KINDS, FinalKernel, Report, Series, Step, WorkflowReport};

/// A time as `peak log` prints it: three significant digits.
pub use peak_workflow::format_ms;

pub(crate) fn speedup(s: Option<f64>) -> String {
    s.map(|s| format!("{s:.2}x")).unwrap_or_else(|| "-".into())
}

pub(crate) fn tflops(t: Option<f64>) -> String {
    match t {
        Some(t) if t >= 10.0 => format!("{t:.1}"),
        Some(t) if t >= 0.1 => format!("{t:.2}"),
        Some(t) => format!("{t:.4}"),
        None => "-".into(),
    }
}

pub(crate) fn percent(p: Option<f64>) -> String {
    p.map(|p| format!("{p:.1}%")).unwrap_or_else(|| "-".into())
}

/// The "% vendor" cell: the vendor library's percentage, or the copy's, named.
pub(crate) fn vendor(step: &Step) -> String {
    match (step.percent_of_vendor, step.percent_of_copy) {
        (None, Some(p)) => format!("{p:.1}% copy"),
        (p, _) => percent(p),
    }
}

pub(crate) fn seconds(s: Option<f64>) -> String {
    s.map(|s| format!("{s:.1}")).unwrap_or_else(|| "-".into())
}

/// A number, maybe with a unit: `12`, `3.27x`, `45.5%`, `4.00 ms`, `1.2 s`.
fn is_number(cell: &str) -> bool {
    let bare = ["x", "%", " ms", " s"].iter().fold(cell, |c, unit| c.strip_suffix(unit).unwrap_or(c));
    bare.parse::<f64>().is_ok()
}

/// Columns padded to their widest cell: text left, numbers right (a column is numeric
/// when every cell but `-` and empty ones is a number).
pub fn table(headers: &[&str], rows: &[Vec<String>]) -> String {
    let cols = headers.len();
    let mut width: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate().take(cols) {
            width[i] = width[i].max(cell.chars().count());
        }
    }
    let numeric: Vec<bool> = (0..cols)
        .map(|i| {
            let cells: Vec<&String> = rows.iter().filter_map(|r| r.get(i)).filter(|c| !matches!(c.as_str(), "-" | "")).collect();
            !cells.is_empty() && cells.iter().all(|c| is_number(c))
        })
        .collect();
    let mut out = String::new();
    let mut line = |cells: &mut dyn Iterator<Item = &str>| {
        let mut text = String::from("  ");
        for (i, cell) in cells.enumerate() {
            let pad = width[i].saturating_sub(cell.chars().count());
            if numeric[i] {
                text.push_str(&" ".repeat(pad));
                text.push_str(cell);
            } else {
                text.push_str(cell);
                text.push_str(&" ".repeat(pad));
            }
            text.push_str("  ");
        }
        out.push_str(text.trim_end());
        out.push('\n');
    };
    line(&mut headers.iter().copied());
    for row in rows {
        line(&mut row.iter().map(String::as_str));
    }
    out
}

/// The whole report for a terminal.
pub fn render(report: &Report) -> String {
    report.workflows.iter().map(render_workflow).collect::<Vec<_>>().join("\n")
}

/// One workflow's tables.
pub fn render_workflow(w: &WorkflowReport) -> String {
    let mut out = String::new();
    heading(&mut out, w);
    for s in &w.series {
        step_table(&mut out, s);
    }
    success_table(&mut out, w);
    depth_table(&mut out, w);
    time_table(&mut out, w);
    convergence_table(&mut out, w);
    if let Some(k) = &w.final_kernel {
        final_kernel(&mut out, k);
    }
    not_recorded(&mut out, w);
    out
}

/// Which workflow this is: its name, kernel and backend, where it was read from, and the
/// device its times were measured on.
fn heading(out: &mut String, w: &WorkflowReport) {
    let what = [w.kernel.as_deref(), w.backend.as_deref()].into_iter().flatten().collect::<Vec<_>>().join(", ");
    let _ = writeln!(out, "workflow {} ({what})  {}", w.name, w.source.display());
    if let Some(device) = &w.device {
        let _ = writeln!(out, "device {device}");
    }
}

/// Paper figs. 2 and 3 as numbers: a row per step of the series at its headline inputs,
/// then a row per other input size it was tuned at.
fn step_table(out: &mut String, s: &Series) {
    let _ = writeln!(out, "\nspeedup per step, series {} ({} steps)", s.name, s.steps.len());
    let mut rows: Vec<Vec<String>> = Vec::new();
    for st in &s.steps {
        rows.push(vec![
            st.index.to_string(),
            st.id.clone(),
            st.transformation.clone(),
            st.verdict.clone().unwrap_or_else(|| "-".into()),
            st.best_time_ms.map(format_ms).unwrap_or_else(|| "-".into()),
            speedup(st.speedup_over_root),
            speedup(st.speedup_over_previous),
            tflops(st.tflops),
            vendor(st),
            measured_at(st),
        ]);
        // Every other size tuned, a row each, its speedups taken at that size.
        for size in &st.sizes {
            let blank = || String::new();
            rows.push(vec![
                blank(),
                blank(),
                blank(),
                blank(),
                format_ms(size.best_time_ms),
                speedup(size.speedup_over_root),
                speedup(size.speedup_over_previous),
                tflops(size.tflops),
                blank(),
                peak_workflow::format_inputs(&size.inputs),
            ]);
        }
    }
    out.push_str(&table(&["step", "checkpoint", "transformation", "verdict", "best time", "x root", "x previous", "TFLOP/s", "% vendor", "inputs"], &rows));
}

/// Paper fig. 4 as numbers: the attempts per executor and transformation, a column per
/// failure kind.
fn success_table(out: &mut String, w: &WorkflowReport) {
    let _ = writeln!(out, "\nsuccess per executor x transformation (attempts log)");
    if w.success.is_empty() {
        let _ = writeln!(out, "  no attempts recorded");
        return;
    }
    let mut headers = vec!["executor", "transformation", "applies", "tries", "first try", "after repair", "failed"];
    headers.extend(FAILURE_KINDS);
    let rows: Vec<Vec<String>> = w
        .success
        .iter()
        .map(|r| {
            let mut row = vec![
                r.executor.clone(),
                r.transformation.clone(),
                r.applies.to_string(),
                r.tries.to_string(),
                r.first_try.to_string(),
                r.after_repair.to_string(),
                r.failed.to_string(),
            ];
            row.extend(FAILURE_KINDS.iter().map(|k| r.failures.get(*k).copied().unwrap_or(0).to_string()));
            row
        })
        .collect();
    out.push_str(&table(&headers, &rows));
}

/// Paper fig. 5 as numbers: every failed validation try and the sample that caught it,
/// then how many samples would have caught them all.
fn depth_table(out: &mut String, w: &WorkflowReport) {
    let _ = writeln!(out, "\nevaluation depth (failed validation tries)");
    if w.depth.is_empty() {
        let _ = writeln!(out, "  no failed validation tries recorded");
        return;
    }
    let rows: Vec<Vec<String>> = w
        .depth
        .iter()
        .map(|d| {
            vec![
                d.executor.clone(),
                d.transformation.clone(),
                d.retry.to_string(),
                d.outcome.to_string(),
                d.validator.clone(),
                d.first_failing_sample.map(|s| s.to_string()).unwrap_or_else(|| "not recorded".into()),
            ]
        })
        .collect();
    out.push_str(&table(&["executor", "transformation", "retry", "outcome", "caught by", "first failing sample"], &rows));
    let _ = writeln!(
        out,
        "  samples that would have been enough: {}",
        w.samples_enough.map(|n| n.to_string()).unwrap_or_else(|| "unknown (the sample index is not recorded)".into())
    );
}

/// Paper table 5: seconds per checkpoint in each phase, their totals and each phase's share.
fn time_table(out: &mut String, w: &WorkflowReport) {
    let t = &w.time;
    let _ = writeln!(out, "\ntime breakdown (validation, transformation = executor latency, performance = tuning)");
    let total = t.validation_s + t.transformation_s + t.tuning_s;
    // A share only when some checkpoint recorded its times: a percentage of nothing would mislead.
    let pct = |x: f64| if total > 0.0 && t.unrecorded < t.rows.len() { format!("{:.1}%", 100.0 * x / total) } else { "-".into() };
    let mut rows: Vec<Vec<String>> = t
        .rows
        .iter()
        .map(|r| vec![r.id.clone(), r.transformation.clone(), seconds(r.validation_s), seconds(r.transformation_s), seconds(r.tuning_s)])
        .collect();
    rows.push(vec!["total".into(), "seconds".into(), format!("{:.1}", t.validation_s), format!("{:.1}", t.transformation_s), format!("{:.1}", t.tuning_s)]);
    rows.push(vec!["".into(), "share".into(), pct(t.validation_s), pct(t.transformation_s), pct(t.tuning_s)]);
    out.push_str(&table(&["checkpoint", "transformation", "validation s", "transformation s", "performance s"], &rows));
}

/// The tuning curves, each cut to a few points a terminal can show: the first time, the
/// best after a quarter and after half of the evaluations, and the best with when it was found.
fn convergence_table(out: &mut String, w: &WorkflowReport) {
    let _ = writeln!(out, "\ntuning convergence (best so far against evaluations)");
    if w.convergence.is_empty() {
        let _ = writeln!(out, "  no tuning curve recorded");
        return;
    }
    let rows: Vec<Vec<String>> = w
        .convergence
        .iter()
        .map(|c| {
            let first = c.curve.first().map(|p| p.1);
            let last = c.curve.last().copied();
            // The best so far once `frac` of the evaluations ran (of the recorded count, else the curve's last point).
            let at = |frac: f64| {
                let n = c.evaluations.unwrap_or(last.map_or(0, |l| l.0));
                let limit = (n as f64 * frac).ceil() as u64;
                c.curve.iter().take_while(|p| p.0 <= limit).last().map(|p| format_ms(p.1)).unwrap_or_else(|| "-".into())
            };
            vec![
                c.id.clone(),
                c.transformation.clone(),
                inputs(&c.inputs),
                c.evaluations.map(|n| n.to_string()).unwrap_or_else(|| "-".into()),
                first.map(format_ms).unwrap_or_else(|| "-".into()),
                at(0.25),
                at(0.5),
                last.map(|l| format_ms(l.1)).unwrap_or_else(|| "-".into()),
                last.map(|l| l.0.to_string()).unwrap_or_else(|| "-".into()),
            ]
        })
        .collect();
    out.push_str(&table(&["checkpoint", "transformation", "inputs", "evaluations", "first", "at 25%", "at 50%", "best", "best found at"], &rows));
}

/// The kernel the workflow ended with and its best configuration (its source is in the page).
fn final_kernel(out: &mut String, k: &FinalKernel) {
    let _ = writeln!(
        out,
        "\nfinal kernel: {} {} (series {}), {}",
        k.id,
        k.transformation,
        k.series,
        k.best_time_ms.map(format_ms).unwrap_or_else(|| "not timed".into())
    );
    if let Some(p) = &k.best_params {
        let _ = writeln!(out, "  best configuration {p}");
    }
}

/// What the workflow does not record, so an empty column or table is explained, not guessed.
fn not_recorded(out: &mut String, w: &WorkflowReport) {
    if w.missing.is_empty() {
        return;
    }
    let _ = writeln!(out, "\nnot recorded in this workflow:");
    for m in &w.missing {
        let _ = writeln!(out, "  - {m}");
    }
}

/// The inputs a step's time was measured at, and those of a speedup taken elsewhere:
/// `n=4096 (x root, x previous @n=256)`.
pub(crate) fn measured_at(st: &crate::data::Step) -> String {
    let Some(at) = &st.best_inputs else { return "-".into() };
    let mut cell = peak_workflow::format_inputs(at);
    fn elsewhere<'a>(s: Option<f64>, i: &'a Option<serde_json::Value>, at: &serde_json::Value) -> Option<&'a serde_json::Value> {
        i.as_ref().filter(|i| s.is_some() && *i != at)
    }
    let (root, previous) =
        (elsewhere(st.speedup_over_root, &st.speedup_over_root_inputs, at), elsewhere(st.speedup_over_previous, &st.speedup_over_previous_inputs, at));
    match (root, previous) {
        (Some(r), Some(p)) if r == p => cell.push_str(&format!(" (x root, x previous @{})", peak_workflow::format_inputs(r))),
        (r, p) => {
            for (what, i) in [("x root", r), ("x previous", p)] {
                if let Some(i) = i {
                    cell.push_str(&format!(" ({what} @{})", peak_workflow::format_inputs(i)));
                }
            }
        }
    }
    cell
}

/// `n=256, k=128` from a JSON object of inputs.
pub(crate) fn inputs(v: &serde_json::Value) -> String {
    v.as_object().map(|o| o.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(", ")).unwrap_or_else(|| "-".into())
}
