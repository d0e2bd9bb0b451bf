//! The whole pipeline never panics: random scripts (statements over matrices of assorted
//! shapes, including empty and 1x1 ones, with operators and built-ins applied in arbitrary,
//! often ill-typed, combinations) either run or fail with an error.

use lafuse::{Engine, EngineConfig, ScriptArgs, SourceFile};
use proptest::prelude::*;

const VARS: [&str; 6] = ["A", "B", "v", "w", "s", "E"];

/// The prelude binds matrices of several shapes (one sparse, one empty) and a scalar.
const PRELUDE: &str = "A = matrix(seq(1, 12), rows=3, cols=4)\n\
B = (matrix(seq(1, 12), rows=4, cols=3) %% 5 == 0) * 7\n\
v = matrix(seq(1, 3), rows=3, cols=1)\n\
w = matrix(0.5, rows=1, cols=4)\n\
s = 2.5\n\
E = matrix(0, rows=0, cols=3)\n";

fn atom() -> impl Strategy<Value = String> {
    prop_oneof![
        proptest::sample::select(VARS.to_vec()).prop_map(str::to_string),
        proptest::sample::select(vec!["0", "1", "-1", "0.5", "1e300", "TRUE", "\"x\""])
            .prop_map(str::to_string),
    ]
}

fn expr() -> impl Strategy<Value = String> {
    atom().prop_recursive(4, 24, 3, |inner| {
        let binary = proptest::sample::select(vec![
            "+", "-", "*", "/", "^", "%%", "%/%", "%*%", "<", "==", "&", "|",
        ]);
        let unary = proptest::sample::select(vec![
            "t",
            "sum",
            "rowSums",
            "colMeans",
            "exp",
            "log",
            "sqrt",
            "abs",
            "nrow",
            "as.scalar",
            "cumsum",
            "diag",
            "max",
            "var",
            "round",
            "sigmoid",
        ]);
        prop_oneof![
            (inner.clone(), binary, inner.clone()).prop_map(|(a, op, b)| format!("({a} {op} {b})")),
            (unary, inner.clone()).prop_map(|(f, a)| format!("{f}({a})")),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("cbind({a}, {b})")),
            (inner.clone(), inner.clone(), inner.clone())
                .prop_map(|(c, a, b)| format!("ifelse({c}, {a}, {b})")),
            (inner.clone(), 0i64..5, 0i64..6).prop_map(|(a, i, j)| format!("{a}[{i}, {j}]")),
            (inner.clone(), 0i64..5).prop_map(|(a, i)| format!("matrix({a}, rows={i}, cols=2)")),
            (inner, 0i64..4).prop_map(|(a, k)| format!("solve({a}, matrix(1, rows={k}, cols=1))")),
        ]
    })
}

fn statement() -> impl Strategy<Value = String> {
    let target = proptest::sample::select(VARS.to_vec());
    prop_oneof![
        (target.clone(), expr()).prop_map(|(t, e)| format!("{t} = {e}")),
        (target, 0i64..5, 0i64..5, expr()).prop_map(|(t, i, j, e)| format!("{t}[{i}, {j}] = {e}")),
        expr().prop_map(|e| format!("print({e})")),
        expr().prop_map(|e| format!("if ({e}) {{ print(1) }} else {{ print(2) }}")),
        expr().prop_map(|e| format!("for (i in 1:3) {{ s = s + sum({e}) }}")),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn random_scripts_never_panic(stmts in proptest::collection::vec(statement(), 1..6)) {
        let text = format!("{PRELUDE}{}\n", stmts.join("\n"));
        let source = SourceFile::new("fuzz.dml", text);
        let mut out = Vec::new();
        // Ok or Err are both fine; a panic fails the test. Errors must render.
        if let Err(e) = Engine::new(EngineConfig::default()).run(&source, &ScriptArgs::default(), &mut out) {
            let rendered = e.render(&source);
            prop_assert!(!rendered.is_empty());
        }
    }
}
