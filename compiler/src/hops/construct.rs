//! HOP DAG construction from the AST of one basic block (or one predicate/loop-bound
//! expression), with the actual metadata of the variables live at block entry.
//!
//! Statements are processed in order; an assignment rebinds a name to a hop, so a statement
//! always sees the values of the variables at its point in the block (`x = 1; print(x);
//! x = 2; print(x)` prints 1 then 2). At the end every variable assigned in the block gets a
//! `TransientWrite` root with its final value. Roots are ordered by statement: side effects
//! and `time()` at their statement, each `TransientWrite` at the variable's final assignment.

use super::builder::DagBuilder;
use super::ir::{
    AggOp, BinaryOp, CastOp, CumulativeOp, DataGenOp, DecompOp, Direction, HopDag, HopId, LinAlgOp,
    Literal, MetaOp, NaryOp, OpKind, ParamOp, ReorgOp, StatOp, TernaryOp, UnaryOp, ValueType,
    RAND_INPUTS, TOSTRING_INPUTS,
};
use super::rewrite::optimize;
use super::verify::verify;
use crate::ast::{self, Expr, ExprKind, IndexRange, Stmt, StmtKind};
use crate::builtins::{self, bind_args, Builtin};
use crate::error::{CheckError, CompileError, Internal, Note, Result, ShapeError, Unsupported};
use crate::span::Span;
use crate::stack::with_stack;
use std::collections::{BTreeMap, HashMap};

/// The variable an expression DAG ([`build_expr_dag`]) writes its value to. It starts with
/// `_`, which no DML identifier can, so it never clashes with a script variable.
pub const EXPR_RESULT: &str = "_expr";

/// What is known about a variable live at block entry.
#[derive(Clone, Debug, PartialEq)]
pub enum InputMeta {
    /// A matrix with its sizes (`None` where unknown) and number of non-zeros.
    Matrix {
        rows: Option<u64>,
        cols: Option<u64>,
        nnz: Option<u64>,
    },
    /// A list (its elements are known at run time only) whose scalar elements share
    /// `value_type` (`Double` where they do not; see [`DataType::List`]).
    List { value_type: ValueType },
    /// A frame (its sizes are known at run time only).
    Frame,
    /// A scalar of a value type; with `value`, the scalar acts as that literal (so sizes such
    /// as `matrix(0, rows=n, cols=n)` are known). A DAG built with values is only valid for
    /// those values: callers caching compiled blocks must key the cache by them.
    Scalar {
        value_type: ValueType,
        value: Option<Literal>,
    },
}

impl InputMeta {
    /// A matrix with known sizes.
    pub fn matrix(rows: u64, cols: u64, nnz: u64) -> InputMeta {
        InputMeta::Matrix {
            rows: Some(rows),
            cols: Some(cols),
            nnz: Some(nnz),
        }
    }

    /// A scalar with a known value.
    pub fn scalar(value: Literal) -> InputMeta {
        InputMeta::Scalar {
            value_type: value.value_type(),
            value: Some(value),
        }
    }
}

/// The variables live at block entry, by name.
pub type BlockInputs = BTreeMap<String, InputMeta>;

/// Script arguments (`--nvargs name=value`): raw text by name, typed on use as DML types a
/// literal (`3` int, `3.5`/`1e3` double, `TRUE`/`FALSE` bool, anything else a string; one pair
/// of surrounding double quotes is removed).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ScriptArgs {
    pub values: BTreeMap<String, String>,
}

impl ScriptArgs {
    pub fn new() -> ScriptArgs {
        ScriptArgs::default()
    }

    /// Adds or replaces an argument.
    pub fn insert(&mut self, name: impl Into<String>, value: impl Into<String>) {
        self.values.insert(name.into(), value.into());
    }

    /// The typed literal of argument `name` (without the `$`), if given.
    pub fn literal(&self, name: &str) -> Option<Literal> {
        self.values.get(name).map(|v| type_script_arg(v))
    }
}

/// Types the text of a script argument as DML would type the same literal.
pub fn type_script_arg(text: &str) -> Literal {
    let t = text.trim();
    if let Ok(v) = t.parse::<i64>() {
        return Literal::Int(v);
    }
    let numeric = t
        .chars()
        .all(|c| c.is_ascii_digit() || matches!(c, '.' | 'e' | 'E' | '+' | '-'))
        && t.chars().any(|c| c.is_ascii_digit());
    if numeric {
        if let Ok(v) = t.parse::<f64>() {
            return Literal::Double(v);
        }
    }
    match t {
        "TRUE" => Literal::Bool(true),
        "FALSE" => Literal::Bool(false),
        _ => {
            let unquoted = text
                .strip_prefix('"')
                .and_then(|s| s.strip_suffix('"'))
                .unwrap_or(text);
            Literal::Str(unquoted.to_string())
        }
    }
}

/// Builds the DAG of a basic block and runs the default rewrites ([`optimize`]): the DAG the
/// executor should run. See [`construct_block_dag`] for the DAG before rewrites.
pub fn build_block_dag(
    block: &[Stmt],
    inputs: &BlockInputs,
    script_args: &ScriptArgs,
) -> Result<HopDag> {
    let mut dag = construct_block_dag(block, inputs, script_args)?;
    optimize(&mut dag)?;
    Ok(dag)
}

/// Builds the DAG of a basic block as written (scalar constants are folded eagerly so that
/// sizes depending on them are known), sizes propagated and verified.
pub fn construct_block_dag(
    block: &[Stmt],
    inputs: &BlockInputs,
    script_args: &ScriptArgs,
) -> Result<HopDag> {
    let mut cx = Ctx::new(inputs, script_args);
    // Roots created by each statement, and the statement of each variable's final assignment.
    let mut roots_by_stmt: Vec<Vec<HopId>> = Vec::with_capacity(block.len());
    let mut final_assign: BTreeMap<String, usize> = BTreeMap::new();
    let mut order_of_assign: Vec<String> = Vec::new();
    for (k, stmt) in block.iter().enumerate() {
        let before = cx.b.dag().roots.len();
        for name in cx.stmt(stmt)? {
            if final_assign.insert(name.clone(), k).is_none() {
                order_of_assign.push(name);
            }
        }
        roots_by_stmt.push(cx.b.dag().roots[before..].to_vec());
    }
    let mut writes_by_stmt: Vec<Vec<HopId>> = vec![Vec::new(); block.len()];
    // Variables in order of first assignment, each placed at its final assignment.
    let mut names: Vec<&String> = order_of_assign.iter().collect();
    names.sort_by_key(|n| final_assign[*n]);
    for name in names {
        let value = cx.vars[name.as_str()];
        let span = block[final_assign[name]].span;
        cx.b.set_span(span);
        let w =
            cx.b.add(OpKind::TransientWrite { name: name.clone() }, &[value])?;
        writes_by_stmt[final_assign[name]].push(w);
    }
    let mut roots = Vec::new();
    for (created, writes) in roots_by_stmt.into_iter().zip(writes_by_stmt) {
        roots.extend(created);
        roots.extend(writes);
    }
    cx.b.dag_mut().roots = roots;
    finish(cx.b)
}

/// Builds the DAG of one expression (an `if`/`while` condition or a `for` bound): its value is
/// written to the variable [`EXPR_RESULT`]. A 1×1 matrix result is cast to a scalar (as
/// SystemDS does for predicates); any other matrix is a user error. Rewrites are applied.
pub fn build_expr_dag(
    expr: &Expr,
    inputs: &BlockInputs,
    script_args: &ScriptArgs,
) -> Result<HopDag> {
    let mut cx = Ctx::new(inputs, script_args);
    let mut value = cx.expr(expr)?;
    if cx.b.dag().hop(value).is_matrix() {
        value = cx
            .add(OpKind::Cast(CastOp::AsScalar), &[value], expr.span)
            .map_err(|e| {
                CompileError::at(CheckError::NonScalarCondition { cause: e.cause }, expr.span)
            })?;
    }
    cx.b.set_span(expr.span);
    cx.b.add(
        OpKind::TransientWrite {
            name: EXPR_RESULT.to_string(),
        },
        &[value],
    )?;
    let mut dag = finish(cx.b)?;
    optimize(&mut dag)?;
    Ok(dag)
}

fn finish(b: DagBuilder) -> Result<HopDag> {
    let dag = b.into_dag();
    verify(&dag).map_err(|e| CompileError::internal(Internal::ConstructedDag(e)))?;
    Ok(dag)
}

struct Ctx<'a> {
    b: DagBuilder,
    inputs: &'a BlockInputs,
    args: &'a ScriptArgs,
    /// The current value of every variable read or assigned so far.
    vars: HashMap<String, HopId>,
}

/// How an aggregate built-in maps onto `AggUnary`.
fn aggregate(builtin: Builtin) -> Option<(AggOp, Direction)> {
    use Builtin::*;
    Some(match builtin {
        Sum => (AggOp::Sum, Direction::Full),
        Mean => (AggOp::Mean, Direction::Full),
        Prod => (AggOp::Prod, Direction::Full),
        Var => (AggOp::Var, Direction::Full),
        RowSums => (AggOp::Sum, Direction::Row),
        ColSums => (AggOp::Sum, Direction::Col),
        RowMeans => (AggOp::Mean, Direction::Row),
        ColMeans => (AggOp::Mean, Direction::Col),
        RowMaxs => (AggOp::Max, Direction::Row),
        RowMins => (AggOp::Min, Direction::Row),
        ColMaxs => (AggOp::Max, Direction::Col),
        ColMins => (AggOp::Min, Direction::Col),
        RowVars => (AggOp::Var, Direction::Row),
        ColVars => (AggOp::Var, Direction::Col),
        _ => return None,
    })
}

impl<'a> Ctx<'a> {
    fn new(inputs: &'a BlockInputs, args: &'a ScriptArgs) -> Ctx<'a> {
        let mut b = DagBuilder::new();
        b.set_folding(true);
        Ctx {
            b,
            inputs,
            args,
            vars: HashMap::new(),
        }
    }

    fn add(&mut self, op: OpKind, inputs: &[HopId], span: Span) -> Result<HopId> {
        self.b.set_span(span);
        self.b.add(op, inputs)
    }

    fn lit(&mut self, l: Literal, span: Span) -> HopId {
        self.b.set_span(span);
        self.b.literal(l)
    }

    /// Processes one statement; returns the variables it assigns.
    fn stmt(&mut self, stmt: &Stmt) -> Result<Vec<String>> {
        with_stack(|| self.stmt_step(stmt))
    }

    fn stmt_step(&mut self, stmt: &Stmt) -> Result<Vec<String>> {
        match &stmt.kind {
            StmtKind::Assign { target, value } => {
                let h = self.expr(value)?;
                self.vars.insert(target.name.clone(), h);
                Ok(vec![target.name.clone()])
            }
            StmtKind::IndexAssign { target, rows, cols, value } => {
                let x = self.var(&target.name, target.span)?;
                if self.b.dag().hop(x).is_list() {
                    let v = self.expr(value)?;
                    let [lo, hi] = self.list_range(rows.as_ref(), cols.as_ref(), stmt.span)?;
                    let h = self.add(OpKind::ListSet, &[x, lo, hi, v], stmt.span)?;
                    self.vars.insert(target.name.clone(), h);
                    return Ok(vec![target.name.clone()]);
                }
                if self.b.dag().hop(x).is_scalar() {
                    return Err(CompileError::at(
                        CheckError::IndexIntoScalar {
                            name: target.name.clone(),
                        },
                        target.span,
                    ));
                }
                let v = self.expr(value)?;
                let [rl, ru] = self.range(x, rows.as_ref(), MetaOp::Nrow, stmt.span)?;
                let [cl, cu] = self.range(x, cols.as_ref(), MetaOp::Ncol, stmt.span)?;
                let h = self.add(OpKind::LeftIndex, &[x, v, rl, ru, cl, cu], stmt.span)?;
                self.vars.insert(target.name.clone(), h);
                Ok(vec![target.name.clone()])
            }
            StmtKind::MultiAssign { targets, call } => {
                let ExprKind::Call { name, args } = &call.kind else {
                    return Err(CompileError::at(Unsupported::BuiltinMultiAssign, call.span));
                };
                // `[L2, e] = remove(L, i)`, `[X, M] = transformencode(target=F, spec=S)`.
                match builtins::lookup(name) {
                    Some(b @ Builtin::Remove) => {
                        return self.result_per_hop(b, &["x", "pos"], targets, args, call.span, |output| {
                            OpKind::ListRemove { output }
                        })
                    }
                    Some(b @ Builtin::TransformEncode) => {
                        return self.result_per_hop(b, &["target", "spec"], targets, args, call.span, |output| {
                            OpKind::TransformEncode { output }
                        })
                    }
                    _ => {}
                }
                let op = match builtins::lookup(name) {
                    Some(Builtin::Eigen) => DecompOp::Eigen,
                    Some(Builtin::Svd) => DecompOp::Svd,
                    Some(Builtin::Lu) => DecompOp::Lu,
                    Some(Builtin::Qr) => DecompOp::Qr,
                    _ => return Err(CompileError::at(Unsupported::BuiltinMultiAssign, call.span)),
                };
                let b = builtins::lookup(name).unwrap_or(Builtin::Eigen);
                if targets.len() != op.outputs() {
                    return Err(crate::program::several_results_error(
                        b,
                        op.outputs(),
                        call.span,
                    ));
                }
                let bound = bind_args(b, args, call.span)?;
                let a = self.param(&bound, "x", call.span)?;
                // One hop per result over the same input: the lowering computes the
                // decomposition once for all the results the block needs.
                for (k, t) in targets.iter().enumerate() {
                    let output = k as u8;
                    let h = self.add(OpKind::Decompose { op, output }, &[a], call.span)?;
                    self.vars.insert(t.name.clone(), h);
                }
                Ok(targets.iter().map(|t| t.name.clone()).collect())
            }
            StmtKind::Expr(e) => {
                if let ExprKind::Call { name, args } = &e.kind {
                    if let Some(b) = builtins::lookup(name) {
                        if b.is_statement() {
                            self.statement_call(b, args, e.span)?;
                            return Ok(Vec::new());
                        }
                    }
                }
                // A bare expression: evaluated for its errors, its value is unused.
                self.expr(e)?;
                Ok(Vec::new())
            }
            StmtKind::If { .. } | StmtKind::For { .. } | StmtKind::While { .. } => Err(CompileError::internal(Internal::Invariant {
                what: "control flow statement inside a basic block (blocks are split at control flow)",
            })),
        }
    }

    /// The two results of `b` (bound from its parameters `params`) as one hop each, `op` of
    /// the result's index, over the same inputs; the lowering runs one instruction for both.
    fn result_per_hop(
        &mut self,
        b: Builtin,
        params: &[&str],
        targets: &[ast::Ident],
        args: &[ast::Arg],
        span: Span,
        op: impl Fn(u8) -> OpKind,
    ) -> Result<Vec<String>> {
        if targets.len() != 2 {
            return Err(crate::program::several_results_error(b, 2, span));
        }
        let bound = bind_args(b, args, span)?;
        let inputs = self.params(&bound, params, span)?;
        for (k, t) in targets.iter().enumerate() {
            let h = self.add(op(k as u8), &inputs, span)?;
            self.vars.insert(t.name.clone(), h);
        }
        Ok(targets.iter().map(|t| t.name.clone()).collect())
    }

    fn statement_call(&mut self, b: Builtin, args: &[ast::Arg], span: Span) -> Result<()> {
        let bound = bind_args(b, args, span)?;
        match b {
            Builtin::Print => {
                let mut ins = Vec::new();
                for e in &bound.variadic {
                    ins.push(self.expr(e)?);
                }
                self.add(OpKind::Print, &ins, span)?;
            }
            Builtin::Stop => {
                let msg = self.param(&bound, "msg", span)?;
                self.add(OpKind::Stop, &[msg], span)?;
            }
            Builtin::Assert => {
                let cond = self.param(&bound, "cond", span)?;
                self.add(OpKind::Assert, &[cond], span)?;
            }
            Builtin::Write => {
                let x = self.param(&bound, "x", span)?;
                let file = self.param(&bound, "file", span)?;
                let mut ins = vec![x, file];
                let mut params = Vec::new();
                for name in ["format", "header", "sep", "sparse"] {
                    if let Some(e) = bound.expr_or_default(name, span) {
                        ins.push(self.expr(&e)?);
                        params.push(name.to_string());
                    }
                }
                self.add(OpKind::PersistentWrite { params }, &ins, span)?;
            }
            other => {
                return Err(CompileError::internal(Internal::NotAStatement {
                    builtin: other.name(),
                }))
            }
        }
        Ok(())
    }

    /// The current value of a variable: assigned in this block, or live at block entry.
    fn var(&mut self, name: &str, span: Span) -> Result<HopId> {
        if let Some(&h) = self.vars.get(name) {
            return Ok(h);
        }
        let Some(meta) = self.inputs.get(name) else {
            let known: Vec<&str> = self
                .vars
                .keys()
                .map(String::as_str)
                .chain(self.inputs.keys().map(String::as_str))
                .collect();
            let mut sorted = known;
            sorted.sort_unstable();
            let mut err = CompileError::at(
                CheckError::UndefinedVariable {
                    name: name.to_string(),
                },
                span,
            );
            if let Some(s) = builtins::closest(name, sorted) {
                err = err.with_note(Note::DidYouMean {
                    name: s.to_string(),
                });
            }
            return Err(err);
        };
        self.b.set_span(span);
        let h = match meta {
            InputMeta::Matrix { rows, cols, nnz } => self.b.input_with(name, *rows, *cols, *nnz),
            InputMeta::List { value_type } => self.b.list_input(name, *value_type),
            InputMeta::Frame => self.b.frame_input(name),
            InputMeta::Scalar {
                value: Some(v),
                value_type,
            } => {
                if v.value_type() != *value_type {
                    return Err(CompileError::internal(Internal::InputType {
                        name: name.to_string(),
                        declared: value_type.name(),
                        holds: v.value_type().name(),
                    }));
                }
                self.b.known_scalar_input(name, v.clone())
            }
            InputMeta::Scalar {
                value_type,
                value: None,
            } => self.b.scalar_input(name, *value_type),
        };
        self.vars.insert(name.to_string(), h);
        Ok(h)
    }

    /// The hops of the parameters `names`, in order.
    fn params(
        &mut self,
        bound: &builtins::BoundArgs<'_>,
        names: &[&str],
        span: Span,
    ) -> Result<Vec<HopId>> {
        names.iter().map(|p| self.param(bound, p, span)).collect()
    }

    fn param(&mut self, bound: &builtins::BoundArgs<'_>, name: &str, span: Span) -> Result<HopId> {
        match bound.expr_or_default(name, span) {
            Some(e) => self.expr(&e),
            None => Err(CompileError::internal(Internal::MissingParameter {
                name: name.to_string(),
            })),
        }
    }

    /// `[lower, upper]` bound hops of one index dimension (omitted: `1` and `nrow`/`ncol`).
    fn range(
        &mut self,
        x: HopId,
        r: Option<&IndexRange>,
        extent: MetaOp,
        span: Span,
    ) -> Result<[HopId; 2]> {
        match r {
            None => {
                let one = self.lit(Literal::Int(1), span);
                let n = self.add(OpKind::Meta(extent), &[x], span)?;
                Ok([one, n])
            }
            Some(r) => {
                let lo = self.index_bound(&r.lower)?;
                let hi = match &r.upper {
                    Some(u) => self.index_bound(u)?,
                    None => lo,
                };
                Ok([lo, hi])
            }
        }
    }

    /// The bounds of a list index: `L[i]`, `L[i:j]` or `L["name"]` (a name is both bounds);
    /// lists have one dimension, so a column index is an error.
    fn list_range(
        &mut self,
        rows: Option<&IndexRange>,
        cols: Option<&IndexRange>,
        span: Span,
    ) -> Result<[HopId; 2]> {
        // A list is a column: SystemDS takes `L[i, 1]` for `L[i]` (gridSearch's
        // `paramValues[j,1]`). Any other column is an error here (SystemDS ignores it).
        let first_column = |c: &IndexRange| {
            let one = |e: &Expr| match e.kind {
                ExprKind::Int(v) => v == 1,
                ExprKind::Double(v) => v == 1.0,
                _ => false,
            };
            one(&c.lower) && c.upper.as_deref().is_none_or(one)
        };
        let r = match (rows, cols) {
            (Some(r), None) => r,
            (Some(r), Some(c)) if first_column(c) => r,
            _ => return Err(CompileError::at(CheckError::ListIndexShape, span)),
        };
        let lo = self.expr(&r.lower)?;
        let hi = match &r.upper {
            Some(u) => self.expr(u)?,
            None => lo,
        };
        for (h, e) in [
            (lo, &*r.lower),
            (hi, r.upper.as_deref().unwrap_or(&r.lower)),
        ] {
            if !self.b.dag().hop(h).is_scalar() {
                return Err(CompileError::at(CheckError::NonNumericIndex, e.span));
            }
        }
        Ok([lo, hi])
    }

    fn index_bound(&mut self, e: &Expr) -> Result<HopId> {
        let h = self.expr(e)?;
        let hop = self.b.dag().hop(h);
        if hop.is_matrix() || hop.value_type == ValueType::String {
            return Err(CompileError::at(CheckError::NonNumericIndex, e.span));
        }
        Ok(h)
    }

    fn expr(&mut self, e: &Expr) -> Result<HopId> {
        with_stack(|| self.expr_step(e))
    }

    fn expr_step(&mut self, e: &Expr) -> Result<HopId> {
        let span = e.span;
        match &e.kind {
            ExprKind::Double(v) => Ok(self.lit(Literal::Double(*v), span)),
            ExprKind::Int(v) => Ok(self.lit(Literal::Int(*v), span)),
            ExprKind::Bool(v) => Ok(self.lit(Literal::Bool(*v), span)),
            ExprKind::Str(s) => Ok(self.lit(Literal::Str(s.clone()), span)),
            ExprKind::Var(name) => self.var(name, span),
            ExprKind::ScriptArg(name) => match self.args.literal(name) {
                Some(l) => Ok(self.lit(l, span)),
                None => Err(CompileError::at(
                    CheckError::ScriptArgNotGiven { name: name.clone() },
                    span,
                )
                .with_note(Note::UseIfdef { name: name.clone() })),
            },
            ExprKind::Unary { op, operand } => {
                let x = self.expr(operand)?;
                match op {
                    ast::UnaryOp::Plus => {
                        let h = self.b.dag().hop(x);
                        if h.is_scalar() && h.value_type == ValueType::String {
                            return Err(CompileError::at(CheckError::StringUnaryPlus, span));
                        }
                        Ok(x)
                    }
                    ast::UnaryOp::Neg => self.add(OpKind::Unary(UnaryOp::Neg), &[x], span),
                    ast::UnaryOp::Not => self.add(OpKind::Unary(UnaryOp::Not), &[x], span),
                }
            }
            ExprKind::Binary { op, lhs, rhs } => {
                let a = self.expr(lhs)?;
                let b = self.expr(rhs)?;
                match op.elementwise() {
                    Some(bop) => self.add(OpKind::Binary(bop), &[a, b], span),
                    None => self.add(OpKind::MatMul, &[a, b], span),
                }
            }
            ExprKind::Index { target, rows, cols } => {
                let x = self.expr(target)?;
                if self.b.dag().hop(x).is_list() {
                    let [lo, hi] = self.list_range(rows.as_ref(), cols.as_ref(), span)?;
                    return self.add(OpKind::ListIndex, &[x, lo, hi], span);
                }
                if self.b.dag().hop(x).is_scalar() {
                    return Err(CompileError::at(
                        CheckError::IndexIntoScalarValue,
                        target.span,
                    ));
                }
                let [rl, ru] = self.range(x, rows.as_ref(), MetaOp::Nrow, span)?;
                let [cl, cu] = self.range(x, cols.as_ref(), MetaOp::Ncol, span)?;
                self.add(OpKind::Index, &[x, rl, ru, cl, cu], span)
            }
            ExprKind::Call { name, args } => self.call(name, args, span),
        }
    }

    fn call(&mut self, name: &str, args: &[ast::Arg], span: Span) -> Result<HopId> {
        let Some(b) = builtins::lookup(name) else {
            let mut names: Vec<&str> = builtins::ALL.iter().map(|b| b.name()).collect();
            names.sort_unstable();
            let mut err = CompileError::at(
                CheckError::UnknownFunction {
                    name: name.to_string(),
                },
                span,
            );
            if let Some(s) = builtins::closest(name, names) {
                err = err.with_note(Note::DidYouMean {
                    name: s.to_string(),
                });
            }
            return Err(err);
        };
        if b.is_statement() {
            return Err(CompileError::at(
                CheckError::StatementAsValue { builtin: b.name() },
                span,
            ));
        }
        let bound = bind_args(b, args, span)?;
        let mut variadic = Vec::new();
        for e in &bound.variadic {
            variadic.push(self.expr(e)?);
        }
        if let (Builtin::Mean, Some(w)) = (b, bound.arg("w")) {
            // The weighted mean: sum(X * W) / sum(W).
            let x = self.param(&bound, "x", span)?;
            let w = self.expr(w)?;
            let (op, dir) = (AggOp::Sum, Direction::Full);
            let xw = self.add(OpKind::Binary(BinaryOp::Mul), &[x, w], span)?;
            let num = self.add(OpKind::AggUnary { op, dir }, &[xw], span)?;
            let den = self.add(OpKind::AggUnary { op, dir }, &[w], span)?;
            return self.add(OpKind::Binary(BinaryOp::Div), &[num, den], span);
        }
        if let Some((op, dir)) = aggregate(b) {
            let x = self.param(&bound, "x", span)?;
            return self.add(OpKind::AggUnary { op, dir }, &[x], span);
        }
        if let Builtin::Unary(op) = b {
            let x = self.param(&bound, "x", span)?;
            return self.add(OpKind::Unary(op), &[x], span);
        }
        if let Builtin::Binary(op) = b {
            let x = self.param(&bound, "x", span)?;
            let y = self.param(&bound, "y", span)?;
            return self.add(OpKind::Binary(op), &[x, y], span);
        }
        match b {
            Builtin::Matrix => {
                let data = self.param(&bound, "data", span)?;
                let rows = self.param(&bound, "rows", span)?;
                let cols = self.param(&bound, "cols", span)?;
                let hop = self.b.dag().hop(data);
                if hop.is_matrix() {
                    let byrow = self.param(&bound, "byrow", span)?;
                    self.add(
                        OpKind::Reorg(ReorgOp::Reshape),
                        &[data, rows, cols, byrow],
                        span,
                    )
                } else if hop.value_type == ValueType::String {
                    self.add(OpKind::DataGen(DataGenOp::Sinit), &[data, rows, cols], span)
                } else {
                    self.add(OpKind::DataGen(DataGenOp::Fill), &[data, rows, cols], span)
                }
            }
            Builtin::Rand => {
                let mut ins = Vec::with_capacity(RAND_INPUTS.len());
                for p in RAND_INPUTS {
                    ins.push(self.param(&bound, p, span)?);
                }
                self.add(OpKind::DataGen(DataGenOp::Rand), &ins, span)
            }
            Builtin::Seq => {
                let from = self.param(&bound, "from", span)?;
                let to = self.param(&bound, "to", span)?;
                let incr = match bound.expr_or_default("incr", span) {
                    Some(e) => self.expr(&e)?,
                    // SystemDS: the default increment is -1 when from > to.
                    None => {
                        let le = self.add(OpKind::Binary(BinaryOp::Le), &[from, to], span)?;
                        let one = self.lit(Literal::Int(1), span);
                        let minus_one = self.lit(Literal::Int(-1), span);
                        self.add(
                            OpKind::Ternary(TernaryOp::IfElse),
                            &[le, one, minus_one],
                            span,
                        )?
                    }
                };
                self.add(OpKind::DataGen(DataGenOp::Seq), &[from, to, incr], span)
            }
            Builtin::Diag => self.unary_param(&bound, OpKind::Reorg(ReorgOp::Diag), span),
            Builtin::T => self.unary_param(&bound, OpKind::Reorg(ReorgOp::Transpose), span),
            Builtin::Cumsum => {
                self.unary_param(&bound, OpKind::Cumulative(CumulativeOp::Cumsum), span)
            }
            Builtin::Cumprod => {
                self.unary_param(&bound, OpKind::Cumulative(CumulativeOp::Cumprod), span)
            }
            Builtin::Cummin => {
                self.unary_param(&bound, OpKind::Cumulative(CumulativeOp::Cummin), span)
            }
            Builtin::Cummax => {
                self.unary_param(&bound, OpKind::Cumulative(CumulativeOp::Cummax), span)
            }
            Builtin::Cumsumprod => {
                self.unary_param(&bound, OpKind::Cumulative(CumulativeOp::Cumsumprod), span)
            }
            Builtin::Rev => self.unary_param(&bound, OpKind::Reorg(ReorgOp::Rev), span),
            Builtin::RowIndexMax => {
                self.unary_param(&bound, OpKind::Param(ParamOp::RowIndexMax), span)
            }
            Builtin::RowIndexMin => {
                self.unary_param(&bound, OpKind::Param(ParamOp::RowIndexMin), span)
            }
            Builtin::Table => self.table(&bound, span),
            Builtin::LowerTri | Builtin::UpperTri => {
                let ins = self.params(&bound, &["target", "diag", "values"], span)?;
                let op = if b == Builtin::LowerTri {
                    ParamOp::LowerTri
                } else {
                    ParamOp::UpperTri
                };
                self.add(OpKind::Param(op), &ins, span)
            }
            Builtin::Sample => {
                let range = self.param(&bound, "range", span)?;
                let size = self.param(&bound, "size", span)?;
                let third = bound.arg("replace").map(|e| self.expr(e)).transpose()?;
                let fourth = bound.arg("seed").map(|e| self.expr(e)).transpose()?;
                let (replace, seed) = match (third, fourth) {
                    (Some(r), Some(s)) => (r, s),
                    (Some(x), None) => match self.b.dag().hop(x).value_type {
                        ValueType::Bool => (x, self.lit(Literal::Int(-1), span)),
                        ValueType::Int => (self.lit(Literal::Bool(false), span), x),
                        other => {
                            return Err(CompileError::at(
                                ShapeError::Argument {
                                    function: "sample",
                                    argument: "third argument",
                                    value: format!("of type {other:?}"),
                                    expected: "expected replace (a boolean) or a seed (an integer)",
                                },
                                span,
                            ))
                        }
                    },
                    _ => (
                        self.lit(Literal::Bool(false), span),
                        self.lit(Literal::Int(-1), span),
                    ),
                };
                self.add(
                    OpKind::DataGen(DataGenOp::Sample),
                    &[range, size, replace, seed],
                    span,
                )
            }
            Builtin::Aggregate => {
                let mut ins = self.params(
                    &bound,
                    &["target", "groups", "fn", "ngroups", "order"],
                    span,
                )?;
                if let Some(e) = bound.arg("weights") {
                    ins.push(self.expr(e)?);
                }
                self.add(OpKind::Param(ParamOp::Aggregate), &ins, span)
            }
            Builtin::Unique => {
                // SystemDS rewrites `unique(rbind(A, B))` into its union operation, which keeps
                // the values in the order they first occur rather than its hash set's order
                // (`union.dml` prints them so); the kernel's "union" mode does the same.
                // Also when the rbind is a variable of the same block, as SystemDS's rewrite
                // sees it there.
                let x = self.param(&bound, "x", span)?;
                let input = self.b.dag().hop(x);
                let of_rbind = input.op == OpKind::Nary(NaryOp::Rbind) && input.inputs.len() == 2;
                let dir = if of_rbind && bound.arg("dir").is_none() {
                    self.lit(Literal::Str("union".into()), span)
                } else {
                    self.param(&bound, "dir", span)?
                };
                let ins = [x, dir];
                self.add(OpKind::Param(ParamOp::Unique), &ins, span)
            }
            Builtin::RemoveEmpty => {
                let mut ins = vec![
                    self.param(&bound, "target", span)?,
                    self.param(&bound, "margin", span)?,
                    self.param(&bound, "empty.return", span)?,
                ];
                if let Some(e) = bound.arg("select") {
                    ins.push(self.expr(e)?);
                }
                self.add(OpKind::Param(ParamOp::RemoveEmpty), &ins, span)
            }
            Builtin::Order => {
                let ins = self.params(
                    &bound,
                    &["target", "by", "decreasing", "index.return"],
                    span,
                )?;
                self.add(OpKind::Param(ParamOp::Order), &ins, span)
            }
            Builtin::Outer => {
                let ins = [
                    self.param(&bound, "X", span)?,
                    self.param(&bound, "Y", span)?,
                    self.param(&bound, "op", span)?,
                ];
                // SystemDS resolves the operator when it parses the script.
                if let OpKind::Literal(Literal::Str(op)) = &self.b.dag().hop(ins[2]).op {
                    if BinaryOp::from_outer_name(op).is_none() {
                        return Err(CompileError::at(
                            ShapeError::Argument {
                                function: "outer",
                                argument: "op",
                                value: format!("{op:?}"),
                                expected:
                                    "expected a binary operator such as \"*\", \"<\" or \"max\"",
                            },
                            span,
                        ));
                    }
                }
                self.add(OpKind::Param(ParamOp::Outer), &ins, span)
            }
            Builtin::Solve => {
                let a = self.param(&bound, "A", span)?;
                let rhs = self.param(&bound, "b", span)?;
                self.add(OpKind::Solve, &[a, rhs], span)
            }
            // SystemDS's `cbind` (alias `append`) of a list appends the other values to it.
            Builtin::Cbind if variadic.len() > 1 && self.b.dag().hop(variadic[0]).is_list() => {
                let mut list = variadic[0];
                for &x in &variadic[1..] {
                    list = self.add(OpKind::ListAppend, &[list, x], span)?;
                }
                Ok(list)
            }
            Builtin::Cbind | Builtin::Rbind
                if variadic.len() == 2
                    && variadic.iter().all(|&x| {
                        let h = self.b.dag().hop(x);
                        h.is_scalar() && h.value_type == ValueType::String
                    }) =>
            {
                // SystemDS's scalar string append: the two strings joined by a line break.
                let newline = self.lit(Literal::Str("\n".into()), span);
                let head =
                    self.add(OpKind::Binary(BinaryOp::Add), &[variadic[0], newline], span)?;
                self.add(OpKind::Binary(BinaryOp::Add), &[head, variadic[1]], span)
            }
            Builtin::Cbind => self.add(OpKind::Nary(NaryOp::Cbind), &variadic, span),
            Builtin::List => {
                // Named when its elements are (`list()` is unnamed: anything may be added).
                let names = args
                    .iter()
                    .map(|a| a.name.as_ref().map(|n| n.name.clone()))
                    .collect::<Option<Vec<String>>>()
                    .filter(|n| !n.is_empty());
                self.add(OpKind::ListNew { names }, &variadic, span)
            }
            Builtin::Rbind => self.add(OpKind::Nary(NaryOp::Rbind), &variadic, span),
            Builtin::Log => {
                let x = self.param(&bound, "x", span)?;
                match bound.expr_or_default("base", span) {
                    Some(e) => {
                        let base = self.expr(&e)?;
                        self.add(OpKind::Binary(BinaryOp::Log), &[x, base], span)
                    }
                    None => self.add(OpKind::Unary(UnaryOp::Log), &[x], span),
                }
            }
            Builtin::Min | Builtin::Max | Builtin::Pmin | Builtin::Pmax => {
                let is_min = matches!(b, Builtin::Min | Builtin::Pmin);
                match variadic.len() {
                    1 => {
                        if self.b.dag().hop(variadic[0]).is_scalar() {
                            return Err(CompileError::at(
                                CheckError::SingleScalar { builtin: b.name() },
                                span,
                            ));
                        }
                        let op = if is_min { AggOp::Min } else { AggOp::Max };
                        self.add(
                            OpKind::AggUnary {
                                op,
                                dir: Direction::Full,
                            },
                            &variadic,
                            span,
                        )
                    }
                    2 => {
                        let op = if is_min { BinaryOp::Min } else { BinaryOp::Max };
                        self.add(OpKind::Binary(op), &variadic, span)
                    }
                    _ => {
                        let op = if is_min { NaryOp::Min } else { NaryOp::Max };
                        self.add(OpKind::Nary(op), &variadic, span)
                    }
                }
            }
            Builtin::Sd => {
                let x = self.param(&bound, "x", span)?;
                let var = self.add(
                    OpKind::AggUnary {
                        op: AggOp::Var,
                        dir: Direction::Full,
                    },
                    &[x],
                    span,
                )?;
                self.add(OpKind::Unary(UnaryOp::Sqrt), &[var], span)
            }
            Builtin::Ifelse => {
                let ins = [
                    self.param(&bound, "test", span)?,
                    self.param(&bound, "yes", span)?,
                    self.param(&bound, "no", span)?,
                ];
                self.add(OpKind::Ternary(TernaryOp::IfElse), &ins, span)
            }
            Builtin::Replace => {
                let ins = [
                    self.param(&bound, "target", span)?,
                    self.param(&bound, "pattern", span)?,
                    self.param(&bound, "replacement", span)?,
                ];
                self.add(OpKind::Ternary(TernaryOp::Replace), &ins, span)
            }
            Builtin::Ppred => {
                let x = self.param(&bound, "x", span)?;
                let y = self.param(&bound, "y", span)?;
                let op = match bound.arg("op").map(|e| &e.kind) {
                    Some(ExprKind::Str(s)) => BinaryOp::from_name(s).filter(|o| o.is_comparison()),
                    _ => None,
                };
                let Some(op) = op else {
                    return Err(CompileError::at(
                        CheckError::ArgumentValue {
                            builtin: "ppred",
                            param: "op",
                            expected:
                                "a string literal: \">\", \">=\", \"<\", \"<=\", \"==\" or \"!=\"",
                        },
                        span,
                    ));
                };
                self.add(OpKind::Binary(op), &[x, y], span)
            }
            Builtin::Distribution(op) => {
                let params = b.signature().params;
                let mut ins = Vec::with_capacity(params.len());
                for p in params {
                    ins.push(self.param(&bound, p.name, span)?);
                }
                self.add(OpKind::Stat(op), &ins, span)
            }
            Builtin::Cdf | Builtin::Icdf => {
                // SystemDS names the distribution by a string: it must be known when the
                // script is compiled, to pick the function and its parameters.
                let function = b.name();
                let dist = match bound.arg("dist").map(|e| &e.kind) {
                    Some(ExprKind::Str(s)) => s.to_lowercase(),
                    _ => return Err(CompileError::at(
                        ShapeError::Argument {
                            function,
                            argument: "dist",
                            value: "(not a string literal)".into(),
                            expected:
                                "a string literal: \"normal\", \"exp\", \"chisq\", \"f\" or \"t\"",
                        },
                        span,
                    )),
                };
                let inverse = b == Builtin::Icdf;
                let (op, params): (StatOp, &[&'static str]) = match (dist.as_str(), inverse) {
                    ("normal", false) => (StatOp::NormalCdf, &["mean", "sd"]),
                    ("normal", true) => (StatOp::NormalQuantile, &["mean", "sd"]),
                    ("exp", false) => (StatOp::ExpCdf, &["rate"]),
                    ("exp", true) => (StatOp::ExpQuantile, &["rate"]),
                    ("chisq", false) => (StatOp::ChisqCdf, &["df"]),
                    ("chisq", true) => (StatOp::ChisqQuantile, &["df"]),
                    ("t", false) => (StatOp::TCdf, &["df"]),
                    ("t", true) => (StatOp::TQuantile, &["df"]),
                    ("f", false) => (StatOp::FCdf, &["df1", "df2"]),
                    ("f", true) => (StatOp::FQuantile, &["df1", "df2"]),
                    _ => {
                        return Err(CompileError::at(
                            ShapeError::Argument {
                                function,
                                argument: "dist",
                                value: format!("{dist:?}"),
                                expected: "one of \"normal\", \"exp\", \"chisq\", \"f\" and \"t\"",
                            },
                            span,
                        ))
                    }
                };
                let mut ins = vec![self.param(&bound, "target", span)?];
                for &p in params {
                    if bound.arg(p).is_none() && matches!(p, "df" | "df1" | "df2") {
                        return Err(CompileError::at(
                            ShapeError::Argument {
                                function,
                                argument: "df",
                                value: "(missing)".into(),
                                expected: "the degrees of freedom of the chisq and t \
                                           distributions (df), and of f (df1 and df2)",
                            },
                            span,
                        ));
                    }
                    ins.push(self.param(&bound, p, span)?);
                }
                if !inverse {
                    ins.push(self.param(&bound, "lower.tail", span)?);
                }
                self.add(OpKind::Stat(op), &ins, span)
            }
            Builtin::Contains => {
                // SystemDS's `contains` as the aggregate it is: any cell equal to the pattern,
                // where a NaN pattern matches NaN cells (`(X == v) | (X != X & v != v)`), so it
                // fuses like any other full aggregate. A 0-row matrix contains nothing (SystemDS
                // 3.4 answers TRUE for a pattern of 0 there: its empty-block shortcut).
                let x = self.param(&bound, "target", span)?;
                let v = self.param(&bound, "pattern", span)?;
                let eq = self.add(OpKind::Binary(BinaryOp::Eq), &[x, v], span)?;
                let x_nan = self.add(OpKind::Binary(BinaryOp::Ne), &[x, x], span)?;
                let v_nan = self.add(OpKind::Binary(BinaryOp::Ne), &[v, v], span)?;
                let both_nan = self.add(OpKind::Binary(BinaryOp::And), &[x_nan, v_nan], span)?;
                let hit = self.add(OpKind::Binary(BinaryOp::Or), &[eq, both_nan], span)?;
                let (op, dir) = (AggOp::Sum, Direction::Full);
                let hits = self.add(OpKind::AggUnary { op, dir }, &[hit], span)?;
                let zero = self.lit(Literal::Int(0), span);
                self.add(OpKind::Binary(BinaryOp::Gt), &[hits, zero], span)
            }
            Builtin::RowSds | Builtin::ColSds => {
                let dir = if b == Builtin::RowSds {
                    Direction::Row
                } else {
                    Direction::Col
                };
                let x = self.param(&bound, "x", span)?;
                let var = self.add(
                    OpKind::AggUnary {
                        op: AggOp::Var,
                        dir,
                    },
                    &[x],
                    span,
                )?;
                self.add(OpKind::Unary(UnaryOp::Sqrt), &[var], span)
            }
            Builtin::Quantile
            | Builtin::Median
            | Builtin::InterQuartileMean
            | Builtin::Moment
            | Builtin::Cov => {
                // With one argument more than the least, the weights are the middle one
                // (the last one for cov).
                let weighted = variadic.len() == b.signature().max_args.unwrap_or(0);
                let op = match (b, weighted) {
                    (Builtin::Quantile, false) => StatOp::Quantile,
                    (Builtin::Quantile, true) => StatOp::WeightedQuantile,
                    (Builtin::Median, false) => StatOp::Median,
                    (Builtin::Median, true) => StatOp::WeightedMedian,
                    (Builtin::InterQuartileMean, false) => StatOp::Iqm,
                    (Builtin::InterQuartileMean, true) => StatOp::WeightedIqm,
                    (Builtin::Moment, false) => StatOp::Moment,
                    (Builtin::Moment, true) => StatOp::WeightedMoment,
                    (_, false) => StatOp::Cov,
                    (_, true) => StatOp::WeightedCov,
                };
                self.add(OpKind::Stat(op), &variadic, span)
            }
            Builtin::Dnn(op) => {
                // The hop's inputs are the parameters in order, less the filter's channel count,
                // which SystemDS takes from the input's shape.
                let mut ins = Vec::with_capacity(op.arity());
                for p in b.signature().params {
                    if p.name != "filter_shape2" {
                        ins.push(self.param(&bound, p.name, span)?);
                    }
                }
                self.add(OpKind::Dnn(op), &ins, span)
            }
            Builtin::Inv => self.unary_param(&bound, OpKind::LinAlg(LinAlgOp::Inverse), span),
            Builtin::Cholesky => self.unary_param(&bound, OpKind::LinAlg(LinAlgOp::Cholesky), span),
            Builtin::Det => self.unary_param(&bound, OpKind::LinAlg(LinAlgOp::Det), span),
            Builtin::Trace => self.unary_param(&bound, OpKind::LinAlg(LinAlgOp::Trace), span),
            Builtin::SqrtMatrix => {
                self.unary_param(&bound, OpKind::LinAlg(LinAlgOp::SqrtMatrix), span)
            }
            Builtin::AsList => self.unary_param(&bound, OpKind::ListUnnest, span),
            Builtin::AsFrame => self.unary_param(&bound, OpKind::Cast(CastOp::AsFrame), span),
            Builtin::Colnames => self.unary_param(&bound, OpKind::Colnames, span),
            Builtin::TransformApply | Builtin::TransformDecode => {
                let ins = self.params(&bound, &["target", "spec", "meta"], span)?;
                let op = if b == Builtin::TransformApply {
                    OpKind::TransformApply
                } else {
                    OpKind::TransformDecode
                };
                self.add(op, &ins, span)
            }
            Builtin::Eigen
            | Builtin::Svd
            | Builtin::Lu
            | Builtin::Qr
            | Builtin::Remove
            | Builtin::TransformEncode => {
                let n = match b.signature().result {
                    builtins::ResultKind::Several(n) => n,
                    _ => 1,
                };
                Err(crate::program::several_results_error(b, n, span))
            }
            Builtin::Nrow => self.unary_param(&bound, OpKind::Meta(MetaOp::Nrow), span),
            Builtin::Ncol => self.unary_param(&bound, OpKind::Meta(MetaOp::Ncol), span),
            Builtin::Length => self.unary_param(&bound, OpKind::Meta(MetaOp::Length), span),
            Builtin::AsScalar => self.unary_param(&bound, OpKind::Cast(CastOp::AsScalar), span),
            Builtin::AsMatrix => self.unary_param(&bound, OpKind::Cast(CastOp::AsMatrix), span),
            Builtin::AsDouble => self.unary_param(&bound, OpKind::Cast(CastOp::AsDouble), span),
            Builtin::AsInteger => self.unary_param(&bound, OpKind::Cast(CastOp::AsInt), span),
            Builtin::AsLogical => self.unary_param(&bound, OpKind::Cast(CastOp::AsBool), span),
            Builtin::ToString => {
                let mut ins = Vec::with_capacity(TOSTRING_INPUTS.len());
                for p in TOSTRING_INPUTS {
                    ins.push(self.param(&bound, p, span)?);
                }
                self.add(OpKind::ToString, &ins, span)
            }
            Builtin::Read => {
                let file = self.param(&bound, "file", span)?;
                let mut ins = vec![file];
                let mut params = Vec::new();
                for p in bound.params.iter().skip(1) {
                    if let builtins::BoundValue::Arg(e) = p.value {
                        ins.push(self.expr(e)?);
                        params.push(p.name.to_string());
                    }
                }
                self.add(OpKind::PersistentRead { params }, &ins, span)
            }
            Builtin::Time => self.add(OpKind::DataGen(DataGenOp::Time), &[], span),
            Builtin::Lineage => self.unary_param(&bound, OpKind::Lineage, span),
            Builtin::Ifdef => {
                let name_arg = bound.arg("name");
                let Some(Expr {
                    kind: ExprKind::ScriptArg(arg),
                    ..
                }) = name_arg
                else {
                    return Err(CompileError::at(CheckError::IfdefNotScriptArg, span));
                };
                match self.args.literal(arg) {
                    Some(l) => Ok(self.lit(l, span)),
                    None => self.param(&bound, "default", span),
                }
            }
            other => Err(CompileError::internal(Internal::NoLowering {
                builtin: other.name(),
            })),
        }
    }

    /// `table(A, B[, W][, odim1, odim2])`: inputs `[A, B, W, odim1, odim2]`, W 1 and the
    /// dimensions -1 where not given. With four arguments the last two are the dimensions.
    /// `table(seq(1, n), B)` (SystemDS's "ctable expand": a literal start and step of 1, a
    /// scalar weight, no dimensions) has as many rows as B, even where B's last values are NaN
    /// and skipped, so it gets `odim1 = nrow(B)`.
    fn table(&mut self, bound: &builtins::BoundArgs<'_>, span: Span) -> Result<HopId> {
        let a = self.param(bound, "A", span)?;
        let b = self.param(bound, "B", span)?;
        let given = [bound.arg("W"), bound.arg("odim1"), bound.arg("odim2")];
        let (w, dims) = match given {
            [w, None, None] => (w, None),
            [Some(d1), Some(d2), None] => (None, Some((d1, d2))),
            [w, Some(d1), Some(d2)] => (w, Some((d1, d2))),
            _ => {
                return Err(CompileError::internal(Internal::MissingParameter {
                    name: "odim2".to_string(),
                }))
            }
        };
        let w = match w {
            Some(e) => self.expr(e)?,
            None => self.lit(Literal::Double(1.0), span),
        };
        let (d1, d2) = match dims {
            Some((d1, d2)) => (self.expr(d1)?, self.expr(d2)?),
            None => {
                let expand = self.b.dag().hop(w).is_scalar()
                    && self.b.dag().hop(b).is_matrix()
                    && bound.arg("A").is_some_and(is_unit_seq);
                let d1 = if expand {
                    self.add(OpKind::Meta(MetaOp::Nrow), &[b], span)?
                } else {
                    self.lit(Literal::Int(-1), span)
                };
                (d1, self.lit(Literal::Int(-1), span))
            }
        };
        self.add(OpKind::Param(ParamOp::Table), &[a, b, w, d1, d2], span)
    }

    fn unary_param(
        &mut self,
        bound: &builtins::BoundArgs<'_>,
        op: OpKind,
        span: Span,
    ) -> Result<HopId> {
        let x = self.param(bound, "x", span)?;
        self.add(op, &[x], span)
    }
}

/// Whether `e` is `seq(1, n)` or `seq(1, n, 1)` with literal ones (SystemDS's test for its
/// "ctable expand" rewrite, which also requires the literal start we check).
fn is_unit_seq(e: &Expr) -> bool {
    let ExprKind::Call { name, args } = &e.kind else {
        return false;
    };
    let one = |a: &ast::Arg| match a.value.kind {
        ExprKind::Int(v) => v == 1,
        ExprKind::Double(v) => v == 1.0,
        _ => false,
    };
    name == "seq"
        && args.iter().all(|a| a.name.is_none())
        && (args.len() == 2 || args.len() == 3)
        && one(&args[0])
        && (args.len() == 2 || one(&args[2]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn script_args_are_typed_like_literals() {
        assert_eq!(type_script_arg("3"), Literal::Int(3));
        assert_eq!(type_script_arg("-3"), Literal::Int(-3));
        assert_eq!(type_script_arg("3.5"), Literal::Double(3.5));
        assert_eq!(type_script_arg("1e3"), Literal::Double(1000.0));
        assert_eq!(type_script_arg("TRUE"), Literal::Bool(true));
        assert_eq!(type_script_arg("out.csv"), Literal::Str("out.csv".into()));
        assert_eq!(type_script_arg("\"a b\""), Literal::Str("a b".into()));
        assert_eq!(type_script_arg("e"), Literal::Str("e".into()));
    }
}
