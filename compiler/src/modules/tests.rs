//! The loader on files held in memory: namespaces, nested sources, built-ins from a directory,
//! and errors that point into the file at fault.

use super::*;
use crate::error::CompileCause;

/// Files by path, in memory.
struct Files(Vec<(&'static str, &'static str)>);

impl ModuleFiles for Files {
    fn read(&self, path: &Path) -> std::io::Result<String> {
        self.0
            .iter()
            .find(|(p, _)| Path::new(p) == path)
            .map(|(_, text)| text.to_string())
            .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::NotFound, "not found"))
    }

    fn exists(&self, path: &Path) -> bool {
        self.0.iter().any(|(p, _)| Path::new(p) == path)
    }
}

fn options() -> LoadOptions {
    LoadOptions {
        script_dir: None,
        builtin_path: Some(PathBuf::from("builtin")),
    }
}

fn load_text(source: &SourceFile, files: &Files) -> Result<Script, Vec<CompileError>> {
    let script = parser::parse(source).expect("the script parses");
    load(script, source, files, &options())
}

/// Every call in the loaded script's statements and functions, as `caller: callee`.
fn calls(script: &mut Script) -> Vec<String> {
    let mut out = vec![];
    for_each_call_in_stmts(&mut script.statements, &mut |name, _, _| {
        out.push(format!("main: {name}"))
    });
    for f in &mut script.functions {
        let caller = f.name.clone();
        for_each_call_in_stmts(&mut f.body, &mut |name, _, _| {
            out.push(format!("{caller}: {name}"))
        });
    }
    out.sort();
    out
}

fn names(script: &Script) -> Vec<String> {
    let mut v: Vec<String> = script.functions.iter().map(|f| f.name.clone()).collect();
    v.sort();
    v
}

#[test]
fn sourced_functions_are_qualified_and_calls_resolved_in_their_file() {
    let files = Files(vec![
        (
            "lib/u.dml",
            "source(\"lib/v.dml\") as v\n\
             f = function(Double x) return (Double y) { y = g(x) + v::h(x) }\n\
             g = function(Double x) return (Double y) { y = x }\n\
             print(\"not run\")",
        ),
        (
            "lib/v.dml",
            "h = function(Double x) return (Double y) { y = abs(x) }",
        ),
    ]);
    let source = SourceFile::new(
        "s.dml",
        "source(\"lib/u.dml\") as u\nprint(u::f(1))\ng = function() return (Double y) { y = 1 }",
    );
    let mut script = load_text(&source, &files).unwrap();
    assert_eq!(names(&script), ["g", "u::f", "u::g", "v::h"]);
    assert_eq!(
        calls(&mut script),
        [
            "main: print",
            "main: u::f",
            "u::f: u::g",
            "u::f: v::h",
            "v::h: abs"
        ]
    );
    // Only functions come from a sourced file.
    assert_eq!(script.statements.len(), 1);
}

#[test]
fn builtins_load_from_the_directory_with_their_helpers() {
    let files = Files(vec![
        (
            "builtin/twice.dml",
            "m_twice = function(Matrix[Double] X) return (Matrix[Double] Y) { Y = inner(X) + plusOne(X) - 1 }\n\
             inner = function(Matrix[Double] X) return (Matrix[Double] Y) { Y = X }",
        ),
        (
            "builtin/plusOne.dml",
            "s_plusOne = function(Matrix[Double] X) return (Matrix[Double] Y) { Y = X + 1 }",
        ),
    ]);
    let source = SourceFile::new("s.dml", "print(sum(twice(matrix(1, 2, 2))))");
    let mut script = load_text(&source, &files).unwrap();
    assert_eq!(names(&script), ["plusOne", "twice", "twice::inner"]);
    assert_eq!(
        calls(&mut script),
        [
            "main: matrix",
            "main: print",
            "main: sum",
            "main: twice",
            "twice: plusOne",
            "twice: twice::inner"
        ]
    );
}

#[test]
fn a_scripts_own_function_wins_over_a_builtin_file() {
    let files = Files(vec![(
        "builtin/twice.dml",
        "m_twice = function(Double x) return (Double y) { y = 2 * x }",
    )]);
    let source = SourceFile::new(
        "s.dml",
        "print(twice(1))\ntwice = function(Double x) return (Double y) { y = 3 * x }",
    );
    let script = load_text(&source, &files).unwrap();
    assert_eq!(names(&script), ["twice"]);
    assert!(script.functions[0].span.end as usize <= source.text.len());
}

#[test]
fn unknown_functions_are_left_for_the_checker() {
    let source = SourceFile::new("s.dml", "print(nosuch(1))");
    let mut script = load_text(&source, &Files(vec![])).unwrap();
    assert_eq!(calls(&mut script), ["main: nosuch", "main: print"]);
}

fn load_errors(text: &'static str, files: Files) -> (SourceFile, Vec<CompileError>) {
    let source = SourceFile::new("s.dml", text);
    let errors = load_text(&source, &files).expect_err("fails to load");
    (source, errors)
}

#[test]
fn load_errors_name_the_namespace_the_function_or_the_file() {
    let (_, e) = load_errors("source(\"none.dml\") as n\nprint(1)", Files(vec![]));
    assert!(matches!(
        *e[0].cause,
        CompileCause::Load(LoadError::SourceUnreadable { .. })
    ));
    let (_, e) = load_errors("print(ns::f(1))", Files(vec![]));
    assert_eq!(
        e[0].headline(),
        "unknown namespace 'ns': no source(...) as ns in this file"
    );
    let files = Files(vec![(
        "a.dml",
        "f = function() return (Double y) { y = 1 }",
    )]);
    let (_, e) = load_errors("source(\"a.dml\") as a\nprint(a::g())", files);
    assert_eq!(
        e[0].headline(),
        "function 'g' is not defined in 'a.dml' (sourced as 'a')"
    );
    let files = Files(vec![(
        "builtin/f.dml",
        "other = function() return (Double y) { y = 1 }",
    )]);
    let (_, e) = load_errors("print(f())", files);
    assert_eq!(
        e[0].headline(),
        "the built-in file 'builtin/f.dml' defines no function m_f or s_f"
    );
    let files = Files(vec![("a.dml", ""), ("b.dml", "")]);
    let (_, e) = load_errors("source(\"a.dml\") as a\nsource(\"b.dml\") as a", files);
    assert!(e[0]
        .headline()
        .starts_with("namespace 'a' is sourced from two files"));
}

#[test]
fn errors_in_a_loaded_file_point_at_its_own_line() {
    let files = Files(vec![(
        "builtin/f.dml",
        "# f\nm_f = function() return (Double y) {\n  y = 1 +\n}",
    )]);
    let (source, e) = load_errors("x = 1\nprint(f())", files);
    let shown = e[0].render(&source);
    assert!(shown.contains("builtin/f.dml:4:1"), "{shown}");
    assert!(!shown.contains("s.dml"), "{shown}");
}

#[test]
fn loading_again_places_files_where_they_were() {
    let files = Files(vec![(
        "a.dml",
        "f = function() return (Double y) { y = 1 }",
    )]);
    let source = SourceFile::new("s.dml", "source(\"a.dml\") as a\nprint(a::f())");
    let first = load_text(&source, &files).unwrap();
    let second = load_text(&source, &files).unwrap();
    assert_eq!(first.functions[0].span, second.functions[0].span);
    let (name, local) = source.in_file(first.functions[0].span.start, |name, _, local| {
        (name.to_string(), local)
    });
    assert_eq!((name.as_str(), local), ("a.dml", 0));
}

#[test]
fn one_file_sourced_under_two_spellings_is_loaded_once() {
    let files = Files(vec![(
        "lib/a.dml",
        "f = function() return (Double y) { y = 1 }",
    )]);
    let source = SourceFile::new(
        "s.dml",
        "source(\"lib/a.dml\") as a\nsource(\"./lib/../lib/a.dml\") as b\nprint(a::f() + b::f())",
    );
    let script = load_text(&source, &files).unwrap();
    assert_eq!(names(&script), ["a::f"]);
}

#[test]
fn a_call_lafuses_builtin_cannot_take_goes_to_the_dml_builtin() {
    let files = Files(vec![(
        "builtin/abs.dml",
        "m_abs = function(Matrix[Double] X) return (Matrix[Double] Y) { Y = X * 0 }",
    )]);
    let source = SourceFile::new(
        "s.dml",
        "print(sum(abs(matrix(-1, 2, 2))) + sum(abs(X=matrix(1, 2, 2))))",
    );
    let mut script = load_text(&source, &files).unwrap();
    // The file's entry is not named `abs`, which would shadow lafuse's.
    assert_eq!(names(&script), ["abs::m_abs"]);
    assert_eq!(
        calls(&mut script),
        [
            "main: abs",
            "main: abs::m_abs",
            "main: matrix",
            "main: matrix",
            "main: print",
            "main: sum",
            "main: sum"
        ]
    );
}

#[test]
fn a_source_not_in_the_working_directory_is_looked_up_under_its_scripts() {
    let files = Files(vec![(
        "scripts/nn/relu.dml",
        "forward = function(Double x) return (Double y) { y = max(x, 0) }",
    )]);
    let source = SourceFile::new(
        "s.dml",
        "source(\"nn/relu.dml\") as relu\nprint(relu::forward(-1))",
    );
    let script = load_text(&source, &files).unwrap();
    assert_eq!(names(&script), ["relu::forward"]);
}

#[test]
fn a_builtins_sources_are_found_beside_the_builtin_directory() {
    // As in a SystemDS checkout: `sys/scripts/builtin` with `sys/scripts/nn` beside it, and
    // sources written both from `scripts/` and from the checkout's root.
    let files = Files(vec![
        (
            "sys/scripts/builtin/act.dml",
            "source(\"nn/relu.dml\") as relu\nsource(\"scripts/builtin/helper.dml\") as h\n\
             m_act = function(Double x) return (Double y) { y = relu::forward(x) + h::one() }",
        ),
        (
            "sys/scripts/builtin/helper.dml",
            "one = function() return (Double y) { y = 1 }",
        ),
        (
            "sys/scripts/nn/relu.dml",
            "forward = function(Double x) return (Double y) { y = max(x, 0) }",
        ),
    ]);
    let source = SourceFile::new("s.dml", "print(act(-1))");
    let script = parser::parse(&source).expect("the script parses");
    let options = LoadOptions {
        script_dir: None,
        builtin_path: Some(PathBuf::from("sys/scripts/builtin")),
    };
    let script = load(script, &source, &files, &options).unwrap();
    assert_eq!(names(&script), ["act", "h::one", "relu::forward"]);
}

#[test]
fn a_builtins_source_is_looked_up_above_the_builtin_directory() {
    // SystemDS's layout: `scripts/builtin/ff.dml` sources `nn/layers/relu.dml`, which is
    // `scripts/nn/layers/relu.dml`, whatever the working directory.
    let files = Files(vec![
        (
            "sysds/scripts/builtin/ff.dml",
            "source(\"nn/layers/relu.dml\") as relu\n\
             m_ff = function(Double x) return (Double y) { y = relu::forward(x) }",
        ),
        (
            "sysds/scripts/nn/layers/relu.dml",
            "forward = function(Double x) return (Double y) { y = max(x, 0) }",
        ),
    ]);
    let options = LoadOptions {
        script_dir: None,
        builtin_path: Some(PathBuf::from("sysds/scripts/builtin")),
    };
    let source = SourceFile::new("s.dml", "print(ff(-1))");
    let script = parser::parse(&source).expect("the script parses");
    let script = load(script, &source, &files, &options).unwrap();
    assert_eq!(names(&script), ["ff", "relu::forward"]);
}

#[test]
fn eval_of_a_literal_name_loads_that_builtin() {
    let files = Files(vec![(
        "builtin/twice.dml",
        "m_twice = function(Matrix[Double] X) return (Matrix[Double] Y) { Y = X * 2 }",
    )]);
    let source = SourceFile::new(
        "s.dml",
        "print(sum(eval(\"twice\", matrix(1, 2, 2))))\nname = \"other\"\nZ = eval(name, 1)",
    );
    let mut script = load_text(&source, &files).unwrap();
    assert_eq!(names(&script), ["twice"]);
    // The name is left to the program builder, which resolves it among the loaded functions.
    assert!(calls(&mut script).contains(&"main: eval".to_string()));
}

#[test]
fn a_string_given_to_a_dml_function_loads_the_builtin_it_names() {
    let files = Files(vec![
        (
            "builtin/twice.dml",
            "m_twice = function(Matrix[Double] X) return (Matrix[Double] Y) { Y = X * 2 }",
        ),
        (
            "builtin/apply_by_name.dml",
            "m_apply_by_name = function(String f, Matrix[Double] X) return (Matrix[Double] Y) {\n\
             Y = eval(f, X) }",
        ),
        ("builtin/broken.dml", "m_broken = function( {"),
    ]);
    // Through a built-in, through the script's own function; a name whose file does not load,
    // and a string given to a native built-in (`print`), load nothing and are no error.
    let source = SourceFile::new(
        "s.dml",
        "g = function(String f) return (Double x) { x = 1 }\n\
         Y = apply_by_name(\"twice\", matrix(1, 2, 2))\nx = g(\"broken\")\nprint(\"other\")",
    );
    let script = load_text(&source, &files).unwrap();
    assert_eq!(names(&script), ["apply_by_name", "g", "twice"]);
}
