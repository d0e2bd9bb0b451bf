//! `sprs` sparse matrices in and out (feature `sprs`): a CSR view with lafuse's index types is
//! read in place, other index types and CSC are converted; lafuse's results move out as
//! `CsMat`.

use super::{csr_matrix, into_csr_arrays, narrowed_indices, rebased, MatrixView};
use crate::error::{Error, Internal};
use lafuse_runtime::{Buffer, Matrix};
use sprs::{CsMat, CsMatI, CsMatView, CsMatViewI};

/// `indptr` borrowed where it starts at 0, else rebased into an owned copy (an `sprs` view of
/// some rows of a larger matrix keeps that matrix's offsets).
fn row_pointers(indptr: &[usize], shape: (usize, usize)) -> Result<Buffer<usize>, Error> {
    Ok(match indptr.first() {
        Some(&first) if first != 0 => rebased(indptr, shape)?.into(),
        // SAFETY: the callers below put this buffer into the matrix of a view bound by the
        // lifetime of `indptr`, or drop it on their error path; see `MatrixView::dense`.
        _ => unsafe { Buffer::borrowed(indptr) },
    })
}

/// An owned CSR matrix from `sprs`'s arrays, converting the indices to `u32`.
fn from_owned(m: CsMatI<f64, usize, usize>) -> Result<Matrix, Error> {
    let shape = m.shape();
    let m = m.into_csr();
    let (indptr, indices, data) = m.into_raw_storage();
    let row_ptr = match indptr.first() {
        Some(&first) if first != 0 => rebased(&indptr, shape)?,
        _ => indptr,
    };
    let col_idx = narrowed_indices(&indices, shape)?;
    drop(indices);
    csr_matrix(
        shape.0,
        shape.1,
        row_ptr.into(),
        col_idx.into(),
        data.into(),
    )
}

impl<'a> TryFrom<CsMatViewI<'a, f64, u32, usize>> for MatrixView<'a> {
    type Error = Error;

    /// Zero-copy for a CSR view (its row pointers copied only when it is a slice of a larger
    /// matrix, starting past 0); stored zeros are compacted into an owned copy, and a CSC view
    /// converted to an owned CSR matrix. The structure is validated as
    /// [`MatrixView::csr`] validates it.
    fn try_from(m: CsMatViewI<'a, f64, u32, usize>) -> Result<Self, Error> {
        let (rows, cols) = m.shape();
        if m.is_csc() {
            let (indptr, indices, data) = m.to_other_storage().into_raw_storage();
            let row_ptr = match indptr.first() {
                Some(&first) if first != 0 => rebased(&indptr, (rows, cols))?,
                _ => indptr,
            };
            return csr_matrix(rows, cols, row_ptr.into(), indices.into(), data.into())
                .map(MatrixView::wrap);
        }
        let (indptr, indices, data) = m.into_raw_storage();
        let row_ptr = row_pointers(indptr, (rows, cols))?;
        // SAFETY: as in `row_pointers`: these go into the view returned, bound by `'a`.
        let (col_idx, values) = unsafe { (Buffer::borrowed(indices), Buffer::borrowed(data)) };
        csr_matrix(rows, cols, row_ptr, col_idx, values).map(MatrixView::wrap)
    }
}

impl<'a> TryFrom<CsMatView<'a, f64>> for MatrixView<'a> {
    type Error = Error;

    /// `sprs`'s default index type is `usize`, lafuse's column index `u32`: the column indices
    /// are converted (each checked against the columns), the values and row pointers read in
    /// place. A CSC view is converted to an owned CSR matrix.
    fn try_from(m: CsMatView<'a, f64>) -> Result<Self, Error> {
        let shape = m.shape();
        if m.is_csc() {
            return from_owned(m.to_other_storage()).map(MatrixView::wrap);
        }
        let (indptr, indices, data) = m.into_raw_storage();
        let row_ptr = row_pointers(indptr, shape)?;
        let col_idx = narrowed_indices(indices, shape)?;
        // SAFETY: as in `row_pointers`: this goes into the view returned, bound by `'a`.
        let values = unsafe { Buffer::borrowed(data) };
        csr_matrix(shape.0, shape.1, row_ptr, col_idx.into(), values).map(MatrixView::wrap)
    }
}

impl<'a> TryFrom<CsMat<f64>> for MatrixView<'a> {
    type Error = Error;

    /// Moves the values and row pointers (a CSC matrix is converted first); the column
    /// indices are converted to `u32`.
    fn try_from(m: CsMat<f64>) -> Result<Self, Error> {
        from_owned(m).map(MatrixView::wrap)
    }
}

/// `m` as an `sprs` CSR matrix: a sparse matrix's values and row pointers moved when lafuse
/// owns them (the column indices widened to `usize`), a dense one converted.
pub fn into_csmat(m: Matrix) -> Result<CsMat<f64>, Error> {
    let shape = m.shape();
    let csr = into_csr_arrays(m)?;
    let indices = csr.col_idx.into_iter().map(|j| j as usize).collect();
    CsMat::try_new(shape, csr.row_ptr, indices, csr.values)
        .map_err(|_| Error::Internal(Internal::MatrixExport { to: "CsMat", shape }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn example() -> CsMatI<f64, u32, usize> {
        // [[1, 0, 2], [0, 0, 0], [0, 3, 4]]
        CsMatI::new(
            (3, 3),
            vec![0, 2, 2, 4],
            vec![0u32, 2, 1, 2],
            vec![1.0, 2.0, 3.0, 4.0],
        )
    }

    #[test]
    fn csr_views_with_u32_indices_are_read_in_place() {
        let m = example();
        let view = MatrixView::try_from(m.view()).unwrap();
        assert!(view.is_borrowed());
        match view.matrix() {
            Matrix::Sparse(s) => {
                assert_eq!(s.values.as_ptr(), m.data().as_ptr());
                assert_eq!(s.col_idx.as_ptr(), m.indices().as_ptr());
            }
            Matrix::Dense(_) => panic!("a view keeps its format"),
        }
        assert_eq!(view.matrix().get(2, 1), 3.0);
        view.matrix().validate().unwrap();
    }

    #[test]
    fn row_slices_csc_and_usize_indices_convert() {
        let m = example();
        let owned: CsMat<f64> = CsMat::new(
            (3, 3),
            vec![0, 2, 2, 4],
            vec![0, 2, 1, 2],
            vec![1.0, 2.0, 3.0, 4.0],
        );
        let want = Matrix::from_triples(
            3,
            3,
            vec![(0, 0, 1.0), (0, 2, 2.0), (2, 1, 3.0), (2, 2, 4.0)],
        )
        .unwrap();
        let dense = |v: &MatrixView| v.matrix().to_dense().unwrap().values.to_vec();
        let want_dense = want.to_dense().unwrap().values.to_vec();
        // A slice of rows: its row pointers start past 0 and are rebased.
        let rows = m.slice_outer(2..3);
        let v = MatrixView::try_from(rows).unwrap();
        assert_eq!(v.shape(), (1, 3));
        assert_eq!(dense(&v), want_dense[6..]);
        // usize indices: converted, values still borrowed.
        let v = MatrixView::try_from(owned.view()).unwrap();
        assert!(v.is_borrowed());
        assert_eq!(dense(&v), want_dense);
        // The view borrows `owned`, which moves below.
        drop(v);
        // CSC: converted to an owned CSR matrix.
        let csc = owned.to_csc();
        let v = MatrixView::try_from(csc.view()).unwrap();
        assert!(!v.is_borrowed());
        assert_eq!(dense(&v), want_dense);
        let csc32 = m.to_csc();
        let v = MatrixView::try_from(csc32.view()).unwrap();
        assert_eq!(dense(&v), want_dense);
        // Owned: moved.
        let p = owned.data().as_ptr();
        let v = MatrixView::try_from(owned.clone()).unwrap();
        assert_eq!(dense(&v), want_dense);
        let v = MatrixView::try_from(owned).unwrap();
        match v.matrix() {
            Matrix::Sparse(s) => assert_eq!(s.values.as_ptr(), p),
            Matrix::Dense(_) => panic!("a view keeps its format"),
        }
    }

    #[test]
    fn explicit_zeros_are_compacted_into_an_owned_copy() {
        let m = CsMatI::<f64, u32, usize>::new(
            (2, 3),
            vec![0, 2, 3],
            vec![0u32, 2, 1],
            vec![0.0, 5.0, 0.0],
        );
        let v = MatrixView::try_from(m.view()).unwrap();
        assert!(!v.is_borrowed());
        assert_eq!(v.matrix().nnz(), 1);
        v.matrix().validate().unwrap();
        assert_eq!(v.matrix().get(0, 2), 5.0);
        assert_eq!(m.data(), &[0.0, 5.0, 0.0]);
    }

    #[test]
    fn results_move_out_as_csmat() {
        let m = Matrix::from_triples(3, 4, vec![(0, 1, 2.0), (2, 3, -1.0)]).unwrap();
        let c = into_csmat(m.clone()).unwrap();
        assert!(c.is_csr());
        assert_eq!(c.get(0, 1), Some(&2.0));
        assert_eq!(c.get(2, 3), Some(&-1.0));
        assert_eq!(c.nnz(), 2);
        let d = Matrix::from_dense_values(2, 2, vec![1.0, 0.0, 0.0, 4.0]).unwrap();
        assert!(!d.is_sparse());
        let c = into_csmat(d).unwrap();
        assert_eq!(c.nnz(), 2);
        assert_eq!(c.get(1, 1), Some(&4.0));
        let back = MatrixView::try_from(c.view()).unwrap();
        assert_eq!(back.matrix().get(1, 1), 4.0);
    }
}
