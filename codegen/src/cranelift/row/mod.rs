//! Entry points of Row operators in Cranelift IR (issue 28): the loop over rows `[rl, ru)`
//! of a dense or CSR main input and per row the plan's nodes in order, each a scalar or a row
//! vector, from the same analysis ([`RowInfo`]) and layout parameters as the LLVM backend's
//! `native::row`, so that the same skeleton runs either backend's entry points and every
//! value is computed by the same operations in the same order (see [`prims`]).
//!
//! The dense entry goes a block of [`ROW_BLOCK`] rows at a time as the LLVM backend's does:
//! the block's products of the main row with a matrix, and its deferred outer-product
//! updates, are calls of the same block primitives (`lafuse_skeletons::row_blocks`), so the
//! two backends share that code and its speed. The CSR entry goes row by row, each product
//! summed in the block primitive's order.
//!
//! Module map: `prims` (the vector primitives, emitted inline), `body` (one row's nodes and
//! the output statement), `aggregate` (row aggregates and the outer-product accumulation).

mod aggregate;
mod body;
mod prims;

use super::body::load_inputs;
use super::fx::{mem, Fx};
use crate::backend::CodegenError;
use crate::row_plan::{RowInfo, P_MROW, P_PEND, ROW_BLOCK};
use body::{Em, Pending, Sp, RV};
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{types, InstBuilder, Value};
use lafuse_skeletons::abi::{CsrView, KernelArgs};
use lafuse_skeletons::row::{RowArgs, RowInput, RowKind};
use std::mem::offset_of;

/// Emits one entry point (`csr`: rows of a CSR main input, else of a dense one) into `fx`,
/// positioned at its entry block with parameters `args` (a `RowArgs`), `rl` and `ru`.
pub(super) fn emit_entry(
    fx: &mut Fx<'_>,
    args: Value,
    rl: Value,
    ru: Value,
    info: &RowInfo,
    csr: bool,
) -> Result<(), CodegenError> {
    let out = fx.load_i64(args, offset_of!(KernelArgs, out))?;
    let n = fx.load_i64(args, offset_of!(KernelArgs, cols))?;
    let scratch = fx.load_i64(args, offset_of!(RowArgs, scratch))?;
    let params = fx.load_i64(args, offset_of!(RowArgs, params))?;
    let used: Vec<bool> = info
        .inputs
        .iter()
        .map(|u| !matches!(u, RowInput::Unused | RowInput::Main))
        .collect();
    let ins = load_inputs(fx, args, &used)?;
    let zero = fx.iconst(0);
    let nnz = fx.var(types::I64, zero);
    // FullAgg: the task's partial (sum, correction) so far.
    let kahan = if info.kind == RowKind::FullAgg {
        let s = fx.b.ins().load(types::F64, mem(), out, 0);
        let c = fx.b.ins().load(types::F64, mem(), out, 8);
        Some([fx.var(types::F64, s), fx.var(types::F64, c)])
    } else {
        None
    };
    let main_dense = if csr {
        None
    } else {
        Some(fx.dense_view(args, offset_of!(KernelArgs, main))?)
    };
    let pending = match main_dense {
        Some((data, stride, row0)) if info.defer_outer => {
            let zero = fx.iconst(0);
            let pend_off =
                fx.b.ins()
                    .load(types::I64, mem(), params, (P_PEND * 8) as i32);
            Some(Pending {
                count: fx.var(types::I64, zero),
                first: fx.var(types::I64, rl),
                bs: fx.elem_addr(scratch, pend_off),
                data,
                row0,
                stride,
            })
        }
        _ => None,
    };
    let em = Em {
        info,
        ins,
        params,
        scratch,
        out,
        n,
        kahan,
        nnz,
        pending,
    };
    if csr {
        let o = offset_of!(KernelArgs, main_csr);
        let rp = fx.load_i64(args, o + offset_of!(CsrView, row_ptr))?;
        let ci = fx.load_i64(args, o + offset_of!(CsrView, col_idx))?;
        let va = fx.load_i64(args, o + offset_of!(CsrView, values))?;
        fx.for_range(rl, ru, &mut |fx, i| {
            let pa = fx.elem_addr(rp, i);
            let p0 = fx.b.ins().load(types::I64, mem(), pa, 0);
            let p1 = fx.b.ins().load(types::I64, mem(), pa, 8);
            let idx_off = fx.b.ins().ishl_imm_u(p0, 2);
            let sp = Sp {
                vals: fx.elem_addr(va, p0),
                idx: fx.iadd(ci, idx_off),
                nnz: fx.isub(p1, p0),
            };
            let mrow_off = em.par(fx, P_MROW);
            let mrow = fx.elem_addr(em.scratch, mrow_off);
            // Scatter the row (and clear it afterwards) where a reader needs it dense.
            if info.needs_dense_main {
                prims::scatter(fx, sp.vals, sp.idx, sp.nnz, mrow, false)?;
            }
            em.row(
                fx,
                i,
                RV::V {
                    p: mrow,
                    len: em.n,
                    sp: Some(sp),
                },
                None,
            )?;
            if info.needs_dense_main {
                prims::scatter(fx, sp.vals, sp.idx, sp.nnz, mrow, true)?;
            }
            Ok(())
        })?;
    } else if let Some((d, stride, row0)) = main_dense {
        let dense_row = |p: Value| RV::V {
            p,
            len: em.n,
            sp: None,
        };
        if info.hoisted.contains(&true) {
            // Blocks of `ROW_BLOCK` rows (the last one shorter): the block's hoisted products
            // by the block primitive, then its rows, as the LLVM backend's dense entry.
            let span = fx.isub(ru, rl);
            let padded = fx.b.ins().iadd_imm_s(span, ROW_BLOCK as i64 - 1);
            let blocks = fx.b.ins().udiv_imm_u(padded, ROW_BLOCK as i64);
            let zero = fx.iconst(0);
            fx.for_range(zero, blocks, &mut |fx, bi| {
                let first = fx.b.ins().imul_imm_u(bi, ROW_BLOCK as i64);
                let i0 = fx.iadd(rl, first);
                let left = fx.isub(ru, i0);
                let blk = fx.iconst(ROW_BLOCK as i64);
                let nb = fx.b.ins().umin(left, blk);
                let r = fx.isub(i0, row0);
                let at = fx.imul(r, stride);
                let x0 = fx.elem_addr(d, at);
                em.hoist(fx, x0, stride, nb)?;
                let zero = fx.iconst(0);
                fx.for_range(zero, nb, &mut |fx, q| {
                    let i = fx.iadd(i0, q);
                    let at = fx.imul(q, stride);
                    let base = fx.elem_addr(x0, at);
                    em.row(fx, i, dense_row(base), Some(q))
                })
            })?;
        } else {
            fx.for_range(rl, ru, &mut |fx, i| {
                let r = fx.isub(i, row0);
                let at = fx.imul(r, stride);
                let base = fx.elem_addr(d, at);
                em.row(fx, i, dense_row(base), None)
            })?;
        }
        if let Some(pd) = em.pending {
            let cnt = fx.b.use_var(pd.count);
            let some = fx.b.ins().icmp_imm_u(IntCC::NotEqual, cnt, 0);
            let out_node = info.plan.outputs[0];
            fx.if_then(some, &mut |fx| em.flush_outer(fx, pd, out_node))?;
        }
    }
    if let Some([s, c]) = em.kahan {
        let (s, c) = (fx.b.use_var(s), fx.b.use_var(c));
        fx.b.ins().store(mem(), s, out, 0);
        fx.b.ins().store(mem(), c, out, 8);
    }
    let total = fx.b.use_var(nnz);
    fx.b.ins().return_(&[total]);
    Ok(())
}
