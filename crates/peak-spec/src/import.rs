//! Bringing a kernel in: a context scaffolded from an existing kernel source file.
//!
//! A kernel file as people have it holds more than the kernel: host headers, a `main`,
//! a CPU reference, launcher functions, other kernels, typedefs in a local header. The
//! import reads it the way the compiler would, as far as it needs to
//! ([`preprocess`]: local headers inlined, `#if` groups decided where they can be), keeps
//! the chosen kernel and what it uses ([`select`], by what each piece declares
//! ([`declare`]): device functions, types, constants, macros; `#include`s NVRTC cannot
//! find left out, each thing left out named in a note),
//! and reads the kernel's signature with the file's typedefs followed ([`signature`]).
//!
//! The signature says most of what a manifest needs: pointer parameters are arrays (their
//! element type from the C type; those the kernel writes are outputs), integer parameters
//! are scalar inputs, float parameters fixed values written into the launch. What a
//! signature cannot say (how long each array is, which sizes to run, each float's value,
//! which written arrays are results) comes from the caller: the CLI asks for it or takes
//! flags, an agent
//! passes it through MCP. The launch script is a proposal read from the kernel's own index
//! and bound checks ([`launch`]), which says in the host region what it read; the user
//! reads and adjusts it. [`import_file`] writes the context only into a fresh folder, and
//! leaves nothing behind when it does not load as a whole.

mod declare;
mod flags;
mod launch;
mod preprocess;
pub(crate) mod scan;
mod select;
mod signature;

use std::path::Path;

use indexmap::IndexMap;

pub use flags::{array_shaping, matmul_shape, tolerance};
pub use preprocess::ReadHeader;
pub use signature::Param;

use crate::context::Context;
use crate::manifest::{ArraySpec, Constraints, DType, Domain, Init, KernelSection, Language, Manifest, MatmulShape, Tolerance, Validation};
use crate::pattern::Pattern;
use crate::regions::Regions;
use declare::{Declaration, Role};
use preprocess::Preprocessed;
use signature::Typedefs;

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
    /// The values each integer parameter (scalar input) is run at.
    pub inputs: IndexMap<String, Vec<i64>>,
    /// The value of each float parameter, written into the launch.
    pub scalars: IndexMap<String, f64>,
    /// The arrays whose contents are the kernel's result. Default: every array the kernel
    /// writes (not declared `const`, and not only read element by element).
    pub outputs: Option<Vec<String>>,
    pub domain: Option<String>,
    pub description: Option<String>,
    /// Sizes to check correctness at (`[validation.inputs]`), apart from `inputs`.
    pub validation: IndexMap<String, Vec<i64>>,
    /// The library call computing the same outputs (`[kernel] library`), for benchmarks.
    pub library: Option<String>,
    /// How input arrays are drawn: per array, keys of its `[[arrays]]` table (`init`,
    /// `scale`, `offset`, `range`, `outliers`, `seed`) laid over the import's defaults.
    pub shaping: IndexMap<String, toml::Table>,
    /// Relative-error tolerances (`[tolerance]`), where the defaults do not fit.
    pub tolerance: Option<Tolerance>,
    /// What the kernel does, when reading its code would not say or would say wrong.
    pub pattern: Option<Pattern>,
    /// The GEMM the kernel computes (`[kernel.matmul]`): layouts, epilogue, batch.
    pub matmul: Option<MatmulShape>,
}

/// A scaffolded context, and what the import did to the kernel file to get it (headers
/// left out, code left out); the host region says what its launch was read from.
#[derive(Debug, Clone)]
pub struct Imported {
    pub manifest: Manifest,
    pub regions: Regions,
    pub notes: Vec<String>,
}

/// Scaffold a context from the kernel file `file` into `to`, a folder that must not exist
/// or be empty. Local headers (`#include "x.h"`) are read next to `file`. Nothing is left
/// behind on an error; a scaffold that does not load as a context is an error too.
pub fn import_file(file: &Path, to: &Path, backend: Option<Language>, choices: &ImportChoices) -> Result<(Context, Vec<String>), String> {
    let shown = file.display();
    let source = std::fs::read_to_string(file).map_err(|e| format!("{shown}: {e}"))?;
    let file_name = file.file_name().and_then(|n| n.to_str()).ok_or_else(|| format!("{shown}: not a file name"))?;
    let backend =
        backend.or_else(|| backend_of(file_name)).ok_or_else(|| format!("{shown}: the extension does not say the backend (.cu, .hip, .cl): give it"))?;
    if to.exists() && std::fs::read_dir(to).map(|mut d| d.next().is_some()).unwrap_or(true) {
        return Err(format!("{} exists and is not empty: choose a new folder", to.display()));
    }
    let dir = file.parent().unwrap_or(Path::new("")).to_path_buf();
    let read = move |header: &Path| std::fs::read_to_string(dir.join(header)).ok();
    let imported = scaffold(&source, backend, file_name, &read, choices).map_err(|e| format!("{shown}: {e}"))?;
    let ctx = Context { dir: to.to_path_buf(), manifest: imported.manifest, regions: imported.regions };
    let written = ctx.save(to).map_err(|e| e.to_string()).and_then(|()| Context::load(to).map_err(|e| format!("the scaffolded context does not load ({e})")));
    if let Err(e) = written {
        let _ = std::fs::remove_dir_all(to);
        return Err(e);
    }
    Ok((ctx, imported.notes))
}

/// The backend a file's extension implies.
pub fn backend_of(file: &str) -> Option<Language> {
    match file.rsplit_once('.')?.1 {
        "cu" | "cuh" => Some(Language::Cuda),
        "hip" => Some(Language::Hip),
        "cl" => Some(Language::Opencl),
        _ => None,
    }
}

/// The signature of the kernel of `file` that [`import_file`] would bring in: `kernel`,
/// or the file's only one.
pub fn read_signature(file: &Path, backend: Language, kernel: Option<&str>) -> Result<KernelSignature, String> {
    let source = std::fs::read_to_string(file).map_err(|e| format!("{}: {e}", file.display()))?;
    let dir = file.parent().unwrap_or(Path::new("")).to_path_buf();
    let read = move |header: &Path| std::fs::read_to_string(dir.join(header)).ok();
    let parsed = Parsed::new(&source, backend, &read)?;
    let (at, name) = parsed.choose(kernel, &file.display().to_string())?;
    Ok(KernelSignature { name: name.to_string(), params: parsed.parameters(at, name)? })
}

/// The names of the kernel functions of `source` (`__global__` ones for CUDA and HIP,
/// `__kernel` ones for OpenCL), in the order they appear; local headers come from `read`.
pub fn kernel_names(source: &str, backend: Language, read: ReadHeader) -> Result<Vec<String>, String> {
    Ok(Parsed::new(source, backend, read)?.kernels.into_iter().map(|(_, name)| name).collect())
}

/// A kernel file after the preprocessor pass, with what each piece declares.
struct Parsed {
    pre: Preprocessed,
    decls: Vec<Declaration>,
    /// Each kernel's piece and name.
    kernels: Vec<(usize, String)>,
    typedefs: Typedefs,
}

impl Parsed {
    fn new(source: &str, backend: Language, read: ReadHeader) -> Result<Parsed, String> {
        if backend == Language::Hlsl {
            return Err("importing HLSL compute shaders is not supported yet: their buffers are globals, not parameters".into());
        }
        let pre = preprocess::preprocess(source, backend, read, &["BLOCK_X", "BLOCK_Y", "BLOCK_Z"]);
        let decls = select::declarations(&pre, backend);
        let kernels = decls.iter().enumerate().filter(|(_, d)| d.role == Role::Kernel).flat_map(|(i, d)| d.names.iter().map(move |n| (i, n.clone()))).collect();
        let typedefs = Typedefs::of(&pre);
        Ok(Parsed { pre, decls, kernels, typedefs })
    }

    /// The piece and name of the kernel to bring in.
    fn choose(&self, wanted: Option<&str>, file_name: &str) -> Result<(usize, &str), String> {
        let names = || self.kernels.iter().map(|(_, n)| n.as_str()).collect::<Vec<_>>().join(", ");
        match (wanted, self.kernels.as_slice()) {
            (_, []) => Err(format!("{file_name} holds no kernel function")),
            (None, [(at, one)]) => Ok((*at, one)),
            (None, _) => Err(format!("{file_name} holds several kernels ({}): choose one with --kernel", names())),
            (Some(w), _) => self
                .kernels
                .iter()
                .find(|(_, n)| n == w)
                .map(|(at, n)| (*at, n.as_str()))
                .ok_or_else(|| format!("{file_name} has no kernel `{w}` (it has: {})", names())),
        }
    }

    fn parameters(&self, at: usize, name: &str) -> Result<Vec<Param>, String> {
        signature::parameters(&self.pre.pieces[at].code, &self.typedefs).map_err(|e| if e.contains(name) { e } else { format!("kernel `{name}`: {e}") })
    }
}

/// The manifest and regions of a context for the chosen kernel of `source`, whose local
/// headers come from `read`. Errors say what is missing and the flag that gives it.
pub fn scaffold(source: &str, backend: Language, file_name: &str, read: ReadHeader, choices: &ImportChoices) -> Result<Imported, String> {
    let parsed = Parsed::new(source, backend, read)?;
    let (at, name) = parsed.choose(choices.kernel.as_deref(), file_name)?;
    let code = &parsed.pre.pieces[at].code;
    if code.trim_start().starts_with("template") {
        return Err(format!(
            "kernel `{name}` is a template: peak launches kernels by their C name, which a template has not; add a kernel that calls it with its template arguments, and bring that one in"
        ));
    }
    let params = parsed.parameters(at, name)?;
    check_choices(name, &params, choices)?;

    let mut seed = 0;
    let mut arrays = Vec::new();
    // Outputs the kernel also reads are in place (output and inout): each run starts them
    // from a random init of their own, as the reference's run does, and nothing is copied
    // inside the timed run.
    let mut in_place = Vec::new();
    // Not `const` is not written: OpenCL code rarely says `const`. Where the body shows no
    // write at all (it writes through a macro peak does not expand), every array not
    // declared `const` may be written.
    let seen = |array: &str| launch::writes(code, array);
    let any_seen = params.iter().any(|p| matches!(p, Param::Array { name, read_only: false, .. } if seen(name)));
    for p in &params {
        let Param::Array { name: array, dtype, read_only } = p else { continue };
        let written = !read_only && (seen(array) || !any_seen);
        let output = choices.outputs.as_ref().map_or(written, |list| list.contains(array));
        seed += u64::from(!output);
        arrays.push(array_spec(array, *dtype, &choices.sizes[array], output, !output && written, seed));
        if output && launch::reads(code, array) {
            in_place.push(array.clone());
        }
    }
    // Their seeds follow the inputs', so that an input's seed does not depend on them.
    for array in &in_place {
        seed += 1;
        let spec = arrays.iter_mut().find(|a| &a.name == array).expect("an array of the kernel");
        *spec = ArraySpec { init: Init::Random, seed: Some(seed), inout: true, ..spec.clone() };
    }
    for (array, keys) in &choices.shaping {
        let spec = arrays.iter_mut().find(|a| &a.name == array).expect("check_choices named an array");
        *spec = flags::shaped(spec, keys).map_err(|e| format!("--init {array}: {e}"))?;
    }
    let first_output = arrays.iter().find(|a| a.output).ok_or("no array is an output: name the result with --output")?;
    let inputs: Vec<&str> = params.iter().filter(|p| matches!(p, Param::Scalar { .. })).map(Param::name).collect();
    let proposal = launch::propose(code, backend, name, &inputs, launch::Covered { name: &first_output.name, size: &first_output.size });
    let selection = select::select(&parsed.pre, &parsed.decls, at, backend, file_name);
    let host = host_region(name, code, &params, choices, &proposal, &in_place);
    let mut notes = selection.notes;
    // The pattern is written down where the kind given does not imply one, so the user
    // reads (and can correct) what transformations will be offered for.
    let implied = choices.domain.as_deref().and_then(Pattern::of_kind).or(choices.matmul.as_ref().map(|_| Pattern::Gemm));
    let pattern = match (choices.pattern, implied) {
        (Some(given), _) => Some(given),
        (None, Some(_)) => None,
        (None, None) => match crate::pattern::infer(&selection.device) {
            Ok(inferred) => {
                notes.push(format!("pattern {} read off the code ({}); correct [kernel] pattern if it is wrong", inferred.pattern, inferred.evidence));
                Some(inferred.pattern)
            }
            Err(why) => {
                notes.push(format!("no pattern: {why}"));
                None
            }
        },
    };

    let manifest = Manifest {
        kernel: KernelSection {
            name: name.to_string(),
            backend,
            source: file_name.to_string(),
            flops: choices.matmul.as_ref().map(MatmulShape::flops),
            matmul: choices.matmul.clone(),
            pattern,
            domain: choices.domain.clone(),
            description: choices.description.clone(),
            roles: IndexMap::new(),
            library: choices.library.clone(),
        },
        inputs: inputs
            .iter()
            .copied()
            .chain(choices.inputs.keys().map(String::as_str).filter(|name| sizing_only(&params, choices, name)))
            .map(|s| (s.to_string(), Domain::values(choices.inputs[s].clone())))
            .collect(),
        scalars: params.iter().filter(|p| matches!(p, Param::Float { .. })).map(|p| (p.name().to_string(), choices.scalars[p.name()])).collect(),
        shapes: Vec::new(),
        inputs_from_shapes: false,
        arrays,
        tuning: proposal.tuning.into_iter().collect(),
        constraints: Constraints { inputs: vec![], tuning: proposal.constraints },
        tolerance: choices.tolerance.clone(),
        validation: Validation { inputs: choices.validation.iter().map(|(name, values)| (name.clone(), Domain::values(values.clone()))).collect() },
    };
    Ok(Imported { manifest, regions: Regions::new(selection.macros, selection.device, host), notes })
}

fn array_spec(name: &str, dtype: DType, size: &str, output: bool, inout: bool, seed: u64) -> ArraySpec {
    ArraySpec {
        name: name.to_string(),
        dtype,
        size: size.to_string(),
        init: if output { Init::Zeros } else { Init::Random },
        seed: (!output).then_some(seed),
        output,
        // Written but not a result: scratch the kernel may change.
        inout,
    }
}

/// Every choice names a parameter of the right kind, and nothing the signature lacks is
/// missing; else one error listing everything missing, each with the flag that gives it.
fn check_choices(kernel: &str, params: &[Param], choices: &ImportChoices) -> Result<(), String> {
    let of_kind = |f: fn(&Param) -> bool| params.iter().filter(|p| f(p)).map(Param::name).collect::<Vec<_>>();
    let arrays = of_kind(|p| matches!(p, Param::Array { .. }));
    let integers = of_kind(|p| matches!(p, Param::Scalar { .. }));
    let floats = of_kind(|p| matches!(p, Param::Float { .. }));
    if arrays.is_empty() {
        return Err(format!("kernel `{kernel}` takes no array: there would be nothing to check"));
    }
    let given: [(&str, Vec<&String>, &Vec<&str>, &str); 6] = [
        ("--size", choices.sizes.keys().collect(), &arrays, "an array"),
        ("--input", choices.inputs.keys().collect(), &integers, "an integer parameter"),
        ("--validate", choices.validation.keys().collect(), &integers, "an integer parameter"),
        ("--scalar", choices.scalars.keys().collect(), &floats, "a float parameter"),
        ("--output", choices.outputs.iter().flatten().collect(), &arrays, "an array"),
        ("--init", choices.shaping.keys().collect(), &arrays, "an array"),
    ];
    for (flag, names, allowed, what) in given {
        for name in names {
            if matches!(flag, "--input" | "--validate") && sizing_only(params, choices, name) {
                continue;
            }
            if !params.iter().any(|p| p.name() == name) {
                if matches!(flag, "--input" | "--validate") {
                    return Err(format!(
                        "kernel `{kernel}` has no parameter `{name}`, and no --size or --init names it: an input that is no parameter (a vocabulary size) must size an array or bound its values"
                    ));
                }
                return Err(format!("kernel `{kernel}` has no parameter `{name}`"));
            }
            if !allowed.contains(&name.as_str()) {
                return Err(format!("{flag} {name}: `{name}` is not {what} of kernel `{kernel}` ({})", describe(params, name)));
            }
        }
    }
    if let Some((name, value)) = choices.scalars.iter().find(|(_, v)| !v.is_finite()) {
        return Err(format!("--scalar {name}={value}: a float parameter's value must be a finite number"));
    }
    let missing_of = |names: &[&str], given: &dyn Fn(&str) -> bool, flag: &str, value: &str| {
        let missing: Vec<&str> = names.iter().copied().filter(|n| !given(n)).collect();
        let flags = missing.iter().map(|n| format!("{flag} {n}={value}")).collect::<Vec<_>>().join(" ");
        (missing.join(", "), flags)
    };
    let mut missing = Vec::new();
    let (names, flags) = missing_of(&arrays, &|n| choices.sizes.contains_key(n), "--size", "EXPR");
    if !names.is_empty() {
        missing.push(format!("the length of {names} (an expression over the scalar inputs): {flags}"));
    }
    let (names, flags) = missing_of(&integers, &|n| choices.inputs.contains_key(n), "--input", "256,1024");
    if !names.is_empty() {
        missing.push(format!("the values to run {names} at: {flags}"));
    }
    let (names, flags) = missing_of(&floats, &|n| choices.scalars.contains_key(n), "--scalar", "VALUE");
    if !names.is_empty() {
        missing.push(format!("the value of float parameter {names}: {flags}"));
    }
    if missing.is_empty() { Ok(()) } else { Err(format!("the signature of `{kernel}` does not say {}", missing.join("; nor "))) }
}

/// Whether `name` is an input that is no parameter of the kernel but sizes an array or
/// bounds its values (a gather's table of V rows: `--size wte=V*C`, `--init inp=range = [0,
/// "V"]`): the launch never passes it, the manifest needs it.
fn sizing_only(params: &[Param], choices: &ImportChoices, name: &str) -> bool {
    let names = |text: &str| text.split(|ch: char| !(ch.is_ascii_alphanumeric() || ch == '_')).any(|word| word == name);
    !params.iter().any(|p| p.name() == name)
        && (choices.sizes.values().any(|size| names(size)) || choices.shaping.values().any(|keys| names(&keys.to_string())))
}

/// What kind of parameter `name` is, for an error that names the right flag.
fn describe(params: &[Param], name: &str) -> &'static str {
    match params.iter().find(|p| p.name() == name) {
        Some(Param::Array { .. }) => "it is an array: give its length with --size",
        Some(Param::Scalar { .. }) => "it is an integer parameter: give its values with --input",
        Some(Param::Float { .. }) => "it is a float parameter: give its value with --scalar",
        None => "no such parameter",
    }
}

/// The proposed launch script for the kernel whose masked code is `code`: what it was
/// read from, the float values, the outputs the kernel updates in place, the launch.
fn host_region(kernel: &str, code: &str, params: &[Param], choices: &ImportChoices, proposal: &launch::Proposal, in_place: &[String]) -> String {
    let mut lines: Vec<String> = proposal.comment.iter().map(|c| format!("// {c}")).collect();
    let floats: Vec<String> =
        params.iter().filter(|p| matches!(p, Param::Float { .. })).map(|p| format!("{} = {}", p.name(), float_literal(choices.scalars[p.name()]))).collect();
    if !floats.is_empty() {
        lines.push(format!("// Float parameters, passed by name from [scalars] in peak.toml (given with --scalar): {}.", floats.join(", ")));
    }
    for array in in_place {
        lines.push(format!(
            "// The kernel reads {array} as well as writing it: in place (output and inout in peak.toml), every run starts it from its random init."
        ));
    }
    let args: Vec<String> = params
        .iter()
        .map(|p| match p {
            Param::Array { name, .. } | Param::Scalar { name, wide: false } | Param::Float { name } => name.clone(),
            Param::Scalar { name, wide: true } => format!("i64({name})"),
        })
        .collect();
    let threads = proposal.block.trim_matches(['[', ']']).replace(", ", " * ");
    let shared = match launch::dynamic_shared(code, &threads) {
        Some((bytes, why)) => {
            lines.insert(proposal.comment.len(), format!("// {why}"));
            bytes
        }
        None => "0".to_string(),
    };
    lines.push(format!("launch(\"{kernel}\", {}, {}, {shared}, {});", proposal.grid, proposal.block, args.join(", ")));
    lines.join("\n") + "\n"
}

/// `v` as a launch-script float literal, which the script passes to the kernel as f32:
/// always with a decimal point (`1.0`, `1.0e-5`), so it is never read as an integer.
fn float_literal(v: f64) -> String {
    let text = format!("{v:?}");
    match text.split_once('e') {
        Some((mantissa, exponent)) if !mantissa.contains('.') => format!("{mantissa}.0e{exponent}"),
        _ if !text.contains(['.', 'e']) => format!("{text}.0"),
        _ => text,
    }
}

#[cfg(test)]
mod tests;
