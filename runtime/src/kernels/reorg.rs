//! Reorganisations: transpose, diag, reshape.

use super::{dense_result, sparse_result};
use crate::error::{Result, RuntimeError};
use crate::matrix::{try_alloc_zeroed, Matrix, SparseMatrix, PAR_THRESHOLD};
use rayon::prelude::*;

/// Tile edge of the blocked dense transpose (a 32x32 tile of each side fits in L1).
const TILE: usize = 32;

/// `t(a)`.
pub fn transpose(a: &Matrix) -> Result<Matrix> {
    let (m, n) = a.shape();
    Ok(match a {
        Matrix::Dense(d) => dense_result(n, m, transpose_values(&d.values, m, n)?, d.nnz),
        Matrix::Sparse(s) => sparse_result(transpose_csr(s)?)?,
    })
}

/// The row-major `n x m` transpose of the row-major `m x n` values `src`, in tiles, over
/// threads where it is large.
pub(crate) fn transpose_values(src: &[f64], m: usize, n: usize) -> Result<Vec<f64>> {
    let mut out = try_alloc_zeroed(m * n)?;
    if m > 0 && n > 0 {
        // Each task owns TILE output rows (= input columns) and walks the input in tiles.
        let task = |(b, chunk): (usize, &mut [f64])| {
            let j0 = b * TILE;
            let jn = chunk.len() / m;
            for i0 in (0..m).step_by(TILE) {
                let i1 = (i0 + TILE).min(m);
                for jj in 0..jn {
                    let orow = &mut chunk[jj * m + i0..jj * m + i1];
                    for (k, o) in orow.iter_mut().enumerate() {
                        *o = src[(i0 + k) * n + j0 + jj];
                    }
                }
            }
        };
        if m * n >= PAR_THRESHOLD {
            out.par_chunks_mut(TILE * m).enumerate().for_each(task);
        } else {
            out.chunks_mut(TILE * m).enumerate().for_each(task);
        }
    }
    Ok(out)
}

/// CSR transpose by counting: scattering rows in order keeps each output row sorted.
pub fn transpose_csr(s: &SparseMatrix) -> Result<SparseMatrix> {
    let (m, n) = (s.rows, s.cols);
    // `t(X)` of a 1e9-column sparse X has a billion row pointers.
    let mut row_ptr = crate::matrix::try_vec_filled(n + 1, 0usize)?;
    for &j in &s.col_idx {
        row_ptr[j as usize + 1] += 1;
    }
    for j in 0..n {
        row_ptr[j + 1] += row_ptr[j];
    }
    let mut next = crate::matrix::try_copy(&row_ptr)?;
    let mut col_idx = crate::matrix::try_vec_filled(s.nnz(), 0u32)?;
    let mut values = crate::matrix::try_vec_filled(s.nnz(), 0.0)?;
    for i in 0..m {
        let (idx, val) = s.row(i);
        for (&j, &v) in idx.iter().zip(val) {
            let p = &mut next[j as usize];
            col_idx[*p] = i as u32;
            values[*p] = v;
            *p += 1;
        }
    }
    Ok(SparseMatrix {
        rows: n,
        cols: m,
        row_ptr: row_ptr.into(),
        col_idx: col_idx.into(),
        values: values.into(),
    })
}

/// `diag(a)`: a column vector becomes a diagonal matrix; a square matrix gives the column vector
/// of its diagonal (a 1x1 input is both). Anything else is a user error.
pub fn diag(a: &Matrix) -> Result<Matrix> {
    let (m, n) = a.shape();
    if n == 1 {
        let v = a.to_dense()?.values;
        let mut row_ptr = crate::matrix::try_vec_with_capacity(m + 1)?;
        let mut col_idx = Vec::new();
        let mut values = Vec::new();
        row_ptr.push(0);
        for (i, &x) in v.iter().enumerate() {
            if x != 0.0 {
                col_idx.push(i as u32);
                values.push(x);
            }
            row_ptr.push(values.len());
        }
        return sparse_result(SparseMatrix {
            rows: m,
            cols: m,
            row_ptr: row_ptr.into(),
            col_idx: col_idx.into(),
            values: values.into(),
        });
    }
    if m == n {
        let v: Vec<f64> = (0..m).map(|i| a.get(i, i)).collect();
        let nnz = v.iter().filter(|&&x| x != 0.0).count();
        return Ok(dense_result(m, 1, v, nnz));
    }
    Err(RuntimeError::DiagShape { shape: a.shape() })
}

/// `matrix(a, rows=, cols=, byrow=)`: the same cells in a new shape, read and written row by row
/// (`byrow = true`) or column by column.
pub fn reshape(a: &Matrix, rows: usize, cols: usize, byrow: bool) -> Result<Matrix> {
    let (m, n) = a.shape();
    if rows.checked_mul(cols) != Some(m * n) {
        return Err(RuntimeError::Reshape {
            from: (m, n),
            to: (rows, cols),
        });
    }
    if (rows, cols) == (m, n) {
        return a.try_clone();
    }
    if byrow {
        return Ok(match a {
            Matrix::Dense(d) => {
                dense_result(rows, cols, crate::matrix::try_copy(&d.values)?, d.nnz)
            }
            Matrix::Sparse(s) => {
                // Row-major linear positions are unchanged and stay sorted.
                let mut row_ptr = crate::matrix::try_vec_filled(rows + 1, 0usize)?;
                let mut col_idx = crate::matrix::try_vec_with_capacity(s.nnz())?;
                for i in 0..m {
                    let (idx, _) = s.row(i);
                    for &j in idx {
                        let p = i * n + j as usize;
                        row_ptr[p / cols + 1] += 1;
                        col_idx.push((p % cols) as u32);
                    }
                }
                for r in 0..rows {
                    row_ptr[r + 1] += row_ptr[r];
                }
                sparse_result(SparseMatrix {
                    rows,
                    cols,
                    row_ptr: row_ptr.into(),
                    col_idx: col_idx.into(),
                    values: crate::matrix::try_copy(&s.values)?.into(),
                })?
            }
        });
    }
    // Column-major order: out[k] (column-major in the output) = a[k] (column-major in the input).
    let d = a.to_dense()?;
    let mut out = try_alloc_zeroed(rows * cols)?;
    let src = &d.values[..];
    for (p, o) in out.iter_mut().enumerate() {
        let (r, c) = (p / cols, p % cols);
        let k = c * rows + r;
        *o = src[(k % m) * n + k / m];
    }
    Ok(dense_result(rows, cols, out, d.nnz))
}

#[cfg(test)]
mod tests {
    use super::super::testutil::{both, m, rand, same};
    use super::*;

    #[test]
    fn transpose_all_formats_and_sizes() {
        for a in [
            rand(70, 45, 0.5, 1),
            rand(300, 500, 0.05, 2),
            rand(1, 7, 1.0, 3),
            Matrix::zeros(0, 4).unwrap(),
        ] {
            let d = a.to_dense().unwrap();
            let (r, c) = a.shape();
            let want: Vec<f64> = (0..c * r).map(|p| d.values[(p % r) * c + p / r]).collect();
            let want = Matrix::from_dense_values(c, r, want).unwrap();
            for x in both(&a) {
                let t = transpose(&x).unwrap();
                t.validate().unwrap();
                assert!(same(&t, &want));
            }
        }
    }

    #[test]
    fn diag_forms() {
        let v = m(&[&[1.0], &[0.0], &[3.0]]);
        let d = diag(&v).unwrap();
        d.validate().unwrap();
        assert_eq!(d.shape(), (3, 3));
        assert_eq!(d.get(2, 2), 3.0);
        assert_eq!(d.nnz(), 2);
        let back = diag(&d).unwrap();
        assert!(same(&back, &v));
        assert_eq!(diag(&m(&[&[4.0]])).unwrap().as_scalar().unwrap(), 4.0);
        let e = diag(&Matrix::zeros(2, 3).unwrap()).unwrap_err();
        assert!(e.to_string().contains("2x3"));
    }

    #[test]
    fn reshape_by_row_and_column() {
        let a = m(&[&[1.0, 2.0, 0.0], &[0.0, 5.0, 6.0]]);
        for x in both(&a) {
            let r = reshape(&x, 3, 2, true).unwrap();
            r.validate().unwrap();
            assert_eq!(
                r.into_dense_values().unwrap(),
                vec![1.0, 2.0, 0.0, 0.0, 5.0, 6.0]
            );
            let r = reshape(&x, 3, 2, false).unwrap();
            // column-major reading of a: 1 0 2 5 0 6, written column-major into 3x2
            assert_eq!(
                r.into_dense_values().unwrap(),
                vec![1.0, 5.0, 0.0, 0.0, 2.0, 6.0]
            );
        }
        assert!(reshape(&a, 4, 2, true)
            .unwrap_err()
            .to_string()
            .contains("2x3"));
        let s = Matrix::Sparse(rand(40, 50, 0.1, 4).to_sparse());
        let r = reshape(&s, 100, 20, true).unwrap();
        r.validate().unwrap();
        assert_eq!(
            r.into_dense_values().unwrap(),
            s.clone().into_dense_values().unwrap()
        );
    }
}
