//! Row plans of the canonical Row patterns, for the figures of `cranelift_compile_time.rs` and
//! `cranelift_timing.rs` (their results are checked in `native_row.rs`): each with its output
//! shape for an m×n main input `X`.
#![allow(dead_code)]

use super::cell_plans::data;
use lafuse_compiler::fusion::cplan::{
    count_vector_intermediates, Access, CNode, CPlan, InputKind, RowType, TemplateSpec,
};
use lafuse_compiler::hops::{AggOp, BinaryOp as B};

fn row_plan(row_type: RowType, inputs: usize, nodes: Vec<CNode>) -> CPlan {
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

fn bin(f: B, a: usize, b: usize) -> CNode {
    CNode::Binary { f, a, b }
}

fn row_sum(x: usize) -> CNode {
    CNode::RowAgg { f: AggOp::Sum, x }
}

/// `t(X) %*% (w * (X %*% v))` (inputs `X`, `v` n×1, `w` m×1): output n×1.
pub fn xtwxv() -> CPlan {
    row_plan(
        RowType::ColAggT,
        3,
        vec![
            data(0, Access::Main),
            data(1, Access::Whole),
            CNode::VectMatMult { a: 0, b: 1 },
            data(2, Access::ColVector),
            bin(B::Mul, 3, 2),
            CNode::OuterMultAdd { a: 0, b: 4 },
        ],
    )
}

/// `t(X) %*% (W * (X %*% V))` (inputs `X`, `V` n×k, `W` m×k): output n×k.
pub fn xtwxv_k() -> CPlan {
    row_plan(
        RowType::ColAggB1T,
        3,
        vec![
            data(0, Access::Main),
            data(1, Access::Whole),
            CNode::VectMatMult { a: 0, b: 1 },
            data(2, Access::Aligned),
            bin(B::Mul, 3, 2),
            CNode::OuterMultAdd { a: 0, b: 4 },
        ],
    )
}

/// `rowSums(X * Y) / rowMaxs(X)` (inputs `X`, `Y` m×n): output m×1.
pub fn rowsums_over_rowmaxs() -> CPlan {
    row_plan(
        RowType::RowAgg,
        2,
        vec![
            data(0, Access::Main),
            data(1, Access::Aligned),
            bin(B::Mul, 0, 1),
            row_sum(2),
            CNode::RowAgg {
                f: AggOp::Max,
                x: 0,
            },
            bin(B::Div, 3, 4),
        ],
    )
}

/// `colSums(X / rowSums(X))` (input `X`): output 1×n.
pub fn colsums_normalized() -> CPlan {
    row_plan(
        RowType::ColAgg,
        1,
        vec![data(0, Access::Main), row_sum(0), bin(B::Div, 0, 1)],
    )
}

/// `X / rowSums(X)` (input `X`): output m×n.
pub fn normalized() -> CPlan {
    row_plan(
        RowType::NoAgg,
        1,
        vec![data(0, Access::Main), row_sum(0), bin(B::Div, 0, 1)],
    )
}

/// `sum(X / rowSums(X))` (input `X`): output 1×1.
pub fn sum_normalized() -> CPlan {
    row_plan(
        RowType::FullAgg,
        1,
        vec![data(0, Access::Main), row_sum(0), bin(B::Div, 0, 1)],
    )
}

/// The plans above, named.
pub fn row_plans() -> Vec<(&'static str, CPlan)> {
    vec![
        ("row t(X)%*%(w*(X%*%v))", xtwxv()),
        ("row t(X)%*%(W*(X%*%V))", xtwxv_k()),
        ("row rowSums(X*Y)/rowMaxs(X)", rowsums_over_rowmaxs()),
        ("row colSums(X/rowSums(X))", colsums_normalized()),
        ("row X/rowSums(X)", normalized()),
        ("row sum(X/rowSums(X))", sum_normalized()),
    ]
}
