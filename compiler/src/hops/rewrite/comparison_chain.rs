//! SystemDS's rewrites of comparisons of comparisons, applied so that scripts print what
//! SystemDS prints. Unlike the other passes these change results where an operand is NaN,
//! exactly as they do in SystemDS 3.4 (`RewriteAlgebraicSimplificationStatic`'s
//! `simplifyBinaryComparisonChain` and `simplifyNotOverComparisons`):
//!
//! * `(A op B) == 1` and `(A op B) != 0` → `A op B` (exact: a comparison is 0 or 1)
//! * `(A op B) == 0` → `A op' B` with `op'` the complement (`<` ↔ `>=`, `>` ↔ `<=`,
//!   `==` ↔ `!=`): for NaN `(NaN < 1) == 0` is 1 but `NaN >= 1` is 0
//! * `!(A > B)` → `A <= B`, `!(A < B)` → `A >= B`, `!(A == B)` → `A != B`, where the `!` is
//!   the comparison's only consumer
//!
//! SystemDS's own built-ins depend on it: `imputeByMode` selects `(X < 1) == 0`, which drops
//! NaN rows only through this rewrite.

use super::Rewrite;
use crate::error::Result;
use crate::hops::ir::{BinaryOp, HopDag, HopId, Literal, OpKind, UnaryOp};
use crate::hops::size::topological_order;

/// The comparison-chain pass.
pub struct ComparisonChain;

/// `0` or `1` as a literal (SystemDS compares a literal's double value; `TRUE` is 1).
fn literal_zero_or_one(l: Option<&Literal>) -> Option<bool> {
    match l? {
        Literal::Int(v) if *v == 0 || *v == 1 => Some(*v == 1),
        Literal::Double(v) if *v == 0.0 || *v == 1.0 => Some(*v == 1.0),
        Literal::Bool(b) => Some(*b),
        _ => None,
    }
}

fn complement(op: BinaryOp) -> Option<BinaryOp> {
    use BinaryOp::*;
    Some(match op {
        Lt => Ge,
        Ge => Lt,
        Gt => Le,
        Le => Gt,
        Eq => Ne,
        Ne => Eq,
        _ => return None,
    })
}

/// The comparison `id` computes, if it is one.
fn comparison(dag: &HopDag, id: HopId) -> Option<BinaryOp> {
    match dag.hop(id).op {
        OpKind::Binary(op) if op.is_comparison() => Some(op),
        _ => None,
    }
}

/// The comparison (operator and operands) hop `id` becomes, if any; `consumers` counts the
/// live hops reading each hop.
fn rewritten(dag: &HopDag, id: HopId, consumers: &[u32]) -> Option<(BinaryOp, Vec<HopId>)> {
    let hop = dag.hop(id);
    match hop.op {
        OpKind::Binary(outer @ (BinaryOp::Eq | BinaryOp::Ne)) => {
            let one = literal_zero_or_one(dag.literal_of(hop.inputs[1]))?;
            let inner = comparison(dag, hop.inputs[0])?;
            let operands = dag.hop(hop.inputs[0]).inputs.clone();
            match (outer, one) {
                (BinaryOp::Eq, true) | (BinaryOp::Ne, false) => Some((inner, operands)),
                (BinaryOp::Eq, false) => Some((complement(inner)?, operands)),
                _ => None,
            }
        }
        OpKind::Unary(UnaryOp::Not) => {
            let input = hop.inputs[0];
            let negated = match comparison(dag, input)? {
                BinaryOp::Gt => BinaryOp::Le,
                BinaryOp::Lt => BinaryOp::Ge,
                BinaryOp::Eq => BinaryOp::Ne,
                _ => return None,
            };
            (consumers[input.index()] == 1).then(|| (negated, dag.hop(input).inputs.clone()))
        }
        _ => None,
    }
}

impl Rewrite for ComparisonChain {
    fn name(&self) -> &'static str {
        "comparison_chain"
    }

    fn rewrite(&self, dag: &mut HopDag) -> Result<bool> {
        let order = topological_order(dag)?;
        let mut consumers = vec![0u32; dag.len()];
        for &id in &order {
            for input in &dag.hop(id).inputs {
                consumers[input.index()] += 1;
            }
        }
        let mut changed = false;
        for id in order {
            // The hop itself becomes the new comparison, so its consumers need no redirection;
            // the old inner comparison dies unless something else reads it.
            let Some((op, operands)) = rewritten(dag, id, &consumers) else {
                continue;
            };
            let old = dag.hop(id).inputs.clone();
            for input in &old {
                consumers[input.index()] -= 1;
            }
            for input in &operands {
                consumers[input.index()] += 1;
            }
            let hop = dag.hop_mut(id);
            hop.op = OpKind::Binary(op);
            hop.inputs = operands;
            changed = true;
        }
        if changed {
            dag.compact();
        }
        Ok(changed)
    }
}
