//! Tuning per shape, exported: the record's best configuration for every input
//! configuration it tuned (`performance.json`'s `runs[].best`), as a host dispatch table.
//!
//! Tuning parameters are compile-time constants, so every distinct configuration is one
//! instantiation of the kernel (an OpenCL program built with its `-D` options; for CUDA and
//! HIP a copy of the kernel file in a namespace of its own, `kernels.cuh`). `dispatch.h`, plain C that C++ also
//! compiles, maps a shape (the inputs' values) to an instantiation:
//!
//! - a tuned shape gets its own best configuration;
//! - any other shape gets the configuration of the nearest tuned shape (the smallest
//!   product over the inputs of max(v, t) / min(v, t), i.e. the smallest sum of
//!   |log(v / t)|) whose configuration satisfies the manifest's constraints at that shape,
//!   else of the next nearest, and so on; -1 where no configuration is valid. Where a
//!   constraint cannot be written in C, validity is not checked and the header says so.
//!
//! The kernel file's `#ifndef` defaults are the record's overall best configuration, so
//! the file built with no options is that one.

use indexmap::IndexMap;
use peak_record::Ranked;
use peak_spec::ExecParams;
use serde::Serialize;

use crate::source::Source;
use crate::{ExportError, Result, cexpr};

#[derive(Debug, Clone, Serialize)]
pub struct TunedShape {
    pub params: ExecParams,
    /// Index into [`Table::configs`].
    pub config: usize,
    pub time_ms: Option<f64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Table {
    /// The inputs, in the manifest's order: a shape is their values.
    pub inputs: Vec<String>,
    /// The distinct configurations, in the order the tuned shapes first use them.
    pub configs: Vec<IndexMap<String, i64>>,
    pub shapes: Vec<TunedShape>,
    /// The record's overall best configuration (index into `configs`).
    pub fallback: usize,
    /// The manifest's constraints.
    pub constraints: Vec<String>,
    /// The constraints as C, or None where one cannot be translated.
    pub constraints_c: Option<Vec<String>>,
}

impl Table {
    /// The table of `source`'s performance record; refused where the record tuned fewer
    /// than one shape.
    pub fn from_source(source: &Source) -> Result<Table> {
        let manifest = &source.ctx.manifest;
        let inputs: Vec<String> = manifest.inputs.keys().cloned().collect();
        let runs: Vec<Ranked> = source.performance.runs().iter().filter_map(|r| r.best.clone()).collect();
        if runs.is_empty() {
            return Err(ExportError::Usage(match source.origin.kind.as_str() {
                "context" => "--dispatch needs a checkpoint's performance record (tuned shapes); a context folder has none".to_string(),
                _ => "--dispatch: the checkpoint's performance record holds no tuned shape (deferred or not measured)".to_string(),
            }));
        }
        let mut configs: Vec<IndexMap<String, i64>> = Vec::new();
        let mut shapes = Vec::new();
        for Ranked { params, time_ms, .. } in runs {
            if inputs.iter().any(|n| !params.inputs.contains_key(n)) || manifest.tuning.keys().any(|n| !params.tuning.contains_key(n)) {
                return Err(ExportError::Usage(format!(
                    "--dispatch: the record's tuned shape {params} does not name every input and tuning parameter of the manifest"
                )));
            }
            let config = match configs.iter().position(|c| *c == params.tuning) {
                Some(i) => i,
                None => {
                    configs.push(params.tuning.clone());
                    configs.len() - 1
                }
            };
            shapes.push(TunedShape { params, config, time_ms: Some(time_ms) });
        }
        let fallback = source.performance.best.as_ref().and_then(|b| configs.iter().position(|c| *c == b.params.tuning)).unwrap_or(0);
        let constraints: Vec<String> = manifest.constraints.inputs.iter().chain(&manifest.constraints.tuning).cloned().collect();
        let names: Vec<&str> = manifest.inputs.keys().chain(manifest.tuning.keys()).map(String::as_str).collect();
        let constraints_c = constraints.iter().map(|c| cexpr::to_c(c, &names)).collect::<Option<Vec<_>>>();
        Ok(Table { inputs, configs, shapes, fallback, constraints, constraints_c })
    }

    /// One line per configuration: `BLOCK_X=16 BLOCK_Y=8`.
    pub fn describe(&self, config: usize) -> String {
        self.configs[config].iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(" ")
    }

    /// A shape as `n=256 m=3`.
    pub fn describe_shape(&self, shape: &TunedShape) -> String {
        shape.params.inputs.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(" ")
    }
}

/// `dispatch.h`: the configurations, the tuned shapes and `peak_dispatch`.
pub fn header(table: &Table) -> String {
    let mut h = String::new();
    h.push_str("/* The dispatch table by shape, exported by peak from the performance record's best\n");
    h.push_str(" * configuration per tuned shape. Plain C (C++ compiles it too).\n *\n");
    h.push_str(" * peak_dispatch(inputs) gives the configuration for a shape (the inputs' values, in the\n");
    h.push_str(" * order of PEAK_INPUT_NAMES): a tuned shape gets its own best configuration; any other\n");
    h.push_str(" * shape the configuration of the nearest tuned shape (the smallest product over the\n");
    h.push_str(" * inputs of max(v, t) / min(v, t)) that is valid at that shape, else of the next\n");
    h.push_str(" * nearest, and so on; -1 where no configuration is valid.\n");
    h.push_str(&format!(" * PEAK_FALLBACK_CONFIG ({}) is the record's overall best: the kernel file's defaults.\n", table.fallback));
    match &table.constraints_c {
        Some(_) if table.constraints.is_empty() => h.push_str(" * The manifest has no constraints: every configuration is valid at every shape.\n"),
        Some(_) => h.push_str(" * Valid: the manifest's constraints hold (peak_config_valid).\n"),
        None => h.push_str(&format!(
            " * The manifest's constraints could not all be written in C ({}): validity is NOT checked,\n * so check them yourself for a shape that was not tuned.\n",
            table.constraints.join("; ").replace("*/", "* /")
        )),
    }
    h.push_str(" * A launch's geometry (grid, block, shared memory) comes from the context's launch script;\n");
    h.push_str(" * the harness holds it for the tuned shapes only.\n */\n");
    h.push_str("#ifndef PEAK_DISPATCH_H\n#define PEAK_DISPATCH_H\n\n");
    h.push_str(&format!(
        "#define PEAK_N_INPUTS {}\n#define PEAK_N_CONFIGS {}\n#define PEAK_N_TUNED {}\n#define PEAK_FALLBACK_CONFIG {}\n",
        table.inputs.len().max(1),
        table.configs.len(),
        table.shapes.len(),
        table.fallback
    ));
    let quoted: Vec<String> = table.inputs.iter().map(|n| format!("\"{n}\"")).collect();
    h.push_str(&format!(
        "static const char *const PEAK_INPUT_NAMES[PEAK_N_INPUTS] = {{ {} }};\n\n",
        if quoted.is_empty() { "0".to_string() } else { quoted.join(", ") }
    ));
    h.push_str("/* Each configuration: its tuning parameters, and as compiler options (OpenCL builds each\n * configuration's program with them; CUDA and HIP harnesses use kernels.cuh instead). */\n");
    h.push_str("static const char *const PEAK_CONFIG_NAMES[PEAK_N_CONFIGS] = {\n");
    for c in 0..table.configs.len() {
        h.push_str(&format!("    \"{}\", /* {c} */\n", table.describe(c)));
    }
    h.push_str("};\nstatic const char *const PEAK_CONFIG_OPTIONS[PEAK_N_CONFIGS] = {\n");
    for (c, config) in table.configs.iter().enumerate() {
        let opts: Vec<String> = config.iter().map(|(k, v)| format!("-D {k}={v}")).collect();
        h.push_str(&format!("    \"{}\", /* {c} */\n", opts.join(" ")));
    }
    h.push_str("};\n\n/* The tuned shapes and their best configuration (peak's median time, ms). */\n");
    h.push_str("typedef struct { long long inputs[PEAK_N_INPUTS]; int config; double time_ms; } peak_tuned_shape;\n");
    h.push_str("static const peak_tuned_shape PEAK_TUNED[PEAK_N_TUNED] = {\n");
    for s in &table.shapes {
        let values: Vec<String> = table.inputs.iter().map(|n| format!("{}LL", s.params.inputs[n])).collect();
        let values = if values.is_empty() { "0".to_string() } else { values.join(", ") };
        let time = s.time_ms.map(|t| format!("{t:?}")).unwrap_or_else(|| "-1.0".into());
        h.push_str(&format!("    {{ {{ {values} }}, {}, {time} }}, /* {} */\n", s.config, table.describe_shape(s)));
    }
    h.push_str("};\n\n");
    h.push_str(HELPERS);
    h.push_str("/* Whether configuration `config` satisfies the manifest's constraints at `inputs`. */\n");
    h.push_str("static int peak_config_valid(int config, const long long *inputs) {\n");
    for (i, n) in table.inputs.iter().enumerate() {
        h.push_str(&format!("    const long long {n} = inputs[{i}];\n    (void){n};\n"));
    }
    if table.inputs.is_empty() {
        h.push_str("    (void)inputs;\n");
    }
    match &table.constraints_c {
        Some(cs) if !cs.is_empty() => {
            h.push_str("    switch (config) {\n");
            for (c, config) in table.configs.iter().enumerate() {
                let consts: Vec<String> = config.iter().map(|(k, v)| format!("{k} = {v}LL")).collect();
                let unused: Vec<String> = config.keys().map(|k| format!("(void){k}; ")).collect();
                let body: Vec<String> = cs.iter().map(|e| format!("({e})")).collect();
                let decl = if consts.is_empty() { String::new() } else { format!("const long long {}; ", consts.join(", ")) };
                h.push_str(&format!("    case {c}: {{ {decl}{}return {}; }}\n", unused.concat(), body.join(" && ")));
            }
            h.push_str("    default: return 0;\n    }\n}\n\n");
        }
        _ => h.push_str("    return config >= 0 && config < PEAK_N_CONFIGS;\n}\n\n"),
    }
    h.push_str(DISPATCH);
    h.push_str("#endif /* PEAK_DISPATCH_H */\n");
    h
}

const HELPERS: &str = r#"static long long peak_min(long long a, long long b) { return a < b ? a : b; }
static long long peak_max(long long a, long long b) { return a > b ? a : b; }
static long long peak_ceil_div(long long a, long long b) { return b == 0 ? 0 : (a + b - 1) / b; }
/* How far shape `v` is from tuned shape `t`: the product of max / min over the inputs. */
static double peak_shape_distance(const long long *v, const long long *t) {
    double d = 1.0;
    for (int i = 0; i < PEAK_N_INPUTS; ++i) {
        double a = (double)v[i], b = (double)t[i];
        if (a > 0 && b > 0) d *= a > b ? a / b : b / a;
        else d *= 1.0 + (a > b ? a - b : b - a);
    }
    return d;
}

"#;

const DISPATCH: &str = r#"/* The configuration for the shape `inputs` (see the top of this file), or -1. */
static int peak_dispatch(const long long *inputs) {
    int used[PEAK_N_TUNED];
    for (int i = 0; i < PEAK_N_TUNED; ++i) {
        int same = 1;
        for (int j = 0; j < PEAK_N_INPUTS; ++j) same = same && PEAK_TUNED[i].inputs[j] == inputs[j];
        if (same) return PEAK_TUNED[i].config;
        used[i] = 0;
    }
    /* The nearest tuned shape first, then the next nearest, ... */
    for (int round = 0; round < PEAK_N_TUNED; ++round) {
        int pick = -1;
        double best = 0.0;
        for (int i = 0; i < PEAK_N_TUNED; ++i) {
            if (used[i]) continue;
            double d = peak_shape_distance(inputs, PEAK_TUNED[i].inputs);
            if (pick < 0 || d < best) { pick = i; best = d; }
        }
        used[pick] = 1;
        if (peak_config_valid(PEAK_TUNED[pick].config, inputs)) return PEAK_TUNED[pick].config;
    }
    return -1;
}

"#;
