//! A Cell or MultiAgg walk over a CSR main input's non-zeros that gathers dense side inputs of
//! its shape, run a chunk of rows per call with the next chunk's gathered lines prefetched
//! first (`lafuse_runtime::kernels::gather`: why, and when it pays).
//!
//! Results do not change: the chunks visit the rows in order, and an entry point keeps its
//! aggregates in the task's partial between calls.

use lafuse_runtime::kernels::gather::{gather_chunk_rows, prefetch_gathered};
use lafuse_runtime::SparseMatrix;

/// The dense side inputs a CSR walk gathers, and the chunks it runs in.
pub(crate) struct GatherPrefetch<'a> {
    main: &'a SparseMatrix,
    /// The values of each gathered input (row-major, the main input's shape).
    gathered: Vec<&'a [f64]>,
    /// Rows per call of the walk.
    chunk_rows: usize,
}

impl<'a> GatherPrefetch<'a> {
    /// The prefetching for a walk over `main`'s non-zeros that reads `gathered` at them (those
    /// of the main input's size; others are not gathered); `None` where there is nothing to
    /// fetch ahead ([`gather_chunk_rows`]).
    pub(crate) fn new(main: &'a SparseMatrix, gathered: Vec<&'a [f64]>) -> Option<Self> {
        let cells = main.rows.checked_mul(main.cols)?;
        let gathered: Vec<&[f64]> = gathered.into_iter().filter(|g| g.len() == cells).collect();
        if gathered.is_empty() {
            return None;
        }
        Some(GatherPrefetch {
            main,
            gathered,
            chunk_rows: gather_chunk_rows(main)?,
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
            let next = (e + self.chunk_rows).min(ru);
            prefetch_gathered(self.main, e, next, &self.gathered);
            total += walk(r, e);
            r = e;
        }
        total
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lafuse_runtime::Matrix;

    /// Chunks cover a task's rows once, in order; inputs of another size are not gathered.
    #[test]
    fn chunks_cover_the_rows_in_order_and_only_inputs_of_the_main_shape_are_gathered() {
        let values: Vec<f64> = (0..100 * 1000)
            .map(|k| if k % 97 == 0 { 1.0 } else { 0.0 })
            .collect();
        let Matrix::Sparse(x) = Matrix::from_dense_values(100, 1000, values).unwrap() else {
            panic!("a 1 % dense matrix stored dense");
        };
        let y = vec![0.5; 100 * 1000];
        let other = [0.5; 10];
        let g = GatherPrefetch::new(&x, vec![&y[..], &other[..]]).unwrap();
        assert_eq!(g.gathered.len(), 1);
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
    }
}
