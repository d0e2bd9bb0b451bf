//! Differential tests: native Row operators against the reference evaluator, for every row
//! type, dense and sparse main inputs (CSR non-zero iteration with finite side inputs, densified
//! rows otherwise), every side-input access (aligned matrix, column vector, row vector, scalar,
//! whole matrix), length-one broadcasting, special values, and empty and 1x1 inputs; plus
//! operators planned by the compiler for the canonical Row patterns. Where the build has the
//! Cranelift backend, every call is run through its operator too and compared with LLVM's to
//! the bit.
#![cfg(feature = "llvm")]

use lafuse_codegen::native::{compile, CodegenError};
use lafuse_codegen::reference::{evaluate, Operand};
use lafuse_compiler::fusion::cplan::{
    construct_cplans, count_vector_intermediates, Access, CNode, CPlan, InputKind, RowType,
    TemplateSpec,
};
use lafuse_compiler::fusion::{plan_fusion, FuseAll};
use lafuse_compiler::hops::{
    AggOp, BinaryOp as B, DagBuilder, Direction, Literal, NaryOp, OpKind, TernaryOp, UnaryOp as U,
};
use lafuse_runtime::Matrix;
use std::collections::HashMap;

/// Deterministic pseudo-random matrix with the given density, optionally with specials.
fn mat(rows: usize, cols: usize, density: f64, seed: u64, specials: bool) -> Matrix {
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    let mut next = || {
        s = s
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (s >> 11) as f64 / (1u64 << 53) as f64
    };
    let mut vals = Vec::with_capacity(rows * cols);
    for k in 0..rows * cols {
        let u = next();
        let v = next() * 4.0 - 2.0;
        let mut x = if u < density { v } else { 0.0 };
        if specials && k % 53 == 7 && x != 0.0 {
            x = [f64::NAN, f64::INFINITY, f64::NEG_INFINITY][k % 3];
        }
        vals.push(x);
    }
    Matrix::from_dense_values(rows, cols, vals).unwrap()
}

fn close(a: f64, b: f64, tol: f64) -> bool {
    (a.is_nan() && b.is_nan()) || a == b || (a - b).abs() <= tol * a.abs().max(b.abs()).max(1.0)
}

fn assert_close(got: &Matrix, want: &Matrix, what: &str) {
    assert_eq!(got.shape(), want.shape(), "{what}: shape");
    got.validate().unwrap();
    let (r, c) = got.shape();
    for i in 0..r {
        for j in 0..c {
            let (g, w) = (got.get(i, j), want.get(i, j));
            assert!(
                close(g, w, 1e-9),
                "{what}: ({i},{j}) native {g} reference {w}"
            );
        }
    }
}

/// Runs the plan natively and through the reference; both must agree. Where the build has
/// the Cranelift backend, its operator (compiled for the main input's format) must give the
/// LLVM backend's results to the bit (any NaN equal to any other: IEEE 754 leaves a NaN
/// result's sign and payload open).
fn check(plan: &CPlan, inputs: &[Operand<'_>], shape: (usize, usize), what: &str) {
    let op = compile(plan).unwrap_or_else(|e| panic!("{what}: {e}\n{}", plan.explain()));
    let want = evaluate(plan, inputs, &[shape])
        .unwrap_or_else(|e| panic!("{what}: reference: {e}\n{}", plan.explain()));
    let got = op
        .execute(inputs, &[shape])
        .unwrap_or_else(|e| panic!("{what}: {e}\n{}", plan.explain()));
    assert_close(&got[0], &want[0], what);
    cranelift_bits(plan, inputs, shape, &got[0], what);
}

#[cfg(feature = "cranelift")]
fn cranelift_bits(
    plan: &CPlan,
    inputs: &[Operand<'_>],
    shape: (usize, usize),
    llvm: &Matrix,
    what: &str,
) {
    use lafuse_codegen::backend::MainFormat;
    let main = match inputs.first() {
        Some(Operand::Matrix(m)) if m.is_sparse() => MainFormat::Sparse,
        _ => MainFormat::Dense,
    };
    let op = lafuse_codegen::cranelift::compile_for(plan, main)
        .unwrap_or_else(|e| panic!("{what}: cranelift: {e}\n{}", plan.explain()));
    let got = op
        .execute_with_ranges(inputs, &[shape], &[])
        .unwrap_or_else(|e| panic!("{what}: cranelift: {e}"))
        .remove(0);
    got.validate().unwrap();
    assert_eq!(got.shape(), llvm.shape(), "{what}: cranelift shape");
    assert_eq!(got.nnz(), llvm.nnz(), "{what}: cranelift non-zeros");
    let (r, c) = got.shape();
    for i in 0..r {
        for j in 0..c {
            let (g, w) = (got.get(i, j), llvm.get(i, j));
            assert!(
                (g.is_nan() && w.is_nan()) || g.to_bits() == w.to_bits(),
                "{what}: ({i},{j}) cranelift {g:e} ({:#x}) llvm {w:e} ({:#x})",
                g.to_bits(),
                w.to_bits()
            );
        }
    }
}

#[cfg(not(feature = "cranelift"))]
fn cranelift_bits(_: &CPlan, _: &[Operand<'_>], _: (usize, usize), _: &Matrix, _: &str) {}

fn data(input: usize, access: Access) -> CNode {
    CNode::Data { input, access }
}
fn lit(v: f64) -> CNode {
    CNode::Literal {
        value: Literal::Double(v),
    }
}
fn bin(f: B, a: usize, b: usize) -> CNode {
    CNode::Binary { f, a, b }
}

fn row_plan(row_type: RowType, inputs: Vec<InputKind>, nodes: Vec<CNode>) -> CPlan {
    let out = nodes.len() - 1;
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

/// The side inputs every hand-built plan may read, for an m×n main input `X`:
/// 1 `Y` aligned m×n, 2 `r` row vector 1×n, 3 `c` column vector m×1, 4 `s` scalar,
/// 5 `B` whole n×3, 6 `v` whole n×1, 7 `W` aligned m×3, 8 `Z` aligned m×2.
struct Env {
    x: Matrix,
    y: Matrix,
    r: Matrix,
    c: Matrix,
    s: f64,
    b: Matrix,
    v: Matrix,
    w: Matrix,
    z: Matrix,
}

const M: InputKind = InputKind::Matrix;

impl Env {
    fn new(m: usize, n: usize, density: f64, x_specials: bool, side_specials: bool) -> Env {
        Env::with_y_density(m, n, density, x_specials, side_specials, 0.9)
    }

    fn with_y_density(
        m: usize,
        n: usize,
        density: f64,
        x_specials: bool,
        side_specials: bool,
        y_density: f64,
    ) -> Env {
        let sp = side_specials;
        Env {
            x: mat(m, n, density, 1, x_specials),
            y: mat(m, n, y_density, 2, sp),
            r: mat(1, n, 1.0, 3, sp),
            c: mat(m, 1, 1.0, 4, sp),
            s: if sp { f64::INFINITY } else { 0.75 },
            b: mat(n, 3, 0.8, 5, sp),
            v: mat(n, 1, 1.0, 6, sp),
            w: mat(m, 3, 1.0, 7, sp),
            z: mat(m, 2, 1.0, 8, sp),
        }
    }

    /// The operands with `X` in the given format.
    fn operands(&self, x: &'_ Matrix) -> Vec<OperandOwned> {
        vec![
            OperandOwned::M(x.clone()),
            OperandOwned::M(self.y.clone()),
            OperandOwned::M(self.r.clone()),
            OperandOwned::M(self.c.clone()),
            OperandOwned::S(self.s),
            OperandOwned::M(self.b.clone()),
            OperandOwned::M(self.v.clone()),
            OperandOwned::M(self.w.clone()),
            OperandOwned::M(self.z.clone()),
        ]
    }
}

enum OperandOwned {
    M(Matrix),
    S(f64),
}

fn borrow(v: &[OperandOwned]) -> Vec<Operand<'_>> {
    v.iter()
        .map(|o| match o {
            OperandOwned::M(m) => Operand::Matrix(m),
            OperandOwned::S(s) => Operand::Scalar(*s),
        })
        .collect()
}

fn kinds() -> Vec<InputKind> {
    vec![M, M, M, M, InputKind::Scalar, M, M, M, M]
}

fn base() -> Vec<CNode> {
    vec![
        data(0, Access::Main),      // 0 X
        data(1, Access::Aligned),   // 1 Y
        data(2, Access::RowVector), // 2 r
        data(3, Access::ColVector), // 3 c
        data(4, Access::Scalar),    // 4 s
        data(5, Access::Whole),     // 5 B
        data(6, Access::Whole),     // 6 v
        data(7, Access::Aligned),   // 7 W
        data(8, Access::Aligned),   // 8 Z
    ]
}

fn push(n: &mut Vec<CNode>, c: CNode) -> usize {
    n.push(c);
    n.len() - 1
}

/// `(X + Y * r) * c / rowSums(X)` minus `exp(min(X, s))`: every element-wise access kind.
fn noagg_body(n: &mut Vec<CNode>, sparse_safe: bool) -> usize {
    let yr = push(n, bin(B::Mul, 1, 2));
    let xy = push(n, bin(B::Add, 0, yr));
    let xyc = push(n, bin(B::Mul, xy, 3));
    let rs = push(
        n,
        CNode::RowAgg {
            f: AggOp::Sum,
            x: 0,
        },
    );
    let d = push(n, bin(B::Div, xyc, rs));
    if sparse_safe {
        return d;
    }
    let mn = push(
        n,
        CNode::Nary {
            f: NaryOp::Min,
            xs: vec![0, 4],
        },
    );
    let e = push(n, CNode::Unary { f: U::Exp, x: mn });
    push(n, bin(B::Sub, d, e))
}

/// The hand-built plans: (name, row type, nodes, output shape for m×n).
type Case = (
    &'static str,
    RowType,
    Vec<CNode>,
    fn(usize, usize) -> (usize, usize),
);

fn cases() -> Vec<Case> {
    let mut out: Vec<Case> = Vec::new();
    let mn: fn(usize, usize) -> (usize, usize) = |m, n| (m, n);
    let m1: fn(usize, usize) -> (usize, usize) = |m, _| (m, 1);
    let one: fn(usize, usize) -> (usize, usize) = |_, _| (1, 1);
    let n1: fn(usize, usize) -> (usize, usize) = |_, n| (n, 1);
    let one_n: fn(usize, usize) -> (usize, usize) = |_, n| (1, n);

    let mut n = base();
    noagg_body(&mut n, false);
    out.push(("no_agg", RowType::NoAgg, n, mn));

    let mut n = base();
    noagg_body(&mut n, true);
    out.push(("no_agg sparse-safe", RowType::NoAgg, n, mn));

    // ifelse(X > 0, Y, r) and replace(X, NaN, s): ternaries on vectors.
    let mut n = base();
    let z = push(&mut n, lit(0.0));
    let gt = push(&mut n, bin(B::Gt, 0, z));
    let ie = push(
        &mut n,
        CNode::Ternary {
            f: TernaryOp::IfElse,
            a: gt,
            b: 1,
            c: 2,
        },
    );
    let nan = push(&mut n, lit(f64::NAN));
    let rp = push(
        &mut n,
        CNode::Ternary {
            f: TernaryOp::Replace,
            a: ie,
            b: nan,
            c: 4,
        },
    );
    push(&mut n, CNode::Pow2 { x: rp });
    out.push(("no_agg ternaries", RowType::NoAgg, n, mn));

    // X * (X %*% v): a length-one vector broadcast over the row.
    let mut n = base();
    let xv = push(&mut n, CNode::VectMatMult { a: 0, b: 6 });
    push(&mut n, bin(B::Mul, 0, xv));
    out.push(("no_agg broadcast", RowType::NoAgg, n, mn));

    for f in [
        AggOp::Sum,
        AggOp::Mean,
        AggOp::Min,
        AggOp::Max,
        AggOp::Prod,
        AggOp::Var,
    ] {
        // rowAgg(X) (sparse-aware for sum/mean/min/max) and rowAgg(f(X)).
        let mut n = base();
        push(&mut n, CNode::RowAgg { f, x: 0 });
        out.push(("row_agg of X", RowType::RowAgg, n, m1));
        let mut n = base();
        let b = noagg_body(&mut n, false);
        push(&mut n, CNode::RowAgg { f, x: b });
        out.push(("row_agg of a body", RowType::RowAgg, n, m1));
        // An aggregate of a scalar (the row's c value).
        let mut n = base();
        push(&mut n, CNode::RowAgg { f, x: 3 });
        out.push(("row_agg of a scalar", RowType::RowAgg, n, m1));
    }
    let mut n = base();
    push(&mut n, CNode::RowSumSq { x: 0 });
    out.push(("row_sumsq of X", RowType::RowAgg, n, m1));
    let mut n = base();
    let e = push(&mut n, CNode::Unary { f: U::Sin, x: 0 });
    let m2 = push(&mut n, CNode::Mult2 { x: e });
    push(&mut n, CNode::RowSumSq { x: m2 });
    out.push(("row_sumsq of a body", RowType::RowAgg, n, m1));
    // X %*% v as a row aggregate (a length-one vector output).
    let mut n = base();
    let two = push(&mut n, lit(2.0));
    let x2 = push(&mut n, bin(B::Pow, 0, two));
    push(&mut n, CNode::VectMatMult { a: x2, b: 6 });
    out.push(("row_agg X^2 %*% v", RowType::RowAgg, n, m1));
    let mut n = base();
    push(&mut n, CNode::VectMatMult { a: 0, b: 6 });
    out.push(("row_agg X %*% v", RowType::RowAgg, n, m1));

    // Full aggregates of a vector and of a scalar.
    let mut n = base();
    noagg_body(&mut n, false);
    out.push(("full_agg vector", RowType::FullAgg, n, one));
    let mut n = base();
    let rs = push(
        &mut n,
        CNode::RowAgg {
            f: AggOp::Max,
            x: 0,
        },
    );
    push(&mut n, bin(B::Mul, rs, 3));
    out.push(("full_agg scalar", RowType::FullAgg, n, one));

    // colSums(body) and colSums(X).
    let mut n = base();
    noagg_body(&mut n, false);
    out.push(("col_agg", RowType::ColAgg, n, one_n));
    let mut n = base();
    push(&mut n, CNode::Unary { f: U::Abs, x: 0 });
    out.push(("col_agg abs", RowType::ColAgg, n, one_n));

    // t(X) %*% (c * (X %*% v)) and t(X) %*% c.
    let mut n = base();
    let xv = push(&mut n, CNode::VectMatMult { a: 0, b: 6 });
    let wxv = push(&mut n, bin(B::Mul, 3, xv));
    push(&mut n, CNode::OuterMultAdd { a: 0, b: wxv });
    out.push(("col_agg_t", RowType::ColAggT, n, n1));
    let mut n = base();
    push(&mut n, CNode::OuterMultAdd { a: 0, b: 3 });
    out.push(("col_agg_t scalar", RowType::ColAggT, n, n1));
    // t(exp(X)) %*% c: a dense left side.
    let mut n = base();
    let e = push(&mut n, CNode::Unary { f: U::Exp, x: 0 });
    push(&mut n, CNode::OuterMultAdd { a: e, b: 3 });
    out.push(("col_agg_t dense left", RowType::ColAggT, n, n1));

    // Chains of element-wise operations, computed inside one loop (inlined) except where a
    // node is read twice (`shared`): over the row `X + Y` mixed with the length-one product
    // `X %*% v` (broadcast), a row vector and the per-row scalar `c`, row-wise; and over the
    // length-one product with scalars only, as the right side of `t(X) %*% (...)`.
    let chain = |n: &mut Vec<CNode>, start: usize, len: usize, side: usize| {
        let mut at = start;
        for k in 0..len {
            at = match k % 6 {
                0 => push(n, bin(B::Mul, at, side)),
                1 => push(n, bin(B::Add, at, 3)),
                2 => push(n, CNode::Unary { f: U::Abs, x: at }),
                3 => {
                    let l = push(n, lit(0.5));
                    push(
                        n,
                        CNode::Nary {
                            f: NaryOp::Max,
                            xs: vec![at, l],
                        },
                    )
                }
                4 => push(n, bin(B::Sub, at, 4)),
                _ => push(n, bin(B::Div, at, 3)),
            };
        }
        at
    };
    let mut n = base();
    let xv = push(&mut n, CNode::VectMatMult { a: 0, b: 6 });
    let xy = push(&mut n, bin(B::Add, 0, 1));
    let mixed = push(&mut n, bin(B::Mul, xy, xv));
    let shared = chain(&mut n, mixed, 7, 2);
    let twice = push(&mut n, bin(B::Mul, shared, shared));
    let end = chain(&mut n, twice, 40, 2);
    let gt = push(&mut n, bin(B::Gt, end, 4));
    push(
        &mut n,
        CNode::Ternary {
            f: TernaryOp::IfElse,
            a: gt,
            b: end,
            c: xy,
        },
    );
    out.push(("no_agg inlined chains", RowType::NoAgg, n, mn));
    let mut n = base();
    let xv = push(&mut n, CNode::VectMatMult { a: 0, b: 6 });
    let end = chain(&mut n, xv, 60, 3);
    push(&mut n, CNode::OuterMultAdd { a: 0, b: end });
    out.push((
        "col_agg_t inlined length-one chain",
        RowType::ColAggT,
        n,
        n1,
    ));

    // t(X) %*% (W * (X %*% B)): n×3.
    let mut n = base();
    let xb = push(&mut n, CNode::VectMatMult { a: 0, b: 5 });
    let wxb = push(&mut n, bin(B::Mul, 7, xb));
    push(&mut n, CNode::OuterMultAdd { a: 0, b: wxb });
    out.push(("col_agg_b1_t", RowType::ColAggB1T, n, |_, n| (n, 3)));
    // t(X) %*% exp(Z): n×2.
    let mut n = base();
    let ez = push(&mut n, CNode::Unary { f: U::Exp, x: 8 });
    push(&mut n, CNode::OuterMultAdd { a: 0, b: ez });
    out.push(("col_agg_b1_t exp", RowType::ColAggB1T, n, |_, n| (n, 2)));
    // t(X %*% B) %*% X: 3×n.
    let mut n = base();
    let xb = push(&mut n, CNode::VectMatMult { a: 0, b: 5 });
    push(&mut n, CNode::OuterMultAdd { a: xb, b: 0 });
    out.push(("col_agg_b1", RowType::ColAggB1, n, |_, n| (3, n)));

    // (X * 2) %*% B: m×3; colSums(X %*% B): 1×3.
    let mut n = base();
    let two = push(&mut n, lit(2.0));
    let x2 = push(&mut n, bin(B::Mul, 0, two));
    push(&mut n, CNode::VectMatMult { a: x2, b: 5 });
    out.push(("no_agg_b1", RowType::NoAggB1, n, |m, _| (m, 3)));
    let mut n = base();
    push(&mut n, CNode::VectMatMult { a: 0, b: 5 });
    out.push(("col_agg_b1r", RowType::ColAggB1R, n, |_, _| (1, 3)));
    // Element-wise nodes that are 0 wherever X is, which the CSR entry computes at X's
    // non-zeros only: (X * Y) %*% B; t(W) %*% ((X != 0) * (Y - X)) (ALS-CG's update);
    // rowSums((X != 0) * Y) and rowMaxs(abs(X) * c); and (X * Y) * 2 + Y, whose last node
    // reads the product densely (so nothing is sparse there).
    let mut n = base();
    let xy = push(&mut n, bin(B::Mul, 0, 1));
    push(&mut n, CNode::VectMatMult { a: xy, b: 5 });
    out.push(("no_agg_b1 sparse product", RowType::NoAggB1, n, |m, _| {
        (m, 3)
    }));
    let mut n = base();
    let z = push(&mut n, lit(0.0));
    let nz = push(&mut n, bin(B::Ne, 0, z));
    let d = push(&mut n, bin(B::Sub, 1, 0));
    let b = push(&mut n, bin(B::Mul, nz, d));
    push(&mut n, CNode::OuterMultAdd { a: 7, b });
    out.push(("col_agg_b1 sparse update", RowType::ColAggB1, n, |_, n| {
        (3, n)
    }));
    let mut n = base();
    let z = push(&mut n, lit(0.0));
    let nz = push(&mut n, bin(B::Ne, 0, z));
    let b = push(&mut n, bin(B::Mul, nz, 1));
    push(
        &mut n,
        CNode::RowAgg {
            f: AggOp::Sum,
            x: b,
        },
    );
    out.push(("row_agg sparse sum", RowType::RowAgg, n, m1));
    let mut n = base();
    let a = push(&mut n, CNode::Unary { f: U::Abs, x: 0 });
    let b = push(&mut n, bin(B::Mul, a, 3));
    push(
        &mut n,
        CNode::RowAgg {
            f: AggOp::Max,
            x: b,
        },
    );
    out.push(("row_agg sparse max", RowType::RowAgg, n, m1));
    let mut n = base();
    let xy = push(&mut n, bin(B::Mul, 0, 1));
    let two = push(&mut n, lit(2.0));
    let x2 = push(&mut n, bin(B::Mul, xy, two));
    push(&mut n, bin(B::Add, x2, 1));
    out.push(("no_agg mixed", RowType::NoAgg, n, mn));
    // (X %*% B) * (X %*% v): two products of the main row, each computed a block of rows at a
    // time in the dense entry, one broadcast over the other.
    let mut n = base();
    let xb = push(&mut n, CNode::VectMatMult { a: 0, b: 5 });
    let xv = push(&mut n, CNode::VectMatMult { a: 0, b: 6 });
    push(&mut n, bin(B::Mul, xb, xv));
    out.push(("no_agg_b1 two products", RowType::NoAggB1, n, |m, _| (m, 3)));

    // cbind(X * 2, W, c): m×(n+4); its column sums.
    for (name, rt, shape) in [
        (
            "no_agg_const",
            RowType::NoAggConst,
            (|m, n| (m, n + 4)) as fn(usize, usize) -> (usize, usize),
        ),
        ("col_agg_const", RowType::ColAggConst, |_, n| (1, n + 4)),
    ] {
        let mut n = base();
        let two = push(&mut n, lit(2.0));
        let x2 = push(&mut n, bin(B::Mul, 0, two));
        push(
            &mut n,
            CNode::Nary {
                f: NaryOp::Cbind,
                xs: vec![x2, 7, 3],
            },
        );
        out.push((name, rt, n, shape));
    }
    out
}

fn run_cases(m: usize, n: usize, density: f64, x_specials: bool, side_specials: bool) {
    run_env(
        &Env::new(m, n, density, x_specials, side_specials),
        m,
        n,
        x_specials,
        side_specials,
    );
}

fn run_env(env: &Env, m: usize, n: usize, x_specials: bool, side_specials: bool) {
    let sparse_x = Matrix::Sparse(env.x.to_sparse());
    let dense_x = Matrix::Dense(env.x.to_dense().unwrap());
    for (name, rt, nodes, shape) in cases() {
        let plan = row_plan(rt, kinds(), nodes);
        for (fmt, x) in [("dense", &dense_x), ("sparse", &sparse_x)] {
            let ops = env.operands(x);
            let what =
                format!("{name} ({rt:?}) {m}x{n} {fmt} X specials {x_specials}/{side_specials}");
            check(&plan, &borrow(&ops), shape(m, n), &what);
        }
    }
}

#[test]
fn every_row_type_dense_and_sparse() {
    run_cases(37, 21, 0.3, false, false);
    run_cases(150, 70, 0.05, false, false);
}

#[test]
fn special_values_in_x_and_side_inputs() {
    // Finite sides: the CSR entry; non-finite sides: densified rows.
    run_cases(41, 19, 0.4, true, false);
    run_cases(41, 19, 0.4, true, true);
    run_cases(23, 9, 0.9, false, true);
}

#[test]
fn sparse_side_inputs_are_streamed_in_blocks() {
    // A sparse Y read row by row with X is densified block by block per task (several
    // blocks here: 600 rows of 90 columns), under dense and CSR main inputs, with finite and
    // non-finite values.
    for (xs, ss) in [(false, false), (true, true), (false, true)] {
        let env = Env::with_y_density(600, 90, 0.2, xs, ss, 0.05);
        assert!(
            env.y.is_sparse(),
            "the side input must be sparse for this test"
        );
        run_env(&env, 600, 90, xs, ss);
    }
}

#[test]
fn outer_products_in_both_orientations() {
    // Two columns: `t(X) %*% B` with B of three columns is wider than X, so the partial is
    // laid out the other way round (not flipped); several blocks of rows and a short one.
    run_cases(37, 2, 0.6, false, false);
    run_cases(37, 2, 0.6, true, true);
}

#[test]
fn empty_and_one_by_one() {
    run_cases(1, 1, 1.0, false, false);
    run_cases(1, 1, 0.0, false, false);
    run_cases(0, 7, 0.5, false, false);
    run_cases(3, 0, 0.5, false, false);
}

#[test]
fn larger_inputs_run_in_parallel_tasks() {
    // Above the parallel threshold: per-task partials merged in order.
    run_cases(2100, 40, 0.2, false, false);
}

#[test]
fn a_row_product_that_overflows_scatters_the_sparse_row_for_its_update() {
    // t(X) %*% (c * (X %*% v)) over a CSR X and finite side inputs: the CSR entry updates the
    // partial at X's non-zeros, except in rows where `c * (X %*% v)` overflows to Inf, whose
    // zeros must give 0 * Inf = NaN. There the row is scattered for a dense update and
    // cleared again. Rows 3 and 10 overflow: column 1 (non-zero in both) must stay Inf (an
    // unscattered row would give NaN), column 0 (non-zero in row 3 only) must be NaN (a
    // row 10 that still saw row 3's value there would give Inf).
    let mut n = base();
    let xv = push(&mut n, CNode::VectMatMult { a: 0, b: 6 });
    let wxv = push(&mut n, bin(B::Mul, 3, xv));
    push(&mut n, CNode::OuterMultAdd { a: 0, b: wxv });
    let plan = row_plan(RowType::ColAggT, kinds(), n);
    let (m, cols) = (16, 6);
    let mut x = vec![0.0; m * cols];
    for i in 0..m {
        x[i * cols + 4] = 0.5;
    }
    let big = 1e308;
    x[3 * cols..4 * cols].copy_from_slice(&[big, big, 0.0, 0.0, 0.0, 0.0]);
    x[10 * cols..11 * cols].copy_from_slice(&[0.0, big, big, 0.0, 0.0, 0.0]);
    let mut env = Env::new(m, cols, 0.5, false, false);
    env.x = Matrix::Sparse(Matrix::from_dense_values(m, cols, x).unwrap().to_sparse());
    env.c = Matrix::from_dense_values(m, 1, vec![1.0; m]).unwrap();
    env.v = Matrix::from_dense_values(cols, 1, vec![1.0; cols]).unwrap();
    let ops = env.operands(&env.x);
    check(&plan, &borrow(&ops), (cols, 1), "overflowing rows, CSR X");
    let got = compile(&plan)
        .unwrap()
        .execute(&borrow(&ops), &[(cols, 1)])
        .unwrap()
        .remove(0);
    assert!(got.get(0, 0).is_nan(), "column 0: {}", got.get(0, 0));
    assert_eq!(got.get(1, 0), f64::INFINITY, "column 1");
}

#[test]
fn results_do_not_depend_on_the_thread_count() {
    let mut n = base();
    let xv = push(&mut n, CNode::VectMatMult { a: 0, b: 6 });
    let wxv = push(&mut n, bin(B::Mul, 3, xv));
    push(&mut n, CNode::OuterMultAdd { a: 0, b: wxv });
    let plan = row_plan(RowType::ColAggT, kinds(), n);
    let op = compile(&plan).unwrap();
    let env = Env::new(5000, 50, 0.5, false, false);
    let ops = env.operands(&env.x);
    let ins = borrow(&ops);
    let run = |threads: usize| {
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap()
            .install(|| op.execute(&ins, &[(50, 1)]).unwrap())
            .remove(0)
            .into_dense_values()
            .unwrap()
    };
    let one = run(1);
    assert_eq!(one, run(2));
    assert_eq!(one, run(4));
}

#[test]
fn mismatched_inputs_are_errors() {
    let mut n = base();
    push(&mut n, CNode::VectMatMult { a: 0, b: 5 });
    let plan = row_plan(RowType::NoAggB1, kinds(), n);
    let op = compile(&plan).unwrap();
    let env = Env::new(10, 6, 1.0, false, false);
    let mut ops = env.operands(&env.x);
    // B with the wrong number of rows.
    ops[5] = OperandOwned::M(mat(5, 3, 1.0, 9, false));
    assert!(op.execute(&borrow(&ops), &[(10, 3)]).is_err());
    // A wrong output shape.
    let ops = env.operands(&env.x);
    assert!(op.execute(&borrow(&ops), &[(10, 4)]).is_err());
    // An aligned input with the wrong number of rows.
    let mut n = base();
    push(&mut n, bin(B::Add, 0, 1));
    let plan = row_plan(RowType::NoAgg, kinds(), n);
    let op = compile(&plan).unwrap();
    let mut ops = env.operands(&env.x);
    ops[1] = OperandOwned::M(mat(9, 6, 1.0, 9, false));
    assert!(op.execute(&borrow(&ops), &[(10, 6)]).is_err());
    // Element-wise operands of different lengths.
    let mut n = base();
    push(&mut n, bin(B::Add, 0, 7));
    let plan = row_plan(RowType::NoAgg, kinds(), n);
    let op = compile(&plan).unwrap();
    let ops = env.operands(&env.x);
    assert!(op.execute(&borrow(&ops), &[(10, 6)]).is_err());
}

#[test]
fn unsupported_constructs_are_named() {
    // An outer-product accumulation that is not the output.
    let mut n = base();
    let o = push(&mut n, CNode::OuterMultAdd { a: 0, b: 3 });
    push(&mut n, bin(B::Add, o, 3));
    let plan = row_plan(RowType::ColAggT, kinds(), n);
    match compile(&plan) {
        Err(CodegenError::Unsupported(s)) => assert!(s.to_string().contains("outer"), "{s}"),
        other => panic!("{other:?}"),
    }
}

// ---- plans from the compiler ----------------------------------------------------------------

fn nnz(m: &Matrix) -> u64 {
    m.nnz() as u64
}

/// Plans `build` with fuse-all and checks every Row operator whose inputs are DAG inputs.
fn planned(
    inputs: &[(&'static str, Matrix)],
    build: impl Fn(&mut DagBuilder, &[lafuse_compiler::hops::HopId]) -> lafuse_compiler::hops::HopId,
    want_variant: &str,
) {
    let mut b = DagBuilder::new();
    let mut env: HashMap<lafuse_compiler::hops::HopId, &Matrix> = HashMap::new();
    let mut ids = Vec::new();
    for (name, m) in inputs {
        let h = b.input(name, m.rows() as u64, m.cols() as u64, nnz(m));
        env.insert(h, m);
        ids.push(h);
    }
    let out = build(&mut b, &ids);
    b.output("R", out).unwrap();
    let dag = b.build().unwrap();
    let plan = plan_fusion(&dag, &FuseAll).unwrap();
    let prog = construct_cplans(&dag, &plan.memo, &plan.selection).unwrap();
    let mut seen = false;
    for op in &prog.operators {
        let TemplateSpec::Row { row_type, .. } = op.cplan.template else {
            continue;
        };
        let ins: Option<Vec<Operand<'_>>> = op
            .inputs
            .iter()
            .map(|h| env.get(h).map(|m| Operand::Matrix(m)))
            .collect();
        let Some(ins) = ins else { continue };
        let shape = match op.outputs.first().and_then(|&h| dag.hop(h).dims()) {
            _ if row_type == RowType::FullAgg => (1, 1),
            Some((r, c)) => (r as usize, c as usize),
            None => (1, 1),
        };
        seen |= op.cplan.template.variant() == want_variant;
        for sparse in [false, true] {
            let conv: Vec<Matrix> = ins
                .iter()
                .enumerate()
                .map(|(k, o)| match o {
                    Operand::Matrix(m) if k == 0 && sparse => Matrix::Sparse(m.to_sparse()),
                    Operand::Matrix(m) => (*m).clone(),
                    Operand::Scalar(s) => Matrix::scalar(*s),
                })
                .collect();
            let ins2: Vec<Operand<'_>> = conv.iter().map(Operand::Matrix).collect();
            check(
                &op.cplan,
                &ins2,
                shape,
                &format!("{want_variant} planned, sparse X {sparse}"),
            );
        }
    }
    assert!(seen, "no {want_variant} operator: {}", prog.explain());
}

#[test]
fn compiler_planned_row_operators() {
    let (m, n) = (300, 40);
    let x = mat(m, n, 0.3, 31, false);
    let v = mat(n, 1, 1.0, 32, false);
    let w = mat(m, 1, 1.0, 33, false);
    let vv = mat(n, 2, 1.0, 34, false);
    let ww = mat(m, 2, 1.0, 35, false);
    // t(X) %*% (w * (X %*% v))
    planned(
        &[("X", x.clone()), ("v", v.clone()), ("w", w.clone())],
        |b, i| {
            let xv = b.matmul(i[0], i[1]).unwrap();
            let p = b.binary(B::Mul, i[2], xv).unwrap();
            let xt = b.transpose(i[0]).unwrap();
            b.matmul(xt, p).unwrap()
        },
        "col_agg_t",
    );
    // t(X) %*% (W * (X %*% V))
    planned(
        &[("X", x.clone()), ("V", vv), ("W", ww)],
        |b, i| {
            let xv = b.matmul(i[0], i[1]).unwrap();
            let p = b.binary(B::Mul, i[2], xv).unwrap();
            let xt = b.transpose(i[0]).unwrap();
            b.matmul(xt, p).unwrap()
        },
        "col_agg_b1_t",
    );
    // X / rowSums(X)
    planned(
        &[("X", x.clone())],
        |b, i| {
            let rs = b.agg(AggOp::Sum, Direction::Row, i[0]).unwrap();
            b.binary(B::Div, i[0], rs).unwrap()
        },
        "no_agg",
    );
    // sum(X / rowSums(X)), colSums(X / rowSums(X))
    planned(
        &[("X", x.clone())],
        |b, i| {
            let rs = b.agg(AggOp::Sum, Direction::Row, i[0]).unwrap();
            let d = b.binary(B::Div, i[0], rs).unwrap();
            b.agg(AggOp::Sum, Direction::Full, d).unwrap()
        },
        "full_agg",
    );
    planned(
        &[("X", x.clone())],
        |b, i| {
            let rs = b.agg(AggOp::Sum, Direction::Row, i[0]).unwrap();
            let d = b.binary(B::Div, i[0], rs).unwrap();
            b.agg(AggOp::Sum, Direction::Col, d).unwrap()
        },
        "col_agg",
    );
    // cbind(X * 2, W)
    let w3 = mat(m, 3, 1.0, 36, false);
    planned(
        &[("X", x.clone()), ("Y", w3)],
        |b, i| {
            let two = b.literal_f64(2.0);
            let x2 = b.binary(B::Mul, i[0], two).unwrap();
            b.add(OpKind::Nary(NaryOp::Cbind), &[x2, i[1]]).unwrap()
        },
        "no_agg_const",
    );
    let _ = v;
    let _ = w;
}

#[test]
fn vector_primitives_are_packed_and_inlined() {
    let op = compile(&xtwxv_plan(1)).unwrap();
    let asm = op.assembly();
    let packed = asm.lines().any(|l| {
        (l.contains("vaddpd") || l.contains("vmulpd")) && (l.contains("%ymm") || l.contains("%zmm"))
    });
    assert!(packed, "no packed AVX arithmetic in:\n{asm}");
    // The per-element primitives are always-inline: no calls to them remain in the optimized
    // module. The block primitives (the products of a block of rows, the block's update of
    // the partial) are library functions, called once per block.
    let ir = op.llvm_ir();
    assert!(!ir.contains("call double @lafuse_row_dot("), "{ir}");
    assert!(!ir.contains("call void @lafuse_row_axpy("), "{ir}");
    assert!(ir.contains("call void @lafuse_row_axpy_rows"), "{ir}");
    assert!(ir.contains("call void @lafuse_row_dot_rows"), "{ir}");
}

// ---- timing (figures, not assertions) -------------------------------------------------------

/// `t(X) %*% (w * (X %*% V))` for `V` with `k` columns (`k = 1`: col-agg-T with a column
/// vector `w`; else col-agg-B1-T with an aligned `W`), as the compiler plans it.
fn xtwxv_plan(k: usize) -> CPlan {
    let (rt, wacc) = if k == 1 {
        (RowType::ColAggT, Access::ColVector)
    } else {
        (RowType::ColAggB1T, Access::Aligned)
    };
    row_plan(
        rt,
        vec![M, M, M],
        vec![
            data(0, Access::Main),
            data(1, Access::Whole),
            CNode::VectMatMult { a: 0, b: 1 },
            data(2, wacc),
            bin(B::Mul, 3, 2),
            CNode::OuterMultAdd { a: 0, b: 4 },
        ],
    )
}

fn median(mut t: Vec<f64>) -> f64 {
    t.sort_by(f64::total_cmp);
    t[t.len() / 2]
}

/// Run with `cargo test -p lafuse-codegen --release --test native_row -- --ignored --nocapture`.
#[test]
#[ignore = "prints timings; allocates about 2.5 GB"]
fn xtwxv_native_vs_unfused() {
    use lafuse_runtime::{kernels, ops};
    use std::time::Instant;
    let (m, n) = (100_000, 1_000);
    let x = Matrix::from_dense_values(
        m,
        n,
        (0..m * n)
            .map(|k| ((k % 1013) as f64) * 1e-3 - 0.4)
            .collect(),
    )
    .unwrap();
    let gb = (m * n * 8) as f64 / 1e9;
    let reps = 5;
    let time = |f: &mut dyn FnMut() -> f64| -> (f64, f64) {
        let mut ts = Vec::new();
        let mut v = 0.0;
        for _ in 0..reps {
            let t = Instant::now();
            v = f();
            ts.push(t.elapsed().as_secs_f64());
        }
        (median(ts), v)
    };
    let (t_sum, _) = time(&mut || {
        kernels::aggregate(&x, ops::AggOp::Sum, ops::Direction::Full)
            .unwrap()
            .get(0, 0)
    });
    println!(
        "threads {}; plain sum(X) 1e5x1e3: {:.1} ms = {:.1} GB/s read",
        rayon::current_num_threads(),
        t_sum * 1e3,
        gb / t_sum
    );
    for k in [1usize, 2] {
        let v = mat(n, k, 1.0, 40, false);
        let w = mat(m, k, 1.0, 41, false);
        let plan = xtwxv_plan(k);
        let op = compile(&plan).unwrap();
        let ins = [
            Operand::Matrix(&x),
            Operand::Matrix(&v),
            Operand::Matrix(&w),
        ];
        let (t_nat, r_nat) = time(&mut || op.execute(&ins, &[(n, k)]).unwrap()[0].get(7, 0));
        // Unfused: X %*% V, W * ., then t(X) %*% . as the hops run (transpose, multiply) and
        // as the cheaper t(t(.) %*% X), which also reads X once.
        let mut p_keep = None;
        let (t_mv, _) = time(&mut || {
            let xv = kernels::matmul(&x, &v).unwrap();
            let p = kernels::binary(&w, &xv, ops::BinaryOp::Mul).unwrap();
            let r = p.get(0, 0);
            p_keep = Some(p);
            r
        });
        let p = p_keep.unwrap();
        let (t_tt, r_tt) = time(&mut || {
            let pt = kernels::transpose(&p).unwrap();
            let r = kernels::matmul(&pt, &x).unwrap();
            kernels::transpose(&r).unwrap().get(7, 0)
        });
        let (t_tx, r_tx) = time(&mut || {
            let xt = kernels::transpose(&x).unwrap();
            kernels::matmul(&xt, &p).unwrap().get(7, 0)
        });
        let best_unfused = t_mv + t_tt.min(t_tx);
        println!(
            "t(X)%*%(w*(X%*%V)) k={k}: native {:.1} ms ({:.1} GB/s, {:.0}% of the plain-sum \
             bandwidth); unfused X%*%V,w* {:.1} ms + t(t(p)%*%X) {:.1} ms (or t(X) then %*% \
             {:.1} ms): speedup {:.2}x over the best unfused; values {r_nat} {r_tt} {r_tx}",
            t_nat * 1e3,
            gb / t_nat,
            100.0 * t_sum / t_nat,
            t_mv * 1e3,
            t_tt * 1e3,
            t_tx * 1e3,
            best_unfused / t_nat,
        );
    }
}
