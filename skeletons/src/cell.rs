//! The Cell skeleton (reference 6.2): one generated body per cell of the main input, then no
//! aggregation, or a row, column or full aggregate.
//!
//! Iteration modes, chosen per call:
//! * dense main input: the dense entry point over row ranges (vectorised by the generator);
//! * sparse main input, sparse-safe plan, and a CSR entry point offered for the call (the
//!   caller offers it only where the body is provably 0 at zeros of the main input for these
//!   side inputs: `0 * Inf = NaN`, so a non-finite factor must see every cell): the CSR entry
//!   point visits the non-zeros only; unseen zeros contribute 0, so only `min`/`max` need a
//!   correction (folding 0 in where a row, column or the whole input has fewer non-zeros than
//!   cells);
//! * sparse main input otherwise: every cell must be seen, so each task densifies blocks of its
//!   rows into a buffer and calls the dense entry point on them.
//!
//! Outputs: no-aggregate → m×n, sparse when computed from non-zeros only (the CSR structure of
//! the main input, zeros dropped), else dense; row → m×1; column → 1×n; full → 1×1; all in the
//! runtime's preferred format. Partial aggregates of tasks are merged in task order.

use crate::abi::{DenseView, KernelFn};
use crate::gather_prefetch::GatherPrefetch;
use crate::prep::{
    self, call, densify_rows, for_tasks, partial_init, partition, pick, AggState, ArgsTemplate,
    Input, SharedOut,
};
use crate::{err, AggKind, CellKind, InputUse, LazyEntry, Result, SkeletonError};
use lafuse_runtime::kernels::dense_result;
use lafuse_runtime::matrix::count_nnz;
use lafuse_runtime::Matrix;

/// What a Cell operator computes and how its generated code reads its inputs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CellSpec {
    /// The output shape class.
    pub kind: CellKind,
    /// The aggregation (`None` for [`CellKind::NoAgg`]).
    pub agg: Option<AggKind>,
    /// The body is zero wherever the main input is zero (given finite side inputs).
    pub sparse_safe: bool,
    /// How each input position is read.
    pub uses: Vec<InputUse>,
    /// Lanes of a full-aggregate partial (the generator's vector width plus one).
    pub lanes: usize,
}

/// The generated entry points of a Cell operator.
#[derive(Clone, Copy)]
pub struct CellKernels<'a> {
    /// Rows of a dense main input (every cell), requested only by calls that run it (a
    /// dense main input, or a sparse one whose zeros cannot be skipped).
    pub dense: LazyEntry<'a, KernelFn>,
    /// Rows of a CSR main input, non-zeros only (sparse-safe plans), requested only when a
    /// call visits non-zeros only. The caller offers it only for calls where skipping the
    /// main input's zeros is exact (the body is 0 there for these side inputs; lafuse-codegen
    /// proves it with `zero_cells`); without it a sparse main input is densified block by
    /// block.
    pub csr: Option<LazyEntry<'a, KernelFn>>,
}

/// Tasks at most (their partials are merged in order).
const MAX_TASKS: usize = 64;

/// How a call iterates.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Dense,
    CsrNonZeros,
    DensifiedBlocks,
}

/// The main input and the task machinery shared by Cell and MultiAgg.
pub(crate) struct Driver<'a> {
    pub(crate) main: &'a Matrix,
    pub(crate) m: usize,
    pub(crate) n: usize,
    mode: Mode,
    args: ArgsTemplate,
    pub(crate) tasks: Vec<(usize, usize)>,
    par: bool,
    /// The entry point the mode runs (the CSR one for [`Mode::CsrNonZeros`], else the dense
    /// one).
    entry: KernelFn,
    prepared: &'a prep::Prepared<'a>,
    /// For a walk over a CSR main input's non-zeros that gathers dense side inputs: the
    /// chunks it runs in, each call preceded by the next chunk's prefetch.
    gathers: Option<GatherPrefetch<'a>>,
}

impl<'a> Driver<'a> {
    pub(crate) fn new(
        inputs: &[Input<'a>],
        uses: &[InputUse],
        sparse_safe: bool,
        kernels: &CellKernels<'_>,
        views: &'a mut Vec<DenseView>,
        prepared: &'a mut Option<prep::Prepared<'a>>,
    ) -> Result<Driver<'a>> {
        let Some(main) = inputs.first().and_then(Input::as_matrix) else {
            return err(SkeletonError::MainNotMatrix);
        };
        let (m, n) = main.shape();
        let p = prepared.insert(prep::prepare(inputs, uses, m, n)?);
        let (mode, entry) = match (main, kernels.csr) {
            (Matrix::Dense(_), _) => (Mode::Dense, (kernels.dense)()?),
            (Matrix::Sparse(_), Some(csr)) if sparse_safe => (Mode::CsrNonZeros, csr()?),
            (Matrix::Sparse(_), _) => (Mode::DensifiedBlocks, (kernels.dense)()?),
        };
        *views = p.views();
        let p: &'a prep::Prepared<'a> = p;
        let args = prep::kernel_args(main, views, 0, 0);
        let work = if mode == Mode::CsrNonZeros {
            main.nnz()
        } else {
            m * n
        };
        let tasks = partition(m, n, MAX_TASKS);
        p.check_task_buffers(n, mode == Mode::DensifiedBlocks, 0, tasks.len())?;
        let gathers = match main {
            Matrix::Sparse(s) if mode == Mode::CsrNonZeros && !p.has_streamed() => {
                let gathered = (1..uses.len())
                    .filter(|&k| uses[k] == InputUse::Aligned)
                    .map(|k| p.values(k))
                    .collect();
                GatherPrefetch::new(s, gathered)
            }
            _ => None,
        };
        Ok(Driver {
            main,
            m,
            n,
            mode,
            args: ArgsTemplate(args),
            tasks,
            par: prep::parallel(work),
            entry,
            prepared: p,
            gathers,
        })
    }

    /// Whether the call visits non-zeros only.
    pub(crate) fn nonzeros_only(&self) -> bool {
        self.mode == Mode::CsrNonZeros
    }

    /// Runs every task with `out(t)` as its output; returns the non-zeros each wrote.
    pub(crate) fn run(&self, out: impl Fn(usize) -> SharedOut + Sync + Send) -> Vec<u64> {
        let args = &self.args;
        let (mode, n) = (self.mode, self.n);
        let f = self.entry;
        let main = self.main;
        let tasks = &self.tasks;
        let prepared = self.prepared;
        let gathers = self.gathers.as_ref();
        for_tasks(tasks.len(), self.par, |t| {
            let (rl, ru) = tasks[t];
            let mut a = args.get();
            (a.out, a.out_len) = out(t).ptr();
            if let Some(g) = gathers {
                return g.for_chunks(rl, ru, &mut |r, e| call(f, &a, r, e));
            }
            let densify_main = mode == Mode::DensifiedBlocks;
            prepared.for_blocks(rl, ru, n, densify_main, &mut |views, r, e| {
                let mut a = a;
                if let Some(v) = views {
                    a.inputs = v.as_ptr();
                }
                match (mode, main) {
                    (Mode::DensifiedBlocks, Matrix::Sparse(s)) => {
                        let (_block, view) = densify_rows(s, r, e);
                        a.main = view;
                        call(f, &a, r, e)
                    }
                    _ => call(f, &a, r, e),
                }
            })
        })
    }
}

/// Runs a Cell operator. `inputs` by operator input position, the main input first.
pub fn execute(spec: &CellSpec, kernels: &CellKernels, inputs: &[Input<'_>]) -> Result<Matrix> {
    if (spec.kind == CellKind::NoAgg) != spec.agg.is_none() {
        return err(SkeletonError::AggregationKind);
    }
    let mut views = Vec::new();
    let mut prepared = None;
    let d = Driver::new(
        inputs,
        &spec.uses,
        spec.sparse_safe,
        kernels,
        &mut views,
        &mut prepared,
    )?;
    let (m, n) = (d.m, d.n);
    let Some(agg) = spec.agg else {
        return no_agg(&d);
    };
    Ok(match spec.kind {
        CellKind::NoAgg => no_agg(&d)?,
        CellKind::RowAgg => {
            let mut out = vec![prep::ext_init(agg); m];
            let so = SharedOut(out.as_mut_ptr(), out.len());
            d.run(|_| so);
            if d.nonzeros_only() && matches!(agg, AggKind::Min | AggKind::Max) && n > 0 {
                if let Matrix::Sparse(s) = d.main {
                    let row_ptr = &s.row_ptr[..];
                    for (i, o) in out.iter_mut().enumerate() {
                        if row_ptr[i + 1] - row_ptr[i] < n {
                            *o = pick(agg, *o, 0.0);
                        }
                    }
                }
            }
            let nnz = count_nnz(&out);
            dense_result(m, 1, out, nnz)
        }
        CellKind::ColAgg => {
            let width = if matches!(agg, AggKind::Sum | AggKind::SumSq) {
                2 * n
            } else {
                n
            };
            let mut parts: Vec<Vec<f64>> = (0..d.tasks.len())
                .map(|_| {
                    let mut p = vec![prep::ext_init(agg); width];
                    p[n..].fill(0.0);
                    p
                })
                .collect();
            let outs: Vec<SharedOut> = parts
                .iter_mut()
                .map(|p| SharedOut(p.as_mut_ptr(), p.len()))
                .collect();
            d.run(|t| outs[t]);
            let mut out = Vec::with_capacity(n);
            for j in 0..n {
                let mut s = AggState::init(agg);
                for p in &parts {
                    let corr = if width == 2 * n { p[n + j] } else { 0.0 };
                    s.fold(agg, p[j], corr);
                }
                out.push(s.value());
            }
            if d.nonzeros_only() && matches!(agg, AggKind::Min | AggKind::Max) {
                if let Matrix::Sparse(s) = d.main {
                    let mut count = vec![0usize; n];
                    for &j in &s.col_idx {
                        count[j as usize] += 1;
                    }
                    for (o, c) in out.iter_mut().zip(count) {
                        if c < m {
                            *o = pick(agg, *o, 0.0);
                        }
                    }
                }
            }
            let nnz = count_nnz(&out);
            dense_result(1, n, out, nnz)
        }
        CellKind::FullAgg => {
            let v = full_aggs(&d, &[agg], spec.lanes)?[0];
            Matrix::scalar(v)
        }
    })
}

/// Full aggregates `aggs` over the driver's cells (Cell full-agg and MultiAgg): one partial of
/// `lanes` lanes per aggregate and task, folded lane by lane in task order.
pub(crate) fn full_aggs(d: &Driver<'_>, aggs: &[AggKind], lanes: usize) -> Result<Vec<f64>> {
    if lanes == 0 {
        return err(SkeletonError::NoLanes);
    }
    let init = partial_init(aggs, lanes);
    let mut parts: Vec<Vec<f64>> = (0..d.tasks.len()).map(|_| init.clone()).collect();
    let outs: Vec<SharedOut> = parts
        .iter_mut()
        .map(|p| SharedOut(p.as_mut_ptr(), p.len()))
        .collect();
    d.run(|t| outs[t]);
    let mut res = Vec::with_capacity(aggs.len());
    for (k, &agg) in aggs.iter().enumerate() {
        let mut s = AggState::init(agg);
        for p in &parts {
            prep::fold_partial(&mut s, agg, &p[k * 2 * lanes..(k + 1) * 2 * lanes], lanes);
        }
        if d.nonzeros_only()
            && matches!(agg, AggKind::Min | AggKind::Max)
            && d.main.nnz() < d.m * d.n
        {
            s.fold(agg, 0.0, 0.0);
        }
        res.push(s.value());
    }
    Ok(res)
}

fn no_agg(d: &Driver<'_>) -> Result<Matrix> {
    let (m, n) = (d.m, d.n);
    match d.main {
        Matrix::Sparse(s) if d.nonzeros_only() => {
            // Values aligned with the main input's non-zeros; zeros the body produced dropped.
            let mut vals = vec![0.0; s.values.len()];
            let so = SharedOut(vals.as_mut_ptr(), vals.len());
            d.run(|_| so);
            prep::compact(s, &vals)
        }
        _ => {
            // Every cell is written (the tasks partition the rows, and the dense entry point
            // writes every column of its rows), so the buffer is not zeroed first: for the
            // vectors of an algorithm's loop, zeroing cost as much as computing.
            let len = m * n;
            let mut out = prep::output_unzeroed(len)?;
            let so = SharedOut(out.as_mut_ptr(), len);
            let nnz: u64 = d.run(|_| so).into_iter().sum();
            // SAFETY: the capacity is `len`, and `run` returned after every task wrote its
            // rows: all `len` values are initialized.
            unsafe { out.set_len(len) };
            Ok(dense_result(m, n, out, nnz as usize))
        }
    }
}
