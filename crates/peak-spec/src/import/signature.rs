//! A kernel's parameters from its signature, with the file's typedefs followed: `floatX*`
//! after `typedef __nv_bfloat16 floatX;` is an array of bf16.

use std::collections::HashMap;

use super::declare::function_name;
use super::preprocess::{Kind, Preprocessed};
use super::scan;
use crate::manifest::DType;

/// One parameter of a kernel's signature.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Param {
    /// A pointer to elements of `dtype`; `read_only` when declared `const`.
    Array { name: String, dtype: DType, read_only: bool },
    /// An integer passed by value; `wide` when it is 64 bits (`size_t`, `long`, `int64_t`).
    Scalar { name: String, wide: bool },
    /// A `float` passed by value: a fixed value written into the launch.
    Float { name: String },
}

impl Param {
    pub fn name(&self) -> &str {
        match self {
            Param::Array { name, .. } | Param::Scalar { name, .. } | Param::Float { name } => name,
        }
    }
}

/// The type names a file defines for other types: `typedef`, `using X = ...;` and
/// `#define X type`.
#[derive(Debug, Clone, Default)]
pub(super) struct Typedefs(HashMap<String, String>);

impl Typedefs {
    pub(super) fn of(pre: &Preprocessed) -> Typedefs {
        let mut map = HashMap::new();
        for piece in &pre.pieces {
            let code = piece.code.trim();
            let alias = match &piece.kind {
                Kind::Code => simple_typedef(code),
                Kind::Define(name) => {
                    let body = code.trim_start_matches('#').trim_start().strip_prefix("define").and_then(|r| r.trim_start().strip_prefix(name.as_str()));
                    // Only an object-like macro whose body is words: `#define real float`.
                    body.filter(|b| !b.starts_with('(') && !b.trim().is_empty() && b.split_whitespace().all(|w| w.bytes().all(scan::is_name_byte)))
                        .map(|b| (name.clone(), scan::squash(b)))
                }
                _ => None,
            };
            if let Some((name, target)) = alias {
                map.insert(name, target);
            }
        }
        Typedefs(map)
    }

    /// `ty` with every word that names another type replaced by that type.
    fn resolve(&self, ty: &str) -> String {
        let mut ty = ty.to_string();
        for _ in 0..8 {
            let Some(target) = self.0.get(&ty) else { break };
            ty = target.clone();
        }
        ty
    }
}

/// `typedef float floatX;` or `using floatX = float;` -> ("floatX", "float"); `None` for
/// struct and function-pointer typedefs.
fn simple_typedef(code: &str) -> Option<(String, String)> {
    let statement = code.strip_suffix(';')?.trim();
    if statement.contains(['{', '(', '[']) {
        return None;
    }
    if let Some(rest) = statement.strip_prefix("using ") {
        let (name, target) = rest.split_once('=')?;
        return Some((name.trim().to_string(), scan::squash(target)));
    }
    let rest = statement.strip_prefix("typedef ")?;
    let at = rest.rfind(|c: char| !c.is_ascii_alphanumeric() && c != '_')?;
    Some((rest[at + 1..].to_string(), scan::squash(&rest[..=at].replace('*', " * "))))
}

/// The parameters of the kernel whose masked code is `code`.
pub(super) fn parameters(code: &str, typedefs: &Typedefs) -> Result<Vec<Param>, String> {
    let head = scan::strip_template(code.trim());
    let head = &head[..head.find('{').unwrap_or(head.len())];
    let (name, open) = function_name(head).ok_or("a kernel declaration without a parameter list")?;
    let close = scan::matching(head, open).ok_or_else(|| format!("kernel `{name}`: a parameter list without ')'"))?;
    scan::split_top(&head[open + 1..close], b',')
        .into_iter()
        .map(str::trim)
        .filter(|p| !p.is_empty() && *p != "void")
        .map(|p| parse_param(p, typedefs).map_err(|e| format!("kernel `{name}`, parameter `{}`: {e}", scan::squash(p))))
        .collect()
}

const QUALIFIERS: &[&str] = &[
    "const",
    "__restrict__",
    "__restrict",
    "restrict",
    "__global",
    "global",
    "__constant",
    "constant",
    "volatile",
    "unsigned",
    "signed",
    "__grid_constant__",
    "struct",
];

fn parse_param(text: &str, typedefs: &Typedefs) -> Result<Param, String> {
    let text = &text[..scan::assignment(text).unwrap_or(text.len())]; // a default argument
    let words: Vec<&str> = text.split(|c: char| c.is_whitespace() || c == '*' || c == '&').filter(|w| !w.is_empty()).collect();
    let name = words.last().ok_or("empty parameter")?;
    let name = name[..name.find('[').unwrap_or(name.len())].to_string();
    let written: Vec<&str> = words[..words.len() - 1].iter().copied().filter(|w| !QUALIFIERS.contains(w)).collect();
    let unsigned = words.contains(&"unsigned");
    // A typedef can hide the pointer too (`typedef float* fptr;`).
    let resolved = typedefs.resolve(&written.join(" "));
    let pointer = text.contains(['*', '[']) || resolved.ends_with('*');
    let ty = resolved.trim_end_matches(['*', ' ']).trim_start_matches("const ").to_string();
    let shown = if ty == written.join(" ") { format!("`{ty}`") } else { format!("`{}` (a typedef of `{ty}`)", written.join(" ")) };
    let read_only = (words.contains(&"const") && pointer) || words.contains(&"__constant") || words.contains(&"constant");
    if words.contains(&"__local") || words.contains(&"local") {
        return Err("`__local` memory as a parameter is not imported yet: declare the buffer inside the kernel (`__local float tile[256];`), or import without it and add it back as the last parameter, which the launch's shared bytes then size".into());
    }
    if pointer {
        let dtype = match (ty.as_str(), unsigned) {
            ("float", _) => DType::F32,
            ("__half" | "half" | "_Float16", _) => DType::F16,
            ("__nv_bfloat16" | "nv_bfloat16" | "__hip_bfloat16" | "bfloat16", _) => DType::Bf16,
            ("__nv_fp8_e4m3", _) => DType::E4m3,
            ("__nv_fp8_e5m2", _) => DType::E5m2,
            ("int" | "int32_t", false) => DType::I32,
            ("int", true) | ("" | "uint" | "uint32_t" | "unsigned int", _) => DType::U32,
            _ => return Err(format!("element type {shown} is not one peak generates (f32, f16, bf16, e4m3, e5m2, i32, u32)")),
        };
        return Ok(Param::Array { name, dtype, read_only });
    }
    match ty.as_str() {
        "float" => Ok(Param::Float { name }),
        "int" | "" | "uint" | "int32_t" | "uint32_t" | "unsigned int" => Ok(Param::Scalar { name, wide: false }),
        "size_t" | "long" | "long long" | "int64_t" | "uint64_t" | "long int" | "ptrdiff_t" => Ok(Param::Scalar { name, wide: true }),
        "double" => Err(format!("a scalar of type {shown}: the launch script passes floats as f32; make it a float, or a constant in the kernel")),
        _ => Err(format!("a scalar of type {shown}: peak passes integers and floats; make it a constant in the kernel, or an int or float parameter")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(code: &str, typedefs: &[(&str, &str)]) -> Result<Vec<Param>, String> {
        let t = Typedefs(typedefs.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect());
        parameters(&scan::mask(code), &t)
    }

    #[test]
    fn parameters_follow_typedefs_and_sort_scalars() {
        let got = params(
            "__global__ void __launch_bounds__(128) k(floatX* out, const floatX* __restrict__ in, int n, size_t m, float eps, const int c) {}",
            &[("floatX", "__nv_bfloat16")],
        )
        .unwrap();
        assert_eq!(
            got,
            vec![
                Param::Array { name: "out".into(), dtype: DType::Bf16, read_only: false },
                Param::Array { name: "in".into(), dtype: DType::Bf16, read_only: true },
                Param::Scalar { name: "n".into(), wide: false },
                Param::Scalar { name: "m".into(), wide: true },
                Param::Float { name: "eps".into() },
                Param::Scalar { name: "c".into(), wide: false },
            ]
        );
        let err = params("__global__ void k(real2* a) {}", &[("real2", "double2")]).unwrap_err();
        assert!(err.contains("kernel `k`, parameter `real2* a`") && err.contains("`real2` (a typedef of `double2`)"), "{err}");
        let err = params("__global__ void k(float* a, double s) {}", &[]).unwrap_err();
        assert!(err.contains("passes floats as f32"), "{err}");
    }

    #[test]
    fn typedefs_come_from_typedef_using_and_define() {
        let text = "typedef float floatX;\nusing idx_t = int;\n#define real floatX\ntypedef struct { int a; } S;\n";
        let pre = super::super::preprocess::preprocess(text, crate::manifest::Language::Cuda, &|_| None, &[]);
        let t = Typedefs::of(&pre);
        assert_eq!(t.resolve("real"), "float");
        assert_eq!(t.resolve("idx_t"), "int");
        assert_eq!(t.resolve("S"), "S");
    }
}
