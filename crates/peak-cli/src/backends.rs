//! Choosing a backend: the one place that names them. The rest of peak sees `dyn Backend`.

use anyhow::Result;
use peak_backend::{Backend, BackendError};
use peak_spec::Language;

/// Open the backend that runs `language` on this machine.
pub fn open(language: Language) -> Result<Box<dyn Backend>, BackendError> {
    match language {
        Language::Opencl => Ok(Box::new(peak_opencl::OpenClBackend::new()?)),
        Language::Cuda => Ok(Box::new(peak_cuda::CudaBackend::new()?)),
        Language::Hip => Ok(Box::new(peak_cuda::CudaBackend::hip()?)),
        Language::Hlsl => Ok(Box::new(peak_hlsl::HlslBackend::new()?)),
    }
}

/// Open what compile-checks `language` where no device may run it (`peak worker
/// --compile-only`): NVRTC for `arch` (default sm_90a) for CUDA and HIP; for OpenCL and
/// HLSL, whose compilers belong to a driver, the local device's, if there is one.
pub fn open_compile_only(language: Language, arch: Option<&str>) -> Result<Box<dyn Backend>, BackendError> {
    let arch = match arch {
        Some(text) => peak_cuda::Arch::parse(text).map_err(|reason| BackendError::Unavailable {
            what: format!("a compile-only target for {text}"),
            reason,
            hint: "pass --arch such as sm_90a".into(),
        })?,
        None => peak_cuda::Arch::default(),
    };
    match language {
        Language::Cuda => Ok(Box::new(peak_cuda::OfflineBackend::new(peak_cuda::Dialect::Cuda, arch)?)),
        Language::Hip => Ok(Box::new(peak_cuda::OfflineBackend::new(peak_cuda::Dialect::Hip, arch)?)),
        Language::Opencl | Language::Hlsl => open(language),
    }
}

/// What `peak info` reports for each backend: a device, or a plain reason.
pub struct Availability {
    pub backend: Language,
    pub devices: Result<Vec<String>, String>,
}

pub fn survey() -> Vec<Availability> {
    Language::ALL
        .into_iter()
        .map(|backend| {
            let devices = match backend {
                Language::Opencl => peak_opencl::list_devices()
                    .map(|list| list.into_iter().map(|d| format!("{}:{} {} ({})", d.platform, d.device, d.name.trim(), d.platform_name.trim())).collect())
                    .map_err(|e| plain(&e)),
                other => open(other).map(|b| vec![b.device().name.clone()]).map_err(|e| plain(&e)),
            };
            Availability { backend, devices }
        })
        .collect()
}

/// The first line of an error, without its hint: a plain word for `peak info`.
fn plain(e: &BackendError) -> String {
    e.to_string().lines().next().unwrap_or_default().to_string()
}
