//! `lafuse bench` end to end at the tiny scale: the reports are written and well formed, an
//! unusable peer is reported as skipped (not an error), and missing scripts are failed
//! measurements with a clear reason.

use std::path::{Path, PathBuf};
use std::process::Command;

fn out_dir(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("bench_cli-{name}"));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn bench(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_lafuse"))
        .arg("bench")
        .args(args)
        .output()
        .expect("the lafuse binary runs")
}

fn json(path: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(path).expect("results.json exists");
    serde_json::from_str(&text).expect("results.json parses")
}

#[test]
fn micro_quick_tiny_writes_well_formed_reports() {
    let dir = out_dir("micro");
    let out = bench(&[
        "--suite",
        "micro",
        "--quick",
        "--scale",
        "tiny",
        "--filter",
        "sum_xyz",
        "--reps",
        "1",
        // Fused at the first run: the default tiered JIT runs inputs this small unfused, and
        // the figures of gen's fused operators are checked below.
        "--jit",
        "llvm",
        "--out",
        dir.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "bench failed: {stderr}");

    let report = std::fs::read_to_string(dir.join("report.md")).expect("report.md exists");
    assert!(report.starts_with("# lafuse bench report"));
    assert!(report.contains("## Machine") && report.contains("GB/s"));
    assert!(report.contains("sum(X*Y*Z)"), "{report}");

    let doc = json(&dir.join("results.json"));
    assert!(doc["machine"]["read_bandwidth_gbs"].as_f64().unwrap() > 0.0);
    let ms = doc["measurements"].as_array().unwrap();
    // Tiny: 2 row counts x (dense + 1 sparsity) x (none, gen).
    assert_eq!(ms.len(), 8, "{ms:?}");
    for m in ms {
        assert_eq!(m["case"], "sum_xyz");
        assert_eq!(m["status"], "ok", "{m}");
        let median = m["median_ms"].as_f64().unwrap();
        assert!(median > 0.0 && median.is_finite());
        assert_eq!(m["times_ms"].as_array().unwrap().len(), 1);
        assert!(m["bandwidth_fraction"].as_f64().unwrap() > 0.0);
        assert!(m["result"].as_f64().is_some());
        if m["config"] == "gen" {
            assert!(m["figures"]["fused_operators_executed"].as_f64().unwrap() >= 1.0);
            assert!(m["ratio_to_unfused"].as_f64().unwrap() > 0.0);
        } else {
            assert_eq!(m["figures"]["fused_operators_executed"].as_f64(), Some(0.0));
        }
    }

    let csv = std::fs::read_to_string(dir.join("results.csv")).expect("results.csv exists");
    let mut lines = csv.lines();
    assert!(lines
        .next()
        .unwrap()
        .starts_with("suite,case,variant,system,config,status"));
    assert_eq!(lines.filter(|l| l.starts_with("micro,sum_xyz,")).count(), 8);

    let svgs: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "svg"))
        .collect();
    assert!(!svgs.is_empty(), "no SVG written");
    for svg in svgs {
        let text = std::fs::read_to_string(&svg).unwrap();
        assert!(text.trim_start().starts_with("<svg"), "{}", svg.display());
        assert!(text.trim_end().ends_with("</svg>"), "{}", svg.display());
    }
    // The scratch folder (generated data, statistics files) is removed.
    assert!(!dir.join("scratch").exists());
}

#[test]
fn an_unusable_python_is_a_skipped_peer() {
    let dir = out_dir("python");
    let out = bench(&[
        "--suite",
        "micro",
        "--scale",
        "tiny",
        "--filter",
        "sum_xyz dense 200x",
        "--reps",
        "1",
        "--python",
        "/nonexistent/python3",
        "--out",
        dir.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc = json(&dir.join("results.json"));
    let peers = doc["peers"].as_array().unwrap();
    for name in ["numpy", "numexpr", "jax"] {
        let p = peers.iter().find(|p| p["name"] == name).unwrap();
        assert_eq!(p["available"], false);
        assert!(
            p["detail"].as_str().unwrap().starts_with("not found"),
            "{p}"
        );
    }
    let report = std::fs::read_to_string(dir.join("report.md")).unwrap();
    assert!(report.contains("| numpy | skipped | not found"), "{report}");
    // Only lafuse's own measurements (none, gen), both fine.
    let ms = doc["measurements"].as_array().unwrap();
    assert_eq!(ms.len(), 2);
    assert!(ms.iter().all(|m| m["status"] == "ok"));
}

#[test]
fn missing_scripts_are_failed_measurements_and_a_missing_folder_an_error() {
    let empty = out_dir("empty-examples");
    std::fs::create_dir_all(&empty).unwrap();
    let dir = out_dir("missing");
    let out = bench(&[
        "--scale",
        "tiny",
        "--filter",
        "row_mv dense 200x",
        "--examples",
        empty.to_str().unwrap(),
        "--out",
        dir.to_str().unwrap(),
    ]);
    assert!(out.status.success());
    let doc = json(&dir.join("results.json"));
    let ms = doc["measurements"].as_array().unwrap();
    assert_eq!(ms.len(), 2);
    for m in ms {
        assert_eq!(m["status"], "failed");
        assert!(
            m["error"].as_str().unwrap().contains("missing script"),
            "{m}"
        );
    }

    let out = bench(&["--scale", "tiny", "--examples", "/nonexistent/examples"]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("examples folder"), "{stderr}");
}

#[test]
fn a_filter_that_matches_no_case_is_an_error_and_leaves_no_report() {
    let dir = out_dir("no-match");
    let out = bench(&[
        "--suite",
        "micro",
        "--scale",
        "tiny",
        "--filter",
        "no such case",
        "--filter",
        "nor this",
        "--out",
        dir.to_str().unwrap(),
    ]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("no case of suite `micro` matches --filter `no such case` or `nor this`"),
        "{stderr}"
    );
    assert!(!dir.exists());
}

#[test]
fn reuse_tiny_measures_every_experiment_against_no_reuse() {
    let dir = out_dir("reuse");
    let out = bench(&[
        "--suite",
        "reuse",
        "--scale",
        "tiny",
        "--out",
        dir.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "bench failed: {stderr}");
    let report = std::fs::read_to_string(dir.join("report.md")).expect("report.md exists");
    assert!(
        report.contains("## Lineage reuse (LIMA Figures 7-9)"),
        "{report}"
    );
    let doc = json(&dir.join("results.json"));
    let ms = doc["measurements"].as_array().unwrap();
    for id in [
        "steplm_partial",
        "steplm_ca",
        "mlogreg_multilevel",
        "eviction_minibatch",
        "eviction_phases",
        "hl2svm",
        "hlm",
        "hcv",
        "ens",
        "pcalm",
    ] {
        // Every experiment's row in the report, with a measured ratio to no reuse.
        let row = report
            .lines()
            .find(|l| l.starts_with(&format!("| {id} (")))
            .unwrap_or_else(|| panic!("no row for {id}: {report}"));
        assert!(row.contains("×)"), "{row}");
        assert!(!row.contains("**differs**"), "{row}");
        let none = ms
            .iter()
            .find(|m| m["case"] == id && m["config"] == "none")
            .unwrap();
        assert_eq!(none["status"], "ok", "{none}");
        // Every reuse configuration measured, or skipped as unsupported (hybrid until
        // partial reuse lands), never failed.
        for m in ms
            .iter()
            .filter(|m| m["case"] == id && m["config"] != "none")
        {
            match m["status"].as_str().unwrap() {
                "ok" => assert!(m["ratio_to_unfused"].as_f64().unwrap() > 0.0, "{m}"),
                "skipped" => assert!(m["error"].as_str().unwrap().contains("unsupported"), "{m}"),
                _ => panic!("{m}"),
            }
        }
    }
    // The reuse statistics of the runs.
    let full = ms
        .iter()
        .find(|m| m["case"] == "hlm" && m["config"] == "full")
        .unwrap();
    assert!(full["figures"]["reuse_operation_hits"].as_f64().unwrap() > 0.0);
    assert!(report.contains("| hlm | full |"), "{report}");
    // SystemDS not given: skipped, and no goal against it stated.
    assert!(
        report.contains("| systemds | skipped | not given"),
        "{report}"
    );
    assert!(!report.contains("faster than SystemDS with reuse_hybrid"));
}

/// The GPU suite on a machine without a GPU (or a build without `cuda`): one skipped
/// measurement saying why, not an error; with a GPU, every kernel check passes.
#[test]
fn the_gpu_suite_checks_kernels_or_says_why_it_cannot() {
    let dir = out_dir("gpu");
    let out = bench(&[
        "--suite",
        "gpu",
        "--scale",
        "tiny",
        "--out",
        dir.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let results = json(&dir.join("results.json"));
    let ms = results["measurements"].as_array().expect("measurements");
    assert!(!ms.is_empty());
    let skipped: Vec<&serde_json::Value> = ms.iter().filter(|m| m["status"] == "skipped").collect();
    if skipped.len() == 1 && ms.len() == 1 {
        let why = skipped[0]["error"].as_str().unwrap_or_default();
        assert!(
            why.contains("no GPU") || why.contains("`cuda` feature"),
            "{why}"
        );
    } else {
        let failed: Vec<&serde_json::Value> =
            ms.iter().filter(|m| m["status"] == "failed").collect();
        assert!(failed.is_empty(), "{failed:?}");
        assert!(ms.iter().any(|m| m["case"] == "check"));
    }
}
