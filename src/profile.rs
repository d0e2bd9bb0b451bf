//! The machine profile the cost model is loaded from: where it lives by default, reading and
//! writing its file, and the cost model an engine optimizes with (a profile, else SystemDS's
//! constants, then `NAME=VALUE` overrides). `lafuse calibrate` measures and writes profiles; an
//! embedder that wants the machine's measured constants loads them here, without the tools
//! that measure them.

use crate::error::{Error, Usage};
use lafuse_compiler::fusion::cost::MachineProfile;
use lafuse_compiler::fusion::CostModel;
use std::path::{Path, PathBuf};

/// Where the machine profile lives by default: `$LAFUSE_PROFILE` when set (and not empty), else
/// `$XDG_CONFIG_HOME/lafuse/machine.json`, else `~/.config/lafuse/machine.json`; `None` when
/// no home directory is known.
pub fn default_profile_path() -> Option<PathBuf> {
    profile_path_from(|name| std::env::var_os(name))
}

/// [`default_profile_path`] with the environment as a function (testable without touching the
/// process environment).
fn profile_path_from(env: impl Fn(&str) -> Option<std::ffi::OsString>) -> Option<PathBuf> {
    let var = |name: &str| env(name).filter(|v| !v.is_empty());
    if let Some(p) = var("LAFUSE_PROFILE") {
        return Some(PathBuf::from(p));
    }
    let config = match var("XDG_CONFIG_HOME") {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(var("HOME")?).join(".config"),
    };
    Some(config.join("lafuse").join("machine.json"))
}

/// Reads a machine profile file; errors name the file.
pub fn read_profile(path: &Path) -> Result<MachineProfile, Error> {
    let text = std::fs::read_to_string(path).map_err(|source| {
        Error::Usage(Usage::ReadProfile {
            path: path.to_path_buf(),
            source,
        })
    })?;
    MachineProfile::from_json(&text).map_err(|error| Error::CostModel {
        context: path.display().to_string(),
        error,
    })
}

/// Writes a machine profile as JSON, creating the parent directory; errors name the file.
pub fn write_profile(path: &Path, profile: &MachineProfile) -> Result<(), Error> {
    let fail = |source: std::io::Error| {
        Error::Usage(Usage::WriteProfile {
            path: path.to_path_buf(),
            source,
        })
    };
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(fail)?;
    }
    std::fs::write(path, profile.to_json()).map_err(fail)
}

/// The cost model to optimize with: the profile at `path` (which must exist), else the one at
/// [`default_profile_path`] when that file exists, else SystemDS's constants for one core
/// ([`CostModel::default`]); then each `NAME=VALUE` of `overrides` in order
/// ([`CostModel::PARAMETERS`]). Errors quote the offending file or argument.
pub fn load_cost_model(path: Option<&Path>, overrides: &[String]) -> Result<CostModel, Error> {
    let mut model = match path {
        Some(p) => read_profile(p)?.model,
        None => match default_profile_path().filter(|p| p.is_file()) {
            Some(p) => read_profile(&p)?.model,
            None => CostModel::default(),
        },
    };
    for arg in overrides {
        model
            .apply_override(arg)
            .map_err(|error| Error::CostModel {
                context: format!("--cost '{arg}'"),
                error,
            })?;
    }
    Ok(model)
}

#[cfg(test)]
mod tests {
    use super::*;
    use lafuse_compiler::fusion::cost::Provenance;

    #[test]
    fn default_profile_path_follows_the_environment() {
        let env = |vars: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                vars.iter()
                    .find(|(k, _)| *k == name)
                    .map(|(_, v)| std::ffi::OsString::from(v))
            }
        };
        let all = env(&[
            ("LAFUSE_PROFILE", "/p/m.json"),
            ("XDG_CONFIG_HOME", "/x"),
            ("HOME", "/h"),
        ]);
        assert_eq!(profile_path_from(all), Some(PathBuf::from("/p/m.json")));
        let xdg = env(&[
            ("LAFUSE_PROFILE", ""),
            ("XDG_CONFIG_HOME", "/x"),
            ("HOME", "/h"),
        ]);
        assert_eq!(
            profile_path_from(xdg),
            Some(PathBuf::from("/x/lafuse/machine.json"))
        );
        let home = env(&[("HOME", "/h")]);
        assert_eq!(
            profile_path_from(home),
            Some(PathBuf::from("/h/.config/lafuse/machine.json"))
        );
        assert_eq!(profile_path_from(env(&[])), None);
    }

    #[test]
    fn load_cost_model_reads_a_profile_then_overrides() {
        let dir =
            std::env::temp_dir().join(format!("lafuse-calibrate-test-{}", std::process::id()));
        let path = dir.join("sub").join("machine.json");
        let mut measured = CostModel::systemds(3);
        measured.read_bandwidth = 1.25e10;
        write_profile(&path, &MachineProfile::new(measured, Provenance::default())).unwrap();

        let model = load_cost_model(Some(&path), &[]).unwrap();
        assert_eq!(model, measured);
        let model = load_cost_model(
            Some(&path),
            &["weights.exp=3".to_string(), "read_bandwidth=2e9".into()],
        )
        .unwrap();
        assert_eq!(model.weights.exp, 3.0);
        assert_eq!(model.read_bandwidth, 2e9);
        assert_eq!(model.compute_bandwidth, measured.compute_bandwidth);

        let err = load_cost_model(Some(&path), &["speed=3".to_string()]).unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.starts_with("--cost 'speed=3': unknown cost model parameter"),
            "{msg}"
        );
        let err = load_cost_model(Some(&path), &["read_bandwidth".to_string()]).unwrap_err();
        assert!(err.to_string().contains("expected NAME=VALUE"), "{err}");

        let missing = dir.join("missing.json");
        let err = load_cost_model(Some(&missing), &[]).unwrap_err();
        assert!(
            matches!(&err, Error::Usage(m) if m.to_string().contains("missing.json")),
            "{err}"
        );

        std::fs::write(&path, "{ not json").unwrap();
        let err = load_cost_model(Some(&path), &[]).unwrap_err();
        assert!(err.to_string().contains("invalid machine profile"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
