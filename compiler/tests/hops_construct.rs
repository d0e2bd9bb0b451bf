//! DAG construction from DML scripts: typing, folding, shapes and their errors, ordering, CSE.

mod hops_common;
use hops_common::*;

use lafuse_compiler::hops::{
    self, linearize, AggOp, BinaryOp, BlockInputs, DataType, Direction, InputMeta, Literal, OpKind,
    ScriptArgs, UnaryOp, ValueType,
};
use lafuse_compiler::span::SourceFile;
use lafuse_compiler::Fault;

fn none() -> BlockInputs {
    BlockInputs::new()
}

#[test]
fn scalar_typing_rules_fold_like_systemds() {
    let cases: &[(&str, Literal)] = &[
        ("5+2", Literal::Int(7)),
        ("2^3", Literal::Double(8.0)),
        ("7/7", Literal::Double(1.0)),
        ("7 %/% 2", Literal::Int(3)),
        ("-7 %% 2", Literal::Int(-1)),
        ("5.0 + 2", Literal::Double(7.0)),
        ("TRUE + TRUE", Literal::Double(2.0)),
        ("TRUE == 1", Literal::Bool(true)),
        ("5 > 2", Literal::Bool(true)),
        ("as.integer(3.7)", Literal::Int(3)),
        ("abs(-3)", Literal::Int(3)),
        ("round(3)", Literal::Double(3.0)),
        ("min(2, 3, 1)", Literal::Int(1)),
        ("min(2, 3.0, 1)", Literal::Double(1.0)),
        ("max(3, 4.0)", Literal::Double(4.0)),
        ("ifelse(TRUE, 1, 2.5)", Literal::Double(1.0)),
        ("ifelse(FALSE, 1, 2)", Literal::Int(2)),
        ("\"a\" + 1", Literal::Str("a1".into())),
        ("5 + 3 + \"x\"", Literal::Str("8x".into())),
        ("\"x\" + 5 + 3", Literal::Str("x53".into())),
        ("-2^2", Literal::Double(-4.0)),
        ("2^3^2", Literal::Double(512.0)),
        ("log(8, 2)", Literal::Double(3.0)),
        ("9223372036854775807 + 1", Literal::Int(i64::MIN)),
    ];
    for (expr, want) in cases {
        let d = dag(&format!("v = {expr}\n"), &none());
        assert_eq!(output_literal(&d, "v").as_ref(), Some(want), "{expr}");
    }
}

#[test]
fn typing_errors_are_user_errors_with_spans() {
    for (script, needle) in [
        ("v = TRUE + 1\n", "invalid value types"),
        ("v = -TRUE\n", "invalid value type"),
        ("v = min(3, TRUE)\n", "invalid value types"),
        ("v = 2 * \"a\"\n", "invalid value types"),
    ] {
        let err = try_dag(script, &none()).unwrap_err();
        assert_eq!(err.fault(), Fault::User, "{script}");
        assert!(err.to_string().contains(needle), "{script}: {}", err);
        let span = err.span.expect("span");
        assert!(
            span.start >= 4 && span.end as usize <= script.len(),
            "{script}: {span:?}"
        );
    }
}

#[test]
fn integer_division_by_zero_is_left_to_the_runtime() {
    let d = dag("v = 5 %/% 0\n", &none());
    let v = d.hop(output(&d, "v"));
    assert_eq!(v.op, OpKind::Binary(BinaryOp::IntDiv));
    assert_eq!(v.value_type, ValueType::Int);
}

#[test]
fn sizes_of_a_typical_script() {
    let inputs = matrices(&[("X", 100, 10, 500), ("y", 100, 1, 100)]);
    let script = "\
n = nrow(X)
w = matrix(0, rows=ncol(X), cols=1)
g = t(X) %*% (X %*% w - y)
s = sum(X^2)
r = rowSums(X * 2)
c = colMeans(X)
Z = cbind(X, y)
Q = X[1:10, 2:3]
";
    let d = dag(script, &inputs);
    assert_eq!(output_literal(&d, "n"), Some(Literal::Int(100)));
    let dims = |name: &str| d.hop(output(&d, name)).dims();
    assert_eq!(dims("w"), Some((10, 1)));
    assert_eq!(d.hop(output(&d, "w")).nnz, Some(0));
    assert_eq!(dims("g"), Some((10, 1)));
    assert_eq!(d.hop(output(&d, "s")).data_type, DataType::Scalar);
    assert_eq!(dims("r"), Some((100, 1)));
    assert_eq!(d.hop(output(&d, "r")).nnz, Some(100));
    assert_eq!(dims("c"), Some((1, 10)));
    assert_eq!(dims("Z"), Some((100, 11)));
    assert_eq!(d.hop(output(&d, "Z")).nnz, Some(600));
    assert_eq!(dims("Q"), Some((10, 2)));
    assert!(matches!(
        d.hop(output(&d, "r")).op,
        OpKind::AggUnary {
            op: AggOp::Sum,
            dir: Direction::Row
        }
    ));
}

/// The deep-learning built-ins are sized by their geometry's scalars, as SystemDS sizes them
/// (`DnnUtils.getP`); a geometry that gives no output image leaves the size to the kernel.
#[test]
fn deep_learning_built_ins_are_sized_by_their_geometry() {
    let inputs = matrices(&[
        ("X", 4, 2 * 7 * 6, 84),
        ("F", 3, 2 * 3 * 3, 18),
        ("b", 3, 1, 3),
    ]);
    let script = "\
Y = conv2d(X, F, input_shape=[4, 2, 7, 6], filter_shape=[3, 2, 3, 3], stride=[2, 1], padding=[1, 0])
dF = conv2d_backward_filter(X, Y, input_shape=[4, 2, 7, 6], filter_shape=[3, 2, 3, 3], stride=[2, 1], padding=[1, 0])
dX = conv2d_backward_data(F, Y, input_shape=[4, 2, 7, 6], filter_shape=[3, 2, 3, 3], stride=[2, 1], padding=[1, 0])
M = max_pool(X, input_shape=[4, 2, 7, 6], pool_size=[3, 2], stride=[2, 2], padding=[0, 0])
dM = avg_pool_backward(X, M, input_shape=[4, 2, 7, 6], pool_size=[3, 2], stride=[2, 2], padding=[0, 0])
B = bias_add(Y, b)
U = conv2d(X, F, input_shape=[4, 2, 2, 6], filter_shape=[3, 2, 3, 3], stride=[1, 1], padding=[0, 0])
";
    let d = dag(script, &inputs);
    let dims = |name: &str| d.hop(output(&d, name)).dims();
    // P = (7 + 2 - 3) / 2 + 1 = 4, Q = (6 - 3) / 1 + 1 = 4.
    assert_eq!(dims("Y"), Some((4, 3 * 4 * 4)));
    assert_eq!(dims("dF"), Some((3, 18)));
    assert_eq!(dims("dX"), Some((4, 84)));
    // P = (7 - 3) / 2 + 1 = 3, Q = (6 - 2) / 2 + 1 = 3, one per channel.
    assert_eq!(dims("M"), Some((4, 2 * 3 * 3)));
    assert_eq!(dims("dM"), Some((4, 84)));
    assert_eq!(dims("B"), Some((4, 48)));
    // A 2-pixel-high image under a 3-pixel filter: no output image, no columns known.
    assert_eq!(d.hop(output(&d, "U")).cols, None);
    let err = try_dag("Y = conv2d(X, 3, input_shape=[1, 1, 1, 1], filter_shape=[1, 1, 1, 1], stride=[1, 1], padding=[0, 0])\n", &inputs).unwrap_err();
    assert_eq!(err.fault(), Fault::User);
}

#[test]
fn sparsity_estimates() {
    let inputs = matrices(&[("A", 1000, 1000, 10_000), ("B", 1000, 1000, 20_000)]);
    let d = dag(
        "M = A * B\nP = A + B\nE = exp(A)\nC = A %*% B\nS = A * 0.5\nT = A + 1\n",
        &inputs,
    );
    let nnz = |name: &str| d.hop(output(&d, name)).nnz;
    assert_eq!(nnz("M"), Some(10_000));
    assert_eq!(nnz("P"), Some(30_000));
    assert_eq!(nnz("E"), Some(1_000_000));
    // 1 - (1 - 0.01 * 0.02)^1000 = 0.1813 of 10^6 cells.
    let c = nnz("C").unwrap();
    assert!((181_000..=182_000).contains(&c), "{c}");
    assert_eq!(nnz("S"), Some(10_000));
    assert_eq!(nnz("T"), Some(1_000_000));
}

#[test]
fn scalar_inputs_with_values_act_as_literals() {
    let mut inputs = BlockInputs::new();
    inputs.insert("n".into(), InputMeta::scalar(Literal::Int(7)));
    inputs.insert(
        "k".into(),
        InputMeta::Scalar {
            value_type: ValueType::Int,
            value: None,
        },
    );
    let d = dag(
        "A = matrix(1, rows=n, cols=n+1)\nB = matrix(1, rows=k, cols=2)\n",
        &inputs,
    );
    assert_eq!(d.hop(output(&d, "A")).dims(), Some((7, 8)));
    let b = d.hop(output(&d, "B"));
    assert_eq!((b.rows, b.cols), (None, Some(2)));
}

#[test]
fn shape_errors_point_at_the_expression_and_name_both_shapes() {
    let inputs = matrices(&[("A", 3, 4, 12), ("B", 3, 4, 12), ("v", 4, 1, 4)]);
    let cases = [
        ("C = A %*% B\n", "A %*% B", "3x4"),
        ("C = A + v\n", "A + v", "4x1"),
        ("C = cbind(A, v)\n", "cbind(A, v)", "4x1"),
        ("C = A[4, 1]\n", "A[4, 1]", "3x4"),
        ("C = A[0, 1]\n", "A[0, 1]", "3x4"),
        ("C = A[2:1, 1]\n", "A[2:1, 1]", "3x4"),
        ("x = as.scalar(A)\n", "as.scalar(A)", "3x4"),
        (
            "C = matrix(A, rows=5, cols=5)\n",
            "matrix(A, rows=5, cols=5)",
            "3x4",
        ),
    ];
    for (script, offending, shape) in cases {
        let err = try_dag(script, &inputs).unwrap_err();
        assert_eq!(err.fault(), Fault::User, "{script}");
        let span = err.span.expect("span");
        assert_eq!(&script[span.range()], offending, "{script}: {}", err);
        assert!(err.to_string().contains(shape), "{script}: {}", err);
        let rendered = err.render(&SourceFile::new("t.dml", script));
        assert!(rendered.contains('^'), "{rendered}");
    }
}

#[test]
fn broadcasting_accepts_vectors_on_the_right() {
    let inputs = matrices(&[
        ("X", 3, 4, 12),
        ("r", 1, 4, 4),
        ("c", 3, 1, 3),
        ("one", 1, 1, 1),
    ]);
    let d = dag("A = X + r\nB = X * c\nD = X / one\n", &inputs);
    for name in ["A", "B", "D"] {
        assert_eq!(d.hop(output(&d, name)).dims(), Some((3, 4)), "{name}");
    }
    // SystemDS 3.4 rejects a vector on the left and column-vector-op-row-vector.
    assert!(try_dag("E = r + X\n", &inputs).is_err());
    assert!(try_dag("C = c - r\n", &inputs).is_err());
}

#[test]
fn prints_see_the_value_at_their_statement() {
    let d = dag("x = 1\nprint(x)\nx = 2\nprint(x)\n", &none());
    let prints: Vec<_> = linearize(&d)
        .into_iter()
        .filter(|&h| d.hop(h).op == OpKind::Print)
        .collect();
    assert_eq!(prints.len(), 2);
    let printed: Vec<_> = prints
        .iter()
        .map(|&p| d.literal_of(d.hop(p).inputs[0]).cloned())
        .collect();
    assert_eq!(printed, vec![Some(Literal::Int(1)), Some(Literal::Int(2))]);
    assert_eq!(output_literal(&d, "x"), Some(Literal::Int(2)));
}

#[test]
fn side_effects_run_in_statement_order_and_writes_last() {
    let inputs = matrices(&[("X", 10, 10, 100)]);
    let d = dag(
        "Y = X * 2\nprint(\"a\")\nZ = Y + X\nprint(sum(Z))\nY = X\nstop(\"done\")\n",
        &inputs,
    );
    let order = linearize(&d);
    let kinds: Vec<String> = order
        .iter()
        .filter(|&&h| d.hop(h).op.is_sink())
        .map(|&h| d.hop(h).op.display_name())
        .collect();
    assert_eq!(kinds, ["print", "print", "stop", "TWrite Z", "TWrite Y"]);
    // Inputs before users, each hop once.
    let mut pos = vec![usize::MAX; d.len()];
    for (i, h) in order.iter().enumerate() {
        assert_eq!(pos[h.index()], usize::MAX);
        pos[h.index()] = i;
    }
    for &h in &order {
        for i in &d.hop(h).inputs {
            assert!(pos[i.index()] < pos[h.index()]);
        }
    }
}

#[test]
fn reads_of_reassigned_variables_see_block_entry_values() {
    let inputs = matrices(&[("X", 2, 2, 4)]);
    // Z uses the entry value of X although X is reassigned before Z's final assignment.
    let d = dag("Z = X\nX = X + 1\nZ = Z * 3\n", &inputs);
    let order = linearize(&d);
    let tread = order
        .iter()
        .position(|&h| matches!(d.hop(h).op, OpKind::TransientRead { .. }))
        .unwrap();
    let first_write = order
        .iter()
        .position(|&h| matches!(d.hop(h).op, OpKind::TransientWrite { .. }))
        .unwrap();
    assert!(tread < first_write);
}

#[test]
fn cse_merges_pure_duplicates_but_not_random_or_side_effects() {
    let inputs = matrices(&[("X", 10, 10, 100)]);
    let script = "\
A = exp(X) + exp(X)
R1 = rand(rows=2, cols=2)
R2 = rand(rows=2, cols=2)
S1 = rand(rows=2, cols=2, seed=7)
S2 = rand(rows=2, cols=2, seed=7)
print(\"x\")
print(\"x\")
";
    let raw = raw_dag(script, &inputs);
    let opt = dag(script, &inputs);
    let count = |d: &hops::HopDag, f: &dyn Fn(&OpKind) -> bool| {
        linearize(d)
            .into_iter()
            .filter(|&h| f(&d.hop(h).op))
            .count()
    };
    let is_exp = |op: &OpKind| *op == OpKind::Unary(hops::UnaryOp::Exp);
    let is_rand = |op: &OpKind| *op == OpKind::DataGen(hops::DataGenOp::Rand);
    assert_eq!(count(&raw, &is_exp), 2);
    assert_eq!(count(&opt, &is_exp), 1);
    assert_eq!(count(&raw, &is_rand), 4);
    assert_eq!(
        count(&opt, &is_rand),
        3,
        "unseeded rands stay apart, seeded ones merge"
    );
    assert_eq!(count(&opt, &|op| *op == OpKind::Print), 2);
    let a = opt.hop(output(&opt, "A"));
    assert_eq!(a.inputs[0], a.inputs[1]);
    assert_eq!(output(&opt, "S1"), output(&opt, "S2"));
    assert_ne!(output(&opt, "R1"), output(&opt, "R2"));
}

#[test]
fn algebraic_simplifications_are_exact_only() {
    let inputs = matrices(&[("X", 4, 4, 16)]);
    let d = dag("A = X * 1\nB = t(t(X))\nC = X + 0\nD = X - 0\n", &inputs);
    let x = d
        .ids()
        .find(|&h| matches!(d.hop(h).op, OpKind::TransientRead { .. }))
        .unwrap();
    assert_eq!(output(&d, "A"), x);
    assert_eq!(output(&d, "B"), x);
    assert_eq!(output(&d, "D"), x);
    // X + 0 turns -0.0 into 0.0, so it stays.
    assert_eq!(d.hop(output(&d, "C")).op, OpKind::Binary(BinaryOp::Add));
}

#[test]
fn comparison_chains_rewrite_as_systemds() {
    let inputs = matrices(&[("X", 4, 4, 16)]);
    let d = dag(
        "A = (X < 1) == 0\nB = (X > 2) == 1\nC = (X <= 3) != 0\nD = !(X == 0)\n\
         E = (X < 1) != 1\nF = X < 5\nG = !F\nH = !(X >= 2)\n",
        &inputs,
    );
    let op = |name: &str| d.hop(output(&d, name)).op.clone();
    assert_eq!(op("A"), OpKind::Binary(BinaryOp::Ge));
    assert_eq!(op("B"), OpKind::Binary(BinaryOp::Gt));
    assert_eq!(op("C"), OpKind::Binary(BinaryOp::Le));
    assert_eq!(op("D"), OpKind::Binary(BinaryOp::Ne));
    // SystemDS leaves `!= 1`, a negated comparison that is read elsewhere, and `!(>=)`.
    assert_eq!(op("E"), OpKind::Binary(BinaryOp::Ne));
    assert_eq!(op("G"), OpKind::Unary(UnaryOp::Not));
    assert_eq!(op("H"), OpKind::Unary(UnaryOp::Not));
}

#[test]
fn script_arguments_and_ifdef() {
    let mut args = ScriptArgs::new();
    args.insert("n", "5");
    args.insert("f", "out.csv");
    let stmts = block_of("a = $n + 1\nb = ifdef($m, 2.5)\nc = ifdef($n, 0)\nd = $f\n");
    let d = hops::build_block_dag(&stmts, &BlockInputs::new(), &args).unwrap();
    assert_eq!(output_literal(&d, "a"), Some(Literal::Int(6)));
    assert_eq!(output_literal(&d, "b"), Some(Literal::Double(2.5)));
    assert_eq!(output_literal(&d, "c"), Some(Literal::Int(5)));
    assert_eq!(
        output_literal(&d, "d"),
        Some(Literal::Str("out.csv".into()))
    );
    let err =
        hops::build_block_dag(&block_of("a = $zz\n"), &BlockInputs::new(), &args).unwrap_err();
    assert!(err.to_string().contains("$zz"));
}

#[test]
fn left_indexing_and_unknown_bounds() {
    let mut inputs = matrices(&[("X", 5, 5, 25)]);
    inputs.insert(
        "i".into(),
        InputMeta::Scalar {
            value_type: ValueType::Int,
            value: None,
        },
    );
    let d = dag(
        "X[2:3, ] = matrix(0, rows=2, cols=5)\nr = X[i, ]\n",
        &inputs,
    );
    let x = d.hop(output(&d, "X"));
    assert_eq!(x.op, OpKind::LeftIndex);
    assert_eq!(x.dims(), Some((5, 5)));
    // A single (unknown) row index still gives one row.
    assert_eq!(d.hop(output(&d, "r")).dims(), Some((1, 5)));
    let err = try_dag("X[1:2, 1] = matrix(0, rows=3, cols=1)\n", &inputs).unwrap_err();
    assert!(err.to_string().contains("3x1"), "{}", err.to_string());
}

#[test]
fn expression_dags_write_one_scalar() {
    let inputs = matrices(&[("X", 3, 3, 9)]);
    let e = lafuse_compiler::ast::Expr {
        kind: lafuse_compiler::ast::ExprKind::Binary {
            op: lafuse_compiler::ast::BinaryOp::Gt,
            lhs: Box::new(lafuse_compiler::ast::Expr {
                kind: lafuse_compiler::ast::ExprKind::Call {
                    name: "sum".into(),
                    args: vec![lafuse_compiler::ast::Arg {
                        name: None,
                        value: lafuse_compiler::ast::Expr {
                            kind: lafuse_compiler::ast::ExprKind::Var("X".into()),
                            span: Default::default(),
                        },
                        span: Default::default(),
                    }],
                },
                span: Default::default(),
            }),
            rhs: Box::new(lafuse_compiler::ast::Expr {
                kind: lafuse_compiler::ast::ExprKind::Int(0),
                span: Default::default(),
            }),
        },
        span: Default::default(),
    };
    let d = hops::build_expr_dag(&e, &inputs, &ScriptArgs::new()).unwrap();
    let (name, v) = d.outputs()[0];
    assert_eq!(name, hops::EXPR_RESULT);
    assert_eq!(
        (d.hop(v).data_type, d.hop(v).value_type),
        (DataType::Scalar, ValueType::Bool)
    );
}

#[test]
fn seq_defaults_and_sinit() {
    let d = dag(
        "a = seq(5, 1)\nb = seq(1, 2, 0.3)\nc = matrix(\"1 0 3 4\", rows=2, cols=2)\n",
        &none(),
    );
    assert_eq!(d.hop(output(&d, "a")).dims(), Some((5, 1)));
    assert_eq!(d.hop(output(&d, "b")).dims(), Some((4, 1)));
    assert_eq!(d.hop(output(&d, "c")).nnz, Some(3));
    assert!(try_dag("c = matrix(\"1 2 3\", rows=2, cols=2)\n", &none()).is_err());
}

#[test]
fn same_script_same_bytes() {
    let inputs = matrices(&[("X", 50, 20, 300), ("y", 50, 1, 50)]);
    let script = "g = t(X) %*% (X %*% matrix(1, rows=20, cols=1) - y)\nprint(sum(g))\nZ = exp(X) / rowSums(exp(X))\n";
    let a = dag(script, &inputs);
    let b = dag(script, &inputs);
    assert_eq!(hops::explain_text(&a), hops::explain_text(&b));
    assert_eq!(a.to_json(), b.to_json());
    assert_eq!(a.structural_hash(), b.structural_hash());
}
