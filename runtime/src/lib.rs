//! lafuse runtime: matrix data, unfused kernels, instruction executor, lineage.
//!
//! Architecture invariant: this crate knows nothing of planning or code generation; of
//! lafuse's crates it depends on `lafuse-core` only (the operation vocabulary and faults).

pub mod buffer;
pub mod datagen;
pub mod error;
pub mod exec;
pub mod format;
pub mod frame;
pub mod io;
pub mod kernels;
pub mod lineage;
pub mod list;
pub mod matrix;
pub mod memory;
pub mod operator;
pub mod simd;
pub mod transform;
pub mod value;

/// The operation vocabulary (`ops`) and scalar `exp`/`ln`/`sigmoid` (`math`) are the core's,
/// shared with the compiler; re-exported here under the runtime's paths.
pub use lafuse_core::{math, ops};

pub use buffer::Buffer;
pub use error::{Result, RuntimeError};
pub use matrix::{DenseMatrix, Matrix, SparseMatrix, ValueRange};
pub use operator::{Operator, OperatorInput};
