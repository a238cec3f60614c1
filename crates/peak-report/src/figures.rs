//! The report's figures as SVG text, drawn with plotters' SVG backend. Text stays
//! `<text>` elements, so no font file is read here; the page's CSS picks the font.

use std::collections::HashSet;

use anyhow::Result;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::data::{FAILURE_KINDS, Step, WorkflowReport};

const WIDTH: u32 = 820;
const FONT: &str = "sans-serif";

/// Colours for series, in order (Tableau 10).
pub const PALETTE: [RGBColor; 10] = [
    RGBColor(0x4e, 0x79, 0xa7),
    RGBColor(0xf2, 0x8e, 0x2b),
    RGBColor(0x59, 0xa1, 0x4f),
    RGBColor(0xe1, 0x57, 0x59),
    RGBColor(0x76, 0xb7, 0xb2),
    RGBColor(0xed, 0xc9, 0x48),
    RGBColor(0xb0, 0x7a, 0xa1),
    RGBColor(0xff, 0x9d, 0xa7),
    RGBColor(0x9c, 0x75, 0x5f),
    RGBColor(0xba, 0xb0, 0xac),
];
const INK: RGBColor = RGBColor(0x33, 0x3a, 0x44);
const GRID: RGBColor = RGBColor(0xe6, 0xe8, 0xec);
const GOOD: RGBColor = RGBColor(0x3d, 0x9a, 0x5b);
const BAD: RGBColor = RGBColor(0xd0, 0x4a, 0x4a);

/// A bar chart's row: its label and its stacked (value, colour) segments.
type Row = (String, Vec<(f64, RGBColor)>);
/// A line of figure 2: the series name and its (step, speedup, transformation) points.
type Line<'a> = (&'a str, Vec<(usize, f64, &'a str)>);

/// One figure: the SVG, with its title also inside it as `<title>`.
#[derive(Debug, Clone)]
pub struct Figure {
    pub id: String,
    pub title: String,
    /// A sentence under the figure: what is plotted, or why nothing is.
    pub note: Option<String>,
    pub svg: String,
}

fn finish(id: &str, title: &str, note: Option<String>, svg: String) -> Figure {
    // A <title> first inside <svg> names the figure for screen readers and tooltips.
    let svg = match svg.find('>') {
        Some(end) => format!("{}<title>{}</title>{}", &svg[..=end], crate::markup::escape(title), &svg[end + 1..]),
        None => svg,
    };
    Figure { id: id.to_string(), title: title.to_string(), note, svg }
}

/// A figure with nothing to plot: its frame and the reason.
pub fn empty(id: &str, title: &str, why: &str) -> Result<Figure> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, 120)).into_drawing_area();
        root.fill(&RGBColor(0xf7, 0xf8, 0xfa))?;
        let grey = INK.mix(0.8);
        let style = TextStyle::from((FONT, 15).into_font())
            .color(&grey)
            .pos(plotters::style::text_anchor::Pos::new(plotters::style::text_anchor::HPos::Center, plotters::style::text_anchor::VPos::Center));
        root.draw(&Text::new(why.to_string(), (WIDTH as i32 / 2, 60), style))?;
        root.present()?;
    }
    Ok(finish(id, title, None, svg))
}

/// Speedup over log2, so that 2x up and 2x down are the same distance.
fn log2(x: f64) -> f64 {
    x.max(1e-9).log2()
}

/// Whole numbers only: counts have no fractional ticks.
fn count_label(v: &f64) -> String {
    if (v - v.round()).abs() < 1e-6 { format!("{v:.0}") } else { String::new() }
}

fn ratio_label(v: &f64) -> String {
    let x = 2f64.powf(*v);
    if x >= 10.0 {
        format!("{x:.0}x")
    } else if x >= 1.0 {
        format!("{x:.1}x")
    } else {
        format!("{x:.2}x")
    }
}

/// Figure 2: speedup over the root per step, one line per series.
pub fn speedup_per_step(w: &WorkflowReport) -> Result<Figure> {
    let (id, title) = ("fig-speedup", "Speedup over the root per step (paper fig. 2)");
    let lines: Vec<Line> = w
        .series
        .iter()
        .map(|s| (s.name.as_str(), s.steps.iter().filter_map(|st| Some((st.index, st.speedup_over_root?, st.transformation.as_str()))).collect()))
        .filter(|(_, pts): &(&str, Vec<_>)| pts.len() > 1)
        .collect();
    if lines.is_empty() {
        return empty(id, title, "no timed steps: every checkpoint is deferred or untimed (replay it on a device)");
    }
    let max_step = lines.iter().flat_map(|(_, p)| p.iter().map(|q| q.0)).max().unwrap_or(1).max(1);
    let ys: Vec<f64> = lines.iter().flat_map(|(_, p)| p.iter().map(|q| log2(q.1))).collect();
    let (lo, hi) = (ys.iter().copied().fold(0.0f64, f64::min), ys.iter().copied().fold(0.0f64, f64::max));
    let pad = ((hi - lo) * 0.08).max(0.25);
    // Step names along the x axis, from the longest series.
    let longest =
        w.series.iter().max_by_key(|s| s.steps.len()).map(|s| s.steps.iter().map(|st| st.transformation.clone()).collect::<Vec<_>>()).unwrap_or_default();
    let label_len = longest.iter().map(|n| n.len() + 4).max().unwrap_or(4) as u32;
    // Step names lie flat when they fit side by side, else they stand on end.
    let flat = (max_step as u32 + 1) * (label_len * 7 + 12) < WIDTH - 120;
    let label_area = if flat { 40 } else { 24 + 7 * label_len };
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, 380 + label_area)).into_drawing_area();
        root.fill(&WHITE)?;
        let mut chart = ChartBuilder::on(&root)
            .margin(18)
            .margin_right(30)
            .x_label_area_size(label_area)
            .y_label_area_size(64)
            .build_cartesian_2d(-0.3f64..max_step as f64 + 0.3, (lo - pad)..(hi + pad))?;
        chart
            .configure_mesh()
            .x_labels(max_step + 1)
            // The step names are drawn below (`step_labels`), hanging from the axis.
            .x_label_formatter(&|_| String::new())
            .y_label_formatter(&ratio_label)
            .y_label_style((FONT, 13).into_font().color(&INK))
            .y_desc("speedup over the root (log scale)")
            .axis_desc_style((FONT, 14).into_font().color(&INK))
            .bold_line_style(GRID)
            .light_line_style(TRANSPARENT)
            .axis_style(INK.mix(0.6))
            .draw()?;
        chart.draw_series(LineSeries::new([(-0.3, 0.0), (max_step as f64 + 0.3, 0.0)], INK.mix(0.35).stroke_width(1)))?;
        for (i, (name, pts)) in lines.iter().enumerate() {
            let color = PALETTE[i % PALETTE.len()];
            chart
                .draw_series(LineSeries::new(pts.iter().map(|p| (p.0 as f64, log2(p.1))), color.stroke_width(3)))?
                .label(name.to_string())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 22, y)], color.stroke_width(3)));
            chart.draw_series(pts.iter().map(|p| Circle::new((p.0 as f64, log2(p.1)), 5, color.filled())))?;
        }
        // The last point of each series carries its value, drawn on the whole figure (not
        // clipped by the plot) and ending at the point, so the rightmost stays in view.
        let value_style = |i: usize| {
            TextStyle::from((FONT, 14).into_font().style(FontStyle::Bold)).color(&PALETTE[i % PALETTE.len()]).pos(Pos::new(HPos::Right, VPos::Bottom))
        };
        for (i, (_, pts)) in lines.iter().enumerate() {
            if let Some(last) = pts.last() {
                let (x, y) = chart.backend_coord(&(last.0 as f64, log2(last.1)));
                root.draw(&Text::new(format!("{:.2}x", last.1), (x + 4, y - 8), value_style(i)))?;
            }
        }
        step_labels(&root, &|i| chart.backend_coord(&(i as f64, lo - pad)), &longest, flat)?;
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .label_font((FONT, 14).into_font().color(&INK))
            .background_style(WHITE.mix(0.9))
            .border_style(GRID)
            .draw()?;
        root.present()?;
    }
    Ok(finish(id, title, Some("Each line is one branch, followed from the root by first parents; the y axis is logarithmic.".into()), svg))
}

/// The step names under figure 2's x axis: `at(i)` is where step i meets the axis. Flat
/// and centred when they fit side by side, else standing on end and hanging down from the
/// axis, so none crosses into the plot.
fn step_labels<DB: DrawingBackend>(root: &DrawingArea<DB, plotters::coord::Shift>, at: &dyn Fn(usize) -> (i32, i32), names: &[String], flat: bool) -> Result<()>
where
    DB::ErrorType: 'static,
{
    let style = TextStyle::from((FONT, 13).into_font()).color(&INK);
    for (i, name) in names.iter().enumerate() {
        let (x, y) = at(i);
        let text = format!("{i} {name}");
        let label = if flat {
            Text::new(text, (x, y + 8), style.pos(Pos::new(HPos::Center, VPos::Top)))
        } else {
            Text::new(text, (x, y + 8), style.transform(FontTransform::Rotate90).pos(Pos::new(HPos::Left, VPos::Center)))
        };
        root.draw(&label).map_err(|e| anyhow::anyhow!("drawing a step label: {e}"))?;
    }
    Ok(())
}

/// Horizontal bars, one per labelled row (the first on top); `segments` are (value,
/// colour) stacked from `origin`. Row labels are drawn beside the plot, one per row.
fn bars(
    rows: &[Row],
    origin: f64,
    x_range: (f64, f64),
    x_desc: &str,
    x_fmt: &dyn Fn(&f64) -> String,
    legend: &[(&str, RGBColor)],
    baseline: Option<f64>,
) -> Result<String> {
    let n = rows.len().max(1);
    let label_len = rows.iter().map(|r| r.0.chars().count()).max().unwrap_or(8) as u32;
    let height = 100 + 32 * n as u32 + if legend.is_empty() { 0 } else { 36 };
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, height)).into_drawing_area();
        root.fill(&WHITE)?;
        let (plot, legend_area) = if legend.is_empty() {
            (root.clone(), None)
        } else {
            let (a, b) = root.split_vertically(height - 36);
            (a, Some(b))
        };
        let mut chart = ChartBuilder::on(&plot)
            .margin(16)
            .margin_right(30)
            .x_label_area_size(44)
            .y_label_area_size((label_len * 7 + 20).min(360))
            .build_cartesian_2d(x_range.0..x_range.1, 0f64..n as f64)?;
        chart
            .configure_mesh()
            .disable_y_mesh()
            .y_labels(0)
            .x_label_formatter(x_fmt)
            .x_label_style((FONT, 13).into_font().color(&INK))
            .x_desc(x_desc)
            .axis_desc_style((FONT, 14).into_font().color(&INK))
            .bold_line_style(GRID)
            .light_line_style(TRANSPARENT)
            .axis_style(INK.mix(0.6))
            .draw()?;
        let label_style = TextStyle::from((FONT, 13).into_font())
            .color(&INK)
            .pos(plotters::style::text_anchor::Pos::new(plotters::style::text_anchor::HPos::Right, plotters::style::text_anchor::VPos::Center));
        for (r, (label, segments)) in rows.iter().enumerate() {
            let y = (n - 1 - r) as f64;
            let mut at = origin;
            for (value, color) in segments {
                chart.draw_series(std::iter::once(Rectangle::new([(at, y + 0.18), (at + value, y + 0.82)], color.filled())))?;
                at += value;
            }
            let (px, py) = chart.backend_coord(&(x_range.0, y + 0.5));
            plot.draw(&Text::new(label.clone(), (px - 10, py), label_style.clone()))?;
        }
        if let Some(x) = baseline {
            chart.draw_series(LineSeries::new([(x, 0.0), (x, n as f64)], INK.mix(0.5).stroke_width(1)))?;
        }
        if let Some(area) = legend_area {
            let mut x = 20;
            for (name, color) in legend {
                area.draw(&Rectangle::new([(x, 10), (x + 14, 24)], color.filled()))?;
                area.draw(&Text::new(name.to_string(), (x + 20, 10), (FONT, 13).into_font().color(&INK)))?;
                x += 34 + 7 * name.len() as i32;
            }
        }
        root.present()?;
    }
    Ok(svg)
}

/// Tick labels for amounts: whole numbers bare, others with one decimal.
fn amount_label(v: &f64) -> String {
    if (v - v.round()).abs() < 1e-6 { format!("{v:.0}") } else { format!("{v:.1}") }
}

/// Every checkpoint once, in series order, with the series name where it is not the first's.
fn distinct_steps(w: &WorkflowReport) -> Vec<(String, &Step)> {
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for (i, s) in w.series.iter().enumerate() {
        for st in s.steps.iter().skip(1) {
            if seen.insert(st.id.clone()) {
                let label = if i == 0 { st.transformation.clone() } else { format!("{} [{}]", st.transformation, s.name) };
                out.push((label, st));
            }
        }
    }
    out
}

/// Figure 3: speedup of each step over its parent.
pub fn speedup_over_previous(w: &WorkflowReport) -> Result<Figure> {
    let (id, title) = ("fig-previous", "Speedup over the previous step (paper fig. 3)");
    let rows: Vec<Row> = distinct_steps(w)
        .into_iter()
        .filter_map(|(label, st)| {
            let s = st.speedup_over_previous?;
            Some((format!("{label}  {s:.2}x"), vec![(log2(s), if s >= 1.0 { GOOD } else { BAD })]))
        })
        .collect();
    if rows.is_empty() {
        return empty(id, title, "no timed steps: every checkpoint is deferred or untimed");
    }
    let vals: Vec<f64> = rows.iter().map(|r| r.1[0].0).collect();
    let lo = vals.iter().copied().fold(0.0f64, f64::min).min(-0.5);
    let hi = vals.iter().copied().fold(0.0f64, f64::max).max(0.5);
    let svg = bars(&rows, 0.0, (lo - 0.1, hi + 0.1), "speedup over the previous step (log scale; green faster, red slower)", &ratio_label, &[], Some(0.0))?;
    Ok(finish(id, title, None, svg))
}

/// The colour of each success column and failure kind.
pub fn outcome_colors() -> Vec<(&'static str, RGBColor)> {
    let mut v = vec![("first try", GOOD), ("after repair", RGBColor(0x9f, 0xd1, 0x8f))];
    let kinds = [
        RGBColor(0xb0, 0x7a, 0xa1),
        RGBColor(0xf2, 0x8e, 0x2b),
        BAD,
        RGBColor(0x8c, 0x2d, 0x2d),
        RGBColor(0x4e, 0x4e, 0x4e),
        RGBColor(0xed, 0xc9, 0x48),
        RGBColor(0xba, 0xb0, 0xac),
        RGBColor(0x76, 0xb7, 0xb2),
    ];
    v.extend(FAILURE_KINDS.iter().copied().zip(kinds));
    v
}

/// Figure 4: tries per executor x transformation, by outcome.
pub fn success(w: &WorkflowReport) -> Result<Figure> {
    let (id, title) = ("fig-success", "Success per executor and transformation (paper fig. 4)");
    if w.success.is_empty() {
        return empty(id, title, "no attempts recorded");
    }
    let colors = outcome_colors();
    let rows: Vec<Row> = w
        .success
        .iter()
        .map(|r| {
            let mut segs = vec![(r.first_try as f64, colors[0].1), (r.after_repair as f64, colors[1].1)];
            for (kind, color) in &colors[2..] {
                segs.push((r.failures.get(*kind).copied().unwrap_or(0) as f64, *color));
            }
            (format!("{} · {}", r.executor, r.transformation), segs)
        })
        .collect();
    let max = w.success.iter().map(|r| r.tries).max().unwrap_or(1) as f64;
    let used: Vec<(&str, RGBColor)> = colors
        .iter()
        .enumerate()
        .filter(|(i, (kind, _))| match i {
            0 => w.success.iter().any(|r| r.first_try > 0),
            1 => w.success.iter().any(|r| r.after_repair > 0),
            _ => w.success.iter().any(|r| r.failures.contains_key(*kind)),
        })
        .map(|(_, c)| *c)
        .collect();
    let svg = bars(&rows, 0.0, (0.0, max * 1.05 + 0.2), "tries (a repair is a try; a success ends an apply)", &count_label, &used, None)?;
    Ok(finish(id, title, Some("Green: tries that produced a checkpoint, on the first try or after repairs; other colours: failed tries by kind.".into()), svg))
}

/// Figure 5: where failed validation tries were caught.
pub fn depth(w: &WorkflowReport) -> Result<Figure> {
    let (id, title) = ("fig-depth", "Evaluation depth: where failures were caught (paper fig. 5)");
    if w.depth.is_empty() {
        return empty(id, title, "no failed validation tries recorded: every try in this workflow passed");
    }
    let known: Vec<(u32, &str)> = w.depth.iter().filter_map(|d| Some((d.first_failing_sample?, d.validator.as_str()))).collect();
    let validators: Vec<&str> = {
        let mut v: Vec<&str> = w.depth.iter().map(|d| d.validator.as_str()).collect();
        v.sort();
        v.dedup();
        v
    };
    let legend: Vec<(&str, RGBColor)> = validators.iter().enumerate().map(|(i, v)| (*v, PALETTE[i % PALETTE.len()])).collect();
    let color_of = |v: &str| legend.iter().find(|(n, _)| *n == v).map(|c| c.1).unwrap_or(INK);
    let (rows, note): (Vec<Row>, String) = if known.is_empty() {
        // The sample is not recorded: show which validator caught what.
        let rows =
            validators.iter().map(|v| (format!("caught by {v}"), vec![(w.depth.iter().filter(|d| d.validator == *v).count() as f64, color_of(v))])).collect();
        (rows, "The attempts log does not record which sampled execution parameter failed first, so only the validator is shown.".into())
    } else {
        let max = known.iter().map(|k| k.0).max().unwrap_or(1);
        let rows = (1..=max)
            .map(|s| (format!("sample {s}"), validators.iter().map(|v| (known.iter().filter(|k| k.0 == s && k.1 == *v).count() as f64, color_of(v))).collect()))
            .collect();
        (rows, format!("{max} sample{} would have caught every recorded failure.", if max == 1 { "" } else { "s" }))
    };
    let max = rows.iter().map(|r| r.1.iter().map(|s| s.0).sum::<f64>()).fold(1.0f64, f64::max);
    let svg = bars(&rows, 0.0, (0.0, max * 1.05), "failed tries", &count_label, &legend, None)?;
    Ok(finish(id, title, Some(note), svg))
}

/// Table 5 as bars: seconds per checkpoint, by activity.
pub fn time(w: &WorkflowReport) -> Result<Figure> {
    let (id, title) = ("fig-time", "Time per step: validation, transformation, tuning (paper table 5)");
    let legend = [("validation", PALETTE[0]), ("transformation (executor)", PALETTE[1]), ("performance (tuning)", PALETTE[2])];
    let rows: Vec<Row> = w
        .time
        .rows
        .iter()
        .filter(|r| r.validation_s.is_some() || r.tuning_s.is_some() || r.transformation_s.is_some_and(|t| t > 0.0))
        .map(|r| {
            (
                r.transformation.clone(),
                vec![(r.validation_s.unwrap_or(0.0), legend[0].1), (r.transformation_s.unwrap_or(0.0), legend[1].1), (r.tuning_s.unwrap_or(0.0), legend[2].1)],
            )
        })
        .collect();
    if rows.is_empty() {
        return empty(id, title, "no times recorded: these checkpoints predate `elapsed_s` in their records");
    }
    let max = rows.iter().map(|r| r.1.iter().map(|s| s.0).sum::<f64>()).fold(0.1f64, f64::max);
    let svg = bars(&rows, 0.0, (0.0, max * 1.05), "seconds", &amount_label, &legend, None)?;
    Ok(finish(id, title, None, svg))
}

/// Best-so-far against evaluations, as a fraction of each run's final best.
pub fn convergence(w: &WorkflowReport) -> Result<Figure> {
    let (id, title) = ("fig-convergence", "Tuning convergence: best so far against evaluations");
    if w.convergence.is_empty() {
        return empty(id, title, "no tuning curve recorded (performance.json's runs[].curve; recorded by peak since reports were added)");
    }
    let max_eval = w.convergence.iter().flat_map(|c| c.curve.iter().map(|p| p.0).chain(c.evaluations)).max().unwrap_or(1).max(1) as f64;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, 420)).into_drawing_area();
        root.fill(&WHITE)?;
        let mut chart =
            ChartBuilder::on(&root).margin(18).margin_right(30).x_label_area_size(44).y_label_area_size(64).build_cartesian_2d(0f64..max_eval, 0f64..1.05)?;
        chart
            .configure_mesh()
            .x_desc("evaluations")
            .y_desc("fraction of the final best")
            .y_label_formatter(&|v| format!("{:.0}%", v * 100.0))
            .x_label_formatter(&|v| format!("{v:.0}"))
            .label_style((FONT, 13).into_font().color(&INK))
            .axis_desc_style((FONT, 14).into_font().color(&INK))
            .bold_line_style(GRID)
            .light_line_style(TRANSPARENT)
            .axis_style(INK.mix(0.6))
            .draw()?;
        for (i, c) in w.convergence.iter().enumerate() {
            let color = PALETTE[i % PALETTE.len()];
            let best = c.curve.last().map(|p| p.1).unwrap_or(1.0);
            let end = c.evaluations.map(|e| e as f64).unwrap_or(max_eval);
            // A step function: the best holds until the next improvement.
            let mut pts = Vec::new();
            for (j, p) in c.curve.iter().enumerate() {
                let y = best / p.1;
                if j > 0 {
                    pts.push((p.0 as f64, pts.last().map(|q: &(f64, f64)| q.1).unwrap_or(y)));
                }
                pts.push((p.0 as f64, y));
            }
            pts.push((end, 1.0));
            chart
                .draw_series(LineSeries::new(pts, color.stroke_width(2)))?
                .label(format!("{} ({})", c.transformation, crate::tables::inputs(&c.inputs)))
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 22, y)], color.stroke_width(3)));
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::LowerRight)
            .label_font((FONT, 13).into_font().color(&INK))
            .background_style(WHITE.mix(0.9))
            .border_style(GRID)
            .draw()?;
        root.present()?;
    }
    Ok(finish(id, title, Some("Each line is one tuning run (a checkpoint at one input size); 100% is the best it found.".into()), svg))
}

/// Every figure of one workflow, in the page's order.
pub fn all(w: &WorkflowReport) -> Result<Vec<Figure>> {
    Ok(vec![speedup_per_step(w)?, speedup_over_previous(w)?, success(w)?, depth(w)?, time(w)?, convergence(w)?])
}
