//! The Outer-product skeleton (reference 6.5): the body is evaluated at the non-zeros of the
//! sparse driver `X` only (its cost is proportional to nnz(X)·k), with `u_i · v_j` computed by
//! the generated code from contiguous rows of `U` and `V`; at every cell instead (the driver
//! densified block by block) where the caller offers the every-cell entry point, because the
//! body may be NaN or infinite at the driver's zeros.
//!
//! `V` given as k×n and the Left final product's k2×m matrix are transposed once here so the
//! generated code reads contiguous rows. Outputs: CellWise in the driver's format (sparse:
//! the driver's structure, zeros dropped); FullAgg 1×1 from per-task Kahan partials merged in
//! task order; Right m×k2 written in disjoint row ranges; Left/LeftT from per-task n×k2
//! partials summed in task order (LeftT transposed at the end).

mod tiles;

pub use tiles::{TILE_COLS, TILE_ROWS};

use crate::abi::KernelFn;
use crate::prep::{
    self, densify_rows, for_tasks, partial_init, partition, AggState, ArgsTemplate, Input,
    SharedOut,
};
use crate::{err, AggKind, InputUse, LazyEntry, OuterKind, Result, SkeletonError};
use lafuse_runtime::kernels::dense_result;
use lafuse_runtime::Matrix;

/// What an Outer operator computes and how its generated code reads its inputs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OuterSpec {
    /// The final step.
    pub kind: OuterKind,
    /// How each input position is read (exactly one [`InputUse::OuterU`], one
    /// [`InputUse::OuterV`] or [`InputUse::OuterVT`], and a final matrix for Left/Right).
    pub uses: Vec<InputUse>,
    /// The input position of a Left/Right final product's matrix. Its use is
    /// [`InputUse::FinalW`]/[`InputUse::FinalWT`], [`InputUse::OuterV`] for a Right product
    /// by `V` itself (`(X * (U %*% t(V))) %*% V`, ALS-CG's update of U), or
    /// [`InputUse::OuterU`] for a Left product by `t(U)` (`t(U) %*% (X * (U %*% t(V)))`, its
    /// update of V), which read the same rows as the dot products.
    pub w: Option<usize>,
    /// Lanes of a FullAgg partial (the generator's vector width plus one).
    pub lanes: usize,
}

/// The generated entry points of an Outer operator.
#[derive(Clone, Copy)]
pub struct OuterKernels<'a> {
    /// The non-zeros of rows of a dense driver, requested only for a dense driver.
    pub dense: LazyEntry<'a, KernelFn>,
    /// The non-zeros of rows of a CSR driver, requested only for a CSR driver.
    pub csr: LazyEntry<'a, KernelFn>,
    /// Every cell of rows of a dense driver, offered (and then used, for either format) by a
    /// caller that could not prove the body 0 where the driver is 0 (a NaN or infinite factor,
    /// the log of a dot product that may be negative): the call then visits all m·n cells, as
    /// unfused execution does, a CSR driver densified block by block.
    pub every_cell: Option<LazyEntry<'a, KernelFn>>,
    /// Every cell of tiles of the driver, with the tile's dot products computed by a blocked
    /// matrix multiply (`tiles.rs`), offered by a generator that has the entry point: used,
    /// instead of the entry points above, for a driver of at least `min_density`.
    pub tiles: Option<OuterTiles<'a>>,
}

/// The tile entry point of an Outer operator and when to use it.
#[derive(Clone, Copy)]
pub struct OuterTiles<'a> {
    /// Every cell of a tile, the dot products read from the tile of `U %*% t(V)`.
    pub entry: LazyEntry<'a, KernelFn>,
    /// The driver's density (non-zeros over cells) from which the tiles are faster than the
    /// non-zeros one at a time: the ratio of the rates of the dot products per non-zero and
    /// of a blocked matrix multiply (`CostModel::outer_tile_density`).
    pub min_density: f64,
}

/// Tasks at most; Left products keep one n×k2 partial per task, so fewer.
pub(crate) const MAX_TASKS: usize = 64;
pub(crate) const MAX_LEFT_TASKS: usize = 8;

/// Runs an Outer operator.
pub fn execute(spec: &OuterSpec, kernels: &OuterKernels, inputs: &[Input<'_>]) -> Result<Matrix> {
    let Some(x) = inputs.first().and_then(Input::as_matrix) else {
        return err(SkeletonError::MainNotMatrix);
    };
    let (m, n) = x.shape();
    let p = prep::prepare(inputs, &spec.uses, m, n)?;
    let find = |pred: &dyn Fn(InputUse) -> bool| spec.uses.iter().position(|&u| pred(u));
    let (Some(ui), Some(vi)) = (
        find(&|u| u == InputUse::OuterU),
        find(&|u| matches!(u, InputUse::OuterV | InputUse::OuterVT)),
    ) else {
        return err(SkeletonError::OuterFactorsMissing);
    };
    let k = p.shapes[ui].1;
    if p.shapes[vi].1 != k {
        return err(SkeletonError::FactorColumns {
            u: k,
            v: p.shapes[vi].1,
        });
    }
    let left = matches!(spec.kind, OuterKind::Left | OuterKind::LeftT);
    let k2 = match spec.kind {
        OuterKind::CellWise | OuterKind::FullAgg => 0,
        _ => {
            let want = if left {
                InputUse::FinalWT
            } else {
                InputUse::FinalW
            };
            let Some(wi) = spec.w else {
                return err(SkeletonError::FinalProductMissing);
            };
            match spec.uses.get(wi) {
                Some(&u)
                    if u == want
                        || (!left && u == InputUse::OuterV)
                        || (left && u == InputUse::OuterU) =>
                {
                    p.shapes[wi].1
                }
                _ => return err(SkeletonError::FinalProductUse),
            }
        }
    };
    if let Some(t) = kernels.tiles {
        let streamed = p.has_streamed();
        if !streamed && tiles::dense_enough(x.nnz(), m, n, t.min_density) {
            let w = spec.w.map_or(&[][..], |wi| p.values(wi));
            let fac = tiles::Factors {
                u: p.values(ui),
                v: p.values(vi),
                w,
                k,
                k2,
            };
            return tiles::execute(spec, (t.entry)()?, x, &p, &fac);
        }
    }
    let views = p.views();
    let every_cell = kernels.every_cell.is_some();
    let f = match (kernels.every_cell, x) {
        (Some(every_cell), _) => every_cell()?,
        (None, Matrix::Dense(_)) => (kernels.dense)()?,
        (None, Matrix::Sparse(_)) => (kernels.csr)()?,
    };
    let args = ArgsTemplate(prep::kernel_args(x, &views, k, k2));
    let tasks = partition(m, n, if left { MAX_LEFT_TASKS } else { MAX_TASKS });
    let work = match x {
        _ if every_cell => m * n * k.max(1),
        Matrix::Dense(_) => m * n + x.nnz() * k.max(1),
        Matrix::Sparse(_) => x.nnz() * k.max(1),
    };
    // Every cell of a sparse driver: its rows densified block by block.
    let densified = match x {
        Matrix::Sparse(s) if every_cell => Some(s),
        _ => None,
    };
    p.check_task_buffers(n, densified.is_some(), 0, tasks.len())?;
    let par = prep::parallel(work);
    // Every cell into a sum: once a task's sum is NaN it stays NaN, so its remaining blocks
    // are neither densified nor visited (the generated loop stops at such a row too).
    let stop_at_nan = every_cell && spec.kind == OuterKind::FullAgg;
    let sum_lane = spec.lanes.max(1) - 1;
    let run = |out: &(dyn Fn(usize) -> SharedOut + Sync)| -> Vec<u64> {
        for_tasks(tasks.len(), par, |t| {
            let (rl, ru) = tasks[t];
            let mut a = args.get();
            (a.out, a.out_len) = out(t).ptr();
            // A streamed (sparse, cell-aligned) side input is densified block by block.
            p.for_blocks(rl, ru, n, densified.is_some(), &mut |views, r, e| {
                // SAFETY: a FullAgg task's output is its own partial of `2 * lanes` values,
                // which only this task writes (and not while this closure runs).
                if stop_at_nan && unsafe { *a.out.add(sum_lane) }.is_nan() {
                    return 0;
                }
                let mut a = a;
                if let Some(v) = views {
                    a.inputs = v.as_ptr();
                }
                if let Some(s) = densified {
                    let (_block, view) = densify_rows(s, r, e);
                    a.main = view;
                    return prep::call(f, &a, r, e);
                }
                prep::call(f, &a, r, e)
            })
        })
    };
    Ok(match spec.kind {
        OuterKind::CellWise => match x {
            Matrix::Sparse(s) if !every_cell => {
                let mut vals = vec![0.0; s.values.len()];
                let so = SharedOut(vals.as_mut_ptr(), vals.len());
                // The CSR entry writes the value at each non-zero's position and counts
                // nothing; compacting counts the output's non-zeros.
                run(&|_| so);
                prep::compact(s, &vals)?
            }
            _ => {
                let mut out = prep::output(m * n)?;
                let so = SharedOut(out.as_mut_ptr(), out.len());
                let nnz: u64 = run(&|_| so).into_iter().sum();
                dense_result(m, n, out, nnz as usize)
            }
        },
        kind => aggregated(kind, tasks.len(), (m, n, k2), spec.lanes.max(1), &|out| {
            run(out);
            Ok(())
        })?,
    })
}

/// Runs an operator's tasks, giving task `t` the output at `out(t)`.
pub(crate) type RunTasks<'a> = dyn Fn(&(dyn Fn(usize) -> SharedOut + Sync)) -> Result<()> + 'a;

/// The output of a FullAgg, Right, Left or LeftT operator over an m×n driver with final
/// factors of k2 columns, run as `tasks` tasks by `run`, which gives task `t` the output it
/// writes (`lanes` Kahan lanes per full-aggregate partial); the non-zeros path and the tiles
/// share it.
pub(crate) fn aggregated(
    kind: OuterKind,
    tasks: usize,
    (m, n, k2): (usize, usize, usize),
    lanes: usize,
    run: &RunTasks<'_>,
) -> Result<Matrix> {
    let task_outputs = |parts: &mut Vec<Vec<f64>>| -> Vec<SharedOut> {
        parts
            .iter_mut()
            .map(|p| SharedOut(p.as_mut_ptr(), p.len()))
            .collect()
    };
    Ok(match kind {
        OuterKind::FullAgg => {
            let init = partial_init(&[AggKind::Sum], lanes);
            let mut parts: Vec<Vec<f64>> = (0..tasks).map(|_| init.clone()).collect();
            let outs = task_outputs(&mut parts);
            run(&|t| outs[t])?;
            let mut s = AggState::init(AggKind::Sum);
            for p in &parts {
                prep::fold_partial(&mut s, AggKind::Sum, p, lanes);
            }
            Matrix::scalar(s.value())
        }
        OuterKind::Right => {
            let mut out = prep::output(m * k2)?;
            let so = SharedOut(out.as_mut_ptr(), out.len());
            run(&|_| so)?;
            let nnz = lafuse_runtime::matrix::count_nnz(&out);
            dense_result(m, k2, out, nnz)
        }
        OuterKind::Left | OuterKind::LeftT => {
            let mut parts: Vec<Vec<f64>> = (0..tasks)
                .map(|_| prep::output(n * k2))
                .collect::<Result<_>>()?;
            let outs = task_outputs(&mut parts);
            run(&|t| outs[t])?;
            left_result(kind, n, k2, &parts)?
        }
        OuterKind::CellWise => return err(SkeletonError::AggregationKind),
    })
}

/// A Left (n×k2) or LeftT (k2×n) product from per-task partials, summed in task order
/// (independent of the thread count).
fn left_result(kind: OuterKind, n: usize, k2: usize, parts: &[Vec<f64>]) -> Result<Matrix> {
    let mut out = prep::output(n * k2)?;
    for p in parts {
        for (o, v) in out.iter_mut().zip(p) {
            *o += v;
        }
    }
    let nnz = lafuse_runtime::matrix::count_nnz(&out);
    let l = dense_result(n, k2, out, nnz);
    Ok(if kind == OuterKind::LeftT {
        lafuse_runtime::kernels::transpose(&l).map_err(prep::kernel_error)?
    } else {
        l
    })
}
