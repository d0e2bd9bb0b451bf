//! Selection rule: selected Row plans that lost every row-wise reason to exist become Cell
//! plans (reference 4.6 step 3e).

use super::{SelectionContext, SelectionRule};
use crate::fusion::dag::FusionDag;
use crate::fusion::memo::{MemoEntry, MemoTable, TemplateKind};
use crate::fusion::select::cost_based::PartitionResult;
use crate::fusion::select::Selection;
use crate::hops::HopId;
use std::collections::BTreeSet;

/// [`convert_invalid_row_plans`] as a [`SelectionRule`].
pub struct RowPlansToCell;

impl SelectionRule for RowPlansToCell {
    fn name(&self) -> &'static str {
        "row-plans-to-cell"
    }

    fn apply(
        &self,
        ctx: &SelectionContext<'_, '_>,
        _memo: &mut MemoTable,
        selection: &mut Selection,
    ) {
        convert_invalid_row_plans(ctx.dag, selection, ctx.partitions);
    }
}

/// SystemDS `rPruneInvalidPlans` (reference 4.6 step 3e), applied to the selected plans of
/// the hops in partitions with interesting points, once the search has chosen their
/// assignments: bottom-up, a selected Row plan is pointless when it is a leaf over no true
/// matrix (pure vector operations) or an inner plan at a hop the Row template does not open
/// whose fused inputs have no selected Row plan (they were cut at materialization points,
/// dropped as Row duplicates, or converted themselves). Such a plan becomes the Cell plan with
/// the same references where the operation is cell-wise (not a `cbind` nor a matrix product
/// with a matrix output, SystemDS `isValidRow2CellOp`) and the Cell template accepts it (opens
/// at it, or fuses each referenced input into it). A Row consumer absorbs the Cell plan.
///
/// Deviation: SystemDS converts memo entries before its final fuse-all traversal, and removes
/// the plans it cannot convert. Converting the memo before the traversal lets a converted
/// entry lose to another Cell entry that fuses more than the search chose (found by the
/// property test: a plan costing more than fuse-no-redundancy), so lafuse relabels the
/// selected plans instead: the same operators, with the same references and modelled cost,
/// built by the cheaper and more general Cell template. A plan that cannot be converted stays
/// a Row plan, which computes the same values (removing it after selection would un-fuse it).
pub fn convert_invalid_row_plans(
    dag: &FusionDag<'_>,
    selection: &mut Selection,
    results: &[PartitionResult],
) {
    use crate::fusion::template::{CellTemplate, RowTemplate, Template};
    let scope: BTreeSet<HopId> = results
        .iter()
        .filter(|r| !r.partition.points.is_empty())
        .flat_map(|r| r.partition.hops.iter().copied())
        .collect();
    let has_row_plan = |sel: &Selection, h: HopId| {
        sel.plans
            .get(&h)
            .is_some_and(|es| es.iter().any(|e| e.template == TemplateKind::Row))
    };
    for &h in dag.order() {
        if !scope.contains(&h) || !has_row_plan(selection, h) {
            continue;
        }
        let has_matrix_input = dag.inputs(h).iter().any(|&i| dag.is_full_matrix(i));
        let row_open = RowTemplate.open(dag, h);
        let convertible_op = is_valid_row_to_cell_op(dag, h);
        let convert = |sel: &Selection, e: &MemoEntry| -> MemoEntry {
            if e.template != TemplateKind::Row {
                return e.clone();
            }
            let leaf = !e.has_refs() && !has_matrix_input;
            let inner = !leaf && !row_open && e.refs().all(|(_, c)| !has_row_plan(sel, c));
            let cell_ok = if e.has_refs() {
                e.refs().all(|(_, c)| CellTemplate.fuse(dag, h, c))
            } else {
                CellTemplate.open(dag, h)
            };
            if (leaf || inner) && convertible_op && cell_ok {
                MemoEntry {
                    template: TemplateKind::Cell,
                    ..e.clone()
                }
            } else {
                e.clone()
            }
        };
        let mut entries: Vec<MemoEntry> = selection.plans[&h]
            .iter()
            .map(|e| convert(selection, e))
            .collect();
        entries.sort();
        entries.dedup();
        if let Some(root) = selection.roots.get(&h) {
            let root = convert(selection, root);
            selection.roots.insert(h, root);
        }
        selection.plans.insert(h, entries);
    }
}

/// SystemDS `isValidRow2CellOp`: anything but a `cbind` or a matrix product with a true
/// matrix output.
fn is_valid_row_to_cell_op(dag: &FusionDag<'_>, h: HopId) -> bool {
    use crate::hops::{NaryOp, OpKind};
    !(matches!(dag.op(h), OpKind::Nary(NaryOp::Cbind))
        || (dag.is_matmul(h) && dag.is_full_matrix(h)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fusion::cost::CostModel;
    use crate::fusion::explore::{explore, ExploreOptions};
    use crate::fusion::partition::analyze_partitions;
    use crate::fusion::select::cost_based::selection_for;
    use crate::fusion::template::test_util::{build, view};
    use crate::hops::{AggOp, BinaryOp, Direction, NaryOp, OpKind, UnaryOp};

    #[test]
    fn row_plans_without_row_work_become_cell_plans_after_selection() {
        // c = exp(v) over a column vector v, h1 = c + 1, h2 = c * 2 (c has two consumers: an
        // interesting point), sums of both, and cbind(c, v). Row opens at exp(v) and cbind;
        // nothing here reads a true matrix.
        let mut ids = Vec::new();
        let dag = build(|b| {
            let v = b.input("v", 100, 1, 100);
            let c = b.unary(UnaryOp::Exp, v).unwrap();
            let one = b.literal_f64(1.0);
            let two = b.literal_f64(2.0);
            let h1 = b.binary(BinaryOp::Add, c, one).unwrap();
            let h2 = b.binary(BinaryOp::Mul, c, two).unwrap();
            let s1 = b.agg(AggOp::Sum, Direction::Full, h1).unwrap();
            let s2 = b.agg(AggOp::Sum, Direction::Full, h2).unwrap();
            let cb = b.add(OpKind::Nary(NaryOp::Cbind), &[c, v]).unwrap();
            ids.extend([c, h1, s1, cb]);
            vec![s1, s2, cb]
        });
        let f = view(&dag);
        let [c, h1, s1, cb] = [ids[0], ids[1], ids[2], ids[3]];
        let memo = explore(&f, &ExploreOptions::default());
        let results: Vec<PartitionResult> = analyze_partitions(&f, &memo)
            .into_iter()
            .map(|p| PartitionResult {
                assignment: vec![false; p.points.len()],
                partition: p,
                cost: 0.0,
            })
            .collect();
        assert!(results.iter().any(|r| !r.partition.points.is_empty()));
        // The fuse-all traversal prefers Row plans (rank) all the way down.
        let fuse_all = |results: &[PartitionResult]| {
            let mut sel = selection_for(&f, &memo, results);
            // A leaf cbind plan as a separate operator, for the removal rule below.
            sel.plans.insert(
                cb,
                vec![MemoEntry::new(
                    TemplateKind::Row,
                    2,
                    crate::fusion::memo::CloseState::OpenValid,
                )],
            );
            sel.roots.insert(cb, sel.plans[&cb][0].clone());
            sel
        };
        let templates = |sel: &Selection, h: HopId| -> Vec<(TemplateKind, Vec<Option<HopId>>)> {
            sel.plans[&h]
                .iter()
                .map(|e| (e.template, e.inputs.clone()))
                .collect()
        };
        let mut sel = fuse_all(&results);
        assert_eq!(templates(&sel, c), [(TemplateKind::Row, vec![None])]);
        assert_eq!(
            templates(&sel, h1),
            [(TemplateKind::Row, vec![Some(c), None])]
        );
        assert_eq!(sel.roots[&s1].template, TemplateKind::Row);
        let cost = crate::fusion::cost::cost_of(&f, &CostModel::default(), &sel);
        convert_invalid_row_plans(&f, &mut sel, &results);
        // Leaf exp(v): pure vector operations.
        assert_eq!(templates(&sel, c), [(TemplateKind::Cell, vec![None])]);
        // Inner c + 1 (Row does not open at it) fusing c, which has no Row plan left; and so
        // on up to the root sum, whose operator is now a Cell operator.
        assert_eq!(
            templates(&sel, h1),
            [(TemplateKind::Cell, vec![Some(c), None])]
        );
        assert_eq!(sel.roots[&s1].template, TemplateKind::Cell);
        assert_eq!(sel.roots[&s1].inputs, vec![Some(h1)]);
        // A cbind is no cell-wise operation: its plan stays a Row plan.
        assert_eq!(sel.roots[&cb].template, TemplateKind::Row);
        // Same operators, same references: the same modelled cost.
        assert_eq!(
            crate::fusion::cost::cost_of(&f, &CostModel::default(), &sel),
            cost
        );

        // Only partitions with interesting points are converted (as in SystemDS).
        let mut sel = fuse_all(&[]);
        convert_invalid_row_plans(&f, &mut sel, &[]);
        assert_eq!(templates(&sel, c), [(TemplateKind::Row, vec![None])]);
    }
}
