//! Products of strided blocks of row-major matrices on the calling thread, for skeletons that
//! keep a product's tile in cache between the multiply and its use (the Outer skeleton's tiles
//! of `U %*% t(V)`, and of `G %*% W` after them): the caller's tasks are the threads.
//!
//! The multiply is faer's (`faer::linalg::matmul`, packed panels and register-blocked
//! micro-kernels for the CPU at hand, AVX-512 included): on this project's machines it runs a
//! 256×256×100 tile at about 100 GFLOP/s on one core, where `matrixmultiply` reaches about 88
//! (`BENCHMARKS.md`, session 21).

use faer::linalg::matmul::matmul;
use faer::{Accum, MatMut, MatRef, Par};

/// A read-only block: `rows × cols` values at `data`, cell `(i, j)` at
/// `i * row_stride + j * col_stride`.
#[derive(Clone, Copy, Debug)]
pub struct Block<'a> {
    pub data: &'a [f64],
    pub rows: usize,
    pub cols: usize,
    pub row_stride: usize,
    pub col_stride: usize,
}

/// A writable block, laid out as [`Block`].
#[derive(Debug)]
pub struct BlockMut<'a> {
    pub data: &'a mut [f64],
    pub rows: usize,
    pub cols: usize,
    pub row_stride: usize,
    pub col_stride: usize,
}

/// Whether the last cell of a block with these dimensions and strides lies inside `len`.
fn fits(len: usize, rows: usize, cols: usize, rs: usize, cs: usize) -> bool {
    if rows == 0 || cols == 0 {
        return true;
    }
    (rows - 1)
        .checked_mul(rs)
        .zip((cols - 1).checked_mul(cs))
        .and_then(|(a, b)| a.checked_add(b))
        .is_some_and(|last| last < len)
}

impl Block<'_> {
    fn fits(&self) -> bool {
        fits(
            self.data.len(),
            self.rows,
            self.cols,
            self.row_stride,
            self.col_stride,
        )
    }

    /// The block transposed (a view; nothing moves).
    pub fn t(self) -> Self {
        Block {
            rows: self.cols,
            cols: self.rows,
            row_stride: self.col_stride,
            col_stride: self.row_stride,
            ..self
        }
    }
}

/// Why a block product was refused: the caller's blocks do not fit their slices or each
/// other (an internal error of the caller).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockShapeError;

/// `c = a %*% b`, or `c += a %*% b` when `accumulate`, on this thread; the vector registers'
/// upper halves are clean on return ([`super::vector_state`]).
pub fn block_product(
    c: BlockMut<'_>,
    a: Block<'_>,
    b: Block<'_>,
    accumulate: bool,
) -> Result<(), BlockShapeError> {
    let shapes_agree = a.cols == b.rows && c.rows == a.rows && c.cols == b.cols;
    let c_fits = fits(c.data.len(), c.rows, c.cols, c.row_stride, c.col_stride);
    // Strides of faer views are isize; a stride above isize::MAX cannot index any slice.
    let strides_fit = [a.row_stride, a.col_stride, b.row_stride, b.col_stride]
        .into_iter()
        .chain([c.row_stride, c.col_stride])
        .all(|s| isize::try_from(s).is_ok());
    if !(shapes_agree && c_fits && a.fits() && b.fits() && strides_fit) {
        return Err(BlockShapeError);
    }
    if c.rows == 0 || c.cols == 0 {
        return Ok(());
    }
    if a.cols == 0 {
        if !accumulate {
            for i in 0..c.rows {
                for j in 0..c.cols {
                    c.data[i * c.row_stride + j * c.col_stride] = 0.0;
                }
            }
        }
        return Ok(());
    }
    // SAFETY: each view's every cell lies inside its slice (checked above), and `c`'s slice is
    // borrowed mutably, so it overlaps neither input.
    let (av, bv, cv) = unsafe {
        (
            MatRef::from_raw_parts(
                a.data.as_ptr(),
                a.rows,
                a.cols,
                a.row_stride as isize,
                a.col_stride as isize,
            ),
            MatRef::from_raw_parts(
                b.data.as_ptr(),
                b.rows,
                b.cols,
                b.row_stride as isize,
                b.col_stride as isize,
            ),
            MatMut::from_raw_parts_mut(
                c.data.as_mut_ptr(),
                c.rows,
                c.cols,
                c.row_stride as isize,
                c.col_stride as isize,
            ),
        )
    };
    let accum = if accumulate {
        Accum::Add
    } else {
        Accum::Replace
    };
    matmul(cv, accum, av, bv, 1.0, Par::Seq);
    // The callers' generated code runs next (see the function's doc).
    super::vector_state::clear_upper_vector_state();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn naive(a: &Block<'_>, b: &Block<'_>) -> Vec<f64> {
        let mut c = vec![0.0; a.rows * b.cols];
        for i in 0..a.rows {
            for j in 0..b.cols {
                for k in 0..a.cols {
                    c[i * b.cols + j] += a.data[i * a.row_stride + k * a.col_stride]
                        * b.data[k * b.row_stride + j * b.col_stride];
                }
            }
        }
        c
    }

    #[test]
    fn products_of_transposed_and_strided_blocks_match_the_definition() {
        let u: Vec<f64> = (0..7 * 5).map(|x| (x as f64 * 0.37).sin()).collect();
        let v: Vec<f64> = (0..9 * 5).map(|x| (x as f64 * 0.11).cos()).collect();
        // U (7×5) %*% t(V) (V 9×5), both row-major.
        let a = Block {
            data: &u,
            rows: 7,
            cols: 5,
            row_stride: 5,
            col_stride: 1,
        };
        let b = Block {
            data: &v,
            rows: 9,
            cols: 5,
            row_stride: 5,
            col_stride: 1,
        }
        .t();
        let want = naive(&a, &b);
        // Into a wider buffer (row stride 12), then accumulated once more.
        let mut c = vec![f64::NAN; 7 * 12];
        for acc in [false, true] {
            let cm = BlockMut {
                data: &mut c,
                rows: 7,
                cols: 9,
                row_stride: 12,
                col_stride: 1,
            };
            block_product(cm, a, b, acc).unwrap();
        }
        for i in 0..7 {
            for j in 0..9 {
                let (g, e) = (c[i * 12 + j], 2.0 * want[i * 9 + j]);
                assert!(
                    (g - e).abs() <= 1e-12 * e.abs().max(1.0),
                    "({i},{j}) {g} vs {e}"
                );
            }
        }
    }

    #[test]
    fn blocks_outside_their_slices_are_refused() {
        let x = vec![0.0; 10];
        let a = Block {
            data: &x,
            rows: 3,
            cols: 4,
            row_stride: 4,
            col_stride: 1,
        };
        let b = Block {
            data: &x,
            rows: 4,
            cols: 2,
            row_stride: 2,
            col_stride: 1,
        };
        let mut c = vec![0.0; 6];
        let cm = BlockMut {
            data: &mut c,
            rows: 3,
            cols: 2,
            row_stride: 2,
            col_stride: 1,
        };
        assert_eq!(block_product(cm, a, b, false), Err(BlockShapeError));
    }

    #[test]
    fn an_empty_inner_dimension_gives_zeros_or_leaves_the_sum() {
        let e: Vec<f64> = Vec::new();
        let a = Block {
            data: &e,
            rows: 2,
            cols: 0,
            row_stride: 0,
            col_stride: 1,
        };
        let b = Block {
            data: &e,
            rows: 0,
            cols: 2,
            row_stride: 2,
            col_stride: 1,
        };
        let mut c = vec![5.0; 4];
        let cm = BlockMut {
            data: &mut c,
            rows: 2,
            cols: 2,
            row_stride: 2,
            col_stride: 1,
        };
        block_product(cm, a, b, true).unwrap();
        assert_eq!(c, vec![5.0; 4]);
        let cm = BlockMut {
            data: &mut c,
            rows: 2,
            cols: 2,
            row_stride: 2,
            col_stride: 1,
        };
        block_product(cm, a, b, false).unwrap();
        assert_eq!(c, vec![0.0; 4]);
    }
}
