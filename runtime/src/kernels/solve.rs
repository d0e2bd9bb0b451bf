//! `solve(A, b)`: dense LU factorisation with partial pivoting.

use super::dense_result;
use crate::error::{Result, RuntimeError, ShapeOp};
use crate::matrix::{count_nnz, Matrix, PAR_THRESHOLD};
use rayon::prelude::*;

/// Solves `A X = B` for square `A` (n x n) and `B` (n x k). Non-square `A`, mismatched `B` and
/// (numerically) singular `A` are user errors.
pub fn solve(a: &Matrix, b: &Matrix) -> Result<Matrix> {
    let n = a.rows();
    if a.cols() != n {
        return Err(RuntimeError::NotSquare { shape: a.shape() });
    }
    if b.rows() != n {
        return Err(RuntimeError::ShapeMismatch {
            op: ShapeOp::Solve,
            left: a.shape(),
            right: b.shape(),
        });
    }
    let k = b.cols();
    if n == 0 || k == 0 {
        return Matrix::zeros(n, k);
    }
    // `to_dense` copies, so the vectors are moved out, not copied again.
    let mut lu = a.to_dense()?.values.into_vec();
    let mut x = b.to_dense()?.values.into_vec();
    // Pivots below this are treated as zero: the matrix is singular to working precision.
    let scale = lu.iter().fold(0.0f64, |s, v| s.max(v.abs()));
    let tol = scale * n as f64 * f64::EPSILON;
    let singular = || RuntimeError::Singular { order: n };
    if scale == 0.0 {
        return Err(singular());
    }
    for c in 0..n {
        // Partial pivoting: the largest magnitude in column c at or below the diagonal.
        let mut p = c;
        let mut best = lu[c * n + c].abs();
        for r in c + 1..n {
            let v = lu[r * n + c].abs();
            if v > best {
                best = v;
                p = r;
            }
        }
        if best <= tol {
            return Err(singular());
        }
        if p != c {
            for j in 0..n {
                lu.swap(c * n + j, p * n + j);
            }
            for j in 0..k {
                x.swap(c * k + j, p * k + j);
            }
        }
        let (top, below) = lu.split_at_mut((c + 1) * n);
        let prow = &top[c * n..];
        let pivot = prow[c];
        let (xtop, xbelow) = x.split_at_mut((c + 1) * k);
        let xp = &xtop[c * k..];
        let update = |(row, xr): (&mut [f64], &mut [f64])| {
            let l = row[c] / pivot;
            row[c] = l;
            if l != 0.0 {
                for (o, &u) in row[c + 1..].iter_mut().zip(&prow[c + 1..]) {
                    *o -= l * u;
                }
                for (o, &u) in xr.iter_mut().zip(xp) {
                    *o -= l * u;
                }
            }
        };
        let rows_left = n - c - 1;
        if rows_left * (n - c) >= PAR_THRESHOLD {
            below
                .par_chunks_mut(n)
                .zip(xbelow.par_chunks_mut(k))
                .for_each(update);
        } else {
            below
                .chunks_mut(n)
                .zip(xbelow.chunks_mut(k))
                .for_each(update);
        }
    }
    // Back substitution with U, all right-hand sides at once (vectorised across them).
    for c in (0..n).rev() {
        let pivot = lu[c * n + c];
        let (head, tail) = x.split_at_mut((c + 1) * k);
        let xc = &mut head[c * k..];
        for j in c + 1..n {
            let u = lu[c * n + j];
            if u != 0.0 {
                for (o, &v) in xc.iter_mut().zip(&tail[(j - c - 1) * k..(j - c) * k]) {
                    *o -= u * v;
                }
            }
        }
        for o in xc.iter_mut() {
            *o /= pivot;
        }
    }
    let nnz = count_nnz(&x);
    Ok(dense_result(n, k, x, nnz))
}

#[cfg(test)]
mod tests {
    use super::super::matmul::matmul;
    use super::super::testutil::{both, close, m, rand};
    use super::*;

    #[test]
    fn solves_and_reproduces_rhs() {
        for n in [1, 3, 50, 300] {
            let mut a = rand(n, n, 0.5, n as u64).to_dense().unwrap();
            for i in 0..n {
                a.values.to_mut()[i * n + i] += n as f64; // well conditioned
            }
            a.recount_nnz();
            let a = Matrix::Dense(a);
            let b = rand(n, 2, 1.0, 99);
            for x in both(&a) {
                let sol = solve(&x, &b).unwrap();
                sol.validate().unwrap();
                assert!(close(&matmul(&a, &sol).unwrap(), &b, 1e-10));
            }
        }
        // Needs a row swap (zero in the top-left corner).
        let a = m(&[&[0.0, 1.0], &[2.0, 0.0]]);
        let s = solve(&a, &m(&[&[3.0], &[4.0]])).unwrap();
        assert_eq!(s.into_dense_values().unwrap(), vec![2.0, 3.0]);
    }

    #[test]
    fn errors() {
        let e = solve(&Matrix::zeros(2, 3).unwrap(), &Matrix::zeros(2, 1).unwrap()).unwrap_err();
        assert!(e.to_string().contains("square") && e.to_string().contains("2x3"));
        let e = solve(&m(&[&[1.0, 2.0], &[2.0, 4.0]]), &m(&[&[1.0], &[1.0]])).unwrap_err();
        assert!(e.to_string().contains("singular"));
        assert!(solve(&Matrix::zeros(2, 2).unwrap(), &m(&[&[1.0], &[1.0]])).is_err());
        let e = solve(&m(&[&[1.0]]), &Matrix::zeros(2, 1).unwrap()).unwrap_err();
        assert!(e.to_string().contains("1x1 and 2x1"));
    }
}
