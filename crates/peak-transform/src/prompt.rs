//! Prompts for one pass of a transformation, and for repairing it.
//!
//! A pass prompt carries everything the model needs and nothing it could confuse with the
//! task: the transformation's text with this backend's terms substituted, the one region to
//! edit, the other regions marked read-only, the tuning parameters (the context's and the
//! ones this transformation introduces, with their constraints), the translation table,
//! the snippets peak will insert, and the exact answer format that
//! [`crate::reply::parse_reply`] expects. The same text goes to an LLM, to a person or agent
//! through the agent executor, and into the transcript, so a replay shows what was asked.

use std::fmt::Write as _;

use peak_spec::{Pattern, Region, Regions};

use crate::error::PromptError;
use crate::format::{BackendText, Language, Pass, Transformation, TranslationTable, substitute};
use crate::library::{Library, Snippet};
use crate::reply::{ReplyError, parse_reply};

/// A tuning parameter or scalar input of the kernel context, as the prompt shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContextParam {
    pub name: String,
    /// The values it takes, written for a person: `8, 16, 32` or `pow2 [4, 64]`.
    pub values: String,
}

impl ContextParam {
    pub fn new(name: impl Into<String>, values: impl Into<String>) -> Self {
        ContextParam { name: name.into(), values: values.into() }
    }
}

/// What the context says its kernel is.
#[derive(Debug, Clone, Copy, Default)]
pub struct KernelBrief<'a> {
    /// Its pattern, declared or read off its code; `None` when neither says.
    pub pattern: Option<Pattern>,
    /// What it computes and takes, in the context's words (`Manifest::describe_kernel`).
    pub description: &'a str,
}

/// The kernel context a pass is applied to.
#[derive(Debug, Clone, Copy)]
pub struct PromptContext<'a> {
    pub kernel: KernelBrief<'a>,
    /// The current source: for a pass, the result of the previous passes; for a repair,
    /// the version that failed.
    pub regions: &'a Regions,
    pub backend: Language,
    /// The tuning parameters of the checkpoint the transformation starts from, without the
    /// ones it introduces (those are added from the transformation file).
    pub tuning: &'a [ContextParam],
    /// Scalar inputs, e.g. `n`.
    pub inputs: &'a [ContextParam],
    /// The context's existing `[constraints] tuning` expressions.
    pub constraints: &'a [String],
}

/// What went wrong with the previous attempt, for a repair prompt.
#[derive(Debug, Clone)]
pub enum Feedback {
    /// The device code or the launch script did not compile; the compiler's log.
    CompileError(String),
    /// It ran but failed (a launch error, a crash, a time-out); what the runner reported.
    RuntimeError(String),
    /// It ran but the outputs differ from the reference; the validator's verdict.
    WrongOutput(String),
    /// The reply itself could not be used.
    BadReply(ReplyError),
}

/// The prompt for one pass, and how to turn the reply into the region's new text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PassPrompt {
    pub transformation: String,
    /// 1-based pass number.
    pub pass: usize,
    pub passes: usize,
    /// The region this pass edits.
    pub region: Region,
    pub text: String,
    /// Snippet texts to insert at the top of the region, those not already in the source.
    snippets: Vec<String>,
}

impl PassPrompt {
    /// The region a prompt's text asks for, read back from the line every prompt
    /// carries: a waiting agent's prompt is the record of what it was asked.
    pub fn region_asked(text: &str) -> Option<Region> {
        let after = text.split("You edit the **").nth(1)?;
        after.split("**").next()?.parse().ok()
    }

    /// Parse a reply and return the complete new text of [`Self::region`], with this
    /// pass's snippets inserted at its top.
    pub fn accept(&self, reply: &str, current: &Regions) -> Result<String, ReplyError> {
        let code = parse_reply(reply, current, self.region)?;
        // A region returned exactly as it was declines the pass (a transformation that does
        // not fit the kernel): the snippets serve code the pass writes, and inserted into a
        // region left alone they alone would count as a change, and the decline as a step.
        if code.trim_end() == current.get(self.region).trim_end() {
            return Ok(current.get(self.region).to_string());
        }
        let mut out = String::new();
        for snippet in &self.snippets {
            // An agent or model may have kept the snippet despite being told not to;
            // inserting it again would define everything twice.
            if !code.contains(snippet.trim()) {
                out.push_str(snippet.trim_end());
                out.push_str("\n\n");
            }
        }
        out.push_str(&code);
        Ok(out)
    }
}

/// Longest log kept in a repair prompt. Compilers report the first errors first, and the
/// first errors are the ones that matter, so the head is kept with a short tail.
const MAX_LOG_CHARS: usize = 16_000;
const LOG_TAIL_CHARS: usize = 2_000;

impl Library {
    /// The prompt for pass `pass` (1-based) of `transformation`.
    pub fn pass_prompt(&self, transformation: &Transformation, pass: usize, ctx: &PromptContext<'_>) -> Result<PassPrompt, PromptError> {
        self.build(transformation, pass, ctx, None)
    }

    /// The prompt for trying pass `pass` again after `feedback`. `ctx.regions` is the
    /// version that failed, so the model sees what it is repairing.
    pub fn repair_prompt(&self, transformation: &Transformation, pass: usize, ctx: &PromptContext<'_>, feedback: &Feedback) -> Result<PassPrompt, PromptError> {
        self.build(transformation, pass, ctx, Some((feedback, None)))
    }

    /// The repair prompt for pass `pass` when the fault lies in `region`, a region no pass
    /// of this transformation edits (macros an earlier step wrote, say): the repair goes
    /// where the fault is, with the pass's instructions kept as the goal.
    pub fn repair_prompt_in(
        &self,
        transformation: &Transformation,
        pass: usize,
        ctx: &PromptContext<'_>,
        feedback: &Feedback,
        region: Region,
    ) -> Result<PassPrompt, PromptError> {
        self.build(transformation, pass, ctx, Some((feedback, Some(region))))
    }

    /// The prompt's sections in the order the model reads them: the task (kernel,
    /// transformation, this pass), the snippets peak inserts, the backend's terms, the
    /// tuning parameters, the source, what went wrong (for a repair), and the answer format.
    fn build(
        &self,
        t: &Transformation,
        pass_no: usize,
        ctx: &PromptContext<'_>,
        repair: Option<(&Feedback, Option<Region>)>,
    ) -> Result<PassPrompt, PromptError> {
        let pass = pass_no.checked_sub(1).and_then(|i| t.passes.get(i)).ok_or_else(|| PromptError::NoSuchPass {
            transformation: t.name.clone(),
            pass: pass_no,
            count: t.passes.len(),
        })?;
        let feedback = repair.map(|(f, _)| f);
        // The region this prompt asks for: the pass's own, or the one a repair must fix.
        let moved = repair.and_then(|(_, r)| r).filter(|r| *r != pass.region);
        let region = moved.unwrap_or(pass.region);
        self.check_applicable(t, ctx)?;

        let table = self.translation_table(t, ctx.backend);
        let mut s = String::new();
        task(&mut s, t, ctx, pass_no, pass, region, &table);
        // A repair moved to another region inserts nothing there: the snippets belong to
        // the pass's own region.
        let (inserted, present) = if moved.is_none() { self.pass_snippets(pass, ctx) } else { (Vec::new(), Vec::new()) };
        snippets(&mut s, pass.region, ctx.backend, &inserted, &present);
        backend_terms(&mut s, ctx.backend, &table);
        tuning_parameters(&mut s, t, ctx, &table);
        kernel_context(&mut s, ctx, region);
        if let Some(feedback) = feedback {
            previous_attempt(&mut s, feedback, moved.is_some(), region);
        }
        answer_format(&mut s, region, !inserted.is_empty());

        Ok(PassPrompt {
            transformation: t.name.clone(),
            pass: pass_no,
            passes: t.passes.len(),
            region,
            text: s,
            snippets: inserted.iter().map(|sn| sn.text.clone()).collect(),
        })
    }

    /// Refuses, before any text is written, a transformation this context cannot take: one
    /// for another backend or kernel pattern, one whose required names the context lacks,
    /// or one whose parameters the context already has (it was applied already).
    fn check_applicable(&self, t: &Transformation, ctx: &PromptContext<'_>) -> Result<(), PromptError> {
        let backend = ctx.backend;
        if !t.applies_to(backend) {
            let applies_to: Vec<&str> = t.applies_to.iter().map(|b| b.name()).collect();
            return Err(PromptError::NotApplicable { transformation: t.name.clone(), backend, applies_to: applies_to.join(", ") });
        }
        if !t.fits(ctx.kernel.pattern) {
            let patterns = t.patterns.iter().map(|p| p.name()).collect::<Vec<_>>().join(" or ");
            return Err(match ctx.kernel.pattern {
                Some(pattern) => PromptError::WrongPattern {
                    transformation: t.name.clone(),
                    pattern,
                    patterns,
                    fitting: self.fitting(Some(pattern), backend, ctx.regions.launched_kernels().len()),
                },
                None => PromptError::UnknownPattern { transformation: t.name.clone(), patterns },
            });
        }
        let known = |name: &str| ctx.tuning.iter().chain(ctx.inputs).any(|p| p.name == name);
        if let Some(name) = t.requires.iter().chain(&t.redefines).find(|n| !known(n)) {
            return Err(PromptError::MissingRequirement { transformation: t.name.clone(), name: name.clone() });
        }
        let mut introduced = t.tuning.iter().filter(|p| !t.redefines.contains(&p.name));
        if let Some(p) = introduced.find(|p| ctx.tuning.iter().any(|c| c.name == p.name)) {
            let introducers = self
                .list()
                .iter()
                .filter(|o| o.name != t.name && o.tuning.iter().any(|q| q.name == p.name && !o.redefines.contains(&q.name)))
                .map(|o| o.name.clone())
                .collect();
            return Err(PromptError::ParameterExists { transformation: t.name.clone(), name: p.name.clone(), introducers });
        }
        Ok(())
    }

    /// The pass's snippets for this backend, split into those peak will insert and the
    /// names of those the source holds already (a snippet an earlier pass inserted).
    fn pass_snippets<'a>(&'a self, pass: &'a Pass, ctx: &PromptContext<'_>) -> (Vec<&'a Snippet>, Vec<&'a str>) {
        let mut inserted = Vec::new();
        let mut present = Vec::new();
        for name in &pass.snippets {
            // Validation guarantees the snippet exists for every backend the transformation
            // applies to; a missing one can only come from a hand-built Library.
            let Some(snippet) = self.snippet(name, ctx.backend) else { continue };
            if Region::ALL.iter().any(|r| ctx.regions.get(*r).contains(snippet.text.trim())) {
                present.push(name.as_str());
            } else {
                inserted.push(snippet);
            }
        }
        (inserted, present)
    }
}

/// The task: who the model is, what the kernel computes, the transformation with this
/// backend's terms substituted, and this pass's instructions with the one region to edit.
fn task(s: &mut String, t: &Transformation, ctx: &PromptContext<'_>, pass_no: usize, pass: &Pass, region: Region, table: &TranslationTable) {
    let _ = writeln!(
        s,
        "You are an expert GPU performance engineer. You are applying one pass of a code transformation to a GPU kernel; you answer with the new code of one region of its source.\n"
    );

    if !ctx.kernel.description.trim().is_empty() {
        let _ = writeln!(s, "# The kernel\n\n{}\n", ctx.kernel.description.trim_end());
    }
    let _ = writeln!(s, "# Transformation: {}\n", t.name);
    let _ = writeln!(s, "{}\n", substitute(&t.description, table));
    if let Some(overview) = &t.overview {
        let _ = writeln!(s, "{}\n", substitute(overview.trim_end(), table));
    }

    let _ = writeln!(s, "# This pass: {pass_no} of {}, \"{}\"\n", t.passes.len(), substitute(&pass.title, table));
    let _ = writeln!(s, "You edit the **{region}** region and nothing else.\n");
    let _ = writeln!(s, "{}\n", substitute(pass.instructions.trim_end(), table));
}

/// The snippets peak inserts into `region` (the pass's own), shown so the model uses them
/// instead of writing its own, and the names of those already in the source.
fn snippets(s: &mut String, region: Region, backend: Language, inserted: &[&Snippet], present: &[&str]) {
    if !inserted.is_empty() {
        let _ = writeln!(s, "## Snippets\n");
        let _ = writeln!(
            s,
            "peak inserts the following hand-written code verbatim at the top of the {} region, before your code. Use it as it is: do not copy, redefine or modify it in your answer.\n",
            region
        );
        for snippet in inserted {
            let _ = writeln!(s, "`{}`:\n{}", snippet.name, fenced(backend.fence_language(), &snippet.text));
        }
    }
    if !present.is_empty() {
        let _ = writeln!(s, "The snippets {} are already in the source below; use them and keep them unchanged.\n", present.join(", "));
    }
}

/// The backend, and how it spells each generic term the transformation's text uses.
fn backend_terms(s: &mut String, backend: Language, table: &TranslationTable) {
    let _ = writeln!(s, "# Backend: {} — {}\n", backend, backend.language());
    if !table.is_empty() {
        let _ = writeln!(s, "The generic terms of this transformation and their {backend} spelling:\n");
        for (term, spelling) in table {
            // A multi-line spelling (a block of preprocessor lines) stays readable as an
            // indented continuation, where a table cell would break.
            let _ = writeln!(s, "- `{term}`: {}", spelling.trim_end().replace('\n', "\n  "));
        }
        s.push('\n');
    }
}

/// The names the code may use and must not fix: the context's tuning parameters, those
/// this transformation introduces, the constraints of both, and the scalar inputs. The
/// code has to be right for every combination, since an autotuner picks them.
fn tuning_parameters(s: &mut String, t: &Transformation, ctx: &PromptContext<'_>, table: &TranslationTable) {
    let _ = writeln!(s, "# Tuning parameters\n");
    let _ = writeln!(
        s,
        "peak defines every tuning parameter as `#define NAME value` before the macros region, and as an integer variable of the same name in the host script. Never define them yourself and never hard-code their values: an autotuner chooses them, and the code must be correct for every combination the values and constraints below allow.\n"
    );
    if ctx.tuning.is_empty() {
        let _ = writeln!(s, "The kernel context has no tuning parameters yet.");
    } else {
        let _ = writeln!(s, "The kernel context's parameters:");
        for p in ctx.tuning {
            let _ = writeln!(s, "- `{}`: {}", p.name, p.values);
        }
    }
    if !t.tuning.is_empty() {
        let _ = writeln!(s, "\nIntroduced by this transformation (peak adds them to the context):");
        for p in &t.tuning {
            let values: Vec<String> = p.domain.expand().unwrap_or_default().iter().map(i64::to_string).collect();
            let _ = write!(s, "- `{}`: {}", p.name, values.join(", "));
            if let Some(d) = &p.description {
                let _ = write!(s, " — {}", substitute(d, table));
            }
            s.push('\n');
        }
    }
    let constraints: Vec<&String> = ctx.constraints.iter().chain(&t.constraints).collect();
    if !constraints.is_empty() {
        let _ = writeln!(s, "\nConstraints (only combinations satisfying all of them are run):");
        for c in constraints {
            let _ = writeln!(s, "- `{c}`");
        }
    }
    if !ctx.inputs.is_empty() {
        let _ = writeln!(s, "\nScalar inputs (kernel arguments, and variables in the host script):");
        for p in ctx.inputs {
            let _ = writeln!(s, "- `{}`: {}", p.name, p.values);
        }
    }
    s.push('\n');
}

/// How the source is laid out and what the launch script can call, then all three regions:
/// `region` marked as the one to edit, the others read-only, so the model sees the code it
/// must stay consistent with.
fn kernel_context(s: &mut String, ctx: &PromptContext<'_>, region: Region) {
    let backend = ctx.backend;
    let _ = writeln!(s, "# Kernel context\n");
    let _ = writeln!(
        s,
        "The source is one file in three regions, in this order: **macros** (preprocessor definitions, compiled before the device code), **device** (kernels and device functions in {}) and **host**, a Rhai launch script. The script sees tuning parameters and scalar inputs as integer constants, arrays as buffers of the same name, and the device's limits as the constants `WARP_SIZE`, `MAX_THREADS_PER_BLOCK`, `MAX_SHARED_BYTES` and `COMPUTE_UNITS`. It calls `launch(\"kernel\", grid, block, shared_bytes, args...)` (grid and block are an integer or `[x, y, z]`; more than 12 kernel arguments go as one array, `launch(\"kernel\", grid, block, shared_bytes, [a, b, ...])`), `ceil_div(a, b)`, `min`, `max`, `alloc(\"f32\", count)` for a scratch buffer, `fill(buffer, value)`, and `invalid(\"reason\")` to declare a configuration that cannot work, which prunes it instead of failing it.\n",
        backend.language()
    );
    for shown in Region::ALL {
        let role = if shown == region { "the region you edit" } else { "read-only" };
        let region_lang = if shown == Region::Host { "rhai" } else { backend.fence_language() };
        let text = ctx.regions.get(shown);
        let _ = writeln!(s, "## {shown} region ({role})\n");
        if text.trim().is_empty() {
            let _ = writeln!(s, "(empty)\n");
        } else {
            let _ = writeln!(s, "{}", fenced(region_lang, text));
        }
    }
}

/// For a repair: what went wrong with the source shown above (logs clipped to their head
/// and tail), and where to fix it. `moved` says the fault lies in a region this pass does
/// not edit, so the model is told why it is asked for that one.
fn previous_attempt(s: &mut String, feedback: &Feedback, moved: bool, region: Region) {
    let _ = writeln!(s, "# The previous attempt failed\n");
    match feedback {
        Feedback::CompileError(log) => {
            let _ = writeln!(s, "The source above, produced by this transformation, does not compile. The compiler said:\n\n{}", fenced("text", &clip(log)));
        }
        Feedback::RuntimeError(log) => {
            let _ = writeln!(s, "The source above, produced by this transformation, compiles but fails when run:\n\n{}", fenced("text", &clip(log)));
        }
        Feedback::WrongOutput(verdict) => {
            let _ = writeln!(
                s,
                "The source above, produced by this transformation, compiles and runs but its outputs differ from the original kernel's. The validator said:\n\n{}\nLook for indexing, bounds, synchronisation and tile-size assumptions that break for some of the allowed tuning values.\n",
                fenced("text", &clip(verdict))
            );
        }
        Feedback::BadReply(error) => {
            let _ = writeln!(s, "The previous answer could not be used: {error}. Answer exactly in the format below.\n");
        }
    }
    if moved {
        let _ = writeln!(
            s,
            "The fault is in the {region} region, which an earlier step wrote and this pass does not edit. Fix it by rewriting the {region} region so that the code this pass produced works.\n"
        );
    } else {
        let _ = writeln!(s, "Fix it by rewriting the {region} region, while still carrying out this pass.\n");
    }
}

/// The exact shape of the answer [`crate::reply::parse_reply`] accepts: one fenced block
/// with the whole region, without marker lines or the snippets peak inserts.
fn answer_format(s: &mut String, region: Region, snippets_inserted: bool) {
    let _ = writeln!(s, "# Answer format\n");
    let _ = writeln!(
        s,
        "Reply with exactly one fenced code block holding the complete new text of the {region} region, from its first line to its last, and nothing else: no second code block, no explanation outside the block.\n\
         - Do not include the region marker lines (`// @peak ...`) or the other regions; they stay exactly as shown.",
        region = region
    );
    if snippets_inserted {
        let _ = writeln!(s, "- Do not include the snippets listed above; peak inserts them.");
    }
    let _ = writeln!(s, "- Keep everything in the {region} region that this pass does not ask you to change.");
}

/// A fenced block that cannot be closed early by backticks inside `text`.
fn fenced(lang: &str, text: &str) -> String {
    let longest = text.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    let fence = "`".repeat(longest.max(2) + 1);
    let body = text.trim_end_matches('\n');
    format!("{fence}{lang}\n{body}\n{fence}\n")
}

fn clip(log: &str) -> String {
    let chars: Vec<char> = log.chars().collect();
    if chars.len() <= MAX_LOG_CHARS {
        return log.to_string();
    }
    let head: String = chars[..MAX_LOG_CHARS - LOG_TAIL_CHARS].iter().collect();
    let tail: String = chars[chars.len() - LOG_TAIL_CHARS..].iter().collect();
    format!("{head}\n[... {} characters left out ...]\n{tail}", chars.len() - MAX_LOG_CHARS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fence_outgrows_backticks_in_the_text() {
        assert_eq!(fenced("c", "int x;\n"), "```c\nint x;\n```\n");
        assert!(fenced("c", "a ```` b").starts_with("`````c\n"));
    }

    #[test]
    fn long_logs_keep_head_and_tail() {
        let log = format!("FIRST{}LAST", "x".repeat(40_000));
        let clipped = clip(&log);
        assert!(clipped.starts_with("FIRST") && clipped.ends_with("LAST"));
        assert!(clipped.len() < 17_000);
        assert!(clipped.contains("characters left out"));
    }
}
