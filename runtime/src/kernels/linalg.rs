//! The functions of linear algebra computed through a decomposition: `inv`, `cholesky`, `det`
//! (one result) and `eigen`, `svd`, `lu`, `qr` (several results, computed once per call), with
//! SystemDS 3.4's shapes, orderings and errors (its `LibCommonsMath`, which calls Apache
//! Commons Math). `inv`, `cholesky`, `det` and `lu` use the `faer` crate.
//!
//! `eigen` and `svd` run Commons Math's own algorithms ([`super::symmetric_eigen`],
//! [`super::commons_svd`]), so their vectors are SystemDS's, signs included. Where `lu`'s
//! result is defined only up to the algorithm (the order of equal pivots), lafuse gives faer's:
//! the products it forms (`P %*% A` and `L %*% U`) are SystemDS's.
//! `qr` returns Commons Math's Householder vectors `H` and its `R`, a form faer does not
//! expose, so it too runs Commons Math's algorithm ([`super::householder_qr`]).

use super::dense_result;
use super::symmetric_eigen::{symmetric_eigen, NotConverged, COMMONS_EPSILON};
use crate::error::{Result, RuntimeError};
use crate::matrix::{count_nnz, try_with_capacity, Matrix};
use faer::linalg::solvers::DenseSolveCore;
use faer::{Mat, MatRef, Side};
use lafuse_core::{DecompOp, LinAlgOp};

/// The value of `inv`, `cholesky`, `sqrtMatrixJava` (a matrix) or `det`, `trace` (a scalar).
#[derive(Debug)]
pub enum LinAlgValue {
    Matrix(Matrix),
    Scalar(f64),
}

fn failed(function: &'static str, problem: &'static str) -> RuntimeError {
    RuntimeError::Decomposition { function, problem }
}

/// The order of a square matrix (SystemDS's "must be square" errors otherwise).
fn square(a: &Matrix, function: &'static str) -> Result<usize> {
    if a.rows() != a.cols() {
        return Err(RuntimeError::FunctionShape {
            function,
            expected: "a square matrix",
            shape: a.shape(),
        });
    }
    Ok(a.rows())
}

/// `faer` does not promise to terminate (or not to panic) on NaN or infinite input; such
/// input is an error here.
fn finite(a: &Matrix, function: &'static str) -> Result<()> {
    if a.all_finite() {
        Ok(())
    } else {
        Err(failed(function, "the matrix holds NaN or infinite values"))
    }
}

fn to_faer(m: &Matrix) -> Result<Mat<f64>> {
    let d = m.dense_cow()?;
    let c = d.cols;
    Ok(Mat::from_fn(d.rows, c, |i, j| d.values[i * c + j]))
}

/// A matrix of `faer`'s values (`-0.0` written as `0.0`, as a sparse result would hold it).
fn from_faer(m: MatRef<'_, f64>) -> Result<Matrix> {
    let (r, c) = (m.nrows(), m.ncols());
    let mut v = try_with_capacity(r * c)?;
    for i in 0..r {
        for j in 0..c {
            v.push(m[(i, j)] + 0.0);
        }
    }
    let nnz = count_nnz(&v);
    Ok(dense_result(r, c, v, nnz))
}

/// Whether `a` is symmetric within `relative` (Commons Math's test: each pair differs by at
/// most `relative` times the larger magnitude).
fn symmetric(a: &Mat<f64>, relative: f64) -> bool {
    let n = a.nrows();
    (0..n).all(|i| {
        (i + 1..n).all(|j| {
            let (x, y) = (a[(i, j)], a[(j, i)]);
            (x - y).abs() <= x.abs().max(y.abs()) * relative
        })
    })
}

/// `inv(A)`, `cholesky(A)`, `det(A)` or `trace(A)`.
pub fn linalg(op: LinAlgOp, a: &Matrix) -> Result<LinAlgValue> {
    let name = op.name();
    let n = square(a, name)?;
    if op == LinAlgOp::Trace {
        // No decomposition: NaN and infinities just add up, as in SystemDS's Kahan sum.
        let mut sum = super::aggregate::Kahan::default();
        for i in 0..n {
            sum.add(a.get(i, i));
        }
        return Ok(LinAlgValue::Scalar(sum.sum));
    }
    finite(a, name)?;
    if op == LinAlgOp::SqrtMatrix {
        return square_root(a).map(LinAlgValue::Matrix);
    }
    let m = to_faer(a)?;
    match op {
        LinAlgOp::Inverse => {
            if n == 0 {
                return Ok(LinAlgValue::Matrix(Matrix::zeros(0, 0)?));
            }
            // SystemDS inverts through QR and calls the matrix singular where a diagonal
            // entry of R is exactly zero.
            let qr = m.as_ref().qr();
            let r = qr.thin_R();
            if (0..n).any(|i| r[(i, i)] == 0.0) {
                return Err(failed(name, "the matrix is singular"));
            }
            Ok(LinAlgValue::Matrix(from_faer(qr.inverse().as_ref())?))
        }
        LinAlgOp::Cholesky => {
            if n == 0 {
                return Ok(LinAlgValue::Matrix(Matrix::zeros(0, 0)?));
            }
            // Commons Math's thresholds as SystemDS sets them: symmetric within 1e-6.
            if !symmetric(&m, 1e-6) {
                return Err(failed(name, "the matrix is not symmetric"));
            }
            let llt = m
                .as_ref()
                .llt(Side::Lower)
                .map_err(|_| failed(name, "the matrix is not positive definite"))?;
            Ok(LinAlgValue::Matrix(from_faer(llt.L())?))
        }
        LinAlgOp::Trace | LinAlgOp::SqrtMatrix => {
            unreachable!("answered before the decomposition")
        }
        LinAlgOp::Det => {
            if n == 0 {
                return Ok(LinAlgValue::Scalar(1.0));
            }
            let lu = m.as_ref().partial_piv_lu();
            let u = lu.U();
            // Commons Math's LU calls a pivot below 1e-11 singular, and the determinant 0.
            if (0..n).any(|i| u[(i, i)].abs() < 1e-11) {
                return Ok(LinAlgValue::Scalar(0.0));
            }
            let (fwd, _) = lu.P().arrays();
            let mut det = permutation_sign(fwd);
            for i in 0..n {
                det *= u[(i, i)];
            }
            Ok(LinAlgValue::Scalar(det))
        }
    }
}

/// `V sqrt(D) t(V)` for the eigendecomposition `V D t(V)` of a symmetric `a` (the symmetric
/// test of `eigen`); an eigenvalue that is not positive (after `eigen` set those negligible
/// next to the largest to zero) is an error, as in Commons Math's `getSquareRoot`.
fn square_root(a: &Matrix) -> Result<Matrix> {
    let name = LinAlgOp::SqrtMatrix.name();
    let parts = decompose(DecompOp::Eigen, a).map_err(|e| match e {
        RuntimeError::Decomposition { problem, .. } => failed(name, problem),
        other => other,
    })?;
    let (values, vectors) = (&parts[0], &parts[1]);
    let n = values.rows();
    let mut scaled = vectors.to_dense()?.values.to_vec();
    for j in 0..n {
        let v = values.get(j, 0);
        if v <= 0.0 {
            return Err(failed(
                name,
                "the matrix has an eigenvalue that is not positive (zero or negative)",
            ));
        }
        let s = v.sqrt();
        for i in 0..n {
            scaled[i * n + j] *= s;
        }
    }
    let scaled = Matrix::from_dense_values(n, n, scaled)?;
    super::matmul(&scaled, &super::reorg::transpose(vectors)?)
}

/// Java's `Math.signum`: zero (of either sign) stays as it is.
fn signum(v: f64) -> f64 {
    if v == 0.0 {
        v
    } else {
        v.signum()
    }
}

/// SystemDS's `sortEVs`: a selection sort by ascending eigenvalue that swaps whole vector
/// columns (so equal eigenvalues end in the order it leaves them), `-0.0` written as `0.0`.
fn sort_ascending(mut values: Vec<f64>, mut vectors: Vec<f64>, n: usize) -> (Vec<f64>, Vec<f64>) {
    for i in 0..n {
        let mut k = i;
        let mut p = values[i];
        for (j, &v) in values.iter().enumerate().skip(i + 1) {
            if v < p {
                k = j;
                p = v;
            }
        }
        if k != i {
            values[k] = values[i];
            values[i] = p;
            for row in vectors.chunks_exact_mut(n) {
                row.swap(i, k);
            }
        }
    }
    for v in values.iter_mut().chain(vectors.iter_mut()) {
        *v += 0.0;
    }
    (values, vectors)
}

/// The sign of a permutation: -1 for an odd number of transpositions.
fn permutation_sign(perm: &[usize]) -> f64 {
    let mut seen = vec![false; perm.len()];
    let mut sign = 1.0;
    for start in 0..perm.len() {
        let mut len = 0;
        let mut i = start;
        while !seen[i] {
            seen[i] = true;
            i = perm[i];
            len += 1;
        }
        if len > 0 && len % 2 == 0 {
            sign = -sign;
        }
    }
    sign
}

/// All results of the decomposition `op` of `a`, in DML's order (see [`DecompOp`]).
pub fn decompose(op: DecompOp, a: &Matrix) -> Result<Vec<Matrix>> {
    let name = op.name();
    match op {
        DecompOp::Eigen => {
            let n = square(a, name)?;
            finite(a, name)?;
            if n == 0 {
                return Ok(vec![Matrix::zeros(0, 1)?, Matrix::zeros(0, 0)?]);
            }
            let m = to_faer(a)?;
            // Commons Math's test for its symmetric algorithm (10 n^2 times its epsilon,
            // 2^-53); lafuse has no other (SystemDS would take the real parts of a general
            // decomposition).
            let relative = 10.0 * (n * n) as f64 * COMMONS_EPSILON;
            if !symmetric(&m, relative) {
                return Err(failed(
                    name,
                    "the matrix is not symmetric (lafuse supports symmetric matrices only)",
                ));
            }
            let values = a.dense_cow()?.values.to_vec();
            let (values, vectors) = match symmetric_eigen(&values, n) {
                Ok(done) => done,
                // SystemDS retries once on a matrix moved by 1e-8 away from zero entrywise
                // (its `computeEigenRegularized`).
                Err(NotConverged) => {
                    let moved: Vec<f64> = values.iter().map(|&v| v + signum(v) * 1e-8).collect();
                    symmetric_eigen(&moved, n)
                        .map_err(|_| failed(name, "the decomposition did not converge"))?
                }
            };
            let (values, vectors) = sort_ascending(values, vectors, n);
            let nnz = count_nnz(&values);
            let values = dense_result(n, 1, values, nnz);
            let nnz = count_nnz(&vectors);
            Ok(vec![values, dense_result(n, n, vectors, nnz)])
        }
        DecompOp::Svd => {
            // No check of the values: as in SystemDS, NaN and infinities go through the
            // algorithm (which ends with NaN where they are).
            let (r, c) = a.shape();
            let p = r.min(c);
            if p == 0 {
                return Ok(vec![
                    Matrix::zeros(r, 0)?,
                    Matrix::zeros(0, 0)?,
                    Matrix::zeros(c, 0)?,
                ]);
            }
            // Commons Math's algorithm (`commons_svd`): SystemDS's singular vectors, signs
            // included.
            let values = a.dense_cow()?.values.to_vec();
            let (u, s, v) = super::commons_svd::commons_svd(&values, r, c);
            let mut sigma = vec![0.0; p * p];
            for (i, &x) in s.iter().enumerate() {
                sigma[i * p + i] = x;
            }
            let result = |rows: usize, cols: usize, vals: Vec<f64>| {
                let nnz = count_nnz(&vals);
                dense_result(rows, cols, vals, nnz)
            };
            Ok(vec![result(r, p, u), result(p, p, sigma), result(c, p, v)])
        }
        DecompOp::Lu => {
            let n = square(a, name)?;
            finite(a, name)?;
            if n == 0 {
                return Ok(vec![
                    Matrix::zeros(0, 0)?,
                    Matrix::zeros(0, 0)?,
                    Matrix::zeros(0, 0)?,
                ]);
            }
            let lu = to_faer(a)?.as_ref().partial_piv_lu();
            let u = lu.U();
            if (0..n).any(|i| u[(i, i)].abs() < 1e-11) {
                return Err(failed(
                    name,
                    "the matrix is singular (LU needs a non-singular matrix)",
                ));
            }
            // Row i of P %*% A is row fwd[i] of A.
            let (fwd, _) = lu.P().arrays();
            let p = Mat::from_fn(n, n, |i, j| if fwd[i] == j { 1.0 } else { 0.0 });
            Ok(vec![
                from_faer(p.as_ref())?,
                from_faer(lu.L())?,
                from_faer(u)?,
            ])
        }
        DecompOp::Qr => {
            // Commons Math's algorithm (`householder_qr`): SystemDS's H and R, signs included.
            let (r, c) = a.shape();
            let values = a.dense_cow()?.values.to_vec();
            let (h, rm) = super::householder_qr::householder_qr(&values, r, c);
            let (nh, nr) = (count_nnz(&h), count_nnz(&rm));
            Ok(vec![dense_result(r, c, h, nh), dense_result(r, c, rm, nr)])
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::matmul;

    fn m(r: usize, c: usize, v: &[f64]) -> Matrix {
        Matrix::from_dense_values(r, c, v.to_vec()).unwrap()
    }

    fn close(a: &Matrix, b: &Matrix, tol: f64) -> bool {
        a.shape() == b.shape()
            && (0..a.rows())
                .all(|i| (0..a.cols()).all(|j| (a.get(i, j) - b.get(i, j)).abs() <= tol))
    }

    const A: [f64; 9] = [4.0, 1.0, 2.0, 1.0, 3.0, 0.5, 2.0, 0.5, 5.0];

    #[test]
    fn trace_sums_the_diagonal_and_the_square_root_squares_back() {
        let a = m(3, 3, &A);
        match linalg(LinAlgOp::Trace, &a).unwrap() {
            LinAlgValue::Scalar(t) => assert_eq!(t, 12.0),
            other => panic!("{other:?}"),
        }
        let inf = m(2, 2, &[f64::INFINITY, 0.0, 0.0, 1.0]);
        assert!(matches!(
            linalg(LinAlgOp::Trace, &inf).unwrap(),
            LinAlgValue::Scalar(t) if t == f64::INFINITY
        ));
        assert!(linalg(LinAlgOp::Trace, &m(2, 3, &[0.0; 6])).is_err());
        let LinAlgValue::Matrix(b) = linalg(LinAlgOp::SqrtMatrix, &a).unwrap() else {
            panic!("a matrix")
        };
        assert!(close(&matmul(&b, &b).unwrap(), &a, 1e-12));
        assert!(close(
            &b,
            &super::super::reorg::transpose(&b).unwrap(),
            1e-12
        ));
        // Negative eigenvalues and asymmetry are errors, as in Commons Math.
        let indefinite = m(2, 2, &[1.0, 2.0, 2.0, 1.0]);
        assert!(linalg(LinAlgOp::SqrtMatrix, &indefinite).is_err());
        // A zero eigenvalue too (SystemDS 3.4: MathUnsupportedOperationException).
        let singular = m(2, 2, &[1.0, 0.0, 0.0, 0.0]);
        assert!(linalg(LinAlgOp::SqrtMatrix, &singular).is_err());
        assert!(linalg(LinAlgOp::SqrtMatrix, &m(2, 2, &[1.0, 2.0, 0.0, 1.0])).is_err());
    }

    #[test]
    fn single_results_match_systemds() {
        let a = m(3, 3, &A);
        // SystemDS 3.4: det(A) = 44.0, cholesky's first column 2, 0.5, 1.
        match linalg(LinAlgOp::Det, &a).unwrap() {
            LinAlgValue::Scalar(d) => assert!((d - 44.0).abs() < 1e-12),
            other => panic!("{other:?}"),
        }
        let LinAlgValue::Matrix(l) = linalg(LinAlgOp::Cholesky, &a).unwrap() else {
            panic!()
        };
        assert!((l.get(0, 0) - 2.0).abs() < 1e-15 && (l.get(1, 0) - 0.5).abs() < 1e-15);
        assert_eq!(l.get(0, 1), 0.0);
        let lt = crate::kernels::transpose(&l).unwrap();
        assert!(close(&matmul(&l, &lt).unwrap(), &a, 1e-12));
        let LinAlgValue::Matrix(inv) = linalg(LinAlgOp::Inverse, &a).unwrap() else {
            panic!()
        };
        let eye = m(3, 3, &[1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0]);
        assert!(close(&matmul(&a, &inv).unwrap(), &eye, 1e-12));
        let singular = m(2, 2, &[1.0, 2.0, 2.0, 4.0]);
        assert!(linalg(LinAlgOp::Inverse, &singular).is_err());
        assert!(linalg(LinAlgOp::Cholesky, &singular).is_err());
        assert!(linalg(LinAlgOp::Det, &m(2, 3, &[0.0; 6])).is_err());
        let swap = m(2, 2, &[0.0, 1.0, 1.0, 0.0]);
        match linalg(LinAlgOp::Det, &swap).unwrap() {
            LinAlgValue::Scalar(d) => assert_eq!(d, -1.0),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn decompositions_reconstruct_their_input() {
        let a = m(3, 3, &A);
        let ev = decompose(DecompOp::Eigen, &a).unwrap();
        // SystemDS 3.4 prints the eigenvalues 2.097, 3.072, 6.831 (ascending).
        assert!(ev[0].get(0, 0) < ev[0].get(1, 0) && ev[0].get(1, 0) < ev[0].get(2, 0));
        assert!((ev[0].get(2, 0) - 6.831).abs() < 1e-3);
        let d = crate::kernels::reorg::diag(&ev[0]).unwrap();
        let vt = crate::kernels::transpose(&ev[1]).unwrap();
        let back = matmul(&matmul(&ev[1], &d).unwrap(), &vt).unwrap();
        assert!(close(&back, &a, 1e-12));
        let b = m(4, 3, &[1., 2., 3., 4., 5., 6., 7., 8., 10., 1., 0., 2.]);
        let usv = decompose(DecompOp::Svd, &b).unwrap();
        assert_eq!(
            (usv[0].shape(), usv[1].shape(), usv[2].shape()),
            ((4, 3), (3, 3), (3, 3))
        );
        assert!((usv[1].get(0, 0) - 17.511).abs() < 1e-3);
        let vt = crate::kernels::transpose(&usv[2]).unwrap();
        let back = matmul(&matmul(&usv[0], &usv[1]).unwrap(), &vt).unwrap();
        assert!(close(&back, &b, 1e-12));
        let c = m(3, 3, &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 10.0]);
        let plu = decompose(DecompOp::Lu, &c).unwrap();
        let pa = matmul(&plu[0], &c).unwrap();
        assert!(close(&pa, &matmul(&plu[1], &plu[2]).unwrap(), 1e-12));
        // Partial pivoting takes the largest pivot: row 3 of C first.
        assert_eq!(plu[0].get(0, 2), 1.0);
        assert!(decompose(DecompOp::Lu, &m(2, 2, &[1.0, 2.0, 2.0, 4.0])).is_err());
        assert!(decompose(DecompOp::Eigen, &m(2, 2, &[1.0, 2.0, 3.0, 4.0])).is_err());
    }

    /// Expected values and vectors printed by SystemDS 3.4 (`print(toString(evec,
    /// decimal=17))` after `[ev, evec] = eigen(A)`): the signs, and for the repeated
    /// eigenvalues of B and K the basis of the eigenspace, are those of Commons Math's
    /// algorithm.
    #[test]
    fn eigen_vectors_are_systemds_own_signs_included() {
        // (order, matrix, values, vectors), row-major.
        type Case<'a> = (usize, &'a [f64], &'a [f64], &'a [f64]);
        let cases: [Case; 4] = [
            (
                3,
                &[2., 1., 1., 1., 2., 1., 1., 1., 2.],
                &[0.9999999999999987, 0.9999999999999998, 3.9999999999999982],
                &[
                    -0.6182839166014794,
                    0.5332838504385833,
                    -0.5773502691896263,
                    0.7709793202085342,
                    0.268807653308929,
                    -0.5773502691896252,
                    -0.1526954036070542,
                    -0.8020915037475124,
                    -0.5773502691896256,
                ],
            ),
            (
                3,
                &[-4., 1., 0., 1., -3., 2., 0., 2., -5.],
                &[-6.361468766185827, -4.167449191108535, -1.4710820427056386],
                &[
                    0.2318039795131881,
                    0.9167566816845836,
                    -0.3253061660474956,
                    -0.5473978574979733,
                    -0.15351016479142832,
                    -0.8226726049360935,
                    0.8041284105716442,
                    -0.3687706819859463,
                    -0.4662463763067138,
                ],
            ),
            (
                4,
                &[
                    1., 1., 0., 0., 1., 1., 0., 0., 0., 0., 1., 1., 0., 0., 1., 1.,
                ],
                &[2.2e-16, 2.2e-16, 1.9999999999999998, 1.9999999999999998],
                &[
                    0.7071067811865475,
                    0.0,
                    0.7071067811865475,
                    0.0,
                    -0.7071067811865475,
                    0.0,
                    0.7071067811865475,
                    0.0,
                    0.0,
                    0.7071067811865475,
                    0.0,
                    0.7071067811865475,
                    0.0,
                    -0.7071067811865475,
                    0.0,
                    0.7071067811865475,
                ],
            ),
            (
                4,
                &[
                    4., -2., 1., 3., -2., 0., 5., -1., 1., 5., -3., 2., 3., -1., 2., 6.,
                ],
                &[
                    -7.297094301579997,
                    1.3828585985587116,
                    4.1711415881117695,
                    8.74309411490952,
                ],
                &[
                    0.13941622224511138,
                    0.7399406467552547,
                    0.29634274356208884,
                    -0.5875644088884308,
                    0.5924007281596053,
                    0.3052787105379805,
                    -0.7287466733365964,
                    0.15746292347432608,
                    -0.7826319595749418,
                    0.2737589918655094,
                    -0.5467398116624482,
                    -0.11669965110477838,
                    0.1308117353403648,
                    -0.5332436240073226,
                    -0.28667898908404277,
                    -0.7850825972918584,
                ],
            ),
        ];
        for (n, a, values, vectors) in cases {
            let ev = decompose(DecompOp::Eigen, &m(n, n, a)).unwrap();
            // SystemDS printed 17 decimals: 1e-16 is its last digit.
            assert!(close(&ev[0], &m(n, 1, values), 1e-16), "{a:?}: {:?}", ev[0]);
            assert!(
                close(&ev[1], &m(n, n, vectors), 1e-16),
                "{a:?}: {:?}",
                ev[1]
            );
        }
        // Diagonal and 1x1 matrices: the unit vectors, sorted ascending, with no sign change.
        let ev = decompose(
            DecompOp::Eigen,
            &m(3, 3, &[2., 0., 0., 0., -1., 0., 0., 0., 5.]),
        )
        .unwrap();
        assert!(close(&ev[0], &m(3, 1, &[-1., 2., 5.]), 0.0));
        assert!(close(
            &ev[1],
            &m(3, 3, &[0., 1., 0., 1., 0., 0., 0., 0., 1.]),
            0.0
        ));
        let ev = decompose(DecompOp::Eigen, &m(1, 1, &[-2.5])).unwrap();
        assert!(close(&ev[0], &m(1, 1, &[-2.5]), 0.0) && close(&ev[1], &m(1, 1, &[1.]), 0.0));
    }
}
