//! [`CudaBackend`]: the driver API through cudarc's raw bindings.
//!
//! Why the raw layer rather than cudarc's safe API: the backend needs the driver's exact
//! error codes (to tell an invalid configuration from a fault), launches with arguments
//! only known at run time (including a 128-byte tensor map by value), and events on its
//! own stream; the safe API hides or types away each of those.
//!
//! One backend holds the device's primary context and one non-blocking stream; every
//! copy, fill, launch and event goes to that stream, so the order the runner asks for is
//! the order the device runs. Any thread may call in: each call makes the context
//! current on its thread first.

// cuBLASLt on a context's GEMM, the backend's yardstick (`vendor_call`): a child of the
// backend because it drives the backend's own device, stream and buffers.
pub mod baseline;
mod launch;
mod module;
mod script;

pub use script::{MAX_DYNAMIC_SHARED, check_static_shared, script_functions};

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use cudarc::driver::sys::{self, CUdevice, CUdevice_attribute, CUdeviceptr, CUfunction_attribute, CUmodule, CUresult, CUstream};
use peak_backend::plan::BackendOp;
use peak_backend::{Backend, BackendError, BufferId, BufferLookup, CompileRequest, DeviceInfo, EventId, KernelArg, Launch, Module, ScriptFunction};

use crate::driver::{self, check};
use crate::libs;
use crate::nvrtc::{self, Arch, Dialect};
use crate::tensor_map;

use module::{Context, CudaModule, function_attr};

/// A device buffer and its size.
#[derive(Clone, Copy)]
struct Buffer {
    ptr: CUdeviceptr,
    bytes: usize,
}

/// The tables' locks (buffers, events, tensor maps, a module's functions) are taken only
/// for a map lookup, insert or removal; nothing panics while one is held.
const LOCK: &str = "the backend's table locks are never held across a panic";

/// The CUDA backend; also runs HIP source through the prelude ([`CudaBackend::hip`]).
pub struct CudaBackend {
    info: DeviceInfo,
    dialect: Dialect,
    arch: Arch,
    context: Arc<Context>,
    stream: CUstream,
    features: libs::DriverFeatures,
    max_block: [u32; 3],
    max_grid: [u32; 3],
    l2_bytes: usize,
    buffers: Mutex<HashMap<u64, Buffer>>,
    events: Mutex<HashMap<u64, sys::CUevent>>,
    /// Encoded tensor maps by (buffer, call); buffers are never renumbered, so an entry
    /// stays right until its buffer is freed.
    tensor_maps: Mutex<HashMap<(u64, String), Vec<u8>>>,
    /// The first fault, once one happened: the context is dead from then on.
    fault: Mutex<Option<String>>,
    next_id: AtomicU64,
}

unsafe impl Send for CudaBackend {}
unsafe impl Sync for CudaBackend {}

/// Run a driver-touching closure, turning a cudarc panic (a symbol missing after all)
/// into an error rather than an abort of the whole program.
fn guarded<T>(what: &str, f: impl FnOnce() -> Result<T, BackendError>) -> Result<T, BackendError> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or_else(|panic| {
        let message = panic.downcast_ref::<String>().cloned().or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string())).unwrap_or_default();
        Err(BackendError::Unavailable {
            what: what.into(),
            reason: format!("cudarc panicked: {message}"),
            hint: "check the CUDA driver and NVRTC installation".into(),
        })
    })
}

impl CudaBackend {
    /// CUDA C++ on the device named by `PEAK_CUDA_DEVICE` (an ordinal), else device 0.
    pub fn new() -> Result<Self, BackendError> {
        Self::open(Dialect::Cuda, default_ordinal()?)
    }

    /// HIP source on an NVIDIA GPU, through the translation prelude.
    pub fn hip() -> Result<Self, BackendError> {
        Self::open(Dialect::Hip, default_ordinal()?)
    }

    pub fn open(dialect: Dialect, ordinal: i32) -> Result<Self, BackendError> {
        let features = libs::driver()?;
        let nvrtc = libs::nvrtc()?;
        guarded("the CUDA driver", || Self::open_checked(dialect, ordinal, features, nvrtc))
    }

    fn open_checked(dialect: Dialect, ordinal: i32, features: libs::DriverFeatures, nvrtc: &libs::NvrtcInstall) -> Result<Self, BackendError> {
        let unavailable = |reason: String| BackendError::Unavailable {
            what: "a CUDA device".into(),
            reason,
            hint: "check `nvidia-smi`; PEAK_CUDA_DEVICE picks another device".into(),
        };
        let status = unsafe { sys::cuInit(0) };
        if status != CUresult::CUDA_SUCCESS {
            return Err(unavailable(format!("cuInit failed: {}", driver::describe(status))));
        }
        let mut count = 0;
        check(unsafe { sys::cuDeviceGetCount(&mut count) }, "counting devices")?;
        if ordinal < 0 || ordinal >= count {
            return Err(unavailable(format!("device {ordinal} asked for, the driver sees {count}")));
        }
        let mut device: CUdevice = 0;
        check(unsafe { sys::cuDeviceGet(&mut device, ordinal) }, "opening the device")?;
        let attr = |a: CUdevice_attribute| -> Result<i32, BackendError> {
            let mut v = 0;
            check(unsafe { sys::cuDeviceGetAttribute(&mut v, a, device) }, "reading a device attribute")?;
            Ok(v)
        };
        use CUdevice_attribute::*;
        let major = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?;
        let minor = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?;
        let mut name_buf = [0 as std::ffi::c_char; 256];
        check(unsafe { sys::cuDeviceGetName(name_buf.as_mut_ptr(), 256, device) }, "reading the device name")?;
        let name = unsafe { std::ffi::CStr::from_ptr(name_buf.as_ptr()) }.to_string_lossy().into_owned();
        let mut total = 0usize;
        check(unsafe { sys::cuDeviceTotalMem_v2(&mut total, device) }, "reading the memory size")?;
        let mut driver_version = 0;
        check(unsafe { sys::cuDriverGetVersion(&mut driver_version) }, "reading the driver version")?;

        let mut ctx = std::ptr::null_mut();
        check(unsafe { sys::cuDevicePrimaryCtxRetain(&mut ctx, device) }, "retaining the primary context")?;
        let context = Arc::new(Context { device, ctx });
        context.bind()?;
        let mut stream = std::ptr::null_mut();
        check(unsafe { sys::cuStreamCreate(&mut stream, sys::CUstream_flags::CU_STREAM_NON_BLOCKING as u32) }, "creating a stream")?;

        let arch = Arch::for_device(major, minor);
        let u = |v: i32| v.max(0) as u32;
        let info = DeviceInfo {
            backend: match dialect {
                Dialect::Cuda => "cuda".into(),
                Dialect::Hip => "hip".into(),
            },
            name,
            driver: format!(
                "CUDA driver {}.{} / NVRTC {}.{}{}",
                driver_version / 1000,
                driver_version % 1000 / 10,
                nvrtc.version.0,
                nvrtc.version.1,
                if dialect == Dialect::Hip { " / HIP prelude" } else { "" }
            ),
            arch: arch.to_string(),
            compute_units: u(attr(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?),
            max_threads_per_block: u(attr(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK)?),
            // The opt-in limit: more than 48 KB needs cuda_max_dynamic_shared() first.
            max_shared_bytes: u(attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)?),
            warp_size: u(attr(CU_DEVICE_ATTRIBUTE_WARP_SIZE)?),
            global_memory_bytes: total as u64,
        };
        Ok(CudaBackend {
            info,
            dialect,
            arch,
            context,
            stream,
            features,
            max_block: [
                u(attr(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X)?),
                u(attr(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y)?),
                u(attr(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z)?),
            ],
            max_grid: [
                u(attr(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X)?),
                u(attr(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y)?),
                u(attr(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z)?),
            ],
            l2_bytes: attr(CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)?.max(0) as usize,
            buffers: Mutex::new(HashMap::new()),
            events: Mutex::new(HashMap::new()),
            tensor_maps: Mutex::new(HashMap::new()),
            fault: Mutex::new(None),
            next_id: AtomicU64::new(1),
        })
    }

    /// The architecture this backend compiles for.
    pub fn arch(&self) -> &Arch {
        &self.arch
    }

    /// The stream all work goes to, for libraries that share it (cuBLAS).
    pub fn raw_stream(&self) -> CUstream {
        self.stream
    }

    /// The device pointer of a buffer, for libraries that take raw pointers (cuBLAS).
    pub fn device_ptr(&self, buffer: BufferId) -> Result<CUdeviceptr, BackendError> {
        self.buffer(buffer).map(|b| b.ptr)
    }

    /// Make the context current on this thread, unless a fault has killed it.
    pub fn bind(&self) -> Result<(), BackendError> {
        if let Some(first) = self.fault.lock().unwrap_or_else(|p| p.into_inner()).as_ref() {
            return Err(BackendError::Fault(format!("an earlier fault broke the CUDA context ({first})")));
        }
        self.context.bind()
    }

    /// Pass an error through, remembering it if it is a fault.
    pub fn note(&self, err: BackendError) -> BackendError {
        if let BackendError::Fault(message) = &err {
            self.fault.lock().unwrap_or_else(|p| p.into_inner()).get_or_insert_with(|| message.clone());
        }
        err
    }

    fn checked(&self, status: CUresult, what: &str) -> Result<(), BackendError> {
        check(status, what).map_err(|e| self.note(e))
    }

    fn id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    fn buffer(&self, id: BufferId) -> Result<Buffer, BackendError> {
        self.buffers.lock().expect(LOCK).get(&id.0).copied().ok_or_else(|| BackendError::Internal(format!("unknown buffer {}", id.0)))
    }

    fn sync_stream(&self, what: &str) -> Result<(), BackendError> {
        self.checked(unsafe { sys::cuStreamSynchronize(self.stream) }, what)
    }
}

fn default_ordinal() -> Result<i32, BackendError> {
    match std::env::var("PEAK_CUDA_DEVICE") {
        Ok(text) => text.trim().parse().map_err(|_| BackendError::Unavailable {
            what: "a CUDA device".into(),
            reason: format!("PEAK_CUDA_DEVICE={text} is not a device number"),
            hint: "set PEAK_CUDA_DEVICE to 0, 1, ... as `nvidia-smi` numbers the devices".into(),
        }),
        Err(_) => Ok(0),
    }
}

impl Drop for CudaBackend {
    fn drop(&mut self) {
        if self.bind().is_err() {
            return;
        }
        unsafe {
            sys::cuStreamSynchronize(self.stream);
            for (_, event) in self.events.get_mut().expect(LOCK).drain() {
                sys::cuEventDestroy_v2(event);
            }
            for (_, buffer) in self.buffers.get_mut().expect(LOCK).drain() {
                sys::cuMemFree_v2(buffer.ptr);
            }
            sys::cuStreamDestroy_v2(self.stream);
        }
    }
}

impl Backend for CudaBackend {
    fn device(&self) -> &DeviceInfo {
        &self.info
    }

    fn compile(&self, request: &CompileRequest) -> Result<Module, BackendError> {
        let cubin = nvrtc::compile(request, self.dialect, &self.arch)?;
        check_static_shared(&cubin.kernels)?;
        self.bind()?;
        let mut module: CUmodule = std::ptr::null_mut();
        let status = unsafe { sys::cuModuleLoadData(&mut module, cubin.image.as_ptr().cast()) };
        if status != CUresult::CUDA_SUCCESS {
            return Err(self.note(driver::error(status, &format!("loading the cubin NVRTC built for {}", self.arch))));
        }
        let handle = CudaModule { context: self.context.clone(), module, param_info: self.features.param_info, functions: Mutex::new(HashMap::new()) };
        let mut kernels = Vec::with_capacity(cubin.kernels.len());
        for mut kernel in cubin.kernels {
            let function = handle
                .lookup(&kernel.name)
                .map_err(|e| self.note(e))?
                .ok_or_else(|| BackendError::Internal(format!("ptxas reported a kernel `{}` that the loaded module lacks", kernel.name)))?;
            use CUfunction_attribute::*;
            // The driver's figures are the ones launches obey; ptxas's agree and add spills.
            kernel.registers = function_attr(function.handle, CU_FUNC_ATTRIBUTE_NUM_REGS).or(kernel.registers);
            kernel.shared_bytes = Some(function.static_shared);
            kernel.local_bytes = function_attr(function.handle, CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES).or(kernel.local_bytes);
            kernel.max_threads_per_block = Some(function.max_threads);
            handle.functions.lock().expect(LOCK).insert(kernel.name.clone(), Arc::new(function));
            kernels.push(kernel);
        }
        Ok(Module { handle: Arc::new(handle), log: cubin.log, kernels })
    }

    fn alloc(&self, bytes: usize) -> Result<BufferId, BackendError> {
        self.bind()?;
        let mut ptr: CUdeviceptr = 0;
        // cuMemAlloc refuses zero bytes; one byte keeps an empty array addressable.
        match unsafe { sys::cuMemAlloc_v2(&mut ptr, bytes.max(1)) } {
            CUresult::CUDA_SUCCESS => {}
            CUresult::CUDA_ERROR_OUT_OF_MEMORY => return Err(BackendError::OutOfMemory { bytes }),
            s => return Err(self.note(driver::error(s, &format!("allocating {bytes} bytes")))),
        }
        let id = self.id();
        self.buffers.lock().expect(LOCK).insert(id, Buffer { ptr, bytes });
        Ok(BufferId(id))
    }

    fn free(&self, buffer: BufferId) {
        let Some(b) = self.buffers.lock().expect(LOCK).remove(&buffer.0) else { return };
        self.tensor_maps.lock().expect(LOCK).retain(|(id, _), _| *id != buffer.0);
        if self.bind().is_ok() {
            unsafe {
                sys::cuMemFree_v2(b.ptr);
            }
        }
    }

    fn write(&self, buffer: BufferId, data: &[u8]) -> Result<(), BackendError> {
        let b = self.buffer(buffer)?;
        if data.len() > b.bytes {
            return Err(BackendError::Internal(format!("writing {} bytes into a buffer of {}", data.len(), b.bytes)));
        }
        self.bind()?;
        self.checked(unsafe { sys::cuMemcpyHtoDAsync_v2(b.ptr, data.as_ptr().cast(), data.len(), self.stream) }, "copying to the device")?;
        // The source is pageable host memory the caller may reuse once this returns.
        self.sync_stream("copying to the device")
    }

    fn read(&self, buffer: BufferId, out: &mut [u8]) -> Result<(), BackendError> {
        let b = self.buffer(buffer)?;
        if out.len() > b.bytes {
            return Err(BackendError::Internal(format!("reading {} bytes from a buffer of {}", out.len(), b.bytes)));
        }
        self.bind()?;
        self.checked(unsafe { sys::cuMemcpyDtoHAsync_v2(out.as_mut_ptr().cast(), b.ptr, out.len(), self.stream) }, "copying from the device")?;
        self.sync_stream("copying from the device")
    }

    fn copy(&self, src: BufferId, dst: BufferId, bytes: usize) -> Result<(), BackendError> {
        let (s, d) = (self.buffer(src)?, self.buffer(dst)?);
        if bytes > s.bytes || bytes > d.bytes {
            return Err(BackendError::Internal(format!("copying {bytes} bytes between buffers of {} and {}", s.bytes, d.bytes)));
        }
        self.bind()?;
        self.checked(unsafe { sys::cuMemcpyDtoDAsync_v2(d.ptr, s.ptr, bytes, self.stream) }, "copying on the device")
    }

    fn fill(&self, buffer: BufferId, pattern: &[u8], bytes: usize) -> Result<(), BackendError> {
        let b = self.buffer(buffer)?;
        if bytes > b.bytes {
            return Err(BackendError::Internal(format!("filling {bytes} bytes of a buffer of {}", b.bytes)));
        }
        if !bytes.is_multiple_of(pattern.len().max(1)) || ![1, 2, 4].contains(&pattern.len()) {
            let mut data = pattern.repeat(bytes / pattern.len().max(1) + 1);
            data.truncate(bytes);
            return self.write(buffer, &data);
        }
        self.bind()?;
        let n = bytes / pattern.len();
        let status = unsafe {
            match pattern.len() {
                1 => sys::cuMemsetD8Async(b.ptr, pattern[0], n, self.stream),
                2 => sys::cuMemsetD16Async(b.ptr, u16::from_le_bytes([pattern[0], pattern[1]]), n, self.stream),
                _ => sys::cuMemsetD32Async(b.ptr, u32::from_le_bytes([pattern[0], pattern[1], pattern[2], pattern[3]]), n, self.stream),
            }
        };
        self.checked(status, "filling a buffer")
    }

    fn launch(&self, module: &Module, launch: &Launch) -> Result<(), BackendError> {
        let cuda_module = module.downcast::<CudaModule>()?;
        let function = cuda_module.function(&launch.kernel)?;
        self.check_shape(launch, &function)?;
        let mut args = self.marshal(launch, &function)?;
        let mut pointers = args.pointers();
        self.bind()?;
        let [gx, gy, gz] = launch.grid;
        let [bx, by, bz] = launch.block;
        let status = unsafe {
            sys::cuLaunchKernel(
                function.handle,
                gx,
                gy,
                gz,
                bx,
                by,
                bz,
                launch.shared_bytes,
                self.stream,
                if pointers.is_empty() { std::ptr::null_mut() } else { pointers.as_mut_ptr() },
                std::ptr::null_mut(),
            )
        };
        if status == CUresult::CUDA_SUCCESS { Ok(()) } else { Err(self.note(driver::launch_error(status, &launch.kernel))) }
    }

    fn record_event(&self) -> Result<EventId, BackendError> {
        self.bind()?;
        let mut event = std::ptr::null_mut();
        self.checked(unsafe { sys::cuEventCreate(&mut event, sys::CUevent_flags::CU_EVENT_DEFAULT as u32) }, "creating an event")?;
        if let Err(e) = self.checked(unsafe { sys::cuEventRecord(event, self.stream) }, "recording an event") {
            unsafe { sys::cuEventDestroy_v2(event) };
            return Err(e);
        }
        let id = self.id();
        self.events.lock().expect(LOCK).insert(id, event);
        Ok(EventId(id))
    }

    fn elapsed_ms(&self, start: EventId, end: EventId) -> Result<f64, BackendError> {
        let (a, b) = {
            let mut events = self.events.lock().expect(LOCK);
            (events.remove(&start.0), events.remove(&end.0))
        };
        let destroy = |e: Option<sys::CUevent>| {
            if let Some(e) = e {
                unsafe { sys::cuEventDestroy_v2(e) };
            }
        };
        let (Some(ea), Some(eb)) = (a, b) else {
            destroy(a);
            destroy(b);
            return Err(BackendError::Internal("unknown timing event".into()));
        };
        let result = self.bind().and_then(|_| {
            self.checked(unsafe { sys::cuEventSynchronize(eb) }, "waiting for the device")?;
            let mut ms = 0f32;
            self.checked(unsafe { sys::cuEventElapsedTime_v2(&mut ms, ea, eb) }, "reading an event time")?;
            Ok(f64::from(ms))
        });
        destroy(Some(ea));
        destroy(Some(eb));
        result
    }

    fn synchronize(&self) -> Result<(), BackendError> {
        self.bind()?;
        self.sync_stream("running on the device")
    }

    fn script_functions(&self) -> Vec<ScriptFunction> {
        script_functions()
    }

    fn run_op(&self, module: &Module, op: &BackendOp, _buffers: &BufferLookup) -> Result<(), BackendError> {
        match op.name.as_str() {
            MAX_DYNAMIC_SHARED => self.set_max_dynamic_shared(module, op),
            other => Err(BackendError::Unsupported(format!("{other}() as a step on {}", self.info.backend))),
        }
    }

    fn op_argument(&self, _module: &Module, op: &BackendOp, buffers: &BufferLookup) -> Result<KernelArg, BackendError> {
        match op.name.as_str() {
            tensor_map::NAME => self.tensor_map(op, buffers),
            other => Err(BackendError::Unsupported(format!("{other}() as an argument on {}", self.info.backend))),
        }
    }

    fn cache_bytes(&self) -> Option<u64> {
        Some(self.l2_bytes as u64)
    }

    fn vendor_call(
        &self,
        ctx: &peak_spec::Context,
        params: &peak_spec::ExecParams,
        options: &peak_backend::RunOptions,
    ) -> Option<Result<peak_backend::yardstick::VendorRun, BackendError>> {
        baseline::vendor_call(self, ctx, params, options)
    }
}
