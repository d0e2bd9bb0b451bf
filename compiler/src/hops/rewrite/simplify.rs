//! Algebraic simplifications that are exact for every IEEE value (NaN, infinities, signed
//! zeros) and keep the result's data type, value type and shape:
//!
//! * `X * 1`, `1 * X`, `X / 1`, `X ^ 1`, `X - 0` → `X`
//! * `-(-X)` → `X`, `t(t(X))` → `X`
//!
//! Deliberately absent: `X + 0` → `X` (`-0 + 0` is `+0`, so it would change printed output),
//! and any reassociation of floating-point arithmetic.

use super::Rewrite;
use crate::error::Result;
use crate::hops::ir::{BinaryOp, HopDag, HopId, Literal, OpKind, ReorgOp, UnaryOp};
use crate::hops::size::topological_order;

/// The simplification pass.
pub struct AlgebraicSimplification;

fn is_one(l: Option<&Literal>) -> bool {
    matches!(l, Some(Literal::Int(1))) || matches!(l, Some(Literal::Double(v)) if *v == 1.0)
}

/// `+0` (not `-0`: `x - (-0)` is `x + 0`).
fn is_positive_zero(l: Option<&Literal>) -> bool {
    matches!(l, Some(Literal::Int(0))) || matches!(l, Some(Literal::Double(v)) if v.to_bits() == 0)
}

/// The hop `id` can be replaced by, if any.
fn simplify(dag: &HopDag, id: HopId) -> Option<HopId> {
    let hop = dag.hop(id);
    let candidate = match &hop.op {
        OpKind::Binary(op) => {
            let (a, b) = (hop.inputs[0], hop.inputs[1]);
            let (la, lb) = (dag.literal_of(a), dag.literal_of(b));
            match op {
                BinaryOp::Mul if is_one(lb) => a,
                BinaryOp::Mul if is_one(la) => b,
                BinaryOp::Div | BinaryOp::Pow if is_one(lb) => a,
                BinaryOp::Sub if is_positive_zero(lb) => a,
                _ => return None,
            }
        }
        OpKind::Unary(UnaryOp::Neg) => {
            let inner = dag.hop(hop.inputs[0]);
            match inner.op {
                OpKind::Unary(UnaryOp::Neg) => inner.inputs[0],
                _ => return None,
            }
        }
        OpKind::Reorg(ReorgOp::Transpose) => {
            let inner = dag.hop(hop.inputs[0]);
            match inner.op {
                OpKind::Reorg(ReorgOp::Transpose) => inner.inputs[0],
                _ => return None,
            }
        }
        _ => return None,
    };
    let c = dag.hop(candidate);
    let same =
        c.data_type == hop.data_type && c.value_type == hop.value_type && c.dims() == hop.dims();
    (same && hop.dims().is_some()).then_some(candidate)
}

impl Rewrite for AlgebraicSimplification {
    fn name(&self) -> &'static str {
        "algebraic_simplification"
    }

    fn rewrite(&self, dag: &mut HopDag) -> Result<bool> {
        let mut repr: Vec<HopId> = dag.ids().collect();
        let mut changed = false;
        for id in topological_order(dag)? {
            let inputs: Vec<HopId> = dag.hop(id).inputs.iter().map(|i| repr[i.index()]).collect();
            dag.hop_mut(id).inputs = inputs;
            if dag.hop(id).op.is_sink() {
                continue;
            }
            if let Some(r) = simplify(dag, id) {
                repr[id.index()] = r;
                changed = true;
            }
        }
        if changed {
            dag.compact();
        }
        Ok(changed)
    }
}
