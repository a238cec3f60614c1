//! What a transformation is for, checked against what the context says it is: a MatMul
//! transformation on another kind of kernel is refused with the ones that fit, a context
//! keeps its own names through `[kernel.roles]`, and the prompt describes the context's
//! own kernel (issue 14). A context that declares no pattern has it read off its code, or
//! is asked to declare it: it never gets another pattern's prompt (issue 24).
// Helpers outside #[test] functions unwrap too; clippy's allow-unwrap-in-tests does not reach them here (rust-clippy#13981).
#![allow(clippy::unwrap_used)]

mod support;

use std::path::Path;

use support::{Env, example, opencl_present, s};

/// The naive OpenCL matmul, copied into `dir` with its manifest and source passed through
/// `edit` (a stand-in for a kernel of another kind, or one with other names).
fn context(env: &Env, dir: &str, edit: impl Fn(&str) -> String) -> String {
    let from = Path::new(&example("matmul-opencl-naive")).to_path_buf();
    let to = env.path(dir);
    std::fs::create_dir_all(&to).unwrap();
    for file in ["peak.toml", "kernel.cl"] {
        std::fs::write(to.join(file), edit(&std::fs::read_to_string(from.join(file)).unwrap())).unwrap();
    }
    s(&to).to_string()
}

/// The manifest without its `[kernel.matmul]` section, declaring `lines` under [kernel].
fn without_matmul_shape(text: &str, lines: &str) -> String {
    let start = text.find("[kernel.matmul]").unwrap();
    let end = start + text[start..].find("[inputs]").unwrap();
    let text = format!("{}{}", &text[..start], &text[end..]);
    text.replacen("flops = \"2 * n * n * n\"\n", &format!("flops = \"2 * n * n * n\"\n{lines}\n"), 1)
}

/// The naive matmul with no kind declared, its kernel renamed `name` (so the name says
/// nothing) and its inner statement replaced by `statement`.
fn unnamed_kernel(text: &str, name: &str, statement: &str) -> String {
    if text.contains("[kernel]") {
        without_matmul_shape(text, "").replace("name = \"matmul\"", &format!("name = \"{name}\""))
    } else {
        text.replace("void matmul", &format!("void {name}"))
            .replace("launch(\"matmul\"", &format!("launch(\"{name}\""))
            .replace("acc += A[row * n + k] * B[k * n + col];", statement)
    }
}

fn init(env: &Env, ctx: &str) -> String {
    let wf = env.arg("wf");
    env.ok(&["init", &wf, "--from", ctx, "--no-measure", "--set", "n=256", "--samples", "2"]);
    wf
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn a_matmul_transformation_on_another_kind_of_kernel_is_refused_and_nothing_is_left_behind() {
    if !opencl_present("a_matmul_transformation_on_another_kind_of_kernel_is_refused_and_nothing_is_left_behind") {
        return;
    }
    let env = Env::new();
    let ctx = context(&env, "stencil", |t| if t.contains("[kernel]") { without_matmul_shape(t, "domain = \"stencil\"") } else { t.to_string() });
    let wf = init(&env, &ctx);
    for _ in 0..2 {
        // Twice: a refused apply leaves no apply in progress behind it.
        let out = env.peak(&["apply", "tb-tiling", "-w", &wf, "--executor", "agent"]);
        assert!(!out.status.success());
        let err = stderr(&out);
        assert!(err.contains("'TB-Tiling' is written for gemm kernels, and this context's kernel is a stencil, convolution or pooling"), "{err}");
        assert!(
            err.contains("the transformations that fit it: Register-Window, Thread-Coarsen, Tile-Pad, Tile-Staging"),
            "the hint names the ones that fit: {err}"
        );
    }
    let attempts = std::fs::read_to_string(Path::new(&wf).join(".git/peak/attempts.jsonl")).unwrap_or_default();
    assert!(!attempts.contains("TB-Tiling"), "a refusal is not an attempt: {attempts}");
}

#[test]
fn roles_map_a_contexts_own_names_and_the_prompt_describes_its_kernel() {
    if !opencl_present("roles_map_a_contexts_own_names_and_the_prompt_describes_its_kernel") {
        return;
    }
    let env = Env::new();
    let renamed = |t: &str| t.replace("BLOCK_X", "WG_X").replace("BLOCK_Y", "WG_Y");
    let ctx = context(&env, "named", renamed);
    let wf = init(&env, &ctx);
    let out = env.peak(&["apply", "refactor", "-w", &wf, "--executor", "agent"]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("[kernel.roles] BLOCK_X = \"YOUR_NAME\""), "the hint says how to map a name: {}", stderr(&out));

    let env = Env::new();
    let description = "description = \"Multiplies two square matrices, one work-item per output.\"\n[kernel.roles]\nBLOCK_X = \"WG_X\"\nBLOCK_Y = \"WG_Y\"";
    let ctx = context(&env, "mapped", |t| renamed(t).replacen("flops = \"2 * n * n * n\"\n", &format!("flops = \"2 * n * n * n\"\n{description}\n"), 1));
    let wf = init(&env, &ctx);
    let waiting = env.json(&["apply", "refactor", "-w", &wf, "--executor", "agent", "--json"]);
    assert_eq!(waiting["status"], "waiting", "{waiting}");
    let prompt = waiting["prompt"].as_str().unwrap();
    assert!(prompt.contains("# The kernel\n\nKernel `matmul` (kind: matmul; pattern: a GEMM (a matrix product, possibly with transposed operands, a batch and an epilogue)). Multiplies two square matrices, one work-item per output."), "{prompt}");
    assert!(prompt.contains("Arrays: A (f32, n * n elements, input), B (f32, n * n elements, input), C (f32, n * n elements, output)."), "{prompt}");
    assert!(prompt.contains("a thread block of WG_X x WG_Y threads"), "the transformation speaks the context's names: {prompt}");
    assert!(!prompt.contains("BLOCK_X"), "no role name is left for the model to use: {prompt}");
}

#[test]
fn a_context_without_a_pattern_has_it_read_off_its_code_or_is_asked_for_it() {
    if !opencl_present("a_context_without_a_pattern_has_it_read_off_its_code_or_is_asked_for_it") {
        return;
    }
    // The naive matmul with no [kernel.matmul] and no domain: its accumulated product says GEMM.
    let env = Env::new();
    let ctx = context(&env, "plain", |t| if t.contains("[kernel]") { without_matmul_shape(t, "") } else { t.to_string() });
    let wf = init(&env, &ctx);
    let waiting = env.json(&["apply", "refactor", "-w", &wf, "--executor", "agent", "--json"]);
    assert_eq!(waiting["status"], "waiting", "{waiting}");
    let prompt = waiting["prompt"].as_str().unwrap();
    assert!(
        prompt.contains(
            "Pattern: a GEMM (a matrix product, possibly with transposed operands, a batch and an epilogue) (read off the code: the kernel's name `matmul`)."
        ),
        "{prompt}"
    );

    // The same code renamed and written as a neighbourhood sum: a stencil, so the GEMM line is refused.
    let (_env, _wf, err) = refactor_refused("smooth", "acc += A[row * n + k] * B[k * n + col + 1];");
    assert!(err.contains("this context's kernel is a stencil"), "{err}");

    // A loop folding a row's elements into one value (no product): a reduction, so the GEMM
    // line is refused.
    let (_env, _wf, err) = refactor_refused("rowsum", "acc = acc + A[row * n + k];");
    assert!(err.contains("this context's kernel is a reduction"), "{err}");

    // Code whose shape says nothing peak recognises (a loop that keeps the last element it
    // reads: no fold, no product, no neighbour): asked, not guessed.
    let (_env, wf, err) = refactor_refused("scatter", "acc = A[row * n + k];");
    assert!(err.contains("peak cannot tell what this context's kernel does") && err.contains("[kernel] pattern"), "{err}");
    let attempts = std::fs::read_to_string(Path::new(&wf).join(".git/peak/attempts.jsonl")).unwrap_or_default();
    assert!(!attempts.contains("Refactor"), "a refusal is not an attempt: {attempts}");
}

/// The naive matmul renamed `name`, its inner statement replaced by `statement`, in a new
/// workflow where Refactor is asked for and refused: the workflow (kept alive by its Env),
/// its folder and peak's error.
fn refactor_refused(name: &str, statement: &str) -> (Env, String, String) {
    let env = Env::new();
    let ctx = context(&env, name, |t| unnamed_kernel(t, name, statement));
    let wf = init(&env, &ctx);
    let out = env.peak(&["apply", "refactor", "-w", &wf, "--executor", "agent"]);
    assert!(!out.status.success(), "{name}: Refactor was not refused");
    let err = stderr(&out);
    (env, wf, err)
}

#[test]
fn an_impossible_tuning_space_is_refused_before_the_executor_writes() {
    if !opencl_present("an_impossible_tuning_space_is_refused_before_the_executor_writes") {
        return;
    }
    let env = Env::new();
    let library = env.path("library");
    std::fs::create_dir_all(&library).unwrap();
    // A row kept in registers: at most 4096 elements per block, so n = 256 fits and n = 8192 does not.
    std::fs::write(
        library.join("rows.toml"),
        r#"
name = "Row-In-Registers"
description = "keep the row in registers"
requires = ["BLOCK_X", "n"]
[tuning]
ITEMS = { values = [1, 2, 4] }
[constraints]
tuning = ["BLOCK_X * ITEMS >= n", "BLOCK_X * ITEMS <= 4096"]
[[passes]]
region = "device"
title = "registers"
instructions = "Keep each row in registers."
"#,
    )
    .unwrap();
    let ctx = context(&env, "wide", |t| t.replace("n = { values = [256, 512, 1024] }", "n = { values = [256, 8192] }"));
    let wf = env.arg("wf");
    env.ok(&["init", &wf, "--from", &ctx, "--no-measure", "--samples", "2"]);
    let lib = s(&library).to_string();
    let out = env.peak(&["apply", "row-in-registers", "-w", &wf, "--executor", "agent", "--library", &lib]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains("'Row-In-Registers' cannot run on this kernel") && err.contains("at inputs n=8192"), "the refusal names the size: {err}");
    assert!(err.contains("`BLOCK_X * ITEMS >= n` rejected"), "and the constraint that emptied it: {err}");
    assert!(err.contains("Nothing was asked of the executor"), "{err}");
    let pending = env.peak(&["pending", "-w", &wf]);
    assert!(!String::from_utf8_lossy(&pending.stdout).contains("You edit"), "no prompt is waiting");
    // At a size it fits, the same transformation asks for its pass.
    let waiting = env.json(&["apply", "row-in-registers", "-w", &wf, "--executor", "agent", "--library", &lib, "--set", "n=256", "--json"]);
    assert_eq!(waiting["status"], "waiting", "{waiting}");
}

#[test]
fn a_step_its_constraints_reduce_to_its_identity_is_refused_before_the_executor_writes() {
    if !opencl_present("a_step_its_constraints_reduce_to_its_identity_is_refused_before_the_executor_writes") {
        return;
    }
    let env = Env::new();
    let library = env.path("library");
    std::fs::create_dir_all(&library).unwrap();
    // Vector accesses of VEC elements need rows that VEC divides; VEC = 1 is the scalar kernel.
    std::fs::write(
        library.join("vectors.toml"),
        r#"
name = "Vector-Rows"
description = "read rows as vectors"
requires = ["n"]
[tuning]
VEC = { values = [1, 2, 4], identity = 1 }
[constraints]
tuning = ["n % VEC == 0"]
[[passes]]
region = "device"
title = "vectors"
instructions = "Read each row as vectors of VEC elements."
"#,
    )
    .unwrap();
    let lib = s(&library).to_string();
    let apply = |env: &Env, wf: &str, set: &[&str]| {
        let mut args = vec!["apply", "vector-rows", "-w", wf, "--executor", "agent", "--library", &lib];
        args.extend(set.iter().flat_map(|v| ["--set", *v]));
        env.peak(&args)
    };
    // Odd rows at every size it is tuned at: only the identity is left.
    let ctx = context(&env, "odd", |t| t.replace("n = { values = [256, 512, 1024] }", "n = { values = [255, 1023] }"));
    let wf = env.arg("wf");
    env.ok(&["init", &wf, "--from", &ctx, "--no-measure", "--samples", "2"]);
    let out = apply(&env, &wf, &[]);
    assert!(!out.status.success(), "a step that can change nothing was asked for");
    let err = stderr(&out);
    assert!(err.contains("'Vector-Rows' would change nothing on this kernel"), "{err}");
    assert!(err.contains("n=255") && err.contains("n=1023") && err.contains("only VEC = 1"), "the refusal names the sizes and the identity: {err}");
    assert!(err.contains("`n % VEC == 0`") && err.contains("Nothing was asked of the executor"), "{err}");
    // One size where a vector fits is enough to ask.
    let waiting = env.json(&["apply", "vector-rows", "-w", &wf, "--executor", "agent", "--library", &lib, "--set", "n=255,256", "--json"]);
    assert_eq!(waiting["status"], "waiting", "{waiting}");
}
