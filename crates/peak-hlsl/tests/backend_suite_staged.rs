//! The shared backend suite again, with every host read and write going through a staging
//! buffer as on a discrete GPU, so lavapipe exercises that path too.
peak_backend::backend_test_suite!(peak_spec::Language::Hlsl, || {
    let options = peak_hlsl::HlslOptions { always_stage: true, ..peak_hlsl::HlslOptions::from_env().map_err(|e| e.to_string())? };
    peak_hlsl::HlslBackend::with_options(&options).map_err(|e| e.to_string())
});
