//! Device buffers kept between jobs instead of freed.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use crate::backend::{Backend, BufferId, DeviceInfo, Module};
use crate::error::BackendError;

/// The backend as the device thread sees it: freed buffers are kept for the next job
/// instead of going back to the driver. A tuning run allocates the same few sizes for
/// every variant, and allocating and freeing tens of megabytes (which synchronizes the
/// device) costs more than a fast kernel runs. Every buffer the runner takes is filled
/// (inputs written, outputs and scratch poisoned) before a kernel sees it, so a recycled
/// buffer carries nothing over.
pub(super) struct Recycler<'a> {
    inner: &'a dyn Backend,
    state: Mutex<Recycled>,
    /// Bytes kept at most: a quarter of the device's memory.
    limit: usize,
}

#[derive(Default)]
struct Recycled {
    sizes: HashMap<BufferId, usize>,
    /// Free buffers, oldest first.
    free: VecDeque<(usize, BufferId)>,
    kept: usize,
}

impl<'a> Recycler<'a> {
    pub(super) fn new(inner: &'a dyn Backend) -> Recycler<'a> {
        let limit = usize::try_from(inner.device().global_memory_bytes / 4).unwrap_or(usize::MAX).max(64 << 20);
        Recycler { inner, state: Mutex::new(Recycled::default()), limit }
    }
}

impl Drop for Recycler<'_> {
    fn drop(&mut self) {
        let state = self.state.get_mut().unwrap_or_else(|p| p.into_inner());
        for (_, id) in state.free.drain(..) {
            self.inner.free(id);
        }
    }
}

impl Backend for Recycler<'_> {
    fn device(&self) -> &DeviceInfo {
        self.inner.device()
    }
    fn compile(&self, request: &crate::backend::CompileRequest) -> Result<Module, BackendError> {
        self.inner.compile(request)
    }
    fn alloc(&self, bytes: usize) -> Result<BufferId, BackendError> {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(at) = state.free.iter().position(|(size, _)| *size == bytes) {
            let (_, id) = state.free.remove(at).expect("position is in range");
            state.kept -= bytes;
            return Ok(id);
        }
        let id = self.inner.alloc(bytes)?;
        state.sizes.insert(id, bytes);
        Ok(id)
    }
    fn free(&self, buffer: BufferId) {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let Some(&bytes) = state.sizes.get(&buffer) else { return self.inner.free(buffer) };
        state.free.push_back((bytes, buffer));
        state.kept += bytes;
        while state.kept > self.limit {
            let Some((size, old)) = state.free.pop_front() else { break };
            state.kept -= size;
            state.sizes.remove(&old);
            self.inner.free(old);
        }
    }
    fn write(&self, buffer: BufferId, data: &[u8]) -> Result<(), BackendError> {
        self.inner.write(buffer, data)
    }
    fn read(&self, buffer: BufferId, out: &mut [u8]) -> Result<(), BackendError> {
        self.inner.read(buffer, out)
    }
    fn copy(&self, src: BufferId, dst: BufferId, bytes: usize) -> Result<(), BackendError> {
        self.inner.copy(src, dst, bytes)
    }
    fn fill(&self, buffer: BufferId, pattern: &[u8], bytes: usize) -> Result<(), BackendError> {
        self.inner.fill(buffer, pattern, bytes)
    }
    fn launch(&self, module: &Module, launch: &crate::backend::Launch) -> Result<(), BackendError> {
        self.inner.launch(module, launch)
    }
    fn record_event(&self) -> Result<crate::backend::EventId, BackendError> {
        self.inner.record_event()
    }
    fn elapsed_ms(&self, start: crate::backend::EventId, end: crate::backend::EventId) -> Result<f64, BackendError> {
        self.inner.elapsed_ms(start, end)
    }
    fn synchronize(&self) -> Result<(), BackendError> {
        self.inner.synchronize()
    }
    fn script_functions(&self) -> Vec<crate::backend::ScriptFunction> {
        self.inner.script_functions()
    }
    fn run_op(&self, module: &Module, op: &crate::plan::BackendOp, buffers: &crate::backend::BufferLookup) -> Result<(), BackendError> {
        self.inner.run_op(module, op, buffers)
    }
    fn op_argument(
        &self,
        module: &Module,
        op: &crate::plan::BackendOp,
        buffers: &crate::backend::BufferLookup,
    ) -> Result<crate::backend::KernelArg, BackendError> {
        self.inner.op_argument(module, op, buffers)
    }
    fn cache_bytes(&self) -> Option<u64> {
        self.inner.cache_bytes()
    }
}
