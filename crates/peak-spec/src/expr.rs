//! Small integer expressions: array sizes (`n * n`) and constraints (`BLOCK_X * BLOCK_Y <= 1024`).
//!
//! They are Rhai expressions, the same language as the host launch script, so a person
//! learns one syntax. Strict-variables mode turns a misspelt name into a compile-time
//! error, which is how an unknown parameter in a constraint is caught before anything runs.

use rhai::packages::{ArithmeticPackage, LogicPackage, Package};
use rhai::{AST, Dynamic, Engine, EvalAltResult, Scope};

/// An engine for manifest expressions: expression-only, strict variables, bounded work.
pub fn expression_engine() -> Engine {
    let mut engine = Engine::new_raw();
    ArithmeticPackage::new().register_into_engine(&mut engine);
    LogicPackage::new().register_into_engine(&mut engine);
    engine.register_fn("ceil_div", ceil_div);
    engine.register_fn("min", |a: i64, b: i64| a.min(b));
    engine.register_fn("max", |a: i64, b: i64| a.max(b));
    engine.register_fn("is_pow2", |a: i64| a > 0 && (a & (a - 1)) == 0);
    engine.set_strict_variables(true);
    engine.set_max_operations(100_000);
    engine.set_max_expr_depths(64, 64);
    engine
}

/// `ceil(a / b)` for positive integers; the workhorse of grid-size arithmetic. Computed
/// without intermediate overflow (`a + b - 1` in i128); a result beyond i64 (only
/// `ceil_div(i64::MIN, -1)` and its neighbours) is a script error, not a panic.
pub fn ceil_div(a: i64, b: i64) -> Result<i64, Box<EvalAltResult>> {
    if b == 0 {
        return Ok(0);
    }
    let exact = (i128::from(a) + i128::from(b) - 1).div_euclid(i128::from(b));
    i64::try_from(exact).map_err(|_| format!("ceil_div({a}, {b}) overflows a 64-bit integer").into())
}

/// A compiled expression and the text it came from.
#[derive(Debug, Clone)]
pub struct Expr {
    pub text: String,
    ast: AST,
}

impl Expr {
    /// Compile `text`, allowing only the names in `names`. The error is Rhai's message,
    /// which says which variable is unknown or where the syntax broke.
    pub fn compile(engine: &Engine, text: &str, names: &[&str]) -> Result<Expr, String> {
        let mut scope = Scope::new();
        // Plain variables, not constants: the optimizer would fold constants into the AST.
        for name in names {
            scope.push(*name, 0_i64);
        }
        let ast = engine.compile_expression_with_scope(&scope, text).map_err(|e| describe_parse_error(&e.to_string()))?;
        Ok(Expr { text: text.to_string(), ast })
    }

    /// Every name the text uses (variables and functions alike, each once, in order of first
    /// use). A compiled expression reads no variable that is not among them.
    pub fn identifiers(&self) -> Vec<&str> {
        let mut found: Vec<&str> = Vec::new();
        for (_, name) in crate::import::scan::identifiers(&self.text) {
            if !found.contains(&name) {
                found.push(name);
            }
        }
        found
    }

    pub fn eval_int(&self, engine: &Engine, scope: &mut Scope) -> Result<i64, String> {
        let value: Dynamic = engine.eval_ast_with_scope(scope, &self.ast).map_err(|e| e.to_string())?;
        value.as_int().map_err(|ty| format!("`{}` gave a {ty}, expected an integer", self.text))
    }

    pub fn eval_bool(&self, engine: &Engine, scope: &mut Scope) -> Result<bool, String> {
        let value: Dynamic = engine.eval_ast_with_scope(scope, &self.ast).map_err(|e| e.to_string())?;
        value.as_bool().map_err(|ty| format!("`{}` gave a {ty}, expected true or false", self.text))
    }
}

fn describe_parse_error(message: &str) -> String {
    // Rhai says "Variable not found: X"; in a manifest that always means an unknown parameter.
    match message.strip_prefix("Variable not found: ") {
        Some(rest) => format!("unknown parameter {rest}"),
        None => message.to_string(),
    }
}
