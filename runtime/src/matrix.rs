//! Matrix data: dense row-major `f64` and CSR sparse, with an exact non-zero count.
//!
//! Invariants (checked by [`Matrix::validate`] in tests):
//! * `Dense`: `values.len() == rows * cols`, row-major; `nnz` equals the number of cells `!= 0.0`
//!   (NaN counts as non-zero).
//! * `Sparse` (CSR): `row_ptr.len() == rows + 1`, `row_ptr[0] == 0`, non-decreasing,
//!   `row_ptr[rows] == col_idx.len() == values.len()`; column indices strictly increasing within a
//!   row and `< cols`; no explicit zeros are stored, so `nnz == values.len()`.
//! * Empty matrices (0 rows or 0 columns) are legal in both formats.

use serde::{Deserialize, Serialize};

/// Below this sparsity (nnz / cells) a matrix with more than one column is stored sparse,
/// as SystemDS does (`MatrixBlock.SPARSITY_TURN_POINT = 0.4`).
pub const SPARSITY_TURN_POINT: f64 = 0.4;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DenseMatrix {
    pub rows: usize,
    pub cols: usize,
    pub values: Vec<f64>,
    pub nnz: usize,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SparseMatrix {
    pub rows: usize,
    pub cols: usize,
    pub row_ptr: Vec<usize>,
    pub col_idx: Vec<u32>,
    pub values: Vec<f64>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Matrix {
    Dense(DenseMatrix),
    Sparse(SparseMatrix),
}

/// Whether a matrix of this shape and non-zero count should be stored sparse.
pub fn prefers_sparse(rows: usize, cols: usize, nnz: usize) -> bool {
    let cells = rows as f64 * cols as f64;
    cols > 1 && cells > 0.0 && (nnz as f64) / cells < SPARSITY_TURN_POINT
}
