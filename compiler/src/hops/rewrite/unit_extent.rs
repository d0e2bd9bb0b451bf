//! Simplifications that the sizes make possible: aggregates and products along an extent of one
//! (SystemDS's dynamic rewrites `removeUnnecessaryAggregates` and
//! `simplifyIdentityRepMatrixMult`/`simplifyScalarMatrixMult`):
//!
//! * `rowSums(X)` with one column, `colSums(X)` with one row → `X + 0`
//! * `X %*% matrix(c, 1, 1)` (c finite) → `X * c + 0`; `matrix(c, 1, 1) %*% X` (c finite and
//!   not zero) → `c * X + 0`
//!
//! Each replacement computes the same bits as the kernel it replaces: a sum of one value is
//! `0 + x` and a product with an inner extent of one is `0 + x * c`, so the `+ 0` stays (it
//! turns `-0` into `+0`, as the kernels do). A product skips the left operand's zeros
//! (`kernels::matmul`'s module docs): with `c` finite on the right a skipped `0 * c` is `0`
//! anyway; on the left, `c = 0` would skip an `Inf` or `NaN` in `X` that `c * X` meets, so it
//! stays a product. What this buys is fusion: the Row and Cell templates read `X + 0` as a
//! cell operation, where the aggregate or product ended a fused operator (MLogReg's
//! `rowSums(Q) %*% matrix(1, 1, K)` with two classes, `K = 1`).
//!
//! The rewrite reads sizes, which the block's plan is compiled for (a block is compiled again
//! for other sizes), and literals, never a value only known at run time.

use super::Rewrite;
use crate::error::Result;
use crate::hops::ir::{
    AggOp, BinaryOp, DataGenOp, DataType, Direction, Hop, HopDag, HopId, Literal, OpKind,
};

/// The size-dependent simplification pass.
pub struct UnitExtent;

/// What a hop becomes: `x * scale + 0` (no multiplication without a scale).
struct Replacement {
    x: HopId,
    scale: Option<(f64, bool)>,
}

/// The value `c` of a literal-filled 1x1 matrix `matrix(c, 1, 1)`.
fn unit_fill(dag: &HopDag, id: HopId) -> Option<f64> {
    let hop = dag.hop(id);
    if hop.op != OpKind::DataGen(DataGenOp::Fill) || hop.dims() != Some((1, 1)) {
        return None;
    }
    match dag.literal_of(hop.inputs[0])? {
        Literal::Double(v) => Some(*v),
        Literal::Int(v) => Some(*v as f64),
        _ => None,
    }
}

fn replacement(dag: &HopDag, id: HopId) -> Option<Replacement> {
    let hop = dag.hop(id);
    if !hop.is_matrix() {
        return None;
    }
    match &hop.op {
        OpKind::AggUnary {
            op: AggOp::Sum,
            dir,
        } => {
            let x = hop.inputs[0];
            let (rows, cols) = dag.hop(x).dims()?;
            let single = match dir {
                Direction::Row => cols == 1,
                Direction::Col => rows == 1,
                Direction::Full => false,
            };
            (single && dag.hop(x).is_matrix()).then_some(Replacement { x, scale: None })
        }
        OpKind::MatMul => {
            let (a, b) = (hop.inputs[0], hop.inputs[1]);
            if let Some(c) = unit_fill(dag, b).filter(|c| c.is_finite()) {
                Some(Replacement {
                    x: a,
                    scale: Some((c, false)),
                })
            } else {
                let c = unit_fill(dag, a).filter(|c| c.is_finite() && *c != 0.0)?;
                Some(Replacement {
                    x: b,
                    scale: Some((c, true)),
                })
            }
        }
        _ => None,
    }
}

/// `a op b`, a matrix of the replaced hop's value type.
fn matrix_binary(dag: &mut HopDag, op: BinaryOp, operands: Vec<HopId>, of: &Hop) -> HopId {
    let hop = Hop::new(
        OpKind::Binary(op),
        operands,
        DataType::Matrix,
        of.value_type,
        of.span,
    );
    dag.add(hop)
}

impl Rewrite for UnitExtent {
    fn name(&self) -> &'static str {
        "unit_extent"
    }

    fn rewrite(&self, dag: &mut HopDag) -> Result<bool> {
        let found: Vec<(HopId, Replacement)> = dag
            .ids()
            .filter_map(|id| replacement(dag, id).map(|r| (id, r)))
            .collect();
        for (id, r) in &found {
            let of = dag.hop(*id).clone();
            let mut x = r.x;
            if let Some((c, left)) = r.scale {
                let c = dag.add_literal(Literal::Double(c), of.span);
                let operands = if left { vec![c, x] } else { vec![x, c] };
                x = matrix_binary(dag, BinaryOp::Mul, operands, &of);
            }
            let zero = dag.add_literal(Literal::Double(0.0), of.span);
            let plus_zero = matrix_binary(dag, BinaryOp::Add, vec![x, zero], &of);
            dag.replace_uses(*id, plus_zero);
        }
        if !found.is_empty() {
            dag.compact();
        }
        Ok(!found.is_empty())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hops::rewrite::test_util::{leaf, node};
    use crate::hops::size::propagate_sizes;
    use crate::hops::verify::verify;
    use crate::span::Span;

    fn lit(dag: &mut HopDag, l: Literal) -> HopId {
        dag.add_literal(l, Span::default())
    }

    /// `matrix(c, rows, cols)`.
    fn fill(dag: &mut HopDag, c: Literal, rows: i64, cols: i64) -> HopId {
        let inputs = vec![
            lit(dag, c),
            lit(dag, Literal::Int(rows)),
            lit(dag, Literal::Int(cols)),
        ];
        node(dag, OpKind::DataGen(DataGenOp::Fill), inputs)
    }

    fn rewritten(mut d: HopDag) -> (HopDag, bool) {
        propagate_sizes(&mut d).unwrap();
        let changed = UnitExtent.rewrite(&mut d).unwrap();
        propagate_sizes(&mut d).unwrap();
        verify(&d).unwrap();
        (d, changed)
    }

    /// The root's chain down to its first leaf, by operation name.
    fn chain(d: &HopDag) -> Vec<String> {
        let mut out = Vec::new();
        let mut id = d.roots[0];
        loop {
            let h = d.hop(id);
            out.push(h.op.display_name());
            match h.inputs.iter().find(|&&i| !d.hop(i).is_scalar()) {
                Some(&next) => id = next,
                None => return out,
            }
        }
    }

    fn sum(dir: Direction, rows: u64, cols: u64) -> HopDag {
        let mut d = HopDag::new();
        let x = leaf(&mut d, "X", rows, cols);
        let s = node(
            &mut d,
            OpKind::AggUnary {
                op: AggOp::Sum,
                dir,
            },
            vec![x],
        );
        d.roots.push(s);
        d
    }

    #[test]
    fn sums_over_one_value_become_plus_zero() {
        for (dir, rows, cols) in [(Direction::Row, 7, 1), (Direction::Col, 1, 7)] {
            let (d, changed) = rewritten(sum(dir, rows, cols));
            assert!(changed);
            assert_eq!(chain(&d), ["b(+)", "TRead X"], "{dir:?}");
            assert_eq!(d.hop(d.roots[0]).dims(), Some((rows, cols)));
        }
    }

    #[test]
    fn sums_over_more_values_stay() {
        for (dir, rows, cols) in [
            (Direction::Row, 1, 7),
            (Direction::Col, 7, 1),
            (Direction::Row, 7, 2),
        ] {
            assert!(!rewritten(sum(dir, rows, cols)).1, "{dir:?} {rows}x{cols}");
        }
    }

    fn product(c: Literal, constant_left: bool) -> HopDag {
        let mut d = HopDag::new();
        let (rows, cols) = if constant_left { (1, 6) } else { (6, 1) };
        let x = leaf(&mut d, "X", rows, cols);
        let f = fill(&mut d, c, 1, 1);
        let inputs = if constant_left {
            vec![f, x]
        } else {
            vec![x, f]
        };
        let p = node(&mut d, OpKind::MatMul, inputs);
        d.roots.push(p);
        d
    }

    #[test]
    fn products_with_a_one_by_one_constant_become_a_scaling() {
        for (c, left) in [
            (Literal::Int(1), false),
            (Literal::Double(0.0), false),
            (Literal::Double(-2.5), false),
            (Literal::Double(3.0), true),
        ] {
            let (d, changed) = rewritten(product(c.clone(), left));
            assert!(changed, "{c:?}");
            assert_eq!(chain(&d), ["b(+)", "b(*)", "TRead X"], "{c:?}");
            let scale = d.hop(d.roots[0]).inputs[0];
            let k = d.hop(scale).inputs[usize::from(!left)];
            let want = match c {
                Literal::Int(v) => v as f64,
                Literal::Double(v) => v,
                _ => unreachable!(),
            };
            assert_eq!(d.literal_of(k), Some(&Literal::Double(want)));
        }
    }

    #[test]
    fn products_that_would_skip_or_meet_non_finite_values_stay() {
        for (c, left) in [
            // `0 %*% X` skips X's Inf and NaN, which `0 * X` would meet.
            (Literal::Double(0.0), true),
            (Literal::Double(f64::INFINITY), false),
            (Literal::Double(f64::NAN), true),
        ] {
            assert!(!rewritten(product(c.clone(), left)).1, "{c:?} left {left}");
        }
        // A 1x2 constant is a broadcast, not a scaling.
        let mut d = HopDag::new();
        let x = leaf(&mut d, "X", 6, 1);
        let f = fill(&mut d, Literal::Int(1), 1, 2);
        let p = node(&mut d, OpKind::MatMul, vec![x, f]);
        d.roots.push(p);
        assert!(!rewritten(d).1);
    }
}
