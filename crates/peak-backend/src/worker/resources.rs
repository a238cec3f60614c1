//! Pruning from the compiler's resource report, before anything runs.

use crate::backend::{DeviceInfo, KernelResources};
use crate::plan::Step;

/// How an `invalid-config` reason found in the compiler's resource report begins (the
/// others come from the launch script or the launch itself).
pub const COMPILE_REPORT: &str = "compile report: ";

/// Prune before running, from the compiler's own report: a block larger than the kernel's
/// register use allows, more shared memory than the device has, and (when asked) spills.
pub fn check_resources(kernels: &[KernelResources], steps: &[Step], device: &DeviceInfo, prune_spills: bool) -> Result<(), String> {
    for step in steps {
        let Step::Launch { kernel, block, shared_bytes, .. } = step else { continue };
        let Some(res) = kernels.iter().find(|k| &k.name == kernel) else { continue };
        let threads: u64 = block.iter().map(|&b| u64::from(b)).product();
        if let Some(max) = res.max_threads_per_block
            && threads > u64::from(max)
        {
            let regs = res.registers.map(|r| format!(" at {r} registers per thread")).unwrap_or_default();
            return Err(format!("`{kernel}`: a block of {threads} threads exceeds the {max} its resources allow{regs}"));
        }
        let static_shared = res.shared_bytes.unwrap_or(0);
        let total = u64::from(static_shared) + u64::from(*shared_bytes);
        if device.max_shared_bytes > 0 && total > u64::from(device.max_shared_bytes) {
            return Err(format!(
                "`{kernel}`: needs {total} bytes of shared memory ({static_shared} static + {shared_bytes} dynamic), the device allows {}",
                device.max_shared_bytes
            ));
        }
        let spills = res.spill_stores_bytes.unwrap_or(0) + res.spill_loads_bytes.unwrap_or(0);
        if prune_spills && spills > 0 {
            return Err(format!(
                "`{kernel}`: spills registers ({} bytes stored, {} loaded)",
                res.spill_stores_bytes.unwrap_or(0),
                res.spill_loads_bytes.unwrap_or(0)
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn device() -> DeviceInfo {
        DeviceInfo {
            backend: "test".into(),
            name: "dev".into(),
            driver: "1".into(),
            arch: String::new(),
            compute_units: 1,
            max_threads_per_block: 1024,
            max_shared_bytes: 48 * 1024,
            warp_size: 32,
            global_memory_bytes: 1 << 30,
        }
    }

    fn launch(kernel: &str, block: [u32; 3], shared: u32) -> Step {
        Step::Launch { kernel: kernel.into(), grid: [1, 1, 1], block, shared_bytes: shared, args: vec![], line: 1 }
    }

    #[test]
    fn compile_reports_prune_oversized_blocks_shared_memory_and_spills() {
        let dev = device();
        let mut k =
            KernelResources { name: "k".into(), registers: Some(128), max_threads_per_block: Some(512), shared_bytes: Some(16384), ..Default::default() };
        assert!(check_resources(std::slice::from_ref(&k), &[launch("k", [16, 16, 1], 0)], &dev, false).is_ok());
        let err = check_resources(std::slice::from_ref(&k), &[launch("k", [32, 32, 1], 0)], &dev, false).unwrap_err();
        assert!(err.contains("1024 threads") && err.contains("128 registers"), "{err}");
        let err = check_resources(std::slice::from_ref(&k), &[launch("k", [8, 8, 1], 40000)], &dev, false).unwrap_err();
        assert!(err.contains("56384 bytes"), "{err}");
        k.spill_stores_bytes = Some(64);
        assert!(check_resources(std::slice::from_ref(&k), &[launch("k", [8, 8, 1], 0)], &dev, false).is_ok());
        let err = check_resources(std::slice::from_ref(&k), &[launch("k", [8, 8, 1], 0)], &dev, true).unwrap_err();
        assert!(err.contains("spills"), "{err}");
        // A kernel the compiler said nothing about is left to the launch to judge.
        assert!(check_resources(&[], &[launch("other", [4096, 1, 1], 0)], &dev, true).is_ok());
    }
}
