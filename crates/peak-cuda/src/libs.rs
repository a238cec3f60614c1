//! Finding and loading the CUDA libraries at run time.
//!
//! cudarc opens its libraries with `dlopen("libnvrtc.so.13")`: a bare name, which the
//! dynamic loader looks up in `LD_LIBRARY_PATH` (read once, when the process starts), the
//! loader cache and the system folders. The NVRTC wheels from PyPI and a toolkit under
//! `/usr/local/cuda` are in none of those. So before the first cudarc call, peak looks for
//! each library itself and opens it by its absolute path; the loader then answers cudarc's
//! bare-name `dlopen` with the library already in the process, because it matches loaded
//! libraries by their soname. The handles are kept for the life of the process.
//!
//! Where peak looks, first hit wins:
//! 1. `PEAK_NVRTC_PATH` (a folder holding the libraries, or the library file itself);
//! 2. `CUDA_HOME`, then `CUDA_PATH` (their `lib64`, `lib` and `targets/x86_64-linux/lib`);
//! 3. the dynamic loader's own search (`LD_LIBRARY_PATH`, the loader cache);
//! 4. `/usr/local/cuda`;
//! 5. the `nvidia/*/lib` folders of python3's site-packages, where `pip install
//!    nvidia-cuda-nvrtc` puts them (`PEAK_PYTHON` names another interpreter).
//!
//! NVRTC also needs `libnvrtc-builtins.so.13.*`, which it opens by bare name too, and the
//! CUDA headers (`cuda_fp16.h` ...), which it does not find by itself: the headers are
//! taken from the `include` folder beside the library's `lib` folder.
//!
//! cudarc panics when a library or one of its symbols is missing. Every entry point here
//! checks first and returns [`BackendError::Unavailable`] with a hint instead.

use std::ffi::{CStr, c_void};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use libloading::os::unix::{Library, RTLD_GLOBAL, RTLD_NOW};
use peak_backend::BackendError;

/// The CUDA major version cudarc's bindings were generated for (feature `cuda-13000`).
pub const CUDA_MAJOR: u32 = 13;

/// NVRTC as found on this machine.
#[derive(Debug, Clone)]
pub struct NvrtcInstall {
    /// The library file that was loaded.
    pub library: PathBuf,
    /// Folder holding `cuda_fp16.h` and friends, passed to NVRTC as `-I`.
    pub include_dir: Option<PathBuf>,
    /// `(major, minor)` as NVRTC reports it.
    pub version: (i32, i32),
    /// Where it was found, for messages ("CUDA_HOME", "python site-packages", ...).
    pub origin: String,
}

const NVRTC_HINT: &str = "install NVRTC: `scripts/install-nvrtc.sh` (pip wheels nvidia-cuda-nvrtc, nvidia-cuda-runtime, nvidia-cuda-crt), or a CUDA 13 toolkit; or point PEAK_NVRTC_PATH at the folder holding libnvrtc.so.13";

/// Locate and load NVRTC once per process.
pub fn nvrtc() -> Result<&'static NvrtcInstall, BackendError> {
    static NVRTC: OnceLock<Result<NvrtcInstall, BackendError>> = OnceLock::new();
    NVRTC.get_or_init(load_nvrtc).as_ref().map_err(Clone::clone)
}

fn load_nvrtc() -> Result<NvrtcInstall, BackendError> {
    let name = format!("libnvrtc.so.{CUDA_MAJOR}");
    let (library, origin) = locate(&name).ok_or_else(|| BackendError::Unavailable {
        what: "NVRTC".into(),
        reason: format!("{name} was found in none of: {}", searched_places()),
        hint: NVRTC_HINT.into(),
    })?;
    let dir = library.parent().map(Path::to_path_buf).unwrap_or_default();
    // NVRTC dlopens its builtins library by bare name at the first compile; load it from
    // the same folder now so that lookup is answered from memory.
    if let Some(builtins) = find_builtins(&dir) {
        open(&builtins).map_err(|reason| unavailable_nvrtc(format!("loading {}: {reason}", builtins.display())))?;
    }
    open(&library).map_err(|reason| unavailable_nvrtc(format!("loading {}: {reason}", library.display())))?;
    // From here cudarc's own dlopen succeeds, so its calls cannot panic for a missing library.
    let lib = unsafe { Library::open(Some(&library), RTLD_NOW) }.map_err(|e| unavailable_nvrtc(e.to_string()))?;
    for symbol in NVRTC_SYMBOLS {
        if unsafe { lib.get::<unsafe extern "C" fn()>(symbol.as_bytes()) }.is_err() {
            return Err(unavailable_nvrtc(format!("{} lacks the function {symbol}", library.display())));
        }
    }
    let mut version = (0, 0);
    let status = unsafe { cudarc::nvrtc::sys::nvrtcVersion(&mut version.0, &mut version.1) };
    if status != cudarc::nvrtc::sys::nvrtcResult::NVRTC_SUCCESS {
        return Err(unavailable_nvrtc(format!("nvrtcVersion failed: {status:?}")));
    }
    if version.0 as u32 != CUDA_MAJOR {
        return Err(unavailable_nvrtc(format!("{} is NVRTC {}.{}; peak needs CUDA {CUDA_MAJOR}", library.display(), version.0, version.1)));
    }
    Ok(NvrtcInstall { include_dir: include_dir_for(&dir), library, version, origin })
}

fn unavailable_nvrtc(reason: String) -> BackendError {
    BackendError::Unavailable { what: "NVRTC".into(), reason, hint: NVRTC_HINT.into() }
}

/// Every NVRTC function peak calls through cudarc; checked before the first call.
const NVRTC_SYMBOLS: &[&str] = &[
    "nvrtcVersion",
    "nvrtcCreateProgram",
    "nvrtcCompileProgram",
    "nvrtcDestroyProgram",
    "nvrtcGetProgramLogSize",
    "nvrtcGetProgramLog",
    "nvrtcGetCUBINSize",
    "nvrtcGetCUBIN",
    "nvrtcGetErrorString",
];

/// Every driver function peak calls through cudarc, under the symbol name cudarc loads.
/// A driver older than the bindings may lack some; that must be an error, not a panic.
const DRIVER_SYMBOLS: &[&str] = &[
    "cuInit",
    "cuDriverGetVersion",
    "cuDeviceGetCount",
    "cuDeviceGet",
    "cuDeviceGetName",
    "cuDeviceGetAttribute",
    "cuDeviceTotalMem_v2",
    "cuDevicePrimaryCtxRetain",
    "cuDevicePrimaryCtxRelease_v2",
    "cuCtxSetCurrent",
    "cuStreamCreate",
    "cuStreamSynchronize",
    "cuStreamDestroy_v2",
    "cuMemAlloc_v2",
    "cuMemFree_v2",
    "cuMemcpyHtoDAsync_v2",
    "cuMemcpyDtoHAsync_v2",
    "cuMemcpyDtoDAsync_v2",
    "cuMemsetD8Async",
    "cuMemsetD16Async",
    "cuMemsetD32Async",
    "cuModuleLoadData",
    "cuModuleUnload",
    "cuModuleGetFunction",
    "cuFuncGetAttribute",
    "cuFuncSetAttribute",
    "cuLaunchKernel",
    "cuEventCreate",
    "cuEventRecord",
    "cuEventSynchronize",
    "cuEventElapsedTime_v2",
    "cuEventDestroy_v2",
    "cuGetErrorName",
    "cuGetErrorString",
    "cuTensorMapEncodeTiled",
];

/// Optional driver functions: used when present (CUDA 12.4+ drivers have them).
pub const DRIVER_SYMBOL_PARAM_INFO: &str = "cuFuncGetParamInfo";

/// What the driver library offers beyond the required symbols.
#[derive(Debug, Clone, Copy)]
pub struct DriverFeatures {
    /// `cuFuncGetParamInfo`: kernel parameter sizes, to check launch arguments.
    pub param_info: bool,
}

const DRIVER_HINT: &str =
    "the CUDA backend needs an NVIDIA GPU and its driver (libcuda.so.1, driver 580 or newer for CUDA 13); `peak compile` works without one";

/// Check that libcuda is there and has every function peak uses, once per process.
pub fn driver() -> Result<DriverFeatures, BackendError> {
    static DRIVER: OnceLock<Result<DriverFeatures, BackendError>> = OnceLock::new();
    DRIVER.get_or_init(load_driver).clone()
}

fn load_driver() -> Result<DriverFeatures, BackendError> {
    let unavailable = |reason: String| BackendError::Unavailable { what: "the CUDA driver".into(), reason, hint: DRIVER_HINT.into() };
    if !unsafe { cudarc::driver::sys::is_culib_present() } {
        return Err(unavailable("libcuda.so could not be loaded (no NVIDIA driver on this machine)".into()));
    }
    // cudarc tries these names in this order; the first that loads is the one it uses.
    let lib = ["libcuda.so", "libcuda.so.1"]
        .iter()
        .find_map(|name| unsafe { Library::open(Some(*name), RTLD_NOW) }.ok())
        .ok_or_else(|| unavailable("libcuda.so loads for cudarc's probe but not by name".into()))?;
    let has = |symbol: &str| unsafe { lib.get::<unsafe extern "C" fn()>(symbol.as_bytes()) }.is_ok();
    if let Some(missing) = DRIVER_SYMBOLS.iter().find(|s| !has(s)) {
        return Err(unavailable(format!("the driver lacks {missing}; it is older than CUDA {CUDA_MAJOR}")));
    }
    Ok(DriverFeatures { param_info: has(DRIVER_SYMBOL_PARAM_INFO) })
}

const CUBLASLT_HINT: &str =
    "install cuBLAS for CUDA 13 (a CUDA toolkit, or `pip install nvidia-cublas`), or point PEAK_NVRTC_PATH at the folder holding libcublasLt.so.13";

/// Every cuBLASLt function peak calls through cudarc: cudarc panics on a missing symbol at
/// its first call, so an older library is refused here instead.
const CUBLASLT_SYMBOLS: &[&str] = &[
    "cublasLtGetVersion",
    "cublasLtGetStatusString",
    "cublasLtCreate",
    "cublasLtDestroy",
    "cublasLtMatmulDescCreate",
    "cublasLtMatmulDescDestroy",
    "cublasLtMatmulDescSetAttribute",
    "cublasLtMatrixLayoutCreate",
    "cublasLtMatrixLayoutDestroy",
    "cublasLtMatrixLayoutSetAttribute",
    "cublasLtMatmulPreferenceCreate",
    "cublasLtMatmulPreferenceDestroy",
    "cublasLtMatmulPreferenceSetAttribute",
    "cublasLtMatmulAlgoGetHeuristic",
    "cublasLtMatmulAlgoConfigGetAttribute",
    "cublasLtMatmul",
];

/// Locate and load cuBLASLt (`peak baseline`'s vendor GEMM) once per process.
pub fn cublaslt() -> Result<&'static Path, BackendError> {
    static CUBLASLT: OnceLock<Result<PathBuf, BackendError>> = OnceLock::new();
    CUBLASLT.get_or_init(load_cublaslt).as_ref().map(PathBuf::as_path).map_err(Clone::clone)
}

fn load_cublaslt() -> Result<PathBuf, BackendError> {
    let unavailable = |reason: String| BackendError::Unavailable { what: "cuBLASLt".into(), reason, hint: CUBLASLT_HINT.into() };
    let name = format!("libcublasLt.so.{CUDA_MAJOR}");
    let (library, _) = locate(&name).ok_or_else(|| unavailable(format!("{name} was found in none of: {}", searched_places())))?;
    open(&library).map_err(|reason| unavailable(format!("loading {}: {reason}", library.display())))?;
    let lib = unsafe { Library::open(Some(&library), RTLD_NOW) }.map_err(|e| unavailable(e.to_string()))?;
    if let Some(missing) = CUBLASLT_SYMBOLS.iter().find(|s| unsafe { lib.get::<unsafe extern "C" fn()>(s.as_bytes()) }.is_err()) {
        return Err(unavailable(format!("{} lacks the function {missing}", library.display())));
    }
    if !unsafe { cudarc::cublaslt::sys::is_culib_present() } {
        return Err(unavailable(format!("{} loaded, yet cudarc cannot open it", library.display())));
    }
    // cudarc opens the library by bare name, and an unversioned `libcublasLt.so` of another
    // CUDA on the loader's path would win over ours: check what answers its calls.
    let version = unsafe { cudarc::cublaslt::sys::cublasLtGetVersion() };
    if version / 10_000 != CUDA_MAJOR as usize {
        return Err(unavailable(format!("the cuBLASLt cudarc loaded is version {version}; peak needs CUDA {CUDA_MAJOR}'s ({} was found)", library.display())));
    }
    Ok(library)
}

/// Open a library by absolute path for the rest of the process.
fn open(path: &Path) -> Result<(), String> {
    static KEPT: std::sync::Mutex<Vec<Library>> = std::sync::Mutex::new(Vec::new());
    let lib = unsafe { Library::open(Some(path), RTLD_NOW | RTLD_GLOBAL) }.map_err(|e| e.to_string())?;
    KEPT.lock().unwrap_or_else(|p| p.into_inner()).push(lib);
    Ok(())
}

fn find_builtins(dir: &Path) -> Option<PathBuf> {
    let prefix = format!("libnvrtc-builtins.so.{CUDA_MAJOR}.");
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with(&prefix)))
        .collect();
    found.sort();
    found.pop()
}

/// `<root>/lib64` → `<root>/include`; `targets/x86_64-linux/lib` → `targets/x86_64-linux/include`;
/// the wheels' `nvidia/cu13/lib` → `nvidia/cu13/include`. Else the usual roots.
fn include_dir_for(lib_dir: &Path) -> Option<PathBuf> {
    let mut candidates: Vec<PathBuf> = lib_dir.parent().map(|p| p.join("include")).into_iter().collect();
    for var in ["CUDA_HOME", "CUDA_PATH"] {
        if let Some(root) = std::env::var_os(var) {
            candidates.push(PathBuf::from(root).join("include"));
        }
    }
    candidates.push(PathBuf::from("/usr/local/cuda/include"));
    candidates.into_iter().find(|d| d.join("cuda_fp16.h").is_file())
}

/// Folders to search, with where each came from, in priority order; `None` stands for the
/// dynamic loader's own search.
fn search_list() -> Vec<(Option<PathBuf>, String)> {
    let mut out = Vec::new();
    if let Some(p) = std::env::var_os("PEAK_NVRTC_PATH") {
        let p = PathBuf::from(p);
        let dir = if p.is_file() { p.parent().map(Path::to_path_buf).unwrap_or_default() } else { p };
        for sub in ["", "lib", "lib64"] {
            out.push((Some(dir.join(sub)), "PEAK_NVRTC_PATH".to_string()));
        }
    }
    let toolkit = |root: PathBuf, origin: &str, out: &mut Vec<(Option<PathBuf>, String)>| {
        for sub in ["lib64", "lib", "targets/x86_64-linux/lib"] {
            out.push((Some(root.join(sub)), origin.to_string()));
        }
    };
    for var in ["CUDA_HOME", "CUDA_PATH"] {
        if let Some(root) = std::env::var_os(var) {
            toolkit(PathBuf::from(root), var, &mut out);
        }
    }
    out.push((None, "the dynamic loader's search path".to_string()));
    toolkit(PathBuf::from("/usr/local/cuda"), "/usr/local/cuda", &mut out);
    for nvidia in python_nvidia_dirs() {
        let Ok(entries) = std::fs::read_dir(&nvidia) else { continue };
        let mut libs: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path().join("lib"))).filter(|p| p.is_dir()).collect();
        libs.sort();
        out.extend(libs.into_iter().map(|p| (Some(p), "python site-packages".to_string())));
    }
    out
}

fn searched_places() -> String {
    let mut seen = Vec::new();
    for (_, origin) in search_list() {
        if !seen.contains(&origin) {
            seen.push(origin);
        }
    }
    seen.join(", ")
}

/// The first place holding `file_name`, as an absolute path, and where it was found.
fn locate(file_name: &str) -> Option<(PathBuf, String)> {
    for (dir, origin) in search_list() {
        match dir {
            Some(dir) => {
                let path = dir.join(file_name);
                if path.is_file() {
                    return Some((path, origin));
                }
            }
            None => {
                if let Some(path) = loaded_path(file_name) {
                    return Some((path, origin));
                }
            }
        }
    }
    None
}

/// Where the dynamic loader finds `file_name` by itself, if it does.
fn loaded_path(file_name: &str) -> Option<PathBuf> {
    let lib = unsafe { Library::open(Some(file_name), RTLD_NOW) }.ok()?;
    // Any exported symbol tells dladdr which file the library came from.
    let symbol = ["nvrtcVersion", "cublasLtCreate", "cuInit"]
        .iter()
        .find_map(|s| unsafe { lib.get::<unsafe extern "C" fn()>(s.as_bytes()) }.ok().map(|f| *f as *const c_void))?;
    let mut info = libc::Dl_info { dli_fname: std::ptr::null(), dli_fbase: std::ptr::null_mut(), dli_sname: std::ptr::null(), dli_saddr: std::ptr::null_mut() };
    if unsafe { libc::dladdr(symbol, &mut info) } == 0 || info.dli_fname.is_null() {
        return None;
    }
    let path = PathBuf::from(unsafe { CStr::from_ptr(info.dli_fname) }.to_string_lossy().into_owned());
    path.canonicalize().ok().or(Some(path))
}

/// `site-packages/nvidia` folders of python3, where the NVIDIA wheels install.
fn python_nvidia_dirs() -> Vec<PathBuf> {
    static DIRS: OnceLock<Vec<PathBuf>> = OnceLock::new();
    DIRS.get_or_init(|| {
        let python = std::env::var("PEAK_PYTHON").unwrap_or_else(|_| "python3".into());
        // `nvidia` is a namespace package: its __path__ lists every site-packages copy.
        let script = "import site, os\ntry:\n    import nvidia\n    [print(p) for p in nvidia.__path__]\nexcept Exception:\n    pass\nfor p in site.getsitepackages() + [site.getusersitepackages()]:\n    print(os.path.join(p, 'nvidia'))\n";
        let Ok(output) = std::process::Command::new(python).args(["-c", script]).stderr(std::process::Stdio::null()).output() else {
            return Vec::new();
        };
        let mut dirs: Vec<PathBuf> = Vec::new();
        for line in String::from_utf8_lossy(&output.stdout).lines() {
            let dir = PathBuf::from(line.trim());
            if dir.is_dir() && !dirs.contains(&dir) {
                dirs.push(dir);
            }
        }
        dirs
    })
    .clone()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn include_dir_is_the_sibling_of_lib() {
        let root = tempfile::tempdir().unwrap();
        let lib = root.path().join("cu13/lib");
        let include = root.path().join("cu13/include");
        std::fs::create_dir_all(&lib).unwrap();
        std::fs::create_dir_all(&include).unwrap();
        std::fs::write(include.join("cuda_fp16.h"), "").unwrap();
        assert_eq!(include_dir_for(&lib), Some(include));
    }

    #[test]
    fn builtins_are_found_beside_nvrtc_and_alt_builds_are_not_taken_for_them() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("libnvrtc-builtins.alt.so.13.0"), "").unwrap();
        assert_eq!(find_builtins(dir.path()), None);
        std::fs::write(dir.path().join("libnvrtc-builtins.so.13.0"), "").unwrap();
        assert_eq!(find_builtins(dir.path()), Some(dir.path().join("libnvrtc-builtins.so.13.0")));
    }

    #[test]
    fn every_place_searched_is_named_in_messages() {
        let places = searched_places();
        assert!(places.contains("/usr/local/cuda"), "{places}");
        assert!(places.contains("dynamic loader"), "{places}");
    }
}
