//! Figures, not assertions (DESIGN 7: no timed tests): the run time of Cranelift's operators
//! against LLVM's on dense patterns (Cell full and row aggregates, a MultiAgg, an Outer full
//! aggregate over a sparse driver), median of 7 executions each, and their ratio; the results
//! are checked equal to the bit; and Row operators at 100000x1000, dense and CSR
//! (`row_run_time_against_llvm`). Run with `cargo test -p lafuse-codegen --release --features
//! cranelift,llvm --test cranelift_timing -- --ignored --nocapture`.
#![cfg(all(feature = "cranelift", feature = "llvm"))]

mod common;

use common::cell_plans::*;
use common::row_plans::*;
use lafuse_codegen::backend::MainFormat;
use lafuse_codegen::reference::Operand;
use lafuse_compiler::fusion::cplan::{Access, CNode, CPlan, InputKind, OuterType, TemplateSpec};
use lafuse_compiler::fusion::template::{CellAgg, CellType};
use lafuse_compiler::hops::{BinaryOp as B, UnaryOp as U};
use lafuse_runtime::Matrix;
use std::time::Instant;

/// `rowSums(exp(X) * Y - Z)`.
fn row_sums_exp() -> CPlan {
    CPlan {
        template: TemplateSpec::Cell {
            cell_type: CellType::RowAgg,
            agg: Some(CellAgg::Sum),
            sparse_safe: false,
        },
        inputs: vec![InputKind::Matrix; 3],
        nodes: vec![
            data(0, Access::Main),
            data(1, Access::Aligned),
            data(2, Access::Aligned),
            CNode::Unary { f: U::Exp, x: 0 },
            CNode::Binary {
                f: B::Mul,
                a: 3,
                b: 1,
            },
            CNode::Binary {
                f: B::Sub,
                a: 4,
                b: 2,
            },
        ],
        outputs: vec![5],
    }
}

/// A timed pattern: its name, plan, inputs and output shapes.
type Case<'a> = (&'a str, CPlan, &'a [Operand<'a>], Vec<(usize, usize)>);

fn median_ms(mut f: impl FnMut() -> Vec<Matrix>) -> (f64, Vec<Matrix>) {
    let mut out = f();
    let mut t: Vec<f64> = (0..7)
        .map(|_| {
            let s = Instant::now();
            out = f();
            s.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    t.sort_by(f64::total_cmp);
    (t[3], out)
}

#[test]
#[ignore = "prints timings; allocates about 100 MB"]
fn run_time_against_llvm() {
    let (m, n) = (4_000, 1_000);
    let (x, y, z) = (
        mat(m, n, 1.0, 1, false),
        mat(m, n, 1.0, 2, false),
        mat(m, n, 1.0, 3, false),
    );
    let three = [
        Operand::Matrix(&x),
        Operand::Matrix(&y),
        Operand::Matrix(&z),
    ];
    let (om, on, k) = (3_000, 3_000, 50);
    let s = Matrix::Sparse(mat(om, on, 0.01, 4, false).to_sparse());
    let u = mat(om, k, 1.0, 5, false);
    let v = mat(on, k, 1.0, 6, false);
    let outer = [
        Operand::Matrix(&s),
        Operand::Matrix(&u),
        Operand::Matrix(&v),
    ];
    let cases: Vec<Case<'_>> = vec![
        ("sum(X*Y*Z)", sum_xyz(), &three, vec![(1, 1)]),
        ("rowSums(exp(X)*Y-Z)", row_sums_exp(), &three, vec![(m, 1)]),
        (
            "magg sum(X*Y), max(X+Y)",
            magg_plan(vec![CellAgg::Sum, CellAgg::Max]),
            &three[..2],
            vec![(1, 1), (1, 1)],
        ),
        (
            "outer sum(X*log(|UV'|+1e-3))",
            outer_plan(OuterType::FullAgg),
            &outer,
            vec![(1, 1)],
        ),
    ];
    println!(
        "{:<32} {:>10} {:>10} {:>7}",
        "pattern", "llvm ms", "cl ms", "ratio"
    );
    for (name, plan, ins, shapes) in cases {
        let main = match ins[0] {
            Operand::Matrix(m) if m.is_sparse() => MainFormat::Sparse,
            _ => MainFormat::Dense,
        };
        let llvm = lafuse_codegen::native::compile_for(&plan, main).unwrap();
        let cl = lafuse_codegen::cranelift::compile_for(&plan, main).unwrap();
        let (tl, rl) = median_ms(|| llvm.execute(ins, &shapes).unwrap());
        let (tc, rc) = median_ms(|| cl.execute_with_ranges(ins, &shapes, &[]).unwrap());
        for (a, b) in rl.iter().zip(&rc) {
            let (r, c) = a.shape();
            for i in 0..r {
                for j in 0..c {
                    let (p, q) = (a.get(i, j), b.get(i, j));
                    assert!(p.to_bits() == q.to_bits() || (p.is_nan() && q.is_nan()));
                }
            }
        }
        println!("{name:<32} {tl:>10.3} {tc:>10.3} {:>7.2}", tc / tl);
    }
}

/// A timed Row pattern: its name, plan, inputs and output shape.
type RowCase<'a> = (&'a str, CPlan, Vec<Operand<'a>>, (usize, usize));

/// Medians of `runs` executions of `f` and their spread (min, max), in milliseconds.
fn spread_ms(runs: usize, mut f: impl FnMut() -> Vec<Matrix>) -> (f64, f64, f64, Vec<Matrix>) {
    let mut out = f();
    let mut t: Vec<f64> = (0..runs)
        .map(|_| {
            let s = Instant::now();
            out = f();
            s.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    t.sort_by(f64::total_cmp);
    (t[runs / 2], t[0], t[runs - 1], out)
}

/// Row operators at 100000x1000: `t(X) %*% (w * (X %*% v))`, `rowSums(X * Y) / rowMaxs(X)`
/// and `colSums(X / rowSums(X))` over a dense `X` and over a CSR `X` of sparsity 0.1, median
/// (min-max) of 7 executions on each backend; the results are checked equal to the bit.
#[test]
#[ignore = "prints timings; allocates about 3 GB"]
fn row_run_time_against_llvm() {
    let (m, n) = (100_000, 1_000);
    let dense = mat(m, n, 1.0, 1, false);
    let csr = Matrix::Sparse(mat(m, n, 0.1, 2, false).to_sparse());
    let y = mat(m, n, 1.0, 3, false);
    let v = mat(n, 1, 1.0, 4, false);
    let w = mat(m, 1, 1.0, 5, false);
    println!(
        "{:<34} {:>22} {:>22} {:>7}",
        "pattern", "llvm ms (min-max)", "cl ms (min-max)", "ratio"
    );
    for (fmt, x) in [("dense", &dense), ("csr 0.1", &csr)] {
        let cases: Vec<RowCase<'_>> = vec![
            (
                "t(X)%*%(w*(X%*%v))",
                xtwxv(),
                vec![Operand::Matrix(x), Operand::Matrix(&v), Operand::Matrix(&w)],
                (n, 1),
            ),
            (
                "rowSums(X*Y)/rowMaxs(X)",
                rowsums_over_rowmaxs(),
                vec![Operand::Matrix(x), Operand::Matrix(&y)],
                (m, 1),
            ),
            (
                "colSums(X/rowSums(X))",
                colsums_normalized(),
                vec![Operand::Matrix(x)],
                (1, n),
            ),
        ];
        let main = if x.is_sparse() {
            MainFormat::Sparse
        } else {
            MainFormat::Dense
        };
        for (name, plan, ins, shape) in cases {
            let llvm = lafuse_codegen::native::compile_for(&plan, main).unwrap();
            let cl = lafuse_codegen::cranelift::compile_for(&plan, main).unwrap();
            let (tl, ll, lh, rl) = spread_ms(7, || llvm.execute(&ins, &[shape]).unwrap());
            let (tc, cl_, ch, rc) =
                spread_ms(7, || cl.execute_with_ranges(&ins, &[shape], &[]).unwrap());
            let (r, c) = rl[0].shape();
            for i in 0..r {
                for j in 0..c {
                    let (p, q) = (rl[0].get(i, j), rc[0].get(i, j));
                    assert!(p.to_bits() == q.to_bits() || (p.is_nan() && q.is_nan()));
                }
            }
            println!(
                "{:<34} {:>22} {:>22} {:>7.2}",
                format!("{name} {fmt}"),
                format!("{tl:.1} ({ll:.1}-{lh:.1})"),
                format!("{tc:.1} ({cl_:.1}-{ch:.1})"),
                tc / tl
            );
        }
    }
}

/// Outer over a dense driver through tiles (`sum(X * log(|U %*% t(V)| + 1e-3))`, 1000², ranks
/// 1 to 50): Cranelift's tile entry (tiles forced on) against LLVM's, medians of 7 and the
/// ratio, results equal to the bit.
#[test]
#[ignore = "prints timings; allocates about 20 MB"]
fn outer_tiles_run_time_against_llvm() {
    let (m, n) = (1_000, 1_000);
    let x = mat(m, n, 1.0, 1, false);
    let plan = outer_plan(OuterType::FullAgg);
    let llvm = lafuse_codegen::native::compile_for(&plan, MainFormat::Dense).unwrap();
    let cl = lafuse_codegen::cranelift::compile_for(&plan, MainFormat::Dense)
        .unwrap()
        .with_outer_tile_density(0.0);
    println!(
        "{:<10} {:>10} {:>10} {:>7}",
        "rank", "llvm ms", "cl ms", "ratio"
    );
    for k in [1, 2, 5, 10, 20, 50] {
        let (u, v) = (mat(m, k, 1.0, 5, false), mat(n, k, 1.0, 6, false));
        let ins = [
            Operand::Matrix(&x),
            Operand::Matrix(&u),
            Operand::Matrix(&v),
        ];
        let (tl, rl) = median_ms(|| llvm.execute(&ins, &[(1, 1)]).unwrap());
        let (tc, rc) = median_ms(|| cl.execute_with_ranges(&ins, &[(1, 1)], &[]).unwrap());
        let (p, q) = (rl[0].get(0, 0), rc[0].get(0, 0));
        assert!(
            p.to_bits() == q.to_bits(),
            "rank {k}: llvm {p:e}, cranelift {q:e}"
        );
        println!("{k:<10} {tl:>10.3} {tc:>10.3} {:>7.2}", tc / tl);
    }
}
