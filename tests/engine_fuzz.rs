//! The whole pipeline never panics: random scripts (statements over matrices of assorted
//! shapes, dense, sparse, empty and 1x1, holding NaN and infinities, with operators and
//! built-ins combined type-correctly but with arbitrary shapes) either run or fail with an
//! error that renders. Set `LAFUSE_FUZZ_TRACE=1` to see each outcome.

use lafuse::{Engine, EngineConfig, FusionBackend, FusionPolicy, ScriptArgs, SourceFile};
use proptest::prelude::*;
use proptest::sample::select;
use proptest::test_runner::RngSeed;

mod fused_at_once;

const MATRICES: [&str; 6] = ["A", "B", "v", "w", "E", "N"];

/// Matrices of several shapes (B sparse, E empty, N with NaN and infinities) and a scalar.
const PRELUDE: &str = "A = matrix(seq(1, 12), rows=3, cols=4)\n\
B = (matrix(seq(1, 12), rows=4, cols=3) %% 5 == 0) * 7\n\
v = matrix(seq(1, 3), rows=3, cols=1)\n\
w = matrix(0.5, rows=1, cols=4)\n\
E = matrix(0, rows=0, cols=3)\n\
N = matrix(\"1 NaN Inf -Inf 0 2\", rows=2, cols=3)\n\
s = 2.5\n";

/// `cases` cases from a fixed seed, so that CI runs the same scripts every time;
/// `PROPTEST_RNG_SEED=N` explores others (and `PROPTEST_CASES` is overridden by `cases`: raise
/// it in the source for a long local run).
fn config(cases: u32) -> ProptestConfig {
    let mut config = ProptestConfig {
        cases,
        ..ProptestConfig::default()
    };
    if std::env::var_os("PROPTEST_RNG_SEED").is_none() {
        config.rng_seed = RngSeed::Fixed(0x1a_f05e);
    }
    config
}

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
    #![proptest_config(config(400))]

    #[test]
    fn random_scripts_never_panic(stmts in proptest::collection::vec(statement(), 1..6)) {
        let text = format!("{PRELUDE}{}\n", stmts.join("\n"));
        let source = SourceFile::new("fuzz.dml", text);
        let mut out = Vec::new();
        let result = Engine::new(fused_at_once::config()).run(&source, &ScriptArgs::default(), &mut out);
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
    #![proptest_config(config(150))]

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
        let unfused = run_with(EngineConfig { fusion: None, ..fused_at_once::config() }, &source);
        for policy in [FusionPolicy::Gen, FusionPolicy::FuseAll, FusionPolicy::FuseNoRedundancy] {
            let fused = run_with(
                EngineConfig { fusion: Some(policy), ..fused_at_once::config() },
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

/// Inputs of the shape-correct scripts: m×n matrices (dense `X`, sparse `S`, half-sparse `T`,
/// and `N` with NaN and infinities where `S` divides by zeros), an m×1 `c`, a 1×n `r`, low-rank
/// factors `U` (m×6) and `V` (n×6) and an n×2 `W`. 400×300 opens every template, Outer (more
/// than 256 columns) included, and leaves the plans' choices to the cost model.
const SHAPED_PRELUDE: &str = "X = rand(rows=400, cols=300, min=-2, max=2, seed=1)\n\
S = rand(rows=400, cols=300, min=-1, max=3, sparsity=0.05, seed=2)\n\
T = rand(rows=400, cols=300, min=0, max=1, sparsity=0.5, seed=9)\n\
N = S / rand(rows=400, cols=300, min=-1, max=1, sparsity=0.9, seed=8)\n\
c = rand(rows=400, cols=1, min=-1, max=1, seed=3)\n\
r = rand(rows=1, cols=300, min=-1, max=1, seed=4)\n\
U = rand(rows=400, cols=6, min=-1, max=1, seed=5)\n\
V = rand(rows=300, cols=6, min=-1, max=1, seed=6)\n\
W = rand(rows=300, cols=2, min=-1, max=1, seed=10)\n\
s = 2.5\n";

/// An m×n expression: cell-wise operators with matrix, vector and scalar operands, row
/// aggregates broadcast back, `ifelse`, `replace` and the outer product `U %*% t(V)`.
/// Divisors (of `/`, `%%`, `%/%`) are kept away from zero and powers positive: the sign of a
/// zero differs between a fused operator (IEEE: `0 / -5` and `ceil(-0.5)` are `-0`) and an
/// unfused kernel that stores the result sparse (no `-0` is stored), so `s / (S / v)` is
/// `-Inf` fused and `+Inf` unfused, as between SystemDS's fused and unfused runs
/// (`README.md`, DML subset).
fn shaped_expr() -> impl Strategy<Value = String> {
    let leaf = select(vec!["X", "S", "T", "N", "X", "S", "(U %*% t(V))"]).prop_map(str::to_string);
    leaf.prop_recursive(4, 24, 2, |m| {
        let unary = select(vec![
            "exp", "log", "abs", "sqrt", "round", "floor", "ceil", "sign", "sigmoid", "tanh", "-",
        ]);
        let binary = select(vec!["+", "-", "*", "<", "<=", "==", "!=", ">", "&", "|"]);
        let side = prop_oneof![
            m.clone(),
            select(vec![
                "c", "r", "s", "0", "1", "0.5", "(0/0)", "(1/0)", "1e-15"
            ])
            .prop_map(str::to_string),
        ];
        let row_agg = select(vec!["rowMaxs", "rowMins", "rowMeans", "rowSums"]);
        prop_oneof![
            (unary, m.clone()).prop_map(|(f, a)| if f == "-" {
                format!("(-{a})")
            } else {
                format!("{f}({a})")
            }),
            (m.clone(), binary, side.clone()).prop_map(|(a, op, b)| format!("({a} {op} {b})")),
            (m.clone(), select(vec!["/", "%%", "%/%"]), side.clone())
                .prop_map(|(a, op, b)| format!("({a} {op} (abs({b}) + 1))")),
            (m.clone(), select(vec!["2", "3", "0.5"])).prop_map(|(a, p)| format!("({a} ^ {p})")),
            (select(vec!["min", "max"]), m.clone(), side.clone())
                .prop_map(|(f, a, b)| format!("{f}({a}, {b})")),
            (
                m.clone(),
                m.clone(),
                prop_oneof![
                    m.clone(),
                    select(vec!["s", "(0/0)", "-1"]).prop_map(str::to_string)
                ]
            )
                .prop_map(|(a, b, z)| format!("ifelse({a} > 0, {b}, {z})")),
            (m.clone(), select(vec!["0", "NaN", "1"]))
                .prop_map(|(a, p)| format!("replace(target={a}, pattern={p}, replacement=7)")),
            (m.clone(), row_agg, m).prop_map(|(a, f, b)| format!("({a} * {f}({b}))")),
        ]
    })
}

/// A statement printing a consumer of a shaped expression: full, row, column aggregates,
/// products with `W`, `V` and `t(U)`, an Outer-style `log(U %*% t(V) + 10)` weighting, or a
/// variable with several readers.
fn shaped_statement() -> impl Strategy<Value = String> {
    // Values print as separate tokens, each compared relative to its own magnitude: a sum of
    // two of them may cancel to rounding noise (`sum(rowSums(E)) + sum(abs(colSums(E)))` is
    // 0 or 2e-9 depending on the order of additions over values near 1e8).
    (shaped_expr(), 0usize..9).prop_map(|(e, k)| match k {
        0 => format!("print(sum({e}))"),
        1 => format!("print(min({e}) + \" \" + max({e}))"),
        2 => format!("print(sum(rowSums({e})) + \" \" + sum(abs(colSums({e}))))"),
        3 => format!("print(sum(colMins({e})) + \" \" + sum(rowMaxs({e})))"),
        4 => format!("print(sum(t(X) %*% ({e} %*% W)))"),
        5 => format!("print(sum(({e}) %*% V) + \" \" + sum(t(U) %*% ({e})))"),
        6 => format!("print(sum({e} * log(U %*% t(V) + 10)))"),
        7 => format!("Z = {e}\nprint(sum(Z) + \" \" + sum(Z^2) + \" \" + as.scalar(Z[7, 9]))"),
        _ => format!("print(sum(t(X) %*% (c * (X %*% t(r)))) + \" \" + sum({e}))"),
    })
}

proptest! {
    #![proptest_config(config(40))]

    /// Shape-correct scripts over matrices large enough for every template: each runs, and
    /// prints under every fusion policy on each backend what it prints unfused.
    #[test]
    fn shaped_scripts_print_the_same_fused_and_unfused(
        stmts in proptest::collection::vec(shaped_statement(), 2..5)
    ) {
        let text = format!("{SHAPED_PRELUDE}{}\n", stmts.join("\n"));
        check_fused_prints_unfused(&SourceFile::new("shaped.dml", text), Vec::new())?;
    }
}

/// Runs `source` unfused, which must succeed, then under every fusion policy on each backend
/// and under the `extra` configurations (named): each must run and print what it printed
/// unfused.
fn check_fused_prints_unfused(
    source: &SourceFile,
    extra: Vec<(String, EngineConfig)>,
) -> Result<(), TestCaseError> {
    let unfused = run_with(
        EngineConfig {
            fusion: None,
            ..fused_at_once::config()
        },
        source,
    );
    prop_assert!(
        unfused.is_ok(),
        "unfused failed:\n{}\n{}",
        unfused.unwrap_err(),
        source.text
    );
    let unfused = unfused.unwrap();
    let mut configs = Vec::new();
    for policy in [
        FusionPolicy::Gen,
        FusionPolicy::FuseAll,
        FusionPolicy::FuseNoRedundancy,
    ] {
        for backend in FUSION_BACKENDS {
            let config = EngineConfig {
                fusion: Some(policy),
                backend,
                ..fused_at_once::config()
            };
            configs.push((format!("{policy:?} on {backend:?}"), config));
        }
    }
    for (what, config) in configs.into_iter().chain(extra) {
        match run_with(config, source) {
            Ok(f) => prop_assert!(
                same_output(&unfused, &f),
                "{what}:\n{}\n--- unfused ---\n{unfused}\n--- fused ---\n{f}",
                source.text
            ),
            Err(e) => prop_assert!(false, "{what} failed:\n{e}\n{}", source.text),
        }
    }
    Ok(())
}

#[cfg(feature = "llvm")]
const FUSION_BACKENDS: [FusionBackend; 2] = [FusionBackend::Native, FusionBackend::Reference];
#[cfg(not(feature = "llvm"))]
const FUSION_BACKENDS: [FusionBackend; 1] = [FusionBackend::Reference];

/// The inputs of a structured script over an m×n world: dense `X`, sparse `S`, an m×1 `c`, a
/// 1×n `r`, an n×1 `v`, an n×2 `V2`, a scalar `s`, and a function `f` with two results.
fn structured_prelude(m: usize, n: usize, sparsity: f64) -> String {
    format!(
        "X = rand(rows={m}, cols={n}, min=-2, max=2, seed=1)\n\
         S = rand(rows={m}, cols={n}, min=-1, max=3, sparsity={sparsity}, seed=2)\n\
         c = rand(rows={m}, cols=1, min=0.5, max=1.5, seed=3)\n\
         r = rand(rows=1, cols={n}, min=-1, max=1, seed=4)\n\
         v = rand(rows={n}, cols=1, min=-1, max=1, seed=5)\n\
         V2 = rand(rows={n}, cols=2, min=-1, max=1, seed=6)\n\
         s = 2.5\n\
         f = function(matrix[double] A, double k) return (matrix[double] B, double t) {{\n\
         \x20 B = A * k + abs(A)\n\
         \x20 t = sum(B ^ 2)\n\
         }}\n"
    )
}

/// An m×n expression of a structured script: cell-wise operators with matrix, vector and
/// scalar operands, divisions kept away from zero, row aggregates broadcast back, and `min`.
fn structured_expr() -> impl Strategy<Value = String> {
    let leaf = select(vec!["X", "S", "(X * S)"]).prop_map(str::to_string);
    leaf.prop_recursive(3, 12, 2, |m| {
        let side = prop_oneof![
            m.clone(),
            select(vec!["c", "r", "s", "0", "1.5"]).prop_map(str::to_string),
        ];
        prop_oneof![
            (
                select(vec!["exp", "abs", "round", "sigmoid", "floor"]),
                m.clone()
            )
                .prop_map(|(f, a)| format!("{f}({a})")),
            (
                m.clone(),
                select(vec!["+", "-", "*", ">", "<=", "!=", "&"]),
                side
            )
                .prop_map(|(a, op, b)| format!("({a} {op} {b})")),
            (m.clone(), m.clone()).prop_map(|(a, b)| format!("({a} / (abs({b}) + 1))")),
            (m.clone(), m.clone()).prop_map(|(a, b)| format!("({a} * rowSums({b}))")),
            (m.clone(), m.clone()).prop_map(|(a, b)| format!("({a} - rowMaxs({b}))")),
            (m.clone(), m).prop_map(|(a, b)| format!("min({a}, {b})")),
        ]
    })
}

/// A statement of a structured script: prints of aggregates and products, reassignment of an
/// input (`X`, `S`, `c`, `s`) that later statements read, `for` and `while` loops updating
/// inputs, a function call with two results, left indexing, `cbind`, and `if`/`else`.
/// `nested` statements (inside a loop) are the flat kinds.
fn structured_statement(nested: bool) -> BoxedStrategy<String> {
    let e = structured_expr;
    let flat = prop_oneof![
        e().prop_map(|e| format!("print(sum({e}))")),
        e().prop_map(|e| format!("print(sum(colSums({e}) ^ 2))")),
        (e(), e()).prop_map(|(a, b)| format!("y = {a} %*% v\nprint(sum(y) + sum(t({b}) %*% y))")),
        e().prop_map(|e| format!("Q = t(X) %*% (({e} %*% V2) * c)\nprint(sum(Q))")),
        e().prop_map(|e| format!("X = {e}\nprint(sum(X) + nrow(X))")),
        e().prop_map(|e| format!("[B, t] = f({e}, s)\nprint(t + \" \" + sum(B))")),
        e().prop_map(|e| format!("Z = {e}\nZ[1, ] = matrix(7, 1, ncol(Z))\nprint(sum(Z * S))")),
        e().prop_map(|e| format!("W = cbind({e}, c)\nprint(sum(W - rowMaxs(W)))")),
        (e(), e(), e()).prop_map(|(a, b, c)| format!(
            "print(min({a}) + \" \" + max({b}) + \" \" + mean({c}))"
        )),
        (e(), e())
            .prop_map(|(a, b)| format!("print(sum(rowSums({a}) * c) + \" \" + sum(rowMins({b})))")),
        e().prop_map(|e| format!(
            "if (sum({e}) > 0) {{ s = s + 1 }} else {{ s = s - 1 }}\nprint(s)"
        )),
        (e(), e()).prop_map(|(a, b)| format!("print(sum(({a}) ^ 2) + \" \" + sum(({b}) * ({b})))")),
    ];
    if nested {
        return flat.boxed();
    }
    prop_oneof![
        4 => flat,
        1 => (structured_statement(true), e()).prop_map(|(body, e)| format!(
            "for (i in 1:3) {{\n{body}\nS = S * 0.5 + {e} * 0.1\n}}"
        )),
        1 => e().prop_map(|e| format!(
            "k = 0\nwhile (k < 2) {{\nk = k + 1\nc = c + rowSums({e}) * 0.01\n}}\nprint(sum(c))"
        )),
    ]
    .boxed()
}

proptest! {
    #![proptest_config(config(24))]

    /// Structured scripts (loops that update their inputs, functions, left indexing, `cbind`,
    /// branches) over worlds of assorted shapes, m×1 included: each runs, and prints under every
    /// fusion policy on each backend what it prints unfused. Variables that change between
    /// loop iterations and blocks recompiled for new sizes are what the shaped scripts lack.
    /// Native operators also run through an operator cache directory (compiled or loaded).
    #[test]
    fn structured_scripts_print_the_same_fused_and_unfused(
        m in select(vec![7usize, 120, 400]),
        n in select(vec![1usize, 5, 64, 300]),
        sparsity in select(vec![0.01, 0.05, 0.3]),
        stmts in proptest::collection::vec(structured_statement(false), 2..6)
    ) {
        let text = format!("{}{}\n", structured_prelude(m, n, sparsity), stmts.join("\n"));
        // Native operators also through an operator cache directory, one for every case and
        // every run of this test, so that they load what earlier ones kept (entries are
        // renamed into place: concurrent runs are safe).
        let mut extra = Vec::new();
        if cfg!(feature = "llvm") {
            let dir = std::env::temp_dir().join("lafuse-fuzz-operator-cache");
            let config = EngineConfig { operator_cache_dir: Some(dir), ..fused_at_once::config() };
            extra.push(("gen through a cache directory".to_string(), config));
        }
        check_fused_prints_unfused(&SourceFile::new("structured.dml", text), extra)?;
    }
}
