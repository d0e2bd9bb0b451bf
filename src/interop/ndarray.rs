//! `ndarray` dense matrices in and out (feature `ndarray`): a standard-layout view is read in
//! place, an owned array's vector moved; lafuse's results move out as `Array2`.

use super::{copied, dense_matrix, into_row_major, MatrixView};
use crate::error::{Error, Internal};
use lafuse_runtime::{Buffer, Matrix};
use ndarray::{Array2, ArrayView2};

impl<'a> TryFrom<ArrayView2<'a, f64>> for MatrixView<'a> {
    type Error = Error;

    /// Zero-copy where the view is in standard layout (row-major, contiguous); any other
    /// layout (a transposed or strided view) is copied in row-major order. Fails only for a
    /// dimension beyond `MAX_DIM` (or where the copy does not fit in memory).
    fn try_from(a: ArrayView2<'a, f64>) -> Result<Self, Error> {
        let (rows, cols) = a.dim();
        match a.to_slice() {
            Some(values) => MatrixView::dense(rows, cols, values),
            None => {
                let values = copied(rows.saturating_mul(cols), a.iter().copied())?;
                dense_matrix(rows, cols, values.into()).map(MatrixView::wrap)
            }
        }
    }
}

impl<'a> TryFrom<Array2<f64>> for MatrixView<'a> {
    type Error = Error;

    /// Moves the array's vector where it is in standard layout (a sliced array's vector is
    /// shifted in place to its first element), else copies it in row-major order.
    fn try_from(a: Array2<f64>) -> Result<Self, Error> {
        let (rows, cols) = a.dim();
        let values = if a.is_standard_layout() {
            let (mut v, offset) = a.into_raw_vec_and_offset();
            let offset = offset.unwrap_or(0);
            v.drain(..offset);
            v.truncate(rows * cols);
            v
        } else {
            copied(rows.saturating_mul(cols), a.iter().copied())?
        };
        dense_matrix(rows, cols, Buffer::from(values)).map(MatrixView::wrap)
    }
}

/// `m` as an `Array2`: a dense matrix's vector moved when lafuse owns it, a sparse one
/// densified (a resource error where that does not fit in memory).
pub fn into_array2(m: Matrix) -> Result<Array2<f64>, Error> {
    let shape = m.shape();
    let values = into_row_major(m)?;
    Array2::from_shape_vec(shape, values).map_err(|_| {
        Error::Internal(Internal::MatrixExport {
            to: "Array2",
            shape,
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::{array, s, ShapeBuilder};

    #[test]
    fn standard_views_are_read_in_place_and_others_copied_row_major() {
        let a = array![[1.0, 0.0, 2.0], [0.0, 3.0, f64::NAN]];
        let view = MatrixView::try_from(a.view()).unwrap();
        assert!(view.is_borrowed());
        assert_eq!(view.matrix().nnz(), 4);
        match view.matrix() {
            Matrix::Dense(d) => assert_eq!(d.values.as_ptr(), a.as_ptr()),
            Matrix::Sparse(_) => panic!("a view keeps its format"),
        }
        let t = MatrixView::try_from(a.t()).unwrap();
        assert!(!t.is_borrowed());
        assert_eq!(t.shape(), (3, 2));
        for i in 0..3 {
            for j in 0..2 {
                let (x, y) = (t.matrix().get(i, j), a[[j, i]]);
                assert!(x == y || (x.is_nan() && y.is_nan()));
            }
        }
        // Column-major storage: a standard-layout check, not a shape check, decides.
        let f = Array2::from_shape_vec((2, 2).f(), vec![1.0, 2.0, 3.0, 4.0]).unwrap();
        let fv = MatrixView::try_from(f.view()).unwrap();
        assert!(!fv.is_borrowed());
        assert_eq!(into_array2(fv.matrix().clone()).unwrap(), f);
    }

    #[test]
    fn owned_arrays_move_their_vector_and_sliced_ones_shift_it() {
        let a = Array2::from_shape_fn((4, 5), |(i, j)| (i * 5 + j) as f64);
        let p = a.as_ptr();
        let view = MatrixView::try_from(a.clone()).unwrap();
        assert!(!view.is_borrowed());
        let back = into_array2(view.matrix().clone()).unwrap();
        assert_eq!(back, a);
        let moved = MatrixView::try_from(a).unwrap();
        match moved.matrix() {
            Matrix::Dense(d) => assert_eq!(d.values.as_ptr(), p),
            Matrix::Sparse(_) => panic!("a view keeps its format"),
        }
        let whole = Array2::from_shape_fn((4, 5), |(i, j)| (i * 5 + j) as f64);
        let rows = whole.clone().slice_move(s![1..3, ..]);
        let view = MatrixView::try_from(rows).unwrap();
        assert_eq!(
            into_array2(view.matrix().clone()).unwrap(),
            whole.slice(s![1..3, ..])
        );
        let cols = whole.clone().slice_move(s![.., 1..3]);
        let view = MatrixView::try_from(cols).unwrap();
        assert_eq!(
            into_array2(view.matrix().clone()).unwrap(),
            whole.slice(s![.., 1..3])
        );
    }

    #[test]
    fn sparse_results_densify_into_arrays() {
        let m = Matrix::from_triples(3, 4, vec![(0, 1, 2.0), (2, 3, -1.0)]).unwrap();
        let m = Matrix::Sparse(m.to_sparse());
        let a = into_array2(m).unwrap();
        assert_eq!(
            a,
            array![[0.0, 2.0, 0.0, 0.0], [0.0; 4], [0.0, 0.0, 0.0, -1.0]]
        );
    }
}
