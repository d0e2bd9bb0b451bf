//! Matrices to and from an embedder's memory: zero-copy input views ([`MatrixView`]) over
//! plain slices here, over `ndarray` and `sprs` types behind the features of the same names,
//! and owned outputs moved out of lafuse's matrices.
//!
//! **Soundness invariant.** A [`MatrixView`] built from a borrow holds the only matrix that
//! points into the embedder's memory: `Matrix::clone` copies borrowed buffers (the rule of
//! [`Buffer`]), so only the view's own `Arc<Matrix>` can carry the borrow. Whatever lafuse
//! derives from a view (a symbol-table entry, a register, a result) must be dropped, or copied,
//! before lafuse returns to the caller; the view's `Drop` checks that its `Arc` is no longer
//! shared and aborts the process if it is (see [`MatrixView`]).

#[cfg(feature = "ndarray")]
pub mod ndarray;
#[cfg(feature = "sprs")]
pub mod sprs;

use crate::error::{Error, MatrixInput, Usage};
use lafuse_runtime::matrix::{count_nnz, try_vec_with_capacity, MAX_DIM};
use lafuse_runtime::value::Value;
use lafuse_runtime::{Buffer, DenseMatrix, Matrix, SparseMatrix};
use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;

/// An input matrix for lafuse that may read the embedder's memory in place for `'a`.
///
/// Built from a row-major slice ([`MatrixView::dense`]), CSR arrays ([`MatrixView::csr`]), an
/// owned [`Matrix`] ([`MatrixView::owned`]) or, behind features, `ndarray` and `sprs` values
/// (`TryFrom`). Every constructor validates its input and names what is wrong as a user
/// error. A view keeps the format it is given (a dense view of mostly zeros stays dense:
/// choosing the other format would be a copy).
///
/// **Invariant (checked on drop).** The view's matrix lives in an `Arc` that lafuse may share
/// while it works (the engine puts it in its symbol table), but every such share must be gone
/// before lafuse returns to the caller: the borrow ends when the view does. When a view that
/// borrows memory is dropped while its `Arc` is still shared, lafuse has kept a matrix that is
/// about to point into released memory; continuing would be unsound, so `Drop` prints the
/// defect and aborts the process. (The check is on lafuse's own code: only lafuse can share the
/// `Arc`. A view leaked with `std::mem::forget` is never checked, and then stays sound only
/// while lafuse keeps the invariant.)
pub struct MatrixView<'a> {
    matrix: Arc<Matrix>,
    borrow: PhantomData<&'a [f64]>,
}

impl<'a> MatrixView<'a> {
    /// A dense `rows` x `cols` matrix reading the row-major `values` in place (no copy); the
    /// non-zeros are counted in one pass (NaN counts as non-zero).
    ///
    /// Fails when a dimension exceeds [`MAX_DIM`] or `values` does not hold `rows * cols`
    /// values.
    pub fn dense(rows: usize, cols: usize, values: &'a [f64]) -> Result<MatrixView<'a>, Error> {
        // SAFETY: the buffer ends up in the matrix of the view returned, which lives no longer
        // than `'a`; on an error it is dropped here. Clones of it are owned copies, and the
        // view's `Drop` checks that no one else holds its matrix (see the type's docs).
        let values = unsafe { Buffer::borrowed(values) };
        dense_matrix(rows, cols, values).map(MatrixView::wrap)
    }

    /// A CSR `rows` x `cols` matrix reading the embedder's arrays in place: `row_ptr` (`rows +
    /// 1` offsets from 0, non-decreasing), `col_idx` (strictly increasing within a row, below
    /// `cols`) and `values`, as `Matrix::validate` states the invariants.
    ///
    /// Fails naming the first broken invariant. Stored zeros are not an error: lafuse stores
    /// none, so such input is compacted into an owned copy instead (the only case this
    /// constructor copies).
    pub fn csr(
        rows: usize,
        cols: usize,
        row_ptr: &'a [usize],
        col_idx: &'a [u32],
        values: &'a [f64],
    ) -> Result<MatrixView<'a>, Error> {
        // SAFETY: as in `dense`: the buffers go into this view's matrix or are dropped here.
        let (row_ptr, col_idx, values) = unsafe {
            (
                Buffer::borrowed(row_ptr),
                Buffer::borrowed(col_idx),
                Buffer::borrowed(values),
            )
        };
        csr_matrix(rows, cols, row_ptr, col_idx, values).map(MatrixView::wrap)
    }

    /// A view of a matrix the caller hands over. It is checked as the other constructors check
    /// theirs: a dense matrix's non-zero count is recounted, a sparse one's structure
    /// validated and its stored zeros dropped.
    pub fn owned(matrix: Matrix) -> Result<MatrixView<'a>, Error> {
        match matrix {
            Matrix::Dense(d) => dense_matrix(d.rows, d.cols, d.values),
            Matrix::Sparse(s) => csr_matrix(s.rows, s.cols, s.row_ptr, s.col_idx, s.values),
        }
        .map(MatrixView::wrap)
    }

    /// A view of a checked matrix.
    fn wrap(matrix: Matrix) -> MatrixView<'a> {
        MatrixView {
            matrix: Arc::new(matrix),
            borrow: PhantomData,
        }
    }

    /// The matrix, for kernels and inspection.
    pub fn matrix(&self) -> &Matrix {
        &self.matrix
    }

    /// Whether the view reads the embedder's memory (false where its input was copied).
    pub fn is_borrowed(&self) -> bool {
        self.matrix.is_borrowed()
    }

    /// `(rows, cols)`.
    pub fn shape(&self) -> (usize, usize) {
        self.matrix.shape()
    }

    /// The matrix as a runtime value sharing this view's `Arc`, for the engine's symbol table.
    /// Every such value must be dropped before the engine returns (the type's invariant).
    ///
    /// Crate-private on purpose: an embedder holding a clone of the `Arc` could
    /// `std::mem::forget` the view and read freed memory from safe code.
    #[allow(dead_code)] // The engine's binding of input values will call it; so far tests do.
    pub(crate) fn value(&self) -> Value {
        Value::Matrix(Arc::clone(&self.matrix))
    }
}

impl Drop for MatrixView<'_> {
    fn drop(&mut self) {
        let shared = Arc::strong_count(&self.matrix) != 1 || Arc::weak_count(&self.matrix) != 0;
        if shared && self.matrix.is_borrowed() {
            eprintln!(
                "lafuse: internal defect: a {}x{} matrix borrowing the caller's memory is still \
                 held inside lafuse as its MatrixView is dropped ({} strong, {} weak \
                 references); continuing would read released memory, aborting",
                self.matrix.rows(),
                self.matrix.cols(),
                Arc::strong_count(&self.matrix),
                Arc::weak_count(&self.matrix),
            );
            std::process::abort();
        }
    }
}

impl fmt::Debug for MatrixView<'_> {
    /// Shape, format and whether borrowed: not the values, which may be gigabytes.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MatrixView")
            .field("shape", &self.shape())
            .field("sparse", &self.matrix.is_sparse())
            .field("nnz", &self.matrix.nnz())
            .field("borrowed", &self.is_borrowed())
            .finish()
    }
}

/// The row-major values of `m`: a dense matrix's own vector when it owns it (moved, not
/// copied), else a copy or the densified matrix, allocated within the memory budget.
pub fn into_row_major(m: Matrix) -> Result<Vec<f64>, Error> {
    m.into_dense_values().map_err(runtime_error)
}

/// The CSR arrays of a matrix, owned by the caller ([`into_csr_arrays`]).
#[derive(Clone, Debug, PartialEq)]
pub struct CsrArrays {
    pub rows: usize,
    pub cols: usize,
    /// `rows + 1` offsets into the other two, from 0.
    pub row_ptr: Vec<usize>,
    /// Column indices, strictly increasing within a row.
    pub col_idx: Vec<u32>,
    /// The non-zero values (none is 0).
    pub values: Vec<f64>,
}

/// The CSR arrays of `m`: a sparse matrix's own vectors when it owns them (moved), else
/// copies or the dense matrix converted, within the memory budget.
pub fn into_csr_arrays(m: Matrix) -> Result<CsrArrays, Error> {
    let s = match m {
        Matrix::Sparse(s) => s,
        dense => dense.try_to_sparse().map_err(runtime_error)?,
    };
    Ok(CsrArrays {
        rows: s.rows,
        cols: s.cols,
        row_ptr: s.row_ptr.into_vec(),
        col_idx: s.col_idx.into_vec(),
        values: s.values.into_vec(),
    })
}

/// A runtime error outside any script line (a copy or conversion an embedder asked for).
fn runtime_error(error: lafuse_runtime::RuntimeError) -> Error {
    Error::Runtime { error, span: None }
}

fn input_error(cause: MatrixInput) -> Error {
    Error::Usage(Usage::Matrix(cause))
}

/// Dimensions lafuse can hold ([`MAX_DIM`], SystemDS's limit, so `rows * cols` cannot
/// overflow either).
fn check_dims(rows: usize, cols: usize) -> Result<(), Error> {
    if rows > MAX_DIM || cols > MAX_DIM {
        return Err(input_error(MatrixInput::DimensionsBeyondLimit {
            shape: (rows, cols),
            max: MAX_DIM,
        }));
    }
    Ok(())
}

/// A checked dense matrix over `values` (owned or borrowed), its non-zeros counted.
fn dense_matrix(rows: usize, cols: usize, values: Buffer<f64>) -> Result<Matrix, Error> {
    check_dims(rows, cols)?;
    if values.len() != rows * cols {
        return Err(input_error(MatrixInput::ValuesDoNotFill {
            shape: (rows, cols),
            values: values.len(),
        }));
    }
    let nnz = count_nnz(&values);
    Ok(Matrix::Dense(DenseMatrix {
        rows,
        cols,
        values,
        nnz,
    }))
}

/// A checked sparse matrix over CSR arrays (owned or borrowed): the structure validated, then
/// stored zeros dropped (copying borrowed arrays into owned ones only where there are any).
fn csr_matrix(
    rows: usize,
    cols: usize,
    row_ptr: Buffer<usize>,
    col_idx: Buffer<u32>,
    values: Buffer<f64>,
) -> Result<Matrix, Error> {
    check_dims(rows, cols)?;
    let s = SparseMatrix {
        rows,
        cols,
        row_ptr,
        col_idx,
        values,
    };
    s.check_structure().map_err(|defect| {
        input_error(MatrixInput::Csr {
            shape: (rows, cols),
            defect,
        })
    })?;
    Ok(Matrix::Sparse(s.drop_zeros()))
}

/// `row_ptr` shifted to start at 0: a CSR slice of a larger matrix (an `sprs` view of some of
/// its rows) keeps the larger matrix's offsets.
#[cfg_attr(not(feature = "sprs"), allow(dead_code))]
fn rebased(row_ptr: &[usize], shape: (usize, usize)) -> Result<Vec<usize>, Error> {
    let first = row_ptr.first().copied().unwrap_or(0);
    let mut out = try_vec_with_capacity(row_ptr.len()).map_err(runtime_error)?;
    for (row, &p) in row_ptr.iter().enumerate() {
        let Some(q) = p.checked_sub(first) else {
            return Err(input_error(MatrixInput::Csr {
                shape,
                defect: lafuse_runtime::error::CsrDefect::RowPointerDecreases {
                    row: row.saturating_sub(1),
                },
            }));
        };
        out.push(q);
    }
    Ok(out)
}

/// Column indices as lafuse's `u32`s, each checked against `cols` (which [`MAX_DIM`] keeps
/// within `u32`), so a wide index is named rather than truncated.
#[cfg_attr(not(feature = "sprs"), allow(dead_code))]
fn narrowed_indices(indices: &[usize], shape: (usize, usize)) -> Result<Vec<u32>, Error> {
    let mut out = try_vec_with_capacity(indices.len()).map_err(runtime_error)?;
    for (position, &j) in indices.iter().enumerate() {
        if j >= shape.1 {
            return Err(input_error(MatrixInput::ColumnIndex {
                shape,
                position,
                column: j,
            }));
        }
        out.push(j as u32);
    }
    Ok(out)
}

/// A row-major copy of values the caller cannot lend as one slice (a strided view), within
/// the memory budget.
#[cfg_attr(not(feature = "ndarray"), allow(dead_code))]
fn copied(cells: usize, values: impl Iterator<Item = f64>) -> Result<Vec<f64>, Error> {
    let mut out = try_vec_with_capacity(cells).map_err(runtime_error)?;
    out.extend(values);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A view whose matrix lafuse still holds when it is dropped aborts the process: run in a
    /// child process (this test binary, filtered to the test below) that must die by abort,
    /// saying so.
    #[test]
    fn a_view_dropped_while_lafuse_holds_its_matrix_aborts() {
        if std::env::var_os("LAFUSE_VIEW_GUARD_CHILD").is_some() {
            let values = vec![1.0, 2.0];
            let view = MatrixView::dense(1, 2, &values).unwrap();
            let kept = view.value();
            drop(view);
            // Not reached: the drop aborts.
            drop(kept);
            return;
        }
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "interop::tests::a_view_dropped_while_lafuse_holds_its_matrix_aborts",
                "--nocapture",
                "--test-threads=1",
            ])
            .env("LAFUSE_VIEW_GUARD_CHILD", "1")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "the child must abort: {stderr}");
        #[cfg(unix)]
        {
            use std::os::unix::process::ExitStatusExt;
            assert_eq!(out.status.signal(), Some(6), "SIGABRT expected: {stderr}");
        }
        assert!(
            stderr.contains("still held inside lafuse"),
            "the defect is named: {stderr}"
        );
    }

    /// Values taken from a view and dropped before it leave the guard quiet; an owned view
    /// may be shared past its drop (it borrows nothing).
    #[test]
    fn values_dropped_in_time_and_owned_views_pass_the_guard() {
        let values = vec![1.0, 0.0, 3.0, 4.0];
        let view = MatrixView::dense(2, 2, &values).unwrap();
        let v = view.value();
        assert!(v.as_matrix().unwrap().is_borrowed());
        drop(v);
        drop(view);
        let owned = MatrixView::owned(Matrix::scalar(2.0)).unwrap();
        let kept = owned.value();
        drop(owned);
        assert_eq!(kept.as_matrix().unwrap().as_scalar().unwrap(), 2.0);
    }

    #[test]
    fn sprs_offsets_are_rebased_and_wide_indices_named() {
        assert_eq!(rebased(&[4, 5, 7], (2, 3)).unwrap(), vec![0, 1, 3]);
        assert!(rebased(&[4, 3], (1, 3)).is_err());
        let e = narrowed_indices(&[0, 1 << 33], (1, 3)).unwrap_err();
        assert!(e.to_string().contains("8589934592"), "{e}");
    }
}
