//! Property-based fuzzing of peak-transform's parsers (issue 16, "parsers that cannot
//! panic"): the transformation file format (`Transformation::parse` on arbitrary text and
//! on mutations of every shipped file under `transformations/`, `Library::load_dir` on
//! arbitrary bytes, non-UTF-8 included) and reply parsing (`parse_reply`, `strip_thinking`,
//! `PassPrompt::accept`) on arbitrary replies and on soups of fences, think tags and markers.
//!
//! The property everywhere: a value or a clear error, never a panic or a hang.
// Helpers outside #[test] functions unwrap too; clippy's allow-unwrap-in-tests does not reach them here (rust-clippy#13981).
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};

use peak_spec::{Region, Regions};
use peak_transform::reply::strip_thinking;

/// A GEMM, the pattern the matmul transformations are written for.
const GEMM: KernelBrief<'static> = KernelBrief { pattern: Some(peak_spec::Pattern::Gemm), description: "" };
use peak_transform::{ContextParam, KernelBrief, Language, Library, PromptContext, Transformation, parse_reply};
use proptest::prelude::*;
use proptest::test_runner::Config;

fn config(cases: u32) -> Config {
    Config { cases, failure_persistence: None, ..Config::default() }
}

fn transformations_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../transformations")
}

/// Every shipped transformation file, sorted, with its text.
fn shipped() -> Vec<(PathBuf, String)> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(transformations_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml") && p.file_name().is_some_and(|n| n != "translations.toml"))
        .collect();
    files.sort();
    assert!(!files.is_empty());
    files.into_iter().map(|p| (p.clone(), std::fs::read_to_string(&p).unwrap())).collect()
}

const TOKENS: &[&str] = &[
    "[tuning]",
    "[constraints]",
    "[[passes]]",
    "[translations.cuda]",
    "[translations.vulkan]",
    " = ",
    "{",
    "}",
    "[",
    "]",
    ",",
    "\"",
    "\"\"\"",
    "'''",
    "#",
    "\n",
    "\r\n",
    "\0",
    "é",
    "{{",
    "}}",
    "{{thread_x}}",
    "{{ Bad Term }}",
    "{{unknown_term}}",
    "region = \"host\"",
    "region = \"nowhere\"",
    "snippets = [\"tile_copy\", \"tile_copy\"]",
    "snippets = [\"missing\"]",
    "requires = [\"1abc\"]",
    "redefines = [\"NOPE\"]",
    "applies_to = []",
    "applies_to = [\"cuda\", \"cuda\"]",
    "X = { values = [] }",
    "X = { range = [-9223372036854775808, 9223372036854775807] }",
    "X = { range = [0, 9223372036854775807], step = 9223372036854775807 }",
    "X = { pow2 = [1, 9223372036854775807] }",
    "X = { pow2 = [0, -1] }",
    "tuning = [\"X <\"]",
    "tuning = [\"loop {}\"]",
    "tuning = [\"((((((((((((((((((((((((((((((((((((((((((((((((((((((((X))))))))))))))))))))))))))))))))))))))))))))))))))))))))\"]",
    "description = \" \"",
    "name = \"\"",
    "name = \" x\"",
    "name = \"--\"",
    "9223372036854775808",
    "-9223372036854775808",
    "1e309",
    "nan",
];

fn mutate(base: &str, edits: &[(u8, usize, usize, String)]) -> String {
    let mut chars: Vec<char> = base.chars().collect();
    for (kind, a, b, s) in edits {
        let at = |p: usize, len: usize| p % (len + 1);
        let start = at(*a, chars.len());
        match kind % 5 {
            0 => {
                let end = (start + b % 40).min(chars.len());
                chars.drain(start..end);
            }
            1 => {
                chars.splice(start..start, s.chars());
            }
            2 | 3 => {
                chars.splice(start..start, TOKENS[b % TOKENS.len()].chars());
            }
            _ => {
                let text: String = chars.iter().collect();
                let mut lines: Vec<&str> = text.split_inclusive('\n').collect();
                if !lines.is_empty() {
                    let (i, j) = (a % lines.len(), b % lines.len());
                    lines.swap(i, j);
                }
                chars = lines.concat().chars().collect();
            }
        }
    }
    chars.into_iter().collect()
}

fn edits() -> impl Strategy<Value = Vec<(u8, usize, usize, String)>> {
    proptest::collection::vec((any::<u8>(), any::<usize>(), any::<usize>(), "\\PC{0,10}"), 1..6)
}

/// A parsed transformation must be showable and its domains expandable.
fn check_parsed(library: &Library, t: &Transformation) {
    let _ = library.show(t);
    for p in &t.tuning {
        let values = p.domain.expand().expect("a parsed transformation's domains expand");
        assert!(!values.is_empty() && values.len() <= 1_000_000);
    }
}

fn regions() -> Regions {
    Regions::new(
        "#define IDX(r, c, ld) ((r) * (ld) + (c))\n#define TX threadIdx.x\n",
        "__global__ void matmul(const float* A, const float* B, float* C, int n) {\n  C[0] = A[0] * B[0];\n}\n",
        "launch(\"matmul\", [ceil_div(n, BLOCK_X), ceil_div(n, BLOCK_Y)], [BLOCK_X, BLOCK_Y], 0, A, B, C, n);\n",
    )
}

/// Reply pieces: fences of every kind and length, think tags in any case, markers, a copy
/// of another region, prose and code.
fn reply_piece() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => proptest::sample::select(&[
            "```", "```c", "````", "~~~", "~~~~", "``", "   ```", "\t```cuda", "```x```", "``` `", "~~~ ```",
            "<think>", "</think>", "<THINKING>", "</thinking>", "<think", "</Think>",
            "// @peak device", "// @peak host", "  // @peak macros",
            "#define IDX(r, c, ld) ((r) * (ld) + (c))", "#define TX threadIdx.x",
            "launch(\"matmul\", [ceil_div(n, BLOCK_X), ceil_div(n, BLOCK_Y)], [BLOCK_X, BLOCK_Y], 0, A, B, C, n);",
            "__global__ void k() {}", "int x;", "}", "", "   ", "Here is the code:", "é\u{0}\u{feff}", "\u{3000}```",
        ][..]).prop_map(str::to_string),
        1 => "\\PC{0,12}",
    ]
}

fn reply_soup() -> impl Strategy<Value = String> {
    (proptest::collection::vec((reply_piece(), any::<bool>()), 0..16)).prop_map(|pieces| {
        let mut text = String::new();
        for (piece, newline) in pieces {
            text.push_str(&piece);
            if newline {
                text.push('\n');
            }
        }
        text
    })
}

/// A fenced block: any fence, language tag and indent, a body of reply pieces, closed or not.
fn fenced_block() -> impl Strategy<Value = String> {
    (
        proptest::sample::select(&["```", "````", "~~~", "~~~~~", "``"][..]),
        proptest::sample::select(&["", "c", "cuda", "rhai", " hlsl", "x`y"][..]),
        0usize..4,
        proptest::collection::vec(
            prop_oneof![
                3 => proptest::sample::select(&["int x = 1;", "__global__ void k() { }", "  y += x * 2;", "#define TILE 16", "", "launch(\"k\", 1, 1, 0);"][..]).prop_map(str::to_string),
                1 => reply_piece(),
            ],
            0..5,
        ),
        prop_oneof![
            3 => Just(None),
            1 => proptest::sample::select(&["", "```", "````", "~~~", "~~~~~", "  ```  ", "```c"][..]).prop_map(Some),
        ],
    )
        .prop_map(|(fence, lang, indent, body, close)| {
            let close = close.map_or_else(|| format!("{}{fence}", " ".repeat(indent)), str::to_string);
            let pad = " ".repeat(indent);
            let mut text = format!("{pad}{fence}{lang}\n");
            for line in body {
                text.push_str(&pad);
                text.push_str(&line);
                text.push('\n');
            }
            text.push_str(&close);
            text.push('\n');
            text
        })
}

/// A reply shaped like a model's: prose, thinking and fenced blocks in any number.
fn structured_reply() -> impl Strategy<Value = String> {
    proptest::collection::vec(
        prop_oneof![
            3 => fenced_block(),
            2 => reply_piece().prop_map(|p| p + "\n"),
            1 => (proptest::sample::select(&["think", "thinking", "THINK"][..]), fenced_block(), any::<bool>())
                .prop_map(|(tag, b, closed)| if closed { format!("<{tag}>{b}</{tag}>\n") } else { format!("<{tag}>{b}") }),
        ],
        1..5,
    )
    .prop_map(|parts| parts.concat())
}

fn check_reply(reply: &str, target: Region) -> Result<(), TestCaseError> {
    let current = regions();
    match parse_reply(reply, &current, target) {
        Ok(code) => {
            prop_assert!(!code.trim().is_empty());
            prop_assert!(!code.lines().any(|l| l.trim().starts_with("// @peak")));
        }
        Err(e) => prop_assert!(!e.kind().is_empty() && !e.to_string().is_empty()),
    }
    // Reasoning is gone, whatever the tags' case or nesting, and stripping twice changes nothing.
    let stripped = strip_thinking(reply);
    let lower = stripped.to_ascii_lowercase();
    prop_assert!(!["<think>", "</think>", "<thinking>", "</thinking>"].iter().any(|t| lower.contains(t)), "{:?}", stripped);
    prop_assert!(stripped.len() <= reply.len());
    prop_assert_eq!(strip_thinking(&stripped), stripped);
    Ok(())
}

proptest! {
    #![proptest_config(config(256))]

    /// Arbitrary text is a transformation or an error naming the file.
    #[test]
    fn transformation_arbitrary_text(text in "\\PC{0,200}") {
        match Transformation::parse(Path::new("t.toml"), &text) {
            Ok(t) => check_parsed(&Library::default(), &t),
            Err(e) => prop_assert!(e.to_string().contains("t.toml")),
        }
    }

    /// Every shipped transformation file, mutated.
    #[test]
    fn transformation_mutated(file in any::<usize>(), edits in edits()) {
        let files = shipped();
        let (path, text) = &files[file % files.len()];
        let text = mutate(text, &edits);
        match Transformation::parse(path, &text) {
            Ok(t) => check_parsed(&Library::default(), &t),
            Err(e) => prop_assert!(e.to_string().contains(&*path.file_name().unwrap().to_string_lossy())),
        }
    }

    /// Arbitrary replies.
    #[test]
    fn reply_arbitrary_text(text in "\\PC{0,300}", target in 0usize..3) {
        check_reply(&text, Region::ALL[target])?;
    }

    /// Replies assembled from fences, think tags, markers and copied regions.
    #[test]
    fn reply_soup_parses_or_fails(text in reply_soup(), target in 0usize..3) {
        check_reply(&text, Region::ALL[target])?;
    }

    /// Replies shaped like a model's, with blocks well or badly fenced.
    #[test]
    fn reply_structured_parses_or_fails(text in structured_reply(), target in 0usize..3) {
        check_reply(&text, Region::ALL[target])?;
    }
}

proptest! {
    #![proptest_config(config(64))]

    /// A library folder: the shipped snippets and translations, one mutated transformation,
    /// and sometimes one file of arbitrary bytes (non-UTF-8 included) added or overwritten.
    #[test]
    fn library_dir_arbitrary_bytes(
        file in any::<usize>(),
        edits in proptest::collection::vec((any::<u8>(), any::<usize>(), any::<usize>(), "\\PC{0,10}"), 0..3),
        bytes in prop_oneof![
            proptest::collection::vec(any::<u8>(), 0..120),
            "\\PC{0,120}".prop_map(String::into_bytes),
        ],
        which in 0u8..6,
    ) {
        let files = shipped();
        let (path, text) = &files[file % files.len()];
        let dir = tempfile::tempdir().unwrap();
        let snippets = dir.path().join("snippets");
        std::fs::create_dir(&snippets).unwrap();
        for entry in std::fs::read_dir(transformations_dir().join("snippets")).unwrap() {
            let entry = entry.unwrap().path();
            std::fs::copy(&entry, snippets.join(entry.file_name().unwrap())).unwrap();
        }
        std::fs::copy(transformations_dir().join("translations.toml"), dir.path().join("translations.toml")).unwrap();
        std::fs::write(dir.path().join(path.file_name().unwrap()), mutate(text, &edits)).unwrap();
        match which {
            0 => std::fs::write(dir.path().join("raw.toml"), &bytes).unwrap(),
            1 => std::fs::write(snippets.join("tile_copy.cu"), &bytes).unwrap(),
            2 => std::fs::write(dir.path().join("translations.toml"), &bytes).unwrap(),
            3 => std::fs::write(snippets.join("odd name.xyz"), &bytes).unwrap(),
            _ => {}
        }
        match Library::load_dir(dir.path()) {
            Ok(library) => {
                for t in library.list() {
                    check_parsed(&library, t);
                }
            }
            Err(e) => prop_assert!(!e.to_string().is_empty()),
        }
    }

    /// Arbitrary replies through a real pass prompt of the shipped library.
    #[test]
    fn pass_prompt_accepts_or_rejects(text in structured_reply(), pick in any::<usize>()) {
        let library = Library::builtin().unwrap();
        let current = regions();
        let candidates: Vec<&Transformation> = library.list().iter().filter(|t| t.applies_to(Language::Cuda) && t.fits(GEMM.pattern)).collect();
        let t = candidates[pick % candidates.len()];
        let mut tuning: Vec<ContextParam> = t.requires.iter().chain(&t.redefines).map(|r| ContextParam::new(r.clone(), "pow2 [1, 64]")).collect();
        tuning.push(ContextParam::new("BLOCK_X", "pow2 [1, 64]"));
        let ctx = PromptContext { kernel: GEMM, regions: &current, backend: Language::Cuda, tuning: &tuning, inputs: &[], constraints: &[] };
        let pass = 1 + pick / 7 % t.passes.len();
        // Every shipped pass for CUDA GEMMs has a prompt for one with the parameters it requires
        // and redefines.
        let prompt = library.pass_prompt(t, pass, &ctx);
        prop_assert!(prompt.is_ok(), "{} pass {}: {:?}", t.name, pass, prompt.err());
        let prompt = prompt.unwrap();
        // accept is parse_reply plus the pass's snippets on top: the same verdict, and on
        // success the parsed code at the end of the region.
        match (prompt.accept(&text, &current), parse_reply(&text, &current, prompt.region)) {
            (Ok(region), Ok(code)) => {
                prop_assert!(!region.trim().is_empty());
                prop_assert!(region.ends_with(&code), "{:?} does not end with {:?}", region, code);
                let snippets = &region[..region.len() - code.len()];
                prop_assert!(!snippets.lines().any(|l| l.trim().starts_with("// @peak")), "{:?}", snippets);
            }
            (Err(a), Err(b)) => prop_assert_eq!(a.kind(), b.kind()),
            (a, b) => prop_assert!(false, "accept {:?} but parse_reply {:?}", a, b),
        }
    }
}

/// Regression found by the fuzzer (the shared domain type): a range spanning all of i64
/// overflowed while counting its values.
#[test]
fn full_i64_range_in_a_transformation_is_an_error() {
    let (path, text) = shipped().into_iter().find(|(p, _)| p.ends_with("offset.toml")).unwrap();
    let text = text.replace("OFFSET = { values = [0, 1, 2, 4, 8],", "OFFSET = { range = [-9223372036854775808, 9223372036854775807],");
    let err = Transformation::parse(&path, &text).unwrap_err().to_string();
    assert!(err.contains("tuning.OFFSET") && err.contains("more than a million"), "{err}");
}
