//! Recomputation from lineage (issue 24 item 4, LIMA's "reconstruct"): every value live at
//! the end of every corpus script and every algorithm of `examples/algorithms/`, recomputed
//! from its lineage log under the policy it ran with, equals the value the script computed:
//! unfused to the bit, under `gen` to the bit or, where fusion sums in another order, within
//! 1e-12 of the value's largest magnitude (each such value is reported). Unseeded `rand`,
//! `time()` and reads replay what the run recorded; what cannot be reproduced is a clear
//! error, never a panic.

use lafuse::{Engine, EngineConfig, Error, Fault, FusionBackend, FusionPolicy, ScriptArgs};
use lafuse::{Matrix, RunReport, SourceFile, Value};
use std::path::PathBuf;

mod scripts;

mod fused_at_once;
mod small_algorithms;

/// The relative difference allowed where a sum's order may change.
const RTOL: f64 = 1e-12;

fn config(fusion: Option<FusionPolicy>, lineage: bool) -> EngineConfig {
    EngineConfig {
        fusion,
        // The native backend where this build has it; the fused values are the same either
        // way (`tests/corpus.rs`), and the reference evaluator is slow.
        backend: FusionBackend::default(),
        lineage,
        ..fused_at_once::config()
    }
}

/// The fusion policies runs and recomputations are made under: unfused and cost-based.
const POLICIES: [(&str, Option<FusionPolicy>); 2] =
    [("none", None), ("gen", Some(FusionPolicy::Gen))];

/// How a recomputed value matched the original.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Match {
    /// Every double has the same bits (NaN matching NaN).
    Bits,
    /// Some double differs. `norm` is the largest difference relative to the value's largest
    /// magnitude (‖a − b‖∞ / ‖a‖∞, at most [`RTOL`]): the measure a reordered sum is bounded
    /// by, since its error scales with the magnitudes summed, not with a cell that cancels to
    /// near zero. `cell`, the largest difference relative to its own cell, is reported.
    Rounding { norm: f64, cell: f64 },
}

fn same_bits(a: f64, b: f64) -> bool {
    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
}

/// Compares the doubles of two values cell by cell (see [`Match`]). A differing cell that is
/// not finite on either side fails: no rounding explains it.
fn compare_doubles(a: &[f64], b: &[f64]) -> Result<Match, String> {
    let scale = a
        .iter()
        .chain(b)
        .filter(|v| v.is_finite())
        .fold(0.0f64, |m, v| m.max(v.abs()));
    let (mut norm, mut cell) = (None::<f64>, 0.0f64);
    for (k, (&x, &y)) in a.iter().zip(b).enumerate() {
        if same_bits(x, y) {
            continue;
        }
        let diff = (x - y).abs();
        let rel = diff / scale;
        if !x.is_finite() || !y.is_finite() || rel.is_nan() || rel > RTOL {
            return Err(format!(
                "cell {k}: {x:e} recomputed as {y:e} (difference {diff:e}, relative to the \
                 largest magnitude {scale:e}: {rel:e})"
            ));
        }
        norm = Some(norm.map_or(rel, |n| n.max(rel)));
        cell = cell.max(diff / x.abs().max(y.abs()));
    }
    Ok(norm.map_or(Match::Bits, |norm| Match::Rounding { norm, cell }))
}

fn cells(m: &Matrix) -> Vec<f64> {
    (0..m.rows())
        .flat_map(move |r| (0..m.cols()).map(move |c| m.get(r, c)))
        .collect()
}

/// Whether `recomputed` is `original`: same kind and shape, and the same doubles to the bit
/// or within [`RTOL`]; other scalars equal.
fn compare(original: &Value, recomputed: &Value) -> Result<Match, String> {
    match (original, recomputed) {
        (Value::Matrix(a), Value::Matrix(b)) => {
            if (a.rows(), a.cols()) != (b.rows(), b.cols()) {
                return Err(format!(
                    "a {}x{} matrix recomputed as {}x{}",
                    a.rows(),
                    a.cols(),
                    b.rows(),
                    b.cols()
                ));
            }
            compare_doubles(&cells(a), &cells(b))
        }
        (Value::Double(a), Value::Double(b)) => compare_doubles(&[*a], &[*b]),
        (a, b) if a == b => Ok(Match::Bits),
        (a, b) => Err(format!("{a:?} recomputed as {b:?}")),
    }
}

/// What the comparisons found, for the report the tests print.
#[derive(Default)]
struct Tally {
    bits: usize,
    rounding: Vec<String>,
    failures: Vec<String>,
    /// What the run decided that recomputed values replayed: `rand` (a seed), `time`, `read`.
    replayed: std::collections::BTreeSet<&'static str>,
}

impl Tally {
    fn record(&mut self, label: String, outcome: Result<Match, String>) {
        match outcome {
            Ok(Match::Bits) => self.bits += 1,
            Ok(Match::Rounding { norm, cell }) => self.rounding.push(format!(
                "{label}: relative {norm:e} (to the largest magnitude), {cell:e} (per cell)"
            )),
            Err(e) => self.failures.push(format!("{label}: {e}")),
        }
    }

    /// Prints what matched how, and fails on any mismatch, on fewer than `at_least` values
    /// or where no recomputed value replayed one of `replayed`.
    fn check(self, what: &str, at_least: usize, replayed: &[&str]) {
        for r in replayed {
            assert!(self.replayed.contains(r), "{what}: no value replayed a {r}");
        }
        eprintln!(
            "{what}: {} values recomputed to the bit, {} within {RTOL:e} (sums in another order)",
            self.bits,
            self.rounding.len()
        );
        for r in &self.rounding {
            eprintln!("  rounding: {r}");
        }
        assert!(
            self.failures.is_empty(),
            "{what}: {} values not recomputed:\n{}",
            self.failures.len(),
            self.failures.join("\n")
        );
        let total = self.bits + self.rounding.len();
        assert!(total >= at_least, "{what}: only {total} values compared");
    }
}

/// Runs `source` with lineage traced under each policy, and recomputes every variable live
/// at the end under the same policy, comparing it with its value: unfused, to the bit (the
/// same kernels in the same order); under `gen`, to the bit or within [`RTOL`] (the lineage
/// DAG is planned as one block, so its fused operators may sum in another order than the
/// script's). Values are not compared across policies: fused and unfused runs of a script
/// differ by rounding themselves, which an ill-conditioned value (a converged residual)
/// magnifies beyond any tolerance. Recomputations follow their run at once: a later run may
/// rewrite the files this one read.
///
/// `cancelling` names scalars that cancel to near zero (a converged Newton residual: O(1)
/// terms summing to 1e-16), whose rounding no relative measure of the result can bound; under
/// `gen` they are compared absolutely, within [`RTOL`] (unfused, to the bit like the rest).
fn run_and_recompute(
    label: &str,
    source: &SourceFile,
    args: &ScriptArgs,
    cancelling: &[&str],
    tally: &mut Tally,
) {
    for (policy_name, policy) in POLICIES {
        let label = format!("{label} ({policy_name})");
        let report = match Engine::new(config(policy, true)).run(source, args, &mut Vec::new()) {
            Ok(report) => report,
            Err(e) => {
                let failure = format!("{label}: the run failed: {}", e.render(source));
                tally.failures.push(failure);
                continue;
            }
        };
        assert_eq!(
            report.lineage.keys().collect::<Vec<_>>(),
            report.variables.keys().collect::<Vec<_>>(),
            "{label}: every live variable has a log"
        );
        let engine = Engine::new(config(policy, false));
        for (name, log) in &report.lineage {
            let outcome = engine
                .recompute(log)
                .map_err(|e| format!("{e}\n{log}"))
                .and_then(|value| compare(&report.variables[name], &value));
            let outcome = match outcome {
                Ok(Match::Rounding { norm, .. }) if policy.is_none() => Err(format!(
                    "unfused, yet not the same bits (relative {norm:e})"
                )),
                Err(_) if policy.is_some() && cancelling.contains(&name.as_str()) => {
                    cancelled(&report.variables[name], &engine.recompute(log))
                }
                other => other,
            };
            if outcome.is_ok() {
                for (marker, what) in [
                    ("\"dg(rand)\"", "rand"),
                    ("\"dg(time)\"", "time"),
                    ("(C) \"file\"", "read"),
                ] {
                    if log.contains(marker) {
                        tally.replayed.insert(what);
                    }
                }
            }
            tally.record(format!("{label} {name}"), outcome);
        }
    }
}

/// A cancelling scalar recomputed within [`RTOL`] absolutely (see [`run_and_recompute`]).
fn cancelled(original: &Value, recomputed: &Result<Value, Error>) -> Result<Match, String> {
    match (original, recomputed) {
        (Value::Double(a), Ok(Value::Double(b))) if (a - b).abs() <= RTOL => Ok(Match::Rounding {
            norm: (a - b).abs(),
            cell: (a - b).abs() / a.abs().max(b.abs()),
        }),
        (a, b) => Err(format!(
            "{a:?} recomputed as {b:?}, beyond {RTOL:e} absolutely"
        )),
    }
}

fn recompute_engines() -> Vec<Engine> {
    POLICIES
        .iter()
        .map(|&(_, policy)| Engine::new(config(policy, false)))
        .collect()
}

/// Every corpus script, run unfused and under `gen`: each live variable recomputes under the
/// same policy to its value. `io_read` and `io_roundtrip` read files (the second files it
/// wrote itself), `rand_properties` draws unseeded, `time_builtin` records `time()`.
#[test]
fn corpus_values_recompute_from_their_lineage() {
    let mut tally = Tally::default();
    for path in scripts::scripts_in("tests/corpus") {
        let text = std::fs::read_to_string(&path).unwrap();
        let source = SourceFile::new(path.display().to_string(), text);
        let args = scripts::script_args(&path);
        let label = path.file_stem().unwrap().to_string_lossy().into_owned();
        run_and_recompute(&label, &source, &args, &[], &mut tally);
    }
    tally.check("corpus", 500, &["rand", "time", "read"]);
}

/// The algorithms at small sizes (their generators' and their own arguments), each reading
/// the data its generator wrote: every live variable, the models and the `time()` stamps
/// included, recomputes to its value (unfused and under `gen`, as in the corpus).
#[test]
fn algorithm_values_recompute_from_their_lineage() {
    let scratch = std::env::temp_dir().join(format!("lafuse-recompute-alg-{}", std::process::id()));
    let mut tally = Tally::default();
    for (k, alg) in small_algorithms::ALGORITHMS.iter().enumerate() {
        let (source, args) = alg.generate(&scratch.join(format!("{}{k}", alg.id)));
        let label = format!("{} {}", alg.id, alg.gen_args.join(" "));
        run_and_recompute(&label, &source, &args, alg.cancelling, &mut tally);
    }
    std::fs::remove_dir_all(&scratch).ok();
    tally.check("algorithms", 100, &["rand", "time", "read"]);
}

fn traced_run(script: &str) -> RunReport {
    let source = SourceFile::new("t.dml", script);
    Engine::new(config(Some(FusionPolicy::Gen), true))
        .run(&source, &ScriptArgs::default(), &mut Vec::new())
        .unwrap_or_else(|e| panic!("{}", e.render(&source)))
}

/// An unseeded `rand` is recomputed from the seed it recorded, and `time()` as the value it
/// returned: two runs draw differently, and each run's values come back to the bit.
#[test]
fn unseeded_rand_and_time_replay_what_the_run_recorded() {
    let script = "X = rand(rows=30, cols=8, min=-1, max=1)\n\
                  G = t(X) %*% X\n\
                  N = rand(rows=5, cols=5, pdf=\"normal\")\n\
                  t0 = time()\n\
                  s = sum(G) + t0\n";
    let (first, second) = (traced_run(script), traced_run(script));
    assert!(
        compare(&first.variables["X"], &second.variables["X"]).is_err(),
        "two unseeded rands drew the same matrix"
    );
    for report in [&first, &second] {
        for engine in recompute_engines() {
            for name in ["X", "G", "N", "t0", "s"] {
                let value = engine.recompute(&report.lineage[name]).unwrap();
                let matched = compare(&report.variables[name], &value);
                assert!(matched.is_ok(), "{name}: {matched:?}");
                if name != "G" && name != "s" {
                    assert_eq!(matched, Ok(Match::Bits), "{name}");
                }
            }
        }
    }
}

/// A deduplicated log (dedup items over loop patches, LIMA 3.2) recomputes as the expanded one:
/// a loop with a branch and an unseeded `rand` in its body, unfused, comes back to the bit.
#[test]
fn deduplicated_logs_recompute_their_values() {
    let script = "A = matrix(1, rows=4, cols=3)\ns = 0.0\n\
                  for (k in 1:6) {\n  R = rand(rows=4, cols=3)\n  \
                  if (k %% 2 == 0) { A = A * 0.5 + R } else { s = s + sum(A * R) }\n}\n";
    let source = SourceFile::new("t.dml", script);
    let report = Engine::new(EngineConfig {
        lineage_dedup: true,
        ..config(None, true)
    })
    .run(&source, &ScriptArgs::default(), &mut Vec::new())
    .unwrap_or_else(|e| panic!("{}", e.render(&source)));
    assert!(report.lineage["A"].contains("(D) \"dedup\""));
    let engine = Engine::new(config(None, false));
    for name in ["A", "s", "R"] {
        let value = engine.recompute(&report.lineage[name]).unwrap();
        assert_eq!(
            compare(&report.variables[name], &value),
            Ok(Match::Bits),
            "{name}"
        );
    }
}

struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let dir =
            std::env::temp_dir().join(format!("lafuse-recompute-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        std::fs::remove_dir_all(&self.0).ok();
    }
}

/// A value read from a file recomputes while the file is unchanged; once it is rewritten or
/// gone, recomputing is an error naming the file (the value cannot be reproduced).
#[test]
fn reads_recompute_only_from_the_unchanged_file() {
    let scratch = Scratch::new("read");
    let file = scratch.0.join("a.csv");
    std::fs::write(&file, "1,2\n3,4\n").unwrap();
    let report = traced_run(&format!(
        "A = read(\"{}\", format=\"csv\")\nB = A %*% A + 1\n",
        file.display()
    ));
    let engine = Engine::new(config(Some(FusionPolicy::Gen), false));
    let b = engine.recompute(&report.lineage["B"]).unwrap();
    assert_eq!(compare(&report.variables["B"], &b), Ok(Match::Bits));
    let expected = Matrix::from_dense_values(2, 2, vec![8.0, 11.0, 16.0, 23.0]).unwrap();
    assert_eq!(
        compare(&Value::Matrix(expected.into()), &b),
        Ok(Match::Bits)
    );

    std::fs::write(&file, "1,2\n3,5\n").unwrap();
    let err = engine.recompute(&report.lineage["B"]).unwrap_err();
    let message = err.to_string();
    assert!(
        message.contains(&file.display().to_string()) && message.contains("cannot be reproduced"),
        "{message}"
    );
    assert_eq!(err.fault(), Fault::User);
    std::fs::remove_file(&file).unwrap();
    let message = engine
        .recompute(&report.lineage["A"])
        .unwrap_err()
        .to_string();
    assert!(message.contains("is missing"), "{message}");
}

/// Items shared in the log are shared hops: `X * X + X` reads one `rand`.
#[test]
fn shared_items_become_shared_hops() {
    let report = traced_run("X = rand(rows=3, cols=3, seed=4)\nY = X * X + X\n");
    let dag = lafuse::recompute_dag(&report.lineage["Y"]).unwrap();
    let rands = dag
        .hops
        .iter()
        .filter(|h| h.op.display_name() == "dg(rand)")
        .count();
    assert_eq!(rands, 1, "{}", report.lineage["Y"]);
    assert_eq!(dag.outputs()[0].0, lafuse::RECOMPUTE_RESULT);
}

fn recompute_error(log: &str) -> Error {
    Engine::new(config(None, false))
        .recompute(log)
        .expect_err("a bad log recomputed")
}

/// What cannot be recomputed, and malformed logs, are errors that name the item, never panics.
#[test]
fn unrecomputable_and_malformed_logs_are_errors_naming_the_item() {
    // A prepared script's input: its history is not in the lineage.
    let engine = Engine::new(config(None, true));
    let source = SourceFile::new("p.dml", "Y = X * 2\nl = lineage(Y)\n");
    let prepared = engine
        .prepare(&source, &ScriptArgs::default(), &["X"], &["l"])
        .unwrap();
    let mut bindings = lafuse::Bindings::new();
    bindings.matrix("X", Matrix::filled(2, 2, 1.0).unwrap());
    let log = match prepared.execute(&bindings).unwrap().value("l").unwrap() {
        Value::Str(s) => s.to_string(),
        other => panic!("{other:?}"),
    };
    let err = recompute_error(&log);
    assert_eq!(
        err.to_string(),
        "recompute: variable 'X' was bound from outside the script; its value is not in the \
         lineage (run the script that made it with --lineage and recompute from that log)"
    );
    assert_eq!(err.fault(), Fault::User);

    let lit = "(1) (L) \"\" \"2·INT\"\n";
    let cases: &[(String, &str)] = &[
        (String::new(), "the log is empty"),
        ("(1) (X) \"\" \"\"\n".into(), "lineage log line 1: expected the kind"),
        (format!("{lit}(2) (I) \"b(+)\" \"{{\\\"b\\\":\\\"nope\\\"}}\" (1) (1)\n"), "item (2) \"b(+)\": its data is not a hop's op kind"),
        (format!("{lit}(2) (I) \"b(+)\" \"{{\\\"b\\\":\\\"+\\\"}}\" (1)\n"), "item (2) \"b(+)\""),
        (format!("{lit}(2) (I) \"u(exp)\" \"{{\\\"u\\\":\\\"exp\\\"}}\" (1) (1) (1)\n"), "item (2) \"u(exp)\""),
        ("(1) (L) \"\" \"two·INT\"\n".into(), "item (1) \"\": the literal 'two·INT'"),
        (format!("{lit}(2) (P) \"IN\" \"0\"\n(3) (I) \"b(+)\" \"{{\\\"b\\\":\\\"+\\\"}}\" (1) (2)\n"), "item (2) \"IN\": a placeholder"),
        ("(1) (C) \"seq\" \"1:3\"\n".into(), "item (1) \"seq\": a creation item"),
        (format!("{lit}(2) (I) \"print\" \"\\\"print\\\"\" (1)\n"), "item (2) \"print\": it is not an operation"),
        (format!("{lit}(2) (I) \"dg(time)\" \"{{\\\"dg\\\":\\\"time\\\"}}\"\n"), "item (2) \"dg(time)\": time() without"),
        (format!("{lit}(2) (I) \"PRead()\" \"{{\\\"pread\\\":{{\\\"params\\\":[]}}}}\" (1)\n"), "item (2) \"PRead()\": a read whose last input"),
        (format!("{lit}(2) (C) \"file\" \"{{}}\"\n(3) (I) \"b(+)\" \"{{\\\"b\\\":\\\"+\\\"}}\" (1) (2)\n"), "item (2) \"file\": a creation item"),
    ];
    for (log, expected) in cases {
        let err = recompute_error(log);
        let message = err.to_string();
        assert!(message.starts_with("recompute: "), "{message}");
        assert!(
            message.contains(expected),
            "{log}\ngave: {message}\nexpected: {expected}"
        );
        assert_eq!(err.fault(), Fault::User, "{message}");
    }

    // A dedup item whose patch (`IN0 + 1`) needs an input the item does not give.
    let dedup = format!(
        "{lit}(2) (P) \"IN\" \"0\"\n(3) (I) \"b(+)\" \"{{\\\"b\\\":\\\"+\\\"}}\" (2) (1)\n\
         (4) (D) \"dedup\" \"x\" (3)\n"
    );
    let err = recompute_error(&dedup);
    assert_eq!(
        err.to_string(),
        "recompute: lineage log item (4) is a dedup item whose patch needs more inputs than it \
         has; the log is damaged"
    );
    assert_eq!(err.fault(), Fault::User);
}

/// A log of a long chain (here 100000 operations, as a long loop leaves) becomes a DAG on a
/// small stack: nothing recurses over the items.
#[test]
fn long_logs_need_no_deep_stack() {
    let mut log = String::from("(1) (L) \"\" \"1.0·DOUBLE\"\n(2) (L) \"\" \"2·INT\"\n");
    log +=
        "(3) (L) \"\" \"3·INT\"\n(4) (I) \"dg(fill)\" \"{\\\"dg\\\":\\\"fill\\\"}\" (1) (2) (3)\n";
    let n = 100_000;
    for k in 5..5 + n {
        log += &format!(
            "({k}) (I) \"b(+)\" \"{{\\\"b\\\":\\\"+\\\"}}\" ({}) (1)\n",
            k - 1
        );
    }
    let dag = std::thread::Builder::new()
        .stack_size(512 << 10)
        .spawn(move || lafuse::recompute_dag(&log).map(|dag| dag.hops.len()))
        .unwrap()
        .join()
        .unwrap()
        .unwrap();
    // The literals, the fill, the additions and the output.
    assert_eq!(dag, 4 + n + 1);
}

/// `lineage(X)`'s value is X's log: recomputing it traces, whatever the engine's
/// configuration, and gives the same log where nothing on the way is rewritten.
#[test]
fn a_lineage_value_recomputes_as_the_log_it_was() {
    let report = traced_run("X = rand(rows=4, cols=4)\nY = X %*% X + 1\nl = lineage(Y)\n");
    let Value::Str(original) = &report.variables["l"] else {
        panic!("lineage(Y) is a string");
    };
    for engine in recompute_engines() {
        match engine.recompute(&report.lineage["l"]).unwrap() {
            Value::Str(recomputed) => assert_eq!(recomputed, *original),
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(original.as_ref(), report.lineage["Y"].as_str());
}
