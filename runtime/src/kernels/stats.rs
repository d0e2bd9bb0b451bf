//! Order statistics and moments of column vectors, as SystemDS 3.4 computes them:
//! `quantile`, `median`, `interQuartileMean` (its `qsort` then `qpick`), `moment` (`cm`) and
//! `cov`, each unweighted or with integer weights (counts).
//!
//! SystemDS sorts a column into (value, weight) pairs, all zeros gathered in one pair (of
//! weight 0 where there are none), ascending, and picks quantiles by the cumulative
//! weight: the pair where it first reaches `ceil(p * total)`. A scalar quantile and the median
//! average that value with the next one when the total weight is even and the rank falls
//! exactly on a pair's end; a column of probabilities picks without averaging. The odd cases
//! below (the zero pair of weight 0, the rank compared with the number of pairs) are kept as
//! SystemDS has them, so results agree on every input it accepts.

use crate::error::{Result, RuntimeError};
use crate::matrix::Matrix;
use lafuse_core::StatOp;

/// A checked column vector's values.
fn column(m: &Matrix, function: &'static str) -> Result<Vec<f64>> {
    if m.cols() != 1 {
        return Err(RuntimeError::FunctionShape {
            function,
            expected: "a column vector",
            shape: m.shape(),
        });
    }
    Ok((0..m.rows()).map(|i| m.get(i, 0)).collect())
}

/// The weights of `values` (a column of the same length, integers for the order statistics).
fn weights(w: &Matrix, n: usize, function: &'static str, integral: bool) -> Result<Vec<f64>> {
    let w = column(w, function)?;
    if w.len() != n {
        return Err(RuntimeError::FunctionShape {
            function,
            expected: "weights with one row per value",
            shape: (w.len(), 1),
        });
    }
    if integral {
        if let Some(&bad) = w.iter().find(|v| v.floor() < **v) {
            return Err(RuntimeError::StatArgument {
                function,
                argument: "W",
                expected: "integer weights",
                found: bad,
            });
        }
    }
    Ok(w)
}

/// SystemDS's sorted (value, weight) pairs: `(0, weight of the zeros)` and the non-zeros,
/// ascending (a stable sort: equal values keep their order). Without zeros in the data the
/// zeros' pair has weight 0 and still sits among the values.
fn sorted_pairs(x: &[f64], w: Option<&[f64]>) -> Vec<(f64, f64)> {
    let weight = |i: usize| w.map_or(1.0, |w| w[i]);
    let zeros: f64 = (0..x.len()).filter(|&i| x[i] == 0.0).map(weight).sum();
    let mut pairs: Vec<(f64, f64)> = std::iter::once((0.0, zeros))
        .chain(
            (0..x.len())
                .filter(|&i| x[i] != 0.0)
                .map(|i| (x[i], weight(i))),
        )
        .collect();
    pairs.sort_by(|a, b| a.0.total_cmp(&b.0));
    pairs
}

/// The quantile `p` of sorted pairs (SystemDS's `pickValue(p, average)`).
fn pick(pairs: &[(f64, f64)], p: f64, average: bool, function: &'static str) -> Result<f64> {
    if !(0.0..=1.0).contains(&p) {
        return Err(RuntimeError::StatArgument {
            function,
            argument: "p",
            expected: "a probability in [0, 1]",
            found: p,
        });
    }
    let total: f64 = pairs.iter().map(|q| q.1).sum();
    let average = average && total % 2.0 == 0.0;
    let pos = (p * total).ceil() as i64;
    let n = pairs.len();
    // The cumulative weight is a Java `int`, each weight added through a cast.
    let (mut t, mut i) = (0i64, 0usize);
    loop {
        t = (t as f64 + pairs[i].1) as i64;
        if t >= pos || i + 1 >= n {
            break;
        }
        i += 1;
    }
    let value = |k: usize| pairs.get(k).map_or(pairs[i].0, |q| q.0);
    if pairs[i].1 != 0.0 {
        if average && pos < n as i64 - 1 {
            if pos < t {
                return Ok(pairs[i].0);
            }
            // The next pair, or the one after it where the next is the zeros' pair of weight 0.
            let next = if pairs.get(i + 1).is_some_and(|q| q.1 != 0.0) {
                i + 1
            } else {
                i + 2
            };
            return Ok((pairs[i].0 + value(next)) / 2.0);
        }
        Ok(pairs[i].0)
    } else if i + 1 < n {
        // The zeros' pair of weight 0 (no zero in the data; or a value of weight 0).
        Ok(pairs[i + 1].0)
    } else {
        Ok(value(i.saturating_sub(1)))
    }
}

/// SystemDS's inter-quartile mean of sorted pairs: the weighted mean of the values between
/// the 25% and 75% ranks, the quartiles' pairs counted in part.
fn iqm(pairs: &[(f64, f64)]) -> f64 {
    let total: f64 = pairs.iter().map(|q| q.1).sum();
    let (q25d, q75d) = (0.25 * total, 0.75 * total);
    let (q25i, q75i) = (q25d.ceil(), q75d.ceil());
    let n = pairs.len();
    // `i` is the last pair added to `psum` (none yet: before the first).
    let (mut psum, mut next) = (0.0, 0usize);
    while psum < q25i && next < n {
        psum += pairs[next].1;
        next += 1;
    }
    let mut i = next.saturating_sub(1);
    let (q25part, q25val) = (psum - q25d, pairs[i].0);
    let mut sum = 0.0;
    while psum < q75i && i + 1 < n {
        i += 1;
        psum += pairs[i].1;
        sum += pairs[i].0 * pairs[i].1;
    }
    let (q75part, q75val) = (psum - q75d, pairs[i].0);
    (sum + q25part * q25val - q75part * q75val) / (total * 0.5)
}

/// The value of a statistic: a scalar (as a 1x1 matrix) or, for `quantile` of a column of
/// probabilities, a column. `inputs` are the hop's, in [`StatOp`]'s order.
pub fn stat(op: StatOp, inputs: &[StatInput<'_>]) -> Result<StatValue> {
    let name = op.name();
    if op.is_distribution() {
        let values: Vec<f64> = inputs
            .iter()
            .map(|i| match i {
                StatInput::Scalar(v) => *v,
                StatInput::Matrix(m) if m.shape() == (1, 1) => m.get(0, 0),
                StatInput::Matrix(_) => f64::NAN,
            })
            .collect();
        return super::distributions::distribution(op, &values).map(StatValue::Scalar);
    }
    let matrix = |i: usize| match inputs.get(i) {
        Some(StatInput::Matrix(m)) => Ok(*m),
        _ => Err(RuntimeError::StatArgument {
            function: name,
            argument: "X",
            expected: "a matrix",
            found: f64::NAN,
        }),
    };
    let scalar = |i: usize| match inputs.get(i) {
        Some(StatInput::Scalar(v)) => Ok(*v),
        Some(StatInput::Matrix(m)) if m.shape() == (1, 1) => Ok(m.get(0, 0)),
        _ => Err(RuntimeError::StatArgument {
            function: name,
            argument: "k",
            expected: "a scalar",
            found: f64::NAN,
        }),
    };
    let x = column(matrix(0)?, name)?;
    let weighted = matches!(
        op,
        StatOp::WeightedQuantile
            | StatOp::WeightedMedian
            | StatOp::WeightedIqm
            | StatOp::WeightedMoment
    );
    let w = if weighted {
        let integral = op != StatOp::WeightedMoment;
        Some(weights(matrix(1)?, x.len(), name, integral)?)
    } else {
        None
    };
    let pairs = || sorted_pairs(&x, w.as_deref());
    Ok(match op {
        StatOp::Quantile | StatOp::WeightedQuantile => match inputs.last() {
            Some(StatInput::Matrix(ps)) => {
                let ps = column(ps, name)?;
                let pairs = pairs();
                let picked = ps
                    .iter()
                    .map(|&p| pick(&pairs, p, false, name))
                    .collect::<Result<Vec<f64>>>()?;
                StatValue::Column(picked)
            }
            _ => StatValue::Scalar(pick(&pairs(), scalar(inputs.len() - 1)?, true, name)?),
        },
        StatOp::Median | StatOp::WeightedMedian => {
            StatValue::Scalar(pick(&pairs(), 0.5, true, name)?)
        }
        StatOp::Iqm | StatOp::WeightedIqm => StatValue::Scalar(iqm(&pairs())),
        StatOp::Moment | StatOp::WeightedMoment => {
            let k = scalar(inputs.len() - 1)?;
            if !matches!(k, 2.0 | 3.0 | 4.0) {
                return Err(RuntimeError::StatArgument {
                    function: "moment",
                    argument: "k",
                    expected: "the order 2, 3 or 4",
                    found: k,
                });
            }
            StatValue::Scalar(central_moment(&x, w.as_deref(), k as i32))
        }
        StatOp::Cov | StatOp::WeightedCov => {
            let y = column(matrix(1)?, name)?;
            if y.len() != x.len() {
                return Err(RuntimeError::FunctionShape {
                    function: "cov",
                    expected: "two columns of the same length",
                    shape: (y.len(), 1),
                });
            }
            let w = match op {
                StatOp::WeightedCov => Some(weights(matrix(2)?, x.len(), name, false)?),
                _ => None,
            };
            StatValue::Scalar(covariance(&x, &y, w.as_deref()))
        }
        // Handled above.
        StatOp::NormalCdf
        | StatOp::ExpCdf
        | StatOp::ChisqCdf
        | StatOp::FCdf
        | StatOp::TCdf
        | StatOp::NormalQuantile
        | StatOp::ExpQuantile
        | StatOp::ChisqQuantile
        | StatOp::FQuantile
        | StatOp::TQuantile => unreachable!("distribution functions return before the data"),
    })
}

/// An input of [`stat`].
#[derive(Clone, Copy, Debug)]
pub enum StatInput<'a> {
    Matrix(&'a Matrix),
    Scalar(f64),
}

/// The result of [`stat`].
#[derive(Clone, Debug, PartialEq)]
pub enum StatValue {
    Scalar(f64),
    Column(Vec<f64>),
}

/// The weighted mean, and the total weight.
fn weighted_mean(x: &[f64], w: Option<&[f64]>) -> (f64, f64) {
    let weight = |i: usize| w.map_or(1.0, |w| w[i]);
    let total: f64 = (0..x.len()).map(weight).sum();
    let sum: f64 = (0..x.len()).map(|i| weight(i) * x[i]).sum();
    (sum / total, total)
}

/// The k-th central moment, denominator the total weight (SystemDS's `cm`: not `var`'s n-1).
fn central_moment(x: &[f64], w: Option<&[f64]>, k: i32) -> f64 {
    let (mean, total) = weighted_mean(x, w);
    let s: f64 = (0..x.len())
        .map(|i| w.map_or(1.0, |w| w[i]) * (x[i] - mean).powi(k))
        .sum();
    s / total
}

/// The sample covariance, denominator the total weight less one.
fn covariance(x: &[f64], y: &[f64], w: Option<&[f64]>) -> f64 {
    let (mx, total) = weighted_mean(x, w);
    let (my, _) = weighted_mean(y, w);
    let s: f64 = (0..x.len())
        .map(|i| w.map_or(1.0, |w| w[i]) * (x[i] - mx) * (y[i] - my))
        .sum();
    s / (total - 1.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn col(v: &[f64]) -> Matrix {
        Matrix::from_dense_values(v.len(), 1, v.to_vec()).unwrap()
    }

    fn scalar(op: StatOp, inputs: &[StatInput<'_>]) -> f64 {
        match stat(op, inputs).unwrap() {
            StatValue::Scalar(v) => v,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn order_statistics_as_systemds_prints_them() {
        // Values SystemDS 3.4 prints for X = (3 1 4 1 5 9 2 6), W = (1 2 1 1 3 1 1 2).
        let x = col(&[3.0, 1.0, 4.0, 1.0, 5.0, 9.0, 2.0, 6.0]);
        let w = col(&[1.0, 2.0, 1.0, 1.0, 3.0, 1.0, 1.0, 2.0]);
        let (m, s) = (StatInput::Matrix(&x), StatInput::Scalar);
        assert_eq!(scalar(StatOp::Quantile, &[m, s(0.25)]), 1.5);
        assert_eq!(scalar(StatOp::Quantile, &[m, s(0.5)]), 3.5);
        assert_eq!(scalar(StatOp::Quantile, &[m, s(1.0)]), 9.0);
        assert_eq!(scalar(StatOp::Quantile, &[m, s(0.0)]), 1.0);
        let p = col(&[0.1, 0.5, 0.9]);
        assert_eq!(
            stat(StatOp::Quantile, &[m, StatInput::Matrix(&p)]).unwrap(),
            StatValue::Column(vec![1.0, 3.0, 9.0])
        );
        let wm = StatInput::Matrix(&w);
        assert_eq!(scalar(StatOp::WeightedQuantile, &[m, wm, s(0.5)]), 4.5);
        assert_eq!(
            stat(StatOp::WeightedQuantile, &[m, wm, StatInput::Matrix(&p)]).unwrap(),
            StatValue::Column(vec![1.0, 4.0, 6.0])
        );
        assert_eq!(scalar(StatOp::Median, &[m]), 3.5);
        assert_eq!(scalar(StatOp::WeightedMedian, &[m, wm]), 4.5);
        assert_eq!(scalar(StatOp::Iqm, &[m]), 3.5);
        assert_eq!(scalar(StatOp::WeightedIqm, &[m, wm]), 4.0);
        assert_eq!(scalar(StatOp::Moment, &[m, s(2.0)]), 6.609375);
        assert!((scalar(StatOp::Moment, &[m, s(3.0)]) - 11.355468750000004).abs() < 1e-12);
        assert!((scalar(StatOp::Moment, &[m, s(4.0)]) - 107.68286132812501).abs() < 1e-10);
        let y = col(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 9.0]);
        let c = scalar(StatOp::Cov, &[m, StatInput::Matrix(&y)]);
        assert!((c - 3.517857142857143).abs() < 1e-14);
        // Negative values sort before the zeros (SystemDS: 0.0, -1.0, 0.16666666666666666).
        let n = col(&[-3.0, 0.0, 2.0, -1.0, 0.0, 5.0, 0.0, -7.0, 4.0]);
        let nm = StatInput::Matrix(&n);
        assert_eq!(scalar(StatOp::Median, &[nm]), 0.0);
        assert_eq!(scalar(StatOp::Quantile, &[nm, s(0.3)]), -1.0);
        assert!((scalar(StatOp::Iqm, &[nm]) - 0.16666666666666666).abs() < 1e-15);
        let five = col(&[1.0, 2.0, 3.0, 4.0, 5.0]);
        assert_eq!(
            scalar(StatOp::Quantile, &[StatInput::Matrix(&five), s(0.3)]),
            2.0
        );
    }

    #[test]
    fn bad_arguments_are_errors() {
        let x = col(&[1.0, 2.0]);
        let m = StatInput::Matrix(&x);
        assert!(stat(StatOp::Quantile, &[m, StatInput::Scalar(1.5)]).is_err());
        assert!(stat(StatOp::Moment, &[m, StatInput::Scalar(5.0)]).is_err());
        let frac = col(&[1.0, 0.5]);
        assert!(stat(StatOp::WeightedMedian, &[m, StatInput::Matrix(&frac)]).is_err());
        let wide = Matrix::from_dense_values(1, 2, vec![1.0, 2.0]).unwrap();
        assert!(stat(StatOp::Median, &[StatInput::Matrix(&wide)]).is_err());
    }
}
