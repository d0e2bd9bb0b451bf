//! Entry points of Outer operators: per non-zero `x_ij` of the driver (CSR non-zeros, or the
//! non-zero cells of a dense driver), the dot product `u_i · v_j` (an always-inline vector
//! primitive with independent accumulators combined in a fixed order), the body, then the
//! final step: write `G_ij`, a Kahan sum, or a scaled-row add (`out_i += G_ij · w_j` for
//! Right, `out_j += G_ij · wt_i` for Left) through an always-inline `axpy` primitive. Where
//! the body reads nothing per cell but the driver and the dot product, the CSR entry takes a
//! row's non-zeros `W` at a time: `W` dot products (four per pass over `u_i`), then the body
//! and a cell-wise store or Kahan sum on `W` lanes ([`lane_parallel`]).

use super::cell::{LANES, W};
use super::expr::{
    declare_entry, declare_primitive, ierr, if_else, load_inputs, load_main_csr, prefetch_element,
    At, Body, Fx, InputPtrs,
};
use super::llvm::{self, f64_ptr, gep, load, load_vec, store_vec};
use super::CodegenError;
pub(crate) use crate::plan_info::OuterInputs;
use crate::plan_info::{self, lane_parallel};
use inkwell::context::Context;
use inkwell::module::Module;
use inkwell::values::{FloatValue, FunctionValue, IntValue, PointerValue, VectorValue};
use inkwell::{AddressSpace, FloatPredicate, IntPredicate};
use lafuse_compiler::fusion::cplan::CPlan;
use lafuse_skeletons::abi::{DenseView, KernelArgs};
use lafuse_skeletons::OuterKind;
use std::mem::offset_of;

/// How far ahead of a streamed dot-product operand its cache lines are prefetched.
pub(crate) const STREAM_PREFETCH_BYTES: u64 = 2048;

/// Independent `W`-lane accumulators per dot product: a fused multiply-add waits only on the
/// one `ACCS` steps earlier, which hides its latency.
const ACCS: usize = 4;

/// Emits, at the builder's position, the dot products `u · vs[t]` over `k` elements in one
/// pass over `u`, each in a fixed order that depends on `k` only (so results are
/// deterministic and independent of the thread count): blocks of `ACCS * W` elements go to
/// `ACCS` vector accumulators (accumulator `a` takes elements `a*W..(a+1)*W` of each block),
/// the remaining whole `W`-blocks to accumulator 0, the last `k % W` elements to a scalar;
/// the accumulators are combined as `(a0 + a1) + (a2 + a3)`, its lanes by a fixed halving
/// tree, and the scalar tail added last. Each step is a fused multiply-add (one rounding,
/// as BLAS kernels do).
///
/// `stream_u`: `u` streams from memory (a row of the main input, read once), so each block
/// also prefetches the cache lines [`STREAM_PREFETCH_BYTES`] ahead of it, into the next rows.
pub(crate) fn dot_products<'c>(
    fx: &mut Fx<'_, 'c>,
    u: PointerValue<'c>,
    vs: &[PointerValue<'c>],
    k: IntValue<'c>,
    stream_u: bool,
) -> Result<Vec<FloatValue<'c>>, CodegenError> {
    let vw = fx.vty(W);
    let mut acc = Vec::with_capacity(vs.len());
    let mut tail = Vec::with_capacity(vs.len());
    for _ in vs {
        let mut a = Vec::with_capacity(ACCS);
        for _ in 0..ACCS {
            let s = fx.slot(vw.into())?;
            fx.store(s, fx.splat_const(0.0, W))?;
            a.push(s);
        }
        acc.push(a);
        let t = fx.slot(fx.vty(1).into())?;
        fx.store(t, fx.splat_const(0.0, 1))?;
        tail.push(t);
    }
    let c = fx.slot(fx.ctx.i64_type().into())?;
    fx.store(c, fx.i64c(0))?;
    let wl = u64::from(W);
    fx.for_slot(c, k, ACCS as u64 * wl, &mut |fx, ci| {
        if stream_u {
            // One prefetch per 64-byte line (8 doubles) of the block, the distance ahead (the
            // address may lie past the end of the matrix; only prefetched).
            for line in 0..(ACCS as u64 * wl / 8) {
                let ahead = fx.add(ci, fx.i64c(STREAM_PREFETCH_BYTES / 8 + line * 8))?;
                prefetch_element(fx, u, ahead, 3)?;
            }
        }
        for a in 0..ACCS {
            let off = fx.add(ci, fx.i64c(a as u64 * wl))?;
            let x = load_vec(&fx.b, vw, u, off)?;
            for (v, slots) in vs.iter().zip(&acc) {
                let y = load_vec(&fx.b, vw, *v, off)?;
                let cur = fx.load_v(slots[a])?;
                fx.store(slots[a], fx.fma(x, y, cur)?)?;
            }
        }
        Ok(())
    })?;
    fx.for_slot(c, k, wl, &mut |fx, ci| {
        let x = load_vec(&fx.b, vw, u, ci)?;
        for (t, v) in vs.iter().enumerate() {
            let y = load_vec(&fx.b, vw, *v, ci)?;
            let cur = fx.load_v(acc[t][0])?;
            fx.store(acc[t][0], fx.fma(x, y, cur)?)?;
        }
        Ok(())
    })?;
    fx.for_slot(c, k, 1, &mut |fx, ci| {
        let x = load_vec(&fx.b, fx.vty(1), u, ci)?;
        for (t, v) in vs.iter().enumerate() {
            let y = load_vec(&fx.b, fx.vty(1), *v, ci)?;
            let cur = fx.load_v(tail[t])?;
            fx.store(tail[t], fx.fma(x, y, cur)?)?;
        }
        Ok(())
    })?;
    let mut out = Vec::with_capacity(vs.len());
    for t in 0..vs.len() {
        let a: Vec<VectorValue<'c>> = acc[t]
            .iter()
            .map(|s| fx.load_v(*s))
            .collect::<Result<_, _>>()?;
        let s = fx.fadd(fx.fadd(a[0], a[1])?, fx.fadd(a[2], a[3])?)?;
        let tv =
            fx.b.build_extract_element(fx.load_v(tail[t])?, fx.i64c(0), "t")
                .map_err(ierr)?
                .into_float_value();
        out.push(
            fx.b.build_float_add(sum_lanes(fx, s)?, tv, "r")
                .map_err(ierr)?,
        );
    }
    Ok(out)
}

/// The sum of a vector's lanes as a halving tree (lane l += lane l + h for h = W/2, W/4,
/// ..., 1): the fixed order every dot product of the generated code combines its lanes in.
pub(crate) fn sum_lanes<'c>(
    fx: &Fx<'_, 'c>,
    v: VectorValue<'c>,
) -> Result<FloatValue<'c>, CodegenError> {
    let mut lanes: Vec<FloatValue<'c>> = (0..v.get_type().get_size())
        .map(|l| {
            fx.b.build_extract_element(v, fx.i64c(u64::from(l)), "l")
                .map_err(ierr)
                .map(|x| x.into_float_value())
        })
        .collect::<Result<_, _>>()?;
    let mut h = lanes.len() / 2;
    while h > 0 {
        for l in 0..h {
            lanes[l] =
                fx.b.build_float_add(lanes[l], lanes[l + h], "h")
                    .map_err(ierr)?;
        }
        h /= 2;
    }
    Ok(lanes[0])
}

/// Emits `double lafuse_dot(double* u, double* v, i64 k)` ([`dot_products`] for one `v`),
/// always-inline so each per-non-zero loop holds its own copy.
fn emit_dot<'c>(ctx: &'c Context, module: &Module<'c>) -> Result<FunctionValue<'c>, CodegenError> {
    let pf = f64_ptr(ctx);
    let mut fx = declare_primitive(
        ctx,
        module,
        "lafuse_dot",
        &[pf.into(), pf.into(), ctx.i64_type().into()],
        Some(ctx.f64_type().into()),
    );
    let u = fx.param(0)?.into_pointer_value();
    let v = fx.param(1)?.into_pointer_value();
    let k = fx.param(2)?.into_int_value();
    let r = dot_products(&mut fx, u, &[v], k, false)?;
    fx.b.build_return(Some(&r[0])).map_err(ierr)?;
    Ok(fx.func)
}

/// Emits `void lafuse_axpy(double* o, double* w, double g, i64 len)`: `o[c] += g * w[c]`
/// (always-inline).
fn emit_axpy<'c>(ctx: &'c Context, module: &Module<'c>) -> Result<FunctionValue<'c>, CodegenError> {
    let pf = f64_ptr(ctx);
    let mut fx = declare_primitive(
        ctx,
        module,
        "lafuse_axpy",
        &[
            pf.into(),
            pf.into(),
            ctx.f64_type().into(),
            ctx.i64_type().into(),
        ],
        None,
    );
    let o = fx.param(0)?.into_pointer_value();
    let w_ = fx.param(1)?.into_pointer_value();
    let g = fx.param(2)?.into_float_value();
    let len = fx.param(3)?.into_int_value();
    let c = fx.slot(ctx.i64_type().into())?;
    fx.store(c, fx.i64c(0))?;
    for w in [W, 1] {
        fx.for_slot(c, len, w as u64, &mut |fx, ci| {
            let gv = fx.splat(g, w)?;
            let a = load_vec(&fx.b, fx.vty(w), o, ci)?;
            let b = load_vec(&fx.b, fx.vty(w), w_, ci)?;
            store_vec(&fx.b, o, ci, fx.fadd(a, fx.fmul(gv, b)?)?)
        })?;
    }
    fx.b.build_return(None).map_err(ierr)?;
    Ok(fx.func)
}

struct St<'c> {
    out: PointerValue<'c>,
    k: IntValue<'c>,
    k2: IntValue<'c>,
    ins: InputPtrs<'c>,
    acc: [PointerValue<'c>; 2],
    /// FullAgg's `W`-lane Kahan sum and correction, for the non-zeros taken `W` at a time
    /// (partial lanes `0..W`; `acc` is lane `W`).
    accv: [PointerValue<'c>; 2],
    /// The cell-wise output's non-zeros, counted by the dense entries only: the skeleton
    /// compacts a CSR driver's cell-wise output and counts it there, so the CSR entry returns
    /// 0 and counts nothing per non-zero.
    nnz: PointerValue<'c>,
    dot: FunctionValue<'c>,
    axpy: FunctionValue<'c>,
}

/// Which cells an Outer entry point visits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Visit {
    /// The non-zeros of a dense driver (`lafuse_outer_dense`).
    DenseNonZeros,
    /// The non-zeros of a CSR driver (`lafuse_outer_csr`).
    CsrNonZeros,
    /// Every cell of a dense driver (`lafuse_outer_every_cell`; a sparse driver is densified
    /// block by block): for calls whose body may be NaN or infinite where the driver is zero,
    /// so that `0 * NaN` is NaN there as in unfused execution.
    EveryCell,
    /// Every cell of a block of rows and columns of a dense (or densified) driver, with the
    /// block's dot products `u_i · v_j` computed by the skeleton as one tile of
    /// `U %*% t(V)` (`lafuse_outer_tiles`; see [`emit_tiles_entry`]).
    Tiles,
}

impl Visit {
    /// The entry point's name.
    pub(crate) fn entry_name(self) -> &'static str {
        match self {
            Visit::DenseNonZeros => "lafuse_outer_dense",
            Visit::CsrNonZeros => "lafuse_outer_csr",
            Visit::EveryCell => "lafuse_outer_every_cell",
            Visit::Tiles => "lafuse_outer_tiles",
        }
    }
}

/// Emits one entry point, the one `visit` names. Each goes into its own module (all but the
/// dense one on first use), so a compilation pays machine code for the entry it runs only.
#[allow(clippy::too_many_arguments)]
pub(crate) fn emit<'c>(
    ctx: &'c Context,
    module: &Module<'c>,
    plan: &CPlan,
    kind: OuterKind,
    oi: &OuterInputs,
    used: &[bool],
    visit: Visit,
) -> Result<(), CodegenError> {
    if visit == Visit::Tiles {
        return emit_tiles_entry(ctx, module, plan, kind, oi, used);
    }
    let dot = emit_dot(ctx, module)?;
    let axpy = emit_axpy(ctx, module)?;
    emit_entry(ctx, module, plan, kind, oi, used, visit, dot, axpy)
}

/// Emits `lafuse_outer_tiles`: the body at every cell of rows `[rl, ru)` and columns
/// `[col_lo, col_hi)` of a dense (or densified) driver, `W` columns at a time, reading
/// `u_i · v_j` from the skeleton's tile of `U %*% t(V)` instead of computing it. The dot
/// products, which are most of an Outer operator's arithmetic over a dense driver, are then
/// a blocked matrix multiply at its speed, and the tile, never the whole product, is all that
/// is materialized.
///
/// As at every cell elsewhere, a zero of the driver gives `0 * body` (0, or NaN where the body
/// is not finite), the unfused value. A full sum adds into the partial's `W` vector lanes
/// (whole `W`-blocks of a row) and its scalar lane (the row's last `< W` cells), both Kahan
/// (first without resets, and again with them where the tile's sum ended up not finite);
/// every other kind writes `G_ij` at `out[(i - rl) * out_stride + (j - col_lo)]`: the
/// skeleton points `out` into the cell-wise output, or at a tile of `G` that it multiplies by
/// the final product's matrix itself.
fn emit_tiles_entry<'c>(
    ctx: &'c Context,
    module: &Module<'c>,
    plan: &CPlan,
    kind: OuterKind,
    oi: &OuterInputs,
    used: &[bool],
) -> Result<(), CodegenError> {
    // Inlined for the W-lane loop only: a row's last (< W) cells call the shared library's
    // one-lane functions, whose inlined copies (each `log` holds its method twice, ordinary
    // lanes and general) took a fifth of the operator's compile time (90-116 ms against
    // 68-69 at 2000², `--stats`).
    super::math::define_inline(ctx, module, &[W])?;
    let i64t = ctx.i64_type();
    let (mut fx, args, rl, ru) = declare_entry(ctx, module, Visit::Tiles.entry_name())?;
    let pf64 = f64_ptr(ctx).ptr_type(AddressSpace::default());
    let pi64 = i64t.ptr_type(AddressSpace::default());
    let field = |fx: &Fx<'_, 'c>, off: usize, ty| llvm::load_field(ctx, &fx.b, args, off, ty);
    let int = |fx: &Fx<'_, 'c>, off: usize| field(fx, off, pi64).map(|v| v.into_int_value());
    let out = field(&fx, offset_of!(KernelArgs, out), pf64)?.into_pointer_value();
    let tile = field(&fx, offset_of!(KernelArgs, tile), pf64)?.into_pointer_value();
    let tile_stride = int(&fx, offset_of!(KernelArgs, tile_stride))?;
    let col_lo = int(&fx, offset_of!(KernelArgs, col_lo))?;
    let col_hi = int(&fx, offset_of!(KernelArgs, col_hi))?;
    let out_stride = int(&fx, offset_of!(KernelArgs, out_stride))?;
    let o = offset_of!(KernelArgs, main);
    let d = field(&fx, o + offset_of!(DenseView, data), pf64)?.into_pointer_value();
    let stride = int(&fx, o + offset_of!(DenseView, cols))?;
    let row0 = int(&fx, o + offset_of!(DenseView, row0))?;
    let ins = load_inputs(&fx, args, used)?;
    let sum = kind == OuterKind::FullAgg;
    let wl = u64::from(W);
    // The single Sum partial: vector lanes at 0..W, corrections at LANES..LANES + W; the
    // scalar lane at W, its correction at LANES + W.
    let accv = [fx.slot(fx.vty(W).into())?, fx.slot(fx.vty(W).into())?];
    let acc = [fx.slot(fx.vty(1).into())?, fx.slot(fx.vty(1).into())?];
    // The partial is read into the slots at the start (and again for a re-run with resets,
    // below) and written back once, at the end.
    let load_partial = |fx: &Fx<'_, 'c>| -> Result<(), CodegenError> {
        for (slot, at) in [
            (accv[0], 0),
            (accv[1], LANES as u64),
            (acc[0], wl),
            (acc[1], LANES as u64 + wl),
        ] {
            let w = if at % (LANES as u64) == 0 { W } else { 1 };
            fx.store(slot, load_vec(&fx.b, fx.vty(w), out, fx.i64c(at))?)?;
        }
        Ok(())
    };
    if sum {
        load_partial(&fx)?;
    }
    let j = fx.slot(i64t.into())?;
    // Every cell of the tile's rows; a full sum adds with compensated steps that reset a
    // correction that is not finite where `resets`, else without the reset.
    let rows = |fx: &mut Fx<'_, 'c>, resets: bool| -> Result<(), CodegenError> {
        fx.for_range(rl, ru, &mut |fx, i| {
            let ti = fx.sub(i, rl)?;
            let main_row = fx.mul(fx.sub(i, row0)?, stride)?;
            let tile_row = fx.mul(ti, tile_stride)?;
            let out_row = fx.mul(ti, out_stride)?;
            fx.store(j, col_lo)?;
            for w in [W, 1] {
                fx.for_slot(j, col_hi, u64::from(w), &mut |fx, jv| {
                    let jt = fx.sub(jv, col_lo)?;
                    // The main view starts at the tile's first column (`col_lo`).
                    let x = load_vec(&fx.b, fx.vty(w), d, fx.add(main_row, jt)?)?;
                    if w == W {
                        // A dense driver's row segment in a tile is short (2 KiB) and the
                        // next one a whole row of it away: the hardware prefetcher starts
                        // each row with misses, so the next row's line is asked for a row
                        // ahead (8000², 5 rounds: 181-197 -> 174-187 ms an evaluation).
                        prefetch_element(fx, d, fx.add(fx.add(main_row, stride)?, jt)?, 3)?;
                    }
                    let dots = load_vec(&fx.b, fx.vty(w), tile, fx.add(tile_row, jt)?)?;
                    let mut body = Body::new(
                        plan,
                        &ins,
                        At {
                            i,
                            j: jv,
                            w,
                            main: x,
                        },
                    );
                    body.outer_dot = Some(dots);
                    if sum {
                        body.summed_only(oi.g);
                    }
                    let g = body.emit(fx, oi.g, false)?;
                    // `0 * body` at the driver's zeros (see `element`).
                    let g = if sum && plan_info::multiplies_by_main(plan, oi.g) {
                        g
                    } else {
                        let nz = fx.fcmp(FloatPredicate::UNE, x, fx.splat_const(0.0, w))?;
                        let masked = fx.fmul(g, fx.splat_const(0.0, w))?;
                        fx.select(nz, g, masked)?
                    };
                    if sum {
                        let (s, c) = if w == W {
                            (accv[0], accv[1])
                        } else {
                            (acc[0], acc[1])
                        };
                        fx.kahan_add_resetting(s, c, g, resets)
                    } else {
                        store_vec(&fx.b, out, fx.add(out_row, jt)?, g)
                    }
                })?;
            }
            Ok(())
        })
    };
    if sum {
        // Without resets first: the loop-carried chain is then the compensated step's four
        // adds, not a compare and a blend after them (8000², with the prefetch: 174-187 ->
        // 168-170 ms). A sum that ended up not finite runs the tile again from the partial
        // with resets, which only then could have changed anything
        // ([`Fx::kahan_step_unchecked`]): the same bits either way.
        rows(&mut fx, false)?;
        let any_not_finite = fx.any_lane_not_finite([accv[0], acc[0]])?;
        if_else(
            &mut fx,
            any_not_finite,
            &mut |fx| {
                load_partial(fx)?;
                rows(fx, true)
            },
            &mut |_| Ok(()),
        )?;
        store_vec(&fx.b, out, fx.i64c(0), fx.load_v(accv[0])?)?;
        store_vec(&fx.b, out, fx.i64c(LANES as u64), fx.load_v(accv[1])?)?;
        store_vec(&fx.b, out, fx.i64c(wl), fx.load_v(acc[0])?)?;
        store_vec(&fx.b, out, fx.i64c(LANES as u64 + wl), fx.load_v(acc[1])?)?;
    } else {
        rows(&mut fx, true)?;
    }
    fx.b.build_return(Some(&fx.i64c(0))).map_err(ierr)?;
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn emit_entry<'c>(
    ctx: &'c Context,
    module: &Module<'c>,
    plan: &CPlan,
    kind: OuterKind,
    oi: &OuterInputs,
    used: &[bool],
    visit: Visit,
    dot: FunctionValue<'c>,
    axpy: FunctionValue<'c>,
) -> Result<(), CodegenError> {
    let i64t = ctx.i64_type();
    let (mut fx, args, rl, ru) = declare_entry(ctx, module, visit.entry_name())?;
    let pf64 = f64_ptr(ctx).ptr_type(AddressSpace::default());
    let pi64 = i64t.ptr_type(AddressSpace::default());
    let field = |fx: &Fx<'_, 'c>, off: usize, ty| llvm::load_field(ctx, &fx.b, args, off, ty);
    let out = field(&fx, offset_of!(KernelArgs, out), pf64)?.into_pointer_value();
    let n = field(&fx, offset_of!(KernelArgs, cols), pi64)?.into_int_value();
    let k = field(&fx, offset_of!(KernelArgs, k), pi64)?.into_int_value();
    let k2 = field(&fx, offset_of!(KernelArgs, k2), pi64)?.into_int_value();
    let ins = load_inputs(&fx, args, used)?;
    let acc = [fx.slot(fx.vty(1).into())?, fx.slot(fx.vty(1).into())?];
    let accv = [fx.slot(fx.vty(W).into())?, fx.slot(fx.vty(W).into())?];
    let wl = W as u64;
    let lanes = visit == Visit::CsrNonZeros && lane_parallel(plan, kind, oi);
    if kind == OuterKind::FullAgg {
        // The single Sum partial: the vector lanes at 0..W with their corrections at
        // LANES..LANES + W (used by `W`-lane batches only), the scalar lane at W with its
        // correction at LANES + W.
        if lanes {
            fx.store(accv[0], load_vec(&fx.b, fx.vty(W), out, fx.i64c(0))?)?;
            fx.store(
                accv[1],
                load_vec(&fx.b, fx.vty(W), out, fx.i64c(LANES as u64))?,
            )?;
        }
        fx.store(acc[0], load_vec(&fx.b, fx.vty(1), out, fx.i64c(wl))?)?;
        fx.store(
            acc[1],
            load_vec(&fx.b, fx.vty(1), out, fx.i64c(LANES as u64 + wl))?,
        )?;
    }
    let nnz = fx.slot(i64t.into())?;
    fx.store(nnz, fx.i64c(0))?;
    let st = St {
        out,
        k,
        k2,
        ins,
        acc,
        accv,
        nnz,
        dot,
        axpy,
    };
    if visit == Visit::CsrNonZeros {
        let (rp, ci, va) = load_main_csr(&fx, args)?;
        // The end of this task's non-zeros: prefetching runs across row ends up to it.
        let pend = load(&fx.b, gep(&fx.b, rp, ru)?)?.into_int_value();
        fx.for_range(rl, ru, &mut |fx, i| {
            prefetch_u_row(fx, &st, oi, rp, i, ru)?;
            let p0 = load(&fx.b, gep(&fx.b, rp, i)?)?.into_int_value();
            let p1 = load(&fx.b, gep(&fx.b, rp, fx.add(i, fx.i64c(1))?)?)?.into_int_value();
            let p = fx.slot(fx.ctx.i64_type().into())?;
            fx.store(p, p0)?;
            if lanes {
                fx.for_slot(p, p1, wl, &mut |fx, p| {
                    for l in 0..wl {
                        let ahead = fx.add(p, fx.i64c(wl + l))?;
                        prefetch_v_row(fx, &st, oi, ci, ahead, pend, VLines::First)?;
                    }
                    let x = load_vec(&fx.b, fx.vty(W), va, p)?;
                    elements_w(fx, plan, kind, oi, &st, i, ci, x, p)
                })?;
            }
            let p = fx.load_i64(p)?;
            fx.for_range(p, p1, &mut |fx, p| {
                let j = fx.load_index(ci, p)?;
                let ahead = fx.add(p, fx.i64c(PREFETCH_AHEAD))?;
                prefetch_v_row(fx, &st, oi, ci, ahead, pend, VLines::Whole)?;
                let x = load_vec(&fx.b, fx.vty(1), va, p)?;
                element(fx, plan, kind, oi, &st, i, j, x, p, visit)
            })
        })?;
    } else {
        let o = offset_of!(KernelArgs, main);
        let d = field(&fx, o + offset_of!(DenseView, data), pf64)?.into_pointer_value();
        let stride = field(&fx, o + offset_of!(DenseView, cols), pi64)?.into_int_value();
        let row0 = field(&fx, o + offset_of!(DenseView, row0), pi64)?.into_int_value();
        fx.for_range(rl, ru, &mut |fx, i| {
            let rowbase = fx.mul(fx.sub(i, row0)?, stride)?;
            let mut row = |fx: &mut Fx<'_, 'c>| {
                fx.for_range(fx.i64c(0), n, &mut |fx, j| {
                    let p = fx.add(fx.mul(i, n)?, j)?;
                    let x = load_vec(&fx.b, fx.vty(1), d, fx.add(rowbase, j)?)?;
                    if visit == Visit::EveryCell {
                        return element(fx, plan, kind, oi, &st, i, j, x, p, visit);
                    }
                    // Only non-zeros (NaN included) of the driver are visited.
                    let nz = fx.fcmp(FloatPredicate::UNE, x, fx.splat_const(0.0, 1))?;
                    let nz =
                        fx.b.build_extract_element(nz, fx.i64c(0), "nz")
                            .map_err(ierr)?
                            .into_int_value();
                    if_else(
                        fx,
                        nz,
                        &mut |fx| element(fx, plan, kind, oi, &st, i, j, x, p, visit),
                        &mut |_| Ok(()),
                    )
                })
            };
            if visit == Visit::EveryCell && kind == OuterKind::FullAgg {
                // A NaN sum stays NaN: once this task's sum is NaN (a non-finite body, at a
                // zero of the driver or not), its remaining rows cannot change the result.
                // (Visiting every cell of a large sparse driver is the cost of exactness; this
                // ends it at the first NaN.)
                let sum = fx.load_v(st.acc[0])?;
                let nan = fx.fcmp(FloatPredicate::UNO, sum, sum)?;
                let nan =
                    fx.b.build_extract_element(nan, fx.i64c(0), "nan")
                        .map_err(ierr)?
                        .into_int_value();
                if_else(fx, nan, &mut |_| Ok(()), &mut row)
            } else {
                row(fx)
            }
        })?;
    }
    if kind == OuterKind::FullAgg {
        if lanes {
            store_vec(&fx.b, out, fx.i64c(0), fx.load_v(accv[0])?)?;
            store_vec(&fx.b, out, fx.i64c(LANES as u64), fx.load_v(accv[1])?)?;
        }
        store_vec(&fx.b, out, fx.i64c(wl), fx.load_v(acc[0])?)?;
        store_vec(&fx.b, out, fx.i64c(LANES as u64 + wl), fx.load_v(acc[1])?)?;
    }
    let total = fx.load_i64(nnz)?;
    fx.b.build_return(Some(&total)).map_err(ierr)?;
    Ok(())
}

/// How many non-zeros ahead the CSR loop prefetches rows of `V`: a non-zero costs a
/// dot product of `k` elements (about a hundred cycles at rank 100), and at sparsity 1e-4
/// every one of its rows comes from memory, so eight non-zeros ahead keeps several row
/// misses in flight. (Measured at 20000² and rank 100, alternating runs: 4 ahead with
/// [`PREFETCH_ROWS_AHEAD`] 2 took 0.66-0.81 ms at 1e-4, 8 with 6 took 0.61-0.68 ms; 12 with
/// 8 was no better; 1e-3 and 1e-2 unchanged.)
const PREFETCH_AHEAD: u64 = 8;

/// How many rows ahead the CSR loop prefetches rows of `U`. At low density a row of the
/// driver has one or two non-zeros, so the row of `U` is read about as often as rows of `V`
/// and its miss is as costly; `U` is read in order, but the scattered `V` reads in between
/// keep the hardware prefetcher from following it. Six rows ahead is about as far as
/// [`PREFETCH_AHEAD`] reaches at 1e-4 (one or two non-zeros a row).
const PREFETCH_ROWS_AHEAD: u64 = 6;

/// The input pointer at position `k`.
fn input_ptr<'c>(st: &St<'c>, k: usize) -> Result<PointerValue<'c>, CodegenError> {
    st.ins
        .data
        .get(k)
        .copied()
        .flatten()
        .ok_or_else(|| ierr("outer input"))
}

/// Which lines of a row of `V` a prefetch asks for.
#[derive(Clone, Copy)]
enum VLines {
    /// Every line: one non-zero at a time, where the row comes from memory.
    Whole,
    /// The first line: in `W`-lane batches, where rows of `V` are mostly cached and the
    /// hardware prefetcher follows a row once its first lines miss, while a prefetch per line
    /// of every row costs more instructions than the batch's dot products leave room for.
    First,
}

/// Prefetches the row of `V` that non-zero `pn` reads, when `pn` belongs to this task
/// (`< pend`, so the column index read stays in bounds). The columns of a CSR row are
/// scattered, so the hardware prefetcher cannot guess the next row of `V`.
fn prefetch_v_row<'c>(
    fx: &mut Fx<'_, 'c>,
    st: &St<'c>,
    oi: &OuterInputs,
    ci: PointerValue<'c>,
    pn: IntValue<'c>,
    pend: IntValue<'c>,
    lines: VLines,
) -> Result<(), CodegenError> {
    let v = input_ptr(st, oi.v)?;
    if_below(fx, pn, pend, &mut |fx| {
        let jn = fx.load_index(ci, pn)?;
        match lines {
            VLines::Whole => prefetch_row(fx, v, jn, st.k),
            VLines::First => prefetch_element(fx, v, fx.mul(jn, st.k)?, 3),
        }
    })
}

/// Prefetches the row of `U` that the row `PREFETCH_ROWS_AHEAD` after `i` will read, when
/// that row belongs to this task (`< ru`) and has non-zeros: at very low density most rows
/// have none, and prefetching every row would stream all of `U` through the cache (a cost
/// independent of nnz(X)).
fn prefetch_u_row<'c>(
    fx: &mut Fx<'_, 'c>,
    st: &St<'c>,
    oi: &OuterInputs,
    rp: PointerValue<'c>,
    i: IntValue<'c>,
    ru: IntValue<'c>,
) -> Result<(), CodegenError> {
    let u = input_ptr(st, oi.u)?;
    let inext = fx.add(i, fx.i64c(PREFETCH_ROWS_AHEAD))?;
    if_below(fx, inext, ru, &mut |fx| {
        // `inext + 1 <= ru <= rows`: both offsets are in bounds.
        let q0 = load(&fx.b, gep(&fx.b, rp, inext)?)?.into_int_value();
        let q1 = load(&fx.b, gep(&fx.b, rp, fx.add(inext, fx.i64c(1))?)?)?.into_int_value();
        if_below(fx, q0, q1, &mut |fx| prefetch_row(fx, u, inext, st.k))
    })
}

/// `if (a < b) body()` (unsigned).
fn if_below<'c>(
    fx: &mut Fx<'_, 'c>,
    a: IntValue<'c>,
    b: IntValue<'c>,
    body: &mut dyn FnMut(&mut Fx<'_, 'c>) -> Result<(), CodegenError>,
) -> Result<(), CodegenError> {
    let lt =
        fx.b.build_int_compare(IntPredicate::ULT, a, b, "ahead")
            .map_err(ierr)?;
    if_else(fx, lt, body, &mut |_| Ok(()))
}

/// Prefetches row `r` (of `k` doubles) of the row-major matrix at `base` into the cache: one
/// prefetch per 64-byte line, every eighth double, all within the row.
fn prefetch_row<'c>(
    fx: &mut Fx<'_, 'c>,
    base: PointerValue<'c>,
    r: IntValue<'c>,
    k: IntValue<'c>,
) -> Result<(), CodegenError> {
    let row = fx.mul(r, k)?;
    let c = fx.slot(fx.ctx.i64_type().into())?;
    fx.store(c, fx.i64c(0))?;
    let line = fx.i64c(8);
    let lines =
        fx.b.build_int_unsigned_div(fx.add(k, fx.i64c(7))?, line, "lines")
            .map_err(ierr)?;
    fx.for_slot(c, lines, 1, &mut |fx, l| {
        prefetch_element(fx, base, fx.add(row, fx.mul(l, line)?)?, 3)
    })
}

/// Dot products computed in one pass over a row of `U` when non-zeros are taken `W` at a
/// time: each loaded block of `u` serves this many rows of `V`, with `ACCS` accumulators
/// each (16 vector registers of the 32).
const DOTS_AT_ONCE: usize = 4;

/// `W` consecutive non-zeros `p..p + W` of row `i` (values `x`, columns at `ci`), for a
/// [`lane_parallel`] plan: their dot products, then the body and the final step on `W` lanes.
#[allow(clippy::too_many_arguments)]
fn elements_w<'c>(
    fx: &mut Fx<'_, 'c>,
    plan: &CPlan,
    kind: OuterKind,
    oi: &OuterInputs,
    st: &St<'c>,
    i: IntValue<'c>,
    ci: PointerValue<'c>,
    x: VectorValue<'c>,
    p: IntValue<'c>,
) -> Result<(), CodegenError> {
    let urow = gep(&fx.b, input_ptr(st, oi.u)?, fx.mul(i, st.k)?)?;
    let v = input_ptr(st, oi.v)?;
    let mut vrows = Vec::with_capacity(W as usize);
    for l in 0..u64::from(W) {
        let j = fx.load_index(ci, fx.add(p, fx.i64c(l))?)?;
        vrows.push(gep(&fx.b, v, fx.mul(j, st.k)?)?);
    }
    // DOTS_AT_ONCE rows of `V` per pass over the row of `U` (each dot in the order a single
    // one takes, so the results do not depend on the grouping).
    let mut dots = fx.splat_const(0.0, W);
    for (g, rows) in vrows.chunks(DOTS_AT_ONCE).enumerate() {
        for (l, d) in dot_products(fx, urow, rows, st.k, false)?
            .into_iter()
            .enumerate()
        {
            let lane = (g * DOTS_AT_ONCE + l) as u64;
            dots =
                fx.b.build_insert_element(dots, d, fx.i64c(lane), "dots")
                    .map_err(ierr)?;
        }
    }
    // The body reads no column (see `lane_parallel`): `j` is a placeholder.
    let mut body = Body::new(
        plan,
        &st.ins,
        At {
            i,
            j: fx.i64c(0),
            w: W,
            main: x,
        },
    );
    body.outer_dot = Some(dots);
    let g = body.emit(fx, oi.g, false)?;
    match kind {
        OuterKind::CellWise => {
            // Not counted: see `St::nnz`.
            store_vec(&fx.b, st.out, p, g)
        }
        OuterKind::FullAgg => fx.kahan_add(st.accv[0], st.accv[1], g),
        _ => Err(ierr("a final product taken W non-zeros at a time")),
    }
}

#[allow(clippy::too_many_arguments)]
fn element<'c>(
    fx: &mut Fx<'_, 'c>,
    plan: &CPlan,
    kind: OuterKind,
    oi: &OuterInputs,
    st: &St<'c>,
    i: IntValue<'c>,
    j: IntValue<'c>,
    x: inkwell::values::VectorValue<'c>,
    p: IntValue<'c>,
    visit: Visit,
) -> Result<(), CodegenError> {
    let ptr = |k: usize| {
        st.ins
            .data
            .get(k)
            .copied()
            .flatten()
            .ok_or_else(|| ierr("outer input"))
    };
    let urow = gep(&fx.b, ptr(oi.u)?, fx.mul(i, st.k)?)?;
    let vrow = gep(&fx.b, ptr(oi.v)?, fx.mul(j, st.k)?)?;
    let d =
        fx.b.build_call(st.dot, &[urow.into(), vrow.into(), st.k.into()], "dot")
            .map_err(ierr)?;
    let d = match d.try_as_basic_value() {
        inkwell::values::ValueKind::Basic(v) => v.into_float_value(),
        _ => return Err(ierr("dot returns nothing")),
    };
    let mut body = Body::new(
        plan,
        &st.ins,
        At {
            i,
            j,
            w: 1,
            main: x,
        },
    );
    body.outer_dot = Some(fx.splat(d, 1)?);
    let sum = kind == OuterKind::FullAgg;
    if sum {
        body.summed_only(oi.g);
    }
    let mut g = body.emit(fx, oi.g, false)?;
    if visit == Visit::EveryCell && !(sum && plan_info::multiplies_by_main(plan, oi.g)) {
        // At a zero of the driver the unfused value is `0 * body` (the template's `X * f` or
        // `(X != 0) * f`, whose mask the plan may have simplified away): 0, or NaN where the
        // body is not finite.
        let nz = fx.fcmp(FloatPredicate::UNE, x, fx.splat_const(0.0, 1))?;
        let masked = fx.fmul(g, fx.splat_const(0.0, 1))?;
        g = fx.select(nz, g, masked)?;
    }
    match kind {
        OuterKind::CellWise if visit == Visit::CsrNonZeros => {
            // Not counted: see `St::nnz`.
            store_vec(&fx.b, st.out, p, g)?;
        }
        OuterKind::CellWise => {
            store_vec(&fx.b, st.out, p, g)?;
            let nz = fx.fcmp(FloatPredicate::UNE, g, fx.splat_const(0.0, 1))?;
            let nz =
                fx.b.build_extract_element(nz, fx.i64c(0), "nz")
                    .map_err(ierr)?
                    .into_int_value();
            let nz =
                fx.b.build_int_z_extend(nz, fx.ctx.i64_type(), "z")
                    .map_err(ierr)?;
            let cur = fx.load_i64(st.nnz)?;
            fx.store(st.nnz, fx.add(cur, nz)?)?;
        }
        OuterKind::FullAgg => {
            fx.kahan_add(st.acc[0], st.acc[1], g)?;
        }
        OuterKind::Right | OuterKind::Left | OuterKind::LeftT => {
            let wk =
                oi.w.ok_or_else(|| ierr("final product without its matrix"))?;
            let (orow, wrow) = if kind == OuterKind::Right {
                (i, j)
            } else {
                (j, i)
            };
            let o = gep(&fx.b, st.out, fx.mul(orow, st.k2)?)?;
            let w = gep(&fx.b, ptr(wk)?, fx.mul(wrow, st.k2)?)?;
            let gs =
                fx.b.build_extract_element(g, fx.i64c(0), "g")
                    .map_err(ierr)?;
            fx.b.build_call(st.axpy, &[o.into(), w.into(), gs.into(), st.k2.into()], "")
                .map_err(ierr)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::native::compile;
    use crate::reference::{evaluate, Operand};
    use lafuse_compiler::fusion::cplan::{
        Access, CNode, CPlan, InputKind, OuterType, TemplateSpec,
    };
    use lafuse_compiler::hops::{BinaryOp, Literal, UnaryOp};
    use lafuse_runtime::Matrix;

    fn mat(rows: usize, cols: usize, density: f64, seed: u64) -> Matrix {
        let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        let mut next = || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 11) as f64 / (1u64 << 53) as f64
        };
        let vals = (0..rows * cols)
            .map(|_| {
                let (u, v) = (next(), next());
                if u < density {
                    v * 4.0 - 2.0
                } else {
                    0.0
                }
            })
            .collect();
        Matrix::from_dense_values(rows, cols, vals).unwrap()
    }

    /// `G = X * log(abs(U %*% t(V)) + 1e-3)`, with `G %*% W` for Right.
    fn plan(ty: OuterType) -> CPlan {
        let data = |input, access| CNode::Data { input, access };
        let mut nodes = vec![
            data(0, Access::Main),
            data(1, Access::OuterU),
            data(2, Access::OuterV),
            CNode::OuterDot { u: 1, v: 2 },
            CNode::Unary {
                f: UnaryOp::Abs,
                x: 3,
            },
            CNode::Literal {
                value: Literal::Double(1e-3),
            },
            CNode::Binary {
                f: BinaryOp::Add,
                a: 4,
                b: 5,
            },
            CNode::Unary {
                f: UnaryOp::Log,
                x: 6,
            },
            CNode::Binary {
                f: BinaryOp::Mul,
                a: 0,
                b: 7,
            },
        ];
        let mut inputs = vec![InputKind::Matrix; 3];
        let out = if ty == OuterType::Right {
            nodes.push(data(3, Access::Whole));
            inputs.push(InputKind::Matrix);
            nodes.push(CNode::FinalProduct { g: 8, w: 9 });
            10
        } else {
            8
        };
        CPlan {
            template: TemplateSpec::Outer { outer_type: ty },
            inputs,
            nodes,
            outputs: vec![out],
        }
    }

    /// Ranks that exercise every part of the dot product (whole blocks of all accumulators,
    /// single `W`-blocks, the scalar tail, and their combinations) against the reference, and
    /// check that the dot and axpy primitives are inlined in both entry points.
    #[test]
    fn dot_products_of_every_rank_shape_match_the_reference_and_are_inlined() {
        let (m, n, k2) = (37, 29, 3);
        for k in [1, 7, 8, 9, 31, 32, 33, 45, 64, 100] {
            let u = mat(m, k, 1.0, 3 + k as u64);
            let v = mat(n, k, 1.0, 5 + k as u64);
            let w = mat(n, k2, 1.0, 7);
            for d in [0.05, 0.8] {
                let x = mat(m, n, d, 11);
                for (ty, shape) in [(OuterType::FullAgg, (1, 1)), (OuterType::Right, (m, k2))] {
                    let p = plan(ty);
                    let mut ins = vec![
                        Operand::Matrix(&x),
                        Operand::Matrix(&u),
                        Operand::Matrix(&v),
                    ];
                    if ty == OuterType::Right {
                        ins.push(Operand::Matrix(&w));
                    }
                    let op = compile(&p).unwrap();
                    let got = op.execute(&ins, &[shape]).unwrap();
                    let want = evaluate(&p, &ins, &[shape]).unwrap();
                    for i in 0..shape.0 {
                        for j in 0..shape.1 {
                            let (g, e) = (got[0].get(i, j), want[0].get(i, j));
                            assert!(
                                (g - e).abs() <= 1e-9 * g.abs().max(e.abs()).max(1.0),
                                "{ty:?} k {k} density {d} ({i},{j}): {g} vs {e}"
                            );
                        }
                    }
                    let irs = [Some(op.llvm_ir()), op.csr_llvm_ir()];
                    for ir in irs.into_iter().flatten() {
                        assert!(!ir.contains("@lafuse_dot("), "dot not inlined:\n{ir}");
                        assert!(!ir.contains("@lafuse_axpy("), "axpy not inlined:\n{ir}");
                    }
                }
            }
        }
    }
}
