//! HOP DAGs executed on an embedder's own arrays: `sum(X * Y * Z)` (a Cell operator) and
//! `t(X) %*% (w * (X %*% v))` (a Row operator), built with `DagBuilder`, prepared once, and
//! run on `ndarray` arrays and on `sprs` CSR matrices that lafuse reads in place (zero-copy
//! views); results come back as an owned `ndarray` array, checked against plain loops.
//!
//! `cargo run --release --example embed_dag --features ndarray,sprs`. Run by `cargo test
//! --all-features` too.

use lafuse::crates::compiler::hops::{AggOp, BinaryOp, Direction};
use lafuse::interop::ndarray::into_array2;
use lafuse::{Bindings, DagBuilder, Engine, EngineConfig, HopDag, Jit, MatrixView};
use ndarray::{Array2, ArrayView2};
use sprs::{CsMat, TriMat};

const ROWS: usize = 2000;
const COLS: usize = 60;

/// Both patterns in one DAG; the inputs' sizes are left to the bound arrays.
fn patterns() -> Result<HopDag, Box<dyn std::error::Error>> {
    let mut b = DagBuilder::new();
    let [x, y, z, w, v] = ["X", "Y", "Z", "w", "v"].map(|n| b.input_with(n, None, None, None));
    let xy = b.binary(BinaryOp::Mul, x, y)?;
    let xyz = b.binary(BinaryOp::Mul, xy, z)?;
    let s = b.agg(AggOp::Sum, Direction::Full, xyz)?;
    b.output("s", s)?;
    let xv = b.matmul(x, v)?;
    let wxv = b.binary(BinaryOp::Mul, w, xv)?;
    let tx = b.transpose(x)?;
    let r = b.matmul(tx, wxv)?;
    b.output("R", r)?;
    Ok(b.build()?)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let engine = Engine::new(EngineConfig {
        collect_stats: true,
        // Fused at the first execution: the default tiered JIT runs a DAG this small on the
        // unfused kernels until fusing it pays for its compilation.
        jit: Jit::Llvm,
        ..EngineConfig::default()
    });
    let dag = engine.prepare_dag(patterns()?)?;

    let dense = |rows, cols, seed: u64| {
        let mut next = lcg(seed);
        Array2::from_shape_fn((rows, cols), |_| 2.0 * next() - 1.0)
    };
    let (y, z) = (dense(ROWS, COLS, 2), dense(ROWS, COLS, 3));
    let (w, v) = (dense(ROWS, 1, 4), dense(COLS, 1, 5));

    // X dense (an ndarray view, read in place), then sparse (a sprs CSR matrix, read in place).
    let x_dense = dense(ROWS, COLS, 1);
    let x_sparse = sparse(ROWS, COLS, 0.05, 6);
    let x_sparse_dense = x_sparse.to_dense();
    for (label, x) in [("ndarray", None), ("sprs", Some(&x_sparse))] {
        let x_values: ArrayView2<f64> = match x {
            None => x_dense.view(),
            Some(_) => x_sparse_dense.view(),
        };
        let mut inputs = Bindings::new();
        match x {
            None => inputs.view("X", MatrixView::try_from(x_dense.view())?),
            Some(csr) => inputs.view("X", MatrixView::try_from(csr.view())?),
        };
        inputs
            .view("Y", MatrixView::try_from(y.view())?)
            .view("Z", MatrixView::try_from(z.view())?)
            .view("w", MatrixView::try_from(w.view())?)
            .view("v", MatrixView::try_from(v.view())?);
        let mut out = dag.execute(&inputs)?;
        let s = out.scalar("s")?;
        let r = into_array2(out.take_matrix("R")?)?;

        // The same with plain loops.
        let want_s: f64 = (0..ROWS)
            .flat_map(|i| (0..COLS).map(move |j| (i, j)))
            .map(|(i, j)| x_values[[i, j]] * y[[i, j]] * z[[i, j]])
            .sum();
        let xv: Vec<f64> = (0..ROWS)
            .map(|i| (0..COLS).map(|j| x_values[[i, j]] * v[[j, 0]]).sum::<f64>() * w[[i, 0]])
            .collect();
        let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * b.abs().max(1.0);
        if !close(s, want_s) {
            return Err(format!("{label}: sum(X*Y*Z) = {s}, loops give {want_s}").into());
        }
        for j in 0..COLS {
            let want: f64 = (0..ROWS).map(|i| x_values[[i, j]] * xv[i]).sum();
            if !close(r[[j, 0]], want) {
                return Err(format!("{label}: R[{j}] = {}, loops give {want}", r[[j, 0]]).into());
            }
        }
        if out.stats.fused_operators_executed < 2 {
            return Err(format!(
                "{label}: {} fused operators ran",
                out.stats.fused_operators_executed
            )
            .into());
        }
        println!(
            "{label}: X {ROWS}x{COLS} read in place; sum(X*Y*Z) = {s:.6}, R {}x{} (fused operators: {})",
            r.nrows(),
            r.ncols(),
            out.stats.fused_operators_executed
        );
    }
    Ok(())
}

/// A CSR matrix with about `density` of its cells non-zero.
fn sparse(rows: usize, cols: usize, density: f64, seed: u64) -> CsMat<f64> {
    let mut next = lcg(seed);
    let mut triplets = TriMat::new((rows, cols));
    for i in 0..rows {
        for j in 0..cols {
            if next() < density {
                triplets.add_triplet(i, j, 2.0 * next() - 1.0);
            }
        }
    }
    triplets.to_csr()
}

/// Uniform values in [0, 1) from a 64-bit LCG (deterministic, no dependency).
fn lcg(seed: u64) -> impl FnMut() -> f64 {
    let mut state = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    move || {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (state >> 11) as f64 / (1u64 << 53) as f64
    }
}
