//! `outer(u, v, op)`: the n×m matrix of `op(u[i], v[j])` for a column vector u and a row
//! vector v (or of `op(u[i], v[i, j])` for an n×m v, as SystemDS's kernels take it).

use super::dense_result;
use crate::error::{Result, RuntimeError, ShapeOp};
use crate::matrix::{try_alloc_zeroed, Matrix};
use crate::ops::BinaryOp;

/// `outer(u, v, op)`, u n×1, v 1×m.
pub fn outer(u: &Matrix, v: &Matrix, op: BinaryOp) -> Result<Matrix> {
    let ((n, uc), (vr, m)) = (u.shape(), v.shape());
    if uc == 1 && vr == n && vr != 1 {
        // A matrix second operand of the column vector's height: `u[i] op v[i, j]`, as
        // SystemDS's kernels compute a column vector against a matrix (its raJoin relies on
        // `outer(bucket, seqMatrix, "==")`).
        let mut out = try_alloc_zeroed(n * m)?;
        let mut nnz = 0;
        for (i, row) in out.chunks_mut(m.max(1)).enumerate().take(n) {
            let a = u.get(i, 0);
            for (j, o) in row.iter_mut().enumerate() {
                *o = op.apply(a, v.get(i, j));
                nnz += (*o != 0.0) as usize;
            }
        }
        return Ok(dense_result(n, m, out, nnz));
    }
    if uc != 1 || vr != 1 {
        return Err(RuntimeError::ShapeMismatch {
            op: ShapeOp::Builtin("outer"),
            left: u.shape(),
            right: v.shape(),
        });
    }
    let us: Vec<f64> = (0..n).map(|i| u.get(i, 0)).collect();
    let vs: Vec<f64> = (0..m).map(|j| v.get(0, j)).collect();
    let mut out = try_alloc_zeroed(n * m)?;
    let mut nnz = 0;
    for (row, &a) in out.chunks_mut(m.max(1)).zip(&us) {
        for (o, &b) in row.iter_mut().zip(&vs) {
            *o = op.apply(a, b);
            nnz += (*o != 0.0) as usize;
        }
    }
    Ok(dense_result(n, m, out, nnz))
}

#[cfg(test)]
mod tests {
    use super::super::testutil::{m, same};
    use super::*;

    #[test]
    fn applies_the_operator_to_every_pair() {
        let u = m(&[&[1.0], &[2.0], &[0.0]]);
        let v = m(&[&[2.0, 0.0]]);
        let lt = outer(&u, &v, BinaryOp::Lt).unwrap();
        assert!(same(&lt, &m(&[&[1.0, 0.0], &[0.0, 0.0], &[1.0, 0.0]])));
        let md = outer(&u, &v, BinaryOp::Mod).unwrap();
        assert!(same(
            &md,
            &m(&[&[1.0, f64::NAN], &[0.0, f64::NAN], &[0.0, f64::NAN]])
        ));
        assert!(outer(&v, &u, BinaryOp::Add).is_err());
        // A matrix of the vector's height is taken cell by cell.
        let b = m(&[&[1.0, 2.0], &[2.0, 2.0], &[0.0, 5.0]]);
        let eq = outer(&u, &b, BinaryOp::Eq).unwrap();
        assert!(same(&eq, &m(&[&[1.0, 0.0], &[1.0, 1.0], &[1.0, 0.0]])));
        assert!(outer(&u, &m(&[&[1.0, 2.0], &[2.0, 2.0]]), BinaryOp::Eq).is_err());
    }
}
