//! Golden explain outputs: every `tests/fixtures/hops/*.dml` (one basic block over inputs
//! `X` 1000×100 with 50000 non-zeros and `y` 1000×1) is compiled and its explain text, JSON and
//! dot output compared with the `.explain.txt`, `.explain.json` and `.dot` files next to it.
//! Run with `LAFUSE_BLESS=1` to regenerate them, then review the diff.

mod hops_common;
use hops_common::*;

use lafuse_compiler::hops::{explain_dot, explain_json, explain_text};
use std::path::Path;

fn check(path: &Path, actual: &str, failures: &mut Vec<String>) {
    if std::env::var_os("LAFUSE_BLESS").is_some_and(|v| v == "1") {
        std::fs::write(path, actual).unwrap();
        return;
    }
    match std::fs::read_to_string(path) {
        Ok(expected) if expected == actual => {}
        Ok(expected) => failures.push(format!(
            "{} differs (run with LAFUSE_BLESS=1 to update, then review the diff):\n{}",
            path.display(),
            similar::TextDiff::from_lines(expected.as_str(), actual)
                .unified_diff()
                .context_radius(3)
                .header("expected", "actual")
        )),
        Err(_) => failures.push(format!(
            "{} is missing (run with LAFUSE_BLESS=1)",
            path.display()
        )),
    }
}

#[test]
fn explain_outputs_match_fixtures() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/hops");
    let mut scripts: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "dml"))
        .collect();
    scripts.sort();
    assert!(!scripts.is_empty());
    let inputs = matrices(&[("X", 1000, 100, 50_000), ("y", 1000, 1, 1000)]);
    let mut failures = Vec::new();
    for script in scripts {
        let text = std::fs::read_to_string(&script).unwrap();
        let d = dag(&text, &inputs);
        check(
            &script.with_extension("explain.txt"),
            &explain_text(&d),
            &mut failures,
        );
        check(
            &script.with_extension("explain.json"),
            &explain_json(&d),
            &mut failures,
        );
        check(
            &script.with_extension("dot"),
            &explain_dot(&d),
            &mut failures,
        );
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
