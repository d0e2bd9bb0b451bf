//! The backend seam: every backend the engine can register builds the same plan into an
//! operator that computes what the reference evaluator computes, dense and sparse main inputs,
//! NaN and infinities included; a backend this build lacks refuses every plan as unsupported.

use lafuse_codegen::backend::{Backend, CodegenError, MainFormat, Origin, Request, Unavailable};
use lafuse_codegen::reference::{evaluate, Operand, ReferenceBackend};
use lafuse_compiler::fusion::cplan::{Access, CNode, CPlan, InputKind, TemplateSpec};
use lafuse_compiler::fusion::template::{CellAgg, CellType};
use lafuse_compiler::hops::BinaryOp;
use lafuse_runtime::Matrix;
use std::sync::Arc;

/// `X * Y + Y` per cell, optionally summed.
fn plan(agg: Option<CellAgg>) -> CPlan {
    let cell_type = if agg.is_some() {
        CellType::FullAgg
    } else {
        CellType::NoAgg
    };
    CPlan {
        template: TemplateSpec::Cell {
            cell_type,
            agg,
            sparse_safe: false,
        },
        inputs: vec![InputKind::Matrix, InputKind::Matrix],
        nodes: vec![
            CNode::Data {
                input: 0,
                access: Access::Main,
            },
            CNode::Data {
                input: 1,
                access: Access::Aligned,
            },
            CNode::Binary {
                f: BinaryOp::Mul,
                a: 0,
                b: 1,
            },
            CNode::Binary {
                f: BinaryOp::Add,
                a: 2,
                b: 1,
            },
        ],
        outputs: vec![3],
    }
}

/// Every backend this build registers.
fn backends() -> Vec<Box<dyn Backend>> {
    let mut all: Vec<Box<dyn Backend>> = vec![Box::new(ReferenceBackend)];
    #[cfg(feature = "llvm")]
    all.push(Box::new(lafuse_codegen::native::NativeBackend::new()));
    all
}

fn same(a: f64, b: f64) -> bool {
    (a.is_nan() && b.is_nan()) || a == b || (a - b).abs() <= 1e-12 * a.abs().max(b.abs())
}

#[test]
fn every_backend_computes_what_the_reference_evaluator_computes() {
    let (m, n) = (37, 11);
    let x: Vec<f64> = (0..m * n)
        .map(|i| match i % 13 {
            0 => f64::NAN,
            1 => f64::INFINITY,
            2..=6 => 0.0,
            k => k as f64 - 9.5,
        })
        .collect();
    let y: Vec<f64> = (0..m * n).map(|i| (i % 7) as f64 * 0.25 - 0.5).collect();
    let x = Matrix::from_dense_values(m, n, x).unwrap();
    let y = Matrix::from_dense_values(m, n, y).unwrap();
    let x_sparse = Matrix::Sparse(x.to_sparse());
    for agg in [None, Some(CellAgg::Sum)] {
        let plan = Arc::new(plan(agg));
        let shape = if agg.is_some() { (1, 1) } else { (m, n) };
        for (main, format) in [(&x, MainFormat::Dense), (&x_sparse, MainFormat::Sparse)] {
            let inputs = [Operand::Matrix(main), Operand::Matrix(&y)];
            let expected = evaluate(&plan, &inputs, &[shape]).unwrap();
            for backend in backends() {
                let built = backend.build(&[Request {
                    plan: &plan,
                    main: format,
                }]);
                assert_eq!(built.len(), 1);
                let built = built.into_iter().next().unwrap().unwrap();
                let out = built.executable.execute(&inputs, &[shape], &[]).unwrap();
                let (e, o) = (expected[0].to_dense().unwrap(), out[0].to_dense().unwrap());
                let (e, o) = (&e.values, &o.values);
                assert_eq!(e.len(), o.len());
                for (i, (a, b)) in e.iter().zip(o.iter()).enumerate() {
                    assert!(
                        same(*a, *b),
                        "{} {agg:?} {format:?} cell {i}: {a} vs {b}",
                        backend.name()
                    );
                }
            }
        }
    }
}

#[test]
fn the_reference_backend_compiles_nothing_and_reports_bad_calls_as_internal() {
    let plan = Arc::new(plan(None));
    let built = ReferenceBackend.build(&[Request {
        plan: &plan,
        main: MainFormat::Dense,
    }]);
    let built = built.into_iter().next().unwrap().unwrap();
    assert_eq!(built.origin, Origin::Interpreted);
    let x = Matrix::from_dense_values(2, 2, vec![1.0; 4]).unwrap();
    // One input where the plan has two: the caller's bug, not the script's.
    let err = built
        .executable
        .execute(&[Operand::Matrix(&x)], &[(2, 2)], &[])
        .unwrap_err();
    assert!(matches!(err, CodegenError::Internal(_)), "{err:?}");
}

#[test]
fn a_backend_this_build_lacks_refuses_every_plan_as_unsupported() {
    let plan = Arc::new(plan(None));
    let lacking = Unavailable {
        name: "gpu",
        why: "no GPU backend in this build",
    };
    let request = Request {
        plan: &plan,
        main: MainFormat::Dense,
    };
    let built = lacking.build(&[request, request]);
    assert_eq!(built.len(), 2);
    for b in built {
        match b {
            Err(CodegenError::Unsupported(why)) => assert!(why.to_string().contains("no GPU")),
            other => panic!("{other:?}"),
        }
    }
}
