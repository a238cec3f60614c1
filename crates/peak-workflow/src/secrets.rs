//! A defensive scan for API keys.
//!
//! Callers are required to keep keys out of transcripts and error texts; this scan is the
//! second line of defence, because a key written into a checkpoint is pushed and cloned
//! with the workflow and cannot be taken back. It works two ways:
//!
//! - by value: the exact value of every key variable set in this process's environment
//!   ([`is_key_var`]: `OPENAI_API_KEY`, `ANTHROPIC_API_KEY`, any `*_API_KEY`, `*_TOKEN`,
//!   `*_SECRET`), wherever it appears, whatever it looks like. A server that echoes the
//!   key it was sent in an error body ("invalid key: ...") is caught this way.
//! - by shape: the shapes providers use, `sk-...` (OpenAI-style, also `sk-proj-...`),
//!   `sk-ant-...` (Anthropic) and HTTP `Bearer ...` tokens, for keys this process was never
//!   given. Short matches are ignored so prose such as "sk-learn" or "Bearer of bad news"
//!   does not trip it.

use std::borrow::Cow;

use serde_json::Value;

/// Fewest characters of a variable's value for it to be redacted by value: shorter values
/// ("1", "true") are settings, not keys, and would redact ordinary text.
const MIN_VALUE_LEN: usize = 8;

const REDACTED: &str = "[REDACTED]";

/// Whether an environment variable holds a key by its name: every provider's key variable
/// (`peak_transform`'s executors read `OPENAI_API_KEY`, `ANTHROPIC_API_KEY`,
/// `OPENROUTER_API_KEY` and `PEAK_COMPAT_API_KEY`) ends in `_API_KEY`; `*_TOKEN` and
/// `*_SECRET` cover other services' credentials a launcher may pass along.
pub fn is_key_var(name: &str) -> bool {
    let name = name.to_ascii_uppercase();
    ["_API_KEY", "_TOKEN", "_SECRET"].iter().any(|suffix| name.ends_with(suffix)) || name == "API_KEY"
}

/// The values of the key variables set now, longest first (so a key that contains another
/// is replaced whole).
fn configured_keys() -> Vec<String> {
    let mut keys: Vec<String> = std::env::vars_os()
        .filter(|(name, _)| name.to_str().is_some_and(is_key_var))
        .filter_map(|(_, value)| value.into_string().ok())
        .map(|value| value.trim().to_string())
        .filter(|value| value.chars().count() >= MIN_VALUE_LEN)
        .collect();
    keys.sort_by_key(|k| std::cmp::Reverse(k.len()));
    keys.dedup();
    keys
}

/// `text` with every configured key value replaced by `[REDACTED]`.
fn redact_values<'a>(text: &'a str, keys: &[String]) -> Cow<'a, str> {
    let mut out = Cow::Borrowed(text);
    for key in keys {
        if out.contains(key.as_str()) {
            out = Cow::Owned(out.replace(key.as_str(), REDACTED));
        }
    }
    out
}

/// Every string of `value` (object keys included) with the configured key values
/// replaced by `[REDACTED]`.
pub(crate) fn redact_json_values(value: &mut Value) {
    fn walk(value: &mut Value, keys: &[String]) {
        match value {
            Value::String(s) => {
                if let Cow::Owned(clean) = redact_values(s, keys) {
                    *s = clean;
                }
            }
            Value::Array(items) => items.iter_mut().for_each(|item| walk(item, keys)),
            Value::Object(map) => {
                if map.keys().any(|k| matches!(redact_values(k, keys), Cow::Owned(_))) {
                    *map = std::mem::take(map).into_iter().map(|(k, v)| (redact_values(&k, keys).into_owned(), v)).collect();
                }
                map.values_mut().for_each(|item| walk(item, keys));
            }
            Value::Null | Value::Bool(_) | Value::Number(_) => {}
        }
    }
    let keys = configured_keys();
    if !keys.is_empty() {
        walk(value, &keys);
    }
}

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

/// `text` with every configured key value and every key-shaped token replaced by
/// `[REDACTED]`: what anything peak writes or prints passes through.
pub fn redact(text: &str) -> Cow<'_, str> {
    match redact_values(text, &configured_keys()) {
        Cow::Borrowed(text) => redact_shapes(text),
        Cow::Owned(text) => Cow::Owned(redact_shapes(&text).into_owned()),
    }
}

/// `text` with every key-shaped token replaced by `[REDACTED]`.
fn redact_shapes(text: &str) -> Cow<'_, str> {
    let Some(first) = find(text) else { return Cow::Borrowed(text) };
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    let mut m = Some(first);
    while let Some(found) = m {
        out.push_str(&rest[..found.start]);
        out.push_str(REDACTED);
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
        assert_eq!(redact_shapes(text), "401: [REDACTED] rejected, [REDACTED] too");
        assert!(matches!(redact_shapes("clean"), Cow::Borrowed("clean")));
    }

    #[test]
    fn key_values_are_redacted_whatever_they_look_like() {
        // Shaped like no provider's key, so only the value can find it.
        let keys = vec!["plain-key-value-0042".to_string()];
        assert_eq!(redact_values("401: invalid key plain-key-value-0042 (plain-key-value-0042)", &keys), "401: invalid key [REDACTED] ([REDACTED])");
        assert!(matches!(redact_values("clean", &keys), Cow::Borrowed("clean")));
    }

    #[test]
    fn key_variables_are_known_by_name() {
        for name in ["OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENROUTER_API_KEY", "PEAK_COMPAT_API_KEY", "HF_TOKEN", "openai_api_key"] {
            assert!(is_key_var(name), "{name}");
        }
        for name in ["PATH", "PEAK_OPENAI_BASE_URL", "PEAK_CACHE_DIR", "KEYBOARD"] {
            assert!(!is_key_var(name), "{name}");
        }
    }
}
