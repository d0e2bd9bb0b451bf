//! Common-subexpression elimination by structural hashing: two hops with the same op, the same
//! (already merged) inputs in the same order and the same types compute the same value, so
//! users of the later one are redirected to the earlier one.
//!
//! Never merged: outputs and side effects, `time()`, `rand` without a literal seed other than
//! -1 (each call draws fresh numbers), and persistent reads (a write to the same file may sit
//! between them).

use super::Rewrite;
use crate::error::Result;
use crate::hops::ir::{DataGenOp, DataType, HopDag, HopId, OpKind, ValueType};
use crate::hops::size::topological_order;
use std::collections::HashMap;

/// The CSE pass.
pub struct CommonSubexpressionElimination;

/// Whether two structurally equal instances of this hop may be merged.
pub fn is_mergeable(dag: &HopDag, id: HopId) -> bool {
    let hop = dag.hop(id);
    match &hop.op {
        op if op.is_sink() => false,
        OpKind::DataGen(DataGenOp::Time) | OpKind::PersistentRead { .. } => false,
        OpKind::DataGen(DataGenOp::Rand) => {
            matches!(dag.literal_of(hop.inputs[5]), Some(l) if l.as_exact_i64().is_some_and(|s| s != -1))
        }
        OpKind::DataGen(DataGenOp::Sample) => {
            matches!(dag.literal_of(hop.inputs[3]), Some(l) if l.as_exact_i64().is_some_and(|s| s != -1))
        }
        _ => true,
    }
}

impl Rewrite for CommonSubexpressionElimination {
    fn name(&self) -> &'static str {
        "cse"
    }

    fn rewrite(&self, dag: &mut HopDag) -> Result<bool> {
        let order = topological_order(dag)?;
        let mut repr: Vec<HopId> = dag.ids().collect();
        let mut seen: HashMap<(OpKind, Vec<HopId>, DataType, ValueType), HopId> = HashMap::new();
        let mut changed = false;
        for id in order {
            // Inputs first point to their representatives (they precede `id` in `order`).
            let inputs: Vec<HopId> = dag.hop(id).inputs.iter().map(|i| repr[i.index()]).collect();
            if inputs != dag.hop(id).inputs {
                dag.hop_mut(id).inputs = inputs.clone();
                changed = true;
            }
            if !is_mergeable(dag, id) {
                continue;
            }
            let hop = dag.hop(id);
            let key = (hop.op.clone(), inputs, hop.data_type, hop.value_type);
            match seen.get(&key) {
                // Equal keys imply equal sizes for non-leaves; transient reads carry their own.
                Some(&first)
                    if dag.hop(first).dims() == hop.dims() && dag.hop(first).nnz == hop.nnz =>
                {
                    repr[id.index()] = first;
                    changed = true;
                }
                Some(_) => {}
                None => {
                    seen.insert(key, id);
                }
            }
        }
        for root in &mut dag.roots {
            *root = repr[root.index()];
        }
        if changed {
            // Drop the merged duplicates so a second run finds nothing left to merge.
            dag.compact();
        }
        Ok(changed)
    }
}
