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

use super::declare::{Declaration, Role, declare};
use super::preprocess::{Kind, Preprocessed};
use super::scan;
use crate::manifest::Language;

/// What each piece of `pre` declares.
pub(super) fn declarations(pre: &Preprocessed, backend: Language) -> Vec<Declaration> {
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
pub(super) fn select(pre: &Preprocessed, decls: &[Declaration], at: usize, backend: Language, file_name: &str) -> Selection {
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
            (Kind::Include { name, local: true }, _) if backend == Language::Opencl || include_fate(name, backend) == Fate::Drop => {
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
            _ if i == at && matches!(backend, Language::Cuda | Language::Hip) => {
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
fn include_fate(name: &str, backend: Language) -> Fate {
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
        Language::Opencl | Language::Hlsl => Fate::Keep,
        _ if NVRTC.contains(&name) || (backend == Language::Hip && HIP.contains(&name)) => Fate::Keep,
        // Found where the CUDA toolkit's own headers are (CCCL): used by name.
        _ if name.starts_with("cooperative_groups") || name.starts_with("hip/hip_cooperative_groups") => Fate::KeepIfUsed(&["cooperative_groups"]),
        _ if name.starts_with("cuda/") => Fate::KeepIfUsed(&["cuda"]),
        _ if name.starts_with("cub/") => Fate::KeepIfUsed(&["cub"]),
        _ => Fate::Drop,
    }
}

/// The half-precision headers CUDA code gets from nvcc's implicit `cuda_runtime.h` and
/// NVRTC does not: (header, the names that showed it is needed).
fn half_includes(backend: Language, used: &HashSet<&str>, macros: &[String], code: &str) -> Vec<(&'static str, String)> {
    if backend != Language::Cuda {
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
    fn includes_nvrtc_lacks_are_left_out() {
        assert_eq!(include_fate("cuda_bf16.h", Language::Cuda), Fate::Keep);
        assert_eq!(include_fate("stdio.h", Language::Cuda), Fate::Drop);
        assert_eq!(include_fate("cuda_runtime.h", Language::Hip), Fate::Drop);
        assert_eq!(include_fate("hip/hip_runtime.h", Language::Hip), Fate::Keep);
        assert_eq!(include_fate("hip/hip_runtime.h", Language::Cuda), Fate::Drop);
        assert!(matches!(include_fate("cooperative_groups/reduce.h", Language::Cuda), Fate::KeepIfUsed(_)));
    }

    #[test]
    fn c_linkage_goes_before_global_once() {
        let text = "// a __global__ kernel\n__global__ void k() {}";
        assert_eq!(with_c_linkage(text, &scan::mask(text)), "// a __global__ kernel\nextern \"C\" __global__ void k() {}");
        let done = "extern \"C\" __global__ void k() {}";
        assert_eq!(with_c_linkage(done, &scan::mask(done)), done);
    }
}
