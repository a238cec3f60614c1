//! A tool's answer: the text a model reads and the JSON a program reads, or an error the
//! model can act on.

use rmcp::model::{CallToolResult, ContentBlock};
use serde::Serialize;
use serde_json::Value;

/// A tool's answer: text for the model, JSON for programs.
pub(crate) struct Answer {
    text: String,
    data: Value,
    error: bool,
}

impl Answer {
    pub(crate) fn ok(text: impl Into<String>, data: impl Serialize) -> Answer {
        Answer { text: text.into(), data: serde_json::to_value(data).unwrap_or(Value::Null), error: false }
    }

    /// A result that says the operation failed (wrong output, compile error, gave up).
    pub(crate) fn failed(text: impl Into<String>, data: impl Serialize) -> Answer {
        Answer { text: text.into(), data: serde_json::to_value(data).unwrap_or(Value::Null), error: true }
    }

    pub(crate) fn into_result(self) -> CallToolResult {
        let mut result =
            if self.error { CallToolResult::error(vec![ContentBlock::text(self.text)]) } else { CallToolResult::success(vec![ContentBlock::text(self.text)]) };
        if !self.data.is_null() {
            result.structured_content = Some(without_nulls(self.data));
        }
        result
    }
}

/// `value` without its null object members, at every depth: an unknown value is left
/// out, so each key the output schemas name has one type.
fn without_nulls(value: Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(map.into_iter().filter(|(_, v)| !v.is_null()).map(|(k, v)| (k, without_nulls(v))).collect()),
        Value::Array(items) => Value::Array(items.into_iter().map(without_nulls).collect()),
        other => other,
    }
}

/// An error from the libraries, as a tool error the model reads: the whole chain, hints
/// included.
pub(crate) fn error_result(err: &anyhow::Error) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(format!("error: {err:#}"))])
}
