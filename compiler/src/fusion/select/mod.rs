//! Candidate selection: policies that choose, from the memo table of all valid partial plans,
//! the set of plans to build fused operators from (paper section 4, reference 4).
//!
//! A policy implements [`PlanSelector`]. This module holds the machinery the policies share
//! (reference 4.1): the preparation of the memo table before selection
//! ([`prepare_for_selection`], SystemDS `pruneSuboptimal`), and the top-down "fuse-all"
//! traversal ([`select_fuse_all`]) that, given which entries are usable, picks per hop the
//! preferred plan and follows its references. The heuristics are [`FuseAll`] and
//! [`FuseNoRedundancy`]; the cost-based MPSkipEnum policy plugs in the same way, carrying its
//! cost model in its own value (egg's cost-function style) and restricting
//! [`select_fuse_all`] to a partition and to the entries its best assignment of interesting
//! points allows.

pub mod cost_based;
mod fuse_all;
mod fuse_no_redundancy;
pub mod reachability;
pub mod rules;
mod static_bounds;

pub use cost_based::CostBased;
pub use fuse_all::FuseAll;
pub use fuse_no_redundancy::FuseNoRedundancy;
pub use static_bounds::cost_floor;

use crate::fusion::dag::FusionDag;
use crate::fusion::memo::{MemoEntry, MemoTable, TemplateKind};
use crate::hops::HopId;
use crate::Result;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// The plans a policy selected.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Selection {
    /// The policy's name ([`PlanSelector::name`]).
    pub selector: String,
    /// Per hop the selected entries: one per context the hop is used in (as the root of an
    /// operator, or inside operators of a template), so usually one.
    pub plans: BTreeMap<HopId, Vec<MemoEntry>>,
    /// The hops at which a fused operator is rooted (its output is materialized), with the
    /// operator's plan, ascending.
    pub roots: BTreeMap<HopId, MemoEntry>,
    /// The modelled cost of the plan, for policies that cost plans.
    pub cost: Option<f64>,
}

impl Selection {
    /// The selected entry of `hop` as an operator root, if it roots one.
    pub fn root_plan(&self, hop: HopId) -> Option<&MemoEntry> {
        self.roots.get(&hop)
    }

    /// A text summary: one line per hop with a selected plan, `root` or `fused`, and its
    /// entries (`(7) root: C(5,-1)|c`), in ascending hop order. Byte-stable.
    pub fn explain(&self) -> String {
        let mut out = format!(
            "selection ({}): {} operators\n",
            self.selector,
            self.roots.len()
        );
        for (h, entries) in &self.plans {
            let tag = if self.roots.contains_key(h) {
                "root"
            } else {
                "fused"
            };
            let es: Vec<String> = entries.iter().map(|e| e.to_string()).collect();
            out.push_str(&format!("({h}) {tag}: {}\n", es.join(" ")));
        }
        out
    }
}

/// A plan-selection policy (paper section 4).
///
/// `select` receives the explored memo table, may prune it as it likes, and must leave it
/// reduced to the selected plan ([`MemoTable::prune_to_plan`]), which it also returns. A
/// cost-based policy holds its cost model (and any configuration) in `self`; the DAG view
/// carries the sizes it needs.
pub trait PlanSelector {
    /// A short stable name (`fuse-all`, `fuse-no-redundancy`, `gen`), used by explain.
    fn name(&self) -> &'static str;

    /// Whether the policy is a heuristic. Heuristics let exploration prune dominated plans
    /// early and exclude single-consumer fused inputs from becoming separate operators
    /// (reference 1.4, 2.4); cost-based policies keep all plans for their search.
    fn is_heuristic(&self) -> bool;

    /// Selects plans and reduces `memo` to them.
    fn select(&self, dag: &FusionDag<'_>, memo: &mut MemoTable) -> Result<Selection>;
}

/// Every policy's preparation: drop the plans that fuse a hop at one input position and read it
/// materialized at another ([`rules::prune_partially_fused_duplicates`]), then SystemDS
/// `pruneSuboptimal` steps (a) and (b) (reference 2.4 step 2): drop the reference-free plans of hops no plan references (a lone operation gains nothing from
/// fusion, [`crate::fusion::memo::is_valid_single_operation`] excepted), and for heuristics put
/// every fused input with a single consumer on the exclude list (it will be fused into its
/// consumer and must not also become an operator of its own).
pub fn prepare_for_selection(dag: &FusionDag<'_>, memo: &mut MemoTable, heuristic: bool) {
    rules::prune_partially_fused_duplicates(dag, memo);
    memo.prune_single_operation_plans(dag);
    if heuristic {
        let referenced = memo.referenced_hops();
        for h in referenced {
            if dag.num_consumers(h) == 1 {
                memo.exclude(h);
            }
        }
    }
}

/// Removes from every group the entries subsumed by another entry of the group (reference
/// 4.1 step 2): with equal templates, the plan fusing more inputs wins.
pub fn prune_subsumed(memo: &mut MemoTable) {
    let hops: Vec<HopId> = memo.hops().collect();
    for h in hops {
        let group = memo.group(h).to_vec();
        let keep: Vec<MemoEntry> = group
            .iter()
            .enumerate()
            .filter(|(j, e2)| {
                !group.iter().enumerate().any(|(i, e1)| {
                    i != *j && e1.subsumes(e2) && (e1.num_refs() > e2.num_refs() || i < *j)
                })
            })
            .map(|(_, e)| e.clone())
            .collect();
        memo.set_distinct(h, keep);
    }
}

/// The top-down fuse-all traversal (SystemDS `rSelectPlansFuseAll`, reference 4.1) from
/// `roots`, restricted to `partition` if given, using only entries `usable(hop, entry)` allows.
///
/// At a hop that starts an operator the preferred valid plan is chosen
/// ([`MemoTable::best`]: template rank, then most references); inside an operator of template
/// `T` the preferred plan of `T` or Cell ([`MemoTable::best_within`]). Referenced inputs are
/// visited in the chosen plan's template, others as operator starts. A hop is visited at most
/// once per context. A MultiAgg plan is recorded together with the hop's preferred Cell plan,
/// which describes the aggregate's fused body (reference 3.3). Hops without a usable plan are
/// left unfused and their inputs visited as operator starts.
pub fn select_fuse_all(
    dag: &FusionDag<'_>,
    memo: &MemoTable,
    roots: &[HopId],
    partition: Option<&BTreeSet<HopId>>,
    usable: &dyn Fn(HopId, &MemoEntry) -> bool,
    selection: &mut Selection,
) {
    let mut visited: BTreeSet<(HopId, Option<TemplateKind>)> = BTreeSet::new();
    // Reverse so that the first root is processed first (stack order).
    let mut stack: Vec<(HopId, Option<TemplateKind>)> =
        roots.iter().rev().map(|&r| (r, None)).collect();
    while let Some((h, current)) = stack.pop() {
        if partition.is_some_and(|p| !p.contains(&h)) || !visited.insert((h, current)) {
            continue;
        }
        let candidates: Vec<&MemoEntry> = memo.group(h).iter().filter(|e| usable(h, e)).collect();
        let pick_root = || {
            candidates
                .iter()
                .copied()
                .filter(|e| e.is_valid())
                .min_by_key(|e| (e.template.rank(), std::cmp::Reverse(e.num_refs())))
        };
        let (best, as_root) = match current {
            // Excluded hops are fused into their single consumer elsewhere; they never root
            // an operator of their own (SystemDS checks this at CPlan construction).
            None if memo.is_excluded(h) => (None, true),
            None => (pick_root(), true),
            Some(t) => match candidates
                .iter()
                .copied()
                .filter(|e| t.can_absorb(e.template))
                .min_by_key(|e| crate::fusion::memo::typed_score(e, t))
            {
                Some(e) => (Some(e), false),
                // A reference without a compatible plan cannot happen after exploration; treat
                // the hop as an operator start rather than leave it uncomputed.
                None => (pick_root(), true),
            },
        };
        let mut body = best;
        if let Some(b) = best {
            add_plan(selection, h, b.clone());
            if as_root {
                selection.roots.insert(h, b.clone());
            }
            if b.template == TemplateKind::MAgg {
                body = candidates
                    .iter()
                    .copied()
                    .filter(|e| e.template == TemplateKind::Cell)
                    .min_by_key(|e| crate::fusion::memo::typed_score(e, TemplateKind::Cell));
                if let Some(c) = body {
                    add_plan(selection, h, c.clone());
                }
            }
        }
        let inputs = dag.inputs(h);
        for (pos, &c) in inputs.iter().enumerate().rev() {
            let ctx = body.filter(|b| b.is_ref(pos)).map(|b| b.template);
            stack.push((c, ctx));
        }
    }
}

fn add_plan(selection: &mut Selection, h: HopId, e: MemoEntry) {
    let list = selection.plans.entry(h).or_default();
    if !list.contains(&e) {
        list.push(e);
        list.sort();
    }
}

/// The DAG's roots as selection starts: the values its `TransientWrite`s and side effects
/// read (sinks themselves never have plans).
pub fn selection_roots(dag: &FusionDag<'_>) -> Vec<HopId> {
    dag.dag()
        .roots
        .iter()
        .flat_map(|&r| {
            if dag.hop(r).op.is_sink() {
                dag.inputs(r).to_vec()
            } else {
                vec![r]
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fusion::explore::{explore, ExploreOptions};
    use crate::fusion::template::test_util::{build, view};
    use crate::hops::{AggOp, BinaryOp, Direction};

    /// sum(X * Y * Z): hops (h1 = X*Y, h2 = h1*Z, h3 = sum).
    fn sum_xyz() -> (crate::hops::HopDag, [HopId; 3]) {
        let mut ids = Vec::new();
        let dag = build(|b| {
            let x = b.input("X", 100, 100, 10_000);
            let y = b.input("Y", 100, 100, 10_000);
            let z = b.input("Z", 100, 100, 10_000);
            let h1 = b.binary(BinaryOp::Mul, x, y).unwrap();
            let h2 = b.binary(BinaryOp::Mul, h1, z).unwrap();
            let h3 = b.agg(AggOp::Sum, Direction::Full, h2).unwrap();
            ids.extend([h1, h2, h3]);
            vec![h3]
        });
        (dag, [ids[0], ids[1], ids[2]])
    }

    #[test]
    fn subsumed_entries_are_pruned_once_with_a_stable_winner() {
        let (dag, [h1, h2, _]) = sum_xyz();
        let f = view(&dag);
        let mut memo = explore(&f, &ExploreOptions::default());
        prune_subsumed(&mut memo);
        let shown: Vec<String> = memo.group(h2).iter().map(|e| e.to_string()).collect();
        assert_eq!(shown, [format!("R({h1},-1)"), format!("C({h1},-1)")]);
    }

    #[test]
    fn a_usable_filter_cuts_fusion_edges() {
        // What the cost-based selector does with an assignment of interesting points: an
        // entry referencing across a cut edge is not usable; the input then roots an operator.
        let (dag, [h1, h2, h3]) = sum_xyz();
        let f = view(&dag);
        let memo = explore(&f, &ExploreOptions::default());
        let mut sel = Selection::default();
        let cut = |h: HopId, e: &MemoEntry| !(h == h2 && e.references(h1));
        select_fuse_all(&f, &memo, &[h3], None, &cut, &mut sel);
        assert_eq!(sel.roots.keys().copied().collect::<Vec<_>>(), [h1, h3]);
        assert_eq!(sel.plans[&h2][0].to_string(), "R(-1,-1)");
        // Restricting to a partition stops the traversal at its boundary.
        let mut part_sel = Selection::default();
        let part: BTreeSet<HopId> = [h2, h3].into_iter().collect();
        select_fuse_all(&f, &memo, &[h3], Some(&part), &cut, &mut part_sel);
        assert!(!part_sel.plans.contains_key(&h1));
    }

    #[test]
    fn selectors_reduce_the_memo_table_to_their_selection() {
        let (dag, [h1, h2, h3]) = sum_xyz();
        let f = view(&dag);
        for s in [&FuseAll as &dyn PlanSelector, &FuseNoRedundancy] {
            let mut memo = explore(&f, &ExploreOptions::default());
            let sel = s.select(&f, &mut memo).unwrap();
            assert_eq!(sel.roots.keys().copied().collect::<Vec<_>>(), [h3]);
            assert_eq!(memo.hops().collect::<Vec<_>>(), [h1, h2, h3]);
            assert!(memo.hops().all(|h| memo.count_entries(h) == 1));
            assert!(sel
                .explain()
                .starts_with(&format!("selection ({}): 1 operators", s.name())));
        }
    }
}
