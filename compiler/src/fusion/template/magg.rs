//! The MultiAgg template (paper section 2.2, reference 3.3): two or three full aggregates over
//! shared inputs computed in one scan (`sum(X^2)`, `sum(X*Y)`, `sum(Y^2)` in Figure 1(c)).
//!
//! MultiAgg is a composite: exploration never opens, fuses or merges it; selection creates its
//! entries from the Cell plans of the aggregates (reference 4.7). This file holds the
//! template's conditions that selection checks.

use super::Template;
use crate::fusion::dag::FusionDag;
use crate::fusion::memo::{CloseState, TemplateKind};
use crate::hops::{AggOp, Direction, HopId, OpKind};

/// The MultiAgg template.
#[derive(Clone, Copy, Debug, Default)]
pub struct MAggTemplate;

/// At most three aggregates share one scan (reference 4.10).
pub const MAX_MAGG_AGGREGATES: usize = 3;

impl Template for MAggTemplate {
    fn kind(&self) -> TemplateKind {
        TemplateKind::MAgg
    }
    fn open(&self, _dag: &FusionDag<'_>, _h: HopId) -> bool {
        false
    }
    fn fuse(&self, _dag: &FusionDag<'_>, _h: HopId, _input: HopId) -> bool {
        false
    }
    fn merge(&self, _dag: &FusionDag<'_>, _h: HopId, _input: HopId) -> bool {
        false
    }
    fn close(&self, _dag: &FusionDag<'_>, _h: HopId) -> CloseState {
        CloseState::ClosedInvalid
    }
}

/// A hop that can be one aggregate of a MultiAgg operator: a full `sum` (including sum of
/// squares), `min` or `max`, or a dot product `t(x) %*% y` (reference 3.3).
pub fn is_multi_agg_root(dag: &FusionDag<'_>, h: HopId) -> bool {
    match dag.op(h) {
        OpKind::AggUnary {
            op: AggOp::Sum | AggOp::Min | AggOp::Max,
            dir: Direction::Full,
        } => true,
        OpKind::MatMul => dag.is_1x1(h) && dag.is_transpose(dag.inputs(h)[0]),
        _ => false,
    }
}

/// The dimensions of the matrix an aggregate scans: the aggregate's input, or for a dot
/// product `t(x) %*% y` the column vector `y`.
fn scan_dims(dag: &FusionDag<'_>, h: HopId) -> Option<(u64, u64)> {
    match dag.op(h) {
        OpKind::MatMul => dag.dims(dag.inputs(h)[1]),
        _ => dag.dims(dag.inputs(h)[0]),
    }
}

/// SystemDS `isValidMultiAggregate` (reference 4.7): 2 to 3 distinct multi-aggregate roots
/// that scan inputs of the same known size (one iteration space) and of which none depends on
/// another (they are computed simultaneously).
pub fn is_valid_multi_aggregate(dag: &FusionDag<'_>, roots: &[HopId]) -> bool {
    if roots.len() < 2 || roots.len() > MAX_MAGG_AGGREGATES {
        return false;
    }
    let distinct: std::collections::BTreeSet<_> = roots.iter().collect();
    if distinct.len() != roots.len() || !roots.iter().all(|&r| is_multi_agg_root(dag, r)) {
        return false;
    }
    let Some(d0) = scan_dims(dag, roots[0]) else {
        return false;
    };
    roots.iter().all(|&r| scan_dims(dag, r) == Some(d0))
        && roots.iter().all(|&a| {
            // Through any input: `t(P) %*% (v - P %*% (t(P) %*% v))` reads the dot product
            // `t(P) %*% v` through its second operand (one operator for both is a cycle).
            roots
                .iter()
                .all(|&b| a == b || dag.inputs(a).iter().all(|&input| !dag.contains(input, b)))
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fusion::template::test_util::{build, view};
    use crate::hops::BinaryOp as B;

    #[test]
    fn multi_aggregate_validity() {
        let mut ids = Vec::new();
        let dag = build(|b| {
            let x = b.input("X", 100, 10, 1000);
            let y = b.input("Y", 100, 10, 1000);
            let z = b.input("Z", 50, 10, 500);
            let xy = b.binary(B::Mul, x, y).unwrap();
            let s1 = b.agg(AggOp::Sum, Direction::Full, xy).unwrap();
            let two = b.literal_f64(2.0);
            let x2 = b.binary(B::Pow, x, two).unwrap();
            let s2 = b.agg(AggOp::Sum, Direction::Full, x2).unwrap();
            let s3 = b.agg(AggOp::Sum, Direction::Full, z).unwrap();
            let m = b.agg(AggOp::Mean, Direction::Full, x).unwrap();
            let xs = b.binary(B::Mul, x, s1).unwrap();
            let s4 = b.agg(AggOp::Max, Direction::Full, xs).unwrap();
            ids.extend([s1, s2, s3, m, s4]);
            ids.clone()
        });
        let f = view(&dag);
        let [s1, s2, s3, m, s4] = [ids[0], ids[1], ids[2], ids[3], ids[4]];
        assert!(is_multi_agg_root(&f, s1));
        assert!(!is_multi_agg_root(&f, m));
        assert!(is_valid_multi_aggregate(&f, &[s1, s2]));
        assert!(
            !is_valid_multi_aggregate(&f, &[s1, s3]),
            "different scan sizes"
        );
        assert!(!is_valid_multi_aggregate(&f, &[s1, s4]), "s4 depends on s1");
        assert!(!is_valid_multi_aggregate(&f, &[s1]), "needs two aggregates");
        assert!(!is_valid_multi_aggregate(&f, &[s1, s1]));
        assert_eq!(MAggTemplate.close(&f, s1), CloseState::ClosedInvalid);
        assert!(!MAggTemplate.open(&f, s1));
    }

    /// Gram-Schmidt applied twice: the second dot product reads the first through its second
    /// operand, `t(p) %*% (v - p %*% (t(p) %*% v))`; one MultiAgg for both would be a cycle.
    #[test]
    fn a_dot_product_reading_another_through_its_second_operand_is_not_merged() {
        let mut ids = Vec::new();
        let dag = build(|b| {
            let p = b.input("p", 20, 1, 20);
            let v = b.input("v", 20, 1, 20);
            let pt = b.transpose(p).unwrap();
            let d1 = b.matmul(pt, v).unwrap();
            let proj = b.matmul(p, d1).unwrap();
            let r = b.binary(B::Sub, v, proj).unwrap();
            let d2 = b.matmul(pt, r).unwrap();
            ids.extend([d1, d2]);
            ids.clone()
        });
        let f = view(&dag);
        assert!(is_multi_agg_root(&f, ids[0]) && is_multi_agg_root(&f, ids[1]));
        assert!(!is_valid_multi_aggregate(&f, &[ids[0], ids[1]]));
    }
}
