//! Loaded modules: the primary context they hold, and their kernels as the driver
//! describes them (thread and shared-memory limits, parameter sizes).

use std::collections::HashMap;
use std::ffi::CString;
use std::sync::{Arc, Mutex};

use cudarc::driver::sys::{self, CUdevice, CUfunction, CUfunction_attribute, CUmodule, CUresult};
use peak_backend::BackendError;

use crate::driver::{self, check};

/// The device's primary context, retained for as long as a backend or module uses it.
pub(super) struct Context {
    pub(super) device: CUdevice,
    pub(super) ctx: sys::CUcontext,
}

// The handles are plain driver pointers, valid on any thread once made current there.
unsafe impl Send for Context {}
unsafe impl Sync for Context {}

impl Context {
    pub(super) fn bind(&self) -> Result<(), BackendError> {
        check(unsafe { sys::cuCtxSetCurrent(self.ctx) }, "making the CUDA context current")
    }
}

impl Drop for Context {
    fn drop(&mut self) {
        unsafe {
            sys::cuDevicePrimaryCtxRelease_v2(self.device);
        }
    }
}

/// A kernel of a loaded module, with what the driver says about it.
pub(super) struct Function {
    pub(super) handle: CUfunction,
    pub(super) max_threads: u32,
    pub(super) static_shared: u32,
    /// Sizes of the kernel's parameters in order, where the driver reports them.
    pub(super) params: Option<Vec<usize>>,
}

unsafe impl Send for Function {}
unsafe impl Sync for Function {}

pub(super) fn function_attr(function: CUfunction, attr: CUfunction_attribute) -> Option<u32> {
    let mut value = 0;
    let status = unsafe { sys::cuFuncGetAttribute(&mut value, attr, function) };
    (status == CUresult::CUDA_SUCCESS).then_some(value.max(0) as u32)
}

/// A loaded cubin: the backend's [`Module`] handle.
pub(super) struct CudaModule {
    pub(super) context: Arc<Context>,
    pub(super) module: CUmodule,
    /// Whether the driver has `cuFuncGetParamInfo`.
    pub(super) param_info: bool,
    /// Kernels looked up so far: those in ptxas's report at load time, and any other name
    /// a launch asks for (ptxas reports nothing when NVRTC serves a compile from its cache).
    pub(super) functions: Mutex<HashMap<String, Arc<Function>>>,
}

unsafe impl Send for CudaModule {}
unsafe impl Sync for CudaModule {}

impl Drop for CudaModule {
    fn drop(&mut self) {
        // After a fault the context refuses everything; there is nothing left to free then.
        if self.context.bind().is_ok() {
            unsafe {
                sys::cuModuleUnload(self.module);
            }
        }
    }
}

impl CudaModule {
    /// The kernel `name`, from the driver, or `None` when the module has no such kernel.
    pub(super) fn lookup(&self, name: &str) -> Result<Option<Function>, BackendError> {
        let Ok(c_name) = CString::new(name) else { return Ok(None) };
        let mut handle: CUfunction = std::ptr::null_mut();
        match unsafe { sys::cuModuleGetFunction(&mut handle, self.module, c_name.as_ptr()) } {
            CUresult::CUDA_SUCCESS => {}
            CUresult::CUDA_ERROR_NOT_FOUND => return Ok(None),
            s => return Err(driver::error(s, &format!("finding `{name}` in the loaded module"))),
        }
        use CUfunction_attribute::*;
        Ok(Some(Function {
            handle,
            // Unknown: leave the check to the driver's launch.
            max_threads: function_attr(handle, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK).unwrap_or(u32::MAX),
            static_shared: function_attr(handle, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES).unwrap_or(0),
            params: self.param_info.then(|| param_sizes(handle)),
        }))
    }

    pub(super) fn function(&self, name: &str) -> Result<Arc<Function>, BackendError> {
        if let Some(f) = self.functions.lock().expect(super::LOCK).get(name) {
            return Ok(f.clone());
        }
        self.context.bind()?;
        if let Some(f) = self.lookup(name)? {
            let f = Arc::new(f);
            self.functions.lock().expect(super::LOCK).insert(name.to_string(), f.clone());
            return Ok(f);
        }
        let functions = self.functions.lock().expect(super::LOCK);
        let mut names: Vec<&str> = functions.keys().map(String::as_str).collect();
        names.sort();
        let mangled = names.iter().any(|n| n.starts_with("_Z") && n.contains(name));
        let hint = if mangled { format!("; `{name}` exists only as a C++-mangled name: declare the kernel `extern \"C\"`") } else { String::new() };
        Err(BackendError::Launch {
            kernel: name.to_string(),
            message: format!("no kernel of that name in the module; it has: {}{hint}", if names.is_empty() { "none".into() } else { names.join(", ") }),
        })
    }
}

/// Sizes of a kernel's parameters, in order.
fn param_sizes(function: CUfunction) -> Vec<usize> {
    let mut sizes = Vec::new();
    // The driver answers CUDA_ERROR_INVALID_VALUE past the last parameter.
    for index in 0..4096 {
        let (mut offset, mut size) = (0usize, 0usize);
        if unsafe { sys::cuFuncGetParamInfo(function, index, &mut offset, &mut size) } != CUresult::CUDA_SUCCESS {
            break;
        }
        sizes.push(size);
    }
    sizes
}
