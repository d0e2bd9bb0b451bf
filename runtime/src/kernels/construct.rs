//! Matrix constructors: constant fill, row-major values, `seq`.

use super::dense_result;
use crate::error::{Resource, Result, RuntimeError};
use crate::matrix::Matrix;

fn cells(rows: usize, cols: usize) -> Result<usize> {
    rows.checked_mul(cols)
        .ok_or(RuntimeError::Resource(Resource::CellCount {
            shape: (rows, cols),
        }))
}

/// A `rows x cols` matrix with every cell `v` (DML `matrix(v, rows, cols)`).
pub fn fill(rows: usize, cols: usize, v: f64) -> Result<Matrix> {
    cells(rows, cols)?;
    Matrix::filled(rows, cols, v)
}

/// A matrix from row-major values (DML `matrix("1 2 3 4", rows=2, cols=2)`); the number of values
/// must equal `rows * cols`.
pub fn from_row_major(rows: usize, cols: usize, values: Vec<f64>) -> Result<Matrix> {
    let n = cells(rows, cols)?;
    if values.len() != n {
        return Err(RuntimeError::ValuesDoNotFill {
            function: Some("matrix"),
            values: values.len(),
            shape: (rows, cols),
        });
    }
    Matrix::from_dense_values(rows, cols, values)
}

/// Length of `seq(from, to, incr)` as SystemDS computes it (`UtilFunctions.getSeqLength`):
/// `floor(to/incr - from/incr)` plus one, plus one more when round-off hid a last element.
fn seq_length(from: f64, to: f64, incr: f64) -> usize {
    let tmp = (to / incr - from / incr).floor();
    let extra = if incr > 0.0 {
        from + (tmp + 1.0) * incr <= to
    } else {
        from + (tmp + 1.0) * incr >= to
    };
    (1.0 + tmp + if extra { 1.0 } else { 0.0 }) as usize
}

/// `seq(from, to, incr)` as a column vector. Without `incr` the step is 1, or -1 when
/// `from > to`. A zero step, a step of the wrong sign, or NaN/±Inf arguments are user errors.
/// Values are produced by repeated addition (`cur += incr`), like SystemDS.
pub fn seq(from: f64, to: f64, incr: Option<f64>) -> Result<Matrix> {
    let incr = incr.unwrap_or(if from > to { -1.0 } else { 1.0 });
    let bad = !from.is_finite()
        || !to.is_finite()
        || !incr.is_finite()
        || incr == 0.0 && from != to
        || (from > to && incr > 0.0)
        || (from < to && incr < 0.0);
    if bad {
        return Err(RuntimeError::InvalidSeq { from, to, incr });
    }
    let len = if from == to {
        1
    } else {
        seq_length(from, to, incr)
    };
    let mut values = crate::matrix::try_with_capacity(len)?;
    let mut cur = from;
    for _ in 0..len {
        values.push(cur);
        cur += incr;
    }
    let nnz = values.iter().filter(|&&v| v != 0.0).count();
    Ok(dense_result(len, 1, values, nnz))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seq_forms() {
        assert_eq!(
            seq(1.0, 5.0, None).unwrap().into_dense_values().unwrap(),
            vec![1.0, 2.0, 3.0, 4.0, 5.0]
        );
        assert_eq!(
            seq(5.0, 1.0, None).unwrap().into_dense_values().unwrap(),
            vec![5.0, 4.0, 3.0, 2.0, 1.0]
        );
        assert_eq!(seq(0.0, 1.0, Some(0.25)).unwrap().rows(), 5);
        assert_eq!(seq(0.0, 0.9, Some(0.1)).unwrap().rows(), 10);
        assert_eq!(
            seq(1.0, 10.0, Some(4.0))
                .unwrap()
                .into_dense_values()
                .unwrap(),
            vec![1.0, 5.0, 9.0]
        );
        assert_eq!(
            seq(3.0, 3.0, None).unwrap().into_dense_values().unwrap(),
            vec![3.0]
        );
        assert!(seq(1.0, 5.0, Some(-1.0)).is_err());
        assert!(seq(1.0, 5.0, Some(0.0)).is_err());
        assert!(seq(f64::NAN, 5.0, None).is_err());
        let s = seq(0.0, 2.0, None).unwrap();
        s.validate().unwrap();
        assert_eq!(s.nnz(), 2);
    }

    #[test]
    fn fill_and_row_major() {
        let m = fill(2, 3, 0.0).unwrap();
        assert!(m.is_sparse() && m.nnz() == 0);
        assert_eq!(fill(2, 3, 1.5).unwrap().nnz(), 6);
        let m = from_row_major(2, 2, vec![1.0, 2.0, 3.0, 4.0]).unwrap();
        assert_eq!(m.get(1, 0), 3.0);
        let e = from_row_major(2, 3, vec![1.0]).unwrap_err();
        assert!(e.to_string().contains("2x3"));
        assert!(fill(usize::MAX, 2, 1.0).is_err());
    }
}
