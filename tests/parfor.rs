//! `parfor` on threads (issue 25): every script ends with the same variables, bit for bit, and
//! the same lineage whether its parfor runs on four threads or sequentially; a body the
//! dependency check cannot prove independent runs sequentially with its reason in the stats;
//! workers share the reuse cache, so a value every iteration needs is computed once.

use lafuse::{
    Engine, EngineConfig, FusionBackend, FusionPolicy, Matrix, ReuseConfig, ReuseMode, ScriptArgs,
    SourceFile, Stats, Value,
};
use std::collections::BTreeMap;

mod fused_at_once;

/// Lineage on, so that the report carries every variable live at the end and its log.
fn config(threads: usize) -> EngineConfig {
    EngineConfig {
        fusion: Some(FusionPolicy::Gen),
        backend: FusionBackend::Reference,
        collect_stats: true,
        lineage: true,
        parfor_threads: Some(threads),
        ..fused_at_once::config()
    }
}

struct Ended {
    printed: String,
    variables: BTreeMap<String, Value>,
    lineage: BTreeMap<String, String>,
    stats: Stats,
}

fn run(text: &str, config: &EngineConfig) -> Result<Ended, String> {
    let source = SourceFile::new("test.dml", text);
    let mut out = Vec::new();
    let report = Engine::new(config.clone())
        .run(&source, &ScriptArgs::default(), &mut out)
        .map_err(|e| e.render(&source))?;
    Ok(Ended {
        printed: String::from_utf8_lossy(&out).into_owned(),
        variables: report.variables,
        lineage: report.lineage,
        stats: report.stats,
    })
}

fn same_bits(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Matrix(x), Value::Matrix(y)) => same_cells(x, y),
        (Value::Double(x), Value::Double(y)) => x.to_bits() == y.to_bits(),
        _ => format!("{a:?}") == format!("{b:?}"),
    }
}

fn same_cells(x: &Matrix, y: &Matrix) -> bool {
    x.shape() == y.shape()
        && x.nnz() == y.nnz()
        && (0..x.rows())
            .all(|i| (0..x.cols()).all(|j| x.get(i, j).to_bits() == y.get(i, j).to_bits()))
}

/// Runs `text` sequentially and on four threads; asserts identical variables, lineage and
/// output, and returns the parallel run's stats.
fn check_same(text: &str) -> Stats {
    let seq = run(text, &config(1)).expect("runs sequentially");
    let par = run(text, &config(4)).expect("runs in parallel");
    assert_eq!(seq.printed, par.printed, "{text}");
    assert_eq!(
        seq.variables.keys().collect::<Vec<_>>(),
        par.variables.keys().collect::<Vec<_>>(),
        "{text}"
    );
    for (name, v) in &seq.variables {
        assert!(
            same_bits(v, &par.variables[name]),
            "{name} differs in\n{text}"
        );
    }
    assert_eq!(seq.lineage, par.lineage, "lineage differs in\n{text}");
    assert_eq!(seq.stats.parfor_parallel, 0);
    par.stats
}

const ROWS: &str = "
X = rand(rows=37, cols=9, seed=11)
R = matrix(0, rows=37, cols=9)
parfor (i in 1:37) {
  v = X[i,] * i + 0.5
  R[i,] = v / (sum(v) + 1)
}
";

const COLUMNS_WITH_NAN_AND_UNCHANGED_CELLS: &str = "
X = rand(rows=8, cols=12, seed=5)
C = matrix(1, rows=8, cols=12)
C[3,4] = 0/0
parfor (j in 12:1) {
  c = X[,j]
  # Column 4 writes NaN everywhere (over the NaN too); columns 9 to 12 write the value
  # already there; column 1 writes negative zeros.
  if (j == 4) { c = c * (0/0) }
  if (j > 8) { c = matrix(1, rows=8, cols=1) }
  if (j == 1) { c = c * (-0.0) }
  C[,j] = c
}
";

const NESTED: &str = "
X = rand(rows=10, cols=6, seed=2, sparsity=0.3)
R = matrix(0, rows=10, cols=6)
parfor (i in 1:10) {
  for (j in 1:6) {
    x = as.scalar(X[i,j])
    R[i,j] = x * x - j
  }
}
";

const IN_A_FUNCTION: &str = "
f = function(matrix[double] X) return (matrix[double] R) {
  R = matrix(0, rows=nrow(X), cols=1)
  parfor (i in 1:nrow(X)) {
    R[i,1] = sum(X[i,]) * 2
  }
}
X = rand(rows=25, cols=4, seed=9)
Y = f(X)
";

#[test]
fn row_updates_match_sequential_execution_bit_for_bit() {
    let stats = check_same(ROWS);
    assert_eq!(stats.parfor_parallel, 1);
}

#[test]
fn column_updates_merge_nan_and_unchanged_values_as_written() {
    let stats = check_same(COLUMNS_WITH_NAN_AND_UNCHANGED_CELLS);
    assert_eq!(stats.parfor_parallel, 1);
}

#[test]
fn nested_loops_and_sparse_inputs_match_sequential_execution() {
    let stats = check_same(NESTED);
    assert_eq!(stats.parfor_parallel, 1);
}

#[test]
fn a_parfor_inside_a_function_runs_on_threads() {
    let stats = check_same(IN_A_FUNCTION);
    assert_eq!(stats.parfor_parallel, 1);
}

#[test]
fn a_body_carrying_values_between_iterations_falls_back_with_its_reason() {
    let text = "
s = 0
R = matrix(0, rows=6, cols=1)
parfor (i in 1:6) {
  s = s + i
  R[i,1] = s
}
print(s)
";
    let stats = check_same(text);
    assert_eq!(stats.parfor_parallel, 0);
    assert_eq!(stats.parfor_sequential.len(), 1);
    assert!(
        stats.parfor_sequential[0]
            .reason
            .contains("'s' is read before"),
        "{:?}",
        stats.parfor_sequential
    );
    let printing = check_same("parfor (i in 1:3) { print(i) }");
    assert!(printing.parfor_sequential[0].reason.contains("effect"));
}

#[test]
fn a_parfor_nested_in_a_parfor_runs_sequentially_inside_its_worker() {
    let text = "
R = matrix(0, rows=4, cols=5)
parfor (i in 1:4) {
  parfor (j in 1:5) { R[i,j] = i * 10 + j }
}
";
    // R is written keyed by the outer i: the outer loop runs on threads, each inner one
    // sequentially in its worker (no threads within threads).
    let stats = check_same(text);
    assert_eq!(stats.parfor_parallel, 1, "{:?}", stats.parfor_sequential);
    assert_eq!(stats.parfor_sequential.len(), 1);
    assert_eq!(stats.parfor_sequential[0].count, 4);
    assert!(stats.parfor_sequential[0].reason.contains("nested"));
}

#[test]
fn an_error_in_a_worker_is_an_error_not_a_panic() {
    let text = "
R = matrix(0, rows=4, cols=2)
parfor (i in 1:8) {
  R[i,] = matrix(i, rows=1, cols=2)
}
";
    let seq = run(text, &config(1))
        .err()
        .expect("out of bounds sequentially");
    let par = run(text, &config(4))
        .err()
        .expect("out of bounds in parallel");
    assert_eq!(seq, par);
}

/// Every iteration computes `t(X) %*% X` of the same X and its sum: under reuse, the workers
/// share one cache whose placeholders make the others wait for (or find) the one computation,
/// so the counts are those of sequential execution: one miss per distinct value, a hit for
/// every other iteration.
#[test]
fn workers_share_the_reuse_cache_and_compute_a_common_value_once() {
    let text = "
X = rand(rows=400, cols=60, seed=7)
R = matrix(0, rows=16, cols=1)
parfor (i in 1:16) {
  G = t(X) %*% X
  R[i,1] = sum(G) + i
}
print(sum(R))
";
    let with_reuse = |threads| EngineConfig {
        reuse: ReuseConfig {
            mode: ReuseMode::Full,
            delay: 1,
            ..ReuseConfig::default()
        },
        ..config(threads)
    };
    let seq = run(text, &with_reuse(1)).expect("runs");
    for _ in 0..5 {
        let par = run(text, &with_reuse(4)).expect("runs");
        assert_eq!(seq.printed, par.printed);
        assert_eq!(par.stats.parfor_parallel, 1);
        let (s, p) = (
            seq.stats.reuse.clone().unwrap(),
            par.stats.reuse.clone().unwrap(),
        );
        // t(X) %*% X and sum(G) miss once each, sum(R) once; the other 15 iterations hit both.
        assert_eq!(p.misses, 3, "{p:?}");
        assert_eq!(p.operation_hits, 30, "{p:?}");
        assert_eq!((s.misses, s.operation_hits), (p.misses, p.operation_hits));
    }
}
