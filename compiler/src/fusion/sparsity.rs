//! Sparse-safety analysis and the choice of a fused operator's main (driving) input.
//!
//! A fused operator is *sparse-safe* in its main input `X` when its result for a cell (or row)
//! where `X` is zero is zero, so the skeleton may visit the non-zeros of `X` only (paper
//! section 1 "sparse drivers"; reference 3.1 "Sparse safety"). The templates use
//! [`is_sparse_safe_binary`] (Outer validity, reference 3.4); CPlan construction uses
//! [`is_zero_preserving`] and [`choose_main_input`] on the region a selected plan covers.
//!
//! Unlike SystemDS, zero preservation is decided by evaluating the operation at zero (so
//! `X ^ -1` or `s / X` are correctly *not* sparse-safe in `X`), and per operand (so `X / Y` is
//! safe in `X` only).

use crate::fusion::dag::FusionDag;
use crate::hops::{AggOp, BinaryOp, Direction, HopId, OpKind};
use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};

/// Whether `op(a, b)` is zero whenever the operand at `pos` (0 = left, 1 = right) is zero,
/// whatever the (finite, possibly non-zero) other operand `other` is; `other` is the other
/// operand's value when it is a known literal.
///
/// `*` and `&` are zero-preserving in both operands, `/` in its numerator (`0 / y` is `0`
/// except for `y = 0`, the convention SystemDS and the paper use for `X / f(UV')`). With a
/// literal other operand the op is evaluated at zero, e.g. `X != 0`, `X > 0`, `X ^ 2`,
/// `max(X, -1)` are zero-preserving in X, `X + 1`, `X ^ 0`, `X == 0` are not.
pub fn binary_zero_preserving(op: BinaryOp, pos: usize, other: Option<f64>) -> bool {
    match op {
        BinaryOp::Mul | BinaryOp::And => true,
        BinaryOp::Div if pos == 0 => true,
        _ => match other {
            Some(c) => {
                let v = if pos == 0 {
                    op.apply(0.0, c)
                } else {
                    op.apply(c, 0.0)
                };
                v == 0.0
            }
            None => false,
        },
    }
}

/// SystemDS `isBinarySparseSafe` (reference 3 preamble), made exact: the hop is `*` or `/`, or
/// a binary with one literal operand that is zero-preserving in the other operand.
pub fn is_sparse_safe_binary(dag: &FusionDag<'_>, hop: HopId) -> bool {
    let Some(op) = dag.binary_op(hop) else {
        return false;
    };
    if matches!(op, BinaryOp::Mul | BinaryOp::Div) {
        return true;
    }
    let ins = dag.inputs(hop);
    let (l, r) = (dag.literal_f64(ins[0]), dag.literal_f64(ins[1]));
    match (l, r) {
        (None, Some(c)) => binary_zero_preserving(op, 0, Some(c)),
        (Some(c), None) => binary_zero_preserving(op, 1, Some(c)),
        _ => false,
    }
}

/// Whether the value computed at `root` is zero wherever `driver` is zero, looking through the
/// hops for which `in_region` holds (the fused operator's body) and treating every other hop
/// as an opaque input (non-zero unless it is `driver`).
///
/// Aggregations are zero-preserving for `sum` over a zero-preserving input only: the skeleton
/// then skips zero cells without changing the sum, while `min`, `max`, `mean`, `prod` and `var`
/// need corrections for missing zeros (paper footnote 1) that a sparse-safe plan does not do.
pub fn is_zero_preserving(
    dag: &FusionDag<'_>,
    root: HopId,
    driver: HopId,
    in_region: &dyn Fn(HopId) -> bool,
) -> bool {
    // The region's hops under `root`, evaluated bottom-up (iteratively: a fused body may be a
    // long chain, and user scripts must not be able to overflow the stack).
    let mut needed = BTreeSet::new();
    let mut stack = vec![root];
    while let Some(h) = stack.pop() {
        if h != driver && in_region(h) && needed.insert(h) {
            stack.extend(dag.inputs(h).iter().copied());
        }
    }
    let mut zero: BTreeMap<HopId, bool> = BTreeMap::new();
    let value = |zero: &BTreeMap<HopId, bool>, h: HopId| {
        h == driver || zero.get(&h).copied().unwrap_or(false)
    };
    for &h in dag.order() {
        if !needed.contains(&h) {
            continue;
        }
        let ins = dag.inputs(h);
        let v = match dag.op(h) {
            OpKind::Unary(op) => op.apply(0.0) == 0.0 && value(&zero, ins[0]),
            OpKind::Binary(op) => (0..2).any(|pos| {
                binary_zero_preserving(*op, pos, dag.literal_f64(ins[1 - pos]))
                    && value(&zero, ins[pos])
            }),
            OpKind::AggUnary { op: AggOp::Sum, .. } => value(&zero, ins[0]),
            // A transpose inside a Cell plan is a vector re-labelling; it keeps zeros.
            OpKind::Reorg(crate::hops::ReorgOp::Transpose) => value(&zero, ins[0]),
            // A fused dot product `t(x) %*% y` is `sum(x ⊙ y)`.
            OpKind::MatMul => value(&zero, ins[0]) || value(&zero, ins[1]),
            _ => false,
        };
        zero.insert(h, v);
    }
    value(&zero, root)
}

/// The order in which a fused operator's matrix inputs are considered as main input (SystemDS
/// `HopInputComparator`, reference 3.1): more cells first (unknown sizes count as largest),
/// scalars last; between equally large matrices with known, different non-zero counts of which
/// one is sparse, the sparser first (it can drive sparse iteration); otherwise by hop id.
pub fn compare_main_input_candidates(dag: &FusionDag<'_>, a: HopId, b: HopId) -> Ordering {
    let key = |h: HopId| -> (u8, u64) {
        if dag.is_scalar(h) {
            (0, 0)
        } else {
            match dag.hop(h).cells() {
                Some(c) => (1, c),
                None => (2, 0),
            }
        }
    };
    let (ka, kb) = (key(a), key(b));
    if ka != kb {
        return kb.cmp(&ka);
    }
    let (ha, hb) = (dag.hop(a), dag.hop(b));
    if let (Some(na), Some(nb), Some(sa), Some(sb)) = (ha.nnz, hb.nnz, ha.sparsity(), hb.sparsity())
    {
        if na != nb && (sa < 1.0 || sb < 1.0) {
            return na.cmp(&nb);
        }
    }
    a.cmp(&b)
}

/// The main input of a fused operator over `inputs`: the first matrix in
/// [`compare_main_input_candidates`] order (`None` if all inputs are scalars).
pub fn choose_main_input(dag: &FusionDag<'_>, inputs: &[HopId]) -> Option<HopId> {
    let mut ms: Vec<HopId> = inputs
        .iter()
        .copied()
        .filter(|&h| dag.is_matrix(h))
        .collect();
    ms.sort_by(|&a, &b| compare_main_input_candidates(dag, a, b));
    ms.first().copied()
}

/// A sparse driver for the fused operator rooted at `root` with body `in_region` and matrix
/// inputs `inputs`: the first input in main-input order that is sparse (known non-zeros, fewer
/// than cells) and as large as the largest input, such that the body is zero-preserving in it.
/// `None` means the operator must visit every cell.
pub fn choose_sparse_driver(
    dag: &FusionDag<'_>,
    root: HopId,
    inputs: &[HopId],
    in_region: &dyn Fn(HopId) -> bool,
) -> Option<HopId> {
    first_zero_preserving(dag, root, inputs, in_region, true)
}

/// As [`choose_sparse_driver`], dense inputs included: an Outer operator's driver where no
/// sparse one exists. The Outer template computes `0 * body` at its driver's zeros (the
/// unfused `X * f`, or `(X != 0) * f` with the mask simplified away), so its driver must be an
/// input the body is zero-preserving in, sparse or not.
pub fn choose_zero_preserving_input(
    dag: &FusionDag<'_>,
    root: HopId,
    inputs: &[HopId],
    in_region: &dyn Fn(HopId) -> bool,
) -> Option<HopId> {
    first_zero_preserving(dag, root, inputs, in_region, false)
}

fn first_zero_preserving(
    dag: &FusionDag<'_>,
    root: HopId,
    inputs: &[HopId],
    in_region: &dyn Fn(HopId) -> bool,
    sparse_only: bool,
) -> Option<HopId> {
    let mut ms: Vec<HopId> = inputs
        .iter()
        .copied()
        .filter(|&h| dag.is_matrix(h))
        .collect();
    ms.sort_by(|&a, &b| compare_main_input_candidates(dag, a, b));
    let largest = ms.first().and_then(|&h| dag.hop(h).cells())?;
    ms.into_iter().find(|&h| {
        dag.hop(h).cells() == Some(largest)
            && (!sparse_only || dag.hop(h).sparsity().is_some_and(|s| s < 1.0))
            && is_zero_preserving(dag, root, h, in_region)
    })
}

/// Whether an aggregation over a zero-preserving input may skip zeros of the main input:
/// only sums (see [`is_zero_preserving`]); any direction.
pub fn agg_is_sparse_safe(op: AggOp, _dir: Direction) -> bool {
    op == AggOp::Sum
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hops::{DagBuilder, UnaryOp};

    #[test]
    fn literal_operands_are_evaluated_at_zero() {
        use BinaryOp::*;
        assert!(binary_zero_preserving(Ne, 0, Some(0.0)));
        assert!(binary_zero_preserving(Gt, 0, Some(0.0)));
        assert!(binary_zero_preserving(Pow, 0, Some(2.0)));
        assert!(!binary_zero_preserving(Pow, 0, Some(-1.0)), "0^-1 = inf");
        assert!(!binary_zero_preserving(Pow, 0, Some(0.0)), "0^0 = 1");
        assert!(binary_zero_preserving(Max, 0, Some(-1.0)));
        assert!(!binary_zero_preserving(Max, 0, Some(1.0)));
        assert!(binary_zero_preserving(Min, 1, Some(3.0)));
        assert!(!binary_zero_preserving(Add, 0, Some(1.0)));
        assert!(binary_zero_preserving(Sub, 0, Some(0.0)));
        assert!(!binary_zero_preserving(Eq, 0, Some(0.0)));
        assert!(binary_zero_preserving(Div, 0, None));
        assert!(!binary_zero_preserving(Div, 1, None), "s / 0 is not 0");
        assert!(binary_zero_preserving(Mul, 1, None));
        assert!(!binary_zero_preserving(Add, 0, None));
    }

    #[test]
    fn zero_preservation_through_a_fused_body() {
        // sum(X * log(Y + 1e-15)) is zero-preserving in X, not in Y.
        let mut b = DagBuilder::new();
        let x = b.input("X", 100, 100, 50);
        let y = b.input("Y", 100, 100, 10_000);
        let eps = b.literal_f64(1e-15);
        let ye = b.binary(BinaryOp::Add, y, eps).unwrap();
        let l = b.unary(UnaryOp::Log, ye).unwrap();
        let p = b.binary(BinaryOp::Mul, x, l).unwrap();
        let s = b.agg(AggOp::Sum, Direction::Full, p).unwrap();
        let e = b.unary(UnaryOp::Exp, x).unwrap();
        b.output("s", s).unwrap();
        b.output("e", e).unwrap();
        let dag = b.build().unwrap();
        let f = FusionDag::new(&dag).unwrap();
        let all = |_: HopId| true;
        assert!(is_zero_preserving(&f, s, x, &all));
        assert!(!is_zero_preserving(&f, s, y, &all));
        assert!(!is_zero_preserving(&f, e, x, &all), "exp(0) = 1");
        assert_eq!(choose_sparse_driver(&f, s, &[y, x], &all), Some(x));
        assert_eq!(choose_main_input(&f, &[y, x]), Some(x), "sparser first");
        assert!(is_sparse_safe_binary(&f, p));
        assert!(!is_sparse_safe_binary(&f, ye));
    }
}
