//! Memo rule: drop plans that fuse a hop at one input position and read it materialized at
//! another.

use super::MemoRule;
use crate::fusion::dag::FusionDag;
use crate::fusion::memo::{MemoTable, TemplateKind};
use crate::hops::HopId;

/// [`prune_partially_fused_duplicates`] as a [`MemoRule`].
pub struct PrunePartiallyFusedDuplicates;

impl MemoRule for PrunePartiallyFusedDuplicates {
    fn name(&self) -> &'static str {
        "partially-fused-duplicates"
    }

    fn apply(&self, dag: &FusionDag<'_>, memo: &mut MemoTable) {
        prune_partially_fused_duplicates(dag, memo);
    }
}

/// Removes the entries that fuse an input at one position but read the same hop materialized
/// at another (`O(-1,19)` of `19 * 19`): such a plan both computes the hop inside the operator
/// and forces it to be materialized, which no assignment of interesting points can undo, and
/// the found plans then lose to heuristics that leave the hop unfused (property test (c)).
pub fn prune_partially_fused_duplicates(dag: &FusionDag<'_>, memo: &mut MemoTable) {
    let hops: Vec<HopId> = memo.hops().collect();
    for h in hops {
        let inputs = dag.inputs(h);
        memo.retain(h, |e| {
            e.template == TemplateKind::MAgg
                || e.refs().all(|(_, r)| {
                    inputs
                        .iter()
                        .enumerate()
                        .all(|(p, &i)| i != r || e.is_ref(p))
                })
        });
    }
    memo.prune_dangling_references(dag);
}
