//! lafuse core: what every layer shares and nothing else. The operation vocabulary with its
//! exact scalar semantics ([`ops`]), `exp`/`log`/`sigmoid` by fdlibm's methods ([`math`]),
//! the fault classes of errors ([`Fault`]), and when a matrix is stored sparse
//! ([`prefers_sparse`]).
//!
//! Architecture invariant: this crate depends on no other lafuse crate; the compiler and the
//! runtime use its enums as their own, so an operator means the same thing, to the bit, when
//! it is folded, executed unfused or generated.

pub mod fault;
pub mod math;
pub mod matrix_ops;
pub mod ops;

pub use fault::Fault;
pub use matrix_ops::{DecompOp, DnnOp, LinAlgOp, StatOp};
pub use ops::{AggOp, BinaryOp, Direction, UnaryOp};

/// Below this sparsity (non-zeros over cells) a matrix with more than one column may be stored
/// sparse, as in SystemDS (`MatrixBlock.SPARSITY_TURN_POINT = 0.4`), where its CSR form is also
/// the smaller ([`prefers_sparse`]).
pub const SPARSITY_TURN_POINT: f64 = 0.4;

/// What a stored CSR row costs beyond its non-zeros, in bytes of dense data: its two row
/// pointers and the start and end of every kernel's loop over it, about a cache line's worth.
/// A row of a narrow matrix holds fewer dense bytes than that, so sparse it is slower, not
/// smaller: KMeans' 10000 x 5 assignment matrix `P` (one non-zero a row, sparsity 0.2) took
/// 3.8 ns a cell in `P / rowSums(P)` stored sparse against 2.1 dense (`D <= minD`, which
/// builds it: 1.8 against 0.7), and MLogReg at 10000 x 100, sparsity 0.01, ran in 16.2 ms
/// with its 10000 x 2 matrices sparse (their products and `cbind`s on CSR kernels) against 8.9
/// dense. SystemDS's
/// rule keeps such matrices dense too: its sparse block must be the smaller, and its sparse
/// rows cost about 100 bytes each (`SparseBlockMCSR.estimateSizeInMemory`).
pub const CSR_ROW_BYTES: f64 = 64.0;

/// Whether a `rows` x `cols` matrix of `nnz` non-zeros is stored sparse (CSR): more than one
/// column, a sparsity below [`SPARSITY_TURN_POINT`], and a CSR form smaller than the dense
/// one, each stored row counted at [`CSR_ROW_BYTES`] beside the 12 bytes of each non-zero
/// (at most `nnz` rows hold any: an ultra-sparse matrix stays sparse however narrow). The
/// runtime's choice of format, and the format the cost model assumes where it prices values as
/// they are stored.
pub fn prefers_sparse(rows: u64, cols: u64, nnz: u64) -> bool {
    let cells = rows as f64 * cols as f64;
    let stored_rows = rows.min(nnz) as f64;
    cols > 1
        && cells > 0.0
        && (nnz as f64) / cells < SPARSITY_TURN_POINT
        && stored_rows * CSR_ROW_BYTES + nnz as f64 * 12.0 < cells * 8.0
}

#[cfg(test)]
mod tests {
    use super::prefers_sparse;

    /// Sparse below the turn point where CSR is the smaller form: wide matrices at any
    /// sparsity below it, narrow ones only where most rows are empty; never one column.
    #[test]
    fn narrow_matrices_are_stored_sparse_only_where_most_rows_are_empty() {
        // 1000 columns: CSR from just below the turn point.
        assert!(prefers_sparse(100, 1000, 39_999));
        assert!(!prefers_sparse(100, 1000, 40_000));
        // KMeans' assignment matrix, one non-zero in each of 10000 rows of 5: dense.
        assert!(!prefers_sparse(10_000, 5, 10_000));
        // The same with 200 non-zeros: 200 stored rows, sparse.
        assert!(prefers_sparse(10_000, 5, 200));
        // 100 columns at sparsity 0.01: sparse (64 + 12 bytes a row against 800).
        assert!(prefers_sparse(10_000, 100, 10_000));
        // One non-zero in every row: a CSR row takes 64 + 12 = 76 bytes, so rows of 9 columns
        // (72 bytes dense) stay dense and rows of 10 (80) go sparse.
        assert!(!prefers_sparse(1000, 8, 1000));
        assert!(!prefers_sparse(1000, 9, 1000));
        assert!(prefers_sparse(1000, 10, 1000));
        assert!(!prefers_sparse(1000, 1, 0));
        assert!(!prefers_sparse(0, 10, 0));
    }
}
