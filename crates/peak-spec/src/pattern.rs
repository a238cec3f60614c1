//! What a kernel does, as the transformation library sees it: its *pattern*.
//!
//! A transformation is written for the code of a pattern (a row-wise reduction, an
//! elementwise map, a GEMM), not for the one kernel it was first carried through, so a
//! layernorm gets the row-wise transformations a softmax gets, and a convolution never
//! gets a GEMM's. A context declares its pattern (`[kernel] pattern = "row-reduction"`);
//! failing that, a well-known kind (`domain = "softmax"`) or a `[kernel.matmul]` section
//! implies one; failing that, [`infer`] reads the device code. When the code does not say
//! clearly, nothing is guessed: the user is asked to declare it.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::import::scan::{identifiers, mask};

/// The kinds of computation the library's transformations are written for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Pattern {
    /// Each output element from the input elements at the same index (GELU, scale, add).
    Elementwise,
    /// Each row reduced or normalised on its own (softmax, layernorm, rmsnorm, cross-entropy).
    RowReduction,
    /// Many elements reduced to one or a few (a sum, a maximum, a norm).
    Reduction,
    /// Elements moved to permuted positions (transpose, permute).
    Transpose,
    /// Each output from a fixed neighbourhood of inputs (stencils, convolutions, pooling).
    Stencil,
    /// A matrix product, with any layout, batch and epilogue.
    Gemm,
    /// Scores of queries against keys, softmaxed, weighting value rows.
    Attention,
}

impl Pattern {
    pub const ALL: [Pattern; 7] =
        [Pattern::Elementwise, Pattern::RowReduction, Pattern::Reduction, Pattern::Transpose, Pattern::Stencil, Pattern::Gemm, Pattern::Attention];

    pub fn name(self) -> &'static str {
        match self {
            Pattern::Elementwise => "elementwise",
            Pattern::RowReduction => "row-reduction",
            Pattern::Reduction => "reduction",
            Pattern::Transpose => "transpose",
            Pattern::Stencil => "stencil",
            Pattern::Gemm => "gemm",
            Pattern::Attention => "attention",
        }
    }

    /// What the pattern is, in a phrase a prompt or an error can use.
    pub fn meaning(self) -> &'static str {
        match self {
            Pattern::Elementwise => "an elementwise map (each output element from the inputs at the same index)",
            Pattern::RowReduction => "a row-wise reduction or normalization (each row of contiguous elements reduced or normalised on its own)",
            Pattern::Reduction => "a reduction (many elements reduced to one or a few values)",
            Pattern::Transpose => "a transpose or permute (elements moved to permuted positions)",
            Pattern::Stencil => "a stencil, convolution or pooling (each output from a fixed neighbourhood of inputs)",
            Pattern::Gemm => "a GEMM (a matrix product, possibly with transposed operands, a batch and an epilogue)",
            Pattern::Attention => "attention (query-key scores, softmaxed, weighting value rows)",
        }
    }

    /// The pattern a well-known kind of kernel has: `softmax` and `layernorm` are
    /// row-wise reductions, `matmul` is a GEMM, `conv2d` a stencil. A pattern's own name
    /// is its kind too.
    pub fn of_kind(kind: &str) -> Option<Pattern> {
        let kind = kind.to_ascii_lowercase().replace('_', "-");
        if let Ok(pattern) = kind.parse() {
            return Some(pattern);
        }
        let pattern = match kind.as_str() {
            "map" | "gelu" | "relu" | "silu" | "swiglu" | "sigmoid" | "tanh" | "scale" | "add" | "residual" | "bias" | "cast" | "dropout" | "encoder"
            | "embedding" | "adamw" | "axpy" => Pattern::Elementwise,
            "softmax" | "log-softmax" | "logsoftmax" | "layernorm" | "layer-norm" | "rmsnorm" | "rms-norm" | "groupnorm" | "crossentropy" | "cross-entropy"
            | "normalization" | "normalize" => Pattern::RowReduction,
            "sum" | "norm" | "max" | "argmax" | "dot" | "mean" | "histogram" => Pattern::Reduction,
            "permute" => Pattern::Transpose,
            "conv" | "conv1d" | "conv2d" | "conv3d" | "convolution" | "pooling" | "maxpool" | "avgpool" | "blur" => Pattern::Stencil,
            "matmul" | "sgemm" | "hgemm" | "linear" | "matvec" | "gemv" | "bmm" => Pattern::Gemm,
            "mha" | "flash-attention" | "self-attention" => Pattern::Attention,
            _ => return None,
        };
        Some(pattern)
    }
}

impl fmt::Display for Pattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Pattern {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Pattern::ALL.into_iter().find(|p| p.name() == s).ok_or_else(|| format!("unknown pattern '{s}': expected one of {}", names()))
    }
}

/// Every pattern's name, for errors.
pub fn names() -> String {
    Pattern::ALL.map(Pattern::name).join(", ")
}

/// A pattern read off a kernel's code, with what gave it away.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inferred {
    pub pattern: Pattern,
    pub evidence: String,
}

/// The pattern of the kernel in `device` (a device region), or why the code does not say.
///
/// The kernel's own name is read first (people name kernels after what they compute),
/// then the shape of the code: an accumulated product of two arrays is a GEMM (attention
/// when exponentials are taken too), exponentials, logarithms or square roots over a loop
/// are a row-wise reduction, an atomic or a loop folding into one value is a reduction,
/// neighbour offsets are a stencil, and straight-line code writing one element per
/// thread is an elementwise map. Anything else is left to the user to declare: a wrong
/// guess would hand the kernel another pattern's prompt.
pub fn infer(device: &str) -> Result<Inferred, String> {
    // Comments and string literals masked out: a kernel named in a comment says nothing.
    let code = mask(device);
    let kernels = kernel_names(&code);
    for name in &kernels {
        if let Some(pattern) = pattern_in_name(name) {
            // A name that says GEMM over a loop folding elements into one value, with no
            // product of two arrays anywhere (llm.c's `matmul_backward_bias`, a column
            // sum), is a GEMM's helper, not a GEMM. Only that shape overrides the name: a
            // tensor-core GEMM multiplies through intrinsics, not `acc += A[..] * B[..]`.
            if pattern == Pattern::Gemm && !accumulates_product(&code) && words(&code).any(|w| w == "for" || w == "while") && folds_elements(&code) {
                return Ok(Inferred {
                    pattern: Pattern::Reduction,
                    evidence: format!(
                        "a loop folding array elements into one private value; the kernel's name `{name}` says GEMM, but no product of two arrays is accumulated"
                    ),
                });
            }
            // A name that says a reduction (or a GEMM) over straight-line code in which each
            // work-item writes its own elements, with no loop, no atomic and nothing shared
            // between work-items (llm.c's `crossentropy_softmax_backward_kernel1`, one
            // gradient element per work-item), names the computation the kernel belongs to,
            // not its shape: it is elementwise.
            if matches!(pattern, Pattern::RowReduction | Pattern::Reduction | Pattern::Gemm) && maps_elements_alone(&code) {
                return Ok(Inferred {
                    pattern: Pattern::Elementwise,
                    evidence: format!(
                        "straight-line code, each work-item writing its own elements with no loop, atomic or shared data; the kernel's name `{name}` says {pattern}, the code an elementwise map"
                    ),
                });
            }
            return Ok(Inferred { pattern, evidence: format!("the kernel's name `{name}`") });
        }
    }
    infer_shape(&code, &kernels)
}

/// Whether `code` (masked device code) writes array elements from straight-line code alone:
/// no loop, no atomic, no barrier, shared memory or warp shuffle, and at least one store
/// through a subscript or a pointer. An empty or unreadable body says nothing.
fn maps_elements_alone(code: &str) -> bool {
    let cooperates = words(code).any(|w| {
        matches!(w, "for" | "while" | "__syncthreads" | "barrier" | "__shared__" | "__local" | "groupshared" | "GroupMemoryBarrierWithGroupSync")
            || w.starts_with("atomic")
            || w.starts_with("atom_")
            || w.starts_with("__shfl")
            || w.starts_with("sub_group")
            || w.starts_with("work_group")
            || w.starts_with("Interlocked")
            || w.starts_with("Wave")
    });
    let stores = code.split([';', '{', '}']).any(|statement| {
        let s = statement.trim();
        // `lhs = value` or `lhs += value`, not `==`, `<=`, `>=` or `!=`: a subscript or a
        // dereference on the left is a store.
        let at = s.char_indices().find(|&(i, c)| c == '=' && !s[i + 1..].starts_with('=') && !s[..i].ends_with(['=', '<', '>', '!']));
        at.is_some_and(|(i, _)| {
            let lhs = s[..i].trim_end_matches(['+', '-', '*', '/']).trim();
            lhs.ends_with(']') || lhs.starts_with('*')
        })
    });
    !cooperates && stores
}

/// The pattern the shape of `code` (masked device code) shows, or why it shows none.
fn infer_shape(code: &str, kernels: &[String]) -> Result<Inferred, String> {
    let code = code.to_string();
    let has = |word: &str| words(&code).any(|w| w == word);
    let has_any = |list: &[&str]| list.iter().any(|w| has(w));
    let loops = has("for") || has("while");
    let product = accumulates_product(&code);
    let transcendental = has_any(&["exp", "expf", "__expf", "exp2", "exp2f", "log", "logf", "__logf"]);
    let roots = has_any(&["sqrt", "sqrtf", "rsqrt", "rsqrtf", "native_rsqrt", "native_sqrt"]);
    let atomics = has_any(&["atomicAdd", "atomic_add", "atomic_fetch_add", "InterlockedAdd", "atomicMax", "atomic_max"]);
    let found = |pattern: Pattern, evidence: &str| Ok(Inferred { pattern, evidence: evidence.to_string() });
    if product && transcendental {
        return found(Pattern::Attention, "a product of two arrays accumulated in a loop, and exponentials");
    }
    if product && neighbour_offsets(&code) {
        return found(Pattern::Stencil, "a weighted sum over neighbouring elements");
    }
    if product {
        return found(Pattern::Gemm, "a product of two arrays accumulated in a loop");
    }
    if loops && (transcendental || roots) {
        return found(Pattern::RowReduction, "a loop over a row with exponentials, logarithms or square roots");
    }
    if atomics {
        return found(Pattern::Reduction, "atomic accumulation into a few elements");
    }
    if loops && folds_elements(&code) {
        return found(Pattern::Reduction, "a loop folding array elements into one private value");
    }
    if neighbour_offsets(&code) {
        return found(Pattern::Stencil, "reads of neighbouring elements (index plus or minus an offset)");
    }
    if !loops && !kernels.is_empty() {
        return found(Pattern::Elementwise, "straight-line code with no loop");
    }
    Err(format!(
        "the code does not say clearly what the kernel computes (no loop shape peak recognises); declare it in peak.toml: [kernel] pattern = \"...\", one of {}",
        names()
    ))
}

/// A pattern named by a word of a kernel's name (`softmax_forward_kernel1` is a softmax).
fn pattern_in_name(name: &str) -> Option<Pattern> {
    let lower = name.to_ascii_lowercase();
    // Longest and most specific first: `flash_attention` before `softmax`, `layernorm`
    // before `norm`.
    const KEYS: &[(&str, Pattern)] = &[
        ("attention", Pattern::Attention),
        ("attn", Pattern::Attention),
        ("crossentropy", Pattern::RowReduction),
        ("cross_entropy", Pattern::RowReduction),
        ("softmax", Pattern::RowReduction),
        ("layernorm", Pattern::RowReduction),
        ("layer_norm", Pattern::RowReduction),
        ("rmsnorm", Pattern::RowReduction),
        ("rms_norm", Pattern::RowReduction),
        ("sgemm", Pattern::Gemm),
        ("hgemm", Pattern::Gemm),
        ("gemm", Pattern::Gemm),
        ("matmul", Pattern::Gemm),
        ("transpose", Pattern::Transpose),
        ("permute", Pattern::Transpose),
        ("conv", Pattern::Stencil),
        ("pool", Pattern::Stencil),
        ("stencil", Pattern::Stencil),
        ("gelu", Pattern::Elementwise),
        ("relu", Pattern::Elementwise),
        ("silu", Pattern::Elementwise),
        ("reduce", Pattern::Reduction),
        ("reduction", Pattern::Reduction),
    ];
    KEYS.iter().find(|(key, _)| lower.contains(key)).map(|(_, p)| *p)
}

/// Names of the kernels defined in `code` (CUDA/HIP `__global__`, OpenCL `__kernel`).
fn kernel_names(code: &str) -> Vec<String> {
    let tokens: Vec<&str> = words(code).collect();
    let mut names = Vec::new();
    for (i, token) in tokens.iter().enumerate() {
        if matches!(*token, "__global__" | "__kernel" | "kernel") {
            // The name is the last word before the parameter list: skip the return type
            // and qualifiers (`void`, `extern "C"` came before the marker).
            if let Some(name) = tokens[i + 1..].iter().take(4).find(|w| !matches!(**w, "void" | "__launch_bounds__" | "static" | "inline")) {
                names.push((*name).to_string());
            }
        }
    }
    names
}

/// Whether some `x += a[..] * b[..]` (or `x = x + a[..] * b[..]`, `fma(a[..], b[..], x)`)
/// multiplies elements of two arrays: the inner step of a matrix or convolution product.
fn accumulates_product(code: &str) -> bool {
    code.split([';', '{', '}']).any(|statement| {
        let s = statement.trim();
        let accumulates = s.contains("+=") || s.contains("fma") || s.contains("mad(");
        let indexed: Vec<&str> = s.split('[').skip(1).collect();
        accumulates && indexed.len() >= 2 && (s.contains('*') || s.contains("fma") || s.contains("mad("))
    })
}

/// Whether some `s += x[..]` (or `s = s + x[..]`, `m = fmax(m, x[..])`) folds elements of
/// an array into a private value (a plain name, not an element): a sum or a maximum.
fn folds_elements(code: &str) -> bool {
    code.split([';', '{', '}']).any(|statement| {
        let s = statement.trim();
        let Some((target, value)) = s.split_once("+=").or_else(|| s.split_once('=')) else { return false };
        // A loop header's step (`i += stride) y[i] = x[i]`) ends at its unmatched `)`.
        let mut depth = 0i32;
        let end = value
            .char_indices()
            .find(|&(_, c)| {
                depth += match c {
                    '(' => 1,
                    ')' => -1,
                    _ => 0,
                };
                depth < 0
            })
            .map_or(value.len(), |(i, _)| i);
        let value = &value[..end];
        let target = target.trim().rsplit(|c: char| c.is_whitespace() || c == '(' || c == ')').next().unwrap_or("");
        let plain = !target.is_empty() && target.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        let folds = s.contains("+=")
            || ["fmax", "fmaxf", "max", "fmin", "fminf", "min"]
                .iter()
                .any(|f| value.contains(&format!("{f}({target}")) || value.contains(&format!("{f}({target},")))
            || value.trim_start().starts_with(&format!("{target} +"));
        plain && folds && value.contains('[')
    })
}

/// Whether an index is written with a small signed offset (`[i - 1]`, `[(y + 1) * w + x]`,
/// `[x + dx]`), the mark of a neighbourhood read.
fn neighbour_offsets(code: &str) -> bool {
    let compact: String = code.chars().filter(|c| !c.is_whitespace()).collect();
    let mut rest = compact.as_str();
    while let Some(open) = rest.find('[') {
        let after = &rest[open + 1..];
        let close = after.find(']').unwrap_or(after.len());
        let index = &after[..close];
        for sign in ["-1", "+1", "-2", "+2", "+dx", "+dy", "+kx", "+ky", "-r", "+r"] {
            if let Some(at) = index.find(sign) {
                let next = index[at + sign.len()..].chars().next();
                if next.is_none_or(|c| !(c.is_ascii_alphanumeric() || c == '_')) {
                    return true;
                }
            }
        }
        rest = &after[close.min(after.len())..];
    }
    false
}

/// The identifiers of `code` (keywords included, numbers left out).
fn words(code: &str) -> impl Iterator<Item = &str> {
    identifiers(code).map(|(_, word)| word)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inferred(code: &str) -> Pattern {
        infer(code).unwrap_or_else(|e| panic!("{e}\n{code}")).pattern
    }

    #[test]
    fn names_round_trip_and_kinds_map_to_patterns() {
        for p in Pattern::ALL {
            assert_eq!(p.name().parse::<Pattern>().unwrap(), p);
            assert_eq!(Pattern::of_kind(p.name()), Some(p));
        }
        assert_eq!(Pattern::of_kind("layernorm"), Some(Pattern::RowReduction));
        assert_eq!(Pattern::of_kind("softmax"), Some(Pattern::RowReduction));
        assert_eq!(Pattern::of_kind("matmul"), Some(Pattern::Gemm));
        assert_eq!(Pattern::of_kind("conv2d"), Some(Pattern::Stencil));
        assert_eq!(Pattern::of_kind("gelu"), Some(Pattern::Elementwise));
        assert_eq!(Pattern::of_kind("frobnicate"), None);
        assert!("row_reduction".parse::<Pattern>().unwrap_err().contains("row-reduction"));
    }

    #[test]
    fn the_kernel_name_says_the_pattern() {
        assert_eq!(inferred("__global__ void layernorm_forward_kernel1(float* out, const float* inp, int N, int C) {}"), Pattern::RowReduction);
        assert_eq!(inferred("__kernel void flash_attention(__global float* o) {}"), Pattern::Attention);
        assert_eq!(inferred("extern \"C\" __global__ void gelu_forward_kernel1(float* out, const float* inp, int N) {}"), Pattern::Elementwise);
    }

    #[test]
    fn the_code_shape_says_the_pattern_when_the_name_does_not() {
        let gemm = "__global__ void k(float* C, const float* A, const float* B, int n) { float acc = 0; for (int i = 0; i < n; ++i) acc += A[r * n + i] * B[i * n + c]; C[r*n+c] = acc; }";
        assert_eq!(inferred(gemm), Pattern::Gemm);
        let conv = "__global__ void k(float* y, const float* x, const float* w) { for (int d = 0; d < 3; d++) acc += w[d] * x[i + d - 1]; }";
        assert_eq!(inferred(conv), Pattern::Stencil);
        let rows = "__kernel void k(__global float* y, __global const float* x, int cols) { float m = -INFINITY; for (int j = 0; j < cols; j++) m = fmax(m, x[j]); for (int j = 0; j < cols; j++) y[j] = exp(x[j] - m); }";
        assert_eq!(inferred(rows), Pattern::RowReduction);
        let norm = "__global__ void k(float* y, const float* x, int C) { float s = 0; for (int j = 0; j < C; j++) s += x[j]; float r = rsqrtf(s / C); }";
        assert_eq!(inferred(norm), Pattern::RowReduction);
        let sum = "__global__ void k(float* out, const float* x, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) atomicAdd(out, x[i]); }";
        assert_eq!(inferred(sum), Pattern::Reduction);
        let blur =
            "__kernel void k(__global float* y, __global const float* x, int w) { int i = get_global_id(0); y[i] = (x[i - 1] + x[i] + x[i + 1]) / 3.0f; }";
        assert_eq!(inferred(blur), Pattern::Stencil);
        let map = "__global__ void k(float* y, const float* x, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = 2.0f * x[i]; }";
        assert_eq!(inferred(map), Pattern::Elementwise);
    }

    #[test]
    fn a_gemm_name_over_code_without_a_product_goes_by_the_code() {
        // llm.c's bias gradient: named after the matmul it belongs to, a column sum.
        let bias = "__kernel void matmul_backward_bias(__global float* dbias, __global const float* dout, int BT, int OC) { int c = get_global_id(0); if (c < OC) { float sum = 0.0f; for (int r = 0; r < BT; r++) { sum += dout[r * OC + c]; } dbias[c] = sum; } }";
        let found = infer(bias).unwrap();
        assert_eq!(found.pattern, Pattern::Reduction);
        assert!(found.evidence.contains("says GEMM") && found.evidence.contains("folding"), "{}", found.evidence);
        // A GEMM by name whose code says nothing else stays a GEMM.
        assert_eq!(inferred("__global__ void matmul_wgmma(float* C) { for (int k = 0; k < 8; k++) asm volatile(\"wgmma\"); }"), Pattern::Gemm);
        let gemm = "__global__ void sgemm(float* C, const float* A, const float* B, int n) { float acc = 0; for (int i = 0; i < n; ++i) acc += A[r * n + i] * B[i * n + c]; C[r*n+c] = acc; }";
        assert_eq!(inferred(gemm), Pattern::Gemm);
    }

    #[test]
    fn a_reduction_name_over_an_elementwise_body_goes_by_the_code() {
        // llm.c's softmax + cross-entropy backward: named after the loss, one gradient per work-item.
        let backward = "__kernel void crossentropy_softmax_backward_kernel1(__global float* dlogits, __global const float* dlosses, __global const float* probs, __global const int* targets, int B, int T, int V) { int i = get_global_id(0); if (i < B * T * V) { int v = i % V; __global float* d = dlogits + (i / V) * V; float p = probs[i]; float ind = v == targets[i / V] ? 1.0f : 0.0f; d[v] += (p - ind) * dlosses[i / V]; } }";
        let found = infer(backward).unwrap();
        assert_eq!(found.pattern, Pattern::Elementwise, "{}", found.evidence);
        assert!(found.evidence.contains("says row-reduction"), "{}", found.evidence);
        // A row reduction by name that loops, shares or adds atomically stays one.
        let rows = "__global__ void softmax_forward(float* y, const float* x, int C) { int r = blockIdx.x; float m = -1e30f; for (int j = 0; j < C; j++) m = fmaxf(m, x[r * C + j]); y[r * C] = m; }";
        assert_eq!(inferred(rows), Pattern::RowReduction);
        let shared = "__global__ void softmax_block(float* y, const float* x) { __shared__ float s[256]; s[threadIdx.x] = x[threadIdx.x]; __syncthreads(); y[threadIdx.x] = s[0]; }";
        assert_eq!(inferred(shared), Pattern::RowReduction);
        let total =
            "__global__ void reduce_sum(float* out, const float* x, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) atomicAdd(out, x[i]); }";
        assert_eq!(inferred(total), Pattern::Reduction);
        // An empty body says nothing against the name.
        assert_eq!(inferred("__global__ void layernorm_forward_kernel1(float* out, const float* inp, int N, int C) {}"), Pattern::RowReduction);
    }

    #[test]
    fn a_loop_folding_elements_into_one_value_is_a_reduction() {
        let chunks = "__kernel void block_sum(__global const float* X, __global float* P, int n, int chunk) { int b = get_global_id(0); float acc = 0.0f; for (int i = 0; i < chunk; ++i) { acc += X[b * chunk + i]; } P[b] = acc; }";
        assert_eq!(inferred(chunks), Pattern::Reduction);
        let maxima = "__global__ void k(float* out, const float* x, int n) { float m = x[0]; for (int i = 1; i < n; i++) m = fmaxf(m, x[i]); out[0] = m; }";
        assert_eq!(inferred(maxima), Pattern::Reduction);
        // A loop that writes elements folds nothing.
        let copy = "__global__ void k(float* y, const float* x, int n) { for (int i = threadIdx.x; i < n; i += blockDim.x) y[i] = x[i]; }";
        assert!(infer(copy).is_err());
    }

    #[test]
    fn unclear_code_is_not_guessed() {
        let unclear = "__global__ void k(int* out, const int* idx, int n) { for (int i = 0; i < n; i++) out[idx[i]] = i; }";
        let err = infer(unclear).unwrap_err();
        assert!(err.contains("[kernel] pattern") && err.contains("row-reduction"), "{err}");
        // Names in comments do not count.
        assert!(infer("// softmax\n__global__ void k(int* out, const int* idx, int n) { for (;;) out[idx[0]] = 1; }").is_err());
    }
}
