//! Kernel contexts as this crate sees them: a folder of files.
//!
//! The workflow stores a context byte for byte and only looks inside for three things:
//! the manifest's `[kernel] source` key (which file holds the three regions), the source's
//! regions (checked on write and by fsck; split for diffs) and the manifest's `[tuning]`
//! table and `[constraints] tuning` list (for tuning-parameter deltas). Everything else in
//! the manifest is the spec crate's business, so a manifest format change there does not
//! make old checkpoints unreadable here.

use std::collections::BTreeMap;
use std::path::Path;

use peak_spec::regions::Regions;

use crate::error::{IoContext, Result, WorkflowError};

pub(crate) const MANIFEST: &str = "peak.toml";

/// A context's files by `/`-separated path relative to the context folder.
pub(crate) type Files = BTreeMap<String, Vec<u8>>;

/// Read every regular file under `dir`. Symlinks and other special files are refused:
/// a checkpoint must hold the context itself, not a pointer to something outside it.
pub(crate) fn read_dir(dir: &Path) -> Result<Files> {
    fn walk(dir: &Path, prefix: &str, files: &mut Files) -> Result<()> {
        let mut entries: Vec<_> = std::fs::read_dir(dir).at(dir)?.collect::<std::io::Result<_>>().at(dir)?;
        entries.sort_by_key(|e| e.file_name());
        for entry in entries {
            let path = entry.path();
            let name = entry
                .file_name()
                .into_string()
                .map_err(|_| WorkflowError::InvalidContext { path: path.clone(), message: "file name is not valid UTF-8".to_string() })?;
            let rel = if prefix.is_empty() { name } else { format!("{prefix}/{name}") };
            let kind = entry.file_type().at(&path)?;
            if kind.is_dir() {
                walk(&path, &rel, files)?;
            } else if kind.is_file() {
                files.insert(rel, std::fs::read(&path).at(&path)?);
            } else {
                return Err(WorkflowError::InvalidContext {
                    path,
                    message: "not a regular file (symlinks and special files cannot be stored in a checkpoint)".to_string(),
                });
            }
        }
        Ok(())
    }
    let meta = std::fs::metadata(dir).at(dir)?;
    if !meta.is_dir() {
        return Err(WorkflowError::InvalidContext { path: dir.to_path_buf(), message: "not a folder".to_string() });
    }
    let mut files = Files::new();
    walk(dir, "", &mut files)?;
    Ok(files)
}

/// Write `files` under `dir`, creating folders as needed.
pub(crate) fn write_dir(dir: &Path, files: &Files) -> Result<()> {
    for (rel, bytes) in files {
        let path = dir.join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).at(parent)?;
        }
        std::fs::write(&path, bytes).at(&path)?;
    }
    Ok(())
}

/// The source file named by the manifest's `[kernel] source`, if the manifest says so.
pub(crate) fn source_name(manifest: &str) -> Option<String> {
    let table: toml::Table = manifest.parse().ok()?;
    table.get("kernel")?.get("source")?.as_str().map(str::to_string)
}

/// The manifest's `[kernel] name`, for commit messages.
pub(crate) fn kernel_name(manifest: &str) -> Option<String> {
    let table: toml::Table = manifest.parse().ok()?;
    table.get("kernel")?.get("name")?.as_str().map(str::to_string)
}

/// Check that `files` form a storable context: a manifest that parses as TOML and names
/// its source, and a source with all three regions. `Err((file, message))` names the
/// offending file relative to the context folder.
pub(crate) fn check_files(files: &Files) -> std::result::Result<(), (String, String)> {
    let manifest = files.get(MANIFEST).ok_or_else(|| (MANIFEST.to_string(), "missing (every context has a manifest)".to_string()))?;
    let manifest = std::str::from_utf8(manifest).map_err(|_| (MANIFEST.to_string(), "not valid UTF-8".to_string()))?;
    let table: toml::Table = manifest.parse().map_err(|e: toml::de::Error| (MANIFEST.to_string(), e.to_string()))?;
    let source = table
        .get("kernel")
        .and_then(|k| k.get("source"))
        .and_then(|s| s.as_str())
        .ok_or_else(|| (MANIFEST.to_string(), "[kernel] has no `source = \"...\"` naming the source file".to_string()))?;
    let text = files.get(source).ok_or_else(|| (source.to_string(), format!("missing (named by {MANIFEST} [kernel] source)")))?;
    let text = std::str::from_utf8(text).map_err(|_| (source.to_string(), "not valid UTF-8".to_string()))?;
    // Regions::parse names the file and line itself; drop our copy of the file name.
    Regions::parse(source, text).map_err(|e| (source.to_string(), e.to_string()))?;
    Ok(())
}

/// A manifest's tuning parameters (name → value as TOML text) and tuning constraints.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Tuning {
    pub params: BTreeMap<String, String>,
    pub constraints: Vec<String>,
}

/// Read the tuning table; a manifest that does not parse has no tuning parameters (the
/// diff then shows the manifest's text change instead).
pub(crate) fn tuning(manifest: &str) -> Tuning {
    let Ok(table) = manifest.parse::<toml::Table>() else { return Tuning::default() };
    let params = table.get("tuning").and_then(|t| t.as_table()).map(|t| t.iter().map(|(k, v)| (k.clone(), v.to_string())).collect()).unwrap_or_default();
    let constraints = table
        .get("constraints")
        .and_then(|c| c.get("tuning"))
        .and_then(|t| t.as_array())
        .map(|a| a.iter().map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_string)).collect())
        .unwrap_or_default();
    Tuning { params, constraints }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SOURCE: &str = "// @peak macros\n// @peak device\nkernel void k() {}\n// @peak host\nlaunch();\n";

    fn files(manifest: &str, source: Option<&str>) -> Files {
        let mut f = Files::new();
        f.insert(MANIFEST.into(), manifest.as_bytes().to_vec());
        if let Some(s) = source {
            f.insert("kernel.cl".into(), s.as_bytes().to_vec());
        }
        f
    }

    #[test]
    fn check_names_the_bad_file() {
        let good = "[kernel]\nname = \"k\"\nsource = \"kernel.cl\"\n";
        assert_eq!(check_files(&files(good, Some(SOURCE))), Ok(()));
        assert_eq!(check_files(&files(good, None)).unwrap_err().0, "kernel.cl");
        assert_eq!(check_files(&files("[kernel]\nname = \"k\"\n", Some(SOURCE))).unwrap_err().0, MANIFEST);
        let (file, msg) = check_files(&files(good, Some("// @peak macros\n"))).unwrap_err();
        assert_eq!(file, "kernel.cl");
        assert!(msg.contains("// @peak device"), "{msg}");
        assert_eq!(check_files(&files("[kernel", Some(SOURCE))).unwrap_err().0, MANIFEST);
    }

    #[test]
    fn tuning_reads_params_and_constraints() {
        let t = tuning("[tuning]\nTILE = { values = [8, 16] }\nK = 4\n[constraints]\ntuning = [\"TILE >= K\"]\n");
        assert_eq!(t.params.get("K").map(String::as_str), Some("4"));
        assert!(t.params["TILE"].contains("values"));
        assert_eq!(t.constraints, vec!["TILE >= K".to_string()]);
        assert_eq!(tuning("not toml ["), Tuning::default());
    }
}
