//! Plans and inputs shared by the differential tests of the native backends (LLVM in
//! `native_cell.rs`, Cranelift in `cranelift_cell.rs`): Cell bodies over every side-input
//! access, MultiAgg plans, special values, pseudo-random matrices, and tolerant comparison.
#![allow(dead_code)]

use lafuse_codegen::reference::Operand;
use lafuse_compiler::fusion::cplan::{Access, CNode, CPlan, InputKind, OuterType, TemplateSpec};
use lafuse_compiler::fusion::template::{CellAgg, CellType};
use lafuse_compiler::hops::{BinaryOp as B, Literal, NaryOp, TernaryOp, UnaryOp as U};
use lafuse_runtime::{DenseMatrix, Matrix};

/// Deterministic pseudo-random matrix with the given density, optionally with specials.
pub fn mat(rows: usize, cols: usize, density: f64, seed: u64, specials: bool) -> Matrix {
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    let mut vals = Vec::with_capacity(rows * cols);
    for k in 0..rows * cols {
        s = s
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let u = (s >> 11) as f64 / (1u64 << 53) as f64;
        s = s
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let v = ((s >> 11) as f64 / (1u64 << 53) as f64) * 4.0 - 2.0;
        let mut x = if u < density { v } else { 0.0 };
        if specials && k % 97 == 13 && x != 0.0 {
            x = [f64::NAN, f64::INFINITY, f64::NEG_INFINITY][k % 3];
        }
        vals.push(x);
    }
    Matrix::from_dense_values(rows, cols, vals).unwrap()
}

pub fn close(a: f64, b: f64, tol: f64) -> bool {
    (a.is_nan() && b.is_nan()) || a == b || (a - b).abs() <= tol * a.abs().max(b.abs()).max(1.0)
}

pub fn assert_close(got: &Matrix, want: &Matrix, tol: f64, what: &str) {
    assert_eq!(got.shape(), want.shape(), "{what}: shape");
    got.validate().unwrap();
    let (r, c) = got.shape();
    for i in 0..r {
        for j in 0..c {
            let (g, w) = (got.get(i, j), want.get(i, j));
            assert!(
                close(g, w, tol),
                "{what}: ({i},{j}) native {g} reference {w}"
            );
        }
    }
}

pub fn data(input: usize, access: Access) -> CNode {
    CNode::Data { input, access }
}
pub fn lit(v: f64) -> CNode {
    CNode::Literal {
        value: Literal::Double(v),
    }
}

/// Body over [X main, Y aligned, r row vector, c col vector, s scalar]; `safe` keeps it zero
/// where X is zero: X * (Y + r) * c + ... else a mix of non-sparse-safe ops.
/// The body over inputs X (main), Y (aligned), R, C and a scalar, with R and C read as a row
/// and a column vector (`broadcast`) or as matrices aligned with X.
pub fn cell_nodes(safe: bool, broadcast: bool) -> (Vec<CNode>, usize) {
    let (r, c) = if broadcast {
        (Access::RowVector, Access::ColVector)
    } else {
        (Access::Aligned, Access::Aligned)
    };
    let mut n = vec![
        data(0, Access::Main),    // 0
        data(1, Access::Aligned), // 1
        data(2, r),               // 2
        data(3, c),               // 3
        data(4, Access::Scalar),  // 4
    ];
    let p = |n: &mut Vec<CNode>, c: CNode| {
        n.push(c);
        n.len() - 1
    };
    let yr = p(
        &mut n,
        CNode::Binary {
            f: B::Add,
            a: 1,
            b: 2,
        },
    );
    let yrc = p(
        &mut n,
        CNode::Binary {
            f: B::Mul,
            a: yr,
            b: 3,
        },
    );
    let m = p(
        &mut n,
        CNode::Binary {
            f: B::Max,
            a: yrc,
            b: 4,
        },
    );
    if safe {
        let out = p(
            &mut n,
            CNode::Binary {
                f: B::Mul,
                a: 0,
                b: m,
            },
        );
        (n, out)
    } else {
        let e = p(&mut n, CNode::Unary { f: U::Exp, x: 0 });
        let s = p(
            &mut n,
            CNode::Unary {
                f: U::Sigmoid,
                x: m,
            },
        );
        let t = p(
            &mut n,
            CNode::Binary {
                f: B::Sub,
                a: e,
                b: s,
            },
        );
        let two = p(&mut n, lit(2.0));
        let pw = p(
            &mut n,
            CNode::Binary {
                f: B::Pow,
                a: t,
                b: two,
            },
        );
        let md = p(
            &mut n,
            CNode::Binary {
                f: B::Mod,
                a: pw,
                b: 4,
            },
        );
        let out = p(
            &mut n,
            CNode::Nary {
                f: NaryOp::Min,
                xs: vec![md, 1, e],
            },
        );
        (n, out)
    }
}

pub fn cell_plan(ty: CellType, agg: Option<CellAgg>, safe: bool) -> CPlan {
    cell_plan_reading(ty, agg, safe, true)
}

pub fn cell_plan_reading(ty: CellType, agg: Option<CellAgg>, safe: bool, broadcast: bool) -> CPlan {
    let (nodes, out) = cell_nodes(safe, broadcast);
    CPlan {
        template: TemplateSpec::Cell {
            cell_type: ty,
            agg,
            sparse_safe: safe,
        },
        inputs: vec![
            InputKind::Matrix,
            InputKind::Matrix,
            InputKind::Matrix,
            InputKind::Matrix,
            InputKind::Scalar,
        ],
        nodes,
        outputs: vec![out],
    }
}

pub fn shape_of(ty: CellType, m: usize, n: usize) -> (usize, usize) {
    match ty {
        CellType::NoAgg => (m, n),
        CellType::RowAgg => (m, 1),
        CellType::ColAgg => (1, n),
        CellType::FullAgg => (1, 1),
    }
}

/// A backend's check of one call against the reference: plan, inputs, output shapes,
/// tolerance, what to name in a failure.
pub type Check = dyn Fn(&CPlan, &[Operand<'_>], &[(usize, usize)], f64, &str);

/// Every cell type and aggregation of the body of [`cell_nodes`] (R and C read as a row and a
/// column vector, `broadcast`, or as matrices aligned with X), safe and unsafe, over each shape,
/// dense and sparse main input and each (sparse side input, special values) case, against the
/// reference through `check`.
pub fn check_cell_variants(
    check: &Check,
    shapes: &[(usize, usize)],
    side_cases: &[(bool, bool)],
    broadcast: bool,
) {
    let aggs = [CellAgg::Sum, CellAgg::SumSq, CellAgg::Min, CellAgg::Max];
    let mut cases = vec![(CellType::NoAgg, None)];
    for ty in [CellType::RowAgg, CellType::ColAgg, CellType::FullAgg] {
        cases.extend(aggs.iter().map(|&a| (ty, Some(a))));
    }
    for &(m, n) in shapes {
        for main_density in [1.0, 0.05] {
            for &(side_sparse, specials) in side_cases {
                let x = mat(m, n, main_density, 1, specials);
                let y = mat(m, n, if side_sparse { 0.1 } else { 1.0 }, 2, specials);
                let (r, c) = if broadcast {
                    (mat(1, n, 1.0, 3, false), mat(m, 1, 1.0, 4, false))
                } else {
                    (mat(m, n, 1.0, 3, false), mat(m, n, 1.0, 4, specials))
                };
                let ins = [
                    Operand::Matrix(&x),
                    Operand::Matrix(&y),
                    Operand::Matrix(&r),
                    Operand::Matrix(&c),
                    Operand::Scalar(0.25),
                ];
                for safe in [true, false] {
                    for &(ty, agg) in &cases {
                        let plan = cell_plan_reading(ty, agg, safe, broadcast);
                        let what = format!(
                            "{}{m}x{n} dens {main_density} side_sparse {side_sparse} \
                             specials {specials} safe {safe} {ty:?} {agg:?}",
                            if broadcast { "" } else { "aligned " }
                        );
                        check(&plan, &ins, &[shape_of(ty, m, n)], 1e-9, &what);
                    }
                }
            }
        }
    }
}

/// Every unary, binary and ternary operation (and pow2, mult2, n-ary max) as a no-aggregate
/// Cell plan over two aligned k×k matrices holding every pair of special values (zeros of both
/// signs, NaN, infinities, Java `round`'s edges): the special values, the two matrices and
/// the named plans.
pub fn special_value_cases() -> (Vec<f64>, Matrix, Matrix, Vec<(String, CPlan)>) {
    let specials = [
        0.0,
        -0.0,
        1.0,
        -1.0,
        2.5,
        -2.5,
        0.5,
        1e300,
        -1e-300,
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        3.0,
        7.0,
        -7.0,
        // Java's round: the largest double below 0.5, ties, and the clamp to +-2^63.
        0.49999999999999994,
        -0.5,
        1e19,
        -1e19,
    ];
    let k = specials.len();
    let mut a = Vec::new();
    let mut b = Vec::new();
    for &x in &specials {
        for &y in &specials {
            a.push(x);
            b.push(y);
        }
    }
    let xa = Matrix::Dense(DenseMatrix::new(k, k, a).unwrap());
    let xb = Matrix::Dense(DenseMatrix::new(k, k, b).unwrap());
    let mut bodies: Vec<(String, Vec<CNode>)> = Vec::new();
    for &f in U::ALL {
        bodies.push((
            format!("{f:?}"),
            vec![data(0, Access::Main), CNode::Unary { f, x: 0 }],
        ));
    }
    for &f in B::ALL {
        bodies.push((
            format!("{f:?}"),
            vec![
                data(0, Access::Main),
                data(1, Access::Aligned),
                CNode::Binary { f, a: 0, b: 1 },
            ],
        ));
    }
    for f in [TernaryOp::IfElse, TernaryOp::Replace] {
        bodies.push((
            format!("{f:?}"),
            vec![
                data(0, Access::Main),
                data(1, Access::Aligned),
                lit(9.0),
                CNode::Ternary {
                    f,
                    a: 0,
                    b: 1,
                    c: 2,
                },
            ],
        ));
    }
    bodies.push((
        "pow2".into(),
        vec![data(0, Access::Main), CNode::Pow2 { x: 0 }],
    ));
    bodies.push((
        "mult2".into(),
        vec![data(0, Access::Main), CNode::Mult2 { x: 0 }],
    ));
    bodies.push((
        "nary max".into(),
        vec![
            data(0, Access::Main),
            data(1, Access::Aligned),
            lit(-0.0),
            CNode::Nary {
                f: NaryOp::Max,
                xs: vec![0, 1, 2],
            },
        ],
    ));
    let mut plans = Vec::new();
    for (name, mut nodes) in bodies {
        // The plan must reference input 1 for the input count to match.
        if !nodes
            .iter()
            .any(|n| matches!(n, CNode::Data { input: 1, .. }))
        {
            nodes.push(data(1, Access::Aligned));
        }
        let out = nodes
            .iter()
            .rposition(|n| !matches!(n, CNode::Data { .. } | CNode::Literal { .. }))
            .unwrap();
        let plan = CPlan {
            template: TemplateSpec::Cell {
                cell_type: CellType::NoAgg,
                agg: None,
                sparse_safe: false,
            },
            inputs: vec![InputKind::Matrix, InputKind::Matrix],
            nodes,
            outputs: vec![out],
        };
        plans.push((name, plan));
    }
    (specials.to_vec(), xa, xb, plans)
}

/// Doubles of every kind for `log`, `exp` and sigmoid (subnormals, values near 1 and 0, huge
/// values, the overflow and underflow edges, zeros, negatives, non-finite values), as the rows
/// of 7 columns of a matrix (rows end in a scalar tail whatever the vector width): the values
/// and the number of rows.
pub fn math_values() -> (Vec<f64>, usize) {
    let mut s = 0x2545_f491_4f6c_dd1du64;
    let mut next = || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    let mut vals: Vec<f64> = (0..20_000).map(|_| f64::from_bits(next())).collect();
    vals.extend((0..20_000).map(|_| (next() >> 11) as f64 / (1u64 << 53) as f64 * 1500.0 - 750.0));
    // tanh's cases: below and above 1, each reduction of its e^u - 1, near saturation at 22.
    vals.extend((0..20_000).map(|_| (next() >> 11) as f64 / (1u64 << 53) as f64 * 50.0 - 25.0));
    vals.extend([
        22.0,
        -22.0,
        21.999999999999996,
        2f64.powi(-55),
        -(2f64.powi(-56)),
    ]);
    vals.extend((0..2_000).map(|i| 1.0 + (i as f64 - 1_000.0) * 1e-12));
    vals.extend((0..2_000).map(|i| (i as f64 - 1_000.0) * 1e-10));
    // Every power of two, built from its bits (`powi` of a subnormal's exponent gives 0).
    vals.extend((-1074i64..1024).map(|e| {
        if e < -1022 {
            f64::from_bits(1u64 << (e + 1074))
        } else {
            f64::from_bits(((e + 1023) as u64) << 52)
        }
    }));
    // Runs long enough to fill whole vectors of one kind, which vector math may take in one
    // branch: positive subnormals, the smallest normals, and `exp`'s arguments either side of
    // where its ordinary range (no overflow, no underflow, 2^k normal) ends.
    vals.extend((0..64).map(|_| f64::from_bits((next() & 0x000f_ffff_ffff_ffff) | 1)));
    vals.extend((0..64).map(|i| f64::MIN_POSITIVE * (1.0 + i as f64 / 64.0)));
    vals.extend((0..480).map(|i| 700.0 + i as f64 / 40.0));
    vals.extend((0..480).map(|i| -700.0 - i as f64 / 40.0));
    vals.extend([
        0.0,
        -0.0,
        5e-324,
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        -1.0,
    ]);
    vals.extend([
        f64::MIN_POSITIVE,
        f64::MAX,
        1.0,
        std::f64::consts::E,
        0.1,
        3.0,
    ]);
    vals.extend([
        709.78,
        709.79,
        -708.4,
        -745.0,
        -745.2,
        0.3465735902799726,
        1.0397207708399179,
    ]);
    // 7 columns: rows end in a scalar tail whatever the vector width.
    let cols = 7;
    vals.resize(vals.len().div_ceil(cols) * cols, 0.5);
    let rows = vals.len() / cols;
    (vals, rows)
}

pub fn magg_plan(aggs: Vec<CellAgg>) -> CPlan {
    // Outputs: X * Y, X + Y, exp(X) per aggregate in turn.
    let nodes = vec![
        data(0, Access::Main),
        data(1, Access::Aligned),
        CNode::Binary {
            f: B::Mul,
            a: 0,
            b: 1,
        },
        CNode::Binary {
            f: B::Add,
            a: 0,
            b: 1,
        },
        CNode::Unary { f: U::Exp, x: 0 },
    ];
    let outputs = (0..aggs.len()).map(|k| 2 + k).collect();
    CPlan {
        template: TemplateSpec::MAgg {
            aggs,
            sparse_safe: false,
        },
        inputs: vec![InputKind::Matrix; 2],
        nodes,
        outputs,
    }
}

/// `sum(X * Y)` and `sum((X * exp(Y))^2)`: zero wherever X is, so sparse-safe.
pub fn sparse_safe_magg_plan() -> CPlan {
    sum_and_sumsq_of_products(vec![
        CNode::Unary { f: U::Exp, x: 1 },
        CNode::Binary {
            f: B::Mul,
            a: 0,
            b: 3,
        },
    ])
}

/// `sum(X * Y)` and `sum((Y * X)^2)`: no helper call, so dense rows run the vector loops.
pub fn product_sums_magg_plan() -> CPlan {
    sum_and_sumsq_of_products(vec![CNode::Binary {
        f: B::Mul,
        a: 1,
        b: 0,
    }])
}

/// A sparse-safe MultiAgg of `sum(X * Y)` and the sum of squares of its last node, `rest`
/// following `X` (main), `Y` (aligned) and `X * Y` (nodes 0-2).
fn sum_and_sumsq_of_products(rest: Vec<CNode>) -> CPlan {
    let mut nodes = vec![
        data(0, Access::Main),
        data(1, Access::Aligned),
        CNode::Binary {
            f: B::Mul,
            a: 0,
            b: 1,
        },
    ];
    nodes.extend(rest);
    let last = nodes.len() - 1;
    CPlan {
        template: TemplateSpec::MAgg {
            aggs: vec![CellAgg::Sum, CellAgg::SumSq],
            sparse_safe: true,
        },
        inputs: vec![InputKind::Matrix; 2],
        nodes,
        outputs: vec![2, last],
    }
}

/// `G = X * log(abs(U %*% t(V)) + 1e-3)`, times a Whole W for the final products.
pub fn outer_plan(ty: OuterType) -> CPlan {
    // G = X * log(abs(U %*% t(V)) + 1e-3) (a Whole W for final products): finite wherever
    // U and V are, so the driver's zeros may be skipped (`zero_cells`).
    let mut nodes = vec![
        data(0, Access::Main),
        data(1, Access::OuterU),
        data(2, Access::OuterV),
        CNode::OuterDot { u: 1, v: 2 },
        lit(1e-3),
        CNode::Unary { f: U::Abs, x: 3 },
        CNode::Binary {
            f: B::Add,
            a: 5,
            b: 4,
        },
        CNode::Unary { f: U::Log, x: 6 },
        CNode::Binary {
            f: B::Mul,
            a: 0,
            b: 7,
        },
    ];
    let mut inputs = vec![InputKind::Matrix; 3];
    let out = if matches!(ty, OuterType::Left | OuterType::LeftT | OuterType::Right) {
        nodes.push(data(3, Access::Whole));
        inputs.push(InputKind::Matrix);
        nodes.push(CNode::FinalProduct { g: 8, w: 9 });
        10
    } else {
        8
    };
    CPlan {
        template: TemplateSpec::Outer { outer_type: ty },
        inputs,
        nodes,
        outputs: vec![out],
    }
}

/// `outer_plan`'s body with a Left or LeftT final product by `t(U)` given as the dot
/// products' own `U` (`Access::OuterU`: ALS-CG's `t(t(U) %*% (W * (U %*% t(S))))`), so the
/// operator reads U's rows for both and nothing is transposed: three inputs.
pub fn outer_plan_left_by_u(ty: OuterType) -> CPlan {
    let mut plan = outer_plan(OuterType::CellWise);
    plan.template = TemplateSpec::Outer { outer_type: ty };
    plan.nodes.push(CNode::FinalProduct { g: 8, w: 1 });
    plan.outputs = vec![9];
    plan
}

/// [`outer_plan_left_by_u`] over sparse, dense and all-non-zero drivers (the last over
/// tiles) and ranks around the vector width, through a backend's `check`.
pub fn check_outer_left_by_u(check: &Check) {
    let (m, n) = (70, 50);
    for k in [1, 8, 11, 40] {
        for d in [0.03, 0.6, 1.0] {
            let x = mat(m, n, d, 7, false);
            let u = mat(m, k, 1.0, 8 + k as u64, false);
            let v = mat(n, k, 1.0, 9 + k as u64, false);
            for (ty, shape) in [(OuterType::Left, (n, k)), (OuterType::LeftT, (k, n))] {
                let ins = [
                    Operand::Matrix(&x),
                    Operand::Matrix(&u),
                    Operand::Matrix(&v),
                ];
                let what = format!("outer {ty:?} by U, k {k} density {d}");
                check(&outer_plan_left_by_u(ty), &ins, &[shape], 1e-9, &what);
            }
        }
    }
}

/// `sum(X * Y * Z)`.
pub fn sum_xyz() -> CPlan {
    CPlan {
        template: TemplateSpec::Cell {
            cell_type: CellType::FullAgg,
            agg: Some(CellAgg::Sum),
            sparse_safe: false,
        },
        inputs: vec![InputKind::Matrix; 3],
        nodes: vec![
            data(0, Access::Main),
            data(1, Access::Aligned),
            data(2, Access::Aligned),
            CNode::Binary {
                f: B::Mul,
                a: 0,
                b: 1,
            },
            CNode::Binary {
                f: B::Mul,
                a: 3,
                b: 2,
            },
        ],
        outputs: vec![4],
    }
}
