//! The contingency table `table(A, B, W)` (SystemDS's `ctable`).
//!
//! SystemDS's semantics (`functionobjects/CTable`, checked by running scripts): cells are read
//! in row-major order; a cell where A, B or W is NaN is skipped; the categories are truncated
//! toward zero (after adding 2^-53, `UtilFunctions.toLong`), and one below 1 is an error;
//! with output dimensions given, cells beyond them are dropped, otherwise the table is as
//! large as the largest categories (cells whose weight is 0 count for the size). Weights of
//! the same cell are summed in input order.

use super::{dense_result, sparse_result, Operand};
use crate::error::{Result, RuntimeError, ShapeOp};
use crate::matrix::{Matrix, SparseMatrix, MAX_DIM};

/// Row-major cell values of an operand, zeros of a sparse matrix included, without
/// converting it to dense.
fn cells<'a>(m: &'a Matrix) -> Box<dyn Iterator<Item = f64> + 'a> {
    match m {
        Matrix::Dense(d) => Box::new(d.values.iter().copied()),
        Matrix::Sparse(s) => {
            let cols = s.cols;
            Box::new((0..s.rows).flat_map(move |i| {
                let (idx, vals) = s.row(i);
                let mut k = 0;
                (0..cols).map(move |j| {
                    if k < idx.len() && idx[k] as usize == j {
                        k += 1;
                        vals[k - 1]
                    } else {
                        0.0
                    }
                })
            }))
        }
    }
}

/// SystemDS's `UtilFunctions.toLong`: truncation toward zero after adding 2^-53 to the
/// magnitude (so 2.9999999999999999 counts as 3).
fn category(v: f64) -> i64 {
    (v.signum() * (v.abs() + f64::EPSILON / 2.0).floor()) as i64
}

fn values<'a>(op: Operand<'a>) -> Box<dyn Iterator<Item = f64> + 'a> {
    match op {
        Operand::Matrix(m) => cells(m),
        Operand::Scalar(v) => Box::new(std::iter::repeat(v)),
    }
}

/// `table(a, b, w)` with optional output dimensions (`None` where not given: the largest
/// category then). At least one of `a` and `b` is a matrix; the matrices among `a`, `b` and
/// `w` must have the same shape, or be vectors of as many cells (a row and a column), paired
/// in order as SystemDS's cell loop pairs them (`km.dml` tables a row against a `seq`).
pub fn table(
    a: Operand<'_>,
    b: Operand<'_>,
    w: Operand<'_>,
    rows: Option<usize>,
    cols: Option<usize>,
) -> Result<Matrix> {
    let mut shape: Option<(usize, usize)> = None;
    for op in [a, b, w] {
        if let Operand::Matrix(m) = op {
            let vector = |(r, c): (usize, usize)| r == 1 || c == 1;
            match shape {
                Some(s)
                    if s != m.shape()
                        && !(vector(s) && vector(m.shape()) && s.0 * s.1 == m.cells()) =>
                {
                    return Err(RuntimeError::ShapeMismatch {
                        op: ShapeOp::Builtin("table"),
                        left: s,
                        right: m.shape(),
                    })
                }
                _ => shape = Some(m.shape()),
            }
        }
    }
    let Some((r, c)) = shape else {
        return Err(RuntimeError::Argument {
            function: "table",
            problem: "A or B must be a matrix".into(),
        });
    };
    let n = r * c;
    // (row, col, weight) of every counted cell, 0-based, in input order.
    let mut entries: Vec<(usize, usize, f64)> = Vec::new();
    let (mut max_r, mut max_c) = (0usize, 0usize);
    for ((va, vb), vw) in values(a).zip(values(b)).zip(values(w)).take(n) {
        if va.is_nan() || vb.is_nan() || vw.is_nan() {
            continue;
        }
        let (i, j) = (category(va), category(vb));
        if i <= 0 || j <= 0 {
            return Err(RuntimeError::Argument {
                function: "table",
                problem: format!("categories must be >= 1, found the pair ({va}, {vb})"),
            });
        }
        let (i, j) = (i as u64 - 1, j as u64 - 1);
        if rows.is_some_and(|m| i >= m as u64) || cols.is_some_and(|m| j >= m as u64) {
            continue;
        }
        if i >= MAX_DIM as u64 || j >= MAX_DIM as u64 {
            return Err(RuntimeError::DimensionsBeyondLimit {
                function: Some("table"),
                shape: (i.saturating_add(1) as usize, j.saturating_add(1) as usize),
            });
        }
        let (i, j) = (i as usize, j as usize);
        max_r = max_r.max(i + 1);
        max_c = max_c.max(j + 1);
        entries.push((i, j, vw));
    }
    let (out_r, out_c) = (rows.unwrap_or(max_r), cols.unwrap_or(max_c));
    crate::matrix::checked_cells(out_r, out_c)?;
    let cells = out_r as u128 * out_c as u128;
    if (cells as f64) <= 4.0 * entries.len() as f64 + 1024.0 {
        // Small enough to accumulate densely.
        let mut out = crate::matrix::try_alloc_zeroed(cells as usize)?;
        for &(i, j, v) in &entries {
            out[i * out_c + j] += v;
        }
        let nnz = crate::matrix::count_nnz(&out);
        return Ok(dense_result(out_r, out_c, out, nnz));
    }
    // Sparse: a stable sort keeps each cell's weights in input order for the sum.
    entries.sort_by_key(|&(i, j, _)| (i, j));
    let mut row_ptr = vec![0usize; out_r + 1];
    let mut col_idx = Vec::new();
    let mut vals = Vec::new();
    let mut k = 0;
    while k < entries.len() {
        let (i, j, mut sum) = entries[k];
        k += 1;
        while k < entries.len() && (entries[k].0, entries[k].1) == (i, j) {
            sum += entries[k].2;
            k += 1;
        }
        if sum != 0.0 {
            row_ptr[i + 1] += 1;
            col_idx.push(j as u32);
            vals.push(sum);
        }
    }
    for i in 0..out_r {
        row_ptr[i + 1] += row_ptr[i];
    }
    sparse_result(SparseMatrix {
        rows: out_r,
        cols: out_c,
        row_ptr: row_ptr.into(),
        col_idx: col_idx.into(),
        values: vals.into(),
    })
}

#[cfg(test)]
mod tests {
    use super::super::testutil::{both, m, same};
    use super::*;

    #[test]
    fn counts_pairs_and_sums_weights() {
        let a = m(&[&[1.0], &[2.0], &[2.0], &[3.0], &[1.0]]);
        let b = m(&[&[1.0], &[1.0], &[2.0], &[3.0], &[3.0]]);
        let w = m(&[&[1.0], &[2.0], &[3.0], &[4.0], &[5.0]]);
        for (a, b) in both(&a).iter().zip(both(&b).iter()) {
            let t = table(
                Operand::Matrix(a),
                Operand::Matrix(b),
                Operand::Scalar(1.0),
                None,
                None,
            )
            .unwrap();
            let want = m(&[&[1.0, 0.0, 1.0], &[1.0, 1.0, 0.0], &[0.0, 0.0, 1.0]]);
            assert!(same(&t, &want));
            let t = table(
                Operand::Matrix(a),
                Operand::Matrix(b),
                Operand::Matrix(&w),
                Some(4),
                Some(2),
            )
            .unwrap();
            let want = m(&[&[1.0, 0.0], &[2.0, 3.0], &[0.0, 0.0], &[0.0, 0.0]]);
            assert!(same(&t, &want));
        }
    }

    #[test]
    fn skips_nan_truncates_and_rejects_zero() {
        let a = m(&[&[1.7], &[f64::NAN], &[2.9]]);
        let t = table(
            Operand::Matrix(&a),
            Operand::Scalar(2.0),
            Operand::Scalar(1.0),
            None,
            None,
        )
        .unwrap();
        assert!(same(&t, &m(&[&[0.0, 1.0], &[0.0, 1.0]])));
        let z = m(&[&[1.0], &[0.0]]);
        for z in both(&z) {
            let e = table(
                Operand::Matrix(&z),
                Operand::Matrix(&z),
                Operand::Scalar(1.0),
                None,
                None,
            );
            assert!(matches!(e, Err(RuntimeError::Argument { .. })), "{e:?}");
        }
        // Zero weights still size the table.
        let t = table(
            Operand::Matrix(&a),
            Operand::Matrix(&a),
            Operand::Scalar(0.0),
            None,
            None,
        )
        .unwrap();
        assert_eq!(t.shape(), (2, 2));
        assert_eq!(t.nnz(), 0);
    }

    #[test]
    fn large_sparse_tables_stay_sparse() {
        let n = 5000;
        let a = Matrix::from_dense_values(n, 1, (1..=n).map(|i| i as f64).collect()).unwrap();
        let t = table(
            Operand::Matrix(&a),
            Operand::Matrix(&a),
            Operand::Scalar(2.0),
            None,
            None,
        )
        .unwrap();
        assert!(t.is_sparse());
        assert_eq!((t.shape(), t.nnz()), ((n, n), n));
        assert_eq!(t.get(n - 1, n - 1), 2.0);
    }
}
