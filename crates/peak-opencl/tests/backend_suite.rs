//! The shared backend suite on whatever OpenCL device is present (PoCL in CI).
peak_backend::backend_test_suite!(peak_spec::Language::Opencl, || peak_opencl::OpenClBackend::new().map_err(|e| e.to_string()));
