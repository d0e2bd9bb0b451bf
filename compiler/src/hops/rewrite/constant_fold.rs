//! Constant folding: scalar operators whose inputs are literals become literals (with DML's
//! typing), and size queries (`nrow`, `ncol`, `length`) of matrices with known sizes become
//! integer literals.

use super::Rewrite;
use crate::error::Result;
use crate::hops::eval::{convert, fold_binary, fold_cast, fold_unary, truth};
use crate::hops::ir::{HopDag, HopId, Literal, MetaOp, NaryOp, OpKind, TernaryOp, ValueType};
use crate::hops::size::topological_order;

/// The folding pass.
pub struct ConstantFolding;

/// The literal a hop with op `op` and inputs `inputs` evaluates to, if it can be computed at
/// compile time exactly as the runtime would. `value_type` is the hop's inferred value type.
pub fn try_fold(
    dag: &HopDag,
    op: &OpKind,
    inputs: &[HopId],
    value_type: ValueType,
) -> Option<Literal> {
    fold_with(dag, op, inputs, value_type, |id| dag.literal_of(id))
}

/// The value a scalar hop with op `op` and inputs `inputs` has when its inputs' values are
/// known ([`HopDag::scalar_value`]), for size inference; never folded into the DAG.
pub fn known_value(
    dag: &HopDag,
    op: &OpKind,
    inputs: &[HopId],
    value_type: ValueType,
) -> Option<Literal> {
    fold_with(dag, op, inputs, value_type, |id| dag.scalar_value(id))
}

/// [`try_fold`] with the inputs' values from `value_of`.
fn fold_with<'d>(
    dag: &'d HopDag,
    op: &OpKind,
    inputs: &[HopId],
    value_type: ValueType,
    value_of: impl Fn(HopId) -> Option<&'d Literal>,
) -> Option<Literal> {
    let lit = |i: usize| value_of(inputs[i]);
    let folded = match op {
        OpKind::Unary(u) => fold_unary(*u, lit(0)?),
        OpKind::Binary(b) => {
            if dag.hop(inputs[0]).is_matrix() || dag.hop(inputs[1]).is_matrix() {
                return None;
            }
            fold_binary(*b, lit(0)?, lit(1)?)
        }
        OpKind::Cast(c) => {
            if dag.hop(inputs[0]).is_matrix() {
                return None;
            }
            fold_cast(*c, lit(0)?)
        }
        OpKind::Nary(n @ (NaryOp::Min | NaryOp::Max)) => {
            let bop = if *n == NaryOp::Min {
                crate::hops::ir::BinaryOp::Min
            } else {
                crate::hops::ir::BinaryOp::Max
            };
            let mut acc = lit(0)?.clone();
            for i in 1..inputs.len() {
                acc = fold_binary(bop, &acc, lit(i)?)?;
            }
            Some(acc)
        }
        OpKind::Ternary(TernaryOp::IfElse) => {
            if inputs.iter().any(|&i| dag.hop(i).is_matrix()) {
                return None;
            }
            let pick = if truth(lit(0)?)? { lit(1)? } else { lit(2)? };
            convert(pick, value_type)
        }
        OpKind::Meta(m) => {
            let x = dag.hop(inputs[0]);
            let v = match m {
                MetaOp::Nrow => x.rows?,
                MetaOp::Ncol => x.cols?,
                MetaOp::Length => x.rows?.checked_mul(x.cols?)?,
            };
            Some(Literal::Int(i64::try_from(v).ok()?))
        }
        _ => None,
    }?;
    (folded.value_type() == value_type).then_some(folded)
}

impl Rewrite for ConstantFolding {
    fn name(&self) -> &'static str {
        "constant_folding"
    }

    fn rewrite(&self, dag: &mut HopDag) -> Result<bool> {
        let mut changed = false;
        // Topological order: a folded input makes its users foldable in the same sweep.
        for id in topological_order(dag)? {
            let hop = dag.hop(id);
            if hop.is_matrix() || hop.literal().is_some() {
                continue;
            }
            if let Some(l) = try_fold(dag, &hop.op, &hop.inputs, hop.value_type) {
                let hop = dag.hop_mut(id);
                hop.op = OpKind::Literal(l);
                hop.inputs.clear();
                changed = true;
            }
        }
        Ok(changed)
    }
}
