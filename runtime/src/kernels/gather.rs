//! Prefetching the cells a walk over a CSR matrix's non-zeros gathers from dense matrices of
//! its shape (`X * Y` over a sparse `X` and a dense `Y` reads `Y` at `X`'s non-zeros only).
//!
//! Where a row of the CSR matrix holds few non-zeros, each lands on a cache line of its own in
//! every gathered row, and the lines of consecutive non-zeros lie hundreds of bytes apart: the
//! hardware prefetchers, which follow streams, fetch none of them, and the walk waits for each
//! line in turn (a 1e4 x 1000 `X` at sparsity 0.01 with two such matrices: 20 ns a non-zero on
//! one core, where a stream of the same bytes takes a tenth of that). A walk that runs in
//! chunks of rows and asks, before each chunk, for the next chunk's lines into the L2 cache
//! overlaps their fetches with its work: 20 → 12-13 ns a non-zero at 0.01 in a scratch
//! program of the same loop (`benchmarks/2026-11-29-s45-gathers/`); at 0.1, where a row's
//! non-zeros touch most of a gathered row's lines and the hardware fetches the rest, 8.4 → 7.1
//! in one run and no change in another. Into the L1 (`T0`) they came no sooner, and at 0.1
//! later (its fill buffers are too few). A hint only: no value changes.

use crate::matrix::SparseMatrix;

/// The non-zeros a chunk holds, about: the lines requested at once ahead of the walk stay
/// well within the L2 cache.
const CHUNK_NON_ZEROS: usize = 256;

/// The most rows a chunk holds (very sparse rows would otherwise make one chunk of a task).
const MAX_CHUNK_ROWS: usize = 16;

/// Gathered rows narrower than this many bytes are read whole by the hardware prefetchers (a
/// row's lines are consecutive, and so are the rows), so nothing is prefetched for them.
const MIN_GATHERED_ROW_BYTES: usize = 1024;

/// The rows of `s` a walk that gathers from dense matrices of its shape runs per chunk, or
/// `None` where prefetching fetches nothing the hardware would not: rows too narrow, or so
/// full (at least one non-zero per cache line of a gathered row, on average) that a gathered
/// row is read nearly whole anyway.
pub fn gather_chunk_rows(s: &SparseMatrix) -> Option<usize> {
    let (m, n) = (s.rows, s.cols);
    let nnz_per_row = s.nnz().div_ceil(m.max(1));
    if n.saturating_mul(8) < MIN_GATHERED_ROW_BYTES || nnz_per_row > n / 8 {
        return None;
    }
    Some((CHUNK_NON_ZEROS / nnz_per_row.max(1)).clamp(1, MAX_CHUNK_ROWS))
}

/// Requests into the L2 cache the lines of each of `gathered` (row-major values of `s`'s
/// shape) that hold a cell where `s`'s rows `[rl, ru)` hold a non-zero.
pub fn prefetch_gathered(s: &SparseMatrix, rl: usize, ru: usize, gathered: &[&[f64]]) {
    let n = s.cols;
    for i in rl..ru.min(s.rows) {
        let (cols, _) = s.row(i);
        for &j in cols {
            let at = i * n + j as usize;
            for g in gathered {
                prefetch_l2(g.as_ptr().wrapping_add(at));
            }
        }
    }
}

/// Asks for the line holding `p` into the L2 cache: a hint (no fault, no effect on values),
/// nothing on other architectures.
#[inline(always)]
fn prefetch_l2(p: *const f64) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch reads nothing the program sees and never faults, whatever the address.
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T1};
        _mm_prefetch::<_MM_HINT_T1>(p as *const i8);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Matrix;

    fn csr(m: usize, n: usize, every: usize) -> SparseMatrix {
        let values: Vec<f64> = (0..m * n)
            .map(|k| if k % every == 0 { 1.0 + k as f64 } else { 0.0 })
            .collect();
        let Matrix::Sparse(s) = Matrix::from_dense_values(m, n, values).unwrap() else {
            panic!("{m} x {n} with a non-zero in {every} stored dense");
        };
        s
    }

    /// Wide rows with fewer non-zeros than lines are prefetched, in chunks of about
    /// [`CHUNK_NON_ZEROS`] non-zeros (at most [`MAX_CHUNK_ROWS`] rows); narrow rows and rows
    /// with a non-zero in most lines are left to the hardware.
    #[test]
    fn only_wide_rows_with_fewer_non_zeros_than_lines_are_prefetched() {
        assert_eq!(gather_chunk_rows(&csr(100, 1000, 97)), Some(MAX_CHUNK_ROWS));
        assert_eq!(gather_chunk_rows(&csr(100, 1000, 10)), Some(2));
        assert_eq!(gather_chunk_rows(&csr(100, 100, 97)), None);
        assert_eq!(gather_chunk_rows(&csr(100, 1000, 3)), None);
        // A prefetch past every cell or of an empty range touches nothing.
        let s = csr(100, 1000, 97);
        prefetch_gathered(&s, 90, 200, &[&[0.0; 4][..]]);
        prefetch_gathered(&s, 5, 5, &[]);
    }
}
