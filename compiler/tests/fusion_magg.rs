//! Across-partition MultiAggs (reference 4.7, second half): full aggregates in different plan
//! partitions that read a common input share one scan under the cost-based policy `gen`, and
//! only there (the heuristics never create MultiAggs, as in SystemDS).

use lafuse_compiler::fusion::cplan::construct_cplans;
use lafuse_compiler::fusion::{
    plan_fusion, CostBased, CostModel, FuseAll, FuseNoRedundancy, PlanSelector, TemplateKind,
};
use lafuse_compiler::hops::{AggOp, BinaryOp, DagBuilder, Direction, HopDag, HopId};

/// The fused operators' `(template, variant, outputs)` under `policy`.
fn operators(dag: &HopDag, policy: &dyn PlanSelector) -> Vec<(String, String, Vec<HopId>)> {
    let plan = plan_fusion(dag, policy).unwrap();
    let prog = construct_cplans(dag, &plan.memo, &plan.selection).unwrap();
    prog.operators
        .iter()
        .map(|o| {
            (
                o.cplan.template.name().to_string(),
                o.cplan.template.variant(),
                o.outputs.clone(),
            )
        })
        .collect()
}

fn magg_count(ops: &[(String, String, Vec<HopId>)]) -> usize {
    ops.iter().filter(|o| o.0 == "magg").count()
}

/// `a = sum(X*Y); b = sum(X*Z); print(a + b)` over 1000×100 inputs X, Y, Z of `nnz`
/// non-zeros each (the paper's Figure 9(c) multi-aggregate), with the hops X, Y, Z, a, b.
fn two_sums_sharing_x(nnz: [u64; 3]) -> (HopDag, [HopId; 5]) {
    let mut b = DagBuilder::new();
    let [x, y, z] =
        [("X", nnz[0]), ("Y", nnz[1]), ("Z", nnz[2])].map(|(n, k)| b.input(n, 1000, 100, k));
    let xy = b.binary(BinaryOp::Mul, x, y).unwrap();
    let xz = b.binary(BinaryOp::Mul, x, z).unwrap();
    let s1 = b.agg(AggOp::Sum, Direction::Full, xy).unwrap();
    let s2 = b.agg(AggOp::Sum, Direction::Full, xz).unwrap();
    let s = b.binary(BinaryOp::Add, s1, s2).unwrap();
    b.output("s", s).unwrap();
    (b.build().unwrap(), [x, y, z, s1, s2])
}

/// Figure 9(c) over dense inputs.
#[test]
fn two_sums_sharing_x_become_one_multi_aggregate_under_gen() {
    let (dag, [_, _, _, s1, s2]) = two_sums_sharing_x([100_000; 3]);

    let gen = operators(&dag, &CostBased::default());
    assert_eq!(gen.len(), 1, "{gen:?}");
    assert_eq!(gen[0].0, "magg");
    assert_eq!(gen[0].1, "full_agg");
    assert_eq!(gen[0].2, vec![s1, s2]);
    // One operator reading X once: never dearer than two Cell operators, and strictly
    // cheaper where reads dominate (here compute-bound by default, so a tie).
    let view = lafuse_compiler::fusion::FusionDag::new(&dag).unwrap();
    let fa = plan_fusion(&dag, &FuseAll).unwrap();
    let fast_cpu = CostBased::new(CostModel {
        compute_bandwidth: 1e13,
        ..CostModel::default()
    });
    for gen in [CostBased::default(), fast_cpu] {
        let plan = plan_fusion(&dag, &gen).unwrap();
        assert_eq!(plan.selection.roots[&s1].template, TemplateKind::MAgg);
        let (with, without) = (
            plan.selection.cost.unwrap(),
            gen.cost_of(&view, &fa.selection),
        );
        assert!(with <= without * (1.0 + 1e-12), "{with} vs {without}");
        if gen.model.compute_bandwidth > 1e12 {
            assert!(with < 0.8 * without, "{with} vs {without}");
        }
    }

    for heuristic in [&FuseAll as &dyn PlanSelector, &FuseNoRedundancy] {
        let ops = operators(&dag, heuristic);
        assert_eq!(magg_count(&ops), 0, "{}: {ops:?}", heuristic.name());
        assert_eq!(ops.len(), 2);
    }
}

#[test]
fn an_unfused_aggregate_joins_and_a_third_group_member_is_capped() {
    // sum(X*Y), sum(X*Z), sum(X), max(X*W): four aggregates over X; at most three share a scan.
    let mut b = DagBuilder::new();
    let x = b.input("X", 500, 40, 20_000);
    let y = b.input("Y", 500, 40, 20_000);
    let z = b.input("Z", 500, 40, 20_000);
    let w = b.input("W", 500, 40, 20_000);
    let xy = b.binary(BinaryOp::Mul, x, y).unwrap();
    let xz = b.binary(BinaryOp::Mul, x, z).unwrap();
    let xw = b.binary(BinaryOp::Mul, x, w).unwrap();
    let s1 = b.agg(AggOp::Sum, Direction::Full, xy).unwrap();
    let s2 = b.agg(AggOp::Sum, Direction::Full, xz).unwrap();
    let s3 = b.agg(AggOp::Sum, Direction::Full, x).unwrap();
    let s4 = b.agg(AggOp::Max, Direction::Full, xw).unwrap();
    let t1 = b.binary(BinaryOp::Add, s1, s2).unwrap();
    let t2 = b.binary(BinaryOp::Add, s3, s4).unwrap();
    let t = b.binary(BinaryOp::Add, t1, t2).unwrap();
    b.output("t", t).unwrap();
    let dag = b.build().unwrap();
    let ops = operators(&dag, &CostBased::default());
    let maggs: Vec<_> = ops.iter().filter(|o| o.0 == "magg").collect();
    assert_eq!(maggs.len(), 1, "{ops:?}");
    assert_eq!(maggs[0].2.len(), 3, "{ops:?}");
    // Every aggregate is computed exactly once.
    let mut outs: Vec<HopId> = ops.iter().flat_map(|o| o.2.clone()).collect();
    outs.sort_unstable();
    outs.dedup();
    let all: Vec<HopId> = ops.iter().flat_map(|o| o.2.clone()).collect();
    assert_eq!(outs.len(), all.len(), "{ops:?}");
}

#[test]
fn no_multi_aggregate_without_a_shared_input_a_common_size_or_independence() {
    // Disjoint inputs: nothing to share.
    let mut b = DagBuilder::new();
    let x = b.input("X", 1000, 100, 100_000);
    let y = b.input("Y", 1000, 100, 100_000);
    let z = b.input("Z", 1000, 100, 100_000);
    let w = b.input("W", 1000, 100, 100_000);
    let xy = b.binary(BinaryOp::Mul, x, y).unwrap();
    let zw = b.binary(BinaryOp::Mul, z, w).unwrap();
    let s1 = b.agg(AggOp::Sum, Direction::Full, xy).unwrap();
    let s2 = b.agg(AggOp::Sum, Direction::Full, zw).unwrap();
    let s = b.binary(BinaryOp::Add, s1, s2).unwrap();
    b.output("s", s).unwrap();
    let dag = b.build().unwrap();
    assert_eq!(magg_count(&operators(&dag, &CostBased::default())), 0);

    // A shared input but different scan sizes: sum(X*c) iterates 1000×100 cells, sum(c*d)
    // 1000×1; one scan cannot serve both.
    let mut b = DagBuilder::new();
    let x = b.input("X", 1000, 100, 100_000);
    let c = b.input("c", 1000, 1, 1000);
    let d = b.input("d", 1000, 1, 1000);
    let xc = b.binary(BinaryOp::Mul, x, c).unwrap();
    let s1 = b.agg(AggOp::Sum, Direction::Full, xc).unwrap();
    let cd = b.binary(BinaryOp::Mul, c, d).unwrap();
    let s2 = b.agg(AggOp::Sum, Direction::Full, cd).unwrap();
    let s = b.binary(BinaryOp::Add, s1, s2).unwrap();
    b.output("s", s).unwrap();
    let dag = b.build().unwrap();
    assert_eq!(magg_count(&operators(&dag, &CostBased::default())), 0);

    // A dependency: sum(X * sum(X*Y)) reads sum(X*Y); they cannot be computed in one scan.
    let mut b = DagBuilder::new();
    let x = b.input("X", 1000, 100, 100_000);
    let y = b.input("Y", 1000, 100, 100_000);
    let xy = b.binary(BinaryOp::Mul, x, y).unwrap();
    let s1 = b.agg(AggOp::Sum, Direction::Full, xy).unwrap();
    let xs = b.binary(BinaryOp::Mul, x, s1).unwrap();
    let s2 = b.agg(AggOp::Sum, Direction::Full, xs).unwrap();
    b.output("s", s2).unwrap();
    let dag = b.build().unwrap();
    assert_eq!(magg_count(&operators(&dag, &CostBased::default())), 0);
}

/// The main input of a summing operator is a sparse input every output is zero at, so that it
/// visits only that input's non-zeros (SystemDS's shared sparse-safe driver): X for
/// `sum(X*Y), sum(X*Z)` and for `sum(X * (Y + 1))`, though Y is the sparsest input. Driven by
/// Y, the MultiAgg's second sum (not zero where Y is) made it visit every cell.
#[test]
fn a_summing_operator_is_driven_by_the_sparse_input_every_output_is_zero_at() {
    use lafuse_compiler::fusion::cplan::TemplateSpec;
    let (two_sums, [x, ..]) = two_sums_sharing_x([1000, 900, 1000]);

    let mut b = DagBuilder::new();
    let (x2, y2) = (b.input("X", 1000, 100, 1000), b.input("Y", 1000, 100, 900));
    let one = b.literal_f64(1.0);
    let y1 = b.binary(BinaryOp::Add, y2, one).unwrap();
    let xy1 = b.binary(BinaryOp::Mul, x2, y1).unwrap();
    let t = b.agg(AggOp::Sum, Direction::Full, xy1).unwrap();
    b.output("t", t).unwrap();
    let shifted = b.build().unwrap();

    for (dag, x, template) in [(&two_sums, x, "magg"), (&shifted, x2, "cell")] {
        let plan = plan_fusion(dag, &CostBased::default()).unwrap();
        let prog = construct_cplans(dag, &plan.memo, &plan.selection).unwrap();
        assert_eq!(prog.operators.len(), 1, "{}", prog.explain());
        let op = &prog.operators[0];
        assert_eq!(op.cplan.template.name(), template);
        assert_eq!(op.inputs[0], x, "main input:\n{}", prog.explain());
        let sparse_safe = match &op.cplan.template {
            TemplateSpec::MAgg { sparse_safe, .. } | TemplateSpec::Cell { sparse_safe, .. } => {
                *sparse_safe
            }
            other => panic!("{other:?}"),
        };
        assert!(sparse_safe, "{}", prog.explain());
    }
}
