//! Entry points of Cell and MultiAgg operators in Cranelift IR: the loops of the LLVM
//! backend's `native::cell`, lane for lane, so that every sum is added in the same order and
//! lands in the same partial slot: over a dense main input a loop of [`W`] lanes then a scalar
//! tail (the scalar loop only where the body calls a scalar helper), one stretch of cells
//! where nothing is kept per row; over a CSR main input the non-zeros of each row. Sums are
//! Kahan-compensated per lane (a full aggregate's dense loop keeps [`FULL_AGG_VECTORS`]
//! vector accumulators, as LLVM's); min/max propagate NaN; full-aggregate lanes are loaded
//! from and stored back to the task's partial (`FULL_LANES` lanes of sums, then of
//! corrections).

use super::body::{load_inputs, maps_lanes, At, Body, InputPtrs};
use super::fx::{parts_of, Fx, V};
use crate::backend::{CodegenError, Internal};
use crate::plan_info::{init_value, node_calls_helper, runs_flat, FULL_AGG_VECTORS};
use cranelift_codegen::ir::condcodes::FloatCC;
use cranelift_codegen::ir::{types, InstBuilder, Value};
use cranelift_frontend::Variable;
use lafuse_compiler::fusion::cplan::{CNodeId, CPlan};
use lafuse_skeletons::abi::{CsrView, KernelArgs};
use lafuse_skeletons::{AggKind, CellKind};
use std::mem::offset_of;

/// Vector lanes of the dense loops: the LLVM backend's width, so that sums keep its lanes.
pub(crate) const W: u32 = 8;
/// Lanes of an Outer full-aggregate partial: the vector lanes plus the scalar tail's.
pub(crate) const LANES: usize = W as usize + 1;
/// Lanes of a Cell or MultiAgg full-aggregate partial, as the LLVM backend's: the lanes of
/// [`FULL_AGG_VECTORS`] vector accumulators, then the scalar tail's.
pub(crate) const FULL_LANES: usize = FULL_AGG_VECTORS * W as usize + 1;
/// Where a full aggregate's scalar tail sits in its partial's sums (and corrections).
const SCALAR_LANE: i64 = FULL_AGG_VECTORS as i64 * W as i64;

/// Lanes a dense no-aggregate body takes at a time where it maps lanes through the runtime's
/// vector functions (`exp`, `log`, `tanh`): a call per [`W`] lanes waits out the function's
/// whole latency, a call per 32 overlaps four vectors' worth (`tanh(X + b)` over 512 x 500
/// cells: 1.6-1.7 ms a call at 8 lanes, 0.83 at 32, LLVM's 0.79-0.87, unfused 0.75-0.79).
/// Cells without a sum are independent of the lanes they run in: the same results to the bit.
const WIDE: u32 = 32;

/// What a cell-wise entry computes: outputs with their aggregation, and the output class.
pub(crate) struct CellLike {
    pub outs: Vec<(CNodeId, Option<AggKind>)>,
    pub kind: CellKind,
    /// The bodies run in the main input's transposed frame (`plan_info::transposed_frame`).
    pub transposed: bool,
}

/// Accumulators of one aggregate: `[vector, scalar]` sums and corrections, as variables (a
/// full aggregate's first vector; its others stay in the task's partial, [`Into::Partial`]).
#[derive(Clone)]
struct Acc {
    s: [Vec<Variable>; 2],
    c: [Vec<Variable>; 2],
}

/// What every cell visit reads: the output, its columns, the inputs, accumulators, counters.
struct St {
    out: Value,
    n: Value,
    ins: InputPtrs,
    accs: Vec<Option<Acc>>,
    /// Non-zeros written: `I64X2` counters of the vector loop, an `I64` one of the tail.
    nnz: [Vec<Variable>; 2],
    matrix_cells: Vec<bool>,
}

/// Index of width `w`'s accumulators and counters: 0 for the vector loop, 1 for the scalar
/// tail.
fn wi(w: u32) -> usize {
    usize::from(w == 1)
}

/// Where a cell's value folds into its aggregates: the first vector's or the scalar tail's
/// variables (by its width), or the full aggregate's vector at this lane offset in the task's
/// partial (an `I64`: `FULL_AGG_VECTORS` vectors of a dense step, each of its own, as the
/// LLVM backend keeps them in registers; here the body is emitted once and the vector chosen
/// by the cell's position, which keeps Cranelift's compile time).
#[derive(Clone, Copy)]
enum Into {
    Variables,
    Partial(Value),
}

/// Emits the entry point's body into `fx`, positioned at its entry block with parameters
/// `args`, `rl` and `ru` (`csr`: non-zeros of a CSR main input, else rows of a dense one).
#[allow(clippy::too_many_arguments)]
pub(super) fn emit_entry(
    fx: &mut Fx<'_>,
    args: Value,
    rl: Value,
    ru: Value,
    plan: &CPlan,
    spec: &CellLike,
    used: &[bool],
    csr: bool,
) -> Result<(), CodegenError> {
    let out = fx.load_i64(args, offset_of!(KernelArgs, out))?;
    let n = fx.load_i64(args, offset_of!(KernelArgs, cols))?;
    let ins = load_inputs(fx, args, used)?;
    let zero_i = fx.iconst(0);
    let zero_v = fx.b.ins().splat(types::I64X2, zero_i);
    let nnz = [
        (0..parts_of(W))
            .map(|_| fx.var(types::I64X2, zero_v))
            .collect(),
        vec![fx.var(types::I64, zero_i)],
    ];
    let mut accs = Vec::new();
    for (k, (_, agg)) in spec.outs.iter().enumerate() {
        let Some(agg) = agg else {
            accs.push(None);
            continue;
        };
        if matches!(spec.kind, CellKind::ColAgg | CellKind::NoAgg) {
            accs.push(None);
            continue;
        }
        let a = if spec.kind == CellKind::FullAgg {
            // The task's partial so far: lanes of sums (or extremes), then of corrections.
            let base = (k * 2 * FULL_LANES) as i64;
            let at = |fx: &mut Fx<'_>, off: i64, w: u32| {
                let idx = fx.iconst(off);
                let v = fx.load(out, idx, w);
                fx.vars(&v)
            };
            let l = FULL_LANES as i64;
            Acc {
                s: [at(fx, base, W), at(fx, base + SCALAR_LANE, 1)],
                c: [at(fx, base + l, W), at(fx, base + l + SCALAR_LANE, 1)],
            }
        } else {
            let (sw, s1) = (
                fx.fconst(init_value(*agg), W),
                fx.fconst(init_value(*agg), 1),
            );
            let (cw, c1) = (fx.fconst(0.0, W), fx.fconst(0.0, 1));
            Acc {
                s: [fx.vars(&sw), fx.vars(&s1)],
                c: [fx.vars(&cw), fx.vars(&c1)],
            }
        };
        accs.push(Some(a));
    }
    let st = St {
        out,
        n,
        ins,
        accs,
        nnz,
        matrix_cells: plan.matrix_cell_nodes(),
    };
    let (main, mstride, row0, csrp) = if csr {
        let o = offset_of!(KernelArgs, main_csr);
        let rp = fx.load_i64(args, o + offset_of!(CsrView, row_ptr))?;
        let ci = fx.load_i64(args, o + offset_of!(CsrView, col_idx))?;
        let va = fx.load_i64(args, o + offset_of!(CsrView, values))?;
        (va, n, n, Some((rp, ci)))
    } else {
        let (d, c, r0) = fx.dense_view(args, offset_of!(KernelArgs, main))?;
        (d, c, r0, None)
    };
    // As the LLVM backend: a body with a scalar helper call runs the scalar loop only (the
    // lanes its sums are kept in depend on this choice, so it must be the same).
    let widths: &[u32] = if plan.nodes.iter().any(|n| node_calls_helper(plan, n)) {
        &[1]
    } else if spec.kind == CellKind::NoAgg && plan.nodes.iter().any(maps_lanes) {
        &[WIDE, W, 1]
    } else {
        &[W, 1]
    };
    let jvar = fx.var(types::I64, zero_i);
    // Cells `0..len` of "row" `i` of a dense main input whose cell 0 is at `base`.
    let dense_cells =
        |fx: &mut Fx<'_>, i: Value, base: Value, len: Value| -> Result<(), CodegenError> {
            let z = fx.iconst(0);
            fx.b.def_var(jvar, z);
            for &w in widths {
                if w == W && spec.kind == CellKind::FullAgg {
                    // The whole steps of `FULL_AGG_VECTORS` vectors, vector `(j / W) % 4`
                    // of each into accumulator `j / W % 4` in the partial (the LLVM backend's
                    // lanes); the first vector's variables go there and come back around.
                    let group = FULL_AGG_VECTORS as i64 * i64::from(W);
                    let whole = fx.b.ins().band_imm_s(len, -group);
                    flush_first_vectors(fx, &st, true);
                    fx.for_var(jvar, whole, i64::from(W), &mut |fx, j| {
                        let idx = fx.iadd(base, j);
                        let a = fx.load(main, idx, w);
                        let lane = fx.b.ins().band_imm_s(j, group - 1);
                        let at = At { i, j, w, main: a };
                        element(fx, plan, spec, &st, at, None, Into::Partial(lane))
                    })?;
                    flush_first_vectors(fx, &st, false);
                }
                fx.for_var(jvar, len, i64::from(w), &mut |fx, j| {
                    let idx = fx.iadd(base, j);
                    let a = fx.load(main, idx, w);
                    element(
                        fx,
                        plan,
                        spec,
                        &st,
                        At { i, j, w, main: a },
                        None,
                        Into::Variables,
                    )
                })?;
            }
            Ok(())
        };
    let csr_lanes = csr
        && widths.len() > 1
        && matches!(spec.kind, CellKind::FullAgg | CellKind::RowAgg)
        && st.accs.iter().all(Option::is_some);
    if !csr && runs_flat(plan, spec.kind) {
        // Rows `[rl, ru)` as one stretch of `(ru - rl) * n` cells (`i` stays `rl`), as the
        // LLVM backend runs them: the same cells in the same lanes.
        let rows = fx.isub(ru, rl);
        let len = fx.imul(rows, n);
        let off = fx.isub(rl, row0);
        let base = fx.imul(off, mstride);
        dense_cells(fx, rl, base, len)?;
    } else {
        fx.for_range(rl, ru, &mut |fx, i| {
            if spec.kind == CellKind::RowAgg {
                for (k, (_, agg)) in spec.outs.iter().enumerate() {
                    if let (Some(a), Some(agg)) = (&st.accs[k], agg) {
                        for (w, x) in [(W, 0), (1, 1)] {
                            let s = fx.fconst(init_value(*agg), w);
                            let c = fx.fconst(0.0, w);
                            fx.set(&a.s[x], &s);
                            fx.set(&a.c[x], &c);
                        }
                    }
                }
            }
            match csrp {
                None => {
                    let r = fx.isub(i, row0);
                    let rowbase = fx.imul(r, mstride);
                    dense_cells(fx, i, rowbase, n)?;
                }
                Some((rp, ci)) => {
                    let pa = fx.elem_addr(rp, i);
                    let p0 = fx.b.ins().load(types::I64, super::fx::mem(), pa, 0);
                    let p1 = fx.b.ins().load(types::I64, super::fx::mem(), pa, 8);
                    // As the LLVM backend: aggregates in registers take the row's non-zeros
                    // `W` at a time into their vector lanes, then the rest one at a time.
                    fx.b.def_var(jvar, p0);
                    if csr_lanes {
                        fx.for_var(jvar, p1, i64::from(W), &mut |fx, pb| {
                            csr_group(fx, plan, spec, &st, main, ci, i, pb)
                        })?;
                    }
                    fx.for_var(jvar, p1, 1, &mut |fx, p| {
                        let j = csr_col(fx, ci, p);
                        let a = fx.load(main, p, 1);
                        element(
                            fx,
                            plan,
                            spec,
                            &st,
                            At {
                                i,
                                j,
                                w: 1,
                                main: a,
                            },
                            Some(p),
                            Into::Variables,
                        )
                    })?;
                }
            }
            if spec.kind == CellKind::RowAgg {
                for (k, (_, agg)) in spec.outs.iter().enumerate() {
                    if let (Some(a), Some(agg)) = (&st.accs[k], agg) {
                        let v = finish_lanes(fx, *agg, a);
                        fx.store(st.out, i, &v);
                    }
                }
            }
            Ok(())
        })?;
    }
    if spec.kind == CellKind::FullAgg {
        for (k, a) in st.accs.iter().enumerate() {
            if let Some(a) = a {
                let base = (k * 2 * FULL_LANES) as i64;
                let l = FULL_LANES as i64;
                for (slots, off, w) in [
                    (&a.s[0], base, W),
                    (&a.s[1], base + SCALAR_LANE, 1),
                    (&a.c[0], base + l, W),
                    (&a.c[1], base + l + SCALAR_LANE, 1),
                ] {
                    let v = fx.get(slots, w);
                    let idx = fx.iconst(off);
                    fx.store(out, idx, &v);
                }
            }
        }
    }
    // The non-zeros written (integers: any order gives the same total).
    let mut total = fx.b.use_var(st.nnz[1][0]);
    for &v in &st.nnz[0] {
        let x = fx.b.use_var(v);
        for l in 0..2 {
            let e = fx.b.ins().extractlane(x, l);
            total = fx.iadd(total, e);
        }
    }
    fx.b.ins().return_(&[total]);
    Ok(())
}

/// Combines a row's lanes in the LLVM backend's fixed order (vector lanes, then the tail).
fn finish_lanes(fx: &mut Fx<'_>, agg: AggKind, a: &Acc) -> V {
    let sw = fx.get(&a.s[0], W);
    let s1 = fx.get(&a.s[1], 1);
    let max = agg == AggKind::Max;
    if matches!(agg, AggKind::Min | AggKind::Max) {
        let mut r = fx.fconst(init_value(agg), 1);
        for l in 0..W {
            let x = fx.lane(&sw, l);
            let x = fx.splat(x, 1);
            r = fx.pick(max, &r, &x);
        }
        return fx.pick(max, &r, &s1);
    }
    let cw = fx.get(&a.c[0], W);
    let c1 = fx.get(&a.c[1], 1);
    let mut s = fx.fconst(0.0, 1);
    let mut c = fx.fconst(0.0, 1);
    // Kahan::merge: add the other sum, then its negated correction.
    let mut merge = |fx: &mut Fx<'_>, os: V, oc: V| {
        (s, c) = fx.kahan(&s, &c, &os);
        let neg = fx.fneg(&oc);
        (s, c) = fx.kahan(&s, &c, &neg);
    };
    for l in 0..W {
        let (os, oc) = (fx.lane(&sw, l), fx.lane(&cw, l));
        let (os, oc) = (fx.splat(os, 1), fx.splat(oc, 1));
        merge(fx, os, oc);
    }
    merge(fx, s1, c1);
    s
}

/// The column index of CSR position `p`.
fn csr_col(fx: &mut Fx<'_>, ci: Value, p: Value) -> Value {
    let off = fx.b.ins().ishl_imm_u(p, 2);
    let ja = fx.iadd(ci, off);
    fx.b.ins().uload32(super::fx::mem(), ja, 0)
}

/// `W` non-zeros of a CSR row from position `pb`, as the LLVM backend's `csr_group`: each
/// one's body as a scalar, lane `l` of each aggregate's vector taking non-zero `pb + l`.
#[allow(clippy::too_many_arguments)]
fn csr_group(
    fx: &mut Fx<'_>,
    plan: &CPlan,
    spec: &CellLike,
    st: &St,
    vals: Value,
    ci: Value,
    i: Value,
    pb: Value,
) -> Result<(), CodegenError> {
    let mut lanes: Vec<Vec<Value>> = vec![Vec::new(); spec.outs.len()];
    for l in 0..W {
        let off = fx.iconst(i64::from(l));
        let p = fx.iadd(pb, off);
        let j = csr_col(fx, ci, p);
        let a = fx.load(vals, p, 1);
        let mut body = Body::new(
            plan,
            &st.ins,
            &st.matrix_cells,
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
                fx.fmul(&v, &v)
            } else {
                v
            };
            lanes[k].push(x.parts[0]);
        }
    }
    for (k, &(_, agg)) in spec.outs.iter().enumerate() {
        let (Some(a), Some(agg)) = (&st.accs[k], agg) else {
            return Err(CodegenError::Internal(Internal::MalformedPlan(
                "aggregate without accumulator",
            )));
        };
        let x = fx.of_lanes(&lanes[k]);
        fold(fx, agg, a, 0, &x);
    }
    Ok(())
}

/// Folds `x` into accumulator `a`'s vector (`slot` 0) or scalar (1) lanes, as the LLVM
/// backend's `fold`.
fn fold(fx: &mut Fx<'_>, agg: AggKind, a: &Acc, slot: usize, x: &V) {
    let w = x.w;
    let s = fx.get(&a.s[slot], w);
    if matches!(agg, AggKind::Min | AggKind::Max) {
        let r = fx.pick(agg == AggKind::Max, &s, x);
        fx.set(&a.s[slot], &r);
    } else {
        let c = fx.get(&a.c[slot], w);
        let (s, c) = fx.kahan(&s, &c, x);
        fx.set(&a.s[slot], &s);
        fx.set(&a.c[slot], &c);
    }
}

/// Folds `x` into the `W` lanes of the task's partial at `at` (sums there, corrections
/// `FULL_LANES` on), as [`fold`] into variables.
fn fold_in_partial(fx: &mut Fx<'_>, agg: AggKind, out: Value, at: Value, x: &V) {
    let w = x.w;
    let s = fx.load(out, at, w);
    if matches!(agg, AggKind::Min | AggKind::Max) {
        let r = fx.pick(agg == AggKind::Max, &s, x);
        fx.store(out, at, &r);
    } else {
        let l = fx.iconst(FULL_LANES as i64);
        let cat = fx.iadd(at, l);
        let c = fx.load(out, cat, w);
        let (s, c) = fx.kahan(&s, &c, x);
        fx.store(out, cat, &c);
        fx.store(out, at, &s);
    }
}

/// Stores every full aggregate's first vector from its variables to the task's partial
/// (`to_partial`), or loads it back.
fn flush_first_vectors(fx: &mut Fx<'_>, st: &St, to_partial: bool) {
    for (k, a) in st.accs.iter().enumerate() {
        let Some(a) = a else { continue };
        let base = (k * 2 * FULL_LANES) as i64;
        for (vars, at) in [(&a.s[0], base), (&a.c[0], base + FULL_LANES as i64)] {
            let idx = fx.iconst(at);
            if to_partial {
                let v = fx.get(vars, W);
                fx.store(st.out, idx, &v);
            } else {
                let v = fx.load(st.out, idx, W);
                fx.set(vars, &v);
            }
        }
    }
}

fn element(
    fx: &mut Fx<'_>,
    plan: &CPlan,
    spec: &CellLike,
    st: &St,
    at: At,
    p: Option<Value>,
    into: Into,
) -> Result<(), CodegenError> {
    let w = at.w;
    let (i, j) = (at.i, at.j);
    let mut body = Body::new(plan, &st.ins, &st.matrix_cells, at);
    for (k, &(node, agg)) in spec.outs.iter().enumerate() {
        let v = body.emit(fx, node, spec.transposed)?;
        let Some(agg) = agg else {
            // No aggregation: write the cell (CSR: at the non-zero's position) and count it.
            let idx = match p {
                Some(p) => p,
                None => {
                    let r = fx.imul(i, st.n);
                    fx.iadd(r, j)
                }
            };
            fx.store(st.out, idx, &v);
            let z = fx.fconst(0.0, w);
            let nz = fx.fcmp(FloatCC::NotEqual, &v, &z);
            fx.count(&st.nnz[wi(w)], &nz);
            continue;
        };
        let x = if agg == AggKind::SumSq {
            fx.fmul(&v, &v)
        } else {
            v
        };
        let max = agg == AggKind::Max;
        let minmax = matches!(agg, AggKind::Min | AggKind::Max);
        match (spec.kind, &st.accs[k]) {
            (CellKind::ColAgg, _) => {
                if minmax {
                    let cur = fx.load(st.out, j, w);
                    let r = fx.pick(max, &cur, &x);
                    fx.store(st.out, j, &r);
                } else {
                    // Partial layout: n sums, then n corrections.
                    let cj = fx.iadd(st.n, j);
                    let s = fx.load(st.out, j, w);
                    let c = fx.load(st.out, cj, w);
                    let (s, c) = fx.kahan(&s, &c, &x);
                    fx.store(st.out, cj, &c);
                    fx.store(st.out, j, &s);
                }
            }
            (_, Some(a)) => match into {
                Into::Variables => fold(fx, agg, a, wi(w), &x),
                Into::Partial(lane) => {
                    let base = fx.iconst((k * 2 * FULL_LANES) as i64);
                    let at = fx.iadd(base, lane);
                    fold_in_partial(fx, agg, st.out, at, &x)
                }
            },
            _ => {
                return Err(CodegenError::Internal(Internal::MalformedPlan(
                    "aggregate without accumulator",
                )))
            }
        }
    }
    Ok(())
}
