//! [`HlslBackend`]: opening the Vulkan device and the [`Backend`] calls over it.

use std::any::Any;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use ash::vk;
use peak_backend::{Backend, BackendError, BufferId, CompileRequest, DeviceInfo, EventId, KernelArg, KernelResources, Launch, Module};

use crate::compiler::{Compiler, CompilerKind, entry_points};
use crate::gpu::{DeviceBuffer, Gpu, Placement, TIMESTAMP_QUERIES, Usage, check};
use crate::pipeline::{BINDING_RULE, EntryPipeline, pack_push};
use crate::stream::{State, stream_barrier};
use crate::{TIMEOUT_ENV, reflect};

const DEFAULT_TIMEOUT_S: u64 = 300;

/// The compiled entry points of one source.
struct HlslModule {
    entries: Vec<Arc<EntryPipeline>>,
}

/// How to open the backend.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HlslOptions {
    pub compiler: CompilerKind,
    /// Route every host read and write through a staging buffer, even where device
    /// memory is host-visible. A discrete GPU always works this way; on lavapipe this lets
    /// the tests exercise that path.
    pub always_stage: bool,
}

impl HlslOptions {
    /// The compiler `PEAK_HLSL_COMPILER` names (glslang when unset); staging only where needed.
    pub fn from_env() -> Result<HlslOptions, BackendError> {
        Ok(HlslOptions { compiler: CompilerKind::from_env()?, always_stage: false })
    }
}

pub struct HlslBackend {
    info: DeviceInfo,
    buffer_usage: Usage,
    compiler: Compiler,
    gpu: Arc<Gpu>,
    state: Mutex<State>,
    next_id: AtomicU64,
    timeout: Duration,
}

impl HlslBackend {
    /// Open the default Vulkan device with the compiler `PEAK_HLSL_COMPILER` names
    /// (glslang when unset).
    pub fn new() -> Result<HlslBackend, BackendError> {
        Self::with_options(&HlslOptions::from_env()?)
    }

    pub fn with_options(options: &HlslOptions) -> Result<HlslBackend, BackendError> {
        let compiler = Compiler::probe(options.compiler)?;
        let gpu = Gpu::open()?;
        let timeout_s = std::env::var(TIMEOUT_ENV).ok().and_then(|v| v.trim().parse().ok()).unwrap_or(DEFAULT_TIMEOUT_S);
        let d = &gpu.device;
        // SAFETY: plain create infos; the objects are destroyed in Drop.
        let (command_pool, query_pool) = unsafe {
            let pool_info = vk::CommandPoolCreateInfo::default().queue_family_index(gpu.queue_family).flags(vk::CommandPoolCreateFlags::RESET_COMMAND_BUFFER);
            let command_pool = d.create_command_pool(&pool_info, None).map_err(check("creating a command pool"))?;
            let query_info = vk::QueryPoolCreateInfo::default().query_type(vk::QueryType::TIMESTAMP).query_count(TIMESTAMP_QUERIES);
            match d.create_query_pool(&query_info, None) {
                Ok(q) => (command_pool, q),
                Err(e) => {
                    d.destroy_command_pool(command_pool, None);
                    return Err(check("creating a timestamp query pool")(e));
                }
            }
        };
        let info = DeviceInfo {
            backend: "hlsl".into(),
            name: gpu.name(),
            driver: format!("{} / {}", gpu.driver, compiler.version),
            arch: compiler.target().into(),
            compute_units: gpu.compute_units,
            max_threads_per_block: gpu.limits.max_compute_work_group_invocations,
            max_shared_bytes: gpu.limits.max_compute_shared_memory_size,
            warp_size: gpu.subgroup_size,
            global_memory_bytes: gpu.device_memory_bytes(),
        };
        let state = State {
            command_pool,
            query_pool,
            buffers: HashMap::new(),
            recording: None,
            in_flight: VecDeque::new(),
            spare_cmds: Vec::new(),
            spare_fences: Vec::new(),
            spare_pools: Vec::new(),
            free_queries: (0..TIMESTAMP_QUERIES).rev().collect(),
            events: HashMap::new(),
            staging: None,
            lost: None,
        };
        let buffer_usage = if options.always_stage { Usage::DeviceUnmapped } else { Usage::Device };
        Ok(HlslBackend { info, buffer_usage, compiler, gpu, state: Mutex::new(state), next_id: AtomicU64::new(1), timeout: Duration::from_secs(timeout_s) })
    }

    /// The compiler this backend runs.
    pub fn compiler(&self) -> &Compiler {
        &self.compiler
    }

    /// The Vulkan features enabled on the device, by their Vulkan names.
    pub fn enabled_features(&self) -> Vec<&'static str> {
        self.gpu.features.enabled.iter().map(|f| f.vulkan_name()).collect()
    }

    /// Whether f16 kernels can run here (shaderFloat16 and storageBuffer16BitAccess).
    pub fn supports_f16(&self) -> bool {
        let f = &self.gpu.features.enabled;
        f.contains(&reflect::Feature::Float16) && f.contains(&reflect::Feature::StorageBuffer16Bit)
    }

    fn id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    /// The state, unless the device was lost.
    fn state(&self) -> Result<MutexGuard<'_, State>, BackendError> {
        let state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        match &state.lost {
            Some(why) => Err(BackendError::Fault(format!("the Vulkan device stopped answering earlier: {why}"))),
            None => Ok(state),
        }
    }
}

impl Drop for HlslBackend {
    fn drop(&mut self) {
        let state = self.state.get_mut().unwrap_or_else(|p| p.into_inner());
        if state.lost.is_none() {
            let _ = state.finish(&self.gpu, self.timeout);
        }
        let d = &self.gpu.device;
        // SAFETY: the queue is idle (or lost, in which case the device is past saving);
        // the objects below belong to this device and are not used after this.
        unsafe {
            let _ = d.queue_wait_idle(self.gpu.queue);
            for batch in state.recording.take().into_iter().chain(state.in_flight.drain(..)) {
                d.destroy_fence(batch.fence, None);
                for p in batch.pools {
                    d.destroy_descriptor_pool(p, None);
                }
            }
            for f in state.spare_fences.drain(..) {
                d.destroy_fence(f, None);
            }
            for p in state.spare_pools.drain(..) {
                d.destroy_descriptor_pool(p, None);
            }
            d.destroy_command_pool(state.command_pool, None);
            d.destroy_query_pool(state.query_pool, None);
        }
        state.buffers.clear();
        state.staging = None;
    }
}

/// The cache a Vulkan GPU is assumed to have: Vulkan reports none, and this is above the
/// last-level cache of current GPUs (the H200's L2 is 60 MB), so twice it evicts theirs.
const ASSUMED_GPU_CACHE_BYTES: u64 = 128 << 20;

impl Backend for HlslBackend {
    fn device(&self) -> &DeviceInfo {
        &self.info
    }

    /// A GPU's assumed cache ([`ASSUMED_GPU_CACHE_BYTES`]); none on a CPU device (lavapipe).
    fn cache_bytes(&self) -> Option<u64> {
        (self.gpu.properties.device_type != vk::PhysicalDeviceType::CPU).then_some(ASSUMED_GPU_CACHE_BYTES)
    }

    fn compile(&self, request: &CompileRequest) -> Result<Module, BackendError> {
        let mut names = entry_points(&request.source);
        if names.is_empty() {
            // No [numthreads] found (or hidden behind a macro): let the compiler say
            // what is wrong with `main`.
            names.push("main".into());
        }
        let mut entries = Vec::with_capacity(names.len());
        let mut log = String::new();
        for name in &names {
            let compiled = self.compiler.compile(request, name)?;
            if !compiled.log.is_empty() {
                log.push_str(&compiled.log);
                log.push('\n');
            }
            entries.push(Arc::new(EntryPipeline::new(&self.gpu, &compiled)?));
        }
        let kernels = entries
            .iter()
            .map(|e| KernelResources {
                name: e.name().to_string(),
                shared_bytes: e.reflection.workgroup_bytes.and_then(|b| u32::try_from(b).ok()),
                max_threads_per_block: e.reflection.local_size.map(|s| s.iter().product()),
                ..Default::default()
            })
            .collect();
        Ok(Module { handle: Arc::new(HlslModule { entries }), log, kernels })
    }

    fn alloc(&self, bytes: usize) -> Result<BufferId, BackendError> {
        let buffer = DeviceBuffer::new(&self.gpu, bytes, self.buffer_usage)?;
        let id = self.id();
        self.state()?.buffers.insert(id, Arc::new(buffer));
        Ok(BufferId(id))
    }

    fn free(&self, buffer: BufferId) {
        // A batch that still uses the buffer holds its own reference; the buffer is
        // destroyed when that batch completes.
        self.state.lock().unwrap_or_else(|p| p.into_inner()).buffers.remove(&buffer.0);
    }

    fn write(&self, buffer: BufferId, data: &[u8]) -> Result<(), BackendError> {
        let mut st = self.state()?;
        let target = st.buffer(buffer)?;
        if data.len() > target.len {
            return Err(BackendError::Internal(format!("writing {} bytes into a buffer of {}", data.len(), target.len)));
        }
        if data.is_empty() {
            return Ok(());
        }
        st.finish(&self.gpu, self.timeout)?;
        match target.placement() {
            // SAFETY: the queue is idle, so no device work touches the buffer.
            Placement::Mapped => unsafe { target.write_mapped(data) },
            Placement::DeviceOnly => {
                let staging = st.staging(&self.gpu, data.len())?;
                // SAFETY: the queue is idle; the copy below is the staging buffer's only use.
                unsafe { staging.write_mapped(data) };
                let batch = st.batch(&self.gpu)?;
                stream_barrier(&self.gpu.device, batch.cmd);
                let region = vk::BufferCopy { src_offset: 0, dst_offset: 0, size: data.len() as u64 };
                // SAFETY: both buffers are alive (kept by the batch) and large enough.
                unsafe { self.gpu.device.cmd_copy_buffer(batch.cmd, staging.buffer, target.buffer, &[region]) };
                batch.keep.push(staging);
                batch.keep.push(target);
                st.finish(&self.gpu, self.timeout)?;
            }
        }
        Ok(())
    }

    fn read(&self, buffer: BufferId, out: &mut [u8]) -> Result<(), BackendError> {
        let mut st = self.state()?;
        let source = st.buffer(buffer)?;
        if out.len() > source.len {
            return Err(BackendError::Internal(format!("reading {} bytes from a buffer of {}", out.len(), source.len)));
        }
        if out.is_empty() {
            return Ok(());
        }
        match source.placement() {
            Placement::Mapped => {
                st.finish(&self.gpu, self.timeout)?;
                // SAFETY: the queue is idle and its last batch made writes host-visible.
                unsafe { source.read_mapped(out) };
            }
            Placement::DeviceOnly => {
                // Finish first: the staging buffer may still be the source of a pending copy.
                st.finish(&self.gpu, self.timeout)?;
                let staging = st.staging(&self.gpu, out.len())?;
                let batch = st.batch(&self.gpu)?;
                stream_barrier(&self.gpu.device, batch.cmd);
                let region = vk::BufferCopy { src_offset: 0, dst_offset: 0, size: out.len() as u64 };
                // SAFETY: both buffers are alive (kept by the batch) and large enough.
                unsafe { self.gpu.device.cmd_copy_buffer(batch.cmd, source.buffer, staging.buffer, &[region]) };
                batch.keep.push(source);
                batch.keep.push(staging.clone());
                st.finish(&self.gpu, self.timeout)?;
                // SAFETY: the copy completed and the batch ended with a barrier to HOST_READ.
                unsafe { staging.read_mapped(out) };
            }
        }
        Ok(())
    }

    fn copy(&self, src: BufferId, dst: BufferId, bytes: usize) -> Result<(), BackendError> {
        let mut st = self.state()?;
        let (from, to) = (st.buffer(src)?, st.buffer(dst)?);
        if bytes > from.len || bytes > to.len {
            return Err(BackendError::Internal(format!("copying {bytes} bytes between buffers of {} and {}", from.len, to.len)));
        }
        if bytes == 0 {
            return Ok(());
        }
        let batch = st.batch(&self.gpu)?;
        stream_barrier(&self.gpu.device, batch.cmd);
        let region = vk::BufferCopy { src_offset: 0, dst_offset: 0, size: bytes as u64 };
        // SAFETY: both buffers are alive (kept by the batch) and large enough.
        unsafe { self.gpu.device.cmd_copy_buffer(batch.cmd, from.buffer, to.buffer, &[region]) };
        batch.keep.push(from);
        batch.keep.push(to);
        st.recorded(&self.gpu)
    }

    fn fill(&self, buffer: BufferId, pattern: &[u8], bytes: usize) -> Result<(), BackendError> {
        let mut st = self.state()?;
        let target = st.buffer(buffer)?;
        if bytes > target.len {
            return Err(BackendError::Internal(format!("filling {bytes} bytes of a buffer of {}", target.len)));
        }
        if bytes == 0 {
            return Ok(());
        }
        // vkCmdFillBuffer repeats one 32-bit word over a multiple of 4 bytes. A whole
        // buffer of odd length may spill into its padding (capacity rounds up to 4).
        let size = if bytes.is_multiple_of(4) {
            Some(bytes)
        } else if bytes == target.len {
            Some(target.capacity)
        } else {
            None
        };
        let word = match pattern.len() {
            1 | 2 | 4 => Some(pattern.repeat(4 / pattern.len())),
            _ => None,
        };
        let (Some(size), Some(word)) = (size, word) else {
            drop(st);
            let mut data = pattern.repeat(bytes / pattern.len().max(1) + 1);
            data.truncate(bytes);
            return self.write(buffer, &data);
        };
        let batch = st.batch(&self.gpu)?;
        stream_barrier(&self.gpu.device, batch.cmd);
        let value = u32::from_le_bytes(word.as_slice().try_into().expect("4 bytes"));
        // SAFETY: the buffer is alive (kept by the batch) and `size` is within its capacity.
        unsafe { self.gpu.device.cmd_fill_buffer(batch.cmd, target.buffer, 0, size as u64, value) };
        batch.keep.push(target);
        st.recorded(&self.gpu)
    }

    fn launch(&self, module: &Module, launch: &Launch) -> Result<(), BackendError> {
        let module = module.downcast::<HlslModule>()?;
        let fail = |message: String| BackendError::Launch { kernel: launch.kernel.clone(), message };
        let entry = module.entries.iter().find(|e| e.name() == launch.kernel).ok_or_else(|| {
            let names = module.entries.iter().map(|e| e.name()).collect::<Vec<_>>().join(", ");
            fail(format!("no entry point of that name; the module has: {names} (launch() names the HLSL entry point, a function marked [numthreads])"))
        })?;
        if !entry.built_on(&self.gpu) {
            return Err(BackendError::Internal("the module was compiled by another HLSL backend instance (another Vulkan device)".into()));
        }
        let r = &entry.reflection;
        if launch.shared_bytes != 0 {
            return Err(fail(format!(
                "asks for {} bytes of dynamic shared memory; HLSL has none: declare `groupshared` arrays sized by tuning defines and pass 0",
                launch.shared_bytes
            )));
        }
        if let Some(size) = r.local_size
            && size != launch.block
        {
            return Err(fail(format!(
                "the launch's block {:?} differs from the shader's [numthreads({}, {}, {})]; the block of an HLSL kernel is fixed at compile time, so pass the same numbers",
                launch.block, size[0], size[1], size[2]
            )));
        }
        for (dim, (g, max)) in launch.grid.iter().zip(self.gpu.limits.max_compute_work_group_count).enumerate() {
            if *g > max {
                return Err(BackendError::InvalidConfig(format!("grid dimension {dim} is {g} workgroups, over the device's {max}")));
            }
        }
        let mut buffer_args = Vec::new();
        let mut scalars = Vec::new();
        for arg in &launch.args {
            match arg {
                KernelArg::Buffer(id) => buffer_args.push(*id),
                KernelArg::Bytes(_) => return Err(BackendError::Unsupported("by-value byte arguments on HLSL".into())),
                scalar => scalars.push(scalar),
            }
        }
        let push = pack_push(r, &scalars).map_err(fail)?;

        let mut st = self.state()?;
        let mut bound = Vec::with_capacity(r.bindings.len());
        for b in &r.bindings {
            let id = buffer_args
                .get(b.binding as usize)
                .ok_or_else(|| fail(format!("`{}` has binding {} but the launch passes {} buffer(s); {BINDING_RULE}", b.name, b.binding, buffer_args.len())))?;
            let buffer = st.buffer(*id)?;
            if buffer.len as u64 > u64::from(self.gpu.limits.max_storage_buffer_range) {
                return Err(BackendError::InvalidConfig(format!(
                    "`{}` is {} bytes, over the device's storage-buffer range of {}",
                    b.name, buffer.len, self.gpu.limits.max_storage_buffer_range
                )));
            }
            bound.push((b.binding, buffer));
        }

        st.batch(&self.gpu)?;
        let set = if bound.is_empty() { None } else { Some(st.descriptor_set(&self.gpu, entry.set_layout())?) };
        let d = &self.gpu.device;
        if let Some(set) = set {
            let infos: Vec<[vk::DescriptorBufferInfo; 1]> =
                bound.iter().map(|(_, b)| [vk::DescriptorBufferInfo { buffer: b.buffer, offset: 0, range: vk::WHOLE_SIZE }]).collect();
            let writes: Vec<vk::WriteDescriptorSet> = bound
                .iter()
                .zip(&infos)
                .map(|((binding, _), info)| {
                    vk::WriteDescriptorSet::default().dst_set(set).dst_binding(*binding).descriptor_type(vk::DescriptorType::STORAGE_BUFFER).buffer_info(info)
                })
                .collect();
            // SAFETY: the set is fresh (not bound by any command yet); the infos outlive the call.
            unsafe { d.update_descriptor_sets(&writes, &[]) };
        }
        let batch = st.recording.as_mut().expect("batch begun above");
        stream_barrier(d, batch.cmd);
        // SAFETY: the command buffer is recording; pipeline, layout, set and buffers are
        // kept alive by the batch until it completes.
        unsafe {
            d.cmd_bind_pipeline(batch.cmd, vk::PipelineBindPoint::COMPUTE, entry.pipeline);
            if let Some(set) = set {
                d.cmd_bind_descriptor_sets(batch.cmd, vk::PipelineBindPoint::COMPUTE, entry.layout, 0, &[set], &[]);
            }
            if !push.is_empty() {
                d.cmd_push_constants(batch.cmd, entry.layout, vk::ShaderStageFlags::COMPUTE, 0, &push);
            }
            d.cmd_dispatch(batch.cmd, launch.grid[0], launch.grid[1], launch.grid[2]);
        }
        batch.keep.push(entry.clone());
        batch.keep.extend(bound.into_iter().map(|(_, b)| b as Arc<dyn Any + Send + Sync>));
        st.recorded(&self.gpu)
    }

    fn record_event(&self) -> Result<EventId, BackendError> {
        let mut st = self.state()?;
        let query = st.free_queries.pop().ok_or_else(|| BackendError::Internal(format!("more than {TIMESTAMP_QUERIES} timing events outstanding")))?;
        let pool = st.query_pool;
        let batch = match st.batch(&self.gpu) {
            Ok(b) => b,
            Err(e) => {
                st.free_queries.push(query);
                return Err(e);
            }
        };
        // SAFETY: the command buffer is recording; the query belongs to the pool. The
        // timestamp is written once every earlier command has completed.
        unsafe {
            self.gpu.device.cmd_reset_query_pool(batch.cmd, pool, query, 1);
            self.gpu.device.cmd_write_timestamp(batch.cmd, vk::PipelineStageFlags::BOTTOM_OF_PIPE, pool, query);
        }
        let id = self.id();
        st.events.insert(id, query);
        st.recorded(&self.gpu)?;
        Ok(EventId(id))
    }

    fn elapsed_ms(&self, start: EventId, end: EventId) -> Result<f64, BackendError> {
        let mut st = self.state()?;
        let (Some(a), Some(b)) = (st.events.remove(&start.0), st.events.remove(&end.0)) else {
            return Err(BackendError::Internal("unknown timing event".into()));
        };
        st.free_queries.extend([a, b]);
        st.finish(&self.gpu, self.timeout)?;
        let mut stamps = [[0u64; 1]; 2];
        for (slot, q) in stamps.iter_mut().zip([a, b]) {
            // SAFETY: the queue is idle, so both timestamps have been written.
            unsafe { self.gpu.device.get_query_pool_results(st.query_pool, q, slot, vk::QueryResultFlags::TYPE_64 | vk::QueryResultFlags::WAIT) }
                .map_err(check("reading a timestamp"))?;
        }
        let ticks = stamps[1][0].wrapping_sub(stamps[0][0]) & self.gpu.timestamp_mask;
        Ok(ticks as f64 * f64::from(self.gpu.limits.timestamp_period) / 1e6)
    }

    fn synchronize(&self) -> Result<(), BackendError> {
        self.state()?.finish(&self.gpu, self.timeout)
    }
}
