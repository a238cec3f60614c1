use thiserror::Error;

/// Everything that can be wrong with a kernel context on disk. Every variant names the
/// file, and the line or the manifest field, so a user can go straight to the mistake.
#[derive(Debug, Error)]
pub enum SpecError {
    #[error("{file}: {message}")]
    Io { file: String, message: String },

    /// The manifest is not valid TOML or does not match the schema (unknown field, wrong type).
    #[error("{file}: {message}")]
    Manifest { file: String, message: String },

    /// A manifest field parses but its value is wrong (bad range, unknown name in a constraint...).
    #[error("{file}: field `{field}`: {message}")]
    Field { file: String, field: String, message: String },

    #[error("{file}:{line}: {message}")]
    Source { file: String, line: usize, message: String },

    /// `--set NAME=VALUE` and similar overrides.
    #[error("{message}")]
    Override { message: String },
}
