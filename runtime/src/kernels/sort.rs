//! `order`: sorting the rows of a matrix by one column or several, and `rev`.
//!
//! SystemDS (`LibMatrixReorg.sort`) sorts row indexes by the first `by` column's values, runs
//! of equal values by the next column (`sortBySecondary`), reverses for a decreasing order and
//! then makes the order stable: rows equal in every `by` column keep their original order,
//! ascending and descending alike. That is a stable sort by the columns lexicographically. NaN has no
//! order there (its quicksort compares with `<`, so rows around a NaN come out unsorted); here
//! NaN sorts after every number ascending and before every number descending, which is what
//! SystemDS gives for a dense column vector sorted by value (`Arrays.sort`, then reversed).

use super::{dense_result, sparse_result};
use crate::error::{Result, RuntimeError};
use crate::matrix::{Matrix, SparseMatrix};
use std::cmp::Ordering;

/// Ascending order of two keys: numbers as `<` orders them (so `-0.0 == 0.0`), NaN last.
fn ascending(a: f64, b: f64) -> Ordering {
    a.partial_cmp(&b)
        .unwrap_or_else(|| a.is_nan().cmp(&b.is_nan()))
}

/// `order(target=x, by, decreasing, index.return)`, `by` the 0-based columns to sort by, the
/// first deciding. Returns the rows of `x` in order, or with `index_return` their 1-based
/// indexes as a column vector.
pub fn order(x: &Matrix, by: &[usize], decreasing: bool, index_return: bool) -> Result<Matrix> {
    let (r, c) = x.shape();
    if let Some(bad) = by.iter().find(|&&b| b >= c) {
        return Err(RuntimeError::Argument {
            function: "order",
            problem: format!("by={} is not a column of a {r}x{c} matrix", bad + 1),
        });
    }
    if by.is_empty() {
        return Err(RuntimeError::Argument {
            function: "order",
            problem: "by names no column".to_string(),
        });
    }
    let keys: Vec<Vec<f64>> = by
        .iter()
        .map(|&b| (0..r).map(|i| x.get(i, b)).collect())
        .collect();
    let lexicographic = |i: usize, j: usize| {
        keys.iter()
            .map(|k| ascending(k[i], k[j]))
            .find(|o| o.is_ne())
            .unwrap_or(Ordering::Equal)
    };
    let mut perm: Vec<usize> = (0..r).collect();
    // `sort_by` is stable: equal keys keep their original order in both directions.
    if decreasing {
        perm.sort_by(|&i, &j| lexicographic(j, i));
    } else {
        perm.sort_by(|&i, &j| lexicographic(i, j));
    }
    if index_return {
        let out: Vec<f64> = perm.iter().map(|&i| (i + 1) as f64).collect();
        return Ok(dense_result(r, 1, out, r));
    }
    Ok(permute_rows(x, &perm))
}

/// The rows of `x` in the order `perm` lists them.
fn permute_rows(x: &Matrix, perm: &[usize]) -> Matrix {
    let (r, c) = x.shape();
    match x {
        Matrix::Dense(d) => {
            let mut out = Vec::with_capacity(r * c);
            for &i in perm {
                out.extend_from_slice(d.row(i));
            }
            dense_result(r, c, out, d.nnz)
        }
        Matrix::Sparse(s) => {
            let mut row_ptr = Vec::with_capacity(r + 1);
            row_ptr.push(0);
            let mut col_idx = Vec::with_capacity(s.nnz());
            let mut vals = Vec::with_capacity(s.nnz());
            for &i in perm {
                let (idx, v) = s.row(i);
                col_idx.extend_from_slice(idx);
                vals.extend_from_slice(v);
                row_ptr.push(col_idx.len());
            }
            Matrix::Sparse(SparseMatrix {
                rows: r,
                cols: c,
                row_ptr: row_ptr.into(),
                col_idx: col_idx.into(),
                values: vals.into(),
            })
        }
    }
}

/// `rev(x)`: the rows in reverse order.
pub fn rev(x: &Matrix) -> Result<Matrix> {
    let perm: Vec<usize> = (0..x.rows()).rev().collect();
    match permute_rows(x, &perm) {
        Matrix::Sparse(s) => sparse_result(s),
        d => Ok(d),
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::{both, m, same};
    use super::*;

    #[test]
    fn stable_in_both_directions() {
        let x = m(&[
            &[3.0, 1.0],
            &[1.0, 2.0],
            &[2.0, 0.0],
            &[1.0, 4.0],
            &[0.0, 5.0],
            &[2.0, 6.0],
        ]);
        for x in both(&x) {
            let up = order(&x, &[0], false, true).unwrap();
            assert!(same(
                &up,
                &m(&[&[5.0], &[2.0], &[4.0], &[3.0], &[6.0], &[1.0]])
            ));
            let down = order(&x, &[0], true, true).unwrap();
            assert!(same(
                &down,
                &m(&[&[1.0], &[3.0], &[6.0], &[2.0], &[4.0], &[5.0]])
            ));
            let rows = order(&x, &[1], true, false).unwrap();
            rows.validate().unwrap();
            assert_eq!(rows.get(0, 1), 6.0);
            assert_eq!(rows.get(5, 0), 2.0);
            assert!(order(&x, &[2], false, false).is_err());
        }
    }

    #[test]
    fn nan_last_ascending_first_descending() {
        let x = m(&[&[2.0], &[f64::NAN], &[1.0]]);
        let up = order(&x, &[0], false, false).unwrap();
        assert!(same(&up, &m(&[&[1.0], &[2.0], &[f64::NAN]])));
        let down = order(&x, &[0], true, false).unwrap();
        assert!(same(&down, &m(&[&[f64::NAN], &[2.0], &[1.0]])));
    }

    #[test]
    fn rev_reverses_rows() {
        let x = m(&[&[1.0, 0.0], &[0.0, 0.0], &[3.0, 4.0]]);
        for x in both(&x) {
            let r = rev(&x).unwrap();
            r.validate().unwrap();
            assert!(same(&r, &m(&[&[3.0, 4.0], &[0.0, 0.0], &[1.0, 0.0]])));
        }
        assert_eq!(rev(&Matrix::zeros(0, 2).unwrap()).unwrap().shape(), (0, 2));
    }
}
