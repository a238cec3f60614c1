//! The import's settings that are manifest tables (`[tolerance]`, `[kernel.matmul]`, an
//! array's shaping keys), read from the short text a flag or a tool parameter carries. The
//! text is TOML, so it reads exactly like the `peak.toml` it ends up in, and it goes through
//! the manifest's own strict parse: a misspelt key is refused with its name.

use crate::manifest::{ArraySpec, MatmulShape, Tolerance};

/// An array's shaping: a distribution name alone (`normal`), or keys of an `[[arrays]]`
/// table, with or without braces (`init = "normal", scale = 0.5`).
pub fn array_shaping(text: &str) -> Result<toml::Table, String> {
    let text = text.trim();
    if !text.is_empty() && text.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
        let mut table = toml::Table::new();
        table.insert("init".into(), toml::Value::String(text.into()));
        return Ok(table);
    }
    inline_table(text)
}

/// `[kernel.matmul]` from its keys: `m = "M", n = "N", k = "K", a = "A", b = "W", c = "out", b_layout = "col", bias = "b"`.
pub fn matmul_shape(text: &str) -> Result<MatmulShape, String> {
    inline_table(text)?.try_into().map_err(|e: toml::de::Error| format!("[kernel.matmul]: {}", e.message()))
}

/// `[tolerance]` from `TYPE=VALUE` pairs (`f32=1e-4`, `bf16=2e-2`, `accumulation=K`).
pub fn tolerance(pairs: &[(String, String)]) -> Result<Tolerance, String> {
    let mut table = toml::Table::new();
    for (key, value) in pairs {
        let parsed = match value.parse::<f64>() {
            Ok(number) if key != "accumulation" => toml::Value::Float(number),
            _ => toml::Value::String(value.clone()),
        };
        table.insert(key.clone(), parsed);
    }
    table.try_into().map_err(|e: toml::de::Error| format!("[tolerance]: {} (keys: f32, f16, bf16, accumulation)", e.message()))
}

/// `spec` with the shaping keys `keys` laid over its own, parsed again as the manifest
/// parses an `[[arrays]]` table, so settings that do not fit the array are refused.
pub(crate) fn shaped(spec: &ArraySpec, keys: &toml::Table) -> Result<ArraySpec, String> {
    let mut table = toml::Table::try_from(spec).map_err(|e| e.to_string())?;
    for (key, value) in keys {
        if matches!(key.as_str(), "name" | "type" | "size" | "output" | "inout") {
            return Err(format!("`{key}` is not a shaping key (init, scale, offset, range, outliers, seed)"));
        }
        table.insert(key.clone(), value.clone());
    }
    table.try_into().map_err(|e: toml::de::Error| e.message().to_string())
}

/// `{ key = value, ... }`, the braces optional.
fn inline_table(text: &str) -> Result<toml::Table, String> {
    let text = text.trim();
    let inner = text.strip_prefix('{').and_then(|t| t.strip_suffix('}')).unwrap_or(text);
    let document: toml::Table =
        format!("value = {{ {inner} }}").parse().map_err(|e: toml::de::Error| format!("`{text}` is not a list of TOML keys ({})", e.message()))?;
    match document.get("value") {
        Some(toml::Value::Table(table)) => Ok(table.clone()),
        _ => Err(format!("`{text}` is not a list of TOML keys")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::{DType, Init, Layout};

    fn input(name: &str, dtype: DType) -> ArraySpec {
        ArraySpec { name: name.into(), dtype, size: "N".into(), init: Init::Random, seed: Some(1), output: false, inout: false }
    }

    #[test]
    fn a_distribution_name_or_keys_shape_an_array() {
        let normal = shaped(&input("x", DType::F32), &array_shaping("normal").unwrap()).unwrap();
        let keys = shaped(&input("x", DType::F32), &array_shaping("init = \"normal\", scale = 0.5, offset = 2.0").unwrap()).unwrap();
        assert_ne!(normal.init, Init::Random);
        assert_ne!(normal.init, keys.init);
        let labels = shaped(&input("labels", DType::I32), &array_shaping("{ range = [0, \"V\"] }").unwrap()).unwrap();
        assert_eq!(toml::Table::try_from(&labels).unwrap()["range"].as_array().unwrap().len(), 2);
        assert_eq!(labels.seed, Some(1), "keys not given stay");
    }

    #[test]
    fn unknown_or_foreign_keys_are_refused_with_the_key() {
        let e = shaped(&input("x", DType::F32), &array_shaping("scal = 1.0").unwrap()).unwrap_err();
        assert!(e.contains("scal"), "{e}");
        let e = shaped(&input("x", DType::F32), &array_shaping("size = \"M\"").unwrap()).unwrap_err();
        assert!(e.contains("not a shaping key"), "{e}");
        assert!(array_shaping("init = ").unwrap_err().contains("not a list of TOML keys"));
    }

    #[test]
    fn matmul_and_tolerance_read_like_their_tables() {
        let m = matmul_shape("m = \"M\", n = \"N\", k = \"K\", a = \"inp\", b = \"w\", c = \"out\", b_layout = \"col\", bias = \"bias\"").unwrap();
        assert_eq!((m.b_layout, m.bias.as_deref()), (Layout::Col, Some("bias")));
        assert_eq!(m.flops(), "2 * (M) * (N) * (K)");
        assert!(matmul_shape("m = \"M\"").unwrap_err().contains("missing field"));
        assert!(matmul_shape("{ m = \"M\", n = \"N\", k = \"K\", a = \"a\", b = \"b\", c = \"c\", b_layot = \"col\" }").unwrap_err().contains("b_layot"));
        let t = tolerance(&[("bf16".into(), "2e-2".into()), ("accumulation".into(), "K".into())]).unwrap();
        assert_eq!((t.bf16, t.accumulation.as_deref()), (Some(2e-2), Some("K")));
        assert!(tolerance(&[("fp32".into(), "1e-4".into())]).unwrap_err().contains("fp32"));
    }
}
