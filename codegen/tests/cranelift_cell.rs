//! Differential tests of the Cranelift backend: Cell, MultiAgg and Outer operators against the
//! reference evaluator (every cell type and aggregation, every Outer type and rank shape,
//! dense and sparse main inputs, every side-input access, special values, empty and 1x1
//! inputs) and, where the build has the LLVM
//! backend too, against its operators bit for bit: the same operations per cell and sums kept
//! in the same lanes give the same doubles. Row operators are compared in `native_row.rs`.
#![cfg(feature = "cranelift")]

mod common;

use common::cell_plans::*;
use lafuse_codegen::backend::{Backend, MainFormat, Origin, Request};
use lafuse_codegen::cranelift::{compile_for, CraneliftBackend};
use lafuse_codegen::reference::{evaluate, Operand};
use lafuse_compiler::fusion::cplan::{
    count_vector_intermediates, Access, CNode, CPlan, InputKind, OuterType, RowType, TemplateSpec,
};
use lafuse_compiler::fusion::template::{CellAgg, CellType};
use lafuse_compiler::hops::{AggOp, BinaryOp as B, UnaryOp as U};
use lafuse_core::Fault;
use lafuse_runtime::{DenseMatrix, Matrix};
use std::sync::Arc;

/// Runs `plan` through Cranelift, compiled for the main input's format.
fn run(plan: &CPlan, inputs: &[Operand<'_>], shapes: &[(usize, usize)], what: &str) -> Vec<Matrix> {
    let main = match inputs.first() {
        Some(Operand::Matrix(m)) if m.is_sparse() => MainFormat::Sparse,
        _ => MainFormat::Dense,
    };
    // Outer drivers' non-zeros one at a time, as `llvm` runs them (tiles are compared in
    // `native_outer_tiles.rs`).
    let op = compile_for(plan, main)
        .unwrap_or_else(|e| panic!("{what}: {e}\n{}", plan.explain()))
        .with_outer_tile_density(f64::INFINITY);
    op.execute_with_ranges(inputs, shapes, &[])
        .unwrap_or_else(|e| panic!("{what}: {e}"))
}

/// Asserts two results equal to the bit, cell by cell, any NaN equal to any other: IEEE 754
/// leaves the sign and payload of a NaN result unspecified, and LLVM's optimizer exploits it
/// (`-x + 0.0` becomes `0.0 - x`, which keeps a NaN's sign where the negation flipped it).
fn assert_bits(got: &Matrix, want: &Matrix, what: &str, other: &str) {
    assert_eq!(got.shape(), want.shape(), "{what}: shape");
    let (r, c) = got.shape();
    for i in 0..r {
        for j in 0..c {
            let (g, w) = (got.get(i, j), want.get(i, j));
            assert!(
                (g.is_nan() && w.is_nan()) || g.to_bits() == w.to_bits(),
                "{what}: ({i},{j}) cranelift {g:e} ({:#x}) {other} {w:e} ({:#x})",
                g.to_bits(),
                w.to_bits()
            );
        }
    }
}

/// The LLVM backend's results for the same call, where this build has it (it builds and runs
/// every plan these tests give Cranelift). An Outer operator takes its driver's non-zeros one
/// at a time, as the Cranelift operator under test does (their tiles are checked against each
/// other in `native_outer_tiles.rs`).
#[cfg(feature = "llvm")]
fn llvm(plan: &CPlan, inputs: &[Operand<'_>], shapes: &[(usize, usize)]) -> Option<Vec<Matrix>> {
    use lafuse_codegen::native::RunOptions;
    let op = lafuse_codegen::native::compile(plan).expect("LLVM builds the plan");
    let no_tiles = RunOptions {
        outer_tile_density: f64::INFINITY,
    };
    Some(
        op.execute_with_options(inputs, shapes, &[], no_tiles)
            .expect("LLVM runs the plan"),
    )
}

#[cfg(not(feature = "llvm"))]
fn llvm(_: &CPlan, _: &[Operand<'_>], _: &[(usize, usize)]) -> Option<Vec<Matrix>> {
    None
}

/// Cranelift against the reference (within `tol`) and against LLVM (to the bit).
fn check(plan: &CPlan, inputs: &[Operand<'_>], shapes: &[(usize, usize)], tol: f64, what: &str) {
    let got = run(plan, inputs, shapes, what);
    let want = evaluate(plan, inputs, shapes).unwrap();
    for (g, w) in got.iter().zip(&want) {
        g.validate().unwrap();
        assert_close(g, w, tol, what);
    }
    if let Some(native) = llvm(plan, inputs, shapes) {
        for (g, n) in got.iter().zip(&native) {
            assert_bits(g, n, what, "llvm");
        }
    }
}

#[test]
fn cell_types_aggregations_formats_and_side_inputs() {
    check_cell_variants(
        &check,
        &[(37, 29), (1, 1), (0, 5), (300, 260)],
        &[(false, false), (true, false), (false, true), (true, true)],
        true,
    );
}

#[test]
fn aligned_inputs_run_as_one_stretch_of_cells() {
    check_cell_variants(
        &check,
        &[
            (1, 1),
            (0, 1),
            (13, 1),
            (70_001, 1),
            (1, 37),
            (37, 29),
            (300, 260),
        ],
        &[(false, false), (true, true)],
        false,
    );
}

/// `t(x * y) * r + s` over a column-vector main input: the transposed frame, every cell type.
#[test]
fn bodies_over_a_transposed_vector_main_input() {
    let nodes = vec![
        data(0, Access::Main),
        data(1, Access::Aligned),
        CNode::Binary {
            f: B::Mul,
            a: 0,
            b: 1,
        },
        CNode::Transpose { x: 2 },
        data(2, Access::RowVector),
        CNode::Binary {
            f: B::Mul,
            a: 3,
            b: 4,
        },
        data(3, Access::Scalar),
        CNode::Binary {
            f: B::Add,
            a: 5,
            b: 6,
        },
    ];
    let variants = [
        (CellType::NoAgg, None),
        (CellType::RowAgg, Some(CellAgg::Sum)),
        (CellType::RowAgg, Some(CellAgg::Max)),
        (CellType::ColAgg, Some(CellAgg::Sum)),
        (CellType::ColAgg, Some(CellAgg::Min)),
        (CellType::FullAgg, Some(CellAgg::SumSq)),
    ];
    for m in [0usize, 1, 7, 700] {
        let (x, y) = (mat(m, 1, 0.9, 1, true), mat(m, 1, 1.0, 2, false));
        let r = mat(1, m, 1.0, 3, m > 1);
        for (ty, agg) in variants {
            let plan = CPlan {
                template: TemplateSpec::Cell {
                    cell_type: ty,
                    agg,
                    sparse_safe: false,
                },
                inputs: vec![
                    InputKind::Matrix,
                    InputKind::Matrix,
                    InputKind::Matrix,
                    InputKind::Scalar,
                ],
                nodes: nodes.clone(),
                outputs: vec![7],
            };
            let inputs = [
                Operand::Matrix(&x),
                Operand::Matrix(&y),
                Operand::Matrix(&r),
                Operand::Scalar(0.5),
            ];
            let what = format!("{ty:?} {agg:?} m={m}");
            check(&plan, &inputs, &[shape_of(ty, 1, m)], 1e-12, &what);
        }
    }
}

/// Every operation on every pair of special values agrees with the reference to the bit (and
/// so with LLVM), in a dense loop's vector lanes and its scalar tail.
#[test]
fn unary_binary_ternary_ops_match_on_special_values() {
    let (specials, xa, xb, plans) = special_value_cases();
    let k = specials.len();
    let ins = [Operand::Matrix(&xa), Operand::Matrix(&xb)];
    for (name, plan) in plans {
        let got = run(&plan, &ins, &[(k, k)], &name);
        let want = evaluate(&plan, &ins, &[(k, k)]).unwrap();
        for i in 0..k {
            for j in 0..k {
                let (g, w) = (got[0].get(i, j), want[0].get(i, j));
                assert!(
                    (g.is_nan() && w.is_nan()) || g.to_bits() == w.to_bits(),
                    "{name}({}, {}): cranelift {g} reference {w}",
                    specials[i],
                    specials[j]
                );
            }
        }
        if let Some(native) = llvm(&plan, &ins, &[(k, k)]) {
            assert_bits(&got[0], &native[0], &name, "llvm");
        }
    }
}

/// `log`, `exp` and sigmoid give the runtime's fdlibm functions to the bit on every kind of
/// double.
#[test]
fn math_matches_the_runtime_to_the_bit() {
    use lafuse_runtime::math;
    let (vals, rows) = math_values();
    let cols = 7;
    let x = Matrix::Dense(DenseMatrix::new(rows, cols, vals.clone()).unwrap());
    let runtime = |f: U, v: f64| match f {
        U::Log => math::ln(v),
        U::Exp => math::exp(v),
        _ => 1.0 / (1.0 + math::exp(-v)),
    };
    for f in [U::Log, U::Exp, U::Sigmoid] {
        let plan = CPlan {
            template: TemplateSpec::Cell {
                cell_type: CellType::NoAgg,
                agg: None,
                sparse_safe: false,
            },
            inputs: vec![InputKind::Matrix],
            nodes: vec![data(0, Access::Main), CNode::Unary { f, x: 0 }],
            outputs: vec![1],
        };
        let got = run(&plan, &[Operand::Matrix(&x)], &[(rows, cols)], "math");
        for (k, &v) in vals.iter().enumerate() {
            let (g, w) = (got[0].get(k / cols, k % cols), runtime(f, v));
            assert!(
                (g.is_nan() && w.is_nan()) || g.to_bits() == w.to_bits(),
                "{f:?}({v:e}): cranelift {g:e}, runtime {w:e}"
            );
        }
    }
}

#[test]
fn multi_aggregates_of_two_and_three() {
    for aggs in [
        vec![CellAgg::Sum, CellAgg::Max],
        vec![CellAgg::SumSq, CellAgg::Min, CellAgg::Sum],
    ] {
        for (m, n, d) in [(40, 33, 1.0), (200, 150, 0.03), (0, 4, 1.0), (1, 1, 1.0)] {
            let x = mat(m, n, d, 5, false);
            let y = mat(m, n, 1.0, 6, true);
            let plan = magg_plan(aggs.clone());
            let shapes = vec![(1, 1); aggs.len()];
            let ins = [Operand::Matrix(&x), Operand::Matrix(&y)];
            check(
                &plan,
                &ins,
                &shapes,
                1e-9,
                &format!("magg {aggs:?} {m}x{n}"),
            );
        }
    }
}

/// A sparse-safe MultiAgg over a CSR main input: the non-zeros only while the side input is
/// finite, every cell otherwise; the same results either way.
#[test]
fn sparse_safe_multi_aggregates_over_csr_main_inputs() {
    let plan = sparse_safe_magg_plan();
    for (m, n, d) in [
        (300, 170, 0.02),
        (64, 64, 0.5),
        (0, 5, 0.1),
        (1, 1, 1.0),
        (5, 7, 0.0),
    ] {
        let x = Matrix::Sparse(mat(m, n, d, 11, false).to_sparse());
        for specials in [false, true] {
            let y = mat(m, n, 1.0, 12, specials);
            let ins = [Operand::Matrix(&x), Operand::Matrix(&y)];
            let what = format!("sparse-safe magg {m}x{n} d={d} specials={specials}");
            check(&plan, &ins, &[(1, 1), (1, 1)], 1e-9, &what);
        }
    }
}

/// A sparse-safe Cell plan over CSR main inputs of every aggregation: the CSR entry point.
#[test]
fn sparse_safe_cells_over_csr_main_inputs() {
    let aggs = [CellAgg::Sum, CellAgg::SumSq, CellAgg::Min, CellAgg::Max];
    let mut cases = vec![(CellType::NoAgg, None)];
    for ty in [CellType::RowAgg, CellType::ColAgg, CellType::FullAgg] {
        cases.extend(aggs.iter().map(|&a| (ty, Some(a))));
    }
    // At density 0.4 most rows have 8 non-zeros or more, which full and row aggregates take
    // 8 at a time into their vector lanes, the rest one at a time.
    for (m, n, d) in [
        (120, 90, 0.05),
        (60, 80, 0.4),
        (1, 1, 1.0),
        (0, 3, 0.5),
        (9, 17, 0.0),
    ] {
        let x = Matrix::Sparse(mat(m, n, d, 21, true).to_sparse());
        let y = mat(m, n, 1.0, 22, false);
        let (r, c) = (mat(1, n, 1.0, 23, false), mat(m, 1, 1.0, 24, false));
        let ins = [
            Operand::Matrix(&x),
            Operand::Matrix(&y),
            Operand::Matrix(&r),
            Operand::Matrix(&c),
            Operand::Scalar(0.25),
        ];
        for &(ty, agg) in &cases {
            let plan = cell_plan(ty, agg, true);
            let what = format!("csr {m}x{n} d={d} {ty:?} {agg:?}");
            check(&plan, &ins, &[shape_of(ty, m, n)], 1e-9, &what);
        }
    }
}

/// The final product's matrix (and the output's shape) for Outer type `ty`.
fn outer_w(ty: OuterType, m: usize, n: usize, k2: usize) -> (Matrix, (usize, usize)) {
    match ty {
        OuterType::Right => (mat(n, k2, 1.0, 10, false), (m, k2)),
        OuterType::Left => (mat(k2, m, 1.0, 11, false), (n, k2)),
        OuterType::LeftT => (mat(k2, m, 1.0, 11, false), (k2, n)),
        OuterType::CellWise => (Matrix::scalar(0.0), (m, n)),
        OuterType::FullAgg => (Matrix::scalar(0.0), (1, 1)),
    }
}

const OUTER_TYPES: [OuterType; 5] = [
    OuterType::CellWise,
    OuterType::FullAgg,
    OuterType::Right,
    OuterType::Left,
    OuterType::LeftT,
];

/// Every Outer type over sparse and dense drivers, at ranks that exercise every part of the
/// dot product (blocks of all four accumulators, single 8-lane blocks, the scalar tail).
#[test]
fn outer_all_types_and_ranks_over_sparse_and_dense_drivers() {
    let (m, n, k2) = (60, 45, 3);
    for k in [1, 7, 8, 9, 31, 32, 33, 45, 100] {
        for d in [0.03, 0.6] {
            let x = mat(m, n, d, 7, false);
            let u = mat(m, k, 1.0, 8 + k as u64, false);
            let v = mat(n, k, 1.0, 9 + k as u64, false);
            for ty in OUTER_TYPES {
                let (w, shape) = outer_w(ty, m, n, k2);
                let plan = outer_plan(ty);
                let mut ins = vec![
                    Operand::Matrix(&x),
                    Operand::Matrix(&u),
                    Operand::Matrix(&v),
                ];
                if plan.inputs.len() == 4 {
                    ins.push(Operand::Matrix(&w));
                }
                let what = format!("outer {ty:?} k {k} density {d}");
                check(&plan, &ins, &[shape], 1e-9, &what);
            }
        }
    }
}

/// A no-aggregate body with the runtime's lane maps (`tanh`, `exp`, `log`) runs 32 lanes a
/// call, then 8, then one: rows of every length around those widths (per row, with a row and
/// a column vector; and as one stretch, without), special values included, against the
/// reference and to the bit against LLVM's code.
#[test]
fn lane_mapped_bodies_without_sums_run_wide() {
    // tanh(X + r) * exp(c) + log(abs(X) + 1), r a row and c a column vector (or scalars).
    let plan = |broadcast: bool| {
        let (r, c) = if broadcast {
            (Access::RowVector, Access::ColVector)
        } else {
            (Access::Scalar, Access::Scalar)
        };
        CPlan {
            template: TemplateSpec::Cell {
                cell_type: CellType::NoAgg,
                agg: None,
                sparse_safe: false,
            },
            inputs: vec![
                InputKind::Matrix,
                if broadcast {
                    InputKind::Matrix
                } else {
                    InputKind::Scalar
                },
                if broadcast {
                    InputKind::Matrix
                } else {
                    InputKind::Scalar
                },
            ],
            nodes: vec![
                data(0, Access::Main),
                data(1, r),
                data(2, c),
                CNode::Binary {
                    f: B::Add,
                    a: 0,
                    b: 1,
                },
                CNode::Unary { f: U::Tanh, x: 3 },
                CNode::Unary { f: U::Exp, x: 2 },
                CNode::Binary {
                    f: B::Mul,
                    a: 4,
                    b: 5,
                },
                CNode::Unary { f: U::Abs, x: 0 },
                lit(1.0),
                CNode::Binary {
                    f: B::Add,
                    a: 7,
                    b: 8,
                },
                CNode::Unary { f: U::Log, x: 9 },
                CNode::Binary {
                    f: B::Add,
                    a: 6,
                    b: 10,
                },
            ],
            outputs: vec![11],
        }
    };
    for (m, n) in [
        (3, 31),
        (2, 32),
        (5, 33),
        (4, 41),
        (3, 72),
        (1, 1),
        (7, 100),
    ] {
        let x = mat(m, n, 1.0, 21, true);
        let r = mat(1, n, 1.0, 22, false);
        let c = mat(m, 1, 1.0, 23, false);
        let ins = [
            Operand::Matrix(&x),
            Operand::Matrix(&r),
            Operand::Matrix(&c),
        ];
        check(
            &plan(true),
            &ins,
            &[(m, n)],
            1e-12,
            &format!("{m}x{n} broadcast"),
        );
        let ins = [
            Operand::Matrix(&x),
            Operand::Scalar(0.25),
            Operand::Scalar(-0.5),
        ];
        check(
            &plan(false),
            &ins,
            &[(m, n)],
            1e-12,
            &format!("{m}x{n} flat"),
        );
    }
}

/// A Left product by `t(U)` read as the rows of the dot products' `U`: against the reference,
/// and to the bit against LLVM's code.
#[test]
fn outer_left_products_by_the_factor_u_read_its_rows() {
    check_outer_left_by_u(&check);
}

/// A CSR driver's rows with at least 8 non-zeros are taken 8 at a time, as the LLVM backend
/// takes them (so sums land in the same lanes): rows of every length around the lane count,
/// NaN and infinities among the driver's values, a scalar input in the body.
#[test]
fn outer_csr_rows_taken_w_non_zeros_at_a_time() {
    let plan = |ty| {
        let mut p = outer_plan(ty);
        p.nodes[4] = data(3, Access::Scalar);
        p.inputs.push(InputKind::Scalar);
        p
    };
    let (m, k, n) = (70, 13, 40);
    for specials in [false, true] {
        let mut vals = vec![0.0; m * n];
        let dense = mat(m, n, 1.0, 21, specials);
        for i in 0..m {
            for j in 0..i % 26 {
                let c = (j * 7 + i) % n;
                vals[i * n + c] = dense.get(i, c);
            }
        }
        let x = Matrix::from_dense_values(m, n, vals).unwrap();
        assert!(x.is_sparse(), "the driver must be CSR");
        let u = mat(m, k, 1.0, 22, false);
        let v = mat(n, k, 1.0, 23, false);
        for (ty, shape) in [(OuterType::CellWise, (m, n)), (OuterType::FullAgg, (1, 1))] {
            let ins = [
                Operand::Matrix(&x),
                Operand::Matrix(&u),
                Operand::Matrix(&v),
                Operand::Scalar(1e-3),
            ];
            check(
                &plan(ty),
                &ins,
                &[shape],
                1e-9,
                &format!("{ty:?} specials {specials}"),
            );
        }
    }
}

/// Where the body may be NaN or infinite at a zero of the driver, every cell is visited (the
/// every-cell entry point): a NaN in the row of V of a column where X is all zero, and the log
/// of dot products of either sign; with non-negative factors the non-zeros only.
#[test]
fn outer_visits_every_cell_where_zeros_cannot_be_skipped() {
    let (m, n, k, k2) = (40, 30, 3, 2);
    let j0 = 7;
    let abs = |a: &Matrix| {
        let (r, c) = a.shape();
        let vals = (0..r * c).map(|i| a.get(i / c, i % c).abs()).collect();
        Matrix::from_dense_values(r, c, vals).unwrap()
    };
    for ty in OUTER_TYPES {
        let mut plan = outer_plan(ty);
        // Drop the abs: log(U %*% t(V) + 1e-3).
        plan.nodes[6] = CNode::Binary {
            f: B::Add,
            a: 3,
            b: 4,
        };
        let (w, shape) = outer_w(ty, m, n, k2);
        for density in [0.1, 0.7] {
            let x0 = mat(m, n, density, 1, false);
            let vals = (0..m * n)
                .map(|c| {
                    if c % n == j0 {
                        0.0
                    } else {
                        x0.get(c / n, c % n)
                    }
                })
                .collect();
            let x = Matrix::from_dense_values(m, n, vals)
                .unwrap()
                .examine_and_convert()
                .unwrap();
            let u = abs(&mat(m, k, 1.0, 2, false));
            let v_pos = abs(&mat(n, k, 1.0, 3, false));
            let vals = (0..n * k)
                .map(|c| {
                    if c == j0 * k {
                        f64::NAN
                    } else {
                        v_pos.get(c / k, c % k)
                    }
                })
                .collect();
            let v_nan = Matrix::from_dense_values(n, k, vals).unwrap();
            let v_mixed = mat(n, k, 1.0, 3, false);
            for (v, what) in [
                (&v_nan, "a NaN where X is zero"),
                (&v_mixed, "dot products of either sign"),
                (&v_pos, "non-negative factors"),
            ] {
                let mut ins = vec![Operand::Matrix(&x), Operand::Matrix(&u), Operand::Matrix(v)];
                if plan.inputs.len() == 4 {
                    ins.push(Operand::Matrix(&w));
                }
                let what = format!(
                    "outer {ty:?}, X {} density {density}, {what}",
                    if x.is_sparse() { "sparse" } else { "dense" }
                );
                check(&plan, &ins, &[shape], 1e-9, &what);
            }
        }
    }
}

/// ALS-CG's update `(X * (U %*% t(V))) %*% V`: the right product's matrix is V itself.
#[test]
fn outer_right_product_by_v_itself() {
    let (m, n, k) = (150, 110, 5);
    let plan = CPlan {
        template: TemplateSpec::Outer {
            outer_type: OuterType::Right,
        },
        inputs: vec![InputKind::Matrix; 3],
        nodes: vec![
            data(0, Access::Main),
            data(1, Access::OuterU),
            data(2, Access::OuterV),
            CNode::OuterDot { u: 1, v: 2 },
            CNode::Binary {
                f: B::Mul,
                a: 0,
                b: 3,
            },
            CNode::FinalProduct { g: 4, w: 2 },
        ],
        outputs: vec![5],
    };
    for d in [0.02, 0.5, 1.0] {
        let x = mat(m, n, d, 21, false);
        let u = mat(m, k, 1.0, 22, false);
        for v in [mat(n, k, 1.0, 23, false), mat(n, k, 1.0, 23, true)] {
            for x in [x.clone(), Matrix::Sparse(x.to_sparse())] {
                let ins = [
                    Operand::Matrix(&x),
                    Operand::Matrix(&u),
                    Operand::Matrix(&v),
                ];
                check(
                    &plan,
                    &ins,
                    &[(m, k)],
                    1e-9,
                    &format!("right by V, density {d}"),
                );
            }
        }
    }
}

/// Row plans are built, directly and through the backend seam (their results are compared
/// with LLVM's and the reference's in `native_row.rs`); a construct no backend generates is
/// refused as unsupported, naming it.
#[test]
fn row_plans_are_built_and_unsupported_constructs_named() {
    let nodes = vec![
        data(0, Access::Main),
        CNode::RowAgg {
            f: AggOp::Sum,
            x: 0,
        },
    ];
    let row = CPlan {
        template: TemplateSpec::Row {
            row_type: RowType::RowAgg,
            num_vectors: count_vector_intermediates(&nodes, &[1]),
        },
        inputs: vec![InputKind::Matrix],
        nodes,
        outputs: vec![1],
    };
    let x = mat(7, 5, 1.0, 1, false);
    let op = compile_for(&row, MainFormat::Dense).unwrap();
    let got = op
        .execute_with_ranges(&[Operand::Matrix(&x)], &[(7, 1)], &[])
        .unwrap();
    let want = evaluate(&row, &[Operand::Matrix(&x)], &[(7, 1)]).unwrap();
    assert_close(&got[0], &want[0], 1e-12, "rowSums(X)");
    let plan = Arc::new(row);
    let built = CraneliftBackend::new().build(&[Request {
        plan: &plan,
        main: MainFormat::Dense,
    }]);
    assert!(built[0].is_ok());

    // An outer-product accumulation that is not the output.
    let nodes = vec![
        data(0, Access::Main),
        data(1, Access::ColVector),
        CNode::OuterMultAdd { a: 0, b: 1 },
        CNode::Binary {
            f: B::Add,
            a: 2,
            b: 1,
        },
    ];
    let bad = CPlan {
        template: TemplateSpec::Row {
            row_type: RowType::ColAggT,
            num_vectors: count_vector_intermediates(&nodes, &[3]),
        },
        inputs: vec![InputKind::Matrix; 2],
        nodes,
        outputs: vec![3],
    };
    let e = compile_for(&bad, MainFormat::Dense).unwrap_err();
    assert_eq!(e.fault(), Fault::Unsupported, "{e}");
    assert!(e.to_string().contains("outer-product"), "{e}");
}

/// The backend builds operators that run as `Executable`s and report their compile time, and
/// keeps them: a second request of the same plans is a cache hit.
#[test]
fn the_backend_builds_executables() {
    let plans: Vec<Arc<CPlan>> = [
        cell_plan(CellType::FullAgg, Some(CellAgg::Sum), true),
        magg_plan(vec![CellAgg::Sum, CellAgg::Max]),
    ]
    .into_iter()
    .map(Arc::new)
    .collect();
    let requests: Vec<Request<'_>> = plans
        .iter()
        .map(|plan| Request {
            plan,
            main: MainFormat::Dense,
        })
        .collect();
    let backend = CraneliftBackend::new();
    let built = backend.build(&requests);
    assert_eq!(backend.len(), 2);
    for b in &built {
        assert!(matches!(
            b.as_ref().unwrap().origin,
            Origin::Compiled { .. }
        ));
    }
    for b in backend.build(&requests) {
        assert_eq!(b.unwrap().origin, Origin::CacheHit);
    }
    let (x, y) = (mat(20, 30, 1.0, 1, false), mat(20, 30, 1.0, 2, false));
    let (r, c) = (mat(1, 30, 1.0, 3, false), mat(20, 1, 1.0, 4, false));
    let ins = [
        Operand::Matrix(&x),
        Operand::Matrix(&y),
        Operand::Matrix(&r),
        Operand::Matrix(&c),
        Operand::Scalar(0.25),
    ];
    let cell = built[0].as_ref().unwrap();
    assert!(cell.executable.compile_time() > std::time::Duration::ZERO);
    let got = cell.executable.execute(&ins, &[(1, 1)], &[]).unwrap();
    let want = evaluate(&plans[0], &ins, &[(1, 1)]).unwrap();
    assert_close(&got[0], &want[0], 1e-12, "backend cell");
    let magg = built[1].as_ref().unwrap();
    let got = magg
        .executable
        .execute(&ins[..2], &[(1, 1), (1, 1)], &[])
        .unwrap();
    let want = evaluate(&plans[1], &ins[..2], &[(1, 1), (1, 1)]).unwrap();
    for (g, w) in got.iter().zip(&want) {
        assert_close(g, w, 1e-12, "backend magg");
    }
}

/// A sum that stays finite beside one that overflows: LLVM's entry adds the first pass without
/// resets and, finding a sum not finite, adds every sum again from the partial with resets;
/// Cranelift resets at every add, and keeps a full aggregate's vectors but the first in the
/// partial (one copy of the body) where LLVM keeps them in registers. The finite sum is the
/// same to the bit either way: its cells land in the same lanes on both passes and both
/// backends. `sum(X * Y)` and `sum((X * Y)^2)` over
/// products near 1e200, dense (one stretch of cells, long enough for whole steps of every
/// vector accumulator) and CSR, one task and several.
#[test]
fn a_finite_sum_beside_an_overflowing_one_keeps_its_lanes_when_added_again() {
    let plan = product_sums_magg_plan();
    for (m, n) in [(300, 170), (37, 29), (5, 100)] {
        let base = mat(m, n, 1.0, 31, false);
        let vals = (0..m * n)
            .map(|k| base.get(k / n, k % n).abs() * 1e200 + 1e199)
            .collect();
        let x = Matrix::from_dense_values(m, n, vals).unwrap();
        let y = mat(m, n, 1.0, 32, false);
        for x in [x.clone(), Matrix::Sparse(x.to_sparse())] {
            let ins = [Operand::Matrix(&x), Operand::Matrix(&y)];
            let what = format!("{m}x{n}, sparse {}", x.is_sparse());
            check(&plan, &ins, &[(1, 1), (1, 1)], 1e-9, &what);
            let got = run(&plan, &ins, &[(1, 1), (1, 1)], &what);
            assert!(got[0].get(0, 0).is_finite(), "{what}: the sum overflowed");
            assert!(!got[1].get(0, 0).is_finite(), "{what}: the squares did not");
        }
    }
}
