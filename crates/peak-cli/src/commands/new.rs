//! `peak new FILE --to DIR`: a context scaffolded from an existing kernel source file.
//!
//! The signature gives arrays, scalar inputs and float parameters (`peak_spec::import`);
//! array lengths, the sizes to run and the floats' values come from flags, or are asked
//! for when stdin is a terminal. What the import left out of the file is printed.

use std::io::{BufRead, IsTerminal, Write};
use std::path::Path;

use anyhow::{Result, anyhow, bail};
use peak_spec::import::{ImportChoices, Param, array_shaping, backend_of, import_file, matmul_shape, read_signature, tolerance};
use peak_spec::{Language, Region};
use serde_json::json;

use crate::cli::NewArgs;
use crate::output::print_json;
use crate::usage;

pub fn run(args: NewArgs) -> Result<()> {
    let backend: Option<Language> = args.backend.as_deref().map(str::parse).transpose().map_err(|e: String| usage(anyhow!("--backend: {e}")))?;
    let mut choices = ImportChoices {
        kernel: args.kernel.clone(),
        sizes: pairs(&args.sizes, "--size", |v| Ok(v.to_string()))?.into_iter().collect(),
        inputs: pairs(&args.inputs, "--input", integer_list)?.into_iter().collect(),
        scalars: pairs(&args.scalars, "--scalar", |v| v.parse::<f64>().map_err(|_| format!("`{v}` is not a number"))).map(|p| p.into_iter().collect())?,
        outputs: (!args.outputs.is_empty()).then(|| args.outputs.clone()),
        domain: args.domain.clone(),
        description: args.description.clone(),
        validation: pairs(&args.validation, "--validate", integer_list)?.into_iter().collect(),
        library: args.library.clone(),
        shaping: pairs(&args.shaping, "--init", array_shaping)?.into_iter().collect(),
        tolerance: tolerance_of(&args.tolerance)?,
        pattern: args.pattern.as_deref().map(str::parse).transpose().map_err(|e: String| usage(anyhow!("--pattern: {e}")))?,
        matmul: args.matmul.as_deref().map(matmul_shape).transpose().map_err(|e| usage(anyhow!("--matmul: {e}")))?,
    };
    if std::io::stdin().is_terminal()
        && let Some(backend) = backend.or_else(|| backend_of(&args.file.display().to_string()))
    {
        ask_for_missing(&args.file, backend, &mut choices)?;
    }
    let (ctx, notes) = import_file(&args.file, &args.to, backend, &choices).map_err(|e| usage(anyhow!(e)))?;
    let m = &ctx.manifest;
    if args.json {
        return print_json(&json!({
            "context": args.to,
            "kernel": m.kernel.name,
            "backend": m.kernel.backend.name(),
            "arrays": m.arrays,
            "inputs": m.inputs,
            "tuning": m.tuning,
            "constraints": m.constraints,
            "launch": ctx.regions.get(Region::Host),
            "notes": notes,
        }));
    }
    println!("wrote {} ({} kernel `{}`)", args.to.display(), m.kernel.backend, m.kernel.name);
    for a in &m.arrays {
        let role = if a.output {
            "output"
        } else if a.inout {
            "read and written"
        } else {
            "input"
        };
        println!("  array  {:<12} {:<5} {} elements, {role}", a.name, a.dtype, a.size);
    }
    for (name, domain) in &m.inputs {
        println!("  input  {name:<12} {}", domain.expand().unwrap_or_default().iter().map(i64::to_string).collect::<Vec<_>>().join(", "));
    }
    for line in ctx.regions.get(Region::Host).lines() {
        println!("  host   {line}");
    }
    for note in &notes {
        println!("  note   {note}");
    }
    println!("next: read the launch in {}, then `peak run {}`", ctx.source_path().display(), args.to.display());
    Ok(())
}

/// `[tolerance]` from `--tolerance TYPE=VALUE` flags, if any.
fn tolerance_of(flags: &[String]) -> Result<Option<peak_spec::manifest::Tolerance>> {
    if flags.is_empty() {
        return Ok(None);
    }
    let given = pairs(flags, "--tolerance", |v| Ok(v.to_string()))?;
    tolerance(&given).map(Some).map_err(|e| usage(anyhow!("--tolerance: {e}")))
}

/// `V1,V2,...` as integers.
fn integer_list(value: &str) -> Result<Vec<i64>, String> {
    value.split(',').map(|x| x.trim().parse::<i64>().map_err(|_| format!("`{x}` is not an integer"))).collect()
}

/// `NAME=VALUE` flags into a map; `parse` reads the value.
fn pairs<T>(flags: &[String], flag: &str, parse: impl Fn(&str) -> Result<T, String>) -> Result<Vec<(String, T)>> {
    flags
        .iter()
        .map(|f| {
            let (name, value) = f.split_once('=').ok_or_else(|| usage(anyhow!("{flag} {f}: expected NAME=VALUE")))?;
            let value = parse(value.trim()).map_err(|e| usage(anyhow!("{flag} {f}: {e}")))?;
            Ok((name.trim().to_string(), value))
        })
        .collect()
}

/// At a terminal: ask for each array length, input size and float value the flags did
/// not give.
fn ask_for_missing(file: &Path, backend: Language, choices: &mut ImportChoices) -> Result<()> {
    // A file peak cannot read as a kernel is left to import_file, which says why.
    let Ok(kernel) = read_signature(file, backend, choices.kernel.as_deref()) else { return Ok(()) };
    let scalars: Vec<&str> = kernel.params.iter().filter(|p| matches!(p, Param::Scalar { .. })).map(Param::name).collect();
    for p in &kernel.params {
        match p {
            Param::Array { name, .. } if !choices.sizes.contains_key(name) => {
                let answer = ask(&format!("length of array {name}, as an expression over {}: ", scalars.join(", ")))?;
                choices.sizes.insert(name.clone(), answer);
            }
            Param::Scalar { name, .. } if !choices.inputs.contains_key(name) => {
                let values = ask_until(&format!("values of {name} to run at (e.g. 256,1024): "), "integers separated by commas, please", |a| {
                    a.split(',').map(|x| x.trim().parse::<i64>()).collect::<Result<Vec<_>, _>>().ok().filter(|v| !v.is_empty())
                })?;
                choices.inputs.insert(name.clone(), values);
            }
            Param::Float { name } if !choices.scalars.contains_key(name) => {
                let value = ask_until(&format!("value of float parameter {name} (e.g. 1e-5): "), "a finite number, please", |a| {
                    a.parse::<f64>().ok().filter(|v| v.is_finite())
                })?;
                choices.scalars.insert(name.clone(), value);
            }
            _ => {}
        }
    }
    Ok(())
}

/// Ask `question` until `parse` accepts the answer.
fn ask_until<T>(question: &str, again: &str, parse: impl Fn(&str) -> Option<T>) -> Result<T> {
    loop {
        match parse(&ask(question)?) {
            Some(value) => return Ok(value),
            None => eprintln!("{again}"),
        }
    }
}

fn ask(question: &str) -> Result<String> {
    eprint!("{question}");
    std::io::stderr().flush()?;
    let mut line = String::new();
    if std::io::stdin().lock().read_line(&mut line)? == 0 {
        bail!("no answer (end of input)");
    }
    Ok(line.trim().to_string())
}
