//! lafuse runtime: matrix data, unfused kernels, instruction executor, lineage.
//!
//! Architecture invariant: this crate knows nothing of planning or code generation.

pub mod datagen;
pub mod error;
pub mod exec;
pub mod format;
pub mod io;
pub mod kernels;
pub mod math;
pub mod matrix;
pub mod operator;
pub mod ops;
pub mod value;

pub use error::{Result, RuntimeError};
pub use matrix::{DenseMatrix, Matrix, SparseMatrix, ValueRange};
pub use operator::{Operator, OperatorInput};
