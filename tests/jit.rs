//! `EngineConfig::jit`: a whole run compiled with Cranelift prints what the LLVM run prints,
//! to the last digit (their operators agree to the bit), Row operators included.
#![cfg(all(feature = "llvm", feature = "cranelift"))]

use lafuse::{Engine, EngineConfig, Jit, RunReport, ScriptArgs, SourceFile};

fn run(jit: Jit, script: &str) -> (String, RunReport) {
    let source = SourceFile::new("test.dml", script);
    let mut out = Vec::new();
    let report = Engine::new(EngineConfig {
        jit,
        collect_stats: true,
        ..EngineConfig::default()
    })
    .run(&source, &ScriptArgs::default(), &mut out)
    .unwrap_or_else(|e| panic!("{}", e.render(&source)));
    (String::from_utf8(out).unwrap(), report)
}

/// Cell (full, row and column aggregates, no aggregate), MultiAgg and Outer operators, dense
/// and sparse, with exp and log, in a loop (the second iteration finds its operators kept);
/// the optimizer makes one of the aggregates a Row operator.
const CELL_MAGG_OUTER: &str = r#"
X = rand(rows=300, cols=70, seed=1)
S = rand(rows=300, cols=70, sparsity=0.05, seed=4)
Y = rand(rows=300, cols=70, seed=2)
Z = rand(rows=300, cols=70, seed=3)
U = rand(rows=300, cols=9, seed=5)
V = rand(rows=70, cols=9, seed=6)
for (i in 1:2) {
  a = sum(X * Y * Z)
  b = sum(X * Y) + sum(X * Z)
  R = rowSums(exp(X) * Y - Z)
  C = colMaxs(log(X + 1) * Z)
  E = exp(X - Y) + 2 * Z
  o = sum(S * log(U %*% t(V) + 1e-15))
  q = sum(S * Y * Z)
  print(toString(a + b + i, decimal=17))
  print(toString(sum(R), decimal=17))
  print(toString(sum(C), decimal=17))
  print(toString(sum(E), decimal=17))
  print(toString(o, decimal=17))
  print(toString(q, decimal=17))
}
"#;

#[test]
fn cranelift_runs_print_what_llvm_runs_print() {
    let (llvm, lr) = run(Jit::Llvm, CELL_MAGG_OUTER);
    let (cranelift, cr) = run(Jit::Cranelift, CELL_MAGG_OUTER);
    assert_eq!(cranelift, llvm);
    assert!(cr.stats.operators_compiled > 0, "{:?}", cr.stats);
    for stats in [&lr.stats, &cr.stats] {
        assert!(
            stats.unfused_fallbacks.is_empty(),
            "{:?}",
            stats.unfused_fallbacks
        );
    }
    assert_eq!(
        cr.stats.fused_operators_executed, lr.stats.fused_operators_executed,
        "fused operators under Cranelift and under LLVM"
    );
}

/// Row operators under Cranelift (`t(X) %*% (w * (X %*% v))`, `rowSums(X * Y) / rowMaxs(X)`,
/// `colSums(X / rowSums(X))`, over dense and sparse `X`, with NaN and infinities in a side
/// input) run fused and print what LLVM's print, to the last digit.
#[test]
fn row_operators_under_cranelift_print_what_llvm_prints() {
    let script = r#"
X = rand(rows=700, cols=45, seed=1)
S = rand(rows=700, cols=45, sparsity=0.1, seed=7)
Y = rand(rows=700, cols=45, seed=2)
v = rand(rows=45, cols=1, seed=3)
w = rand(rows=700, cols=1, seed=4)
V = rand(rows=45, cols=3, seed=5)
Wn = rand(rows=700, cols=3, seed=6)
Wn[3, 2] = 1 / 0
Wn[9, 1] = 0 / 0
A = t(X) %*% (w * (X %*% v))
B = t(X) %*% (Wn * (X %*% V))
r = rowSums(X * Y) / rowMaxs(X + 1)
C = colSums(X / (rowSums(X) + 1))
print(toString(A, decimal=17))
print(toString(B, decimal=17))
print(toString(sum(r), decimal=17) + " " + toString(max(r), decimal=17))
print(toString(C, decimal=17))
A = t(S) %*% (w * (S %*% v))
B = t(S) %*% (Wn * (S %*% V))
r = rowSums(S * Y) / rowMaxs(S + 1)
C = colSums(S / (rowSums(S) + 1))
print(toString(A, decimal=17))
print(toString(B, decimal=17))
print(toString(sum(r), decimal=17) + " " + toString(max(r), decimal=17))
print(toString(C, decimal=17))
"#;
    let (llvm, lr) = run(Jit::Llvm, script);
    let (cranelift, cr) = run(Jit::Cranelift, script);
    assert_eq!(cranelift, llvm);
    // What runs unfused (a product over the non-finite `Wn`, on the reference evaluator)
    // does so under either backend.
    assert_eq!(
        format!("{:?}", cr.stats.unfused_fallbacks),
        format!("{:?}", lr.stats.unfused_fallbacks)
    );
    assert!(cr.stats.fused_operators_executed > 0, "{:?}", cr.stats);
    assert_eq!(
        cr.stats.fused_operators_executed,
        lr.stats.fused_operators_executed
    );
}

/// `CELL_MAGG_OUTER`'s operators in a loop of `iterations`, accumulating, printing every
/// iteration's values.
fn tier_loop(iterations: usize) -> String {
    format!(
        r#"
X = rand(rows=300, cols=70, seed=1)
S = rand(rows=300, cols=70, sparsity=0.05, seed=4)
Y = rand(rows=300, cols=70, seed=2)
U = rand(rows=300, cols=9, seed=5)
V = rand(rows=70, cols=9, seed=6)
acc = 0
for (i in 1:{iterations}) {{
  a = sum(X * Y * i)
  R = rowSums(exp(X) * Y - i)
  o = sum(S * log(U %*% t(V) + i))
  m = max(X * Y) + min(X * Y)
  acc = acc + a + sum(R) + o + m
  print(toString(a, decimal=17) + " " + toString(sum(R), decimal=17) + " "
    + toString(o, decimal=17) + " " + toString(m, decimal=17))
}}
print(toString(acc, decimal=17))
"#
    )
}

/// `--jit tiered` with a tiny threshold: every operator is promoted at its first call, LLVM
/// compiles in the background while the loop runs on Cranelift's code, and the operators
/// switch mid-loop; every iteration prints what `--jit llvm` prints, to the last digit, and
/// the statistics count both tiers and the switches. (When does a switch land is up to the
/// background thread: a loop that ended before any did is run again, longer.)
#[test]
fn a_tiered_run_switches_mid_loop_and_prints_what_llvm_prints() {
    let tiered = |iterations: usize, threshold: u64| {
        let source = SourceFile::new("test.dml", tier_loop(iterations));
        let mut out = Vec::new();
        let report = Engine::new(EngineConfig {
            jit: Jit::Tiered,
            tier_threshold: threshold,
            // Every block fused at once (no block starts on the unfused kernels).
            tier_compile_ms: 0.0,
            collect_stats: true,
            ..EngineConfig::default()
        })
        .run(&source, &ScriptArgs::default(), &mut out)
        .unwrap_or_else(|e| panic!("{}", e.render(&source)));
        (String::from_utf8(out).unwrap(), report)
    };
    let mut iterations = 40;
    loop {
        let (llvm, lr) = run(Jit::Llvm, &tier_loop(iterations));
        assert!(lr.stats.tiering.is_none());
        let (out, report) = tiered(iterations, 1);
        assert_eq!(out, llvm, "{iterations} iterations");
        let stats = &report.stats;
        // Row operators (the rowSums) are tiered as the others: nothing runs unfused, and
        // every LLVM compilation is a promotion in the background.
        assert!(
            stats.unfused_fallbacks.is_empty(),
            "{:?}",
            stats.unfused_fallbacks
        );
        let t = stats.tiering.as_ref().expect("tiering statistics");
        assert!(t.cranelift_compiled > 0 && t.cranelift_calls > 0, "{t:?}");
        assert_eq!(t.llvm_compiled, t.llvm_background, "{t:?}");
        assert_eq!(
            t.cranelift_calls + t.llvm_calls,
            stats.fused_operators_executed,
            "{t:?}"
        );
        if t.tier_switches > 0 {
            assert!(t.llvm_background >= t.tier_switches, "{t:?}");
            assert!(t.llvm_calls > 0 && t.llvm_run_ms > 0.0, "{t:?}");
            let text = stats.to_text();
            assert!(text.contains("Tier switches to LLVM:"), "{text}");
            break;
        }
        assert!(
            iterations < 40 * 4usize.pow(4),
            "no switch in {iterations} iterations"
        );
        iterations *= 4;
    }

    // A threshold no operator reaches: every call runs Cranelift's code, and prints the same.
    let (llvm, _) = run(Jit::Llvm, &tier_loop(3));
    let (out, report) = tiered(3, u64::MAX);
    assert_eq!(out, llvm);
    let t = report.stats.tiering.unwrap();
    assert_eq!((t.tier_switches, t.llvm_background), (0, 0), "{t:?}");
}

/// `tier_loop(iterations)` under `--jit tiered` with `compile_ms` of expected compile time per
/// operator, blocks that fall due fused on a background thread or not, and LLVM never
/// promoted (the Cranelift tier prints what LLVM prints anyway).
fn deferred(iterations: usize, compile_ms: f64, in_background: bool) -> (String, RunReport) {
    let source = SourceFile::new("test.dml", tier_loop(iterations));
    let mut out = Vec::new();
    let report = Engine::new(EngineConfig {
        jit: Jit::Tiered,
        tier_threshold: u64::MAX,
        tier_compile_ms: compile_ms,
        tier_in_background: in_background,
        collect_stats: true,
        ..EngineConfig::default()
    })
    .run(&source, &ScriptArgs::default(), &mut out)
    .unwrap_or_else(|e| panic!("{}", e.render(&source)));
    (String::from_utf8(out).unwrap(), report)
}

/// The unfused run of `tier_loop(iterations)`.
fn unfused(iterations: usize) -> String {
    let source = SourceFile::new("test.dml", tier_loop(iterations));
    let mut out = Vec::new();
    Engine::new(EngineConfig {
        fusion: None,
        ..EngineConfig::default()
    })
    .run(&source, &ScriptArgs::default(), &mut out)
    .unwrap_or_else(|e| panic!("{}", e.render(&source)));
    String::from_utf8(out).unwrap()
}

/// A block whose fusion the cost model never expects to pay for (an hour of compile time an
/// operator) runs on the unfused kernels throughout: the run prints what `--fusion none`
/// prints, to the last digit, and no operator is compiled.
#[test]
fn tiered_blocks_whose_fusion_does_not_pay_run_unfused() {
    for in_background in [false, true] {
        let (out, report) = deferred(6, 3.6e6, in_background);
        assert_eq!(out, unfused(6));
        let t = report.stats.tiering.as_ref().expect("tiering statistics");
        assert!(t.blocks_unfused_first > 0, "{t:?}");
        assert_eq!(t.blocks_fused_later, 0, "{t:?}");
        assert_eq!(report.stats.operators_compiled, 0, "{:?}", report.stats);
        assert_eq!(report.stats.fused_operators_executed, 0);
    }
}

/// Under the rent-or-buy rule a loop body runs unfused for its first iterations and fused from
/// the iteration at which fusion has paid for its compilation: the iterations before print what
/// the unfused run prints and those from it what the fused (`--jit llvm`) run prints, to the
/// last digit, and for some expected compile time that switch lands mid-loop. Fused on a
/// background thread, the block switches later (after the lag the cost model names) but the
/// same way. The switch is deterministic: the same run again prints the same, whatever the
/// background thread's speed.
#[test]
fn tiered_blocks_switch_from_unfused_to_fused_mid_loop() {
    let iterations = 30;
    let none = unfused(iterations);
    let (llvm, llvm_report) = run(Jit::Llvm, &tier_loop(iterations));
    // The loop body is one block, all of whose operators run each iteration.
    let per_iteration = llvm_report.stats.fused_operators_executed / iterations as u64;
    assert!(per_iteration > 0);
    assert_eq!(
        llvm_report.stats.fused_operators_executed,
        per_iteration * iterations as u64
    );
    let (none_lines, llvm_lines): (Vec<_>, Vec<_>) =
        (none.lines().collect(), llvm.lines().collect());
    let mut switched_mid_loop = [false; 2];
    // Half decades where the switch moves from the first iterations past the last (a
    // background switch waits sixteen compilations' worth of runs more).
    for compile_ms in [1e-4, 1e-3, 1e-2, 0.1, 0.3, 1.0, 3.0, 10.0, 100.0] {
        let mut unfused_iterations = [0; 2];
        for in_background in [false, true] {
            let what = format!("compile {compile_ms} ms, in the background: {in_background}");
            let (out, report) = deferred(iterations, compile_ms, in_background);
            let executed = report.stats.fused_operators_executed;
            assert_eq!(executed % per_iteration, 0, "{what}");
            let unfused_here = iterations - (executed / per_iteration) as usize;
            let lines: Vec<_> = out.lines().collect();
            // The last line, the accumulated sum, mixes both and is left out.
            for k in 0..iterations {
                let expected = if k < unfused_here {
                    none_lines[k]
                } else {
                    llvm_lines[k]
                };
                assert_eq!(lines[k], expected, "{what}, iteration {k}");
            }
            let t = report.stats.tiering.as_ref().expect("tiering statistics");
            if unfused_here > 1 && unfused_here < iterations {
                switched_mid_loop[usize::from(in_background)] = true;
                assert!(
                    t.blocks_unfused_first > 0 && t.blocks_fused_later > 0,
                    "{what}: {t:?}"
                );
            }
            for _ in 0..2 {
                assert_eq!(
                    deferred(iterations, compile_ms, in_background).0,
                    out,
                    "{what}"
                );
            }
            unfused_iterations[usize::from(in_background)] = unfused_here;
        }
        let [foreground, background] = unfused_iterations;
        assert!(
            background >= foreground,
            "compile {compile_ms} ms: fused in the background from iteration {background}, \
             in the foreground from {foreground}"
        );
    }
    assert_eq!(
        switched_mid_loop, [true; 2],
        "no expected compile time made the loop switch mid-way (foreground, background)"
    );
}
