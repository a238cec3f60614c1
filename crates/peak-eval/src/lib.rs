//! Validators and performance evaluators.
//!
//! - [`validate`]: is a candidate right? Sampled execution parameters, fresh inputs per
//!   sample, outputs compared with references recorded from a reference context
//!   ([`reference`]), verdicts as data ([`verdict`]); [`sanitizer`] adds NVIDIA
//!   compute-sanitizer. The [`validate::Validator`] trait is the extension point.
//! - [`tune`]: how fast can it go? Strategies ([`strategy`]: exhaustive, random and an
//!   ensemble autotuner) over the constrained space ([`search`]), measured in crash-isolated
//!   workers ([`workers`], `peak_backend::worker`), remembered in a durable results cache
//!   ([`cache`]) so a killed run resumes; [`simulation`] runs strategies on a recorded cache
//!   with no device; [`profile`] attaches Nsight Compute metrics.
//! - [`compare`]: two contexts timed in one run on the same inputs, interleaved.
//! - [`yardstick`]: what every checkpoint is measured against (cuBLASLt for a GEMM, a copy of
//!   the bytes moved for other kernels), timed in a worker as the kernel is.
//!
//! Nothing here names a backend: kernels run in worker processes started from a command
//! line the caller provides (`peak worker --backend NAME` in the product).

pub mod cache;
pub mod compare;
pub mod error;
pub mod hash;
pub mod model;
pub mod profile;
pub mod reference;
pub mod sanitizer;
pub mod search;
pub mod session;
pub mod simulation;
pub mod strategy;
pub mod tune;
pub mod validate;
pub mod verdict;
pub mod workers;
pub mod yardstick;

pub use cache::{CacheIdentity, Outcome, ResultsCache};
pub use error::EvalError;
pub use reference::ReferenceStore;
pub use search::SearchSpace;
pub use session::{TuneReport, TuneSetup, default_cache_dir, tune_context, tuning_run_options};
pub use strategy::StrategyKind;
pub use tune::{TuneOptions, TuneReporter, TuneRun, tune};
pub use validate::{OutputValidator, ValidationReport, Validator, validate};
pub use verdict::Verdict;
pub use workers::Workers;
pub use yardstick::{Baseline, time_yardstick};
