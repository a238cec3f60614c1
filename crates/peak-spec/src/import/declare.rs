//! What one top-level piece of a kernel file declares ([`declare`]): its [`Role`] (a
//! kernel, a device or host function, a type, a variable, a namespace, ...) and the names
//! it brings in, read from the masked code the way C reads a declaration. The selection
//! (`select.rs`) keeps pieces by these; preprocessing (`preprocess.rs`) collects the names
//! an undecided `#if` group declares.

use std::collections::HashSet;

use super::scan;
use crate::manifest::Language;

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
pub(super) fn declare(code: &str, backend: Language) -> Declaration {
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

fn function_or_variable(head: &str, backend: Language) -> Declaration {
    let declarator = &head[..scan::assignment(head).unwrap_or(head.len())];
    let words: HashSet<&str> = scan::identifiers(declarator).map(|(_, w)| w).collect();
    let has = |w: &[&str]| w.iter().any(|w| words.contains(w));
    if let Some((name, _)) = function_name(declarator) {
        let role = if has(kernel_markers(backend)) {
            Role::Kernel
        } else if backend == Language::Opencl || has(&["__device__"]) {
            Role::DeviceFunction
        } else {
            Role::HostFunction
        };
        return Declaration { role, names: vec![name] };
    }
    let name = scan::identifiers(&declarator[..declarator.find('[').unwrap_or(declarator.len())]).last().map(|(_, w)| w.to_string());
    let device =
        backend == Language::Opencl || has(&["__constant__", "__device__", "__shared__", "__managed__"]) || (has(&["const", "constexpr"]) && !has(&["extern"]));
    Declaration { role: if device { Role::DeviceVariable } else { Role::HostVariable }, names: name.into_iter().collect() }
}

/// The words that mark a kernel function.
pub(super) fn kernel_markers(backend: Language) -> &'static [&'static str] {
    match backend {
        Language::Opencl => &["__kernel", "kernel"],
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
            names.extend(declare(&inner[span.code..span.end], Language::Cuda).names);
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

#[cfg(test)]
mod tests {
    use super::*;

    fn decl(code: &str) -> (Role, Vec<String>) {
        let d = declare(code, Language::Cuda);
        (d.role, d.names)
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
        assert_eq!(declare("float helper(float x) { return x; }", Language::Opencl).role, Role::DeviceFunction);
        assert_eq!(declare("__kernel void k(__global float* a) {}", Language::Opencl).role, Role::Kernel);
    }
}
