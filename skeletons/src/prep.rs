//! Shared skeleton machinery: input validation and preparation, row partitioning, task
//! execution and partial-aggregate merging.

use crate::abi::{CsrView, DenseView, KernelArgs, KernelFn};
use crate::zeroed_buffers;
use crate::{err, AggKind, InputUse, Result, ShapeNeed, SkeletonError};
use lafuse_runtime::kernels::aggregate::Kahan;
use lafuse_runtime::matrix::{BLOCK_CELLS, PAR_THRESHOLD};
use lafuse_runtime::{Matrix, SparseMatrix};
use rayon::prelude::*;
use std::borrow::Cow;
use std::fmt;

/// An operand of a fused operator, as the skeletons see it.
#[derive(Clone, Copy, Debug)]
pub enum Input<'a> {
    /// A scalar.
    Scalar(f64),
    /// A matrix.
    Matrix(&'a Matrix),
    /// A matrix the caller knows holds only finite values, so a sparse-safe plan need not
    /// scan it for NaN or infinities before skipping the main input's zeros.
    FiniteMatrix(&'a Matrix),
}

impl<'a> Input<'a> {
    /// The matrix, if this is one.
    pub fn as_matrix(&self) -> Option<&'a Matrix> {
        match *self {
            Input::Matrix(m) | Input::FiniteMatrix(m) => Some(m),
            Input::Scalar(_) => None,
        }
    }

    /// Whether the input is known to hold only finite values.
    pub fn known_finite(&self) -> bool {
        matches!(self, Input::FiniteMatrix(_))
    }
}

/// The prepared side inputs: dense storage the views point into, kept alive for the call.
pub(crate) struct Prepared<'a> {
    /// Backing storage per input (borrowed dense values, a densified or transposed copy, or a
    /// scalar's one value; empty for a streamed input).
    store: Vec<Cow<'a, [f64]>>,
    pub(crate) shapes: Vec<(usize, usize)>,
    /// Per input: known to hold only finite values (no scan needed).
    known_finite: Vec<bool>,
    /// Per input: a sparse input read cell-aligned with the main input, never densified
    /// whole: each task densifies the block of rows it is working on into a buffer of its own
    /// ([`Prepared::for_blocks`]), so memory stays at a block per thread and nothing is looked
    /// up per cell.
    streamed: Vec<Option<&'a SparseMatrix>>,
}

impl<'a> Prepared<'a> {
    /// The views, one per input position (a streamed input's is empty until
    /// [`Prepared::for_blocks`] fills it).
    pub(crate) fn views(&self) -> Vec<DenseView> {
        self.store
            .iter()
            .zip(&self.shapes)
            .map(|(s, &(r, c))| DenseView::of(s, r, c))
            .collect()
    }

    /// Whether every prepared side value is finite (implicit zeros are).
    pub(crate) fn all_finite(&self, skip_main: bool) -> bool {
        self.store
            .iter()
            .zip(&self.streamed)
            .enumerate()
            .filter(|(k, _)| !(self.known_finite[*k] || skip_main && *k == 0))
            .all(|(_, (s, streamed))| match streamed {
                Some(sp) => lafuse_runtime::matrix::all_finite(&sp.values),
                None => lafuse_runtime::matrix::all_finite(s),
            })
    }

    /// The prepared dense values of input `k` (row-major; transposed where its use says so);
    /// empty for the main input, an unread or a streamed one.
    pub(crate) fn values(&self, k: usize) -> &[f64] {
        self.store.get(k).map_or(&[][..], |s| &s[..])
    }

    /// The most non-zeros a row of any streamed input holds on average (rounded up).
    fn streamed_nnz_per_row(&self) -> usize {
        self.streamed
            .iter()
            .flatten()
            .map(|s| s.nnz().div_ceil(s.rows.max(1)))
            .max()
            .unwrap_or(0)
    }

    /// Whether some input is streamed, so tasks must run block by block.
    pub(crate) fn has_streamed(&self) -> bool {
        self.streamed.iter().any(Option::is_some)
    }

    /// Checks that the buffers each of `tasks` tasks allocates can be had: the densified
    /// row blocks of [`Prepared::for_blocks`] (of the main input with `n` columns when
    /// `densify_main`, and of every streamed input) plus `scratch` values of its own. Tasks
    /// allocate them inside parallel closures, which cannot report an error; a row of a
    /// matrix with 1e12 columns must fail here, as a resource error, not abort the process.
    /// The probe reserves without touching (no page is faulted in) and frees at once; it runs
    /// only for buffers of [`PROBED_BYTES`] or more, so an ordinary call (a block is a few
    /// hundred KB) pays no allocation for it.
    pub(crate) fn check_task_buffers(
        &self,
        n: usize,
        densify_main: bool,
        scratch: usize,
        tasks: usize,
    ) -> crate::Result<()> {
        let step = block_rows(n);
        let streamed_cols: usize = self.streamed.iter().flatten().map(|s| s.cols).sum();
        let block_cols = if densify_main { n } else { 0 } + streamed_cols;
        let per_task = step
            .checked_mul(block_cols)
            .and_then(|c| c.checked_add(scratch));
        match per_task.and_then(|c| c.checked_mul(tasks.max(1))) {
            Some(cells) if cells.saturating_mul(8) < PROBED_BYTES => Ok(()),
            Some(cells) => output_unzeroed(cells).map(drop),
            None => Err(crate::SkeletonError::OutOfMemory(
                lafuse_runtime::RuntimeError::Resource(
                    lafuse_runtime::error::Resource::RowBuffers { cols: n },
                ),
            )),
        }
    }

    /// Runs `f(views, r, e)` over the rows `[rl, ru)` of one task, of a main input with `n`
    /// columns. Blocks of rows keep densified rows (of a sparse main input that `f` densifies,
    /// `densify_main`, or of streamed side inputs) cache-sized; otherwise the task is one
    /// block. When some input is streamed, each block's rows `[r, e)` of it are densified into
    /// this task's buffer first and `views` holds every input's view (the streamed ones with
    /// `row0 = r`); otherwise `views` is `None` (the shared views apply). Returns the sum of
    /// what `f` returned.
    pub(crate) fn for_blocks(
        &self,
        rl: usize,
        ru: usize,
        n: usize,
        densify_main: bool,
        f: &mut BlockFn<'_>,
    ) -> u64 {
        let streamed = self.has_streamed();
        let step = if densify_main {
            block_rows(n)
        } else if streamed {
            streamed_block_rows(n, self.streamed_nnz_per_row())
        } else {
            (ru - rl).max(1)
        };
        let mut views = if streamed { self.views() } else { Vec::new() };
        let mut bufs: Vec<Vec<f64>> = self
            .streamed
            .iter()
            .map(|s| {
                s.map_or_else(Vec::new, |s| {
                    zeroed_buffers::take(step.min(ru - rl) * s.cols)
                })
            })
            .collect();
        // Per streamed input: its buffer holds only zeros (as allocated, or cleared by
        // index after a sparse block), so the next block need only scatter its non-zeros.
        let mut clean = vec![true; bufs.len()];
        let mut total = 0;
        let mut r = rl;
        while r < ru {
            let e = (r + step).min(ru);
            for (k, s) in self.streamed.iter().enumerate() {
                if let Some(s) = s {
                    let buf = &mut bufs[k][..(e - r) * s.cols];
                    if clean[k] {
                        scatter_rows(s, r, e, buf, None);
                    } else {
                        densify_rows_into(s, r, e, buf);
                    }
                    views[k] = DenseView {
                        data: buf.as_ptr(),
                        len: buf.len(),
                        rows: s.rows,
                        cols: s.cols,
                        row0: r,
                    };
                }
            }
            total += f(streamed.then_some(&views[..]), r, e);
            for (k, s) in self.streamed.iter().enumerate() {
                if let Some(s) = s {
                    // Zeroing a whole block writes 8 bytes a cell; clearing by index a few
                    // per non-zero: the cheaper one where the block's non-zeros are few.
                    let nnz = s.row_ptr[e] - s.row_ptr[r];
                    clean[k] = nnz * SCATTER_CLEAR_RATIO < (e - r) * s.cols;
                    if clean[k] {
                        scatter_rows(s, r, e, &mut bufs[k][..(e - r) * s.cols], Some(0.0));
                    }
                }
            }
            r = e;
        }
        // A buffer cleared by index after its last block is all zero again: kept for the
        // next call on this thread.
        for (buf, clean) in bufs.into_iter().zip(clean) {
            if clean {
                zeroed_buffers::give_back(buf);
            }
        }
        total
    }
}

/// What [`Prepared::for_blocks`] runs per block: `(views, first row, end row)` to a count.
pub(crate) type BlockFn<'f> = dyn FnMut(Option<&[DenseView]>, usize, usize) -> u64 + 'f;

/// Task buffers from this size on are probed before the tasks run
/// ([`Prepared::check_task_buffers`]); smaller ones are allocated like any other buffer.
const PROBED_BYTES: usize = 256 << 20;

/// Rows per block when a task densifies rows (of a sparse main input or of streamed side
/// inputs) with `n` columns: a block stays cache-sized.
fn block_rows(n: usize) -> usize {
    (BLOCK_CELLS / n.max(1)).max(1)
}

/// Cells per block when only streamed side inputs are densified: their rows are scattered,
/// read at the main input's non-zeros and cleared again, all best within the L1 cache, so a
/// block is a row of 1000 columns (the all-CSR `sum(X*Y*Z)` at 1e5×1e3: 30 ms with blocks of
/// 32 rows, 24 ms with one; two rows measured as slow as 32).
const STREAMED_BLOCK_CELLS: usize = 1 << 10;

/// Non-zeros of a streamed input that a block scatters at least: where rows hold few, a block
/// of one row costs more to set up (a call of the generated code, the views) than its
/// non-zeros cost to scatter, read and clear. 128 of them touch at most 8 KiB of a block's
/// buffer (a cache line each), so every input's touched lines still stay in the L1 cache.
/// The all-CSR `sum(X*Y*Z)` at 1e4×1e3, sparsity 0.01 (ten non-zeros a row), spent half its
/// time in blocks of one row.
const STREAMED_BLOCK_NNZ: usize = 128;

/// Cells of a streamed input's block buffer at most: rows of very sparse inputs stop growing a
/// block there, which bounds what a task allocates (or a thread keeps, `zeroed_buffers`).
/// The rows of [`block_rows`], so [`Prepared::check_task_buffers`] bounds these buffers too.
const STREAMED_BLOCK_CELLS_MAX: usize = BLOCK_CELLS;

/// Rows per block when only streamed side inputs are densified: a row of
/// [`STREAMED_BLOCK_CELLS`], or more where the streamed inputs' rows hold few non-zeros
/// (`nnz_per_row`: the most of any streamed input, on average), until a block holds
/// [`STREAMED_BLOCK_NNZ`] of them or its buffer [`STREAMED_BLOCK_CELLS_MAX`] cells. Depends on
/// the inputs alone, never on the thread count.
fn streamed_block_rows(n: usize, nnz_per_row: usize) -> usize {
    let n = n.max(1);
    let by_cells = STREAMED_BLOCK_CELLS / n;
    let by_nnz = (STREAMED_BLOCK_NNZ / nnz_per_row.max(1)).min(STREAMED_BLOCK_CELLS_MAX / n);
    by_cells.max(by_nnz).max(1)
}

fn dense_values(m: &Matrix) -> Result<Cow<'_, [f64]>> {
    Ok(match m {
        Matrix::Dense(d) => Cow::Borrowed(&d.values[..]),
        Matrix::Sparse(s) => Cow::Owned(s.to_dense().map_err(out_of_memory)?.values.into_vec()),
    })
}

/// The transpose of `m` as dense row-major values.
pub(crate) fn transposed(m: &Matrix) -> Result<Vec<f64>> {
    lafuse_runtime::kernels::transpose(m)
        .and_then(Matrix::into_dense_values)
        .map_err(kernel_error)
}

/// How a skeleton's input-use enum tells [`prepare`] to check and lay out one input, so that
/// every template shares one preparation loop and owns only its own rules.
pub(crate) trait InputRole: Copy + fmt::Debug {
    /// Not prepared: the main input (read through [`KernelArgs::main`]/
    /// [`KernelArgs::main_csr`]) or an input the code never reads.
    fn is_skipped(self) -> bool;
    /// Read as a scalar (a scalar operand, or the first cell of a matrix).
    fn is_scalar(self) -> bool;
    /// The shape the use needs, where `(r, c)` is not it (`(m, n)`: the main input's).
    fn mismatch(self, r: usize, c: usize, m: usize, n: usize) -> Option<ShapeNeed>;
    /// Transposed once, so the generated code reads contiguous rows.
    fn is_transposed(self) -> bool;
    /// Read row by row with the main input: a sparse one is streamed block by block per task
    /// instead of densified whole.
    fn is_streamed(self) -> bool;
}

impl InputRole for InputUse {
    fn is_skipped(self) -> bool {
        matches!(self, InputUse::Main | InputUse::Unused)
    }

    fn is_scalar(self) -> bool {
        self == InputUse::Scalar
    }

    fn mismatch(self, r: usize, c: usize, m: usize, n: usize) -> Option<ShapeNeed> {
        let (bad, need) = match self {
            InputUse::Aligned => ((r, c) != (m, n), ShapeNeed::Exactly(m, n)),
            InputUse::ColVector => (r != m || c == 0, ShapeNeed::RowsByAny(m)),
            InputUse::RowVector => (c != n || r == 0, ShapeNeed::AnyByCols(n)),
            InputUse::RowVectorT => (c != m || r == 0, ShapeNeed::AnyByCols(m)),
            InputUse::ColVectorT => (r != n || c == 0, ShapeNeed::RowsByAny(n)),
            // Their width, the product's, is checked by the kernel's `accepts`.
            InputUse::B1Aligned => (r != m || c == 0, ShapeNeed::RowsByAny(m)),
            InputUse::B1RowVector => (r * c == 0, ShapeNeed::NonEmpty),
            InputUse::Scalar => (r * c == 0, ShapeNeed::NonEmpty),
            InputUse::OuterU => (r != m, ShapeNeed::Rows(m)),
            InputUse::OuterV | InputUse::FinalW => (r != n, ShapeNeed::Rows(n)),
            InputUse::OuterVT => (c != n, ShapeNeed::Cols(n)),
            InputUse::FinalWT => (c != m, ShapeNeed::Cols(m)),
            InputUse::Main | InputUse::Unused => (false, ShapeNeed::NonEmpty),
        };
        bad.then_some(need)
    }

    fn is_transposed(self) -> bool {
        matches!(self, InputUse::OuterVT | InputUse::FinalWT)
    }

    fn is_streamed(self) -> bool {
        self == InputUse::Aligned
    }
}

/// Checks every input against its use and prepares the dense views generated code reads.
/// `(m, n)` is the main input's shape. The main input itself (position 0) gets an empty view:
/// entry points read it through [`KernelArgs::main`]/[`KernelArgs::main_csr`].
pub(crate) fn prepare<'a, U: InputRole>(
    inputs: &[Input<'a>],
    uses: &[U],
    m: usize,
    n: usize,
) -> Result<Prepared<'a>> {
    if inputs.len() != uses.len() {
        return err(SkeletonError::InputCount {
            expected: uses.len(),
            got: inputs.len(),
        });
    }
    let mut store = Vec::with_capacity(inputs.len());
    let mut shapes = Vec::with_capacity(inputs.len());
    let mut streamed = vec![None; inputs.len()];
    for (pos, (inp, &u)) in inputs.iter().zip(uses).enumerate() {
        let (vals, shape): (Cow<'a, [f64]>, (usize, usize)) = match *inp {
            _ if u.is_skipped() => (Cow::Borrowed(&[][..]), (0, 0)),
            Input::Scalar(s) if u.is_scalar() => (Cow::Owned(vec![s]), (1, 1)),
            Input::Scalar(_) => {
                return err(SkeletonError::ScalarInput {
                    pos,
                    read_as: format!("{u:?}"),
                })
            }
            Input::Matrix(x) | Input::FiniteMatrix(x) => {
                let (rows, cols) = x.shape();
                if let Some(need) = u.mismatch(rows, cols, m, n) {
                    return err(SkeletonError::InputShape {
                        pos,
                        rows,
                        cols,
                        need,
                    });
                }
                match x {
                    _ if u.is_transposed() => (Cow::Owned(transposed(x)?), (cols, rows)),
                    Matrix::Sparse(sp) if u.is_streamed() && pos > 0 => {
                        streamed[pos] = Some(sp);
                        (Cow::Borrowed(&[][..]), (rows, cols))
                    }
                    _ => (dense_values(x)?, (rows, cols)),
                }
            }
        };
        store.push(vals);
        shapes.push(shape);
    }
    Ok(Prepared {
        store,
        shapes,
        known_finite: inputs.iter().map(Input::known_finite).collect(),
        streamed,
    })
}

/// A fixed partition of `m` rows into tasks: the boundaries depend on the shape only (never on
/// the thread count), so merged partial results are reproducible. At most `max_tasks` tasks of
/// at least `BLOCK_CELLS` cells each.
pub(crate) fn partition(m: usize, n: usize, max_tasks: usize) -> Vec<(usize, usize)> {
    if m == 0 {
        return Vec::new();
    }
    let min_rows = (BLOCK_CELLS / n.max(1)).max(1);
    let rows = m.div_ceil(max_tasks.max(1)).max(min_rows);
    (0..m.div_ceil(rows))
        .map(|t| (t * rows, ((t + 1) * rows).min(m)))
        .collect()
}

/// Whether `work` cells (or non-zeros) justify running tasks on threads.
pub(crate) fn parallel(work: usize) -> bool {
    work >= PAR_THRESHOLD && rayon::current_num_threads() > 1
}

/// A raw pointer that may be shared by tasks writing disjoint parts of one buffer.
#[derive(Clone, Copy)]
pub(crate) struct SharedOut(pub *mut f64, pub usize);
// SAFETY: tasks write disjoint row ranges of the buffer (checked by the partition), and the
// buffer outlives the parallel section.
unsafe impl Send for SharedOut {}
unsafe impl Sync for SharedOut {}

/// The arguments template; per task only `out` changes.
#[derive(Clone, Copy)]
pub(crate) struct ArgsTemplate(pub KernelArgs);
// SAFETY: the pointers reference inputs borrowed for the whole call and are only read.
unsafe impl Send for ArgsTemplate {}
unsafe impl Sync for ArgsTemplate {}

/// Runs `f(t)` for every task `t` in `0..n`, on rayon threads when `par`; results in task
/// order (the merge order, whatever the thread count).
pub(crate) fn for_tasks<T: Send>(
    n: usize,
    par: bool,
    f: impl Fn(usize) -> T + Sync + Send,
) -> Vec<T> {
    if par && n > 1 {
        (0..n).into_par_iter().map(f).collect()
    } else {
        (0..n).map(f).collect()
    }
}

thread_local! {
    /// This thread's scratch memory for [`with_scratch`] (its length the most any call asked).
    static SCRATCH: std::cell::Cell<Vec<f64>> = const { std::cell::Cell::new(Vec::new()) };
}

/// Runs `f` on `len` values of this thread's scratch memory, kept from call to call: for
/// buffers every task overwrites before it reads them (the Outer skeleton's tiles), so that
/// neither their allocation nor their zeroing is paid per task or per call (ALS-CG's update
/// at 2000×100: 8 MB zeroed a call, 15 % of its time). The values are whatever an earlier
/// call left there. A call nested on the same thread (a task rayon runs while another waits)
/// finds the memory taken and uses fresh memory instead.
pub(crate) fn with_scratch<T>(len: usize, f: impl FnOnce(&mut [f64]) -> T) -> T {
    let mut buf = SCRATCH.take();
    if buf.len() < len {
        buf.resize(len, 0.0);
    }
    let out = f(&mut buf[..len]);
    SCRATCH.set(buf);
    out
}

impl SharedOut {
    /// The pointer (a method, so closures capture the whole `Sync` wrapper).
    pub(crate) fn ptr(&self) -> (*mut f64, usize) {
        (self.0, self.1)
    }
}

impl ArgsTemplate {
    /// A copy of the arguments (a method, so closures capture the whole `Sync` wrapper).
    pub(crate) fn get(&self) -> KernelArgs {
        self.0
    }
}

/// Calls a generated entry point.
pub(crate) fn call(f: KernelFn, args: &KernelArgs, rl: usize, ru: usize) -> u64 {
    // SAFETY: callers build `args` from inputs validated by `prepare` against the operator's
    // uses, with outputs sized for the operator, and pass `rl <= ru <= rows`.
    unsafe { f(args, rl, ru) }
}

/// The arguments of an entry point over `main` (dense or CSR view, the other empty) and the
/// prepared side-input `views`; no output yet (each task sets its own).
pub(crate) fn kernel_args(main: &Matrix, views: &[DenseView], k: usize, k2: usize) -> KernelArgs {
    let (m, n) = main.shape();
    let (main_view, main_csr) = match main {
        Matrix::Dense(d) => (DenseView::of(&d.values, m, n), CsrView::EMPTY),
        Matrix::Sparse(s) => (DenseView::EMPTY, csr_view(s)),
    };
    KernelArgs {
        main: main_view,
        main_csr,
        inputs: views.as_ptr(),
        num_inputs: views.len(),
        out: std::ptr::null_mut(),
        out_len: 0,
        rows: m,
        cols: n,
        k,
        k2,
        tile: std::ptr::null(),
        tile_stride: 0,
        col_lo: 0,
        col_hi: 0,
        out_stride: 0,
    }
}

/// A CSR view of a sparse main input.
fn csr_view(s: &lafuse_runtime::SparseMatrix) -> CsrView {
    CsrView {
        row_ptr: s.row_ptr.as_ptr(),
        col_idx: s.col_idx.as_ptr(),
        values: s.values.as_ptr(),
        nnz: s.values.len(),
        rows: s.rows,
        cols: s.cols,
    }
}

/// The state of one aggregate while partials are merged.
#[derive(Clone, Copy, Debug)]
pub(crate) enum AggState {
    Sum(Kahan),
    Ext(f64),
}

impl AggState {
    pub(crate) fn init(agg: AggKind) -> AggState {
        match agg {
            AggKind::Sum | AggKind::SumSq => AggState::Sum(Kahan::default()),
            AggKind::Min => AggState::Ext(f64::INFINITY),
            AggKind::Max => AggState::Ext(f64::NEG_INFINITY),
        }
    }

    /// Folds one partial (a lane sum with its correction, or a lane extreme).
    pub(crate) fn fold(&mut self, agg: AggKind, v: f64, corr: f64) {
        match self {
            AggState::Sum(k) => k.merge(Kahan { sum: v, corr }),
            AggState::Ext(e) => *e = pick(agg, *e, v),
        }
    }

    pub(crate) fn value(self) -> f64 {
        match self {
            AggState::Sum(k) => k.sum,
            AggState::Ext(e) => e,
        }
    }
}

/// The min/max fold of the runtime: NaN wins, otherwise the strictly smaller (larger) value.
pub(crate) fn pick(agg: AggKind, s: f64, x: f64) -> f64 {
    let better = match agg {
        AggKind::Max => x > s,
        _ => x < s,
    };
    if better || x.is_nan() {
        x
    } else {
        s
    }
}

/// The initial value of a min/max lane (sums start at 0).
pub(crate) fn ext_init(agg: AggKind) -> f64 {
    match agg {
        AggKind::Min => f64::INFINITY,
        AggKind::Max => f64::NEG_INFINITY,
        _ => 0.0,
    }
}

/// Folds a full-aggregate partial of `lanes` lanes (layout of
/// [`PARTIAL_SLOTS_PER_LANE`](crate::abi::PARTIAL_SLOTS_PER_LANE)) into `state`, lane by lane.
pub(crate) fn fold_partial(state: &mut AggState, agg: AggKind, part: &[f64], lanes: usize) {
    for l in 0..lanes {
        state.fold(agg, part[l], part[lanes + l]);
    }
}

/// A partial's initial contents for `aggs`, each of `lanes` lanes.
pub(crate) fn partial_init(aggs: &[AggKind], lanes: usize) -> Vec<f64> {
    let mut v = Vec::with_capacity(aggs.len() * 2 * lanes);
    for &a in aggs {
        v.extend(std::iter::repeat_n(ext_init(a), lanes));
        v.extend(std::iter::repeat_n(0.0, lanes));
    }
    v
}

/// A zeroed output buffer of `n` values, or [`SkeletonError::OutOfMemory`](crate::SkeletonError)
/// where the machine cannot give that much memory (an output's size is the script's).
pub(crate) fn output(n: usize) -> crate::Result<Vec<f64>> {
    lafuse_runtime::matrix::try_alloc_zeroed(n).map_err(out_of_memory)
}

/// [`output`] not zeroed (empty, with room for `n` values), for an output written in full.
pub(crate) fn output_unzeroed(n: usize) -> crate::Result<Vec<f64>> {
    lafuse_runtime::matrix::try_with_capacity(n).map_err(out_of_memory)
}

pub(crate) fn out_of_memory(e: lafuse_runtime::RuntimeError) -> crate::SkeletonError {
    crate::SkeletonError::OutOfMemory(e)
}

/// A failed runtime kernel: out of memory, or (any other failure) a call of ours that does
/// not match the kernel.
pub(crate) fn kernel_error(e: lafuse_runtime::RuntimeError) -> crate::SkeletonError {
    match e {
        lafuse_runtime::RuntimeError::Resource(_) => out_of_memory(e),
        e => crate::SkeletonError::Runtime(e),
    }
}

/// Rows `[rl, ru)` of a sparse main input as a dense block (for calls that must see every
/// cell), with the view a dense entry point reads it through (`row0 = rl`). The view points
/// into the block: keep the block alive while the view is in use.
pub(crate) fn densify_rows(s: &SparseMatrix, rl: usize, ru: usize) -> (Vec<f64>, DenseView) {
    let mut block = vec![0.0; (ru - rl) * s.cols];
    densify_rows_into(s, rl, ru, &mut block);
    let view = DenseView {
        data: block.as_ptr(),
        len: block.len(),
        rows: s.rows,
        cols: s.cols,
        row0: rl,
    };
    (block, view)
}

/// A streamed block whose cells outnumber its non-zeros by this factor or more is cleared
/// by index after use (one store per non-zero instead of `memset` of the whole block at the
/// next densification); an all-CSR `sum(X*Y*Z)` at sparsity 0.1 spent a third of its time
/// zeroing blocks.
const SCATTER_CLEAR_RATIO: usize = 8;

/// Writes the non-zeros of rows `[rl, ru)` of `s` into the dense block `out`, or, with
/// `fill`, that value at their positions (clearing a block back to zeros); other cells are
/// left as they are.
fn scatter_rows(s: &SparseMatrix, rl: usize, ru: usize, out: &mut [f64], fill: Option<f64>) {
    let n = s.cols;
    for i in rl..ru {
        let (idx, val) = s.row(i);
        let row = &mut out[(i - rl) * n..(i - rl + 1) * n];
        match fill {
            Some(x) => idx.iter().for_each(|&j| row[j as usize] = x),
            None => {
                for (&j, &v) in idx.iter().zip(val) {
                    row[j as usize] = v;
                }
            }
        }
    }
}

/// Writes rows `[rl, ru)` of `s` densely into `out` (exactly `(ru - rl) * cols` long),
/// overwriting what it held.
pub(crate) fn densify_rows_into(s: &SparseMatrix, rl: usize, ru: usize, out: &mut [f64]) {
    let n = s.cols;
    out.fill(0.0);
    for i in rl..ru {
        let (idx, val) = s.row(i);
        let row = &mut out[(i - rl) * n..(i - rl + 1) * n];
        for (&j, &v) in idx.iter().zip(val) {
            row[j as usize] = v;
        }
    }
}

/// A sparse matrix with `s`'s structure and values `vals` (one per stored cell of `s`), zeros
/// dropped, in the runtime's preferred format.
pub(crate) fn compact(s: &SparseMatrix, vals: &[f64]) -> crate::Result<Matrix> {
    let mut row_ptr = Vec::with_capacity(s.rows + 1);
    let mut col_idx = Vec::with_capacity(vals.len());
    let mut values = Vec::with_capacity(vals.len());
    row_ptr.push(0);
    let (ptr, idx) = (&s.row_ptr[..], &s.col_idx[..]);
    for i in 0..s.rows {
        let (lo, hi) = (ptr[i], ptr[i + 1]);
        for (&j, &v) in idx[lo..hi].iter().zip(&vals[lo..hi]) {
            if v != 0.0 {
                col_idx.push(j);
                values.push(v);
            }
        }
        row_ptr.push(values.len());
    }
    Matrix::Sparse(lafuse_runtime::SparseMatrix {
        rows: s.rows,
        cols: s.cols,
        row_ptr: row_ptr.into(),
        col_idx: col_idx.into(),
        values: values.into(),
    })
    .examine_and_convert()
    .map_err(out_of_memory)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::InputUse;

    /// A matrix whose rows alternate between sparse and dense stretches, so blocks are both
    /// cleared by index and zeroed whole.
    fn side(m: usize, n: usize) -> Matrix {
        let vals = (0..m * n)
            .map(|k| {
                let (i, j) = (k / n, k % n);
                let dense_stretch = (500..750).contains(&i);
                if dense_stretch || (i * 7 + j * 13) % 29 == 0 {
                    (k % 11) as f64 + 1.0
                } else {
                    0.0
                }
            })
            .collect();
        Matrix::from_dense_values(m, n, vals).unwrap()
    }

    #[test]
    fn streamed_blocks_hold_exactly_their_rows_values() {
        // Many blocks per call (300 columns: 3 rows a block), so each block's buffer reuses
        // the previous block's, after a clear by index or before a whole zeroing.
        let (m, n) = (1000, 300);
        let dense = side(m, n);
        let sparse = Matrix::Sparse(dense.to_sparse());
        let main = Matrix::from_dense_values(m, n, vec![1.0; m * n]).unwrap();
        let inputs = [Input::Matrix(&main), Input::Matrix(&sparse)];
        let prepared = prepare(&inputs, &[InputUse::Main, InputUse::Aligned], m, n).unwrap();
        assert!(prepared.has_streamed());
        let want = dense.into_dense_values().unwrap();
        let mut blocks = 0;
        prepared.for_blocks(0, m, n, false, &mut |views, r, e| {
            let v = views.expect("streamed views")[1];
            // SAFETY: the view points into the task's buffer, alive during the call.
            let got = unsafe { std::slice::from_raw_parts(v.data, v.len) };
            assert_eq!(got, &want[r * n..e * n], "rows {r}..{e}");
            blocks += 1;
            0
        });
        assert!(blocks > 5, "{blocks} blocks");
    }
}
