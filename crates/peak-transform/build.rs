//! Embeds the shipped transformation library (`<workspace>/transformations/`) into the
//! crate, so the `peak` binary carries it wherever it is installed. The generated list is
//! `include_str!` of each file: editing a transformation needs no code change, and cargo
//! rebuilds when anything in the folder changes.

use std::fs;
use std::path::{Path, PathBuf};

fn main() {
    let manifest_dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let root = manifest_dir.join("../../transformations");
    println!("cargo:rerun-if-changed={}", root.display());

    let mut files = Vec::new();
    collect(&root, &root, &mut files);
    files.sort();

    let mut out =
        String::from("/// `(path relative to transformations/, contents)` of every shipped file.\npub(crate) static BUILTIN_FILES: &[(&str, &str)] = &[\n");
    for (rel, abs) in &files {
        out.push_str(&format!("    ({rel:?}, include_str!({abs:?})),\n"));
    }
    out.push_str("];\n");
    let dest = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("builtin_files.rs");
    fs::write(&dest, out).unwrap_or_else(|e| panic!("cannot write {}: {e}", dest.display()));
}

/// Files of the library layout only: top-level `*.toml` and everything in `snippets/`.
fn collect(root: &Path, dir: &Path, files: &mut Vec<(String, String)>) {
    let Ok(entries) = fs::read_dir(dir) else {
        panic!("the transformation library folder {} is missing", dir.display());
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let rel = path.strip_prefix(root).expect("under root").to_string_lossy().replace('\\', "/");
        if path.is_dir() {
            if rel == "snippets" {
                collect(root, &path, files);
            }
        } else if rel.starts_with("snippets/") || rel.ends_with(".toml") {
            let abs = path.canonicalize().unwrap_or_else(|e| panic!("cannot resolve {}: {e}", path.display()));
            files.push((rel, abs.to_string_lossy().into_owned()));
        }
    }
}
