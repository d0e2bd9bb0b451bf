//! Helpers shared by the HOP test files: parse a DML script that is one basic block and build
//! its DAG.

#![allow(dead_code)]

use lafuse_compiler::hops::{self, BlockInputs, HopDag, InputMeta, ScriptArgs};
use lafuse_compiler::program::{build_program, Block};
use lafuse_compiler::span::SourceFile;
use lafuse_compiler::{parser, CompileError};

/// The statements of a script that must consist of exactly one basic block.
pub fn block_of(script: &str) -> Vec<lafuse_compiler::ast::Stmt> {
    let src = SourceFile::new("test.dml", script);
    let ast = parser::parse(&src).unwrap_or_else(|e| panic!("parse error: {e:?}"));
    let program = build_program(ast).expect("program");
    match program.main.as_slice() {
        [Block::Basic(b)] => b.stmts.clone(),
        other => panic!("expected one basic block, got {}", other.len()),
    }
}

/// Inputs from `(name, rows, cols, nnz)` matrices.
pub fn matrices(list: &[(&str, u64, u64, u64)]) -> BlockInputs {
    list.iter()
        .map(|&(n, r, c, z)| (n.to_string(), InputMeta::matrix(r, c, z)))
        .collect()
}

/// The optimized DAG of a one-block script.
pub fn dag(script: &str, inputs: &BlockInputs) -> HopDag {
    try_dag(script, inputs)
        .unwrap_or_else(|e| panic!("{}", e.render(&SourceFile::new("test.dml", script))))
}

pub fn try_dag(script: &str, inputs: &BlockInputs) -> Result<HopDag, CompileError> {
    hops::build_block_dag(&block_of(script), inputs, &ScriptArgs::new())
}

/// The DAG before rewrites.
pub fn raw_dag(script: &str, inputs: &BlockInputs) -> HopDag {
    hops::construct::construct_block_dag(&block_of(script), inputs, &ScriptArgs::new())
        .expect("construct")
}

/// The value hop written to variable `name`.
pub fn output(dag: &HopDag, name: &str) -> hops::HopId {
    dag.outputs()
        .into_iter()
        .find(|(n, _)| *n == name)
        .unwrap_or_else(|| panic!("no output {name}"))
        .1
}

/// The literal written to variable `name`, if it folded to one.
pub fn output_literal(dag: &HopDag, name: &str) -> Option<hops::Literal> {
    dag.literal_of(output(dag, name)).cloned()
}
