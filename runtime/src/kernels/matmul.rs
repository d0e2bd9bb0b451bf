//! Matrix multiplication (`%*%`) for every dense/sparse combination, `tsmm` (`t(X) %*% X`
//! without materialising the transpose), `matmul_tn` (`t(A) %*% B`, likewise) and `matmul_nt`
//! (`A %*% t(B)`, likewise where the product is a dgemm or a matrix-vector product).
//!
//! Dense x dense goes to `matrixmultiply`'s BLAS-class `dgemm` (it packs, tiles and threads);
//! matrix-vector products are rayon-parallel dot products.
//!
//! Non-finite values follow SystemDS, whose kernels skip the zero cells of the *left* operand
//! (a sparse left operand stores none, and its dense matrix-matrix kernels skip a zero `a_ik`
//! before scaling row `k` of the right operand): `c_ij` sums `a_ik * b_kj` over the non-zero
//! `a_ik` only, so `0 * Inf` in the left operand's zeros is never formed, while a non-finite
//! `a_ik` still meets every `b_kj`, zeros included (`Inf * 0` is NaN). With a finite right
//! operand skipping changes nothing, so the fast paths (dgemm, dot products) run; with NaN/±Inf
//! in the right operand a kernel that skips the left operand's zeros runs instead (one scan for
//! non-finite values decides, cheap next to the product). Skipping the *right* operand's zeros
//! (sparse right operands) is exact only while the left operand is finite, so a non-finite left
//! operand meets a densified right one. Dense and sparse inputs therefore agree.

pub use super::matvec::dot;
use super::matvec::{matrix_vector, vector_matrix, vectors_matrix};
use super::reorg::transpose_csr;
use super::{dense_result, fill_rows, fill_rows_reading, sparse_result};
use crate::error::{Result, RuntimeError, ShapeOp};
use crate::matrix::{
    all_finite, count_nnz, count_nnz_and_range, try_alloc_zeroed, try_with_capacity, CsrSlices,
    DenseMatrix, Matrix, SparseMatrix, ValueRange, BLOCK_CELLS, PAR_THRESHOLD,
};
use rayon::prelude::*;

/// `a %*% b`.
///
/// ```
/// use lafuse_runtime::{Matrix, kernels};
/// let a = Matrix::from_dense_values(2, 2, vec![1.0, 2.0, 3.0, 4.0]).unwrap();
/// let c = kernels::matmul(&a, &a).unwrap();
/// assert_eq!(c.into_dense_values().unwrap(), vec![7.0, 10.0, 15.0, 22.0]);
/// ```
pub fn matmul(a: &Matrix, b: &Matrix) -> Result<Matrix> {
    matmul_with_range(a, b).map(|(product, _)| product)
}

/// [`matmul`], with the product's [`ValueRange`] where the kernel computed it on the way (the
/// dense dgemm path, whose non-zero count already takes a pass over the product; `None`
/// elsewhere). The range is exact: what [`Matrix::value_range`] of the product returns.
pub fn matmul_with_range(a: &Matrix, b: &Matrix) -> Result<(Matrix, Option<ValueRange>)> {
    if a.cols() != b.rows() {
        return Err(RuntimeError::ShapeMismatch {
            op: ShapeOp::MatrixMultiply,
            left: a.shape(),
            right: b.shape(),
        });
    }
    let (m, k, n) = (a.rows(), a.cols(), b.cols());
    if m == 0 || n == 0 || k == 0 {
        return Ok((Matrix::zeros(m, n)?, None));
    }
    let unranged = |product: Result<Matrix>| product.map(|p| (p, None));
    match (a, b) {
        (Matrix::Dense(x), Matrix::Dense(y)) => {
            if all_finite(&y.values) {
                dense_dense(x, y)
            } else {
                unranged(dense_dense_skipping(x, y))
            }
        }
        // The sparse left operand's zeros are skipped by construction.
        (Matrix::Sparse(x), Matrix::Dense(y)) => unranged(sparse_dense(x, y)),
        (Matrix::Dense(x), Matrix::Sparse(y)) => {
            if all_finite(&x.values) {
                unranged(dense_sparse(x, y))
            } else {
                unranged(dense_dense_skipping(x, &y.to_dense()?))
            }
        }
        (Matrix::Sparse(x), Matrix::Sparse(y)) => {
            if all_finite(&x.values) {
                unranged(sparse_sparse(x, y))
            } else {
                unranged(sparse_dense(x, &y.to_dense()?))
            }
        }
    }
}

/// `a %*% b` over the non-zero cells of `a` only (each scales a row of `b` into the output
/// row, in order of `k`): SystemDS's product where `b` holds NaN/±Inf (module docs).
fn dense_dense_skipping(a: &DenseMatrix, b: &DenseMatrix) -> Result<Matrix> {
    let (m, n) = (a.rows, b.cols);
    let mut out = try_alloc_zeroed(m * n)?;
    let bv = &b.values[..];
    let nnz = fill_rows(&mut out, n, |r0, block| {
        for (t, orow) in block.chunks_mut(n).enumerate() {
            for (kk, &v) in a.row(r0 + t).iter().enumerate() {
                if v == 0.0 {
                    continue;
                }
                let brow = &bv[kk * n..(kk + 1) * n];
                for (o, &y) in orow.iter_mut().zip(brow) {
                    *o += v * y;
                }
            }
        }
    });
    Ok(dense_result(m, n, out, nnz))
}

/// A dense product (`m, k, n >= 1`: [`matmul_with_range`] answers empty shapes before any
/// kernel), with its value range where dgemm computed it.
fn dense_dense(a: &DenseMatrix, b: &DenseMatrix) -> Result<(Matrix, Option<ValueRange>)> {
    let (m, n) = (a.rows, b.cols);
    if super::partial::dense_product_uses_dgemm(m, n) {
        return dgemm(a, b).map(|(product, range)| (product, Some(range)));
    }
    let mut out = try_alloc_zeroed(m * n)?;
    let nnz = if n == 1 {
        matrix_vector(a, &b.values, &mut out)
    } else {
        few_rows(a, &b.values, n, false, &mut out)
    };
    Ok((dense_result(m, n, out, nnz), None))
}

/// Columns of the right operand [`few_rows`] takes at a time: packed, a block of them over a
/// right operand of 500 rows is 125 KiB, which stays in a core's L2 cache.
const FEW_ROWS_BLOCK: usize = 32;

/// `out = a %*% B` for an `a` of at most [`super::partial::FEW_ROWS`] rows and a k×n `B` held
/// in `b` row-major, or, with `b_transposed`, as an n×k row-major matrix read transposed. Every
/// output cell is summed over `kk` in order, `o += a_ik * b_kj` from 0: the arithmetic of the
/// zero-skipping product [`dense_dense_skipping`] (skipping a zero of `a` adds a zero product,
/// which changes no sum that starts at +0 and so is never -0) and of [`vector_matrix`], so all
/// three give the same bits, in either layout of `B`.
///
/// dgemm packs the whole right operand for so few rows and pads its register tile to them:
/// an autoencoder's `W2 %*% t(H1)`, 2×500 by 500×2000, took 1.2-1.9 ms there against numpy's
/// 0.35. Here `B` is read once, in blocks of [`FEW_ROWS_BLOCK`] columns packed contiguous
/// (each a few KiB of `B`, in cache for every row of `a`), split over threads where `B` is
/// large. Returns the non-zeros of `out` (m×n row-major).
fn few_rows(a: &DenseMatrix, b: &[f64], n: usize, b_transposed: bool, out: &mut [f64]) -> usize {
    let (m, k) = (a.rows, a.cols);
    debug_assert!(m <= super::partial::FEW_ROWS && out.len() == m * n && b.len() == k * n);
    // `panel`: a worker's packing buffer, reused from block to block (each overwrites the part
    // it reads).
    let block = |panel: &mut Vec<f64>, jb: usize| -> Vec<f64> {
        let j0 = jb * FEW_ROWS_BLOCK;
        let w = FEW_ROWS_BLOCK.min(n - j0);
        let panel = &mut panel[..k * w];
        let mut res = vec![0.0; m * w];
        crate::simd::widest(
            #[inline(always)]
            || {
                if !b_transposed {
                    // Row-major: the block's part of each row of `B`.
                    for (kk, prow) in panel.chunks_exact_mut(w).enumerate() {
                        prow.copy_from_slice(&b[kk * n + j0..kk * n + j0 + w]);
                    }
                } else {
                    // Read transposed: eight values of each of the block's rows of the
                    // n×k matrix at a time (a cache line each), into eight rows of the panel
                    // (2 KiB, in L1); a whole row at a time strode through all of the panel.
                    for kk0 in (0..k).step_by(8) {
                        let t = 8.min(k - kk0);
                        let rows = &mut panel[kk0 * w..(kk0 + t) * w];
                        for jj in 0..w {
                            let at = (j0 + jj) * k + kk0;
                            for (prow, &v) in rows.chunks_exact_mut(w).zip(&b[at..at + t]) {
                                prow[jj] = v;
                            }
                        }
                    }
                }
                for (i, acc) in res.chunks_exact_mut(w).enumerate() {
                    for (&x, prow) in a.row(i).iter().zip(panel.chunks_exact(w)) {
                        for (o, &y) in acc.iter_mut().zip(prow) {
                            *o += x * y;
                        }
                    }
                }
            },
        );
        res
    };
    let blocks = n.div_ceil(FEW_ROWS_BLOCK);
    let new_panel = || vec![0.0; k * FEW_ROWS_BLOCK];
    let results: Vec<Vec<f64>> = if k * n >= PAR_THRESHOLD {
        (0..blocks)
            .into_par_iter()
            .map_init(new_panel, block)
            .collect()
    } else {
        let mut panel = new_panel();
        (0..blocks).map(|jb| block(&mut panel, jb)).collect()
    };
    for (jb, res) in results.iter().enumerate() {
        let j0 = jb * FEW_ROWS_BLOCK;
        let w = FEW_ROWS_BLOCK.min(n - j0);
        for (i, r) in res.chunks_exact(w).enumerate() {
            out[i * n + j0..i * n + j0 + w].copy_from_slice(r);
        }
    }
    count_nnz(out)
}

/// `a %*% b` through `matrixmultiply`'s dgemm (`m, n > 1`, `k >= 1`). With beta 0 dgemm writes
/// every output cell without reading it, so the output is not zeroed first: for a result of
/// up to 32 MiB, which the system allocator serves from reused memory rather than fresh
/// (already zero) pages, zeroing would be a whole extra pass over it.
fn dgemm(a: &DenseMatrix, b: &DenseMatrix) -> Result<(Matrix, ValueRange)> {
    dgemm_strided(a, &b.values, b.cols, (b.cols as isize, 1))
}

/// Whether [`matmul`] (or, with `b_transposed`, [`matmul_nt`]) multiplies a dense m×k matrix
/// by the dense right operand `b` (k×n, or n×k read transposed) with dgemm: a product dgemm's
/// shape, a right operand without non-finite values (else zeros of the left one are skipped),
/// and for `matmul_nt` one whose transpose would stay dense.
fn dgemm_computes(m: usize, k: usize, n: usize, b: &DenseMatrix, b_transposed: bool) -> bool {
    m > 0
        && k > 0
        && super::partial::dense_product_uses_dgemm(m, n)
        && (!b_transposed || !crate::matrix::prefers_sparse(k, n, b.nnz))
        && all_finite(&b.values)
}

/// `t(a %*% b)`, or `t(a %*% t(b))` with `b_transposed`, bit for bit the transpose of the
/// product [`matmul`] (or [`matmul_nt`]) computes: where that product is dgemm's, dgemm writes
/// it column by column into the transpose's rows (the output's strides change where each cell
/// goes, not how it is summed), so neither the product nor a transpose's pass over it is
/// materialised; every other case transposes the product. (An autoencoder's
/// `t(W %*% t(X) + b)`, after the transpose is pushed below the addition.)
///
/// ```
/// use lafuse_runtime::{Matrix, kernels};
/// let a = Matrix::from_dense_values(2, 2, vec![1.0, 2.0, 3.0, 4.0]).unwrap();
/// let b = Matrix::from_dense_values(2, 1, vec![1.0, 1.0]).unwrap();
/// let c = kernels::matmul_transposed_out(&a, &b, false).unwrap();
/// assert_eq!(c.shape(), (1, 2));
/// assert_eq!(c.into_dense_values().unwrap(), vec![3.0, 7.0]);
/// ```
pub fn matmul_transposed_out(a: &Matrix, b: &Matrix, b_transposed: bool) -> Result<Matrix> {
    let (k, n) = if b_transposed {
        (b.cols(), b.rows())
    } else {
        (b.rows(), b.cols())
    };
    let m = a.rows();
    if let (Matrix::Dense(x), Matrix::Dense(y)) = (a, b) {
        if a.cols() == k && dgemm_computes(m, k, n, y, b_transposed) {
            let b_strides = if b_transposed {
                (1, k as isize)
            } else {
                (n as isize, 1)
            };
            let out = dgemm_raw(x, &y.values, n, b_strides, (1, m as isize))?;
            let nnz = count_nnz(&out);
            return Ok(dense_result(n, m, out, nnz));
        }
    }
    if let (true, Matrix::Dense(x), Matrix::Sparse(y)) = (b_transposed, a, b) {
        // `b %*% t(a)` where `a %*% t(b)` would run `dense_sparse` (a finite, `t(b)` staying
        // sparse): the same products `a_ik * b_jk`, each cell summed over k in order (over
        // b's non-zeros here, a's there: with both finite, the zero terms either adds change
        // no sum), so the same bits, with neither the m×n product nor its transpose written
        // (an autoencoder's first layer over a sparse input, `t(W1 %*% t(X))`: 4.1-6.4 ms
        // that way, 1.9-2.1 this).
        if a.cols() == k
            && crate::matrix::prefers_sparse(k, n, y.nnz())
            && all_finite(&x.values)
            && all_finite(&y.values)
        {
            return matmul(b, &super::transpose(a)?);
        }
    }
    let product = if b_transposed {
        matmul_nt(a, b)?
    } else {
        matmul(a, b)?
    };
    super::transpose(&product)
}

/// `a %*% B` through dgemm for a k×n `B` whose cell `(kk, j)` is `b[kk * rsb + j * csb]`:
/// `b` row-major (`(n, 1)`), or an n×k row-major matrix read as its transpose (`(1, k)`).
/// dgemm packs both operands into panels before it multiplies, so the two layouts give the
/// same arithmetic, bit for bit.
fn dgemm_strided(
    a: &DenseMatrix,
    b: &[f64],
    n: usize,
    b_strides: (isize, isize),
) -> Result<(Matrix, ValueRange)> {
    let m = a.rows;
    let out = dgemm_raw(a, b, n, b_strides, (n as isize, 1))?;
    let (nnz, range) = count_nnz_and_range(&out);
    Ok((dense_result(m, n, out, nnz), range))
}

/// The m×n product's cells at the output strides `(rsc, csc)`: `(n, 1)` row-major, `(1, m)`
/// the transpose's row-major. Where a cell goes does not change how it is summed (the micro
/// kernel accumulates a register tile and then stores it), so both are bit for bit the same.
fn dgemm_raw(
    a: &DenseMatrix,
    b: &[f64],
    n: usize,
    (rsb, csb): (isize, isize),
    (rsc, csc): (isize, isize),
) -> Result<Vec<f64>> {
    let (m, k) = (a.rows, a.cols);
    debug_assert_eq!(b.len(), k * n);
    let mut out = try_with_capacity(m * n)?;
    let a = a.values.as_ptr();
    // SAFETY: the pointers cover m*k, k*n and m*n f64 values with the given strides (`out` has
    // capacity for m*n, and both output layouts address each of its m*n cells once); with
    // beta 0, dgemm writes each of the m*n output cells (k > 0) and never reads them, so after
    // it returns all m*n values are initialised.
    unsafe {
        if (rsc, csc) == (1, m as isize) && m > 1 {
            // The transpose's rows: `t(A B) = t(B) t(A)`, computed as that n×m product into
            // row-major rows. matrixmultiply stores its register tiles row by row, so a
            // column-major output ran at half its speed (an autoencoder's `t(H %*% t(W))`, 512×500
            // by 500×100: 0.81 ms against 0.59 this way). Each cell is the same sum over k in the
            // same blocks of k, its terms `a_ik * b_kj` the same products: the same bits.
            matrixmultiply::dgemm(
                n,
                k,
                m,
                1.0,
                b.as_ptr(),
                csb,
                rsb,
                a,
                1,
                k as isize,
                0.0,
                out.as_mut_ptr(),
                m as isize,
                1,
            );
        } else {
            matrixmultiply::dgemm(
                m,
                k,
                n,
                1.0,
                a,
                k as isize,
                1,
                b.as_ptr(),
                rsb,
                csb,
                0.0,
                out.as_mut_ptr(),
                rsc,
                csc,
            );
        }
        out.set_len(m * n);
    }
    Ok(out)
}

/// `a %*% t(b)` (m×n for an m×k `a` and an n×k `b`), bit for bit the product with the
/// materialised transpose: where that product is dgemm's over two dense operands, `b` is read
/// transposed in place (dgemm packs its operands, so the strides change nothing), and a
/// one-row `b` is its own transpose's values; every other case transposes `b` first.
///
/// ```
/// use lafuse_runtime::{Matrix, kernels};
/// let a = Matrix::from_dense_values(2, 2, vec![1.0, 2.0, 3.0, 4.0]).unwrap();
/// let c = kernels::matmul_nt(&a, &a).unwrap();
/// assert_eq!(c.into_dense_values().unwrap(), vec![5.0, 11.0, 11.0, 25.0]);
/// ```
pub fn matmul_nt(a: &Matrix, b: &Matrix) -> Result<Matrix> {
    if a.cols() != b.cols() {
        return Err(RuntimeError::ShapeMismatch {
            op: ShapeOp::MatrixMultiply,
            left: a.shape(),
            right: (b.cols(), b.rows()),
        });
    }
    let (m, k, n) = (a.rows(), a.cols(), b.rows());
    match (a, b) {
        // As the materialised product would run: a transpose stored dense (`transpose` keeps a
        // dense matrix dense unless it prefers sparse), multiplied by dgemm.
        (Matrix::Dense(x), Matrix::Dense(y)) if dgemm_computes(m, k, n, y, true) => {
            dgemm_strided(x, &y.values, n, (1, k as isize)).map(|(product, _)| product)
        }
        (_, Matrix::Dense(y)) if n == 1 => {
            let column = Matrix::Dense(DenseMatrix::new(k, 1, y.values.to_vec())?);
            matmul(a, &column)
        }
        // As the materialised product would run (`few_rows` after a dense transpose), with
        // `b` read in place.
        (Matrix::Dense(x), Matrix::Dense(y))
            if (1..=super::partial::FEW_ROWS).contains(&m)
                && !crate::matrix::prefers_sparse(k, n, y.nnz)
                && all_finite(&y.values) =>
        {
            let mut out = try_alloc_zeroed(m * n)?;
            let nnz = few_rows(x, &y.values, n, true, &mut out);
            Ok(dense_result(m, n, out, nnz))
        }
        _ => matmul(a, &super::transpose(b)?),
    }
}

/// Sparse a (rows drive) times dense b: each non-zero scales a row of b into the output row.
fn sparse_dense(a: &SparseMatrix, b: &DenseMatrix) -> Result<Matrix> {
    let (m, n) = (a.rows, b.cols);
    let mut out = try_alloc_zeroed(m * n)?;
    let bv = &b.values[..];
    let rows = a.slices();
    // Blocks and threads by the non-zeros read for each output row.
    let read_per_row = a.nnz().div_ceil(m.max(1)) * n;
    if n == 1 {
        // Matrix-vector: one sparse dot product per row, summed in the order of the general
        // loop below (which, for one column, ran a vector loop's preamble per non-zero), one
        // row after another. Interleaving rows to overlap their chains of dependent adds ran
        // slower where rows are long (100000 x 1000 at sparsity 0.1: two rows zipped 7.0-9.3
        // ms, four 8.2-11.3, one at a time 3.9-5.4; at 0.01 all alike): each row is a stream
        // of its own through memory, and one at a time the processor overlaps the next row's
        // loads with the current row's adds by itself.
        let nnz = fill_rows_reading(&mut out, 1, read_per_row, |r0, block| {
            for (t, o) in block.iter_mut().enumerate() {
                let (ci, cv) = rows.row(r0 + t);
                let mut s = 0.0;
                for (&kk, &v) in ci.iter().zip(cv) {
                    s += v * bv[kk as usize];
                }
                *o = s;
            }
        });
        return Ok(dense_result(m, n, out, nnz));
    }
    let nnz = fill_rows_reading(&mut out, n, read_per_row, |r0, block| {
        // Static calls, each width inlined into the instruction set `fill_rows_reading` runs
        // this closure with (`simd::widest`).
        match n {
            2 => sparse_rows_narrow::<2>(&rows, bv, r0, block),
            3 => sparse_rows_narrow::<3>(&rows, bv, r0, block),
            4 => sparse_rows_narrow::<4>(&rows, bv, r0, block),
            5 => sparse_rows_narrow::<5>(&rows, bv, r0, block),
            6 => sparse_rows_narrow::<6>(&rows, bv, r0, block),
            7 => sparse_rows_narrow::<7>(&rows, bv, r0, block),
            8 => sparse_rows_narrow::<8>(&rows, bv, r0, block),
            _ => {
                for (t, orow) in block.chunks_mut(n).enumerate() {
                    let (ci, cv) = rows.row(r0 + t);
                    for (&kk, &v) in ci.iter().zip(cv) {
                        let kk = kk as usize;
                        let brow = &bv[kk * n..(kk + 1) * n];
                        for (o, &y) in orow.iter_mut().zip(brow) {
                            *o += v * y;
                        }
                    }
                }
            }
        }
    });
    Ok(dense_result(m, n, out, nnz))
}

/// Rows `r0..` of `a %*% b` into `block` for a `b` of `N` columns: the general loop's
/// arithmetic (each output cell summed over the row's non-zeros in order, from zero), its `N`
/// sums kept in registers rather than re-read from the output row at every non-zero, whose
/// one-row slices and loop cost more than the multiply-adds (`X %*% V` over a 10000 x 1000
/// `X` of sparsity 0.1 and two columns: 2.1 ms that way).
#[inline(always)]
fn sparse_rows_narrow<const N: usize>(
    rows: &CsrSlices<'_>,
    bv: &[f64],
    r0: usize,
    block: &mut [f64],
) {
    for (t, orow) in block.chunks_exact_mut(N).enumerate() {
        let (ci, cv) = rows.row(r0 + t);
        let mut sums = [0.0; N];
        for (&kk, &v) in ci.iter().zip(cv) {
            let kk = kk as usize;
            let brow: &[f64; N] = bv[kk * N..kk * N + N]
                .try_into()
                .expect("a row of b has N values");
            for (s, &y) in sums.iter_mut().zip(brow) {
                *s += v * y;
            }
        }
        orow.copy_from_slice(&sums);
    }
}

/// Dense a (finite, so skipping b's zeros is exact) times sparse b: scatter each scaled row of
/// b, skipping a's zeros (module docs).
fn dense_sparse(a: &DenseMatrix, b: &SparseMatrix) -> Result<Matrix> {
    let (m, n) = (a.rows, b.cols);
    let mut out = try_alloc_zeroed(m * n)?;
    let bs = b.slices();
    let nnz = fill_rows(&mut out, n, |r0, block| {
        for (t, orow) in block.chunks_mut(n).enumerate() {
            for (kk, &x) in a.row(r0 + t).iter().enumerate() {
                if x == 0.0 {
                    continue;
                }
                let (ci, cv) = bs.row(kk);
                for (&j, &v) in ci.iter().zip(cv) {
                    orow[j as usize] += x * v;
                }
            }
        }
    });
    Ok(dense_result(m, n, out, nnz))
}

/// Gustavson's row-by-row sparse product with a dense accumulator per task.
fn sparse_sparse(a: &SparseMatrix, b: &SparseMatrix) -> Result<Matrix> {
    let (m, n) = (a.rows, b.cols);
    let bs = b.slices();
    let b_ptr = bs.row_ptr;
    // Work estimate per row: the number of multiply-adds.
    let flops: usize = a
        .col_idx
        .iter()
        .map(|&k| b_ptr[k as usize + 1] - b_ptr[k as usize])
        .sum();
    let rows_per_block = if flops >= PAR_THRESHOLD {
        ((BLOCK_CELLS * m) / flops.max(1)).clamp(1, m)
    } else {
        m
    };
    let block = |r0: usize, r1: usize| {
        let mut acc = vec![0.0; n];
        let mut seen = vec![false; n];
        let mut touched: Vec<u32> = Vec::new();
        let mut ptr = Vec::with_capacity(r1 - r0);
        let mut idx = Vec::new();
        let mut val = Vec::new();
        for i in r0..r1 {
            let (ci, cv) = a.row(i);
            for (&kk, &v) in ci.iter().zip(cv) {
                let (bj, bv) = bs.row(kk as usize);
                for (&j, &w) in bj.iter().zip(bv) {
                    let ju = j as usize;
                    if !seen[ju] {
                        seen[ju] = true;
                        touched.push(j);
                    }
                    acc[ju] += v * w;
                }
            }
            touched.sort_unstable();
            for &j in &touched {
                let ju = j as usize;
                if acc[ju] != 0.0 {
                    idx.push(j);
                    val.push(acc[ju]);
                }
                acc[ju] = 0.0;
                seen[ju] = false;
            }
            touched.clear();
            ptr.push(idx.len());
        }
        (ptr, idx, val)
    };
    let nblocks = m.div_ceil(rows_per_block);
    let parts: Vec<_> = if nblocks > 1 {
        (0..nblocks)
            .into_par_iter()
            .map(|bk| block(bk * rows_per_block, ((bk + 1) * rows_per_block).min(m)))
            .collect()
    } else {
        vec![block(0, m)]
    };
    sparse_result(SparseMatrix::concat_row_blocks(m, n, parts))
}

/// `t(a) %*% b` (k x n for an m x k `a` and an m x n `b`). Dense operands are read in place:
/// `dgemm` takes `a` with swapped strides, and a column vector `b` makes it the vector-matrix
/// product `t(t(b) %*% a)`, one pass over `a`'s rows; an `a` of few columns (or a `b` of very
/// few) makes it as many vector-matrix products, each cell summed over the rows in order. A
/// CSR `a` with a dense `b` is read in place too (`sparse_tn`). A sparse `b`, and a dense `a`
/// with a `b` holding NaN/±Inf (whose product skips the zeros of `t(a)`, module docs),
/// transpose `a` first.
///
/// ```
/// use lafuse_runtime::{Matrix, kernels};
/// let a = Matrix::from_dense_values(2, 2, vec![1.0, 2.0, 3.0, 4.0]).unwrap();
/// let y = Matrix::from_dense_values(2, 1, vec![1.0, 1.0]).unwrap();
/// let c = kernels::matmul_tn(&a, &y).unwrap();
/// assert_eq!(c.into_dense_values().unwrap(), vec![4.0, 6.0]);
/// ```
pub fn matmul_tn(a: &Matrix, b: &Matrix) -> Result<Matrix> {
    if a.rows() != b.rows() {
        return Err(RuntimeError::ShapeMismatch {
            op: ShapeOp::TransposedMatrixMultiply,
            left: a.shape(),
            right: b.shape(),
        });
    }
    let (m, k, n) = (a.rows(), a.cols(), b.cols());
    if m == 0 || n == 0 || k == 0 {
        return Matrix::zeros(k, n);
    }
    match (a, b) {
        (Matrix::Dense(x), Matrix::Dense(y)) if all_finite(&y.values) => dense_tn(x, y),
        (Matrix::Sparse(x), Matrix::Dense(y)) => sparse_tn(x, y),
        // A finite `a`: the zeros of `b` contribute nothing, as in `dense_sparse`.
        (Matrix::Dense(x), Matrix::Sparse(y)) if k <= FEW_VECTORS && all_finite(&x.values) => {
            dense_sparse_tn(x, y)
        }
        _ => matmul(&super::reorg::transpose(a)?, b),
    }
}

/// `t(a) %*% b` for a finite dense `a` of few columns ([`FEW_VECTORS`]) and a sparse `b`, without
/// transposing `a`: row `i` of both at a time, each non-zero `b[i, j]` times every non-zero
/// `a[i, kk]` into output cell `(kk, j)`, rows `i` in increasing order, so every cell is the sum
/// `dense_sparse` forms of `t(a)` and `b` (over `i` in order, the zeros of `a` skipped), to the
/// bit. One pass over both on one thread, the `k x n` output in cache: KMeans' `t(P) %*% X`,
/// `P` of 10000 x 5 and `X` of 10000 x 100 at sparsity 0.01, took 150 µs transposing `P` and
/// running down each of its columns (a branch on every cell, taken at random) against 80 with
/// `P` sparse.
fn dense_sparse_tn(a: &DenseMatrix, b: &SparseMatrix) -> Result<Matrix> {
    let (k, n) = (a.cols, b.cols);
    let mut out = try_alloc_zeroed(k * n)?;
    let bs = b.slices();
    for i in 0..a.rows {
        let (ci, cv) = bs.row(i);
        if ci.is_empty() {
            continue;
        }
        for (kk, &x) in a.row(i).iter().enumerate() {
            if x == 0.0 {
                continue;
            }
            let orow = &mut out[kk * n..(kk + 1) * n];
            for (&j, &v) in ci.iter().zip(cv) {
                orow[j as usize] += x * v;
            }
        }
    }
    let nnz = count_nnz(&out);
    Ok(dense_result(k, n, out, nnz))
}

/// `t(a) %*% b` for a sparse `a` without transposing it: each non-zero `a[i, kk]` scales row `i`
/// of `b` (columns `[j0, j1)`) into output row `kk`, rows `i` in increasing order, so every
/// output cell is the sum that the transposed product forms, in the same order
/// (`transpose_csr` lists a column's entries by increasing row), whatever the split. Large
/// products split `b`'s columns over threads, each into a buffer of its own (threads writing
/// neighbouring cells of one output row would share its cache lines); a vector `b` runs on
/// one thread, its output `k` values in cache and a pass over `a`'s arrays all the work.
fn sparse_tn(a: &SparseMatrix, b: &DenseMatrix) -> Result<Matrix> {
    let (m, k, n) = (a.rows, a.cols, b.cols);
    let bv = &b.values[..];
    let rows = a.slices();
    // Output columns `[j0, j1)` into `part` (`k x (j1 - j0)`, zeroed).
    let columns = |j0: usize, j1: usize, part: &mut [f64]| {
        let w = j1 - j0;
        // Static calls, each width inlined into `widest`'s instruction set.
        crate::simd::widest(
            #[inline(always)]
            || match w {
                1 => transposed_columns_narrow::<1>(&rows, bv, (m, n), j0, part),
                2 => transposed_columns_narrow::<2>(&rows, bv, (m, n), j0, part),
                3 => transposed_columns_narrow::<3>(&rows, bv, (m, n), j0, part),
                4 => transposed_columns_narrow::<4>(&rows, bv, (m, n), j0, part),
                _ => {
                    for i in 0..m {
                        let (ci, cv) = rows.row(i);
                        let brow = &bv[i * n + j0..i * n + j1];
                        for (&kk, &v) in ci.iter().zip(cv) {
                            let kk = kk as usize;
                            for (o, &y) in part[kk * w..(kk + 1) * w].iter_mut().zip(brow) {
                                *o += v * y;
                            }
                        }
                    }
                }
            },
        )
    };
    let threads = rayon::current_num_threads();
    let mut out = try_alloc_zeroed(k * n)?;
    if n == 1 {
        // The general loop's arithmetic without its one-column slices (a bounds check and a
        // loop per non-zero, twice scipy's time for the whole pass).
        for (i, &y) in bv.iter().enumerate().take(m) {
            let (ci, cv) = rows.row(i);
            for (&kk, &v) in ci.iter().zip(cv) {
                out[kk as usize] += v * y;
            }
        }
    } else if threads == 1 || a.nnz() * n < PAR_THRESHOLD {
        columns(0, n, &mut out);
    } else {
        super::fill_column_ranges(&mut out, n, n.div_ceil(threads), columns)?;
    }
    let nnz = crate::matrix::count_nnz(&out);
    Ok(dense_result(k, n, out, nnz))
}

/// `sparse_tn`'s columns `[j0, j0 + W)` of `t(a) %*% b` into `part` (`k x W`, zeroed), `b`
/// having `n` columns: the general loop's arithmetic (output row `kk` gains `a[i, kk]` times
/// row `i` of `b`'s columns, rows `i` in order), with `b`'s `W` values of a row read once and
/// the output row as an array, rather than one-row slices at every non-zero (`t(X) %*% W`
/// over a 10000 x 1000 `X` of sparsity 0.1 and two columns, one a thread: 4.6 ms that way).
#[inline(always)]
fn transposed_columns_narrow<const W: usize>(
    rows: &CsrSlices<'_>,
    bv: &[f64],
    (m, n): (usize, usize),
    j0: usize,
    part: &mut [f64],
) {
    for i in 0..m {
        let (ci, cv) = rows.row(i);
        let brow: [f64; W] = bv[i * n + j0..i * n + j0 + W]
            .try_into()
            .expect("W columns of a row of b");
        for (&kk, &v) in ci.iter().zip(cv) {
            let kk = kk as usize;
            let orow: &mut [f64; W] = (&mut part[kk * W..kk * W + W])
                .try_into()
                .expect("a row of the output part has W values");
            for (o, &y) in orow.iter_mut().zip(&brow) {
                *o += v * y;
            }
        }
    }
}

fn dense_tn(a: &DenseMatrix, b: &DenseMatrix) -> Result<Matrix> {
    let (m, k, n) = (a.rows, a.cols, b.cols);
    let mut out = try_alloc_zeroed(k * n)?;
    if n == 1 {
        // t(a) %*% b = t(t(b) %*% a): the vector-matrix product, one pass over a's rows.
        let nnz = vector_matrix(&b.values, a, &mut out);
        return Ok(dense_result(k, 1, out, nnz));
    }
    if k <= FEW_VECTORS {
        // Few columns of a: they are the row vectors of a vector-matrix product with b.
        let nnz = vectors_matrix(&columns_of(a)?, k, b, &mut out)?;
        return Ok(dense_result(k, n, out, nnz));
    }
    if n <= FEW_RIGHT_VECTORS {
        // Few columns of b: t(a) %*% b = t(t(b) %*% a), b's columns the vectors.
        let mut product = try_alloc_zeroed(n * k)?;
        let nnz = vectors_matrix(&columns_of(b)?, n, a, &mut product)?;
        for (j, row) in product.chunks_exact(k).enumerate() {
            for (kk, &x) in row.iter().enumerate() {
                out[kk * n + j] = x;
            }
        }
        return Ok(dense_result(k, n, out, nnz));
    }
    // SAFETY: a is m x k and b is m x n row-major; t(a) is read as k x m with row stride 1 and
    // column stride k; out is k x n row-major.
    unsafe {
        matrixmultiply::dgemm(
            k,
            m,
            n,
            1.0,
            a.values.as_ptr(),
            1,
            k as isize,
            b.values.as_ptr(),
            n as isize,
            1,
            0.0,
            out.as_mut_ptr(),
            n as isize,
            1,
        );
    }
    let nnz = count_nnz(&out);
    Ok(dense_result(k, n, out, nnz))
}

/// The most columns of `a` for which `dense_tn` forms `t(a) %*% b` as that many vector-matrix
/// products ([`vectors_matrix`]) rather than a general product, whose micro-kernel tiles are
/// then mostly empty (`X` of 10000 x 100 or 100000 x 1000, `a` of 2 to 16 columns: 1.8-2.4x
/// to 1.3-1.6x faster so; 17 columns: as fast as the general product).
const FEW_VECTORS: usize = 16;

/// The same for the columns of `b` (`t(a) %*% b = t(t(b) %*% a)`), where the general product
/// fills its tiles along `a`'s columns and is the faster from about six vectors on (8 columns of
/// `b` against a 10000 x 100 `a`: 0.43 ms against 0.54-0.66; 5: 0.44 against 0.35).
const FEW_RIGHT_VECTORS: usize = 5;

/// The columns of `a` as the rows of a row-major `a.cols x a.rows` buffer.
fn columns_of(a: &DenseMatrix) -> Result<Vec<f64>> {
    super::reorg::transpose_values(&a.values, a.rows, a.cols)
}

/// Column-block width of the symmetric dense `tsmm`.
const TSMM_BLOCK: usize = 256;

/// `t(a) %*% a` (n x n for an m x n input), computing only the upper triangle's blocks and
/// mirroring them, so the result is exactly symmetric. With NaN/±Inf in `a` the product skips
/// the zeros of `t(a)` (module docs), which makes its lower triangle differ from its upper
/// one; SystemDS computes the upper triangle and mirrors it, and so does this.
pub fn tsmm(a: &Matrix) -> Result<Matrix> {
    let (m, n) = a.shape();
    if m == 0 || n == 0 {
        return Matrix::zeros(n, n);
    }
    if !a.all_finite() {
        let product = matmul(&super::reorg::transpose(a)?, a)?;
        let mut out = product.into_dense_values()?;
        mirror_upper(&mut out, n);
        let nnz = count_nnz(&out);
        return Ok(dense_result(n, n, out, nnz));
    }
    Ok(match a {
        Matrix::Sparse(s) => sparse_sparse(&transpose_csr(s)?, s)?,
        _ => {
            let d = a.dense_cow()?;
            let x = &d.values[..];
            let mut out = try_alloc_zeroed(n * n)?;
            for b0 in (0..n).step_by(TSMM_BLOCK) {
                let b1 = (b0 + TSMM_BLOCK).min(n);
                // Rows b0..b1 of the result, columns b0..n: t(X[:, b0..b1]) %*% X[:, b0..n].
                // SAFETY: the views stay inside x (m x n) and out (n x n) with the given strides.
                unsafe {
                    matrixmultiply::dgemm(
                        b1 - b0,
                        m,
                        n - b0,
                        1.0,
                        x.as_ptr().add(b0),
                        1,
                        n as isize,
                        x.as_ptr().add(b0),
                        n as isize,
                        1,
                        0.0,
                        out.as_mut_ptr().add(b0 * n + b0),
                        n as isize,
                        1,
                    );
                }
            }
            mirror_upper(&mut out, n);
            let nnz = count_nnz(&out);
            dense_result(n, n, out, nnz)
        }
    })
}

/// Copies the upper triangle of the row-major `n x n` `out` into its lower one.
fn mirror_upper(out: &mut [f64], n: usize) {
    for i in 0..n {
        for j in 0..i {
            out[i * n + j] = out[j * n + i];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::{both, close, m, rand};
    use super::*;

    /// A matrix's cells as bit patterns, row-major.
    fn bits(x: &Matrix) -> Vec<u64> {
        let d = x.to_dense().unwrap();
        d.values.iter().map(|v| v.to_bits()).collect()
    }

    /// The product by definition, over the left operand's non-zero cells (module docs).
    fn naive(a: &Matrix, b: &Matrix) -> Matrix {
        let (x, y) = (a.to_dense().unwrap(), b.to_dense().unwrap());
        let (mm, k, n) = (x.rows, x.cols, y.cols);
        let mut out = vec![0.0; mm * n];
        for i in 0..mm {
            for j in 0..n {
                let mut s = 0.0;
                for kk in 0..k {
                    if x.values[i * k + kk] != 0.0 {
                        s += x.values[i * k + kk] * y.values[kk * n + j];
                    }
                }
                out[i * n + j] = s;
            }
        }
        Matrix::from_dense_values(mm, n, out).unwrap()
    }

    #[test]
    fn all_format_combinations_and_shapes() {
        let shapes = [
            (7, 5, 3),
            (40, 60, 1),
            (1, 60, 40),
            (90, 70, 80),
            (300, 20, 300),
            (1, 1, 1),
        ];
        for (i, &(mm, k, n)) in shapes.iter().enumerate() {
            for (da, db) in [(1.0, 1.0), (0.1, 1.0), (1.0, 0.1), (0.05, 0.05)] {
                let a = rand(mm, k, da, i as u64);
                let b = rand(k, n, db, 100 + i as u64);
                let want = naive(&a, &b);
                for x in both(&a) {
                    for y in both(&b) {
                        let got = matmul(&x, &y).unwrap();
                        got.validate().unwrap();
                        assert!(close(&got, &want, 1e-12), "{mm}x{k}x{n}");
                    }
                }
            }
        }
    }

    /// A left operand of at most `FEW_ROWS` rows takes `few_rows`, whose cells are summed in
    /// the order of the zero-skipping product (the definition above): the same bits, with the
    /// right operand row-major or read transposed in place, with the output transposed, over
    /// blocks of columns, partial blocks and the parallel threshold included.
    #[test]
    fn a_product_of_few_rows_has_the_bits_of_the_zero_skipping_product_in_either_layout() {
        let shapes = [
            (2, 1, 2),
            (3, 7, 33),
            (4, 500, 70),
            (2, 500, 2000),
            (1, 40, 65),
        ];
        for (s, &(mm, k, n)) in shapes.iter().enumerate() {
            let a = rand(mm, k, 0.8, 300 + s as u64);
            let b = rand(k, n, 0.9, 400 + s as u64);
            let bt = super::super::transpose(&b).unwrap().to_dense().unwrap();
            let bt = Matrix::Dense(bt);
            let want = bits(&naive(&a, &b));
            let a = Matrix::Dense(a.to_dense().unwrap());
            let b = Matrix::Dense(b.to_dense().unwrap());
            assert_eq!(bits(&matmul(&a, &b).unwrap()), want, "{mm}x{k}x{n}");
            assert_eq!(bits(&matmul_nt(&a, &bt).unwrap()), want, "{mm}x{k}x{n} nt");
            let t = matmul_transposed_out(&a, &bt, true).unwrap();
            let t = super::super::transpose(&t).unwrap();
            assert_eq!(bits(&t), want, "{mm}x{k}x{n} transposed out");
        }
    }

    #[test]
    fn zeros_of_the_left_operand_are_skipped_and_its_non_finite_values_meet_every_cell() {
        // Right operand with NaN and Inf: the left operand's zeros never meet them.
        let a = m(&[&[0.0, 1.0, 0.0], &[0.0, 0.0, 0.0], &[0.0, 0.0, 2.0]]);
        let b = m(&[&[f64::NAN, 1.0], &[1.0, 0.0], &[0.0, f64::INFINITY]]);
        let want = m(&[&[1.0, 0.0], &[0.0, 0.0], &[0.0, f64::INFINITY]]);
        assert!(close(&naive(&a, &b), &want, 0.0));
        // Left operand with NaN and -Inf: they meet the right operand's zeros (NaN there).
        let c = m(&[&[f64::NEG_INFINITY, 0.0], &[0.0, 3.0], &[f64::NAN, 0.0]]);
        let d = m(&[&[0.0, 2.0, 0.0], &[1.0, 0.0, 0.0]]);
        let nan = f64::NAN;
        let want_cd = m(&[
            &[nan, f64::NEG_INFINITY, nan],
            &[3.0, 0.0, 0.0],
            &[nan, nan, nan],
        ]);
        assert!(close(&naive(&c, &d), &want_cd, 0.0));
        for (l, r, want) in [(&a, &b, &want), (&c, &d, &want_cd)] {
            for x in both(l) {
                for y in both(r) {
                    let got = matmul(&x, &y).unwrap();
                    got.validate().unwrap();
                    assert!(close(&got, want, 0.0), "{got:?}");
                }
            }
        }
        // Every kernel path (dot products, vector-matrix, dgemm's shapes, sparse) agrees with
        // the definition where the right operand holds non-finite values.
        for (i, &(mm, k, n)) in [(40, 60, 1), (1, 60, 40), (90, 70, 80), (1, 1, 1)]
            .iter()
            .enumerate()
        {
            for (da, db) in [(1.0, 1.0), (0.3, 1.0), (0.3, 0.2)] {
                let a = rand(mm, k, da, 500 + i as u64);
                let mut b = rand(k, n, db, 600 + i as u64).to_dense().unwrap();
                let mut v = b.values.to_vec();
                v[0] = f64::INFINITY;
                let last = v.len() - 1;
                v[last / 2] = f64::NAN;
                v[last] = f64::NEG_INFINITY;
                b.nnz = count_nnz(&v);
                b.values = v.into();
                let b = Matrix::Dense(b);
                let want = naive(&a, &b);
                for x in both(&a) {
                    for y in both(&b) {
                        let got = matmul(&x, &y).unwrap();
                        got.validate().unwrap();
                        assert!(close(&got, &want, 1e-12), "{mm}x{k}x{n} at {da}, {db}");
                        let t = super::super::reorg::transpose(&x).unwrap();
                        let got = matmul_tn(&t, &y).unwrap();
                        assert!(close(&got, &want, 1e-12), "t: {mm}x{k}x{n} at {da}, {db}");
                    }
                }
            }
        }
    }

    #[test]
    fn tsmm_with_non_finite_values_mirrors_the_upper_triangle() {
        // t(X) %*% X for X = [0 Inf; 1 2]: upper (0,1) = 1 * 2 (X[0,0] is a skipped zero),
        // lower (1,0) would be Inf * 0 + 2 * 1 = NaN; SystemDS mirrors the upper triangle.
        let x = m(&[&[0.0, f64::INFINITY], &[1.0, 2.0]]);
        let want = m(&[&[1.0, 2.0], &[2.0, f64::INFINITY]]);
        for y in both(&x) {
            let got = tsmm(&y).unwrap();
            got.validate().unwrap();
            assert!(close(&got, &want, 0.0), "{got:?}");
        }
    }

    #[test]
    fn a_range_computed_on_the_way_is_the_products_value_range() {
        let mut b = Matrix::Dense(rand(40, 30, 1.0, 7).to_dense().unwrap());
        let mut ranged = 0;
        for special in [
            None,
            Some(f64::INFINITY),
            Some(f64::NAN),
            Some(f64::NEG_INFINITY),
        ] {
            if let (Some(v), Matrix::Dense(d)) = (special, &mut b) {
                d.values.to_mut()[17] = v;
            }
            assert_eq!(b.value_range().is_finite(), special.is_none());
            for (mm, da) in [(50, 1.0), (50, 0.05), (1, 1.0), (3000, 0.5)] {
                let a = rand(mm, 40, da, 11);
                for x in both(&a) {
                    let (product, range) = matmul_with_range(&x, &b).unwrap();
                    let Some(range) = range else { continue };
                    ranged += 1;
                    let want = product.value_range();
                    assert_eq!(
                        (range.min, range.max, range.nan),
                        (want.min, want.max, want.nan),
                        "{mm}x40 at density {da}, special {special:?}"
                    );
                }
            }
        }
        assert!(ranged > 0, "the dgemm path reports a range");
    }

    #[test]
    fn shape_errors_and_empty() {
        let e = matmul(&Matrix::zeros(3, 4).unwrap(), &Matrix::zeros(5, 2).unwrap()).unwrap_err();
        assert!(e.to_string().contains("3x4 and 5x2"), "{e}");
        let z = matmul(&Matrix::zeros(3, 0).unwrap(), &Matrix::zeros(0, 2).unwrap()).unwrap();
        assert_eq!(z.shape(), (3, 2));
        assert_eq!(z.nnz(), 0);
        // Dense operands too (an empty inner dimension is answered with zeros before any kernel).
        let (x, y) = (
            Matrix::from_dense_values(3, 0, vec![]).unwrap(),
            Matrix::from_dense_values(0, 2, vec![]).unwrap(),
        );
        let z = matmul(&x, &y).unwrap();
        z.validate().unwrap();
        assert_eq!((z.shape(), z.nnz(), z.get(2, 1)), ((3, 2), 0, 0.0));
        assert_eq!(
            matmul(&Matrix::zeros(0, 3).unwrap(), &Matrix::zeros(3, 2).unwrap())
                .unwrap()
                .shape(),
            (0, 2)
        );
    }

    #[test]
    fn a_matrix_vector_product_is_one_dot_product_per_row_to_the_bit() {
        // Four rows at a time and blocks over threads change nothing in any row's sum.
        for (i, &(mm, k)) in [(1, 1), (3, 9), (13, 100), (70_001, 17)].iter().enumerate() {
            let a = rand(mm, k, 1.0, 3 + i as u64).to_dense().unwrap();
            let v = rand(k, 1, 1.0, 30 + i as u64).to_dense().unwrap();
            let got = matmul(&Matrix::Dense(a.clone()), &Matrix::Dense(v.clone()))
                .unwrap()
                .into_dense_values()
                .unwrap();
            for (r, g) in got.iter().enumerate() {
                assert_eq!(
                    g.to_bits(),
                    dot(a.row(r), &v.values).to_bits(),
                    "row {r} of {mm}x{k}"
                );
            }
        }
    }

    #[test]
    fn a_sparse_dense_product_sums_each_cell_in_row_order_to_the_bit() {
        // A vector: one row's dot product after another. A few columns: the sums in
        // registers (`sparse_rows_narrow`, 2 to 8 columns); more: the general loop. Rows of
        // different lengths (empty ones too), odd row counts, non-finite values in the right
        // operand, products large enough for blocks over threads.
        for (i, &(mm, k, sp)) in [
            (1, 1, 1.0),
            (9, 30, 0.3),
            (403, 200, 0.05),
            (20_000, 50, 0.2),
        ]
        .iter()
        .enumerate()
        {
            let a = rand(mm, k, sp, 5 + i as u64).try_to_sparse().unwrap();
            for n in [1, 2, 3, 5, 8, 9] {
                let mut v = rand(k, n, 1.0, 50 + i as u64).to_dense().unwrap();
                v.values.to_mut()[0] = f64::NAN;
                if k * n > 3 {
                    v.values.to_mut()[3] = f64::NEG_INFINITY;
                }
                let got = matmul(&Matrix::Sparse(a.clone()), &Matrix::Dense(v.clone()))
                    .unwrap()
                    .into_dense_values()
                    .unwrap();
                for (cell, g) in got.iter().enumerate() {
                    let (r, j) = (cell / n, cell % n);
                    let (ci, cv) = a.row(r);
                    let mut want = 0.0;
                    for (&kk, &x) in ci.iter().zip(cv) {
                        want += x * v.values[kk as usize * n + j];
                    }
                    let same = g.to_bits() == want.to_bits() || (g.is_nan() && want.is_nan());
                    assert!(
                        same,
                        "cell ({r}, {j}) of {mm}x{k} by {k}x{n}: {g} vs {want}"
                    );
                }
            }
        }
    }

    #[test]
    fn dense_transposed_products_with_few_columns_sum_each_cell_over_the_rows_in_order() {
        // Few columns of the left operand (vector-matrix products with the right one), few of
        // the right one (the transposed product of those), and neither (dgemm, within
        // 1e-12): small shapes on one thread, and shapes large and wide enough to split their
        // columns over threads; non-finite values in the left operand meet every cell.
        for (i, &(mm, k, n)) in [
            (1, 1, 2),
            (7, 3, 5),
            (3000, 3, 100),
            (3000, 16, 70),
            (3000, 100, 2),
            (3000, 100, 5),
            (500, 17, 9),
        ]
        .iter()
        .enumerate()
        {
            let mut a = rand(mm, k, 1.0, 31 + i as u64).to_dense().unwrap();
            a.values.to_mut()[0] = f64::NAN;
            if mm * k > 4 {
                a.values.to_mut()[4] = f64::INFINITY;
            }
            let b = rand(mm, n, 1.0, 37 + i as u64).to_dense().unwrap();
            let got = matmul_tn(&Matrix::Dense(a.clone()), &Matrix::Dense(b.clone())).unwrap();
            got.validate().unwrap();
            let got = got.into_dense_values().unwrap();
            let mut sums = vec![0.0; k * n];
            for r in 0..mm {
                for kk in 0..k {
                    for j in 0..n {
                        sums[kk * n + j] += a.values[r * k + kk] * b.values[r * n + j];
                    }
                }
            }
            let same = |x: f64, y: f64| x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan());
            let few = k <= FEW_VECTORS || n <= FEW_RIGHT_VECTORS;
            for (cell, (&g, &w)) in got.iter().zip(&sums).enumerate() {
                let near = (g - w).abs() <= 1e-12 * w.abs().max(1.0);
                assert!(
                    same(g, w) || (!few && near),
                    "cell {cell} of t({mm}x{k}) by {mm}x{n}: {g} vs {w}"
                );
            }
        }
    }

    #[test]
    fn a_dense_by_sparse_transposed_product_has_the_bits_of_the_materialised_one() {
        // `dense_sparse_tn` (a finite dense left operand of few columns) sums each cell over
        // the rows in order with the zeros of `a` skipped, as `dense_sparse` of the transpose
        // does: the same bits, non-finite values of `b` included; an `a` with a non-finite
        // value (whose products with the zeros of `b` are NaN) or wider takes the transpose.
        for (i, (mm, k, n)) in [
            (1, 1, 2),
            (40, 5, 30),
            (3000, 5, 100),
            (3000, 16, 7),
            (300, 17, 9),
        ]
        .into_iter()
        .enumerate()
        {
            let mut a = rand(mm, k, 1.0, 43 + i as u64).to_dense().unwrap();
            // Zeros in `a`, skipped as the transposed product skips them.
            for (c, v) in a.values.to_mut().iter_mut().enumerate() {
                if c % 7 == 0 || c % 7 == 3 {
                    *v = 0.0;
                }
            }
            let mut b = rand(mm, n, 0.1, 47 + i as u64).try_to_sparse().unwrap();
            if b.values.len() > 1 {
                b.values.to_mut()[0] = f64::NEG_INFINITY;
                b.values.to_mut()[1] = f64::NAN;
            }
            let b = Matrix::Sparse(b);
            let mut infinite = a.clone();
            infinite.values.to_mut()[mm * k / 2] = f64::INFINITY;
            for a in [Matrix::Dense(a), Matrix::Dense(infinite)] {
                let got = matmul_tn(&a, &b).unwrap();
                got.validate().unwrap();
                let want = matmul(&super::super::reorg::transpose(&a).unwrap(), &b).unwrap();
                let bits = |m: Matrix| {
                    let v = m.into_dense_values().unwrap();
                    v.iter().map(|x| x.to_bits()).collect::<Vec<_>>()
                };
                assert_eq!(bits(got), bits(want), "t({mm}x{k}) by {mm}x{n}");
            }
        }
    }

    #[test]
    fn a_sparse_transposed_product_has_the_bits_of_the_materialised_one() {
        // `sparse_tn` sums each cell in the transposed product's order, so the two agree to
        // the bit, non-finite values of `b` included.
        // (3000, 40, n) is large enough to split its columns over threads: parts of one to
        // five columns (`transposed_columns_narrow` to four, the general loop beyond).
        let shapes = [(300, 40, 1), (50, 7, 3), (1, 1, 1), (3000, 40, 5)]
            .into_iter()
            .chain((2..=10).map(|n| (3000, 40, n)));
        for (i, (mm, k, n)) in shapes.enumerate() {
            let a = rand(mm, k, 0.2, 17 + i as u64).try_to_sparse().unwrap();
            let mut b = rand(mm, n, 1.0, 71 + i as u64).to_dense().unwrap();
            b.values.to_mut()[0] = f64::INFINITY;
            if b.values.len() > 2 {
                b.values.to_mut()[2] = f64::NAN;
            }
            let (a, b) = (Matrix::Sparse(a), Matrix::Dense(b));
            let got = matmul_tn(&a, &b).unwrap().into_dense_values().unwrap();
            let want = matmul(&super::super::reorg::transpose(&a).unwrap(), &b)
                .unwrap()
                .into_dense_values()
                .unwrap();
            let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&got), bits(&want), "{mm}x{k} by {mm}x{n}");
            // And the sums themselves, each over the rows in order.
            let (Matrix::Sparse(a), Matrix::Dense(b)) = (&a, &b) else {
                unreachable!("built so")
            };
            let mut sums = vec![0.0; k * n];
            for r in 0..mm {
                let (ci, cv) = a.row(r);
                for (&kk, &x) in ci.iter().zip(cv) {
                    for j in 0..n {
                        sums[kk as usize * n + j] += x * b.values[r * n + j];
                    }
                }
            }
            assert_eq!(bits(&got), bits(&sums), "{mm}x{k} by {mm}x{n}, in order");
        }
    }

    #[test]
    fn transposed_left_products_match_the_materialised_transpose() {
        // (rows of both, columns of a, columns of b): vectors, 1x1, wide and tall.
        for (i, &(mm, k, n)) in [(7, 5, 3), (60, 40, 1), (60, 1, 40), (90, 70, 2), (1, 1, 1)]
            .iter()
            .enumerate()
        {
            for (da, db) in [(1.0, 1.0), (0.1, 1.0), (1.0, 0.1)] {
                let a = rand(mm, k, da, 7 + i as u64);
                let b = rand(mm, n, db, 70 + i as u64);
                let want = naive(&super::super::reorg::transpose(&a).unwrap(), &b);
                for x in both(&a) {
                    for y in both(&b) {
                        let got = matmul_tn(&x, &y).unwrap();
                        got.validate().unwrap();
                        assert_eq!(got.shape(), (k, n));
                        assert!(close(&got, &want, 1e-12), "{mm}x{k} by {mm}x{n}");
                    }
                }
            }
        }
        // NaN and infinities propagate as in the materialised product.
        let a = m(&[&[0.0, f64::NAN], &[f64::INFINITY, 1.0]]);
        let y = m(&[&[0.0], &[2.0]]);
        let want = naive(&super::super::reorg::transpose(&a).unwrap(), &y);
        let got = matmul_tn(&a, &y).unwrap();
        assert!(close(&got, &want, 0.0), "{got:?} vs {want:?}");
        let e =
            matmul_tn(&Matrix::zeros(3, 4).unwrap(), &Matrix::zeros(5, 2).unwrap()).unwrap_err();
        assert!(e.to_string().contains("4x3"), "{e}");
        assert_eq!(
            matmul_tn(&Matrix::zeros(0, 3).unwrap(), &Matrix::zeros(0, 2).unwrap())
                .unwrap()
                .shape(),
            (3, 2)
        );
    }

    /// `a %*% t(b)` is the product with the materialised transpose, bit for bit, in every
    /// format, shape (dgemm sizes, matrix-vector and vector-matrix, 1x1, empty) and with NaN
    /// and infinities in either operand.
    #[test]
    fn transposed_right_products_are_the_materialised_product_bit_for_bit() {
        // (rows of a, columns of both, rows of b).
        let shapes = [
            (7, 5, 3),
            (60, 40, 1),
            (1, 40, 60),
            (90, 70, 20),
            (1, 1, 1),
            (0, 3, 4),
        ];
        for (i, &(mm, k, n)) in shapes.iter().enumerate() {
            for (da, db) in [(1.0, 1.0), (0.1, 1.0), (1.0, 0.1)] {
                let a = rand(mm, k, da, 11 + i as u64);
                let mut b = rand(n, k, db, 110 + i as u64);
                if i == 3 && da == 1.0 && db == 1.0 {
                    // A non-finite right operand takes the zero-skipping product.
                    let mut v = b.to_dense().unwrap().values.to_vec();
                    v[5] = f64::INFINITY;
                    v[9] = f64::NAN;
                    b = Matrix::from_dense_values(n, k, v).unwrap();
                }
                for x in both(&a) {
                    for y in both(&b) {
                        let got = matmul_nt(&x, &y).unwrap();
                        got.validate().unwrap();
                        let want =
                            matmul(&x, &super::super::reorg::transpose(&y).unwrap()).unwrap();
                        assert_eq!(got.shape(), (mm, n));
                        assert!(
                            bits(&got) == bits(&want),
                            "{mm}x{k} by t({n}x{k}), sparse: {} {}",
                            x.is_sparse(),
                            y.is_sparse()
                        );
                    }
                }
            }
        }
        let e =
            matmul_nt(&Matrix::zeros(3, 4).unwrap(), &Matrix::zeros(5, 2).unwrap()).unwrap_err();
        assert!(e.to_string().contains("2x5"), "{e}");
    }

    #[test]
    fn products_with_a_transposed_output_are_the_transposed_product_bit_for_bit() {
        // (rows of a, inner dimension, columns of the product): dgemm's shapes and the others.
        let shapes = [
            (7, 5, 3),
            (60, 40, 1),
            (1, 40, 60),
            (90, 70, 80),
            (300, 50, 200),
            (2, 100, 130),
            (1, 1, 1),
            (0, 3, 4),
            // An inner dimension past dgemm's blocks of k, and more rows than columns: dgemm
            // computes a transposed output as `t(b) %*% t(a)`, whose sums must still be split
            // into the same blocks of k.
            (130, 600, 70),
        ];
        for (i, &(mm, k, n)) in shapes.iter().enumerate() {
            for (da, db) in [(1.0, 1.0), (0.1, 1.0), (1.0, 0.1)] {
                let mut a = rand(mm, k, da, 21 + i as u64);
                if i == 5 && db == 0.1 {
                    // A non-finite left operand meets the right one's zeros.
                    let mut v = a.to_dense().unwrap().values.to_vec();
                    v[7] = f64::NAN;
                    v[150] = f64::NEG_INFINITY;
                    a = Matrix::from_dense_values(mm, k, v).unwrap();
                }
                let mut b = rand(k, n, db, 210 + i as u64);
                if i == 4 && da == 1.0 && db == 1.0 {
                    // A non-finite right operand takes the zero-skipping product.
                    let mut v = b.to_dense().unwrap().values.to_vec();
                    v[5] = f64::INFINITY;
                    v[9] = f64::NAN;
                    b = Matrix::from_dense_values(k, n, v).unwrap();
                }
                let bt = super::super::reorg::transpose(&b).unwrap();
                for x in both(&a) {
                    for (y, yt) in both(&b).into_iter().zip(both(&bt)) {
                        let t = |p: Matrix| super::super::reorg::transpose(&p).unwrap();
                        for (got, want, what) in [
                            (
                                matmul_transposed_out(&x, &y, false).unwrap(),
                                t(matmul(&x, &y).unwrap()),
                                "t(a %*% b)",
                            ),
                            (
                                matmul_transposed_out(&x, &yt, true).unwrap(),
                                t(matmul_nt(&x, &yt).unwrap()),
                                "t(a %*% t(b))",
                            ),
                        ] {
                            got.validate().unwrap();
                            assert_eq!(got.shape(), (n, mm), "{what}");
                            assert!(
                                bits(&got) == bits(&want),
                                "{what}: {mm}x{k} by {k}x{n}, sparse: {} {}",
                                x.is_sparse(),
                                y.is_sparse()
                            );
                        }
                    }
                }
            }
        }
        let e = matmul_transposed_out(
            &Matrix::zeros(3, 4).unwrap(),
            &Matrix::zeros(5, 2).unwrap(),
            false,
        )
        .unwrap_err();
        assert!(e.to_string().contains("5x2"), "{e}");
    }

    #[test]
    fn tsmm_matches_transpose_product() {
        for (mm, n, d) in [(50, 7, 1.0), (200, 600, 0.5), (300, 80, 0.05), (1, 1, 1.0)] {
            let a = rand(mm, n, d, 7);
            let t = super::super::reorg::transpose(&a).unwrap();
            let want = naive(&t, &a);
            for x in both(&a) {
                let got = tsmm(&x).unwrap();
                got.validate().unwrap();
                assert!(close(&got, &want, 1e-12));
                let g = got.to_dense().unwrap();
                for i in 0..n {
                    for j in 0..n {
                        assert_eq!(g.values[i * n + j].to_bits(), g.values[j * n + i].to_bits());
                    }
                }
            }
        }
        assert_eq!(tsmm(&Matrix::zeros(0, 3).unwrap()).unwrap().shape(), (3, 3));
    }
}
