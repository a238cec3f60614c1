//! Kernel contexts, with no GPU in sight.
//!
//! A kernel context is everything needed to run, check and tune one kernel: a manifest
//! (`peak.toml`) declaring inputs, arrays and tuning parameters, and a source file split
//! into three regions (macros, device code, host launch script). This crate reads and
//! writes contexts, walks their execution-parameter space, and generates and compares
//! array contents. Backends, validators and the workflow all build on it.

pub mod context;
pub mod data;
pub mod dtype;
pub mod error;
pub mod expr;
pub mod fp8;
pub mod import;
pub mod init;
pub mod json_f64;
pub mod manifest;
pub mod pattern;
pub mod regions;
pub mod rng;
pub mod shapes;
pub mod space;

pub use context::{Context, MANIFEST_FILE};
pub use data::{Comparison, HostArray, compare, compare_bytes, default_tolerance};
pub use error::SpecError;
pub use init::{Fill, RowOutliers, Values};
pub use manifest::{Activation, ArraySpec, DType, Domain, Init, Language, Layout, Manifest, MatmulShape};
pub use pattern::Pattern;
pub use regions::{Region, Regions};
pub use space::{ExecParams, Space};
