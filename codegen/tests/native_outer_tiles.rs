//! Outer operators over tiles of `U %*% t(V)` (the skeleton's path for dense-enough drivers,
//! `skeletons/src/outer/tiles.rs`) against the reference evaluator and against the same
//! operator taking the driver's non-zeros one at a time: every final step, dense and CSR
//! drivers, sizes across and inside tile boundaries, NaN and infinities in the driver and in
//! the factors (so that the body is not finite at the driver's zeros), empty and 1×1 inputs;
//! with the `cranelift` feature, Cranelift's tile entry against LLVM's to the bit.

#![cfg(feature = "llvm")]

use lafuse_codegen::native::{compile, RunOptions};
use lafuse_codegen::reference::{evaluate, Operand};
use lafuse_compiler::fusion::cplan::{Access, CNode, CPlan, InputKind, OuterType, TemplateSpec};
use lafuse_compiler::hops::{BinaryOp as B, Literal, UnaryOp as U};
use lafuse_runtime::Matrix;
use lafuse_skeletons::outer::{TILE_COLS, TILE_ROWS};

const TILES: RunOptions = RunOptions {
    outer_tile_density: 0.0,
};
const NON_ZEROS: RunOptions = RunOptions {
    outer_tile_density: f64::INFINITY,
};

/// A deterministic matrix of the given density; `specials`: some non-zeros NaN or ±Inf.
fn mat(rows: usize, cols: usize, density: f64, seed: u64, specials: bool) -> Matrix {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut next = || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        (s >> 11) as f64 / (1u64 << 53) as f64
    };
    let vals = (0..rows * cols)
        .map(|c| {
            let (u, v) = (next(), next());
            match (u < density, specials && c % 89 == 5) {
                (false, _) => 0.0,
                (true, true) => [f64::NAN, f64::INFINITY, f64::NEG_INFINITY][c % 3],
                (true, false) => v * 4.0 - 2.0,
            }
        })
        .collect();
    Matrix::from_dense_values(rows, cols, vals).unwrap()
}

fn data(input: usize, access: Access) -> CNode {
    CNode::Data { input, access }
}

/// `G = X * log(abs(U %*% t(V)) + 1e-3)`, then the final step of `ty` (with `W` for the
/// products).
fn plan(ty: OuterType) -> CPlan {
    let mut nodes = vec![
        data(0, Access::Main),
        data(1, Access::OuterU),
        data(2, Access::OuterV),
        CNode::OuterDot { u: 1, v: 2 },
        CNode::Unary { f: U::Abs, x: 3 },
        CNode::Literal {
            value: Literal::Double(1e-3),
        },
        CNode::Binary {
            f: B::Add,
            a: 4,
            b: 5,
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

fn close(a: f64, b: f64, tol: f64) -> bool {
    (a.is_nan() && b.is_nan()) || a == b || (a - b).abs() <= tol * a.abs().max(b.abs()).max(1.0)
}

fn assert_close(got: &Matrix, want: &Matrix, tol: f64, what: &str) {
    assert_eq!(got.shape(), want.shape(), "{what}: shape");
    let (r, c) = got.shape();
    for i in 0..r {
        for j in 0..c {
            let (g, w) = (got.get(i, j), want.get(i, j));
            assert!(close(g, w, tol), "{what} ({i},{j}): {g} vs {w}");
        }
    }
}

const TYPES: [OuterType; 5] = [
    OuterType::CellWise,
    OuterType::FullAgg,
    OuterType::Right,
    OuterType::Left,
    OuterType::LeftT,
];

/// Runs `ty` over the inputs with tiles and with non-zeros one at a time, against the
/// reference; returns the tiled result.
fn check(ty: OuterType, x: &Matrix, u: &Matrix, v: &Matrix, k2: usize, what: &str) -> Matrix {
    let (m, n) = x.shape();
    let (w, shape) = match ty {
        OuterType::Right => (mat(n, k2, 1.0, 10, false), (m, k2)),
        OuterType::Left => (mat(k2, m, 1.0, 11, false), (n, k2)),
        OuterType::LeftT => (mat(k2, m, 1.0, 11, false), (k2, n)),
        OuterType::CellWise => (Matrix::scalar(0.0), (m, n)),
        OuterType::FullAgg => (Matrix::scalar(0.0), (1, 1)),
    };
    let p = plan(ty);
    let mut ins = vec![Operand::Matrix(x), Operand::Matrix(u), Operand::Matrix(v)];
    if p.inputs.len() == 4 {
        ins.push(Operand::Matrix(&w));
    }
    let op = compile(&p).unwrap();
    let want = evaluate(&p, &ins, &[shape]).unwrap();
    let what = format!("{what} {ty:?}");
    let one_by_one = op
        .execute_with_options(&ins, &[shape], &[], NON_ZEROS)
        .unwrap();
    assert!(!op.tiles_compiled(), "{what}: tiles below their density");
    let tiled = op.execute_with_options(&ins, &[shape], &[], TILES).unwrap();
    assert_eq!(op.tiles_compiled(), m * n > 0, "{what}: tiles used");
    assert_close(&tiled[0], &want[0], 1e-9, &format!("{what} tiles"));
    assert_close(
        &tiled[0],
        &one_by_one[0],
        1e-9,
        &format!("{what} tiles vs non-zeros"),
    );
    cranelift_tiles_match(&p, &ins, shape, &tiled[0], &what);
    tiled.into_iter().next().unwrap()
}

/// Cranelift's tile entry gives the LLVM backend's tiled results to the bit (the same tile of
/// the product, the same body and lanes).
#[cfg(feature = "cranelift")]
fn cranelift_tiles_match(
    p: &CPlan,
    ins: &[Operand<'_>],
    shape: (usize, usize),
    llvm: &Matrix,
    what: &str,
) {
    use lafuse_codegen::backend::MainFormat;
    let op = lafuse_codegen::cranelift::compile_for(p, MainFormat::Dense)
        .unwrap()
        .with_outer_tile_density(0.0);
    let got = op.execute_with_ranges(ins, &[shape], &[]).unwrap();
    let (r, c) = llvm.shape();
    assert_eq!(got[0].shape(), (r, c), "{what}: cranelift shape");
    for i in 0..r {
        for j in 0..c {
            let (g, w) = (got[0].get(i, j), llvm.get(i, j));
            assert!(
                (g.is_nan() && w.is_nan()) || g.to_bits() == w.to_bits(),
                "{what} ({i},{j}): cranelift tiles {g:e}, llvm tiles {w:e}"
            );
        }
    }
}

#[cfg(not(feature = "cranelift"))]
fn cranelift_tiles_match(_: &CPlan, _: &[Operand<'_>], _: (usize, usize), _: &Matrix, _: &str) {}

/// Sizes inside one tile, across tile boundaries with partial tiles at both ends, and ranks
/// that exercise the blocked multiply's edges; dense and CSR drivers of several densities.
#[test]
fn tiles_match_the_reference_and_the_non_zeros_path() {
    let sizes = [
        (37, 53, 7),
        (TILE_ROWS + 3, TILE_COLS * 2 + 5, 13),
        (2 * TILE_ROWS, TILE_COLS - 1, 1),
    ];
    for (m, n, k) in sizes {
        let u = mat(m, k, 1.0, 2, false);
        let v = mat(n, k, 1.0, 3, false);
        for density in [1.0, 0.3] {
            let dense = mat(m, n, density, 1, false);
            let csr = dense.clone().examine_and_convert().unwrap();
            for x in [&dense, &csr] {
                for ty in TYPES {
                    let what = format!("{m}x{n} k {k} density {density} sparse {}", x.is_sparse());
                    check(ty, x, &u, &v, 3, &what);
                }
            }
        }
    }
}

/// NaN and infinities in the driver, and a NaN in a row of `V`, which makes the body NaN at
/// every cell of that column, the driver's zeros included (`0 * NaN`): over tiles every cell
/// is visited, so the results are the unfused ones there too.
#[test]
fn tiles_keep_nan_and_infinities_where_unfused_execution_has_them() {
    let (m, n, k) = (70, TILE_COLS + 9, 5);
    let u = mat(m, k, 1.0, 2, false);
    let mut vv = mat(n, k, 1.0, 3, false).into_dense_values().unwrap();
    vv[4 * k + 1] = f64::NAN;
    let v = Matrix::from_dense_values(n, k, vv).unwrap();
    for density in [1.0, 0.2] {
        let x = mat(m, n, density, 1, true);
        for ty in TYPES {
            let got = check(ty, &x, &u, &v, 2, &format!("specials density {density}"));
            if ty == OuterType::CellWise {
                assert!((0..m).all(|i| got.get(i, 4).is_nan()), "column 4 NaN");
            }
        }
    }
}

/// The tiles live in each thread's scratch memory from call to call, never cleared: a call
/// whose tiles were all NaN (a NaN in every row of `U`), then calls of other shapes on the
/// same threads (narrower, shorter, wider than it, dense and CSR drivers), each still gives
/// the reference's results, so no call reads what an earlier one left there.
#[test]
fn no_call_over_tiles_reads_what_an_earlier_call_left_in_its_scratch() {
    let poison = |m: usize, n: usize, k: usize| {
        let mut uu = mat(m, k, 1.0, 2, false).into_dense_values().unwrap();
        for i in 0..m {
            uu[i * k] = f64::NAN;
        }
        let u = Matrix::from_dense_values(m, k, uu).unwrap();
        let (x, v) = (mat(m, n, 1.0, 1, false), mat(n, k, 1.0, 3, false));
        for ty in TYPES {
            check(ty, &x, &u, &v, 2, &format!("poison {m}x{n}"));
        }
    };
    poison(TILE_ROWS + 40, TILE_COLS + 40, 4);
    for (m, n, k) in [
        (30, 20, 3),
        (TILE_ROWS, 7, 2),
        (TILE_ROWS + 9, TILE_COLS + 40, 5),
    ] {
        let (u, v) = (mat(m, k, 1.0, 2, false), mat(n, k, 1.0, 3, false));
        let dense = mat(m, n, 0.6, 1, false);
        let csr = dense.clone().examine_and_convert().unwrap();
        for x in [&dense, &csr] {
            for ty in TYPES {
                let got = check(ty, x, &u, &v, 2, &format!("after poison {m}x{n}"));
                let (r, c) = got.shape();
                let finite = (0..r).all(|i| (0..c).all(|j| got.get(i, j).is_finite()));
                assert!(
                    finite,
                    "after poison {m}x{n} {ty:?}: a NaN from the earlier call"
                );
            }
        }
        poison(m, n, k);
    }
}

/// Empty drivers (no rows, no columns) and a 1×1 one.
#[test]
fn tiles_of_empty_and_one_by_one_drivers() {
    for (m, n) in [(0, 5), (5, 0), (1, 1)] {
        let u = mat(m, 3, 1.0, 2, false);
        let v = mat(n, 3, 1.0, 3, false);
        let x = mat(m, n, 1.0, 1, false);
        for ty in TYPES {
            check(ty, &x, &u, &v, 2, &format!("{m}x{n}"));
        }
    }
}

/// A full sum over tiles is deterministic: the same bits on every run, whatever the thread
/// count (tasks and tiles are fixed by the shape).
#[test]
fn a_sum_over_tiles_gives_the_same_bits_on_one_thread_and_many() {
    let (m, n, k) = (3 * TILE_ROWS + 17, TILE_COLS + 31, 9);
    let (x, u, v) = (
        mat(m, n, 1.0, 1, false),
        mat(m, k, 1.0, 2, false),
        mat(n, k, 1.0, 3, false),
    );
    let p = plan(OuterType::FullAgg);
    let op = compile(&p).unwrap();
    let ins = [
        Operand::Matrix(&x),
        Operand::Matrix(&u),
        Operand::Matrix(&v),
    ];
    let run = || {
        op.execute_with_options(&ins, &[(1, 1)], &[], TILES)
            .unwrap()[0]
            .get(0, 0)
    };
    let many = run();
    let one = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap()
        .install(run);
    assert_eq!(many.to_bits(), one.to_bits());
}

/// A full sum over tiles that overflows is `+Inf`, as unfused: the tile entry first adds
/// without resetting a correction that is not finite, where an overflow turns the sum into
/// NaN (`Inf - Inf` in the next step), and runs the tile again with resets when its sum ended
/// up not finite. Both a sum of huge finite cells and one infinite cell among ordinary ones.
#[test]
fn a_sum_over_tiles_that_overflows_is_infinite_not_nan() {
    let (m, n, k) = (40, TILE_COLS + 9, 5);
    // `log(|u . v| + 1e-3)` = `log(5.001)` > 0 at every cell.
    let ones = |r: usize, c: usize| Matrix::from_dense_values(r, c, vec![1.0; r * c]).unwrap();
    let (u, v) = (ones(m, k), ones(n, k));
    let huge = Matrix::from_dense_values(m, n, vec![1e308; m * n]).unwrap();
    let mut one_inf = vec![0.5; m * n];
    one_inf[3 * n + 7] = f64::INFINITY;
    let one_inf = Matrix::from_dense_values(m, n, one_inf).unwrap();
    for (x, what) in [(&huge, "huge cells"), (&one_inf, "one infinite cell")] {
        let got = check(OuterType::FullAgg, x, &u, &v, 1, what).get(0, 0);
        assert_eq!(got, f64::INFINITY, "{what}: {got}");
    }
}
