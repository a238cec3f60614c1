//! The preprocessor, as far as bringing a kernel in needs: local headers inlined, `#if`
//! groups decided where their conditions can be decided before compiling, and the file cut
//! into pieces the selection then keeps or leaves out.
//!
//! A condition is decided when it tests only what the file itself defines (`#ifdef
//! ENABLE_BF16`, `#if defined(A) && !defined(B)`, `#if USE_X` with `#define USE_X 1`) or
//! what the compiler always defines (`__CUDACC__`, `__CUDA_ARCH__` under NVRTC). One that
//! compares a value only the compiler knows (`__CUDA_ARCH__ >= 800`) or names a tuning
//! parameter (peak defines those at compile time) keeps its whole group as written.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use super::scan::{self, Span};
use crate::manifest::Language;

/// Reads a local header by its path relative to the kernel file's folder; `None` where
/// there is no such file.
pub type ReadHeader<'a> = &'a dyn Fn(&Path) -> Option<String>;

/// What a piece of the file is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Kind {
    /// A declaration or definition.
    Code,
    /// `#define NAME` or `#undef NAME`.
    Define(String),
    /// `#include <name>`, or `#include "name"` not found next to the file.
    Include { name: String, local: bool },
    /// Another directive (`#pragma`, `#error` ...).
    Directive,
    /// An `#if` group peak cannot decide, kept as written: the names it defines, and
    /// whether it holds code (else only directives).
    Group { names: Vec<String>, code: bool },
}

#[derive(Debug, Clone)]
pub(super) struct Piece {
    /// As written, with the comment lines directly above it.
    pub text: String,
    /// The same with comments and literals masked (see [`scan::mask`]).
    pub code: String,
    pub kind: Kind,
    /// The local header it came from; `None` for the kernel file itself.
    pub header: Option<PathBuf>,
}

/// A kernel file after the preprocessor pass.
#[derive(Debug, Clone, Default)]
pub(super) struct Preprocessed {
    pub pieces: Vec<Piece>,
    /// The kernel file's leading comment (its licence, its description).
    pub header: String,
    /// The local headers inlined, in order.
    pub headers: Vec<PathBuf>,
}

/// Run the preprocessor pass over `text`, the kernel file. `undecidable` names macros
/// defined only at compile time (the tuning parameters).
pub(super) fn preprocess(text: &str, backend: Language, read: ReadHeader, undecidable: &[&str]) -> Preprocessed {
    let mut pre = Pre {
        backend,
        read,
        defined: compiler_macros(backend).iter().map(|m| (m.to_string(), None)).collect(),
        undecidable: undecidable.iter().map(|s| s.to_string()).collect(),
        out: Preprocessed::default(),
    };
    pre.file(text, Path::new(""), None);
    pre.out
}

/// Macros the device compiler defines for every compile of a context.
fn compiler_macros(backend: Language) -> &'static [&'static str] {
    match backend {
        Language::Cuda => &["__CUDACC__", "__CUDACC_RTC__", "__CUDA_ARCH__"],
        Language::Hip => &["__HIPCC__", "__HIP__", "__HIP_DEVICE_COMPILE__"],
        Language::Opencl => &["__OPENCL_VERSION__", "__OPENCL_C_VERSION__"],
        Language::Hlsl => &[],
    }
}

struct Pre<'a> {
    backend: Language,
    read: ReadHeader<'a>,
    /// Defined macros, with their value where it is an integer.
    defined: HashMap<String, Option<i64>>,
    undecidable: HashSet<String>,
    out: Preprocessed,
}

/// One open `#if` group whose condition was decided.
struct Branch {
    /// The lines now read are kept.
    taking: bool,
    /// A branch of the group was kept already (or the group is inside a skipped one).
    taken: bool,
}

impl Pre<'_> {
    /// Add the pieces of one file (`dir`: its folder, relative to the kernel file's).
    fn file(&mut self, text: &str, dir: &Path, header: Option<PathBuf>) {
        let code = scan::mask(text);
        let mut spans = scan::split(text, &code);
        if header.is_none() {
            // The kernel file's leading comment (a licence, a description) is its own.
            let first = spans.first_mut().map_or(text.len(), |s| {
                s.start = s.code;
                s.code
            });
            self.out.header = text[..first].trim().to_string();
        }
        let mut branches: Vec<Branch> = Vec::new();
        let mut i = 0;
        while i < spans.len() {
            let span = spans[i];
            let active = branches.iter().all(|b| b.taking);
            let piece =
                |kind: Kind| Piece { text: text[span.start..span.end].to_string(), code: code[span.start..span.end].to_string(), kind, header: header.clone() };
            if !span.directive {
                if active {
                    self.out.pieces.push(piece(Kind::Code));
                }
                i += 1;
                continue;
            }
            let line = directive_text(&text[span.code..span.end], &code[span.code..span.end]);
            let (name, rest) = split_directive(&line);
            match name {
                "if" | "ifdef" | "ifndef" => {
                    let decided = if !active { Some(false) } else { self.condition(name, rest) };
                    match decided {
                        Some(taking) => branches.push(Branch { taking, taken: taking || !active }),
                        None => {
                            i = self.group(text, &code, &spans, i, false, &header);
                            continue;
                        }
                    }
                }
                "elif" | "elifdef" | "elifndef" => {
                    let Some(branch) = branches.last_mut() else {
                        i += 1;
                        continue;
                    };
                    if branch.taken {
                        branch.taking = false;
                    } else {
                        match self.condition(name.trim_start_matches("el"), rest) {
                            Some(taking) => *branch = Branch { taking, taken: taking },
                            None => {
                                // Earlier branches were false: the rest is an `#if` of its own.
                                branches.pop();
                                i = self.group(text, &code, &spans, i, true, &header);
                                continue;
                            }
                        }
                    }
                }
                "else" => {
                    if let Some(branch) = branches.last_mut() {
                        branch.taking = !branch.taken;
                        branch.taken = true;
                    }
                }
                "endif" => {
                    branches.pop();
                }
                _ if !active => {}
                "include" => self.include(rest, dir, piece),
                "define" | "undef" => {
                    let macro_name = macro_name(rest).unwrap_or_default();
                    if name == "define" {
                        let value = rest[macro_name.len()..].trim();
                        let value = if rest[macro_name.len()..].starts_with('(') { None } else { int_literal(value) };
                        self.defined.insert(macro_name.clone(), value);
                    } else {
                        self.defined.remove(&macro_name);
                    }
                    self.out.pieces.push(piece(Kind::Define(macro_name)));
                }
                "pragma" if rest.trim() == "once" => {}
                _ => self.out.pieces.push(piece(Kind::Directive)),
            }
            i += 1;
        }
    }

    /// `#include` in an active part: a local header is inlined once; anything else is a
    /// piece for the selection to keep or leave out.
    fn include(&mut self, rest: &str, dir: &Path, piece: impl Fn(Kind) -> Piece) {
        let rest = rest.trim();
        let (name, quoted) = match (rest.strip_prefix('"'), rest.strip_prefix('<')) {
            (Some(q), _) => (q.split('"').next().unwrap_or_default(), true),
            (_, Some(a)) => (a.split('>').next().unwrap_or_default(), false),
            _ => (rest, false),
        };
        if quoted {
            let path = normalize(&dir.join(name));
            if self.out.headers.contains(&path) {
                return;
            }
            if let Some(text) = (self.read)(&path) {
                self.out.headers.push(path.clone());
                let parent = path.parent().map(Path::to_path_buf).unwrap_or_default();
                self.file(&text, &parent, Some(path));
                return;
            }
        }
        self.out.pieces.push(piece(Kind::Include { name: name.to_string(), local: quoted }));
    }

    /// The pieces from the directive `spans[at]` to its matching `#endif`, as one group
    /// kept as written. With `reopen`, that directive is an `#elif` after branches that were
    /// false, written as an `#if`. Returns the index after the group.
    fn group(&mut self, text: &str, code: &str, spans: &[Span], at: usize, reopen: bool, header: &Option<PathBuf>) -> usize {
        let mut depth = 0;
        let mut end = spans.len() - 1;
        let mut names = Vec::new();
        let mut has_code = false;
        for (j, span) in spans.iter().enumerate().skip(at) {
            if !span.directive {
                has_code = true;
                names.extend(super::declare::declare(&code[span.code..span.end], self.backend).names);
                continue;
            }
            let line = directive_text(&text[span.code..span.end], &code[span.code..span.end]);
            match split_directive(&line) {
                _ if j == at => depth = 1,
                ("if" | "ifdef" | "ifndef", _) => depth += 1,
                ("endif", _) => {
                    depth -= 1;
                    if depth == 0 {
                        end = j;
                        break;
                    }
                }
                ("define", rest) => names.extend(macro_name(rest)),
                _ => {}
            }
        }
        let first = &spans[at];
        let mut group_text = text[first.start..spans[end].end].to_string();
        let mut group_code = code[first.start..spans[end].end].to_string();
        if reopen {
            // `#elif X` -> `#  if X`: the same length, the same condition.
            let elif_at = first.code - first.start + text[first.code..].find("el").unwrap_or(0);
            group_text.replace_range(elif_at..elif_at + 2, "  ");
            group_code.replace_range(elif_at..elif_at + 2, "  ");
        }
        self.out.pieces.push(Piece { text: group_text, code: group_code, kind: Kind::Group { names, code: has_code }, header: header.clone() });
        end + 1
    }

    /// The truth of `#if EXPR`, `#ifdef NAME` or `#ifndef NAME`, where it can be told.
    fn condition(&self, keyword: &str, rest: &str) -> Option<bool> {
        let name = rest.trim();
        match keyword {
            "ifdef" => self.defined_now(name),
            "ifndef" => self.defined_now(name).map(|d| !d),
            _ => Condition { tokens: scan::tokens(rest), at: 0, pre: self }.or(),
        }
    }

    fn defined_now(&self, name: &str) -> Option<bool> {
        (!self.undecidable.contains(name)).then(|| self.defined.contains_key(name))
    }
}

/// A directive's text as one line: continuation lines joined, comments dropped.
fn directive_text(text: &str, code: &str) -> String {
    // The masked text drops comments; a string in `#include "x"` is masked, so it is read
    // from the original text.
    let source = if code.trim_start().trim_start_matches('#').trim_start().starts_with("include") { text } else { code };
    source.replace("\\\r\n", " ").replace("\\\n", " ").trim().to_string()
}

/// The name a `#define` or `#undef` line's text (after the keyword) is about.
fn macro_name(rest: &str) -> Option<String> {
    let end = rest.find(|c: char| !c.is_ascii_alphanumeric() && c != '_').unwrap_or(rest.len());
    (end > 0).then(|| rest[..end].to_string())
}

/// `#  define X 1` -> ("define", "X 1").
fn split_directive(line: &str) -> (&str, &str) {
    let line = line.trim_start_matches('#').trim_start();
    let end = line.find(|c: char| !c.is_ascii_alphanumeric()).unwrap_or(line.len());
    (&line[..end], line[end..].trim())
}

/// `a/b/../c` -> `a/c`, so a header reached by two spellings is inlined once.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            std::path::Component::ParentDir if out.file_name().is_some_and(|n| n != "..") => {
                out.pop();
            }
            std::path::Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// An integer literal's value: `1`, `0x10`, `32U`.
fn int_literal(text: &str) -> Option<i64> {
    let digits = text.trim_end_matches(['u', 'U', 'l', 'L']);
    match digits.strip_prefix("0x").or_else(|| digits.strip_prefix("0X")) {
        Some(hex) => i64::from_str_radix(hex, 16).ok(),
        None => digits.parse().ok(),
    }
}

/// A three-valued reading of an `#if` expression: `Some` where the file or the compiler's
/// fixed macros decide it, `None` where only the compiler can.
struct Condition<'p, 'a> {
    tokens: Vec<String>,
    at: usize,
    pre: &'p Pre<'a>,
}

impl Condition<'_, '_> {
    fn peek(&self) -> Option<&str> {
        self.tokens.get(self.at).map(String::as_str)
    }

    fn next(&mut self) -> Option<String> {
        let t = self.tokens.get(self.at).cloned();
        self.at += 1;
        t
    }

    fn or(&mut self) -> Option<bool> {
        let mut value = self.and();
        while self.peek() == Some("||") {
            self.next();
            let right = self.and();
            value = match (value, right) {
                (Some(true), _) | (_, Some(true)) => Some(true),
                (Some(false), Some(false)) => Some(false),
                _ => None,
            };
        }
        value
    }

    fn and(&mut self) -> Option<bool> {
        let mut value = self.comparison();
        while self.peek() == Some("&&") {
            self.next();
            let right = self.comparison();
            value = match (value, right) {
                (Some(false), _) | (_, Some(false)) => Some(false),
                (Some(true), Some(true)) => Some(true),
                _ => None,
            };
        }
        value
    }

    /// A unary term, and any arithmetic or comparison after it: those peak leaves to the
    /// compiler.
    fn comparison(&mut self) -> Option<bool> {
        let value = self.unary();
        let mut decided = true;
        while let Some(op) = self.peek() {
            if matches!(op, "&&" | "||" | ")") {
                break;
            }
            self.next();
            self.unary();
            decided = false;
        }
        if decided { value } else { None }
    }

    fn unary(&mut self) -> Option<bool> {
        match self.next().as_deref() {
            Some("!") => self.unary().map(|v| !v),
            Some("(") => {
                let value = self.or();
                if self.peek() == Some(")") {
                    self.next();
                }
                value
            }
            Some("defined") => {
                let parens = self.peek() == Some("(");
                if parens {
                    self.next();
                }
                let name = self.next().unwrap_or_default();
                if parens && self.peek() == Some(")") {
                    self.next();
                }
                self.pre.defined_now(&name)
            }
            Some(word) if word.as_bytes()[0].is_ascii_digit() => int_literal(word).map(|v| v != 0),
            Some(word) if !self.pre.undecidable.contains(word) => self.pre.defined.get(word).copied().flatten().map(|v| v != 0),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(text: &str, headers: &[(&str, &str)]) -> Preprocessed {
        let read = |p: &Path| headers.iter().find(|(n, _)| Path::new(n) == p).map(|(_, t)| t.to_string());
        preprocess(text, Language::Cuda, &read, &["BLOCK_X"])
    }

    fn texts(pre: &Preprocessed) -> Vec<String> {
        pre.pieces.iter().map(|p| p.text.trim().to_string()).collect()
    }

    #[test]
    fn decided_groups_keep_their_taken_branch() {
        let pre = run(
            "/* licence */\n#define ENABLE_BF16\n#if defined(ENABLE_BF16)\ntypedef __nv_bfloat16 floatX;\n#elif defined(ENABLE_FP16)\ntypedef half floatX;\n#else\ntypedef float floatX;\n#endif\n#ifndef __CUDA_ARCH__\nvoid host_only();\n#endif\n#if 0\nint gone;\n#endif\n",
            &[],
        );
        assert_eq!(pre.header, "/* licence */");
        assert_eq!(texts(&pre), ["#define ENABLE_BF16", "typedef __nv_bfloat16 floatX;"]);
    }

    #[test]
    fn undecidable_groups_stay_whole() {
        let pre = run(
            "#if __CUDA_ARCH__ >= 800\n#define FAST 1\n#else\n#define FAST 0\n#endif\n#ifndef BLOCK_X\n#define BLOCK_X 64\n#endif\n#if defined(NOPE)\nint a;\n#elif __CUDACC_VER_MAJOR__ < 12\nint b;\n#endif\n",
            &[],
        );
        assert_eq!(pre.pieces.len(), 3, "{:?}", texts(&pre));
        assert_eq!(pre.pieces[0].kind, Kind::Group { names: vec!["FAST".into(), "FAST".into()], code: false });
        assert!(pre.pieces[1].text.contains("#ifndef BLOCK_X"), "a tuning parameter is only known at compile time");
        assert!(pre.pieces[2].text.trim_start().starts_with("#  if __CUDACC_VER_MAJOR__ < 12"), "{}", pre.pieces[2].text);
        assert_eq!(pre.pieces[2].kind, Kind::Group { names: vec!["b".into()], code: true });
    }

    #[test]
    fn local_headers_are_inlined_once_and_others_kept_as_includes() {
        let pre = run(
            "#include <stdio.h>\n#include \"common.h\"\n#include \"sub/../common.h\"\n#include \"missing.h\"\n__global__ void k(floatX* y) {}\n",
            &[("common.h", "#pragma once\n#include <cuda_runtime.h>\ntypedef float floatX;\n")],
        );
        assert_eq!(
            texts(&pre),
            ["#include <stdio.h>", "#include <cuda_runtime.h>", "typedef float floatX;", "#include \"missing.h\"", "__global__ void k(floatX* y) {}"]
        );
        assert_eq!(pre.headers, [PathBuf::from("common.h")]);
        assert_eq!(pre.pieces[2].header.as_deref(), Some(Path::new("common.h")));
        assert_eq!(pre.pieces[3].kind, Kind::Include { name: "missing.h".into(), local: true });
    }
}
