//! The shared backend suite on the first CUDA device, for CUDA C++ and for HIP through the
//! prelude. Without an NVIDIA driver every test prints why it skipped.

mod cuda {
    peak_backend::backend_test_suite!(peak_spec::Language::Cuda, || peak_cuda::CudaBackend::new().map_err(|e| e.to_string()));
}

mod hip {
    peak_backend::backend_test_suite!(peak_spec::Language::Hip, || peak_cuda::CudaBackend::hip().map_err(|e| e.to_string()));
}
