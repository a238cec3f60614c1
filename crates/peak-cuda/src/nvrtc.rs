//! NVRTC: CUDA C++ (and HIP, through the prelude) to a cubin, in process, with no driver.
//!
//! Every compile asks ptxas for its resource report (`-Xptxas=-v`), which NVRTC returns in
//! the program log; that report is how [`peak_backend::KernelResources`] gets registers,
//! shared memory, stack frame and spills on a machine without a GPU. On a GPU the backend
//! also reads the loaded function's attributes and prefers the driver's figures.
//!
//! Kernel names: launch scripts name kernels as written, so kernels must be declared
//! `extern "C"` (C++ would mangle `matmul` into `_Z6matmulPKfS0_Pfi`). A launch of a name
//! that only exists mangled fails with a message saying so.

use std::ffi::{CStr, CString, c_char};

use cudarc::nvrtc::sys::{self, nvrtcProgram, nvrtcResult};
use peak_backend::{BackendError, CompileRequest, KernelResources};

use crate::hip;
use crate::libs;

/// Which language the source is in. HIP goes through the translation prelude.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    Cuda,
    Hip,
}

/// The target of a compile: a real architecture such as `sm_90` or `sm_90a`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Arch(String);

impl Arch {
    /// Parse `sm_XY` or `sm_XYa`; anything else is refused because only those give a cubin.
    pub fn parse(text: &str) -> Result<Arch, String> {
        let rest = text.strip_prefix("sm_").ok_or_else(|| format!("architecture '{text}' must look like sm_90 or sm_90a"))?;
        let digits = rest.strip_suffix('a').or_else(|| rest.strip_suffix('f')).unwrap_or(rest);
        if digits.len() < 2 || !digits.chars().all(|c| c.is_ascii_digit()) {
            return Err(format!("architecture '{text}' must look like sm_90 or sm_90a"));
        }
        Ok(Arch(text.to_string()))
    }

    /// The architecture a device of compute capability `major.minor` gets. Hopper (9.0)
    /// gets `sm_90a`: the cubin is for this device alone anyway, and the `a` target is
    /// what allows wgmma and setmaxnreg, which later matmul transformations use.
    pub fn for_device(major: i32, minor: i32) -> Arch {
        let suffix = if (major, minor) == (9, 0) { "a" } else { "" };
        Arch(format!("sm_{major}{minor}{suffix}"))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Default for Arch {
    /// The H200's: what `peak compile` targets when no architecture is named.
    fn default() -> Self {
        Arch::for_device(9, 0)
    }
}

impl std::fmt::Display for Arch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// A compiled program, before any driver has seen it.
#[derive(Debug, Clone)]
pub struct Cubin {
    pub image: Vec<u8>,
    /// NVRTC's messages without ptxas's resource report (which is in `kernels`).
    pub log: String,
    pub options: Vec<String>,
    /// Entry functions in the order ptxas compiled them, with their resources.
    pub kernels: Vec<KernelResources>,
}

/// NVRTC's version as "13.0".
pub fn version() -> Result<String, BackendError> {
    let install = libs::nvrtc()?;
    Ok(format!("{}.{}", install.version.0, install.version.1))
}

/// What nvcc's implicit host headers (`math.h`, `float.h`, `limits.h`, `sys/types.h`)
/// give device code and NVRTC does not, for CUDA and HIP alike: kernels written for nvcc
/// use `INFINITY`, `FLT_MAX`, `M_PI` or `uint` freely. Each macro is guarded, so a source
/// that defines its own keeps it (with a redefinition warning where they differ); the
/// typedefs repeat glibc's, which C++ allows. `INFINITY` and `NAN` are constant
/// expressions, as `math.h`'s are, so `constexpr` code can use them. Its own `#line` keeps
/// it from being mistaken for lines of the context's file in messages.
pub const PRELUDE: &str = r#"#line 1 "peak-nvrtc-prelude"
#ifndef INFINITY
#define INFINITY (1.0f / 0.0f)
#endif
#ifndef NAN
#define NAN (0.0f / 0.0f)
#endif
#ifndef HUGE_VALF
#define HUGE_VALF INFINITY
#endif
#ifndef FLT_MAX
#define FLT_MAX 3.40282346638528859812e+38F
#endif
#ifndef FLT_MIN
#define FLT_MIN 1.17549435082228750797e-38F
#endif
#ifndef FLT_EPSILON
#define FLT_EPSILON 1.1920928955078125e-07F
#endif
#ifndef DBL_MAX
#define DBL_MAX 1.79769313486231570815e+308
#endif
#ifndef DBL_MIN
#define DBL_MIN 2.22507385850720138309e-308
#endif
#ifndef DBL_EPSILON
#define DBL_EPSILON 2.22044604925031308085e-16
#endif
#ifndef INT_MAX
#define INT_MAX 2147483647
#endif
#ifndef INT_MIN
#define INT_MIN (-INT_MAX - 1)
#endif
#ifndef UINT_MAX
#define UINT_MAX 4294967295U
#endif
#ifndef M_E
#define M_E 2.7182818284590452354
#endif
#ifndef M_LOG2E
#define M_LOG2E 1.4426950408889634074
#endif
#ifndef M_LOG10E
#define M_LOG10E 0.43429448190325182765
#endif
#ifndef M_LN2
#define M_LN2 0.69314718055994530942
#endif
#ifndef M_LN10
#define M_LN10 2.30258509299404568402
#endif
#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif
#ifndef M_PI_2
#define M_PI_2 1.57079632679489661923
#endif
#ifndef M_PI_4
#define M_PI_4 0.78539816339744830962
#endif
#ifndef M_1_PI
#define M_1_PI 0.31830988618379067154
#endif
#ifndef M_2_PI
#define M_2_PI 0.63661977236758134308
#endif
#ifndef M_2_SQRTPI
#define M_2_SQRTPI 1.12837916709551257390
#endif
#ifndef M_SQRT2
#define M_SQRT2 1.41421356237309504880
#endif
#ifndef M_SQRT1_2
#define M_SQRT1_2 0.70710678118654752440
#endif
typedef unsigned int uint;
typedef unsigned short ushort;
"#;

/// The options every compile passes after `--gpu-architecture`, before `-I` and the
/// tuning `-D`s. NVRTC 12.9 and later keep a disk cache of compiled programs; a compile
/// served from it runs no ptxas, so the resource report would be missing, and compile
/// times would measure the cache (the tuner caches compiled variants itself). An exported
/// CUDA harness compiles its kernels with these too, so it times the code peak timed.
pub const FIXED_OPTIONS: [&str; 3] = ["--no-cache", "-lineinfo", "-Xptxas=-v"];

/// The options a compile of `request` passes to NVRTC.
pub fn options(request: &CompileRequest, arch: &Arch) -> Result<Vec<String>, BackendError> {
    let install = libs::nvrtc()?;
    let mut options = vec![format!("--gpu-architecture={arch}")];
    options.extend(FIXED_OPTIONS.iter().map(|o| o.to_string()));
    if let Some(include) = &install.include_dir {
        options.push(format!("-I{}", include.display()));
    }
    for (name, value) in &request.defines {
        options.push(format!("-D{name}={value}"));
    }
    Ok(options)
}

/// Compile to a cubin for `arch`.
pub fn compile(request: &CompileRequest, dialect: Dialect, arch: &Arch) -> Result<Cubin, BackendError> {
    let options = options(request, arch)?;
    let internal = |what: &str, status: nvrtcResult| BackendError::Internal(format!("NVRTC {what}: {}", error_string(status)));
    let nul = |what: &str| BackendError::Compile { log: format!("the {what} contains a NUL byte"), options: options.join(" ") };

    // `#line` makes every message name the context's file with its own line numbers.
    let file = request.file_name.replace(['"', '\\'], "_");
    let text = match dialect {
        Dialect::Cuda => format!("{PRELUDE}#line 1 \"{file}\"\n{}", request.source),
        // hipcc includes hip_runtime.h implicitly; so does the prelude.
        Dialect::Hip => format!("#include <hip/hip_runtime.h>\n{PRELUDE}#line 1 \"{file}\"\n{}", request.source),
    };
    let source = CString::new(text).map_err(|_| nul("source"))?;
    let name = CString::new(file.clone()).map_err(|_| nul("file name"))?;
    // hip::HEADERS are string constants of this crate, none with a NUL byte.
    const HIP_NUL: &str = "the bundled HIP headers and their names hold no NUL byte";
    let headers: Vec<(CString, CString)> = match dialect {
        Dialect::Cuda => Vec::new(),
        Dialect::Hip => hip::HEADERS.iter().map(|(n, t)| (CString::new(*t).expect(HIP_NUL), CString::new(*n).expect(HIP_NUL))).collect(),
    };
    let header_texts: Vec<*const c_char> = headers.iter().map(|(t, _)| t.as_ptr()).collect();
    let header_names: Vec<*const c_char> = headers.iter().map(|(_, n)| n.as_ptr()).collect();
    let c_options: Vec<CString> = options.iter().map(|o| CString::new(o.as_str())).collect::<Result<_, _>>().map_err(|_| nul("options"))?;
    let option_ptrs: Vec<*const c_char> = c_options.iter().map(|o| o.as_ptr()).collect();

    let mut program: nvrtcProgram = std::ptr::null_mut();
    let status = unsafe {
        sys::nvrtcCreateProgram(
            &mut program,
            source.as_ptr(),
            name.as_ptr(),
            headers.len() as i32,
            if headers.is_empty() { std::ptr::null() } else { header_texts.as_ptr() },
            if headers.is_empty() { std::ptr::null() } else { header_names.as_ptr() },
        )
    };
    if status != nvrtcResult::NVRTC_SUCCESS {
        return Err(internal("creating a program", status));
    }
    let program = Program(program);
    let status = unsafe { sys::nvrtcCompileProgram(program.0, option_ptrs.len() as i32, option_ptrs.as_ptr()) };
    let log = program.log()?;
    if status != nvrtcResult::NVRTC_SUCCESS {
        let log = if log.trim().is_empty() { error_string(status) } else { log };
        return Err(BackendError::Compile { log, options: options.join(" ") });
    }
    let mut size = 0usize;
    let status = unsafe { sys::nvrtcGetCUBINSize(program.0, &mut size) };
    if status != nvrtcResult::NVRTC_SUCCESS {
        return Err(internal("reading the cubin size", status));
    }
    let mut image = vec![0u8; size];
    let status = unsafe { sys::nvrtcGetCUBIN(program.0, image.as_mut_ptr().cast()) };
    if status != nvrtcResult::NVRTC_SUCCESS {
        return Err(internal("reading the cubin", status));
    }
    let (messages, kernels) = parse_ptxas_report(&log);
    Ok(Cubin { image, log: messages, options, kernels })
}

/// Destroys the program on every path.
struct Program(nvrtcProgram);

impl Program {
    fn log(&self) -> Result<String, BackendError> {
        let mut size = 0usize;
        let status = unsafe { sys::nvrtcGetProgramLogSize(self.0, &mut size) };
        if status != nvrtcResult::NVRTC_SUCCESS {
            return Err(BackendError::Internal(format!("NVRTC reading the log size: {}", error_string(status))));
        }
        let mut buf = vec![0u8; size.max(1)];
        let status = unsafe { sys::nvrtcGetProgramLog(self.0, buf.as_mut_ptr().cast()) };
        if status != nvrtcResult::NVRTC_SUCCESS {
            return Err(BackendError::Internal(format!("NVRTC reading the log: {}", error_string(status))));
        }
        let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
        Ok(String::from_utf8_lossy(&buf[..end]).into_owned())
    }
}

impl Drop for Program {
    fn drop(&mut self) {
        unsafe {
            sys::nvrtcDestroyProgram(&mut self.0);
        }
    }
}

fn error_string(status: nvrtcResult) -> String {
    let ptr = unsafe { sys::nvrtcGetErrorString(status) };
    if ptr.is_null() {
        return format!("{status:?}");
    }
    unsafe { CStr::from_ptr(ptr) }.to_string_lossy().into_owned()
}

/// Split NVRTC's log into the compiler's own messages and ptxas's per-kernel report:
///
/// ```text
/// ptxas info    : Compiling entry function 'k' for 'sm_90'
/// ptxas info    : Function properties for k
/// ptxas         .     256 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
/// ptxas info    : Used 32 registers, used 1 barriers, 256 bytes cumulative stack size, 1024 bytes smem
/// ```
///
/// "Function properties" also appears for non-inlined device functions; only entry
/// functions (kernels) are reported.
pub fn parse_ptxas_report(log: &str) -> (String, Vec<KernelResources>) {
    let mut messages = String::new();
    let mut kernels: Vec<KernelResources> = Vec::new();
    let mut properties_for: Option<String> = None;
    let mut current: Option<usize> = None;
    for line in log.lines() {
        let Some(rest) = line.strip_prefix("ptxas") else {
            messages.push_str(line);
            messages.push('\n');
            continue;
        };
        let text = rest.trim_start().trim_start_matches("info").trim_start().trim_start_matches(':').trim();
        if let Some(entry) = text.strip_prefix("Compiling entry function '") {
            let name = entry.split('\'').next().unwrap_or_default().to_string();
            kernels.push(KernelResources { name, registers: Some(0), shared_bytes: Some(0), ..Default::default() });
            current = Some(kernels.len() - 1);
        } else if let Some(name) = text.strip_prefix("Function properties for ") {
            properties_for = Some(name.trim().to_string());
        } else if text.starts_with('.') || text.contains("bytes stack frame") {
            let Some(kernel) = properties_for.as_ref().and_then(|n| kernels.iter_mut().find(|k| &k.name == n)) else { continue };
            for (value, unit) in numbers_with_units(text.trim_start_matches('.')) {
                match unit.as_str() {
                    "bytes stack frame" => kernel.local_bytes = Some(value),
                    "bytes spill stores" => kernel.spill_stores_bytes = Some(value),
                    "bytes spill loads" => kernel.spill_loads_bytes = Some(value),
                    _ => {}
                }
            }
        } else if text.starts_with("Used ") {
            let Some(kernel) = current.and_then(|i| kernels.get_mut(i)) else { continue };
            for (value, unit) in numbers_with_units(text.trim_start_matches("Used ")) {
                match unit.as_str() {
                    "registers" => kernel.registers = Some(value),
                    "bytes smem" => kernel.shared_bytes = Some(value),
                    _ => {}
                }
            }
        } else if text.starts_with("error") || text.starts_with("warning") || text.starts_with("fatal") {
            // ptxas's own warnings and errors (C7508 and friends) belong in the log.
            messages.push_str(line);
            messages.push('\n');
        }
    }
    (messages.trim_end().to_string(), kernels)
}

/// "32 registers, used 1 barriers, 1024 bytes smem" → [(32, "registers"), (1, "barriers"), (1024, "bytes smem")]
fn numbers_with_units(text: &str) -> Vec<(u32, String)> {
    text.split(',')
        .filter_map(|part| {
            let part = part.trim().trim_start_matches("used ").trim();
            let (number, unit) = part.split_once(char::is_whitespace)?;
            Some((number.parse().ok()?, unit.trim().to_string()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const REPORT: &str = "ptxas info    : 0 bytes gmem\n\
ptxas info    : Compiling entry function 'k' for 'sm_90'\n\
ptxas info    : Function properties for k\n\
ptxas         .     256 bytes stack frame, 8 bytes spill stores, 12 bytes spill loads\n\
ptxas info    : Used 32 registers, used 1 barriers, 256 bytes cumulative stack size, 1024 bytes smem\n\
ptxas info    : Function properties for helper\n\
ptxas         .     16 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n\
ptxas info    : Compiling entry function 'k2' for 'sm_90'\n\
ptxas info    : Function properties for k2\n\
ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n\
ptxas info    : Used 8 registers, used 0 barriers, 380 bytes cmem[0]\n\
ptxas info    : Compile time = 12.318 ms\n\
k.cu(3): warning #177-D: variable \"x\" was declared but never referenced\n";

    #[test]
    fn ptxas_report_gives_resources_per_kernel() {
        let (messages, kernels) = parse_ptxas_report(REPORT);
        assert_eq!(kernels.len(), 2, "{kernels:?}");
        let k = &kernels[0];
        assert_eq!((k.name.as_str(), k.registers, k.shared_bytes, k.local_bytes), ("k", Some(32), Some(1024), Some(256)));
        assert_eq!((k.spill_stores_bytes, k.spill_loads_bytes), (Some(8), Some(12)));
        let k2 = &kernels[1];
        assert_eq!((k2.name.as_str(), k2.registers, k2.shared_bytes, k2.local_bytes), ("k2", Some(8), Some(0), Some(0)));
        assert!(messages.contains("warning #177-D"), "{messages}");
        assert!(!messages.contains("ptxas info"), "{messages}");
    }

    #[test]
    fn architectures_parse_and_follow_the_device() {
        assert_eq!(Arch::for_device(9, 0).as_str(), "sm_90a");
        assert_eq!(Arch::for_device(8, 6).as_str(), "sm_86");
        assert!(Arch::parse("sm_90").is_ok());
        assert!(Arch::parse("sm_100a").is_ok());
        assert!(Arch::parse("compute_90").is_err());
        assert!(Arch::parse("sm_x").is_err());
    }
}
