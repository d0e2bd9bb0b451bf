//! `rowIndexMax` and `rowIndexMin`: the 1-based column of each row's maximum (minimum).
//!
//! As SystemDS (`LibMatrixAgg`, `uarimax`/`uarimin`): ties go to the last column (the scan
//! compares with `>=`), NaN never wins (a row of NaN gives 1), and in a sparse row whose
//! stored extreme is matched or beaten by its implicit zeros, the last zero's column wins.

use super::dense_result;
use crate::error::{Result, RuntimeError};
use crate::matrix::Matrix;

/// Index (0-based) of the last extreme of `vals` by `wins(v, best)` (`>=` or `<=`), 0 if
/// none wins (all NaN).
fn scan(vals: &[f64], init: f64, wins: fn(f64, f64) -> bool) -> usize {
    let (mut best, mut at) = (init, None);
    for (j, &v) in vals.iter().enumerate() {
        if wins(v, best) {
            best = v;
            at = Some(j);
        }
    }
    at.unwrap_or(0)
}

/// `rowIndexMax(x)` (`max = true`) or `rowIndexMin(x)`: an n×1 column of 1-based indexes.
pub fn row_index(x: &Matrix, max: bool) -> Result<Matrix> {
    let (r, c) = x.shape();
    if c == 0 {
        return Err(RuntimeError::Argument {
            function: if max { "rowIndexMax" } else { "rowIndexMin" },
            problem: format!("undefined for a {r}x0 matrix"),
        });
    }
    let (init, wins): (f64, fn(f64, f64) -> bool) = if max {
        (f64::NEG_INFINITY, |v, b| v >= b)
    } else {
        (f64::INFINITY, |v, b| v <= b)
    };
    let mut out = Vec::with_capacity(r);
    match x {
        Matrix::Dense(d) => {
            for i in 0..r {
                out.push((scan(d.row(i), init, wins) + 1) as f64);
            }
        }
        Matrix::Sparse(s) => {
            for i in 0..r {
                let (idx, vals) = s.row(i);
                if idx.is_empty() {
                    out.push(c as f64);
                    continue;
                }
                let k = scan(vals, init, wins);
                let mut at = idx[k] as usize;
                if idx.len() < c && wins(0.0, vals[k]) {
                    // The last column not stored holds a zero.
                    let mut j = c - 1;
                    for &stored in idx.iter().rev() {
                        if stored as usize != j {
                            break;
                        }
                        j -= 1;
                    }
                    at = j;
                }
                out.push((at + 1) as f64);
            }
        }
    }
    Ok(dense_result(r, 1, out, r))
}

#[cfg(test)]
mod tests {
    use super::super::testutil::{both, m, same};
    use super::*;

    #[test]
    fn last_tie_wins_and_nan_never_does() {
        let nan = f64::NAN;
        let x = m(&[
            &[1.0, 3.0, 3.0],
            &[-2.0, -5.0, nan],
            &[0.0, 0.0, 0.0],
            &[-1.0, 0.0, -3.0],
            &[nan, nan, nan],
            &[0.0, -0.5, 0.0],
        ]);
        for x in both(&x) {
            let mx = row_index(&x, true).unwrap();
            assert!(same(
                &mx,
                &m(&[&[3.0], &[1.0], &[3.0], &[2.0], &[1.0], &[3.0]])
            ));
            let mn = row_index(&x, false).unwrap();
            assert!(same(
                &mn,
                &m(&[&[1.0], &[2.0], &[3.0], &[3.0], &[1.0], &[2.0]])
            ));
        }
        assert!(row_index(&Matrix::zeros(2, 0).unwrap(), true).is_err());
    }
}
