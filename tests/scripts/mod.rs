//! The DML scripts of a test directory (`tests/corpus`, `tests/codegen_patterns`) and the
//! `--nvargs` each one's `.args` file gives, for tests that run them all.

use lafuse::ScriptArgs;
use std::path::{Path, PathBuf};

/// The `.dml` files of `dir` (relative to the crate root), sorted.
pub fn scripts_in(dir: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
    let mut scripts: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "dml"))
        .collect();
    scripts.sort();
    scripts
}

/// The script arguments in `script`'s `.args` file (one `name=value` a line), if any.
pub fn script_args(script: &Path) -> ScriptArgs {
    let pairs: Vec<String> = std::fs::read_to_string(script.with_extension("args"))
        .map(|s| {
            s.lines()
                .filter(|l| !l.trim().is_empty())
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    ScriptArgs::parse_pairs(&pairs).expect("malformed .args file")
}
