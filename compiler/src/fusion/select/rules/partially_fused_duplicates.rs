//! Memo pruning every policy applies before it selects: drop plans that fuse a hop at one
//! input position and read it materialized at another.

use crate::fusion::dag::FusionDag;
use crate::fusion::memo::{MemoTable, TemplateKind};
use crate::hops::HopId;

/// Removes the entries that fuse an input at one position but read the same hop materialized
/// at another (`O(-1,19)` of `19 * 19`): such a plan both computes the hop inside the operator
/// and forces it to be materialized, which no assignment of interesting points can undo. The
/// plan reading the hop materialized at both positions does strictly less work, so every
/// policy drops these entries ([`super::super::prepare_for_selection`]); a heuristic that kept
/// them would select operators whose materialized input no operator computes, and the cost
/// model would price them below the work they need (`fusion_cost_proptest`, property (c)).
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
