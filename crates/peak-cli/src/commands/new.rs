//! `peak new FILE --to DIR`: a context scaffolded from an existing kernel source file.
//!
//! The signature gives arrays and scalar inputs (`peak_spec::import`); array lengths and
//! the sizes to run come from flags, or are asked for when stdin is a terminal.

use std::io::{BufRead, IsTerminal, Write};

use anyhow::{Result, anyhow, bail};
use peak_spec::import::{ImportChoices, Param, backend_of, find_kernels, import_file};
use peak_spec::{Backend, Region};
use serde_json::json;

use crate::cli::NewArgs;
use crate::output::print_json;
use crate::usage;

pub fn run(args: NewArgs) -> Result<()> {
    let backend: Option<Backend> = args.backend.as_deref().map(str::parse).transpose().map_err(|e: String| usage(anyhow!("--backend: {e}")))?;
    let mut choices = ImportChoices {
        kernel: args.kernel.clone(),
        sizes: pairs(&args.sizes, "--size", |v| Ok(v.to_string()))?.into_iter().collect(),
        inputs: pairs(&args.inputs, "--input", |v| v.split(',').map(|x| x.trim().parse::<i64>().map_err(|_| format!("`{x}` is not an integer"))).collect())?.into_iter().collect(),
        outputs: (!args.outputs.is_empty()).then(|| args.outputs.clone()),
        domain: args.domain.clone(),
        description: args.description.clone(),
    };
    if std::io::stdin().is_terminal()
        && let Ok(source) = std::fs::read_to_string(&args.file)
        && let Some(backend) = backend.or_else(|| backend_of(&args.file.display().to_string()))
    {
        ask_for_missing(&source, backend, &mut choices)?;
    }
    let ctx = import_file(&args.file, &args.to, backend, &choices).map_err(|e| usage(anyhow!(e)))?;
    let m = &ctx.manifest;
    if args.json {
        return print_json(&json!({
            "context": args.to,
            "kernel": m.kernel.name,
            "backend": m.kernel.backend.name(),
            "arrays": m.arrays,
            "inputs": m.inputs,
            "tuning": m.tuning,
            "launch": ctx.regions.get(Region::Host),
        }));
    }
    println!("wrote {} ({} kernel `{}`)", args.to.display(), m.kernel.backend, m.kernel.name);
    for a in &m.arrays {
        let role = if a.output { "output" } else if a.inout { "read and written" } else { "input" };
        println!("  array  {:<12} {:<5} {} elements, {role}", a.name, a.dtype, a.size);
    }
    for (name, domain) in &m.inputs {
        println!("  input  {name:<12} {}", domain.expand().unwrap_or_default().iter().map(i64::to_string).collect::<Vec<_>>().join(", "));
    }
    println!("  launch {}", ctx.regions.get(Region::Host).lines().filter(|l| !l.starts_with("//")).collect::<Vec<_>>().join(" "));
    println!("next: read the launch in {}, then `peak run {}`", ctx.source_path().display(), args.to.display());
    Ok(())
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

/// At a terminal: ask for each array length and input size the flags did not give.
fn ask_for_missing(source: &str, backend: Backend, choices: &mut ImportChoices) -> Result<()> {
    let Ok(kernels) = find_kernels(source, backend) else { return Ok(()) };
    let Some(kernel) = kernels.iter().find(|k| choices.kernel.as_ref().is_none_or(|w| *w == k.name)) else { return Ok(()) };
    if choices.kernel.is_none() && kernels.len() > 1 {
        return Ok(()); // scaffold names them and asks for --kernel
    }
    let scalars: Vec<&str> = kernel.params.iter().filter(|p| matches!(p, Param::Scalar { .. })).map(Param::name).collect();
    for p in &kernel.params {
        match p {
            Param::Array { name, .. } if !choices.sizes.contains_key(name) => {
                let answer = ask(&format!("length of array {name}, as an expression over {}: ", scalars.join(", ")))?;
                choices.sizes.insert(name.clone(), answer);
            }
            Param::Scalar { name } if !choices.inputs.contains_key(name) => loop {
                let answer = ask(&format!("values of {name} to run at (e.g. 256,1024): "))?;
                match answer.split(',').map(|x| x.trim().parse::<i64>()).collect::<Result<Vec<_>, _>>() {
                    Ok(values) if !values.is_empty() => {
                        choices.inputs.insert(name.clone(), values);
                        break;
                    }
                    _ => eprintln!("integers separated by commas, please"),
                }
            },
            _ => {}
        }
    }
    Ok(())
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
