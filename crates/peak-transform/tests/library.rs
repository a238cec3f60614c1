//! The shipped library parses, refers only to what exists, and builds a complete prompt for
//! every pass on every backend it claims; bad files are rejected naming file and field.
// Helpers outside #[test] functions unwrap too; clippy's allow-unwrap-in-tests does not reach them here (rust-clippy#13981).
#![allow(clippy::unwrap_used)]

use std::collections::BTreeSet;
use std::path::Path;

use peak_spec::Regions;
use peak_transform::{ContextParam, KernelBrief, Language, Library, LibraryError, PromptContext};

/// A GEMM, the pattern the matmul transformations are written for.
const GEMM: KernelBrief<'static> = KernelBrief { pattern: Some(peak_spec::Pattern::Gemm), description: "" };

const SHIPPED: &[&str] = &[
    "Orient-Grid",
    "Fuse-Epilogue",
    "Persistent-Tiles",
    "Consumer-Overlap",
    "Ping-Pong",
    "Persistent-Split-K",
    "Split-K-Fixup",
    "Epilogue-Hoist",
    "Epilogue-Ring",
    "Block-Swizzle",
    "Launch-Bounds",
    "Offset",
    "Pipelining",
    "Refactor",
    "Register-Staging",
    "Split-K",
    "TB-Tiling",
    "Tensor-Core",
    "Tensor-Core-HIP",
    "Tensor-Tiling",
    "Thread-Cache",
    "Thread-Chunk",
    "Thread-Tiling",
    "TMA-Multicast",
    "Multicast-A",
    "Column-Stage",
    "Column-Pairs",
    "TMA-Pipeline",
    "TMA-Store",
    "Transpose",
    "Vectorize",
    "Warp-Specialize",
    "Warp-Tiling",
    "WGMMA",
    // Kernel-agnostic (issue 14): reductions, softmax, attention, transposes, stencils.
    "Block-Reduce",
    "Column-Split",
    "KV-Tile",
    "Online-Softmax",
    "Query-Tile",
    "Grid-Stride",
    "Fast-Math",
    "Fragment-Prefetch",
    "Interior-Loop",
    "Epilogue-Vector",
    "Grid-Accumulate",
    "Inner-Vector",
    "Register-Row",
    "Register-Segment",
    "Register-Window",
    "Rows-Per-Block",
    "Stream-Hints",
    "Stream-K",
    "Shared-Window",
    "Uniform-Warpgroup",
    "Stmatrix-Staging",
    "Cluster-Split-K",
    "Pair-Round",
    "Row-Box",
    "Thread-Coarsen",
    "Three-Consumers",
    "Tile-Pad",
    "Tile-Staging",
    "Unroll-Accumulators",
    "Vector-Body",
    "Vectorize-Access",
    "Warp-Reduce",
];

fn sample_regions() -> Regions {
    Regions::new(
        "",
        "__kernel void matmul(__global const float* A, __global const float* B, __global float* C, int n) {\n    int col = get_global_id(0);\n    int row = get_global_id(1);\n    if (row < n && col < n) {\n        float acc = 0.0f;\n        for (int k = 0; k < n; ++k) acc += A[row * n + k] * B[k * n + col];\n        C[row * n + col] = acc;\n    }\n}\n",
        "launch(\"matmul\", [ceil_div(n, BLOCK_X), ceil_div(n, BLOCK_Y)], [BLOCK_X, BLOCK_Y], 0, A, B, C, n);\n",
    )
}

#[test]
fn every_shipped_transformation_parses_and_is_listed() {
    let library = Library::builtin().unwrap();
    let names: Vec<&str> = library.list().iter().map(|t| t.name.as_str()).collect();
    let mut expected = SHIPPED.to_vec();
    expected.sort_by_key(|n| n.to_lowercase());
    assert_eq!(names, expected);
    for t in library.list() {
        assert!(t.source.to_string_lossy().starts_with("builtin:"), "{}", t.source.display());
        assert!(!t.passes.is_empty());
    }
}

#[test]
fn every_pass_builds_a_complete_prompt_on_every_backend_it_claims() {
    let library = Library::builtin().unwrap();
    let regions = sample_regions();
    for t in library.list() {
        // A context that has exactly what the transformation requires or redefines.
        let tuning: Vec<ContextParam> = t.requires.iter().chain(&t.redefines).filter(|n| *n != "n").map(|n| ContextParam::new(n.as_str(), "4, 8")).collect();
        let inputs = [ContextParam::new("n", "1024, 2048")];
        for backend in &t.applies_to {
            let kernel = KernelBrief { pattern: t.patterns.first().copied(), description: "" };
            let ctx = PromptContext { kernel, regions: &regions, backend: *backend, tuning: &tuning, inputs: &inputs, constraints: &[] };
            for pass in 1..=t.passes.len() {
                let prompt = library.pass_prompt(t, pass, &ctx).unwrap_or_else(|e| panic!("{} pass {pass} on {backend}: {e}", t.name));
                assert!(!prompt.text.contains("{{"), "{} pass {pass} on {backend} leaves a placeholder:\n{}", t.name, prompt.text);
                assert!(prompt.text.contains(&format!("# This pass: {pass} of {}", t.passes.len())), "{}", prompt.text);
                assert_eq!(prompt.region, t.passes[pass - 1].region);
                for name in &t.passes[pass - 1].snippets {
                    let snippet = library.snippet(name, *backend).unwrap();
                    assert!(prompt.text.contains(snippet.text.trim()), "{} pass {pass} on {backend} lacks snippet {name}", t.name);
                }
            }
        }
    }
}

#[test]
fn every_snippet_file_is_used() {
    let library = Library::builtin().unwrap();
    let used: BTreeSet<&str> = library.list().iter().flat_map(|t| t.passes.iter().flat_map(|p| p.snippets.iter().map(String::as_str))).collect();
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../transformations/snippets");
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
        assert!(used.contains(stem.as_str()), "{} is used by no transformation", path.display());
    }
}

#[test]
fn lookup_forgives_case_and_punctuation_and_suggests() {
    let library = Library::builtin().unwrap();
    assert_eq!(library.get("tb-tiling").unwrap().name, "TB-Tiling");
    assert_eq!(library.get("TB_TILING").unwrap().name, "TB-Tiling");
    assert_eq!(library.get("threadtiling").unwrap().name, "Thread-Tiling");
    let err = library.get("Tread-Tiling").unwrap_err();
    assert!(matches!(&err, LibraryError::NotFound { suggestion: Some(s), .. } if s == "Thread-Tiling"), "{err}");
    assert_eq!(err.to_string(), "no transformation named 'Tread-Tiling'; did you mean 'Thread-Tiling'?");
    let err = library.get("loop-fusion").unwrap_err().to_string();
    assert!(err.contains("peak transformations list"), "{err}");
}

#[test]
fn show_renders_parameters_passes_and_terms() {
    let library = Library::builtin().unwrap();
    let t = library.get("Thread-Tiling").unwrap();
    let shown = library.show(t);
    assert!(shown.starts_with("Thread-Tiling — "), "{shown}");
    assert!(shown.contains("TRD_X = { pow2 = [1, 16] }"), "{shown}");
    assert!(shown.contains("TRD_X * TRD_Y <= 128"), "{shown}");
    assert!(shown.contains("pass 3/3 [host]"), "{shown}");
    assert!(shown.contains("opencl: "), "{shown}");
}

/// A folder with one good transformation, the files it needs, and `extra` files.
fn write_dir(dir: &Path, extra: &[(&str, &str)]) {
    std::fs::create_dir_all(dir.join("snippets")).unwrap();
    std::fs::write(dir.join("translations.toml"), "[cuda]\nbarrier = \"__syncthreads()\"\n[opencl]\nbarrier = \"barrier(CLK_LOCAL_MEM_FENCE)\"\n").unwrap();
    std::fs::write(dir.join("snippets/helper.cu"), "#define HELP 1\n").unwrap();
    std::fs::write(dir.join("snippets/helper.cl"), "#define HELP 1\n").unwrap();
    for (name, text) in extra {
        std::fs::write(dir.join(name), text).unwrap();
    }
}

const GOOD: &str = r#"
name = "Mine"
description = "a test transformation"
applies_to = ["cuda", "opencl"]
[tuning]
UNROLL = { values = [1, 2, 4] }
[[passes]]
region = "device"
title = "sync"
instructions = "Call {{barrier}} after the loads."
snippets = ["helper"]
"#;

fn load_with(file: &str) -> Result<Library, LibraryError> {
    let dir = tempfile::tempdir().unwrap();
    write_dir(dir.path(), &[("mine.toml", file)]);
    Library::load_dir(dir.path())
}

fn error_of(file: &str) -> String {
    load_with(file).unwrap_err().to_string()
}

#[test]
fn a_good_user_folder_loads() {
    let library = load_with(GOOD).unwrap();
    assert_eq!(library.list().len(), 1);
    assert!(library.list()[0].source.ends_with("mine.toml"));
}

#[test]
fn bad_files_name_file_and_field() {
    let err = error_of(&GOOD.replace("title = \"sync\"", "title = \"sync\"\nregion_name = \"x\""));
    assert!(err.contains("mine.toml") && err.contains("passes[0]") && err.contains("region_name"), "{err}");

    let err = error_of(&GOOD.replace("region = \"device\"", "region = \"kernel\""));
    assert!(err.contains("mine.toml") && err.contains("passes[0].region") && err.contains("kernel"), "{err}");

    let err = error_of(&GOOD.replace("snippets = [\"helper\"]", "snippets = [\"nope\"]"));
    assert!(err.contains("mine.toml") && err.contains("passes[0].snippets[0]") && err.contains("snippets/nope.cu"), "{err}");

    let err = error_of(&GOOD.replace("{ values = [1, 2, 4] }", "{ range = [4, 1] }"));
    assert!(err.contains("mine.toml") && err.contains("tuning.UNROLL") && err.contains("empty"), "{err}");

    let err = error_of(&GOOD.replace("{{barrier}}", "{{fence}}"));
    assert!(err.contains("mine.toml") && err.contains("passes[0].instructions") && err.contains("{{fence}}") && err.contains("cuda"), "{err}");

    let err = error_of(&GOOD.replace("applies_to = [\"cuda\", \"opencl\"]", "applies_to = [\"cuda\", \"metal\"]"));
    assert!(err.contains("mine.toml") && err.contains("applies_to") && err.contains("metal"), "{err}");

    let err = error_of(&GOOD.replace("description = \"a test transformation\"\n", ""));
    assert!(err.contains("mine.toml") && err.contains("description"), "{err}");
}

#[test]
fn snippet_missing_for_one_backend_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    write_dir(dir.path(), &[("mine.toml", GOOD)]);
    std::fs::remove_file(dir.path().join("snippets/helper.cl")).unwrap();
    let err = Library::load_dir(dir.path()).unwrap_err().to_string();
    assert!(err.contains("no snippet 'helper' for opencl") && err.contains("snippets/helper.cl"), "{err}");
}

#[test]
fn duplicate_names_and_bad_snippet_files_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    write_dir(dir.path(), &[("mine.toml", GOOD), ("again.toml", &GOOD.replace("\"Mine\"", "\"MINE\""))]);
    let err = Library::load_dir(dir.path()).unwrap_err();
    assert!(matches!(err, LibraryError::Duplicate { .. }), "{err}");

    let dir = tempfile::tempdir().unwrap();
    write_dir(dir.path(), &[("mine.toml", GOOD)]);
    std::fs::write(dir.path().join("snippets/helper.metal"), "x").unwrap();
    let err = Library::load_dir(dir.path()).unwrap_err().to_string();
    assert!(err.contains("helper.metal") && err.contains(".metal"), "{err}");
}

#[test]
fn a_user_folder_layers_over_the_builtin_library() {
    let dir = tempfile::tempdir().unwrap();
    // Uses a shipped snippet and shipped terms, and replaces a shipped transformation.
    let mine = r#"
name = "Offset"
description = "my own padding"
[[passes]]
region = "macros"
title = "pad"
instructions = "Use {{shared}} tiles with PEAK_TILE_COPY."
snippets = ["tile_copy"]
"#;
    std::fs::write(dir.path().join("offset.toml"), mine).unwrap();
    let mut library = Library::builtin().unwrap();
    let count = library.list().len();
    library.add_dir(dir.path()).unwrap();
    assert_eq!(library.list().len(), count);
    assert_eq!(library.get("offset").unwrap().description, "my own padding");
    assert!(Library::load_dir(dir.path()).is_err(), "alone, the folder lacks the shipped snippet and terms");
}

#[test]
fn unreadable_folder_is_named() {
    let err = Library::load_dir("/nonexistent/peak-library").unwrap_err().to_string();
    assert!(err.contains("/nonexistent/peak-library"), "{err}");
}

#[test]
fn backends_parse_by_name() {
    assert_eq!("OpenCL".parse::<Language>().unwrap(), Language::Opencl);
    assert!("metal".parse::<Language>().unwrap_err().contains("cuda, hip, opencl or hlsl"));
}

#[test]
fn a_redefined_parameter_must_exist_and_is_not_taken_for_a_second_application() {
    let library = Library::builtin().unwrap();
    let wgmma = library.get("WGMMA").unwrap();
    assert!(wgmma.redefines.contains(&"BLOCK_X".to_string()));
    let regions = sample_regions();
    let inputs = [ContextParam::new("n", "1024, 2048")];
    let with = |names: &[&str]| names.iter().map(|n| ContextParam::new(*n, "4, 8")).collect::<Vec<_>>();
    let before = with(&["NUM_STAGES", "BLOCK_X", "BLOCK_Y", "TILE_K", "WARP_X", "FRAG_M", "FRAG_N"]);
    let ctx = PromptContext { kernel: GEMM, regions: &regions, backend: Language::Cuda, tuning: &before, inputs: &inputs, constraints: &[] };
    assert!(library.pass_prompt(wgmma, 1, &ctx).is_ok());
    // Without the parameter it redefines, the transformation does not apply.
    let missing = with(&["NUM_STAGES", "BLOCK_Y", "TILE_K", "WARP_X", "FRAG_M", "FRAG_N"]);
    let ctx = PromptContext { tuning: &missing, ..ctx };
    assert!(library.pass_prompt(wgmma, 1, &ctx).unwrap_err().to_string().contains("BLOCK_X"));
    // A parameter it introduces is still refused when present: applied twice.
    let twice = with(&["NUM_STAGES", "BLOCK_X", "BLOCK_Y", "TILE_K", "WARP_X", "FRAG_M", "FRAG_N", "WGMMA_N"]);
    let ctx = PromptContext { tuning: &twice, ..ctx };
    assert!(library.pass_prompt(wgmma, 1, &ctx).unwrap_err().to_string().contains("applied already"));
}
