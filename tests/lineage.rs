//! Lineage tracing (issue 24): the lineage of every corpus script's live variables is the
//! same under every fusion policy and backend; fused and unfused computations of a value get
//! equal items; unseeded `rand` records the seed it used; `lineage(X)` reads back; tracing
//! off creates nothing.

use lafuse::crates::runtime::lineage::{self, Lineage};
use lafuse::{Engine, EngineConfig, FusionBackend, FusionPolicy, ScriptArgs, SourceFile};
use std::collections::BTreeMap;

mod fused_at_once;
mod scripts;

fn traced(fusion: Option<FusionPolicy>, backend: FusionBackend) -> EngineConfig {
    EngineConfig {
        fusion,
        backend,
        lineage: true,
        ..fused_at_once::config()
    }
}

/// Every configuration a script's lineage must not depend on.
fn configurations() -> Vec<(String, EngineConfig)> {
    let mut backends = vec![FusionBackend::Reference];
    if cfg!(feature = "llvm") {
        backends.push(FusionBackend::Native);
    }
    let mut configs = vec![("none".to_string(), traced(None, FusionBackend::Reference))];
    for backend in backends {
        for policy in [
            FusionPolicy::Gen,
            FusionPolicy::FuseAll,
            FusionPolicy::FuseNoRedundancy,
        ] {
            configs.push((
                format!("{policy:?}/{backend:?}"),
                traced(Some(policy), backend),
            ));
        }
    }
    configs
}

/// Runs `text`; returns its printed output and the lineage logs of its live variables.
fn run(text: &str, args: &ScriptArgs, config: &EngineConfig) -> (String, BTreeMap<String, String>) {
    let source = SourceFile::new("test.dml", text);
    let mut out = Vec::new();
    let report = Engine::new(config.clone())
        .run(&source, args, &mut out)
        .unwrap_or_else(|e| panic!("{}", e.render(&source)));
    (String::from_utf8_lossy(&out).into_owned(), report.lineage)
}

/// Whether a log records something only the run decides: an unseeded `rand`'s or `sample`'s
/// seed, `time()`, or a file's modification time (a file the script, or a test beside it,
/// rewrites).
fn run_dependent(log: &str) -> bool {
    log.contains("\"dg(rand)\"")
        || log.contains("\"dg(sample)\"")
        || log.contains("\"dg(time)\"")
        || log.contains("\"file\"")
}

/// The invariant "lineage depends on neither the fusion policy nor the backend": every corpus
/// script's live variables have identical lineage logs unfused and under `gen`, `fa`, `fnr`
/// on each backend. Variables whose log differs between two runs of one configuration (they
/// record a drawn seed, a time or a file's modification time) are left out, and must be
/// such.
#[test]
fn lineage_of_corpus_is_independent_of_fusion_and_backend() {
    let configs = configurations();
    let mut compared = 0;
    for path in scripts::scripts_in("tests/corpus") {
        let text = std::fs::read_to_string(&path).unwrap();
        let args = scripts::script_args(&path);
        let (_, baseline) = run(&text, &args, &configs[0].1);
        let (_, again) = run(&text, &args, &configs[0].1);
        for (name, log) in &baseline {
            if again.get(name) != Some(log) {
                assert!(
                    run_dependent(log),
                    "{}: the lineage of {name} differs between two unfused runs:\n{log}",
                    path.display()
                );
            }
        }
        for (label, config) in &configs[1..] {
            let (_, logs) = run(&text, &args, config);
            assert_eq!(
                logs.keys().collect::<Vec<_>>(),
                baseline.keys().collect::<Vec<_>>(),
                "{}: live variables under {label}",
                path.display()
            );
            for (name, log) in &baseline {
                if again.get(name) != Some(log) {
                    continue;
                }
                assert_eq!(
                    &logs[name],
                    log,
                    "{}: lineage of {name} under {label} differs from unfused",
                    path.display()
                );
                compared += 1;
            }
        }
    }
    assert!(compared > 100, "only {compared} logs compared");
}

fn item_of(logs: &BTreeMap<String, String>, name: &str) -> Lineage {
    lineage::deserialize(&logs[name]).unwrap_or_else(|e| panic!("{name}: {e}"))
}

#[test]
fn fused_and_unfused_computations_get_equal_items() {
    // A Cell, a row aggregate and a tsmm-shaped product: fused under `fa`, unfused (with
    // `t(X) %*% X` on tsmm) under `none`.
    let script = "X = rand(rows=40, cols=30, seed=7)\n\
                  Y = rand(rows=40, cols=30, seed=8)\n\
                  s = sum(X * Y + 2)\n\
                  R = rowSums(exp(X) * Y)\n\
                  G = t(X) %*% X\n\
                  H = t(X) %*% Y\n\
                  print(s)\n";
    let args = ScriptArgs::default();
    let (_, unfused) = run(script, &args, &traced(None, FusionBackend::Reference));
    for policy in [FusionPolicy::FuseAll, FusionPolicy::Gen] {
        let (_, fused) = run(
            script,
            &args,
            &traced(Some(policy), FusionBackend::Reference),
        );
        for name in ["s", "R", "G", "H"] {
            assert!(
                item_of(&unfused, name) == item_of(&fused, name),
                "{name} under {policy:?}"
            );
        }
    }
    // The items are those of the hops: `t(X) %*% X` is a product of a transpose, whatever
    // instruction computed it.
    let g = item_of(&unfused, "G");
    assert_eq!(g.opcode(), "ba(+*)");
    assert_eq!(g.inputs()[0].opcode(), "r(t)");
    assert!(g.inputs()[0].inputs()[0] == g.inputs()[1]);
}

#[test]
fn a_lists_item_has_its_elements_items_as_inputs() {
    // A list's lineage is the items of its elements; an element taken out of it is an item
    // over the list's, and so reaches back to the element's own.
    let script = "X = rand(rows=6, cols=4, seed=5)\n\
                  L = list(X, 2)\n\
                  L = append(L, X * 3)\n\
                  Y = as.matrix(L[1]) * as.scalar(L[2])\n\
                  n = length(L)\n\
                  print(n)\n";
    let args = ScriptArgs::default();
    for policy in [None, Some(FusionPolicy::Gen)] {
        let (out, logs) = run(script, &args, &traced(policy, FusionBackend::Reference));
        assert_eq!(out, "3\n");
        let x = item_of(&logs, "X");
        let l = item_of(&logs, "L");
        assert_eq!(l.opcode(), "append(list)");
        let made = &l.inputs()[0];
        assert_eq!(made.opcode(), "list");
        assert!(made.inputs()[0] == x);
        assert!(l.inputs()[1].inputs()[0] == x);
        let y = item_of(&logs, "Y");
        assert_eq!(y.opcode(), "b(*)");
        let element = &y.inputs()[0];
        assert_eq!(element.opcode(), "cast(as.matrix)");
        assert_eq!(element.inputs()[0].opcode(), "rix(list)");
        assert!(element.inputs()[0].inputs()[0] == l);
    }
}

/// The seed literal an unseeded `rand`'s item records.
fn recorded_seed(item: &Lineage) -> i64 {
    let rand = item
        .topological()
        .into_iter()
        .find(|i| i.opcode() == "dg(rand)")
        .expect("a rand item");
    let seed = &rand.inputs()[5];
    seed.data()
        .trim_end_matches("·INT")
        .parse()
        .unwrap_or_else(|_| panic!("seed literal {:?}", seed.data()))
}

#[test]
fn unseeded_rand_records_the_seed_it_used() {
    let config = traced(None, FusionBackend::Reference);
    let args = ScriptArgs::default();
    let script = "X = rand(rows=5, cols=4)\nprint(toString(X))\n";
    let (out1, logs1) = run(script, &args, &config);
    let (out2, logs2) = run(script, &args, &config);
    let (seed1, seed2) = (
        recorded_seed(&item_of(&logs1, "X")),
        recorded_seed(&item_of(&logs2, "X")),
    );
    assert_ne!(seed1, seed2, "two unseeded rands drew the same seed");
    assert_ne!(out1, out2);
    // The recorded seed reproduces the value.
    let seeded = format!("X = rand(rows=5, cols=4, seed={seed1})\nprint(toString(X))\n");
    let (replayed, logs) = run(&seeded, &args, &config);
    assert_eq!(replayed, out1);
    assert!(item_of(&logs, "X") == item_of(&logs1, "X"));
}

#[test]
fn lineage_builtin_reads_back_as_the_items_of_x() {
    let script = "X = rand(rows=10, cols=10, seed=3)\n\
                  Y = (X + 1) %*% t(X)\n\
                  l = lineage(Y)\n\
                  print(l)\n";
    let (out, logs) = run(
        script,
        &ScriptArgs::default(),
        &traced(Some(FusionPolicy::Gen), FusionBackend::Reference),
    );
    let printed = lineage::deserialize(out.trim_end_matches('\n')).unwrap();
    assert!(printed == item_of(&logs, "Y"));
    assert_eq!(out.trim_end_matches('\n'), logs["Y"].trim_end_matches('\n'));
}

#[test]
fn lineage_builtin_without_tracing_is_an_error() {
    let source = SourceFile::new(
        "t.dml",
        "X = matrix(1, rows=2, cols=2)\nprint(lineage(X))\n",
    );
    let err = Engine::new(fused_at_once::config())
        .run(&source, &ScriptArgs::default(), &mut Vec::new())
        .unwrap_err();
    assert!(
        err.render(&source).contains("--lineage"),
        "{}",
        err.render(&source)
    );
}

#[test]
fn write_also_writes_the_lineage_log() {
    let dir = std::env::temp_dir().join(format!("lafuse_lineage_{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("x.csv");
    let script = format!(
        "X = rand(rows=3, cols=3, seed=1) * 2\nwrite(X, \"{}\", format=\"csv\")\n",
        file.display()
    );
    let (_, logs) = run(
        &script,
        &ScriptArgs::default(),
        &traced(None, FusionBackend::Reference),
    );
    let written = std::fs::read_to_string(dir.join("x.csv.lineage")).unwrap();
    assert_eq!(written, logs["X"]);
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn function_calls_and_loops_carry_lineage() {
    let script = "f = function(matrix[double] A, double c) return (matrix[double] B) {\n\
                    B = A * c\n\
                  }\n\
                  X = matrix(2, rows=2, cols=2)\n\
                  for (i in 1:2) {\n\
                    X = f(X, i)\n\
                  }\n";
    let (_, logs) = run(
        script,
        &ScriptArgs::default(),
        &traced(None, FusionBackend::Reference),
    );
    let x = item_of(&logs, "X");
    // Two multiplications, the second by the loop variable's value 2 (as a double: the
    // parameter's type).
    assert_eq!(x.opcode(), "b(*)");
    assert_eq!(x.inputs()[0].opcode(), "b(*)");
    assert_eq!(x.height(), 4, "{}", logs["X"]);
}

#[test]
fn tracing_off_creates_no_items() {
    let script = "X = rand(rows=50, cols=50, seed=1)\nprint(sum(X * X))\n";
    let source = SourceFile::new("t.dml", script);
    let engine = Engine::new(EngineConfig {
        collect_stats: true,
        ..fused_at_once::config()
    });
    let before = lineage::items_created_on_this_thread();
    let report = engine
        .run(&source, &ScriptArgs::default(), &mut Vec::new())
        .unwrap();
    assert_eq!(lineage::items_created_on_this_thread(), before);
    assert_eq!(report.stats.lineage_items, 0);
    assert!(report.lineage.is_empty());
    // And with tracing on, `--stats` counts them.
    let traced_report = Engine::new(EngineConfig {
        collect_stats: true,
        lineage: true,
        ..fused_at_once::config()
    })
    .run(&source, &ScriptArgs::default(), &mut Vec::new())
    .unwrap();
    assert!(traced_report.stats.lineage_items > 0);
    assert!(traced_report
        .stats
        .to_text()
        .contains("Lineage items created"));
}

#[test]
fn a_rewritten_file_is_a_different_item() {
    let dir = std::env::temp_dir().join(format!("lafuse_lineage_read_{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("a.csv");
    let script = format!(
        "X = read(\"{}\", format=\"csv\")\nprint(sum(X))\n",
        file.display()
    );
    let config = traced(None, FusionBackend::Reference);
    std::fs::write(&file, "1,1\n1,1\n").unwrap();
    let (_, first) = run(&script, &ScriptArgs::default(), &config);
    let (_, again) = run(&script, &ScriptArgs::default(), &config);
    assert_eq!(first["X"], again["X"], "an unchanged file is the same item");
    std::fs::write(&file, "10,1\n1,1\n").unwrap();
    let (_, rewritten) = run(&script, &ScriptArgs::default(), &config);
    assert_ne!(first["X"], rewritten["X"]);
    let x = item_of(&first, "X");
    let identity = x.inputs().last().unwrap();
    assert_eq!(identity.opcode(), "file");
    assert!(identity.data().contains("a.csv") && identity.data().contains("\"csv\""));
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn prepared_scripts_trace_when_the_engine_does() {
    let engine = Engine::new(traced(Some(FusionPolicy::Gen), FusionBackend::Reference));
    let source = SourceFile::new("p.dml", "Y = X * 2 + 1\nl = lineage(Y)\n");
    let prepared = engine
        .prepare(&source, &ScriptArgs::default(), &["X"], &["Y", "l"])
        .unwrap();
    let mut bindings = lafuse::Bindings::new();
    bindings.matrix("X", lafuse::Matrix::filled(2, 2, 1.0).unwrap());
    let outputs = prepared.execute(&bindings).unwrap();
    let log = match outputs.value("l").unwrap() {
        lafuse::Value::Str(s) => s.to_string(),
        other => panic!("lineage(Y) gave {other:?}"),
    };
    let item = lineage::deserialize(&log).unwrap();
    assert_eq!(item.opcode(), "b(+)");
    // The bound input, whose history lafuse cannot know, is named.
    let input = &item.inputs()[0].inputs()[0];
    assert_eq!((input.opcode(), input.data()), ("input", "X"));
}
