//! A manifest constraint (a Rhai expression over inputs and tuning parameters) as a C
//! expression, so an exported dispatch table can check at run time whether a configuration
//! is valid for a shape it was not tuned at.
//!
//! Only the part of Rhai that C reads the same way is translated: integer literals, the
//! manifest's names, parentheses, the arithmetic, comparison, logical and bitwise
//! operators, and the expression engine's `min`, `max` and `ceil_div` (written as
//! `peak_min`, `peak_max` and `peak_ceil_div`, which the dispatch header defines). Anything
//! else (`**`, strings, method calls, other functions) gives `None`, and the table then says
//! in a comment that it does not check validity.

/// C keywords and names the header itself uses: a manifest name equal to one is not
/// translated (the C would not mean the same).
const RESERVED: &[&str] = &[
    "auto",
    "break",
    "case",
    "char",
    "const",
    "continue",
    "default",
    "do",
    "double",
    "else",
    "enum",
    "extern",
    "float",
    "for",
    "goto",
    "if",
    "inline",
    "int",
    "long",
    "register",
    "restrict",
    "return",
    "short",
    "signed",
    "sizeof",
    "static",
    "struct",
    "switch",
    "typedef",
    "union",
    "unsigned",
    "void",
    "volatile",
    "while",
    "bool",
    "true",
    "false",
    "new",
    "delete",
    "class",
    "template",
    "this",
    "namespace",
    "operator",
];

const OPERATORS: &[&str] = &["==", "!=", "<=", ">=", "&&", "||", "<<", ">>", "+", "-", "*", "/", "%", "<", ">", "!", "&", "|", "^", "(", ")", ","];

/// `text` as C, with `names` (inputs and tuning parameters) left as identifiers.
pub fn to_c(text: &str, names: &[&str]) -> Option<String> {
    let mut out = String::new();
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i] as char;
        if c.is_ascii_whitespace() {
            i += 1;
            continue;
        }
        if c.is_ascii_digit() {
            let start = i;
            while i < bytes.len() && (bytes[i].is_ascii_digit() || bytes[i] == b'_') {
                i += 1;
            }
            if i < bytes.len() && (bytes[i].is_ascii_alphabetic() || bytes[i] == b'.') {
                return None; // hex, floats, suffixes: not a plain integer
            }
            let digits: String = text[start..i].chars().filter(|c| *c != '_').collect();
            out.push_str(&format!("{digits}LL "));
            continue;
        }
        if c.is_ascii_alphabetic() || c == '_' {
            let start = i;
            while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                i += 1;
            }
            let word = &text[start..i];
            let call = text[i..].trim_start().starts_with('(');
            match word {
                "min" | "max" | "ceil_div" if call => out.push_str(&format!("peak_{word}")),
                _ if call => return None,
                _ if names.contains(&word) && !RESERVED.contains(&word) && !word.starts_with("peak_") => out.push_str(word),
                _ => return None,
            }
            out.push(' ');
            continue;
        }
        if text[i..].starts_with("**") {
            return None;
        }
        let op = OPERATORS.iter().find(|op| text[i..].starts_with(*op))?;
        out.push_str(op);
        out.push(' ');
        i += op.len();
    }
    let out = out.trim_end().to_string();
    (!out.is_empty()).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::to_c;

    #[test]
    fn constraints_translate_where_c_reads_them_the_same() {
        let names = ["n", "BLOCK_X", "TILE_K"];
        assert_eq!(to_c("n % (BLOCK_X * 8) == 0", &names).as_deref(), Some("n % ( BLOCK_X * 8LL ) == 0LL"));
        assert_eq!(
            to_c("ceil_div(n, TILE_K) >= 2 && min(BLOCK_X, 1_024) != 3", &names).as_deref(),
            Some("peak_ceil_div ( n , TILE_K ) >= 2LL && peak_min ( BLOCK_X , 1024LL ) != 3LL")
        );
        assert_eq!(to_c("!(n < 4) || BLOCK_X << 1 > TILE_K", &names).as_deref(), Some("! ( n < 4LL ) || BLOCK_X << 1LL > TILE_K"));
        // Not C, or not ours: refused rather than guessed.
        for text in ["n ** 2 > 4", "sqrt(n) > 2", "m > 2", "n > 2.5", "n > 0x10", "n.abs() > 2", "n > \"a\"", ""] {
            assert_eq!(to_c(text, &names), None, "{text}");
        }
        assert_eq!(to_c("int > 2", &["int"]), None, "a C keyword as a name");
    }
}
