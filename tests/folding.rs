//! Constant folding computes exactly what execution computes. Both call the scalar semantics
//! of `lafuse-core`, but folding adds DML's scalar typing around them (integers, booleans), so
//! every unary and binary operator is run twice on special values: on literals, which the
//! compiler folds, and on 1x1 matrices, which the runtime kernels compute. The printed values
//! must agree.

use lafuse::{Engine, ScriptArgs, SourceFile};

mod fused_at_once;

/// Special values as DML expressions, parenthesised because `-1 ^ 2` is `-(1 ^ 2)` in DML
/// (NaN and infinities are folded from 0/0 and 1/0). Negative zero is left out: a matrix
/// filled with -0.0 stores +0.0.
const VALUES: [&str; 12] = [
    "(0)",
    "(1)",
    "(-1)",
    "(2)",
    "(2.5)",
    "(-2.5)",
    "(0.5)",
    "(1e300)",
    "(-1e-300)",
    "(0/0)",
    "(1/0)",
    "(-1/0)",
];

const UNARY: [&str; 19] = [
    "abs", "exp", "log", "sqrt", "round", "floor", "ceil", "sign", "sin", "cos", "tan", "asin",
    "acos", "atan", "sinh", "cosh", "tanh", "sigmoid", "-",
];

const BINARY: [&str; 17] = [
    "+", "-", "*", "/", "^", "%%", "%/%", "<", "<=", ">", ">=", "==", "!=", "&", "|", "min", "max",
];

fn run(script: &str) -> Vec<String> {
    let source = SourceFile::new("folding.dml", script);
    let mut out = Vec::new();
    Engine::new(fused_at_once::config())
        .run(&source, &ScriptArgs::default(), &mut out)
        .unwrap_or_else(|e| panic!("{}", e.render(&source)));
    String::from_utf8(out)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

/// Printed numbers as doubles (`TRUE`/`FALSE` as 1/0), so an integer `7` equals a double `7.0`.
fn value(printed: &str) -> f64 {
    match printed {
        "TRUE" => 1.0,
        "FALSE" => 0.0,
        other => other
            .replace("Infinity", "inf")
            .parse()
            .unwrap_or_else(|_| panic!("not a number: {other}")),
    }
}

fn same(a: f64, b: f64) -> bool {
    (a.is_nan() && b.is_nan()) || a == b
}

fn check(cases: Vec<(String, String, String)>) {
    let folded = run(&cases
        .iter()
        .map(|(_, f, _)| format!("print({f})\n"))
        .collect::<String>());
    let executed = run(&cases
        .iter()
        .map(|(_, _, e)| format!("print(as.scalar({e}))\n"))
        .collect::<String>());
    let mismatches: Vec<String> = cases
        .iter()
        .zip(folded.iter().zip(&executed))
        .filter(|(_, (f, e))| !same(value(f), value(e)))
        .map(|((name, _, _), (f, e))| format!("{name}: folded {f}, executed {e}"))
        .collect();
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
}

fn matrix(v: &str) -> String {
    format!("matrix({v}, rows=1, cols=1)")
}

#[test]
fn unary_operators_fold_as_they_execute() {
    let mut cases = Vec::new();
    for op in UNARY {
        for v in VALUES {
            let call = |x: &str| {
                if op == "-" {
                    format!("-({x})")
                } else {
                    format!("{op}({x})")
                }
            };
            cases.push((call(v), call(v), call(&matrix(v))));
        }
    }
    check(cases);
}

#[test]
fn binary_operators_fold_as_they_execute() {
    let mut cases = Vec::new();
    for op in BINARY {
        for a in VALUES {
            for b in VALUES {
                let call = |x: &str, y: &str| {
                    if op == "min" || op == "max" {
                        format!("{op}({x}, {y})")
                    } else {
                        format!("({x} {op} {y})")
                    }
                };
                // Integer %/% by zero is a runtime error in SystemDS; compare on doubles.
                let a_double = format!("({a} + 0.0)");
                cases.push((
                    call(&a_double, b),
                    call(&a_double, b),
                    call(&matrix(&a_double), &matrix(b)),
                ));
            }
        }
    }
    check(cases);
}
