//! The host region: a sandboxed Rhai launch script.
//!
//! The script sees every scalar input and tuning parameter as an integer constant, every
//! manifest array as a buffer value of the same name, and the device's limits
//! (`WARP_SIZE`, `MAX_THREADS_PER_BLOCK`, `MAX_SHARED_BYTES`, `COMPUTE_UNITS`). Its API:
//!
//! | function | effect |
//! |---|---|
//! | `launch(kernel, grid, block, shared_bytes, args...)` | enqueue a kernel; grid/block are an int or `[x, y, z]`; more than 12 args go as one array `[a, b, ...]` |
//! | `alloc(type, count)` | a scratch buffer (`"f32"`, `"f16"`, `"bf16"`, `"i32"`, `"u32"`) |
//! | `fill(buffer, value)` / `copy(src, dst)` | device-side fill and copy, on every run |
//! | `ceil_div(a, b)`, `min`, `max` | grid arithmetic |
//! | `i32(x)`, `u32(x)`, `i64(x)`, `f32(x)` | type a scalar argument (plain ints pass as `i32`, floats as `f32`) |
//! | `invalid(reason)` | declare this execution parameter invalid: it is pruned, not failed |
//!
//! plus whatever the backend adds ([`crate::backend::Backend::script_functions`]).
//!
//! The sandbox: Rhai has no file, network or process access to begin with; `eval` is
//! disabled, the number of operations, call depth and collection sizes are capped, so an
//! LLM-written script that loops forever stops with an error naming its line.

use std::any::TypeId;
use std::sync::{Arc, Mutex};

use peak_spec::{DType, ExecParams};
use rhai::{Dynamic, Engine, EvalAltResult, ImmutableString, NativeCallContext, Position, Scope};
use thiserror::Error;

use crate::backend::{DeviceInfo, OpPhase, ScriptFunction};
use crate::plan::{BackendOp, BufRef, LaunchPlan, OpValue, PlanArg, ScratchSpec, Step};

/// The operation budget of one script run: generous for any real launch computation,
/// small enough that an infinite loop stops in well under a second.
pub const MAX_OPERATIONS: u64 = 1_000_000;

/// Launch arguments after the four fixed ones; Rhai functions have fixed arity, so
/// `launch` is registered once per count up to this. Rhai matches a function whose untyped
/// (`Dynamic`) parameters lie past its 16th only by exact type, never with a `Dynamic`
/// value, so 4 + 12 is the most a call can reach; more arguments go as one array.
const MAX_KERNEL_ARGS: usize = 12;
/// The plan's lock is taken only to push a step or read the plan back; nothing panics
/// while it is held, so it is never poisoned.
const PLAN_LOCK: &str = "the plan's lock is never held across a panic";

#[derive(Debug, Clone, Error, PartialEq)]
pub enum ScriptError {
    #[error("{file}:{line}: launch script: {message}")]
    Failed { file: String, line: usize, message: String },
    /// The script called `invalid(reason)`, or asked for an impossible launch shape.
    #[error("invalid configuration: {reason}")]
    Invalid { reason: String },
}

/// A buffer value inside the script.
#[derive(Debug, Clone, Copy)]
pub struct ScriptBuffer {
    pub buffer: BufRef,
    pub dtype: DType,
    pub count: usize,
}

/// A scalar argument with an explicit type (`u32(x)` ...), or an argument built by a
/// backend function.
#[derive(Debug, Clone)]
struct TypedArg(PlanArg);

/// Marks the error raised by `invalid(reason)` so it can be told apart from real errors.
#[derive(Debug, Clone)]
struct InvalidMarker(String);

/// One array the script can see.
#[derive(Debug, Clone)]
pub struct ScriptArray {
    pub name: String,
    pub dtype: DType,
    pub count: usize,
}

/// Everything a launch script runs against.
pub struct ScriptInput<'a> {
    pub file: &'a str,
    /// The host region's text and the line of the file it starts on.
    pub source: &'a str,
    pub first_line: usize,
    pub params: &'a ExecParams,
    pub arrays: &'a [ScriptArray],
    /// The manifest's `[scalars]`: float values seen by name (passed to a kernel as f32).
    pub scalars: &'a [(String, f64)],
    pub device: &'a DeviceInfo,
    pub extensions: &'a [ScriptFunction],
}

/// Run the launch script and return the plan it recorded.
pub fn build_plan(input: &ScriptInput) -> Result<LaunchPlan, ScriptError> {
    let plan = Arc::new(Mutex::new(LaunchPlan::default()));
    let first_line = input.first_line;
    let engine = sandboxed_engine(&plan, input.extensions, first_line);

    let mut scope = Scope::new();
    for (name, value) in input.params.iter() {
        scope.push_constant(name.to_string(), value);
    }
    for (name, value) in input.scalars {
        scope.push_constant(name.clone(), *value);
    }
    for (i, array) in input.arrays.iter().enumerate() {
        scope.push_constant(array.name.clone(), ScriptBuffer { buffer: BufRef::Array(i), dtype: array.dtype, count: array.count });
    }
    let d = input.device;
    scope.push_constant("WARP_SIZE", i64::from(d.warp_size));
    scope.push_constant("MAX_THREADS_PER_BLOCK", i64::from(d.max_threads_per_block));
    scope.push_constant("MAX_SHARED_BYTES", i64::from(d.max_shared_bytes));
    scope.push_constant("COMPUTE_UNITS", i64::from(d.compute_units));

    let fail = |err: Box<EvalAltResult>| to_script_error(input.file, first_line, &err);
    let ast = engine.compile_with_scope(&scope, input.source).map_err(|e| {
        let pos = e.position();
        ScriptError::Failed { file: input.file.to_string(), line: file_line(first_line, pos), message: strip_position(&e.to_string()) }
    })?;
    engine.run_ast_with_scope(&mut scope, &ast).map_err(fail)?;
    drop(engine);
    let plan = Arc::try_unwrap(plan).map(|m| m.into_inner().expect(PLAN_LOCK)).unwrap_or_else(|arc| arc.lock().expect(PLAN_LOCK).clone());
    if plan.launches() == 0 {
        return Err(ScriptError::Failed {
            file: input.file.to_string(),
            line: first_line,
            message: "the launch script launched no kernel; call launch(kernel, grid, block, shared_bytes, args...)".into(),
        });
    }
    Ok(plan)
}

fn file_line(first_line: usize, pos: Position) -> usize {
    first_line + pos.line().unwrap_or(1).saturating_sub(1)
}

fn strip_position(message: &str) -> String {
    match message.rfind(" (line ") {
        Some(i) if message.ends_with(')') => message[..i].to_string(),
        _ => message.to_string(),
    }
}

fn to_script_error(file: &str, first_line: usize, err: &EvalAltResult) -> ScriptError {
    // Errors raised inside a called function wrap the original; unwrap to the cause.
    let inner = err.unwrap_inner();
    if let EvalAltResult::ErrorRuntime(value, _) = inner
        && let Some(marker) = value.clone().try_cast::<InvalidMarker>()
    {
        return ScriptError::Invalid { reason: marker.0 };
    }
    let message = match inner {
        EvalAltResult::ErrorTooManyOperations(_) => {
            format!("the script ran past its limit of {MAX_OPERATIONS} operations and was stopped; does it loop forever?")
        }
        EvalAltResult::ErrorRuntime(value, _) => value.to_string(),
        EvalAltResult::ErrorFunctionNotFound(signature, _) if signature.starts_with("launch (") => format!(
            "no launch({}) here: launch takes (kernel name, grid, block, shared_bytes) and at most {MAX_KERNEL_ARGS} kernel arguments after them; pass more as one array, launch(kernel, grid, block, shared_bytes, [a, b, ...])",
            signature.trim_start_matches("launch (").trim_end_matches(')')
        ),
        other => strip_position(&other.to_string()),
    };
    ScriptError::Failed { file: file.to_string(), line: file_line(first_line, err.position()), message }
}

type RhaiResult<T> = Result<T, Box<EvalAltResult>>;

fn runtime_error<T>(ctx: &NativeCallContext, message: impl Into<String>) -> RhaiResult<T> {
    Err(Box::new(EvalAltResult::ErrorRuntime(Dynamic::from(message.into()), ctx.call_position())))
}

fn invalid<T>(ctx: &NativeCallContext, reason: String) -> RhaiResult<T> {
    Err(Box::new(EvalAltResult::ErrorRuntime(Dynamic::from(InvalidMarker(reason)), ctx.call_position())))
}

/// The engine a launch script runs in: the sandbox's limits, then peak's API by kind, each
/// function recording into `plan` with the script's line counted from `first_line`.
fn sandboxed_engine(plan: &Arc<Mutex<LaunchPlan>>, extensions: &[ScriptFunction], first_line: usize) -> Engine {
    let mut engine = Engine::new();
    sandbox(&mut engine, plan);
    register_values(&mut engine);
    register_buffers(&mut engine, plan, first_line);
    register_launch(&mut engine, plan, first_line);
    register_extensions(&mut engine, plan, extensions, first_line);
    engine
}

/// No `eval`, caps on operations, call depth and collection sizes, and the script's
/// `print` kept in the plan (so a person can read it) rather than on the worker's stdout.
fn sandbox(engine: &mut Engine, plan: &Arc<Mutex<LaunchPlan>>) {
    engine.disable_symbol("eval");
    engine.set_max_operations(MAX_OPERATIONS);
    engine.set_max_call_levels(32);
    engine.set_max_expr_depths(64, 32);
    engine.set_max_string_size(10_000);
    engine.set_max_array_size(10_000);
    engine.set_max_map_size(1_000);
    {
        let plan = plan.clone();
        engine.on_print(move |text| plan.lock().expect(PLAN_LOCK).printed.push(text.to_string()));
    }
    engine.on_debug(|_, _, _| {});

    // Rhai 1.27's `Array.pad` multiplies the padding by the item's size unchecked, so a
    // length near i64::MAX panics on overflow (found by tests/fuzz.rs). Registered on the
    // engine, this version shadows the package's and refuses an oversized array first.
    engine.register_fn("pad", |ctx: NativeCallContext, array: &mut rhai::Array, len: i64, item: Dynamic| -> RhaiResult<()> {
        let Ok(len) = usize::try_from(len) else { return Ok(()) };
        if len <= array.len() {
            return Ok(());
        }
        let per_item = 1 + nested_elements(&item);
        let total = (len - array.len()).saturating_mul(per_item).saturating_add(array.len());
        if total > ctx.engine().max_array_size() {
            return Err(Box::new(EvalAltResult::ErrorDataTooLarge("Size of array".into(), ctx.call_position())));
        }
        array.resize(len, item);
        Ok(())
    });
}

/// The value side of the API: the buffer and kernel-argument types, grid arithmetic, the
/// typed scalar arguments (`i32(x)` ...) and `invalid(reason)`.
fn register_values(engine: &mut Engine) {
    engine.register_type_with_name::<ScriptBuffer>("Buffer");
    engine.register_get("len", |b: &mut ScriptBuffer| b.count as i64);
    engine.register_type_with_name::<TypedArg>("KernelArg");
    engine.register_fn("ceil_div", peak_spec::expr::ceil_div);
    engine.register_fn("i32", |ctx: NativeCallContext, x: i64| -> RhaiResult<TypedArg> {
        i32::try_from(x).map(|v| TypedArg(PlanArg::I32(v))).or_else(|_| runtime_error(&ctx, format!("i32({x}): out of range")))
    });
    engine.register_fn("u32", |ctx: NativeCallContext, x: i64| -> RhaiResult<TypedArg> {
        u32::try_from(x).map(|v| TypedArg(PlanArg::U32(v))).or_else(|_| runtime_error(&ctx, format!("u32({x}): out of range")))
    });
    engine.register_fn("i64", |x: i64| TypedArg(PlanArg::I64(x)));
    engine.register_fn("f32", |x: f64| TypedArg(PlanArg::F32(x as f32)));
    engine.register_fn("f32", |x: i64| TypedArg(PlanArg::F32(x as f32)));
    engine.register_fn("invalid", |ctx: NativeCallContext, reason: ImmutableString| -> RhaiResult<()> { invalid(&ctx, reason.to_string()) });
}

/// Buffers: `alloc` (a scratch buffer) and the device-side `fill` and `copy` steps, each
/// refusing what cannot work (an unknown type, an oversized buffer, a short destination).
fn register_buffers(engine: &mut Engine, plan: &Arc<Mutex<LaunchPlan>>, first_line: usize) {
    {
        let plan = plan.clone();
        engine.register_fn("alloc", move |ctx: NativeCallContext, dtype: ImmutableString, count: i64| -> RhaiResult<ScriptBuffer> {
            let Ok(dtype) = dtype.parse::<DType>() else {
                return runtime_error(&ctx, format!("alloc: unknown element type '{dtype}' (f32, f16, bf16, e4m3, e5m2, i32, u32)"));
            };
            if count <= 0 {
                return runtime_error(&ctx, format!("alloc: element count must be positive, got {count}"));
            }
            if !crate::plan::fits_in_memory(count, dtype) {
                return runtime_error(
                    &ctx,
                    format!("alloc: {count} elements of {dtype} are more than the {} bytes one buffer may take", crate::plan::MAX_ARRAY_BYTES),
                );
            }
            let mut plan = plan.lock().expect(PLAN_LOCK);
            plan.scratch.push(ScratchSpec { dtype, count: count as usize });
            Ok(ScriptBuffer { buffer: BufRef::Scratch(plan.scratch.len() - 1), dtype, count: count as usize })
        });
    }
    {
        let plan_i = plan.clone();
        let plan_f = plan.clone();
        engine.register_fn("fill", move |ctx: NativeCallContext, b: ScriptBuffer, v: i64| {
            plan_i.lock().expect(PLAN_LOCK).steps.push(Step::Fill { buffer: b.buffer, value: v as f64, line: file_line(first_line, ctx.call_position()) });
        });
        engine.register_fn("fill", move |ctx: NativeCallContext, b: ScriptBuffer, v: f64| {
            plan_f.lock().expect(PLAN_LOCK).steps.push(Step::Fill { buffer: b.buffer, value: v, line: file_line(first_line, ctx.call_position()) });
        });
    }
    {
        let plan = plan.clone();
        engine.register_fn("copy", move |ctx: NativeCallContext, src: ScriptBuffer, dst: ScriptBuffer| -> RhaiResult<()> {
            let bytes = |b: &ScriptBuffer| b.count as u128 * b.dtype.size_bytes() as u128;
            if bytes(&src) > bytes(&dst) {
                return runtime_error(&ctx, "copy: the destination is smaller than the source");
            }
            plan.lock().expect(PLAN_LOCK).steps.push(Step::Copy { src: src.buffer, dst: dst.buffer, line: file_line(first_line, ctx.call_position()) });
            Ok(())
        });
    }
}

/// `launch(kernel, grid, block, shared_bytes, args...)`, once per argument count (Rhai
/// functions have a fixed arity).
fn register_launch(engine: &mut Engine, plan: &Arc<Mutex<LaunchPlan>>, first_line: usize) {
    for extra in 0..=MAX_KERNEL_ARGS {
        let plan = plan.clone();
        let mut types = vec![TypeId::of::<ImmutableString>(), TypeId::of::<Dynamic>(), TypeId::of::<Dynamic>(), TypeId::of::<i64>()];
        types.extend(std::iter::repeat_n(TypeId::of::<Dynamic>(), extra));
        engine.register_raw_fn("launch", types, move |ctx, args| {
            let kernel = args[0].clone().cast::<ImmutableString>().to_string();
            let grid = dims(&ctx, "grid", args[1])?;
            let block = dims(&ctx, "block", args[2])?;
            let shared = args[3].as_int().unwrap_or(0);
            let shared_bytes = u32::try_from(shared).or_else(|_| runtime_error(&ctx, format!("shared_bytes {shared} is out of range")))?;
            // One array after the four: the kernel's arguments, however many (no kernel
            // argument is itself an array).
            let spread: Vec<Dynamic> = match args.get(4).and_then(|a| a.read_lock::<rhai::Array>().map(|array| array.to_vec())) {
                Some(array) if args.len() == 5 => array,
                _ => args[4..].iter().map(|a| (**a).clone()).collect(),
            };
            let mut plan_args = Vec::with_capacity(spread.len());
            for (i, arg) in spread.iter().enumerate() {
                plan_args.push(kernel_arg(&ctx, i, arg)?);
            }
            let line = file_line(first_line, ctx.call_position());
            plan.lock().expect(PLAN_LOCK).steps.push(Step::Launch { kernel, grid, block, shared_bytes, args: plan_args, line });
            Ok(())
        });
    }
}

/// The backend's own functions ([`crate::backend::Backend::script_functions`]), each
/// recording an op in the phase it asks for, or standing as a kernel argument.
fn register_extensions(engine: &mut Engine, plan: &Arc<Mutex<LaunchPlan>>, extensions: &[ScriptFunction], first_line: usize) {
    for function in extensions {
        let plan = plan.clone();
        let f = function.clone();
        engine.register_raw_fn(f.name, vec![TypeId::of::<Dynamic>(); f.arity], move |ctx, args| {
            let values = args.iter().map(|a| op_value(&ctx, a)).collect::<RhaiResult<Vec<_>>>()?;
            let op = BackendOp { name: f.name.to_string(), args: values, line: file_line(first_line, ctx.call_position()) };
            let mut plan = plan.lock().expect(PLAN_LOCK);
            Ok(match f.phase {
                OpPhase::Setup => {
                    plan.setup.push(op);
                    Dynamic::UNIT
                }
                OpPhase::EveryRun => {
                    plan.steps.push(Step::Op(op));
                    Dynamic::UNIT
                }
                OpPhase::Argument => Dynamic::from(TypedArg(PlanArg::Op(op))),
            })
        });
    }
}

/// Elements inside a value's nested arrays (0 for anything else).
fn nested_elements(value: &Dynamic) -> usize {
    match value.read_lock::<rhai::Array>() {
        Some(array) => array.iter().map(|v| 1 + nested_elements(v)).fold(0, usize::saturating_add),
        None => 0,
    }
}

/// A grid or block shape: an int, or an array of one to three ints, each at least 1.
fn dims(ctx: &NativeCallContext, what: &str, value: &Dynamic) -> RhaiResult<[u32; 3]> {
    let list: Vec<i64> = if let Ok(v) = value.as_int() {
        vec![v]
    } else if value.is_array() {
        let arr = value.clone().into_array().expect("is_array() was checked just above");
        arr.iter().map(|d| d.as_int()).collect::<Result<_, _>>().or_else(|_| runtime_error(ctx, format!("{what} must hold integers")))?
    } else {
        return runtime_error(ctx, format!("{what} must be an integer or an array of 1 to 3 integers, got {}", value.type_name()));
    };
    if list.is_empty() || list.len() > 3 {
        return runtime_error(ctx, format!("{what} needs 1 to 3 dimensions, got {}", list.len()));
    }
    let mut out = [1u32; 3];
    for (i, v) in list.iter().enumerate() {
        if *v < 1 {
            return invalid(ctx, format!("{what} dimension {i} is {v}"));
        }
        out[i] = u32::try_from(*v).or_else(|_| invalid(ctx, format!("{what} dimension {i} is {v}, too large")))?;
    }
    Ok(out)
}

fn kernel_arg(ctx: &NativeCallContext, index: usize, value: &Dynamic) -> RhaiResult<PlanArg> {
    if let Some(b) = value.clone().try_cast::<ScriptBuffer>() {
        return Ok(PlanArg::Buffer(b.buffer));
    }
    if let Some(t) = value.clone().try_cast::<TypedArg>() {
        return Ok(t.0);
    }
    if let Ok(v) = value.as_int() {
        return i32::try_from(v)
            .map(PlanArg::I32)
            .or_else(|_| runtime_error(ctx, format!("argument {index}: {v} does not fit an int; pass i64({v}) for a 64-bit parameter")));
    }
    if let Ok(v) = value.as_float() {
        return Ok(PlanArg::F32(v as f32));
    }
    if let Ok(v) = value.as_bool() {
        return Ok(PlanArg::I32(i32::from(v)));
    }
    runtime_error(ctx, format!("argument {index}: a {} cannot be passed to a kernel", value.type_name()))
}

fn op_value(ctx: &NativeCallContext, value: &Dynamic) -> RhaiResult<OpValue> {
    if let Some(b) = value.clone().try_cast::<ScriptBuffer>() {
        return Ok(OpValue::Buffer(b.buffer));
    }
    if let Ok(v) = value.as_int() {
        return Ok(OpValue::Int(v));
    }
    if let Ok(v) = value.as_float() {
        return Ok(OpValue::Float(v));
    }
    if let Ok(v) = value.as_bool() {
        return Ok(OpValue::Bool(v));
    }
    if value.is_string() {
        return Ok(OpValue::Str(value.to_string()));
    }
    if value.is_array() {
        let arr = value.clone().into_array().expect("is_array() was checked just above");
        return arr.iter().map(|d| op_value(ctx, d)).collect::<RhaiResult<Vec<_>>>().map(OpValue::List);
    }
    runtime_error(ctx, format!("a {} cannot be passed to a backend function", value.type_name()))
}
