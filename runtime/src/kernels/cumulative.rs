//! Cumulative aggregates down the columns (`cumsum`, `cumprod`, `cummin`, `cummax`) and
//! `cumsumprod`.

use super::aggregate::Kahan;
use super::dense_result;
use crate::error::{Result, RuntimeError};
use crate::matrix::Matrix;
use crate::ops::BinaryOp;

/// `cumsum(a)`: column-wise running sums, Kahan-compensated like SystemDS's `ucumk+`.
pub fn cumsum(a: &Matrix) -> Result<Matrix> {
    let (rows, cols) = a.shape();
    // `to_dense` copies, so the vector is moved out, not copied again.
    let mut out = a.to_dense()?.values.into_vec();
    if cols == 0 {
        return Ok(dense_result(rows, cols, out, 0));
    }
    // Row by row, vectorised across the columns; the dependency runs down each column.
    let mut acc = vec![Kahan::default(); cols];
    for row in out.chunks_mut(cols) {
        for (k, x) in acc.iter_mut().zip(row.iter_mut()) {
            k.add(*x);
            *x = k.sum;
        }
    }
    let nnz = crate::matrix::count_nnz(&out);
    Ok(dense_result(rows, cols, out, nnz))
}

/// A running aggregate down each column: `cumprod`, `cummin` and `cummax` (Java's
/// `Math.min`/`max`: NaN propagates), as `op` applied to the previous result and the cell.
pub fn cumulative(a: &Matrix, op: BinaryOp) -> Result<Matrix> {
    let (rows, cols) = a.shape();
    let mut out = a.to_dense()?.values.into_vec();
    if cols > 0 {
        let mut rest = out.chunks_mut(cols);
        if let Some(first) = rest.next() {
            let mut acc = first.to_vec();
            for row in rest {
                for (p, x) in acc.iter_mut().zip(row.iter_mut()) {
                    *p = op.apply(*p, *x);
                    *x = *p;
                }
            }
        }
    }
    let nnz = crate::matrix::count_nnz(&out);
    Ok(dense_result(rows, cols, out, nnz))
}

/// `cumsumprod(a)` of a two-column matrix: `y[i] = a[i,1] + a[i,2] * y[i-1]`, `y[0] = 0`
/// (SystemDS's `ucumk+*`, a plain multiply-add).
pub fn cumsumprod(a: &Matrix) -> Result<Matrix> {
    let (rows, cols) = a.shape();
    if cols != 2 {
        return Err(RuntimeError::Argument {
            function: "cumsumprod",
            problem: format!("expects a two-column matrix, got {rows}x{cols}"),
        });
    }
    let mut out = Vec::with_capacity(rows);
    let mut y = 0.0;
    for i in 0..rows {
        y = a.get(i, 0) + a.get(i, 1) * y;
        out.push(y);
    }
    let nnz = crate::matrix::count_nnz(&out);
    Ok(dense_result(rows, 1, out, nnz))
}

#[cfg(test)]
mod tests {
    use super::super::testutil::{both, m, same};
    use super::*;

    #[test]
    fn cumsum_columns() {
        let a = m(&[
            &[1.0, 0.0, 0.0],
            &[2.0, 0.0, f64::INFINITY],
            &[0.0, 0.0, 1.0],
            &[-3.0, 1.0, 0.0],
        ]);
        let want = m(&[
            &[1.0, 0.0, 0.0],
            &[3.0, 0.0, f64::INFINITY],
            &[3.0, 0.0, f64::INFINITY],
            &[0.0, 1.0, f64::INFINITY],
        ]);
        for x in both(&a) {
            let got = cumsum(&x).unwrap();
            got.validate().unwrap();
            assert!(same(&got, &want));
        }
        assert_eq!(
            cumsum(&Matrix::zeros(0, 3).unwrap()).unwrap().shape(),
            (0, 3)
        );
        assert_eq!(
            cumsum(&Matrix::zeros(3, 0).unwrap()).unwrap().shape(),
            (3, 0)
        );
    }

    #[test]
    fn cumprod_cummin_cummax_and_cumsumprod() {
        let nan = f64::NAN;
        let a = m(&[
            &[1.0, 2.0, 3.0],
            &[0.0, -1.0, nan],
            &[4.0, 5.0, 6.0],
            &[2.0, -3.0, 1.0],
        ]);
        for x in both(&a) {
            let p = cumulative(&x, BinaryOp::Mul).unwrap();
            let want = m(&[
                &[1.0, 2.0, 3.0],
                &[0.0, -2.0, nan],
                &[0.0, -10.0, nan],
                &[0.0, 30.0, nan],
            ]);
            assert!(same(&p, &want));
            let lo = cumulative(&x, BinaryOp::Min).unwrap();
            let want = m(&[
                &[1.0, 2.0, 3.0],
                &[0.0, -1.0, nan],
                &[0.0, -1.0, nan],
                &[0.0, -3.0, nan],
            ]);
            assert!(same(&lo, &want));
            let hi = cumulative(&x, BinaryOp::Max).unwrap();
            let want = m(&[
                &[1.0, 2.0, 3.0],
                &[1.0, 2.0, nan],
                &[4.0, 5.0, nan],
                &[4.0, 5.0, nan],
            ]);
            assert!(same(&hi, &want));
        }
        let c = m(&[&[1.0, 2.0], &[3.0, 4.0], &[5.0, 6.0], &[7.0, 8.0]]);
        for x in both(&c) {
            let y = cumsumprod(&x).unwrap();
            assert!(same(&y, &m(&[&[1.0], &[7.0], &[47.0], &[383.0]])));
        }
        assert!(cumsumprod(&a).is_err());
    }
}
