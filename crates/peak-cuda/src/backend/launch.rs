//! A launch before it reaches the driver: its shape checked against the kernel and the
//! device, and its arguments laid out for `cuLaunchKernel`.

use std::ffi::c_void;

use cudarc::driver::sys::CUfunction_attribute;
use peak_backend::{BackendError, KernelArg, Launch};

use super::module::{Function, function_attr};
use super::{CudaBackend, MAX_DYNAMIC_SHARED};

impl CudaBackend {
    pub(super) fn check_shape(&self, launch: &Launch, function: &Function) -> Result<(), BackendError> {
        let threads: u64 = launch.block.iter().map(|&b| u64::from(b)).product();
        if threads > u64::from(function.max_threads) {
            return Err(BackendError::InvalidConfig(format!(
                "a block of {threads} threads is more than the {} that `{}` can run with (its registers and the device's limit decide)",
                function.max_threads, launch.kernel
            )));
        }
        for (dim, ((&b, &max_b), (&g, &max_g))) in launch.block.iter().zip(&self.max_block).zip(launch.grid.iter().zip(&self.max_grid)).enumerate() {
            if b > max_b {
                return Err(BackendError::InvalidConfig(format!("block dimension {dim} is {b}, over the device's {max_b}")));
            }
            if g > max_g {
                return Err(BackendError::InvalidConfig(format!("grid dimension {dim} is {g}, over the device's {max_g}")));
            }
        }
        if launch.shared_bytes > 0 {
            let allowed = function_attr(function.handle, CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES).unwrap_or(0);
            if launch.shared_bytes > allowed {
                let device_max = self.info.max_shared_bytes.saturating_sub(function.static_shared);
                return Err(BackendError::InvalidConfig(if launch.shared_bytes > device_max {
                    format!(
                        "`{}` asks for {} bytes of dynamic shared memory; with its {} static bytes the device allows {device_max}",
                        launch.kernel, launch.shared_bytes, function.static_shared
                    )
                } else {
                    format!(
                        "`{}` asks for {} bytes of dynamic shared memory but may use {allowed}; raise the limit with {MAX_DYNAMIC_SHARED}(\"{}\", {}) in the launch script",
                        launch.kernel, launch.shared_bytes, launch.kernel, launch.shared_bytes
                    )
                }));
            }
        }
        Ok(())
    }

    pub(super) fn marshal(&self, launch: &Launch, function: &Function) -> Result<ArgBlock, BackendError> {
        let mut block = ArgBlock::default();
        for arg in &launch.args {
            match arg {
                KernelArg::Buffer(id) => block.push(&self.buffer(*id)?.ptr.to_le_bytes()),
                KernelArg::I32(v) => block.push(&v.to_le_bytes()),
                KernelArg::U32(v) => block.push(&v.to_le_bytes()),
                KernelArg::I64(v) => block.push(&v.to_le_bytes()),
                KernelArg::F32(v) => block.push(&v.to_le_bytes()),
                KernelArg::Bytes(bytes) => block.push(bytes),
            }
        }
        if let Some(params) = &function.params {
            let given: Vec<usize> = block.sizes();
            if params.len() != given.len() {
                return Err(BackendError::Launch {
                    kernel: launch.kernel.clone(),
                    message: format!("the kernel takes {} arguments, the launch passes {}", params.len(), given.len()),
                });
            }
            if let Some(i) = (0..params.len()).find(|&i| params[i] != given[i]) {
                return Err(BackendError::Launch {
                    kernel: launch.kernel.clone(),
                    message: format!(
                        "argument {i} is {} bytes ({}) but the kernel's parameter {i} takes {} bytes; use i32()/u32()/i64()/f32() to type scalars",
                        given[i],
                        describe_arg(&launch.args[i]),
                        params[i]
                    ),
                });
            }
        }
        Ok(block)
    }
}

fn describe_arg(arg: &KernelArg) -> String {
    match arg {
        KernelArg::Buffer(_) => "a buffer pointer".into(),
        KernelArg::I32(v) => format!("i32 {v}"),
        KernelArg::U32(v) => format!("u32 {v}"),
        KernelArg::I64(v) => format!("i64 {v}"),
        KernelArg::F32(v) => format!("f32 {v}"),
        KernelArg::Bytes(b) => format!("{} raw bytes", b.len()),
    }
}

/// Kernel arguments laid out for `cuLaunchKernel`, which takes an array of pointers to
/// each value. Each value sits in its own 128-byte-aligned slot: a tensor map must be
/// 64-byte aligned, and the driver copies each parameter by its declared size.
#[derive(Default)]
pub(super) struct ArgBlock {
    slots: Vec<Vec<Slot>>,
    lens: Vec<usize>,
}

#[repr(C, align(128))]
#[derive(Clone, Copy)]
struct Slot([u8; 128]);

impl ArgBlock {
    fn push(&mut self, bytes: &[u8]) {
        let mut slots = vec![Slot([0; 128]); bytes.len().div_ceil(128).max(1)];
        for (i, b) in bytes.iter().enumerate() {
            slots[i / 128].0[i % 128] = *b;
        }
        self.slots.push(slots);
        self.lens.push(bytes.len());
    }

    fn sizes(&self) -> Vec<usize> {
        self.lens.clone()
    }

    pub(super) fn pointers(&mut self) -> Vec<*mut c_void> {
        self.slots.iter_mut().map(|s| s.as_mut_ptr().cast()).collect()
    }
}
