//! Child processes: every measurement runs a script in a fresh process (the lafuse binary
//! itself, SystemDS's JVM or a Python), so one run's memory, caches and compiled operators never
//! leak into the next. Output goes to files in the scratch folder (no pipe can fill up), and a
//! run past its time limit is killed and reported as failed.

use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// What a finished child process left behind.
#[derive(Clone, Debug)]
pub struct ChildOutput {
    /// Exit status 0 within the time limit.
    pub success: bool,
    pub stdout: String,
    pub stderr: String,
    /// Wall time of the whole process in milliseconds.
    pub wall_ms: f64,
    /// Why it did not succeed (exit status, time limit, spawn error), with the stderr tail.
    pub failure: Option<String>,
}

impl ChildOutput {
    /// The first value printed on a line starting with `key ` (e.g. `ms_per_rep 12.5`).
    pub fn field(&self, key: &str) -> Option<&str> {
        output_field(&self.stdout, key)
    }

    /// [`ChildOutput::field`] parsed as a number.
    pub fn number(&self, key: &str) -> Option<f64> {
        self.field(key)
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse::<f64>().ok())
    }
}

/// The rest of the first line of `text` that starts with `key` followed by a space.
pub fn output_field<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    text.lines().find_map(|l| {
        let l = l.trim();
        l.strip_prefix(key)
            .filter(|rest| rest.starts_with(' ') || rest.starts_with('\t'))
            .map(str::trim)
    })
}

/// The last `lines` lines of `text` (for error messages).
pub fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// Runs child processes with their output in a scratch folder.
#[derive(Debug)]
pub struct Runner {
    /// The lafuse binary (normally `std::env::current_exe()`).
    pub exe: PathBuf,
    /// Where outputs, statistics files and generated data go.
    pub scratch: PathBuf,
    /// Time limit of one child process.
    pub timeout: Duration,
    /// Options every `lafuse run` child gets (e.g. `--jit cranelift`).
    pub run_options: Vec<String>,
    counter: AtomicU64,
}

impl Runner {
    pub fn new(exe: PathBuf, scratch: PathBuf, timeout: Duration) -> Runner {
        Runner {
            exe,
            scratch,
            timeout,
            run_options: Vec::new(),
            counter: AtomicU64::new(0),
        }
    }

    /// A fresh file name in the scratch folder.
    pub fn scratch_file(&self, stem: &str, ext: &str) -> PathBuf {
        let n = self.counter.fetch_add(1, Ordering::Relaxed);
        self.scratch.join(format!("{stem}-{n}.{ext}"))
    }

    /// Runs `program args...` to completion or the time limit.
    pub fn run(&self, program: &Path, args: &[String]) -> ChildOutput {
        let out_path = self.scratch_file("stdout", "txt");
        let err_path = self.scratch_file("stderr", "txt");
        let started = Instant::now();
        let spawned = File::create(&out_path)
            .and_then(|o| File::create(&err_path).map(|e| (o, e)))
            .and_then(|(o, e)| {
                Command::new(program)
                    .args(args)
                    .stdin(Stdio::null())
                    .stdout(o)
                    .stderr(e)
                    .spawn()
            });
        let mut child = match spawned {
            Ok(c) => c,
            Err(e) => {
                return ChildOutput {
                    success: false,
                    stdout: String::new(),
                    stderr: String::new(),
                    wall_ms: 0.0,
                    failure: Some(format!("cannot start '{}': {e}", program.display())),
                }
            }
        };
        let mut timed_out = false;
        let status = loop {
            match child.try_wait() {
                Ok(Some(status)) => break Some(status),
                Ok(None) if started.elapsed() > self.timeout => {
                    // Ours to end: the child this runner spawned, by its handle.
                    let _ = child.kill();
                    let _ = child.wait();
                    timed_out = true;
                    break None;
                }
                // Polls at a fiftieth of the time so far (0.2 to 20 ms), so a 40 ms process
                // is timed to within a millisecond and a long one costs few wake-ups.
                Ok(None) => std::thread::sleep(
                    (started.elapsed() / 50)
                        .clamp(Duration::from_micros(200), Duration::from_millis(20)),
                ),
                Err(_) => break None,
            }
        };
        let wall_ms = started.elapsed().as_secs_f64() * 1e3;
        let stdout = std::fs::read_to_string(&out_path).unwrap_or_default();
        let stderr = std::fs::read_to_string(&err_path).unwrap_or_default();
        let _ = std::fs::remove_file(&out_path);
        let _ = std::fs::remove_file(&err_path);
        let success = status.is_some_and(|s| s.success());
        let failure = if success {
            None
        } else {
            let why = if timed_out {
                format!(
                    "killed after the time limit of {} s",
                    self.timeout.as_secs()
                )
            } else {
                match status {
                    Some(s) => format!("exited with {s}"),
                    None => "could not be waited for".to_string(),
                }
            };
            let mut text = tail(&stderr, 6);
            if text.is_empty() {
                text = tail(&stdout, 6);
            }
            Some(if text.is_empty() {
                why
            } else {
                format!("{why}: {text}")
            })
        };
        ChildOutput {
            success,
            stdout,
            stderr,
            wall_ms,
            failure,
        }
    }

    /// `lafuse run SCRIPT --fusion POLICY --nvargs k=v ... --stats-json FILE`; returns the
    /// output and the parsed statistics (when the run succeeded).
    pub fn run_lafuse(
        &self,
        script: &Path,
        policy: &str,
        nvargs: &[(String, String)],
    ) -> (ChildOutput, Option<serde_json::Value>) {
        self.run_lafuse_with(script, policy, &[], nvargs)
    }

    /// [`Runner::run_lafuse`] with further `run` options (e.g. `--reuse full`).
    pub fn run_lafuse_with(
        &self,
        script: &Path,
        policy: &str,
        extra: &[String],
        nvargs: &[(String, String)],
    ) -> (ChildOutput, Option<serde_json::Value>) {
        let stats_path = self.scratch_file("stats", "json");
        let mut args = vec![
            "run".to_string(),
            script.display().to_string(),
            "--fusion".to_string(),
            policy.to_string(),
            "--stats-json".to_string(),
            stats_path.display().to_string(),
        ];
        args.extend(self.run_options.iter().cloned());
        args.extend(extra.iter().cloned());
        push_nvargs(&mut args, nvargs);
        let out = self.run(&self.exe, &args);
        let stats = std::fs::read_to_string(&stats_path)
            .ok()
            .and_then(|s| serde_json::from_str(&s).ok());
        let _ = std::fs::remove_file(&stats_path);
        (out, stats)
    }

    /// `lafuse SUBCOMMAND SCRIPT EXTRA... --nvargs k=v ...` (e.g. `cost` or `explain`).
    pub fn lafuse_tool(
        &self,
        subcommand: &str,
        script: &Path,
        extra: &[&str],
        nvargs: &[(String, String)],
    ) -> ChildOutput {
        let mut args = vec![subcommand.to_string(), script.display().to_string()];
        args.extend(extra.iter().map(|s| s.to_string()));
        push_nvargs(&mut args, nvargs);
        self.run(&self.exe, &args)
    }
}

/// Appends `--nvargs k=v ...` when there are any.
fn push_nvargs(args: &mut Vec<String>, nvargs: &[(String, String)]) {
    if !nvargs.is_empty() {
        args.push("--nvargs".into());
        args.extend(nvargs.iter().map(|(k, v)| format!("{k}={v}")));
    }
}

/// The figures of lafuse's `--stats-json` kept in every measurement.
pub const STATS_FIGURES: &[&str] = &[
    "total_ms",
    "compile_ms",
    "execution_ms",
    "blocks_compiled",
    "block_cache_hits",
    "fused_operators_executed",
    "operators_compiled",
    "operator_cache_hits",
    "codegen_ms",
    "fusion_planning_ms",
    "fused_execution_ms",
];

/// The numeric statistics of a `--stats-json` document, plus the total of
/// `operator_cache_misses` and `unfused_fallbacks` counts, and under `--jit tiered` what each
/// tier did (`tiering`'s figures: `tier_switches`, `llvm_compile_ms`, ...).
pub fn stats_figures(stats: &serde_json::Value) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    for key in STATS_FIGURES {
        if let Some(v) = stats.get(*key).and_then(|v| v.as_f64()) {
            out.insert((*key).to_string(), v);
        }
    }
    for key in ["operator_cache_misses", "unfused_fallbacks"] {
        if let Some(list) = stats.get(key).and_then(|v| v.as_array()) {
            // A fold from +0.0: an empty float sum is -0.0.
            let total = list
                .iter()
                .filter_map(|f| f.get("count").and_then(|c| c.as_f64()))
                .fold(0.0, |a, b| a + b);
            out.insert(key.to_string(), total);
        }
    }
    if let Some(tiering) = stats.get("tiering").and_then(|t| t.as_object()) {
        for (key, v) in tiering {
            if let Some(v) = v.as_f64() {
                out.insert(key.clone(), v);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_found_by_their_first_word() {
        let text = "hello\nms_per_rep 12.5\nms_per_rep_other 3\nresult 1.0E-4\ncheck PASS ok\n";
        assert_eq!(output_field(text, "ms_per_rep"), Some("12.5"));
        assert_eq!(output_field(text, "check"), Some("PASS ok"));
        assert_eq!(output_field(text, "missing"), None);
        assert_eq!(tail("a\n\nb\nc\n", 2), "b\nc");
    }

    #[test]
    fn stats_figures_sum_the_miss_counts() {
        let v: serde_json::Value = serde_json::from_str(
            r#"{"codegen_ms": 2.5, "operators_compiled": 3,
                "operator_cache_misses": [{"reason": "FirstSight", "count": 3}]}"#,
        )
        .unwrap();
        let f = stats_figures(&v);
        assert_eq!(f["codegen_ms"], 2.5);
        assert_eq!(f["operators_compiled"], 3.0);
        assert_eq!(f["operator_cache_misses"], 3.0);
        assert!(!f.contains_key("tier_switches"));
        let v: serde_json::Value =
            serde_json::from_str(r#"{"tiering": {"tier_switches": 2, "llvm_run_ms": 1.5}}"#)
                .unwrap();
        let f = stats_figures(&v);
        assert_eq!((f["tier_switches"], f["llvm_run_ms"]), (2.0, 1.5));
    }

    #[test]
    fn a_missing_program_is_a_failure_not_a_panic() {
        let dir = std::env::temp_dir();
        let r = Runner::new(
            PathBuf::from("/nonexistent/lafuse"),
            dir,
            Duration::from_secs(5),
        );
        let out = r.run(Path::new("/nonexistent/program"), &[]);
        assert!(!out.success);
        assert!(out.failure.unwrap().contains("cannot start"));
    }
}
