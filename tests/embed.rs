//! The embedding API: prepared scripts (JMLC-like) and prepared DAGs executed on the caller's
//! values, compared with the same computation run as a script, and the errors a caller gets.

use lafuse::{
    Bindings, DagBuilder, Engine, EngineConfig, Error, Fault, Matrix, ScriptArgs, SourceFile, Value,
};
use std::sync::Arc;

mod fused_at_once;

/// A deterministic matrix with values in (-1, 1), a share `density` of them non-zero.
fn matrix(rows: usize, cols: usize, seed: u64, density: f64) -> Matrix {
    let mut state = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state >> 11) as f64 / (1u64 << 53) as f64
    };
    let values = (0..rows * cols)
        .map(|_| {
            let keep = next() < density;
            let v = 2.0 * next() - 1.0;
            if keep {
                v
            } else {
                0.0
            }
        })
        .collect();
    Matrix::from_dense_values(rows, cols, values).unwrap()
}

fn engine() -> Engine {
    Engine::new(EngineConfig {
        collect_stats: true,
        ..fused_at_once::config()
    })
}

fn unfused() -> Engine {
    Engine::new(EngineConfig {
        fusion: None,
        ..fused_at_once::config()
    })
}

fn close(a: f64, b: f64) -> bool {
    a == b || (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1e-300)
}

fn assert_matrix_close(a: &Matrix, b: &Matrix) {
    assert_eq!(a.shape(), b.shape());
    for i in 0..a.rows() {
        for j in 0..a.cols() {
            assert!(
                close(a.get(i, j), b.get(i, j)),
                "({i}, {j}): {} vs {}",
                a.get(i, j),
                b.get(i, j)
            );
        }
    }
}

const SCRIPT: &str = "\
s = sum(X * Y * Z)
R = t(X) %*% (w * (X %*% v))
print(\"s \" + s)
";

fn bindings(n: usize, m: usize, seed: u64, density: f64) -> Bindings<'static> {
    let mut b = Bindings::new();
    b.matrix("X", matrix(n, m, seed, density))
        .matrix("Y", matrix(n, m, seed + 1, density))
        .matrix("Z", matrix(n, m, seed + 2, 1.0))
        .matrix("w", matrix(n, 1, seed + 3, 1.0))
        .matrix("v", matrix(m, 1, seed + 4, 1.0));
    b
}

#[test]
fn prepared_scripts_match_unfused_execution_and_compile_once() {
    let source = SourceFile::new("prepared.dml", SCRIPT);
    let inputs = ["X", "Y", "Z", "w", "v"];
    let outputs = ["s", "R"];
    let fused = engine()
        .prepare(&source, &ScriptArgs::default(), &inputs, &outputs)
        .unwrap();
    let reference = unfused()
        .prepare(&source, &ScriptArgs::default(), &inputs, &outputs)
        .unwrap();
    for (k, density) in [1.0, 0.05].into_iter().enumerate() {
        for seed in 0..3 {
            let b = bindings(300, 40, 10 * seed + 100 * k as u64, density);
            let got = fused
                .execute(&b)
                .unwrap_or_else(|e| panic!("{}", e.render(fused.source())));
            let want = reference.execute(&b).unwrap();
            assert!(close(got.scalar("s").unwrap(), want.scalar("s").unwrap()));
            assert_matrix_close(got.matrix("R").unwrap(), want.matrix("R").unwrap());
            assert!(got.printed.starts_with("s "), "{}", got.printed);
            assert!(got.stats.fused_operators_executed >= 2, "{:?}", got.stats);
            if seed > 0 {
                // Same shapes (and formats) as the first execution of this density: nothing
                // compiles again.
                assert_eq!(got.stats.blocks_compiled, 0, "{:?}", got.stats);
                assert_eq!(got.stats.operators_compiled, 0, "{:?}", got.stats);
            }
        }
    }
}

#[test]
fn prepared_scripts_skip_the_reads_of_inputs_and_the_writes_of_outputs() {
    // A script written for files, as SystemDS's JMLC runs it: the bound X is used instead of
    // the file, and Y is returned instead of written.
    let source = SourceFile::new(
        "files.dml",
        "X = read($X)\nY = X * 2\nwrite(Y, $Y)\nprint(\"done\")\n",
    );
    let prepared = engine()
        .prepare(&source, &ScriptArgs::default(), &["X"], &["Y"])
        .unwrap();
    let mut b = Bindings::new();
    b.matrix("X", matrix(5, 3, 1, 1.0));
    let out = prepared.execute(&b).unwrap();
    assert_eq!(out.printed, "done\n");
    let want = matrix(5, 3, 1, 1.0);
    let y = out.matrix("Y").unwrap();
    for i in 0..5 {
        for j in 0..3 {
            assert_eq!(y.get(i, j), 2.0 * want.get(i, j));
        }
    }
}

#[test]
fn scalar_inputs_and_outputs() {
    let source = SourceFile::new(
        "scalars.dml",
        "y = x * k\nn = nrow(M) + k\nlabel = name + \"!\"\n",
    );
    let prepared = engine()
        .prepare(
            &source,
            &ScriptArgs::default(),
            &["x", "k", "M", "name"],
            &["y", "n", "label"],
        )
        .unwrap();
    let mut b = Bindings::new();
    b.scalar("x", 2.5)
        .scalar("k", 4i64)
        .scalar("name", "hi")
        .shared_matrix("M", Arc::new(matrix(7, 2, 3, 1.0)));
    let out = prepared.execute(&b).unwrap();
    assert_eq!(out.scalar("y").unwrap(), 10.0);
    assert_eq!(out.scalar("n").unwrap(), 11.0);
    assert!(matches!(out.value("label").unwrap(), Value::Str(s) if &**s == "hi!"));
    let err = out.scalar("label").unwrap_err();
    assert_eq!(
        err.to_string(),
        "the output 'label' is a string, not a number"
    );
}

#[test]
fn a_list_output_is_a_list_value_and_not_a_number_or_matrix() {
    let source = SourceFile::new(
        "lists.dml",
        "L = list(a=X, b=k)\nL = append(L, list(c=\"s\"))\nn = length(L)\n",
    );
    let prepared = engine()
        .prepare(&source, &ScriptArgs::default(), &["X", "k"], &["L", "n"])
        .unwrap();
    let mut b = Bindings::new();
    b.matrix("X", matrix(3, 2, 5, 1.0)).scalar("k", 4i64);
    let out = prepared.execute(&b).unwrap();
    assert_eq!(out.scalar("n").unwrap(), 3.0);
    let Value::List(list) = out.value("L").unwrap() else {
        panic!("L is not a list");
    };
    let names: Vec<&str> = list.names.iter().flatten().map(String::as_str).collect();
    assert_eq!(names, ["a", "b", "c"]);
    assert_matrix_close(list.items[0].as_matrix().unwrap(), &matrix(3, 2, 5, 1.0));
    assert_eq!(list.items[1], Value::Int(4));
    assert_eq!(
        out.scalar("L").unwrap_err().to_string(),
        "the output 'L' is a list, not a number"
    );
    assert!(out.matrix("L").unwrap_err().to_string().contains("list"));
    // A list holding an input view's matrix comes back owning a copy (the view's guard would
    // abort when the bindings end if the list still shared its matrix).
    let data: Vec<f64> = (0..6).map(f64::from).collect();
    let out = {
        let mut b = Bindings::new();
        b.view("X", lafuse::MatrixView::dense(3, 2, &data).unwrap())
            .scalar("k", 1i64);
        let out = prepared.execute(&b).unwrap();
        drop(b);
        out
    };
    let Value::List(list) = out.value("L").unwrap() else {
        panic!("L is not a list");
    };
    let x = list.items[0].as_matrix().unwrap();
    assert!(!x.is_borrowed());
    assert_eq!(x.get(2, 1), 5.0);
}

#[test]
fn binding_errors_name_the_input_or_output() {
    let source = SourceFile::new("e.dml", "Y = X + 1\nif (sum(X) > 1e300) { Z = Y }\n");
    let e = engine();
    let prepared = e
        .prepare(&source, &ScriptArgs::default(), &["X"], &["Y", "Z"])
        .unwrap();
    let message = |r: Result<lafuse::Outputs, Error>| {
        let err = r.unwrap_err();
        assert_eq!(err.fault(), Fault::User);
        err.to_string()
    };
    assert_eq!(
        message(prepared.execute(&Bindings::new())),
        "the input 'X' is not bound (bind every input before executing)"
    );
    let mut extra = Bindings::new();
    extra.matrix("X", matrix(2, 2, 1, 1.0)).scalar("Q", 1.0);
    assert_eq!(
        message(prepared.execute(&extra)),
        "'Q' is not an input (the inputs are: X)"
    );
    let mut b = Bindings::new();
    b.matrix("X", matrix(2, 2, 1, 1.0));
    assert_eq!(
        message(prepared.execute(&b)),
        "the output 'Z' was not assigned by the script"
    );
    let twice = e.prepare(&source, &ScriptArgs::default(), &["X", "X"], &["Y"]);
    assert_eq!(
        twice.err().unwrap().to_string(),
        "the input name 'X' is empty or given twice"
    );
    // Without X declared as an input, the script reads an undefined variable.
    let undeclared = e.prepare(&source, &ScriptArgs::default(), &[], &["Y"]);
    assert!(undeclared
        .err()
        .unwrap()
        .to_string()
        .contains("undefined variable 'X'"));
}

#[test]
fn runtime_errors_of_prepared_scripts_point_at_the_line() {
    let source = SourceFile::new("r.dml", "A = X %*% X\n");
    let prepared = engine()
        .prepare(&source, &ScriptArgs::default(), &["X"], &["A"])
        .unwrap();
    let mut b = Bindings::new();
    b.matrix("X", matrix(2, 3, 1, 1.0));
    let err = prepared.execute(&b).unwrap_err();
    assert_eq!(err.fault(), Fault::User);
    let rendered = err.render(prepared.source());
    assert!(rendered.contains("r.dml:1:"), "{rendered}");
}

/// `sum(X*Y*Z)` and `t(X) %*% (w * (X %*% v))` as a DAG, inputs of open size.
fn pattern_dag() -> lafuse::HopDag {
    use lafuse::crates::compiler::hops::{AggOp, BinaryOp, Direction};
    let mut b = DagBuilder::new();
    let x = b.input_with("X", None, None, None);
    let y = b.input_with("Y", None, None, None);
    let z = b.input_with("Z", None, None, None);
    let w = b.input_with("w", None, None, None);
    let v = b.input_with("v", None, None, None);
    let xy = b.binary(BinaryOp::Mul, x, y).unwrap();
    let xyz = b.binary(BinaryOp::Mul, xy, z).unwrap();
    let s = b.agg(AggOp::Sum, Direction::Full, xyz).unwrap();
    b.output("s", s).unwrap();
    let xv = b.matmul(x, v).unwrap();
    let wxv = b.binary(BinaryOp::Mul, w, xv).unwrap();
    let tx = b.transpose(x).unwrap();
    let r = b.matmul(tx, wxv).unwrap();
    b.output("R", r).unwrap();
    b.build().unwrap()
}

#[test]
fn prepared_dags_match_the_script_and_reuse_their_compilation() {
    let fused = engine().prepare_dag(pattern_dag()).unwrap();
    let names: Vec<&str> = fused.inputs().iter().map(|i| i.name.as_str()).collect();
    assert_eq!(names, ["X", "Y", "Z", "w", "v"]);
    assert_eq!(fused.outputs(), ["s", "R"]);
    let source = SourceFile::new("prepared.dml", SCRIPT);
    let reference = unfused()
        .prepare(&source, &ScriptArgs::default(), &names, &["s", "R"])
        .unwrap();
    for (k, density) in [1.0, 0.05].into_iter().enumerate() {
        for seed in 0..2 {
            let b = bindings(200, 30, 7 * seed + 50 * k as u64, density);
            let got = fused.execute(&b).unwrap();
            let want = reference.execute(&b).unwrap();
            assert!(close(got.scalar("s").unwrap(), want.scalar("s").unwrap()));
            assert_matrix_close(got.matrix("R").unwrap(), want.matrix("R").unwrap());
            assert!(got.stats.fused_operators_executed >= 2, "{:?}", got.stats);
            // Compiled at the first execution only: a plan is valid for any non-zero count of
            // inputs of its shapes (the sparse inputs run the operators' CSR entry points).
            let first = k == 0 && seed == 0;
            assert_eq!(
                got.stats.blocks_compiled,
                u64::from(first),
                "{:?}",
                got.stats
            );
        }
    }
}

#[test]
fn dag_inputs_are_checked_against_their_declaration() {
    use lafuse::crates::compiler::hops::{AggOp, Direction};
    let mut b = DagBuilder::new();
    let x = b.input("X", 4, 3, 12);
    let s = b.agg(AggOp::Sum, Direction::Full, x).unwrap();
    b.output("s", s).unwrap();
    let dag = engine().prepare_dag(b.build().unwrap()).unwrap();
    let mut wrong = Bindings::new();
    wrong.matrix("X", matrix(3, 4, 1, 1.0));
    assert_eq!(
        dag.execute(&wrong).unwrap_err().to_string(),
        "the DAG input 'X' is declared 4x3 but bound to a 3x4 matrix"
    );
    let mut scalar = Bindings::new();
    scalar.scalar("X", 1.0);
    assert_eq!(
        dag.execute(&scalar).unwrap_err().to_string(),
        "the DAG input 'X' is a matrix, but a scalar was bound"
    );
    let mut right = Bindings::new();
    right.matrix("X", Matrix::filled(4, 3, 0.5).unwrap());
    assert_eq!(dag.execute(&right).unwrap().scalar("s").unwrap(), 6.0);
}

#[test]
fn one_prepared_script_serves_eight_threads_at_once() {
    let source = SourceFile::new("prepared.dml", SCRIPT);
    let inputs = ["X", "Y", "Z", "w", "v"];
    let prepared = engine()
        .prepare(&source, &ScriptArgs::default(), &inputs, &["s", "R"])
        .unwrap();
    let reference = unfused()
        .prepare(&source, &ScriptArgs::default(), &inputs, &["s", "R"])
        .unwrap();
    std::thread::scope(|scope| {
        for t in 0..8u64 {
            let (prepared, reference) = (&prepared, &reference);
            scope.spawn(move || {
                for round in 0..4 {
                    let b = bindings(
                        150,
                        20,
                        1000 * t + round,
                        if t % 2 == 0 { 1.0 } else { 0.1 },
                    );
                    let got = prepared.execute(&b).unwrap();
                    let want = reference.execute(&b).unwrap();
                    assert!(close(got.scalar("s").unwrap(), want.scalar("s").unwrap()));
                    assert_matrix_close(got.matrix("R").unwrap(), want.matrix("R").unwrap());
                }
            });
        }
    });
}

#[test]
fn views_of_the_callers_memory_are_read_in_place_and_never_returned() {
    use lafuse::MatrixView;
    let source = SourceFile::new("views.dml", "Y = X\nZ = X * 2\ns = sum(X)\n");
    let prepared = engine()
        .prepare(&source, &ScriptArgs::default(), &["X"], &["Y", "Z", "s"])
        .unwrap();
    let data: Vec<f64> = (0..12).map(f64::from).collect();
    let outputs = {
        let mut b = Bindings::new();
        b.view("X", MatrixView::dense(3, 4, &data).unwrap());
        let out = prepared.execute(&b).unwrap();
        // The bindings (and with them the view) end here; the view's guard would abort if
        // anything of the execution still shared its matrix.
        drop(b);
        out
    };
    // `Y = X` came back as an owned copy, not as the caller's memory.
    let y = outputs.matrix("Y").unwrap();
    assert!(!y.is_borrowed());
    assert_eq!(y.get(2, 3), 11.0);
    assert_eq!(outputs.matrix("Z").unwrap().get(1, 1), 10.0);
    assert_eq!(outputs.scalar("s").unwrap(), 66.0);
    assert_eq!(data[11], 11.0, "the caller's memory is never written");
}
