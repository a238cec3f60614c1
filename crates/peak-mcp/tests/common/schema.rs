//! A small check of a tool's `structuredContent` against its output schema: an object, the
//! required keys there, and each key the schema types (at any depth) of that type. The
//! official SDKs validate in full (tests/clients); this runs with the Rust tests.

use serde_json::Value;

/// Where `value` departs from `schema`, if anywhere.
pub fn violations(schema: &Value, value: &Value, path: &str) -> Vec<String> {
    let mut found = Vec::new();
    if let Some(kind) = schema.get("type").and_then(Value::as_str)
        && !is(kind, value)
    {
        found.push(format!("{path}: expected {kind}, got {value}"));
        return found;
    }
    if let Some(allowed) = schema.get("enum").and_then(Value::as_array)
        && !allowed.contains(value)
    {
        found.push(format!("{path}: {value} is not one of {allowed:?}"));
    }
    for key in schema.get("required").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str) {
        if value.get(key).is_none() {
            found.push(format!("{path}: lacks required `{key}`"));
        }
    }
    for (key, sub) in schema.get("properties").and_then(Value::as_object).into_iter().flatten() {
        if let Some(member) = value.get(key) {
            found.extend(violations(sub, member, &format!("{path}.{key}")));
        }
    }
    if let (Some(items), Some(list)) = (schema.get("items"), value.as_array()) {
        for (i, item) in list.iter().enumerate() {
            found.extend(violations(items, item, &format!("{path}[{i}]")));
        }
    }
    found
}

fn is(kind: &str, value: &Value) -> bool {
    match kind {
        "object" => value.is_object(),
        "array" => value.is_array(),
        "string" => value.is_string(),
        "integer" => value.is_i64() || value.is_u64(),
        "number" => value.is_number(),
        "boolean" => value.is_boolean(),
        "null" => value.is_null(),
        _ => false,
    }
}
