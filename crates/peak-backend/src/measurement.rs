//! The words of a timed run, which the `Backend` trait speaks (`vendor_call`) and the
//! runner, `timing.rs` and `yardstick.rs` share, so none of them depends on another for
//! them: how to run ([`RunOptions`]), what one timing gave ([`Timed`]) and a vendor
//! library's call, timed ([`VendorRun`]). Each is re-exported where it is used:
//! `runner::RunOptions`, `timing::Timed`, `yardstick::VendorRun`.

use serde::{Deserialize, Serialize};

/// How to run: the defaults suit a quick `peak run`; the tuner asks for more.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunOptions {
    pub warmup: usize,
    /// Timed repetitions; 0 runs once for outputs only.
    pub repetitions: usize,
    /// Copies of the arrays to rotate between timed runs, so caches do not flatter.
    pub input_sets: usize,
    /// Evict the device's cache before each run, where the backend knows its size
    /// (`timing.rs`); on by default.
    pub flush_cache: bool,
    /// Read the input arrays back and report any that changed.
    pub check_inputs: bool,
    /// Salt for random array contents: each value gives fresh inputs.
    pub data_seed: u64,
    /// Stop timing after a repetition slower than this (the tuner passes a multiple of
    /// the best time so far, so hopeless variants cost one timed run, not twenty).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cutoff_ms: Option<f64>,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions { warmup: 3, repetitions: 20, input_sets: 1, flush_cache: true, check_inputs: false, data_seed: 0, cutoff_ms: None }
    }
}

/// The times of one call of `timing::time_runs` and how the cache was handled.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Timed {
    pub times_ms: Vec<f64>,
    /// Bytes written before every run to evict the cache; `None`: not flushed.
    pub flushed_bytes: Option<usize>,
}

/// A vendor library's call timed on the device (`Backend::vendor_call`).
#[derive(Debug, Clone)]
pub struct VendorRun {
    /// The library, as a yardstick kind: `cublaslt`.
    pub library: String,
    /// What was called, for people: routine, layout, epilogue, types, algorithm.
    pub call: String,
    pub timed: Timed,
}
