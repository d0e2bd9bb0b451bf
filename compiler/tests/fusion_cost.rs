//! Cost-based selection (`gen`, paper section 4) on the paper's running patterns: the
//! selected operators, their modelled cost, and the comparison with the heuristics.

use lafuse_compiler::fusion::cost::{cost_of, flops};
use lafuse_compiler::fusion::{
    explore, plan_fusion, CostBased, CostModel, ExploreOptions, FuseAll, FuseNoRedundancy,
    FusionDag, PlanSelector, TemplateKind,
};
use lafuse_compiler::hops::{AggOp, BinaryOp, DagBuilder, Direction, HopDag, HopId};

fn sum_xyz() -> (HopDag, HopId) {
    let (m, n) = (100_000, 1000);
    let mut b = DagBuilder::new();
    let x = b.input("X", m, n, m * n);
    let y = b.input("Y", m, n, m * n);
    let z = b.input("Z", m, n, m * n);
    let xy = b.binary(BinaryOp::Mul, x, y).unwrap();
    let xyz = b.binary(BinaryOp::Mul, xy, z).unwrap();
    let s = b.agg(AggOp::Sum, Direction::Full, xyz).unwrap();
    b.output("s", s).unwrap();
    (b.build().unwrap(), s)
}

#[test]
fn sum_of_a_product_is_one_cell_full_aggregate() {
    let (dag, s) = sum_xyz();
    let plan = plan_fusion(&dag, &CostBased::default()).unwrap();
    let sel = &plan.selection;
    assert_eq!(sel.selector, "gen");
    assert_eq!(sel.roots.len(), 1, "{}", sel.explain());
    let root = sel.root_plan(s).expect("sum roots the operator");
    assert_eq!(root.template, TemplateKind::Cell);
    assert!(root.is_closed());
    // Three inputs of 800 MB read once at 32 GiB/s dominate 3e8 FLOPs at 2 GFLOP/s? No: the
    // compute (2 multiplies + a 4-FLOP sum per cell = 6e8 FLOPs) takes 0.28 s, the reads
    // 2.4 GB / 32 GiB/s = 0.07 s, so the operator is compute-bound.
    let view = FusionDag::new(&dag).unwrap();
    let model = CostModel::default();
    let cells = 1e8;
    let expected = 8.0 / model.write_bandwidth
        + (6.0 * cells / model.compute_bandwidth).max(3.0 * 8.0 * cells / model.read_bandwidth);
    let cost = sel.cost.unwrap();
    assert!(
        (cost - expected).abs() <= 1e-9 * expected,
        "{cost} vs {expected}"
    );
    assert_eq!(cost, cost_of(&view, &model, sel));
    // The product's FLOP weights: 1 per cell for *, 4 per reduced cell for sum.
    assert_eq!(flops(&view, s), 4.0 * cells);
}

#[test]
fn row_pattern_is_one_row_operator() {
    // t(X) %*% (w * (X %*% v)): the row template's canonical pattern (paper Figure 1(b)).
    let (m, n) = (100_000, 1000);
    let mut b = DagBuilder::new();
    let x = b.input("X", m, n, m * n);
    let v = b.input("v", n, 1, n);
    let w = b.input("w", m, 1, m);
    let xv = b.matmul(x, v).unwrap();
    let p = b.binary(BinaryOp::Mul, w, xv).unwrap();
    let tx = b.transpose(x).unwrap();
    let r = b.matmul(tx, p).unwrap();
    b.output("r", r).unwrap();
    let dag = b.build().unwrap();
    let plan = plan_fusion(&dag, &CostBased::default()).unwrap();
    let sel = &plan.selection;
    assert_eq!(sel.roots.len(), 1, "{}", sel.explain());
    assert_eq!(sel.root_plan(r).unwrap().template, TemplateKind::Row);
    assert!(sel.plans[&xv]
        .iter()
        .all(|e| e.template == TemplateKind::Row));
}

#[test]
fn gen_is_never_worse_than_the_heuristics_on_a_shared_intermediate() {
    // P = X * Y is consumed by two aggregates and a materialized output.
    let (m, n) = (20_000, 1000);
    let mut b = DagBuilder::new();
    let x = b.input("X", m, n, m * n);
    let y = b.input("Y", m, n, m * n);
    let p = b.binary(BinaryOp::Mul, x, y).unwrap();
    let e = b.unary(lafuse_compiler::hops::UnaryOp::Exp, p).unwrap();
    let s1 = b.agg(AggOp::Sum, Direction::Full, e).unwrap();
    let q = b.binary(BinaryOp::Div, p, y).unwrap();
    let s2 = b.agg(AggOp::Sum, Direction::Row, q).unwrap();
    b.output("s1", s1).unwrap();
    b.output("s2", s2).unwrap();
    let dag = b.build().unwrap();
    let view = FusionDag::new(&dag).unwrap();
    let gen = CostBased::default();
    let mut memo = explore(&view, &ExploreOptions::default());
    let (sel, report) = gen.optimize(&view, &mut memo);
    assert!(report.stats.points >= 2, "{report:?}");
    assert!(report.stats.evaluated >= 2);
    let c_gen = sel.cost.unwrap();
    for h in [&FuseAll as &dyn PlanSelector, &FuseNoRedundancy] {
        let other = plan_fusion(&dag, h).unwrap().selection;
        let c = gen.cost_of(&view, &other);
        assert!(c_gen <= c * (1.0 + 1e-9), "{}: {c} < gen {c_gen}", h.name());
    }
}
