//! Property-based fuzzing of peak-backend's launch-script runtime (issue 16, "parsers that
//! cannot panic"): `script::build_plan` runs arbitrary small host scripts (generated from
//! the launch-script API, Rhai control flow and raw text) against a tiny context, and
//! `runner::size_arrays` / `runner::run_compiled` size arrays and replay plans on a fake,
//! memory-free backend, with inputs at the edges of i64 (sizes far beyond memory).
//!
//! The property: a plan, a run result or a clear error, never a panic, an integer-overflow
//! panic or a hang (the engine's operation budget stops endless loops).

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use peak_backend::backend::{BufferId, BufferLookup, CompileRequest, DeviceInfo, EventId, KernelArg, Launch, Module, OpPhase, ScriptFunction};
use peak_backend::plan::BackendOp;
use peak_backend::runner::{self, RunOptions};
use peak_backend::script::{ScriptArray, ScriptError, ScriptInput, build_plan};
use peak_backend::{Backend, BackendError};
use peak_spec::{Context, DType, ExecParams, Manifest, Regions};
use proptest::prelude::*;
use proptest::test_runner::Config;

fn config(cases: u32) -> Config {
    Config { cases, failure_persistence: None, ..Config::default() }
}

fn device() -> DeviceInfo {
    DeviceInfo {
        backend: "fake".into(),
        name: "fake".into(),
        driver: "0".into(),
        arch: String::new(),
        compute_units: 4,
        max_threads_per_block: 1024,
        max_shared_bytes: 49152,
        warp_size: 32,
        global_memory_bytes: 1 << 30,
    }
}

fn extensions() -> Vec<ScriptFunction> {
    vec![
        ScriptFunction { name: "ext_setup", arity: 2, phase: OpPhase::Setup, doc: "" },
        ScriptFunction { name: "ext_run", arity: 1, phase: OpPhase::EveryRun, doc: "" },
        ScriptFunction { name: "ext_arg", arity: 1, phase: OpPhase::Argument, doc: "" },
    ]
}

/// A backend that holds no memory: it hands out ids, refuses more than a MiB, and does
/// nothing on launch.
struct Fake {
    device: DeviceInfo,
    next: AtomicU64,
}

impl Fake {
    fn new() -> Fake {
        Fake { device: device(), next: AtomicU64::new(1) }
    }
}

impl Backend for Fake {
    fn device(&self) -> &DeviceInfo {
        &self.device
    }
    fn compile(&self, _request: &CompileRequest) -> Result<Module, BackendError> {
        Ok(Module { handle: Arc::new(()), log: String::new(), kernels: Vec::new() })
    }
    fn alloc(&self, bytes: usize) -> Result<BufferId, BackendError> {
        if bytes > 1 << 20 {
            return Err(BackendError::OutOfMemory { bytes });
        }
        Ok(BufferId(self.next.fetch_add(1, Ordering::Relaxed)))
    }
    fn free(&self, _buffer: BufferId) {}
    fn write(&self, _buffer: BufferId, _data: &[u8]) -> Result<(), BackendError> {
        Ok(())
    }
    fn read(&self, _buffer: BufferId, out: &mut [u8]) -> Result<(), BackendError> {
        out.fill(0);
        Ok(())
    }
    fn copy(&self, _src: BufferId, _dst: BufferId, _bytes: usize) -> Result<(), BackendError> {
        Ok(())
    }
    fn fill(&self, _buffer: BufferId, _pattern: &[u8], _bytes: usize) -> Result<(), BackendError> {
        Ok(())
    }
    fn launch(&self, _module: &Module, _launch: &Launch) -> Result<(), BackendError> {
        Ok(())
    }
    fn record_event(&self) -> Result<EventId, BackendError> {
        Ok(EventId(0))
    }
    fn elapsed_ms(&self, _start: EventId, _end: EventId) -> Result<f64, BackendError> {
        Ok(0.0)
    }
    fn synchronize(&self) -> Result<(), BackendError> {
        Ok(())
    }
    fn script_functions(&self) -> Vec<ScriptFunction> {
        extensions()
    }
    fn run_op(&self, _module: &Module, _op: &BackendOp, _buffers: &BufferLookup) -> Result<(), BackendError> {
        Ok(())
    }
    fn op_argument(&self, _module: &Module, _op: &BackendOp, _buffers: &BufferLookup) -> Result<KernelArg, BackendError> {
        Ok(KernelArg::I32(0))
    }
}

fn edge_i64() -> impl Strategy<Value = i64> {
    prop_oneof![
        Just(i64::MIN),
        Just(i64::MAX),
        Just(0),
        Just(1),
        Just(-1),
        Just(1 << 31),
        Just(1 << 32),
        Just(1 << 62),
        Just(u32::MAX as i64),
        Just(u32::MAX as i64 + 1),
        -100i64..100,
        any::<i64>(),
    ]
}

/// A parameter value: mostly a sensible one, sometimes an edge of i64.
fn value() -> impl Strategy<Value = i64> {
    prop_oneof![3 => 1i64..64, 1 => edge_i64()]
}

/// An expression in the launch-script language, over the context's names.
fn expr() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![
        4 => proptest::sample::select(&["n", "BLOCK", "WARP_SIZE", "MAX_THREADS_PER_BLOCK", "MAX_SHARED_BYTES", "COMPUTE_UNITS", "A.len", "C.len", "x", "undefined_var"][..]).prop_map(str::to_string),
        4 => edge_i64().prop_map(|v| if v < 0 { format!("({v})") } else { v.to_string() }),
        1 => proptest::sample::select(&["1.5", "-0.0", "1e308 * 10.0", "true", "\"s\"", "()", "[]", "[1, 2, 3]", "[1, \"a\"]", "#{a: 1}", "'c'", "A", "C", "9223372036854775808"][..]).prop_map(str::to_string),
    ];
    leaf.prop_recursive(3, 16, 3, |inner| {
        let op = proptest::sample::select(&["+", "-", "*", "/", "%", "**", "<<", ">>", "&", "|", "^", "==", "<", ">=", "&&", "||"][..]);
        let unary =
            proptest::sample::select(&["ceil_div", "min", "max", "i32", "u32", "i64", "f32", "abs", "to_string", "sqrt", "parse_int", "blob", "range"][..]);
        prop_oneof![
            4 => (inner.clone(), op, inner.clone()).prop_map(|(a, op, b)| format!("{a} {op} {b}")),
            2 => (unary, inner.clone(), inner.clone()).prop_map(|(f, a, b)| {
                if matches!(f, "ceil_div" | "min" | "max" | "range") { format!("{f}({a}, {b})") } else { format!("{f}({a})") }
            }),
            1 => (inner.clone(), inner.clone(), inner.clone()).prop_map(|(a, b, c)| format!("[{a}, {b}, {c}]")),
            1 => (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("{a}[{b}]")),
            1 => (inner.clone()).prop_map(|a| format!("-({a})")),
            1 => (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("\"ab\".pad({a}, {b})")),
            1 => (inner.clone(), inner).prop_map(|(a, b)| format!("[0].pad({a}, {b})")),
        ]
    })
}

/// One statement of a launch script.
fn statement() -> impl Strategy<Value = String> {
    let dtype = proptest::sample::select(&["\"f32\"", "\"f16\"", "\"bf16\"", "\"i32\"", "\"u32\"", "\"f64\"", "1"][..]);
    let buffer = proptest::sample::select(&["A", "C", "s", "x", "1"][..]);
    prop_oneof![
        6 => (expr(), expr(), expr(), proptest::collection::vec(expr(), 0..4)).prop_map(|(g, b, sh, args)| {
            let mut call = format!("launch(\"k\", {g}, {b}, {sh}");
            for a in args {
                call.push_str(", ");
                call.push_str(&a);
            }
            call + ");"
        }),
        2 => Just("launch(\"k\", [n, 1], [BLOCK, 1, 1], 0, A, C, n);".to_string()),
        3 => expr().prop_map(|e| format!("let x = {e};")),
        3 => (dtype, expr()).prop_map(|(t, e)| format!("let s = alloc({t}, {e});")),
        2 => (buffer.clone(), expr()).prop_map(|(b, e)| format!("fill({b}, {e});")),
        2 => (buffer.clone(), buffer.clone()).prop_map(|(a, b)| format!("copy({a}, {b});")),
        1 => (expr(), expr()).prop_map(|(a, b)| format!("ext_setup({a}, {b});")),
        1 => (buffer, expr()).prop_map(|(b, e)| format!("ext_run([{b}, {e}]);")),
        1 => expr().prop_map(|e| format!("launch(\"k\", 1, 1, 0, ext_arg({e}));")),
        1 => expr().prop_map(|e| format!("print({e});")),
        1 => expr().prop_map(|e| format!("if {e} {{ invalid(\"no\"); }}")),
        1 => (expr(), expr()).prop_map(|(a, b)| format!("for i in {a}..{b} {{ let x = i; }}")),
        1 => expr().prop_map(|e| format!("let x = {e}; x += {e}; x *= {e};")),
        1 => proptest::sample::select(&[
            "fn f(v) { f(v + 1) } f(0);",
            "fn g(v) { if v > 0 { g(v - 1) } else { 0 } } g(40);",
            "let a = []; a.push(a);",
            "eval(\"1\");",
            "import \"x\" as y;",
            "throw \"boom\";",
            "let s = \"\"; for i in 0..20 { s += s + \"xx\"; }",
            "let a = [1]; for i in 0..20 { a += a; }",
            "A = 1;",
            "n = 1;",
            "let y = A + C;",
            "}",
            "{",
            "let",
            ";;",
            "//",
            "/*",
        ][..]).prop_map(str::to_string),
        1 => "\\PC{0,16}",
    ]
}

/// A small, mostly in-range expression, so that scripts get past their first line.
fn small_expr() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![
        3 => proptest::sample::select(&["n", "BLOCK", "WARP_SIZE", "A.len", "C.len"][..]).prop_map(str::to_string),
        3 => (0i64..70).prop_map(|v| v.to_string()),
    ];
    leaf.prop_recursive(2, 6, 2, |inner| {
        let op = proptest::sample::select(&["+", "-", "*", "/", "%"][..]);
        let func = proptest::sample::select(&["ceil_div", "min", "max"][..]);
        prop_oneof![
            (inner.clone(), op, inner.clone()).prop_map(|(a, op, b)| format!("{a} {op} {b}")),
            (func, inner.clone(), inner).prop_map(|(f, a, b)| format!("{f}({a}, {b})")),
        ]
    })
}

/// A statement a real launch script would hold, with small values.
fn good_statement() -> impl Strategy<Value = String> {
    let dtype = proptest::sample::select(&["\"f32\"", "\"f16\"", "\"bf16\"", "\"i32\"", "\"u32\""][..]);
    prop_oneof![
        3 => (small_expr(), small_expr(), small_expr()).prop_map(|(g, b, sh)| format!("launch(\"k\", [{g}, 2], {b}, {sh}, A, C, n, u32({g}), f32(1.5), i64(n));")),
        2 => small_expr().prop_map(|e| format!("let x = {e};")),
        2 => (dtype, small_expr()).prop_map(|(t, e)| format!("let s = alloc({t}, {e}); fill(s, 0); copy(C, s);")),
        1 => small_expr().prop_map(|e| format!("fill(A, {e}); fill(C, 0.5);")),
        1 => small_expr().prop_map(|e| format!("ext_setup(A, {e}); ext_run([C, {e}, \"x\", true, 1.5]);")),
        1 => small_expr().prop_map(|e| format!("launch(\"k\", {e}, 1, 0, ext_arg(A));")),
        1 => small_expr().prop_map(|e| format!("if {e} > 8 {{ invalid(\"too big\"); }}")),
        1 => small_expr().prop_map(|e| format!("for i in 0..{e} {{ fill(A, i); }}")),
        1 => small_expr().prop_map(|e| format!("print({e});")),
    ]
}

/// Mostly sound statements, some wild ones, often ending with a launch that works.
fn script() -> impl Strategy<Value = String> {
    (proptest::collection::vec(prop_oneof![5 => good_statement(), 1 => statement()], 0..6), any::<bool>()).prop_map(|(mut s, end)| {
        if end {
            s.push("launch(\"k\", [n, 1], [BLOCK, 1, 1], 0, A, C, n);".to_string());
        }
        s.join("\n")
    })
}

fn params(n: i64, block: i64) -> ExecParams {
    let mut p = ExecParams::default();
    p.inputs.insert("n".into(), n);
    p.tuning.insert("BLOCK".into(), block);
    p
}

fn script_arrays(a: usize, c: usize) -> Vec<ScriptArray> {
    vec![ScriptArray { name: "A".into(), dtype: DType::F32, count: a }, ScriptArray { name: "C".into(), dtype: DType::F16, count: c }]
}

fn run_script(source: &str, params: &ExecParams, arrays: &[ScriptArray]) -> Result<(), TestCaseError> {
    let device = device();
    let extensions = extensions();
    let input = ScriptInput { file: "k.cu", source, first_line: 7, params, arrays, scalars: &[], device: &device, extensions: &extensions };
    match build_plan(&input) {
        Ok(plan) => {
            prop_assert!(plan.launches() > 0);
            for scratch in &plan.scratch {
                prop_assert!(scratch.count.checked_mul(scratch.dtype.size_bytes()).is_some_and(|b| b as u64 <= runner::MAX_ARRAY_BYTES));
            }
        }
        Err(ScriptError::Failed { line, message, .. }) => prop_assert!(line >= 7 && !message.is_empty(), "line {line}: {message}"),
        Err(ScriptError::Invalid { .. }) => {}
    }
    Ok(())
}

const MANIFEST: &str = r#"
[kernel]
name = "k"
backend = "cuda"
source = "k.cu"

[inputs]
n = { values = [1, 4] }

[[arrays]]
name = "A"
type = "f32"
size = "SIZE_A"
init = "random"

[[arrays]]
name = "C"
type = "f16"
size = "SIZE_C"
init = "zeros"
output = true

[tuning]
BLOCK = { values = [1, 32] }
"#;

fn context(size_a: &str, size_c: &str, host: &str) -> Option<Context> {
    let text = MANIFEST.replace("SIZE_A", &size_a.replace('"', "'")).replace("SIZE_C", &size_c.replace('"', "'"));
    let manifest = Manifest::parse("peak.toml", &text).ok()?;
    Some(Context { dir: PathBuf::from("/nonexistent/ctx"), manifest, regions: Regions::new("", "extern \"C\" __global__ void k() {}\n", host) })
}

/// A size expression over `n`, often one that overflows or is huge.
fn size_expr() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => proptest::sample::select(&[
            "n", "n * n", "n * n * n * n", "n * 4", "n ** 4", "n << 40", "n << 62", "n << 64", "n - 2", "-n", "n / 0", "n % 0",
            "ceil_div(n, 0)", "ceil_div(n, 2)", "9223372036854775807", "4611686018427387904", "2305843009213693952", "1099511627776",
            "274877906944", "268435456", "n * 1000000000000", "max(n, 1) * 1048576", "if n > 2 { n } else { 0 }",
        ][..]).prop_map(str::to_string),
        1 => "\\PC{0,8}",
    ]
}

proptest! {
    #![proptest_config(config(256))]

    /// Generated launch scripts with values at the edges of i64.
    #[test]
    fn launch_script_plans_or_fails(source in script(), n in value(), block in value(), small in any::<bool>()) {
        let arrays = if small { script_arrays(16, 8) } else { script_arrays(usize::MAX / 2, usize::MAX) };
        run_script(&source, &params(n, block), &arrays)?;
    }

    /// Arbitrary text as a launch script.
    #[test]
    fn launch_script_arbitrary_text(source in "\\PC{0,120}") {
        run_script(&source, &params(4, 32), &script_arrays(16, 8))?;
    }
}

proptest! {
    #![proptest_config(config(128))]

    /// Array sizes, from tiny to far beyond memory: sized arrays have a byte count that the
    /// runner can compute and a host can attempt, or the configuration is an error.
    #[test]
    fn array_sizes_fit_or_fail(size_a in size_expr(), size_c in size_expr(), n in edge_i64()) {
        let Some(ctx) = context(&size_a, &size_c, "launch(\"k\", 1, 1, 0, A, C);") else { return Ok(()) };
        match runner::size_arrays(&ctx, &params(n, 1)) {
            Ok(sized) => {
                for a in &sized {
                    prop_assert!(a.count >= 1);
                    let bytes = a.count.checked_mul(a.spec.dtype.size_bytes());
                    prop_assert!(bytes.is_some_and(|b| b as u64 <= runner::MAX_ARRAY_BYTES), "{} elements", a.count);
                }
            }
            Err(e) => prop_assert!(!e.to_string().is_empty()),
        }
    }

    /// Whole runs on the fake backend: size, generate, plan, allocate, replay, time.
    #[test]
    fn run_on_fake_backend(host in script(), n in 1i64..5, size_a in proptest::sample::select(&[
        "n", "n * 2", "n - 4", "-n", "n / 0", "ceil_div(n, 2)", "n * n", "max(n, 3)", "1000000", "n *", "m",
    ][..])) {
        // Sizes stay below a million elements: the runner fills arrays on the host before the
        // fake backend (which refuses more than a MiB) sees them.
        let Some(ctx) = context(size_a, "n * 2", &host) else { return Ok(()) };
        let backend = Fake::new();
        let options = RunOptions { warmup: 1, repetitions: 2, input_sets: 2, check_inputs: true, ..RunOptions::default() };
        match runner::run(&backend, &ctx, &params(n, 32), &options) {
            Ok(result) => prop_assert!(result.launches > 0),
            Err(e) => prop_assert!(!e.to_string().is_empty() && !e.category().is_empty()),
        }
    }
}

/// Regressions found by the fuzzer, kept as plain tests.
#[test]
fn huge_array_sizes_are_errors() {
    for size in ["4611686018427387904", "n << 62", "1099511627777", "n * 1000000000000"] {
        let ctx = context(size, "n", "launch(\"k\", 1, 1, 0, A, C);").unwrap();
        let err = runner::size_arrays(&ctx, &params(4, 1)).unwrap_err();
        assert_eq!(err.category(), "invalid-config", "{size}: {err}");
    }
}

#[test]
fn huge_scratch_and_copies_are_errors() {
    let run = |source: &str, arrays: &[ScriptArray]| {
        let device = device();
        let input = ScriptInput { file: "k.cu", source, first_line: 1, params: &params(4, 1), arrays, scalars: &[], device: &device, extensions: &[] };
        build_plan(&input)
    };
    let huge = script_arrays(usize::MAX / 2, usize::MAX);
    let err = run("copy(C, A); launch(\"k\", 1, 1, 0, A);", &huge).unwrap_err();
    assert!(err.to_string().contains("copy"), "{err}");
    let err = run("let s = alloc(\"f32\", 9223372036854775807); copy(s, A); launch(\"k\", 1, 1, 0, s);", &script_arrays(4, 4)).unwrap_err();
    assert!(err.to_string().contains("alloc"), "{err}");
    let err = run("launch(\"k\", ceil_div(9223372036854775807, 2), 1, 0);", &script_arrays(4, 4)).unwrap_err();
    assert!(matches!(err, ScriptError::Invalid { .. }), "{err}");
    let err = run("launch(\"k\", ceil_div(-9223372036854775807 - 1, -1), 1, 0);", &script_arrays(4, 4)).unwrap_err();
    assert!(err.to_string().contains("ceil_div"), "{err}");
}

/// Rhai's own `Array.pad` overflowed computing the padded size (a panic in debug builds).
#[test]
fn padding_an_array_past_the_limit_is_an_error() {
    let device = device();
    for source in [
        "let x = [0].pad(1 | 4611686018427387904, [1, 2, 3]); launch(\"k\", 1, 1, 0);",
        "let x = [0].pad(9223372036854775807, [[1], [2]]); launch(\"k\", 1, 1, 0);",
        "let x = [0].pad(5000, [1, 2, 3]); launch(\"k\", 1, 1, 0);",
    ] {
        let input = ScriptInput { file: "k.cu", source, first_line: 1, params: &params(4, 1), arrays: &[], scalars: &[], device: &device, extensions: &[] };
        let err = build_plan(&input).unwrap_err();
        assert!(err.to_string().contains("too large"), "{source}: {err}");
    }
    let input = ScriptInput {
        file: "k.cu",
        source: "let x = [0]; x.pad(3, [1]); launch(\"k\", x.len(), 1, 0);",
        first_line: 1,
        params: &params(4, 1),
        arrays: &[],
        scalars: &[],
        device: &device,
        extensions: &[],
    };
    let plan = build_plan(&input).unwrap();
    assert!(matches!(plan.steps[0], peak_backend::plan::Step::Launch { grid: [3, 1, 1], .. }), "{plan:?}");
}

#[test]
fn endless_loop_stops_quickly() {
    let start = std::time::Instant::now();
    let device = device();
    let input =
        ScriptInput { file: "k.cu", source: "loop { }", first_line: 1, params: &params(4, 1), arrays: &[], scalars: &[], device: &device, extensions: &[] };
    let err = build_plan(&input).unwrap_err();
    assert!(err.to_string().contains("operations"), "{err}");
    assert!(start.elapsed().as_secs() < 10);
}

/// Arrays the host holds but the device does not are refused by name, with their bytes and
/// the device's, before a buffer is allocated (issue 26, item 7): not an allocation failure
/// halfway through the inputs.
#[test]
fn arrays_beyond_the_device_memory_are_refused_naming_them() {
    // 4 MiB of f32 and 2 MiB of f16 on a device of 5 MiB.
    let ctx = context("n", "n", "launch(\"k\", 1, 1, 0, A, C);").unwrap();
    let backend = Fake { device: DeviceInfo { global_memory_bytes: 5 << 20, name: "small".into(), ..device() }, next: AtomicU64::new(1) };
    let err = runner::run(&backend, &ctx, &params(1 << 20, 1), &RunOptions::default()).unwrap_err();
    assert_eq!(err.category(), "invalid-config", "{err}");
    let text = err.to_string();
    assert!(text.contains("the arrays take 6291456 bytes (6.3 MB: A 4.2 MB, C 2.1 MB), more than the 5.2 MB of memory of small"), "{text}");
    assert_eq!(backend.next.load(Ordering::Relaxed), 1, "nothing was allocated");
}

/// A kernel of many parameters (a GEMM with leading dimensions, alpha, a bias, a residual and
/// a split's scratch has 13): inline arguments reach 12, which Rhai can match; more go as one
/// array, and a call past 12 inline says so instead of "function not found".
#[test]
fn launch_takes_many_kernel_arguments_as_one_array() {
    let device = device();
    let arrays = script_arrays(4, 4);
    let run = |source: &str| {
        let input = ScriptInput { file: "k.cu", source, first_line: 1, params: &params(4, 1), arrays: &arrays, scalars: &[], device: &device, extensions: &[] };
        build_plan(&input)
    };
    let inline12 = run("launch(\"k\", 1, 1, 0, A, C, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10);").unwrap();
    assert!(matches!(&inline12.steps[0], peak_backend::plan::Step::Launch { args, .. } if args.len() == 12), "{inline12:?}");
    let as_array = run("launch(\"k\", 1, 1, 0, [A, C, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 1.5, 16]);").unwrap();
    match &as_array.steps[0] {
        peak_backend::plan::Step::Launch { args, .. } => {
            assert_eq!(args.len(), 16);
            assert!(matches!(args[14], peak_backend::plan::PlanArg::F32(v) if v == 1.5), "{args:?}");
            assert!(matches!(args[15], peak_backend::plan::PlanArg::I32(16)), "{args:?}");
        }
        other => panic!("not a launch: {other:?}"),
    }
    let err = run("launch(\"k\", 1, 1, 0, A, C, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11);").unwrap_err().to_string();
    assert!(err.contains("at most 12 kernel arguments") && err.contains("[a, b, ...]") && err.contains("k.cu:1"), "{err}");
    // An array inside the list is still no kernel argument.
    let err = run("launch(\"k\", 1, 1, 0, [A, [1, 2]]);").unwrap_err().to_string();
    assert!(err.contains("argument 1") && err.contains("cannot be passed"), "{err}");
}
