//! The engine facade: value semantics under in-place updates, function scopes, plan caching,
//! deterministic explain output and statistics.

use lafuse::{
    Engine, EngineConfig, ExplainFormat, ExplainLevel, FusionPolicy, ScriptArgs, SourceFile,
};

fn run_with(config: EngineConfig, script: &str) -> (String, lafuse::RunReport) {
    let source = SourceFile::new("test.dml", script);
    let mut out = Vec::new();
    let report = Engine::new(config)
        .run(&source, &ScriptArgs::default(), &mut out)
        .unwrap_or_else(|e| panic!("{}", e.render(&source)));
    (String::from_utf8(out).unwrap(), report)
}

fn run(script: &str) -> String {
    run_with(EngineConfig::default(), script).0
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

#[test]
fn loops_reuse_compiled_blocks() {
    let (out, report) = run_with(
        EngineConfig {
            collect_stats: true,
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
        Engine::new(EngineConfig::default())
            .explain(
                &source,
                &ScriptArgs::default(),
                ExplainLevel::Hops,
                format,
                FusionPolicy::default(),
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
        "x = 1\nA = matrix(1, rows=2, cols=2)\nB = A[3, 1]\n",
    );
    let err = Engine::new(EngineConfig::default())
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
    let json = Engine::new(EngineConfig::default())
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
