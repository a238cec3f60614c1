//! The one timing method every time in peak comes from: `peak run`, `tune` (and so every
//! checkpoint), `baseline` on both sides, `compare`, the copy yardstick and the bench
//! programs all call [`time_runs`].
//!
//! 1. **Warm-up**: `warmup` untimed runs, queued like the timed ones.
//! 2. **Cache**: before every run (warm-up included) a buffer of twice the device's
//!    last-level cache is written ([`Flusher`]), *outside* the timed interval: the fill is
//!    queued before the start event, so the device is busy with it while the host queues
//!    the run, and no host launch latency falls between the events. The buffer is
//!    allocated once per call. Where the backend does not know its cache
//!    ([`Backend::cache_bytes`] is `None`: CPU devices, Vulkan) nothing is flushed and the
//!    caller's input sets rotate instead.
//! 3. **Device events** around each run alone (CUDA events, OpenCL profiling markers,
//!    Vulkan timestamps). The runs are queued back to back and their times read after
//!    the last one (in chunks), so the host never waits between two runs: waiting made the
//!    device idle at every start event, which then counted the next launch's host latency
//!    (tens of percent of a 20 µs kernel, more when tuning compiles on every core).
//! 4. **Median, with its spread** ([`Spread`]: count, min, quartiles, max), kept beside
//!    every time peak stores or prints. Two times whose interquartile ranges overlap
//!    differ by less than the noise of the measurement ([`Spread::overlaps`]).

use crate::backend::{Backend, BufferId, EventId};
use crate::error::BackendError;
use crate::measurement::RunOptions;
pub use crate::measurement::Timed;

/// Timed runs whose times are read at once, at most: Vulkan's query pool holds 4096
/// timestamps, two per run.
const READ_EVERY: usize = 256;

/// The smallest and largest flush: a device that reports a tiny cache still gets its
/// caches and TLBs stirred; one that reports a huge one (a CPU's) is not asked to write
/// gigabytes before every run.
const MIN_FLUSH_BYTES: u64 = 16 << 20;
const MAX_FLUSH_BYTES: u64 = 1 << 30;

pub use peak_record::Spread;

/// The bytes that evict a cache of `cache_bytes`: twice it, within sane bounds.
pub fn flush_bytes(cache_bytes: u64) -> usize {
    let bytes = cache_bytes.saturating_mul(2).clamp(MIN_FLUSH_BYTES, MAX_FLUSH_BYTES);
    // Whole 4-byte words: device fills want them on every backend.
    bytes.next_multiple_of(4) as usize
}

/// A device buffer written before every run to evict the cache; allocated once, freed when
/// dropped.
pub struct Flusher<'a> {
    backend: &'a dyn Backend,
    buffer: BufferId,
    bytes: usize,
    round: std::cell::Cell<u32>,
}

impl<'a> Flusher<'a> {
    /// `None` when `options` asks for no flush or the backend does not know its cache.
    pub fn new(backend: &'a dyn Backend, options: &RunOptions) -> Result<Option<Flusher<'a>>, BackendError> {
        let Some(cache) = backend.cache_bytes().filter(|_| options.flush_cache) else { return Ok(None) };
        let bytes = flush_bytes(cache);
        let buffer = backend.alloc(bytes)?;
        Ok(Some(Flusher { backend, buffer, bytes, round: std::cell::Cell::new(0) }))
    }

    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Queue the write that evicts the cache (a new value each time).
    pub fn flush(&self) -> Result<(), BackendError> {
        let round = self.round.get().wrapping_add(1);
        self.round.set(round);
        self.backend.fill(self.buffer, &round.to_le_bytes(), self.bytes)
    }
}

impl Drop for Flusher<'_> {
    fn drop(&mut self) {
        // The last fill may still be running.
        let _ = self.backend.synchronize();
        self.backend.free(self.buffer);
    }
}

fn flush(flusher: &Option<Flusher>) -> Result<(), BackendError> {
    flusher.as_ref().map_or(Ok(()), Flusher::flush)
}

/// Time `run(input set)` as the module doc says: `options.warmup` untimed runs, then
/// `options.repetitions` timed ones (none when 0), each after a cache flush and alone
/// between two device events; `sets` input sets rotate. With `options.cutoff_ms`, the
/// first run is read at once and, slower than the cut-off, is the only one.
pub fn time_runs<E: From<BackendError>>(
    backend: &dyn Backend,
    options: &RunOptions,
    sets: usize,
    mut run: impl FnMut(usize) -> Result<(), E>,
) -> Result<Timed, E> {
    if options.repetitions == 0 {
        return Ok(Timed::default());
    }
    let sets = sets.max(1);
    let flusher = Flusher::new(backend, options)?;
    for w in 0..options.warmup {
        flush(&flusher)?;
        run(w % sets)?;
    }
    let mut times_ms = Vec::with_capacity(options.repetitions);
    let mut pending = Vec::new();
    for rep in 0..options.repetitions {
        let timed = timed_run(backend, &flusher, || run(rep % sets));
        let pair = match timed {
            Ok(pair) => pair,
            Err(e) => {
                discard(backend, pending);
                return Err(e);
            }
        };
        pending.push(pair);
        let first_judged = rep == 0 && options.cutoff_ms.is_some();
        if first_judged || pending.len() >= READ_EVERY {
            read(backend, &mut pending, &mut times_ms)?;
            if first_judged && options.cutoff_ms.is_some_and(|cutoff| times_ms[0] > cutoff) {
                break;
            }
        }
    }
    read(backend, &mut pending, &mut times_ms)?;
    backend.synchronize()?;
    Ok(Timed { times_ms, flushed_bytes: flusher.as_ref().map(Flusher::bytes) })
}

/// One flushed run between two events.
fn timed_run<E: From<BackendError>>(backend: &dyn Backend, flusher: &Option<Flusher>, run: impl FnOnce() -> Result<(), E>) -> Result<(EventId, EventId), E> {
    flush(flusher)?;
    let start = backend.record_event()?;
    let ran = run().and_then(|()| Ok(backend.record_event()?));
    match ran {
        Ok(end) => Ok((start, end)),
        Err(e) => {
            // Release the start event (an unknown end makes every backend free it).
            let _ = backend.elapsed_ms(start, start);
            Err(e)
        }
    }
}

/// Read the queued runs' times, in order.
fn read(backend: &dyn Backend, pending: &mut Vec<(EventId, EventId)>, times_ms: &mut Vec<f64>) -> Result<(), BackendError> {
    let mut pairs = std::mem::take(pending).into_iter();
    for (start, end) in pairs.by_ref() {
        match backend.elapsed_ms(start, end) {
            Ok(ms) => times_ms.push(ms),
            Err(e) => {
                discard(backend, pairs.collect());
                return Err(e);
            }
        }
    }
    Ok(())
}

/// Free events whose times are no longer wanted.
fn discard(backend: &dyn Backend, pending: Vec<(EventId, EventId)>) {
    for (start, end) in pending {
        let _ = backend.elapsed_ms(start, end);
    }
}
