//! The front end (parse, block building, checks) over the project's script corpus
//! (`tests/corpus/`): every runnable script passes it, and every error script that the front
//! end can judge fails it with the expected message.

use lafuse_compiler::check::check_program;
use lafuse_compiler::modules::{self, FileSystem, LoadOptions};
use lafuse_compiler::parser::parse;
use lafuse_compiler::program::build_program;
use lafuse_compiler::span::SourceFile;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/corpus")
}

fn scripts_in(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return vec![];
    };
    let mut scripts: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "dml"))
        .collect();
    scripts.sort();
    scripts
}

/// Parses, loads (the corpus's `source` paths are relative to the repository root), builds and
/// checks a script file; returns the rendered errors, if any.
fn front_end(path: &Path) -> Result<(), String> {
    let text = std::fs::read_to_string(path).unwrap();
    let source = SourceFile::new(path.display().to_string(), text);
    let args: BTreeSet<String> = std::fs::read_to_string(path.with_extension("args"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split_once('=').map(|(name, _)| name.trim().to_string()))
        .collect();
    let render = |errors: Vec<lafuse_compiler::CompileError>| {
        errors
            .iter()
            .map(|e| e.render(&source))
            .collect::<Vec<_>>()
            .join("\n")
    };
    let script = parse(&source).map_err(render)?;
    let options = LoadOptions {
        script_dir: Some(Path::new(env!("CARGO_MANIFEST_DIR")).join("..")),
        builtin_path: None,
    };
    let script = modules::load(script, &source, &FileSystem, &options).map_err(render)?;
    let program = build_program(script).map_err(|e| render(vec![e]))?;
    check_program(&program, &args).map_err(render)
}

#[test]
fn every_runnable_corpus_script_passes_the_front_end() {
    let scripts = scripts_in(&corpus_dir());
    let failures: Vec<String> = scripts
        .iter()
        .filter_map(|p| front_end(p).err().map(|e| format!("{}:\n{e}", p.display())))
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// The error scripts whose error is visible before running: the front end must reject them with
/// every line of their `.expected_error` in the rendered message. The others fail at run time.
const FRONT_END_ERRORS: &[&str] = &[
    "function_scope",
    "multi_return_single_target",
    "string_times_number",
    "syntax_error",
    "syntax_unclosed",
    "undefined_variable",
    "unknown_function",
    "unknown_named_arg",
    "unknown_named_arg_builtin",
    "wrong_arg_count",
    "wrong_arg_count_builtin",
    "wrong_return_targets",
];

#[test]
fn error_scripts_judged_by_the_front_end() {
    for path in scripts_in(&corpus_dir().join("errors")) {
        let name = path.file_stem().unwrap().to_string_lossy().into_owned();
        let expected =
            std::fs::read_to_string(path.with_extension("expected_error")).unwrap_or_default();
        match front_end(&path) {
            Ok(()) => assert!(
                !FRONT_END_ERRORS.contains(&name.as_str()),
                "{name}: the front end accepts it"
            ),
            Err(rendered) => {
                for line in expected.lines().filter(|l| !l.trim().is_empty()) {
                    assert!(
                        rendered.contains(line),
                        "{name}: missing {line:?} in\n{rendered}"
                    );
                }
            }
        }
    }
}
