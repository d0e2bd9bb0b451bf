//! The DML script corpus: every script under `tests/corpus/` runs and prints what its
//! `.expected` file says (numbers within 1e-9 relative); every script under
//! `tests/corpus/errors/` fails with an error containing each line of its `.expected_error`.
//!
//! Every script runs unfused and under each fusion policy (`gen`, `fa`, `fnr`) on each fusion
//! backend, and must print the same expected output each time.
//!
//! Expected outputs are computed independently of lafuse (numpy, by hand, or SystemDS for its
//! random generator) by `tests/corpus/expected.py` and checked against Apache SystemDS by
//! `tests/corpus/systemds_check.sh`.
//!
//! The same harness runs SystemDS's codegen test patterns (`tests/codegen_patterns/`), whose
//! expected outputs are SystemDS's own; under the `gen` policy each must also run the fused
//! templates its `# fused:` line names and none its `# not-fused:` line names.

use lafuse::{Engine, EngineConfig, FusionBackend, FusionPolicy, ScriptArgs, SourceFile, Stats};
use std::path::Path;

mod compare;
mod fused_at_once;
mod scripts;

/// Runs a script; returns its outcome, its output and its statistics (default ones where it
/// failed).
fn run_script(path: &Path, config: &EngineConfig) -> (Result<(), String>, String, Stats) {
    let text = std::fs::read_to_string(path).unwrap();
    let source = SourceFile::new(path.display().to_string(), text);
    let args = scripts::script_args(path);
    let engine = Engine::new(config.clone());
    let mut out = Vec::new();
    let (result, stats) = match engine.run(&source, &args, &mut out) {
        Ok(report) => (Ok(()), report.stats),
        Err(e) => (Err(e.render(&source)), Stats::default()),
    };
    (result, String::from_utf8_lossy(&out).into_owned(), stats)
}

fn config(fusion: Option<FusionPolicy>, backend: FusionBackend) -> EngineConfig {
    EngineConfig {
        fusion,
        backend,
        // Per-opcode counts, for the codegen patterns' template markers.
        collect_stats: true,
        ..fused_at_once::config()
    }
}

/// Scripts write and read files under fixed names, so two configurations must not run the
/// corpus at the same time.
static CORPUS_LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// The fused templates a script's first lines require (`# fused: cell row`) and rule out
/// (`# not-fused: outer`) under the `gen` policy: the `tests/codegen_patterns` contract.
fn template_markers(script: &str) -> (Vec<String>, Vec<String>) {
    let marker = |key: &str| -> Vec<String> {
        script
            .lines()
            .take_while(|l| l.starts_with('#'))
            .filter_map(|l| l.strip_prefix(key))
            .flat_map(|rest| rest.split_whitespace().map(str::to_string))
            .collect()
    };
    (marker("# fused:"), marker("# not-fused:"))
}

/// Whether the run executed the templates the script's markers require and none it rules out.
fn templates_match(script: &str, stats: &Stats) -> Result<(), String> {
    let ran = |template: &str| {
        let opcode = format!("fused_{template}");
        stats
            .heavy_hitters
            .iter()
            .any(|h| h.opcode == opcode && h.count > 0)
    };
    let (required, forbidden) = template_markers(script);
    let missing: Vec<&String> = required.iter().filter(|t| !ran(t)).collect();
    let unwanted: Vec<&String> = forbidden.iter().filter(|t| ran(t)).collect();
    if missing.is_empty() && unwanted.is_empty() {
        return Ok(());
    }
    let fused: Vec<String> = stats
        .heavy_hitters
        .iter()
        .filter(|h| h.opcode.starts_with("fused_"))
        .map(|h| format!("{} x{}", h.opcode, h.count))
        .collect();
    Err(format!(
        "templates: missing {missing:?}, unwanted {unwanted:?}; ran [{}], unfused fallbacks {:?}",
        fused.join(", "),
        stats.unfused_fallbacks
    ))
}

/// Runs every corpus script under `config`; returns the fused operators executed in all.
fn check_corpus(config: &EngineConfig) -> u64 {
    check_scripts("tests/corpus", config)
}

/// Runs every script in `dir` (relative to the repository root) under `config` and compares
/// its output with its `.expected` file; under the `gen` policy also its template markers.
/// Returns the fused operators executed in all.
fn check_scripts(dir: &str, config: &EngineConfig) -> u64 {
    let _serial = CORPUS_LOCK.lock().unwrap_or_else(|p| p.into_inner());
    std::env::set_current_dir(env!("CARGO_MANIFEST_DIR")).unwrap();
    let scripts = scripts::scripts_in(dir);
    assert!(!scripts.is_empty(), "no scripts in {dir}");
    let mut failures = Vec::new();
    let mut fused_total = 0;
    for script in &scripts {
        let expected = std::fs::read_to_string(script.with_extension("expected"))
            .unwrap_or_else(|_| panic!("{} has no .expected file", script.display()));
        let text = std::fs::read_to_string(script).unwrap();
        let (result, out, stats) = run_script(script, config);
        fused_total += stats.fused_operators_executed;
        let verdict = result
            .and_then(|()| compare::outputs_match(&expected, &out))
            .and_then(|()| match config.fusion {
                Some(FusionPolicy::Gen) => templates_match(&text, &stats),
                _ => Ok(()),
            });
        if let Err(why) = verdict {
            failures.push(format!(
                "{}: {why}\n--- output ---\n{out}",
                script.display()
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} scripts in {} failed with fusion {:?} on {:?}:\n{}",
        failures.len(),
        scripts.len(),
        dir,
        config.fusion,
        config.backend,
        failures.join("\n")
    );
    fused_total
}

#[test]
fn corpus_scripts_print_expected_output_unfused() {
    let fused = check_corpus(&config(None, FusionBackend::Reference));
    assert_eq!(fused, 0, "no fused operator may run without fusion");
}

/// Under each policy the corpus must really exercise fused operators, not only agree.
fn check_fused_corpus(policy: FusionPolicy, backend: FusionBackend) {
    let fused = check_corpus(&config(Some(policy), backend));
    assert!(
        fused >= 20,
        "only {fused} fused operators ran under {policy:?}"
    );
}

#[test]
fn corpus_scripts_print_expected_output_gen_reference() {
    check_fused_corpus(FusionPolicy::Gen, FusionBackend::Reference);
}

#[test]
fn corpus_scripts_print_expected_output_fa_reference() {
    check_fused_corpus(FusionPolicy::FuseAll, FusionBackend::Reference);
}

#[test]
fn corpus_scripts_print_expected_output_fnr_reference() {
    check_fused_corpus(FusionPolicy::FuseNoRedundancy, FusionBackend::Reference);
}

#[test]
fn corpus_error_scripts_fail_with_located_messages() {
    let _serial = CORPUS_LOCK.lock().unwrap_or_else(|p| p.into_inner());
    std::env::set_current_dir(env!("CARGO_MANIFEST_DIR")).unwrap();
    let scripts = scripts::scripts_in("tests/corpus/errors");
    assert!(!scripts.is_empty(), "no scripts in tests/corpus/errors");
    let mut failures = Vec::new();
    for script in &scripts {
        let expected = std::fs::read_to_string(script.with_extension("expected_error"))
            .unwrap_or_else(|_| panic!("{} has no .expected_error file", script.display()));
        match run_script(script, &fused_at_once::config()) {
            (Ok(()), out, _) => failures.push(format!(
                "{}: ran without error, printed:\n{out}",
                script.display()
            )),
            (Err(message), _, _) => {
                for needle in expected.lines().filter(|l| !l.trim().is_empty()) {
                    if !message.contains(needle) {
                        failures.push(format!(
                            "{}: error lacks `{needle}`:\n{message}",
                            script.display()
                        ));
                    }
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} error scripts failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[cfg(feature = "llvm")]
#[test]
fn corpus_scripts_print_expected_output_gen_native() {
    check_fused_corpus(FusionPolicy::Gen, FusionBackend::Native);
}

#[cfg(feature = "llvm")]
#[test]
fn corpus_scripts_print_expected_output_fa_native() {
    check_fused_corpus(FusionPolicy::FuseAll, FusionBackend::Native);
}

#[cfg(feature = "llvm")]
#[test]
fn corpus_scripts_print_expected_output_fnr_native() {
    check_fused_corpus(FusionPolicy::FuseNoRedundancy, FusionBackend::Native);
}

/// SystemDS's codegen test patterns (see `tests/codegen_patterns/README.md`).
const PATTERNS: &str = "tests/codegen_patterns";

#[test]
fn codegen_patterns_print_systemds_output_unfused() {
    let fused = check_scripts(PATTERNS, &config(None, FusionBackend::Reference));
    assert_eq!(fused, 0, "no fused operator may run without fusion");
}

#[test]
fn codegen_patterns_run_their_templates_gen_reference() {
    check_scripts(
        PATTERNS,
        &config(Some(FusionPolicy::Gen), FusionBackend::Reference),
    );
}

#[cfg(feature = "llvm")]
#[test]
fn codegen_patterns_run_their_templates_gen_native() {
    check_scripts(
        PATTERNS,
        &config(Some(FusionPolicy::Gen), FusionBackend::Native),
    );
}

#[cfg(feature = "llvm")]
#[test]
fn codegen_patterns_print_systemds_output_fa_native() {
    check_scripts(
        PATTERNS,
        &config(Some(FusionPolicy::FuseAll), FusionBackend::Native),
    );
}

#[cfg(feature = "llvm")]
#[test]
fn codegen_patterns_print_systemds_output_fnr_native() {
    check_scripts(
        PATTERNS,
        &config(Some(FusionPolicy::FuseNoRedundancy), FusionBackend::Native),
    );
}

/// What `gen` decides for every codegen pattern, pinned as text beside it (`NAME.plan.txt`):
/// per block, the selection, the CPlans built from it and the cost report of the search, with
/// the sizes the script actually meets. Any change in what the optimizer decides shows as a
/// diff of these files. Run with `LAFUSE_BLESS=1` to regenerate, then review the diff.
#[test]
fn codegen_patterns_plans_match_fixtures() {
    use lafuse::{ExplainFormat, ExplainLevel, ExplainOptions};
    let bless = std::env::var_os("LAFUSE_BLESS").is_some_and(|v| v == "1");
    // The script runs unfused to collect its blocks; the fusion levels are rendered from them.
    let engine = Engine::new(config(None, FusionBackend::Reference));
    let mut failures = Vec::new();
    for path in scripts::scripts_in(PATTERNS) {
        let text = std::fs::read_to_string(&path).unwrap();
        let source = SourceFile::new(path.display().to_string(), text);
        let args = ScriptArgs::default();
        let explain = |level| {
            let options = ExplainOptions {
                level,
                format: ExplainFormat::Text,
                policy: FusionPolicy::Gen,
                static_only: false,
                all_variables_live: false,
            };
            engine.explain(&source, &args, &options).unwrap()
        };
        let cost = engine
            .cost(&source, &args, &[FusionPolicy::Gen], ExplainFormat::Text)
            .unwrap();
        let actual = format!(
            "== plan\n{}\n== cplan\n{}\n== cost\n{}",
            explain(ExplainLevel::Plan),
            explain(ExplainLevel::Cplan),
            without_optimizer_time(&cost)
        );
        let fixture = path.with_extension("plan.txt");
        if bless {
            std::fs::write(&fixture, &actual).unwrap();
            continue;
        }
        match std::fs::read_to_string(&fixture) {
            Ok(expected) if expected == actual => {}
            Ok(expected) => failures.push(format!(
                "{} differs (run with LAFUSE_BLESS=1 to update, then review the diff):\n{}",
                fixture.display(),
                similar::TextDiff::from_lines(&expected, &actual)
                    .unified_diff()
                    .context_radius(3)
                    .header("expected", "actual")
            )),
            Err(_) => failures.push(format!(
                "{} is missing (run with LAFUSE_BLESS=1)",
                fixture.display()
            )),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// The cost report with each `optimized in T ms` (wall time) replaced by `optimized in - ms`.
fn without_optimizer_time(report: &str) -> String {
    report
        .lines()
        .map(|line| match line.find("optimized in ") {
            Some(at) => format!("{}optimized in - ms\n", &line[..at]),
            None => format!("{line}\n"),
        })
        .collect()
}
