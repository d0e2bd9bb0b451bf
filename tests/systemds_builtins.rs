//! SystemDS's own built-in algorithm scripts, unchanged, called by drivers of ours
//! (`tests/systemds_builtins/*.dml`, seeded random data) through `--builtin-path`: each prints
//! SystemDS 3.4's output (`.expected`, written by SystemDS with fusion off) within 1e-9 relative
//! (numbers inside progress messages included),
//! unfused and under `gen`, and fused operators run inside the algorithms.
//!
//! lafuse ships none of SystemDS's scripts. The test takes them from `LAFUSE_SYSTEMDS_BUILTIN`
//! (a `scripts/builtin` directory), else from the SystemDS jar `../shared/tools/systemds`
//! installs (`~/.cache/lafuse-systemds/SystemDS.jar`, its `scripts/` unpacked with `unzip`: the
//! built-ins source files beside `scripts/builtin`); without either
//! it says so and checks nothing.
//!
//! A driver whose first line is `# lafuse-pending: REASON` calls a function lafuse lacks yet;
//! it must still fail (the marker goes when it passes), so the list of what is missing stays
//! true.

use lafuse::{Engine, EngineConfig, FusionPolicy, SourceFile};
use std::path::{Path, PathBuf};

mod compare;
mod fused_at_once;
mod scripts;

/// SystemDS's `scripts/builtin`, if this machine has it.
fn systemds_builtin_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("LAFUSE_SYSTEMDS_BUILTIN") {
        return Some(PathBuf::from(dir));
    }
    let jar = PathBuf::from(std::env::var_os("HOME")?).join(".cache/lafuse-systemds/SystemDS.jar");
    if !jar.is_file() {
        return None;
    }
    let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("systemds-scripts");
    let dir = out.join("scripts/builtin");
    // All of `scripts/`: built-ins source `nn/layers/...` and `scripts/builtin/...` from it.
    if !dir.join("l2svm.dml").is_file()
        || !out.join("scripts/nn/layers/softmax.dml").is_file()
        || !out.join("scripts/nn/layers/affine.dml").is_file()
    {
        let status = std::process::Command::new("unzip")
            .args(["-q", "-o"])
            .arg(&jar)
            .arg("scripts/*")
            .arg("-d")
            .arg(&out)
            .status()
            .ok()?;
        if !status.success() {
            return None;
        }
    }
    Some(dir)
}

fn run(
    script: &Path,
    builtin: &Path,
    fusion: Option<FusionPolicy>,
) -> (Result<String, String>, u64) {
    let source = SourceFile::new(
        script.display().to_string(),
        std::fs::read_to_string(script).unwrap(),
    );
    let engine = Engine::new(EngineConfig {
        fusion,
        builtin_path: Some(builtin.to_path_buf()),
        collect_stats: true,
        ..fused_at_once::config()
    });
    let mut out = Vec::new();
    match engine.run(&source, &scripts::script_args(script), &mut out) {
        Ok(report) => (
            Ok(String::from_utf8_lossy(&out).into_owned()),
            report.stats.fused_operators_executed,
        ),
        Err(e) => (Err(e.render(&source)), 0),
    }
}

#[test]
fn systemds_builtin_scripts_print_systemds_numbers() {
    let Some(builtin) = systemds_builtin_dir() else {
        eprintln!(
            "skipped: no SystemDS scripts/builtin (set LAFUSE_SYSTEMDS_BUILTIN, or install \
             SystemDS with ../shared/tools/systemds)"
        );
        return;
    };
    let mut failures = vec![];
    let mut fused_somewhere = false;
    let drivers = scripts::scripts_in("tests/systemds_builtins");
    for driver in &drivers {
        let expected = std::fs::read_to_string(driver.with_extension("expected")).unwrap();
        let pending = std::fs::read_to_string(driver)
            .unwrap()
            .starts_with("# lafuse-pending:");
        let name = driver.file_stem().unwrap().to_string_lossy();
        for fusion in [None, Some(FusionPolicy::Gen)] {
            let (out, fused) = run(driver, &builtin, fusion);
            fused_somewhere |= fused > 0;
            match out.and_then(|out| compare::outputs_match_embedded(&expected, &out)) {
                Ok(()) if pending => failures.push(format!(
                    "{name} under {fusion:?} now prints SystemDS's output: remove its \
                     lafuse-pending marker"
                )),
                Err(e) if !pending => {
                    let first: String = e.lines().take(6).collect::<Vec<_>>().join("\n    ");
                    failures.push(format!("{name} under {fusion:?}:\n    {first}"));
                }
                _ => {}
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} runs differ from SystemDS:\n{}",
        failures.len(),
        2 * drivers.len(),
        failures.join("\n")
    );
    assert!(
        fused_somewhere,
        "no fused operator ran inside the algorithms under gen"
    );
}
