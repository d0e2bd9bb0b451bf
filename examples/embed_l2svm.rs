//! A prepared script executed many times: SystemDS's L2SVM script (`examples/algorithms/
//! l2svm.dml`, written to read its data from files) prepared once with `X` and `Y` as inputs,
//! then trained on 100 different data sets, each result checked against unfused execution.
//!
//! `cargo run --release --example embed_l2svm`. Run by `cargo test` too.

use lafuse::{Bindings, Engine, EngineConfig, Jit, Matrix, PreparedScript, ScriptArgs, SourceFile};

/// Rows and columns of each data set, and the number of data sets.
const ROWS: usize = 400;
const COLS: usize = 12;
const EXECUTIONS: usize = 100;

fn main() -> Result<(), String> {
    let source = SourceFile::new("l2svm.dml", include_str!("algorithms/l2svm.dml"));
    let args = ScriptArgs::default();
    // The script's `X = read($X, ...)` and `Y = read($Y, ...)` are skipped: X and Y are bound.
    let (inputs, outputs) = (["X", "Y"], ["w", "obj", "iter"]);
    let engine = Engine::new(EngineConfig {
        collect_stats: true,
        // Every block fused and compiled at the first execution, so that later ones compile
        // nothing; the default tiered JIT would compile a block's fusion at the execution
        // where it has paid for itself.
        jit: Jit::Llvm,
        ..EngineConfig::default()
    });
    let fused = engine
        .prepare(&source, &args, &inputs, &outputs)
        .map_err(|e| e.render(&source))?;
    let unfused = Engine::new(EngineConfig {
        fusion: None,
        ..EngineConfig::default()
    })
    .prepare(&source, &args, &inputs, &outputs)
    .map_err(|e| e.render(&source))?;

    let mut compiled_after_first = 0;
    let started = std::time::Instant::now();
    for k in 0..EXECUTIONS {
        let (x, y) = separable_data(ROWS, COLS, 1000 + k as u64);
        let mut bindings = Bindings::new();
        bindings.matrix("X", x).matrix("Y", y);
        let got = execute(&fused, &bindings)?;
        let want = execute(&unfused, &bindings)?;
        if !got.printed.contains("check PASS") {
            return Err(format!("execution {k}: {}", got.printed));
        }
        let (iters, want_iters) = (scalar(&got, "iter")?, scalar(&want, "iter")?);
        let (obj, want_obj) = (scalar(&got, "obj")?, scalar(&want, "obj")?);
        if iters != want_iters || (obj - want_obj).abs() > 1e-6 * want_obj.abs() {
            return Err(format!(
                "execution {k}: fused {iters} iterations, objective {obj}; unfused {want_iters}, \
                 {want_obj}"
            ));
        }
        let w = got.matrix("w").map_err(|e| e.to_string())?;
        let want_w = want.matrix("w").map_err(|e| e.to_string())?;
        for j in 0..COLS {
            let (a, b) = (w.get(j, 0), want_w.get(j, 0));
            if (a - b).abs() > 1e-6 * b.abs().max(1e-3) {
                return Err(format!("execution {k}: w[{j}] fused {a}, unfused {b}"));
            }
        }
        if k > 0 {
            compiled_after_first += got.stats.blocks_compiled + got.stats.operators_compiled;
        }
    }
    // Same shapes every time: every block and operator was compiled by the first execution.
    if compiled_after_first != 0 {
        return Err(format!(
            "{compiled_after_first} blocks or operators compiled after the first execution"
        ));
    }
    println!(
        "{EXECUTIONS} L2SVM trainings of {ROWS}x{COLS} on one prepared script agree with \
         unfused execution; nothing compiled after the first ({:.1} ms per pair of executions)",
        started.elapsed().as_secs_f64() * 1e3 / EXECUTIONS as f64
    );
    Ok(())
}

fn execute(script: &PreparedScript, bindings: &Bindings<'_>) -> Result<lafuse::Outputs, String> {
    script
        .execute(bindings)
        .map_err(|e| e.render(script.source()))
}

fn scalar(outputs: &lafuse::Outputs, name: &str) -> Result<f64, String> {
    outputs.scalar(name).map_err(|e| e.to_string())
}

/// Features in (-1, 1) and labels ±1 from a hidden linear model, 5 % of them flipped.
fn separable_data(rows: usize, cols: usize, seed: u64) -> (Matrix, Matrix) {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut uniform = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state >> 11) as f64 / (1u64 << 53) as f64
    };
    let w_true: Vec<f64> = (0..cols).map(|_| 2.0 * uniform() - 1.0).collect();
    let x: Vec<f64> = (0..rows * cols).map(|_| 2.0 * uniform() - 1.0).collect();
    let y: Vec<f64> = x
        .chunks(cols)
        .map(|row| {
            let margin: f64 = row.iter().zip(&w_true).map(|(a, b)| a * b).sum();
            let label = if margin > 0.0 { 1.0 } else { -1.0 };
            if uniform() < 0.05 {
                -label
            } else {
                label
            }
        })
        .collect();
    let matrix = |r, c, v| Matrix::from_dense_values(r, c, v).expect("valid shape");
    (matrix(rows, cols, x), matrix(rows, 1, y))
}
