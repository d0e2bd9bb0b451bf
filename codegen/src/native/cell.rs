//! Entry points of Cell and MultiAgg operators: the loop over rows `[rl, ru)` and, per row,
//! over the columns of a dense main input (a vector loop of [`W`] lanes, then a scalar tail)
//! or over the non-zeros of a CSR one, with the aggregation written out explicitly:
//! Kahan-compensated vector accumulators for sums (LLVM 14 cannot reassociate without
//! fast-math, so the lanes are explicit; a full aggregate's dense loop keeps
//! [`FULL_AGG_VECTORS`] of them), NaN-propagating compare-and-select for min/max.
//! Full-aggregate lanes are loaded from and stored back to the task's partial (so a skeleton
//! may call an entry several times per task); the skeleton merges lanes and tasks in order.

use super::expr::{self, declare_entry, ierr, load_inputs, load_main_csr, At, Body, Fx, InputPtrs};
use super::llvm::{self, f64_ptr, gep, load, load_vec, store_vec};
use super::{CodegenError, Internal};
use crate::plan_info::FULL_AGG_VECTORS;
use inkwell::context::Context;
use inkwell::module::Module;
use inkwell::values::{IntValue, PointerValue, VectorValue};
use inkwell::{AddressSpace, FloatPredicate};
use lafuse_compiler::fusion::cplan::{CNodeId, CPlan};
use lafuse_skeletons::abi::{DenseView, KernelArgs};
use lafuse_skeletons::{AggKind, CellKind};
use std::mem::offset_of;

/// Vector lanes of the dense loops (8 doubles: one AVX-512 register, two AVX2 registers).
pub(crate) const W: u32 = 8;
/// Lanes of an Outer full-aggregate partial: the vector lanes plus the scalar tail's.
pub(crate) const LANES: usize = W as usize + 1;
/// Lanes of a Cell or MultiAgg full-aggregate partial: the lanes of
/// [`FULL_AGG_VECTORS`] vector accumulators, then the scalar tail's.
pub(crate) const FULL_LANES: usize = FULL_AGG_VECTORS * W as usize + 1;
/// The accumulator slot of the scalar tail (slots `0..FULL_AGG_VECTORS` are vectors).
const SCALAR: usize = FULL_AGG_VECTORS;
/// Accumulator slots: the vectors, then the scalar.
const SLOTS: usize = FULL_AGG_VECTORS + 1;

/// What a cell-wise entry computes: outputs with their aggregation, and the output class.
pub(crate) struct CellLike {
    pub outs: Vec<(CNodeId, Option<AggKind>)>,
    pub kind: CellKind,
    /// The bodies run in the main input's transposed frame (`transposed_frame` in `mod.rs`).
    pub transposed: bool,
}

/// Accumulator slots of one aggregate: sums and corrections of the vectors (a full
/// aggregate's dense loop uses all of them, anything else the first) and of the scalar tail
/// ([`SCALAR`]).
#[derive(Clone, Copy)]
struct Acc<'c> {
    s: [PointerValue<'c>; SLOTS],
    c: [PointerValue<'c>; SLOTS],
    /// Whether sums reset a correction that is not finite at every add ([`Fx::kahan_step`]),
    /// or leave that to a check at the end ([`Fx::kahan_step_unchecked`]).
    resets: bool,
}

struct St<'c> {
    out: PointerValue<'c>,
    n: IntValue<'c>,
    ins: InputPtrs<'c>,
    accs: Vec<Option<Acc<'c>>>,
    nnz: [PointerValue<'c>; 2],
}

fn wi(w: u32) -> usize {
    usize::from(w == 1)
}

/// The accumulator slot a `w`-lane value folds into: vector accumulator `vector`, or the
/// scalar tail's.
fn acc_slot(w: u32, vector: usize) -> usize {
    if w == 1 {
        SCALAR
    } else {
        vector
    }
}

/// The lane width and the partial offset (within an aggregate's sums or corrections) of
/// accumulator slot `slot`.
fn slot_layout(slot: usize) -> (u32, u64) {
    if slot == SCALAR {
        (1, (FULL_AGG_VECTORS as u64) * u64::from(W))
    } else {
        (W, slot as u64 * u64::from(W))
    }
}

pub(crate) use crate::plan_info::init_value;

/// The runtime's min/max step: NaN wins, else the strictly better value.
pub(crate) fn pick<'c>(
    fx: &Fx<'_, 'c>,
    agg: AggKind,
    acc: VectorValue<'c>,
    x: VectorValue<'c>,
) -> Result<VectorValue<'c>, CodegenError> {
    let p = if agg == AggKind::Max {
        FloatPredicate::OGT
    } else {
        FloatPredicate::OLT
    };
    let better = fx.fcmp(p, x, acc)?;
    let nan = fx.fcmp(FloatPredicate::UNO, x, x)?;
    fx.select(fx.or(better, nan)?, x, acc)
}

fn lane<'c>(fx: &Fx<'_, 'c>, v: VectorValue<'c>, l: u32) -> Result<VectorValue<'c>, CodegenError> {
    let x =
        fx.b.build_extract_element(v, fx.i64c(l as u64), "l")
            .map_err(ierr)?
            .into_float_value();
    fx.splat(x, 1)
}

/// Emits one entry point (`csr`: non-zeros of a CSR main input, else rows of a dense one).
pub(crate) fn emit_entry<'c>(
    ctx: &'c Context,
    module: &Module<'c>,
    plan: &CPlan,
    spec: &CellLike,
    used: &[bool],
    csr: bool,
    name: &str,
) -> Result<(), CodegenError> {
    let i64t = ctx.i64_type();
    let (mut fx, args, rl, ru) = declare_entry(ctx, module, name)?;
    let pf64 = f64_ptr(ctx).ptr_type(AddressSpace::default());
    let pi64 = i64t.ptr_type(AddressSpace::default());
    let field = |fx: &Fx<'_, 'c>, off: usize, ty| llvm::load_field(ctx, &fx.b, args, off, ty);
    let out = field(&fx, offset_of!(KernelArgs, out), pf64)?.into_pointer_value();
    let n = field(&fx, offset_of!(KernelArgs, cols), pi64)?.into_int_value();
    let ins = load_inputs(&fx, args, used)?;
    let nnz = [
        fx.slot(i64t.vec_type(W).into())?,
        fx.slot(i64t.vec_type(1).into())?,
    ];
    fx.store(nnz[0], i64t.vec_type(W).const_zero())?;
    fx.store(nnz[1], i64t.vec_type(1).const_zero())?;
    let mut accs = Vec::new();
    for (_, agg) in &spec.outs {
        if agg.is_none() || spec.kind == CellKind::ColAgg || spec.kind == CellKind::NoAgg {
            accs.push(None);
            continue;
        }
        let slots = |fx: &mut Fx<'_, 'c>| -> Result<[PointerValue<'c>; SLOTS], CodegenError> {
            let mut v = Vec::with_capacity(SLOTS);
            for slot in 0..SLOTS {
                v.push(fx.slot(fx.vty(slot_layout(slot).0).into())?);
            }
            v.try_into()
                .map_err(|_| CodegenError::Internal(Internal::MalformedPlan("accumulator slots")))
        };
        let (s, c) = (slots(&mut fx)?, slots(&mut fx)?);
        accs.push(Some(Acc { s, c, resets: true }));
    }
    // A full aggregate's lanes start from the task's partial (and start from it again where
    // the sums are added a second time, below).
    let load_partials = |fx: &Fx<'_, 'c>| -> Result<(), CodegenError> {
        if spec.kind != CellKind::FullAgg {
            return Ok(());
        }
        for (k, a) in accs.iter().enumerate() {
            let Some(a) = a else { continue };
            let base = (k * 2 * FULL_LANES) as u64;
            let l = FULL_LANES as u64;
            for slot in 0..SLOTS {
                let (w, off) = slot_layout(slot);
                let sv = load_vec(&fx.b, fx.vty(w), out, fx.i64c(base + off))?;
                fx.store(a.s[slot], sv)?;
                let cv = load_vec(&fx.b, fx.vty(w), out, fx.i64c(base + l + off))?;
                fx.store(a.c[slot], cv)?;
            }
        }
        Ok(())
    };
    load_partials(&fx)?;
    // Full sums run first without resetting their corrections (a dependent compare and blend
    // fewer per add: `sum(R ^ 2)` over 2000 x 20 is bound by that chain), and again from the
    // partial with resets where a sum ended up not finite, which only a reset could have
    // changed ([`Fx::kahan_step_unchecked`]): the same bits either way. Only where every
    // output is a full aggregate, so the first pass writes nothing but the lanes.
    let sums_checked_after = spec.kind == CellKind::FullAgg
        && spec.outs.iter().all(|(_, agg)| agg.is_some())
        && spec
            .outs
            .iter()
            .any(|(_, agg)| matches!(agg, Some(AggKind::Sum | AggKind::SumSq)));
    let with_resets = |resets: bool| -> Vec<Option<Acc<'c>>> {
        accs.iter()
            .map(|a| a.map(|a| Acc { resets, ..a }))
            .collect()
    };
    let st = St {
        out,
        n,
        ins,
        accs: with_resets(!sums_checked_after),
        nnz,
    };
    let (main, mstride, row0, csrp) = if csr {
        let (rp, ci, va) = load_main_csr(&fx, args)?;
        (va, n, n, Some((rp, ci)))
    } else {
        let o = offset_of!(KernelArgs, main);
        let d = field(&fx, o + offset_of!(DenseView, data), pf64)?.into_pointer_value();
        let c = field(&fx, o + offset_of!(DenseView, cols), pi64)?.into_int_value();
        let r0 = field(&fx, o + offset_of!(DenseView, row0), pi64)?.into_int_value();
        (d, c, r0, None)
    };
    // A body with a scalar helper call (exp, log, ...) makes one call per lane in a vector
    // loop as well; its dense rows then run the scalar loop only, which leaves out the
    // vector loop's machine code (and its generation time) at little cost in speed.
    let widths: &[u32] = if plan.nodes.iter().any(|n| expr::node_calls_helper(plan, n)) {
        &[1]
    } else {
        &[W, 1]
    };
    let jslot = fx.slot(i64t.into())?;
    // Cells `0..len` of "row" `i` of a dense main input, whose cell 0 is at `base` in it (`W`
    // lanes at a time, then the scalar tail).
    let dense_cells = |fx: &mut Fx<'_, 'c>,
                       st: &St<'c>,
                       i: IntValue<'c>,
                       base: IntValue<'c>,
                       len: IntValue<'c>|
     -> Result<(), CodegenError> {
        fx.store(jslot, fx.i64c(0))?;
        for &w in widths {
            if w == W && spec.kind == CellKind::FullAgg {
                // `FULL_AGG_VECTORS` vectors a step, each into an accumulator of its own.
                let step = FULL_AGG_VECTORS as u64 * u64::from(W);
                fx.for_slot(jslot, len, step, &mut |fx, j0| {
                    for vector in 0..FULL_AGG_VECTORS {
                        let j = fx.add(j0, fx.i64c(vector as u64 * u64::from(W)))?;
                        let a = load_vec(&fx.b, fx.vty(w), main, fx.add(base, j)?)?;
                        element(fx, plan, spec, st, At { i, j, w, main: a }, None, vector)?;
                    }
                    Ok(())
                })?;
            }
            fx.for_slot(jslot, len, w as u64, &mut |fx, j| {
                let a = load_vec(&fx.b, fx.vty(w), main, fx.add(base, j)?)?;
                element(fx, plan, spec, st, At { i, j, w, main: a }, None, 0)
            })?;
        }
        Ok(())
    };
    let csr_lanes = csr
        && widths.len() > 1
        && matches!(spec.kind, CellKind::FullAgg | CellKind::RowAgg)
        && st.accs.iter().all(Option::is_some);
    // The rows `[rl, ru)`, folded into `st`'s accumulators.
    let run_loops = |fx: &mut Fx<'_, 'c>, st: &St<'c>| -> Result<(), CodegenError> {
        if !csr && runs_flat(plan, spec) {
            // Every input is the main input, aligned with it or a scalar, and nothing is kept per
            // row: the rows `[rl, ru)` are one stretch of `(ru - rl) * n` cells, read and written
            // at the same offsets in every input and the output. One loop over the stretch (`i`
            // stays `rl`, `j` runs past the row ends) instead of one per row: vectors of a whole
            // `W` lanes however narrow the rows (an m×1 vector is a stretch of m cells, not m
            // rows of one scalar cell each).
            let len = fx.mul(fx.sub(ru, rl)?, n)?;
            let base = fx.mul(fx.sub(rl, row0)?, mstride)?;
            dense_cells(fx, st, rl, base, len)?;
        } else {
            fx.for_range(rl, ru, &mut |fx, i| {
                if spec.kind == CellKind::RowAgg {
                    for (k, (_, agg)) in spec.outs.iter().enumerate() {
                        if let (Some(a), Some(agg)) = (st.accs[k], agg) {
                            for (w, x) in [(W, 0), (1, SCALAR)] {
                                fx.store(a.s[x], fx.splat_const(init_value(*agg), w))?;
                                fx.store(a.c[x], fx.splat_const(0.0, w))?;
                            }
                        }
                    }
                }
                match csrp {
                    None => {
                        let rowbase = fx.mul(fx.sub(i, row0)?, mstride)?;
                        dense_cells(fx, st, i, rowbase, n)?;
                    }
                    Some((rp, ci)) => {
                        let p0 = load(&fx.b, gep(&fx.b, rp, i)?)?.into_int_value();
                        let p1 =
                            load(&fx.b, gep(&fx.b, rp, fx.add(i, fx.i64c(1))?)?)?.into_int_value();
                        // Aggregates in registers take the row's non-zeros `W` at a time into
                        // their vector lanes (a scalar accumulator made every non-zero wait for
                        // the previous one's compensated add), then the rest one at a time.
                        fx.store(jslot, p0)?;
                        if csr_lanes {
                            fx.for_slot(jslot, p1, W as u64, &mut |fx, pb| {
                                csr_group(fx, plan, spec, st, main, ci, i, pb)
                            })?;
                        }
                        fx.for_slot(jslot, p1, 1, &mut |fx, p| {
                            let j = fx.load_index(ci, p)?;
                            let a = load_vec(&fx.b, fx.vty(1), main, p)?;
                            element(
                                fx,
                                plan,
                                spec,
                                st,
                                At {
                                    i,
                                    j,
                                    w: 1,
                                    main: a,
                                },
                                Some(p),
                                0,
                            )
                        })?;
                    }
                }
                if spec.kind == CellKind::RowAgg {
                    for (k, (_, agg)) in spec.outs.iter().enumerate() {
                        if let (Some(a), Some(agg)) = (st.accs[k], agg) {
                            let v = finish_lanes(fx, *agg, a)?;
                            store_vec(&fx.b, st.out, i, v)?;
                        }
                    }
                }
                Ok(())
            })?;
        }
        Ok(())
    };
    run_loops(&mut fx, &st)?;
    if sums_checked_after {
        let sums = spec
            .outs
            .iter()
            .zip(&st.accs)
            .filter_map(|((_, agg), a)| match (agg, a) {
                (Some(AggKind::Sum | AggKind::SumSq), Some(a)) => Some(a),
                _ => None,
            });
        let any_not_finite =
            fx.any_lane_not_finite(sums.flat_map(|a| (0..SLOTS).map(|slot| a.s[slot])))?;
        let resetting = St {
            out,
            n,
            ins: st.ins.clone(),
            accs: with_resets(true),
            nnz,
        };
        expr::if_else(
            &mut fx,
            any_not_finite,
            &mut |fx| {
                load_partials(fx)?;
                run_loops(fx, &resetting)
            },
            &mut |_| Ok(()),
        )?;
    }
    if spec.kind == CellKind::FullAgg {
        for (k, a) in st.accs.iter().enumerate() {
            if let Some(a) = a {
                let base = (k * 2 * FULL_LANES) as u64;
                let l = FULL_LANES as u64;
                for slot in 0..SLOTS {
                    let off = slot_layout(slot).1;
                    store_vec(&fx.b, out, fx.i64c(base + off), fx.load_v(a.s[slot])?)?;
                    store_vec(&fx.b, out, fx.i64c(base + l + off), fx.load_v(a.c[slot])?)?;
                }
            }
        }
    }
    let total = fx.sum_i64_lanes(fx.load_v(nnz[0])?, fx.load_v(nnz[1])?)?;
    fx.b.build_return(Some(&total)).map_err(ierr)?;
    Ok(())
}

/// Whether the dense entry runs over the rows as one stretch of cells (see
/// [`crate::plan_info::runs_flat`]).
fn runs_flat(plan: &CPlan, spec: &CellLike) -> bool {
    crate::plan_info::runs_flat(plan, spec.kind)
}

/// Combines a row's lanes in a fixed order (vector lanes, then the scalar tail).
fn finish_lanes<'c>(
    fx: &Fx<'_, 'c>,
    agg: AggKind,
    a: Acc<'c>,
) -> Result<VectorValue<'c>, CodegenError> {
    let (sw, s1) = (fx.load_v(a.s[0])?, fx.load_v(a.s[SCALAR])?);
    if matches!(agg, AggKind::Min | AggKind::Max) {
        let mut r = fx.splat_const(init_value(agg), 1);
        for l in 0..W {
            r = pick(fx, agg, r, lane(fx, sw, l)?)?;
        }
        return pick(fx, agg, r, s1);
    }
    let (cw, c1) = (fx.load_v(a.c[0])?, fx.load_v(a.c[SCALAR])?);
    let s = fx.slot(fx.vty(1).into())?;
    let c = fx.slot(fx.vty(1).into())?;
    fx.store(s, fx.splat_const(0.0, 1))?;
    fx.store(c, fx.splat_const(0.0, 1))?;
    // Kahan::merge: add the other sum, then its negated correction.
    let merge = |os: VectorValue<'c>, oc: VectorValue<'c>| -> Result<(), CodegenError> {
        fx.kahan_add(s, c, os)?;
        let neg = fx.b.build_float_neg(oc, "n").map_err(ierr)?;
        fx.kahan_add(s, c, neg)
    };
    for l in 0..W {
        merge(lane(fx, sw, l)?, lane(fx, cw, l)?)?;
    }
    merge(s1, c1)?;
    fx.load_v(s)
}

fn element<'c>(
    fx: &mut Fx<'_, 'c>,
    plan: &CPlan,
    spec: &CellLike,
    st: &St<'c>,
    at: At<'c>,
    p: Option<IntValue<'c>>,
    vector: usize,
) -> Result<(), CodegenError> {
    let w = at.w;
    let mut body = Body::new(plan, &st.ins, at);
    for (k, &(node, agg)) in spec.outs.iter().enumerate() {
        let v = body.emit(fx, node, spec.transposed)?;
        let Some(agg) = agg else {
            // No aggregation: write the cell (CSR: at the non-zero's position) and count it.
            let idx = match p {
                Some(p) => p,
                None => fx.add(fx.mul(at.i, st.n)?, at.j)?,
            };
            store_vec(&fx.b, st.out, idx, v)?;
            let nz = fx.fcmp(FloatPredicate::UNE, v, fx.splat_const(0.0, w))?;
            let ity = fx.ctx.i64_type().vec_type(w);
            let nz = fx.b.build_int_z_extend(nz, ity, "nz").map_err(ierr)?;
            let slot = st.nnz[wi(w)];
            let cur = fx.load_v(slot)?;
            fx.store(slot, fx.b.build_int_add(cur, nz, "n").map_err(ierr)?)?;
            continue;
        };
        let x = if agg == AggKind::SumSq {
            fx.fmul(v, v)?
        } else {
            v
        };
        match (spec.kind, st.accs[k]) {
            (CellKind::ColAgg, _) => {
                if matches!(agg, AggKind::Min | AggKind::Max) {
                    let cur = load_vec(&fx.b, fx.vty(w), st.out, at.j)?;
                    store_vec(&fx.b, st.out, at.j, pick(fx, agg, cur, x)?)?;
                } else {
                    // Partial layout: n sums, then n corrections.
                    let cj = fx.add(st.n, at.j)?;
                    let sp =
                        fx.b.build_pointer_cast(
                            gep(&fx.b, st.out, at.j)?,
                            fx.vty(w).ptr_type(AddressSpace::default()),
                            "sp",
                        )
                        .map_err(ierr)?;
                    let cp =
                        fx.b.build_pointer_cast(
                            gep(&fx.b, st.out, cj)?,
                            fx.vty(w).ptr_type(AddressSpace::default()),
                            "cp",
                        )
                        .map_err(ierr)?;
                    kahan_unaligned(fx, sp, cp, x)?;
                }
            }
            (_, Some(a)) => fold(fx, agg, a, acc_slot(w, vector), x)?,
            _ => {
                return Err(CodegenError::Internal(Internal::MalformedPlan(
                    "aggregate without accumulator",
                )))
            }
        }
    }
    Ok(())
}

/// `W` non-zeros of a CSR row from position `pb`: each one's body as a scalar, the values
/// of each aggregate gathered into one vector and folded into its vector lanes (lane `l`
/// takes the row's non-zeros `pb + l`).
#[allow(clippy::too_many_arguments)]
fn csr_group<'c>(
    fx: &mut Fx<'_, 'c>,
    plan: &CPlan,
    spec: &CellLike,
    st: &St<'c>,
    vals: PointerValue<'c>,
    ci: PointerValue<'c>,
    i: IntValue<'c>,
    pb: IntValue<'c>,
) -> Result<(), CodegenError> {
    let mut lanes: Vec<VectorValue<'c>> = (0..spec.outs.len())
        .map(|_| fx.vty(W).get_undef())
        .collect();
    for l in 0..W {
        let p = fx.add(pb, fx.i64c(u64::from(l)))?;
        let j = fx.load_index(ci, p)?;
        let a = load_vec(&fx.b, fx.vty(1), vals, p)?;
        let mut body = Body::new(
            plan,
            &st.ins,
            At {
                i,
                j,
                w: 1,
                main: a,
            },
        );
        for (k, &(node, agg)) in spec.outs.iter().enumerate() {
            let v = body.emit(fx, node, spec.transposed)?;
            let x = if agg == Some(AggKind::SumSq) {
                fx.fmul(v, v)?
            } else {
                v
            };
            let x =
                fx.b.build_extract_element(x, fx.i64c(0), "x")
                    .map_err(ierr)?;
            lanes[k] =
                fx.b.build_insert_element(lanes[k], x, fx.i64c(u64::from(l)), "g")
                    .map_err(ierr)?;
        }
    }
    for (k, &(_, agg)) in spec.outs.iter().enumerate() {
        let (Some(a), Some(agg)) = (st.accs[k], agg) else {
            return Err(CodegenError::Internal(Internal::MalformedPlan(
                "aggregate without accumulator",
            )));
        };
        fold(fx, agg, a, 0, lanes[k])?;
    }
    Ok(())
}

/// Folds `x` into accumulator `a`'s slot `slot` (a vector's lanes or the scalar tail's): the
/// better value for min/max, a Kahan-compensated add otherwise.
fn fold<'c>(
    fx: &Fx<'_, 'c>,
    agg: AggKind,
    a: Acc<'c>,
    slot: usize,
    x: VectorValue<'c>,
) -> Result<(), CodegenError> {
    if matches!(agg, AggKind::Min | AggKind::Max) {
        let cur = fx.load_v(a.s[slot])?;
        fx.store(a.s[slot], pick(fx, agg, cur, x)?)
    } else {
        fx.kahan_add_resetting(a.s[slot], a.c[slot], x, a.resets)
    }
}

/// Kahan update of vectors in memory that is only 8-byte aligned.
fn kahan_unaligned<'c>(
    fx: &Fx<'_, 'c>,
    s: PointerValue<'c>,
    c: PointerValue<'c>,
    x: VectorValue<'c>,
) -> Result<(), CodegenError> {
    let ld = |p| -> Result<VectorValue<'c>, CodegenError> {
        let v = load(&fx.b, p)?;
        if let Some(i) = inkwell::values::BasicValue::as_instruction_value(&v) {
            i.set_alignment(8).map_err(ierr)?;
        }
        Ok(v.into_vector_value())
    };
    let (sv, cv) = (ld(s)?, ld(c)?);
    let (t, cnew) = fx.kahan_step(sv, cv, x)?;
    fx.b.build_store(c, cnew)
        .map_err(ierr)?
        .set_alignment(8)
        .map_err(ierr)?;
    fx.b.build_store(s, t)
        .map_err(ierr)?
        .set_alignment(8)
        .map_err(ierr)?;
    Ok(())
}
