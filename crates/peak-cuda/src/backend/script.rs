//! The launch-script functions the CUDA backend adds: raising a kernel's dynamic
//! shared-memory limit, and Hopper tensor maps passed by value.

use cudarc::driver::sys::{self, CUfunction_attribute, CUresult};
use peak_backend::plan::{BackendOp, OpValue};
use peak_backend::{BackendError, BufferLookup, KernelArg, KernelResources, Module, OpPhase, ScriptFunction};

use crate::driver;
use crate::tensor_map::{self, TensorMapSpec};

use super::CudaBackend;
use super::module::CudaModule;

/// Name of the launch-script function that raises a kernel's dynamic shared-memory limit.
pub const MAX_DYNAMIC_SHARED: &str = "cuda_max_dynamic_shared";
/// Bytes of `__shared__` memory a kernel may declare statically, on every CUDA GPU.
const STATIC_SHARED_LIMIT: u32 = 48 * 1024;

impl CudaBackend {
    pub(super) fn set_max_dynamic_shared(&self, module: &Module, op: &BackendOp) -> Result<(), BackendError> {
        let usage = || BackendError::Launch {
            kernel: MAX_DYNAMIC_SHARED.into(),
            message: format!("line {}: {MAX_DYNAMIC_SHARED}(kernel, bytes) takes a kernel name and a byte count", op.line),
        };
        let [OpValue::Str(kernel), OpValue::Int(bytes)] = op.args.as_slice() else { return Err(usage()) };
        let module = module.downcast::<CudaModule>()?;
        let function = module.function(kernel)?;
        let device_max = i64::from(self.info.max_shared_bytes.saturating_sub(function.static_shared));
        if *bytes < 0 || *bytes > device_max {
            return Err(BackendError::InvalidConfig(format!(
                "{MAX_DYNAMIC_SHARED}(\"{kernel}\", {bytes}) at line {}: `{kernel}` can have at most {device_max} bytes of dynamic shared memory here",
                op.line
            )));
        }
        self.bind()?;
        let status = unsafe { sys::cuFuncSetAttribute(function.handle, CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, *bytes as i32) };
        match status {
            CUresult::CUDA_SUCCESS => Ok(()),
            CUresult::CUDA_ERROR_INVALID_VALUE => Err(BackendError::InvalidConfig(format!(
                "{MAX_DYNAMIC_SHARED}(\"{kernel}\", {bytes}) at line {}: the driver refused: {}",
                op.line,
                driver::describe(status)
            ))),
            s => Err(self.note(driver::error(s, MAX_DYNAMIC_SHARED))),
        }
    }

    pub(super) fn tensor_map(&self, op: &BackendOp, buffers: &BufferLookup) -> Result<KernelArg, BackendError> {
        let spec = TensorMapSpec::from_op(op)?;
        let id = buffers(&spec.buffer);
        let key = (id.0, format!("{:?}", op.args));
        if let Some(bytes) = self.tensor_maps.lock().expect(super::LOCK).get(&key) {
            return Ok(KernelArg::Bytes(bytes.clone()));
        }
        let buffer = self.buffer(id)?;
        spec.check(op, buffer.bytes)?;
        self.bind()?;
        let bytes = spec.encode(buffer.ptr).map_err(|status| BackendError::Launch {
            kernel: tensor_map::NAME.into(),
            message: format!("line {}: cuTensorMapEncodeTiled refused the map: {}", op.line, driver::describe(status)),
        })?;
        self.tensor_maps.lock().expect(super::LOCK).insert(key, bytes.clone());
        Ok(KernelArg::Bytes(bytes))
    }
}

/// A kernel may declare at most 48 KB of static shared memory; the driver refuses the
/// module otherwise. That is a property of the configuration (tiles too big for this
/// tuning choice), so it prunes the configuration instead of failing the kernel.
pub fn check_static_shared(kernels: &[KernelResources]) -> Result<(), BackendError> {
    match kernels.iter().find(|k| k.shared_bytes.is_some_and(|b| b > STATIC_SHARED_LIMIT)) {
        Some(k) => Err(BackendError::InvalidConfig(format!(
            "`{}` declares {} bytes of static shared memory, over the {STATIC_SHARED_LIMIT} a kernel may declare statically (larger tiles need dynamic shared memory)",
            k.name,
            k.shared_bytes.unwrap_or_default()
        ))),
        None => Ok(()),
    }
}

/// The launch-script functions of the CUDA backend, with or without a device.
pub fn script_functions() -> Vec<ScriptFunction> {
    vec![
        ScriptFunction {
            name: MAX_DYNAMIC_SHARED,
            arity: 2,
            phase: OpPhase::Setup,
            doc: "cuda_max_dynamic_shared(kernel, bytes): let `kernel` use up to `bytes` of dynamic shared memory (needed above 48 KB)",
        },
        ScriptFunction {
            name: tensor_map::NAME,
            arity: 6,
            phase: OpPhase::Argument,
            doc: "cuda_tensor_map(buffer, dtype, dims, strides, box, swizzle): a Hopper tensor map over `buffer` (dims and box innermost first, strides in bytes, swizzle \"none\"/\"32b\"/\"64b\"/\"128b\"), passed by value",
        },
    ]
}
