//! The PTX kernels of Outer plans over a CSR driver: a warp per row (a thread per row where it
//! owns a row of a right product, per column where it owns a row of a left one), the dot
//! products `u_i · v_j` per non-zero in order over `k`.

use super::kx::{declare_kernel, rows_of};
use crate::backend::{CodegenError, Internal, Unsupported};
use crate::native::expr::{ierr, load_inputs, load_main_csr, At, Body, InputPtrs};
use crate::native::llvm::{load_vec, store_vec};
use crate::native::{transposed_frame, used_mask};
use crate::plan_info::outer_analysis;
use inkwell::context::Context;
use inkwell::module::Module;
use lafuse_compiler::fusion::cplan::{CNode, CPlan, OuterType};
use lafuse_skeletons::abi::KernelArgs;
use lafuse_skeletons::gpu::abi::{GpuKernel, GpuMain, KernelShape};
use lafuse_skeletons::{AggKind, OuterKind};
use std::mem::offset_of;

/// Outer kernels over a CSR driver: a thread per row, the dot products `u_i · v_j` computed
/// per non-zero in order over `k`.
pub(super) fn emit_outer<'c>(
    ctx: &'c Context,
    module: &Module<'c>,
    plan: &CPlan,
    outer_type: OuterType,
) -> Result<GpuKernel, CodegenError> {
    // Refused before the analysis, which reads a transposed frame's inputs differently.
    let out_node = plan.outputs[0];
    let body = match &plan.nodes[out_node] {
        CNode::FinalProduct { g, .. } => *g,
        _ => out_node,
    };
    if transposed_frame(plan, &[body])? {
        return Err(CodegenError::Unsupported(Unsupported::Construct(
            "an outer product over a transposed driver on the GPU",
        )));
    }
    let (kind, oi, uses) = outer_analysis(plan, outer_type)?;
    let (g, w, ui, vi) = (oi.g, oi.w, oi.u, oi.v);
    let shape = match kind {
        OuterKind::CellWise => KernelShape::OuterCellWise,
        OuterKind::FullAgg => KernelShape::OuterFullAgg,
        OuterKind::Right => KernelShape::OuterRight,
        OuterKind::Left => KernelShape::OuterLeft { transposed: false },
        OuterKind::LeftT => KernelShape::OuterLeft { transposed: true },
    };
    let kernel = GpuKernel {
        shape,
        main: GpuMain::Csr,
        uses,
        transposed: false,
        narrow: None,
    };
    let mut k = declare_kernel(ctx, module)?;
    let used = used_mask(&kernel.uses);
    let ins: InputPtrs<'c> = load_inputs(&k.fx, k.args, &used)?;
    let out = k.ptr_field(offset_of!(KernelArgs, out))?;
    let rows = k.i64_field(offset_of!(KernelArgs, rows))?;
    let cols = k.i64_field(offset_of!(KernelArgs, cols))?;
    let kk = k.i64_field(offset_of!(KernelArgs, k))?;
    let k2 = k.i64_field(offset_of!(KernelArgs, k2))?;
    let (rp, ci, va) = load_main_csr(&k.fx, k.args)?;
    let (up, _) = ins.get(ui)?;
    let (vp, _) = ins.get(vi)?;
    let wp = match w {
        Some(wk) => Some(ins.get(wk)?.0),
        None => None,
    };
    let acc = k.acc(AggKind::Sum)?;
    let dot = k.fx.slot(k.fx.vty(1).into())?;
    let threads = k.threads();
    let gtid = k.fx.add(k.fx.mul(k.bid, threads)?, k.tid)?;
    let gstride = k.fx.mul(k.nb, threads)?;
    let shape = kernel.shape.clone();
    // A warp per row where each non-zero's value stands alone; a thread per row where it owns
    // the row of a right product, per column where it owns the row of a left one (the CSR
    // walked is then `t(X)`'s: its row `j` is column `j` of `X`, in row order).
    let left = kernel.walks_columns();
    let per_warp = !matches!(
        kernel.shape,
        KernelShape::OuterRight | KernelShape::OuterLeft { .. }
    );
    let walked = if left { cols } else { rows };
    let (first, step, lane, lanes) = rows_of(&k, gtid, gstride, per_warp)?;
    k.for_stride(first, walked, step, &mut |k, r| {
        let (p0, p1) = k.csr_row(rp, r)?;
        let start = k.fx.add(p0, lane)?;
        k.for_stride(start, p1, lanes, &mut |k, p| {
            let other = k.fx.load_index(ci, p)?;
            let (i, j) = if left { (other, r) } else { (r, other) };
            let ub = k.fx.mul(i, kk)?;
            let vb = k.fx.mul(j, kk)?;
            k.fx.store(dot, k.fx.splat_const(0.0, 1))?;
            k.for_stride(k.fx.i64c(0), kk, k.fx.i64c(1), &mut |k, t| {
                let fx = &k.fx;
                let u = load_vec(&fx.b, fx.vty(1), up, fx.add(ub, t)?)?;
                let v = load_vec(&fx.b, fx.vty(1), vp, fx.add(vb, t)?)?;
                fx.store(dot, fx.fma(u, v, fx.load_v(dot)?)?)
            })?;
            let m = load_vec(&k.fx.b, k.fx.vty(1), va, p)?;
            let mut body = Body::new(
                plan,
                &ins,
                At {
                    i,
                    j,
                    w: 1,
                    main: m,
                },
            );
            body.outer_dot = Some(k.fx.load_v(dot)?);
            let gv = body.emit(&k.fx, g, false)?;
            match (&shape, wp) {
                (KernelShape::OuterCellWise, _) => store_vec(&k.fx.b, out, p, gv),
                (KernelShape::OuterFullAgg, _) => k.fold(acc, gv),
                (KernelShape::OuterRight, Some(wp)) => {
                    let ob = k.fx.mul(i, k2)?;
                    let wb = k.fx.mul(j, k2)?;
                    k.for_stride(k.fx.i64c(0), k2, k.fx.i64c(1), &mut |k, c| {
                        let fx = &k.fx;
                        let o = fx.add(ob, c)?;
                        let cur = load_vec(&fx.b, fx.vty(1), out, o)?;
                        let wv = load_vec(&fx.b, fx.vty(1), wp, fx.add(wb, c)?)?;
                        store_vec(&fx.b, out, o, fx.fma(gv, wv, cur)?)
                    })
                }
                // `out_j += G_ij · wt_i`, row `j` of the n×k2 output or column `j` of the
                // k2×n one.
                (KernelShape::OuterLeft { transposed }, Some(wp)) => {
                    let transposed = *transposed;
                    let wb = k.fx.mul(i, k2)?;
                    k.for_stride(k.fx.i64c(0), k2, k.fx.i64c(1), &mut |k, c| {
                        let fx = &k.fx;
                        let o = if transposed {
                            fx.add(fx.mul(c, cols)?, j)?
                        } else {
                            fx.add(fx.mul(j, k2)?, c)?
                        };
                        let cur = load_vec(&fx.b, fx.vty(1), out, o)?;
                        let wv = load_vec(&fx.b, fx.vty(1), wp, fx.add(wb, c)?)?;
                        store_vec(&fx.b, out, o, fx.fma(gv, wv, cur)?)
                    })
                }
                _ => Err(CodegenError::Internal(Internal::MalformedPlan(
                    "an outer product without its matrix",
                ))),
            }
        })
    })?;
    if kernel.shape == KernelShape::OuterFullAgg {
        let bid = k.bid;
        k.block_reduce(acc, &mut |k, s, c| k.write_pair(out, bid, s, c))?;
    }
    k.fx.b.build_return(None).map_err(ierr)?;
    Ok(kernel)
}
