//! The launch plan: what a launch script asked for, as data.
//!
//! The host script runs once per execution parameter and records a plan; the runner then
//! replays the plan for the correctness run, the warm-up and every timed repetition.
//! Keeping it as data means interpreter time never lands between timed launches, and a
//! backend never has to expose live objects to the script.
//!
//! [`MAX_ARRAY_BYTES`] bounds every buffer: the manifest's arrays (the runner's sizing) and
//! the scratch a script allocates.

use peak_spec::DType;

/// The most bytes one array or scratch buffer may take: a terabyte, beyond the memory of any
/// device peak runs on. A size expression asking for more is a mistake or an execution
/// parameter that cannot run; refusing it up front keeps every later `count * element
/// size` far from overflow and the host from attempting an allocation it cannot make.
pub const MAX_ARRAY_BYTES: u64 = 1 << 40;

/// Whether `count` elements of `dtype` stay within [`MAX_ARRAY_BYTES`].
pub fn fits_in_memory(count: i64, dtype: peak_spec::DType) -> bool {
    u64::try_from(count).ok().and_then(|c| c.checked_mul(dtype.size_bytes() as u64)).is_some_and(|bytes| bytes <= MAX_ARRAY_BYTES)
}

/// A buffer as the script sees it: one of the manifest's arrays, or scratch it allocated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BufRef {
    Array(usize),
    Scratch(usize),
}

/// A value passed to a backend's own script function.
#[derive(Debug, Clone, PartialEq)]
pub enum OpValue {
    Int(i64),
    Float(f64),
    Str(String),
    Bool(bool),
    Buffer(BufRef),
    List(Vec<OpValue>),
}

/// A call of a backend-provided script function, e.g. `cuda_max_dynamic_shared("k", 98304)`.
#[derive(Debug, Clone, PartialEq)]
pub struct BackendOp {
    pub name: String,
    pub args: Vec<OpValue>,
    /// Line in the context's source file, for errors.
    pub line: usize,
}

#[derive(Debug, Clone, PartialEq)]
pub enum PlanArg {
    Buffer(BufRef),
    I32(i32),
    U32(u32),
    I64(i64),
    F32(f32),
    /// An argument a backend op builds (a tensor map...).
    Op(BackendOp),
}

#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    Launch {
        kernel: String,
        grid: [u32; 3],
        block: [u32; 3],
        shared_bytes: u32,
        args: Vec<PlanArg>,
        line: usize,
    },
    /// Fill a buffer with one value converted to its element type.
    Fill {
        buffer: BufRef,
        value: f64,
        line: usize,
    },
    Copy {
        src: BufRef,
        dst: BufRef,
        line: usize,
    },
    Op(BackendOp),
}

#[derive(Debug, Clone, PartialEq)]
pub struct ScratchSpec {
    pub dtype: DType,
    pub count: usize,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct LaunchPlan {
    pub scratch: Vec<ScratchSpec>,
    /// Backend ops that run once before any run.
    pub setup: Vec<BackendOp>,
    /// What one run of the context does, in order.
    pub steps: Vec<Step>,
    /// What the script printed, for debugging.
    pub printed: Vec<String>,
}

impl LaunchPlan {
    pub fn launches(&self) -> usize {
        self.steps.iter().filter(|s| matches!(s, Step::Launch { .. })).count()
    }
}
