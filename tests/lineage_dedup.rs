//! Lineage deduplication of last-level loops (issue 24, LIMA section 3.2): tracing with
//! deduplication gives, expanded, exactly the lineage tracing without it gives, on random
//! programs with loops, branches and calls and on the corpus; a mini-batch loop keeps one
//! patch per path; run-time inputs (unseeded `rand`) are recorded per iteration; a path first
//! taken after tracing stopped is traced from what ran.

use lafuse::crates::runtime::lineage::{self, Lineage};
use lafuse::{Engine, EngineConfig, FusionBackend, FusionPolicy, ScriptArgs, SourceFile, Stats};
use proptest::prelude::*;

mod fused_at_once;
mod programs;
mod scripts;
use programs::{program, render};
use std::collections::BTreeMap;

fn config(dedup: bool) -> EngineConfig {
    EngineConfig {
        fusion: Some(FusionPolicy::Gen),
        backend: FusionBackend::Reference,
        lineage: true,
        lineage_dedup: dedup,
        collect_stats: true,
        ..fused_at_once::config()
    }
}

struct Traced {
    printed: String,
    logs: BTreeMap<String, String>,
    stats: Stats,
}

fn run(text: &str, args: &ScriptArgs, dedup: bool) -> Traced {
    let source = SourceFile::new("test.dml", text);
    let mut out = Vec::new();
    let report = Engine::new(config(dedup))
        .run(&source, args, &mut out)
        .unwrap_or_else(|e| panic!("{}\n{text}", e.render(&source)));
    Traced {
        printed: String::from_utf8_lossy(&out).into_owned(),
        logs: report.lineage,
        stats: report.stats,
    }
}

fn item(log: &str) -> Lineage {
    lineage::deserialize(log).unwrap_or_else(|e| panic!("{e}\n{log}"))
}

/// The log `log` (which may hold dedup items) expanded.
fn expanded(log: &str) -> String {
    lineage::serialize(&item(log).expand().expect("a well-formed dedup item"))
}

/// Runs `text` with and without deduplication; asserts equal output and, for every live
/// variable, equal lineage once expanded. Returns the deduplicated run.
fn assert_dedup_expands_to_plain(text: &str, args: &ScriptArgs) -> Traced {
    let plain = run(text, args, false);
    let dedup = run(text, args, true);
    assert_eq!(dedup.printed, plain.printed, "{text}");
    assert_eq!(
        dedup.logs.keys().collect::<Vec<_>>(),
        plain.logs.keys().collect::<Vec<_>>()
    );
    for (name, log) in &plain.logs {
        assert_eq!(
            &expanded(&dedup.logs[name]),
            log,
            "lineage of {name} with deduplication, expanded, differs:\n{text}"
        );
    }
    dedup
}

const MINIBATCH: &str = "\
X = rand(rows=400, cols=5, seed=7)
b = 4
acc = 0.0
for (k in 1:ceil(nrow(X) / b)) {
  beg = (k - 1) * b + 1
  end = min(k * b, nrow(X))
  B = X[beg:end, ]
  B = ((B + B) * 2 - B) / (2 + 1)
  acc = acc + sum(B)
}
print(acc)
";

#[test]
fn minibatch_loop_keeps_one_patch_and_one_item_per_assigned_variable() {
    let dedup = assert_dedup_expands_to_plain(MINIBATCH, &ScriptArgs::default());
    let plain = run(MINIBATCH, &ScriptArgs::default(), false);
    // A hundred iterations, one path and one plan (`acc` starts as a double, so its type, which the
    // plan assumes, never changes): the first is traced, the others add only dedup items
    // (acc, B, beg, end).
    assert_eq!(dedup.stats.lineage_dedup_patches, 1);
    assert_eq!(dedup.stats.lineage_dedup_items, 400);
    assert!(
        dedup.stats.lineage_items * 2 < plain.stats.lineage_items,
        "{} items with deduplication, {} without",
        dedup.stats.lineage_items,
        plain.stats.lineage_items
    );
    assert!(dedup.logs["acc"].contains("(D) \"dedup\""));
}

#[test]
fn unseeded_rand_in_a_deduplicated_loop_records_every_seed() {
    let text = "\
acc = 0.0
for (k in 1:5) {
  R = rand(rows=2, cols=2)
  acc = acc + sum(R)
}
print(acc > 0)
";
    let dedup = run(text, &ScriptArgs::default(), true);
    assert_eq!(dedup.stats.lineage_dedup_patches, 1);
    let full = item(&dedup.logs["acc"]).expand().unwrap();
    let seeds: std::collections::BTreeSet<String> = full
        .topological()
        .iter()
        .filter(|i| i.opcode() == "dg(rand)")
        .map(|i| i.inputs()[5].data().to_string())
        .collect();
    assert_eq!(seeds.len(), 5, "each iteration's drawn seed: {seeds:?}");
}

#[test]
fn a_path_first_taken_after_tracing_stopped_is_traced_from_what_ran() {
    // Iterations 1-4 take the `else` path (traced once, then skipped); iteration 5 takes the
    // `then` path, which has no patch yet.
    let text = "\
A = matrix(1, rows=2, cols=2)
s = 0.0
for (k in 1:6) {
  if (k == 5) {
    A = A * 2 + s
  } else {
    s = s + sum(A)
  }
  A = t(A) / 2
}
print(s)
";
    let dedup = assert_dedup_expands_to_plain(text, &ScriptArgs::default());
    assert_eq!(dedup.stats.lineage_dedup_patches, 2);
}

#[test]
fn loops_that_need_items_while_they_run_are_not_deduplicated() {
    let text = "\
A = matrix(1, rows=2, cols=2)
for (k in 1:3) {
  A = A + k
  print(lineage(A))
}
";
    let dedup = assert_dedup_expands_to_plain(text, &ScriptArgs::default());
    assert_eq!(dedup.stats.lineage_dedup_patches, 0);
}

#[test]
fn corpus_lineage_with_deduplication_expands_to_the_same() {
    let mut patches = 0;
    for path in scripts::scripts_in("tests/corpus") {
        let text = std::fs::read_to_string(&path).unwrap();
        let args = scripts::script_args(&path);
        let plain = run(&text, &args, false);
        let dedup = run(&text, &args, true);
        patches += dedup.stats.lineage_dedup_patches;
        for (name, log) in &plain.logs {
            // Values that record what only the run decides differ between any two runs.
            if log.contains("\"dg(rand)\"")
                || log.contains("\"dg(sample)\"")
                || log.contains("\"dg(time)\"")
                || log.contains("\"file\"")
            {
                continue;
            }
            assert_eq!(
                &expanded(&dedup.logs[name]),
                log,
                "{}: lineage of {name} with deduplication, expanded, differs",
                path.display()
            );
        }
    }
    assert!(patches > 0, "no corpus loop was deduplicated");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// The property: random programs with loops, branches and function calls give
    /// the same expanded lineage with and without deduplication.
    #[test]
    fn dedup_expands_to_plain_lineage_on_random_programs(program in program()) {
        assert_dedup_expands_to_plain(&render(&program), &ScriptArgs::default());
    }
}
