//! Kernels of partial reuse's compensations (LIMA section 4.2): the part of a dense kernel's
//! output that is not in the cache, computed with the arithmetic that kernel uses for those
//! cells, and put together with the cached part into the output the kernel would return.
//!
//! Exactness rests on two facts of the dense kernels. `matrixmultiply`'s dgemm computes every
//! cell alike wherever it lies in the output and whatever the output's shape: packing copies
//! values, the micro-kernel accumulates one cell over a `kc` block of the inner dimension in
//! order, and blocks are added in order (edge tiles go through a buffer with the same
//! arithmetic, with alpha 1 and beta 0 or 1). Column aggregates reduce each column in fixed
//! row blocks ([`super::aggregate`]), so a column's result depends on that column only. The
//! callers check the rest: that the full kernel and the cached part's took the dense dgemm or
//! dense column path (`dense_product_uses_dgemm`, dense operands of finite values: NaN/±Inf
//! in a product's right operand take [`super::matmul`]'s zero-skipping kernel instead).

use super::{aggregate, dense_result};
use crate::error::{Internal, Result, RuntimeError};
use crate::matrix::{count_nnz, try_alloc_zeroed, DenseMatrix, Matrix};
use crate::ops::{AggOp, Direction};
use std::ops::Range;

/// Rows of a dense left operand up to which `%*%` sums each cell in order over a pass of the
/// right operand's columns instead of calling dgemm (`matmul::few_rows`).
pub const FEW_ROWS: usize = 4;

/// Whether `%*%` of dense `m x k` and `k x n` operands runs on dgemm (`k >= 1`); otherwise it
/// takes dot products (`n == 1`) or a pass over the right operand's columns (`m <=`
/// [`FEW_ROWS`]), whose order differs.
pub fn dense_product_uses_dgemm(m: usize, n: usize) -> bool {
    m > FEW_ROWS && n > 1
}

/// A strided view of a dense matrix's values: cell `(i, j)` is
/// `values[offset + i * row_stride + j * col_stride]`.
#[derive(Clone, Copy)]
struct View<'a> {
    values: &'a [f64],
    offset: usize,
    rows: usize,
    cols: usize,
    row_stride: usize,
    col_stride: usize,
}

impl<'a> View<'a> {
    fn of(d: &'a DenseMatrix) -> View<'a> {
        View {
            values: &d.values,
            offset: 0,
            rows: d.rows,
            cols: d.cols,
            row_stride: d.cols,
            col_stride: 1,
        }
    }

    /// Rows `rows` and columns `cols` of the view (ranges inside it).
    fn block(self, rows: Range<usize>, cols: Range<usize>) -> View<'a> {
        debug_assert!(rows.end <= self.rows && cols.end <= self.cols);
        View {
            offset: self.offset + rows.start * self.row_stride + cols.start * self.col_stride,
            rows: rows.len(),
            cols: cols.len(),
            ..self
        }
    }

    fn t(self) -> View<'a> {
        View {
            rows: self.cols,
            cols: self.rows,
            row_stride: self.col_stride,
            col_stride: self.row_stride,
            ..self
        }
    }

    /// Whether every cell lies inside `values` (what makes handing the view to dgemm sound).
    fn in_bounds(&self) -> bool {
        if self.rows == 0 || self.cols == 0 {
            return true;
        }
        let last = (self.rows - 1)
            .checked_mul(self.row_stride)
            .and_then(|r| r.checked_add((self.cols - 1).checked_mul(self.col_stride)?))
            .and_then(|c| c.checked_add(self.offset));
        last.is_some_and(|l| l < self.values.len())
    }
}

/// `a %*% b` by dgemm whatever the shape, row-major.
fn dgemm(a: View<'_>, b: View<'_>) -> Result<Vec<f64>> {
    let (m, k, n) = (a.rows, a.cols, b.cols);
    if b.rows != k || !a.in_bounds() || !b.in_bounds() {
        return Err(mismatch(
            "a partial-reuse product over views that do not fit",
        ));
    }
    let mut out = try_alloc_zeroed(m * n)?;
    if m == 0 || n == 0 || k == 0 {
        return Ok(out);
    }
    // SAFETY: both views were checked to lie inside their slices, and `out` holds m*n values
    // written with row stride n.
    unsafe {
        matrixmultiply::dgemm(
            m,
            k,
            n,
            1.0,
            a.values.as_ptr().add(a.offset),
            a.row_stride as isize,
            a.col_stride as isize,
            b.values.as_ptr().add(b.offset),
            b.row_stride as isize,
            b.col_stride as isize,
            0.0,
            out.as_mut_ptr(),
            n as isize,
            1,
        );
    }
    Ok(out)
}

/// The cached part's values, row-major.
fn values_of(part: &Matrix, rows: usize, cols: usize) -> Result<std::borrow::Cow<'_, [f64]>> {
    if part.shape() != (rows, cols) {
        return Err(mismatch(
            "a cached part of the wrong shape for its compensation",
        ));
    }
    Ok(match part.dense_cow()? {
        std::borrow::Cow::Borrowed(d) => std::borrow::Cow::Borrowed(&d.values[..]),
        std::borrow::Cow::Owned(d) => std::borrow::Cow::Owned(d.values.to_vec()),
    })
}

fn mismatch(detail: &'static str) -> RuntimeError {
    RuntimeError::Internal(Internal::Compensation { detail })
}

fn result(rows: usize, cols: usize, values: Vec<f64>) -> Matrix {
    let nnz = count_nnz(&values);
    dense_result(rows, cols, values, nnz)
}

/// `tsmm(Z)` for `Z = cbind(X, dX)` (dense, at least one row) from `left = tsmm(X)` computed
/// by the dense kernel: `rbind(cbind(tsmm(X), t(X) dX), cbind(t(dX) X, tsmm(dX)))`, the cross
/// and new diagonal blocks by dgemm over `Z` in place, mirrored as `tsmm` mirrors.
pub fn tsmm_of_cbind(left: &Matrix, z: &DenseMatrix) -> Result<Matrix> {
    let k = left.rows();
    if k >= z.cols {
        return Err(mismatch("tsmm_of_cbind needs a left part narrower than Z"));
    }
    let zv = View::of(z);
    tsmm_of_views(
        left,
        zv.block(0..z.rows, 0..k),
        zv.block(0..z.rows, k..z.cols),
    )
}

/// [`tsmm_of_cbind`] with `X` and `dX` apart, `cbind(X, dX)` never made (LIMA's compiler
/// assistance for steplm); the caller checks that the `cbind` would have been dense.
pub fn tsmm_of_parts(left: &Matrix, x: &DenseMatrix, dx: &DenseMatrix) -> Result<Matrix> {
    if x.rows != dx.rows {
        return Err(mismatch("tsmm_of_parts needs parts with as many rows"));
    }
    tsmm_of_views(left, View::of(x), View::of(dx))
}

fn tsmm_of_views(left: &Matrix, x: View<'_>, dx: View<'_>) -> Result<Matrix> {
    let (m, k, d) = (x.rows, x.cols, dx.cols);
    let n = k + d;
    if m == 0 || d == 0 || dx.rows != m {
        return Err(mismatch("tsmm_of_cbind needs rows and columns to add"));
    }
    let top = values_of(left, k, k)?;
    let cross = dgemm(x.t(), dx)?; // k x d
    let corner = dgemm(dx.t(), dx)?; // d x d; its upper triangle is what tsmm computes
    let mut out = try_alloc_zeroed(n * n)?;
    for i in 0..n {
        let row = &mut out[i * n..(i + 1) * n];
        for (j, cell) in row.iter_mut().enumerate() {
            *cell = match (i < k, j < k) {
                (true, true) => top[i * k + j],
                (true, false) => cross[i * d + (j - k)],
                (false, true) => cross[j * d + (i - k)],
                (false, false) => {
                    let (a, b) = ((i - k).min(j - k), (i - k).max(j - k));
                    corner[a * d + b]
                }
            };
        }
    }
    Ok(result(n, n, out))
}

/// `rbind(X, dX) %*% Y` (dense `a`, `b`) from `top = X %*% Y`: the rows below `top` by dgemm.
pub fn product_of_rbind(top: &Matrix, a: &DenseMatrix, b: &DenseMatrix) -> Result<Matrix> {
    let (m, n) = (a.rows, b.cols);
    let mx = top.rows();
    let upper = values_of(top, mx, n)?;
    if mx >= m {
        return Err(mismatch(
            "product_of_rbind needs a top part shorter than the product",
        ));
    }
    let lower = dgemm(View::of(a).block(mx..m, 0..a.cols), View::of(b))?;
    let mut out = try_alloc_zeroed(m * n)?;
    out[..mx * n].copy_from_slice(&upper);
    out[mx * n..].copy_from_slice(&lower);
    Ok(result(m, n, out))
}

/// `X %*% cbind(Y, dY)` (dense `a`, `b`) from `left = X %*% Y`: the columns right of `left`
/// by dgemm.
pub fn product_of_cbind(left: &Matrix, a: &DenseMatrix, b: &DenseMatrix) -> Result<Matrix> {
    let (m, n) = (a.rows, b.cols);
    let ny = left.cols();
    let lv = values_of(left, m, ny)?;
    if ny >= n {
        return Err(mismatch(
            "product_of_cbind needs a left part narrower than the product",
        ));
    }
    let right = dgemm(View::of(a), View::of(b).block(0..b.rows, ny..n))?;
    let d = n - ny;
    let mut out = try_alloc_zeroed(m * n)?;
    for i in 0..m {
        out[i * n..i * n + ny].copy_from_slice(&lv[i * ny..(i + 1) * ny]);
        out[i * n + ny..(i + 1) * n].copy_from_slice(&right[i * d..(i + 1) * d]);
    }
    Ok(result(m, n, out))
}

/// Rows `rows` and columns `cols` of a cached product, as the product of the indexed operand
/// returns them.
pub fn block_of_product(full: &Matrix, rows: Range<usize>, cols: Range<usize>) -> Result<Matrix> {
    let (fm, fn_) = full.shape();
    if rows.end > fm || cols.end > fn_ || rows.start > rows.end || cols.start > cols.end {
        return Err(mismatch("a block outside the cached product"));
    }
    let fv = values_of(full, fm, fn_)?;
    let (m, n) = (rows.len(), cols.len());
    let mut out = try_alloc_zeroed(m * n)?;
    for (i, r) in rows.enumerate() {
        out[i * n..(i + 1) * n].copy_from_slice(&fv[r * fn_ + cols.start..r * fn_ + cols.end]);
    }
    Ok(result(m, n, out))
}

/// `t(rbind(A, dA)) %*% rbind(y, dy)` for column vectors (dense `da`, `dy`) from
/// `top = t(A) %*% y`: the dense kernel sums each output over the rows in order from zero
/// (`matmul_tn`'s vector-matrix pass), so the rows of `dA` continue from `top`.
pub fn transposed_product_of_rbind(
    top: &Matrix,
    da: &DenseMatrix,
    dy: &DenseMatrix,
) -> Result<Matrix> {
    let k = da.cols;
    if dy.cols != 1 || dy.rows != da.rows {
        return Err(mismatch(
            "transposed_product_of_rbind needs a column vector as tall as dA",
        ));
    }
    let mut out = values_of(top, k, 1)?.into_owned();
    for (r, &w) in dy.values.iter().enumerate() {
        for (o, &x) in out.iter_mut().zip(&da.values[r * k..(r + 1) * k]) {
            *o += w * x;
        }
    }
    Ok(result(k, 1, out))
}

/// The column aggregate `op` of `Z = cbind(X, dX)` (dense) from `left`, that of `X` over
/// dense values: the aggregates of the columns right of `left`, appended.
pub fn col_aggregate_of_cbind(left: &Matrix, z: &DenseMatrix, op: AggOp) -> Result<Matrix> {
    let (m, n) = (z.rows, z.cols);
    let k = left.cols();
    let lv = values_of(left, 1, k)?;
    if k >= n {
        return Err(mismatch(
            "col_aggregate_of_cbind needs a left part narrower than Z",
        ));
    }
    let d = n - k;
    let mut right = try_alloc_zeroed(m * d)?;
    for i in 0..m {
        right[i * d..(i + 1) * d].copy_from_slice(&z.values[i * n + k..(i + 1) * n]);
    }
    let part = Matrix::Dense(DenseMatrix {
        rows: m,
        cols: d,
        nnz: count_nnz(&right),
        values: right.into(),
    });
    let rv = aggregate(&part, op, Direction::Col)?;
    let rv = values_of(&rv, 1, d)?;
    let mut out = Vec::with_capacity(n);
    out.extend_from_slice(&lv);
    out.extend_from_slice(&rv);
    Ok(result(1, n, out))
}

#[cfg(test)]
mod tests {
    //! Each compensation against the kernel it stands in for, bit for bit, over shapes that
    //! cross dgemm's `kc` blocks and `tsmm`'s column blocks, the parallel thresholds and the
    //! wide column path, with NaN and infinities among the values.
    use super::super::testutil::rand;
    use super::super::{cbind, matmul, rbind, slice, tsmm};
    use super::*;

    /// A dense matrix (never converted to CSR, whatever its zeros) with specials sprinkled in.
    fn dense(rows: usize, cols: usize, density: f64, seed: u64, specials: bool) -> DenseMatrix {
        let mut d = rand(rows, cols, density, seed).to_dense().unwrap();
        let mut v = d.values.to_vec();
        if specials && v.len() > 7 {
            let n = v.len();
            v[n / 3] = f64::NAN;
            v[n / 2] = f64::INFINITY;
            v[n - 1] = f64::NEG_INFINITY;
            v[1] = -0.0;
        }
        d.nnz = count_nnz(&v);
        d.values = v.into();
        d
    }

    fn dense_of(m: &Matrix) -> DenseMatrix {
        m.to_dense().unwrap()
    }

    /// The same format and bitwise equal values, NaN equal to NaN: dgemm's NaN sign depends on
    /// the shape it is called with (it may compute the transposed problem, and a NaN's sign
    /// follows operand order), for the kernels as much as for the compensations, and no DML
    /// operation can tell NaNs apart.
    fn identical(a: &Matrix, b: &Matrix) -> bool {
        let (x, y) = (dense_of(a), dense_of(b));
        a.shape() == b.shape()
            && a.is_sparse() == b.is_sparse()
            && x.values
                .iter()
                .zip(y.values.iter())
                .all(|(x, y)| x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan()))
    }

    const SHAPES: &[(usize, usize, usize)] = &[
        // (rows, left columns, added columns)
        (2, 1, 1),
        (7, 3, 1),
        (40, 5, 2),
        (300, 20, 1),
        (600, 270, 3),
        (1100, 30, 40),
    ];

    #[test]
    fn tsmm_of_cbind_is_tsmm_of_the_concatenation() {
        for (s, &(m, k, d)) in SHAPES.iter().enumerate() {
            for density in [1.0, 0.3] {
                let x = Matrix::Dense(dense(m, k, density, s as u64, false));
                let dx = Matrix::Dense(dense(m, d, density, 100 + s as u64, false));
                let z = dense_of(&cbind(&[&x, &dx]).unwrap());
                let want = tsmm(&Matrix::Dense(z.clone())).unwrap();
                let left = tsmm(&x).unwrap();
                let got = tsmm_of_cbind(&left, &z).unwrap();
                assert!(identical(&want, &got), "{m}x{k}+{d} density {density}");
                let got = tsmm_of_parts(&left, &dense_of(&x), &dense_of(&dx)).unwrap();
                assert!(
                    identical(&want, &got),
                    "parts {m}x{k}+{d} density {density}"
                );
            }
        }
    }

    #[test]
    fn products_of_rbind_cbind_and_blocks_are_the_full_products() {
        for (s, &(m, k, d)) in SHAPES.iter().enumerate() {
            if m < 4 {
                continue;
            }
            let n = k + d + 1;
            let x = Matrix::Dense(dense(m, k, 1.0, s as u64, true));
            let dx = Matrix::Dense(dense(2 + d, k, 1.0, 50 + s as u64, false));
            let y = Matrix::Dense(dense(k, n, 0.4, 200 + s as u64, false));
            let dy = Matrix::Dense(dense(k, d, 1.0, 300 + s as u64, false));
            // rbind(X, dX) %*% Y
            let a = dense_of(&rbind(&[&x, &dx]).unwrap());
            let want = matmul(&Matrix::Dense(a.clone()), &y).unwrap();
            let top = matmul(&x, &y).unwrap();
            let got = product_of_rbind(&top, &a, &dense_of(&y)).unwrap();
            assert!(identical(&want, &got), "rbind {m}x{k}");
            // X %*% cbind(Y, dY)
            let b = dense_of(&cbind(&[&y, &dy]).unwrap());
            let want = matmul(&x, &Matrix::Dense(b.clone())).unwrap();
            let left = matmul(&x, &y).unwrap();
            let got = product_of_cbind(&left, &dense_of(&x), &b).unwrap();
            assert!(identical(&want, &got), "cbind {m}x{k}");
            // X %*% Y[, 2:n] and X[2:m, ] %*% Y
            let full = matmul(&x, &y).unwrap();
            let ys = Matrix::Dense(dense_of(&slice(&y, 0..k, 1..n).unwrap()));
            let want = matmul(&x, &ys).unwrap();
            let got = block_of_product(&full, 0..m, 1..n).unwrap();
            assert!(identical(&want, &got), "column block {m}x{k}");
            let xs = Matrix::Dense(dense_of(&slice(&x, 1..m, 0..k).unwrap()));
            let want = matmul(&xs, &y).unwrap();
            let got = block_of_product(&full, 1..m, 0..n).unwrap();
            assert!(identical(&want, &got), "row block {m}x{k}");
        }
    }

    #[test]
    fn transposed_products_of_rbind_continue_the_vector_matrix_pass() {
        use super::super::matmul_tn;
        for (s, &(m, k, d)) in SHAPES.iter().enumerate() {
            let a = Matrix::Dense(dense(m, k, 1.0, s as u64, true));
            let da = Matrix::Dense(dense(d + 1, k, 0.5, 40 + s as u64, false));
            let y = Matrix::Dense(dense(m, 1, 1.0, 80 + s as u64, false));
            let dy = Matrix::Dense(dense(d + 1, 1, 1.0, 90 + s as u64, false));
            let x = Matrix::Dense(dense_of(&rbind(&[&a, &da]).unwrap()));
            let yy = Matrix::Dense(dense_of(&rbind(&[&y, &dy]).unwrap()));
            let want = matmul_tn(&x, &yy).unwrap();
            let top = matmul_tn(&a, &y).unwrap();
            let got = transposed_product_of_rbind(&top, &dense_of(&da), &dense_of(&dy)).unwrap();
            assert!(identical(&want, &got), "{m}x{k}+{d}");
        }
    }

    #[test]
    fn column_aggregates_of_cbind_are_those_of_the_concatenation() {
        let ops = [
            AggOp::Sum,
            AggOp::SumSq,
            AggOp::Mean,
            AggOp::Var,
            AggOp::Sd,
            AggOp::Prod,
            AggOp::Min,
            AggOp::Max,
        ];
        // The last shapes cross the parallel threshold, by rows and by width.
        let shapes = [(1, 1, 1), (9, 2, 3), (3000, 7, 5), (70, 2100, 40)];
        for (s, &(m, k, d)) in shapes.iter().enumerate() {
            let x = Matrix::Dense(dense(m, k, 0.7, s as u64, true));
            let dx = Matrix::Dense(dense(m, d, 1.0, 10 + s as u64, true));
            let z = dense_of(&cbind(&[&x, &dx]).unwrap());
            for op in ops {
                let want = aggregate(&Matrix::Dense(z.clone()), op, Direction::Col).unwrap();
                let left = aggregate(&x, op, Direction::Col).unwrap();
                let got = col_aggregate_of_cbind(&left, &z, op).unwrap();
                assert!(identical(&want, &got), "{op:?} over {m}x{k}+{d}");
            }
        }
    }

    #[test]
    fn parts_of_the_wrong_shape_are_errors_not_panics() {
        let z = dense(5, 4, 1.0, 1, false);
        let not_square = Matrix::Dense(dense(3, 2, 1.0, 2, false));
        assert!(tsmm_of_cbind(&not_square, &z).is_err());
        assert!(col_aggregate_of_cbind(&not_square, &z, AggOp::Sum).is_err());
        let wrong = Matrix::Dense(dense(3, 3, 1.0, 2, false));
        assert!(product_of_rbind(&wrong, &z, &dense(4, 2, 1.0, 3, false)).is_err());
        assert!(product_of_cbind(&wrong, &z, &dense(4, 2, 1.0, 3, false)).is_err());
        assert!(block_of_product(&wrong, 0..4, 0..1).is_err());
    }
}
