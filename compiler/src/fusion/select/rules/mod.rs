//! The rewrites the cost-based policy applies around its search, one per file behind two small
//! traits: [`MemoRule`]s prepare the memo table before the search (reference 4.6, 4.7 first
//! half), [`SelectionRule`]s amend the selected plan after it (reference 4.6 step 3e, 4.7
//! second half). Each rule names itself, so what runs, and in which order, is the two lists
//! [`MEMO_RULES`] and [`SELECTION_RULES`].
//!
//! Adding a rule: a file here with a unit struct implementing one trait, and its place in the
//! list. The golden fixtures (`compiler/tests/fixtures/fusion/*.memo.txt`, the codegen
//! patterns' `.plan.txt`) show what it changes.

mod cross_partition_multi_aggregates;
mod partially_fused_duplicates;
mod row_duplicates;
mod row_to_cell;
mod within_partition_multi_aggregates;

pub use cross_partition_multi_aggregates::{
    cross_partition_multi_aggregates, CrossPartitionMultiAggregates,
};
pub use partially_fused_duplicates::prune_partially_fused_duplicates;
pub use row_duplicates::{prune_row_duplicates, PruneRowDuplicates};
pub use row_to_cell::{convert_invalid_row_plans, RowPlansToCell};
pub use within_partition_multi_aggregates::{
    create_multi_aggregates, WithinPartitionMultiAggregates,
};

use super::cost_based::PartitionResult;
use super::Selection;
use crate::fusion::cost::CostModel;
use crate::fusion::dag::FusionDag;
use crate::fusion::memo::MemoTable;

/// A rewrite of the prepared memo table before the search: it removes plans the search must
/// not choose, or adds plans it should consider.
pub trait MemoRule: Sync {
    /// A short stable name.
    fn name(&self) -> &'static str;

    /// Rewrites `memo`.
    fn apply(&self, dag: &FusionDag<'_>, memo: &mut MemoTable);
}

/// What a [`SelectionRule`] may read: the DAG, the selector's cost model and the search's
/// per-partition results.
pub struct SelectionContext<'a, 'd> {
    pub dag: &'a FusionDag<'d>,
    pub model: &'a CostModel,
    pub partitions: &'a [PartitionResult],
}

/// A rewrite of the selected plan after the search. It may change `memo` (adding the plans it
/// selects), and must leave `selection` a plan the fuse-all traversal could produce from it.
pub trait SelectionRule: Sync {
    /// A short stable name.
    fn name(&self) -> &'static str;

    /// Rewrites `selection` (and `memo` with it).
    fn apply(
        &self,
        ctx: &SelectionContext<'_, '_>,
        memo: &mut MemoTable,
        selection: &mut Selection,
    );
}

/// The memo rules, in the order they run. Each per-partition rule analyzes the partitions of
/// the table the rules before it left (pruning removes entries, never references, so the
/// partitions keep their hops; their points are recomputed).
pub const MEMO_RULES: &[&dyn MemoRule] = &[&PruneRowDuplicates, &WithinPartitionMultiAggregates];

/// The selection rules, in the order they run.
pub const SELECTION_RULES: &[&dyn SelectionRule] =
    &[&RowPlansToCell, &CrossPartitionMultiAggregates];
