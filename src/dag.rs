//! Prepared DAGs: a HOP DAG an embedder built ([`lafuse_compiler::hops::DagBuilder`]) or read
//! from JSON, optimized, fused, compiled and executed on the caller's inputs, with the hops no
//! fused operator covers run by lafuse's own kernels, returning the DAG's outputs.

use crate::bindings::{capturing_prints, Bindings, Outputs};
use crate::compile::compile_dag;
use crate::engine::{Interpreter, PlanCache};
use crate::error::{Binding, Error};
use crate::prepared::collect_outputs;
use crate::{ScriptArgs, Shared};
use lafuse_compiler::hops::{self, HopDag, OpKind};
use lafuse_compiler::program::Program;
use lafuse_runtime::value::Value;
use std::io::Write;
use std::sync::Arc;
use std::time::Instant;

/// One input of a DAG: a transient read's variable.
#[derive(Clone, Debug, PartialEq)]
pub struct DagInput {
    pub name: String,
    /// Whether the DAG reads a matrix (else a scalar).
    pub matrix: bool,
    /// The size the DAG states (`None` where it leaves it to the bound value).
    pub rows: Option<u64>,
    pub cols: Option<u64>,
}

/// A DAG ready to execute on bound inputs ([`crate::Engine::prepare_dag`]). Its inputs are its
/// transient reads (`DagBuilder::input`), its outputs its transient writes
/// (`DagBuilder::output`). Each execution compiles the DAG for the sizes of the bound matrices
/// (where the DAG leaves them open) once, and reuses that for same-shaped inputs; `Send +
/// Sync`, like [`crate::PreparedScript`].
pub struct PreparedDag {
    shared: Arc<Shared>,
    dag: HopDag,
    inputs: Vec<DagInput>,
    input_names: Vec<String>,
    outputs: Vec<String>,
    /// The interpreter runs a DAG as a block outside any program: this empty one.
    program: Program,
    args: ScriptArgs,
    plans: PlanCache,
}

impl PreparedDag {
    pub(crate) fn new(shared: Arc<Shared>, dag: HopDag) -> Result<PreparedDag, Error> {
        hops::verify(&dag).map_err(|e| {
            lafuse_compiler::CompileError::at(
                lafuse_compiler::DagError::Invalid(e),
                lafuse_compiler::span::Span::default(),
            )
        })?;
        let mut inputs: Vec<DagInput> = Vec::new();
        let mut outputs: Vec<String> = Vec::new();
        for hop in &dag.hops {
            match &hop.op {
                OpKind::TransientRead { name } if !inputs.iter().any(|i| &i.name == name) => inputs
                    .push(DagInput {
                        name: name.clone(),
                        matrix: hop.is_matrix(),
                        rows: hop.rows,
                        cols: hop.cols,
                    }),
                OpKind::TransientWrite { name } if !outputs.contains(name) => {
                    outputs.push(name.clone())
                }
                _ => {}
            }
        }
        Ok(PreparedDag {
            shared,
            input_names: inputs.iter().map(|i| i.name.clone()).collect(),
            dag,
            inputs,
            outputs,
            program: Program {
                main: Vec::new(),
                functions: Default::default(),
            },
            args: ScriptArgs::default(),
            plans: PlanCache::default(),
        })
    }

    /// The DAG as given.
    pub fn dag(&self) -> &HopDag {
        &self.dag
    }

    /// The variables every execution must bind.
    pub fn inputs(&self) -> &[DagInput] {
        &self.inputs
    }

    /// The variables every execution returns.
    pub fn outputs(&self) -> &[String] {
        &self.outputs
    }

    /// Executes the DAG on `bindings` (every input bound, nothing else); what its `print`
    /// hops print is kept in [`Outputs::printed`].
    pub fn execute(&self, bindings: &Bindings<'_>) -> Result<Outputs, Error> {
        capturing_prints(|out| self.execute_to(bindings, out))
    }

    /// [`PreparedDag::execute`] with what the DAG prints written to `out`.
    pub fn execute_to(
        &self,
        bindings: &Bindings<'_>,
        out: &mut dyn Write,
    ) -> Result<Outputs, Error> {
        let started = Instant::now();
        self.check_bound(bindings)?;
        let mut vars = bindings.symbols_for(&self.input_names)?;
        let fuser = self.shared.fuser.as_ref();
        let mut interpreter = Interpreter::new(
            &self.program,
            &self.args,
            out,
            &self.shared.config,
            fuser,
            &self.plans,
        );
        let ran = interpreter.exec_detached(0, "DAG", &mut vars, |meta, _| {
            compile_dag(&self.dag, meta, fuser)
        });
        let stats = interpreter.located_stats(started.elapsed(), |_| "the DAG".to_string());
        drop(interpreter);
        ran?;
        collect_outputs(vars, &self.outputs, stats)
    }

    /// Every bound value has the data type and the stated size of its input.
    fn check_bound(&self, bindings: &Bindings<'_>) -> Result<(), Error> {
        let kind = |matrix: bool| if matrix { "matrix" } else { "scalar" };
        for input in &self.inputs {
            let Some(value) = bindings.get(&input.name) else {
                continue; // `symbols_for` names it
            };
            match &value {
                Value::Matrix(m) if input.matrix => {
                    let fits = |stated: Option<u64>, actual: usize| {
                        stated.is_none_or(|s| s == actual as u64)
                    };
                    if !fits(input.rows, m.rows()) || !fits(input.cols, m.cols()) {
                        return Err(Error::Binding(Binding::InputShape {
                            name: input.name.clone(),
                            declared: (input.rows, input.cols),
                            bound: (m.rows(), m.cols()),
                        }));
                    }
                }
                v if v.is_matrix() != input.matrix => {
                    return Err(Error::Binding(Binding::InputKind {
                        name: input.name.clone(),
                        declared: kind(input.matrix),
                        bound: kind(v.is_matrix()),
                    }))
                }
                _ => {}
            }
        }
        Ok(())
    }
}
