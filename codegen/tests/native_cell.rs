//! Differential tests: native Cell, MultiAgg and Outer operators against the reference
//! evaluator, over every cell type and aggregation, dense and sparse main inputs, every side
//! input access, special values, empty and 1x1 inputs.
#![cfg(feature = "llvm")]

use lafuse_codegen::native::math::scalar;
use lafuse_codegen::native::{compile, OperatorCache};
use lafuse_codegen::reference::{evaluate, Operand};
use lafuse_compiler::fusion::cplan::{Access, CNode, CPlan, InputKind, OuterType, TemplateSpec};
use lafuse_compiler::fusion::template::{CellAgg, CellType};
use lafuse_compiler::hops::{BinaryOp as B, UnaryOp as U};
use lafuse_runtime::{DenseMatrix, Matrix};

mod common;
use common::cell_plans::*;

fn check(plan: &CPlan, inputs: &[Operand<'_>], shapes: &[(usize, usize)], tol: f64, what: &str) {
    let op = compile(plan).unwrap_or_else(|e| panic!("{what}: {e}\n{}", plan.explain()));
    let got = op
        .execute(inputs, shapes)
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    let want = evaluate(plan, inputs, shapes).unwrap();
    for (g, w) in got.iter().zip(&want) {
        assert_close(g, w, tol, what);
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

/// Plans whose inputs are all aligned with the main input (or scalars) run their no-aggregate
/// and full-aggregate dense entries as one stretch of cells per task, across row ends: column
/// vectors (one cell per row), single rows, lengths that are not a multiple of the vector
/// width, parallel tasks, streamed sparse side inputs and densified sparse main inputs.
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

/// A body in the transposed frame of a column-vector main input: `t(x * y) * r + s` with `x`
/// m×1 main, `y` m×1 aligned inside the transpose, `r` 1×m read per cell of the 1×m body, for
/// every cell type (the row and column aggregates of the 1×m body are the column and row
/// aggregates of the walk over x), NaN and infinities included, m = 1 and 0 too.
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
            // The body is 1×m.
            let shape = shape_of(ty, 1, m);
            let inputs = [
                Operand::Matrix(&x),
                Operand::Matrix(&y),
                Operand::Matrix(&r),
                Operand::Scalar(0.5),
            ];
            check(
                &plan,
                &inputs,
                &[shape],
                1e-12,
                &format!("{ty:?} {agg:?} m={m}"),
            );
        }
    }
}

#[test]
fn unary_binary_ternary_ops_match_on_special_values() {
    let (specials, xa, xb, plans) = special_value_cases();
    let k = specials.len();
    let ins = [Operand::Matrix(&xa), Operand::Matrix(&xb)];
    for (name, plan) in plans {
        let op = compile(&plan).unwrap();
        let got = op.execute(&ins, &[(k, k)]).unwrap();
        let want = evaluate(&plan, &ins, &[(k, k)]).unwrap();
        // Generated log and exp compute the runtime's `math` functions, which the reference
        // calls too: every body, sigmoid and log-base included, agrees to the bit.
        for i in 0..k {
            for j in 0..k {
                let (g, w) = (got[0].get(i, j), want[0].get(i, j));
                assert!(
                    (g.is_nan() && w.is_nan()) || g.to_bits() == w.to_bits(),
                    "{name}({}, {}): native {g} reference {w}",
                    specials[i],
                    specials[j]
                );
            }
        }
    }
}

/// The generated vector `log`, `exp`, sigmoid and `tanh` (inline IR, every lane at once) give their
/// scalar statements (`math::scalar`) to the bit, on every kind of double: subnormals, values near 1
/// and 0, huge values, the overflow and underflow edges, zeros, negatives and non-finite
/// values, in a dense loop (vector lanes) and its scalar tail.
#[test]
fn vector_math_matches_the_runtime_to_the_bit() {
    let (vals, rows) = math_values();
    let cols = 7;
    let x = Matrix::Dense(DenseMatrix::new(rows, cols, vals.clone()).unwrap());
    let runtime = |f: U, v: f64| match f {
        U::Log => scalar::ln(v),
        U::Exp => scalar::exp(v),
        U::Tanh => scalar::tanh(v),
        _ => 1.0 / (1.0 + scalar::exp(-v)),
    };
    for f in [U::Log, U::Exp, U::Sigmoid, U::Tanh] {
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
        let got = compile(&plan)
            .unwrap()
            .execute(&[Operand::Matrix(&x)], &[(rows, cols)])
            .unwrap();
        for (k, &v) in vals.iter().enumerate() {
            let (g, w) = (got[0].get(k / cols, k % cols), runtime(f, v));
            // (A matrix cell holds no -0.0: tanh(-0.0) is stored as 0.)
            assert!(
                (g.is_nan() && w.is_nan()) || g.to_bits() == w.to_bits() || (g == 0.0 && w == 0.0),
                "{f:?}({v:e}): native {g:e}, runtime {w:e}"
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
            check(
                &plan,
                &[Operand::Matrix(&x), Operand::Matrix(&y)],
                &shapes,
                1e-9,
                &format!("magg {aggs:?} {m}x{n}"),
            );
        }
    }
}

/// Full sums that overflow or meet an infinity: a full aggregate's first pass adds without
/// resetting its corrections and checks the sums at the end, and a sum that is not finite is
/// added again with resets. Either way the result is the runtime's: an overflowed sum stays
/// infinite (without the second pass it turns NaN through `Inf - Inf` in its correction), a
/// finite one beside it is unchanged, and `Inf` and `-Inf` together make NaN. Dense and CSR
/// main inputs, one stretch of cells and row by row, one task and several.
#[test]
fn full_sums_that_stop_being_finite_are_added_again_with_resets() {
    // sum(X * Y) and sum((X * exp(Y))^2).
    let plan = sparse_safe_magg_plan();
    let op = compile(&plan).unwrap();
    let scaled = |m: &Matrix, f: &dyn Fn(f64) -> f64| {
        let (r, c) = m.shape();
        let v = (0..r * c).map(|k| f(m.get(k / c, k % c))).collect();
        Matrix::from_dense_values(r, c, v).unwrap()
    };
    for (m, n, d) in [(300, 170, 0.3), (37, 29, 1.0), (13, 1, 1.0), (1, 1, 1.0)] {
        let base = mat(m, n, d, 21, false);
        let y = scaled(&mat(m, n, 1.0, 22, false), &|v| v.abs() + 1.0);
        for (what, x, y, sum_finite) in [
            // Products near 1e200: their sum is finite, their squares overflow.
            (
                "squares overflow",
                scaled(&base, &|v| v.abs() * 1e200),
                y.clone(),
                true,
            ),
            // Products near 1e307: the sum overflows too.
            (
                "both overflow",
                scaled(&base, &|v| v.abs() * 1e307),
                y.clone(),
                false,
            ),
            // One infinite side value among finite ones.
            (
                "an infinity",
                base.clone(),
                with_cell(&y, m * n / 2, f64::INFINITY),
                false,
            ),
            // Infinities of both signs: NaN.
            (
                "both infinities",
                base.clone(),
                with_cell(
                    &with_cell(&y, m * n / 3, f64::INFINITY),
                    m * n - 1,
                    f64::NEG_INFINITY,
                ),
                false,
            ),
        ] {
            for x in [x.clone(), Matrix::Sparse(x.to_sparse())] {
                let ins = [Operand::Matrix(&x), Operand::Matrix(&y)];
                let got = op.execute(&ins, &[(1, 1), (1, 1)]).unwrap();
                let want = evaluate(&plan, &ins, &[(1, 1), (1, 1)]).unwrap();
                let what = format!("{what}, {m}x{n}, sparse {}", x.is_sparse());
                for (g, w) in got.iter().zip(&want) {
                    assert_close(g, w, 1e-9, &what);
                }
                if x.nnz() > 1 {
                    assert_eq!(got[0].get(0, 0).is_finite(), sum_finite, "{what}");
                    assert!(!got[1].get(0, 0).is_finite(), "{what}");
                }
            }
        }
    }
}

/// `m` with its `k`-th cell (row-major) set to `v`.
fn with_cell(m: &Matrix, k: usize, v: f64) -> Matrix {
    let (r, c) = m.shape();
    let mut vals: Vec<f64> = (0..r * c).map(|k| m.get(k / c, k % c)).collect();
    vals[k] = v;
    Matrix::from_dense_values(r, c, vals).unwrap()
}

/// A CSR walk that gathers a wide dense side input runs a chunk of rows per call, the next
/// chunk's gathered lines prefetched (the skeletons' `gather_prefetch`); one that reads the
/// same values from a sparse side input runs blocks of another size, densifying each. Both
/// carry their sums in the task's partial from call to call, so they give the same bits.
#[test]
fn a_csr_walk_gives_the_same_bits_gathering_in_chunks_and_streaming_in_blocks() {
    let plan = sparse_safe_magg_plan();
    let op = compile(&plan).unwrap();
    for (m, n, d) in [(300, 170, 0.02), (2000, 300, 0.01)] {
        let x = Matrix::Sparse(mat(m, n, d, 31, false).to_sparse());
        let y = mat(m, n, 0.3, 32, false);
        let dense = Matrix::Dense(y.to_dense().unwrap());
        let sparse = Matrix::Sparse(y.to_sparse());
        let run = |y: &Matrix| {
            op.execute(
                &[Operand::Matrix(&x), Operand::Matrix(y)],
                &[(1, 1), (1, 1)],
            )
            .unwrap()
        };
        let (gathered, streamed) = (run(&dense), run(&sparse));
        let want = evaluate(
            &plan,
            &[Operand::Matrix(&x), Operand::Matrix(&dense)],
            &[(1, 1), (1, 1)],
        )
        .unwrap();
        for k in 0..2 {
            let (g, s) = (gathered[k].get(0, 0), streamed[k].get(0, 0));
            assert_eq!(
                g.to_bits(),
                s.to_bits(),
                "{m}x{n}, sum {k}: {g} against {s}"
            );
            assert_close(&gathered[k], &want[k], 1e-9, &format!("{m}x{n}, sum {k}"));
        }
    }
}

#[test]
fn sparse_safe_multi_aggregates_visit_non_zeros_only_while_side_inputs_are_finite() {
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
            let op = compile(&plan).unwrap();
            let ins = [Operand::Matrix(&x), Operand::Matrix(&y)];
            let got = op.execute(&ins, &[(1, 1), (1, 1)]).unwrap();
            let want = evaluate(&plan, &ins, &[(1, 1), (1, 1)]).unwrap();
            let what = format!("sparse-safe magg {m}x{n} d={d} specials={specials}");
            for (g, w) in got.iter().zip(&want) {
                assert_close(g, w, 1e-9, &what);
            }
            // Finite side inputs take the CSR entry point; non-finite ones every cell.
            let finite = (0..m).all(|i| (0..n).all(|j| y.get(i, j).is_finite()));
            if m * n > 0 {
                assert_eq!(op.csr_llvm_ir().is_some(), finite, "{what}");
            }
        }
    }
}

#[test]
fn outer_all_types_over_sparse_and_dense_drivers() {
    let (m, n, k, k2) = (120, 90, 7, 3);
    for d in [0.03, 0.6] {
        let x = mat(m, n, d, 7, false);
        let u = mat(m, k, 1.0, 8, false);
        let v = mat(n, k, 1.0, 9, false);
        for ty in [
            OuterType::CellWise,
            OuterType::FullAgg,
            OuterType::Right,
            OuterType::Left,
            OuterType::LeftT,
        ] {
            let (w, shape) = match ty {
                OuterType::Right => (mat(n, k2, 1.0, 10, false), (m, k2)),
                OuterType::Left => (mat(k2, m, 1.0, 11, false), (n, k2)),
                OuterType::LeftT => (mat(k2, m, 1.0, 11, false), (k2, n)),
                OuterType::CellWise => (Matrix::scalar(0.0), (m, n)),
                OuterType::FullAgg => (Matrix::scalar(0.0), (1, 1)),
            };
            let plan = outer_plan(ty);
            let mut ins = vec![
                Operand::Matrix(&x),
                Operand::Matrix(&u),
                Operand::Matrix(&v),
            ];
            if plan.inputs.len() == 4 {
                ins.push(Operand::Matrix(&w));
            }
            check(
                &plan,
                &ins,
                &[shape],
                1e-9,
                &format!("outer {ty:?} density {d}"),
            );
        }
    }
}

/// A Left product by `t(U)` read as the rows of the dot products' `U`, over sparse, dense
/// and all-non-zero drivers (the last over tiles), ranks around the vector width, against
/// the reference, which transposes U.
#[test]
fn outer_left_products_by_the_factor_u_read_its_rows() {
    check_outer_left_by_u(&check);
}

/// A CSR driver's rows with at least `W` non-zeros are taken `W` at a time (`W` dot products,
/// then the body on `W` lanes): rows of every length around the lane count, NaN and
/// infinities among the driver's values, a scalar input in the body, and the cell-wise and
/// full-aggregate final steps, which are the ones taken this way.
#[test]
fn outer_csr_rows_taken_w_non_zeros_at_a_time() {
    // G = X * log(abs(U %*% t(V)) + s), s a scalar input in place of `outer_plan`'s literal.
    let plan = |ty| {
        let mut p = outer_plan(ty);
        p.nodes[4] = data(3, Access::Scalar);
        p.inputs.push(InputKind::Scalar);
        p
    };
    let (m, k) = (70, 13);
    // Row i of the driver holds i % 26 non-zeros: 0 to 25, so every remainder modulo W.
    let n = 40;
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
            let p = plan(ty);
            let ins = [
                Operand::Matrix(&x),
                Operand::Matrix(&u),
                Operand::Matrix(&v),
                Operand::Scalar(1e-3),
            ];
            check(
                &p,
                &ins,
                &[shape],
                1e-9,
                &format!("{ty:?} specials {specials}"),
            );
            let op = compile(&p).unwrap();
            op.execute(&ins, &[shape]).unwrap();
            let ir = op.csr_llvm_ir().expect("the CSR entry was compiled");
            // The body's log on 8 lanes (without lane batches, only its one-lane form).
            assert!(
                ir.contains("@lafuse_log_v8"),
                "{ty:?}: no W-lane body in\n{ir}"
            );
        }
    }
}

/// Where the body may be NaN or infinite at a zero of the driver, an Outer operator visits
/// every cell, as unfused execution does, instead of skipping the zeros: here a NaN in the row
/// of V of a column where X is all zero (so `0 * log(NaN)` is NaN only at zeros of X), and the
/// log of dot products that may be negative. Every type, over sparse and dense drivers,
/// matches the reference evaluator (NaN included); with non-negative factors the same plan
/// visits the non-zeros only and matches too.
#[test]
fn outer_visits_every_cell_where_zeros_cannot_be_skipped() {
    let (m, n, k, k2) = (40, 30, 3, 2);
    let j0 = 7;
    let abs = |a: &Matrix| {
        let (r, c) = a.shape();
        let vals = (0..r * c).map(|i| a.get(i / c, i % c).abs()).collect();
        Matrix::from_dense_values(r, c, vals).unwrap()
    };
    for ty in [
        OuterType::CellWise,
        OuterType::FullAgg,
        OuterType::Right,
        OuterType::Left,
        OuterType::LeftT,
    ] {
        let mut plan = outer_plan(ty);
        // Drop the abs: log(U %*% t(V) + 1e-3).
        plan.nodes[6] = CNode::Binary {
            f: B::Add,
            a: 3,
            b: 4,
        };
        let (w, shape) = match ty {
            OuterType::Right => (mat(n, k2, 1.0, 10, false), (m, k2)),
            OuterType::Left => (mat(k2, m, 1.0, 11, false), (n, k2)),
            OuterType::LeftT => (mat(k2, m, 1.0, 11, false), (k2, n)),
            OuterType::CellWise => (Matrix::scalar(0.0), (m, n)),
            OuterType::FullAgg => (Matrix::scalar(0.0), (1, 1)),
        };
        for density in [0.1, 0.7] {
            // X with column j0 empty; V with a NaN in row j0.
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

/// ALS-CG's update `(X * (U %*% t(V))) %*% V`: the right product's matrix is V itself, read
/// by the dot products too.
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
        let v = mat(n, k, 1.0, 23, false);
        for x in [x.clone(), Matrix::Sparse(x.to_sparse())] {
            check(
                &plan,
                &[
                    Operand::Matrix(&x),
                    Operand::Matrix(&u),
                    Operand::Matrix(&v),
                ],
                &[(m, k)],
                1e-9,
                &format!("outer right by V density {d}"),
            );
        }
        // A NaN or infinity in V reaches the zeros of X too (`0 * NaN`): the call visits
        // every cell, and matches the reference.
        let bad = mat(n, k, 1.0, 23, true);
        let ins = [
            Operand::Matrix(&x),
            Operand::Matrix(&u),
            Operand::Matrix(&bad),
        ];
        check(
            &plan,
            &ins,
            &[(m, k)],
            1e-9,
            &format!("outer right by V with NaN and infinities, density {d}"),
        );
    }
}

#[test]
fn unsupported_row_constructs_and_bad_inputs_are_errors() {
    // A Row plan whose outer-product accumulation is not its output has no native form.
    let plan = CPlan {
        template: TemplateSpec::Row {
            row_type: lafuse_compiler::fusion::cplan::RowType::ColAggT,
            num_vectors: 0,
        },
        inputs: vec![InputKind::Matrix],
        nodes: vec![
            data(0, Access::Main),
            CNode::OuterMultAdd { a: 0, b: 0 },
            CNode::Binary {
                f: B::Add,
                a: 1,
                b: 0,
            },
        ],
        outputs: vec![2],
    };
    let e = compile(&plan).unwrap_err();
    assert!(e.to_string().starts_with("unsupported:"), "{e}");
    let plan = cell_plan(CellType::FullAgg, Some(CellAgg::Sum), true);
    let op = compile(&plan).unwrap();
    let x = mat(5, 4, 1.0, 1, false);
    let bad = mat(4, 4, 1.0, 1, false);
    let r = mat(1, 4, 1.0, 1, false);
    let c = mat(5, 1, 1.0, 1, false);
    let ins = [
        Operand::Matrix(&x),
        Operand::Matrix(&bad),
        Operand::Matrix(&r),
        Operand::Matrix(&c),
        Operand::Scalar(1.0),
    ];
    assert!(op.execute(&ins, &[(1, 1)]).is_err());
    assert!(op.execute(&ins[..3], &[(1, 1)]).is_err());
}

#[test]
fn dense_sum_loop_uses_packed_simd() {
    let plan = sum_xyz();
    let op = compile(&plan).unwrap();
    let asm = op.assembly();
    let packed = asm.lines().any(|l| {
        (l.contains("vaddpd") || l.contains("vmulpd")) && (l.contains("%ymm") || l.contains("%zmm"))
    });
    assert!(packed, "no packed AVX arithmetic in:\n{asm}");
    assert!(op.llvm_ir().contains("target-cpu"));
}

/// Different plans compiled at once (a block's operators, in parallel) each give their own
/// correct operator; a repeated plan in the same request is compiled once.
#[test]
fn plans_looked_up_together_compile_in_parallel_and_in_order() {
    use lafuse_codegen::native::Lookup;
    let cache = OperatorCache::new();
    let plans = [
        cell_plan(CellType::RowAgg, Some(CellAgg::Max), false),
        cell_plan(CellType::FullAgg, Some(CellAgg::Sum), true),
        cell_plan(CellType::ColAgg, Some(CellAgg::Min), false),
        cell_plan(CellType::NoAgg, None, true),
        cell_plan(CellType::FullAgg, Some(CellAgg::Sum), true),
    ];
    let refs: Vec<&CPlan> = plans.iter().collect();
    let got = cache.lookup_all(&refs);
    assert_eq!(got.len(), plans.len());
    let misses = got
        .iter()
        .filter(|(_, l)| matches!(l, Lookup::Miss(_)))
        .count();
    assert_eq!(misses, 4);
    let (x, y, r, c) = (
        mat(30, 20, 0.3, 1, false),
        mat(30, 20, 1.0, 2, true),
        mat(1, 20, 1.0, 3, false),
        mat(30, 1, 1.0, 4, false),
    );
    let ins = [
        Operand::Matrix(&x),
        Operand::Matrix(&y),
        Operand::Matrix(&r),
        Operand::Matrix(&c),
        Operand::Scalar(2.5),
    ];
    for (plan, (op, _)) in plans.iter().zip(&got) {
        let op = op.as_ref().unwrap();
        let TemplateSpec::Cell { cell_type, .. } = &plan.template else {
            unreachable!("cell plans only")
        };
        let shape = shape_of(*cell_type, 30, 20);
        let got = op.execute(&ins, &[shape]).unwrap();
        let want = evaluate(plan, &ins, &[shape]).unwrap();
        assert_close(&got[0], &want[0], 1e-9, "parallel lookup");
    }
}

#[test]
fn cache_hits_and_compiles_once_under_concurrency() {
    let cache = OperatorCache::new();
    let plan = cell_plan(CellType::RowAgg, Some(CellAgg::Max), false);
    let ops: Vec<_> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..4)
            .map(|_| s.spawn(|| cache.get(&plan).unwrap()))
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for o in &ops[1..] {
        assert!(std::sync::Arc::ptr_eq(&ops[0], o));
    }
    let st = cache.stats();
    assert_eq!((st.misses, st.hits), (1, 3));
    assert_eq!(st.per_operator.len(), 1);
    let again = cache.get(&plan).unwrap();
    assert!(std::sync::Arc::ptr_eq(&ops[0], &again));
    assert_eq!(cache.stats().hits, 4);
    cache.evict(&plan);
    cache.get(&plan).unwrap();
    let st = cache.stats();
    assert_eq!(
        st.miss_reasons
            .get(&lafuse_codegen::native::MissReason::Evicted),
        Some(&1)
    );
}

/// The on-disk object store: a cache compiles through it (object code, kept), a later cache
/// (another process, in practice) loads the same operator from it instead of compiling, and
/// both give the reference's results, for the dense entry point and for the CSR one compiled
/// on the first sparse call. The loaded operator still shows its optimized IR.
#[test]
fn object_store_loads_what_an_earlier_cache_compiled() {
    use lafuse_codegen::native::ObjectStore;
    use std::sync::Arc;
    let dir = std::env::temp_dir().join(format!("lafuse-object-store-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let store = Arc::new(ObjectStore::open(&dir).unwrap());
    let plan = cell_plan(CellType::RowAgg, Some(CellAgg::Sum), true);
    let (m, n) = (300, 40);
    let (y, r, c) = (
        mat(m, n, 1.0, 2, false),
        mat(1, n, 1.0, 3, false),
        mat(m, 1, 1.0, 4, false),
    );
    let shape = shape_of(CellType::RowAgg, m, n);
    let run = |cache: &OperatorCache| {
        let op = cache.get(&plan).unwrap();
        for density in [1.0, 0.05] {
            let x = mat(m, n, density, 1, false);
            let ins = [
                Operand::Matrix(&x),
                Operand::Matrix(&y),
                Operand::Matrix(&r),
                Operand::Matrix(&c),
                Operand::Scalar(0.25),
            ];
            let got = op.execute(&ins, &[shape]).unwrap();
            let want = evaluate(&plan, &ins, &[shape]).unwrap();
            assert_close(&got[0], &want[0], 1e-12, &format!("density {density}"));
        }
        assert!(op.llvm_ir().contains("define"), "{}", op.llvm_ir());
        cache.stats()
    };
    let first = run(&OperatorCache::with_store(Arc::clone(&store)));
    assert_eq!((first.misses, first.store_loads), (1, 0));
    // The dense and the CSR entry points were kept, each with its plan marker (which a tiered
    // backend reads).
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 4);
    let second = run(&OperatorCache::with_store(Arc::clone(&store)));
    assert_eq!((second.misses, second.store_loads), (1, 1));
    let _ = std::fs::remove_dir_all(&dir);
}

/// The cache is bounded: beyond its capacity the least recently used operator goes, and its
/// machine code with it once nothing else holds the operator; asking for it again compiles
/// (a miss of reason `Evicted`).
#[test]
fn a_full_cache_drops_its_least_recently_used_operator_and_frees_its_code() {
    use lafuse_codegen::native::MissReason;
    let cache = OperatorCache::with_capacity(2);
    let plans = [
        cell_plan(CellType::RowAgg, Some(CellAgg::Max), false),
        cell_plan(CellType::ColAgg, Some(CellAgg::Sum), false),
        cell_plan(CellType::FullAgg, Some(CellAgg::Min), false),
    ];
    let first = std::sync::Arc::downgrade(&cache.get(&plans[0]).unwrap());
    cache.get(&plans[1]).unwrap();
    // Plan 0 used again: plan 1 is now the least recently used.
    cache.get(&plans[0]).unwrap();
    cache.get(&plans[2]).unwrap();
    assert_eq!(cache.len(), 2);
    assert!(first.upgrade().is_some(), "plan 0 was used last but one");
    cache.get(&plans[1]).unwrap();
    assert_eq!(cache.len(), 2);
    // Plan 0 was the least recently used: dropped, and its operator with it.
    assert!(
        first.upgrade().is_none(),
        "an evicted operator's code is freed"
    );
    let st = cache.stats();
    assert_eq!(st.miss_reasons.get(&MissReason::Evicted), Some(&1));
    assert_eq!((st.misses, st.hits), (4, 1));
}
