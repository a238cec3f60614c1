//! The tool schemas as clients validate them: input schemas in plain JSON Schema (no
//! non-standard `format`s), and an output schema per tool (`outputs`).
//!
//! schemars writes Rust's integer and float widths as `"format": "uint"`, `"uint64"`,
//! `"int64"`, `"double"`: not JSON Schema formats, and strict validators (the official
//! SDKs' among them) warn about or reject them. The sign is kept as `"minimum": 0`.

use std::sync::Arc;

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::model::{JsonObject, Tool};
use schemars::Schema;
use schemars::transform::{RecursiveTransform, Transform};
use serde_json::Value;

use crate::outputs;

/// Every route's tool with a portable input schema and its output schema.
pub(crate) fn conform<S>(router: &mut ToolRouter<S>) {
    for route in router.map.values_mut() {
        conform_tool(&mut route.attr);
    }
}

fn conform_tool(tool: &mut Tool) {
    tool.input_schema = Arc::new(portable(tool.input_schema.as_ref().clone()));
    let output = outputs::schema(&tool.name).unwrap_or_else(|| panic!("tool {} has no output schema (outputs.rs)", tool.name));
    tool.output_schema = Some(Arc::new(portable(output)));
}

/// `schema` without the numeric `format`s schemars writes, in every subschema.
pub(crate) fn portable(schema: JsonObject) -> JsonObject {
    let mut schema = Schema::from(schema);
    RecursiveTransform(drop_numeric_format).transform(&mut schema);
    match Value::from(schema) {
        Value::Object(object) => object,
        _ => unreachable!("an object schema stays an object"),
    }
}

fn drop_numeric_format(schema: &mut Schema) {
    let numeric = matches!(schema.get("type").and_then(Value::as_str), Some("integer" | "number"));
    if numeric && let Some(object) = schema.as_object_mut() {
        object.remove("format");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn numeric_formats_go_and_other_formats_stay() {
        let Value::Object(schema) = json!({
            "type": "object",
            "properties": {
                "budget": { "type": "integer", "format": "uint", "minimum": 0 },
                "scale": { "type": "number", "format": "double" },
                "when": { "type": "string", "format": "date-time" },
                "sizes": { "type": "array", "items": { "type": "integer", "format": "int64" } }
            }
        }) else {
            unreachable!()
        };
        let out = Value::Object(portable(schema));
        assert_eq!(out["properties"]["budget"], json!({ "type": "integer", "minimum": 0 }));
        assert_eq!(out["properties"]["scale"], json!({ "type": "number" }));
        assert_eq!(out["properties"]["when"]["format"], "date-time");
        assert_eq!(out["properties"]["sizes"]["items"], json!({ "type": "integer" }));
    }
}
