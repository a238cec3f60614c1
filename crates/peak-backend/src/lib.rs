//! What every backend shares: the [`Backend`] trait, the sandboxed launch-script runtime
//! that turns a context's host region into a [`plan::LaunchPlan`], the [`runner`] that
//! runs one execution parameter end to end, and the backend test suite every backend
//! crate instantiates with [`backend_test_suite!`].

pub mod backend;
pub mod error;
#[cfg(feature = "test-harness")]
pub mod harness;
mod measurement;
pub mod plan;
pub mod runner;
pub mod script;
pub mod testsuite;
pub mod timing;
pub mod worker;
pub mod yardstick;

pub use backend::{Backend, BufferId, BufferLookup, CompileRequest, DeviceInfo, EventId, KernelArg, KernelResources, Launch, Module, OpPhase, ScriptFunction};
pub use error::BackendError;
pub use runner::{RunError, RunOptions, RunResult, run, run_compiled};
pub use timing::{Spread, Timed, time_runs};
