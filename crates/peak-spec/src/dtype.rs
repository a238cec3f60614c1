//! The element types an array can hold ([`DType`]): their names in the manifest, sizes and
//! kinds.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DType {
    F32,
    F16,
    Bf16,
    I32,
    U32,
    /// OCP FP8 E4M3 (1 byte; no infinities, largest finite 448): CUDA's `__nv_fp8_e4m3`.
    E4m3,
    /// OCP FP8 E5M2 (1 byte; IEEE-like, largest finite 57344): CUDA's `__nv_fp8_e5m2`.
    E5m2,
}

impl DType {
    pub fn size_bytes(self) -> usize {
        match self {
            DType::F32 | DType::I32 | DType::U32 => 4,
            DType::F16 | DType::Bf16 => 2,
            DType::E4m3 | DType::E5m2 => 1,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::F16 => "f16",
            DType::Bf16 => "bf16",
            DType::I32 => "i32",
            DType::U32 => "u32",
            DType::E4m3 => "e4m3",
            DType::E5m2 => "e5m2",
        }
    }

    pub fn is_float(self) -> bool {
        matches!(self, DType::F32 | DType::F16 | DType::Bf16 | DType::E4m3 | DType::E5m2)
    }

    /// One of the 8-bit float types, which only the CUDA backend has (`cuda_fp8.h`).
    pub fn is_fp8(self) -> bool {
        matches!(self, DType::E4m3 | DType::E5m2)
    }

    /// Every element type, in the order error messages list them.
    pub const ALL: [DType; 7] = [DType::F32, DType::F16, DType::Bf16, DType::E4m3, DType::E5m2, DType::I32, DType::U32];
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for DType {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        DType::ALL.into_iter().find(|d| d.name() == s).ok_or_else(|| format!("unknown element type '{s}': expected f32, f16, bf16, e4m3, e5m2, i32 or u32"))
    }
}
