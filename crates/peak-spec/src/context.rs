//! A kernel context on disk: a folder with `peak.toml` and the source file it names.

use std::path::{Path, PathBuf};

use indexmap::IndexMap;
use rhai::Engine;

use crate::error::SpecError;
use crate::expr::{Expr, expression_engine};
use crate::manifest::{Language, Manifest, MatmulShape, Tolerance};
use crate::regions::{Region, Regions};
use crate::space::Space;

pub const MANIFEST_FILE: &str = "peak.toml";

/// A loaded, validated kernel context.
#[derive(Debug, Clone)]
pub struct Context {
    /// Where it was loaded from; used to name files in errors.
    pub dir: PathBuf,
    pub manifest: Manifest,
    pub regions: Regions,
}

impl Context {
    /// Load and validate a context folder (or its `peak.toml` directly).
    pub fn load(path: impl AsRef<Path>) -> Result<Context, SpecError> {
        let path = path.as_ref();
        let dir = if path.is_file() { path.parent().unwrap_or(Path::new(".")).to_path_buf() } else { path.to_path_buf() };
        let manifest_path = dir.join(MANIFEST_FILE);
        let manifest_name = manifest_path.display().to_string();
        let text = std::fs::read_to_string(&manifest_path).map_err(|e| SpecError::Io {
            file: manifest_name.clone(),
            message: if e.kind() == std::io::ErrorKind::NotFound {
                format!("no {MANIFEST_FILE} here; a kernel context is a folder holding {MANIFEST_FILE} and its source file")
            } else {
                e.to_string()
            },
        })?;
        let manifest = Manifest::parse(&manifest_name, &text)?;
        let source_path = dir.join(&manifest.kernel.source);
        let source_name = source_path.display().to_string();
        let source = std::fs::read_to_string(&source_path).map_err(|e| SpecError::Field {
            file: manifest_name.clone(),
            field: "kernel.source".into(),
            message: format!("cannot read {source_name}: {e}"),
        })?;
        let regions = Regions::parse(&source_name, &source)?;
        Ok(Context { dir, manifest, regions })
    }

    /// Write the context into `dir` (created if needed). Each file is written to a
    /// temporary name and renamed, so an interrupted save never leaves half a file.
    pub fn save(&self, dir: impl AsRef<Path>) -> Result<(), SpecError> {
        let dir = dir.as_ref();
        let io = |file: &Path, e: std::io::Error| SpecError::Io { file: file.display().to_string(), message: e.to_string() };
        std::fs::create_dir_all(dir).map_err(|e| io(dir, e))?;
        let manifest_text = self.manifest.to_toml();
        write_atomically(&dir.join(MANIFEST_FILE), &manifest_text).map_err(|e| io(&dir.join(MANIFEST_FILE), e))?;
        let source = dir.join(&self.manifest.kernel.source);
        write_atomically(&source, &self.regions.render()).map_err(|e| io(&source, e))
    }

    pub fn name(&self) -> &str {
        &self.manifest.kernel.name
    }

    pub fn backend(&self) -> Language {
        self.manifest.kernel.backend
    }

    pub fn manifest_path(&self) -> PathBuf {
        self.dir.join(MANIFEST_FILE)
    }

    pub fn source_path(&self) -> PathBuf {
        self.dir.join(&self.manifest.kernel.source)
    }

    pub fn region(&self, region: Region) -> &str {
        self.regions.get(region)
    }

    /// Evaluate an expression over the scalar inputs (a size, `kernel.flops`, an
    /// accumulation depth) at one execution parameter. Manifest expressions were checked
    /// when the context loaded, so `None` only means the value is out of range.
    pub fn eval_input_expr(&self, text: &str, params: &crate::ExecParams) -> Option<i64> {
        let engine = expression_engine();
        let names: Vec<&str> = self.manifest.inputs.keys().map(String::as_str).collect();
        Expr::compile(&engine, text, &names).ok()?.eval_int(&engine, &mut params.scope()).ok()
    }

    /// Floating-point operations of one run, from `kernel.flops`, if the manifest says.
    pub fn flops(&self, params: &crate::ExecParams) -> Option<f64> {
        self.eval_input_expr(self.manifest.kernel.flops.as_deref()?, params).map(|v| v as f64)
    }

    /// The kernels the launch script runs ([`Regions::launched_kernels`]).
    pub fn launched_kernels(&self) -> std::collections::BTreeSet<String> {
        self.regions.launched_kernels()
    }

    /// What the kernel does: the pattern its manifest declares or implies, else the one
    /// its device code shows (`pattern::infer`), else why neither says.
    pub fn pattern(&self) -> Result<crate::pattern::Inferred, String> {
        match self.manifest.kernel.declared_pattern() {
            Some(pattern) => Ok(crate::pattern::Inferred { pattern, evidence: "declared in peak.toml".into() }),
            None => crate::pattern::infer(self.region(Region::Device)),
        }
    }

    /// The execution-parameter space this context declares.
    pub fn space(&self) -> Space {
        Space::new(&self.manifest).expect("validated when the manifest was parsed")
    }
}

fn write_atomically(path: &Path, text: &str) -> std::io::Result<()> {
    let tmp = path.with_extension("peak-tmp");
    std::fs::write(&tmp, text)?;
    std::fs::rename(&tmp, path)
}

impl Manifest {
    /// Parse and validate manifest text. `file` names the file in errors.
    pub fn parse(file: &str, text: &str) -> Result<Manifest, SpecError> {
        let mut manifest: Manifest = toml::from_str(text).map_err(|e| SpecError::Manifest { file: file.to_string(), message: e.to_string() })?;
        crate::shapes::derive_inputs(&mut manifest);
        manifest.validate(file)?;
        Ok(manifest)
    }

    pub fn to_toml(&self) -> String {
        if self.inputs_from_shapes {
            // The inputs were derived from `[[shapes]]`: written as the user wrote them.
            let written = Manifest { inputs: IndexMap::new(), ..self.clone() };
            return toml::to_string(&written).expect("a manifest always serializes");
        }
        toml::to_string(self).expect("a manifest always serializes")
    }

    /// Check everything serde cannot: domains, names, expressions. The checks run in
    /// stages, each relying on the ones before it: the names declared (expressions can only
    /// be compiled against names known to be unique), the kernel's own fields, then every
    /// expression and every reference to a declared name.
    pub fn validate(&self, file: &str) -> Result<(), SpecError> {
        let field_err = |field: String, message: String| SpecError::Field { file: file.to_string(), field, message };

        self.check_declarations(&field_err)?;
        self.check_kernel_fields(&field_err)?;

        let engine = expression_engine();
        let input_names: Vec<&str> = self.inputs.keys().map(String::as_str).collect();
        let all_names: Vec<&str> = self.inputs.keys().chain(self.tuning.keys()).map(String::as_str).collect();
        self.check_arrays(&engine, &input_names, &field_err)?;
        self.check_constraints(&engine, &input_names, &all_names, &field_err)?;
        if let Some(domain) = &self.kernel.domain
            && !is_identifier(domain)
        {
            return Err(field_err(
                "kernel.domain".into(),
                format!("'{domain}' is not a kind of kernel: expected one word such as matmul, softmax, reduction, stencil or transpose"),
            ));
        }
        self.check_validation_inputs(&field_err)?;
        self.check_roles(&all_names, &field_err)?;
        if let Some(flops) = &self.kernel.flops {
            Expr::compile(&engine, flops, &input_names).map_err(|m| field_err("kernel.flops".into(), format!("`{flops}`: {m}")))?;
        }
        if let Some(mm) = &self.kernel.matmul {
            self.check_matmul(mm, &engine, &input_names, &field_err)?;
        }
        if let Some(tol) = &self.tolerance {
            check_tolerance(tol, &engine, &input_names, &field_err)?;
        }
        Ok(())
    }

    /// Inputs, tuning parameters and arrays share one namespace (the launch script sees them
    /// all as variables), so each name must be an identifier and declared once; with them,
    /// the input and tuning domains, the shapes, and whether the backend has an array's type.
    fn check_declarations<'a>(&'a self, field_err: &impl Fn(String, String) -> SpecError) -> Result<(), SpecError> {
        let mut declared: Vec<&str> = Vec::new();
        let mut declare = |field: String, what: &str, name: &'a str| -> Result<(), SpecError> {
            if !is_identifier(name) {
                return Err(field_err(field, format!("{what} name '{name}' is not an identifier (letters, digits, _; not starting with a digit)")));
            }
            if declared.contains(&name) {
                return Err(field_err(field, format!("'{name}' is declared twice (inputs, scalars, arrays and tuning parameters share one namespace)")));
            }
            declared.push(name);
            Ok(())
        };
        for (name, domain) in &self.inputs {
            declare(format!("inputs.{name}"), "input", name)?;
            domain.expand().map_err(|m| field_err(format!("inputs.{name}"), m))?;
        }
        crate::shapes::check(self).map_err(|(field, message)| field_err(field, message))?;
        for (name, value) in &self.scalars {
            declare(format!("scalars.{name}"), "scalar", name)?;
            if !value.is_finite() {
                return Err(field_err(format!("scalars.{name}"), format!("{value} is not a finite number")));
            }
        }
        for (name, domain) in &self.tuning {
            declare(format!("tuning.{name}"), "tuning parameter", name)?;
            domain.expand().map_err(|m| field_err(format!("tuning.{name}"), m))?;
        }
        for (i, array) in self.arrays.iter().enumerate() {
            declare(format!("arrays[{i}].name"), "array", &array.name)?;
            if array.dtype.is_fp8() && self.kernel.backend != Language::Cuda {
                return Err(field_err(
                    format!("arrays[{i}].type (array {})", array.name),
                    format!(
                        "array '{}' is {}, an 8-bit float, and the {} backend has no fp8 type: fp8 arrays run on the cuda backend (cuda_fp8.h, sm_89 and newer); use f16 or bf16 here",
                        array.name,
                        array.dtype,
                        self.kernel.backend.name()
                    ),
                ));
            }
        }
        Ok(())
    }

    /// The kernel's name, a source file inside the context folder other than the manifest,
    /// and, when there are arrays, an output among them: without one nothing could be checked.
    fn check_kernel_fields(&self, field_err: &impl Fn(String, String) -> SpecError) -> Result<(), SpecError> {
        if self.kernel.name.trim().is_empty() {
            return Err(field_err("kernel.name".into(), "is empty".into()));
        }
        if self.kernel.source.contains("..") || Path::new(&self.kernel.source).is_absolute() {
            return Err(field_err("kernel.source".into(), "must be a file name inside the context folder".into()));
        }
        if self.kernel.source == MANIFEST_FILE {
            return Err(field_err("kernel.source".into(), format!("cannot be {MANIFEST_FILE} itself")));
        }
        if !self.arrays.iter().any(|a| a.output) && !self.arrays.is_empty() {
            return Err(field_err("arrays".into(), "no array has `output = true`; nothing could be checked".into()));
        }
        Ok(())
    }

    /// Each array's size and initialisation, expressions over the scalar inputs only (an
    /// array cannot depend on a tuning parameter).
    fn check_arrays(&self, engine: &Engine, input_names: &[&str], field_err: &impl Fn(String, String) -> SpecError) -> Result<(), SpecError> {
        for (i, array) in self.arrays.iter().enumerate() {
            let field = format!("arrays[{i}].size (array {})", array.name);
            Expr::compile(engine, &array.size, input_names).map_err(|m| field_err(field.clone(), format!("cannot parse `{}`: {m}", array.size)))?;
            let compile = |text: &str| Expr::compile(engine, text, input_names).map(drop);
            array.init.check(array.dtype, &compile).map_err(|(key, m)| field_err(format!("arrays[{i}].{key} (array {})", array.name), m))?;
        }
        Ok(())
    }

    /// Input constraints may name only scalar inputs; tuning constraints also the tuning
    /// parameters.
    fn check_constraints(
        &self,
        engine: &Engine,
        input_names: &[&str],
        all_names: &[&str],
        field_err: &impl Fn(String, String) -> SpecError,
    ) -> Result<(), SpecError> {
        for (i, c) in self.constraints.inputs.iter().enumerate() {
            Expr::compile(engine, c, input_names)
                .map_err(|m| field_err(format!("constraints.inputs[{i}]"), format!("`{c}`: {m} (input constraints may use only scalar inputs)")))?;
        }
        for (i, c) in self.constraints.tuning.iter().enumerate() {
            Expr::compile(engine, c, all_names).map_err(|m| field_err(format!("constraints.tuning[{i}]"), format!("`{c}`: {m}")))?;
        }
        Ok(())
    }

    /// The sizes validation runs at instead of `[inputs]`: each must be a declared input.
    fn check_validation_inputs(&self, field_err: &impl Fn(String, String) -> SpecError) -> Result<(), SpecError> {
        for (name, domain) in &self.validation.inputs {
            let field = format!("validation.inputs.{name}");
            if !self.inputs.contains_key(name) {
                let known: Vec<&str> = self.inputs.keys().map(String::as_str).collect();
                return Err(field_err(field, format!("'{name}' is not a scalar input (the inputs are: {})", known.join(", "))));
            }
            domain.expand().map_err(|m| field_err(field, m))?;
        }
        Ok(())
    }

    /// `[kernel.roles]` maps a transformation's name for a parameter, one this context
    /// lacks, onto one of its inputs or tuning parameters.
    fn check_roles(&self, all_names: &[&str], field_err: &impl Fn(String, String) -> SpecError) -> Result<(), SpecError> {
        for (role, name) in &self.kernel.roles {
            if !is_identifier(role) {
                return Err(field_err(format!("kernel.roles.{role}"), format!("role '{role}' is not an identifier")));
            }
            if !all_names.contains(&name.as_str()) {
                return Err(field_err(
                    format!("kernel.roles.{role}"),
                    format!("'{name}' is not an input or tuning parameter of this context (it has: {})", all_names.join(", ")),
                ));
            }
            if all_names.contains(&role.as_str()) {
                return Err(field_err(
                    format!("kernel.roles.{role}"),
                    format!("the context already has a parameter named '{role}'; a role maps a name the context lacks"),
                ));
            }
        }
        Ok(())
    }

    /// The GEMM `[kernel.matmul]` declares, so prompts and the vendor library see the same
    /// work: its sizes, leading dimensions and strides as expressions over the inputs, its
    /// operands as floating-point arrays of this manifest, and finite scale factors.
    fn check_matmul(&self, mm: &MatmulShape, engine: &Engine, input_names: &[&str], field_err: &impl Fn(String, String) -> SpecError) -> Result<(), SpecError> {
        let optional = [
            ("lda", &mm.lda),
            ("ldb", &mm.ldb),
            ("ldc", &mm.ldc),
            ("batch", &mm.batch),
            ("stride_a", &mm.stride_a),
            ("stride_b", &mm.stride_b),
            ("stride_c", &mm.stride_c),
        ];
        let given = optional.iter().filter_map(|(key, expr)| expr.as_ref().map(|e| (*key, e)));
        for (key, expr) in [("m", &mm.m), ("n", &mm.n), ("k", &mm.k)].into_iter().chain(given) {
            Expr::compile(engine, expr, input_names).map_err(|m| field_err(format!("kernel.matmul.{key}"), format!("`{expr}`: {m}")))?;
        }
        let epilogue = [("bias", &mm.bias), ("residual", &mm.residual)];
        let epilogue = epilogue.iter().filter_map(|(key, array)| array.as_ref().map(|a| (*key, a)));
        for (key, array) in [("a", &mm.a), ("b", &mm.b), ("c", &mm.c)].into_iter().chain(epilogue) {
            let spec = self.arrays.iter().find(|a| &a.name == array);
            match spec {
                None => return Err(field_err(format!("kernel.matmul.{key}"), format!("no array named '{array}'"))),
                Some(s) if !s.dtype.is_float() => {
                    return Err(field_err(
                        format!("kernel.matmul.{key}"),
                        format!("array '{array}' is {}; a GEMM's arrays are f32, f16, bf16, e4m3 or e5m2", s.dtype),
                    ));
                }
                Some(_) => {}
            }
        }
        for (key, value) in [("alpha", mm.alpha), ("beta", mm.beta)] {
            if !value.is_finite() {
                return Err(field_err(format!("kernel.matmul.{key}"), format!("must be a finite number, got {value}")));
            }
        }
        Ok(())
    }
}

/// Tolerance overrides are positive and finite numbers, and the accumulation depth is an
/// expression over the scalar inputs.
fn check_tolerance(tol: &Tolerance, engine: &Engine, input_names: &[&str], field_err: &impl Fn(String, String) -> SpecError) -> Result<(), SpecError> {
    for (key, value) in tol.overrides() {
        if let Some(v) = value
            && !(v > 0.0 && v.is_finite())
        {
            return Err(field_err(format!("tolerance.{key}"), format!("must be a positive number, got {v}")));
        }
    }
    if let Some(acc) = &tol.accumulation {
        Expr::compile(engine, acc, input_names).map_err(|m| field_err("tolerance.accumulation".into(), format!("`{acc}`: {m}")))?;
    }
    Ok(())
}

fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_') && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}
