//! The grouped aggregate `aggregate(target=X, groups=G, fn=..., ngroups=k, weights=W)`
//! (SystemDS's `groupedagg`).
//!
//! Row i of X (each column separately) belongs to group `G[i]` (truncated toward zero; a
//! group below 1 is an error, as in SystemDS); the result has one row per group, up to the
//! largest group or `ngroups` (rows of larger groups are dropped), and X's columns. `fn` is
//! `"sum"`, `"count"`, `"mean"`, `"variance"`, `"centralmoment"` (with `order` 2, 3 or 4),
//! `"min"` or `"max"`; weights scale each row's contribution (count is their sum, rounded at
//! each step as SystemDS does; min and max are of the weighted values). An empty
//! group gives 0 (`centralmoment`: NaN, SystemDS's 0/0), as SystemDS.

use super::dense_result;
use crate::error::{Result, RuntimeError, ShapeOp};
use crate::matrix::Matrix;
use crate::ops::{BinaryOp, UnaryOp};

/// The aggregate function of a grouped aggregate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GroupedFn {
    Sum,
    Count,
    Mean,
    Variance,
    /// `centralmoment` of order 2, 3 or 4.
    CentralMoment(u32),
    Min,
    Max,
}

impl GroupedFn {
    /// The function `fn` names, with `order` for `centralmoment`.
    pub fn parse(name: &str, order: i64) -> Result<GroupedFn> {
        Ok(match name {
            "sum" => GroupedFn::Sum,
            "count" => GroupedFn::Count,
            "mean" => GroupedFn::Mean,
            "variance" => GroupedFn::Variance,
            "min" => GroupedFn::Min,
            "max" => GroupedFn::Max,
            "centralmoment" => match order {
                2..=4 => GroupedFn::CentralMoment(order as u32),
                _ => {
                    return Err(RuntimeError::Argument {
                        function: "aggregate",
                        problem: format!("centralmoment needs order 2, 3 or 4, found {order}"),
                    })
                }
            },
            other => {
                return Err(RuntimeError::Argument {
                    function: "aggregate",
                    problem: format!(
                        "unknown fn {other:?}: use \"sum\", \"count\", \"mean\", \"variance\", \
                         \"centralmoment\", \"min\" or \"max\""
                    ),
                })
            }
        })
    }
}

/// `aggregate(target=x, groups=g, fn=f, ngroups, weights=w)`.
pub fn grouped_aggregate(
    x: &Matrix,
    g: &Matrix,
    w: Option<&Matrix>,
    f: GroupedFn,
    ngroups: Option<usize>,
) -> Result<Matrix> {
    let (n, m) = x.shape();
    let vector_of_n = |v: &Matrix| v.cols() == 1 && v.rows() == n;
    for (name, v) in [("groups", Some(g)), ("weights", w)] {
        if let Some(v) = v {
            if !vector_of_n(v) {
                return Err(RuntimeError::ShapeMismatch {
                    op: ShapeOp::Builtin(if name == "groups" {
                        "aggregate (groups)"
                    } else {
                        "aggregate (weights)"
                    }),
                    left: (n, m),
                    right: v.shape(),
                });
            }
        }
    }
    let mut group = Vec::with_capacity(n);
    let mut largest = 0usize;
    for i in 0..n {
        let v = g.get(i, 0);
        // SystemDS's `UtilFunctions.toInt`-style truncation; NaN is rejected (SystemDS fails
        // with an index error).
        let k = if v.is_nan() {
            0
        } else {
            (v.signum() * v.abs().floor()) as i64
        };
        if k < 1 {
            return Err(RuntimeError::Argument {
                function: "aggregate",
                problem: format!("groups must be >= 1, found {v} in row {}", i + 1),
            });
        }
        let k = usize::try_from(k).unwrap_or(usize::MAX);
        largest = largest.max(k);
        group.push(k - 1);
    }
    let k = ngroups.unwrap_or(largest);
    crate::matrix::checked_cells(k, m)?;
    let weight = |i: usize| w.map_or(1.0, |w| w.get(i, 0));
    let mut out = crate::matrix::try_alloc_zeroed(k * m)?;
    for j in 0..m {
        // Per group: total weight, running mean, second moment (weighted Welford, the
        // incremental update SystemDS's CM objects make), min, max, weighted sum.
        let mut wsum = vec![0.0; k];
        let mut mean = vec![0.0; k];
        let mut m2 = vec![0.0; k];
        let mut sum = vec![0.0; k];
        let mut lo = vec![f64::INFINITY; k];
        let mut hi = vec![f64::NEG_INFINITY; k];
        let mut members = vec![0usize; k];
        let mut count = vec![0.0; k];
        for (i, &gi) in group.iter().enumerate() {
            if gi >= k {
                continue;
            }
            let (v, wt) = (x.get(i, j), weight(i));
            members[gi] += 1;
            sum[gi] += v * wt;
            let total = wsum[gi] + wt;
            let d = v - mean[gi];
            if total != 0.0 {
                let step = d * wt / total;
                m2[gi] += wsum[gi] * step * d;
                mean[gi] += step;
            }
            wsum[gi] = total;
            // SystemDS's CM objects: min and max of the weighted values, and a weighted count
            // rounded (Java's `Math.round`) at every step after the first.
            lo[gi] = BinaryOp::Min.apply(lo[gi], v * wt);
            hi[gi] = BinaryOp::Max.apply(hi[gi], v * wt);
            count[gi] = if members[gi] == 1 {
                wt
            } else {
                UnaryOp::Round.apply(count[gi] + wt)
            };
        }
        let moment = |order: i32, gi: usize| -> f64 {
            let mut acc = 0.0;
            for (i, _) in group.iter().enumerate().filter(|(_, &g)| g == gi) {
                acc += weight(i) * (x.get(i, j) - mean[gi]).powi(order);
            }
            acc / wsum[gi]
        };
        for gi in 0..k {
            let empty = members[gi] == 0;
            out[gi * m + j] = match f {
                GroupedFn::Sum => sum[gi],
                GroupedFn::Count => count[gi],
                GroupedFn::Mean => mean[gi],
                GroupedFn::Variance if wsum[gi] == 1.0 || empty => 0.0,
                GroupedFn::Variance => m2[gi] / (wsum[gi] - 1.0),
                GroupedFn::CentralMoment(2) => m2[gi] / wsum[gi],
                GroupedFn::CentralMoment(o) => moment(o as i32, gi),
                GroupedFn::Min if empty => 0.0,
                GroupedFn::Min => lo[gi],
                GroupedFn::Max if empty => 0.0,
                GroupedFn::Max => hi[gi],
            };
        }
    }
    let nnz = crate::matrix::count_nnz(&out);
    Ok(dense_result(k, m, out, nnz))
}

#[cfg(test)]
mod tests {
    use super::super::testutil::{both, close, m, same};
    use super::*;

    #[test]
    fn aggregates_per_group_as_systemds() {
        // Expected values printed by SystemDS 3.4 for the same inputs.
        let x = m(&[&[1.0], &[2.0], &[3.0], &[4.0], &[5.0], &[6.0]]);
        let g = m(&[&[1.0], &[2.0], &[1.0], &[3.0], &[2.0], &[1.0]]);
        let w = m(&[&[1.0], &[1.0], &[2.0], &[1.0], &[1.0], &[0.5]]);
        for x in both(&x) {
            let agg = |f, w: Option<&Matrix>, k| grouped_aggregate(&x, &g, w, f, k).unwrap();
            assert!(same(
                &agg(GroupedFn::Sum, None, None),
                &m(&[&[10.0], &[7.0], &[4.0]])
            ));
            assert!(same(
                &agg(GroupedFn::Count, Some(&w), None),
                &m(&[&[4.0], &[2.0], &[1.0]])
            ));
            let var = agg(GroupedFn::Variance, None, Some(4));
            assert!(close(
                &var,
                &m(&[&[19.0 / 3.0], &[4.5], &[0.0], &[0.0]]),
                1e-12
            ));
            let mean = agg(GroupedFn::Mean, Some(&w), Some(2));
            assert!(close(&mean, &m(&[&[10.0 / 3.5], &[3.5]]), 1e-12));
            let cm = agg(GroupedFn::CentralMoment(2), None, None);
            assert!(close(&cm, &m(&[&[38.0 / 9.0], &[2.25], &[0.0]]), 1e-12));
            let lo = agg(GroupedFn::Min, None, Some(4));
            assert!(same(&lo, &m(&[&[1.0], &[2.0], &[4.0], &[0.0]])));
        }
        let zero = m(&[&[1.0], &[0.0], &[1.0], &[1.0], &[1.0], &[1.0]]);
        assert!(grouped_aggregate(&x, &zero, None, GroupedFn::Sum, None).is_err());
        assert!(GroupedFn::parse("median", -1).is_err());
    }
}
