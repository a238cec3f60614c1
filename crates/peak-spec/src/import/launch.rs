//! The launch `peak new` proposes, read from how the kernel indexes its threads.
//!
//! A kernel says its launch in two places: the index it computes (`int row = blockIdx.x *
//! blockDim.x + threadIdx.x`, `get_global_id(1)`) and the bound it checks that index
//! against (`if (row < B * T)`, `if (i >= n) return;`). One index along x with a bound is
//! a 1-D launch over the bound (one thread per row when the kernel guards on a row count
//! and loops over the row); indices along x and y are a 2-D launch over both bounds. This
//! is a heuristic: the proposal says in the host region what it read, and where it cannot
//! tell, it falls back to one thread per element of the first output and says why.

use super::declare::function_name;
use super::scan;
use crate::manifest::{Domain, Language};

/// A launch proposal for the host region.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Proposal {
    /// What was read, and how the launch follows from it (comment lines, without `//`).
    pub comment: Vec<String>,
    pub grid: String,
    pub block: String,
    pub tuning: Vec<(String, Domain)>,
    /// Conditions over the tuning parameters and inputs.
    pub constraints: Vec<String>,
}

/// The array a fallback launch covers: the first output, and its length.
pub(super) struct Covered<'a> {
    pub name: &'a str,
    pub size: &'a str,
}

const AXES: [char; 3] = ['x', 'y', 'z'];
const BLOCKS: [&str; 3] = ["BLOCK_X", "BLOCK_Y", "BLOCK_Z"];

/// One thread index the kernel computes, and the bound it checks it against.
#[derive(Debug, Clone, PartialEq)]
struct Index {
    var: String,
    /// The expression as written: `blockIdx.x * blockDim.x + threadIdx.x`.
    expr: String,
    /// The bound as a launch-script expression over the integer inputs, and the check as
    /// written.
    bound: Option<(String, String)>,
}

/// Propose a launch for the kernel whose masked code is `code`; `inputs` are its integer
/// parameters.
pub(super) fn propose(code: &str, backend: Language, kernel: &str, inputs: &[&str], covered: Covered) -> Proposal {
    let body = body(code);
    let tokens = scan::tokens(body);
    let defs = definitions(body);
    let mut axes: Vec<Option<Index>> = vec![None; 3];
    for (var, expr) in &defs {
        if let Some(axis) = axis_of(expr, backend)
            && axes[axis].is_none()
        {
            let bound = guard(&tokens, var).and_then(|(bound, check)| as_launch_expr(&bound, inputs, &defs, 0).map(|b| (b, check)));
            axes[axis] = Some(Index { var: var.clone(), expr: scan::squash(expr), bound });
        }
    }
    let dims = axes.iter().take_while(|a| a.is_some()).count();
    let found: Vec<&Index> = axes.iter().flatten().collect();
    let intro = format!("Proposed by `peak new` from how `{kernel}` indexes its threads:");
    match (dims, found.len()) {
        (_, 0) => match block_index(&defs, backend) {
            Some(var) => match guard(&tokens, &var).and_then(|(bound, check)| as_launch_expr(&bound, inputs, &defs, 0).map(|b| (b, check))) {
                Some((bound, check)) => per_block(&intro, &var, &bound, &check),
                None => fallback(
                    covered,
                    &format!(
                        "it indexes by block (`{var}` = its block index) and checks `{var}` against no bound, so the number of blocks is unknown: launch one block per `{var}`"
                    ),
                ),
            },
            None => fallback(covered, "it computes no global thread index (blockIdx.x * blockDim.x + threadIdx.x, or get_global_id(0))"),
        },
        (0, _) => fallback(covered, &format!("its thread index `{}` is not along x", found[0].var)),
        (d, n) if d < n => fallback(covered, "its thread indices skip a dimension"),
        (1, _) => match &found[0].bound {
            Some(_) => along(&intro, &found[..1], covered),
            None => unguarded(&intro, found[0], covered),
        },
        _ => match found.iter().find(|i| i.bound.is_none()) {
            None => along(&intro, &found, covered),
            Some(open) => fallback(covered, &format!("it does not check `{}` against a bound, so the extent of that dimension is unknown", open.var)),
        },
    }
}

/// A launch over the bounds of `indices` (x, then y and z).
fn along(intro: &str, indices: &[&Index], covered: Covered) -> Proposal {
    let mut comment = vec![intro.to_string()];
    for i in indices {
        let (_, check) = i.bound.as_ref().expect("guarded");
        comment.push(format!("  {} = {}, guarded by `{check}`", i.var, i.expr));
    }
    let bounds: Vec<&str> = indices.iter().map(|i| i.bound.as_ref().expect("guarded").0.as_str()).collect();
    let blocks = &BLOCKS[..indices.len()];
    let grid: Vec<String> = bounds.iter().zip(blocks).map(|(b, k)| format!("ceil_div({b}, {k})")).collect();
    if let [bound] = bounds[..] {
        comment.push(format!("so one thread per `{}` below {bound}, BLOCK_X threads per block.", indices[0].var));
        if !same_expression(bound, covered.size) {
            // A row per thread, or a scatter (an embedding's gradient, written where an index
            // array says): either way the output is not one element per thread.
            comment
                .push(format!("{} has {} elements: each thread handles several, or writes where the kernel computes (a scatter).", covered.name, covered.size));
        }
        return Proposal { comment, grid: grid[0].clone(), block: "BLOCK_X".into(), tuning: one_dimension(), constraints: vec![] };
    }
    comment.push(format!("so a {}-D grid over {}, {} threads per block.", indices.len(), bounds.join(" x "), blocks.join(" x ")));
    let product = blocks.join(" * ");
    let tuning = blocks.iter().map(|b| (b.to_string(), Domain { pow2: Some([1, if *b == "BLOCK_Z" { 64 } else { 1024 }]), ..Domain::default() })).collect();
    Proposal {
        comment,
        grid: format!("[{}]", grid.join(", ")),
        block: format!("[{}]", blocks.join(", ")),
        tuning,
        constraints: vec![format!("{product} >= 32"), format!("{product} <= 1024")],
    }
}

/// One block per value of a block index the kernel checks against `bound` (a row
/// kernel whose threads share the row).
fn per_block(intro: &str, var: &str, bound: &str, check: &str) -> Proposal {
    Proposal {
        comment: vec![
            intro.to_string(),
            format!("  {var} = its block index, guarded by `{check}`"),
            format!("so one block per `{var}` below {bound}, BLOCK_X threads per block sharing it."),
        ],
        grid: bound.to_string(),
        block: "BLOCK_X".into(),
        tuning: one_dimension(),
        constraints: vec![],
    }
}

/// The variable the kernel sets to its block index along x, if any.
fn block_index(defs: &[(String, String)], backend: Language) -> Option<String> {
    let forms: &[&str] = if backend == Language::Opencl { &["get_group_id(0)"] } else { &["blockIdx.x", "hipBlockIdx_x"] };
    defs.iter().find(|(_, expr)| forms.contains(&strip_cast(&expr.replace(char::is_whitespace, "")))).map(|(var, _)| var.clone())
}

/// One index along x that the kernel never checks: as many threads as the first output
/// has elements, and no block that runs past its end.
fn unguarded(intro: &str, index: &Index, covered: Covered) -> Proposal {
    let size = parenthesized(covered.size);
    Proposal {
        comment: vec![
            intro.to_string(),
            format!("  {} = {}, which it never checks against a bound:", index.var, index.expr),
            format!("so one thread per element of {} ({}), BLOCK_X threads per block, and BLOCK_X", covered.name, covered.size),
            "must divide that count (a constraint says so): no thread may run past the end.".into(),
        ],
        grid: format!("ceil_div({}, BLOCK_X)", covered.size),
        block: "BLOCK_X".into(),
        tuning: one_dimension(),
        constraints: vec![format!("{size} % BLOCK_X == 0")],
    }
}

/// Today's proposal, when the kernel does not say: one thread per element of the first
/// output.
fn fallback(covered: Covered, why: &str) -> Proposal {
    Proposal {
        comment: vec![
            format!("Proposed by `peak new`: one thread per element of {}, BLOCK_X threads per block.", covered.name),
            format!("peak could not read the launch from the kernel: {why}."),
            "Adjust the grid to what the kernel expects (a 2-D grid, one block per row, ...).".into(),
        ],
        grid: format!("ceil_div({}, BLOCK_X)", covered.size),
        block: "BLOCK_X".into(),
        tuning: one_dimension(),
        constraints: vec![],
    }
}

fn one_dimension() -> Vec<(String, Domain)> {
    vec![("BLOCK_X".into(), Domain { pow2: Some([32, 1024]), ..Domain::default() })]
}

fn parenthesized(expr: &str) -> String {
    if expr.bytes().all(scan::is_name_byte) { expr.to_string() } else { format!("({expr})") }
}

/// The kernel's body: between the braces after its parameter list.
fn body(code: &str) -> &str {
    let head = scan::strip_template(code.trim());
    let Some((_, open)) = function_name(&head[..head.find('{').unwrap_or(head.len())]) else { return "" };
    let after = scan::matching(head, open).unwrap_or(open);
    let Some(brace) = head[after..].find('{').map(|b| b + after) else { return "" };
    &head[brace + 1..scan::matching(head, brace).unwrap_or(head.len())]
}

/// Every `NAME = EXPR` the body declares or assigns, in order (first one per name).
fn definitions(body: &str) -> Vec<(String, String)> {
    let mut defs: Vec<(String, String)> = Vec::new();
    for statement in body.split([';', '{', '}']) {
        for part in scan::split_top(statement, b',') {
            let Some(eq) = scan::assignment(part) else { continue };
            let (lhs, rhs) = (&part[..eq], &part[eq + 1..]);
            let plain = lhs.bytes().all(|c| scan::is_name_byte(c) || c.is_ascii_whitespace() || c == b'*');
            let Some((_, name)) = scan::identifiers(lhs).last() else { continue };
            if plain && !defs.iter().any(|(n, _)| n == name) {
                defs.push((name.to_string(), rhs.trim().to_string()));
            }
        }
    }
    defs
}

/// The axis (0 = x) of a global thread index expression, if `expr` is one:
/// `blockIdx.x * blockDim.x + threadIdx.x` in any order (HIP spellings too), or
/// `get_global_id(0)` in OpenCL; a leading cast is allowed.
fn axis_of(expr: &str, backend: Language) -> Option<usize> {
    let e: String = expr.chars().filter(|c| !c.is_whitespace()).collect();
    let e = strip_cast(&e);
    if backend == Language::Opencl {
        return (0..3).find(|a| e == format!("get_global_id({a})"));
    }
    if !e.bytes().all(|c| scan::is_name_byte(c) || b".*+()".contains(&c)) {
        return None;
    }
    let e = e.replace(['(', ')'], "");
    (0..3).find(|&a| {
        let x = AXES[a];
        let spellings = [
            (format!("blockIdx.{x}"), format!("blockDim.{x}"), format!("threadIdx.{x}")),
            (format!("hipBlockIdx_{x}"), format!("hipBlockDim_{x}"), format!("hipThreadIdx_{x}")),
        ];
        spellings.iter().any(|(b, d, t)| [format!("{b}*{d}+{t}"), format!("{d}*{b}+{t}"), format!("{t}+{b}*{d}"), format!("{t}+{d}*{b}")].contains(&e))
    })
}

/// `(int)expr` or `static_cast<int>(expr)` -> `expr`.
fn strip_cast(e: &str) -> &str {
    if let Some(rest) = e.strip_prefix("static_cast<") {
        return rest.find(">").map_or(e, |c| &rest[c + 1..]);
    }
    match scan::matching(e, 0) {
        Some(close) if close + 1 < e.len() && e[1..close].bytes().all(scan::is_name_byte) => &e[close + 1..],
        _ => e,
    }
}

/// The first check of `var` against a bound in the body's tokens: `var < B`, `var <= B`
/// (bound B + 1), `var >= B` (an early return), or `B > var`. Returns the bound's tokens
/// and the check as written.
fn guard(tokens: &[String], var: &str) -> Option<(Vec<String>, String)> {
    for (i, t) in tokens.iter().enumerate().filter(|(_, t)| *t == var) {
        let after = tokens.get(i + 1).map(String::as_str);
        if let Some(op @ ("<" | "<=" | ">=")) = after {
            let mut bound = operand(&tokens[i + 2..]);
            let check = format!("{t} {op} {}", bound.join(" "));
            if op == "<=" {
                bound = [vec!["(".to_string()], bound, vec![")".into(), "+".into(), "1".into()]].concat();
            }
            return Some((bound, check));
        }
        if i >= 2 && tokens[i - 1] == ">" && tokens[i - 2].bytes().all(scan::is_name_byte) {
            return Some((vec![tokens[i - 2].clone()], format!("{} > {t}", tokens[i - 2])));
        }
    }
    None
}

/// The tokens of one comparison operand: up to `&&`, `||`, `?`, `,`, `;`, a comparison, or
/// the `)` that closes the condition.
fn operand(tokens: &[String]) -> Vec<String> {
    let mut depth = 0;
    let mut out = Vec::new();
    for t in tokens {
        match t.as_str() {
            "(" => depth += 1,
            ")" if depth == 0 => break,
            ")" => depth -= 1,
            "&&" | "||" | "?" | "," | ";" | ":" | "{" | "}" | "<" | ">" | "<=" | ">=" | "==" | "!=" if depth == 0 => break,
            _ => {}
        }
        out.push(t.clone());
    }
    out
}

/// A bound as a launch-script expression over the integer inputs, or `None` when it uses
/// anything else (locals defined from inputs are substituted, casts dropped).
fn as_launch_expr(tokens: &[String], inputs: &[&str], defs: &[(String, String)], depth: usize) -> Option<String> {
    const CASTS: &[&str] = &["int", "unsigned", "uint", "size_t", "long", "int64_t", "int32_t", "uint32_t"];
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        let t = tokens[i].as_str();
        if t == "(" && tokens.get(i + 2).is_some_and(|c| c == ")") && CASTS.contains(&tokens[i + 1].as_str()) {
            i += 3;
            continue;
        }
        let piece = if matches!(t, "+" | "-" | "*" | "/" | "%" | "(" | ")") {
            t.to_string()
        } else if t.as_bytes()[0].is_ascii_digit() {
            let digits = t.trim_end_matches(['u', 'U', 'l', 'L']);
            digits.bytes().all(|c| c.is_ascii_digit()).then(|| digits.to_string())?
        } else if inputs.contains(&t) {
            t.to_string()
        } else {
            let (_, expr) = defs.iter().find(|(n, _)| n == t).filter(|_| depth < 4)?;
            format!("({})", as_launch_expr(&scan::tokens(expr), inputs, defs, depth + 1)?)
        };
        out.push(piece);
        i += 1;
    }
    if !inputs.is_empty() && !out.iter().any(|t| t.bytes().any(|c| c.is_ascii_alphabetic())) {
        // A literal bound (`i < 32`) is not the problem's extent where the kernel takes its
        // sizes as parameters; where it takes none (sizes fixed in its code, as generated
        // benchmark kernels have them: `if (row < 8192)`), the literal is the extent.
        return None;
    }
    Some(out.join(" ").replace("( ", "(").replace(" )", ")"))
}

/// The dynamic shared memory the kernel declares (`extern __shared__ float s[];`, HIP's
/// `HIP_DYNAMIC_SHARED(float, s)`): the launch's shared-bytes argument as a guess of one
/// element per thread of a block of `threads`, and the comment saying so.
pub(super) fn dynamic_shared(code: &str, threads: &str) -> Option<(String, String)> {
    let tokens = scan::tokens(body(code));
    let element: Vec<&str> = if let Some(at) = tokens.windows(2).position(|w| w[0] == "extern" && w[1] == "__shared__") {
        // The type: the words between `__shared__` and the array's name, attributes skipped.
        let rest = &tokens[at + 2..];
        let name_at = rest.iter().position(|t| t == "[")?.checked_sub(1)?;
        let mut words = Vec::new();
        let mut depth = 0;
        for t in &rest[..name_at] {
            match t.as_str() {
                "(" => depth += 1,
                ")" => depth -= 1,
                w if depth == 0 && !w.starts_with("__align") && w != "alignas" => words.push(w),
                _ => {}
            }
        }
        words
    } else {
        let at = tokens.iter().position(|t| t == "HIP_DYNAMIC_SHARED")?;
        tokens[at + 2..].iter().take_while(|t| *t != ",").map(String::as_str).collect()
    };
    let element = element.join(" ");
    let bytes = match element.as_str() {
        "char" | "unsigned char" | "int8_t" | "uint8_t" | "__nv_fp8_e4m3" | "__nv_fp8_e5m2" => 1,
        "half" | "__half" | "__nv_bfloat16" | "__hip_bfloat16" | "short" | "unsigned short" => 2,
        "float" | "int" | "unsigned" | "unsigned int" | "uint" | "int32_t" | "uint32_t" => 4,
        "double" | "float2" | "int2" | "long" | "long long" | "int64_t" | "uint64_t" | "size_t" => 8,
        "float4" | "int4" | "double2" => 16,
        _ => {
            let why = format!("It declares dynamic shared memory of `{element}`: set the launch's shared bytes (0 here) to what it indexes.");
            return Some(("0".into(), why));
        }
    };
    let why =
        format!("It declares dynamic shared memory of {element}: one per thread is a guess ({threads} * {bytes} bytes); check it against what it indexes.");
    Some((format!("{threads} * {bytes}"), why))
}

/// Whether the kernel may write array `name`: `name[i] = ...`, a compound assignment or
/// increment, its address taken, or any use that is not an element access (pointer
/// arithmetic, a call, an alias), which may write through another name.
pub(super) fn writes(code: &str, name: &str) -> bool {
    let tokens = scan::tokens(body(code));
    tokens.iter().enumerate().filter(|(_, t)| *t == name).any(|(i, _)| {
        let before = if i > 0 { tokens[i - 1].as_str() } else { "" };
        if matches!(before, "&" | "++" | "--") || tokens.get(i + 1).is_none_or(|t| t != "[") {
            return true;
        }
        let after = i + 1 + subscript_len(&tokens, i + 1);
        let next = tokens.get(after).map(String::as_str);
        // `a[i] |= x` is the tokens `|` and `=`.
        matches!(next, Some("=" | "+=" | "-=" | "*=" | "/=" | "%=" | "++" | "--"))
            || (matches!(next, Some("|" | "&" | "^" | "<<" | ">>")) && tokens.get(after + 1).is_some_and(|t| t == "="))
    })
}

/// Whether the kernel reads array `name` (not only writes it): `name[i]` anywhere but
/// the left of a plain `=`, a compound assignment, its address taken (atomics), or the
/// array itself the target of an atomic read-modify-write (`atomicAdd(name, v)`,
/// `atomic_add(name + k, v)`: a block's partial added into a total its caller zeroed).
pub(super) fn reads(code: &str, name: &str) -> bool {
    reads_through(&scan::tokens(body(code)), name, 0)
}

/// [`reads`] over the body's tokens, following pointers derived from `name`
/// (`float* row = C + i;`, then `atomicAdd(row, v)`) a few levels deep.
fn reads_through(tokens: &[String], name: &str, depth: usize) -> bool {
    tokens.iter().enumerate().filter(|(_, t)| *t == name).any(|(i, _)| {
        if i > 0 && tokens[i - 1] == "&" {
            return true;
        }
        if i > 1 && tokens[i - 1] == "(" && is_atomic(&tokens[i - 2]) {
            return true;
        }
        if tokens.get(i + 1).is_none_or(|t| t != "[") {
            // Pointer arithmetic or a call. A pointer initialised from it (`row = C + i`) is
            // read where that alias is; what a call does with it is not seen here.
            let alias = (i > 1 && tokens[i - 1] == "=").then(|| &tokens[i - 2]).filter(|a| a.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'));
            return depth < 3 && alias.is_some_and(|alias| alias != name && reads_through(tokens, alias, depth + 1));
        }
        tokens.get(i + 1 + subscript_len(tokens, i + 1)).is_none_or(|after| after != "=")
    })
}

/// A read-modify-write atomic: CUDA and HIP `atomicAdd`, `atomicMax`, ..., OpenCL
/// `atomic_add`, `atom_add`, `atomic_fetch_add_explicit`, ...
fn is_atomic(function: &str) -> bool {
    let plain = ["atomic_load", "atomic_store", "atomic_init"].iter().any(|p| function.starts_with(p));
    ["atomic", "atom_"].iter().any(|p| function.starts_with(p)) && !plain
}

/// How many tokens the subscript opening at `tokens[open]` spans, brackets included.
fn subscript_len(tokens: &[String], open: usize) -> usize {
    let mut depth = 0;
    tokens[open..]
        .iter()
        .position(|t| {
            depth += i32::from(t == "[") - i32::from(t == "]");
            depth == 0
        })
        .map_or(tokens.len() - open, |c| c + 1)
}

/// Whether two size expressions are written the same, spaces and enclosing parentheses
/// aside: a bound `(B * T * C)`, read through a local `N = B * T * C`, covers `B*T*C`.
fn same_expression(a: &str, b: &str) -> bool {
    fn bare(text: &str) -> String {
        let mut t: String = text.chars().filter(|c| !c.is_whitespace()).collect();
        while t.starts_with('(') && closing_paren(&t) == Some(t.len() - 1) {
            t = t[1..t.len() - 1].to_string();
        }
        t
    }
    /// The index of the parenthesis closing the one `t` opens with.
    fn closing_paren(t: &str) -> Option<usize> {
        let mut depth = 0;
        for (i, c) in t.char_indices() {
            depth += i32::from(c == '(') - i32::from(c == ')');
            if depth == 0 {
                return Some(i);
            }
        }
        None
    }
    bare(a) == bare(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn propose_for(code: &str, backend: Language, inputs: &[&str]) -> Proposal {
        propose(&scan::mask(code), backend, "k", inputs, Covered { name: "out", size: "n" })
    }

    #[test]
    fn a_bound_written_otherwise_is_the_same_size() {
        assert!(same_expression("(B * T * C)", "B*T*C"));
        assert!(same_expression("((n))", " n "));
        assert!(!same_expression("(a + b) * (c)", "a + b * c"), "parentheses that are not around the whole stay");
        assert!(!same_expression("N", "n"));
    }

    #[test]
    fn a_row_kernel_gets_one_thread_per_row() {
        let p = propose_for(
            "__global__ void k(float* out, const float* inp, int N, int C) {\n  int idx = blockIdx.x * blockDim.x + threadIdx.x; // row\n  if (idx < N) { for (int i = 0; i < C; i++) out[idx * C + i] = inp[i]; }\n}",
            Language::Cuda,
            &["N", "C"],
        );
        assert_eq!((p.grid.as_str(), p.block.as_str()), ("ceil_div(N, BLOCK_X)", "BLOCK_X"));
        assert!(p.comment[1].contains("idx = blockIdx.x * blockDim.x + threadIdx.x, guarded by `idx < N`"), "{:?}", p.comment);
        assert!(p.comment.iter().any(|c| c.contains("out has n elements: each thread handles several")), "{:?}", p.comment);
    }

    #[test]
    fn two_indices_give_a_2d_grid() {
        let p = propose_for(
            "__global__ void k(int M, int N, float* C) {\n  const uint x = blockIdx.x * blockDim.x + threadIdx.x;\n  const uint y = threadIdx.y + blockDim.y * blockIdx.y;\n  if (x < M && y < N) C[x * N + y] = 0;\n}",
            Language::Cuda,
            &["M", "N"],
        );
        assert_eq!(p.grid, "[ceil_div(M, BLOCK_X), ceil_div(N, BLOCK_Y)]");
        assert_eq!(p.block, "[BLOCK_X, BLOCK_Y]");
        assert_eq!(p.constraints, ["BLOCK_X * BLOCK_Y >= 32", "BLOCK_X * BLOCK_Y <= 1024"]);
        let hip = propose_for(
            "__global__ void k(float* a, int n, int m) {\n  int i = hipBlockIdx_x * hipBlockDim_x + hipThreadIdx_x;\n  int j = hipThreadIdx_y + hipBlockIdx_y * hipBlockDim_y;\n  if (i < n && j < m) a[i * m + j] = 0; }",
            Language::Hip,
            &["n", "m"],
        );
        assert_eq!(hip.grid, "[ceil_div(n, BLOCK_X), ceil_div(m, BLOCK_Y)]", "HIP's own spellings: {:?}", hip.comment);
        let cl = propose_for(
            "__kernel void k(__global float* a, int rows, int cols) {\n  int r = get_global_id(1); int c = get_global_id(0);\n  if (r >= rows || c >= cols) return;\n  a[r * cols + c] = 0; }",
            Language::Opencl,
            &["rows", "cols"],
        );
        assert_eq!(cl.grid, "[ceil_div(cols, BLOCK_X), ceil_div(rows, BLOCK_Y)]");
    }

    #[test]
    fn a_block_index_with_a_bound_gets_one_block_per_value() {
        let p = propose_for(
            "__global__ void k(float* out, int rows, int cols) {\n  int row = blockIdx.x;\n  if (row >= rows) return;\n  for (int c = threadIdx.x; c < cols; c += blockDim.x) out[row * cols + c] = 0;\n}",
            Language::Cuda,
            &["rows", "cols"],
        );
        assert_eq!((p.grid.as_str(), p.block.as_str()), ("rows", "BLOCK_X"));
        assert!(p.comment[2].contains("one block per `row` below rows"), "{:?}", p.comment);
    }

    #[test]
    fn bounds_are_expressions_over_inputs() {
        let p = propose_for(
            "__global__ void k(float* out, int B, int T) {\n  int i = (int)(blockIdx.x * blockDim.x + threadIdx.x);\n  const int n = B * T;\n  if (n > i) out[i] = 0;\n  if (i <= B * T - 1) out[i] = 1;\n}",
            Language::Cuda,
            &["B", "T"],
        );
        assert_eq!(p.grid, "ceil_div((B * T), BLOCK_X)", "{:?}", p.comment);
        let p = propose_for(
            "__global__ void k(float* out, int B, int T) {\n  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i <= B * T - 1) out[i] = 1;\n}",
            Language::Cuda,
            &["B", "T"],
        );
        assert_eq!(p.grid, "ceil_div((B * T - 1) + 1, BLOCK_X)");
    }

    #[test]
    fn what_cannot_be_read_falls_back_and_says_why() {
        let p = propose_for("__global__ void k(float* out, int n) { out[threadIdx.x] = 0; }", Language::Cuda, &["n"]);
        assert_eq!(p.grid, "ceil_div(n, BLOCK_X)");
        assert!(p.comment[1].contains("computes no global thread index"), "{:?}", p.comment);
        let p = propose_for(
            "__global__ void k(float* out, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < 32) out[i] = 0; }",
            Language::Cuda,
            &["n"],
        );
        assert_eq!(p.constraints, ["n % BLOCK_X == 0"], "a literal is no extent: the index counts as unchecked");
        let p = propose_for("__global__ void k(float* out) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < 8192) out[i] = 0; }", Language::Cuda, &[]);
        assert_eq!((p.grid.as_str(), p.constraints.len()), ("ceil_div(8192, BLOCK_X)", 0), "sizes fixed in the code: the literal is the extent");
        let p = propose_for("__global__ void k(float* out, int n) { int row = blockIdx.x; out[row] = 0; }", Language::Cuda, &["n"]);
        assert!(p.comment[1].contains("indexes by block (`row` = its block index) and checks `row` against no bound"), "{:?}", p.comment);
        let p =
            propose_for("__kernel void k(__global float* out) { int r = get_global_id(0); int c = get_global_id(1); out[r + c] = 0; }", Language::Opencl, &[]);
        assert!(p.comment[1].contains("does not check `r` against a bound"), "{:?}", p.comment);
    }

    #[test]
    fn dynamic_shared_memory_gets_one_element_per_thread() {
        let code = |body: &str| scan::mask(&format!("__global__ void k(float* out) {{ {body} }}"));
        let (bytes, why) = dynamic_shared(&code("extern __shared__ float shared[]; shared[threadIdx.x] = 0;"), "BLOCK_X").unwrap();
        assert_eq!(bytes, "BLOCK_X * 4");
        assert!(why.contains("dynamic shared memory of float"), "{why}");
        assert_eq!(dynamic_shared(&code("extern __shared__ __align__(16) double2 s[];"), "BLOCK_X * BLOCK_Y").unwrap().0, "BLOCK_X * BLOCK_Y * 16");
        assert_eq!(dynamic_shared(&code("HIP_DYNAMIC_SHARED(__half, s)"), "BLOCK_X").unwrap().0, "BLOCK_X * 2");
        assert_eq!(dynamic_shared(&code("extern __shared__ MyPair s[];"), "BLOCK_X").unwrap().0, "0");
        assert_eq!(dynamic_shared(&code("__shared__ float fixed[32];"), "BLOCK_X"), None);
    }

    #[test]
    fn reading_an_output_is_told_from_writing_it() {
        let code = |body: &str| scan::mask(&format!("__global__ void k(float* C, float* D, float* E) {{ {body} }}"));
        assert!(reads(&code("C[i] = a * C[i];"), "C"));
        assert!(reads(&code("C[i] += 1;"), "C"));
        assert!(reads(&code("atomicAdd(&C[0], 1);"), "C"));
        assert!(reads(&code("if (t == 0) atomicAdd(C, s[0]);"), "C"), "a total the kernel adds to");
        assert!(reads(&code("atomic_add(C + b, 1);"), "C"));
        assert!(!reads(&code("atomicAdd(D, C2); helper(C, i);"), "C"), "another array's atomic, a call");
        assert!(!reads(&code("C[i * n + j] = 1; D[i] = C2;"), "C"));
        assert!(!reads(&code("float* row = C + i; row[0] = 1;"), "C"));
        // llm.c's encoder backward adds into rows through pointers derived from the arrays.
        assert!(reads(&code("float* dwte_ix = dwte + ix * C + c; atomicAdd(dwte_ix, d);"), "dwte"));
        assert!(reads(&code("__global float* p = out + i; atomic_add_float(p, v);"), "out"), "a helper named as an atomic");
        assert!(reads(&code("float* row = C + i; float* e = row + 1; s += e[0];"), "C"), "an alias of an alias");
        assert!(!reads(&code("float* row = C + i; float* e = row + 1; e[0] = s;"), "C"));
    }

    #[test]
    fn writing_an_array_is_told_from_reading_it() {
        let code = |body: &str| scan::mask(&format!("__global__ void k(float* C, float* D, float* E) {{ {body} }}"));
        assert!(!writes(&code("E[i] = C[i] + (C[i + 1] == D[0]);"), "C"), "element reads only");
        assert!(!writes(&code("E[0] = 1;"), "C"), "not used at all");
        assert!(writes(&code("C[i] = 0;"), "C"));
        assert!(writes(&code("C[i] |= 1;"), "C"));
        assert!(writes(&code("atomicAdd(&C[0], 1.0f);"), "C"));
        assert!(writes(&code("float* row = C + i * n; row[0] = 1;"), "C"), "an alias may write");
        assert!(writes(&code("helper(C, i);"), "C"), "so may a call");
    }
}
