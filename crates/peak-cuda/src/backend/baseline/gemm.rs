//! The GEMM a `[kernel.matmul]` table declares, resolved for one execution parameter:
//! every expression evaluated, every array found, and each checked against what the GEMM
//! reads and writes, so a mistake is reported with its manifest field before any GPU work.

use peak_backend::runner::SizedArray;
use peak_spec::expr::{Expr, expression_engine};
use peak_spec::{Activation, Context, DType, ExecParams, HostArray, Layout, MatmulShape};
use serde::{Deserialize, Serialize};

use super::BaselineError;

/// One of the manifest's arrays as the GEMM uses it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Operand {
    pub name: String,
    /// Its position among the manifest's arrays, which is also the runner's order.
    #[serde(skip)]
    pub index: usize,
    pub dtype: DType,
}

/// Where a stored matrix's elements lie: `outer` runs of `inner` contiguous elements, `ld`
/// apart, and one problem after another `stride` elements apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Storage {
    pub outer: usize,
    pub inner: usize,
    pub ld: usize,
    pub stride: usize,
}

impl Storage {
    /// A logical `rows x cols` matrix stored as `layout` says: by rows, runs along a row.
    pub fn new(layout: Layout, rows: usize, cols: usize, ld: usize, stride: usize) -> Storage {
        match layout {
            Layout::Row => Storage { outer: rows, inner: cols, ld, stride },
            Layout::Col => Storage { outer: cols, inner: rows, ld, stride },
        }
    }

    /// How many elements an array must hold for `batch` problems.
    pub fn span(&self, batch: usize) -> usize {
        (batch - 1) * self.stride + (self.outer - 1) * self.ld + self.inner
    }

    /// The offset of every element, problem by problem, run by run.
    pub fn offsets(self, batch: usize) -> impl Iterator<Item = usize> {
        (0..batch).flat_map(move |p| (0..self.outer).flat_map(move |o| (0..self.inner).map(move |i| p * self.stride + o * self.ld + i)))
    }

    /// The elements of `array` this matrix covers, packed in [`Storage::offsets`] order:
    /// what is compared, since a padded leading dimension leaves gaps nobody writes.
    pub fn gather(self, array: &HostArray, batch: usize) -> HostArray {
        let size = array.dtype.size_bytes();
        let mut bytes = Vec::with_capacity(self.outer * self.inner * batch * size);
        for offset in self.offsets(batch) {
            bytes.extend_from_slice(&array.bytes[offset * size..(offset + 1) * size]);
        }
        HostArray { dtype: array.dtype, bytes }
    }
}

/// `C[m, n] = act(alpha · Σ_k A[m, k] · B[k, n] + beta · C[m, n] + bias[n]) + residual[m, n]`,
/// `batch` times, with every size a number and every array found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Gemm {
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub batch: usize,
    pub a_layout: Layout,
    pub b_layout: Layout,
    pub a_storage: Storage,
    pub b_storage: Storage,
    pub c_storage: Storage,
    pub alpha: f64,
    pub beta: f64,
    pub activation: Activation,
    pub a: Operand,
    pub b: Operand,
    pub c: Operand,
    pub bias: Option<Operand>,
    /// Laid out as C (`ldc`, `stride_c`).
    pub residual: Option<Operand>,
}

impl Gemm {
    /// Multiply-adds count two each; the epilogue's few operations per output are not counted.
    pub fn flops(&self) -> f64 {
        2.0 * self.m as f64 * self.n as f64 * self.k as f64 * self.batch as f64
    }

    /// `NN`, `NT`, `TN` or `TT`: A's letter then B's, `T` for an operand stored column-major
    /// (the BLAS names for row-major operands; `x · Wᵀ` with W stored by rows is `NT`).
    pub fn layout_name(&self) -> String {
        [self.a_layout, self.b_layout].iter().map(|l| if *l == Layout::Col { 'T' } else { 'N' }).collect()
    }

    /// The epilogue in the manifest's words: `none`, `bias`, `gelu-tanh`, `bias + relu`, ...
    pub fn epilogue_name(&self) -> String {
        let parts: Vec<&str> = [
            self.bias.as_ref().map(|_| "bias"),
            (self.activation != Activation::None).then(|| activation_word(self.activation)),
            self.residual.as_ref().map(|_| "residual"),
        ]
        .into_iter()
        .flatten()
        .collect();
        if parts.is_empty() { "none".into() } else { parts.join(" + ") }
    }

    /// One line for messages: `NT m=37 n=45 k=29, f16 x f16 -> f16, bias + gelu-tanh`.
    pub fn summary(&self) -> String {
        let batch = if self.batch > 1 { format!(" batch={}", self.batch) } else { String::new() };
        format!(
            "{} m={} n={} k={}{batch}, {} x {} -> {}, {}",
            self.layout_name(),
            self.m,
            self.n,
            self.k,
            self.a.dtype,
            self.b.dtype,
            self.c.dtype,
            self.epilogue_name()
        )
    }
}

/// The context's `[kernel.matmul]` GEMM for `params`; `arrays` are the runner's arrays for
/// the same parameters.
pub fn resolve(ctx: &Context, params: &ExecParams, arrays: &[SizedArray]) -> Result<Gemm, BaselineError> {
    let file = ctx.manifest_path().display().to_string();
    let spec = ctx.manifest.kernel.matmul.as_ref().ok_or_else(|| BaselineError::NotMatmul { file: file.clone() })?;
    let engine = expression_engine();
    let names: Vec<&str> = ctx.manifest.inputs.keys().map(String::as_str).collect();
    let mut scope = params.scope();
    let mut eval = |text: &str| Expr::compile(&engine, text, &names).map_err(|m| format!("cannot parse `{text}`: {m}"))?.eval_int(&engine, &mut scope);
    Resolver { spec, arrays, eval: &mut eval }.gemm().map_err(|(field, message)| BaselineError::Field { file, field: field.into(), message })
}

/// A manifest field and what is wrong with it.
type FieldError = (&'static str, String);

#[derive(Debug, Clone, Copy)]
enum Matrix {
    A,
    B,
    C,
}

struct Resolver<'a> {
    spec: &'a MatmulShape,
    arrays: &'a [SizedArray],
    eval: &'a mut dyn FnMut(&str) -> Result<i64, String>,
}

impl Resolver<'_> {
    fn gemm(mut self) -> Result<Gemm, FieldError> {
        let spec = self.spec;
        let m = self.size("m", Some(&spec.m), 0, 1, "a positive size")?;
        let n = self.size("n", Some(&spec.n), 0, 1, "a positive size")?;
        let k = self.size("k", Some(&spec.k), 0, 1, "a positive size")?;
        let batch = self.size("batch", spec.batch.as_deref(), 1, 1, "a positive count of problems")?;
        let a_storage = self.storage(Matrix::A, m, k, false)?;
        let b_storage = self.storage(Matrix::B, k, n, false)?;
        // Problems whose outputs overlapped would race; inputs may be shared (stride 0).
        let c_storage = self.storage(Matrix::C, m, n, batch > 1)?;

        let a = self.operand("a", &spec.a, a_storage.span(batch))?;
        let b = self.operand("b", &spec.b, b_storage.span(batch))?;
        let c = self.operand("c", &spec.c, c_storage.span(batch))?;
        if !self.arrays[c.index].spec.output {
            return Err(("c", format!("array {} is not an output (`output = true`)", c.name)));
        }
        check_types(&a, &b, &c)?;
        if a.dtype.is_fp8() {
            check_fp8_layouts(spec)?;
        }
        let bias = spec.bias.as_deref().map(|name| self.operand("bias", name, n)).transpose()?;
        let residual = spec.residual.as_deref().map(|name| self.operand("residual", name, c_storage.span(batch))).transpose()?;
        for (field, operand, want) in [("bias", &bias, bias_type(a.dtype, c.dtype)), ("residual", &residual, c.dtype)] {
            if let Some(op) = operand.as_ref().filter(|op| op.dtype != want) {
                let whose = if want == c.dtype { format!("C's type, {want}") } else { format!("{want} (with fp8 operands and an f32 C)") };
                return Err((field, format!("array {} is {}; cuBLASLt reads it as {whose}", op.name, op.dtype)));
            }
        }
        check_fusion(spec, residual.is_some())?;
        // beta reads C: the kernel's C must start from the same init as cuBLASLt's, not from poison.
        if spec.beta != 0.0 && self.arrays[c.index].spec.starts_poisoned() {
            return Err((
                "beta",
                format!(
                    "beta = {} reads {} before writing it: mark it `inout = true` beside `output = true` (an in-place result, started from its init)",
                    spec.beta, c.name
                ),
            ));
        }
        Ok(Gemm {
            m,
            n,
            k,
            batch,
            a_layout: spec.a_layout,
            b_layout: spec.b_layout,
            a_storage,
            b_storage,
            c_storage,
            alpha: spec.alpha,
            beta: spec.beta,
            activation: spec.activation,
            a,
            b,
            c,
            bias,
            residual,
        })
    }

    /// `text` evaluated as a size of at least `least` (`what` says why), or `absent` when
    /// the manifest leaves the field out.
    fn size(&mut self, field: &'static str, text: Option<&str>, absent: usize, least: usize, what: &str) -> Result<usize, FieldError> {
        let Some(text) = text else { return Ok(absent) };
        let value = (self.eval)(text).map_err(|m| (field, m))?;
        usize::try_from(value).ok().filter(|v| *v >= least).ok_or_else(|| (field, format!("`{text}` is {value}; expected at least {least}, {what}")))
    }

    /// How `matrix`, logically `rows x cols`, is stored; tight where the manifest gives no
    /// leading dimension or stride. `disjoint`: problems must not overlap.
    fn storage(&mut self, matrix: Matrix, rows: usize, cols: usize, disjoint: bool) -> Result<Storage, FieldError> {
        let spec = self.spec;
        let (layout, (ld_field, ld), (stride_field, stride)) = match matrix {
            Matrix::A => (spec.a_layout, ("lda", &spec.lda), ("stride_a", &spec.stride_a)),
            Matrix::B => (spec.b_layout, ("ldb", &spec.ldb), ("stride_b", &spec.stride_b)),
            Matrix::C => (Layout::Row, ("ldc", &spec.ldc), ("stride_c", &spec.stride_c)),
        };
        let tight = Storage::new(layout, rows, cols, 0, 0);
        let run = if layout == Layout::Row { "row" } else { "column" };
        let stored = match matrix {
            Matrix::A => format!(" (a_layout = \"{}\")", layout_word(layout)),
            Matrix::B => format!(" (b_layout = \"{}\")", layout_word(layout)),
            Matrix::C => String::new(),
        };
        let ld = self.size(ld_field, ld.as_deref(), tight.inner, tight.inner, &format!("the {} elements of a {run} of {matrix:?}{stored}", tight.inner))?;
        let one = Storage { ld, ..tight }.span(1);
        let (least, why) =
            if disjoint { (one, "the elements of one problem, so that problems do not write over each other") } else { (0, "a count of elements") };
        let stride = self.size(stride_field, stride.as_deref(), tight.outer * ld, least, why)?;
        Ok(Storage { ld, stride, ..tight })
    }

    fn operand(&self, field: &'static str, name: &str, needed: usize) -> Result<Operand, FieldError> {
        let index = self.arrays.iter().position(|a| a.spec.name == name).ok_or_else(|| (field, format!("no array named '{name}'")))?;
        let array = &self.arrays[index];
        if array.count < needed {
            return Err((field, format!("array {name} has {} elements; the GEMM reads {needed}", array.count)));
        }
        Ok(Operand { name: name.into(), index, dtype: array.spec.dtype })
    }
}

fn layout_word(layout: Layout) -> &'static str {
    match layout {
        Layout::Row => "row",
        Layout::Col => "col",
    }
}

/// cuBLASLt's GEMMs here: A and B of one floating type, C of that type or f32, with fp32
/// accumulation and scaling; or A and B of fp8 (e4m3 x e4m3, e4m3 x e5m2, e5m2 x e4m3:
/// cuBLASLt has no e5m2 x e5m2) with C bf16, f16 or f32.
fn check_types(a: &Operand, b: &Operand, c: &Operand) -> Result<(), FieldError> {
    if a.dtype.is_fp8() || b.dtype.is_fp8() {
        return check_fp8_types(a, b, c);
    }
    for (field, op) in [("a", a), ("b", b), ("c", c)] {
        if !matches!(op.dtype, DType::F32 | DType::F16 | DType::Bf16) {
            return Err((field, format!("array {} is {}; cuBLASLt's baseline multiplies f32, f16 or bf16", op.name, op.dtype)));
        }
    }
    if b.dtype != a.dtype {
        return Err(("b", format!("array {} is {} but A ({}) is {}: cuBLASLt multiplies operands of one type", b.name, b.dtype, a.name, a.dtype)));
    }
    if c.dtype != a.dtype && c.dtype != DType::F32 {
        let allowed = if a.dtype == DType::F32 { "f32".to_string() } else { format!("{} or f32", a.dtype) };
        return Err(("c", format!("array {} is {}; with {} operands C is {allowed}", c.name, c.dtype, a.dtype)));
    }
    Ok(())
}

fn check_fp8_types(a: &Operand, b: &Operand, c: &Operand) -> Result<(), FieldError> {
    for (field, op, other) in [("a", a, b), ("b", b, a)] {
        if !op.dtype.is_fp8() {
            return Err((
                field,
                format!(
                    "array {} is {} and {} is {}: cuBLASLt's fp8 GEMM takes both operands in fp8 (e4m3 or e5m2)",
                    op.name, op.dtype, other.name, other.dtype
                ),
            ));
        }
    }
    if a.dtype == DType::E5m2 && b.dtype == DType::E5m2 {
        return Err(("b", format!("arrays {} and {} are both e5m2; cuBLASLt has no e5m2 x e5m2 GEMM: make one of them e4m3", a.name, b.name)));
    }
    if !matches!(c.dtype, DType::Bf16 | DType::F16 | DType::F32) {
        return Err(("c", format!("array {} is {}; with fp8 operands cuBLASLt's baseline writes bf16, f16 or f32", c.name, c.dtype)));
    }
    Ok(())
}

/// cuBLASLt multiplies fp8 only in its `TN` form, which is A row-major (M x K) and B stored
/// N x K (`b_layout = "col"`) in the manifest's row-major terms: both operands K-major.
fn check_fp8_layouts(spec: &MatmulShape) -> Result<(), FieldError> {
    let needed = "cuBLASLt multiplies fp8 only with both operands K-major: A stored by rows (a_layout = \"row\", M x K) and B by columns (b_layout = \"col\", stored N x K, the weight of x · Wᵀ)";
    if spec.a_layout != Layout::Row {
        return Err(("a_layout", format!("a_layout = \"{}\": {needed}", layout_word(spec.a_layout))));
    }
    if spec.b_layout != Layout::Col {
        return Err(("b_layout", format!("b_layout = \"{}\": {needed}", layout_word(spec.b_layout))));
    }
    Ok(())
}

/// The bias type cuBLASLt reads: C's, except that fp8 operands with an f32 C take a bf16 bias.
pub fn bias_type(ab: DType, c: DType) -> DType {
    if ab.is_fp8() && c == DType::F32 { DType::Bf16 } else { c }
}

/// cuBLASLt computes `D = epilogue(alpha · A·B + beta · C)`, the bias and then the
/// activation inside the epilogue. A residual fuses as C (beta = 1) only where nothing
/// comes after it and C is not needed for its old contents.
fn check_fusion(spec: &MatmulShape, residual: bool) -> Result<(), FieldError> {
    if !residual {
        return Ok(());
    }
    if spec.activation != Activation::None {
        return Err((
            "residual",
            format!(
                "cuBLASLt's epilogue applies the activation last, so a residual added after it (activation = \"{}\") cannot be fused; time the GEMM without it",
                activation_word(spec.activation)
            ),
        ));
    }
    if spec.beta != 0.0 {
        return Err(("residual", format!("cuBLASLt reads one C matrix: it would be the residual, so beta = {} has none left to scale", spec.beta)));
    }
    Ok(())
}

pub(crate) fn activation_word(activation: Activation) -> &'static str {
    match activation {
        Activation::None => "none",
        Activation::Relu => "relu",
        Activation::GeluTanh => "gelu-tanh",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use peak_backend::runner;

    /// A context whose matmul table is `matmul` (without its header) over arrays of the
    /// given names, types and sizes (expressions over m, n, k).
    fn context(matmul: &str, arrays: &[(&str, &str, &str, bool)]) -> (tempfile::TempDir, Context) {
        let dir = tempfile::tempdir().unwrap();
        let mut manifest = format!(
            "[kernel]\nname = \"mm\"\nbackend = \"cuda\"\nsource = \"k.cu\"\n\n[kernel.matmul]\nm = \"m\"\nn = \"n\"\nk = \"k\"\n{matmul}\n\
             [inputs]\nm = {{ values = [37, 64] }}\nn = {{ values = [45] }}\nk = {{ values = [29] }}\n"
        );
        for (name, dtype, size, output) in arrays {
            let init = if *output { "zeros" } else { "random" };
            manifest.push_str(&format!("\n[[arrays]]\nname = \"{name}\"\ntype = \"{dtype}\"\nsize = \"{size}\"\ninit = \"{init}\"\noutput = {output}\n"));
        }
        std::fs::write(dir.path().join("peak.toml"), manifest).unwrap();
        std::fs::write(dir.path().join("k.cu"), "// @peak macros\n// @peak device\n// @peak host\n").unwrap();
        let ctx = Context::load(dir.path()).unwrap();
        (dir, ctx)
    }

    /// llm.c's matmul_forward: inp (m x k), weight (n x k), bias (n), out (m x n).
    fn linear(dtype: &'static str) -> [(&'static str, &'static str, &'static str, bool); 4] {
        [("inp", dtype, "m * k", false), ("weight", dtype, "n * k", false), ("bias", dtype, "n", false), ("out", dtype, "m * n", true)]
    }

    fn resolved(matmul: &str, arrays: &[(&str, &str, &str, bool)]) -> Result<Gemm, BaselineError> {
        edited(matmul, arrays, |_| {})
    }

    /// Resolved after `edit` changes the loaded context: `Context::load` refuses unknown
    /// arrays, integer arrays and bad expressions itself, but a context built in code
    /// (as peak-apply extends manifests) reaches `resolve` unchecked.
    fn edited(matmul: &str, arrays: &[(&str, &str, &str, bool)], edit: impl FnOnce(&mut Context)) -> Result<Gemm, BaselineError> {
        let (_dir, mut ctx) = context(matmul, arrays);
        edit(&mut ctx);
        let params = ctx.space().iter().next().unwrap();
        resolve(&ctx, &params, &runner::size_arrays(&ctx, &params).unwrap())
    }

    fn table(ctx: &mut Context) -> &mut MatmulShape {
        ctx.manifest.kernel.matmul.as_mut().unwrap()
    }

    fn error(matmul: &str, arrays: &[(&str, &str, &str, bool)]) -> String {
        resolved(matmul, arrays).unwrap_err().to_string()
    }

    const LINEAR: &str = "a = \"inp\"\nb = \"weight\"\nc = \"out\"\nb_layout = \"col\"\nbias = \"bias\"\nactivation = \"gelu-tanh\"\n";

    #[test]
    fn llm_c_matmul_forward_resolves_to_an_nt_gemm_with_tight_storage() {
        let gemm = resolved(LINEAR, &linear("bf16")).unwrap();
        assert_eq!((gemm.m, gemm.n, gemm.k, gemm.batch), (37, 45, 29, 1));
        assert_eq!(gemm.layout_name(), "NT");
        // A by rows of k; B (the weight) by rows of k too, one per output channel; C by rows of n.
        assert_eq!(gemm.a_storage, Storage { outer: 37, inner: 29, ld: 29, stride: 37 * 29 });
        assert_eq!(gemm.b_storage, Storage { outer: 45, inner: 29, ld: 29, stride: 45 * 29 });
        assert_eq!(gemm.c_storage, Storage { outer: 37, inner: 45, ld: 45, stride: 37 * 45 });
        assert_eq!([&gemm.a, &gemm.b, &gemm.c].map(|o| o.index), [0, 1, 3]);
        assert_eq!(gemm.bias.as_ref().map(|b| (b.index, b.dtype)), Some((2, DType::Bf16)));
        assert_eq!(gemm.activation, Activation::GeluTanh);
        assert_eq!(gemm.flops(), 2.0 * 37.0 * 45.0 * 29.0);
        assert_eq!(gemm.summary(), "NT m=37 n=45 k=29, bf16 x bf16 -> bf16, bias + gelu-tanh");
    }

    #[test]
    fn fp8_gemms_resolve_in_the_tn_form_and_other_layouts_and_types_are_refused() {
        let fp8 = |a: &'static str, b: &'static str, c: &'static str, bias: &'static str| {
            [("inp", a, "m * k", false), ("weight", b, "n * k", false), ("bias", bias, "n", false), ("out", c, "m * n", true)]
        };
        let plain = LINEAR.replace("activation = \"gelu-tanh\"\n", "");
        let gemm = resolved(&plain, &fp8("e4m3", "e4m3", "bf16", "bf16")).unwrap();
        assert_eq!(gemm.summary(), "NT m=37 n=45 k=29, e4m3 x e4m3 -> bf16, bias");
        assert!(resolved(&plain, &fp8("e4m3", "e5m2", "f16", "f16")).is_ok());
        assert!(resolved(&plain, &fp8("e5m2", "e4m3", "f32", "bf16")).is_ok(), "an f32 C takes a bf16 bias");
        let err = error(&plain, &fp8("e4m3", "e4m3", "f32", "f32"));
        assert!(err.contains("kernel.matmul.bias") && err.contains("bf16 (with fp8 operands and an f32 C)"), "{err}");
        let err = error(&plain, &fp8("e5m2", "e5m2", "bf16", "bf16"));
        assert!(err.contains("no e5m2 x e5m2 GEMM"), "{err}");
        let err = error(&plain, &fp8("e4m3", "bf16", "bf16", "bf16"));
        assert!(err.contains("kernel.matmul.b") && err.contains("both operands in fp8"), "{err}");
        let err = error(&plain, &fp8("e4m3", "e4m3", "e4m3", "e4m3"));
        assert!(err.contains("kernel.matmul.c") && err.contains("writes bf16, f16 or f32"), "{err}");
        let err = error(&plain.replace("b_layout = \"col\"\n", ""), &fp8("e4m3", "e4m3", "bf16", "bf16"));
        assert!(err.contains("kernel.matmul.b_layout") && err.contains("b_layout = \"row\"") && err.contains("both operands K-major"), "{err}");
        let err = error(&format!("{plain}a_layout = \"col\"\n"), &fp8("e4m3", "e4m3", "bf16", "bf16"));
        assert!(err.contains("kernel.matmul.a_layout"), "{err}");
    }

    #[test]
    fn sizes_follow_the_execution_parameter_and_a_context_without_the_table_is_told_how_to_add_it() {
        let (_dir, ctx) = context(LINEAR, &linear("f16"));
        let params = ctx.space().iter().nth(1).unwrap();
        let gemm = resolve(&ctx, &params, &runner::size_arrays(&ctx, &params).unwrap()).unwrap();
        assert_eq!((gemm.m, gemm.a_storage.outer), (64, 64));

        let dir = tempfile::tempdir().unwrap();
        let manifest = std::fs::read_to_string(ctx.manifest_path()).unwrap();
        let start = manifest.find("[kernel.matmul]").unwrap();
        let without = format!("{}{}", &manifest[..start], &manifest[manifest.find("[inputs]").unwrap()..]);
        std::fs::write(dir.path().join("peak.toml"), without).unwrap();
        std::fs::write(dir.path().join("k.cu"), "// @peak macros\n// @peak device\n// @peak host\n").unwrap();
        let plain = Context::load(dir.path()).unwrap();
        let err = resolve(&plain, &params, &runner::size_arrays(&plain, &params).unwrap()).unwrap_err().to_string();
        assert!(err.contains("no [kernel.matmul] table") && err.contains("hint: add [kernel.matmul]"), "{err}");
    }

    #[test]
    fn leading_dimensions_and_strides_size_what_each_array_must_hold() {
        let arrays = [("A", "f32", "2 * 40 * 37", false), ("B", "f32", "29 * 45", false), ("C", "f32", "2 * 37 * 48", true)];
        let matmul = "a = \"A\"\nb = \"B\"\nc = \"C\"\na_layout = \"col\"\nlda = \"40\"\nldc = \"48\"\nbatch = \"2\"\nstride_b = \"0\"\n";
        let gemm = resolved(matmul, &arrays).unwrap();
        assert_eq!(gemm.layout_name(), "TN");
        // A column-major: k runs of m, 40 apart.
        assert_eq!(gemm.a_storage, Storage { outer: 29, inner: 37, ld: 40, stride: 29 * 40 });
        assert_eq!(gemm.b_storage.stride, 0, "one B shared by both problems");
        assert_eq!(gemm.c_storage.span(2), 37 * 48 + 36 * 48 + 45);
        assert_eq!(gemm.flops(), 2.0 * 2.0 * 37.0 * 45.0 * 29.0);

        let padded = HostArray { dtype: DType::F32, bytes: (0..10u32).flat_map(|v| (v as f32).to_le_bytes()).collect() };
        let storage = Storage { outer: 2, inner: 2, ld: 3, stride: 6 };
        assert_eq!(storage.offsets(2).collect::<Vec<_>>(), [0, 1, 3, 4, 6, 7, 9, 10]);
        let gathered = Storage { stride: 5, ..storage }.gather(&padded, 2);
        assert_eq!((0..gathered.len()).map(|i| gathered.get_f64(i)).collect::<Vec<_>>(), [0.0, 1.0, 3.0, 4.0, 5.0, 6.0, 8.0, 9.0]);
    }

    #[test]
    fn each_mistake_names_its_field() {
        let f32s = linear("f32");
        let err = error(&LINEAR.replace("b_layout = \"col\"\n", "b_layout = \"col\"\nldb = \"28\"\n"), &f32s);
        assert!(err.contains("kernel.matmul.ldb") && err.contains("29 elements of a column of B (b_layout = \"col\")"), "{err}");
        let err =
            error(LINEAR, &[("inp", "f32", "m * k", false), ("weight", "f32", "n * k - 1", false), ("bias", "f32", "n", false), ("out", "f32", "m * n", true)]);
        assert!(err.contains("kernel.matmul.b:") && err.contains("1304 elements; the GEMM reads 1305"), "{err}");
        let err = edited(LINEAR, &f32s, |ctx| table(ctx).bias = Some("nope".into())).unwrap_err().to_string();
        assert!(err.contains("kernel.matmul.bias: no array named 'nope'"), "{err}");
        let err = edited(LINEAR, &f32s, |ctx| table(ctx).lda = Some("k +".into())).unwrap_err().to_string();
        assert!(err.contains("kernel.matmul.lda: cannot parse `k +`"), "{err}");
        let err = error(
            &format!("{LINEAR}batch = \"2\"\nstride_c = \"10\"\n"),
            &[("inp", "f32", "2 * m * k", false), ("weight", "f32", "2 * n * k", false), ("bias", "f32", "n", false), ("out", "f32", "2 * m * n", true)],
        );
        assert!(err.contains("kernel.matmul.stride_c") && err.contains("do not write over each other"), "{err}");
    }

    #[test]
    fn types_cublaslt_has_no_gemm_for_are_refused_with_the_field() {
        let arrays = |a: &'static str, b: &'static str, c: &'static str, bias: &'static str| {
            [("inp", a, "m * k", false), ("weight", b, "n * k", false), ("bias", bias, "n", false), ("out", c, "m * n", true)]
        };
        let err = edited(LINEAR, &arrays("f32", "f32", "f32", "f32"), |ctx| ctx.manifest.arrays[0].dtype = DType::I32).unwrap_err().to_string();
        assert!(err.contains("kernel.matmul.a: array inp is i32; cuBLASLt's baseline multiplies f32, f16 or bf16"), "{err}");
        let err = error(LINEAR, &arrays("f16", "bf16", "f16", "f16"));
        assert!(err.contains("kernel.matmul.b: array weight is bf16 but A (inp) is f16"), "{err}");
        let err = error(LINEAR, &arrays("f32", "f32", "f16", "f16"));
        assert!(err.contains("kernel.matmul.c: array out is f16; with f32 operands C is f32"), "{err}");
        let err = error(LINEAR, &arrays("f16", "f16", "f16", "f32"));
        assert!(err.contains("kernel.matmul.bias: array bias is f32; cuBLASLt reads it as C's type, f16"), "{err}");
        // Half operands may write an f32 C, with an f32 bias.
        assert!(resolved(LINEAR, &arrays("f16", "f16", "f32", "f32")).is_ok());
        assert!(resolved(LINEAR, &arrays("bf16", "bf16", "f32", "f32")).is_ok());
    }

    #[test]
    fn a_residual_fuses_only_where_cublaslt_adds_it_last() {
        let arrays = [
            ("inp", "f16", "m * k", false),
            ("weight", "f16", "n * k", false),
            ("bias", "f16", "n", false),
            ("res", "f16", "m * n", false),
            ("out", "f16", "m * n", true),
        ];
        let plain = LINEAR.replace("activation = \"gelu-tanh\"\n", "residual = \"res\"\n");
        let gemm = resolved(&plain, &arrays).unwrap();
        assert_eq!(gemm.residual.map(|r| r.index), Some(3));
        let err = error(&format!("{LINEAR}residual = \"res\"\n"), &arrays);
        assert!(err.contains("kernel.matmul.residual") && err.contains("activation = \"gelu-tanh\""), "{err}");
        let err = error(&format!("{plain}beta = 0.5\n"), &arrays);
        assert!(err.contains("kernel.matmul.residual") && err.contains("beta = 0.5"), "{err}");
        let err = error(&plain.replace("c = \"out\"", "c = \"res\"").replace("residual = \"res\"", ""), &arrays);
        assert!(err.contains("kernel.matmul.c: array res is not an output"), "{err}");
    }

    #[test]
    fn beta_needs_c_to_start_from_its_init() {
        let plain = LINEAR.replace("activation = \"gelu-tanh\"\n", "beta = 0.5\n");
        // An output only is poisoned before the kernel runs: cuBLASLt's C and the kernel's would differ.
        let err = error(&plain, &linear("f32"));
        assert!(err.contains("kernel.matmul.beta") && err.contains("inout = true"), "{err}");
        let in_place = |ctx: &mut Context| ctx.manifest.arrays.iter_mut().find(|a| a.name == "out").unwrap().inout = true;
        let gemm = edited(&plain, &linear("f32"), in_place).unwrap();
        assert_eq!(gemm.beta, 0.5);
    }
}
