//! Prefetching the cells a walk over a CSR main input's non-zeros gathers from dense side
//! inputs of its shape (`sum(X * Y)` over a sparse `X` reads `Y` at `X`'s non-zeros only).
//!
//! Where a row of the main input holds few non-zeros, each lands on a cache line of its own in
//! every gathered row, and the lines of consecutive non-zeros lie hundreds of bytes apart: the
//! hardware prefetchers, which follow streams, fetch none of them, and the walk waits for each
//! line in turn (a 1e4 x 1000 `X` at sparsity 0.01 with two such inputs: 20 ns a non-zero on
//! one core, where a stream of the same bytes takes a tenth of that). The skeleton calls the
//! generated walk a chunk of rows at a time and, before each call, asks for the next chunk's
//! lines into the L2 cache (into the L1 they came no sooner: its fill buffers are too few),
//! so that their fetches overlap the current chunk's work: 20 → 12-13 ns a non-zero at 0.01,
//! 8.4 → 7.1 at 0.1, in a scratch program of the same loop (`BENCHMARKS.md`, session 45).
//!
//! Results do not change: the walk over the chunks visits the rows in the same order, and an
//! entry point keeps its aggregates in the task's partial between calls.

use lafuse_runtime::SparseMatrix;

/// The non-zeros of the main input a chunk holds, about: its lines requested at once ahead
/// of the walk stay well within the L2 cache and the prefetch queue keeps a few rows' worth in
/// flight.
const CHUNK_NON_ZEROS: usize = 256;

/// The most rows a chunk holds (very sparse rows would otherwise make one chunk of a task).
const MAX_CHUNK_ROWS: usize = 16;

/// Gathered rows narrower than this many bytes are read whole by the hardware prefetchers
/// (a row's lines are consecutive, and so are the rows), so nothing is prefetched for them.
const MIN_GATHERED_ROW_BYTES: usize = 1024;

/// The dense side inputs a CSR walk gathers, and the chunks it runs in.
pub(crate) struct GatherPrefetch<'a> {
    main: &'a SparseMatrix,
    /// The values of each gathered input (row-major, the main input's shape).
    gathered: Vec<&'a [f64]>,
    /// Rows per call of the walk.
    chunk_rows: usize,
}

impl<'a> GatherPrefetch<'a> {
    /// The prefetching for a walk over `main`'s non-zeros that reads `gathered` (dense
    /// values of the main input's shape) at them; `None` where there is nothing to fetch
    /// ahead: no such input, rows too narrow to escape the hardware prefetchers, or rows so
    /// full that a gathered row is read nearly whole anyway (at least one non-zero per line of
    /// it on average).
    pub(crate) fn new(main: &'a SparseMatrix, gathered: Vec<&'a [f64]>) -> Option<Self> {
        let (m, n) = (main.rows, main.cols);
        let gathered: Vec<&[f64]> = gathered.into_iter().filter(|g| g.len() == m * n).collect();
        let lines_per_row = n / 8;
        let nnz_per_row = main.nnz().div_ceil(m.max(1));
        if gathered.is_empty() || n * 8 < MIN_GATHERED_ROW_BYTES || nnz_per_row > lines_per_row {
            return None;
        }
        let chunk_rows = (CHUNK_NON_ZEROS / nnz_per_row.max(1)).clamp(1, MAX_CHUNK_ROWS);
        Some(GatherPrefetch {
            main,
            gathered,
            chunk_rows,
        })
    }

    /// Runs `walk(r, e)` over the rows `[rl, ru)` a chunk at a time, each call preceded by
    /// the prefetch of the next chunk's gathered lines; the sum of what the calls returned.
    pub(crate) fn for_chunks(
        &self,
        rl: usize,
        ru: usize,
        walk: &mut dyn FnMut(usize, usize) -> u64,
    ) -> u64 {
        let mut total = 0;
        let mut r = rl;
        while r < ru {
            let e = (r + self.chunk_rows).min(ru);
            self.prefetch(e, (e + self.chunk_rows).min(ru));
            total += walk(r, e);
            r = e;
        }
        total
    }

    /// Requests the gathered lines of rows `[rl, ru)` into the L2 cache.
    fn prefetch(&self, rl: usize, ru: usize) {
        let s = self.main;
        let n = s.cols;
        for i in rl..ru {
            let (cols, _) = s.row(i);
            for &j in cols {
                let at = i * n + j as usize;
                for g in &self.gathered {
                    prefetch_l2(g.as_ptr().wrapping_add(at));
                }
            }
        }
    }
}

/// Asks for the line holding `p` into the L2 cache; a hint only (no fault, no effect on
/// values), nothing on other architectures.
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
    use lafuse_runtime::Matrix;

    fn csr(m: usize, n: usize, every: usize) -> SparseMatrix {
        let values: Vec<f64> = (0..m * n)
            .map(|k| if k % every == 0 { 1.0 + k as f64 } else { 0.0 })
            .collect();
        let Matrix::Sparse(s) = Matrix::from_dense_values(m, n, values).unwrap() else {
            panic!("{m} x {n} with a non-zero in {every} stored dense");
        };
        s
    }

    /// Chunks cover the task's rows once, in order, whatever the chunk size; inputs of another
    /// shape are not gathered, and narrow or full rows are left to the hardware.
    #[test]
    fn chunks_cover_the_rows_in_order_and_only_sparse_wide_rows_are_prefetched() {
        let x = csr(100, 1000, 97);
        let y = vec![0.5; 100 * 1000];
        let other = vec![0.5; 10];
        let g = GatherPrefetch::new(&x, vec![&y[..], &other[..]]).unwrap();
        assert_eq!(g.gathered.len(), 1);
        assert_eq!(g.chunk_rows, MAX_CHUNK_ROWS);
        for (rl, ru) in [(0, 100), (3, 41), (7, 7)] {
            let mut seen = Vec::new();
            let total = g.for_chunks(rl, ru, &mut |r, e| {
                assert!(r < e && e - r <= g.chunk_rows);
                seen.extend(r..e);
                (e - r) as u64
            });
            assert_eq!(seen, (rl..ru).collect::<Vec<_>>());
            assert_eq!(total, (ru - rl) as u64);
        }
        assert!(GatherPrefetch::new(&x, vec![&other[..]]).is_none());
        let narrow = csr(100, 100, 97);
        let ny = vec![0.5; 100 * 100];
        assert!(GatherPrefetch::new(&narrow, vec![&ny[..]]).is_none());
        let full = csr(100, 1000, 3);
        assert!(GatherPrefetch::new(&full, vec![&y[..]]).is_none());
    }
}
