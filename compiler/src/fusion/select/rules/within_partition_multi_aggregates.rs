//! Memo rule: MultiAgg plans for the full aggregates of one partition (reference 4.7, first
//! half).

use super::MemoRule;
use crate::fusion::dag::FusionDag;
use crate::fusion::memo::{MemoEntry, MemoTable, TemplateKind};
use crate::fusion::partition::{analyze_partitions, PlanPartition};
use crate::hops::HopId;
use std::collections::BTreeSet;

/// [`create_multi_aggregates`] in every partition, as a [`MemoRule`].
pub struct WithinPartitionMultiAggregates;

impl MemoRule for WithinPartitionMultiAggregates {
    fn name(&self) -> &'static str {
        "within-partition-multi-aggregates"
    }

    fn apply(&self, dag: &FusionDag<'_>, memo: &mut MemoTable) {
        // Once for all partitions (a DAG of thousands of statements has thousands of them):
        // the rule adds entries to hops that have plans already, never a hop, so the set
        // stays what it was.
        let referenced = hops_read_by_planned_hops(dag, memo);
        for part in analyze_partitions(dag, memo) {
            create_multi_aggregates(dag, memo, &part, &referenced);
        }
    }
}

/// Within-partition MultiAgg plans (reference 4.7): the partition's roots that are full
/// aggregates (and inputs of no hop with plans), in order, in chunks of at most three; each
/// valid chunk gets a MultiAgg entry on every member. Aggregates in different partitions are
/// grouped after selection ([`cross_partition_multi_aggregates`](super::cross_partition_multi_aggregates)).
///
/// Unlike SystemDS, a member must have Cell plans only (after [`prune_row_duplicates`](super::prune_row_duplicates)): a
/// MultiAgg computes each aggregate with its Cell plan, and since it is preferred by rank it
/// would displace a Row plan that fuses more (the property test found such plans costing more
/// than fuse-all). Over Cell-only members it never costs more than separate operators:
/// `Σw + max(R∪, ΣC) ≤ Σ(w + max(R, C))`.
///
/// `referenced` is [`hops_read_by_planned_hops`] of the memo.
pub fn create_multi_aggregates(
    dag: &FusionDag<'_>,
    memo: &mut MemoTable,
    part: &PlanPartition,
    referenced: &BTreeSet<HopId>,
) {
    use crate::fusion::template::{is_multi_agg_root, is_valid_multi_aggregate};
    let aggs: Vec<HopId> = part
        .roots
        .iter()
        .copied()
        .filter(|&r| {
            is_multi_agg_root(dag, r)
                && !referenced.contains(&r)
                && memo.contains_template(r, TemplateKind::Cell)
                && memo
                    .group(r)
                    .iter()
                    .all(|e| e.template == TemplateKind::Cell)
        })
        .collect();
    for chunk in aggs.chunks(crate::fusion::template::MAX_MAGG_AGGREGATES) {
        if is_valid_multi_aggregate(dag, chunk) {
            for &a in chunk {
                memo.add(a, MemoEntry::magg(chunk));
            }
        }
    }
}

/// The hops that some hop with plans reads: an aggregate among them feeds a fused consumer
/// and is not a MultiAgg candidate.
pub fn hops_read_by_planned_hops(dag: &FusionDag<'_>, memo: &MemoTable) -> BTreeSet<HopId> {
    memo.hops()
        .flat_map(|h| dag.inputs(h).iter().copied())
        .collect()
}
