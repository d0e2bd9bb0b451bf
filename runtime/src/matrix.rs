//! Matrix data: dense row-major `f64` and CSR sparse, with an exact non-zero count.
//!
//! Invariants (checked by [`Matrix::validate`] in tests):
//! * `Dense`: `values.len() == rows * cols`, row-major; `nnz` equals the number of cells `!= 0.0`
//!   (NaN counts as non-zero).
//! * `Sparse` (CSR): `row_ptr.len() == rows + 1`, `row_ptr[0] == 0`, non-decreasing,
//!   `row_ptr[rows] == col_idx.len() == values.len()`; column indices strictly increasing within a
//!   row and `< cols`; no explicit zeros are stored, so `nnz == values.len()`.
//! * Empty matrices (0 rows or 0 columns) are legal in both formats.
//!
//! The arrays are [`Buffer`]s: owned, or borrowed from an embedder (zero-copy inputs). Kernels
//! read them as slices and always produce owned results; a clone is always owned. A borrowed
//! matrix keeps the format its embedder gave it (choosing another would be a copy), so a
//! dense input may be one [`prefers_sparse`] would store sparse; every kernel accepts either
//! format.
//!
//! Signed zeros: every element-wise kernel writes `-0.0` as `0.0`
//! (`kernels::elementwise::matrix_cell`), as its sparse result cannot store the sign, so
//! element-wise results do not depend on the format; fused operators follow the same rule at
//! each matrix-valued node. Scalars keep IEEE's `-0.0`, as in SystemDS. (SystemDS keeps the
//! sign in dense blocks only, so `1 / (X * Z)` at a zero of `Z` can be `Infinity` there where
//! lafuse gives `-Infinity`; `tests/corpus/README.md` lists this difference.)

use crate::buffer::Buffer;
use serde::{Deserialize, Serialize};

pub use lafuse_core::SPARSITY_TURN_POINT;

/// A dense row-major matrix. `values` may borrow an embedder's memory ([`Buffer`]): read it
/// as a slice, write it through [`Buffer::to_mut`] (which copies a borrowed buffer first).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DenseMatrix {
    pub rows: usize,
    pub cols: usize,
    pub values: Buffer<f64>,
    pub nnz: usize,
}

/// A CSR matrix. Its arrays may borrow an embedder's memory ([`Buffer`]), as
/// [`DenseMatrix::values`] may.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SparseMatrix {
    pub rows: usize,
    pub cols: usize,
    pub row_ptr: Buffer<usize>,
    pub col_idx: Buffer<u32>,
    pub values: Buffer<f64>,
}

/// A matrix in either format. `Clone` copies every buffer, borrowed ones included, so a clone
/// never reads an embedder's memory ([`Buffer`]'s soundness rule).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Matrix {
    Dense(DenseMatrix),
    Sparse(SparseMatrix),
}

/// Whether a matrix of this shape and non-zero count should be stored sparse.
/// ([`lafuse_core::prefers_sparse`]: below [`SPARSITY_TURN_POINT`] where CSR is the smaller).
pub fn prefers_sparse(rows: usize, cols: usize, nnz: usize) -> bool {
    lafuse_core::prefers_sparse(rows as u64, cols as u64, nnz as u64)
}

use crate::error::{CsrDefect, Internal, Resource, Result, RuntimeError};
use rayon::prelude::*;

/// Cell count above which kernels split their work over rayon threads.
pub const PAR_THRESHOLD: usize = 1 << 16;

/// Cells per parallel block. Fixed, so that block boundaries (and therefore the order in which
/// partial results are merged) do not depend on the number of threads.
pub const BLOCK_CELLS: usize = 1 << 15;

/// Allocations at least this large ask the kernel for transparent huge pages.
const HUGE_PAGE_MIN_BYTES: usize = 8 << 20;

/// A zero-filled buffer of `n` values for a kernel's output, or a resource error naming the
/// size where the allocator cannot give that much memory (sizes come from scripts: a
/// `matrix(1, rows=1e5, cols=1e6)` must be an error at its line, not an aborted process).
///
/// Large buffers come straight from `mmap` (through `calloc`), so their cost is the page faults
/// on first touch; asking for transparent huge pages (`MADV_HUGEPAGE`, effective where THP is in
/// `madvise` or `always` mode) takes one fault per 2 MiB instead of per 4 KiB, which roughly
/// halves the time to fill a fresh output. The advice is best-effort: failure changes nothing.
pub fn try_alloc_zeroed(n: usize) -> Result<Vec<f64>> {
    if n == 0 {
        return Ok(Vec::new());
    }
    let layout = std::alloc::Layout::array::<f64>(n).map_err(|_| too_large(n))?;
    within_budget(layout.size(), || too_large(n))?;
    // SAFETY: `layout` has a non-zero size; a non-null result is a zeroed block of `n`
    // doubles from the global allocator, which the `Vec` then owns with that same layout.
    let v = unsafe {
        let p = std::alloc::alloc_zeroed(layout) as *mut f64;
        if p.is_null() {
            return Err(too_large(n));
        }
        Vec::from_raw_parts(p, n, n)
    };
    advise_huge_pages(&v);
    Ok(v)
}

/// An empty buffer with room for exactly `n` values, for an output its producer writes in
/// full (so zeroing it first would be wasted), or [`try_alloc_zeroed`]'s resource error.
pub fn try_with_capacity(n: usize) -> Result<Vec<f64>> {
    within_budget(n.saturating_mul(8), || too_large(n))?;
    let mut v = Vec::new();
    v.try_reserve_exact(n).map_err(|_| too_large(n))?;
    advise_huge_pages(&v);
    Ok(v)
}

/// An empty vector with room for `n` elements, checked against the memory budget
/// ([`crate::memory`]) and allocated fallibly: the allocation of any buffer whose size a
/// script or a file decides. The error is a resource error naming the bytes; callers that
/// know what the buffer is for replace it with their own.
pub fn try_vec_with_capacity<T>(n: usize) -> Result<Vec<T>> {
    let bytes = n.saturating_mul(std::mem::size_of::<T>());
    let refused = || RuntimeError::Resource(Resource::Bytes { bytes });
    within_budget(bytes, refused)?;
    let mut v = Vec::new();
    v.try_reserve_exact(n).map_err(|_| refused())?;
    Ok(v)
}

/// Makes room for `additional` more values in `v`, fallibly and within the memory budget:
/// the growth of a buffer whose final size is known only once a file is read. Grows
/// geometrically as `Vec` does, or to the exact size where doubling would not fit.
pub fn try_grow(v: &mut Vec<f64>, additional: usize) -> Result<()> {
    let needed = v.len().saturating_add(additional);
    if needed <= v.capacity() {
        return Ok(());
    }
    let doubled = needed.max(v.capacity().saturating_mul(2));
    for target in [doubled, needed] {
        let new_bytes = (target - v.capacity()).saturating_mul(8);
        if within_budget(new_bytes, || too_large(target)).is_ok()
            && v.try_reserve_exact(target - v.len()).is_ok()
        {
            return Ok(());
        }
    }
    within_budget((needed - v.capacity()).saturating_mul(8), || {
        too_large(needed)
    })?;
    Err(too_large(needed))
}

/// `n` copies of `value` in a fallibly allocated vector ([`try_vec_with_capacity`]).
pub fn try_vec_filled<T: Clone>(n: usize, value: T) -> Result<Vec<T>> {
    let mut v = try_vec_with_capacity(n)?;
    v.resize(n, value);
    Ok(v)
}

/// A fallibly allocated copy of `src` ([`try_vec_with_capacity`]).
pub fn try_copy<T: Copy>(src: &[T]) -> Result<Vec<T>> {
    let mut v = try_vec_with_capacity(src.len())?;
    v.extend_from_slice(src);
    Ok(v)
}

/// Refuses an allocation of `bytes` that the memory budget cannot give now (the process may
/// be in a cgroup whose limit overcommitted memory would exceed, see [`crate::memory`]),
/// with the caller's error and the budget's figures.
fn within_budget(bytes: usize, refused: impl FnOnce() -> RuntimeError) -> Result<()> {
    crate::memory::check(bytes).map_err(|budget| match refused() {
        RuntimeError::Resource(refused) => RuntimeError::Resource(Resource::OverBudget {
            refused: Box::new(refused),
            budget,
        }),
        other => other,
    })
}

/// The resource error of an output of `n` cells the allocator cannot give.
fn too_large(n: usize) -> RuntimeError {
    RuntimeError::Resource(Resource::Allocation { cells: n })
}

/// Asks for transparent huge pages under the whole 2 MiB pages of `v`'s allocation (its
/// capacity, not only its length), when it is at least 8 MiB large. Effective
/// only for pages not yet touched: call it between reserving and filling a buffer. Besides the
/// cheaper first touch, huge pages spare the TLB misses of random row reads (an Outer operator
/// reads a row of `V` per non-zero of its driver). Best-effort: failure changes nothing.
pub fn advise_huge_pages(v: &Vec<f64>) {
    #[cfg(target_os = "linux")]
    if v.capacity() * 8 >= HUGE_PAGE_MIN_BYTES {
        const HUGE: usize = 1 << 21;
        let start = v.as_ptr() as usize;
        let lo = (start + HUGE - 1) & !(HUGE - 1);
        let hi = (start + v.capacity() * 8) & !(HUGE - 1);
        if hi > lo {
            // SAFETY: [lo, hi) lies inside the allocation of `v` and is page aligned; the advice
            // only changes how the kernel backs those pages, not their contents.
            unsafe {
                libc::madvise(lo as *mut libc::c_void, hi - lo, libc::MADV_HUGEPAGE);
            }
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = v;
}

/// Number of non-zero cells (NaN counts as non-zero) in a slice; vectorises.
pub fn count_nnz(values: &[f64]) -> usize {
    if values.len() >= PAR_THRESHOLD {
        values
            .par_chunks(BLOCK_CELLS)
            .map(count_nnz_seq)
            .sum::<usize>()
    } else {
        count_nnz_seq(values)
    }
}

/// [`count_nnz`] on one thread.
pub(crate) fn count_nnz_seq(values: &[f64]) -> usize {
    crate::simd::widest(
        #[inline(always)]
        || values.iter().map(|&v| (v != 0.0) as usize).sum(),
    )
}

impl DenseMatrix {
    /// A copy, allocated fallibly (the copy-on-write of a script's matrix).
    pub fn try_clone(&self) -> Result<Self> {
        let mut values = try_with_capacity(self.values.len())?;
        values.extend_from_slice(&self.values);
        Ok(DenseMatrix {
            rows: self.rows,
            cols: self.cols,
            values: values.into(),
            nnz: self.nnz,
        })
    }

    /// Wraps row-major values, counting the non-zeros.
    ///
    /// Fails with a user error when `values.len() != rows * cols`.
    pub fn new(rows: usize, cols: usize, values: Vec<f64>) -> Result<Self> {
        let cells = checked_cells(rows, cols)?;
        if values.len() != cells {
            return Err(RuntimeError::ValuesDoNotFill {
                function: None,
                values: values.len(),
                shape: (rows, cols),
            });
        }
        let nnz = count_nnz(&values);
        Ok(DenseMatrix {
            rows,
            cols,
            values: values.into(),
            nnz,
        })
    }

    /// A dense matrix with every cell set to `v`, or a resource error where it does not fit.
    pub fn filled(rows: usize, cols: usize, v: f64) -> Result<Self> {
        let cells = checked_cells(rows, cols)?;
        let nnz = if v != 0.0 { cells } else { 0 };
        let values = if v == 0.0 {
            try_alloc_zeroed(cells)?
        } else {
            let mut values = try_with_capacity(cells)?;
            values.resize(cells, v);
            values
        };
        Ok(DenseMatrix {
            rows,
            cols,
            values: values.into(),
            nnz,
        })
    }

    /// Row `i` as a slice.
    #[inline]
    pub fn row(&self, i: usize) -> &[f64] {
        &self.values[i * self.cols..(i + 1) * self.cols]
    }

    /// Recounts `nnz` from the values (after writing into `values` directly).
    pub fn recount_nnz(&mut self) {
        self.nnz = count_nnz(&self.values);
    }

    /// Whether the memory budget has room for this matrix's CSR form beside it (its row
    /// blocks and their concatenation: twice the CSR's size at the peak). A conversion that
    /// only changes the format is skipped where it does not, rather than risk the process.
    pub fn sparse_form_fits(&self) -> bool {
        let csr_bytes = self
            .nnz
            .saturating_mul(12)
            .saturating_add(self.rows.saturating_add(1).saturating_mul(8));
        crate::memory::check(csr_bytes.saturating_mul(2)).is_ok()
    }

    /// Converts to CSR, dropping zeros.
    pub fn to_sparse(&self) -> SparseMatrix {
        let (rows, cols) = (self.rows, self.cols);
        if cols == 0 {
            return SparseMatrix::empty(rows, cols);
        }
        // Rows are converted in parallel blocks and concatenated in order.
        let rows_per_block = (BLOCK_CELLS / cols).max(1);
        let convert = |r0: usize, r1: usize| {
            let mut ptr = Vec::with_capacity(r1 - r0);
            let mut idx = Vec::new();
            let mut val = Vec::new();
            for i in r0..r1 {
                for (j, &v) in self.row(i).iter().enumerate() {
                    if v != 0.0 {
                        idx.push(j as u32);
                        val.push(v);
                    }
                }
                ptr.push(idx.len());
            }
            (ptr, idx, val)
        };
        let parts: Vec<_> = if rows * cols >= PAR_THRESHOLD {
            (0..rows.div_ceil(rows_per_block))
                .into_par_iter()
                .map(|b| convert(b * rows_per_block, ((b + 1) * rows_per_block).min(rows)))
                .collect()
        } else {
            vec![convert(0, rows)]
        };
        SparseMatrix::concat_row_blocks(rows, cols, parts)
    }
}

impl SparseMatrix {
    /// A copy, allocated fallibly (the copy-on-write of a script's matrix).
    pub fn try_clone(&self) -> Result<Self> {
        Ok(SparseMatrix {
            rows: self.rows,
            cols: self.cols,
            row_ptr: try_copy(&self.row_ptr)?.into(),
            col_idx: try_copy(&self.col_idx)?.into(),
            values: try_copy(&self.values)?.into(),
        })
    }

    /// [`SparseMatrix::empty`] of a size a script or a file decides: dimensions above
    /// [`MAX_DIM`] are the user's error, and a row index the allocator cannot give is a
    /// resource error, not an abort.
    pub fn try_empty(rows: usize, cols: usize) -> Result<Self> {
        checked_cells(rows, cols)?;
        let row_ptr = try_vec_filled(rows + 1, 0usize).map_err(|e| match e {
            // The budget's figures say more than the bare shape.
            e @ RuntimeError::Resource(Resource::OverBudget { .. }) => e,
            _ => RuntimeError::Resource(Resource::RowPointers {
                shape: (rows, cols),
            }),
        })?;
        Ok(SparseMatrix {
            rows,
            cols,
            row_ptr: row_ptr.into(),
            col_idx: Buffer::default(),
            values: Buffer::default(),
        })
    }

    /// An all-zero CSR matrix (of a size already allocated elsewhere; see
    /// [`SparseMatrix::try_empty`]).
    pub fn empty(rows: usize, cols: usize) -> Self {
        SparseMatrix {
            rows,
            cols,
            row_ptr: vec![0; rows + 1].into(),
            col_idx: Buffer::default(),
            values: Buffer::default(),
        }
    }

    /// Column indices and values of row `i`. Reads the three buffers: a loop that looks up
    /// rows per non-zero takes [`SparseMatrix::slices`] once instead.
    #[inline]
    pub fn row(&self, i: usize) -> (&[u32], &[f64]) {
        self.slices().row(i)
    }

    /// The three arrays as slices, taken once for a loop that reads rows in its inner loop.
    #[inline]
    pub fn slices(&self) -> CsrSlices<'_> {
        CsrSlices {
            row_ptr: &self.row_ptr,
            col_idx: &self.col_idx,
            values: &self.values,
        }
    }

    /// Number of stored (non-zero) cells.
    #[inline]
    pub fn nnz(&self) -> usize {
        self.values.len()
    }

    /// The first broken CSR invariant of the module docs other than stored zeros, if any:
    /// what arrays from outside lafuse are checked against before anything reads a row.
    pub fn check_structure(&self) -> std::result::Result<(), CsrDefect> {
        validate_csr_structure(self)
    }

    /// Builds one CSR matrix from consecutive row blocks, each given as (row ends relative to the
    /// block start, column indices, values).
    pub(crate) fn concat_row_blocks(
        rows: usize,
        cols: usize,
        parts: Vec<(Vec<usize>, Vec<u32>, Vec<f64>)>,
    ) -> SparseMatrix {
        if parts.len() == 1 {
            let (ptr, idx, val) = parts.into_iter().next().unwrap_or_default();
            let mut row_ptr = Vec::with_capacity(rows + 1);
            row_ptr.push(0);
            row_ptr.extend(ptr);
            return SparseMatrix {
                rows,
                cols,
                row_ptr: row_ptr.into(),
                col_idx: idx.into(),
                values: val.into(),
            };
        }
        let total: usize = parts.iter().map(|p| p.1.len()).sum();
        let mut row_ptr = Vec::with_capacity(rows + 1);
        let mut col_idx = Vec::with_capacity(total);
        let mut values = Vec::with_capacity(total);
        row_ptr.push(0);
        for (ptr, idx, val) in parts {
            let base = col_idx.len();
            row_ptr.extend(ptr.into_iter().map(|p| p + base));
            col_idx.extend_from_slice(&idx);
            values.extend_from_slice(&val);
        }
        SparseMatrix {
            rows,
            cols,
            row_ptr: row_ptr.into(),
            col_idx: col_idx.into(),
            values: values.into(),
        }
    }

    /// Converts to dense row-major, or a resource error where the dense form does not fit.
    pub fn to_dense(&self) -> Result<DenseMatrix> {
        let (rows, cols) = (self.rows, self.cols);
        let mut values = try_alloc_zeroed(checked_cells(rows, cols)?)?;
        if cols > 0 {
            let fill = |i: usize, out: &mut [f64]| {
                let (idx, val) = self.row(i);
                for (&j, &v) in idx.iter().zip(val) {
                    out[j as usize] = v;
                }
            };
            if rows * cols >= PAR_THRESHOLD {
                values
                    .par_chunks_mut(cols)
                    .enumerate()
                    .for_each(|(i, out)| fill(i, out));
            } else {
                values
                    .chunks_mut(cols)
                    .enumerate()
                    .for_each(|(i, out)| fill(i, out));
            }
        }
        Ok(DenseMatrix {
            rows,
            cols,
            values: values.into(),
            nnz: self.values.len(),
        })
    }

    /// Drops stored zeros (explicit zeros may arise while building a result, or come with
    /// an embedder's arrays). Compacts in place when the arrays are owned; borrowed ones are
    /// copied first (`Buffer::to_mut`), the embedder's memory is never written.
    pub fn drop_zeros(mut self) -> SparseMatrix {
        if !self.values.contains(&0.0) {
            return self;
        }
        let rows = self.rows;
        let (row_ptr, col_idx, values) = (
            self.row_ptr.to_mut(),
            self.col_idx.to_mut(),
            self.values.to_mut(),
        );
        let mut w = 0;
        let mut start = 0;
        for i in 0..rows {
            let end = row_ptr[i + 1];
            for k in start..end {
                if values[k] != 0.0 {
                    values[w] = values[k];
                    col_idx[w] = col_idx[k];
                    w += 1;
                }
            }
            start = end;
            row_ptr[i + 1] = w;
        }
        values.truncate(w);
        col_idx.truncate(w);
        self
    }
}

/// The arrays of a [`SparseMatrix`] as plain slices ([`SparseMatrix::slices`]): looking up a
/// row here is slice indexing only, without the owned-or-borrowed branch of each [`Buffer`].
#[derive(Clone, Copy, Debug)]
pub struct CsrSlices<'a> {
    pub row_ptr: &'a [usize],
    pub col_idx: &'a [u32],
    pub values: &'a [f64],
}

impl<'a> CsrSlices<'a> {
    /// Column indices and values of row `i`.
    #[inline]
    pub fn row(&self, i: usize) -> (&'a [u32], &'a [f64]) {
        let (s, e) = (self.row_ptr[i], self.row_ptr[i + 1]);
        (&self.col_idx[s..e], &self.values[s..e])
    }
}

/// The most rows, or columns, a matrix may have: SystemDS's (it stores them as Java ints), so
/// that a script's sizes mean the same in both systems, and a file header claiming 1e12 rows is
/// an error before any row pointer is allocated.
pub const MAX_DIM: usize = i32::MAX as usize;

/// `rows * cols`, or an error for dimensions above [`MAX_DIM`] or a product that overflows.
pub(crate) fn checked_cells(rows: usize, cols: usize) -> Result<usize> {
    if rows > MAX_DIM || cols > MAX_DIM {
        return Err(RuntimeError::DimensionsBeyondLimit {
            function: None,
            shape: (rows, cols),
        });
    }
    rows.checked_mul(cols)
        .ok_or(RuntimeError::Resource(Resource::CellCount {
            shape: (rows, cols),
        }))
}

impl Matrix {
    /// A copy, allocated fallibly: `Y = X; Y[1, 1] = 5` copies `X`'s cells, which must be a
    /// resource error where memory does not allow it, not an abort.
    pub fn try_clone(&self) -> Result<Self> {
        Ok(match self {
            Matrix::Dense(d) => Matrix::Dense(d.try_clone()?),
            Matrix::Sparse(s) => Matrix::Sparse(s.try_clone()?),
        })
    }

    /// Whether any of the matrix's buffers borrows memory lafuse does not own.
    pub fn is_borrowed(&self) -> bool {
        match self {
            Matrix::Dense(d) => d.values.is_borrowed(),
            Matrix::Sparse(s) => {
                s.row_ptr.is_borrowed() || s.col_idx.is_borrowed() || s.values.is_borrowed()
            }
        }
    }

    /// This matrix with every borrowed buffer copied into one of its own (owned buffers are
    /// moved, not copied): a matrix that may outlive the borrow it was built from.
    pub fn into_owned(self) -> Matrix {
        match self {
            Matrix::Dense(d) => Matrix::Dense(DenseMatrix {
                values: d.values.into_owned(),
                ..d
            }),
            Matrix::Sparse(s) => Matrix::Sparse(SparseMatrix {
                row_ptr: s.row_ptr.into_owned(),
                col_idx: s.col_idx.into_owned(),
                values: s.values.into_owned(),
                ..s
            }),
        }
    }

    /// An all-zero matrix (sparse unless it has a single column), or a resource error where
    /// a dense one does not fit.
    pub fn zeros(rows: usize, cols: usize) -> Result<Matrix> {
        Ok(if prefers_sparse(rows, cols, 0) {
            Matrix::Sparse(SparseMatrix::try_empty(rows, cols)?)
        } else {
            Matrix::Dense(DenseMatrix::filled(rows, cols, 0.0)?)
        })
    }

    /// A matrix with every cell set to `v` (sparse when `v == 0` and there are several
    /// columns), or a resource error where it does not fit.
    pub fn filled(rows: usize, cols: usize, v: f64) -> Result<Matrix> {
        if v == 0.0 {
            Matrix::zeros(rows, cols)
        } else {
            Ok(Matrix::Dense(DenseMatrix::filled(rows, cols, v)?))
        }
    }

    /// A 1x1 matrix holding `v`.
    pub fn scalar(v: f64) -> Matrix {
        Matrix::Dense(DenseMatrix {
            rows: 1,
            cols: 1,
            values: vec![v].into(),
            nnz: (v != 0.0) as usize,
        })
    }

    /// Builds a matrix from row-major values, choosing the format by sparsity.
    pub fn from_dense_values(rows: usize, cols: usize, values: Vec<f64>) -> Result<Matrix> {
        Matrix::Dense(DenseMatrix::new(rows, cols, values)?).examine_and_convert()
    }

    /// Builds a matrix from CSR parts. The structure is validated (a user error names the broken
    /// invariant); stored zeros are dropped. The format is then chosen by sparsity.
    pub fn from_csr(
        rows: usize,
        cols: usize,
        row_ptr: Vec<usize>,
        col_idx: Vec<u32>,
        values: Vec<f64>,
    ) -> Result<Matrix> {
        checked_cells(rows, cols)?;
        let s = SparseMatrix {
            rows,
            cols,
            row_ptr: row_ptr.into(),
            col_idx: col_idx.into(),
            values: values.into(),
        };
        validate_csr_structure(&s).map_err(|defect| RuntimeError::InvalidCsr {
            shape: (s.rows, s.cols),
            defect,
        })?;
        Matrix::Sparse(s.drop_zeros()).examine_and_convert()
    }

    /// Builds a matrix from `(row, col, value)` triples (0-based). Later triples for the same cell
    /// overwrite earlier ones; zeros are not stored. Indices out of range are a user error.
    pub fn from_triples(
        rows: usize,
        cols: usize,
        mut triples: Vec<(usize, usize, f64)>,
    ) -> Result<Matrix> {
        checked_cells(rows, cols)?;
        if let Some(&(i, j, _)) = triples.iter().find(|&&(i, j, _)| i >= rows || j >= cols) {
            return Err(RuntimeError::CellOutside {
                cell: (i + 1, j + 1),
                shape: (rows, cols),
            });
        }
        // A stable sort keeps duplicates in input order, so the last one wins below.
        triples.sort_by_key(|&(i, j, _)| (i, j));
        // Sizes come from files: a few bytes may declare billions of rows.
        let mut row_ptr = try_vec_filled(rows + 1, 0usize)?;
        let mut col_idx = try_vec_with_capacity(triples.len())?;
        let mut values: Vec<f64> = try_vec_with_capacity(triples.len())?;
        let mut last: Option<(usize, usize)> = None;
        for &(i, j, v) in &triples {
            if last == Some((i, j)) {
                *values.last_mut().expect("a previous triple exists") = v;
                continue;
            }
            last = Some((i, j));
            row_ptr[i + 1] += 1;
            col_idx.push(j as u32);
            values.push(v);
        }
        for i in 0..rows {
            row_ptr[i + 1] += row_ptr[i];
        }
        let s = SparseMatrix {
            rows,
            cols,
            row_ptr: row_ptr.into(),
            col_idx: col_idx.into(),
            values: values.into(),
        };
        Matrix::Sparse(s.drop_zeros()).examine_and_convert()
    }

    /// Number of rows.
    #[inline]
    pub fn rows(&self) -> usize {
        match self {
            Matrix::Dense(d) => d.rows,
            Matrix::Sparse(s) => s.rows,
        }
    }

    /// Number of columns.
    #[inline]
    pub fn cols(&self) -> usize {
        match self {
            Matrix::Dense(d) => d.cols,
            Matrix::Sparse(s) => s.cols,
        }
    }

    /// `(rows, cols)`.
    #[inline]
    pub fn shape(&self) -> (usize, usize) {
        (self.rows(), self.cols())
    }

    /// Number of cells, `rows * cols`.
    #[inline]
    pub fn cells(&self) -> usize {
        self.rows() * self.cols()
    }

    /// Exact number of non-zero cells.
    #[inline]
    pub fn nnz(&self) -> usize {
        match self {
            Matrix::Dense(d) => d.nnz,
            Matrix::Sparse(s) => s.values.len(),
        }
    }

    /// Whether the matrix is stored in CSR.
    #[inline]
    pub fn is_sparse(&self) -> bool {
        matches!(self, Matrix::Sparse(_))
    }

    /// `nnz / cells` (0 for an empty matrix).
    pub fn sparsity(&self) -> f64 {
        let cells = self.rows() as f64 * self.cols() as f64;
        if cells == 0.0 {
            0.0
        } else {
            self.nnz() as f64 / cells
        }
    }

    /// Cell `(i, j)` (0-based); panics when out of range, like slice indexing. Sparse lookup is a
    /// binary search within the row.
    pub fn get(&self, i: usize, j: usize) -> f64 {
        assert!(
            i < self.rows() && j < self.cols(),
            "cell ({i}, {j}) out of range"
        );
        match self {
            Matrix::Dense(d) => d.values[i * d.cols + j],
            Matrix::Sparse(s) => {
                let (idx, val) = s.row(i);
                match idx.binary_search(&(j as u32)) {
                    Ok(k) => val[k],
                    Err(_) => 0.0,
                }
            }
        }
    }

    /// A dense copy (a clone when already dense), or a resource error where it does not fit.
    pub fn to_dense(&self) -> Result<DenseMatrix> {
        match self {
            Matrix::Dense(d) => d.try_clone(),
            Matrix::Sparse(s) => s.to_dense(),
        }
    }

    /// A CSR copy (a clone when already sparse).
    pub fn to_sparse(&self) -> SparseMatrix {
        match self {
            Matrix::Dense(d) => d.to_sparse(),
            Matrix::Sparse(s) => s.clone(),
        }
    }

    /// [`Matrix::to_sparse`] for a kernel whose input a script sized: a resource error where
    /// the memory budget has no room for the copy.
    pub fn try_to_sparse(&self) -> Result<SparseMatrix> {
        match self {
            Matrix::Dense(d) if d.sparse_form_fits() => Ok(d.to_sparse()),
            Matrix::Dense(d) => Err(RuntimeError::Resource(Resource::Bytes {
                bytes: d
                    .nnz
                    .saturating_mul(12)
                    .saturating_add(d.rows.saturating_mul(8)),
            })),
            Matrix::Sparse(s) => s.try_clone(),
        }
    }

    /// The dense form, converting only when needed (which may fail as [`Matrix::to_dense`]).
    pub fn into_dense(self) -> Result<DenseMatrix> {
        match self {
            Matrix::Dense(d) => Ok(d),
            Matrix::Sparse(s) => s.to_dense(),
        }
    }

    /// The CSR form, converting only when needed.
    pub fn into_sparse(self) -> SparseMatrix {
        match self {
            Matrix::Dense(d) => d.to_sparse(),
            Matrix::Sparse(s) => s,
        }
    }

    /// The dense form as a borrowed view when already dense, else a converted copy.
    pub fn dense_cow(&self) -> Result<std::borrow::Cow<'_, DenseMatrix>> {
        Ok(match self {
            Matrix::Dense(d) => std::borrow::Cow::Borrowed(d),
            Matrix::Sparse(s) => std::borrow::Cow::Owned(s.to_dense()?),
        })
    }

    /// Row-major values of all cells (which may fail as [`Matrix::to_dense`]).
    pub fn into_dense_values(self) -> Result<Vec<f64>> {
        Ok(self.into_dense()?.values.into_vec())
    }

    /// Chooses the storage format by the actual sparsity (`prefers_sparse`), converting if needed.
    /// `nnz` must already be exact. Converting to dense may fail as [`Matrix::to_dense`].
    pub fn examine_and_convert(self) -> Result<Matrix> {
        let (rows, cols, nnz) = (self.rows(), self.cols(), self.nnz());
        let sparse = prefers_sparse(rows, cols, nnz);
        Ok(match self {
            // A dense matrix is a valid form of any matrix: where memory has no room for the
            // sparse copy, the result stays dense.
            Matrix::Dense(d) if sparse && d.sparse_form_fits() => Matrix::Sparse(d.to_sparse()),
            Matrix::Sparse(s) if !sparse => Matrix::Dense(s.to_dense()?),
            m => m,
        })
    }

    /// The single value of a 1x1 matrix; a user error naming the shape otherwise.
    pub fn as_scalar(&self) -> Result<f64> {
        if self.rows() != 1 || self.cols() != 1 {
            return Err(RuntimeError::NotOneByOne {
                shape: self.shape(),
            });
        }
        Ok(self.get(0, 0))
    }

    /// The range of the cell values (implicit zeros included) and whether any is NaN.
    pub fn value_range(&self) -> ValueRange {
        let (vals, zeros) = match self {
            Matrix::Dense(d) => (&d.values[..], false),
            Matrix::Sparse(s) => (&s.values[..], s.values.len() < s.rows * s.cols),
        };
        let r = value_range(vals);
        if zeros {
            r.with(0.0)
        } else {
            r
        }
    }

    /// Whether every cell is finite (no NaN, no ±Inf); implicit zeros are finite.
    pub fn all_finite(&self) -> bool {
        let vals = match self {
            Matrix::Dense(d) => &d.values,
            Matrix::Sparse(s) => &s.values,
        };
        all_finite(vals)
    }

    /// Checks every invariant listed in the module docs; an internal error names the broken one.
    pub fn validate(&self) -> Result<()> {
        match self {
            Matrix::Dense(d) => {
                if Some(d.values.len()) != d.rows.checked_mul(d.cols) {
                    return Err(RuntimeError::Internal(Internal::DenseLength {
                        shape: (d.rows, d.cols),
                        values: d.values.len(),
                    }));
                }
                let nnz = count_nnz(&d.values);
                if nnz != d.nnz {
                    return Err(RuntimeError::Internal(Internal::DenseNnz {
                        shape: (d.rows, d.cols),
                        recorded: d.nnz,
                        actual: nnz,
                    }));
                }
                Ok(())
            }
            Matrix::Sparse(s) => {
                validate_csr_structure(s).map_err(|defect| {
                    RuntimeError::Internal(Internal::InvalidCsr {
                        shape: (s.rows, s.cols),
                        defect,
                    })
                })?;
                if s.values.contains(&0.0) {
                    return Err(RuntimeError::Internal(Internal::ExplicitZero {
                        shape: (s.rows, s.cols),
                    }));
                }
                Ok(())
            }
        }
    }
}

/// The smallest and largest non-NaN values of a matrix and whether it holds a NaN: what a
/// fused operator needs to know of a side input to skip its main input's zeros exactly
/// (`lafuse_codegen::zero_cells`). An empty matrix has `min > max`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ValueRange {
    pub min: f64,
    pub max: f64,
    pub nan: bool,
}

impl ValueRange {
    /// No values.
    pub const EMPTY: ValueRange = ValueRange {
        min: f64::INFINITY,
        max: f64::NEG_INFINITY,
        nan: false,
    };

    /// This range with `v` in it.
    pub fn with(self, v: f64) -> ValueRange {
        if v.is_nan() {
            ValueRange { nan: true, ..self }
        } else {
            ValueRange {
                min: self.min.min(v),
                max: self.max.max(v),
                nan: self.nan,
            }
        }
    }

    /// The range of the values of both.
    pub fn union(self, o: ValueRange) -> ValueRange {
        ValueRange {
            min: self.min.min(o.min),
            max: self.max.max(o.max),
            nan: self.nan || o.nan,
        }
    }

    /// Every value finite (no NaN, no infinity).
    pub fn is_finite(&self) -> bool {
        !self.nan && self.min > f64::NEG_INFINITY && self.max < f64::INFINITY
    }
}

/// The [`ValueRange`] of `values`; vectorises (eight independent lanes) and parallelises.
pub fn value_range(values: &[f64]) -> ValueRange {
    // One loop serves both: the non-zero count it keeps besides is an integer add per value,
    // which a memory-bound scan does not notice.
    count_nnz_and_range(values).1
}

/// [`count_nnz`] and [`value_range`] in one pass over `values`: for a kernel that counts its
/// output's non-zeros anyway, the range comes at no extra pass (a memory-bound scan either
/// way), so a later consumer (a sparse-safe fused operator) need not scan again.
pub fn count_nnz_and_range(values: &[f64]) -> (usize, ValueRange) {
    let seq = |c: &[f64]| {
        crate::simd::widest(
            #[inline(always)]
            || nnz_and_range_lanes(c),
        )
    };
    if values.len() >= PAR_THRESHOLD {
        values.par_chunks(BLOCK_CELLS).map(seq).reduce(
            || (0, ValueRange::EMPTY),
            |a, b| (a.0 + b.0, a.1.union(b.1)),
        )
    } else {
        seq(values)
    }
}

/// One thread's part of [`count_nnz_and_range`]: eight lanes (a register each with AVX-512).
#[inline(always)]
fn nnz_and_range_lanes(c: &[f64]) -> (usize, ValueRange) {
    let (mut lo, mut hi) = ([f64::INFINITY; 8], [f64::NEG_INFINITY; 8]);
    // NaNs and non-zeros counted per lane in integers: an integer add vectorises, a
    // `bool |=` did not (the loop ran 2x slower).
    let (mut nans, mut nnz) = ([0u64; 8], [0u64; 8]);
    let mut chunks = c.chunks_exact(8);
    for ch in &mut chunks {
        for l in 0..8 {
            let v = ch[l];
            // NaN compares false both ways, so it moves neither bound.
            lo[l] = if v < lo[l] { v } else { lo[l] };
            hi[l] = if v > hi[l] { v } else { hi[l] };
            nans[l] += v.is_nan() as u64;
            nnz[l] += (v != 0.0) as u64;
        }
    }
    let mut r = ValueRange::EMPTY;
    for l in 0..8 {
        r = r.union(ValueRange {
            min: lo[l],
            max: hi[l],
            nan: nans[l] > 0,
        });
    }
    let rest = chunks.remainder();
    (
        nnz.iter().sum::<u64>() as usize + count_nnz_seq(rest),
        rest.iter().fold(r, |r, &v| r.with(v)),
    )
}

/// Whether every value is finite; vectorises and parallelises.
pub fn all_finite(values: &[f64]) -> bool {
    let seq = |c: &[f64]| {
        crate::simd::widest(
            #[inline(always)]
            || c.iter().fold(true, |ok, v| ok & v.is_finite()),
        )
    };
    if values.len() >= PAR_THRESHOLD {
        values.par_chunks(BLOCK_CELLS).all(seq)
    } else {
        seq(values)
    }
}

/// The first defect of the CSR arrays of `s`, if any: a user error where the arrays came from
/// outside ([`Matrix::from_csr`]), a bug where they are ours ([`Matrix::validate`]).
fn validate_csr_structure(s: &SparseMatrix) -> std::result::Result<(), CsrDefect> {
    if s.row_ptr.len() != s.rows + 1 {
        return Err(CsrDefect::RowPointerCount {
            entries: s.row_ptr.len(),
            expected: s.rows + 1,
        });
    }
    if s.row_ptr[0] != 0 {
        return Err(CsrDefect::RowPointerStart);
    }
    if s.col_idx.len() != s.values.len() || s.row_ptr[s.rows] != s.values.len() {
        return Err(CsrDefect::RowPointerEnd {
            end: s.row_ptr[s.rows],
            col_indices: s.col_idx.len(),
            values: s.values.len(),
        });
    }
    for i in 0..s.rows {
        let (a, b) = (s.row_ptr[i], s.row_ptr[i + 1]);
        if a > b {
            return Err(CsrDefect::RowPointerDecreases { row: i });
        }
        // Checked before slicing: a row_ptr that overshoots and comes back down must be an
        // error, not a panic.
        if b > s.col_idx.len() {
            return Err(CsrDefect::RowPointerBeyondEntries {
                index: i + 1,
                value: b,
                stored: s.col_idx.len(),
            });
        }
        let idx = &s.col_idx[a..b];
        if idx.windows(2).any(|w| w[0] >= w[1]) {
            return Err(CsrDefect::UnsortedColumns { row: i });
        }
        if let Some(&j) = idx.last() {
            if j as usize >= s.cols {
                return Err(CsrDefect::ColumnOutOfRange { column: j, row: i });
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fallible_allocation_is_zeroed_or_a_resource_error() {
        assert!(try_alloc_zeroed(0).unwrap().is_empty());
        let v = try_alloc_zeroed(3 << 20).unwrap();
        assert_eq!(v.len(), 3 << 20);
        assert!(v.iter().all(|&x| x == 0.0));
        // More than any address space: an error naming the size, not an abort.
        match try_alloc_zeroed(usize::MAX / 4) {
            Err(RuntimeError::Resource(why)) => {
                assert!(why.to_string().contains("cannot allocate"), "{why}")
            }
            other => panic!(
                "expected a resource error, got {:?}",
                other.map(|v| v.len())
            ),
        }
    }

    #[test]
    fn dense_sparse_roundtrip_keeps_values_and_nnz() {
        let vals = vec![
            0.0,
            1.0,
            0.0,
            f64::NAN,
            0.0,
            0.0,
            2.0,
            0.0,
            0.0,
            0.0,
            0.0,
            0.0,
        ];
        // Stored dense by its shape (three short rows are smaller dense), so made CSR here.
        let m = Matrix::from_dense_values(3, 4, vals.clone()).unwrap();
        assert!(!m.is_sparse());
        let m = Matrix::Sparse(m.to_sparse());
        assert_eq!(m.nnz(), 3);
        m.validate().unwrap();
        let d = m.to_dense().unwrap();
        assert_eq!(d.nnz, 3);
        assert!(d.values[3].is_nan());
        assert_eq!(d.values[6], 2.0);
        let s = d.to_sparse();
        assert_eq!(s.row_ptr, vec![0, 2, 3, 3]);
        assert_eq!(s.col_idx, vec![1, 3, 2]);
    }

    #[test]
    fn format_follows_turn_point() {
        assert!(!Matrix::from_dense_values(2, 2, vec![1.0, 2.0, 0.0, 3.0])
            .unwrap()
            .is_sparse());
        // A single column stays dense however sparse.
        assert!(!Matrix::from_dense_values(3, 1, vec![0.0, 0.0, 0.0])
            .unwrap()
            .is_sparse());
        assert!(Matrix::zeros(3, 3).unwrap().is_sparse());
        assert!(
            !Matrix::zeros(0, 3).unwrap().is_sparse() || Matrix::zeros(0, 3).unwrap().cells() == 0
        );
        Matrix::zeros(0, 3).unwrap().validate().unwrap();
        Matrix::zeros(3, 0).unwrap().validate().unwrap();
    }

    #[test]
    fn from_csr_validates_and_drops_zeros() {
        assert!(Matrix::from_csr(2, 3, vec![0, 2, 1], vec![0, 1], vec![1.0, 2.0]).is_err());
        assert!(Matrix::from_csr(2, 3, vec![0, 2, 2], vec![1, 1], vec![1.0, 2.0]).is_err());
        assert!(Matrix::from_csr(2, 3, vec![0, 1, 2], vec![0, 3], vec![1.0, 2.0]).is_err());
        let m = Matrix::from_csr(2, 5, vec![0, 2, 3], vec![0, 4, 2], vec![0.0, 2.0, 3.0]).unwrap();
        m.validate().unwrap();
        assert_eq!(m.nnz(), 2);
        assert_eq!(m.get(0, 4), 2.0);
        assert_eq!(m.get(1, 2), 3.0);
    }

    #[test]
    fn from_triples_last_wins_and_bounds_checked() {
        let m = Matrix::from_triples(3, 3, vec![(2, 2, 1.0), (0, 1, 5.0), (2, 2, 7.0)]).unwrap();
        m.validate().unwrap();
        assert_eq!(m.get(2, 2), 7.0);
        assert_eq!(m.get(0, 1), 5.0);
        assert_eq!(m.nnz(), 2);
        let e = Matrix::from_triples(3, 3, vec![(3, 0, 1.0)]).unwrap_err();
        assert!(e.to_string().contains("(4, 1)"), "{e}");
    }

    #[test]
    fn validate_catches_broken_invariants() {
        let bad = Matrix::Dense(DenseMatrix {
            rows: 1,
            cols: 2,
            values: vec![1.0, 0.0].into(),
            nnz: 2,
        });
        assert!(bad.validate().is_err());
        let bad = Matrix::Sparse(SparseMatrix {
            rows: 1,
            cols: 2,
            row_ptr: vec![0, 1].into(),
            col_idx: vec![0].into(),
            values: vec![0.0].into(),
        });
        assert!(bad.validate().is_err());
    }

    #[test]
    fn borrowed_matrices_are_copied_only_when_cloned_or_made_owned() {
        let vals = vec![1.0, 0.0, 2.0, 3.0];
        let (ptr, idx) = (vec![0usize, 1, 2], vec![1u32, 0]);
        let sv = vec![5.0, 6.0];
        // SAFETY: every matrix below is dropped before the vectors it borrows.
        let (d, s) = unsafe {
            (
                Matrix::Dense(DenseMatrix {
                    rows: 2,
                    cols: 2,
                    values: Buffer::borrowed(&vals),
                    nnz: 3,
                }),
                Matrix::Sparse(SparseMatrix {
                    rows: 2,
                    cols: 2,
                    row_ptr: Buffer::borrowed(&ptr),
                    col_idx: Buffer::borrowed(&idx),
                    values: Buffer::borrowed(&sv),
                }),
            )
        };
        for m in [d, s] {
            m.validate().unwrap();
            assert!(m.is_borrowed());
            let c = m.clone();
            assert!(!c.is_borrowed());
            assert_eq!(c, m);
            let o = m.clone().into_owned();
            assert!(!o.is_borrowed());
            assert_eq!(o, m);
            // An owned matrix's buffers are moved, not copied.
            let p = match &o {
                Matrix::Dense(d) => d.values.as_ptr(),
                Matrix::Sparse(s) => s.values.as_ptr(),
            };
            match o.into_owned() {
                Matrix::Dense(d) => assert_eq!(d.values.as_ptr(), p),
                Matrix::Sparse(s) => assert_eq!(s.values.as_ptr(), p),
            }
        }
        assert_eq!(vals, [1.0, 0.0, 2.0, 3.0]);
    }

    #[test]
    fn scalar_extraction() {
        assert_eq!(Matrix::scalar(3.5).as_scalar().unwrap(), 3.5);
        assert!(Matrix::zeros(2, 1).unwrap().as_scalar().is_err());
    }

    #[test]
    fn large_conversion_is_parallel_and_exact() {
        let n = 700;
        let vals: Vec<f64> = (0..n * n)
            .map(|k| if k % 7 == 0 { k as f64 } else { 0.0 })
            .collect();
        let m = Matrix::from_dense_values(n, n, vals.clone()).unwrap();
        assert!(m.is_sparse());
        m.validate().unwrap();
        assert_eq!(m.clone().into_dense_values().unwrap(), vals);
    }
}
