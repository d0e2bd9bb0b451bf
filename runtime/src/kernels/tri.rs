//! `lower.tri` and `upper.tri`: the cells below (above) the diagonal, optionally with it,
//! as their values or as ones (SystemDS's defaults: `diag=FALSE`, `values=FALSE`).

use super::dense_result;
use crate::error::Result;
use crate::matrix::{try_alloc_zeroed, Matrix};

/// `lower.tri(target=x, diag, values)` (`lower = true`) or `upper.tri(...)`; any shape.
pub fn triangle(x: &Matrix, lower: bool, diag: bool, values: bool) -> Result<Matrix> {
    let (r, c) = x.shape();
    let mut out = try_alloc_zeroed(r * c)?;
    for i in 0..r {
        for j in 0..c {
            let inside = if lower { j < i } else { j > i } || (diag && i == j);
            if inside {
                out[i * c + j] = if values { x.get(i, j) } else { 1.0 };
            }
        }
    }
    let nnz = crate::matrix::count_nnz(&out);
    Ok(dense_result(r, c, out, nnz))
}

#[cfg(test)]
mod tests {
    use super::super::testutil::{both, m, same};
    use super::*;

    #[test]
    fn triangles_of_any_shape() {
        let x = m(&[
            &[1.0, 2.0, 3.0, 4.0],
            &[5.0, 0.0, 7.0, 8.0],
            &[9.0, 10.0, 11.0, 12.0],
        ]);
        for x in both(&x) {
            let l = triangle(&x, true, false, true).unwrap();
            let want = m(&[
                &[0.0, 0.0, 0.0, 0.0],
                &[5.0, 0.0, 0.0, 0.0],
                &[9.0, 10.0, 0.0, 0.0],
            ]);
            assert!(same(&l, &want));
            let u = triangle(&x, false, true, false).unwrap();
            let want = m(&[
                &[1.0, 1.0, 1.0, 1.0],
                &[0.0, 1.0, 1.0, 1.0],
                &[0.0, 0.0, 1.0, 1.0],
            ]);
            assert!(same(&u, &want));
        }
    }
}
