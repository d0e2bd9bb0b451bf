//! The PTX kernels of Cell and MultiAgg plans: a grid-stride walk over the cells of a dense
//! main input (no aggregate, full aggregates), a block per row (row aggregates), a thread per
//! column and chunk of rows (column aggregates), and a warp (or, for row aggregates, a thread)
//! per row of a CSR main input.

use super::kx::{declare_kernel, rows_of, Acc, Kx};
use crate::backend::{CodegenError, Internal};
use crate::native::expr::{ierr, load_inputs, load_main_csr, At, Body};
use crate::native::llvm::{load_vec, store_vec};
use crate::native::used_mask;
use inkwell::context::Context;
use inkwell::module::Module;
use inkwell::values::{IntValue, PointerValue, VectorValue};
use lafuse_compiler::fusion::cplan::{CNode, CNodeId, CPlan};
use lafuse_skeletons::abi::{DenseView, KernelArgs};
use lafuse_skeletons::gpu::abi::{GpuKernel, GpuMain, KernelShape};
use lafuse_skeletons::AggKind;
use std::mem::offset_of;

/// Where the main input's value at the current cell comes from.
enum MainRead<'c> {
    Dense(PointerValue<'c>),
    Csr {
        rp: PointerValue<'c>,
        ci: PointerValue<'c>,
        va: PointerValue<'c>,
    },
}

/// Cell and MultiAgg kernels: the body of each root at every cell (or non-zero), aggregated as
/// the kernel's shape says.
pub(super) fn emit_cell_like<'c>(
    ctx: &'c Context,
    module: &Module<'c>,
    plan: &CPlan,
    kernel: &GpuKernel,
    roots: &[CNodeId],
) -> Result<(), CodegenError> {
    let mut k = declare_kernel(ctx, module)?;
    let used = used_mask(&kernel.uses);
    let ins = load_inputs(&k.fx, k.args, &used)?;
    let out = k.ptr_field(offset_of!(KernelArgs, out))?;
    let rows = k.i64_field(offset_of!(KernelArgs, rows))?;
    let cols = k.i64_field(offset_of!(KernelArgs, cols))?;
    let main = match kernel.main {
        GpuMain::Dense => MainRead::Dense(
            k.ptr_field(offset_of!(KernelArgs, main) + offset_of!(DenseView, data))?,
        ),
        GpuMain::Csr => {
            let (rp, ci, va) = load_main_csr(&k.fx, k.args)?;
            MainRead::Csr { rp, ci, va }
        }
    };
    let aggs: Vec<AggKind> = match &kernel.shape {
        KernelShape::FullAgg { aggs } => aggs.clone(),
        KernelShape::RowAgg { agg } | KernelShape::ColAgg { agg } => vec![*agg],
        _ => vec![],
    };
    let accs: Vec<Acc<'c>> = aggs.iter().map(|&a| k.acc(a)).collect::<Result<_, _>>()?;
    let tr = kernel.transposed;
    // The roots' values at cell (i, j) whose main value is `main`, folded or written at
    // `flat_idx` (CSR: the non-zero's position).
    let visit = |k: &mut Kx<'_, 'c>,
                 (i, j, main): (IntValue<'c>, IntValue<'c>, VectorValue<'c>),
                 flat_idx: IntValue<'c>|
     -> Result<(), CodegenError> {
        let mut body = Body::new(plan, &ins, At { i, j, w: 1, main });
        for (r, &root) in roots.iter().enumerate() {
            let v = body.emit(&k.fx, root, tr)?;
            match accs.get(r) {
                Some(&a) => k.fold(a, v)?,
                None => store_vec(&k.fx.b, out, flat_idx, v)?,
            }
        }
        Ok(())
    };
    let threads = k.threads();
    let gtid = k.fx.add(k.fx.mul(k.bid, threads)?, k.tid)?;
    let gstride = k.fx.mul(k.nb, threads)?;
    match (&kernel.shape, &main) {
        (KernelShape::NoAgg | KernelShape::FullAgg { .. }, MainRead::Dense(mp)) => {
            let total = k.fx.mul(rows, cols)?;
            let flat = runs_flat(plan);
            k.for_stride(gtid, total, gstride, &mut |k, idx| {
                let m = load_vec(&k.fx.b, k.fx.vty(1), *mp, idx)?;
                let (i, j) = if flat {
                    (k.fx.i64c(0), idx)
                } else {
                    let i =
                        k.fx.b
                            .build_int_unsigned_div(idx, cols, "i")
                            .map_err(ierr)?;
                    (i, k.fx.sub(idx, k.fx.mul(i, cols)?)?)
                };
                visit(k, (i, j, m), idx)
            })?;
        }
        (KernelShape::RowAgg { .. }, MainRead::Dense(mp)) => {
            let a = accs[0];
            let (bid, nb, tid) = (k.bid, k.nb, k.tid);
            k.for_stride(bid, rows, nb, &mut |k, i| {
                k.reset(a)?;
                let base = k.fx.mul(i, cols)?;
                k.for_stride(tid, cols, threads, &mut |k, j| {
                    let idx = k.fx.add(base, j)?;
                    let m = load_vec(&k.fx.b, k.fx.vty(1), *mp, idx)?;
                    visit(k, (i, j, m), idx)
                })?;
                k.block_reduce(a, &mut |k, s, _| store_vec(&k.fx.b, out, i, s))
            })?;
        }
        (KernelShape::ColAgg { .. }, MainRead::Dense(mp)) => {
            let a = accs[0];
            let (bidy, nby) = (k.bidy, k.nby);
            let (lo, hi) = k.chunk(rows, bidy, nby)?;
            let j = gtid;
            let inside = k.ult(j, cols)?;
            k.when(inside, &mut |k| {
                k.for_stride(lo, hi, k.fx.i64c(1), &mut |k, i| {
                    let idx = k.fx.add(k.fx.mul(i, cols)?, j)?;
                    let m = load_vec(&k.fx.b, k.fx.vty(1), *mp, idx)?;
                    visit(k, (i, j, m), idx)
                })?;
                let slot = k.fx.add(k.fx.mul(bidy, cols)?, j)?;
                k.write_pair(out, slot, k.fx.load_v(a.s)?, k.fx.load_v(a.c)?)
            })?;
        }
        (
            KernelShape::OuterCellWise
            | KernelShape::OuterFullAgg
            | KernelShape::OuterRight
            | KernelShape::OuterLeft { .. }
            | KernelShape::RowWise { .. }
            | KernelShape::RowFull
            | KernelShape::RowB1
            | KernelShape::RowColumns,
            _,
        ) => {
            return Err(CodegenError::Internal(Internal::MalformedPlan(
                "an outer-product or row shape for a cell-wise plan",
            )))
        }
        (shape, MainRead::Csr { rp, ci, va }) => {
            let row_agg = matches!(shape, KernelShape::RowAgg { .. });
            let (rp, ci, va) = (*rp, *ci, *va);
            // A warp per row (its lanes over the row's non-zeros) where nothing is kept per
            // row; a thread per row for row aggregates.
            let (first, step, lane, lanes) = rows_of(&k, gtid, gstride, !row_agg)?;
            k.for_stride(first, rows, step, &mut |k, i| {
                if row_agg {
                    k.reset(accs[0])?;
                }
                let (p0, p1) = k.csr_row(rp, i)?;
                let start = k.fx.add(p0, lane)?;
                k.for_stride(start, p1, lanes, &mut |k, p| {
                    let j = k.fx.load_index(ci, p)?;
                    let m = load_vec(&k.fx.b, k.fx.vty(1), va, p)?;
                    visit(k, (i, j, m), p)
                })?;
                if row_agg {
                    store_vec(&k.fx.b, out, i, k.fx.load_v(accs[0].s)?)?;
                }
                Ok(())
            })?;
        }
    }
    if let KernelShape::FullAgg { .. } = kernel.shape {
        let (bid, nb) = (k.bid, k.nb);
        for (r, &a) in accs.iter().enumerate() {
            k.block_reduce(a, &mut |k, s, c| {
                let slot = k.fx.add(k.fx.mul(k.fx.i64c(r as u64), nb)?, bid)?;
                k.write_pair(out, slot, s, c)
            })?;
        }
    }
    k.fx.b.build_return(None).map_err(ierr)?;
    Ok(())
}

/// Whether every input is read at the current cell of a same-shaped matrix (or is a scalar),
/// so a dense walk needs no row and column indexes: the flat index serves as both.
fn runs_flat(plan: &CPlan) -> bool {
    use lafuse_compiler::fusion::cplan::{Access, InputKind};
    plan.nodes.iter().all(|n| match n {
        CNode::Data { input, access } => {
            plan.inputs.get(*input) == Some(&InputKind::Scalar)
                || matches!(access, Access::Main | Access::Aligned | Access::Scalar)
        }
        CNode::Transpose { .. } => false,
        _ => true,
    })
}
