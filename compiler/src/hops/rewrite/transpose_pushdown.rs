//! `t(A %*% B ⊙ v)` → `t(A %*% B) ⊙ t(v)` for an element-wise `⊙` whose other operand `v` is
//! a vector or a scalar broadcast over the product: the transpose moves onto the product,
//! which the executor computes with a transposed output (no transpose pass, no transposed
//! copy of the product), and onto the vector, where it costs nothing. An autoencoder's
//! `tanh(t(W %*% t(X) + b))` transposed its batch-by-units activations four times a step.
//!
//! Exact for every IEEE value: cell `(j, i)` of either side is `(A %*% B)[i, j] ⊙ v[i]` (or
//! `v[j]`, or the scalar), the same operation on the same operands in the same order.
//! Applied only where the element-wise result has no other use, so nothing is computed twice.

use super::Rewrite;
use crate::error::Result;
use crate::hops::ir::{DataType, Hop, HopDag, HopId, OpKind, ReorgOp};

/// The pushdown pass.
pub struct TransposePushdown;

/// Whether `v` broadcasts over a `rows x cols` matrix as a vector or a scalar (a full
/// matrix operand would need a transpose pass of its own).
fn broadcasts(v: &Hop, rows: u64, cols: u64) -> bool {
    match (v.data_type, v.dims()) {
        (DataType::Scalar, _) => true,
        (DataType::Matrix, Some((r, c))) => (r, c) != (rows, cols) && (r == 1 || c == 1),
        _ => false,
    }
}

/// The element-wise hop under transpose `t` and the position of its product operand, where
/// the pushdown applies.
fn candidate(dag: &HopDag, users: &[Vec<HopId>], t: HopId) -> Option<(HopId, usize)> {
    let hop = dag.hop(t);
    if hop.op != OpKind::Reorg(ReorgOp::Transpose) {
        return None;
    }
    let e = hop.inputs[0];
    let ehop = dag.hop(e);
    if !matches!(ehop.op, OpKind::Binary(_))
        || !ehop.is_matrix()
        || users[e.index()] != [t]
        || dag.roots.contains(&e)
    {
        return None;
    }
    let (rows, cols) = ehop.dims()?;
    (0..2)
        .find(|&k| {
            let p = dag.hop(ehop.inputs[k]);
            p.op == OpKind::MatMul
                && p.dims() == Some((rows, cols))
                && broadcasts(dag.hop(ehop.inputs[1 - k]), rows, cols)
        })
        .map(|k| (e, k))
}

impl Rewrite for TransposePushdown {
    fn name(&self) -> &'static str {
        "transpose_pushdown"
    }

    fn rewrite(&self, dag: &mut HopDag) -> Result<bool> {
        let users = dag.users();
        let found: Vec<(HopId, HopId, usize)> = dag
            .ids()
            .filter_map(|t| candidate(dag, &users, t).map(|(e, k)| (t, e, k)))
            .collect();
        for &(t, e, k) in &found {
            let (op, inputs, value_type, span) = {
                let h = dag.hop(e);
                (
                    h.op.clone(),
                    h.inputs.clone(),
                    h.value_type,
                    dag.hop(t).span,
                )
            };
            let transposed = |dag: &mut HopDag, x: HopId| {
                let h = dag.hop(x);
                if h.data_type == DataType::Scalar {
                    return x;
                }
                let vt = h.value_type;
                dag.add(Hop::new(
                    OpKind::Reorg(ReorgOp::Transpose),
                    vec![x],
                    DataType::Matrix,
                    vt,
                    span,
                ))
            };
            let product = transposed(dag, inputs[k]);
            let other = transposed(dag, inputs[1 - k]);
            let operands = if k == 0 {
                vec![product, other]
            } else {
                vec![other, product]
            };
            let pushed = dag.add(Hop::new(op, operands, DataType::Matrix, value_type, span));
            dag.replace_uses(t, pushed);
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
    use crate::hops::ir::BinaryOp;
    use crate::hops::rewrite::test_util::{leaf, node};
    use crate::hops::size::propagate_sizes;
    use crate::hops::verify::verify;

    /// `t(W %*% X + b)` for W 5x3, X 3x4, b of `b_rows x b_cols`; the transpose is the root.
    fn dag(b_rows: u64, b_cols: u64, extra_use: bool) -> HopDag {
        let mut d = HopDag::new();
        let w = leaf(&mut d, "W", 5, 3);
        let x = leaf(&mut d, "X", 3, 4);
        let b = leaf(&mut d, "b", b_rows, b_cols);
        let p = node(&mut d, OpKind::MatMul, vec![w, x]);
        let e = node(&mut d, OpKind::Binary(BinaryOp::Add), vec![p, b]);
        let t = node(&mut d, OpKind::Reorg(ReorgOp::Transpose), vec![e]);
        d.roots.push(t);
        if extra_use {
            d.roots.push(e);
        }
        propagate_sizes(&mut d).unwrap();
        d
    }

    fn ops(d: &HopDag) -> Vec<String> {
        d.ids().map(|h| d.hop(h).op.display_name()).collect()
    }

    #[test]
    fn the_transpose_moves_onto_the_product_and_the_vector() {
        for (r, c) in [(5, 1), (1, 4)] {
            let mut d = dag(r, c, false);
            assert!(TransposePushdown.rewrite(&mut d).unwrap());
            propagate_sizes(&mut d).unwrap();
            verify(&d).unwrap();
            let root = d.hop(d.roots[0]);
            assert_eq!(root.op, OpKind::Binary(BinaryOp::Add));
            assert_eq!(root.dims(), Some((4, 5)));
            let under: Vec<&OpKind> = root.inputs.iter().map(|&i| &d.hop(i).op).collect();
            assert_eq!(
                under,
                [&OpKind::Reorg(ReorgOp::Transpose); 2],
                "{:?}",
                ops(&d)
            );
            assert_eq!(d.hop(root.inputs[0]).dims(), Some((4, 5)));
            assert_eq!(d.hop(d.hop(root.inputs[0]).inputs[0]).op, OpKind::MatMul);
            assert!(!TransposePushdown.rewrite(&mut d).unwrap(), "a fixpoint");
        }
    }

    #[test]
    fn full_operands_and_shared_results_stay() {
        // A full matrix operand would need its own transpose pass.
        let mut full = dag(5, 4, false);
        assert!(!TransposePushdown.rewrite(&mut full).unwrap());
        // The sum is also a result: pushing down would compute it twice.
        let mut shared = dag(5, 1, true);
        assert!(!TransposePushdown.rewrite(&mut shared).unwrap());
    }
}
