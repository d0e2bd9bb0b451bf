//! The engine facade: value semantics under in-place updates, function scopes, plan caching,
//! deterministic explain output and statistics.

use lafuse::{
    Engine, EngineConfig, ExplainFormat, ExplainLevel, ExplainOptions, FusionBackend, FusionPolicy,
    ScriptArgs, SourceFile,
};

mod fused_at_once;

/// How many times instructions of `opcode` ran (`--stats`' heavy hitters).
fn executed(report: &lafuse::RunReport, opcode: &str) -> u64 {
    report
        .stats
        .heavy_hitters
        .iter()
        .find(|h| h.opcode == opcode)
        .map_or(0, |h| h.count)
}

fn run_with(config: EngineConfig, script: &str) -> (String, lafuse::RunReport) {
    let source = SourceFile::new("test.dml", script);
    let mut out = Vec::new();
    let report = Engine::new(config)
        .run(&source, &ScriptArgs::default(), &mut out)
        .unwrap_or_else(|e| panic!("{}", e.render(&source)));
    (String::from_utf8(out).unwrap(), report)
}

fn run(script: &str) -> String {
    run_with(fused_at_once::config(), script).0
}

/// Runs `script` with every operation on its unfused kernel; what it printed.
fn run_unfused(script: &str) -> String {
    run_with(
        EngineConfig {
            fusion: None,
            ..fused_at_once::config()
        },
        script,
    )
    .0
}

/// Runs `script` with every operation on its unfused kernel, with statistics.
fn run_unfused_with_stats(script: &str) -> (String, lafuse::RunReport) {
    run_with(
        EngineConfig {
            fusion: None,
            collect_stats: true,
            ..fused_at_once::config()
        },
        script,
    )
}

/// Runs `script` under `policy` with statistics.
fn run_policy(policy: FusionPolicy, script: &str) -> (String, lafuse::RunReport) {
    run_policy_on(policy, fused_at_once::config().backend, script)
}

/// Runs `script` under `policy` on fusion backend `backend` with statistics.
fn run_policy_on(
    policy: FusionPolicy,
    backend: FusionBackend,
    script: &str,
) -> (String, lafuse::RunReport) {
    run_with(
        EngineConfig {
            fusion: Some(policy),
            backend,
            collect_stats: true,
            ..fused_at_once::config()
        },
        script,
    )
}

/// The fusion backends this build has: the reference evaluator, and native code with the
/// `llvm` feature.
fn fusion_backends() -> Vec<FusionBackend> {
    let mut backends = vec![FusionBackend::Reference];
    if cfg!(feature = "llvm") {
        backends.push(FusionBackend::Native);
    }
    backends
}

/// Outputs of one number per line, equal line by line within 1e-9 relative.
fn assert_same_numbers(out: &str, expected: &str, what: &str) {
    let numbers = |s: &str| -> Vec<f64> { s.lines().map(|l| l.parse().unwrap()).collect() };
    for (a, b) in numbers(out).iter().zip(numbers(expected)) {
        assert!((a - b).abs() <= 1e-9 * b.abs(), "{what}: {a} vs {b}");
    }
}

/// Runs `script` fused (the default) and unfused; each prints one number, equal within 1e-9.
fn assert_fused_prints_unfused_number(script: &str, what: &str) {
    let fused = run(script);
    let unfused = run_unfused(script);
    let (f, u): (f64, f64) = (
        fused.trim().parse().unwrap(),
        unfused.trim().parse().unwrap(),
    );
    assert!((f - u).abs() <= 1e-9 * u.abs(), "{what}: {f} vs {u}");
}

#[test]
fn in_place_updates_never_leak_into_aliases() {
    let out = run("X = matrix(1, rows=3, cols=3)\n\
                   Y = X\n\
                   for (i in 1:3) { Y[i, i] = 5 }\n\
                   Z = Y\n\
                   Z = Z * 2\n\
                   print(sum(X) + \" \" + sum(Y) + \" \" + sum(Z))\n");
    assert_eq!(out, "9.0 21.0 42.0\n");
}

#[test]
fn functions_get_copies_of_their_matrix_arguments() {
    let out = run(
        "f = function(matrix[double] A) return (matrix[double] B) {\n\
                     A[1, 1] = 100\n\
                     B = A\n\
                   }\n\
                   X = matrix(1, rows=2, cols=2)\n\
                   Y = f(X)\n\
                   print(sum(X) + \" \" + sum(Y))\n",
    );
    assert_eq!(out, "4.0 103.0\n");
}

#[test]
fn plans_are_recompiled_when_a_size_depends_on_a_changing_scalar() {
    // `matrix(1, rows=i, ...)` has a size depending on the loop variable: the cached plan must
    // not be reused across iterations.
    let out = run("s = 0\nfor (i in 1:4) { s = s + sum(matrix(1, rows=i, cols=1)) }\nprint(s)\n");
    assert_eq!(out, "10.0\n");
}

/// The invariant "scalar values steer sizes, never code": a block whose sizes depend on the
/// values of scalars (`X[beg:end, ]`) is compiled once and reused for every value implying the
/// same sizes, and compiled again where they imply others (the last, shorter batch).
#[test]
fn plans_sized_by_scalar_values_serve_other_values_of_the_same_sizes() {
    let (out, report) = run_with(
        EngineConfig {
            collect_stats: true,
            ..fused_at_once::config()
        },
        "X = matrix(seq(1, 1010), rows=1010, cols=1)
b = 10
acc = 0.0
\
         for (k in 1:ceil(nrow(X) / b)) {\n  beg = (k - 1) * b + 1\n  end = min(k * b, nrow(X))\n  \
         B = X[beg:end, ] * 2\n  acc = acc + sum(B)\n}\nprint(acc)\n",
    );
    assert_eq!(out, "1021110.0\n");
    assert!(report.stats.block_cache_hits >= 100, "{:?}", report.stats);
    assert!(report.stats.blocks_compiled <= 8, "{:?}", report.stats);
}

/// A read whose path is in a variable is sized by the file the path names when the block is
/// compiled; the plan is reused for another path only if that file states the same size.
#[test]
fn plans_sized_by_a_path_in_a_variable_follow_the_file_it_names() {
    let dir = std::env::temp_dir().join(format!("lafuse-path-var-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (a, b) = (dir.join("a.csv"), dir.join("b.csv"));
    std::fs::write(&a, "1,2\n3,4\n").unwrap();
    std::fs::write(&b, "1,2\n3,4\n5,6\n").unwrap();
    for (f, rows) in [(&a, 2), (&b, 3)] {
        std::fs::write(
            f.with_extension("csv.mtd"),
            format!(
                "{{\"data_type\": \"matrix\", \"format\": \"csv\", \"rows\": {rows}, \"cols\": 2}}"
            ),
        )
        .unwrap();
    }
    let script = format!(
        "for (i in 1:3) {{\n  f = ifelse(i == 2, \"{}\", \"{}\")\n  X = read(f) * 2\n  \
         print(nrow(X) + \" \" + sum(X))\n}}\n",
        b.display(),
        a.display()
    );
    let out = run(&script);
    std::fs::remove_dir_all(&dir).ok();
    assert_eq!(out, "2 20.0\n3 42.0\n2 20.0\n");
}

#[test]
fn loops_reuse_compiled_blocks() {
    let (out, report) = run_with(
        EngineConfig {
            collect_stats: true,
            ..fused_at_once::config()
        },
        "s = 0\nfor (i in 1:100) { s = s + i }\nprint(s)\n",
    );
    assert_eq!(out, "5050\n");
    assert!(report.stats.block_cache_hits >= 99, "{:?}", report.stats);
    assert!(report.stats.blocks_compiled <= 5, "{:?}", report.stats);
    let json = serde_json::to_value(&report.stats).unwrap();
    for key in [
        "total_ms",
        "compile_ms",
        "execution_ms",
        "fused_operators_executed",
        "heavy_hitters",
    ] {
        assert!(json.get(key).is_some(), "missing {key} in {json}");
    }
}

#[test]
fn explain_is_deterministic_and_does_not_print_script_output() {
    let script = "X = rand(rows=10, cols=5, seed=3)\nif (sum(X) > 1) { print(\"big\") }\ny = colSums(X %*% t(X))\nprint(sum(y))\n";
    let source = SourceFile::new("e.dml", script);
    let explain = |format| {
        Engine::new(fused_at_once::config())
            .explain(
                &source,
                &ScriptArgs::default(),
                &ExplainOptions {
                    format,
                    ..ExplainOptions::default()
                },
            )
            .unwrap_or_else(|e| panic!("{}", e.render(&source)))
    };
    let text = explain(ExplainFormat::Text);
    assert_eq!(text, explain(ExplainFormat::Text));
    assert!(
        !text.lines().any(|l| l.trim() == "big"),
        "the script's output leaked: {text}"
    );
    assert!(
        text.contains("ba(+*)") && text.contains("if condition"),
        "{text}"
    );
    let json: serde_json::Value = serde_json::from_str(&explain(ExplainFormat::Json)).unwrap();
    assert_eq!(json["blocks"].as_array().map(Vec::len), Some(4), "{json}");
    assert!(explain(ExplainFormat::Dot).starts_with("digraph"));
}

#[test]
fn runtime_errors_point_at_the_script_line() {
    let source = SourceFile::new(
        "err.dml",
        "x = 1\nA = matrix(1, rows=2, cols=2)\nB = A[3, 1]\nprint(B)\n",
    );
    let err = Engine::new(fused_at_once::config())
        .run(&source, &ScriptArgs::default(), &mut Vec::new())
        .unwrap_err();
    let rendered = err.render(&source);
    assert!(rendered.contains("err.dml:3:"), "{rendered}");
    assert!(rendered.contains("out of bounds"), "{rendered}");
}

#[test]
fn cost_reports_every_policy_and_gen_is_never_worse() {
    let script = "X = rand(rows=2000, cols=100, seed=1)\nY = rand(rows=2000, cols=100, seed=2)\n\
                  v = rand(rows=100, cols=1, seed=3)\n\
                  print(sum(X * Y) + sum(X * log(Y + 1)) + sum(t(X) %*% (X %*% v)))\n";
    let source = SourceFile::new("c.dml", script);
    let policies = [
        FusionPolicy::Gen,
        FusionPolicy::FuseAll,
        FusionPolicy::FuseNoRedundancy,
    ];
    let json = Engine::new(fused_at_once::config())
        .cost(
            &source,
            &ScriptArgs::default(),
            &policies,
            ExplainFormat::Json,
        )
        .unwrap_or_else(|e| panic!("{}", e.render(&source)));
    let report: serde_json::Value = serde_json::from_str(&json).unwrap();
    let block = &report["blocks"][0];
    let costs: Vec<f64> = block["policies"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["modelled_cost_s"].as_f64().unwrap())
        .collect();
    assert_eq!(costs.len(), 3, "{report}");
    assert!(
        costs[0] <= costs[1] * (1.0 + 1e-12) && costs[0] <= costs[2] * (1.0 + 1e-12),
        "{report}"
    );
    assert!(
        block["gen_search"]["plans_evaluated"].as_u64().unwrap() >= 1,
        "{report}"
    );
}

/// The explain JSON of a script's blocks under `options` (the operators: `--level cplan`).
fn plan_json(script: &str, options: ExplainOptions) -> serde_json::Value {
    let source = SourceFile::new("p.dml", script);
    let text = Engine::new(fused_at_once::config())
        .explain(&source, &ScriptArgs::default(), &options)
        .unwrap_or_else(|e| panic!("{}", e.render(&source)));
    serde_json::from_str(&text).unwrap()
}

/// (template, variant) of every fused operator of every block.
fn operators(json: &serde_json::Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for block in json["blocks"].as_array().unwrap() {
        for op in block["fusion"]["operators"].as_array().unwrap() {
            out.push((
                op["template"].as_str().unwrap().to_string(),
                op["variant"].as_str().unwrap().to_string(),
            ));
        }
    }
    out
}

const TYPICAL: &str = "X = rand(rows=2000, cols=100, seed=1)
Y = rand(rows=2000, cols=100, seed=2)
Z = rand(rows=2000, cols=100, seed=3)
v = rand(rows=100, cols=1, seed=4)
w = rand(rows=2000, cols=1, seed=5)
print(sum(X * Y * Z))
print(sum(t(X) %*% (w * (X %*% v))))
";

#[test]
fn static_explain_matches_the_run_for_known_sizes_and_prints_nothing() {
    let json = |static_only| {
        plan_json(
            TYPICAL,
            ExplainOptions {
                level: ExplainLevel::Cplan,
                format: ExplainFormat::Json,
                static_only,
                ..ExplainOptions::default()
            },
        )
    };
    let (ran, compiled) = (json(false), json(true));
    assert_eq!(operators(&ran), operators(&compiled));
    assert!(operators(&ran).contains(&("cell".to_string(), "full_agg".to_string())));
}

/// `explain --static` of `script` (the HOP DAGs), or a panic with the rendered error.
fn static_explain(script: &str) -> String {
    let source = SourceFile::new("s.dml", script);
    Engine::new(fused_at_once::config())
        .explain(
            &source,
            &ScriptArgs::default(),
            &ExplainOptions {
                static_only: true,
                ..ExplainOptions::default()
            },
        )
        .unwrap_or_else(|e| panic!("{}", e.render(&source)))
}

#[test]
fn static_explain_compiles_loops_and_functions_without_running_them() {
    let script = "f = function(matrix[double] A) return (matrix[double] B) { B = A * 2 }
X = rand(rows=50, cols=10, seed=1)
for (i in 1:3) { X = f(X) }
while (sum(X) > 1e9) { X = X / 2 }
print(sum(X))
";
    let text = static_explain(script);
    // Each block once: the loop body is compiled once, not per iteration.
    assert_eq!(text.matches("while condition").count(), 1, "{text}");
    assert_eq!(text.matches("for-loop start").count(), 1, "{text}");
    assert!(
        text.contains("TRead A [50,10,500]"),
        "sizes propagate into the function: {text}"
    );
}

/// A scalar whose type differs between loop iterations (an integer literal before the loop, a
/// double after its first step, as L2SVM's line-search step) stays defined after the loop and
/// in the loops nested in it; the static view made it undefined and failed on L2SVM.
#[test]
fn static_explain_keeps_scalars_whose_type_changes_in_a_loop() {
    let script = "X = rand(rows=20, cols=5, seed=1)
go = TRUE
i = 0
while (go & i < 5) {
  step = 0
  flag = FALSE
  k = 0
  while (k < 2) {
    Y = X * step
    step = step - sum(Y) / 7
    flag = k
    k = k + 1
  }
  X = X + step * flag
  i = i + 1
  go = step < 100
}
print(sum(X) + step)
";
    let text = static_explain(script);
    assert!(text.contains("TRead step [0,0,-1] SD"), "{text}");
    assert!(text.contains("TRead flag [0,0,-1] SD"), "{text}");
}

/// A Cell plan may transpose a column vector (a relabelling of its cells), so its body can run
/// in the transposed frame of its main input: `t(exp(x) * 2) + r` over an m×1 `x` is 1×m, its
/// side inputs read transposed, its row and column aggregates swapped. The reference evaluator
/// computed such bodies over the main input's shape and failed reading outside it (found by
/// the structured random scripts, `fuse-all` on the reference backend); native code refused
/// them and ran their hops unfused. Both run them now.
#[test]
fn cell_plans_over_a_transposed_vector_agree_on_both_backends() {
    let script = "x = rand(rows=700, cols=1, min=-2, max=2, seed=1)\n\
                  r = rand(rows=1, cols=700, min=-1, max=1, seed=4)\n\
                  c = rand(rows=700, cols=1, min=-1, max=1, seed=5)\n\
                  Z = t(exp(x) * 2) + r\n\
                  print(sum(Z * Z))\n\
                  print(sum(t(exp(x) * 2) * r))\n\
                  W = t(abs(x) + 1) / (r + 3)\n\
                  print(sum(W ^ 2))\n\
                  print(as.scalar(W[1, 3]))\n\
                  print(sum(rowSums(t(x * c) + r)))\n\
                  print(sum(abs(colSums(t(x * c) * r))))\n\
                  print(sum(rowMaxs(t(x + 1) * r)))\n\
                  A = t(x * 3) * r\n\
                  print(sum(A) + nrow(A) + 1000 * ncol(A))\n";
    let unfused = run_unfused(script);
    for backend in fusion_backends() {
        for policy in [
            FusionPolicy::Gen,
            FusionPolicy::FuseAll,
            FusionPolicy::FuseNoRedundancy,
        ] {
            let (out, report) = run_policy_on(policy, backend, script);
            assert_same_numbers(&out, &unfused, &format!("{policy:?} {backend:?}"));
            assert!(
                report.stats.fused_operators_executed >= 5,
                "{policy:?} {backend:?}: {:?}",
                report.stats
            );
            assert!(
                report.stats.unfused_fallbacks.is_empty(),
                "{policy:?} {backend:?}: {:?}",
                report.stats.unfused_fallbacks
            );
        }
    }
}

/// `t(X) %*% M` is lowered to a product reading `X` transposed in place only where the
/// transpose runs unfused. Here fuse-all computes `X = exp(S)` only inside fused operators,
/// one of which outputs `t(X)`: the in-place product read `X`'s register, which nothing wrote
/// ("reads empty register", found by the structured random scripts).
#[test]
fn a_product_reads_a_fused_transpose_when_its_input_is_never_materialized() {
    let script = "S = rand(rows=7, cols=1, min=-1, max=3, sparsity=0.5, seed=2)\n\
                  c = rand(rows=7, cols=1, min=0.5, max=1.5, seed=3)\n\
                  V2 = rand(rows=1, cols=2, min=-1, max=1, seed=6)\n\
                  X = exp(S)\n\
                  print(sum(X) + nrow(X))\n\
                  Q = t(X) %*% (((abs(X) / (abs(((X * S) * rowSums(X))) + 1)) %*% V2) * c)\n\
                  print(sum(Q))\n\
                  X = exp((X * S))\n\
                  print(sum(X) + nrow(X))\n";
    let unfused = run_unfused(script);
    for policy in [
        FusionPolicy::Gen,
        FusionPolicy::FuseAll,
        FusionPolicy::FuseNoRedundancy,
    ] {
        let (out, _) = run_policy(policy, script);
        assert_same_numbers(&out, &unfused, &format!("{policy:?}"));
    }
}

/// A runtime internal error says "internal error" once, not once per layer.
#[test]
fn internal_runtime_errors_say_so_once() {
    let source = SourceFile::new("i.dml", "x = 1\n");
    let err = lafuse::Error::Runtime {
        error: lafuse_runtime::RuntimeError::Internal(
            lafuse_runtime::error::Internal::ExplicitZero { shape: (2, 3) },
        ),
        span: None,
    };
    let rendered = err.render(&source);
    assert_eq!(rendered.matches("internal error").count(), 1, "{rendered}");
    assert!(
        rendered.contains("sparse 2x3 matrix stores an explicit zero"),
        "{rendered}"
    );
}

/// With an operator cache directory, a second engine (a later process, in practice) loads
/// every native operator the first one compiled, and prints the same.
#[cfg(feature = "llvm")]
#[test]
fn an_operator_cache_directory_serves_later_engines() {
    let dir = std::env::temp_dir().join(format!("lafuse-engine-store-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let run_limited = |limit| {
        run_with(
            EngineConfig {
                collect_stats: true,
                operator_cache_dir: Some(dir.clone()),
                operator_cache_limit: limit,
                ..fused_at_once::config()
            },
            TYPICAL,
        )
    };
    let run = || run_limited(lafuse::DEFAULT_OPERATOR_CACHE_LIMIT);
    let (first, cold) = run();
    let (second, warm) = run();
    assert_eq!(first, second);
    assert_eq!(first, run_with(fused_at_once::config(), TYPICAL).0);
    assert!(cold.stats.operators_compiled >= 2, "{:?}", cold.stats);
    assert_eq!(cold.stats.operators_loaded, 0);
    assert_eq!(
        warm.stats.operators_loaded, warm.stats.operators_compiled,
        "{:?}",
        warm.stats
    );
    assert!(warm
        .stats
        .to_text()
        .contains("loaded from the cache directory"));
    // A limit below the directory's size prunes it on opening: this engine compiles again
    // (and keeps what it compiled), and the next one loads.
    let (third, pruned) = run_limited(0);
    assert_eq!(third, first);
    assert_eq!(pruned.stats.operators_loaded, 0, "{:?}", pruned.stats);
    let (_, reloaded) = run();
    assert_eq!(
        reloaded.stats.operators_loaded,
        reloaded.stats.operators_compiled
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Statements that differ only in a literal share one compiled operator (issue 22: 2,000
/// such statements compiled 2,000 operators), and print what unfused execution prints.
#[cfg(feature = "llvm")]
#[test]
fn statements_differing_only_in_constants_share_compiled_operators() {
    let mut script = String::from("X = rand(rows=40, cols=30, seed=7)\ns = 0\n");
    for i in 3..63 {
        script.push_str(&format!("Y{i} = X * {i}.5 + 1\ns = s + sum(Y{i} * Y{i})\n"));
    }
    script.push_str("print(s)\n");
    let (fused, report) = run_policy(FusionPolicy::Gen, &script);
    let unfused = run_with(
        EngineConfig {
            fusion: None,
            ..fused_at_once::config()
        },
        &script,
    )
    .0;
    assert_eq!(fused, unfused);
    let stats = &report.stats;
    // The Y_i are dead after the block, so multi-aggregates take several sums each.
    assert!(stats.fused_operators_executed >= 20, "{stats:?}");
    assert!(stats.operators_compiled <= 4, "{stats:?}");
}

#[test]
fn fused_execution_matches_unfused_and_reports_operators() {
    let run = |fusion, backend| {
        run_with(
            EngineConfig {
                fusion,
                backend,
                collect_stats: true,
                ..fused_at_once::config()
            },
            TYPICAL,
        )
    };
    let (unfused, none) = run(None, FusionBackend::Reference);
    assert_eq!(none.stats.fused_operators_executed, 0);
    for backend in fusion_backends() {
        for policy in [
            FusionPolicy::Gen,
            FusionPolicy::FuseAll,
            FusionPolicy::FuseNoRedundancy,
        ] {
            let (out, report) = run(Some(policy), backend);
            assert_same_numbers(&out, &unfused, &format!("{policy:?} {backend:?}"));
            assert!(
                report.stats.fused_operators_executed >= 2,
                "{policy:?} {backend:?}: {:?}",
                report.stats
            );
            let json = serde_json::to_value(&report.stats).unwrap();
            for key in [
                "fused_operators_executed",
                "operators_compiled",
                "operator_cache_hits",
                "codegen_ms",
                "execution_ms",
            ] {
                assert!(json.get(key).is_some(), "--stats-json lacks {key}");
            }
        }
    }
}

#[test]
fn typical_expressions_get_the_expected_templates() {
    let ops = operators(&plan_json(
        TYPICAL,
        ExplainOptions {
            level: ExplainLevel::Cplan,
            format: ExplainFormat::Json,
            ..ExplainOptions::default()
        },
    ));
    assert!(ops.contains(&("cell".into(), "full_agg".into())), "{ops:?}");
    assert!(ops.contains(&("row".into(), "col_agg_t".into())), "{ops:?}");
    let magg = "X = rand(rows=1000, cols=100, seed=1)
Y = rand(rows=1000, cols=100, seed=2)
Z = rand(rows=1000, cols=100, seed=3)
a = sum(X * Y)
b = sum(X * Z)
print(a + b)
";
    let ops = operators(&plan_json(
        magg,
        ExplainOptions {
            level: ExplainLevel::Cplan,
            format: ExplainFormat::Json,
            ..ExplainOptions::default()
        },
    ));
    assert_eq!(ops, vec![("magg".to_string(), "full_agg".to_string())]);
    let outer = "X = rand(rows=2000, cols=2000, sparsity=0.001, seed=1)
U = rand(rows=2000, cols=10, seed=2)
V = rand(rows=2000, cols=10, seed=3)
print(sum(X * log(U %*% t(V) + 1e-15)))
";
    let ops = operators(&plan_json(
        outer,
        ExplainOptions {
            level: ExplainLevel::Cplan,
            format: ExplainFormat::Json,
            ..ExplainOptions::default()
        },
    ));
    assert_eq!(ops, vec![("outer".to_string(), "full_agg".to_string())]);
}

/// A sparse-safe fused operator over a sparse X skips X's zeros only while its side inputs are
/// finite. The executor remembers finiteness per matrix value; updating a value in place (here
/// `Y[7, 9] = ...` at a zero of X, in a loop) must never leave a stale answer behind.
#[test]
fn remembered_finiteness_follows_in_place_updates() {
    let script = "X = rand(rows=300, cols=200, sparsity=0.05, seed=1)
Y = rand(rows=300, cols=200, seed=2)
Z = rand(rows=300, cols=200, seed=3)
s1 = sum(X * Y * Z)
Y[7, 9] = 1/0
s2 = 0
for (i in 1:2) { s2 = s2 + sum(X * Y * Z) }
Y[7, 9] = 0.5
s3 = sum(X * Y * Z)
print(s1 + \" \" + s2 + \" \" + s3)
";
    let unfused = run_unfused(script);
    let tokens: Vec<String> = unfused.split_whitespace().map(str::to_string).collect();
    assert_eq!(tokens[1], "NaN", "{unfused}");
    for policy in [FusionPolicy::Gen, FusionPolicy::FuseAll] {
        let (fused, report) = run_policy(policy, script);
        assert!(
            report.stats.fused_operators_executed >= 4,
            "{:?}",
            report.stats
        );
        let f: Vec<&str> = fused.split_whitespace().collect();
        assert_eq!(f[1], "NaN", "{policy:?}: {fused}");
        for k in [0, 2] {
            let (a, b): (f64, f64) = (tokens[k].parse().unwrap(), f[k].parse().unwrap());
            assert!(
                (a - b).abs() <= 1e-9 * a.abs(),
                "{policy:?}: {unfused} vs {fused}"
            );
        }
    }
}

/// `explain --level ir` shows each operator's dense and CSR entry points (the CSR one is
/// compiled for the explanation; executions compile it on first sparse use), and the
/// MultiAgg of two sums over a sparse X is sparse-safe, so it has a CSR entry point too.
#[cfg(feature = "llvm")]
#[test]
fn explain_ir_shows_both_entry_points_of_sparse_safe_operators() {
    let script = "X = rand(rows=500, cols=100, sparsity=0.02, seed=1)
Y = rand(rows=500, cols=100, seed=2)
Z = rand(rows=500, cols=100, seed=3)
a = sum(X * Y)
b = sum(X * Z)
print(a + b)
";
    let source = SourceFile::new("p.dml", script);
    let text = Engine::new(fused_at_once::config())
        .explain(
            &source,
            &ScriptArgs::default(),
            &ExplainOptions {
                level: ExplainLevel::Ir,
                ..ExplainOptions::default()
            },
        )
        .unwrap_or_else(|e| panic!("{}", e.render(&source)));
    assert!(text.contains("magg full_agg"), "{text}");
    assert!(text.contains("define i64 @lafuse_cell_dense"), "{text}");
    assert!(text.contains("CSR entry point"), "{text}");
    assert!(text.contains("define i64 @lafuse_cell_csr"), "{text}");
    // Fused and unfused agree on the sparse input.
    assert_fused_prints_unfused_number(script, "magg");
}

/// Unfused, `t(X) %*% y` and `t(X) %*% W` read X in place (no transpose instruction runs), and
/// print what the materialised transpose gives.
#[test]
fn unfused_transposed_products_do_not_materialise_the_transpose() {
    let script = "X = rand(rows=300, cols=40, seed=1)
S = rand(rows=300, cols=40, sparsity=0.05, seed=4)
y = rand(rows=300, cols=1, seed=2)
W = rand(rows=300, cols=3, seed=3)
print(sum(t(X) %*% y) + sum(t(X) %*% W) + sum(t(S) %*% y) + sum(t(X) %*% X))
T = t(X)
print(sum(T %*% y) + sum(T %*% W) + sum(t(S) %*% y) + sum(T %*% X))
";
    let (out, report) = run_unfused_with_stats(script);
    let lines: Vec<f64> = out.lines().map(|l| l.trim().parse().unwrap()).collect();
    assert!(
        (lines[0] - lines[1]).abs() <= 1e-12 * lines[1].abs(),
        "{out}"
    );
    let count = |op: &str| executed(&report, op);
    // Three products in the first print read X or S in place; `T = t(X)` is the one transpose
    // (plus tsmm for t(X) %*% X).
    assert_eq!(count("ba+*t"), 3, "{:?}", report.stats.heavy_hitters);
    assert_eq!(count("tsmm"), 1, "{:?}", report.stats.heavy_hitters);
}

/// Unfused, `A %*% t(B)` reads B in place (no transpose instruction runs) and prints what the
/// materialised transpose gives; `t(Q) %*% t(Q)` reads Q in place on the left and keeps the
/// right transpose (which a product reading its left operand in place once skipped).
#[test]
fn unfused_products_with_a_transposed_right_operand_read_it_in_place() {
    let script = "A = rand(rows=300, cols=40, seed=1)
B = rand(rows=200, cols=40, seed=2)
v = rand(rows=1, cols=40, seed=3)
print(sum(A %*% t(B)) + sum(A %*% t(v)))
T = t(B)
print(sum(A %*% T) + sum(A %*% t(v)))
Q = A[1:40, ]
print(sum(t(Q) %*% t(Q)))
print(sum(t(Q) %*% Q))
";
    let (out, report) = run_unfused_with_stats(script);
    let lines: Vec<f64> = out.lines().map(|l| l.trim().parse().unwrap()).collect();
    assert_eq!(lines[0].to_bits(), lines[1].to_bits(), "{out}");
    // t(Q) %*% t(Q) = t(Q %*% Q), whose sum differs from t(Q) %*% Q's in general.
    assert!(lines[2].is_finite() && lines[3].is_finite(), "{out}");
    let count = |op: &str| executed(&report, op);
    // The first print's two products read B and v in place (the second print's are the same
    // hops: `T = t(B)`, dead after its block, is not made); the right `t(Q)` is the one
    // transpose.
    assert_eq!(count("ba+*nt"), 2, "{:?}", report.stats.heavy_hitters);
    assert_eq!(count("r'"), 1, "{:?}", report.stats.heavy_hitters);
}

/// `t(W %*% t(X) + b)` is computed as `t(W %*% t(X)) + t(b)` (the `TransposePushdown`
/// rewrite), the product with a transposed output (`t(ba+*nt)`, `t(ba+*)`): the same bits as
/// the product, the sum and the transpose one after the other, for dgemm's shapes and the
/// others (two rows, a sparse operand), a column and a row vector, unfused and fused.
#[test]
fn transposes_pushed_onto_products_keep_every_bit() {
    let script = "W = rand(rows=60, cols=30, min=-1, max=1, seed=1)
X = rand(rows=50, cols=30, min=-1, max=1, seed=2)
S = rand(rows=50, cols=30, min=-1, max=1, sparsity=0.1, seed=3)
W2 = rand(rows=2, cols=30, min=-1, max=1, seed=4)
b = rand(rows=60, cols=1, seed=5)
b2 = rand(rows=2, cols=1, seed=6)
r = rand(rows=1, cols=50, seed=7)
V = rand(rows=30, cols=60, min=-1, max=1, seed=8)
H1 = tanh(t(W %*% t(X) + b))
H2 = t(W %*% t(S) - b)
H3 = t(W2 %*% t(X) * b2)
H4 = t(W %*% t(X) + r)
H5 = t(X %*% V / 3)
if (nrow(X) > 0) {
  # The same expressions with a second use of each element-wise result: not pushed down.
  Q1 = W %*% t(X) + b
  Q2 = W %*% t(S) - b
  Q3 = W2 %*% t(X) * b2
  Q4 = W %*% t(X) + r
  Q5 = X %*% V / 3
  print(sum(Q1) + sum(Q2) + sum(Q3) + sum(Q4) + sum(Q5))
  R1 = tanh(t(Q1))
  R2 = t(Q2)
  R3 = t(Q3)
  R4 = t(Q4)
  R5 = t(Q5)
}
print(sum(H1 != R1) + sum(H2 != R2) + sum(H3 != R3) + sum(H4 != R4) + sum(H5 != R5))
print(sum(H1) + sum(H2) + sum(H3) + sum(H4) + sum(H5))
";
    let (unfused, report) = run_unfused_with_stats(script);
    let differing = |out: &str| out.lines().nth(1).map(|l| l.trim().parse::<f64>().unwrap());
    assert_eq!(differing(&unfused), Some(0.0), "{unfused}");
    let count = |op: &str| executed(&report, op);
    // H1 and H4 share `t(W %*% t(X))` (common subexpressions after the pushdown).
    assert_eq!(
        count("t(ba+*nt)") + count("t(ba+*)"),
        4,
        "{:?}",
        report.stats.heavy_hitters
    );
    for policy in [FusionPolicy::Gen, FusionPolicy::FuseAll] {
        let (fused, _) = run_policy(policy, script);
        assert_eq!(differing(&fused), Some(0.0), "{policy:?}: {fused}");
    }
}

/// An Outer operator skips the zeros of its sparse driver, which is exact only for finite side
/// inputs: with a NaN in V (in a row whose column of X is empty, so only zeros of X meet it)
/// the call visits every cell natively and gives the unfused NaN. A plan whose `X != 0` mask
/// was simplified away skips the zeros over finite factors (its body is the dot product, not
/// 0, at a zero of X).
#[test]
fn outer_operators_over_non_finite_side_inputs_match_unfused_execution() {
    let script = "X = rand(rows=400, cols=300, sparsity=0.01, seed=1)
X[, 6] = matrix(0, rows=400, cols=1)
U = rand(rows=400, cols=4, seed=2)
V = rand(rows=300, cols=4, seed=3)
print(sum(X * log(U %*% t(V) + 1e-15)))
print(sum((X != 0) * (U %*% t(V))))
V[6, 2] = 0/0
print(sum(X * log(U %*% t(V) + 1e-15)))
print(sum((X != 0) * (U %*% t(V))))
";
    let (fused, report) = run_with(
        EngineConfig {
            collect_stats: true,
            ..fused_at_once::config()
        },
        script,
    );
    let unfused = run_unfused(script);
    let (f, u): (Vec<&str>, Vec<&str>) = (fused.lines().collect(), unfused.lines().collect());
    for k in 0..2 {
        let (fk, uk): (f64, f64) = (f[k].trim().parse().unwrap(), u[k].trim().parse().unwrap());
        assert!((fk - uk).abs() <= 1e-9 * uk.abs(), "{fused} vs {unfused}");
    }
    for k in 2..4 {
        assert_eq!(f[k].trim(), "NaN", "{fused}");
        assert_eq!(u[k].trim(), "NaN", "{unfused}");
    }
    assert!(report.stats.fused_operators_executed >= 4);
    #[cfg(feature = "llvm")]
    assert!(
        report.stats.unfused_fallbacks.is_empty(),
        "{:?}",
        report.stats.unfused_fallbacks
    );
}

/// An output larger than the machine's memory (an 8 TB outer product, and below every other
/// kind of output a script sizes) is a resource error that names the script line, fused and
/// unfused, not an allocation abort: unfused, the product `U %*% t(V)`; fused, an Outer
/// operator visiting every cell (U has negative values, so the log may be NaN at zeros of X)
/// into a dense cell-wise output.
#[test]
fn outputs_larger_than_memory_are_resource_errors() {
    let script = "X = rand(rows=1000000, cols=1000000, sparsity=0.0000001, seed=1)
U = rand(rows=1000000, cols=2, min=-1, max=1, seed=2)
V = rand(rows=1000000, cols=2, seed=3)
R = X * log(U %*% t(V) + 1e-15)
print(as.scalar(R[1, 1]))
";
    // Where the kernel overcommits without limit (`vm.overcommit_memory = 1`), an 8 TB
    // request succeeds and fails only when touched: nothing to check there.
    let overcommit = std::fs::read_to_string("/proc/sys/vm/overcommit_memory");
    if overcommit.is_ok_and(|m| m.trim() == "1") {
        return;
    }
    let source = SourceFile::new("huge.dml", script);
    // (The reference backend, without the `llvm` feature, interprets every cell.)
    let policies = if cfg!(feature = "llvm") {
        vec![None, Some(FusionPolicy::Gen)]
    } else {
        vec![None]
    };
    for fusion in policies {
        let mut out = Vec::new();
        let e = Engine::new(EngineConfig {
            fusion,
            ..fused_at_once::config()
        })
        .run(&source, &ScriptArgs::default(), &mut out)
        .expect_err("an 8 TB output cannot be allocated");
        let text = e.render(&source);
        assert_eq!(
            e.fault(),
            lafuse_compiler::error::Fault::Resource,
            "{fusion:?}: {text}"
        );
        assert!(text.contains("cannot allocate"), "{fusion:?}: {text}");
        assert!(text.contains("huge.dml:4"), "{fusion:?}: {text}");
    }
    // Every other kind of output a script sizes, each failing at its line: a filled matrix, a
    // sparse input made dense by a scalar, a unary operator or a comparison, `cumsum`, `seq`,
    // a reshape into one huge row (whose fused operator densifies a row block of it), `cbind`,
    // `ifelse` and `conv2d`, unfused and fused on both backends. Each output is read in a
    // later block, so it is live after its own and made there (read only within its block,
    // a fused operator would aggregate it without making it).
    let s = "S = rand(rows=1000000, cols=1000000, sparsity=0.000001, seed=1)\n";
    let cases = [
        (
            "x = 1\nX = matrix(1, rows=100000, cols=1000000)\nfor (i in 1:1) { print(sum(X)) }\n",
            2,
        ),
        (&format!("{s}Z = S + 1\nfor (i in 1:1) {{ print(sum(Z)) }}\n"), 2),
        (&format!("{s}Z = exp(S)\nfor (i in 1:1) {{ print(sum(Z)) }}\n"), 2),
        (&format!("{s}Z = (S == 0)\nfor (i in 1:1) {{ print(sum(Z)) }}\n"), 2),
        (&format!("{s}Z = cumsum(S)\nfor (i in 1:1) {{ print(sum(Z)) }}\n"), 2),
        ("x = 1\nz = seq(1, 1e12)\nfor (i in 1:1) { print(sum(z)) }\n", 2),
        (
            &format!("{s}Z = matrix(S, rows=1, cols=1000000000000)\nfor (i in 1:1) {{ print(sum(Z + 1)) }}\n"),
            3,
        ),
        (
            &format!(
                "{s}c = rand(rows=1000000, cols=1, seed=2)\nZ = cbind(c, S) + 1\nfor (i in 1:1) {{ print(sum(Z)) }}\n"
            ),
            3,
        ),
        (&format!("{s}Z = ifelse(S > 0, 1, 2)\nfor (i in 1:1) {{ print(sum(Z)) }}\n"), 2),
        (
            &format!(
                "{s}F = matrix(1, rows=1000, cols=1)\nZ = conv2d(S, F, \
                 input_shape=[1000000, 1, 1000, 1000], filter_shape=[1000, 1, 1, 1], \
                 stride=[1, 1], padding=[0, 0])\nfor (i in 1:1) {{ print(sum(Z)) }}\n"
            ),
            3,
        ),
    ];
    let configs = [
        ("unfused", None, FusionBackend::Native),
        ("gen", Some(FusionPolicy::Gen), FusionBackend::Native),
        (
            "gen reference",
            Some(FusionPolicy::Gen),
            FusionBackend::Reference,
        ),
    ];
    for (script, line) in cases {
        for (what, fusion, backend) in configs {
            let source = SourceFile::new("big.dml", script);
            let config = EngineConfig {
                fusion,
                backend,
                ..fused_at_once::config()
            };
            let err = Engine::new(config)
                .run(&source, &ScriptArgs::default(), &mut Vec::new())
                .expect_err(script);
            let rendered = err.render(&source);
            assert!(
                rendered.contains(&format!("big.dml:{line}:"))
                    && rendered.contains("cannot allocate"),
                "{what}: {script}\n{rendered}"
            );
        }
    }
}

/// A fused sum over every cell of a huge sparse driver (the log may be NaN at its zeros) ends
/// at the first NaN, which no later cell can change: NaN in about a second, where visiting
/// all 10^12 cells would take hours (unfused, the 8 TB product is a resource error).
#[cfg(feature = "llvm")]
#[test]
fn a_sum_over_every_cell_ends_at_the_first_nan() {
    let script = "X = rand(rows=1000000, cols=1000000, sparsity=0.0000001, seed=1)
U = rand(rows=1000000, cols=2, min=-1, max=1, seed=2)
V = rand(rows=1000000, cols=2, seed=3)
print(sum(X * log(U %*% t(V) + 1e-15)))
";
    let (out, report) = run_policy(FusionPolicy::Gen, script);
    assert_eq!(out.trim(), "NaN");
    assert_eq!(report.stats.fused_operators_executed, 1);
}

/// Plans the cost-based search picks are built: a Row operator over column-range indexing
/// `P[, 1:K]` (the slice is read as an input) and a fused `t(P) %*% X` over a materialized P
/// (whose P is then the row type's X) used to be dropped in construction, leaving the hops the
/// cost model had costed as fused to run unfused (MLogreg's and KMeans's inner loops).
#[test]
fn selected_row_plans_over_slices_and_fused_transposes_are_built() {
    let mlogreg = "X = rand(rows=3000, cols=60, seed=1)
P = rand(rows=3000, cols=2, seed=2)
V = rand(rows=60, cols=1, seed=3)
K = 1
for (i in 1:2) {
  Q = P[, 1:K] * (X %*% V)
  HV = t(X) %*% (Q - P[, 1:K] * (rowSums(Q) %*% matrix(1, rows=1, cols=K)))
  V = V + 0.001 * HV
}
print(sum(V))
";
    let kmeans = "X = rand(rows=3000, cols=60, seed=1)
C = rand(rows=5, cols=60, seed=2)
for (i in 1:2) {
  D = -2 * (X %*% t(C)) + t(rowSums(C ^ 2))
  P = D <= rowMins(D)
  P = P / rowSums(P)
  C = (t(P) %*% X) / t(colSums(P))
}
print(sum(C))
";
    for (name, script, want) in [
        ("mlogreg", mlogreg, "col_agg_t"),
        ("kmeans", kmeans, "col_agg_b1_t"),
    ] {
        let ops = operators(&plan_json(
            script,
            ExplainOptions {
                level: ExplainLevel::Cplan,
                format: ExplainFormat::Json,
                ..ExplainOptions::default()
            },
        ));
        assert!(
            ops.contains(&("row".to_string(), want.to_string())),
            "{name}: {ops:?}"
        );
        assert_fused_prints_unfused_number(script, name);
    }
}

/// Sparse-safe fused operators skip their main input's zeros only where the body is provably
/// 0 there (`lafuse_codegen::zero_cells`): an overflow inside the operator (`exp(Y)` infinite
/// at a zero of X) or a domain error (the log of a negative dot product) gives NaN fused, as
/// unfused; with tame side inputs the zeros are skipped and the sums agree.
#[test]
fn zeros_are_skipped_only_where_the_body_is_provably_zero() {
    let prelude = "X = rand(rows=60, cols=50, sparsity=0.05, seed=1)\n";
    let cases = [
        (
            "Y = rand(rows=60, cols=50, min=700, max=720, seed=2)\nprint(sum(X * exp(Y)))\n",
            true,
        ),
        (
            "Y = rand(rows=60, cols=50, min=-1, max=1, seed=2)\nprint(sum(X * exp(Y)))\n",
            false,
        ),
        (
            "Y = rand(rows=60, cols=50, min=700, max=720, seed=2)\n\
             Z = rand(rows=60, cols=50, seed=3)\n\
             print(sum(X * exp(Y)) + sum(X * Z))\n",
            true,
        ),
        (
            "U = rand(rows=60, cols=5, min=-1, max=1, seed=2)\n\
             V = rand(rows=50, cols=5, min=-1, max=1, seed=3)\n\
             print(sum(X * log(U %*% t(V) + 1e-15)))\n",
            true,
        ),
        (
            "U = rand(rows=60, cols=5, min=0, max=1, seed=2)\n\
             V = rand(rows=50, cols=5, min=0, max=1, seed=3)\n\
             print(sum(X * log(U %*% t(V) + 1e-15)))\n",
            false,
        ),
    ];
    for (body, nan) in cases {
        let script = format!("{prelude}{body}");
        let unfused = run_unfused(&script);
        let u: f64 = unfused.trim().parse().unwrap();
        assert_eq!(u.is_nan(), nan, "unfused {body}: {u}");
        for policy in [FusionPolicy::Gen, FusionPolicy::FuseAll] {
            let (fused, report) = run_policy(policy, &script);
            let f: f64 = fused.trim().parse().unwrap();
            assert!(
                report.stats.fused_operators_executed >= 1,
                "{policy:?} {body}"
            );
            assert!(
                (f.is_nan() && u.is_nan()) || (f - u).abs() <= 1e-9 * u.abs(),
                "{policy:?} {body}: fused {f}, unfused {u}"
            );
        }
    }
}

/// Prints run in statement order although a fused operator joins values of several
/// statements: the MultiAgg of the first and third sums waits for `U %*% t(V)` of the third
/// statement, and the second print, ready sooner, used to overtake the first.
#[test]
fn side_effects_keep_statement_order_across_fused_operators() {
    let script = "T = rand(rows=300, cols=400, min=0, max=1, sparsity=0.5, seed=9)\n\
        X = rand(rows=300, cols=400, min=-2, max=2, seed=1)\n\
        S = rand(rows=300, cols=400, min=-1, max=3, sparsity=0.05, seed=2)\n\
        U = rand(rows=300, cols=6, min=-1, max=1, seed=5)\n\
        V = rand(rows=400, cols=6, min=-1, max=1, seed=6)\n\
        W = rand(rows=400, cols=2, min=-1, max=1, seed=10)\n\
        print(\"first \" + sum(T %/% X))\n\
        print(\"second \" + sum(t(X) %*% (S %*% W)))\n\
        t1 = time()\n\
        print(\"third \" + sum(floor(T) - floor(sign(U %*% t(V)))))\n\
        print(\"fourth \" + (time() >= t1))\n";
    let labels = |out: &str| -> Vec<String> {
        out.lines()
            .map(|l| l.split_whitespace().next().unwrap_or("").to_string())
            .collect()
    };
    for policy in [
        FusionPolicy::Gen,
        FusionPolicy::FuseAll,
        FusionPolicy::FuseNoRedundancy,
    ] {
        let (out, report) = run_policy(policy, script);
        assert!(report.stats.fused_operators_executed > 0, "{policy:?}");
        assert_eq!(
            labels(&out),
            ["first", "second", "third", "fourth"],
            "{policy:?}:\n{out}"
        );
        assert!(out.ends_with("fourth TRUE\n"), "{policy:?}:\n{out}");
    }
}

/// An Outer root whose `U %*% t(V)` another operator reads as well gets the product
/// materialized: its plan is then built as the Cell plan its body is (it was an Outer plan
/// without an outer product, which the native backend refused and the reference evaluator got
/// wrong, applying the sparse driver `S` to a body that is not zero where `S` is).
#[test]
fn outer_plans_without_their_outer_product_are_cell_plans() {
    check_fused_outer_against_unfused(
        "print(sum(exp(min(X / (abs(S) + 1), X)) * log(U %*% t(V) + 10)))\n\
         print(sum(X * log(U %*% t(V) + 10)))\n",
        true,
    );
}

/// An Outer operator computes `0 * body` at its driver's zeros, so its driver is an input its
/// body is zero at: here the dense numerator, not the sparse `S` (which the construction took
/// for want of a sparse driver, and both backends then summed the body at S's non-zeros only).
#[test]
fn outer_drivers_are_inputs_the_body_is_zero_at() {
    check_fused_outer_against_unfused(
        "print(sum(ifelse(X > 0, X, X) / (abs(min(S + (U %*% t(V)), X)) + 1)))\n",
        true,
    );
}

/// An Outer operator gives `0 * G` at its driver's zeros, which is right only where the driver
/// (or its mask `X != 0`) is a factor of `G`: `(N / R)^2 & s` is zero-preserving in `N` for
/// finite values but 1 where `R` is 0 too, so `N` cannot drive it (fuse-all summed 13684 for
/// 39625). The usual factor, numerator and mask forms still make Outer plans.
#[test]
fn outer_drivers_are_factors_of_the_cell_wise_part() {
    check_fused_outer_against_unfused(
        "R = rand(rows=2000, cols=300, min=-1, max=1, sparsity=0.9, seed=8)\n\
         print(sum(((S / R) ^ 2 & 2.5) * log(U %*% t(V) + 10)))\n",
        false,
    );
    for statement in [
        "print(sum(S * log(U %*% t(V) + 10)))\n",
        "print(sum(t(t(U) %*% (S / (U %*% t(V) + 10)))))\n",
        "print(sum((S != 0) * (U %*% t(V) - S) ^ 2))\n",
    ] {
        let (_, report) = run_policy(
            FusionPolicy::Gen,
            &format!(
                "S = rand(rows=2000, cols=300, min=-1, max=3, sparsity=0.05, seed=2)\n\
                 U = rand(rows=2000, cols=6, min=-1, max=1, seed=5)\n\
                 V = rand(rows=300, cols=6, min=-1, max=1, seed=6)\n{statement}"
            ),
        );
        let outer = report
            .stats
            .heavy_hitters
            .iter()
            .any(|h| h.opcode == "fused_outer");
        assert!(outer, "{statement}: {:?}", report.stats.heavy_hitters);
    }
}

/// Runs `statements` after inputs X (dense), S (sparse), U, V under each policy on each
/// backend: the same numbers as unfused, no fused operator left unfused, and (if `must_fuse`)
/// fused operators executed.
fn check_fused_outer_against_unfused(statements: &str, must_fuse: bool) {
    let script = format!(
        "X = rand(rows=2000, cols=300, min=-2, max=2, seed=1)\n\
         S = rand(rows=2000, cols=300, min=-1, max=3, sparsity=0.05, seed=2)\n\
         U = rand(rows=2000, cols=6, min=-1, max=1, seed=5)\n\
         V = rand(rows=300, cols=6, min=-1, max=1, seed=6)\n{statements}"
    );
    let script = script.as_str();
    let unfused = run_unfused(script);
    let backends = fusion_backends();
    let policies = [
        FusionPolicy::Gen,
        FusionPolicy::FuseAll,
        FusionPolicy::FuseNoRedundancy,
    ];
    for (backend, policy) in backends
        .iter()
        .flat_map(|&b| policies.iter().map(move |&p| (b, p)))
    {
        let (out, report) = run_policy_on(policy, backend, script);
        assert_same_numbers(&out, &unfused, &format!("{policy:?} {backend:?}"));
        assert!(
            report.stats.unfused_fallbacks.is_empty(),
            "{policy:?} {backend:?}: {:?}",
            report.stats.unfused_fallbacks
        );
        assert!(
            !must_fuse || report.stats.fused_operators_executed >= 1,
            "{policy:?} {backend:?}"
        );
    }
}

#[test]
fn deep_scripts_run_on_a_small_stack_and_match_unfused_execution() {
    // On a 512 KiB thread, like an embedder's: every pass that recurses over a script's
    // nesting or a block's dependency chains grows its stack as it goes (LLVM gets a segment
    // of its own), so these neither overflow nor differ from unfused execution.
    let n = 3000;
    let scripts = [
        (
            "a chain of + terms",
            format!(
                "X = rand(rows=20, cols=7, seed=1)\ns = {}\nprint(sum(s))",
                vec!["X"; n].join(" + ")
            ),
        ),
        (
            "nested parentheses",
            format!(
                "X = rand(rows=20, cols=7, seed=1)\ns = {}X{}\nprint(sum(s))",
                "(".repeat(n),
                " * 0.999 + 0.001)".repeat(n)
            ),
        ),
        (
            "nested ifs",
            format!(
                "X = rand(rows=20, cols=7, seed=1)\ns = X\n{}s = s + 1\n{}print(sum(s))",
                "if (sum(X) > 0) {\n".repeat(n),
                "}\n".repeat(n)
            ),
        ),
        (
            "one block of dependent statements",
            format!(
                "X = rand(rows=20, cols=7, seed=1)\ns = X\n{}print(sum(s))",
                "s = abs(s - X) * 0.999\n".repeat(2 * n)
            ),
        ),
        (
            // A Row operator whose body is one long chain of element-wise operations.
            "a row-wise chain",
            format!(
                "X = rand(rows=50, cols=7, seed=1)\nv = rand(rows=7, cols=1, seed=2)\n\
                 q = X %*% v\n{}print(sum(t(X) %*% q))",
                "q = q * 0.999 + 0.001\n".repeat(300)
            ),
        ),
    ];
    let small = std::thread::Builder::new().stack_size(512 << 10);
    small
        .spawn(move || {
            for (what, script) in &scripts {
                let unfused = run_unfused(script);
                for backend in fusion_backends() {
                    let config = EngineConfig {
                        backend,
                        ..fused_at_once::config()
                    };
                    let (fused, _) = run_with(config, script);
                    assert_same_numbers(&fused, &unfused, &format!("{what} ({backend:?})"));
                }
            }
        })
        .expect("spawn")
        .join()
        .expect("no stack overflow");
}

#[test]
fn the_reference_backend_computes_shared_nodes_once() {
    // `s = s + s` forty times: a body of 41 nodes with 2^40 paths to `X`. Evaluating each
    // path would never finish; each node once is instant. (The bound is a hang detector, four
    // orders of magnitude above the time the test takes, not a speed goal.)
    let script = format!(
        "X = rand(rows=10, cols=10, seed=1)\ns = X\n{}print(sum(s))",
        "s = s + s\n".repeat(40)
    );
    let unfused = run_unfused(&script);
    let (done, finished) = std::sync::mpsc::channel();
    let body = script.clone();
    std::thread::spawn(move || {
        let config = EngineConfig {
            backend: FusionBackend::Reference,
            ..fused_at_once::config()
        };
        let _ = done.send(run_with(config, &body).0);
    });
    let fused = finished
        .recv_timeout(std::time::Duration::from_secs(120))
        .expect("the reference backend did not finish: does it recompute shared nodes?");
    assert_same_numbers(&fused, &unfused, "s = s + s, reference backend");
}

/// A dense side input produced by a matrix product carries the value range its kernel
/// computed on the way (no rescan): the sparse-safe fused operators over a sparse main input
/// must still see an infinity there, so that `0 * Inf` at the main input's zeros is NaN as
/// unfused, and skip the zeros when the product is finite. Both, in a loop (cached ranges);
/// 200 columns keep the product out of an Outer operator (which needs more than 256).
#[test]
fn ranges_of_products_keep_sparse_safe_operators_exact() {
    for inf in ["", "B[2, 7] = 1/0"] {
        let script = format!(
            "X = rand(rows=200, cols=200, sparsity=0.02, seed=3)\n\
             A = rand(rows=200, cols=5, min=0.5, max=1, seed=4)\n\
             B = rand(rows=5, cols=200, seed=5)\n\
             {inf}\n\
             V = rand(rows=200, cols=4, seed=6)\n\
             for (i in 1:2) {{\n\
               Y = A %*% B\n\
               print(sum(X * Y))\n\
               print(sum(X * log(Y + 1)))\n\
               print(sum((X * Y) %*% V))\n\
               B = B * 0.5\n\
             }}\n"
        );
        let unfused = run_unfused(&script);
        for backend in fusion_backends() {
            let (fused, report) = run_policy_on(FusionPolicy::Gen, backend, &script);
            assert!(
                report.stats.fused_operators_executed >= 6,
                "{backend:?} {inf}"
            );
            for (f, u) in fused.lines().zip(unfused.lines()) {
                let (f, u): (f64, f64) = (f.parse().unwrap(), u.parse().unwrap());
                let same = (f.is_nan() && u.is_nan()) || f == u || (f - u).abs() <= 1e-9 * u.abs();
                assert!(
                    same,
                    "{backend:?} {inf:?}: fused {f} vs unfused {u}\n{fused}"
                );
            }
            if !inf.is_empty() {
                assert!(unfused.lines().all(|l| l == "NaN"), "{unfused}");
            }
        }
    }
}

/// Element-wise results hold `0.0`, never `-0.0`, unfused and fused alike (the signed-zero
/// rule, `runtime/src/matrix.rs`): a sparse result cannot store the sign, so without the rule
/// `1 / (X * Z)` would be `-Infinity` for a dense product and `Infinity` for a sparse one, and
/// fused operators (which compute `X * Z` in registers) would disagree with both.
#[test]
fn zeros_of_element_wise_results_are_positive_fused_and_unfused() {
    let script = "X = rand(rows=300, cols=40, min=-2, max=-1, seed=1)
Z = rand(rows=300, cols=40, min=1, max=2, sparsity=0.6, seed=2)
S = rand(rows=300, cols=40, min=1, max=2, sparsity=0.1, seed=3)
v = rand(rows=40, cols=1, min=1, max=2, seed=4)
P = rand(rows=300, cols=40, min=0.1, max=0.9, seed=5)
print(sum(1 / (X * Z)))
print(sum(1 / (X * S)))
print(sum(X / (X * Z)))
print(sum(1 / (P %/% -3)))
print(sum(1 / (X * 0)))
print(sum(t(X) %*% (1 / ((X %*% v) * 0))))
print(sum(rowMins(2 / (X * Z) - rowSums(X)) == -1/0))
print(sum(1 / (-P * Z)))
z = -1 * min(P) * 0
print(sum(exp(P) / z))
print(1 / min(X * 0))
print(1 / max(X * 0 * 2))
print(sum(1 / ((X * 0) * 3)))
print(1 / sum(X * 0 * Z))
print(sum(1 / ifelse(X < 0, X * 0, 1)))
print(sum(1 / (-(X * 0) * 2)))
";
    let expected = [
        "Infinity",
        "Infinity",
        "-Infinity",
        "Infinity",
        "Infinity",
        "-Infinity",
        "0.0",
        "Infinity",
        // Scalars keep IEEE's -0.0, as in SystemDS.
        "-Infinity",
        // Generated code leaves a zero's sign as computed where nothing can observe it
        // (`signed_zero.rs`), and normalises it where something can: a minimum, a maximum,
        // a denominator, a matrix value.
        "Infinity",
        "Infinity",
        "Infinity",
        "Infinity",
        "Infinity",
        "Infinity",
    ];
    let unfused = run_unfused(script);
    assert_eq!(unfused.lines().collect::<Vec<_>>(), expected, "unfused");
    for backend in fusion_backends() {
        let (out, report) = run_policy_on(FusionPolicy::Gen, backend, script);
        assert_eq!(out.lines().collect::<Vec<_>>(), expected, "{backend:?}");
        assert!(report.stats.fused_operators_executed >= 12, "{backend:?}");
    }
}

/// `exp` and `log` are one implementation on every path (the runtime's `math`, which generated
/// code computes to the bit), so fused and unfused results agree exactly even downstream of an
/// ill-conditioned step: `sin` of an `exp` near 1e100 turns a 1-ulp difference in the `exp`
/// into an unrelated value. (The C library's `exp` in the unfused kernels and fdlibm's in
/// generated code differed by an ulp on some cells: the script fuzzer's seed 43234.)
#[test]
fn exp_and_log_are_one_implementation_fused_and_unfused() {
    let script = "X = rand(rows=300, cols=40, min=100, max=700, seed=1)
S = rand(rows=300, cols=40, min=1, max=2, sparsity=0.3, seed=2)
print(sum(sin(exp(X))))
print(sum(cos(1 / sigmoid(-X))))
print(sum(sin(exp(X) * S)))
print(sum(sin(1e300 * log(X))))
print(sum(sin(1e300 * log(X, 3))))
print(sum(sin(1e300 * log(S + 1))))
";
    let unfused = run_unfused(script);
    for backend in fusion_backends() {
        let (out, report) = run_policy_on(FusionPolicy::Gen, backend, script);
        // Each sum adds 12000 cells; only its order may differ.
        assert_same_numbers(&out, &unfused, &format!("{backend:?}"));
        assert_eq!(out.lines().count(), 6);
        assert!(report.stats.fused_operators_executed >= 5, "{backend:?}");
    }
}

/// A product `U %*% t(V)` read by two Outer operators over a very sparse `X` is computed in
/// each of them at `X`'s non-zeros, not materialized as a dense m×n matrix: the cost model
/// scales an Outer operator by the sparsity of its driver, the input of most cells. (Taken by
/// bytes, the sparse `X` was smaller than the dense factors, the operators were costed as
/// whole m×n products, and `gen` materialized the product: 34× slower at 20000².)
#[test]
fn a_product_shared_by_two_outer_operators_is_not_materialized() {
    let script = "X = rand(rows=2000, cols=2000, sparsity=0.001, seed=1)
U = rand(rows=2000, cols=10, seed=2)
V = rand(rows=2000, cols=10, seed=3)
R = (X * log(U %*% t(V) + 1e-15)) %*% V
L = t(t(U) %*% (X * log(U %*% t(V) + 2e-15)))
print(sum(R) + sum(L))
";
    let (out, report) = run_policy(FusionPolicy::Gen, script);
    let outer = report
        .stats
        .heavy_hitters
        .iter()
        .find(|h| h.opcode == "fused_outer")
        .map_or(0, |h| h.count);
    assert_eq!(outer, 2, "{:?}", report.stats.heavy_hitters);
    assert!(
        !report
            .stats
            .heavy_hitters
            .iter()
            .any(|h| h.opcode == "ba+*"),
        "the product was materialized: {:?}",
        report.stats.heavy_hitters
    );
    assert_same_numbers(&out, &run_unfused(script), "shared Outer product");
}

/// A scratch directory for scripts that write and read files, removed when dropped.
struct Scratch(std::path::PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("lafuse-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }

    fn path(&self, file: &str) -> String {
        self.0.join(file).display().to_string()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Data read from files (CSV with metadata and without, lafuse binary, MatrixMarket) is
/// planned with the sizes the files state or, where they state none, with the actual sizes
/// (the statements after a read are compiled once it has run), so it is fused as data made in
/// place is (issue 23: it ran 0 fused operators), and prints what unfused execution prints.
#[test]
fn data_read_from_files_is_fused_like_data_made_in_place() {
    let dir = Scratch::new("read-sizes");
    let (x, y, z, w) = (
        dir.path("X.csv"),
        dir.path("Y.bin"),
        dir.path("Z.mtx"),
        dir.path("W.csv"),
    );
    let make = "X = rand(rows=300, cols=200, seed=1)\nY = rand(rows=300, cols=200, seed=2)\n\
                Z = rand(rows=300, cols=200, sparsity=0.3, seed=3)\n\
                W = rand(rows=300, cols=200, seed=4)\n";
    run(&format!(
        "{make}write(X, \"{x}\", format=\"csv\")\nwrite(Y, \"{y}\", format=\"binary\")\n\
         write(Z, \"{z}\", format=\"mm\")\nwrite(W, \"{w}\", format=\"csv\")\n"
    ));
    std::fs::remove_file(format!("{w}.mtd")).unwrap();
    let in_place = format!("{make}print(sum(X * Y * Z * W))\n");
    let from_files = format!(
        "X = read(\"{x}\")\nY = read(\"{y}\")\nZ = read(\"{z}\")\nW = read(\"{w}\")\n\
         print(sum(X * Y * Z * W))\n"
    );
    let (made, made_report) = run_policy(FusionPolicy::Gen, &in_place);
    let (read, read_report) = run_policy(FusionPolicy::Gen, &from_files);
    assert_eq!(read, made);
    assert_eq!(read, run_unfused(&from_files));
    assert_eq!(
        read_report.stats.fused_operators_executed, made_report.stats.fused_operators_executed,
        "{:?}",
        read_report.stats
    );
    assert!(read_report.stats.fused_operators_executed >= 1);
}

/// A block planned for the size a file stated is planned again when the file changes size
/// between its executions, and a block that writes a file does not plan its reads with the
/// size the file had before.
#[test]
fn plans_follow_the_files_they_read_when_those_change() {
    let dir = Scratch::new("read-changes");
    let f = dir.path("F.csv");
    let script = format!(
        "s = 0.0\n\
         for (i in 1:3) {{\n\
           if (i > 0) {{ write(matrix(i, rows=i + 1, cols=2), \"{f}\", format=\"csv\") }}\n\
           X = read(\"{f}\")\n\
           R = rowSums(X * X * 2) + 1\n\
           s = s + sum(R) + nrow(R)\n\
         }}\n\
         write(matrix(1, rows=5, cols=3), \"{f}\", format=\"csv\")\n\
         Y = read(\"{f}\")\n\
         print(s + \" \" + sum(Y * Y * 3))\n"
    );
    // `s` is a double throughout, so only the file's size can tell the read block's plans
    // apart (planned once for 2x2, the block used to fail with an internal error at i = 2).
    // sum(R) + nrow(R) is sum(X * X * 2) + 2 nrow(X): i = 1: 2x2 of 1 -> 8 + 4; i = 2: 3x2
    // of 2 -> 48 + 6; i = 3: 4x2 of 3 -> 144 + 8; then 5x3 of 1 -> 15 * 3.
    run(&format!(
        "write(matrix(7, rows=9, cols=9), \"{f}\", format=\"csv\")\n"
    ));
    assert_eq!(run(&script), "218.0 45.0\n");
    assert_eq!(run_unfused(&script), "218.0 45.0\n");
}

/// `--stats` says which blocks had matrix operations of unknown size, which fusion leaves
/// out: here a CSV without metadata read inside the statement that uses it.
#[test]
fn stats_name_the_blocks_whose_unknown_sizes_kept_fusion_out() {
    let dir = Scratch::new("unknown-sizes");
    let f = dir.path("X.csv");
    run(&format!(
        "write(rand(rows=50, cols=20, seed=1), \"{f}\", format=\"csv\")\n"
    ));
    std::fs::remove_file(format!("{f}.mtd")).unwrap();
    let inline = format!("x = 1\nprint(sum(read(\"{f}\") * 2 * read(\"{f}\")))\n");
    let (out, report) = run_policy(FusionPolicy::Gen, &inline);
    assert_eq!(out, run_unfused(&inline));
    let skipped = &report.stats.fusion_skipped;
    assert_eq!(skipped.len(), 1, "{:?}", report.stats);
    assert!(skipped[0].reason.starts_with("lines 1-2: "), "{skipped:?}");
    assert!(skipped[0].count >= 2, "{skipped:?}");
    assert!(report.stats.to_text().contains("Not fused "));
    // Read into a variable first, the data is fused and nothing is reported.
    let split = format!("X = read(\"{f}\")\nprint(sum(X * 2 * X))\n");
    let (_, report) = run_policy(FusionPolicy::Gen, &split);
    assert!(report.stats.fusion_skipped.is_empty(), "{:?}", report.stats);
    assert!(report.stats.fused_operators_executed >= 1);
}

/// Gram-Schmidt applied twice in a loop: the second dot product `t(P) %*% v` reads the first
/// through its second operand, so the two must not become one MultiAgg (it was planned, and
/// the block's operators then depended on each other in a cycle). SystemDS 3.4 prints
/// 4.084548897579111.
#[test]
fn dependent_dot_products_are_not_multi_aggregated() {
    let script = "C = rand(rows=20, cols=20, seed=1)
k = 5
Q = rand(rows=nrow(C), cols=k, seed=5)
for (it in 1:3) {
  Z = C %*% Q
  Q = Z
  for (j in 1:k) {
    v = Z[, j]
    if (j > 1) {
      P = Q[, 1:(j - 1)]
      v = v - P %*% (t(P) %*% v)
      v = v - P %*% (t(P) %*% v)
    }
    Q[, j] = v / sqrt(sum(v ^ 2))
  }
}
print(sum(Q))
";
    let unfused: f64 = run_unfused(script).trim().parse().unwrap();
    assert!((unfused - 4.084548897579111).abs() < 1e-12, "{unfused}");
    for policy in [
        FusionPolicy::Gen,
        FusionPolicy::FuseAll,
        FusionPolicy::FuseNoRedundancy,
    ] {
        let (out, _) = run_policy(policy, script);
        let fused: f64 = out.trim().parse().unwrap();
        assert!(
            (fused - unfused).abs() <= 1e-12 * unfused.abs(),
            "{policy:?}: {fused}"
        );
    }
}

#[test]
fn fused_products_skip_the_left_operands_zeros_as_unfused_ones() {
    // Dense left operands with zeros, right operands holding Inf: `%*%` never forms 0 * Inf
    // (SystemDS's semantics), in Row (`X %*% v`, `t(X) %*% (w * (X %*% v))`) and Outer
    // (`U %*% t(V)`) operators as in the unfused kernels, so no NaN appears.
    let script = r#"
        X = rand(rows=200, cols=12, sparsity=0.7, min=1, max=2, seed=3)
        v = rand(rows=12, cols=1, seed=4)
        v[5, 1] = 1/0
        w = rand(rows=200, cols=1, min=0.5, max=1, seed=5)
        q = (X %*% v) * w
        print(sum(q != q))
        print(sum(replace(target=q, pattern=1/0, replacement=0)))
        g = t(X) %*% (w * (X %*% v))
        print(sum(g != g))
        U = rand(rows=100, cols=6, sparsity=0.7, min=1, max=2, seed=6)
        V = rand(rows=80, cols=6, min=1, max=2, seed=7)
        V[3, 2] = 1/0
        Y = rand(rows=100, cols=80, sparsity=0.05, seed=8)
        O = Y * exp(-(U %*% t(V)))
        print(sum(O != O))
        print(sum(O))
    "#;
    let unfused = run_unfused(script);
    let nans: Vec<f64> = unfused
        .lines()
        .enumerate()
        .filter(|(i, _)| [0, 2, 3].contains(i))
        .map(|(_, l)| l.parse().unwrap())
        .collect();
    assert_eq!(nans, [0.0, 0.0, 0.0], "{unfused}");
    for backend in fusion_backends() {
        let (fused, report) = run_policy_on(FusionPolicy::Gen, backend, script);
        assert!(report.stats.fused_operators_executed > 0, "{backend:?}");
        assert_eq!(fused, unfused, "{backend:?}");
    }
}
