//! Aggregations (`sum`, `mean`, `var`, `rowSums`, `colMaxs`, ...) over all cells, each row or
//! each column.
//!
//! Sums are Kahan-compensated like SystemDS's `uak+`. Full reductions split the cells into blocks
//! of fixed size (independent of the thread count), reduce each block with several independent
//! accumulator lanes (so the loop is not latency bound and vectorises), and merge the partials in
//! block order: results are bit-identical whatever the number of threads. Sparse inputs only
//! visit their non-zeros; the implicit zeros are accounted for in one step (they matter for
//! `mean`, `prod`, `min`, `max`, `var`).

use super::dense_result;
use crate::error::Result;
use crate::matrix::{all_finite, Matrix, BLOCK_CELLS, PAR_THRESHOLD};
use crate::ops::{AggOp, Direction};
use rayon::prelude::*;

/// A Kahan-compensated running sum. `corr` holds the negated low-order bits lost so far.
///
/// Non-finite intermediate values reset the correction (as SystemDS's `KahanPlus` does), so a sum
/// that reaches ±Inf stays ±Inf instead of turning into NaN through `Inf - Inf` in the
/// correction term.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Kahan {
    pub sum: f64,
    pub corr: f64,
}

impl Kahan {
    /// Adds one value.
    #[inline(always)]
    pub fn add(&mut self, x: f64) {
        let y = x - self.corr;
        let t = self.sum + y;
        let c = (t - self.sum) - y;
        // Branch-free so that lane loops still vectorise.
        self.corr = if c.is_finite() { c } else { 0.0 };
        self.sum = t;
    }

    /// Adds another partial sum (its value and its correction).
    #[inline]
    pub fn merge(&mut self, o: Kahan) {
        self.add(o.sum);
        self.add(-o.corr);
    }
}

/// Reduces a slice with `L` independent Kahan lanes, merged in lane order.
#[inline(always)]
fn kahan_lanes<const L: usize, G: Fn(f64) -> f64>(x: &[f64], g: G) -> Kahan {
    if x.len() < L {
        // No whole chunk: every lane would stay (0, 0), and merging such a lane into an
        // accumulator that is still (0, 0) leaves it so; the sequential sum is the same value
        // without the 2L dependent adds of the merges (most of a short row's time: rowSums of
        // a 10000 x 1 matrix ran at 47 ns a row).
        let mut acc = Kahan::default();
        for &v in x {
            acc.add(g(v));
        }
        return acc;
    }
    let mut s = [0.0f64; L];
    let mut c = [0.0f64; L];
    let mut it = x.chunks_exact(L);
    for ch in &mut it {
        let ch: &[f64; L] = ch.try_into().expect("chunks_exact yields L values");
        for l in 0..L {
            let y = g(ch[l]) - c[l];
            let t = s[l] + y;
            let cn = (t - s[l]) - y;
            c[l] = if cn.is_finite() { cn } else { 0.0 };
            s[l] = t;
        }
    }
    let mut acc = Kahan::default();
    for l in 0..L {
        acc.merge(Kahan {
            sum: s[l],
            corr: c[l],
        });
    }
    for &v in it.remainder() {
        acc.add(g(v));
    }
    acc
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn kahan_avx512<G: Fn(f64) -> f64>(x: &[f64], g: G) -> Kahan {
    kahan_lanes::<64, G>(x, g)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn kahan_avx2<G: Fn(f64) -> f64>(x: &[f64], g: G) -> Kahan {
    kahan_lanes::<16, G>(x, g)
}

/// Kahan sum of `g(x)` over a slice, using the widest vector unit this CPU has. (The lane count,
/// and so the last bits of the result, depend on the CPU, never on the thread count.)
pub fn kahan_sum<G: Fn(f64) -> f64>(x: &[f64], g: G) -> Kahan {
    #[cfg(target_arch = "x86_64")]
    {
        if x.len() >= 128 {
            if std::arch::is_x86_feature_detected!("avx512f") {
                // SAFETY: the CPU supports AVX-512F (checked just above).
                return unsafe { kahan_avx512(x, g) };
            }
            if std::arch::is_x86_feature_detected!("avx2") {
                // SAFETY: the CPU supports AVX2 (checked just above).
                return unsafe { kahan_avx2(x, g) };
            }
        }
    }
    kahan_lanes::<8, G>(x, g)
}

/// One aggregation's accumulator: how to start, add one value, add a slice, merge two partials,
/// and account for implicit zeros.
trait Reducer: Sync + Send + Copy {
    type S: Copy + Send + Sync;
    fn init(self) -> Self::S;
    fn add(self, s: &mut Self::S, x: f64);
    fn merge(self, s: &mut Self::S, o: Self::S);
    fn slice(self, x: &[f64]) -> Self::S;
    fn zeros(self, s: &mut Self::S, count: usize);
}

/// Kahan sum of `g(x)`.
#[derive(Clone, Copy)]
struct KSum<G>(G);

impl<G: Fn(f64) -> f64 + Sync + Send + Copy> Reducer for KSum<G> {
    type S = Kahan;
    fn init(self) -> Kahan {
        Kahan::default()
    }
    #[inline(always)]
    fn add(self, s: &mut Kahan, x: f64) {
        s.add((self.0)(x))
    }
    fn merge(self, s: &mut Kahan, o: Kahan) {
        s.merge(o)
    }
    fn slice(self, x: &[f64]) -> Kahan {
        kahan_sum(x, self.0)
    }
    fn zeros(self, s: &mut Kahan, count: usize) {
        let z = (self.0)(0.0);
        if count > 0 && z != 0.0 {
            s.add(z * count as f64);
        }
    }
}

/// Product. The state remembers whether a zero and whether a non-finite value were seen, so
/// the result does not depend on the order of multiplication: with a zero present the product
/// is 0 (even if the other factors overflow to infinity on the way), or NaN if an infinity or
/// NaN is among the factors (IEEE `0 * Inf`); without zeros it is the plain product.
#[derive(Clone, Copy)]
struct Prod;

#[derive(Clone, Copy)]
struct ProdState {
    product: f64,
    zero: bool,
    non_finite: bool,
}

impl ProdState {
    fn value(self) -> f64 {
        match (self.zero, self.non_finite) {
            (true, true) => f64::NAN,
            (true, false) => 0.0,
            (false, _) => self.product,
        }
    }
}

impl Reducer for Prod {
    type S = ProdState;
    fn init(self) -> ProdState {
        ProdState {
            product: 1.0,
            zero: false,
            non_finite: false,
        }
    }
    #[inline(always)]
    fn add(self, s: &mut ProdState, x: f64) {
        s.product *= x;
        s.zero |= x == 0.0;
        s.non_finite |= !x.is_finite();
    }
    fn merge(self, s: &mut ProdState, o: ProdState) {
        s.product *= o.product;
        s.zero |= o.zero;
        s.non_finite |= o.non_finite;
    }
    fn slice(self, x: &[f64]) -> ProdState {
        ProdState {
            product: lanes_fold::<8>(x, 1.0, |a, b| a * b),
            zero: x.contains(&0.0),
            non_finite: !all_finite(x),
        }
    }
    fn zeros(self, s: &mut ProdState, count: usize) {
        s.zero |= count > 0;
    }
}

#[inline(always)]
fn nan_min(s: f64, x: f64) -> f64 {
    // Once NaN, stays NaN (neither comparison is true); a NaN x replaces s.
    if x < s || x.is_nan() {
        x
    } else {
        s
    }
}

#[inline(always)]
fn nan_max(s: f64, x: f64) -> f64 {
    if x > s || x.is_nan() {
        x
    } else {
        s
    }
}

/// Minimum (`MAX == false`) or maximum (`MAX == true`); NaN wins, implicit zeros count.
#[derive(Clone, Copy)]
struct Extreme<const MAX: bool>;

impl<const MAX: bool> Extreme<MAX> {
    #[inline(always)]
    fn pick(s: f64, x: f64) -> f64 {
        if MAX {
            nan_max(s, x)
        } else {
            nan_min(s, x)
        }
    }
}

impl<const MAX: bool> Reducer for Extreme<MAX> {
    type S = f64;
    fn init(self) -> f64 {
        if MAX {
            f64::NEG_INFINITY
        } else {
            f64::INFINITY
        }
    }
    #[inline(always)]
    fn add(self, s: &mut f64, x: f64) {
        *s = Self::pick(*s, x)
    }
    fn merge(self, s: &mut f64, o: f64) {
        *s = Self::pick(*s, o)
    }
    fn slice(self, x: &[f64]) -> f64 {
        lanes_extreme::<8, MAX>(x)
    }
    fn zeros(self, s: &mut f64, count: usize) {
        if count > 0 {
            *s = Self::pick(*s, 0.0)
        }
    }
}

/// The maximum (`MAX`) or minimum of a slice, NaN if any value is NaN (as folding with
/// [`nan_max`]/[`nan_min`] gives). The lanes use a branch-free select and a separate NaN flag so
/// the loop compiles to packed compares and blends; `nan_max` itself would branch per value.
#[inline(always)]
fn lanes_extreme<const L: usize, const MAX: bool>(x: &[f64]) -> f64 {
    let init = if MAX {
        f64::NEG_INFINITY
    } else {
        f64::INFINITY
    };
    let pick = if MAX { nan_max } else { nan_min };
    if x.len() < L {
        // No whole chunk: every lane would stay at `init`, which picking leaves as it is, so
        // the fold from `init` is the same value without the lanes' L dependent picks (most
        // of a short row's time: rowMaxs of a 10000 x 2 matrix ran at 25 ns a row; dense
        // rows that short now take `narrow_dense_rows`, sparse rows and short slices this).
        return x.iter().fold(init, |r, &v| pick(r, v));
    }
    let mut acc = [init; L];
    let mut nan = [false; L];
    let mut it = x.chunks_exact(L);
    for ch in &mut it {
        let ch: &[f64; L] = ch.try_into().expect("chunks_exact yields L values");
        for l in 0..L {
            let v = ch[l];
            let better = if MAX { v > acc[l] } else { v < acc[l] };
            acc[l] = if better { v } else { acc[l] };
            nan[l] |= v.is_nan();
        }
    }
    let mut r = init;
    for (a, n) in acc.into_iter().zip(nan) {
        r = pick(r, if n { f64::NAN } else { a });
    }
    it.remainder().iter().fold(r, |r, &v| pick(r, v))
}

/// Folds a slice with `L` independent lanes combined in lane order.
#[inline(always)]
fn lanes_fold<const L: usize>(x: &[f64], init: f64, f: impl Fn(f64, f64) -> f64) -> f64 {
    let mut acc = [init; L];
    let mut it = x.chunks_exact(L);
    for ch in &mut it {
        let ch: &[f64; L] = ch.try_into().expect("chunks_exact yields L values");
        for l in 0..L {
            acc[l] = f(acc[l], ch[l]);
        }
    }
    let mut r = init;
    for a in acc {
        r = f(r, a);
    }
    for &v in it.remainder() {
        r = f(r, v);
    }
    r
}

/// Reduces all values (fixed blocks, partials merged in block order) plus `zeros` implicit zeros.
fn full<R: Reducer>(r: R, vals: &[f64], zeros: usize) -> R::S {
    let mut s = r.init();
    if vals.len() <= BLOCK_CELLS {
        // One block: the same result as the general path, without allocating.
        r.merge(&mut s, r.slice(vals));
        r.zeros(&mut s, zeros);
        return s;
    }
    let parts: Vec<R::S> = if vals.len() >= PAR_THRESHOLD {
        vals.par_chunks(BLOCK_CELLS).map(|c| r.slice(c)).collect()
    } else {
        vals.chunks(BLOCK_CELLS).map(|c| r.slice(c)).collect()
    };
    for p in parts {
        r.merge(&mut s, p);
    }
    r.zeros(&mut s, zeros);
    s
}

/// Row aggregates of a dense matrix whose rows are shorter than the lanes of
/// [`kahan_sum`] and [`lanes_extreme`] (fewer than [`NARROW_ROW`] columns), in one loop over
/// the rows with each row's work inlined, so that the out-of-order core overlaps the rows'
/// dependent adds; `None` for any other matrix or aggregation. Each row gives exactly what
/// [`reduce_one`] gives it (a Kahan sum of the row merged into an empty one; the fold of the
/// row's picks from the initial value), since a row that short takes their sequential paths
/// (10000 x 5 `rowSums`, KMeans' `rowSums(P)`: 13 ns a row through `reduce_one`).
fn narrow_dense_rows(a: &Matrix, op: AggOp) -> Option<Vec<f64>> {
    let Matrix::Dense(d) = a else {
        return None;
    };
    let cols = d.cols;
    if cols == 0 || cols >= NARROW_ROW || d.values.len() >= PAR_THRESHOLD {
        return None;
    }
    let rows = d.values.chunks_exact(cols);
    Some(match op {
        AggOp::Sum => rows.map(|r| narrow_row_sum(r, |x| x)).collect(),
        AggOp::SumSq => rows.map(|r| narrow_row_sum(r, |x| x * x)).collect(),
        AggOp::Mean => rows
            .map(|r| narrow_row_sum(r, |x| x) / cols as f64)
            .collect(),
        AggOp::Min => rows
            .map(|r| r.iter().fold(f64::INFINITY, |m, &v| nan_min(m, v)))
            .collect(),
        AggOp::Max => rows
            .map(|r| r.iter().fold(f64::NEG_INFINITY, |m, &v| nan_max(m, v)))
            .collect(),
        _ => return None,
    })
}

/// One short row's sum of `g(x)`, as [`reduce_one`] forms it: the row's sequential Kahan sum
/// merged into an empty one.
#[inline(always)]
fn narrow_row_sum(row: &[f64], g: impl Fn(f64) -> f64) -> f64 {
    let mut acc = Kahan::default();
    for &v in row {
        acc.add(g(v));
    }
    let mut s = Kahan::default();
    s.merge(acc);
    s.sum
}

/// Rows shorter than this take [`narrow_dense_rows`]: the lanes of [`kahan_lanes`] (below
/// 128 values) and of [`lanes_extreme`], whose rows of fewer values run sequentially.
const NARROW_ROW: usize = 8;

/// Per-row reduction: `f(i, values of row i, implicit zeros in row i)` for every row.
fn per_row<T: Send>(a: &Matrix, f: impl Fn(usize, &[f64], usize) -> T + Sync) -> Vec<T> {
    let (rows, cols) = a.shape();
    let one = |i: usize| match a {
        Matrix::Dense(d) => f(i, d.row(i), 0),
        Matrix::Sparse(s) => {
            let (_, v) = s.row(i);
            f(i, v, cols - v.len())
        }
    };
    let work = a.cells().max(a.nnz());
    if work >= PAR_THRESHOLD {
        let min_len = (BLOCK_CELLS / cols.max(1)).max(1);
        (0..rows)
            .into_par_iter()
            .with_min_len(min_len)
            .map(one)
            .collect()
    } else {
        (0..rows).map(one).collect()
    }
}

/// Column widths above which column aggregates split the columns (rather than the rows) over
/// threads.
const COL_SPLIT: usize = 1024;

/// Width of the column ranges when columns are split over threads: as wide as possible (long
/// contiguous runs per row keep the hardware prefetcher busy) while giving every thread two
/// tasks.
fn col_chunk_width(cols: usize) -> usize {
    cols.div_ceil(2 * rayon::current_num_threads())
        .max(COL_SPLIT / 4)
}

/// Rows per block of a column reduction. Fixed, so that a column's result depends on its own
/// values only: not on the thread count, nor on how many columns share the matrix (partial
/// reuse computes the column aggregates of `cbind(X, dX)` part by part and must match).
const COL_BLOCK_ROWS: usize = 1024;

/// The driver of every dense column reduction: each column is reduced block of
/// [`COL_BLOCK_ROWS`] rows by block (`block(r0, r1, c0, c1)` reduces rows `r0..r1` of columns
/// `c0..c1` from `init`), and the blocks' partials are merged into `init` in row order. Only
/// the split over threads (by columns when wide, else by row blocks) depends on the shape.
fn reduce_col_blocks<S, B, M>(
    rows: usize,
    cols: usize,
    parallel: bool,
    init: S,
    block: B,
    merge: M,
) -> Vec<S>
where
    S: Copy + Send + Sync,
    B: Fn(usize, usize, usize, usize) -> Vec<S> + Sync,
    M: Fn(&mut S, S) + Sync,
{
    let nblocks = rows.div_ceil(COL_BLOCK_ROWS);
    let rows_of = |b: usize| (b * COL_BLOCK_ROWS, ((b + 1) * COL_BLOCK_ROWS).min(rows));
    let merge_all = |acc: &mut [S], partial: Vec<S>| {
        for (s, o) in acc.iter_mut().zip(partial) {
            merge(s, o);
        }
    };
    let columns = |c0: usize, c1: usize| {
        let mut acc = vec![init; c1 - c0];
        for b in 0..nblocks {
            let (r0, r1) = rows_of(b);
            merge_all(&mut acc, block(r0, r1, c0, c1));
        }
        acc
    };
    if !parallel {
        return columns(0, cols);
    }
    if cols >= 2 * COL_SPLIT {
        let w = col_chunk_width(cols);
        let chunks: Vec<Vec<S>> = (0..cols.div_ceil(w))
            .into_par_iter()
            .map(|c| columns(c * w, ((c + 1) * w).min(cols)))
            .collect();
        return chunks.into_iter().flatten().collect();
    }
    let parts: Vec<Vec<S>> = (0..nblocks)
        .into_par_iter()
        .map(|b| {
            let (r0, r1) = rows_of(b);
            block(r0, r1, 0, cols)
        })
        .collect();
    let mut acc = vec![init; cols];
    for p in parts {
        merge_all(&mut acc, p);
    }
    acc
}

/// Per-column reduction of `g(j, x)` with reducer `r`, including implicit zeros (for which `g` is
/// not called: `r.zeros` accounts for them, so callers whose `g` maps 0 to non-zero must pass
/// `zero_value` to add instead).
fn per_col<R: Reducer>(
    r: R,
    a: &Matrix,
    g: impl Fn(usize, f64) -> f64 + Sync,
    zero_value: impl Fn(usize) -> Option<f64> + Sync,
) -> Vec<R::S> {
    let (rows, cols) = a.shape();
    let mut acc: Vec<R::S> = match a {
        Matrix::Dense(d) => {
            let block = |r0: usize, r1: usize, c0: usize, c1: usize| {
                let mut acc = vec![r.init(); c1 - c0];
                for i in r0..r1 {
                    let row = &d.values[i * cols + c0..i * cols + c1];
                    for (k, (s, &x)) in acc.iter_mut().zip(row).enumerate() {
                        r.add(s, g(c0 + k, x));
                    }
                }
                acc
            };
            let parallel = a.cells() >= PAR_THRESHOLD;
            reduce_col_blocks(rows, cols, parallel, r.init(), block, |s, o| r.merge(s, o))
        }
        Matrix::Sparse(s) => {
            let mut acc = vec![r.init(); cols];
            let mut count = vec![0usize; cols];
            for (&j, &v) in s.col_idx.iter().zip(&s.values) {
                let j = j as usize;
                r.add(&mut acc[j], g(j, v));
                count[j] += 1;
            }
            for (j, (s, c)) in acc.iter_mut().zip(count).enumerate() {
                match zero_value(j) {
                    Some(z) if rows > c => r.add(s, z * (rows - c) as f64),
                    Some(_) => {}
                    None => r.zeros(s, rows - c),
                }
            }
            acc
        }
    };
    acc.shrink_to_fit();
    acc
}

/// Column Kahan sums of `x`, `x^2` (`square`) or `(x - shift[j])^2` over a dense matrix, with the
/// sums and corrections kept in separate arrays so the row loop vectorises across columns. Same
/// partitioning as [`per_col`] ([`reduce_col_blocks`]).
fn col_kahan_dense(
    d: &crate::matrix::DenseMatrix,
    square: bool,
    shift: Option<&[f64]>,
) -> Vec<Kahan> {
    let (rows, cols) = (d.rows, d.cols);
    let block = |r0: usize, r1: usize, c0: usize, c1: usize| {
        let w = c1 - c0;
        let mut s = vec![0.0f64; w];
        let mut c = vec![0.0f64; w];
        let zero = vec![0.0f64; w];
        let sh = shift.map_or(&zero[..], |v| &v[c0..c1]);
        for i in r0..r1 {
            let row = &d.values[i * cols + c0..i * cols + c1];
            for (((sj, cj), &x), &m) in s.iter_mut().zip(c.iter_mut()).zip(row).zip(sh) {
                let v = if square || shift.is_some() {
                    (x - m) * (x - m)
                } else {
                    x
                };
                let y = v - *cj;
                let t = *sj + y;
                let cn = (t - *sj) - y;
                *cj = if cn.is_finite() { cn } else { 0.0 };
                *sj = t;
            }
        }
        s.iter()
            .zip(&c)
            .map(|(&sum, &corr)| Kahan { sum, corr })
            .collect::<Vec<_>>()
    };
    let parallel = rows * cols >= PAR_THRESHOLD;
    reduce_col_blocks(rows, cols, parallel, Kahan::default(), block, |a, o| {
        a.merge(o)
    })
}

/// Sample variance from the number of cells and the sum of squared deviations.
fn variance(n: usize, m2: f64) -> f64 {
    match n {
        0 => f64::NAN,
        1 => 0.0,
        _ => m2 / (n - 1) as f64,
    }
}

/// Reduces one slice (plus implicit zeros) to the aggregate's value. Inlined, so that a row
/// loop with a constant `op` keeps only its arm.
#[inline(always)]
fn reduce_one(op: AggOp, vals: &[f64], zeros: usize) -> f64 {
    let n = vals.len() + zeros;
    match op {
        AggOp::Sum => full(KSum(|x| x), vals, zeros).sum,
        AggOp::SumSq => full(KSum(|x| x * x), vals, zeros).sum,
        AggOp::Mean => full(KSum(|x| x), vals, zeros).sum / n as f64,
        AggOp::Prod => full(Prod, vals, zeros).value(),
        AggOp::Min => full(Extreme::<false>, vals, zeros),
        AggOp::Max => full(Extreme::<true>, vals, zeros),
        AggOp::Var | AggOp::Sd => {
            let mean = full(KSum(|x| x), vals, zeros).sum / n as f64;
            let m2 = full(KSum(move |x: f64| (x - mean) * (x - mean)), vals, zeros).sum;
            let v = variance(n, m2);
            if op == AggOp::Sd {
                v.sqrt()
            } else {
                v
            }
        }
    }
}

/// Aggregates `a`: `Full` gives 1x1, `Row` gives `rows x 1`, `Col` gives `1 x cols`.
///
/// Semantics (as SystemDS): sums and means are Kahan-compensated; `var`/`sd` are sample
/// statistics (`n - 1` denominator; 0 for a single cell, NaN for none); `min`/`max` propagate NaN
/// and include implicit zeros. Over no cells: sum 0, prod 1, mean NaN, min +Inf, max -Inf.
///
/// ```
/// use lafuse_runtime::{Matrix, kernels, ops::{AggOp, Direction}};
/// let x = Matrix::from_dense_values(2, 2, vec![1.0, 2.0, 3.0, 4.0]).unwrap();
/// let s = kernels::aggregate(&x, AggOp::Sum, Direction::Col).unwrap();
/// assert_eq!(s.into_dense_values().unwrap(), vec![4.0, 6.0]);
/// ```
pub fn aggregate(a: &Matrix, op: AggOp, dir: Direction) -> Result<Matrix> {
    let (rows, cols) = a.shape();
    match dir {
        Direction::Full => {
            let v = match a {
                Matrix::Dense(d) => reduce_one(op, &d.values, 0),
                Matrix::Sparse(s) => reduce_one(op, &s.values, a.cells() - s.nnz()),
            };
            Ok(Matrix::scalar(v))
        }
        Direction::Row => {
            if let Some(out) = narrow_dense_rows(a, op) {
                return Ok(vector_result(rows, 1, out));
            }
            // The common aggregations with the op a constant in each row loop, so that
            // `reduce_one`'s match folds away there (rows of one or two values spent most of
            // their time in the calls around their few adds).
            let out = match op {
                AggOp::Sum => per_row(a, |_, v, z| reduce_one(AggOp::Sum, v, z)),
                AggOp::SumSq => per_row(a, |_, v, z| reduce_one(AggOp::SumSq, v, z)),
                AggOp::Mean => per_row(a, |_, v, z| reduce_one(AggOp::Mean, v, z)),
                AggOp::Min => per_row(a, |_, v, z| reduce_one(AggOp::Min, v, z)),
                AggOp::Max => per_row(a, |_, v, z| reduce_one(AggOp::Max, v, z)),
                _ => per_row(a, |_, v, z| reduce_one(op, v, z)),
            };
            Ok(vector_result(rows, 1, out))
        }
        Direction::Col
            if !a.is_sparse()
                && matches!(
                    op,
                    AggOp::Sum | AggOp::SumSq | AggOp::Mean | AggOp::Var | AggOp::Sd
                ) =>
        {
            let d = a.dense_cow()?;
            let n = rows as f64;
            let sums: Vec<f64> = col_kahan_dense(&d, op == AggOp::SumSq, None)
                .iter()
                .map(|k| k.sum)
                .collect();
            let out: Vec<f64> = match op {
                AggOp::Sum | AggOp::SumSq => sums,
                AggOp::Mean => sums.iter().map(|s| s / n).collect(),
                _ => {
                    let means: Vec<f64> = sums.iter().map(|s| s / n).collect();
                    col_kahan_dense(&d, true, Some(&means))
                        .iter()
                        .map(|k| {
                            let v = variance(rows, k.sum);
                            if op == AggOp::Sd {
                                v.sqrt()
                            } else {
                                v
                            }
                        })
                        .collect()
                }
            };
            Ok(vector_result(1, cols, out))
        }
        Direction::Col => {
            let n = rows as f64;
            let out: Vec<f64> = match op {
                AggOp::Sum => per_col(KSum(|x| x), a, |_, x| x, |_| None)
                    .iter()
                    .map(|k| k.sum)
                    .collect(),
                AggOp::SumSq => per_col(KSum(|x| x), a, |_, x| x * x, |_| None)
                    .iter()
                    .map(|k| k.sum)
                    .collect(),
                AggOp::Mean => per_col(KSum(|x| x), a, |_, x| x, |_| None)
                    .iter()
                    .map(|k| k.sum / n)
                    .collect(),
                AggOp::Prod => per_col(Prod, a, |_, x| x, |_| None)
                    .iter()
                    .map(|p| p.value())
                    .collect(),
                AggOp::Min => per_col(Extreme::<false>, a, |_, x| x, |_| None),
                AggOp::Max => per_col(Extreme::<true>, a, |_, x| x, |_| None),
                AggOp::Var | AggOp::Sd => {
                    let means: Vec<f64> = per_col(KSum(|x| x), a, |_, x| x, |_| None)
                        .iter()
                        .map(|k| k.sum / n)
                        .collect();
                    let m2 = per_col(
                        KSum(|x| x),
                        a,
                        |j, x| (x - means[j]) * (x - means[j]),
                        |j| Some(means[j] * means[j]),
                    );
                    m2.iter()
                        .map(|k| {
                            let v = variance(rows, k.sum);
                            if op == AggOp::Sd {
                                v.sqrt()
                            } else {
                                v
                            }
                        })
                        .collect()
                }
            };
            Ok(vector_result(1, cols, out))
        }
    }
}

fn vector_result(rows: usize, cols: usize, values: Vec<f64>) -> Matrix {
    let nnz = values.iter().filter(|&&v| v != 0.0).count();
    dense_result(rows, cols, values, nnz)
}

#[cfg(test)]
mod tests {
    use super::super::testutil::{both, close, m, rand, same};
    use super::*;

    fn naive(a: &Matrix, op: AggOp, dir: Direction) -> Matrix {
        let d = a.to_dense().unwrap();
        let (r, c) = a.shape();
        let agg = |v: Vec<f64>| -> f64 {
            let n = v.len() as f64;
            match op {
                AggOp::Sum => v.iter().sum(),
                AggOp::SumSq => v.iter().map(|x| x * x).sum(),
                AggOp::Mean => v.iter().sum::<f64>() / n,
                // The order-independent product: a zero wins unless a factor is non-finite.
                AggOp::Prod if v.contains(&0.0) => {
                    if v.iter().all(|x| x.is_finite()) {
                        0.0
                    } else {
                        f64::NAN
                    }
                }
                AggOp::Prod => v.iter().product(),
                AggOp::Min => v.iter().fold(f64::INFINITY, |s, &x| nan_min(s, x)),
                AggOp::Max => v.iter().fold(f64::NEG_INFINITY, |s, &x| nan_max(s, x)),
                AggOp::Var | AggOp::Sd => {
                    let mean = v.iter().sum::<f64>() / n;
                    let m2: f64 = v.iter().map(|x| (x - mean) * (x - mean)).sum();
                    let var = variance(v.len(), m2);
                    if op == AggOp::Sd {
                        var.sqrt()
                    } else {
                        var
                    }
                }
            }
        };
        let vals = match dir {
            Direction::Full => vec![agg(d.values.to_vec())],
            Direction::Row => (0..r).map(|i| agg(d.row(i).to_vec())).collect(),
            Direction::Col => (0..c)
                .map(|j| agg((0..r).map(|i| d.values[i * c + j]).collect()))
                .collect(),
        };
        let (rr, cc) = match dir {
            Direction::Full => (1, 1),
            Direction::Row => (r, 1),
            Direction::Col => (1, c),
        };
        Matrix::from_dense_values(rr, cc, vals).unwrap()
    }

    fn check(a: &Matrix, tol: f64) {
        for &op in AggOp::ALL {
            for dir in [Direction::Full, Direction::Row, Direction::Col] {
                let want = naive(a, op, dir);
                for x in both(a) {
                    let got = aggregate(&x, op, dir).unwrap();
                    got.validate().unwrap();
                    assert!(
                        close(&got, &want, tol),
                        "{op:?} {dir:?} sparse={}\n{got:?}\n{want:?}",
                        x.is_sparse()
                    );
                }
            }
        }
    }

    #[test]
    fn small_matrices_all_ops() {
        check(&m(&[&[1.0, 0.0, 3.0], &[0.0, 0.0, -2.0]]), 1e-12);
        check(&m(&[&[0.0, f64::NAN, 3.0], &[0.0, 0.0, -2.0]]), 1e-12);
        check(
            &m(&[&[f64::INFINITY, 1.0], &[0.0, f64::NEG_INFINITY]]),
            1e-12,
        );
        check(&m(&[&[5.0]]), 1e-12);
        check(&m(&[&[-1.0, -2.0], &[-3.0, -4.0]]), 1e-12);
    }

    /// Rows of fewer than eight values take their own loop; each row's aggregate is the one
    /// `reduce_one` gives it, to the bit (signed zeros, NaN, infinities and cancellation
    /// included), at every width below eight.
    #[test]
    fn narrow_rows_aggregate_as_reduce_one_does_to_the_bit() {
        let pool = [
            1e16,
            1.0,
            -1e16,
            -0.0,
            0.0,
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            0.1,
            -2.5e-300,
            3.0,
            f64::MAX,
            f64::MAX,
        ];
        for cols in 1..NARROW_ROW {
            let rows = 97;
            let values: Vec<f64> = (0..rows * cols)
                .map(|i| pool[(i * 7 + i / 3) % pool.len()])
                .collect();
            let a = Matrix::from_dense_values(rows, cols, values).unwrap();
            for op in [
                AggOp::Sum,
                AggOp::SumSq,
                AggOp::Mean,
                AggOp::Min,
                AggOp::Max,
            ] {
                let fast = narrow_dense_rows(&a, op).expect("a narrow dense matrix");
                let general = per_row(&a, |_, v, z| reduce_one(op, v, z));
                for (i, (x, y)) in fast.iter().zip(&general).enumerate() {
                    assert!(
                        x.to_bits() == y.to_bits() || x.is_nan() && y.is_nan(),
                        "{op:?}, {cols} columns, row {i}: {x:e} against {y:e}"
                    );
                }
            }
        }
        let wide = Matrix::from_dense_values(2, NARROW_ROW, vec![1.0; 2 * NARROW_ROW]).unwrap();
        assert!(narrow_dense_rows(&wide, AggOp::Sum).is_none());
    }

    #[test]
    fn empty_matrices() {
        for (r, c) in [(0, 3), (3, 0), (0, 0)] {
            let z = Matrix::zeros(r, c).unwrap();
            check(&z, 0.0);
            assert_eq!(
                aggregate(&z, AggOp::Sum, Direction::Full)
                    .unwrap()
                    .as_scalar()
                    .unwrap(),
                0.0
            );
            assert_eq!(
                aggregate(&z, AggOp::Min, Direction::Full)
                    .unwrap()
                    .as_scalar()
                    .unwrap(),
                f64::INFINITY
            );
        }
    }

    #[test]
    fn large_matrices_match_naive() {
        check(&rand(700, 300, 0.7, 5), 1e-10);
        check(&rand(300, 3000, 0.05, 6), 1e-10);
        check(&rand(100_000, 2, 1.0, 7), 1e-10);
    }

    #[test]
    fn kahan_is_accurate_and_survives_infinity() {
        let mut v = vec![1.0; 1_000_001];
        v[0] = 1e16;
        let a = Matrix::from_dense_values(1, v.len(), v).unwrap();
        let s = aggregate(&a, AggOp::Sum, Direction::Full)
            .unwrap()
            .as_scalar()
            .unwrap();
        assert_eq!(s, 1e16 + 1_000_000.0);
        let mut v = vec![1.0; 200_000];
        v[7] = f64::INFINITY;
        let a = Matrix::from_dense_values(200_000, 1, v).unwrap();
        for dir in [Direction::Full, Direction::Col] {
            let s = aggregate(&a, AggOp::Sum, dir).unwrap().get(0, 0);
            assert_eq!(s, f64::INFINITY);
        }
    }

    proptest::proptest! {
        #[test]
        fn dense_and_sparse_inputs_agree(
            cells in proptest::collection::vec(
                proptest::prop_oneof![5 => proptest::strategy::Just(0.0), 4 => -100.0..100.0f64,
                                      1 => proptest::strategy::Just(f64::NAN)],
                0..60),
            cols in 1usize..7,
        ) {
            let rows = cells.len() / cols;
            let a = Matrix::from_dense_values(rows, cols, cells[..rows * cols].to_vec()).unwrap();
            for &op in AggOp::ALL {
                for dir in [Direction::Full, Direction::Row, Direction::Col] {
                    let [d, s] = both(&a);
                    let (x, y) = (aggregate(&d, op, dir).unwrap(), aggregate(&s, op, dir).unwrap());
                    proptest::prop_assert!(close(&x, &y, 1e-12), "{:?} {:?}", op, dir);
                    proptest::prop_assert!(close(&x, &naive(&a, op, dir), 1e-9));
                }
            }
        }
    }

    #[test]
    fn results_do_not_depend_on_thread_count() {
        let a = rand(1000, 500, 0.9, 9);
        let s = Matrix::Sparse(a.to_sparse());
        let run = |threads: usize| {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap();
            pool.install(|| {
                let mut out = Vec::new();
                for x in [&a, &s] {
                    for &op in AggOp::ALL {
                        for dir in [Direction::Full, Direction::Row, Direction::Col] {
                            out.push(aggregate(x, op, dir).unwrap());
                        }
                    }
                }
                out
            })
        };
        let (one, four) = (run(1), run(4));
        for (x, y) in one.iter().zip(&four) {
            assert!(same(x, y));
            let (p, q) = (x.to_dense().unwrap().values, y.to_dense().unwrap().values);
            assert!(p
                .iter()
                .zip(&q)
                .all(|(u, v)| u.to_bits() == v.to_bits() || u.is_nan()));
        }
    }
}
