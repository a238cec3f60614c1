//! What a pass prompt holds, how replies become regions, and repair prompts.

use peak_spec::{Region, Regions};
use peak_transform::{ContextParam, Feedback, KernelBrief, Language, Library, PassPrompt, PromptContext, PromptError, ReplyError};

/// A GEMM, the pattern the matmul transformations are written for.
const GEMM: KernelBrief<'static> = KernelBrief { pattern: Some(peak_spec::Pattern::Gemm), description: "" };

fn naive() -> Regions {
    Regions::new(
        "",
        "__kernel void matmul(__global const float* A, __global const float* B, __global float* C, int n) {\n    int col = get_global_id(0);\n    int row = get_global_id(1);\n    if (row < n && col < n) {\n        float acc = 0.0f;\n        for (int k = 0; k < n; ++k) acc += A[row * n + k] * B[k * n + col];\n        C[row * n + col] = acc;\n    }\n}\n",
        "launch(\"matmul\", [ceil_div(n, BLOCK_X), ceil_div(n, BLOCK_Y)], [BLOCK_X, BLOCK_Y], 0, A, B, C, n);\n",
    )
}

fn block_params() -> Vec<ContextParam> {
    vec![ContextParam::new("BLOCK_X", "pow2 [1, 64]"), ContextParam::new("BLOCK_Y", "pow2 [1, 64]")]
}

const INPUTS: &[ContextParam] = &[];

#[test]
fn pass_prompt_holds_everything_the_model_needs() {
    let library = Library::builtin().unwrap();
    let refactor = library.get("Refactor").unwrap();
    let regions = naive();
    let tuning = block_params();
    let constraints = ["BLOCK_X * BLOCK_Y <= 1024".to_string()];
    let inputs = [ContextParam::new("n", "256, 512, 1024")];
    let ctx = PromptContext { kernel: GEMM, regions: &regions, backend: Language::Opencl, tuning: &tuning, inputs: &inputs, constraints: &constraints };
    let prompt = library.pass_prompt(refactor, 1, &ctx).unwrap();
    let text = &prompt.text;
    assert_eq!((prompt.pass, prompt.passes, prompt.region), (1, 2, Region::Macros));
    for expected in [
        "# Transformation: Refactor",
        "# This pass: 1 of 2, \"Name the primitives\"",
        "You edit the **macros** region and nothing else.",
        // the instructions, with OpenCL's spelling substituted
        "#define TX get_local_id(0)",
        "#define BARRIER() barrier(CLK_LOCAL_MEM_FENCE)",
        // the translation table
        "- `thread_x`: get_local_id(0)",
        "# Backend: opencl",
        // tuning parameters, constraints and inputs
        "- `BLOCK_X`: pow2 [1, 64]",
        "- `BLOCK_X * BLOCK_Y <= 1024`",
        "- `n`: 256, 512, 1024",
        // the regions, with their roles
        "## macros region (the region you edit)\n\n(empty)",
        "## device region (read-only)\n\n```c\n__kernel void matmul(",
        "## host region (read-only)\n\n```rhai\nlaunch(",
        // the answer format
        "exactly one fenced code block holding the complete new text of the macros region",
    ] {
        assert!(text.contains(expected), "missing {expected:?} in:\n{text}");
    }

    // The same pass for CUDA speaks CUDA.
    let ctx = PromptContext { backend: Language::Cuda, ..ctx };
    let cuda = library.pass_prompt(refactor, 1, &ctx).unwrap();
    assert!(cuda.text.contains("#define TX threadIdx.x"), "{}", cuda.text);
    assert!(!cuda.text.contains("get_local_id"), "{}", cuda.text);
}

#[test]
fn introduced_parameters_and_snippets_are_shown_and_snippets_inserted_once() {
    let library = Library::builtin().unwrap();
    let tb = library.get("TB-Tiling").unwrap();
    let regions = naive();
    let tuning = block_params();
    let ctx = PromptContext { kernel: GEMM, regions: &regions, backend: Language::Opencl, tuning: &tuning, inputs: INPUTS, constraints: &[] };
    let prompt = library.pass_prompt(tb, 1, &ctx).unwrap();
    assert!(prompt.text.contains("- `TILE_K`: 4, 8, 16, 32, 64 — the k-extent"), "{}", prompt.text);
    assert!(prompt.text.contains("## Snippets") && prompt.text.contains("#define PEAK_TILE_COPY("), "{}", prompt.text);
    assert!(prompt.text.contains("Do not include the snippets listed above"), "{}", prompt.text);

    let new_macros = prompt.accept("Here:\n```c\n#define TILE_M BLOCK_Y\n```\n", &regions).unwrap();
    assert!(new_macros.starts_with("// PEAK_TILE_COPY"), "{new_macros}");
    assert!(new_macros.ends_with("#define TILE_M BLOCK_Y\n"), "{new_macros}");
    assert_eq!(new_macros.matches("#define PEAK_TILE_COPY(").count(), 1);

    // A reply that kept the snippet gets no second copy.
    let again = prompt.accept(&format!("```c\n{new_macros}```"), &regions).unwrap();
    assert_eq!(again.matches("#define PEAK_TILE_COPY(").count(), 1, "{again}");

    // Once the snippet is in the source, the next prompt says so and inserts nothing.
    let mut applied = regions.clone();
    applied.replace(Region::Macros, new_macros);
    let ctx = PromptContext { kernel: GEMM, regions: &applied, ..ctx };
    let next = library.pass_prompt(tb, 1, &ctx).unwrap();
    assert!(next.text.contains("already in the source"), "{}", next.text);
    assert!(!next.text.contains("## Snippets") && !next.text.contains("Do not include the snippets"), "{}", next.text);
    let kept = next.accept("```c\n#define TILE_M BLOCK_Y\n```", &applied).unwrap();
    assert_eq!(kept, "#define TILE_M BLOCK_Y\n");
}

/// A pass answered with its region exactly as it was (a transformation declining a kernel it
/// does not fit, such as Fast-Math on a kernel with no transcendental call) gets no snippet:
/// the insertion alone would turn the decline into a change, validated and recorded as a step.
#[test]
fn a_region_returned_as_it_was_gets_no_snippet() {
    let library = Library::builtin().unwrap();
    let fast_math = library.get("Fast-Math").unwrap();
    let regions = naive();
    let tuning = block_params();
    let ctx = PromptContext { kernel: GEMM, regions: &regions, backend: Language::Opencl, tuning: &tuning, inputs: INPUTS, constraints: &[] };
    let elementwise = KernelBrief { pattern: Some(peak_spec::Pattern::Elementwise), description: "" };
    let prompt = library.pass_prompt(fast_math, 1, &PromptContext { kernel: elementwise, ..ctx }).unwrap();
    assert!(prompt.text.contains("## Snippets"), "{}", prompt.text);
    let device = regions.get(Region::Device);
    assert_eq!(prompt.accept(&format!("```c\n{device}```"), &regions).unwrap(), device);
    // Any change at all, and the snippet goes in.
    let changed = prompt.accept(&format!("```c\n// changed\n{device}```"), &regions).unwrap();
    assert!(changed.len() > device.len() + "// changed\n".len(), "{changed}");
}

#[test]
fn replies_that_cannot_be_used_are_typed_outcomes() {
    let library = Library::builtin().unwrap();
    let refactor = library.get("Refactor").unwrap();
    let regions = naive();
    let tuning = block_params();
    let ctx = PromptContext { kernel: GEMM, regions: &regions, backend: Language::Opencl, tuning: &tuning, inputs: INPUTS, constraints: &[] };
    let prompt = library.pass_prompt(refactor, 2, &ctx).unwrap();
    assert_eq!(prompt.accept("I would rather not.", &regions), Err(ReplyError::NoCodeBlock));
    assert_eq!(prompt.accept("```c\na\n```\n```c\nb\n```", &regions), Err(ReplyError::MultipleCodeBlocks(2)));
    let copied_host = format!("```c\n__kernel void matmul() {{}}\n{}```", regions.get(Region::Host).repeat(2));
    let err = prompt.accept(&copied_host, &regions).unwrap_err();
    assert!(matches!(&err, ReplyError::EditOutsideRegion { target: Region::Device, .. }), "{err}");
}

#[test]
fn repair_prompt_feeds_back_the_failure() {
    let library = Library::builtin().unwrap();
    let refactor = library.get("Refactor").unwrap();
    let regions = naive();
    let tuning = block_params();
    let ctx = PromptContext { kernel: GEMM, regions: &regions, backend: Language::Opencl, tuning: &tuning, inputs: INPUTS, constraints: &[] };
    let log = "kernel.cl:5:13: error: use of undeclared identifier 'TX'";
    let repair = library.repair_prompt(refactor, 2, &ctx, &Feedback::CompileError(log.into())).unwrap();
    assert!(repair.text.contains("# The previous attempt failed"), "{}", repair.text);
    assert!(repair.text.contains(log));
    assert!(repair.text.contains("does not compile"));
    // The failure comes before the answer format, which stays last.
    assert!(repair.text.find(log).unwrap() < repair.text.find("# Answer format").unwrap());

    let verdict = "C: 1024 of 65536 elements differ (max relative error 0.5 at [0, 17])";
    let repair = library.repair_prompt(refactor, 2, &ctx, &Feedback::WrongOutput(verdict.into())).unwrap();
    assert!(repair.text.contains(verdict) && repair.text.contains("outputs differ"), "{}", repair.text);

    let repair = library.repair_prompt(refactor, 2, &ctx, &Feedback::BadReply(ReplyError::MultipleCodeBlocks(3))).unwrap();
    assert!(repair.text.contains("3 fenced code blocks"), "{}", repair.text);

    let plain = library.pass_prompt(refactor, 2, &ctx).unwrap();
    assert!(!plain.text.contains("previous attempt"));
    assert_eq!(PassPrompt::region_asked(&plain.text), Some(plain.region));
}

#[test]
fn a_repair_goes_to_the_region_at_fault_even_one_an_earlier_step_wrote() {
    let library = Library::builtin().unwrap();
    let tb = library.get("TB-Tiling").unwrap();
    let last = tb.passes.len();
    assert_ne!(tb.passes[last - 1].region, Region::Macros);
    let regions = naive();
    let tuning = block_params();
    let ctx = PromptContext { kernel: GEMM, regions: &regions, backend: Language::Opencl, tuning: &tuning, inputs: INPUTS, constraints: &[] };
    let log = "kernel.cl:2:9: error: expected expression in macro A_AT";
    let repair = library.repair_prompt_in(tb, last, &ctx, &Feedback::CompileError(log.into()), Region::Macros).unwrap();
    assert_eq!(repair.region, Region::Macros);
    assert_eq!(PassPrompt::region_asked(&repair.text), Some(Region::Macros), "{}", repair.text);
    assert!(repair.text.contains("The fault is in the macros region, which an earlier step wrote"), "{}", repair.text);
    assert!(repair.text.contains("complete new text of the macros region"), "{}", repair.text);
    assert!(!repair.text.contains("## Snippets"), "the pass's snippets are not inserted into another region");
    let reply = "```c\n#define A_AT(r, c) A[(r) * n + (c)]\n```";
    assert_eq!(repair.accept(reply, &regions).unwrap(), "#define A_AT(r, c) A[(r) * n + (c)]\n");
}

#[test]
fn prompts_refuse_what_cannot_work() {
    let library = Library::builtin().unwrap();
    let regions = naive();
    let tuning = block_params();
    let ctx = PromptContext { kernel: GEMM, regions: &regions, backend: Language::Opencl, tuning: &tuning, inputs: INPUTS, constraints: &[] };

    let err = library.pass_prompt(library.get("Tensor-Core").unwrap(), 1, &ctx).unwrap_err();
    assert!(matches!(err, PromptError::NotApplicable { backend: Language::Opencl, .. }), "{err}");

    // A convolution never gets a GEMM's prompt, nor does a kernel nobody said the pattern of.
    let conv = PromptContext { kernel: KernelBrief { pattern: Some(peak_spec::Pattern::Stencil), description: "" }, ..ctx };
    let err = library.pass_prompt(library.get("Refactor").unwrap(), 1, &conv).unwrap_err();
    assert!(matches!(err, PromptError::WrongPattern { pattern: peak_spec::Pattern::Stencil, .. }), "{err}");
    assert!(
        err.to_string().contains("Register-Window") && err.to_string().contains("read off its code"),
        "the error lists what fits a stencil and says where the pattern came from: {err}"
    );
    let unknown = PromptContext { kernel: KernelBrief::default(), ..ctx };
    let err = library.pass_prompt(library.get("Refactor").unwrap(), 1, &unknown).unwrap_err();
    assert!(matches!(err, PromptError::UnknownPattern { .. }) && err.to_string().contains("[kernel] pattern"), "{err}");

    let err = library.pass_prompt(library.get("Thread-Tiling").unwrap(), 1, &ctx).unwrap_err();
    assert!(err.to_string().starts_with("'Thread-Tiling' requires 'TILE_K' in the kernel context, which has no tuning parameter or input of that name (if the context calls it something else, say so in peak.toml: [kernel.roles] TILE_K = "), "{err}");

    let mut with_tile_k = tuning.clone();
    with_tile_k.push(ContextParam::new("TILE_K", "16"));
    let ctx2 = PromptContext { tuning: &with_tile_k, ..ctx };
    let err = library.pass_prompt(library.get("TB-Tiling").unwrap(), 1, &ctx2).unwrap_err();
    assert!(matches!(err, PromptError::ParameterExists { .. }), "{err}");
    // Only TB-Tiling introduces TILE_K: it was applied already.
    assert!(err.to_string().ends_with("of that name: was it applied already?"), "{err}");
    // VEC is introduced by several: the error names the others, one of which may have come first.
    let mut with_vec = with_tile_k.clone();
    with_vec.push(ContextParam::new("VEC", "1, 2, 4"));
    let ctx_vec = PromptContext { tuning: &with_vec, ..ctx };
    let err = library.pass_prompt(library.get("Vectorize").unwrap(), 1, &ctx_vec).unwrap_err();
    let text = err.to_string();
    assert!(text.contains("did ") && text.contains("Vectorize-Access") && text.contains("Two steps cannot both tune one name"), "{text}");
    assert!(!text.contains("did Vectorize ") && !text.contains("or Vectorize "), "not itself: {text}");

    let tb = library.get("TB-Tiling").unwrap();
    for pass in [0, tb.passes.len() + 1] {
        let err = library.pass_prompt(tb, pass, &ctx).unwrap_err();
        assert!(matches!(err, PromptError::NoSuchPass { .. }), "{err}");
    }
}
