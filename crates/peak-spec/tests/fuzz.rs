//! Property-based fuzzing of peak-spec's parsers (issue 16, "parsers that cannot panic"):
//! the manifest (`Manifest::parse`, `Context::load` on arbitrary bytes), the three-region
//! splitter (`Regions::parse`), and the size and constraint expressions (`Expr`,
//! `Domain::expand`, `Space`), fed arbitrary text, mutations of a real context and
//! values at the edges of i64 (overflow, division by zero, sizes far beyond memory).
//!
//! The property everywhere: a value or a clear error, never a panic, a hang or an
//! integer-overflow panic (the tests run in debug mode, where overflow panics).

use peak_spec::expr::{Expr, ceil_div, expression_engine};
use peak_spec::{Context, Domain, ExecParams, Manifest, Region, Regions, Space};
use proptest::prelude::*;
use proptest::test_runner::Config;

const MANIFEST: &str = include_str!("../../../examples/matmul-opencl-tiled/peak.toml");
const SOURCE: &str = include_str!("../../../examples/matmul-opencl-tiled/kernel.cl");

fn config(cases: u32) -> Config {
    Config { cases, failure_persistence: None, ..Config::default() }
}

/// Fragments that are likely to hit edge cases of TOML, the manifest schema and Rhai.
const TOKENS: &[&str] = &[
    "[kernel]",
    "[[arrays]]",
    "[inputs]",
    "[tuning]",
    "[constraints]",
    "[tolerance]",
    "[kernel.matmul]",
    " = ",
    "{",
    "}",
    "[",
    "]",
    ",",
    "\"",
    "'''",
    "\"\"\"",
    "#",
    "\n",
    "\r\n",
    "\0",
    "é",
    "\u{feff}",
    "9223372036854775807",
    "-9223372036854775808",
    "9223372036854775808",
    "0",
    "-1",
    "1e309",
    "nan",
    "inf",
    "true",
    "{ values = [] }",
    "{ values = [1, 1] }",
    "{ range = [-9223372036854775808, 9223372036854775807] }",
    "{ range = [-9223372036854775808, 9223372036854775807], step = 1 }",
    "{ range = [0, 9223372036854775807], step = 9223372036854775807 }",
    "{ range = [1, 10], step = 0 }",
    "{ pow2 = [1, 9223372036854775807] }",
    "{ pow2 = [-9223372036854775808, 0] }",
    "\"n * n * n * n * n\"",
    "\"ceil_div(n, 0)\"",
    "\"n / 0\"",
    "\"n % 0\"",
    "\"9223372036854775807 + n\"",
    "\"loop {}\"",
    "\"while true {}\"",
    "\"((((((((((((((((((((((((((((((((((((((((((n))))))))))))))))))))))))))))))))))))))))))\"",
    "size",
    "type",
    "init",
    "output = true",
    "inout = true",
    "source = \"../x\"",
    "source = \"/etc/passwd\"",
    "source = \"peak.toml\"",
    "// @peak macros",
    "// @peak device",
    "// @peak host",
    "// @peak ",
];

/// One edit: kind, two positions (as fractions of the length, so they always land inside)
/// and a payload.
#[derive(Debug, Clone)]
enum Edit {
    Delete(usize, usize),
    Insert(usize, String),
    Token(usize, usize),
    DuplicateLine(usize),
    SwapLines(usize, usize),
    Truncate(usize),
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        (any::<usize>(), 0usize..40).prop_map(|(a, n)| Edit::Delete(a, n)),
        (any::<usize>(), "\\PC{0,12}").prop_map(|(a, s)| Edit::Insert(a, s)),
        (any::<usize>(), any::<usize>()).prop_map(|(a, t)| Edit::Token(a, t)),
        any::<usize>().prop_map(Edit::DuplicateLine),
        (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Edit::SwapLines(a, b)),
        any::<usize>().prop_map(Edit::Truncate),
    ]
}

/// Apply edits to `base`, character-wise so the result stays valid UTF-8.
fn mutate(base: &str, edits: &[Edit]) -> String {
    let mut chars: Vec<char> = base.chars().collect();
    for e in edits {
        let at = |p: usize, len: usize| if len == 0 { 0 } else { p % (len + 1) };
        match e {
            Edit::Delete(a, n) => {
                let start = at(*a, chars.len());
                let end = (start + n).min(chars.len());
                chars.drain(start..end);
            }
            Edit::Insert(a, s) => {
                let start = at(*a, chars.len());
                chars.splice(start..start, s.chars());
            }
            Edit::Token(a, t) => {
                let start = at(*a, chars.len());
                let token = TOKENS[t % TOKENS.len()];
                chars.splice(start..start, token.chars());
            }
            Edit::DuplicateLine(a) | Edit::SwapLines(a, _) => {
                let text: String = chars.iter().collect();
                let mut lines: Vec<&str> = text.split_inclusive('\n').collect();
                if lines.is_empty() {
                    continue;
                }
                let i = a % lines.len();
                match e {
                    Edit::SwapLines(_, b) => {
                        let j = b % lines.len();
                        lines.swap(i, j);
                    }
                    _ => lines.insert(i, lines[i]),
                }
                chars = lines.concat().chars().collect();
            }
            Edit::Truncate(a) => {
                let len = at(*a, chars.len());
                chars.truncate(len);
            }
        }
    }
    chars.into_iter().collect()
}

/// Any text: regions that render to a file which parses back to them (a normal form: markers
/// without trailing blanks, LF after each), or an error naming the file and a line in it.
fn check_regions(text: &str) {
    match Regions::parse("k.cl", text) {
        Ok(regions) => {
            let rendered = regions.render();
            assert_eq!(Regions::parse("k.cl", &rendered).as_ref().ok(), Some(&regions), "{text:?}");
            assert!(rendered.starts_with(&regions.device_source()));
            for r in Region::ALL {
                assert!(text.contains(regions.get(r)), "{r} region text comes from the file");
            }
        }
        Err(e) => {
            let e = e.to_string();
            assert!(e.contains("k.cl"), "{e}");
        }
    }
}

/// Whatever parses must also be usable: its space builds, its samples are valid points of
/// its domains (reproducibly), it serializes and re-parses.
fn check_parsed(manifest: &Manifest) {
    let space = Space::new(manifest).expect("a manifest that parsed has a space");
    if space.product_size() <= 64 {
        let points = space.sample(4, 1);
        assert_eq!(points.len(), space.count().min(4), "a sample takes every valid point up to its size");
        assert_eq!(points, space.sample(4, 1), "the same seed samples the same points");
        for point in &points {
            assert!(space.is_valid(point), "a sampled point satisfies the constraints: {point:?}");
            for (name, value) in point.iter() {
                let values = space.values(name).unwrap_or_else(|| panic!("{name} is a parameter of the space"));
                assert!(values.contains(&value), "{name} = {value} is in its domain {values:?}");
            }
        }
    }
    if space.product_size() <= 4096 && manifest.shapes.is_empty() {
        // The walk skips whole subtrees where a constraint fails on the axes it reads: it
        // must find exactly the points a check of every combination finds, in order.
        let names: Vec<String> = space.names().map(String::from).collect();
        let tuning: Vec<String> = space.tuning_names().map(String::from).collect();
        let axes: Vec<&[i64]> = names.iter().map(|n| space.values(n).expect("every name of a space has values")).collect();
        let mut every = Vec::new();
        let mut odometer = vec![0usize; names.len()];
        if axes.iter().all(|values| !values.is_empty()) {
            'all: loop {
                let mut point = ExecParams::default();
                for ((name, values), &i) in names.iter().zip(&axes).zip(&odometer) {
                    let map = if tuning.contains(name) { &mut point.tuning } else { &mut point.inputs };
                    map.insert(name.clone(), values[i]);
                }
                if space.is_valid(&point) {
                    every.push(point);
                }
                let mut d = names.len();
                loop {
                    if d == 0 {
                        break 'all;
                    }
                    d -= 1;
                    odometer[d] += 1;
                    if odometer[d] < axes[d].len() {
                        break;
                    }
                    odometer[d] = 0;
                }
            }
        }
        assert_eq!(space.iter().collect::<Vec<_>>(), every, "the pruned walk and the exhaustive check disagree");
    }
    let text = manifest.to_toml();
    let again = Manifest::parse("again.toml", &text).expect("a parsed manifest re-parses from its own TOML");
    assert_eq!(&again, manifest);
}

/// Integers worth trying: the edges of i64 and small values.
fn edge_i64() -> impl Strategy<Value = i64> {
    prop_oneof![
        Just(i64::MIN),
        Just(i64::MIN + 1),
        Just(i64::MAX),
        Just(i64::MAX - 1),
        Just(0),
        Just(1),
        Just(-1),
        Just(2),
        Just(1 << 31),
        Just(1 << 32),
        Just(1 << 62),
        -1024i64..1024,
        any::<i64>(),
    ]
}

fn domain() -> impl Strategy<Value = Domain> {
    (
        proptest::option::of(proptest::collection::vec(edge_i64(), 0..5)),
        proptest::option::of([edge_i64(), edge_i64()]),
        proptest::option::of(edge_i64()),
        proptest::option::of([edge_i64(), edge_i64()]),
    )
        .prop_map(|(values, range, step, pow2)| Domain { values, range, step, pow2 })
}

const NAMES: &[&str] = &["n", "m", "BLOCK_X", "BLOCK_Y"];

/// A Rhai-ish expression over `NAMES`: mostly well-formed, sometimes not.
fn expression() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![
        4 => proptest::sample::select(NAMES).prop_map(str::to_string),
        3 => edge_i64().prop_map(|v| if v < 0 { format!("({v})") } else { v.to_string() }),
        1 => proptest::sample::select(&["9223372036854775808", "true", "false", "unknown_name", "1.5", "\"text\"", "()", "[1, 2]"][..]).prop_map(str::to_string),
        1 => "\\PC{0,4}",
    ];
    leaf.prop_recursive(4, 24, 3, |inner| {
        let op = proptest::sample::select(&["+", "-", "*", "/", "%", "**", "<<", ">>", "&", "|", "^", "==", "!=", "<", "<=", ">", ">=", "&&", "||"][..]);
        let func = proptest::sample::select(&["ceil_div", "min", "max"][..]);
        prop_oneof![
            4 => (inner.clone(), op, inner.clone()).prop_map(|(a, op, b)| format!("{a} {op} {b}")),
            1 => (inner.clone()).prop_map(|a| format!("({a})")),
            1 => (inner.clone()).prop_map(|a| format!("-{a}")),
            1 => (inner.clone()).prop_map(|a| format!("!{a}")),
            1 => (func, inner.clone(), inner.clone()).prop_map(|(f, a, b)| format!("{f}({a}, {b})")),
            1 => (inner.clone()).prop_map(|a| format!("is_pow2({a})")),
            1 => (inner.clone(), inner.clone(), inner.clone()).prop_map(|(c, a, b)| format!("if {c} {{ {a} }} else {{ {b} }}")),
            1 => (inner.clone(), inner).prop_map(|(a, b)| format!("{a}; {b}")),
        ]
    })
}

fn params(values: &[i64]) -> ExecParams {
    let mut p = ExecParams::default();
    for (name, v) in NAMES.iter().zip(values) {
        if name.starts_with("BLOCK") {
            p.tuning.insert(name.to_string(), *v);
        } else {
            p.inputs.insert(name.to_string(), *v);
        }
    }
    p
}

/// A manifest built from generated domains and expressions, as TOML text.
fn manifest_text(domains: &[Domain], size: &str, constraint: &str, flops: &str) -> String {
    let mut text = String::from("[kernel]\nname = \"k\"\nbackend = \"cuda\"\nsource = \"k.cu\"\n");
    text.push_str(&format!("flops = {}\n", toml_string(flops)));
    text.push_str("\n[inputs]\n");
    text.push_str(&format!("n = {}\nm = {}\n", domains[0], domains[1]));
    text.push_str("\n[[arrays]]\nname = \"A\"\ntype = \"f32\"\n");
    text.push_str(&format!("size = {}\ninit = \"random\"\noutput = true\n", toml_string(size)));
    text.push_str("\n[tuning]\n");
    text.push_str(&format!("BLOCK_X = {}\nBLOCK_Y = {}\n", domains[2], domains[3]));
    text.push_str(&format!("\n[constraints]\ntuning = [{}]\n", toml_string(constraint)));
    text
}

fn toml_string(s: &str) -> String {
    toml::Value::String(s.to_string()).to_string()
}

proptest! {
    #![proptest_config(config(256))]

    /// Arbitrary text is a manifest or an error naming the file.
    #[test]
    fn manifest_arbitrary_text(text in "\\PC{0,200}") {
        match Manifest::parse("peak.toml", &text) {
            Ok(m) => check_parsed(&m),
            Err(e) => prop_assert!(e.to_string().contains("peak.toml")),
        }
    }

    /// A real manifest, mutated: edits near the schema's edges.
    #[test]
    fn manifest_mutated(edits in proptest::collection::vec(edit(), 1..6)) {
        let text = mutate(MANIFEST, &edits);
        match Manifest::parse("peak.toml", &text) {
            Ok(m) => check_parsed(&m),
            Err(e) => prop_assert!(e.to_string().contains("peak.toml")),
        }
    }

    /// Generated manifests: extreme domains and random expressions.
    #[test]
    fn manifest_generated(
        domains in proptest::collection::vec(domain(), 4),
        size in expression(),
        constraint in expression(),
        flops in expression(),
    ) {
        let text = manifest_text(&domains, &size, &constraint, &flops);
        if let Ok(m) = Manifest::parse("peak.toml", &text) {
            check_parsed(&m);
        }
    }

    /// Domains with any i64 bounds: a list of at most a million values inside the bounds, or an error.
    #[test]
    fn domain_expand(d in domain()) {
        if let Ok(values) = d.expand() {
            prop_assert!(!values.is_empty() && values.len() <= 1_000_000);
            if let Some([lo, hi]) = d.range.or(d.pow2) {
                prop_assert!(values.iter().all(|v| (lo..=hi).contains(v)));
            }
        }
    }

    /// Size and constraint expressions over values at the edges of i64: overflow, division
    /// by zero and huge shifts are errors, not panics.
    #[test]
    fn expressions_evaluate_or_fail(text in expression(), values in proptest::collection::vec(edge_i64(), 4)) {
        let engine = expression_engine();
        if let Ok(expr) = Expr::compile(&engine, &text, NAMES) {
            let p = params(&values);
            let int = expr.eval_int(&engine, &mut p.scope());
            let boolean = expr.eval_bool(&engine, &mut p.scope());
            // Evaluation is deterministic, and each reading names the type it did not get.
            prop_assert_eq!(&int, &expr.eval_int(&engine, &mut p.scope()));
            match (&int, &boolean) {
                (Ok(_), Ok(_)) => prop_assert!(false, "`{}` is both an integer and a boolean", text),
                (Ok(_), Err(e)) => prop_assert!(e.contains("expected true or false"), "{}", e),
                (Err(e), Ok(_)) => prop_assert!(e.contains("expected an integer"), "{}", e),
                // The same failure of evaluation, or a value that is neither.
                (Err(a), Err(b)) => prop_assert!(a == b || (a.contains("expected an integer") && b.contains("expected true or false")), "{} / {}", a, b),
            }
        }
    }

    /// An expression reads only the names `identifiers` lists (a tuning space memoizes each
    /// constraint on those values): changing every other name changes nothing.
    #[test]
    fn expressions_read_only_their_identifiers(text in expression(), values in proptest::collection::vec(edge_i64(), 4), other in proptest::collection::vec(edge_i64(), 4)) {
        let engine = expression_engine();
        if let Ok(expr) = Expr::compile(&engine, &text, NAMES) {
            let used = expr.identifiers();
            let moved: Vec<i64> = NAMES.iter().zip(values.iter().zip(&other)).map(|(n, (v, o))| if used.contains(n) { *v } else { *o }).collect();
            prop_assert_eq!(expr.eval_int(&engine, &mut params(&values).scope()), expr.eval_int(&engine, &mut params(&moved).scope()), "`{}` reads a name beyond {:?}", text, used);
            prop_assert_eq!(expr.eval_bool(&engine, &mut params(&values).scope()), expr.eval_bool(&engine, &mut params(&moved).scope()));
        }
    }

    /// `ceil_div` over all of i64.
    #[test]
    fn ceil_div_any(a in edge_i64(), b in edge_i64()) {
        let engine = expression_engine();
        let expr = Expr::compile(&engine, "ceil_div(n, m)", NAMES).unwrap();
        let result = expr.eval_int(&engine, &mut params(&[a, b]).scope());
        if b > 0 && a >= 0 {
            // The exact value fits i64 here, so it must come back.
            let exact = (i128::from(a) + i128::from(b) - 1) / i128::from(b);
            prop_assert_eq!(&result, &Ok(exact as i64));
        }
        // The script's ceil_div is this function: the same value or a failure in both.
        let direct = ceil_div(a, b);
        prop_assert_eq!(result.as_ref().ok(), direct.as_ref().ok());
        match direct {
            Ok(q) if b > 0 => {
                // The smallest q with q * b >= a.
                let (q, a, b) = (i128::from(q), i128::from(a), i128::from(b));
                prop_assert!(q * b >= a && (q - 1) * b < a, "ceil_div({}, {}) = {}", a, b, q);
            }
            Ok(q) if b == 0 => prop_assert_eq!(q, 0),
            Ok(_) => {}
            // Only a negative divisor can take the result past i64.
            Err(e) => prop_assert!(b < 0 && e.to_string().contains("overflows"), "ceil_div({}, {}): {}", a, b, e),
        }
    }

    /// The region splitter on arbitrary text.
    #[test]
    fn regions_arbitrary_text(text in "\\PC{0,200}") {
        check_regions(&text);
    }

    /// The region splitter on lines drawn from markers (good, misspelt, reordered,
    /// repeated) and code, with LF and CRLF endings.
    #[test]
    fn regions_marker_soup(lines in proptest::collection::vec((proptest::sample::select(&[
        "// @peak macros", "// @peak device", "// @peak host", "// @peak  device  ", "// @peak hostx",
        "// @peak ", "// @peak", "//@peak macros", "  // @peak macros", "// @PEAK macros", "// @peak macros // x",
        "int x;", "", "   ", "launch(\"k\", 1, 1, 0);", "#define X 1", "é\u{0}",
    ][..]), any::<bool>()), 0..12), final_newline in any::<bool>()) {
        let mut text = String::new();
        for (i, (line, crlf)) in lines.iter().enumerate() {
            text.push_str(line);
            if i + 1 < lines.len() || final_newline {
                text.push_str(if *crlf { "\r\n" } else { "\n" });
            }
        }
        if let Ok(regions) = Regions::parse("k.cl", &text) {
            for r in Region::ALL {
                prop_assert!(regions.first_line(r) >= 2);
            }
            let again = Regions::parse("k.cl", &regions.render()).unwrap();
            prop_assert_eq!(again.render(), regions.render());
        }
    }

    /// Well-formed files round-trip byte for byte, and replacing a region with arbitrary text
    /// never panics.
    #[test]
    fn regions_round_trip(
        bodies in proptest::collection::vec(proptest::collection::vec("[^\n/]{0,20}", 0..4), 3),
        replacement in "\\PC{0,60}",
        which in 0usize..3,
    ) {
        let mut text = String::new();
        for (region, body) in Region::ALL.into_iter().zip(&bodies) {
            text.push_str(&region.marker());
            text.push('\n');
            for line in body {
                text.push_str(line);
                text.push('\n');
            }
        }
        let mut regions = Regions::parse("k.cl", &text).unwrap();
        prop_assert_eq!(regions.render(), text);
        regions.replace(Region::ALL[which], replacement.clone());
        // The replaced region holds the text (with a final newline), the others are unchanged.
        let expected = if replacement.is_empty() { String::new() } else { format!("{replacement}\n") };
        prop_assert_eq!(regions.get(Region::ALL[which]), expected.as_str());
        let rendered = regions.render();
        prop_assert!(rendered.starts_with(&regions.device_source()));
        if !replacement.starts_with("// @peak") {
            // No marker in the new text: the file parses back to the same regions.
            prop_assert_eq!(Regions::parse("k.cl", &rendered).ok(), Some(regions));
        } else {
            check_regions(&rendered);
        }
    }

    /// A mutated real source file.
    #[test]
    fn regions_mutated(edits in proptest::collection::vec(edit(), 1..6)) {
        check_regions(&mutate(SOURCE, &edits));
    }
}

proptest! {
    #![proptest_config(config(64))]

    /// `Context::load` on arbitrary bytes (non-UTF-8 included) in either file: an error, or a
    /// context whose space builds.
    #[test]
    fn context_load_arbitrary_bytes(
        manifest_bytes in proptest::collection::vec(any::<u8>(), 0..200),
        source_bytes in proptest::collection::vec(any::<u8>(), 0..200),
        real_manifest in any::<bool>(),
        real_source in any::<bool>(),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let manifest: &[u8] = if real_manifest { MANIFEST.as_bytes() } else { &manifest_bytes };
        let mut source = if real_source { SOURCE.as_bytes().to_vec() } else { source_bytes.clone() };
        if real_source {
            // Still not UTF-8: one invalid byte in the middle of the device region.
            let at = source.len() / 2;
            source.insert(at, 0xFF);
        }
        std::fs::write(dir.path().join("peak.toml"), manifest).unwrap();
        std::fs::write(dir.path().join("kernel.cl"), &source).unwrap();
        match Context::load(dir.path()) {
            Ok(ctx) => {
                // The space of a loaded context is the one its manifest builds.
                let space = ctx.space();
                let built = Space::new(&ctx.manifest).expect("a loaded context's manifest builds its space");
                prop_assert_eq!(space.product_size(), built.product_size());
            }
            Err(e) => prop_assert!(!e.to_string().is_empty()),
        }
    }
}

/// Regressions found by the fuzzer, kept as plain tests.
#[test]
fn full_i64_range_is_an_error_not_an_overflow() {
    let d = Domain { range: Some([i64::MIN, i64::MAX]), ..Domain::default() };
    let err = d.expand().unwrap_err();
    assert!(err.contains("more than a million"), "{err}");
    let d = Domain { range: Some([i64::MIN, i64::MAX]), step: Some(i64::MAX), ..Domain::default() };
    assert_eq!(d.expand().unwrap(), vec![i64::MIN, -1, i64::MAX - 1]);
    let text = MANIFEST.replace("TILE = { pow2 = [4, 32] }", "TILE = { range = [-9223372036854775808, 9223372036854775807] }");
    let err = Manifest::parse("peak.toml", &text).unwrap_err().to_string();
    assert!(err.contains("tuning.TILE"), "{err}");
}

#[test]
fn ceil_div_overflow_is_an_error_not_a_panic() {
    let engine = expression_engine();
    let expr = Expr::compile(&engine, "ceil_div(n, m)", NAMES).unwrap();
    for (a, b, expected) in [(i64::MAX, 2, Some(i64::MAX / 2 + 1)), (i64::MIN, -1, None), (i64::MAX, i64::MAX, Some(1)), (i64::MIN, i64::MIN, Some(3))] {
        let scripted = expr.eval_int(&engine, &mut params(&[a, b]).scope());
        assert_eq!(scripted.as_ref().ok().copied(), expected, "ceil_div({a}, {b}) in a script: {scripted:?}");
        let direct = ceil_div(a, b);
        assert_eq!(direct.as_ref().ok().copied(), expected, "ceil_div({a}, {b})");
        if let Err(e) = direct {
            assert!(e.to_string().contains("overflows"), "{e}");
        }
    }
    assert_eq!(expr.eval_int(&engine, &mut params(&[i64::MAX, 2]).scope()), Ok(i64::MAX / 2 + 1));
    assert!(expr.eval_int(&engine, &mut params(&[i64::MIN, -1]).scope()).is_err());
}
