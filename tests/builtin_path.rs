//! Built-in functions loaded from a directory laid out as SystemDS's `scripts/builtin`
//! (`EngineConfig::builtin_path`): a call of `f` that neither the script nor lafuse defines runs
//! `m_f` (or `s_f`) of `f.dml`, with that file's helpers and the other built-ins it calls.
//! The fixtures are in `tests/builtin_path/builtin/`; `source(...)` is covered by the corpus
//! (`tests/corpus/source_namespaces.dml`).

use lafuse::{Engine, EngineConfig, FusionPolicy, ScriptArgs, SourceFile};
use std::path::PathBuf;

mod fused_at_once;

fn builtin_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/builtin_path/builtin")
}

fn run(
    text: &str,
    builtin_path: Option<PathBuf>,
    fusion: Option<FusionPolicy>,
) -> Result<String, String> {
    let source = SourceFile::new("t.dml", text);
    let engine = Engine::new(EngineConfig {
        builtin_path,
        fusion,
        ..fused_at_once::config()
    });
    let mut out = Vec::new();
    engine
        .run(&source, &ScriptArgs::default(), &mut out)
        .map_err(|e| e.render(&source))?;
    Ok(String::from_utf8(out).unwrap())
}

/// `calls.dml` through the built-ins prints what the same computation written inline prints:
/// `scaleTwice(X, f)` is `f * X` (its helper `times` and the built-in `addOne` cancel out to
/// that), and `total` its sum.
#[test]
fn builtins_from_the_directory_compute_what_their_bodies_say() {
    let script = std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/builtin_path/calls.dml"),
    )
    .unwrap();
    let inline = "X = rand(rows=5, cols=3, seed=4)\n\
                  Y = X * 3 + (X + 1) - 1 - X\n\
                  print(sum(Y))\n\
                  Y = X * 2.0 + (X + 1) - 1 - X\n\
                  print(toString(Y[1, ]))\n";
    for fusion in [None, Some(FusionPolicy::Gen)] {
        let got = run(&script, Some(builtin_dir()), fusion).unwrap();
        let want = run(inline, None, fusion).unwrap();
        assert_eq!(got, want, "under {fusion:?}");
    }
}

#[test]
fn without_the_directory_a_builtin_is_an_unsupported_function_at_its_line() {
    let err = run("x = 1\n[Y, t] = scaleTwice(matrix(1, 2, 2))", None, None).unwrap_err();
    assert!(err.contains("unknown function 'scaleTwice'"), "{err}");
    assert!(err.contains("t.dml:2:"), "{err}");
    // A SystemDS built-in written in DML says how to load it.
    let err = run(
        "m = l2svm(X=matrix(1, 2, 2), Y=matrix(1, 2, 1))",
        None,
        None,
    )
    .unwrap_err();
    assert!(
        err.contains("unsupported: built-in function 'l2svm'"),
        "{err}"
    );
    assert!(err.contains("--builtin-path"), "{err}");
}

#[test]
fn errors_inside_a_builtin_file_point_into_that_file() {
    let dir = std::env::temp_dir().join(format!("lafuse-builtin-path-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("broken.dml"),
        "m_broken = function(Matrix[Double] X) return (Matrix[Double] Y) {\n  Y = X + undefinedThing\n}\n",
    )
    .unwrap();
    let err = run(
        "print(sum(broken(matrix(1, 2, 2))))",
        Some(dir.clone()),
        None,
    )
    .unwrap_err();
    std::fs::remove_dir_all(&dir).ok();
    assert!(err.contains("undefined variable 'undefinedThing'"), "{err}");
    assert!(err.contains("broken.dml:2:"), "{err}");
}
