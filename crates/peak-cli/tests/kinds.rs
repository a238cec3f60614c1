//! What a transformation is for, checked against what the context says it is: a MatMul
//! transformation on another kind of kernel is refused with the ones that fit, a context
//! keeps its own names through `[kernel.roles]`, and the prompt describes the context's
//! own kernel (issue 14).

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
        assert!(err.contains("'TB-Tiling' is written for matmul kernels, and this context's kernel is of kind 'stencil'"), "{err}");
        assert!(err.contains("the transformations that fit it: Register-Window, Thread-Coarsen, Tile-Pad, Tile-Staging"), "the hint names the ones that fit: {err}");
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
    assert!(prompt.contains("# The kernel\n\nKernel `matmul` (kind: matmul). Multiplies two square matrices, one work-item per output."), "{prompt}");
    assert!(prompt.contains("Arrays: A (f32, n * n elements, input), B (f32, n * n elements, input), C (f32, n * n elements, output)."), "{prompt}");
    assert!(prompt.contains("a thread block of WG_X x WG_Y threads"), "the transformation speaks the context's names: {prompt}");
    assert!(!prompt.contains("BLOCK_X"), "no role name is left for the model to use: {prompt}");
}
