//! lafuse runtime: matrix data, unfused kernels, instruction executor, lineage.
//!
//! Architecture invariant: this crate knows nothing of planning or code generation.

pub mod error;
pub mod matrix;

pub use error::{Result, RuntimeError};
pub use matrix::{DenseMatrix, Matrix, SparseMatrix};
