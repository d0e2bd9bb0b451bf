//! Prepared scripts: a DML script parsed and checked once, then executed many times on inputs
//! the caller binds, returning the outputs it names (SystemDS's JMLC `prepareScript` /
//! `executeScript`). Compiled blocks and fused operators carry over between executions with
//! same-shaped inputs, and one prepared script serves several threads at once.

use crate::bindings::{capturing_prints, detach, Bindings, Outputs};
use crate::engine::{Interpreter, PlanCache};
use crate::error::{Binding, Error};
use crate::{ScriptArgs, Shared, SourceFile};
use lafuse_compiler::ast::{self, ExprKind, StmtKind};
use lafuse_compiler::{check, program};
use lafuse_runtime::exec::SymbolTable;
use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::sync::Arc;
use std::time::Instant;

/// A script ready to execute on bound inputs ([`crate::Engine::prepare`]).
///
/// The script reads its inputs as variables it never assigns (`X` in `print(sum(X))`), or, as
/// in JMLC, assigns them from a `read` the prepared script skips (`X = read($X)` at the top
/// level: the bound value is used instead, so a script written for files runs unchanged);
/// likewise a top-level `write(Y, ...)` of an output is skipped and `Y` returned instead.
///
/// `Send + Sync`: [`PreparedScript::execute`] may run on any number of threads at once; they
/// share the compiled blocks (a block compiles once per distinct input shapes) and the
/// engine's fused operators.
pub struct PreparedScript {
    shared: Arc<Shared>,
    source: SourceFile,
    args: ScriptArgs,
    /// Boxed: compiled blocks are cached by the addresses of the program's blocks.
    program: Box<program::Program>,
    inputs: Vec<String>,
    outputs: Vec<String>,
    plans: PlanCache,
}

impl PreparedScript {
    /// Parses and checks `source` with `inputs` bound at its start; `outputs` are the
    /// variables each execution returns.
    pub(crate) fn new(
        shared: Arc<Shared>,
        source: &SourceFile,
        args: &ScriptArgs,
        inputs: &[&str],
        outputs: &[&str],
    ) -> Result<PreparedScript, Error> {
        let inputs = distinct_names(inputs, "input")?;
        let outputs = distinct_names(outputs, "output")?;
        let mut script = crate::parse_script(source, &shared.config)?;
        skip_bound_reads_and_writes(&mut script.statements, &inputs, &outputs);
        let mut program = program::build_program(script)?;
        let input_set: BTreeSet<String> = inputs.iter().cloned().collect();
        check::check_program_with_inputs(&program, &args.names(), &input_set)?;
        if !shared.config.traces() {
            program.drop_dead_main(outputs.iter().cloned());
        }
        Ok(PreparedScript {
            shared,
            source: source.clone(),
            args: args.clone(),
            program: Box::new(program),
            inputs,
            outputs,
            plans: PlanCache::default(),
        })
    }

    /// The script, to render an execution's errors with ([`Error::render`]).
    pub fn source(&self) -> &SourceFile {
        &self.source
    }

    /// The names every execution must bind.
    pub fn inputs(&self) -> &[String] {
        &self.inputs
    }

    /// The names every execution returns.
    pub fn outputs(&self) -> &[String] {
        &self.outputs
    }

    /// Executes the script on `bindings` (every input bound, nothing else); what it prints is
    /// kept in [`Outputs::printed`].
    pub fn execute(&self, bindings: &Bindings<'_>) -> Result<Outputs, Error> {
        capturing_prints(|out| self.execute_to(bindings, out))
    }

    /// [`PreparedScript::execute`] with what the script prints written to `out`.
    pub fn execute_to(
        &self,
        bindings: &Bindings<'_>,
        out: &mut dyn Write,
    ) -> Result<Outputs, Error> {
        let started = Instant::now();
        let vars = bindings.symbols_for(&self.inputs)?;
        let mut interpreter = Interpreter::new(
            &self.program,
            &self.args,
            out,
            &self.shared.config,
            self.shared.fuser.as_ref(),
            &self.plans,
        );
        let ended = interpreter.run_main_with(vars);
        let stats = interpreter.located_stats(started.elapsed(), |span| {
            crate::explain::lines_label(&self.source, span)
        });
        drop(interpreter);
        let vars = ended?;
        collect_outputs(vars, &self.outputs, stats)
    }
}

/// The named outputs taken from the variables live at the end of an execution, each detached
/// from the caller's memory; the rest are dropped here, before the caller's views may end.
pub(crate) fn collect_outputs(
    mut vars: SymbolTable,
    names: &[String],
    stats: crate::Stats,
) -> Result<Outputs, Error> {
    let mut values = BTreeMap::new();
    for name in names {
        let value = vars.remove(name).ok_or_else(|| {
            Error::Binding(Binding::OutputUnassigned {
                name: name.to_string(),
            })
        })?;
        values.insert(name.clone(), detach(value)?);
    }
    drop(vars);
    Ok(Outputs::new(values, stats))
}

/// `names` as a list without repeats; a repeated or empty name is the caller's error.
fn distinct_names(names: &[&str], role: &'static str) -> Result<Vec<String>, Error> {
    let mut seen = BTreeSet::new();
    for name in names {
        if name.is_empty() || !seen.insert(*name) {
            return Err(Error::Binding(Binding::BadName {
                name: name.to_string(),
                role,
            }));
        }
    }
    Ok(names.iter().map(|n| n.to_string()).collect())
}

/// JMLC's rewrite: top-level `X = read(...)` of an input and `write(Y, ...)` of an output are
/// dropped, so the bound value is read and the output returned instead.
fn skip_bound_reads_and_writes(
    statements: &mut Vec<ast::Stmt>,
    inputs: &[String],
    outputs: &[String],
) {
    statements.retain(|stmt| match &stmt.kind {
        StmtKind::Assign { target, value } => {
            !(inputs.contains(&target.name) && is_call(value, "read"))
        }
        StmtKind::Expr(expr) => match &expr.kind {
            ExprKind::Call { name, args } if name == "write" => !args
                .first()
                .is_some_and(|a| matches!(&a.value.kind, ExprKind::Var(v) if outputs.contains(v))),
            _ => true,
        },
        _ => true,
    });
}

fn is_call(expr: &ast::Expr, function: &str) -> bool {
    matches!(&expr.kind, ExprKind::Call { name, .. } if name == function)
}
