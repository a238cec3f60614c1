//! The transformation file format.
//!
//! One TOML file per transformation, written by a performance engineer in minutes:
//!
//! ```toml
//! name = "Offset"
//! description = "Pad shared-memory tiles to avoid bank conflicts"
//! applies_to = ["cuda", "hip", "opencl", "hlsl"]   # optional: every backend when absent
//! patterns = ["gemm"]                              # optional: the patterns it is written
//!                                                  # for; any kernel when absent
//! requires = ["TILE_K"]                            # context parameters the text relies on
//! kernels = 2                                      # optional: the launch script must run
//!                                                  # at least this many distinct kernels
//! overview = "Why and what, shown in every pass prompt."
//!
//! [tuning]
//! OFFSET = { values = [0, 1, 2, 4], identity = 0, description = "elements of padding per row" }
//!
//! [constraints]
//! tuning = ["OFFSET < TILE_K"]
//!
//! [[passes]]
//! region = "device"
//! title = "Pad the shared tiles"
//! instructions = "Declare every {{shared}} tile with OFFSET extra elements per row ..."
//! snippets = ["tile_copy"]                          # inserted as-is at the top of the region
//!
//! [translations.cuda]
//! bank_count = "32"
//! ```
//!
//! Tuning domains use the manifest's syntax (`values`, `range` + `step`, `pow2`), plus an
//! optional `description` the prompt shows the model and an optional `identity`: the value
//! at which the new code does what the old code did (no padding, scalar accesses, one
//! split). A step whose every parameter has one, and whose constraints leave only those
//! values at the sizes a kernel is tuned at, would change nothing there, and is refused
//! before anything is asked. Parsing is strict
//! (`deny_unknown_fields`) because a misspelt key in a prompt recipe silently changes what
//! the model is asked to do; every error names the file and the field path. Checks that
//! need the rest of the library (snippets exist, `{{placeholders}}` are defined for every
//! backend) live in [`crate::library`].

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use peak_spec::{Pattern, Region};
use serde::Deserialize;

use crate::error::{LibraryError, PromptError};

/// A device-code language a transformation can target: the manifest's own backend type.
pub use peak_spec::Language;

/// What the transformation library says about each backend's language.
pub(crate) trait BackendText {
    /// File extension of this backend's snippets under `snippets/`.
    fn snippet_extension(self) -> &'static str;
    /// Language tag for fenced code blocks in prompts.
    fn fence_language(self) -> &'static str;
    /// The name people know the language by, for prompts.
    fn language(self) -> &'static str;
}

impl BackendText for Language {
    fn snippet_extension(self) -> &'static str {
        match self {
            Language::Cuda => "cu",
            Language::Hip => "hip",
            Language::Opencl => "cl",
            Language::Hlsl => "hlsl",
        }
    }

    fn fence_language(self) -> &'static str {
        match self {
            Language::Cuda => "cuda",
            Language::Hip => "cpp",
            Language::Opencl => "c",
            Language::Hlsl => "hlsl",
        }
    }

    fn language(self) -> &'static str {
        match self {
            Language::Cuda => "CUDA C++ (compiled with NVRTC)",
            Language::Hip => "HIP C++ (compiled with hipcc or, through a HIP-to-CUDA prelude, NVRTC)",
            Language::Opencl => "OpenCL C",
            Language::Hlsl => "HLSL compute shaders (compiled to SPIR-V, run through Vulkan)",
        }
    }
}

/// The values a tuning parameter may take: the manifest's own domain type, so a
/// transformation cannot introduce a parameter the manifest would later reject.
pub use peak_spec::Domain;

/// A tuning parameter a transformation introduces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TuningParam {
    pub name: String,
    pub domain: Domain,
    /// What the parameter means, for the model and for `show`.
    pub description: Option<String>,
    /// The value at which the transformation leaves the kernel doing what it did.
    pub identity: Option<i64>,
}

/// One step of a transformation: one region, one set of instructions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pass {
    pub title: String,
    pub region: Region,
    pub instructions: String,
    /// Snippet names, inserted verbatim at the top of the region.
    pub snippets: Vec<String>,
}

/// Generic term -> this backend's spelling, e.g. `thread_x -> threadIdx.x`.
pub type TranslationTable = BTreeMap<String, String>;

/// A parsed and validated transformation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transformation {
    pub name: String,
    pub description: String,
    pub overview: Option<String>,
    /// Backends this transformation serves; every backend when the file does not say.
    pub applies_to: Vec<Language>,
    /// The patterns of kernel this is written for; any kernel when empty.
    pub patterns: Vec<Pattern>,
    /// Names (tuning parameters or scalar inputs) the context must already have.
    pub requires: Vec<String>,
    /// The least number of distinct kernels the context's launch script must run (1 for
    /// most; 2 for one that fuses a kernel into another).
    pub kernels: usize,
    pub tuning: Vec<TuningParam>,
    /// Names in `tuning` that an earlier transformation introduced and this one gives a new
    /// domain (a parameter the new code no longer varies is pinned to one value, so the
    /// tuner does not time one kernel under many names). The context must have them.
    pub redefines: Vec<String>,
    /// Rhai expressions over `tuning` and `requires` names, as in a manifest's
    /// `[constraints] tuning`.
    pub constraints: Vec<String>,
    pub passes: Vec<Pass>,
    /// This transformation's own terms; the library's shared table fills in the rest.
    pub translations: BTreeMap<Language, TranslationTable>,
    /// Where the file came from (`builtin:<file>` for the shipped library).
    pub source: PathBuf,
    /// The context's names for this transformation's roles, once [`Self::with_roles`]
    /// applied them; the library's shared translations are renamed with them too.
    pub roles: BTreeMap<String, String>,
}

impl Transformation {
    pub fn applies_to(&self, backend: Language) -> bool {
        self.applies_to.contains(&backend)
    }

    /// Whether it is written for a kernel of this pattern. A kernel whose pattern is not
    /// known fits only the transformations written for any kernel: handing it one
    /// pattern's prompt would describe code it may not have.
    pub fn fits(&self, pattern: Option<Pattern>) -> bool {
        self.patterns.is_empty() || pattern.is_some_and(|p| self.patterns.contains(&p))
    }

    /// The transformation in a context's own names: every whole-word use of a role
    /// (`BLOCK_X`) in its texts, requirements and constraints becomes the context's name
    /// for it (`WG_X`), so the model reads, and the manifest receives, names that exist.
    /// A name the transformation already uses in code for something else is refused:
    /// Refactor defines a macro `BX`, so a context calling its block width `BX` would get
    /// two meanings for one name. Only code counts, as `backend`'s prompt shows it
    /// (names, constraints, `code spans`, fenced blocks and that backend's terms): the
    /// word C in "OpenCL C" or in another backend's text is prose, not a name.
    pub fn with_roles(&self, roles: &indexmap::IndexMap<String, String>, backend: Language) -> Result<Transformation, PromptError> {
        if roles.is_empty() {
            return Ok(self.clone());
        }
        let words = self.code_identifiers(backend);
        if let Some((role, name)) = roles.iter().find(|(role, name)| words.contains(role.as_str()) && words.contains(name.as_str())) {
            return Err(PromptError::RoleClash { transformation: self.name.clone(), role: role.clone(), name: name.clone() });
        }
        let roles: BTreeMap<String, String> = roles.iter().map(|(role, name)| (role.clone(), name.clone())).collect();
        let rename = |text: &str| rename_identifiers(text, &roles);
        let rename_all = |names: &[String]| names.iter().map(|n| rename(n)).collect::<Vec<_>>();
        Ok(Transformation {
            description: rename(&self.description),
            overview: self.overview.as_deref().map(rename),
            requires: rename_all(&self.requires),
            redefines: rename_all(&self.redefines),
            tuning: self.tuning.iter().map(|p| TuningParam { name: rename(&p.name), description: p.description.as_deref().map(rename), ..p.clone() }).collect(),
            constraints: rename_all(&self.constraints),
            passes: self.passes.iter().map(|p| Pass { title: rename(&p.title), instructions: rename(&p.instructions), ..p.clone() }).collect(),
            translations: self
                .translations
                .iter()
                .map(|(b, table)| (*b, table.iter().map(|(term, spelling)| (term.clone(), rename(spelling))).collect()))
                .collect(),
            roles: roles.clone(),
            ..self.clone()
        })
    }

    /// The identifiers the transformation uses as names in code on `backend`: its
    /// parameters and constraints, the `code spans` and fenced blocks of its texts, the
    /// upper-case names of its prose (macros and parameters are written so), and its own
    /// terms' spellings for that backend. Ordinary words are not names.
    fn code_identifiers(&self, backend: Language) -> BTreeSet<String> {
        let mut words = BTreeSet::new();
        let passes = self.passes.iter().flat_map(|p| [p.title.as_str(), p.instructions.as_str()]);
        let tuning_descriptions = self.tuning.iter().filter_map(|p| p.description.as_deref());
        for text in std::iter::once(self.description.as_str()).chain(self.overview.as_deref()).chain(passes).chain(tuning_descriptions) {
            for span in code_spans(text) {
                words.extend(identifiers(span).map(String::from));
            }
            // Upper-case names with two or more characters (TILE_K, BX, LEN) are
            // parameters and macros even outside code spans.
            words.extend(identifiers(text).filter(|w| w.len() > 1 && is_upper_name(w)).map(String::from));
        }
        let names = self.tuning.iter().map(|p| p.name.as_str()).chain(self.requires.iter().chain(&self.redefines).chain(&self.constraints).map(String::as_str));
        for text in names {
            words.extend(identifiers(text).map(String::from));
        }
        if let Some(table) = self.translations.get(&backend) {
            for spelling in table.values() {
                // A spelling is code (`threadIdx.x`), or a note with code spans in it.
                let code = if spelling.contains('`') { code_spans(spelling) } else { vec![spelling.as_str()] };
                for span in code {
                    words.extend(identifiers(span).map(String::from));
                }
            }
        }
        words
    }

    /// Every `{{term}}` placeholder in the texts sent to the model, with the field it is in.
    pub(crate) fn placeholders(&self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        let mut collect = |field: String, text: &str| {
            if let Ok(terms) = placeholder_terms(text) {
                out.extend(terms.into_iter().map(|t| (field.clone(), t)));
            }
        };
        if let Some(overview) = &self.overview {
            collect("overview".into(), overview);
        }
        for (i, pass) in self.passes.iter().enumerate() {
            collect(format!("passes[{i}].title"), &pass.title);
            collect(format!("passes[{i}].instructions"), &pass.instructions);
        }
        out
    }

    /// Parse one transformation file. `file` names the file in errors.
    pub fn parse(file: &Path, text: &str) -> Result<Transformation, LibraryError> {
        let deserializer = toml::Deserializer::parse(text).map_err(|e| syntax_error(file, text, &e))?;
        let raw: RawTransformation = serde_path_to_error::deserialize(deserializer).map_err(|e| {
            let field = e.path().to_string();
            let inner = e.into_inner();
            LibraryError::Invalid {
                file: file.to_path_buf(),
                line: inner.span().map(|s| line_of(text, s.start)),
                field: if field == "." { "(top level)".into() } else { field },
                message: inner.message().trim().to_string(),
            }
        })?;
        raw.validate(file)
    }
}

/// Lower-case letters and digits only: the key names are compared by.
pub(crate) fn normalize(name: &str) -> String {
    name.chars().filter(char::is_ascii_alphanumeric).map(|c| c.to_ascii_lowercase()).collect()
}

fn syntax_error(file: &Path, text: &str, e: &toml::de::Error) -> LibraryError {
    LibraryError::Syntax { file: file.to_path_buf(), line: e.span().map(|s| line_of(text, s.start)), message: e.message().trim().to_string() }
}

pub(crate) fn line_of(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].matches('\n').count() + 1
}

/// The `{{term}}` names in `text`, or a message about a malformed placeholder.
pub(crate) fn placeholder_terms(text: &str) -> Result<Vec<String>, String> {
    let mut terms = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("{{") {
        let after = &rest[start + 2..];
        let end = after.find("}}").ok_or_else(|| {
            let shown: String = after.chars().take(30).collect();
            format!("'{{{{' without a closing '}}}}' near '{{{{{shown}'")
        })?;
        let term = after[..end].trim();
        if !is_term(term) {
            return Err(format!("'{{{{{term}}}}}' is not a placeholder: terms are lower_snake_case words like {{{{thread_x}}}}"));
        }
        terms.push(term.to_string());
        rest = &after[end + 2..];
    }
    Ok(terms)
}

/// Replace every `{{term}}` with its spelling in `table`. Validation guarantees every term
/// used is defined, so a missing one is left visibly unreplaced rather than panicking.
pub(crate) fn substitute(text: &str, table: &TranslationTable) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("{{") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        match after.find("}}") {
            Some(end) => {
                let term = after[..end].trim();
                match table.get(term) {
                    Some(spelling) => out.push_str(spelling),
                    None => out.push_str(&rest[start..start + 2 + end + 2]),
                }
                rest = &after[end + 2..];
            }
            None => {
                out.push_str(&rest[start..]);
                rest = "";
            }
        }
    }
    out.push_str(rest);
    out
}

pub(crate) fn is_term(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_lowercase()) && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_') && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The parts of a prose text that are code: `inline spans` and ``` fenced blocks ```.
fn code_spans(text: &str) -> Vec<&str> {
    // Split at backticks: odd pieces are inside a span or a fence (a fence's language tag
    // and its code are both inside).
    text.split('`').enumerate().filter(|(i, _)| i % 2 == 1).map(|(_, piece)| piece).collect()
}

fn is_upper_name(word: &str) -> bool {
    word.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_') && word.chars().any(|c| c.is_ascii_uppercase())
}

/// The identifiers (words of letters, digits and `_`) in `text`.
fn identifiers(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).filter(|w| !w.is_empty())
}

/// `text` with every identifier that is a key of `names` replaced by its value.
/// `{{term}}` placeholders are lower-case words, never roles, so they are left alone.
pub(crate) fn rename_identifiers(text: &str, names: &BTreeMap<String, String>) -> String {
    let mut out = String::with_capacity(text.len());
    let mut word = String::new();
    let flush = |word: &mut String, out: &mut String| {
        out.push_str(names.get(word.as_str()).map_or(word.as_str(), String::as_str));
        word.clear();
    };
    for c in text.chars() {
        if c.is_ascii_alphanumeric() || c == '_' {
            word.push(c);
        } else {
            flush(&mut word, &mut out);
            out.push(c);
        }
    }
    flush(&mut word, &mut out);
    out
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTransformation {
    name: String,
    description: String,
    #[serde(default)]
    overview: Option<String>,
    #[serde(default)]
    applies_to: Option<Vec<Language>>,
    #[serde(default)]
    patterns: Vec<Pattern>,
    #[serde(default)]
    requires: Vec<String>,
    #[serde(default = "one_kernel")]
    kernels: usize,
    #[serde(default)]
    redefines: Vec<String>,
    #[serde(default)]
    tuning: BTreeMap<String, RawDomain>,
    #[serde(default)]
    constraints: RawConstraints,
    passes: Vec<RawPass>,
    #[serde(default)]
    translations: BTreeMap<Language, TranslationTable>,
}

fn one_kernel() -> usize {
    1
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDomain {
    values: Option<Vec<i64>>,
    range: Option<[i64; 2]>,
    step: Option<i64>,
    pow2: Option<[i64; 2]>,
    description: Option<String>,
    identity: Option<i64>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawConstraints {
    #[serde(default)]
    tuning: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPass {
    region: Region,
    title: String,
    instructions: String,
    #[serde(default)]
    snippets: Vec<String>,
}

impl RawDomain {
    fn validate(&self) -> Result<Domain, String> {
        let domain = Domain { values: self.values.clone(), range: self.range, step: self.step, pow2: self.pow2 };
        domain.expand()?;
        Ok(domain)
    }
}

impl RawTransformation {
    /// The checked transformation, or the first problem found, named by its field. The
    /// checks run in stages (names, backends, requirements, tuning parameters, constraints,
    /// passes, translations), each stage relying on the ones before it.
    fn validate(mut self, file: &Path) -> Result<Transformation, LibraryError> {
        let invalid = |field: String, message: String| LibraryError::Invalid { file: file.to_path_buf(), line: None, field, message };

        self.check_names(&invalid)?;
        let applies_to = backends(self.applies_to.take(), &invalid)?;
        self.check_requirements(&invalid)?;
        let tuning = self.tuning_params(&invalid)?;
        self.check_constraints(&invalid)?;
        let passes = passes(std::mem::take(&mut self.passes), &invalid)?;
        if let Some(overview) = &self.overview {
            placeholder_terms(overview).map_err(|m| invalid("overview".into(), m))?;
        }
        self.check_translations(&applies_to, &invalid)?;

        Ok(Transformation {
            name: self.name,
            description: self.description.trim().to_string(),
            overview: self.overview,
            applies_to,
            patterns: self.patterns,
            requires: self.requires,
            kernels: self.kernels,
            tuning,
            redefines: self.redefines,
            constraints: self.constraints.tuning,
            passes,
            translations: self.translations,
            source: file.to_path_buf(),
            roles: BTreeMap::new(),
        })
    }

    /// The name is how the transformation is looked up (compared normalized), so it needs
    /// a letter or digit and no stray spaces; the description is what `list` shows.
    fn check_names(&self, invalid: &impl Fn(String, String) -> LibraryError) -> Result<(), LibraryError> {
        if self.name.trim().is_empty() || self.name.trim() != self.name {
            return Err(invalid("name".into(), "must be non-empty, without leading or trailing spaces".into()));
        }
        if normalize(&self.name).is_empty() {
            return Err(invalid("name".into(), "needs at least one letter or digit".into()));
        }
        if self.description.trim().is_empty() {
            return Err(invalid("description".into(), "must not be empty".into()));
        }
        Ok(())
    }

    /// What the transformation asks of a context before it can apply: kernels launched,
    /// patterns, the names it requires, and the parameters it redefines (each needs its new
    /// domain under `[tuning]`).
    fn check_requirements(&self, invalid: &impl Fn(String, String) -> LibraryError) -> Result<(), LibraryError> {
        if self.kernels == 0 {
            return Err(invalid("kernels".into(), "a launch script runs at least one kernel".into()));
        }
        let mut seen = BTreeSet::new();
        if let Some(dup) = self.patterns.iter().find(|p| !seen.insert(**p)) {
            return Err(invalid("patterns".into(), format!("lists {dup} twice")));
        }
        for (i, name) in self.requires.iter().enumerate() {
            if !is_identifier(name) {
                return Err(invalid(format!("requires[{i}]"), format!("'{name}' is not an identifier")));
            }
        }
        for (i, name) in self.redefines.iter().enumerate() {
            if !self.tuning.contains_key(name) {
                return Err(invalid(format!("redefines[{i}]"), format!("'{name}' has no new domain under [tuning]")));
            }
        }
        Ok(())
    }

    /// The parameters the transformation introduces or redefines, in name order. Each name
    /// becomes a `#define` and a script variable, so it must be an identifier, and one the
    /// context does not already have to provide.
    fn tuning_params(&self, invalid: &impl Fn(String, String) -> LibraryError) -> Result<Vec<TuningParam>, LibraryError> {
        let mut tuning = Vec::new();
        for (name, raw) in &self.tuning {
            let field = format!("tuning.{name}");
            if !is_identifier(name) {
                return Err(invalid(field, format!("'{name}' is not an identifier usable as a #define and a script variable")));
            }
            if self.requires.contains(name) {
                return Err(invalid(field, format!("'{name}' is both introduced here and listed in `requires`")));
            }
            let domain = raw.validate().map_err(|m| invalid(field.clone(), m))?;
            if raw.description.as_deref().is_some_and(|d| d.trim().is_empty()) {
                return Err(invalid(format!("{field}.description"), "is empty; leave it out instead".into()));
            }
            if let Some(identity) = raw.identity {
                let values = domain.expand().map_err(|m| invalid(field.clone(), m))?;
                if !values.contains(&identity) {
                    return Err(invalid(format!("{field}.identity"), format!("{identity} is not one of the values {values:?}")));
                }
            }
            tuning.push(TuningParam { name: name.clone(), domain, description: raw.description.clone(), identity: raw.identity });
        }
        Ok(tuning)
    }

    /// Constraints compile as Rhai expressions in strict-variables mode, as the manifest
    /// will compile them, so an unknown name or a syntax error shows up now rather
    /// than when the context is tuned after the model has already been paid for.
    fn check_constraints(&self, invalid: &impl Fn(String, String) -> LibraryError) -> Result<(), LibraryError> {
        let mut engine = rhai::Engine::new_raw();
        engine.set_strict_variables(true);
        let mut scope = rhai::Scope::new();
        for name in self.requires.iter().chain(self.tuning.keys()) {
            scope.push_constant(name.as_str(), 0_i64);
        }
        for (i, text) in self.constraints.tuning.iter().enumerate() {
            engine.compile_expression_with_scope(&scope, text).map_err(|e| {
                invalid(format!("constraints.tuning[{i}]"), format!("`{text}`: {e} (names must be introduced in [tuning] or listed in `requires`)"))
            })?;
        }
        Ok(())
    }

    /// Translations only for backends the transformation applies to (another backend's
    /// would never be shown), with terms written as its placeholders are.
    fn check_translations(&self, applies_to: &[Language], invalid: &impl Fn(String, String) -> LibraryError) -> Result<(), LibraryError> {
        for (backend, table) in &self.translations {
            if !applies_to.contains(backend) {
                return Err(invalid(format!("translations.{backend}"), format!("{backend} is not in `applies_to`")));
            }
            for term in table.keys() {
                if !is_term(term) {
                    return Err(invalid(format!("translations.{backend}.{term}"), "terms are lower_snake_case words".into()));
                }
            }
        }
        Ok(())
    }
}

/// The backends a transformation applies to: those listed, each once, or every backend
/// when the file leaves `applies_to` out (an empty list is a mistake, not "none").
fn backends(listed: Option<Vec<Language>>, invalid: &impl Fn(String, String) -> LibraryError) -> Result<Vec<Language>, LibraryError> {
    match listed {
        Some(list) if list.is_empty() => Err(invalid("applies_to".into(), "lists no backend; leave it out to mean every backend".into())),
        Some(list) => {
            let mut seen = BTreeSet::new();
            if let Some(dup) = list.iter().find(|b| !seen.insert(**b)) {
                return Err(invalid("applies_to".into(), format!("lists {dup} twice")));
            }
            Ok(list)
        }
        None => Ok(Language::ALL.to_vec()),
    }
}

/// The passes, at least one, each with a title and instructions the prompt can show
/// (placeholders well formed) and each snippet listed once.
fn passes(raw_passes: Vec<RawPass>, invalid: &impl Fn(String, String) -> LibraryError) -> Result<Vec<Pass>, LibraryError> {
    if raw_passes.is_empty() {
        return Err(invalid("passes".into(), "a transformation needs at least one [[passes]] entry".into()));
    }
    let mut passes = Vec::new();
    for (i, raw) in raw_passes.into_iter().enumerate() {
        if raw.title.trim().is_empty() {
            return Err(invalid(format!("passes[{i}].title"), "must not be empty".into()));
        }
        if raw.instructions.trim().is_empty() {
            return Err(invalid(format!("passes[{i}].instructions"), "must not be empty".into()));
        }
        let mut seen = BTreeSet::new();
        for (j, snippet) in raw.snippets.iter().enumerate() {
            if !seen.insert(snippet) {
                return Err(invalid(format!("passes[{i}].snippets[{j}]"), format!("'{snippet}' is listed twice")));
            }
        }
        for (field, text) in [("title", &raw.title), ("instructions", &raw.instructions)] {
            placeholder_terms(text).map_err(|m| invalid(format!("passes[{i}].{field}"), m))?;
        }
        passes.push(Pass { title: raw.title, region: raw.region, instructions: raw.instructions, snippets: raw.snippets });
    }
    Ok(passes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Transformation, LibraryError> {
        Transformation::parse(Path::new("t.toml"), text)
    }

    const MINIMAL: &str = r#"
name = "Offset"
description = "pad tiles"
[tuning]
OFFSET = { values = [0, 1, 2] }
[constraints]
tuning = ["OFFSET <= 2"]
[[passes]]
region = "device"
title = "pad"
instructions = "Pad each {{shared}} tile."
"#;

    #[test]
    fn minimal_file_parses_with_defaults() {
        let t = parse(MINIMAL).unwrap();
        assert_eq!(t.name, "Offset");
        assert_eq!(t.applies_to, Language::ALL.to_vec());
        assert_eq!(t.tuning[0].domain.expand().unwrap(), vec![0, 1, 2]);
        assert_eq!(t.passes[0].region, Region::Device);
        assert_eq!(t.placeholders(), vec![("passes[0].instructions".to_string(), "shared".to_string())]);
    }

    #[test]
    fn an_identity_must_be_one_of_the_parameters_values() {
        let t = parse(&MINIMAL.replace("OFFSET = { values = [0, 1, 2] }", "OFFSET = { values = [0, 1, 2], identity = 0 }")).unwrap();
        assert_eq!(t.tuning[0].identity, Some(0));
        assert_eq!(parse(MINIMAL).unwrap().tuning[0].identity, None, "an identity is optional");
        let err = parse(&MINIMAL.replace("OFFSET = { values = [0, 1, 2] }", "OFFSET = { values = [0, 1, 2], identity = 3 }")).unwrap_err();
        assert!(err.to_string().contains("tuning.OFFSET.identity") && err.to_string().contains("3 is not one of the values [0, 1, 2]"), "{err}");
    }

    #[test]
    fn patterns_limit_what_a_transformation_fits() {
        let any = parse(MINIMAL).unwrap();
        assert!(any.fits(Some(Pattern::RowReduction)) && any.fits(None));
        let gemm = parse(&MINIMAL.replace("description = \"pad tiles\"", "description = \"pad tiles\"\npatterns = [\"gemm\"]")).unwrap();
        assert!(gemm.fits(Some(Pattern::Gemm)));
        assert!(!gemm.fits(Some(Pattern::Stencil)));
        assert!(!gemm.fits(None), "a kernel of unknown pattern never gets a pattern's prompt");
        let err = parse(&MINIMAL.replace("description = \"pad tiles\"", "description = \"pad tiles\"\npatterns = [\"mat mul\"]")).unwrap_err();
        assert!(err.to_string().contains("patterns[0]") && err.to_string().contains("row-reduction"), "{err}");
    }

    #[test]
    fn roles_rename_whole_words_and_refuse_a_name_already_in_use() {
        let text = MINIMAL
            .replace("description = \"pad tiles\"", "description = \"pad tiles\"\nrequires = [\"TILE_K\"]")
            .replace("OFFSET <= 2", "OFFSET < TILE_K")
            .replace("Pad each {{shared}} tile.", "Pad each {{shared}} tile of TILE_K columns (not TILE_KX); keep BX as it is.");
        let t = parse(&text).unwrap();
        let roles: indexmap::IndexMap<String, String> = [("TILE_K".to_string(), "KT".to_string())].into_iter().collect();
        let renamed = t.with_roles(&roles, Language::Cuda).unwrap();
        assert_eq!(renamed.requires, vec!["KT"]);
        assert_eq!(renamed.constraints, vec!["OFFSET < KT"]);
        assert_eq!(renamed.passes[0].instructions, "Pad each {{shared}} tile of KT columns (not TILE_KX); keep BX as it is.");
        let clash: indexmap::IndexMap<String, String> = [("TILE_K".to_string(), "BX".to_string())].into_iter().collect();
        let err = t.with_roles(&clash, Language::Cuda).unwrap_err();
        assert!(matches!(err, PromptError::RoleClash { ref role, ref name, .. } if role == "TILE_K" && name == "BX"), "{err}");
        let unused: indexmap::IndexMap<String, String> = [("BLOCK_X".to_string(), "BX".to_string())].into_iter().collect();
        let same = t.with_roles(&unused, Language::Cuda).unwrap();
        assert_eq!(
            (&same.passes, &same.requires, &same.constraints),
            (&t.passes, &t.requires, &t.constraints),
            "a role the transformation does not use changes none of its texts"
        );
    }

    #[test]
    fn a_role_may_take_a_name_that_is_only_a_word_of_prose_or_of_another_backend() {
        // "OpenCL C" and "C = A x B" are prose; an OpenCL term's spelling is not CUDA's code.
        let text = MINIMAL
            .replace("description = \"pad tiles\"", "description = \"pad tiles\"\nrequires = [\"LEN\"]\napplies_to = [\"cuda\", \"opencl\"]")
            .replace("OFFSET <= 2", "OFFSET < LEN")
            .replace("Pad each {{shared}} tile.", "Pad each {{shared}} tile of LEN elements, as C = A x B wants, in OpenCL C or CUDA.")
            + "\n[translations.opencl]\nnote = \"`vload4(v, C)` in OpenCL C\"\n";
        let t = parse(&text).unwrap();
        let roles: indexmap::IndexMap<String, String> = [("LEN".to_string(), "C".to_string())].into_iter().collect();
        let renamed = t.with_roles(&roles, Language::Cuda).unwrap();
        assert_eq!(renamed.constraints, vec!["OFFSET < C"]);
        let err = t.with_roles(&roles, Language::Opencl).unwrap_err();
        assert!(matches!(err, PromptError::RoleClash { .. }), "on OpenCL, `C` is a name in that backend's code: {err}");
        let in_code = parse(&text.replace("as C = A x B wants", "as `C[i] = A[i]` wants")).unwrap();
        assert!(in_code.with_roles(&roles, Language::Cuda).is_err(), "a name in a code span is code");
    }

    #[test]
    fn unknown_field_names_file_and_path() {
        let text = MINIMAL.replace("title = \"pad\"", "title = \"pad\"\nregoin = \"host\"");
        let err = parse(&text).unwrap_err().to_string();
        assert!(err.contains("t.toml"), "{err}");
        assert!(err.contains("passes[0]"), "{err}");
        assert!(err.contains("regoin"), "{err}");
    }

    #[test]
    fn unknown_region_names_the_field() {
        let err = parse(&MINIMAL.replace("\"device\"", "\"kernel\"")).unwrap_err().to_string();
        assert!(err.contains("passes[0].region"), "{err}");
        assert!(err.contains("kernel"), "{err}");
    }

    #[test]
    fn bad_domains_name_the_parameter() {
        for (domain, expect) in [
            ("{ values = [] }", "empty"),
            ("{ pow2 = [0, 8] }", "1 <= lo"),
            ("{ range = [8, 1] }", "empty"),
            ("{ step = 2, values = [1] }", "only goes with `range`"),
            ("{ values = [1], pow2 = [1, 2] }", "only one"),
            ("{ pow2 = [5, 7] }", "no power of two"),
        ] {
            let err = parse(&MINIMAL.replace("{ values = [0, 1, 2] }", domain)).unwrap_err().to_string();
            assert!(err.contains("tuning.OFFSET") && err.contains(expect), "{domain}: {err}");
        }
    }

    #[test]
    fn domains_expand_like_the_manifest() {
        let pow2 = Domain { pow2: Some([4, 64]), ..Domain::default() };
        assert_eq!(pow2.to_string(), "{ pow2 = [4, 64] }");
    }

    #[test]
    fn constraint_with_unknown_name_is_rejected() {
        let err = parse(&MINIMAL.replace("OFFSET <= 2", "OFFSET <= TILE_K")).unwrap_err().to_string();
        assert!(err.contains("constraints.tuning[0]") && err.contains("TILE_K"), "{err}");
        let ok = MINIMAL.replace("OFFSET <= 2", "OFFSET <= TILE_K").replace("[tuning]", "requires = [\"TILE_K\"]\n[tuning]");
        parse(&ok).unwrap();
    }

    #[test]
    fn malformed_placeholder_is_rejected() {
        let err = parse(&MINIMAL.replace("{{shared}}", "{{shared")).unwrap_err().to_string();
        assert!(err.contains("passes[0].instructions"), "{err}");
        let err = parse(&MINIMAL.replace("{{shared}}", "{{Shared Memory}}")).unwrap_err().to_string();
        assert!(err.contains("not a placeholder"), "{err}");
    }

    #[test]
    fn syntax_error_reports_line() {
        let err = parse("name = \"x\"\ndescription = \n").unwrap_err();
        assert!(matches!(err, LibraryError::Syntax { line: Some(2), .. }), "{err}");
    }

    #[test]
    fn substitution_replaces_known_terms_only() {
        let table: TranslationTable = [("thread_x".to_string(), "threadIdx.x".to_string())].into();
        assert_eq!(substitute("a {{thread_x}} b {{ thread_x }} {{other}}", &table), "a threadIdx.x b threadIdx.x {{other}}");
    }

    #[test]
    fn normalize_ignores_case_and_punctuation() {
        assert_eq!(normalize("TB-Tiling"), "tbtiling");
        assert_eq!(normalize("tb_tiling "), "tbtiling");
    }
}
