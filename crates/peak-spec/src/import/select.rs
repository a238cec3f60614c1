//! What a context keeps of a kernel file: the chosen kernel and what it uses.
//!
//! Each top-level piece declares names (a function, a type, a variable, a macro). The
//! kernel's piece is kept, and so is every device-side piece that declares a name a kept
//! piece refers to, until nothing new is reached. Host code (functions without
//! `__device__` or `__global__`, host variables, `main`) is never kept: NVRTC compiles
//! device code alone. The kernel file's own `#define`s are kept whether used or not (they
//! may configure a header); a local header's only where used. `#include`s NVRTC cannot
//! find are left out, with a note saying so.

use std::collections::{BTreeSet, HashMap, HashSet};

use indexmap::IndexSet;

use super::preprocess::{Kind, Preprocessed};
use super::scan;
use crate::manifest::Backend;

/// What a top-level piece is, as far as keeping it goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Role {
    Kernel,
    DeviceFunction,
    HostFunction,
    /// `typedef`, `using X = ...`, `struct`, `class`, `union`, `enum`.
    Type,
    /// `__constant__`, `__device__` or `__shared__` data, and `const` / `constexpr`
    /// constants device code can read.
    DeviceVariable,
    HostVariable,
    /// `namespace X { ... }` or `namespace X = Y;`.
    Namespace,
    /// `using namespace X;`: kept where a kept namespace is X.
    UsingNamespace(String),
    /// A `#define`, or an undecided `#if` group of directives only.
    Macro,
    /// An undecided `#if` group holding code.
    Group,
    /// Includes and other directives, which the selection handles apart.
    Directive,
}

#[derive(Debug, Clone)]
pub(super) struct Declaration {
    pub role: Role,
    pub names: Vec<String>,
}

/// Words between a declaration's name and its parenthesised arguments that are not the
/// name: `__global__ void __launch_bounds__(256) k(...)`.
const ATTRIBUTES: &[&str] =
    &["__launch_bounds__", "__attribute__", "__declspec", "alignas", "__align__", "__maxnreg__", "__cluster_dims__", "__grid_constant__"];

/// What the masked code of one top-level piece declares.
pub(super) fn declare(code: &str, backend: Backend) -> Declaration {
    let code = scan::strip_template(code.trim());
    let head = &code[..code.find(['{', ';']).unwrap_or(code.len())];
    let mut words = scan::identifiers(head).map(|(_, w)| w);
    let (role, names) = match words.next().unwrap_or_default() {
        "typedef" => (Role::Type, typedef_names(code)),
        "using" => match (words.next(), words.next()) {
            (Some("namespace"), Some(ns)) => (Role::UsingNamespace(ns.to_string()), vec![]),
            (Some(name), _) => (Role::Type, vec![name.to_string()]),
            _ => (Role::Directive, vec![]),
        },
        "namespace" => (Role::Namespace, namespace_names(code, words.next())),
        "struct" | "class" | "union" | "enum" => (Role::Type, type_names(code)),
        _ => return function_or_variable(head, backend),
    };
    Declaration { role, names }
}

fn function_or_variable(head: &str, backend: Backend) -> Declaration {
    let declarator = &head[..scan::assignment(head).unwrap_or(head.len())];
    let words: HashSet<&str> = scan::identifiers(declarator).map(|(_, w)| w).collect();
    let has = |w: &[&str]| w.iter().any(|w| words.contains(w));
    if let Some((name, _)) = function_name(declarator) {
        let role = if has(kernel_markers(backend)) {
            Role::Kernel
        } else if backend == Backend::Opencl || has(&["__device__"]) {
            Role::DeviceFunction
        } else {
            Role::HostFunction
        };
        return Declaration { role, names: vec![name] };
    }
    let name = scan::identifiers(&declarator[..declarator.find('[').unwrap_or(declarator.len())]).last().map(|(_, w)| w.to_string());
    let device =
        backend == Backend::Opencl || has(&["__constant__", "__device__", "__shared__", "__managed__"]) || (has(&["const", "constexpr"]) && !has(&["extern"]));
    Declaration { role: if device { Role::DeviceVariable } else { Role::HostVariable }, names: name.into_iter().collect() }
}

/// The words that mark a kernel function.
pub(super) fn kernel_markers(backend: Backend) -> &'static [&'static str] {
    match backend {
        Backend::Opencl => &["__kernel", "kernel"],
        _ => &["__global__"],
    }
}

/// The name a function declarator declares and the offset of its parameter list's `(`;
/// `None` for a declarator without one (a variable). Operators are named `operator`.
pub(super) fn function_name(declarator: &str) -> Option<(String, usize)> {
    let mut from = 0;
    while let Some(open) = declarator[from..].find('(').map(|p| p + from) {
        let before = declarator[..open].trim_end();
        let start = before.rfind(|c: char| !c.is_ascii_alphanumeric() && c != '_').map_or(0, |p| p + 1);
        let word = &before[start..];
        if ATTRIBUTES.contains(&word) {
            from = scan::matching(declarator, open)? + 1;
            continue;
        }
        if word == "operator" || (word.is_empty() && before.contains("operator")) {
            return Some(("operator".to_string(), open));
        }
        return (!word.is_empty() && !word.as_bytes()[0].is_ascii_digit()).then(|| (word.to_string(), open));
    }
    None
}

/// A namespace's own name and, for a block, the names declared inside it: code calls an
/// anonymous namespace's functions by their names alone.
fn namespace_names(code: &str, name: Option<&str>) -> Vec<String> {
    let mut names: Vec<String> = name.map(str::to_string).into_iter().collect();
    if let Some(open) = code.find('{').filter(|&o| !code[..o].contains('=')) {
        let inner = &code[open + 1..scan::matching(code, open).unwrap_or(code.len())];
        for span in scan::split(inner, inner) {
            names.extend(declare(&inner[span.code..span.end], Backend::Cuda).names);
        }
    }
    names
}

/// `typedef float floatX;`, `typedef struct S {..} T;`, `typedef float (*f)(float);`.
fn typedef_names(code: &str) -> Vec<String> {
    if code.contains('{') {
        return type_names(code.trim_start().trim_start_matches("typedef").trim_start());
    }
    let statement = &code[..code.find(';').unwrap_or(code.len())];
    if let Some(p) = statement.find("(*") {
        return scan::identifiers(&statement[p..]).next().map(|(_, w)| w.to_string()).into_iter().collect();
    }
    let before_array = &statement[..statement.find('[').unwrap_or(statement.len())];
    scan::identifiers(before_array).last().map(|(_, w)| w.to_string()).into_iter().collect()
}

/// A struct, class, union or enum's tag, its enumerators, and variables declared with it.
fn type_names(code: &str) -> Vec<String> {
    let open = code.find('{');
    let head = &code[..open.or_else(|| code.find(';')).unwrap_or(code.len())];
    let head = &head[..head.find(':').filter(|&c| !head[c..].starts_with("::")).unwrap_or(head.len())];
    let keywords = ["struct", "class", "union", "enum", "final"];
    let mut names: Vec<String> = scan::identifiers(head)
        .filter(|(at, w)| !keywords.contains(w) && !ATTRIBUTES.contains(w) && depth_at(head, *at) == 0)
        .take(1)
        .map(|(_, w)| w.to_string())
        .collect();
    if let Some(open) = open {
        if head.trim_start().starts_with("enum") {
            let body = &code[open + 1..scan::matching(code, open).unwrap_or(code.len())];
            names.extend(scan::split_top(body, b',').iter().filter_map(|e| scan::identifiers(e).next().map(|(_, w)| w.to_string())));
        }
        names.extend(declarators_after(code, open));
    }
    names
}

/// The names declared after the braces opened at `open`: `} s, *p;`.
fn declarators_after(code: &str, open: usize) -> Vec<String> {
    let Some(close) = scan::matching(code, open) else { return vec![] };
    let tail = &code[close + 1..code[close..].find(';').map_or(code.len(), |s| close + s)];
    scan::split_top(tail, b',').iter().filter_map(|d| scan::identifiers(d).last().map(|(_, w)| w.to_string())).collect()
}

/// Parenthesis depth at offset `at` of `text`.
fn depth_at(text: &str, at: usize) -> i32 {
    text[..at].bytes().map(|c| i32::from(c == b'(') - i32::from(c == b')')).sum()
}

/// What each piece of `pre` declares.
pub(super) fn declarations(pre: &Preprocessed, backend: Backend) -> Vec<Declaration> {
    pre.pieces
        .iter()
        .map(|p| match &p.kind {
            Kind::Code => declare(&p.code, backend),
            Kind::Define(name) => Declaration { role: Role::Macro, names: vec![name.clone()] },
            Kind::Group { names, code } => Declaration { role: if *code { Role::Group } else { Role::Macro }, names: names.clone() },
            Kind::Include { .. } | Kind::Directive => Declaration { role: Role::Directive, names: vec![] },
        })
        .collect()
}

/// The regions a context gets from a kernel file, and what peak did to get them.
#[derive(Debug, Clone)]
pub(super) struct Selection {
    pub macros: String,
    pub device: String,
    pub notes: Vec<String>,
}

/// Keep kernel `kernel` (its piece is `pre.pieces[at]`) and what it uses.
pub(super) fn select(pre: &Preprocessed, decls: &[Declaration], at: usize, backend: Backend, file_name: &str) -> Selection {
    let keep = closure(pre, decls, at);
    let used: HashSet<&str> = keep.iter().enumerate().filter(|(_, k)| **k).flat_map(|(i, _)| scan::references(&pre.pieces[i].code)).collect();
    let kept_namespaces: HashSet<&str> =
        decls.iter().zip(&keep).filter(|(d, k)| **k && d.role == Role::Namespace).flat_map(|(d, _)| d.names.iter().map(String::as_str)).collect();
    let mut notes = Vec::new();
    let mut macros: Vec<String> = Vec::new();
    let mut device: Vec<String> = Vec::new();
    // Each header once, in the order first met.
    let mut dropped_includes = IndexSet::new();
    let mut unused_includes = IndexSet::new();
    for (i, (piece, decl)) in pre.pieces.iter().zip(decls).enumerate() {
        let text = piece.text.trim_start_matches(['\n', '\r']).trim_end();
        match (&piece.kind, &decl.role) {
            // A local header that is not there: only the compiler's own may be found elsewhere.
            (Kind::Include { name, local: true }, _) if backend == Backend::Opencl || include_fate(name, backend) == Fate::Drop => {
                notes.push(format!(
                    "left out #include \"{name}\": it is not next to {file_name} (copy what the kernel needs from it into the macros or device region)"
                ));
            }
            (Kind::Include { name, .. }, _) => match include_fate(name, backend) {
                Fate::Keep => macros.push(text.to_string()),
                Fate::KeepIfUsed(markers) if markers.iter().any(|m| used.contains(m)) => macros.push(text.to_string()),
                Fate::KeepIfUsed(_) => {
                    unused_includes.insert(format!("<{name}>"));
                }
                Fate::Drop => {
                    dropped_includes.insert(format!("<{name}>"));
                }
            },
            (Kind::Directive, _) => macros.push(text.to_string()),
            (_, Role::UsingNamespace(ns)) if kept_namespaces.contains(ns.as_str()) => device.push(text.to_string()),
            _ if !keep[i] => {}
            (_, Role::Macro) => macros.push(text.to_string()),
            _ if i == at && matches!(backend, Backend::Cuda | Backend::Hip) => {
                device.push(with_c_linkage(text, &piece.code[piece.text.len() - piece.text.trim_start_matches(['\n', '\r']).len()..]))
            }
            _ => device.push(text.to_string()),
        }
        if keep[i] && matches!(piece.kind, Kind::Group { .. }) {
            let condition = piece.text.trim_start().lines().find(|l| l.trim_start().starts_with('#')).unwrap_or_default().trim();
            notes.push(format!("kept `{condition}` ... `#endif` as written: only the compiler can decide it"));
        }
    }
    if !dropped_includes.is_empty() {
        notes.insert(0, format!(
            "left out #include {}: NVRTC compiles the device code alone, without host headers (peak's NVRTC prelude defines INFINITY, NAN, FLT_MAX, M_PI, uint and the like)",
            dropped_includes.into_iter().collect::<Vec<_>>().join(", ")
        ));
    }
    if !unused_includes.is_empty() {
        notes.push(format!("left out #include {}: the kernel does not use them", unused_includes.into_iter().collect::<Vec<_>>().join(", ")));
    }
    let kept_code: String = pre.pieces.iter().zip(&keep).filter(|(_, k)| **k).map(|(p, _)| p.code.as_str()).collect::<Vec<_>>().join("\n");
    let added = half_includes(backend, &used, &macros, &kept_code);
    for (include, why) in &added {
        notes.push(format!("added #include <{include}>: the kernel uses {why}, which nvcc's implicit cuda_runtime.h brings in"));
    }
    notes.extend(header_notes(pre, decls, &keep));
    notes.extend(left_out(decls, &keep, at));

    let mut head: Vec<String> = Vec::new();
    if !pre.header.is_empty() {
        head.push(pre.header.clone());
    }
    head.push(format!("// Brought in by `peak new` from {file_name}:"));
    head.extend(notes.iter().map(|n| format!("// - {n}")));
    head.extend(added.iter().map(|(include, _)| format!("#include <{include}>")));
    head.extend(macros);
    Selection { macros: head.join("\n") + "\n", device: device.join("\n\n") + "\n", notes }
}

/// Which pieces to keep: the kernel's, the kernel file's own macros and device operators,
/// and every device-side piece declaring a name a kept piece refers to.
fn closure(pre: &Preprocessed, decls: &[Declaration], kernel: usize) -> Vec<bool> {
    let eligible = |d: &Declaration| !matches!(d.role, Role::HostFunction | Role::HostVariable | Role::Directive | Role::UsingNamespace(_));
    let mut by_name: HashMap<&str, Vec<usize>> = HashMap::new();
    for (i, d) in decls.iter().enumerate().filter(|(_, d)| eligible(d)) {
        for name in &d.names {
            by_name.entry(name.as_str()).or_default().push(i);
        }
    }
    let seeds = decls.iter().zip(&pre.pieces).enumerate().filter(|(i, (d, p))| {
        *i == kernel
            || (d.role == Role::Macro && p.header.is_none())
            // Operators are used without their name being written.
            || (d.role == Role::DeviceFunction && d.names == ["operator"])
    });
    let mut queue: Vec<usize> = seeds.map(|(i, _)| i).collect();
    let mut keep = vec![false; decls.len()];
    let mut seen = HashSet::new();
    while let Some(i) = queue.pop() {
        if std::mem::replace(&mut keep[i], true) {
            continue;
        }
        for name in scan::references(&pre.pieces[i].code) {
            if seen.insert(name) {
                queue.extend(by_name.get(name).into_iter().flatten());
            }
        }
    }
    keep
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fate {
    Keep,
    /// Kept where the kept code names one of these (the header's namespace).
    KeepIfUsed(&'static [&'static str]),
    Drop,
}

/// Whether a context keeps `#include <name>`: what NVRTC (or peak's HIP prelude) provides
/// is kept; host headers are not. OpenCL compilers have no host headers to trip on.
fn include_fate(name: &str, backend: Backend) -> Fate {
    const NVRTC: &[&str] = &[
        "cuda_fp16.h",
        "cuda_bf16.h",
        "cuda_fp8.h",
        "cuda_fp6.h",
        "cuda_fp4.h",
        "vector_types.h",
        "vector_functions.h",
        "mma.h",
        "cuda_pipeline.h",
        "cuda_pipeline_primitives.h",
        "cuda_awbarrier.h",
        "cuda_awbarrier_primitives.h",
        "math_constants.h",
    ];
    const HIP: &[&str] = &["hip/hip_runtime.h", "hip/hip_runtime_api.h", "hip/hip_fp16.h", "hip/hip_bf16.h"];
    match backend {
        Backend::Opencl | Backend::Hlsl => Fate::Keep,
        _ if NVRTC.contains(&name) || (backend == Backend::Hip && HIP.contains(&name)) => Fate::Keep,
        // Found where the CUDA toolkit's own headers are (CCCL): used by name.
        _ if name.starts_with("cooperative_groups") || name.starts_with("hip/hip_cooperative_groups") => Fate::KeepIfUsed(&["cooperative_groups"]),
        _ if name.starts_with("cuda/") => Fate::KeepIfUsed(&["cuda"]),
        _ if name.starts_with("cub/") => Fate::KeepIfUsed(&["cub"]),
        _ => Fate::Drop,
    }
}

/// The half-precision headers CUDA code gets from nvcc's implicit `cuda_runtime.h` and
/// NVRTC does not: (header, the names that showed it is needed).
fn half_includes(backend: Backend, used: &HashSet<&str>, macros: &[String], code: &str) -> Vec<(&'static str, String)> {
    if backend != Backend::Cuda {
        return vec![];
    }
    let families: [(&str, &[&str]); 3] = [
        ("cuda_fp16.h", &["__half", "half", "__half2", "half2", "__float2half", "__half2float", "__float2half_rn"]),
        ("cuda_bf16.h", &["__nv_bfloat16", "nv_bfloat16", "__nv_bfloat162", "__float2bfloat16", "__bfloat162float"]),
        ("cuda_fp8.h", &["__nv_fp8_e4m3", "__nv_fp8_e5m2", "__nv_fp8x2_e4m3", "__nv_fp8x2_e5m2", "__nv_fp8x4_e4m3", "__nv_fp8x4_e5m2"]),
    ];
    families
        .iter()
        .filter(|(header, _)| !macros.iter().any(|m| m.contains(header)))
        .filter_map(|(header, names)| {
            // `half` and `half2` are also ordinary variable names (a loop's midpoint):
            // they count only where they name a type.
            let found: BTreeSet<&str> =
                names.iter().copied().filter(|n| used.contains(n) && (!matches!(*n, "half" | "half2") || used_as_type(code, n))).collect();
            (!found.is_empty()).then(|| (*header, found.into_iter().collect::<Vec<_>>().join(", ")))
        })
        .collect()
}

/// Whether `name` appears in `code` as a type: where a declaration starts (after `(`, `,`,
/// `;`, a brace, `<` or a qualifier) and followed by a name, `*` or `&` (a declaration or a
/// parameter), or alone in parentheses before an operand (a cast). `half < n` and
/// `x = half * 2` are a variable's uses.
fn used_as_type(code: &str, name: &str) -> bool {
    let is_name = |c: char| c.is_ascii_alphanumeric() || c == '_';
    const QUALIFIERS: [&str; 7] = ["const", "static", "volatile", "__shared__", "extern", "typedef", "__restrict__"];
    code.match_indices(name).any(|(at, _)| {
        let (head, after) = (&code[..at], &code[at + name.len()..]);
        if head.chars().next_back().is_some_and(is_name) || after.chars().next().is_some_and(is_name) {
            return false;
        }
        let head = head.trim_end();
        let rest = after.trim_start();
        let starts_declaration = head.is_empty() || head.ends_with(['(', ',', ';', '{', '}', '<']) || QUALIFIERS.iter().any(|q| head.ends_with(q));
        let declarator = rest.starts_with('*')
            || (rest.starts_with('&') && !rest.starts_with("&&"))
            || (after.starts_with(char::is_whitespace) && rest.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_'));
        let cast = head.ends_with('(') && rest.starts_with(')') && rest[1..].trim_start().starts_with(|c: char| is_name(c) || c == '(');
        (starts_declaration && declarator) || cast
    })
}

/// A note per inlined header: what the kernel used of it.
fn header_notes(pre: &Preprocessed, decls: &[Declaration], keep: &[bool]) -> Vec<String> {
    pre.headers
        .iter()
        .map(|h| {
            let names: BTreeSet<&str> = pre
                .pieces
                .iter()
                .zip(decls)
                .zip(keep)
                .filter(|((p, _), k)| **k && p.header.as_ref() == Some(h))
                .flat_map(|((_, d), _)| d.names.iter().map(String::as_str))
                .collect();
            let shown = h.display();
            if names.is_empty() {
                format!("read {shown}: the kernel uses nothing of it")
            } else {
                format!("took from {shown} what the kernel uses: {}", names.into_iter().collect::<Vec<_>>().join(", "))
            }
        })
        .collect()
}

/// A note on the code left out: host functions and variables, other kernels.
fn left_out(decls: &[Declaration], keep: &[bool], kernel: usize) -> Vec<String> {
    let names = |role: &Role| -> Vec<&str> {
        decls
            .iter()
            .zip(keep)
            .enumerate()
            .filter(|(i, (d, k))| !**k && *i != kernel && &d.role == role)
            .flat_map(|(_, (d, _))| d.names.iter().map(String::as_str))
            .collect()
    };
    let list = |mut names: Vec<&str>| {
        names.dedup();
        let more = names.len().saturating_sub(6);
        let shown = names.into_iter().take(6).collect::<Vec<_>>().join(", ");
        if more > 0 { format!("{shown} and {more} more") } else { shown }
    };
    let mut parts = Vec::new();
    for (role, what) in [(Role::HostFunction, "host functions"), (Role::Kernel, "the other kernels"), (Role::HostVariable, "host variables")] {
        let found = names(&role);
        if !found.is_empty() {
            parts.push(format!("{what} ({})", list(found)));
        }
    }
    let unused = [Role::DeviceFunction, Role::Type, Role::DeviceVariable].iter().map(|r| names(r).len()).sum::<usize>();
    if unused > 0 {
        parts.push(format!("{unused} device declarations the kernel does not use"));
    }
    if parts.is_empty() { vec![] } else { vec![format!("left out {}", parts.join(", "))] }
}

/// `text` (a kernel's piece; `code` its masked twin) with `extern "C"` before its
/// `__global__` where it lacks it: peak finds kernels by name, and a C++ kernel exists
/// only under its mangled name.
fn with_c_linkage(text: &str, code: &str) -> String {
    let Some(at) = scan::find_word(code, "__global__") else { return text.to_string() };
    if code[..at].contains("extern") {
        return text.to_string();
    }
    format!("{}extern \"C\" {}", &text[..at], &text[at..])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decl(code: &str) -> (Role, Vec<String>) {
        let d = declare(code, Backend::Cuda);
        (d.role, d.names)
    }

    #[test]
    fn half_counts_as_a_type_only_where_it_names_one() {
        for code in ["void k(half* a) {}", "void k(const half *a, int n) {}", "{ half x = a[0]; }", "float f = (half)v;", "__shared__ half tile[32];"] {
            assert!(used_as_type(code, "half"), "{code}");
        }
        for code in ["int half = n / 2;", "if (i < half && j) {}", "x = half * 2;", "return half;", "y[half] = 0;", "int halfway = 1;"] {
            assert!(!used_as_type(code, "half"), "{code}");
        }
    }

    #[test]
    fn pieces_declare_what_c_declares() {
        let s = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(decl("__global__ void __launch_bounds__(256) k(float* a) {}"), (Role::Kernel, s(&["k"])));
        assert_eq!(decl("template<class T>\n__host__ __device__ T ceil_div(T a, T b) { return a; }"), (Role::DeviceFunction, s(&["ceil_div"])));
        assert_eq!(decl("void cuda_check(cudaError_t e, const char* f, int l) {}"), (Role::HostFunction, s(&["cuda_check"])));
        assert_eq!(decl("typedef __nv_bfloat16 floatX;"), (Role::Type, s(&["floatX"])));
        assert_eq!(decl("using reduction_func_t = float (*) (float);"), (Role::Type, s(&["reduction_func_t"])));
        assert_eq!(decl("template<class E>\nstruct alignas(16) Packed128 { E payload[4]; };"), (Role::Type, s(&["Packed128"])));
        assert_eq!(decl("enum class Mode : int { A, B = 2 };"), (Role::Type, s(&["Mode", "A", "B"])));
        assert_eq!(decl("typedef struct { float m; float s; } SumMax;"), (Role::Type, s(&["SumMax"])));
        assert_eq!(decl("static size_t workspace = 32 * 1024;"), (Role::HostVariable, s(&["workspace"])));
        assert_eq!(decl("extern cudaDeviceProp deviceProp;"), (Role::HostVariable, s(&["deviceProp"])));
        assert_eq!(decl("__constant__ float w[16];"), (Role::DeviceVariable, s(&["w"])));
        assert_eq!(decl("static constexpr int TILE = 32;"), (Role::DeviceVariable, s(&["TILE"])));
        assert_eq!(decl("namespace cg = cooperative_groups;"), (Role::Namespace, s(&["cg"])));
        assert_eq!(decl("namespace {\n__device__ float sq(float x) { return x * x; }\nconstexpr int W = 4;\n}"), (Role::Namespace, s(&["sq", "W"])));
        assert_eq!(decl("__device__ float2 operator+(float2 a, float2 b) { return a; }"), (Role::DeviceFunction, s(&["operator"])));
        assert_eq!(declare("float helper(float x) { return x; }", Backend::Opencl).role, Role::DeviceFunction);
        assert_eq!(declare("__kernel void k(__global float* a) {}", Backend::Opencl).role, Role::Kernel);
    }

    #[test]
    fn includes_nvrtc_lacks_are_left_out() {
        assert_eq!(include_fate("cuda_bf16.h", Backend::Cuda), Fate::Keep);
        assert_eq!(include_fate("stdio.h", Backend::Cuda), Fate::Drop);
        assert_eq!(include_fate("cuda_runtime.h", Backend::Hip), Fate::Drop);
        assert_eq!(include_fate("hip/hip_runtime.h", Backend::Hip), Fate::Keep);
        assert_eq!(include_fate("hip/hip_runtime.h", Backend::Cuda), Fate::Drop);
        assert!(matches!(include_fate("cooperative_groups/reduce.h", Backend::Cuda), Fate::KeepIfUsed(_)));
    }

    #[test]
    fn c_linkage_goes_before_global_once() {
        let text = "// a __global__ kernel\n__global__ void k() {}";
        assert_eq!(with_c_linkage(text, &scan::mask(text)), "// a __global__ kernel\nextern \"C\" __global__ void k() {}");
        let done = "extern \"C\" __global__ void k() {}";
        assert_eq!(with_c_linkage(done, &scan::mask(done)), done);
    }
}
