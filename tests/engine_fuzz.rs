//! The whole pipeline never panics: random scripts (statements over matrices of assorted
//! shapes, dense, sparse, empty and 1x1, holding NaN and infinities, with operators and
//! built-ins combined type-correctly but with arbitrary shapes) either run or fail with an
//! error that renders. Set `LAFUSE_FUZZ_TRACE=1` to see each outcome.

use lafuse::{Engine, EngineConfig, FusionPolicy, ScriptArgs, SourceFile};
use proptest::prelude::*;
use proptest::sample::select;

const MATRICES: [&str; 6] = ["A", "B", "v", "w", "E", "N"];

/// Matrices of several shapes (B sparse, E empty, N with NaN and infinities) and a scalar.
const PRELUDE: &str = "A = matrix(seq(1, 12), rows=3, cols=4)\n\
B = (matrix(seq(1, 12), rows=4, cols=3) %% 5 == 0) * 7\n\
v = matrix(seq(1, 3), rows=3, cols=1)\n\
w = matrix(0.5, rows=1, cols=4)\n\
E = matrix(0, rows=0, cols=3)\n\
N = matrix(\"1 NaN Inf -Inf 0 2\", rows=2, cols=3)\n\
s = 2.5\n";

fn scalar_atom() -> impl Strategy<Value = String> {
    select(vec![
        "s", "0", "1", "-1", "0.5", "3", "1e300", "(0/0)", "(1/0)",
    ])
    .prop_map(str::to_string)
}

fn matrix_atom() -> impl Strategy<Value = String> {
    prop_oneof![
        select(MATRICES.to_vec()).prop_map(str::to_string),
        (0i64..4, 0i64..4).prop_map(|(r, c)| format!("matrix(1, rows={r}, cols={c})")),
        (1i64..5, 1i64..5, 0i64..3)
            .prop_map(|(r, c, k)| format!("rand(rows={r}, cols={c}, sparsity=0.{k}, seed={k})")),
    ]
}

fn matrix_expr() -> impl Strategy<Value = String> {
    matrix_atom().prop_recursive(3, 16, 2, |m| {
        let binary = select(vec![
            "+", "-", "*", "/", "^", "%%", "%/%", "<", "==", "&", "|", "%*%",
        ]);
        let unary = select(vec![
            "t", "exp", "log", "sqrt", "abs", "round", "sigmoid", "cumsum", "rowSums", "colMeans",
            "rowMaxs", "colVars", "diag", "sign",
        ]);
        prop_oneof![
            (m.clone(), binary.clone(), m.clone()).prop_map(|(a, op, b)| format!("({a} {op} {b})")),
            (m.clone(), binary, scalar_atom()).prop_map(|(a, op, b)| format!("({a} {op} {b})")),
            (unary, m.clone()).prop_map(|(f, a)| format!("{f}({a})")),
            (m.clone(), m.clone()).prop_map(|(a, b)| format!("cbind({a}, {b})")),
            (m.clone(), m.clone()).prop_map(|(a, b)| format!("rbind({a}, {b})")),
            (m.clone(), m.clone()).prop_map(|(a, b)| format!("ifelse({a} > 1, {a}, {b})")),
            (m.clone(), 0i64..5).prop_map(|(a, k)| format!("matrix({a}, rows={k}, cols=2)")),
            (m.clone(), m.clone()).prop_map(|(a, b)| format!("solve({a}, {b})")),
            (m, scalar_atom())
                .prop_map(|(a, x)| format!("replace(target={a}, pattern=0, replacement={x})")),
            (select(MATRICES.to_vec()), 0i64..5, 0i64..5, 0i64..5)
                .prop_map(|(x, i, j, k)| format!("{x}[{i}:{j}, {k}]")),
        ]
    })
}

fn scalar_expr() -> impl Strategy<Value = String> {
    prop_oneof![
        scalar_atom(),
        (
            select(vec![
                "sum", "mean", "max", "min", "prod", "var", "sd", "nrow", "length"
            ]),
            matrix_expr()
        )
            .prop_map(|(f, m)| format!("{f}({m})")),
        (select(MATRICES.to_vec()), 0i64..5, 0i64..5)
            .prop_map(|(x, i, j)| format!("as.scalar({x}[{i}, {j}])")),
        (
            scalar_atom(),
            select(vec!["+", "*", "/", "%%", "^", "<"]),
            scalar_atom()
        )
            .prop_map(|(a, op, b)| format!("({a} {op} {b})")),
    ]
}

fn statement() -> impl Strategy<Value = String> {
    prop_oneof![
        (select(MATRICES.to_vec()), matrix_expr()).prop_map(|(t, e)| format!("{t} = {e}")),
        scalar_expr().prop_map(|e| format!("s = {e}")),
        (select(MATRICES.to_vec()), 0i64..5, 0i64..5, scalar_expr())
            .prop_map(|(t, i, j, e)| format!("{t}[{i}, {j}] = {e}")),
        (select(MATRICES.to_vec()), 0i64..5, matrix_expr())
            .prop_map(|(t, i, e)| format!("{t}[{i}, ] = {e}")),
        scalar_expr().prop_map(|e| format!("print({e})")),
        matrix_expr().prop_map(|e| format!("print(toString({e}, decimal=2))")),
        scalar_expr().prop_map(|e| format!("if ({e} > 1) {{ s = s + 1 }} else {{ s = s - 1 }}")),
        matrix_expr().prop_map(|e| format!("for (i in 1:3) {{ s = s + sum({e}) }}")),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn random_scripts_never_panic(stmts in proptest::collection::vec(statement(), 1..6)) {
        let text = format!("{PRELUDE}{}\n", stmts.join("\n"));
        let source = SourceFile::new("fuzz.dml", text);
        let mut out = Vec::new();
        let result = Engine::new(EngineConfig::default()).run(&source, &ScriptArgs::default(), &mut out);
        if std::env::var_os("LAFUSE_FUZZ_TRACE").is_some() {
            let outcome = match &result {
                Ok(_) => "OK".to_string(),
                Err(e) => e.to_string().lines().next().unwrap_or("").to_string(),
            };
            eprintln!("{outcome}");
        }
        // Ok and Err are both fine; a panic fails the test. Errors must render.
        if let Err(e) = result {
            prop_assert!(!e.render(&source).is_empty());
        }
    }
}

/// Whether two printed outputs agree: same tokens, numbers within 1e-9 relative (sums are
/// reordered by fusion) or 1e-9 absolute.
fn same_output(a: &str, b: &str) -> bool {
    let (ta, tb): (Vec<&str>, Vec<&str>) = (
        a.split_whitespace().collect(),
        b.split_whitespace().collect(),
    );
    ta.len() == tb.len()
        && ta
            .iter()
            .zip(&tb)
            .all(|(x, y)| match (x.parse::<f64>(), y.parse::<f64>()) {
                (Ok(p), Ok(q)) => {
                    p == q
                        || (p.is_nan() && q.is_nan())
                        || (p - q).abs() <= 1e-9 * (1.0 + p.abs().max(q.abs()))
                }
                _ => x == y,
            })
}

fn run_with(config: EngineConfig, source: &SourceFile) -> Result<String, String> {
    let mut out = Vec::new();
    Engine::new(config)
        .run(source, &ScriptArgs::default(), &mut out)
        .map(|_| String::from_utf8_lossy(&out).into_owned())
        .map_err(|e| e.render(source))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 150, ..ProptestConfig::default() })]

    /// Fused execution (every policy, on the default backend) prints what unfused execution
    /// prints, NaN and infinities included: a sparse-safe fused operator skips its main
    /// input's zeros only where its body is provably 0 there (`X * exp(Y)` at a zero of X is
    /// NaN where `exp(Y)` overflows, fused as unfused).
    #[test]
    fn fused_execution_prints_what_unfused_execution_prints(
        stmts in proptest::collection::vec(statement(), 1..6)
    ) {
        let text = format!("{PRELUDE}{}\n", stmts.join("\n"));
        let source = SourceFile::new("fuzz.dml", text);
        let unfused = run_with(EngineConfig { fusion: None, ..EngineConfig::default() }, &source);
        for policy in [FusionPolicy::Gen, FusionPolicy::FuseAll, FusionPolicy::FuseNoRedundancy] {
            let fused = run_with(
                EngineConfig { fusion: Some(policy), ..EngineConfig::default() },
                &source,
            );
            match (&unfused, &fused) {
                (Ok(u), Ok(f)) => {
                    prop_assert!(same_output(u, f), "{policy:?}:\n{}\n--- unfused ---\n{u}\n--- fused ---\n{f}", source.text);
                }
                (Ok(u), Err(e)) => prop_assert!(false, "{policy:?}: fused failed:\n{e}\n--- unfused ---\n{u}\n{}", source.text),
                (Err(_), _) => {}
            }
        }
    }
}
