//! The program as a tree of blocks: the unit that HOP DAG construction and execution work on.
//!
//! [`build_program`] turns the AST into [`Block`]s the way SystemDS forms statement blocks:
//! maximal runs of simple statements become one [`BasicBlock`] (one HOP DAG later); control
//! flow gets its own block; every call of a user-defined function becomes a [`CallBlock`],
//! because a function call is a block boundary (its body is a separate program).
//!
//! `eval(fname, args...)` is hoisted likewise and becomes one `CallBlock` per function the name
//! may give, under an `if` chain on the name ([`crate::eval_call`]).
//!
//! A user-defined function called inside an expression (`y = f(x) + 1`) is hoisted: the call
//! becomes a `CallBlock` assigning a fresh temporary (`_ufc1 = f(x)`) that the expression then
//! reads. Temporaries are named `_ufc<N>`; DML identifiers must start with a letter, so no
//! script can name, read or overwrite them. Invariant: after `build_program`, no expression in a
//! basic block, `if` condition or `for` bound calls a user-defined function, and no `while`
//! condition does either (such scripts are rejected as unsupported, because hoisting would have
//! to re-run the call on every iteration).
//!
//! A function body's assignments that nothing reads afterwards are dropped, as SystemDS drops
//! them ([`crate::liveness`]).

use crate::ast::{self, Arg, Expr, ExprKind, Ident, IndexRange, Stmt, StmtKind};
use crate::builtins::{self, Builtin, ResultKind};
use crate::error::{CheckError, CompileError, Internal, Result, Unsupported};
use crate::eval_call::{self, ResultUse};
use crate::liveness;
use crate::span::Span;
use crate::stack::with_stack;
use std::collections::{BTreeMap, BTreeSet};

/// Prefix of the temporaries that hold hoisted user-defined function results.
pub const TEMP_PREFIX: &str = "_ufc";

/// A whole program: the main blocks and the user-defined functions by name.
#[derive(Clone, Debug)]
pub struct Program {
    pub main: Vec<Block>,
    pub functions: BTreeMap<String, Function>,
}

impl Program {
    /// Drops the main program's dead assignments and gives its basic blocks their live-out
    /// sets ([`liveness`]), for a caller that reads only `read_after` after the run. Not for a
    /// run that traces lineage: its report lists every variable.
    pub fn drop_dead_main(&mut self, read_after: impl IntoIterator<Item = String>) {
        let call_reads = liveness::default_reads(self.functions.values().map(|f| &f.def));
        liveness::drop_dead_assignments(&mut self.main, read_after, &call_reads);
    }
}

/// A user-defined function.
#[derive(Clone, Debug)]
pub struct Function {
    /// Name, parameters, results and span as written; `def.body` is left empty because the
    /// body lives, as blocks, in `body`.
    pub def: ast::FunctionDef,
    pub body: Vec<Block>,
}

/// A maximal run of simple statements: assignments, left-indexing assignments and expression
/// statements (`print`, `stop`, `write`), none of which calls a user-defined function.
#[derive(Clone, Debug)]
pub struct BasicBlock {
    pub stmts: Vec<Stmt>,
    /// Covers all statements of the block.
    pub span: Span,
    /// The variables live after the block ([`crate::liveness`]), where the analysis ran on
    /// its body: the block writes back only these of the variables it assigns, so a value
    /// read only within the block is an intermediate a fused operator need not materialise.
    /// `None`: every assigned variable is written back.
    pub live_out: Option<BTreeSet<String>>,
}

/// A call of a user-defined function: `[targets] = function(args)`. `targets` is empty for a
/// call made for its effect (`f(x)` as a statement); otherwise it names one variable per result
/// of the function, in order (`check_program` rejects any other count, as SystemDS does).
#[derive(Clone, Debug)]
pub struct CallBlock {
    pub targets: Vec<Ident>,
    pub function: String,
    pub args: Vec<Arg>,
    /// The call expression's span.
    pub span: Span,
    /// A branch of an `eval` ([`crate::eval_call`]): taken only where the name given at run
    /// time is this function's, so arguments of other kinds than its parameters' fail when it
    /// runs rather than when the program is checked.
    pub from_eval: bool,
    /// `eval`'s one argument (`args[0]`) as SystemDS spreads it: a list's elements are the
    /// arguments (by name in a named list, else by position; parameters left out take their
    /// defaults), any other value is the one argument. Bound when the call runs.
    pub spread: bool,
}

/// One node of the block tree.
#[derive(Clone, Debug)]
pub enum Block {
    Basic(BasicBlock),
    If {
        cond: Expr,
        then_blocks: Vec<Block>,
        else_blocks: Vec<Block>,
        span: Span,
    },
    For {
        var: Ident,
        from: Expr,
        to: Expr,
        step: Option<Expr>,
        body: Vec<Block>,
        parallel: bool,
        span: Span,
    },
    While {
        cond: Expr,
        body: Vec<Block>,
        span: Span,
    },
    Call(CallBlock),
}

/// Nested blocks are dropped through [`with_stack`]: a script may nest thousands of levels.
impl Drop for Block {
    fn drop(&mut self) {
        let nested = match self {
            Block::If {
                then_blocks,
                else_blocks,
                ..
            } => {
                let mut all = std::mem::take(then_blocks);
                all.append(else_blocks);
                all
            }
            Block::For { body, .. } | Block::While { body, .. } => std::mem::take(body),
            Block::Basic(_) | Block::Call(_) => return,
        };
        if !nested.is_empty() {
            with_stack(move || drop(nested));
        }
    }
}

impl Block {
    /// The span of the source construct the block came from.
    pub fn span(&self) -> Span {
        match self {
            Block::Basic(b) => b.span,
            Block::If { span, .. } | Block::For { span, .. } | Block::While { span, .. } => *span,
            Block::Call(c) => c.span,
        }
    }
}

/// Whether `name` is a temporary introduced by hoisting (never a user variable).
pub fn is_temporary(name: &str) -> bool {
    name.starts_with(TEMP_PREFIX)
}

/// The whole front end: parses `source`, builds its blocks and runs
/// [`check_program`](crate::check::check_program) with the names of the given script
/// arguments. Returns every error found by the first stage that fails.
pub fn load_program(
    source: &crate::span::SourceFile,
    script_args: &std::collections::BTreeSet<String>,
) -> std::result::Result<Program, Vec<CompileError>> {
    let script = crate::parser::parse(source)?;
    let program = build_program(script).map_err(|e| vec![e])?;
    crate::check::check_program(&program, script_args)?;
    Ok(program)
}

/// Builds the block tree of `script`.
///
/// Errors: two functions with the same name, a function named like a built-in, a
/// user-defined function called in a `while` condition (unsupported).
pub fn build_program(script: ast::Script) -> Result<Program> {
    if let Some(import) = script.imports.first() {
        // The front end loads modules first (`crate::modules::load`), which empties this.
        return Err(CompileError::at(Unsupported::SourceNotLoaded, import.span));
    }
    let mut defs: BTreeMap<String, ast::FunctionDef> = BTreeMap::new();
    for def in script.functions {
        if builtins::lookup(&def.name).is_some() {
            return Err(CompileError::at(
                CheckError::BuiltinName {
                    name: def.name.clone(),
                },
                def.span,
            ));
        }
        if defs.contains_key(&def.name) {
            return Err(CompileError::at(
                CheckError::DefinedTwice {
                    name: def.name.clone(),
                },
                def.span,
            ));
        }
        defs.insert(def.name.clone(), def);
    }
    let names: std::collections::BTreeSet<String> = defs.keys().cloned().collect();
    // Signatures only (what `eval` needs to choose its candidates), the bodies left behind.
    let signatures: BTreeMap<String, ast::FunctionDef> = defs
        .iter()
        .map(|(name, d)| {
            let sig = ast::FunctionDef {
                name: d.name.clone(),
                params: d.params.clone(),
                results: d.results.clone(),
                body: vec![],
                span: d.span,
            };
            (name.clone(), sig)
        })
        .collect();
    let mut builder = Builder {
        udfs: &names,
        signatures: &signatures,
        next_temp: 0,
    };
    let main = builder.blocks(script.statements)?;
    let call_reads = liveness::default_reads(defs.values());
    let mut functions = BTreeMap::new();
    for (name, mut def) in defs {
        let stmts = std::mem::take(&mut def.body);
        let mut body = builder.blocks(stmts)?;
        liveness::drop_dead_assignments(
            &mut body,
            def.results.iter().map(|r| r.name.clone()),
            &call_reads,
        );
        functions.insert(name, Function { def, body });
    }
    Ok(Program { main, functions })
}

/// The built-in with several results that `call` calls, if it is one.
fn several_results(call: &Expr) -> Option<Builtin> {
    let ExprKind::Call { name, .. } = &call.kind else {
        return None;
    };
    builtins::lookup(name).filter(|b| matches!(b.signature().result, ResultKind::Several(_)))
}

/// The error for a built-in with `n` results bound to another number of targets.
pub(crate) fn several_results_error(b: Builtin, n: usize, span: Span) -> CompileError {
    let placeholder = match n {
        2 => "a, b",
        _ => "a, b, c",
    };
    CompileError::at(
        CheckError::SeveralResults {
            name: b.name(),
            results: n,
            placeholder,
        },
        span,
    )
}

/// The built-ins whose result's size depends on the data: `read` (a file without metadata),
/// `table` (without output dimensions), `removeEmpty`, `unique`, `aggregate` (without
/// `ngroups`).
const DATA_SIZED: &[&str] = &["read", "table", "removeEmpty", "unique", "aggregate"];

/// Whether `expr` calls a built-in of [`DATA_SIZED`].
fn calls_data_sized(expr: &Expr) -> bool {
    with_stack(|| match &expr.kind {
        ExprKind::Call { name, args } => {
            DATA_SIZED.contains(&name.as_str()) || args.iter().any(|a| calls_data_sized(&a.value))
        }
        ExprKind::Unary { operand, .. } => calls_data_sized(operand),
        ExprKind::Binary { lhs, rhs, .. } => calls_data_sized(lhs) || calls_data_sized(rhs),
        ExprKind::Index { target, rows, cols } => {
            calls_data_sized(target)
                || [rows, cols].into_iter().flatten().any(|r| {
                    calls_data_sized(&r.lower)
                        || r.upper.as_ref().is_some_and(|u| calls_data_sized(u))
                })
        }
        _ => false,
    })
}

struct Builder<'a> {
    udfs: &'a std::collections::BTreeSet<String>,
    signatures: &'a BTreeMap<String, ast::FunctionDef>,
    next_temp: u32,
}

/// Blocks under construction: finished blocks plus the simple statements not yet closed off
/// into a basic block.
#[derive(Default)]
struct Emitter {
    out: Vec<Block>,
    pending: Vec<Stmt>,
}

impl Emitter {
    fn flush(&mut self) {
        if self.pending.is_empty() {
            return;
        }
        let stmts = std::mem::take(&mut self.pending);
        let span = stmts.iter().fold(stmts[0].span, |acc, s| acc.to(s.span));
        self.out.push(Block::Basic(BasicBlock {
            stmts,
            span,
            live_out: None,
        }));
    }
    fn push_block(&mut self, block: Block) {
        self.flush();
        self.out.push(block);
    }
    fn finish(mut self) -> Vec<Block> {
        self.flush();
        self.out
    }
}

impl Builder<'_> {
    /// Whether a call of `name` becomes blocks of its own: a user-defined function's, or
    /// `eval`'s or `evalList`'s (which call one).
    fn calls_function(&self, name: &str) -> bool {
        self.udfs.contains(name) || eval_call::is_eval(name)
    }

    fn is_udf_call(&self, expr: &Expr) -> bool {
        matches!(&expr.kind, ExprKind::Call { name, .. } if self.calls_function(name))
    }

    fn blocks(&mut self, stmts: Vec<Stmt>) -> Result<Vec<Block>> {
        let mut em = Emitter::default();
        for stmt in stmts {
            self.stmt(stmt, &mut em)?;
        }
        Ok(em.finish())
    }

    fn fresh_temp(&mut self, span: Span) -> Ident {
        self.next_temp += 1;
        Ident {
            name: format!("{TEMP_PREFIX}{}", self.next_temp),
            span,
        }
    }

    /// Emits the call `[targets] = callee(args)` whose arguments may themselves call functions.
    fn call_block(&mut self, targets: Vec<Ident>, call: Expr, em: &mut Emitter) -> Result<()> {
        let span = call.span;
        let ExprKind::Call { name, mut args } = call.into_kind() else {
            return Err(CompileError::internal(Internal::Invariant {
                what: "call_block given a non-call expression",
            }));
        };
        for arg in &mut args {
            self.hoist(&mut arg.value, em)?;
        }
        if eval_call::is_eval(&name) && !self.udfs.contains(&name) {
            let as_list = name == eval_call::EVAL_LIST;
            return self.eval_blocks(targets, args, span, as_list, em);
        }
        em.push_block(Block::Call(CallBlock {
            targets,
            function: name,
            args,
            span,
            from_eval: false,
            spread: false,
        }));
        Ok(())
    }

    /// Emits `[targets] = eval(fname, args)` (arguments hoisted) as a call of the one function a
    /// literal name gives, else as a chain of `if (fname == "f") ...` over the candidates, its
    /// last branch stopping as SystemDS does where no function answers the name. `as_list`:
    /// `evalList`, whose target gets all results as a list.
    fn eval_blocks(
        &mut self,
        targets: Vec<Ident>,
        mut args: Vec<Arg>,
        span: Span,
        as_list: bool,
        em: &mut Emitter,
    ) -> Result<()> {
        let builtin = if as_list {
            eval_call::EVAL_LIST
        } else {
            eval_call::EVAL
        };
        if targets.len() > 1 {
            return Err(CompileError::at(
                CheckError::BuiltinTargets {
                    name: builtin.into(),
                    targets: targets.len(),
                },
                span,
            ));
        }
        let callee = crate::error::Callee::Builtin { name: builtin };
        let problem = match args.first() {
            None => Some(crate::error::CallProblem::Missing {
                name: "fname".into(),
            }),
            Some(a) if a.name.is_some() => Some(crate::error::CallProblem::PositionalOnly),
            Some(_) => None,
        };
        if let Some(problem) = problem {
            return Err(CompileError::at(
                crate::error::CompileCause::Call { callee, problem },
                span,
            ));
        }
        let fname = args.remove(0).value;
        // One argument written as a list literal is the call's arguments, named or positional;
        // one whose kind shows when it runs is spread then if it is a list (SystemDS expands a
        // list argument unless the function takes one list).
        let mut form = eval_call::ArgsForm::Positional;
        let mut items_of_list = None;
        if let [Arg {
            value, name: None, ..
        }] = args.as_slice()
        {
            form = match &value.kind {
                ExprKind::Call { name, args: items }
                    if name == "list" && !self.udfs.contains(name) =>
                {
                    items_of_list = Some(items.clone());
                    eval_call::ArgsForm::ListLiteral
                }
                ExprKind::Var(_) | ExprKind::Index { .. } | ExprKind::Call { .. } => {
                    eval_call::ArgsForm::Value
                }
                _ => eval_call::ArgsForm::Positional,
            };
        }
        if let Some(items) = items_of_list {
            args = items;
        }
        let returned = if as_list {
            eval_call::Returned::All
        } else {
            eval_call::Returned::First {
                needed: !targets.is_empty(),
            }
        };
        let found = eval_call::candidates(self.signatures, &args, span, returned, form);
        if let ExprKind::Str(written) = &fname.kind {
            // Known now: the one function of that name, else the error of an unknown call.
            let Some(c) = found.iter().find(|c| &c.written == written) else {
                return Err(crate::check::unknown_function(
                    written,
                    fname.span,
                    self.udfs.iter().map(String::as_str),
                ));
            };
            for block in self.eval_branch(c, &targets, args, span, as_list)? {
                em.push_block(block);
            }
            return Ok(());
        }
        let name = self.fresh_temp(fname.span);
        em.pending.push(Stmt {
            kind: StmtKind::Assign {
                target: name.clone(),
                value: fname,
            },
            span,
        });
        let text = |s: &str| Expr {
            kind: ExprKind::Str(s.to_string()),
            span,
        };
        let read_name = || Expr {
            kind: ExprKind::Var(name.name.clone()),
            span,
        };
        let plus = |lhs: Expr, rhs: Expr| Expr {
            kind: ExprKind::Binary {
                op: ast::BinaryOp::Add,
                lhs: Box::new(lhs),
                rhs: Box::new(rhs),
            },
            span,
        };
        // SystemDS's message (EvalNaryCPInstruction), with what lafuse could offer.
        let message = plus(
            plus(text("Function '"), read_name()),
            text(
                "' (called through eval) is non-existing: no function of the program, nor any \
                 built-in it loads, has that name and takes these arguments",
            ),
        );
        let stop = Stmt {
            kind: StmtKind::Expr(Expr {
                kind: ExprKind::Call {
                    name: "stop".into(),
                    args: vec![Arg {
                        name: None,
                        value: message,
                        span,
                    }],
                },
                span,
            }),
            span,
        };
        let mut chain = vec![Block::Basic(BasicBlock {
            stmts: vec![stop],
            span,
            live_out: None,
        })];
        for c in found.iter().rev() {
            let then_blocks = self.eval_branch(c, &targets, args.clone(), span, as_list)?;
            let cond = Expr {
                kind: ExprKind::Binary {
                    op: ast::BinaryOp::Eq,
                    lhs: Box::new(read_name()),
                    rhs: Box::new(text(&c.written)),
                },
                span,
            };
            chain = vec![Block::If {
                cond,
                then_blocks,
                else_blocks: chain,
                span,
            }];
        }
        for block in chain {
            em.push_block(block);
        }
        Ok(())
    }

    /// The blocks of one `eval` branch: the call of `function`, its first result bound to the
    /// target (a scalar as a 1x1 matrix, as SystemDS's `eval`), the others to temporaries; for
    /// `evalList` (`as_list`), every result to a temporary and the target to the list of them
    /// named by the function's result names.
    fn eval_branch(
        &mut self,
        candidate: &eval_call::Candidate,
        targets: &[Ident],
        args: Vec<Arg>,
        span: Span,
        as_list: bool,
    ) -> Result<Vec<Block>> {
        let function = candidate.function.as_str();
        let def = &self.signatures[function];
        let n_results = def.results.len();
        let use_ = eval_call::result_use(def);
        let call = |targets: Vec<Ident>| {
            Block::Call(CallBlock {
                targets,
                function: function.to_string(),
                args,
                span,
                from_eval: true,
                spread: candidate.spread,
            })
        };
        let Some(target) = targets.first() else {
            return Ok(vec![call(vec![])]);
        };
        if as_list {
            let names: Vec<String> = def.results.iter().map(|r| r.name.clone()).collect();
            let bound: Vec<Ident> = names.iter().map(|_| self.fresh_temp(span)).collect();
            let items = names
                .into_iter()
                .zip(&bound)
                .map(|(name, t)| Arg {
                    name: Some(Ident { name, span }),
                    value: Expr {
                        kind: ExprKind::Var(t.name.clone()),
                        span,
                    },
                    span,
                })
                .collect();
            let list = Expr {
                kind: ExprKind::Call {
                    name: "list".into(),
                    args: items,
                },
                span,
            };
            return Ok(vec![
                call(bound),
                Block::Basic(BasicBlock {
                    stmts: vec![Stmt {
                        kind: StmtKind::Assign {
                            target: target.clone(),
                            value: list,
                        },
                        span,
                    }],
                    span,
                    live_out: None,
                }),
            ]);
        }
        let mut bound = vec![];
        let first = match use_ {
            Some(ResultUse::Matrix) => target.clone(),
            Some(ResultUse::Scalar) => self.fresh_temp(span),
            _ => {
                return Err(CompileError::internal(Internal::Invariant {
                    what: "an eval candidate without a matrix or scalar result",
                }))
            }
        };
        bound.push(first.clone());
        for _ in 1..n_results {
            bound.push(self.fresh_temp(span));
        }
        let mut blocks = vec![call(bound)];
        if use_ == Some(ResultUse::Scalar) {
            let value = Expr {
                kind: ExprKind::Call {
                    name: "as.matrix".into(),
                    args: vec![Arg {
                        name: None,
                        value: Expr {
                            kind: ExprKind::Var(first.name),
                            span,
                        },
                        span,
                    }],
                },
                span,
            };
            blocks.push(Block::Basic(BasicBlock {
                stmts: vec![Stmt {
                    kind: StmtKind::Assign {
                        target: target.clone(),
                        value,
                    },
                    span,
                }],
                span,
                live_out: None,
            }));
        }
        Ok(blocks)
    }

    /// Replaces every user-defined function call inside `expr` (innermost first, left to
    /// right) by a temporary assigned by a `CallBlock` emitted before the current statement.
    fn hoist(&mut self, expr: &mut Expr, em: &mut Emitter) -> Result<()> {
        with_stack(|| self.hoist_step(expr, em))
    }

    fn hoist_step(&mut self, expr: &mut Expr, em: &mut Emitter) -> Result<()> {
        match &mut expr.kind {
            ExprKind::Double(_)
            | ExprKind::Int(_)
            | ExprKind::Bool(_)
            | ExprKind::Str(_)
            | ExprKind::Var(_)
            | ExprKind::ScriptArg(_) => Ok(()),
            ExprKind::Unary { operand, .. } => self.hoist(operand, em),
            ExprKind::Binary { lhs, rhs, .. } => {
                self.hoist(lhs, em)?;
                self.hoist(rhs, em)
            }
            ExprKind::Index { target, rows, cols } => {
                self.hoist(target, em)?;
                self.hoist_range(rows.as_mut(), em)?;
                self.hoist_range(cols.as_mut(), em)
            }
            ExprKind::Call { name, args } => {
                if self.calls_function(name) {
                    let temp = self.fresh_temp(expr.span);
                    let call = std::mem::replace(
                        expr,
                        Expr {
                            kind: ExprKind::Var(temp.name.clone()),
                            span: expr.span,
                        },
                    );
                    self.call_block(vec![temp], call, em)
                } else {
                    for arg in args {
                        self.hoist(&mut arg.value, em)?;
                    }
                    Ok(())
                }
            }
        }
    }

    fn hoist_range(&mut self, range: Option<&mut IndexRange>, em: &mut Emitter) -> Result<()> {
        if let Some(r) = range {
            self.hoist(&mut r.lower, em)?;
            if let Some(upper) = r.upper.as_mut() {
                self.hoist(upper, em)?;
            }
        }
        Ok(())
    }

    fn stmt(&mut self, stmt: Stmt, em: &mut Emitter) -> Result<()> {
        with_stack(|| self.stmt_step(stmt, em))
    }

    fn stmt_step(&mut self, stmt: Stmt, em: &mut Emitter) -> Result<()> {
        let span = stmt.span;
        match stmt.into_kind() {
            StmtKind::Assign { target, value } if self.is_udf_call(&value) => {
                self.call_block(vec![target], value, em)
            }
            StmtKind::MultiAssign { targets, mut call } => {
                if self.is_udf_call(&call) {
                    self.call_block(targets, call, em)
                } else if let Some(b) = several_results(&call) {
                    // `[U, S, V] = svd(A)`: a statement of the basic block, whose hops bind
                    // every target (the arguments' user-function calls hoisted first).
                    if let ResultKind::Several(n) = b.signature().result {
                        if n != targets.len() {
                            return Err(several_results_error(b, n, call.span));
                        }
                    }
                    self.hoist(&mut call, em)?;
                    em.pending.push(Stmt {
                        kind: StmtKind::MultiAssign { targets, call },
                        span,
                    });
                    Ok(())
                } else {
                    let name = match &call.kind {
                        ExprKind::Call { name, .. } => name.clone(),
                        _ => String::from("<expression>"),
                    };
                    let err = if let Some(unsupported) = Unsupported::builtin(&name) {
                        CompileError::at(unsupported, call.span)
                    } else if builtins::lookup(&name).is_some() {
                        CompileError::at(
                            CheckError::BuiltinTargets {
                                name: name.clone(),
                                targets: targets.len(),
                            },
                            call.span,
                        )
                    } else {
                        crate::check::unknown_function(
                            &name,
                            call.span,
                            self.udfs.iter().map(String::as_str),
                        )
                    };
                    Err(err)
                }
            }
            StmtKind::Expr(call) if self.is_udf_call(&call) => self.call_block(vec![], call, em),
            StmtKind::Assign { target, mut value } => {
                self.hoist(&mut value, em)?;
                let data_sized = calls_data_sized(&value);
                em.pending.push(Stmt {
                    kind: StmtKind::Assign { target, value },
                    span,
                });
                // The statements after a read are compiled once its matrix exists, with its
                // actual size, where the file does not state one (a CSV without metadata):
                // SystemDS's dynamic recompilation after an operator of unknown output size.
                // Likewise after `table`, `removeEmpty`, `unique` and `aggregate`, whose size depends
                // on the data.
                if data_sized {
                    em.flush();
                }
                Ok(())
            }
            StmtKind::IndexAssign {
                target,
                mut rows,
                mut cols,
                mut value,
            } => {
                self.hoist_range(rows.as_mut(), em)?;
                self.hoist_range(cols.as_mut(), em)?;
                self.hoist(&mut value, em)?;
                em.pending.push(Stmt {
                    kind: StmtKind::IndexAssign {
                        target,
                        rows,
                        cols,
                        value,
                    },
                    span,
                });
                Ok(())
            }
            StmtKind::Expr(mut e) => {
                self.hoist(&mut e, em)?;
                em.pending.push(Stmt {
                    kind: StmtKind::Expr(e),
                    span,
                });
                Ok(())
            }
            StmtKind::If {
                mut cond,
                then_body,
                else_body,
            } => {
                self.hoist(&mut cond, em)?;
                let then_blocks = self.blocks(then_body)?;
                let else_blocks = self.blocks(else_body)?;
                em.push_block(Block::If {
                    cond,
                    then_blocks,
                    else_blocks,
                    span,
                });
                Ok(())
            }
            StmtKind::For {
                var,
                mut from,
                mut to,
                mut step,
                body,
                parallel,
            } => {
                self.hoist(&mut from, em)?;
                self.hoist(&mut to, em)?;
                if let Some(s) = step.as_mut() {
                    self.hoist(s, em)?;
                }
                let body = self.blocks(body)?;
                em.push_block(Block::For {
                    var,
                    from,
                    to,
                    step,
                    body,
                    parallel,
                    span,
                });
                Ok(())
            }
            StmtKind::While { cond, body } => {
                if let Some(call_span) = self.find_udf_call(&cond) {
                    return Err(CompileError::at(
                        Unsupported::CallInWhileCondition,
                        call_span,
                    ));
                }
                let body = self.blocks(body)?;
                em.push_block(Block::While { cond, body, span });
                Ok(())
            }
        }
    }

    /// The span of the first user-defined function call in `expr`, if any.
    fn find_udf_call(&self, expr: &Expr) -> Option<Span> {
        with_stack(|| self.find_udf_call_step(expr))
    }

    fn find_udf_call_step(&self, expr: &Expr) -> Option<Span> {
        let range = |r: &Option<IndexRange>| -> Option<Span> {
            let r = r.as_ref()?;
            self.find_udf_call(&r.lower)
                .or_else(|| r.upper.as_ref().and_then(|u| self.find_udf_call(u)))
        };
        match &expr.kind {
            ExprKind::Call { name, args } => {
                if self.calls_function(name) {
                    Some(expr.span)
                } else {
                    args.iter().find_map(|a| self.find_udf_call(&a.value))
                }
            }
            ExprKind::Unary { operand, .. } => self.find_udf_call(operand),
            ExprKind::Binary { lhs, rhs, .. } => {
                self.find_udf_call(lhs).or_else(|| self.find_udf_call(rhs))
            }
            ExprKind::Index { target, rows, cols } => self
                .find_udf_call(target)
                .or_else(|| range(rows))
                .or_else(|| range(cols)),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ast::{BinaryOp, FunctionDef, Param, Script, ValueType};

    fn sp() -> Span {
        Span::new(0, 1)
    }
    fn ex(kind: ExprKind) -> Expr {
        Expr { kind, span: sp() }
    }
    fn var(n: &str) -> Expr {
        ex(ExprKind::Var(n.into()))
    }
    fn id(n: &str) -> Ident {
        Ident {
            name: n.into(),
            span: sp(),
        }
    }
    fn call(n: &str, args: Vec<Expr>) -> Expr {
        ex(ExprKind::Call {
            name: n.into(),
            args: args
                .into_iter()
                .map(|value| Arg {
                    name: None,
                    value,
                    span: sp(),
                })
                .collect(),
        })
    }
    fn st(kind: StmtKind) -> Stmt {
        Stmt { kind, span: sp() }
    }
    fn assign(t: &str, value: Expr) -> Stmt {
        st(StmtKind::Assign {
            target: id(t),
            value,
        })
    }
    fn func(name: &str) -> FunctionDef {
        FunctionDef {
            name: name.into(),
            params: vec![Param {
                name: "a".into(),
                ty: ValueType::Double,
                default: None,
                span: sp(),
            }],
            results: vec![Param {
                name: "b".into(),
                ty: ValueType::Double,
                default: None,
                span: sp(),
            }],
            body: vec![assign("b", var("a"))],
            span: sp(),
        }
    }

    #[test]
    fn simple_statements_merge_and_calls_split_blocks() {
        let script = Script {
            statements: vec![
                assign("x", ex(ExprKind::Int(1))),
                assign("y", var("x")),
                assign("z", call("f", vec![var("y")])),
                st(StmtKind::Expr(call("print", vec![var("z")]))),
            ],
            functions: vec![func("f")],
            imports: vec![],
            skipped: vec![],
        };
        let p = build_program(script).unwrap();
        assert_eq!(p.main.len(), 3);
        assert!(matches!(&p.main[0], Block::Basic(b) if b.stmts.len() == 2));
        match &p.main[1] {
            Block::Call(c) => {
                assert_eq!(c.function, "f");
                assert_eq!(c.targets[0].name, "z");
            }
            other => panic!("expected call block, got {other:?}"),
        }
        assert!(p.functions["f"].def.body.is_empty());
        assert_eq!(p.functions["f"].body.len(), 1);
    }

    #[test]
    fn nested_calls_are_hoisted_innermost_first() {
        // y = f(f(x)) + 1
        let value = ex(ExprKind::Binary {
            op: BinaryOp::Add,
            lhs: Box::new(call("f", vec![call("f", vec![var("x")])])),
            rhs: Box::new(ex(ExprKind::Int(1))),
        });
        let script = Script {
            statements: vec![assign("x", ex(ExprKind::Int(1))), assign("y", value)],
            functions: vec![func("f")],
            imports: vec![],
            skipped: vec![],
        };
        let p = build_program(script).unwrap();
        assert_eq!(p.main.len(), 4, "{:#?}", p.main);
        let Block::Call(inner) = &p.main[1] else {
            panic!()
        };
        let Block::Call(outer) = &p.main[2] else {
            panic!()
        };
        assert_eq!(inner.targets[0].name, "_ufc2");
        assert_eq!(outer.targets[0].name, "_ufc1");
        assert!(matches!(&outer.args[0].value.kind, ExprKind::Var(v) if v == "_ufc2"));
        let Block::Basic(last) = &p.main[3] else {
            panic!()
        };
        let StmtKind::Assign { value, .. } = &last.stmts[0].kind else {
            panic!()
        };
        let ExprKind::Binary { lhs, .. } = &value.kind else {
            panic!()
        };
        assert!(matches!(&lhs.kind, ExprKind::Var(v) if v == "_ufc1"));
        assert!(is_temporary("_ufc1") && !is_temporary("ufc1"));
    }

    #[test]
    fn load_program_runs_every_stage() {
        use crate::span::SourceFile;
        let args = std::collections::BTreeSet::new();
        let ok = load_program(&SourceFile::new("a.dml", "x = 1\nprint(x)"), &args).unwrap();
        assert_eq!(ok.main.len(), 1);
        let syntax = load_program(&SourceFile::new("a.dml", "x = ("), &args).unwrap_err();
        assert!(syntax[0].to_string().starts_with("syntax error"));
        let build = load_program(
            &SourceFile::new(
                "a.dml",
                "while (f(1)) { }\nf = function(double a) return (double b) { b = a }",
            ),
            &args,
        )
        .unwrap_err();
        assert!(build[0].to_string().starts_with("unsupported"));
        let check = load_program(&SourceFile::new("a.dml", "print(y)"), &args).unwrap_err();
        assert!(check[0].to_string().starts_with("undefined variable 'y'"));
    }

    #[test]
    fn while_condition_with_call_is_unsupported() {
        let script = Script {
            statements: vec![st(StmtKind::While {
                cond: call("f", vec![ex(ExprKind::Int(1))]),
                body: vec![],
            })],
            functions: vec![func("f")],
            imports: vec![],
            skipped: vec![],
        };
        let err = build_program(script).unwrap_err();
        assert!(err.to_string().starts_with("unsupported: "), "{err}");
    }

    #[test]
    fn duplicate_and_builtin_named_functions_are_rejected() {
        let script = Script {
            statements: vec![],
            functions: vec![func("f"), func("f")],
            imports: vec![],
            skipped: vec![],
        };
        assert!(build_program(script)
            .unwrap_err()
            .to_string()
            .contains("more than once"));
        let script = Script {
            statements: vec![],
            functions: vec![func("sum")],
            imports: vec![],
            skipped: vec![],
        };
        assert!(build_program(script)
            .unwrap_err()
            .to_string()
            .contains("built-in"));
    }

    #[test]
    fn if_condition_call_is_hoisted_before_the_if() {
        let script = Script {
            statements: vec![st(StmtKind::If {
                cond: call("f", vec![ex(ExprKind::Int(1))]),
                then_body: vec![assign("a", ex(ExprKind::Int(1)))],
                else_body: vec![],
            })],
            functions: vec![func("f")],
            imports: vec![],
            skipped: vec![],
        };
        let p = build_program(script).unwrap();
        assert!(matches!(&p.main[0], Block::Call(_)));
        assert!(
            matches!(&p.main[1], Block::If { cond, .. } if matches!(&cond.kind, ExprKind::Var(v) if v == "_ufc1"))
        );
    }

    /// The `if` chain an `eval` of a computed name became: per branch, the name compared, the
    /// blocks run, and what is left (the next branch, or the final `stop`).
    fn eval_chain(blocks: &[Block]) -> (Vec<(String, &[Block])>, &[Block]) {
        let mut branches = vec![];
        let mut rest = blocks;
        while let [Block::If {
            cond,
            then_blocks,
            else_blocks,
            ..
        }] = rest
        {
            let ExprKind::Binary { rhs, .. } = &cond.kind else {
                panic!("expected a comparison of the name, got {cond:?}");
            };
            let ExprKind::Str(name) = &rhs.kind else {
                panic!("expected a name, got {rhs:?}");
            };
            branches.push((name.clone(), then_blocks.as_slice()));
            rest = else_blocks;
        }
        (branches, rest)
    }

    #[test]
    fn eval_becomes_a_call_per_candidate_chosen_by_the_name() {
        let source = crate::span::SourceFile::new(
            "s.dml",
            "f = function(Matrix[Double] X) return (Matrix[Double] Y) { Y = X }\n\
             g = function(Matrix[Double] X) return (Double s) { s = sum(X) }\n\
             h = function(Matrix[Double] X, Double b) return (Matrix[Double] Y) { Y = X + b }\n\
             X = matrix(1, 2, 2)\nn = \"g\"\nY = eval(n, X, 2)\nZ = eval(\"f\", X)\n\
             W = eval(n, X)",
        );
        let p = build_program(crate::parser::parse(&source).unwrap()).unwrap();
        // The name is computed once, then compared with each two-parameter function's.
        let Block::Basic(b) = &p.main[0] else {
            panic!("expected the assignments first, got {:?}", p.main[0]);
        };
        assert_eq!(b.stmts.len(), 3);
        let (branches, last) = eval_chain(&p.main[1..2]);
        assert_eq!(branches.len(), 1);
        assert_eq!(branches[0].0, "h");
        assert!(matches!(branches[0].1, [Block::Call(c)]
            if c.function == "h" && c.from_eval && !c.spread && c.targets[0].name == "Y"));
        assert!(
            matches!(last, [Block::Basic(b)] if matches!(&b.stmts[0].kind,
            StmtKind::Expr(e) if matches!(&e.kind, ExprKind::Call { name, .. } if name == "stop")))
        );
        // A literal name is the one call (its variable argument spread if it is a list).
        assert!(matches!(&p.main[2], Block::Call(c)
            if c.function == "f" && c.spread && c.targets[0].name == "Z"));
        // One variable argument may be a list, spread when the call runs: every function is
        // a candidate; g's scalar result becomes W as a 1x1 matrix.
        let (branches, _) = eval_chain(&p.main[4..5]);
        let names: Vec<&str> = branches.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["f", "g", "h"]);
        assert!(matches!(branches[1].1, [Block::Call(c), Block::Basic(_)]
            if c.function == "g" && c.spread));
        assert_eq!(p.main.len(), 5);
    }

    #[test]
    fn eval_of_a_literal_no_function_answers_is_an_unknown_function() {
        let source = crate::span::SourceFile::new(
            "s.dml",
            "f = function(Matrix[Double] X) return (Matrix[Double] Y) { Y = X }\n\
             Y = eval(\"f\", 1, 2)",
        );
        let err = build_program(crate::parser::parse(&source).unwrap()).unwrap_err();
        assert!(err.to_string().contains("'f'"), "{err}");
    }
}
