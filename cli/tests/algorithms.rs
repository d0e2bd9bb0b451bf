//! The end-to-end algorithms of the fusion paper (Table 2) in `examples/algorithms/`, run through
//! the `lafuse` binary at small sizes: each generator writes its data, then the algorithm runs
//! under every fusion policy (`none`, `fa`, `fnr`, `gen`). Every run must print the contract lines
//! (`time_ms`, `iterations`, `objective`, `check`) with `check PASS`, the fused runs must agree
//! with the unfused one on the iteration count and, within [`OBJECTIVE_RTOL`], on the objective,
//! and the cost-based policy must actually execute fused operators.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Relative tolerance on the objective across fusion policies. Fused operators sum in a
/// different order than the unfused kernels (vector accumulators, per-thread partials), so
/// results differ in the last bits, and iterative solvers carry such differences forward: over
/// 20 ALS-CG iterations of up to 20 CG steps each they grew to about 2e-8 relative on a dense
/// 10000x100 input. 1e-6 leaves room for that and still catches any real difference in what was
/// computed (a wrong operator changes the objective in the leading digits).
const OBJECTIVE_RTOL: f64 = 1e-6;

/// The configurations each algorithm runs under, unfused first (the reference for the
/// others): each fusion policy with every block fused at its first run (`--jit llvm`), so
/// that fused operators run at these small sizes, and then `gen` under the default JIT
/// (tiered: blocks start unfused and fuse once fusion pays for its compilation).
const CONFIGS: [(&str, &[&str]); 5] = [
    ("none", &["--fusion", "none"]),
    ("fa", &["--fusion", "fa", "--jit", "llvm"]),
    ("fnr", &["--fusion", "fnr", "--jit", "llvm"]),
    ("gen", &["--fusion", "gen", "--jit", "llvm"]),
    ("gen-default-jit", &["--fusion", "gen"]),
];

/// A scratch directory under the system temp dir, unique per test and process, removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        static N: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "lafuse-algorithms-{name}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("scratch directory");
        Scratch(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The repository root, where `examples/` is: the workspace root above this crate's `cli/`.
fn repository_root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("cli/ has a parent")
}

/// Runs `lafuse run SCRIPT [--fusion P] [--stats-json F] --nvargs ARGS`, from the repository
/// root (the scripts' paths are relative to it); returns stdout, failing on a non-zero exit.
fn lafuse_run(script: &str, options: &[&str], stats: Option<&Path>, args: &[String]) -> String {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_lafuse"));
    cmd.current_dir(repository_root()).arg("run").arg(script);
    cmd.args(options);
    if let Some(f) = stats {
        cmd.arg("--stats-json").arg(f);
    }
    cmd.arg("--nvargs").args(args);
    let out = cmd.output().expect("the lafuse binary runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{script} {options:?} {args:?} failed: {}\nstdout:\n{stdout}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// The contract lines of one algorithm run.
#[derive(Debug)]
struct Outcome {
    time_ms: f64,
    iterations: i64,
    objective: f64,
    check: String,
}

/// Parses the contract lines; each must occur exactly once.
fn parse(stdout: &str) -> Outcome {
    let field = |key: &str| -> String {
        let hits: Vec<&str> = stdout
            .lines()
            .filter_map(|l| l.strip_prefix(key).and_then(|r| r.strip_prefix(' ')))
            .collect();
        assert_eq!(hits.len(), 1, "want one `{key}` line in:\n{stdout}");
        hits[0].to_string()
    };
    let number = |key: &str| -> f64 {
        let v = field(key);
        v.trim()
            .parse()
            .unwrap_or_else(|_| panic!("`{key} {v}` is not a number in:\n{stdout}"))
    };
    Outcome {
        time_ms: number("time_ms"),
        iterations: field("iterations")
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("iterations is not an integer in:\n{stdout}")),
        objective: number("objective"),
        check: field("check"),
    }
}

fn fused_operators_executed(stats: &Path) -> u64 {
    let text = std::fs::read_to_string(stats).expect("stats JSON written");
    let v: serde_json::Value = serde_json::from_str(&text).expect("stats JSON parses");
    v["fused_operators_executed"]
        .as_u64()
        .unwrap_or_else(|| panic!("no fused_operators_executed in {text}"))
}

/// Generates the data of algorithm `id` with `gen_args`, runs it under every policy with
/// `alg_args` added, and checks the outcomes.
fn check_algorithm(id: &str, takes_y: bool, gen_args: &[&str], alg_args: &[&str]) {
    let dir = Scratch::new(id);
    let data = dir.0.join("data");
    let mut gen: Vec<String> = gen_args.iter().map(|s| s.to_string()).collect();
    gen.push(format!("out={}", data.display()));
    lafuse_run(
        &format!("examples/algorithms/gen_{id}.dml"),
        &[],
        None,
        &gen,
    );

    let mut args: Vec<String> = alg_args.iter().map(|s| s.to_string()).collect();
    args.push(format!("X={}", data.join("X").display()));
    if takes_y {
        args.push(format!("Y={}", data.join("y").display()));
    }
    let script = format!("examples/algorithms/{id}.dml");
    let mut outcomes = Vec::new();
    for (policy, options) in CONFIGS {
        let stats = dir.0.join(format!("stats-{policy}.json"));
        let stdout = lafuse_run(&script, options, Some(&stats), &args);
        let o = parse(&stdout);
        assert!(
            o.check.starts_with("PASS"),
            "{id} under {policy}: check {}\n{stdout}",
            o.check
        );
        assert!(o.time_ms >= 0.0 && o.iterations > 0, "{id} {policy}: {o:?}");
        assert!(o.objective.is_finite(), "{id} {policy}: {o:?}");
        let fused = fused_operators_executed(&stats);
        match policy {
            "none" => assert_eq!(fused, 0, "{id}: the unfused policy ran fused operators"),
            "gen" => assert!(fused > 0, "{id}: no fused operator executed under gen"),
            _ => {}
        }
        outcomes.push((policy, o));
    }
    let (_, reference) = &outcomes[0];
    for (policy, o) in &outcomes[1..] {
        assert_eq!(
            o.iterations, reference.iterations,
            "{id}: {policy} ran a different number of iterations than none"
        );
        let rel = (o.objective - reference.objective).abs() / reference.objective.abs().max(1e-300);
        assert!(
            rel <= OBJECTIVE_RTOL,
            "{id}: objective under {policy} {} vs none {} (relative {rel:e} > {OBJECTIVE_RTOL:e})",
            o.objective,
            reference.objective
        );
    }
}

#[test]
fn l2svm_dense() {
    check_algorithm("l2svm", true, &["rows=600", "cols=20", "sp=1.0"], &[]);
}

#[test]
fn l2svm_sparse() {
    check_algorithm("l2svm", true, &["rows=1000", "cols=40", "sp=0.1"], &[]);
}

#[test]
fn mlogreg_dense() {
    check_algorithm("mlogreg", true, &["rows=600", "cols=20", "sp=1.0"], &[]);
}

#[test]
fn glm_sparse() {
    check_algorithm("glm", true, &["rows=1000", "cols=40", "sp=0.1"], &[]);
}

#[test]
fn kmeans_dense() {
    check_algorithm("kmeans", false, &["rows=600", "cols=10", "sp=1.0"], &[]);
}

#[test]
fn kmeans_sparse() {
    check_algorithm("kmeans", false, &["rows=600", "cols=50", "sp=0.05"], &[]);
}

/// More than 256 rows and columns, so that the Outer template applies to the update rules.
#[test]
fn alscg_sparse() {
    check_algorithm(
        "alscg",
        false,
        &["rows=300", "cols=300", "sp=0.05"],
        &["maxi=10"],
    );
}

/// A small H1 and batch keep it fast; one epoch is still several mini-batches.
#[test]
fn autoencoder_dense() {
    check_algorithm(
        "autoencoder",
        false,
        &["rows=512", "cols=20", "sp=1.0"],
        &["H1=16", "batch=64"],
    );
}
