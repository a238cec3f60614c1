//! `cuda_tensor_map(buffer, dtype, dims, strides, box, swizzle)`: a Hopper tensor map,
//! encoded on the host with `cuTensorMapEncodeTiled` and passed to the kernel by value.
//!
//! ```text
//! // a row-major rows × cols f16 matrix A, loaded in 64 × 64 tiles with 128-byte swizzle
//! let map_a = cuda_tensor_map(A, "f16", [cols, rows], [cols * 2], [64, 64], "128b");
//! launch("matmul", grid, block, smem, map_a, C, n);
//! ```
//!
//! The arguments follow `cuTensorMapEncodeTiled` so that kernel code written against the
//! CUDA documentation reads the same way:
//! - `dims`: elements per dimension, **innermost (contiguous) first**, 1 to 5 of them;
//! - `strides`: bytes between consecutive indices of dimensions 1.. (one fewer than
//!   `dims`), each a multiple of 16;
//! - `box`: the tile each copy moves, innermost first, each 1 to 256 elements, the
//!   innermost spanning a multiple of 16 bytes;
//! - `swizzle`: `"none"`, `"32b"`, `"64b"` or `"128b"`; with a swizzle the innermost box
//!   dimension may span at most that many bytes.
//!
//! Interleave is off, out-of-bounds elements read as zero, L2 promotion is 256 bytes, and
//! every element stride is 1. The kernel takes the map as a 128-byte, 64-byte-aligned
//! by-value parameter, `const __grid_constant__ CUtensorMap map` (from `<cuda.h>`) or any
//! struct of that size and alignment.
//!
//! A box over 256 or too wide for its swizzle depends on tuning parameters, so it prunes
//! the configuration ([`BackendError::InvalidConfig`]); a map reaching past the end of its
//! buffer, which would fault on the device, and malformed arguments fail the launch.

use cudarc::driver::sys::{CUtensorMap, CUtensorMapDataType, CUtensorMapFloatOOBfill, CUtensorMapInterleave, CUtensorMapL2promotion, CUtensorMapSwizzle};
use peak_backend::BackendError;
use peak_backend::plan::{BackendOp, BufRef, OpValue};
use peak_spec::DType;

pub const NAME: &str = "cuda_tensor_map";
/// Size of a `CUtensorMap`, the by-value kernel parameter.
pub const BYTES: usize = 128;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Swizzle {
    None,
    B32,
    B64,
    B128,
}

impl Swizzle {
    fn parse(text: &str) -> Option<Swizzle> {
        match text.to_ascii_lowercase().as_str() {
            "none" => Some(Swizzle::None),
            "32b" => Some(Swizzle::B32),
            "64b" => Some(Swizzle::B64),
            "128b" => Some(Swizzle::B128),
            _ => None,
        }
    }

    /// The span in bytes a swizzled row may cover.
    fn span(self) -> Option<u64> {
        match self {
            Swizzle::None => None,
            Swizzle::B32 => Some(32),
            Swizzle::B64 => Some(64),
            Swizzle::B128 => Some(128),
        }
    }

    fn to_cuda(self) -> CUtensorMapSwizzle {
        match self {
            Swizzle::None => CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_NONE,
            Swizzle::B32 => CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_32B,
            Swizzle::B64 => CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_64B,
            Swizzle::B128 => CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_128B,
        }
    }
}

/// A parsed and checked `cuda_tensor_map` call.
#[derive(Debug, Clone, PartialEq)]
pub struct TensorMapSpec {
    pub buffer: BufRef,
    pub dtype: DType,
    pub dims: Vec<u64>,
    pub strides: Vec<u64>,
    pub box_dims: Vec<u32>,
    pub swizzle: Swizzle,
}

fn bad(op: &BackendOp, message: impl std::fmt::Display) -> BackendError {
    BackendError::Launch { kernel: NAME.into(), message: format!("line {}: {NAME}: {message}", op.line) }
}

fn ints(op: &BackendOp, what: &str, value: &OpValue) -> Result<Vec<i64>, BackendError> {
    let OpValue::List(items) = value else {
        return Err(bad(op, format!("`{what}` must be a list of integers, like [1024, 1024]")));
    };
    items
        .iter()
        .map(|v| match v {
            OpValue::Int(i) => Ok(*i),
            _ => Err(bad(op, format!("`{what}` must hold integers only"))),
        })
        .collect()
}

impl TensorMapSpec {
    /// Read the script's arguments; checks what needs no buffer size.
    pub fn from_op(op: &BackendOp) -> Result<TensorMapSpec, BackendError> {
        let [buffer, dtype, dims, strides, box_dims, swizzle] = op.args.as_slice() else {
            return Err(bad(op, format!("takes 6 arguments (buffer, dtype, dims, strides, box, swizzle), got {}", op.args.len())));
        };
        let OpValue::Buffer(buffer) = buffer else { return Err(bad(op, "the first argument must be an array or an alloc() buffer")) };
        let OpValue::Str(dtype) = dtype else { return Err(bad(op, "`dtype` must be a string such as \"f16\"")) };
        let dtype: DType = dtype.parse().map_err(|e| bad(op, e))?;
        let OpValue::Str(swizzle_text) = swizzle else { return Err(bad(op, "`swizzle` must be \"none\", \"32b\", \"64b\" or \"128b\"")) };
        let swizzle =
            Swizzle::parse(swizzle_text).ok_or_else(|| bad(op, format!("unknown swizzle '{swizzle_text}': use \"none\", \"32b\", \"64b\" or \"128b\"")))?;
        let dims = ints(op, "dims", dims)?;
        let strides = ints(op, "strides", strides)?;
        let box_dims = ints(op, "box", box_dims)?;
        let rank = dims.len();
        if !(1..=5).contains(&rank) {
            return Err(bad(op, format!("`dims` needs 1 to 5 dimensions, got {rank}")));
        }
        if strides.len() + 1 != rank {
            return Err(bad(op, format!("`strides` needs {} entries (one per dimension after the innermost), got {}", rank - 1, strides.len())));
        }
        if box_dims.len() != rank {
            return Err(bad(op, format!("`box` needs {rank} entries, like `dims`, got {}", box_dims.len())));
        }
        if let Some(d) = dims.iter().find(|&&d| !(1..=1i64 << 32).contains(&d)) {
            return Err(bad(op, format!("dimension size {d} is out of range (1 to 2^32)")));
        }
        if let Some(s) = strides.iter().find(|&&s| s <= 0 || s % 16 != 0 || s >= 1i64 << 40) {
            return Err(bad(op, format!("stride {s} must be a positive multiple of 16 bytes below 2^40")));
        }
        if let Some(b) = box_dims.iter().find(|&&b| b < 1) {
            return Err(bad(op, format!("box size {b} must be at least 1")));
        }
        Ok(TensorMapSpec {
            buffer: *buffer,
            dtype,
            dims: dims.iter().map(|&d| d as u64).collect(),
            strides: strides.iter().map(|&s| s as u64).collect(),
            box_dims: box_dims.iter().map(|&b| b.min(i64::from(u32::MAX)) as u32).collect(),
            swizzle,
        })
    }

    /// The last byte the map can reach, plus one.
    pub fn extent_bytes(&self) -> u64 {
        let element = self.dtype.size_bytes() as u64;
        self.dims[0] * element + self.dims[1..].iter().zip(&self.strides).map(|(d, s)| (d - 1) * s).sum::<u64>()
    }

    /// Check the map against the buffer it describes and the hardware's tile limits.
    pub fn check(&self, op: &BackendOp, buffer_bytes: usize) -> Result<(), BackendError> {
        if let Some(b) = self.box_dims.iter().find(|&&b| b > 256) {
            return Err(BackendError::InvalidConfig(format!("{NAME} at line {}: box size {b} is over the hardware's 256", op.line)));
        }
        let inner = u64::from(self.box_dims[0]) * self.dtype.size_bytes() as u64;
        if !inner.is_multiple_of(16) {
            return Err(BackendError::InvalidConfig(format!(
                "{NAME} at line {}: the innermost box dimension spans {inner} bytes, not a multiple of 16",
                op.line
            )));
        }
        if let Some(span) = self.swizzle.span()
            && inner > span
        {
            return Err(BackendError::InvalidConfig(format!(
                "{NAME} at line {}: the innermost box dimension spans {inner} bytes, more than the {span}-byte swizzle allows",
                op.line
            )));
        }
        let extent = self.extent_bytes();
        if extent > buffer_bytes as u64 {
            return Err(bad(op, format!("the map reaches {extent} bytes into a buffer of {buffer_bytes} bytes; check dims and strides")));
        }
        Ok(())
    }

    fn data_type(&self) -> CUtensorMapDataType {
        match self.dtype {
            DType::F32 => CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_FLOAT32,
            DType::F16 => CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
            DType::Bf16 => CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
            DType::I32 => CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_INT32,
            DType::U32 => CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_UINT32,
            // TMA moves fp8 as bytes: it never converts, and fills out of bounds with zero bits.
            DType::E4m3 | DType::E5m2 => CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_UINT8,
        }
    }

    /// Encode the map for the device buffer at `address`. Needs the driver.
    pub fn encode(&self, address: u64) -> Result<Vec<u8>, cudarc::driver::sys::CUresult> {
        let mut map = std::mem::MaybeUninit::<CUtensorMap>::zeroed();
        let element_strides = vec![1u32; self.dims.len()];
        let status = unsafe {
            cudarc::driver::sys::cuTensorMapEncodeTiled(
                map.as_mut_ptr(),
                self.data_type(),
                self.dims.len() as u32,
                address as *mut std::ffi::c_void,
                self.dims.as_ptr(),
                self.strides.as_ptr(),
                self.box_dims.as_ptr(),
                element_strides.as_ptr(),
                CUtensorMapInterleave::CU_TENSOR_MAP_INTERLEAVE_NONE,
                self.swizzle.to_cuda(),
                CUtensorMapL2promotion::CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                CUtensorMapFloatOOBfill::CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
            )
        };
        if status != cudarc::driver::sys::CUresult::CUDA_SUCCESS {
            return Err(status);
        }
        let map = unsafe { map.assume_init() };
        let bytes: Vec<u8> = map.opaque.iter().flat_map(|w| w.to_le_bytes()).collect();
        debug_assert_eq!(bytes.len(), BYTES);
        Ok(bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(args: Vec<OpValue>) -> BackendOp {
        BackendOp { name: NAME.into(), args, line: 7 }
    }

    fn list(v: &[i64]) -> OpValue {
        OpValue::List(v.iter().map(|&i| OpValue::Int(i)).collect())
    }

    fn matrix(dims: &[i64], strides: &[i64], box_dims: &[i64], swizzle: &str) -> BackendOp {
        op(vec![OpValue::Buffer(BufRef::Array(0)), OpValue::Str("f16".into()), list(dims), list(strides), list(box_dims), OpValue::Str(swizzle.into())])
    }

    #[test]
    fn a_row_major_matrix_map_parses_and_fits_its_buffer() {
        let call = matrix(&[1024, 512], &[2048], &[64, 64], "128b");
        let spec = TensorMapSpec::from_op(&call).unwrap();
        assert_eq!(spec.extent_bytes(), 1024 * 512 * 2);
        spec.check(&call, 1024 * 512 * 2).unwrap();
        let err = spec.check(&call, 1024 * 512 * 2 - 1).unwrap_err();
        assert!(matches!(err, BackendError::Launch { .. }), "{err}");
        assert!(err.to_string().contains("line 7"), "{err}");
    }

    #[test]
    fn tile_limits_prune_while_malformed_calls_fail() {
        let too_big = matrix(&[1024, 512], &[2048], &[64, 512], "none");
        let err = TensorMapSpec::from_op(&too_big).unwrap().check(&too_big, 1 << 30).unwrap_err();
        assert!(matches!(err, BackendError::InvalidConfig(_)), "{err}");
        let too_wide = matrix(&[1024, 512], &[2048], &[128, 64], "128b");
        let err = TensorMapSpec::from_op(&too_wide).unwrap().check(&too_wide, 1 << 30).unwrap_err();
        assert!(matches!(err, BackendError::InvalidConfig(_)), "256 bytes under a 128-byte swizzle: {err}");
        for call in [
            matrix(&[1024, 512], &[], &[64, 64], "none"),
            matrix(&[1024, 512], &[2050], &[64, 64], "none"),
            matrix(&[1024, 512], &[2048], &[64], "none"),
            matrix(&[1024, 512], &[2048], &[64, 64], "96b"),
            op(vec![OpValue::Int(1)]),
        ] {
            let err = TensorMapSpec::from_op(&call).unwrap_err();
            assert!(matches!(err, BackendError::Launch { .. }), "{err}");
        }
    }
}
