//! Indexing: right indexing (`X[rows, cols]`), left indexing (`X[rows, cols] = Y`), `cbind`,
//! `rbind`.

use super::{build_csr, dense_result, sparse_result, Operand};
use crate::error::{Axis, Result, RuntimeError, ShapeOp};
use crate::matrix::{count_nnz, try_alloc_zeroed, Matrix, SparseMatrix};
use std::ops::Range;

fn check_range(
    op: &'static str,
    axis: Axis,
    r: &Range<usize>,
    dim: usize,
    a: &Matrix,
) -> Result<()> {
    if r.start > r.end || r.end > dim {
        return Err(RuntimeError::KernelIndexRange {
            op,
            axis,
            range: r.clone(),
            shape: a.shape(),
        });
    }
    Ok(())
}

/// `a[rows, cols]` (0-based, half-open ranges).
pub fn slice(a: &Matrix, rows: Range<usize>, cols: Range<usize>) -> Result<Matrix> {
    check_range("index", Axis::Rows, &rows, a.rows(), a)?;
    check_range("index", Axis::Columns, &cols, a.cols(), a)?;
    let (nr, nc) = (rows.len(), cols.len());
    Ok(match a {
        Matrix::Dense(d) => {
            let mut out = crate::matrix::try_with_capacity(nr * nc)?;
            if nc == 1 {
                // A column: one value a row (a `memcpy` call per row took most of its time).
                out.extend(
                    d.values[rows.start * d.cols + cols.start..]
                        .iter()
                        .step_by(d.cols)
                        .take(nr),
                );
            } else {
                for i in rows.clone() {
                    out.extend_from_slice(
                        &d.values[i * d.cols + cols.start..i * d.cols + cols.end],
                    );
                }
            }
            let nnz = count_nnz(&out);
            dense_result(nr, nc, out, nnz)
        }
        Matrix::Sparse(s) => {
            let (c0, c1) = (cols.start as u32, cols.end as u32);
            let sub = build_csr(nr, nc, s.nnz() * nr / s.rows.max(1), |k, idx, val| {
                let (ci, cv) = s.row(rows.start + k);
                let lo = ci.partition_point(|&j| j < c0);
                let hi = ci.partition_point(|&j| j < c1);
                idx.extend(ci[lo..hi].iter().map(|&j| j - c0));
                val.extend_from_slice(&cv[lo..hi]);
            });
            sparse_result(sub)?
        }
    })
}

/// `a[rows, cols] = src` (0-based, half-open ranges): returns the updated matrix. A dense `a` is
/// updated in place; a matrix `src` must have the shape of the ranges.
pub fn left_index(
    a: Matrix,
    rows: Range<usize>,
    cols: Range<usize>,
    src: Operand,
) -> Result<Matrix> {
    check_range("left indexing", Axis::Rows, &rows, a.rows(), &a)?;
    check_range("left indexing", Axis::Columns, &cols, a.cols(), &a)?;
    let (nr, nc) = (rows.len(), cols.len());
    if let Operand::Matrix(s) = src {
        if s.shape() != (nr, nc) {
            return Err(RuntimeError::LeftIndexShape {
                source_shape: s.shape(),
                rows,
                cols,
                target: a.shape(),
            });
        }
    }
    let src_dense = match src {
        Operand::Matrix(s) => Some(s.dense_cow()?),
        Operand::Scalar(_) => None,
    };
    let src_values = src_dense.as_ref().map(|d| &d.values[..]);
    let value = |k: usize, j: usize| match (src_values, src) {
        (Some(d), _) => d[k * nc + j],
        (None, Operand::Scalar(v)) => v,
        (None, Operand::Matrix(_)) => unreachable!("matrix sources are densified above"),
    };
    Ok(match a {
        Matrix::Dense(mut d) => {
            let w = d.cols;
            let mut nnz = d.nnz;
            // The caller copied a shared matrix; an owned one is written in place.
            let values = d.values.to_mut();
            for (k, i) in rows.clone().enumerate() {
                let row = &mut values[i * w + cols.start..i * w + cols.end];
                for (j, o) in row.iter_mut().enumerate() {
                    let v = value(k, j);
                    nnz = nnz + (v != 0.0) as usize - (*o != 0.0) as usize;
                    *o = v;
                }
            }
            d.nnz = nnz;
            Matrix::Dense(d).examine_and_convert()?
        }
        Matrix::Sparse(s) => {
            let (c0, c1) = (cols.start as u32, cols.end as u32);
            let out = build_csr(s.rows, s.cols, s.nnz() + nr * nc, |i, idx, val| {
                let (ci, cv) = s.row(i);
                if !rows.contains(&i) {
                    idx.extend_from_slice(ci);
                    val.extend_from_slice(cv);
                    return;
                }
                let lo = ci.partition_point(|&j| j < c0);
                let hi = ci.partition_point(|&j| j < c1);
                idx.extend_from_slice(&ci[..lo]);
                val.extend_from_slice(&cv[..lo]);
                for j in 0..nc {
                    let v = value(i - rows.start, j);
                    if v != 0.0 {
                        idx.push(c0 + j as u32);
                        val.push(v);
                    }
                }
                idx.extend_from_slice(&ci[hi..]);
                val.extend_from_slice(&cv[hi..]);
            });
            sparse_result(out)?
        }
    })
}

/// `cbind(a, b, ...)`: side by side; all inputs must have the same number of rows.
pub fn cbind(inputs: &[&Matrix]) -> Result<Matrix> {
    let first = inputs
        .first()
        .ok_or(RuntimeError::NoInputs { function: "cbind" })?;
    let rows = first.rows();
    if let Some(bad) = inputs.iter().find(|m| m.rows() != rows) {
        return Err(RuntimeError::ShapeMismatch {
            op: ShapeOp::Cbind,
            left: first.shape(),
            right: bad.shape(),
        });
    }
    let cols: usize = inputs.iter().map(|m| m.cols()).sum();
    let nnz: usize = inputs.iter().map(|m| m.nnz()).sum();
    let offsets: Vec<usize> = inputs
        .iter()
        .scan(0, |o, m| {
            let r = *o;
            *o += m.cols();
            Some(r)
        })
        .collect();
    if !binding_is_dense(rows, cols, nnz) {
        let sparse: Vec<SparseMatrix> = inputs
            .iter()
            .map(|m| m.try_to_sparse())
            .collect::<Result<_>>()?;
        let out = build_csr(rows, cols, nnz, |i, idx, val| {
            for (s, &off) in sparse.iter().zip(&offsets) {
                let (ci, cv) = s.row(i);
                idx.extend(ci.iter().map(|&j| j + off as u32));
                val.extend_from_slice(cv);
            }
        });
        return Ok(Matrix::Sparse(out));
    }
    let mut out = try_alloc_zeroed(rows * cols)?;
    for (m, &off) in inputs.iter().zip(&offsets) {
        let w = m.cols();
        match m {
            // A column vector one value a row (a `memcpy` call per row took most of the time
            // of binding columns).
            Matrix::Dense(d) if w == 1 => {
                for (o, &v) in out[off..].iter_mut().step_by(cols).zip(d.values.iter()) {
                    *o = v;
                }
            }
            Matrix::Dense(d) => {
                for i in 0..rows {
                    out[i * cols + off..i * cols + off + w].copy_from_slice(d.row(i));
                }
            }
            Matrix::Sparse(s) => {
                for i in 0..rows {
                    let (ci, cv) = s.row(i);
                    for (&j, &v) in ci.iter().zip(cv) {
                        out[i * cols + off + j as usize] = v;
                    }
                }
            }
        }
    }
    Ok(dense_result(rows, cols, out, nnz))
}

/// Whether [`cbind`] or [`rbind`] of inputs with `nnz` non-zeros in all, `rows x cols`
/// together, returns a dense matrix (partial reuse computes `tsmm(cbind(X, dX))` and
/// `t(rbind(A, dA)) %*% rbind(y, dy)` without the concatenations, and must know which path
/// the product would have taken).
pub fn binding_is_dense(rows: usize, cols: usize, nnz: usize) -> bool {
    !crate::matrix::prefers_sparse(rows, cols, nnz)
}

/// `rbind(a, b, ...)`: stacked; all inputs must have the same number of columns.
pub fn rbind(inputs: &[&Matrix]) -> Result<Matrix> {
    let first = inputs
        .first()
        .ok_or(RuntimeError::NoInputs { function: "rbind" })?;
    let cols = first.cols();
    if let Some(bad) = inputs.iter().find(|m| m.cols() != cols) {
        return Err(RuntimeError::ShapeMismatch {
            op: ShapeOp::Rbind,
            left: first.shape(),
            right: bad.shape(),
        });
    }
    let rows: usize = inputs.iter().map(|m| m.rows()).sum();
    let nnz: usize = inputs.iter().map(|m| m.nnz()).sum();
    if !binding_is_dense(rows, cols, nnz) {
        let mut row_ptr = crate::matrix::try_vec_with_capacity(rows + 1)?;
        let mut col_idx = crate::matrix::try_vec_with_capacity(nnz)?;
        let mut values = crate::matrix::try_vec_with_capacity(nnz)?;
        row_ptr.push(0);
        for m in inputs {
            let s = m.try_to_sparse()?;
            let base = values.len();
            row_ptr.extend(s.row_ptr[1..].iter().map(|&p| p + base));
            col_idx.extend_from_slice(&s.col_idx);
            values.extend_from_slice(&s.values);
        }
        return Ok(Matrix::Sparse(SparseMatrix {
            rows,
            cols,
            row_ptr: row_ptr.into(),
            col_idx: col_idx.into(),
            values: values.into(),
        }));
    }
    let mut out = crate::matrix::try_with_capacity(rows * cols)?;
    for m in inputs {
        match m {
            Matrix::Dense(d) => out.extend_from_slice(&d.values),
            Matrix::Sparse(s) => out.extend_from_slice(&s.to_dense()?.values),
        }
    }
    Ok(dense_result(rows, cols, out, nnz))
}

#[cfg(test)]
mod tests {
    use super::super::testutil::{both, m, rand, same};
    use super::*;

    #[test]
    fn slice_all_formats() {
        let a = rand(30, 40, 0.2, 1);
        let d = a.to_dense().unwrap();
        for (rr, cc) in [
            (3..17, 5..31),
            (0..30, 0..40),
            (4..4, 0..3),
            (29..30, 39..40),
            // Single columns, read a value a row.
            (3..17, 7..8),
            (0..30, 0..1),
        ] {
            let want: Vec<f64> = rr
                .clone()
                .flat_map(|i| cc.clone().map(move |j| (i, j)))
                .map(|(i, j)| d.values[i * 40 + j])
                .collect();
            let want = Matrix::from_dense_values(rr.len(), cc.len(), want).unwrap();
            for x in both(&a) {
                let got = slice(&x, rr.clone(), cc.clone()).unwrap();
                got.validate().unwrap();
                assert!(same(&got, &want));
            }
        }
        let e = slice(&a, 0..31, 0..2).unwrap_err();
        assert_eq!(
            e.to_string(),
            "index: rows 1:31 out of bounds for a 30x40 matrix"
        );
    }

    #[test]
    fn left_index_all_formats() {
        let a = rand(20, 25, 0.1, 2);
        let src = rand(5, 7, 0.5, 3);
        let mut want = a.to_dense().unwrap();
        for i in 0..5 {
            for j in 0..7 {
                want.values.to_mut()[(i + 4) * 25 + j + 10] = src.get(i, j);
            }
        }
        want.recount_nnz();
        let want = Matrix::Dense(want);
        for x in both(&a) {
            for s in both(&src) {
                let got = left_index(x.clone(), 4..9, 10..17, Operand::Matrix(&s)).unwrap();
                got.validate().unwrap();
                assert!(same(&got, &want));
            }
            let got = left_index(x.clone(), 0..20, 0..1, Operand::Scalar(0.0)).unwrap();
            got.validate().unwrap();
            assert_eq!(got.get(3, 0), 0.0);
            let e = left_index(x.clone(), 0..2, 0..2, Operand::Matrix(&src)).unwrap_err();
            assert!(e.to_string().contains("5x7"), "{e}");
        }
    }

    #[test]
    fn bind_all_formats() {
        let a = m(&[&[1.0, 0.0], &[0.0, 2.0]]);
        let b = m(&[&[0.0, 0.0, 3.0], &[0.0, 0.0, 0.0]]);
        for x in both(&a) {
            for y in both(&b) {
                let c = cbind(&[&x, &y]).unwrap();
                c.validate().unwrap();
                assert_eq!(
                    c.into_dense_values().unwrap(),
                    vec![1.0, 0.0, 0.0, 0.0, 3.0, 0.0, 2.0, 0.0, 0.0, 0.0]
                );
                let r = rbind(&[&x, &x, &a]).unwrap();
                r.validate().unwrap();
                assert_eq!(r.shape(), (6, 2));
                assert_eq!(r.get(5, 1), 2.0);
            }
        }
        // Column vectors between and after other inputs (bound a value a row).
        let v = m(&[&[5.0], &[6.0]]);
        for x in both(&v) {
            let c = cbind(&[&a, &x, &b, &x]).unwrap();
            c.validate().unwrap();
            assert_eq!(
                c.into_dense_values().unwrap(),
                vec![1.0, 0.0, 5.0, 0.0, 0.0, 3.0, 5.0, 0.0, 2.0, 6.0, 0.0, 0.0, 0.0, 6.0]
            );
        }
        let e = rbind(&[&a, &b]).unwrap_err();
        assert_eq!(e.to_string(), "rbind: column counts differ: 2x2 and 2x3");
        assert!(cbind(&[&a, &Matrix::zeros(3, 1).unwrap()])
            .unwrap_err()
            .to_string()
            .contains("2x2 and 3x1"));
        let big = rand(100, 100, 0.01, 4);
        let c = cbind(&[&big, &big]).unwrap();
        c.validate().unwrap();
        assert!(c.is_sparse());
        assert_eq!(c.nnz(), 2 * big.nnz());
    }
}
