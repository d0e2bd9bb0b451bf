//! lafuse compiler: the DML front end, the HOP IR, rewrites and (later) the fusion optimizer.
//!
//! Architecture invariant: this crate knows nothing of matrix data, kernels or LLVM; of
//! lafuse's crates it depends on `lafuse-core` only (the operation vocabulary and faults). It
//! is pure and deterministic: the same script or DAG and the same configuration give the same
//! output. It reads no files itself: the module loader reads sourced files and built-ins
//! through the `modules::ModuleFiles` its caller passes.

pub mod ast;
pub mod builtins;
pub mod check;
pub mod error;
pub mod eval_call;
pub mod fusion;
pub mod hops;
pub mod lexer;
pub mod liveness;
pub mod modules;
pub mod parser;
pub mod program;
pub mod span;
pub mod stack;
pub mod systemds_names;
pub use error::{
    Bound, CallProblem, Callee, CheckError, CompileCause, CompileError, DagError, Fault,
    IndexProblem, Internal, Kind, LexError, Note, Operand, Result, Shape, ShapeError, SyntaxError,
    TypeRule, Unsupported,
};
