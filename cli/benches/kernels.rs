//! Unfused kernels against the machine's memory bandwidth, measured side by side in one run.
//!
//! The reference is a plain multithreaded sum over a large array (read bandwidth) and a plain
//! multithreaded `c = a + b` into a fresh buffer (STREAM "add", read+write bandwidth including
//! the page faults of a fresh output, as every unfused kernel pays them). Each kernel reports the
//! bytes it must move divided by its median time, as a fraction of the read reference.
//!
//! Run: `cargo bench --bench kernels` (100M cells, ~2.4 GB of memory; set `LAFUSE_BENCH_CELLS`
//! to change the size, `LAFUSE_BENCH_REPS` the repetitions).

use lafuse_runtime::kernels;
use lafuse_runtime::matrix::Matrix;
use lafuse_runtime::ops::{AggOp, BinaryOp, Direction, UnaryOp};
use rayon::prelude::*;
use std::time::Duration;

mod common;
use common::{median_time, reference_sum};

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// STREAM "add" into a fresh output buffer.
fn reference_add(a: &[f64], b: &[f64]) -> Vec<f64> {
    let mut out = vec![0.0; a.len()];
    out.par_chunks_mut(1 << 16)
        .zip(a.par_chunks(1 << 16).zip(b.par_chunks(1 << 16)))
        .for_each(|(o, (x, y))| {
            for ((o, x), y) in o.iter_mut().zip(x).zip(y) {
                *o = x + y;
            }
        });
    out
}

fn dense(cells: usize, cols: usize, seed: u64) -> Matrix {
    let mut s = seed | 1;
    let values: Vec<f64> = (0..cells)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 11) as f64 / (1u64 << 53) as f64 + 0.5
        })
        .collect();
    Matrix::from_dense_values(cells / cols, cols, values).expect("valid dense matrix")
}

fn main() {
    let cells = env_usize("LAFUSE_BENCH_CELLS", 100_000_000);
    let reps = env_usize("LAFUSE_BENCH_REPS", 5);
    let cols = 1000;
    let cells = cells / cols * cols;
    let gb = |bytes: f64, t: Duration| bytes / t.as_secs_f64() / 1e9;
    let bytes = (cells * 8) as f64;

    println!("lafuse kernel benchmark: {} x {} dense ({:.0} MB per matrix), {} threads, median of {reps}",
        cells / cols, cols, bytes / 1e6, rayon::current_num_threads());
    let x = dense(cells, cols, 7);
    let y = dense(cells, cols, 11);
    let (xv, yv) = match (&x, &y) {
        (Matrix::Dense(a), Matrix::Dense(b)) => (&a.values, &b.values),
        _ => unreachable!("dense inputs"),
    };

    let t_read = median_time(reps, || reference_sum(xv));
    let t_add = median_time(reps, || reference_add(xv, yv));
    let read_bw = gb(bytes, t_read);
    let add_bw = gb(3.0 * bytes, t_add);
    println!(
        "\n{:<34} {:>10} {:>10} {:>12} {:>12}",
        "operation", "time ms", "GB/s", "of read ref", "of add ref"
    );
    println!(
        "{:<34} {:>10.1} {:>10.2} {:>11.0}% {:>12}",
        "reference: plain sum (read)",
        ms(t_read),
        read_bw,
        100.0,
        ""
    );
    println!(
        "{:<34} {:>10.1} {:>10.2} {:>11.0}% {:>11.0}%",
        "reference: c = a + b (STREAM add)",
        ms(t_add),
        add_bw,
        100.0 * add_bw / read_bw,
        100.0
    );

    type Case<'a> = (&'a str, f64, Box<dyn Fn() -> Matrix + 'a>);
    let cases: Vec<Case> = vec![
        (
            "X + Y",
            3.0,
            Box::new(|| kernels::binary(&x, &y, BinaryOp::Add).unwrap()),
        ),
        (
            "X * Y",
            3.0,
            Box::new(|| kernels::binary(&x, &y, BinaryOp::Mul).unwrap()),
        ),
        (
            "X * 2.5",
            2.0,
            Box::new(|| kernels::binary_scalar(&x, 2.5, BinaryOp::Mul, false).unwrap()),
        ),
        (
            "exp(X)",
            2.0,
            Box::new(|| kernels::unary(&x, UnaryOp::Exp).unwrap()),
        ),
        (
            "sum(X)",
            1.0,
            Box::new(|| kernels::aggregate(&x, AggOp::Sum, Direction::Full).unwrap()),
        ),
        (
            "sum(X^2) as sumsq",
            1.0,
            Box::new(|| kernels::aggregate(&x, AggOp::SumSq, Direction::Full).unwrap()),
        ),
        (
            "max(X)",
            1.0,
            Box::new(|| kernels::aggregate(&x, AggOp::Max, Direction::Full).unwrap()),
        ),
        (
            "rowSums(X)",
            1.0,
            Box::new(|| kernels::aggregate(&x, AggOp::Sum, Direction::Row).unwrap()),
        ),
        (
            "colSums(X)",
            1.0,
            Box::new(|| kernels::aggregate(&x, AggOp::Sum, Direction::Col).unwrap()),
        ),
    ];
    for (name, passes, run) in &cases {
        let t = median_time(reps, run);
        let bw = gb(passes * bytes, t);
        println!(
            "{:<34} {:>10.1} {:>10.2} {:>11.0}% {:>11.0}%",
            name,
            ms(t),
            bw,
            100.0 * bw / read_bw,
            100.0 * bw / add_bw
        );
    }
    println!(
        "\nGB/s counts the bytes an operation must read and write (8 bytes per cell and pass)."
    );
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}
