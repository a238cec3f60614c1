//! `peak worker --backend NAME` (hidden): the crash-isolated worker process.
//!
//! Validation and tuning never run a kernel in the `peak` process itself; they start this
//! command and talk line-delimited JSON with it (see `peak_backend::worker`). It is not
//! meant to be typed by people, hence hidden from `--help`. With `--compile-only` it
//! serves the compile checks of deferred applies, with no device needed for CUDA and HIP.

use anyhow::{Result, anyhow};
use peak_spec::Language;

use crate::backends;
use crate::cli::WorkerArgs;
use crate::usage;

pub fn run(args: WorkerArgs) -> Result<()> {
    let language: Language = args.backend.parse().map_err(|e: String| usage(anyhow!(e)))?;
    let opened = if args.compile_only { backends::open_compile_only(language, args.arch.as_deref()) } else { backends::open(language) };
    match opened {
        Ok(backend) => peak_backend::worker::serve(backend.as_ref())?,
        // The parent reads the reason from the protocol and shows it with its hint.
        Err(e) => peak_backend::worker::refuse(&e.to_string())?,
    }
    Ok(())
}
