//! Selection rule: full aggregates of different partitions that share an input become
//! MultiAggs, where the cost model does not rate that worse (reference 4.7, second half).

use super::{convert_invalid_row_plans, SelectionContext, SelectionRule};
use crate::fusion::cost::cost_of;
use crate::fusion::dag::FusionDag;
use crate::fusion::memo::{CloseState, MemoEntry, MemoTable, TemplateKind};
use crate::fusion::select::cost_based::selection_for;
use crate::fusion::select::Selection;
use crate::hops::HopId;
use std::collections::BTreeSet;

/// Adds the across-partition MultiAgg groups of the selection
/// ([`cross_partition_multi_aggregates`]) one by one, each unless the selection with it costs
/// more than without it under the selector's model; the selection and the memo table are
/// updated with every accepted group.
///
/// SystemDS adds every group unconditionally (reference 4.7 has no cost check). Over members
/// computed by Cell operators or unfused the shared scan never costs more
/// (`Σw + max(R∪, ΣC) ≤ Σ(w + max(R, C))`), so the check only guards the invariant that `gen`
/// never returns a plan its own model rates worse than the one it found; a tie (compute-bound
/// aggregates) keeps the MultiAgg, which still saves the repeated reads.
pub struct CrossPartitionMultiAggregates;

impl SelectionRule for CrossPartitionMultiAggregates {
    fn name(&self) -> &'static str {
        "cross-partition-multi-aggregates"
    }

    fn apply(
        &self,
        ctx: &SelectionContext<'_, '_>,
        memo: &mut MemoTable,
        selection: &mut Selection,
    ) {
        let dag = ctx.dag;
        let mut best = cost_of(dag, ctx.model, selection);
        for group in cross_partition_multi_aggregates(dag, memo, selection) {
            let mut trial = memo.clone();
            for &a in &group {
                if !trial.contains_template(a, TemplateKind::Cell) {
                    // An unfused aggregate (`sum(X)`) joins with its own Cell body.
                    trial.add(
                        a,
                        MemoEntry::new(
                            TemplateKind::Cell,
                            dag.inputs(a).len(),
                            CloseState::ClosedValid,
                        ),
                    );
                }
                trial.add(a, MemoEntry::magg(&group));
            }
            // The candidate is selected as the search's assignments select, with the rules
            // before this one applied to it.
            let mut candidate = selection_for(dag, &trial, ctx.partitions);
            convert_invalid_row_plans(dag, &mut candidate, ctx.partitions);
            let cost = cost_of(dag, ctx.model, &candidate);
            // A relative tolerance: equal costs are summed in a different order.
            if cost <= best * (1.0 + 1e-12) {
                best = cost;
                *memo = trial;
                *selection = candidate;
            }
        }
    }
}

/// What SystemDS's `AggregateInfo` records of one group of full aggregates (reference 4.7).
#[derive(Clone, Debug)]
struct AggregateInfo {
    /// The aggregates of the group, in merge order.
    aggregates: Vec<HopId>,
    /// Every multi-aggregate root the group's aggregates (transitively) read.
    input_aggs: BTreeSet<HopId>,
    /// The matrices the group's fused bodies read.
    fused_inputs: BTreeSet<HopId>,
}

impl AggregateInfo {
    /// SystemDS `AggregateInfo.isMergable`: at most [`MAX_MAGG_AGGREGATES`] together, neither
    /// reads the other, at least one shared input (the point of the shared scan), and equally
    /// sized scans (one iteration space, result correctness).
    ///
    /// [`MAX_MAGG_AGGREGATES`]: crate::fusion::template::MAX_MAGG_AGGREGATES
    fn is_mergeable(&self, that: &AggregateInfo, dag: &FusionDag<'_>) -> bool {
        use crate::fusion::template::{is_valid_multi_aggregate, MAX_MAGG_AGGREGATES};
        let size_ok = self.aggregates.len() + that.aggregates.len() <= MAX_MAGG_AGGREGATES;
        let independent = that.aggregates.iter().all(|a| !self.input_aggs.contains(a))
            && self.aggregates.iter().all(|a| !that.input_aggs.contains(a));
        let shared = !self.fused_inputs.is_disjoint(&that.fused_inputs);
        // The pair check compares the scan sizes of the two groups' first aggregates.
        let same_scan = is_valid_multi_aggregate(dag, &[self.aggregates[0], that.aggregates[0]]);
        size_ok && independent && shared && same_scan
    }

    fn merge(&mut self, that: AggregateInfo) {
        self.aggregates.extend(that.aggregates);
        self.input_aggs.extend(that.input_aggs);
        self.fused_inputs.extend(that.fused_inputs);
    }
}

/// Across-partition MultiAgg groups (reference 4.7 second half, SystemDS
/// `createAndAddMultiAggPlans(memo, roots)`): full aggregates anywhere in the DAG that read
/// common inputs and can share one scan, though no fused intermediate connects them (so they
/// are in different partitions, e.g. `sum(X*Y)` and `sum(X*Z)`).
///
/// Candidates are the multi-aggregate roots without a MultiAgg plan that `selection` computes
/// as operators of their own: with a Cell plan (the MultiAgg reuses it as the aggregate's
/// body) or unfused with no plan at all (`sum(X)`, read through a plain Cell body). Aggregates
/// selected as Row or Outer operators stay as they are (a MultiAgg would displace a plan
/// fusing more, see [`create_multi_aggregates`](super::create_multi_aggregates)), as do aggregates fused into a consumer. Per
/// candidate: its input aggregates (every multi-aggregate root below it) and its fused inputs
/// (the matrices at the boundary of its selected Cell plan; without a plan its input, or both
/// vectors of `t(x) %*% y`). Candidates sorted by number of input aggregates are merged
/// greedily while `AggregateInfo::is_mergeable`; every group of two or more that passes
/// [`crate::fusion::template::is_valid_multi_aggregate`] is returned, in DAG order.
pub fn cross_partition_multi_aggregates(
    dag: &FusionDag<'_>,
    memo: &MemoTable,
    selection: &Selection,
) -> Vec<Vec<HopId>> {
    use crate::fusion::template::CellType;
    use crate::fusion::template::{cell_agg_kind, is_multi_agg_root, is_valid_multi_aggregate};
    let all_roots: Vec<HopId> = dag
        .order()
        .iter()
        .copied()
        .filter(|&h| is_multi_agg_root(dag, h))
        .collect();
    let candidates: Vec<HopId> = all_roots
        .iter()
        .copied()
        .filter(|&h| !memo.contains_template(h, TemplateKind::MAgg))
        .filter(
            |&h| match (selection.roots.get(&h), selection.plans.get(&h)) {
                (Some(e), _) => e.template == TemplateKind::Cell,
                (None, None) => {
                    !memo.contains(h)
                        && matches!(cell_agg_kind(dag, h), Some((CellType::FullAgg, Some(_))))
                }
                (None, Some(_)) => false,
            },
        )
        .collect();
    if candidates.len() < 2 {
        return Vec::new();
    }
    let mut infos: Vec<AggregateInfo> = candidates
        .iter()
        .map(|&h| {
            let input_aggs: BTreeSet<HopId> = all_roots
                .iter()
                .copied()
                .filter(|&o| o != h && dag.inputs(h).iter().any(|&i| dag.contains(i, o)))
                .collect();
            AggregateInfo {
                aggregates: vec![h],
                input_aggs,
                fused_inputs: fused_inputs(dag, selection, h),
            }
        })
        .collect();
    infos.sort_by_key(|a| a.input_aggs.len());
    loop {
        let mut merged = false;
        let mut i = 0;
        while i < infos.len() {
            let mut j = i + 1;
            while j < infos.len() {
                if infos[i].is_mergeable(&infos[j], dag) {
                    let that = infos.remove(j);
                    infos[i].merge(that);
                    merged = true;
                } else {
                    j += 1;
                }
            }
            i += 1;
        }
        if !merged {
            break;
        }
    }
    let position = |h: &HopId| dag.order().iter().position(|x| x == h);
    let mut groups: Vec<Vec<HopId>> = infos
        .into_iter()
        .map(|i| i.aggregates)
        .filter(|g| is_valid_multi_aggregate(dag, g))
        .collect();
    groups.sort_by_key(|g| g.iter().filter_map(position).min());
    groups
}

/// The matrices the selected Cell body of aggregate `agg` reads (SystemDS
/// `rExtractAggregateInfo` fused inputs): walking the selected plans from `agg` through its
/// references, every materialized matrix input; the transposed vector of a dot product
/// `t(x) %*% y` counts as `x`. Without any, the aggregate's own input (both vectors of a dot
/// product).
fn fused_inputs(dag: &FusionDag<'_>, selection: &Selection, agg: HopId) -> BTreeSet<HopId> {
    let cell_plan = |h: HopId| {
        selection
            .plans
            .get(&h)
            .and_then(|es| es.iter().find(|e| e.template == TemplateKind::Cell))
    };
    let base = |h: HopId, pos: usize| {
        let c = dag.inputs(h)[pos];
        if dag.is_matmul(h) && pos == 0 && dag.is_transpose(c) {
            dag.inputs(c)[0]
        } else {
            c
        }
    };
    let mut out = BTreeSet::new();
    let mut seen = BTreeSet::new();
    let mut stack = vec![agg];
    while let Some(h) = stack.pop() {
        if !seen.insert(h) {
            continue;
        }
        let plan = cell_plan(h);
        for pos in 0..dag.inputs(h).len() {
            match plan {
                Some(e) if e.is_ref(pos) => stack.push(dag.inputs(h)[pos]),
                _ => {
                    let c = base(h, pos);
                    if dag.is_matrix(c) {
                        out.insert(c);
                    }
                }
            }
        }
    }
    if out.is_empty() {
        out.insert(base(agg, 0));
        if dag.is_matmul(agg) {
            out.insert(dag.inputs(agg)[1]);
        }
    }
    out
}
