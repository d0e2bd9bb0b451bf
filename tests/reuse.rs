//! Lineage-based reuse (issue 25): reuse never changes a result. Every corpus script, codegen
//! pattern and algorithm prints exactly what it prints without reuse, under full and
//! multi-level reuse, with the default budget and with one so small that values are evicted
//! and spilled all the time (the executor asserts after every put that the cache holds no
//! more than its budget); repeated computations hit, partial reuse (`tests/partial_reuse.rs`
//! has its own rewrites' cases) changes nothing either, fused operators are reused by their
//! outputs' lineage, deterministic calls are skipped as a whole and others are not.

use lafuse::{
    Engine, EngineConfig, EvictionPolicy, FusionBackend, FusionPolicy, ReuseConfig, ReuseMode,
    ScriptArgs, SourceFile, Stats,
};
use proptest::prelude::*;
use std::path::Path;

mod scripts;

mod fused_at_once;
mod programs;
mod small_algorithms;

fn config(mode: ReuseMode, policy: EvictionPolicy, budget: Option<u64>) -> EngineConfig {
    config_delayed(mode, policy, budget, 1)
}

fn config_delayed(
    mode: ReuseMode,
    policy: EvictionPolicy,
    budget: Option<u64>,
    delay: u32,
) -> EngineConfig {
    EngineConfig {
        fusion: Some(FusionPolicy::Gen),
        backend: FusionBackend::Reference,
        collect_stats: true,
        reuse: ReuseConfig {
            mode,
            policy,
            budget,
            spill_dir: None,
            delay,
        },
        ..fused_at_once::config()
    }
}

fn run(text: &str, args: &ScriptArgs, config: &EngineConfig) -> (String, Stats) {
    let source = SourceFile::new("test.dml", text);
    let mut out = Vec::new();
    let report = Engine::new(config.clone())
        .run(&source, args, &mut out)
        .unwrap_or_else(|e| panic!("{}", e.render(&source)));
    (String::from_utf8_lossy(&out).into_owned(), report.stats)
}

/// Every configuration reuse must not change a result under: full and multi-level reuse
/// with the default budget, and with a 64 KiB budget under each eviction policy (so values
/// are evicted and spilled all the time).
fn reuse_configs() -> Vec<(String, EngineConfig)> {
    let mut configs = vec![
        (
            "full".to_string(),
            config(ReuseMode::Full, EvictionPolicy::CostSize, None),
        ),
        (
            "multilevel".to_string(),
            config(ReuseMode::Multilevel, EvictionPolicy::CostSize, None),
        ),
    ];
    configs.push((
        "hybrid".to_string(),
        config(ReuseMode::Hybrid, EvictionPolicy::CostSize, None),
    ));
    configs.push((
        "multilevel, delayed caching".to_string(),
        config_delayed(ReuseMode::Multilevel, EvictionPolicy::CostSize, None, 2),
    ));
    for policy in [
        EvictionPolicy::Lru,
        EvictionPolicy::DagHeight,
        EvictionPolicy::CostSize,
    ] {
        // Cost&Size, the default policy, with partial reuse as well.
        let mode = match policy {
            EvictionPolicy::CostSize => ReuseMode::Hybrid,
            _ => ReuseMode::Multilevel,
        };
        configs.push((
            format!("{mode:?}, 64 KiB, {policy:?}"),
            config(mode, policy, Some(64 << 10)),
        ));
    }
    configs
}

fn check_scripts_reuse_nothing_changes(dir: &str) -> (usize, u64) {
    std::env::set_current_dir(env!("CARGO_MANIFEST_DIR")).unwrap();
    let configs = reuse_configs();
    let (mut checked, mut hits) = (0, 0);
    for path in scripts::scripts_in(dir) {
        let text = std::fs::read_to_string(&path).unwrap();
        // Scripts printing the clock cannot print the same twice.
        if text.contains("time()") {
            continue;
        }
        let args = scripts::script_args(&path);
        // Traced as reuse traces, so that both runs compile the same plans (a run that does
        // not trace drops the write-backs of variables dead after their block, and fused
        // operators then round differently).
        let traced = EngineConfig {
            lineage: true,
            ..config(ReuseMode::None, EvictionPolicy::default(), None)
        };
        let (expected, _) = run(&text, &args, &traced);
        for (label, config) in &configs {
            let (actual, stats) = run(&text, &args, config);
            assert_eq!(
                actual,
                expected,
                "{} prints differently with reuse ({label})",
                path.display()
            );
            hits += stats.reuse.as_ref().map_or(0, |r| r.hits());
        }
        checked += 1;
    }
    (checked, hits)
}

#[test]
fn reuse_never_changes_what_the_corpus_prints() {
    let (checked, hits) = check_scripts_reuse_nothing_changes("tests/corpus");
    assert!(checked > 30, "only {checked} scripts");
    assert!(hits > 0, "no corpus script reused anything");
}

#[test]
fn reuse_never_changes_what_the_codegen_patterns_print() {
    let (checked, _) = check_scripts_reuse_nothing_changes("tests/codegen_patterns");
    assert!(checked > 10, "only {checked} patterns");
}

/// What a script printed, without its `time_ms` line (which no two runs share).
fn timeless(out: &str) -> String {
    out.lines()
        .filter(|l| !l.starts_with("time_ms"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every algorithm prints the same with reuse as without (its `time_ms` line aside).
#[test]
fn reuse_never_changes_what_the_algorithms_print() {
    let scratch = std::env::temp_dir().join(format!("lafuse-reuse-alg-{}", std::process::id()));
    let mut hits = 0;
    for (k, alg) in small_algorithms::ALGORITHMS.iter().enumerate() {
        let (source, args) = alg.generate(&scratch.join(format!("{}{k}", alg.id)));
        let (expected, _) = run(
            &source.text,
            &args,
            &config(ReuseMode::None, EvictionPolicy::default(), None),
        );
        for (label, config) in reuse_configs() {
            let (actual, stats) = run(&source.text, &args, &config);
            assert_eq!(
                timeless(&actual),
                timeless(&expected),
                "{} prints differently with reuse ({label})",
                alg.id
            );
            hits += stats.reuse.map_or(0, |r| r.hits());
        }
    }
    std::fs::remove_dir_all(&scratch).ok();
    assert!(hits > 0, "no algorithm reused anything");
}

/// The reuse examples (`examples/reuse/`, the scripts of `lafuse bench --suite reuse`) at
/// small sizes print the same with every reuse mode as without, and reuse what they are there
/// to show: HLM the products every candidate shares, the repeated MLogReg search whole calls.
/// steplm's inner loop has nothing for full reuse (only partial reuse finds the shared
/// t(X) %*% X: its partial hits are checked under hybrid), and under a 64 KiB budget a script
/// may lose every value before it is asked for again, so those runs are held to printing the
/// same only.
#[test]
fn reuse_examples_print_the_same_and_reuse() {
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/reuse");
    for (script, pairs) in [
        ("hlm.dml", &["rows=300", "cols=8"][..]),
        (
            "mlogreg_multilevel.dml",
            &["rows=200", "cols=5", "reps=3", "maxi=2"][..],
        ),
        ("steplm_partial.dml", &["rows=200", "cols=6", "feats=3"][..]),
        ("steplm_ca.dml", &["rows=200", "cols=6", "feats=3"][..]),
        (
            "eviction_minibatch.dml",
            &["rows=400", "cols=8", "batch=100", "epochs=3"][..],
        ),
        (
            "eviction_phases.dml",
            &["rows=200", "cols=10", "n1=4", "n2=3", "n3=3"][..],
        ),
        (
            "hl2svm.dml",
            &["rows=200", "cols=6", "lambdas=2", "maxi=2"][..],
        ),
        (
            "hcv.dml",
            &["rows=200", "cols=6", "folds=4", "lambdas=2"][..],
        ),
        (
            "ens.dml",
            &[
                "rows=200",
                "test=50",
                "cols=6",
                "classes=3",
                "weights=4",
                "maxi=2",
            ][..],
        ),
        (
            "pcalm.dml",
            &["rows=200", "cols=20", "kmax=4", "iters=2"][..],
        ),
    ] {
        let text = std::fs::read_to_string(examples.join(script)).unwrap();
        let args =
            ScriptArgs::parse_pairs(&pairs.iter().map(|p| p.to_string()).collect::<Vec<_>>())
                .unwrap();
        // Traced as reuse traces, so that both runs compile the same plans (a run that does
        // not trace drops the write-backs of variables dead after their block, and fused
        // operators then round differently).
        let traced = EngineConfig {
            lineage: true,
            ..config(ReuseMode::None, EvictionPolicy::default(), None)
        };
        let (expected, _) = run(&text, &args, &traced);
        for (label, config) in reuse_configs() {
            let (actual, stats) = run(&text, &args, &config);
            assert_eq!(timeless(&actual), timeless(&expected), "{script} ({label})");
            let reuse = stats.reuse.expect("reuse statistics");
            // The eviction scripts are there to show that under a small budget LRU evicts
            // what is asked for next.
            if script.starts_with("steplm") && label == "hybrid" {
                assert_eq!(reuse.partial_hits, 3, "{script}: {reuse:?}");
            }
            // Under 64 KiB a policy may lose every value before it is asked for again: those
            // configurations are there to show that eviction and spilling change no result.
            if script.starts_with("steplm") || label.contains("KiB") {
                continue;
            }
            assert!(
                reuse.hits() > 0,
                "{script} ({label}) reused nothing: {reuse:?}"
            );
            if script.starts_with("mlogreg") && (label == "multilevel" || label == "hybrid") {
                assert_eq!(reuse.function_hits, 80, "{reuse:?}");
            }
        }
    }
}

const REPEATED: &str = "\
X = rand(rows=300, cols=40, seed=3)
y = rand(rows=300, cols=1, seed=4)
acc = 0.0
for (i in 1:10) {
  G = t(X) %*% X
  b = t(X) %*% y
  acc = acc + sum(G) + sum(b) + sum((X * 2 + 1) ^ 2)
}
print(acc)
";

#[test]
fn repeated_computations_are_reused() {
    let (plain, _) = run(
        REPEATED,
        &ScriptArgs::default(),
        &config(ReuseMode::None, EvictionPolicy::default(), None),
    );
    let (reused, stats) = run(
        REPEATED,
        &ScriptArgs::default(),
        &config(ReuseMode::Full, EvictionPolicy::default(), None),
    );
    assert_eq!(reused, plain);
    let reuse = stats.reuse.expect("reuse statistics");
    // Nine of ten iterations find `t(X) %*% X`, `t(X) %*% y` and the fused cell aggregate.
    assert!(reuse.operation_hits + reuse.fused_hits >= 27, "{reuse:?}");
    assert!(
        reuse.fused_hits >= 9,
        "fused operators are reused: {reuse:?}"
    );
    assert!(reuse.misses > 0);
}

const DESCENT: &str = "\
X = rand(rows=200, cols=8, seed=6)
y = rand(rows=200, cols=1, seed=7)
w = matrix(0, 8, 1)
G = t(X) %*% X
for (i in 1:20) {
  g = G %*% w - t(X) %*% y
  w = w - 0.001 * g
}
print(sum(w))
";

/// Compiler assistance: the descent's updates of `w` are new in every iteration, so they are
/// neither probed nor cached; `t(X) %*% y`, which repeats, still hits.
#[test]
fn loop_carried_updates_are_unmarked() {
    let (plain, _) = run(
        DESCENT,
        &ScriptArgs::default(),
        &config(ReuseMode::None, EvictionPolicy::default(), None),
    );
    let (reused, stats) = run(
        DESCENT,
        &ScriptArgs::default(),
        &config(ReuseMode::Full, EvictionPolicy::default(), None),
    );
    assert_eq!(reused, plain);
    let reuse = stats.reuse.expect("reuse statistics");
    // At least `G %*% w` and the fused update in every iteration; no iteration misses.
    assert!(reuse.unmarked >= 40, "{reuse:?}");
    assert_eq!(reuse.operation_hits, 19, "{reuse:?}");
    assert!(reuse.misses <= 3, "{reuse:?}");
}

const BLOCKS: &str = "\
X = rand(rows=100, cols=10, seed=1)
acc = 0
for (i in 1:5) {
  A = t(X) %*% X
  B = A + 1
  if (i > 2) {
    acc = acc + sum(B)
  }
}
print(acc)
";

/// Multi-level reuse of basic blocks: the block assigning `A` and `B` reads only `X`, so from
/// the second iteration on it does not run; lineage is the same as without reuse.
#[test]
fn deterministic_blocks_are_reused_as_a_whole() {
    let traced = |mode| {
        let source = SourceFile::new("blocks.dml", BLOCKS);
        let mut out = Vec::new();
        let report = Engine::new(EngineConfig {
            lineage: true,
            ..config(mode, EvictionPolicy::default(), None)
        })
        .run(&source, &ScriptArgs::default(), &mut out)
        .unwrap();
        (out, report)
    };
    let (plain_out, plain) = traced(ReuseMode::None);
    let (out, reused) = traced(ReuseMode::Multilevel);
    assert_eq!(out, plain_out);
    assert_eq!(reused.lineage, plain.lineage);
    let reuse = reused.stats.reuse.expect("reuse statistics");
    assert_eq!(reuse.block_hits, 4, "{reuse:?}");
    let (_, full) = traced(ReuseMode::Full);
    assert_eq!(
        full.stats.reuse.unwrap().block_hits,
        0,
        "blocks are multi-level only"
    );
}

const CALLS: &str = "\
f = function(matrix[double] X, double l) return (matrix[double] B, double s) {
  B = solve(t(X) %*% X + diag(matrix(l, ncol(X), 1)), t(X) %*% matrix(1, nrow(X), 1))
  s = sum(B)
}
g = function(matrix[double] X) return (double s) {
  print(\"g runs\")
  s = sum(X)
}
X = rand(rows=200, cols=10, seed=5)
acc = 0.0
for (i in 1:4) {
  for (l in seq(1, 3)) {
    [B, s] = f(X, l)
    acc = acc + s + g(B)
  }
}
print(acc)
";

#[test]
fn deterministic_calls_are_reused_as_a_whole_and_others_run() {
    let (plain, _) = run(
        CALLS,
        &ScriptArgs::default(),
        &config(ReuseMode::None, EvictionPolicy::default(), None),
    );
    let (reused, stats) = run(
        CALLS,
        &ScriptArgs::default(),
        &config(ReuseMode::Multilevel, EvictionPolicy::default(), None),
    );
    assert_eq!(reused, plain, "g prints on every call, reused or not");
    assert_eq!(reused.matches("g runs").count(), 12);
    let reuse = stats.reuse.expect("reuse statistics");
    // `f` is computed for three distinct arguments and reused for the nine other calls.
    assert_eq!(reuse.function_hits, 9, "{reuse:?}");
}

#[test]
fn lineage_does_not_depend_on_reuse() {
    let traced = |mode| {
        let config = EngineConfig {
            lineage: true,
            ..config(mode, EvictionPolicy::default(), None)
        };
        let source = SourceFile::new("test.dml", CALLS);
        Engine::new(config)
            .run(&source, &ScriptArgs::default(), &mut Vec::new())
            .unwrap()
            .lineage
    };
    let plain = traced(ReuseMode::None);
    assert_eq!(traced(ReuseMode::Full), plain);
    assert_eq!(traced(ReuseMode::Multilevel), plain);
    assert_eq!(traced(ReuseMode::Hybrid), plain);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    /// Random programs whose loops repeat and interleave computations print the same with
    /// multi-level and hybrid reuse under a 4 KiB budget (evictions and spills on almost every
    /// put) as without reuse.
    #[test]
    fn reuse_with_a_tiny_budget_never_changes_a_result(
        program in programs::program(),
        mode in prop::sample::select(vec![ReuseMode::Multilevel, ReuseMode::Hybrid]),
        policy in prop::sample::select(vec![
            EvictionPolicy::Lru,
            EvictionPolicy::DagHeight,
            EvictionPolicy::CostSize,
        ]),
    ) {
        let text = programs::render(&program);
        let args = ScriptArgs::default();
        let (plain, _) = run(&text, &args, &config(ReuseMode::None, policy, None));
        let (reused, _) = run(&text, &args, &config(mode, policy, Some(4 << 10)));
        prop_assert_eq!(reused, plain, "{}", text);
    }
}
