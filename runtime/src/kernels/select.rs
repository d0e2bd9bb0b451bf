//! `removeEmpty`: the rows (or columns) of a matrix that hold a non-zero, or that a selection
//! vector marks. A sparse input stays sparse (its CSR rows are copied or its column indices
//! renumbered), never densified.

use super::{dense_result, sparse_result};
use crate::error::{Result, RuntimeError, ShapeOp};
use crate::matrix::{Matrix, SparseMatrix};

/// `removeEmpty(target=x, margin=rows ? "rows" : "cols", select, empty.return)`.
///
/// A row is kept where `select` (a vector as long as the margin) is non-zero, or, without
/// `select`, where the row has a non-zero (NaN counts). With nothing kept, SystemDS returns one
/// row (column) of zeros, or with `empty.return=FALSE` zero rows (columns).
pub fn remove_empty(
    x: &Matrix,
    rows: bool,
    select: Option<&Matrix>,
    empty_return: bool,
) -> Result<Matrix> {
    let (r, c) = x.shape();
    let len = if rows { r } else { c };
    let keep: Vec<bool> = match select {
        Some(s) => {
            let (sr, sc) = s.shape();
            if sr.min(sc) > 1 || sr * sc != len {
                return Err(RuntimeError::ShapeMismatch {
                    op: ShapeOp::Builtin("removeEmpty (select)"),
                    left: (r, c),
                    right: (sr, sc),
                });
            }
            let mut keep = vec![false; len];
            match s {
                Matrix::Dense(d) => keep
                    .iter_mut()
                    .zip(d.values.iter())
                    .for_each(|(k, &v)| *k = v != 0.0),
                Matrix::Sparse(sp) => {
                    for i in 0..sr {
                        let (idx, vals) = sp.row(i);
                        for (&j, &v) in idx.iter().zip(vals) {
                            keep[i * sc + j as usize] = v != 0.0;
                        }
                    }
                }
            }
            keep
        }
        None => {
            let mut keep = vec![false; len];
            match x {
                Matrix::Dense(d) => {
                    for i in 0..r {
                        for (j, &v) in d.row(i).iter().enumerate() {
                            if v != 0.0 {
                                keep[if rows { i } else { j }] = true;
                            }
                        }
                    }
                }
                Matrix::Sparse(s) => {
                    for i in 0..r {
                        let (idx, _) = s.row(i);
                        if rows {
                            keep[i] = !idx.is_empty();
                        } else {
                            idx.iter().for_each(|&j| keep[j as usize] = true);
                        }
                    }
                }
            }
            keep
        }
    };
    let kept = keep.iter().filter(|&&k| k).count();
    if kept == 0 {
        let n = empty_return as usize;
        return Matrix::zeros(if rows { n } else { r }, if rows { c } else { n });
    }
    match x {
        Matrix::Dense(d) => {
            let mut out = Vec::with_capacity(if rows { kept * c } else { r * kept });
            for i in 0..r {
                if rows {
                    if keep[i] {
                        out.extend_from_slice(d.row(i));
                    }
                } else {
                    out.extend(
                        d.row(i)
                            .iter()
                            .zip(&keep)
                            .filter(|(_, &k)| k)
                            .map(|(&v, _)| v),
                    );
                }
            }
            let nnz = crate::matrix::count_nnz(&out);
            let (or, oc) = if rows { (kept, c) } else { (r, kept) };
            Ok(dense_result(or, oc, out, nnz))
        }
        Matrix::Sparse(s) => {
            let mut row_ptr = vec![0usize];
            let mut col_idx = Vec::new();
            let mut vals = Vec::new();
            // New index of each kept column.
            let renumber: Vec<u32> = keep
                .iter()
                .scan(0u32, |n, &k| {
                    let at = *n;
                    *n += k as u32;
                    Some(at)
                })
                .collect();
            for i in 0..r {
                if rows && !keep[i] {
                    continue;
                }
                let (idx, v) = s.row(i);
                for (&j, &x) in idx.iter().zip(v) {
                    if rows {
                        col_idx.push(j);
                        vals.push(x);
                    } else if keep[j as usize] {
                        col_idx.push(renumber[j as usize]);
                        vals.push(x);
                    }
                }
                row_ptr.push(col_idx.len());
            }
            let (or, oc) = if rows { (kept, c) } else { (r, kept) };
            sparse_result(SparseMatrix {
                rows: or,
                cols: oc,
                row_ptr: row_ptr.into(),
                col_idx: col_idx.into(),
                values: vals.into(),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::{both, m, rand, same};
    use super::*;

    #[test]
    fn removes_empty_rows_and_columns() {
        let x = m(&[&[1.0, 0.0, 3.0], &[0.0, 0.0, 0.0], &[4.0, 5.0, f64::NAN]]);
        for x in both(&x) {
            let r = remove_empty(&x, true, None, true).unwrap();
            r.validate().unwrap();
            assert!(same(&r, &m(&[&[1.0, 0.0, 3.0], &[4.0, 5.0, f64::NAN]])));
            let y = m(&[&[1.0, 0.0], &[0.0, 0.0], &[0.0, 5.0]]);
            let c = remove_empty(&Matrix::Dense(y.to_dense().unwrap()), false, None, true).unwrap();
            assert!(same(&c, &y));
            let sel = m(&[&[0.0, 2.0, 1.0]]);
            let c = remove_empty(&x, false, Some(&sel), true).unwrap();
            c.validate().unwrap();
            assert!(same(&c, &m(&[&[0.0, 3.0], &[0.0, 0.0], &[5.0, f64::NAN]])));
        }
    }

    #[test]
    fn all_empty_gives_one_zero_row_unless_asked_not_to() {
        let z = Matrix::zeros(3, 2).unwrap();
        assert_eq!(remove_empty(&z, true, None, true).unwrap().shape(), (1, 2));
        assert_eq!(remove_empty(&z, false, None, true).unwrap().shape(), (3, 1));
        assert_eq!(remove_empty(&z, true, None, false).unwrap().shape(), (0, 2));
        assert_eq!(
            remove_empty(&z, false, None, false).unwrap().shape(),
            (3, 0)
        );
        let bad = Matrix::zeros(2, 1).unwrap();
        assert!(remove_empty(&z, true, Some(&bad), true).is_err());
    }

    #[test]
    fn sparse_input_matches_dense() {
        let x = rand(60, 40, 0.02, 5);
        let [d, s] = both(&x);
        for rows in [true, false] {
            let (a, b) = (
                remove_empty(&d, rows, None, true).unwrap(),
                remove_empty(&s, rows, None, true).unwrap(),
            );
            b.validate().unwrap();
            assert!(same(&a, &b));
        }
    }
}
