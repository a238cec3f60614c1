//! HLSL-specific behaviour on whatever Vulkan device is present (lavapipe in CI): the
//! binding and push-constant conventions, their error messages, several entry points in
//! one module, long plans, and DXC where it is installed.
// Helpers outside #[test] functions unwrap too; clippy's allow-unwrap-in-tests does not reach them here (rust-clippy#13981).
#![allow(clippy::unwrap_used)]

use peak_backend::testsuite::{context, opened_or_skip};
use peak_backend::{RunOptions, run};
use peak_hlsl::{CompilerKind, HlslBackend, HlslOptions};
use peak_spec::{Context, ExecParams, Language};

fn backend() -> Option<HlslBackend> {
    opened_or_skip(HlslBackend::new(), "HLSL")
}

fn arrays(specs: &[(&str, &str, bool)]) -> String {
    specs
        .iter()
        .map(|(name, init, output)| format!("[[arrays]]\nname = \"{name}\"\ntype = \"f32\"\nsize = \"n\"\ninit = \"{init}\"\noutput = {output}\n"))
        .collect::<Vec<_>>()
        .join("\n")
}

fn first(ctx: &Context) -> ExecParams {
    ctx.space().iter().next().unwrap()
}

fn quick() -> RunOptions {
    RunOptions { warmup: 1, repetitions: 2, ..RunOptions::default() }
}

const HEADER: &str = "StructuredBuffer<float> A : register(t0);\nRWStructuredBuffer<float> C : register(u1);\nstruct Params { int n; float x; };\n[[vk::push_constant]] ConstantBuffer<Params> p;\n";

/// `C[i] = A[i] * x` for i < n, in groups of 64.
fn scale_kernel() -> String {
    format!("{HEADER}[numthreads(64, 1, 1)]\nvoid scale(uint3 id : SV_DispatchThreadID) {{\n  if ((int)id.x < p.n) C[id.x] = A[id.x] * p.x;\n}}\n")
}

#[test]
fn t_and_u_registers_share_one_numbering() {
    let Some(backend) = backend() else { return };
    // Direct3D habit: t and u registers each counted from 0. Both land on binding 0.
    let device = "StructuredBuffer<float> A : register(t0);\nRWStructuredBuffer<float> C : register(u0);\n[numthreads(64, 1, 1)]\nvoid k(uint3 id : SV_DispatchThreadID) { C[id.x] = A[id.x]; }\n";
    let (_dir, ctx) =
        context(Language::Hlsl, device, "launch(\"k\", ceil_div(n, 64), 64, 0, A, C);\n", &arrays(&[("A", "random", false), ("C", "zeros", true)]), "");
    let err = run(&backend, &ctx, &first(&ctx), &quick()).expect_err("two resources on binding 0 must not run");
    assert_eq!(err.category(), "compile-failed", "{err}");
    let text = err.to_string();
    assert!(text.contains("`A` and `C` both have binding 0") && text.contains("register(u2)"), "{text}");
}

#[test]
fn a_plain_push_constant_struct_is_explained() {
    let Some(backend) = backend() else { return };
    // glslang ignores [[vk::push_constant]] here and builds a $Global uniform buffer.
    let device = "RWStructuredBuffer<float> C : register(u0);\nstruct Params { int n; };\n[[vk::push_constant]] Params p;\n[numthreads(64, 1, 1)]\nvoid k(uint3 id : SV_DispatchThreadID) { if ((int)id.x < p.n) C[id.x] = 1.0; }\n";
    let (_dir, ctx) = context(Language::Hlsl, device, "launch(\"k\", ceil_div(n, 64), 64, 0, C, n);\n", &arrays(&[("C", "zeros", true)]), "");
    let err = run(&backend, &ctx, &first(&ctx), &quick()).expect_err("a $Global uniform buffer must not run");
    assert_eq!(err.category(), "compile-failed", "{err}");
    assert!(err.to_string().contains("ConstantBuffer<Params>"), "{err}");
}

#[test]
fn compile_errors_name_the_context_file_and_options() {
    let Some(backend) = backend() else { return };
    let device =
        "RWStructuredBuffer<float> C : register(u0);\n[numthreads(BLOCK, 1, 1)]\nvoid k(uint3 id : SV_DispatchThreadID) {\n  C[id.x] = undeclared_thing;\n}\n";
    let (_dir, ctx) =
        context(Language::Hlsl, device, "launch(\"k\", 1, BLOCK, 0, C);\n", &arrays(&[("C", "zeros", true)]), "[tuning]\nBLOCK = { values = [32] }\n");
    let err = run(&backend, &ctx, &first(&ctx), &quick()).expect_err("must not compile");
    let text = err.to_string();
    // Line 6 of the file: two marker lines, then the fourth line of the device region.
    assert!(text.contains("kernel.hlsl:6"), "{text}");
    assert!(text.contains("-DBLOCK=32") && text.contains("-e k"), "{text}");
}

#[test]
fn the_block_must_match_numthreads() {
    let Some(backend) = backend() else { return };
    let (_dir, ctx) = context(
        Language::Hlsl,
        &scale_kernel(),
        "launch(\"scale\", ceil_div(n, 32), 32, 0, A, C, n, f32(2.0));\n",
        &arrays(&[("A", "random", false), ("C", "zeros", true)]),
        "",
    );
    let err = run(&backend, &ctx, &first(&ctx), &quick()).expect_err("block 32 against numthreads(64)");
    assert_eq!(err.category(), "launch-failed", "{err}");
    assert!(err.to_string().contains("[numthreads(64, 1, 1)]"), "{err}");
}

#[test]
fn dynamic_shared_memory_is_refused() {
    let Some(backend) = backend() else { return };
    let (_dir, ctx) = context(
        Language::Hlsl,
        &scale_kernel(),
        "launch(\"scale\", ceil_div(n, 64), 64, 1024, A, C, n, f32(2.0));\n",
        &arrays(&[("A", "random", false), ("C", "zeros", true)]),
        "",
    );
    let err = run(&backend, &ctx, &first(&ctx), &quick()).expect_err("HLSL has no dynamic groupshared memory");
    assert!(err.to_string().contains("groupshared"), "{err}");
}

#[test]
fn scalar_types_and_counts_are_checked() {
    let Some(backend) = backend() else { return };
    let a = arrays(&[("A", "random", false), ("C", "zeros", true)]);
    let (_dir, ctx) = context(Language::Hlsl, &scale_kernel(), "launch(\"scale\", ceil_div(n, 64), 64, 0, A, C, n, 2);\n", &a, "");
    let err = run(&backend, &ctx, &first(&ctx), &quick()).expect_err("an int for a float member");
    assert!(err.to_string().contains("f32(x)"), "{err}");
    let (_dir, ctx) = context(Language::Hlsl, &scale_kernel(), "launch(\"scale\", ceil_div(n, 64), 64, 0, A, C, n);\n", &a, "");
    let err = run(&backend, &ctx, &first(&ctx), &quick()).expect_err("a missing scalar");
    assert!(err.to_string().contains("passes 1 scalar"), "{err}");
    let (_dir, ctx) = context(Language::Hlsl, &scale_kernel(), "launch(\"scale\", ceil_div(n, 64), 64, 0, A, n, f32(2.0));\n", &a, "");
    let err = run(&backend, &ctx, &first(&ctx), &quick()).expect_err("a missing buffer");
    assert!(err.to_string().contains("`C` has binding 1 but the launch passes 1 buffer"), "{err}");
}

#[test]
fn several_entry_points_in_one_module() {
    let Some(backend) = backend() else { return };
    let device = format!(
        "{}[numthreads(32, 1, 1)]\nvoid offset(uint3 id : SV_DispatchThreadID) {{\n  if ((int)id.x < p.n) C[id.x] = C[id.x] + p.x;\n}}\n",
        scale_kernel()
    );
    let host = "launch(\"scale\", ceil_div(n, 64), 64, 0, A, C, n, f32(3.0));\nlaunch(\"offset\", ceil_div(n, 32), 32, 0, A, C, n, f32(0.5));\n";
    let (_dir, ctx) = context(Language::Hlsl, &device, host, &arrays(&[("A", "arange", false), ("C", "zeros", true)]), "");
    let result = run(&backend, &ctx, &first(&ctx), &quick()).unwrap_or_else(|e| panic!("{e}"));
    let out = &result.outputs[0].1;
    for i in [0usize, 1, 999] {
        assert_eq!(out.get_f64(i), i as f64 * 3.0 + 0.5, "element {i}");
    }
    assert_eq!(result.launches, 2);
}

#[test]
fn long_plans_stay_in_order() {
    let Some(backend) = backend() else { return };
    // More launches than one command buffer holds before an early submit.
    let launches = peak_hlsl::FLUSH_EVERY + 300;
    let device = "RWStructuredBuffer<float> C : register(u0);\nstruct Params { int n; };\n[[vk::push_constant]] ConstantBuffer<Params> p;\n[numthreads(64, 1, 1)]\nvoid inc(uint3 id : SV_DispatchThreadID) {\n  if ((int)id.x < p.n) C[id.x] = C[id.x] + 1.0;\n}\n";
    let host = format!("fill(C, 0.0);\nfor i in 0..{launches} {{\n  launch(\"inc\", ceil_div(n, 64), 64, 0, C, n);\n}}\n");
    let (_dir, ctx) = context(Language::Hlsl, device, &host, &arrays(&[("C", "zeros", true)]), "");
    let result = run(&backend, &ctx, &first(&ctx), &quick()).unwrap_or_else(|e| panic!("{e}"));
    let out = &result.outputs[0].1;
    assert!((0..1000).all(|i| out.get_f64(i) == launches as f64), "element 0 is {}", out.get_f64(0));
    assert_eq!(result.times_ms.len(), 2);
    assert!(result.times_ms.iter().all(|t| t.is_finite() && *t > 0.0), "{:?}", result.times_ms);
}

#[test]
fn dxc_runs_the_vector_add_where_installed() {
    let options = HlslOptions { compiler: CompilerKind::Dxc, always_stage: false };
    let backend = match HlslBackend::with_options(&options) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("SKIPPED dxc_runs_the_vector_add_where_installed: {e}");
            return;
        }
    };
    let (_dir, ctx) = context(
        Language::Hlsl,
        &scale_kernel(),
        "launch(\"scale\", ceil_div(n, 64), 64, 0, A, C, n, f32(2.0));\n",
        &arrays(&[("A", "arange", false), ("C", "zeros", true)]),
        "",
    );
    let result = run(&backend, &ctx, &first(&ctx), &quick()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(result.outputs[0].1.get_f64(10), 20.0);
}

#[test]
fn devices_are_listed_with_the_reason_one_is_unusable() {
    let Some(backend) = backend() else { return };
    let devices = peak_hlsl::list_devices().expect("the loader worked for the backend");
    let name = &peak_backend::Backend::device(&backend).name;
    assert!(devices.iter().any(|d| &d.name == name && d.unusable.is_none()), "{name} missing from {devices:?}");
}
