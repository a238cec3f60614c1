//! What the GPU-gated test files share: opening the CUDA backend, or saying why not.

use peak_cuda::CudaBackend;

/// The CUDA backend on the first GPU, or `None` after printing why `test` skips.
pub fn gpu(test: &str) -> Option<CudaBackend> {
    match CudaBackend::new() {
        Ok(b) => Some(b),
        Err(e) => {
            eprintln!("SKIPPED {test}: {e}");
            None
        }
    }
}
