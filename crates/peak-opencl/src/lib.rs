//! The OpenCL backend: OpenCL C on any OpenCL device, and on the CPU through PoCL, which
//! is what makes every part of peak run and be tested on a machine without a GPU.
//!
//! Conventions shared with the other backends:
//! - `grid` counts blocks, as in CUDA; the global size handed to OpenCL is `grid * block`.
//! - `shared_bytes > 0` appends one `__local` buffer of that size as the last argument,
//!   OpenCL's equivalent of dynamic shared memory.
//! - Device code sees tuning parameters as `-D NAME=value` build options.
//! - The device is the first GPU found, else the first device of any kind; set
//!   `PEAK_OPENCL_DEVICE=P:D` (platform and device index) to choose another.

use std::collections::HashMap;
use std::ptr;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use opencl3::command_queue::{CL_QUEUE_PROFILING_ENABLE, CommandQueue};
use opencl3::context::Context;
use opencl3::device::{CL_DEVICE_TYPE_ALL, CL_DEVICE_TYPE_CPU, CL_DEVICE_TYPE_GPU, Device};
use opencl3::error_codes::ClError;
use opencl3::event::Event;
use opencl3::kernel::Kernel;
use opencl3::memory::{Buffer, CL_MEM_READ_WRITE, ClMem};
use opencl3::platform::get_platforms;
use opencl3::program::Program;
use opencl3::types::{CL_BLOCKING, cl_mem};
use peak_backend::{Backend, BackendError, BufferId, CompileRequest, DeviceInfo, EventId, KernelArg, KernelResources, Launch, Module};

/// A device this machine's OpenCL platforms expose.
#[derive(Debug, Clone)]
pub struct DeviceEntry {
    pub platform: usize,
    pub device: usize,
    pub platform_name: String,
    pub name: String,
    pub is_gpu: bool,
}

/// The ICD loader and PoCL crash when two threads enumerate platforms or create contexts
/// at the same moment, so all of that goes through this lock.
static DRIVER_INIT: Mutex<()> = Mutex::new(());

/// Every OpenCL device found, or why none could be listed.
pub fn list_devices() -> Result<Vec<DeviceEntry>, BackendError> {
    let _guard = DRIVER_INIT.lock().unwrap_or_else(|p| p.into_inner());
    let platforms = get_platforms().map_err(|e| unavailable(format!("no OpenCL platform: {e}")))?;
    let mut out = Vec::new();
    for (p, platform) in platforms.iter().enumerate() {
        let platform_name = platform.name().unwrap_or_default();
        let ids = match platform.get_devices(CL_DEVICE_TYPE_ALL) {
            Ok(ids) => ids,
            // A platform with no device says so; any other failure would silently leave the
            // next platform's device (a CPU's) in the GPU's place, so it is said aloud.
            Err(e) if e.0 == opencl3::error_codes::CL_DEVICE_NOT_FOUND => continue,
            Err(e) => {
                eprintln!("note: OpenCL platform {} (index {p}) could not list its devices ({e}); it is skipped", platform_name.trim());
                continue;
            }
        };
        for (d, id) in ids.into_iter().enumerate() {
            let device = Device::new(id);
            let is_gpu = device.dev_type().map(|t| t & CL_DEVICE_TYPE_GPU != 0).unwrap_or(false);
            out.push(DeviceEntry { platform: p, device: d, platform_name: platform_name.clone(), name: device.name().unwrap_or_default(), is_gpu });
        }
    }
    if out.is_empty() {
        return Err(unavailable("OpenCL platforms were found but they expose no device".into()));
    }
    Ok(out)
}

fn unavailable(reason: String) -> BackendError {
    BackendError::Unavailable {
        what: "OpenCL".into(),
        reason,
        hint: "install an OpenCL driver; on Debian, `apt-get install pocl-opencl-icd ocl-icd-opencl-dev` gives a CPU device".into(),
    }
}

fn internal(what: &str, e: ClError) -> BackendError {
    BackendError::Internal(format!("{what}: {e}"))
}

/// One compiled program and the kernels created from it so far.
struct ClModule {
    program: Program,
    /// Kernel objects are reused across launches; set_arg mutates them, so they sit
    /// behind a lock (launches come from one thread, but the type must be Sync).
    kernels: Mutex<HashMap<String, Kernel>>,
}

/// The tables' locks (buffers, events, a program's kernels) guard lookups, inserts and
/// OpenCL calls that return errors rather than panic; nothing panics while one is held.
const LOCK: &str = "the backend's table locks are never held across a panic";

pub struct OpenClBackend {
    info: DeviceInfo,
    device: Device,
    context: Context,
    queue: CommandQueue,
    max_item_sizes: Vec<usize>,
    /// The global memory cache a GPU reports, flushed before timed runs; `None` on other
    /// devices (a CPU's caches are not what a kernel's time should be judged cold against,
    /// and evicting hundreds of megabytes before every run would dwarf it).
    cache_bytes: Option<u64>,
    buffers: Mutex<HashMap<u64, Buffer<u8>>>,
    events: Mutex<HashMap<u64, Event>>,
    next_id: AtomicU64,
}

impl OpenClBackend {
    /// Open the default device (see the module docs).
    pub fn new() -> Result<Self, BackendError> {
        let devices = list_devices()?;
        let chosen = match std::env::var("PEAK_OPENCL_DEVICE") {
            Ok(spec) => {
                let parsed = spec.split_once(':').and_then(|(p, d)| Some((p.parse::<usize>().ok()?, d.parse::<usize>().ok()?)));
                let (p, d) = parsed.ok_or_else(|| BackendError::Unavailable {
                    what: "OpenCL device".into(),
                    reason: format!("PEAK_OPENCL_DEVICE={spec} is not PLATFORM:DEVICE"),
                    hint: "run `peak info` to see the indices".into(),
                })?;
                devices.into_iter().find(|e| e.platform == p && e.device == d).ok_or_else(|| BackendError::Unavailable {
                    what: "OpenCL device".into(),
                    reason: format!("no device {p}:{d}"),
                    hint: "run `peak info` to see the indices".into(),
                })?
            }
            Err(_) => {
                let gpu = devices.iter().find(|e| e.is_gpu).cloned();
                gpu.unwrap_or_else(|| devices[0].clone())
            }
        };
        Self::open(&chosen)
    }

    pub fn open(entry: &DeviceEntry) -> Result<Self, BackendError> {
        let _guard = DRIVER_INIT.lock().unwrap_or_else(|p| p.into_inner());
        let platforms = get_platforms().map_err(|e| unavailable(e.to_string()))?;
        let ids = platforms[entry.platform].get_devices(CL_DEVICE_TYPE_ALL).map_err(|e| unavailable(e.to_string()))?;
        let device = Device::new(ids[entry.device]);
        let context = Context::from_device(&device).map_err(|e| internal("creating a context", e))?;
        let queue =
            CommandQueue::create_default_with_properties(&context, CL_QUEUE_PROFILING_ENABLE, 0).map_err(|e| internal("creating a profiling queue", e))?;
        let is_cpu = device.dev_type().map(|t| t & CL_DEVICE_TYPE_CPU != 0).unwrap_or(false);
        let info = DeviceInfo {
            backend: "opencl".into(),
            name: device.name().unwrap_or_default().trim().to_string(),
            driver: format!(
                "{} / {} / driver {}",
                entry.platform_name.trim(),
                device.version().unwrap_or_default().trim(),
                device.driver_version().unwrap_or_default().trim()
            ),
            arch: String::new(),
            compute_units: device.max_compute_units().unwrap_or(1),
            max_threads_per_block: device.max_work_group_size().unwrap_or(1) as u32,
            max_shared_bytes: device.local_mem_size().unwrap_or(0) as u32,
            // CPUs run work-items one SIMD lane at a time; 32 is the common GPU width.
            warp_size: if is_cpu { 1 } else { 32 },
            global_memory_bytes: device.global_mem_size().unwrap_or(0),
        };
        let max_item_sizes = device.max_work_item_sizes().unwrap_or_default();
        let is_gpu = device.dev_type().map(|t| t & CL_DEVICE_TYPE_GPU != 0).unwrap_or(false);
        let cache_bytes = if is_gpu { device.global_mem_cache_size().ok().filter(|&b| b > 0) } else { None };
        Ok(OpenClBackend {
            info,
            device,
            context,
            queue,
            max_item_sizes,
            cache_bytes,
            buffers: Mutex::new(HashMap::new()),
            events: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(1),
        })
    }

    fn id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    fn with_buffer<R>(&self, id: BufferId, f: impl FnOnce(&mut Buffer<u8>) -> Result<R, BackendError>) -> Result<R, BackendError> {
        let mut buffers = self.buffers.lock().expect(LOCK);
        let buffer = buffers.get_mut(&id.0).ok_or_else(|| BackendError::Internal(format!("unknown buffer {}", id.0)))?;
        f(buffer)
    }

    fn raw(&self, id: BufferId) -> Result<cl_mem, BackendError> {
        self.with_buffer(id, |b| Ok(b.get()))
    }

    fn check_shape(&self, launch: &Launch, kernel: &Kernel) -> Result<(), BackendError> {
        let threads: u64 = launch.block.iter().map(|&b| u64::from(b)).product();
        let kernel_max = kernel.get_work_group_size(self.device.id()).unwrap_or(self.info.max_threads_per_block as usize) as u64;
        if threads > kernel_max {
            return Err(BackendError::InvalidConfig(format!("block of {threads} threads exceeds {kernel_max} for `{}` on this device", launch.kernel)));
        }
        for (dim, (&b, &max)) in launch.block.iter().zip(&self.max_item_sizes).enumerate() {
            if b as usize > max {
                return Err(BackendError::InvalidConfig(format!("block dimension {dim} is {b}, over the device's {max}")));
            }
        }
        let static_local = kernel.get_local_mem_size(self.device.id()).unwrap_or(0);
        if static_local + u64::from(launch.shared_bytes) > u64::from(self.info.max_shared_bytes) {
            return Err(BackendError::InvalidConfig(format!(
                "needs {} bytes of local memory, the device has {}",
                static_local + u64::from(launch.shared_bytes),
                self.info.max_shared_bytes
            )));
        }
        Ok(())
    }
}

impl Backend for OpenClBackend {
    fn device(&self) -> &DeviceInfo {
        &self.info
    }

    fn compile(&self, request: &CompileRequest) -> Result<Module, BackendError> {
        let options = request.defines.iter().map(|(k, v)| format!("-D {k}={v}")).collect::<Vec<_>>().join(" ");
        // `#line` makes the compiler's messages name the context's file, with its line numbers.
        let source = format!("#line 1 \"{}\"\n{}", request.file_name.replace('"', "'"), request.source);
        let program =
            Program::create_and_build_from_source(&self.context, &source, &options).map_err(|log| BackendError::Compile { log, options: options.clone() })?;
        let kernels =
            program.kernel_names().split(';').filter(|n| !n.is_empty()).map(|name| KernelResources { name: name.to_string(), ..Default::default() }).collect();
        let log = program.get_build_log(self.device.id()).unwrap_or_default();
        Ok(Module { handle: std::sync::Arc::new(ClModule { program, kernels: Mutex::new(HashMap::new()) }), log, kernels })
    }

    fn alloc(&self, bytes: usize) -> Result<BufferId, BackendError> {
        // Zero-sized buffers are invalid in OpenCL; one byte keeps such arrays addressable.
        let buffer = unsafe { Buffer::<u8>::create(&self.context, CL_MEM_READ_WRITE, bytes.max(1), ptr::null_mut()) }
            .map_err(|_| BackendError::OutOfMemory { bytes })?;
        let id = self.id();
        self.buffers.lock().expect(LOCK).insert(id, buffer);
        Ok(BufferId(id))
    }

    fn free(&self, buffer: BufferId) {
        self.buffers.lock().expect(LOCK).remove(&buffer.0);
    }

    fn write(&self, buffer: BufferId, data: &[u8]) -> Result<(), BackendError> {
        self.with_buffer(buffer, |b| unsafe { self.queue.enqueue_write_buffer(b, CL_BLOCKING, 0, data, &[]) }.map(drop).map_err(|e| internal("write", e)))
    }

    fn read(&self, buffer: BufferId, out: &mut [u8]) -> Result<(), BackendError> {
        self.with_buffer(buffer, |b| {
            unsafe { self.queue.enqueue_read_buffer(b, CL_BLOCKING, 0, out, &[]) }.map(drop).map_err(|e| BackendError::Fault(format!("reading a buffer: {e}")))
        })
    }

    fn copy(&self, src: BufferId, dst: BufferId, bytes: usize) -> Result<(), BackendError> {
        let mut buffers = self.buffers.lock().expect(LOCK);
        let src_mem = buffers.get(&src.0).ok_or_else(|| BackendError::Internal("unknown source buffer".into()))?.get();
        let dst_buf = buffers.get_mut(&dst.0).ok_or_else(|| BackendError::Internal("unknown destination buffer".into()))?;
        // enqueue_copy_buffer wants a &Buffer for the source; it only uses the handle.
        let src_view = std::mem::ManuallyDrop::new(Buffer::<u8>::new(src_mem));
        unsafe { self.queue.enqueue_copy_buffer(&src_view, dst_buf, 0, 0, bytes, &[]) }.map(drop).map_err(|e| internal("copy", e))
    }

    fn fill(&self, buffer: BufferId, pattern: &[u8], bytes: usize) -> Result<(), BackendError> {
        // clEnqueueFillBuffer needs a power-of-two pattern size dividing the length.
        if !pattern.len().is_power_of_two() || !bytes.is_multiple_of(pattern.len()) {
            let mut data = pattern.repeat(bytes / pattern.len().max(1) + 1);
            data.truncate(bytes);
            return self.write(buffer, &data);
        }
        self.with_buffer(buffer, |b| unsafe { self.queue.enqueue_fill_buffer(b, pattern, 0, bytes, &[]) }.map(drop).map_err(|e| internal("fill", e)))
    }

    fn launch(&self, module: &Module, launch: &Launch) -> Result<(), BackendError> {
        let module = module.downcast::<ClModule>()?;
        let mut kernels = module.kernels.lock().expect(LOCK);
        if !kernels.contains_key(&launch.kernel) {
            let kernel = Kernel::create(&module.program, &launch.kernel).map_err(|e| BackendError::Launch {
                kernel: launch.kernel.clone(),
                message: format!("no kernel of that name in the program ({e}); it has: {}", module.program.kernel_names()),
            })?;
            kernels.insert(launch.kernel.clone(), kernel);
        }
        let kernel = &kernels[&launch.kernel];
        self.check_shape(launch, kernel)?;
        let arg_error = |i: usize, e: ClError| BackendError::Launch {
            kernel: launch.kernel.clone(),
            message: format!("argument {i} does not match the kernel's parameter ({e})"),
        };
        let declared = kernel.num_args().unwrap_or(0) as usize;
        let given = launch.args.len() + usize::from(launch.shared_bytes > 0);
        if declared != given {
            return Err(BackendError::Launch {
                kernel: launch.kernel.clone(),
                message: format!("the kernel takes {declared} arguments, the launch passes {given}"),
            });
        }
        for (i, arg) in launch.args.iter().enumerate() {
            let index = i as u32;
            let result = unsafe {
                match arg {
                    KernelArg::Buffer(id) => kernel.set_arg(index, &self.raw(*id)?),
                    KernelArg::I32(v) => kernel.set_arg(index, v),
                    KernelArg::U32(v) => kernel.set_arg(index, v),
                    KernelArg::I64(v) => kernel.set_arg(index, v),
                    KernelArg::F32(v) => kernel.set_arg(index, v),
                    KernelArg::Bytes(_) => return Err(BackendError::Unsupported("by-value byte arguments on OpenCL".into())),
                }
            };
            result.map_err(|e| arg_error(i, e))?;
        }
        if launch.shared_bytes > 0 {
            unsafe { kernel.set_arg_local_buffer(launch.args.len() as u32, launch.shared_bytes as usize) }.map_err(|e| arg_error(launch.args.len(), e))?;
        }
        let global: Vec<usize> = launch.grid.iter().zip(&launch.block).map(|(&g, &b)| g as usize * b as usize).collect();
        let local: Vec<usize> = launch.block.iter().map(|&b| b as usize).collect();
        unsafe { self.queue.enqueue_nd_range_kernel(kernel.get(), 3, ptr::null(), global.as_ptr(), local.as_ptr(), &[]) }.map(drop).map_err(|e| match e.0 {
            // CL_INVALID_WORK_GROUP_SIZE, CL_OUT_OF_RESOURCES, CL_INVALID_WORK_ITEM_SIZE
            -54 | -5 | -55 => BackendError::InvalidConfig(format!("`{}` cannot launch this way: {e}", launch.kernel)),
            _ => BackendError::Launch { kernel: launch.kernel.clone(), message: e.to_string() },
        })
    }

    fn record_event(&self) -> Result<EventId, BackendError> {
        let event = unsafe { self.queue.enqueue_marker_with_wait_list(&[]) }.map_err(|e| internal("recording an event", e))?;
        let id = self.id();
        self.events.lock().expect(LOCK).insert(id, event);
        Ok(EventId(id))
    }

    fn elapsed_ms(&self, start: EventId, end: EventId) -> Result<f64, BackendError> {
        let mut events = self.events.lock().expect(LOCK);
        let (Some(a), Some(b)) = (events.remove(&start.0), events.remove(&end.0)) else {
            return Err(BackendError::Internal("unknown timing event".into()));
        };
        b.wait().map_err(|e| BackendError::Fault(format!("waiting for the device: {e}")))?;
        // A marker completes when everything before it has; the gap between the two
        // markers' end times is the device time of the work between them.
        let t0 = a.profiling_command_end().map_err(|e| internal("profiling", e))?;
        let t1 = b.profiling_command_end().map_err(|e| internal("profiling", e))?;
        Ok(t1.saturating_sub(t0) as f64 / 1e6)
    }

    fn cache_bytes(&self) -> Option<u64> {
        self.cache_bytes
    }

    fn synchronize(&self) -> Result<(), BackendError> {
        self.queue.finish().map_err(|e| BackendError::Fault(format!("the device reported {e}")))
    }
}
