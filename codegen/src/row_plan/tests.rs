//! Unit tests of the Row analysis.

use super::*;
use lafuse_compiler::fusion::cplan::{count_vector_intermediates, TemplateSpec};
use lafuse_compiler::hops::UnaryOp;

fn plan(row_type: RowType, inputs: usize, nodes: Vec<CNode>) -> CPlan {
    let out = nodes.len() - 1;
    CPlan {
        template: TemplateSpec::Row {
            row_type,
            num_vectors: count_vector_intermediates(&nodes, &[out]),
        },
        inputs: vec![InputKind::Matrix; inputs],
        nodes,
        outputs: vec![out],
    }
}

fn data(input: usize, access: Access) -> CNode {
    CNode::Data { input, access }
}

fn bin(f: BinaryOp, a: CNodeId, b: CNodeId) -> CNode {
    CNode::Binary { f, a, b }
}

fn lit(v: f64) -> CNode {
    CNode::Literal {
        value: Literal::Double(v),
    }
}

#[test]
fn sparse_nodes_are_those_zero_where_the_main_row_is_and_read_sparsely() {
    // t(W) %*% ((X != 0) * (Y - X)): the masked difference is 0 where X is.
    let nodes = vec![
        data(0, Access::Main),
        data(1, Access::Aligned),
        data(2, Access::Aligned),
        lit(0.0),
        bin(BinaryOp::Ne, 0, 3),
        bin(BinaryOp::Sub, 1, 0),
        bin(BinaryOp::Mul, 4, 5),
        CNode::OuterMultAdd { a: 2, b: 6 },
    ];
    let info = analyze(&plan(RowType::ColAggB1, 3, nodes), RowType::ColAggB1).unwrap();
    // `Y - X` is not 0 where X is, but its only reader needs it at X's non-zeros only;
    // nothing reads the row densely, so it is not scattered.
    assert!(
        info.sparse[4] && info.sparse[5] && info.sparse[6],
        "{:?}",
        info.sparse
    );
    assert!(!info.needs_dense_main);

    // (X * Y) * 2 + Y: the sum reads the product densely, so nothing is sparse.
    let nodes = vec![
        data(0, Access::Main),
        data(1, Access::Aligned),
        bin(BinaryOp::Mul, 0, 1),
        lit(2.0),
        bin(BinaryOp::Mul, 2, 3),
        bin(BinaryOp::Add, 4, 1),
    ];
    let info = analyze(&plan(RowType::NoAgg, 2, nodes), RowType::NoAgg).unwrap();
    assert!(!info.sparse.contains(&true), "{:?}", info.sparse);

    // rowSums(exp(X) * Y): exp(0) is 1, so the product is not 0 where X is.
    let nodes = vec![
        data(0, Access::Main),
        data(1, Access::Aligned),
        CNode::Unary {
            f: UnaryOp::Exp,
            x: 0,
        },
        bin(BinaryOp::Mul, 2, 1),
        CNode::RowAgg {
            f: AggOp::Sum,
            x: 3,
        },
    ];
    let info = analyze(&plan(RowType::RowAgg, 2, nodes), RowType::RowAgg).unwrap();
    assert!(!info.sparse.contains(&true), "{:?}", info.sparse);

    // rowSums((X * Y) * (Y / Y)): Y / Y may be NaN, so 0 times it is not 0.
    let nodes = vec![
        data(0, Access::Main),
        data(1, Access::Aligned),
        bin(BinaryOp::Mul, 0, 1),
        bin(BinaryOp::Div, 1, 1),
        bin(BinaryOp::Mul, 2, 3),
        CNode::RowAgg {
            f: AggOp::Sum,
            x: 4,
        },
    ];
    let info = analyze(&plan(RowType::RowAgg, 2, nodes), RowType::RowAgg).unwrap();
    assert!(!info.sparse.contains(&true), "{:?}", info.sparse);
}

#[test]
fn an_outer_update_by_a_computed_vector_scatters_the_main_row_on_demand_only() {
    // t(X) %*% (w * (X %*% v)): both readers of X take its non-zeros; the update's other side
    // is computed, so it may overflow, and only then is the row scattered.
    let nodes = vec![
        data(0, Access::Main),
        data(1, Access::Whole),
        data(2, Access::ColVector),
        CNode::VectMatMult { a: 0, b: 1 },
        bin(BinaryOp::Mul, 2, 3),
        CNode::OuterMultAdd { a: 0, b: 4 },
    ];
    let info = analyze(&plan(RowType::ColAggT, 3, nodes), RowType::ColAggT).unwrap();
    assert!(!info.needs_dense_main);
    assert!(info.scatter_on_demand);

    // X * (X %*% v) read densely: the row is scattered for every row, not on demand.
    let nodes = vec![
        data(0, Access::Main),
        data(1, Access::Whole),
        CNode::VectMatMult { a: 0, b: 1 },
        bin(BinaryOp::Add, 0, 2),
    ];
    let info = analyze(&plan(RowType::NoAgg, 2, nodes), RowType::NoAgg).unwrap();
    assert!(info.needs_dense_main);
    assert!(!info.scatter_on_demand);
}
