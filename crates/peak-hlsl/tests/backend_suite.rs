//! The shared backend suite on whatever Vulkan device is present (lavapipe in CI).
peak_backend::backend_test_suite!(peak_spec::Language::Hlsl, || peak_hlsl::HlslBackend::new().map_err(|e| e.to_string()));
