//! `peak info`: what can run here.

use anyhow::Result;
use serde::Serialize;

use crate::backends;
use crate::cli::InfoArgs;
use crate::output::print_json;

#[derive(Serialize)]
struct BackendReport {
    backend: String,
    available: bool,
    devices: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<String>,
}

pub fn run(args: InfoArgs) -> Result<()> {
    let reports: Vec<BackendReport> = backends::survey()
        .into_iter()
        .map(|a| match a.devices {
            Ok(devices) => BackendReport { backend: a.backend.to_string(), available: true, devices, reason: None },
            Err(reason) => BackendReport { backend: a.backend.to_string(), available: false, devices: vec![], reason: Some(reason) },
        })
        .collect();
    if args.json {
        return print_json(&reports);
    }
    for r in &reports {
        match &r.reason {
            None => {
                println!("{:<7} available", r.backend);
                for d in &r.devices {
                    println!("        {d}");
                }
            }
            Some(reason) => println!("{:<7} missing: {reason}", r.backend),
        }
    }
    Ok(())
}
