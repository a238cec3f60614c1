//! The command stream: commands recorded into batches, each submitted with one fence,
//! and the descriptor pools, fences and timestamp queries they use.

use std::any::Any;
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use ash::vk;
use peak_backend::{BackendError, BufferId};

use crate::gpu::{DeviceBuffer, Gpu, Usage, check};
use crate::{FLUSH_EVERY, TIMEOUT_ENV};

/// Descriptor sets per pool; a batch takes another pool when one runs out.
const SETS_PER_POOL: u32 = 256;
const BUFFERS_PER_POOL: u32 = SETS_PER_POOL * 8;

/// Commands recorded together and submitted with one fence.
pub(crate) struct Batch {
    pub(crate) cmd: vk::CommandBuffer,
    pub(crate) fence: vk::Fence,
    pub(crate) pools: Vec<vk::DescriptorPool>,
    /// Pipelines and buffers the commands use, kept alive until the batch completes.
    pub(crate) keep: Vec<Arc<dyn Any + Send + Sync>>,
    pub(crate) commands: usize,
}

/// Everything launches, copies and timing touch; one thread at a time.
pub(crate) struct State {
    pub(crate) command_pool: vk::CommandPool,
    pub(crate) query_pool: vk::QueryPool,
    pub(crate) buffers: HashMap<u64, Arc<DeviceBuffer>>,
    pub(crate) recording: Option<Batch>,
    pub(crate) in_flight: VecDeque<Batch>,
    pub(crate) spare_cmds: Vec<vk::CommandBuffer>,
    pub(crate) spare_fences: Vec<vk::Fence>,
    pub(crate) spare_pools: Vec<vk::DescriptorPool>,
    pub(crate) free_queries: Vec<u32>,
    pub(crate) events: HashMap<u64, u32>,
    /// Host-visible buffer for reads and writes of device-only memory; grows as needed.
    pub(crate) staging: Option<Arc<DeviceBuffer>>,
    /// Set when the device stopped answering; every later call reports it.
    pub(crate) lost: Option<String>,
}

pub(crate) fn unknown_buffer(id: BufferId) -> BackendError {
    BackendError::Internal(format!("unknown buffer {}", id.0))
}

/// A barrier that orders every earlier shader or transfer access before every later one.
pub(crate) fn stream_barrier(d: &ash::Device, cmd: vk::CommandBuffer) {
    use vk::AccessFlags as A;
    use vk::PipelineStageFlags as S;
    let barrier = vk::MemoryBarrier::default()
        .src_access_mask(A::SHADER_WRITE | A::TRANSFER_WRITE)
        .dst_access_mask(A::SHADER_READ | A::SHADER_WRITE | A::TRANSFER_READ | A::TRANSFER_WRITE);
    // SAFETY: `cmd` is in the recording state (callers get it from `State::batch`).
    unsafe {
        d.cmd_pipeline_barrier(cmd, S::COMPUTE_SHADER | S::TRANSFER, S::COMPUTE_SHADER | S::TRANSFER, vk::DependencyFlags::empty(), &[barrier], &[], &[])
    };
}

impl State {
    /// The batch being recorded, begun if there is none.
    pub(crate) fn batch(&mut self, gpu: &Gpu) -> Result<&mut Batch, BackendError> {
        if self.recording.is_none() {
            let d = &gpu.device;
            // SAFETY: the pool and fences belong to this device; spare command buffers
            // have completed (their fence was waited on), so they may be re-begun.
            let batch = unsafe {
                let cmd = match self.spare_cmds.pop() {
                    Some(c) => c,
                    None => {
                        let info = vk::CommandBufferAllocateInfo::default()
                            .command_pool(self.command_pool)
                            .level(vk::CommandBufferLevel::PRIMARY)
                            .command_buffer_count(1);
                        d.allocate_command_buffers(&info).map_err(check("allocating a command buffer"))?[0]
                    }
                };
                let fence = match self.spare_fences.pop() {
                    Some(f) => f,
                    None => match d.create_fence(&vk::FenceCreateInfo::default(), None) {
                        Ok(f) => f,
                        Err(e) => {
                            self.spare_cmds.push(cmd);
                            return Err(check("creating a fence")(e));
                        }
                    },
                };
                let begin = vk::CommandBufferBeginInfo::default().flags(vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT);
                if let Err(e) = d.begin_command_buffer(cmd, &begin) {
                    self.spare_cmds.push(cmd);
                    self.spare_fences.push(fence);
                    return Err(check("beginning a command buffer")(e));
                }
                Batch { cmd, fence, pools: Vec::new(), keep: Vec::new(), commands: 0 }
            };
            self.recording = Some(batch);
        }
        Ok(self.recording.as_mut().expect("just set"))
    }

    /// A descriptor set of `layout` from the recording batch's pools.
    pub(crate) fn descriptor_set(&mut self, gpu: &Gpu, layout: vk::DescriptorSetLayout) -> Result<vk::DescriptorSet, BackendError> {
        let d = &gpu.device;
        let layouts = [layout];
        let spare = &mut self.spare_pools;
        let batch = self.recording.as_mut().expect("descriptor_set needs a recording batch");
        if let Some(&pool) = batch.pools.last() {
            let info = vk::DescriptorSetAllocateInfo::default().descriptor_pool(pool).set_layouts(&layouts);
            // SAFETY: the pool belongs to this device and is used by this thread only.
            match unsafe { d.allocate_descriptor_sets(&info) } {
                Ok(sets) => return Ok(sets[0]),
                Err(vk::Result::ERROR_OUT_OF_POOL_MEMORY | vk::Result::ERROR_FRAGMENTED_POOL) => {}
                Err(e) => return Err(check("allocating a descriptor set")(e)),
            }
        }
        let pool = match spare.pop() {
            Some(p) => p,
            None => {
                let sizes = [vk::DescriptorPoolSize { ty: vk::DescriptorType::STORAGE_BUFFER, descriptor_count: BUFFERS_PER_POOL }];
                let info = vk::DescriptorPoolCreateInfo::default().max_sets(SETS_PER_POOL).pool_sizes(&sizes);
                // SAFETY: a plain create info.
                unsafe { d.create_descriptor_pool(&info, None) }.map_err(check("creating a descriptor pool"))?
            }
        };
        batch.pools.push(pool);
        let info = vk::DescriptorSetAllocateInfo::default().descriptor_pool(pool).set_layouts(&layouts);
        // SAFETY: as above; a fresh pool has room for any one set of our layouts.
        unsafe { d.allocate_descriptor_sets(&info) }.map(|s| s[0]).map_err(check("allocating a descriptor set"))
    }

    /// Submit the recording batch, if any, without waiting for it.
    pub(crate) fn submit(&mut self, gpu: &Gpu) -> Result<(), BackendError> {
        let Some(batch) = self.recording.take() else { return Ok(()) };
        let d = &gpu.device;
        // Make every device write visible to the host once the fence signals, for reads
        // of mapped memory.
        let to_host = vk::MemoryBarrier::default().src_access_mask(vk::AccessFlags::MEMORY_WRITE).dst_access_mask(vk::AccessFlags::HOST_READ);
        // SAFETY: the command buffer is recording; the queue is used under the state lock.
        let submitted = unsafe {
            d.cmd_pipeline_barrier(
                batch.cmd,
                vk::PipelineStageFlags::ALL_COMMANDS,
                vk::PipelineStageFlags::HOST,
                vk::DependencyFlags::empty(),
                &[to_host],
                &[],
                &[],
            );
            d.end_command_buffer(batch.cmd).and_then(|()| {
                let cmds = [batch.cmd];
                let submit = vk::SubmitInfo::default().command_buffers(&cmds);
                d.queue_submit(gpu.queue, &[submit], batch.fence)
            })
        };
        match submitted {
            Ok(()) => {
                self.in_flight.push_back(batch);
                Ok(())
            }
            Err(e) => {
                // Never submitted: the batch's resources can be reused at once.
                self.recycle(gpu, batch);
                Err(check("submitting commands")(e))
            }
        }
    }

    /// Return a completed (or never submitted) batch's objects to the spares.
    pub(crate) fn recycle(&mut self, gpu: &Gpu, batch: Batch) {
        let d = &gpu.device;
        // SAFETY: the batch is complete, so nothing on the device uses its objects.
        unsafe {
            let _ = d.reset_fences(&[batch.fence]);
            for pool in &batch.pools {
                let _ = d.reset_descriptor_pool(*pool, vk::DescriptorPoolResetFlags::empty());
            }
        }
        self.spare_cmds.push(batch.cmd);
        self.spare_fences.push(batch.fence);
        self.spare_pools.extend(batch.pools);
        // `batch.keep` drops here, releasing pipelines and buffers freed meanwhile.
    }

    /// Recycle batches that have completed, without blocking.
    pub(crate) fn retire_finished(&mut self, gpu: &Gpu) {
        while let Some(front) = self.in_flight.front() {
            // SAFETY: the fence belongs to this device.
            if !matches!(unsafe { gpu.device.get_fence_status(front.fence) }, Ok(true)) {
                break;
            }
            let batch = self.in_flight.pop_front().expect("front exists");
            self.recycle(gpu, batch);
        }
    }

    /// Submit what is recorded and wait until the device has finished everything.
    pub(crate) fn finish(&mut self, gpu: &Gpu, timeout: Duration) -> Result<(), BackendError> {
        self.submit(gpu)?;
        while let Some(batch) = self.in_flight.pop_front() {
            // SAFETY: the fence belongs to this device.
            let waited = unsafe { gpu.device.wait_for_fences(&[batch.fence], true, timeout.as_nanos().min(u128::from(u64::MAX)) as u64) };
            match waited {
                Ok(()) => self.recycle(gpu, batch),
                Err(e) => {
                    let why = if e == vk::Result::TIMEOUT {
                        format!("the device did not finish within {} s ({TIMEOUT_ENV} sets the limit)", timeout.as_secs())
                    } else {
                        format!("waiting for the device failed: {e}")
                    };
                    // The batch may still run: keep its objects alive and stop using the device.
                    self.in_flight.push_front(batch);
                    self.lost = Some(why.clone());
                    return Err(BackendError::Fault(why));
                }
            }
        }
        Ok(())
    }

    pub(crate) fn buffer(&self, id: BufferId) -> Result<Arc<DeviceBuffer>, BackendError> {
        self.buffers.get(&id.0).cloned().ok_or_else(|| unknown_buffer(id))
    }

    /// A staging buffer of at least `len` bytes.
    pub(crate) fn staging(&mut self, gpu: &Arc<Gpu>, len: usize) -> Result<Arc<DeviceBuffer>, BackendError> {
        match &self.staging {
            Some(s) if s.capacity >= len => Ok(s.clone()),
            _ => {
                let s = Arc::new(DeviceBuffer::new(gpu, len, Usage::Staging)?);
                self.staging = Some(s.clone());
                Ok(s)
            }
        }
    }

    /// Count one recorded command; submit early when the batch is long.
    pub(crate) fn recorded(&mut self, gpu: &Gpu) -> Result<(), BackendError> {
        let batch = self.recording.as_mut().expect("a command was just recorded");
        batch.commands += 1;
        if batch.commands >= FLUSH_EVERY {
            self.submit(gpu)?;
            self.retire_finished(gpu);
        }
        Ok(())
    }
}
