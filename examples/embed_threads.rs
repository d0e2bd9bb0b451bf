//! One prepared script serving eight threads at once: each thread executes it on its own data
//! (dense and sparse) and checks every result against the same script run unfused. The
//! threads share the engine's fused operators and the script's compiled blocks.
//!
//! `cargo run --release --example embed_threads`. Run by `cargo test` too.

use lafuse::{Bindings, Engine, EngineConfig, Jit, Matrix, ScriptArgs, SourceFile};

/// The fusion paper's Cell, MultiAgg and Row patterns over the bound X, Y, v and w.
const SCRIPT: &str = "\
s = sum(X * Y * log(abs(Y) + 1))
a = sum(X ^ 2)
b = sum(X * Y)
R = t(X) %*% (w * (X %*% v))
";

const THREADS: u64 = 8;
const ROUNDS: u64 = 6;

fn main() -> Result<(), String> {
    let source = SourceFile::new("threads.dml", SCRIPT);
    let (inputs, outputs) = (["X", "Y", "v", "w"], ["s", "a", "b", "R"]);
    // Fused from the first execution: under the default tiered JIT these small blocks run on
    // the unfused kernels until fusing them pays, and whether any of the 48 executions gets
    // that far depends on how the threads' shapes interleave (the example failed once that
    // way under a loaded machine).
    let prepared = Engine::new(EngineConfig {
        jit: Jit::Llvm,
        ..EngineConfig::default()
    })
    .prepare(&source, &ScriptArgs::default(), &inputs, &outputs)
    .map_err(|e| e.render(&source))?;
    let reference = Engine::new(EngineConfig {
        fusion: None,
        ..EngineConfig::default()
    })
    .prepare(&source, &ScriptArgs::default(), &inputs, &outputs)
    .map_err(|e| e.render(&source))?;

    let results: Vec<Result<u64, String>> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..THREADS)
            .map(|t| {
                let (prepared, reference) = (&prepared, &reference);
                scope.spawn(move || -> Result<u64, String> {
                    let mut fused_ops = 0;
                    for round in 0..ROUNDS {
                        // Threads alternate dense and sparse X; shapes vary by round.
                        let density = if (t + round) % 2 == 0 { 1.0 } else { 0.05 };
                        let rows = 500 + 100 * (round as usize % 3);
                        let b = bindings(rows, 30, 97 * t + round, density);
                        let got = prepared.execute(&b).map_err(|e| e.to_string())?;
                        let want = reference.execute(&b).map_err(|e| e.to_string())?;
                        for name in ["s", "a", "b"] {
                            let (x, y) = (got.scalar(name), want.scalar(name));
                            let (x, y) =
                                (x.map_err(|e| e.to_string())?, y.map_err(|e| e.to_string())?);
                            if (x - y).abs() > 1e-9 * y.abs().max(1e-300) {
                                return Err(format!(
                                    "thread {t} round {round}: {name} = {x}, unfused {y}"
                                ));
                            }
                        }
                        let r = got.matrix("R").map_err(|e| e.to_string())?;
                        let want_r = want.matrix("R").map_err(|e| e.to_string())?;
                        for j in 0..r.rows() {
                            let (x, y) = (r.get(j, 0), want_r.get(j, 0));
                            if (x - y).abs() > 1e-9 * y.abs().max(1e-12) {
                                return Err(format!(
                                    "thread {t} round {round}: R[{j}] = {x}, unfused {y}"
                                ));
                            }
                        }
                        fused_ops += got.stats.fused_operators_executed;
                    }
                    Ok(fused_ops)
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|w| w.join().unwrap_or_else(|_| Err("a worker panicked".into())))
            .collect()
    });
    let mut fused = 0;
    for r in results {
        fused += r?;
    }
    if fused == 0 {
        return Err("no fused operator ran".into());
    }
    println!(
        "{THREADS} threads x {ROUNDS} executions of one prepared script agree with unfused \
         execution"
    );
    Ok(())
}

fn bindings(rows: usize, cols: usize, seed: u64, density: f64) -> Bindings<'static> {
    let mut b = Bindings::new();
    b.matrix("X", random(rows, cols, seed, density))
        .matrix("Y", random(rows, cols, seed + 1, 1.0))
        .matrix("v", random(cols, 1, seed + 2, 1.0))
        .matrix("w", random(rows, 1, seed + 3, 1.0));
    b
}

/// Values in (-1, 1), a share `density` of them non-zero.
fn random(rows: usize, cols: usize, seed: u64, density: f64) -> Matrix {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut uniform = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state >> 11) as f64 / (1u64 << 53) as f64
    };
    let values = (0..rows * cols)
        .map(|_| {
            let keep = uniform() < density;
            let v = 2.0 * uniform() - 1.0;
            if keep {
                v
            } else {
                0.0
            }
        })
        .collect();
    Matrix::from_dense_values(rows, cols, values).expect("valid shape")
}
