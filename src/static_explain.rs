//! `explain --static`: every block compiled once without running the script, with what the
//! compiler can infer of each variable (sizes and non-zeros propagated from the blocks before
//! it, scalar values where they are literals).
//!
//! Where execution would learn sizes (data read from files, results of loops whose trip count
//! changes them), the static view has unknowns; this is the trade the flag asks for: no side
//! effects and no run time, at the price of plans made with less knowledge.

use crate::error::Error;
use crate::{ExplainedBlock, ScriptArgs};
use lafuse_compiler::ast::{self, ValueType as AstType};
use lafuse_compiler::builtins::{self, BoundValue};
use lafuse_compiler::hops::{self, BlockInputs, HopDag, InputMeta, OpKind, ValueType};
use lafuse_compiler::program::{Block, CallBlock, Program};
use lafuse_compiler::span::Span;
use lafuse_compiler::stack::with_stack;

/// Functions nested deeper than this are not followed (their results become unknown).
const MAX_STATIC_DEPTH: usize = 16;

/// Compiles every block of `program` once, in program order, and returns them as `explain`
/// shows them.
pub(crate) fn explain_static(
    program: &Program,
    args: &ScriptArgs,
) -> Result<Vec<ExplainedBlock>, Error> {
    let mut walker = Walker {
        program,
        args,
        blocks: Vec::new(),
        stack: Vec::new(),
    };
    let mut vars = BlockInputs::new();
    walker.blocks_of(&program.main, &mut vars)?;
    Ok(walker.blocks)
}

struct Walker<'p> {
    program: &'p Program,
    args: &'p ScriptArgs,
    blocks: Vec<ExplainedBlock>,
    /// The functions being walked (recursion is not followed).
    stack: Vec<&'p str>,
}

impl<'p> Walker<'p> {
    fn blocks_of(&mut self, blocks: &'p [Block], vars: &mut BlockInputs) -> Result<(), Error> {
        for block in blocks {
            self.block(block, vars)?;
        }
        Ok(())
    }

    fn push(&mut self, kind: &str, span: Span, dag: HopDag) {
        self.blocks.push(ExplainedBlock {
            kind: kind.to_string(),
            span,
            dag,
        });
    }

    fn predicate(&mut self, kind: &str, expr: &ast::Expr, vars: &BlockInputs) -> Result<(), Error> {
        let dag = hops::build_expr_dag(expr, vars, self.args.compiler_args())?;
        self.push(kind, expr.span, dag);
        Ok(())
    }

    fn block(&mut self, block: &'p Block, vars: &mut BlockInputs) -> Result<(), Error> {
        with_stack(|| self.block_step(block, vars))
    }

    fn block_step(&mut self, block: &'p Block, vars: &mut BlockInputs) -> Result<(), Error> {
        match block {
            Block::Basic(basic) => {
                let dag = hops::build_block_dag(&basic.stmts, vars, self.args.compiler_args())?;
                assign_outputs(&dag, vars);
                self.push("basic block", basic.span, dag);
            }
            Block::If {
                cond,
                then_blocks,
                else_blocks,
                ..
            } => {
                self.predicate("if condition", cond, vars)?;
                let mut then_vars = vars.clone();
                self.blocks_of(then_blocks, &mut then_vars)?;
                let mut else_vars = vars.clone();
                self.blocks_of(else_blocks, &mut else_vars)?;
                *vars = merge(&then_vars, &else_vars);
            }
            Block::For {
                var,
                from,
                to,
                step,
                body,
                ..
            } => {
                self.predicate("for-loop start", from, vars)?;
                self.predicate("for-loop end", to, vars)?;
                if let Some(step) = step {
                    self.predicate("for-loop step", step, vars)?;
                }
                self.loop_body(body, vars, Some(&var.name))?;
            }
            Block::While { cond, body, .. } => {
                // The condition is compiled with what holds on every iteration.
                let mut entry = vars.clone();
                let mut once = vars.clone();
                self.quiet(|w| w.blocks_of(body, &mut once))?;
                entry = merge(&entry, &once);
                self.predicate("while condition", cond, &entry)?;
                self.loop_body(body, vars, None)?;
            }
            Block::Call(call) => self.call(call, vars)?,
        }
        Ok(())
    }

    /// Walks `body` once for its blocks, with the variables it changes made unknown first
    /// (their values differ between iterations), then leaves `vars` as after any number of
    /// iterations.
    fn loop_body(
        &mut self,
        body: &'p [Block],
        vars: &mut BlockInputs,
        counter: Option<&str>,
    ) -> Result<(), Error> {
        let mut entry = vars.clone();
        if let Some(name) = counter {
            entry.insert(name.to_string(), scalar(ValueType::Int));
        }
        let mut once = entry.clone();
        self.quiet(|w| w.blocks_of(body, &mut once))?;
        let mut steady = merge(&entry, &once);
        self.blocks_of(body, &mut steady.clone())?;
        let mut after = steady.clone();
        self.quiet(|w| w.blocks_of(body, &mut after))?;
        steady = merge(&steady, &after);
        *vars = merge(vars, &steady);
        Ok(())
    }

    /// Runs `f` without recording blocks (for fixpoint passes over loop bodies).
    fn quiet(&mut self, f: impl FnOnce(&mut Self) -> Result<(), Error>) -> Result<(), Error> {
        let mark = self.blocks.len();
        let result = f(self);
        self.blocks.truncate(mark);
        result
    }

    fn call(&mut self, call: &'p CallBlock, vars: &mut BlockInputs) -> Result<(), Error> {
        let program = self.program;
        let Some(function) = program.functions.get(&call.function) else {
            return Err(lafuse_compiler::CompileError::at(
                lafuse_compiler::CheckError::UnknownFunction {
                    name: call.function.clone(),
                },
                call.span,
            )
            .into());
        };
        let def = &function.def;
        // `eval`'s spread argument is bound when it runs: its parameters are unknown here.
        let bound = if call.spread {
            builtins::BoundArgs::default()
        } else {
            builtins::bind_udf_args(def, &call.args, call.span)?
        };
        let mut callee = BlockInputs::new();
        for (i, formal) in def.params.iter().enumerate() {
            let meta = match bound.params.get(i).map(|p| &p.value) {
                // Defaults are evaluated in the caller's scope, as arguments are.
                Some(BoundValue::Arg(expr) | BoundValue::DefaultExpr(expr)) => {
                    self.value_meta(expr, vars)?
                }
                _ => None,
            };
            callee.insert(
                formal.name.clone(),
                meta.unwrap_or_else(|| unknown(formal.ty)),
            );
        }
        let recursive = self.stack.contains(&def.name.as_str());
        if !recursive && self.stack.len() < MAX_STATIC_DEPTH {
            self.stack.push(&def.name);
            let result = self.blocks_of(&function.body, &mut callee);
            self.stack.pop();
            result?;
        }
        for (target, result) in call.targets.iter().zip(&def.results) {
            let meta = match callee.get(&result.name) {
                Some(m) if !recursive => m.clone(),
                _ => unknown(result.ty),
            };
            vars.insert(target.name.clone(), meta);
        }
        Ok(())
    }

    /// What is known of an expression's value, by compiling it as `_expr = expr`.
    fn value_meta(
        &mut self,
        expr: &ast::Expr,
        vars: &BlockInputs,
    ) -> Result<Option<InputMeta>, Error> {
        let assign = ast::Stmt {
            kind: ast::StmtKind::Assign {
                target: ast::Ident {
                    name: hops::EXPR_RESULT.to_string(),
                    span: expr.span,
                },
                value: expr.clone(),
            },
            span: expr.span,
        };
        let dag = hops::build_block_dag(
            std::slice::from_ref(&assign),
            vars,
            self.args.compiler_args(),
        )?;
        let mut out = BlockInputs::new();
        assign_outputs(&dag, &mut out);
        Ok(out.remove(hops::EXPR_RESULT))
    }
}

fn scalar(value_type: ValueType) -> InputMeta {
    InputMeta::Scalar {
        value_type,
        value: None,
    }
}

/// Nothing known but the declared type.
fn unknown(ty: AstType) -> InputMeta {
    match ty {
        AstType::Matrix => InputMeta::Matrix {
            rows: None,
            cols: None,
            nnz: None,
        },
        AstType::Int => scalar(ValueType::Int),
        AstType::Bool => scalar(ValueType::Bool),
        AstType::String => scalar(ValueType::String),
        AstType::List => InputMeta::List {
            value_type: ValueType::Double,
        },
        AstType::Frame => InputMeta::Frame,
        _ => scalar(ValueType::Double),
    }
}

/// Records what a block leaves in its variables: the size and non-zeros of each matrix it
/// writes, the type of each scalar, and the value of a scalar written as a literal.
fn assign_outputs(dag: &HopDag, vars: &mut BlockInputs) {
    for (name, value) in dag.outputs() {
        let hop = dag.hop(value);
        let meta = if hop.is_list() {
            InputMeta::List {
                value_type: hop.value_type,
            }
        } else if hop.is_frame() {
            InputMeta::Frame
        } else if hop.is_matrix() {
            InputMeta::Matrix {
                rows: hop.rows,
                cols: hop.cols,
                nnz: hop.nnz,
            }
        } else {
            InputMeta::Scalar {
                value_type: hop.value_type,
                value: match &hop.op {
                    OpKind::Literal(l) => Some(l.clone()),
                    _ => None,
                },
            }
        };
        vars.insert(name.to_string(), meta);
    }
}

/// The type of a scalar that has type `a` on one path and `b` on another: a number where both
/// are numbers or booleans (`step = 0` before a loop that sets `step = step - g / h` is a
/// double after it), a string where either is one (DML concatenates strings with anything).
fn scalar_join(a: ValueType, b: ValueType) -> ValueType {
    match (a, b) {
        _ if a == b => a,
        (ValueType::String, _) | (_, ValueType::String) => ValueType::String,
        _ => ValueType::Double,
    }
}

/// What holds after either of two paths: what both agree on, unknown where they differ. A
/// variable defined on one path only keeps what that path knows: the script's checks accept
/// reading it after both (as after a loop whose body defines it), and a run reads it only
/// after the path that defined it.
fn merge(a: &BlockInputs, b: &BlockInputs) -> BlockInputs {
    let mut out = BlockInputs::new();
    for (name, only) in a.iter().filter(|(n, _)| !b.contains_key(*n)) {
        out.insert(name.clone(), only.clone());
    }
    for (name, only) in b.iter().filter(|(n, _)| !a.contains_key(*n)) {
        out.insert(name.clone(), only.clone());
    }
    for (name, ma) in a {
        let Some(mb) = b.get(name) else { continue };
        let meta = match (ma, mb) {
            _ if ma == mb => ma.clone(),
            (
                InputMeta::Matrix { rows, cols, nnz },
                InputMeta::Matrix {
                    rows: r2,
                    cols: c2,
                    nnz: n2,
                },
            ) => InputMeta::Matrix {
                rows: rows.filter(|r| Some(*r) == *r2),
                cols: cols.filter(|c| Some(*c) == *c2),
                nnz: nnz.filter(|n| Some(*n) == *n2),
            },
            (
                InputMeta::Scalar { value_type: t1, .. },
                InputMeta::Scalar { value_type: t2, .. },
            ) => scalar(scalar_join(*t1, *t2)),
            // A variable that is a matrix on one path and a scalar on the other: the script's
            // checks reject reading it; leave it out.
            _ => continue,
        };
        out.insert(name.clone(), meta);
    }
    out
}
