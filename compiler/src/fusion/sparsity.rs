//! Sparse-safety analysis and the choice of a fused operator's main (driving) input.
//!
//! A fused operator is *sparse-safe* in its main input `X` when its result for a cell (or row)
//! where `X` is zero is zero, so the skeleton may visit the non-zeros of `X` only (paper
//! section 1 "sparse drivers"; reference 3.1 "Sparse safety"). The templates use
//! [`is_sparse_safe_binary`] (Outer validity, reference 3.4); CPlan construction uses
//! [`is_zero_preserving`] and [`choose_main_input`] on the region a selected plan covers. An
//! Outer operator's driver is named by [`outer_driver`] alone, for the cost model and the CPlan
//! construction alike.
//!
//! Unlike SystemDS, zero preservation is decided by evaluating the operation at zero (so
//! `X ^ -1` or `s / X` are correctly *not* sparse-safe in `X`), and per operand (so `X / Y` is
//! safe in `X` only).

use crate::fusion::dag::FusionDag;
use crate::hops::{AggOp, BinaryOp, Direction, HopId, OpKind, ReorgOp, UnaryOp};
use std::cmp::Ordering;
use std::collections::BTreeSet;

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
    // long chain, and user scripts must not be able to overflow the stack). Flags by arena
    // index: the cost-based search asks this for every plan it costs.
    let mut needed = vec![false; dag.arena_len()];
    let mut stack = vec![root];
    while let Some(h) = stack.pop() {
        if h != driver && in_region(h) && !needed[h.index()] {
            needed[h.index()] = true;
            stack.extend(dag.inputs(h).iter().copied());
        }
    }
    let mut zero = vec![false; dag.arena_len()];
    let value = |zero: &[bool], h: HopId| h == driver || zero[h.index()];
    for &h in dag.order() {
        if !needed[h.index()] {
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
        zero[h.index()] = v;
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
    first_zero_preserving(dag, &[root], inputs, in_region, true)
}

/// As [`choose_sparse_driver`] for an operator with several outputs (a MultiAgg's aggregates):
/// a sparse input every output is zero-preserving in, so that one scan of its non-zeros serves
/// them all (SystemDS's shared sparse-safe driver, reference 3.3). The sparsest input alone
/// may leave another output non-zero at its zeros (`sum(X * Y), sum(X * Z)` over equally
/// sparse X, Y, Z: only X drives both).
pub fn choose_shared_sparse_driver(
    dag: &FusionDag<'_>,
    roots: &[HopId],
    inputs: &[HopId],
    in_region: &dyn Fn(HopId) -> bool,
) -> Option<HopId> {
    first_zero_preserving(dag, roots, inputs, in_region, true)
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
    first_zero_preserving(dag, &[root], inputs, in_region, false)
}

fn first_zero_preserving(
    dag: &FusionDag<'_>,
    roots: &[HopId],
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
            && roots
                .iter()
                .all(|&root| is_zero_preserving(dag, root, h, in_region))
    })
}

/// The multiplicative factors of an Outer operator's cell-wise part `G` (see [`outer_driver`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OuterFactors {
    /// The inputs (hops read, not computed, by the operator) that are factors of `G`, through
    /// its chain of products, numerators and negations, or through a mask `x != 0`; no
    /// literals. In first-reached order, without repeats.
    pub inputs: Vec<HopId>,
    /// The masks `x != 0` among the factors (hops of the region), whose input `x` is in
    /// `inputs`: 1 wherever `x` drives the operator.
    pub masks: Vec<HopId>,
}

/// The factors of `g`, the cell-wise part of an Outer operator whose body is the hops for which
/// `in_region` holds: `a * b` has the factors of `a` and `b`; `a / b` and `-a` those of `a`
/// (`0 / f` is `0 * G` at a zero of `a`: 0, or NaN where `f` is 0 or NaN); an input read by
/// the operator is its own factor, and so is `x` of a mask `x != 0` over an input `x`.
/// Anything else (`a + b`, `log(a)`, `(a / b) ^ 2 & s`) has none: it is not `0 * G` where a
/// factor is zero, only perhaps zero for finite values.
pub fn outer_factors(
    dag: &FusionDag<'_>,
    g: HopId,
    in_region: &dyn Fn(HopId) -> bool,
) -> OuterFactors {
    let read_input = |h: HopId| !in_region(h) && dag.literal_f64(h).is_none();
    let mut factors = OuterFactors::default();
    let mut seen = BTreeSet::new();
    let mut stack = vec![g];
    while let Some(h) = stack.pop() {
        if !seen.insert(h) {
            continue;
        }
        if !in_region(h) {
            if read_input(h) {
                factors.inputs.push(h);
            }
            continue;
        }
        let ins = dag.inputs(h);
        match dag.op(h) {
            OpKind::Binary(BinaryOp::Mul) => stack.extend([ins[1], ins[0]]),
            OpKind::Binary(BinaryOp::Div) | OpKind::Unary(UnaryOp::Neg) => stack.push(ins[0]),
            OpKind::Binary(BinaryOp::Ne)
                if read_input(ins[0])
                    && !in_region(ins[1])
                    && dag.literal_f64(ins[1]) == Some(0.0) =>
            {
                if !factors.inputs.contains(&ins[0]) {
                    factors.inputs.push(ins[0]);
                }
                factors.masks.push(h);
            }
            _ => {}
        }
    }
    factors
}

/// The cell-wise part `G` of an Outer operator rooted at `root` over the hops for which
/// `in_region` holds (reference 3.4 `getOuterProductType`): the input of a full `sum`, the root
/// itself if it is cell-wise, the fused side of a final product `G %*% V` / `t(U) %*% G`, or
/// of the transposed `t(t(U) %*% G)`. `None` for any other root, or a final product with both
/// or neither side fused (no Outer operator).
pub fn outer_cell_wise_part(
    dag: &FusionDag<'_>,
    root: HopId,
    in_region: &dyn Fn(HopId) -> bool,
) -> Option<HopId> {
    let ins = dag.inputs(root);
    let fused_side = |mm: HopId| {
        let mi = dag.inputs(mm);
        match (in_region(mi[0]), in_region(mi[1])) {
            (true, false) => Some((mi[0], 0)),
            (false, true) => Some((mi[1], 1)),
            _ => None,
        }
    };
    match dag.op(root) {
        OpKind::AggUnary {
            op: AggOp::Sum,
            dir: Direction::Full,
        } => Some(ins[0]),
        OpKind::Binary(_) => Some(root),
        OpKind::MatMul => fused_side(root).map(|(g, _)| g),
        // `t(t(U) %*% G)`: a transposed left product; a transposed right one is no template's.
        OpKind::Reorg(ReorgOp::Transpose) if in_region(ins[0]) && dag.is_matmul(ins[0]) => {
            match fused_side(ins[0]) {
                Some((g, 1)) => Some(g),
                _ => None,
            }
        }
        _ => None,
    }
}

/// The driver of the Outer operator rooted at `root` whose body is the hops for which
/// `in_region` holds: the input whose non-zeros it iterates over, computing `0 * G` at the
/// driver's zeros. The one rule both the cost model (whose Outer operators are scaled by the
/// driver's sparsity) and the CPlan construction (whose operator reads it as its main input)
/// use, so an operator is costed over the input it really iterates over.
///
/// The driver is a factor of the whole cell-wise part `G` ([`outer_factors`], masks included)
/// as large as `G` (a column-vector factor scales rows, it cannot drive) that the body is
/// zero-preserving in: the first sparse one in main-input order ([`choose_sparse_driver`]),
/// else the first dense one ([`choose_zero_preserving_input`]). `None` when the region makes
/// no Outer operator: no cell-wise part ([`outer_cell_wise_part`]), no outer product
/// `U %*% t(V)` computed in it (it was left to another operator, or the region is an outer
/// broadcast `u op t(v)`), or no such factor (`X + 1 / (U %*% t(V))`, SystemDS's
/// `wSparseUnsafeOuterProduct`).
///
/// `in_region` is the body as the construction builds it: hops it computes, not hops it reads
/// as inputs (a column-range indexing or a literal `seq` is read as an input computed
/// unfused, so it is no hop of the region).
pub fn outer_driver(
    dag: &FusionDag<'_>,
    root: HopId,
    in_region: &dyn Fn(HopId) -> bool,
) -> Option<HopId> {
    let g = outer_cell_wise_part(dag, root, in_region)?;
    if !computes_outer_product(dag, root, in_region) {
        return None;
    }
    let size = dag.hop(g).cells()?;
    let factors: Vec<HopId> = outer_factors(dag, g, in_region)
        .inputs
        .into_iter()
        .filter(|&h| dag.is_matrix(h) && dag.hop(h).cells() == Some(size))
        .collect();
    choose_sparse_driver(dag, root, &factors, in_region)
        .or_else(|| choose_zero_preserving_input(dag, root, &factors, in_region))
}

/// Whether the region under `root` computes an outer product `U %*% t(V)` the Outer body can
/// evaluate per cell (its `U` not a transpose: the construction has no `t(A) %*% t(V)` form).
fn computes_outer_product(
    dag: &FusionDag<'_>,
    root: HopId,
    in_region: &dyn Fn(HopId) -> bool,
) -> bool {
    let mut seen = BTreeSet::new();
    let mut stack = vec![root];
    while let Some(h) = stack.pop() {
        if !in_region(h) || !seen.insert(h) {
            continue;
        }
        if dag.is_outer_product_like_mm(h) && !dag.is_transpose(dag.inputs(h)[0]) {
            return true;
        }
        stack.extend(dag.inputs(h).iter().copied());
    }
    false
}

/// Whether an aggregation over a zero-preserving input may skip zeros of the main input:
/// only sums (see [`is_zero_preserving`]); any direction.
pub fn agg_is_sparse_safe(op: AggOp, _dir: Direction) -> bool {
    op == AggOp::Sum
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hops::DagBuilder;

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

    #[test]
    fn outer_factors_run_through_products_numerators_negations_and_masks() {
        // G = ((X != 0) * -(Y / Z)) * (W + U %*% t(V)): factors X (masked) and Y; not Z (a
        // denominator) nor W (a summand).
        let mut b = DagBuilder::new();
        let x = b.input("X", 1000, 900, 900);
        let y = b.input("Y", 1000, 900, 900_000);
        let z = b.input("Z", 1000, 900, 900_000);
        let w = b.input("W", 1000, 900, 90);
        let u = b.input("U", 1000, 10, 10_000);
        let v = b.input("V", 900, 10, 9000);
        let zero = b.literal_f64(0.0);
        let mask = b.binary(BinaryOp::Ne, x, zero).unwrap();
        let quotient = b.binary(BinaryOp::Div, y, z).unwrap();
        let negated = b.unary(UnaryOp::Neg, quotient).unwrap();
        let left = b.binary(BinaryOp::Mul, mask, negated).unwrap();
        let vt = b.transpose(v).unwrap();
        let uv = b.matmul(u, vt).unwrap();
        let right = b.binary(BinaryOp::Add, w, uv).unwrap();
        let g = b.binary(BinaryOp::Mul, left, right).unwrap();
        b.output("g", g).unwrap();
        let dag = b.build().unwrap();
        let f = FusionDag::new(&dag).unwrap();
        let body = [mask, quotient, negated, left, vt, uv, right, g];
        let in_region = |h: HopId| body.contains(&h);
        let factors = outer_factors(&f, g, &in_region);
        let mut inputs = factors.inputs.clone();
        inputs.sort();
        assert_eq!(inputs, vec![x, y]);
        assert_eq!(factors.masks, vec![mask]);
        assert_eq!(outer_cell_wise_part(&f, g, &in_region), Some(g));
        // X is the sparse factor; W, sparser still, is no factor.
        assert_eq!(outer_driver(&f, g, &in_region), Some(x));
        // With the product computed elsewhere the region makes no Outer operator.
        let without_product = |h: HopId| in_region(h) && h != uv && h != vt;
        assert_eq!(outer_driver(&f, g, &without_product), None);
    }
}
