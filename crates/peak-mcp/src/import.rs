//! `import_kernel`'s parameters as the importer's choices. Names and values come as
//! `NAME=VALUE` strings, the shape `set` has in every tool and the flags of `peak new`
//! have (`--size x=n`, `--input n=256,1024`, `--scalar eps=1e-5`, `--validate n=7`).

use anyhow::{Result, anyhow};
use peak_spec::import::ImportChoices;

use crate::params::ImportKernelParams;

/// The choices `p` makes; a malformed entry is an error naming its parameter.
pub(crate) fn choices(p: &ImportKernelParams) -> Result<ImportChoices> {
    Ok(ImportChoices {
        kernel: p.kernel.clone(),
        sizes: pairs(&p.sizes, "sizes", |v| Ok(v.to_string()))?.into_iter().collect(),
        inputs: pairs(&p.inputs, "inputs", integers)?.into_iter().collect(),
        scalars: pairs(&p.scalars, "scalars", number)?.into_iter().collect(),
        outputs: (!p.outputs.is_empty()).then(|| p.outputs.clone()),
        domain: p.domain.clone(),
        description: p.description.clone(),
        validation: pairs(&p.validation, "validation", integers)?.into_iter().collect(),
        library: p.library.clone(),
        ..Default::default()
    })
}

/// `NAME=VALUE` entries as (name, value) with `parse` reading each value.
fn pairs<T>(entries: &[String], param: &str, parse: impl Fn(&str) -> Result<T, String>) -> Result<Vec<(String, T)>> {
    entries
        .iter()
        .map(|entry| {
            let (name, value) = entry.split_once('=').ok_or_else(|| anyhow!("{param}: `{entry}` is not NAME=VALUE"))?;
            let value = parse(value.trim()).map_err(|e| anyhow!("{param}: {}: {e}", name.trim()))?;
            Ok((name.trim().to_string(), value))
        })
        .collect()
}

/// `V1,V2,...` as integers.
fn integers(value: &str) -> Result<Vec<i64>, String> {
    value.split(',').map(|x| x.trim().parse::<i64>().map_err(|_| format!("`{x}` is not an integer"))).collect()
}

fn number(value: &str) -> Result<f64, String> {
    value.parse::<f64>().map_err(|_| format!("`{value}` is not a number"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(sizes: &[&str], inputs: &[&str], scalars: &[&str]) -> ImportKernelParams {
        let list = |l: &[&str]| l.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        serde_json::from_value(serde_json::json!({ "file": "k.cu", "context": "ctx", "sizes": list(sizes), "inputs": list(inputs), "scalars": list(scalars) }))
            .unwrap()
    }

    #[test]
    fn lists_of_name_value_become_the_importers_maps() {
        let c = choices(&params(&["x=rows * cols", "y = n"], &["rows=4096,1024", "cols=7"], &["eps=1e-5"])).unwrap();
        assert_eq!(c.sizes.get("x").map(String::as_str), Some("rows * cols"));
        assert_eq!(c.sizes.get("y").map(String::as_str), Some("n"));
        assert_eq!(c.inputs.get("rows"), Some(&vec![4096, 1024]));
        assert_eq!(c.scalars.get("eps"), Some(&1e-5));
    }

    #[test]
    fn a_malformed_entry_names_its_parameter() {
        let err = choices(&params(&["x"], &[], &[])).unwrap_err().to_string();
        assert!(err.contains("sizes: `x` is not NAME=VALUE"), "{err}");
        let err = choices(&params(&[], &["n=big"], &[])).unwrap_err().to_string();
        assert!(err.contains("inputs: n: `big` is not an integer"), "{err}");
        let err = choices(&params(&[], &[], &["eps=tiny"])).unwrap_err().to_string();
        assert!(err.contains("scalars: eps: `tiny` is not a number"), "{err}");
    }
}
