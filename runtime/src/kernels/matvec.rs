//! Products of a matrix with a vector, in fixed summation orders that neither the instruction
//! set nor the thread count changes.
//!
//! * `X %*% v`: a dot product per row, four rows at a time: eight lanes a row, combined in one
//!   order, then the tail. An add waits about four cycles for the previous one into the same
//!   accumulator, so the loop keeps eight or more independent sums (four rows' lanes) to run at
//!   the rate the core can add; the next four rows are prefetched as these are read, since
//!   four rows of a narrow matrix are four streams too short for the hardware prefetcher.
//! * `x %*% B` (and so `t(X) %*% y`): every output summed over the rows of `B` in order,
//!   `o += x_i * b_ij` from zero, in column chunks whose sums stay in registers over a block of
//!   rows, with the columns split over threads (each column's sum is the same whichever thread
//!   forms it). A few vectors at once (`t(D) %*% X` for a `D` of few columns) pass over each
//!   block of rows once per vector while it is in cache.

use super::fill_rows_reading;
use crate::matrix::{count_nnz, DenseMatrix, PAR_THRESHOLD};
use rayon::prelude::*;

/// The lanes of a dot product: independent running sums, combined in one fixed order.
const LANES: usize = 8;

/// Dot product with 8 independent lanes (vectorises; fixed combination order).
#[inline]
pub fn dot(x: &[f64], y: &[f64]) -> f64 {
    const L: usize = LANES;
    let mut acc = [0.0f64; L];
    let (xc, yc) = (x.chunks_exact(L), y.chunks_exact(L));
    let (xr, yr) = (xc.remainder(), yc.remainder());
    for (p, q) in xc.zip(yc) {
        for l in 0..L {
            acc[l] += p[l] * q[l];
        }
    }
    let mut s = combine(acc);
    for (p, q) in xr.iter().zip(yr) {
        s += p * q;
    }
    s
}

/// A dot product's eight lanes summed in [`dot`]'s order.
#[inline(always)]
fn combine(l: [f64; 8]) -> f64 {
    ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]))
}

/// [`dot`] of four rows with one vector at once: each row's sum is formed exactly as `dot`
/// forms it (eight lanes, combined as `dot` combines them, then the tail), but the four rows'
/// independent accumulators let one row's adds proceed while another's wait for their
/// previous add (one row alone is bound by the add's latency). Written with intrinsics:
/// LLVM's vectoriser turned the portable form into vectors across the four rows, with a
/// shuffle per value. Every row is `y.len()` long. `next` holds the rows the caller reads next
/// (a hint: they are prefetched as these are read, which changes no result).
pub(crate) fn dot4(rows: [&[f64]; 4], y: &[f64], next: Option<&[f64]>) -> [f64; 4] {
    let n = y.len();
    assert!(rows.iter().all(|r| r.len() == n), "dot4: rows as long as y");
    #[cfg(target_arch = "x86_64")]
    {
        // The columns the vector loops cover: whole chunks of eight lanes.
        let whole = n - n % LANES;
        if std::arch::is_x86_feature_detected!("avx512f") {
            // SAFETY: the CPU has AVX-512F (checked just above); every row and `y` hold
            // `whole` values, a multiple of eight.
            return unsafe { dot4_avx512(rows, y, whole, next) };
        }
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has AVX2 (checked just above); lengths as for AVX-512.
            return unsafe { dot4_avx2(rows, y, whole, next) };
        }
    }
    let _ = next;
    rows.map(|r| dot(r, y))
}

/// Prefetches the line of `next` that the row `r` of four consecutive `n`-long rows is at when
/// its current rows are at column `c` (pointer arithmetic that wraps: a hint never faults).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn prefetch_next(next: Option<&[f64]>, n: usize, c: usize) {
    use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
    if let Some(next) = next {
        for r in 0..4 {
            let at = next.as_ptr().wrapping_add(r * n + c);
            // SAFETY: a prefetch only hints the cache; it neither reads nor faults.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(at.cast()) };
        }
    }
}

/// Asks for the line at `at` in the L2 cache; `at` may lie past any allocation (a prefetch
/// neither reads nor faults).
#[inline(always)]
fn prefetch_l2(at: *const f64) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch only hints the cache; it neither reads nor faults.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T1 }>(at.cast())
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = at;
}

/// The tails of [`dot4`]'s rows after the whole chunks of eight: `dot`'s serial adds.
#[inline(always)]
fn finish(rows: [&[f64]; 4], y: &[f64], lanes: [[f64; 8]; 4], whole: usize) -> [f64; 4] {
    let mut out = [0.0; 4];
    for ((o, l), row) in out.iter_mut().zip(lanes).zip(rows) {
        let mut s = combine(l);
        for j in whole..y.len() {
            s += row[j] * y[j];
        }
        *o = s;
    }
    out
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn dot4_avx512(
    rows: [&[f64]; 4],
    y: &[f64],
    whole: usize,
    next: Option<&[f64]>,
) -> [f64; 4] {
    use std::arch::x86_64::*;
    const L: usize = LANES;
    let mut acc = [_mm512_setzero_pd(); 4];
    let mut c = 0;
    while c < whole {
        prefetch_next(next, y.len(), c);
        // SAFETY: `c + L <= whole`, which every row and `y` hold (`dot4`).
        let q = _mm512_loadu_pd(y.as_ptr().add(c));
        for (a, row) in acc.iter_mut().zip(rows) {
            let p = _mm512_loadu_pd(row.as_ptr().add(c));
            *a = _mm512_add_pd(*a, _mm512_mul_pd(p, q));
        }
        c += L;
    }
    let mut lanes = [[0.0f64; L]; 4];
    for (l, a) in lanes.iter_mut().zip(acc) {
        // SAFETY: `l` holds the eight lanes.
        _mm512_storeu_pd(l.as_mut_ptr(), a);
    }
    finish(rows, y, lanes, whole)
}

/// [`dot4_avx512`] in two four-lane halves: lanes 0-3 and 4-7 of each row accumulate apart,
/// eight independent sums in all, with a multiply then an add (never fused) as `dot` forms them.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn dot4_avx2(rows: [&[f64]; 4], y: &[f64], whole: usize, next: Option<&[f64]>) -> [f64; 4] {
    use std::arch::x86_64::*;
    const L: usize = LANES;
    let mut low = [_mm256_setzero_pd(); 4];
    let mut high = [_mm256_setzero_pd(); 4];
    let mut c = 0;
    while c < whole {
        prefetch_next(next, y.len(), c);
        // SAFETY: `c + L <= whole`, which every row and `y` hold (`dot4`).
        let (ql, qh) = (
            _mm256_loadu_pd(y.as_ptr().add(c)),
            _mm256_loadu_pd(y.as_ptr().add(c + 4)),
        );
        for r in 0..4 {
            let p = rows[r].as_ptr().add(c);
            low[r] = _mm256_add_pd(low[r], _mm256_mul_pd(_mm256_loadu_pd(p), ql));
            high[r] = _mm256_add_pd(high[r], _mm256_mul_pd(_mm256_loadu_pd(p.add(4)), qh));
        }
        c += L;
    }
    let mut lanes = [[0.0f64; L]; 4];
    for (r, l) in lanes.iter_mut().enumerate() {
        // SAFETY: `l` holds the eight lanes, four from each half.
        _mm256_storeu_pd(l.as_mut_ptr(), low[r]);
        _mm256_storeu_pd(l.as_mut_ptr().add(4), high[r]);
    }
    finish(rows, y, lanes, whole)
}

/// `out = a %*% v` for a column vector `v`: one [`dot`] per row, four at a time ([`dot4`]), in
/// blocks of rows sized by `a`'s cells. Returns the non-zeros of `out`.
pub(crate) fn matrix_vector(a: &DenseMatrix, v: &[f64], out: &mut [f64]) -> usize {
    let n = a.cols;
    fill_rows_reading(out, 1, n, |r0, block| {
        let mut quads = block.chunks_exact_mut(4);
        let mut i = r0;
        for q in &mut quads {
            // The next four rows, where the matrix has them (beyond this block too: the
            // block after it is read next, on this thread or another).
            let next = a.values.get((i + 4) * n..(i + 8) * n);
            q.copy_from_slice(&dot4(
                [a.row(i), a.row(i + 1), a.row(i + 2), a.row(i + 3)],
                v,
                next,
            ));
            i += 4;
        }
        for o in quads.into_remainder() {
            *o = dot(a.row(i), v);
            i += 1;
        }
    })
}

/// Columns of `B` whose sums [`vector_matrix`] keeps in registers while it passes over a block
/// of rows: eight AVX2 registers, half the register file.
const VM_CHUNK: usize = 32;

/// Values of `B` in a block of rows that [`vector_matrix`] passes over once per chunk of
/// columns: 256 KiB, which stays in a core's L2 cache between the chunks.
const VM_BLOCK_CELLS: usize = 1 << 15;

/// `out = x %*% b` for a row vector `x` (`b.rows` values), `out` zeroed: every output cell is
/// `o += x_i * b_ij` over the rows `i` in order, from zero, whichever thread forms it (the
/// columns are split over threads). Returns the non-zeros of `out`.
pub(crate) fn vector_matrix(x: &[f64], b: &DenseMatrix, out: &mut [f64]) -> usize {
    let n = b.cols;
    debug_assert!(x.len() == b.rows && out.len() == n);
    let threads = rayon::current_num_threads();
    let columns = |j0: usize, part: &mut [f64]| {
        crate::simd::widest(
            #[inline(always)]
            || vectors_matrix_columns(x, 1, &b.values, n, j0, part),
        )
    };
    if threads > 1 && b.rows * n >= PAR_THRESHOLD && n >= 2 * VM_CHUNK {
        // One part a thread, in whole four-column chunks where the columns allow.
        let width = n.div_ceil(threads).next_multiple_of(4);
        out.par_chunks_mut(width)
            .enumerate()
            .for_each(|(p, part)| columns(p * width, part));
    } else {
        columns(0, out);
    }
    count_nnz(out)
}

/// [`vector_matrix`] for `r` row vectors at once: `out = xs %*% b` for the `r x b.rows`
/// row-major `xs`, into the zeroed `r x b.cols` `out`, each output row summed as
/// [`vector_matrix`] sums it. Each block of `b`'s rows comes from memory once and is passed
/// over from the L2 cache once per vector: `t(D) %*% X` for a `D` of few columns as a
/// general product packed all of `X` and ran the micro-kernel's tiles mostly empty (10000 x
/// 100 `X`, 5 columns: 2.1 ms against numpy's 0.42). Returns the non-zeros of `out`.
pub(crate) fn vectors_matrix(
    xs: &[f64],
    r: usize,
    b: &DenseMatrix,
    out: &mut [f64],
) -> crate::Result<usize> {
    let (m, n) = (b.rows, b.cols);
    debug_assert!(xs.len() == r * m && out.len() == r * n);
    let columns = |j0: usize, part: &mut [f64]| {
        crate::simd::widest(
            #[inline(always)]
            || vectors_matrix_columns(xs, r, &b.values, n, j0, part),
        )
    };
    if r == 1 {
        return Ok(vector_matrix(xs, b, out));
    }
    let threads = rayon::current_num_threads();
    if threads == 1 || m * n * r < PAR_THRESHOLD || n < 2 * VM_CHUNK {
        columns(0, out);
        return Ok(count_nnz(out));
    }
    // A part a thread of whole four-column chunks (a thread's columns of the output rows are
    // not contiguous).
    let width = n.div_ceil(threads).next_multiple_of(4);
    super::fill_column_ranges(out, n, width, |j0, _, part| columns(j0, part))?;
    Ok(count_nnz(out))
}

/// [`vectors_matrix`] for the output columns `j0..j0 + w` of the row-major `bv` (`n` wide),
/// `part` holding `r` rows of `w`: a block of rows at a time, and in it, for each vector, a
/// chunk of columns at a time ([`VM_CHUNK`], then narrower ones for what is left) whose sums
/// run in registers over the block's rows.
///
/// A thread's columns of a row are a few KiB apart from the next row's, too short a run for
/// the hardware prefetchers to follow from memory, so the first vector's chunks prefetch the
/// next block's lines themselves (`t(X) %*% y` over a 100000 x 1000 `X`: 36.4-38.0 ms
/// without, 24.4-25.0 with; a plain read of `X` 15 ms).
#[inline(always)]
fn vectors_matrix_columns(xs: &[f64], r: usize, bv: &[f64], n: usize, j0: usize, part: &mut [f64]) {
    let m = xs.len() / r.max(1);
    let w = part.len() / r.max(1);
    let block_rows = (VM_BLOCK_CELLS / w.max(1)).max(16);
    for i0 in (0..m).step_by(block_rows) {
        let rows = i0..(i0 + block_rows).min(m);
        // The same columns of the next block's rows, prefetched a line per eight values read
        // (none past the last block).
        let ahead = if rows.end < m { block_rows * n } else { 0 };
        for (q, out) in part.chunks_exact_mut(w).enumerate() {
            let x = &xs[q * m..(q + 1) * m];
            let ahead = if q == 0 { ahead } else { 0 };
            let mut done = 0;
            done += column_chunks::<VM_CHUNK>(
                x,
                bv,
                n,
                j0 + done,
                rows.clone(),
                ahead,
                &mut out[done..],
            );
            done += column_chunks::<16>(x, bv, n, j0 + done, rows.clone(), ahead, &mut out[done..]);
            done += column_chunks::<8>(x, bv, n, j0 + done, rows.clone(), ahead, &mut out[done..]);
            done += column_chunks::<4>(x, bv, n, j0 + done, rows.clone(), 0, &mut out[done..]);
            column_chunks::<1>(x, bv, n, j0 + done, rows.clone(), 0, &mut out[done..]);
        }
    }
}

/// Adds `x_i * b_ij` for the rows `rows` into the whole chunks of `W` columns at the start of
/// `out` (the columns from `j0` on), each chunk's sums in registers over the rows. Returns the
/// columns it covered.
#[inline(always)]
fn column_chunks<const W: usize>(
    x: &[f64],
    bv: &[f64],
    n: usize,
    j0: usize,
    rows: std::ops::Range<usize>,
    ahead: usize,
    out: &mut [f64],
) -> usize {
    let len = out.len();
    let mut chunks = out.chunks_exact_mut(W);
    let mut c0 = j0;
    for chunk in &mut chunks {
        let mut acc = [0.0f64; W];
        acc.copy_from_slice(chunk);
        for i in rows.clone() {
            if ahead > 0 {
                for l in (0..W).step_by(8) {
                    prefetch_l2(bv.as_ptr().wrapping_add(i * n + c0 + l + ahead));
                }
            }
            let xv = x[i];
            let row: &[f64; W] = bv[i * n + c0..i * n + c0 + W]
                .try_into()
                .expect("a chunk of W columns");
            for (a, &y) in acc.iter_mut().zip(row) {
                *a += xv * y;
            }
        }
        chunk.copy_from_slice(&acc);
        c0 += W;
    }
    len - chunks.into_remainder().len()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Values with NaN, infinities, signed zeros and subnormals among ordinary ones.
    fn values(len: usize, seed: u64) -> Vec<f64> {
        let mut s = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (0..len)
            .map(|i| {
                s = s
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let u = (s >> 11) as f64 / (1u64 << 53) as f64 - 0.5;
                match (i * 7 + seed as usize) % 41 {
                    0 => f64::NAN,
                    1 => f64::INFINITY,
                    2 => -0.0,
                    3 => 5e-324,
                    4 => f64::NEG_INFINITY,
                    _ => u * 1e3,
                }
            })
            .collect()
    }

    /// The same bits, or both NaN (which NaN an add of two NaNs keeps depends on its operands'
    /// order, which the compiler may swap).
    fn same(a: f64, b: f64) -> bool {
        a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
    }

    #[test]
    fn four_rows_at_once_are_four_dot_products_to_the_bit() {
        for n in [0, 1, 7, 8, 9, 16, 23, 100] {
            let rows: Vec<Vec<f64>> = (0..4).map(|r| values(n, 11 + r)).collect();
            let y = values(n, 5);
            let next: Vec<f64> = rows.concat();
            let got = dot4([&rows[0], &rows[1], &rows[2], &rows[3]], &y, Some(&next));
            let unhinted = dot4([&rows[0], &rows[1], &rows[2], &rows[3]], &y, None);
            assert_eq!(got.map(f64::to_bits), unhinted.map(f64::to_bits));
            for (r, g) in got.iter().enumerate() {
                let want = dot(&rows[r], &y);
                assert!(same(*g, want), "row {r} of length {n}: {g} vs {want}");
            }
        }
    }

    /// `vector_matrix` keeps the definition's order in every column, on every path: blocks of
    /// rows, chunks of every width, the scalar columns and the split over threads (1000 x 100
    /// and wider are past the parallel threshold).
    #[test]
    fn vector_matrix_sums_every_column_in_row_order_to_the_bit() {
        for (m, n) in [
            (0, 3),
            (1, 1),
            (5, 3),
            (7, 4),
            (9, 31),
            (40, 33),
            (17, 61),
            (700, 100),
        ]
        .into_iter()
        .chain([(1000, 100), (2000, 133), (70, 1200)])
        {
            let b = DenseMatrix::new(m, n, values(m * n, 3)).unwrap();
            let x = values(m, 9);
            let mut got = vec![0.0; n];
            vector_matrix(&x, &b, &mut got);
            for (j, g) in got.iter().enumerate() {
                let mut want = 0.0;
                for (i, &xv) in x.iter().enumerate() {
                    want += xv * b.values[i * n + j];
                }
                assert!(same(*g, want), "{m}x{n}, column {j}: {g} vs {want}");
            }
        }
    }
}
