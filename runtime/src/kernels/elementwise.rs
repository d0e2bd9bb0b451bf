//! Element-wise kernels: binary operators with broadcasting (matrix, row/column vector, scalar,
//! outer), unary operators, `ifelse` and `replace`.
//!
//! The operator is dispatched once per call (a macro instantiates the loops per operator), so
//! the dense inner loops are plain slice zips that LLVM vectorises.

use super::vector_math::Vectorized;
use super::{build_csr, dense_result, fill_flat, fill_flat_new, fill_rows, sparse_result, Operand};
use crate::error::{Result, RuntimeError, ShapeOp};
use crate::math;
use crate::matrix::{try_alloc_zeroed, DenseMatrix, Matrix, SparseMatrix};
use crate::ops::{BinaryOp, UnaryOp};

/// A value as an element-wise result holds it: `-0.0` becomes `0.0` (`x + 0.0` changes
/// nothing else, NaN included). A sparse matrix cannot store a negative zero, so without this
/// a product's zeros would keep their sign in a dense result and lose it in a sparse one, and
/// `1 / (X * S)` would depend on the format. Element-wise results never hold `-0.0` (the
/// signed-zero rule in `matrix.rs`), and fused operators apply the same rule per node.
#[inline(always)]
pub fn matrix_cell(x: f64) -> f64 {
    x + 0.0
}

/// Runs `$body` with `$f` bound to a closure computing `$op` (monomorphised per operator),
/// its result a matrix cell ([`matrix_cell`]).
macro_rules! with_binary_fn {
    ($op:expr, $f:ident => $body:expr) => {{
        use $crate::ops::BinaryOp as B;
        macro_rules! bind {
            ($g:expr) => {{
                let g = $g;
                let $f = move |a: f64, b: f64| matrix_cell(g(a, b));
                $body
            }};
        }
        match $op {
            B::Add => bind!(|a: f64, b: f64| a + b),
            B::Sub => bind!(|a: f64, b: f64| a - b),
            B::Mul => bind!(|a: f64, b: f64| a * b),
            B::Div => bind!(|a: f64, b: f64| a / b),
            B::Pow => bind!(|a: f64, b: f64| B::Pow.apply(a, b)),
            B::Mod => bind!(|a: f64, b: f64| B::Mod.apply(a, b)),
            B::IntDiv => bind!(|a: f64, b: f64| B::IntDiv.apply(a, b)),
            B::Lt => bind!(|a: f64, b: f64| B::Lt.apply(a, b)),
            B::Le => bind!(|a: f64, b: f64| B::Le.apply(a, b)),
            B::Gt => bind!(|a: f64, b: f64| B::Gt.apply(a, b)),
            B::Ge => bind!(|a: f64, b: f64| B::Ge.apply(a, b)),
            B::Eq => bind!(|a: f64, b: f64| B::Eq.apply(a, b)),
            B::Ne => bind!(|a: f64, b: f64| B::Ne.apply(a, b)),
            B::And => bind!(|a: f64, b: f64| B::And.apply(a, b)),
            B::Or => bind!(|a: f64, b: f64| B::Or.apply(a, b)),
            B::Min => bind!(|a: f64, b: f64| B::Min.apply(a, b)),
            B::Max => bind!(|a: f64, b: f64| B::Max.apply(a, b)),
            B::Log => bind!(|a: f64, b: f64| B::Log.apply(a, b)),
            B::Xor => bind!(|a: f64, b: f64| B::Xor.apply(a, b)),
            B::BitwAnd => bind!(|a: f64, b: f64| B::BitwAnd.apply(a, b)),
            B::BitwOr => bind!(|a: f64, b: f64| B::BitwOr.apply(a, b)),
            B::BitwXor => bind!(|a: f64, b: f64| B::BitwXor.apply(a, b)),
            B::BitwShiftL => bind!(|a: f64, b: f64| B::BitwShiftL.apply(a, b)),
            B::BitwShiftR => bind!(|a: f64, b: f64| B::BitwShiftR.apply(a, b)),
        }
    }};
}

/// Runs `$body` with `$f` bound to a closure computing the unary `$op`, its result a matrix
/// cell ([`matrix_cell`]).
macro_rules! with_unary_fn {
    ($op:expr, $f:ident => $body:expr) => {{
        use $crate::ops::UnaryOp as U;
        macro_rules! bind {
            ($g:expr) => {{
                let g = $g;
                let $f = move |x: f64| matrix_cell(g(x));
                $body
            }};
        }
        match $op {
            U::Abs => bind!(|x: f64| x.abs()),
            U::Exp => bind!(|x: f64| math::exp(x)),
            U::Log => bind!(|x: f64| math::ln(x)),
            U::Sqrt => bind!(|x: f64| x.sqrt()),
            U::Round => bind!(|x: f64| U::Round.apply(x)),
            U::Floor => bind!(|x: f64| x.floor()),
            U::Ceil => bind!(|x: f64| x.ceil()),
            U::Sign => bind!(|x: f64| U::Sign.apply(x)),
            U::Sin => bind!(|x: f64| x.sin()),
            U::Cos => bind!(|x: f64| x.cos()),
            U::Tan => bind!(|x: f64| x.tan()),
            U::Asin => bind!(|x: f64| x.asin()),
            U::Acos => bind!(|x: f64| x.acos()),
            U::Atan => bind!(|x: f64| x.atan()),
            U::Sinh => bind!(|x: f64| x.sinh()),
            U::Cosh => bind!(|x: f64| x.cosh()),
            U::Tanh => bind!(|x: f64| math::tanh(x)),
            U::Sigmoid => bind!(|x: f64| U::Sigmoid.apply(x)),
            U::Not => bind!(|x: f64| U::Not.apply(x)),
            U::Neg => bind!(|x: f64| -x),
            U::IsNaN => bind!(|x: f64| U::IsNaN.apply(x)),
            U::IsInf => bind!(|x: f64| U::IsInf.apply(x)),
        }
    }};
}

/// One operand of a dense element-wise loop, as seen from the output's shape.
#[derive(Clone, Copy)]
enum Src<'a> {
    /// A full matrix of the output's shape (row-major).
    Full(&'a [f64]),
    /// A row vector, repeated for every output row.
    Row(&'a [f64]),
    /// A column vector, one value per output row.
    Col(&'a [f64]),
}

/// One operand within one output row or block.
#[derive(Clone, Copy)]
enum Seg<'a> {
    Slice(&'a [f64]),
    Val(f64),
}

#[inline(always)]
fn kernel2<F: Fn(f64, f64) -> f64>(out: &mut [f64], a: Seg, b: Seg, f: F) {
    match (a, b) {
        (Seg::Slice(x), Seg::Slice(y)) => {
            for (o, (&p, &q)) in out.iter_mut().zip(x.iter().zip(y)) {
                *o = f(p, q);
            }
        }
        (Seg::Slice(x), Seg::Val(q)) => {
            for (o, &p) in out.iter_mut().zip(x) {
                *o = f(p, q);
            }
        }
        (Seg::Val(p), Seg::Slice(y)) => {
            for (o, &q) in out.iter_mut().zip(y) {
                *o = f(p, q);
            }
        }
        (Seg::Val(p), Seg::Val(q)) => out.fill(f(p, q)),
    }
}

/// The dense engine: `out[i, j] = f(a(i, j), b(i, j))` over an `rows x cols` output.
fn dense_binary<F>(rows: usize, cols: usize, a: Src, b: Src, f: F) -> Result<Matrix>
where
    F: Fn(f64, f64) -> f64 + Sync + Copy,
{
    let flat = |s: Src| matches!(s, Src::Full(_));
    if flat(a) && flat(b) {
        let (out, nnz) = fill_flat_new(rows * cols, |off, chunk| {
            let len = chunk.len();
            kernel2(chunk, flat_seg(a, off, len), flat_seg(b, off, len), f)
        })?;
        return Ok(dense_result(rows, cols, out, nnz));
    }
    // An outer broadcast (`m x 1` op `1 x n`) makes an output larger than either input.
    let mut out = try_alloc_zeroed(rows * cols)?;
    // Static calls, each width's row loop unrolled (narrow rows: KMeans's distances to its k
    // centroids).
    let nnz = match cols {
        2 => narrow_rows::<2, F>(&mut out, a, b, f),
        3 => narrow_rows::<3, F>(&mut out, a, b, f),
        4 => narrow_rows::<4, F>(&mut out, a, b, f),
        5 => narrow_rows::<5, F>(&mut out, a, b, f),
        6 => narrow_rows::<6, F>(&mut out, a, b, f),
        7 => narrow_rows::<7, F>(&mut out, a, b, f),
        8 => narrow_rows::<8, F>(&mut out, a, b, f),
        _ => fill_rows(&mut out, cols, |r0, block| {
            for (k, row) in block.chunks_mut(cols).enumerate() {
                let i = r0 + k;
                kernel2(row, row_seg(a, i, cols), row_seg(b, i, cols), f);
            }
        }),
    };
    Ok(dense_result(rows, cols, out, nnz))
}

/// [`dense_binary`]'s row-by-row loop for outputs of `N` columns (2 to 8): the same cells
/// computed the same way, each row's `N` operations unrolled, rather than a slice loop with
/// its vector preamble and scalar tail per row (`A <= v` over 10000 x 5 took twice the time
/// of `A * 2`).
fn narrow_rows<const N: usize, F>(out: &mut [f64], a: Src, b: Src, f: F) -> usize
where
    F: Fn(f64, f64) -> f64 + Sync + Copy,
{
    fill_rows(out, N, |r0, block| {
        for (k, row) in block.chunks_exact_mut(N).enumerate() {
            let i = r0 + k;
            let (x, y) = (narrow_row::<N>(a, i), narrow_row::<N>(b, i));
            for ((o, &p), &q) in row.iter_mut().zip(&x).zip(&y) {
                *o = f(p, q);
            }
        }
    })
}

/// Output row `i`'s `N` values of a source: a full matrix's row, the row vector, or the column
/// vector's value `N` times.
#[inline(always)]
fn narrow_row<const N: usize>(s: Src<'_>, i: usize) -> [f64; N] {
    match s {
        Src::Full(x) => x[i * N..(i + 1) * N]
            .try_into()
            .expect("a row of the output's width"),
        Src::Row(x) => x[..N]
            .try_into()
            .expect("a row vector of the output's width"),
        Src::Col(x) => [x[i]; N],
    }
}

/// The part of a full-matrix source covering cells `off..off + len`.
#[inline(always)]
fn flat_seg(s: Src<'_>, off: usize, len: usize) -> Seg<'_> {
    match s {
        Src::Full(x) => Seg::Slice(&x[off..off + len]),
        Src::Row(_) | Src::Col(_) => unreachable!("vector sources are processed row by row"),
    }
}

/// The part of a source covering output row `i`.
#[inline(always)]
fn row_seg(s: Src<'_>, i: usize, cols: usize) -> Seg<'_> {
    match s {
        Src::Full(x) => Seg::Slice(&x[i * cols..(i + 1) * cols]),
        Src::Row(x) => Seg::Slice(x),
        Src::Col(x) => Seg::Val(x[i]),
    }
}

/// How the two operands of a binary operation line up.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Bcast {
    Same,
    /// Right operand is 1x1.
    ScalarRight,
    /// Left operand is 1x1.
    ScalarLeft,
    /// Right operand is a row vector (1 x n) against an m x n left.
    RowRight,
    /// Right operand is a column vector (m x 1) against an m x n left.
    ColRight,
    RowLeft,
    ColLeft,
    /// Column vector (m x 1) op row vector (1 x n): an m x n result.
    Outer,
}

fn broadcast(a: &Matrix, b: &Matrix, op: BinaryOp) -> Result<(Bcast, usize, usize)> {
    let ((ar, ac), (br, bc)) = (a.shape(), b.shape());
    let mode = if (ar, ac) == (br, bc) {
        Bcast::Same
    } else if (br, bc) == (1, 1) {
        Bcast::ScalarRight
    } else if (ar, ac) == (1, 1) {
        Bcast::ScalarLeft
    } else if br == 1 && bc == ac {
        Bcast::RowRight
    } else if bc == 1 && br == ar {
        Bcast::ColRight
    } else if ar == 1 && ac == bc {
        Bcast::RowLeft
    } else if ac == 1 && ar == br {
        Bcast::ColLeft
    } else if ac == 1 && br == 1 {
        Bcast::Outer
    } else {
        return Err(RuntimeError::ShapeMismatch {
            op: ShapeOp::ElementWise(op.name()),
            left: a.shape(),
            right: b.shape(),
        });
    };
    let (rows, cols) = match mode {
        Bcast::Same | Bcast::ScalarRight | Bcast::RowRight | Bcast::ColRight => (ar, ac),
        Bcast::ScalarLeft | Bcast::RowLeft | Bcast::ColLeft => (br, bc),
        Bcast::Outer => (ar, bc),
    };
    Ok((mode, rows, cols))
}

/// `a op b` with broadcasting: equal shapes; `b` (or `a`) 1x1 as a scalar; `b` (or `a`) a row
/// vector `1 x n` or column vector `m x 1` against an `m x n` matrix; and a column vector
/// `m x 1` op a row vector `1 x n`, giving the `m x n` outer result.
///
/// ```
/// use lafuse_runtime::{Matrix, kernels, ops::BinaryOp};
/// let x = Matrix::from_dense_values(2, 2, vec![1.0, 2.0, 3.0, 4.0]).unwrap();
/// let v = Matrix::from_dense_values(1, 2, vec![10.0, 20.0]).unwrap();
/// let y = kernels::binary(&x, &v, BinaryOp::Add).unwrap();
/// assert_eq!(y.into_dense_values().unwrap(), vec![11.0, 22.0, 13.0, 24.0]);
/// ```
pub fn binary(a: &Matrix, b: &Matrix, op: BinaryOp) -> Result<Matrix> {
    binary_known(a, b, op, [None, None])
}

/// [`binary`], told whether `a` and `b` hold only finite values where the caller knows
/// (`None`: not known). A sparse operand's zeros may be skipped only against a finite other
/// operand (`0 * Inf` is NaN), which [`binary`] otherwise learns by scanning the other
/// operand on every call; the executor knows it from its value-range cache.
pub fn binary_known(
    a: &Matrix,
    b: &Matrix,
    op: BinaryOp,
    finite: [Option<bool>; 2],
) -> Result<Matrix> {
    let [a_finite, b_finite] = finite;
    let (mode, rows, cols) = broadcast(a, b, op)?;
    match mode {
        Bcast::ScalarRight => return binary_scalar(a, b.get(0, 0), op, false),
        Bcast::ScalarLeft => return binary_scalar(b, a.get(0, 0), op, true),
        _ => {}
    }
    if rows == 0 || cols == 0 {
        return Matrix::zeros(rows, cols);
    }
    // Sparse paths: iterate only the non-zeros where that is exact.
    match (mode, a, b) {
        (Bcast::Same, Matrix::Sparse(x), Matrix::Sparse(y)) if op.is_sparse_safe_both() => {
            return with_binary_fn!(op, f => sparse_union(x, y, f));
        }
        (Bcast::Same | Bcast::RowRight | Bcast::ColRight, Matrix::Sparse(x), other)
            if op.is_sparse_safe_left(b_finite.unwrap_or_else(|| other.all_finite())) =>
        {
            let od = other.dense_cow()?;
            let ov = &od.values[..];
            return with_binary_fn!(op, f => match mode {
                Bcast::Same => sparse_gather(x, ov, |v, q| f(v, q)),
                Bcast::RowRight => sparse_drive(x, |_, j, v| f(v, ov[j])),
                _ => sparse_drive(x, |i, _, v| f(v, ov[i])),
            });
        }
        (Bcast::Same | Bcast::RowLeft | Bcast::ColLeft, other, Matrix::Sparse(y))
            if op.is_sparse_safe_right(a_finite.unwrap_or_else(|| other.all_finite())) =>
        {
            let od = other.dense_cow()?;
            let ov = &od.values[..];
            return with_binary_fn!(op, f => match mode {
                Bcast::Same => sparse_gather(y, ov, |v, q| f(q, v)),
                Bcast::RowLeft => sparse_drive(y, |_, j, v| f(ov[j], v)),
                _ => sparse_drive(y, |i, _, v| f(ov[i], v)),
            });
        }
        _ => {}
    }
    let ad = a.dense_cow()?;
    let bd = b.dense_cow()?;
    let (av, bv) = (&ad.values[..], &bd.values[..]);
    let (sa, sb) = match mode {
        Bcast::Same => (Src::Full(av), Src::Full(bv)),
        Bcast::RowRight => (Src::Full(av), Src::Row(bv)),
        Bcast::ColRight => (Src::Full(av), Src::Col(bv)),
        Bcast::RowLeft => (Src::Row(av), Src::Full(bv)),
        Bcast::ColLeft => (Src::Col(av), Src::Full(bv)),
        Bcast::Outer => (Src::Col(av), Src::Row(bv)),
        Bcast::ScalarLeft | Bcast::ScalarRight => unreachable!("handled above"),
    };
    with_binary_fn!(op, f => dense_binary(rows, cols, sa, sb, f))
}

/// `a op b` like [`binary`], but consuming `a`: when `a` is dense and has the output's shape, the
/// result is computed in `a`'s buffer (no allocation, no page faults for a fresh output). Use it
/// when the caller holds the last reference to `a`.
pub fn binary_owned(a: Matrix, b: &Matrix, op: BinaryOp) -> Result<Matrix> {
    let (mode, rows, cols) = broadcast(&a, b, op)?;
    // A borrowed buffer is the embedder's memory: never written, so computed out of place.
    let inplace = matches!(&a, Matrix::Dense(d) if !d.values.is_borrowed())
        && (rows, cols) == a.shape()
        && matches!(
            mode,
            Bcast::Same | Bcast::RowRight | Bcast::ColRight | Bcast::ScalarRight
        )
        && !(b.is_sparse() && mode == Bcast::Same && op.is_sparse_safe_right(a.all_finite()));
    if !inplace || rows * cols == 0 {
        return binary(&a, b, op);
    }
    let Matrix::Dense(d) = a else {
        unreachable!("checked dense above")
    };
    if mode == Bcast::ScalarRight {
        return binary_scalar_owned(Matrix::Dense(d), b.get(0, 0), op, false);
    }
    let bd = b.dense_cow()?;
    let bv = &bd.values[..];
    let src = match mode {
        Bcast::Same => Src::Full(bv),
        Bcast::RowRight => Src::Row(bv),
        _ => Src::Col(bv),
    };
    let values = d.values.into_vec();
    Ok(with_binary_fn!(op, f => dense_inplace(values, rows, cols, src, f)))
}

/// `a op s` (or `s op a`) like [`binary_scalar`], computed in `a`'s buffer when `a` is dense.
pub fn binary_scalar_owned(a: Matrix, s: f64, op: BinaryOp, scalar_left: bool) -> Result<Matrix> {
    match a {
        Matrix::Dense(d) if !d.values.is_empty() && !d.values.is_borrowed() => {
            let (rows, cols) = (d.rows, d.cols);
            let values = d.values.into_vec();
            Ok(with_binary_fn!(op, f => {
                let g = move |x: f64| if scalar_left { f(s, x) } else { f(x, s) };
                map_inplace(values, rows, cols, g)
            }))
        }
        a => binary_scalar(&a, s, op, scalar_left),
    }
}

/// `op(a)` like [`unary`], computed in `a`'s buffer when `a` is dense.
pub fn unary_owned(a: Matrix, op: UnaryOp) -> Result<Matrix> {
    match a {
        Matrix::Dense(d) if !d.values.is_empty() && !d.values.is_borrowed() => {
            let (rows, cols) = (d.rows, d.cols);
            let values = d.values.into_vec();
            Ok(match vectorized(op) {
                Some(v) => map_chunks_inplace(values, rows, cols, |c| v.map_in_place(c)),
                None => with_unary_fn!(op, f => map_inplace(values, rows, cols, f)),
            })
        }
        a => unary(&a, op),
    }
}

/// The slice form of `op` over dense data, where the runtime's math has one: the same values
/// to the bit as the per-cell closure, eight lanes at a time. (Their results are never `-0.0`,
/// so [`matrix_cell`] would change nothing.)
fn vectorized(op: UnaryOp) -> Option<Vectorized> {
    match op {
        UnaryOp::Exp => Some(Vectorized::Exp),
        UnaryOp::Log => Some(Vectorized::Ln),
        UnaryOp::Sigmoid => Some(Vectorized::Sigmoid),
        UnaryOp::Tanh => Some(Vectorized::Tanh),
        _ => None,
    }
}

/// `buf[i] = g(buf[i])` in place.
fn map_inplace<G: Fn(f64) -> f64 + Sync>(buf: Vec<f64>, rows: usize, cols: usize, g: G) -> Matrix {
    map_chunks_inplace(buf, rows, cols, |chunk| {
        for o in chunk.iter_mut() {
            *o = g(*o);
        }
    })
}

/// `f(chunk)` over the chunks of `buf` in place (in parallel above the threshold).
fn map_chunks_inplace<F: Fn(&mut [f64]) + Sync>(
    mut buf: Vec<f64>,
    rows: usize,
    cols: usize,
    f: F,
) -> Matrix {
    let nnz = fill_flat(&mut buf, |_, chunk| f(chunk));
    dense_result(rows, cols, buf, nnz)
}

/// A new dense result of `d`'s shape, `f(cells, out)` over matching chunks of `d`'s cells
/// and the result (in parallel above the threshold).
fn map_dense<F: Fn(&[f64], &mut [f64]) + Sync>(d: &DenseMatrix, f: F) -> Result<Matrix> {
    let (out, nnz) = fill_flat_new(d.values.len(), |off, chunk| {
        f(&d.values[off..off + chunk.len()], chunk)
    })?;
    Ok(dense_result(d.rows, d.cols, out, nnz))
}

/// `buf[i, j] = f(buf[i, j], b(i, j))` in place.
fn dense_inplace<F>(mut buf: Vec<f64>, rows: usize, cols: usize, b: Src, f: F) -> Matrix
where
    F: Fn(f64, f64) -> f64 + Sync + Copy,
{
    let nnz = match b {
        Src::Full(y) => fill_flat(&mut buf, |off, chunk| {
            let len = chunk.len();
            for (o, &q) in chunk.iter_mut().zip(&y[off..off + len]) {
                *o = f(*o, q);
            }
        }),
        // As `dense_binary`: each narrow width a static call, wider rows the general loop.
        _ => match cols {
            2 => narrow_rows_inplace::<2, F>(&mut buf, b, f),
            3 => narrow_rows_inplace::<3, F>(&mut buf, b, f),
            4 => narrow_rows_inplace::<4, F>(&mut buf, b, f),
            5 => narrow_rows_inplace::<5, F>(&mut buf, b, f),
            6 => narrow_rows_inplace::<6, F>(&mut buf, b, f),
            7 => narrow_rows_inplace::<7, F>(&mut buf, b, f),
            8 => narrow_rows_inplace::<8, F>(&mut buf, b, f),
            _ => fill_rows(&mut buf, cols, |r0, block| {
                for (k, row) in block.chunks_mut(cols).enumerate() {
                    match row_seg(b, r0 + k, cols) {
                        Seg::Slice(y) => {
                            for (o, &q) in row.iter_mut().zip(y) {
                                *o = f(*o, q);
                            }
                        }
                        Seg::Val(q) => {
                            for o in row.iter_mut() {
                                *o = f(*o, q);
                            }
                        }
                    }
                }
            }),
        },
    };
    dense_result(rows, cols, buf, nnz)
}

/// [`dense_inplace`]'s row-by-row loop for `N` columns (2 to 8), unrolled as
/// [`narrow_rows`]'s.
fn narrow_rows_inplace<const N: usize, F>(buf: &mut [f64], b: Src, f: F) -> usize
where
    F: Fn(f64, f64) -> f64 + Sync + Copy,
{
    fill_rows(buf, N, |r0, block| {
        for (k, row) in block.chunks_exact_mut(N).enumerate() {
            let y = narrow_row::<N>(b, r0 + k);
            for (o, &q) in row.iter_mut().zip(&y) {
                *o = f(*o, q);
            }
        }
    })
}

/// Maps the non-zeros of `x` through `g(row, col, value)`, dropping results that are zero.
fn sparse_drive<G>(x: &SparseMatrix, g: G) -> Result<Matrix>
where
    G: Fn(usize, usize, f64) -> f64 + Sync,
{
    sparse_drive_rows(x, |_| {}, g)
}

/// [`sparse_drive`], calling `before_row(i)` before row `i`'s non-zeros.
fn sparse_drive_rows<B, G>(x: &SparseMatrix, before_row: B, g: G) -> Result<Matrix>
where
    B: Fn(usize) + Sync,
    G: Fn(usize, usize, f64) -> f64 + Sync,
{
    let s = build_csr(x.rows, x.cols, x.nnz(), |i, idx, val| {
        before_row(i);
        let (ci, cv) = x.row(i);
        for (&j, &v) in ci.iter().zip(cv) {
            let r = g(i, j as usize, v);
            if r != 0.0 {
                idx.push(j);
                val.push(r);
            }
        }
    });
    sparse_result(s)
}

/// `f(v, q)` at each non-zero `v` of `x` with `q` the cell of `o` (dense, row-major, of `x`'s
/// shape) at its position, dropping results that are zero. Where `x`'s rows are sparse enough
/// that each non-zero waits for a line of `o` of its own, each row first asks for the lines of
/// the row a chunk ahead ([`gather`](super::gather)), so that a chunk's worth is in flight.
fn sparse_gather<F>(x: &SparseMatrix, o: &[f64], f: F) -> Result<Matrix>
where
    F: Fn(f64, f64) -> f64 + Sync,
{
    let n = x.cols;
    let chunk = super::gather::gather_chunk_rows(x);
    let prefetch = |i: usize| {
        if let Some(c) = chunk {
            super::gather::prefetch_gathered(x, i + c, i + c + 1, &[o]);
        }
    };
    sparse_drive_rows(x, prefetch, |i, j, v| f(v, o[i * n + j]))
}

/// `f` over the union of two sparse patterns (exact when `f(0, 0) == 0`).
fn sparse_union<F>(x: &SparseMatrix, y: &SparseMatrix, f: F) -> Result<Matrix>
where
    F: Fn(f64, f64) -> f64 + Sync,
{
    let s = build_csr(x.rows, x.cols, x.nnz() + y.nnz(), |i, idx, val| {
        let (xi, xv) = x.row(i);
        let (yi, yv) = y.row(i);
        let (mut p, mut q) = (0, 0);
        let mut push = |j: u32, r: f64| {
            if r != 0.0 {
                idx.push(j);
                val.push(r);
            }
        };
        while p < xi.len() && q < yi.len() {
            if xi[p] == yi[q] {
                push(xi[p], f(xv[p], yv[q]));
                p += 1;
                q += 1;
            } else if xi[p] < yi[q] {
                push(xi[p], f(xv[p], 0.0));
                p += 1;
            } else {
                push(yi[q], f(0.0, yv[q]));
                q += 1;
            }
        }
        for k in p..xi.len() {
            push(xi[k], f(xv[k], 0.0));
        }
        for k in q..yi.len() {
            push(yi[k], f(0.0, yv[k]));
        }
    });
    sparse_result(s)
}

/// `a op s` (or `s op a` when `scalar_left`).
pub fn binary_scalar(a: &Matrix, s: f64, op: BinaryOp, scalar_left: bool) -> Result<Matrix> {
    with_binary_fn!(op, f => {
        let g = move |x: f64| if scalar_left { f(s, x) } else { f(x, s) };
        map_cells(a, g)
    })
}

/// Applies `g` to every cell; a sparse input stays sparse when `g(0) == 0`.
fn map_cells<G>(a: &Matrix, g: G) -> Result<Matrix>
where
    G: Fn(f64) -> f64 + Sync + Copy,
{
    let (rows, cols) = a.shape();
    match a {
        Matrix::Dense(d) => map_dense(d, |x, out| {
            for (o, &v) in out.iter_mut().zip(x) {
                *o = g(v);
            }
        }),
        Matrix::Sparse(x) => {
            let z = g(0.0);
            if z == 0.0 {
                sparse_drive(x, |_, _, v| g(v))
            } else {
                // Zeros map to a non-zero constant: the result is dense.
                let mut out = try_alloc_zeroed(rows * cols)?;
                let nnz = fill_rows(&mut out, cols, |r0, block| {
                    block.fill(z);
                    for (k, row) in block.chunks_mut(cols).enumerate() {
                        let (ci, cv) = x.row(r0 + k);
                        for (&j, &v) in ci.iter().zip(cv) {
                            row[j as usize] = g(v);
                        }
                    }
                });
                Ok(dense_result(rows, cols, out, nnz))
            }
        }
    }
}

/// Applies a unary operator to every cell (non-zeros only when the operator is sparse-safe).
pub fn unary(a: &Matrix, op: UnaryOp) -> Result<Matrix> {
    match (vectorized(op), a) {
        (Some(v), Matrix::Dense(d)) => map_dense(d, |x, out| v.map(x, out)),
        _ => with_unary_fn!(op, f => map_cells(a, f)),
    }
}

/// `ifelse(cond, yes, no)`: `yes` where `cond != 0` (NaN counts as true), else `no`. Each
/// argument is a matrix or a scalar; all matrix arguments must have the same shape. With three
/// scalars the result is 1x1.
pub fn ifelse(cond: Operand, yes: Operand, no: Operand) -> Result<Matrix> {
    let mut shape: Option<(usize, usize)> = None;
    for (name, o) in [("condition", cond), ("yes", yes), ("no", no)] {
        if let Operand::Matrix(m) = o {
            match shape {
                None => shape = Some(m.shape()),
                Some((r, c)) if (r, c) != m.shape() => {
                    return Err(RuntimeError::ShapeMismatch {
                        op: ShapeOp::IfElse { operand: name },
                        left: (r, c),
                        right: m.shape(),
                    })
                }
                Some(_) => {}
            }
        }
    }
    let (rows, cols) = shape.unwrap_or((1, 1));
    let (dc, dy, dn) = (densify(cond)?, densify(yes)?, densify(no)?);
    let (sc, sy, sn) = (as_seg(cond, &dc), as_seg(yes, &dy), as_seg(no, &dn));
    let (out, nnz) = fill_flat_new(rows * cols, |off, chunk| {
        for (k, o) in chunk.iter_mut().enumerate() {
            let p = off + k;
            *o = matrix_cell(if at(sc, p) != 0.0 {
                at(sy, p)
            } else {
                at(sn, p)
            });
        }
    })?;
    Ok(dense_result(rows, cols, out, nnz))
}

fn densify(o: Operand<'_>) -> Result<Option<std::borrow::Cow<'_, DenseMatrix>>> {
    Ok(match o {
        Operand::Matrix(m) => Some(m.dense_cow()?),
        Operand::Scalar(_) => None,
    })
}

fn as_seg<'a>(o: Operand<'_>, d: &'a Option<std::borrow::Cow<'_, DenseMatrix>>) -> Seg<'a> {
    match (o, d) {
        (_, Some(m)) => Seg::Slice(&m.values),
        (Operand::Scalar(v), None) => Seg::Val(v),
        (Operand::Matrix(_), None) => unreachable!("matrix operands are densified first"),
    }
}

#[inline(always)]
fn at(s: Seg<'_>, k: usize) -> f64 {
    match s {
        Seg::Slice(x) => x[k],
        Seg::Val(v) => v,
    }
}

/// `replace(target = a, pattern, replacement)`: every cell equal to `pattern` (every NaN when
/// `pattern` is NaN) becomes `replacement`.
pub fn replace(a: &Matrix, pattern: f64, replacement: f64) -> Result<Matrix> {
    if pattern.is_nan() {
        map_cells(a, move |v| {
            matrix_cell(if v.is_nan() { replacement } else { v })
        })
    } else {
        map_cells(a, move |v| {
            matrix_cell(if v == pattern { replacement } else { v })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::{both, m, rand, same};
    use super::*;
    use proptest::prelude::*;

    fn naive(a: &Matrix, b: &Matrix, op: BinaryOp) -> Matrix {
        let (mode, rows, cols) = broadcast(a, b, op).unwrap();
        let mut out = vec![0.0; rows * cols];
        for i in 0..rows {
            for j in 0..cols {
                let (x, y) = match mode {
                    Bcast::Same => (a.get(i, j), b.get(i, j)),
                    Bcast::ScalarRight => (a.get(i, j), b.get(0, 0)),
                    Bcast::ScalarLeft => (a.get(0, 0), b.get(i, j)),
                    Bcast::RowRight => (a.get(i, j), b.get(0, j)),
                    Bcast::ColRight => (a.get(i, j), b.get(i, 0)),
                    Bcast::RowLeft => (a.get(0, j), b.get(i, j)),
                    Bcast::ColLeft => (a.get(i, 0), b.get(i, j)),
                    Bcast::Outer => (a.get(i, 0), b.get(0, j)),
                };
                out[i * cols + j] = op.apply(x, y);
            }
        }
        Matrix::from_dense_values(rows, cols, out).unwrap()
    }

    /// The consuming (in-place) kernels never write a borrowed buffer: they compute out of
    /// place, and give what the borrowing kernels give.
    #[test]
    fn consuming_kernels_leave_borrowed_inputs_untouched() {
        let a = rand(30, 40, 0.9, 5).to_dense().unwrap();
        let source = a.values.to_vec();
        let b = rand(30, 40, 0.7, 6);
        let borrowed = || {
            // SAFETY: every matrix made here is consumed or dropped within this test, before
            // `source`.
            let values = unsafe { crate::buffer::Buffer::borrowed(&source) };
            Matrix::Dense(DenseMatrix {
                values,
                ..a.clone()
            })
        };
        let owned = Matrix::Dense(a.clone());
        let r = binary_owned(borrowed(), &b, BinaryOp::Mul).unwrap();
        assert!(same(&r, &binary(&owned, &b, BinaryOp::Mul).unwrap()));
        let r = binary_scalar_owned(borrowed(), 2.0, BinaryOp::Add, false).unwrap();
        assert!(same(
            &r,
            &binary_scalar(&owned, 2.0, BinaryOp::Add, false).unwrap()
        ));
        let r = unary_owned(borrowed(), UnaryOp::Exp).unwrap();
        assert!(same(&r, &unary(&owned, UnaryOp::Exp).unwrap()));
        assert!(!r.is_borrowed());
        assert_eq!(source, a.values.to_vec());
    }

    fn check_all_formats(a: &Matrix, b: &Matrix) {
        for &op in BinaryOp::ALL {
            let want = naive(a, b, op);
            for x in both(a) {
                for y in both(b) {
                    let got = binary(&x, &y, op).unwrap();
                    got.validate().unwrap();
                    assert!(
                        same(&got, &want),
                        "{op:?} {:?} {:?}\n{got:?}\n{want:?}",
                        x,
                        y
                    );
                    assert_eq!(got.is_sparse(), want.is_sparse(), "{op:?}: format by nnz");
                }
            }
        }
    }

    #[test]
    fn same_shape_with_nan_and_inf_in_all_formats() {
        let a = m(&[
            &[0.0, 1.0, 0.0, -2.0],
            &[0.0, 0.0, f64::NAN, 0.0],
            &[3.0, 0.0, 0.0, 0.0],
        ]);
        let b = m(&[
            &[f64::NAN, 0.0, 0.0, 5.0],
            &[f64::INFINITY, 0.0, 2.0, 0.0],
            &[0.0, 0.0, -1.0, 0.0],
        ]);
        check_all_formats(&a, &b);
        check_all_formats(&b, &a);
    }

    #[test]
    fn broadcasting_forms() {
        let x = m(&[
            &[0.0, 1.0, 0.0],
            &[2.0, 0.0, 0.0],
            &[0.0, 0.0, 0.0],
            &[0.0, 0.0, 4.0],
        ]);
        let row = m(&[&[1.0, f64::NAN, 0.0]]);
        let col = m(&[&[1.0], &[0.0], &[f64::INFINITY], &[-1.0]]);
        let sc = m(&[&[2.0]]);
        for (a, b) in [
            (&x, &row),
            (&x, &col),
            (&row, &x),
            (&col, &x),
            (&x, &sc),
            (&sc, &x),
            (&col, &row),
        ] {
            check_all_formats(a, b);
        }
        let outer = binary(&col, &row, BinaryOp::Mul).unwrap();
        assert_eq!(outer.shape(), (4, 3));
    }

    #[test]
    fn shape_errors_name_both_shapes() {
        let e = binary(
            &Matrix::zeros(3, 4).unwrap(),
            &Matrix::zeros(5, 4).unwrap(),
            BinaryOp::Mul,
        )
        .unwrap_err();
        assert_eq!(
            e,
            RuntimeError::ShapeMismatch {
                op: ShapeOp::ElementWise("*"),
                left: (3, 4),
                right: (5, 4)
            }
        );
        assert_eq!(
            e.to_string(),
            "element-wise *: shapes 3x4 and 5x4 do not match"
        );
        // A row vector against a column vector the wrong way round is not an outer product.
        assert!(binary(
            &Matrix::zeros(1, 3).unwrap(),
            &Matrix::zeros(4, 1).unwrap(),
            BinaryOp::Add
        )
        .is_err());
    }

    #[test]
    fn empty_inputs() {
        for (r, c) in [(0, 3), (3, 0), (0, 0)] {
            let z = Matrix::zeros(r, c).unwrap();
            let out = binary(&z, &z, BinaryOp::Add).unwrap();
            assert_eq!(out.shape(), (r, c));
            out.validate().unwrap();
            let out = binary_scalar(&z, 1.0, BinaryOp::Add, false).unwrap();
            assert_eq!(out.shape(), (r, c));
            out.validate().unwrap();
        }
    }

    #[test]
    fn sparse_times_dense_with_nan_at_a_zero() {
        let x = m(&[&[0.0, 1.0, 0.0], &[0.0, 0.0, 0.0]]);
        let y = m(&[&[f64::NAN, 2.0, 1.0], &[1.0, 1.0, f64::INFINITY]]);
        let got = binary(&Matrix::Sparse(x.to_sparse()), &y, BinaryOp::Mul).unwrap();
        assert!(got.get(0, 0).is_nan());
        assert!(got.get(1, 2).is_nan());
        assert_eq!(got.get(0, 1), 2.0);
    }

    #[test]
    fn scalar_ops_all_formats() {
        let a = m(&[&[0.0, 1.5, 0.0, -2.0], &[0.0, 0.0, f64::NAN, 0.0]]);
        for s in [0.0, 2.0, -1.0, f64::NAN, f64::INFINITY] {
            for &op in BinaryOp::ALL {
                for left in [false, true] {
                    let want: Vec<f64> = a
                        .to_dense()
                        .unwrap()
                        .values
                        .iter()
                        .map(|&v| if left { op.apply(s, v) } else { op.apply(v, s) })
                        .collect();
                    let want = Matrix::from_dense_values(2, 4, want).unwrap();
                    for x in both(&a) {
                        let got = binary_scalar(&x, s, op, left).unwrap();
                        got.validate().unwrap();
                        assert!(same(&got, &want), "{op:?} {s} {left}");
                    }
                }
            }
        }
    }

    #[test]
    fn unary_all_ops_all_formats() {
        let a = m(&[
            &[0.0, 0.3, 0.0, -2.5],
            &[0.0, 0.0, f64::NAN, f64::NEG_INFINITY],
        ]);
        for &op in UnaryOp::ALL {
            let want: Vec<f64> = a
                .to_dense()
                .unwrap()
                .values
                .iter()
                .map(|&v| op.apply(v))
                .collect();
            let want = Matrix::from_dense_values(2, 4, want).unwrap();
            for x in both(&a) {
                let got = unary(&x, op).unwrap();
                got.validate().unwrap();
                assert!(same(&got, &want), "{op:?}");
            }
        }
    }

    #[test]
    fn owned_variants_match_borrowed_ones() {
        let a = rand(60, 50, 0.9, 11);
        let s = rand(60, 50, 0.05, 12);
        let row = rand(1, 50, 1.0, 13);
        let col = rand(60, 1, 1.0, 14);
        let one = m(&[&[2.5]]);
        for &op in BinaryOp::ALL {
            for b in [&a, &s, &row, &col, &one] {
                for x in both(&a) {
                    let want = binary(&x, b, op).unwrap();
                    let got = binary_owned(x.clone(), b, op).unwrap();
                    got.validate().unwrap();
                    assert!(same(&got, &want), "{op:?}");
                }
            }
            for x in both(&s) {
                let want = binary_scalar(&x, 0.5, op, true).unwrap();
                let got = binary_scalar_owned(x.clone(), 0.5, op, true).unwrap();
                got.validate().unwrap();
                assert!(same(&got, &want), "{op:?}");
            }
        }
        for &op in UnaryOp::ALL {
            for x in both(&s) {
                let got = unary_owned(x.clone(), op).unwrap();
                got.validate().unwrap();
                assert!(same(&got, &unary(&x, op).unwrap()));
            }
        }
        // Broadcasting that changes the shape falls back to the allocating path.
        let outer = binary_owned(col.clone(), &row, BinaryOp::Add).unwrap();
        assert_eq!(outer.shape(), (60, 50));
    }

    #[test]
    fn ifelse_and_replace() {
        let c = m(&[&[1.0, 0.0], &[f64::NAN, 0.0]]);
        let y = m(&[&[10.0, 20.0], &[30.0, 40.0]]);
        let got = ifelse(
            Operand::Matrix(&c),
            Operand::Matrix(&y),
            Operand::Scalar(-1.0),
        )
        .unwrap();
        assert_eq!(
            got.into_dense_values().unwrap(),
            vec![10.0, -1.0, 30.0, -1.0]
        );
        let got = ifelse(
            Operand::Scalar(0.0),
            Operand::Scalar(1.0),
            Operand::Scalar(2.0),
        )
        .unwrap();
        assert_eq!(got.as_scalar().unwrap(), 2.0);
        let e = ifelse(
            Operand::Matrix(&c),
            Operand::Matrix(&Matrix::zeros(3, 2).unwrap()),
            Operand::Scalar(0.0),
        );
        assert!(e.unwrap_err().to_string().contains("2x2 and 3x2"));

        let a = m(&[&[0.0, f64::NAN, 3.0], &[3.0, 0.0, 0.0]]);
        for x in both(&a) {
            let r = replace(&x, f64::NAN, 7.0).unwrap();
            r.validate().unwrap();
            assert_eq!(
                r.into_dense_values().unwrap(),
                vec![0.0, 7.0, 3.0, 3.0, 0.0, 0.0]
            );
            let r = replace(&x, 0.0, 1.0).unwrap();
            assert_eq!(r.get(1, 2), 1.0);
            let r = replace(&x, 3.0, 0.0).unwrap();
            r.validate().unwrap();
            assert_eq!(r.nnz(), 1);
        }
    }

    /// Outputs of 1 to 9 columns (`narrow_rows` unrolls 2 to 8), every broadcast form on either
    /// side, allocating and in place, against the cell-by-cell definition: NaN, infinities and
    /// `-0.0` included, rows enough for blocks over threads.
    #[test]
    fn narrow_rows_match_naive_at_every_width() {
        for cols in 1..=9 {
            let mut v = rand(20_000, cols, 1.0, 3 + cols as u64)
                .into_dense_values()
                .unwrap();
            v[0] = f64::NAN;
            v[1] = f64::NEG_INFINITY;
            v[2] = -0.0;
            let x = Matrix::from_dense_values(20_000, cols, v).unwrap();
            let y = rand(20_000, cols, 1.0, 31 + cols as u64);
            let row = rand(1, cols, 1.0, 7);
            let col = rand(20_000, 1, 0.5, 8);
            for op in [BinaryOp::Add, BinaryOp::Le, BinaryOp::Div, BinaryOp::Min] {
                for (a, b) in [(&x, &y), (&x, &row), (&x, &col), (&row, &x), (&col, &x)] {
                    let want = naive(a, b, op);
                    let got = binary(a, b, op).unwrap();
                    assert!(same(&got, &want), "{op:?} at {cols} columns");
                    if a.shape() == want.shape() {
                        let owned = binary_owned(a.clone(), b, op).unwrap();
                        assert!(same(&owned, &want), "{op:?} at {cols} columns, in place");
                    }
                }
            }
        }
    }

    #[test]
    fn large_inputs_match_naive() {
        let a = rand(300, 400, 0.9, 1);
        let b = rand(300, 400, 0.1, 2);
        let v = rand(1, 400, 1.0, 3);
        // Rows of a few non-zeros in 50 lines: a product with `a` gathers in chunks of rows,
        // prefetching ahead (`gather`), as `b`'s 40 do in chunks of fewer rows.
        let c = rand(300, 400, 0.01, 4);
        assert!(c.is_sparse() && !a.is_sparse());
        for op in [BinaryOp::Add, BinaryOp::Mul, BinaryOp::Div, BinaryOp::Max] {
            for (x, y) in [(&a, &b), (&b, &a), (&a, &v), (&b, &v), (&a, &c), (&c, &a)] {
                let got = binary(x, y, op).unwrap();
                got.validate().unwrap();
                assert!(same(&got, &naive(x, y, op)), "{op:?}");
            }
        }
    }

    fn arb_matrix(rows: usize, cols: usize) -> impl Strategy<Value = Matrix> {
        let cell = prop_oneof![
            4 => Just(0.0),
            4 => -10.0..10.0f64,
            1 => Just(f64::NAN),
            1 => Just(f64::INFINITY),
        ];
        proptest::collection::vec(cell, rows * cols)
            .prop_map(move |v| Matrix::from_dense_values(rows, cols, v).unwrap())
    }

    proptest! {
        #[test]
        fn dense_and_sparse_inputs_agree(a in arb_matrix(5, 6), b in arb_matrix(5, 6),
                                         r in arb_matrix(1, 6), opi in 0usize..18) {
            let op = BinaryOp::ALL[opi];
            for y in [&b, &r] {
                let want = naive(&a, y, op);
                for x in both(&a) {
                    for z in both(y) {
                        let got = binary(&x, &z, op).unwrap();
                        prop_assert!(got.validate().is_ok());
                        prop_assert!(same(&got, &want));
                    }
                }
            }
            let u = UnaryOp::ALL[opi];
            let [d, s] = both(&a);
            prop_assert!(same(&unary(&d, u).unwrap(), &unary(&s, u).unwrap()));
        }
    }
}
