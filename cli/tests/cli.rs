//! The `lafuse` binary as a process: how it behaves towards the shell around it.

use std::process::Command;

/// A reader that stops early (`lafuse run s.dml | head -1`) stops lafuse quietly, by SIGPIPE
/// as for other Unix filters, instead of an error message about the script's `print`.
#[cfg(unix)]
#[test]
fn a_closed_pipe_stops_a_run_quietly() {
    use std::io::{BufRead, BufReader};
    use std::os::unix::process::ExitStatusExt;
    use std::process::Stdio;
    let dir = std::env::temp_dir().join(format!("lafuse-pipe-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let script = dir.join("many.dml");
    std::fs::write(
        &script,
        "for (i in 1:200000) {\n  print(\"line \" + i)\n}\n",
    )
    .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_lafuse"))
        .arg("run")
        .arg(&script)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    assert_eq!(first.trim(), "line 1");
    let out = child.wait_with_output().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(out.status.signal(), Some(libc::SIGPIPE), "{:?}", out.status);
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Runs `lafuse ARGS...` in a scratch directory holding `s.dml` (`print($n + 1)`).
fn lafuse_in_scratch(name: &str, args: &[&str]) -> std::process::Output {
    let dir = std::env::temp_dir().join(format!("lafuse-cli-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("s.dml"), "print($n + 1)\n").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_lafuse"))
        .args(args)
        .current_dir(&dir)
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    out
}

/// `--nvargs` takes every `NAME=VALUE` after it; the script path after the pairs is still the
/// script (it used to be taken as one more pair, and the run refused for want of a script).
#[test]
fn a_script_after_the_pairs_of_nvargs_is_the_script() {
    let out = lafuse_in_scratch("nvargs-order", &["run", "--nvargs", "n=3", "m=4", "s.dml"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "4\n");
}

/// SystemDS's `-nvargs` and `-stats` work, with a note on lafuse's spelling.
#[test]
fn systemds_spellings_are_taken_with_a_note() {
    let out = lafuse_in_scratch("nvargs-dash", &["run", "s.dml", "-stats", "-nvargs", "n=3"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("4\n"));
    assert!(
        stderr.contains("note: `-nvargs` is SystemDS's spelling"),
        "{stderr}"
    );
}

/// An error outside a script (a script file that does not exist) has the headline script
/// errors have.
#[test]
fn usage_errors_have_the_error_headline() {
    let out = lafuse_in_scratch("usage", &["run", "missing.dml"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.starts_with("error: cannot read the script 'missing.dml'"),
        "{stderr}"
    );
}

/// `run --lineage`: `lineage(X)` prints X's log, `write` writes `f.lineage` beside the file,
/// and `--stats`/`--stats-json` count the items; without the flag `lineage(X)` is an error
/// that names it.
#[test]
fn run_with_lineage_traces_and_reports() {
    let dir = std::env::temp_dir().join(format!("lafuse-cli-lineage-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("l.dml"),
        "X = rand(rows=3, cols=3, seed=4) + 1\nprint(lineage(X))\nwrite(X, \"x.csv\", format=\"csv\")\n",
    )
    .unwrap();
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_lafuse"))
            .args(args)
            .current_dir(&dir)
            .output()
            .unwrap()
    };
    let out = run(&[
        "run",
        "l.dml",
        "--lineage",
        "--stats",
        "--stats-json",
        "s.json",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stderr}");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(stdout.contains("\"dg(rand)\""), "{stdout}");
    let written = std::fs::read_to_string(dir.join("x.csv.lineage")).unwrap();
    assert_eq!(stdout.trim_end(), written.trim_end());
    assert!(stderr.contains("Lineage items created"), "{stderr}");
    let json = std::fs::read_to_string(dir.join("s.json")).unwrap();
    assert!(json.contains("\"lineage_items\""), "{json}");

    let untraced = run(&["run", "l.dml"]);
    let stderr = String::from_utf8_lossy(&untraced.stderr).into_owned();
    assert!(!untraced.status.success());
    assert!(stderr.contains("--lineage"), "{stderr}");
    // A script that calls lineage(X) can be explained and costed with tracing on.
    for command in ["explain", "cost"] {
        let traced = run(&[command, "l.dml", "--lineage"]);
        let stderr = String::from_utf8_lossy(&traced.stderr).into_owned();
        assert!(traced.status.success(), "{command}: {stderr}");
        assert!(
            !run(&[command, "l.dml"]).status.success(),
            "{command} without --lineage"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--builtin-path DIR` (or `LAFUSE_BUILTIN_PATH`) loads a built-in a script calls from DIR, as
/// SystemDS does from its `scripts/builtin`; without it the call is an unsupported function.
#[test]
fn builtins_load_from_the_builtin_path_flag_or_environment() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let script = root.join("tests/builtin_path/calls.dml");
    let dir = root.join("tests/builtin_path/builtin");
    let run = |flag: bool, env: bool| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_lafuse"));
        cmd.arg("run")
            .arg(&script)
            .env_remove("LAFUSE_BUILTIN_PATH");
        if flag {
            cmd.arg("--builtin-path").arg(&dir);
        }
        if env {
            cmd.env("LAFUSE_BUILTIN_PATH", &dir);
        }
        cmd.output().unwrap()
    };
    let by_flag = run(true, false);
    assert!(by_flag.status.success(), "{by_flag:?}");
    let by_env = run(false, true);
    assert!(by_env.status.success(), "{by_env:?}");
    assert_eq!(by_flag.stdout, by_env.stdout);
    assert_eq!(String::from_utf8_lossy(&by_flag.stdout).lines().count(), 3);
    let without = run(false, false);
    assert!(!without.status.success());
    let err = String::from_utf8_lossy(&without.stderr);
    assert!(err.contains("unknown function 'scaleTwice'"), "{err}");
    // Run from a directory with `scripts/builtin` (a SystemDS checkout), the built-ins load
    // from there, as SystemDS loads them.
    let checkout = std::env::temp_dir().join(format!("lafuse-cli-checkout-{}", std::process::id()));
    std::fs::create_dir_all(checkout.join("scripts/builtin")).unwrap();
    for f in ["scaleTwice.dml", "addOne.dml"] {
        std::fs::copy(dir.join(f), checkout.join("scripts/builtin").join(f)).unwrap();
    }
    let in_checkout = Command::new(env!("CARGO_BIN_EXE_lafuse"))
        .arg("run")
        .arg(&script)
        .env_remove("LAFUSE_BUILTIN_PATH")
        .current_dir(&checkout)
        .output()
        .unwrap();
    std::fs::remove_dir_all(&checkout).ok();
    assert_eq!(in_checkout.stdout, by_flag.stdout, "{in_checkout:?}");
}

/// `--device gpu` runs everywhere: without a GPU it says why once, on stderr, and prints what
/// the CPU prints.
#[test]
fn a_gpu_placement_without_a_gpu_runs_on_the_cpu_and_says_why() {
    let cpu = lafuse_in_scratch("device-cpu", &["run", "s.dml", "--nvargs", "n=41"]);
    let gpu = lafuse_in_scratch(
        "device-gpu",
        &["run", "s.dml", "--device", "gpu", "--nvargs", "n=41"],
    );
    assert!(
        gpu.status.success(),
        "{}",
        String::from_utf8_lossy(&gpu.stderr)
    );
    assert_eq!(gpu.stdout, cpu.stdout);
    let err = String::from_utf8_lossy(&gpu.stderr);
    if lafuse::gpu::available().is_err() {
        assert_eq!(err.matches("operators run on the CPU").count(), 1, "{err}");
    }
    let bad = lafuse_in_scratch("device-bad", &["run", "s.dml", "--device", "tpu"]);
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("possible values: cpu, gpu, auto"));
}

/// `run --jit cranelift` and `run --jit tiered` print what `run --jit llvm` prints (a fused
/// sum with `exp`, and Row operators over dense and sparse inputs, to the last digit; a build
/// without the `cranelift` feature runs those hops unfused), and `--stats-json` under `tiered`
/// says what each tier did.
#[test]
fn runs_under_either_jit_print_the_same() {
    let script = "X = rand(rows=500, cols=40, seed=1)\nY = rand(rows=500, cols=40, seed=2)\n\
                  print(toString(sum(X * Y * exp(X)), decimal=17))\n\
                  S = rand(rows=500, cols=40, sparsity=0.1, seed=3)\n\
                  v = rand(rows=40, cols=1, seed=4)\nw = rand(rows=500, cols=1, seed=5)\n\
                  print(toString(t(X) %*% (w * (X %*% v)), decimal=17))\n\
                  print(toString(sum(rowSums(X * Y) / rowMaxs(X)), decimal=17))\n\
                  print(toString(colSums(X / rowSums(X)), decimal=17))\n\
                  print(toString(t(S) %*% (w * (S %*% v)), decimal=17))\n\
                  print(toString(sum(rowSums(S * Y) / rowMaxs(S + 1)), decimal=17))\n\
                  print(toString(colSums(S / (rowSums(S) + 1)), decimal=17))\n";
    let dir = std::env::temp_dir().join(format!("lafuse-cli-jit-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("j.dml"), script).unwrap();
    let run = |jit: &str| {
        Command::new(env!("CARGO_BIN_EXE_lafuse"))
            .args(["run", "j.dml", "--jit", jit, "--tier-threshold", "0"])
            // Every block fused at once: no block starts on the unfused kernels.
            .args(["--tier-compile-ms", "0"])
            .args(["--stats-json", &format!("{jit}.json")])
            .current_dir(&dir)
            .output()
            .unwrap()
    };
    let (llvm, cranelift, tiered) = (run("llvm"), run("cranelift"), run("tiered"));
    let json = |jit: &str| -> serde_json::Value {
        serde_json::from_slice(&std::fs::read(dir.join(format!("{jit}.json"))).unwrap()).unwrap()
    };
    let (llvm_stats, tiered_stats) = (json("llvm"), json("tiered"));
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        tiered.status.success(),
        "{}",
        String::from_utf8_lossy(&tiered.stderr)
    );
    assert_eq!(tiered.stdout, llvm.stdout);
    assert!(llvm_stats["tiering"].is_null(), "{llvm_stats}");
    if cfg!(feature = "cranelift") {
        // Each operator's first call runs on Cranelift; later ones on whichever tier is
        // ready.
        let calls = &tiered_stats["tiering"]["cranelift_calls"];
        assert!(calls.as_u64().is_some_and(|c| c >= 1), "{tiered_stats}");
    }
    assert!(
        llvm.status.success(),
        "{}",
        String::from_utf8_lossy(&llvm.stderr)
    );
    assert!(
        cranelift.status.success(),
        "{}",
        String::from_utf8_lossy(&cranelift.stderr)
    );
    assert_eq!(cranelift.stdout, llvm.stdout);
}
