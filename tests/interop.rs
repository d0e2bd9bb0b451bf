//! Zero-copy inputs (`lafuse::interop`): views over an embedder's slices are validated, read in
//! place, never written, and compute through unfused kernels and fused operators exactly what
//! the same matrices owned by lafuse compute.

use lafuse::interop::{into_csr_arrays, into_row_major, MatrixView};
use lafuse_codegen::backend::{Backend, MainFormat, Request};
use lafuse_codegen::reference::{Operand, ReferenceBackend};
use lafuse_compiler::fusion::cplan::{Access, CNode, CPlan, InputKind, TemplateSpec};
use lafuse_compiler::fusion::template::{CellAgg, CellType};
use lafuse_core::Fault;
use lafuse_runtime::kernels;
use lafuse_runtime::ops::{AggOp, BinaryOp, Direction, UnaryOp};
use lafuse_runtime::Matrix;
use std::sync::Arc;

/// Cell-wise equality, NaN equal to NaN (the same computation in the same order, owned or
/// borrowed, gives the same bits).
fn same(a: &Matrix, b: &Matrix) -> bool {
    let (x, y) = (a.to_dense().unwrap(), b.to_dense().unwrap());
    a.shape() == b.shape()
        && x.values
            .iter()
            .zip(y.values.iter())
            .all(|(p, q)| p.to_bits() == q.to_bits() || (p.is_nan() && q.is_nan()))
}

/// The bits of each value: equality that holds for NaN.
fn bits(values: &[f64]) -> Vec<u64> {
    values.iter().map(|v| v.to_bits()).collect()
}

/// A 40 x 30 row-major matrix with zeros, NaN and infinities.
fn cells() -> Vec<f64> {
    (0..40 * 30)
        .map(|i| match i % 11 {
            0 => f64::NAN,
            1 => f64::NEG_INFINITY,
            2..=4 => 0.0,
            k => k as f64 * 0.75 - 3.0,
        })
        .collect()
}

/// The CSR arrays of a sparse 40 x 30 matrix.
fn csr_arrays() -> (Vec<usize>, Vec<u32>, Vec<f64>) {
    let m = Matrix::from_triples(
        40,
        30,
        (0..40)
            .flat_map(|i| (0..30).map(move |j| (i, j)))
            .filter(|(i, j)| (i * 7 + j * 3) % 10 == 0)
            .map(|(i, j)| (i, j, (i as f64) - (j as f64) * 0.5 + 0.25))
            .collect(),
    )
    .unwrap();
    assert!(m.is_sparse());
    let csr = into_csr_arrays(m).unwrap();
    assert_eq!((csr.rows, csr.cols), (40, 30));
    (csr.row_ptr, csr.col_idx, csr.values)
}

#[test]
fn dense_views_read_the_slice_in_place() {
    let values = cells();
    let view = MatrixView::dense(40, 30, &values).unwrap();
    assert!(view.is_borrowed());
    match view.matrix() {
        Matrix::Dense(d) => assert_eq!(d.values.as_ptr(), values.as_ptr()),
        Matrix::Sparse(_) => panic!("a view keeps its format"),
    }
    view.matrix().validate().unwrap();
    let owned = Matrix::Dense(lafuse_runtime::DenseMatrix::new(40, 30, values.clone()).unwrap());
    assert_eq!(view.matrix().nnz(), owned.nnz());
    // A copy is owned, and round-trips to the same cells.
    let copy = view.matrix().clone();
    assert!(!copy.is_borrowed());
    assert_eq!(bits(&into_row_major(copy).unwrap()), bits(&values));
    drop(view);
}

#[test]
fn csr_views_read_the_arrays_in_place() {
    let (row_ptr, col_idx, values) = csr_arrays();
    let view = MatrixView::csr(40, 30, &row_ptr, &col_idx, &values).unwrap();
    assert!(view.is_borrowed());
    view.matrix().validate().unwrap();
    match view.matrix() {
        Matrix::Sparse(s) => {
            assert_eq!(s.row_ptr.as_ptr(), row_ptr.as_ptr());
            assert_eq!(s.col_idx.as_ptr(), col_idx.as_ptr());
            assert_eq!(s.values.as_ptr(), values.as_ptr());
        }
        Matrix::Dense(_) => panic!("a view keeps its format"),
    }
    let back = into_csr_arrays(view.matrix().clone()).unwrap();
    assert_eq!(
        (back.row_ptr, back.col_idx, back.values),
        (row_ptr.clone(), col_idx.clone(), values.clone())
    );
}

#[test]
fn bad_inputs_are_user_errors_naming_the_defect() {
    let short = [1.0, 2.0, 3.0];
    let e = MatrixView::dense(2, 2, &short).unwrap_err();
    assert_eq!(e.fault(), Fault::User);
    assert!(e.to_string().contains("needs 4 values, got 3"), "{e}");
    let e = MatrixView::dense(1 << 32, 0, &[]).unwrap_err();
    assert!(e.to_string().contains("dimensions above"), "{e}");
    let cases: [(&[usize], &[u32], &str); 5] = [
        (
            &[0, 2, 1],
            &[0, 1],
            "row_ptr ends at 1 with 2 column indices",
        ),
        (&[0, 2, 2], &[1, 1], "not strictly increasing"),
        (&[0, 1, 2], &[0, 3], "out of range"),
        (&[1, 1, 2], &[0, 1], "row_ptr[0] is not 0"),
        (&[0, 1], &[0, 1], "row_ptr has 2 entries, expected 3"),
    ];
    for (row_ptr, col_idx, says) in cases {
        let values = vec![1.0; col_idx.len()];
        let e = MatrixView::csr(2, 3, row_ptr, col_idx, &values).unwrap_err();
        assert_eq!(e.fault(), Fault::User);
        assert!(e.to_string().contains(says), "{e} should say {says}");
        assert!(e.to_string().contains("2x3"), "{e}");
    }
    let e = MatrixView::csr(3, 3, &[0, 2, 1, 2], &[0, 1], &[1.0, 2.0]).unwrap_err();
    assert!(e.to_string().contains("decreases at row 1"), "{e}");
}

#[test]
fn explicit_zeros_are_compacted_into_an_owned_copy() {
    let (row_ptr, col_idx, values) = (vec![0, 2, 3], vec![0u32, 2, 1], vec![0.0, 5.0, 0.0]);
    let view = MatrixView::csr(2, 3, &row_ptr, &col_idx, &values).unwrap();
    assert!(!view.is_borrowed());
    view.matrix().validate().unwrap();
    assert_eq!(view.matrix().nnz(), 1);
    assert_eq!(view.matrix().get(0, 2), 5.0);
    assert_eq!(values, [0.0, 5.0, 0.0]);
    assert_eq!(row_ptr, [0, 2, 3]);
}

#[test]
fn owned_matrices_are_checked_as_views_are() {
    let bad = Matrix::Sparse(lafuse_runtime::SparseMatrix {
        rows: 1,
        cols: 2,
        row_ptr: vec![0, 2].into(),
        col_idx: vec![1, 0].into(),
        values: vec![1.0, 2.0].into(),
    });
    let e = MatrixView::owned(bad).unwrap_err();
    assert!(e.to_string().contains("not strictly increasing"), "{e}");
    // A wrong non-zero count is recounted, not trusted.
    let miscounted = Matrix::Dense(lafuse_runtime::DenseMatrix {
        rows: 1,
        cols: 2,
        values: vec![1.0, 0.0].into(),
        nnz: 2,
    });
    let view = MatrixView::owned(miscounted).unwrap();
    assert_eq!(view.matrix().nnz(), 1);
    view.matrix().validate().unwrap();
}

#[test]
fn borrowed_matrices_run_through_unfused_kernels_as_owned_ones() {
    let values = cells();
    let (row_ptr, col_idx, sparse_values) = csr_arrays();
    let dense = MatrixView::dense(40, 30, &values).unwrap();
    let sparse = MatrixView::csr(40, 30, &row_ptr, &col_idx, &sparse_values).unwrap();
    let (d, s) = (dense.matrix(), sparse.matrix());
    let (od, os) = (d.clone(), s.clone());
    assert!(!od.is_borrowed() && !os.is_borrowed());
    let y = Matrix::from_dense_values(40, 30, (0..1200).map(|i| (i % 5) as f64).collect()).unwrap();
    for (borrowed, owned) in [(d, &od), (s, &os)] {
        for op in [BinaryOp::Mul, BinaryOp::Add, BinaryOp::Div] {
            let a = kernels::binary(borrowed, &y, op).unwrap();
            let b = kernels::binary(owned, &y, op).unwrap();
            assert!(same(&a, &b), "{op:?}");
            assert!(!a.is_borrowed());
        }
        for dir in [Direction::Full, Direction::Row, Direction::Col] {
            let a = kernels::aggregate(borrowed, AggOp::Sum, dir).unwrap();
            assert!(same(
                &a,
                &kernels::aggregate(owned, AggOp::Sum, dir).unwrap()
            ));
        }
        let a = kernels::unary(borrowed, UnaryOp::Exp).unwrap();
        assert!(same(&a, &kernels::unary(owned, UnaryOp::Exp).unwrap()));
        let a = kernels::transpose(borrowed).unwrap();
        assert!(same(&a, &kernels::transpose(owned).unwrap()));
        let a = kernels::matmul(borrowed, &kernels::transpose(&y).unwrap()).unwrap();
        let b = kernels::matmul(owned, &kernels::transpose(&y).unwrap()).unwrap();
        assert!(same(&a, &b));
        // The consuming kernels, handed a copy of a borrowed matrix, write the copy only.
        let a = kernels::binary_owned(borrowed.clone(), &y, BinaryOp::Mul).unwrap();
        assert!(same(
            &a,
            &kernels::binary(owned, &y, BinaryOp::Mul).unwrap()
        ));
    }
    drop((dense, sparse));
    assert_eq!(bits(&values), bits(&cells()));
    assert_eq!((row_ptr, col_idx, sparse_values), csr_arrays());
}

/// `sum(X * Y + Y)` or `X * Y + Y` as a Cell operator, `X` the main input.
fn cell_plan(agg: Option<CellAgg>) -> CPlan {
    CPlan {
        template: TemplateSpec::Cell {
            cell_type: if agg.is_some() {
                CellType::FullAgg
            } else {
                CellType::NoAgg
            },
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

/// The reference evaluator and, where the build has it, the native backend.
fn backends() -> Vec<Box<dyn Backend>> {
    vec![
        Box::new(ReferenceBackend),
        #[cfg(feature = "llvm")]
        Box::new(lafuse_codegen::native::NativeBackend::new()),
    ]
}

#[test]
fn borrowed_matrices_run_through_fused_operators_as_owned_ones() {
    let values = cells();
    let (row_ptr, col_idx, sparse_values) = csr_arrays();
    let dense = MatrixView::dense(40, 30, &values).unwrap();
    let sparse = MatrixView::csr(40, 30, &row_ptr, &col_idx, &sparse_values).unwrap();
    let y = Matrix::from_dense_values(40, 30, (0..1200).map(|i| (i % 5) as f64 - 1.0).collect())
        .unwrap();
    for agg in [None, Some(CellAgg::Sum)] {
        let plan = Arc::new(cell_plan(agg));
        let shape = if agg.is_some() { (1, 1) } else { (40, 30) };
        for (view, format) in [(&dense, MainFormat::Dense), (&sparse, MainFormat::Sparse)] {
            let owned = view.matrix().clone();
            for backend in backends() {
                let built = backend.build(&[Request {
                    plan: &plan,
                    main: format,
                }]);
                let op = built.into_iter().next().unwrap().unwrap().executable;
                let run = |main: &Matrix| {
                    let inputs = [Operand::Matrix(main), Operand::Matrix(&y)];
                    op.execute(&inputs, &[shape], &[]).unwrap().remove(0)
                };
                let (a, b) = (run(view.matrix()), run(&owned));
                assert!(same(&a, &b), "{agg:?} {format:?}");
                assert!(!a.is_borrowed());
            }
        }
    }
    drop((dense, sparse));
    assert_eq!(bits(&values), bits(&cells()));
}

#[cfg(feature = "ndarray")]
#[test]
fn ndarray_views_compute_as_their_copies() {
    use ndarray::Array2;
    let a = Array2::from_shape_vec((40, 30), cells()).unwrap();
    let view = MatrixView::try_from(a.view()).unwrap();
    assert!(view.is_borrowed());
    let t = MatrixView::try_from(a.t()).unwrap();
    assert!(!t.is_borrowed());
    let tt = kernels::transpose(view.matrix()).unwrap();
    assert!(same(&tt, t.matrix()));
    let back =
        lafuse::interop::ndarray::into_array2(kernels::transpose(t.matrix()).unwrap()).unwrap();
    assert!(back
        .iter()
        .zip(a.iter())
        .all(|(x, y)| x.to_bits() == y.to_bits()));
}

#[cfg(feature = "sprs")]
#[test]
fn sprs_views_compute_as_their_copies() {
    let (row_ptr, col_idx, values) = csr_arrays();
    let m = sprs::CsMatI::<f64, u32, usize>::new((40, 30), row_ptr, col_idx, values);
    let view = MatrixView::try_from(m.view()).unwrap();
    assert!(view.is_borrowed());
    let y = Matrix::from_dense_values(30, 5, (0..150).map(|i| (i % 7) as f64).collect()).unwrap();
    let a = kernels::matmul(view.matrix(), &y).unwrap();
    let b = kernels::matmul(&view.matrix().clone(), &y).unwrap();
    assert!(same(&a, &b));
    let out = lafuse::interop::sprs::into_csmat(a.clone()).unwrap();
    let again = MatrixView::try_from(out.view()).unwrap();
    assert!(same(again.matrix(), &a));
}
