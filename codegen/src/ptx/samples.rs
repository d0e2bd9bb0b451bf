//! Plans of every kernel shape the GPU backend generates, and the plans of `lafuse bench
//! --suite gpu`: shared by the PTX tests (generation, `ptxas`) and the benchmark's checks
//! against the CPU, so both cover the same kernels.

use super::GpuMain;
use lafuse_compiler::fusion::cplan::{
    count_vector_intermediates, Access, CNode, CPlan, InputKind, OuterType, RowType, TemplateSpec,
};
use lafuse_compiler::fusion::template::{CellAgg, CellType};
use lafuse_compiler::hops::{AggOp, BinaryOp, Literal, UnaryOp};

fn data(input: usize, access: Access) -> CNode {
    CNode::Data { input, access }
}

/// `exp(X * Y) + v` (v a column vector) with `log(X)` where the body needs the other
/// library function: the body every Cell shape is generated for.
pub fn cell(cell_type: CellType, agg: Option<CellAgg>, sparse_safe: bool) -> CPlan {
    CPlan {
        template: TemplateSpec::Cell {
            cell_type,
            agg,
            sparse_safe,
        },
        inputs: vec![InputKind::Matrix, InputKind::Matrix, InputKind::Matrix],
        nodes: vec![
            data(0, Access::Main),
            data(1, Access::Aligned),
            data(2, Access::ColVector),
            CNode::Binary {
                f: BinaryOp::Mul,
                a: 0,
                b: 1,
            },
            CNode::Unary {
                f: UnaryOp::Exp,
                x: 3,
            },
            CNode::Unary {
                f: UnaryOp::Log,
                x: 2,
            },
            CNode::Binary {
                f: BinaryOp::Add,
                a: 4,
                b: 5,
            },
            CNode::Binary {
                f: BinaryOp::Mul,
                a: 6,
                b: 0,
            },
        ],
        outputs: vec![7],
    }
}

/// `[sum(X * Y), max(X)]`.
pub fn magg() -> CPlan {
    CPlan {
        template: TemplateSpec::MAgg {
            aggs: vec![CellAgg::Sum, CellAgg::Max],
            sparse_safe: false,
        },
        inputs: vec![InputKind::Matrix, InputKind::Matrix],
        nodes: vec![
            data(0, Access::Main),
            data(1, Access::Aligned),
            CNode::Binary {
                f: BinaryOp::Mul,
                a: 0,
                b: 1,
            },
        ],
        outputs: vec![2, 0],
    }
}

/// `X * log(U %*% t(V) + 1e-15)`, then as `outer_type` says (`Right`: times `W`).
pub fn outer(outer_type: OuterType) -> CPlan {
    let mut nodes = vec![
        data(0, Access::Main),
        data(1, Access::OuterU),
        data(2, Access::OuterV),
        CNode::OuterDot { u: 1, v: 2 },
        CNode::Literal {
            value: Literal::Double(1e-15),
        },
        CNode::Binary {
            f: BinaryOp::Add,
            a: 3,
            b: 4,
        },
        CNode::Unary {
            f: UnaryOp::Log,
            x: 5,
        },
        CNode::Binary {
            f: BinaryOp::Mul,
            a: 0,
            b: 6,
        },
    ];
    let mut inputs = vec![InputKind::Matrix; 3];
    let mut out = 7;
    if matches!(
        outer_type,
        OuterType::Right | OuterType::Left | OuterType::LeftT
    ) {
        inputs.push(InputKind::Matrix);
        nodes.push(data(3, Access::Whole));
        nodes.push(CNode::FinalProduct { g: 7, w: 8 });
        out = 9;
    }
    CPlan {
        template: TemplateSpec::Outer { outer_type },
        inputs,
        nodes,
        outputs: vec![out],
    }
}

/// The unary operations the generators compute with the runtime's scalar helpers, each with
/// the scale [`helpers`] gives its argument.
pub const HELPER_UNARY: [(UnaryOp, f64); 8] = [
    (UnaryOp::Sin, 1e3),
    (UnaryOp::Cos, 1e3),
    (UnaryOp::Tan, 1e3),
    (UnaryOp::Asin, 1.0),
    (UnaryOp::Acos, 1.0),
    (UnaryOp::Atan, 1e3),
    (UnaryOp::Sinh, 30.0),
    (UnaryOp::Cosh, 30.0),
];

/// The unary operations of the shared vector library (`native::math`) that no device run has
/// checked yet (`tanh` since session 30; `exp` and `log` have been), with their scales.
pub const LIBRARY_UNARY: [(UnaryOp, f64); 1] = [(UnaryOp::Tanh, 30.0)];

/// The binary operations computed with the runtime's helpers, with their operands' scales.
pub const HELPER_BINARY: [(BinaryOp, f64, f64); 7] = [
    (BinaryOp::Pow, 4.0, 3.0),
    (BinaryOp::Mod, 10.0, 3.0),
    (BinaryOp::BitwAnd, 1e3, 1e3),
    (BinaryOp::BitwOr, 1e3, 1e3),
    (BinaryOp::BitwXor, 1e3, 1e3),
    (BinaryOp::BitwShiftL, 1e6, 40.0),
    (BinaryOp::BitwShiftR, 1e6, 40.0),
];

/// `f(X * a)` or `f(X * a, Y * b)` for each of the runtime's scalar helpers (`ptx::devmath`)
/// and each unchecked function of the vector library ([`LIBRARY_UNARY`]), named, as
/// cell-wise plans: the scales take the arguments where each function is
/// interesting (trigonometric reduction past a few periods, `asin`'s domain, integers for the
/// bit operations, negative bases and fractional exponents for `^`).
pub fn helpers() -> Vec<(String, CPlan)> {
    let (unary, binary) = (HELPER_UNARY, HELPER_BINARY);
    let scaled = |nodes: &mut Vec<CNode>, input: usize, access: Access, by: f64| {
        nodes.push(data(input, access));
        nodes.push(CNode::Literal {
            value: Literal::Double(by),
        });
        let n = nodes.len();
        nodes.push(CNode::Binary {
            f: BinaryOp::Mul,
            a: n - 2,
            b: n - 1,
        });
        nodes.len() - 1
    };
    let plan = |nodes: Vec<CNode>, inputs: usize| CPlan {
        template: TemplateSpec::Cell {
            cell_type: CellType::NoAgg,
            agg: None,
            sparse_safe: false,
        },
        inputs: vec![InputKind::Matrix; inputs],
        outputs: vec![nodes.len() - 1],
        nodes,
    };
    let mut all = Vec::new();
    for (f, by) in unary {
        let mut nodes = Vec::new();
        let x = scaled(&mut nodes, 0, Access::Main, by);
        nodes.push(CNode::Unary { f, x });
        all.push((format!("cell helper {f:?}"), plan(nodes, 1)));
    }
    for (f, by) in LIBRARY_UNARY {
        let mut nodes = Vec::new();
        let x = scaled(&mut nodes, 0, Access::Main, by);
        nodes.push(CNode::Unary { f, x });
        all.push((format!("cell library {f:?}"), plan(nodes, 1)));
    }
    for (f, a, b) in binary {
        let mut nodes = Vec::new();
        let x = scaled(&mut nodes, 0, Access::Main, a);
        let y = scaled(&mut nodes, 1, Access::Aligned, b);
        nodes.push(CNode::Binary { f, a: x, b: y });
        all.push((format!("cell helper {f:?}"), plan(nodes, 2)));
    }
    all
}

/// Every plan and main-input format the GPU backend generates, named.
pub fn generated() -> Vec<(String, CPlan, GpuMain)> {
    let mut all = Vec::new();
    for (ct, agg) in [
        (CellType::NoAgg, None),
        (CellType::FullAgg, Some(CellAgg::Sum)),
        (CellType::FullAgg, Some(CellAgg::SumSq)),
        (CellType::FullAgg, Some(CellAgg::Min)),
        (CellType::RowAgg, Some(CellAgg::Sum)),
        (CellType::RowAgg, Some(CellAgg::Max)),
        (CellType::ColAgg, Some(CellAgg::Sum)),
        (CellType::ColAgg, Some(CellAgg::Min)),
    ] {
        all.push((
            format!("cell {ct:?} {agg:?} dense"),
            cell(ct, agg, false),
            GpuMain::Dense,
        ));
        let sparse = matches!(agg, None | Some(CellAgg::Sum)) && ct != CellType::ColAgg;
        if sparse {
            all.push((
                format!("cell {ct:?} {agg:?} csr"),
                cell(ct, agg, true),
                GpuMain::Csr,
            ));
        }
    }
    all.push(("magg dense".into(), magg(), GpuMain::Dense));
    for (name, plan) in helpers() {
        all.push((name, plan, GpuMain::Dense));
    }
    all.push(("outer Right by V".into(), outer_right_by_v(), GpuMain::Csr));
    for (name, plan) in rows() {
        all.push((name, plan, GpuMain::Dense));
    }
    for t in [
        OuterType::CellWise,
        OuterType::FullAgg,
        OuterType::Right,
        OuterType::Left,
        OuterType::LeftT,
    ] {
        all.push((format!("outer {t:?}"), outer(t), GpuMain::Csr));
    }
    for t in [OuterType::CellWise, OuterType::FullAgg] {
        all.push((format!("outer {t:?} dense"), outer(t), GpuMain::Dense));
    }
    all
}

/// `(X * log(U %*% t(V) + 1e-15)) %*% V`: a right product whose matrix is `V` itself, read
/// as the factor and as the final product's matrix (as scripts write it).
pub fn outer_right_by_v() -> CPlan {
    let mut p = outer(OuterType::CellWise);
    p.template = TemplateSpec::Outer {
        outer_type: OuterType::Right,
    };
    p.nodes.push(CNode::FinalProduct { g: 7, w: 2 });
    p.outputs = vec![8];
    p
}

/// `sum(X * Y * Z)`: the Cell pattern of the GPU benchmark.
pub fn sum_xyz() -> CPlan {
    CPlan {
        template: TemplateSpec::Cell {
            cell_type: CellType::FullAgg,
            agg: Some(CellAgg::Sum),
            sparse_safe: true,
        },
        inputs: vec![InputKind::Matrix; 3],
        nodes: vec![
            data(0, Access::Main),
            data(1, Access::Aligned),
            data(2, Access::Aligned),
            CNode::Binary {
                f: BinaryOp::Mul,
                a: 0,
                b: 1,
            },
            CNode::Binary {
                f: BinaryOp::Mul,
                a: 3,
                b: 2,
            },
        ],
        outputs: vec![4],
    }
}

/// `[sum(X * Y), sum(X * Z)]`: the MultiAgg pattern of the GPU benchmark.
pub fn magg_xy_xz() -> CPlan {
    CPlan {
        template: TemplateSpec::MAgg {
            aggs: vec![CellAgg::Sum, CellAgg::Sum],
            sparse_safe: true,
        },
        inputs: vec![InputKind::Matrix; 3],
        nodes: vec![
            data(0, Access::Main),
            data(1, Access::Aligned),
            data(2, Access::Aligned),
            CNode::Binary {
                f: BinaryOp::Mul,
                a: 0,
                b: 1,
            },
            CNode::Binary {
                f: BinaryOp::Mul,
                a: 0,
                b: 2,
            },
        ],
        outputs: vec![3, 4],
    }
}

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

fn row_agg(f: AggOp, x: usize) -> CNode {
    CNode::RowAgg { f, x }
}

fn bin(f: BinaryOp, a: usize, b: usize) -> CNode {
    CNode::Binary { f, a, b }
}

/// `t(X) %*% (X %*% v)`: the Row pattern of the GPU benchmark (`v` is n×1).
pub fn mmchain() -> CPlan {
    row_plan(
        RowType::ColAggT,
        2,
        vec![
            data(0, Access::Main),
            data(1, Access::Whole),
            CNode::VectMatMult { a: 0, b: 1 },
            CNode::OuterMultAdd { a: 0, b: 2 },
        ],
    )
}

/// Row plans of every output shape the GPU row kernel generates, named.
pub fn rows() -> Vec<(String, CPlan)> {
    use AggOp::{Max, Mean, Min, Sum};
    vec![
        // X / rowSums(X)
        (
            "row NoAgg X/rowSums(X)".into(),
            row_plan(
                RowType::NoAgg,
                1,
                vec![
                    data(0, Access::Main),
                    row_agg(Sum, 0),
                    bin(BinaryOp::Div, 0, 1),
                ],
            ),
        ),
        // rowSums(X * X) with rowMins(X * r) added: two aggregates in one pass.
        (
            "row RowAgg rowSums(X*X)+rowMins(X*r)".into(),
            row_plan(
                RowType::RowAgg,
                2,
                vec![
                    data(0, Access::Main),
                    data(1, Access::RowVector),
                    bin(BinaryOp::Mul, 0, 0),
                    row_agg(Sum, 2),
                    bin(BinaryOp::Mul, 0, 1),
                    row_agg(Min, 4),
                    bin(BinaryOp::Add, 3, 5),
                ],
            ),
        ),
        // rowSums(X / rowMaxs(X)): a second level.
        (
            "row RowAgg two levels".into(),
            row_plan(
                RowType::RowAgg,
                1,
                vec![
                    data(0, Access::Main),
                    row_agg(Max, 0),
                    bin(BinaryOp::Div, 0, 1),
                    row_agg(Sum, 2),
                ],
            ),
        ),
        // sum(X / rowMeans(X))
        (
            "row FullAgg sum(X/rowMeans(X))".into(),
            row_plan(
                RowType::FullAgg,
                1,
                vec![
                    data(0, Access::Main),
                    row_agg(Mean, 0),
                    bin(BinaryOp::Div, 0, 1),
                ],
            ),
        ),
        // colSums(X * rowSums(Y))
        (
            "row ColAgg colSums(X*rowSums(Y))".into(),
            row_plan(
                RowType::ColAgg,
                2,
                vec![
                    data(0, Access::Main),
                    data(1, Access::Aligned),
                    row_agg(Sum, 1),
                    bin(BinaryOp::Mul, 0, 2),
                ],
            ),
        ),
        // -2 * (X %*% B) + r, r a row of B's width: KMeans's distances (`no_agg_b1`).
        (
            "row NoAggB1 -2*(X%*%B)+r".into(),
            row_plan(
                RowType::NoAggB1,
                3,
                vec![
                    data(0, Access::Main),
                    data(1, Access::Whole),
                    CNode::VectMatMult { a: 0, b: 1 },
                    CNode::Literal {
                        value: Literal::Double(-2.0),
                    },
                    bin(BinaryOp::Mul, 3, 2),
                    data(2, Access::RowVector),
                    bin(BinaryOp::Add, 4, 5),
                ],
            ),
        ),
        // (X * A) %*% B + 0.5 * C * w, C of B's width: ALS-CG's gradient.
        (
            "row NoAggB1 (X*A)%*%B+C*w".into(),
            row_plan(
                RowType::NoAggB1,
                5,
                vec![
                    data(0, Access::Main),
                    data(1, Access::Aligned),
                    bin(BinaryOp::Mul, 0, 1),
                    data(2, Access::Whole),
                    CNode::VectMatMult { a: 2, b: 3 },
                    CNode::Literal {
                        value: Literal::Double(0.5),
                    },
                    data(3, Access::Aligned),
                    bin(BinaryOp::Mul, 5, 6),
                    data(4, Access::ColVector),
                    bin(BinaryOp::Mul, 7, 8),
                    bin(BinaryOp::Add, 4, 9),
                ],
            ),
        ),
        // (X / rowSums(X)) %*% B: a row aggregate before the product.
        (
            "row NoAggB1 (X/rowSums(X))%*%B".into(),
            row_plan(
                RowType::NoAggB1,
                2,
                vec![
                    data(0, Access::Main),
                    row_agg(Sum, 0),
                    bin(BinaryOp::Div, 0, 1),
                    data(1, Access::Whole),
                    CNode::VectMatMult { a: 2, b: 3 },
                ],
            ),
        ),
        ("row ColAggT t(X)%*%(X%*%v)".into(), mmchain()),
        // t(X) %*% (w * (X %*% v))
        (
            "row ColAggT t(X)%*%(w*(X%*%v))".into(),
            row_plan(
                RowType::ColAggT,
                3,
                vec![
                    data(0, Access::Main),
                    data(1, Access::Whole),
                    data(2, Access::ColVector),
                    CNode::VectMatMult { a: 0, b: 1 },
                    bin(BinaryOp::Mul, 2, 3),
                    CNode::OuterMultAdd { a: 0, b: 4 },
                ],
            ),
        ),
    ]
}

/// The output shape of a [`rows`] plan over an m×n main input.
pub fn row_out_shape(plan: &CPlan, m: usize, n: usize) -> (usize, usize) {
    match plan.template {
        TemplateSpec::Row { row_type, .. } => match row_type {
            RowType::NoAgg => (m, n),
            RowType::RowAgg => (m, 1),
            RowType::FullAgg => (1, 1),
            RowType::ColAgg => (1, n),
            _ => (n, 1),
        },
        _ => (1, 1),
    }
}
