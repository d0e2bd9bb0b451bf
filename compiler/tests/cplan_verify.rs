//! The CPlan verifier (`fusion::cplan::verify`): one test per invariant, each a valid plan
//! broken in exactly that respect and rejected with a message naming it; and every plan the
//! construction builds, from the golden fixtures and from random DAGs under every policy,
//! passes (construction runs the verifier itself and fails on a bad plan, so these also pin
//! that construction never does).

mod fusion_common;
mod hops_common;

use lafuse_compiler::fusion::cplan::{
    construct_cplans, count_vector_intermediates, verify, Access, CNode, CPlan, FusedProgram,
    InputKind, OuterType, RowType, TemplateSpec,
};
use lafuse_compiler::fusion::template::{CellAgg, CellType};
use lafuse_compiler::fusion::{plan_fusion, CostBased, FuseAll, FuseNoRedundancy, PlanSelector};
use lafuse_compiler::hops::{AggOp, BinaryOp, HopDag, Literal, NaryOp, UnaryOp};
use proptest::prelude::*;

fn data(input: usize, access: Access) -> CNode {
    CNode::Data { input, access }
}

fn lit(v: f64) -> CNode {
    CNode::Literal {
        value: Literal::Double(v),
    }
}

fn bin(f: BinaryOp, a: usize, b: usize) -> CNode {
    CNode::Binary { f, a, b }
}

/// `sum(X * 3)`: a sparse-safe full-aggregate Cell plan.
fn cell_plan() -> CPlan {
    CPlan {
        template: TemplateSpec::Cell {
            cell_type: CellType::FullAgg,
            agg: Some(CellAgg::Sum),
            sparse_safe: true,
        },
        inputs: vec![InputKind::Matrix],
        nodes: vec![data(0, Access::Main), lit(3.0), bin(BinaryOp::Mul, 0, 1)],
        outputs: vec![2],
    }
}

/// `sum(X * Y)` and `max(exp(X))` over one scan.
fn magg_plan() -> CPlan {
    CPlan {
        template: TemplateSpec::MAgg {
            aggs: vec![CellAgg::Sum, CellAgg::Max],
            sparse_safe: false,
        },
        inputs: vec![InputKind::Matrix, InputKind::Matrix],
        nodes: vec![
            data(0, Access::Main),
            data(1, Access::Aligned),
            bin(BinaryOp::Mul, 0, 1),
            CNode::Unary {
                f: UnaryOp::Exp,
                x: 0,
            },
        ],
        outputs: vec![2, 3],
    }
}

/// A Row plan over `nodes` with an exact vector count.
fn row(row_type: RowType, inputs: Vec<InputKind>, nodes: Vec<CNode>, out: usize) -> CPlan {
    CPlan {
        template: TemplateSpec::Row {
            row_type,
            num_vectors: count_vector_intermediates(&nodes, &[out]),
        },
        inputs,
        nodes,
        outputs: vec![out],
    }
}

/// `rowSums(X %*% B) * s`: a row aggregate of a row-times-matrix, times a scalar.
fn row_plan() -> CPlan {
    let m = InputKind::Matrix;
    row(
        RowType::RowAgg,
        vec![m, m, InputKind::Scalar],
        vec![
            data(0, Access::Main),
            data(1, Access::Whole),
            CNode::VectMatMult { a: 0, b: 1 },
            CNode::RowAgg {
                f: AggOp::Sum,
                x: 2,
            },
            data(2, Access::Scalar),
            bin(BinaryOp::Mul, 3, 4),
        ],
        5,
    )
}

/// `t(X) %*% exp(X)` accumulated row by row.
fn row_outer_plan() -> CPlan {
    row(
        RowType::ColAggB1T,
        vec![InputKind::Matrix],
        vec![
            data(0, Access::Main),
            CNode::Unary {
                f: UnaryOp::Exp,
                x: 0,
            },
            CNode::OuterMultAdd { a: 0, b: 1 },
        ],
        2,
    )
}

/// `X * log(U %*% t(V))`, then `sum`, the cells themselves, or the final product with `W`.
fn outer_plan(outer_type: OuterType) -> CPlan {
    let mut nodes = vec![
        data(0, Access::Main),
        data(1, Access::OuterU),
        data(2, Access::OuterV),
        CNode::OuterDot { u: 1, v: 2 },
        CNode::Unary {
            f: UnaryOp::Log,
            x: 3,
        },
        bin(BinaryOp::Mul, 0, 4),
    ];
    let mut inputs = vec![InputKind::Matrix; 3];
    if matches!(
        outer_type,
        OuterType::Left | OuterType::LeftT | OuterType::Right
    ) {
        inputs.push(InputKind::Matrix);
        nodes.push(data(3, Access::Whole));
        nodes.push(CNode::FinalProduct { g: 5, w: 6 });
    }
    let out = nodes.len() - 1;
    CPlan {
        template: TemplateSpec::Outer { outer_type },
        inputs,
        nodes,
        outputs: vec![out],
    }
}

fn valid_plans() -> Vec<CPlan> {
    let mut plans = vec![cell_plan(), magg_plan(), row_plan(), row_outer_plan()];
    for t in [
        OuterType::CellWise,
        OuterType::FullAgg,
        OuterType::Left,
        OuterType::LeftT,
        OuterType::Right,
    ] {
        plans.push(outer_plan(t));
    }
    plans
}

/// `plan` is rejected with a message containing `fragment`.
#[track_caller]
fn rejects(plan: &CPlan, fragment: &str) {
    match verify(plan) {
        Ok(()) => panic!("accepted, expected {fragment:?}:\n{}", plan.explain()),
        Err(e) => assert!(
            e.to_string().contains(fragment),
            "{e} does not say {fragment:?}"
        ),
    }
}

#[test]
fn hand_built_plans_of_every_template_pass() {
    for p in valid_plans() {
        assert_eq!(verify(&p), Ok(()), "{}", p.explain());
    }
}

#[test]
fn errors_name_the_node_and_read_as_text() {
    let mut p = cell_plan();
    p.nodes[2] = bin(BinaryOp::Mul, 0, 7);
    let e = verify(&p).unwrap_err();
    assert_eq!(e.node, Some(2));
    assert_eq!(
        e.to_string(),
        "invalid CPlan at node %2: operand %7 is out of range (the plan has 3 nodes)"
    );
}

#[test]
fn a_plan_has_a_main_input() {
    let mut p = cell_plan();
    p.inputs.clear();
    rejects(&p, "the plan has no inputs");
}

#[test]
fn the_main_input_is_a_matrix() {
    let mut p = cell_plan();
    p.inputs[0] = InputKind::Scalar;
    rejects(&p, "the main input (input 0) is a scalar");
}

#[test]
fn cell_row_and_outer_plans_have_one_output() {
    let mut p = cell_plan();
    p.outputs = vec![2, 2];
    rejects(&p, "a cell plan has 1 output(s)");
    let mut p = row_plan();
    p.outputs.clear();
    rejects(&p, "a row plan has 1 output(s)");
    let mut p = outer_plan(OuterType::FullAgg);
    p.outputs.push(4);
    rejects(&p, "outer plan has 1 output(s)");
}

#[test]
fn a_multi_aggregate_has_one_output_per_aggregate_and_at_least_one() {
    let mut p = magg_plan();
    p.outputs.pop();
    rejects(
        &p,
        "a magg plan has 2 output(s) (one per aggregate), this one 1",
    );
    let mut p = magg_plan();
    if let TemplateSpec::MAgg { aggs, .. } = &mut p.template {
        aggs.clear();
    }
    p.outputs.clear();
    rejects(&p, "a MultiAgg plan has no aggregates");
    // Two aggregates of one body are one node read twice (`min(X)`, `max(X)`).
    let mut p = magg_plan();
    p.outputs = vec![0, 0];
    p.nodes.truncate(1);
    p.inputs.truncate(1);
    assert_eq!(verify(&p), Ok(()));
}

#[test]
fn outputs_are_nodes_of_the_plan() {
    let mut p = cell_plan();
    p.outputs = vec![3];
    rejects(&p, "output %3 is out of range (the plan has 3 nodes)");
}

#[test]
fn operands_are_in_range() {
    let mut p = row_plan();
    p.nodes[3] = CNode::RowAgg {
        f: AggOp::Sum,
        x: 99,
    };
    rejects(&p, "at node %3: operand %99 is out of range");
}

#[test]
fn operands_come_before_their_users() {
    // A node reading itself (a cycle) or a later node.
    let mut p = cell_plan();
    p.nodes[2] = bin(BinaryOp::Mul, 0, 2);
    rejects(&p, "at node %2: operand %2 does not come before its user");
    let mut p = cell_plan();
    p.nodes.swap(1, 2);
    p.nodes[1] = bin(BinaryOp::Mul, 0, 2);
    p.outputs = vec![1];
    rejects(&p, "at node %1: operand %2 does not come before its user");
}

#[test]
fn data_nodes_read_inputs_of_the_plan() {
    let mut p = magg_plan();
    p.nodes[1] = data(5, Access::Aligned);
    rejects(&p, "at node %1: reads input 5, but the plan has 2 inputs");
}

#[test]
fn only_input_zero_is_read_as_the_main_input() {
    let mut p = magg_plan();
    p.nodes[1] = data(1, Access::Main);
    rejects(&p, "input 1 is read as the main input, which is input 0");
}

#[test]
fn scalar_inputs_are_read_as_scalars() {
    let mut p = row_plan();
    p.nodes[4] = data(2, Access::RowVector);
    rejects(
        &p,
        "at node %4: scalar input 2 is read as RowVector, not as a scalar",
    );
}

#[test]
fn outer_product_factors_are_read_in_outer_plans_only() {
    let mut p = magg_plan();
    p.nodes[1] = data(1, Access::OuterV);
    rejects(&p, "an outer-product factor (OuterV) read in a magg plan");
}

#[test]
fn literals_are_doubles_finite_or_not() {
    for value in [
        Literal::Int(3),
        Literal::Bool(true),
        Literal::Str("a".into()),
    ] {
        let mut p = cell_plan();
        p.nodes[1] = CNode::Literal { value };
        rejects(&p, "at node %1: literal");
    }
    // Infinities and NaN are values DML computes with (`X * Inf`): they stay.
    for v in [f64::INFINITY, f64::NEG_INFINITY, f64::NAN] {
        let mut p = cell_plan();
        p.nodes[1] = lit(v);
        assert_eq!(verify(&p), Ok(()));
    }
}

#[test]
fn n_ary_nodes_have_enough_operands() {
    let mut p = cell_plan();
    p.nodes = vec![
        data(0, Access::Main),
        CNode::Nary {
            f: NaryOp::Max,
            xs: vec![0],
        },
    ];
    p.outputs = vec![1];
    rejects(&p, "n-ary max has 1 operands, at least 2 needed");
    let mut p = row_plan();
    p.nodes[5] = CNode::Nary {
        f: NaryOp::Cbind,
        xs: vec![],
    };
    rejects(&p, "n-ary cbind has 0 operands, at least 1 needed");
}

#[test]
fn node_kinds_are_those_of_the_template() {
    // Row work in a cell-wise plan, cell-wise relabelling in a Row plan, outer-product nodes
    // outside Outer plans, `cbind` outside Row plans, `rbind` anywhere.
    let mut p = cell_plan();
    p.nodes = vec![data(0, Access::Main), CNode::RowSumSq { x: 0 }];
    p.outputs = vec![1];
    rejects(&p, "at node %1: row_sumsq has no meaning in a cell plan");
    let mut p = row_plan();
    p.nodes[3] = CNode::Transpose { x: 2 };
    rejects(&p, "at node %3: t has no meaning in a row plan");
    let mut p = magg_plan();
    p.nodes[2] = CNode::DotCell { a: 0, b: 1 };
    assert_eq!(verify(&p), Ok(()));
    p.nodes[2] = CNode::FinalProduct { g: 0, w: 1 };
    rejects(
        &p,
        "at node %2: final_product has no meaning in a magg plan",
    );
    let mut p = magg_plan();
    p.nodes[2] = CNode::Nary {
        f: NaryOp::Cbind,
        xs: vec![0, 1],
    };
    rejects(&p, "n-ary cbind has no meaning in a magg plan");
    let mut p = row_plan();
    p.nodes[5] = CNode::Nary {
        f: NaryOp::Rbind,
        xs: vec![3, 4],
    };
    rejects(&p, "n-ary rbind has no meaning in a row plan");
}

#[test]
fn a_row_times_matrix_reads_a_whole_input() {
    let mut p = row_plan();
    p.nodes[1] = data(1, Access::Aligned);
    rejects(
        &p,
        "at node %2: the matrix of a row-times-matrix must be an input read as Whole, is %1",
    );
}

#[test]
fn the_outer_dot_product_reads_the_factors() {
    let mut p = outer_plan(OuterType::FullAgg);
    p.nodes[3] = CNode::OuterDot { u: 2, v: 1 };
    rejects(
        &p,
        "at node %3: the U of u_i · v_j must be an input read as OuterU",
    );
    let mut p = outer_plan(OuterType::FullAgg);
    p.nodes[3] = CNode::OuterDot { u: 1, v: 0 };
    rejects(
        &p,
        "the V of u_i · v_j must be an input read as OuterV or Whole",
    );
    // `U %*% V2` with V2 a whole k x n matrix (no transpose) is a dot product too.
    let mut p = outer_plan(OuterType::FullAgg);
    p.nodes[2] = data(2, Access::Whole);
    assert_eq!(verify(&p), Ok(()));
}

#[test]
fn a_final_product_reads_a_whole_input() {
    let mut p = outer_plan(OuterType::Right);
    p.nodes[6] = data(3, Access::Aligned);
    rejects(
        &p,
        "the matrix of a final product must be an input read as Whole",
    );
}

#[test]
fn outer_product_factors_are_read_by_the_dot_product_only() {
    let mut p = outer_plan(OuterType::FullAgg);
    p.nodes[4] = CNode::Unary {
        f: UnaryOp::Log,
        x: 1,
    };
    p.nodes[5] = bin(BinaryOp::Mul, 3, 4);
    rejects(
        &p,
        "at node %4: reads the outer-product factor %1 (OuterU) outside u_i · v_j",
    );
}

/// A Left product `t(U) %*% G` may read its matrix as the dot products' U (the transpose not
/// taken); a Right product, whose matrix is read by columns of the driver, may not.
#[test]
fn only_left_products_read_their_matrix_as_the_factor_u() {
    for ty in [OuterType::Left, OuterType::LeftT, OuterType::Right] {
        let mut p = outer_plan(ty);
        p.inputs.pop();
        p.nodes.truncate(6);
        p.nodes.push(CNode::FinalProduct { g: 5, w: 1 });
        p.outputs = vec![6];
        if ty == OuterType::Right {
            rejects(
                &p,
                "at node %6: reads the outer-product factor %1 (OuterU) outside u_i · v_j",
            );
        } else {
            verify(&p).unwrap_or_else(|e| panic!("{ty:?}: {e}\n{}", p.explain()));
        }
    }
}

#[test]
fn final_products_and_accumulations_are_outputs_only() {
    let mut p = outer_plan(OuterType::Right);
    p.nodes.push(CNode::Unary {
        f: UnaryOp::Exp,
        x: 7,
    });
    p.outputs = vec![8];
    rejects(
        &p,
        "at node %8: reads %7, a final_product, which only an output may be",
    );
    let mut p = row_outer_plan();
    p.nodes.push(CNode::RowSumSq { x: 2 });
    p.outputs = vec![3];
    rejects(
        &p,
        "reads %2, a outer_mult_add, which only an output may be",
    );
}

#[test]
fn every_node_is_reachable_from_an_output() {
    let mut p = cell_plan();
    p.nodes.push(CNode::Unary {
        f: UnaryOp::Exp,
        x: 0,
    });
    rejects(&p, "at node %3: is not reachable from any output");
}

#[test]
fn equal_nodes_are_one() {
    let mut p = cell_plan();
    p.nodes = vec![
        data(0, Access::Main),
        lit(3.0),
        lit(3.0),
        bin(BinaryOp::Mul, 0, 1),
        bin(BinaryOp::Mul, 3, 2),
    ];
    p.outputs = vec![4];
    rejects(&p, "at node %2: duplicates node %1");
    // Literals compare by bits: 0 and -0 differ.
    let mut p = cell_plan();
    p.nodes = vec![
        data(0, Access::Main),
        lit(0.0),
        lit(-0.0),
        bin(BinaryOp::Add, 0, 1),
        bin(BinaryOp::Mul, 3, 2),
    ];
    p.outputs = vec![4];
    assert_eq!(verify(&p), Ok(()));
}

#[test]
fn every_input_but_the_main_one_is_read() {
    let mut p = magg_plan();
    p.inputs.push(InputKind::Scalar);
    rejects(&p, "input 2 is never read");
    // The main input drives the iteration even where the body no longer reads it (an Outer
    // plan whose `X != 0` mask was simplified away).
    let mut p = outer_plan(OuterType::FullAgg);
    p.nodes = vec![
        data(1, Access::OuterU),
        data(2, Access::OuterV),
        CNode::OuterDot { u: 0, v: 1 },
        CNode::Unary {
            f: UnaryOp::Log,
            x: 2,
        },
    ];
    p.outputs = vec![3];
    assert_eq!(verify(&p), Ok(()), "{}", p.explain());
}

#[test]
fn a_cell_plan_aggregates_exactly_when_its_type_says_so() {
    let mut p = cell_plan();
    p.template = TemplateSpec::Cell {
        cell_type: CellType::NoAgg,
        agg: Some(CellAgg::Sum),
        sparse_safe: false,
    };
    rejects(&p, "cell type NoAgg with aggregation Some(Sum)");
    p.template = TemplateSpec::Cell {
        cell_type: CellType::RowAgg,
        agg: None,
        sparse_safe: false,
    };
    rejects(&p, "cell type RowAgg with aggregation None");
}

#[test]
fn sparse_safe_plans_only_sum() {
    let mut p = cell_plan();
    p.template = TemplateSpec::Cell {
        cell_type: CellType::ColAgg,
        agg: Some(CellAgg::Min),
        sparse_safe: true,
    };
    rejects(
        &p,
        "sparse-safe Cell plan with aggregation Some(Min), not a sum",
    );
    let mut p = magg_plan();
    p.template = TemplateSpec::MAgg {
        aggs: vec![CellAgg::SumSq, CellAgg::Max],
        sparse_safe: true,
    };
    rejects(
        &p,
        "sparse-safe MultiAgg plan with aggregates [SumSq, Max], not all sums",
    );
}

#[test]
fn an_outer_product_accumulation_is_the_output_of_exactly_the_outer_row_types() {
    let mut p = row_outer_plan();
    p.template = TemplateSpec::Row {
        row_type: RowType::NoAgg,
        num_vectors: 1,
    };
    rejects(&p, "row type no_agg with output outer_mult_add");
    let mut p = row_plan();
    p.template = TemplateSpec::Row {
        row_type: RowType::ColAggT,
        num_vectors: 1,
    };
    rejects(&p, "row type col_agg_t with output *");
}

#[test]
fn num_vectors_is_the_exact_count() {
    let mut p = row_plan();
    p.template = TemplateSpec::Row {
        row_type: RowType::RowAgg,
        num_vectors: 7,
    };
    rejects(&p, "num_vectors is 7, the body needs 1 row vectors");
}

#[test]
fn a_final_product_is_the_output_of_exactly_the_product_outer_types() {
    let mut p = outer_plan(OuterType::Left);
    p.template = TemplateSpec::Outer {
        outer_type: OuterType::FullAgg,
    };
    rejects(&p, "outer type full_agg with output final_product");
    let mut p = outer_plan(OuterType::CellWise);
    p.template = TemplateSpec::Outer {
        outer_type: OuterType::Right,
    };
    rejects(&p, "outer type right with output *");
}

#[test]
fn an_outer_plan_has_exactly_one_dot_product() {
    // Without one it is a Cell plan; with two the skeleton would hand both the same value.
    let mut p = outer_plan(OuterType::CellWise);
    p.nodes = vec![data(0, Access::Main), lit(2.0), bin(BinaryOp::Mul, 0, 1)];
    p.inputs.truncate(1);
    p.outputs = vec![2];
    rejects(&p, "an Outer plan has exactly one u_i · v_j, this one 0");
    let mut p = outer_plan(OuterType::CellWise);
    p.inputs.extend([InputKind::Matrix; 2]);
    p.nodes.truncate(5);
    p.nodes.extend([
        data(3, Access::OuterU),
        data(4, Access::OuterV),
        CNode::OuterDot { u: 5, v: 6 },
        bin(BinaryOp::Add, 4, 7),
        bin(BinaryOp::Mul, 0, 8),
    ]);
    p.outputs = vec![9];
    rejects(
        &p,
        "at node %7: an Outer plan has exactly one u_i · v_j, this one 2",
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Whatever a plan holds (ids anywhere, any kinds), the verifier answers without
    /// panicking, and accepts only plans whose operands precede their users.
    #[test]
    fn the_verifier_never_panics(
        picks in prop::collection::vec((0u8..10, 0usize..12, 0usize..12, 0usize..4), 0..10),
        template in 0usize..9,
        outputs in prop::collection::vec(0usize..12, 0..3),
        inputs in prop::collection::vec(any::<bool>(), 0..4),
    ) {
        let accesses = [Access::Main, Access::Aligned, Access::Whole, Access::OuterU];
        let nodes: Vec<CNode> = picks
            .iter()
            .map(|&(k, a, b, acc)| match k {
                0 => data(a % 5, accesses[acc]),
                1 => lit(a as f64),
                2 => CNode::Unary { f: UnaryOp::Exp, x: a },
                3 => bin(BinaryOp::Add, a, b),
                4 => CNode::Nary { f: NaryOp::Cbind, xs: vec![a, b] },
                5 => CNode::RowAgg { f: AggOp::Sum, x: a },
                6 => CNode::VectMatMult { a, b },
                7 => CNode::OuterMultAdd { a, b },
                8 => CNode::OuterDot { u: a, v: b },
                _ => CNode::FinalProduct { g: a, w: b },
            })
            .collect();
        let mut plan = valid_plans().swap_remove(template);
        plan.nodes = nodes;
        plan.outputs = outputs;
        plan.inputs = inputs
            .iter()
            .map(|&m| if m { InputKind::Matrix } else { InputKind::Scalar })
            .collect();
        if verify(&plan).is_ok() {
            for (i, n) in plan.nodes.iter().enumerate() {
                prop_assert!(n.operands().iter().all(|&o| o < i));
            }
        }
    }
}

// ---- every constructed plan passes -------------------------------------------------------

/// The fused operators of `dag` under `policy` (construction verifies each plan, so an
/// invalid one is an error here), each checked again.
fn constructed(dag: &HopDag, policy: &dyn PlanSelector) -> FusedProgram {
    let plan = plan_fusion(dag, policy).unwrap();
    let program = construct_cplans(dag, &plan.memo, &plan.selection)
        .unwrap_or_else(|e| panic!("{}: {}", policy.name(), e));
    for op in &program.operators {
        assert_eq!(verify(&op.cplan), Ok(()), "{}", op.cplan.explain());
    }
    program
}

fn policies() -> [Box<dyn PlanSelector>; 3] {
    [
        Box::new(FuseAll),
        Box::new(FuseNoRedundancy),
        Box::new(CostBased::default()),
    ]
}

#[test]
fn plans_built_from_the_fusion_fixtures_pass() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/fusion");
    let mut scripts: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "dml"))
        .collect();
    scripts.sort();
    assert!(scripts.len() >= 5, "{scripts:?}");
    let mut templates = std::collections::BTreeSet::new();
    for path in scripts {
        let text = std::fs::read_to_string(&path).unwrap();
        // Inputs declared by `# input NAME ROWS COLS NNZ` lines, as the golden memo test reads.
        let declared: Vec<(String, u64, u64, u64)> = text
            .lines()
            .filter_map(|l| l.trim().strip_prefix("# input "))
            .map(|rest| {
                let f: Vec<&str> = rest.split_whitespace().collect();
                let n = |s: &str| s.parse::<u64>().unwrap();
                (f[0].to_string(), n(f[1]), n(f[2]), n(f[3]))
            })
            .collect();
        let list: Vec<(&str, u64, u64, u64)> = declared
            .iter()
            .map(|(n, r, c, z)| (n.as_str(), *r, *c, *z))
            .collect();
        let dag = hops_common::dag(&text, &hops_common::matrices(&list));
        for policy in policies() {
            for op in constructed(&dag, policy.as_ref()).operators {
                templates.insert(op.cplan.template.name());
            }
        }
    }
    // The fixtures reach every template, so every template's invariants were exercised.
    assert_eq!(
        templates.into_iter().collect::<Vec<_>>(),
        ["cell", "magg", "outer", "row"]
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Random DAGs reaching every template (X sparse, dense, or of unknown size): every plan
    /// constructed under every policy passes.
    #[test]
    fn plans_built_from_random_dags_pass(
        steps in prop::collection::vec(fusion_common::step(), 1..24),
        x_kind in 0u8..3,
        outputs in prop::collection::vec(any::<usize>(), 0..3),
    ) {
        let x_nnz = [Some(840), Some(300 * 280), None][x_kind as usize];
        let dag = fusion_common::build(&steps, x_nnz, &outputs);
        for policy in policies() {
            constructed(&dag, policy.as_ref());
        }
    }
}
