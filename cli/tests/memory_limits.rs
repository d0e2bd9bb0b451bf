//! Scripts that need more memory than the process may have end with a resource error at
//! their line, never a signal: under an address-space limit (`ulimit -v 2000000`) and in a
//! 1.5 GB memory cgroup (issue 22). The scripts are `tests/limits/*.dml`, run from that
//! directory (their data files are under `data/`).

use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn limits_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/limits")
}

fn scripts() -> Vec<PathBuf> {
    let mut all: Vec<PathBuf> = std::fs::read_dir(limits_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "dml"))
        .collect();
    all.sort();
    assert!(all.len() >= 6, "{all:?}");
    all
}

/// Runs `script` through `sh -c` with `prelude` (which limits the shell before it becomes
/// lafuse).
fn run_limited(prelude: &str, script: &Path) -> Output {
    Command::new("sh")
        .arg("-c")
        .arg(format!("{prelude}; exec \"$0\" run \"$1\""))
        .arg(env!("CARGO_BIN_EXE_lafuse"))
        .arg(script.file_name().unwrap())
        .current_dir(limits_dir())
        .output()
        .unwrap()
}

/// The run ended by itself with a resource error located at a line of the script.
fn assert_located_resource_error(how: &str, script: &Path, out: &Output) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    let name = script.file_name().unwrap().to_string_lossy();
    assert_eq!(
        out.status.signal(),
        None,
        "{how} {name}: killed by a signal\n{stderr}"
    );
    assert_ne!(
        out.status.code(),
        Some(0),
        "{how} {name}: succeeded\n{stderr}"
    );
    assert!(
        stderr.contains("resources"),
        "{how} {name}: not a resource error\n{stderr}"
    );
    assert!(
        stderr.contains(&format!("{name}:")),
        "{how} {name}: the error is not located in the script\n{stderr}"
    );
}

#[test]
fn over_budget_scripts_end_with_located_resource_errors_under_an_address_space_limit() {
    for script in scripts() {
        let out = run_limited("ulimit -v 2000000", &script);
        assert_located_resource_error("ulimit -v 2000000:", &script, &out);
    }
}

/// A fresh memory cgroup with a 1.5 GB limit and no swap, or `None` where this machine does
/// not let the test make one (not root, no memory controller): the test then says so.
struct Cgroup {
    dir: PathBuf,
}

impl Cgroup {
    fn create(bytes: u64) -> Option<Cgroup> {
        let name = format!("lafuse-limits-{}", std::process::id());
        let v2 = Path::new("/sys/fs/cgroup");
        let v1 = Path::new("/sys/fs/cgroup/memory");
        let controllers =
            std::fs::read_to_string(v2.join("cgroup.controllers")).unwrap_or_default();
        let (dir, files): (PathBuf, &[&str]) =
            if controllers.split_whitespace().any(|c| c == "memory") {
                (v2.join(&name), &["memory.max", "memory.swap.max"])
            } else if v1.join("memory.limit_in_bytes").exists() {
                (v1.join(&name), &["memory.limit_in_bytes"])
            } else {
                return None;
            };
        std::fs::create_dir(&dir).ok()?;
        let cg = Cgroup { dir };
        std::fs::write(cg.dir.join(files[0]), bytes.to_string()).ok()?;
        if let Some(swap) = files.get(1) {
            std::fs::write(cg.dir.join(swap), "0").ok()?;
        }
        Some(cg)
    }
}

impl Drop for Cgroup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.dir);
    }
}

#[test]
fn over_budget_scripts_end_with_located_resource_errors_in_a_memory_cgroup() {
    let Some(cgroup) = Cgroup::create(1_500_000_000) else {
        eprintln!("skipped: this machine does not let the test create a memory cgroup");
        return;
    };
    let procs = cgroup.dir.join("cgroup.procs");
    for script in scripts() {
        let out = run_limited(&format!("echo $$ > '{}'", procs.display()), &script);
        assert_located_resource_error("1.5 GB cgroup:", &script, &out);
    }
}
