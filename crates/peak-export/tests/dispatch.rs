//! `dispatch.h`'s rule, compiled with a C compiler and run: a tuned shape gets its own best
//! configuration; another shape the nearest tuned shape's configuration that is valid there
//! (else the next nearest); -1 where none is valid; and without constraints in C, the
//! nearest. Needs `cc`; skips, saying so, without one.
// Helpers outside #[test] functions unwrap too; clippy's allow-unwrap-in-tests does not reach them here (rust-clippy#13981).
#![allow(clippy::unwrap_used)]

use std::process::Command;

use indexmap::IndexMap;
use peak_export::dispatch::{Table, TunedShape, header};
use peak_spec::ExecParams;

fn shape(m: i64, n: i64, tile: i64, config: usize) -> TunedShape {
    let params =
        ExecParams { inputs: [("m".to_string(), m), ("n".to_string(), n)].into_iter().collect(), tuning: [("T".to_string(), tile)].into_iter().collect() };
    TunedShape { params, config, time_ms: Some(0.5) }
}

/// Two tuned shapes, 64 x 64 at T = 4 and 1024 x 1024 at T = 16, under `n % T == 0`.
fn table(constraints_c: Option<Vec<String>>) -> Table {
    let config = |t: i64| -> IndexMap<String, i64> { [("T".to_string(), t)].into_iter().collect() };
    Table {
        inputs: vec!["m".into(), "n".into()],
        configs: vec![config(4), config(16)],
        shapes: vec![shape(64, 64, 4, 0), shape(1024, 1024, 16, 1)],
        fallback: 1,
        constraints: vec!["n % T == 0".into()],
        constraints_c,
    }
}

/// `peak_dispatch` of each (m, n), from the header compiled with `cc`; None without cc.
fn dispatch(table: &Table, shapes: &[(i64, i64)]) -> Option<Vec<i64>> {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("dispatch.h"), header(table)).unwrap();
    let mut main = String::from("#include <stdio.h>\n#include \"dispatch.h\"\nint main(void) {\n");
    for (m, n) in shapes {
        main.push_str(&format!("    {{ const long long s[2] = {{ {m}LL, {n}LL }}; printf(\"%d\\n\", peak_dispatch(s)); }}\n"));
    }
    main.push_str("    return 0;\n}\n");
    std::fs::write(dir.path().join("main.c"), main).unwrap();
    let exe = dir.path().join("main");
    match Command::new("cc").args(["-std=c99", "-Wall", "-Werror", "-Wno-unused-function", "-o"]).arg(&exe).arg(dir.path().join("main.c")).output() {
        Ok(out) => assert!(out.status.success(), "dispatch.h does not compile:\n{}\n{}", String::from_utf8_lossy(&out.stderr), header(table)),
        Err(e) => {
            eprintln!("SKIPPED: no C compiler `cc` ({e})");
            return None;
        }
    }
    let out = Command::new(&exe).output().unwrap();
    Some(String::from_utf8_lossy(&out.stdout).lines().map(|l| l.parse().unwrap()).collect())
}

#[test]
fn tuned_shapes_get_their_best_and_others_the_nearest_valid() {
    let checked = table(Some(vec!["n % T == 0".into()]));
    let text = header(&checked);
    assert!(text.contains("\"-D T=4\"") && text.contains("\"-D T=16\""), "{text}");
    assert!(text.contains("{ { 64LL, 64LL }, 0, 0.5 }") && text.contains("{ { 1024LL, 1024LL }, 1, 0.5 }"), "{text}");
    assert!(text.contains("PEAK_FALLBACK_CONFIG 1"));
    let Some(got) = dispatch(&checked, &[(64, 64), (1024, 1024), (800, 800), (900, 1000), (70, 70), (100, 101)]) else { return };
    // Tuned: their own. 800 x 800: nearest 1024 (T = 16 divides 800). 900 x 1000: nearest
    // 1024, but 16 does not divide 1000: 64's T = 4 does. 70 x 70: nearest 64, T = 4 does
    // not divide 70, nor does 16: none. 101: odd, none.
    assert_eq!(got, [0, 1, 1, 0, -1, -1]);

    // Constraints that are not C: not checked (and said so); the nearest tuned shape wins.
    let unchecked = table(None);
    assert!(header(&unchecked).contains("validity is NOT checked"));
    let Some(got) = dispatch(&unchecked, &[(900, 1000), (70, 70), (100, 101)]) else { return };
    assert_eq!(got, [1, 0, 0]);
}
