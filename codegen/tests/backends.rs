//! The backend seam: every backend the engine can register builds the same plan into an
//! operator that computes what the reference evaluator computes, dense and sparse main inputs,
//! NaN and infinities included; a backend this build lacks refuses every plan as unsupported.

use lafuse_codegen::backend::{Backend, CodegenError, MainFormat, Origin, Request, Unavailable};
use lafuse_codegen::parameters::LiteralsAsParameters;
use lafuse_codegen::reference::{evaluate, Operand, ReferenceBackend};
use lafuse_compiler::fusion::cplan::{Access, CNode, CPlan, InputKind, TemplateSpec};
use lafuse_compiler::fusion::template::{CellAgg, CellType};
use lafuse_compiler::hops::{BinaryOp, Literal};
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

/// `X * c + Y` per cell, optionally summed: `plan` with a literal in place of the first
/// operand's partner.
fn plan_with_literal(agg: Option<CellAgg>, c: Literal) -> CPlan {
    let mut p = plan(agg);
    p.nodes.insert(2, CNode::Literal { value: c });
    p.nodes[3] = CNode::Binary {
        f: BinaryOp::Mul,
        a: 0,
        b: 2,
    };
    p.nodes[4] = CNode::Binary {
        f: BinaryOp::Add,
        a: 3,
        b: 1,
    };
    p.outputs = vec![4];
    p
}

/// Every backend this build registers, bare and with literals as parameters (as the engine
/// registers the native one).
fn backends() -> Vec<Box<dyn Backend>> {
    let mut all: Vec<Box<dyn Backend>> = vec![
        Box::new(ReferenceBackend),
        Box::new(LiteralsAsParameters::new(ReferenceBackend)),
    ];
    #[cfg(feature = "llvm")]
    {
        all.push(Box::new(lafuse_codegen::native::NativeBackend::new()));
        all.push(Box::new(LiteralsAsParameters::new(
            lafuse_codegen::native::NativeBackend::new(),
        )));
    }
    #[cfg(feature = "cranelift")]
    {
        use lafuse_codegen::cranelift::CraneliftBackend;
        all.push(Box::new(CraneliftBackend::new()));
        all.push(Box::new(LiteralsAsParameters::new(CraneliftBackend::new())));
    }
    // Tiered, as `--jit tiered` registers it, and promoting at the first call (its operators
    // then run Cranelift's code or LLVM's, whichever is ready).
    #[cfg(all(feature = "cranelift", feature = "llvm"))]
    {
        use lafuse_codegen::cranelift::CraneliftBackend;
        use lafuse_codegen::native::NativeBackend;
        use lafuse_codegen::tiered::{TieredBackend, DEFAULT_TIER_THRESHOLD};
        all.push(Box::new(LiteralsAsParameters::new(TieredBackend::new(
            CraneliftBackend::new(),
            NativeBackend::new(),
            DEFAULT_TIER_THRESHOLD,
        ))));
        all.push(Box::new(TieredBackend::new(
            CraneliftBackend::new(),
            NativeBackend::new(),
            0,
        )));
    }
    // The GPU backend as the engine registers it for `--device gpu` (on a machine without a GPU
    // its operators run on the CPU).
    #[cfg(feature = "cuda")]
    {
        use lafuse_codegen::backend::Placement;
        use lafuse_codegen::ptx::backend::{GpuBackend, PlacementModel};
        all.push(Box::new(LiteralsAsParameters::new(GpuBackend::new(
            lafuse_codegen::native::NativeBackend::new(),
            Placement::Gpu,
            PlacementModel::default(),
        ))));
    }
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
    let literals = [
        Literal::Double(7.0),
        Literal::Double(-3.5),
        Literal::Int(3),
        Literal::Double(2.0),
        Literal::Double(0.0),
        Literal::Double(f64::INFINITY),
        Literal::Double(f64::NAN),
    ];
    let plans = [None, Some(CellAgg::Sum)].into_iter().flat_map(|agg| {
        std::iter::once((agg, plan(agg))).chain(
            literals
                .iter()
                .map(move |c| (agg, plan_with_literal(agg, c.clone()))),
        )
    });
    for (agg, plan) in plans {
        let plan = Arc::new(plan);
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
                        "{} {agg:?} {format:?} cell {i}: {a} vs {b} in {}",
                        backend.name(),
                        plan.explain()
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

#[cfg(feature = "llvm")]
#[test]
fn plans_differing_only_in_a_constant_share_one_native_operator() {
    use lafuse_codegen::native::NativeBackend;
    let backend = LiteralsAsParameters::new(NativeBackend::new());
    let x = Matrix::from_dense_values(3, 2, vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]).unwrap();
    let y = Matrix::from_dense_values(3, 2, vec![0.5; 6]).unwrap();
    let mut origins = Vec::new();
    for c in [7.0, 1000.0, -1.25] {
        let plan = Arc::new(plan_with_literal(Some(CellAgg::Sum), Literal::Double(c)));
        let built = backend.build(&[Request {
            plan: &plan,
            main: MainFormat::Dense,
        }]);
        let built = built.into_iter().next().unwrap().unwrap();
        origins.push(built.origin.clone());
        let out = built
            .executable
            .execute(&[Operand::Matrix(&x), Operand::Matrix(&y)], &[(1, 1)], &[])
            .unwrap();
        // sum(X * c + Y) = 21 c + 3
        assert_eq!(out[0].get(0, 0), 21.0 * c + 3.0, "c = {c}");
    }
    assert!(matches!(origins[0], Origin::Compiled { .. }), "{origins:?}");
    assert_eq!(origins[1..], [Origin::CacheHit, Origin::CacheHit]);
    assert_eq!(backend.inner().cache().len(), 1);
}

#[cfg(feature = "cranelift")]
#[test]
fn plans_differing_only_in_a_constant_share_one_cranelift_operator() {
    use lafuse_codegen::cranelift::CraneliftBackend;
    let backend = LiteralsAsParameters::new(CraneliftBackend::new());
    let x = Matrix::from_dense_values(3, 2, vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]).unwrap();
    let y = Matrix::from_dense_values(3, 2, vec![0.5; 6]).unwrap();
    let mut origins = Vec::new();
    for c in [7.0, 1000.0, -1.25] {
        let plan = Arc::new(plan_with_literal(Some(CellAgg::Sum), Literal::Double(c)));
        let built = backend.build(&[Request {
            plan: &plan,
            main: MainFormat::Dense,
        }]);
        let built = built.into_iter().next().unwrap().unwrap();
        origins.push(built.origin.clone());
        let out = built
            .executable
            .execute(&[Operand::Matrix(&x), Operand::Matrix(&y)], &[(1, 1)], &[])
            .unwrap();
        // sum(X * c + Y) = 21 c + 3
        assert_eq!(out[0].get(0, 0), 21.0 * c + 3.0, "c = {c}");
    }
    assert!(matches!(origins[0], Origin::Compiled { .. }), "{origins:?}");
    assert_eq!(origins[1..], [Origin::CacheHit, Origin::CacheHit]);
    assert_eq!(backend.inner().len(), 1);
}

/// `rowSums(X * Y)`: a Row plan.
#[cfg(all(feature = "cranelift", feature = "llvm"))]
fn row_plan() -> CPlan {
    use lafuse_compiler::fusion::cplan::{count_vector_intermediates, RowType};
    use lafuse_core::ops::AggOp;
    let nodes = vec![
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
        CNode::RowAgg {
            f: AggOp::Sum,
            x: 2,
        },
    ];
    CPlan {
        template: TemplateSpec::Row {
            row_type: RowType::RowAgg,
            num_vectors: count_vector_intermediates(&nodes, &[3]),
        },
        inputs: vec![InputKind::Matrix, InputKind::Matrix],
        nodes,
        outputs: vec![3],
    }
}

/// The tiered backend: an operator runs Cranelift's code until its work passes the threshold,
/// then LLVM's once that is compiled (in the background), with the same results to the bit;
/// a Row plan is tiered the same way; the counters say so.
#[cfg(all(feature = "cranelift", feature = "llvm"))]
#[test]
fn the_tiered_backend_switches_to_llvm_past_its_threshold_with_identical_results() {
    use lafuse_codegen::cranelift::CraneliftBackend;
    use lafuse_codegen::native::NativeBackend;
    use lafuse_codegen::tiered::TieredBackend;
    let (m, n) = (23, 9);
    let x = Matrix::from_dense_values(m, n, (0..m * n).map(|i| (i % 11) as f64 - 4.5).collect())
        .unwrap();
    let y = Matrix::from_dense_values(m, n, (0..m * n).map(|i| (i % 5) as f64 * 0.3).collect())
        .unwrap();
    let inputs = [Operand::Matrix(&x), Operand::Matrix(&y)];
    // Two calls' worth of cells: the third call starts LLVM's compilation.
    let backend = TieredBackend::new(
        CraneliftBackend::new(),
        NativeBackend::new(),
        2 * (m * n) as u64,
    );
    let counters = backend.counters();
    let cell = Arc::new(plan(Some(CellAgg::Sum)));
    let row = Arc::new(row_plan());
    let built = backend.build(&[
        Request {
            plan: &cell,
            main: MainFormat::Dense,
        },
        Request {
            plan: &row,
            main: MainFormat::Dense,
        },
    ]);
    let mut built = built.into_iter().map(Result::unwrap);
    let (cell_op, row_op) = (built.next().unwrap(), built.next().unwrap());
    assert!(matches!(cell_op.origin, Origin::Compiled { .. }));
    let c = counters.snapshot();
    assert_eq!((c.cranelift_compiled, c.llvm_compiled), (2, 0), "{c:?}");

    let run = || cell_op.executable.execute(&inputs, &[(1, 1)], &[]).unwrap()[0].get(0, 0);
    let first = run();
    for _ in 0..2 {
        assert_eq!(run().to_bits(), first.to_bits());
    }
    backend.wait_for_background();
    let c = counters.snapshot();
    assert_eq!(
        (c.cranelift_calls, c.llvm_calls, c.switches),
        (3, 0, 0),
        "{c:?}"
    );
    assert_eq!((c.llvm_compiled, c.llvm_background), (1, 1), "{c:?}");
    for _ in 0..2 {
        assert_eq!(run().to_bits(), first.to_bits());
    }
    let c = counters.snapshot();
    assert_eq!(
        (c.cranelift_calls, c.llvm_calls, c.switches),
        (3, 2, 1),
        "{c:?}"
    );
    // Both tiers' compile times are recorded. Which is longer is a timing, not an invariant: in
    // an unoptimised build two Cranelift compilations can outlast one LLVM compilation (CI,
    // session 40), so no test compares them.
    assert!(c.cranelift_compile > std::time::Duration::ZERO, "{c:?}");
    assert!(c.llvm_compile > std::time::Duration::ZERO, "{c:?}");

    // The Row operator runs Cranelift's code (its work is below the threshold), and agrees
    // with the reference.
    let expected = evaluate(&row, &inputs, &[(m, 1)]).unwrap();
    let out = row_op.executable.execute(&inputs, &[(m, 1)], &[]).unwrap();
    for i in 0..m {
        assert!(same(out[0].get(i, 0), expected[0].get(i, 0)), "row {i}");
    }
    let c = counters.snapshot();
    assert_eq!((c.cranelift_calls, c.llvm_calls), (4, 2), "{c:?}");

    // The same plan built again is the same operator, already on LLVM.
    let again = backend.build(&[Request {
        plan: &cell,
        main: MainFormat::Dense,
    }]);
    let again = again.into_iter().next().unwrap().unwrap();
    assert_eq!(again.origin, Origin::CacheHit);
    again.executable.execute(&inputs, &[(1, 1)], &[]).unwrap();
    let c = counters.snapshot();
    assert_eq!(
        (c.cranelift_calls, c.llvm_calls, c.switches),
        (4, 3, 1),
        "{c:?}"
    );
}

/// A tiered backend promoting operators at `threshold` cells and waiting for LLVM from `wait`
/// cells, and `plan`'s operator built on it for a main input stored as `main` (the backend is
/// returned to outlive the operator: dropping it joins its compilations).
#[cfg(all(feature = "cranelift", feature = "llvm"))]
fn tiered_operator(
    plan: &Arc<CPlan>,
    main: MainFormat,
    threshold: u64,
    wait: u64,
) -> (
    lafuse_codegen::tiered::TieredBackend,
    Arc<lafuse_codegen::tiers::TierCounters>,
    lafuse_codegen::backend::Built,
) {
    use lafuse_codegen::cranelift::CraneliftBackend;
    use lafuse_codegen::native::NativeBackend;
    use lafuse_codegen::tiered::TieredBackend;
    let backend = TieredBackend::new(CraneliftBackend::new(), NativeBackend::new(), threshold)
        .with_wait_cells(wait);
    let counters = backend.counters();
    let op = backend
        .build(&[Request { plan, main }])
        .pop()
        .unwrap()
        .unwrap();
    (backend, counters, op)
}

/// A call of at least the backend's wait size runs LLVM's code at once (it waits for the
/// compilation instead of running on Cranelift); smaller calls stay on Cranelift.
#[cfg(all(feature = "cranelift", feature = "llvm"))]
#[test]
fn a_call_large_enough_waits_for_llvm() {
    let matrix = |m: usize| {
        Matrix::from_dense_values(m, 3, (0..m * 3).map(|i| (i % 7) as f64 - 2.5).collect()).unwrap()
    };
    let (small, large) = (matrix(10), matrix(100));
    let cell = Arc::new(plan(Some(CellAgg::Sum)));
    let (_backend, counters, op) = tiered_operator(&cell, MainFormat::Dense, 1_000, 300);
    let run = |x: &Matrix| {
        let inputs = [Operand::Matrix(x), Operand::Matrix(x)];
        op.executable.execute(&inputs, &[(1, 1)], &[]).unwrap()[0].get(0, 0)
    };
    let expected = |x: &Matrix| {
        let inputs = [Operand::Matrix(x), Operand::Matrix(x)];
        evaluate(&cell, &inputs, &[(1, 1)]).unwrap()[0].get(0, 0)
    };
    // 30 cells: below both sizes, on Cranelift.
    assert!(same(run(&small), expected(&small)));
    let c = counters.snapshot();
    assert_eq!((c.cranelift_calls, c.llvm_calls), (1, 0), "{c:?}");
    // 300 cells: the wait size is raised to the threshold (1000), so still Cranelift.
    assert!(same(run(&large), expected(&large)));
    let c = counters.snapshot();
    assert_eq!((c.cranelift_calls, c.llvm_calls), (2, 0), "{c:?}");
    // A backend whose threshold is below the wait size: the 300-cell call runs on LLVM.
    let (_backend, counters, op) = tiered_operator(&cell, MainFormat::Dense, 100, 300);
    let inputs = [Operand::Matrix(&large), Operand::Matrix(&large)];
    let got = op.executable.execute(&inputs, &[(1, 1)], &[]).unwrap()[0].get(0, 0);
    assert!(same(got, expected(&large)));
    let c = counters.snapshot();
    assert_eq!(
        (c.cranelift_calls, c.llvm_calls, c.switches),
        (0, 1, 1),
        "{c:?}"
    );
}

/// An operator whose LLVM compilation has not finished by the time its calls since it started
/// have visited the wait size runs LLVM's code from then on: the call waits (the compilation
/// runs at idle priority, and a loop that keeps the cores busy would leave it none).
#[cfg(all(feature = "cranelift", feature = "llvm"))]
#[test]
fn calls_that_have_done_the_wait_size_since_llvm_started_wait_for_it() {
    // 102 cells a call: the first starts LLVM's compilation (threshold 100), and the calls
    // after it reach 300 cells since then at the third (102 + 102 + 102 from the second on).
    let (m, n) = (34, 3);
    let x = Matrix::from_dense_values(m, n, (0..m * n).map(|i| (i % 7) as f64 - 2.5).collect())
        .unwrap();
    let cell = Arc::new(plan(Some(CellAgg::Sum)));
    let (_backend, counters, op) = tiered_operator(&cell, MainFormat::Dense, 100, 300);
    let inputs = [Operand::Matrix(&x), Operand::Matrix(&x)];
    let want = evaluate(&cell, &inputs, &[(1, 1)]).unwrap()[0].get(0, 0);
    for call in 1..=4 {
        let got = op.executable.execute(&inputs, &[(1, 1)], &[]).unwrap()[0].get(0, 0);
        assert!(same(got, want), "call {call}: {got} against {want}");
    }
    // The fourth call ran on LLVM whatever the compilation's speed (the second and third may
    // have, where it was done by then).
    let c = counters.snapshot();
    assert_eq!(c.cranelift_calls + c.llvm_calls, 4, "{c:?}");
    assert!(c.cranelift_calls >= 1 && c.llvm_calls >= 1, "{c:?}");
    assert_eq!(c.switches, 1, "{c:?}");
    let last_on_llvm = c.llvm_calls;
    op.executable.execute(&inputs, &[(1, 1)], &[]).unwrap();
    assert_eq!(counters.snapshot().llvm_calls, last_on_llvm + 1);
}

/// A Row operator's call over a CSR main input counts a tenth of its non-zeros (Cranelift's Row
/// code loses a tenth of a dense cell's loss or less per non-zero), so a call of more non-zeros
/// than the wait size stays on Cranelift where the same cells stored dense wait for LLVM; a
/// Cell operator's call counts its cells, sparse-safe or not (Cranelift's sparse Cell code
/// loses several nanoseconds a non-zero).
#[cfg(all(feature = "cranelift", feature = "llvm"))]
#[test]
fn a_sparse_row_call_counts_its_non_zeros_and_a_cell_call_its_cells() {
    let (m, n) = (1000, 4);
    // 4000 cells, 400 non-zeros: more than the wait size (300), counted at 40 by a Row
    // operator, under the threshold (100).
    let values: Vec<f64> = (0..m * n)
        .map(|i| {
            if i % 10 == 0 {
                (i % 7) as f64 - 2.5
            } else {
                0.0
            }
        })
        .collect();
    let sparse = Matrix::from_dense_values(m, n, values).unwrap();
    let dense = Matrix::Dense(sparse.to_dense().unwrap());
    assert!(sparse.is_sparse());
    let y = Matrix::from_dense_values(m, n, (0..m * n).map(|i| (i % 5) as f64).collect()).unwrap();
    let mut product_sum = plan(Some(CellAgg::Sum));
    product_sum.outputs = vec![2];
    product_sum.template = TemplateSpec::Cell {
        cell_type: CellType::FullAgg,
        agg: Some(CellAgg::Sum),
        sparse_safe: true,
    };
    let (row, cell) = (Arc::new(row_plan()), Arc::new(product_sum));
    for (plan, main, format, tiers) in [
        (&row, &sparse, MainFormat::Sparse, (1, 0)),
        (&row, &dense, MainFormat::Dense, (0, 1)),
        (&cell, &sparse, MainFormat::Sparse, (0, 1)),
    ] {
        let (_backend, counters, op) = tiered_operator(plan, format, 100, 300);
        let inputs = [Operand::Matrix(main), Operand::Matrix(&y)];
        let shape = if plan.template.name() == "row" {
            (m, 1)
        } else {
            (1, 1)
        };
        let got = op.executable.execute(&inputs, &[shape], &[]).unwrap();
        let want = evaluate(plan, &inputs, &[shape]).unwrap();
        for r in 0..shape.0 {
            let (g, w) = (got[0].get(r, 0), want[0].get(r, 0));
            assert!(same(g, w), "{format:?} row {r}: {g} against {w}");
        }
        let c = counters.snapshot();
        let name = plan.template.name();
        assert_eq!(
            (c.cranelift_calls, c.llvm_calls),
            tiers,
            "{name} {format:?}: {c:?}"
        );
    }
}

/// A tiered operator called from several threads at once while LLVM compiles it: every call
/// computes the same bits, the switch is counted once, and every call is counted on a tier.
#[cfg(all(feature = "cranelift", feature = "llvm"))]
#[test]
fn a_tiered_operator_called_concurrently_switches_once() {
    use lafuse_codegen::cranelift::CraneliftBackend;
    use lafuse_codegen::native::NativeBackend;
    use lafuse_codegen::tiered::TieredBackend;
    let (m, n) = (64, 16);
    let x = Matrix::from_dense_values(m, n, (0..m * n).map(|i| (i % 17) as f64 * 0.7).collect())
        .unwrap();
    let y = Matrix::from_dense_values(m, n, (0..m * n).map(|i| (i % 3) as f64 - 1.0).collect())
        .unwrap();
    let backend = TieredBackend::new(CraneliftBackend::new(), NativeBackend::new(), 0);
    let counters = backend.counters();
    let cell = Arc::new(plan(Some(CellAgg::Sum)));
    let built = backend.build(&[Request {
        plan: &cell,
        main: MainFormat::Dense,
    }]);
    let op = built.into_iter().next().unwrap().unwrap().executable;
    let run = || {
        let inputs = [Operand::Matrix(&x), Operand::Matrix(&y)];
        op.execute(&inputs, &[(1, 1)], &[]).unwrap()[0]
            .get(0, 0)
            .to_bits()
    };
    let first = run();
    std::thread::scope(|s| {
        let threads: Vec<_> = (0..4)
            .map(|_| s.spawn(|| (0..50).all(|_| run() == first)))
            .collect();
        for t in threads {
            assert!(t.join().unwrap());
        }
    });
    backend.wait_for_background();
    assert_eq!(run(), first);
    let c = counters.snapshot();
    assert_eq!(c.switches, 1, "{c:?}");
    assert_eq!(c.llvm_background, 1, "{c:?}");
    assert_eq!(c.cranelift_calls + c.llvm_calls, 202, "{c:?}");
    assert!(c.llvm_calls >= 1, "{c:?}");
}

/// An operator promoted to LLVM through an object store starts on LLVM at once in a later
/// backend over the same store (a later run of the script), loading LLVM's code from the
/// store, with the same bits Cranelift's code gave; a backend over another store starts it on
/// Cranelift.
#[cfg(all(feature = "cranelift", feature = "llvm"))]
#[test]
fn a_tiered_backend_starts_on_llvm_where_the_object_store_holds_its_code() {
    use lafuse_codegen::cranelift::CraneliftBackend;
    use lafuse_codegen::native::{NativeBackend, ObjectStore};
    use lafuse_codegen::tiered::TieredBackend;
    let (m, n) = (19, 7);
    let x = Matrix::from_dense_values(m, n, (0..m * n).map(|i| (i % 13) as f64 - 6.5).collect())
        .unwrap();
    let y = Matrix::from_dense_values(m, n, (0..m * n).map(|i| (i % 3) as f64 * 0.7).collect())
        .unwrap();
    let inputs = [Operand::Matrix(&x), Operand::Matrix(&y)];
    let cell = Arc::new(plan(Some(CellAgg::Sum)));
    let request = [Request {
        plan: &cell,
        main: MainFormat::Dense,
    }];
    let base = std::env::temp_dir().join(format!("lafuse-tier-store-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    let backend_over = |dir: &str| {
        let store = Arc::new(ObjectStore::open(&base.join(dir)).unwrap());
        // Promoted at the first call.
        TieredBackend::new(CraneliftBackend::new(), NativeBackend::with_store(store), 0)
    };
    let first_run = backend_over("a");
    let op = first_run.build(&request).pop().unwrap().unwrap();
    let on_cranelift = op.executable.execute(&inputs, &[(1, 1)], &[]).unwrap()[0].get(0, 0);
    first_run.wait_for_background();
    let c = first_run.counters().snapshot();
    assert_eq!((c.cranelift_compiled, c.llvm_background), (1, 1), "{c:?}");
    drop(first_run);

    let later_run = backend_over("a");
    let op = later_run.build(&request).pop().unwrap().unwrap();
    let c = later_run.counters().snapshot();
    assert_eq!((c.cranelift_compiled, c.llvm_compiled), (0, 1), "{c:?}");
    assert!(
        matches!(
            op.origin,
            Origin::Compiled {
                loaded_from_store: true,
                ..
            }
        ),
        "{:?}",
        op.origin
    );
    let on_llvm = op.executable.execute(&inputs, &[(1, 1)], &[]).unwrap()[0].get(0, 0);
    assert_eq!(on_llvm.to_bits(), on_cranelift.to_bits());
    let c = later_run.counters().snapshot();
    assert_eq!((c.cranelift_calls, c.llvm_calls), (0, 1), "{c:?}");

    let other_store = backend_over("b");
    other_store.build(&request).pop().unwrap().unwrap();
    let c = other_store.counters().snapshot();
    assert_eq!((c.cranelift_compiled, c.llvm_compiled), (1, 0), "{c:?}");
    let _ = std::fs::remove_dir_all(&base);
}
