//! Property tests of the cost-based selector (`gen`, paper section 4) over random DAGs (the
//! generator of `fusion_proptest.rs`): the chosen plan is optimal against a brute-force
//! enumeration of every assignment of interesting points, cost pruning never changes the
//! chosen cost, `gen` never costs more than fuse-all or fuse-no-redundancy under the same
//! model, and no plan costs less than the block's floor (`cost_floor`).

use lafuse_compiler::fusion::cost::cost_of;
use lafuse_compiler::fusion::select::cost_based::{
    assignment, partition_cost, selection_for, PartitionResult,
};
use lafuse_compiler::fusion::{
    cost_floor, explore, plan_fusion, CostBased, CostModel, ExploreOptions, FuseAll,
    FuseNoRedundancy, FusionDag, Selection,
};
use lafuse_compiler::hops::{AggOp, BinaryOp, DagBuilder, Direction, HopDag, HopId, UnaryOp};
use proptest::prelude::*;

mod fusion_common;
use fusion_common::{build, step, Step};

/// Partitions with more points are not brute-forced (2^14 plans per case at most).
const MAX_BRUTE_POINTS: usize = 14;

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1e-30)
}

/// Checks (a) optimality against brute force, (b) pruning-independence and (c) dominance over
/// the heuristics on one DAG; returns the number of interesting points it searched.
fn check_gen(dag: &HopDag) -> Result<usize, TestCaseError> {
    let view = FusionDag::new(dag).unwrap();
    let model = CostModel::default();
    let explored = explore(&view, &ExploreOptions::default());

    // The exact search: every partition this test brute-forces stays exact (the default
    // approximates partitions of more than `EXACT_MAX_POINTS` points).
    let gen = CostBased {
        exact_points: MAX_BRUTE_POINTS,
        ..CostBased::default()
    };
    let mut memo = explored.clone();
    let report = gen.search(&view, &mut memo);
    let prepared = memo.clone();
    let (sel, _) = gen.optimize(&view, &mut explored.clone());
    let c_gen = sel.cost.unwrap();
    prop_assert!(c_gen.is_finite() && c_gen >= 0.0);
    prop_assert!(close(c_gen, cost_of(&view, &model, &sel)));

    // (a) Per partition, the chosen cost is the brute-force minimum over all assignments.
    for r in &report.partitions {
        let n = r.partition.points.len();
        prop_assert_eq!(r.assignment.len(), n);
        prop_assert!(close(
            r.cost,
            partition_cost(&view, &prepared, &r.partition, &model, &r.assignment)
        ));
        if n > MAX_BRUTE_POINTS {
            continue;
        }
        let brute = (0..1u128 << n)
            .map(|i| partition_cost(&view, &prepared, &r.partition, &model, &assignment(i, n)))
            .fold(f64::INFINITY, f64::min);
        prop_assert!(
            close(r.cost, brute),
            "gen {} vs brute force {}",
            r.cost,
            brute
        );
    }
    // Partitions are independent: a whole plan costs the sum of its partitions' shares
    // plus a constant, so per-partition minima give the global minimum.
    let with = |f: &dyn Fn(&PartitionResult) -> Vec<bool>| {
        let rs: Vec<PartitionResult> = report
            .partitions
            .iter()
            .map(|r| PartitionResult {
                assignment: f(r),
                cost: partition_cost(&view, &prepared, &r.partition, &model, &f(r)),
                partition: r.partition.clone(),
            })
            .collect();
        let total = cost_of(&view, &model, &selection_for(&view, &prepared, &rs));
        total - rs.iter().map(|r| r.cost).sum::<f64>()
    };
    let k_best = with(&|r| r.assignment.clone());
    let k_none = with(&|r| vec![true; r.partition.points.len()]);
    let k_all = with(&|r| vec![false; r.partition.points.len()]);
    let scale = c_gen.max(1e-30);
    prop_assert!(
        (k_best - k_none).abs() <= 1e-9 * scale,
        "{} vs {}",
        k_best,
        k_none
    );
    prop_assert!(
        (k_best - k_all).abs() <= 1e-9 * scale,
        "{} vs {}",
        k_best,
        k_all
    );

    // (b) Without cost pruning (and plan cache) the chosen cost is the same, wherever the
    // search is exact: a partition of more points is searched under a budget, and which plans
    // the budget reaches depends on the pruning.
    let exhaustive = CostBased {
        cost_pruning: false,
        plan_caching: false,
        structural_pruning: false,
        exact_points: MAX_BRUTE_POINTS,
        ..CostBased::default()
    };
    let (sel2, report2) = exhaustive.optimize(&view, &mut explored.clone());
    let exact = |r: &PartitionResult| r.partition.points.len() <= MAX_BRUTE_POINTS;
    if report.partitions.iter().all(exact) {
        prop_assert!(
            close(c_gen, sel2.cost.unwrap()),
            "{} vs {}",
            c_gen,
            sel2.cost.unwrap()
        );
    }
    for (a, b) in report.partitions.iter().zip(&report2.partitions) {
        prop_assert!(!exact(a) || close(a.cost, b.cost));
    }
    prop_assert!(report2.stats.skipped_by_cost == 0 && report2.stats.skipped_by_structure == 0);

    // (c) gen is never worse than the heuristics under the same model.
    for fnr in [false, true] {
        let other = if fnr {
            plan_fusion(dag, &FuseNoRedundancy).unwrap().selection
        } else {
            plan_fusion(dag, &FuseAll).unwrap().selection
        };
        let c = cost_of(&view, &model, &other);
        prop_assert!(
            c_gen <= c * (1.0 + 1e-9),
            "fnr={}: {} < gen {}\n{}\n{}\n{}\n{}",
            fnr,
            c,
            c_gen,
            other.explain(),
            sel.explain(),
            explored.explain(dag),
            prepared.explain(dag)
        );
    }
    // (d) The block's floor, which the tiered engine trusts to defer a block without a
    // search, is below every plan: the optimum and the unfused one.
    let floor = cost_floor(&view, &model);
    let unfused = cost_of(&view, &model, &Selection::default());
    prop_assert!(
        floor >= 0.0 && floor <= c_gen * (1.0 + 1e-9),
        "floor {floor} > gen {c_gen}"
    );
    prop_assert!(
        floor <= unfused * (1.0 + 1e-9),
        "floor {floor} > unfused {unfused}"
    );
    Ok(report.stats.points)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn gen_is_optimal_and_never_worse_than_the_heuristics(
        steps in prop::collection::vec(step(), 1..24),
        x_kind in 0u8..3,
        outputs in prop::collection::vec(any::<usize>(), 0..3),
    ) {
        let x_nnz = [Some(840), Some(300 * 280), None][x_kind as usize];
        check_gen(&build(&steps, x_nnz, &outputs))?;
    }

    #[test]
    fn gen_is_optimal_on_dags_with_shared_intermediates(
        steps in prop::collection::vec(step(), 2..16),
        sparse in any::<bool>(),
        outputs in prop::collection::vec(any::<usize>(), 0..3),
    ) {
        check_gen(&build_shared(&steps, sparse, &outputs))?;
    }
}

/// A DAG of element-wise ops, aggregates and vector products over same-shaped matrices whose
/// operands are drawn from all earlier hops, so intermediates are shared (materialization
/// points) and Row, Cell and Outer plans compete.
fn build_shared(steps: &[Step], sparse: bool, outputs: &[usize]) -> HopDag {
    let (m, n, k) = (400, 300, 4);
    let mut b = DagBuilder::new();
    let nnz = if sparse { 1200 } else { m * n };
    let x = b.input("X", m, n, nnz);
    let y = b.input("Y", m, n, m * n);
    let v = b.input("v", n, 1, n);
    let u = b.input("U", m, k, m * k);
    let vv = b.input("V", n, k, n * k);
    let mut mats: Vec<HopId> = vec![x, y];
    let mut all: Vec<HopId> = vec![x, y];
    for s in steps {
        let a = mats[mats.len() - 1 - s.a % 3.min(mats.len())];
        let o = mats[s.b % mats.len()];
        let r = match s.op % 9 {
            0..=2 => b.binary(
                [BinaryOp::Mul, BinaryOp::Add, BinaryOp::Div, BinaryOp::Sub][s.c % 4],
                a,
                o,
            ),
            3 => b.unary([UnaryOp::Exp, UnaryOp::Abs, UnaryOp::Sigmoid][s.c % 3], a),
            4 => b.agg(
                AggOp::Sum,
                [Direction::Full, Direction::Row, Direction::Col][s.c % 3],
                a,
            ),
            5 => b.matmul(a, v),
            6 => b
                .transpose(vv)
                .and_then(|t| b.matmul(u, t))
                .and_then(|p| b.binary(BinaryOp::Mul, a, p)),
            7 => b.matmul(a, v).and_then(|p| b.binary(BinaryOp::Mul, o, p)),
            _ => b.binary(BinaryOp::Mul, a, a),
        };
        if let Ok(h) = r {
            all.push(h);
            if b.dag().hop(h).dims() == Some((m, n)) {
                mats.push(h);
            }
        }
    }
    let mut outs = vec![*all.last().unwrap()];
    outs.extend(outputs.iter().map(|&i| all[i % all.len()]));
    outs.sort();
    outs.dedup();
    for (i, o) in outs.into_iter().enumerate() {
        b.output(&format!("o{i}"), o).unwrap();
    }
    b.build().unwrap()
}
