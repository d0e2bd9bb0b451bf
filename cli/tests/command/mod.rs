//! Running the `lafuse` binary in a directory, for the command-line tests.

use std::path::Path;
use std::process::{Command, Output};

/// `lafuse ARGS` run in `dir`.
pub fn lafuse(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lafuse"))
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap()
}

/// The standard output of a run that must succeed (else both streams are shown).
pub fn ok(out: Output) -> String {
    assert!(
        out.status.success(),
        "stdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}
