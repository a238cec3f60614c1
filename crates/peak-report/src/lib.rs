//! Reports from workflow records: the PEAK paper's figures and tables (speedup per step,
//! speedup over the previous step, success per executor and transformation, evaluation
//! depth, the time breakdown) and tuning convergence, for `peak report`.
//!
//! * [`data`] gathers a [`Report`] from workflow folders or bundle files, through
//!   `peak_workflow`'s reading API; it is `Serialize` for `--json`.
//! * [`sizes`] holds the input sizes a step was tuned at besides its headline, which the
//!   step tables give one row each.
//! * [`tables`] renders it as plain aligned terminal tables.
//! * [`figures`] draws each figure as SVG with plotters' SVG backend (no font files: the
//!   SVG keeps `<text>`, which the browser draws).
//! * [`html`] puts the tables and figures into one self-contained page: inline CSS and
//!   SVG, no script, nothing fetched.
//!
//! Records are read leniently. A value a workflow does not record (a tuning curve, a
//! baseline measurement, the sample that caught a failure) is left empty and listed in
//! [`WorkflowReport::missing`], never estimated.
//!
//! ```no_run
//! let report = peak_report::gather(&["examples/workflows/matmul-opencl-agent.bundle".into()])?;
//! print!("{}", peak_report::tables::render(&report));
//! std::fs::write("report.html", peak_report::html::render(&report)?)?;
//! # Ok::<(), anyhow::Error>(())
//! ```

pub mod data;
pub mod figures;
pub mod html;
mod markup;
pub mod sizes;
pub mod tables;

pub use data::{Report, WorkflowReport, gather, gather_one};
