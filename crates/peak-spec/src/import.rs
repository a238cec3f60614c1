//! Bringing a kernel in: a context scaffolded from an existing kernel source file.
//!
//! The kernel's signature says most of what a manifest needs: pointer parameters are
//! arrays (their element type from the C type, `const` ones read-only), integer
//! parameters are scalar inputs. What a signature cannot say (how long each array is,
//! which sizes to run, which written arrays are results rather than scratch) comes from
//! the caller: the CLI asks for it or takes flags, an agent passes it through MCP. The
//! launch script is a proposal, one thread per element of the first output in blocks of
//! BLOCK_X, that the user reads and adjusts; [`import_file`] writes the context only
//! into a fresh folder, and leaves nothing behind when it does not load as a whole.

use std::path::Path;

use indexmap::IndexMap;

use crate::context::Context;
use crate::manifest::{ArraySpec, Backend, Constraints, DType, Domain, Init, KernelSection, Manifest};
use crate::regions::Regions;

/// One parameter of a kernel's signature.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Param {
    /// A pointer to elements of `dtype`; `read_only` when declared `const`.
    Array { name: String, dtype: DType, read_only: bool },
    /// An integer passed by value.
    Scalar { name: String },
}

impl Param {
    pub fn name(&self) -> &str {
        match self {
            Param::Array { name, .. } | Param::Scalar { name } => name,
        }
    }
}

/// A kernel function found in a source file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelSignature {
    pub name: String,
    pub params: Vec<Param>,
}

/// What the signature cannot tell.
#[derive(Debug, Clone, Default)]
pub struct ImportChoices {
    /// Which kernel, when the file holds several.
    pub kernel: Option<String>,
    /// Element count of each array, as an expression over the scalar inputs.
    pub sizes: IndexMap<String, String>,
    /// The values each scalar input is run at.
    pub inputs: IndexMap<String, Vec<i64>>,
    /// The arrays whose contents are the kernel's result. Default: every array not
    /// declared `const`.
    pub outputs: Option<Vec<String>>,
    pub domain: Option<String>,
    pub description: Option<String>,
}

/// Scaffold a context from the kernel file `file` into `to`, a folder that must not exist
/// or be empty. Nothing is left behind on an error; a scaffold that does not load as a
/// context is an error too.
pub fn import_file(file: &Path, to: &Path, backend: Option<Backend>, choices: &ImportChoices) -> Result<Context, String> {
    let shown = file.display();
    let source = std::fs::read_to_string(file).map_err(|e| format!("{shown}: {e}"))?;
    let file_name = file.file_name().and_then(|n| n.to_str()).ok_or_else(|| format!("{shown}: not a file name"))?;
    let backend = backend.or_else(|| backend_of(file_name)).ok_or_else(|| format!("{shown}: the extension does not say the backend (.cu, .hip, .cl): give it"))?;
    if to.exists() && std::fs::read_dir(to).map(|mut d| d.next().is_some()).unwrap_or(true) {
        return Err(format!("{} exists and is not empty: choose a new folder", to.display()));
    }
    let (manifest, regions) = scaffold(&source, backend, file_name, choices).map_err(|e| format!("{shown}: {e}"))?;
    let ctx = Context { dir: to.to_path_buf(), manifest, regions };
    let written = ctx.save(to).map_err(|e| e.to_string()).and_then(|()| Context::load(to).map_err(|e| format!("the scaffolded context does not load ({e})")));
    if let Err(e) = written {
        let _ = std::fs::remove_dir_all(to);
        return Err(e);
    }
    Ok(ctx)
}

/// The backend a file's extension implies.
pub fn backend_of(file: &str) -> Option<Backend> {
    match file.rsplit_once('.')?.1 {
        "cu" | "cuh" => Some(Backend::Cuda),
        "hip" => Some(Backend::Hip),
        "cl" => Some(Backend::Opencl),
        _ => None,
    }
}

/// The kernel functions of `source`: `__global__` ones for CUDA and HIP, `__kernel` (or
/// `kernel`) ones for OpenCL.
pub fn find_kernels(source: &str, backend: Backend) -> Result<Vec<KernelSignature>, String> {
    let code = strip_comments(source);
    let markers: &[&str] = match backend {
        Backend::Cuda | Backend::Hip => &["__global__"],
        Backend::Opencl => &["__kernel", "kernel"],
        Backend::Hlsl => return Err("importing HLSL compute shaders is not supported yet: their buffers are globals, not parameters".into()),
    };
    let mut kernels = Vec::new();
    let mut rest = code.as_str();
    while let Some(at) = markers.iter().filter_map(|m| find_word(rest, m).map(|i| (i, m.len()))).min() {
        let after = &rest[at.0 + at.1..];
        let open = after.find('(').ok_or("a kernel declaration without a parameter list")?;
        let close = open + after[open..].find(')').ok_or("a kernel parameter list without ')'")?;
        let name = after[..open].split_whitespace().last().unwrap_or_default().to_string();
        let params = after[open + 1..close]
            .split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty() && *p != "void")
            .map(|p| parse_param(p).map_err(|e| format!("kernel `{name}`, parameter `{p}`: {e}")))
            .collect::<Result<Vec<_>, _>>()?;
        kernels.push(KernelSignature { name, params });
        rest = &after[close..];
    }
    Ok(kernels)
}

/// The manifest and regions of a context for the chosen kernel of `source`. Errors say
/// what is missing and the flag that gives it.
pub fn scaffold(source: &str, backend: Backend, file_name: &str, choices: &ImportChoices) -> Result<(Manifest, Regions), String> {
    let kernels = find_kernels(source, backend)?;
    let names = || kernels.iter().map(|k| k.name.as_str()).collect::<Vec<_>>().join(", ");
    let kernel = match (&choices.kernel, kernels.as_slice()) {
        (_, []) => return Err(format!("{file_name} holds no {backend} kernel function")),
        (None, [one]) => one,
        (None, _) => return Err(format!("{file_name} holds several kernels ({}): choose one with --kernel", names())),
        (Some(wanted), _) => kernels.iter().find(|k| &k.name == wanted).ok_or_else(|| format!("{file_name} has no kernel `{wanted}` (it has: {})", names()))?,
    };
    let arrays: Vec<&Param> = kernel.params.iter().filter(|p| matches!(p, Param::Array { .. })).collect();
    let scalars: Vec<&str> = kernel.params.iter().filter(|p| matches!(p, Param::Scalar { .. })).map(Param::name).collect();
    if arrays.is_empty() {
        return Err(format!("kernel `{}` takes no array: there would be nothing to check", kernel.name));
    }
    let known = |name: &str| kernel.params.iter().any(|p| p.name() == name);
    for name in choices.sizes.keys().chain(choices.inputs.keys()).chain(choices.outputs.iter().flatten()) {
        if !known(name) {
            return Err(format!("kernel `{}` has no parameter `{name}`", kernel.name));
        }
    }
    // Everything missing at once, each with the flag that gives it.
    let mut missing = Vec::new();
    let missing_sizes: Vec<&str> = arrays.iter().map(|a| a.name()).filter(|a| !choices.sizes.contains_key(*a)).collect();
    if !missing_sizes.is_empty() {
        let example = missing_sizes.iter().map(|a| format!("--size {a}=EXPR")).collect::<Vec<_>>().join(" ");
        missing.push(format!("the length of {} (an expression over the scalar inputs): {example}", missing_sizes.join(", ")));
    }
    let missing_inputs: Vec<&str> = scalars.iter().copied().filter(|s| !choices.inputs.contains_key(*s)).collect();
    if !missing_inputs.is_empty() {
        let example = missing_inputs.iter().map(|s| format!("--input {s}=256,1024")).collect::<Vec<_>>().join(" ");
        missing.push(format!("the values to run {} at: {example}", missing_inputs.join(", ")));
    }
    if !missing.is_empty() {
        return Err(format!("the signature of `{}` does not say {}", kernel.name, missing.join("; nor ")));
    }

    let is_output = |p: &Param| match (&choices.outputs, p) {
        (Some(list), _) => list.iter().any(|o| o == p.name()),
        (None, Param::Array { read_only, .. }) => !read_only,
        (None, Param::Scalar { .. }) => false,
    };
    let mut seed = 0;
    let arrays: Vec<ArraySpec> = arrays
        .iter()
        .map(|p| {
            let Param::Array { name, dtype, read_only } = p else { unreachable!("filtered to arrays") };
            let output = is_output(p);
            seed += u64::from(!output);
            ArraySpec {
                name: name.clone(),
                dtype: *dtype,
                size: choices.sizes[name].clone(),
                init: if output { Init::Zeros } else { Init::Random },
                seed: (!output).then_some(seed),
                output,
                // Written but not a result: scratch the kernel may change.
                inout: !output && !read_only,
            }
        })
        .collect();
    let first_output = arrays.iter().find(|a| a.output).ok_or("no array is an output: name the result with --output")?;
    let manifest = Manifest {
        kernel: KernelSection {
            name: kernel.name.clone(),
            backend,
            source: file_name.to_string(),
            flops: None,
            matmul: None,
            pattern: None,
            domain: choices.domain.clone(),
            description: choices.description.clone(),
            roles: IndexMap::new(),
            library: None,
        },
        inputs: scalars.iter().map(|s| (s.to_string(), Domain::values(choices.inputs[*s].clone()))).collect(),
        arrays: arrays.clone(),
        tuning: [("BLOCK_X".to_string(), Domain { pow2: Some([32, 1024]), ..Domain::default() })].into_iter().collect(),
        constraints: Constraints::default(),
        tolerance: None,
        validation: Default::default(),
    };
    let args: Vec<&str> = kernel.params.iter().map(Param::name).collect();
    let host = format!(
        "// Proposed by `peak new`: one thread per element of {out}, BLOCK_X threads per block.\n\
         // Adjust the grid to what the kernel expects (a 2-D grid, one block per row, ...).\n\
         launch(\"{name}\", ceil_div({size}, BLOCK_X), BLOCK_X, 0, {args});\n",
        out = first_output.name,
        size = first_output.size,
        name = kernel.name,
        args = args.join(", ")
    );
    let device = match backend {
        Backend::Cuda | Backend::Hip => with_c_linkage(source, &kernel.name),
        _ => source.to_string(),
    };
    Ok((manifest, Regions::new("", device.trim_end().to_string() + "\n", host)))
}

/// `source` with `extern "C"` before the `__global__` of kernel `name` where it lacks it:
/// peak finds kernels by name, and a C++ kernel exists only under its mangled name.
fn with_c_linkage(source: &str, name: &str) -> String {
    let mut from = 0;
    while let Some(at) = find_word(&source[from..], "__global__").map(|i| i + from) {
        let head = &source[at..];
        let declares = head.find('(').is_some_and(|open| head[..open].split_whitespace().last() == Some(name));
        if declares && !source[..at].trim_end().ends_with("extern \"C\"") {
            return format!("{}extern \"C\" {}", &source[..at], head);
        }
        from = at + "__global__".len();
    }
    source.to_string()
}

fn parse_param(text: &str) -> Result<Param, String> {
    let words: Vec<&str> = text.split(|c: char| c.is_whitespace() || c == '*').filter(|w| !w.is_empty()).collect();
    let name = words.last().ok_or("empty parameter")?.trim_end_matches(']').to_string();
    let qualifiers = ["const", "__restrict__", "__restrict", "restrict", "__global", "global", "__constant", "constant", "volatile", "unsigned", "signed"];
    let types: Vec<&str> = words[..words.len() - 1].iter().copied().filter(|w| !qualifiers.contains(w)).collect();
    let pointer = text.contains('*') || text.contains('[');
    let read_only = words.contains(&"const") && pointer || words.contains(&"__constant") || words.contains(&"constant");
    let unsigned = words.contains(&"unsigned");
    let ty = types.join(" ");
    if pointer {
        let dtype = match (ty.as_str(), unsigned) {
            ("float", _) => DType::F32,
            ("__half" | "half" | "_Float16", _) => DType::F16,
            ("__nv_bfloat16" | "__hip_bfloat16" | "bfloat16", _) => DType::Bf16,
            ("int" | "int32_t", false) => DType::I32,
            ("int", true) | ("" | "uint" | "uint32_t", _) => DType::U32,
            (other, _) => return Err(format!("element type `{other}` is not one peak generates (f32, f16, bf16, i32, u32)")),
        };
        return Ok(Param::Array { name, dtype, read_only });
    }
    match ty.as_str() {
        "int" | "" | "uint" | "int32_t" | "uint32_t" | "size_t" | "long" | "long long" | "int64_t" => Ok(Param::Scalar { name }),
        other => Err(format!("a scalar of type `{other}`: peak's scalar inputs are integers; make it a constant in the kernel, or an integer parameter")),
    }
}

/// `text` with `//` and `/* */` comments blanked out, so commented-out kernels and
/// parameters are not read.
fn strip_comments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix("//") {
            let end = after.find('\n').unwrap_or(after.len());
            rest = &after[end..];
        } else if let Some(after) = rest.strip_prefix("/*") {
            let end = after.find("*/").map_or(after.len(), |e| e + 2);
            out.push(' ');
            rest = &after[end..];
        } else {
            let c = rest.chars().next().expect("non-empty");
            out.push(c);
            rest = &rest[c.len_utf8()..];
        }
    }
    out
}

/// The byte offset of `word` in `text` where it stands alone (not part of a longer name).
fn find_word(text: &str, word: &str) -> Option<usize> {
    let is_name = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut from = 0;
    while let Some(i) = text[from..].find(word).map(|i| i + from) {
        let before = text[..i].chars().next_back().is_none_or(|c| !is_name(c));
        let after = text[i + word.len()..].chars().next().is_none_or(|c| !is_name(c));
        if before && after {
            return Some(i);
        }
        from = i + word.len();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    const SOFTMAX: &str = r#"
// A row softmax. __global__ void commented_out(float* x) {}
extern "C" __global__ void softmax(const float* __restrict__ x, float* __restrict__ y, int rows, int cols) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
}
/* __global__ void also_not(int* z) */
"#;

    #[test]
    fn signatures_give_arrays_and_scalar_inputs() {
        let kernels = find_kernels(SOFTMAX, Backend::Cuda).unwrap();
        assert_eq!(kernels.len(), 1, "commented-out kernels are not read: {kernels:?}");
        assert_eq!(
            kernels[0].params,
            vec![
                Param::Array { name: "x".into(), dtype: DType::F32, read_only: true },
                Param::Array { name: "y".into(), dtype: DType::F32, read_only: false },
                Param::Scalar { name: "rows".into() },
                Param::Scalar { name: "cols".into() },
            ]
        );
        let cl = "__kernel void t(__global const half *a, __global unsigned int *b, const int n) {}";
        let k = &find_kernels(cl, Backend::Opencl).unwrap()[0];
        assert_eq!(k.params[0], Param::Array { name: "a".into(), dtype: DType::F16, read_only: true });
        assert_eq!(k.params[1], Param::Array { name: "b".into(), dtype: DType::U32, read_only: false });
        assert_eq!(k.params[2], Param::Scalar { name: "n".into() });
        let err = find_kernels("__global__ void k(double* a) {}", Backend::Cuda).unwrap_err();
        assert!(err.contains("kernel `k`") && err.contains("`double`"), "{err}");
        let err = find_kernels("__global__ void k(float* a, float scale) {}", Backend::Cuda).unwrap_err();
        assert!(err.contains("scalar inputs are integers"), "{err}");
    }

    #[test]
    fn a_scaffold_asks_for_what_the_signature_lacks() {
        let mut choices = ImportChoices::default();
        let err = scaffold(SOFTMAX, Backend::Cuda, "softmax.cu", &choices).unwrap_err();
        assert!(err.contains("--size x=EXPR --size y=EXPR") && err.contains("--input rows=256,1024 --input cols=256,1024"), "everything missing at once: {err}");
        choices.sizes = [("x", "rows * cols"), ("y", "rows * cols")].map(|(a, s)| (a.to_string(), s.to_string())).into_iter().collect();
        let err = scaffold(SOFTMAX, Backend::Cuda, "softmax.cu", &choices).unwrap_err();
        assert!(err.contains("--input rows=256,1024 --input cols=256,1024"), "{err}");
        choices.inputs = [("rows".to_string(), vec![64]), ("cols".to_string(), vec![128, 256])].into_iter().collect();
        choices.domain = Some("softmax".into());
        let (manifest, regions) = scaffold(SOFTMAX, Backend::Cuda, "softmax.cu", &choices).unwrap();
        assert_eq!(manifest.kernel.domain(), Some("softmax"));
        assert_eq!((manifest.arrays[0].output, manifest.arrays[0].init), (false, Init::Random));
        assert_eq!((manifest.arrays[1].output, manifest.arrays[1].init), (true, Init::Zeros));
        assert_eq!(manifest.inputs["cols"].expand().unwrap(), vec![128, 256]);
        assert!(regions.get(crate::Region::Host).contains("launch(\"softmax\", ceil_div(rows * cols, BLOCK_X), BLOCK_X, 0, x, y, rows, cols);"));
        manifest.validate("peak.toml").unwrap();

        let plain = scaffold("__global__ void k(float* y, int n) {}", Backend::Cuda, "k.cu", &ImportChoices {
            sizes: [("y".to_string(), "n".to_string())].into_iter().collect(),
            inputs: [("n".to_string(), vec![64])].into_iter().collect(),
            ..ImportChoices::default()
        });
        assert_eq!(plain.unwrap().1.get(crate::Region::Device), "extern \"C\" __global__ void k(float* y, int n) {}\n", "peak finds kernels by their C name");
        assert_eq!(regions.get(crate::Region::Device).matches("extern \"C\"").count(), 1, "an extern \"C\" kernel is left as it is");

        choices.outputs = Some(vec!["nope".into()]);
        assert!(scaffold(SOFTMAX, Backend::Cuda, "softmax.cu", &choices).unwrap_err().contains("no parameter `nope`"));
    }
}
