//! Fuse-no-redundancy (FNR, paper section 4, reference 4.3): fusion without redundant
//! compute. A hop with several consumers is never fused into any of them; it is materialized
//! once and read by each, so more intermediates are written than with fuse-all.

use super::fuse_all::fuse_everything_left;
use super::prepare_for_selection;
use super::{PlanSelector, Selection};
use crate::fusion::dag::FusionDag;
use crate::fusion::memo::MemoTable;
use crate::hops::HopId;
use crate::Result;

/// The fuse-no-redundancy heuristic.
#[derive(Clone, Copy, Debug, Default)]
pub struct FuseNoRedundancy;

impl PlanSelector for FuseNoRedundancy {
    fn name(&self) -> &'static str {
        "fuse-no-redundancy"
    }

    fn is_heuristic(&self) -> bool {
        true
    }

    fn select(&self, dag: &FusionDag<'_>, memo: &mut MemoTable) -> Result<Selection> {
        prepare_for_selection(dag, memo, true);
        // Before subsumption pruning, so that a plan fusing a shared input cannot hide the
        // plan that reads it materialized.
        let hops: Vec<HopId> = memo.hops().collect();
        for h in hops {
            memo.retain(h, |e| e.refs().all(|(_, c)| dag.num_consumers(c) <= 1));
        }
        // A plan fusing `t(Q)` of a shared Q loses its only plan above; so must its consumers.
        memo.prune_dangling_references(dag);
        Ok(fuse_everything_left(self.name(), dag, memo))
    }
}
