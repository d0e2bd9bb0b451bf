//! Property tests of the cost-based selector (`gen`, paper section 4) over random DAGs (the
//! generator of `fusion_proptest.rs`): the chosen plan is optimal against a brute-force
//! enumeration of every assignment of interesting points, cost pruning never changes the
//! chosen cost, and `gen` never costs more than fuse-all or fuse-no-redundancy under the same
//! model.

use lafuse_compiler::fusion::cost::cost_of;
use lafuse_compiler::fusion::select::cost_based::{
    assignment, partition_cost, selection_for, PartitionResult,
};
use lafuse_compiler::fusion::{
    explore, plan_fusion, CostBased, CostModel, ExploreOptions, FuseAll, FuseNoRedundancy,
    FusionDag,
};
use lafuse_compiler::hops::{
    AggOp, BinaryOp, CumulativeOp, DagBuilder, Direction, HopDag, HopId, NaryOp, OpKind, TernaryOp,
    UnaryOp,
};
use proptest::prelude::*;

/// Partitions with more points are not brute-forced (2^14 plans per case at most).
const MAX_BRUTE_POINTS: usize = 14;

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1e-30)
}

/// One step of DAG construction: an op code and three operand picks (indices into the pool
/// of hops built so far, taken modulo its length).
#[derive(Clone, Debug)]
struct Step {
    op: u8,
    a: usize,
    b: usize,
    c: usize,
}

fn step() -> impl Strategy<Value = Step> {
    (0u8..18, any::<usize>(), any::<usize>(), any::<usize>()).prop_map(|(op, a, b, c)| Step {
        op,
        a,
        b,
        c,
    })
}

/// Builds a DAG from the steps; `outputs` picks which pool hops become block outputs.
/// With `x_nnz` of `None`, X's sizes are unknown (fusion must stay conservative, not panic).
fn build(steps: &[Step], x_nnz: Option<u64>, outputs: &[usize]) -> HopDag {
    let (m, n, k) = (300, 280, 3);
    let mut b = DagBuilder::new();
    let x = match x_nnz {
        Some(z) => b.input("X", m, n, z),
        None => b.input_with("X", None, Some(n), None),
    };
    let mut pool: Vec<HopId> = vec![
        x,
        b.input("Y", m, n, m * n),
        b.input("U", m, k, m * k),
        b.input("V", n, k, n * k),
        b.input("c", m, 1, m),
        b.input("r", 1, n, n),
        b.input("w", n, 1, n),
        b.literal_f64(0.0),
        b.literal_f64(2.0),
    ];
    for s in steps {
        let pick = |i: usize| pool[i % pool.len()];
        // The first operand is one of the four most recent hops, so that chains form.
        let recent = pool.len() - 1 - s.a % 4.min(pool.len());
        let (a, x, y) = (pool[recent], pick(s.b), pick(s.c));
        let r = match s.op {
            0 => b.unary(UnaryOp::ALL[s.b % UnaryOp::ALL.len()], a),
            1..=3 => b.binary(BinaryOp::ALL[s.c % BinaryOp::ALL.len()], a, x),
            4 => b.binary(BinaryOp::Mul, a, x),
            5 => b.agg(
                [AggOp::Sum, AggOp::Min, AggOp::Max, AggOp::Mean][s.b % 4],
                [Direction::Full, Direction::Row, Direction::Col][s.c % 3],
                a,
            ),
            6 | 7 => b.matmul(a, x),
            8 => b.transpose(a),
            9 => b.matmul(a, x).and_then(|p| b.transpose(p)),
            10 => {
                let dims = b.dag().hop(a).dims();
                match dims {
                    Some((r, c)) if c > 1 => b.index(a, (1, r), (1, 1 + (s.b as u64 % (c - 1)))),
                    _ => continue,
                }
            }
            11 => b.ternary(TernaryOp::IfElse, a, x, y),
            12 => b.add(OpKind::Nary(NaryOp::Max), &[a, x, y]),
            13 => b.add(OpKind::Nary(NaryOp::Cbind), &[a, x]),
            14 => b.add(OpKind::Cumulative(CumulativeOp::Cumsum), &[a]),
            15 => b.binary(BinaryOp::Ne, a, pool[7]),
            // U %*% t(V): an outer product larger than 256x256 (the Outer template's start).
            _ => b.transpose(pool[3]).and_then(|vt| b.matmul(pool[2], vt)),
        };
        if let Ok(h) = r {
            pool.push(h);
        }
    }
    let last = *pool.last().unwrap();
    let mut outs = vec![last];
    outs.extend(outputs.iter().map(|&i| pool[i % pool.len()]));
    outs.sort();
    outs.dedup();
    for (i, o) in outs.into_iter().enumerate() {
        b.output(&format!("o{i}"), o).unwrap();
    }
    b.build().unwrap()
}

/// Checks (a) optimality against brute force, (b) pruning-independence and (c) dominance over
/// the heuristics on one DAG; returns the number of interesting points it searched.
fn check_gen(dag: &HopDag) -> Result<usize, TestCaseError> {
    let view = FusionDag::new(dag).unwrap();
    let model = CostModel::default();
    let explored = explore(&view, &ExploreOptions::default());

    let gen = CostBased::default();
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

    // (b) Without cost pruning (and plan cache) the chosen cost is the same.
    let mut exhaustive = CostBased::default();
    exhaustive.cost_pruning = false;
    exhaustive.plan_caching = false;
    exhaustive.structural_pruning = false;
    let (sel2, report2) = exhaustive.optimize(&view, &mut explored.clone());
    prop_assert!(
        close(c_gen, sel2.cost.unwrap()),
        "{} vs {}",
        c_gen,
        sel2.cost.unwrap()
    );
    for (a, b) in report.partitions.iter().zip(&report2.partitions) {
        prop_assert!(close(a.cost, b.cost));
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
    eprintln!(
        "DBG points={} skipped={} eval={}",
        report.stats.points, report.stats.skipped_by_cost, report.stats.evaluated
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
