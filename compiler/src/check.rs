//! Semantic checks over a whole [`Program`], run before anything executes.
//!
//! [`check_program`] reports, all at once and in program order:
//!
//! * variables read before they are assigned on every path (flow-aware, like SystemDS's
//!   validation: one pass in program order, loop bodies seen once with the variables defined
//!   before the loop; a variable assigned in only one branch of an `if` counts as defined
//!   afterwards, where SystemDS merely warns), with a "did you mean" suggestion;
//! * unknown functions, and calls whose arguments do not bind to the callee's parameters
//!   ([`builtins::bind_args`], [`builtins::bind_udf_args`]);
//! * `[a, b] = f(...)` or `x = f(...)` whose number of targets differs from `f`'s number of
//!   results (SystemDS rejects `x = f()` for a two-result `f` and silently ignores surplus
//!   targets; lafuse rejects both), function results never assigned in the body, non-constant
//!   parameter defaults (SystemDS ignores them and then reports a missing argument);
//! * data-type errors visible without running the script: a scalar where a matrix is needed
//!   (`nrow(3)`, `as.scalar(3)`, `x[1, 1]` on a scalar, `3 %*% 2`, `min(3)`), a matrix where a
//!   scalar is needed (`as.double(X)`, `stop(X)`, a matrix as `if`/`while` condition or loop
//!   bound, a matrix passed to a `double` parameter), and using the no-value built-ins
//!   (`print`, `stop`, `write`) as values;
//! * `$name` script arguments that have no value and no `ifdef` default.
//!
//! Types are tracked only as far as they are certain: anything a loop may change, anything
//! merged from branches that disagree, and script arguments become "unknown" and are never
//! reported, so a correct script never fails these checks.

use crate::ast::{Arg, Expr, ExprKind, Ident, IndexRange, Stmt, StmtKind, UnaryOp, ValueType};
use crate::builtins::{self, ArgKind, Builtin, ResultKind};
use crate::error::{CheckError, CompileError, Internal, Kind, Note, Operand, Unsupported};
use crate::program::{is_temporary, Block, CallBlock, Function, Program};
use crate::span::Span;
use crate::stack::with_stack;
use std::collections::{BTreeMap, BTreeSet};

/// Runs every check of this module on `program`. `script_args` holds the names of the script
/// arguments given on the command line (without the `$`). Returns all errors found, in
/// program order (main program first, then functions by name).
pub fn check_program(
    program: &Program,
    script_args: &BTreeSet<String>,
) -> Result<(), Vec<CompileError>> {
    check_program_with_inputs(program, script_args, &BTreeSet::new())
}

/// [`check_program`] for a script whose main program starts with the variables `inputs`
/// already bound (a prepared script's inputs, values of any type that an embedder binds
/// before each execution).
pub fn check_program_with_inputs(
    program: &Program,
    script_args: &BTreeSet<String>,
    inputs: &BTreeSet<String>,
) -> Result<(), Vec<CompileError>> {
    let mut checker = Checker {
        program,
        script_args,
        errors: vec![],
    };
    let mut env = Env::default();
    for name in inputs {
        env.define(name, Ty::Unknown);
    }
    checker.blocks(&program.main, &mut env);
    for function in program.functions.values() {
        checker.function(function);
    }
    if checker.errors.is_empty() {
        Ok(())
    } else {
        Err(checker.errors)
    }
}

/// What is statically known about a value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ty {
    Matrix,
    Double,
    Int,
    Bool,
    Str,
    List,
    Frame,
    /// A scalar of unknown value type.
    Scalar,
    Unknown,
    /// The "value" of `print`/`stop`/`write`: there is none.
    Nothing,
}

impl Ty {
    fn is_scalar(self) -> bool {
        matches!(self, Ty::Double | Ty::Int | Ty::Bool | Ty::Str | Ty::Scalar)
    }
    fn merge(self, other: Ty) -> Ty {
        if self == other {
            self
        } else if self.is_scalar() && other.is_scalar() {
            Ty::Scalar
        } else {
            Ty::Unknown
        }
    }
    fn of_decl(vt: ValueType) -> Ty {
        match vt {
            ValueType::Matrix => Ty::Matrix,
            ValueType::Double => Ty::Double,
            ValueType::Int => Ty::Int,
            ValueType::Bool => Ty::Bool,
            ValueType::String => Ty::Str,
            ValueType::List => Ty::List,
            ValueType::Frame => Ty::Frame,
        }
    }
}

/// Variables defined at a program point, with what is known of them.
#[derive(Clone, Debug, Default)]
struct Env {
    vars: BTreeMap<String, Ty>,
}

impl Env {
    fn define(&mut self, name: &str, ty: Ty) {
        self.vars.insert(name.to_string(), ty);
    }
    /// Variables defined on either path, with merged knowledge.
    fn union(mut self, other: Env) -> Env {
        for (name, ty) in other.vars {
            let merged = match self.vars.get(&name) {
                Some(&mine) => mine.merge(ty),
                None => ty,
            };
            self.vars.insert(name, merged);
        }
        self
    }
}

struct Checker<'p> {
    program: &'p Program,
    script_args: &'p BTreeSet<String>,
    errors: Vec<CompileError>,
}

fn describe(expr: &Expr) -> Operand {
    match &expr.kind {
        ExprKind::Var(name) if !is_temporary(name) => Operand::Var { name: name.clone() },
        _ => Operand::Argument,
    }
}

impl Checker<'_> {
    fn error(&mut self, err: CompileError) {
        self.errors.push(err);
    }

    /// The first user-defined function `expr` calls, with the call's span.
    fn udf_call_in(&self, expr: &Expr) -> Option<(String, Span)> {
        with_stack(|| {
            let children: Vec<&Expr> = match &expr.kind {
                ExprKind::Call { name, args } => {
                    if builtins::lookup(name).is_none() && self.program.functions.contains_key(name)
                    {
                        return Some((name.clone(), expr.span));
                    }
                    args.iter().map(|a| &a.value).collect()
                }
                ExprKind::Unary { operand, .. } => vec![operand],
                ExprKind::Binary { lhs, rhs, .. } => vec![lhs, rhs],
                ExprKind::Index { target, rows, cols } => {
                    let mut v: Vec<&Expr> = vec![target];
                    for r in [rows, cols].into_iter().flatten() {
                        v.push(&r.lower);
                        v.extend(r.upper.as_deref());
                    }
                    v
                }
                _ => vec![],
            };
            children.into_iter().find_map(|c| self.udf_call_in(c))
        })
    }

    fn function(&mut self, function: &Function) {
        let def = &function.def;
        let mut env = Env::default();
        for param in &def.params {
            // A default is an expression evaluated in the caller's scope at each call that
            // leaves the parameter out (SystemDS compiles it into the call's arguments), so it
            // is checked there (`call_block`); here only that it calls no user-defined
            // function, which SystemDS does not allow in arguments either.
            if let Some(default) = &param.default {
                if let Some((callee, span)) = self.udf_call_in(default) {
                    self.error(CompileError::at(
                        CheckError::DefaultCallsFunction {
                            param: param.name.clone(),
                            function: def.name.clone(),
                            callee,
                        },
                        span,
                    ));
                }
            }
            env.define(&param.name, Ty::of_decl(param.ty));
        }
        let env = self.blocks(&function.body, &mut env).clone();
        for result in &def.results {
            if !env.vars.contains_key(&result.name) {
                self.error(CompileError::at(
                    CheckError::ResultUnassigned {
                        function: def.name.clone(),
                        result: result.name.clone(),
                    },
                    result.span,
                ));
            }
        }
    }

    fn blocks<'e>(&mut self, blocks: &[Block], env: &'e mut Env) -> &'e mut Env {
        for block in blocks {
            self.block(block, env);
        }
        env
    }

    fn block(&mut self, block: &Block, env: &mut Env) {
        with_stack(|| self.block_step(block, env))
    }

    fn block_step(&mut self, block: &Block, env: &mut Env) {
        match block {
            Block::Basic(basic) => {
                for stmt in &basic.stmts {
                    self.stmt(stmt, env);
                }
            }
            Block::If {
                cond,
                then_blocks,
                else_blocks,
                ..
            } => {
                self.condition(cond, env, "if");
                let mut then_env = env.clone();
                self.blocks(then_blocks, &mut then_env);
                let mut else_env = env.clone();
                self.blocks(else_blocks, &mut else_env);
                *env = then_env.union(else_env);
            }
            Block::For {
                var,
                from,
                to,
                step,
                body,
                ..
            } => {
                for bound in [Some(from), Some(to), step.as_ref()].into_iter().flatten() {
                    let ty = self.expr(bound, env);
                    if ty == Ty::Matrix {
                        self.error(CompileError::at(CheckError::MatrixLoopBound, bound.span));
                    }
                }
                self.loop_body(body, env, Some(var));
            }
            Block::While { cond, body, .. } => {
                // The condition is evaluated again after each iteration: check it with what
                // the body may have changed forgotten.
                forget_assigned(body, env);
                self.condition(cond, env, "while");
                self.loop_body(body, env, None);
            }
            Block::Call(call) => self.call_block(call, env),
        }
    }

    /// Checks a loop body once (as SystemDS does: a read before the first assignment in the
    /// body is an error even if a later iteration would see the value), with the types of
    /// variables the body assigns forgotten, since a later iteration sees the body's values.
    fn loop_body(&mut self, body: &[Block], env: &mut Env, var: Option<&Ident>) {
        forget_assigned(body, env);
        let mut inner = env.clone();
        if let Some(var) = var {
            inner.define(&var.name, Ty::Scalar);
        }
        self.blocks(body, &mut inner);
        let after = std::mem::take(env).union(inner);
        *env = after;
    }

    fn condition(&mut self, cond: &Expr, env: &mut Env, what: &'static str) {
        let ty = self.expr(cond, env);
        if ty == Ty::Matrix {
            self.error(
                CompileError::at(CheckError::MatrixCondition { statement: what }, cond.span)
                    .with_note(Note::ReduceCondition),
            );
        }
    }

    fn stmt(&mut self, stmt: &Stmt, env: &mut Env) {
        with_stack(|| self.stmt_step(stmt, env))
    }

    fn stmt_step(&mut self, stmt: &Stmt, env: &mut Env) {
        match &stmt.kind {
            StmtKind::Assign { target, value } => {
                let ty = self.value_expr(value, env);
                env.define(&target.name, ty);
            }
            StmtKind::IndexAssign {
                target,
                rows,
                cols,
                value,
            } => {
                self.range(rows.as_ref(), env);
                self.range(cols.as_ref(), env);
                self.value_expr(value, env);
                match env.vars.get(&target.name) {
                    None => {
                        self.error(self.undefined(
                            &target.name,
                            target.span,
                            env,
                            CheckError::IndexedBeforeInitialized {
                                name: target.name.clone(),
                            },
                        ));
                        env.define(&target.name, Ty::Unknown);
                    }
                    Some(ty) if ty.is_scalar() => self.error(CompileError::at(
                        CheckError::ScalarIndexed {
                            target: Operand::Var {
                                name: target.name.clone(),
                            },
                        },
                        target.span,
                    )),
                    Some(_) => {}
                }
            }
            StmtKind::MultiAssign { call, targets } => {
                // build_program turns every other multi-assignment into a call block; what
                // stays in a basic block calls a built-in with several results, all matrices.
                let several = match &call.kind {
                    ExprKind::Call { name, .. } => builtins::lookup(name)
                        .filter(|b| matches!(b.signature().result, ResultKind::Several(_))),
                    _ => None,
                };
                if several.is_none() {
                    self.error(CompileError::internal(Internal::MultiAssignInBlock {
                        span: call.span,
                    }));
                }
                if let ExprKind::Call { name, args } = &call.kind {
                    self.call_expr(name, args, call.span, env);
                }
                // `remove` returns two lists; the decompositions matrices.
                let ty = match several {
                    Some(builtins::Builtin::Remove) => Ty::List,
                    _ => Ty::Matrix,
                };
                for t in targets {
                    env.define(&t.name, ty);
                }
            }
            StmtKind::Expr(expr) => {
                self.expr(expr, env);
            }
            StmtKind::If { .. } | StmtKind::For { .. } | StmtKind::While { .. } => {
                self.error(CompileError::internal(Internal::Invariant {
                    what: "control flow statement left in a basic block",
                }));
            }
        }
    }

    /// An expression whose value is used (assigned): it must have one.
    fn value_expr(&mut self, expr: &Expr, env: &mut Env) -> Ty {
        let ty = self.expr(expr, env);
        if ty == Ty::Nothing {
            let name = match &expr.kind {
                ExprKind::Call { name, .. } => name.as_str(),
                _ => "this expression",
            };
            self.error(CompileError::at(
                CheckError::NoValueToAssign {
                    name: name.to_string(),
                },
                expr.span,
            ));
            return Ty::Unknown;
        }
        ty
    }

    fn call_block(&mut self, call: &CallBlock, env: &mut Env) {
        let arg_tys: Vec<Ty> = call
            .args
            .iter()
            .map(|a| self.value_expr(&a.value, env))
            .collect();
        let Some(function) = self.program.functions.get(&call.function) else {
            self.error(self.unknown_function(&call.function, call.span));
            for t in &call.targets {
                env.define(&t.name, Ty::Unknown);
            }
            return;
        };
        let def = &function.def;
        // `eval`'s argument spread over the parameters is bound when it runs (its value may
        // be a list or the one argument).
        let bound = if call.spread {
            Err(None)
        } else {
            builtins::bind_udf_args(def, &call.args, call.span).map_err(Some)
        };
        match bound {
            Ok(bound) => {
                for (param, bp) in def.params.iter().zip(&bound.params) {
                    let (arg, given) = match bp.value {
                        builtins::BoundValue::Arg(arg) => {
                            let Some(idx) =
                                call.args.iter().position(|a| std::ptr::eq(&a.value, arg))
                            else {
                                continue;
                            };
                            (arg, arg_tys[idx])
                        }
                        // A default left to this call is evaluated here, in the caller's
                        // scope (a default calling a function is reported at the definition).
                        builtins::BoundValue::DefaultExpr(default)
                            if self.udf_call_in(default).is_none() =>
                        {
                            (default, self.value_expr(default, env))
                        }
                        _ => continue,
                    };
                    let declared = Ty::of_decl(param.ty);
                    // An `eval` branch runs only for its function's name; there a mismatch
                    // is the run's error (`conform`), as in SystemDS.
                    let mismatch = !call.from_eval
                        && ((declared == Ty::Matrix && given.is_scalar())
                            || (declared.is_scalar() && given == Ty::Matrix));
                    if mismatch {
                        let kind = |ty: Ty| {
                            if ty == Ty::Matrix {
                                Kind::Matrix
                            } else {
                                Kind::Scalar
                            }
                        };
                        self.error(CompileError::at(
                            CheckError::ParameterKind {
                                param: param.name.clone(),
                                function: def.name.clone(),
                                expected: kind(declared),
                                given: describe(arg),
                                found: kind(given),
                            },
                            arg.span,
                        ));
                    }
                }
            }
            Err(Some(e)) => self.error(e),
            Err(None) => {}
        }
        // SystemDS binds results to targets one to one where it inlines the function (a body
        // of one basic block): `x = f()` with two results is an error there. A function it
        // calls binds its first results to fewer targets (imputeByKNN's `X2 =
        // imputeByMean(...)`, `[TK, TKC, D] = incSliceLine(...)` of eleven results).
        let n_targets = call.targets.len();
        let n_results = def.results.len();
        let inlined = matches!(function.body.as_slice(), [Block::Basic(_)]);
        let prefix_of_several = n_targets < n_results
            && !inlined
            && !call.targets.iter().all(|t| is_temporary(&t.name));
        if n_targets > 0 && n_targets != n_results && !prefix_of_several {
            let function = def.name.clone();
            let cause = if call.targets.iter().all(|t| is_temporary(&t.name)) {
                CheckError::ResultsInExpression {
                    function,
                    results: n_results,
                }
            } else if n_targets == 1 && n_results > 1 {
                CheckError::AssignAllResults {
                    function,
                    results: def.results.iter().map(|r| r.name.clone()).collect(),
                }
            } else {
                CheckError::TargetCount {
                    function,
                    results: n_results,
                    targets: n_targets,
                }
            };
            self.error(CompileError::at(cause, call.span));
        }
        for (i, target) in call.targets.iter().enumerate() {
            let ty = def
                .results
                .get(i)
                .map_or(Ty::Unknown, |r| Ty::of_decl(r.ty));
            env.define(&target.name, ty);
        }
    }

    fn range(&mut self, range: Option<&IndexRange>, env: &mut Env) {
        if let Some(r) = range {
            for bound in std::iter::once(&*r.lower).chain(r.upper.as_deref()) {
                if self.expr(bound, env) == Ty::Matrix {
                    self.error(CompileError::at(CheckError::MatrixIndex, bound.span));
                }
            }
        }
    }

    fn undefined(&self, name: &str, span: Span, env: &Env, cause: CheckError) -> CompileError {
        let mut err = CompileError::at(cause, span);
        let candidates = env
            .vars
            .keys()
            .map(String::as_str)
            .filter(|n| !is_temporary(n));
        if let Some(close) = builtins::closest(name, candidates) {
            err = err.with_note(Note::DidYouMean {
                name: close.to_string(),
            });
        }
        err
    }

    fn unknown_function(&self, name: &str, span: Span) -> CompileError {
        unknown_function(
            name,
            span,
            self.program.functions.keys().map(String::as_str),
        )
    }

    fn expr(&mut self, expr: &Expr, env: &mut Env) -> Ty {
        with_stack(|| self.expr_step(expr, env))
    }

    fn expr_step(&mut self, expr: &Expr, env: &mut Env) -> Ty {
        match &expr.kind {
            ExprKind::Double(_) => Ty::Double,
            ExprKind::Int(_) => Ty::Int,
            ExprKind::Bool(_) => Ty::Bool,
            ExprKind::Str(_) => Ty::Str,
            ExprKind::Var(name) => match env.vars.get(name) {
                Some(&ty) => ty,
                None => {
                    let err = self.undefined(
                        name,
                        expr.span,
                        env,
                        CheckError::ReadBeforeAssigned { name: name.clone() },
                    );
                    self.error(err);
                    // Report each variable once, not at every later read.
                    env.define(name, Ty::Unknown);
                    Ty::Unknown
                }
            },
            ExprKind::ScriptArg(name) => {
                if !self.script_args.contains(name) {
                    self.error(
                        CompileError::at(
                            CheckError::MissingScriptArg { name: name.clone() },
                            expr.span,
                        )
                        .with_note(Note::PassScriptArg { name: name.clone() }),
                    );
                }
                Ty::Unknown
            }
            ExprKind::Unary { op, operand } => {
                let ty = self.value_expr(operand, env);
                match (op, ty) {
                    (_, Ty::Matrix) => Ty::Matrix,
                    (UnaryOp::Not, t) if t.is_scalar() => Ty::Bool,
                    (_, Ty::Int) => Ty::Int,
                    (_, t) if t.is_scalar() => Ty::Double,
                    _ => Ty::Unknown,
                }
            }
            ExprKind::Binary { op, lhs, rhs } => {
                let l = self.value_expr(lhs, env);
                let r = self.value_expr(rhs, env);
                use crate::ast::BinaryOp::*;
                if *op == MatMul {
                    for (side, ty) in [(lhs, l), (rhs, r)] {
                        if ty.is_scalar() {
                            self.error(CompileError::at(
                                CheckError::ScalarMatrixMultiply,
                                side.span,
                            ));
                        }
                    }
                    return Ty::Matrix;
                }
                let arithmetic = matches!(op, Sub | Mul | Div | Pow | Mod | IntDiv);
                if arithmetic || (*op == Add && (l == Ty::Matrix || r == Ty::Matrix)) {
                    for (side, ty) in [(lhs, l), (rhs, r)] {
                        if ty == Ty::Str {
                            self.error(CompileError::at(
                                CheckError::StringOperand { op: op.symbol() },
                                side.span,
                            ));
                            return Ty::Unknown;
                        }
                    }
                }
                if l == Ty::Matrix || r == Ty::Matrix {
                    return Ty::Matrix;
                }
                if !(l.is_scalar() && r.is_scalar()) {
                    return Ty::Unknown;
                }
                match op {
                    Lt | Le | Gt | Ge | Eq | Ne | And | Or => Ty::Bool,
                    Add if l == Ty::Str || r == Ty::Str => Ty::Str,
                    Add | Sub | Mul | Mod | IntDiv if l == Ty::Int && r == Ty::Int => Ty::Int,
                    _ => Ty::Double,
                }
            }
            ExprKind::Index { target, rows, cols } => {
                let ty = self.value_expr(target, env);
                self.range(rows.as_ref(), env);
                self.range(cols.as_ref(), env);
                if ty.is_scalar() {
                    self.error(CompileError::at(
                        CheckError::ScalarIndexed {
                            target: describe(target),
                        },
                        expr.span,
                    ));
                    return Ty::Unknown;
                }
                match ty {
                    // A list's index is a sub-list (`L[i]`, `L[i:j]`, `L["name"]`).
                    Ty::List | Ty::Unknown => ty,
                    _ => Ty::Matrix,
                }
            }
            ExprKind::Call { name, args } => {
                // A built-in with several results is bound by a multi-assignment only.
                if let Some(b) = builtins::lookup(name) {
                    if let ResultKind::Several(n) = b.signature().result {
                        self.error(crate::program::several_results_error(b, n, expr.span));
                    }
                }
                self.call_expr(name, args, expr.span, env)
            }
        }
    }

    fn call_expr(&mut self, name: &str, args: &[Arg], span: Span, env: &mut Env) -> Ty {
        let Some(builtin) = builtins::lookup(name) else {
            if self.program.functions.contains_key(name) {
                // build_program hoists every user-defined call out of expressions.
                self.error(CompileError::internal(Internal::CallInExpression {
                    function: name.to_string(),
                }));
            } else {
                self.error(self.unknown_function(name, span));
            }
            for a in args {
                self.expr(&a.value, env);
            }
            return Ty::Unknown;
        };
        if builtin == Builtin::Ifdef {
            return self.ifdef(args, span, env);
        }
        let tys: Vec<Ty> = args
            .iter()
            .map(|a| self.value_expr(&a.value, env))
            .collect();
        let bound = match builtins::bind_args(builtin, args, span) {
            Ok(b) => b,
            Err(e) => {
                self.error(e);
                return result_ty(builtin, &tys, args);
            }
        };
        // `append(L, x)` / `cbind(L, x)` of a list adds any values to it (SystemDS's list
        // append); its matrix checks apply to matrices only.
        if builtin == Builtin::Cbind && matches!(tys.first(), Some(Ty::List | Ty::Unknown)) {
            return tys[0];
        }
        // `append(s, t)` / `cbind` / `rbind` of two strings joins them with a line break
        // (SystemDS's scalar string append).
        if matches!(builtin, Builtin::Cbind | Builtin::Rbind)
            && tys.len() == 2
            && tys.iter().all(|t| matches!(t, Ty::Str | Ty::Scalar))
            && tys.contains(&Ty::Str)
        {
            return Ty::Str;
        }
        let sig = builtin.signature();
        let ty_of = |e: &Expr| -> Ty {
            args.iter()
                .position(|a| std::ptr::eq(&a.value, e))
                .map_or(Ty::Unknown, |i| tys[i])
        };
        let mut checks: Vec<(&Expr, ArgKind)> = Vec::new();
        if sig.variadic {
            let kind = sig.params[0].kind;
            let kind = match builtin {
                // min/max of one argument aggregate a matrix; of several, any mix goes.
                Builtin::Min | Builtin::Max if bound.variadic.len() == 1 => ArgKind::Matrix,
                _ => kind,
            };
            checks.extend(bound.variadic.iter().map(|e| (*e, kind)));
        } else {
            for (spec, bp) in sig.params.iter().zip(&bound.params) {
                if let builtins::BoundValue::Arg(e) = bp.value {
                    checks.push((e, spec.kind));
                }
            }
        }
        for (arg, kind) in checks {
            let ty = ty_of(arg);
            let problem = match kind {
                ArgKind::Any => None,
                ArgKind::Matrix if ty.is_scalar() => Some(Kind::Matrix),
                ArgKind::Scalar if ty == Ty::Matrix => Some(Kind::Scalar),
                ArgKind::Str if ty == Ty::Matrix => Some(Kind::String),
                _ => None,
            };
            if let Some(expected) = problem {
                let err = CompileError::at(
                    CheckError::ArgumentKind {
                        builtin: builtin.name(),
                        expected,
                        given: describe(arg),
                        found: if ty == Ty::Matrix {
                            Kind::Matrix
                        } else {
                            Kind::Scalar
                        },
                    },
                    arg.span,
                );
                self.error(err);
            }
        }
        result_ty(builtin, &tys, args)
    }

    fn ifdef(&mut self, args: &[Arg], span: Span, env: &mut Env) -> Ty {
        if let Err(e) = builtins::bind_args(Builtin::Ifdef, args, span) {
            self.error(e);
        }
        if let Some(first) = args.first() {
            if !matches!(first.value.kind, ExprKind::ScriptArg(_)) {
                self.error(CompileError::at(
                    CheckError::IfdefArgument,
                    first.value.span,
                ));
            }
        }
        let mut default_ty = Ty::Unknown;
        for (i, a) in args.iter().enumerate().skip(1) {
            let ty = self.value_expr(&a.value, env);
            if i == 1 {
                default_ty = ty;
            }
        }
        // The command-line value, when given, is a scalar; without one, the default applies.
        match args.first().map(|a| &a.value.kind) {
            Some(ExprKind::ScriptArg(name)) if self.script_args.contains(name) => Ty::Scalar,
            _ => default_ty,
        }
    }
}

/// The static type of a built-in call's result.
fn result_ty(builtin: Builtin, tys: &[Ty], args: &[Arg]) -> Ty {
    match builtin.signature().result {
        ResultKind::Matrix => {
            if builtin == Builtin::Read {
                let data_type = args
                    .iter()
                    .find(|a| a.name.as_ref().is_some_and(|n| n.name == "data_type"));
                if let Some(a) = data_type {
                    return match &a.value.kind {
                        ExprKind::Str(s) if s.eq_ignore_ascii_case("scalar") => Ty::Scalar,
                        ExprKind::Str(s) if s.eq_ignore_ascii_case("matrix") => Ty::Matrix,
                        _ => Ty::Unknown,
                    };
                }
            }
            Ty::Matrix
        }
        ResultKind::Double => Ty::Double,
        ResultKind::Int => Ty::Int,
        ResultKind::Bool => Ty::Bool,
        ResultKind::Str => Ty::Str,
        ResultKind::Nothing => Ty::Nothing,
        ResultKind::List => Ty::List,
        ResultKind::Frame => Ty::Frame,
        ResultKind::Unknown => Ty::Unknown,
        ResultKind::Several(_) => Ty::Matrix,
        ResultKind::AggregateOrElementWise if tys.len() == 1 => Ty::Double,
        ResultKind::ElementWise | ResultKind::AggregateOrElementWise => {
            if tys.contains(&Ty::Matrix) {
                Ty::Matrix
            } else if !tys.is_empty() && tys.iter().all(|t| t.is_scalar()) {
                Ty::Scalar
            } else {
                Ty::Unknown
            }
        }
    }
}

/// Marks every variable that `blocks` may assign (and that is already defined) as of unknown
/// type: a loop body's assignments reach the next iteration and the loop's condition.
fn forget_assigned(blocks: &[Block], env: &mut Env) {
    with_stack(|| forget_assigned_step(blocks, env))
}

fn forget_assigned_step(blocks: &[Block], env: &mut Env) {
    for block in blocks {
        match block {
            Block::Basic(basic) => {
                for stmt in &basic.stmts {
                    if let StmtKind::Assign { target, .. } = &stmt.kind {
                        if let Some(ty) = env.vars.get_mut(&target.name) {
                            *ty = Ty::Unknown;
                        }
                    }
                }
            }
            Block::If {
                then_blocks,
                else_blocks,
                ..
            } => {
                forget_assigned(then_blocks, env);
                forget_assigned(else_blocks, env);
            }
            Block::For { var, body, .. } => {
                if let Some(ty) = env.vars.get_mut(&var.name) {
                    *ty = Ty::Unknown;
                }
                forget_assigned(body, env);
            }
            Block::While { body, .. } => forget_assigned(body, env),
            Block::Call(call) => {
                for t in &call.targets {
                    if let Some(ty) = env.vars.get_mut(&t.name) {
                        *ty = Ty::Unknown;
                    }
                }
            }
        }
    }
}

/// The error for a call of `name`, which neither the script (`udfs`) nor lafuse defines: a
/// function of SystemDS's library lafuse lacks is unsupported (and says how to load it where
/// SystemDS writes it in DML), anything else is unknown, with the closest known name.
pub(crate) fn unknown_function<'a>(
    name: &str,
    span: Span,
    udfs: impl Iterator<Item = &'a str>,
) -> CompileError {
    if name.contains("::") {
        return CompileError::at(Unsupported::Namespaces, span);
    }
    if let Some(unsupported) = Unsupported::builtin(name) {
        return CompileError::at(unsupported, span);
    }
    let builtin_names = builtins::ALL.iter().map(|b| b.name());
    let close = builtins::closest(name, udfs.chain(builtin_names));
    let Some(in_dml) = crate::systemds_names::systemds_builtin(name) else {
        let err = CompileError::at(
            CheckError::UnknownFunction {
                name: name.to_string(),
            },
            span,
        );
        return match close {
            Some(close) => err.with_note(Note::DidYouMean {
                name: close.to_string(),
            }),
            None => err,
        };
    };
    let mut err = CompileError::at(
        Unsupported::BuiltinFunction {
            name: name.to_string(),
        },
        span,
    );
    if in_dml {
        err = err.with_note(Note::BuiltinPath {
            name: name.to_string(),
        });
    }
    if let Some(close) = close {
        err = err.with_note(Note::ClosestKnown {
            name: close.to_string(),
        });
    }
    err
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parser::parse;
    use crate::program::build_program;
    use crate::span::SourceFile;

    fn check_with(text: &str, args: &[&str]) -> Vec<String> {
        let script = parse(&SourceFile::new("t.dml", text)).expect("parses");
        let program = build_program(script).expect("builds");
        let args: BTreeSet<String> = args.iter().map(|s| s.to_string()).collect();
        match check_program(&program, &args) {
            Ok(()) => vec![],
            Err(errors) => errors
                .into_iter()
                .map(|e| {
                    let mut s = e.to_string();
                    for n in e.notes {
                        s.push_str(" | ");
                        s.push_str(&n.to_string());
                    }
                    s
                })
                .collect(),
        }
    }

    fn check(text: &str) -> Vec<String> {
        check_with(text, &[])
    }

    #[test]
    fn undefined_variables_are_flow_aware() {
        assert_eq!(check("x = 1\nprint(x)"), Vec::<String>::new());
        assert_eq!(
            check("count = 1\nprint(cuont)"),
            vec!["undefined variable 'cuont': it is read before it is assigned | did you mean 'count'?"]
        );
        // Assigned in one branch only: defined afterwards (SystemDS warns, does not fail).
        assert!(check("if (1 > 0) { a = 1 }\nprint(a)").is_empty());
        // Read in a loop body before its first assignment there: an error, as in SystemDS.
        let errs = check("x = 1\nwhile (x < 3) { print(y); y = 1; x = x + 1 }");
        assert_eq!(errs.len(), 1);
        assert!(errs[0].starts_with("undefined variable 'y'"));
        let errs = check("Y[1,1] = 5");
        assert!(errs[0].contains("before 'Y' is initialized"), "{errs:?}");
    }

    #[test]
    fn functions_and_arguments_are_checked() {
        let errs = check("x = rowsum(matrix(1, 2, 2))");
        assert_eq!(
            errs,
            vec!["unknown function 'rowsum' | did you mean 'rowSums'?"]
        );
        // A function of SystemDS's library lafuse lacks is unsupported, not unknown, and says
        // how to load it where SystemDS writes it in DML.
        let errs = check("x = paramserv(1)");
        assert!(
            errs[0].starts_with("unsupported: built-in function 'paramserv'"),
            "{errs:?}"
        );
        assert!(!errs[0].contains("--builtin-path"), "{errs:?}");
        let errs = check("m = l2svm(X=matrix(1, 2, 2), Y=matrix(1, 2, 1))");
        assert!(
            errs[0].starts_with("unsupported: built-in function 'l2svm' | SystemDS writes 'l2svm' in DML: pass --builtin-path DIR"),
            "{errs:?}"
        );
        let f = "f = function(double a) return (double b, double c) { b = a + 1; c = 2 }\n";
        assert!(check(&format!("{f}[x, y] = f(1)\nprint(x + y)")).is_empty());
        assert!(check(&format!("{f}f(1)")).is_empty());
        let errs = check(&format!("{f}x = f(1)"));
        assert_eq!(
            errs,
            vec!["function f returns 2 values; assign them all, as in [b, c] = f(...)"]
        );
        // A function SystemDS calls rather than inlines (more than one block) binds its first
        // result to a single target.
        let g = "g = function(double a) return (double b, double c) {\n  b = a\n  for (i in 1:2) {\n    b = b + i\n  }\n  c = 2\n}\n";
        assert!(check(&format!("{g}x = g(1)\nprint(x)")).is_empty());
        let errs = check(&format!("{f}x = f(1) + 1"));
        assert_eq!(
            errs,
            vec![
                "function f returns 2 values; a call inside an expression must return exactly one"
            ]
        );
        let errs = check(&format!("{f}[x, y, z] = f(1)"));
        assert_eq!(
            errs,
            vec!["function f returns 2 values, but 3 targets are assigned"]
        );
        let errs = check(&format!("{f}[x, y] = f(b=1)"));
        assert_eq!(
            errs,
            vec!["function f has no parameter named 'b' | parameters: a"]
        );
        let errs = check(&format!("{f}x = f(matrix(1, 2, 2))"));
        assert!(
            errs[0].starts_with("parameter 'a' of function f expects a scalar"),
            "{errs:?}"
        );
        let errs =
            check("g = function(double a) return (double b, double c) { b = a }\n[x, y] = g(1)");
        assert!(errs[0].contains("never assigns its result 'c'"), "{errs:?}");
        // Defaults are checked in the caller's scope, where the call leaves them out.
        let g = "g = function(double a = 1, double b = a) return (double c) { c = a + b }\n";
        assert!(check(g).is_empty());
        assert!(check(&format!("{g}a = 3\nx = g(a=1)")).is_empty());
        assert!(check(&format!("{g}x = g(1, 2)")).is_empty());
        let errs = check(&format!("{g}x = g(a=1)"));
        assert!(errs[0].contains("undefined variable 'a'"), "{errs:?}");
        let h = "h = function(matrix[double] X, matrix[double] P = matrix(0, 0, 0)) return (double c) { c = sum(X) + sum(P) }\n";
        assert!(check(&format!("{h}x = h(X=matrix(1, 2, 2))")).is_empty());
        let k = "k = function(double a, double b = 3) return (double c) { c = a + b }\n";
        let errs = check(&format!("{h}{k}x = h(X=matrix(1, 2, 2))\nm = function(double a = k(1)) return (double c) {{ c = a }}"));
        assert!(
            errs[0].contains("calls the user-defined function k"),
            "{errs:?}"
        );
        let errs = check(
            "f = function(double a, matrix[double] P = 3) return (double c) { c = a }\nx = f(a=1)",
        );
        assert!(
            errs[0].starts_with("parameter 'P' of function f expects a matrix"),
            "{errs:?}"
        );
    }

    #[test]
    fn lists_are_checked_as_lists() {
        // Indexing a list gives a list; append takes any values; list parameters are lists.
        assert!(check("L = list(1, \"a\", matrix(0, 2, 2))\nx = as.scalar(L[2])\nL = append(L, 3)\nprint(length(L))").is_empty());
        assert!(check("L = list(a=1, b=2)\nprint(as.scalar(L[\"b\"]))").is_empty());
        let f = "f = function(List[Unknown] L) return (Double n) { n = length(L) }\n";
        assert!(check(&format!("{f}x = f(list(1, 2))")).is_empty());
        let errs = check("L = list(1, 2)\nx = 3\nL = append(x, 4)");
        assert!(
            errs[0].starts_with("cbind() expects a matrix argument"),
            "{errs:?}"
        );
        let errs = check("L = list(1, a=2)");
        assert!(errs[0].contains("list"), "{errs:?}");
    }

    #[test]
    fn static_data_type_errors() {
        let errs = check("x = 3\nprint(nrow(x))");
        assert_eq!(
            errs,
            vec!["nrow() expects a matrix argument, but 'x' is a scalar"]
        );
        assert_eq!(check("x = 3\ny = as.scalar(x)").len(), 1);
        assert_eq!(
            check("x = 3\nprint(x[1,1])"),
            vec!["'x' is a scalar and cannot be indexed"]
        );
        assert_eq!(check("print(min(3))").len(), 1);
        assert!(check("print(min(3, 4))").is_empty());
        let errs = check("X = matrix(1, 2, 2)\nif (X) { print(1) }");
        assert!(
            errs[0].starts_with("the if condition must be a scalar"),
            "{errs:?}"
        );
        assert!(check("X = matrix(1, 2, 2)\nprint(X)").is_empty());
        let errs = check("X = matrix(1, 2, 2)\ny = as.double(X)");
        assert_eq!(
            errs,
            vec!["as.double() expects a scalar argument, but 'X' is a matrix"]
        );
        assert_eq!(check("x = 3 %*% 2").len(), 2);
        assert_eq!(
            check("x = print(1)"),
            vec!["print() returns no value to assign"]
        );
        assert_eq!(
            check("s = \"abc\"\nx = s * 2"),
            vec!["'*' cannot be applied to a string (only '+' concatenates strings with scalars)"]
        );
        assert!(check("s = \"abc\"\nx = s + 2 + \"d\"\nprint(x)").is_empty());
        // A type the loop may change is not trusted inside or after the loop.
        assert!(check(
            "x = 1\nfor (i in 1:2) { y = x + 1\n x = matrix(1, 2, 2) }\nprint(toString(x))"
        )
        .is_empty());
    }

    #[test]
    fn script_arguments_need_values_or_defaults() {
        assert_eq!(
            check("x = $n + 1"),
            vec!["no value given for the script argument '$n' | pass it as --nvargs n=<value>, or use ifdef($n, <default>)"]
        );
        assert!(check_with("x = $n + 1", &["n"]).is_empty());
        assert!(check("x = ifdef($n, 3)\nprint(x)").is_empty());
        assert_eq!(check("y = 1\nx = ifdef(y, 3)").len(), 1);
    }
}
