//! The unfused kernels: the baseline that fused operators are measured against.
//!
//! Conventions shared by every kernel:
//! * Indices and ranges are 0-based and half-open; the DML 1-based inclusive conversion is the
//!   caller's job.
//! * Shape errors are [`RuntimeError::ShapeMismatch`](crate::RuntimeError::ShapeMismatch)
//!   (or a variant of their own) holding both shapes.
//! * Outputs choose their format by their exact nnz ([`Matrix::examine_and_convert`]).
//! * Work above [`PAR_THRESHOLD`] cells runs on rayon's pool, split
//!   into blocks of fixed size, so reductions merge partials in the same order whatever the thread
//!   count: results are bit-identical across thread counts.
//! * Sparse inputs only skip zeros where that cannot change the result, including with NaN/±Inf
//!   in the other operand (`0 * NaN` is NaN).

pub mod aggregate;
pub mod block_product;
pub mod commons_svd;
pub mod construct;
pub mod cumulative;
pub mod distributions;
pub mod dnn;
pub mod elementwise;
pub mod gather;
pub mod grouped;
pub mod householder_qr;
pub mod index;
pub mod linalg;
pub mod matmul;
mod matvec;
pub mod outer;
pub mod partial;
pub mod reorg;
pub mod rowindex;
pub mod select;
pub mod solve;
pub mod sort;
pub mod stats;
pub mod symmetric_eigen;
pub mod table;
pub mod tri;
pub mod unique;
mod vector_math;
pub use vector_math::{exp_in_place, ln_in_place, tanh_in_place};
pub mod vector_state;

pub use aggregate::aggregate;
pub use construct::{fill, from_row_major, seq};
pub use cumulative::{cumsum, cumsumprod, cumulative};
pub use elementwise::{
    binary, binary_known, binary_owned, binary_scalar, binary_scalar_owned, ifelse, matrix_cell,
    replace, unary, unary_owned,
};
pub use grouped::grouped_aggregate;
pub use index::{cbind, left_index, rbind, slice};
pub use matmul::{matmul, matmul_nt, matmul_tn, matmul_transposed_out, matmul_with_range, tsmm};
pub use outer::outer;
pub use reorg::{diag, reshape, transpose, transpose_csr};
pub use rowindex::row_index;
pub use select::remove_empty;
pub use solve::solve;
pub use sort::{order, rev};
pub use table::table;
pub use unique::unique;

use crate::matrix::{DenseMatrix, Matrix, SparseMatrix, BLOCK_CELLS, PAR_THRESHOLD};
use rayon::prelude::*;
use std::mem::MaybeUninit;

/// An argument that may be a matrix or a scalar (`ifelse`, `left_index`).
#[derive(Clone, Copy, Debug)]
pub enum Operand<'a> {
    Matrix(&'a Matrix),
    Scalar(f64),
}

/// Wraps a dense result with its exact nnz and picks its format by nnz (also used by the
/// fused-operator skeletons, whose outputs follow the same rule).
/// Never fails: converting to CSR allocates less than the dense values it reads.
pub fn dense_result(rows: usize, cols: usize, values: Vec<f64>, nnz: usize) -> Matrix {
    let d = DenseMatrix {
        rows,
        cols,
        values: values.into(),
        nnz,
    };
    if crate::matrix::prefers_sparse(rows, cols, nnz) && d.sparse_form_fits() {
        Matrix::Sparse(d.to_sparse())
    } else {
        Matrix::Dense(d)
    }
}

/// Wraps a CSR result (zeros already dropped) and picks its format by nnz; converting a dense
/// enough one to dense storage may fail as [`Matrix::to_dense`].
pub(crate) fn sparse_result(s: SparseMatrix) -> crate::error::Result<Matrix> {
    Matrix::Sparse(s).examine_and_convert()
}

/// Cells [`fill_flat`] writes before it counts their non-zeros: 8 KiB, which stay in a core's
/// L1 cache until counted (a whole block of [`BLOCK_CELLS`] had left it for L2, and `A * 2`
/// over 2000 x 20 spent a fifth of its time counting).
const COUNTED_CELLS: usize = 1024;

/// Fills `out` block by block (`f(offset, part)`, a block a few parts at a time), in parallel
/// above the threshold, and returns the number of non-zeros written, each part counted right
/// after it is written.
pub(crate) fn fill_flat<F>(out: &mut [f64], f: F) -> usize
where
    F: Fn(usize, &mut [f64]) + Sync,
{
    fill_parts(out, f)
}

/// [`fill_flat`] into a new buffer of `n` cells, with the number of non-zeros written. Each
/// part is zeroed right before `f` writes it, while it is in L1, rather than the whole buffer
/// before any of it is written: where the allocator hands back memory it had, zeroing it took
/// a pass of its own through L2 or memory (a fifth of `A * 2` over 2000 x 20). `f` writes
/// every cell of its part.
pub(crate) fn fill_flat_new<F>(n: usize, f: F) -> crate::error::Result<(Vec<f64>, usize)>
where
    F: Fn(usize, &mut [f64]) + Sync,
{
    let mut out = crate::matrix::try_with_capacity(n)?;
    let nnz = fill_parts(&mut out.spare_capacity_mut()[..n], f);
    // SAFETY: the capacity is at least `n` (`try_with_capacity`), and every one of the first
    // `n` cells was written above (zeroed, then by `f`).
    unsafe { out.set_len(n) };
    Ok((out, nnz))
}

/// A cell of a buffer [`fill_parts`] fills: a value, or one not yet initialised.
trait Cell: Send + Sized {
    /// `part` as values `f` may overwrite.
    fn values(part: &mut [Self]) -> &mut [f64];
}

impl Cell for f64 {
    #[inline(always)]
    fn values(part: &mut [f64]) -> &mut [f64] {
        part
    }
}

impl Cell for MaybeUninit<f64> {
    /// Every cell set to 0 first.
    #[inline(always)]
    fn values(part: &mut [Self]) -> &mut [f64] {
        for cell in part.iter_mut() {
            cell.write(0.0);
        }
        // SAFETY: every cell was initialised just above, and `MaybeUninit<f64>` has the layout
        // of `f64`.
        unsafe { &mut *(part as *mut [Self] as *mut [f64]) }
    }
}

/// [`fill_flat`]'s loop over any [`Cell`]s: blocks of [`BLOCK_CELLS`] (over threads above the
/// threshold), each in parts of [`COUNTED_CELLS`] written and then counted.
fn fill_parts<C: Cell, F>(cells: &mut [C], f: F) -> usize
where
    F: Fn(usize, &mut [f64]) + Sync,
{
    let run = |(b, chunk): (usize, &mut [C])| {
        crate::simd::widest(
            #[inline(always)]
            || {
                let mut nnz = 0;
                for (k, part) in chunk.chunks_mut(COUNTED_CELLS).enumerate() {
                    let part = C::values(part);
                    f(b * BLOCK_CELLS + k * COUNTED_CELLS, part);
                    nnz += part.iter().map(|&v| (v != 0.0) as usize).sum::<usize>();
                }
                nnz
            },
        )
    };
    if cells.len() >= PAR_THRESHOLD {
        cells.par_chunks_mut(BLOCK_CELLS).enumerate().map(run).sum()
    } else {
        cells.chunks_mut(BLOCK_CELLS).enumerate().map(run).sum()
    }
}

/// Fills `out` (row-major, `cols` wide) in blocks of whole rows: `f(first_row, block)`. Returns
/// the number of non-zeros written.
pub(crate) fn fill_rows<F>(out: &mut [f64], cols: usize, f: F) -> usize
where
    F: Fn(usize, &mut [f64]) + Sync,
{
    fill_rows_reading(out, cols, cols, f)
}

/// Fills the row-major `out` (`n` columns) by ranges of `width` columns over threads:
/// `f(j0, j1, part)` writes columns `[j0, j1)` of every row into the zeroed `part` (rows of
/// `j1 - j0`), copied into place after (threads writing neighbouring cells of one output row
/// would share its cache lines). The resource error of a part the allocator cannot give.
pub(crate) fn fill_column_ranges<F>(
    out: &mut [f64],
    n: usize,
    width: usize,
    f: F,
) -> crate::Result<()>
where
    F: Fn(usize, usize, &mut [f64]) + Sync,
{
    let rows = out.len() / n.max(1);
    let ranges: Vec<(usize, usize)> = (0..n)
        .step_by(width.max(1))
        .map(|j0| (j0, (j0 + width).min(n)))
        .collect();
    let parts = ranges
        .par_iter()
        .map(|&(j0, j1)| {
            let mut part = crate::matrix::try_alloc_zeroed(rows * (j1 - j0))?;
            f(j0, j1, &mut part);
            Ok(part)
        })
        .collect::<crate::Result<Vec<_>>>()?;
    for (&(j0, j1), part) in ranges.iter().zip(&parts) {
        for (orow, prow) in out.chunks_exact_mut(n).zip(part.chunks_exact(j1 - j0)) {
            orow[j0..j1].copy_from_slice(prow);
        }
    }
    Ok(())
}

/// [`fill_rows`] for a kernel that reads about `read_per_row` values for each output row (a
/// matrix-vector product: a row of the matrix for one output value). Blocks of rows and the
/// decision to run them in parallel follow the larger of what is read and what is written, so
/// a short output of a long input is still split over threads.
pub(crate) fn fill_rows_reading<F>(out: &mut [f64], cols: usize, read_per_row: usize, f: F) -> usize
where
    F: Fn(usize, &mut [f64]) + Sync,
{
    if cols == 0 || out.is_empty() {
        return 0;
    }
    let per_row = cols.max(read_per_row);
    let rows_per_block = (BLOCK_CELLS / per_row).max(1);
    let run = |(b, chunk): (usize, &mut [f64])| {
        crate::simd::widest(
            #[inline(always)]
            || f(b * rows_per_block, chunk),
        );
        crate::matrix::count_nnz_seq(chunk)
    };
    if out.len() / cols * per_row >= PAR_THRESHOLD {
        out.par_chunks_mut(rows_per_block * cols)
            .enumerate()
            .map(run)
            .sum()
    } else {
        out.chunks_mut(rows_per_block * cols)
            .enumerate()
            .map(run)
            .sum()
    }
}

/// Builds a CSR matrix row block by row block: `f(row, &mut col_idx, &mut values)` appends the
/// entries of one row. Runs in parallel when the input work (`work` cells or non-zeros) is large.
pub(crate) fn build_csr<F>(rows: usize, cols: usize, work: usize, f: F) -> SparseMatrix
where
    F: Fn(usize, &mut Vec<u32>, &mut Vec<f64>) + Sync,
{
    let block = |r0: usize, r1: usize| {
        let mut ptr = Vec::with_capacity(r1 - r0);
        let mut idx = Vec::new();
        let mut val = Vec::new();
        for i in r0..r1 {
            f(i, &mut idx, &mut val);
            ptr.push(idx.len());
        }
        (ptr, idx, val)
    };
    let parts: Vec<_> = if work >= PAR_THRESHOLD && rows > 1 {
        // Aim for blocks of about BLOCK_CELLS work each.
        let per_row = (work / rows).max(1);
        let rows_per_block = (BLOCK_CELLS / per_row).clamp(1, rows);
        (0..rows.div_ceil(rows_per_block))
            .into_par_iter()
            .map(|b| block(b * rows_per_block, ((b + 1) * rows_per_block).min(rows)))
            .collect()
    } else {
        vec![block(0, rows)]
    };
    SparseMatrix::concat_row_blocks(rows, cols, parts)
}

#[cfg(test)]
pub(crate) mod testutil {
    //! Helpers shared by the kernel tests.
    use crate::matrix::Matrix;

    /// A matrix from rows of values, in its natural format.
    pub fn m(rows: &[&[f64]]) -> Matrix {
        let r = rows.len();
        let c = rows.first().map_or(0, |x| x.len());
        let vals: Vec<f64> = rows.iter().flat_map(|x| x.iter().copied()).collect();
        Matrix::from_dense_values(r, c, vals).unwrap()
    }

    /// Both formats of the same matrix, each validated.
    pub fn both(x: &Matrix) -> [Matrix; 2] {
        let d = Matrix::Dense(x.to_dense().unwrap());
        let s = Matrix::Sparse(x.to_sparse());
        d.validate().unwrap();
        s.validate().unwrap();
        [d, s]
    }

    /// Cell-wise equality where NaN equals NaN.
    pub fn same(a: &Matrix, b: &Matrix) -> bool {
        if a.shape() != b.shape() {
            return false;
        }
        let (x, y) = (a.to_dense().unwrap().values, b.to_dense().unwrap().values);
        x.iter()
            .zip(&y)
            .all(|(p, q)| p == q || (p.is_nan() && q.is_nan()))
    }

    /// Equality within a relative tolerance (NaN equals NaN, infinities must match).
    pub fn close(a: &Matrix, b: &Matrix, tol: f64) -> bool {
        if a.shape() != b.shape() {
            return false;
        }
        let (x, y) = (a.to_dense().unwrap().values, b.to_dense().unwrap().values);
        x.iter().zip(&y).all(|(p, q)| {
            p == q
                || (p.is_nan() && q.is_nan())
                || (p - q).abs() <= tol * p.abs().max(q.abs()).max(1.0)
        })
    }

    /// Deterministic pseudo-random matrix with the given fraction of non-zeros.
    pub fn rand(rows: usize, cols: usize, density: f64, seed: u64) -> Matrix {
        let mut s = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let mut next = || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 11) as f64 / (1u64 << 53) as f64
        };
        let vals: Vec<f64> = (0..rows * cols)
            .map(|_| {
                if next() < density {
                    next() * 2.0 - 0.5
                } else {
                    0.0
                }
            })
            .collect();
        Matrix::from_dense_values(rows, cols, vals).unwrap()
    }
}
