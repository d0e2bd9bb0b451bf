//! Property tests of exploration and heuristic selection over random DAGs built with
//! [`DagBuilder`]: random element-wise ops, aggregations, products, transposes, indexing and
//! n-ary ops over inputs whose shapes make every template reachable (including outer products
//! larger than 256×256 and sparse drivers). Ops whose shapes do not fit are skipped (the
//! builder rejects them), so every generated DAG is valid.

use lafuse_compiler::fusion::memo::MemoEntry;
use lafuse_compiler::fusion::select::prepare_for_selection;
use lafuse_compiler::fusion::{
    explore, plan_fusion, template, ExploreOptions, FuseAll, FuseNoRedundancy, FusionDag,
    MemoTable, TemplateKind,
};
use lafuse_compiler::hops::{BinaryOp, DagBuilder, HopId, OpKind};
use proptest::prelude::*;

mod fusion_common;
use fusion_common::{build, step, Step};

/// Every entry of the table is explained by its template's conditions at its hop.
fn check_entries(view: &FusionDag<'_>, memo: &MemoTable) -> Result<(), TestCaseError> {
    for (h, group) in memo.groups() {
        prop_assert!(view.is_reachable(h));
        let ins = view.inputs(h);
        for e in group {
            prop_assert!(
                e.template != TemplateKind::MAgg,
                "exploration never creates MAgg"
            );
            prop_assert_eq!(e.inputs.len(), ins.len());
            let tpl = template(e.template);
            // The close state is the template's verdict at h, and never closed-invalid.
            prop_assert_eq!(e.closed, tpl.close(view, h), "{} at {}", e, h);
            prop_assert!(e.closed != lafuse_compiler::fusion::CloseState::ClosedInvalid);
            // A closed plan fuses something (closed single operations are pruned).
            prop_assert!(!e.is_closed() || e.has_refs(), "{} at {}", e, h);
            // Every reference names the input at its position, which has an open plan the
            // template can absorb, and the template's fuse or merge condition holds.
            let mut fused_via_fuse = false;
            for (p, r) in e.refs() {
                prop_assert_eq!(r, ins[p]);
                prop_assert!(
                    memo.contains_open(r, &[e.template, TemplateKind::Cell]),
                    "{} at {}",
                    e,
                    h
                );
                let fuse = memo.contains_open(r, &[e.template]) && tpl.fuse(view, h, r);
                fused_via_fuse |= fuse;
                prop_assert!(fuse || tpl.merge(view, h, r), "{} at {}", e, h);
            }
            // A plan is either opened at h or extended from an input via fuse.
            prop_assert!(tpl.open(view, h) || fused_via_fuse, "{} at {}", e, h);
        }
    }
    Ok(())
}

fn covered(memo: &MemoTable, h: HopId) -> bool {
    memo.group(h).iter().any(MemoEntry::is_valid)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn exploration_and_heuristics_are_sound(
        steps in prop::collection::vec(step(), 1..24),
        x_kind in 0u8..3,
        outputs in prop::collection::vec(any::<usize>(), 0..3),
    ) {
        // X sparse, dense, or of unknown size.
        let x_nnz = [Some(840), Some(300 * 280), None][x_kind as usize];
        let dag = build(&steps, x_nnz, &outputs);
        let view = FusionDag::new(&dag).unwrap();
        for prune_dominated in [false, true] {
            let options = ExploreOptions { prune_dominated, ..ExploreOptions::default() };
            let memo = explore(&view, &options);
            check_entries(&view, &memo)?;
            // Deterministic: the same DAG gives the same bytes.
            prop_assert_eq!(memo.explain(&dag), explore(&view, &options).explain(&dag));
        }

        for fnr in [false, true] {
            let plan = if fnr {
                plan_fusion(&dag, &FuseNoRedundancy).unwrap()
            } else {
                plan_fusion(&dag, &FuseAll).unwrap()
            };
            let sel = &plan.selection;
            // The memo table is reduced to exactly the selection.
            let groups: Vec<HopId> = plan.memo.hops().collect();
            let selected: Vec<HopId> = sel.plans.keys().copied().collect();
            prop_assert_eq!(groups, selected);
            for (&h, entries) in &sel.plans {
                for e in entries {
                    // Selected entries come from the explored table.
                    prop_assert!(plan.explored.contains_entry(h, e), "{} at {}", e, h);
                    // Every reference is resolved by a compatible selected plan of the input.
                    for (_, r) in e.refs() {
                        let inner = sel.plans.get(&r).map(|v| v.as_slice()).unwrap_or(&[]);
                        prop_assert!(
                            inner.iter().any(|x| e.template.can_absorb(x.template)),
                            "{} at {} references {} without a plan", e, h, r
                        );
                        if fnr {
                            prop_assert!(view.num_consumers(r) <= 1, "FNR fused shared {}", r);
                        }
                    }
                }
            }
            // Operator roots have a valid plan, which is among the hop's selected plans.
            for (r, e) in &sel.roots {
                prop_assert!(e.is_valid(), "root {} with invalid plan {}", r, e);
                prop_assert!(sel.plans[r].contains(e));
            }
            // Coverage: every hop that still has a valid plan after the selection's
            // preparation (and is not excluded) is part of some selected operator.
            let mut prepared = plan.explored.clone();
            prepare_for_selection(&view, &mut prepared, true);
            if fnr {
                for h in prepared.hops().collect::<Vec<_>>() {
                    prepared.retain(h, |e| e.refs().all(|(_, c)| view.num_consumers(c) <= 1));
                }
                prepared.prune_dangling_references(&view);
            }
            for h in prepared.hops() {
                if covered(&prepared, h) && !prepared.is_excluded(h) {
                    prop_assert!(sel.plans.contains_key(&h), "hop {} has plans but none selected", h);
                }
            }
        }
    }
}

/// Guards against a vacuous property test: the generator must reach every explored template
/// and produce DAGs with several plans, including Outer plans valid over a sparse driver.
#[test]
fn generator_reaches_every_template() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    let strategy = prop::collection::vec(step(), 1..24);
    let mut seen = std::collections::BTreeSet::new();
    let mut valid_outer = false;
    let mut entries = 0;
    for _ in 0..2000 {
        let steps = strategy.new_tree(&mut runner).unwrap().current();
        let dag = build(&steps, Some(840), &[]);
        let view = FusionDag::new(&dag).unwrap();
        let memo = explore(&view, &ExploreOptions::default());
        entries += memo.num_entries();
        for (_, g) in memo.groups() {
            for e in g {
                seen.insert(e.template);
                valid_outer |= e.template == TemplateKind::Outer && e.is_valid();
            }
        }
    }
    assert!(seen.contains(&TemplateKind::Cell), "{seen:?}");
    assert!(seen.contains(&TemplateKind::Row), "{seen:?}");
    assert!(seen.contains(&TemplateKind::Outer), "{seen:?}");
    assert!(valid_outer, "no valid Outer plan generated");
    assert!(entries > 6_000, "only {entries} entries in 2000 DAGs");
}

/// Found by the property test: with fuse-no-redundancy, `t(Q)` loses its only plan (it fuses
/// the shared Q = c + 2), so the dot product `t(Q) %*% cumsum(Q)` must not keep a plan that
/// references it.
#[test]
fn fnr_drops_plans_over_inputs_that_lost_theirs() {
    let s = |op, a, b| Step { op, a, b, c: 0 };
    let steps = [
        s(1, 112925559096, 1485131448775846585),
        s(13, 12084264683405524, 208612841176560739),
        s(8, 2477783872490144341, 0),
        s(14, 6010583240002347286, 0),
        s(0, 0, 0),
        s(6, 4965570666365482982, 3952385126574928664),
    ];
    let dag = build(&steps, Some(300 * 280), &[]);
    let dot = dag.outputs()[0].1;
    let t = dag.hop(dot).inputs[0];
    assert!(matches!(dag.hop(t).op, OpKind::Reorg(_)));
    let fa = plan_fusion(&dag, &FuseAll).unwrap().selection;
    assert_eq!(
        fa.root_plan(dot).unwrap().to_string(),
        format!("C({t},-1)|c")
    );
    let fnr = plan_fusion(&dag, &FuseNoRedundancy).unwrap().selection;
    assert!(!fnr.plans.contains_key(&dot), "{}", fnr.explain());
}

/// Exploration and selection are linear: a chain of 2000 element-wise ops (each reading the
/// previous result and X) explores and selects quickly, every op with its Row and Cell plans.
#[test]
fn long_chains_explore_in_linear_time() {
    let mut b = DagBuilder::new();
    let x = b.input("X", 1000, 100, 100_000);
    let mut h = x;
    for i in 0..2000 {
        let op = [BinaryOp::Add, BinaryOp::Mul, BinaryOp::Sub][i % 3];
        h = b.binary(op, h, x).unwrap();
    }
    b.output("Y", h).unwrap();
    let dag = b.build().unwrap();
    let start = std::time::Instant::now();
    let plan = plan_fusion(&dag, &FuseAll).unwrap();
    assert_eq!(plan.explored.num_groups(), 2000);
    assert_eq!(plan.selection.roots.len(), 1);
    // Generous bound (debug build, shared machine): quadratic behaviour would take minutes.
    assert!(start.elapsed().as_secs() < 20, "{:?}", start.elapsed());
}
