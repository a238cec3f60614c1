//! Named shapes (`[[shapes]]`, issue 25 item 4): the input space is exactly the listed
//! tuples, `--set` keeps some of them, validation sizes move them, and bad shapes are
//! errors naming the field.
// Helpers outside #[test] functions unwrap too; clippy's allow-unwrap-in-tests does not reach them here (rust-clippy#13981).
#![allow(clippy::unwrap_used)]

use indexmap::IndexMap;
use peak_spec::{Context, Manifest, Space};

const HEAD: &str = r#"
[kernel]
name = "gemm"
backend = "opencl"
source = "kernel.cl"
flops = "2 * M * N * K"

[[arrays]]
name = "C"
type = "f32"
size = "M * N"
init = "zeros"
output = true

[tuning]
B = { values = [4, 8] }
"#;

/// The four GEMMs of a transformer layer.
const SHAPES: &str = "[[shapes]]\nM = 8192\nN = 3072\nK = 768\n\n[[shapes]]\nM = 8192\nN = 768\nK = 3072\n\n[[shapes]]\nM = 8192\nN = 2304\nK = 768\n\n[[shapes]]\nM = 16\nN = 4096\nK = 4096\n";

fn manifest(extra: &str) -> Manifest {
    Manifest::parse("peak.toml", &format!("{HEAD}\n{extra}")).unwrap()
}

fn err(extra: &str) -> String {
    Manifest::parse("peak.toml", &format!("{HEAD}\n{extra}")).unwrap_err().to_string()
}

fn triple(i: &IndexMap<String, i64>) -> (i64, i64, i64) {
    (i["M"], i["N"], i["K"])
}

const ALL: [(i64, i64, i64); 4] = [(8192, 3072, 768), (8192, 768, 3072), (8192, 2304, 768), (16, 4096, 4096)];

#[test]
fn the_input_space_is_exactly_the_named_shapes_in_order() {
    let m = manifest(SHAPES);
    assert!(m.inputs_from_shapes);
    let mut names: Vec<&String> = m.inputs.keys().collect();
    names.sort();
    assert_eq!(names, ["K", "M", "N"], "the inputs are the first shape's names");
    assert_eq!(m.inputs["N"].expand().unwrap(), [3072, 768, 2304, 4096]);
    let space = Space::new(&m).unwrap();
    assert!(space.has_shapes());
    let configs: Vec<_> = space.input_configurations().iter().map(triple).collect();
    assert_eq!(configs, ALL, "4 shapes, not the 2 x 4 x 3 = 24 of the product");
    assert_eq!(space.count(), 8, "each shape with each B");
    assert_eq!(space.product_size(), 8);
    assert!(space.iter().all(|p| ALL.contains(&triple(&p.inputs))));
    assert!(m.describe_kernel().contains("Tuned at the named shapes: K=768 M=8192 N=3072; K=3072 M=8192 N=768;"), "{}", m.describe_kernel());

    // Input constraints still filter them.
    let m = manifest(&format!("{SHAPES}\n[constraints]\ninputs = [\"M > 16\"]\n"));
    assert_eq!(Space::new(&m).unwrap().input_configurations().len(), 3);
}

#[test]
fn set_keeps_the_shapes_with_that_value_and_names_them_when_none_has_it() {
    let m = manifest(SHAPES);
    let mut space = Space::new(&m).unwrap();
    space.apply_overrides(&["M=8192"]).unwrap();
    assert_eq!(space.input_configurations().iter().map(triple).collect::<Vec<_>>(), ALL[..3]);
    space.apply_overrides(&["K=3072,4096"]).unwrap();
    assert_eq!(space.input_configurations().iter().map(triple).collect::<Vec<_>>(), [(8192, 768, 3072)]);
    assert_eq!(space.values("N"), Some(&[768][..]));

    let mut space = Space::new(&m).unwrap();
    let e = space.apply_overrides(&["N=1000"]).unwrap_err().to_string();
    assert!(
        e.contains("no named shape has N = 1000") && e.contains("(K=768 M=8192 N=3072), (K=3072 M=8192 N=768), (K=768 M=8192 N=2304), (K=4096 M=16 N=4096)"),
        "{e}"
    );
    assert!(e.contains("[[shapes]]"), "{e}");
    // A tuning parameter is still restricted to whatever it is given.
    space.apply_overrides(&["B=16"]).unwrap();
    assert_eq!(space.values("B"), Some(&[16][..]));
    let e = space.apply_overrides(&["Q=1"]).unwrap_err().to_string();
    assert!(e.contains("unknown parameter 'Q'") && e.contains("K, M, N, B"), "{e}");
}

#[test]
fn validation_sizes_replace_the_named_inputs_and_keep_the_others_combinations() {
    let m = manifest(&format!("{SHAPES}\n[validation.inputs]\nM = {{ values = [61] }}\nK = {{ values = [33, 40] }}\n"));
    let mut space = Space::new(&m).unwrap();
    space.at_validation_sizes(&m, &[] as &[&str]).unwrap();
    let configs: Vec<_> = space.input_configurations().iter().map(triple).collect();
    let expected: Vec<(i64, i64, i64)> = [3072, 768, 2304, 4096].iter().flat_map(|&n| [(61, n, 33), (61, n, 40)]).collect();
    assert_eq!(configs, expected);
    // A size the user sets is validated there.
    let mut asked = Space::new(&m).unwrap();
    asked.apply_overrides(&["M=16"]).unwrap();
    asked.at_validation_sizes(&m, &["M=16"]).unwrap();
    assert_eq!(asked.input_configurations().iter().map(triple).collect::<Vec<_>>(), [(16, 4096, 33), (16, 4096, 40)]);
    // All named: a product, as without shapes.
    let m = manifest(&format!("{SHAPES}\n[validation.inputs]\nM = {{ values = [7] }}\nN = {{ values = [9] }}\nK = {{ values = [5] }}\n"));
    let mut space = Space::new(&m).unwrap();
    space.at_validation_sizes(&m, &[] as &[&str]).unwrap();
    assert_eq!(space.input_configurations().iter().map(triple).collect::<Vec<_>>(), [(7, 9, 5)]);
}

#[test]
fn bad_shapes_are_errors_naming_the_field() {
    let missing = err("[[shapes]]\nM = 1\nN = 2\nK = 3\n\n[[shapes]]\nM = 4\nN = 5\n");
    assert!(
        missing.contains("field `shapes[1]`") && missing.contains("(M=4 N=5) gives no value for K") && missing.contains("every input (K, M, N)"),
        "{missing}"
    );
    let unknown = err("[[shapes]]\nM = 1\nN = 2\nK = 3\n\n[[shapes]]\nM = 4\nN = 5\nk = 6\n");
    assert!(unknown.contains("field `shapes[1].k`") && unknown.contains("'k' is not a scalar input") && unknown.contains("K, M, N"), "{unknown}");
    let twice = err("[[shapes]]\nM = 1\nN = 2\nK = 3\n\n[[shapes]]\nK = 3\nM = 1\nN = 2\n");
    assert!(twice.contains("field `shapes[1]`") && twice.contains("repeats shapes[0]"), "{twice}");
    let float = err("[[shapes]]\nM = 1.5\n");
    assert!(float.contains("peak.toml") && float.contains("M = 1.5"), "{float}");
    let empty = err("[[shapes]]\n");
    assert!(empty.contains("shapes[0]") && empty.contains("names no input"), "{empty}");
    // With [inputs] written, it declares the inputs (their order) and their domains.
    let outside = err("[inputs]\nM = { values = [1] }\nN = { values = [2] }\nK = { values = [3] }\n\n[[shapes]]\nM = 1\nN = 2\nK = 4\n");
    assert!(outside.contains("field `shapes[0].K`") && outside.contains("4 is not among the values [inputs] declares for K"), "{outside}");
    let undeclared = err("[inputs]\nM = { values = [1] }\nN = { values = [2] }\n\n[[shapes]]\nM = 1\nN = 2\nK = 3\n");
    assert!(undeclared.contains("field `shapes[0].K`") && undeclared.contains("from [inputs]: M, N"), "{undeclared}");
    let m = manifest("[inputs]\nK = { range = [1, 4096] }\nM = { range = [1, 9000] }\nN = { range = [1, 5000] }\n\n[[shapes]]\nM = 16\nN = 4096\nK = 4096\n");
    assert!(!m.inputs_from_shapes);
    assert_eq!(Space::new(&m).unwrap().input_configurations().iter().map(triple).collect::<Vec<_>>(), [(16, 4096, 4096)], "in the declared ranges");
    // The names are checked like any input's: a clash with a tuning parameter.
    let clash = err("[[shapes]]\nM = 1\nN = 2\nK = 3\nB = 4\n");
    assert!(clash.contains("'B' is declared twice"), "{clash}");
}

#[test]
fn a_saved_context_keeps_its_shapes_and_leaves_inputs_out() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("peak.toml"), format!("{HEAD}\n{SHAPES}")).unwrap();
    std::fs::write(
        dir.path().join("kernel.cl"),
        "// @peak macros\n// @peak device\n__kernel void gemm() {}\n// @peak host\nlaunch(\"gemm\", [M], [B], 0, C);\n",
    )
    .unwrap();
    let ctx = Context::load(dir.path()).unwrap();
    let text = ctx.manifest.to_toml();
    assert!(text.contains("[[shapes]]") && !text.contains("[inputs]"), "{text}");
    let out = tempfile::tempdir().unwrap();
    ctx.save(out.path()).unwrap();
    let again = Context::load(out.path()).unwrap();
    assert_eq!(again.manifest, ctx.manifest);
}
