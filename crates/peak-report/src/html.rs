//! The report as one self-contained HTML page: inline SVG figures, inline CSS, no
//! script and nothing fetched from anywhere.

use std::fmt::Write as _;

use anyhow::Result;

use crate::data::{FAILURE_KINDS, FinalKernel, Report, Series, WorkflowReport};
use crate::figures;
pub use crate::markup::escape;
use crate::tables::{format_ms, seconds, speedup, tflops};

const CSS: &str = r#"
:root { --ink:#2b3340; --muted:#667085; --line:#e4e7ec; --bg:#f6f7f9; --card:#fff; --accent:#4e79a7; --good:#3d9a5b; --bad:#d04a4a; }
* { box-sizing: border-box; }
body { margin:0; background:var(--bg); color:var(--ink); font: 16px/1.55 "Inter","Segoe UI","Helvetica Neue","DejaVu Sans","Liberation Sans",Arial,sans-serif; }
header.page { background:linear-gradient(120deg,#23344d,#3b5f8a); color:#fff; padding:36px 0 30px; }
.wrap { max-width:1120px; margin:0 auto; padding:0 32px; }
header.page h1 { margin:0 0 6px; font-size:30px; font-weight:650; letter-spacing:-0.01em; }
header.page p { margin:0; color:#d5e0ee; }
nav.toc { margin-top:14px; display:flex; flex-wrap:wrap; gap:8px; }
nav.toc a { color:#fff; background:rgba(255,255,255,.14); border-radius:999px; padding:3px 12px; text-decoration:none; font-size:14px; }
section.workflow { margin:34px auto; }
h2 { font-size:24px; margin:0 0 4px; letter-spacing:-0.01em; }
h3 { font-size:18px; margin:0 0 10px; }
.sub { color:var(--muted); margin:0 0 18px; font-size:14px; word-break:break-word; }
.cards { display:grid; grid-template-columns:repeat(auto-fit,minmax(180px,1fr)); gap:14px; margin:18px 0 26px; }
.card { background:var(--card); border:1px solid var(--line); border-radius:12px; padding:14px 16px; }
.card .k { color:var(--muted); font-size:13px; text-transform:uppercase; letter-spacing:.04em; }
.card .v { font-size:26px; font-weight:650; margin-top:2px; }
.card .v small { font-size:13px; color:var(--muted); font-weight:400; white-space:nowrap; }
.card .v.name { font-size:20px; line-height:1.25; overflow-wrap:anywhere; }
.card > small { font-size:13px; color:var(--muted); }
.panel { background:var(--card); border:1px solid var(--line); border-radius:14px; padding:20px 22px; margin:0 0 22px; box-shadow:0 1px 2px rgba(16,24,40,.04); }
figure { margin:0; }
figure svg { width:100%; height:auto; display:block; }
figure svg text { font-family:"Inter","Segoe UI","Helvetica Neue","DejaVu Sans","Liberation Sans",Arial,sans-serif; }
figcaption { color:var(--muted); font-size:14px; margin-top:8px; }
table { border-collapse:collapse; width:100%; font-size:14px; font-variant-numeric:tabular-nums; }
th, td { padding:6px 10px; border-bottom:1px solid var(--line); text-align:left; white-space:nowrap; }
th { color:var(--muted); font-weight:600; font-size:12.5px; text-transform:uppercase; letter-spacing:.03em; }
td.n, th.n { text-align:right; }
tr:last-child td { border-bottom:none; }
tr.total td { font-weight:650; border-top:2px solid var(--line); }
tr.size td { color:var(--muted); font-size:13px; }
.scroll { overflow-x:auto; }
.up { color:var(--good); font-weight:600; } .down { color:var(--bad); font-weight:600; }
.missing { background:#fff8e6; border:1px solid #f4dca6; border-radius:12px; padding:12px 18px; margin:0 0 22px; font-size:14px; }
.missing ul { margin:6px 0 0; padding-left:20px; }
pre { margin:0; background:#0f1722; color:#dbe4ef; border-radius:10px; padding:14px 16px; overflow-x:auto; font: 13px/1.5 "JetBrains Mono","DejaVu Sans Mono","Liberation Mono",Menlo,Consolas,monospace; }
pre .add { color:#8fd19e; } pre .del { color:#f19999; } pre .hunk { color:#8ab4f8; } pre .meta { color:#c8b6ff; }
details { border:1px solid var(--line); border-radius:10px; margin:8px 0; background:#fbfcfd; }
details > summary { cursor:pointer; padding:10px 14px; font-weight:600; list-style-position:inside; }
details[open] > summary { border-bottom:1px solid var(--line); }
details > pre { border-radius:0 0 10px 10px; }
.params { display:flex; flex-wrap:wrap; gap:8px; margin:0 0 14px; }
.params span { background:#eef3f9; border:1px solid #d7e2ef; border-radius:8px; padding:3px 10px; font: 13px "DejaVu Sans Mono",Menlo,monospace; }
footer { color:var(--muted); font-size:13px; text-align:center; padding:10px 0 40px; }
/* Tables fit their panel: headers and long texts wrap, numbers and names do not. */
td.wrap-text { white-space:normal; min-width:9em; }
td.may-wrap { white-space:normal; }
th { white-space:normal; vertical-align:bottom; }
td code { font-size:13px; }
@media (max-width: 1100px) { .wrap { padding:0 20px; } .panel { padding:16px 14px; } th, td { padding:6px 7px; } table { font-size:13.5px; } }
"#;

fn cell(text: impl AsRef<str>, numeric: bool) -> String {
    format!("<td{}>{}</td>", if numeric { " class=\"n\"" } else { "" }, escape(text.as_ref()))
}

fn head(cols: &[(&str, bool)]) -> String {
    let mut s = String::from("<thead><tr>");
    for (name, n) in cols {
        let _ = write!(s, "<th{}>{}</th>", if *n { " class=\"n\"" } else { "" }, escape(name));
    }
    s.push_str("</tr></thead>");
    s
}

fn ratio_cell(s: Option<f64>) -> String {
    match s {
        Some(x) if x > 1.005 => format!("<td class=\"n up\">{}</td>", speedup(s)),
        Some(x) if x < 0.995 => format!("<td class=\"n down\">{}</td>", speedup(s)),
        _ => cell(speedup(s), true),
    }
}

/// A row for every other input size a step was tuned at, under the step's own.
fn size_rows(out: &mut String, st: &crate::data::Step) {
    for size in &st.sizes {
        out.push_str("<tr class=\"size\"><td></td><td></td><td></td><td></td>");
        out.push_str(&cell(format_ms(size.best_time_ms), true));
        out.push_str(&ratio_cell(size.speedup_over_root));
        out.push_str(&ratio_cell(size.speedup_over_previous));
        out.push_str(&cell(tflops(size.tflops), true));
        out.push_str("<td></td>");
        out.push_str(&cell(peak_workflow::format_inputs(&size.inputs), false));
        out.push_str("</tr>");
    }
}

/// Diff text with its lines coloured.
fn diff_html(text: &str) -> String {
    text.lines()
        .map(|l| {
            let class = if l.starts_with("@@") {
                "hunk"
            } else if l.starts_with("+++") || l.starts_with("---") {
                "meta"
            } else if l.starts_with('+') {
                "add"
            } else if l.starts_with('-') {
                "del"
            } else {
                ""
            };
            if class.is_empty() { escape(l) } else { format!("<span class=\"{class}\">{}</span>", escape(l)) }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn slug(text: &str) -> String {
    text.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '-' }).collect()
}

/// The whole page.
pub fn render(report: &Report) -> Result<String> {
    let mut out = String::new();
    let names: Vec<&str> = report.workflows.iter().map(|w| w.name.as_str()).collect();
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>peak report: {}</title>\n<style>{CSS}</style>\n</head>\n<body>\n",
        escape(&names.join(", "))
    );
    let _ = write!(
        out,
        "<header class=\"page\"><div class=\"wrap\"><h1>peak report</h1><p>How each kernel moved from its naive root towards vendor speed, step by step, from the workflows' own records.</p><nav class=\"toc\">"
    );
    for w in &report.workflows {
        let _ = write!(out, "<a href=\"#{}\">{}</a>", slug(&w.name), escape(&w.name));
    }
    out.push_str("</nav></div></header>\n");
    for w in &report.workflows {
        workflow(&mut out, w)?;
    }
    out.push_str(
        "<footer>Written by <code>peak report</code>. Figures drawn with plotters; nothing on this page is loaded from elsewhere.</footer>\n</body>\n</html>\n",
    );
    Ok(out)
}

/// Headline numbers of a series: its steps, the final speedup and time, and the best step
/// named (the fastest checkpoint, by its speedup over the root).
fn cards(out: &mut String, s: &Series) {
    let last = s.steps.last();
    let best = s
        .steps
        .iter()
        .skip(1)
        .filter(|st| st.speedup_over_root.is_some())
        .max_by(|a, b| a.speedup_over_root.partial_cmp(&b.speedup_over_root).unwrap_or(std::cmp::Ordering::Equal));
    out.push_str("<div class=\"cards\">");
    let _ =
        write!(out, "<div class=\"card\"><div class=\"k\">steps on {}</div><div class=\"v\">{}</div></div>", escape(&s.name), s.steps.len().saturating_sub(1));
    let _ = write!(
        out,
        "<div class=\"card\"><div class=\"k\">final speedup</div><div class=\"v\">{} <small>vs root</small></div></div>",
        speedup(last.and_then(|l| l.speedup_over_root))
    );
    match best {
        Some(st) => {
            let _ = write!(
                out,
                "<div class=\"card\"><div class=\"k\">best step</div><div class=\"v name\">{}. {}</div><small>{} vs root</small></div>",
                st.index,
                escape(&st.transformation),
                speedup(st.speedup_over_root)
            );
        }
        None => out.push_str("<div class=\"card\"><div class=\"k\">best step</div><div class=\"v\">-</div><small>no step timed</small></div>"),
    }
    let at = last
        .filter(|l| l.best_time_ms.is_some())
        .and_then(|l| l.best_inputs.as_ref())
        .map(|i| format!("<small>at {}</small>", escape(&peak_workflow::format_inputs(i))))
        .unwrap_or_default();
    let _ = write!(
        out,
        "<div class=\"card\"><div class=\"k\">final time</div><div class=\"v\">{}</div>{at}</div>",
        last.and_then(|l| l.best_time_ms).map(format_ms).unwrap_or_else(|| "-".into())
    );
    if let Some(t) = last.and_then(|l| l.tflops) {
        let _ = write!(out, "<div class=\"card\"><div class=\"k\">throughput</div><div class=\"v\">{} <small>TFLOP/s</small></div></div>", tflops(Some(t)));
    }
    out.push_str("</div>");
}

/// The attempts per executor and transformation; the failures by kind in one column,
/// naming only the kinds that occurred, so the table fits the page.
fn attempts(out: &mut String, w: &WorkflowReport) {
    if w.success.is_empty() {
        return;
    }
    out.push_str("<div class=\"panel scroll\"><h3>Attempts</h3><table>");
    out.push_str(&head(&[
        ("executor", false),
        ("transformation", false),
        ("applies", true),
        ("tries", true),
        ("first try", true),
        ("after repair", true),
        ("failed", true),
        ("failures by kind", false),
    ]));
    out.push_str("<tbody>");
    for r in &w.success {
        out.push_str("<tr>");
        let _ = write!(out, "<td class=\"wrap-text\">{}</td>", escape(&r.executor));
        out.push_str(&cell(&r.transformation, false));
        for n in [r.applies, r.tries, r.first_try, r.after_repair, r.failed] {
            out.push_str(&cell(n.to_string(), true));
        }
        let kinds: Vec<String> = FAILURE_KINDS.iter().filter_map(|k| r.failures.get(*k).filter(|n| **n > 0).map(|n| format!("{k} {n}"))).collect();
        let _ = write!(out, "<td class=\"wrap-text\">{}</td>", escape(&if kinds.is_empty() { "-".to_string() } else { kinds.join(", ") }));
        out.push_str("</tr>");
    }
    out.push_str("</tbody></table></div>");
}

/// One workflow's section: its heading and headline cards, then the paper's figures, each
/// followed by the table of the numbers it draws, then the final kernel and every step's diff.
fn workflow(out: &mut String, w: &WorkflowReport) -> Result<()> {
    section_heading(out, w);
    if let Some(s) = w.series.first() {
        cards(out, s);
    }
    not_recorded(out, w);

    // Drawn once up front: each figure sits next to the table it belongs to, in the paper's order.
    let figs = figures::all(w)?;
    let fig = |out: &mut String, id: &str| figure(out, w, &figs, id);
    fig(out, "fig-speedup");
    for s in &w.series {
        step_table(out, s);
    }
    fig(out, "fig-previous");

    fig(out, "fig-success");
    attempts(out, w);

    fig(out, "fig-depth");
    failed_tries(out, w);

    time_breakdown(out, w);
    fig(out, "fig-time");
    fig(out, "fig-convergence");

    if let Some(k) = &w.final_kernel {
        final_kernel(out, k);
    }
    step_diffs(out, w);
    out.push_str("</section>\n");
    Ok(())
}

/// Opens the workflow's section (the table of contents links to its id) with its name, what
/// it tunes (kernel and backend), where it was read from and the device it was measured on.
fn section_heading(out: &mut String, w: &WorkflowReport) {
    let _ = write!(out, "<section class=\"workflow wrap\" id=\"{}\">", slug(&w.name));
    let what = [w.kernel.as_deref(), w.backend.as_deref()].into_iter().flatten().collect::<Vec<_>>().join(" · ");
    let _ = write!(
        out,
        "<h2>{}</h2><p class=\"sub\">{} — {}{}</p>",
        escape(&w.name),
        escape(&what),
        escape(&w.source.display().to_string()),
        w.device.as_ref().map(|d| format!("<br>{}", escape(d))).unwrap_or_default()
    );
}

/// What the workflow does not record, said up front: a figure or table left empty is then
/// no surprise, and nothing is estimated in its place.
fn not_recorded(out: &mut String, w: &WorkflowReport) {
    if w.missing.is_empty() {
        return;
    }
    out.push_str("<div class=\"missing\"><strong>Not recorded in this workflow</strong>, so not shown:<ul>");
    for m in &w.missing {
        let _ = write!(out, "<li>{}</li>", escape(m));
    }
    out.push_str("</ul></div>");
}

/// The figure `id` in its own panel, with its note as the caption; nothing when the workflow
/// has no such figure. Its anchor is prefixed with the workflow's slug, so ids stay unique
/// on a page of several workflows.
fn figure(out: &mut String, w: &WorkflowReport, figs: &[figures::Figure], id: &str) {
    let Some(f) = figs.iter().find(|f| f.id == id) else { return };
    let _ = write!(out, "<div class=\"panel\"><figure id=\"{}-{}\"><h3>{}</h3>{}", slug(&w.name), f.id, escape(&f.title), f.svg);
    if let Some(note) = &f.note {
        let _ = write!(out, "<figcaption>{}</figcaption>", escape(note));
    }
    out.push_str("</figure></div>");
}

/// A series' steps (paper figs. 2 and 3 as numbers): a row per checkpoint at its headline
/// inputs, then a row per other input size it was tuned at.
fn step_table(out: &mut String, s: &Series) {
    let _ = write!(out, "<div class=\"panel scroll\"><h3>Steps on {}</h3><table>", escape(&s.name));
    out.push_str(&head(&[
        ("step", true),
        ("checkpoint", false),
        ("transformation", false),
        ("verdict", false),
        ("best time", true),
        ("× root", true),
        ("× previous", true),
        ("TFLOP/s", true),
        ("% vendor", true),
        ("inputs", false),
    ]));
    out.push_str("<tbody>");
    for st in &s.steps {
        out.push_str("<tr>");
        out.push_str(&cell(st.index.to_string(), true));
        let _ = write!(out, "<td><code>{}</code></td>", escape(&st.id));
        out.push_str(&cell(&st.transformation, false));
        out.push_str(&cell(st.verdict.as_deref().unwrap_or("-"), false));
        out.push_str(&cell(st.best_time_ms.map(format_ms).unwrap_or_else(|| "-".into()), true));
        out.push_str(&ratio_cell(st.speedup_over_root));
        out.push_str(&ratio_cell(st.speedup_over_previous));
        out.push_str(&cell(tflops(st.tflops), true));
        out.push_str(&cell(crate::tables::vendor(st), true));
        // Where a speedup was taken at other inputs the cell says so at length: let it wrap.
        let _ = write!(out, "<td class=\"may-wrap\">{}</td>", escape(&crate::tables::measured_at(st)));
        out.push_str("</tr>");
        size_rows(out, st);
    }
    out.push_str("</tbody></table></div>");
}

/// Every try that failed validation (paper fig. 5 as rows): which validator
/// caught it and at which sample. Left out when no try failed there.
fn failed_tries(out: &mut String, w: &WorkflowReport) {
    if w.depth.is_empty() {
        return;
    }
    out.push_str("<div class=\"panel scroll\"><h3>Failed validation tries</h3><table>");
    out.push_str(&head(&[
        ("executor", false),
        ("transformation", false),
        ("retry", true),
        ("outcome", false),
        ("caught by", false),
        ("first failing sample", true),
        ("message", false),
    ]));
    out.push_str("<tbody>");
    for d in &w.depth {
        out.push_str("<tr>");
        out.push_str(&cell(&d.executor, false));
        out.push_str(&cell(&d.transformation, false));
        out.push_str(&cell(d.retry.to_string(), true));
        out.push_str(&cell(d.outcome.as_str(), false));
        out.push_str(&cell(&d.validator, false));
        out.push_str(&cell(d.first_failing_sample.map(|s| s.to_string()).unwrap_or_else(|| "not recorded".into()), true));
        let _ = write!(out, "<td class=\"wrap-text\">{}</td>", escape(d.error.as_deref().unwrap_or("")));
        out.push_str("</tr>");
    }
    out.push_str("</tbody></table></div>");
}

/// Paper table 5: the seconds each checkpoint spent in validation, transformation and
/// tuning, their totals, and each phase's share of the total.
fn time_breakdown(out: &mut String, w: &WorkflowReport) {
    let t = &w.time;
    let total = t.validation_s + t.transformation_s + t.tuning_s;
    // A share only when some checkpoint recorded its times: a percentage of nothing would mislead.
    let pct = |x: f64| if total > 0.0 && t.unrecorded < t.rows.len() { format!("{:.1}%", 100.0 * x / total) } else { "-".into() };
    out.push_str("<div class=\"panel scroll\"><h3>Time breakdown (paper table 5)</h3><table>");
    out.push_str(&head(&[("checkpoint", false), ("transformation", false), ("validation s", true), ("transformation s", true), ("performance s", true)]));
    out.push_str("<tbody>");
    for r in &t.rows {
        let _ = write!(
            out,
            "<tr><td><code>{}</code></td>{}{}{}{}</tr>",
            escape(&r.id),
            cell(&r.transformation, false),
            cell(seconds(r.validation_s), true),
            cell(seconds(r.transformation_s), true),
            cell(seconds(r.tuning_s), true)
        );
    }
    let _ = write!(
        out,
        "<tr class=\"total\"><td>total</td><td>seconds</td>{}{}{}</tr>",
        cell(format!("{:.1}", t.validation_s), true),
        cell(format!("{:.1}", t.transformation_s), true),
        cell(format!("{:.1}", t.tuning_s), true)
    );
    let _ = write!(
        out,
        "<tr><td></td><td>share</td>{}{}{}</tr>",
        cell(pct(t.validation_s), true),
        cell(pct(t.transformation_s), true),
        cell(pct(t.tuning_s), true)
    );
    out.push_str("</tbody></table></div>");
}

/// The fastest kernel's source, open to read, with the configuration it was timed at.
fn final_kernel(out: &mut String, k: &FinalKernel) {
    let _ = write!(
        out,
        "<div class=\"panel\"><h3>Final kernel: {} <small>({}, <code>{}</code>, {})</small></h3>",
        escape(&k.transformation),
        escape(&k.series),
        escape(&k.id),
        k.best_time_ms.map(format_ms).unwrap_or_else(|| "not timed".into())
    );
    if let Some(params) = &k.best_params {
        out.push_str("<p class=\"sub\">Best configuration</p><div class=\"params\">");
        for group in ["inputs", "tuning"] {
            for (name, value) in params[group].as_object().into_iter().flatten() {
                let _ = write!(out, "<span>{} = {}</span>", escape(name), escape(&value.to_string()));
            }
        }
        out.push_str("</div>");
    }
    let _ = write!(out, "<details open><summary>{}</summary><pre><code>{}</code></pre></details></div>", escape(&k.file), escape(&k.source));
}

/// Each step's diff, folded, with its speedup over the previous step. A checkpoint shared
/// by several series (the root, a common prefix) is shown once.
fn step_diffs(out: &mut String, w: &WorkflowReport) {
    out.push_str("<div class=\"panel\"><h3>What each step changed</h3>");
    let mut seen = std::collections::HashSet::new();
    for s in &w.series {
        for st in &s.steps {
            let Some(diff) = &st.diff else { continue };
            if !seen.insert(st.id.clone()) {
                continue;
            }
            let _ = write!(
                out,
                "<details><summary>{}. {} <code>{}</code> · {} over the previous step</summary><pre><code>{}</code></pre></details>",
                st.index,
                escape(&st.transformation),
                escape(&st.id),
                speedup(st.speedup_over_previous),
                diff_html(diff)
            );
        }
    }
    out.push_str("</div>");
}
