//! The timing method (`peak_backend::timing`) against a fake device with a clock: work is
//! queued, the device runs it in order once the host has queued it, and events read the
//! device clock. So what falls inside a timed interval can be asserted exactly.
// Helpers outside #[test] functions unwrap too; clippy's allow-unwrap-in-tests does not reach them here (rust-clippy#13981).
#![allow(clippy::unwrap_used)]

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use peak_backend::timing::{Spread, flush_bytes, time_runs};
use peak_backend::{Backend, BackendError, BufferId, CompileRequest, DeviceInfo, EventId, Launch, Module, RunOptions};

/// Milliseconds of device time per byte filled, and per copy (the "kernel").
const FILL_MS_PER_MIB: f64 = 0.1;
const KERNEL_MS: f64 = 0.05;

#[derive(Default)]
struct Clock {
    /// The host's time: every call costs `host_ms`.
    host: f64,
    /// When the device finishes what was queued so far.
    device: f64,
    events: Vec<f64>,
    allocs: Vec<usize>,
    frees: usize,
    /// Fills of each size, in order.
    fills: Vec<usize>,
    log: Vec<&'static str>,
}

struct Fake {
    info: DeviceInfo,
    cache: Option<u64>,
    host_ms: f64,
    clock: Mutex<Clock>,
    next: AtomicU64,
}

impl Fake {
    fn new(cache: Option<u64>, host_ms: f64) -> Fake {
        let info = DeviceInfo {
            backend: "fake".into(),
            name: "fake".into(),
            driver: String::new(),
            arch: String::new(),
            compute_units: 1,
            max_threads_per_block: 1024,
            max_shared_bytes: 48 << 10,
            warp_size: 32,
            global_memory_bytes: 1 << 34,
        };
        Fake { info, cache, host_ms, clock: Mutex::new(Clock::default()), next: AtomicU64::new(1) }
    }

    /// Queue `ms` of device work: it starts once the host has queued it and the device is
    /// free.
    fn enqueue(&self, what: &'static str, ms: f64) {
        let mut c = self.clock.lock().unwrap();
        c.host += self.host_ms;
        c.device = c.device.max(c.host) + ms;
        c.log.push(what);
    }

    fn kernel(&self) -> Result<(), BackendError> {
        self.enqueue("run", KERNEL_MS);
        Ok(())
    }
}

impl Backend for Fake {
    fn device(&self) -> &DeviceInfo {
        &self.info
    }
    fn compile(&self, _request: &CompileRequest) -> Result<Module, BackendError> {
        unreachable!("not compiled")
    }
    fn alloc(&self, bytes: usize) -> Result<BufferId, BackendError> {
        self.clock.lock().unwrap().allocs.push(bytes);
        Ok(BufferId(self.next.fetch_add(1, Ordering::Relaxed)))
    }
    fn free(&self, _buffer: BufferId) {
        self.clock.lock().unwrap().frees += 1;
    }
    fn write(&self, _buffer: BufferId, _data: &[u8]) -> Result<(), BackendError> {
        Ok(())
    }
    fn read(&self, _buffer: BufferId, _out: &mut [u8]) -> Result<(), BackendError> {
        Ok(())
    }
    fn copy(&self, _src: BufferId, _dst: BufferId, _bytes: usize) -> Result<(), BackendError> {
        self.kernel()
    }
    fn fill(&self, _buffer: BufferId, _pattern: &[u8], bytes: usize) -> Result<(), BackendError> {
        self.clock.lock().unwrap().fills.push(bytes);
        self.enqueue("flush", bytes as f64 / (1 << 20) as f64 * FILL_MS_PER_MIB);
        Ok(())
    }
    fn launch(&self, _module: &Module, _launch: &Launch) -> Result<(), BackendError> {
        self.kernel()
    }
    fn record_event(&self) -> Result<EventId, BackendError> {
        let mut c = self.clock.lock().unwrap();
        c.host += self.host_ms;
        // An event completes when everything queued before it has, and not before the
        // host queued it.
        let at = c.device.max(c.host);
        c.device = at;
        c.events.push(at);
        c.log.push("event");
        Ok(EventId(c.events.len() as u64 - 1))
    }
    fn elapsed_ms(&self, start: EventId, end: EventId) -> Result<f64, BackendError> {
        let mut c = self.clock.lock().unwrap();
        c.host = c.host.max(c.events[end.0 as usize]);
        Ok(c.events[end.0 as usize] - c.events[start.0 as usize])
    }
    fn synchronize(&self) -> Result<(), BackendError> {
        let mut c = self.clock.lock().unwrap();
        c.host = c.host.max(c.device);
        Ok(())
    }
    fn cache_bytes(&self) -> Option<u64> {
        self.cache
    }
}

fn options(warmup: usize, repetitions: usize) -> RunOptions {
    RunOptions { warmup, repetitions, ..RunOptions::default() }
}

const CACHE: u64 = 50 << 20;

#[test]
fn the_flush_is_outside_the_timed_interval() {
    let fake = Fake::new(Some(CACHE), 0.0);
    let timed = time_runs(&fake, &options(2, 5), 1, |_| fake.kernel()).unwrap();
    // A 100 MiB flush takes 10 ms on this device; the kernel 0.05 ms. Only the kernel is timed.
    assert_eq!(timed.times_ms.len(), 5);
    for t in &timed.times_ms {
        assert!((t - KERNEL_MS).abs() < 1e-9, "timed {t} ms, the kernel takes {KERNEL_MS}: the flush was counted");
    }
    assert_eq!(timed.flushed_bytes, Some(flush_bytes(CACHE)));
    // Every event pair holds one run and nothing else; each run is preceded by a flush.
    let log = fake.clock.lock().unwrap().log.join(" ");
    assert_eq!(log, ["flush run"; 2].into_iter().chain(["flush event run event"; 5]).collect::<Vec<_>>().join(" "));
}

#[test]
fn the_flush_buffer_is_allocated_once_per_call_and_freed() {
    let fake = Fake::new(Some(CACHE), 0.0);
    time_runs(&fake, &options(3, 20), 2, |_| fake.kernel()).unwrap();
    let c = fake.clock.lock().unwrap();
    assert_eq!(c.allocs, vec![flush_bytes(CACHE)], "one flush buffer for the whole call");
    assert_eq!(c.frees, 1);
    assert_eq!(c.fills.len(), 23, "one flush before every run, warm-up included");
    assert!(flush_bytes(CACHE) as u64 >= 2 * CACHE);
}

#[test]
fn runs_are_queued_back_to_back_so_host_latency_is_not_timed() {
    // Waiting for each run before queuing the next leaves the device idle at every start
    // event, so the next launch's host latency (0.01 ms a call here) would be timed too.
    let fake = Fake::new(None, 0.01);
    let timed = time_runs(&fake, &options(1, 10), 1, |_| fake.kernel()).unwrap();
    for t in &timed.times_ms {
        assert!((t - KERNEL_MS).abs() < 1e-9, "timed {t} ms for a {KERNEL_MS} ms kernel");
    }
}

#[test]
fn behind_the_flush_even_a_slow_host_is_not_timed() {
    // The host takes 0.1 ms per call, twice the kernel; the run is queued while the
    // device flushes, so it starts the moment the start event completes.
    let fake = Fake::new(Some(CACHE), 0.1);
    let timed = time_runs(&fake, &options(1, 10), 1, |_| fake.kernel()).unwrap();
    for t in &timed.times_ms {
        assert!((t - KERNEL_MS).abs() < 1e-9, "timed {t} ms for a {KERNEL_MS} ms kernel");
    }
}

#[test]
fn no_flush_where_the_backend_knows_no_cache_or_none_is_asked() {
    let fake = Fake::new(None, 0.0);
    let timed = time_runs(&fake, &options(1, 4), 2, |_| fake.kernel()).unwrap();
    assert_eq!((timed.times_ms.len(), timed.flushed_bytes), (4, None));
    assert!(fake.clock.lock().unwrap().fills.is_empty());

    let fake = Fake::new(Some(CACHE), 0.0);
    let timed = time_runs(&fake, &RunOptions { flush_cache: false, ..options(1, 4) }, 1, |_| fake.kernel()).unwrap();
    assert_eq!(timed.flushed_bytes, None);
    assert!(fake.clock.lock().unwrap().allocs.is_empty());
}

#[test]
fn input_sets_rotate_and_a_slow_first_run_is_the_only_one() {
    let fake = Fake::new(None, 0.0);
    let mut sets = Vec::new();
    time_runs(&fake, &options(2, 5), 3, |set| {
        sets.push(set);
        fake.kernel()
    })
    .unwrap();
    assert_eq!(sets, [0, 1, 0, 1, 2, 0, 1]);

    let cut = RunOptions { cutoff_ms: Some(KERNEL_MS / 2.0), ..options(1, 7) };
    assert_eq!(time_runs(&fake, &cut, 1, |_| fake.kernel()).unwrap().times_ms.len(), 1);
    let kept = RunOptions { cutoff_ms: Some(KERNEL_MS * 2.0), ..options(1, 7) };
    assert_eq!(time_runs(&fake, &kept, 1, |_| fake.kernel()).unwrap().times_ms.len(), 7);
}

#[test]
fn a_failed_run_is_an_error_and_no_repetitions_time_nothing() {
    let fake = Fake::new(Some(CACHE), 0.0);
    let mut n = 0;
    let failed = time_runs(&fake, &options(0, 5), 1, |_| {
        n += 1;
        if n == 3 { Err(BackendError::Fault("boom".into())) } else { fake.kernel() }
    });
    assert!(matches!(failed, Err(BackendError::Fault(_))));
    assert_eq!(fake.clock.lock().unwrap().frees, 1, "the flush buffer is freed on the error path too");
    assert!(time_runs(&fake, &options(3, 0), 1, |_| fake.kernel()).unwrap().times_ms.is_empty());
}

#[test]
fn spread_is_ordered_and_overlap_means_within_the_noise() {
    let s = Spread::of(&[5.0, 1.0, 3.0, 2.0, 4.0]).unwrap();
    assert_eq!((s.count, s.min_ms, s.q1_ms, s.median_ms, s.q3_ms, s.max_ms), (5, 1.0, 2.0, 3.0, 4.0, 5.0));
    let even = Spread::of(&[1.0, 2.0, 3.0, 4.0]).unwrap();
    assert_eq!((even.q1_ms, even.median_ms, even.q3_ms), (1.75, 2.5, 3.25));
    assert_eq!(even.iqr_ms(), 1.5);
    assert!(Spread::of(&[]).is_none());
    let near = Spread::of(&[3.5, 4.5, 5.5]).unwrap();
    let far = Spread::of(&[10.0, 11.0, 12.0]).unwrap();
    assert!(s.overlaps(&near) && near.overlaps(&s));
    assert!(!s.overlaps(&far) && !far.overlaps(&s));
}
