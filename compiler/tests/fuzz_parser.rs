//! Fuzzing the front end: whatever the input, parsing, block building and checking return
//! values or errors and never panic, and every error span lies inside the source.

use lafuse_compiler::check::check_program;
use lafuse_compiler::parser::parse;
use lafuse_compiler::program::build_program;
use lafuse_compiler::span::SourceFile;
use proptest::prelude::*;
use std::collections::BTreeSet;

/// Runs the whole front end on `text`, asserting only what must hold for any input.
fn front_end(text: &str) {
    let source = SourceFile::new("fuzz.dml", text);
    let in_bounds = |e: &lafuse_compiler::CompileError| {
        if let Some(span) = e.span {
            assert!(
                span.start <= span.end && span.end as usize <= text.len(),
                "{e:?} in {text:?}"
            );
            assert!(
                text.is_char_boundary(span.start as usize)
                    && text.is_char_boundary(span.end as usize)
            );
        }
        // Rendering must not panic either, whatever the span.
        let _ = e.render(&source);
    };
    let script = match parse(&source) {
        Ok(script) => script,
        Err(errors) => {
            assert!(!errors.is_empty());
            errors.iter().for_each(in_bounds);
            return;
        }
    };
    let program = match build_program(script) {
        Ok(p) => p,
        Err(e) => return in_bounds(&e),
    };
    let args: BTreeSet<String> = ["X".to_string()].into();
    if let Err(errors) = check_program(&program, &args) {
        errors.iter().for_each(in_bounds);
    }
}

/// Fragments that, concatenated, give inputs near the grammar: keywords, operators,
/// identifiers (built-in, user-defined, undefined), literals, comments and line breaks.
const VOCABULARY: &[&str] = &[
    "if",
    "else",
    "for",
    "parfor",
    "while",
    "in",
    "function",
    "return",
    "ifdef",
    "source",
    "setwd",
    "as",
    "TRUE",
    "FALSE",
    "double",
    "integer",
    "int",
    "boolean",
    "string",
    "matrix",
    "matrix[double]",
    "frame",
    "(",
    ")",
    "[",
    "]",
    "{",
    "}",
    ",",
    ";",
    ":",
    "=",
    "<-",
    "+=",
    "+",
    "-",
    "*",
    "/",
    "^",
    "%%",
    "%/%",
    "%*%",
    "<",
    "<=",
    ">",
    ">=",
    "==",
    "!=",
    "!",
    "&",
    "&&",
    "|",
    "||",
    "x",
    "y",
    "X",
    "f",
    "g",
    "i",
    "sum",
    "print",
    "rand",
    "rows",
    "cols",
    "seq",
    "nrow",
    "as.scalar",
    "toString",
    "min",
    "ifdef($X, 1)",
    "$X",
    "$n",
    "0",
    "1",
    "7",
    "2.5",
    ".5",
    "1e3",
    "\"s\"",
    "'t'",
    "\n",
    "\n",
    " ",
    "# c\n",
    "/* c */",
    "ns::f",
    "@",
    "f = function(double a) return (double b) { b = a }\n",
    "X = rand(rows=3, cols=3)\n",
];

fn token_stream() -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(VOCABULARY), 0..60)
        .prop_map(|tokens| tokens.join(" "))
}

/// Valid scripts that mutations start from.
const SEEDS: &[&str] = &[
    "X = rand(rows=10, cols=5, seed=7)\ny = X %*% t(X)\nprint(toString(y, decimal=2))\n",
    "f = function(matrix[double] A, double l = 0.1) return (matrix[double] B, double s) {\n  B = A * l\n  s = sum(B)\n}\n[B, s] = f(matrix(1, 2, 2))\nprint(s)\n",
    "n = ifdef($n, 5)\ns = 0\nfor (i in 1:n) { if (i %% 2 == 0) { s = s + i } else s = s - 1 }\nwhile (s > 0) s = s - 3\nprint(s)\n",
    "X = matrix(\"1 2 3 4\", 2, 2)\nX[1, ] = X[2, ] * -2^2\nparfor (j in seq(1, 2, 1), check=0) { print(as.scalar(X[1, j])) }\n",
];

fn mutated_seed() -> impl Strategy<Value = String> {
    (
        prop::sample::select(SEEDS),
        prop::collection::vec(
            (
                any::<prop::sample::Index>(),
                0..3u8,
                prop::sample::select(VOCABULARY),
            ),
            1..6,
        ),
    )
        .prop_map(|(seed, edits)| {
            let mut text = seed.to_string();
            for (at, kind, fragment) in edits {
                let mut pos = at.index(text.len() + 1);
                while !text.is_char_boundary(pos) {
                    pos -= 1;
                }
                match kind {
                    0 => text.insert_str(pos, fragment),
                    1 => {
                        let mut end = (pos + 3).min(text.len());
                        while !text.is_char_boundary(end) {
                            end -= 1;
                        }
                        text.replace_range(pos..end, "");
                    }
                    _ => text.insert_str(pos, &fragment[..fragment.len().min(1)]),
                }
            }
            text
        })
}

/// 400 cases per property by default (well under a second); set `LAFUSE_FUZZ_CASES` for a
/// longer run.
fn config() -> ProptestConfig {
    let cases = std::env::var("LAFUSE_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(400);
    ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
        front_end(&String::from_utf8_lossy(&bytes));
    }

    #[test]
    fn random_ascii_never_panics(text in "[ -~\n\t]{0,200}") {
        front_end(&text);
    }

    #[test]
    fn random_token_streams_never_panic(text in token_stream()) {
        front_end(&text);
    }

    #[test]
    fn mutated_scripts_never_panic(text in mutated_seed()) {
        front_end(&text);
    }
}

#[test]
fn seeds_are_valid() {
    for seed in SEEDS {
        let source = SourceFile::new("seed.dml", *seed);
        let script = parse(&source).unwrap_or_else(|e| panic!("{seed}: {e:?}"));
        let program = build_program(script).unwrap();
        let args: BTreeSet<String> = BTreeSet::new();
        check_program(&program, &args).unwrap_or_else(|e| panic!("{seed}: {e:?}"));
    }
}

#[test]
fn pathological_inputs() {
    for text in [
        "(".repeat(100_000),
        "-".repeat(100_000),
        "x = ".to_string() + &"1 + ".repeat(50_000) + "1",
        "if (1) ".repeat(10_000) + "x = 1",
        "{".repeat(10_000),
        "x = 2^".repeat(10_000) + "2",
        "[".repeat(10_000),
        "\"".to_string() + &"\\".repeat(10_001),
    ] {
        front_end(&text);
    }
}
