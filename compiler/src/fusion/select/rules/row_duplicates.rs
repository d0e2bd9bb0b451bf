//! Memo rule: drop Row plans that merely duplicate Cell plans (reference 4.6, "Row vs. Cell
//! duplicates").

use super::MemoRule;
use crate::fusion::dag::FusionDag;
use crate::fusion::memo::{MemoEntry, MemoTable, TemplateKind};
use crate::fusion::partition::{analyze_partitions, PlanPartition};
use crate::hops::HopId;
use std::collections::{BTreeSet, HashMap};

/// [`prune_row_duplicates`] in every partition, as a [`MemoRule`].
pub struct PruneRowDuplicates;

impl MemoRule for PruneRowDuplicates {
    fn name(&self) -> &'static str {
        "row-duplicates"
    }

    fn apply(&self, dag: &FusionDag<'_>, memo: &mut MemoTable) {
        // Each partition visits its own hops in DAG order, not the whole DAG: a block of
        // thousands of statements has thousands of partitions.
        let position: HashMap<HopId, usize> = dag
            .order()
            .iter()
            .enumerate()
            .map(|(i, &h)| (h, i))
            .collect();
        for part in analyze_partitions(dag, memo) {
            let mut in_order: Vec<HopId> = part.hops.iter().copied().collect();
            in_order.sort_by_key(|h| position.get(h).copied().unwrap_or(usize::MAX));
            prune_row_duplicates(dag, memo, &part, &in_order);
        }
    }
}

/// Removes the Row plans of partition hops whose Row and Cell plans fuse exactly the same
/// inputs, unless a row-wise operation depends on them or they on one (reference 4.6
/// `pruneInvalidAndSpecialCasePlans`, "Row vs. Cell duplicates"): a cell-wise operator is
/// cheaper and more general, and the cost model cannot tell the two apart.
/// `hops_in_dag_order` holds the partition's hops, inputs before consumers.
pub fn prune_row_duplicates(
    dag: &FusionDag<'_>,
    memo: &mut MemoTable,
    part: &PlanPartition,
    hops_in_dag_order: &[HopId],
) {
    let mut blacklist = BTreeSet::new();
    let mut visited = BTreeSet::new();
    for &r in &part.roots {
        collect_row_ops(dag, memo, part, r, &mut blacklist, &mut visited);
    }
    // Bottom-up, on the table before removal: a Row plan is replaceable only if every hop it
    // fuses is replaceable too (or has no Row plans). SystemDS checks each hop alone, which
    // can turn `R(15)` into `C(15)` where 15's Cell plan fuses less than its Row plan and so
    // cut a Row chain in two operators (found by the property test against fuse-all).
    let mut replaceable: BTreeSet<HopId> = BTreeSet::new();
    for &h in hops_in_dag_order {
        if blacklist.contains(&h)
            || !memo.contains_template(h, TemplateKind::Row)
            || !only_exact_matches(memo, h)
        {
            continue;
        }
        let inner_ok = memo.entries_of(h, TemplateKind::Row).all(|e| {
            e.refs().all(|(_, r)| {
                !memo.contains_template(r, TemplateKind::Row) || replaceable.contains(&r)
            })
        });
        if inner_ok {
            replaceable.insert(h);
        }
    }
    for h in replaceable {
        memo.remove_template(h, TemplateKind::Row);
    }
}

/// Whether every Row entry of `h` has a Cell entry with the same references and vice versa
/// (SystemDS `hasOnlyExactMatches`).
fn only_exact_matches(memo: &MemoTable, h: HopId) -> bool {
    let rows: Vec<&MemoEntry> = memo.entries_of(h, TemplateKind::Row).collect();
    let cells: Vec<&MemoEntry> = memo.entries_of(h, TemplateKind::Cell).collect();
    rows.len() == cells.len()
        && rows
            .iter()
            .all(|r| cells.iter().any(|c| c.inputs == r.inputs))
}

/// SystemDS `rCollectDependentRowOps`: the hops that are row-wise operations, fused (inside
/// Row plans) below one, or whose Row plan fuses such a hop. Top-down from `root` with an
/// explicit stack (the walk is as deep as the partition); a hop's bottom-up check runs after
/// its inputs'.
fn collect_row_ops(
    dag: &FusionDag<'_>,
    memo: &MemoTable,
    part: &PlanPartition,
    root: HopId,
    blacklist: &mut BTreeSet<HopId>,
    visited: &mut BTreeSet<(HopId, bool, Option<TemplateKind>)>,
) {
    enum Step<'m> {
        Enter(HopId, Option<TemplateKind>, bool),
        Exit(
            HopId,
            Option<&'m MemoEntry>,
            (HopId, bool, Option<TemplateKind>),
        ),
    }
    let mut stack = vec![Step::Enter(root, None, false)];
    while let Some(step) = stack.pop() {
        match step {
            Step::Enter(h, context, mut found) => {
                let key = (h, found, context);
                if !part.hops.contains(&h) || visited.contains(&key) {
                    continue;
                }
                let me = match context {
                    None => memo.best(h),
                    Some(t) => memo.best_within(h, t),
                };
                let in_row = me.is_some_and(|m| m.template == TemplateKind::Row)
                    && context == Some(TemplateKind::Row);
                let diff_plans = !part.points.is_empty()
                    && memo.contains_template(h, TemplateKind::Row)
                    && !only_exact_matches(memo, h);
                if in_row && found {
                    blacklist.insert(h);
                }
                if is_row_op(dag, h, in_row) || diff_plans {
                    blacklist.insert(h);
                    found = true;
                }
                stack.push(Step::Exit(h, me, key));
                for (i, &c) in dag.inputs(h).iter().enumerate().rev() {
                    let child_found = found && me.is_some_and(|m| m.is_ref(i));
                    stack.push(Step::Enter(c, me.map(|m| m.template), child_found));
                }
            }
            Step::Exit(h, me, key) => {
                if let Some(m) = me.filter(|m| m.template == TemplateKind::Row) {
                    if m.refs().any(|(_, c)| blacklist.contains(&c)) {
                        blacklist.insert(h);
                    }
                }
                visited.insert(key);
            }
        }
    }
}

/// SystemDS `isRowAggOp`: operations only the Row template can compute.
fn is_row_op(dag: &FusionDag<'_>, h: HopId, in_row: bool) -> bool {
    use crate::hops::{DataGenOp, NaryOp, OpKind};
    let not_vector = |h: HopId| {
        let hop = dag.hop(h);
        hop.rows != Some(1) && hop.cols != Some(1)
    };
    match dag.op(h) {
        OpKind::Nary(NaryOp::Cbind) => true,
        OpKind::MatMul => in_row || dag.dims(h).is_none() || not_vector(h),
        OpKind::AggUnary { .. } => in_row,
        _ if dag.is_transpose(h) => {
            not_vector(h)
                && !dag
                    .input(h, 0)
                    .is_some_and(|i| matches!(dag.op(i), OpKind::DataGen(DataGenOp::Seq)))
        }
        _ => false,
    }
}
