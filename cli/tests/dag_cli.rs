//! `lafuse run|explain` on HOP DAGs in JSON with `--input NAME=FILE`, and scripts run with
//! bound inputs and returned outputs: the same numbers and fused operators as the script.

use std::path::{Path, PathBuf};
use std::process::Command;

mod command;
use command::{lafuse, ok};

const GEN: &str = "\
X = rand(rows=60, cols=7, min=-1, max=1, seed=1)
Y = rand(rows=60, cols=7, min=-1, max=1, sparsity=0.2, seed=2)
Z = rand(rows=60, cols=7, seed=3)
write(X, \"X.csv\", format=\"csv\")
write(Y, \"Y.bin\", format=\"binary\")
write(Z, \"Z.mtx\", format=\"mm\")
write(t(X), \"Xt.csv\", format=\"csv\")
";

const SCRIPT: &str = "\
X = read(\"X.csv\")
Y = read(\"Y.bin\")
Z = read(\"Z.mtx\")
s = sum(X * Y * Z)
R = t(X) %*% (Z[, 1] * (X %*% Y[1:7, 2]))
print(s)
";

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("lafuse-dag-cli-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("gen.dml"), GEN).unwrap();
    std::fs::write(dir.join("s.dml"), SCRIPT).unwrap();
    ok(lafuse(&dir, &["run", "gen.dml"]));
    dir
}

/// The last block of `s.dml` as `explain --format json` exports it (`hop_dag`).
fn export_dag(dir: &Path) -> PathBuf {
    let json = ok(lafuse(
        dir,
        &[
            "explain",
            "s.dml",
            "--format",
            "json",
            "--all-variables-live",
        ],
    ));
    let report: serde_json::Value = serde_json::from_str(&json).unwrap();
    let last = report["blocks"].as_array().unwrap().last().unwrap().clone();
    let path = dir.join("dag.json");
    std::fs::write(&path, last["hop_dag"].to_string()).unwrap();
    path
}

fn stat(stderr: &[u8], label: &str) -> String {
    String::from_utf8_lossy(stderr)
        .lines()
        .find(|l| l.starts_with(label))
        .unwrap_or_else(|| panic!("no '{label}' in --stats"))
        .to_string()
}

#[test]
fn a_dag_runs_on_input_files_like_the_script_it_came_from() {
    let dir = scratch("run");
    export_dag(&dir);
    // R returned, as the DAG returns it (else R, dead after the block, is not computed).
    // Every run here fused at its first run (`--jit llvm`): the default tiered JIT would run
    // a block this small unfused, and the fused operators and printed digits are compared.
    let script = lafuse(
        &dir,
        &[
            "run", "s.dml", "--output", "R=R0.csv", "--stats", "--jit", "llvm",
        ],
    );
    let printed = ok(Command::new(env!("CARGO_BIN_EXE_lafuse"))
        .args(["run", "s.dml", "--jit", "llvm"])
        .current_dir(&dir)
        .output()
        .unwrap());
    let dag = lafuse(
        &dir,
        &[
            "run", "dag.json", "--input", "X=X.csv", "--input", "Y=Y.bin", "--input", "Z=Z.mtx",
            "--output", "R=R.csv", "--stats", "--jit", "llvm",
        ],
    );
    let dag_stderr = dag.stderr.clone();
    let dag_out = ok(dag);
    // The DAG prints what the block printed, then its outputs not written to files.
    let s = printed.trim();
    assert_eq!(dag_out, format!("{s}\ns = {s}\n"));
    let fused = stat(&script.stderr, "Fused operators executed");
    assert!(!fused.contains("executed:\t0 "), "{fused}");
    assert_eq!(
        stat(&script.stderr, "Fused operators executed")
            .split('(')
            .next(),
        stat(&dag_stderr, "Fused operators executed")
            .split('(')
            .next()
    );
    let r = std::fs::read_to_string(dir.join("R.csv")).unwrap();
    assert_eq!(r.lines().count(), 7);
    // The script with its inputs bound instead of read, R returned: the same R.
    let bound = ok(lafuse(
        &dir,
        &[
            "run", "s.dml", "--input", "X=X.csv", "--input", "Y=Y.bin", "--input", "Z=Z.mtx",
            "--output", "R=R2.csv", "--output", "s=-", "--jit", "llvm",
        ],
    ));
    assert_eq!(bound, format!("{s}\ns = {s}\n"));
    assert_eq!(std::fs::read_to_string(dir.join("R2.csv")).unwrap(), r);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_dag_is_explained_with_the_sizes_of_its_input_files() {
    let dir = scratch("explain");
    let path = export_dag(&dir);
    // Leave the inputs' sizes open, as a DAG built for any data would.
    let mut dag: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    for hop in dag["hops"].as_array_mut().unwrap() {
        if hop["op"].get("tread").is_some() {
            hop["rows"] = serde_json::Value::Null;
            hop["cols"] = serde_json::Value::Null;
            hop["nnz"] = serde_json::Value::Null;
        }
    }
    std::fs::write(&path, dag.to_string()).unwrap();
    let open = ok(lafuse(&dir, &["explain", "dag.json", "--level", "cplan"]));
    assert!(
        open.starts_with("--- DAG, policy gen ---\n# fusion skipped for "),
        "{open}"
    );
    assert!(open.contains("matrix operations of unknown size"), "{open}");
    let sized = ok(lafuse(
        &dir,
        &[
            "explain", "dag.json", "--level", "cplan", "--input", "X=X.csv", "--input", "Y=Y.bin",
            "--input", "Z=Z.mtx",
        ],
    ));
    assert!(sized.contains("fused operators: 2"), "{sized}");
    assert!(!sized.contains("fusion skipped"), "{sized}");
    // Run with sizes open: each execution sizes the DAG by its bound inputs.
    let ran = ok(lafuse(
        &dir,
        &[
            "run", "dag.json", "--input", "X=X.csv", "--input", "Y=Y.bin", "--input", "Z=Z.mtx",
        ],
    ));
    assert!(ran.contains("R (7x1):"), "{ran}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn dag_input_mistakes_are_the_users_to_fix() {
    let dir = scratch("errors");
    export_dag(&dir);
    let missing = lafuse(&dir, &["run", "dag.json", "--input", "X=X.csv"]);
    assert!(!missing.status.success());
    let err = String::from_utf8_lossy(&missing.stderr);
    assert!(
        err.starts_with("error: the input 'Y' is not bound"),
        "{err}"
    );
    let malformed = lafuse(&dir, &["run", "dag.json", "--input", "X"]);
    let err = String::from_utf8_lossy(&malformed.stderr);
    assert!(
        err.contains("--input 'X' is not of the form NAME=FILE"),
        "{err}"
    );
    let shape = lafuse(
        &dir,
        &[
            "run", "dag.json", "--input", "X=Z.mtx", "--input", "Y=Y.bin", "--input", "Z=X.csv",
        ],
    );
    // Same shapes, swapped: runs. A transposed input does not.
    assert!(shape.status.success());
    let transposed = lafuse(
        &dir,
        &[
            "run", "dag.json", "--input", "X=Xt.csv", "--input", "Y=Y.bin", "--input", "Z=Z.mtx",
        ],
    );
    let err = String::from_utf8_lossy(&transposed.stderr);
    assert_eq!(
        err,
        "error: the DAG input 'X' is declared 60x7 but bound to a 7x60 matrix\n"
    );
    let script_input = lafuse(&dir, &["explain", "s.dml", "--input", "X=X.csv"]);
    let err = String::from_utf8_lossy(&script_input.stderr);
    assert!(err.contains("--input applies to DAGs"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}
