//! An array's init: how the manifest says to fill it ([`Init`]), and what that means at one
//! execution parameter, every expression evaluated ([`Fill`], which
//! [`HostArray::init`](crate::HostArray::init) takes).
//!
//! In the manifest the init is `init = "KIND"` plus, for some kinds, keys beside it:
//!
//! | key | goes with | meaning |
//! |---|---|---|
//! | `init = "zeros"`, `"ones"`, `"arange"` | any type | 0, 1, or the element's index |
//! | `init = "random"` | any type | floats uniform in [-1, 1); i32 in [-100, 100], u32 in [0, 100] |
//! | `init = "uniform"` | float types | `offset + scale * U`, U uniform in [0, 1): not centred, so the values lie in [offset, offset + scale) |
//! | `init = "normal"` | float types | `offset + scale * Z`, Z standard normal |
//! | `scale`, `offset` | uniform, normal | default 1 and 0; `scale` must be positive |
//! | `range = [lo, hi]` | random, on i32 or u32 | integers drawn from [lo, hi): the high end is excluded, so `[0, "V"]` gives valid indices into V |
//! | `outliers = { row, count, scale }` | float types, any kind but zeros | in every row of `row` elements, `count` distinct entries are multiplied by `scale` |
//!
//! `range` bounds and `outliers.row` are integers or, in quotes, expressions over the scalar
//! inputs like `size` (`range = [0, "V"]`, `row = "cols"`). The array's size must be a whole
//! number of rows, and a row must hold at least `count` elements.
//!
//! Every value comes from the array's SplitMix64 stream (`rng.rs`) in plain IEEE
//! arithmetic, so the exported C harness reproduces the bytes exactly. Uniform and normal
//! values are rounded to f32, then to the element type. The outlier entries come from a
//! second stream derived from the same seed, so adding `outliers` changes only the chosen
//! entries. An outlier is the entry's value times `scale`, rounded to f32.
//!
//! A manifest that gives only one of the four original kinds reads as the plain variant
//! ([`Init::Random`], ...), which fills, serializes and hashes as it did before the other
//! keys existed.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::dtype::DType;

/// The kinds `init` names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum InitKind {
    Zeros,
    Ones,
    Random,
    Arange,
    Uniform,
    Normal,
}

impl InitKind {
    pub fn name(self) -> &'static str {
        match self {
            InitKind::Zeros => "zeros",
            InitKind::Ones => "ones",
            InitKind::Random => "random",
            InitKind::Arange => "arange",
            InitKind::Uniform => "uniform",
            InitKind::Normal => "normal",
        }
    }

    fn is_distribution(self) -> bool {
        matches!(self, InitKind::Uniform | InitKind::Normal)
    }
}

/// How an array is filled, as the manifest says. `Copy`, like the plain enum it grew from:
/// code everywhere copies an array's init, so expressions are kept inline ([`ExprText`])
/// and `Shaped` is not boxed (a few hundred bytes, one per array).
#[derive(Debug, Clone, Copy, PartialEq)]
#[allow(clippy::large_enum_variant)]
pub enum Init {
    Zeros,
    Ones,
    Random,
    Arange,
    /// Any kind with keys beside it (`scale`, `offset`, `range`, `outliers`), and the kinds
    /// that take them (`uniform`, `normal`), even when they give none.
    Shaped(Shaped),
}

/// An init with its settings, as written; [`Init::check`] says whether they fit together.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Shaped {
    pub kind: InitKind,
    pub scale: Option<f64>,
    pub offset: Option<f64>,
    pub range: Option<[IntExpr; 2]>,
    pub outliers: Option<Outliers>,
}

impl Shaped {
    pub fn new(kind: InitKind) -> Shaped {
        Shaped { kind, scale: None, offset: None, range: None, outliers: None }
    }
}

/// `outliers = { row = "cols", count = 2, scale = 20.0 }`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Outliers {
    /// Elements per row, as an integer or an expression over the scalar inputs.
    pub row: IntExpr,
    /// Entries multiplied in every row, chosen by the seed.
    pub count: u64,
    /// The factor they are multiplied by.
    pub scale: f64,
}

/// An integer, or an expression over the scalar inputs written in quotes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged, expecting = "an integer, or an expression over the scalar inputs in quotes (at most 62 characters)")]
pub enum IntExpr {
    Int(i64),
    Expr(ExprText),
}

impl IntExpr {
    /// Its value at one execution parameter; `eval` evaluates an expression there.
    pub fn value(&self, eval: &mut dyn FnMut(&str) -> Result<i64, String>) -> Result<i64, String> {
        match self {
            IntExpr::Int(n) => Ok(*n),
            IntExpr::Expr(text) => eval(text.as_str()),
        }
    }
}

impl fmt::Display for IntExpr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IntExpr::Int(n) => write!(f, "{n}"),
            IntExpr::Expr(text) => write!(f, "\"{}\"", text.as_str()),
        }
    }
}

/// The text of a short expression, stored inline so that [`Init`] stays `Copy`.
#[derive(Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct ExprText {
    len: u8,
    bytes: [u8; ExprText::MAX],
}

impl ExprText {
    /// The longest text kept; a row length or a bound is a name or a short product.
    pub const MAX: usize = 62;

    pub fn as_str(&self) -> &str {
        std::str::from_utf8(&self.bytes[..usize::from(self.len)]).expect("copied whole from a String")
    }
}

impl TryFrom<String> for ExprText {
    type Error = String;
    fn try_from(text: String) -> Result<ExprText, String> {
        if text.len() > ExprText::MAX {
            return Err(format!("`{text}` is longer than {} characters", ExprText::MAX));
        }
        let mut bytes = [0; ExprText::MAX];
        bytes[..text.len()].copy_from_slice(text.as_bytes());
        Ok(ExprText { len: text.len() as u8, bytes })
    }
}

impl From<ExprText> for String {
    fn from(text: ExprText) -> String {
        text.as_str().to_string()
    }
}

impl fmt::Debug for ExprText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

/// A manifest key and what is wrong with it.
pub type KeyError = (&'static str, String);

impl Init {
    pub fn kind(&self) -> InitKind {
        self.settings().kind
    }

    /// The kind and settings, whichever variant holds them.
    pub fn settings(&self) -> Shaped {
        match self {
            Init::Zeros => Shaped::new(InitKind::Zeros),
            Init::Ones => Shaped::new(InitKind::Ones),
            Init::Random => Shaped::new(InitKind::Random),
            Init::Arange => Shaped::new(InitKind::Arange),
            Init::Shaped(s) => *s,
        }
    }

    /// The init for a kind and settings: a plain variant where there is nothing beside the
    /// kind, so an old manifest reads exactly as it always did.
    pub fn from_settings(s: Shaped) -> Init {
        if s != Shaped::new(s.kind) || s.kind.is_distribution() {
            return Init::Shaped(s);
        }
        match s.kind {
            InitKind::Zeros => Init::Zeros,
            InitKind::Ones => Init::Ones,
            InitKind::Random => Init::Random,
            _ => Init::Arange,
        }
    }

    /// Check what serde cannot: that the settings go with the kind and the element type,
    /// and that their expressions compile (`compile`, over the scalar inputs). The error
    /// names the key (`scale`, `outliers.count`, ...) and says what was expected.
    pub fn check(&self, dtype: DType, compile: &dyn Fn(&str) -> Result<(), String>) -> Result<(), KeyError> {
        let s = self.settings();
        if s.kind.is_distribution() && !dtype.is_float() {
            return Err((
                "init",
                format!("`{}` draws floats and the array is {dtype}: for integers use `init = \"random\"` with `range = [lo, hi]`", s.kind.name()),
            ));
        }
        check_spread(&s)?;
        if let Some(range) = &s.range {
            check_range(s.kind, dtype, range, compile)?;
        }
        if let Some(outliers) = &s.outliers {
            check_outliers(s.kind, dtype, outliers, compile)?;
        }
        Ok(())
    }

    /// The fill at one execution parameter for an array of `count` elements: `eval` gives
    /// an expression's value there. Fails, naming the key, where the values at these inputs
    /// do not fit: an empty range, a size that is not a whole number of rows, a row shorter
    /// than `outliers.count`.
    pub fn fill(&self, dtype: DType, count: usize, eval: &mut dyn FnMut(&str) -> Result<i64, String>) -> Result<Fill, String> {
        let s = self.settings();
        let spread = |s: &Shaped| (s.scale.unwrap_or(1.0), s.offset.unwrap_or(0.0));
        let values = match (s.kind, &s.range) {
            (InitKind::Zeros, _) => Values::Zeros,
            (InitKind::Ones, _) => Values::Ones,
            (InitKind::Arange, _) => Values::Arange,
            (InitKind::Random, None) => Values::Random,
            (InitKind::Random, Some(range)) => integers(dtype, range, eval)?,
            (InitKind::Uniform, _) => {
                let (scale, offset) = spread(&s);
                Values::Uniform { scale, offset }
            }
            (InitKind::Normal, _) => {
                let (scale, offset) = spread(&s);
                Values::Normal { scale, offset }
            }
        };
        let outliers = s.outliers.as_ref().map(|o| row_outliers(o, count, eval)).transpose()?;
        Ok(Fill { values, outliers })
    }
}

fn check_spread(s: &Shaped) -> Result<(), KeyError> {
    for (key, value) in [("scale", s.scale), ("offset", s.offset)] {
        let Some(v) = value else { continue };
        if !s.kind.is_distribution() {
            return Err((key, format!("`{key}` goes with `init = \"uniform\"` or `\"normal\"`, not `\"{}\"`", s.kind.name())));
        }
        if !v.is_finite() || (key == "scale" && v <= 0.0) {
            let expected = if key == "scale" { "a positive number" } else { "a finite number" };
            return Err((key, format!("must be {expected}, got {v}")));
        }
    }
    Ok(())
}

fn check_range(kind: InitKind, dtype: DType, range: &[IntExpr; 2], compile: &dyn Fn(&str) -> Result<(), String>) -> Result<(), KeyError> {
    let Some((min, end)) = integer_limits(dtype) else {
        return Err(("range", format!("`range` draws integers and the array is {dtype}: for floats use `init = \"uniform\"` with `scale` and `offset`")));
    };
    if kind != InitKind::Random {
        return Err(("range", format!("`range` goes with `init = \"random\"`, not `\"{}\"`", kind.name())));
    }
    for (key, bound) in [("range[0]", &range[0]), ("range[1]", &range[1])] {
        if let IntExpr::Expr(text) = bound {
            compile(text.as_str()).map_err(|m| (key, format!("cannot parse `{}`: {m}", text.as_str())))?;
        }
    }
    if let [IntExpr::Int(lo), IntExpr::Int(hi)] = *range {
        check_bounds(dtype, lo, hi, min, end).map_err(|m| ("range", m))?;
    }
    Ok(())
}

/// `[lo, hi)` is not empty and its values fit the element type.
fn check_bounds(dtype: DType, lo: i64, hi: i64, min: i64, end: i64) -> Result<(), String> {
    if lo >= hi {
        return Err(format!("[{lo}, {hi}) holds no integer: the range is [lo, hi), the high end excluded"));
    }
    if lo < min || hi > end {
        return Err(format!("[{lo}, {hi}) does not fit {dtype}, whose values lie in [{min}, {end})"));
    }
    Ok(())
}

fn check_outliers(kind: InitKind, dtype: DType, o: &Outliers, compile: &dyn Fn(&str) -> Result<(), String>) -> Result<(), KeyError> {
    if !dtype.is_float() {
        return Err(("outliers", format!("outliers scale entries of float arrays and the array is {dtype}")));
    }
    if kind == InitKind::Zeros {
        return Err(("outliers", "zeros stay zero when multiplied: give the array values to scale (ones, random, uniform or normal)".into()));
    }
    if o.count == 0 {
        return Err(("outliers.count", "must be at least 1".into()));
    }
    if !o.scale.is_finite() {
        return Err(("outliers.scale", format!("must be a finite number, got {}", o.scale)));
    }
    match o.row {
        IntExpr::Int(row) if row < 1 => Err(("outliers.row", format!("must be at least 1, got {row}"))),
        IntExpr::Int(row) if o.count > row as u64 => Err(("outliers.count", format!("{} entries per row, but a row has {row} elements", o.count))),
        IntExpr::Int(_) => Ok(()),
        IntExpr::Expr(text) => compile(text.as_str()).map_err(|m| ("outliers.row", format!("cannot parse `{}`: {m}", text.as_str()))),
    }
}

/// The lowest value of an integer type and one past its highest; `None` for floats.
fn integer_limits(dtype: DType) -> Option<(i64, i64)> {
    match dtype {
        DType::I32 => Some((i64::from(i32::MIN), i64::from(i32::MAX) + 1)),
        DType::U32 => Some((0, i64::from(u32::MAX) + 1)),
        _ => None,
    }
}

fn integers(dtype: DType, range: &[IntExpr; 2], eval: &mut dyn FnMut(&str) -> Result<i64, String>) -> Result<Values, String> {
    let lo = range[0].value(eval).map_err(|m| format!("`range[0]`: {m}"))?;
    let hi = range[1].value(eval).map_err(|m| format!("`range[1]`: {m}"))?;
    let (min, end) = integer_limits(dtype).ok_or_else(|| format!("`range` draws integers and the array is {dtype}"))?;
    check_bounds(dtype, lo, hi, min, end).map_err(|m| format!("`range = [{}, {}]` here: {m}", range[0], range[1]))?;
    Ok(Values::Integers { lo, hi })
}

fn row_outliers(o: &Outliers, count: usize, eval: &mut dyn FnMut(&str) -> Result<i64, String>) -> Result<RowOutliers, String> {
    let row = o.row.value(eval).map_err(|m| format!("`outliers.row`: {m}"))?;
    if row < 1 {
        return Err(format!("`outliers.row = {}` is {row} here; a row needs at least one element", o.row));
    }
    let row = row as u64;
    if !(count as u64).is_multiple_of(row) {
        return Err(format!("{count} elements are not a whole number of rows of {row} (`outliers.row = {}`)", o.row));
    }
    if o.count > row {
        return Err(format!("`outliers.count` is {} but a row (`outliers.row = {}`) has {row} elements here", o.count, o.row));
    }
    Ok(RowOutliers { row: row as usize, count: o.count as usize, scale: o.scale })
}

/// An array's init at one execution parameter, every expression evaluated: what
/// [`HostArray::init`](crate::HostArray::init) fills and the exported harness reproduces.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Fill {
    pub values: Values,
    pub outliers: Option<RowOutliers>,
}

/// The values before any outliers. See the module documentation for each kind.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Values {
    Zeros,
    Ones,
    Random,
    Arange,
    Uniform {
        scale: f64,
        offset: f64,
    },
    Normal {
        scale: f64,
        offset: f64,
    },
    /// `random` with `range`: integers drawn from `[lo, hi)`.
    Integers {
        lo: i64,
        hi: i64,
    },
}

/// In every row of `row` elements, `count` distinct entries multiplied by `scale`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct RowOutliers {
    pub row: usize,
    pub count: usize,
    pub scale: f64,
}

impl From<Values> for Fill {
    fn from(values: Values) -> Fill {
        Fill { values, outliers: None }
    }
}

impl Fill {
    /// Whether the seed matters: anything drawn, values or outlier positions.
    pub fn is_seeded(&self) -> bool {
        self.outliers.is_some() || !matches!(self.values, Values::Zeros | Values::Ones | Values::Arange)
    }

    /// One of the four original kinds with nothing beside it.
    pub fn is_plain(&self) -> bool {
        self.outliers.is_none() && matches!(self.values, Values::Zeros | Values::Ones | Values::Random | Values::Arange)
    }
}

impl fmt::Display for Fill {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.values {
            Values::Zeros => f.write_str("zeros")?,
            Values::Ones => f.write_str("ones")?,
            Values::Random => f.write_str("random")?,
            Values::Arange => f.write_str("arange")?,
            Values::Uniform { scale, offset } => write!(f, "uniform in [{offset}, {})", offset + scale)?,
            Values::Normal { scale, offset } => write!(f, "normal, mean {offset}, standard deviation {scale}")?,
            Values::Integers { lo, hi } => write!(f, "random integers in [{lo}, {hi})")?,
        }
        if let Some(o) = self.outliers {
            write!(f, "; {} entries x{} per row of {}", o.count, o.scale, o.row)?;
        }
        Ok(())
    }
}
