//! The transformation library: transformations, snippets and the shared translation table.
//!
//! A library folder is laid out like the shipped `transformations/`:
//!
//! ```text
//! transformations/
//!   tb-tiling.toml ...          one transformation per file
//!   translations.toml           shared terms: [cuda] thread_x = "threadIdx.x", ...
//!   snippets/tile_copy.cu ...   hand-written helpers, one file per backend (.cu .hip .cl .hlsl)
//! ```
//!
//! The shipped folder is embedded at compile time ([`Library::builtin`]) so the binary works
//! anywhere; [`Library::add_dir`] layers a user's folder on top (its snippets and terms
//! extend or override, a transformation of the same name replaces the shipped one), and
//! [`Library::load_dir`] reads a self-contained folder alone. Everything a transformation
//! refers to is checked when it is loaded: each snippet exists for every backend it applies
//! to and each `{{placeholder}}` has a spelling for every such backend, so a prompt can
//! never be built with a hole in it.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::error::LibraryError;
use crate::format::{BackendText, Language, Transformation, TranslationTable, is_term, line_of, normalize};
use peak_spec::Pattern;

mod builtin {
    include!(concat!(env!("OUT_DIR"), "/builtin_files.rs"));
}

const TRANSLATIONS_FILE: &str = "translations.toml";
const SNIPPETS_DIR: &str = "snippets";

/// A hand-written helper, inserted into a region as-is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snippet {
    pub name: String,
    pub backend: Language,
    pub text: String,
    pub source: PathBuf,
}

/// Transformations with the snippets and terms they use.
#[derive(Debug, Clone, Default)]
pub struct Library {
    transformations: Vec<Transformation>,
    snippets: BTreeMap<(String, Language), Snippet>,
    translations: BTreeMap<Language, TranslationTable>,
}

impl Library {
    /// The library shipped with peak, embedded in the binary.
    pub fn builtin() -> Result<Library, LibraryError> {
        let files = builtin::BUILTIN_FILES.iter().map(|(rel, text)| (PathBuf::from(format!("builtin:{rel}")), rel.to_string(), text.to_string())).collect();
        let mut library = Library::default();
        library.add_files(files)?;
        Ok(library)
    }

    /// A library read from one folder alone, without the shipped transformations.
    pub fn load_dir(dir: impl AsRef<Path>) -> Result<Library, LibraryError> {
        let mut library = Library::default();
        library.add_dir(dir)?;
        Ok(library)
    }

    /// Layer a folder over this library: its snippets and translation terms extend or
    /// override the present ones, and its transformations replace any of the same name.
    pub fn add_dir(&mut self, dir: impl AsRef<Path>) -> Result<(), LibraryError> {
        let dir = dir.as_ref();
        let mut files = Vec::new();
        for path in read_dir_sorted(dir)? {
            let name = file_name(&path);
            if path.is_file() && name.ends_with(".toml") {
                files.push((path.clone(), name.clone(), read(&path)?));
            } else if path.is_dir() && name == SNIPPETS_DIR {
                for snippet in read_dir_sorted(&path)? {
                    if snippet.is_file() {
                        files.push((snippet.clone(), format!("{SNIPPETS_DIR}/{}", file_name(&snippet)), read(&snippet)?));
                    }
                }
            }
        }
        self.add_files(files)
    }

    /// Every transformation, sorted by name.
    pub fn list(&self) -> &[Transformation] {
        &self.transformations
    }

    /// Look a transformation up by name, ignoring case and punctuation (`tb-tiling`,
    /// `TB_Tiling` and `tbtiling` all find TB-Tiling); a near miss suggests the closest name.
    pub fn get(&self, name: &str) -> Result<&Transformation, LibraryError> {
        let wanted = normalize(name);
        if let Some(found) = self.transformations.iter().find(|t| normalize(&t.name) == wanted) {
            return Ok(found);
        }
        let suggestion = self
            .transformations
            .iter()
            .map(|t| (levenshtein(&wanted, &normalize(&t.name)), &t.name))
            .filter(|(distance, _)| *distance <= (wanted.len() / 3).max(2))
            .min_by_key(|(distance, _)| *distance)
            .map(|(_, name)| name.clone());
        Err(LibraryError::NotFound { name: name.to_string(), suggestion })
    }

    /// The names of the transformations written for a kernel of this pattern on `backend`
    /// (any-kernel ones included) whose launch script runs `kernels` kernels, for hints.
    pub fn fitting(&self, pattern: Option<Pattern>, backend: Language, kernels: usize) -> Vec<String> {
        self.transformations.iter().filter(|t| t.applies_to(backend) && t.fits(pattern) && t.kernels <= kernels).map(|t| t.name.clone()).collect()
    }

    /// The snippet `name` for `backend`, if the library has one.
    pub fn snippet(&self, name: &str, backend: Language) -> Option<&Snippet> {
        self.snippets.get(&(name.to_string(), backend))
    }

    /// The terms a transformation's prompt uses on `backend`: the shared table, overridden
    /// by the transformation's own.
    pub fn translation_table(&self, transformation: &Transformation, backend: Language) -> TranslationTable {
        let mut table = self.translations.get(&backend).cloned().unwrap_or_default();
        if !transformation.roles.is_empty() {
            for spelling in table.values_mut() {
                *spelling = crate::format::rename_identifiers(spelling, &transformation.roles);
            }
        }
        if let Some(own) = transformation.translations.get(&backend) {
            table.extend(own.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
        table
    }

    /// A transformation as data, for `peak transformations --json` and the MCP tools.
    /// `full` adds each pass's instructions and snippets, and the file it came from.
    pub fn summary(transformation: &Transformation, full: bool) -> serde_json::Value {
        let t = transformation;
        let passes: Vec<serde_json::Value> = t
            .passes
            .iter()
            .map(|p| match full {
                true => serde_json::json!({"title": p.title, "region": p.region.name(), "instructions": p.instructions, "snippets": p.snippets}),
                false => serde_json::json!({"title": p.title, "region": p.region.name()}),
            })
            .collect();
        let mut value = serde_json::json!({
            "name": t.name,
            "description": t.description,
            "applies_to": t.applies_to.iter().map(|b| b.name()).collect::<Vec<_>>(),
            "patterns": t.patterns.iter().map(|p| p.name()).collect::<Vec<_>>(),
            "requires": t.requires,
            "tuning": t.tuning.iter().map(|p| serde_json::json!({"name": p.name, "description": p.description})).collect::<Vec<_>>(),
            "constraints": t.constraints,
            "passes": passes,
        });
        if full {
            value["source"] = serde_json::json!(t.source);
        }
        value
    }

    /// A human-readable description of a transformation, for `peak transformations show`.
    pub fn show(&self, transformation: &Transformation) -> String {
        let t = transformation;
        let mut out = String::new();
        let _ = writeln!(out, "{} — {}", t.name, t.description);
        let _ = writeln!(out, "source:      {}", t.source.display());
        let backends: Vec<&str> = t.applies_to.iter().map(|b| b.name()).collect();
        let _ = writeln!(out, "applies to:  {}", backends.join(", "));
        let patterns = if t.patterns.is_empty() { "any".to_string() } else { t.patterns.iter().map(|p| p.name()).collect::<Vec<_>>().join(", ") };
        let _ = writeln!(out, "patterns:    {patterns}");
        if !t.requires.is_empty() {
            let _ = writeln!(out, "requires:    {}", t.requires.join(", "));
        }
        if t.tuning.is_empty() {
            let _ = writeln!(out, "tuning:      (introduces no parameters)");
        } else {
            let _ = writeln!(out, "tuning:");
            let width = t.tuning.iter().map(|p| p.name.len()).max().unwrap_or(0);
            for p in &t.tuning {
                let _ = write!(out, "  {:width$} = {}", p.name, p.domain);
                if let Some(d) = &p.description {
                    let _ = write!(out, "  # {d}");
                }
                out.push('\n');
            }
        }
        if !t.constraints.is_empty() {
            let _ = writeln!(out, "constraints:");
            for c in &t.constraints {
                let _ = writeln!(out, "  {c}");
            }
        }
        if let Some(overview) = &t.overview {
            let _ = writeln!(out, "\n{}", overview.trim_end());
        }
        for (i, pass) in t.passes.iter().enumerate() {
            let _ = write!(out, "\npass {}/{} [{}] {}", i + 1, t.passes.len(), pass.region, pass.title);
            if !pass.snippets.is_empty() {
                let _ = write!(out, "  (snippets: {})", pass.snippets.join(", "));
            }
            out.push('\n');
            for line in pass.instructions.trim_end().lines() {
                let _ = writeln!(out, "    {line}");
            }
        }
        let used: Vec<String> = {
            let mut terms: Vec<String> = t.placeholders().into_iter().map(|(_, term)| term).collect();
            terms.sort();
            terms.dedup();
            terms
        };
        if !used.is_empty() {
            let _ = writeln!(out, "\nterms per backend:");
            for backend in &t.applies_to {
                let table = self.translation_table(t, *backend);
                let spelled: Vec<String> = used.iter().map(|term| format!("{term} = {}", table.get(term).map_or("?", String::as_str))).collect();
                let _ = writeln!(out, "  {backend}: {}", spelled.join("; "));
            }
        }
        out
    }

    /// Parse and check a batch of files (one folder), then merge it into the library.
    /// `files` are `(path for errors, path relative to the folder, contents)`.
    fn add_files(&mut self, files: Vec<(PathBuf, String, String)>) -> Result<(), LibraryError> {
        let mut transformations: Vec<Transformation> = Vec::new();
        for (path, rel, text) in &files {
            if rel == TRANSLATIONS_FILE {
                for (backend, table) in parse_translations(path, text)? {
                    self.translations.entry(backend).or_default().extend(table);
                }
            } else if let Some(file) = rel.strip_prefix(&format!("{SNIPPETS_DIR}/")) {
                let snippet = parse_snippet(path, file, text)?;
                self.snippets.insert((snippet.name.clone(), snippet.backend), snippet);
            } else {
                let t = Transformation::parse(path, text)?;
                if let Some(other) = transformations.iter().find(|o| normalize(&o.name) == normalize(&t.name)) {
                    return Err(LibraryError::Duplicate { file: path.clone(), name: t.name, other: other.source.clone() });
                }
                transformations.push(t);
            }
        }
        // References are checked once the whole folder is in, so a transformation may use
        // a snippet or term defined anywhere in its folder or in an earlier layer.
        for t in &transformations {
            self.check_references(t)?;
        }
        for t in transformations {
            self.transformations.retain(|o| normalize(&o.name) != normalize(&t.name));
            self.transformations.push(t);
        }
        self.transformations.sort_by_key(|t| t.name.to_lowercase());
        Ok(())
    }

    fn check_references(&self, t: &Transformation) -> Result<(), LibraryError> {
        let invalid = |field: String, message: String| LibraryError::Invalid { file: t.source.clone(), line: None, field, message };
        for (i, pass) in t.passes.iter().enumerate() {
            for (j, name) in pass.snippets.iter().enumerate() {
                for backend in &t.applies_to {
                    if self.snippet(name, *backend).is_none() {
                        return Err(invalid(
                            format!("passes[{i}].snippets[{j}]"),
                            format!("no snippet '{name}' for {backend}: expected {SNIPPETS_DIR}/{name}.{}", backend.snippet_extension()),
                        ));
                    }
                }
            }
        }
        for (field, term) in t.placeholders() {
            for backend in &t.applies_to {
                if !self.translation_table(t, *backend).contains_key(&term) {
                    return Err(invalid(
                        field,
                        format!("placeholder {{{{{term}}}}} has no {backend} spelling: add it to [translations.{backend}] or to {TRANSLATIONS_FILE}"),
                    ));
                }
            }
        }
        Ok(())
    }
}

fn parse_translations(path: &Path, text: &str) -> Result<BTreeMap<Language, TranslationTable>, LibraryError> {
    let deserializer = toml::Deserializer::parse(text).map_err(|e| LibraryError::Syntax {
        file: path.to_path_buf(),
        line: e.span().map(|s| line_of(text, s.start)),
        message: e.message().trim().to_string(),
    })?;
    let tables: BTreeMap<Language, TranslationTable> = serde_path_to_error::deserialize(deserializer).map_err(|e| {
        let field = e.path().to_string();
        let inner = e.into_inner();
        LibraryError::Invalid {
            file: path.to_path_buf(),
            line: inner.span().map(|s| line_of(text, s.start)),
            field,
            message: inner.message().trim().to_string(),
        }
    })?;
    for (backend, table) in &tables {
        if let Some(term) = table.keys().find(|t| !is_term(t)) {
            return Err(LibraryError::Invalid {
                file: path.to_path_buf(),
                line: None,
                field: format!("{backend}.{term}"),
                message: "terms are lower_snake_case words".into(),
            });
        }
    }
    Ok(tables)
}

fn parse_snippet(path: &Path, file: &str, text: &str) -> Result<Snippet, LibraryError> {
    let invalid = |message: String| LibraryError::Invalid { file: path.to_path_buf(), line: None, field: "(file name)".into(), message };
    let (name, extension) = file.rsplit_once('.').ok_or_else(|| invalid("a snippet file is named <name>.<cu|hip|cl|hlsl>".into()))?;
    let backend = Language::ALL
        .into_iter()
        .find(|b| b.snippet_extension() == extension)
        .ok_or_else(|| invalid(format!("'.{extension}' is not a snippet extension: use .cu, .hip, .cl or .hlsl")))?;
    if !is_term(name) {
        return Err(invalid(format!("snippet name '{name}' must be a lower_snake_case word")));
    }
    if text.trim().is_empty() {
        return Err(invalid("the snippet is empty".into()));
    }
    Ok(Snippet { name: name.to_string(), backend, text: text.to_string(), source: path.to_path_buf() })
}

fn read_dir_sorted(dir: &Path) -> Result<Vec<PathBuf>, LibraryError> {
    let entries = std::fs::read_dir(dir).map_err(|source| LibraryError::Read { file: dir.to_path_buf(), source })?;
    let mut paths = Vec::new();
    for entry in entries {
        paths.push(entry.map_err(|source| LibraryError::Read { file: dir.to_path_buf(), source })?.path());
    }
    paths.sort();
    Ok(paths)
}

fn read(path: &Path) -> Result<String, LibraryError> {
    std::fs::read_to_string(path).map_err(|source| LibraryError::Read { file: path.to_path_buf(), source })
}

fn file_name(path: &Path) -> String {
    path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()
}

fn levenshtein(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = if ca == *cb { diagonal } else { 1 + diagonal.min(above).min(row[j]) };
            diagonal = above;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levenshtein_counts_edits() {
        assert_eq!(levenshtein("tbtiling", "tbtiling"), 0);
        assert_eq!(levenshtein("tbtilng", "tbtiling"), 1);
        assert_eq!(levenshtein("kitten", "sitting"), 3);
    }
}
