//! Lineage deduplication of last-level loops (issue 24, LIMA section 3.2): tracing with
//! deduplication gives, expanded, exactly the lineage tracing without it gives, on random
//! programs with loops, branches and calls and on the corpus; a mini-batch loop keeps one
//! patch per path; run-time inputs (unseeded `rand`) are recorded per iteration; a path first
//! taken after tracing stopped is traced from what ran.

use lafuse::crates::runtime::lineage::{self, Lineage};
use lafuse::{Engine, EngineConfig, FusionBackend, FusionPolicy, ScriptArgs, SourceFile, Stats};
use proptest::prelude::*;
use std::collections::BTreeMap;
use std::path::Path;

fn config(dedup: bool) -> EngineConfig {
    EngineConfig {
        fusion: Some(FusionPolicy::Gen),
        backend: FusionBackend::Reference,
        lineage: true,
        lineage_dedup: dedup,
        collect_stats: true,
        ..EngineConfig::default()
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
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus");
    let mut scripts: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "dml"))
        .collect();
    scripts.sort();
    let mut patches = 0;
    for path in scripts {
        let text = std::fs::read_to_string(&path).unwrap();
        let pairs: Vec<String> = std::fs::read_to_string(path.with_extension("args"))
            .map(|s| {
                s.lines()
                    .filter(|l| !l.trim().is_empty())
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default();
        let args = ScriptArgs::parse_pairs(&pairs).unwrap();
        let plain = run(&text, &args, false);
        let dedup = run(&text, &args, true);
        patches += dedup.stats.lineage_dedup_patches;
        for (name, log) in &plain.logs {
            // Values that record what only the run decides differ between any two runs.
            if log.contains("\"dg(rand)\"")
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

/// A statement of a random loop body (`k` is the loop variable or, in `while` loops, the
/// last value it had).
fn statement() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec![
        "A = A * 0.5 + s",
        "A = t(A) %*% B / 3",
        "s = s + sum(A) / 100",
        "s = s * 0.9",
        "B = B + A",
        "A = A + k",
        "C = A[1:2, ] * k",
        "s = s + as.scalar(A[1, 1])",
        "B = B * (A > 0.5)",
    ])
}

fn condition() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec!["k %% 2 == 0", "s > 1", "sum(A) > 5", "k > 2"])
}

#[derive(Clone, Debug)]
enum BodyItem {
    Stmt(&'static str),
    If(&'static str, Vec<&'static str>, Vec<&'static str>),
    Call,
}

#[derive(Clone, Debug)]
enum TopItem {
    Stmt(&'static str),
    For(u8, Vec<BodyItem>),
    While(u8, Vec<BodyItem>),
    Nested(u8, u8, Vec<BodyItem>),
}

fn body() -> impl Strategy<Value = Vec<BodyItem>> {
    let item = prop_oneof![
        4 => statement().prop_map(BodyItem::Stmt),
        2 => (
            condition(),
            prop::collection::vec(statement(), 1..3),
            prop::collection::vec(statement(), 0..2)
        )
            .prop_map(|(c, t, e)| BodyItem::If(c, t, e)),
        1 => Just(BodyItem::Call),
    ];
    prop::collection::vec(item, 1..5)
}

fn program() -> impl Strategy<Value = Vec<TopItem>> {
    let item = prop_oneof![
        1 => statement().prop_map(TopItem::Stmt),
        3 => (1u8..6, body()).prop_map(|(n, b)| TopItem::For(n, b)),
        1 => (1u8..5, body()).prop_map(|(n, b)| TopItem::While(n, b)),
        1 => (1u8..4, 1u8..4, body()).prop_map(|(n, m, b)| TopItem::Nested(n, m, b)),
    ];
    prop::collection::vec(item, 1..4)
}

fn render_body(items: &[BodyItem], out: &mut String) {
    for item in items {
        match item {
            BodyItem::Stmt(s) => out.push_str(&format!("  {s}\n")),
            BodyItem::If(c, t, e) => {
                out.push_str(&format!("  if ({c}) {{\n"));
                t.iter().for_each(|s| out.push_str(&format!("    {s}\n")));
                out.push_str("  } else {\n");
                e.iter().for_each(|s| out.push_str(&format!("    {s}\n")));
                out.push_str("  }\n");
            }
            BodyItem::Call => out.push_str("  A = f(A, s)\n"),
        }
    }
}

fn render(program: &[TopItem]) -> String {
    let mut out = String::from(
        "f = function(matrix[double] M, double c) return (matrix[double] R) {\n  \
         R = M * c + 1\n  if (sum(R) > 100) {\n    R = R / 10\n  }\n}\n\
         A = matrix(seq(1, 9), rows=3, cols=3) / 10\nB = rand(rows=3, cols=3, seed=3)\n\
         s = 0.5\nk = 1\n",
    );
    for item in program {
        match item {
            TopItem::Stmt(s) => out.push_str(&format!("{s}\n")),
            TopItem::For(n, body) => {
                out.push_str(&format!("for (k in 1:{n}) {{\n"));
                render_body(body, &mut out);
                out.push_str("}\n");
            }
            TopItem::While(n, body) => {
                out.push_str(&format!("w = 0\nwhile (w < {n}) {{\n  w = w + 1\n"));
                render_body(body, &mut out);
                out.push_str("}\n");
            }
            TopItem::Nested(n, m, body) => {
                out.push_str(&format!("for (j in 1:{n}) {{\n  s = s + j\n"));
                out.push_str(&format!("  for (k in 1:{m}) {{\n"));
                render_body(body, &mut out);
                out.push_str("  }\n}\n");
            }
        }
    }
    out.push_str("print(sum(A) + sum(B) + s)\n");
    out
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
