//! The manifest, `peak.toml`: what a kernel takes, how to fill it, what to tune.
//!
//! ```toml
//! [kernel]
//! name = "matmul"
//! backend = "opencl"
//! source = "kernel.cl"
//! flops = "2 * n * n * n"          # optional: lets reports say FLOP/s
//! pattern = "gemm"                  # optional: what the kernel does; transformations check it
//! domain = "matmul"                 # optional: the kind of kernel, in your words
//! description = "C = A x B, ..."    # optional: what the kernel computes, for prompts
//!
//! [kernel.roles]                    # optional: this context's names for a transformation's
//! BLOCK_X = "BX"                    # roles (a transformation requiring BLOCK_X uses BX)
//!
//! [kernel.matmul]                   # optional: marks a matmul-shaped context (vendor baseline)
//! m = "n"
//! n = "n"
//! k = "n"
//! a = "A"
//! b = "B"
//! c = "C"
//!
//! [inputs]
//! n = { values = [256, 512, 1024] }
//!
//! [scalars]                         # optional: float values the launch script sees by name
//! # eps = 1e-5                      # (`launch(..., eps)` passes an f32 kernel argument)
//!
//! # Or, instead of the product of the inputs' values, the shapes to tune at, one table
//! # each (see `crate::shapes`): `[inputs]` may then be left out.
//! # [[shapes]]
//! # n = 256
//!
//! [[arrays]]
//! name = "A"
//! type = "f32"
//! size = "n * n"
//! init = "random"
//! seed = 1
//!
//! [[arrays]]
//! name = "C"
//! type = "f32"
//! size = "n * n"
//! init = "zeros"
//! output = true
//!
//! [tuning]
//! BLOCK_X = { pow2 = [1, 32] }
//! BLOCK_Y = { range = [1, 32], step = 1 }
//!
//! [constraints]
//! inputs = ["n % 16 == 0"]
//! tuning = ["BLOCK_X * BLOCK_Y <= 1024"]
//!
//! [tolerance]
//! f32 = 1e-5
//! accumulation = "n"
//! ```
//!
//! An array's `init` is `zeros`, `ones`, `arange`, `random` (floats uniform in [-1, 1),
//! i32 in [-100, 100], u32 in [0, 100]), `uniform` or `normal`, and some take keys beside it
//! to shape test inputs (details in [`crate::init`]):
//!
//! ```toml
//! [[arrays]]                        # a softmax input whose rows are not all alike
//! name = "X"
//! type = "f32"
//! size = "rows * cols"
//! init = "normal"                   # offset + scale * N(0, 1); "uniform": offset + scale * U[0, 1)
//! scale = 1.0                       # optional, default 1 (uniform and normal only)
//! offset = 0.0                      # optional, default 0 (uniform and normal only)
//! outliers = { row = "cols", count = 2, scale = 20.0 }  # float arrays: in every row of `cols`
//!                                   # elements, 2 entries chosen by the seed are multiplied by 20
//! seed = 1
//!
//! [[arrays]]                        # labels for a cross-entropy over V classes
//! name = "labels"
//! type = "i32"
//! size = "rows"
//! init = "random"
//! range = [0, "V"]                  # i32 and u32: drawn from [0, V), the high end excluded
//! ```
//!
//! Parsing is strict (`deny_unknown_fields`): a misspelt key is an error naming the file
//! and line, never a silently ignored setting. A setting that does not fit its array
//! (`scale` on zeros, `range` on a float array, more outliers than a row holds) is an error
//! naming the field, such as `arrays[2].scale`. Inputs and tuning parameters keep their
//! document order, which fixes the iteration order of the execution-parameter space.

use std::fmt;
use std::str::FromStr;

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};

use crate::pattern::Pattern;

/// The whole manifest as written on disk.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    pub kernel: KernelSection,
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    pub inputs: IndexMap<String, Domain>,
    /// Named shapes (`[[shapes]]`): when given, the input space is exactly these tuples, in
    /// order, rather than the product of the inputs' values ([`crate::shapes`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub shapes: Vec<IndexMap<String, i64>>,
    /// Float values the launch script sees by name (`[scalars]`, `eps = 1e-5`): a kernel's
    /// float parameters (a learning rate, an epsilon), fixed, not tuned; the script passes
    /// one as an f32 argument. Part of the inputs' namespace.
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    pub scalars: IndexMap<String, f64>,
    /// Whether `inputs` was derived from `shapes` (no `[inputs]` written): then it is not
    /// written back either, so a saved context reads as the user wrote it.
    #[serde(skip)]
    pub inputs_from_shapes: bool,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub arrays: Vec<ArraySpec>,
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    pub tuning: IndexMap<String, Domain>,
    #[serde(default, skip_serializing_if = "Constraints::is_empty")]
    pub constraints: Constraints,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tolerance: Option<Tolerance>,
    /// Sizes to check correctness at, apart from the sizes tuned.
    #[serde(default, skip_serializing_if = "Validation::is_empty")]
    pub validation: Validation,
}

/// Where correctness is checked. Validation and the sanitizer run every sample on its own
/// inputs, so at the sizes a user tunes (arrays of gigabytes) a step would spend minutes
/// checking; small sizes find the same faults in seconds. Tuning stays at `[inputs]`.
///
/// ```toml
/// [validation.inputs]       # scalar inputs not named keep their [inputs] values
/// rows = { values = [7, 64] }
/// ```
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Validation {
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    pub inputs: IndexMap<String, Domain>,
}

impl Validation {
    pub fn is_empty(&self) -> bool {
        self.inputs.is_empty()
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KernelSection {
    pub name: String,
    pub backend: Language,
    /// The three-region source file, relative to the context folder.
    pub source: String,
    /// Floating-point operations of one run, as an expression over the inputs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flops: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub matmul: Option<MatmulShape>,
    /// What the kernel does, as transformations are written for it (`row-reduction`,
    /// `elementwise`, `gemm`, ...; see [`Pattern`]). A transformation written for other
    /// patterns is refused. When absent, `domain` or `[kernel.matmul]` may imply one, and
    /// failing that the device code is read (`pattern::infer`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pattern: Option<Pattern>,
    /// The kind of kernel in the user's words (`layernorm`, `softmax`, `conv2d`, ...), for
    /// prompts and reports. A well-known kind implies its pattern.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub domain: Option<String>,
    /// What the kernel computes, in a sentence or two: prompts describe the kernel with it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// A transformation's name for a parameter (its role) -> this context's name for it.
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    pub roles: IndexMap<String, String>,
    /// A library call computing the same outputs, for benchmark scripts to time beside the
    /// kernel in the same run: a Python expression over `torch`, the arrays (1-D tensors on
    /// the GPU, by name) and the scalar inputs, e.g. `torch.softmax(X.view(rows, cols), 1)`.
    /// peak itself never runs it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub library: Option<String>,
}

impl KernelSection {
    /// The declared kind of kernel, or `matmul` where the matmul shape is given.
    pub fn domain(&self) -> Option<&str> {
        self.domain.as_deref().or(self.matmul.as_ref().map(|_| "matmul"))
    }

    /// The pattern the manifest declares or implies: `pattern`, else a GEMM where the
    /// matmul shape is given, else the pattern of a well-known `domain`. `None` means
    /// only the code can tell (`pattern::infer`).
    pub fn declared_pattern(&self) -> Option<Pattern> {
        self.pattern.or_else(|| self.matmul.as_ref().map(|_| Pattern::Gemm)).or_else(|| self.domain.as_deref().and_then(Pattern::of_kind))
    }
}

impl Manifest {
    /// What the kernel computes and what it takes, as a prompt tells a model: the
    /// context's own description (else its matmul shape), then its inputs and arrays.
    /// Transformations describe the code they expect; this is the only place that says
    /// what this kernel is.
    pub fn describe_kernel(&self) -> String {
        let k = &self.kernel;
        let mut text = format!("Kernel `{}`", k.name);
        match (k.declared_pattern(), k.domain()) {
            (Some(pattern), Some(domain)) if domain != pattern.name() => text.push_str(&format!(" (kind: {domain}; pattern: {})", pattern.meaning())),
            (Some(pattern), _) => text.push_str(&format!(" (pattern: {})", pattern.meaning())),
            (None, Some(domain)) => text.push_str(&format!(" (kind: {domain})")),
            (None, None) => {}
        }
        text.push_str(". ");
        match (&k.description, &k.matmul) {
            (Some(d), None) => text.push_str(d.trim()),
            (None, Some(mm)) => text.push_str(&mm.describe()),
            (Some(d), Some(mm)) => text.push_str(&format!("{} {}", d.trim(), mm.describe())),
            (None, None) => text.push_str("The context does not describe it: read the code."),
        }
        if !self.inputs.is_empty() {
            let inputs: Vec<&str> = self.inputs.keys().map(String::as_str).collect();
            text.push_str(&format!("\nScalar inputs: {}.", inputs.join(", ")));
        }
        if !self.scalars.is_empty() {
            let scalars: Vec<String> = self.scalars.iter().map(|(name, value)| format!("{name} = {value:?}")).collect();
            text.push_str(&format!(
                "\nFloat scalars ([scalars], fixed; host-script variables of these names, passed to the kernel as f32): {}.",
                scalars.join(", ")
            ));
        }
        if !self.shapes.is_empty() {
            let shapes: Vec<String> = self.shapes.iter().map(describe_shape).collect();
            text.push_str(&format!("\nTuned at the named shapes: {}.", shapes.join("; ")));
        }
        if !self.arrays.is_empty() {
            let arrays: Vec<String> = self
                .arrays
                .iter()
                .map(|a| {
                    let role = if a.output && a.inout {
                        "output, read first (in place)"
                    } else if a.output {
                        "output"
                    } else if a.inout {
                        "read and written"
                    } else {
                        "input"
                    };
                    format!("{} ({}, {} elements, {role})", a.name, a.dtype, a.size)
                })
                .collect();
            text.push_str(&format!("\nArrays: {}.", arrays.join(", ")));
        }
        text
    }
}

/// One named shape (`[[shapes]]`, see [`crate::shapes`]): `M=8192 N=3072 K=768`.
pub fn describe_shape(shape: &IndexMap<String, i64>) -> String {
    shape.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(" ")
}

/// Declares that the context computes a GEMM, so prompts can say exactly which and the
/// vendor library can be timed on the same work:
/// `C[m, n] = act(alpha * sum_k op(A)[m, k] * op(B)[k, n] + beta * C[m, n] + bias[n]) + residual[m, n]`,
/// for each of `batch` problems. The defaults are the paper's kernel: row-major
/// operands, no transpose, tight leading dimensions, one problem, no epilogue.
///
/// ```toml
/// [kernel.matmul]                 # out = inp . W^T + bias, W stored output-channel-major
/// m = "B * T"
/// n = "OC"
/// k = "C"
/// a = "inp"
/// b = "weight"
/// c = "out"
/// b_layout = "col"                # B[k, n] at weight[n * ldb + k]
/// bias = "bias"
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MatmulShape {
    pub m: String,
    pub n: String,
    pub k: String,
    pub a: String,
    pub b: String,
    pub c: String,
    /// How A[m, k] is stored: `row` at `a[m * lda + k]` (NN), `col` at `a[k * lda + m]`.
    #[serde(default, skip_serializing_if = "Layout::is_row")]
    pub a_layout: Layout,
    /// How B[k, n] is stored: `row` at `b[k * ldb + n]`, `col` at `b[n * ldb + k]` (a
    /// weight matrix stored output-channel-major, as `x . W^T` reads it).
    #[serde(default, skip_serializing_if = "Layout::is_row")]
    pub b_layout: Layout,
    /// Leading dimensions, as expressions over the inputs; tight when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lda: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ldb: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ldc: Option<String>,
    /// Independent problems, each `stride_*` elements after the previous one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stride_a: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stride_b: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stride_c: Option<String>,
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub alpha: f64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub beta: f64,
    /// An array of `n` elements added to every row of the product.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bias: Option<String>,
    #[serde(default, skip_serializing_if = "Activation::is_none")]
    pub activation: Activation,
    /// An array of `m x n` elements (ldc) added after the activation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub residual: Option<String>,
}

fn one() -> f64 {
    1.0
}

fn is_one(v: &f64) -> bool {
    *v == 1.0
}

fn is_zero(v: &f64) -> bool {
    *v == 0.0
}

/// How a GEMM operand is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Layout {
    /// Row-major in its logical shape (A as m x k, B as k x n): not transposed.
    #[default]
    Row,
    /// Column-major in its logical shape: the stored matrix is the transpose.
    Col,
}

impl Layout {
    fn is_row(&self) -> bool {
        *self == Layout::Row
    }
}

/// The activation of a GEMM's epilogue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Activation {
    #[default]
    None,
    Relu,
    /// `0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))`, as GPT-2 and cuBLASLt's GELU epilogue compute it.
    GeluTanh,
}

impl Activation {
    fn is_none(&self) -> bool {
        *self == Activation::None
    }
}

impl MatmulShape {
    /// Floating-point operations of one run (`[kernel] flops`): a multiply and an add per
    /// term of every problem's sums; the epilogue's few operations per output are left out.
    pub fn flops(&self) -> String {
        let one = format!("2 * ({}) * ({}) * ({})", self.m, self.n, self.k);
        match &self.batch {
            Some(batch) => format!("({batch}) * {one}"),
            None => one,
        }
    }

    /// The names the description gives a row of C, a column of C and a step of the sum: m,
    /// n and k, unless the context's own expressions use one of them as a name (a square
    /// context's size `n`), where `B[k * (n) + n]` would read as nonsense; then row, col, kk.
    fn index_names(&self) -> [&'static str; 3] {
        let exprs = [Some(&self.m), Some(&self.n), Some(&self.k), self.lda.as_ref(), self.ldb.as_ref(), self.ldc.as_ref()]
            .into_iter()
            .chain([self.batch.as_ref(), self.stride_a.as_ref(), self.stride_b.as_ref(), self.stride_c.as_ref()])
            .flatten();
        let mut names = exprs.flat_map(|e| e.split(|ch: char| !(ch.is_alphanumeric() || ch == '_')));
        if names.any(|name| matches!(name, "m" | "n" | "k")) { ["row", "col", "kk"] } else { ["m", "n", "k"] }
    }

    /// The GEMM in words, with where each element lives, for a prompt's "The kernel".
    pub fn describe(&self) -> String {
        let (a, b, c, m, n, k) = (&self.a, &self.b, &self.c, &self.m, &self.n, &self.k);
        let [im, jn, lk] = self.index_names();
        let ld = |given: &Option<String>, tight: &str| given.clone().unwrap_or_else(|| tight.to_string());
        let a_at = match self.a_layout {
            Layout::Row => format!("{a}[{im} * ({}) + {lk}]", ld(&self.lda, k)),
            Layout::Col => format!("{a}[{lk} * ({}) + {im}]", ld(&self.lda, m)),
        };
        let b_at = match self.b_layout {
            Layout::Row => format!("{b}[{lk} * ({}) + {jn}]", ld(&self.ldb, n)),
            Layout::Col => format!("{b}[{jn} * ({}) + {lk}]", ld(&self.ldb, k)),
        };
        let c_at = format!("{c}[{im} * ({}) + {jn}]", ld(&self.ldc, n));
        let mut value = "acc".to_string();
        if self.alpha != 1.0 {
            value = format!("{} * acc", self.alpha);
        }
        if self.beta != 0.0 {
            value = format!("{value} + {} * {c_at}", self.beta);
        }
        if let Some(bias) = &self.bias {
            value = format!("{value} + {bias}[{jn}]");
        }
        value = match self.activation {
            Activation::None => value,
            Activation::Relu => format!("relu({value})"),
            Activation::GeluTanh => format!("gelu_tanh({value})"),
        };
        if let Some(residual) = &self.residual {
            value = format!("{value} + {residual}[{im} * ({}) + {jn}]", ld(&self.ldc, n));
        }
        let mut text = format!(
            "It computes a GEMM of M = {m}, N = {n}, K = {k}: for every {im} < M and {jn} < N, acc = sum over {lk} < K of A[{im}, {lk}] * B[{lk}, {jn}], where A[{im}, {lk}] is {a_at} and B[{lk}, {jn}] is {b_at}; then {c_at} = {value}."
        );
        if let Some(batch) = &self.batch {
            let stride = |s: &Option<String>, name: &str| {
                s.clone().map_or(format!("{name} holds one problem after another"), |s| format!("{name} advances {s} elements per problem"))
            };
            text.push_str(&format!(
                " There are {batch} independent problems: {}, {}, {}.",
                stride(&self.stride_a, a),
                stride(&self.stride_b, b),
                stride(&self.stride_c, c)
            ));
        }
        if self.activation == Activation::GeluTanh {
            text.push_str(" gelu_tanh(x) = 0.5 * x * (1 + tanh(0.7978845608 * (x + 0.044715 * x^3))).");
        }
        text
    }
}

/// The device-code language of a context, and so the backend that runs it. Also the
/// language a transformation targets (`peak_transform::Language` is this type).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Language {
    Cuda,
    Hip,
    Opencl,
    Hlsl,
}

impl Language {
    /// Every backend, in the order `peak info` lists them. (Their `Ord` is the declaration
    /// order, which keys the transformation library's maps.)
    pub const ALL: [Language; 4] = [Language::Opencl, Language::Cuda, Language::Hip, Language::Hlsl];

    pub fn name(self) -> &'static str {
        match self {
            Language::Cuda => "cuda",
            Language::Hip => "hip",
            Language::Opencl => "opencl",
            Language::Hlsl => "hlsl",
        }
    }
}

impl fmt::Display for Language {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Language {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Language::ALL.into_iter().find(|b| b.name().eq_ignore_ascii_case(s)).ok_or_else(|| format!("unknown backend '{s}': expected cuda, hip, opencl or hlsl"))
    }
}

/// The values a scalar input or a tuning parameter may take. Exactly one of the three
/// forms is given; `values` enumerates, `range` is inclusive with an optional step, and
/// `pow2` is every power of two in an inclusive range.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Domain {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub values: Option<Vec<i64>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub range: Option<[i64; 2]>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pow2: Option<[i64; 2]>,
}

impl Domain {
    pub fn values(values: Vec<i64>) -> Self {
        Domain { values: Some(values), ..Domain::default() }
    }

    /// The concrete values, in order, or a message saying what is wrong with the domain.
    pub fn expand(&self) -> Result<Vec<i64>, String> {
        let forms = [self.values.is_some(), self.range.is_some(), self.pow2.is_some()];
        match forms.iter().filter(|f| **f).count() {
            0 => return Err("give one of `values = [..]`, `range = [lo, hi]` or `pow2 = [lo, hi]`".into()),
            1 => {}
            _ => return Err("give only one of `values`, `range` and `pow2`".into()),
        }
        if self.step.is_some() && self.range.is_none() {
            return Err("`step` only goes with `range`".into());
        }
        if let Some(values) = &self.values {
            if values.is_empty() {
                return Err("`values` is empty".into());
            }
            let mut seen = std::collections::HashSet::new();
            if let Some(dup) = values.iter().find(|v| !seen.insert(**v)) {
                return Err(format!("`values` lists {dup} twice"));
            }
            return Ok(values.clone());
        }
        if let Some([lo, hi]) = self.range {
            let step = self.step.unwrap_or(1);
            if step <= 0 {
                return Err(format!("`step` must be positive, got {step}"));
            }
            if lo > hi {
                return Err(format!("`range = [{lo}, {hi}]` is empty: the low end is above the high end"));
            }
            // In i128: `hi - lo` overflows i64 when the range spans more than half of it.
            let count = (i128::from(hi) - i128::from(lo)) / i128::from(step) + 1;
            if count > 1_000_000 {
                return Err(format!("`range` has {count} values; more than a million is surely a mistake"));
            }
            // Each value lies in [lo, hi] and fits i64; `i * step` alone may not.
            return Ok((0..count).map(|i| (i128::from(lo) + i * i128::from(step)) as i64).collect());
        }
        let [lo, hi] = self.pow2.expect("one form is present");
        if lo < 1 || lo > hi {
            return Err(format!("`pow2 = [{lo}, {hi}]` needs 1 <= lo <= hi"));
        }
        let mut out = Vec::new();
        let mut v = 1_i64;
        while v <= hi {
            if v >= lo {
                out.push(v);
            }
            v = match v.checked_mul(2) {
                Some(next) => next,
                None => break,
            };
        }
        if out.is_empty() {
            return Err(format!("`pow2 = [{lo}, {hi}]` holds no power of two"));
        }
        Ok(out)
    }
}

impl fmt::Display for Domain {
    /// The manifest's spelling, so a person can paste it into `peak.toml`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(values) = &self.values {
            let list: Vec<String> = values.iter().map(i64::to_string).collect();
            return write!(f, "{{ values = [{}] }}", list.join(", "));
        }
        if let Some([lo, hi]) = self.range {
            return write!(f, "{{ range = [{lo}, {hi}], step = {} }}", self.step.unwrap_or(1));
        }
        match self.pow2 {
            Some([lo, hi]) => write!(f, "{{ pow2 = [{lo}, {hi}] }}"),
            None => f.write_str("{}"),
        }
    }
}

/// One `[[arrays]]` table. On disk the init's settings are keys beside `init`
/// (`RawArraySpec`); here they travel inside [`Init`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(from = "RawArraySpec", into = "RawArraySpec")]
pub struct ArraySpec {
    pub name: String,
    pub dtype: DType,
    /// Element count, as an expression over the scalar inputs.
    pub size: String,
    pub init: Init,
    /// Seed for whatever the init draws; each array gets its own stream.
    pub seed: Option<u64>,
    /// Compared against the reference after a run.
    pub output: bool,
    /// Read and written by the kernel: exempt from the "inputs stay bit-identical" check.
    /// With `output` too, an in-place result (`C = alpha A B + beta C`): it starts from its
    /// `init`, the kernel reads and overwrites it, and it is compared with the reference.
    pub inout: bool,
}

impl ArraySpec {
    /// An output the kernel only writes starts as poison (NaN or a marked pattern) before
    /// every run, so that an element it never writes fails validation; an in-place output
    /// (`output` and `inout`) starts from its `init`, because the kernel reads it first.
    pub fn starts_poisoned(&self) -> bool {
        self.output && !self.inout
    }
}

/// An `[[arrays]]` table as written. A manifest without the newer keys serializes to the
/// same text and JSON as before they existed, which keeps reference and cache keys.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawArraySpec {
    name: String,
    #[serde(rename = "type")]
    dtype: DType,
    size: String,
    init: InitKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    scale: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    offset: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    range: Option<[IntExpr; 2]>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    outliers: Option<Outliers>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    seed: Option<u64>,
    #[serde(default, skip_serializing_if = "is_false")]
    output: bool,
    #[serde(default, skip_serializing_if = "is_false")]
    inout: bool,
}

impl From<RawArraySpec> for ArraySpec {
    fn from(r: RawArraySpec) -> ArraySpec {
        let settings = Shaped { kind: r.init, scale: r.scale, offset: r.offset, range: r.range, outliers: r.outliers };
        ArraySpec { name: r.name, dtype: r.dtype, size: r.size, init: Init::from_settings(settings), seed: r.seed, output: r.output, inout: r.inout }
    }
}

impl From<ArraySpec> for RawArraySpec {
    fn from(a: ArraySpec) -> RawArraySpec {
        let s = a.init.settings();
        RawArraySpec {
            name: a.name,
            dtype: a.dtype,
            size: a.size,
            init: s.kind,
            scale: s.scale,
            offset: s.offset,
            range: s.range,
            outliers: s.outliers,
            seed: a.seed,
            output: a.output,
            inout: a.inout,
        }
    }
}

fn is_false(b: &bool) -> bool {
    !*b
}

pub use crate::dtype::DType;
pub use crate::init::{Init, InitKind, IntExpr, Outliers, Shaped};

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Constraints {
    /// Conditions over scalar inputs alone.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub inputs: Vec<String>,
    /// Conditions over tuning parameters (and inputs).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tuning: Vec<String>,
}

impl Constraints {
    pub fn is_empty(&self) -> bool {
        self.inputs.is_empty() && self.tuning.is_empty()
    }
}

/// Overrides of the relative-error tolerance per element type.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Tolerance {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub f32: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub f16: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bf16: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub e4m3: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub e5m2: Option<f64>,
    /// Accumulation depth (e.g. the K of a matmul) as an expression over the inputs; the
    /// default half-precision tolerance grows with its square root.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accumulation: Option<String>,
}

impl Tolerance {
    /// The override for outputs of `dtype` (integers have none: they match exactly).
    pub fn for_dtype(&self, dtype: DType) -> Option<f64> {
        match dtype {
            DType::F32 => self.f32,
            DType::F16 => self.f16,
            DType::Bf16 => self.bf16,
            DType::E4m3 => self.e4m3,
            DType::E5m2 => self.e5m2,
            DType::I32 | DType::U32 => None,
        }
    }

    /// Each float type's override with its key, for checks and messages.
    pub fn overrides(&self) -> [(&'static str, Option<f64>); 5] {
        [("f32", self.f32), ("f16", self.f16), ("bf16", self.bf16), ("e4m3", self.e4m3), ("e5m2", self.e5m2)]
    }
}
