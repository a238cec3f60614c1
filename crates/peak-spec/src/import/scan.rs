//! Lexical helpers over C-family source (CUDA, HIP, OpenCL C): comments and literals
//! masked out, top-level pieces, identifiers and brackets.
//!
//! Everything works on a *masked* copy of the text, in which comments and the insides of
//! string and character literals are spaces. It has the same length, so an offset found in
//! the masked copy cuts the original text at the same place: analysis never sees a
//! commented-out kernel, and what peak writes keeps the user's comments.

/// `text` with comments and the insides of string and character literals replaced by
/// spaces, newlines kept, byte for byte.
pub(crate) fn mask(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = b.to_vec();
    let blank = |out: &mut Vec<u8>, from: usize, to: usize| out[from..to].iter_mut().filter(|c| **c != b'\n').for_each(|c| *c = b' ');
    let mut i = 0;
    while i < b.len() {
        match (b[i], b.get(i + 1)) {
            (b'/', Some(b'/')) => {
                let end = b[i..].iter().position(|&c| c == b'\n').map_or(b.len(), |e| i + e);
                blank(&mut out, i, end);
                i = end;
            }
            (b'/', Some(b'*')) => {
                let end = text[i + 2..].find("*/").map_or(b.len(), |e| i + 2 + e + 2);
                blank(&mut out, i, end);
                i = end;
            }
            // A quote after a digit is C++14's digit separator (1'000), not a literal.
            (q @ (b'"' | b'\''), _) if !(q == b'\'' && i > 0 && b[i - 1].is_ascii_digit()) => {
                let mut end = i + 1;
                while end < b.len() && b[end] != q && b[end] != b'\n' {
                    end += if b[end] == b'\\' { 2 } else { 1 };
                }
                let end = end.min(b.len());
                blank(&mut out, i + 1, end);
                i = end + 1;
            }
            _ => i += 1,
        }
    }
    // Whole comments and literals were replaced, so no multi-byte character was split.
    String::from_utf8(out).expect("masking replaces whole characters")
}

/// A top-level piece of a file: a preprocessor directive (with its continuation lines) or
/// a declaration or definition (up to its `;` or closing brace). Offsets into the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Span {
    /// Where the piece's text starts: the comment lines directly above its code.
    pub start: usize,
    /// Where its code starts.
    pub code: usize,
    pub end: usize,
    pub directive: bool,
}

/// Cut a file into top-level pieces. `code` is the masked text.
pub(super) fn split(text: &str, code: &str) -> Vec<Span> {
    let b = code.as_bytes();
    let mut spans = Vec::new();
    let mut prev_end = 0;
    let mut i = 0;
    while i < b.len() {
        if b[i].is_ascii_whitespace() {
            i += 1;
            continue;
        }
        let start = leading_comments(text, prev_end, i);
        let end = if b[i] == b'#' { directive_end(b, i) } else { declaration_end(code, i) };
        spans.push(Span { start, code: i, end, directive: b[i] == b'#' });
        prev_end = end;
        i = end;
    }
    spans
}

/// Where the piece whose code starts at `code_at` begins: at the comments directly above
/// it, within the trivia that starts at `from` (the end of the previous piece). A comment
/// separated from the code by a blank line is a banner, not the piece's own; one on the
/// previous piece's last line belongs to that piece.
fn leading_comments(text: &str, from: usize, code_at: usize) -> usize {
    let trivia = &text[from..code_at];
    let b = trivia.as_bytes();
    let line_start = |i: usize| trivia[..i].rfind('\n').map_or(0, |n| n + 1);
    let mut start = None;
    let mut i = 0;
    while i < b.len() {
        let comment_end = if trivia[i..].starts_with("//") {
            Some(trivia[i..].find('\n').map_or(b.len(), |e| i + e))
        } else if trivia[i..].starts_with("/*") {
            Some(trivia[i + 2..].find("*/").map_or(b.len(), |e| i + 2 + e + 2))
        } else {
            None
        };
        match comment_end {
            Some(end) => {
                let trailing = from > 0 && !trivia[..i].contains('\n');
                if !trailing {
                    start.get_or_insert(line_start(i));
                }
                i = end;
            }
            None => {
                let blank_line_follows =
                    b[i] == b'\n' && trivia[i + 1..].split('\n').next().is_some_and(|l| l.trim().is_empty() && trivia[i + 1..].contains('\n'));
                if blank_line_follows {
                    start = None;
                }
                i += 1;
            }
        }
    }
    from + start.unwrap_or_else(|| line_start(b.len()))
}

/// The end of the directive at `at`, past its backslash-continued lines.
fn directive_end(b: &[u8], at: usize) -> usize {
    let mut i = at;
    while i < b.len() {
        if b[i] == b'\n' {
            let continued = b[at..i].iter().rev().find(|c| !matches!(c, b' ' | b'\t' | b'\r')) == Some(&b'\\');
            if !continued {
                return i + 1;
            }
        }
        i += 1;
    }
    b.len()
}

/// The end of the declaration or definition at `at`: its `;` at brace depth 0, or the brace
/// that closes a function, namespace or `extern "C"` block.
fn declaration_end(code: &str, at: usize) -> usize {
    let b = code.as_bytes();
    let mut depth = 0usize;
    let mut opened = None;
    for (i, &c) in b.iter().enumerate().skip(at) {
        match c {
            b'{' => {
                opened.get_or_insert(i);
                depth += 1;
            }
            b'}' => {
                depth = depth.saturating_sub(1);
                if depth == 0 && opened.is_some_and(|o| ends_at_brace(&code[at..o])) {
                    return i + 1;
                }
            }
            b';' if depth == 0 => return i + 1,
            _ => {}
        }
    }
    b.len()
}

/// Whether a definition whose text before its first `{` is `head` ends at the matching
/// `}` (functions, namespaces, `extern "C"` blocks) rather than at a `;` after it (types,
/// initialised variables).
fn ends_at_brace(head: &str) -> bool {
    let head = strip_template(head);
    let first = identifiers(head).next().map(|(_, w)| w);
    !matches!(first, Some("struct" | "class" | "union" | "enum" | "typedef")) && assignment(head).is_none()
}

/// `code` without a leading `template <...>` (repeated for member templates).
pub(super) fn strip_template(code: &str) -> &str {
    let mut rest = code.trim_start();
    while let Some(after) = rest.strip_prefix("template") {
        let after = after.trim_start();
        let Some(close) = after.starts_with('<').then(|| matching(after, 0)).flatten() else { break };
        rest = after[close + 1..].trim_start();
    }
    rest
}

/// The offset of the first `=` in `code` that assigns (not `==`, `<=`, `>=`, `!=`, and not
/// part of `operator=`), outside brackets.
pub(super) fn assignment(code: &str) -> Option<usize> {
    let b = code.as_bytes();
    let mut depth = 0i32;
    for i in 0..b.len() {
        match b[i] {
            b'(' | b'[' => depth += 1,
            b')' | b']' => depth -= 1,
            b'=' if depth == 0 => {
                let before = i.checked_sub(1).map(|p| b[p]);
                let after = b.get(i + 1).copied();
                let compares = matches!(before, Some(b'=' | b'<' | b'>' | b'!' | b'+' | b'-' | b'*' | b'/' | b'%' | b'&' | b'|' | b'^')) || after == Some(b'=');
                if !compares && !code[..i].trim_end().ends_with("operator") {
                    return Some(i);
                }
            }
            _ => {}
        }
    }
    None
}

pub(super) fn is_name_byte(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

/// The identifiers of `code` with their offsets, numbers (`1e-5f`, `0x1F`) skipped.
pub(crate) fn identifiers(code: &str) -> impl Iterator<Item = (usize, &str)> {
    let b = code.as_bytes();
    let mut i = 0;
    std::iter::from_fn(move || {
        while i < b.len() {
            let c = b[i];
            if c.is_ascii_digit() || (c == b'.' && b.get(i + 1).is_some_and(u8::is_ascii_digit)) {
                // A preprocessing number: digits, letters, dots, and signs after an exponent.
                i += 1;
                while i < b.len() && (is_name_byte(b[i]) || b[i] == b'.' || (matches!(b[i], b'+' | b'-') && matches!(b[i - 1], b'e' | b'E' | b'p' | b'P'))) {
                    i += 1;
                }
            } else if c.is_ascii_alphabetic() || c == b'_' {
                let start = i;
                while i < b.len() && is_name_byte(b[i]) {
                    i += 1;
                }
                return Some((start, &code[start..i]));
            } else {
                i += 1;
            }
        }
        None
    })
}

/// The identifiers `code` refers to: every identifier but member names (after `.` or `->`).
pub(super) fn references(code: &str) -> impl Iterator<Item = &str> {
    identifiers(code)
        .filter(|(at, _)| {
            let before = code[..*at].trim_end();
            !before.ends_with('.') && !before.ends_with("->")
        })
        .map(|(_, w)| w)
}

/// The byte offset of `word` in `text` where it stands alone (not part of a longer name).
pub(super) fn find_word(text: &str, word: &str) -> Option<usize> {
    let b = text.as_bytes();
    let mut from = 0;
    while let Some(i) = text[from..].find(word).map(|i| i + from) {
        let before = i == 0 || !is_name_byte(b[i - 1]);
        let after = b.get(i + word.len()).is_none_or(|c| !is_name_byte(*c));
        if before && after {
            return Some(i);
        }
        from = i + word.len();
    }
    None
}

/// The offset of the bracket closing the one at `open` (`(`, `[`, `{` or `<`), counting
/// only brackets of that kind.
pub(super) fn matching(code: &str, open: usize) -> Option<usize> {
    let b = code.as_bytes();
    let (o, c) = match b.get(open)? {
        b'(' => (b'(', b')'),
        b'[' => (b'[', b']'),
        b'{' => (b'{', b'}'),
        b'<' => (b'<', b'>'),
        _ => return None,
    };
    let mut depth = 0usize;
    for (i, &x) in b.iter().enumerate().skip(open) {
        if x == o {
            depth += 1;
        } else if x == c {
            depth -= 1;
            if depth == 0 {
                return Some(i);
            }
        }
    }
    None
}

/// `code` cut at each `sep` outside parentheses, brackets, braces and angle brackets.
pub(super) fn split_top(code: &str, sep: u8) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut depth = 0i32;
    let mut from = 0;
    for (i, &c) in code.as_bytes().iter().enumerate() {
        match c {
            b'(' | b'[' | b'{' | b'<' => depth += 1,
            b')' | b']' | b'}' | b'>' => depth -= 1,
            _ if c == sep && depth == 0 => {
                parts.push(&code[from..i]);
                from = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&code[from..]);
    parts
}

const TWO_CHARACTER: &[&[u8]] = &[b"&&", b"||", b"==", b"!=", b"<=", b">=", b"<<", b">>", b"->", b"::", b"++", b"--", b"+=", b"-=", b"*=", b"/=", b"%="];

/// C tokens of an expression: names and numbers, two-character operators, single
/// characters; whitespace dropped.
pub(super) fn tokens(expr: &str) -> Vec<String> {
    let b = expr.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        let len = if c.is_ascii_whitespace() {
            i += 1;
            continue;
        } else if is_name_byte(c) {
            b[i..].iter().position(|&x| !is_name_byte(x)).unwrap_or(b.len() - i)
        } else if TWO_CHARACTER.contains(&&b[i..(i + 2).min(b.len())]) {
            2
        } else {
            expr[i..].chars().next().map_or(1, char::len_utf8)
        };
        out.push(expr[i..i + len].to_string());
        i += len;
    }
    out
}

/// Runs of whitespace as one space, trimmed.
pub(super) fn squash(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masking_keeps_offsets_and_hides_comments_and_literals() {
        let text = "a /* b\n c */ d // e \"f\"\n\"g // h\" 'i' 1'000 é\n";
        let m = mask(text);
        assert_eq!(m.len(), text.len());
        assert_eq!(m.matches('\n').count(), text.matches('\n').count());
        let words: Vec<&str> = identifiers(&m).map(|(_, w)| w).collect();
        assert_eq!(words, ["a", "d"], "{m:?}");
    }

    #[test]
    fn pieces_end_at_semicolons_and_function_braces() {
        let text =
            "// banner\n\n// doc of k\n__global__ void k(int* a) { if (1) { a[0] = 1; } }\nstruct S { int x; } s;\n#define X \\\n  1\nint v[] = {1, 2};\n";
        let code = mask(text);
        let pieces: Vec<&str> = split(text, &code).iter().map(|s| &text[s.start..s.end]).collect();
        assert_eq!(
            pieces,
            ["// doc of k\n__global__ void k(int* a) { if (1) { a[0] = 1; } }", "struct S { int x; } s;", "#define X \\\n  1\n", "int v[] = {1, 2};",]
        );
    }

    #[test]
    fn helpers_find_words_brackets_and_assignments() {
        assert_eq!(find_word("kernel_x kernel", "kernel"), Some(9));
        assert_eq!(matching("f(a, (b)) + c", 1), Some(8));
        assert_eq!(split_top("a, f(b, c), d<e, f>", b','), ["a", " f(b, c)", " d<e, f>"]);
        assert_eq!(assignment("x == 1 && y <= 2"), None);
        assert_eq!(assignment("int x = 1"), Some(6));
        assert_eq!(strip_template("template <class T> __device__ T f(T x)"), "__device__ T f(T x)");
        let refs: Vec<&str> = references("p.x + q->y + T::size + 1e-5f").collect();
        assert_eq!(refs, ["p", "q", "T", "size"]);
    }
}
