//! What embedding costs per call: a small script run from source each time (`Engine::run`:
//! parse, check, compile, execute) against the same script prepared once and executed
//! (`PreparedScript::execute`) and the same computation as a prepared DAG, measured
//! interleaved in one run (medians and spread over rounds); and the compile time of a prepared
//! L2SVM's first and second execution on same-shaped data.
//!
//! The checks "a prepared script's second execution on same-shaped data compiles nothing"
//! (no block compiled, no operator compiled, zero compile time in its statistics) and "a
//! prepared small script's call costs less than a tenth of running it from source" are
//! reported as PASS/FAIL lines, not asserted. Figures also go to `target/bench-embed.json`.
//!
//! Run: `cargo bench --bench embed`. `LAFUSE_BENCH_REPS` sets the calls per round (default
//! 2000), `LAFUSE_BENCH_ROUNDS` the rounds (default 7).

use lafuse::crates::compiler::hops::{AggOp, BinaryOp, Direction};
use lafuse::{
    Bindings, DagBuilder, Engine, EngineConfig, Jit, Matrix, Outputs, ScriptArgs, SourceFile,
};
use std::hint::black_box;
use std::time::Instant;

type BenchResult<T> = Result<T, Box<dyn std::error::Error>>;

const SMALL: &str = "s = sum(X * Y * 2)\n";

fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn random(rows: usize, cols: usize, seed: u64) -> Matrix {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let values = (0..rows * cols)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            2.0 * ((state >> 11) as f64 / (1u64 << 53) as f64) - 1.0
        })
        .collect();
    Matrix::from_dense_values(rows, cols, values).expect("valid shape")
}

/// Median and (min, max) of per-call microseconds over rounds.
fn summary(mut v: Vec<f64>) -> (f64, f64, f64) {
    v.sort_by(f64::total_cmp);
    (v[v.len() / 2], v[0], v[v.len() - 1])
}

fn per_call_us(reps: usize, mut call: impl FnMut() -> BenchResult<()>) -> BenchResult<f64> {
    let started = Instant::now();
    for _ in 0..reps {
        call()?;
    }
    Ok(started.elapsed().as_secs_f64() * 1e6 / reps as f64)
}

fn main() -> BenchResult<()> {
    let reps = env_or("LAFUSE_BENCH_REPS", 2000);
    let rounds = env_or("LAFUSE_BENCH_ROUNDS", 7).max(1);
    let engine = Engine::new(EngineConfig::default());

    // --- per-call overhead of a small script (10x10 inputs) ---
    let source = SourceFile::new("small.dml", SMALL);
    let args = ScriptArgs::default();
    let prepared = engine.prepare(&source, &args, &["X", "Y"], &["s"])?;
    let dag = {
        let mut b = DagBuilder::new();
        let x = b.input("X", 10, 10, 100);
        let y = b.input("Y", 10, 10, 100);
        let two = b.literal_f64(2.0);
        let xy = b.binary(BinaryOp::Mul, x, y)?;
        let xy2 = b.binary(BinaryOp::Mul, xy, two)?;
        let s = b.agg(AggOp::Sum, Direction::Full, xy2)?;
        b.output("s", s)?;
        engine.prepare_dag(b.build()?)?
    };
    let mut bindings = Bindings::new();
    bindings
        .matrix("X", random(10, 10, 1))
        .matrix("Y", random(10, 10, 2));
    // The script from source sees the same data through `read`-free literals: it builds X and
    // Y itself, so its figure includes that (two 10x10 rand calls, about a microsecond).
    let from_source = SourceFile::new(
        "small_source.dml",
        "X = rand(rows=10, cols=10, seed=1)\nY = rand(rows=10, cols=10, seed=2)\ns = sum(X * Y * 2)\n",
    );
    let want = prepared.execute(&bindings)?.scalar("s")?;
    let got = dag.execute(&bindings)?.scalar("s")?;
    if want != got {
        return Err(format!("prepared script {want} and DAG {got} disagree").into());
    }
    let (mut run_us, mut script_us, mut dag_us) = (Vec::new(), Vec::new(), Vec::new());
    // Warm-up: every block and operator compiled once.
    engine.run(&from_source, &args, &mut std::io::sink())?;
    for _ in 0..rounds {
        // Interleaved, so that drift of the shared machine affects all three alike.
        run_us.push(per_call_us(reps / 10 + 1, || {
            engine.run(&from_source, &args, &mut std::io::sink())?;
            Ok(())
        })?);
        script_us.push(per_call_us(reps, || {
            black_box(prepared.execute(&bindings)?);
            Ok(())
        })?);
        dag_us.push(per_call_us(reps, || {
            black_box(dag.execute(&bindings)?);
            Ok(())
        })?);
    }
    let (run_med, run_min, run_max) = summary(run_us);
    let (script_med, script_min, script_max) = summary(script_us);
    let (dag_med, dag_min, dag_max) = summary(dag_us);
    println!(
        "per call, `s = sum(X * Y * 2)` on 10x10 inputs ({rounds} rounds; median [min, max]):"
    );
    println!("  Engine::run from source      {run_med:9.1} us [{run_min:.1}, {run_max:.1}]");
    println!(
        "  PreparedScript::execute      {script_med:9.1} us [{script_min:.1}, {script_max:.1}]"
    );
    println!("  PreparedDag::execute         {dag_med:9.1} us [{dag_min:.1}, {dag_max:.1}]");
    println!(
        "  from source / prepared: {:.1}x, DAG / prepared script: {:.2}x",
        run_med / script_med,
        dag_med / script_med
    );

    // --- a prepared L2SVM: compile time of the first and second execution ---
    let l2svm = SourceFile::new(
        "l2svm.dml",
        include_str!("../examples/algorithms/l2svm.dml"),
    );
    // Every block fused at the first execution (LLVM): the default tiered JIT compiles a
    // block's fusion at the execution where it has paid for itself, which may be a later one.
    let stats_engine = Engine::new(EngineConfig {
        collect_stats: true,
        jit: Jit::Llvm,
        ..EngineConfig::default()
    });
    let svm = stats_engine.prepare(&l2svm, &args, &["X", "Y"], &["w"])?;
    let mut runs: Vec<Outputs> = Vec::new();
    for seed in 0..2 {
        let x = random(2000, 50, 10 + seed);
        let y_values: Vec<f64> = (0..2000)
            .map(|i| {
                if x.get(i, 0) + x.get(i, 1) > 0.0 {
                    1.0
                } else {
                    -1.0
                }
            })
            .collect();
        let mut b = Bindings::new();
        b.matrix("X", x)
            .matrix("Y", Matrix::from_dense_values(2000, 1, y_values)?);
        runs.push(svm.execute(&b)?);
    }
    let (first, second) = (&runs[0].stats, &runs[1].stats);
    println!("prepared L2SVM on 2000x50, two executions on different same-shaped data:");
    for (label, s) in [("first", first), ("second", second)] {
        println!(
            "  {label:6}: {:8.2} ms total, compile {:7.2} ms, {} blocks and {} operators compiled, \
             {} block plans reused",
            s.total_ms, s.compile_ms, s.blocks_compiled, s.operators_compiled, s.block_cache_hits
        );
    }
    let nothing_compiled =
        second.blocks_compiled == 0 && second.operators_compiled == 0 && second.compile_ms == 0.0;
    println!(
        "{}: a prepared script's second execution on same-shaped data compiles nothing",
        if nothing_compiled { "PASS" } else { "FAIL" }
    );
    println!(
        "{}: a prepared small script's call costs under a tenth of running it from source \
         ({:.1} us vs {:.1} us)",
        if script_med * 10.0 < run_med {
            "PASS"
        } else {
            "FAIL"
        },
        script_med,
        run_med
    );
    let json = serde_json::json!({
        "small_script_us": {
            "run_from_source": [run_med, run_min, run_max],
            "prepared_script": [script_med, script_min, script_max],
            "prepared_dag": [dag_med, dag_min, dag_max],
        },
        "l2svm_2000x50": {
            "first": { "total_ms": first.total_ms, "compile_ms": first.compile_ms,
                       "blocks_compiled": first.blocks_compiled,
                       "operators_compiled": first.operators_compiled },
            "second": { "total_ms": second.total_ms, "compile_ms": second.compile_ms,
                        "blocks_compiled": second.blocks_compiled,
                        "operators_compiled": second.operators_compiled },
        },
    });
    let target = std::env::var("CARGO_TARGET_DIR").unwrap_or_else(|_| "target".into());
    let path = std::path::Path::new(&target).join("bench-embed.json");
    std::fs::write(&path, serde_json::to_string_pretty(&json)? + "\n")?;
    println!("figures: {}", path.display());
    Ok(())
}
