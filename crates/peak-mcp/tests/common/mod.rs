//! Shared by the test binaries. Each has no libtest harness of its own: started with
//! `PEAK_MCP_TEST_WORKER` set it *is* the kernel worker (`peak worker --backend opencl` in
//! the product), otherwise it runs its tests through libtest-mimic, skipping those that
//! need OpenCL (PoCL here) with a printed reason when no device is present. A test that
//! panics fails, as under libtest.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use libtest_mimic::{Arguments, Failed, Trial};
use peak_backend::worker::{PoolOptions, WorkerCommand};
use peak_eval::Workers;
use peak_mcp::Settings;

const WORKER_ENV: &str = "PEAK_MCP_TEST_WORKER";

pub type Test = fn() -> Result<(), Failed>;

/// Serve as the worker when asked to, else run `tests` (name, needs OpenCL, function).
pub fn main(tests: Vec<(&'static str, bool, Test)>) {
    if std::env::var_os(WORKER_ENV).is_some() {
        match peak_opencl::OpenClBackend::new() {
            Ok(backend) => peak_backend::worker::serve(&backend).expect("worker i/o"),
            Err(e) => peak_backend::worker::refuse(&e.to_string()).expect("worker i/o"),
        }
        return;
    }
    let args = Arguments::from_args();
    let missing = peak_opencl::OpenClBackend::new().err().map(|e| e.to_string());
    let trials = tests
        .into_iter()
        .map(|(name, needs_opencl, test)| {
            let skip = if needs_opencl { missing.clone() } else { None };
            Trial::test(name, move || match skip {
                Some(why) => {
                    eprintln!("SKIPPED {name}: no OpenCL device: {why}");
                    Ok(())
                }
                None => test(),
            })
        })
        .collect();
    libtest_mimic::run(&args, trials).exit();
}

/// Workers that are this test binary, and caches in `cache`.
pub fn settings(cache: &Path) -> Settings {
    let exe = std::env::current_exe().expect("test binary path");
    Settings {
        workers: Arc::new(move || {
            let exe = exe.clone();
            Workers::new(Box::new(move |_backend: &str| Ok(WorkerCommand::new(&exe).env(WORKER_ENV, "opencl"))), PoolOptions::default())
        }),
        library_dirs: vec![fixture("transformations")],
        cache_dir: Some(cache.to_path_buf()),
    }
}

pub fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name)
}

pub fn example(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples").join(name)
}
