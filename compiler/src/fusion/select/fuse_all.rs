//! Fuse-all (FA, paper section 4, reference 4.2): maximal fusion. Every hop is fused into
//! its consumers wherever a plan allows, so common subexpressions are recomputed inside each
//! operator that uses them (redundant compute) but the fewest intermediates are materialized.

use super::{prepare_for_selection, prune_subsumed, select_fuse_all, selection_roots};
use super::{PlanSelector, Selection};
use crate::fusion::dag::FusionDag;
use crate::fusion::memo::MemoTable;
use crate::Result;

/// The fuse-all heuristic.
#[derive(Clone, Copy, Debug, Default)]
pub struct FuseAll;

impl PlanSelector for FuseAll {
    fn name(&self) -> &'static str {
        "fuse-all"
    }

    fn is_heuristic(&self) -> bool {
        true
    }

    fn select(&self, dag: &FusionDag<'_>, memo: &mut MemoTable) -> Result<Selection> {
        prepare_for_selection(dag, memo, true);
        Ok(fuse_everything_left(self.name(), dag, memo))
    }
}

/// The tail both heuristics share: drop subsumed entries, fuse everything still in the memo
/// table from the DAG's roots, and reduce the table to that selection.
pub(super) fn fuse_everything_left(
    selector: &str,
    dag: &FusionDag<'_>,
    memo: &mut MemoTable,
) -> Selection {
    prune_subsumed(memo);
    let mut selection = Selection {
        selector: selector.to_string(),
        ..Selection::default()
    };
    select_fuse_all(
        dag,
        memo,
        &selection_roots(dag),
        None,
        &|_, _| true,
        &mut selection,
    );
    finish(memo, &mut selection);
    selection
}

/// Reduces the memo table to the selection.
pub(super) fn finish(memo: &mut MemoTable, selection: &mut Selection) {
    memo.prune_to_plan(&selection.plans);
}
