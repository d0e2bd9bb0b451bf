//! The device-side fold of partial rows: the second kernel of a module whose output is summed
//! over rows.

use super::kx::{declare_named, pick, unrolled};
use super::FOLD_ENTRY;
use crate::backend::CodegenError;
use crate::native::expr::ierr;
use crate::native::llvm::load_vec;
use inkwell::context::Context;
use inkwell::module::Module;
use inkwell::IntPredicate;
use lafuse_skeletons::abi::{DenseView, KernelArgs};
use lafuse_skeletons::AggKind;
use std::mem::offset_of;

/// The second kernel of a module whose output is summed over rows (Cell column aggregates, Row
/// column sums): `lafuse_fold_columns` folds partial rows (`out`, `rows` of them, `cols` wide,
/// as (value, correction) pairs) column by column in partial order, a thread per column and
/// group of rows: grid row `g` of `G` folds rows `[g * ceil(rows / G), ...)` into the pair at
/// `main.data[2 * (g * cols + j)]`. The skeleton runs it twice (groups, then the groups' pairs
/// as one group), a fixed two-level order, so only the final row leaves the device.
pub(super) fn emit_fold_columns<'c>(
    ctx: &'c Context,
    module: &Module<'c>,
    agg: AggKind,
) -> Result<(), CodegenError> {
    let mut k = declare_named(ctx, module, FOLD_ENTRY)?;
    let parts = k.ptr_field(offset_of!(KernelArgs, out))?;
    let count = k.i64_field(offset_of!(KernelArgs, rows))?;
    let n = k.i64_field(offset_of!(KernelArgs, cols))?;
    let dest = k.ptr_field(offset_of!(KernelArgs, main) + offset_of!(DenseView, data))?;
    let threads = k.threads();
    let j = k.fx.add(k.fx.mul(k.bid, threads)?, k.tid)?;
    let (g, groups) = (k.bidy, k.nby);
    let per =
        k.fx.b
            .build_int_unsigned_div(
                k.fx.sub(k.fx.add(count, groups)?, k.fx.i64c(1))?,
                groups,
                "per",
            )
            .map_err(ierr)?;
    let lo = k.fx.mul(g, per)?;
    let hi_raw = k.fx.add(lo, per)?;
    let over =
        k.fx.b
            .build_int_compare(IntPredicate::UGT, hi_raw, count, "over")
            .map_err(ierr)?;
    let hi =
        k.fx.b
            .build_select(over, count, hi_raw, "hi")
            .map_err(ierr)?
            .into_int_value();
    let inside = k.ult(j, n)?;
    let acc = k.acc(agg)?;
    k.when(inside, &mut |k| {
        unrolled(
            k,
            lo,
            hi,
            1,
            &mut |k, p| {
                let at = k.fx.mul(k.fx.add(k.fx.mul(p, n)?, j)?, k.fx.i64c(2))?;
                let v = load_vec(&k.fx.b, k.fx.vty(1), parts, at)?;
                let c = load_vec(&k.fx.b, k.fx.vty(1), parts, k.fx.add(at, k.fx.i64c(1))?)?;
                Ok(vec![v, c])
            },
            &mut |k, vc| {
                let (v, c) = (vc[0], vc[1]);
                let fx = &k.fx;
                match acc.agg {
                    AggKind::Min | AggKind::Max => {
                        let cur = fx.load_v(acc.s)?;
                        fx.store(acc.s, pick(fx, acc.agg, cur, v)?)
                    }
                    // Kahan::merge: add the other sum, then its negated correction.
                    AggKind::Sum | AggKind::SumSq => {
                        fx.kahan_add(acc.s, acc.c, v)?;
                        let neg = fx.b.build_float_neg(c, "n").map_err(ierr)?;
                        fx.kahan_add(acc.s, acc.c, neg)
                    }
                }
            },
        )?;
        let slot = k.fx.add(k.fx.mul(g, n)?, j)?;
        k.write_pair(dest, slot, k.fx.load_v(acc.s)?, k.fx.load_v(acc.c)?)
    })?;
    k.fx.b.build_return(None).map_err(ierr)?;
    Ok(())
}
