//! A defensive scan for API keys.
//!
//! Callers are required to keep keys out of transcripts and error texts; this scan is the
//! second line of defence, because a key written into a checkpoint is pushed and cloned
//! with the workflow and cannot be taken back. It looks for the shapes providers use:
//! `sk-...` (OpenAI-style, also `sk-proj-...`), `sk-ant-...` (Anthropic) and HTTP
//! `Bearer ...` tokens. Short matches are ignored so prose such as "sk-learn" or "Bearer
//! of bad news" does not trip it.

use std::borrow::Cow;

use serde_json::Value;

/// Fewest key characters after `sk-` for a match; real keys are 40+.
const MIN_SK_LEN: usize = 20;
/// Fewest token characters after `Bearer ` for a match.
const MIN_BEARER_LEN: usize = 16;

/// What a match looks like, for error messages (the matched text itself is never shown).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Match {
    start: usize,
    end: usize,
    kind: &'static str,
}

fn is_key_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'-' || b == b'_'
}

fn is_token_char(b: u8) -> bool {
    is_key_char(b) || matches!(b, b'.' | b'~' | b'+' | b'/' | b'=')
}

fn run_len(bytes: &[u8], from: usize, pred: fn(u8) -> bool) -> usize {
    bytes[from..].iter().take_while(|&&b| pred(b)).count()
}

fn find(text: &str) -> Option<Match> {
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let at_boundary = i == 0 || !is_key_char(bytes[i - 1]);
        if at_boundary && bytes[i..].starts_with(b"sk-") {
            let len = run_len(bytes, i + 3, is_key_char);
            if len >= MIN_SK_LEN {
                let kind = if bytes[i..].starts_with(b"sk-ant-") { "Anthropic API key (sk-ant-...)" } else { "API key (sk-...)" };
                return Some(Match { start: i, end: i + 3 + len, kind });
            }
        }
        if at_boundary && bytes[i..].starts_with(b"Bearer ") {
            let spaces = run_len(bytes, i + 6, |b| b == b' ');
            let len = run_len(bytes, i + 6 + spaces, is_token_char);
            if len >= MIN_BEARER_LEN {
                return Some(Match { start: i, end: i + 6 + spaces + len, kind: "bearer token (Bearer ...)" });
            }
        }
        i += 1;
    }
    None
}

/// The first string in `value` (object keys included) that holds something shaped like an
/// API key: its JSON pointer and the kind of key.
pub(crate) fn find_in_json(value: &Value) -> Option<(String, &'static str)> {
    fn walk(value: &Value, pointer: &mut String) -> Option<(String, &'static str)> {
        match value {
            Value::String(s) => find(s).map(|m| (pointer.clone(), m.kind)),
            Value::Array(items) => items.iter().enumerate().find_map(|(i, item)| {
                let len = pointer.len();
                pointer.push_str(&format!("/{i}"));
                let found = walk(item, pointer);
                pointer.truncate(len);
                found
            }),
            Value::Object(map) => map.iter().find_map(|(key, item)| {
                let len = pointer.len();
                pointer.push('/');
                pointer.push_str(&key.replace('~', "~0").replace('/', "~1"));
                let found = find(key).map(|m| (pointer.clone(), m.kind)).or_else(|| walk(item, pointer));
                pointer.truncate(len);
                found
            }),
            Value::Null | Value::Bool(_) | Value::Number(_) => None,
        }
    }
    walk(value, &mut String::new()).map(|(p, kind)| (if p.is_empty() { "/".to_string() } else { p }, kind))
}

/// `text` with every key-shaped token replaced by `[REDACTED]`.
pub(crate) fn redact(text: &str) -> Cow<'_, str> {
    let Some(first) = find(text) else { return Cow::Borrowed(text) };
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    let mut m = Some(first);
    while let Some(found) = m {
        out.push_str(&rest[..found.start]);
        out.push_str("[REDACTED]");
        rest = &rest[found.end..];
        m = find(rest);
    }
    out.push_str(rest);
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    use serde_json::json;

    /// Key-shaped test data is assembled at run time, so no key-shaped literal sits in the source.
    const FAKE: &str = "abcdefghijklmnopqrstuvwxyz012345";

    #[test]
    fn finds_provider_key_shapes() {
        assert_eq!(find(&format!("key sk-{} end", FAKE)).unwrap().kind, "API key (sk-...)");
        assert_eq!(find(&format!("sk-ant-api03-{}", &FAKE[..26])).unwrap().kind, "Anthropic API key (sk-ant-...)");
        assert!(find("Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.payload").is_some());
    }

    #[test]
    fn ignores_prose_and_short_tokens() {
        assert_eq!(find(&format!("uses sk-learn and task-{}", &FAKE[..26])), None);
        assert_eq!(find("Bearer of bad news"), None);
        assert_eq!(find("sk-short"), None);
    }

    #[test]
    fn json_pointer_names_the_string() {
        let v = json!({"messages": [{"role": "user", "content": "hi"}, {"content": "Bearer abcdefghijklmnop1234"}]});
        assert_eq!(find_in_json(&v), Some(("/messages/1/content".to_string(), "bearer token (Bearer ...)")));
        assert_eq!(find_in_json(&json!({"a": [1, "clean"]})), None);
    }

    #[test]
    fn redaction_replaces_every_key_and_keeps_the_rest() {
        let text = format!("401: sk-{} rejected, Bearer abcdefghijklmnopqrst too", &FAKE[..27]);
        let text = text.as_str();
        assert_eq!(redact(text), "401: [REDACTED] rejected, [REDACTED] too");
        assert!(matches!(redact("clean"), Cow::Borrowed("clean")));
    }
}
