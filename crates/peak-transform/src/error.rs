//! Errors of the transformation library and of prompt building.
//!
//! Reply and executor errors live beside their modules ([`crate::reply::ReplyError`],
//! [`crate::executor::ExecutorError`]): a bad reply is an attempt outcome the workflow
//! records, not a failure of the library.

use std::fmt;
use std::path::PathBuf;

use peak_spec::{Language, Pattern};

/// A transformation file, snippet or library directory that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum LibraryError {
    #[error("{}: cannot read: {source}", file.display())]
    Read { file: PathBuf, source: std::io::Error },

    #[error("{}{}: TOML syntax error: {message}", file.display(), Line(*line))]
    Syntax { file: PathBuf, line: Option<usize>, message: String },

    /// A field with a bad value; `field` is a path such as `passes[2].region`.
    #[error("{}{}: {field}: {message}", file.display(), Line(*line))]
    Invalid { file: PathBuf, line: Option<usize>, field: String, message: String },

    #[error("{}: transformation '{name}' is already defined in {}", file.display(), other.display())]
    Duplicate { file: PathBuf, name: String, other: PathBuf },

    #[error("no transformation named '{name}'{}", DidYouMean(suggestion.as_deref()))]
    NotFound { name: String, suggestion: Option<String> },
}

/// Why a prompt could not be built for a pass.
#[derive(Debug, thiserror::Error)]
pub enum PromptError {
    #[error("'{transformation}' has {count} passes; there is no pass {pass}")]
    NoSuchPass { transformation: String, pass: usize, count: usize },

    #[error("'{transformation}' does not apply to the {backend} backend (it applies to {applies_to})")]
    NotApplicable { transformation: String, backend: Language, applies_to: String },

    #[error(
        "'{transformation}' requires '{name}' in the kernel context, which has no tuning parameter or input of that name (if the context calls it something else, say so in peak.toml: [kernel.roles] {name} = \"YOUR_NAME\")"
    )]
    MissingRequirement { transformation: String, name: String },

    #[error(
        "'{transformation}' uses the name '{name}' itself, so the context's [kernel.roles] cannot map its role '{role}' to '{name}'; rename the context's parameter"
    )]
    RoleClash { transformation: String, role: String, name: String },

    #[error("'{transformation}' is written for {patterns} kernels, and this context's kernel is {} ({pattern}, declared, implied by its domain or read off its code; if that is wrong, declare it in peak.toml: [kernel] pattern = \"...\"); {}", pattern.meaning(), Fitting(fitting))]
    WrongPattern { transformation: String, pattern: Pattern, patterns: String, fitting: Vec<String> },

    #[error(
        "'{transformation}' is written for {patterns} kernels, and peak cannot tell what this context's kernel does; declare it in peak.toml ([kernel] pattern = \"...\", one of {})",
        peak_spec::pattern::names()
    )]
    UnknownPattern { transformation: String, patterns: String },

    #[error("'{transformation}' introduces tuning parameter '{name}', but the kernel context already has one of that name: {}", Introducers(introducers))]
    ParameterExists { transformation: String, name: String, introducers: Vec<String> },
}

struct Line(Option<usize>);

impl fmt::Display for Line {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(line) => write!(f, ":{line}"),
            None => Ok(()),
        }
    }
}

/// The transformations that do fit, as a hint.
struct Fitting<'a>(&'a [String]);

impl fmt::Display for Fitting<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            [] => write!(f, "no transformation in the library fits it yet"),
            names => write!(f, "the transformations that fit it: {}", names.join(", ")),
        }
    }
}

/// Which earlier step may have introduced a parameter: the library's other transformations
/// that introduce one of that name.
struct Introducers<'a>(&'a [String]);

impl fmt::Display for Introducers<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            [] => write!(f, "was it applied already?"),
            names => write!(
                f,
                "was it applied already, or did {} (which introduce{} it too) come first? Two steps cannot both tune one name; choose one of them",
                names.join(" or "),
                if names.len() == 1 { "s" } else { "" }
            ),
        }
    }
}

struct DidYouMean<'a>(Option<&'a str>);

impl fmt::Display for DidYouMean<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(name) => write!(f, "; did you mean '{name}'?"),
            None => write!(f, "; `peak transformations list` shows them all"),
        }
    }
}
