//! The Row entry points: the loop over rows `[rl, ru)` of a dense or CSR main input, in
//! blocks of [`ROW_BLOCK`] rows where that saves passes over cached data.

use super::*;

/// Emits one entry point: `lafuse_row_csr` (a CSR main input) when `csr`, else
/// `lafuse_row_dense`. Each goes into its own module (the CSR one on first use), so a
/// compilation pays machine code for the entry it runs only.
pub(crate) fn emit<'c>(
    ctx: &'c Context,
    module: &Module<'c>,
    info: &RowInfo,
    csr: bool,
) -> Result<(), CodegenError> {
    let prims = emit_prims(ctx, module, info)?;
    emit_entry(ctx, module, info, &prims, csr)
}

pub(super) fn emit_entry<'c>(
    ctx: &'c Context,
    module: &Module<'c>,
    info: &RowInfo,
    prims: &Prims<'c>,
    csr: bool,
) -> Result<(), CodegenError> {
    let i64t = ctx.i64_type();
    let name = if csr {
        "lafuse_row_csr"
    } else {
        "lafuse_row_dense"
    };
    let (mut fx, args, rl, ru) = declare_entry(ctx, module, name)?;
    let pf64 = f64_ptr(ctx).ptr_type(AddressSpace::default());
    let pi64 = i64t.ptr_type(AddressSpace::default());
    let field = |fx: &Fx<'_, 'c>, off: usize, ty| llvm::load_field(ctx, &fx.b, args, off, ty);
    let out = field(&fx, offset_of!(KernelArgs, out), pf64)?.into_pointer_value();
    let n = field(&fx, offset_of!(KernelArgs, cols), pi64)?.into_int_value();
    let scratch = field(&fx, offset_of!(RowArgs, scratch), pf64)?.into_pointer_value();
    let pp = field(
        &fx,
        offset_of!(RowArgs, params),
        pi64.ptr_type(AddressSpace::default()),
    )?
    .into_pointer_value();
    let num_params = P_NODE0 + PER_NODE * info.plan.nodes.len();
    let params = (0..num_params)
        .map(|k| Ok(load(&fx.b, gep(&fx.b, pp, fx.i64c(k as u64))?)?.into_int_value()))
        .collect::<Result<Vec<_>, CodegenError>>()?;
    let used: Vec<bool> = info
        .inputs
        .iter()
        .map(|u| !matches!(u, RowInput::Unused | RowInput::Main))
        .collect();
    let ins = load_inputs(&fx, args, &used)?;
    let nnz = fx.slot(i64t.into())?;
    fx.store(nnz, fx.i64c(0))?;
    let kahan = if info.kind == RowKind::FullAgg {
        let s = [fx.slot(fx.vty(1).into())?, fx.slot(fx.vty(1).into())?];
        fx.store(s[0], load_vec(&fx.b, fx.vty(1), out, fx.i64c(0))?)?;
        fx.store(s[1], load_vec(&fx.b, fx.vty(1), out, fx.i64c(1))?)?;
        Some(s)
    } else {
        None
    };
    let main_dense = if csr {
        None
    } else {
        let o = offset_of!(KernelArgs, main);
        let d = field(&fx, o + offset_of!(DenseView, data), pf64)?.into_pointer_value();
        let stride = field(&fx, o + offset_of!(DenseView, cols), pi64)?.into_int_value();
        let row0 = field(&fx, o + offset_of!(DenseView, row0), pi64)?.into_int_value();
        Some((d, stride, row0))
    };
    let pending = match main_dense {
        Some((data, stride, row0)) if info.defer_outer => {
            let count = fx.slot(i64t.into())?;
            fx.store(count, fx.i64c(0))?;
            let first = fx.slot(i64t.into())?;
            fx.store(first, rl)?;
            let bs = gep(&fx.b, scratch, params[P_PEND])?;
            Some(Pending {
                count,
                first,
                bs,
                data,
                row0,
                stride,
            })
        }
        _ => None,
    };
    let em = Em {
        info,
        prims,
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
        let (rp, ci, va) = load_main_csr(&fx, args)?;
        let mrow = gep(&fx.b, scratch, em.par(P_MROW))?;
        fx.for_range(rl, ru, &mut |fx, i| {
            let p0 = load(&fx.b, gep(&fx.b, rp, i)?)?.into_int_value();
            let p1 = load(&fx.b, gep(&fx.b, rp, fx.add(i, fx.i64c(1))?)?)?.into_int_value();
            let sp = Sp {
                vals: gep(&fx.b, va, p0)?,
                idx: gep(&fx.b, ci, p0)?,
                nnz: fx.sub(p1, p0)?,
            };
            // Scatter the row (and clear it afterwards) where a reader needs it dense.
            if info.needs_dense_main {
                sp.scatter(fx, mrow, false)?;
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
                sp.scatter(fx, mrow, true)?;
            }
            Ok(())
        })?;
    } else if let Some((d, stride, row0)) = main_dense {
        let dense_row = |base: PointerValue<'c>| RV::V {
            p: base,
            len: em.n,
            sp: None,
        };
        if info.hoisted.contains(&true) {
            // Blocks of `ROW_BLOCK` rows (the last one shorter): the block's hoisted products,
            // then its rows. One copy of the row body serves full and short blocks.
            let blk = fx.i64c(ROW_BLOCK);
            let blocks =
                fx.b.build_int_unsigned_div(
                    fx.add(fx.sub(ru, rl)?, fx.i64c(ROW_BLOCK - 1))?,
                    blk,
                    "blocks",
                )
                .map_err(ierr)?;
            fx.for_range(fx.i64c(0), blocks, &mut |fx, bi| {
                let i0 = fx.add(rl, fx.mul(bi, blk)?)?;
                let left = fx.sub(ru, i0)?;
                let short =
                    fx.b.build_int_compare(IntPredicate::ULT, left, blk, "short")
                        .map_err(ierr)?;
                let nb =
                    fx.b.build_select(short, left, blk, "nb")
                        .map_err(ierr)?
                        .into_int_value();
                let x0 = gep(&fx.b, d, fx.mul(fx.sub(i0, row0)?, stride)?)?;
                em.hoist(fx, x0, stride, nb)?;
                fx.for_range(fx.i64c(0), nb, &mut |fx, q| {
                    let i = fx.add(i0, q)?;
                    let base = gep(&fx.b, x0, fx.mul(q, stride)?)?;
                    em.row(fx, i, dense_row(base), Some(q))
                })
            })?;
        } else {
            fx.for_range(rl, ru, &mut |fx, i| {
                let base = gep(&fx.b, d, fx.mul(fx.sub(i, row0)?, stride)?)?;
                em.row(fx, i, dense_row(base), None)
            })?;
        }
        if let Some(pd) = em.pending {
            let out_node = info.plan.outputs[0];
            let cnt = fx.load_i64(pd.count)?;
            let some =
                fx.b.build_int_compare(IntPredicate::NE, cnt, fx.i64c(0), "some")
                    .map_err(ierr)?;
            if_else(
                &mut fx,
                some,
                &mut |fx| em.flush_outer(fx, pd, out_node),
                &mut |_| Ok(()),
            )?;
        }
    }
    if let Some([s, c]) = em.kahan {
        store_vec(&fx.b, out, fx.i64c(0), fx.load_v(s)?)?;
        store_vec(&fx.b, out, fx.i64c(1), fx.load_v(c)?)?;
    }
    let total = fx.load_i64(nnz)?;
    fx.b.build_return(Some(&total)).map_err(ierr)?;
    Ok(())
}
