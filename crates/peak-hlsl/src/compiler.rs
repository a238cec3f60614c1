//! HLSL to SPIR-V: glslang (the default) or DXC, run as subprocesses on temporary files.
//!
//! Each entry point is compiled on its own (both compilers take one entry point per run),
//! so a source with two kernels costs two compiler runs. The entry points are found by
//! scanning the source for `[numthreads(...)]` attributes; see [`entry_points`].

use std::path::{Path, PathBuf};
use std::process::Command;

use peak_backend::{BackendError, CompileRequest};

/// Which HLSL compiler turns the source into SPIR-V.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompilerKind {
    /// Khronos' glslangValidator (Debian: `glslang-tools`). Always available in CI.
    Glslang,
    /// Microsoft's DirectX Shader Compiler with its SPIR-V backend (`dxc -spirv`).
    Dxc,
}

impl CompilerKind {
    /// The environment variable that picks the compiler: `glslang` (default) or `dxc`.
    pub const ENV: &'static str = "PEAK_HLSL_COMPILER";

    /// The compiler named by [`Self::ENV`], glslang when it is unset.
    pub fn from_env() -> Result<CompilerKind, BackendError> {
        match std::env::var(Self::ENV) {
            Err(_) => Ok(CompilerKind::Glslang),
            Ok(v) => v.parse().map_err(|reason| BackendError::Unavailable {
                what: "HLSL compiler".into(),
                reason,
                hint: format!("set {}=glslang or {}=dxc", Self::ENV, Self::ENV),
            }),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            CompilerKind::Glslang => "glslang",
            CompilerKind::Dxc => "dxc",
        }
    }

    /// The program to run: an explicit path from `PEAK_GLSLANG` / `PEAK_DXC`, else the
    /// usual name looked up on PATH.
    fn program(self) -> PathBuf {
        let (var, default) = match self {
            CompilerKind::Glslang => ("PEAK_GLSLANG", "glslangValidator"),
            CompilerKind::Dxc => ("PEAK_DXC", "dxc"),
        };
        std::env::var_os(var).map(PathBuf::from).unwrap_or_else(|| PathBuf::from(default))
    }
}

impl std::str::FromStr for CompilerKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "glslang" | "glslangvalidator" => Ok(CompilerKind::Glslang),
            "dxc" => Ok(CompilerKind::Dxc),
            other => Err(format!("unknown HLSL compiler '{other}': expected glslang or dxc")),
        }
    }
}

const GLSLANG_TARGET: &str = "vulkan1.1";
const DXC_TARGET: &str = "-fspv-target-env=vulkan1.2";

/// A compiler found on this machine.
#[derive(Debug, Clone)]
pub struct Compiler {
    pub kind: CompilerKind,
    pub program: PathBuf,
    /// The first line of the compiler's version output; part of the device's cache key.
    pub version: String,
}

/// One entry point compiled to SPIR-V.
#[derive(Debug, Clone)]
pub struct CompiledEntry {
    pub name: String,
    pub spirv: Vec<u32>,
    /// The compiler command line, for errors found after compiling.
    pub options: String,
    /// Warnings, kept even on success.
    pub log: String,
}

impl Compiler {
    /// Find the compiler and ask its version, or say how to install it.
    pub fn probe(kind: CompilerKind) -> Result<Compiler, BackendError> {
        let program = kind.program();
        let hint = match kind {
            CompilerKind::Glslang => "install glslang (Debian/Ubuntu: `apt-get install glslang-tools`) or set PEAK_GLSLANG to glslangValidator's path",
            CompilerKind::Dxc => {
                "install the DirectX Shader Compiler (github.com/microsoft/DirectXShaderCompiler releases) or set PEAK_DXC to dxc's path; unset PEAK_HLSL_COMPILER to use glslang"
            }
        };
        let output = Command::new(&program)
            .arg(if kind == CompilerKind::Dxc { "--version" } else { "-v" })
            .output()
            .map_err(|e| BackendError::Unavailable { what: format!("the HLSL compiler {}", program.display()), reason: e.to_string(), hint: hint.into() })?;
        let text = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
        let version = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("unknown version").trim().to_string();
        Ok(Compiler { kind, program, version })
    }

    /// The SPIR-V flavour this compiler emits, for [`peak_backend::DeviceInfo::arch`].
    pub fn target(&self) -> &'static str {
        match self.kind {
            CompilerKind::Glslang => "spirv1.3-vulkan1.1",
            CompilerKind::Dxc => "spirv1.5-vulkan1.2",
        }
    }

    /// The command line for one entry point, without the input and output files.
    fn arguments(&self, entry: &str, defines: &[(String, String)]) -> Vec<String> {
        let mut args: Vec<String> = match self.kind {
            // -D: the input is HLSL. --hlsl-enable-16bit-types makes `half` and
            // `float16_t` real 16-bit types, as DXC's -enable-16bit-types does. The target
            // is Vulkan 1.1 (SPIR-V 1.3) because glslang 12 (Debian bookworm) decorates
            // HLSL storage buffers with BufferBlock, which SPIR-V 1.4+ (vulkan1.2) forbids:
            // spirv-val and the validation layers reject that module.
            CompilerKind::Glslang => {
                ["-D", "-V", "-e", entry, "-S", "comp", "--target-env", GLSLANG_TARGET, "--hlsl-enable-16bit-types"].map(String::from).to_vec()
            }
            CompilerKind::Dxc => ["-spirv", "-T", "cs_6_2", "-E", entry, DXC_TARGET, "-enable-16bit-types", "-HV", "2021"].map(String::from).to_vec(),
        };
        for (name, value) in defines {
            args.push(format!("-D{name}={value}"));
        }
        args
    }

    /// Compile one entry point of `request`.
    pub fn compile(&self, request: &CompileRequest, entry: &str) -> Result<CompiledEntry, BackendError> {
        let args = self.arguments(entry, &request.defines);
        let options = format!("{} {}", self.program.display(), args.join(" "));
        let internal = |what: &str, e: std::io::Error| BackendError::Internal(format!("{what}: {e}"));
        let dir = tempfile::Builder::new().prefix("peak-hlsl-").tempdir().map_err(|e| internal("creating a temporary folder", e))?;
        let input = dir.path().join("kernel.hlsl");
        let output = dir.path().join("kernel.spv");
        // `#line` makes the compiler's messages name the context's file and its lines.
        let source = format!("#line 1 \"{}\"\n{}", request.file_name.replace(['"', '\\'], "/"), request.source);
        std::fs::write(&input, source).map_err(|e| internal("writing the HLSL source", e))?;
        let mut command = Command::new(&self.program);
        command.args(&args);
        match self.kind {
            CompilerKind::Glslang => command.arg("-o").arg(&output).arg(&input),
            CompilerKind::Dxc => command.arg("-Fo").arg(&output).arg(&input),
        };
        let result = command.output().map_err(|e| internal(&format!("running {}", self.program.display()), e))?;
        let log = clean_log(&String::from_utf8_lossy(&result.stdout), &String::from_utf8_lossy(&result.stderr), &input);
        if !result.status.success() || !output.exists() {
            return Err(BackendError::Compile { log, options });
        }
        let bytes = std::fs::read(&output).map_err(|e| internal("reading the SPIR-V", e))?;
        let spirv = words(&bytes).map_err(|message| BackendError::Compile { log: format!("{log}\n{message}"), options: options.clone() })?;
        Ok(CompiledEntry { name: entry.to_string(), spirv, options, log })
    }
}

/// The compiler's messages, without glslang's echo of the temporary input's path (the
/// `#line` directive already names the context's file in every real message).
fn clean_log(stdout: &str, stderr: &str, input: &Path) -> String {
    let temp = input.display().to_string();
    stdout.lines().chain(stderr.lines()).filter(|l| l.trim() != temp && !l.trim().is_empty()).collect::<Vec<_>>().join("\n")
}

/// SPIR-V bytes as words (SPIR-V is a stream of little-endian 32-bit words).
fn words(bytes: &[u8]) -> Result<Vec<u32>, String> {
    if !bytes.len().is_multiple_of(4) || bytes.len() < 20 {
        return Err(format!("the compiler wrote {} bytes, not a SPIR-V module", bytes.len()));
    }
    Ok(bytes.chunks_exact(4).map(|c| u32::from_le_bytes(c.try_into().expect("chunks_exact(4) gives 4-byte chunks"))).collect())
}

/// The names of the functions marked `[numthreads(...)]`, in source order: the entry
/// points a launch can name. Comments are skipped; an attribute that is not followed by
/// `void NAME(` (after any further `[...]` attributes) is ignored.
pub fn entry_points(source: &str) -> Vec<String> {
    let code = strip_comments(source);
    let mut found = Vec::new();
    let mut rest = code.as_str();
    while let Some(at) = rest.find("numthreads") {
        rest = &rest[at + "numthreads".len()..];
        let Some(close) = rest.find(']') else { break };
        let mut after = rest[close + 1..].trim_start();
        // Skip further attributes, e.g. [shader("compute")] or [WaveSize(32)].
        while let Some(attr) = after.strip_prefix('[') {
            match attr.find(']') {
                Some(end) => after = attr[end + 1..].trim_start(),
                None => break,
            }
        }
        if let Some(decl) = after.strip_prefix("void")
            && decl.starts_with(char::is_whitespace)
        {
            let decl = decl.trim_start();
            let name: String = decl.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
            if !name.is_empty() && decl[name.len()..].trim_start().starts_with('(') && !found.contains(&name) {
                found.push(name);
            }
        }
    }
    found
}

/// The source with `//` and `/* */` comments blanked (line breaks kept).
fn strip_comments(source: &str) -> String {
    let mut out = String::with_capacity(source.len());
    let mut chars = source.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, chars.peek()) {
            ('/', Some('/')) => {
                for c in chars.by_ref() {
                    if c == '\n' {
                        out.push('\n');
                        break;
                    }
                }
            }
            ('/', Some('*')) => {
                chars.next();
                let mut prev = ' ';
                for c in chars.by_ref() {
                    if c == '\n' {
                        out.push('\n');
                    }
                    if prev == '*' && c == '/' {
                        break;
                    }
                    prev = c;
                }
                out.push(' ');
            }
            _ => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_points_follow_numthreads_and_skip_comments() {
        let src = "// [numthreads(1,1,1)] void commented() {}\n\
                   /* [numthreads(1,1,1)]\n void blocked() {} */\n\
                   [numthreads(BLOCK_X, BLOCK_Y, 1)]\nvoid main(uint3 id : SV_DispatchThreadID) {}\n\
                   [numthreads(64, 1, 1)] [WaveSize(32)]\n void reduce (uint3 id : SV_DispatchThreadID) {}\n\
                   void helper() {}\n\
                   [numthreads(8, 8, 1)] float notvoid() { return 0; }\n";
        assert_eq!(entry_points(src), vec!["main".to_string(), "reduce".to_string()]);
    }

    #[test]
    fn compiler_names_parse() {
        assert_eq!("glslang".parse::<CompilerKind>(), Ok(CompilerKind::Glslang));
        assert_eq!(" DXC ".parse::<CompilerKind>(), Ok(CompilerKind::Dxc));
        assert!("fxc".parse::<CompilerKind>().unwrap_err().contains("glslang or dxc"));
    }

    #[test]
    fn spirv_words_need_whole_words() {
        assert!(words(&[0; 21]).is_err());
        assert_eq!(words(&[1, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]).unwrap()[..2], [1, 2]);
    }
}
