// Helpers outside #[test] functions unwrap too; clippy's allow-unwrap-in-tests does not reach them here (rust-clippy#13981).
#![allow(clippy::unwrap_used)]
use peak_spec::{Context, DType, Init, Manifest, Region, SpecError};

const MANIFEST: &str = r#"
[kernel]
name = "matmul"
backend = "opencl"
source = "kernel.cl"
flops = "2 * n * n * n"

[inputs]
n = { values = [256, 512] }

[[arrays]]
name = "A"
type = "f32"
size = "n * n"
init = "random"
seed = 1

[[arrays]]
name = "C"
type = "f16"
size = "n * n"
init = "zeros"
output = true

[tuning]
BLOCK_X = { pow2 = [1, 32] }
BLOCK_Y = { range = [2, 8], step = 2 }

[constraints]
inputs = ["n % 16 == 0"]
tuning = ["BLOCK_X * BLOCK_Y <= 64", "n % BLOCK_X == 0"]

[tolerance]
f16 = 0.01
accumulation = "n"
"#;

const SOURCE: &str = "// @peak macros\n#define IDX(r, c) ((r) * n + (c))\n// @peak device\n__kernel void matmul() {}\n// @peak host\nlaunch(\"matmul\", [n / BLOCK_X, n / BLOCK_Y], [BLOCK_X, BLOCK_Y], 0, A, C, n);\n";

fn write_context(manifest: &str, source: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("peak.toml"), manifest).unwrap();
    std::fs::write(dir.path().join("kernel.cl"), source).unwrap();
    dir
}

fn load_err(manifest: &str, source: &str) -> String {
    let dir = write_context(manifest, source);
    Context::load(dir.path()).unwrap_err().to_string()
}

#[test]
fn reading_gives_typed_values() {
    let dir = write_context(MANIFEST, SOURCE);
    let ctx = Context::load(dir.path()).unwrap();
    assert_eq!(ctx.name(), "matmul");
    assert_eq!(ctx.backend(), peak_spec::Language::Opencl);
    assert_eq!(ctx.manifest.arrays[1].dtype, DType::F16);
    assert_eq!(ctx.manifest.arrays[0].init, Init::Random);
    assert!(ctx.manifest.arrays[1].output);
    assert_eq!(ctx.manifest.tuning["BLOCK_X"].expand().unwrap(), vec![1, 2, 4, 8, 16, 32]);
    assert_eq!(ctx.manifest.tuning["BLOCK_Y"].expand().unwrap(), vec![2, 4, 6, 8]);
    assert_eq!(ctx.region(Region::Macros), "#define IDX(r, c) ((r) * n + (c))\n");
}

#[test]
fn writing_back_is_lossless() {
    let dir = write_context(MANIFEST, SOURCE);
    let ctx = Context::load(dir.path()).unwrap();
    let out = tempfile::tempdir().unwrap();
    ctx.save(out.path()).unwrap();
    let again = Context::load(out.path()).unwrap();
    assert_eq!(again.manifest, ctx.manifest);
    assert_eq!(again.regions, ctx.regions);
    assert_eq!(std::fs::read_to_string(out.path().join("kernel.cl")).unwrap(), SOURCE);
    // A second trip reproduces the first one's bytes exactly.
    let out2 = tempfile::tempdir().unwrap();
    again.save(out2.path()).unwrap();
    assert_eq!(std::fs::read_to_string(out.path().join("peak.toml")).unwrap(), std::fs::read_to_string(out2.path().join("peak.toml")).unwrap());
}

#[test]
fn space_counts_iterates_and_samples() {
    let dir = write_context(MANIFEST, SOURCE);
    let ctx = Context::load(dir.path()).unwrap();
    let space = ctx.space();
    // Brute force the constraints to know the right count independently of the iterator.
    let mut expected = 0;
    for n in [256, 512] {
        for bx in [1, 2, 4, 8, 16, 32] {
            for by in [2, 4, 6, 8] {
                if bx * by <= 64 && n % bx == 0 {
                    expected += 1;
                }
            }
        }
    }
    assert_eq!(space.count(), expected);
    let all: Vec<_> = space.iter().collect();
    assert_eq!(all.len(), expected);
    assert!(all.iter().all(|p| p.get("BLOCK_X").unwrap() * p.get("BLOCK_Y").unwrap() <= 64));
    let s1 = space.sample(5, 42);
    let s2 = space.sample(5, 42);
    let s3 = space.sample(5, 43);
    assert_eq!(s1, s2);
    assert_ne!(s1, s3);
    assert_eq!(s1.len(), 5);
    assert!(s1.iter().all(|p| all.contains(p)));
    assert_eq!(space.sample(1000, 1).len(), expected);
}

#[test]
fn overrides_restrict_and_reject_unknown_names() {
    let dir = write_context(MANIFEST, SOURCE);
    let ctx = Context::load(dir.path()).unwrap();
    let mut space = ctx.space();
    space.apply_overrides(&["n=256", "BLOCK_X=8,16"]).unwrap();
    assert!(space.iter().all(|p| p.get("n") == Some(256)));
    assert_eq!(space.count(), 4 + 2); // BLOCK_X=8 with every BLOCK_Y, 16 with 2 and 4
    let err = ctx.space().apply_overrides(&["BLOCKX=8"]).unwrap_err();
    assert!(matches!(err, SpecError::Override { .. }));
    let msg = err.to_string();
    assert!(msg.contains("BLOCKX") && msg.contains("BLOCK_X"), "{msg}");
}

#[test]
fn malformed_manifest_names_file_and_line() {
    let err = load_err("[kernel\nname = 1", SOURCE);
    assert!(err.contains("peak.toml"), "{err}");
    assert!(err.contains("line 1"), "{err}");
}

#[test]
fn unknown_field_is_rejected() {
    let err = load_err(&MANIFEST.replace("flops =", "flopz ="), SOURCE);
    assert!(err.contains("peak.toml") && err.contains("flopz"), "{err}");
}

#[test]
fn unparsable_size_expression_names_the_array() {
    let err = load_err(&MANIFEST.replace("size = \"n * n\"\ninit = \"random\"", "size = \"n * * n\"\ninit = \"random\""), SOURCE);
    assert!(err.contains("arrays[0].size") && err.contains("n * * n"), "{err}");
}

#[test]
fn constraint_with_unknown_parameter_is_rejected() {
    let err = load_err(&MANIFEST.replace("BLOCK_X * BLOCK_Y <= 64", "BLOCK_Z * BLOCK_Y <= 64"), SOURCE);
    assert!(err.contains("constraints.tuning[0]") && err.contains("BLOCK_Z"), "{err}");
    let err = load_err(&MANIFEST.replace("n % 16 == 0", "n % BLOCK_X == 0"), SOURCE);
    assert!(err.contains("constraints.inputs[0]"), "{err}");
}

#[test]
fn missing_region_marker_names_the_source() {
    let err = load_err(MANIFEST, "// @peak macros\n// @peak device\n__kernel void k() {}\n");
    assert!(err.contains("kernel.cl") && err.contains("// @peak host"), "{err}");
}

#[test]
fn bad_domains_and_duplicates_are_rejected() {
    let err = load_err(&MANIFEST.replace("{ pow2 = [1, 32] }", "{ pow2 = [1, 32], values = [1] }"), SOURCE);
    assert!(err.contains("tuning.BLOCK_X"), "{err}");
    let err = load_err(&MANIFEST.replace("{ range = [2, 8], step = 2 }", "{ range = [8, 2] }"), SOURCE);
    assert!(err.contains("tuning.BLOCK_Y") && err.contains("empty"), "{err}");
    let err = load_err(&MANIFEST.replace("name = \"C\"", "name = \"A\""), SOURCE);
    assert!(err.contains("declared twice"), "{err}");
    let err = load_err(&MANIFEST.replace("type = \"f16\"", "type = \"f64\""), SOURCE);
    assert!(err.contains("f64"), "{err}");
}

#[test]
fn scalars_are_named_floats_in_the_inputs_namespace() {
    let with = |table: &str| MANIFEST.replace("[inputs]\n", &format!("[scalars]\n{table}\n\n[inputs]\n"));
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("peak.toml"), with("eps = 1e-5\nlr = 3")).unwrap();
    std::fs::write(dir.path().join("kernel.cl"), SOURCE).unwrap();
    let ctx = Context::load(dir.path()).unwrap();
    assert_eq!(ctx.manifest.scalars.iter().map(|(n, v)| (n.as_str(), *v)).collect::<Vec<_>>(), [("eps", 1e-5), ("lr", 3.0)]);
    assert!(
        ctx.manifest
            .describe_kernel()
            .contains("Float scalars ([scalars], fixed; host-script variables of these names, passed to the kernel as f32): eps = 1e-5, lr = 3.0.")
    );
    let err = load_err(&with("n = 0.5"), SOURCE);
    assert!(err.contains("scalars.n") || err.contains("inputs.n"), "{err}");
    assert!(err.contains("declared twice"), "{err}");
    let err = load_err(&with("eps = \"small\""), SOURCE);
    assert!(err.contains("eps") || err.contains("scalars"), "{err}");
}

#[test]
fn manifest_round_trips_through_text() {
    let m = Manifest::parse("peak.toml", MANIFEST).unwrap();
    let again = Manifest::parse("peak.toml", &m.to_toml()).unwrap();
    assert_eq!(m, again);
}

#[test]
fn a_space_too_large_to_enumerate_is_sampled_without_walking_it() {
    // 6 tuning parameters of 32 values: ~10^9 points, far past what sampling enumerates.
    let tuning: String = (0..6).map(|i| format!("P{i} = {{ range = [1, 32] }}\n")).collect();
    let manifest = MANIFEST
        .replace(
            "BLOCK_X = { pow2 = [1, 32] }\nBLOCK_Y = { range = [2, 8], step = 2 }\n",
            &format!("BLOCK_X = {{ pow2 = [1, 32] }}\nBLOCK_Y = {{ range = [2, 8], step = 2 }}\n{tuning}"),
        )
        .replace(
            "tuning = [\"BLOCK_X * BLOCK_Y <= 64\", \"n % BLOCK_X == 0\"]",
            "tuning = [\"BLOCK_X * BLOCK_Y <= 64\", \"n % BLOCK_X == 0\", \"P0 + P1 <= 40\"]",
        );
    let dir = write_context(&manifest, SOURCE);
    let ctx = Context::load(dir.path()).unwrap();
    let space = ctx.space();
    assert!(space.product_size() > peak_spec::space::ENUMERATED_PRODUCT);
    let started = std::time::Instant::now();
    let picked = space.sample(16, 7);
    assert!(started.elapsed().as_secs() < 30, "sampling walked the space");
    assert_eq!(picked.len(), 16);
    assert_eq!(picked, space.sample(16, 7), "the same seed picks the same points");
    assert!(picked.iter().all(|p| space.is_valid(p) && p.get("P0").unwrap() + p.get("P1").unwrap() <= 40));
    let mut distinct = picked.clone();
    distinct.dedup();
    assert_eq!(distinct.len(), 16);
}

#[test]
fn kind_description_and_roles_are_read_and_checked() {
    let with = |lines: &str| MANIFEST.replacen("flops = \"2 * n * n * n\"\n", &format!("flops = \"2 * n * n * n\"\n{lines}\n"), 1);
    let m = Manifest::parse("peak.toml", &with("domain = \"stencil\"\ndescription = \"A 3x3 blur.\"\n[kernel.roles]\nTILE = \"BLOCK_X\"")).unwrap();
    assert_eq!(m.kernel.domain(), Some("stencil"));
    assert_eq!(m.kernel.roles["TILE"], "BLOCK_X");
    assert_eq!(
        m.describe_kernel(),
        "Kernel `matmul` (pattern: a stencil, convolution or pooling (each output from a fixed neighbourhood of inputs)). A 3x3 blur.\nScalar inputs: n.\nArrays: A (f32, n * n elements, input), C (f16, n * n elements, output)."
    );
    let plain = Manifest::parse("peak.toml", MANIFEST).unwrap();
    assert_eq!(plain.kernel.domain(), None, "no declaration, no kind");
    assert_eq!(plain.kernel.library, None);
    let named = Manifest::parse("peak.toml", &with("library = \"torch.matmul(A.view(n, n), A.view(n, n))\"")).unwrap();
    assert_eq!(named.kernel.library.as_deref(), Some("torch.matmul(A.view(n, n), A.view(n, n))"));
    let err = Manifest::parse("peak.toml", &with("libary = \"x\"")).unwrap_err().to_string();
    assert!(err.contains("libary"), "a misspelt key is named: {err}");
    assert!(plain.describe_kernel().contains("The context does not describe it"));

    let err = Manifest::parse("peak.toml", &with("domain = \"two words\"")).unwrap_err().to_string();
    assert!(err.contains("kernel.domain") && err.contains("not a kind of kernel"), "{err}");
    let err = Manifest::parse("peak.toml", &with("[kernel.roles]\nTILE = \"BX\"")).unwrap_err().to_string();
    assert!(err.contains("kernel.roles.TILE") && err.contains("'BX' is not an input or tuning parameter"), "{err}");
    let err = Manifest::parse("peak.toml", &with("[kernel.roles]\nBLOCK_Y = \"BLOCK_X\"")).unwrap_err().to_string();
    assert!(err.contains("already has a parameter named 'BLOCK_Y'"), "{err}");
}

#[test]
fn a_matmul_shape_is_a_matmul_kernel_described_by_its_shape() {
    let text = MANIFEST.replacen("[inputs]", "[kernel.matmul]\nm = \"n\"\nn = \"n\"\nk = \"n\"\na = \"A\"\nb = \"A\"\nc = \"C\"\n\n[inputs]", 1);
    let m = Manifest::parse("peak.toml", &text).unwrap();
    assert_eq!(m.kernel.domain(), Some("matmul"));
    assert!(
        m.describe_kernel().starts_with("Kernel `matmul` (kind: matmul; pattern: a GEMM (a matrix product, possibly with transposed operands, a batch and an epilogue)). It computes a GEMM of M = n, N = n, K = n: for every row < M and col < N, acc = sum over kk < K of A[row, kk] * B[kk, col], where A[row, kk] is A[row * (n) + kk] and B[kk, col] is A[kk * (n) + col]; then C[row * (n) + col] = acc."),
        "{}",
        m.describe_kernel()
    );
}

#[test]
fn a_gemm_describes_its_layouts_and_epilogue() {
    let shape = "[kernel.matmul]\nm = \"n\"\nn = \"2 * n\"\nk = \"n\"\na = \"A\"\nb = \"A\"\nc = \"C\"\nb_layout = \"col\"\nbias = \"A\"\nactivation = \"gelu-tanh\"\nalpha = 0.5\n\n[inputs]";
    let m = Manifest::parse("peak.toml", &MANIFEST.replacen("[inputs]", shape, 1)).unwrap();
    let text = m.kernel.matmul.as_ref().unwrap().describe();
    assert!(text.contains("B[kk, col] is A[col * (n) + kk]"), "a transposed B is read along k: {text}");
    assert!(text.contains("C[row * (2 * n) + col] = gelu_tanh(0.5 * acc + A[col])"), "the epilogue, in order: {text}");
    // Sizes that do not use the names m, n or k keep them as the indices.
    let fixed = shape.replace("m = \"n\"\nn = \"2 * n\"\nk = \"n\"", "m = \"64\"\nn = \"32\"\nk = \"16\"");
    let text = Manifest::parse("peak.toml", &MANIFEST.replacen("[inputs]", &fixed, 1)).unwrap().kernel.matmul.as_ref().unwrap().describe();
    assert!(text.contains("for every m < M and n < N") && text.contains("B[k, n] is A[n * (16) + k]"), "{text}");
    let text = Manifest::parse("peak.toml", &MANIFEST.replacen("[inputs]", &shape.replace("b_layout = \"col\"", "b_layout = \"diagonal\""), 1))
        .unwrap_err()
        .to_string();
    assert!(text.contains("b_layout") || text.contains("diagonal"), "{text}");
    let err = Manifest::parse("peak.toml", &MANIFEST.replacen("[inputs]", &shape.replace("bias = \"A\"", "bias = \"nope\""), 1)).unwrap_err().to_string();
    assert!(err.contains("kernel.matmul.bias") && err.contains("no array named 'nope'"), "{err}");
}

#[test]
fn a_pattern_is_declared_implied_by_a_known_kind_or_read_off_the_code() {
    let with = |lines: &str| MANIFEST.replacen("flops = \"2 * n * n * n\"\n", &format!("flops = \"2 * n * n * n\"\n{lines}\n"), 1);
    let m = Manifest::parse("peak.toml", &with("pattern = \"row-reduction\"\ndomain = \"layernorm\"")).unwrap();
    assert_eq!(m.kernel.declared_pattern(), Some(peak_spec::Pattern::RowReduction));
    assert!(m.describe_kernel().starts_with("Kernel `matmul` (kind: layernorm; pattern: a row-wise reduction"), "{}", m.describe_kernel());
    let layernorm = Manifest::parse("peak.toml", &with("domain = \"layernorm\"")).unwrap();
    assert_eq!(layernorm.kernel.declared_pattern(), Some(peak_spec::Pattern::RowReduction), "a well-known kind implies its pattern");
    let unknown = Manifest::parse("peak.toml", &with("domain = \"frobnicate\"")).unwrap();
    assert_eq!(unknown.kernel.declared_pattern(), None);
    let err = Manifest::parse("peak.toml", &with("pattern = \"softmax\"")).unwrap_err().to_string();
    assert!(err.contains("softmax") && err.contains("row-reduction"), "a pattern is one of the list: {err}");

    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("peak.toml"), MANIFEST).unwrap();
    std::fs::write(dir.path().join("kernel.cl"), SOURCE).unwrap();
    let ctx = Context::load(dir.path()).unwrap();
    let inferred = ctx.pattern().unwrap();
    assert_eq!((inferred.pattern, inferred.evidence.as_str()), (peak_spec::Pattern::Gemm, "the kernel's name `matmul`"));
}

#[test]
fn validation_sizes_move_the_inputs_validation_samples_from() {
    let with = |lines: &str| format!("{MANIFEST}\n{lines}\n");
    let m = Manifest::parse("peak.toml", &with("[validation.inputs]\nn = { values = [48] }")).unwrap();
    let mut space = peak_spec::Space::new(&m).unwrap();
    space.at_validation_sizes(&m, &[] as &[&str]).unwrap();
    assert_eq!(space.values("n"), Some(&[48][..]), "validation runs at its own sizes");
    let mut asked = peak_spec::Space::new(&m).unwrap();
    asked.apply_overrides(&["n=256"]).unwrap();
    asked.at_validation_sizes(&m, &["n=256"]).unwrap();
    assert_eq!(asked.values("n"), Some(&[256][..]), "a size the user sets by name is validated there");
    let untouched = peak_spec::Space::new(&m).unwrap();
    assert_ne!(untouched.values("n"), Some(&[48][..]), "tuning keeps [inputs]");

    let err = Manifest::parse("peak.toml", &with("[validation.inputs]\nrows = { values = [48] }")).unwrap_err().to_string();
    assert!(err.contains("validation.inputs.rows") && err.contains("not a scalar input"), "{err}");
    let err = Manifest::parse("peak.toml", &with("[validation.inputs]\nn = { values = [] }")).unwrap_err().to_string();
    assert!(err.contains("validation.inputs.n") && err.contains("empty"), "{err}");
}

#[test]
fn the_kernels_a_launch_script_runs_are_named_once_each() {
    let host = "// launch(\"old\", 1, 1, 0);\nlet t = alloc(\"f32\", n);\nfor i in 0..2 { launch(\"first\", 1, 1, 0, A, t, n); }\nlaunch( \"second\", 1, 1, 0, t, C, n);\nmy_launch(\"not_a_launch\");\n";
    let source = format!("// @peak macros\n// @peak device\n__kernel void first() {{}}\n__kernel void second() {{}}\n// @peak host\n{host}");
    let dir = write_context(MANIFEST, &source);
    let ctx = Context::load(dir.path()).unwrap();
    let names: Vec<String> = ctx.launched_kernels().into_iter().collect();
    assert_eq!(names, ["first", "second"], "a commented-out call and another function's call do not count");
}

/// A CUDA GEMM with e4m3 inputs, an e5m2 array and a bf16 output.
fn fp8_manifest(backend: &str) -> String {
    format!(
        r#"
[kernel]
name = "gemm"
backend = "{backend}"
source = "kernel.cl"

[kernel.matmul]
m = "n"
n = "n"
k = "n"
a = "A"
b = "B"
c = "C"
b_layout = "col"

[inputs]
n = {{ values = [64] }}

[[arrays]]
name = "A"
type = "e4m3"
size = "n * n"
init = "random"
seed = 1

[[arrays]]
name = "B"
type = "e5m2"
size = "n * n"
init = "normal"
scale = 2.0
seed = 2

[[arrays]]
name = "C"
type = "bf16"
size = "n * n"
init = "zeros"
output = true

[tolerance]
e4m3 = 0.2
e5m2 = 0.3
"#
    )
}

#[test]
fn fp8_arrays_round_trip_through_the_manifest() {
    let dir = write_context(&fp8_manifest("cuda"), SOURCE);
    let ctx = Context::load(dir.path()).unwrap();
    let types: Vec<DType> = ctx.manifest.arrays.iter().map(|a| a.dtype).collect();
    assert_eq!(types, [DType::E4m3, DType::E5m2, DType::Bf16]);
    assert_eq!(DType::E4m3.size_bytes(), 1);
    let tol = ctx.manifest.tolerance.as_ref().unwrap();
    assert_eq!((tol.for_dtype(DType::E4m3), tol.for_dtype(DType::E5m2), tol.for_dtype(DType::Bf16)), (Some(0.2), Some(0.3), None));
    let out = tempfile::tempdir().unwrap();
    ctx.save(out.path()).unwrap();
    let written = std::fs::read_to_string(out.path().join("peak.toml")).unwrap();
    assert!(written.contains("type = \"e4m3\"") && written.contains("type = \"e5m2\"") && written.contains("e4m3 = 0.2"), "{written}");
    assert_eq!(Context::load(out.path()).unwrap().manifest, ctx.manifest);
    let err = "fp9".parse::<DType>().unwrap_err();
    assert!(err.contains("e4m3, e5m2"), "{err}");
}

#[test]
fn fp8_arrays_are_refused_on_backends_without_fp8() {
    for backend in ["opencl", "hip", "hlsl"] {
        let err = load_err(&fp8_manifest(backend), SOURCE);
        assert!(err.contains("array 'A' is e4m3") && err.contains(&format!("the {backend} backend has no fp8 type")), "{backend}: {err}");
    }
    let bad = fp8_manifest("cuda").replace("e4m3 = 0.2", "e4m3 = -1.0");
    assert!(load_err(&bad, SOURCE).contains("tolerance.e4m3"));
}
