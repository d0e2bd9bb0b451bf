//! Cumulative aggregates down the columns (`cumsum`).

use super::aggregate::Kahan;
use super::dense_result;
use crate::error::Result;
use crate::matrix::Matrix;

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
}
