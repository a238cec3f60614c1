//! Shared by the test binaries. Each has no libtest harness of its own: started with
//! `PEAK_MCP_TEST_WORKER` set it *is* the kernel worker (`peak worker --backend opencl` in
//! the product), otherwise it runs its tests through libtest-mimic, skipping those that
//! need OpenCL (PoCL here) with a printed reason when no device is present. A test that
//! panics fails, as under libtest.

#![allow(dead_code)]

pub mod schema;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use peak_backend::harness::run_gated;
pub use peak_backend::harness::{Failed, Test};
use peak_backend::worker::{PoolOptions, WorkerCommand};
use peak_eval::Workers;
use peak_mcp::Settings;

const WORKER_ENV: &str = "PEAK_MCP_TEST_WORKER";

/// Serve as the worker when asked to, else run `tests` (name, needs OpenCL, function).
pub fn main(tests: Vec<(&'static str, bool, Test)>) {
    if std::env::var_os(WORKER_ENV).is_some() {
        match peak_opencl::OpenClBackend::new() {
            Ok(backend) => peak_backend::worker::serve(&backend).expect("worker i/o"),
            Err(e) => peak_backend::worker::refuse(&e.to_string()).expect("worker i/o"),
        }
        return;
    }
    run_gated(tests, "OpenCL", peak_opencl::OpenClBackend::new().err().map(|e| e.to_string()))
}

/// Workers that are this test binary, and caches in `cache`.
pub fn settings(cache: &Path) -> Settings {
    let exe = std::env::current_exe().expect("test binary path");
    Settings {
        workers: Arc::new(move |_placement| {
            let exe = exe.clone();
            Workers::new(Box::new(move |_backend: &str| Ok(WorkerCommand::new(&exe).env(WORKER_ENV, "opencl"))), PoolOptions::default())
        }),
        placement: Default::default(),
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
